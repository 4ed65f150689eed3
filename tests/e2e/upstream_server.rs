//! Tests of the test fixture `common/upstream.rs`: the upstream servers the proxy tests
//! stand behind shoal must themselves be right, or a proxy test proves nothing. Each test talks to
//! an [`Upstream`] directly over a raw socket.

use std::io::{Read, Write};
use std::net::{Shutdown, TcpStream};
use std::os::unix::net::UnixStream;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::common::upstream::{echo_answer, Answer, Upstream};
use crate::common::{fd_targets, open_fds, wait_for, Client, WAIT};

fn connect(u: &Upstream) -> TcpStream {
    let s = TcpStream::connect(("127.0.0.1", u.port())).expect("connecting to the upstream");
    s.set_read_timeout(Some(WAIT)).expect("read timeout");
    s
}

/// Reads up to and including the blank line that ends a response head.
fn read_head(s: &mut impl Read) -> String {
    let mut head = Vec::new();
    let mut b = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        match s.read(&mut b) {
            Ok(1) => head.push(b[0]),
            other => panic!(
                "head cut at {:?}: {other:?}",
                String::from_utf8_lossy(&head)
            ),
        }
    }
    String::from_utf8(head).expect("a UTF-8 head")
}

/// Reads until the peer closes.
fn read_to_eof(s: &mut impl Read) -> Vec<u8> {
    let mut v = Vec::new();
    s.read_to_end(&mut v).expect("reading to EOF");
    v
}

fn read_n(s: &mut impl Read, n: usize) -> Vec<u8> {
    let mut v = vec![0; n];
    s.read_exact(&mut v).expect("reading body bytes");
    v
}

#[test]
fn keep_alive_reuse_is_counted_per_connection() {
    let u = Upstream::hello("hi");
    let mut a = Client::connect(u.port());
    for _ in 0..3 {
        let r = a.get("/a").unwrap();
        assert_eq!((r.status, &r.body[..]), (200, &b"hi"[..]));
    }
    let mut b = Client::connect(u.port());
    assert_eq!(b.get("/b").unwrap().body, b"hi");
    let seen: Vec<(usize, usize, String)> = u
        .requests()
        .iter()
        .map(|r| (r.conn, r.seq, r.target.clone()))
        .collect();
    assert_eq!(
        seen,
        [
            (1, 1, "/a".to_string()),
            (1, 2, "/a".to_string()),
            (1, 3, "/a".to_string()),
            (2, 1, "/b".to_string())
        ]
    );
    assert_eq!(u.accepted(), 2);
    assert_eq!(u.open(), 2);
    drop(a);
    u.wait_open(1);
    drop(b);
    u.wait_open(0);
    assert_eq!(u.accepted(), 2);
}

#[test]
fn connection_close_and_http10_end_the_connection() {
    let u = Upstream::hello("bye");
    let mut s = connect(&u);
    s.write_all(b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .unwrap();
    let all = String::from_utf8(read_to_eof(&mut s)).unwrap();
    assert!(all.ends_with("\r\n\r\nbye"), "{all:?}");
    let mut s = connect(&u);
    s.write_all(b"GET / HTTP/1.0\r\n\r\n").unwrap();
    assert!(read_to_eof(&mut s).ends_with(b"bye"));
    u.wait_open(0);
    assert_eq!(u.requests()[1].version, "HTTP/1.0");
}

#[test]
fn headers_keep_order_and_case_and_echo_shows_the_request() {
    let u = Upstream::echo();
    let mut c = Client::connect(u.port());
    let req = "GET /p?q=1 HTTP/1.1\r\nHost: up\r\nX-Mixed-CASE:  v1 \r\naccept: */*\r\nX-Mixed-Case: v2\r\n\r\n";
    c.send(req.as_bytes()).unwrap();
    let r = c.read_response().unwrap();
    assert_eq!(r.body, req.as_bytes());
    let rec = u.last();
    assert_eq!(
        (rec.method.as_str(), rec.target.as_str()),
        ("GET", "/p?q=1")
    );
    assert_eq!(
        rec.header_names(),
        ["Host", "X-Mixed-CASE", "accept", "X-Mixed-Case"]
    );
    assert_eq!(rec.header_all("x-mixed-case"), ["v1", "v2"]);
    assert_eq!(rec.raw_head, req.as_bytes());
}

#[test]
fn chunked_request_body_is_read_and_decoded() {
    let u = Upstream::echo();
    let mut c = Client::connect(u.port());
    let head = "POST /up HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n";
    c.send(head.as_bytes()).unwrap();
    c.send(b"5;ext=1\r\nhello\r\n6\r\n world\r\n0\r\nX-Trailer: t\r\n\r\n")
        .unwrap();
    let r = c.read_response().unwrap();
    assert_eq!(r.body, format!("{head}hello world").as_bytes());
    let rec = u.last();
    assert!(rec.chunked);
    assert_eq!(rec.body, b"hello world");
    assert_eq!(rec.trailers, [("X-Trailer".to_string(), "t".to_string())]);
    // The connection is still usable after a chunked body.
    assert_eq!(c.get("/next").unwrap().status, 200);
    assert_eq!(u.last().seq, 2);
}

#[test]
fn content_length_bodies_pipelined_in_one_write() {
    let u = Upstream::start(|r| Answer::ok(r.body.clone()));
    let mut c = Client::connect(u.port());
    c.send(b"POST /1 HTTP/1.1\r\nContent-Length: 3\r\n\r\nabcPOST /2 HTTP/1.1\r\nContent-Length: 2\r\n\r\nde")
        .unwrap();
    assert_eq!(c.read_response().unwrap().body, b"abc");
    assert_eq!(c.read_response().unwrap().body, b"de");
    let seen: Vec<(usize, Vec<u8>)> = u.requests().into_iter().map(|r| (r.seq, r.body)).collect();
    assert_eq!(seen, [(1, b"abc".to_vec()), (2, b"de".to_vec())]);
}

#[test]
fn chunked_answer_has_the_given_chunk_sizes_and_trailer() {
    let u = Upstream::start(|_| {
        Answer::ok("abcdefghij")
            .chunked(&[3, 3])
            .trailer("X-Sum", "10")
    });
    let mut s = connect(&u);
    s.write_all(b"GET / HTTP/1.1\r\n\r\n").unwrap();
    let head = read_head(&mut s);
    assert!(
        head.contains("\r\nTransfer-Encoding: chunked\r\n"),
        "{head}"
    );
    assert!(!head.contains("Content-Length"), "{head}");
    let want = b"3\r\nabc\r\n3\r\ndef\r\n4\r\nghij\r\n0\r\nX-Sum: 10\r\n\r\n";
    assert_eq!(read_n(&mut s, want.len()), want);
    // Keep-alive: a second request on the same connection.
    s.write_all(b"GET / HTTP/1.1\r\n\r\n").unwrap();
    read_head(&mut s);
    assert_eq!(u.accepted(), 1);
}

#[test]
fn close_delimited_cut_short_hang_up_and_raw() {
    let u = Upstream::start(|r| match r.target.as_str() {
        "/close" => Answer::ok("until the end").close_delimited(),
        "/short" => Answer::ok("12345").cut_short(100),
        "/hangup" => Answer::hang_up(),
        "/close-announced" => Answer::ok("x").close(),
        _ => Answer::raw("HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\nab"),
    });
    let ask = |path: &str| {
        let mut s = connect(&u);
        s.write_all(format!("GET {path} HTTP/1.1\r\n\r\n").as_bytes())
            .unwrap();
        s
    };
    let mut s = ask("/close");
    let head = read_head(&mut s);
    assert!(!head.contains("Content-Length") && !head.contains("chunked"));
    assert_eq!(read_to_eof(&mut s), b"until the end");

    let mut s = ask("/short");
    assert!(read_head(&mut s).contains("\r\nContent-Length: 100\r\n"));
    assert_eq!(read_to_eof(&mut s), b"12345");

    assert_eq!(read_to_eof(&mut ask("/hangup")), b"");

    let mut s = ask("/close-announced");
    assert!(read_head(&mut s).contains("\r\nConnection: close\r\n"));
    assert_eq!(read_to_eof(&mut s), b"x");

    let mut s = ask("/raw");
    let want = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\nab";
    assert_eq!(read_n(&mut s, want.len()), want);
    u.wait_requests(5);
}

#[test]
fn head_and_204_have_no_body() {
    let u = Upstream::start(|r| {
        if r.target == "/204" {
            Answer::status(204)
        } else {
            Answer::ok("body")
        }
    });
    let mut s = connect(&u);
    s.write_all(b"HEAD / HTTP/1.1\r\n\r\nGET /204 HTTP/1.1\r\n\r\nGET / HTTP/1.1\r\n\r\n")
        .unwrap();
    assert!(read_head(&mut s).contains("\r\nContent-Length: 4\r\n"));
    let h = read_head(&mut s);
    assert!(
        h.starts_with("HTTP/1.1 204 No Content\r\n") && !h.contains("Content-Length"),
        "{h}"
    );
    read_head(&mut s);
    assert_eq!(read_n(&mut s, 4), b"body");
}

#[test]
fn delays_before_the_head_and_in_the_body() {
    let u = Upstream::start(|r| match r.target.as_str() {
        "/head" => Answer::ok("late").delay_head(Duration::from_millis(300)),
        _ => Answer::ok("abcdef")
            .chunked(&[])
            .delay_body(2, Duration::from_millis(300)),
    });
    let mut s = connect(&u);
    let t = Instant::now();
    s.write_all(b"GET /head HTTP/1.1\r\n\r\n").unwrap();
    read_head(&mut s);
    assert!(t.elapsed() >= Duration::from_millis(300));
    assert_eq!(read_n(&mut s, 4), b"late");

    let t = Instant::now();
    s.write_all(b"GET /body HTTP/1.1\r\n\r\n").unwrap();
    read_head(&mut s);
    assert_eq!(read_n(&mut s, 5), b"6\r\nab");
    // The rest is held back: nothing more to read for a while (unless this machine stalled us
    // for the whole delay, which the elapsed time then shows).
    s.set_read_timeout(Some(Duration::from_millis(50))).unwrap();
    let mut b = [0u8; 1];
    let early = s.read(&mut b);
    assert!(
        early.is_err() || t.elapsed() >= Duration::from_millis(300),
        "body bytes came before the delay: {early:?} after {:?}",
        t.elapsed()
    );
    s.set_read_timeout(Some(WAIT)).unwrap();
    let rest = if early.is_ok() {
        &b"def\r\n0\r\n\r\n"[..]
    } else {
        &b"cdef\r\n0\r\n\r\n"[..]
    };
    assert_eq!(read_n(&mut s, rest.len()), rest);
    assert!(t.elapsed() >= Duration::from_millis(300));
}

#[test]
fn upgrade_echoes_every_byte_until_eof() {
    let u = Upstream::start(|_| Answer::upgrade("websocket"));
    let mut s = connect(&u);
    // Bytes sent right behind the request head are echoed too.
    s.write_all(b"GET /ws HTTP/1.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\nearly")
        .unwrap();
    let head = read_head(&mut s);
    assert!(
        head.starts_with("HTTP/1.1 101 Switching Protocols\r\n"),
        "{head}"
    );
    assert!(head.contains("\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"));
    assert_eq!(read_n(&mut s, 5), b"early");
    for msg in [
        &b"ping"[..],
        &[0u8, 255, 13, 10][..],
        &vec![7u8; 100_000][..],
    ] {
        s.write_all(msg).unwrap();
        assert_eq!(read_n(&mut s, msg.len()), msg);
    }
    s.shutdown(Shutdown::Write).unwrap();
    assert_eq!(read_to_eof(&mut s), b"");
    u.wait_open(0);
}

#[test]
fn unix_socket_upstream() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("api.sock");
    let mut u = Upstream::start_unix(&path, echo_answer);
    assert_eq!(u.url(), format!("http://unix:{}:", path.display()));
    let mut s = UnixStream::connect(&path).unwrap();
    s.set_read_timeout(Some(WAIT)).unwrap();
    for _ in 0..2 {
        s.write_all(b"GET /resource HTTP/1.1\r\nHost: api\r\n\r\n")
            .unwrap();
        let head = read_head(&mut s);
        let len: usize = head
            .split("\r\n")
            .find_map(|l| l.strip_prefix("Content-Length: "))
            .unwrap()
            .parse()
            .unwrap();
        assert!(read_n(&mut s, len).starts_with(b"GET /resource HTTP/1.1\r\n"));
    }
    assert_eq!((u.accepted(), u.request_count()), (1, 2));
    u.stop();
    assert!(!path.exists(), "stop() removes the socket file");
    assert_eq!(read_to_eof(&mut s), b"");
}

#[test]
fn stop_closes_every_connection_and_returns_promptly() {
    let mut u = Upstream::start(|r| match r.target.as_str() {
        "/slow" => Answer::ok("never").delay_head(Duration::from_secs(60)),
        "/ws" => Answer::upgrade("x"),
        _ => Answer::ok("ok"),
    });
    let mut idle = Client::connect(u.port());
    idle.get("/").unwrap();
    let mut slow = connect(&u);
    slow.write_all(b"GET /slow HTTP/1.1\r\n\r\n").unwrap();
    let mut ws = connect(&u);
    ws.write_all(b"GET /ws HTTP/1.1\r\n\r\n").unwrap();
    read_head(&mut ws);
    u.wait_requests(3);
    u.wait_open(3);
    let port = u.port();
    let t = Instant::now();
    u.stop();
    assert!(t.elapsed() < Duration::from_secs(2), "{:?}", t.elapsed());
    assert_eq!(u.open(), 0);
    assert!(idle.closed_by_peer());
    assert_eq!(read_to_eof(&mut slow), b"");
    assert_eq!(read_to_eof(&mut ws), b"");
    assert!(TcpStream::connect(("127.0.0.1", port)).is_err());
    u.stop();
}

#[test]
fn malformed_request_gets_400_and_close() {
    let u = Upstream::hello("x");
    let mut s = connect(&u);
    s.write_all(b"NONSENSE\r\n\r\n").unwrap();
    let all = String::from_utf8(read_to_eof(&mut s)).unwrap();
    assert!(all.starts_with("HTTP/1.1 400 "), "{all}");
    assert_eq!(u.request_count(), 0);
}

/// A child process, killed and reaped when dropped.
struct Sleeper(Child);

impl Drop for Sleeper {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts `sh -c SCRIPT` (which ends in `exec sleep`) and returns it once it runs `sleep`.
fn sleeper(script: &str) -> Sleeper {
    let child = Sleeper(
        Command::new("sh")
            .args(["-c", script])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawning sh"),
    );
    let pid = child.0.id();
    wait_for("the child to exec sleep", || {
        let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default();
        (comm.trim() == "sleep").then_some(())
    });
    child
}

#[test]
fn open_fds_counts_another_process() {
    // Descriptors inherited from whatever started the tests vary by machine; the difference
    // between two children started alike does not (dash takes one-digit descriptors only).
    let plain = sleeper("exec sleep 30");
    let more = sleeper("exec 8</dev/null 9</dev/null; exec sleep 30");
    let (a, b) = (plain.0.id(), more.0.id());
    assert_eq!(
        open_fds(b),
        open_fds(a) + 2,
        "{:?} vs {:?}",
        fd_targets(b),
        fd_targets(a)
    );
    assert_eq!(fd_targets(a).len(), open_fds(a));
    assert!(fd_targets(a).iter().filter(|t| *t == "/dev/null").count() >= 3);
    assert_eq!(open_fds(u32::MAX), 0);
}
