//! A bare h2c server on the frame layer alone, to run h2spec's frame-level cases against it
//! before the codec is wired into shoal: every request is answered `:status 200` (the static
//! table's index 8, so no HPACK encoder is needed) and a body of "hello". Request header
//! blocks are not decoded (that is the `hpack` room): h2spec's HPACK and header-field cases
//! are not this layer's, and fail here.
//!
//!     cargo run --release -p shoal-http2 --example h2c_hello -- 127.0.0.1:18080 &
//!     h2spec -h 127.0.0.1 -p 18080 http2 generic
//!
//! At the frame layer's first commit: 122 of h2spec 2.2.1's 138 `http2` and `generic` cases
//! pass; the 16 others are 4.3 (COMPRESSION_ERROR for a block HPACK cannot decode) and 8.1.2
//! (pseudo-headers, connection-specific fields, `content-length`): the layers above.
//!
//! One thread per connection, blocking sockets; the process serves until killed.

use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};

use shoal_http2::frame::{Config, Connection, Event};

const BODY: &[u8] = b"hello";

fn main() {
    let addr = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "127.0.0.1:18080".into());
    let listener = TcpListener::bind(&addr).expect("bind");
    for sock in listener.incoming().flatten() {
        std::thread::spawn(move || serve(sock));
    }
}

fn serve(mut sock: TcpStream) {
    let cfg = Config {
        max_concurrent_streams: 100,
        ..Config::default()
    };
    let mut conn = Connection::new(cfg);
    let mut buf = vec![0u8; 0];
    let mut chunk = vec![0u8; 32 * 1024];
    // Body bytes still to send, per stream (a small window holds them back).
    let mut left: HashMap<u32, usize> = HashMap::new();
    loop {
        if flush(&mut sock, &mut conn).is_err() {
            return;
        }
        let n = match sock.read(&mut chunk) {
            Ok(0) | Err(_) => return,
            Ok(n) => n,
        };
        buf.extend_from_slice(&chunk[..n]);
        let result = conn.recv(&buf);
        while let Some(ev) = conn.poll_event() {
            match ev {
                Event::Headers {
                    stream,
                    end_stream: true,
                    ..
                }
                | Event::Trailers { stream, .. } => answer(&mut conn, &mut left, stream),
                Event::Data {
                    stream,
                    data,
                    end_stream,
                } => {
                    conn.consumed(stream, data.len() as u32);
                    if end_stream {
                        answer(&mut conn, &mut left, stream);
                    }
                }
                Event::Reset { stream, .. } => {
                    left.remove(&stream);
                }
                Event::WindowOpened { .. } | Event::SettingsChanged => {
                    let ids: Vec<u32> = left.keys().copied().collect();
                    for id in ids {
                        more(&mut conn, &mut left, id);
                    }
                }
                _ => {}
            }
        }
        match result {
            Ok(used) => {
                buf.drain(..used);
            }
            Err(e) => {
                eprintln!("connection error: {e}");
                let _ = flush(&mut sock, &mut conn);
                let _ = sock.shutdown(std::net::Shutdown::Both);
                return;
            }
        }
    }
}

fn answer(conn: &mut Connection, left: &mut HashMap<u32, usize>, stream: u32) {
    if conn.send_headers(stream, &[0x88], false).is_ok() {
        left.insert(stream, BODY.len());
        more(conn, left, stream);
    }
}

fn more(conn: &mut Connection, left: &mut HashMap<u32, usize>, stream: u32) {
    let Some(&n) = left.get(&stream) else { return };
    match conn.send_data(stream, &BODY[BODY.len() - n..], true) {
        Ok(sent) if sent == n => {
            left.remove(&stream);
        }
        Ok(sent) => {
            left.insert(stream, n - sent);
        }
        Err(_) => {
            left.remove(&stream);
        }
    }
}

fn flush(sock: &mut TcpStream, conn: &mut Connection) -> std::io::Result<()> {
    let out = conn.pending_output();
    if !out.is_empty() {
        sock.write_all(out)?;
        let n = out.len();
        conn.advance(n);
    }
    Ok(())
}
