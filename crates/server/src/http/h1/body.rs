//! Request bodies on an HTTP/1 connection: read whole to be passed upstream (memory up to
//! `client_body_buffer_size`, then an unlinked temporary file), streamed as they arrive
//! (`proxy_request_buffering off`), or discarded (a body nobody reads: what has arrived before
//! the answer, the rest after it within nginx's lingering bounds). `client_max_body_size` holds
//! for chunked bodies while they are decoded; `client_body_timeout` bounds each wait.

use std::time::{Duration, Instant};

use shoal_http::{BodyChunk, BodyKind};

use super::Conn;
use crate::http::output::Sink;
use crate::http::proxy::body::RequestBody;
use crate::http::transport::READ_CHUNK;
use crate::http::LocConf;
use crate::log::Level;

/// How reading (or discarding) a request body ended.
pub(super) enum Discard {
    Done,
    /// The body's framing is broken (a bad chunk): 400.
    Invalid,
    /// A chunked body went over `client_max_body_size`: 413. What came before the chunk that
    /// went over, and that chunk's size (for nginx's log line).
    TooLarge(u64, u64),
    /// The client went away: close (nginx logs the request with 400).
    Gone,
    /// The client sent nothing for `client_body_timeout`: close without an answer (nginx
    /// logs the request with 408).
    TimedOut,
    /// Nothing more is in the read buffer: the rest is discarded after the answer (with the
    /// decoder that has read so far).
    Later(shoal_http::BodyDecoder),
}

impl Conn {
    /// Reads a request body whole, to pass it upstream: in memory up to
    /// `client_body_buffer_size` (default 16k), beyond it in an unlinked temporary file.
    pub(super) async fn read_body(
        &mut self,
        kind: BodyKind,
        lc: &LocConf,
    ) -> std::io::Result<Result<RequestBody<'static>, Discard>> {
        use std::io::Write;
        let limit = lc.client_body_buffer_size.unwrap_or(16 * 1024);
        let mut memory: Vec<u8> = Vec::new();
        let mut file: Option<(std::fs::File, u64)> = None;
        let max = lc.client_max_body_size();
        let end = self
            .read_body_pieces(kind, max, lc.client_body_timeout(), |data| {
                if file.is_none() && (memory.len() + data.len()) as u64 > limit {
                    let mut f = shoal_io::file::unlinked_temp_file(&std::env::temp_dir())?;
                    f.write_all(&memory)?;
                    file = Some((f, memory.len() as u64));
                    memory = Vec::new();
                }
                match &mut file {
                    Some((f, n)) => {
                        f.write_all(&data)?;
                        *n += data.len() as u64;
                    }
                    None => memory.extend_from_slice(&data),
                }
                Ok(())
            })
            .await?;
        Ok(match end {
            Discard::Done => Ok(match file {
                Some((f, n)) => RequestBody::File(f, n),
                None => RequestBody::Memory(memory.into()),
            }),
            other => Err(other),
        })
    }

    /// Reads a request body to its end, handing each piece to `keep`; how the reading ended
    /// (`Done`, a broken framing, a chunked body over `max` (`client_max_body_size`), a client
    /// gone or silent for `timeout`).
    async fn read_body_pieces(
        &mut self,
        kind: BodyKind,
        max: u64,
        timeout: Duration,
        mut keep: impl FnMut(bytes::Bytes) -> std::io::Result<()>,
    ) -> std::io::Result<Discard> {
        let Ok(mut d) = shoal_http::BodyDecoder::new(kind, max) else {
            return Ok(Discard::Invalid);
        };
        loop {
            match d.decode_buf(&mut self.buf) {
                Ok(BodyChunk::Done) => return Ok(Discard::Done),
                Ok(BodyChunk::Data(data)) => {
                    keep(data)?;
                    continue;
                }
                Ok(BodyChunk::NeedMore) => {}
                Err(e) => return Ok(body_error(&d, e)),
            }
            self.buf.reserve(READ_CHUNK);
            let read = tokio::time::timeout(timeout, self.stream.read_buf(&mut self.buf)).await;
            match read {
                Ok(Ok(0)) => return Ok(Discard::Gone),
                Err(_) => return Ok(Discard::TimedOut),
                Ok(Ok(_)) => {}
                Ok(Err(e)) => return Err(e),
            }
        }
    }

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
                Err(e) => return body_error(&d, e),
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
                Discard::Invalid | Discard::TooLarge(..) | Discard::Gone | Discard::TimedOut => {
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

/// What a body decoder's error means for the request: 413 for a chunk over
/// `client_max_body_size`, else a broken framing (400).
fn body_error(d: &shoal_http::BodyDecoder, e: shoal_http::Error) -> Discard {
    match (e.kind(), d.oversize()) {
        (shoal_http::ErrorKind::PayloadTooLarge, Some((before, size))) => {
            Discard::TooLarge(before, size)
        }
        _ => Discard::Invalid,
    }
}
