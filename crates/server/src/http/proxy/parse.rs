//! The upstream's answer head, through the codec (`shoal_http::upstream`), in the shape the
//! proxy passes on: the status line, the headers as text, how the body ends and whether the
//! connection can carry another request.

use bytes::BytesMut;
use shoal_http::upstream::{self, Framing as CodecFraming, Rules, UpstreamRequest};

use crate::error::Error;
use crate::http::upstream::body::Framing;
use crate::http::upstream::protocol::{HeadDecoder, HeadError, Log, Parsed};

/// An HTTP answer's head: interim answers (100, 102, 103, any 1xx but a 101) are skipped,
/// their bytes counted against `proxy_buffer_size` with the final head's (so an upstream
/// cannot send them forever). nginx 1.22 took one for the answer and its final head for body
/// bytes; it is skipped here, as later nginx skips it.
pub struct HttpHead {
    pub asked: UpstreamRequest,
    interim: usize,
}

impl HttpHead {
    pub fn new(asked: UpstreamRequest) -> HttpHead {
        HttpHead { asked, interim: 0 }
    }
}

impl HeadDecoder for HttpHead {
    fn decode(
        &mut self,
        buf: &mut BytesMut,
        max: usize,
        _log: Log<'_>,
    ) -> Result<Option<Parsed>, HeadError> {
        loop {
            match head(buf, max.saturating_sub(self.interim), self.asked) {
                Ok(Some(p)) if (100..200).contains(&p.status) && p.status != 101 => {
                    self.interim += p.consumed;
                }
                Ok(Some(p)) => return Ok(Some(p)),
                Ok(None) => break,
                Err(message) => return Err(HeadError::Invalid(message.into())),
            }
        }
        if buf.len() + self.interim >= max {
            return Err(HeadError::Invalid("upstream sent too big header".into()));
        }
        Ok(None)
    }
}

/// Parses the head at the start of `buf` (split off it on success). `max` is
/// `proxy_buffer_size`; `Ok(None)`: more bytes are needed. An error is nginx's log text.
pub fn head(
    buf: &mut BytesMut,
    max: usize,
    request: UpstreamRequest,
) -> Result<Option<Parsed>, Error> {
    let head = match upstream::parse_upstream_head_buf(buf, max, Rules::Nginx122) {
        Ok(Some(h)) => h,
        Ok(None) => return Ok(None),
        Err(e) => return Err(Error::invalid(e.to_string())),
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
    // The status line passes as sent (an empty reason too: `HTTP/1.1 200`); the standard one
    // needs no copy.
    let reason = Parsed::reason_of(status, head.reason());
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
        codec: None,
        content_length: head.content_length(),
        reusable,
        upgrade,
        consumed: head.head_len(),
        head,
        intercept: false,
    }))
}
