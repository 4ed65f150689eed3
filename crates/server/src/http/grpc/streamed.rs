//! An HTTP/1 client's chunked body on its way to a gRPC upstream: each piece goes as DATA
//! frames as it is decoded, END_STREAM after the last chunk, as nginx's grpc module sends a
//! body it does not buffer (`request_body_no_buffering`). `client_max_body_size` is the
//! chunked decoder's, as for any HTTP/1 body streamed upstream: a chunk that would pass it
//! is not read, the upstream's stream is reset, and the call ends with 413 (logged as nginx
//! logs a chunked body too large).
//!
//! The body goes while the answer's head is awaited. An answer that comes first waits for
//! the rest of the body (an HTTP/1 connection sends its answer once its request is read),
//! unless it ended the call already (a trailers-only answer): then the rest is not read.
//! An HTTP/2 client's body is relayed by [`super::body::pump`] on a task of its own.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use shoal_http2::frame::Reason;

use super::wire::SendStream;

use crate::http::client_body::{ClientBody, Failure};

/// The body's relay to the upstream while it runs (`None` once it ended): what it ends with
/// is the client's failure, if the client failed (`None` when the body went whole, or when
/// the upstream's stream failed: waiting for its answer tells how).
pub struct Pump<'p>(Option<Pin<Box<dyn Future<Output = Option<Failure>> + 'p>>>);

impl<'p> Pump<'p> {
    /// Starts relaying `body` to `to`, each wait for the upstream's window bounded by
    /// `send_timeout` (each wait for the client by the body's `client_body_timeout`).
    pub fn start(body: &'p ClientBody<'_>, to: SendStream, send_timeout: Duration) -> Self {
        Pump(Some(Box::pin(relay(body, to, send_timeout))))
    }

    /// Whether it still runs.
    pub fn running(&self) -> bool {
        self.0.is_some()
    }

    /// Moves it on; ready once it ended (and every time after), with the client's failure.
    pub fn poll_end(&mut self, cx: &mut Context<'_>) -> Poll<Option<Failure>> {
        let Some(f) = self.0.as_mut() else {
            return Poll::Ready(None);
        };
        let end = f.as_mut().poll(cx);
        if end.is_ready() {
            self.0 = None;
        }
        end
    }

    /// Runs it to its end.
    pub async fn finish(&mut self) -> Option<Failure> {
        std::future::poll_fn(|cx| self.poll_end(cx)).await
    }
}

async fn relay(
    body: &ClientBody<'_>,
    mut to: SendStream,
    send_timeout: Duration,
) -> Option<Failure> {
    loop {
        match body.next_piece().await {
            Ok(Some(d)) => {
                if !super::body::send_data(&mut to, d, send_timeout, false).await {
                    return None;
                }
            }
            Ok(None) => {
                let _ = to.send_data(Bytes::new(), true);
                return None;
            }
            Err(f) => {
                to.send_reset(Reason::CANCEL);
                return Some(f);
            }
        }
    }
}
