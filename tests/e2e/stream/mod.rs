//! `stream {}` end to end, shoal alone: TCP and UDP echo servers started here as the
//! upstreams, sessions through shoal over real sockets, and what the access and error logs
//! say. Balancing (weights, `hash ... consistent`, `least_conn`, `backup`, `down`,
//! `max_fails`), `proxy_next_upstream`, timeouts, `return`/`set`/`map`, `allow`/`deny`,
//! `limit_conn`, the PROXY protocol both ways, UDP's `proxy_responses`/`proxy_requests`, and a
//! reload and a graceful stop with a session in flight.
//!
//! Here the echo servers and clients the `stream` modules share (the `nginx_diff_stream`
//! comparisons use them too); the tests are in `balancing`, `sessions` (UDP, timeouts,
//! half-close, unix sockets, reload and stop), `directives` (`return`/`set`/`map`, access
//! rules, the PROXY protocol, configuration errors, a server's error log) and `tls`.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::common::{free_port, wait_for, Shoal};

mod balancing;
mod directives;
mod sessions;
mod tls;

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
