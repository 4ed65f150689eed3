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

/// Why an upstream's answer was refused. Each reads like nginx's error-log line (level `error`
/// unless said otherwise); all are a 502 for the client (`proxy_next_upstream invalid_header`
/// may try another server first), except [`UpstreamError::NoValidHeader`], see there.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum UpstreamError {
    /// The head did not fit in `proxy_buffer_size` bytes.
    TooBigHeader,
    /// The status line is not `HTTP/major.minor SP code ...`. nginx logs this, then relays the
    /// bytes as they are (HTTP/0.9 style: status 200 for `$upstream_status`, `009` logged, no
    /// head sent to the client, body to the upstream's close, connections not reused).
    NoValidHeader,
    /// A header line nginx's parser refuses; `line` is the line up to the offending byte (as
    /// nginx's `header_name_start..header_end`), `byte` the byte at that point.
    InvalidHeader {
        /// The line up to the offending byte (without it).
        line: Vec<u8>,
        /// The offending byte.
        byte: u8,
    },
    /// [`Rules::Nginx123`]: a second `Content-Length` or `Transfer-Encoding` line.
    DuplicateHeader {
        /// The repeated line's name and value.
        name: Vec<u8>,
        /// Its value.
        value: Vec<u8>,
        /// The first line's name.
        previous_name: Vec<u8>,
        /// The first line's value.
        previous_value: Vec<u8>,
    },
    /// [`Rules::Nginx123`]: both `Content-Length` and `Transfer-Encoding`.
    ContentLengthAndTransferEncoding,
    /// [`Rules::Nginx123`]: a `Transfer-Encoding` other than exactly `chunked`.
    UnknownTransferEncoding(Vec<u8>),
    /// [`Rules::Nginx123`]: a `Content-Length` that is not a plain decimal number.
    InvalidContentLength {
        /// The header's name as sent.
        name: Vec<u8>,
        /// Its value.
        value: Vec<u8>,
    },
    /// A CGI-style head ([`crate::cgi`]) whose `Status` value does not start with three
    /// digits; the value as sent.
    InvalidStatus(Vec<u8>),
    /// A chunked body that does not parse.
    InvalidChunkedResponse,
    /// The upstream closed before the body's framing said it was over.
    PrematureClose,
}

/// Writes `bytes` for the error log: printable ASCII as is, anything else as `\xNN` (nginx
/// writes the raw bytes; a log line here is text).
fn escaped(f: &mut fmt::Formatter<'_>, bytes: &[u8]) -> fmt::Result {
    for &b in bytes {
        if (0x20..0x7f).contains(&b) {
            fmt::Write::write_char(f, char::from(b))?;
        } else {
            write!(f, "\\x{b:02x}")?;
        }
    }
    Ok(())
}

impl fmt::Display for UpstreamError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            UpstreamError::TooBigHeader => f.write_str("upstream sent too big header"),
            UpstreamError::NoValidHeader => f.write_str("upstream sent no valid HTTP/1.0 header"),
            UpstreamError::InvalidHeader { line, byte } => {
                // nginx: "upstream sent invalid header: \"%*s\\x%02xd...\"".
                f.write_str("upstream sent invalid header: \"")?;
                escaped(f, line)?;
                write!(f, "\\x{byte:02x}...\"")
            }
            UpstreamError::DuplicateHeader {
                name,
                value,
                previous_name,
                previous_value,
            } => {
                f.write_str("upstream sent duplicate header line: \"")?;
                escaped(f, name)?;
                f.write_str(": ")?;
                escaped(f, value)?;
                f.write_str("\", previous value: \"")?;
                escaped(f, previous_name)?;
                f.write_str(": ")?;
                escaped(f, previous_value)?;
                f.write_str("\"")
            }
            UpstreamError::ContentLengthAndTransferEncoding => f.write_str(
                "upstream sent \"Content-Length\" and \"Transfer-Encoding\" headers at the same time",
            ),
            UpstreamError::UnknownTransferEncoding(v) => {
                f.write_str("upstream sent unknown \"Transfer-Encoding\": \"")?;
                escaped(f, v)?;
                f.write_str("\"")
            }
            UpstreamError::InvalidContentLength { name, value } => {
                f.write_str("upstream sent invalid \"Content-Length\" header: \"")?;
                escaped(f, name)?;
                f.write_str(": ")?;
                escaped(f, value)?;
                f.write_str("\"")
            }
            UpstreamError::InvalidStatus(v) => {
                f.write_str("upstream sent invalid status \"")?;
                escaped(f, v)?;
                f.write_str("\"")
            }
            UpstreamError::InvalidChunkedResponse => {
                f.write_str("upstream sent invalid chunked response")
            }
            UpstreamError::PrematureClose => {
                f.write_str("upstream prematurely closed connection while reading upstream")
            }
        }
    }
}

impl std::error::Error for UpstreamError {}

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

pub(crate) struct StatusLine {
    version: Version,
    pub(crate) status: u16,
    pub(crate) line: Span,
    pub(crate) reason: Span,
    /// Offset just past the line's LF.
    pub(crate) end: usize,
}

/// `ngx_http_parse_status_line`: `HTTP/` major `.` minor SP+ three digits (spaces may come
/// between them too), then SP or `.` and any text, or the end of the line. `Ok(None)` if the
/// bytes so far are a valid beginning.
pub(crate) fn status_line(data: &[u8]) -> Result<Option<StatusLine>, UpstreamError> {
    let bad = Err(UpstreamError::NoValidHeader);
    let prefix = &b"HTTP/"[..data.len().min(5)];
    if !data.starts_with(prefix) {
        return bad;
    }
    let mut i = prefix.len();
    // Major: a first digit 1-9, then digits (refused once it is over 99 and another comes).
    let mut major: u32 = match data.get(i) {
        None => return Ok(None),
        Some(&d @ b'1'..=b'9') => u32::from(d - b'0'),
        Some(_) => return bad,
    };
    i += 1;
    loop {
        match data.get(i) {
            None => return Ok(None),
            Some(b'.') => break,
            Some(&d @ b'0'..=b'9') if major <= 99 => major = major * 10 + u32::from(d - b'0'),
            Some(_) => return bad,
        }
        i += 1;
    }
    i += 1;
    let mut minor: u32 = match data.get(i) {
        None => return Ok(None),
        Some(&d @ b'0'..=b'9') => u32::from(d - b'0'),
        Some(_) => return bad,
    };
    i += 1;
    loop {
        match data.get(i) {
            None => return Ok(None),
            Some(b' ') => break,
            Some(&d @ b'0'..=b'9') if minor <= 99 => minor = minor * 10 + u32::from(d - b'0'),
            Some(_) => return bad,
        }
        i += 1;
    }
    i += 1;
    let mut status: u16 = 0;
    let mut digits = 0;
    while digits < 3 {
        match data.get(i) {
            None => return Ok(None),
            Some(b' ') => {}
            Some(&d @ b'0'..=b'9') => {
                status = status * 10 + u16::from(d - b'0');
                digits += 1;
            }
            Some(_) => return bad,
        }
        i += 1;
    }
    // nginx's status line starts two bytes before the third digit (a quirk when spaces came
    // between the digits, kept so the client sees what nginx would send).
    let start = i - 3;
    let (reason_start, content_end, end) = match data.get(i) {
        None => return Ok(None),
        Some(b'\n') => (i, i, i + 1),
        Some(b'\r') => match data.get(i + 1) {
            None => return Ok(None),
            Some(b'\n') => (i, i, i + 2),
            Some(_) => return bad,
        },
        Some(b' ' | b'.') => {
            let text = i + 1;
            let Some(lf) = data
                .get(text..)
                .and_then(|rest| memchr::memchr2(b'\r', b'\n', rest))
            else {
                return Ok(None);
            };
            let at = text + lf;
            if data[at] == b'\n' {
                (text, at, at + 1)
            } else {
                match data.get(at + 1) {
                    None => return Ok(None),
                    Some(b'\n') => (text, at, at + 2),
                    Some(_) => return bad,
                }
            }
        }
        Some(_) => return bad,
    };
    let version = if major == 1 && minor == 0 {
        Version::Http10
    } else {
        Version::Http11
    };
    Ok(Some(StatusLine {
        version,
        status,
        line: Span::new(start, content_end),
        reason: Span::new(reason_start, content_end),
        end,
    }))
}

/// The bytes a header name may hold in nginx's parser (for an upstream): over 0x20, not DEL,
/// not the colon that ends it.
const NAME_BYTE: [bool; 256] = {
    let mut t = [false; 256];
    let mut b = 0x21;
    while b < 256 {
        t[b] = b != 0x7f && b != b':' as usize;
        b += 1;
    }
    t
};

/// The fast road, for a complete, ordinary head: each line `Name: value` ended by LF or CR LF,
/// read in one pass with no state machine. `None` whenever the line is anything else (no
/// colon, a byte the careful road refuses or treats specially, a CR or NUL inside the value, a
/// repeated status line, the head not over yet); the careful road then decides, and the two
/// must agree on whatever the fast road takes (`roads_agree`, the fuzz target).
fn headers_fast(data: &[u8], status: &StatusLine) -> Option<RawHead> {
    let mut headers = Vec::with_capacity(16);
    let mut pos = status.end;
    let len = loop {
        let line = data.get(pos..)?;
        match line {
            [b'\n', ..] => break pos + 1,
            [b'\r', b'\n', ..] => break pos + 2,
            _ => {}
        }
        if line.starts_with(b"HTTP/") {
            return None;
        }
        // The name: anything over 0x20 but DEL, up to the colon.
        let mut i = line.iter().position(|&b| !NAME_BYTE[usize::from(b)])?;
        if i == 0 || line[i] != b':' {
            return None;
        }
        let name = Span::new(pos, pos + i);
        i += 1;
        while line.get(i) == Some(&b' ') {
            i += 1;
        }
        // The value, spaces (not tabs) around it left out; an empty one sits where the line
        // ends, as nginx's does.
        let start = i;
        let mut end = i;
        loop {
            match *line.get(i)? {
                b'\n' => break,
                b'\r' => {
                    if *line.get(i + 1)? != b'\n' {
                        return None;
                    }
                    i += 1;
                    break;
                }
                0 => return None,
                b' ' => {}
                _ => end = i + 1,
            }
            i += 1;
        }
        headers.push(HeaderSpan {
            name,
            value: Span::new(pos + start, pos + end),
        });
        pos += i + 1;
    };
    Some(RawHead {
        version: status.version,
        status: status.status,
        status_line: status.line,
        reason: status.reason,
        headers,
        len,
    })
}

/// One header line as `ngx_http_parse_header_line(r, b, 1)` sees it.
pub(crate) enum Line {
    Header(HeaderSpan),
    /// A repeated status line (`HTTP/...`), skipped.
    Skipped,
    /// The empty line.
    End,
    Incomplete,
    Invalid {
        start: usize,
        end: usize,
    },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum HState {
    Start,
    Name,
    SpaceBeforeValue,
    Value,
    SpaceAfterValue,
    IgnoreLine,
    AlmostDone,
    HeaderAlmostDone,
}

/// Where the scan of a header line stopped for want of bytes, so that it resumes there when
/// more come (a line that trickles in is read once, not once per arrival).
#[derive(Clone, Copy, Debug)]
pub(crate) struct LineScan {
    /// Where the line starts.
    pos: usize,
    /// The next byte to look at.
    at: usize,
    state: HState,
    name_end: usize,
    value_start: usize,
    header_end: usize,
}

impl LineScan {
    /// A scan of the line starting at `pos`.
    pub(crate) fn new(pos: usize) -> LineScan {
        LineScan {
            pos,
            at: pos,
            state: HState::Start,
            name_end: pos,
            value_start: pos,
            header_end: pos,
        }
    }

    /// Past the last byte looked at: after a complete line, past its LF.
    pub(crate) fn at(&self) -> usize {
        self.at
    }
}

/// Reads the line starting at `pos`; `next` is set past its LF.
pub(crate) fn header_line(data: &[u8], pos: usize, next: &mut usize) -> Line {
    let mut scan = LineScan::new(pos);
    let line = scan_line(data, &mut scan);
    *next = scan.at;
    line
}

/// Reads a header line from where `scan` stopped; on [`Line::Incomplete`] `scan` keeps where
/// it is, to be called again with the same bytes and more.
pub(crate) fn scan_line(data: &[u8], scan: &mut LineScan) -> Line {
    let pos = scan.pos;
    let mut state = scan.state;
    let (mut name_end, mut value_start) = (scan.name_end, scan.value_start);
    // nginx's `r->header_end`: where the value ends, and where an error is reported.
    let mut header_end = scan.header_end;
    let invalid = |end| Line::Invalid { start: pos, end };
    for (p, &ch) in data.iter().enumerate().skip(scan.at) {
        scan.at = p + 1;
        match state {
            HState::Start => match ch {
                b'\r' => {
                    header_end = p;
                    state = HState::HeaderAlmostDone;
                }
                b'\n' => return Line::End,
                _ if ch <= 0x20 || ch == 0x7f || ch == b':' => return invalid(p),
                _ => state = HState::Name,
            },
            HState::Name => match ch {
                b':' => {
                    name_end = p;
                    state = HState::SpaceBeforeValue;
                }
                b'\r' | b'\n' => {
                    // A line without a colon: a header with an empty value.
                    name_end = p;
                    value_start = p;
                    header_end = p;
                    if ch == b'\n' {
                        return Line::Header(span_pair(pos, name_end, value_start, header_end));
                    }
                    state = HState::AlmostDone;
                }
                // IIS may send the duplicate "HTTP/1.1 ..." lines.
                b'/' if p - pos == 4 && &data[pos..p] == b"HTTP" => state = HState::IgnoreLine,
                _ if ch <= 0x20 || ch == 0x7f => return invalid(p),
                _ => {}
            },
            HState::SpaceBeforeValue => match ch {
                b' ' => {}
                b'\r' | b'\n' => {
                    value_start = p;
                    header_end = p;
                    if ch == b'\n' {
                        return Line::Header(span_pair(pos, name_end, value_start, header_end));
                    }
                    state = HState::AlmostDone;
                }
                0 => return invalid(p),
                _ => {
                    value_start = p;
                    state = HState::Value;
                }
            },
            HState::Value => match ch {
                b' ' => {
                    header_end = p;
                    state = HState::SpaceAfterValue;
                }
                b'\r' => {
                    header_end = p;
                    state = HState::AlmostDone;
                }
                b'\n' => {
                    return Line::Header(span_pair(pos, name_end, value_start, p));
                }
                0 => return invalid(p),
                _ => {}
            },
            HState::SpaceAfterValue => match ch {
                b' ' => {}
                b'\r' => state = HState::AlmostDone,
                b'\n' => {
                    return Line::Header(span_pair(pos, name_end, value_start, header_end));
                }
                0 => return invalid(p),
                _ => state = HState::Value,
            },
            HState::IgnoreLine => {
                if ch == b'\n' {
                    return Line::Skipped;
                }
            }
            HState::AlmostDone => match ch {
                b'\n' => {
                    return Line::Header(span_pair(pos, name_end, value_start, header_end));
                }
                b'\r' => {}
                // nginx does not move `header_end` here: the log shows the line so far.
                _ => return invalid(header_end),
            },
            HState::HeaderAlmostDone => {
                if ch == b'\n' {
                    return Line::End;
                }
                return invalid(header_end);
            }
        }
    }
    scan.state = state;
    scan.name_end = name_end;
    scan.value_start = value_start;
    scan.header_end = header_end;
    Line::Incomplete
}

fn span_pair(
    name_start: usize,
    name_end: usize,
    value_start: usize,
    value_end: usize,
) -> HeaderSpan {
    HeaderSpan {
        name: Span::new(name_start, name_end),
        value: Span::new(value_start, value_end.max(value_start)),
    }
}

/// The careful road: nginx's state machine, line by line. `Ok(None)` if the head is not over
/// and nothing so far is wrong.
fn headers_careful(data: &[u8], status: StatusLine) -> Result<Option<RawHead>, UpstreamError> {
    let mut headers = Vec::new();
    let mut pos = status.end;
    loop {
        let mut next = pos;
        match header_line(data, pos, &mut next) {
            Line::Header(h) => headers.push(h),
            Line::Skipped => {}
            Line::End => {
                return Ok(Some(RawHead {
                    version: status.version,
                    status: status.status,
                    status_line: status.line,
                    reason: status.reason,
                    headers,
                    len: next,
                }))
            }
            Line::Incomplete => return Ok(None),
            Line::Invalid { start, end } => {
                return Err(UpstreamError::InvalidHeader {
                    line: data.get(start..end).unwrap_or_default().to_vec(),
                    byte: data.get(end).copied().unwrap_or_default(),
                })
            }
        }
        pos = next;
    }
}

/// Does `value` contain `needle` (lower case), ignoring ASCII case? (nginx's
/// `ngx_strlcasestrn`.)
fn contains_ignore_case(value: &[u8], needle: &[u8]) -> bool {
    value
        .windows(needle.len())
        .any(|w| w.eq_ignore_ascii_case(needle))
}

/// The header handlers: framing and connection, by `rules`.
fn finish(head: Bytes, raw: RawHead, rules: Rules) -> Result<UpstreamHead, UpstreamError> {
    let mut content_length: Option<(HeaderSpan, Option<u64>)> = None;
    let mut transfer_encoding: Option<HeaderSpan> = None;
    let mut lengths = 0;
    let mut encodings = 0;
    let mut chunked = false;
    let mut exact_chunked = true;
    let mut close = raw.version < Version::Http11;
    let get = |s: Span| s.get(&head).to_vec();
    for h in &raw.headers {
        let name = h.name.get(&head);
        let value = h.value.get(&head);
        if name.eq_ignore_ascii_case(b"content-length") {
            let n = parse_content_length(value);
            if rules == Rules::Nginx123 {
                if let Some((prev, _)) = content_length {
                    return Err(duplicate(&get, *h, prev));
                }
                if transfer_encoding.is_some() {
                    return Err(UpstreamError::ContentLengthAndTransferEncoding);
                }
                if n.is_none() {
                    return Err(UpstreamError::InvalidContentLength {
                        name: name.to_vec(),
                        value: value.to_vec(),
                    });
                }
            }
            lengths += 1;
            content_length = Some((*h, n));
        } else if name.eq_ignore_ascii_case(b"transfer-encoding") {
            let exact = value.eq_ignore_ascii_case(b"chunked");
            if rules == Rules::Nginx123 {
                if let Some(prev) = transfer_encoding {
                    return Err(duplicate(&get, *h, prev));
                }
                if content_length.is_some() {
                    return Err(UpstreamError::ContentLengthAndTransferEncoding);
                }
                if !exact {
                    return Err(UpstreamError::UnknownTransferEncoding(value.to_vec()));
                }
            }
            encodings += 1;
            exact_chunked &= exact;
            chunked |= contains_ignore_case(value, b"chunked");
            transfer_encoding = Some(*h);
        } else if name.eq_ignore_ascii_case(b"connection") {
            close |= contains_ignore_case(value, b"close");
        }
    }
    let length = content_length.and_then(|(_, n)| n);
    let ambiguous = lengths > 1
        || encodings > 1
        || (lengths > 0 && encodings > 0)
        || (encodings > 0 && !exact_chunked)
        || (lengths > 0 && length.is_none());
    Ok(UpstreamHead {
        version: raw.version,
        status: raw.status,
        status_line: Text::In(raw.status_line),
        reason: Text::In(raw.reason),
        headers: raw.headers,
        // nginx clears the length of a chunked response.
        content_length: if chunked { None } else { length },
        chunked,
        connection_close: close,
        ambiguous,
        head,
    })
}

fn duplicate(get: &dyn Fn(Span) -> Vec<u8>, h: HeaderSpan, prev: HeaderSpan) -> UpstreamError {
    UpstreamError::DuplicateHeader {
        name: get(h.name),
        value: get(h.value),
        previous_name: get(prev.name),
        previous_value: get(prev.value),
    }
}

/// Cuts an upstream's response body out of what is read from it, for any [`Framing`] but a
/// tunnel (which is not a body; treated as [`Framing::Close`]).
///
/// Bytes left in the buffer after [`BodyChunk::Done`] are not part of the response: nginx
/// drops them, logs [`UpstreamBodyDecoder::extra_data_warning`] at `warn`, and does not reuse
/// the connection.
#[derive(Clone, Debug)]
pub enum UpstreamBodyDecoder {
    /// A body of known length (0 for [`Framing::None`]).
    Length(LengthDecoder),
    /// A chunked body, with nginx's chunk grammar ([`ChunkedDecoder::for_upstream`]).
    Chunked(ChunkedDecoder),
    /// Everything until the upstream closes.
    Close,
}

impl UpstreamBodyDecoder {
    /// The decoder for `framing`.
    pub fn new(framing: Framing) -> UpstreamBodyDecoder {
        match framing {
            Framing::None => UpstreamBodyDecoder::Length(LengthDecoder::new(0)),
            Framing::Length(n) => UpstreamBodyDecoder::Length(LengthDecoder::new(n)),
            Framing::Chunked => UpstreamBodyDecoder::Chunked(ChunkedDecoder::for_upstream()),
            Framing::Close | Framing::Tunnel => UpstreamBodyDecoder::Close,
        }
    }

    /// Whether the body is complete (never for [`UpstreamBodyDecoder::Close`]: only the close
    /// ends it, see [`UpstreamBodyDecoder::eof`]).
    pub fn is_done(&self) -> bool {
        match self {
            UpstreamBodyDecoder::Length(d) => d.is_done(),
            UpstreamBodyDecoder::Chunked(d) => d.is_done(),
            UpstreamBodyDecoder::Close => false,
        }
    }

    /// Takes the next piece of body from the front of `buf`.
    pub fn decode_buf(&mut self, buf: &mut BytesMut) -> Result<BodyChunk, UpstreamError> {
        match self {
            UpstreamBodyDecoder::Length(d) => Ok(d.decode_buf(buf)),
            UpstreamBodyDecoder::Chunked(d) => d
                .decode_buf(buf)
                .map_err(|_| UpstreamError::InvalidChunkedResponse),
            UpstreamBodyDecoder::Close if buf.is_empty() => Ok(BodyChunk::NeedMore),
            UpstreamBodyDecoder::Close => Ok(BodyChunk::Data(buf.split().freeze())),
        }
    }

    /// The upstream closed the connection: fine for a body delimited by the close or already
    /// complete, else the response was cut short (the client's connection is then closed
    /// without completing the response, as nginx does).
    pub fn eof(&self) -> Result<(), UpstreamError> {
        match self {
            UpstreamBodyDecoder::Close => Ok(()),
            _ if self.is_done() => Ok(()),
            _ => Err(UpstreamError::PrematureClose),
        }
    }

    /// nginx's `warn` line for bytes after the end of the body.
    pub fn extra_data_warning(&self) -> &'static str {
        match self {
            UpstreamBodyDecoder::Chunked(_) => "upstream sent data after final chunk",
            _ => "upstream sent more data than specified in \"Content-Length\" header",
        }
    }
}

#[cfg(test)]
#[path = "upstream_tests.rs"]
mod tests;
