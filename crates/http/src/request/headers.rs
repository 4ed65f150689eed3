//! Header lines: nginx's name classes, the httparse road (`parse_fast`) and the careful road
//! (`parse_careful`) that reads a head line by line to give nginx's answer, and the value
//! trimming both share.

use super::*;

/// Character classes of header-name bytes, one table lookup per byte on the hot path.
pub(super) const NGINX_NAME: u8 = 1;
pub(super) const UNDERSCORE: u8 = 2;

pub(super) static NAME_CLASS: [u8; 256] = {
    let mut t = [0u8; 256];
    let mut b = 0;
    while b < 256 {
        let c = b as u8;
        if c.is_ascii_alphanumeric() || c == b'-' {
            t[b] = NGINX_NAME;
        }
        b += 1;
    }
    t[b'_' as usize] = UNDERSCORE;
    t
};

/// Is `name` valid by nginx's rules: `[A-Za-z0-9-]`, plus `_` with `underscores_in_headers`.
pub(super) fn nginx_valid_name(name: &[u8], underscores: bool) -> bool {
    let ok = if underscores {
        NGINX_NAME | UNDERSCORE
    } else {
        NGINX_NAME
    };
    name.iter().all(|&b| NAME_CLASS[usize::from(b)] & ok != 0)
}

/// Whether a header whose name passed the syntax checks (no control byte, space or DEL) is
/// kept: a name nginx calls invalid is dropped with `ignore_invalid_headers`, else kept
/// whatever its bytes (`@`, `/`, UTF-8: MinIO's and Jenkins' configurations turn it off for
/// such names), as nginx's parser only flags it.
pub(super) fn keep_header(name: &[u8], limits: &Limits) -> bool {
    !limits.ignore_invalid_headers || nginx_valid_name(name, limits.underscores_in_headers)
}

pub(super) const HEADER_SLOTS: usize = 32;

/// The httparse road: `None` when httparse refuses (the careful road then decides).
pub(super) fn parse_fast(head: &[u8], header_lines: usize, limits: &Limits) -> Option<RawHead> {
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
        if keep_header(h.name.as_bytes(), limits) {
            headers.push(HeaderSpan {
                name: Span::of(head, h.name.as_bytes()),
                value: nginx_value(head, Span::of(head, h.value)),
            });
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
pub(super) fn line_content(line: &[u8]) -> Result<&[u8], Error> {
    let line = line.strip_suffix(b"\n").unwrap_or(line);
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    if memchr::memchr(b'\r', line).is_some() {
        return Err(Error::bad_request("client sent invalid header line"));
    }
    Ok(line)
}

/// [`line_content`] for a header line, as nginx's header parser reads one: any number of CRs
/// may come before its LF (`X: a\r\r\n` is `a`: its `sw_almost_done` stays put on a CR), but
/// a line that starts with a CR is the head's end, and there the CR must be the LF's
/// (`\r\r\n` is refused, `sw_header_almost_done`).
pub(super) fn header_line_content(line: &[u8]) -> Result<&[u8], Error> {
    let mut content = line.strip_suffix(b"\n").unwrap_or(line);
    if let [b'\r', rest @ ..] = content {
        return match rest {
            [] => Ok(rest),
            _ => Err(Error::bad_request("client sent invalid header line")),
        };
    }
    while let [rest @ .., b'\r'] = content {
        content = rest;
    }
    if memchr::memchr(b'\r', content).is_some() {
        return Err(Error::bad_request("client sent invalid header line"));
    }
    Ok(content)
}

/// Whether nginx refuses a header line (with its LF) whatever came before it: a CR, control
/// byte or space in its name, an empty name, a NUL in its value, a CR not before the LF.
pub(crate) fn refused_header_line(line: &[u8]) -> bool {
    let Ok(content) = header_line_content(line) else {
        return true;
    };
    let colon = memchr::memchr(b':', content).unwrap_or(content.len());
    let (name, value) = content.split_at(colon);
    name.is_empty() || name.iter().any(|&b| b <= 0x20 || b == 0x7f) || value.contains(&0)
}

/// Whether a header line's name is one nginx checks against the lines before it as it reads
/// it (`Host`, which it also validates, and the headers it allows once).
pub(crate) fn header_checked_at_its_line(line: &[u8]) -> bool {
    let Some(colon) = memchr::memchr(b':', line) else {
        return false;
    };
    let name = &line[..colon];
    [
        &b"host"[..],
        b"content-length",
        b"transfer-encoding",
        b"expect",
    ]
    .iter()
    .chain(UNIQUE.iter())
    .any(|n| name.eq_ignore_ascii_case(n))
}

/// The careful road: line by line, with nginx's answer for each way a head can be wrong.
pub(super) fn parse_careful(head: &[u8], limits: &Limits) -> Result<RawHead, Error> {
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
        let content = header_line_content(line)?;
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
        if keep_header(name, limits) {
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
pub(super) fn trim_ows(mut v: &[u8]) -> &[u8] {
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
pub(super) fn nginx_value(head: &[u8], v: Span) -> Span {
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

/// The most header lines a request may have (Debian's nginx 1.22.1 refuses the 1001st kept
/// line with "client sent too many header lines"; lines `ignore_invalid_headers` drops do not
/// count).
pub const MAX_HEADERS: usize = 1000;

/// nginx refuses the line past [`MAX_HEADERS`] as it reads it, with the page of a head too
/// large (494, "Request Header Or Cookie Too Large", sent as 400): a line after it that is
/// wrong is never read.
pub(super) fn too_many_headers() -> Error {
    Error::new(
        ErrorKind::HeaderTooLarge,
        "client sent too many header lines",
    )
}
