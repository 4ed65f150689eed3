//! The whole codec's cost per request (frame layer, HPACK, the `server` room's checks), no
//! socket: a client's HEADERS and a WINDOW_UPDATE in; the request checked, its head written as
//! HTTP/1 (what shoal's server parses today); an answer of `:status 200` and three fields
//! (`server`, `date`, `content-type`, through the encoder's table) and a 100-byte body out;
//! the request's buffers given back for the next one.
//!
//! `server_cost N small` sends h2load's request (`:method`, `:scheme`, `:path`, `:authority`,
//! `user-agent`, `accept-encoding`; the first block indexes, the next ones name the table);
//! `server_cost N browser` a browser's 16 fields, indexed from the second request on. Count
//! with callgrind at two N; the difference over the requests' is one request's cost:
//!
//!     cargo build --release -p shoal-http2 --example server_cost
//!     valgrind --tool=callgrind --callgrind-out-file=/dev/null target/release/examples/server_cost 1000 small
//!     valgrind --tool=callgrind --callgrind-out-file=/dev/null target/release/examples/server_cost 11000 small
//!
//! At the room's first commit (callgrind, N = 1,000 and 11,000): 4,786,724 and 49,586,776
//! instructions for `small`, so about 4,480 per request; 10,401,924 and 111,291,962 for
//! `browser`, about 10,090. The frame layer alone (`frame_cost`) is ~780 of it; the checks of
//! the regular fields (names and values, a word at a time) ~400 for `small`, ~2,300 for
//! `browser`; giving the request's buffers back (`Server::recycle`) saves ~250 (two
//! allocations); the rest is HPACK (decoding and copying the fields, encoding the answer)
//! and this example's own loop.

use shoal_http2::frame::PREFACE;
use shoal_http2::server::{Config, Incoming, Server};

const BROWSER: [(&[u8], &[u8]); 16] = [
    (b":method", b"GET"),
    (b":authority", b"www.example.com"),
    (b":scheme", b"https"),
    (b":path", b"/static/js/app.3f9c2e1b.js"),
    (b"sec-ch-ua", b"\"Chromium\";v=\"122\", \"Not(A:Brand\";v=\"24\""),
    (b"sec-ch-ua-mobile", b"?0"),
    (
        b"user-agent",
        b"Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/122.0.0.0 Safari/537.36",
    ),
    (b"sec-ch-ua-platform", b"\"Linux\""),
    (b"accept", b"*/*"),
    (b"sec-fetch-site", b"same-origin"),
    (b"sec-fetch-mode", b"no-cors"),
    (b"sec-fetch-dest", b"script"),
    (b"referer", b"https://www.example.com/"),
    (b"accept-encoding", b"gzip, deflate, br, zstd"),
    (b"accept-language", b"en-US,en;q=0.9"),
    (b"cookie", b"session=8f3a9b2c7d1e; theme=dark"),
];

/// Literal with incremental indexing, new name, raw strings (RFC 7541, 6.2.1).
fn indexing(b: &mut Vec<u8>, name: &[u8], value: &[u8]) {
    b.push(0x40);
    for s in [name, value] {
        assert!(s.len() < 127);
        b.push(s.len() as u8);
        b.extend_from_slice(s);
    }
}

/// The first block and the ones after it.
fn blocks(case: &str) -> (Vec<u8>, Vec<u8>) {
    let mut first = Vec::new();
    let mut next = Vec::new();
    match case {
        "browser" => {
            for (name, value) in BROWSER {
                indexing(&mut first, name, value);
            }
            for i in 0..BROWSER.len() {
                next.push(0x80 | (62 + BROWSER.len() - 1 - i) as u8);
            }
        }
        _ => {
            // GET, http, "/", then :authority and user-agent indexed, "gzip, deflate".
            first.extend_from_slice(&[0x82, 0x86, 0x84]);
            indexing(&mut first, b":authority", b"127.0.0.1:8080");
            indexing(&mut first, b"user-agent", b"h2load nghttp2/1.52.0");
            first.push(0x90);
            next.extend_from_slice(&[0x82, 0x86, 0x84, 0x80 | 63, 0x80 | 62, 0x90]);
        }
    }
    (first, next)
}

fn main() {
    let n: u32 = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(10_000);
    let case = std::env::args().nth(2).unwrap_or_else(|| "small".into());
    let (first, next) = blocks(&case);
    let mut s = Server::new(Config {
        encoder_table: 512,
        ..Config::default()
    });
    let mut hello = PREFACE.to_vec();
    hello.extend_from_slice(&[0, 0, 0, 4, 0, 0, 0, 0, 0]);
    hello.extend_from_slice(&[0, 0, 0, 4, 1, 0, 0, 0, 0]);
    s.recv(&hello).expect("preface");
    while s.poll(&hello).is_some() {}
    drain(&mut s);
    let answer: [(&[u8], &[u8]); 3] = [
        (b"server", b"shoal"),
        (b"date", b"Fri, 27 Nov 2026 04:00:00 GMT"),
        (b"content-type", b"text/html"),
    ];
    let body = [b'x'; 100];
    let mut head = Vec::with_capacity(1024);
    let mut bytes = 0;
    let mut input = Vec::with_capacity(1024);
    for i in 0..n {
        let block = if i == 0 { &first } else { &next };
        // HEADERS (END_STREAM | END_HEADERS) then WINDOW_UPDATE(0, 100).
        let len = block.len();
        input.clear();
        input.extend_from_slice(&[(len >> 16) as u8, (len >> 8) as u8, len as u8, 1, 5]);
        input.extend_from_slice(&(2 * i + 1).to_be_bytes());
        input.extend_from_slice(block);
        input.extend_from_slice(&[0, 0, 4, 8, 0, 0, 0, 0, 0, 0, 0, 0, 100]);
        let used = s.recv(&input).expect("a request");
        assert_eq!(used, input.len());
        while let Some(got) = s.poll(&input) {
            match got {
                Incoming::Head {
                    stream,
                    head: request,
                    ..
                } => {
                    head.clear();
                    request.write_http1(&mut head);
                    std::hint::black_box(&head);
                    s.recycle(request.into_fields());
                    s.send_answer(stream, 200, answer, false).expect("open");
                    let sent = s.conn_mut().send_data(stream, &body, true).expect("open");
                    assert_eq!(sent, body.len());
                }
                Incoming::WindowOpened { .. } => {}
                other => panic!("{other:?}"),
            }
        }
        bytes += drain(&mut s);
    }
    s.shrink();
    println!(
        "{n} requests ({case}), {bytes} bytes out, {} streams open, head {} bytes",
        s.conn().open_streams(),
        head.len()
    );
}

fn drain(s: &mut Server) -> usize {
    let n = std::hint::black_box(s.conn().pending_output()).len();
    s.conn_mut().advance(n);
    n
}
