//! What the server sends, and the memory a connection keeps.

use super::*;

#[test]
fn headers_are_cut_by_the_peer_frame_size() {
    // A block handed over, and one encoded in the output (`send_headers_with`).
    for with in [false, true] {
        headers_cut(|p, stream, block, end| match with {
            false => p.conn.send_headers(stream, block, end),
            true => p
                .conn
                .send_headers_with(stream, end, |out| out.extend_from_slice(block)),
        });
    }
}

fn headers_cut(send: impl Fn(&mut Peer, u32, &[u8], bool) -> Result<(), StreamGone>) {
    let mut p = Peer::new(Config::default());
    p.feed(&get(1)).unwrap();
    // Something queued before: the frames go after it.
    p.conn.ping(*b"12345678");
    let block: Vec<u8> = (0..40000u32).map(|i| i as u8).collect();
    send(&mut p, 1, &block, false).unwrap();
    let mut out = p.take_output();
    assert_eq!(out.remove(0).kind, PING);
    let shape: Vec<_> = out
        .iter()
        .map(|f| (f.kind, f.flags, f.stream, f.payload.len()))
        .collect();
    assert_eq!(
        shape,
        [
            (HEADERS, 0, 1, 16384),
            (CONTINUATION, 0, 1, 16384),
            (CONTINUATION, END_HEADERS, 1, 40000 - 32768)
        ]
    );
    let joined: Vec<u8> = out.iter().flat_map(|f| f.payload.clone()).collect();
    assert_eq!(joined, block);
    // One frame, END_STREAM and END_HEADERS.
    let mut p = Peer::new(Config::default());
    p.feed(&settings(&[(5, 20000)])).unwrap();
    p.feed(&get(1)).unwrap();
    p.take_output();
    send(&mut p, 1, &block[..20000], true).unwrap();
    let out = p.take_output();
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].flags, END_STREAM | END_HEADERS);
    assert_eq!(out[0].payload, block[..20000]);
    // The stream is done: nothing more goes on it.
    assert_eq!(send(&mut p, 1, b"x", true), Err(StreamGone));
    assert_eq!(p.conn.send_data(1, b"x", true), Err(StreamGone));
    assert_eq!(p.conn.open_streams(), 0);
}

#[test]
fn data_is_cut_by_frame_size_and_windows() {
    let mut p = Peer::new(Config::default());
    p.feed(&settings(&[(4, 40000)])).unwrap();
    p.feed(&get(1)).unwrap();
    p.take_output();
    p.conn.send_headers(1, b"\x88", false).unwrap();
    let body: Vec<u8> = (0..50000u32).map(|i| (i % 251) as u8).collect();
    assert_eq!(p.conn.send_data(1, &body, true), Ok(40000));
    let out = p.take_output();
    let shape: Vec<_> = out[1..]
        .iter()
        .map(|f| (f.kind, f.flags, f.payload.len()))
        .collect();
    assert_eq!(
        shape,
        [(DATA, 0, 16384), (DATA, 0, 16384), (DATA, 0, 40000 - 32768)]
    );
    let sent: Vec<u8> = out[1..].iter().flat_map(|f| f.payload.clone()).collect();
    assert_eq!(sent, body[..40000]);
    // The rest when the window opens: END_STREAM on the last frame.
    p.feed(&window_update(1, 20000)).unwrap();
    assert_eq!(p.conn.send_data(1, &body[40000..], true), Ok(10000));
    let out = p.take_output();
    assert_eq!(
        (out[0].kind, out[0].flags, out[0].payload.len()),
        (DATA, END_STREAM, 10000)
    );
    assert_eq!(p.conn.open_streams(), 0);
}

#[test]
fn a_window_of_one_sends_one_byte() {
    let mut p = Peer::new(Config::default());
    p.feed(&settings(&[(4, 1)])).unwrap();
    p.feed(&get(1)).unwrap();
    p.take_output();
    p.conn.send_headers(1, b"\x88", false).unwrap();
    assert_eq!(p.conn.send_data(1, b"hello", true), Ok(1));
    assert_eq!(p.conn.send_data(1, b"ello", true), Ok(0));
    let out = p.take_output();
    assert_eq!(out.len(), 2);
    assert_eq!(
        (out[1].kind, out[1].flags, &out[1].payload[..]),
        (DATA, 0, &b"h"[..])
    );
}

#[test]
fn empty_end_of_body() {
    let mut p = Peer::new(Config::default());
    p.feed(&settings(&[(4, 0)])).unwrap();
    p.feed(&get(1)).unwrap();
    p.take_output();
    p.conn.send_headers(1, b"\x88", false).unwrap();
    // A zero window still lets an empty END_STREAM go.
    assert_eq!(p.conn.send_data(1, b"", true), Ok(0));
    let out = p.take_output();
    assert_eq!(
        (out[1].kind, out[1].flags, out[1].payload.len()),
        (DATA, END_STREAM, 0)
    );
    assert_eq!(p.conn.open_streams(), 0);
}

/// `send_data_with`'s `fill` as a file read does it: room for each header, then the bytes.
fn fill_from(src: &[u8]) -> impl FnOnce(&mut Vec<u8>, usize, usize) -> Result<(), ()> + '_ {
    move |out, len, frame| {
        for piece in src[..len].chunks(frame) {
            out.extend_from_slice(&[0xee; 9]);
            out.extend_from_slice(piece);
        }
        Ok(())
    }
}

#[test]
fn data_read_straight_into_the_output() {
    let mut p = Peer::new(Config::default());
    p.feed(&settings(&[(4, 20000)])).unwrap();
    p.feed(&get(1)).unwrap();
    p.take_output();
    p.conn.send_headers(1, b"\x88", false).unwrap();
    p.take_output();
    let body: Vec<u8> = (0..40000u32).map(|i| (i % 253) as u8).collect();
    // The window's 20000 of the 30000 asked, in frames of 8000; none ends the stream.
    assert_eq!(
        p.conn.send_data_with(1, 30000, 8000, fill_from(&body)),
        Ok(Ok(20000))
    );
    let out = p.take_output();
    let shape: Vec<_> = out
        .iter()
        .map(|f| (f.kind, f.flags, f.stream, f.payload.len()))
        .collect();
    assert_eq!(
        shape,
        [(DATA, 0, 1, 8000), (DATA, 0, 1, 8000), (DATA, 0, 1, 4000)]
    );
    let joined: Vec<u8> = out.iter().flat_map(|f| f.payload.clone()).collect();
    assert_eq!(joined, body[..20000]);
    // A spent window: no frame, and `fill` is not asked.
    let refuse = |_: &mut Vec<u8>, _: usize, _: usize| -> Result<(), ()> { panic!("asked") };
    assert_eq!(p.conn.send_data_with(1, 100, 8000, refuse), Ok(Ok(0)));
    p.feed(&window_update(1, 30000)).unwrap();
    // A read that fails queues nothing and spends no window.
    let fail = |out: &mut Vec<u8>, _: usize, _: usize| {
        out.extend_from_slice(b"partial");
        Err("shrank")
    };
    assert_eq!(p.conn.send_data_with(1, 100, 8000, fail), Ok(Err("shrank")));
    assert!(p.conn.pending_output().is_empty());
    assert_eq!(p.conn.window(1), Ok(30000));
    // Frames no larger than the client's SETTINGS_MAX_FRAME_SIZE, whatever is asked.
    assert_eq!(
        p.conn.send_data_with(1, 20000, 1 << 20, fill_from(&body)),
        Ok(Ok(20000))
    );
    let lens: Vec<_> = p.take_output().iter().map(|f| f.payload.len()).collect();
    assert_eq!(lens, [16384, 20000 - 16384]);
    // The body ends with an empty DATA frame; then the stream takes no more.
    p.conn.send_data(1, b"", true).unwrap();
    assert_eq!(p.take_output()[0].flags, END_STREAM);
    assert_eq!(
        p.conn.send_data_with(1, 1, 8000, fill_from(&body)),
        Err(StreamGone)
    );
}

#[test]
fn data_read_straight_into_the_output_may_end_the_stream() {
    let mut p = Peer::new(Config::default());
    p.feed(&settings(&[(4, 20000)])).unwrap();
    p.feed(&get(1)).unwrap();
    p.take_output();
    p.conn.send_headers(1, b"\x88", false).unwrap();
    p.take_output();
    let body: Vec<u8> = (0..40000u32).map(|i| (i % 253) as u8).collect();
    // More than the window: what went does not end the stream.
    assert_eq!(
        p.conn
            .send_data_with_end(1, 30000, 8000, true, fill_from(&body)),
        Ok(Ok(20000))
    );
    assert!(p.take_output().iter().all(|f| f.flags == 0));
    p.feed(&window_update(1, 30000)).unwrap();
    // All of it: END_STREAM on the last frame only, and the stream takes no more.
    assert_eq!(
        p.conn
            .send_data_with_end(1, 10000, 8000, true, fill_from(&body[20000..])),
        Ok(Ok(10000))
    );
    let shape: Vec<_> = p
        .take_output()
        .iter()
        .map(|f| (f.kind, f.flags, f.payload.len()))
        .collect();
    assert_eq!(shape, [(DATA, 0, 8000), (DATA, END_STREAM, 2000)]);
    assert_eq!(p.conn.open_streams(), 0);
    assert_eq!(
        p.conn
            .send_data_with_end(1, 1, 8000, true, fill_from(&body)),
        Err(StreamGone)
    );
}

#[test]
fn reset_by_the_server() {
    let mut p = Peer::new(Config::default());
    p.feed(&post(1)).unwrap();
    p.conn.reset(1, Reason::PROTOCOL_ERROR);
    p.conn.reset(1, Reason::PROTOCOL_ERROR);
    let out = p.take_output();
    assert_eq!(
        out,
        [Out {
            kind: RST_STREAM,
            flags: 0,
            stream: 1,
            payload: u32be(1)
        }]
    );
    assert_eq!(p.conn.open_streams(), 0);
    // What the client sent before it saw the reset is ignored: body bytes (counted in the
    // connection's window only), trailers (decoded for HPACK, then dropped).
    p.take_events();
    let cfg = Config {
        connection_window: 65535,
        ..Config::default()
    };
    let mut p = Peer::new(cfg);
    p.feed(&post(1)).unwrap();
    p.conn.reset(1, Reason::CANCEL);
    p.take_output();
    p.take_events();
    for _ in 0..8 {
        p.feed(&frame(DATA, 0, 1, &[0; 16000])).unwrap();
    }
    p.feed(&frame(HEADERS, END_HEADERS | END_STREAM, 1, b"tr"))
        .unwrap();
    let ev = p.take_events();
    assert!(matches!(ev[..], [Event::Discard { .. }]), "{ev:?}");
    assert_eq!(p.block(&ev[0]), b"tr");
    let out = p.take_output();
    assert!(
        out.iter().all(|f| f.kind == WINDOW_UPDATE && f.stream == 0),
        "{out:?}"
    );
    assert_eq!(p.conn.error(), None);
}

#[test]
fn only_the_last_resets_are_remembered() {
    let mut p = Peer::new(Config::default());
    for id in (1..=17).step_by(2) {
        p.feed(&post(id)).unwrap();
        p.conn.reset(id, Reason::CANCEL);
    }
    p.take_output();
    // Stream 3 is among the last eight: ignored. Stream 1 is not: STREAM_CLOSED.
    p.feed(&frame(DATA, 0, 3, b"x")).unwrap();
    assert!(p.take_output().is_empty());
    p.expect_stream_error(&frame(DATA, 0, 1, b"x"), 1, Reason::STREAM_CLOSED);
    // And trailers on a stream closed long ago end the connection.
    let mut p2 = Peer::new(Config::default());
    p2.feed(&get(1)).unwrap();
    p2.conn.send_headers(1, b"\x88", true).unwrap();
    p2.take_output();
    p2.expect_conn_error(
        &frame(HEADERS, END_HEADERS | END_STREAM, 1, b"tr"),
        Reason::PROTOCOL_ERROR,
    );
}

#[test]
fn a_refused_stream_body_in_flight_is_ignored() {
    let mut p = Peer::new(Config {
        max_concurrent_streams: 1,
        ..Config::default()
    });
    p.feed(&post(1)).unwrap();
    p.expect_stream_error(&post(3), 3, Reason::REFUSED_STREAM);
    p.feed(&frame(DATA, END_STREAM, 3, b"body")).unwrap();
    assert!(p.take_output().is_empty());
    // A PRIORITY error on an idle stream does not keep that stream from opening later.
    p.expect_stream_error(
        &frame(PRIORITY, 0, 5, &[0, 0, 0, 5, 1]),
        5,
        Reason::PROTOCOL_ERROR,
    );
    p.conn.reset(1, Reason::CANCEL);
    p.take_events();
    p.feed(&get(5)).unwrap();
    assert!(matches!(
        p.take_events()[..],
        [Event::Headers { stream: 5, .. }]
    ));
}

#[test]
fn ping_from_the_server() {
    let mut p = Peer::new(Config::default());
    p.conn.ping(*b"shoal!!!");
    assert_eq!(
        p.take_output(),
        [Out {
            kind: PING,
            flags: 0,
            stream: 0,
            payload: b"shoal!!!".to_vec()
        }]
    );
    p.feed(&frame(PING, ACK, 0, b"shoal!!!")).unwrap();
    assert!(p.take_output().is_empty());
}

#[test]
fn output_is_drained_in_pieces() {
    let mut p = Peer::new(Config::default());
    p.feed(&frame(PING, 0, 0, b"12345678")).unwrap();
    let all = p.conn.pending_output().to_vec();
    assert_eq!(all.len(), 17);
    p.conn.advance(5);
    assert_eq!(p.conn.pending_output(), &all[5..]);
    p.conn.advance(12);
    assert!(p.conn.pending_output().is_empty());
}

#[test]
fn an_idle_connection_holds_no_buffers() {
    let mut p = Peer::new(Config::default());
    for id in (1..200).step_by(2) {
        p.feed(&get(id)).unwrap();
        p.conn.send_headers(id, &[0; 100], true).unwrap();
    }
    p.feed(&frame(HEADERS, END_STREAM, 201, &[1; 1000]))
        .unwrap();
    p.feed(&frame(CONTINUATION, END_HEADERS, 201, &[1; 1000]))
        .unwrap();
    p.conn.send_headers(201, &[0; 20000], true).unwrap();
    p.take_output();
    p.take_events();
    assert_eq!(p.conn.open_streams(), 0);
    p.conn.shrink();
    let c = &p.conn;
    assert_eq!(
        (c.out.capacity(), c.streams.capacity(), c.events_capacity()),
        (0, 0, 0)
    );
    println!(
        "size_of::<Connection>() = {}, per open stream = {}",
        std::mem::size_of::<Connection>(),
        std::mem::size_of::<super::super::stream::Stream>()
    );
    // (296 bytes until the flow-control violations of a read were kept for nginx's log
    // line: a pointer, the list boxed.)
    assert!(
        std::mem::size_of::<Connection>() <= 304,
        "{}",
        std::mem::size_of::<Connection>()
    );
    assert_eq!(std::mem::size_of::<super::super::stream::Stream>(), 20);
}

#[test]
fn interim_heads_body_and_trailers() {
    let mut p = Peer::new(Config::default());
    p.feed(&post(1)).unwrap();
    p.feed(&frame(DATA, END_STREAM, 1, b"q")).unwrap();
    // 103 Early Hints, then 200, a body, trailers.
    p.conn.send_headers(1, b"\x48\x03103", false).unwrap();
    p.conn.send_headers(1, b"\x88", false).unwrap();
    assert_eq!(p.conn.send_data(1, b"body", false), Ok(4));
    assert_eq!(p.conn.open_streams(), 1);
    p.conn.send_headers(1, b"\x40\x01x\x01y", true).unwrap();
    assert_eq!(p.conn.open_streams(), 0);
    let shape: Vec<_> = p.take_output().iter().map(|f| (f.kind, f.flags)).collect();
    assert_eq!(
        shape,
        [
            (HEADERS, END_HEADERS),
            (HEADERS, END_HEADERS),
            (DATA, 0),
            (HEADERS, END_HEADERS | END_STREAM)
        ]
    );
}
