//! FastCGI end to end with a real PHP-FPM started by each test (its own pool, a unix socket or
//! a port of 127.0.0.1 in a temporary directory, run as the current user): Debian's
//! `snippets/fastcgi-php.conf` with the shipped `fastcgi.conf`, a WordPress-style location,
//! large uploads (buffered and streamed), large answers through small buffers and a temporary
//! file, stderr in the error log as nginx words it, `fastcgi_catch_stderr`, intercepted errors,
//! `fastcgi_next_upstream` past a dead server, `fastcgi_keep_conn`, hidden and passed headers,
//! an address in a variable, and configuration errors worded as nginx's.

use std::collections::HashMap;
use std::fs;
use std::path::Path;

use crate::common::backends::{self, Backend};
use crate::common::{free_port, Client, Prefix, Shoal};

/// The test script: echoes the params PHP saw and what it was sent; `?status=`, `?stderr=`,
/// `?big=`, `?location=` and `?hdr=` shape its answer.
pub const ECHO_PHP: &str = r#"<?php
$q = $_GET;
if (isset($q['status'])) header("Status: " . $q['status']);
if (isset($q['location'])) header("Location: " . $q['location']);
if (isset($q['stderr'])) error_log($q['stderr']);
if (isset($q['sleep'])) usleep((int)$q['sleep'] * 1000);
header("X-Script: echo");
header("Content-Type: text/plain");
$body = file_get_contents('php://input');
foreach (['SCRIPT_FILENAME', 'SCRIPT_NAME', 'PATH_INFO', 'REQUEST_METHOD', 'QUERY_STRING',
          'REQUEST_URI', 'DOCUMENT_URI', 'CONTENT_LENGTH', 'CONTENT_TYPE', 'SERVER_PROTOCOL',
          'GATEWAY_INTERFACE', 'SERVER_SOFTWARE', 'REMOTE_ADDR', 'SERVER_NAME', 'HTTP_HOST',
          'HTTP_X_TEST', 'HTTPS', 'REDIRECT_STATUS', 'REQUEST_SCHEME'] as $k) {
    echo $k, '=', $_SERVER[$k] ?? '(unset)', "\n";
}
echo 'BODY_LEN=', strlen($body), "\n";
echo 'BODY_MD5=', md5($body), "\n";
if (isset($q['now'])) echo 'NOW=', hrtime(true), "\n";
if (isset($q['big'])) echo str_repeat("0123456789abcdef", intdiv((int)$q['big'], 16));
"#;

/// Debian's `snippets/fastcgi-php.conf`, as Debian 12's nginx ships it.
pub const DEBIAN_SNIPPET: &str = "\
# regex to split $uri to $fastcgi_script_name and $fastcgi_path
fastcgi_split_path_info ^(.+?\\.php)(/.*)$;

# Check that the PHP script exists before passing it
try_files $fastcgi_script_name =404;

# Bypass the fact that try_files resets $fastcgi_path_info
# see: http://trac.nginx.org/nginx/ticket/321
set $path_info $fastcgi_path_info;
fastcgi_param PATH_INFO $path_info;

fastcgi_index index.php;
include fastcgi.conf;
";

/// A prefix with the shipped `fastcgi.conf` and `fastcgi_params`, Debian's snippet, and the
/// PHP scripts in `html/`.
fn prefix() -> Prefix {
    let p = Prefix::new();
    let repo = Path::new(env!("CARGO_MANIFEST_DIR"));
    for f in ["fastcgi.conf", "fastcgi_params"] {
        fs::copy(repo.join("conf").join(f), p.join("conf").join(f)).expect("copying conf");
    }
    fs::create_dir_all(p.join("conf/snippets")).expect("mkdir snippets");
    fs::write(p.join("conf/snippets/fastcgi-php.conf"), DEBIAN_SNIPPET).expect("snippet");
    fs::write(p.join("html/echo.php"), ECHO_PHP).expect("echo.php");
    fs::write(p.join("html/index.php"), ECHO_PHP).expect("index.php");
    fs::create_dir_all(p.join("html/sub")).expect("mkdir");
    fs::write(p.join("html/sub/index.php"), ECHO_PHP).expect("sub/index.php");
    fs::write(p.join("html/static.txt"), "static file\n").expect("static.txt");
    fs::write(p.join("html/err.html"), "error page\n").expect("err.html");
    p
}

/// shoal with `server` lines (`{PHP}`: PHP-FPM's address) in a server on its own port.
fn start(php: &Backend, http: &str, server: &str) -> (Shoal, u16) {
    let port = free_port();
    let conf = format!(
        "daemon off;\nerror_log logs/error.log info;\nevents {{ }}\nhttp {{\n    \
         include mime.types;\n{http}\n    server {{\n        listen 127.0.0.1:{port};\n        \
         server_name localhost;\n        root html;\n{server}\n    }}\n}}\n"
    )
    .replace("{PHP}", &php.listen.pass());
    (Shoal::start_in(prefix(), &conf, port, &[]), port)
}

/// Debian's own example: a script name followed by PATH_INFO matches too.
const PHP_LOCATION: &str = "location ~ [^/]\\.php(/|$) {\n\
    include snippets/fastcgi-php.conf;\n\
    fastcgi_pass {PHP};\n\
}";

/// `KEY=VALUE` lines of the script's answer.
fn vars(body: &[u8]) -> HashMap<String, String> {
    String::from_utf8_lossy(body)
        .lines()
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect()
}

fn get_req(path: &str) -> String {
    crate::common::client::request("GET", path, "")
}

fn ask(port: u16, req: &str) -> crate::common::Response {
    Client::connect(port)
        .ask(req)
        .unwrap_or_else(|e| panic!("no answer to {req:?}: {e}"))
}

#[test]
fn debian_snippet_runs_php_with_path_info() {
    let php = backends::php_fpm_on(false, 2);
    let (s, port) = start(&php, "", PHP_LOCATION);
    let root = s.prefix.join("html").display().to_string();
    let r = ask(
        port,
        "GET /echo.php/extra/path?a=1&b=2 HTTP/1.1\r\nHost: localhost\r\nX-Test: yes\r\n\r\n",
    );
    assert_eq!(r.status, 200, "{}\n{}", r.show(), s.error_log());
    assert_eq!(r.header("content-type"), Some("text/plain;charset=UTF-8"));
    assert_eq!(r.header("x-script"), Some("echo"));
    assert!(r
        .header("x-powered-by")
        .is_some_and(|v| v.starts_with("PHP/")));
    assert!(r.header("status").is_none(), "Status is hidden");
    let v = vars(&r.body);
    assert_eq!(v["SCRIPT_FILENAME"], format!("{root}/echo.php"));
    assert_eq!(v["SCRIPT_NAME"], "/echo.php");
    assert_eq!(v["PATH_INFO"], "/extra/path");
    assert_eq!(v["QUERY_STRING"], "a=1&b=2");
    assert_eq!(v["REQUEST_URI"], "/echo.php/extra/path?a=1&b=2");
    assert_eq!(v["REQUEST_METHOD"], "GET");
    assert_eq!(v["HTTP_X_TEST"], "yes");
    assert_eq!(v["HTTP_HOST"], "localhost");
    assert_eq!(v["GATEWAY_INTERFACE"], "CGI/1.1");
    assert_eq!(v["SERVER_SOFTWARE"], "nginx/1.22.1");
    assert_eq!(v["REDIRECT_STATUS"], "200");
    assert_eq!(v["HTTPS"], "(unset)", "if_not_empty leaves it out");
    // A script that does not exist is try_files' 404, never PHP's.
    let r = ask(port, "GET /missing.php HTTP/1.1\r\nHost: localhost\r\n\r\n");
    assert_eq!(r.status, 404);
    assert!(!String::from_utf8_lossy(&r.body).contains("SCRIPT_NAME"));
    // A HEAD has the head only (of unknown length: neither a length nor chunks, as nginx).
    let h = crate::common::client::request_close(port, "HEAD", "/echo.php", "");
    assert!(
        h.starts_with("HTTP/1.1 200 OK\r\n") && h.ends_with("\r\n\r\n"),
        "{h}"
    );
}

#[test]
fn wordpress_style_pretty_urls_and_static_files() {
    let php = backends::php_fpm_on(true, 2);
    let (s, port) = start(
        &php,
        "",
        &format!(
            "index index.php;\n\
             location / {{ try_files $uri $uri/ /index.php?$args; }}\n{PHP_LOCATION}"
        ),
    );
    let r = ask(
        port,
        "GET /2024/05/hello-world/?utm=x HTTP/1.1\r\nHost: localhost\r\n\r\n",
    );
    assert_eq!(r.status, 200, "{}\n{}", r.show(), s.error_log());
    let v = vars(&r.body);
    assert_eq!(v["SCRIPT_NAME"], "/index.php");
    assert_eq!(v["REQUEST_URI"], "/2024/05/hello-world/?utm=x");
    assert_eq!(v["QUERY_STRING"], "utm=x");
    let r = ask(port, "GET /static.txt HTTP/1.1\r\nHost: localhost\r\n\r\n");
    assert_eq!(r.body, b"static file\n");
    // A directory with an index.php: the index module's internal redirect reaches PHP.
    let r = ask(port, "GET /sub/ HTTP/1.1\r\nHost: localhost\r\n\r\n");
    assert_eq!(vars(&r.body)["SCRIPT_NAME"], "/sub/index.php");
}

/// A body of `n` bytes, not all alike.
fn payload(n: usize) -> Vec<u8> {
    (0..n).map(|i| (i * 7 % 251) as u8).collect()
}

fn md5_hex(b: &[u8]) -> String {
    let out = std::process::Command::new("md5sum")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .and_then(|mut c| {
            use std::io::Write;
            c.stdin.take().expect("stdin").write_all(b)?;
            c.wait_with_output()
        })
        .expect("md5sum");
    String::from_utf8_lossy(&out.stdout)[..32].to_string()
}

#[test]
fn large_uploads_buffered_and_streamed() {
    let php = backends::php_fpm_on(false, 2);
    let (s, port) = start(
        &php,
        "client_max_body_size 8m;\nclient_body_buffer_size 16k;",
        &format!(
            "{PHP_LOCATION}\n\
             location /stream/ {{ fastcgi_request_buffering off; include fastcgi.conf; \
             fastcgi_param SCRIPT_FILENAME $document_root/echo.php; fastcgi_pass {{PHP}}; }}"
        )
        .replace("{PHP}", &php.listen.pass()),
    );
    let body = payload(3 * 1024 * 1024 + 17);
    let md5 = md5_hex(&body);
    for path in ["/echo.php", "/stream/x"] {
        let mut c = Client::connect(port);
        let head = format!(
            "POST {path} HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/octet-stream\r\n\
             Content-Length: {}\r\n\r\n",
            body.len()
        );
        c.send(head.as_bytes()).unwrap();
        c.send(&body).unwrap();
        let r = c.read_framed().expect("an answer");
        assert_eq!(r.status, 200, "{path}: {}\n{}", r.show(), s.error_log());
        let v = vars(&r.body);
        assert_eq!(v["BODY_LEN"], body.len().to_string(), "{path}");
        assert_eq!(v["BODY_MD5"], md5, "{path}");
        assert_eq!(v["CONTENT_LENGTH"], body.len().to_string(), "{path}");
    }
    // A chunked upload streamed as it comes: FastCGI needs no length.
    let mut c = Client::connect(port);
    c.send(b"POST /stream/x HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: chunked\r\n\r\n")
        .unwrap();
    for piece in body.chunks(100_000) {
        c.send(format!("{:x}\r\n", piece.len()).as_bytes()).unwrap();
        c.send(piece).unwrap();
        c.send(b"\r\n").unwrap();
    }
    c.send(b"0\r\n\r\n").unwrap();
    let r = c.read_framed().expect("an answer");
    // As through nginx: the records carry it all, but with no `CONTENT_LENGTH` PHP reads
    // none of it (nginx_diff_fastcgi compares the buffered case).
    assert_eq!(r.status, 200, "{}\n{}", r.show(), s.error_log());
    assert_eq!(vars(&r.body)["CONTENT_LENGTH"], "");
}

#[test]
fn large_answers_through_small_buffers_and_a_temp_file() {
    let php = backends::php_fpm_on(false, 2);
    let (s, port) = start(
        &php,
        "",
        "location ~ \\.php$ {\n\
             include fastcgi.conf;\n\
             fastcgi_buffers 2 4k;\n\
             fastcgi_buffer_size 4k;\n\
             fastcgi_pass {PHP};\n\
         }\n\
         location /unbuffered/ {\n\
             include fastcgi.conf;\n\
             fastcgi_param SCRIPT_FILENAME $document_root/echo.php;\n\
             fastcgi_buffering off;\n\
             fastcgi_pass {PHP};\n\
         }",
    );
    for path in ["/echo.php?big=4000000", "/unbuffered/?big=4000000"] {
        let mut c = Client::connect(port);
        let r = c.ask(&get_req(path)).expect("an answer");
        assert_eq!(r.status, 200, "{path}: {}", s.error_log());
        let text = String::from_utf8_lossy(&r.body);
        let tail = text.split_once("BODY_MD5=").expect("the echo").1;
        assert_eq!(tail.len(), 33 + 4_000_000, "{path}");
        assert!(tail.ends_with("0123456789abcdef"));
    }
}

#[test]
fn stderr_is_logged_as_nginx_logs_it_and_catch_stderr_refuses() {
    let php = backends::php_fpm_on(false, 1);
    let (s, port) = start(
        &php,
        "",
        &format!(
            "{PHP_LOCATION}\n\
             location /caught/ {{ include fastcgi.conf; \
             fastcgi_param SCRIPT_FILENAME $document_root/echo.php; \
             fastcgi_catch_stderr \"FATAL\"; fastcgi_pass {{PHP}}; }}"
        )
        .replace("{PHP}", &php.listen.pass()),
    );
    let r = ask(
        port,
        "GET /echo.php?stderr=hello%20there HTTP/1.1\r\nHost: localhost\r\n\r\n",
    );
    assert_eq!(r.status, 200);
    let sock = php.listen.pass();
    let line = format!(
        "FastCGI sent in stderr: \"PHP message: hello there\" while reading response header \
         from upstream, client: 127.0.0.1, server: localhost, request: \"GET \
         /echo.php?stderr=hello%20there HTTP/1.1\", upstream: \"fastcgi://{sock}:\", host: \
         \"localhost\""
    );
    s.wait_log(&line, 1);
    assert!(s.error_log().contains("[error]"), "{}", s.error_log());
    // Without the match the answer passes; with it, it is an invalid answer: 502.
    let r = ask(
        port,
        "GET /caught/?stderr=benign HTTP/1.1\r\nHost: localhost\r\n\r\n",
    );
    assert_eq!(r.status, 200);
    let r = ask(
        port,
        "GET /caught/?stderr=FATAL%20oops HTTP/1.1\r\nHost: localhost\r\n\r\n",
    );
    assert_eq!(r.status, 502, "{}", s.error_log());
    s.wait_log("FastCGI sent in stderr: \"PHP message: FATAL oops\"", 1);
}

#[test]
fn statuses_redirects_and_intercepted_errors() {
    let php = backends::php_fpm_on(false, 2);
    let (s, port) = start(
        &php,
        "",
        "location ~ \\.php$ { include fastcgi.conf; fastcgi_pass {PHP}; }\n\
         location /icpt/ { include fastcgi.conf; fastcgi_param SCRIPT_FILENAME \
         $document_root/echo.php; fastcgi_intercept_errors on; error_page 404 /err.html; \
         fastcgi_pass {PHP}; }\n\
         location = /err.html { }",
    );
    let r = ask(
        port,
        "GET /echo.php?status=404%20Gone%20Away HTTP/1.1\r\nHost: localhost\r\n\r\n",
    );
    assert_eq!(r.status, 404);
    assert!(
        r.head.starts_with("HTTP/1.1 404 Gone Away\r\n"),
        "{}",
        r.head
    );
    assert!(String::from_utf8_lossy(&r.body).contains("SCRIPT_NAME=/echo.php"));
    let r = ask(
        port,
        "GET /echo.php?location=/elsewhere HTTP/1.1\r\nHost: localhost\r\n\r\n",
    );
    assert_eq!(r.status, 302);
    assert_eq!(r.header("location"), Some("/elsewhere"));
    let r = ask(
        port,
        "GET /icpt/?status=404 HTTP/1.1\r\nHost: localhost\r\n\r\n",
    );
    assert_eq!(r.status, 404, "{}", s.error_log());
    assert_eq!(r.body, b"error page\n");
    let r = ask(
        port,
        "GET /icpt/?status=403 HTTP/1.1\r\nHost: localhost\r\n\r\n",
    );
    assert_eq!(r.status, 403);
    assert!(String::from_utf8_lossy(&r.body).contains("SCRIPT_NAME"));
}

#[test]
fn next_upstream_past_a_dead_server_keep_conn_and_variables() {
    // A kept connection holds its PHP worker: one for it, others for the other locations.
    let php = backends::php_fpm_on(false, 3);
    let dead = free_port();
    let (s, port) = start(
        &php,
        &format!("upstream php {{ server 127.0.0.1:{dead}; server {{PHP}}; keepalive 4; }}"),
        "location ~ \\.php$ { include fastcgi.conf; fastcgi_keep_conn on; fastcgi_pass php; \
         add_header X-Up $upstream_addr; }\n\
         location /var/ { set $backend {PHP}; include fastcgi.conf; \
         fastcgi_param SCRIPT_FILENAME $document_root/echo.php; fastcgi_pass $backend; }\n\
         location /hide/ { include fastcgi.conf; fastcgi_param SCRIPT_FILENAME \
         $document_root/echo.php; fastcgi_hide_header X-Script; fastcgi_pass_header Status; \
         fastcgi_pass {PHP}; }",
    );
    let mut c = Client::connect(port);
    for i in 0..12 {
        let r = c
            .ask(&get_req(&format!("/echo.php?n={i}")))
            .expect("an answer");
        assert_eq!(r.status, 200, "{}", s.error_log());
        assert_eq!(vars(&r.body)["QUERY_STRING"], format!("n={i}"));
    }
    s.wait_log(
        &format!("connect() failed (111: Connection refused) while connecting to upstream, client: 127.0.0.1, server: localhost, request: \"GET /echo.php?n=0 HTTP/1.1\", upstream: \"fastcgi://127.0.0.1:{dead}\""),
        1,
    );
    let r = ask(port, "GET /var/?v=1 HTTP/1.1\r\nHost: localhost\r\n\r\n");
    assert_eq!(r.status, 200, "{}", s.error_log());
    assert_eq!(vars(&r.body)["QUERY_STRING"], "v=1");
    let r = ask(
        port,
        "GET /hide/?status=200%20Fine HTTP/1.1\r\nHost: localhost\r\n\r\n",
    );
    assert!(r.header("x-script").is_none());
    assert_eq!(r.header("status"), Some("200 Fine"));
}

#[test]
fn fastcgi_cache_stores_and_answers_hits() {
    let php = backends::php_fpm_on(false, 2);
    let (s, port) = start(
        &php,
        "fastcgi_cache_path cache levels=1:2 keys_zone=php:1m;",
        "location ~ \\.php$ {\n\
             include fastcgi.conf;\n\
             fastcgi_cache php;\n\
             fastcgi_cache_key \"$request_method$request_uri\";\n\
             fastcgi_cache_valid 200 1m;\n\
             add_header X-Cache $upstream_cache_status;\n\
             fastcgi_pass {PHP};\n\
         }",
    );
    let first = ask(port, &get_req("/echo.php?now=1&status=200%20OK"));
    assert_eq!(first.status, 200, "{}", s.error_log());
    assert_eq!(first.header("x-cache"), Some("MISS"));
    assert!(vars(&first.body).contains_key("NOW"));
    let hit = ask(port, &get_req("/echo.php?now=1&status=200%20OK"));
    assert_eq!(hit.header("x-cache"), Some("HIT"), "{}", s.error_log());
    assert_eq!(hit.body, first.body, "the stored answer");
    assert_eq!(hit.header("x-script"), Some("echo"));
    assert!(
        hit.header("status").is_none(),
        "FastCGI's Status is not stored"
    );
    // Another key: PHP again.
    let other = ask(port, &get_req("/echo.php?now=2"));
    assert_eq!(other.header("x-cache"), Some("MISS"));
    assert_ne!(vars(&other.body)["NOW"], vars(&first.body)["NOW"]);
}

#[test]
fn a_slow_script_times_out_as_nginx_says() {
    let php = backends::php_fpm_on(false, 2);
    let (s, port) = start(
        &php,
        "",
        "location ~ \\.php$ { include fastcgi.conf; fastcgi_read_timeout 1s; \
         fastcgi_pass {PHP}; }",
    );
    let r = ask(port, &get_req("/echo.php?sleep=300"));
    assert_eq!(r.status, 200, "a slow script within the timeout");
    let r = ask(port, &get_req("/echo.php?sleep=2500"));
    assert_eq!(r.status, 504, "{}", s.error_log());
    s.wait_log(
        "upstream timed out (110: Connection timed out) while reading response header from \
         upstream, client: 127.0.0.1, server: localhost, request: \"GET /echo.php?sleep=2500 \
         HTTP/1.1\", upstream: \"fastcgi://",
        1,
    );
}

#[test]
fn configuration_errors_read_as_nginx() {
    let cases = [
        (
            "location / { fastcgi_pass localhost; }",
            "no port in upstream \"localhost\"",
        ),
        (
            "location / { fastcgi_param A b c; }",
            "invalid parameter \"c\"",
        ),
        (
            "location / { fastcgi_pass 127.0.0.1:9; fastcgi_pass 127.0.0.1:9; }",
            "\"fastcgi_pass\" directive is duplicate",
        ),
        (
            "location / { fastcgi_next_upstream bogus; }",
            "invalid value \"bogus\"",
        ),
        (
            "location / { fastcgi_cache $host; fastcgi_pass 127.0.0.1:9; }",
            "no \"fastcgi_cache_key\" for \"fastcgi_cache\"",
        ),
    ];
    for (server, want) in cases {
        let p = Prefix::new();
        p.write_conf(&format!(
            "events {{ }}\nhttp {{ server {{ listen 127.0.0.1:{}; {server} }} }}\n",
            free_port()
        ));
        let out = p.run(&["-t"]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{server}");
        assert!(
            err.contains(want) && err.contains("[emerg]"),
            "{server}: {err}"
        );
    }
}

/// A FastCGI record of `kind` (6: STDOUT, 7: STDERR, 3: END_REQUEST) for request 1.
fn record(kind: u8, content: &[u8]) -> Vec<u8> {
    let pad = (8 - content.len() % 8) % 8;
    let mut r = vec![1, kind, 0, 1];
    r.extend_from_slice(&(content.len() as u16).to_be_bytes());
    r.push(pad as u8);
    r.push(0);
    r.extend_from_slice(content);
    r.extend(std::iter::repeat_n(0u8, pad));
    r
}

/// A FastCGI application written here: each connection reads the request up to its empty
/// STDIN record, then gets the answer `answer` gives for its number, and is closed.
fn bad_app(answer: impl Fn(usize) -> Vec<u8> + Send + 'static) -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for (n, conn) in listener.incoming().enumerate() {
            let Ok(mut c) = conn else { return };
            let _ = c.set_read_timeout(Some(std::time::Duration::from_secs(5)));
            let mut got = Vec::new();
            let mut buf = [0u8; 4096];
            let end = [1u8, 5, 0, 1, 0, 0, 0, 0];
            while !got.windows(8).any(|w| w == end) {
                match std::io::Read::read(&mut c, &mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(k) => got.extend_from_slice(&buf[..k]),
                }
            }
            let _ = std::io::Write::write_all(&mut c, &answer(n));
        }
    });
    port
}

#[test]
fn bad_fastcgi_answers_get_nginx_statuses_and_lines() {
    let port_of = |body: Vec<u8>| bad_app(move |_| body.clone());
    let end = record(3, &[0; 8]);
    let mut flood = Vec::new();
    for i in 0..2000 {
        flood.extend(record(7, format!("noise {i}").as_bytes()));
    }
    flood.extend(record(
        6,
        b"Content-Type: text/plain\r\n\r\nafter the flood",
    ));
    flood.extend(&end);
    let cases: Vec<(&str, u16, Vec<u8>)> = vec![
        ("/version", 502, {
            let mut r = record(6, b"Status: 200\r\n\r\nx");
            r[0] = 2;
            r
        }),
        (
            "/nostatus",
            200,
            [
                record(6, b"Content-Type: text/plain\r\n\r\nplain"),
                end.clone(),
            ]
            .concat(),
        ),
        (
            "/toobig",
            502,
            [
                record(6, format!("X-Big: {}\r\n", "a".repeat(6000)).as_bytes()),
                end.clone(),
            ]
            .concat(),
        ),
        ("/midrecord", 200, {
            let mut r = record(
                6,
                b"Content-Type: text/plain\r\nContent-Length: 100\r\n\r\nstart",
            );
            r.extend_from_slice(&[1, 6, 0, 1, 0, 50, 0, 0, b'p', b'a']);
            r
        }),
        (
            "/badstatus",
            502,
            [record(6, b"Status: abc\r\n\r\n"), end.clone()].concat(),
        ),
        ("/flood", 200, flood),
    ];
    let mut locations = String::new();
    let mut ports = Vec::new();
    for (path, _, body) in &cases {
        let p = port_of(body.clone());
        ports.push(p);
        locations.push_str(&format!(
            "location = {path} {{ fastcgi_pass 127.0.0.1:{p}; }}\n"
        ));
    }
    let port = free_port();
    let conf = format!(
        "daemon off;\nerror_log logs/error.log info;\nevents {{ }}\nhttp {{\n    server {{\n        \
         listen 127.0.0.1:{port};\n        server_name localhost;\n{locations}\n    }}\n}}\n"
    );
    let s = Shoal::start_in(Prefix::new(), &conf, port, &[]);
    for (path, status, _) in &cases {
        let raw = crate::common::client::request_close(port, "GET", path, "");
        assert!(
            raw.starts_with(&format!("HTTP/1.1 {status} ")),
            "{path}: {raw:.300}\n{}",
            s.error_log()
        );
    }
    let want = [
        "upstream sent unsupported FastCGI protocol version: 2 while reading response header from upstream",
        "upstream sent too big header while reading response header from upstream",
        "upstream sent invalid status \"abc\" while reading response header from upstream",
        "FastCGI sent in stderr: \"noise 1999\" while reading response header from upstream",
    ];
    for w in want {
        s.wait_log(w, 1);
    }
    let mid = crate::common::client::request_close(port, "GET", "/midrecord", "");
    assert!(mid.ends_with("startpa"), "{mid:.300}\n{}", s.error_log());
    s.wait_log("prematurely closed", 1);
    let plain = crate::common::client::request_close(port, "GET", "/nostatus", "");
    assert!(plain.contains("\r\nplain\r\n"), "{plain}");
    let flood = crate::common::client::request_close(port, "GET", "/flood", "");
    assert!(flood.contains("after the flood"), "{flood:.300}");
}
