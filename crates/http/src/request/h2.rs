//! An HTTP/2 stream's request built from its decoded fields, with no head text to parse.
//!
//! The server hands over one buffer holding the pseudo-headers' values and the fields, and
//! their places in it: they become the request's spans, and the checks every HTTP/1 road
//! shares ([`super::checks`]) run on them, so a module sees the same [`Request`] as when the
//! fields were written as an HTTP/1 head and parsed. Only what the one-pass road would take
//! of that head is taken here (an uppercase method, an origin-form target of visible ASCII,
//! names of `a-z 0-9 -`, non-empty values of visible ASCII and spaces, the whole within
//! `client_header_buffer_size`, so that no line comes near `large_client_header_buffers`);
//! anything else gives `None`, and the server writes the head for [`HeadParser`] to give
//! nginx's answer (its 400s and 414, `underscores_in_headers`, `ignore_invalid_headers`).

use std::ops::Range;

use super::one_pass::{plain, METHOD, NAME, TARGET, VALUE};
use super::*;

/// An HTTP/2 stream's head of the plain shape, its parts found: [`Plain::finish`] checks it
/// and makes it a [`Request`].
#[derive(Debug)]
pub struct Plain {
    raw: RawHead,
    /// The head's length had it been sent as HTTP/1.
    len: usize,
}

/// The head of an HTTP/2 stream whose fields lie in `buf`, when it is of the plain shape
/// (see above; `None`: it is not). `method`, `target` (`:path`) and each field's name and
/// value are ranges of `buf`, the fields in the order the HTTP/1 head would have them (`host`
/// first when it stands for `:authority`).
pub fn plain_h2<I>(
    buf: &[u8],
    method: Range<usize>,
    target: Range<usize>,
    fields: I,
    limits: &Limits,
) -> Option<Plain>
where
    I: IntoIterator<Item = (Range<usize>, Range<usize>)>,
{
    let part = |r: &Range<usize>| buf.get(r.clone());
    let m = part(&method)?;
    let t = part(&target)?;
    if m.is_empty() || !plain(m, METHOD) || t.first() != Some(&b'/') || !plain(t, TARGET) {
        return None;
    }
    // "METHOD SP target SP HTTP/1.1 CRLF", each "name: value CRLF", CRLF.
    let mut len = m.len() + 1 + t.len() + 11 + 2;
    let fields = fields.into_iter();
    let mut headers = Vec::with_capacity(fields.size_hint().0);
    for (name, value) in fields {
        let (n, v) = (part(&name)?, part(&value)?);
        if n.is_empty() || !plain(n, NAME) || v.is_empty() || !plain(v, VALUE) {
            return None;
        }
        // (The one-pass road skips spaces before a value and leaves one with spaces after.)
        if v.first() == Some(&b' ') || v.last() == Some(&b' ') {
            return None;
        }
        len += n.len() + v.len() + 4;
        headers.push(HeaderSpan {
            name: span(name),
            value: span(value),
        });
    }
    if len > limits.client_header_buffer_size {
        return None;
    }
    let raw = RawHead {
        method: span(method),
        target: span(target),
        version: Version::Http11,
        headers,
    };
    Some(Plain { raw, len })
}

impl Plain {
    /// The checks every road shares, on `head` (the buffer [`plain_h2`] looked at): the
    /// request, an HTTP/2 one (its body as the head frames it: see [`Request::into_h2`]).
    /// Refused: the head written as HTTP/1, for [`HeadParser`] to refuse it as it does
    /// (the same checks, the same error) and to say what nginx would have read of it.
    /// `memo`: the last host validated (a worker's streams mostly name the same).
    pub fn finish(
        mut self,
        mut head: Bytes,
        limits: &Limits,
        memo: &mut uri::HostMemo,
    ) -> Result<Request, Vec<u8>> {
        let mut out = None;
        match finish_into(&mut head, &mut self.raw, limits, memo, &mut out) {
            Ok(()) => {
                let mut r = out.expect("filled when the checks pass");
                r.len = self.len;
                let body = r.body();
                Ok(r.into_h2(body))
            }
            Err(_) => Err(self.text(&head)),
        }
    }

    /// The head as HTTP/1.1 sends it.
    fn text(&self, head: &[u8]) -> Vec<u8> {
        let raw = &self.raw;
        let mut t = Vec::with_capacity(self.len);
        t.extend_from_slice(raw.method.get(head));
        t.push(b' ');
        t.extend_from_slice(raw.target.get(head));
        t.extend_from_slice(b" HTTP/1.1\r\n");
        for h in &raw.headers {
            t.extend_from_slice(h.name.get(head));
            t.extend_from_slice(b": ");
            t.extend_from_slice(h.value.get(head));
            t.extend_from_slice(b"\r\n");
        }
        t.extend_from_slice(b"\r\n");
        t
    }
}

fn span(r: Range<usize>) -> Span {
    Span {
        start: r.start,
        end: r.end,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The fields as the codec lays them out: values of the pseudo-headers, then names and
    /// values one after another.
    /// The buffer, the method's and the path's places, each field's.
    type Layout = (
        Bytes,
        Range<usize>,
        Range<usize>,
        Vec<(Range<usize>, Range<usize>)>,
    );

    fn layout(method: &str, path: &str, fields: &[(&str, &str)]) -> Layout {
        let mut buf = Vec::new();
        let mut put = |s: &str| {
            let at = buf.len();
            buf.extend_from_slice(s.as_bytes());
            at..buf.len()
        };
        let m = put(method);
        let p = put(path);
        let f = fields.iter().map(|(n, v)| (put(n), put(v))).collect();
        (Bytes::from(buf), m, p, f)
    }

    /// The request built from the fields, and the one parsed from the head written as HTTP/1.
    fn both(method: &str, path: &str, fields: &[(&str, &str)]) -> Option<(Request, Request)> {
        let limits = Limits::default();
        let (head, m, p, f) = layout(method, path, fields);
        let built = plain_h2(&head, m, p, f, &limits)?.finish(
            head.clone(),
            &limits,
            &mut Default::default(),
        );
        let mut text = format!("{method} {path} HTTP/1.1\r\n");
        for (n, v) in fields {
            text.push_str(&format!("{n}: {v}\r\n"));
        }
        text.push_str("\r\n");
        let parsed = parse_request(text.as_bytes(), &limits).map(|r| r.expect("whole"));
        match (built, parsed) {
            (Ok(b), Ok(p)) => {
                let body = p.body();
                Some((b, p.into_h2(body)))
            }
            (Err(b), Err(_)) => {
                assert_eq!(b, text.as_bytes(), "the head to refuse");
                None
            }
            (b, p) => panic!("built {b:?}, parsed {p:?}"),
        }
    }

    #[test]
    fn builds_the_request_the_parser_makes_of_the_head() {
        let fields = [
            ("host", "Example.com:8080"),
            ("accept", "*/*"),
            ("if-none-match", "\"a b\""),
            ("content-length", "3"),
            ("cookie", "a=1; b=2"),
        ];
        let (b, p) = both("GET", "/a/../b%41?x=1", &fields).expect("both take it");
        assert_eq!(b.method(), p.method());
        assert_eq!(b.uri(), p.uri());
        assert_eq!(b.target(), p.target());
        assert_eq!(b.path(), b"/bA");
        assert_eq!(b.path(), p.path());
        assert_eq!(b.query(), p.query());
        assert_eq!(b.host(), Some(&b"example.com"[..]));
        assert_eq!(b.host(), p.host());
        assert_eq!(b.version(), Version::Http2);
        assert_eq!(b.body(), p.body());
        assert_eq!(b.head_len(), p.head_len());
        assert!(b.headers().eq(p.headers()));
        assert_eq!(b.header("If-None-Match"), Some(&b"\"a b\""[..]));
        assert!(!b.keep_alive() && !b.expect_continue());
    }

    #[test]
    fn refuses_as_the_parser_refuses() {
        // Each is refused by the checks both share, with the same status and reason.
        for (method, path, fields) in [
            ("GET", "/", &[][..]),
            ("GET", "/", &[("host", "a..b")][..]),
            ("TRACE", "/", &[("host", "a")][..]),
            ("GET", "/../x", &[("host", "a")][..]),
            (
                "GET",
                "/",
                &[("host", "a"), ("if-match", "1"), ("if-match", "2")][..],
            ),
            ("POST", "/", &[("host", "a"), ("content-length", "x")][..]),
        ] {
            assert!(
                both(method, path, fields).is_none(),
                "{method} {path} {fields:?}"
            );
        }
    }

    #[test]
    fn leaves_every_other_shape_to_the_parser() {
        let limits = Limits::default();
        let long = "a".repeat(limits.client_header_buffer_size);
        for (method, path, fields) in [
            ("get", "/", &[("host", "a")][..]),
            ("GET", "*", &[("host", "a")][..]),
            ("GET", "/a b", &[("host", "a")][..]),
            ("GET", "/\u{e9}", &[("host", "a")][..]),
            ("GET", "/", &[("x_y", "1"), ("host", "a")][..]),
            ("GET", "/", &[("x.y", "1"), ("host", "a")][..]),
            ("GET", "/", &[("x", ""), ("host", "a")][..]),
            ("GET", "/", &[("x", "a\tb"), ("host", "a")][..]),
            ("GET", "/", &[("x", "\u{e9}"), ("host", "a")][..]),
            ("GET", "/", &[("x", &long[..]), ("host", "a")][..]),
            ("GET", &format!("/{long}")[..], &[("host", "a")][..]),
        ] {
            let (head, m, p, f) = layout(method, path, fields);
            let built = plain_h2(&head, m, p, f, &limits);
            assert!(built.is_none(), "{method} {path} {fields:?}");
        }
    }
}
