//! What COPY and MOVE read from the request: the `Destination` URI (nginx's checks of its
//! scheme and host, then `ngx_http_parse_unsafe_uri`: `..` segments and NUL refused, `%XX`
//! decoded, the arguments cut off), `Depth` and `Overwrite`. Pure: no I/O, unit-tested here.

/// `Depth`, as `ngx_http_dav_depth` reads it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Depth {
    Zero,
    One,
    Infinity,
    /// Anything else (logged by the caller: `client sent invalid "Depth" header`).
    Invalid,
}

/// The request's `Depth` (`dflt` without one).
pub fn depth(value: Option<&[u8]>, dflt: Depth) -> Depth {
    match value {
        None => dflt,
        Some(b"0") => Depth::Zero,
        Some(b"1") => Depth::One,
        Some(b"infinity") => Depth::Infinity,
        Some(_) => Depth::Invalid,
    }
}

/// Why a `Destination` was refused, with nginx's log line for it (the status is 400 for
/// every one).
#[derive(Debug, PartialEq, Eq)]
pub enum Refused {
    /// `client sent no "Host" header`.
    NoHost,
    /// `"Destination" URI "..." is handled by different repository than the source URI`.
    OtherHost,
    /// `client sent invalid "Destination" header: "..."`, after `unsafe URI "..." was
    /// detected` when the path was the reason (the decoded path, as nginx logs it).
    Invalid { unsafe_uri: Option<Vec<u8>> },
}

/// The path `Destination` names, decoded: a path alone, or `http://` (`https://` on a TLS
/// connection) and a host starting with the request's (`host`, nginx's
/// `r->headers_in.server`: compared as a prefix, the port not looked at), then a path.
pub fn parse(dest: &[u8], host: Option<&[u8]>, tls: bool) -> Result<Vec<u8>, Refused> {
    let path = if dest.first() == Some(&b'/') {
        dest
    } else {
        let host = match host {
            Some(h) if !h.is_empty() => h,
            _ => return Err(Refused::NoHost),
        };
        let scheme: &[u8] = if tls { b"https://" } else { b"http://" };
        let Some(rest) = dest.strip_prefix(scheme) else {
            return Err(Refused::Invalid { unsafe_uri: None });
        };
        if !rest.starts_with(host) {
            return Err(Refused::OtherHost);
        }
        match rest[host.len()..].iter().position(|&c| c == b'/') {
            Some(i) => &rest[host.len() + i..],
            None => return Err(Refused::Invalid { unsafe_uri: None }),
        }
    };
    unsafe_uri(path).map_err(|u| Refused::Invalid {
        unsafe_uri: Some(u),
    })
}

/// nginx's `ngx_http_parse_unsafe_uri`: the path up to a `?`, `%XX` decoded; refused (with
/// the path nginx logs) when empty, starting with `?`, or holding a NUL or a `..` segment,
/// before or after decoding.
pub(crate) fn unsafe_uri(uri: &[u8]) -> Result<Vec<u8>, Vec<u8>> {
    if uri.is_empty() || uri[0] == b'?' || dot_dot_at(uri, 0) {
        return Err(uri.to_vec());
    }
    let path = &uri[..uri.iter().position(|&c| c == b'?').unwrap_or(uri.len())];
    check(path)?;
    if !path.contains(&b'%') {
        return Ok(path.to_vec());
    }
    let decoded = unescape(path);
    if dot_dot_at(&decoded, 0) {
        return Err(decoded);
    }
    check(&decoded)?;
    Ok(decoded)
}

/// `..` as the segment starting at `i`: followed by the end or a `/`.
fn dot_dot_at(p: &[u8], i: usize) -> bool {
    p.len() >= i + 2 && p[i] == b'.' && p[i + 1] == b'.' && (p.len() == i + 2 || p[i + 2] == b'/')
}

/// A NUL, or a `/..` segment.
fn check(p: &[u8]) -> Result<(), Vec<u8>> {
    for (i, &c) in p.iter().enumerate() {
        if c == 0 || (c == b'/' && dot_dot_at(p, i + 1)) {
            return Err(p.to_vec());
        }
    }
    Ok(())
}

/// nginx's `ngx_unescape_uri` with no flags: `%XX` decoded; a `%` and a non-hex character
/// leave the character, a `%X` and a non-hex character leave nothing.
fn unescape(p: &[u8]) -> Vec<u8> {
    let hex = |c: u8| (c as char).to_digit(16).map(|d| d as u8);
    let mut out = Vec::with_capacity(p.len());
    let mut i = 0;
    while i < p.len() {
        let c = p[i];
        i += 1;
        if c != b'%' {
            out.push(c);
            continue;
        }
        let Some(&first) = p.get(i) else { break };
        i += 1;
        let Some(high) = hex(first) else {
            out.push(first);
            continue;
        };
        let Some(&second) = p.get(i) else { break };
        i += 1;
        if let Some(low) = hex(second) {
            out.push(high << 4 | low);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn destinations() {
        let h = Some(&b"localhost"[..]);
        assert_eq!(parse(b"/b.txt", None, false), Ok(b"/b.txt".to_vec()));
        assert_eq!(parse(b"http://localhost/b", h, false), Ok(b"/b".to_vec()));
        // The port is not compared, the host only as a prefix.
        assert_eq!(parse(b"http://localhost:9/b", h, false), Ok(b"/b".to_vec()));
        assert_eq!(parse(b"http://other/b", h, false), Err(Refused::OtherHost));
        assert_eq!(
            parse(b"http://localhost/b", None, false),
            Err(Refused::NoHost)
        );
        let invalid = Err(Refused::Invalid { unsafe_uri: None });
        assert_eq!(parse(b"https://localhost/b", h, false), invalid);
        assert_eq!(parse(b"http://localhost/b", h, true), invalid);
        assert_eq!(parse(b"http://localhost", h, false), invalid);
        assert_eq!(parse(b"/n%20s?a=1", h, false), Ok(b"/n s".to_vec()));
        let unsafe_ = |p: &[u8]| {
            Err(Refused::Invalid {
                unsafe_uri: Some(p.to_vec()),
            })
        };
        assert_eq!(parse(b"/../x", h, false), unsafe_(b"/../x"));
        assert_eq!(parse(b"/a/..", h, false), unsafe_(b"/a/.."));
        assert_eq!(parse(b"/q/%2e%2e/x", h, false), unsafe_(b"/q/../x"));
        assert_eq!(parse(b"/a%00b", h, false), unsafe_(b"/a\0b"));
        assert_eq!(parse(b"/a/..b", h, false), Ok(b"/a/..b".to_vec()));
        assert_eq!(parse(b"/%zz%4zq", h, false), Ok(b"/zzq".to_vec()));
    }

    #[test]
    fn depths() {
        assert_eq!(depth(None, Depth::Infinity), Depth::Infinity);
        assert_eq!(depth(Some(b"0"), Depth::Infinity), Depth::Zero);
        assert_eq!(depth(Some(b"1"), Depth::Zero), Depth::One);
        assert_eq!(depth(Some(b"infinity"), Depth::Zero), Depth::Infinity);
        assert_eq!(depth(Some(b"Infinity"), Depth::Zero), Depth::Invalid);
    }
}
