//! The request line: nginx's method characters, the target, the version grammar, and
//! HTTP/0.9's simple requests (and the CRs nginx skips before a request).

use super::*;

/// nginx's method characters: `A`-`Z`, `_` and `-` (so `get` is a 400, not a 405).
pub(super) fn nginx_method(m: &[u8]) -> bool {
    !m.is_empty()
        && m.iter()
            .all(|&b| b.is_ascii_uppercase() || b == b'_' || b == b'-')
}

/// `METHOD SP+ target SP+ HTTP/x.y SP*`, or HTTP/0.9's `GET SP+ target SP*`.
pub(super) fn parse_request_line(line: &[u8]) -> Result<(&[u8], &[u8], Version), Error> {
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
pub(super) fn parse_version(v: &[u8]) -> Result<Version, Error> {
    match version_prefix(v)? {
        Some(version) => Ok(version),
        None => Err(Error::bad_request("client sent invalid request")),
    }
}

/// The start of a version as nginx reads it: an error as soon as `v` cannot begin a valid one;
/// else the version `v` would be if it ended here (`None`: not yet a version).
pub(super) fn version_prefix(v: &[u8]) -> Result<Option<Version>, Error> {
    let invalid = Error::bad_request("client sent invalid request");
    let unsupported = Error::new(
        ErrorKind::VersionNotSupported,
        "client sent invalid version",
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
pub(super) fn bare_authority_ends(line: &[u8], target: &[u8]) -> bool {
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
