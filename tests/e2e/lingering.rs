//! Lingering close end to end: a body refused with 413 before it is read must not turn the
//! answer into a reset. shoal answers at once, stops writing, and reads and drops what the
//! client still sends (`lingering_close on`, the default), so the client, still busy sending
//! megabytes, finishes sending and reads a complete 413 every time instead of `ECONNRESET`.
//!
//! The client sends its whole request before it reads (as curl does without `Expect`); nothing
//! waits on a fixed delay.

use crate::common::client::request;
use crate::common::{self, conf_with, free_port, Client, Shoal};

const BODY: usize = 5 * 1024 * 1024;

/// An answer: status, headers (lowercased names) and body.
type Answer = (u16, Vec<(String, String)>, Vec<u8>);

/// Sends a POST of `BODY` bytes with Content-Length (no `Expect`), all of it, as a client that
/// does not look at the answer before it has sent its request (curl without `Expect`), then
/// reads the answer. Returns its status, headers and body, or what went wrong: a write that
/// failed (the server closed with unread input, which is a reset: curl gives up there with
/// "Connection reset by peer"), or a read cut short.
fn post_too_large(port: u16, path: &str) -> Result<Answer, String> {
    let mut c = Client::connect(port);
    let head = request(
        "POST",
        path,
        &format!("Content-Type: application/octet-stream\r\nContent-Length: {BODY}\r\n"),
    );
    c.send(head.as_bytes())
        .map_err(|e| format!("sending the head: {e}"))?;
    let chunk = vec![b'x'; 64 * 1024];
    let mut sent = 0;
    while sent < BODY {
        c.send(&chunk)
            .map_err(|e| format!("sending the body, after {sent} bytes: {e}"))?;
        sent += chunk.len();
    }
    let r = c.read_response().map_err(|e| format!("the answer: {e}"))?;
    Ok((r.status, r.headers, r.body))
}

#[test]
fn a_refused_large_body_gets_a_complete_413_every_time() {
    let port = free_port();
    let s = Shoal::start(&conf_with(port, "", "client_max_body_size 1k;"), port);
    let mut failures = Vec::new();
    for i in 0..20 {
        match post_too_large(port, "/upload") {
            Ok((status, headers, body)) => {
                assert_eq!(status, 413, "try {i}");
                let h = |n: &str| {
                    headers
                        .iter()
                        .find(|(k, _)| k == n)
                        .map(|(_, v)| v.as_str())
                };
                assert_eq!(h("connection"), Some("close"), "try {i}: {headers:?}");
                assert_eq!(h("content-type"), Some("text/html"), "try {i}");
                let page = String::from_utf8_lossy(&body);
                assert!(
                    page.contains("<title>413 Request Entity Too Large</title>"),
                    "try {i}: {page}"
                );
            }
            Err(e) => failures.push(format!("try {i}: {e}")),
        }
    }
    assert!(
        failures.is_empty(),
        "{} of 20 tries did not read a complete 413:\n{}",
        failures.len(),
        failures.join("\n")
    );
    // Each refusal is logged as nginx does.
    let log = s.error_log();
    assert_eq!(
        log.matches("client intended to send too large body: 5242880 bytes")
            .count(),
        20,
        "{log}"
    );
    // And the server still answers.
    assert_eq!(common::get(port, "/index.html").unwrap().status, 200);
}

/// The same with the limit in a location, and with `lingering_close always`.
#[test]
fn a_location_limit_and_lingering_close_always() {
    let port = free_port();
    let s = Shoal::start(
        &conf_with(
            port,
            "",
            "lingering_close always;\n\
             lingering_time 30s;\n\
             lingering_timeout 5s;\n\
             location /small/ { client_max_body_size 1k; }",
        ),
        port,
    );
    for i in 0..5 {
        let (status, _, _) =
            post_too_large(port, "/small/x").unwrap_or_else(|e| panic!("try {i}: {e}"));
        assert_eq!(status, 413, "try {i}");
    }
    // Elsewhere the default 1m still refuses 5 MB.
    let (status, _, _) = post_too_large(port, "/other").unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(status, 413);
    assert!(common::get(port, "/index.html").is_ok());
    drop(s);
}

/// `lingering_close off` is accepted; the server answers and keeps running (whether the client
/// sees the 413 or a reset is then up to the timing of the close, as in nginx).
#[test]
fn lingering_close_off_is_accepted() {
    let port = free_port();
    let p = common::Prefix::new();
    p.write_conf(&conf_with(
        port,
        "",
        "lingering_close off;\nclient_max_body_size 1k;",
    ));
    let out = p.run(&["-t"]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut s = Shoal::start_in(
        p,
        &conf_with(port, "", "lingering_close off;\nclient_max_body_size 1k;"),
        port,
        &[],
    );
    for _ in 0..3 {
        if let Ok((status, _, _)) = post_too_large(port, "/upload") {
            assert_eq!(status, 413);
        }
    }
    assert_eq!(common::get(port, "/index.html").unwrap().status, 200);
    assert!(!s.exited(), "shoal is still running");
}

/// A value other than on, off and always is refused with nginx's message.
#[test]
fn lingering_close_bad_value_is_refused() {
    let port = free_port();
    let q = common::Prefix::new();
    q.write_conf(&conf_with(port, "", "lingering_close sometimes;"));
    let out = q.run(&["-t"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.starts_with(&format!(
            "shoal: [emerg] invalid value \"sometimes\" in {}:13\n",
            q.join("conf/shoal.conf").display()
        )),
        "{err}"
    );
}
