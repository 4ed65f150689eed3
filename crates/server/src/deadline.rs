//! Timeouts that cost nothing when the operation does not wait.
//!
//! `tokio::time::timeout` reads the clock and makes a timer entry as soon as it is created.
//! Most socket operations on the hot path complete at their first poll (a write into a socket
//! buffer with room, a read of bytes already there), so [`within`] polls the operation once
//! first and only arms the timeout when it has to wait. The timeout's meaning is unchanged: it
//! bounds the wait, which starts at that first `Pending`.

use std::future::Future;
use std::pin::pin;
use std::task::Poll;
use std::time::Duration;

/// The waited-for operation did not complete within its time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Elapsed;

/// Runs `f`, failing with [`Elapsed`] if it waits longer than `limit`.
pub async fn within<F: Future>(limit: Duration, f: F) -> Result<F::Output, Elapsed> {
    let mut f = pin!(f);
    let first = std::future::poll_fn(|cx| Poll::Ready(f.as_mut().poll(cx))).await;
    match first {
        Poll::Ready(v) => Ok(v),
        Poll::Pending => tokio::time::timeout(limit, f).await.map_err(|_| Elapsed),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rt() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .unwrap()
    }

    #[test]
    fn ready_at_once_needs_no_timer() {
        // A zero limit would fail any wait: an operation that does not wait still succeeds.
        let v = rt().block_on(within(Duration::ZERO, async { 7 }));
        assert_eq!(v, Ok(7));
    }

    #[test]
    fn a_wait_longer_than_the_limit_fails() {
        let r = rt().block_on(async {
            within(
                Duration::from_millis(20),
                tokio::time::sleep(Duration::from_secs(5)),
            )
            .await
        });
        assert_eq!(r, Err(Elapsed));
    }

    #[test]
    fn a_wait_within_the_limit_succeeds() {
        let r = rt().block_on(within(Duration::from_secs(5), async {
            tokio::time::sleep(Duration::from_millis(10)).await;
            3
        }));
        assert_eq!(r, Ok(3));
    }
}
