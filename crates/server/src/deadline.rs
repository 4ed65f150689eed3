//! Timeouts that cost nothing when the operation does not wait.
//!
//! `tokio::time::timeout` reads the clock and makes a timer entry as soon as it is created.
//! Most socket operations on the hot path complete at their first poll (a write into a socket
//! buffer with room, a read of bytes already there), so [`within`] polls the operation once
//! first and only arms the timeout when it has to wait. The timeout's meaning is unchanged: it
//! bounds the wait, which starts at that first `Pending`.
//!
//! Something that waits again and again (an upstream connection: a read per answer) keeps a
//! [`Timer`]: one timer entry for its life, moved rather than re-made, so a wait costs a clock
//! read and no registration in the runtime's timer wheel (nor its removal when the wait ends).

use std::future::Future;
use std::pin::{pin, Pin};
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::time::{Instant, Sleep};

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

/// A timer for successive waits of one owner, each bounded by its own limit (nginx's
/// `proxy_read_timeout`: the time between two successive reads).
///
/// Its runtime entry is made at the first wait that needs it and kept. A wait whose deadline
/// is later than the entry's leaves the entry as it is (re-arming it costs more than the
/// wake-up it saves): when it fires before the wait's own deadline, it is re-armed to that
/// deadline and the wait goes on. A wait with an earlier deadline re-arms it at once.
#[derive(Default)]
pub struct Timer {
    sleep: Option<Pin<Box<Sleep>>>,
}

impl Timer {
    pub const fn new() -> Timer {
        Timer { sleep: None }
    }

    /// Runs `f`, failing with [`Elapsed`] if it waits longer than `limit` (the wait starts at
    /// its first `Pending`, as with [`within`]).
    pub async fn within<F: Future>(&mut self, limit: Duration, f: F) -> Result<F::Output, Elapsed> {
        let mut f = pin!(f);
        let mut deadline = None;
        std::future::poll_fn(|cx| {
            if let Poll::Ready(v) = f.as_mut().poll(cx) {
                return Poll::Ready(Ok(v));
            }
            let d = *deadline.get_or_insert_with(|| Instant::now().checked_add(limit));
            match d {
                Some(d) => self.poll_until(d, cx).map(|()| Err(Elapsed)),
                // Beyond what the clock can say: no limit.
                None => Poll::Pending,
            }
        })
        .await
    }

    /// Ready once `deadline` has passed; until then the task is woken when it does.
    fn poll_until(&mut self, deadline: Instant, cx: &mut Context<'_>) -> Poll<()> {
        let sleep = match &mut self.sleep {
            Some(s) => {
                if s.deadline() > deadline {
                    s.as_mut().reset(deadline);
                }
                s
            }
            None => self
                .sleep
                .insert(Box::pin(tokio::time::sleep_until(deadline))),
        };
        loop {
            std::task::ready!(sleep.as_mut().poll(cx));
            if sleep.deadline() >= deadline {
                return Poll::Ready(());
            }
            // An earlier wait's deadline: this one's is later.
            sleep.as_mut().reset(deadline);
        }
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

    fn paused() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .start_paused(true)
            .build()
            .unwrap()
    }

    /// A future that completes after `d` (the paused clock advances by itself).
    async fn after(d: Duration) -> u32 {
        tokio::time::sleep(d).await;
        1
    }

    #[test]
    fn a_timer_bounds_each_wait_and_is_made_once() {
        paused().block_on(async {
            let mut t = Timer::new();
            assert_eq!(t.within(Duration::ZERO, async { 5 }).await, Ok(5));
            assert!(t.sleep.is_none(), "no wait, no timer entry");
            let s = Duration::from_secs(1);
            assert_eq!(t.within(5 * s, after(3 * s)).await, Ok(1));
            let entry: *const Sleep = &**t.sleep.as_ref().unwrap();
            assert_eq!(t.within(5 * s, after(10 * s)).await, Err(Elapsed));
            assert_eq!(t.within(5 * s, after(4 * s)).await, Ok(1));
            let again: *const Sleep = &**t.sleep.as_ref().unwrap();
            assert_eq!(entry, again, "the same entry, re-armed");
        });
    }

    #[test]
    fn a_later_deadline_outlives_the_entry_it_was_left_at() {
        // The entry stays at the first wait's deadline (t = 5 s); the second wait, begun at
        // t = 1 s, may last until t = 6 s: the entry fires at 5 s and must not end it.
        paused().block_on(async {
            let s = Duration::from_secs(1);
            let mut t = Timer::new();
            assert_eq!(t.within(5 * s, after(s)).await, Ok(1));
            let start = Instant::now();
            assert_eq!(t.within(5 * s, after(4 * s + s / 2)).await, Ok(1));
            assert!(start.elapsed() >= 4 * s);
            // And a wait beyond its own limit still fails at its limit.
            let start = Instant::now();
            assert_eq!(t.within(5 * s, after(60 * s)).await, Err(Elapsed));
            let waited = start.elapsed();
            assert!(waited >= 5 * s && waited < 6 * s, "{waited:?}");
        });
    }

    #[test]
    fn an_earlier_deadline_re_arms_at_once() {
        // A long limit's wait, then a short one: the short one fails at its own limit, not at
        // the entry's deadline (a minute on).
        paused().block_on(async {
            let s = Duration::from_secs(1);
            let mut t = Timer::new();
            assert_eq!(t.within(60 * s, after(s)).await, Ok(1));
            let start = Instant::now();
            assert_eq!(t.within(2 * s, after(30 * s)).await, Err(Elapsed));
            let waited = start.elapsed();
            assert!(waited >= 2 * s && waited < 3 * s, "{waited:?}");
        });
    }

    #[test]
    fn a_wait_given_up_leaves_the_timer_usable() {
        // A wait dropped half-way (its select lost), then a new one with its own limit.
        paused().block_on(async {
            let s = Duration::from_secs(1);
            let mut t = Timer::new();
            tokio::select! {
                _ = t.within(10 * s, after(60 * s)) => panic!("the other branch is first"),
                _ = tokio::time::sleep(s) => {}
            }
            let start = Instant::now();
            assert_eq!(t.within(3 * s, after(60 * s)).await, Err(Elapsed));
            let waited = start.elapsed();
            assert!(waited >= 3 * s && waited < 4 * s, "{waited:?}");
        });
    }
}
