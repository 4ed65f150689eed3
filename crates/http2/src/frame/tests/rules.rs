//! RFC 9113's rules for what a client sends, one test each.

use super::*;

#[test]
fn server_preface_announces_the_configuration() {
    let cfg = Config {
        max_concurrent_streams: 7,
        initial_window_size: 1000,
        connection_window: 1 << 20,
        max_frame_size: 32768,
        header_table_size: 8192,
        max_header_list_size: 5000,
        ..Config::default()
    };
    let mut p = Peer::raw(cfg);
    let out = p.take_output();
    assert_eq!(out.len(), 2);
    assert_eq!((out[0].kind, out[0].flags, out[0].stream), (SETTINGS, 0, 0));
    let mut want = Vec::new();
    for (id, v) in [(3u16, 7u32), (4, 1000), (5, 32768), (1, 8192), (6, 5000)] {
        want.extend_from_slice(&id.to_be_bytes());
        want.extend_from_slice(&v.to_be_bytes());
    }
    assert_eq!(out[0].payload, want);
    assert_eq!((out[1].kind, out[1].stream), (WINDOW_UPDATE, 0));
    assert_eq!(out[1].payload, u32be((1 << 20) - 65535));
}

#[test]
fn preface_is_checked_and_may_come_in_pieces() {
    let mut p = Peer::raw(Config::default());
    assert_eq!(
        p.feed_part(&PREFACE[..10]),
        Ok(0),
        "a partial preface waits"
    );
    let mut rest = PREFACE.to_vec();
    rest.extend(settings(&[]));
    assert_eq!(p.feed_part(&rest), Ok(rest.len()));

    let mut p = Peer::raw(Config::default());
    p.take_output();
    p.expect_conn_error(b"GET / HTTP/1.1\r\n\r\n", Reason::PROTOCOL_ERROR);

    let mut p = Peer::raw(Config::default());
    p.take_output();
    let mut hello = PREFACE.to_vec();
    hello.extend(frame(PING, 0, 0, &[0; 8]));
    p.expect_conn_error(&hello, Reason::PROTOCOL_ERROR);
}

#[test]
fn settings_are_acknowledged_and_applied() {
    let mut p = Peer::new(Config::default());
    p.feed(&settings(&[
        (1, 100),
        (2, 0),
        (4, 1),
        (5, 20000),
        (6, 777),
        (0x99, 5),
    ]))
    .unwrap();
    let out = p.take_output();
    assert_eq!(
        out,
        [Out {
            kind: SETTINGS,
            flags: ACK,
            stream: 0,
            payload: vec![]
        }]
    );
    assert_eq!(p.take_events(), [Event::SettingsChanged]);
    let s = p.conn.peer_settings();
    assert_eq!(
        *s,
        PeerSettings {
            header_table_size: 100,
            enable_push: false,
            initial_window_size: 1,
            max_frame_size: 20000,
            max_header_list_size: Some(777),
            max_concurrent_streams: None,
        }
    );
    // Values apply in order: the last INITIAL_WINDOW_SIZE wins.
    p.feed(&settings(&[(4, 10), (4, 300)])).unwrap();
    assert_eq!(p.conn.peer_settings().initial_window_size, 300);
}

#[test]
fn settings_validation() {
    let cases: &[(Vec<u8>, Reason)] = &[
        (settings(&[(2, 2)]), Reason::PROTOCOL_ERROR),
        (settings(&[(4, 1 << 31)]), Reason::FLOW_CONTROL_ERROR),
        (settings(&[(5, 16383)]), Reason::PROTOCOL_ERROR),
        (settings(&[(5, 1 << 24)]), Reason::PROTOCOL_ERROR),
        (frame(SETTINGS, ACK, 0, &[0; 6]), Reason::FRAME_SIZE_ERROR),
        (frame(SETTINGS, 0, 0, &[0; 7]), Reason::FRAME_SIZE_ERROR),
        (frame(SETTINGS, 0, 1, &[]), Reason::PROTOCOL_ERROR),
    ];
    for (bytes, code) in cases {
        Peer::new(Config::default()).expect_conn_error(bytes, *code);
    }
    // The bounds themselves are fine.
    let mut p = Peer::new(Config::default());
    p.feed(&settings(&[
        (5, 16384),
        (5, 16_777_215),
        (4, 0x7fff_ffff),
        (2, 1),
    ]))
    .unwrap();
    assert_eq!(p.conn.peer_settings().max_frame_size, 16_777_215);
}

#[test]
fn frame_size_is_bounded_by_our_setting() {
    let mut p = Peer::new(Config::default());
    p.feed(&post(1)).unwrap();
    p.feed(&frame(DATA, 0, 1, &[7; 16384])).unwrap();
    p.expect_conn_error(&frame(DATA, 0, 1, &[7; 16385]), Reason::FRAME_SIZE_ERROR);
    // A larger setting allows larger frames.
    let mut p = Peer::new(Config {
        max_frame_size: 20000,
        ..Config::default()
    });
    p.feed(&post(1)).unwrap();
    p.feed(&frame(DATA, 0, 1, &[7; 20000])).unwrap();
    // Refused from the header alone: the payload need not be there.
    let mut p = Peer::new(Config::default());
    let big = frame(HEADERS, END_HEADERS, 1, &[0; 16385]);
    p.expect_conn_error(&big[..9], Reason::FRAME_SIZE_ERROR);
}

#[test]
fn partial_frames_stay_with_the_caller() {
    let mut p = Peer::new(Config::default());
    let mut two = get(1);
    two.extend(get(3));
    assert_eq!(p.feed_part(&two[..two.len() - 1]), Ok(get(1).len()));
    assert_eq!(p.take_events().len(), 1);
    // Byte by byte.
    let f = frame(PING, 0, 0, b"12345678");
    for i in 0..f.len() - 1 {
        assert_eq!(p.conn.recv(&f[..i]), Ok(0));
    }
    assert_eq!(p.conn.recv(&f), Ok(f.len()));
    assert_eq!(p.take_output()[0].payload, b"12345678");
}

#[test]
fn fixed_size_frames_of_a_wrong_length() {
    let cases: &[(Vec<u8>, Reason)] = &[
        (frame(PING, 0, 0, &[0; 7]), Reason::FRAME_SIZE_ERROR),
        (frame(PING, 0, 0, &[0; 9]), Reason::FRAME_SIZE_ERROR),
        (frame(RST_STREAM, 0, 1, &[0; 3]), Reason::FRAME_SIZE_ERROR),
        (
            frame(WINDOW_UPDATE, 0, 0, &[0, 0, 0, 1, 0]),
            Reason::FRAME_SIZE_ERROR,
        ),
        (frame(GOAWAY, 0, 0, &[0; 7]), Reason::FRAME_SIZE_ERROR),
    ];
    for (bytes, code) in cases {
        let mut p = Peer::new(Config::default());
        p.feed(&get(1)).unwrap();
        p.expect_conn_error(bytes, *code);
    }
    // PRIORITY of a wrong length is a stream error.
    let mut p = Peer::new(Config::default());
    p.expect_stream_error(&frame(PRIORITY, 0, 1, &[0; 4]), 1, Reason::FRAME_SIZE_ERROR);
}

#[test]
fn connection_errors_say_what_nginx_says() {
    let cases: &[(Vec<u8>, &str)] = &[
        (
            frame(SETTINGS, 0, 0, &[0; 5]),
            "client sent SETTINGS frame with incorrect length 5",
        ),
        (
            frame(PING, 0, 0, &[0; 3]),
            "client sent PING frame with incorrect length 3",
        ),
        (
            frame(WINDOW_UPDATE, 0, 0, &u32be(0)),
            "client sent WINDOW_UPDATE frame with incorrect window increment 0",
        ),
        (
            frame(WINDOW_UPDATE, 0, 0, &u32be(0x7fff_ffff)),
            "client violated connection flow control: received WINDOW_UPDATE frame with window increment 2147483647 not allowed for window 65535",
        ),
        (
            get(3),
            "client sent HEADERS frame with incorrect identifier 3, the last was 5",
        ),
        (
            frame(HEADERS, END_HEADERS | PADDED, 7, &[200, 0x82]),
            "client sent padded HEADERS frame with incorrect length: 2, padding: 200",
        ),
        (
            frame(PING, 0, 1, &[0; 8]),
            "client sent PING frame with incorrect identifier",
        ),
    ];
    for (bytes, want) in cases {
        let mut p = Peer::new(Config::default());
        p.feed(&get(5)).unwrap();
        let e = p.feed(bytes).expect_err("a connection error");
        assert_eq!(e.to_string(), *want);
    }
}

#[test]
fn padding_is_stripped_and_checked() {
    let mut p = Peer::new(Config::default());
    // HEADERS: pad length 3, priority, block "ab", 3 bytes of padding.
    let mut payload = vec![3, 0, 0, 0, 0, 16];
    payload.extend(b"ab\0\0\0");
    p.feed(&frame(HEADERS, END_HEADERS | PADDED | PRIO, 1, &payload))
        .unwrap();
    let ev = p.take_events();
    assert_eq!(p.block(&ev[0]), b"ab");
    p.feed(&frame(DATA, PADDED, 1, &[2, b'x', b'y', 0, 0]))
        .unwrap();
    let ev = p.take_events();
    let Event::Data { data, .. } = &ev[0] else {
        panic!("{ev:?}")
    };
    assert_eq!(&p.input[data.clone()], b"xy");
    // Padding as long as the payload.
    let cases = [
        frame(DATA, PADDED, 1, &[4, 1, 2, 3]),
        frame(DATA, PADDED, 1, &[1]),
        frame(HEADERS, END_HEADERS | PADDED, 3, &[3, 1, 2]),
        frame(
            HEADERS,
            END_HEADERS | PADDED | PRIO,
            3,
            &[1, 0, 0, 0, 0, 16],
        ),
    ];
    for c in cases {
        let mut p = Peer::new(Config::default());
        p.feed(&post(1)).unwrap();
        p.expect_conn_error(&c, Reason::PROTOCOL_ERROR);
    }
    // Exactly all of the rest as padding is allowed.
    let mut p = Peer::new(Config::default());
    p.feed(&post(1)).unwrap();
    p.feed(&frame(DATA, PADDED, 1, &[3, 0, 0, 0])).unwrap();
}

#[test]
fn stream_zero_rules() {
    let conn_errors = [
        frame(DATA, 0, 0, b"x"),
        frame(HEADERS, END_HEADERS, 0, b"\x82"),
        frame(PRIORITY, 0, 0, &[0, 0, 0, 1, 16]),
        frame(RST_STREAM, 0, 0, &u32be(8)),
        frame(CONTINUATION, END_HEADERS, 0, b""),
        frame(PING, 0, 1, &[0; 8]),
        frame(GOAWAY, 0, 1, &[0; 8]),
    ];
    for c in conn_errors {
        Peer::new(Config::default()).expect_conn_error(&c, Reason::PROTOCOL_ERROR);
    }
}

#[test]
fn client_stream_ids_are_odd_and_increasing() {
    let mut p = Peer::new(Config::default());
    p.expect_conn_error(&get(2), Reason::PROTOCOL_ERROR);
    let mut p = Peer::new(Config::default());
    p.feed(&get(5)).unwrap();
    p.expect_conn_error(&get(3), Reason::PROTOCOL_ERROR);
    // The same id once the stream closed.
    let mut p = Peer::new(Config::default());
    p.feed(&get(5)).unwrap();
    p.conn.send_headers(5, b"\x88", true).unwrap();
    p.take_output();
    p.expect_conn_error(&get(5), Reason::PROTOCOL_ERROR);
    // Gaps are fine: the skipped ids are closed.
    let mut p = Peer::new(Config::default());
    p.feed(&get(1)).unwrap();
    p.feed(&get(9)).unwrap();
    assert_eq!(p.conn.last_stream(), 9);
    // The reserved bit is ignored.
    p.feed(&frame(
        HEADERS,
        END_HEADERS | END_STREAM,
        11 | 1 << 31,
        b"\x82",
    ))
    .unwrap();
    assert!(matches!(
        p.take_events()[..],
        [_, _, Event::Headers { stream: 11, .. }]
    ));
}

#[test]
fn headers_open_a_stream_and_trailers_end_it() {
    let mut p = Peer::new(Config::default());
    p.feed(&get(1)).unwrap();
    p.feed(&post(3)).unwrap();
    let ev = p.take_events();
    assert!(matches!(
        ev[0],
        Event::Headers {
            stream: 1,
            end_stream: true,
            ..
        }
    ));
    assert!(matches!(
        ev[1],
        Event::Headers {
            stream: 3,
            end_stream: false,
            ..
        }
    ));
    assert_eq!(p.block(&ev[1]), b"\x83\x84");
    assert_eq!(p.conn.open_streams(), 2);
    p.feed(&frame(HEADERS, END_HEADERS | END_STREAM, 3, b"\x40trailer"))
        .unwrap();
    let ev = p.take_events();
    assert!(matches!(ev[..], [Event::Trailers { stream: 3, .. }]));
    assert_eq!(p.block(&ev[0]), b"\x40trailer");
    // Now half-closed (remote): more HEADERS are STREAM_CLOSED, and the block still goes to
    // HPACK.
    p.expect_stream_error(
        &frame(HEADERS, END_HEADERS | END_STREAM, 3, b"zz"),
        3,
        Reason::STREAM_CLOSED,
    );
    let ev = p.take_events();
    assert_eq!(
        ev[0],
        Event::Reset {
            stream: 3,
            code: Reason::STREAM_CLOSED,
            by_peer: false
        }
    );
    assert!(matches!(ev[1], Event::Discard { .. }));
    assert_eq!(p.block(&ev[1]), b"zz");
}

#[test]
fn trailers_without_end_stream_are_a_stream_error() {
    let mut p = Peer::new(Config::default());
    p.feed(&post(1)).unwrap();
    p.take_events();
    p.expect_stream_error(
        &frame(HEADERS, END_HEADERS, 1, b"\x40"),
        1,
        Reason::PROTOCOL_ERROR,
    );
    assert!(matches!(
        p.take_events()[..],
        [Event::Reset { stream: 1, .. }, Event::Discard { .. }]
    ));
    assert_eq!(p.conn.open_streams(), 0);
}

#[test]
fn data_on_idle_closed_and_half_closed_streams() {
    let mut p = Peer::new(Config::default());
    p.expect_conn_error(&frame(DATA, 0, 1, b"x"), Reason::PROTOCOL_ERROR);
    let mut p = Peer::new(Config::default());
    p.feed(&get(1)).unwrap();
    p.expect_conn_error(&frame(DATA, 0, 2, b"x"), Reason::PROTOCOL_ERROR);
    // Half-closed (remote).
    let mut p = Peer::new(Config::default());
    p.feed(&get(1)).unwrap();
    p.expect_stream_error(&frame(DATA, 0, 1, b"x"), 1, Reason::STREAM_CLOSED);
    // Closed: reset by the client, then DATA.
    let mut p = Peer::new(Config::default());
    p.feed(&post(1)).unwrap();
    p.feed(&frame(RST_STREAM, 0, 1, &u32be(8))).unwrap();
    p.expect_stream_error(&frame(DATA, 0, 1, b"x"), 1, Reason::STREAM_CLOSED);
    // Closed both ways.
    let mut p = Peer::new(Config::default());
    p.feed(&get(1)).unwrap();
    p.conn.send_headers(1, b"\x88", true).unwrap();
    assert_eq!(p.conn.open_streams(), 0);
    p.take_output();
    p.expect_stream_error(&frame(DATA, END_STREAM, 1, b"x"), 1, Reason::STREAM_CLOSED);
}

#[test]
fn data_events_and_end_stream() {
    let mut p = Peer::new(Config::default());
    p.feed(&post(1)).unwrap();
    p.feed(&frame(DATA, 0, 1, b"hello")).unwrap();
    p.feed(&frame(DATA, END_STREAM, 1, b"")).unwrap();
    let ev = p.take_events();
    let Event::Data {
        stream: 1,
        data,
        end_stream: false,
    } = &ev[1]
    else {
        panic!("{ev:?}")
    };
    assert_eq!(&p.input[data.clone()], b"hello");
    assert!(matches!(&ev[2], Event::Data { stream: 1, data, end_stream: true } if data.is_empty()));
    // The request ended; the stream stays until its answer ends.
    assert_eq!(p.conn.open_streams(), 1);
    p.conn.send_headers(1, b"\x88", true).unwrap();
    assert_eq!(p.conn.open_streams(), 0);
}

#[test]
fn continuation_sequencing() {
    // A block in three frames, across two recv calls.
    let mut p = Peer::new(Config::default());
    p.feed(&frame(HEADERS, END_STREAM, 1, b"ab")).unwrap();
    p.feed(&frame(CONTINUATION, 0, 1, b"cd")).unwrap();
    assert!(p.take_events().is_empty());
    p.feed(&frame(CONTINUATION, END_HEADERS, 1, b"ef")).unwrap();
    let ev = p.take_events();
    assert_eq!(
        ev,
        [Event::Headers {
            stream: 1,
            block: Block::Owned(b"abcdef".to_vec()),
            end_stream: true
        }]
    );

    let open = frame(HEADERS, 0, 1, b"ab");
    let breaks = [
        frame(PING, 0, 0, &[0; 8]),
        frame(PRIORITY, 0, 1, &[0, 0, 0, 0, 16]),
        frame(HEADERS, END_HEADERS, 3, b"x"),
        frame(CONTINUATION, END_HEADERS, 3, b"x"),
        frame(DATA, 0, 1, b"x"),
        frame(0x42, 0, 0, b"unknown"),
    ];
    for b in breaks {
        let mut p = Peer::new(Config::default());
        p.feed(&open).unwrap();
        p.expect_conn_error(&b, Reason::PROTOCOL_ERROR);
    }
    // CONTINUATION with no block open: after END_HEADERS, after DATA, on an idle stream.
    let stray = frame(CONTINUATION, END_HEADERS, 1, b"x");
    for before in [
        get(1),
        vec![],
        frame(CONTINUATION, END_HEADERS, 1, b"").split_off(9),
    ] {
        let mut p = Peer::new(Config::default());
        p.feed(&before).unwrap();
        p.expect_conn_error(&stray, Reason::PROTOCOL_ERROR);
    }
    let mut p = Peer::new(Config::default());
    p.feed(&post(1)).unwrap();
    p.feed(&frame(DATA, 0, 1, b"x")).unwrap();
    p.expect_conn_error(&stray, Reason::PROTOCOL_ERROR);
}

#[test]
fn header_block_is_bounded_without_buffering_more() {
    let cfg = Config {
        max_header_list_size: 100,
        header_slack: 20,
        ..Config::default()
    };
    // Exactly at the bound: fine.
    let mut p = Peer::new(cfg.clone());
    p.feed(&frame(HEADERS, 0, 1, &[1; 60])).unwrap();
    p.feed(&frame(CONTINUATION, END_HEADERS, 1, &[1; 60]))
        .unwrap();
    let ev = p.take_events();
    assert!(matches!(&ev[..], [Event::Headers { block: Block::Owned(b), .. }] if b.len() == 120));
    // One byte more: the connection ends.
    let mut p = Peer::new(cfg.clone());
    p.feed(&frame(HEADERS, 0, 1, &[1; 60])).unwrap();
    p.expect_conn_error(
        &frame(CONTINUATION, 0, 1, &[1; 61]),
        Reason::ENHANCE_YOUR_CALM,
    );
    // Already the HEADERS frame, when it waits for CONTINUATIONs.
    let mut p = Peer::new(cfg);
    p.expect_conn_error(&frame(HEADERS, 0, 1, &[1; 121]), Reason::ENHANCE_YOUR_CALM);
}

#[test]
fn priority_self_dependency() {
    let mut p = Peer::new(Config::default());
    p.feed(&get(1)).unwrap();
    p.expect_stream_error(
        &frame(PRIORITY, 0, 3, &[0, 0, 0, 3, 16]),
        3,
        Reason::PROTOCOL_ERROR,
    );
    // A valid PRIORITY, even for an idle stream, is no error and opens nothing.
    p.feed(&frame(PRIORITY, 0, 9, &[0x80, 0, 0, 1, 16]))
        .unwrap();
    assert!(p.take_output().is_empty());
    assert_eq!(p.conn.last_stream(), 1);
    // A lower id than the PRIORITY's still opens.
    p.take_events();
    p.feed(&get(3)).unwrap();
    assert!(matches!(
        p.take_events()[..],
        [Event::Headers { stream: 3, .. }]
    ));
    // HEADERS that depends on its own stream: refused, its block still decoded.
    let mut p = Peer::new(Config::default());
    p.expect_stream_error(
        &frame(HEADERS, END_HEADERS | PRIO, 1, &[0, 0, 0, 1, 16, b'h']),
        1,
        Reason::PROTOCOL_ERROR,
    );
    let ev = p.take_events();
    assert!(matches!(ev[..], [Event::Discard { .. }]));
    assert_eq!(p.block(&ev[0]), b"h");
}

#[test]
fn push_promise_from_a_client() {
    let mut p = Peer::new(Config::default());
    p.feed(&get(1)).unwrap();
    p.expect_conn_error(
        &frame(PUSH_PROMISE, END_HEADERS, 1, &[0, 0, 0, 2, 0x82]),
        Reason::PROTOCOL_ERROR,
    );
}

#[test]
fn window_update_rules() {
    let mut p = Peer::new(Config::default());
    p.expect_conn_error(&window_update(0, 0), Reason::PROTOCOL_ERROR);
    let mut p = Peer::new(Config::default());
    p.feed(&get(1)).unwrap();
    p.expect_stream_error(&window_update(1, 0), 1, Reason::PROTOCOL_ERROR);
    // Overflow past 2^31 - 1.
    let mut p = Peer::new(Config::default());
    p.feed(&window_update(0, 0x7fff_ffff - 65535)).unwrap();
    p.expect_conn_error(&window_update(0, 1), Reason::FLOW_CONTROL_ERROR);
    let mut p = Peer::new(Config::default());
    p.feed(&get(1)).unwrap();
    p.feed(&window_update(1, 0x7fff_ffff - 65535)).unwrap();
    p.expect_stream_error(&window_update(1, 1), 1, Reason::FLOW_CONTROL_ERROR);
    // Idle: an error; closed: ignored.
    let mut p = Peer::new(Config::default());
    p.expect_conn_error(&window_update(1, 5), Reason::PROTOCOL_ERROR);
    let mut p = Peer::new(Config::default());
    p.feed(&get(1)).unwrap();
    p.conn.send_headers(1, b"\x88", true).unwrap();
    p.take_output();
    p.feed(&window_update(1, 5)).unwrap();
    assert!(p.take_output().is_empty());
}

#[test]
fn max_concurrent_streams_refuses_the_extra_one() {
    let mut p = Peer::new(Config {
        max_concurrent_streams: 2,
        ..Config::default()
    });
    p.feed(&get(1)).unwrap();
    p.feed(&get(3)).unwrap();
    p.expect_stream_error(&get(5), 5, Reason::REFUSED_STREAM);
    let ev = p.take_events();
    assert!(matches!(
        ev[..],
        [
            Event::Headers { .. },
            Event::Headers { .. },
            Event::Discard { .. }
        ]
    ));
    // Once one ends, a new one is taken.
    p.conn.send_headers(1, b"\x88", true).unwrap();
    p.feed(&get(7)).unwrap();
    assert!(matches!(
        p.take_events()[..],
        [Event::Headers { stream: 7, .. }]
    ));
}

#[test]
fn rst_stream_rules() {
    let mut p = Peer::new(Config::default());
    p.expect_conn_error(&frame(RST_STREAM, 0, 1, &u32be(8)), Reason::PROTOCOL_ERROR);
    let mut p = Peer::new(Config::default());
    p.feed(&post(1)).unwrap();
    p.take_events();
    // An unknown code is passed on as is.
    p.feed(&frame(RST_STREAM, 0, 1, &u32be(0xabc))).unwrap();
    assert_eq!(
        p.take_events(),
        [Event::Reset {
            stream: 1,
            code: Reason(0xabc),
            by_peer: true
        }]
    );
    assert_eq!(p.conn.open_streams(), 0);
    assert!(p.take_output().is_empty(), "no answer to a RST_STREAM");
    assert_eq!(p.conn.send_headers(1, b"\x88", false), Err(StreamGone));
}

#[test]
fn goaway_from_the_client() {
    let mut p = Peer::new(Config::default());
    p.feed(&get(1)).unwrap();
    p.take_events();
    let mut payload = u32be(0);
    payload.extend(u32be(0x77));
    payload.extend(b"debug data");
    p.feed(&frame(GOAWAY, 0, 0, &payload)).unwrap();
    assert_eq!(
        p.take_events(),
        [Event::GoAway {
            last_stream: 0,
            code: Reason(0x77)
        }]
    );
    assert!(p.conn.peer_going_away());
    // Streams in flight go on.
    p.conn.send_headers(1, b"\x88", true).unwrap();
}

#[test]
fn unknown_frames_and_flags_are_ignored() {
    let mut p = Peer::new(Config::default());
    p.feed(&frame(0x42, 0xff, 0, b"whatever")).unwrap();
    p.feed(&frame(0xfa, 0, 7, b"")).unwrap();
    p.feed(&frame(PING, 0xfe, 0, b"abcdefgh")).unwrap();
    assert!(p.take_events().is_empty());
    let out = p.take_output();
    assert_eq!(
        out,
        [Out {
            kind: PING,
            flags: ACK,
            stream: 0,
            payload: b"abcdefgh".to_vec()
        }]
    );
    // A PING ACK is not answered.
    p.feed(&frame(PING, ACK, 0, b"abcdefgh")).unwrap();
    assert!(p.take_output().is_empty());
}

#[test]
fn streams_after_our_goaway_are_ignored() {
    let mut p = Peer::new(Config::default());
    p.feed(&get(1)).unwrap();
    p.conn.goaway(Reason::NO_ERROR);
    let out = p.take_output();
    assert_eq!(
        (out[0].kind, &out[0].payload[..]),
        (GOAWAY, &[0, 0, 0, 1, 0, 0, 0, 0][..])
    );
    p.take_events();
    p.feed(&get(3)).unwrap();
    assert!(matches!(p.take_events()[..], [Event::Discard { .. }]));
    assert!(p.take_output().is_empty(), "no RST_STREAM either");
    // The graceful GOAWAY is sent once; an error one still goes.
    p.conn.goaway(Reason::NO_ERROR);
    assert!(p.take_output().is_empty());
    p.conn.goaway(Reason::INTERNAL_ERROR);
    assert_eq!(p.take_output()[0].code(), 2);
}

#[test]
fn reason_names() {
    assert_eq!(Reason::NO_ERROR.name(), Some("NO_ERROR"));
    assert_eq!(Reason::ENHANCE_YOUR_CALM.name(), Some("ENHANCE_YOUR_CALM"));
    assert_eq!(Reason::HTTP_1_1_REQUIRED.name(), Some("HTTP_1_1_REQUIRED"));
    assert_eq!(Reason(0xe).name(), None);
}
