//! gRPC upstreams end to end (`grpc_pass`): a real gRPC server (Debian's python3-grpcio,
//! `grpc_support/server.py`) started by the test, and the same library's client
//! (`grpc_support/client.py`) talking to shoal over HTTP/2, cleartext and TLS. Unary calls,
//! streaming in both directions (a bidirectional call that only goes on once each answer came
//! back proves nothing is held), an error status with its message, metadata both ways and
//! trailers, `grpcs://` with `grpc_ssl_verify`, a peer that is down (502: UNAVAILABLE), a
//! stream the upstream resets (nginx's log line), `keepalive` (the upstream's connections
//! counted by the server), `grpc_next_upstream`.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crate::common::backends::{Backend, Listen};
use crate::common::tls::Pki;
use crate::common::{free_port, Prefix, Shoal};

/// Debian's python3 (python3-grpcio is installed for it, not for another python on PATH).
const PYTHON: &str = "/usr/bin/python3";

fn support(name: &str) -> String {
    format!(
        "{}/tests/e2e/grpc_support/{name}",
        env!("CARGO_MANIFEST_DIR")
    )
}

/// The test gRPC server on a free port; TLS with `cert` (`NAME.crt`/`NAME.key` of `pki`).
pub fn server(tls: Option<(&Pki, &str)>) -> Backend {
    let port = free_port();
    let mut cmd = Command::new(PYTHON);
    cmd.arg(support("server.py")).arg(port.to_string());
    if let Some((pki, name)) = tls {
        cmd.arg(pki.path(&format!("{name}.crt")))
            .arg(pki.path(&format!("{name}.key")));
    }
    let dir = tempfile::Builder::new()
        .prefix("shoal-grpc-")
        .tempdir()
        .expect("a temporary directory");
    Backend::start("grpc server (python3-grpcio)", cmd, dir, Listen::Tcp(port))
}

/// Runs `scenario` of client.py against `target` (`127.0.0.1:PORT`); over TLS with the CA
/// of `tls` and the certificate's name. Returns what it printed.
pub fn client(target: &str, scenario: &str, tls: Option<(&Path, &str)>) -> String {
    client_of("test.Echo", target, scenario, tls)
}

/// [`client`] calling the service by another name (`/SERVICE/Echo`, ...).
pub fn client_of(
    service: &str,
    target: &str,
    scenario: &str,
    tls: Option<(&Path, &str)>,
) -> String {
    let mut cmd = Command::new(PYTHON);
    cmd.env("GRPC_SERVICE", service);
    cmd.arg(support("client.py")).arg(target).arg(scenario);
    if let Some((ca, name)) = tls {
        cmd.arg(ca).arg(name);
    }
    let out = cmd.output().expect("running the gRPC client");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "client.py {scenario} failed: {text}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    text
}

/// What every call of the `all` scenario answers, straight or through a proxy.
pub const ALL: &str = "unary=hello\npong=p1\ntrail=done\n\
                       fail status=INVALID_ARGUMENT message=bad thing\ncount=0,1,2,3,4\n\
                       sum=a+b+c\nchat=re:m0,re:m1,re:m2\n";

/// An HTTP/2 server that resets every stream it is sent, with `code`, as soon as its HEADERS
/// come, or after a head (`:status: 200`) and a DATA frame with `after_head` (frames written by
/// hand: the preface read, an empty SETTINGS sent, the client's SETTINGS acknowledged).
pub struct Resetter {
    pub port: u16,
    stop: Arc<AtomicBool>,
}

impl Resetter {
    pub fn start(code: u32) -> Resetter {
        Resetter::start_after(code, false)
    }

    pub fn start_after(code: u32, after_head: bool) -> Resetter {
        let listener = TcpListener::bind("127.0.0.1:0").expect("binding");
        let port = listener.local_addr().expect("an address").port();
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                if flag.load(Ordering::SeqCst) {
                    return;
                }
                if let Ok(c) = conn {
                    std::thread::spawn(move || reset_all(c, code, after_head));
                }
            }
        });
        Resetter { port, stop }
    }
}

impl Drop for Resetter {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        let _ = TcpStream::connect(("127.0.0.1", self.port));
    }
}

/// One HTTP/2 frame read whole: its 9-byte header and its payload (None at the end or an error).
fn read_frame(c: &mut impl Read) -> Option<([u8; 9], Vec<u8>)> {
    let mut head = [0u8; 9];
    c.read_exact(&mut head).ok()?;
    let len = (usize::from(head[0]) << 16) | (usize::from(head[1]) << 8) | usize::from(head[2]);
    let mut payload = vec![0u8; len];
    c.read_exact(&mut payload).ok()?;
    Some((head, payload))
}

fn frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
    let len = payload.len() as u32;
    let mut f = vec![(len >> 16) as u8, (len >> 8) as u8, len as u8, kind, flags];
    f.extend_from_slice(&stream.to_be_bytes());
    f.extend_from_slice(payload);
    f
}

fn reset_all(mut c: TcpStream, code: u32, after_head: bool) {
    let _ = c.set_read_timeout(Some(Duration::from_secs(20)));
    let mut preface = [0u8; 24];
    if c.read_exact(&mut preface).is_err() {
        return;
    }
    if c.write_all(&frame(4, 0, 0, &[])).is_err() {
        return;
    }
    loop {
        let Some((head, _payload)) = read_frame(&mut c) else {
            return;
        };
        let stream = u32::from_be_bytes([head[5], head[6], head[7], head[8]]) & 0x7fff_ffff;
        let reply = match head[3] {
            4 if head[4] & 1 == 0 => frame(4, 1, 0, &[]),
            1 if after_head => {
                // `:status: 200` (HPACK's static entry 8) and a message; a moment later (the
                // head is out to the client by then), the reset.
                let head = [
                    frame(1, 4, stream, &[0x88]),
                    frame(0, 0, stream, &[0, 0, 0, 0, 1, b'0']),
                ];
                if c.write_all(&head.concat()).is_err() {
                    return;
                }
                std::thread::sleep(Duration::from_millis(300));
                frame(3, 0, stream, &code.to_be_bytes())
            }
            1 => frame(3, 0, stream, &code.to_be_bytes()),
            _ => continue,
        };
        if c.write_all(&reply).is_err() {
            return;
        }
    }
}

fn conf(http: &str, servers: &str) -> String {
    format!(
        "daemon off;\nerror_log logs/error.log info;\nevents {{ }}\n\
         http {{\n    log_format up '$status $upstream_status $upstream_addr \
         \"$upstream_http_grpc_status\" $request';\n    access_log logs/access.log up;\n\
         {http}\n{servers}\n}}\n"
    )
}

fn h2c_server(port: u16, lines: &str) -> String {
    format!("    server {{\n        listen 127.0.0.1:{port};\n        http2 on;\n{lines}\n    }}\n")
}

#[test]
fn calls_of_every_kind_over_h2c() {
    let backend = server(None);
    let pass = backend.listen.pass();
    let (port, set_port, hide_port) = (free_port(), free_port(), free_port());
    let servers = [
        h2c_server(port, &format!("location / {{ grpc_pass grpc://{pass}; }}")),
        h2c_server(
            set_port,
            &format!("location / {{ grpc_set_header x-ping from-conf; grpc_pass {pass}; }}"),
        ),
        h2c_server(
            hide_port,
            &format!("location / {{ grpc_hide_header x-pong; grpc_pass grpc://{pass}; }}"),
        ),
    ]
    .concat();
    let s = Shoal::start(&conf("", &servers), port);
    let target = format!("127.0.0.1:{port}");
    assert_eq!(client(&target, "all", None), ALL, "{}", s.error_log());
    // `grpc_set_header` replaces the client's metadata; `grpc_hide_header` keeps the
    // upstream's from the client.
    let set = client(&format!("127.0.0.1:{set_port}"), "metadata", None);
    assert_eq!(set, "pong=from-conf\ntrail=done\n");
    let hidden = client(&format!("127.0.0.1:{hide_port}"), "metadata", None);
    assert_eq!(hidden, "pong=None\ntrail=done\n");
    // The access log: every call answered by the upstream, the trailers-only error's status in
    // `$upstream_http_grpc_status` (its head is its trailers).
    let log = s.prefix.read("logs/access.log");
    let addr = backend.listen.pass();
    assert!(
        log.contains(&format!(
            "200 200 {addr} \"3\" POST /test.Echo/Fail HTTP/2.0"
        )),
        "{log}"
    );
    assert!(
        log.contains(&format!(
            "200 200 {addr} \"-\" POST /test.Echo/Chat HTTP/2.0"
        )),
        "{log}"
    );
}

#[test]
fn over_tls_to_the_client_and_the_upstream() {
    let mut pki = Pki::new();
    pki.issue("localhost", &["localhost", "127.0.0.1"], false);
    pki.issue("backend", &["backend.test"], false);
    let backend = server(Some((&pki, "backend")));
    let pass = backend.listen.pass();
    let (port, wrong_port) = (free_port(), free_port());
    let ca = pki.path("ca.crt");
    let tls_server = |port: u16, name: &str| {
        format!(
            "    server {{\n        listen 127.0.0.1:{port} ssl;\n        http2 on;\n        {}\n        \
             location / {{ grpc_ssl_verify on; grpc_ssl_trusted_certificate {}; \
             grpc_ssl_name {name}; grpc_pass grpcs://{pass}; }}\n    }}\n",
            pki.ssl_lines("localhost"),
            ca.display()
        )
    };
    let servers = tls_server(port, "backend.test") + &tls_server(wrong_port, "other.test");
    let s = Shoal::start(&conf("", &servers), port);
    let tls = Some((ca.as_path(), "localhost"));
    assert_eq!(
        client(&format!("127.0.0.1:{port}"), "all", tls),
        ALL,
        "{}",
        s.error_log()
    );
    // A name the upstream's certificate does not carry: the handshake is refused, as nginx.
    let out = client(&format!("127.0.0.1:{wrong_port}"), "unary", tls);
    assert!(out.starts_with("error status=UNAVAILABLE"), "{out}");
    s.wait_log(
        "upstream SSL certificate does not match \"other.test\" while SSL handshaking to upstream",
        1,
    );
    assert!(s.error_log().contains("upstream: \"grpcs://127.0.0.1:"));
}

#[test]
fn an_upstream_that_is_down_is_unavailable() {
    let dead = free_port();
    let port = free_port();
    let s = Shoal::start(
        &conf(
            "",
            &h2c_server(
                port,
                &format!("location / {{ grpc_pass 127.0.0.1:{dead}; }}"),
            ),
        ),
        port,
    );
    let out = client(&format!("127.0.0.1:{port}"), "unary", None);
    assert!(out.starts_with("error status=UNAVAILABLE"), "{out}");
    s.wait_log(
        &format!(
            "connect() failed (111: Connection refused) while connecting to upstream, client: \
             127.0.0.1, server: , request: \"POST /test.Echo/Echo HTTP/2.0\", upstream: \
             \"grpc://127.0.0.1:{dead}\""
        ),
        1,
    );
    let log = s.prefix.read("logs/access.log");
    assert!(
        log.contains(&format!(
            "502 502 127.0.0.1:{dead} \"-\" POST /test.Echo/Echo"
        )),
        "{log}"
    );
}

#[test]
fn a_stream_the_upstream_resets_is_logged_and_502() {
    let resetter = Resetter::start(2);
    let backend = server(None);
    let port = free_port();
    let lines = format!(
        "location / {{ grpc_pass 127.0.0.1:{}; }}\n\
         location /test.Echo/Echo {{ grpc_pass {}; }}",
        resetter.port,
        backend.listen.pass()
    );
    let s = Shoal::start(&conf("", &h2c_server(port, &lines)), port);
    let target = format!("127.0.0.1:{port}");
    let out = client(&target, "count", None);
    assert!(out.starts_with("error status=UNAVAILABLE"), "{out}");
    s.wait_log(
        "upstream rejected request with error 2 while reading response header from upstream",
        1,
    );
    // The worker goes on.
    assert_eq!(client(&target, "unary", None), "unary=hello\n");
}

#[test]
fn to_a_unix_socket() {
    let dir = tempfile::tempdir().expect("a directory");
    let sock = dir.path().join("grpc.sock");
    let mut cmd = Command::new(PYTHON);
    cmd.arg(support("server.py"))
        .arg(format!("unix:{}", sock.display()));
    let backend = Backend::start(
        "grpc server (python3-grpcio)",
        cmd,
        tempfile::tempdir().expect("a directory"),
        Listen::Unix(sock.clone()),
    );
    let port = free_port();
    let lines = format!("location / {{ grpc_pass {}; }}", backend.listen.pass());
    let _s = Shoal::start(&conf("", &h2c_server(port, &lines)), port);
    assert_eq!(
        client(&format!("127.0.0.1:{port}"), "count", None),
        "count=0,1,2,3,4\n"
    );
}

#[test]
fn keepalive_reuses_one_connection() {
    let backend = server(None);
    let pass = backend.listen.pass();
    let (port, plain_port) = (free_port(), free_port());
    let http = format!("upstream kept {{ server {pass}; keepalive 2; }}");
    let servers = h2c_server(port, "location / { grpc_pass grpc://kept; }")
        + &h2c_server(plain_port, &format!("location / {{ grpc_pass {pass}; }}"));
    let _s = Shoal::start(&conf(&http, &servers), port);
    // The server tells each call's peer: one connection carried five calls.
    assert_eq!(
        client(&format!("127.0.0.1:{port}"), "peers", None),
        "peers=1\n"
    );
    // Without `keepalive`, a connection per call.
    assert_eq!(
        client(&format!("127.0.0.1:{plain_port}"), "peers", None),
        "peers=5\n"
    );
}

#[test]
fn next_upstream_passes_a_dead_peer_by() {
    let backend = server(None);
    let dead = free_port();
    let port = free_port();
    let http = format!(
        "upstream two {{ server 127.0.0.1:{dead}; server {}; }}",
        backend.listen.pass()
    );
    let s = Shoal::start(
        &conf(
            &http,
            &h2c_server(port, "location / { grpc_pass grpc://two; }"),
        ),
        port,
    );
    let target = format!("127.0.0.1:{port}");
    for _ in 0..3 {
        assert_eq!(client(&target, "unary", None), "unary=hello\n");
    }
    s.wait_log("connect() failed (111: Connection refused)", 1);
    let log = s.prefix.read("logs/access.log");
    assert!(
        log.contains(&format!(
            "200 502, 200 127.0.0.1:{dead}, {}",
            backend.listen.pass()
        )),
        "{log}"
    );
}

#[test]
fn grpc_pass_twice_is_refused() {
    let prefix = Prefix::new();
    prefix.write_conf(
        "events { }\nhttp { server { location / {\n grpc_pass 127.0.0.1:1;\n \
         grpc_pass 127.0.0.1:2;\n } } }\n",
    );
    let out = prefix.run(&["-t"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        err.contains("\"grpc_pass\" directive is duplicate in "),
        "{err}"
    );
}

/// An HTTP/2 server that answers every stream with a head and then as many DATA frames of
/// 1000 bytes as the client's windows allow (the stream's from the client's SETTINGS and
/// WINDOW_UPDATEs, the connection's likewise), never more. Each time both windows leave it
/// nothing to send, it reports the body bytes it has sent on that stream.
struct Flooder {
    port: u16,
    sent: std::sync::mpsc::Receiver<u64>,
}

impl Flooder {
    fn start() -> Flooder {
        let listener = TcpListener::bind("127.0.0.1:0").expect("binding");
        let port = listener.local_addr().expect("an address").port();
        let (tx, sent) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for c in listener.incoming().flatten() {
                let tx = tx.clone();
                std::thread::spawn(move || flood(c, tx));
            }
        });
        Flooder { port, sent }
    }

    /// The next report (bounded wait).
    fn next(&self) -> u64 {
        self.sent
            .recv_timeout(crate::common::WAIT)
            .expect("the upstream to report what it sent")
    }
}

fn flood(mut c: TcpStream, tx: std::sync::mpsc::Sender<u64>) {
    let _ = c.set_read_timeout(Some(Duration::from_secs(20)));
    let mut preface = [0u8; 24];
    if c.read_exact(&mut preface).is_err() || c.write_all(&frame(4, 0, 0, &[])).is_err() {
        return;
    }
    let (mut initial, mut conn_window) = (65_535i64, 65_535i64);
    let (mut stream, mut window, mut sent, mut reported) = (0u32, 0i64, 0u64, None);
    loop {
        let Some((head, payload)) = read_frame(&mut c) else {
            return;
        };
        let id = u32::from_be_bytes([head[5], head[6], head[7], head[8]]) & 0x7fff_ffff;
        match head[3] {
            4 if head[4] & 1 == 0 => {
                for p in payload.chunks(6) {
                    if p.len() == 6 && u16::from_be_bytes([p[0], p[1]]) == 4 {
                        initial = i64::from(u32::from_be_bytes([p[2], p[3], p[4], p[5]]));
                    }
                }
                if c.write_all(&frame(4, 1, 0, &[])).is_err() {
                    return;
                }
            }
            8 if payload.len() == 4 => {
                let more = i64::from(
                    u32::from_be_bytes([payload[0], payload[1], payload[2], payload[3]])
                        & 0x7fff_ffff,
                );
                if id == 0 {
                    conn_window += more;
                } else if id == stream {
                    window += more;
                }
            }
            1 => {
                (stream, window, sent, reported) = (id, initial, 0, None);
                // `:status: 200` (HPACK's static entry 8).
                if c.write_all(&frame(1, 4, id, &[0x88])).is_err() {
                    return;
                }
            }
            3 if id == stream => stream = 0,
            _ => {}
        }
        if stream == 0 {
            continue;
        }
        while window > 0 && conn_window > 0 {
            let n = window.min(conn_window).min(1000);
            if c.write_all(&frame(0, 0, stream, &vec![b'd'; n as usize]))
                .is_err()
            {
                return;
            }
            (window, conn_window, sent) = (window - n, conn_window - n, sent + n as u64);
        }
        if reported != Some(sent) {
            reported = Some(sent);
            let _ = tx.send(sent);
        }
    }
}

/// An HTTP/2 request by hand on `c`: the preface, SETTINGS giving each stream a window of 0
/// (the client takes no DATA until it says so), and a gRPC call's HEADERS ending the stream.
fn call_with_no_window(c: &mut TcpStream, path: &str) {
    let mut block = vec![0x83, 0x86, 0x04, path.len() as u8];
    block.extend_from_slice(path.as_bytes());
    block.extend_from_slice(&[0x01, 9]);
    block.extend_from_slice(b"localhost");
    block.extend_from_slice(&[0x0f, 0x10, 16]);
    block.extend_from_slice(b"application/grpc");
    block.extend_from_slice(&[0x00, 2]);
    block.extend_from_slice(b"te");
    block.push(8);
    block.extend_from_slice(b"trailers");
    let mut out = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".to_vec();
    out.extend_from_slice(&frame(4, 0, 0, &[0, 4, 0, 0, 0, 0]));
    out.extend_from_slice(&frame(1, 0x4 | 0x1, 1, &block));
    c.write_all(&out).expect("sending the call");
}

/// `grpc_buffer_size` is how much of an answer is read ahead of a client that takes none:
/// the upstream may send that much, and more only as the client takes it. The buffer is each
/// stream's window toward the upstream: past HTTP/2's default window too.
#[test]
fn grpc_buffer_size_bounds_what_is_read_ahead() {
    let flooder = Flooder::start();
    let port = free_port();
    let up = flooder.port;
    let lines = format!(
        "location /small/ {{ grpc_buffer_size 10000; grpc_pass 127.0.0.1:{up}; }}\n\
         location /large/ {{ grpc_buffer_size 100000; grpc_pass 127.0.0.1:{up}; }}"
    );
    let s = Shoal::start(&conf("", &h2c_server(port, &lines)), port);
    for (path, size) in [("/small/x", 10_000u64), ("/large/x", 100_000)] {
        let mut c = TcpStream::connect(("127.0.0.1", port)).expect("connecting");
        call_with_no_window(&mut c, path);
        // (The connection's window may come in a frame of its own after the request: the
        // upstream can stop short of the stream's window for a moment.)
        let mut got = flooder.next();
        while got < size {
            got = flooder.next();
        }
        assert_eq!(got, size, "{path}\n{}", s.error_log());
        // The client takes 5000 bytes: the upstream may send as many more, no more.
        c.write_all(&frame(8, 0, 1, &5000u32.to_be_bytes()))
            .expect("opening the window");
        got = flooder.next();
        while got < size + 5000 {
            got = flooder.next();
        }
        assert_eq!(got, size + 5000, "{path}");
    }
}

/// What [`Recorder`]'s upstream saw of a stream.
#[derive(Debug, PartialEq)]
enum Seen {
    /// A DATA frame's payload, and whether it ended the stream.
    Data(Vec<u8>, bool),
    /// RST_STREAM with its code.
    Reset(u32),
}

/// An HTTP/2 server that reports each DATA frame and RST_STREAM as it comes, and answers a
/// stream once the client ended it: `:status: 200`, the body it got as one DATA frame, then
/// trailers (`grpc-status: 0`) that end the stream.
struct Recorder {
    port: u16,
    seen: std::sync::mpsc::Receiver<Seen>,
}

impl Recorder {
    fn start() -> Recorder {
        let listener = TcpListener::bind("127.0.0.1:0").expect("binding");
        let port = listener.local_addr().expect("an address").port();
        let (tx, seen) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for c in listener.incoming().flatten() {
                let tx = tx.clone();
                std::thread::spawn(move || record(c, tx));
            }
        });
        Recorder { port, seen }
    }

    /// The next thing seen (bounded wait).
    fn next(&self, what: &str) -> Seen {
        self.seen
            .recv_timeout(crate::common::WAIT)
            .unwrap_or_else(|_| panic!("the upstream never saw {what}"))
    }
}

fn record(mut c: TcpStream, tx: std::sync::mpsc::Sender<Seen>) {
    let _ = c.set_read_timeout(Some(Duration::from_secs(20)));
    let mut preface = [0u8; 24];
    if c.read_exact(&mut preface).is_err() || c.write_all(&frame(4, 0, 0, &[])).is_err() {
        return;
    }
    let mut body = Vec::new();
    loop {
        let Some((head, payload)) = read_frame(&mut c) else {
            return;
        };
        let id = u32::from_be_bytes([head[5], head[6], head[7], head[8]]) & 0x7fff_ffff;
        let end = head[4] & 1 != 0;
        let ended = match head[3] {
            4 if head[4] & 1 == 0 => {
                if c.write_all(&frame(4, 1, 0, &[])).is_err() {
                    return;
                }
                false
            }
            0 => {
                body.extend_from_slice(&payload);
                let _ = tx.send(Seen::Data(payload, end));
                end
            }
            1 => end,
            3 if payload.len() == 4 => {
                let code = u32::from_be_bytes([payload[0], payload[1], payload[2], payload[3]]);
                let _ = tx.send(Seen::Reset(code));
                body.clear();
                false
            }
            _ => false,
        };
        if ended {
            // `:status: 200` (HPACK's static entry 8); `grpc-status: 0` as a literal.
            let mut trailers = vec![0x00, 11];
            trailers.extend_from_slice(b"grpc-status");
            trailers.extend_from_slice(&[1, b'0']);
            let answer = [
                frame(1, 4, id, &[0x88]),
                frame(0, 0, id, &body),
                frame(1, 4 | 1, id, &trailers),
            ];
            if c.write_all(&answer.concat()).is_err() {
                return;
            }
            body.clear();
        }
    }
}

/// An HTTP/1.1 gRPC call with a chunked body to `port`, its head and first chunk sent.
fn chunked_call(port: u16) -> TcpStream {
    let mut c = TcpStream::connect(("127.0.0.1", port)).expect("connecting");
    c.set_read_timeout(Some(crate::common::WAIT))
        .expect("a read timeout");
    c.write_all(
        b"POST /test.Echo/Echo HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/grpc\r\n\
          TE: trailers\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n5\r\nhello\r\n",
    )
    .expect("sending the head and the first chunk");
    c
}

fn read_all(c: &mut TcpStream) -> String {
    let mut answer = Vec::new();
    let _ = c.read_to_end(&mut answer);
    String::from_utf8_lossy(&answer).into_owned()
}

/// An HTTP/1 client's chunked body goes upstream as it comes (nginx's grpc module does not
/// buffer it): the first chunk is a DATA frame before the client sent the second, and the
/// stream ends after the last chunk; the answer is the upstream's, trailers in its last chunk.
#[test]
fn a_chunked_http1_body_is_streamed() {
    let up = Recorder::start();
    let port = free_port();
    let lines = format!(
        "    server {{\n        listen 127.0.0.1:{port};\n        \
         location / {{ grpc_pass 127.0.0.1:{}; }}\n    }}\n",
        up.port
    );
    let s = Shoal::start(&conf("", &lines), port);
    let mut c = chunked_call(port);
    // The first chunk reaches the upstream while the client still holds the rest.
    assert_eq!(
        up.next("the first chunk"),
        Seen::Data(b"hello".to_vec(), false),
        "{}",
        s.error_log()
    );
    c.write_all(b"6\r\n world\r\n0\r\n\r\n")
        .expect("sending the rest");
    let mut got = Vec::new();
    loop {
        match up.next("the rest of the body") {
            Seen::Data(d, end) => {
                got.extend_from_slice(&d);
                if end {
                    break;
                }
            }
            other => panic!("{other:?}\n{}", s.error_log()),
        }
    }
    assert_eq!(got, b" world");
    let answer = read_all(&mut c);
    assert!(answer.starts_with("HTTP/1.1 200 "), "{answer}");
    assert!(answer.contains("hello world"), "{answer}");
    assert!(answer.contains("\r\ngrpc-status: 0\r\n"), "{answer}");
}

/// `client_max_body_size` holds for a chunked body streamed: the chunk that would pass it is
/// not sent, the upstream's stream is reset, and the client gets 413 (nginx's log line).
#[test]
fn a_streamed_chunked_body_past_client_max_body_size_is_413() {
    let up = Recorder::start();
    let port = free_port();
    let lines = format!(
        "    server {{\n        listen 127.0.0.1:{port};\n        client_max_body_size 8;\n        \
         location / {{ grpc_pass 127.0.0.1:{}; }}\n    }}\n",
        up.port
    );
    let s = Shoal::start(&conf("", &lines), port);
    let mut c = chunked_call(port);
    assert_eq!(
        up.next("the first chunk"),
        Seen::Data(b"hello".to_vec(), false),
        "{}",
        s.error_log()
    );
    c.write_all(b"5\r\nworld\r\n0\r\n\r\n")
        .expect("sending the rest");
    assert_eq!(up.next("the reset"), Seen::Reset(8), "{}", s.error_log());
    let answer = read_all(&mut c);
    assert!(answer.starts_with("HTTP/1.1 413 "), "{answer}");
    assert!(
        s.error_log()
            .contains("client intended to send too large chunked body: 5+5 bytes"),
        "{}",
        s.error_log()
    );
}

/// `grpc_read_timeout` bounds the wait for an answer's head, on a connection that carried a
/// call before (kept alive) as on a new one: 504, nginx's line.
#[test]
fn grpc_read_timeout_bounds_the_wait_for_a_head() {
    let up = Recorder::start();
    let port = free_port();
    let http = format!(
        "    upstream quiet {{ server 127.0.0.1:{}; keepalive 2; }}\n",
        up.port
    );
    let lines = format!(
        "    server {{\n        listen 127.0.0.1:{port};\n        \
         location / {{ grpc_read_timeout 1s; grpc_pass quiet; }}\n    }}\n"
    );
    let s = Shoal::start(&conf(&http, &lines), port);
    // A whole call first: answered, its connection kept.
    let mut c = chunked_call(port);
    assert_eq!(
        up.next("the first chunk"),
        Seen::Data(b"hello".to_vec(), false)
    );
    c.write_all(b"0\r\n\r\n").expect("ending the body");
    let answer = read_all(&mut c);
    assert!(answer.starts_with("HTTP/1.1 200 "), "{answer}");
    // Then one whose body never ends: the upstream never answers.
    for _ in 0..2 {
        let mut c = chunked_call(port);
        let answer = read_all(&mut c);
        assert!(
            answer.starts_with("HTTP/1.1 504 "),
            "{answer}\n{}",
            s.error_log()
        );
    }
    let log = s.error_log();
    assert_eq!(
        log.matches("upstream timed out (110: Connection timed out) while reading response header from upstream")
            .count(),
        2,
        "{log}"
    );
}
