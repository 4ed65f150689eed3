//! The CGI-style answer head that FastCGI, SCGI and uwsgi applications send: header lines, a
//! `Status` header instead of a status line, read with nginx 1.22's rules into the same
//! [`UpstreamHead`] the HTTP proxy consumes.
//!
//! What nginx does, checked against nginx 1.22 on FastCGI, SCGI and uwsgi servers that send
//! each shape:
//!
//! - Header lines are read by the same parser as an HTTP upstream's ([`crate::upstream`]): a
//!   bare LF ends a line, a line without a colon is a header with an empty value, a line
//!   starting `HTTP/` is skipped. So a FastCGI application that writes `HTTP/1.1 404 ...` first
//!   gets a 200: that line is skipped.
//! - SCGI and uwsgi answers may also start with an HTTP status line
//!   ([`CgiHeadParser::http_or_cgi`]); nginx tries one, and when the first bytes cannot be one,
//!   reads the whole answer as CGI header lines from its first byte. With a status line, a
//!   `Status` header changes nothing.
//! - Without a status line, the status is the first `Status` header's: its value must start
//!   with three digits (`Status: 404 Not Found`, `Status: 201`, `Status: 404x`), and the whole
//!   value is what nginx sends after `HTTP/1.1 `; anything else is `upstream sent invalid status
//!   "..."` (502). Without `Status`, a `Location` header (whatever its value, even empty) makes
//!   it `302 Moved Temporarily`; without either it is `200 OK`.
//! - The head must end within the first `max` bytes (the `*_buffer_size`), else `upstream sent
//!   too big header`.
//!
//! What the head means for the body is not HTTP's: `Transfer-Encoding: chunked` is not decoded
//! (nginx passes such a body on as it came, and drops the header), `Connection` says nothing
//! about reuse, and only `Content-Length` counts (the last one; one that does not parse means no
//! length). [`framing`] says how an SCGI or uwsgi body ends; FastCGI's ends with its records
//! ([`crate::fastcgi`]).
//!
//! Which headers go on to the client (nginx hides `Status` for FastCGI and SCGI but not for
//! uwsgi, and the `X-Accel-*` ones for all three) is listed by each protocol's module.

use bytes::{Bytes, BytesMut};

use crate::upstream::{
    scan_line, status_line, Framing, HeaderSpan, Line, LineScan, Span, Text, UpstreamError,
    UpstreamHead,
};

/// How the head starts, once enough bytes say it.
#[derive(Clone, Copy, Debug)]
enum Start {
    /// An HTTP status line (SCGI, uwsgi).
    StatusLine {
        status: u16,
        line: Span,
        reason: Span,
    },
    /// Header lines from the first byte.
    Headers,
}

/// Reads a CGI-style head as bytes arrive. Call [`CgiHeadParser::parse`] with everything read
/// so far (the same bytes and more each time): it resumes at the first line not yet complete,
/// so a head that trickles in is still read once. Once it answers a head (or an error) it is
/// ready for another answer.
#[derive(Clone, Debug)]
pub struct CgiHeadParser {
    /// Whether an HTTP status line may come first.
    status_line: bool,
    start: Option<Start>,
    /// The scan of the first header line not yet complete.
    line: LineScan,
    headers: Vec<HeaderSpan>,
}

impl CgiHeadParser {
    /// FastCGI's stdout: header lines only.
    pub fn cgi() -> CgiHeadParser {
        CgiHeadParser::new(false)
    }

    /// SCGI's and uwsgi's answers: an HTTP status line and header lines, or header lines only.
    pub fn http_or_cgi() -> CgiHeadParser {
        CgiHeadParser::new(true)
    }

    fn new(status_line: bool) -> CgiHeadParser {
        CgiHeadParser {
            status_line,
            start: None,
            line: LineScan::new(0),
            headers: Vec::new(),
        }
    }

    /// Looks for the complete head at the start of `buf`, in its first `max` bytes. `Ok(None)`:
    /// not over yet, call again with more bytes. On success the head's bytes are copied once;
    /// [`UpstreamHead::head_len`] says where the body starts.
    pub fn parse(&mut self, buf: &[u8], max: usize) -> Result<Option<UpstreamHead>, UpstreamError> {
        let Some(len) = self.scan(buf, max)? else {
            return Ok(None);
        };
        let head = Bytes::copy_from_slice(buf.get(..len).unwrap_or_default());
        self.finish(head).map(Some)
    }

    /// [`CgiHeadParser::parse`] on a read buffer: on success the head is split off `buf`
    /// (shared, not copied), leaving the start of the body in it.
    pub fn parse_buf(
        &mut self,
        buf: &mut BytesMut,
        max: usize,
    ) -> Result<Option<UpstreamHead>, UpstreamError> {
        let Some(len) = self.scan(buf, max)? else {
            return Ok(None);
        };
        let head = buf.split_to(len).freeze();
        self.finish(head).map(Some)
    }

    /// Finds the end of the head: `Ok(Some(len))`, its length through the empty line.
    fn scan(&mut self, buf: &[u8], max: usize) -> Result<Option<usize>, UpstreamError> {
        let data = buf.get(..max.min(buf.len())).unwrap_or_default();
        if self.line.at() > data.len() {
            // The caller changed the buffer under us; start over rather than index out of it.
            *self = CgiHeadParser::new(self.status_line);
        }
        if self.start.is_none() {
            if !self.status_line {
                self.start = Some(Start::Headers);
            } else {
                match status_line(data) {
                    Ok(Some(line)) => {
                        self.line = LineScan::new(line.end);
                        self.start = Some(Start::StatusLine {
                            status: line.status,
                            line: line.line,
                            reason: line.reason,
                        });
                    }
                    Ok(None) => return incomplete(buf, max),
                    // Not a status line: header lines from the first byte.
                    Err(_) => self.start = Some(Start::Headers),
                }
            }
        }
        loop {
            match scan_line(data, &mut self.line) {
                Line::Header(h) => {
                    self.headers.push(h);
                    self.line = LineScan::new(self.line.at());
                }
                Line::Skipped => self.line = LineScan::new(self.line.at()),
                Line::End => return Ok(Some(self.line.at())),
                Line::Incomplete => return incomplete(buf, max),
                Line::Invalid { start, end } => {
                    let error = UpstreamError::InvalidHeader {
                        line: data.get(start..end).unwrap_or_default().to_vec(),
                        byte: data.get(end).copied().unwrap_or_default(),
                    };
                    *self = CgiHeadParser::new(self.status_line);
                    return Err(error);
                }
            }
        }
    }

    /// The status, as nginx decides it, and the head; resets the parser.
    fn finish(&mut self, head: Bytes) -> Result<UpstreamHead, UpstreamError> {
        let start = self.start.unwrap_or(Start::Headers);
        let headers = std::mem::take(&mut self.headers);
        *self = CgiHeadParser::new(self.status_line);
        let named = |name: &[u8]| {
            headers
                .iter()
                .find(|h| h.name.get(&head).eq_ignore_ascii_case(name))
                .copied()
        };
        let (status, line, reason) = match start {
            Start::StatusLine {
                status,
                line,
                reason,
            } => (status, Text::In(line), Text::In(reason)),
            Start::Headers => match named(b"status") {
                Some(h) => {
                    let value = h.value.get(&head);
                    let Some(status) = three_digits(value) else {
                        return Err(UpstreamError::InvalidStatus(value.to_vec()));
                    };
                    // The reason: what follows the digits, leading spaces left out.
                    let after = value[3..].iter().take_while(|&&b| b == b' ').count();
                    let reason = Span::new(h.value.start() + 3 + after, h.value.end());
                    (status, Text::In(h.value), Text::In(reason))
                }
                None if named(b"location").is_some() => (
                    302,
                    Text::Fixed(b"302 Moved Temporarily"),
                    Text::Fixed(b"Moved Temporarily"),
                ),
                None => (200, Text::Fixed(b"200 OK"), Text::Fixed(b"OK")),
            },
        };
        Ok(UpstreamHead::cgi(head, status, line, reason, headers))
    }
}

/// The status in the first three bytes of a `Status` value (nginx's `ngx_atoi(value, 3)`).
fn three_digits(value: &[u8]) -> Option<u16> {
    match value {
        [a, b, c, ..] if a.is_ascii_digit() && b.is_ascii_digit() && c.is_ascii_digit() => {
            Some(u16::from(a - b'0') * 100 + u16::from(b - b'0') * 10 + u16::from(c - b'0'))
        }
        _ => None,
    }
}

/// A head not over yet: more bytes may come, unless the buffer is full.
fn incomplete<T>(buf: &[u8], max: usize) -> Result<Option<T>, UpstreamError> {
    if buf.len() >= max {
        Err(UpstreamError::TooBigHeader)
    } else {
        Ok(None)
    }
}

/// A FastCGI stdout head in one piece (the whole of `buf` is looked at): see
/// [`CgiHeadParser::parse`].
pub fn parse_cgi_head(buf: &[u8], max: usize) -> Result<Option<UpstreamHead>, UpstreamError> {
    CgiHeadParser::cgi().parse(buf, max)
}

/// How an SCGI or uwsgi answer's body ends, as nginx 1.22 decides: nothing after 204 and 304;
/// up to the close for a HEAD request (whatever the length says); else the `Content-Length`
/// (nginx cuts what comes beyond it, [`crate::upstream::UpstreamBodyDecoder`] does the same), or
/// up to the close without one. Never chunked: such a body passes on as it came. These
/// connections are never reused.
pub fn framing(head: &UpstreamHead, head_request: bool) -> Framing {
    if head.status() == 204 || head.status() == 304 {
        return Framing::None;
    }
    if head_request {
        return Framing::Close;
    }
    match head.content_length() {
        Some(0) => Framing::None,
        Some(n) => Framing::Length(n),
        None => Framing::Close,
    }
}

/// The parameter name a request header travels under (what nginx does for
/// `*_pass_request_headers`): `HTTP_`, then the name in upper case with `-` as `_`
/// (`User-Agent` is `HTTP_USER_AGENT`).
///
/// nginx leaves out a header whose parameter name a `*_param` directive already sets (so
/// `fastcgi_param HTTP_HOST $host` replaces the client's `Host`); that is the caller's list.
pub fn http_param_name(header: &[u8]) -> Vec<u8> {
    let mut name = Vec::with_capacity(5 + header.len());
    name.extend_from_slice(b"HTTP_");
    name.extend(header.iter().map(|&b| match b {
        b'-' => b'_',
        _ => b.to_ascii_uppercase(),
    }));
    name
}

#[cfg(test)]
#[path = "cgi_tests.rs"]
mod tests;
