//! The request target: percent-decoding and normalizing the path, splitting off the query, and
//! validating a host name the way nginx does.
//!
//! nginx decodes first and then resolves: a decoded `%2F` is a slash and `%2e%2e` is a `..`
//! segment, so `/a/%2e%2e/b` is `/b`. A `..` that climbs above the root, an invalid escape and a
//! decoded NUL are 400s. The decoded path is bytes, not text: `%FF` stays the byte 0xFF.
//! Nothing here allocates when the path needs no change.

use std::borrow::Cow;

use crate::error::Error;

/// Splits a request target at the first `?` into path and query (`args` in nginx), dropping a
/// `#fragment` if a client sent one.
pub fn split_query(target: &[u8]) -> (&[u8], Option<&[u8]>) {
    let target = match memchr::memchr(b'#', target) {
        Some(i) => &target[..i],
        None => target,
    };
    match memchr::memchr(b'?', target) {
        Some(i) => (&target[..i], Some(&target[i + 1..])),
        None => (target, None),
    }
}

/// Percent-decodes `path` (which must start with `/`) and resolves `.` and `..` segments;
/// with `merge_slashes`, runs of `/` become one.
///
/// Errors (all 400, as nginx): an escape that is not two hex digits, a decoded NUL, a `..` above
/// the root, a path that does not start with `/`.
pub fn normalize_path(path: &[u8], merge_slashes: bool) -> Result<Cow<'_, [u8]>, Error> {
    if path.first() != Some(&b'/') {
        return Err(Error::bad_request("client sent invalid request"));
    }
    if is_normal(path, merge_slashes) {
        return Ok(Cow::Borrowed(path));
    }
    let decoded = percent_decode(path)?;
    resolve(&decoded, merge_slashes).map(Cow::Owned)
}

/// True when `path` needs neither decoding nor resolving: no `%`, no `.` segment, no `//`.
fn is_normal(path: &[u8], merge_slashes: bool) -> bool {
    if memchr::memchr(b'%', path).is_some() {
        return false;
    }
    let mut prev_slash = false;
    for (i, &b) in path.iter().enumerate() {
        if b == b'/' {
            if prev_slash && merge_slashes {
                return false;
            }
            prev_slash = true;
        } else {
            if b == b'.' && prev_slash {
                // "/." followed by end, "/" or ".": a dot segment.
                match path.get(i + 1) {
                    None | Some(b'/') => return false,
                    Some(b'.') if matches!(path.get(i + 2), None | Some(b'/')) => return false,
                    _ => {}
                }
            }
            prev_slash = false;
        }
    }
    true
}

fn hex(b: u8) -> Option<u8> {
    match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        b'A'..=b'F' => Some(b - b'A' + 10),
        _ => None,
    }
}

/// Decodes `%XY` escapes; `+` stays `+` (only the query uses form encoding).
pub fn percent_decode(s: &[u8]) -> Result<Vec<u8>, Error> {
    let mut out = Vec::with_capacity(s.len());
    let mut i = 0;
    while i < s.len() {
        let b = s[i];
        if b == b'%' {
            let hi = s.get(i + 1).copied().and_then(hex);
            let lo = s.get(i + 2).copied().and_then(hex);
            let (Some(hi), Some(lo)) = (hi, lo) else {
                return Err(Error::bad_request("client sent invalid request"));
            };
            let c = hi << 4 | lo;
            if c == 0 {
                return Err(Error::bad_request("client sent invalid request"));
            }
            out.push(c);
            i += 3;
        } else {
            out.push(b);
            i += 1;
        }
    }
    Ok(out)
}

/// Resolves dot segments (and merges slashes) in an already decoded path starting with `/`.
fn resolve(path: &[u8], merge_slashes: bool) -> Result<Vec<u8>, Error> {
    let body = path.get(1..).unwrap_or_default();
    let count = body.split(|&b| b == b'/').count();
    let mut segs: Vec<&[u8]> = Vec::with_capacity(count);
    for (i, seg) in body.split(|&b| b == b'/').enumerate() {
        let last = i + 1 == count;
        match seg {
            b"" => {
                if last || !merge_slashes {
                    segs.push(seg);
                }
            }
            b"." => {
                if last {
                    segs.push(b"");
                }
            }
            b".." => {
                if segs.pop().is_none() {
                    return Err(Error::bad_request("client sent invalid request"));
                }
                if last {
                    segs.push(b"");
                }
            }
            _ => segs.push(seg),
        }
    }
    let mut out = Vec::with_capacity(path.len());
    out.push(b'/');
    for (i, seg) in segs.iter().enumerate() {
        if i > 0 {
            out.push(b'/');
        }
        out.extend_from_slice(seg);
    }
    Ok(out)
}

/// Validates a `Host` value (or the host of an absolute request target) as nginx does, and
/// returns it lowercased, without the port and without a trailing dot.
///
/// Invalid (400 "client sent invalid host header"): empty, `..`, `/`, NUL, control characters
/// or spaces.
/// Host bytes [`validate_host`] passes over without a second look: all but `. : [ ] /`, NUL,
/// controls, space, DEL and upper-case letters.
static HOST_PLAIN: [bool; 256] = {
    let mut t = [false; 256];
    let mut c = 0x21;
    while c < 0x7f {
        t[c] = !matches!(c as u8, b'.' | b':' | b'[' | b']' | b'/' | b'A'..=b'Z');
        c += 1;
    }
    let mut c = 0x80;
    while c < 0x100 {
        t[c] = true;
        c += 1;
    }
    t
};

pub fn validate_host(host: &[u8]) -> Result<Cow<'_, [u8]>, Error> {
    const INVALID: Error = Error::bad_request("client sent invalid host header");
    #[derive(PartialEq)]
    enum State {
        Usual,
        Literal,
        Rest,
    }
    let mut state = State::Usual;
    let mut dot_pos: Option<usize> = None;
    let mut host_len = host.len();
    let mut upper = false;
    for (i, &ch) in host.iter().enumerate() {
        if HOST_PLAIN[ch as usize] {
            continue;
        }
        match ch {
            b'.' => {
                if i > 0 && dot_pos == Some(i - 1) {
                    return Err(INVALID);
                }
                dot_pos = Some(i);
            }
            b':' => {
                if state == State::Usual {
                    host_len = i;
                    state = State::Rest;
                }
            }
            b'[' => {
                if i == 0 {
                    state = State::Literal;
                }
            }
            b']' => {
                if state == State::Literal {
                    host_len = i + 1;
                    state = State::Rest;
                }
            }
            b'/' | b'\0' => return Err(INVALID),
            _ => {
                if ch <= 0x20 || ch == 0x7f {
                    return Err(INVALID);
                }
                if ch.is_ascii_uppercase() {
                    upper = true;
                }
            }
        }
    }
    if host_len > 0 && dot_pos == Some(host_len - 1) {
        host_len -= 1;
    }
    if host_len == 0 {
        return Err(INVALID);
    }
    let h = &host[..host_len];
    if upper && h.iter().any(u8::is_ascii_uppercase) {
        Ok(Cow::Owned(h.to_ascii_lowercase()))
    } else {
        Ok(Cow::Borrowed(h))
    }
}

/// The last `Host` a connection validated, kept to answer the next request's: a client sends
/// the same one on every request of a connection, and validating it is a look at each byte.
/// Only a host that was already in nginx's form (up to its port or trailing dot: a prefix of
/// what was sent) is kept.
#[derive(Clone, Debug)]
pub struct HostMemo {
    sent: [u8; HOST_MEMO_LEN],
    sent_len: u8,
    host_len: u8,
}

const HOST_MEMO_LEN: usize = 64;

impl Default for HostMemo {
    fn default() -> HostMemo {
        HostMemo {
            sent: [0; HOST_MEMO_LEN],
            sent_len: 0,
            host_len: 0,
        }
    }
}

impl HostMemo {
    /// [`validate_host`]`(sent)`.
    pub fn validate<'a>(&mut self, sent: &'a [u8]) -> Result<Cow<'a, [u8]>, Error> {
        let n = self.sent_len as usize;
        if n != 0 && n == sent.len() && self.sent[..n] == *sent {
            return Ok(Cow::Borrowed(&sent[..self.host_len as usize]));
        }
        let host = validate_host(sent)?;
        if let Cow::Borrowed(h) = &host {
            if let Some(keep) = self.sent.get_mut(..sent.len()) {
                keep.copy_from_slice(sent);
                // (Both fit: `sent` fits the memo, and the host is a prefix of it.)
                self.sent_len = sent.len() as u8;
                self.host_len = h.len() as u8;
            }
        }
        Ok(host)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The memo answers as `validate_host` does, whatever came before: the same host again,
    /// another, an invalid one, one that needs lowering, one too long to keep.
    #[test]
    fn host_memo_answers_as_validation() {
        let long = format!("{}.example.com", "a".repeat(70));
        let hosts = [
            "example.com",
            "example.com",
            "Example.com",
            "example.com.",
            "example.com:8080",
            "example.com:8080",
            "example..com",
            "example.com",
            "[::1]:80",
            "[::1]:80",
            "",
            "a/b",
            long.as_str(),
            long.as_str(),
            "127.0.0.1:19627",
            "127.0.0.1:19627",
            "127.0.0.1:1962",
        ];
        let mut memo = HostMemo::default();
        for order in [false, true] {
            let list: Vec<&str> = if order {
                hosts.iter().rev().copied().collect()
            } else {
                hosts.to_vec()
            };
            for h in list {
                let want = validate_host(h.as_bytes()).map_err(|e| e.status());
                let got = memo.validate(h.as_bytes()).map_err(|e| e.status());
                assert_eq!(got, want, "{h}");
            }
        }
    }

    fn norm(p: &str) -> Result<String, u16> {
        normalize_path(p.as_bytes(), true)
            .map(|c| String::from_utf8_lossy(&c).into_owned())
            .map_err(|e| e.status())
    }

    #[test]
    fn plain_paths_are_borrowed() {
        assert!(matches!(
            normalize_path(b"/a/b.c/..d/", true),
            Ok(Cow::Borrowed(_))
        ));
    }

    #[test]
    fn dot_segments() {
        assert_eq!(norm("/a/./b").unwrap(), "/a/b");
        assert_eq!(norm("/a/b/..").unwrap(), "/a/");
        assert_eq!(norm("/a/b/../c").unwrap(), "/a/c");
        assert_eq!(norm("/a/.").unwrap(), "/a/");
        assert_eq!(norm("/.").unwrap(), "/");
        assert_eq!(norm("/a/..").unwrap(), "/");
        assert_eq!(norm("/...").unwrap(), "/...");
        assert_eq!(norm("/..a/b..").unwrap(), "/..a/b..");
    }

    #[test]
    fn escaping_the_root_is_400() {
        assert_eq!(norm("/.."), Err(400));
        assert_eq!(norm("/../etc/passwd"), Err(400));
        assert_eq!(norm("/a/../../b"), Err(400));
        assert_eq!(norm("/%2e%2e/x"), Err(400));
        assert_eq!(norm("/a/%2E%2E/%2e%2E/x"), Err(400));
        assert_eq!(norm("/%2e%2e%2fx"), Err(400));
    }

    #[test]
    fn percent_decoding() {
        assert_eq!(norm("/a%20b").unwrap(), "/a b");
        assert_eq!(norm("/a/%2e%2e/b").unwrap(), "/b");
        assert_eq!(norm("/a%2fb").unwrap(), "/a/b");
        assert_eq!(norm("/a%2F..%2Fb").unwrap(), "/b");
        assert_eq!(norm("/a+b").unwrap(), "/a+b");
        assert_eq!(norm("/%25").unwrap(), "/%");
        assert_eq!(
            normalize_path(b"/%ff", true).unwrap().as_ref(),
            b"/\xff".as_slice()
        );
        assert_eq!(norm("/%00"), Err(400));
        assert_eq!(norm("/a%00.html"), Err(400));
        assert_eq!(norm("/%"), Err(400));
        assert_eq!(norm("/%4"), Err(400));
        assert_eq!(norm("/%zz"), Err(400));
    }

    #[test]
    fn merge_slashes() {
        assert_eq!(norm("//a///b//").unwrap(), "/a/b/");
        assert_eq!(norm("//").unwrap(), "/");
        assert_eq!(norm("/a/%2F/b").unwrap(), "/a/b");
        let off = |p: &str| normalize_path(p.as_bytes(), false).unwrap().into_owned();
        assert_eq!(off("//a//b"), b"//a//b");
        assert_eq!(off("/a//../b"), b"/a/b");
    }

    #[test]
    fn not_absolute_is_400() {
        assert_eq!(norm("a/b"), Err(400));
        assert_eq!(norm(""), Err(400));
    }

    #[test]
    fn query_split() {
        assert_eq!(split_query(b"/a?b=c?d"), (&b"/a"[..], Some(&b"b=c?d"[..])));
        assert_eq!(split_query(b"/a"), (&b"/a"[..], None));
        assert_eq!(split_query(b"/a#f?x"), (&b"/a"[..], None));
        assert_eq!(split_query(b"/a?"), (&b"/a"[..], Some(&b""[..])));
    }

    #[test]
    fn hosts() {
        let ok = |h: &str| String::from_utf8(validate_host(h.as_bytes()).unwrap().into_owned());
        assert_eq!(ok("Example.COM").unwrap(), "example.com");
        assert_eq!(ok("example.com:8080").unwrap(), "example.com");
        assert_eq!(ok("example.com.").unwrap(), "example.com");
        assert_eq!(ok("[::1]:80").unwrap(), "[::1]");
        assert_eq!(ok("127.0.0.1").unwrap(), "127.0.0.1");
        for bad in ["", ":80", "a..b", "a/b", "a b", "a\0b", ".", "a\x7f"] {
            assert_eq!(
                validate_host(bad.as_bytes()).map_err(|e| e.status()),
                Err(400),
                "{bad:?}"
            );
        }
    }
}
