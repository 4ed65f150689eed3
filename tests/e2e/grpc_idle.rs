//! gRPC upstream connections idle in the worker's cache (`keepalive N`): one idle long enough
//! to have let its buffers go carries the next call as before, and one idle past the
//! upstream's `keepalive_timeout` is closed (a GOAWAY, then the close) with no call to find
//! it stale, as nginx closes an idle keepalive connection on its timer. The upstream is a
//! small HTTP/2 server here that reports what happens to each of its connections.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::mpsc::{channel, Receiver, Sender};
use std::time::Duration;

use crate::common::{free_port, Shoal};

/// What the upstream saw, connection by connection (numbered from 1).
#[derive(Debug, PartialEq, Eq)]
enum Seen {
    Opened(u32),
    Answered(u32),
    GoAway(u32),
    Closed(u32),
}

struct Upstream {
    port: u16,
    seen: Receiver<Seen>,
}

impl Upstream {
    fn start() -> Upstream {
        let listener = TcpListener::bind("127.0.0.1:0").expect("binding");
        let port = listener.local_addr().expect("an address").port();
        let (tx, seen) = channel();
        std::thread::spawn(move || {
            for (n, c) in (1..).zip(listener.incoming().flatten()) {
                let tx = tx.clone();
                std::thread::spawn(move || serve(n, c, tx));
            }
        });
        Upstream { port, seen }
    }

    /// The next thing seen (bounded wait).
    fn next(&self, what: &str, log: &dyn Fn() -> String) -> Seen {
        self.seen
            .recv_timeout(crate::common::WAIT)
            .unwrap_or_else(|_| panic!("the upstream never saw {what}\n{}", log()))
    }
}

fn read_frame(c: &mut impl Read) -> Option<([u8; 9], Vec<u8>)> {
    let mut head = [0u8; 9];
    c.read_exact(&mut head).ok()?;
    let len = (usize::from(head[0]) << 16) | (usize::from(head[1]) << 8) | usize::from(head[2]);
    let mut payload = vec![0u8; len];
    c.read_exact(&mut payload).ok()?;
    Some((head, payload))
}

fn frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
    let len = payload.len() as u32;
    let mut f = vec![(len >> 16) as u8, (len >> 8) as u8, len as u8, kind, flags];
    f.extend_from_slice(&stream.to_be_bytes());
    f.extend_from_slice(payload);
    f
}

/// Answers each stream once the client ended it: `:status: 200`, a 5-byte message, then
/// `grpc-status: 0` trailers that end it.
fn serve(n: u32, mut c: TcpStream, tx: Sender<Seen>) {
    let _ = tx.send(Seen::Opened(n));
    let mut preface = [0u8; 24];
    if c.read_exact(&mut preface).is_err() || c.write_all(&frame(4, 0, 0, &[])).is_err() {
        let _ = tx.send(Seen::Closed(n));
        return;
    }
    while let Some((head, _)) = read_frame(&mut c) {
        let id = u32::from_be_bytes([head[5], head[6], head[7], head[8]]) & 0x7fff_ffff;
        let ended = match head[3] {
            4 if head[4] & 1 == 0 => {
                let _ = c.write_all(&frame(4, 1, 0, &[]));
                false
            }
            0 | 1 => head[4] & 1 != 0,
            7 => {
                let _ = tx.send(Seen::GoAway(n));
                false
            }
            _ => false,
        };
        if ended {
            let mut trailers = vec![0x00, 11];
            trailers.extend_from_slice(b"grpc-status");
            trailers.extend_from_slice(&[1, b'0']);
            let answer = [
                frame(1, 4, id, &[0x88]),
                frame(0, 0, id, &[0, 0, 0, 0, 0]),
                frame(1, 4 | 1, id, &trailers),
            ];
            if c.write_all(&answer.concat()).is_err() {
                break;
            }
            let _ = tx.send(Seen::Answered(n));
        }
    }
    let _ = tx.send(Seen::Closed(n));
}

fn start(upstream_lines: &str) -> (Upstream, Shoal, u16) {
    let up = Upstream::start();
    let port = free_port();
    let conf = format!(
        "daemon off;\nerror_log logs/error.log info;\nevents {{ }}\nhttp {{\n    \
         upstream kept {{ server 127.0.0.1:{}; keepalive 2; {upstream_lines} }}\n    \
         server {{\n        listen 127.0.0.1:{port};\n        \
         location / {{ grpc_pass grpc://kept; }}\n    }}\n}}\n",
        up.port
    );
    let s = Shoal::start(&conf, port);
    (up, s, port)
}

/// One unary call over HTTP/1.1 (a body of told length): the answer's status line.
fn call(port: u16) -> String {
    let mut c = TcpStream::connect(("127.0.0.1", port)).expect("connecting");
    c.set_read_timeout(Some(crate::common::WAIT))
        .expect("a read timeout");
    c.write_all(
        b"POST /test.Echo/Echo HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/grpc\r\n\
          TE: trailers\r\nContent-Length: 5\r\nConnection: close\r\n\r\n\0\0\0\0\0",
    )
    .expect("sending the call");
    let mut answer = Vec::new();
    let _ = c.read_to_end(&mut answer);
    let answer = String::from_utf8_lossy(&answer).into_owned();
    answer.lines().next().unwrap_or_default().to_string()
}

/// A connection idle in the cache for longer than it keeps its buffers (a second) carries
/// the next call: no new connection, the answer whole.
#[test]
fn a_connection_idle_past_its_buffers_carries_the_next_call() {
    let (up, s, port) = start("");
    let log = || s.error_log();
    assert_eq!(call(port), "HTTP/1.1 200 OK", "{}", log());
    assert_eq!(up.next("the first connection", &log), Seen::Opened(1));
    assert_eq!(up.next("the first answer", &log), Seen::Answered(1));
    // Past the sweep that lets an idle connection's buffers go (every second).
    std::thread::sleep(Duration::from_millis(2500));
    assert_eq!(call(port), "HTTP/1.1 200 OK", "{}", log());
    assert_eq!(up.next("the second answer", &log), Seen::Answered(1));
}

/// `keepalive_timeout`: an idle connection is closed once it passed, with no call coming to
/// find it stale (a GOAWAY first).
#[test]
fn keepalive_timeout_closes_an_idle_connection_by_itself() {
    let (up, s, port) = start("keepalive_timeout 1s;");
    let log = || s.error_log();
    assert_eq!(call(port), "HTTP/1.1 200 OK", "{}", log());
    assert_eq!(up.next("the connection", &log), Seen::Opened(1));
    assert_eq!(up.next("the answer", &log), Seen::Answered(1));
    assert_eq!(up.next("the GOAWAY", &log), Seen::GoAway(1));
    assert_eq!(up.next("the close", &log), Seen::Closed(1));
}
