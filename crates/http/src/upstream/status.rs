//! The status line (`HTTP/x.y NNN reason`), as nginx's `ngx_http_parse_status_line` reads it.

use super::*;

pub(crate) struct StatusLine {
    pub(super) version: Version,
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
    // (Made only when returned: an unused one would be dropped at every call.)
    let bad = || Err(UpstreamError::NoValidHeader);
    let prefix = &b"HTTP/"[..data.len().min(5)];
    if !data.starts_with(prefix) {
        return bad();
    }
    let mut i = prefix.len();
    // Major: a first digit 1-9, then digits (refused once it is over 99 and another comes).
    let mut major: u32 = match data.get(i) {
        None => return Ok(None),
        Some(&d @ b'1'..=b'9') => u32::from(d - b'0'),
        Some(_) => return bad(),
    };
    i += 1;
    loop {
        match data.get(i) {
            None => return Ok(None),
            Some(b'.') => break,
            Some(&d @ b'0'..=b'9') if major <= 99 => major = major * 10 + u32::from(d - b'0'),
            Some(_) => return bad(),
        }
        i += 1;
    }
    i += 1;
    let mut minor: u32 = match data.get(i) {
        None => return Ok(None),
        Some(&d @ b'0'..=b'9') => u32::from(d - b'0'),
        Some(_) => return bad(),
    };
    i += 1;
    loop {
        match data.get(i) {
            None => return Ok(None),
            Some(b' ') => break,
            Some(&d @ b'0'..=b'9') if minor <= 99 => minor = minor * 10 + u32::from(d - b'0'),
            Some(_) => return bad(),
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
            Some(_) => return bad(),
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
            Some(_) => return bad(),
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
                    Some(_) => return bad(),
                }
            }
        }
        Some(_) => return bad(),
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
