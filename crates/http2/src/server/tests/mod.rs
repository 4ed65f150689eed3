//! Unit tests from hand-written frames and HPACK blocks: each check of a request (here),
//! bodies against `content-length` and the HPACK table kept in step (`bodies`), and the
//! answers as a client decodes them (`answers`).

pub(crate) mod answers;
mod bodies;

use super::*;
use crate::frame::PREFACE;
use crate::hpack::{Field, TooLarge};

const DATA: u8 = 0x0;
const HEADERS: u8 = 0x1;
const RST_STREAM: u8 = 0x3;
const SETTINGS: u8 = 0x4;
const GOAWAY: u8 = 0x7;
const END_STREAM: u8 = 0x1;
const END_HEADERS: u8 = 0x4;

fn frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
    let len = payload.len();
    let mut f = vec![(len >> 16) as u8, (len >> 8) as u8, len as u8, kind, flags];
    f.extend_from_slice(&stream.to_be_bytes());
    f.extend_from_slice(payload);
    f
}

/// HPACK literals without indexing, new names (RFC 7541, 6.2.2), no Huffman.
fn block(fields: &[(&str, &str)]) -> Vec<u8> {
    let mut b = Vec::new();
    for (name, value) in fields {
        b.push(0x00);
        string(&mut b, name.as_bytes());
        string(&mut b, value.as_bytes());
    }
    b
}

fn string(b: &mut Vec<u8>, s: &[u8]) {
    assert!(s.len() < 127);
    b.push(s.len() as u8);
    b.extend_from_slice(s);
}

/// A GET's pseudo-headers followed by `extra`.
fn get_with<'a>(extra: &[(&'a str, &'a str)]) -> Vec<(&'a str, &'a str)> {
    let mut f = vec![
        (":method", "GET"),
        (":scheme", "https"),
        (":authority", "example.com"),
        (":path", "/a?b"),
    ];
    f.extend_from_slice(extra);
    f
}

/// A server past the preface and both SETTINGS, its output drained.
fn server(cfg: Config) -> Server {
    let mut s = Server::new(cfg);
    let mut input = PREFACE.to_vec();
    input.extend(frame(SETTINGS, 0, 0, &[]));
    input.extend(frame(SETTINGS, 1, 0, &[]));
    feed(&mut s, &input);
    out(&mut s);
    s
}

/// Gives `input` (whole frames) to the server; what it reports.
fn feed(s: &mut Server, input: &[u8]) -> Vec<Incoming> {
    let used = s.recv(input).expect("no connection error");
    assert_eq!(used, input.len());
    std::iter::from_fn(|| s.poll(input)).collect()
}

/// The frames the server queued: (type, flags, stream, payload).
fn out(s: &mut Server) -> Vec<(u8, u8, u32, Vec<u8>)> {
    let mut frames = Vec::new();
    let mut b = s.conn().pending_output();
    while b.len() >= 9 {
        let len = (b[0] as usize) << 16 | (b[1] as usize) << 8 | b[2] as usize;
        let id = u32::from_be_bytes([b[5], b[6], b[7], b[8]]) & 0x7fff_ffff;
        frames.push((b[3], b[4], id, b[9..9 + len].to_vec()));
        b = &b[9 + len..];
    }
    let n = s.conn().pending_output().len();
    s.conn_mut().advance(n);
    frames
}

fn request(s: &mut Server, stream: u32, fields: &[(&str, &str)], end: bool) -> Vec<Incoming> {
    let flags = END_HEADERS | if end { END_STREAM } else { 0 };
    feed(s, &frame(HEADERS, flags, stream, &block(fields)))
}

fn only_request(got: Vec<Incoming>) -> Request {
    match <[Incoming; 1]>::try_from(got) {
        Ok([Incoming::Head { head: request, .. }]) => request,
        Ok([other]) => panic!("not a request: {other:?}"),
        Err(got) => panic!("not one event: {got:?}"),
    }
}

fn assert_reset(s: &mut Server, stream: u32, code: Reason) {
    let frames = out(s);
    assert!(
        frames
            .iter()
            .any(|f| f.0 == RST_STREAM && f.2 == stream && f.3 == code.0.to_be_bytes()),
        "no RST_STREAM {code:?} on {stream}: {frames:?}"
    );
}

fn post(len: &'static str) -> Vec<(&'static str, &'static str)> {
    let mut f = get_with(&[("content-length", len)]);
    f[0] = (":method", "POST");
    f
}

/// A literal with incremental indexing, new name (RFC 7541, 6.2.1).
fn indexed_literal(name: &str, value: &[u8]) -> Vec<u8> {
    let mut b = vec![0x40];
    string(&mut b, name.as_bytes());
    if value.len() < 127 {
        string(&mut b, value);
    } else {
        crate::hpack::encode_int(&mut b, 0, 7, value.len());
        b.extend_from_slice(value);
    }
    b
}

#[test]
fn a_get_is_decoded_into_one_buffer() {
    let mut s = server(Config::default());
    let got = request(&mut s, 1, &get_with(&[("accept", "*/*")]), true);
    let r = only_request(got);
    assert_eq!(r.method(), b"GET");
    assert_eq!(r.scheme(), Some(&b"https"[..]));
    assert_eq!(r.path(), Some(&b"/a?b"[..]));
    assert_eq!(r.authority(), Some(&b"example.com"[..]));
    assert_eq!(r.host(), Some(&b"example.com"[..]));
    assert_eq!(r.fields().get(b"accept"), Some(&b"*/*"[..]));
    assert_eq!(r.content_length(), None);
    let mut head = Vec::new();
    r.write_http1(&mut head);
    assert_eq!(
        head,
        b"GET /a?b HTTP/1.1\r\nhost: example.com\r\naccept: */*\r\n\r\n"
    );
}

#[test]
fn a_malformed_request_says_why_in_nginx_s_words() {
    let cases: Vec<(Vec<(&str, &str)>, &str)> = vec![
        (
            get_with(&[("X-Upper", "1")]),
            "client sent invalid header name: \"X-Upper\"",
        ),
        (
            get_with(&[("x-a", "a\nb")]),
            "client sent header \"x-a\" with invalid value: \"a\nb\"",
        ),
        (
            get_with(&[("te", "gzip")]),
            "client sent header \"te\" with invalid value: \"gzip\"",
        ),
        (
            get_with(&[("connection", "close")]),
            "client sent connection-specific header: \"connection\"",
        ),
        (
            vec![(":method", "GET"), (":scheme", "http"), (":path", "a")],
            "client sent invalid :path header: \"a\"",
        ),
        (
            vec![(":method", "GET"), (":scheme", "http")],
            "client sent no :path header",
        ),
        (
            vec![(":method", "GET"), (":scheme", "http"), (":path", "")],
            "client sent empty :path header",
        ),
        (
            get_with(&[("x-a", "1"), (":path", "/")]),
            "client sent pseudo-header \":path\" after a regular header",
        ),
        (
            vec![(":method", "GET"), (":foo", "x")],
            "client sent unknown pseudo-header \":foo\"",
        ),
        (
            vec![(":method", "GET"), (":method", "GET")],
            "client sent duplicate :method header",
        ),
        (
            get_with(&[("host", "other")]),
            "client sent duplicate host header: \"host: other\", previous value: \"host: example.com\"",
        ),
        (
            get_with(&[("content-length", "x")]),
            "client sent invalid \"Content-Length\" header",
        ),
        (
            get_with(&[("content-length", "1"), ("content-length", "2")]),
            "client sent duplicate header line: \"content-length: 2\", previous value: \"content-length: 1\"",
        ),
        (
            get_with(&[("content-length", "1")]),
            "client prematurely closed stream",
        ),
    ];
    let mut s = server(Config::default());
    for (i, (fields, want)) in cases.iter().enumerate() {
        let stream = 1 + 2 * i as u32;
        let got = request(&mut s, stream, fields, true);
        match &got[..] {
            [Incoming::Malformed { stream: id, why }] if *id == stream => {
                assert_eq!(why.to_string(), *want);
                assert!(why.in_head());
            }
            _ => panic!("{want}: {got:?}"),
        }
    }
}

#[test]
fn every_malformed_request_is_reset_and_the_connection_goes_on() {
    let cases: Vec<(&str, Vec<(&str, &str)>)> = vec![
        ("pseudo after regular", {
            let mut f = get_with(&[("x-a", "1")]);
            f.swap(3, 4);
            f
        }),
        (
            "unknown pseudo",
            get_with(&[])
                .into_iter()
                .chain([(":protocol", "ws")])
                .collect(),
        ),
        ("duplicate :path", {
            let mut f = get_with(&[]);
            f.insert(3, (":path", "/b"));
            f
        }),
        ("status in request", {
            let mut f = get_with(&[]);
            f.insert(0, (":status", "200"));
            f
        }),
        ("no :method", get_with(&[])[1..].to_vec()),
        ("no :scheme", vec![(":method", "GET"), (":path", "/")]),
        ("no :path", vec![(":method", "GET"), (":scheme", "http")]),
        (
            "empty :path",
            vec![(":method", "GET"), (":scheme", "http"), (":path", "")],
        ),
        (
            "relative :path",
            vec![(":method", "GET"), (":scheme", "http"), (":path", "a")],
        ),
        (
            "* not OPTIONS",
            vec![(":method", "GET"), (":scheme", "http"), (":path", "*")],
        ),
        (
            "empty :method",
            vec![(":method", ""), (":scheme", "http"), (":path", "/")],
        ),
        ("uppercase name", get_with(&[("X-Upper", "1")])),
        ("space in name", get_with(&[("x a", "1")])),
        ("colon in name", get_with(&[("x:a", "1")])),
        ("empty name", get_with(&[("", "1")])),
        ("non-ASCII name", get_with(&[("x\u{e9}", "1")])),
        ("connection", get_with(&[("connection", "close")])),
        ("keep-alive", get_with(&[("keep-alive", "5")])),
        ("proxy-connection", get_with(&[("proxy-connection", "x")])),
        (
            "transfer-encoding",
            get_with(&[("transfer-encoding", "chunked")]),
        ),
        ("upgrade", get_with(&[("upgrade", "h2c")])),
        ("te gzip", get_with(&[("te", "gzip")])),
        ("NUL in value", get_with(&[("x-a", "a\0b")])),
        ("CR in value", get_with(&[("x-a", "a\rb")])),
        ("LF in value", get_with(&[("x-a", "a\nb")])),
        (
            "LF in a pseudo",
            vec![(":method", "GET"), (":scheme", "http"), (":path", "/\n")],
        ),
        ("leading space", get_with(&[("x-a", " a")])),
        ("trailing tab", get_with(&[("x-a", "a\t")])),
        ("bad content-length", get_with(&[("content-length", "1x")])),
        (
            "two content-lengths",
            get_with(&[("content-length", "1"), ("content-length", "2")]),
        ),
        ("host differs", get_with(&[("host", "other.example")])),
        ("CONNECT with :path", {
            let mut f = get_with(&[]);
            f[0] = (":method", "CONNECT");
            f.remove(1);
            f
        }),
        ("CONNECT without :authority", vec![(":method", "CONNECT")]),
    ];
    let mut s = server(Config::default());
    let mut stream = 1;
    for (what, fields) in &cases {
        let got = request(&mut s, stream, fields, true);
        assert!(
            matches!(got[..], [Incoming::Malformed { stream: id, .. }] if id == stream),
            "{what}: {got:?}"
        );
        assert_reset(&mut s, stream, Reason::PROTOCOL_ERROR);
        stream += 2;
    }
    // The connection still serves.
    let r = only_request(request(&mut s, stream, &get_with(&[]), true));
    assert_eq!(r.path(), Some(&b"/a?b"[..]));
    assert!(out(&mut s).iter().all(|f| f.0 != GOAWAY));
}

#[test]
fn what_the_rules_allow_is_accepted() {
    let cases: Vec<(&str, Vec<(&str, &str)>)> = vec![
        ("te trailers", get_with(&[("te", "trailers")])),
        ("host as :authority", get_with(&[("host", "Example.COM")])),
        (
            "same content-length twice",
            get_with(&[("content-length", "0"), ("content-length", "0")]),
        ),
        (
            "CONNECT",
            vec![(":method", "CONNECT"), (":authority", "a:443")],
        ),
        (
            "OPTIONS *",
            vec![(":method", "OPTIONS"), (":scheme", "http"), (":path", "*")],
        ),
        (
            "no :authority",
            vec![(":method", "GET"), (":scheme", "http"), (":path", "/")],
        ),
        ("inner space in value", get_with(&[("x-a", "a b\tc")])),
        ("empty value", get_with(&[("x-a", "")])),
        (
            "token characters",
            get_with(&[("x-a!#$%&'*+-.^_`|~09", "1")]),
        ),
    ];
    let mut s = server(Config::default());
    for (i, (what, fields)) in cases.iter().enumerate() {
        let got = request(&mut s, 2 * i as u32 + 1, fields, true);
        assert!(
            matches!(got[..], [Incoming::Head { .. }]),
            "{what}: {got:?}"
        );
    }
    assert!(
        out(&mut s).iter().all(|f| f.0 == HEADERS || f.0 == 0x8),
        "no reset"
    );
}

#[test]
fn connect_is_written_with_its_authority_and_host_wins_over_authority() {
    let mut s = server(Config::default());
    let r = only_request(request(
        &mut s,
        1,
        &[(":method", "CONNECT"), (":authority", "a:443")],
        true,
    ));
    let mut head = Vec::new();
    r.write_http1(&mut head);
    assert_eq!(head, b"CONNECT a:443 HTTP/1.1\r\nhost: a:443\r\n\r\n");
    let r = only_request(request(
        &mut s,
        3,
        &get_with(&[("host", "EXAMPLE.com")]),
        true,
    ));
    assert_eq!(r.host(), Some(&b"EXAMPLE.com"[..]));
    let mut head = Vec::new();
    r.write_http1(&mut head);
    assert_eq!(head, b"GET /a?b HTTP/1.1\r\nhost: EXAMPLE.com\r\n\r\n");
}

#[test]
fn cookie_crumbs_are_joined() {
    let mut s = server(Config::default());
    let fields = get_with(&[
        ("cookie", "a=1"),
        ("x-a", "1"),
        ("cookie", "b=2"),
        ("cookie", "c=3"),
    ]);
    let r = only_request(request(&mut s, 1, &fields, true));
    let all: Vec<_> = r.fields().iter().collect();
    assert_eq!(
        all,
        [
            (&b"x-a"[..], &b"1"[..]),
            (&b"cookie"[..], &b"a=1; b=2; c=3"[..])
        ]
    );
    // One crumb stays where it was.
    let fields = get_with(&[("cookie", "a=1"), ("x-a", "1")]);
    let r = only_request(request(&mut s, 3, &fields, true));
    assert_eq!(
        r.fields().iter().next(),
        Some((&b"cookie"[..], &b"a=1"[..]))
    );
}

#[test]
fn the_word_at_a_time_checks_agree_with_the_rules_byte_by_byte() {
    use super::request::{bad_name, check_value};
    let name_rule = |b: u8| b <= b' ' || b >= 0x7f || b.is_ascii_uppercase() || b == b':';
    let value_rule = |b: u8| b == 0 || b == b'\r' || b == b'\n';
    for len in 1..=27 {
        for at in 0..len {
            for b in 0..=255u8 {
                let mut s = vec![b'a'; len];
                s[at] = b;
                assert_eq!(bad_name(&s), name_rule(b), "name {s:?}");
                // Whitespace at the ends is its own rule: keep it off them.
                let mut v = vec![b'a'; len + 2];
                v[at + 1] = b;
                assert_eq!(
                    check_value(b"x-a", &v).is_err(),
                    value_rule(b),
                    "value {v:?}"
                );
            }
        }
    }
}

/// How many requests the property below saw accepted, so that it can tell it saw some.
mod accepted {
    use std::sync::atomic::{AtomicUsize, Ordering};
    static N: AtomicUsize = AtomicUsize::new(0);
    pub fn inc() {
        N.fetch_add(1, Ordering::Relaxed);
    }
    pub fn get() -> usize {
        N.load(Ordering::Relaxed)
    }
}

#[test]
fn the_property_sees_accepted_requests() {
    any_field_list_is_accepted_or_reset();
    assert!(accepted::get() > 10, "{} accepted", accepted::get());
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(512))]

    /// Any fields, any order: a request that is accepted holds exactly what the rules allow,
    /// every other one is reset; nothing panics and the connection goes on.
    #[test]
    fn any_field_list_is_accepted_or_reset(
        base in proptest::bool::weighted(0.8),
        fields in proptest::collection::vec(
            (
                proptest::sample::select(vec![
                    ":method", ":scheme", ":path", ":authority", ":status", "host", "cookie",
                    "te", "content-length", "x-a", "X-B", "connection", "",
                ]),
                proptest::sample::select(vec![
                    "GET", "CONNECT", "http", "/", "*", "", "a", " a", "trailers", "1", "a\nb",
                ]),
            ),
            0..8,
        )
    ) {
        // Most lists start with a valid GET's pseudo-headers, so that some are accepted.
        let fields = if base { get_with(&fields) } else { fields };
        let mut s = server(Config::default());
        let got = request(&mut s, 1, &fields, true);
        match &got[..] {
            [Incoming::Head { head: request, .. }] => {
                proptest::prop_assert!(!request.method().is_empty());
                let names: Vec<_> = request.fields().iter().map(|(n, _)| n.to_vec()).collect();
                for n in &names {
                    proptest::prop_assert!(!n.is_empty() && n[0] != b':');
                    proptest::prop_assert!(n != b"connection" && n != b"X-B");
                }
                let mut head = Vec::new();
                request.write_http1(&mut head);
                proptest::prop_assert!(head.ends_with(b"\r\n\r\n"));
                proptest::prop_assert!(!head[..head.len() - 2].windows(2).any(|w| w == b"\n\n"));
                accepted::inc();
            }
            [Incoming::Malformed { stream: 1, .. }] => {
                assert_reset(&mut s, 1, Reason::PROTOCOL_ERROR);
            }
            other => proptest::prop_assert!(false, "{:?}", other),
        }
        let r = only_request(request(&mut s, 3, &get_with(&[]), true));
        proptest::prop_assert_eq!(r.method(), b"GET");
    }
}

/// A field taken from the HPACK tables skips the character checks only when its entry
/// passed them: an entry stored with a bad name or value is refused every time it is used.
#[test]
fn fields_from_the_tables_are_checked_once_and_refused_every_time() {
    use super::request::chars_ok;
    for (name, value) in crate::hpack::STATIC {
        assert!(chars_ok(name, value), "{name:?} {value:?}");
    }
    let mut s = server(Config::default());
    let pseudo = block(&get_with(&[]));
    let stored: [(&str, &[u8]); 4] = [
        ("x-good", b"fine value"),
        ("x-nul", b"a\0b"),
        ("x-end", b"trailing "),
        ("X-Upper", b"v"),
    ];
    for (i, (name, value)) in stored.iter().enumerate() {
        let stream = 1 + 2 * i as u32;
        let mut b = pseudo.clone();
        b.extend(indexed_literal(name, value));
        let got = feed(
            &mut s,
            &frame(HEADERS, END_HEADERS | END_STREAM, stream, &b),
        );
        let accepted = matches!(got[..], [Incoming::Head { .. }]);
        assert_eq!(accepted, i == 0, "{name}: {got:?}");
        out(&mut s);
    }
    // Each entry again, by its index (62: the newest), twice.
    for round in 0..2u32 {
        for (i, (name, _)) in stored.iter().enumerate() {
            let stream = 11 + 8 * round + 2 * i as u32;
            let mut b = pseudo.clone();
            b.push(0x80 | (62 + (stored.len() - 1 - i)) as u8);
            let got = feed(
                &mut s,
                &frame(HEADERS, END_HEADERS | END_STREAM, stream, &b),
            );
            let accepted = matches!(got[..], [Incoming::Head { .. }]);
            assert_eq!(accepted, i == 0, "{name} by index: {got:?}");
            out(&mut s);
        }
    }
}
