//! The proxy cache under a real fill load while shoal is killed with -9 and restarted, again
//! and again: every answer's body is checked, none may ever be a truncated or mixed object.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crate::common::upstream::{Answer, Upstream};
use crate::common::*;

const KEYS: usize = 400;

/// The body of key `i`: its own size and bytes, so any cut or mix shows.
fn body(i: usize) -> Vec<u8> {
    let len = 1000 + (i * 7919) % 90_000;
    (0..len).map(|j| b'a' + ((i + j) % 26) as u8).collect()
}

/// One GET on a new connection: `Some((status, cache status, body))`, `None` if shoal was not
/// there or the answer was cut by the kill (a cut answer is the kill's, not the cache's).
fn fetch(port: u16, path: &str) -> Option<(u16, String, Vec<u8>)> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    s.write_all(
        format!("GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n").as_bytes(),
    )
    .ok()?;
    let mut out = Vec::new();
    s.read_to_end(&mut out).ok()?;
    let end = out.windows(4).position(|w| w == b"\r\n\r\n")?;
    let head = String::from_utf8_lossy(&out[..end]).into_owned();
    let status = head.get(9..12)?.parse().ok()?;
    let len: usize = head
        .lines()
        .find_map(|l| l.strip_prefix("Content-Length: "))?
        .trim()
        .parse()
        .ok()?;
    let body = out[end + 4..].to_vec();
    if body.len() < len {
        return None;
    }
    let cs = head
        .lines()
        .find_map(|l| l.strip_prefix("X-Cache-Status: "))
        .unwrap_or("")
        .to_string();
    Some((status, cs, body))
}

#[test]
fn kill_9_under_a_fill_load_never_serves_a_truncated_object() {
    let up = Upstream::start(|r| {
        let i: usize = r.target.trim_start_matches("/k").parse().unwrap_or(0);
        let a = Answer::ok(body(i)).header("Cache-Control", "max-age=3600");
        // Some answers come in two halves, so that kills land mid-fill.
        if i.is_multiple_of(3) {
            let half = body(i).len() / 2;
            a.delay_body(half, Duration::from_millis(30))
        } else {
            a
        }
    });
    let port = free_port();
    let text = format!(
        "daemon off;\nworker_processes 2;\nerror_log logs/error.log info;\n\
         events {{ worker_connections 1024; }}\n\
         http {{\n    access_log off;\n    \
         proxy_cache_path cache levels=1:2 keys_zone=z:1m use_temp_path=off;\n    server {{\n        \
         listen 127.0.0.1:{port};\n        server_name localhost;\n        \
         location / {{ proxy_pass {}; proxy_cache z; \
         add_header X-Cache-Status $upstream_cache_status always; }}\n    }}\n}}\n",
        up.url()
    );
    let mut s = Shoal::start_in(Prefix::new(), &text, port, &[]);
    let stop = Arc::new(AtomicBool::new(false));
    let checked = Arc::new(AtomicUsize::new(0));
    let hits = Arc::new(AtomicUsize::new(0));
    let clients: Vec<_> = (0..3)
        .map(|c| {
            let (stop, checked, hits) = (stop.clone(), checked.clone(), hits.clone());
            std::thread::spawn(move || {
                let mut n = c * 131;
                while !stop.load(Ordering::SeqCst) {
                    n = (n * 17 + 11) % KEYS;
                    let Some((status, cs, got)) = fetch(port, &format!("/k{n}")) else {
                        std::thread::sleep(Duration::from_millis(5));
                        continue;
                    };
                    assert_eq!(status, 200);
                    assert!(got == body(n), "key {n} ({cs}): {} bytes", got.len());
                    checked.fetch_add(1, Ordering::SeqCst);
                    if cs == "HIT" {
                        hits.fetch_add(1, Ordering::SeqCst);
                    }
                }
            })
        })
        .collect();
    for _ in 0..4 {
        std::thread::sleep(Duration::from_millis(700));
        s.signal(9);
        s.wait_exit();
        let prefix = std::mem::take(&mut s.prefix);
        drop(s);
        s = Shoal::start_in(prefix, &text, port, &[]);
    }
    std::thread::sleep(Duration::from_millis(700));
    stop.store(true, Ordering::SeqCst);
    for c in clients {
        c.join().expect("a client found a bad body");
    }
    // Every key once more, after the last restart: whole, hit or miss.
    for i in 0..KEYS {
        let (status, cs, got) = fetch(port, &format!("/k{i}")).expect("an answer");
        assert_eq!(status, 200);
        assert!(got == body(i), "key {i} ({cs}): {} bytes", got.len());
    }
    assert!(checked.load(Ordering::SeqCst) > 200, "too little load");
    assert!(hits.load(Ordering::SeqCst) > 0, "no hits across restarts");
}
