//! gRPC against real nginx: one Python gRPC server (python3-grpcio) behind both, the same
//! calls through each. Over HTTP/2 (h2c), the gRPC client's view of every kind of call, of a
//! peer that is down and of a stream the upstream resets; over HTTP/1.1, the raw answers
//! (chunked, the trailers in the last chunk): heads byte for byte but for `Server` and `Date`,
//! bodies and trailers once unchunked (where a chunk ends depends on how the upstream's
//! frames arrived, for nginx as for shoal).

use std::io::{Read, Write};
use std::net::TcpStream;

use crate::common::free_port;
use crate::diff::{Conf, Pair};
use crate::grpc::{client, client_of, server, Resetter, ALL};

fn locations(live: &str, dead: u16, reset: u16, late: u16) -> String {
    format!(
        "location /test.Echo/ {{ grpc_pass grpc://{live}; }}\n\
         location /down.Echo/ {{ grpc_pass 127.0.0.1:{dead}; }}\n\
         location /reset.Echo/ {{ grpc_pass 127.0.0.1:{reset}; }}\n\
         location /late.Echo/ {{ grpc_pass 127.0.0.1:{late}; }}"
    )
}

#[test]
fn calls_through_nginx_and_shoal_agree() {
    let backend = server(None);
    let resetter = Resetter::start(2);
    let late = Resetter::start_after(2, true);
    let dead = free_port();
    let server_lines = locations(&backend.listen.pass(), dead, resetter.port, late.port);
    let p = Pair::with(Conf {
        server: &server_lines,
        listen: " http2",
        ..Default::default()
    });
    let (np, sp) = p.ports();
    for (service, scenario) in [
        ("test.Echo", "all"),
        ("down.Echo", "unary"),
        ("reset.Echo", "count"),
        ("reset.Echo", "sum"),
        ("late.Echo", "count"),
    ] {
        let n = client_of(service, &format!("127.0.0.1:{np}"), scenario, None);
        let s = client_of(service, &format!("127.0.0.1:{sp}"), scenario, None);
        assert_eq!(n, s, "{service} {scenario}\n{}", p.shoal_log());
        if service == "test.Echo" {
            assert_eq!(n, ALL);
        } else if service == "late.Echo" {
            // The head came: the client's stream is reset.
            assert!(n.starts_with("error status=INTERNAL"), "{n}");
        } else {
            assert!(n.starts_with("error status=UNAVAILABLE"), "{n}");
        }
    }
    for line in [
        "connect() failed (111: Connection refused) while connecting to upstream",
        "upstream rejected request with error 2 while reading response header from upstream",
        "upstream rejected request with error 2 while reading upstream",
    ] {
        assert!(p.nginx_log().contains(line), "nginx: {}", p.nginx_log());
        assert!(p.shoal_log().contains(line), "shoal: {}", p.shoal_log());
    }
}

/// A gRPC message: uncompressed, its length, its bytes.
fn message(body: &[u8]) -> Vec<u8> {
    let mut m = vec![0];
    m.extend_from_slice(&(body.len() as u32).to_be_bytes());
    m.extend_from_slice(body);
    m
}

fn post(path: &str, body: &[u8]) -> Vec<u8> {
    let mut req = format!(
        "POST {path} HTTP/1.1\r\nHost: localhost\r\nTE: trailers\r\n\
         Content-Type: application/grpc\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    )
    .into_bytes();
    req.extend_from_slice(body);
    req
}

/// The answer to `req` (which asks to close) from `port`.
fn raw(port: u16, req: &[u8]) -> Vec<u8> {
    let mut c = TcpStream::connect(("127.0.0.1", port)).expect("connecting");
    c.set_read_timeout(Some(crate::common::WAIT))
        .expect("a timeout");
    c.write_all(req).expect("sending");
    let mut out = Vec::new();
    let _ = c.read_to_end(&mut out);
    out
}

/// An answer with its `Server` and `Date` lines left out and its chunks joined: the head,
/// the body (bytes escaped), the trailers; of an error page, the head without its length.
fn unchunked(answer: &[u8]) -> String {
    let at = answer
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .map_or(answer.len(), |i| i + 4);
    let (head, mut body) = answer.split_at(at);
    let head = String::from_utf8_lossy(head);
    let mut out: String = head
        .lines()
        .filter(|l| !l.starts_with("Server:") && !l.starts_with("Date:"))
        .map(|l| format!("{l}\n"))
        .collect();
    if !head.contains("Transfer-Encoding: chunked") {
        // An error page names its server: its length and text differ by that.
        if !head.starts_with("HTTP/1.1 200") {
            return out
                .lines()
                .filter(|l| !l.starts_with("Content-Length:"))
                .collect::<Vec<_>>()
                .join("\n");
        }
        out.push_str(&body.escape_ascii().to_string());
        return out;
    }
    let mut data = Vec::new();
    loop {
        let Some(eol) = body.windows(2).position(|w| w == b"\r\n") else {
            out.push_str("[unterminated]");
            break;
        };
        let size = usize::from_str_radix(&String::from_utf8_lossy(&body[..eol]), 16).unwrap_or(0);
        body = &body[eol + 2..];
        if size == 0 {
            out.push_str(&format!("[body] {}\n[trailers]\n", data.escape_ascii()));
            out.push_str(&String::from_utf8_lossy(body));
            break;
        }
        data.extend_from_slice(&body[..size.min(body.len())]);
        body = body.get(size + 2..).unwrap_or_default();
    }
    out
}

#[test]
fn http1_clients_get_chunks_and_trailers_as_from_nginx() {
    let backend = server(None);
    let resetter = Resetter::start(2);
    let late = Resetter::start_after(2, true);
    let dead = free_port();
    let server_lines = locations(&backend.listen.pass(), dead, resetter.port, late.port);
    let p = Pair::new(&server_lines);
    let (np, sp) = p.ports();
    let check = |req: Vec<u8>| {
        let (n, s) = (unchunked(&raw(np, &req)), unchunked(&raw(sp, &req)));
        assert_eq!(n, s, "{}", p.shoal_log());
        n
    };
    let echoed = check(post("/test.Echo/Echo", &message(b"hello")));
    assert!(echoed.contains("grpc-status: 0"), "{echoed}");
    assert!(echoed.contains("x-trail: done"), "{echoed}");
    let failed = check(post("/test.Echo/Fail", &message(b"x")));
    assert!(failed.contains("grpc-status: 3"), "{failed}");
    check(post("/test.Echo/Count", &message(b"3")));
    check(post(
        "/test.Echo/Sum",
        &[message(b"a"), message(b"b")].concat(),
    ));
    let down = check(post("/down.Echo/Echo", &message(b"x")));
    assert!(down.starts_with("HTTP/1.1 502"), "{down}");
    let reset = check(post("/reset.Echo/Echo", &message(b"x")));
    assert!(reset.starts_with("HTTP/1.1 502"), "{reset}");
    // Reset after its head: the answer is cut short (no last chunk).
    let cut = check(post("/late.Echo/Echo", &message(b"x")));
    assert!(cut.ends_with("[unterminated]"), "{cut}");
}

/// Waits (a bounded time) until both servers' error logs have `line`; fails if one never
/// does.
fn wait_both(p: &Pair, line: &str) {
    let until = std::time::Instant::now() + crate::common::WAIT;
    while !(p.nginx_log().contains(line) && p.shoal_log().contains(line))
        && std::time::Instant::now() < until
    {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    assert!(p.nginx_log().contains(line), "nginx: {}", p.nginx_log());
    assert!(p.shoal_log().contains(line), "shoal: {}", p.shoal_log());
}

/// The access log both servers write for a test: status, upstream status, request.
const STATUS_LOG: &str = "log_format st '$status $upstream_status $request';";

/// A client's body sent without a length, past `client_max_body_size`: before the answer's
/// head, nginx's 413 (a gRPC client reads UNKNOWN); once the answer started (a bidirectional
/// call answered message by message), the client's stream is reset with INTERNAL_ERROR. Both
/// logged with nginx's line, the upstream named; a body of exactly the limit goes through.
#[test]
fn a_streamed_body_over_client_max_body_size_is_refused_as_by_nginx() {
    let backend = server(None);
    let pass = backend.listen.pass();
    let server_lines = format!(
        "client_max_body_size 10;\naccess_log logs/access.log st;\n\
         location /test.Echo/ {{ grpc_pass {pass}; }}"
    );
    let p = Pair::with(Conf {
        http: STATUS_LOG,
        server: &server_lines,
        listen: " http2",
        ..Default::default()
    });
    let (np, sp) = p.ports();
    for (scenario, expected) in [
        // "hello" as a gRPC message: 5 + 5 bytes, the limit exactly.
        ("unary", "unary=hello\n"),
        // One message of 20 bytes (25 framed) before any answer.
        (
            "bigsum",
            "error status=UNKNOWN message=Received http2 header with status: 413\n",
        ),
        // 7 bytes answered, then 7 more: 14.
        (
            "chat",
            "error status=INTERNAL message=Received RST_STREAM with error code 2\n",
        ),
    ] {
        let n = client(&format!("127.0.0.1:{np}"), scenario, None);
        let s = client(&format!("127.0.0.1:{sp}"), scenario, None);
        assert_eq!(n, expected, "nginx, {scenario}");
        assert_eq!(s, n, "shoal, {scenario}\n{}", p.shoal_log());
    }
    for (bytes, method) in [(25, "Sum"), (14, "Chat")] {
        wait_both(
            &p,
            &format!(
                "client intended to send too large chunked body: {bytes} bytes while sending \
                 request to upstream, client: 127.0.0.1, server: localhost, request: \"POST \
                 /test.Echo/{method} HTTP/2.0\", upstream: \"grpc://{pass}\", host: \"127.0.0.1:"
            ),
        );
    }
    let (n, s) = p.read_both("logs/access.log");
    assert_eq!(
        n,
        "200 200 POST /test.Echo/Echo HTTP/2.0\n413 - POST /test.Echo/Sum HTTP/2.0\n\
         200 200 POST /test.Echo/Chat HTTP/2.0\n"
    );
    assert_eq!(s, n);
}

/// An answer whose head (as it came: frames and encoded fields) is larger than
/// `grpc_buffer_size` is refused: 502 (UNAVAILABLE to a gRPC client) with nginx's line; the
/// same call with a small head goes through, and a larger buffer takes the large head.
#[test]
fn an_answer_head_past_grpc_buffer_size_is_refused_as_by_nginx() {
    let backend = server(None);
    let pass = backend.listen.pass();
    // `big.Echo` is `test.Echo` with a 1k buffer; its answer's `x-pong` is 3000 bytes.
    let server_lines = format!(
        "access_log logs/access.log st;\n\
         location /test.Echo/ {{ grpc_buffer_size 8k; grpc_pass {pass}; }}\n\
         location /big.Echo/ {{ grpc_buffer_size 1k; \
         rewrite ^/big\\.Echo/(.*)$ /test.Echo/$1 break; grpc_pass {pass}; }}"
    );
    let p = Pair::with(Conf {
        http: STATUS_LOG,
        server: &server_lines,
        listen: " http2",
        ..Default::default()
    });
    let (np, sp) = p.ports();
    for (service, scenario, expected) in [
        ("big.Echo", "unary", "unary=hello\n"),
        (
            "big.Echo",
            "bighead",
            "error status=UNAVAILABLE message=Received http2 header with status: 502\n",
        ),
        ("test.Echo", "bighead", "bighead=m\n"),
    ] {
        let n = client_of(service, &format!("127.0.0.1:{np}"), scenario, None);
        let s = client_of(service, &format!("127.0.0.1:{sp}"), scenario, None);
        assert_eq!(n, expected, "nginx, {service} {scenario}");
        assert_eq!(s, n, "shoal, {service} {scenario}\n{}", p.shoal_log());
    }
    wait_both(
        &p,
        &format!(
            "upstream sent too big header while reading response header from upstream, client: \
             127.0.0.1, server: localhost, request: \"POST /big.Echo/Echo HTTP/2.0\", upstream: \
             \"grpc://{pass}\", host: \"127.0.0.1:"
        ),
    );
    let (n, s) = p.read_both("logs/access.log");
    assert_eq!(
        n,
        "200 200 POST /big.Echo/Echo HTTP/2.0\n502 502 POST /big.Echo/Echo HTTP/2.0\n\
         200 200 POST /test.Echo/Echo HTTP/2.0\n"
    );
    assert_eq!(s, n);
}

/// An HTTP/1.1 call whose body comes chunked (the message split across chunks): nginx and
/// shoal stream it upstream and give the same answer; past `client_max_body_size` (a
/// client-streaming call, answered only once its body ended), the same 413 and log line.
#[test]
fn chunked_http1_bodies_as_by_nginx() {
    let backend = server(None);
    let pass = backend.listen.pass();
    let server_lines = format!(
        "access_log logs/access.log st;\n\
         location /test.Echo/ {{ grpc_pass {pass}; }}\n\
         location = /test.Echo/Sum {{ client_max_body_size 8; grpc_pass {pass}; }}"
    );
    let p = Pair::with(Conf {
        http: STATUS_LOG,
        server: &server_lines,
        ..Default::default()
    });
    let (np, sp) = p.ports();
    let chunked = |path: &str, chunks: &[&[u8]]| {
        let mut req = format!(
            "POST {path} HTTP/1.1\r\nHost: localhost\r\nTE: trailers\r\n\
             Content-Type: application/grpc\r\nTransfer-Encoding: chunked\r\n\
             Connection: close\r\n\r\n"
        )
        .into_bytes();
        for c in chunks {
            req.extend_from_slice(format!("{:x}\r\n", c.len()).as_bytes());
            req.extend_from_slice(c);
            req.extend_from_slice(b"\r\n");
        }
        req.extend_from_slice(b"0\r\n\r\n");
        let (n, s) = (unchunked(&raw(np, &req)), unchunked(&raw(sp, &req)));
        assert_eq!(s, n, "{}", p.shoal_log());
        n
    };
    let hello = message(b"hello");
    let echoed = chunked("/test.Echo/Echo", &[&hello[..3], &hello[3..]]);
    assert!(echoed.starts_with("HTTP/1.1 200"), "{echoed}");
    assert!(
        echoed.contains("[body] \\x00\\x00\\x00\\x00\\x05hello"),
        "{echoed}"
    );
    assert!(echoed.contains("grpc-status: 0"), "{echoed}");
    let (a, b) = (message(b"a"), message(b"b"));
    let refused = chunked("/test.Echo/Sum", &[&a, &b]);
    assert!(refused.starts_with("HTTP/1.1 413"), "{refused}");
    wait_both(
        &p,
        "client intended to send too large chunked body: 6+6 bytes",
    );
    let (n, s) = p.read_both("logs/access.log");
    assert_eq!(
        n,
        "200 200 POST /test.Echo/Echo HTTP/1.1\n413 - POST /test.Echo/Sum HTTP/1.1\n"
    );
    assert_eq!(s, n);
}
