//! The FastCGI encoder and decoder against a real PHP-FPM (Debian's `php-fpm`), over a unix
//! socket: params (over 64 KiB too, over several records) and request bodies reach PHP as
//! sent; PHP's status, headers, stderr and output come back as PHP meant them; keep-conn
//! serves two requests on one connection.

mod backends;

use std::collections::HashMap;
use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::process::Command;

use backends::Server;
use shoal_http::bytes::BytesMut;
use shoal_http::cgi::http_param_name;
use shoal_http::crc32::crc32;
use shoal_http::fastcgi::{encode, Decoder, EndRequest, Event, FastcgiError};
use shoal_http::{UpstreamError, UpstreamHead};

/// Echoes what it was given; `?status=`, `?big=` and `?location=` change its answer.
const SCRIPT: &str = r#"<?php
$body = file_get_contents('php://input');
error_log("stderr from php: " . $_SERVER['REQUEST_METHOD']);
if (isset($_GET['status'])) { http_response_code((int) $_GET['status']); }
if (isset($_GET['location'])) { header('Location: ' . $_GET['location']); }
header('Content-Type: text/plain');
header('X-Echo-Method: ' . $_SERVER['REQUEST_METHOD']);
header('X-Long: ' . str_repeat('h', (int) ($_GET['header'] ?? 0)));
foreach ($_SERVER as $k => $v) {
    if (is_string($v) && strlen($v) < 200) { echo "$k=$v\n"; }
    elseif (is_string($v)) { echo "$k=len:" . strlen($v) . "\n"; }
}
echo "BODY=", strlen($body), ":", sprintf('%u', crc32($body)), "\n";
if (isset($_GET['big'])) { echo str_repeat('0123456789abcdef', (int) $_GET['big']); }
"#;

/// A PHP-FPM pool of our own on a unix socket, serving `echo.php`.
fn php() -> Server {
    let dir = backends::tempdir();
    let d = dir.path().display();
    std::fs::write(dir.path().join("echo.php"), SCRIPT).expect("writing the script");
    let socket = dir.path().join("php.sock");
    let conf = format!(
        "[global]\n\
         pid = {d}/php-fpm.pid\n\
         error_log = {d}/php-fpm.error.log\n\
         daemonize = no\n\
         [shoal]\n\
         listen = {socket}\n\
         pm = static\n\
         pm.max_children = 2\n\
         clear_env = yes\n\
         catch_workers_output = yes\n",
        socket = socket.display()
    );
    std::fs::write(dir.path().join("php-fpm.conf"), conf).expect("writing the pool");
    let mut cmd = Command::new(backends::php_fpm());
    // No php.ini: PHP's defaults (errors to FastCGI stderr). -R: tests may run as root.
    cmd.args(["-n", "-F", "-R", "-y", "php-fpm.conf"]);
    Server::start("php-fpm", cmd, dir, socket, true)
}

/// What PHP answered.
struct Reply {
    head: UpstreamHead,
    body: Vec<u8>,
    stderr: Vec<String>,
    end: EndRequest,
}

impl Reply {
    /// The `KEY=VALUE` lines the script echoed.
    fn vars(&self) -> HashMap<String, String> {
        String::from_utf8_lossy(&self.body)
            .lines()
            .filter_map(|l| l.split_once('='))
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .collect()
    }
}

/// The params nginx's `fastcgi.conf` sets, for `echo.php` with `query`, and `headers` as
/// `HTTP_*` params.
fn params(
    server: &Server,
    method: &str,
    query: &str,
    body: &[u8],
    headers: &[(&str, &[u8])],
) -> Vec<(Vec<u8>, Vec<u8>)> {
    let root = server.dir.path().display().to_string();
    let mut p: Vec<(Vec<u8>, Vec<u8>)> = [
        ("SCRIPT_FILENAME", format!("{root}/echo.php")),
        ("QUERY_STRING", query.to_owned()),
        ("REQUEST_METHOD", method.to_owned()),
        (
            "CONTENT_TYPE",
            if body.is_empty() {
                String::new()
            } else {
                "application/octet-stream".into()
            },
        ),
        (
            "CONTENT_LENGTH",
            if body.is_empty() {
                String::new()
            } else {
                body.len().to_string()
            },
        ),
        ("SCRIPT_NAME", "/echo.php".into()),
        ("REQUEST_URI", format!("/echo.php?{query}")),
        ("DOCUMENT_URI", "/echo.php".into()),
        ("DOCUMENT_ROOT", root),
        ("SERVER_PROTOCOL", "HTTP/1.1".into()),
        ("REQUEST_SCHEME", "http".into()),
        ("GATEWAY_INTERFACE", "CGI/1.1".into()),
        ("SERVER_SOFTWARE", "shoal".into()),
        ("REMOTE_ADDR", "127.0.0.1".into()),
        ("REMOTE_PORT", "50000".into()),
        ("SERVER_ADDR", "127.0.0.1".into()),
        ("SERVER_PORT", "80".into()),
        ("SERVER_NAME", "localhost".into()),
        ("REDIRECT_STATUS", "200".into()),
    ]
    .into_iter()
    .map(|(k, v)| (k.as_bytes().to_vec(), v.into_bytes()))
    .collect();
    for (name, value) in headers {
        p.push((http_param_name(name.as_bytes()), value.to_vec()));
    }
    p
}

/// One request on `stream`, read as nginx reads: at most `max_head` bytes at a time until
/// the head, then as much as comes.
fn request(
    stream: &mut UnixStream,
    params: &[(Vec<u8>, Vec<u8>)],
    body: &[u8],
    keep_conn: bool,
    max_head: usize,
) -> Result<Reply, FastcgiError> {
    let pairs = params.iter().map(|(k, v)| (&k[..], &v[..]));
    let mut out = BytesMut::new();
    encode::begin_request(&mut out, keep_conn);
    encode::params(&mut out, pairs);
    stream.write_all(&out).expect("writing the params");
    // The body in pieces, some without copies.
    let (first, rest) = body.split_at(body.len() / 3);
    let mut piece = BytesMut::new();
    encode::stdin(&mut piece, first);
    stream.write_all(&piece).expect("writing the body");
    for p in encode::stdin_pieces(shoal_http::bytes::Bytes::copy_from_slice(rest)) {
        stream.write_all(&p).expect("writing the body");
    }
    let mut end = BytesMut::new();
    encode::stdin_end(&mut end);
    stream.write_all(&end).expect("ending the body");

    let mut d = Decoder::new(max_head, keep_conn, false);
    let mut buf = BytesMut::new();
    let mut head = None;
    let mut answer = Vec::new();
    let mut stderr = Vec::new();
    let mut chunk = vec![0u8; 65536];
    loop {
        while let Some(event) = d.decode(&mut buf)? {
            match event {
                Event::Head(h) => head = Some(h),
                Event::Stdout(b) => answer.extend_from_slice(&b),
                Event::Stderr(e) => stderr.push(e.to_string()),
                Event::Surplus(s) => panic!("{s}"),
                Event::End(e) => {
                    assert!(buf.is_empty(), "bytes after END_REQUEST");
                    return Ok(Reply {
                        head: head.expect("the head comes before the end"),
                        body: answer,
                        stderr,
                        end: e,
                    });
                }
            }
        }
        let want = if d.head_done() {
            chunk.len()
        } else {
            max_head.min(chunk.len())
        };
        let n = stream
            .read(&mut chunk[..want])
            .expect("reading the answer (timed out?)");
        if n == 0 {
            d.eof()?;
            panic!("the connection closed after a complete answer without END_REQUEST");
        }
        buf.extend_from_slice(&chunk[..n]);
    }
}

#[test]
fn params_body_stderr_and_output() {
    let php = php();
    let mut s = php.connect();
    let body: Vec<u8> = (0..100_000u32).map(|i| (i * 7 % 251) as u8).collect();
    let p = params(
        &php,
        "POST",
        "a=1&b=two",
        &body,
        &[("X-Custom", b"custom value"), ("User-Agent", b"test")],
    );
    let r = request(&mut s, &p, &body, false, 4096).expect("an answer");
    assert_eq!(r.head.status(), 200, "{}", php.log());
    assert_eq!(r.head.status_line(), b"200 OK");
    assert!(r
        .head
        .header("content-type")
        .unwrap()
        .starts_with(b"text/plain"));
    assert_eq!(r.head.header("x-echo-method"), Some(&b"POST"[..]));
    let vars = r.vars();
    assert_eq!(vars["REQUEST_METHOD"], "POST");
    assert_eq!(vars["QUERY_STRING"], "a=1&b=two");
    assert_eq!(vars["HTTP_X_CUSTOM"], "custom value");
    assert_eq!(vars["HTTP_USER_AGENT"], "test");
    assert_eq!(vars["GATEWAY_INTERFACE"], "CGI/1.1");
    assert_eq!(vars["CONTENT_LENGTH"], "100000");
    assert_eq!(vars["BODY"], format!("100000:{}", crc32(&body)));
    assert_eq!(
        r.stderr,
        vec!["FastCGI sent in stderr: \"PHP message: stderr from php: POST\"".to_owned()]
    );
    assert_eq!((r.end.app_status, r.end.protocol_status), (0, 0));
}

#[test]
fn status_location_and_a_long_output() {
    let php = php();
    let p = params(&php, "GET", "status=404", b"", &[]);
    let r = request(&mut php.connect(), &p, b"", false, 4096).expect("an answer");
    assert_eq!(
        (r.head.status(), r.head.status_line()),
        (404, &b"404 Not Found"[..])
    );
    assert_eq!(r.head.header("status"), Some(&b"404 Not Found"[..]));

    let p = params(&php, "GET", "location=/elsewhere", b"", &[]);
    let r = request(&mut php.connect(), &p, b"", false, 4096).expect("an answer");
    assert_eq!(r.head.status(), 302);
    assert_eq!(r.head.header("location"), Some(&b"/elsewhere"[..]));

    // A megabyte of output: many STDOUT records, handed out as they come.
    let p = params(&php, "GET", "big=65536", b"", &[]);
    let r = request(&mut php.connect(), &p, b"", false, 4096).expect("an answer");
    let big = "0123456789abcdef".repeat(65536);
    assert!(r.body.ends_with(big.as_bytes()));

    // A head longer than the buffer.
    let p = params(&php, "GET", "header=5000", b"", &[]);
    let e = request(&mut php.connect(), &p, b"", false, 4096).err();
    assert_eq!(e, Some(FastcgiError::Head(UpstreamError::TooBigHeader)));
    let r = request(&mut php.connect(), &p, b"", false, 8192).expect("fits in 8k");
    assert_eq!(r.head.header("x-long").map(<[u8]>::len), Some(5000));
}

#[test]
fn params_over_64k_in_several_records() {
    let php = php();
    let big: Vec<Vec<u8>> = (0..3u8).map(|i| vec![b'a' + i; 30_000]).collect();
    let headers: Vec<(&str, &[u8])> = vec![
        ("X-Big-0", &big[0]),
        ("X-Big-1", &big[1]),
        ("X-Big-2", &big[2]),
    ];
    let p = params(&php, "GET", "", b"", &headers);
    let len = encode::params_len(p.iter().map(|(k, v)| (&k[..], &v[..])));
    assert!(
        len > encode::NGINX_MAX_PARAMS,
        "nginx would refuse these: {len}"
    );
    let r = request(&mut php.connect(), &p, b"", false, 4096).expect("an answer");
    let vars = r.vars();
    for i in 0..3 {
        assert_eq!(vars[&format!("HTTP_X_BIG_{i}")], "len:30000");
    }
}

#[test]
fn keep_conn_serves_two_requests_on_one_connection() {
    let php = php();
    let mut s = php.connect();
    for method in ["GET", "POST"] {
        let body = if method == "POST" { &b"hello"[..] } else { b"" };
        let p = params(&php, method, "", body, &[]);
        let r = request(&mut s, &p, body, true, 4096).expect("an answer");
        assert_eq!(r.vars()["REQUEST_METHOD"], method);
        assert_eq!(r.vars()["BODY"], format!("{}:{}", body.len(), crc32(body)));
    }
    // Without keep-conn PHP-FPM closes the connection after the answer.
    let p = params(&php, "GET", "", b"", &[]);
    request(&mut s, &p, b"", false, 4096).expect("an answer");
    let mut rest = Vec::new();
    assert_eq!(s.read_to_end(&mut rest).expect("the close"), 0);
}
