//! Answers as a client decodes them, resets, the table size, memory.

use super::*;
use crate::hpack::Decoder;

/// Decodes an answer's blocks as a client would (and a request's as a server would).
pub(crate) fn client_view(d: &mut Decoder, block: &[u8]) -> Vec<(String, String)> {
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
        matches!(got[..], [Incoming::SettingsChanged, Incoming::Head { .. }]),
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
    assert!(matches!(got[..], [Incoming::Head { .. }]), "{got:?}");
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
fn a_parked_server_holds_no_table_and_its_client_still_reads_every_answer() {
    let mut s = server(Config {
        encoder_table: 256,
        ..Config::default()
    });
    let mut d = Decoder::new(Bounds::default());
    let answer = |s: &mut Server, d: &mut Decoder, id: u32, ctype: &[u8]| {
        request(s, id, &get_with(&[]), true);
        let fields: [(&[u8], &[u8]); 2] = [(b"server", b"shoal"), (b"content-type", ctype)];
        s.send_answer(id, 200, fields, true).unwrap();
        let frames = out(s);
        let b = &frames.iter().find(|f| f.0 == HEADERS).unwrap().3;
        (client_view(d, b), b.len())
    };
    let (_, first) = answer(&mut s, &mut d, 1, b"text/html");
    let (_, again) = answer(&mut s, &mut d, 3, b"text/html");
    assert!(again < first, "indexed the second time");
    s.shrink();
    assert!(s.heap_bytes() > 0, "shrink keeps the encoder's table");
    s.park();
    assert_eq!(s.heap_bytes(), 0);
    // The client's table still holds the old entries: the new ones go in front of them, and
    // every index the encoder sends from now on means what it meant to say.
    for (id, ctype) in [
        (5, &b"text/plain"[..]),
        (7, b"text/plain"),
        (9, b"text/html"),
    ] {
        let (view, _) = answer(&mut s, &mut d, id, ctype);
        let pair = |n: &str, v: &[u8]| (n.to_string(), String::from_utf8_lossy(v).into_owned());
        assert_eq!(
            view,
            [
                pair(":status", b"200"),
                pair("server", b"shoal"),
                pair("content-type", ctype)
            ]
        );
    }
    let (_, last) = answer(&mut s, &mut d, 11, b"text/html");
    assert_eq!(last, again, "indexed again after the park");
}

#[test]
fn a_stream_the_caller_resets_is_forgotten_and_its_data_dropped() {
    let mut s = server(Config::default());
    request(&mut s, 1, &post("10"), false);
    s.reset(1, Reason::CANCEL);
    assert!(s.c.bodies.is_empty());
    assert_reset(&mut s, 1, Reason::CANCEL);
    let got = feed(&mut s, &frame(DATA, 0, 1, b"12345"));
    assert!(got.is_empty(), "{got:?}");
}

#[test]
fn a_recycled_request_lends_its_buffers_to_the_next() {
    let mut s = server(Config::default());
    let r = only_request(request(&mut s, 1, &get_with(&[("x-a", "1")]), true));
    let first = r.fields().iter().next().unwrap().0.as_ptr();
    let before = s.heap_bytes();
    s.recycle(r.into_fields());
    assert!(s.heap_bytes() > before, "the spare is held");
    let r = only_request(request(&mut s, 3, &get_with(&[("x-a", "2")]), true));
    assert_eq!(r.fields().iter().next().unwrap().0.as_ptr(), first);
    assert_eq!(r.fields().get(b"x-a"), Some(&b"2"[..]));
    s.recycle(r.into_fields());
    s.shrink();
    out(&mut s);
    s.shrink();
    assert_eq!(s.heap_bytes(), 0);
}

#[test]
fn an_idle_server_s_lists_serve_the_next_connection_and_lists_in_use_stay() {
    let mut s = server(Config::default());
    request(&mut s, 1, &get_with(&[("x-a", "1")]), true);
    s.send_answer(1, 200, [(&b"x-b"[..], &b"2"[..])], true)
        .unwrap();
    out(&mut s);
    let lists = s.take_lists();
    assert!(lists.heap_bytes() > 0, "the streams' lists are lent");
    s.shrink();
    assert_eq!(s.heap_bytes(), 0, "and the server keeps none");

    // A connection with a body coming keeps the lists that track it.
    let mut busy = server(Config::default());
    request(&mut busy, 1, &post("10"), false);
    let _ = busy.take_lists();
    busy.give_lists(lists);
    let got = feed(&mut busy, &frame(DATA, END_STREAM, 1, b"12345"));
    let why = Malformed::BodyShort {
        received: 5,
        declared: 10,
    };
    assert_eq!(got, [Incoming::Malformed { stream: 1, why }]);
    assert_reset(&mut busy, 1, Reason::PROTOCOL_ERROR);
    // And the next request is read and answered with the lists it was given.
    let mut d = Decoder::new(Bounds::default());
    request(&mut busy, 3, &get_with(&[]), true);
    busy.send_answer(3, 204, [(&b"x-c"[..], &b"3"[..])], true)
        .unwrap();
    let frames = out(&mut busy);
    let b = &frames.iter().find(|f| f.0 == HEADERS).unwrap().3;
    let pair = |n: &str, v: &str| (n.to_string(), v.to_string());
    assert_eq!(
        client_view(&mut d, b),
        [pair(":status", "204"), pair("x-c", "3")]
    );
}
