//! Hostile clients and upstreams (issue 18): bodies that lie about their size, absolute-form
//! targets, clients that stop reading or sending, more clients than `worker_connections`,
//! interim answers from an upstream, head shapes nginx answers at once, a dying worker.
//!
//! Each test failed on the build before the fix it checks. Expected answers and log lines are
//! nginx 1.22.1's, checked by hand against it with the same bytes (noted where shoal does
//! better than nginx). Every wait is bounded; no test sleeps to "let the server settle".

use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use crate::common::client::{exchange, status_of};
use crate::common::upstream::{Answer, Upstream};
use crate::common::{self, free_port, wait_for, Client, Shoal, WAIT};

/// A whole configuration: foreground, errors at `info`, one server on 127.0.0.1:`port`
/// serving `PREFIX/html`, with extra lines in `events`, `http` and the server.
fn conf(port: u16, events: &str, http: &str, server: &str) -> String {
    format!(
        "daemon off;\n\
         error_log logs/error.log info;\n\
         events {{ {events} }}\n\
         http {{\n\
         \x20   include mime.types;\n\
         \x20   access_log logs/access.log;\n\
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

/// Writes a chunked body of `total` bytes in chunks of `chunk` bytes, stopping at the first
/// write the server refuses (it answered and closed); then reads the answer. Returns the
/// answer and how many body bytes went out.
fn send_chunked(port: u16, path: &str, total: usize, chunk: usize) -> (Vec<u8>, usize) {
    let mut s = TcpStream::connect(("127.0.0.1", port)).expect("connect");
    s.set_read_timeout(Some(WAIT)).unwrap();
    s.set_write_timeout(Some(WAIT)).unwrap();
    let head =
        format!("POST {path} HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: chunked\r\n\r\n");
    s.write_all(head.as_bytes()).unwrap();
    let data = vec![b'x'; chunk];
    let mut sent = 0;
    while sent < total {
        let mut piece = format!("{chunk:x}\r\n").into_bytes();
        piece.extend_from_slice(&data);
        piece.extend_from_slice(b"\r\n");
        if s.write_all(&piece).is_err() {
            break;
        }
        sent += chunk;
    }
    if sent >= total {
        let _ = s.write_all(b"0\r\n\r\n");
    }
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    (out, sent)
}

// ---- 1. chunked bodies and client_max_body_size -------------------------------------------

/// A chunked body is held to `client_max_body_size` as it arrives, as nginx does: 413 when a
/// chunk takes it over the limit, nothing of it passed upstream, nginx's error line. Before,
/// the limit applied to `Content-Length` only and 5 MB went upstream behind a 1m limit.
#[test]
fn a_chunked_body_over_client_max_body_size_is_413() {
    let up = Upstream::echo();
    let port = free_port();
    let server = format!(
        "location /p/ {{ proxy_pass {}; }}\n\
         location /s/ {{ proxy_pass {}; proxy_request_buffering off; proxy_http_version 1.1; }}",
        up.url(),
        up.url()
    );
    let s = Shoal::start(&conf(port, "", "client_max_body_size 1m;", &server), port);
    for path in ["/p/x", "/s/x"] {
        // (The rest of the body is read and dropped by the lingering close, as nginx does.)
        let (resp, _) = send_chunked(port, path, 5_000_000, 65536);
        assert_eq!(status_of(&resp), 413, "{path}");
    }
    s.wait_log(
        "client intended to send too large chunked body: 1048576+65536 bytes",
        2,
    );
    // The buffered location passed nothing on; the streamed one may have started the request
    // but never finished its body.
    assert!(up.requests().iter().all(|r| r.body.len() <= 1_048_576));
    // Within the limit, both pass the body whole.
    for path in ["/p/y", "/s/y"] {
        let (resp, _) = send_chunked(port, path, 65536 * 4, 65536);
        assert_eq!(status_of(&resp), 200, "{path}");
    }
    assert!(up
        .requests()
        .iter()
        .any(|r| r.target == "/p/y" && r.body.len() == 65536 * 4));
}

/// A malformed chunk size in a server that proxies is nginx's 400 and "client sent invalid
/// chunked body" (it was 413 and "too large body"); a bare LF ends chunk lines, as nginx
/// takes it.
#[test]
fn a_malformed_chunk_is_400_and_a_bare_lf_is_a_line_end() {
    let up = Upstream::echo();
    let port = free_port();
    let server = format!("location / {{ proxy_pass {}; }}", up.url());
    let s = Shoal::start(&conf(port, "", "", &server), port);
    let resp = exchange(
        port,
        b"POST /a HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
    );
    assert_eq!(status_of(&resp), 400);
    s.wait_log("client sent invalid chunked body", 1);
    assert!(!s.error_log().contains("too large"));
    let resp = exchange(
        port,
        b"POST /b HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n3\nabc\n0\n\n");
    assert_eq!(status_of(&resp), 200, "{}", String::from_utf8_lossy(&resp));
    let r = up.wait_requests(1).pop().unwrap();
    assert_eq!((r.target.as_str(), &r.body[..]), ("/b", &b"abc"[..]));
}

/// A body nobody reads (a static file's) is not waited for before the answer, and what is
/// left of it is discarded within `lingering_time` afterwards, as nginx: a client that keeps
/// sending gets its answer at once and then loses the connection, instead of the worker
/// reading (and, in a proxying server, storing) gigabytes first.
#[test]
fn an_endless_body_to_a_static_file_is_answered_at_once_then_cut_off() {
    let port = free_port();
    let s = Shoal::start(
        &conf(port, "", "lingering_time 2s; lingering_timeout 1s;", ""),
        port,
    );
    let mut c = TcpStream::connect(("127.0.0.1", port)).unwrap();
    c.set_read_timeout(Some(WAIT)).unwrap();
    c.write_all(
        b"POST /index.html HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: chunked\r\n\r\n",
    )
    .unwrap();
    c.write_all(b"1000\r\n").unwrap();
    c.write_all(&[b'x'; 4096]).unwrap();
    c.write_all(b"\r\n").unwrap();
    // The answer comes while the body is still open (nginx: 405 for a POST to a file).
    let mut got = [0u8; 12];
    c.read_exact(&mut got).unwrap();
    assert_eq!(&got, b"HTTP/1.1 405");
    // Keep sending: the connection ends once lingering_time has passed.
    let started = Instant::now();
    c.set_write_timeout(Some(Duration::from_secs(1))).unwrap();
    let piece = [b"1000\r\n".as_slice(), &[b'x'; 4096], b"\r\n"].concat();
    let cut = loop {
        if c.write_all(&piece).is_err() {
            break started.elapsed();
        }
        assert!(
            started.elapsed() < WAIT,
            "still taking the body after {:?}",
            started.elapsed()
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(cut >= Duration::from_millis(1500), "cut off after {cut:?}");
    drop(s);
}

// ---- 2. absolute-form targets ---------------------------------------------------------------

/// `GET http://evil.example/x` goes upstream as `GET /x` (an upstream takes the authority of an
/// absolute target over `Host`), `$request_uri` is the path, `$host` the target's host, and
/// `$request` keeps the line as sent: nginx's values, checked against 1.22.1.
#[test]
fn an_absolute_form_target_goes_upstream_as_its_path() {
    let up = Upstream::echo();
    let port = free_port();
    let server = format!(
        "location /v/ {{ return 200 \"ru=$request_uri u=$uri h=$host hh=$http_host r=$request\"; }}\n\
         location / {{ proxy_pass {}; }}",
        up.url()
    );
    let _s = Shoal::start(&conf(port, "", "", &server), port);
    let resp = exchange(
        port,
        b"GET http://evil.example/x?a=1 HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n",
    );
    assert_eq!(status_of(&resp), 200);
    let r = up.wait_requests(1).pop().unwrap();
    assert_eq!(r.target, "/x?a=1");
    let resp = exchange(
        port,
        b"GET HTTP://Evil.Example:81/v/y?b HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n");
    let text = String::from_utf8_lossy(&resp);
    assert!(
        text.ends_with(
            "ru=/v/y?b u=/v/y h=evil.example hh=localhost r=GET HTTP://Evil.Example:81/v/y?b HTTP/1.1"
        ),
        "{text}"
    );
    // No path: nginx's `$request_uri` is `/`, and so is what goes upstream.
    let _ = exchange(
        port,
        b"GET http://evil.example HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n",
    );
    let r = up.wait_requests(2).pop().unwrap();
    assert_eq!(r.target, "/");
}

// ---- 3. clients that stop reading or sending ------------------------------------------------

/// A client with a small receive window that reads nothing.
fn stalled_client(port: u16, request: &[u8]) -> TcpStream {
    let sock = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
    sock.set_recv_buffer_size(4096).unwrap();
    sock.connect(&std::net::SocketAddr::from(([127, 0, 0, 1], port)).into())
        .unwrap();
    let mut s: TcpStream = sock.into();
    s.write_all(request).unwrap();
    s
}

/// Reads what is left until the server closes; fails if it is still sending after `WAIT`.
fn drain_to_close(s: &mut TcpStream) -> usize {
    s.set_read_timeout(Some(WAIT)).unwrap();
    let mut buf = vec![0u8; 1 << 16];
    let mut total = 0;
    let started = Instant::now();
    loop {
        match s.read(&mut buf) {
            Ok(0) => return total,
            Ok(n) => total += n,
            Err(e) if e.kind() == ErrorKind::ConnectionReset => return total,
            Err(e) => panic!("reading what the server sent: {e}"),
        }
        assert!(started.elapsed() < 2 * WAIT, "the server never closed");
    }
}

/// `send_timeout` bounds every wait for a client to take more, sendfile's included (with and
/// without a thread pool, and on the read path of `sendfile off`): a client that stops
/// reading a large file loses the connection after it, with nginx's info line. Before, a
/// sendfile waited forever, and `-s quit` waited for that client.
#[test]
fn send_timeout_ends_a_client_that_stops_reading() {
    let port = free_port();
    let s = Shoal::start(
        &conf(
            port,
            "",
            "send_timeout 1s; sendfile on; tcp_nopush on;",
            "location /pool/ { alias html/; aio threads; }\n\
             location /read/ { alias html/; sendfile off; }",
        ),
        port,
    );
    let size = 32 << 20;
    std::fs::write(s.prefix.join("html/big.bin"), vec![7u8; size]).unwrap();
    for path in ["/big.bin", "/pool/big.bin", "/read/big.bin"] {
        let req = format!("GET {path} HTTP/1.1\r\nHost: localhost\r\n\r\n");
        let mut c = stalled_client(port, req.as_bytes());
        // Long enough for several send_timeouts.
        std::thread::sleep(Duration::from_secs(3));
        let got = drain_to_close(&mut c);
        assert!(
            got < size,
            "{path}: the whole file came after the client stalled"
        );
    }
    s.wait_log(
        "client timed out (110: Connection timed out) while sending response to client",
        3,
    );
}

/// With a stalled download in flight, `-s quit` ends within `send_timeout`, not never.
#[test]
fn quit_is_not_held_by_a_client_that_stops_reading() {
    let port = free_port();
    let mut s = Shoal::start(&conf(port, "", "send_timeout 1s; sendfile on;", ""), port);
    std::fs::write(s.prefix.join("html/big.bin"), vec![7u8; 32 << 20]).unwrap();
    let _c = stalled_client(port, b"GET /big.bin HTTP/1.1\r\nHost: localhost\r\n\r\n");
    std::thread::sleep(Duration::from_millis(300));
    s.signal(libc::SIGQUIT);
    let status = s.wait_exit();
    assert!(status.success(), "{status:?}");
}

/// `client_body_timeout` bounds each wait for a body's next bytes: a client that stops sending
/// one halfway gets nginx's 408 line and the connection closes.
#[test]
fn client_body_timeout_ends_a_client_that_stops_sending() {
    let up = Upstream::echo();
    let port = free_port();
    let server = format!(
        "location / {{ proxy_pass {}; }}\nlocation = /408 {{ return 408; }}",
        up.url()
    );
    let s = Shoal::start(&conf(port, "", "client_body_timeout 1s;", &server), port);
    let mut c = TcpStream::connect(("127.0.0.1", port)).unwrap();
    c.write_all(b"POST / HTTP/1.1\r\nHost: localhost\r\nContent-Length: 100\r\n\r\nhalf")
        .unwrap();
    let started = Instant::now();
    // Closed without an answer, as nginx; the access log says 408.
    assert_eq!(drain_to_close(&mut c), 0);
    assert!(started.elapsed() >= Duration::from_millis(900));
    assert_eq!(up.request_count(), 0);
    wait_for("the 408 in the access log", || {
        s.prefix
            .read("logs/access.log")
            .contains("\"POST / HTTP/1.1\" 408 ")
            .then_some(())
    });
    // `return 408` closes without an answer too (nginx terminates the request).
    let resp = exchange(port, b"GET /408 HTTP/1.1\r\nHost: localhost\r\n\r\n");
    assert!(resp.is_empty(), "{}", String::from_utf8_lossy(&resp));
}

// ---- 4. worker_connections ------------------------------------------------------------------

/// Opens a keep-alive connection and has one answer on it.
fn idle_after_one(port: u16) -> Client {
    let mut c = Client::connect(port);
    assert_eq!(c.get("/").expect("an answer").status, 200);
    c
}

/// At `worker_connections`, the connections that wait for a request are closed to make room,
/// the longest waiting first, with nginx's warning; an active client goes on unharmed. Before,
/// new clients waited in the backlog until an old one left.
#[test]
fn full_worker_connections_reuse_idle_ones_oldest_first() {
    let up = Upstream::start(|_| Answer::ok("slow").delay_head(Duration::from_secs(2)));
    let port = free_port();
    let server = format!("location /slow {{ proxy_pass {}; }}", up.url());
    let s = Shoal::start(
        &conf(
            port,
            "worker_connections 8;",
            "keepalive_timeout 300s;",
            &server,
        ),
        port,
    );
    // One active client, waiting for a slow upstream.
    let active = std::thread::spawn(move || {
        let mut c = Client::connect(port);
        c.get("/slow").map(|r| (r.status, r.body))
    });
    up.wait_requests(1);
    // Seven idle ones: the worker is full.
    let mut idle: Vec<Client> = (0..7).map(|_| idle_after_one(port)).collect();
    // Newcomers are answered.
    for _ in 0..3 {
        let started = Instant::now();
        let mut c = Client::connect(port);
        c.stream().set_read_timeout(Some(WAIT)).unwrap();
        assert_eq!(c.get("/").expect("a newcomer is answered").status, 200);
        assert!(started.elapsed() < Duration::from_secs(2));
        idle.push(c);
    }
    s.wait_log(
        "8 worker_connections are not enough, reusing connections",
        1,
    );
    // The oldest idle ones went, the newest stay.
    assert!(
        idle[0].closed_by_peer(),
        "the oldest idle connection was kept"
    );
    let last = idle.last_mut().unwrap();
    assert_eq!(last.get("/").expect("the newest stays").status, 200);
    // The active client never noticed.
    let (status, body) = active.join().unwrap().expect("the active client's answer");
    assert_eq!((status, &body[..]), (200, &b"slow"[..]));
}

/// With every connection busy (none reusable), a new one is closed at once with nginx's alert,
/// not left hanging in the backlog.
#[test]
fn full_worker_connections_with_none_idle_refuse_at_once() {
    let port = free_port();
    let s = Shoal::start(
        &conf(
            port,
            "worker_connections 4;",
            "client_header_timeout 30s;",
            "",
        ),
        port,
    );
    // Four connections each with half a head: busy, not reusable.
    let busy: Vec<TcpStream> = (0..4)
        .map(|_| {
            let mut c = TcpStream::connect(("127.0.0.1", port)).unwrap();
            c.write_all(b"GET / HTTP/1.1\r\n").unwrap();
            c
        })
        .collect();
    wait_for("the four to be taken", || {
        let mut c = TcpStream::connect(("127.0.0.1", port)).ok()?;
        c.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
        let _ = c.write_all(b"GET / HTTP/1.1\r\nHost: localhost\r\n\r\n");
        let mut b = [0u8; 1];
        // Closed at once, without an answer (not left waiting: a read that times out).
        match c.read(&mut b) {
            Ok(0) => Some(()),
            Err(e) if e.kind() == ErrorKind::ConnectionReset => Some(()),
            _ => None,
        }
    });
    s.wait_log("4 worker_connections are not enough", 1);
    drop(busy);
}

// ---- 5. interim answers from an upstream ----------------------------------------------------

/// An upstream's 103 Early Hints and 100 Continue are skipped: the client gets the final
/// answer. (nginx 1.22.1 passed the 103 on as the answer and the real head as its body.)
#[test]
fn interim_answers_from_an_upstream_are_skipped() {
    let up = Upstream::start(|_| {
        Answer::raw(
            "HTTP/1.1 103 Early Hints\r\nLink: </s.css>; rel=preload\r\n\r\n\
             HTTP/1.1 100 Continue\r\n\r\n\
             HTTP/1.1 200 OK\r\nContent-Length: 5\r\nX-A: 1\r\n\r\nhello",
        )
    });
    let port = free_port();
    let server = format!("location / {{ proxy_pass {}; }}", up.url());
    let _s = Shoal::start(&conf(port, "", "", &server), port);
    let mut c = Client::connect(port);
    let r = c.get("/e").unwrap();
    assert_eq!((r.status, &r.body[..]), (200, &b"hello"[..]));
    assert_eq!(r.header("x-a"), Some("1"));
    assert_eq!(r.header("link"), None);
    // And the connection goes on.
    assert_eq!(c.get("/e").unwrap().status, 200);
}

// ---- 7. head shapes nginx answers at once ---------------------------------------------------

/// A tab is not whitespace around a header value for nginx: `Content-Length:<TAB>5` is an
/// invalid length (400), as 1.22.1 answers.
#[test]
fn a_tab_around_a_length_is_not_whitespace() {
    let port = free_port();
    let _s = Shoal::start(&conf(port, "", "", ""), port);
    for raw in [
        &b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length:\t5\r\n\r\nhello"[..],
        b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5\t\r\n\r\nhello",
    ] {
        assert_eq!(status_of(&exchange(port, raw)), 400);
    }
}

/// More than 1,000 header lines is 400 "client sent too many header lines", as Debian's nginx
/// answers; lines dropped as invalid do not count.
#[test]
fn more_than_a_thousand_header_lines_is_400() {
    let port = free_port();
    let s = Shoal::start(
        &conf(port, "", "large_client_header_buffers 4 64k;", ""),
        port,
    );
    let head = |n: usize, name: &str| {
        let mut h = String::from("GET / HTTP/1.1\r\nHost: a\r\nConnection: close\r\n");
        for i in 0..n {
            h.push_str(&format!("{name}{i}: 1\r\n"));
        }
        h.push_str("\r\n");
        h
    };
    assert_eq!(status_of(&exchange(port, head(998, "a").as_bytes())), 200);
    assert_eq!(status_of(&exchange(port, head(999, "a").as_bytes())), 400);
    s.wait_log("client sent too many header lines", 1);
    assert_eq!(status_of(&exchange(port, head(1500, "a_").as_bytes())), 200);
}

/// An HTTP/0.9 simple request is answered at once, the 0.9 way (the body alone, then the
/// close), and TLS bytes on a plain port at once with 400: not after `client_header_timeout`.
#[test]
fn a_simple_request_and_tls_bytes_are_answered_at_once() {
    let port = free_port();
    let s = Shoal::start(&conf(port, "", "client_header_timeout 30s;", ""), port);
    let started = Instant::now();
    let resp = exchange(port, b"GET /\r\n");
    assert_eq!(String::from_utf8_lossy(&resp), common::INDEX);
    let resp = exchange(port, b"HEAD /\r\n");
    assert!(
        String::from_utf8_lossy(&resp).starts_with("<html>"),
        "no head for 0.9"
    );
    s.wait_log("client sent invalid method in HTTP/0.9 request", 1);
    let hello = b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03";
    let resp = exchange(port, hello);
    assert_eq!(status_of(&resp), 400);
    s.wait_log("client sent invalid method", 2);
    assert!(started.elapsed() < Duration::from_secs(10));
    // The access log has nginx's `$request` for a 0.9 request: no version.
    wait_for("the 0.9 request in the access log", || {
        s.prefix
            .read("logs/access.log")
            .contains("\"GET /\" 200")
            .then_some(())
    });
}

/// A worker thread that dies outside any connection task is logged at `[alert]` and started
/// again, and a connection on another worker is not touched. The death is a panic injected by
/// the debug build when a file exists (`SHOAL_TEST_WORKER_PANIC`).
#[test]
fn a_dead_worker_is_replaced() {
    if std::env::var_os("SHOAL_TEST_BIN").is_some() {
        // A release binary has no fault injection.
        return;
    }
    let port = free_port();
    let prefix = common::Prefix::new();
    let trigger = prefix.join("panic-now");
    let s = Shoal::start_in_env(
        prefix,
        &format!(
            "worker_processes 2;\n{}",
            conf(port, "", "keepalive_timeout 300s;", "").replace(
                &format!("listen 127.0.0.1:{port};"),
                &format!("listen 127.0.0.1:{port} reuseport;")
            )
        ),
        port,
        &[],
        &[("SHOAL_TEST_WORKER_PANIC", trigger.as_os_str())],
    );
    // With `reuseport`, the kernel spreads them over both workers' sockets (all 32 on one has
    // a chance of 2^-31).
    let mut kept: Vec<Client> = (0..32).map(|_| idle_after_one(port)).collect();
    std::fs::write(&trigger, "").unwrap();
    s.signal(libc::SIGHUP);
    s.wait_log(
        "exited unexpectedly (it panicked: injected by SHOAL_TEST_WORKER_PANIC)",
        1,
    );
    wait_for("two workers again", || {
        (s.worker_threads() == 2).then_some(())
    });
    assert!(!trigger.exists());
    // The dead worker's connections are gone; the other's are served.
    let alive = kept
        .iter_mut()
        .map(|c| c.get("/").is_ok_and(|r| r.status == 200))
        .filter(|ok| *ok)
        .count();
    assert!(alive >= 1, "no connection survived on the other worker");
    // And new ones are served.
    for _ in 0..4 {
        assert_eq!(common::get(port, "/").unwrap().status, 200);
    }
}

/// The cache loader leaves alone the temp files a live process is filling (`use_temp_path=off`
/// puts them beside the objects): here a second shoal starts on the same cache while the first
/// fills an object, as an upgraded binary would. Before, the loader deleted the file and the
/// first one logged `[crit] rename() ... failed` and stored nothing.
#[test]
fn the_cache_loader_leaves_a_fill_in_progress_alone() {
    let up = Upstream::start(|_| {
        Answer::ok(vec![b'c'; 300_000]).delay_body(200_000, Duration::from_secs(3))
    });
    let cache = tempfile::tempdir().unwrap();
    let cache_conf = |port: u16| {
        let http = format!(
            "proxy_cache_path {} levels=1:2 keys_zone=z:1m use_temp_path=off;",
            cache.path().display()
        );
        let server = format!(
            "location / {{ proxy_pass {}; proxy_cache z; proxy_cache_valid 200 1h; \
             add_header X-Cache $upstream_cache_status; }}",
            up.url()
        );
        conf(port, "", &http, &server)
    };
    let (port_a, port_b) = (free_port(), free_port());
    let a = Shoal::start(&cache_conf(port_a), port_a);
    let fill = std::thread::spawn(move || common::get(port_a, "/obj").map(|r| r.body.len()));
    let marker = format!(".{}.", a.pid);
    let temp = wait_for("the fill's temp file", || {
        common::files_under(cache.path())
            .into_iter()
            .find(|p| p.file_name().unwrap().to_string_lossy().contains(&marker))
    });
    let b = Shoal::start(&cache_conf(port_b), port_b);
    b.wait_log("http file cache:", 1);
    assert!(temp.exists(), "the loader deleted a fill in progress");
    assert_eq!(fill.join().unwrap().expect("the filled answer"), 300_000);
    let hit = common::get(port_a, "/obj").unwrap();
    assert_eq!(hit.header("x-cache"), Some("HIT"));
    assert!(!a.error_log().contains("rename()"), "{}", a.error_log());
    assert!(
        !b.error_log().contains("is not a cache object"),
        "{}",
        b.error_log()
    );
}

/// A body is read when a handler wants it, as nginx reads it: in a server that proxies, a
/// chunked body to a static location is not read first (and never held to
/// `client_max_body_size`, nor spooled to disk): the 404 comes at once. A declared length over
/// the limit is refused where the location is found, so `error_page 413` answers it.
#[test]
fn a_body_is_read_only_by_the_handler_that_wants_it() {
    let up = Upstream::echo();
    let port = free_port();
    let server = format!(
        "location /p/ {{ proxy_pass {}; }}\n\
         location /small/ {{ client_max_body_size 10; error_page 413 /too-large.txt; }}\n\
         location = /too-large.txt {{ }}",
        up.url()
    );
    let s = Shoal::start(
        &conf(
            port,
            "",
            "client_max_body_size 1m; lingering_time 2s;",
            &server,
        ),
        port,
    );
    std::fs::write(s.prefix.join("html/too-large.txt"), "too large\n").unwrap();
    let mut c = TcpStream::connect(("127.0.0.1", port)).unwrap();
    c.set_read_timeout(Some(WAIT)).unwrap();
    c.write_all(b"POST /nothing HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: chunked\r\n\r\n")
        .unwrap();
    // Two megabytes, more than client_max_body_size, before looking for the answer.
    let piece = [b"10000\r\n".as_slice(), &[b'x'; 65536], b"\r\n"].concat();
    for _ in 0..32 {
        c.write_all(&piece).unwrap();
    }
    let mut got = [0u8; 12];
    c.read_exact(&mut got).unwrap();
    assert_eq!(&got, b"HTTP/1.1 404");
    assert!(!s.error_log().contains("too large"), "{}", s.error_log());
    let resp = exchange(
        port,
        b"POST /small/x HTTP/1.1\r\nHost: localhost\r\nContent-Length: 100\r\nConnection: close\r\n\r\n",
    );
    let text = String::from_utf8_lossy(&resp);
    assert!(text.starts_with("HTTP/1.1 413"), "{text}");
    assert!(text.ends_with("too large\n"), "{text}");
    assert_eq!(up.request_count(), 0);
}

/// The idle wait after an answer is the answered request's location's `keepalive_timeout`, as
/// nginx uses the finished request's location for it as for the `Keep-Alive` header. (It used
/// the default server's.)
#[test]
fn the_idle_wait_is_the_answered_locations_keepalive_timeout() {
    let port = free_port();
    let _s = Shoal::start(
        &conf(
            port,
            "",
            "keepalive_timeout 300s;",
            "location /short/ { alias html/; keepalive_timeout 1s; }",
        ),
        port,
    );
    let mut c = Client::connect(port);
    assert_eq!(c.get("/short/index.html").unwrap().status, 200);
    let started = Instant::now();
    c.stream().set_read_timeout(Some(WAIT)).unwrap();
    let mut b = [0u8; 1];
    let closed = matches!(c.stream().read(&mut b), Ok(0) | Err(_));
    assert!(
        closed && started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
}

/// A cached answer passes its `Refresh` through `proxy_redirect` as the fresh one did: the
/// HIT and the MISS are one function's answers now. (The HIT passed it as it came.)
#[test]
fn a_hit_rewrites_refresh_as_the_miss_does() {
    let up = Upstream::start(|r| {
        Answer::ok("r").header(
            "Refresh",
            &format!(
                "5; url=http://127.0.0.1:{}/next",
                r.header("x-port").unwrap_or("0")
            ),
        )
    });
    let port = free_port();
    let server = format!(
        "location / {{ proxy_pass {url}; proxy_set_header X-Port {up_port}; proxy_cache z; \
         proxy_cache_valid 200 1h; proxy_redirect {url}/ /moved/; \
         add_header X-Cache $upstream_cache_status; }}",
        url = up.url(),
        up_port = up.port(),
    );
    let _s = Shoal::start(
        &conf(
            port,
            "",
            "proxy_cache_path cache levels=1:2 keys_zone=z:1m use_temp_path=off;",
            &server,
        ),
        port,
    );
    let miss = common::get(port, "/r").unwrap();
    assert_eq!(miss.header("x-cache"), Some("MISS"));
    assert_eq!(miss.header("refresh"), Some("5; url=/moved/next"));
    let hit = common::get(port, "/r").unwrap();
    assert_eq!(hit.header("x-cache"), Some("HIT"));
    assert_eq!(hit.header("refresh"), Some("5; url=/moved/next"));
}
