//! The client's layer: requests as a server's decoder reads them, answers checked, HPACK kept
//! in step with the server's encoder.

use super::*;
use crate::frame::tests::{frame, parse_frames, settings, Out, DATA, HEADERS, RST_STREAM};
use crate::frame::tests::{END_HEADERS, END_STREAM, SETTINGS};
use crate::frame::PREFACE;
use crate::hpack::Decoder;

/// A client past both SETTINGS, its output drained.
fn client(cfg: Config) -> Client {
    let mut c = Client::new(cfg);
    let n = c.conn().pending_output().len();
    c.conn_mut().advance(n);
    let mut hello = settings(&[]);
    hello.extend(frame(SETTINGS, 1, 0, &[]));
    feed(&mut c, &hello);
    out(&mut c);
    c
}

/// Gives `input` (whole frames) to the client, a call after each answer's head; what it
/// reports, with ranges into `input`.
fn feed(c: &mut Client, input: &[u8]) -> Vec<Incoming> {
    let mut got = Vec::new();
    let mut at = 0;
    while at < input.len() {
        let used = c.recv(&input[at..]).expect("no connection error");
        assert!(used > 0, "whole frames");
        while let Some(mut i) = c.poll(&input[at..]) {
            if let Incoming::Data { data, .. } = &mut i {
                *data = data.start + at..data.end + at;
            }
            got.push(i);
        }
        at += used;
    }
    got
}

fn out(c: &mut Client) -> Vec<Out> {
    let frames = parse_frames(c.conn().pending_output());
    let n = c.conn().pending_output().len();
    c.conn_mut().advance(n);
    frames
}

const GRPC: RequestHead<'static> = RequestHead {
    method: b"POST",
    scheme: b"http",
    authority: b"backend:50051",
    path: b"/helloworld.Greeter/SayHello",
};

/// A server's block: `:status` and fields, by shoal's own encoder.
fn answer(status: Option<u16>, fields: &[(&str, &str)]) -> Vec<u8> {
    let mut e = Encoder::new();
    let mut b = Vec::new();
    if let Some(s) = status {
        e.status(s, &mut b);
    }
    for (n, v) in fields {
        e.field(n.as_bytes(), v.as_bytes(), &mut b);
    }
    b
}

/// A server's view of a request's block (the one tests read answers with).
use crate::server::tests::answers::client_view as decoded;

#[test]
fn requests_decode_as_sent_and_repeat_from_the_table() {
    let mut c = client(Config::default());
    let fields = [
        (&b"Content-Type"[..], &b"application/grpc"[..]),
        (b"te", b"trailers"),
        (b"connection", b"close"),
        (b"grpc-timeout", b"1S"),
    ];
    let mut server = Decoder::new(Bounds::default());
    let mut sizes = Vec::new();
    for i in 0..3 {
        let id = c.request(&GRPC, fields, true).unwrap();
        assert_eq!(id, 1 + 2 * i);
        let f = out(&mut c);
        assert_eq!((f[0].kind, f[0].stream), (HEADERS, id));
        sizes.push(f[0].payload.len());
        let got = decoded(&mut server, &f[0].payload);
        let want = [
            (":method", "POST"),
            (":scheme", "http"),
            (":authority", "backend:50051"),
            (":path", "/helloworld.Greeter/SayHello"),
            ("content-type", "application/grpc"),
            ("te", "trailers"),
            ("grpc-timeout", "1S"),
        ];
        let want: Vec<_> = want
            .iter()
            .map(|(n, v)| (n.to_string(), v.to_string()))
            .collect();
        assert_eq!(got, want, "lowercased, connection-specific dropped");
    }
    assert!(
        sizes[1] < sizes[0] / 3,
        "indexed the second time: {sizes:?}"
    );
    assert_eq!(sizes[1], sizes[2]);
}

#[test]
fn a_unary_call_from_head_to_trailers() {
    let mut c = client(Config::default());
    let id = c.request(&GRPC, [], false).unwrap();
    assert_eq!(c.conn_mut().send_data(id, b"\0\0\0\0\x02hi", true), Ok(7));
    let f = out(&mut c);
    assert_eq!(
        (f[1].kind, f[1].flags, &f[1].payload[..]),
        (DATA, END_STREAM, &b"\0\0\0\0\x02hi"[..])
    );
    let mut input = frame(
        HEADERS,
        END_HEADERS,
        id,
        &answer(Some(200), &[("content-type", "application/grpc")]),
    );
    input.extend(frame(DATA, 0, id, b"\0\0\0\0\x01!"));
    input.extend(frame(
        HEADERS,
        END_HEADERS | END_STREAM,
        id,
        &answer(None, &[("grpc-status", "0")]),
    ));
    let got = feed(&mut c, &input);
    let Incoming::Head {
        head: response,
        end_stream: false,
        ..
    } = &got[0]
    else {
        panic!("{got:?}");
    };
    assert_eq!(response.status(), 200);
    assert_eq!(
        response.fields().get(b"content-type"),
        Some(&b"application/grpc"[..])
    );
    let Incoming::Data {
        data,
        end_stream: false,
        ..
    } = &got[1]
    else {
        panic!("{got:?}");
    };
    assert_eq!(&input[data.clone()], b"\0\0\0\0\x01!");
    let Incoming::Trailers { fields, .. } = &got[2] else {
        panic!("{got:?}");
    };
    assert_eq!(fields.get(b"grpc-status"), Some(&b"0"[..]));
    assert_eq!(c.conn().open_streams(), 0);
}

#[test]
fn a_trailers_only_answer_ends_in_its_head() {
    let mut c = client(Config::default());
    let id = c.request(&GRPC, [], true).unwrap();
    let block = answer(Some(200), &[("grpc-status", "12")]);
    let got = feed(
        &mut c,
        &frame(HEADERS, END_HEADERS | END_STREAM, id, &block),
    );
    assert!(
        matches!(
            got[..],
            [Incoming::Head {
                end_stream: true,
                ..
            }]
        ),
        "{got:?}"
    );
}

#[test]
fn interim_heads_are_skipped() {
    let mut c = client(Config::default());
    let id = c.request(&GRPC, [], true).unwrap();
    let mut input = frame(
        HEADERS,
        END_HEADERS,
        id,
        &answer(Some(103), &[("link", "</a>")]),
    );
    input.extend(frame(
        HEADERS,
        END_HEADERS | END_STREAM,
        id,
        &answer(Some(204), &[]),
    ));
    let got = feed(&mut c, &input);
    match &got[..] {
        [Incoming::Head { head: response, .. }] => assert_eq!(response.status(), 204),
        _ => panic!("{got:?}"),
    }
}

#[test]
fn malformed_answers_reset_their_stream() {
    let bad: [Vec<u8>; 6] = [
        answer(None, &[("content-type", "x")]),
        [
            answer(Some(200), &[]),
            vec![0, 5, b'U', b'p', b'p', b'e', b'r', 1, b'x'],
        ]
        .concat(),
        answer(Some(200), &[("connection", "close")]),
        answer(Some(200), &[(":path", "/")]),
        [answer(Some(200), &[]), answer(Some(200), &[])].concat(),
        answer(Some(200), &[("content-length", "1x")]),
    ];
    for block in bad {
        let mut c = client(Config::default());
        let id = c.request(&GRPC, [], true).unwrap();
        out(&mut c);
        let got = feed(&mut c, &frame(HEADERS, END_HEADERS, id, &block));
        assert!(matches!(got[..], [Incoming::Malformed { .. }]), "{got:?}");
        let f = out(&mut c);
        assert!(
            f.iter().any(|f| f.kind == RST_STREAM && f.code() == 1),
            "{f:?}"
        );
        // The connection goes on.
        assert_eq!(c.request(&GRPC, [], true), Ok(id + 2));
    }
}

#[test]
fn a_body_longer_or_shorter_than_its_length_is_malformed() {
    for (body, end) in [(&b"12345"[..], false), (&b"12"[..], true)] {
        let mut c = client(Config::default());
        let id = c.request(&GRPC, [], true).unwrap();
        let mut input = frame(
            HEADERS,
            END_HEADERS,
            id,
            &answer(Some(200), &[("content-length", "3")]),
        );
        input.extend(frame(DATA, if end { END_STREAM } else { 0 }, id, body));
        let got = feed(&mut c, &input);
        assert!(matches!(got[1], Incoming::Malformed { .. }), "{got:?}");
    }
}

#[test]
fn a_head_past_the_bounds_resets_the_stream_and_the_table_follows() {
    let mut c = client(Config {
        bounds: Bounds {
            list: 200,
            field: 100,
        },
        ..Config::default()
    });
    let id = c.request(&GRPC, [], true).unwrap();
    out(&mut c);
    // A literal with incremental indexing, too long: refused, yet in the table.
    let mut block = answer(Some(200), &[]);
    block.push(0x40);
    block.push(1);
    block.push(b'x');
    block.push(120);
    block.extend([b'v'; 120]);
    let got = feed(&mut c, &frame(HEADERS, END_HEADERS, id, &block));
    assert!(matches!(got[..], [Incoming::TooLarge { .. }]), "{got:?}");
    assert!(out(&mut c)
        .iter()
        .any(|f| f.kind == RST_STREAM && f.code() == 8));
    // The next answer refers to it by index 62 and is too large again, not a
    // COMPRESSION_ERROR: the table followed.
    let id = c.request(&GRPC, [], true).unwrap();
    let got = feed(&mut c, &frame(HEADERS, END_HEADERS, id, &[0x88, 0xbe]));
    assert!(matches!(got[..], [Incoming::TooLarge { .. }]), "{got:?}");
}

#[test]
fn an_undecodable_block_ends_the_connection() {
    let mut c = client(Config::default());
    let id = c.request(&GRPC, [], true).unwrap();
    out(&mut c);
    let got = feed(
        &mut c,
        &frame(HEADERS, END_HEADERS, id, &[0x88, 0xff, 0xff]),
    );
    match &got[..] {
        [Incoming::Closed(e)] => {
            assert_eq!(e.code, Reason::COMPRESSION_ERROR);
            assert_eq!(e.to_string(), "upstream sent invalid header block");
        }
        _ => panic!("{got:?}"),
    }
    assert_eq!(c.request(&GRPC, [], true), Err(Refused::Closed));
}

#[test]
fn request_trailers_end_the_body() {
    let mut c = client(Config::default());
    let id = c.request(&GRPC, [], false).unwrap();
    c.conn_mut().send_data(id, b"abc", false).unwrap();
    c.send_trailers(id, [(&b"X-Done"[..], &b"1"[..])]).unwrap();
    let f = out(&mut c);
    let last = f.last().unwrap();
    assert_eq!((last.kind, last.flags), (HEADERS, END_HEADERS | END_STREAM));
    let mut d = Decoder::new(Bounds::default());
    decoded(&mut d, &f[0].payload);
    assert_eq!(
        decoded(&mut d, &last.payload),
        [("x-done".to_string(), "1".to_string())]
    );
    assert_eq!(c.send_trailers(id, []), Err(StreamGone));
}

#[test]
fn recv_stops_after_a_head_for_it_to_be_decoded() {
    let mut c = client(Config::default());
    let id = c.request(&GRPC, [], true).unwrap();
    let mut input = frame(HEADERS, END_HEADERS, id, &answer(Some(200), &[]));
    let head = input.len();
    input.extend(frame(DATA, END_STREAM, id, b"x"));
    assert_eq!(c.recv(&input), Ok(head));
    assert!(matches!(c.poll(&input), Some(Incoming::Head { .. })));
    assert_eq!(c.poll(&input), None);
    assert_eq!(c.recv(&input[head..]), Ok(input.len() - head));
}

#[test]
fn a_new_client_starts_with_the_preface() {
    let c = Client::new(Config::default());
    assert!(c.conn().pending_output().starts_with(PREFACE));
}

#[test]
fn a_repeated_head_is_its_block_again_while_the_table_is_unchanged() {
    // Every block is read by the server's decoder as asked, whatever came between: a head
    // with new fields, trailers, a smaller table (each moves or drops the entries the kept
    // block's indexes name).
    let mut c = client(Config::default());
    let mut server = Decoder::new(Bounds::default());
    let a = [
        (&b"content-type"[..], &b"application/grpc"[..]),
        (b"te", b"trailers"),
    ];
    let b = [(&b"x-other"[..], &b"1"[..]), (b"te", b"trailers")];
    let want = |fields: &[(&[u8], &[u8])]| {
        let mut w: Vec<(String, String)> = [
            (":method", "POST"),
            (":scheme", "http"),
            (":authority", "backend:50051"),
            (":path", "/helloworld.Greeter/SayHello"),
        ]
        .iter()
        .map(|(n, v)| (n.to_string(), v.to_string()))
        .collect();
        for (n, v) in fields {
            w.push((
                String::from_utf8_lossy(n).into_owned(),
                String::from_utf8_lossy(v).into_owned(),
            ));
        }
        w
    };
    let mut blocks = Vec::new();
    let mut send = |c: &mut Client, fields: &[(&[u8], &[u8])], trailers: bool| {
        let id = c.request(&GRPC, fields.iter().copied(), !trailers).unwrap();
        if trailers {
            c.send_trailers(id, [(&b"x-trailer"[..], &b"t"[..])])
                .unwrap();
        }
        let f = out(c);
        assert_eq!(decoded(&mut server, &f[0].payload), want(fields));
        if trailers {
            decoded(&mut server, &f.last().unwrap().payload);
        }
        blocks.push(f[0].payload.clone());
    };
    send(&mut c, &a, false);
    send(&mut c, &a, false);
    send(&mut c, &a, false);
    send(&mut c, &b, false);
    send(&mut c, &a, true);
    send(&mut c, &a, false);
    send(&mut c, &a, false);
    // Fewer fields than the last head's, then more.
    send(&mut c, &a[..1], false);
    send(&mut c, &a, false);
    // The server's table shrinks: the next block starts with the size update.
    feed(&mut c, &settings(&[(0x1, 64)]));
    out(&mut c);
    send(&mut c, &a, false);
    send(&mut c, &a, false);
    assert_eq!(blocks[1], blocks[2], "the same head, the same block");
    assert_ne!(blocks[0], blocks[1], "indexed the second time");
    assert_eq!(blocks[9][0] & 0xe0, 0x20, "a size update first");
}

#[test]
fn fields_from_the_table_are_still_held_to_the_forbidden_list() {
    let mut c = client(Config::default());
    // One encoder for every block, indexing every field: the second use of a field is its
    // index in the table.
    let mut e = Encoder::for_requests(crate::hpack::DEFAULT_TABLE_SIZE);
    let mut block = |status: Option<u16>, fields: &[(&str, &str)]| {
        let mut b = Vec::new();
        if let Some(s) = status {
            e.status(s, &mut b);
        }
        for (n, v) in fields {
            e.field(n.as_bytes(), v.as_bytes(), &mut b);
        }
        b
    };
    let heads = [
        block(Some(200), &[("connection", "close")]),
        block(Some(200), &[("connection", "close")]),
    ];
    assert!(heads[1].len() < heads[0].len(), "indexed the second time");
    for head in heads {
        let id = c.request(&GRPC, [], true).unwrap();
        out(&mut c);
        let got = feed(&mut c, &frame(HEADERS, END_HEADERS, id, &head));
        assert!(matches!(got[..], [Incoming::Malformed { .. }]), "{got:?}");
    }
    // Trailers too: a good head, then trailers naming a field HTTP/2 forbids, twice.
    let ok = block(Some(200), &[]);
    let bad = [("grpc-status", "0"), ("connection", "keep-alive")];
    let trailers = [block(None, &bad), block(None, &bad)];
    assert!(
        trailers[1].len() < trailers[0].len(),
        "indexed the second time"
    );
    for trailers in trailers {
        let id = c.request(&GRPC, [], true).unwrap();
        out(&mut c);
        let mut input = frame(HEADERS, END_HEADERS, id, &ok);
        input.extend(frame(HEADERS, END_HEADERS | END_STREAM, id, &trailers));
        let got = feed(&mut c, &input);
        assert!(
            matches!(got[..], [Incoming::Head { .. }, Incoming::Malformed { .. }]),
            "{got:?}"
        );
    }
}

#[test]
fn recycled_trailers_hold_the_next_ones_only() {
    let mut c = client(Config::default());
    let got_trailers = |c: &mut Client, fields: &[(&str, &str)]| {
        let id = c.request(&GRPC, [], true).unwrap();
        out(c);
        let mut input = frame(HEADERS, END_HEADERS, id, &answer(Some(200), &[]));
        input.extend(frame(
            HEADERS,
            END_HEADERS | END_STREAM,
            id,
            &answer(None, fields),
        ));
        let mut got = feed(c, &input);
        let Some(Incoming::Trailers { fields, .. }) = got.pop() else {
            panic!("{got:?}");
        };
        fields
    };
    let first = got_trailers(&mut c, &[("grpc-status", "0"), ("grpc-message", "fine")]);
    c.recycle(first);
    let second = got_trailers(&mut c, &[("grpc-status", "13")]);
    let second: Vec<_> = second.iter().collect();
    assert_eq!(second, [(&b"grpc-status"[..], &b"13"[..])]);
}
