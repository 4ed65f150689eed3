//! Request heads: from the bytes in a connection's read buffer to a [`Request`], with nginx's
//! limits and nginx's answers.
//!
//! [`HeadParser::parse`] is called each time bytes arrive, with the connection's whole unparsed
//! buffer; it returns `Ok(None)` until the empty line that ends the head is in, then splits the
//! head off the buffer (whatever follows, a body or the next pipelined request, stays there).
//! Finding the end is incremental and bounded by [`Limits`]; parsing runs once per head.
//!
//! Parsing has three roads to one result. A head of the plain shape nearly every client sends,
//! whole in the first buffer, is found and read in one pass ([`one_pass`]). Otherwise
//! the scanner finds the end, and `httparse` (SIMD) reads a well-formed head; when httparse
//! refuses, the careful road re-reads the head line by line to give nginx's answer: a header
//! name nginx calls invalid is dropped or refused depending on `ignore_invalid_headers`, a
//! version above 1.x is 505, anything else malformed is 400. All roads then go through the same
//! checks (Host, body framing, path), so a request means the same thing whichever road it took;
//! a proptest and the fuzz target check that.
//!
//! Rooms: [`line`] (the request line), [`headers`] (header lines, the httparse and careful
//! roads), [`one_pass`] (the one-pass road), [`checks`] (what every road checks after),
//! [`target`] (absolute-form targets), [`refused`] (what a refused head still says).

use bytes::{Bytes, BytesMut};

use crate::body::{self, BodyKind};
use crate::error::{Error, ErrorKind};
use crate::limits::{Limits, Scanner};
use crate::uri;

mod checks;
mod h2;
mod headers;
mod line;
mod one_pass;
mod refused;
mod target;

use checks::{finish, finish_into, UNIQUE};
pub use h2::{plain_h2, Plain};
pub use headers::MAX_HEADERS;
pub(crate) use headers::{header_checked_at_its_line, refused_header_line};
use headers::{
    header_line_content, keep_header, line_content, parse_careful, parse_fast, too_many_headers,
    trim_ows,
};
pub use line::is_simple_request;
pub(crate) use line::{check_request_line, skip_leading_cr};
use line::{nginx_method, parse_request_line, parse_version, version_prefix};
pub use refused::Refused;
pub(crate) use refused::{first_line_error, line_prefix_error};
use target::{scheme_byte, split_absolute, valid_authority, valid_authority_prefix};

/// HTTP version of a request.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Version {
    /// An HTTP/0.9 simple request (`GET /path` and nothing else): no headers, and the answer
    /// is its body alone, as nginx answers one.
    Http09,
    /// HTTP/1.0.
    Http10,
    /// HTTP/1.1 (and HTTP/1.2..1.99, which nginx also takes as 1.1 semantics).
    Http11,
    /// An HTTP/2 stream's request (its head rebuilt from the stream's fields by the server).
    Http2,
}

impl Version {
    /// `HTTP/1.0` or `HTTP/1.1` (`HTTP/0.9` for a simple request).
    pub fn as_str(self) -> &'static str {
        match self {
            Version::Http09 => "HTTP/0.9",
            Version::Http10 => "HTTP/1.0",
            Version::Http11 => "HTTP/1.1",
            Version::Http2 => "HTTP/2.0",
        }
    }

    /// What ends a request line of this version in `$request` and log lines: ` HTTP/1.1`, or
    /// nothing for an HTTP/0.9 simple request (`GET /`).
    pub fn line_suffix(self) -> &'static str {
        match self {
            Version::Http09 => "",
            Version::Http10 => " HTTP/1.0",
            Version::Http11 => " HTTP/1.1",
            Version::Http2 => " HTTP/2.0",
        }
    }
}

/// A byte range inside the request head.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Span {
    start: usize,
    end: usize,
}

impl Span {
    fn of(head: &[u8], part: &[u8]) -> Span {
        // `part` is a subslice of `head`; pointer arithmetic gives its position without unsafe.
        let start = (part.as_ptr() as usize).wrapping_sub(head.as_ptr() as usize);
        debug_assert!(start <= head.len() && start + part.len() <= head.len());
        Span {
            start,
            end: start + part.len(),
        }
    }

    fn get(self, head: &[u8]) -> &[u8] {
        head.get(self.start..self.end).unwrap_or_default()
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct HeaderSpan {
    name: Span,
    value: Span,
}

/// The request line and header lines, as found by either road.
#[derive(Debug, PartialEq, Eq)]
struct RawHead {
    method: Span,
    target: Span,
    version: Version,
    headers: Vec<HeaderSpan>,
}

/// A header name's bit in [`Request`]'s summary of the names sent: from its length and its
/// first and last bytes, without case, `_` taken as `-` (so that `$http_x_a` finds `X-A`'s);
/// a constant for a name written in the code.
#[inline]
fn name_bit(name: &[u8]) -> u64 {
    let fold = |b: u8| if b == b'_' { b'-' } else { b | 0x20 } as usize;
    let (Some(&first), Some(&last)) = (name.first(), name.last()) else {
        return 1;
    };
    let h = fold(first) * 7 + fold(last) * 3 + name.len();
    1 << (h & 63)
}

/// A parsed request head. Cheap to keep: it holds the head's bytes (shared, not copied) and
/// positions into them.
#[derive(Clone, Debug)]
pub struct Request {
    head: Bytes,
    method: Span,
    /// The method when it is GET, HEAD or POST.
    usual_method: Option<&'static str>,
    target: Span,
    /// The target from its path on (nginx's `$request_uri`): the whole target in origin-form,
    /// what follows the authority in absolute-form (`/` when nothing does).
    request_uri: Piece,
    query: Option<Span>,
    version: Version,
    headers: Vec<HeaderSpan>,
    /// A bit per header name sent (see [`name_bit`]): a name whose bit is clear was not sent,
    /// and most lookups are for headers a request does not have.
    names: u64,
    path: Piece,
    host: Option<Piece>,
    keep_alive: bool,
    expect_continue: bool,
    body: BodyKind,
    /// The head's length as sent over HTTP/1 (an HTTP/2 request's, had it been).
    len: usize,
}

impl Request {
    /// The method, as sent (any token; case is kept).
    pub fn method(&self) -> &str {
        // Asked for many times per request: the usual ones were named when it was parsed.
        match self.usual_method {
            Some(m) => m,
            None => std::str::from_utf8(self.method.get(&self.head)).unwrap_or_default(),
        }
    }

    /// The request URI as sent (nginx's `$request_uri`): the target, or in absolute-form
    /// (`GET http://host/x`) its part after the authority, never the scheme and host, which
    /// an upstream would take over its `Host`.
    pub fn uri(&self) -> &[u8] {
        self.request_uri.get(&self.head)
    }

    /// The request target exactly as the request line has it (for `$request` and log lines).
    pub fn target(&self) -> &[u8] {
        self.target.get(&self.head)
    }

    /// The decoded, normalized path (nginx's `$uri` before any rewrite). Bytes, not text.
    pub fn path(&self) -> &[u8] {
        self.path.get(&self.head)
    }

    /// The query string without `?` (nginx's `$args`), still percent-encoded.
    pub fn query(&self) -> Option<&[u8]> {
        self.query.map(|s| s.get(&self.head))
    }

    /// The HTTP version.
    pub fn version(&self) -> Version {
        self.version
    }

    /// The protocol as the request line has it (nginx's `$server_protocol`): `HTTP/1.2`, a minor
    /// of `00`, and any spaces between it and the line's end are kept; empty for HTTP/0.9.
    pub fn version_text(&self) -> &[u8] {
        match self.version {
            Version::Http09 => return b"",
            Version::Http2 => return b"HTTP/2.0",
            _ => {}
        }
        let after = self.head.get(self.target.end..).unwrap_or_default();
        let line = &after[..memchr::memchr(b'\n', after).unwrap_or(after.len())];
        let mut line = line.strip_suffix(b"\r").unwrap_or(line);
        while let [b' ', rest @ ..] = line {
            line = rest;
        }
        line
    }

    /// Header fields in the order sent, names with their original case, duplicates kept. Lines
    /// dropped by `ignore_invalid_headers` are not here.
    pub fn headers(&self) -> impl Iterator<Item = (&str, &[u8])> + '_ {
        self.headers.iter().map(|h| {
            let name = std::str::from_utf8(h.name.get(&self.head)).unwrap_or_default();
            (name, h.value.get(&self.head))
        })
    }

    /// [`Request::headers`] with the names as bytes (no UTF-8 check: for a caller that
    /// writes them out again).
    pub fn header_fields(&self) -> impl Iterator<Item = (&[u8], &[u8])> + '_ {
        self.headers
            .iter()
            .map(|h| (h.name.get(&self.head), h.value.get(&self.head)))
    }

    /// The head's bytes, shared: what [`Request::headers`] gives can be sliced out of them
    /// (`Bytes::slice_ref`) rather than copied.
    pub fn head_bytes(&self) -> &Bytes {
        &self.head
    }

    /// Number of header fields kept.
    pub fn header_count(&self) -> usize {
        self.headers.len()
    }

    /// The first value of header `name` (case-insensitive).
    #[inline]
    pub fn header(&self, name: &str) -> Option<&[u8]> {
        if !self.may_have_header(name.as_bytes()) {
            return None;
        }
        self.headers
            .iter()
            .find(|h| h.name.get(&self.head).eq_ignore_ascii_case(name.as_bytes()))
            .map(|h| h.value.get(&self.head))
    }

    /// Whether a header named `name` may have been sent (case-insensitive, `_` matching `-`
    /// too): `false` is certain, `true` says to look.
    #[inline]
    pub fn may_have_header(&self, name: &[u8]) -> bool {
        self.names & name_bit(name) != 0
    }

    /// Every value of header `name` (case-insensitive), in order.
    #[inline]
    pub fn header_all<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a [u8]> + 'a {
        let sent = self.may_have_header(name.as_bytes());
        self.headers[..if sent { self.headers.len() } else { 0 }]
            .iter()
            .filter(move |h| h.name.get(&self.head).eq_ignore_ascii_case(name.as_bytes()))
            .map(move |h| h.value.get(&self.head))
    }

    /// The host: from an absolute request target if there was one, else from `Host`;
    /// lowercased, without port or trailing dot. `None` only for HTTP/1.0 without either.
    pub fn host(&self) -> Option<&[u8]> {
        self.host.as_ref().map(|h| h.get(&self.head))
    }

    /// Whether the client asked to keep the connection (nginx: 1.1 unless `Connection: close`,
    /// 1.0 only with `Connection: keep-alive`). The server may still decide to close.
    pub fn keep_alive(&self) -> bool {
        self.keep_alive
    }

    /// `Expect: 100-continue` on an HTTP/1.1 request.
    pub fn expect_continue(&self) -> bool {
        self.expect_continue
    }

    /// How the body is framed.
    pub fn body(&self) -> BodyKind {
        self.body
    }

    /// Bytes the head took in the buffer, through its empty line; the body or the next pipelined
    /// request starts right after.
    pub fn head_len(&self) -> usize {
        self.len
    }

    /// The raw head bytes.
    pub fn head(&self) -> &Bytes {
        &self.head
    }

    /// Makes a request parsed from a head rebuilt from an HTTP/2 stream's fields an HTTP/2
    /// one: its version, and its body as the stream frames it (`BodyKind::Chunked` stands for
    /// a body of unknown length, whose DATA frames the server hands on as chunks). Nothing
    /// of the connection applies to a stream: no keep-alive, no `Expect`.
    pub fn into_h2(mut self, body: BodyKind) -> Request {
        self.set_h2(body);
        self
    }

    /// [`Request::into_h2`] in place (a request is large: a move is a copy).
    pub fn set_h2(&mut self, body: BodyKind) {
        self.version = Version::Http2;
        self.body = body;
        self.keep_alive = false;
        self.expect_continue = false;
    }
}

/// Incremental request-head parser for one connection; reusable across pipelined requests.
#[derive(Clone, Debug, Default)]
pub struct HeadParser {
    limits: Limits,
    scanner: Scanner,
    /// The head of the last request refused by [`HeadParser::parse`] after it was cut from
    /// the buffer (for the access log's request line).
    failed: Option<Bytes>,
    /// Where the line the scanner refused starts in the buffer (a head too large to be read).
    scan_failed_at: Option<usize>,
    /// The connection's last `Host`, validated.
    host_memo: uri::HostMemo,
}

impl HeadParser {
    /// A parser enforcing `limits`.
    pub fn new(limits: Limits) -> HeadParser {
        HeadParser {
            limits,
            scanner: Scanner::default(),
            failed: None,
            scan_failed_at: None,
            host_memo: uri::HostMemo::default(),
        }
    }

    /// The limits in force.
    pub fn limits(&self) -> &Limits {
        &self.limits
    }

    /// Readies the parser for its connection's next request, under `limits` (a reload may
    /// have changed them): what it knew of the last head goes, what it knows of the
    /// connection (its last `Host`) stays.
    pub fn next_request(&mut self, limits: Limits) {
        self.limits = limits;
        self.scanner = Scanner::default();
        self.failed = None;
        self.scan_failed_at = None;
    }

    /// Forgets a partially seen head (after an error, or when the buffer was replaced).
    pub fn reset(&mut self) {
        self.scanner = Scanner::default();
    }

    /// Looks for a complete head at the start of `buf`. `Ok(None)`: need more bytes (call again
    /// with the same buffer, grown; the bytes already seen are not scanned again). On success
    /// the head is split off `buf`, leaving the body or next request in it. After an error the
    /// connection should be answered and closed.
    pub fn parse(&mut self, buf: &mut BytesMut) -> Result<Option<Request>, Error> {
        let mut out = None;
        self.parse_into(buf, &mut out)?;
        Ok(out)
    }

    /// [`HeadParser::parse`] into `out` (`Ok(false)`: need more bytes): a request is some
    /// hundred bytes, and each move of it through a `Result` was a copy.
    pub fn parse_into(
        &mut self,
        buf: &mut BytesMut,
        out: &mut Option<Request>,
    ) -> Result<bool, Error> {
        let (mut head, raw) = match self.one_pass(buf) {
            Some((len, raw)) => (buf.split_to(len).freeze(), Ok(raw)),
            None => {
                let Some(end) = self.scan_buf(buf)? else {
                    return Ok(false);
                };
                let head = buf.split_to(end.len).freeze();
                let raw = parse_raw(&head, end.header_lines, &self.limits);
                (head, raw)
            }
        };
        let memo = &mut self.host_memo;
        match raw.and_then(|mut raw| finish_into(&mut head, &mut raw, &self.limits, memo, out)) {
            Ok(()) => Ok(true),
            Err(e) => {
                self.failed = Some(head);
                Err(e)
            }
        }
    }

    /// The head [`HeadParser::parse`] last refused after taking it off the buffer; `None` if the
    /// error came before that (the bytes are then still in the buffer).
    pub fn failed_head(&self) -> Option<&Bytes> {
        self.failed.as_ref()
    }

    /// How far nginx would have got into the head [`HeadParser::parse`] last refused: `buf` is
    /// the connection's buffer (the refused head is still in it when the error came before the
    /// head was complete).
    pub fn refused(&self, buf: &[u8]) -> Refused {
        match (&self.failed, self.scan_failed_at) {
            (Some(head), _) => refused::walk(head, &self.limits, true),
            (None, Some(at)) => {
                refused::walk(buf.get(..at).unwrap_or_default(), &self.limits, false)
            }
            (None, None) => Refused::default(),
        }
    }

    /// Like [`HeadParser::parse`] for a borrowed buffer: nothing is removed from `buf`; the
    /// request's [`Request::head_len`] says how many bytes it took. The head is copied.
    pub fn parse_slice(&mut self, buf: &[u8]) -> Result<Option<Request>, Error> {
        if let Some((len, raw)) = self.one_pass(buf) {
            let head = Bytes::copy_from_slice(buf.get(..len).unwrap_or_default());
            return finish(head, raw, &self.limits).map(Some);
        }
        let Some(end) = self.scan(buf)? else {
            return Ok(None);
        };
        let head = Bytes::copy_from_slice(buf.get(..end.len).unwrap_or_default());
        parse_head(head, end.header_lines, &self.limits).map(Some)
    }

    /// The one-pass road, tried while the scanner has seen nothing of this head (a head that
    /// came in pieces is the scanner's from its first piece).
    fn one_pass(&self, buf: &[u8]) -> Option<(usize, RawHead)> {
        if self.scanner.started() {
            return None;
        }
        one_pass::parse(buf, &self.limits)
    }

    /// [`HeadParser::scan`] on the connection's buffer, from which the CRs and LFs before the
    /// request line are dropped: nginx reuses a buffer full of them, and however many a client
    /// sends they must not grow ours. The head found starts at its request line.
    fn scan_buf(&mut self, buf: &mut BytesMut) -> Result<Option<crate::limits::HeadEnd>, Error> {
        let mut found = self.scanner.scan(buf, &self.limits);
        if let Ok(end) = &mut found {
            let skipped = self.scanner.take_skipped();
            let _ = buf.split_to(skipped);
            if let Some(end) = end {
                end.len -= skipped;
            }
        }
        self.scanned(found)
    }

    fn scan(&mut self, buf: &[u8]) -> Result<Option<crate::limits::HeadEnd>, Error> {
        let found = self.scanner.scan(buf, &self.limits);
        self.scanned(found)
    }

    /// After a scan: a new scanner for the next head once this one is found or refused.
    fn scanned(
        &mut self,
        found: Result<Option<crate::limits::HeadEnd>, Error>,
    ) -> Result<Option<crate::limits::HeadEnd>, Error> {
        match found {
            Ok(Some(end)) => {
                self.scanner = Scanner::default();
                Ok(Some(end))
            }
            Ok(None) => Ok(None),
            Err(e) => {
                self.scan_failed_at = Some(self.scanner.refused_to());
                self.scanner = Scanner::default();
                Err(e)
            }
        }
    }
}

/// Parses one complete head (through its empty line) with `limits`.
fn parse_head(head: Bytes, header_lines: usize, limits: &Limits) -> Result<Request, Error> {
    let raw = parse_raw(&head, header_lines, limits)?;
    finish(head, raw, limits)
}

/// The request line and header lines of one complete head: httparse's road, else the careful
/// one.
fn parse_raw(head: &[u8], header_lines: usize, limits: &Limits) -> Result<RawHead, Error> {
    match parse_fast(head, header_lines, limits) {
        Some(raw) => Ok(raw),
        None => parse_careful(head, limits),
    }
}

/// Convenience: parses a whole head held in `buf` with `limits` (used by tests and fuzzing).
/// `Ok(None)` if the head is incomplete.
pub fn parse_request(buf: &[u8], limits: &Limits) -> Result<Option<Request>, Error> {
    HeadParser::new(*limits).parse_slice(buf)
}

/// For the fuzz target: when httparse takes the complete head in `buf`, the careful road must
/// find the same request line and headers (or refuse it as the shared checks do); when the
/// one-pass road takes it, the scanner must find the same end and the other roads the same
/// request line and headers. Returns false on a disagreement.
#[doc(hidden)]
pub fn roads_agree(buf: &[u8], limits: &Limits) -> bool {
    let scanned = Scanner::default().scan(buf, limits);
    if let Some((len, raw)) = one_pass::parse(buf, limits) {
        let Ok(Some(end)) = scanned else {
            return false;
        };
        let head = buf.get(..len).unwrap_or_default();
        return end.len == len && parse_raw(head, end.header_lines, limits) == Ok(raw);
    }
    let Ok(Some(end)) = scanned else {
        return true;
    };
    let head = buf.get(..end.len).unwrap_or_default();
    match parse_fast(head, end.header_lines, limits) {
        // The careful road refuses some request lines httparse takes (a target that is
        // neither origin- nor absolute-form) that the shared checks then refuse alike.
        Some(fast) => match parse_careful(head, limits) {
            Ok(careful) => careful == fast,
            Err(e) => finish(Bytes::copy_from_slice(head), fast, limits)
                .is_err_and(|f| f.status() == e.status()),
        },
        None => true,
    }
}

/// A part of the request that is usually bytes of its head as sent (the path, the host): its
/// place there, or bytes of its own when it had to change (decoded, lowercased). A place costs
/// nothing to keep; a share of the head's buffer was a count taken and given back.
#[derive(Clone, Debug)]
enum Piece {
    InHead(Span),
    Own(Vec<u8>),
}

impl Piece {
    /// `part`'s place in `head` when it lies inside it, else its bytes.
    fn of(head: &[u8], part: std::borrow::Cow<'_, [u8]>) -> Piece {
        match part {
            std::borrow::Cow::Borrowed(b) => {
                let start = (b.as_ptr() as usize).wrapping_sub(head.as_ptr() as usize);
                if start <= head.len() && b.len() <= head.len() - start {
                    Piece::InHead(Span::of(head, b))
                } else {
                    Piece::Own(b.to_vec())
                }
            }
            std::borrow::Cow::Owned(b) => Piece::Own(b),
        }
    }

    fn get<'a>(&'a self, head: &'a [u8]) -> &'a [u8] {
        match self {
            Piece::InHead(s) => s.get(head),
            Piece::Own(b) => b,
        }
    }
}

#[cfg(test)]
mod tests;
