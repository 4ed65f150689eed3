//! HTTP/2 from real clients (curl's `--http2` over TLS with ALPN and `--http2-prior-knowledge`
//! for h2c, nghttp): the directives that turn it on, `$http2` and `$server_protocol`, the access
//! log's request line, and what works over HTTP/1 working over HTTP/2 too: static files with
//! ranges and 304, request bodies (with and without a length, `client_max_body_size`'s 413),
//! the proxy, its cache, gzip, rewrites and error pages; the obsolete directives' warnings, a
//! graceful stop that lets a stream finish. Frames written by hand are `h2_hostile.rs`'s.

use std::io::Write;
use std::process::{Command, Stdio};
use std::time::Duration;

use crate::common::tls::Pki;
use crate::common::upstream::{Answer, Upstream};
use crate::common::{free_port, wait_for, Prefix, Shoal};

/// curl's answer: status, headers (lowercase names), body; curl's exit code.
pub struct Got {
    pub code: i32,
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Got {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
}

/// Runs curl with `args` (and `input` on its standard input), reading the head it dumps.
pub fn curl_in(args: &[&str], input: Option<&[u8]>) -> Got {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let head = dir.path().join("head");
    let mut child = Command::new("curl")
        .args(["-sS", "--max-time", "20", "-D"])
        .arg(&head)
        .args(args)
        .stdin(if input.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("curl (apt-get install curl)");
    if let Some(data) = input {
        // (curl may stop reading once it has an answer: a refused body.)
        let mut stdin = child.stdin.take().expect("curl's stdin");
        let _ = stdin.write_all(data);
    }
    let out = child.wait_with_output().expect("curl's output");
    let text = std::fs::read_to_string(&head).unwrap_or_default();
    // The last head (after a 100 Continue, say).
    let last = text
        .rsplit("\r\n\r\n")
        .find(|h| !h.is_empty())
        .unwrap_or("");
    let mut lines = last.lines();
    let status = lines
        .next()
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let headers = lines
        .filter_map(|l| l.split_once(": "))
        .map(|(n, v)| (n.to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    Got {
        code: out.status.code().unwrap_or(-1),
        status,
        headers,
        body: out.stdout,
    }
}

/// The status nghttp reads for `data` sent to `url` (no length told, as from a pipe).
pub fn nghttp_status(url: &str, data: &[u8]) -> Option<u16> {
    let mut child = Command::new("nghttp")
        .args(["-v", "-d", "-", url])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("nghttp (apt-get install nghttp2-client)");
    let mut stdin = child.stdin.take().expect("nghttp's stdin");
    let _ = stdin.write_all(data);
    drop(stdin);
    let out = child.wait_with_output().expect("nghttp's output");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    text.lines()
        .find_map(|l| {
            l.split_once(":status: ")
                .map(|(_, s)| s.trim().parse().ok())
        })
        .flatten()
}

pub fn curl(args: &[&str]) -> Got {
    curl_in(args, None)
}

/// An h2c request with prior knowledge.
pub fn h2c(port: u16, path: &str, extra: &[&str]) -> Got {
    let url = format!("http://127.0.0.1:{port}{path}");
    let mut args = vec!["--http2-prior-knowledge"];
    args.extend_from_slice(extra);
    args.push(&url);
    curl(&args)
}

/// A configuration with one server on `port` (`http2 on`) and `server` inside it.
pub fn conf(port: u16, http: &str, server: &str) -> String {
    format!(
        "daemon off;\nerror_log logs/error.log info;\nevents {{ }}\n\
         http {{\n    include mime.types;\n    access_log logs/access.log;\n{http}\n\
         server {{\n        listen 127.0.0.1:{port};\n        http2 on;\n        root html;\n\
         {server}\n    }}\n}}\n"
    )
}

#[test]
fn h2c_with_prior_knowledge_and_http1_share_a_port() {
    let port = free_port();
    let s = Shoal::start(
        &conf(
            port,
            "",
            "location /v { return 200 \"[$http2] $server_protocol $request\\n\"; }",
        ),
        port,
    );
    let got = h2c(port, "/v", &[]);
    assert_eq!(got.code, 0);
    assert_eq!(got.text(), "[h2c] HTTP/2.0 GET /v HTTP/2.0\n");
    // The same port, HTTP/1.1 (no preface): `$http2` empty.
    let got = curl(&["--http1.1", &format!("http://127.0.0.1:{port}/v")]);
    assert_eq!(got.text(), "[] HTTP/1.1 GET /v HTTP/1.1\n");
    // (A request's line is logged once its answer is out: the client may read the answer
    // first.)
    wait_for("both requests in the access log", || {
        let log = s.prefix.read("logs/access.log");
        (log.contains("\"GET /v HTTP/2.0\" 200 ") && log.contains("\"GET /v HTTP/1.1\" 200 "))
            .then_some(())
    });
}

#[test]
fn without_http2_a_preface_is_an_http1_request() {
    let port = free_port();
    let text = conf(port, "", "location / { return 200 ok; }").replace("http2 on;", "");
    let _s = Shoal::start(&text, port);
    let got = h2c(port, "/", &[]);
    assert_ne!(got.code, 0, "h2c answered without http2 on");
}

#[test]
fn alpn_h2_over_tls_and_the_listen_parameter_s_warning() {
    let port = free_port();
    let pki = Pki::new();
    pki.self_signed("localhost");
    let text = format!(
        "daemon off;\nerror_log logs/error.log info;\nevents {{ }}\nhttp {{\n\
         server {{\n listen 127.0.0.1:{port} ssl http2;\n {}\n\
         location / {{ return 200 \"[$http2] $server_protocol $ssl_alpn_protocol\\n\"; }}\n }}\n}}\n",
        pki.ssl_lines("localhost")
    );
    let s = Shoal::start(&text, port);
    assert!(
        s.stderr().contains(
            "[warn] the \"listen ... http2\" directive is deprecated, use the \"http2\" directive instead in "
        ),
        "{}",
        s.stderr()
    );
    let url = format!("https://127.0.0.1:{port}/");
    let got = curl(&["-k", "--http2", &url]);
    assert_eq!(got.text(), "[h2] HTTP/2.0 h2\n");
    let got = curl(&["-k", "--http1.1", &url]);
    assert_eq!(got.text(), "[] HTTP/1.1 http/1.1\n");
}

#[test]
fn http2_on_in_a_tls_server_offers_h2() {
    let port = free_port();
    let pki = Pki::new();
    pki.self_signed("localhost");
    let text = format!(
        "daemon off;\nerror_log logs/error.log info;\nevents {{ }}\nhttp {{\n http2 on;\n\
         server {{\n listen 127.0.0.1:{port} ssl;\n {}\n\
         location / {{ return 200 \"[$http2]\\n\"; }}\n }}\n}}\n",
        pki.ssl_lines("localhost")
    );
    let s = Shoal::start(&text, port);
    assert!(!s.stderr().contains("deprecated"), "{}", s.stderr());
    let got = curl(&["-k", "--http2", &format!("https://127.0.0.1:{port}/")]);
    assert_eq!(got.text(), "[h2]\n");
    // `http2 off`: ALPN offers HTTP/1.1 only.
    let port2 = free_port();
    let off = text
        .replace("http2 on;", "http2 off;")
        .replace(&port.to_string(), &port2.to_string());
    let _s2 = Shoal::start(&off, port2);
    let got = curl(&["-k", "--http2", &format!("https://127.0.0.1:{port2}/")]);
    assert_eq!(got.text(), "[]\n");
}

#[test]
fn static_files_ranges_and_304_over_h2() {
    let port = free_port();
    let prefix = Prefix::new();
    let big: Vec<u8> = (0..700_000u32).map(|i| (i * 7 % 251) as u8).collect();
    std::fs::write(prefix.join("html/big.bin"), &big).unwrap();
    let s = Shoal::start_in(prefix, &conf(port, "", ""), port, &[]);
    let got = h2c(port, "/big.bin", &[]);
    assert_eq!(got.status, 200);
    assert_eq!(got.body, big);
    assert_eq!(got.header("content-length"), Some("700000"));
    let got = h2c(port, "/big.bin", &["-r", "100-199"]);
    assert_eq!(got.status, 206);
    assert_eq!(got.body, &big[100..200]);
    assert_eq!(got.header("content-range"), Some("bytes 100-199/700000"));
    let lm = h2c(port, "/index.html", &[])
        .header("last-modified")
        .expect("a Last-Modified")
        .to_string();
    let got = h2c(
        port,
        "/index.html",
        &["-H", &format!("If-Modified-Since: {lm}")],
    );
    assert_eq!(got.status, 304);
    assert!(got.body.is_empty());
    let got = h2c(port, "/index.html", &["-I"]);
    assert_eq!(got.status, 200);
    assert_eq!(
        got.header("content-length"),
        Some(crate::common::INDEX.len().to_string().as_str())
    );
    assert_eq!(h2c(port, "/nope", &[]).status, 404);
    drop(s);
}

#[test]
fn request_bodies_reach_the_upstream_and_413_refuses() {
    let up = Upstream::start(|r| Answer::ok(format!("{} {}", r.method, r.body.len())));
    let port = free_port();
    let s = Shoal::start(
        &conf(
            port,
            "client_body_buffer_size 8k;",
            &format!(
                "location / {{ proxy_pass http://127.0.0.1:{}; }}\n\
                 location = /index.html {{ }}\n\
                 location /small {{ client_max_body_size 10; proxy_pass http://127.0.0.1:{}; }}",
                up.port(),
                up.port()
            ),
        ),
        port,
    );
    let url = format!("http://127.0.0.1:{port}/up");
    let body: Vec<u8> = (0..200_000u32).map(|i| b'a' + (i % 26) as u8).collect();
    // With a length (curl sends content-length), spilled past client_body_buffer_size.
    let got = curl_in(
        &["--http2-prior-knowledge", "--data-binary", "@-", &url],
        Some(&body),
    );
    assert_eq!(got.text(), "POST 200000");
    // Without one (a PUT from a pipe): read whole, sent upstream with its length.
    let got = curl_in(&["--http2-prior-knowledge", "-T", "-", &url], Some(&body));
    assert_eq!(got.text(), "PUT 200000");
    let seen = up.requests();
    let last = seen.last().expect("the upstream saw the PUT");
    assert_eq!(last.body, body);
    assert_eq!(last.header("content-length"), Some("200000"));
    // Over client_max_body_size: nginx's 413 and its log line.
    let small = format!("http://127.0.0.1:{port}/small");
    let got = curl_in(
        &["--http2-prior-knowledge", "--data-binary", "@-", &small],
        Some(&body[..20]),
    );
    assert_eq!(got.status, 413);
    s.wait_log("client intended to send too large body: 20 bytes", 1);
    // (curl 7.88 drops an answer whose stream is reset while it uploads: nghttp reads it.)
    assert_eq!(nghttp_status(&small, &body), Some(413));
    s.wait_log("client intended to send too large", 2);
    // A body no handler reads is discarded: the answer is whole.
    let got = curl_in(
        &[
            "--http2-prior-knowledge",
            "--data-binary",
            "@-",
            &format!("http://127.0.0.1:{port}/index.html"),
        ],
        Some(&body[..5000]),
    );
    assert_eq!(got.code, 0);
    assert_eq!(got.status, 405);
}

#[test]
fn proxy_cache_gzip_rewrite_and_error_pages_over_h2() {
    let text = "x".repeat(5000);
    let up = {
        let text = text.clone();
        Upstream::start(move |r| match r.target.as_str() {
            "/cached" => Answer::ok("cached body").header("Cache-Control", "max-age=60"),
            _ => Answer::ok(text.clone()).header("Content-Type", "text/plain"),
        })
    };
    let port = free_port();
    let prefix = Prefix::new();
    std::fs::write(prefix.join("html/oops.html"), "custom page\n").unwrap();
    let cache = prefix.join("cache");
    let s = Shoal::start_in(
        prefix,
        &conf(
            port,
            &format!(
                "proxy_cache_path {} keys_zone=z:1m;\ngzip on; gzip_types text/plain;",
                cache.display()
            ),
            &format!(
                "location /text {{ proxy_pass http://127.0.0.1:{p}; proxy_buffering on; }}\n\
                 location /cached {{ proxy_pass http://127.0.0.1:{p}; proxy_cache z;\n\
                   add_header X-Cache $upstream_cache_status; }}\n\
                 location /old {{ rewrite ^/old/(.*)$ /new/$1 permanent; }}\n\
                 location /missing {{ error_page 404 /oops.html; }}",
                p = up.port()
            ),
        ),
        port,
        &[],
    );
    let got = h2c(port, "/text", &["--compressed"]);
    assert_eq!(got.header("content-encoding"), Some("gzip"));
    assert_eq!(got.text(), text);
    assert_eq!(got.header("content-length"), None);
    assert_eq!(h2c(port, "/cached", &[]).header("x-cache"), Some("MISS"));
    let hit = h2c(port, "/cached", &[]);
    assert_eq!(hit.header("x-cache"), Some("HIT"));
    assert_eq!(hit.text(), "cached body");
    let got = h2c(port, "/old/a", &[]);
    assert_eq!(got.status, 301);
    assert_eq!(
        got.header("location"),
        Some(format!("http://127.0.0.1:{port}/new/a").as_str())
    );
    let got = h2c(port, "/missing/x", &[]);
    assert_eq!(got.status, 404);
    assert_eq!(got.text(), "custom page\n");
    drop(s);
}

#[test]
fn nghttp_fetches_many_streams_on_one_connection() {
    if Command::new("nghttp").arg("--version").output().is_err() {
        panic!("nghttp is missing (apt-get install nghttp2-client)");
    }
    let port = free_port();
    let s = Shoal::start(&conf(port, "", ""), port);
    let urls: Vec<String> = (0..20)
        .map(|i| format!("http://127.0.0.1:{port}/index.html?{i}"))
        .collect();
    let out = Command::new("nghttp")
        .args(["-n", "--stat", "-t", "20"])
        .args(&urls)
        .output()
        .expect("nghttp");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let log = s.prefix.read("logs/access.log");
    assert_eq!(log.matches("HTTP/2.0\" 200").count(), 20, "{log}");
}

#[test]
fn the_directives_nginx_made_obsolete_warn_and_bad_values_are_refused() {
    let port = free_port();
    let prefix = Prefix::new();
    let text = conf(
        port,
        "http2_recv_buffer_size 512k;\nhttp2_idle_timeout 3m;\nhttp2_recv_timeout 30s;\n\
         http2_max_field_size 4k;\nhttp2_max_header_size 16k;\nhttp2_max_requests 1000;\n\
         http2_push_preload on;\nhttp2_max_concurrent_pushes 10;",
        "http2_max_concurrent_streams 64;\nhttp2_body_preread_size 128k;\n\
         http2_chunk_size 16k;\nhttp2_push /style.css;\nhttp2_pool_size 4096;\n\
         http2_streams_index_size 64;",
    );
    prefix.write_conf(&text);
    let out = prefix.run(&["-t"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    for (old, new) in [
        ("http2_idle_timeout", "keepalive_timeout"),
        ("http2_recv_timeout", "client_header_timeout"),
        ("http2_max_field_size", "large_client_header_buffers"),
        ("http2_max_header_size", "large_client_header_buffers"),
        ("http2_max_requests", "keepalive_requests"),
    ] {
        let line = format!(
            "[warn] the \"{old}\" directive is obsolete, use the \"{new}\" directive instead"
        );
        assert!(err.contains(&line), "{line}\n{err}");
    }
    for old in [
        "http2_push",
        "http2_push_preload",
        "http2_max_concurrent_pushes",
    ] {
        let line = format!("[warn] the \"{old}\" directive is obsolete, ignored");
        assert!(err.contains(&line), "{line}\n{err}");
    }
    for (bad, says) in [
        ("http2_chunk_size 0;", "the http2 chunk size cannot be zero"),
        (
            "http2_streams_index_size 3;",
            "\"http2_streams_index_size\" directive must be a power of two",
        ),
        (
            "http2_body_preread_size 4g;",
            "the maximum body preread buffer size is 2147483647",
        ),
        (
            "http2 maybe;",
            "invalid value \"maybe\" in \"http2\" directive, it must be \"on\" or \"off\"",
        ),
    ] {
        prefix.write_conf(&conf(port, "", bad));
        let out = prefix.run(&["-t"]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{bad}: {err}");
        assert!(err.contains(says), "{bad}: {err}");
    }
    // `http2_recv_buffer_size` is http-level only, as nginx's.
    prefix.write_conf(&conf(port, "", "http2_recv_buffer_size 1m;"));
    let err = String::from_utf8_lossy(&prefix.run(&["-t"]).stderr).into_owned();
    assert!(
        err.contains("\"http2_recv_buffer_size\" directive is not allowed here"),
        "{err}"
    );
}

/// `http2_recv_buffer_size` as nginx checks it (its 32 bytes of state need more) and reads by
/// it: a buffer of 40 reads 8 bytes at a time, and a request still arrives whole.
#[test]
fn http2_recv_buffer_size_is_checked_and_bounds_reads() {
    let port = free_port();
    let prefix = Prefix::new();
    prefix.write_conf(&conf(port, "http2_recv_buffer_size 32;", ""));
    let err = String::from_utf8_lossy(&prefix.run(&["-t"]).stderr).into_owned();
    assert!(
        err.contains("\"http2_recv_buffer_size\" directive value is too small in "),
        "{err}"
    );
    let s = Shoal::start(
        &conf(
            port,
            "http2_recv_buffer_size 40;",
            "location / { return 200 \"$http_x_long\"; }",
        ),
        port,
    );
    let long = "y".repeat(3000);
    let got = h2c(port, "/", &["-H", &format!("x-long: {long}")]);
    assert_eq!((got.code, got.status), (0, 200));
    assert_eq!(got.text(), long);
    drop(s);
}

#[test]
fn a_graceful_stop_lets_a_stream_finish() {
    let up = Upstream::start(|_| {
        Answer::ok(vec![b'z'; 100_000]).delay_body(1000, Duration::from_millis(1500))
    });
    let port = free_port();
    let mut s = Shoal::start(
        &conf(
            port,
            "",
            &format!(
                "location / {{ proxy_pass http://127.0.0.1:{}; }}",
                up.port()
            ),
        ),
        port,
    );
    let t = std::thread::spawn(move || h2c(port, "/slow", &[]));
    wait_for("the request upstream", || {
        (!up.requests().is_empty()).then_some(())
    });
    s.signal(libc::SIGQUIT);
    let got = t.join().unwrap();
    assert_eq!(got.code, 0);
    assert_eq!(got.body.len(), 100_000);
    assert!(s.wait_exit().success());
}

#[test]
fn client_certificates_are_checked_on_h2_streams_too() {
    let port = free_port();
    let mut pki = Pki::new();
    pki.issue("localhost", &["localhost"], false);
    pki.issue("alice", &[], true);
    let text = format!(
        "daemon off;\nerror_log logs/error.log info;\nevents {{ }}\nhttp {{\n http2 on;\n\
         server {{\n listen 127.0.0.1:{port} ssl;\n {}\n\
         ssl_client_certificate {};\n ssl_verify_client on;\n\
         location / {{ return 200 \"[$http2] $ssl_client_s_dn\\n\"; }}\n }}\n}}\n",
        pki.ssl_lines("localhost"),
        pki.path("ca.crt").display()
    );
    let s = Shoal::start(&text, port);
    let url = format!("https://127.0.0.1:{port}/");
    // No certificate: nginx's 496 (400 on the wire, its own page).
    let got = curl(&["-k", "--http2", &url]);
    assert_eq!(got.status, 400);
    assert!(
        got.text().contains("No required SSL certificate was sent"),
        "{}",
        got.text()
    );
    s.wait_log(
        "client sent no required SSL certificate while reading client request headers",
        1,
    );
    let cert = pki.path("alice.crt").display().to_string();
    let key = pki.path("alice.key").display().to_string();
    let got = curl(&["-k", "--http2", "--cert", &cert, "--key", &key, &url]);
    assert_eq!(got.status, 200);
    assert!(got.text().starts_with("[h2] "), "{}", got.text());
}

#[test]
fn stub_status_counts_h2_connections_and_requests() {
    let port = free_port();
    let _s = Shoal::start(&conf(port, "", "location = /status { stub_status; }"), port);
    let first = h2c(port, "/status", &[]).text();
    let got = h2c(port, "/status", &[]).text();
    // The connection asking is active and writing; each request counted.
    assert!(got.starts_with("Active connections: 1 \n"), "{got}");
    // As nginx: its stream writes, the connection itself is not waiting.
    assert!(got.contains("Writing: 1 Waiting: 0 "), "{got}");
    let requests = |t: &str| -> u64 {
        t.lines()
            .nth(2)
            .and_then(|l| l.split_whitespace().nth(2)?.parse().ok())
            .unwrap_or(0)
    };
    assert_eq!(requests(&got), requests(&first) + 1, "{first}\n{got}");
}

#[test]
fn large_client_header_buffers_bound_a_stream_s_fields_and_path() {
    let port = free_port();
    let s = Shoal::start(&conf(port, "large_client_header_buffers 4 1k;", ""), port);
    let big = format!("X-Big: {}", "b".repeat(1500));
    let got = h2c(port, "/index.html", &["-H", &big]);
    assert_eq!(got.status, 400);
    assert!(
        got.text().contains("Request Header Or Cookie Too Large"),
        "{}",
        got.text()
    );
    let long = format!("/{}", "p".repeat(1500));
    assert_eq!(h2c(port, &long, &[]).status, 414);
    // Under the bound: answered.
    assert_eq!(h2c(port, "/index.html", &["-H", "X-Small: s"]).status, 200);
    // The refused requests are logged with their request lines, as nginx logs them.
    let log = s.prefix.read("logs/access.log");
    assert!(log.contains("\"GET /index.html HTTP/2.0\" 400 "), "{log}");
    assert!(log.contains(" HTTP/2.0\" 414 "), "{log}");
}

#[test]
fn a_stream_s_error_lines_go_to_its_location_s_error_log() {
    let port = free_port();
    let s = Shoal::start(
        &conf(
            port,
            "",
            "error_log logs/server.log warn;\n\
             location /loc/ { error_log logs/loc.log info; }\n\
             location /main/ { }",
        ),
        port,
    );
    // Two streams on one connection, each in its own location (nghttp: curl 7.88 does not
    // send a second request on a prior-knowledge connection it reuses).
    let a = format!("http://127.0.0.1:{port}/loc/none");
    let b = format!("http://127.0.0.1:{port}/main/none");
    let out = Command::new("timeout")
        .args(["20", "nghttp", "-n", "-s", &a, &b])
        .output()
        .expect("nghttp runs");
    let stats = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stats}");
    assert_eq!(stats.matches(" 404 ").count(), 2, "{stats}");
    let missing = |p: &str| format!("{p}\" failed (2: No such file or directory)");
    let read_until = |file: &str, needle: &str| {
        wait_for(&format!("{needle:?} in {file}"), || {
            let t = s.prefix.read(file);
            t.contains(needle).then_some(t)
        })
    };
    let loc = read_until("logs/loc.log", &missing("/loc/none"));
    assert!(loc.contains("[error]"), "{loc}");
    assert!(!loc.contains("/main/none"), "{loc}");
    let server = read_until("logs/server.log", &missing("/main/none"));
    assert!(!server.contains("/loc/none"), "{server}");
    // Nothing of these requests in the main log.
    let main = s.error_log();
    assert!(!main.contains("No such file"), "{main}");
}

/// Every answer on a connection drops a field with a control byte (a NUL of
/// `$binary_remote_addr`), not only the first: the HPACK encoder skips its checks only for a
/// field it sent before, checked then. `$bytes_sent` counts the same head each time.
#[test]
fn a_field_with_a_control_byte_is_dropped_from_every_answer() {
    let port = free_port();
    let s = Shoal::start(
        &conf(
            port,
            "log_format sent \"$request_uri $bytes_sent\";",
            "access_log logs/sent.log sent;\n\
             location /a { add_header X-Addr $binary_remote_addr; add_header X-Fine yes; \
             return 200 ok; }",
        ),
        port,
    );
    // Three requests on one connection, each answered alike (nghttp: curl 7.88 fails the
    // second request of a connection of prior knowledge, to nginx too).
    let urls: Vec<String> = (1..=3)
        .map(|i| format!("http://127.0.0.1:{port}/a?{i}"))
        .collect();
    let out = Command::new("nghttp")
        .args(["-nv", "-t", "20"])
        .args(&urls)
        .output()
        .expect("nghttp (apt-get install nghttp2-client)");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    // nghttp prints each field it decodes: `recv (stream_id=N) name: value`.
    let fields = |name: &str| text.matches(&format!(") {name}: ")).count();
    assert_eq!((fields(":status"), fields("x-fine")), (3, 3), "{text}");
    assert_eq!(fields("x-addr"), 0, "{text}");
    let log = wait_for("three lines in the log", || {
        let log = s.prefix.read("logs/sent.log");
        (log.lines().count() == 3).then_some(log)
    });
    let sent: Vec<&str> = log.lines().filter_map(|l| l.split(' ').nth(1)).collect();
    assert_eq!(sent.len(), 3, "{log}");
    assert!(sent.iter().all(|&n| n == sent[0]), "{log}");
}
