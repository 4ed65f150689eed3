//! Sending the request: its first write (the head, with a small body), then a body that did
//! not fit in it, framed as the protocol frames it; each wait bounded by `*_send_timeout`.

use std::borrow::Cow;
use std::time::Duration;

use super::protocol::{BodyFraming, Encoded};
use crate::deadline::Timer;
use crate::http::client_body::{BodyToSend, Failure, Whole};
use crate::http::transport::Transport;

/// Why sending a request failed.
pub(crate) enum SendError {
    TimedOut,
    Io(std::io::Error),
    /// The client's body could not be read (streamed bodies).
    Client(Failure),
}

/// Writes `data`, each wait for the upstream bounded by `timeout`.
pub(crate) async fn write_timed(
    stream: &mut Transport,
    timer: &mut Timer,
    data: &[u8],
    timeout: Duration,
) -> Result<(), SendError> {
    let mut pos = 0;
    while pos < data.len() {
        match timer.within(timeout, stream.write(&data[pos..])).await {
            Err(_) => return Err(SendError::TimedOut),
            Ok(Err(e)) => return Err(SendError::Io(e)),
            Ok(Ok(0)) => return Err(SendError::Io(std::io::ErrorKind::WriteZero.into())),
            Ok(Ok(n)) => pos += n,
        }
    }
    Ok(())
}

/// A body up to this size goes in the request's first write, with the head.
const SMALL_BODY: usize = 64 * 1024;

/// Appends `piece` framed as `framing` frames a body.
fn frame(out: &mut Vec<u8>, framing: BodyFraming, piece: &[u8]) {
    match framing {
        BodyFraming::Raw => out.extend_from_slice(piece),
        BodyFraming::Chunked => shoal_http::response::write_chunk(out, piece),
        BodyFraming::FastcgiStdin => {
            let mut b = bytes::BytesMut::with_capacity(piece.len() + 64);
            shoal_http::fastcgi::encode::stdin(&mut b, piece);
            out.extend_from_slice(&b);
        }
    }
}

/// What ends a body framed as `framing`.
fn end(out: &mut Vec<u8>, framing: BodyFraming) {
    match framing {
        BodyFraming::Raw => {}
        BodyFraming::Chunked => out.extend_from_slice(shoal_http::response::LAST_CHUNK),
        BodyFraming::FastcgiStdin => {
            let mut b = bytes::BytesMut::with_capacity(8);
            shoal_http::fastcgi::encode::stdin_end(&mut b);
            out.extend_from_slice(&b);
        }
    }
}

/// The body that goes in the first write, if it all does.
fn small_body<'b>(e: &'b Encoded, body: &'b BodyToSend<'_, '_>) -> Option<&'b [u8]> {
    match (&e.set_body, e.send_body, body) {
        (Some(b), _, _) => Some(b),
        (None, true, BodyToSend::Whole(Whole::Memory(b))) if b.len() <= SMALL_BODY => Some(b),
        (None, true, BodyToSend::Whole(_) | BodyToSend::Streaming(..)) => None,
        (None, _, _) => Some(&[]),
    }
}

/// The request's first write: the head, with the body when the configuration gives it or it
/// is small and in memory, framed and ended (one write, so one segment for a small request).
pub(crate) fn first_write<'h>(e: &'h Encoded, body: &BodyToSend<'_, '_>) -> Cow<'h, [u8]> {
    let Some(b) = small_body(e, body) else {
        return Cow::Borrowed(&e.head);
    };
    if e.framing == BodyFraming::Raw {
        if b.is_empty() {
            return Cow::Borrowed(&e.head);
        }
        let mut all = Vec::with_capacity(e.head.len() + b.len());
        all.extend_from_slice(&e.head);
        all.extend_from_slice(b);
        return Cow::Owned(all);
    }
    let mut all = Vec::with_capacity(e.head.len() + b.len() + 64);
    all.extend_from_slice(&e.head);
    if !b.is_empty() {
        frame(&mut all, e.framing, b);
    }
    end(&mut all, e.framing);
    Cow::Owned(all)
}

/// Sends the request: the rest of its first write (`first`, of which `sent` bytes went out as
/// the connection was made), then a body that did not fit in it (from memory, the temporary
/// file, or the client as it arrives), framed as the protocol frames it.
// A streamed body is borrowed for the whole send: only this request's task touches it, and
// nothing else borrows it until the send is over.
#[allow(clippy::await_holding_refcell_ref, clippy::too_many_arguments)]
pub(crate) async fn send_request(
    stream: &mut Transport,
    timer: &mut Timer,
    first: &[u8],
    sent: usize,
    e: &Encoded,
    body: &BodyToSend<'_, '_>,
    timeout: Duration,
) -> Result<(), SendError> {
    write_timed(stream, timer, &first[sent..], timeout).await?;
    if small_body(e, body).is_some() {
        return Ok(());
    }
    // A body written after the head, in pieces: each goes out as written, not held back
    // until the previous one is acknowledged. (A request in one write needs no
    // `TCP_NODELAY`, and nginx sets none on upstream connections.)
    stream.set_nodelay();
    let framing = e.framing;
    let mut framed = Vec::new();
    let put = |piece: &[u8], framed: &mut Vec<u8>| -> bool {
        framed.clear();
        if framing == BodyFraming::Raw {
            return false;
        }
        frame(framed, framing, piece);
        true
    };
    match body {
        BodyToSend::Whole(Whole::Memory(b)) => {
            for piece in b.chunks(64 * 1024) {
                if put(piece, &mut framed) {
                    write_timed(stream, timer, &framed, timeout).await?;
                } else {
                    write_timed(stream, timer, piece, timeout).await?;
                }
            }
        }
        BodyToSend::Whole(Whole::File(f, len)) => {
            let mut off = 0u64;
            let mut chunk = vec![0u8; 64 * 1024];
            while off < *len {
                let want = ((*len - off) as usize).min(chunk.len());
                let n = std::os::unix::fs::FileExt::read_at(&**f, &mut chunk[..want], off)
                    .map_err(SendError::Io)?;
                if n == 0 {
                    return Err(SendError::Io(std::io::Error::from(
                        crate::error::Error::invalid("request body file shrank"),
                    )));
                }
                if put(&chunk[..n], &mut framed) {
                    write_timed(stream, timer, &framed, timeout).await?;
                } else {
                    write_timed(stream, timer, &chunk[..n], timeout).await?;
                }
                off += n as u64;
            }
        }
        BodyToSend::Streaming(s, _) => {
            while let Some(piece) = s.next_piece().await.map_err(SendError::Client)? {
                if put(&piece, &mut framed) {
                    write_timed(stream, timer, &framed, timeout).await?;
                } else {
                    write_timed(stream, timer, &piece, timeout).await?;
                }
            }
        }
        BodyToSend::None | BodyToSend::Whole(Whole::Announced(_)) => {}
    }
    framed.clear();
    end(&mut framed, framing);
    write_timed(stream, timer, &framed, timeout).await
}
