//! The serving loop of the `h2c_hello` example, shared with the crate's h2spec test: every
//! request is answered `:status 200`, `content-type: text/plain` and a body of "hello" (after
//! its own body is read whole); a header block past the bounds gets 431. Blocking socket,
//! one connection per call. `answer` and `more` also answer for the `h2_server` fuzz target,
//! with a body of its own.

use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::TcpStream;

use shoal_http2::frame::Config as FrameConfig;
use shoal_http2::server::{Config, Incoming, Server};

const BODY: &[u8] = b"hello";

/// Serves one connection until the client closes it or a connection error.
pub fn serve(mut sock: TcpStream) {
    let cfg = Config {
        frame: FrameConfig {
            max_concurrent_streams: 100,
            ..FrameConfig::default()
        },
        encoder_table: 512,
        ..Config::default()
    };
    let mut server = Server::new(cfg);
    let mut buf = vec![0u8; 0];
    let mut chunk = vec![0u8; 32 * 1024];
    // Body bytes still to send, per stream (a small window holds them back).
    let mut left: HashMap<u32, usize> = HashMap::new();
    loop {
        if flush(&mut sock, &mut server).is_err() {
            return;
        }
        let n = match sock.read(&mut chunk) {
            Ok(0) | Err(_) => return,
            Ok(n) => n,
        };
        buf.extend_from_slice(&chunk[..n]);
        let result = server.recv(&buf);
        while let Some(incoming) = server.poll(&buf) {
            match incoming {
                Incoming::Head {
                    stream,
                    end_stream: true,
                    ..
                }
                | Incoming::Trailers { stream, .. } => answer(&mut server, &mut left, stream, BODY),
                Incoming::Data {
                    stream,
                    data,
                    end_stream,
                } => {
                    server.conn_mut().consumed(stream, data.len() as u32);
                    if end_stream {
                        answer(&mut server, &mut left, stream, BODY);
                    }
                }
                Incoming::TooLarge { stream, .. } => server.refuse(stream, 431),
                Incoming::Reset { stream, .. } | Incoming::Malformed { stream, .. } => {
                    left.remove(&stream);
                }
                Incoming::WindowOpened { .. } | Incoming::SettingsChanged => {
                    let ids: Vec<u32> = left.keys().copied().collect();
                    for id in ids {
                        more(&mut server, &mut left, id, BODY);
                    }
                }
                Incoming::Closed(e) => eprintln!("connection error: {e}"),
                _ => {}
            }
        }
        match result {
            Ok(used) => {
                buf.drain(..used);
            }
            Err(e) => {
                eprintln!("connection error: {e}");
                let _ = flush(&mut sock, &mut server);
                let _ = sock.shutdown(std::net::Shutdown::Both);
                return;
            }
        }
        if let Some(e) = server.conn().error() {
            eprintln!("connection error: {e}");
            let _ = flush(&mut sock, &mut server);
            let _ = sock.shutdown(std::net::Shutdown::Both);
            return;
        }
    }
}

/// Queues a 200 with `body` on `stream`, as much of the body as the windows allow.
pub fn answer(server: &mut Server, left: &mut HashMap<u32, usize>, stream: u32, body: &[u8]) {
    let fields = [(&b"content-type"[..], &b"text/plain"[..])];
    if server.send_answer(stream, 200, fields, false).is_ok() {
        left.insert(stream, body.len());
        more(server, left, stream, body);
    }
}

/// Queues more of `body` on `stream` (`left`: what each stream still has to send).
pub fn more(server: &mut Server, left: &mut HashMap<u32, usize>, stream: u32, body: &[u8]) {
    let Some(&n) = left.get(&stream) else { return };
    match server
        .conn_mut()
        .send_data(stream, &body[body.len() - n..], true)
    {
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

fn flush(sock: &mut TcpStream, server: &mut Server) -> std::io::Result<()> {
    let out = server.conn().pending_output();
    if !out.is_empty() {
        sock.write_all(out)?;
        let n = out.len();
        server.conn_mut().advance(n);
    }
    Ok(())
}
