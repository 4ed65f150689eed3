//! nginx's request-head limits, and the scanner that enforces them while bytes arrive.
//!
//! nginx reads a request head into one `client_header_buffer_size` buffer; a line that does not
//! fit moves (with what it has of that line) into one of `large_client_header_buffers`. So a line
//! may never be longer than one large buffer, and the whole head must pack, line by line, into
//! the first buffer plus the large ones. [`Scanner`] replays that packing over the line lengths,
//! which gives nginx's answers without nginx's buffers: a request line that cannot fit is 414, a
//! header line or a head that cannot fit is 400 "Request Header Or Cookie Too Large".
//!
//! The scanner looks at every byte once (memchr for `\n`), remembers where it stopped, and fails
//! as soon as the partial line in hand can no longer fit: a client cannot make us rescan or hold
//! more than the limits allow.

use crate::error::{Error, ErrorKind};

/// nginx's `large_client_header_buffers number size`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LargeBuffers {
    /// How many large buffers one request may use (nginx default 4).
    pub num: usize,
    /// The size of each (nginx default 8k): the longest line allowed.
    pub size: usize,
}

/// The directives that shape request-head parsing; `Default` is nginx's defaults.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// `client_header_buffer_size` (1k).
    pub client_header_buffer_size: usize,
    /// `large_client_header_buffers` (4 8k).
    pub large_client_header_buffers: LargeBuffers,
    /// `ignore_invalid_headers` (on): header lines with names outside `[A-Za-z0-9-]` are dropped.
    pub ignore_invalid_headers: bool,
    /// `underscores_in_headers` (off): whether `_` counts as valid in a header name.
    pub underscores_in_headers: bool,
    /// `merge_slashes` (on): `//` in the path becomes `/`.
    pub merge_slashes: bool,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            client_header_buffer_size: 1024,
            large_client_header_buffers: LargeBuffers { num: 4, size: 8192 },
            ignore_invalid_headers: true,
            underscores_in_headers: false,
            merge_slashes: true,
        }
    }
}

impl Limits {
    /// The most bytes a request head can take: the size a read buffer needs for any head these
    /// limits accept.
    pub fn max_head_len(&self) -> usize {
        let large = self.large_client_header_buffers;
        self.client_header_buffer_size
            .saturating_add(large.num.saturating_mul(large.size))
    }
}

/// Finds the end of a request head incrementally while replaying nginx's buffer packing.
#[derive(Clone, Debug, Default)]
pub(crate) struct Scanner {
    /// Start of the line not yet terminated.
    line_start: usize,
    /// Where the search for `\n` resumes (everything before it has been looked at).
    search_from: usize,
    /// A non-empty line (the request line) has been seen.
    seen_request_line: bool,
    /// Number of header lines (after the request line, before the empty line).
    header_lines: usize,
    /// Bytes used in the current buffer, its capacity, and large buffers taken so far.
    used: usize,
    capacity: usize,
    large_taken: usize,
    started: bool,
    /// CRs and LFs skipped before the request line, at the start of the buffer, not yet given
    /// to [`Scanner::take_skipped`].
    skipped: usize,
    /// After an error found inside a line: how far nginx had read when it refused the head.
    refused_to: Option<usize>,
    /// Where the header lines not yet looked at for a line nginx refuses start (see
    /// [`Scanner::check_lines`]).
    checked: usize,
}

/// A complete head found by the scanner.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct HeadEnd {
    /// Bytes from the start of the buffer through the empty line.
    pub len: usize,
    /// Header lines seen (an upper bound for the header count).
    pub header_lines: usize,
}

impl Scanner {
    /// Looks at `buf` (the same buffer as last time, possibly longer) from where the last call
    /// stopped. `Ok(None)` means more bytes are needed.
    pub fn scan(&mut self, buf: &[u8], limits: &Limits) -> Result<Option<HeadEnd>, Error> {
        if !self.started {
            self.started = true;
            self.capacity = limits.client_header_buffer_size;
        }
        if self.search_from > buf.len() || self.line_start > self.search_from {
            // The caller changed the buffer under us; start over rather than index out of it.
            *self = Scanner::default();
            self.started = true;
            self.capacity = limits.client_header_buffer_size;
        }
        loop {
            if !self.seen_request_line {
                self.skip_before_request(buf);
            } else if buf.get(self.line_start) == Some(&b'\r') {
                // A line that starts with a CR ends the head: nginx refuses any byte but the
                // LF after that CR as it comes, not once a head is whole.
                if buf.get(self.line_start + 1).is_some_and(|&b| b != b'\n') {
                    self.refused_to = Some(self.line_start + 2);
                    return Err(Error::bad_request("client sent invalid header line"));
                }
            }
            let rest = buf.get(self.search_from..).unwrap_or_default();
            match memchr::memchr(b'\n', rest) {
                Some(i) => {
                    let end = self.search_from + i + 1;
                    let line = buf.get(self.line_start..end).unwrap_or_default();
                    let empty = line == b"\n" || line == b"\r\n";
                    let request_line = !self.seen_request_line && !empty;
                    if !self.place(line.len(), limits) {
                        return Err(self.too_large(buf, request_line, limits));
                    }
                    self.line_start = end;
                    self.search_from = end;
                    if empty {
                        if self.seen_request_line {
                            return Ok(Some(HeadEnd {
                                len: end,
                                header_lines: self.header_lines,
                            }));
                        }
                    } else if request_line && crate::request::check_request_line(line)? {
                        // HTTP/0.9: the request line is the whole head.
                        return Ok(Some(HeadEnd {
                            len: end,
                            header_lines: 0,
                        }));
                    } else if self.seen_request_line {
                        self.header_lines += 1;
                    } else {
                        self.seen_request_line = true;
                        self.checked = end;
                    }
                }
                None => {
                    let partial = buf.len() - self.line_start;
                    self.search_from = buf.len();
                    if partial > 0 && !self.fits(partial, limits) {
                        return Err(self.too_large(buf, !self.seen_request_line, limits));
                    }
                    if self.seen_request_line {
                        self.check_lines(buf, limits)?;
                    }
                    if partial > 0 && !self.seen_request_line {
                        // nginx parses the request line as it arrives: a wrong method (TLS
                        // bytes on a plain port, say) is answered at once, not after
                        // `client_header_timeout`.
                        let seen = buf.get(self.line_start..).unwrap_or_default();
                        if let Some(e) = crate::request::line_prefix_error(seen) {
                            return Err(e);
                        }
                    }
                    return Ok(None);
                }
            }
        }
    }

    /// Before waiting for more of a head, its header lines not yet looked at: nginx reads each
    /// as it comes, so one it refuses is answered now, not once a head that may never end has
    /// ended (with the answer of the first wrong line: the walk finds it). A line of a header
    /// nginx allows once, or `Host`, is walked to as well: the walk is the head's, but there are
    /// few such names, and a second of one ends the head. A head that came whole in one read is
    /// never looked at here: the roads that parse it refuse it.
    fn check_lines(&mut self, buf: &[u8], limits: &Limits) -> Result<(), Error> {
        let lines = buf.get(self.checked..self.line_start).unwrap_or_default();
        let mut end = self.checked;
        for line in lines.split_inclusive(|&b| b == b'\n') {
            end += line.len();
            let refused = crate::request::refused_header_line(line);
            if refused || crate::request::header_checked_at_its_line(line) {
                let read = buf.get(..end).unwrap_or_default();
                let e = match crate::request::first_line_error(read, limits) {
                    Some(e) => e,
                    None if refused => Error::bad_request("client sent invalid header line"),
                    None => continue,
                };
                self.refused_to = Some(end);
                return Err(e);
            }
        }
        self.checked = self.line_start;
        Ok(())
    }

    /// Steps over the CRs and LFs before a request line, as nginx skips them: they take room in
    /// the first buffer, and a buffer full of them is reused from its start, so they never
    /// make a head too large however many there are.
    fn skip_before_request(&mut self, buf: &[u8]) {
        let rest = buf.get(self.line_start..).unwrap_or_default();
        let skipped = rest
            .iter()
            .take_while(|&&b| b == b'\r' || b == b'\n')
            .count();
        if skipped > 0 {
            self.used = (self.used + skipped) % self.capacity.max(1);
            self.line_start += skipped;
            self.search_from = self.search_from.max(self.line_start);
            self.skipped += skipped;
        }
    }

    /// How many bytes at the start of the buffer were skipped before the request line since
    /// the last call; the caller drops them from its buffer (so that no number of them grows
    /// it), and the scanner's places move with them.
    pub fn take_skipped(&mut self) -> usize {
        let n = std::mem::take(&mut self.skipped);
        self.line_start -= n;
        self.search_from -= n;
        self.checked = self.checked.saturating_sub(n);
        n
    }

    /// Could a line of `len` bytes still be placed?
    fn fits(&self, len: usize, limits: &Limits) -> bool {
        let large = limits.large_client_header_buffers;
        self.used + len <= self.capacity || (len <= large.size && self.large_taken < large.num)
    }

    /// Places a complete line, moving to a fresh large buffer when it does not fit. False: it
    /// cannot be placed.
    fn place(&mut self, len: usize, limits: &Limits) -> bool {
        let large = limits.large_client_header_buffers;
        if self.used + len <= self.capacity {
            self.used += len;
            return true;
        }
        if len > large.size || self.large_taken >= large.num {
            return false;
        }
        self.large_taken += 1;
        self.capacity = large.size;
        self.used = len;
        true
    }

    /// Whether this scanner has seen part of a head.
    pub fn started(&self) -> bool {
        self.started
    }

    /// After an error, where the bytes nginx had read end: the start of the line that did not
    /// fit, or just past the byte that was refused.
    pub fn refused_to(&self) -> usize {
        self.refused_to.unwrap_or(self.line_start)
    }

    /// The answer for the line at `line_start` that does not fit: for a header line, 494 unless
    /// a line before it was already wrong. A request line is 414 unless
    /// the part nginx would have read is already wrong: nginx parses as it reads, so a bad
    /// method or version is its 400 (or 505) first. It reads the whole of its first buffer
    /// before it looks for a large one, then the line up to a large buffer's size.
    fn too_large(&self, buf: &[u8], request_line: bool, limits: &Limits) -> Error {
        if !request_line {
            // nginx reads each line as it comes: a wrong line before this one is its answer.
            let before = buf.get(..self.line_start).unwrap_or_default();
            if let Some(e) = crate::request::first_line_error(before, limits) {
                return e;
            }
            return Error::new(
                ErrorKind::HeaderTooLarge,
                "client sent too long header line",
            );
        }
        let line = buf.get(self.line_start..).unwrap_or_default();
        let in_first = if self.large_taken == 0 {
            self.capacity.saturating_sub(self.used)
        } else {
            0
        };
        let read = in_first.max(limits.large_client_header_buffers.size);
        let seen = &line[..line.len().min(read)];
        crate::request::line_prefix_error(seen).unwrap_or(Error::new(
            ErrorKind::UriTooLong,
            "client sent too long URI",
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scan_all(buf: &[u8], limits: &Limits) -> Result<Option<HeadEnd>, Error> {
        Scanner::default().scan(buf, limits)
    }

    #[test]
    fn finds_end_and_counts_lines() {
        let l = Limits::default();
        let r = scan_all(b"\r\nGET / HTTP/1.1\r\nHost: a\nX: y\r\n\r\nbody", &l);
        assert_eq!(
            r,
            Ok(Some(HeadEnd {
                len: 34,
                header_lines: 2
            }))
        );
    }

    #[test]
    fn byte_by_byte_equals_whole() {
        let l = Limits::default();
        let req = b"GET /x HTTP/1.1\r\nHost: a\r\nA: b\r\n\r\nnext";
        let mut s = Scanner::default();
        let mut found = None;
        for n in 1..=req.len() {
            if let Some(end) = s.scan(&req[..n], &l).unwrap() {
                found = Some((n, end));
                break;
            }
        }
        let (n, end) = found.unwrap();
        assert_eq!(n, req.len() - 4);
        assert_eq!(Some(end), scan_all(req, &l).unwrap());
    }

    #[test]
    fn request_line_over_large_buffer_is_414_early() {
        let l = Limits::default();
        let mut line = b"GET /".to_vec();
        line.resize(8193, b'a');
        let e = scan_all(&line, &l).unwrap_err();
        assert_eq!(e.status(), 414);
        line.truncate(8000);
        assert_eq!(scan_all(&line, &l), Ok(None));
    }

    /// nginx parses its whole first buffer before it finds the line too long, even when a
    /// large buffer is smaller (found by the `http_request` fuzzer: the line whole was a 414,
    /// the same bytes in two pieces a 400).
    #[test]
    fn request_line_wrong_within_the_first_buffer_is_not_414() {
        let l = Limits {
            client_header_buffer_size: 60,
            large_client_header_buffers: LargeBuffers { num: 1, size: 43 },
            ..Limits::default()
        };
        let mut line = b"O___".to_vec();
        line.resize(47, b'J');
        line.push(0);
        line.resize(69, b'J');
        let e = scan_all(&line, &l).unwrap_err();
        assert_eq!(
            (e.status(), e.context()),
            (400, "client sent invalid method")
        );
        line.push(b'\n');
        assert_eq!(scan_all(&line, &l).unwrap_err().status(), 400);
        // Past the first buffer only a large buffer's worth is read.
        let mut line = b"GET /".to_vec();
        line.resize(8200, b'a');
        line.extend_from_slice(b" \x00\n");
        assert_eq!(
            scan_all(&line, &Limits::default()).unwrap_err().status(),
            414
        );
    }

    /// nginx reuses a first buffer full of CRs and LFs before a request: however many, they
    /// are no head too large (found by the `http_request` fuzzer: a run of CRs longer than a
    /// large buffer was a 494 whole and a 414 in two pieces).
    #[test]
    fn crs_and_lfs_before_a_request_never_fill_the_buffers() {
        let small = Limits {
            client_header_buffer_size: 61,
            large_client_header_buffers: LargeBuffers { num: 1, size: 64 },
            ..Limits::default()
        };
        let mut req = vec![b'\r'; 76];
        req.extend_from_slice(b"\n\n\nG /A HTTP/1\x00\x00\x00\n");
        let whole = scan_all(&req, &small).unwrap_err();
        assert_eq!(whole.status(), 400);
        for at in 1..req.len() {
            let mut s = Scanner::default();
            let first = s.scan(&req[..at], &small);
            let e = match first {
                Ok(None) => s.scan(&req, &small).unwrap_err(),
                Ok(Some(_)) => panic!("a head in {at} bytes"),
                Err(e) => e,
            };
            assert_eq!(e, whole, "split at {at}");
        }
        for lead in [&b"\r\n"[..], b"\r", b"\n"] {
            let mut req = lead.repeat(20_000);
            req.extend_from_slice(b"GET / HTTP/1.0\r\n\r\n");
            let end = scan_all(&req, &Limits::default()).unwrap().unwrap();
            assert_eq!(end.len, req.len());
        }
    }

    #[test]
    fn header_line_over_large_buffer_is_494() {
        let l = Limits::default();
        let mut req = b"GET / HTTP/1.1\r\nCookie: ".to_vec();
        req.resize(req.len() + 8200, b'c');
        let e = scan_all(&req, &l).unwrap_err();
        assert_eq!((e.code(), e.status()), (494, 400));
    }

    #[test]
    fn whole_head_over_the_buffers_is_494() {
        let l = Limits::default();
        let mut req = b"GET / HTTP/1.1\r\n".to_vec();
        // Five 5000-byte lines: each needs its own large buffer, and there are only four.
        for _ in 0..5 {
            req.extend_from_slice(b"X: ");
            req.resize(req.len() + 4995, b'v');
            req.extend_from_slice(b"\r\n");
        }
        req.extend_from_slice(b"\r\n");
        assert_eq!(scan_all(&req, &l).unwrap_err().code(), 494);
        // Four fit.
        let cut = 16 + 4 * 5000;
        let mut ok = req[..cut].to_vec();
        ok.extend_from_slice(b"\r\n");
        assert!(scan_all(&ok, &l).unwrap().is_some());
    }
}
