//! What the error log says when HTTP/2 input is refused: nginx 1.22's lines at its level
//! (`info`), malformed requests with the stream's context ("while reading client request
//! headers, client: ..., server: NAME"), connection errors with the connection's ("while
//! processing HTTP/2 connection, client: ..., server: ADDRESS"). Frames written by hand with
//! `h2_hostile.rs`'s client; each refusal checked on the wire too.

use crate::common::{free_port, Shoal};
use crate::h2::conf;
use crate::h2_hostile::{
    get_block, literal, refusal, DATA, END_HEADERS, END_STREAM, H2, HEADERS, PROTOCOL_ERROR,
    SETTINGS,
};

const PRIORITY: u8 = 2;

fn start() -> (Shoal, u16) {
    let port = free_port();
    // /up reads the body before it goes nowhere (nothing listens there).
    let server = format!(
        "server_name localhost;\n location / {{ return 200 ok; }}\n\
         location /up {{ proxy_pass http://127.0.0.1:{}; }}",
        free_port()
    );
    (Shoal::start(&conf(port, "", &server), port), port)
}

/// Waits for the line holding `text`, and checks it is logged at `info`.
fn logged_at_info(s: &Shoal, text: &str) {
    line_at_info(s, text);
}

/// The line holding `text` (waited for), checked to be at `info`.
fn line_at_info(s: &Shoal, text: &str) -> String {
    s.wait_log(text, 1);
    let log = s.error_log();
    let line = log.lines().find(|l| l.contains(text)).expect("the line");
    assert!(line.contains(" [info] "), "{line}");
    line.to_string()
}

/// Waits for the line holding `text` and checks it is logged at `info` and ends with it.
fn logged_at_info_ending(s: &Shoal, text: &str) {
    let line = line_at_info(s, text);
    assert!(line.ends_with(text), "{line}");
}

/// A POST's header block, with `content-length: LEN`.
fn post_block(len: &str) -> Vec<u8> {
    let mut b = Vec::new();
    for (n, v) in [
        (":method", "POST"),
        (":scheme", "http"),
        (":authority", "localhost"),
        (":path", "/up"),
        ("content-length", len),
    ] {
        literal(&mut b, n, v.as_bytes());
    }
    b
}

#[test]
fn malformed_requests_are_logged_as_nginx_logs_them() {
    let (s, port) = start();
    let mut c = H2::connect(port, &[]);
    let head = ", client: 127.0.0.1, server: localhost";
    // `:authority` came before what was refused: nginx has it as the host by then, and says.
    let host = ", host: \"localhost\"";
    c.get(1, "/", &[("X-Foo", "1")]);
    assert_eq!(refusal(&mut c, 1), Some(PROTOCOL_ERROR));
    logged_at_info_ending(
        &s,
        &format!(
            "client sent invalid header name: \"X-Foo\" while reading client request headers{head}{host}"
        ),
    );
    c.get(3, "/", &[("te", "gzip")]);
    assert_eq!(refusal(&mut c, 3), Some(PROTOCOL_ERROR));
    logged_at_info_ending(
        &s,
        &format!("client sent header \"te\" with invalid value: \"gzip\" while reading client request headers{head}{host}"),
    );
    c.get(5, "foo", &[]);
    assert_eq!(refusal(&mut c, 5), Some(PROTOCOL_ERROR));
    logged_at_info_ending(
        &s,
        &format!(
            "client sent invalid :path header: \"foo\" while reading client request headers{head}{host}"
        ),
    );
    let mut b = Vec::new();
    literal(&mut b, ":method", b"GET");
    literal(&mut b, ":scheme", b"http");
    c.frame(HEADERS, END_STREAM | END_HEADERS, 7, &b);
    assert_eq!(refusal(&mut c, 7), Some(PROTOCOL_ERROR));
    // No `:authority` yet, no host.
    logged_at_info_ending(
        &s,
        &format!("client sent no :path header while reading client request headers{head}"),
    );
    // The body: longer, then shorter than its content-length.
    c.frame(HEADERS, END_HEADERS, 9, &post_block("3"));
    c.frame(DATA, END_STREAM, 9, b"123456");
    assert_eq!(refusal(&mut c, 9), Some(PROTOCOL_ERROR));
    logged_at_info(
        &s,
        &format!("client intended to send body data larger than declared{head}"),
    );
    c.frame(HEADERS, END_HEADERS, 11, &post_block("10"));
    c.frame(DATA, END_STREAM, 11, b"12345");
    assert_eq!(refusal(&mut c, 11), Some(PROTOCOL_ERROR));
    logged_at_info(
        &s,
        &format!("client prematurely closed stream: only 5 out of 10 bytes of request body received{head}"),
    );
    // The connection goes on.
    c.frame(HEADERS, END_STREAM | END_HEADERS, 13, &get_block("/", &[]));
    let answer = c.until(|f| f.0 == HEADERS && f.2 == 13);
    assert!(answer.is_some());
    // One line per refusal, as nginx: the body's reader, which saw the stream reset (before
    // the answer above), adds none.
    let log = s.error_log();
    assert!(!log.contains("prematurely closed connection"), "{log}");
}

#[test]
fn connection_errors_and_floods_are_logged_as_nginx_logs_them() {
    let (s, port) = start();
    let conn =
        format!(" while processing HTTP/2 connection, client: 127.0.0.1, server: 127.0.0.1:{port}");
    let mut c = H2::connect(port, &[]);
    c.frame(SETTINGS, 0, 0, &[0; 5]);
    assert!(c.until(|_| false).is_none(), "the connection ends");
    logged_at_info(
        &s,
        &format!("client sent SETTINGS frame with incorrect length 5{conn}"),
    );
    let mut c = H2::connect(port, &[]);
    c.get(5, "/", &[]);
    c.get(3, "/", &[]);
    assert!(c.until(|_| false).is_none(), "the connection ends");
    logged_at_info(
        &s,
        &format!("client sent HEADERS frame with incorrect identifier 3, the last was 5{conn}"),
    );
    // PRIORITY frames, nothing else: work without progress.
    let mut c = H2::connect(port, &[]);
    let mut flood = Vec::new();
    for i in 0..1100u32 {
        flood.extend_from_slice(&H2::frame_bytes(PRIORITY, 0, 2 * i + 1, &[0, 0, 0, 0, 16]));
    }
    c.raw(&flood);
    assert!(c.until(|_| false).is_none(), "the connection ends");
    logged_at_info(&s, &format!("http2 flood detected{conn}"));
}

#[test]
fn refused_heads_and_flow_control_violations_are_logged_as_nginx_logs_them() {
    let port = free_port();
    let server =
        "server_name localhost;\n http2_body_preread_size 100;\n location / { return 200 ok; }";
    let s = Shoal::start(&conf(port, "", server), port);
    let mut c = H2::connect(port, &[]);
    // Our SETTINGS acknowledged: the streams' window is the 100 bytes they announce.
    c.frame(SETTINGS, 1, 0, &[]);
    let head = " while reading client request headers, client: 127.0.0.1, server: localhost";
    // Refused by the checks an HTTP/1 head goes through: nginx's 400 and 405, with the host
    // it had (even one it refused), and the request line once the whole block was read.
    let mut b = Vec::new();
    for (n, v) in [
        (":method", "GET"),
        (":scheme", "http"),
        (":authority", "a..b"),
        (":path", "/"),
    ] {
        literal(&mut b, n, v.as_bytes());
    }
    c.frame(HEADERS, END_STREAM | END_HEADERS, 1, &b);
    assert!(c.until(|f| f.0 == HEADERS && f.2 == 1).is_some());
    logged_at_info_ending(
        &s,
        &format!("client sent invalid host header{head}, host: \"a..b\""),
    );
    let mut b = Vec::new();
    for (n, v) in [
        (":method", "TRACE"),
        (":scheme", "http"),
        (":authority", "localhost"),
        (":path", "/t"),
    ] {
        literal(&mut b, n, v.as_bytes());
    }
    c.frame(HEADERS, END_STREAM | END_HEADERS, 3, &b);
    assert!(c.until(|f| f.0 == HEADERS && f.2 == 3).is_some());
    logged_at_info_ending(
        &s,
        &format!(
            "client sent TRACE method{head}, request: \"TRACE /t HTTP/2.0\", host: \"localhost\""
        ),
    );
    // DATA past the stream's window (100 bytes): the stream is reset with FLOW_CONTROL_ERROR
    // and nginx's line names the frame and the window.
    let mut both = H2::frame_bytes(HEADERS, END_HEADERS, 5, &post_block("1000"));
    both.extend_from_slice(&H2::frame_bytes(DATA, 0, 5, &[b'x'; 1000]));
    c.raw(&both);
    assert_eq!(refusal(&mut c, 5), Some(3));
    logged_at_info_ending(
        &s,
        &format!("client violated flow control for stream 5: received DATA frame length 1000, available window 100 while processing HTTP/2 connection, client: 127.0.0.1, server: 127.0.0.1:{port}"),
    );
}

/// Fields `ignore_invalid_headers` drops are logged at info as nginx 1.22 logs them over
/// HTTP/2 (its text, checked by experiment: the name alone, the host from `:authority`, no
/// request line yet), and the request is answered.
#[test]
fn dropped_fields_are_logged_at_info() {
    let (s, port) = start();
    let mut c = H2::connect(port, &[]);
    c.frame(
        HEADERS,
        END_STREAM | END_HEADERS,
        1,
        &get_block("/", &[("x_y", "1"), ("bad@h", "2"), ("x-ok", "3")]),
    );
    let answer = c.until(|f| f.0 == HEADERS && f.2 == 1);
    assert!(answer.is_some());
    let ctx = ", client: 127.0.0.1, server: localhost, host: \"localhost\"";
    for name in ["x_y", "bad@h"] {
        logged_at_info_ending(
            &s,
            &format!(
                "client sent invalid header: \"{name}\" while reading client request headers{ctx}"
            ),
        );
    }
    assert!(!s.error_log().contains("\"x-ok\""));
}
