//! The upstream's answer head, through the codec (`shoal_http::upstream`), in the shape the
//! proxy passes on: the status line, the headers as text, how the body ends and whether the
//! connection can carry another request.

use bytes::BytesMut;
use shoal_http::upstream::{self, Framing as CodecFraming, Rules, UpstreamRequest};

use super::body::Framing;

/// A head read from an upstream.
pub struct Parsed {
    pub status: u16,
    /// The reason phrase when it is not the standard one for the status.
    pub reason: Option<String>,
    /// The head as received (headers are passed on from it).
    pub head: upstream::UpstreamHead,
    pub framing: Framing,
    /// `Content-Length`, for the client's head.
    pub content_length: Option<u64>,
    /// The connection may carry another request once the body is read.
    pub reusable: bool,
    /// A 101 to a client that asked to upgrade: the connections become a tunnel.
    pub upgrade: bool,
    /// Bytes of the head.
    pub consumed: usize,
}

impl Parsed {
    /// An interim answer (100 Continue, 102 Processing, 103 Early Hints, any 1xx but a 101):
    /// the final one follows on the same connection. nginx 1.22 took one for the answer and
    /// its final head for body bytes; it is skipped here, as later nginx skips it.
    pub fn is_interim(&self) -> bool {
        (100..200).contains(&self.status) && self.status != 101
    }
}

/// Parses the head at the start of `buf` (split off it on success). `max` is
/// `proxy_buffer_size`; `Ok(None)`: more bytes are needed. An error is nginx's log text.
pub fn head(
    buf: &mut BytesMut,
    max: usize,
    request: UpstreamRequest,
) -> Result<Option<Parsed>, String> {
    let head = match upstream::parse_upstream_head_buf(buf, max, Rules::Nginx122) {
        Ok(Some(h)) => h,
        Ok(None) => return Ok(None),
        Err(e) => return Err(e.to_string()),
    };
    let framing = upstream::framing(&head, request);
    let (framing, upgrade) = match framing {
        CodecFraming::None => (Framing::None, false),
        CodecFraming::Length(n) => (Framing::Length(n), false),
        CodecFraming::Chunked => (Framing::Chunked, false),
        CodecFraming::Close => (Framing::Close, false),
        CodecFraming::Tunnel => (Framing::Close, true),
    };
    let status = head.status();
    let standard = shoal_http::status::status_line(status).and_then(|l| l.get(4..));
    // The status line passes as sent (an empty reason too: `HTTP/1.1 200`); the standard one
    // needs no copy.
    let reason = (standard.map(str::as_bytes) != Some(head.reason()))
        .then(|| shoal_http::lossy(head.reason()).into_owned());
    let reusable = !upgrade
        && head.keep_alive()
        && matches!(
            framing,
            Framing::None | Framing::Length(_) | Framing::Chunked
        );
    Ok(Some(Parsed {
        status,
        reason,
        framing,
        content_length: head.content_length(),
        reusable,
        upgrade,
        consumed: head.head_len(),
        head,
    }))
}
