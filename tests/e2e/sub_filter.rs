//! `sub_filter` through the real binary where nginx is not needed to say what is right: an
//! upgraded connection is never filtered (its bytes are relayed as they are), and a long body
//! trickled by an upstream in pieces that cut the string everywhere comes out with every
//! match replaced.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use crate::common::upstream::{Answer, Upstream};
use crate::common::*;

fn start(port: u16, server: &str) -> Shoal {
    let conf = format!(
        "daemon off;\nworker_processes 1;\nerror_log logs/error.log info;\n\
         events {{ worker_connections 64; }}\n\
         http {{\n    access_log off;\n    server {{\n        \
         listen 127.0.0.1:{port};\n        server_name localhost;\n{server}\n    }}\n}}\n"
    );
    Shoal::start(&conf, port)
}

#[test]
fn an_upgraded_connection_is_a_tunnel_whatever_the_type() {
    let up = Upstream::start(|_| Answer::upgrade("websocket").header("Content-Type", "text/html"));
    let port = free_port();
    let _s = start(
        port,
        &format!(
            "location /ws {{ proxy_pass {}; proxy_http_version 1.1; \
             proxy_set_header Upgrade $http_upgrade; proxy_set_header Connection upgrade; \
             sub_filter ping PONG; sub_filter_types *; }}",
            up.url()
        ),
    );
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
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
    assert!(head.starts_with("HTTP/1.1 101 "), "{head}");
    assert!(!head.contains("Transfer-Encoding"), "{head}");
    s.write_all(b"ping").unwrap();
    let mut got = [0u8; 4];
    s.read_exact(&mut got).unwrap();
    assert_eq!(&got, b"ping");
}

#[test]
fn a_trickled_body_has_every_match_replaced() {
    // 3000 matches, the upstream's chunks of 7 bytes cutting them at every place.
    let body: String = (0..3000)
        .map(|i| format!("<a href=\"http://backend/{i}\">"))
        .collect();
    let want = body.replace("http://backend/", "https://example.com/");
    let up = Upstream::start(move |_| {
        Answer::ok(body.clone())
            .header("Content-Type", "text/html")
            .chunked(&[7; 20000])
    });
    let port = free_port();
    let _s = start(
        port,
        &format!(
            "location / {{ proxy_pass {}; proxy_buffering off; \
             sub_filter http://backend/ https://example.com/; sub_filter_once off; }}",
            up.url()
        ),
    );
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.write_all(b"GET / HTTP/1.0\r\n\r\n").unwrap();
    let mut got = Vec::new();
    s.read_to_end(&mut got).unwrap();
    let got = String::from_utf8_lossy(&got);
    let (head, got_body) = got.split_once("\r\n\r\n").expect("a head");
    assert!(head.starts_with("HTTP/1.1 200 "), "{head}");
    assert!(!head.contains("Content-Length"), "{head}");
    assert_eq!(got_body, want);
}
