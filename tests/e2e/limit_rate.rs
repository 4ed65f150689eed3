//! `limit_rate`, `limit_rate_after`, `set $limit_rate`, an upstream's `X-Accel-Limit-Rate`,
//! `proxy_limit_rate` and `$limit_rate` end to end: answers paced as nginx paces them (the first second's worth at
//! once, then the rate). Times are checked loosely, from below: a paced answer cannot come
//! sooner than its rate allows; nothing asserts how fast an unpaced one is.

use std::io::Read;
use std::time::{Duration, Instant};

use crate::common::upstream::{Answer, Upstream};
use crate::common::{free_port, Client, Prefix, Shoal};

/// 60 KiB of text.
const SIZE: usize = 60 * 1024;

fn start(server: &str) -> Shoal {
    let port = free_port();
    let prefix = Prefix::new();
    std::fs::create_dir_all(prefix.join("html")).unwrap();
    std::fs::write(prefix.join("html/big.txt"), "x".repeat(SIZE)).unwrap();
    let conf = format!(
        "daemon off;\nerror_log logs/error.log info;\nevents {{ }}\n\
         http {{\n    log_format rate '$uri $limit_rate';\n    \
         access_log logs/access.log rate;\n    server {{\n        \
         listen 127.0.0.1:{port};\n        root {};\n{server}\n    }}\n}}\n",
        prefix.join("html").display()
    );
    Shoal::start_in(prefix, &conf, port, &[])
}

/// GETs `path` on a new connection and reads the whole answer: its body's length and how
/// long it took.
fn timed_get(port: u16, path: &str) -> (usize, Duration) {
    let mut c = Client::connect(port);
    let began = Instant::now();
    c.send(format!("GET {path} HTTP/1.0\r\nHost: localhost\r\n\r\n").as_bytes())
        .unwrap();
    let mut out = Vec::new();
    c.stream()
        .try_clone()
        .unwrap()
        .read_to_end(&mut out)
        .unwrap();
    let took = began.elapsed();
    let text = String::from_utf8_lossy(&out);
    assert!(
        text.starts_with("HTTP/1.1 200"),
        "{}",
        &text[..text.len().min(300)]
    );
    let body = text.split_once("\r\n\r\n").map_or(0, |(_, b)| b.len());
    (body, took)
}

#[test]
fn limit_rate_paces_a_file_and_limit_rate_after_frees_its_start() {
    let s = start(
        "location /slow/ { alias html/; limit_rate 20k; }\n\
         location /after/ { alias html/; limit_rate 20k; limit_rate_after 50k; }\n\
         location /set/ { alias html/; set $limit_rate 20k; }\n\
         location /var/ { alias html/; limit_rate $arg_r; }\n\
         location /fast/ { alias html/; }",
    );
    // 60 KiB at 20 KiB/s: 20 KiB at once, then 20 KiB a second: two seconds at least
    // (and no sendfile shortcut around it).
    let (n, took) = timed_get(s.port, "/slow/big.txt");
    assert_eq!(n, SIZE);
    assert!(
        took >= Duration::from_millis(1800),
        "paced answer took {took:?}"
    );
    let (n, took) = timed_get(s.port, "/set/big.txt");
    assert_eq!(n, SIZE);
    assert!(
        took >= Duration::from_millis(1800),
        "set $limit_rate: {took:?}"
    );
    let (n, took) = timed_get(s.port, "/var/big.txt?r=20k");
    assert_eq!(n, SIZE);
    assert!(
        took >= Duration::from_millis(1800),
        "limit_rate $arg_r: {took:?}"
    );
    // 50 KiB free, then 20 KiB/s: the rest fits the first second's budget.
    let (n, took) = timed_get(s.port, "/after/big.txt");
    assert_eq!(n, SIZE);
    assert!(
        took < Duration::from_millis(1800),
        "limit_rate_after: {took:?}"
    );
    // A value that is no size: nginx's line, and no limit.
    let (n, _) = timed_get(s.port, "/var/big.txt?r=fast");
    assert_eq!(n, SIZE);
    s.wait_log("invalid size \"fast\"", 1);
    let (n, _) = timed_get(s.port, "/fast/big.txt");
    assert_eq!(n, SIZE);
    let log = crate::common::wait_for("the access log", || {
        let l = s.prefix.read("logs/access.log");
        (l.lines().count() >= 6).then_some(l)
    });
    assert!(log.contains("/slow/big.txt 20480\n"), "{log}");
    assert!(log.contains("/set/big.txt 20480\n"), "{log}");
    assert!(log.contains("/fast/big.txt 0\n"), "{log}");
}

#[test]
fn x_accel_limit_rate_from_the_upstream() {
    let body = "y".repeat(SIZE);
    let up = Upstream::start(move |r| {
        let a = Answer::ok(body.clone());
        if r.target.contains("paced") {
            a.header("X-Accel-Limit-Rate", "20480")
        } else {
            a
        }
    });
    let s = start(&format!(
        "location / {{ proxy_pass {}; }}\n\
         location /ignored/ {{ proxy_pass {}; proxy_ignore_headers X-Accel-Limit-Rate; }}\n\
         location /read/ {{ proxy_pass {}; proxy_limit_rate 20k; }}",
        up.url(),
        up.url(),
        up.url()
    ));
    // `proxy_limit_rate`: the upstream's answer is read at 20 KiB/s (what came with its head
    // is not counted, as in nginx: a little less than 60 KiB paced).
    let (n, took) = timed_get(s.port, "/read/x");
    assert_eq!(n, SIZE);
    assert!(
        took >= Duration::from_millis(1200),
        "proxy_limit_rate: {took:?}"
    );
    let (n, took) = timed_get(s.port, "/paced");
    assert_eq!(n, SIZE);
    assert!(
        took >= Duration::from_millis(1800),
        "X-Accel-Limit-Rate: {took:?}"
    );
    let (n, took) = timed_get(s.port, "/ignored/paced");
    assert_eq!(n, SIZE);
    assert!(
        took < Duration::from_millis(1800),
        "ignored header: {took:?}"
    );
    // The header is not passed to the client.
    let r = crate::common::client::ask(s.port, "/paced", "");
    assert_eq!(r.header("x-accel-limit-rate"), None);
}

/// GETs `path` over h2c (curl, prior knowledge): the body's length and how long it took.
fn timed_h2c(port: u16, path: &str) -> (usize, Duration) {
    let began = Instant::now();
    let got = crate::h2::h2c(port, path, &[]);
    let took = began.elapsed();
    assert_eq!((got.code, got.status), (0, 200), "{path}");
    (got.body.len(), took)
}

#[test]
fn limit_rate_paces_http2_streams() {
    let s = start(
        "http2 on;\n\
         location /slow/ { alias html/; limit_rate 20k; }\n\
         location /after/ { alias html/; limit_rate 20k; limit_rate_after 50k; }\n\
         location /set/ { alias html/; set $limit_rate 20k; }\n\
         location /fast/ { alias html/; }",
    );
    // As over HTTP/1: 20 KiB at once, then 20 KiB a second.
    let (n, took) = timed_h2c(s.port, "/slow/big.txt");
    assert_eq!(n, SIZE);
    assert!(took >= Duration::from_millis(1800), "h2 paced: {took:?}");
    let (n, took) = timed_h2c(s.port, "/set/big.txt");
    assert_eq!(n, SIZE);
    assert!(took >= Duration::from_millis(1800), "h2 set: {took:?}");
    let (n, took) = timed_h2c(s.port, "/after/big.txt");
    assert_eq!(n, SIZE);
    assert!(took < Duration::from_millis(1800), "h2 after: {took:?}");
    let (n, _) = timed_h2c(s.port, "/fast/big.txt");
    assert_eq!(n, SIZE);
    let log = crate::common::wait_for("the access log", || {
        let l = s.prefix.read("logs/access.log");
        (l.lines().count() >= 4).then_some(l)
    });
    assert!(log.contains("/slow/big.txt 20480\n"), "{log}");
    assert!(log.contains("/set/big.txt 20480\n"), "{log}");
    assert!(log.contains("/fast/big.txt 0\n"), "{log}");
}
