//! Request bodies nobody reads on an HTTP/1 connection: discarded, what has arrived before the
//! answer, the rest after it within nginx's lingering bounds (no size limit applies, as in
//! nginx). A body a handler reads is `client_body/`'s.

use std::time::Instant;

use shoal_http::{BodyChunk, BodyKind};

use super::Conn;
use crate::http::output::Sink;
use crate::http::transport::READ_CHUNK;
use crate::http::LocConf;
use crate::log::Level;

/// How discarding a request body nobody reads went.
pub(super) enum Discard {
    Done,
    /// The body's framing is broken (a bad chunk): 400.
    Invalid,
    /// Nothing more is in the read buffer: the rest is discarded after the answer (with the
    /// decoder that has read so far).
    Later(shoal_http::BodyDecoder),
}

impl Conn {
    /// Drops what has arrived of a request body nobody reads, without waiting for more
    /// (nginx's `ngx_http_discard_request_body` before the answer): `Later` with the decoder
    /// when the rest is still to come. No size limit applies, as in nginx: the wait for the
    /// rest is bounded by time instead (see [`Conn::discard_after_answer`]).
    pub(super) fn discard_now(&mut self, kind: BodyKind) -> Discard {
        let Ok(d) = shoal_http::BodyDecoder::new(kind, 0) else {
            return Discard::Invalid;
        };
        self.discard_buffered(d)
    }

    /// Drops the body bytes in the read buffer.
    fn discard_buffered(&mut self, mut d: shoal_http::BodyDecoder) -> Discard {
        loop {
            match d.decode_buf(&mut self.buf) {
                Ok(BodyChunk::Done) => return Discard::Done,
                Ok(BodyChunk::Data(_)) => {}
                Ok(BodyChunk::NeedMore) => return Discard::Later(d),
                Err(_) => return Discard::Invalid,
            }
        }
    }

    /// The rest of a discarded body, after the answer: read and dropped for at most
    /// `lingering_time`, each wait at most `lingering_timeout` (nginx's bounds there, not
    /// `client_body_timeout`). Returns whether it ended in time, so the connection can serve
    /// its next request.
    pub(super) async fn discard_after_answer(
        &mut self,
        mut d: shoal_http::BodyDecoder,
        lc: &LocConf,
    ) -> std::io::Result<bool> {
        let deadline = Instant::now() + lc.lingering_time();
        loop {
            d = match self.discard_buffered(d) {
                Discard::Done => return Ok(true),
                Discard::Later(d) => d,
                Discard::Invalid => {
                    crate::conn_log!(
                        Level::Info,
                        self.info.number,
                        "client sent invalid chunked body, client: {}",
                        self.info.client()
                    );
                    return Ok(false);
                }
            };
            // The answer goes out before the wait.
            self.flush().await?;
            let wait = lc
                .lingering_timeout()
                .min(deadline.saturating_duration_since(Instant::now()));
            if wait.is_zero() {
                return Ok(false);
            }
            if self.buf.capacity() - self.buf.len() < 1024 {
                self.buf.reserve(READ_CHUNK);
            }
            match tokio::time::timeout(wait, self.stream.read_buf(&mut self.buf)).await {
                Ok(Ok(n)) if n > 0 => {}
                // Silent past the bound, closed, or an error: the connection ends here.
                _ => return Ok(false),
            }
        }
    }
}
