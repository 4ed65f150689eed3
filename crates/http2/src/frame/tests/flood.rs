//! Floods (issue 22, 4): each ends the connection with GOAWAY(ENHANCE_YOUR_CALM), and the
//! same traffic with progress in between does not.

use super::*;

fn calm(p: &mut Peer, frames: &[u8]) {
    p.expect_conn_error(frames, Reason::ENHANCE_YOUR_CALM);
}

/// `n` copies of `f`.
fn times(f: &[u8], n: u32) -> Vec<u8> {
    f.repeat(n as usize)
}

#[test]
fn rapid_reset_is_bounded_per_connection() {
    let cfg = Config {
        max_concurrent_streams: 16,
        ..Config::default()
    };
    let limit = 4 * 16;
    let mut p = Peer::new(cfg.clone());
    let mut id = 1;
    // One stream opened and reset per read: the per-read bound is not what stops it.
    for _ in 0..limit {
        p.feed(&post(id)).unwrap();
        p.feed(&frame(RST_STREAM, 0, id, &u32be(8))).unwrap();
        id += 2;
    }
    let mut last = post(id);
    last.extend(frame(RST_STREAM, 0, id, &u32be(8)));
    calm(&mut p, &last);
    // Streams reset after their answer ended do not count, and answers pay back.
    let mut p = Peer::new(cfg);
    for i in 0..10 * limit {
        let id = 2 * i + 1;
        p.feed(&post(id)).unwrap();
        if i % 2 == 0 {
            p.conn.send_headers(id, b"\x88", true).unwrap();
        }
        p.feed(&frame(RST_STREAM, 0, id, &u32be(8))).unwrap();
        p.take_output();
    }
}

#[test]
fn new_streams_per_read_are_bounded() {
    let cfg = Config {
        max_concurrent_streams: 4,
        ..Config::default()
    };
    let mut p = Peer::new(cfg.clone());
    // Eight in one read (twice the limit) is the most: the extra ones are refused.
    let mut burst = Vec::new();
    for i in 0..8 {
        burst.extend(get(2 * i + 1));
    }
    p.feed(&burst).unwrap();
    let refused = p
        .take_output()
        .iter()
        .filter(|f| f.kind == RST_STREAM)
        .count();
    assert_eq!(refused, 4);
    // A ninth in the same read ends the connection.
    let mut p = Peer::new(cfg);
    burst.extend(get(17));
    calm(&mut p, &burst);
}

#[test]
fn frames_without_progress_are_bounded() {
    let floods: Vec<(&str, Vec<u8>)> = vec![
        ("PING", frame(PING, 0, 0, &[0; 8])),
        ("PING ACK", frame(PING, ACK, 0, &[0; 8])),
        ("SETTINGS", settings(&[(1, 4096)])),
        ("SETTINGS ACK", frame(SETTINGS, ACK, 0, &[])),
        ("PRIORITY", frame(PRIORITY, 0, 1, &[0, 0, 0, 0, 16])),
        ("WINDOW_UPDATE", window_update(0, 1)),
        ("stream WINDOW_UPDATE", window_update(1, 1)),
        ("empty DATA", frame(DATA, 0, 1, &[])),
        (
            "RST_STREAM on a closed stream",
            frame(RST_STREAM, 0, 3, &u32be(8)),
        ),
    ];
    for (what, f) in floods {
        let mut p = Peer::new(Config::default());
        p.feed(&post(1)).unwrap();
        p.feed(&get(3)).unwrap();
        p.conn.send_headers(3, b"\x88", true).unwrap();
        // The setup itself was progress; frames of the handshake were counted before it.
        p.feed(&times(&f, IDLE_FRAMES))
            .unwrap_or_else(|e| panic!("{what}: {e}"));
        p.take_output();
        calm(&mut p, &f);
        // With progress now and then, no end.
        let mut p = Peer::new(Config::default());
        p.feed(&post(1)).unwrap();
        p.feed(&get(3)).unwrap();
        p.conn.send_headers(3, b"\x88", true).unwrap();
        for _ in 0..3 {
            p.feed(&times(&f, IDLE_FRAMES - 1))
                .unwrap_or_else(|e| panic!("{what}: {e}"));
            p.take_output();
            p.conn.send_headers(1, b"\x88", false).ok();
            p.conn.send_data(1, b"x", false).unwrap();
        }
    }
}

#[test]
fn zero_length_continuation_flood() {
    let mut p = Peer::new(Config::default());
    p.feed(&frame(HEADERS, 0, 1, b"\x82")).unwrap();
    let empty = frame(CONTINUATION, 0, 1, &[]);
    p.feed(&times(&empty, IDLE_FRAMES - 1)).unwrap();
    calm(&mut p, &times(&empty, 2));
}

#[test]
fn continuation_flood_of_bytes_is_refused_at_the_bound() {
    // Many small CONTINUATIONs: refused once the block passes the header list bound plus
    // slack, whatever the frames' count.
    let cfg = Config {
        max_header_list_size: 1000,
        header_slack: 24,
        ..Config::default()
    };
    let mut p = Peer::new(cfg);
    p.feed(&frame(HEADERS, 0, 1, &[0; 24])).unwrap();
    let piece = frame(CONTINUATION, 0, 1, &[0; 100]);
    p.feed(&times(&piece, 10)).unwrap();
    calm(&mut p, &piece);
}

#[test]
fn a_peer_that_never_reads() {
    let cfg = Config {
        max_output: 1000,
        ..Config::default()
    };
    let mut p = Peer::new(cfg.clone());
    let ping = frame(PING, 0, 0, &[7; 8]);
    // Each answer is 17 bytes: the 59th finds 1003 waiting.
    p.feed(&times(&ping, 59)).unwrap();
    assert_eq!(p.conn.pending_output().len(), 59 * 17);
    p.expect_conn_error(&ping, Reason::ENHANCE_YOUR_CALM);
    // SETTINGS the same.
    let mut p = Peer::new(cfg.clone());
    p.feed(&times(&settings(&[]), 112)).unwrap();
    p.expect_conn_error(&settings(&[]), Reason::ENHANCE_YOUR_CALM);
    // Stream errors the same: each wants a RST_STREAM (13 bytes); 77 fit in 1000.
    let mut p = Peer::new(cfg.clone());
    let bad_priority = |id: u32| frame(PRIORITY, 0, id, &[0; 4]);
    let many: Vec<u8> = (0..77).flat_map(|i| bad_priority(2 * i + 1)).collect();
    p.feed(&many).unwrap();
    p.expect_conn_error(&bad_priority(1001), Reason::ENHANCE_YOUR_CALM);
    // A peer that reads is answered, however long it goes on.
    let mut p = Peer::new(cfg);
    for i in 0..20 {
        let id = 2 * i + 1;
        p.feed(&get(id)).unwrap();
        p.conn.send_headers(id, b"\x88", true).unwrap();
        p.feed(&times(&ping, 50)).unwrap();
        assert_eq!(p.take_output().len(), 51);
    }
}

#[test]
fn stream_id_exhaustion_ends_gracefully() {
    let mut p = Peer::new(Config::default());
    let high = STREAM_ID_HIGH | 1;
    p.feed(&get(high)).unwrap();
    let out = p.take_output();
    assert_eq!(out.len(), 1);
    assert_eq!(
        (out[0].kind, &out[0].payload[..]),
        (GOAWAY, &[&u32be(high)[..], &u32be(0)[..]].concat()[..])
    );
    assert!(p.conn.going_away());
    // The stream that got there is answered; later ones are ignored.
    assert!(matches!(p.take_events()[..], [Event::Headers { stream, .. }] if stream == high));
    p.feed(&get(0x7fff_ffff)).unwrap();
    assert!(matches!(p.take_events()[..], [Event::Discard { .. }]));
    p.conn.send_headers(high, b"\x88", true).unwrap();
    assert_eq!(p.conn.open_streams(), 0);
    // Below the mark, nothing happens.
    let mut p = Peer::new(Config::default());
    p.feed(&get((STREAM_ID_HIGH - 2) | 1)).unwrap();
    assert!(p.take_output().is_empty());
}
