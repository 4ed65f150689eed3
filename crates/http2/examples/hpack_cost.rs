//! The cost of HPACK for one typical request and answer: `hpack_cost [N]` decodes a browser's
//! first request block (16 fields, Huffman-coded, each added to the table) into a fresh
//! decoder, a repeated one (16 indexed fields), and encodes a static file's answer without and
//! with a dynamic table, N times each (default 100,000), printing nanoseconds per block.
//!
//! For instruction counts, which the machine's load does not move, run it under callgrind
//! twice and divide the difference by the difference of N:
//!
//! ```text
//! valgrind --tool=callgrind --callgrind-out-file=/dev/null target/release/examples/hpack_cost 1000 first
//! ```
//!
//! with a second argument `first`, `repeat`, `encode`, `encode-table` or `encode-answers` (a
//! server's encoder: every field indexed, as `shoal` encodes its answers) to run one case only.

use shoal_http2::hpack::{huffman, Bounds, Decoder, Encoder, STATIC};
use std::hint::black_box;
use std::time::Instant;

const REQUEST: [(&[u8], &[u8]); 16] = [
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
    (b"cookie", b"session=8f2a9c4e1b7d3f60; theme=dark"),
];

/// A Huffman-coded string literal shorter than 127 bytes.
fn string(s: &[u8], out: &mut Vec<u8>) {
    let mut h = Vec::new();
    huffman::encode(s, &mut h);
    assert!(h.len() < 127);
    out.push(0x80 | h.len() as u8);
    out.extend_from_slice(&h);
}

/// The first request as browsers send it: every field a literal with incremental indexing.
fn first_block() -> Vec<u8> {
    let mut out = Vec::new();
    for (name, value) in REQUEST {
        match STATIC.iter().position(|(n, _)| *n == name) {
            Some(i) => out.push(0x40 | (i + 1) as u8),
            None => {
                out.push(0x40);
                string(name, &mut out);
            }
        }
        string(value, &mut out);
    }
    out
}

fn main() {
    let mut args = std::env::args().skip(1);
    let n: usize = args.next().map_or(100_000, |a| a.parse().expect("N"));
    let only = args.next();
    let run = |case: &str| only.as_deref().is_none_or(|o| o == case);
    let first = first_block();
    // The second request: all 16 in the table, the newest (cookie) at 62.
    let repeat: Vec<u8> = (0..16).map(|i| 0x80 | (62 + 15 - i) as u8).collect();
    let mut scratch = Vec::new();
    let mut sum = 0usize;

    if run("first") {
        let start = Instant::now();
        for _ in 0..n {
            let mut d = Decoder::new(Bounds::default());
            d.decode(black_box(&first), &mut scratch, |f| {
                sum += f.value.len();
                Ok::<(), ()>(())
            })
            .unwrap();
        }
        let ns = start.elapsed().as_nanos() as f64 / n as f64;
        println!(
            "decode first request ({} bytes, 16 fields into the table): {ns:.0} ns",
            first.len()
        );
    }
    if run("repeat") {
        let mut d = Decoder::new(Bounds::default());
        d.decode(&first, &mut scratch, |_| Ok::<(), ()>(()))
            .unwrap();
        let start = Instant::now();
        for _ in 0..n {
            d.decode(black_box(&repeat), &mut scratch, |f| {
                sum += f.value.len();
                Ok::<(), ()>(())
            })
            .unwrap();
        }
        let ns = start.elapsed().as_nanos() as f64 / n as f64;
        println!(
            "decode repeated request ({} bytes, 16 indexed fields): {ns:.0} ns; the table: {} bytes \
             ({} entries), {} heap bytes",
            repeat.len(),
            d.table_size(),
            d.table_len(),
            d.heap_bytes()
        );
    }
    for (case, budget) in [
        ("encode", 0),
        ("encode-table", 512),
        ("encode-answers", 1024),
    ] {
        if !run(case) {
            continue;
        }
        // `encode-answers`: as a server's connections encode (every field indexed).
        let mut e = match case {
            "encode-answers" => Encoder::for_answers(budget),
            _ => Encoder::with_table_size(budget),
        };
        let mut out = Vec::with_capacity(512);
        let start = Instant::now();
        for _ in 0..n {
            out.clear();
            e.begin(&mut out);
            e.status(200, &mut out);
            e.field(b"server", b"shoal", &mut out);
            e.field(
                b"date",
                black_box(b"Fri, 27 Nov 2026 04:00:00 GMT"),
                &mut out,
            );
            e.field(b"content-type", b"application/javascript", &mut out);
            e.field(b"content-length", b"48213", &mut out);
            e.field(b"last-modified", b"Tue, 10 Nov 2026 12:30:00 GMT", &mut out);
            e.field(b"etag", b"\"6550a1b8-bc55\"", &mut out);
            e.field(b"accept-ranges", b"bytes", &mut out);
            sum += black_box(&out).len();
        }
        let ns = start.elapsed().as_nanos() as f64 / n as f64;
        println!(
            "{case}: a static file's answer (8 fields, {} bytes, table budget {budget}, {} heap bytes): {ns:.0} ns",
            out.len(),
            e.heap_bytes()
        );
    }
    black_box(sum);
}
