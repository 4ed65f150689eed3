//! The uwsgi request packet as nginx 1.22 sends it: a 4-byte header (`modifier1`, the vars'
//! size as a little-endian 16-bit number, `modifier2`), then each var as a little-endian 16-bit
//! length and the key, the same for the value; the request body follows as it is.
//!
//! The vars must fit the 16-bit size: nginx refuses more than 65535 bytes of them with
//! `[alert] uwsgi request is too big: N` and a 500, and so does [`request_head`].
//!
//! The answer is read like an SCGI answer: an HTTP status line and headers, or CGI header lines
//! with `Status` ([`crate::cgi::CgiHeadParser::http_or_cgi`]), the body up to the close or the
//! `Content-Length` ([`crate::cgi::framing`]); the connection is never reused. Unlike FastCGI
//! and SCGI, nginx passes a uwsgi answer's `Status` header on to the client.
//! No sockets here: bytes out, and the answer is the [`crate::cgi`] room's.

use std::fmt;

use bytes::{BufMut, BytesMut};

use crate::log::Level;

/// The headers nginx does not pass from a uwsgi answer to the client (unless
/// `uwsgi_pass_header` says so). `Status` is not among them.
pub const HIDDEN_HEADERS: &[&str] = &[
    "X-Accel-Expires",
    "X-Accel-Redirect",
    "X-Accel-Limit-Rate",
    "X-Accel-Buffering",
    "X-Accel-Charset",
];

/// The most bytes of vars a packet can carry.
pub const MAX_VARS: usize = 65535;

/// More vars than the packet's 16-bit size can say: nginx's `alert`, and 500 for the client.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct RequestTooBig {
    /// The vars' length ([`vars_len`]).
    pub len: usize,
}

impl RequestTooBig {
    /// nginx logs it at `alert`.
    pub fn level(&self) -> Level {
        Level::Alert
    }
}

impl fmt::Display for RequestTooBig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "uwsgi request is too big: {}", self.len)
    }
}

impl std::error::Error for RequestTooBig {}

/// The bytes `vars` take in a packet (after its 4-byte header).
pub fn vars_len<'a>(vars: impl IntoIterator<Item = (&'a [u8], &'a [u8])>) -> usize {
    vars.into_iter()
        .map(|(k, v)| 4usize.saturating_add(k.len()).saturating_add(v.len()))
        .fold(0, usize::saturating_add)
}

/// Appends the packet's header and vars to `out` (the body goes after, as it is);
/// `modifier1` and `modifier2` are `uwsgi_modifier1` and `uwsgi_modifier2` (0 by default, a
/// WSGI request). Nothing is written when the vars are too many.
pub fn request_head<'a, I>(
    out: &mut BytesMut,
    modifier1: u8,
    modifier2: u8,
    vars: I,
) -> Result<(), RequestTooBig>
where
    I: IntoIterator<Item = (&'a [u8], &'a [u8])>,
    I::IntoIter: Clone,
{
    let vars = vars.into_iter();
    let len = vars_len(vars.clone());
    let Ok(size) = u16::try_from(len) else {
        return Err(RequestTooBig { len });
    };
    out.reserve(4 + len);
    out.put_u8(modifier1);
    out.put_u16_le(size);
    out.put_u8(modifier2);
    for (k, v) in vars {
        // Each fits: the whole does.
        out.put_u16_le(k.len() as u16);
        out.put_slice(k);
        out.put_u16_le(v.len() as u16);
        out.put_slice(v);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn packet_as_nginx_sends_it() {
        let mut out = BytesMut::new();
        let vars = [
            (&b"QUERY_STRING"[..], &b"q=1"[..]),
            (b"REQUEST_METHOD", b"POST"),
            (b"SERVER_NAME", b""),
        ];
        request_head(&mut out, 0, 0, vars).unwrap();
        let mut want = vec![0, 0, 0, 0];
        want.extend_from_slice(b"\x0c\x00QUERY_STRING\x03\x00q=1");
        want.extend_from_slice(b"\x0e\x00REQUEST_METHOD\x04\x00POST");
        want.extend_from_slice(b"\x0b\x00SERVER_NAME\x00\x00");
        let size = (want.len() - 4) as u16;
        want[1..3].copy_from_slice(&size.to_le_bytes());
        assert_eq!(&out[..], &want[..]);
        assert_eq!(vars_len(vars), want.len() - 4);
        // The modifiers.
        let mut out = BytesMut::new();
        request_head(&mut out, 5, 9, std::iter::empty()).unwrap();
        assert_eq!(&out[..], &[5, 0, 0, 9]);
    }

    #[test]
    fn too_big_as_nginx_refuses_it() {
        let big = vec![b'x'; 33_000];
        let vars = [(&b"A"[..], &big[..]), (b"B", &big[..])];
        let mut out = BytesMut::from(&b"kept"[..]);
        let e = request_head(&mut out, 0, 0, vars).unwrap_err();
        assert_eq!(e.to_string(), "uwsgi request is too big: 66010");
        assert_eq!(e.level(), Level::Alert);
        assert_eq!(&out[..], b"kept");
        // Exactly 65535 fits.
        let fill = vec![b'y'; MAX_VARS - 5];
        let mut out = BytesMut::new();
        request_head(&mut out, 0, 0, [(&b"K"[..], &fill[..])]).unwrap();
        assert_eq!(&out[1..3], &[0xff, 0xff]);
        assert_eq!(out.len(), 4 + MAX_VARS);
    }
}
