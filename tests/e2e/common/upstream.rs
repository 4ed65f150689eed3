//! Real upstream servers for the end-to-end proxy tests: what `proxy_pass` talks to.
//!
//! An [`Upstream`] listens on 127.0.0.1:0 or on a unix socket path, runs one thread per
//! connection, speaks HTTP/1.1 with keep-alive and pipelining, reads request bodies framed by
//! Content-Length or chunked, and records what it saw: connections accepted, connections open now,
//! and every request ([`Recorded`]: method, target, version, headers in order and in their original
//! case, the decoded body, the raw head, which connection it came on). What it answers is up to a
//! handler `Fn(&Recorded) -> Answer`; an [`Answer`] can also be malformed, slow, cut short, never
//! sent, or a protocol upgrade that echoes bytes back.
//!
//! It is plain std on purpose (no async runtime, no HTTP library): the thing under test is shoal's
//! HTTP code, so the other end must not share it. It is a test fixture, not a server: it trusts its
//! input only as far as not panicking on it (a request it cannot parse gets a 400 and a close).
//!
//! The wire protocol (parsing requests, writing answers) is in `upstream/wire.rs`.
//!
//! [`Upstream::stop`] (and Drop) closes the listener and every connection and joins every thread it
//! started, so a test never leaves a thread blocked in `read` behind it.

use std::collections::HashMap;
use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::Duration;

use super::{wait_for, WAIT};

mod wire;

/// One request as the upstream received it.
#[derive(Debug, Clone)]
pub struct Recorded {
    /// The connection it came on: 1 for the first connection accepted, 2 for the next, ...
    pub conn: usize,
    /// Its place on that connection: 1 for the first request, 2 for the next, ...
    pub seq: usize,
    pub method: String,
    /// The request target exactly as sent (`/a?b=c`, or an absolute URI).
    pub target: String,
    /// `HTTP/1.1` or `HTTP/1.0`, as sent.
    pub version: String,
    /// Header fields in the order received, names in their original case, values without the
    /// surrounding whitespace.
    pub headers: Vec<(String, String)>,
    /// The body, decoded (chunked framing removed).
    pub body: Vec<u8>,
    /// Whether the body came chunked.
    pub chunked: bool,
    /// Trailer fields of a chunked body, in order.
    pub trailers: Vec<(String, String)>,
    /// The request line and headers byte for byte, with the blank line that ends them.
    pub raw_head: Vec<u8>,
}

impl Recorded {
    /// The first value of a header (name compared case-insensitively).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// Every value of a header, in order.
    pub fn header_all(&self, name: &str) -> Vec<&str> {
        self.headers
            .iter()
            .filter(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
            .collect()
    }

    /// The header names in order, original case.
    pub fn header_names(&self) -> Vec<&str> {
        self.headers.iter().map(|(n, _)| n.as_str()).collect()
    }

    /// Whether the client asked to keep the connection (HTTP/1.1 unless `Connection: close`,
    /// HTTP/1.0 only with `Connection: keep-alive`).
    pub fn keep_alive(&self) -> bool {
        let tokens = self.header_all("connection").join(",").to_ascii_lowercase();
        let has = |t: &str| tokens.split(',').any(|x| x.trim() == t);
        if self.version == "HTTP/1.0" {
            has("keep-alive")
        } else {
            !has("close")
        }
    }
}

/// How the body of an [`Answer`] goes on the wire.
#[derive(Debug, Clone)]
enum Framing {
    /// `Content-Length: body.len()`.
    Length,
    /// `Transfer-Encoding: chunked`, chunks of these sizes (the rest of the body in one more).
    Chunked(Vec<usize>),
    /// No length: the body, then the connection closes.
    CloseDelimited,
    /// `Content-Length: N` with N larger than the body, the body, then a close.
    CutShort(usize),
    /// These bytes exactly, nothing added.
    Raw(Vec<u8>),
    /// Close without writing anything.
    HangUp,
    /// 101, then every byte received is echoed back until EOF.
    Upgrade,
}

/// What the upstream answers to one request. Built with [`Answer::ok`], [`Answer::status`],
/// [`Answer::raw`], [`Answer::hang_up`] or [`Answer::upgrade`], then refined.
#[derive(Debug, Clone)]
pub struct Answer {
    status: u16,
    reason: String,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
    framing: Framing,
    trailers: Vec<(String, String)>,
    delay_head: Duration,
    delay_body: Option<(usize, Duration)>,
    close: bool,
}

impl Answer {
    /// 200 with this body and a Content-Length.
    pub fn ok(body: impl Into<Vec<u8>>) -> Answer {
        Answer::status(200).body(body)
    }

    /// This status (reason phrase from the usual table), no body, Content-Length: 0.
    pub fn status(status: u16) -> Answer {
        Answer {
            status,
            reason: reason(status).to_string(),
            headers: Vec::new(),
            body: Vec::new(),
            framing: Framing::Length,
            trailers: Vec::new(),
            delay_head: Duration::ZERO,
            delay_body: None,
            close: false,
        }
    }

    /// These bytes written as they are (a malformed response, a response to a pipeline, ...);
    /// the connection then stays open for the next request unless [`Answer::close`] is added.
    pub fn raw(bytes: impl Into<Vec<u8>>) -> Answer {
        Answer {
            framing: Framing::Raw(bytes.into()),
            ..Answer::status(200)
        }
    }

    /// Closes the connection without answering.
    pub fn hang_up() -> Answer {
        Answer {
            framing: Framing::HangUp,
            ..Answer::status(200)
        }
    }

    /// `101 Switching Protocols` with `Upgrade: PROTOCOL` and `Connection: Upgrade` (plus any
    /// [`Answer::header`]), then every byte received on the connection is echoed back until the
    /// peer closes its side.
    pub fn upgrade(protocol: &str) -> Answer {
        Answer {
            framing: Framing::Upgrade,
            ..Answer::status(101)
                .header("Upgrade", protocol)
                .header("Connection", "Upgrade")
        }
    }

    /// Adds a header line (after the ones added before; the framing header comes last).
    pub fn header(mut self, name: &str, value: &str) -> Answer {
        self.headers.push((name.to_string(), value.to_string()));
        self
    }

    /// Replaces the body.
    pub fn body(mut self, body: impl Into<Vec<u8>>) -> Answer {
        self.body = body.into();
        self
    }

    /// Replaces the reason phrase.
    pub fn reason(mut self, reason: &str) -> Answer {
        self.reason = reason.to_string();
        self
    }

    /// Sends the body chunked, in chunks of these sizes; what they do not cover goes in one more
    /// chunk (so `&[]` is one chunk of the whole body).
    pub fn chunked(mut self, sizes: &[usize]) -> Answer {
        self.framing = Framing::Chunked(sizes.to_vec());
        self
    }

    /// A trailer field after the last chunk (only with [`Answer::chunked`]).
    pub fn trailer(mut self, name: &str, value: &str) -> Answer {
        self.trailers.push((name.to_string(), value.to_string()));
        self
    }

    /// No Content-Length and no chunking: the body ends when the connection closes.
    pub fn close_delimited(mut self) -> Answer {
        self.framing = Framing::CloseDelimited;
        self
    }

    /// Announces `Content-Length: content_length` (more than the body), sends the body, closes.
    pub fn cut_short(mut self, content_length: usize) -> Answer {
        self.framing = Framing::CutShort(content_length);
        self
    }

    /// Waits this long before writing anything.
    pub fn delay_head(mut self, d: Duration) -> Answer {
        self.delay_head = d;
        self
    }

    /// Writes the head and the first `after` body bytes (payload bytes: chunk framing is not
    /// counted), waits `d`, then writes the rest; with `after` past the body, waits at the end.
    pub fn delay_body(mut self, after: usize, d: Duration) -> Answer {
        self.delay_body = Some((after, d));
        self
    }

    /// Says `Connection: close` and closes after answering.
    pub fn close(mut self) -> Answer {
        self.close = true;
        self
    }
}

/// The usual reason phrases.
fn reason(status: u16) -> &'static str {
    match status {
        100 => "Continue",
        101 => "Switching Protocols",
        200 => "OK",
        201 => "Created",
        204 => "No Content",
        206 => "Partial Content",
        301 => "Moved Permanently",
        302 => "Found",
        304 => "Not Modified",
        400 => "Bad Request",
        403 => "Forbidden",
        404 => "Not Found",
        500 => "Internal Server Error",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        504 => "Gateway Timeout",
        _ => "Status",
    }
}

/// Where an upstream listens.
#[derive(Debug, Clone)]
pub enum Addr {
    Tcp(SocketAddr),
    Unix(PathBuf),
}

/// A connection of either kind.
enum Conn {
    Tcp(TcpStream),
    Unix(UnixStream),
}

impl Conn {
    fn try_clone(&self) -> io::Result<Conn> {
        Ok(match self {
            Conn::Tcp(s) => Conn::Tcp(s.try_clone()?),
            Conn::Unix(s) => Conn::Unix(s.try_clone()?),
        })
    }

    fn shutdown(&self, how: Shutdown) {
        // The peer may be gone already; there is nothing to do about an error here.
        let _ = match self {
            Conn::Tcp(s) => s.shutdown(how),
            Conn::Unix(s) => s.shutdown(how),
        };
    }
}

impl Read for Conn {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Conn::Tcp(s) => s.read(buf),
            Conn::Unix(s) => s.read(buf),
        }
    }
}

impl Write for Conn {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Conn::Tcp(s) => s.write(buf),
            Conn::Unix(s) => s.write(buf),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

type Handler = dyn Fn(&Recorded) -> Answer + Send + Sync;

/// What the accept thread, the connection threads and the test share.
struct Shared {
    handler: Box<Handler>,
    stopping: AtomicBool,
    accepted: AtomicUsize,
    open: AtomicUsize,
    requests: Mutex<Vec<Recorded>>,
    /// A clone of every open connection, so that stop() can shut them down.
    conns: Mutex<HashMap<usize, Conn>>,
    threads: Mutex<Vec<JoinHandle<()>>>,
}

/// Locks a mutex even if a thread panicked while holding it (the data is only records).
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// A running upstream server; stopped when dropped.
pub struct Upstream {
    addr: Addr,
    shared: Arc<Shared>,
    acceptor: Option<JoinHandle<()>>,
}

impl Upstream {
    /// Starts a server on 127.0.0.1:0 answering with `handler`.
    pub fn start(handler: impl Fn(&Recorded) -> Answer + Send + Sync + 'static) -> Upstream {
        let l = TcpListener::bind("127.0.0.1:0").expect("binding 127.0.0.1:0");
        let addr = Addr::Tcp(l.local_addr().expect("the listener's address"));
        Upstream::run(addr, Listener::Tcp(l), Box::new(handler))
    }

    /// Starts a server on the unix socket `path` (an existing socket file there is replaced).
    pub fn start_unix(
        path: impl AsRef<Path>,
        handler: impl Fn(&Recorded) -> Answer + Send + Sync + 'static,
    ) -> Upstream {
        let path = path.as_ref().to_path_buf();
        let _ = std::fs::remove_file(&path);
        let l = UnixListener::bind(&path)
            .unwrap_or_else(|e| panic!("binding unix socket {}: {e}", path.display()));
        Upstream::run(Addr::Unix(path), Listener::Unix(l), Box::new(handler))
    }

    /// 200 with `body` (Content-Length) to every request, on 127.0.0.1:0.
    pub fn hello(body: &str) -> Upstream {
        let body = body.to_string();
        Upstream::start(move |_| Answer::ok(body.clone()))
    }

    /// Answers every request with the request itself as the body ([`echo_answer`]), on
    /// 127.0.0.1:0: a test sees exactly what the proxy sent.
    pub fn echo() -> Upstream {
        Upstream::start(echo_answer)
    }

    fn run(addr: Addr, listener: Listener, handler: Box<Handler>) -> Upstream {
        let shared = Arc::new(Shared {
            handler,
            stopping: AtomicBool::new(false),
            accepted: AtomicUsize::new(0),
            open: AtomicUsize::new(0),
            requests: Mutex::new(Vec::new()),
            conns: Mutex::new(HashMap::new()),
            threads: Mutex::new(Vec::new()),
        });
        let sh = Arc::clone(&shared);
        let acceptor = std::thread::Builder::new()
            .name("upstream-accept".into())
            .spawn(move || accept_loop(listener, sh))
            .expect("spawning the accept thread");
        Upstream {
            addr,
            shared,
            acceptor: Some(acceptor),
        }
    }

    /// The TCP port (panics for a unix socket upstream).
    pub fn port(&self) -> u16 {
        match &self.addr {
            Addr::Tcp(a) => a.port(),
            Addr::Unix(p) => panic!("upstream on unix socket {} has no port", p.display()),
        }
    }

    /// What goes after `proxy_pass` or `server`: `http://127.0.0.1:PORT` or
    /// `http://unix:/PATH:`, nginx's spelling of a unix socket upstream.
    pub fn url(&self) -> String {
        match &self.addr {
            Addr::Tcp(a) => format!("http://{a}"),
            Addr::Unix(p) => format!("http://unix:{}:", p.display()),
        }
    }

    /// Connections accepted so far.
    pub fn accepted(&self) -> usize {
        self.shared.accepted.load(Ordering::SeqCst)
    }

    /// Connections open now (closed ones count down once their socket is closed on this side).
    pub fn open(&self) -> usize {
        self.shared.open.load(Ordering::SeqCst)
    }

    /// Every request received so far, in the order they were read.
    pub fn requests(&self) -> Vec<Recorded> {
        lock(&self.shared.requests).clone()
    }

    /// How many requests were received so far.
    pub fn request_count(&self) -> usize {
        lock(&self.shared.requests).len()
    }

    /// The last request received (panics if there was none).
    pub fn last(&self) -> Recorded {
        lock(&self.shared.requests)
            .last()
            .cloned()
            .expect("the upstream has received no request")
    }

    /// Waits (up to [`WAIT`]) until at least `n` requests were received; returns them all.
    pub fn wait_requests(&self, n: usize) -> Vec<Recorded> {
        wait_for(&format!("{n} requests at the upstream"), || {
            let r = lock(&self.shared.requests);
            (r.len() >= n).then(|| r.clone())
        })
    }

    /// Waits (up to [`WAIT`]) until exactly `n` connections are open.
    pub fn wait_open(&self, n: usize) {
        wait_for(&format!("{n} open connections at the upstream"), || {
            (self.open() == n).then_some(())
        });
    }

    /// Closes the listener and every connection, and joins every thread. Idempotent.
    pub fn stop(&mut self) {
        let Some(acceptor) = self.acceptor.take() else {
            return;
        };
        self.shared.stopping.store(true, Ordering::SeqCst);
        // Wake the accept thread out of accept(): it sees `stopping` and drops the listener.
        match &self.addr {
            Addr::Tcp(a) => drop(TcpStream::connect_timeout(a, WAIT)),
            Addr::Unix(p) => drop(UnixStream::connect(p)),
        }
        let _ = acceptor.join();
        if let Addr::Unix(p) = &self.addr {
            let _ = std::fs::remove_file(p);
        }
        // Reads and writes blocked on these connections return at once after a shutdown.
        for c in lock(&self.shared.conns).values() {
            c.shutdown(Shutdown::Both);
        }
        let threads = std::mem::take(&mut *lock(&self.shared.threads));
        for t in threads {
            let _ = t.join();
        }
    }
}

impl Drop for Upstream {
    fn drop(&mut self) {
        self.stop();
    }
}

/// The echo handler: 200, `Content-Type: text/plain`, and as the body the request's raw head
/// followed by its decoded body.
pub fn echo_answer(r: &Recorded) -> Answer {
    let mut body = r.raw_head.clone();
    body.extend_from_slice(&r.body);
    Answer::ok(body).header("Content-Type", "text/plain")
}

enum Listener {
    Tcp(TcpListener),
    Unix(UnixListener),
}

impl Listener {
    fn accept(&self) -> io::Result<Conn> {
        match self {
            Listener::Tcp(l) => l.accept().map(|(s, _)| {
                let _ = s.set_nodelay(true);
                Conn::Tcp(s)
            }),
            Listener::Unix(l) => l.accept().map(|(s, _)| Conn::Unix(s)),
        }
    }
}

fn accept_loop(listener: Listener, sh: Arc<Shared>) {
    loop {
        let accepted = listener.accept();
        if sh.stopping.load(Ordering::SeqCst) {
            return;
        }
        let conn = match accepted {
            Ok(c) => c,
            Err(_) => {
                // EMFILE and the like: back off instead of spinning.
                std::thread::sleep(Duration::from_millis(10));
                continue;
            }
        };
        let n = sh.accepted.fetch_add(1, Ordering::SeqCst) + 1;
        sh.open.fetch_add(1, Ordering::SeqCst);
        let Ok(clone) = conn.try_clone() else {
            sh.open.fetch_sub(1, Ordering::SeqCst);
            continue;
        };
        lock(&sh.conns).insert(n, clone);
        let sh2 = Arc::clone(&sh);
        let t = std::thread::Builder::new()
            .name(format!("upstream-conn-{n}"))
            .spawn(move || {
                let _guard = Closing(Arc::clone(&sh2), n);
                wire::serve(conn, n, &sh2);
            });
        match t {
            Ok(t) => lock(&sh.threads).push(t),
            Err(_) => {
                lock(&sh.conns).remove(&n);
                sh.open.fetch_sub(1, Ordering::SeqCst);
            }
        }
    }
}

/// Runs when a connection thread ends, however it ends: drops stop()'s clone of the socket (the
/// thread's own was dropped just before, so the descriptor is closed now), then counts it closed.
struct Closing(Arc<Shared>, usize);

impl Drop for Closing {
    fn drop(&mut self) {
        lock(&self.0.conns).remove(&self.1);
        self.0.open.fetch_sub(1, Ordering::SeqCst);
    }
}
