//! Absolute-form targets (`http://host/path`): the scheme and authority grammars as nginx
//! reads them.

use super::*;

/// The parts of an absolute-form target: authority, path, query.
pub(super) type AbsoluteParts<'a> = (&'a [u8], &'a [u8], Option<&'a [u8]>);

/// `scheme://authority[/path][?query]` → (authority, path, query), with nginx's grammar: a
/// scheme of a letter then letters, digits, `+ - .`; the authority ends at `/` or `?` (a `#`
/// there is refused). The path defaults to `/`.
pub(super) fn split_absolute(target: &[u8]) -> Result<AbsoluteParts<'_>, Error> {
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
    // A byte outside the grammar stops nginx's request-line parser: "invalid request"; a
    // host that parses but fails the host check later is "invalid host in request line".
    if !valid_authority(authority) {
        return Err(invalid);
    }
    let after = &rest[auth_end..];
    let (path, query) = uri::split_query(after);
    let path: &[u8] = if path.is_empty() { b"/" } else { path };
    Ok((authority, path, query))
}

/// A scheme as nginx reads one: a letter, then letters, digits, `+`, `-`, `.` (`h2`,
/// `a+b-c.d`); empty is not one.
pub(super) fn valid_scheme(s: &[u8]) -> bool {
    s.first().is_some_and(u8::is_ascii_alphabetic) && s.iter().all(|&b| scheme_byte(b))
}

pub(super) fn scheme_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'+' || b == b'-' || b == b'.'
}

/// A byte nginx takes inside `[...]` in a request line's host: RFC 3986's unreserved and
/// sub-delims and `:` (so `[v1.x]` and `[]` are hosts, as `[::1]` is).
pub(super) fn ip_literal_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b":-._~!$&'()*+,;=".contains(&b)
}

/// A byte of a request line's host name: `[A-Za-z0-9.-]`.
pub(super) fn host_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'.' || b == b'-'
}

/// nginx's request-line host grammar: a name of `[A-Za-z0-9.-]` or a `[...]` literal, then an
/// optional `:port` of digits (possibly none).
pub(super) fn valid_authority(a: &[u8]) -> bool {
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
pub(super) fn valid_authority_prefix(a: &[u8]) -> bool {
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
