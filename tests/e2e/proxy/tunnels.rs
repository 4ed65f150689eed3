//! WebSocket upgrades: the connection becomes a tunnel, and a tunnel whose client stops
//! reading times out.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use crate::common::upstream::{Answer, Upstream};
use crate::common::*;

use super::start;

#[test]
fn websocket_upgrade_becomes_a_tunnel() {
    let up = Upstream::start(|_| Answer::upgrade("websocket"));
    let port = free_port();
    let _s = start(
        port,
        "",
        &format!(
            "location /ws {{ proxy_pass {}; proxy_http_version 1.1; \
             proxy_set_header Upgrade $http_upgrade; proxy_set_header Connection \"upgrade\"; }}",
            up.url()
        ),
    );
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(WAIT)).unwrap();
    s.write_all(
        b"GET /ws HTTP/1.1\r\nHost: localhost\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n",
    )
    .unwrap();
    let mut head = Vec::new();
    let mut b = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        assert_eq!(s.read(&mut b).unwrap(), 1, "the head arrives");
        head.push(b[0]);
    }
    let head = String::from_utf8_lossy(&head);
    assert!(
        head.starts_with("HTTP/1.1 101 Switching Protocols\r\n"),
        "{head}"
    );
    assert!(head.contains("Upgrade: websocket\r\n"), "{head}");
    assert!(head.contains("Connection: upgrade\r\n"), "{head}");
    let seen = up.last();
    assert_eq!(seen.header("upgrade"), Some("websocket"));
    assert_eq!(seen.header("connection"), Some("upgrade"));
    for msg in ["ping", "a longer message through the tunnel"] {
        s.write_all(msg.as_bytes()).unwrap();
        let mut got = vec![0u8; msg.len()];
        s.read_exact(&mut got).unwrap();
        assert_eq!(got, msg.as_bytes());
    }
}

#[test]
fn a_tunnel_whose_client_stops_reading_times_out() {
    let up = Upstream::start(|_| Answer::upgrade("websocket"));
    let port = free_port();
    let s = start(
        port,
        "",
        &format!(
            "location /ws {{ proxy_pass {}; proxy_http_version 1.1; \
             proxy_set_header Upgrade $http_upgrade; proxy_set_header Connection \"upgrade\"; \
             send_timeout 500ms; proxy_read_timeout 60s; }}",
            up.url()
        ),
    );
    let mut c = TcpStream::connect(("127.0.0.1", port)).unwrap();
    c.set_read_timeout(Some(WAIT)).unwrap();
    c.write_all(
        b"GET /ws HTTP/1.1\r\nHost: localhost\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n",
    )
    .unwrap();
    let mut head = Vec::new();
    let mut b = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        c.read_exact(&mut b).unwrap();
        head.push(b[0]);
    }
    // Push far more than the sockets can hold through the echo, and never read it back.
    let mut w = c.try_clone().unwrap();
    w.set_write_timeout(Some(Duration::from_secs(2))).unwrap();
    let writer = std::thread::spawn(move || {
        let chunk = vec![b'x'; 64 * 1024];
        for _ in 0..1024 {
            if w.write_all(&chunk).is_err() {
                return;
            }
        }
    });
    s.wait_log(
        "client timed out (110: Connection timed out) while proxying upgraded connection",
        1,
    );
    drop(c);
    writer.join().unwrap();
}
