//! Header lines: the fast road for a plain head, and the careful one, line by line with nginx's
//! rules (the CGI heads of uwsgi and SCGI are read by it too).

use super::*;

/// The bytes a header name may hold in nginx's parser (for an upstream): over 0x20, not DEL,
/// not the colon that ends it.
pub(super) const NAME_BYTE: [bool; 256] = {
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
pub(super) fn headers_fast(data: &[u8], status: &StatusLine) -> Option<RawHead> {
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
pub(super) enum HState {
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

pub(super) fn span_pair(
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
pub(super) fn headers_careful(
    data: &[u8],
    status: StatusLine,
) -> Result<Option<RawHead>, UpstreamError> {
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
pub(super) fn contains_ignore_case(value: &[u8], needle: &[u8]) -> bool {
    value
        .windows(needle.len())
        .any(|w| w.eq_ignore_ascii_case(needle))
}
