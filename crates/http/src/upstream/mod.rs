//! The upstream side of HTTP/1: what a backend answers a proxy, read with nginx 1.22's rules
//! (`ngx_http_proxy_process_status_line`, `ngx_http_parse_header_line` with underscores allowed,
//! and the header handlers of `ngx_http_upstream.c`), then how its body ends and whether the
//! connection can be reused.
//!
//! Pure: bytes in, values out. [`parse_upstream_head`] is called with everything read so far
//! and answers `Ok(None)` until the head is complete, or an error as soon as the bytes already
//! read are wrong (nginx parses as bytes arrive, so a bad line is a 502 at once, not a timeout).
//! Only the first `max` bytes (`proxy_buffer_size`) are looked at: a head longer than that is
//! `upstream sent too big header`, as in nginx, whose header buffer has exactly that size.
//!
//! An upstream is trusted more than a client, and nginx is lenient with it; so is this room.
//! A bare LF ends lines; header names may hold `_`, `.`, `@` and bytes over 0x7f (nginx only
//! refuses control characters, space, DEL and a leading `:`); a line without a colon is a header
//! with an empty value; only spaces (not tabs) around a value are trimmed; a repeated
//! `HTTP/1.1 ...` line (IIS) is skipped. Obs-fold (a line starting with SP or HT) and a space
//! before the colon are invalid. Things nginx 1.22 does not check are not checked:
//!
//! - Interim responses are not supported: nginx sends neither `Expect` nor (unless proxying an
//!   upgrade) `Upgrade`, so a `100 Continue` head is taken as *the* response, and its body runs
//!   to the connection's close unless it has a length. Only 101 is special (a tunnel).
//! - Framing, nginx 1.22: the last `Content-Length` wins and an unparsable one means "no
//!   length"; `Transfer-Encoding` that contains `chunked` anywhere (case-insensitively) means
//!   chunked, and then `Content-Length` is ignored. nginx 1.23.0 rejects all these (duplicate
//!   lines, both headers, another coding, a bad length): [`Rules::Nginx123`] does the same.
//!   Under the 1.22 rules shoal serves such a response as nginx 1.22 does but never reuses the
//!   connection after it: what the client sees is the same, and a desynchronized keepalive
//!   connection cannot poison the next request.
//! - A status line that is not `HTTP/x.y NNN` is [`UpstreamError::NoValidHeader`]; nginx logs
//!   it and then relays the upstream's bytes to the client verbatim as an HTTP/0.9 answer (no
//!   status line, no headers, `009` in the access log), until the upstream closes.
//!
//! Connection reuse follows nginx: never after an HTTP/1.0 status line (even with
//! `Connection: keep-alive`), never when a `Connection` header contains `close`, never after a
//! body delimited by the close, and only once a body has ended exactly where its framing says.

use std::fmt;

use bytes::{Bytes, BytesMut};

use crate::body::{parse_content_length, BodyChunk, ChunkedDecoder, LengthDecoder};
use crate::request::Version;

mod body;
mod checks;
mod error;
mod headers;
mod status;

pub use body::UpstreamBodyDecoder;
use checks::finish;
pub use error::UpstreamError;
use headers::{contains_ignore_case, headers_careful, headers_fast};
pub(crate) use headers::{scan_line, Line, LineScan};
pub(crate) use status::{status_line, StatusLine};

/// Which nginx the header checks follow.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Rules {
    /// nginx 1.22 (Debian 12, what the diff tests run): framing headers are taken as they come
    /// (last `Content-Length` wins, `chunked` anywhere in `Transfer-Encoding` wins).
    #[default]
    Nginx122,
    /// nginx 1.23.0 and later: a repeated `Content-Length` or `Transfer-Encoding`, both at
    /// once, a coding other than `chunked`, or a bad length is an invalid header (502).
    Nginx123,
}

/// A byte range inside the head.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Span {
    start: usize,
    end: usize,
}

impl Span {
    pub(crate) fn new(start: usize, end: usize) -> Span {
        debug_assert!(start <= end);
        Span { start, end }
    }

    pub(crate) fn get(self, head: &[u8]) -> &[u8] {
        head.get(self.start..self.end).unwrap_or_default()
    }

    pub(crate) fn start(self) -> usize {
        self.start
    }

    pub(crate) fn end(self) -> usize {
        self.end
    }
}

/// Text the head shows: a range of its bytes, or a fixed string (the `200 OK` a CGI-style
/// answer without `Status` gets, see [`crate::cgi`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Text {
    In(Span),
    Fixed(&'static [u8]),
}

impl Text {
    fn get(self, head: &[u8]) -> &[u8] {
        match self {
            Text::In(span) => span.get(head),
            Text::Fixed(text) => text,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct HeaderSpan {
    pub(crate) name: Span,
    pub(crate) value: Span,
}

/// A parsed upstream response head. It owns the head's bytes once (shared, not copied, when
/// parsed from a `BytesMut`) and keeps positions into them, so the proxy can write names and
/// values back out without copying them again.
#[derive(Clone, Debug)]
pub struct UpstreamHead {
    head: Bytes,
    version: Version,
    status: u16,
    status_line: Text,
    reason: Text,
    headers: Vec<HeaderSpan>,
    content_length: Option<u64>,
    chunked: bool,
    connection_close: bool,
    /// The framing headers were not one clean `Content-Length` or `Transfer-Encoding: chunked`.
    ambiguous: bool,
}

impl UpstreamHead {
    /// HTTP/1.0 for `HTTP/1.0`; HTTP/1.1 for any later version (nginx takes `HTTP/2.0` or
    /// `HTTP/1.5` in a status line as 1.1).
    pub fn version(&self) -> Version {
        self.version
    }

    /// The three-digit status, whatever its value (nginx takes `000` to `999`).
    pub fn status(&self) -> u16 {
        self.status
    }

    /// The status line as nginx passes it to the client: from the code to the end of the line
    /// (`200 OK`, `403.1 Forbidden`, `204`), without CR LF.
    pub fn status_line(&self) -> &[u8] {
        self.status_line.get(&self.head)
    }

    /// The reason phrase: what follows the code and its one separator; may be empty.
    pub fn reason(&self) -> &[u8] {
        self.reason.get(&self.head)
    }

    /// Header fields in the order sent, names as sent (case kept), duplicates kept, skipped
    /// `HTTP/...` lines left out. Names and values are bytes: nginx takes any byte over 0x20.
    pub fn headers(&self) -> impl Iterator<Item = (&[u8], &[u8])> + '_ {
        self.headers
            .iter()
            .map(|h| (h.name.get(&self.head), h.value.get(&self.head)))
    }

    /// Number of header fields.
    pub fn header_count(&self) -> usize {
        self.headers.len()
    }

    /// The first value of header `name` (case-insensitive).
    pub fn header(&self, name: &str) -> Option<&[u8]> {
        self.headers
            .iter()
            .find(|h| h.name.get(&self.head).eq_ignore_ascii_case(name.as_bytes()))
            .map(|h| h.value.get(&self.head))
    }

    /// Every value of header `name` (case-insensitive), in order.
    pub fn header_all<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a [u8]> + 'a {
        self.headers
            .iter()
            .filter(move |h| h.name.get(&self.head).eq_ignore_ascii_case(name.as_bytes()))
            .map(move |h| h.value.get(&self.head))
    }

    /// The body length in effect: the (last, under 1.22 rules) valid `Content-Length`, `None`
    /// without one, with an unparsable one, or when the body is chunked.
    pub fn content_length(&self) -> Option<u64> {
        self.content_length
    }

    /// Whether the body is chunked.
    pub fn chunked(&self) -> bool {
        self.chunked
    }

    /// nginx's `connection_close`: an HTTP/1.0 status line, or a `Connection` header containing
    /// `close` anywhere (case-insensitive; nginx searches the value, it does not split tokens).
    pub fn connection_close(&self) -> bool {
        self.connection_close
    }

    /// Whether the connection may go back to the keepalive pool once the body has ended
    /// exactly where its [`Framing`] says (see [`Framing::reusable`]): not after
    /// [`UpstreamHead::connection_close`], not after a 101, and (shoal's hardening over 1.22)
    /// not after framing headers nginx 1.23 would refuse. A CGI-style head ([`crate::cgi`])
    /// says nothing about reuse and answers true: FastCGI's keep-conn and `END_REQUEST` decide
    /// ([`crate::fastcgi::Decoder`]), and SCGI and uwsgi connections are never reused.
    pub fn keep_alive(&self) -> bool {
        !self.connection_close && !self.ambiguous && self.status != 101
    }

    /// Status 101: the connection becomes a tunnel if the client asked for the upgrade.
    pub fn is_upgrade(&self) -> bool {
        self.status == 101
    }

    /// Bytes the head took, through its empty line; the body starts right after.
    pub fn head_len(&self) -> usize {
        self.head.len()
    }

    /// The raw head bytes.
    pub fn head(&self) -> &Bytes {
        &self.head
    }

    /// A CGI-style head ([`crate::cgi`]): the status comes from the caller, the body's length
    /// from the last `Content-Length` line (none if that one does not parse, as nginx 1.22
    /// takes it); `Transfer-Encoding` and `Connection` mean nothing there (nginx decodes no
    /// chunked body from these protocols and decides connection reuse from the protocol), so
    /// [`UpstreamHead::chunked`] and [`UpstreamHead::connection_close`] are false.
    pub(crate) fn cgi(
        head: Bytes,
        status: u16,
        status_line: Text,
        reason: Text,
        headers: Vec<HeaderSpan>,
    ) -> UpstreamHead {
        let content_length = headers
            .iter()
            .rev()
            .find(|h| h.name.get(&head).eq_ignore_ascii_case(b"content-length"))
            .and_then(|h| parse_content_length(h.value.get(&head)));
        UpstreamHead {
            version: Version::Http11,
            status,
            status_line,
            reason,
            headers,
            content_length,
            chunked: false,
            connection_close: false,
            ambiguous: false,
            head,
        }
    }
}

/// What the proxy asked, as far as the response framing depends on it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct UpstreamRequest {
    /// The request sent upstream was `HEAD`: the response has no body whatever it says.
    pub head: bool,
    /// The client asked for a protocol upgrade (`Upgrade` header), passed on upstream.
    pub upgrade: bool,
}

/// How an upstream's response body ends.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Framing {
    /// No body: a HEAD request, 204, 304, or `Content-Length: 0`.
    None,
    /// Exactly this many bytes.
    Length(u64),
    /// Chunked.
    Chunked,
    /// Everything until the upstream closes the connection.
    Close,
    /// 101 to a client that asked for an upgrade: from here on the two connections are
    /// spliced, bytes both ways, until either side closes.
    Tunnel,
}

impl Framing {
    /// Whether this framing can leave the connection reusable (with
    /// [`UpstreamHead::keep_alive`], and once the body ended cleanly with no extra bytes).
    pub fn reusable(self) -> bool {
        matches!(self, Framing::None | Framing::Length(_) | Framing::Chunked)
    }
}

/// How the body of `head` ends, as `ngx_http_proxy_input_filter_init` decides: a 101 to a
/// client that asked to upgrade is a tunnel; a HEAD request, 204 and 304 have no body; then
/// chunked, then `Content-Length`, else the body runs to the close. Other 1xx statuses (and a
/// 101 the client did not ask for) are not special: nginx 1.22 does not support interim
/// responses from upstreams.
pub fn framing(head: &UpstreamHead, request: UpstreamRequest) -> Framing {
    if head.status == 101 && request.upgrade {
        return Framing::Tunnel;
    }
    if head.status == 204 || head.status == 304 || request.head {
        return Framing::None;
    }
    if head.chunked {
        return Framing::Chunked;
    }
    match head.content_length {
        Some(0) => Framing::None,
        Some(n) => Framing::Length(n),
        None => Framing::Close,
    }
}

/// Looks for a complete response head at the start of `buf`, with nginx 1.22's rules. `max` is
/// `proxy_buffer_size`: only that many bytes are looked at. `Ok(None)`: need more bytes (call
/// again with the same bytes and more). On success, the head and the bytes it took (the body
/// starts after them). The head's bytes are copied once.
pub fn parse_upstream_head(
    buf: &[u8],
    max: usize,
) -> Result<Option<(UpstreamHead, usize)>, UpstreamError> {
    parse_upstream_head_with(buf, max, Rules::Nginx122)
}

/// [`parse_upstream_head`] with a choice of [`Rules`].
pub fn parse_upstream_head_with(
    buf: &[u8],
    max: usize,
    rules: Rules,
) -> Result<Option<(UpstreamHead, usize)>, UpstreamError> {
    let Some(raw) = scan(buf, max)? else {
        return Ok(None);
    };
    let len = raw.len;
    let head = Bytes::copy_from_slice(buf.get(..len).unwrap_or_default());
    Ok(Some((finish(head, raw, rules)?, len)))
}

/// Like [`parse_upstream_head_with`] on a read buffer: on success the head is split off `buf`
/// (shared, not copied), leaving the start of the body in it.
pub fn parse_upstream_head_buf(
    buf: &mut BytesMut,
    max: usize,
    rules: Rules,
) -> Result<Option<UpstreamHead>, UpstreamError> {
    let Some(raw) = scan(buf, max)? else {
        return Ok(None);
    };
    let head = buf.split_to(raw.len).freeze();
    finish(head, raw, rules).map(Some)
}

/// The status line and header lines, as found by either road.
#[derive(Debug, PartialEq, Eq)]
struct RawHead {
    version: Version,
    status: u16,
    status_line: Span,
    reason: Span,
    headers: Vec<HeaderSpan>,
    /// Bytes through the empty line.
    len: usize,
}

/// Finds and splits the head in the first `max` bytes of `buf`.
fn scan(buf: &[u8], max: usize) -> Result<Option<RawHead>, UpstreamError> {
    let data = buf.get(..max.min(buf.len())).unwrap_or_default();
    let Some(status) = status_line(data)? else {
        return incomplete(buf, max);
    };
    if let Some(raw) = headers_fast(data, &status) {
        return Ok(Some(raw));
    }
    match headers_careful(data, status)? {
        Some(raw) => Ok(Some(raw)),
        None => incomplete(buf, max),
    }
}

/// A head not over yet: more bytes may come, unless the buffer is full.
fn incomplete(buf: &[u8], max: usize) -> Result<Option<RawHead>, UpstreamError> {
    if buf.len() >= max {
        Err(UpstreamError::TooBigHeader)
    } else {
        Ok(None)
    }
}

/// For the fuzz target: when the fast road takes the complete head in `buf`, the careful road
/// must find the same one. Returns false on a disagreement.
#[doc(hidden)]
pub fn roads_agree(buf: &[u8]) -> bool {
    let Ok(Some(status)) = status_line(buf) else {
        return true;
    };
    match headers_fast(buf, &status) {
        Some(fast) => headers_careful(buf, status) == Ok(Some(fast)),
        None => true,
    }
}

#[cfg(test)]
mod tests;
