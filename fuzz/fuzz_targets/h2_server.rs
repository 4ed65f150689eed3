//! Arbitrary client bytes into one HTTP/2 server connection (the frame layer, HPACK and the
//! request checks together), given in pieces of varied sizes as reads would give them, with
//! small windows and bounds now and then. The server answers what it is asked as a caller
//! would: whole requests with a short body (sent as far as the windows allow), oversized heads
//! refused, body bytes handed back. Nothing may panic; `recv` never uses more than it is given
//! and leaves at most one partial frame; DATA ranges lie in the input; the connection's heap
//! stays bounded by its configuration; once it fails, it stays failed and says nothing more.
#![no_main]

use std::collections::HashMap;

use libfuzzer_sys::fuzz_target;
use shoal_http2::frame::Config as FrameConfig;
use shoal_http2::server::{Config, Incoming, Server};

/// The request shoal's server builds on the codec's buffer (`plain_h2`) is the one its HTTP/1
/// parser makes of the head written as text, or both refuse it (the built road hands the text
/// back for the parser to refuse).
fn roads_agree(request: &mut shoal_http2::server::Request, text: &[u8]) {
    use shoal_http::request::plain_h2;
    let limits = shoal_http::Limits::default();
    let parts = request.parts();
    let Some(target) = parts.target else {
        return;
    };
    let fields = parts.host.into_iter().chain(request.field_ranges());
    let Some(plain) = plain_h2(request.buf(), parts.method, target, fields, &limits) else {
        return;
    };
    let buf = shoal_http::bytes::Bytes::copy_from_slice(request.buf());
    let built = plain.finish(buf, &limits, &mut Default::default());
    let parsed = shoal_http::parse_request(text, &limits);
    match (built, parsed) {
        (Ok(b), Ok(Some(p))) => {
            assert_eq!(b.method(), p.method());
            assert_eq!(b.target(), p.target());
            assert_eq!(b.path(), p.path());
            assert_eq!(b.query(), p.query());
            assert_eq!(b.host(), p.host());
            assert_eq!(b.body(), p.body());
            assert_eq!(b.head_len(), p.head_len());
            assert!(b.headers().eq(p.headers()));
        }
        (Err(t), Err(_)) => assert_eq!(t, text),
        (b, p) => panic!("built {b:?}, parsed {p:?}"),
    }
}

// The h2c_hello example's answers (`answer`, `more`), with a longer body.
#[path = "../../crates/http2/examples/support/hello.rs"]
#[allow(dead_code)]
mod hello;
use hello::{answer, more as more_body};

const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
const BODY: &[u8] = &[b'x'; 300];

fuzz_target!(|input: &[u8]| {
    let Some((ctl, data)) = input.split_first_chunk::<3>() else {
        return;
    };
    let mut frame = FrameConfig::default();
    if ctl[0] & 1 != 0 {
        frame.max_concurrent_streams = 1 + (ctl[0] >> 4) as u32;
        frame.initial_window_size = 16 + ctl[1] as u32 * 8;
        frame.connection_window = 65_535;
        frame.header_table_size = [0, 64, 4096, 8192][(ctl[0] >> 1 & 3) as usize];
        frame.max_output = 1024 + ctl[1] as usize * 64;
    }
    let mut cfg = Config {
        frame,
        encoder_table: if ctl[0] & 8 != 0 { 512 } else { 0 },
        ..Config::default()
    };
    if ctl[0] & 2 != 0 {
        cfg = cfg.header_buffers(2, 64 + ctl[1] as usize);
    }
    let max_frame = cfg.frame.max_frame_size as usize;
    let mut server = Server::new(cfg);

    // The client's bytes: the preface first unless the input asks otherwise.
    let mut client = Vec::with_capacity(PREFACE.len() + data.len());
    if ctl[2] & 1 == 0 {
        client.extend_from_slice(PREFACE);
    }
    client.extend_from_slice(data);

    let mut buf: Vec<u8> = Vec::new();
    let mut left: HashMap<u32, usize> = HashMap::new();
    let mut rest = &client[..];
    let mut round = 0usize;
    let mut failed = false;
    while !rest.is_empty() {
        // A read's worth: 1 to 4096 bytes, chosen by the control byte and the round.
        let step = 1 + ((ctl[2] as usize >> 1) * 37 + round * 911) % 4096;
        let (read, more) = rest.split_at(step.min(rest.len()));
        rest = more;
        round += 1;
        buf.extend_from_slice(read);

        let result = server.recv(&buf);
        if failed {
            assert!(result.is_err(), "a failed connection came back");
        }
        while let Some(incoming) = server.poll(&buf) {
            assert!(!failed, "an event after the connection failed");
            match incoming {
                Incoming::Head {
                    stream,
                    head: request,
                    end_stream,
                } => {
                    let _ = request.path();
                    let mut request = request;
                    let mut head = Vec::new();
                    request.write_http1(&mut head);
                    roads_agree(&mut request, &head);
                    server.recycle(request.into_fields());
                    if end_stream {
                        answer(&mut server, &mut left, stream, BODY);
                    }
                }
                Incoming::Trailers { stream, fields } => {
                    server.recycle(fields);
                    answer(&mut server, &mut left, stream, BODY);
                }
                Incoming::Data {
                    stream,
                    data,
                    end_stream,
                } => {
                    assert!(data.start <= data.end && data.end <= buf.len());
                    server.conn_mut().consumed(stream, data.len() as u32);
                    if end_stream {
                        answer(&mut server, &mut left, stream, BODY);
                    }
                }
                Incoming::TooLarge { stream, .. } => server.refuse(stream, 431),
                Incoming::Malformed { stream, .. } | Incoming::Reset { stream, .. } => {
                    left.remove(&stream);
                }
                Incoming::WindowOpened { .. } | Incoming::SettingsChanged => {
                    let ids: Vec<u32> = left.keys().copied().collect();
                    for id in ids {
                        more_body(&mut server, &mut left, id, BODY);
                    }
                }
                Incoming::Closed(_) => failed = true,
                Incoming::GoAway { .. } => {}
            }
        }
        match result {
            Ok(used) => {
                assert!(used <= buf.len());
                buf.drain(..used);
                // What stays is part of one frame (or of the preface).
                assert!(buf.len() < (max_frame + 9).max(PREFACE.len()));
            }
            Err(_) => failed = true,
        }
        if server.conn().error().is_some() {
            failed = true;
        }
        // The client reads everything: the output is written and dropped.
        let n = server.conn().pending_output().len();
        server.conn_mut().advance(n);
        if round % 7 == 0 {
            server.shrink();
        }
        // Tables (at most 8 KB each way, with their entries' overhead), the buffers kept for
        // the next request (16 KB), the block and scratch buffers a header list may need.
        assert!(
            server.heap_bytes() <= 200 * 1024,
            "heap {}",
            server.heap_bytes()
        );
        if failed {
            return;
        }
    }
});
