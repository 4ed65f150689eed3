//! `stream {}` end to end, shoal alone: TCP and UDP echo servers started here as the
//! upstreams, sessions through shoal over real sockets, and what the access and error logs
//! say. Balancing (weights, `hash ... consistent`, `least_conn`, `backup`, `down`,
//! `max_fails`), `proxy_next_upstream`, timeouts, `return`/`set`/`map`, `allow`/`deny`,
//! `limit_conn`, the PROXY protocol both ways, UDP's `proxy_responses`/`proxy_requests`, and a
//! reload and a graceful stop with a session in flight.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::common::{free_port, wait_for, Prefix, Shoal};

/// A TCP and UDP echo server on 127.0.0.1:`port` that prefixes every answer with `tag`.
/// What the first read of each TCP connection brought is kept (`firsts`), to see a PROXY
/// protocol header.
pub struct Echo {
    pub port: u16,
    pub firsts: Arc<Mutex<Vec<Vec<u8>>>>,
    stop: Arc<AtomicBool>,
}

impl Echo {
    pub fn start(tag: &str) -> Echo {
        // A port free for both TCP and UDP.
        let (port, listener, udp) = loop {
            let port = free_port();
            let Ok(listener) = TcpListener::bind(("127.0.0.1", port)) else {
                continue;
            };
            if let Ok(udp) = UdpSocket::bind(("127.0.0.1", port)) {
                break (port, listener, udp);
            }
        };
        udp.set_read_timeout(Some(Duration::from_millis(100)))
            .unwrap();
        listener.set_nonblocking(true).unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let firsts = Arc::new(Mutex::new(Vec::new()));
        let tag = tag.as_bytes().to_vec();
        {
            let (stop, tag) = (stop.clone(), tag.clone());
            std::thread::spawn(move || {
                let mut buf = [0u8; 65536];
                while !stop.load(Ordering::Relaxed) {
                    if let Ok((n, from)) = udp.recv_from(&mut buf) {
                        let mut out = tag.clone();
                        out.extend_from_slice(&buf[..n]);
                        let _ = udp.send_to(&out, from);
                    }
                }
            });
        }
        {
            let (stop, firsts) = (stop.clone(), firsts.clone());
            std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    let Ok((mut c, _)) = listener.accept() else {
                        std::thread::sleep(Duration::from_millis(5));
                        continue;
                    };
                    let (tag, firsts) = (tag.clone(), firsts.clone());
                    std::thread::spawn(move || {
                        c.set_nonblocking(false).unwrap();
                        let mut buf = [0u8; 65536];
                        let mut first = true;
                        loop {
                            let n = match c.read(&mut buf) {
                                Ok(0) | Err(_) => break,
                                Ok(n) => n,
                            };
                            if first {
                                firsts.lock().unwrap().push(buf[..n].to_vec());
                                first = false;
                            }
                            let mut out = tag.clone();
                            out.extend_from_slice(&buf[..n]);
                            if c.write_all(&out).is_err() {
                                break;
                            }
                        }
                    });
                }
            });
        }
        Echo { port, firsts, stop }
    }
}

impl Drop for Echo {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// A port nothing listens on (TCP connections to it are refused).
pub fn dead_port() -> u16 {
    free_port()
}

/// The configuration: a stream block around `body`, logging `$status`, byte counts and the
/// upstream.
pub fn conf(body: &str) -> String {
    format!(
        "daemon off;\nworker_processes 1;\nerror_log logs/error.log info;\nevents {{ }}\n\
         stream {{\n    log_format s '$protocol $status $bytes_sent $bytes_received \
         \"$upstream_addr\" \"$upstream_bytes_sent\" \"$upstream_bytes_received\"';\n    \
         access_log logs/stream.log s;\n{body}\n}}\n"
    )
}

/// Sends `data` on a new connection to `port` and reads until its echo has come back (or the
/// connection closed).
pub fn tcp(port: u16, data: &[u8]) -> Vec<u8> {
    tcp_until(port, data, data)
}

/// Sends `data` on a new connection to `port` and reads until what came ends with `suffix`
/// (or the connection closed).
pub fn tcp_until(port: u16, data: &[u8], suffix: &[u8]) -> Vec<u8> {
    let mut c = TcpStream::connect(("127.0.0.1", port)).expect("connecting");
    c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    c.write_all(data).unwrap();
    // Read the echo before closing: without proxy_half_close, the session ends at the client's
    // EOF.
    let mut out = vec![0u8; 65536];
    let mut got = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        match c.read(&mut out) {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                got.extend_from_slice(&out[..n]);
                if got.ends_with(suffix) {
                    break;
                }
            }
        }
    }
    got
}

/// Sends one datagram to `port` and waits for one answer (`None` after 3 s).
pub fn udp(port: u16, data: &[u8]) -> Option<Vec<u8>> {
    let s = UdpSocket::bind("127.0.0.1:0").unwrap();
    s.set_read_timeout(Some(Duration::from_secs(3))).unwrap();
    s.send_to(data, ("127.0.0.1", port)).unwrap();
    let mut buf = [0u8; 65536];
    let (n, _) = s.recv_from(&mut buf).ok()?;
    Some(buf[..n].to_vec())
}

/// The access log's lines, once it has `n`.
fn log_lines(s: &Shoal, n: usize) -> Vec<String> {
    wait_for(&format!("{n} lines in stream.log"), || {
        let text = s.prefix.read("logs/stream.log");
        let lines: Vec<String> = text.lines().map(str::to_string).collect();
        (lines.len() >= n).then_some(lines)
    })
}

/// Starts shoal with `body` and waits until it serves: on a server of its own, so that the
/// probe is neither logged nor counted by a balancer (`_port` is one of the body's).
fn start(body: &str, _port: u16) -> Shoal {
    let probe = free_port();
    let body =
        format!("{body}\n    server {{ listen 127.0.0.1:{probe}; return ok; access_log off; }}");
    Shoal::start(&conf(&body), probe)
}

#[test]
fn tcp_round_robin_with_weights_and_the_access_log() {
    let (a, b) = (Echo::start("A:"), Echo::start("B:"));
    let port = free_port();
    let s = start(
        &format!(
            "upstream be {{ server 127.0.0.1:{} weight=2; server 127.0.0.1:{}; }}\n\
             server {{ listen 127.0.0.1:{port}; proxy_pass be; }}",
            a.port, b.port
        ),
        port,
    );
    let answers: Vec<String> = (0..6)
        .map(|_| String::from_utf8(tcp(port, b"hello")).unwrap())
        .collect();
    assert_eq!(
        answers,
        ["A:hello", "B:hello", "A:hello", "A:hello", "B:hello", "A:hello"],
        "smooth weighted round robin, 2:1"
    );
    let lines = log_lines(&s, 6);
    assert_eq!(
        lines[0],
        format!("TCP 200 7 5 \"127.0.0.1:{}\" \"5\" \"7\"", a.port)
    );
    let log = s.error_log();
    assert!(
        log.contains(&format!("connected to 127.0.0.1:{port}")),
        "{log}"
    );
    assert!(
        log.contains("client disconnected, bytes from/to client:5/7, bytes from/to upstream:7/5"),
        "{log}"
    );
}

#[test]
fn next_upstream_skips_a_dead_peer_and_max_fails_keeps_it_out() {
    let a = Echo::start("A:");
    let dead = dead_port();
    let (port, off) = (free_port(), free_port());
    let s = start(
        &format!(
            "upstream be {{ server 127.0.0.1:{dead} max_fails=1 fail_timeout=30s; server 127.0.0.1:{}; }}\n\
             upstream be2 {{ server 127.0.0.1:{dead}; server 127.0.0.1:{}; }}\n\
             server {{ listen 127.0.0.1:{port}; proxy_pass be; }}\n\
             server {{ listen 127.0.0.1:{off}; proxy_pass be2; proxy_next_upstream off; }}",
            a.port, a.port
        ),
        port,
    );
    for _ in 0..4 {
        assert_eq!(tcp(port, b"x"), b"A:x");
    }
    let lines = log_lines(&s, 4);
    assert_eq!(
        lines[0],
        format!(
            "TCP 200 3 1 \"127.0.0.1:{dead}, 127.0.0.1:{}\" \"0, 1\" \"0, 3\"",
            a.port
        ),
        "the dead peer tried first, then the live one"
    );
    // Failed once within fail_timeout: not tried again.
    for l in &lines[1..] {
        assert_eq!(
            l,
            &format!("TCP 200 3 1 \"127.0.0.1:{}\" \"1\" \"3\"", a.port)
        );
    }
    assert_eq!(
        s.error_log()
            .matches("(111: Connection refused) while connecting to upstream")
            .count(),
        1
    );
    // Without proxy_next_upstream a failed connect ends the session: 502; the next session
    // goes to the other peer.
    assert_eq!(tcp(off, b"y"), b"");
    assert_eq!(tcp(off, b"y"), b"A:y");
    let lines = log_lines(&s, 6);
    assert_eq!(
        lines[4],
        format!("TCP 502 0 0 \"127.0.0.1:{dead}\" \"0\" \"0\"")
    );
}

#[test]
fn every_peer_failing_is_502_then_no_live_upstreams() {
    let (dead1, dead2) = (dead_port(), dead_port());
    let port = free_port();
    let s = start(
        &format!(
            "upstream be {{ server 127.0.0.1:{dead1}; server 127.0.0.1:{dead2}; }}\n\
             server {{ listen 127.0.0.1:{port}; proxy_pass be; proxy_connect_timeout 2s; }}"
        ),
        port,
    );
    assert_eq!(tcp(port, b"x"), b"");
    assert_eq!(tcp(port, b"x"), b"");
    let lines = log_lines(&s, 2);
    assert_eq!(
        lines[0],
        format!("TCP 502 0 0 \"127.0.0.1:{dead1}, 127.0.0.1:{dead2}\" \"0, 0\" \"0, 0\"")
    );
    assert_eq!(lines[1], "TCP 502 0 0 \"be\" \"0\" \"0\"");
    s.wait_log(
        "no live upstreams while connecting to upstream, client: 127.0.0.1",
        1,
    );
}

#[test]
fn backup_and_down_peers() {
    let (a, b, c) = (Echo::start("A:"), Echo::start("B:"), Echo::start("C:"));
    let port = free_port();
    let _s = start(
        &format!(
            "upstream be {{ server 127.0.0.1:{} down; server 127.0.0.1:{dead}; server 127.0.0.1:{} backup; }}\n\
             upstream lc {{ least_conn; server 127.0.0.1:{}; }}\n\
             server {{ listen 127.0.0.1:{port}; proxy_pass be; }}",
            a.port,
            b.port,
            c.port,
            dead = dead_port()
        ),
        port,
    );
    // The primary that is not down refuses: the backup answers.
    assert_eq!(tcp(port, b"q"), b"B:q");
    assert_eq!(tcp(port, b"q"), b"B:q");
}

#[test]
fn consistent_hash_keeps_a_key_on_one_peer_and_random_spreads() {
    let echoes: Vec<Echo> = ["A:", "B:", "C:"].iter().map(|t| Echo::start(t)).collect();
    let (port, rport) = (free_port(), free_port());
    let servers: String = echoes
        .iter()
        .map(|e| format!("server 127.0.0.1:{};", e.port))
        .collect();
    let _s = start(
        &format!(
            "map $server_port $k {{ default fixed-key; }}\n\
             upstream h {{ hash $k consistent; {servers} }}\n\
             upstream r {{ random two least_conn; {servers} }}\n\
             server {{ listen 127.0.0.1:{port}; proxy_pass h; }}\n\
             server {{ listen 127.0.0.1:{rport}; proxy_pass r; }}"
        ),
        port,
    );
    let first = tcp(port, b"k");
    for _ in 0..5 {
        assert_eq!(tcp(port, b"k"), first);
    }
    let mut seen = std::collections::HashSet::new();
    for _ in 0..30 {
        seen.insert(tcp(rport, b"r"));
    }
    assert!(seen.len() >= 2, "random used one peer only: {seen:?}");
}

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
fn return_set_map_and_access_rules() {
    let a = Echo::start("A:");
    let (port, denied, lport) = (free_port(), free_port(), free_port());
    let s = start(
        &format!(
            "map $remote_addr $who {{ 127.0.0.1 local; default other; }}\n\
             limit_conn_zone $binary_remote_addr zone=one:1m;\n\
             server {{ listen 127.0.0.1:{port}; set $greet hello; return \"$greet $who $server_port\\n\"; }}\n\
             server {{ listen 127.0.0.1:{denied}; deny 127.0.0.1; allow all; return no; }}\n\
             server {{ listen 127.0.0.1:{lport}; limit_conn one 1; proxy_pass 127.0.0.1:{}; }}",
            a.port
        ),
        port,
    );
    assert_eq!(
        String::from_utf8(tcp(port, b"")).unwrap(),
        format!("hello local {port}\n")
    );
    assert_eq!(tcp(denied, b"x"), b"");
    s.wait_log(
        "access forbidden by rule while initializing session, client: 127.0.0.1, server: 127.0.0.1:",
        1,
    );
    // limit_conn: a second session while the first is open is refused.
    let first = TcpStream::connect(("127.0.0.1", lport)).unwrap();
    wait_for("the first session to be counted", || {
        s.error_log().contains("proxy 127.0.0.1:").then_some(())
    });
    assert_eq!(tcp(lport, b"x"), b"");
    s.wait_log("limiting connections by zone \"one\"", 1);
    drop(first);
    let text = wait_for("the refused sessions logged", || {
        let t = s.prefix.read("logs/stream.log");
        (t.contains("TCP 403 0 ") && t.contains("TCP 503 0 ") && t.lines().count() >= 4)
            .then_some(t)
    });
    assert_eq!(text.lines().count(), 4, "{text}");
}

#[test]
fn proxy_protocol_in_and_out_with_set_real_ip_from() {
    let a = Echo::start("A:");
    let (port, front, probe) = (free_port(), free_port(), free_port());
    let s = Shoal::start(
        &format!(
            "daemon off;\nerror_log logs/error.log info;\nevents {{ }}\nstream {{\n\
             log_format s '$remote_addr $proxy_protocol_addr $realip_remote_addr';\n\
             access_log logs/stream.log s;\n\
             server {{ listen 127.0.0.1:{port} proxy_protocol; set_real_ip_from 127.0.0.1; \
             proxy_pass 127.0.0.1:{}; proxy_protocol on; }}\n\
             server {{ listen 127.0.0.1:{front}; proxy_pass 127.0.0.1:{port}; proxy_protocol on; }}\n\
             server {{ listen 127.0.0.1:{probe}; return ok; access_log off; }}\n}}\n",
            a.port
        ),
        probe,
    );
    let got = tcp_until(port, b"PROXY TCP4 10.1.2.3 10.0.0.1 5555 80\r\nhi", b"hi");
    assert!(
        got.starts_with(b"A:PROXY TCP4 10.1.2.3 127.0.0.1 5555 "),
        "{got:?}"
    );
    let firsts = a.firsts.lock().unwrap().clone();
    assert!(
        firsts[0].starts_with(b"PROXY TCP4 10.1.2.3 127.0.0.1 5555 "),
        "{:?}",
        String::from_utf8_lossy(&firsts[0])
    );
    let lines = log_lines(&s, 1);
    assert_eq!(lines[0], "10.1.2.3 10.1.2.3 127.0.0.1");
    // Through the front server, which sends its own header: the client is 127.0.0.1.
    let got = tcp_until(front, b"x", b"x");
    assert!(
        got.starts_with(b"A:PROXY TCP4 127.0.0.1 127.0.0.1 "),
        "{got:?}"
    );
    let lines = log_lines(&s, 3);
    assert!(
        lines.iter().any(|l| l == "127.0.0.1 127.0.0.1 127.0.0.1"),
        "{lines:?}"
    );
    // A broken header: nginx's line, the session closed.
    assert_eq!(tcp(port, b"GARBAGE\r\n"), b"");
    s.wait_log("broken header: \"GARBAGE", 1);
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
fn configuration_errors_read_as_nginx_s() {
    let cases: &[(&str, &str)] = &[
        ("server { listen 1234; }", "no handler for server in"),
        ("server { proxy_pass 127.0.0.1:1; }", "no \"listen\" is defined for server in"),
        (
            "server { listen 1234; proxy_pass 127.0.0.1:1; } server { listen 1234; proxy_pass 127.0.0.1:1; }",
            "duplicate \"0.0.0.0:1234\" address and port pair in",
        ),
        ("upstream u { server 127.0.0.1; } server { listen 1234; proxy_pass u; }", "no port in upstream \"127.0.0.1\" in"),
        ("server { listen 1234; proxy_pass nosuch; }", "no port in upstream \"nosuch\" in"),
        ("server { listen 1234; access_log logs/a.log; proxy_pass 127.0.0.1:1; }", "log format is not specified in"),
        ("server { listen 1234; access_log logs/a.log combined; proxy_pass 127.0.0.1:1; }", "unknown log format \"combined\" in"),
        ("upstream u { server 127.0.0.1:1; keepalive 2; } server { listen 1234; proxy_pass u; }", "\"keepalive\" directive is not allowed here in"),
        ("server { listen 1234 default_server; proxy_pass 127.0.0.1:1; }", "the invalid \"default_server\" parameter in"),
        ("server { listen 1234; proxy_pass 127.0.0.1:1; proxy_pass 127.0.0.1:2; }", "\"proxy_pass\" directive is duplicate in"),
        ("server { listen 1234; proxy_pass $nosuch; }", "unknown \"nosuch\" variable"),
        ("ssl_alpn h2; server { listen 1234; ssl_alpn a; ssl_alpn b; return x; }", "\"ssl_alpn\" directive is duplicate in"),
        (&format!("server {{ listen 1234; ssl_alpn h2 {}; return x; }}", "p".repeat(256)), "\"ssl_alpn\" directive protocol too long in"),
    ];
    for (body, want) in cases {
        let p = Prefix::new();
        p.write_conf(&format!("events {{ }}\nstream {{\n{body}\n}}\n"));
        let out = p.run(&["-t"]);
        let text = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{body}: accepted");
        assert!(text.contains(want), "{body}: {text}");
    }
    // And a good one passes, with no warning about stream being ignored.
    let p = Prefix::new();
    // (Debian's nginx.conf loads the stream module: shoal has it built in.)
    p.write_conf(
        "load_module modules/ngx_stream_module.so;\nevents { }\n\
         stream { upstream u { server 127.0.0.1:1; } server { listen 1234; proxy_pass u; } }\n",
    );
    let out = p.run(&["-t"]);
    let text = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{text}");
    assert!(!text.contains("not implemented"), "{text}");
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
fn tls_termination_in_front_of_a_plain_upstream() {
    use crate::common::tls::{Opts, Pki, TlsClient};
    let mut pki = Pki::new();
    pki.issue("srv", &["127.0.0.1", "localhost"], false);
    let a = Echo::start("A:");
    let port = free_port();
    let s = Shoal::start(
        &format!(
            "daemon off;\nerror_log logs/error.log info;\nevents {{ }}\nstream {{\n\
             log_format t '$status $ssl_protocol $ssl_server_name $bytes_received';\n\
             access_log logs/stream.log t;\n\
             server {{ listen 127.0.0.1:{port} ssl; {} ssl_protocols TLSv1.2 TLSv1.3; \
             proxy_pass 127.0.0.1:{}; }}\n}}\n",
            pki.ssl_lines("srv"),
            a.port
        ),
        port,
    );
    let mut c = TlsClient::connect(
        port,
        &pki,
        &Opts {
            sni: Some("localhost"),
            ..Default::default()
        },
    )
    .expect("the handshake");
    c.send(b"secret").unwrap();
    let mut got = Vec::new();
    let mut buf = [0u8; 64];
    while !got.ends_with(b"secret") {
        let n = c.stream.read(&mut buf).expect("reading the echo");
        assert!(n > 0, "closed early: {got:?}");
        got.extend_from_slice(&buf[..n]);
    }
    assert_eq!(
        got, b"A:secret",
        "decrypted to the upstream, encrypted back"
    );
    drop(c);
    // Plain bytes on the TLS port: the handshake fails, nginx's 500.
    assert_eq!(tcp(port, b"GET / HTTP/1.0\r\n\r\n"), b"");
    let text = wait_for("two sessions logged", || {
        let t = s.prefix.read("logs/stream.log");
        (t.lines().count() >= 3).then_some(t)
    });
    assert!(text.contains("200 TLSv1.3 localhost 6\n"), "{text}");
    assert!(text.contains("500 - - 0\n"), "{text}");
    s.wait_log("while SSL handshaking, client: 127.0.0.1", 1);
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

#[test]
fn a_server_s_error_log_takes_its_sessions_lines() {
    let port = free_port();
    let s = start(
        &format!(
            "server {{ listen 127.0.0.1:{port}; error_log logs/srv.err info; \
             proxy_pass 127.0.0.1:{}; }}",
            dead_port()
        ),
        port,
    );
    assert_eq!(tcp(port, b"x"), b"");
    wait_for("the server's error log", || {
        s.prefix
            .read("logs/srv.err")
            .contains("(111: Connection refused) while connecting to upstream")
            .then_some(())
    });
    assert!(
        !s.error_log().contains("Connection refused"),
        "{}",
        s.error_log()
    );
}

/// One `openssl s_client` session to `port` offering `alpn` (none: no ALPN extension), reading
/// until the server closes: what the client settled (`ALPN protocol: X`, `No ALPN negotiated`,
/// or `refused: no application protocol` when the server ended the handshake with that alert),
/// then `[X]` for the server's bytes `<<alpn=X>>`.
pub fn s_client_alpn(port: u16, alpn: Option<&str>) -> String {
    let mut cmd = std::process::Command::new("timeout");
    cmd.args(["10", "openssl", "s_client", "-connect"])
        .arg(format!("127.0.0.1:{port}"))
        .args(["-servername", "localhost", "-ign_eof"]);
    if let Some(a) = alpn {
        cmd.args(["-alpn", a]);
    }
    let out = cmd
        .stdin(std::process::Stdio::null())
        .output()
        .expect("running openssl s_client");
    let text = String::from_utf8_lossy(&out.stdout);
    let err = String::from_utf8_lossy(&out.stderr);
    if err.contains("no application protocol") {
        return "refused: no application protocol".into();
    }
    let settled = text
        .lines()
        .find(|l| l.starts_with("ALPN protocol:") || l.starts_with("No ALPN negotiated"))
        .unwrap_or("no ALPN line")
        .to_string();
    let data = text
        .split_once("<<alpn=")
        .and_then(|(_, rest)| rest.split_once(">>"))
        .map_or("(none)", |(v, _)| v);
    format!("{settled} [{data}]")
}

#[test]
fn ssl_alpn_chooses_in_the_server_s_order_and_refuses_a_stranger() {
    let mut pki = crate::common::tls::Pki::new();
    pki.issue("srv", &["127.0.0.1", "localhost"], false);
    let (p1, p2) = (free_port(), free_port());
    let s = Shoal::start(
        &format!(
            "daemon off;\nerror_log logs/error.log info;\nevents {{ }}\nstream {{\n\
             ssl_alpn h2 http/1.1;\n{ssl}\n\
             log_format t '$status \"$ssl_alpn_protocol\"';\naccess_log logs/stream.log t;\n\
             server {{ listen 127.0.0.1:{p1} ssl; return \"<<alpn=$ssl_alpn_protocol>>\"; }}\n\
             server {{ listen 127.0.0.1:{p2} ssl; ssl_alpn off-by-one; \
             return \"<<alpn=$ssl_alpn_protocol>>\"; }}\n}}\n",
            ssl = pki.ssl_lines("srv"),
        ),
        p1,
    );
    // The server's order decides, whatever the client's.
    assert_eq!(
        s_client_alpn(p1, Some("http/1.1,h2")),
        "ALPN protocol: h2 [h2]"
    );
    assert_eq!(
        s_client_alpn(p1, Some("x,http/1.1")),
        "ALPN protocol: http/1.1 [http/1.1]"
    );
    // No ALPN offered: none chosen, the session goes on.
    assert_eq!(s_client_alpn(p1, None), "No ALPN negotiated []");
    // Nothing in common: the handshake ends with no_application_protocol.
    assert_eq!(
        s_client_alpn(p1, Some("imap")),
        "refused: no application protocol"
    );
    // A server's own list replaces the stream level's.
    assert_eq!(
        s_client_alpn(p2, Some("h2,off-by-one")),
        "ALPN protocol: off-by-one [off-by-one]"
    );
    assert_eq!(
        s_client_alpn(p2, Some("h2")),
        "refused: no application protocol"
    );
    // (The first line is the start's probe, a plain connection: a failed handshake.)
    let text = wait_for("seven sessions logged", || {
        let t = s.prefix.read("logs/stream.log");
        (t.lines().count() >= 7).then_some(t)
    });
    assert_eq!(
        text,
        "500 \"-\"\n200 \"h2\"\n200 \"http/1.1\"\n200 \"-\"\n500 \"-\"\n200 \"off-by-one\"\n500 \"-\"\n"
    );
}

#[test]
fn without_ssl_alpn_a_stream_handshake_negotiates_no_protocol() {
    let mut pki = crate::common::tls::Pki::new();
    pki.issue("srv", &["127.0.0.1", "localhost"], false);
    let port = free_port();
    let _s = Shoal::start(
        &format!(
            "daemon off;\nevents {{ }}\nstream {{\n\
             server {{ listen 127.0.0.1:{port} ssl; {} return \"<<alpn=$ssl_alpn_protocol>>\"; }}\n}}\n",
            pki.ssl_lines("srv"),
        ),
        port,
    );
    // (Not http/1.1 as an http server's handshake: a client offering only h2 still connects.)
    assert_eq!(s_client_alpn(port, Some("h2")), "No ALPN negotiated []");
    assert_eq!(
        s_client_alpn(port, Some("http/1.1")),
        "No ALPN negotiated []"
    );
}
