//! HTTP/2 abuse, frames written by hand (a small client here: frames, HPACK literals without
//! Huffman coding): rapid reset, CONTINUATION floods, oversized header lists and an HPACK bomb,
//! SETTINGS, PING, PRIORITY, WINDOW_UPDATE and empty-DATA floods, a client that never opens its
//! window (`send_timeout` ends it), malformed requests (pseudo-headers, connection-specific
//! fields, uppercase names, a `content-length` the DATA frames disagree with),
//! `keepalive_requests` and a graceful stop ending a connection with GOAWAY, a reload reaching
//! an open connection's next stream. Each time the server stays up for the next client.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use crate::common::{free_port, Prefix, Shoal};
use crate::h2::{conf, h2c};

pub(crate) const DATA: u8 = 0;
pub(crate) const HEADERS: u8 = 1;
pub(crate) const RST_STREAM: u8 = 3;
pub(crate) const SETTINGS: u8 = 4;
const PING: u8 = 6;
pub(crate) const GOAWAY: u8 = 7;
const PRIORITY: u8 = 2;
const WINDOW_UPDATE: u8 = 8;
const CONTINUATION: u8 = 9;

pub(crate) const END_STREAM: u8 = 1;
pub(crate) const END_HEADERS: u8 = 4;

pub(crate) const PROTOCOL_ERROR: u32 = 1;

/// A frame as read: type, flags, stream, payload.
pub(crate) type Frame = (u8, u8, u32, Vec<u8>);

pub(crate) struct H2 {
    s: TcpStream,
}

/// HPACK's integer with an `n`-bit prefix (RFC 7541, 5.1), `first` holding the high bits.
pub(crate) fn hpack_int(out: &mut Vec<u8>, first: u8, n: u32, mut v: usize) {
    let max = (1usize << n) - 1;
    if v < max {
        out.push(first | v as u8);
        return;
    }
    out.push(first | max as u8);
    v -= max;
    while v >= 128 {
        out.push((v % 128 + 128) as u8);
        v /= 128;
    }
    out.push(v as u8);
}

/// A literal field without indexing, its name new (no Huffman coding).
pub(crate) fn literal(out: &mut Vec<u8>, name: &str, value: &[u8]) {
    out.push(0);
    hpack_int(out, 0, 7, name.len());
    out.extend_from_slice(name.as_bytes());
    hpack_int(out, 0, 7, value.len());
    out.extend_from_slice(value);
}

/// A GET of `path`'s header block, with `extra` fields after the pseudo-headers.
pub(crate) fn get_block(path: &str, extra: &[(&str, &str)]) -> Vec<u8> {
    let mut b = Vec::new();
    for (n, v) in [
        (":method", "GET"),
        (":scheme", "http"),
        (":authority", "localhost"),
        (":path", path),
    ] {
        literal(&mut b, n, v.as_bytes());
    }
    for (n, v) in extra {
        literal(&mut b, n, v.as_bytes());
    }
    b
}

impl H2 {
    /// Connects, sends the preface and `settings` (id, value pairs).
    pub(crate) fn connect(port: u16, settings: &[(u16, u32)]) -> H2 {
        let s = TcpStream::connect(("127.0.0.1", port)).expect("connecting");
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        s.set_write_timeout(Some(Duration::from_secs(10))).unwrap();
        let mut c = H2 { s };
        c.raw(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n");
        let mut p = Vec::new();
        for (id, v) in settings {
            p.extend_from_slice(&id.to_be_bytes());
            p.extend_from_slice(&v.to_be_bytes());
        }
        c.frame(SETTINGS, 0, 0, &p);
        c
    }

    pub(crate) fn raw(&mut self, b: &[u8]) -> bool {
        self.s.write_all(b).is_ok()
    }

    pub(crate) fn frame_bytes(ty: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
        let mut f = Vec::with_capacity(9 + payload.len());
        f.extend_from_slice(&(payload.len() as u32).to_be_bytes()[1..]);
        f.push(ty);
        f.push(flags);
        f.extend_from_slice(&stream.to_be_bytes());
        f.extend_from_slice(payload);
        f
    }

    pub(crate) fn frame(&mut self, ty: u8, flags: u8, stream: u32, payload: &[u8]) -> bool {
        self.raw(&H2::frame_bytes(ty, flags, stream, payload))
    }

    pub(crate) fn get(&mut self, stream: u32, path: &str, extra: &[(&str, &str)]) -> bool {
        self.frame(
            HEADERS,
            END_STREAM | END_HEADERS,
            stream,
            &get_block(path, extra),
        )
    }

    /// The next frame; `None` at the connection's end (or after 10 s of nothing).
    pub(crate) fn read_frame(&mut self) -> Option<Frame> {
        let mut h = [0u8; 9];
        self.s.read_exact(&mut h).ok()?;
        let len = u32::from_be_bytes([0, h[0], h[1], h[2]]) as usize;
        let mut p = vec![0u8; len];
        self.s.read_exact(&mut p).ok()?;
        let stream = u32::from_be_bytes([h[5], h[6], h[7], h[8]]) & 0x7fff_ffff;
        Some((h[3], h[4], stream, p))
    }

    /// Reads until a frame `want` accepts; `None` if the connection ends first.
    pub(crate) fn until(&mut self, want: impl Fn(&Frame) -> bool) -> Option<Frame> {
        let deadline = Instant::now() + Duration::from_secs(20);
        while Instant::now() < deadline {
            let f = self.read_frame()?;
            if want(&f) {
                return Some(f);
            }
        }
        None
    }

    /// The GOAWAY's error code, or `None` if the connection ended without one.
    fn goaway(&mut self) -> Option<u32> {
        self.until(|f| f.0 == GOAWAY)
            .map(|f| u32::from_be_bytes([f.3[4], f.3[5], f.3[6], f.3[7]]))
    }

    /// Whether the server closes the connection (what it sends before is skipped); false when
    /// it stays open 10 s without a word.
    fn ends(&mut self) -> bool {
        let mut buf = [0u8; 16 * 1024];
        let deadline = Instant::now() + Duration::from_secs(20);
        while Instant::now() < deadline {
            match self.s.read(&mut buf) {
                Ok(0) => return true,
                Ok(_) => {}
                Err(e)
                    if matches!(
                        e.kind(),
                        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                    ) =>
                {
                    return false
                }
                Err(_) => return true,
            }
        }
        false
    }
}

/// The stream's RST_STREAM error code, or the connection's GOAWAY code (high bit set).
pub(crate) fn refusal(c: &mut H2, stream: u32) -> Option<u32> {
    c.until(|f| (f.0 == RST_STREAM && f.2 == stream) || f.0 == GOAWAY)
        .map(|f| {
            let code = u32::from_be_bytes([
                f.3[f.3.len() - 4],
                f.3[f.3.len() - 3],
                f.3[f.3.len() - 2],
                f.3[f.3.len() - 1],
            ]);
            if f.0 == GOAWAY {
                code | 0x8000_0000
            } else {
                code
            }
        })
}

/// The status of the HEADERS answering `stream`.
fn status_of(c: &mut H2, stream: u32) -> Option<u16> {
    let f = c.until(|f| (f.0 == HEADERS && f.2 == stream) || f.0 == GOAWAY)?;
    (f.0 == HEADERS).then(|| status_of_frame(&f))
}

fn start(server: &str) -> (Shoal, u16) {
    let port = free_port();
    let s = Shoal::start(&conf(port, "", server), port);
    (s, port)
}

/// The server still answers a new client.
fn still_serving(port: u16) {
    assert_eq!(h2c(port, "/index.html", &[]).status, 200);
}

#[test]
fn rapid_reset_ends_the_connection() {
    let (_s, port) = start("location / { return 200 ok; }");
    let mut c = H2::connect(port, &[]);
    let mut batch = Vec::new();
    for i in 0..5000u32 {
        let id = 1 + 2 * i;
        batch.extend(H2::frame_bytes(
            HEADERS,
            END_STREAM | END_HEADERS,
            id,
            &get_block("/", &[]),
        ));
        batch.extend(H2::frame_bytes(RST_STREAM, 0, id, &8u32.to_be_bytes()));
        if batch.len() > 64 * 1024 {
            if !c.raw(&batch) {
                break;
            }
            batch.clear();
        }
    }
    let _ = c.raw(&batch);
    // ENHANCE_YOUR_CALM (0xb), or at least the connection closed.
    let code = c.goaway();
    assert_eq!(code, Some(0xb), "GOAWAY ENHANCE_YOUR_CALM");
    assert!(c.ends());
    still_serving(port);
}

#[test]
fn a_continuation_flood_ends_the_connection() {
    let (_s, port) = start("");
    let mut c = H2::connect(port, &[]);
    // A header block that never ends: a field whose value says 10 MB, one byte per frame.
    let mut first = get_block("/", &[]);
    first.push(0);
    hpack_int(&mut first, 0, 7, 3);
    first.extend_from_slice(b"x-a");
    hpack_int(&mut first, 0, 7, 10_000_000);
    c.frame(HEADERS, END_STREAM, 1, &first);
    let one = H2::frame_bytes(CONTINUATION, 0, 1, b"a");
    let many: Vec<u8> = one
        .iter()
        .copied()
        .cycle()
        .take(one.len() * 10_000)
        .collect();
    for _ in 0..20 {
        if !c.raw(&many) {
            break;
        }
    }
    assert!(
        c.ends(),
        "the connection stays open under a CONTINUATION flood"
    );
    still_serving(port);
}

#[test]
fn an_oversized_header_list_and_an_hpack_bomb_are_refused() {
    let (s, port) = start("large_client_header_buffers 4 8k;");
    // One field of 64 KB in CONTINUATION frames: more than the server's header list.
    let mut c = H2::connect(port, &[]);
    let block = get_block("/", &[("x-big", &"b".repeat(64 * 1024))]);
    let mut chunks = block.chunks(16 * 1024).peekable();
    let first = chunks.next().unwrap();
    c.frame(HEADERS, END_STREAM, 1, first);
    while let Some(part) = chunks.next() {
        let flags = if chunks.peek().is_none() {
            END_HEADERS
        } else {
            0
        };
        c.frame(CONTINUATION, flags, 1, part);
    }
    let answer = c.until(|f| f.2 == 1 || f.0 == GOAWAY);
    assert!(
        match &answer {
            Some((HEADERS, ..)) => status_of_frame(answer.as_ref().unwrap()) != 200,
            _ => true,
        },
        "the oversized request was answered: {answer:?}"
    );
    // An HPACK bomb: a 4 KB field put in the dynamic table once, then named by its index
    // 1000 times (4 MB decoded from 1 KB).
    let mut c = H2::connect(port, &[]);
    let mut b = get_block("/", &[]);
    b.push(0x40);
    hpack_int(&mut b, 0, 7, 5);
    b.extend_from_slice(b"x-bmb");
    hpack_int(&mut b, 0, 7, 4000);
    b.extend(std::iter::repeat_n(b'q', 4000));
    for _ in 0..1000 {
        b.push(0x80 | 62); // the newest dynamic entry
    }
    c.frame(HEADERS, END_STREAM | END_HEADERS, 1, &b);
    let answer = c.until(|f| f.2 == 1 || f.0 == GOAWAY);
    assert!(
        match &answer {
            Some((HEADERS, ..)) => status_of_frame(answer.as_ref().unwrap()) != 200,
            _ => true,
        },
        "the bomb was answered: {answer:?}"
    );
    still_serving(port);
    drop(s);
}

pub(crate) fn status_of_frame(f: &Frame) -> u16 {
    match f.3.first() {
        Some(0x88) => 200,
        Some(0x89) => 204,
        Some(0x8a) => 206,
        Some(0x8b) => 304,
        Some(0x8c) => 400,
        Some(0x8d) => 404,
        Some(0x8e) => 500,
        _ => {
            // A literal `:status` with its name indexed (8): the value's digits.
            let text: String = String::from_utf8_lossy(f.3.get(2..5).unwrap_or_default())
                .chars()
                .filter(char::is_ascii_digit)
                .take(3)
                .collect();
            text.parse().unwrap_or(0)
        }
    }
}

/// The server's resident memory, in KB.
fn rss_kb(pid: i32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

#[test]
fn floods_from_a_client_that_reads_nothing_stay_bounded() {
    let (s, port) = start("location / { return 200 ok; }");
    let before = rss_kb(s.pid);
    for ty in [PING, SETTINGS, PRIORITY, WINDOW_UPDATE, DATA] {
        let mut c = H2::connect(port, &[]);
        c.s.set_write_timeout(Some(Duration::from_secs(2))).unwrap();
        // PRIORITY on an idle stream, WINDOW_UPDATE of 1 byte to the connection, empty DATA
        // frames on an open stream (a POST whose body never ends).
        let (payload, stream): (&[u8], u32) = match ty {
            PING => (&[7u8; 8], 0),
            SETTINGS => (&[0, 3, 0, 0, 0, 100], 0),
            PRIORITY => (&[0, 0, 0, 0, 16], 101),
            WINDOW_UPDATE => (&[0, 0, 0, 1], 0),
            _ => {
                let mut p = Vec::new();
                for (n, v) in [
                    (":method", "POST"),
                    (":scheme", "http"),
                    (":authority", "localhost"),
                    (":path", "/"),
                ] {
                    literal(&mut p, n, v.as_bytes());
                }
                c.frame(HEADERS, END_HEADERS, 1, &p);
                (&[], 1)
            }
        };
        let one = H2::frame_bytes(ty, 0, stream, payload);
        let many: Vec<u8> = one
            .iter()
            .copied()
            .cycle()
            .take(one.len() * 10_000)
            .collect();
        // The answers are never read: the server must stop reading rather than queue them.
        let mut sent = 0;
        while sent < 200 && c.raw(&many) {
            sent += 1;
        }
        still_serving(port);
        drop(c);
    }
    let after = rss_kb(s.pid);
    assert!(
        after < before + 64 * 1024,
        "the floods grew the server from {before} KB to {after} KB"
    );
}

#[test]
fn malformed_requests_are_reset_and_the_connection_goes_on() {
    let (_s, port) = start("location / { return 200 ok; }");
    let mut c = H2::connect(port, &[]);
    // No :path.
    let mut b = Vec::new();
    literal(&mut b, ":method", b"GET");
    literal(&mut b, ":scheme", b"http");
    literal(&mut b, ":authority", b"localhost");
    c.frame(HEADERS, END_STREAM | END_HEADERS, 1, &b);
    assert_eq!(refusal(&mut c, 1), Some(PROTOCOL_ERROR));
    // A connection-specific field.
    c.get(3, "/", &[("connection", "keep-alive")]);
    assert_eq!(refusal(&mut c, 3), Some(PROTOCOL_ERROR));
    // A pseudo-header after a regular field.
    let mut b = get_block("/", &[("x-a", "1")]);
    literal(&mut b, ":scheme", b"http");
    c.frame(HEADERS, END_STREAM | END_HEADERS, 5, &b);
    assert_eq!(refusal(&mut c, 5), Some(PROTOCOL_ERROR));
    // content-length: 10 and 5 bytes of DATA.
    let post = {
        let mut p = Vec::new();
        for (n, v) in [
            (":method", "POST"),
            (":scheme", "http"),
            (":authority", "localhost"),
            (":path", "/"),
            ("content-length", "10"),
        ] {
            literal(&mut p, n, v.as_bytes());
        }
        p
    };
    c.frame(HEADERS, END_HEADERS, 7, &post);
    c.frame(DATA, END_STREAM, 7, b"12345");
    assert_eq!(refusal(&mut c, 7), Some(PROTOCOL_ERROR));
    // The connection still serves.
    c.get(9, "/", &[]);
    assert_eq!(status_of(&mut c, 9), Some(200));
    // An uppercase name: the stream or the connection is refused, never answered.
    let mut c = H2::connect(port, &[]);
    c.get(1, "/", &[("X-Upper", "1")]);
    let got = c.until(|f| f.2 == 1 || f.0 == GOAWAY).expect("an answer");
    assert!(got.0 == RST_STREAM || got.0 == GOAWAY, "{got:?}");
    still_serving(port);
}

#[test]
fn a_client_that_never_opens_its_window_is_timed_out_by_send_timeout() {
    let port = free_port();
    let prefix = Prefix::new();
    std::fs::write(prefix.join("html/big.bin"), vec![b'x'; 1 << 20]).unwrap();
    let s = Shoal::start_in(prefix, &conf(port, "", "send_timeout 1s;"), port, &[]);
    // SETTINGS_INITIAL_WINDOW_SIZE 0: no DATA may be sent.
    let mut c = H2::connect(port, &[(4, 0)]);
    c.get(1, "/big.bin", &[]);
    s.wait_log(
        "client timed out (110: Connection timed out) while sending response to client",
        1,
    );
    assert_eq!(
        refusal(&mut c, 1),
        Some(2),
        "the stream is reset (INTERNAL_ERROR)"
    );
    still_serving(port);
}

#[test]
fn keepalive_requests_and_a_graceful_stop_send_goaway() {
    let port = free_port();
    let mut s = Shoal::start(
        &conf(
            port,
            "",
            "keepalive_requests 3;\nlocation / { return 200 ok; }",
        ),
        port,
    );
    let mut c = H2::connect(port, &[]);
    for id in [1, 3, 5] {
        c.get(id, "/", &[]);
    }
    assert_eq!(c.goaway(), Some(0));
    assert!(c.ends());
    let mut c = H2::connect(port, &[]);
    c.get(1, "/", &[]);
    assert_eq!(status_of(&mut c, 1), Some(200));
    s.signal(libc::SIGQUIT);
    assert_eq!(c.goaway(), Some(0));
    assert!(c.ends());
    assert!(s.wait_exit().success());
}

/// The DATA of `stream` up to its END_STREAM.
fn body_of(c: &mut H2, stream: u32) -> Vec<u8> {
    let mut body = Vec::new();
    while let Some(f) = c.until(|f| f.2 == stream && (f.0 == DATA || f.0 == RST_STREAM)) {
        if f.0 == RST_STREAM {
            break;
        }
        body.extend_from_slice(&f.3);
        if f.1 & END_STREAM != 0 {
            break;
        }
    }
    body
}

#[test]
fn a_reload_reaches_the_next_stream_of_an_open_connection() {
    let port = free_port();
    let s = Shoal::start(&conf(port, "", "location / { return 200 one; }"), port);
    let mut c = H2::connect(port, &[]);
    c.get(1, "/", &[]);
    assert_eq!(body_of(&mut c, 1), b"one");
    s.prefix
        .write_conf(&conf(port, "", "location / { return 200 two; }"));
    s.signal(libc::SIGHUP);
    s.wait_log("reconfigured (generation 2)", 1);
    c.get(3, "/", &[]);
    assert_eq!(body_of(&mut c, 3), b"two");
}

#[test]
fn a_stream_reset_while_proxied_gives_the_upstream_up() {
    use crate::common::upstream::{Answer, Upstream};
    let up = Upstream::start(|_| Answer::ok("late").delay_head(Duration::from_secs(5)));
    let port = free_port();
    let s = Shoal::start(
        &conf(
            port,
            "",
            &format!(
                "location / {{ proxy_pass http://127.0.0.1:{}; }}",
                up.port()
            ),
        ),
        port,
    );
    let mut c = H2::connect(port, &[]);
    c.get(1, "/slow", &[]);
    crate::common::wait_for("the request upstream", || {
        (!up.requests().is_empty()).then_some(())
    });
    c.frame(RST_STREAM, 0, 1, &8u32.to_be_bytes());
    s.wait_log(
        "client prematurely closed connection, so upstream connection is closed too",
        1,
    );
    crate::common::wait_for("the 499 in the access log", || {
        s.prefix
            .read("logs/access.log")
            .contains("\"GET /slow HTTP/2.0\" 499 ")
            .then_some(())
    });
    // The connection goes on.
    c.get(3, "/", &[]);
    drop(c);
}

/// At `worker_connections`, an HTTP/2 connection with no stream open is reusable as an idle
/// HTTP/1 keep-alive connection is: the longest idle goes first, with a GOAWAY (NO_ERROR),
/// and the newcomer is answered. Before, idle HTTP/2 connections held their slots and the
/// newcomer was refused.
#[test]
fn full_worker_connections_reuse_idle_http2_connections() {
    let port = free_port();
    let text = conf(
        port,
        "",
        "keepalive_timeout 300s;\nlocation / { return 200 ok; }",
    )
    .replace("events { }", "events { worker_connections 4; }");
    let s = Shoal::start(&text, port);
    // Four connections, each answered once and idle since: the worker is full.
    let mut idle: Vec<H2> = (0..4)
        .map(|_| {
            let mut c = H2::connect(port, &[]);
            c.get(1, "/", &[]);
            assert_eq!(status_of(&mut c, 1), Some(200));
            // (Its END_STREAM DATA, so nothing of the answer is left to read.)
            c.until(|f| f.0 == DATA && f.3 == b"ok");
            c
        })
        .collect();
    // A newcomer is answered.
    let got = h2c(port, "/", &[]);
    assert_eq!((got.code, got.status), (0, 200));
    s.wait_log(
        "4 worker_connections are not enough, reusing connections",
        1,
    );
    // The oldest idle connection went with a GOAWAY NO_ERROR.
    assert_eq!(idle[0].goaway(), Some(0), "the oldest got no GOAWAY");
    assert!(idle[0].ends());
    // The newest still answers.
    let last = idle.last_mut().unwrap();
    last.get(3, "/", &[]);
    assert_eq!(status_of(last, 3), Some(200));
}
