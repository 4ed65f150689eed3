//! Sessions from start to end: UDP's `proxy_responses`/`proxy_requests`, timeouts, a
//! half-close, unix sockets, `reuseport` and the download rate, and a reload and a graceful
//! stop with a session in flight.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use crate::common::{free_port, wait_for, Prefix, Shoal};

use super::{conf, dead_port, log_lines, start, tcp, udp, Echo};

#[test]
fn udp_sessions_with_proxy_responses_and_requests() {
    let a = Echo::start("A:");
    let (port, tport) = (free_port(), free_port());
    let s = start(
        &format!(
            "server {{ listen 127.0.0.1:{port} udp; proxy_pass 127.0.0.1:{}; proxy_responses 1; }}\n\
             server {{ listen 127.0.0.1:{tport}; return ok; }}",
            a.port
        ),
        tport,
    );
    assert_eq!(udp(port, b"ping").as_deref(), Some(&b"A:ping"[..]));
    assert_eq!(udp(port, b"pong").as_deref(), Some(&b"A:pong"[..]));
    let lines = log_lines(&s, 2);
    assert_eq!(
        lines[0],
        format!("UDP 200 6 4 \"127.0.0.1:{}\" \"4\" \"6\"", a.port)
    );
    assert!(s
        .error_log()
        .contains("udp done, packets from/to client:1/1"));
}

#[test]
fn udp_without_an_answer_times_out_with_502() {
    let dead = dead_port();
    let port = free_port();
    let tport = free_port();
    let s = start(
        &format!(
            "server {{ listen 127.0.0.1:{port} udp; proxy_pass 127.0.0.1:{dead}; \
             proxy_responses 1; proxy_timeout 1s; access_log logs/udp.log s; }}\n\
             server {{ listen 127.0.0.1:{tport}; return ok; access_log off; }}"
        ),
        tport,
    );
    assert_eq!(udp(port, b"ping"), None);
    let line = wait_for("the udp session's line", || {
        let t = s.prefix.read("logs/udp.log");
        (!t.is_empty()).then_some(t)
    });
    assert!(line.starts_with("UDP 502 0 4"), "{line}");
}

#[test]
fn proxy_timeout_ends_an_idle_session() {
    let a = Echo::start("A:");
    let port = free_port();
    let s = start(
        &format!(
            "server {{ listen 127.0.0.1:{port}; proxy_pass 127.0.0.1:{}; proxy_timeout 1s; }}",
            a.port
        ),
        port,
    );
    let mut c = TcpStream::connect(("127.0.0.1", port)).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    c.write_all(b"a").unwrap();
    let mut buf = [0u8; 16];
    assert_eq!(c.read(&mut buf).unwrap(), 3);
    let t = Instant::now();
    assert_eq!(c.read(&mut buf).unwrap(), 0, "closed by proxy_timeout");
    assert!(t.elapsed() < Duration::from_secs(8));
    s.wait_log(
        "connection timed out (110: Connection timed out) while proxying connection",
        1,
    );
    let lines = log_lines(&s, 1);
    assert!(lines[0].starts_with("TCP 200 3 1 "), "{lines:?}");
}

#[test]
fn half_close_passes_the_eof_and_keeps_the_answer_coming() {
    let a = Echo::start("A:");
    let port = free_port();
    let _s = start(
        &format!(
            "server {{ listen 127.0.0.1:{port}; proxy_pass 127.0.0.1:{}; proxy_half_close on; }}",
            a.port
        ),
        port,
    );
    let mut c = TcpStream::connect(("127.0.0.1", port)).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    c.write_all(b"zz").unwrap();
    c.shutdown(std::net::Shutdown::Write).unwrap();
    let mut got = Vec::new();
    c.read_to_end(&mut got).unwrap();
    assert_eq!(got, b"A:zz");
}

#[test]
fn reload_keeps_a_session_and_quit_waits_for_it() {
    let a = Echo::start("A:");
    let port = free_port();
    let body = |extra: &str| {
        conf(&format!(
            "server {{ listen 127.0.0.1:{port}; proxy_pass 127.0.0.1:{}; {extra} }}",
            a.port
        ))
        .replace("daemon off;", "daemon off;\nworker_shutdown_timeout 20s;")
    };
    let mut s = Shoal::start_in(Prefix::new(), &body(""), port, &[]);
    let mut c = TcpStream::connect(("127.0.0.1", port)).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut buf = [0u8; 64];
    c.write_all(b"1").unwrap();
    assert_eq!(c.read(&mut buf).unwrap(), 3);
    s.prefix.write_conf(&body("proxy_timeout 5m;"));
    s.signal(libc::SIGHUP);
    s.wait_log("reconfiguring", 1);
    std::thread::sleep(Duration::from_millis(300));
    // The session goes on across the reload, and new ones are served.
    c.write_all(b"2").unwrap();
    let n = c.read(&mut buf).unwrap();
    assert_eq!(&buf[..n], b"A:2");
    assert_eq!(tcp(port, b"n"), b"A:n");
    // A graceful stop waits for the session.
    s.signal(libc::SIGQUIT);
    std::thread::sleep(Duration::from_millis(500));
    assert!(!s.exited(), "quit did not wait for the stream session");
    c.write_all(b"3").unwrap();
    let n = c.read(&mut buf).unwrap();
    assert_eq!(&buf[..n], b"A:3");
    drop(c);
    let status = s.wait_exit();
    assert!(status.success(), "{status:?}");
}

#[test]
fn unix_sockets_reuseport_and_download_rate() {
    let a = Echo::start("A:");
    let (port, rport, slow) = (free_port(), free_port(), free_port());
    let dir = tempfile::tempdir().unwrap();
    let sock = dir.path().join("s.sock");
    let body = format!(
        "server {{ listen unix:{sock}; proxy_pass 127.0.0.1:{a}; }}\n\
         server {{ listen 127.0.0.1:{port}; proxy_pass unix:{sock}; }}\n\
         server {{ listen 127.0.0.1:{rport} reuseport backlog=64; proxy_pass 127.0.0.1:{a}; }}\n\
         server {{ listen 127.0.0.1:{slow}; proxy_pass 127.0.0.1:{a}; proxy_download_rate 20k; \
         proxy_buffer_size 4k; }}",
        sock = sock.display(),
        a = a.port
    );
    let s = Shoal::start(
        &conf(&body).replace("worker_processes 1;", "worker_processes 2;"),
        port,
    );
    // TCP in, through a unix-socket stream server, to the echo: two sessions logged.
    assert_eq!(tcp(port, b"u"), b"A:u");
    let lines = log_lines(&s, 2);
    assert!(
        lines
            .iter()
            .any(|l| l.contains(&format!("\"unix:{}\"", sock.display()))),
        "{lines:?}"
    );
    // reuseport: a listening socket per worker.
    assert_eq!(crate::common::listening_sockets(rport), 2);
    assert_eq!(tcp(rport, b"r"), b"A:r");
    // 60 KiB back at 20 KiB/s: not before about two seconds.
    let data = vec![b'x'; 60 * 1024];
    let t = Instant::now();
    let got = tcp(slow, &data);
    assert_eq!(
        got.len(),
        data.len() + 2 * got.windows(2).filter(|w| w == b"A:").count()
    );
    assert!(
        t.elapsed() >= Duration::from_millis(1800),
        "{:?}",
        t.elapsed()
    );
}

#[test]
fn quit_closes_a_session_at_worker_shutdown_timeout() {
    let a = Echo::start("A:");
    let port = free_port();
    let c = conf(&format!(
        "server {{ listen 127.0.0.1:{port}; proxy_pass 127.0.0.1:{}; }}",
        a.port
    ))
    .replace("daemon off;", "daemon off;\nworker_shutdown_timeout 1s;");
    let mut s = Shoal::start(&c, port);
    let mut conn = TcpStream::connect(("127.0.0.1", port)).unwrap();
    conn.set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    conn.write_all(b"1").unwrap();
    let mut buf = [0u8; 16];
    assert_eq!(conn.read(&mut buf).unwrap(), 3);
    s.signal(libc::SIGQUIT);
    // The session is cut once the timeout has passed, and the process ends.
    let n = conn.read(&mut buf).unwrap_or(0);
    assert_eq!(n, 0, "the session outlived worker_shutdown_timeout");
    assert!(s.wait_exit().success());
    s.wait_log("shutdown timeout, closing 1 connection(s)", 1);
}
