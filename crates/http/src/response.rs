//! Response heads and chunked framing, written straight into the caller's buffer.
//!
//! This is the hot path: a small response is its head and body in one buffer and one write.
//! [`ResponseHead`] borrows everything it writes and [`ResponseHead::write_to`] appends to any
//! `BufMut` (a `BytesMut`, a `Vec<u8>`) without allocating anything else. Headers come in
//! nginx's order: `Server`, `Date`, `Content-Type`, `Content-Length`, `Last-Modified`,
//! `Location`, `Transfer-Encoding`, `Connection`, `Keep-Alive`, then the extra ones in the order
//! given. The status line is always `HTTP/1.1`, as nginx answers every 1.x client.
//!
//! Values are written as given: the caller must not put CR or LF in them (values from a client
//! or an upstream have been through the request parser, which refuses both).

use bytes::BufMut;

use crate::date::DATE_LEN;
use crate::status;

/// `server_tokens`: what the `Server` header and error pages say.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum ServerTokens {
    /// `shoal/0.1.0` (nginx's default, `on`).
    #[default]
    On,
    /// `shoal`.
    Off,
    /// `shoal/0.1.0 (build)`.
    Build,
}

impl ServerTokens {
    /// The `Server` header value.
    pub fn server(self) -> &'static str {
        match self {
            ServerTokens::On => concat!("shoal/", env!("CARGO_PKG_VERSION")),
            ServerTokens::Off => "shoal",
            ServerTokens::Build => concat!("shoal/", env!("CARGO_PKG_VERSION"), " (build)"),
        }
    }
}

/// How the response body is delimited.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum BodyLength {
    /// No `Content-Length` and no `Transfer-Encoding` (a 304, a HEAD answer written by the
    /// caller, or a body delimited by closing the connection).
    #[default]
    Unknown,
    /// `Content-Length: n`.
    Length(u64),
    /// `Transfer-Encoding: chunked`.
    Chunked,
}

/// What the `Connection` header says.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Connection {
    /// `Connection: keep-alive` (and `Keep-Alive: timeout=N` when set).
    KeepAlive,
    /// `Connection: close`.
    #[default]
    Close,
    /// `Connection: upgrade` (101 answers).
    Upgrade,
    /// No `Connection` header.
    Omit,
}

/// A response head to serialize. Build with [`ResponseHead::new`] and set the fields.
#[derive(Clone, Copy, Debug)]
pub struct ResponseHead<'a> {
    /// The status; nginx codes 494–497 go out as 400.
    pub status: u16,
    /// A reason phrase replacing the standard one (as from an upstream's status line).
    pub reason: Option<&'a str>,
    /// `Server` header; `None` omits it (e.g. when an upstream's is passed on as an extra).
    pub server: Option<ServerTokens>,
    /// `Date` value, from a [`crate::DateCache`]; `None` omits it.
    pub date: Option<&'a [u8; DATE_LEN]>,
    /// `Content-Type` value, charset included.
    pub content_type: Option<&'a [u8]>,
    /// `Content-Length` / `Transfer-Encoding: chunked` / neither.
    pub length: BodyLength,
    /// `Last-Modified`, already formatted (see [`crate::date::format`]).
    pub last_modified: Option<&'a [u8; DATE_LEN]>,
    /// `Location` value.
    pub location: Option<&'a [u8]>,
    /// `Connection` header.
    pub connection: Connection,
    /// `keepalive_timeout`'s second argument: `Keep-Alive: timeout=N` with keep-alive.
    pub keep_alive_timeout: Option<u64>,
    /// Further headers, in order (`ETag`, `Accept-Ranges`, ...).
    pub headers: &'a [(&'a str, &'a [u8])],
}

impl<'a> ResponseHead<'a> {
    /// A head with `status`, `Server: shoal/0.1.0`, no body length, `Connection: close`.
    pub fn new(status: u16) -> ResponseHead<'a> {
        ResponseHead {
            status,
            reason: None,
            server: Some(ServerTokens::On),
            date: None,
            content_type: None,
            length: BodyLength::Unknown,
            last_modified: None,
            location: None,
            connection: Connection::Close,
            keep_alive_timeout: None,
            headers: &[],
        }
    }

    /// Appends the status line, the headers and the empty line to `out`.
    pub fn write_to(&self, out: &mut impl BufMut) {
        self.write_fields(out);
        for (name, value) in self.headers {
            header(out, name.as_bytes(), value);
        }
        out.put_slice(b"\r\n");
    }

    /// Appends the status line and the head's own headers, without `headers` and without the
    /// empty line: the caller adds its further headers with [`header`], then `\r\n`.
    pub fn write_fields(&self, out: &mut impl BufMut) {
        let code = status::wire_status(self.status);
        out.put_slice(b"HTTP/1.1 ");
        match (self.reason, status::status_line(code)) {
            (Some(""), _) => put_status_code(out, code),
            (Some(reason), _) => {
                put_status_code(out, code);
                out.put_u8(b' ');
                out.put_slice(reason.as_bytes());
            }
            (None, Some(line)) => out.put_slice(line.as_bytes()),
            (None, None) => {
                put_status_code(out, code);
                out.put_u8(b' ');
            }
        }
        out.put_slice(b"\r\n");
        if let Some(tokens) = self.server {
            header(out, b"Server", tokens.server().as_bytes());
        }
        if let Some(date) = self.date {
            header(out, b"Date", date);
        }
        if let Some(ct) = self.content_type {
            header(out, b"Content-Type", ct);
        }
        match self.length {
            BodyLength::Length(n) => {
                out.put_slice(b"Content-Length: ");
                put_decimal(out, n);
                out.put_slice(b"\r\n");
            }
            BodyLength::Chunked | BodyLength::Unknown => {}
        }
        if let Some(lm) = self.last_modified {
            header(out, b"Last-Modified", lm);
        }
        if let Some(location) = self.location {
            header(out, b"Location", location);
        }
        if self.length == BodyLength::Chunked {
            out.put_slice(b"Transfer-Encoding: chunked\r\n");
        }
        match self.connection {
            Connection::KeepAlive => {
                out.put_slice(b"Connection: keep-alive\r\n");
                if let Some(t) = self.keep_alive_timeout {
                    out.put_slice(b"Keep-Alive: timeout=");
                    put_decimal(out, t);
                    out.put_slice(b"\r\n");
                }
            }
            Connection::Close => out.put_slice(b"Connection: close\r\n"),
            Connection::Upgrade => out.put_slice(b"Connection: upgrade\r\n"),
            Connection::Omit => {}
        }
    }

    /// The head as a new vector (for tests and slow paths; the hot path uses `write_to`).
    pub fn to_vec(&self) -> Vec<u8> {
        let mut v = Vec::with_capacity(256);
        self.write_to(&mut v);
        v
    }
}

/// The interim answer to `Expect: 100-continue`.
pub const CONTINUE: &[u8] = b"HTTP/1.1 100 Continue\r\n\r\n";

/// Appends `NAME: VALUE\r\n`.
pub fn header(out: &mut impl BufMut, name: &[u8], value: &[u8]) {
    out.put_slice(name);
    out.put_slice(b": ");
    out.put_slice(value);
    out.put_slice(b"\r\n");
}

fn put_status_code(out: &mut impl BufMut, code: u16) {
    let code = code.min(999);
    out.put_slice(&[
        b'0' + (code / 100) as u8,
        b'0' + (code / 10 % 10) as u8,
        b'0' + (code % 10) as u8,
    ]);
}

/// Appends `n` in decimal.
fn put_decimal(out: &mut impl BufMut, n: u64) {
    let mut digits = [0u8; 20];
    out.put_slice(decimal(n, &mut digits));
}

/// `n` in decimal ASCII digits, written at the end of `buf` (without `fmt`'s machinery).
pub fn decimal(mut n: u64, buf: &mut [u8; 20]) -> &[u8] {
    let mut i = buf.len();
    loop {
        i -= 1;
        buf[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    &buf[i..]
}

/// Appends the framing that starts a chunk of `len` bytes (`len` in hex, CRLF). A zero `len`
/// writes nothing: an empty chunk would end the body.
pub fn write_chunk_header(out: &mut impl BufMut, len: usize) {
    if len == 0 {
        return;
    }
    let mut digits = [0u8; 16];
    let mut i = digits.len();
    let mut n = len as u64;
    while n > 0 {
        i -= 1;
        digits[i] = b"0123456789abcdef"[(n & 0xf) as usize];
        n >>= 4;
    }
    out.put_slice(&digits[i..]);
    out.put_slice(b"\r\n");
}

/// The CRLF that ends a chunk's data.
pub const CHUNK_END: &[u8] = b"\r\n";

/// The last chunk, with no trailers: ends a chunked body.
pub const LAST_CHUNK: &[u8] = b"0\r\n\r\n";

/// Appends `data` as one chunk (nothing for empty `data`).
pub fn write_chunk(out: &mut impl BufMut, data: &[u8]) {
    if data.is_empty() {
        return;
    }
    write_chunk_header(out, data.len());
    out.put_slice(data);
    out.put_slice(CHUNK_END);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nginx_header_order() {
        let date = *b"Sun, 06 Nov 1994 08:49:37 GMT";
        let lm = *b"Sat, 05 Nov 1994 08:49:37 GMT";
        let mut head = ResponseHead::new(200);
        head.date = Some(&date);
        head.content_type = Some(b"text/html");
        head.length = BodyLength::Length(612);
        head.last_modified = Some(&lm);
        head.connection = Connection::KeepAlive;
        head.keep_alive_timeout = Some(60);
        head.headers = &[("ETag", b"\"5f-264\""), ("Accept-Ranges", b"bytes")];
        let mut out = bytes::BytesMut::new();
        head.write_to(&mut out);
        assert_eq!(
            std::str::from_utf8(&out).unwrap(),
            "HTTP/1.1 200 OK\r\nServer: shoal/0.1.0\r\nDate: Sun, 06 Nov 1994 08:49:37 GMT\r\n\
             Content-Type: text/html\r\nContent-Length: 612\r\n\
             Last-Modified: Sat, 05 Nov 1994 08:49:37 GMT\r\nConnection: keep-alive\r\n\
             Keep-Alive: timeout=60\r\nETag: \"5f-264\"\r\nAccept-Ranges: bytes\r\n\r\n"
        );
    }

    #[test]
    fn chunked_close_and_status_lines() {
        let mut head = ResponseHead::new(494);
        head.server = Some(ServerTokens::Off);
        head.length = BodyLength::Chunked;
        let s = String::from_utf8(head.to_vec()).unwrap();
        assert_eq!(
            s,
            "HTTP/1.1 400 Bad Request\r\nServer: shoal\r\nTransfer-Encoding: chunked\r\n\
             Connection: close\r\n\r\n"
        );
        let mut odd = ResponseHead::new(299);
        odd.server = None;
        odd.connection = Connection::Omit;
        assert_eq!(odd.to_vec(), b"HTTP/1.1 299 \r\n\r\n");
        let mut custom = ResponseHead::new(502);
        custom.reason = Some("Upstream Gone");
        custom.server = Some(ServerTokens::Build);
        custom.length = BodyLength::Length(0);
        let s = String::from_utf8(custom.to_vec()).unwrap();
        assert!(s.starts_with("HTTP/1.1 502 Upstream Gone\r\nServer: shoal/0.1.0 (build)\r\n"));
        assert!(s.contains("Content-Length: 0\r\n"));
    }

    #[test]
    fn chunk_framing() {
        let mut out = Vec::new();
        write_chunk(&mut out, b"hello world, sixteen+");
        write_chunk(&mut out, b"");
        out.extend_from_slice(LAST_CHUNK);
        assert_eq!(out, b"15\r\nhello world, sixteen+\r\n0\r\n\r\n");
        let mut big = Vec::new();
        write_chunk_header(&mut big, 0x1_0000);
        assert_eq!(big, b"10000\r\n");
    }
}
