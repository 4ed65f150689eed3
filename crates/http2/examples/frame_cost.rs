//! The frame layer's cost per request, alone (no HPACK, no socket): a client's HEADERS and a
//! WINDOW_UPDATE in, a 20-byte answer block and a 100-byte body out, the output drained.
//! Count it with callgrind, at two request counts; the difference over the requests' is what
//! one request costs:
//!
//!     cargo build --release -p shoal-http2 --example frame_cost
//!     cd target/release/examples
//!     valgrind --tool=callgrind --callgrind-out-file=/dev/null ./frame_cost 1000
//!     valgrind --tool=callgrind --callgrind-out-file=/dev/null ./frame_cost 11000
//!
//! At the frame layer's first commit: 1,025,680 and 8,345,699 instructions, so about 730 per
//! request (of which the example's own loop and copies are a part).

use shoal_http2::frame::{Config, Connection, Event, PREFACE};

fn main() {
    let n: u32 = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(10_000);
    let mut c = Connection::new(Config::default());
    let mut hello = PREFACE.to_vec();
    hello.extend_from_slice(&[0, 0, 0, 4, 0, 0, 0, 0, 0]);
    hello.extend_from_slice(&[0, 0, 0, 4, 1, 0, 0, 0, 0]);
    c.recv(&hello).expect("preface");
    drain(&mut c);
    let answer = [0x88u8; 20];
    let body = [b'x'; 100];
    // HEADERS (20-byte block, END_STREAM | END_HEADERS) then WINDOW_UPDATE(0, 100).
    let mut input = vec![0, 0, 20, 1, 5, 0, 0, 0, 0];
    input.extend_from_slice(&[0x82; 20]);
    input.extend_from_slice(&[0, 0, 4, 8, 0, 0, 0, 0, 0, 0, 0, 0, 100]);
    let mut bytes = 0;
    for i in 0..n {
        input[5..9].copy_from_slice(&(2 * i + 1).to_be_bytes());
        let used = c.recv(&input).expect("a request");
        assert_eq!(used, input.len());
        while let Some(ev) = c.poll_event() {
            if let Event::Headers { stream, .. } = ev {
                c.send_headers(stream, &answer, false).expect("open");
                let sent = c.send_data(stream, &body, true).expect("open");
                assert_eq!(sent, body.len());
            }
        }
        bytes += drain(&mut c);
    }
    c.shrink();
    println!(
        "{n} requests, {bytes} bytes out, {} streams open",
        c.open_streams()
    );
}

fn drain(c: &mut Connection) -> usize {
    let n = std::hint::black_box(c.pending_output()).len();
    c.advance(n);
    n
}
