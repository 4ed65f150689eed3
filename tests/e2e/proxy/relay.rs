//! What passes through the proxy: the request as nginx writes it upstream (URI parts, set
//! headers, bodies, bytes that are not UTF-8), the answers relayed back (chunked, close
//! delimited, cut short, HEAD, intercepted errors, gzipped), the upstream variables, unix
//! socket upstreams and `proxy_bind`.

use std::io::{Read, Write};

use crate::common::client::{
    body_of, dechunk, exchange, exchange_text, get_close, head_and_body, request, status_of,
};
use crate::common::upstream::{Answer, Upstream};
use crate::common::*;

use super::start;

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
