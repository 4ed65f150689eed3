//! Request heads: from the bytes in a connection's read buffer to a [`Request`], with nginx's
//! limits and nginx's answers.
//!
//! [`HeadParser::parse`] is called each time bytes arrive, with the connection's whole unparsed
//! buffer; it returns `Ok(None)` until the empty line that ends the head is in, then splits the
//! head off the buffer (whatever follows, a body or the next pipelined request, stays there).
//! Finding the end is incremental and bounded by [`Limits`]; parsing runs once per head.
//!
//! Parsing has three roads to one result. A head of the plain shape nearly every client sends,
//! whole in the first buffer, is found and read in one pass (`request_one_pass.rs`). Otherwise
//! the scanner finds the end, and `httparse` (SIMD) reads a well-formed head; when httparse
//! refuses, the careful road re-reads the head line by line to give nginx's answer: a header
//! name nginx calls invalid is dropped or refused depending on `ignore_invalid_headers`, a
//! version above 1.x is 505, anything else malformed is 400. All roads then go through the same
//! checks (Host, body framing, path), so a request means the same thing whichever road it took;
//! a proptest and the fuzz target check that.

use bytes::{Bytes, BytesMut};

use crate::body::{self, BodyKind};
use crate::error::{Error, ErrorKind};
use crate::limits::{Limits, Scanner};
use crate::uri;

#[path = "request_one_pass.rs"]
mod one_pass;
#[path = "request_refused.rs"]
mod refused;
pub use refused::Refused;
pub(crate) use refused::{first_line_error, line_prefix_error};

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
        self.head.len()
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
        self.version = Version::Http2;
        self.body = body;
        self.keep_alive = false;
        self.expect_continue = false;
        self
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
        let (head, raw) = match self.one_pass(buf) {
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
        match raw.and_then(|raw| finish_into(head.clone(), raw, &self.limits, memo, out)) {
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
                self.scan_failed_at = Some(self.scanner.line_start());
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

/// Character classes of header-name bytes, one table lookup per byte on the hot path.
const NGINX_NAME: u8 = 1;
const UNDERSCORE: u8 = 2;
const TCHAR: u8 = 4;

static NAME_CLASS: [u8; 256] = {
    let mut t = [0u8; 256];
    let mut b = 0;
    while b < 256 {
        let c = b as u8;
        if c.is_ascii_alphanumeric() || c == b'-' {
            t[b] = NGINX_NAME | TCHAR;
        }
        b += 1;
    }
    t[b'_' as usize] = UNDERSCORE | TCHAR;
    let extra = b"!#$%&'*+.^`|~";
    let mut i = 0;
    while i < extra.len() {
        t[extra[i] as usize] = TCHAR;
        i += 1;
    }
    t
};

/// Is `name` valid by nginx's rules: `[A-Za-z0-9-]`, plus `_` with `underscores_in_headers`.
fn nginx_valid_name(name: &[u8], underscores: bool) -> bool {
    let ok = if underscores {
        NGINX_NAME | UNDERSCORE
    } else {
        NGINX_NAME
    };
    name.iter().all(|&b| NAME_CLASS[usize::from(b)] & ok != 0)
}

/// The RFC 9110 token characters.
fn is_tchar(b: u8) -> bool {
    NAME_CLASS[usize::from(b)] & TCHAR != 0
}

/// What to do with a header whose name passed the syntax checks.
fn keep_header(name: &[u8], limits: &Limits) -> Result<bool, Error> {
    if nginx_valid_name(name, limits.underscores_in_headers) {
        Ok(true)
    } else if limits.ignore_invalid_headers {
        Ok(false)
    } else if name.iter().all(|&b| is_tchar(b)) {
        Ok(true)
    } else {
        Err(Error::bad_request("client sent invalid header line"))
    }
}

const HEADER_SLOTS: usize = 32;

/// The httparse road: `None` when httparse refuses (the careful road then decides).
fn parse_fast(head: &[u8], header_lines: usize, limits: &Limits) -> Option<RawHead> {
    let mut stack = [httparse::EMPTY_HEADER; HEADER_SLOTS];
    let mut heap;
    let slots: &mut [httparse::Header<'_>] = if header_lines <= HEADER_SLOTS {
        &mut stack[..]
    } else {
        heap = vec![httparse::EMPTY_HEADER; header_lines];
        &mut heap[..]
    };
    let mut req = httparse::Request::new(slots);
    let mut config = httparse::ParserConfig::default();
    config.allow_multiple_spaces_in_request_line_delimiters(true);
    match config.parse_request(&mut req, head) {
        Ok(httparse::Status::Complete(n)) if n == head.len() => {}
        _ => return None,
    }
    // A method nginx refuses (lower case, `@`, ...) takes the careful road to its 400.
    if !nginx_method(req.method?.as_bytes()) {
        return None;
    }
    let version = match req.version? {
        0 => Version::Http10,
        _ => Version::Http11,
    };
    let mut headers = Vec::with_capacity(req.headers.len());
    for h in req.headers.iter() {
        match keep_header(h.name.as_bytes(), limits) {
            Ok(true) => headers.push(HeaderSpan {
                name: Span::of(head, h.name.as_bytes()),
                value: nginx_value(head, Span::of(head, h.value)),
            }),
            Ok(false) => {}
            Err(_) => return None,
        }
    }
    if headers.len() > MAX_HEADERS {
        // The careful road finds which comes first: that line or a wrong one after it.
        return None;
    }
    Some(RawHead {
        method: Span::of(head, req.method?.as_bytes()),
        target: Span::of(head, req.path?.as_bytes()),
        version,
        headers,
    })
}

/// Splits a line ending in `\n` into its content, refusing a CR anywhere but before the LF.
fn line_content(line: &[u8]) -> Result<&[u8], Error> {
    let line = line.strip_suffix(b"\n").unwrap_or(line);
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    if memchr::memchr(b'\r', line).is_some() {
        return Err(Error::bad_request("client sent invalid header line"));
    }
    Ok(line)
}

/// The careful road: line by line, with nginx's answer for each way a head can be wrong.
fn parse_careful(head: &[u8], limits: &Limits) -> Result<RawHead, Error> {
    let mut lines = head.split_inclusive(|&b| b == b'\n');
    let request_line = loop {
        let Some(line) = lines.next() else {
            return Err(Error::bad_request("client sent invalid request"));
        };
        let content = line_content(skip_leading_cr(line))?;
        if !content.is_empty() {
            break content;
        }
    };
    let (method, target, version) = parse_request_line(request_line)?;
    let mut headers = Vec::new();
    for line in lines {
        let content = line_content(line)?;
        if content.is_empty() {
            break;
        }
        // A line without a colon is, for nginx, a header with an empty value.
        let (name, value) = match memchr::memchr(b':', content) {
            Some(colon) => (&content[..colon], &content[colon + 1..]),
            None => (content, &content[content.len()..]),
        };
        // Empty names, obs-fold (a line starting with SP/HT), whitespace before the colon,
        // control characters in a name and NUL in a value are refused whatever
        // ignore_invalid_headers says, as in nginx (which keeps a value's other control
        // characters and DEL).
        if name.is_empty() || name.iter().any(|&b| b <= 0x20 || b == 0x7f) {
            return Err(Error::bad_request("client sent invalid header line"));
        }
        let value = trim_ows(value);
        if value.contains(&0) {
            return Err(Error::bad_request("client sent invalid header line"));
        }
        if keep_header(name, limits)? {
            if headers.len() == MAX_HEADERS {
                return Err(too_many_headers());
            }
            headers.push(HeaderSpan {
                name: Span::of(head, name),
                value: Span::of(head, value),
            });
        }
    }
    Ok(RawHead {
        method: Span::of(head, method),
        target: Span::of(head, target),
        version,
        headers,
    })
}

/// A header value as nginx cuts it: spaces around it are dropped, a tab is part of it (so
/// `Content-Length:<TAB>5` is the invalid length `<TAB>5`, as nginx reads it).
fn trim_ows(mut v: &[u8]) -> &[u8] {
    while let [b' ', rest @ ..] = v {
        v = rest;
    }
    while let [rest @ .., b' '] = v {
        v = rest;
    }
    v
}

/// httparse drops tabs around a value as well as spaces: a value it found beside a tab is
/// widened back to what nginx cuts (see [`trim_ows`]). Most values have a single space before
/// them and none after, so this looks at two or three bytes.
fn nginx_value(head: &[u8], v: Span) -> Span {
    let is_ws = |b: &u8| *b == b' ' || *b == b'\t';
    let before = head.get(..v.start).unwrap_or_default();
    let gap_start = v.start - before.iter().rev().take_while(|b| is_ws(b)).count();
    let after = head.get(v.end..).unwrap_or_default();
    let gap_end = v.end + after.iter().take_while(|b| is_ws(b)).count();
    let gaps = [
        head.get(gap_start..v.start).unwrap_or_default(),
        head.get(v.end..gap_end).unwrap_or_default(),
    ];
    if !gaps.iter().any(|g| g.contains(&b'\t')) {
        return v;
    }
    let line = head.get(gap_start..gap_end).unwrap_or_default();
    let trimmed = trim_ows(line);
    Span::of(head, trimmed)
}

/// nginx's method characters: `A`-`Z`, `_` and `-` (so `get` is a 400, not a 405).
fn nginx_method(m: &[u8]) -> bool {
    !m.is_empty()
        && m.iter()
            .all(|&b| b.is_ascii_uppercase() || b == b'_' || b == b'-')
}

/// `METHOD SP+ target SP+ HTTP/x.y SP*`, or HTTP/0.9's `GET SP+ target SP*`.
fn parse_request_line(line: &[u8]) -> Result<(&[u8], &[u8], Version), Error> {
    let invalid = Error::bad_request("client sent invalid request");
    let mut parts = line.split(|&b| b == b' ').filter(|p| !p.is_empty());
    let method = parts.next().ok_or(invalid)?;
    if !nginx_method(method) || line.first() == Some(&b' ') {
        return Err(Error::bad_request("client sent invalid method"));
    }
    // A method with nothing after it never was a method, for nginx.
    let target = parts
        .next()
        .ok_or(Error::bad_request("client sent invalid method"))?;
    if target.iter().any(|&b| b <= 0x20 || b == 0x7f) {
        return Err(invalid);
    }
    // nginx reads left to right: a target of neither form is refused before the version.
    if target.first() != Some(&b'/') {
        split_absolute(target)?;
    }
    // No version: an HTTP/0.9 simple request, which can only be a GET.
    let Some(version) = parts.next() else {
        if bare_authority_ends(line, target) {
            return Err(invalid);
        }
        if method != b"GET" {
            return Err(Error::bad_request(
                "client sent invalid method in HTTP/0.9 request",
            ));
        }
        return Ok((method, target, Version::Http09));
    };
    // A version above 1.x is a 505 whatever follows it.
    let version = parse_version(version)?;
    if parts.next().is_some() {
        return Err(invalid);
    }
    Ok((method, target, version))
}

/// nginx's version grammar: `HTTP/`, a major of digits not starting with 0 (above 1 is a 505 as
/// soon as it is seen), a dot, a minor of digits (a digit after the minor passed 99 is refused).
fn parse_version(v: &[u8]) -> Result<Version, Error> {
    match version_prefix(v)? {
        Some(version) => Ok(version),
        None => Err(Error::bad_request("client sent invalid request")),
    }
}

/// The start of a version as nginx reads it: an error as soon as `v` cannot begin a valid one;
/// else the version `v` would be if it ended here (`None`: not yet a version).
fn version_prefix(v: &[u8]) -> Result<Option<Version>, Error> {
    let invalid = Error::bad_request("client sent invalid request");
    let unsupported = Error::new(
        ErrorKind::VersionNotSupported,
        "client sent unsupported HTTP version",
    );
    let Some(rest) = v.strip_prefix(b"HTTP/") else {
        return if b"HTTP/".starts_with(v) {
            Ok(None)
        } else {
            Err(invalid)
        };
    };
    let mut bytes = rest.iter();
    let mut major = match bytes.next() {
        Some(&d @ b'1'..=b'9') => u32::from(d - b'0'),
        Some(_) => return Err(invalid),
        None => return Ok(None),
    };
    loop {
        if major > 1 {
            return Err(unsupported);
        }
        match bytes.next() {
            Some(b'.') => break,
            Some(&d) if d.is_ascii_digit() => major = major * 10 + u32::from(d - b'0'),
            Some(_) => return Err(invalid),
            None => return Ok(None),
        }
    }
    let mut minor = match bytes.next() {
        Some(&d) if d.is_ascii_digit() => u32::from(d - b'0'),
        Some(_) => return Err(invalid),
        None => return Ok(None),
    };
    for &d in bytes {
        if !d.is_ascii_digit() || minor > 99 {
            return Err(invalid);
        }
        minor = minor * 10 + u32::from(d - b'0');
    }
    Ok(Some(if minor == 0 {
        Version::Http10
    } else {
        Version::Http11
    }))
}

/// Headers nginx 1.22 allows once per request (beyond Host, Content-Length, Transfer-Encoding
/// and Expect, checked where they are read).
const UNIQUE: [&[u8]; 7] = [
    b"content-range",
    b"if-modified-since",
    b"if-unmodified-since",
    b"if-match",
    b"if-none-match",
    b"if-range",
    b"authorization",
];

/// The most header lines a request may have (Debian's nginx 1.22.1 refuses the 1001st kept
/// line with "client sent too many header lines"; lines `ignore_invalid_headers` drops do not
/// count).
pub const MAX_HEADERS: usize = 1000;

/// nginx refuses the line past [`MAX_HEADERS`] as it reads it, with the page of a head too
/// large (494, "Request Header Or Cookie Too Large", sent as 400): a line after it that is
/// wrong is never read.
fn too_many_headers() -> Error {
    Error::new(
        ErrorKind::HeaderTooLarge,
        "client sent too many header lines",
    )
}

/// A complete request line (its line end included) as nginx reads it before any header: its
/// error, or whether it is an HTTP/0.9 simple request, which nginx answers at once (no
/// header comes after one). Only the scanner's road asks: a head that came whole in one piece
/// is read by the others.
pub(crate) fn check_request_line(line: &[u8]) -> Result<bool, Error> {
    let line = skip_leading_cr(line);
    let Ok(content) = line_content(line) else {
        // A stray CR: nginx refuses the line at the byte after it (or earlier, when what
        // comes before is already wrong), without waiting for the rest of the head.
        let line = line.strip_suffix(b"\n").unwrap_or(line);
        return Err(
            line_prefix_error(line).unwrap_or(Error::bad_request("client sent invalid request"))
        );
    };
    let (_, _, version) = parse_request_line(content)?;
    Ok(version == Version::Http09)
}

/// Whether `bytes` (a refused head, or what was read of one) start with an HTTP/0.9 simple
/// request line, valid or not: a method and a target, no version. nginx answers it the 0.9
/// way, its body without a status line or headers.
pub fn is_simple_request(bytes: &[u8]) -> bool {
    let start = bytes
        .iter()
        .position(|&b| b != b'\r' && b != b'\n')
        .unwrap_or(bytes.len());
    let rest = &bytes[start..];
    let Some(end) = memchr::memchr(b'\n', rest) else {
        return false;
    };
    let line = &rest[..end];
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    let mut parts = line.split(|&b| b == b' ').filter(|p| !p.is_empty());
    if line.starts_with(b" ") || !parts.next().is_some_and(nginx_method) {
        return false;
    }
    let Some(target) = parts.next() else {
        return false;
    };
    // nginx refuses a control byte in a target where it meets it, before the line's end.
    if target.iter().any(|&b| b < 0x20 || b == 0x7f) {
        return false;
    }
    let target_read = target.first() == Some(&b'/')
        || (split_absolute(target).is_ok() && !bare_authority_ends(line, target));
    target_read && parts.next().is_none()
}

/// Whether `target`, the last word of request line `line`, is an absolute-form target with
/// nothing after its authority that ends the line: nginx ends an authority at a space, `/` or
/// `?`, so `GET http://a` is refused where `GET http://a ` is an HTTP/0.9 request.
fn bare_authority_ends(line: &[u8], target: &[u8]) -> bool {
    let Some(sep) = memchr::memmem::find(target, b"://") else {
        return false;
    };
    target.first() != Some(&b'/')
        && !target[sep + 3..].iter().any(|&b| b == b'/' || b == b'?')
        && line.ends_with(target)
}

/// A line before the request line without its leading CRs: nginx skips CR and LF bytes before
/// a request, alone or in any order (`\rGET / HTTP/1.0` is a request).
pub(crate) fn skip_leading_cr(mut line: &[u8]) -> &[u8] {
    while let [b'\r', rest @ ..] = line {
        line = rest;
    }
    line
}

/// nginx's `ngx_strcasestrn`: is `needle` anywhere in `hay`, ignoring ASCII case?
fn contains_ignore_case(hay: &[u8], needle: &[u8]) -> bool {
    hay.windows(needle.len())
        .any(|w| w.eq_ignore_ascii_case(needle))
}

/// The checks the roads share: target, Host, framing, keep-alive.
fn finish(head: Bytes, raw: RawHead, limits: &Limits) -> Result<Request, Error> {
    let mut out = None;
    finish_into(head, raw, limits, &mut uri::HostMemo::default(), &mut out)?;
    // (Filled whenever it succeeds.)
    out.ok_or(Error::bad_request("client sent invalid request"))
}

/// [`finish`] into `out`.
fn finish_into(
    head: Bytes,
    raw: RawHead,
    limits: &Limits,
    host_memo: &mut uri::HostMemo,
    out: &mut Option<Request>,
) -> Result<(), Error> {
    let mut host_header: Option<&[u8]> = None;
    let mut content_length: Option<&[u8]> = None;
    let mut transfer_encoding: Option<&[u8]> = None;
    let mut close = false;
    let mut keep_alive_token = false;
    let mut expect_continue: Option<bool> = None;
    let mut unique_seen = 0u8;
    let duplicate = Error::bad_request("client sent duplicate header line");
    let mut names = 0u64;
    if raw.headers.len() > MAX_HEADERS {
        return Err(too_many_headers());
    }
    for h in &raw.headers {
        let name = h.name.get(&head);
        let value = h.value.get(&head);
        names |= name_bit(name);
        if name.eq_ignore_ascii_case(b"host") {
            if host_header.replace(value).is_some() {
                return Err(duplicate);
            }
        } else if name.eq_ignore_ascii_case(b"content-length") {
            // Even an identical duplicate is refused: nginx does, and it closes a smuggling door.
            if content_length.replace(value).is_some() {
                return Err(duplicate);
            }
        } else if name.eq_ignore_ascii_case(b"transfer-encoding") {
            if transfer_encoding.replace(value).is_some() {
                return Err(duplicate);
            }
        } else if name.eq_ignore_ascii_case(b"connection") {
            // As nginx: the last line that names either wins, found as a substring anywhere.
            if contains_ignore_case(value, b"close") {
                (close, keep_alive_token) = (true, false);
            } else if contains_ignore_case(value, b"keep-alive") {
                (close, keep_alive_token) = (false, true);
            }
        } else if name.eq_ignore_ascii_case(b"expect") {
            if expect_continue
                .replace(value.eq_ignore_ascii_case(b"100-continue"))
                .is_some()
            {
                return Err(duplicate);
            }
        } else if let Some(i) = UNIQUE.iter().position(|u| name.eq_ignore_ascii_case(u)) {
            // nginx 1.22 keeps one of these and refuses a second.
            if unique_seen & (1 << i) != 0 {
                return Err(duplicate);
            }
            unique_seen |= 1 << i;
        }
    }
    let expect_continue = expect_continue == Some(true);

    // The target: origin-form, or absolute-form whose host wins over Host (as nginx).
    let target = raw.target.get(&head);
    let (path_part, query, target_host, request_uri) = if target.first() == Some(&b'/') {
        let (p, q) = uri::split_query(target);
        (p, q, None, Piece::InHead(raw.target))
    } else {
        let (authority, p, q) = split_absolute(target)?;
        // What follows the authority: `$request_uri`, and what goes upstream.
        let rest = Span::of(&head, authority).end;
        let rest = head.get(rest..raw.target.end).unwrap_or_default();
        let request_uri = if rest.is_empty() {
            Piece::Own(b"/".to_vec())
        } else {
            Piece::InHead(Span::of(&head, rest))
        };
        (p, q, Some(authority), request_uri)
    };
    let path = Piece::of(&head, uri::normalize_path(path_part, limits.merge_slashes)?);

    // nginx validates Host even when the request line's host is the one used.
    let header_host = host_header.map(|h| host_memo.validate(h)).transpose()?;
    let host = match target_host {
        Some(h) => Some(
            uri::validate_host(h)
                .map_err(|_| Error::bad_request("client sent invalid host in request line"))?,
        ),
        None => header_host,
    };
    if host_header.is_none() && raw.version >= Version::Http11 {
        return Err(Error::bad_request(
            "client sent HTTP/1.1 request without \"Host\" header",
        ));
    }
    let host = host.map(|h| Piece::of(&head, h));

    let body = body::framing(raw.version, content_length, transfer_encoding)?;
    // nginx refuses these with the head, whatever the location would have done.
    let method = raw.method.get(&head);
    if method == b"TRACE" {
        return Err(Error::new(
            ErrorKind::MethodNotAllowed,
            "client sent TRACE method",
        ));
    }
    if method == b"CONNECT" {
        return Err(Error::new(
            ErrorKind::MethodNotAllowed,
            "client sent CONNECT method",
        ));
    }
    let keep_alive = match raw.version {
        Version::Http11 | Version::Http2 => !close,
        Version::Http10 => keep_alive_token && !close,
        Version::Http09 => false,
    };
    let query = query.map(|q| Span::of(&head, q));
    let usual_method = match method {
        b"GET" => Some("GET"),
        b"HEAD" => Some("HEAD"),
        b"POST" => Some("POST"),
        _ => None,
    };
    *out = Some(Request {
        method: raw.method,
        usual_method,
        target: raw.target,
        request_uri,
        query,
        version: raw.version,
        headers: raw.headers,
        names,
        path,
        host,
        keep_alive,
        expect_continue: expect_continue && raw.version >= Version::Http11,
        body,
        head,
    });
    Ok(())
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

/// The parts of an absolute-form target: authority, path, query.
type AbsoluteParts<'a> = (&'a [u8], &'a [u8], Option<&'a [u8]>);

/// `scheme://authority[/path][?query]` → (authority, path, query), with nginx's grammar: a
/// scheme of a letter then letters, digits, `+ - .`; the authority ends at `/` or `?` (a `#`
/// there is refused). The path defaults to `/`.
fn split_absolute(target: &[u8]) -> Result<AbsoluteParts<'_>, Error> {
    let invalid = Error::bad_request("client sent invalid request");
    let sep = memchr::memmem::find(target, b"://").ok_or(invalid)?;
    if !valid_scheme(&target[..sep]) {
        return Err(invalid);
    }
    let rest = &target[sep + 3..];
    let auth_end = rest
        .iter()
        .position(|&b| b == b'/' || b == b'?')
        .unwrap_or(rest.len());
    let authority = &rest[..auth_end];
    if !valid_authority(authority) {
        return Err(Error::bad_request(
            "client sent invalid host in request line",
        ));
    }
    let after = &rest[auth_end..];
    let (path, query) = uri::split_query(after);
    let path: &[u8] = if path.is_empty() { b"/" } else { path };
    Ok((authority, path, query))
}

/// A scheme as nginx reads one: a letter, then letters, digits, `+`, `-`, `.` (`h2`,
/// `a+b-c.d`); empty is not one.
fn valid_scheme(s: &[u8]) -> bool {
    s.first().is_some_and(u8::is_ascii_alphabetic) && s.iter().all(|&b| scheme_byte(b))
}

fn scheme_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'+' || b == b'-' || b == b'.'
}

/// A byte nginx takes inside `[...]` in a request line's host: RFC 3986's unreserved and
/// sub-delims and `:` (so `[v1.x]` and `[]` are hosts, as `[::1]` is).
fn ip_literal_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b":-._~!$&'()*+,;=".contains(&b)
}

/// A byte of a request line's host name: `[A-Za-z0-9.-]`.
fn host_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'.' || b == b'-'
}

/// nginx's request-line host grammar: a name of `[A-Za-z0-9.-]` or a `[...]` literal, then an
/// optional `:port` of digits (possibly none).
fn valid_authority(a: &[u8]) -> bool {
    let port = if a.first() == Some(&b'[') {
        let Some(close) = memchr::memchr(b']', a) else {
            return false;
        };
        if !a[1..close].iter().all(|&b| ip_literal_byte(b)) {
            return false;
        }
        &a[close + 1..]
    } else {
        let end = memchr::memchr(b':', a).unwrap_or(a.len());
        let host = &a[..end];
        // An empty name passes here; the host check refuses it.
        if !host.iter().all(|&b| host_byte(b)) {
            return false;
        }
        &a[end..]
    };
    match port {
        [] => true,
        [b':', digits @ ..] => digits.iter().all(u8::is_ascii_digit),
        _ => false,
    }
}

/// Could `a` (an authority cut short: no `/` or `?` yet) still become a valid one?
fn valid_authority_prefix(a: &[u8]) -> bool {
    let port = if let Some(inner) = a.strip_prefix(b"[") {
        match memchr::memchr(b']', inner) {
            None => return inner.iter().all(|&b| ip_literal_byte(b)),
            Some(close) if inner[..close].iter().all(|&b| ip_literal_byte(b)) => {
                &inner[close + 1..]
            }
            Some(_) => return false,
        }
    } else {
        let end = memchr::memchr(b':', a).unwrap_or(a.len());
        if !a[..end].iter().all(|&b| host_byte(b)) {
            return false;
        }
        &a[end..]
    };
    match port {
        [] => true,
        [b':', digits @ ..] => digits.iter().all(u8::is_ascii_digit),
        _ => false,
    }
}

#[cfg(test)]
#[path = "request_tests.rs"]
mod tests;
