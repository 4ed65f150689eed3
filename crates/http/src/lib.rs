//! shoal's HTTP/1.0 and 1.1 codec: request heads in, response heads out, bodies framed both
//! ways, with nginx's limits and nginx's answers.
//!
//! A pure library: bytes in, values out. No sockets, no tokio, no clock beyond the `Date`
//! cache; the server drives it from each connection's read buffer, and the fuzz targets drive it
//! with arbitrary bytes. Correct before fast: anything ambiguous about where a request or its
//! body ends is refused (400) rather than guessed, because a guess is a smuggling hole.
//!
//! Rooms: [`limits`] (nginx's header buffers), [`request`] (heads), [`uri`] (path and host),
//! [`body`] (framing and decoders), [`response`] (heads and chunk framing out), [`status`]
//! (status lines and error pages), [`date`] (the `Date` header), [`error`], [`upstream`]
//! (what a backend answers a proxy: its head, its body's framing, connection reuse), the other
//! upstream protocols ([`fastcgi`], [`uwsgi`], [`scgi`], [`memcached`], and [`cgi`], the
//! CGI-style answer head the first three share, with [`log`] for the levels of their
//! messages), [`proxy_protocol`] (the PROXY protocol header a load balancer sends first), and
//! two byte-level helpers: [`crc32`] and [`deflate`] (a small gzip encoder for
//! whole bodies).

/// The `bytes` crate this API speaks (`Bytes`, `BytesMut`), for callers without their own.
pub use bytes;

pub mod body;
pub mod cgi;
pub mod crc32;
pub mod date;
pub mod deflate;
pub mod error;
pub mod fastcgi;
pub mod limits;
pub mod log;
pub mod memcached;
pub mod proxy_protocol;
pub mod request;
pub mod response;
pub mod scgi;
pub mod ssi;
pub mod status;
pub mod upstream;
pub mod uri;
pub mod uwsgi;

pub use body::{BodyChunk, BodyDecoder, BodyKind, Chunk, ChunkedDecoder, LengthDecoder};
pub use date::{cached_date, DateCache};
pub use error::{Error, ErrorKind};
pub use limits::{LargeBuffers, Limits};
pub use request::{parse_request, HeadParser, Refused, Request, Version};
pub use response::{BodyLength, Connection, ResponseHead, ServerTokens};
pub use status::{error_page, ErrorPage};
pub use upstream::{
    framing, parse_upstream_head, parse_upstream_head_buf, parse_upstream_head_with, Framing,
    Rules, UpstreamBodyDecoder, UpstreamError, UpstreamHead, UpstreamRequest,
};

/// `bytes` as text, invalid UTF-8 replaced by U+FFFD: `String::from_utf8_lossy`, but the
/// usual input (request paths, hosts, header values: ASCII) is only checked to be ASCII, a
/// word at a time (about a third of `str::from_utf8`'s cost on such short strings), and other
/// valid UTF-8 takes `str::from_utf8`, not the lossy decoder's byte-at-a-time road.
pub fn lossy(bytes: &[u8]) -> std::borrow::Cow<'_, str> {
    if bytes.is_ascii() {
        // SAFETY: ASCII bytes are valid UTF-8.
        return std::borrow::Cow::Borrowed(unsafe { std::str::from_utf8_unchecked(bytes) });
    }
    match std::str::from_utf8(bytes) {
        Ok(s) => std::borrow::Cow::Borrowed(s),
        Err(_) => String::from_utf8_lossy(bytes),
    }
}

#[cfg(test)]
mod lossy_tests {
    #[test]
    fn lossy_is_from_utf8_lossy() {
        for b in [
            &b"/index.html"[..],
            b"",
            "caf\u{e9}".as_bytes(),
            b"a\xffb",
            b"\xc3",
            // ASCII but for the last byte, past the first words.
            b"/a-long-enough-path/for-several-words\x80",
            b"/a-long-enough-path/for-several-words\xc3\xa9",
            b"\x7f\x00 control bytes are ASCII",
        ] {
            assert_eq!(super::lossy(b), String::from_utf8_lossy(b));
        }
        assert!(matches!(
            super::lossy(b"/a"),
            std::borrow::Cow::Borrowed("/a")
        ));
    }
}
