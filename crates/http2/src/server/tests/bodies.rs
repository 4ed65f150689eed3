//! Bodies against `content-length`, trailers, and the HPACK table kept in step whatever
//! happens to a stream.

use super::*;

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
    assert!(s.c.bodies.is_empty());
}

#[test]
fn a_body_longer_or_shorter_than_its_content_length_is_reset_and_says_why() {
    let mut s = server(Config::default());
    request(&mut s, 1, &post("3"), false);
    let got = feed(&mut s, &frame(DATA, 0, 1, b"1234"));
    assert_eq!(
        got,
        [Incoming::Malformed {
            stream: 1,
            why: Malformed::BodyTooLong
        }]
    );
    assert_reset(&mut s, 1, Reason::PROTOCOL_ERROR);
    request(&mut s, 3, &post("10"), false);
    let got = feed(&mut s, &frame(DATA, END_STREAM, 3, b"12345"));
    let why = Malformed::BodyShort {
        received: 5,
        declared: 10,
    };
    assert_eq!(got, [Incoming::Malformed { stream: 3, why }]);
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
            &got[..],
            [Incoming::Data { .. }, Incoming::Malformed { stream: 7, why }]
                if why.to_string() == "client prematurely closed stream: only 2 out of 4 bytes of request body received"
        ),
        "{got:?}"
    );
    assert!(s.c.bodies.is_empty());
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

#[test]
fn header_buffers_bound_fields_and_the_list() {
    // The list counts name + value + 32 a field: the pseudo-headers here are 180, a field of
    // 100 bytes 135.
    let cfg = Config::default().header_buffers(4, 100);
    assert_eq!(
        cfg.bounds,
        Bounds {
            list: 400,
            field: 100
        }
    );
    assert_eq!(cfg.frame.max_header_list_size, 400);
    let mut s = server(cfg);
    let long = "v".repeat(101);
    let got = request(&mut s, 1, &get_with(&[("x-a", &long)]), true);
    assert_eq!(
        got,
        [Incoming::TooLarge {
            stream: 1,
            which: TooLarge::Field
        }]
    );
    let fits = "v".repeat(100);
    let got = request(&mut s, 3, &get_with(&[("x-a", &fits)]), true);
    assert!(matches!(got[..], [Incoming::Head { .. }]), "{got:?}");
    let got = request(
        &mut s,
        5,
        &get_with(&[("x-a", &fits), ("x-b", &fits)]),
        true,
    );
    assert_eq!(
        got,
        [Incoming::TooLarge {
            stream: 5,
            which: TooLarge::List
        }]
    );
}
