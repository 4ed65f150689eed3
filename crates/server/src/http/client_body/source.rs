//! Where a request body's bytes come from: an HTTP/1 connection's read buffer and socket, or
//! an HTTP/2 stream's DATA frames; each piece decoded (`Content-Length` or chunked) and each
//! wait bounded by `client_body_timeout`.

use std::time::Duration;

use bytes::{Bytes, BytesMut};
use shoal_http::{BodyChunk, BodyDecoder};

use super::Failure;
use crate::http::transport::{Transport, READ_CHUNK};

/// Where an HTTP/1 request's body comes from: what follows its head in the connection's read
/// buffer, then the socket; `out` and `send_timeout` answer `Expect: 100-continue`.
pub struct H1Source<'a> {
    pub buf: &'a mut BytesMut,
    pub stream: &'a Transport,
    pub out: &'a mut BytesMut,
    pub send_timeout: Duration,
    pub expect_continue: bool,
}

/// Where an HTTP/2 request's body comes from: its stream's DATA frames, each window given
/// back to the client once the frame is taken (so `http2_body_preread_size` is what a stream
/// may have in flight). A body without `content-length` is handed to the decoder as chunks, so
/// `client_max_body_size` holds for it as for a chunked HTTP/1 body.
pub struct H2Source {
    pub recv: crate::http::h2::wire::RecvStream,
    /// Frames taken, not decoded yet (chunk-framed for a body of unknown length).
    pub buf: BytesMut,
    pub chunked: bool,
    /// The stream's end was seen.
    pub ended: bool,
}

/// A body's source: an HTTP/1 connection or an HTTP/2 stream.
pub enum Source<'a> {
    H1(H1Source<'a>),
    H2(H2Source),
}

/// The next piece of body from the buffer, reading the socket (or the stream) when it has
/// none (each wait bounded by `timeout`).
pub(super) async fn next(
    d: &mut BodyDecoder,
    src: &mut Source<'_>,
    timeout: Duration,
) -> Result<Option<Bytes>, Failure> {
    match src {
        Source::H1(src) => next_h1(d, src, timeout).await,
        Source::H2(src) => next_h2(d, src, timeout).await,
    }
}

/// [`next`] from an HTTP/2 stream: a DATA frame at a time, its window given back at once.
async fn next_h2(
    d: &mut BodyDecoder,
    src: &mut H2Source,
    timeout: Duration,
) -> Result<Option<Bytes>, Failure> {
    loop {
        match d.decode_buf(&mut src.buf) {
            Ok(BodyChunk::Data(data)) => return Ok(Some(data)),
            Ok(BodyChunk::Done) => return Ok(None),
            Ok(BodyChunk::NeedMore) => {}
            Err(e) => return Err(decode_failure(d, e)),
        }
        if src.ended {
            // Fewer bytes than `content-length` said (the h2 layer resets such a stream).
            return Err(Failure::Gone);
        }
        match crate::deadline::within(timeout, src.recv.data()).await {
            Err(_) => return Err(Failure::TimedOut),
            Ok(None) => {
                // Trailers may end the stream (passed on nowhere, as nginx's).
                let _ = crate::deadline::within(timeout, src.recv.trailers()).await;
                src.ended = true;
                if src.chunked {
                    src.buf.extend_from_slice(shoal_http::response::LAST_CHUNK);
                }
            }
            Ok(Some(Ok(data))) => {
                src.recv.release_capacity(data.len());
                if src.chunked {
                    if !data.is_empty() {
                        shoal_http::response::write_chunk(&mut src.buf, &data);
                    }
                } else {
                    src.buf.extend_from_slice(&data);
                }
            }
            Ok(Some(Err(_))) if src.recv.refused() => return Err(Failure::Refused),
            Ok(Some(Err(_))) => return Err(Failure::Gone),
        }
    }
}

/// [`next`] from an HTTP/1 connection's buffer and socket.
async fn next_h1(
    d: &mut BodyDecoder,
    src: &mut H1Source<'_>,
    timeout: Duration,
) -> Result<Option<Bytes>, Failure> {
    loop {
        match d.decode_buf(src.buf) {
            Ok(BodyChunk::Data(data)) => return Ok(Some(data)),
            Ok(BodyChunk::Done) => return Ok(None),
            Ok(BodyChunk::NeedMore) => {}
            Err(e) => return Err(decode_failure(d, e)),
        }
        if src.buf.capacity() - src.buf.len() < 4096 {
            src.buf.reserve(READ_CHUNK);
        }
        let (stream, buf) = (src.stream, &mut *src.buf);
        let read = crate::deadline::within(timeout, async {
            loop {
                stream.readable().await?;
                match stream.try_read_buf(buf) {
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => continue,
                    other => return other,
                }
            }
        })
        .await;
        match read {
            Ok(Ok(n)) if n > 0 => {}
            Ok(_) => return Err(Failure::Gone),
            Err(_) => return Err(Failure::TimedOut),
        }
    }
}

/// What a decoder's error means: 413 for a chunk over `client_max_body_size`, else broken
/// framing.
fn decode_failure(d: &BodyDecoder, e: shoal_http::Error) -> Failure {
    match (e.kind(), d.oversize()) {
        (shoal_http::ErrorKind::PayloadTooLarge, Some(chunk)) => Failure::TooLarge {
            length: None,
            chunk: Some(chunk),
        },
        _ => Failure::Invalid,
    }
}
