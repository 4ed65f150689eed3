//! The reverse proxy end to end: the real binary in front of real upstream servers
//! (`common/upstream.rs`) — what reaches the upstream, what reaches the client, keep-alive
//! reuse counted at the upstream, the balancing methods' distributions, unix sockets, WebSocket
//! upgrades, and every failure with nginx's status and error-log line.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use crate::common::client::{
    body_of, dechunk, exchange, exchange_text, get_close, head_and_body, request, status_of,
};
use crate::common::upstream::{Answer, Upstream};
use crate::common::*;

/// shoal with `http_extra` in the http block and `server` lines in the one server.
fn start(port: u16, http_extra: &str, server: &str) -> Shoal {
    let conf = format!(
        "daemon off;\nworker_processes 1;\nerror_log logs/error.log info;\n\
         events {{ worker_connections 1024; }}\n\
         http {{\n    access_log logs/access.log;\n{http_extra}\n    server {{\n        \
         listen 127.0.0.1:{port};\n        server_name localhost;\n{server}\n    }}\n}}\n"
    );
    Shoal::start(&conf, port)
}

/// shoal proxying `location /` to the upstream at `up_port` through `upstream ka { ...;
/// UPSTREAM }` with kept-alive connections (HTTP/1.1, `Connection ""`), and `location_extra`.
fn start_kept(port: u16, up_port: u16, upstream: &str, location_extra: &str) -> Shoal {
    start(
        port,
        &format!("upstream ka {{ server 127.0.0.1:{up_port}; {upstream} }}"),
        &format!(
            "location / {{ proxy_pass http://ka; proxy_http_version 1.1; \
             proxy_set_header Connection \"\"; {location_extra} }}"
        ),
    )
}

#[test]
fn the_request_goes_upstream_as_nginx_writes_it() {
    let up = Upstream::echo();
    let port = free_port();
    let s = start(
        port,
        "",
        &format!("location / {{ proxy_pass {}; }}", up.url()),
    );
    let resp = exchange_text(
        port,
        "GET /a/b?x=1 HTTP/1.1\r\nHost: localhost\r\nX-Custom: v\r\nKeep-Alive: 300\r\n\
         TE: trailers\r\nUpgrade: foo\r\nConnection: close\r\n\r\n",
    );
    assert_eq!(status_of(&resp), 200, "{resp}");
    let seen = up.last();
    assert_eq!(seen.method, "GET");
    assert_eq!(seen.target, "/a/b?x=1");
    assert_eq!(seen.version, "HTTP/1.0");
    // nginx's defaults first, then the client's headers minus the hop-by-hop ones.
    assert_eq!(
        seen.header_names(),
        vec!["Host", "Connection", "X-Custom"],
        "{:?}",
        seen.headers
    );
    assert_eq!(
        seen.header("host"),
        Some(&*format!("127.0.0.1:{}", up.port()))
    );
    assert_eq!(seen.header("connection"), Some("close"));
    // The answer: the upstream's headers, shoal's Server and Date.
    assert!(resp.contains("Server: shoal"), "{resp}");
    assert!(resp.contains("Content-Type: text/plain\r\n"), "{resp}");
    assert!(
        body_of(&resp).starts_with("GET /a/b?x=1 HTTP/1.0\r\n"),
        "{resp}"
    );
    drop(s);
}

#[test]
fn a_uri_part_replaces_the_location_prefix_and_set_header_applies() {
    let up = Upstream::echo();
    let port = free_port();
    let _s = start(
        port,
        "",
        &format!(
            "location /one/ {{ proxy_pass {}/two/; proxy_set_header X-Real-IP $remote_addr; \
             proxy_set_header Host backend.example; proxy_set_header Accept \"\"; }}\n\
             location /keep/ {{ proxy_pass {}; }}",
            up.url(),
            up.url()
        ),
    );
    let resp = exchange_text(
        port,
        "GET /one/x%20y?q=1 HTTP/1.1\r\nHost: localhost\r\nAccept: */*\r\nConnection: close\r\n\r\n",
    );
    assert_eq!(status_of(&resp), 200, "{resp}");
    let seen = up.last();
    assert_eq!(seen.target, "/two/x%20y?q=1");
    assert_eq!(seen.header("host"), Some("backend.example"));
    assert_eq!(seen.header("x-real-ip"), Some("127.0.0.1"));
    assert_eq!(
        seen.header("accept"),
        None,
        "an empty value drops the header"
    );
    // Without a URI part the client's URI goes as it was sent, escapes and dots included.
    let resp = get_close(port, "/keep/a%2Fb/./c");
    assert_eq!(status_of(&resp), 200, "{resp}");
    assert_eq!(up.last().target, "/keep/a%2Fb/./c");
}

#[test]
fn request_bodies_reach_the_upstream_whole() {
    let up = Upstream::echo();
    let port = free_port();
    let _s = start(
        port,
        "",
        &format!(
            "client_max_body_size 10m;\nlocation / {{ proxy_pass {}; }}",
            up.url()
        ),
    );
    // Small (memory), large (spilled to a temp file), and chunked from the client.
    for size in [10usize, 200_000] {
        let body: String = (0..size).map(|i| (b'a' + (i % 26) as u8) as char).collect();
        let resp = exchange_text(
            port,
            &format!(
                "POST /p HTTP/1.1\r\nHost: localhost\r\nContent-Length: {size}\r\n\
                 Connection: close\r\n\r\n{body}"
            ),
        );
        assert_eq!(
            status_of(&resp),
            200,
            "{size}: {}",
            &resp[..resp.len().min(300)]
        );
        let seen = up.last();
        assert_eq!(seen.header("content-length"), Some(&*size.to_string()));
        assert_eq!(seen.body.len(), size);
        assert_eq!(seen.body, body.as_bytes());
    }
    let resp = exchange_text(
        port,
        "POST /c HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: chunked\r\n\
         Connection: close\r\n\r\n5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n",
    );
    assert_eq!(status_of(&resp), 200, "{resp}");
    let seen = up.last();
    assert!(!seen.chunked, "the body is passed with a length once read");
    assert_eq!(seen.header("content-length"), Some("11"));
    assert_eq!(seen.body, b"hello world");
}

#[test]
fn keepalive_connections_are_reused_and_counted_at_the_upstream() {
    let up = Upstream::hello("hi");
    let plain = Upstream::hello("hi");
    let port = free_port();
    let _s = start(
        port,
        &format!(
            "upstream kept {{ server 127.0.0.1:{}; keepalive 4; }}\n\
             upstream plain {{ server 127.0.0.1:{}; }}",
            up.port(),
            plain.port()
        ),
        "location /k { proxy_pass http://kept; proxy_http_version 1.1; \
         proxy_set_header Connection \"\"; }\n\
         location /p { proxy_pass http://plain; }",
    );
    let mut c = Client::connect(port);
    for _ in 0..20 {
        let r = c.get("/k").unwrap();
        assert_eq!(r.status, 200);
        assert_eq!(r.body, b"hi");
        let r = c.get("/p").unwrap();
        assert_eq!(r.status, 200);
    }
    assert_eq!(up.request_count(), 20);
    assert_eq!(
        up.accepted(),
        1,
        "one upstream connection carried every request"
    );
    assert_eq!(
        plain.accepted(),
        20,
        "without keepalive, a connection per request"
    );
    assert!(up.requests().iter().all(|r| r.version == "HTTP/1.1"));
}

#[test]
fn an_upstream_connection_idle_past_keepalive_timeout_is_not_reused() {
    let up = Upstream::hello("hi");
    let port = free_port();
    let _s = start_kept(port, up.port(), "keepalive 4; keepalive_timeout 1s;", "");
    let mut c = Client::connect(port);
    assert_eq!(c.get("/").unwrap().status, 200);
    assert_eq!(c.get("/").unwrap().status, 200);
    assert_eq!(up.accepted(), 1, "reused while fresh");
    std::thread::sleep(Duration::from_millis(1500));
    assert_eq!(c.get("/").unwrap().status, 200);
    assert_eq!(up.accepted(), 2, "idle 1.5 s: closed, a new one made");
    assert_eq!(c.get("/").unwrap().status, 200);
    assert_eq!(up.accepted(), 2);
}

#[test]
fn a_burst_over_keepalive_n_leaves_the_n_most_recent_connections() {
    // Three requests at once on `keepalive 1`: each holds an upstream connection until all
    // three reached the upstream. Once their answers are out, the cache keeps one (the cache
    // is trimmed at the end of the worker's turn, not at each return) and closes two; the next
    // request takes the kept one.
    let arrived = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let seen = arrived.clone();
    let up = Upstream::start(move |_| {
        seen.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        wait_for("three requests at the upstream at once", || {
            (seen.load(std::sync::atomic::Ordering::SeqCst) >= 3).then_some(())
        });
        Answer::ok("burst")
    });
    let port = free_port();
    let _s = start_kept(port, up.port(), "keepalive 1;", "");
    let clients: Vec<_> = (0..3)
        .map(|_| {
            std::thread::spawn(move || {
                let r = Client::connect(port).get("/").unwrap();
                (r.status, r.body)
            })
        })
        .collect();
    for c in clients {
        assert_eq!(c.join().unwrap(), (200, b"burst".to_vec()));
    }
    assert_eq!(up.accepted(), 3);
    up.wait_open(1);
    let r = Client::connect(port).get("/").unwrap();
    assert_eq!((r.status, &r.body[..]), (200, &b"burst"[..]));
    assert_eq!(
        up.accepted(),
        3,
        "the kept connection carried the next request"
    );
    assert_eq!(arrived.load(std::sync::atomic::Ordering::SeqCst), 4);
}

#[test]
fn chunked_and_close_delimited_answers_are_relayed_whole() {
    let big: String = "0123456789".repeat(10_000);
    let b1 = big.clone();
    let up = Upstream::start(move |r| match r.target.as_str() {
        "/chunked" => Answer::ok(b1.clone()).chunked(&[1, 7, 4096]),
        "/close" => Answer::ok(b1.clone()).close_delimited(),
        "/204" => Answer::status(204),
        _ => Answer::ok("x"),
    });
    let port = free_port();
    let _s = start(
        port,
        "",
        &format!("location / {{ proxy_pass {}; }}", up.url()),
    );
    for path in ["/chunked", "/close"] {
        let resp = get_close(port, path);
        assert_eq!(status_of(&resp), 200, "{path}");
        assert!(resp.contains("Transfer-Encoding: chunked\r\n"), "{path}");
        assert_eq!(
            dechunk(body_of(&resp)).as_deref(),
            Some(big.as_bytes()),
            "{path}"
        );
        // An HTTP/1.0 client: the body ends with the connection.
        let resp = exchange_text(port, &format!("GET {path} HTTP/1.0\r\n\r\n"));
        assert_eq!(status_of(&resp), 200, "{path}");
        assert!(!resp.contains("Transfer-Encoding"), "{path}");
        assert_eq!(body_of(&resp), big, "{path}");
    }
    let resp = get_close(port, "/204");
    assert_eq!(status_of(&resp), 204);
    assert_eq!(body_of(&resp), "");
}

#[test]
fn a_cut_short_answer_closes_the_client_connection() {
    let up = Upstream::start(|r| match r.target.as_str() {
        "/short" => Answer::ok("only this").cut_short(100),
        "/shortchunk" => {
            Answer::raw("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n")
                .close()
        }
        _ => Answer::ok("x"),
    });
    let port = free_port();
    let s = start(
        port,
        "",
        &format!("location / {{ proxy_pass {}; }}", up.url()),
    );
    let resp = get_close(port, "/short");
    assert!(resp.contains("Content-Length: 100\r\n"), "{resp}");
    assert_eq!(body_of(&resp), "only this", "sent what came, then closed");
    let resp = exchange_text(port, "GET /shortchunk HTTP/1.1\r\nHost: localhost\r\n\r\n");
    assert!(resp.contains("Transfer-Encoding: chunked"), "{resp}");
    assert!(
        !body_of(&resp).contains("0\r\n\r\n"),
        "never the last chunk of a body that did not end: {resp}"
    );
    s.wait_log(
        "upstream prematurely closed connection while reading upstream",
        2,
    );
}

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
fn proxy_read_timeout_bounds_each_wait_on_a_kept_alive_connection() {
    // A kept-alive connection keeps one timer for its life: each wait for an answer is still
    // bounded from its own start, not from an earlier request's.
    let up = Upstream::start(|r| match r.target.as_str() {
        "/late" => Answer::ok("late").delay_head(Duration::from_millis(1200)),
        "/trickle" => Answer::ok("trickled").delay_body(3, Duration::from_millis(1200)),
        "/silent" => Answer::ok("never").delay_head(Duration::from_secs(6)),
        _ => Answer::ok("fast"),
    });
    let port = free_port();
    let s = start_kept(port, up.port(), "keepalive 2;", "proxy_read_timeout 2s;");
    let mut c = Client::connect(port);
    let r = c.get("/fast").unwrap();
    assert_eq!((r.status, &r.body[..]), (200, &b"fast"[..]));
    // 2.4 s after the first wait began, 1.2 s into this one.
    std::thread::sleep(Duration::from_millis(1200));
    let r = c.get("/late").unwrap();
    assert_eq!((r.status, &r.body[..]), (200, &b"late"[..]));
    std::thread::sleep(Duration::from_millis(1200));
    // The body's second piece 1.2 s after its first: within the limit between two reads.
    let r = c.get("/trickle").unwrap();
    assert_eq!((r.status, &r.body[..]), (200, &b"trickled"[..]));
    assert_eq!(up.accepted(), 1, "one upstream connection carried them all");
    let start = std::time::Instant::now();
    let r = c.get("/silent").unwrap();
    assert_eq!(r.status, 504);
    assert!(
        start.elapsed() >= Duration::from_secs(2),
        "{:?}",
        start.elapsed()
    );
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
fn next_upstream_skips_a_dead_peer_and_max_fails_takes_it_out() {
    let live = Upstream::hello("live");
    let dead = free_port();
    let port = free_port();
    let s = start(
        port,
        &format!(
            "upstream pair {{ server 127.0.0.1:{dead} max_fails=1 fail_timeout=30s; \
             server 127.0.0.1:{}; }}",
            live.port()
        ),
        "location / { proxy_pass http://pair; }",
    );
    for _ in 0..10 {
        let resp = get_close(port, "/");
        assert_eq!(status_of(&resp), 200, "{resp}");
        assert_eq!(body_of(&resp), "live");
    }
    // The dead peer failed once, then was out for fail_timeout: one refusal logged.
    let log = s.error_log();
    assert_eq!(log.matches("connect() failed (111").count(), 1, "{log}");
    assert_eq!(live.request_count(), 10);
}

#[test]
fn a_zone_shares_a_dead_peer_s_failure_between_workers() {
    let live = Upstream::hello("live");
    let dead = free_port();
    let port = free_port();
    // Four workers on `reuseport` sockets: the kernel spreads the connections over them.
    let conf = format!(
        "daemon off;\nworker_processes 4;\nerror_log logs/error.log info;\n\
         events {{ worker_connections 1024; }}\n\
         http {{\n    access_log off;\n    \
         upstream pair {{ zone pair 64k; server 127.0.0.1:{dead} max_fails=1 fail_timeout=30s; \
         server 127.0.0.1:{}; }}\n    \
         server {{\n        listen 127.0.0.1:{port} reuseport;\n        \
         location / {{ proxy_pass http://pair; }}\n    }}\n}}\n",
        live.port()
    );
    let s = Shoal::start(&conf, port);
    for _ in 0..40 {
        let resp = get_close(port, "/");
        assert_eq!(status_of(&resp), 200, "{resp}");
    }
    // One worker met the dead peer; the others knew it from the zone.
    let log = s.error_log();
    assert_eq!(log.matches("connect() failed (111").count(), 1, "{log}");
    assert_eq!(live.request_count(), 40);
}

#[test]
fn weighted_round_robin_and_hashes_distribute_as_nginx() {
    let a = Upstream::hello("a");
    let b = Upstream::hello("b");
    let port = free_port();
    let _s = start(
        port,
        &format!(
            "upstream wrr {{ server 127.0.0.1:{pa} weight=3; server 127.0.0.1:{pb}; }}\n\
             upstream iph {{ ip_hash; server 127.0.0.1:{pa}; server 127.0.0.1:{pb}; }}\n\
             upstream key {{ hash $arg_k consistent; server 127.0.0.1:{pa}; server 127.0.0.1:{pb}; }}\n\
             upstream lc {{ least_conn; server 127.0.0.1:{pa}; server 127.0.0.1:{pb}; }}",
            pa = a.port(),
            pb = b.port()
        ),
        "location /wrr { proxy_pass http://wrr; }\n\
         location /iph { proxy_pass http://iph; }\n\
         location /key { proxy_pass http://key; }\n\
         location /lc { proxy_pass http://lc; }",
    );
    let mut c = Client::connect(port);
    let mut seq = String::new();
    for _ in 0..8 {
        seq.push_str(std::str::from_utf8(&c.get("/wrr").unwrap().body).unwrap());
    }
    // nginx's smooth weighted round robin for weights 3:1.
    assert_eq!(seq, "aabaaaba");
    let first = c.get("/iph").unwrap().body;
    for _ in 0..10 {
        assert_eq!(
            c.get("/iph").unwrap().body,
            first,
            "ip_hash keeps a client on one peer"
        );
    }
    let mut seen = std::collections::HashSet::new();
    for k in 0..40 {
        let one = c.get(&format!("/key?k={k}")).unwrap().body;
        assert_eq!(
            c.get(&format!("/key?k={k}")).unwrap().body,
            one,
            "same key, same peer"
        );
        seen.insert(one);
    }
    assert_eq!(seen.len(), 2, "40 keys land on both peers");
    // least_conn with no concurrency alternates like round robin.
    let x = c.get("/lc").unwrap().body;
    let y = c.get("/lc").unwrap().body;
    assert_ne!(x, y);
}

#[test]
fn unix_socket_upstream() {
    let dir = tempfile::tempdir().unwrap();
    let sock = dir.path().join("app.sock");
    let up = Upstream::start_unix(&sock, |r| Answer::ok(format!("unix {}", r.target)));
    let port = free_port();
    let _s = start(
        port,
        &format!("upstream app {{ server unix:{}; }}", sock.display()),
        &format!(
            "location /u {{ proxy_pass http://app; }}\nlocation /d {{ proxy_pass {}; }}",
            up.url()
        ),
    );
    let resp = get_close(port, "/u/1");
    assert_eq!(body_of(&resp), "unix /u/1", "{resp}");
    let resp = get_close(port, "/d/2");
    assert_eq!(body_of(&resp), "unix /d/2", "{resp}");
}

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
fn head_requests_and_intercepted_errors() {
    let up = Upstream::start(|r| match r.target.as_str() {
        "/missing" => Answer::status(404).body("upstream's own 404"),
        _ => Answer::ok("0123456789"),
    });
    let port = free_port();
    let _s = start(
        port,
        "",
        &format!(
            "location / {{ proxy_pass {u}; }}\n\
             location /i/ {{ proxy_pass {u}/; proxy_intercept_errors on; error_page 404 =200 /fallback; }}\n\
             location = /fallback {{ return 200 \"fallback\"; }}",
            u = up.url()
        ),
    );
    let mut c = Client::connect(port);
    c.send(b"HEAD /h HTTP/1.1\r\nHost: localhost\r\n\r\n")
        .unwrap();
    let r = c.read_head().unwrap();
    assert_eq!(r.status, 200);
    assert_eq!(r.header("content-length"), Some("10"));
    assert_eq!(up.last().method, "HEAD");
    // The connection goes on after a HEAD answer.
    let r = c.get("/missing").unwrap();
    assert_eq!(r.status, 404);
    assert_eq!(
        r.body, b"upstream's own 404",
        "not intercepted: passed as it is"
    );
    let r = c.get("/i/missing").unwrap();
    assert_eq!(r.status, 200);
    assert_eq!(r.body, b"fallback");
}

#[test]
fn upstream_variables_in_the_access_log_and_redirects() {
    let up = Upstream::start(|_| Answer::ok("body").header("X-Thing", "t1"));
    // The second upstream redirects to its own address, which it learns once started.
    let own = std::sync::Arc::new(std::sync::atomic::AtomicU16::new(0));
    let own2 = own.clone();
    let up2 = Upstream::start(move |_| {
        let p = own2.load(std::sync::atomic::Ordering::SeqCst);
        Answer::status(302).header("Location", &format!("http://127.0.0.1:{p}/two/next"))
    });
    own.store(up2.port(), std::sync::atomic::Ordering::SeqCst);
    let port = free_port();
    let s = start(
        port,
        "log_format up '$upstream_addr|$upstream_status|$upstream_http_x_thing|$proxy_host';",
        &format!(
            "access_log logs/up.log up;\n\
             location /one/ {{ proxy_pass {}/two/; }}\n\
             location /r/ {{ proxy_pass {}/two/; }}",
            up.url(),
            up2.url()
        ),
    );
    let resp = get_close(port, "/one/x");
    assert_eq!(status_of(&resp), 200);
    let resp = get_close(port, "/r/r");
    assert_eq!(status_of(&resp), 302);
    // `proxy_redirect default`: the proxy_pass URL becomes the location, made absolute.
    assert!(
        resp.contains(&format!("Location: http://localhost:{port}/r/next\r\n")),
        "{resp}"
    );
    let log = wait_for("two log lines", || {
        let l = s.prefix.read("logs/up.log");
        (l.lines().count() >= 2).then_some(l)
    });
    let first = log.lines().next().unwrap();
    assert_eq!(
        first,
        format!("127.0.0.1:{p}|200|t1|127.0.0.1:{p}", p = up.port())
    );
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

/// `gzip -dc` of `data` (the root package has no flate2).
fn gunzip(data: &[u8]) -> Vec<u8> {
    use std::process::{Command, Stdio};
    let mut child = Command::new("gzip")
        .arg("-dc")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("running gzip -dc");
    let mut stdin = child.stdin.take().unwrap();
    let data = data.to_vec();
    let writer = std::thread::spawn(move || {
        let _ = stdin.write_all(&data);
    });
    let out = child.wait_with_output().expect("gzip -dc output");
    writer.join().unwrap();
    assert!(out.status.success(), "gzip -dc failed");
    out.stdout
}

#[test]
fn proxied_answers_are_gzipped_as_gzip_proxied_allows() {
    let json: String = (0..200)
        .map(|i| format!("{{\"id\":{i},\"name\":\"item {i}\"}},"))
        .collect();
    let j = json.clone();
    let up = Upstream::start(move |r| {
        let a = Answer::ok(j.clone()).header("Content-Type", "application/json");
        if r.target.contains("chunked") {
            a.chunked(&[100, 1000])
        } else if r.target.contains("private") {
            a.header("Cache-Control", "private")
        } else if r.target.contains("nostore") {
            a.header("Cache-Control", "no-store")
        } else {
            a
        }
    });
    let port = free_port();
    let _s = start(
        port,
        "gzip on; gzip_types application/json; gzip_proxied private; gzip_vary on;",
        &format!("location / {{ proxy_pass {}; }}", up.url()),
    );
    let ask = |path: &str, via: bool| {
        let via = if via { "Via: 1.1 proxy\r\n" } else { "" };
        let headers = format!("Accept-Encoding: gzip\r\n{via}Connection: close\r\n");
        head_and_body(&exchange(port, &request("GET", path, &headers)))
    };
    for path in ["/plain", "/chunked"] {
        let (head, body) = ask(path, false);
        assert!(head.contains("Content-Encoding: gzip"), "{path}: {head}");
        assert!(!head.contains("Content-Length"), "{path}: {head}");
        assert!(head.contains("Vary: Accept-Encoding"), "{path}: {head}");
        assert_eq!(
            gunzip(&dechunk(&body).expect("chunked framing")),
            json.as_bytes(),
            "{path}"
        );
    }
    // Through another proxy (`Via`): only what `gzip_proxied private` allows.
    let (head, body) = ask("/private", true);
    assert!(head.contains("Content-Encoding: gzip"), "{head}");
    assert_eq!(
        gunzip(&dechunk(&body).expect("chunked framing")),
        json.as_bytes()
    );
    // A Cache-Control that `private` does not name: not compressed (nginx's order: with no
    // Cache-Control and no Expires at all it would be).
    let (head, body) = ask("/nostore", true);
    assert!(!head.contains("Content-Encoding"), "{head}");
    assert_eq!(body, json.as_bytes());
}

#[test]
fn a_kept_alive_connection_the_upstream_closed_is_not_an_error() {
    // Each answer says nothing against keep-alive, then the upstream closes the connection:
    // the cached connection is dead when the next request comes. Some are dropped when the
    // close is seen first; the others fail before any answer byte and are sent again on a new
    // connection. Either way every client request succeeds and nothing is logged as an error.
    let up =
        Upstream::start(|_| Answer::raw("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok").close());
    let port = free_port();
    let s = start_kept(port, up.port(), "keepalive 4;", "");
    let mut c = Client::connect(port);
    for i in 0..20 {
        let r = c.get("/").unwrap();
        assert_eq!(r.status, 200, "request {i}");
        assert_eq!(r.body, b"ok");
        if i % 2 == 0 {
            // Give the close time to arrive before the next request, half of the time.
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    assert_eq!(
        up.request_count(),
        20,
        "each request reached the upstream once"
    );
    assert!(!s.error_log().contains("[error]"), "{}", s.error_log());
}

/// A client that asks for `path` and reads only the answer's head for now.
fn slow_client(port: u16, path: &str) -> TcpStream {
    let mut slow = TcpStream::connect(("127.0.0.1", port)).unwrap();
    slow.set_read_timeout(Some(WAIT)).unwrap();
    slow.write_all(format!("GET {path} HTTP/1.1\r\nHost: localhost\r\n\r\n").as_bytes())
        .unwrap();
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        slow.read_exact(&mut byte).unwrap();
        head.push(byte[0]);
    }
    slow
}

#[test]
fn proxy_buffering_frees_the_upstream_while_a_slow_client_reads() {
    // 16 MiB: more than the sockets between them can hold, so the rest waits in shoal (memory,
    // then the temporary file) or, without buffering, in the upstream.
    const SIZE: usize = 16 << 20;
    let body: Vec<u8> = (0..SIZE).map(|i| (i % 251) as u8).collect();
    let b = body.clone();
    let up = Upstream::start(move |_| Answer::ok(b.clone()));
    let port = free_port();
    let tmp = tempfile::tempdir().unwrap();
    let _s = start(
        port,
        &format!("proxy_temp_path {};", tmp.path().display()),
        &format!(
            "location /on/ {{ proxy_pass {u}/; }}
             location /off/ {{ proxy_pass {u}/; proxy_buffering off; }}
             location /nofile/ {{ proxy_pass {u}/; proxy_max_temp_file_size 0; }}",
            u = up.url()
        ),
    );
    for (prefix, frees) in [("/on/", true), ("/off/", false), ("/nofile/", false)] {
        let mut slow = slow_client(port, &format!("{prefix}big"));
        if frees {
            // The whole answer leaves the upstream, whose connection (no keepalive) closes,
            // while the client has read nothing of the body yet.
            wait_for("the upstream connection closed", || {
                (up.open() == 0).then_some(())
            });
        } else {
            // 16 MiB cannot all be in flight: the upstream is still writing.
            assert_eq!(up.open(), 1, "{prefix}: the upstream waits for the client");
        }
        // The slow client now reads everything, intact.
        let mut got = vec![0u8; SIZE];
        slow.read_exact(&mut got).unwrap();
        assert!(got == body, "{prefix}: the body arrived intact");
        wait_for("the upstream connection closed", || {
            (up.open() == 0).then_some(())
        });
    }
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

#[test]
fn a_post_is_never_sent_twice_on_a_dead_kept_alive_connection() {
    // The upstream reads the second request of each connection and closes without a word.
    let up = Upstream::start(|r| {
        if r.seq >= 2 {
            Answer::hang_up()
        } else {
            Answer::ok("first")
        }
    });
    let port = free_port();
    let _s = start_kept(port, up.port(), "keepalive 2;", "");
    let mut c = Client::connect(port);
    assert_eq!(c.get("/warm").unwrap().status, 200);
    c.send(b"POST /once HTTP/1.1\r\nHost: localhost\r\nContent-Length: 3\r\n\r\nabc")
        .unwrap();
    let r = c.read_response().unwrap();
    assert_eq!(
        r.status, 502,
        "nginx answers 502 rather than sending the POST again"
    );
    let posts = up.requests().iter().filter(|r| r.method == "POST").count();
    assert_eq!(posts, 1, "the upstream saw the POST once");
    // A GET in the same situation is sent again on a new connection.
    let r = c.get("/warm2").unwrap();
    assert_eq!(r.status, 200);
    let r = c.get("/again").unwrap();
    assert_eq!(
        r.status, 200,
        "an idempotent request is retried on a fresh connection"
    );
}

#[test]
fn no_live_upstreams_is_502_even_after_a_timeout() {
    let a = Upstream::start(|_| Answer::ok("late").delay_head(Duration::from_secs(3)));
    let b = Upstream::start(|_| Answer::ok("late").delay_head(Duration::from_secs(3)));
    let port = free_port();
    let s = start(
        port,
        &format!(
            "upstream two {{ server 127.0.0.1:{} max_fails=1 fail_timeout=30s; \
             server 127.0.0.1:{} max_fails=1 fail_timeout=30s; }}",
            a.port(),
            b.port()
        ),
        "location / { proxy_pass http://two; proxy_read_timeout 300ms; }",
    );
    // Both peers time out (and are out for 30 s): 504.
    let r = get_close(port, "/first");
    assert_eq!(status_of(&r), 504, "{r}");
    // Now none is live: nginx's 502, whatever failed before.
    let r = get_close(port, "/second");
    assert_eq!(status_of(&r), 502, "{r}");
    s.wait_log("no live upstreams while connecting to upstream", 1);
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

#[test]
fn proxy_request_buffering_off_streams_the_body_upstream() {
    let up = Upstream::echo();
    let port = free_port();
    let _s = start(
        port,
        "",
        &format!(
            "location /s/ {{ proxy_pass {u}; proxy_request_buffering off; proxy_http_version 1.1; }}\n\
             location /b/ {{ proxy_pass {u}; }}",
            u = up.url()
        ),
    );
    // Half a body: streamed, the upstream is contacted before the rest comes; buffered, not.
    for (prefix, streams) in [("/b/", false), ("/s/", true)] {
        let before = up.accepted();
        let mut c = TcpStream::connect(("127.0.0.1", port)).unwrap();
        c.set_read_timeout(Some(WAIT)).unwrap();
        c.write_all(
            format!(
                "POST {prefix}x HTTP/1.1\r\nHost: localhost\r\nContent-Length: 10\r\n\r\nhello"
            )
            .as_bytes(),
        )
        .unwrap();
        if streams {
            wait_for("the upstream contacted mid-body", || {
                (up.accepted() > before).then_some(())
            });
        } else {
            // Give a buffering proxy every chance to connect early: it must not.
            std::thread::sleep(Duration::from_millis(200));
            assert_eq!(
                up.accepted(),
                before,
                "{prefix}: buffered until the body is in"
            );
        }
        c.write_all(b"world").unwrap();
        let mut out = Vec::new();
        let mut buf = [0u8; 4096];
        while !String::from_utf8_lossy(&out).contains("helloworld") {
            let n = c.read(&mut buf).unwrap();
            assert!(
                n > 0,
                "{prefix}: closed early: {}",
                String::from_utf8_lossy(&out)
            );
            out.extend_from_slice(&buf[..n]);
        }
        assert_eq!(up.last().body, b"helloworld", "{prefix}");
        assert_eq!(up.last().header("content-length"), Some("10"), "{prefix}");
    }
    // A chunked body to an HTTP/1.1 upstream goes chunked, as it comes.
    let r = exchange_text(
        port,
        "POST /s/c HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: chunked\r\n\
         Connection: close\r\n\r\n3\r\nabc\r\n4\r\ndefg\r\n0\r\n\r\n",
    );
    assert_eq!(status_of(&r), 200, "{r}");
    let seen = up.last();
    assert!(seen.chunked, "sent upstream chunked");
    assert_eq!(seen.body, b"abcdefg");
    // A keep-alive connection goes on after a streamed body.
    let mut c = Client::connect(port);
    c.send(b"POST /s/k HTTP/1.1\r\nHost: localhost\r\nContent-Length: 2\r\n\r\nok")
        .unwrap();
    assert_eq!(c.read_response().unwrap().status, 200);
    assert_eq!(c.get("/b/after").unwrap().status, 200);
}

#[test]
fn random_hash_and_backup_peers() {
    let a = Upstream::hello("a");
    let b = Upstream::hello("b");
    let dead = free_port();
    let port = free_port();
    let _s = start(
        port,
        &format!(
            "upstream rnd {{ random two least_conn; server 127.0.0.1:{pa}; server 127.0.0.1:{pb}; }}\n\
             upstream hs {{ hash $arg_k; server 127.0.0.1:{pa}; server 127.0.0.1:{pb}; }}\n\
             upstream bk {{ server 127.0.0.1:{dead}; server 127.0.0.1:{pb} backup; }}\n\
             upstream dn {{ server 127.0.0.1:{pa} down; server 127.0.0.1:{pb}; }}",
            pa = a.port(),
            pb = b.port()
        ),
        "location /rnd { proxy_pass http://rnd; }\n\
         location /hs { proxy_pass http://hs; }\n\
         location /bk { proxy_pass http://bk; }\n\
         location /dn { proxy_pass http://dn; }",
    );
    let mut c = Client::connect(port);
    let mut counts = std::collections::HashMap::new();
    for _ in 0..200 {
        *counts.entry(c.get("/rnd").unwrap().body).or_insert(0) += 1;
    }
    assert_eq!(
        counts.len(),
        2,
        "random spreads over both peers: {counts:?}"
    );
    assert!(
        counts.values().all(|&n| n >= 40),
        "roughly even: {counts:?}"
    );
    let mut seen = std::collections::HashSet::new();
    for k in 0..30 {
        let one = c.get(&format!("/hs?k=key{k}")).unwrap().body;
        for _ in 0..3 {
            assert_eq!(c.get(&format!("/hs?k=key{k}")).unwrap().body, one);
        }
        seen.insert(one);
    }
    assert_eq!(seen.len(), 2, "hash spreads 30 keys over both peers");
    // The primary refuses: the backup answers.
    for _ in 0..5 {
        assert_eq!(c.get("/bk").unwrap().body, b"b");
    }
    // A `down` peer is never chosen.
    for _ in 0..10 {
        assert_eq!(c.get("/dn").unwrap().body, b"b");
    }
    assert_eq!(a.requests().iter().filter(|r| r.target == "/dn").count(), 0);
}

#[test]
fn header_values_that_are_not_utf8_pass_byte_for_byte() {
    let up = Upstream::start(|_| {
        Answer::raw(
            &b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\
               Content-Disposition: attachment; filename=\"caf\xe9.txt\"\r\n\r\nok"[..],
        )
    });
    let port = free_port();
    let _s = start(
        port,
        "",
        &format!("location / {{ proxy_pass {}; }}", up.url()),
    );
    let out = exchange(
        port,
        b"GET /f HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n",
    );
    let want = b"Content-Disposition: attachment; filename=\"caf\xe9.txt\"\r\n";
    assert!(
        out.windows(want.len()).any(|w| w == want),
        "{}",
        String::from_utf8_lossy(&out)
    );
}

/// The completed-task count of pool `name` in the latest periodic report (debug level, every
/// 10 s) logged after `after` bytes of the error log.
fn pool_completed(s: &Shoal, name: &str, after: usize) -> Option<u64> {
    let log = s.error_log();
    let prefix = format!("thread pool \"{name}\" of worker 0: ");
    let line = log
        .get(after..)?
        .lines()
        .rev()
        .find(|l| l.contains(&prefix))?;
    let rest = &line[line.find(&prefix)? + prefix.len()..];
    // "Q queued, B busy, N completed, O overflows"
    rest.split(", ")
        .find_map(|part| part.strip_suffix(" completed"))
        .and_then(|n| n.parse().ok())
}

#[test]
fn aio_write_sends_the_temporary_file_through_the_pool() {
    // A slow client makes the answer spill to the temporary file. With `aio threads` and
    // `aio_write on` the file is written by the pool; without `aio_write` it is written on the
    // worker, and its pages being in memory, read back there too: that pool does nothing.
    const SIZE: usize = 16 << 20;
    let body: Vec<u8> = (0..SIZE).map(|i| (i % 253) as u8).collect();
    let b = body.clone();
    let up = Upstream::start(move |_| Answer::ok(b.clone()));
    let port = free_port();
    let tmp = tempfile::tempdir().unwrap();
    let conf = format!(
        "daemon off;\nworker_processes 1;\nerror_log logs/error.log debug;\n\
         thread_pool w threads=2;\nthread_pool r threads=2;\n\
         events {{ worker_connections 1024; }}\n\
         http {{\n    proxy_temp_path {tmp};\n    server {{\n        \
         listen 127.0.0.1:{port};\n        \
         location /w/ {{ proxy_pass {u}/; aio threads=w; aio_write on; }}\n        \
         location /r/ {{ proxy_pass {u}/; aio threads=r; }}\n    }}\n}}\n",
        tmp = tmp.path().display(),
        u = up.url()
    );
    let s = Shoal::start(&conf, port);
    for prefix in ["/w/", "/r/"] {
        let mut slow = slow_client(port, &format!("{prefix}big"));
        // The whole answer is in shoal (memory and the temporary file) before the client
        // reads any of the body.
        wait_for("the upstream connection closed", || {
            (up.open() == 0).then_some(())
        });
        let mut got = vec![0u8; SIZE];
        slow.read_exact(&mut got).unwrap();
        assert!(got == body, "{prefix}: the body arrived intact");
    }
    // The next periodic report after the transfers.
    let mark = s.error_log().len();
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    let (w, r) = loop {
        if let (Some(w), Some(r)) = (pool_completed(&s, "w", mark), pool_completed(&s, "r", mark)) {
            break (w, r);
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no pool report in 30 s: {}",
            s.error_log()
        );
        std::thread::sleep(Duration::from_millis(200));
    };
    assert!(
        w > 0,
        "the temporary file's writes went through pool w: {w} tasks"
    );
    assert_eq!(r, 0, "without aio_write, pool r had nothing to do");
}

#[test]
fn proxy_bind_is_the_source_address_of_a_new_upstream_connection() {
    // A plain listener: the test upstream does not say where a connection came from.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let up = listener.local_addr().unwrap().port();
    let seen = std::thread::spawn(move || {
        let (mut c, peer) = listener.accept().unwrap();
        c.set_read_timeout(Some(WAIT)).unwrap();
        let mut head = Vec::new();
        let mut byte = [0u8; 1];
        while !head.ends_with(b"\r\n\r\n") && c.read(&mut byte).unwrap_or(0) == 1 {
            head.push(byte[0]);
        }
        c.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok")
            .unwrap();
        (peer.ip(), String::from_utf8_lossy(&head).into_owned())
    });
    let port = free_port();
    let _s = start(
        port,
        "",
        &format!("location / {{ proxy_pass http://127.0.0.1:{up}; proxy_bind 127.0.0.2; }}"),
    );
    let resp = get_close(port, "/b?c");
    assert_eq!(status_of(&resp), 200, "{resp}");
    assert_eq!(body_of(&resp), "ok");
    let (ip, head) = seen.join().unwrap();
    assert_eq!(ip.to_string(), "127.0.0.2");
    assert!(head.starts_with("GET /b?c HTTP/1.0\r\n"), "{head}");
}
