//! Issue 21's leftovers that the differential suite cannot compare: `$upstream_last_server_name`
//! (NGINX Plus's, 1.25.3: nginx 1.22 has no such variable) and `add_trailer` values taken after
//! the body, as nginx takes them (a `$request_time` in a trailer counts the body's time).

use std::io::{Read, Write};
use std::time::Duration;

use crate::common::upstream::{Answer, Upstream};
use crate::common::{free_port, Shoal};

fn start(http: &str, server: &str) -> (Shoal, u16) {
    let port = free_port();
    let conf = format!(
        "daemon off;\nerror_log logs/error.log info;\nevents {{ }}\nhttp {{\n    \
         log_format last '$uri [$upstream_last_server_name] $upstream_addr';\n    \
         access_log logs/access.log last;\n{http}\n    server {{\n        \
         listen 127.0.0.1:{port};\n{server}\n    }}\n}}\n"
    );
    (Shoal::start(&conf, port), port)
}

/// The whole answer to `GET path` over HTTP/1.1 on a connection closed after it.
fn raw_get(port: u16, path: &str) -> String {
    let mut c = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    c.write_all(
        format!("GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n").as_bytes(),
    )
    .unwrap();
    let mut out = Vec::new();
    let _ = c.read_to_end(&mut out);
    String::from_utf8_lossy(&out).into_owned()
}

#[test]
fn upstream_last_server_name_is_the_last_try_s_server() {
    let up = Upstream::start(|_| Answer::ok("up\n"));
    let up_port = up.url().rsplit(':').next().unwrap().to_string();
    let dead = free_port();
    let (s, port) = start(
        &format!(
            "upstream back {{ server 127.0.0.1:{dead} max_fails=0; server localhost:{up_port} max_fails=0; }}\n\
             upstream one {{ server localhost:{up_port}; }}"
        ),
        &format!(
            "add_header X-Last \"$upstream_last_server_name\";\n\
             location /one/ {{ proxy_pass http://one; }}\n\
             location /retry/ {{ proxy_pass http://back; }}\n\
             location /implicit/ {{ proxy_pass http://localhost:{up_port}; }}\n\
             location /none/ {{ return 200 \"[$upstream_last_server_name]\"; }}"
        ),
    );
    let r = raw_get(port, "/one/x");
    assert!(
        r.contains(&format!("X-Last: localhost:{up_port}\r\n")),
        "{r}"
    );
    // The first server refuses: the name is the second's, the one that answered.
    for _ in 0..2 {
        let r = raw_get(port, "/retry/x");
        assert!(r.starts_with("HTTP/1.1 200"), "{r}");
        assert!(
            r.contains(&format!("X-Last: localhost:{up_port}\r\n")),
            "{r}"
        );
    }
    // `proxy_pass` without a block: its host.
    let r = raw_get(port, "/implicit/x");
    assert!(r.contains("X-Last: localhost\r\n"), "{r}");
    // Not proxied: no value.
    assert!(raw_get(port, "/none/").ends_with("[]"));
    let log = crate::common::wait_for("the access log", || {
        let l = s.prefix.read("logs/access.log");
        (l.lines().count() >= 5).then_some(l)
    });
    assert!(
        log.contains(&format!("/one/x [localhost:{up_port}] ")),
        "{log}"
    );
    assert!(log.contains("/none/ [-] -\n"), "{log}");
}

#[test]
fn add_trailer_takes_request_time_after_the_body() {
    let up = Upstream::start(|_| {
        Answer::ok(vec![b'b'; 4000]).delay_body(1000, Duration::from_millis(1200))
    });
    let (_s, port) = start(
        "",
        &format!(
            "location / {{ proxy_pass {}; add_trailer X-Time $request_time; \
             add_trailer X-Fixed \"[$uri]\"; }}",
            up.url()
        ),
    );
    let r = raw_get(port, "/slow");
    assert!(r.starts_with("HTTP/1.1 200"), "{r}");
    let trailers = r.rsplit_once("\r\n0\r\n").map(|(_, t)| t).unwrap_or("");
    assert!(trailers.contains("X-Fixed: [/slow]\r\n"), "{r}");
    let time: f64 = trailers
        .lines()
        .find_map(|l| l.strip_prefix("X-Time: "))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("no X-Time trailer: {trailers:?}"));
    // The body took 1.2 s: the trailer counts it (with the head it was 0.00x).
    assert!(time >= 1.0, "X-Time: {time}");
}
