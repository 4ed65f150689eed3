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

/// The first of the characters [`log_text`] carries bytes in: U+10FF00 + byte.
pub const LOG_BYTE_BASE: u32 = 0x10_FF00;

/// `bytes` as text bound for the error log, which writes a request's bytes as they came, as
/// nginx's does (a path, a host, a header line: `\xff` stays one byte `ff`, not U+FFFD).
/// Valid UTF-8 is itself; each other byte is the private-use character U+10FF00 + byte, and so
/// is each byte of such a character the client sent itself, so that the log's writer, which
/// turns every character of that range back into its byte, writes exactly `bytes`. Only for
/// text that goes nowhere but the error log.
pub fn log_text(bytes: &[u8]) -> std::borrow::Cow<'_, str> {
    // A character of the range starts F4 8F BC..BF: text without F4 is itself.
    if memchr::memchr(0xf4, bytes).is_none() {
        if let Ok(s) = std::str::from_utf8(bytes) {
            return std::borrow::Cow::Borrowed(s);
        }
    }
    let byte = |b: u8| char::from_u32(LOG_BYTE_BASE + u32::from(b)).expect("a private-use char");
    let mut out = String::with_capacity(bytes.len() + 8);
    for chunk in bytes.utf8_chunks() {
        for c in chunk.valid().chars() {
            if (LOG_BYTE_BASE..=LOG_BYTE_BASE + 0xff).contains(&u32::from(c)) {
                let mut b = [0u8; 4];
                out.extend(c.encode_utf8(&mut b).bytes().map(byte));
            } else {
                out.push(c);
            }
        }
        out.extend(chunk.invalid().iter().map(|&b| byte(b)));
    }
    std::borrow::Cow::Owned(out)
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

    #[test]
    fn log_text_carries_every_byte() {
        for b in [
            &b"/index.html"[..],
            "caf\u{e9}".as_bytes(),
            b"/\xff\x80z",
            b"\xc3",
            "\u{10ff41}x".as_bytes(),
            b"\xf4\x8f\xbc",
        ] {
            let text = super::log_text(b);
            let back: Vec<u8> = text
                .chars()
                .flat_map(|c| match u32::from(c).checked_sub(super::LOG_BYTE_BASE) {
                    Some(n @ 0..=0xff) => vec![n as u8],
                    _ => c.to_string().into_bytes(),
                })
                .collect();
            assert_eq!(back, b, "{text:?}");
        }
        assert!(matches!(
            super::log_text("caf\u{e9}".as_bytes()),
            std::borrow::Cow::Borrowed(_)
        ));
    }
}
