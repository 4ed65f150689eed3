//! The one-pass road: the head nearly every client sends, found and read in a single pass.
//!
//! A head of the plain shape (`METHOD SP /target SP HTTP/1.x CRLF`, then `Name: value CRLF`
//! lines of nginx-valid names and visible values, then `CRLF`) that lies whole within
//! `client_header_buffer_size` needs none of what the other roads are for: no line can reach a
//! buffer limit, no name is invalid, nothing is odd enough to need nginx's answer for it. Such
//! a head is read here byte by byte, its end and its parts found together, instead of a scan
//! for its end followed by a parse.
//!
//! Anything else (a byte outside these classes, a bare LF, leading empty lines, a tab, a
//! trailing space, a head not yet complete or longer than the buffer) gives `None`, and the
//! scanner and the two parsing roads take the head as before. What this road takes, they take
//! the same way: [`super::roads_agree`] checks it, and the fuzz target calls it.

use super::{HeaderSpan, RawHead, Span, Version};
use crate::limits::Limits;

pub(super) const METHOD: u8 = 1;
/// Bytes of a target: visible ASCII.
pub(super) const TARGET: u8 = 2;
/// nginx's header-name bytes without `underscores_in_headers`: `A-Z a-z 0-9 -`.
pub(super) const NAME: u8 = 4;
/// Bytes inside a header value: visible ASCII and the space.
pub(super) const VALUE: u8 = 8;

static CLASS: [u8; 256] = {
    let mut t = [0u8; 256];
    let mut b = 0x20;
    while b < 0x7f {
        let c = b as u8;
        let mut k = VALUE;
        if c != b' ' {
            k |= TARGET;
        }
        if c.is_ascii_alphanumeric() || c == b'-' {
            k |= NAME;
        }
        if c.is_ascii_uppercase() {
            k |= METHOD;
        }
        t[b] = k;
        b += 1;
    }
    t
};

/// The index of the first byte at or after `i` outside `class` (`b.len()` if none).
#[inline(always)]
fn run(b: &[u8], mut i: usize, class: u8) -> usize {
    while let Some(&c) = b.get(i) {
        if CLASS[usize::from(c)] & class == 0 {
            break;
        }
        i += 1;
    }
    i
}

/// Whether every byte of `s` is of `class`. A target or a value (visible ASCII, and the
/// space for a value) is looked at eight bytes at a time: an HTTP/2 stream's fields are
/// checked whole, not scanned for their end.
#[inline]
pub(super) fn plain(s: &[u8], class: u8) -> bool {
    if class == VALUE || class == TARGET {
        let low = if class == VALUE { b' ' } else { b'!' };
        let mut words = s.chunks_exact(8);
        if !words.all(|w| visible(w, low)) {
            return false;
        }
        let rest = words.remainder();
        return run(rest, 0, class) == rest.len();
    }
    run(s, 0, class) == s.len()
}

/// Whether eight bytes are all in `low..=0x7e`.
#[inline(always)]
fn visible(w: &[u8], low: u8) -> bool {
    const ONES: u64 = u64::from_le_bytes([0x01; 8]);
    const HIGH: u64 = u64::from_le_bytes([0x80; 8]);
    let w = u64::from_le_bytes(w.try_into().expect("eight bytes"));
    // A byte below `low` (exact for `low` <= 0x80: a borrow starts only at such a byte); a
    // byte of 0x7f or more has its high bit set once 1 is added (a carry out of 0xff, the
    // only one, comes from a byte already caught).
    let below = w.wrapping_sub(ONES * u64::from(low)) & !w & HIGH;
    let above = (w | w.wrapping_add(ONES)) & HIGH;
    below | above == 0
}

/// The head at the start of `buf`, with its length, when it is whole and of the plain shape
/// within `client_header_buffer_size`; else `None` (incomplete or not plain: the other roads
/// decide).
pub(super) fn parse(buf: &[u8], limits: &Limits) -> Option<(usize, RawHead)> {
    let b = buf.get(..limits.client_header_buffer_size.min(buf.len()))?;
    let end = run(b, 0, METHOD);
    if end == 0 || b.get(end) != Some(&b' ') {
        return None;
    }
    let method = Span { start: 0, end };
    let start = end + 1;
    if b.get(start) != Some(&b'/') {
        return None;
    }
    let end = run(b, start, TARGET);
    let target = Span { start, end };
    let version = match b.get(end..end + 11)? {
        b" HTTP/1.1\r\n" => Version::Http11,
        b" HTTP/1.0\r\n" => Version::Http10,
        _ => return None,
    };
    let mut i = end + 11;
    let mut headers = Vec::with_capacity(8);
    loop {
        if b.get(i..i + 2)? == b"\r\n" {
            return Some((
                i + 2,
                RawHead {
                    method,
                    target,
                    version,
                    headers,
                },
            ));
        }
        let start = i;
        let end = run(b, start, NAME);
        if end == start || b.get(end) != Some(&b':') {
            return None;
        }
        let name = Span { start, end };
        i = end + 1;
        while b.get(i) == Some(&b' ') {
            i += 1;
        }
        let start = i;
        let end = run(b, start, VALUE);
        // An empty value or one with trailing spaces: the other roads trim it.
        if end == start || b.get(end - 1) == Some(&b' ') || b.get(end..end + 2)? != b"\r\n" {
            return None;
        }
        headers.push(HeaderSpan {
            name,
            value: Span { start, end },
        });
        i = end + 2;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_by_words_as_byte_by_byte() {
        for class in [TARGET, VALUE, NAME, METHOD] {
            for len in [0, 1, 7, 8, 9, 15, 16, 17, 24, 31] {
                for at in 0..len {
                    for b in 0..=255u8 {
                        let mut v = vec![b'a'; len];
                        v[at] = b;
                        let want = v.iter().all(|&c| CLASS[usize::from(c)] & class != 0);
                        assert_eq!(plain(&v, class), want, "{b:#x} at {at} of {len}");
                    }
                }
            }
        }
    }

    /// The request line's method and target, then each header's name and value.
    type Parts<'a> = Vec<(&'a [u8], &'a [u8])>;

    fn parts(buf: &[u8]) -> Option<(usize, Parts<'_>)> {
        let (len, raw) = parse(buf, &Limits::default())?;
        let mut v = vec![(raw.method.get(buf), raw.target.get(buf))];
        v.extend(
            raw.headers
                .iter()
                .map(|h| (h.name.get(buf), h.value.get(buf))),
        );
        Some((len, v))
    }

    #[test]
    fn reads_a_plain_head_and_leaves_what_follows() {
        let buf = b"GET /a?b=c HTTP/1.1\r\nHost: x:80\r\nUser-Agent: wrk 4\r\n\r\nGET /";
        let (len, p) = parts(buf).unwrap();
        assert_eq!(len, buf.len() - 5);
        assert_eq!(
            p,
            [
                (&b"GET"[..], &b"/a?b=c"[..]),
                (b"Host", b"x:80"),
                (b"User-Agent", b"wrk 4")
            ]
        );
        let (_, raw) = parse(b"HEAD / HTTP/1.0\r\n\r\n", &Limits::default()).unwrap();
        assert_eq!(raw.version, Version::Http10);
        assert!(raw.headers.is_empty());
    }

    #[test]
    fn leaves_every_other_shape_to_the_other_roads() {
        for head in [
            &b"GET / HTTP/1.1\r\nHost: a\r\n"[..],           // incomplete
            b"GET / HTTP/1.1\r\nHost: a\r\n\r",              // incomplete
            b"\r\nGET / HTTP/1.1\r\nHost: a\r\n\r\n",        // a leading empty line
            b"get / HTTP/1.1\r\nHost: a\r\n\r\n",            // nginx's 400
            b"GET  / HTTP/1.1\r\nHost: a\r\n\r\n",           // two spaces
            b"GET http://a/ HTTP/1.1\r\nHost: a\r\n\r\n",    // absolute form
            b"GET / HTTP/1.2\r\nHost: a\r\n\r\n",            // another minor
            b"GET / HTTP/1.1\nHost: a\r\n\r\n",              // bare LF
            b"GET / HTTP/1.1\r\nHost: a \r\n\r\n",           // trailing space
            b"GET / HTTP/1.1\r\nHost:\ta\r\n\r\n",           // a tab
            b"GET / HTTP/1.1\r\nHost:\r\n\r\n",              // empty value
            b"GET / HTTP/1.1\r\nX_Y: a\r\nHost: a\r\n\r\n",  // underscore
            b"GET / HTTP/1.1\r\nHost : a\r\n\r\n",           // space before the colon
            b"GET / HTTP/1.1\r\n Host: a\r\n\r\n",           // obs-fold
            b"GET / HTTP/1.1\r\nHost: \xc3\xa9\r\n\r\n",     // obs-text
            b"GET /\xc3\xa9 HTTP/1.1\r\nHost: a\r\n\r\n",    // a non-ASCII target
            b"GET / HTTP/1.1\r\nHost: a\r\nX: b\rc\r\n\r\n", // a CR inside
        ] {
            assert!(parse(head, &Limits::default()).is_none(), "{head:?}");
        }
    }

    #[test]
    fn a_head_longer_than_the_first_buffer_is_left_to_the_scanner() {
        let head = b"GET / HTTP/1.1\r\nHost: a\r\n\r\n";
        let fits = Limits {
            client_header_buffer_size: head.len(),
            ..Limits::default()
        };
        assert!(parse(head, &fits).is_some());
        let short = Limits {
            client_header_buffer_size: head.len() - 1,
            ..Limits::default()
        };
        assert!(parse(head, &short).is_none());
    }
}
