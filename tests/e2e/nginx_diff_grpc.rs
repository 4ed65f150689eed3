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
use crate::grpc::{client_of, server, Resetter, ALL};

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
