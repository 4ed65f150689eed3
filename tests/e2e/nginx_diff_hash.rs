//! `hash` balancing against real nginx: for many keys, `hash KEY` (nginx's crc32 of the key,
//! modulo the total weight, walked over the peers) and `hash KEY consistent` (ketama points,
//! 160 per unit of weight, from the crc32 of each server's host and port) choose the same peer
//! on both servers; `hash $binary_remote_addr` hashes the address's raw bytes (not a text form
//! of them), in http and in stream.

use std::io::{Read, Write};
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use crate::common::upstream::Upstream;
use crate::diff::{Conf, Pair};

/// Each peer's weight: unequal, so that the weight walk is compared too.
const WEIGHTS: [u32; 5] = [1, 3, 1, 2, 1];

/// `server 127.0.0.1:PORT weight=W;` for each peer.
fn servers(ports: &[u16]) -> String {
    ports
        .iter()
        .zip(WEIGHTS)
        .map(|(p, w)| format!("server 127.0.0.1:{p} weight={w}; "))
        .collect()
}

/// The keys asked for: short and long, digits and letters, a byte past ASCII, and none.
fn keys() -> Vec<String> {
    let mut keys: Vec<String> = (0..40).map(|i| format!("k{i}")).collect();
    keys.extend((0..15).map(|i| format!("user-{}@example.com", i * 7919)));
    keys.extend(["%C3%A9t%C3%A9", "a", "Z", "0", "x".repeat(300).as_str()].map(String::from));
    keys
}

/// `paths` as one pipelined exchange, the last request closing the connection.
fn pipelined(paths: &[String], header: &str) -> Vec<u8> {
    let mut req = String::new();
    for (i, path) in paths.iter().enumerate() {
        let close = if i + 1 == paths.len() {
            "Connection: close\r\n"
        } else {
            ""
        };
        req.push_str(&format!(
            "GET {path} HTTP/1.1\r\nHost: x\r\n{header}{close}\r\n"
        ));
    }
    req.into_bytes()
}

/// How many different peers answered in a transcript (`peerN` bodies).
fn peers_seen(transcript: &str) -> usize {
    (0..WEIGHTS.len())
        .filter(|i| transcript.contains(&format!("peer{i}")))
        .count()
}

#[test]
fn http_hash_and_consistent_hash_pick_nginx_peers() {
    let ups: Vec<Upstream> = (0..WEIGHTS.len())
        .map(|i| Upstream::hello(&format!("peer{i}\n")))
        .collect();
    let ports: Vec<u16> = ups.iter().map(Upstream::port).collect();
    let s = servers(&ports);
    let http = format!(
        "    upstream h {{ hash $arg_k; {s}}}\n    \
         upstream c {{ hash $arg_k consistent; {s}}}\n    \
         upstream b {{ hash $binary_remote_addr; {s}}}\n    \
         upstream bc {{ hash $binary_remote_addr consistent; {s}}}\n    \
         set_real_ip_from 127.0.0.1;\n    real_ip_header X-Real-IP;\n"
    );
    let p = Pair::with(Conf {
        http: &http,
        server: "location /h { proxy_pass http://h; }\n\
                 location /c { proxy_pass http://c; }\n\
                 location /b { proxy_pass http://b; }\n\
                 location /bc { proxy_pass http://bc; }",
        ..Default::default()
    });
    for upstream in ["h", "c"] {
        let mut paths: Vec<String> = keys()
            .iter()
            .map(|k| format!("/{upstream}?k={k}"))
            .collect();
        paths.push(format!("/{upstream}"));
        let mut all = String::new();
        for chunk in paths.chunks(20) {
            all.push_str(&p.check_open(&pipelined(chunk, "")));
        }
        assert!(peers_seen(&all) >= 4, "{upstream}: too few peers:\n{all}");
    }
    // Addresses given by realip: the key is their 4 or 16 bytes.
    let addrs: Vec<String> = (0..30)
        .map(|i| format!("10.{}.{}.{}", i * 8, 255 - i, i * 3 + 1))
        .chain((0..10).map(|i| format!("2001:db8::{:x}", i * 4099 + 1)))
        .collect();
    for upstream in ["b", "bc"] {
        let mut all = String::new();
        for addr in &addrs {
            all.push_str(&p.check_open(&pipelined(
                &[format!("/{upstream}")],
                &format!("X-Real-IP: {addr}\r\n"),
            )));
        }
        assert!(peers_seen(&all) >= 4, "{upstream}: too few peers:\n{all}");
    }
}

/// What a TCP session through the proxy at `port`, made from the local address `from`, got
/// back: the echo server's tag and the data.
fn session_from(from: &str, port: u16) -> Vec<u8> {
    let sock =
        socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).expect("a socket");
    let local: SocketAddr = format!("{from}:0").parse().expect("an address");
    sock.bind(&local.into())
        .expect("binding a loopback address");
    let to: SocketAddr = format!("127.0.0.1:{port}").parse().expect("an address");
    sock.connect_timeout(&to.into(), Duration::from_secs(10))
        .expect("connecting");
    let mut c: std::net::TcpStream = sock.into();
    c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    c.write_all(b"hi").unwrap();
    let mut got = Vec::new();
    let mut buf = [0u8; 256];
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline && !got.ends_with(b"hi") {
        match c.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => got.extend_from_slice(&buf[..n]),
        }
    }
    got
}

#[test]
fn stream_hash_of_binary_remote_addr_picks_nginx_peers() {
    use crate::stream::Echo;
    let echoes: Vec<Echo> = (0..WEIGHTS.len())
        .map(|i| Echo::start(&format!("peer{i}:")))
        .collect();
    let ports: Vec<u16> = echoes.iter().map(|e| e.port).collect();
    let s = servers(&ports);
    let known: Vec<(u16, String)> = ports
        .iter()
        .enumerate()
        .map(|(i, p)| (*p, format!("B{i}")))
        .collect();
    let known: Vec<(u16, &str)> = known.iter().map(|(p, n)| (*p, n.as_str())).collect();
    let t = format!(
        "upstream b {{ hash $binary_remote_addr; {s}}}\n\
         upstream bc {{ hash $binary_remote_addr consistent; {s}}}\n\
         server {{ listen 127.0.0.1:P0; proxy_pass b; }}\n\
         server {{ listen 127.0.0.1:P1; proxy_pass bc; }}"
    );
    let p = crate::nginx_diff_stream::Pair::new(&t, 2, &known);
    // Clients from 127.a.b.c: the source addresses of the loopback network.
    let froms: Vec<String> = (0..24)
        .map(|i| format!("127.{}.{}.{}", 200 - i * 7, i * 11, 250 - i))
        .collect();
    for listener in [0, 1] {
        let mut seen = Vec::new();
        for from in &froms {
            seen.push(p.same(listener, |port| session_from(from, port)));
        }
        let all = String::from_utf8_lossy(&seen.concat()).into_owned();
        assert!(peers_seen(&all) >= 4, "{listener}: too few peers: {all}");
    }
}
