//! Unit tests from hand-written frames and HPACK blocks: each check of a request, bodies
//! against `content-length`, the HPACK table kept in step, and the answers as a client
//! decodes them.

use super::*;
use crate::frame::PREFACE;
use crate::hpack::Field;

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
        Ok([Incoming::Request { request, .. }]) => request,
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
            matches!(got[..], [Incoming::Request { .. }]),
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

fn post(len: &'static str) -> Vec<(&'static str, &'static str)> {
    let mut f = get_with(&[("content-length", len)]);
    f[0] = (":method", "POST");
    f
}

#[test]
fn a_body_that_matches_its_content_length_ends_the_stream() {
    let mut s = server(Config::default());
    let r = only_request(request(&mut s, 1, &post("5"), false));
    assert_eq!(r.content_length(), Some(5));
    let mut input = frame(DATA, 0, 1, b"12");
    input.extend(frame(DATA, END_STREAM, 1, b"345"));
    let got = feed(&mut s, &input);
    assert_eq!(
        got,
        [
            Incoming::Data {
                stream: 1,
                data: 9..11,
                end_stream: false
            },
            Incoming::Data {
                stream: 1,
                data: 20..23,
                end_stream: true
            },
        ]
    );
    assert!(s.bodies.is_empty());
}

#[test]
fn a_body_longer_or_shorter_than_its_content_length_is_reset() {
    let mut s = server(Config::default());
    request(&mut s, 1, &post("3"), false);
    let got = feed(&mut s, &frame(DATA, 0, 1, b"1234"));
    assert_eq!(
        got,
        [Incoming::Reset {
            stream: 1,
            code: Reason::PROTOCOL_ERROR,
            by_peer: false
        }]
    );
    assert_reset(&mut s, 1, Reason::PROTOCOL_ERROR);
    request(&mut s, 3, &post("10"), false);
    let got = feed(&mut s, &frame(DATA, END_STREAM, 3, b"12345"));
    assert_eq!(
        got,
        [Incoming::Reset {
            stream: 3,
            code: Reason::PROTOCOL_ERROR,
            by_peer: false
        }]
    );
    assert_reset(&mut s, 3, Reason::PROTOCOL_ERROR);
    // END_STREAM on the HEADERS of a request that announces a body.
    let got = request(&mut s, 5, &post("1"), true);
    assert!(
        matches!(got[..], [Incoming::Malformed { stream: 5, .. }]),
        "{got:?}"
    );
    assert_reset(&mut s, 5, Reason::PROTOCOL_ERROR);
    // Trailers before the announced body is whole.
    request(&mut s, 7, &post("4"), false);
    let mut input = frame(DATA, 0, 7, b"12");
    input.extend(frame(
        HEADERS,
        END_HEADERS | END_STREAM,
        7,
        &block(&[("x-t", "1")]),
    ));
    let got = feed(&mut s, &input);
    assert!(
        matches!(
            got[..],
            [Incoming::Data { .. }, Incoming::Malformed { stream: 7, .. }]
        ),
        "{got:?}"
    );
    assert!(s.bodies.is_empty());
}

#[test]
fn trailers_are_checked() {
    let mut s = server(Config::default());
    request(&mut s, 1, &post("2"), false);
    let mut input = frame(DATA, 0, 1, b"12");
    input.extend(frame(
        HEADERS,
        END_HEADERS | END_STREAM,
        1,
        &block(&[("x-sum", "3")]),
    ));
    let got = feed(&mut s, &input);
    match &got[..] {
        [Incoming::Data { .. }, Incoming::Trailers { stream: 1, fields }] => {
            assert_eq!(fields.get(b"x-sum"), Some(&b"3"[..]));
            assert_eq!(fields.len(), 1);
        }
        _ => panic!("{got:?}"),
    }
    for (i, bad) in [
        (":path", "/"),
        ("X-Up", "1"),
        ("connection", "x"),
        ("x-a", "\r"),
    ]
    .into_iter()
    .enumerate()
    {
        let id = 3 + 2 * i as u32;
        request(&mut s, id, &post("0"), false);
        let got = feed(
            &mut s,
            &frame(HEADERS, END_HEADERS | END_STREAM, id, &block(&[bad])),
        );
        assert!(
            matches!(got[..], [Incoming::Malformed { stream, .. }] if stream == id),
            "{bad:?}: {got:?}"
        );
        assert_reset(&mut s, id, Reason::PROTOCOL_ERROR);
    }
}

#[test]
fn data_after_a_malformed_request_in_the_same_read_is_dropped() {
    let mut s = server(Config::default());
    let mut input = frame(
        HEADERS,
        END_HEADERS,
        1,
        &block(&get_with(&[("upgrade", "x")])),
    );
    input.extend(frame(DATA, END_STREAM, 1, b"abc"));
    let got = feed(&mut s, &input);
    assert!(
        matches!(got[..], [Incoming::Malformed { stream: 1, .. }]),
        "{got:?}"
    );
}

#[test]
fn an_undecodable_block_ends_the_connection_with_compression_error() {
    let mut s = server(Config::default());
    // Index 0, then a request that must not be reported.
    let mut input = frame(HEADERS, END_HEADERS | END_STREAM, 1, &[0x80]);
    input.extend(frame(
        HEADERS,
        END_HEADERS | END_STREAM,
        3,
        &block(&get_with(&[])),
    ));
    s.recv(&input).expect("the frames are fine");
    let got: Vec<_> = std::iter::from_fn(|| s.poll(&input)).collect();
    assert!(
        matches!(
            got[..],
            [Incoming::Closed(ConnError {
                code: Reason::COMPRESSION_ERROR,
                ..
            })]
        ),
        "{got:?}"
    );
    let frames = out(&mut s);
    let goaway = frames.iter().find(|f| f.0 == GOAWAY).expect("a GOAWAY");
    assert_eq!(goaway.3[4..8], Reason::COMPRESSION_ERROR.0.to_be_bytes());
    assert!(s.recv(&frame(HEADERS, END_HEADERS, 5, &[0x82])).is_err());
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
fn a_block_past_the_bounds_is_too_large_and_the_table_stays_in_step() {
    let cfg = Config {
        bounds: Bounds {
            list: 4096,
            field: 100,
        },
        ..Config::default()
    };
    let mut s = server(cfg);
    // A 120-byte value, indexed: too large, but the entry goes in the table.
    let mut b = block(&post("3"));
    b.extend(indexed_literal("x-big", &[b'v'; 120]));
    let mut input = frame(HEADERS, END_HEADERS, 1, &b);
    input.extend(frame(DATA, END_STREAM, 1, b"abc"));
    let got = feed(&mut s, &input);
    assert_eq!(
        got,
        [Incoming::TooLarge {
            stream: 1,
            which: TooLarge::Field
        }]
    );
    s.refuse(1, 431);
    let frames = out(&mut s);
    let heads: Vec<_> = frames.iter().filter(|f| f.0 == HEADERS).collect();
    assert_eq!(heads.len(), 1);
    assert_eq!((heads[0].1 & END_STREAM, heads[0].2), (END_STREAM, 1));
    // A block that names the entry (index 62) is decoded against the same table.
    let mut b = block(&get_with(&[]));
    b.push(0x80 | 62);
    let got = feed(&mut s, &frame(HEADERS, END_HEADERS | END_STREAM, 3, &b));
    assert_eq!(
        got,
        [Incoming::TooLarge {
            stream: 3,
            which: TooLarge::Field
        }]
    );
    // The list bound.
    let cfg = Config {
        bounds: Bounds {
            list: 200,
            field: 100,
        },
        ..Config::default()
    };
    let mut s = server(cfg);
    let (a, b) = ("a".repeat(60), "b".repeat(60));
    let fields = get_with(&[("x-1", &a), ("x-2", &b)]);
    let got = request(&mut s, 1, &fields, true);
    assert_eq!(
        got,
        [Incoming::TooLarge {
            stream: 1,
            which: TooLarge::List
        }]
    );
}

#[test]
fn a_refused_request_with_a_body_still_coming_is_reset_with_no_error() {
    let cfg = Config {
        bounds: Bounds {
            list: 4096,
            field: 10,
        },
        ..Config::default()
    };
    let mut s = server(cfg);
    let got = request(&mut s, 1, &post("100"), false);
    assert_eq!(
        got,
        [Incoming::TooLarge {
            stream: 1,
            which: TooLarge::Field
        }]
    );
    s.refuse(1, 400);
    let frames = out(&mut s);
    assert_eq!(frames.len(), 2, "{frames:?}");
    assert_eq!(
        (frames[0].0, frames[0].1 & END_STREAM),
        (HEADERS, END_STREAM)
    );
    assert_eq!(frames[0].3, [0x80 | 12], "400 by its static index");
    assert_eq!(
        (frames[1].0, &frames[1].3[..]),
        (RST_STREAM, &[0, 0, 0, 0][..])
    );
}

#[test]
fn a_discarded_block_still_feeds_the_table() {
    let cfg = Config {
        frame: crate::frame::Config {
            max_concurrent_streams: 1,
            ..Default::default()
        },
        ..Config::default()
    };
    let mut s = server(cfg);
    request(&mut s, 1, &post("10"), false);
    // Stream 3 is refused (one stream at most): its block is discarded but indexed.
    let mut b = block(&get_with(&[]));
    b.extend(indexed_literal("x-kept", b"yes"));
    let got = feed(&mut s, &frame(HEADERS, END_HEADERS | END_STREAM, 3, &b));
    assert!(got.is_empty(), "{got:?}");
    assert_reset(&mut s, 3, Reason::REFUSED_STREAM);
    feed(&mut s, &frame(DATA, END_STREAM, 1, b"0123456789"));
    s.send_answer(1, 204, [], true).unwrap();
    let mut b = block(&get_with(&[]));
    b.push(0x80 | 62);
    let r = only_request(feed(
        &mut s,
        &frame(HEADERS, END_HEADERS | END_STREAM, 5, &b),
    ));
    assert_eq!(r.fields().get(b"x-kept"), Some(&b"yes"[..]));
}

/// Decodes an answer's blocks as a client would.
fn client_view(d: &mut Decoder, block: &[u8]) -> Vec<(String, String)> {
    let mut fields = Vec::new();
    d.decode(block, &mut Vec::new(), |f: Field<'_>| {
        fields.push((
            String::from_utf8_lossy(f.name).into_owned(),
            String::from_utf8_lossy(f.value).into_owned(),
        ));
        Ok::<(), ()>(())
    })
    .expect("a valid block");
    fields
}

#[test]
fn answers_are_lowercased_and_lose_connection_specific_fields() {
    let mut s = server(Config {
        encoder_table: 256,
        ..Config::default()
    });
    request(&mut s, 1, &get_with(&[]), true);
    request(&mut s, 3, &post("1"), false);
    let fields: [(&[u8], &[u8]); 5] = [
        (b"Content-Type", b"text/html"),
        (b"Connection", b"keep-alive"),
        (b"transfer-encoding", b"chunked"),
        (b"x-a", b"1"),
        (b":status", b"500"),
    ];
    s.send_answer(1, 302, fields, false).unwrap();
    s.conn_mut().send_data(1, b"hi", false).unwrap();
    s.send_trailers(1, [(&b"Grpc-Status"[..], &b"0"[..])])
        .unwrap();
    s.send_answer(3, 200, [(&b"content-type"[..], &b"text/html"[..])], true)
        .unwrap();
    let frames = out(&mut s);
    let mut d = Decoder::new(Bounds::default());
    let blocks: Vec<_> = frames.iter().filter(|f| f.0 == HEADERS).collect();
    assert_eq!(blocks.len(), 3);
    let pair = |n: &str, v: &str| (n.to_string(), v.to_string());
    assert_eq!(
        client_view(&mut d, &blocks[0].3),
        [
            pair(":status", "302"),
            pair("content-type", "text/html"),
            pair("x-a", "1")
        ]
    );
    assert_eq!(
        client_view(&mut d, &blocks[1].3),
        [pair("grpc-status", "0")]
    );
    assert_eq!(blocks[1].1 & END_STREAM, END_STREAM);
    assert_eq!(
        client_view(&mut d, &blocks[2].3),
        [pair(":status", "200"), pair("content-type", "text/html")]
    );
    assert_eq!(blocks[2].3.len(), 2, "the repeated field by its index");
}

#[test]
fn an_answer_to_a_stream_gone_encodes_nothing() {
    let mut s = server(Config {
        encoder_table: 256,
        ..Config::default()
    });
    assert_eq!(
        s.send_answer(1, 200, [(&b"server"[..], &b"shoal"[..])], true),
        Err(StreamGone)
    );
    request(&mut s, 1, &get_with(&[]), true);
    s.send_answer(1, 200, [(&b"server"[..], &b"shoal"[..])], true)
        .unwrap();
    assert_eq!(s.send_trailers(1, []), Err(StreamGone));
    let frames = out(&mut s);
    // Had the first answer touched the table, the client would not know `server` here.
    let mut d = Decoder::new(Bounds::default());
    let view = client_view(&mut d, &frames.iter().find(|f| f.0 == HEADERS).unwrap().3);
    assert_eq!(view[1], ("server".to_string(), "shoal".to_string()));
}

#[test]
fn a_lower_header_table_size_applies_once_acknowledged() {
    let cfg = Config {
        frame: crate::frame::Config {
            header_table_size: 0,
            ..Default::default()
        },
        ..Config::default()
    };
    let mut s = Server::new(cfg);
    let mut input = PREFACE.to_vec();
    input.extend(frame(SETTINGS, 0, 0, &[]));
    // Before the ACK the client may still index with the protocol's 4,096.
    let mut b = block(&get_with(&[]));
    b.extend(indexed_literal("x-a", b"1"));
    input.extend(frame(HEADERS, END_HEADERS | END_STREAM, 1, &b));
    let got = feed(&mut s, &input);
    assert!(
        matches!(
            got[..],
            [Incoming::SettingsChanged, Incoming::Request { .. }]
        ),
        "{got:?}"
    );
    // After it, a block must open with a size update to 0 ...
    let mut input = frame(SETTINGS, 1, 0, &[]);
    input.extend(frame(
        HEADERS,
        END_HEADERS | END_STREAM,
        3,
        &block(&get_with(&[])),
    ));
    let got = feed(&mut s, &input);
    assert!(matches!(got[..], [Incoming::Closed(_)]), "{got:?}");
    // ... as this one does.
    let mut s = Server::new(Config {
        frame: crate::frame::Config {
            header_table_size: 0,
            ..Default::default()
        },
        ..Config::default()
    });
    let mut input = PREFACE.to_vec();
    input.extend(frame(SETTINGS, 0, 0, &[]));
    input.extend(frame(SETTINGS, 1, 0, &[]));
    feed(&mut s, &input);
    let mut b = vec![0x20];
    b.extend(block(&get_with(&[])));
    let got = feed(&mut s, &frame(HEADERS, END_HEADERS | END_STREAM, 1, &b));
    assert!(matches!(got[..], [Incoming::Request { .. }]), "{got:?}");
}

#[test]
fn an_idle_server_shrinks() {
    let mut s = server(Config::default());
    request(&mut s, 1, &get_with(&[("x-a", "1")]), true);
    s.send_answer(1, 200, [(&b"x-b"[..], &b"2"[..])], true)
        .unwrap();
    out(&mut s);
    s.shrink();
    assert_eq!(s.heap_bytes(), 0);
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
                assert_eq!(check_value(&v).is_err(), value_rule(b), "value {v:?}");
            }
        }
    }
}
