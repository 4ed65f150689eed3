//! Flow control, both ways (RFC 9113, 5.2 and 6.9).

use super::*;

#[test]
fn consumed_bytes_reopen_the_stream_window_past_half() {
    let mut p = Peer::new(Config {
        initial_window_size: 1000,
        ..Config::default()
    });
    p.feed(&post(1)).unwrap();
    p.feed(&frame(DATA, 0, 1, &[0; 400])).unwrap();
    p.conn.consumed(1, 400);
    assert!(
        p.take_output().is_empty(),
        "under half: no WINDOW_UPDATE yet"
    );
    p.feed(&frame(DATA, 0, 1, &[0; 100])).unwrap();
    p.conn.consumed(1, 100);
    assert_eq!(
        p.take_output(),
        [Out {
            kind: WINDOW_UPDATE,
            flags: 0,
            stream: 1,
            payload: u32be(500)
        }]
    );
    // The window is 1000 again: 1000 bytes fit, one more does not.
    p.feed(&frame(DATA, 0, 1, &[0; 1000])).unwrap();
    p.expect_stream_error(&frame(DATA, 0, 1, &[0; 1]), 1, Reason::FLOW_CONTROL_ERROR);
    assert!(matches!(
        p.take_events().last(),
        Some(Event::Reset {
            stream: 1,
            code: Reason::FLOW_CONTROL_ERROR,
            by_peer: false
        })
    ));
}

#[test]
fn the_connection_window_is_enforced_and_reopened() {
    let cfg = Config {
        connection_window: 65535,
        initial_window_size: 100_000,
        ..Config::default()
    };
    let mut p = Peer::new(cfg.clone());
    p.feed(&post(1)).unwrap();
    for _ in 0..3 {
        p.feed(&frame(DATA, 0, 1, &[0; 16384])).unwrap();
    }
    p.feed(&frame(DATA, 0, 1, &[0; 16383])).unwrap();
    p.expect_conn_error(&frame(DATA, 0, 1, &[0; 1]), Reason::FLOW_CONTROL_ERROR);
    // Consumed, it opens again: half of it goes back at once.
    let mut p = Peer::new(cfg);
    p.feed(&post(1)).unwrap();
    p.feed(&frame(DATA, 0, 1, &[0; 16384])).unwrap();
    p.feed(&frame(DATA, 0, 1, &[0; 16384])).unwrap();
    p.conn.consumed(1, 32768);
    let out = p.take_output();
    assert_eq!(
        out,
        [Out {
            kind: WINDOW_UPDATE,
            flags: 0,
            stream: 0,
            payload: u32be(32768)
        }]
    );
    for _ in 0..4 {
        p.feed(&frame(DATA, 0, 1, &[0; 16383])).unwrap();
    }
}

#[test]
fn padding_and_refused_data_go_back_to_the_connection() {
    let cfg = Config {
        connection_window: 65535,
        ..Config::default()
    };
    let mut p = Peer::new(cfg);
    p.feed(&post(1)).unwrap();
    // 16384 bytes of frame, all padding: no body for the caller, the window counts it.
    let mut payload = vec![255];
    payload.resize(256, 0);
    for _ in 0..128 {
        p.feed(&frame(DATA, PADDED, 1, &payload)).unwrap();
    }
    let out = p.take_output();
    assert!(
        out.iter().any(|f| f.kind == WINDOW_UPDATE && f.stream == 0),
        "{out:?}"
    );
    // Data on a closed stream is given back too.
    let mut p = Peer::new(Config {
        connection_window: 65535,
        ..Config::default()
    });
    p.feed(&post(1)).unwrap();
    p.feed(&frame(RST_STREAM, 0, 1, &u32be(8))).unwrap();
    for _ in 0..8 {
        p.feed(&frame(DATA, 0, 1, &[0; 16384])).unwrap();
    }
    assert_eq!(p.conn.error(), None);
}

#[test]
fn our_window_applies_once_acknowledged() {
    let mut p = Peer::raw(Config {
        initial_window_size: 1000,
        ..Config::default()
    });
    p.take_output();
    assert!(p.conn.awaiting_settings_ack());
    let mut hello = PREFACE.to_vec();
    hello.extend(settings(&[]));
    hello.extend(post(1));
    p.feed(&hello).unwrap();
    // Before the ACK, the client may fill the default 65535.
    p.feed(&frame(DATA, 0, 1, &[0; 16384])).unwrap();
    // Once it acknowledges, the window is ours: 1000 − 65535 + what is left.
    assert!(p.conn.awaiting_settings_ack());
    p.feed(&frame(SETTINGS, ACK, 0, &[])).unwrap();
    assert!(!p.conn.awaiting_settings_ack());
    p.take_output();
    p.expect_stream_error(&frame(DATA, 0, 1, &[0; 1]), 1, Reason::FLOW_CONTROL_ERROR);
    // A stream opened after the ACK starts at 1000.
    p.feed(&post(3)).unwrap();
    p.feed(&frame(DATA, 0, 3, &[0; 1000])).unwrap();
    p.expect_stream_error(&frame(DATA, 0, 3, &[0; 1]), 3, Reason::FLOW_CONTROL_ERROR);
}

#[test]
fn no_window_update_once_the_body_ended() {
    let mut p = Peer::new(Config {
        initial_window_size: 100,
        ..Config::default()
    });
    p.feed(&post(1)).unwrap();
    p.feed(&frame(DATA, END_STREAM, 1, &[0; 100])).unwrap();
    p.conn.consumed(1, 100);
    assert!(p.take_output().iter().all(|f| f.stream == 0));
}

#[test]
fn peer_initial_window_moves_every_open_stream() {
    let mut p = Peer::new(Config::default());
    p.feed(&get(1)).unwrap();
    p.feed(&get(3)).unwrap();
    p.conn.send_headers(1, b"\x88", false).unwrap();
    p.conn.send_headers(3, b"\x88", false).unwrap();
    assert_eq!(p.conn.send_data(1, &[0; 1000], false), Ok(1000));
    assert_eq!(p.conn.window(1), Ok(65535 - 1000));
    // Down by 65535 − 500: stream 1 goes negative (it sent 1000), stream 3 is at 500.
    p.feed(&settings(&[(4, 500)])).unwrap();
    assert_eq!(p.take_events().last(), Some(&Event::SettingsChanged));
    assert_eq!(p.conn.window(1), Ok(0));
    assert_eq!(p.conn.window(3), Ok(500));
    assert_eq!(p.conn.send_data(1, b"x", false), Ok(0));
    // Up again: −500 + 1000 − 500 = 500 for stream 1.
    p.feed(&settings(&[(4, 1500)])).unwrap();
    assert_eq!(p.conn.window(1), Ok(500));
    assert_eq!(p.conn.window(3), Ok(1500));
    // Past 2^31 − 1 on a stream: a connection error.
    p.feed(&window_update(3, 0x7fff_ffff - 1500)).unwrap();
    p.expect_conn_error(&settings(&[(4, 1501)]), Reason::FLOW_CONTROL_ERROR);
}

#[test]
fn window_updates_open_the_way_and_say_so() {
    let mut p = Peer::new(Config::default());
    p.feed(&settings(&[(4, 10)])).unwrap();
    p.feed(&get(1)).unwrap();
    p.take_events();
    p.take_output();
    p.conn.send_headers(1, b"\x88", false).unwrap();
    assert_eq!(p.conn.send_data(1, &[1; 30], true), Ok(10));
    assert_eq!(p.conn.window(1), Ok(0));
    p.feed(&window_update(1, 15)).unwrap();
    assert_eq!(p.take_events(), [Event::WindowOpened { stream: 1 }]);
    assert_eq!(p.conn.send_data(1, &[1; 20], true), Ok(15));
    // The connection's window bounds every stream.
    let mut p = Peer::new(Config::default());
    p.feed(&settings(&[(4, 100_000)])).unwrap();
    p.feed(&get(1)).unwrap();
    p.conn.send_headers(1, b"\x88", false).unwrap();
    assert_eq!(p.conn.send_data(1, &[1; 70_000], false), Ok(65535));
    assert_eq!(p.conn.window(1), Ok(0));
    p.take_events();
    p.feed(&window_update(0, 100)).unwrap();
    assert_eq!(p.take_events(), [Event::WindowOpened { stream: 0 }]);
    assert_eq!(p.conn.window(1), Ok(100));
}

#[test]
fn open_window_lets_a_body_come_past_the_preread_size() {
    let mut p = Peer::new(Config {
        initial_window_size: 0,
        ..Config::default()
    });
    p.feed(&post(1)).unwrap();
    p.expect_stream_error(&frame(DATA, 0, 1, b"x"), 1, Reason::FLOW_CONTROL_ERROR);
    p.feed(&post(3)).unwrap();
    p.conn.open_window(3, 100);
    assert_eq!(
        p.take_output(),
        [Out {
            kind: WINDOW_UPDATE,
            flags: 0,
            stream: 3,
            payload: u32be(100)
        }]
    );
    p.feed(&frame(DATA, 0, 3, &[0; 100])).unwrap();
    p.expect_stream_error(&frame(DATA, 0, 3, b"x"), 3, Reason::FLOW_CONTROL_ERROR);
    // Never past 2^31 − 1.
    p.feed(&post(5)).unwrap();
    p.conn.open_window(5, u32::MAX);
    p.conn.open_window(5, 1);
    assert_eq!(
        p.take_output(),
        [Out {
            kind: WINDOW_UPDATE,
            flags: 0,
            stream: 5,
            payload: u32be(0x7fff_ffff)
        }]
    );
}

#[test]
fn close_with_an_error_from_above() {
    let mut p = Peer::new(Config::default());
    p.feed(&get(1)).unwrap();
    let e = ConnError {
        code: Reason::COMPRESSION_ERROR,
        what: "client sent invalid header block",
        args: [0; 2],
        role: crate::frame::Role::Server,
    };
    p.conn.close_with(e);
    p.conn.close_with(e);
    let out = p.take_output();
    assert_eq!(out.len(), 1);
    assert_eq!(
        (out[0].kind, out[0].code(), &out[0].payload[..4]),
        (GOAWAY, 9, &u32be(1)[..])
    );
    assert_eq!(p.conn.recv(&get(3)), Err(e));
}
