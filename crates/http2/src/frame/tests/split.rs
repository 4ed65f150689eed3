//! The caller's read buffer cut anywhere: the same events, the same output.

use super::*;

/// An event with its bytes copied out of the input.
#[derive(Debug, PartialEq, Eq)]
enum Owned {
    Block(&'static str, u32, Vec<u8>, bool),
    Data(u32, Vec<u8>, bool),
    Other(Event),
}

/// Runs `script` through a connection reading at most `step` bytes at a time into a buffer
/// the way a server does: what `recv` leaves stays at the buffer's front.
fn run(script: &[u8], step: usize) -> (Vec<Owned>, Vec<u8>) {
    let mut conn = Connection::new(Config::default());
    let mut buf: Vec<u8> = Vec::new();
    let mut events = Vec::new();
    let mut output = Vec::new();
    for piece in script.chunks(step) {
        buf.extend_from_slice(piece);
        let used = conn.recv(&buf).expect("a valid script");
        while let Some(e) = conn.poll_event() {
            events.push(match e {
                Event::Headers {
                    stream,
                    block,
                    end_stream,
                } => Owned::Block("headers", stream, block.bytes(&buf).to_vec(), end_stream),
                Event::Trailers { stream, block } => {
                    Owned::Block("trailers", stream, block.bytes(&buf).to_vec(), true)
                }
                Event::Discard { block } => {
                    Owned::Block("discard", 0, block.bytes(&buf).to_vec(), false)
                }
                Event::Data {
                    stream,
                    data,
                    end_stream,
                } => {
                    conn.consumed(stream, data.len() as u32);
                    Owned::Data(stream, buf[data].to_vec(), end_stream)
                }
                e => Owned::Other(e),
            });
        }
        buf.drain(..used);
        output.extend_from_slice(conn.pending_output());
        let n = conn.pending_output().len();
        conn.advance(n);
    }
    assert!(buf.is_empty(), "the script ends on a frame's end");
    (events, output)
}

#[test]
fn any_cut_gives_the_same_events() {
    let mut s = PREFACE.to_vec();
    s.extend(settings(&[(4, 1000)]));
    s.extend(frame(SETTINGS, ACK, 0, &[]));
    s.extend(frame(HEADERS, PADDED, 1, &[2, b'a', b'b', 0, 0]));
    s.extend(frame(CONTINUATION, 0, 1, b"cd"));
    s.extend(frame(CONTINUATION, END_HEADERS, 1, b"ef"));
    s.extend(frame(DATA, 0, 1, &[b'x'; 40000 / 4]));
    s.extend(frame(PING, 0, 0, b"pingpong"));
    s.extend(frame(DATA, PADDED, 1, &[1, b'y', b'z', 0]));
    s.extend(get(3));
    s.extend(window_update(0, 5));
    s.extend(frame(HEADERS, END_HEADERS | END_STREAM, 1, b"tt"));
    s.extend(frame(RST_STREAM, 0, 3, &u32be(8)));
    s.extend(frame(0x33, 0, 0, b"ignored"));
    let (whole, out) = run(&s, s.len());
    assert_eq!(whole.len(), 8);
    assert_eq!(whole[0], Owned::Other(Event::SettingsChanged));
    assert_eq!(
        whole[1],
        Owned::Block("headers", 1, b"abcdef".to_vec(), false)
    );
    assert_eq!(whole[2], Owned::Data(1, vec![b'x'; 10000], false));
    assert_eq!(whole[3], Owned::Data(1, b"yz".to_vec(), false));
    assert_eq!(
        whole[4],
        Owned::Block("headers", 3, b"\x82\x84".to_vec(), true)
    );
    assert_eq!(whole[6], Owned::Block("trailers", 1, b"tt".to_vec(), true));
    for step in [1, 2, 3, 7, 9, 10, 100, 4096, 10007] {
        let (events, output) = run(&s, step);
        assert!(events == run(&s, s.len()).0 && output == out, "step {step}");
    }
}
