//! The frame layer in a client's role: streams we open, the answers' rules (RFC 9113, 5.1.1,
//! 8.1), a server's GOAWAY, and what stays the same as a server's.

use super::*;

/// A client with stream 1 open (its request sent whole), the output drained.
fn with_stream() -> Peer {
    let mut p = Peer::client(Config::default());
    assert_eq!(p.conn.open_stream(b"\x83", true), Ok(1));
    let out = p.take_output();
    assert_eq!(out[0].kind, HEADERS);
    assert_eq!(out[0].flags, END_HEADERS | END_STREAM);
    p
}

#[test]
fn the_preface_and_settings_refuse_pushes() {
    let c = Connection::client(Config::default());
    let out = c.pending_output();
    assert!(out.starts_with(PREFACE));
    let frames = parse_frames(&out[PREFACE.len()..]);
    assert_eq!(frames[0].kind, SETTINGS);
    assert_eq!(
        frames[0].payload[..6],
        [0, 2, 0, 0, 0, 0],
        "ENABLE_PUSH 0 first"
    );
}

#[test]
fn the_first_frame_must_be_settings() {
    let mut p = Peer::raw(Config::default());
    p.conn = Connection::client(Config::default());
    let n = p.conn.pending_output().len();
    p.conn.advance(n);
    p.expect_conn_error(&frame(PING, 0, 0, &[0; 8]), Reason::PROTOCOL_ERROR);
}

#[test]
fn streams_get_odd_ids_in_order() {
    let mut p = Peer::client(Config::default());
    assert_eq!(p.conn.open_stream(b"\x82", true), Ok(1));
    assert_eq!(p.conn.open_stream(b"\x82", false), Ok(3));
    assert_eq!(p.conn.open_streams(), 2);
    let out = p.take_output();
    assert_eq!((out[1].stream, out[1].flags), (3, END_HEADERS));
}

#[test]
fn a_server_cannot_open_streams_or_push() {
    let mut p = with_stream();
    p.expect_conn_error(
        &frame(HEADERS, END_HEADERS, 2, b"\x88"),
        Reason::PROTOCOL_ERROR,
    );
    let mut p = with_stream();
    p.expect_conn_error(
        &frame(HEADERS, END_HEADERS, 5, b"\x88"),
        Reason::PROTOCOL_ERROR,
    );
    let mut p = with_stream();
    p.expect_conn_error(
        &frame(PUSH_PROMISE, END_HEADERS, 1, &[0, 0, 0, 2, 0x82]),
        Reason::PROTOCOL_ERROR,
    );
    let mut p = with_stream();
    p.expect_conn_error(&settings(&[(2, 1)]), Reason::PROTOCOL_ERROR);
}

#[test]
fn head_data_and_trailers() {
    let mut p = with_stream();
    p.feed(&frame(HEADERS, END_HEADERS, 1, b"\x88")).unwrap();
    p.feed(&frame(DATA, 0, 1, b"hello")).unwrap();
    p.feed(&frame(HEADERS, END_HEADERS | END_STREAM, 1, b"\x40"))
        .unwrap();
    let ev = p.take_events();
    assert!(
        matches!(
            ev[0],
            Event::Headers {
                stream: 1,
                end_stream: false,
                ..
            }
        ),
        "{ev:?}"
    );
    assert!(matches!(
        ev[1],
        Event::Data {
            stream: 1,
            end_stream: false,
            ..
        }
    ));
    assert!(matches!(ev[2], Event::Trailers { stream: 1, .. }));
    assert_eq!(p.block(&ev[2]), b"\x40");
    assert_eq!(p.conn.open_streams(), 0, "closed both ways");
}

#[test]
fn an_interim_head_lets_the_next_block_be_a_head() {
    let mut p = with_stream();
    p.feed(&frame(HEADERS, END_HEADERS, 1, b"\x08\x03100"))
        .unwrap();
    p.conn.interim(1);
    p.feed(&frame(HEADERS, END_HEADERS, 1, b"\x88")).unwrap();
    let ev = p.take_events();
    assert!(
        ev.iter().all(|e| matches!(e, Event::Headers { .. })),
        "{ev:?}"
    );
    assert_eq!(ev.len(), 2);
}

#[test]
fn data_before_the_head_is_malformed() {
    let mut p = with_stream();
    p.expect_stream_error(&frame(DATA, 0, 1, b"x"), 1, Reason::PROTOCOL_ERROR);
    assert!(p.take_events().contains(&Event::Reset {
        stream: 1,
        code: Reason::PROTOCOL_ERROR,
        by_peer: false
    }));
}

#[test]
fn trailers_must_end_the_stream() {
    let mut p = with_stream();
    p.feed(&frame(HEADERS, END_HEADERS, 1, b"\x88")).unwrap();
    p.expect_stream_error(
        &frame(HEADERS, END_HEADERS, 1, b"\x40"),
        1,
        Reason::PROTOCOL_ERROR,
    );
}

#[test]
fn headers_on_a_stream_we_reset_are_only_decoded() {
    let mut p = with_stream();
    p.conn.reset(1, Reason::CANCEL);
    p.take_output();
    p.feed(&frame(HEADERS, END_HEADERS, 1, b"\x88")).unwrap();
    assert!(matches!(p.take_events()[..], [Event::Discard { .. }]));
    assert!(p.take_output().is_empty(), "no answer to a frame in flight");
}

#[test]
fn headers_on_a_closed_stream_are_refused() {
    let mut p = with_stream();
    p.feed(&frame(HEADERS, END_HEADERS | END_STREAM, 1, b"\x88"))
        .unwrap();
    p.take_events();
    p.expect_stream_error(
        &frame(HEADERS, END_HEADERS, 1, b"\x88"),
        1,
        Reason::STREAM_CLOSED,
    );
    assert!(matches!(p.take_events()[..], [Event::Discard { .. }]));
}

#[test]
fn goaway_refuses_the_streams_past_its_last() {
    let mut p = with_stream();
    assert_eq!(p.conn.open_stream(b"\x83", true), Ok(3));
    let mut g = u32be(1);
    g.extend(u32be(0));
    p.feed(&frame(GOAWAY, 0, 0, &g)).unwrap();
    let ev = p.take_events();
    assert_eq!(
        ev,
        [
            Event::GoAway {
                last_stream: 1,
                code: Reason::NO_ERROR
            },
            Event::Reset {
                stream: 3,
                code: Reason::REFUSED_STREAM,
                by_peer: true
            },
        ]
    );
    assert_eq!(p.conn.open_streams(), 1, "stream 1 goes on");
    assert_eq!(p.conn.open_stream(b"\x83", true), Err(Refused::Closed));
}

#[test]
fn the_servers_stream_limit_makes_us_wait() {
    let mut p = Peer::client(Config::default());
    p.feed(&settings(&[(3, 1)])).unwrap();
    assert_eq!(p.conn.open_stream(b"\x83", false), Ok(1));
    assert_eq!(p.conn.can_open(), Err(Refused::Busy));
    p.conn.reset(1, Reason::CANCEL);
    assert_eq!(p.conn.open_stream(b"\x83", false), Ok(3));
}

#[test]
fn a_server_is_no_server_of_ours() {
    let mut p = Peer::new(Config::default());
    assert_eq!(p.conn.open_stream(b"\x83", true), Err(Refused::Closed));
}

#[test]
fn our_window_bounds_the_answer_and_reopens_as_it_is_taken() {
    let cfg = Config {
        initial_window_size: 100,
        connection_window: DEFAULT_WINDOW,
        ..Config::default()
    };
    let mut p = Peer::client(cfg);
    p.conn.open_stream(b"\x83", true).unwrap();
    p.take_output();
    p.feed(&frame(HEADERS, END_HEADERS, 1, b"\x88")).unwrap();
    p.feed(&frame(DATA, 0, 1, &[7; 60])).unwrap();
    p.conn.consumed(1, 60);
    let out = p.take_output();
    assert!(
        out.iter()
            .any(|f| f.kind == WINDOW_UPDATE && f.stream == 1 && f.code() == 60),
        "{out:?}"
    );
    // 100 − 60 + 60 left: one more byte than that is past it.
    p.expect_stream_error(&frame(DATA, 0, 1, &[7; 101]), 1, Reason::FLOW_CONTROL_ERROR);
}

#[test]
fn the_servers_window_bounds_the_body() {
    let mut p = Peer::client(Config::default());
    p.feed(&settings(&[(4, 10)])).unwrap();
    let id = p.conn.open_stream(b"\x83", false).unwrap();
    assert_eq!(p.conn.send_data(id, &[1; 25], false), Ok(10));
    p.feed(&window_update(id, 15)).unwrap();
    assert!(p
        .take_events()
        .contains(&Event::WindowOpened { stream: id }));
    assert_eq!(p.conn.send_data(id, &[1; 15], true), Ok(15));
}

#[test]
fn resets_by_the_server_are_no_flood() {
    let mut p = Peer::client(Config {
        max_concurrent_streams: 1,
        ..Config::default()
    });
    for _ in 0..200 {
        let id = p.conn.open_stream(b"\x83", false).unwrap();
        p.feed(&frame(RST_STREAM, 0, id, &u32be(8))).unwrap();
    }
    assert!(p.conn.error().is_none());
}

#[test]
fn frames_without_progress_are_bounded_as_a_servers() {
    let mut p = with_stream();
    let mut e = None;
    for _ in 0..=IDLE_FRAMES {
        if let Err(x) = p.feed(&frame(PING, 0, 0, &[0; 8])) {
            e = Some(x);
            break;
        }
        p.take_output();
    }
    let e = e.expect("a flood");
    assert_eq!(e.code, Reason::ENHANCE_YOUR_CALM);
    assert_eq!(e.role, Role::Client);
    assert_eq!(e.to_string(), "http2 flood detected");
}

#[test]
fn errors_name_the_upstream() {
    let mut p = with_stream();
    let e = p
        .feed(&frame(DATA, 0, 0, b"x"))
        .expect_err("DATA on stream 0");
    assert_eq!(
        e.to_string(),
        "upstream sent DATA frame with incorrect identifier"
    );
}

#[test]
fn a_window_given_back_at_once() {
    let mut p = with_stream();
    p.feed(&frame(HEADERS, END_HEADERS, 1, b"\x88")).unwrap();
    p.feed(&frame(DATA, 0, 1, &[7; 10])).unwrap();
    p.conn.consumed(1, 10);
    assert!(p.take_output().is_empty(), "below half the window");
    p.conn.window_back(1);
    let out = p.take_output();
    assert_eq!(out.len(), 1);
    assert_eq!(
        (out[0].kind, out[0].stream, out[0].code()),
        (WINDOW_UPDATE, 1, 10)
    );
    p.conn.window_back(1);
    assert!(p.take_output().is_empty(), "nothing more to give");
}
