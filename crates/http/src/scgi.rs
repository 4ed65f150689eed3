//! The SCGI request as nginx 1.22 sends it: a netstring (`LEN:...,`) of NUL-terminated names
//! and values, `CONTENT_LENGTH` first with the body's length, then the params in order (the
//! `SCGI 1` pair the protocol asks for comes from `scgi_params`, as in nginx); the body follows
//! as it is. nginx sets no size limit.
//!
//! A NUL inside a name or value would end it early and let the rest pass as more params (a
//! value from the client could forge `REMOTE_USER`); nginx sends it anyway, shoal refuses the
//! request instead ([`ParamHoldsNul`]).
//!
//! The answer: an HTTP status line and headers, or CGI header lines with `Status`
//! ([`crate::cgi::CgiHeadParser::http_or_cgi`]), the body up to the close or the
//! `Content-Length` ([`crate::cgi::framing`]); the connection is never reused.
//! No sockets here: bytes out, and the answer is the [`crate::cgi`] room's.

use std::fmt;

use bytes::{BufMut, BytesMut};

use crate::log::{write_bytes, Level};

/// The headers nginx does not pass from an SCGI answer to the client (unless
/// `scgi_pass_header` says so).
pub const HIDDEN_HEADERS: &[&str] = &[
    "Status",
    "X-Accel-Expires",
    "X-Accel-Redirect",
    "X-Accel-Limit-Rate",
    "X-Accel-Buffering",
    "X-Accel-Charset",
];

/// A name or value with a NUL byte: it cannot be sent (shoal's refusal, not nginx's: a 500).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ParamHoldsNul {
    /// The param's name.
    pub name: Vec<u8>,
}

impl ParamHoldsNul {
    /// Logged at `error`.
    pub fn level(&self) -> Level {
        Level::Error
    }
}

impl fmt::Display for ParamHoldsNul {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("scgi param \"")?;
        write_bytes(f, &self.name)?;
        f.write_str("\" holds a NUL byte")
    }
}

impl std::error::Error for ParamHoldsNul {}

/// Appends the netstring to `out` (the body of `content_length` bytes goes after, as it is).
/// Nothing is written when a param holds a NUL.
pub fn request_head<'a, I>(
    out: &mut BytesMut,
    content_length: u64,
    params: I,
) -> Result<(), ParamHoldsNul>
where
    I: IntoIterator<Item = (&'a [u8], &'a [u8])>,
    I::IntoIter: Clone,
{
    let params = params.into_iter();
    let length = content_length.to_string();
    let mut len = b"CONTENT_LENGTH".len() + 1 + length.len() + 1;
    for (name, value) in params.clone() {
        if name.contains(&0) || value.contains(&0) {
            return Err(ParamHoldsNul {
                name: name.to_vec(),
            });
        }
        len = len.saturating_add(name.len() + value.len() + 2);
    }
    let prefix = format!("{len}:");
    out.reserve(prefix.len() + len + 1);
    out.put_slice(prefix.as_bytes());
    out.put_slice(b"CONTENT_LENGTH\0");
    out.put_slice(length.as_bytes());
    out.put_u8(0);
    for (name, value) in params {
        out.put_slice(name);
        out.put_u8(0);
        out.put_slice(value);
        out.put_u8(0);
    }
    out.put_u8(b',');
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn netstring_as_nginx_sends_it() {
        let mut out = BytesMut::new();
        request_head(
            &mut out,
            3,
            [
                (&b"REQUEST_METHOD"[..], &b"POST"[..]),
                (b"SCGI", b"1"),
                (b"SERVER_NAME", b""),
            ],
        )
        .unwrap();
        let inner =
            b"CONTENT_LENGTH\x003\x00REQUEST_METHOD\x00POST\x00SCGI\x001\x00SERVER_NAME\x00\x00";
        let want = [format!("{}:", inner.len()).as_bytes(), inner, b","].concat();
        assert_eq!(&out[..], &want[..]);
        // No body: CONTENT_LENGTH 0, as nginx sends it for a GET.
        let mut out = BytesMut::new();
        request_head(&mut out, 0, std::iter::empty()).unwrap();
        assert_eq!(&out[..], b"17:CONTENT_LENGTH\x000\x00,");
    }

    #[test]
    fn a_nul_is_refused() {
        let mut out = BytesMut::new();
        let e = request_head(
            &mut out,
            0,
            [(&b"HTTP_X"[..], &b"a\0REMOTE_USER\0admin"[..])],
        )
        .unwrap_err();
        assert_eq!(e.to_string(), "scgi param \"HTTP_X\" holds a NUL byte");
        assert!(out.is_empty());
    }
}
