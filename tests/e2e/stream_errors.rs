//! `stream {}` when things go wrong, each case a test of its own: a UDP flood from many source
//! ports, a client that never reads a large answer, PROXY protocol headers that lie or are
//! malformed (v1 and v2), an upstream that refuses. What is checked: nginx 1.22.1's log lines
//! (read from the real nginx with `ngx_stream_module`), the session's end, and that other
//! sessions are served meanwhile.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream, UdpSocket};
use std::time::{Duration, Instant};

use crate::common::{free_port, wait_for, Shoal};
use crate::stream::{conf, dead_port, tcp, udp, Echo};

/// Starts shoal with `body` in its stream block and `events` in its events block; a probe
/// server of its own tells when it serves.
fn start(events: &str, body: &str) -> Shoal {
    let probe = free_port();
    let text = conf(&format!(
        "{body}\n    server {{ listen 127.0.0.1:{probe}; return ok; access_log off; }}"
    ))
    .replace("events { }", &format!("events {{ {events} }}"));
    Shoal::start(&text, probe)
}

/// The resident memory of `pid`, in KiB.
fn rss_kib(pid: i32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

#[test]
fn a_udp_flood_from_many_ports_is_bounded_and_others_are_still_served() {
    let a = Echo::start("A:");
    // A peer that never answers: every session waits for its `proxy_timeout`.
    let silent = UdpSocket::bind("127.0.0.1:0").unwrap();
    let silent_port = silent.local_addr().unwrap().port();
    let (flood, good) = (free_port(), free_port());
    let s = start(
        "worker_connections 64;",
        &format!(
            "server {{ listen 127.0.0.1:{flood} udp; proxy_pass 127.0.0.1:{silent_port}; \
             proxy_responses 1; proxy_timeout 1s; access_log off; }}\n\
             server {{ listen 127.0.0.1:{good} udp; proxy_pass 127.0.0.1:{}; proxy_responses 1; \
             proxy_timeout 1s; }}",
            a.port
        ),
    );
    let before = rss_kib(s.pid);
    // 200 source ports, 20 datagrams each: more sessions than worker_connections.
    let clients: Vec<UdpSocket> = (0..200)
        .map(|_| UdpSocket::bind("127.0.0.1:0").unwrap())
        .collect();
    let payload = [7u8; 1200];
    for _ in 0..20 {
        for c in &clients {
            let _ = c.send_to(&payload, ("127.0.0.1", flood));
        }
    }
    s.wait_log("64 worker_connections are not enough", 1);
    // The sessions end at their `proxy_timeout` (the peer never answered: 502, logged), and
    // then the other server answers again.
    let answered = wait_for("a datagram answered after the flood", || {
        udp(good, b"ping").filter(|a| a == b"A:ping")
    });
    assert_eq!(answered, b"A:ping");
    s.wait_log(
        "upstream timed out (110: Connection timed out) while proxying connection, client: 127.0.0.1",
        1,
    );
    // What the flood left: no session, and memory back near where it was (the datagrams of
    // a session wait in a bounded queue, the rest are dropped as the kernel drops them).
    let after = rss_kib(s.pid);
    assert!(
        after < before + 32 * 1024,
        "RSS {before} KiB before, {after} KiB after"
    );
    // A second flood is handled as the first: nothing was left behind to fill up.
    for c in &clients {
        let _ = c.send_to(&payload, ("127.0.0.1", flood));
    }
    std::thread::sleep(Duration::from_millis(1500));
    assert_eq!(udp(good, b"again").as_deref(), Some(&b"A:again"[..]));
}

#[test]
fn a_client_that_never_reads_is_closed_at_proxy_timeout_and_others_go_on() {
    // An upstream that writes as much as it can to each connection.
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let big = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for c in listener.incoming() {
            let Ok(mut c) = c else { break };
            std::thread::spawn(move || {
                let chunk = vec![b'x'; 65536];
                let mut first = [0u8; 16];
                let _ = c.read(&mut first);
                c.set_write_timeout(Some(Duration::from_secs(10))).unwrap();
                while c.write_all(&chunk).is_ok() {}
            });
        }
    });
    let a = Echo::start("A:");
    let (port, other) = (free_port(), free_port());
    let s = start(
        "",
        &format!(
            "server {{ listen 127.0.0.1:{port}; proxy_pass 127.0.0.1:{big}; proxy_timeout 1s; }}\n\
             server {{ listen 127.0.0.1:{other}; proxy_pass 127.0.0.1:{}; }}",
            a.port
        ),
    );
    let mut stuck = TcpStream::connect(("127.0.0.1", port)).unwrap();
    stuck.write_all(b"go").unwrap();
    let t = Instant::now();
    // Meanwhile other sessions are served.
    for _ in 0..5 {
        assert_eq!(tcp(other, b"hi"), b"A:hi");
    }
    s.wait_log(
        &format!(
            "connection timed out (110: Connection timed out) while proxying connection, client: 127.0.0.1, server: 127.0.0.1:{port}, upstream: \"127.0.0.1:{big}\", bytes from/to client:2/"
        ),
        1,
    );
    assert!(
        t.elapsed() >= Duration::from_millis(900),
        "{:?}",
        t.elapsed()
    );
    // The session is gone: what the client reads now ends (EOF or a reset).
    stuck
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let mut buf = vec![0u8; 1 << 20];
    let ended = loop {
        match stuck.read(&mut buf) {
            Ok(0) | Err(_) => break true,
            Ok(_) => {}
        }
    };
    assert!(ended);
    let log = wait_for("the sessions logged", || {
        let t = s.prefix.read("logs/stream.log");
        (t.lines().count() >= 6).then_some(t)
    });
    assert!(
        log.lines()
            .any(|l| l.starts_with("TCP 200 ") && l.contains(&format!("\"127.0.0.1:{big}\""))),
        "{log}"
    );
}

#[test]
fn proxy_protocol_headers_that_are_broken_or_lie() {
    let a = Echo::start("A:");
    let (port, trusted) = (free_port(), free_port());
    let s = start(
        "",
        &format!(
            "log_format pp '$remote_addr $proxy_protocol_addr $status';\n\
             server {{ listen 127.0.0.1:{port} proxy_protocol; proxy_pass 127.0.0.1:{up}; \
             access_log logs/pp.log pp; }}\n\
             server {{ listen 127.0.0.1:{trusted} proxy_protocol; proxy_pass 127.0.0.1:{up}; \
             set_real_ip_from 10.0.0.0/8; access_log logs/pp.log pp; }}",
            up = a.port
        ),
    );
    let send = |port: u16, bytes: &[u8]| -> Vec<u8> {
        let mut c = TcpStream::connect(("127.0.0.1", port)).unwrap();
        c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        c.write_all(bytes).unwrap();
        let mut got = Vec::new();
        let mut buf = [0u8; 4096];
        loop {
            match c.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    got.extend_from_slice(&buf[..n]);
                    if got.ends_with(b"hello") {
                        break;
                    }
                }
            }
        }
        got
    };
    let ctx = format!(" while reading PROXY protocol, client: 127.0.0.1, server: 127.0.0.1:{port}");
    // v1 with words after the ports.
    assert_eq!(
        send(port, b"PROXY TCP4 1.2.3.4 5.6.7.8 1 2 extra junk\r\nhello"),
        b""
    );
    s.wait_log(
        &format!("broken header: \"PROXY TCP4 1.2.3.4 5.6.7.8 1 2 extra junk\r\nhello\"{ctx}"),
        1,
    );
    // Not a PROXY header at all.
    assert_eq!(send(port, b"GARBAGE\r\n"), b"");
    s.wait_log(&format!("broken header: \"GARBAGE\r\n\"{ctx}"), 1);
    // v2 whose length is more than nginx reads.
    let sig = b"\r\n\r\n\x00\r\nQUIT\n";
    let mut big = sig.to_vec();
    big.extend_from_slice(b"\x21\x11\xff\xff\x01\x02\x03\x04\x05");
    assert_eq!(send(port, &big), b"");
    s.wait_log(&format!("header is too large{ctx}"), 1);
    // v2 of a version nobody speaks.
    let mut v3 = sig.to_vec();
    v3.extend_from_slice(b"\x31\x11\x00\x0c\x01\x02\x03\x04\x05\x06\x07\x08\x00\x01\x00\x02");
    assert_eq!(send(port, &v3), b"");
    s.wait_log(&format!("unknown PROXY protocol version: 3{ctx}"), 1);
    // A well-formed v2 header is taken, and what follows it is the session's.
    let mut v2 = sig.to_vec();
    v2.extend_from_slice(b"\x21\x11\x00\x0c\x0a\x00\x00\x07\x05\x06\x07\x08\x00\x01\x00\x02");
    v2.extend_from_slice(b"hello");
    assert_eq!(send(port, &v2), b"A:hello");
    // A header that lies about the client: believed for $remote_addr only from a trusted
    // address (127.0.0.1 is not in 10.0.0.0/8, so the connection's own address stays).
    assert_eq!(
        send(trusted, b"PROXY TCP4 10.9.9.9 5.6.7.8 1 2\r\nhello"),
        b"A:hello"
    );
    let log = wait_for("the sessions logged", || {
        let t = s.prefix.read("logs/pp.log");
        (t.lines().count() >= 6).then_some(t)
    });
    assert!(log.contains("127.0.0.1 10.0.0.7 200\n"), "{log}");
    assert!(log.contains("127.0.0.1 10.9.9.9 200\n"), "{log}");
    assert_eq!(log.matches(" 400\n").count(), 4, "{log}");
}

#[test]
fn an_upstream_that_refuses_is_logged_and_the_next_one_tried() {
    let a = Echo::start("A:");
    let dead = dead_port();
    let port = free_port();
    let s = start(
        "",
        &format!(
            "upstream be {{ server 127.0.0.1:{dead}; server 127.0.0.1:{}; }}\n\
             server {{ listen 127.0.0.1:{port}; proxy_pass be; }}",
            a.port
        ),
    );
    assert_eq!(tcp(port, b"x"), b"A:x");
    s.wait_log(
        &format!(
            "connect() failed (111: Connection refused) while connecting to upstream, client: 127.0.0.1, server: 127.0.0.1:{port}, upstream: \"127.0.0.1:{dead}\", bytes from/to client:0/0, bytes from/to upstream:0/0"
        ),
        1,
    );
    // max_fails=1 (the default) reached: the peer is out for fail_timeout, said at warn.
    s.wait_log(
        &format!(
            "upstream server temporarily disabled while connecting to upstream, client: 127.0.0.1, server: 127.0.0.1:{port}, upstream: \"127.0.0.1:{dead}\", bytes from/to client:0/0, bytes from/to upstream:0/0"
        ),
        1,
    );
    assert!(
        s.error_log()
            .lines()
            .any(|l| l.contains("[warn]") && l.contains("temporarily disabled")),
        "{}",
        s.error_log()
    );
    let log = wait_for("the session logged", || {
        let t = s.prefix.read("logs/stream.log");
        (!t.is_empty()).then_some(t)
    });
    assert_eq!(
        log,
        format!(
            "TCP 200 3 1 \"127.0.0.1:{dead}, 127.0.0.1:{}\" \"0, 1\" \"0, 3\"\n",
            a.port
        )
    );
}

#[test]
fn a_client_that_resets_is_an_info_line_as_in_nginx() {
    let a = Echo::start("A:");
    let port = free_port();
    let s = start(
        "",
        &format!(
            "server {{ listen 127.0.0.1:{port}; proxy_pass 127.0.0.1:{}; }}",
            a.port
        ),
    );
    let mut c = TcpStream::connect(("127.0.0.1", port)).unwrap();
    c.write_all(b"x").unwrap();
    let mut buf = [0u8; 8];
    let mut got = 0;
    while got < 3 {
        got += c.read(&mut buf[got..]).unwrap();
    }
    // SO_LINGER 0: the close is a reset.
    socket2::SockRef::from(&c)
        .set_linger(Some(Duration::ZERO))
        .unwrap();
    drop(c);
    s.wait_log(
        "recv() failed (104: Connection reset by peer) while proxying and reading from client, client: 127.0.0.1",
        1,
    );
    let line = s
        .error_log()
        .lines()
        .find(|l| l.contains("Connection reset by peer"))
        .map(str::to_string)
        .unwrap();
    assert!(line.contains("[info]"), "{line}");
}
