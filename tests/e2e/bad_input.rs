//! Bad input end to end, against the real binary over real sockets: a client that dribbles its
//! head, ten thousand idle keep-alive connections, oversized heads and bodies, path traversal in
//! every spelling, and deep pipelines. Each test checks that the bad client gets nginx's answer
//! *and* that it costs the others nothing: well-behaved clients are still answered, promptly.
//!
//! Expected statuses are nginx 1.22.1's, checked by hand against it with the same requests
//! (noted where nginx's answer is not the obvious one). Time bounds are generous and relative
//! ("answered within 2 s while another client is stuck for 1 s"); every loop has a deadline.

use std::io::{self, ErrorKind, Read, Write};
use std::net::TcpStream;
use std::sync::{mpsc, Arc, Barrier};
use std::time::{Duration, Instant};

use crate::common::client::answer_to;
use crate::common::{self, free_port, hard_nofile, raise_nofile, Client, Shoal, INDEX, WAIT};

/// A whole configuration: foreground, errors at `notice`, one server on 127.0.0.1:`port`
/// serving `PREFIX/html`, with extra lines in each context.
fn conf(port: u16, main: &str, events: &str, http: &str, server: &str) -> String {
    format!(
        "daemon off;\n\
         error_log logs/error.log notice;\n\
         {main}\n\
         events {{ {events} }}\n\
         http {{\n\
         \x20   include mime.types;\n\
         \x20   default_type application/octet-stream;\n\
         \x20   keepalive_timeout 65;\n\
         {http}\n\
         \x20   server {{\n\
         \x20       listen 127.0.0.1:{port};\n\
         \x20       server_name localhost;\n\
         \x20       root html;\n\
         {server}\n\
         \x20   }}\n\
         }}\n"
    )
}

/// The resident set of a process in KiB (`VmRSS` in /proc/PID/status).
fn rss_kib(pid: i32) -> u64 {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("/proc/PID/status");
    s.lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().strip_suffix("kB"))
        .and_then(|v| v.trim().parse().ok())
        .expect("a VmRSS line")
}

// ---- 1. a client that dribbles its head --------------------------------------------------

/// How a dribbling client's connection ended.
struct Dribble {
    /// From connect to the first byte of an answer, or to the close.
    after: Duration,
    /// Bytes of the head sent by then.
    sent: usize,
    /// Everything the server sent.
    answer: Vec<u8>,
    /// When it ended.
    ended: Instant,
}

/// Sends `head` one byte every 200 ms (the read timeout paces it: a read that times out is the
/// pause) until the server answers or closes. Bounded by [`WAIT`].
fn dribble(port: u16, head: &[u8], started: mpsc::Sender<()>) -> Dribble {
    let mut s = TcpStream::connect(("127.0.0.1", port)).expect("connect");
    s.set_read_timeout(Some(Duration::from_millis(200)))
        .unwrap();
    s.set_write_timeout(Some(WAIT)).unwrap();
    let t0 = Instant::now();
    let mut sent = 0;
    let mut answer = Vec::new();
    let mut first: Option<Duration> = None;
    let mut buf = [0u8; 4096];
    loop {
        assert!(
            t0.elapsed() < WAIT,
            "the dribbling connection is still open after {WAIT:?}, {sent} bytes sent"
        );
        if first.is_none() && sent < head.len() {
            if s.write_all(&head[sent..sent + 1]).is_err() {
                // The server closed; what it said (if anything) is still to be read.
                first.get_or_insert(t0.elapsed());
            } else {
                sent += 1;
                if sent == 1 {
                    let _ = started.send(());
                }
            }
        }
        match s.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => {
                first.get_or_insert(t0.elapsed());
                answer.extend_from_slice(&buf[..n]);
            }
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
            // A reset after (or instead of) the answer.
            Err(_) => break,
        }
    }
    Dribble {
        after: first.unwrap_or(t0.elapsed()),
        sent,
        answer,
        ended: Instant::now(),
    }
}

#[test]
fn a_dribbling_client_times_out_while_others_are_answered() {
    let port = free_port();
    let _s = Shoal::start(
        &conf(
            port,
            "",
            "worker_connections 256;",
            "",
            "client_header_timeout 1s;",
        ),
        port,
    );
    assert_eq!(common::get(port, "/").unwrap().status, 200);

    // 65 bytes at 5 a second: 13 s to send, far beyond the 1 s timeout.
    let head = b"GET /index.html HTTP/1.1\r\nHost: localhost\r\nUser-Agent: dribble\r\n\r\n";
    let (tx, rx) = mpsc::channel();
    let dribbler = std::thread::spawn(move || dribble(port, head, tx));
    rx.recv_timeout(WAIT).expect("the dribbler started");

    // Twenty clients, started over the first half second of the dribble.
    let others: Vec<_> = (0..20u64)
        .map(|i| {
            std::thread::spawn(move || {
                std::thread::sleep(Duration::from_millis(25 * i));
                let started = Instant::now();
                let r = common::get(port, "/index.html");
                let took = started.elapsed();
                (started, took, r)
            })
        })
        .collect();
    let others: Vec<_> = others.into_iter().map(|t| t.join().unwrap()).collect();
    let d = dribbler.join().unwrap();

    for (i, (started, took, r)) in others.iter().enumerate() {
        let r = r
            .as_ref()
            .unwrap_or_else(|e| panic!("client {i} while one dribbles: {e}"));
        assert_eq!(r.status, 200, "client {i}");
        assert_eq!(r.body, INDEX.as_bytes(), "client {i}");
        assert!(
            *took < Duration::from_secs(2),
            "client {i} took {took:?} while another client dribbled"
        );
        assert!(
            *started < d.ended,
            "client {i} started after the dribble ended: not a test of anything"
        );
    }

    eprintln!(
        "dribble cut off after {:?}, {} bytes sent; answer: {:?}",
        d.after,
        d.sent,
        String::from_utf8_lossy(&d.answer).lines().next()
    );
    // Refused at the timeout: not before it, and not after the whole head.
    assert!(
        d.after >= Duration::from_millis(800) && d.after < Duration::from_secs(5),
        "the dribbling client was cut off after {:?} (client_header_timeout 1s)",
        d.after
    );
    assert!(d.sent < head.len(), "the whole head was sent: no timeout");
    // nginx closes without a word (its 408 is only logged).
    assert!(
        d.answer.is_empty(),
        "{}",
        String::from_utf8_lossy(&d.answer)
    );
}

/// Shoal with `server` lines in its server, and one connection to it (reads give up after
/// 60 s).
fn start_and_connect(server: &str) -> (Shoal, TcpStream) {
    let port = free_port();
    let shoal = Shoal::start(&conf(port, "", "worker_connections 256;", "", server), port);
    let s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    (shoal, s)
}

/// Asks for `/index.html` on `s`, kept alive, and checks the answer.
fn ask_index(s: &mut TcpStream) {
    s.write_all(b"GET /index.html HTTP/1.1\r\nHost: localhost\r\n\r\n")
        .unwrap();
    let (status, body) = read_small_answer(s).unwrap();
    assert_eq!((status, body.as_slice()), (200, INDEX.as_bytes()));
}

/// After a keep-alive answer, the next head's `client_header_timeout` starts with its first
/// bytes: a head left half-sent is cut off at that timeout, not at `keepalive_timeout`.
#[test]
fn a_half_head_after_keepalive_times_out_at_client_header_timeout() {
    let (_s, mut s) = start_and_connect("client_header_timeout 1s; keepalive_timeout 300s;");
    ask_index(&mut s);
    // Idle for a while (under keepalive_timeout, past client_header_timeout), then half a head.
    std::thread::sleep(Duration::from_millis(1500));
    s.write_all(b"GET /index.html HTTP/1.1\r\nHost: loc")
        .unwrap();
    let sent = Instant::now();
    let mut rest = Vec::new();
    let end = s.read_to_end(&mut rest);
    let after = sent.elapsed();
    assert!(
        end.is_ok()
            || matches!(
                end.as_ref().map_err(|e| e.kind()),
                Err(ErrorKind::ConnectionReset)
            ),
        "the connection ends with a close: {end:?} after {after:?}"
    );
    // Not at once (the idle time before the bytes does not count), and long before the 300 s
    // keep-alive timeout.
    assert!(
        after >= Duration::from_millis(800) && after < Duration::from_secs(30),
        "half a head was cut off after {after:?} (client_header_timeout 1s)"
    );
}

/// `keepalive_timeout` counts from the last answer: a connection that was busy past the first
/// wait's deadline still gets its whole timeout after its last request, and is then closed.
#[test]
fn keepalive_timeout_counts_from_the_last_answer() {
    let (_s, mut s) = start_and_connect("keepalive_timeout 2s;");
    // Requests every 0.6 s for 3 s: past the first wait's 2 s deadline.
    ask_index(&mut s);
    let first = Instant::now();
    while first.elapsed() < Duration::from_secs(3) {
        std::thread::sleep(Duration::from_millis(600));
        ask_index(&mut s);
    }
    let last = Instant::now();
    let mut rest = Vec::new();
    let end = s.read_to_end(&mut rest);
    let after = last.elapsed();
    assert!(
        end.is_ok() && rest.is_empty(),
        "closed quietly: {end:?}, {rest:?}"
    );
    assert!(
        after >= Duration::from_millis(1800) && after < Duration::from_secs(20),
        "closed {after:?} after the last answer (keepalive_timeout 2s)"
    );
}

// ---- 2. ten thousand idle keep-alive connections -----------------------------------------

const IDLE: usize = 10_000;

/// Reads one answer whose body is framed by Content-Length, with a small buffer (there are
/// thousands of these connections). Returns the status and the body.
fn read_small_answer(s: &mut TcpStream) -> io::Result<(u16, Vec<u8>)> {
    let mut got = Vec::with_capacity(256);
    let mut buf = [0u8; 512];
    loop {
        if let Some(end) = got.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&got[..end]).into_owned();
            let status: u16 = head
                .get(9..12)
                .and_then(|c| c.parse().ok())
                .ok_or_else(|| io::Error::other(format!("bad head {head:?}")))?;
            let len: usize = head
                .lines()
                .find_map(|l| l.strip_prefix("Content-Length: "))
                .and_then(|v| v.parse().ok())
                .ok_or_else(|| io::Error::other(format!("no Content-Length in {head:?}")))?;
            let mut body = got.split_off(end + 4);
            while body.len() < len {
                let n = s.read(&mut buf)?;
                if n == 0 {
                    return Err(io::Error::new(
                        ErrorKind::UnexpectedEof,
                        "closed in the body",
                    ));
                }
                body.extend_from_slice(&buf[..n]);
            }
            return Ok((status, body));
        }
        let n = s.read(&mut buf)?;
        if n == 0 {
            return Err(io::Error::new(
                ErrorKind::UnexpectedEof,
                "closed in the head",
            ));
        }
        got.extend_from_slice(&buf[..n]);
    }
}

/// The `Waiting` and `Active connections` figures of a stub_status page.
fn waiting_and_active(body: &[u8]) -> (u64, u64) {
    let text = String::from_utf8_lossy(body);
    let figure = |after: &str| -> u64 {
        text.split_once(after)
            .and_then(|(_, r)| r.split_whitespace().next())
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("no {after:?} in {text:?}"))
    };
    (figure("Waiting: "), figure("Active connections: "))
}

#[test]
fn ten_thousand_idle_keepalive_connections_do_not_stop_an_active_client() {
    raise_nofile(IDLE as u64 + 2_000);
    // 30000, or as much as shoal may take without privilege (setrlimit sets the hard limit
    // too, as nginx does, and fails above ours: `[alert] setrlimit(...) failed`).
    let nofile = hard_nofile().min(30_000);
    assert!(nofile > IDLE as u64 + 100, "open files limited to {nofile}");
    let port = free_port();
    let s = Shoal::start(
        &conf(
            port,
            &format!("worker_rlimit_nofile {nofile};"),
            "worker_connections 20000;",
            "",
            "location = /k { return 200 \"k\"; }\n\
             location = /s { stub_status; }",
        ),
        port,
    );

    // Open them in batches below the listen backlog: connect, ask, read each answer.
    let t0 = Instant::now();
    let mut idle: Vec<TcpStream> = Vec::with_capacity(IDLE);
    let req = b"GET /k HTTP/1.1\r\nHost: localhost\r\n\r\n";
    while idle.len() < IDLE {
        assert!(
            t0.elapsed() < Duration::from_secs(60),
            "only {} connections opened in 60 s",
            idle.len()
        );
        let batch = (IDLE - idle.len()).min(250);
        let mut fresh: Vec<TcpStream> = (0..batch)
            .map(|i| {
                let c = TcpStream::connect(("127.0.0.1", port))
                    .unwrap_or_else(|e| panic!("connection {}: {e}", idle.len() + i));
                c.set_read_timeout(Some(WAIT)).unwrap();
                c.set_write_timeout(Some(WAIT)).unwrap();
                c
            })
            .collect();
        for c in &mut fresh {
            c.write_all(req).expect("sending a request");
        }
        for (i, c) in fresh.iter_mut().enumerate() {
            let (status, body) = read_small_answer(c)
                .unwrap_or_else(|e| panic!("connection {}: {e}", idle.len() + i));
            assert_eq!((status, &body[..]), (200, &b"k"[..]));
        }
        idle.extend(fresh);
    }
    let opened_in = t0.elapsed();

    // The status page, asked on the active connection (itself writing while it asks).
    let mut active = Client::connect(port);
    let deadline = Instant::now() + WAIT;
    let (waiting, total) = loop {
        let r = active.get("/s").expect("GET /s");
        assert_eq!(r.status, 200);
        let (waiting, total) = waiting_and_active(&r.body);
        if waiting == IDLE as u64 || Instant::now() > deadline {
            break (waiting, total);
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(
        (waiting, total),
        (IDLE as u64, IDLE as u64 + 1),
        "stub_status (Waiting, Active) with {IDLE} idle connections and the asking one"
    );

    // 200 sequential requests on the active connection, each answered promptly.
    let mut slowest = Duration::ZERO;
    for i in 0..200 {
        let t = Instant::now();
        let r = active
            .get("/index.html")
            .unwrap_or_else(|e| panic!("request {i} among {IDLE} idle connections: {e}"));
        let took = t.elapsed();
        assert_eq!(r.status, 200, "request {i}");
        assert_eq!(r.body, INDEX.as_bytes(), "request {i}");
        assert!(
            took < Duration::from_secs(1),
            "request {i} took {took:?} with {IDLE} idle connections open"
        );
        slowest = slowest.max(took);
    }

    // The idle ones are still alive: every hundredth asks again.
    for (i, c) in idle.iter_mut().enumerate().step_by(100) {
        c.write_all(req).expect("sending on an idle connection");
        let (status, body) =
            read_small_answer(c).unwrap_or_else(|e| panic!("idle connection {i}: {e}"));
        assert_eq!((status, &body[..]), (200, &b"k"[..]), "idle connection {i}");
    }
    assert!(
        !s.error_log().contains("[alert]") && !s.error_log().contains("[crit]"),
        "{}",
        s.error_log()
    );
    eprintln!("{IDLE} connections opened in {opened_in:?}; slowest of 200 requests: {slowest:?}");
}

// ---- 3. oversized requests ---------------------------------------------------------------

#[test]
fn oversized_heads_and_bodies_are_refused_within_their_limits() {
    let port = free_port();
    let s = Shoal::start(
        &conf(
            port,
            "worker_rlimit_nofile 4096;",
            "worker_connections 1024;",
            "large_client_header_buffers 4 8k;\nclient_max_body_size 1m;",
            "",
        ),
        port,
    );
    assert_eq!(common::get(port, "/").unwrap().status, 200);

    // 200 connections at once, each with a 64 KB header line (the limit is 8 KB a line).
    let mut big = b"GET /index.html HTTP/1.1\r\nHost: localhost\r\nX-Big: ".to_vec();
    big.resize(big.len() + 64 * 1024, b'a');
    big.extend_from_slice(b"\r\n\r\n");
    let big = Arc::new(big);
    let before = rss_kib(s.pid);
    let clients = 200;
    let go = Arc::new(Barrier::new(clients + 1));
    let threads: Vec<_> = (0..clients)
        .map(|_| {
            let (big, go) = (big.clone(), go.clone());
            std::thread::spawn(move || {
                let mut c = Client::connect(port);
                go.wait();
                let _ = c.send(&big);
                c.read_response()
            })
        })
        .collect();
    go.wait();
    let mut peak = before;
    while !threads.iter().all(|t| t.is_finished()) {
        peak = peak.max(rss_kib(s.pid));
        std::thread::sleep(Duration::from_millis(2));
    }
    for (i, t) in threads.into_iter().enumerate() {
        let r = t
            .join()
            .unwrap()
            .unwrap_or_else(|e| panic!("client {i} with a 64 KB header line: {e}"));
        assert_eq!(r.status, 400, "client {i}");
        assert!(
            String::from_utf8_lossy(&r.body).contains("Request Header Or Cookie Too Large"),
            "client {i}: {}",
            String::from_utf8_lossy(&r.body)
        );
    }
    peak = peak.max(rss_kib(s.pid));
    eprintln!("RSS {before} KiB before 200 oversized heads, {peak} KiB at most during");
    assert!(
        peak - before < 64 * 1024,
        "RSS grew from {before} KiB to {peak} KiB while refusing 200 oversized heads"
    );

    // Refused as the line passes the limit, not when it ends: 12 KB of a line that never ends.
    let mut c = Client::connect(port);
    let mut part = b"GET /index.html HTTP/1.1\r\nHost: localhost\r\nX-Big: ".to_vec();
    part.resize(part.len() + 12 * 1024, b'a');
    c.send(&part).unwrap();
    let r = c.read_response().expect("a 400 before the line ends");
    assert_eq!(r.status, 400);

    // A 2 GB body declared against `client_max_body_size 1m`: 413 before any body byte.
    let mut c = Client::connect(port);
    c.send(b"POST /index.html HTTP/1.1\r\nHost: localhost\r\nContent-Length: 2147483648\r\n\r\n")
        .unwrap();
    let r = c.read_response().expect("a 413 without sending the body");
    assert_eq!(r.status, 413);
    assert!(String::from_utf8_lossy(&r.body).contains("413 Request Entity Too Large"));
    assert_eq!(r.header("connection"), Some("close"));

    // A 100 KB URI: 414. One under the 8 KB line limit is an ordinary 404.
    let long = format!(
        "GET /{} HTTP/1.1\r\nHost: localhost\r\n\r\n",
        "a".repeat(100 * 1024)
    );
    let r = answer_to(port, long.as_bytes());
    assert_eq!(r.status, 414);
    assert!(String::from_utf8_lossy(&r.body).contains("414 Request-URI Too Large"));
    let fits = format!(
        "GET /{} HTTP/1.1\r\nHost: localhost\r\n\r\n",
        "a".repeat(7 * 1024)
    );
    assert_eq!(answer_to(port, fits.as_bytes()).status, 404);

    // And the server is still answering.
    assert_eq!(common::get(port, "/").unwrap().status, 200);
}

// ---- 4. path traversal -------------------------------------------------------------------

const SECRET: &str = "shoal-test-secret-5f1c0e";

#[test]
fn path_traversal_never_leaves_the_root() {
    let port = free_port();
    let prefix = common::Prefix::new();
    // The secret sits next to the root, outside it.
    std::fs::write(prefix.join("secret"), SECRET).unwrap();
    std::fs::create_dir(prefix.join("html/a")).unwrap();
    std::fs::write(prefix.join("html/a/in.txt"), "inside\n").unwrap();
    for l in ["link_on", "link_off"] {
        std::os::unix::fs::symlink("../secret", prefix.join("html").join(l)).unwrap();
    }
    for l in ["up_on", "up_off"] {
        std::os::unix::fs::symlink("..", prefix.join("html").join(l)).unwrap();
    }
    let c = conf(
        port,
        "",
        "worker_connections 256;",
        "",
        "location = /link_on { disable_symlinks on; }\n\
         location /up_on/ { disable_symlinks on; }",
    );
    let s = Shoal::start_in(prefix, &c, port, &[]);
    assert_eq!(common::get(port, "/a/in.txt").unwrap().body, b"inside\n");

    // (URI, nginx 1.22.1's status). nginx refuses a `..` that climbs above `/` with 400,
    // whether spelled plainly or percent-encoded (`%2f` counts as a slash there), and a NUL
    // anywhere; a backslash is not a separator on Unix: `\..\secret` (no leading slash) is not a
    // URI at all, and an encoded one names a file that does not exist.
    let cases = [
        ("/../secret", 400),
        ("/%2e%2e/secret", 400),
        ("/..%2fsecret", 400),
        ("/%2E%2E%2Fsecret", 400),
        ("/a/../../secret", 400),
        ("/a/%2e%2e/%2e%2e/secret", 400),
        ("/./../secret", 400),
        ("/%00secret", 400),
        ("/secret%00.html", 400),
        ("//../secret", 400),
        ("\\..\\secret", 400),
        ("http://localhost/../secret", 400),
        ("/..\\secret", 404),
        ("/%2e%2e%5csecret", 404),
        ("/a/..%5c..%5csecret", 404),
    ];
    for (uri, want) in cases {
        for version in ["HTTP/1.1", "HTTP/1.0"] {
            let raw = format!("GET {uri} {version}\r\nHost: localhost\r\n\r\n");
            let r = answer_to(port, raw.as_bytes());
            let body = String::from_utf8_lossy(&r.body);
            assert!(
                !body.contains(SECRET),
                "{uri} {version} returned the secret"
            );
            assert_eq!(r.status, want, "{uri} {version}: {body}");
        }
    }

    // Symbolic links out of the root: refused with `disable_symlinks on`, followed without.
    let r = common::get(port, "/link_on").unwrap();
    assert_eq!(r.status, 403);
    assert!(!String::from_utf8_lossy(&r.body).contains(SECRET));
    // A link to a directory on the way: nginx's O_DIRECTORY|O_NOFOLLOW open fails with ENOTDIR,
    // a 404.
    let r = common::get(port, "/up_on/secret").unwrap();
    assert_eq!(r.status, 404);
    assert!(!String::from_utf8_lossy(&r.body).contains(SECRET));
    // Other spellings of the refused link reach the same location, and are refused too.
    for (uri, want) in [
        ("/link_o%6e", 403),
        ("/a/../link_on", 403),
        ("//link_on", 403),
        ("/./link_on", 403),
        ("/up_on/./secret", 404),
    ] {
        let r = common::get(port, uri).unwrap();
        assert_eq!(r.status, want, "{uri}");
        assert!(!String::from_utf8_lossy(&r.body).contains(SECRET), "{uri}");
    }
    let r = common::get(port, "/link_off").unwrap();
    assert_eq!((r.status, &r.body[..]), (200, SECRET.as_bytes()));
    let r = common::get(port, "/up_off/secret").unwrap();
    assert_eq!((r.status, &r.body[..]), (200, SECRET.as_bytes()));
    assert!(!s.error_log().contains("[alert]"), "{}", s.error_log());
}

// ---- 5. pipelining -----------------------------------------------------------------------

/// Sends `depth` requests in one go on one connection (distinct URIs, a static file among them,
/// the last asking to close) and reads every answer in order.
fn pipeline(port: u16, depth: usize) {
    let uri = |i: usize| {
        if i % 7 == 3 {
            "/index.html".to_string()
        } else {
            format!("/p/{depth}/{i}")
        }
    };
    let mut all = Vec::new();
    for i in 0..depth {
        let close = if i + 1 == depth {
            "Connection: close\r\n"
        } else {
            ""
        };
        all.extend_from_slice(
            format!("GET {} HTTP/1.1\r\nHost: localhost\r\n{close}\r\n", uri(i)).as_bytes(),
        );
    }
    let t0 = Instant::now();
    let mut c = Client::connect(port);
    // Odd-sized writes, so heads straddle reads.
    for chunk in all.chunks(777) {
        c.send(chunk).expect("sending the pipeline");
    }
    for i in 0..depth {
        let r = c
            .read_response()
            .unwrap_or_else(|e| panic!("depth {depth}: answer {i}: {e}"));
        assert_eq!(r.status, 200, "depth {depth}: answer {i}");
        let want = if i % 7 == 3 {
            INDEX.as_bytes().to_vec()
        } else {
            uri(i).into_bytes()
        };
        assert_eq!(
            String::from_utf8_lossy(&r.body),
            String::from_utf8_lossy(&want),
            "depth {depth}: answer {i} out of order"
        );
    }
    assert!(
        c.closed_by_peer(),
        "depth {depth}: open after Connection: close"
    );
    let took = t0.elapsed();
    assert!(
        took < Duration::from_secs(5),
        "depth {depth}: {took:?} for the whole pipeline"
    );
}

#[test]
fn deep_pipelines_are_answered_in_order() {
    let port = free_port();
    let _s = Shoal::start(
        &conf(
            port,
            "",
            "worker_connections 256;",
            "",
            "location /p/ { return 200 \"$uri\"; }",
        ),
        port,
    );
    for depth in [16, 50, 200] {
        pipeline(port, depth);
    }
}

// ---- malformed request bodies ------------------------------------------------------------

/// A chunked body whose chunk size is not hex, or overflows: nginx 1.22.1 answers 400 (it reads
/// the body to discard it, wherever the request was going) and closes.
#[test]
fn a_malformed_chunked_body_gets_400() {
    let port = free_port();
    let _s = Shoal::start(
        &conf(
            port,
            "",
            "worker_connections 256;",
            "",
            "location /p/ { return 200 \"$uri\"; }",
        ),
        port,
    );
    for (uri, chunk) in [
        ("/index.html", "zz"),
        ("/p/1", "zz"),
        ("/p/1", "ffffffffffffffffffff"),
    ] {
        let raw = format!(
            "GET {uri} HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: chunked\r\n\r\n{chunk}\r\n"
        );
        let mut c = Client::connect(port);
        c.send(raw.as_bytes()).unwrap();
        let r = c
            .read_response()
            .unwrap_or_else(|e| panic!("{uri} with chunk size {chunk:?}: no answer ({e})"));
        assert_eq!(r.status, 400, "{uri} with chunk size {chunk:?}");
        assert_eq!(r.header("connection"), Some("close"));
    }
}
