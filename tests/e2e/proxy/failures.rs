//! An upstream that fails (refuses, stays silent, sends a malformed head) and a client that
//! leaves: nginx's status and error-log line, and no descriptor left behind.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use crate::common::client::{get_close, status_of};
use crate::common::upstream::{Answer, Upstream};
use crate::common::*;

use super::start;

#[test]
fn a_refusing_upstream_is_502_with_nginx_log_line() {
    let dead = free_port();
    let port = free_port();
    let s = start(
        port,
        "",
        &format!("location / {{ proxy_pass http://127.0.0.1:{dead}; }}"),
    );
    let resp = get_close(port, "/x?y");
    assert_eq!(status_of(&resp), 502, "{resp}");
    assert!(resp.contains("<center><h1>502 Bad Gateway</h1></center>"));
    s.wait_log(
        &format!(
            "connect() failed (111: Connection refused) while connecting to upstream, client: \
             127.0.0.1, server: localhost, request: \"GET /x?y HTTP/1.1\", upstream: \
             \"http://127.0.0.1:{dead}/x?y\", host: \"localhost\""
        ),
        1,
    );
}

#[test]
fn a_silent_upstream_is_504_after_proxy_read_timeout() {
    let up = Upstream::start(|_| Answer::ok("late").delay_head(Duration::from_secs(3)));
    let port = free_port();
    let s = start(
        port,
        "",
        &format!(
            "location / {{ proxy_pass {}; proxy_read_timeout 300ms; }}",
            up.url()
        ),
    );
    let resp = get_close(port, "/slow");
    assert_eq!(status_of(&resp), 504, "{resp}");
    s.wait_log(
        "upstream timed out (110: Connection timed out) while reading response header from \
         upstream, client: 127.0.0.1",
        1,
    );
}

#[test]
fn a_malformed_head_is_502_invalid_header() {
    let up = Upstream::start(|r| match r.target.as_str() {
        "/badline" => Answer::raw("HTTP/1.1 200 OK\r\nBad Header Line\r\n\r\n").close(),
        _ => Answer::raw("NOT HTTP AT ALL\r\n\r\n").close(),
    });
    let port = free_port();
    let s = start(
        port,
        "",
        &format!("location / {{ proxy_pass {}; }}", up.url()),
    );
    let resp = get_close(port, "/badline");
    assert_eq!(status_of(&resp), 502, "{resp}");
    s.wait_log("upstream sent invalid header", 1);
    let resp = get_close(port, "/status");
    assert_eq!(status_of(&resp), 502, "{resp}");
    s.wait_log("upstream sent no valid HTTP/1.0 header", 1);
}

#[test]
fn no_descriptor_leaks_under_churn_and_clients_that_leave() {
    let up = Upstream::start(|r| match r.target.as_str() {
        "/slow" => Answer::ok(vec![b'x'; 200_000]).delay_body(1000, Duration::from_secs(2)),
        "/short" => Answer::ok("abc").cut_short(10),
        _ => Answer::ok("fine"),
    });
    let dead = free_port();
    let port = free_port();
    let s = start(
        port,
        &format!(
            "upstream ka {{ server 127.0.0.1:{}; keepalive 2; }}",
            up.port()
        ),
        &format!(
            "location / {{ proxy_pass http://ka; proxy_http_version 1.1; proxy_set_header Connection \"\"; }}\n\
             location /dead {{ proxy_pass http://127.0.0.1:{dead}; }}"
        ),
    );
    let pid = s.pid as u32;
    // One round of everything first, so what the server creates once (its runtime's
    // descriptors, log files) is there before counting.
    let round = |n: usize, abandoned: usize| {
        for i in 0..n {
            let path = ["/ok", "/short", "/dead"][i % 3];
            let _ = get_close(port, path);
        }
        // Clients that go away while the answer is still coming: the upstream side is
        // closed, not cached half-read.
        for _ in 0..abandoned {
            let mut c = TcpStream::connect(("127.0.0.1", port)).unwrap();
            c.write_all(b"GET /slow HTTP/1.1\r\nHost: localhost\r\n\r\n")
                .unwrap();
            let mut b = [0u8; 512];
            let _ = c.read(&mut b);
        }
    };
    round(3, 1);
    wait_for("the first abandoned exchange to end", || {
        (up.open() <= 2).then_some(())
    });
    let before = open_fds(pid);
    round(60, 3);
    let deadline = std::time::Instant::now() + WAIT;
    while open_fds(pid) > before + 2 {
        assert!(
            std::time::Instant::now() < deadline,
            "descriptors: {before} before, now {:?}",
            fd_targets(pid)
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    // Every /slow exchange was abandoned: none of those connections is still open upstream
    // beyond the two the cache may keep.
    wait_for("upstream connections closed", || {
        (up.open() <= 2).then_some(())
    });
}

#[test]
fn a_client_that_leaves_while_the_upstream_thinks_is_a_499() {
    let up = Upstream::start(|_| Answer::ok("late").delay_head(Duration::from_secs(2)));
    let port = free_port();
    let s = start(
        port,
        "",
        &format!("location / {{ proxy_pass {}; }}", up.url()),
    );
    let mut c = TcpStream::connect(("127.0.0.1", port)).unwrap();
    c.write_all(b"GET /wait HTTP/1.1\r\nHost: localhost\r\n\r\n")
        .unwrap();
    up.wait_requests(1);
    drop(c);
    s.wait_log(
        "client prematurely closed connection, so upstream connection is closed too while \
         reading response header from upstream, client: 127.0.0.1",
        1,
    );
    let log = wait_for("the access log line", || {
        let l = s.prefix.read("logs/access.log");
        l.contains("\"GET /wait HTTP/1.1\"").then_some(l)
    });
    assert!(log.contains("\"GET /wait HTTP/1.1\" 499 0"), "{log}");
    // A pipelined client (more bytes, no close) is not mistaken for one that left.
    let mut c = TcpStream::connect(("127.0.0.1", port)).unwrap();
    c.set_read_timeout(Some(WAIT)).unwrap();
    c.write_all(
        b"GET /a HTTP/1.1\r\nHost: localhost\r\n\r\nGET /b HTTP/1.1\r\nHost: localhost\r\n\
          Connection: close\r\n\r\n",
    )
    .unwrap();
    let mut out = String::new();
    let _ = c.read_to_string(&mut out);
    assert_eq!(out.matches("HTTP/1.1 200 OK").count(), 2, "{out}");
}
