//! One HTTP/1.x connection on a worker: read a head, find the server and location, answer,
//! repeat while keep-alive allows.
//!
//! Runs on the worker; never blocks. Pipelined requests are answered in order, and their
//! answers are gathered into one write while more complete requests wait in the read buffer, so
//! a deep pipeline costs one `write` per batch, not per request. An idle keep-alive connection
//! waits on three things at once: the client, `keepalive_timeout`, and a graceful stop (which
//! closes it at once). A busy connection under a graceful stop answers its current request with
//! `Connection: close`.

use std::cell::RefCell;
use std::net::SocketAddr;
use std::os::fd::OwnedFd;
use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::BytesMut;
use shoal_http::{
    BodyChunk, BodyKind, BodyLength, Connection, DateCache, HeadParser, Request, ResponseHead,
};
use shoal_io::pool::ThreadPool;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpStream, UnixStream};

use super::phases::{self, Processed, Req};
use super::proxy::body::{Piece, RequestBody, UpstreamBody};
use super::static_files::{self, Body, Reply};
use super::{LocConf, ServerConf, ServerTokens};
use crate::cycle::Generation;
use crate::listen::{ListenAddr, SocketKey};
use crate::log::Level;
use crate::status::State;
use crate::variables::{Sent, Vars};
use crate::worker::ConnGuard;

/// The request and server an answer is for (for log lines); `None` for a request that could
/// not be read.
type Who<'a> = Option<(&'a Request, &'a ServerConf)>;

/// Read buffer size per read call.
const READ_CHUNK: usize = 16 * 1024;
/// Requests answered on one connection before it lets the others run.
const FAIR_BATCH: u32 = 16;
/// Gather pipelined answers up to this many bytes before writing.
const MAX_GATHER: usize = 64 * 1024;

thread_local! {
    static DATE: RefCell<DateCache> = RefCell::new(DateCache::new());
    /// When the request being answered on this worker started (read once per request, used
    /// wherever "now" within the request is good enough: the Date header, open-file cache
    /// validity).
    static REQUEST_NOW: std::cell::Cell<Option<Instant>> = const { std::cell::Cell::new(None) };
    /// Read buffers given back by connections that went idle, for the next ones that have
    /// bytes to read (an allocation reused, still warm, rather than one made and freed per
    /// request). At most 64 `READ_CHUNK`s, 1 MiB: requests in progress at once, a proxied one
    /// waiting for its upstream, each hold one.
    static SPARE_READ: crate::spare::Spares<BytesMut> = const { crate::spare::Spares::new(64) };
}

/// The current request's start, or the clock when no request is being answered.
pub fn request_now() -> Instant {
    REQUEST_NOW.with(|n| n.get()).unwrap_or_else(Instant::now)
}

/// The wall clock's second at the current request's start (see [`request_now`]), read from
/// the worker's date cache: a clock read at most once a second.
pub fn request_unix_secs() -> i64 {
    let at = request_now();
    DATE.with(|d| d.borrow_mut().secs_at_instant(at) as i64)
}

/// A client socket: TCP or unix.
pub enum Stream {
    Tcp(TcpStream),
    Unix(UnixStream),
}

impl Stream {
    /// Reads into `buf` once the socket has bytes (or its end) to give, making room in `buf`
    /// (`READ_CHUNK`) only then. The read clears the socket's readiness when it comes back
    /// short, as `read_buf` does, so the next wait needs no read that finds nothing.
    pub fn poll_read_into(
        &mut self,
        cx: &mut std::task::Context<'_>,
        buf: &mut BytesMut,
    ) -> std::task::Poll<std::io::Result<usize>> {
        use std::task::ready;
        use tokio::io::AsyncRead;
        match self {
            Stream::Tcp(s) => ready!(s.poll_read_ready(cx))?,
            Stream::Unix(s) => ready!(s.poll_read_ready(cx))?,
        }
        if buf.capacity() == 0 {
            if let Some(spare) = SPARE_READ.with(crate::spare::Spares::take) {
                *buf = spare;
            }
        }
        if buf.capacity() - buf.len() < 1024 {
            buf.reserve(READ_CHUNK);
        }
        let mut read = tokio::io::ReadBuf::uninit(buf.spare_capacity_mut());
        match self {
            Stream::Tcp(s) => ready!(std::pin::Pin::new(s).poll_read(cx, &mut read))?,
            Stream::Unix(s) => ready!(std::pin::Pin::new(s).poll_read(cx, &mut read))?,
        }
        let n = read.filled().len();
        // SAFETY: `poll_read` initialized the first `n` bytes of the spare capacity.
        unsafe { buf.set_len(buf.len() + n) };
        std::task::Poll::Ready(Ok(n))
    }

    pub async fn read_buf(&mut self, buf: &mut BytesMut) -> std::io::Result<usize> {
        match self {
            Stream::Tcp(s) => s.read_buf(buf).await,
            Stream::Unix(s) => s.read_buf(buf).await,
        }
    }

    pub async fn write(&mut self, data: &[u8]) -> std::io::Result<usize> {
        match self {
            Stream::Tcp(s) => s.write(data).await,
            Stream::Unix(s) => s.write(data).await,
        }
    }

    pub async fn write_all(&mut self, data: &[u8]) -> std::io::Result<()> {
        match self {
            Stream::Tcp(s) => s.write_all(data).await,
            Stream::Unix(s) => s.write_all(data).await,
        }
    }

    pub fn as_fd(&self) -> std::os::fd::BorrowedFd<'_> {
        use std::os::fd::AsFd;
        match self {
            Stream::Tcp(s) => s.as_fd(),
            Stream::Unix(s) => s.as_fd(),
        }
    }

    pub fn raw_fd(&self) -> std::os::fd::RawFd {
        use std::os::fd::AsRawFd;
        match self {
            Stream::Tcp(s) => s.as_raw_fd(),
            Stream::Unix(s) => s.as_raw_fd(),
        }
    }

    /// Turns `TCP_NODELAY` on (nothing to do on a Unix socket). Best effort, as nginx's
    /// `ngx_tcp_nodelay` is for an upstream: a socket that refuses it still works.
    pub fn set_nodelay(&self) {
        if let Stream::Tcp(s) = self {
            let _ = s.set_nodelay(true);
        }
    }

    /// Waits until the socket may be read.
    pub async fn readable(&self) -> std::io::Result<()> {
        match self {
            Stream::Tcp(s) => s.readable().await,
            Stream::Unix(s) => s.readable().await,
        }
    }

    /// Reads what is there now into `buf` (`WouldBlock` when nothing).
    pub fn try_read_buf(&self, buf: &mut BytesMut) -> std::io::Result<usize> {
        match self {
            Stream::Tcp(s) => s.try_read_buf(buf),
            Stream::Unix(s) => s.try_read_buf(buf),
        }
    }

    /// Waits until the peer has closed its side (an EOF is pending; true) or has sent more
    /// bytes (false: they are not consumed, and the caller should stop watching).
    pub async fn peer_closed(&self) -> bool {
        loop {
            let ready = match self {
                Stream::Tcp(s) => s.readable().await,
                Stream::Unix(s) => s.readable().await,
            };
            if ready.is_err() {
                return true;
            }
            match self.try_peek_closed() {
                Ok(eof) => return eof,
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => continue,
                Err(_) => return true,
            }
        }
    }

    /// Whether what the runtime saw readable is an EOF (`Ok(true)`) or bytes (`Ok(false)`,
    /// not consumed), looked at without reading; `WouldBlock` when the readiness was stale
    /// (it is cleared, so the next wait waits anew).
    pub fn try_peek_closed(&self) -> std::io::Result<bool> {
        let fd = self.as_fd();
        let peek = || {
            if shoal_io::syscall::nothing_to_read(fd) {
                Err(std::io::ErrorKind::WouldBlock.into())
            } else {
                Ok(shoal_io::syscall::eof_pending(fd))
            }
        };
        match self {
            Stream::Tcp(s) => s.try_io(tokio::io::Interest::READABLE, peek),
            Stream::Unix(s) => s.try_io(tokio::io::Interest::READABLE, peek),
        }
    }

    /// Writes what the socket takes now (`WouldBlock` when nothing).
    pub fn try_write(&self, data: &[u8]) -> std::io::Result<usize> {
        match self {
            Stream::Tcp(s) => s.try_write(data),
            Stream::Unix(s) => s.try_write(data),
        }
    }

    /// Whether the runtime has seen the socket readable (data or EOF) since a read drained it.
    pub fn poll_read_ready(
        &self,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        match self {
            Stream::Tcp(s) => s.poll_read_ready(cx),
            Stream::Unix(s) => s.poll_read_ready(cx),
        }
    }

    /// Waits until the socket can take more bytes (for sendfile's EAGAIN).
    pub async fn writable(&self) -> std::io::Result<()> {
        match self {
            Stream::Tcp(s) => s.writable().await,
            Stream::Unix(s) => s.writable().await,
        }
    }

    /// Runs a nonblocking write syscall, waiting for writability on EAGAIN.
    pub async fn try_io_write<R>(
        &self,
        f: impl FnMut() -> std::io::Result<R>,
    ) -> std::io::Result<R> {
        match self {
            Stream::Tcp(s) => s.async_io(tokio::io::Interest::WRITABLE, f).await,
            Stream::Unix(s) => s.async_io(tokio::io::Interest::WRITABLE, f).await,
        }
    }
}

/// What the connection knows about itself, for variables and log lines.
pub struct ConnInfo {
    pub number: u64,
    pub peer: Option<SocketAddr>,
    pub local: Option<SocketAddr>,
    pub socket: ListenAddr,
}

impl ConnInfo {
    /// `client: 127.0.0.1` as nginx's log lines say it (`unix:` for unix sockets).
    pub fn client(&self) -> String {
        match self.peer {
            Some(p) => p.ip().to_string(),
            None => "unix:".to_string(),
        }
    }
}

/// Serves one accepted connection until it closes.
pub async fn serve(
    fd: OwnedFd,
    key: SocketKey,
    generation: Arc<Generation>,
    number: u64,
    guard: ConnGuard,
) {
    let (stream, info) = match make_stream(fd, &key) {
        Ok(x) => x,
        Err(e) => {
            crate::error_log!(Level::Alert, "cannot use an accepted socket: {e}");
            return;
        }
    };
    let default_loc = generation
        .servers_for(&key.addr, info.local)
        .map(|r| &generation.default_server(r).loc);
    let rules = CloseRules::of(default_loc.unwrap_or(&LocConf::default()));
    // `tcp_nodelay on` (the default): small answers written in pieces are not held back by
    // Nagle's algorithm.
    if let Stream::Tcp(s) = &stream {
        if default_loc.is_none_or(|lc| lc.tcp_nodelay()) {
            let _ = s.set_nodelay(true);
        }
    }
    let idle_slot = crate::worker::IdleSlot::new(&guard.0.wake_idle);
    let mut conn = Conn {
        stream,
        info: ConnInfo { number, ..info },
        buf: BytesMut::with_capacity(READ_CHUNK),
        out: BytesMut::new(),
        generation: Rc::new(generation),
        route: None,
        guard,
        requests: 0,
        born: Instant::now(),
        pool: None,
        rules,
        gzip: None,
        direct: None,
        direct_file: RefCell::new(None),
        since_yield: 0,
        timer: Box::pin(tokio::time::sleep(Duration::from_secs(86_400))),
        idle_slot,
        closing_after_request: false,
        state: crate::status::ConnState::accepted(),
        unread_input: false,
        unread_body: false,
    };
    match conn.run().await {
        Ok(()) => conn.close().await,
        Err(e) if e.kind() == std::io::ErrorKind::TimedOut => {
            crate::conn_log!(
                Level::Info,
                number,
                "client timed out (110: Connection timed out) while sending response to client, client: {}",
                conn.info.client()
            );
            conn.reset_if_asked();
        }
        Err(e) => crate::conn_log!(Level::Info, number, "{e}, client: {}", conn.info.client()),
    }
}

fn make_stream(fd: OwnedFd, key: &SocketKey) -> std::io::Result<(Stream, ConnInfo)> {
    match key.addr {
        ListenAddr::Unix(_) => {
            let s = std::os::unix::net::UnixStream::from(fd);
            let s = UnixStream::from_std(s)?;
            Ok((
                Stream::Unix(s),
                ConnInfo {
                    number: 0,
                    peer: None,
                    local: None,
                    socket: key.addr.clone(),
                },
            ))
        }
        ListenAddr::Inet(_) => {
            let s = std::net::TcpStream::from(fd);
            let s = TcpStream::from_std(s)?;
            let info = ConnInfo {
                number: 0,
                peer: s.peer_addr().ok(),
                local: s.local_addr().ok(),
                socket: key.addr.clone(),
            };
            Ok((Stream::Tcp(s), info))
        }
    }
}

struct Conn {
    stream: Stream,
    info: ConnInfo,
    buf: BytesMut,
    /// Answers gathered for one write.
    out: BytesMut,
    /// The configuration, and below the servers at this connection's address in it (looked
    /// up once per configuration, not per request: the generation's id and the servers).
    /// Each is held through the connection's own `Rc`: taken for every request, a count of
    /// the `Arc` itself, which every worker shares, moved its line between their cores.
    #[allow(clippy::redundant_allocation)]
    generation: Rc<Arc<Generation>>,
    #[allow(clippy::redundant_allocation)]
    route: Option<(u64, Rc<Arc<crate::cycle::AddrServers>>)>,
    guard: ConnGuard,
    requests: u64,
    /// When the connection was accepted (`keepalive_time`).
    born: Instant,
    /// The current answer's thread pool (`aio threads`).
    pool: Option<Arc<ThreadPool>>,
    /// How to close, from the last request's location (or the default server's).
    rules: CloseRules,
    /// `gzip_comp_level` when the current answer is compressed.
    gzip: Option<u32>,
    /// `directio`: the current answer's file is read with O_DIRECT (path, alignment).
    direct: Option<(std::path::PathBuf, usize)>,
    /// The `directio` file of the current answer, opened at its first read and kept for the
    /// rest (not reopened per piece).
    direct_file: RefCell<Option<Arc<shoal_io::direct::DirectFile>>>,
    /// Requests answered since this task last yielded (to the scheduler, or by waiting for
    /// its socket).
    since_yield: u32,
    /// The connection's one timer (header and keep-alive timeouts), moved to each wait's
    /// deadline when that is earlier.
    timer: std::pin::Pin<Box<tokio::time::Sleep>>,
    /// Where a graceful stop or a reload wakes this connection while it waits for a request.
    idle_slot: crate::worker::IdleSlot,
    /// The connection's socket is gone from the configuration: answer, then close.
    closing_after_request: bool,
    /// This connection's place in `stub_status`.
    state: crate::status::ConnState,
    /// The unread input is a refused request body: nginx goes on discarding it without a
    /// FIN until `lingering_timeout` passes with nothing read.
    unread_body: bool,
    /// Input may still arrive that nobody read (a refused body, a broken request): close
    /// with a lingering read so the answer is not destroyed by a reset.
    unread_input: bool,
}

/// `lingering_*`, `send_timeout` and `reset_timedout_connection` in force.
#[derive(Clone, Copy)]
struct CloseRules {
    lingering: super::directives::Lingering,
    lingering_time: Duration,
    lingering_timeout: Duration,
    send_timeout: Duration,
    reset_timedout: bool,
}

impl CloseRules {
    fn of(lc: &LocConf) -> CloseRules {
        CloseRules {
            lingering: lc.lingering_close(),
            lingering_time: lc.lingering_time(),
            lingering_timeout: lc.lingering_timeout(),
            send_timeout: lc.send_timeout(),
            reset_timedout: lc.reset_timedout_connection(),
        }
    }
}

/// How reading (or discarding) a request body ended.
enum Discard {
    Done,
    /// The body's framing is broken (a bad chunk): 400.
    Invalid,
    /// A chunked body went over `client_max_body_size`: 413. What came before the chunk that
    /// went over, and that chunk's size (for nginx's log line).
    TooLarge(u64, u64),
    /// The client went away: close (nginx logs the request with 400).
    Gone,
    /// The client sent nothing for `client_body_timeout`: close without an answer (nginx
    /// logs the request with 408).
    TimedOut,
    /// Nothing more is in the read buffer: the rest is discarded after the answer (with the
    /// decoder that has read so far).
    Later(shoal_http::BodyDecoder),
}

/// What nginx knew of a refused request's shape when it answered: its method was `HEAD` (the
/// page is left out), or it was an HTTP/0.9 simple request (the page goes without a head).
#[derive(Clone, Copy, Default)]
struct RefusedShape {
    head: bool,
    http09: bool,
}

impl RefusedShape {
    fn of(bytes: &[u8]) -> RefusedShape {
        // A 0.9 `HEAD /` is refused with the page (only a GET is a 0.9 request to nginx).
        let http09 = shoal_http::request::is_simple_request(bytes);
        RefusedShape {
            head: !http09 && is_head_request(bytes),
            http09,
        }
    }
}

/// Why reading a head stopped without a request.
enum ReadEnd {
    /// A new configuration arrived while the connection was idle: look again.
    Reloaded,
    /// The client closed in the middle of a head: logged as a 400, nothing sent.
    Abandoned,
    /// The client closed, or a graceful stop closed an idle connection: close quietly.
    Closed,
    /// `client_header_timeout` ran out mid-head.
    HeaderTimeout,
    /// `keepalive_timeout` ran out while idle.
    Idle,
}

impl Conn {
    async fn run(&mut self) -> std::io::Result<()> {
        let mut req_slot: Option<Request> = None;
        let mut parser = HeadParser::default();
        loop {
            // Between requests, move to the newest configuration if this socket is still in it
            // (a socket a reload removed: the connection closes).
            if !self.follow_reload() {
                self.flush().await?;
                return Ok(());
            }
            let gen = self.generation.clone();
            let Some(route) = self.route_in(&gen) else {
                return Ok(());
            };
            let default_srv = gen.default_server(&route);
            self.rules = CloseRules::of(&default_srv.loc);
            parser.next_request(default_srv.srv.limits());
            let parsed = match self
                .read_head(&mut parser, default_srv, &mut req_slot)
                .await?
            {
                Ok(r) => r,
                Err(ReadEnd::Reloaded) => continue,
                Err(ReadEnd::Abandoned) => {
                    let line = request_line(&self.buf, true);
                    self.log_refused(default_srv, 400, 0, 0, line.as_deref(), Instant::now());
                    return Ok(());
                }
                Err(ReadEnd::Closed) | Err(ReadEnd::Idle) => {
                    self.flush().await?;
                    return Ok(());
                }
                Err(ReadEnd::HeaderTimeout) => {
                    crate::conn_log!(
                        Level::Info,
                        self.info.number,
                        "client timed out (110: Connection timed out) while reading client request headers, client: {}, server: {}",
                        self.info.client(),
                        default_srv.name()
                    );
                    if self.rules.reset_timedout {
                        self.reset_if_asked();
                        return Ok(());
                    }
                    self.unread_input = true;
                    let line = request_line(&self.buf, true);
                    self.error_and_close(
                        408,
                        default_srv,
                        line.as_deref(),
                        RefusedShape::default(),
                    )
                    .await?;
                    return Ok(());
                }
            };
            // The request stays in its slot (read in place, not moved out).
            let req = match parsed.map(|()| req_slot.as_ref()) {
                Ok(Some(r)) => r,
                Ok(None) => return Ok(()),
                Err(e) => {
                    self.unread_input = true;
                    let refused = parser.failed_head().map_or(&self.buf[..], |h| &h[..]);
                    let line = request_line(refused, false);
                    let shape = RefusedShape::of(refused);
                    // As nginx: the server of the host read before the error, else the default.
                    let srv = gen.refused_server(&route, &parser.refused(&self.buf));
                    crate::conn_log!(
                        Level::Info,
                        self.info.number,
                        "{}, client: {}, server: {}",
                        e,
                        self.info.client(),
                        srv.name()
                    );
                    self.error_and_close(e.code(), srv, line.as_deref(), shape)
                        .await?;
                    return Ok(());
                }
            };
            self.requests += 1;
            // A reload that came while the head was arriving: the request takes the newest
            // configuration (or the last one of a removed socket, then the connection closes).
            let gen = if self.follow_reload() {
                self.generation.clone()
            } else {
                self.closing_after_request = true;
                gen
            };
            let Some(route) = self.route_in(&gen) else {
                return Ok(());
            };
            let host = req.host().map(|h| shoal_http::lossy(h));
            let (srv, name_captures) = gen.find_server_captures(&route, host.as_deref());
            let keep = self
                .handle(
                    req,
                    srv,
                    host.as_deref(),
                    name_captures.as_ref(),
                    gen.cache_zones.get().map(|z| &**z),
                )
                .await?;
            // Its head shares the read buffer's memory: nothing of it is kept while idle.
            req_slot = None;
            if !keep {
                self.flush().await?;
                return Ok(());
            }
            // Fairness: a client that pipelines never makes us wait for its socket, so without
            // this its task would keep the worker for hundreds of requests (tokio's budget is
            // per I/O call, and one read brings many requests). Every FAIR_BATCH answers, send
            // what is gathered and let the other connections and the accept loop run.
            self.since_yield += 1;
            if self.since_yield >= FAIR_BATCH {
                self.since_yield = 0;
                self.flush().await?;
                tokio::task::yield_now().await;
            }
        }
    }

    /// The servers at this connection's address in `gen` (`None`: the address is not in it).
    #[allow(clippy::redundant_allocation)] // (see `Conn::generation`)
    fn route_in(&mut self, gen: &Generation) -> Option<Rc<Arc<crate::cycle::AddrServers>>> {
        match &self.route {
            Some((id, r)) if *id == gen.id => Some(r.clone()),
            _ => {
                let r = Rc::new(gen.servers_for(&self.info.socket, self.info.local)?.clone());
                self.route = Some((gen.id, r.clone()));
                Some(r)
            }
        }
    }

    /// Takes the worker's newest configuration if this connection's socket is still in it.
    /// Returns false when the socket was removed by a reload.
    fn follow_reload(&mut self) -> bool {
        if self.guard.0.current.borrow().id == self.generation.id {
            return true;
        }
        let current = self.guard.0.current.borrow().clone();
        if current
            .sockets
            .iter()
            .any(|s| s.key.addr == self.info.socket)
        {
            self.generation = Rc::new(current);
            true
        } else {
            false
        }
    }

    /// Reads until a complete head is in the buffer, and parses it into `slot`. The outer
    /// error is I/O; the inner is why there is no request.
    #[allow(clippy::type_complexity)]
    async fn read_head(
        &mut self,
        parser: &mut HeadParser,
        srv: &ServerConf,
        slot: &mut Option<Request>,
    ) -> std::io::Result<Result<Result<(), shoal_http::Error>, ReadEnd>> {
        let worker = self.guard.0.clone();
        let header_timeout = srv.srv.client_header_timeout();
        let (keepalive, _) = srv.loc.keepalive_timeout();
        let mut header_deadline: Option<Instant> = None;
        let mut idle_deadline: Option<Instant> = None;
        loop {
            if !self.buf.is_empty() {
                if self.state.get() != State::Reading {
                    // nginx counts a request when its first byte arrives.
                    crate::status::request();
                }
                self.state.set(State::Reading);
                match parser.parse_into(&mut self.buf, slot) {
                    Ok(true) => {
                        self.state.set(State::Writing);
                        return Ok(Ok(Ok(())));
                    }
                    Ok(false) => {}
                    Err(e) => {
                        self.state.set(State::Writing);
                        return Ok(Ok(Err(e)));
                    }
                }
            } else {
                self.state.set(State::Waiting);
            }
            // Nothing more to parse: the gathered answers go out before we wait.
            self.flush().await?;
            let idle = self.buf.is_empty() && self.requests > 0;
            // A graceful stop closes every connection with no request in progress.
            if self.buf.is_empty() && worker.stopping.get() {
                return Ok(Err(ReadEnd::Closed));
            }
            let deadline = if idle {
                *idle_deadline.get_or_insert_with(|| Instant::now() + keepalive)
            } else {
                *header_deadline.get_or_insert_with(|| Instant::now() + header_timeout)
            };
            let empty = self.buf.is_empty();
            if empty && self.buf.capacity() > 0 {
                // A connection waiting for its next request holds no read buffer (nginx frees
                // its header buffer on keep-alive too): it goes back to the worker, and one is
                // taken again when bytes arrive (see `Stream::poll_read_into`).
                let spare = std::mem::take(&mut self.buf);
                if spare.capacity() <= READ_CHUNK {
                    SPARE_READ.with(|s| s.give(spare, |_| {}));
                }
            }
            let wake = self.idle_slot.wait(worker.wake_idle.epoch());
            // One timer per connection (not a new one per request), moved only to an earlier
            // deadline: moving it later for each wait cost more than the early wake-up it
            // saves (it fires, is found early, and is moved then).
            let deadline_t = tokio::time::Instant::from_std(deadline);
            if self.timer.deadline() > deadline_t || self.timer.is_elapsed() {
                self.timer.as_mut().reset(deadline_t);
            }
            // Waiting with nothing of a request read: the worker may close this connection
            // to make room for a new one (nginx's reusable connections).
            self.idle_slot.set_reusable(empty);
            let (stream, buf) = (&mut self.stream, &mut self.buf);
            let slot = &self.idle_slot;
            let mut waited = false;
            let n = tokio::select! {
                biased;
                r = std::future::poll_fn(|cx| {
                    let r = stream.poll_read_into(cx, buf);
                    waited |= r.is_pending();
                    r
                }) => {
                    slot.set_reusable(false);
                    r?
                }
                _ = wake, if empty => {
                    slot.set_reusable(false);
                    // A graceful stop, a reload (look again: the loop closes or moves on), or
                    // `worker_connections` all taken: this one closes for a new one.
                    return Ok(Err(if worker.stopping.get() || slot.reused() { ReadEnd::Closed } else { ReadEnd::Reloaded }));
                }
                _ = &mut self.timer => {
                    if Instant::now() < deadline {
                        // An earlier wait's deadline: this one's is later.
                        self.timer.as_mut().reset(deadline_t);
                        continue;
                    }
                    slot.set_reusable(false);
                    return Ok(Err(if idle { ReadEnd::Idle } else { ReadEnd::HeaderTimeout }));
                }
            };
            if waited {
                // The task gave the worker away while the socket had nothing: the fairness
                // count starts again (only answers read without a wait lead to a yield).
                self.since_yield = 0;
            }
            if n == 0 {
                if !self.buf.is_empty() {
                    crate::conn_log!(
                        Level::Info,
                        self.info.number,
                        "client prematurely closed connection while reading client request headers, client: {}",
                        self.info.client()
                    );
                    return Ok(Err(ReadEnd::Abandoned));
                }
                return Ok(Err(ReadEnd::Closed));
            }
            // After an idle wait, `client_header_timeout` starts with the bytes that ended it:
            // the next wait (only if the head is still incomplete) sets it, a few µs later,
            // so a head that came whole costs no clock read for it.
        }
    }

    /// Answers one request. Returns whether the connection stays open.
    async fn handle(
        &mut self,
        req: &Request,
        srv: &ServerConf,
        host: Option<&str>,
        name_captures: Option<&crate::cycle::NameCaptures>,
        cache_zones: Option<&super::proxy_cache::zone::Zones>,
    ) -> std::io::Result<bool> {
        let start = Instant::now();
        REQUEST_NOW.with(|n| n.set(Some(start)));
        // Cleared however this returns: a later answer with no request (a timeout's 408) reads
        // the clock.
        struct Clear;
        impl Drop for Clear {
            fn drop(&mut self) {
                REQUEST_NOW.with(|n| n.set(None));
            }
        }
        let _clear = Clear;
        let body_kind = req.body();
        // `client_max_body_size` is checked against the location found for the request URI,
        // before any body byte is read, as nginx does.
        // (Only a request with a body needs that lookup.)
        let first_lc = if body_kind == BodyKind::Empty {
            &srv.loc
        } else {
            super::location::find(&srv.locations, &shoal_http::lossy(req.path()))
                .map_or(&srv.loc, |l| &l.loc)
        };
        let max_body = first_lc.client_max_body_size();
        let mut too_large =
            body_kind != BodyKind::Empty && body_kind.check_max_size(max_body).is_err();
        // A server that proxies reads a request body before the phases run, to pass it on
        // (nginx's `proxy_request_buffering on`); others discard it after answering.
        let mut read_first: RequestBody<'static> = RequestBody::None;
        // Why a body read first was refused (a chunk over `client_max_body_size`, a broken
        // chunk).
        let mut refused_body: Option<Discard> = None;
        // `proxy_request_buffering off` where the URI leads: the body goes upstream as it comes
        // (chunked needs HTTP/1.1 upstream; else it is read first, as nginx does).
        let streamed = first_lc.proxy.pass.is_some()
            && first_lc.proxy.request_buffering == Some(false)
            && body_kind != BodyKind::Empty
            && !too_large
            && (matches!(body_kind, BodyKind::Length(_))
                || first_lc.proxy.http_version() == super::proxy::HttpVersion::V11);
        if streamed {
            if req.expect_continue() && self.buf.is_empty() {
                self.out.extend_from_slice(shoal_http::response::CONTINUE);
                self.flush().await?;
            }
        } else if srv.has_proxy && body_kind != BodyKind::Empty && !too_large {
            if req.expect_continue() && self.buf.is_empty() {
                self.out.extend_from_slice(shoal_http::response::CONTINUE);
                self.flush().await?;
            }
            match self.read_body(body_kind, first_lc).await? {
                Ok(b) => read_first = b,
                Err(end @ (Discard::Gone | Discard::TimedOut)) => {
                    // Closed without an answer, as nginx: a client gone is logged (info) and
                    // counted as 400, one silent past `client_body_timeout` as 408.
                    let status = if matches!(end, Discard::Gone) {
                        crate::conn_log!(
                            Level::Info,
                            self.info.number,
                            "client prematurely closed connection{}",
                            static_files::log_ctx(req, srv, &self.info)
                        );
                        400
                    } else {
                        408
                    };
                    let path = shoal_http::lossy(req.path());
                    self.log(
                        req,
                        srv,
                        first_lc,
                        &path,
                        start,
                        status,
                        0,
                        0,
                        Vec::new(),
                        None,
                    );
                    return Ok(false);
                }
                Err(other) => refused_body = Some(other),
            }
        }
        let info = &self.info;
        let r = Req {
            req,
            srv,
            host,
            info,
            start,
            name_captures,
            client: Some(&self.stream),
            cache_zones,
        };
        let req_body = if streamed {
            let decoder = shoal_http::BodyDecoder::new(body_kind, max_body)
                .expect("a length over client_max_body_size is not streamed");
            RequestBody::Streaming(std::cell::RefCell::new(super::proxy::body::Streaming {
                buf: &mut self.buf,
                client: &self.stream,
                decoder,
                length: match body_kind {
                    BodyKind::Length(n) => Some(n),
                    _ => None,
                },
                timeout: first_lc.client_body_timeout(),
                started: false,
                done: false,
            }))
        } else {
            // The same body, at this scope's lifetime (the type is invariant in it).
            match read_first {
                RequestBody::Memory(b) => RequestBody::Memory(b),
                RequestBody::File(f, n) => RequestBody::File(f, n),
                RequestBody::None | RequestBody::Streaming(_) => RequestBody::None,
            }
        };
        let Processed {
            mut reply,
            lc,
            uri,
            close,
            args: _,
            user_vars: _,
            upstream,
        } = if too_large || matches!(refused_body, Some(Discard::TooLarge(..))) {
            match refused_body {
                Some(Discard::TooLarge(before, size)) => crate::conn_log!(
                    Level::Error,
                    self.info.number,
                    "client intended to send too large chunked body: {before}+{size} bytes{}",
                    r.log_ctx()
                ),
                _ => crate::conn_log!(
                    Level::Error,
                    self.info.number,
                    "client intended to send too large body: {} bytes{}",
                    match body_kind {
                        BodyKind::Length(n) => n,
                        _ => 0,
                    },
                    r.log_ctx()
                ),
            }
            // The rest of the body is not read: the connection closes after the answer.
            too_large = true;
            Processed {
                reply: Box::new(static_files::error_reply(413, first_lc)),
                lc: first_lc,
                uri: String::new(),
                close: false,
                args: None,
                user_vars: Default::default(),
                upstream: None,
            }
        } else if refused_body.is_some() {
            crate::conn_log!(
                Level::Info,
                self.info.number,
                "client sent invalid chunked body{}",
                r.log_ctx()
            );
            self.unread_input = true;
            Processed {
                reply: Box::new(static_files::error_reply(400, first_lc)),
                lc: first_lc,
                uri: String::new(),
                close: false,
                args: None,
                user_vars: Default::default(),
                upstream: None,
            }
        } else {
            phases::process(&r, &req_body).await
        };
        // A streamed body the answer came before: what is left of it cannot be found again,
        // so the connection ends after the answer; one not touched is discarded as usual.
        let (stream_started, stream_done) = match &req_body {
            RequestBody::Streaming(s) => {
                let s = s.borrow();
                (s.started, s.done)
            }
            _ => (false, false),
        };
        drop(req_body);
        let body_left = streamed && stream_started && !stream_done;
        if body_left {
            self.unread_input = true;
        }
        self.rules = CloseRules::of(lc);
        if too_large {
            self.unread_input = true;
            self.unread_body = true;
        }
        if close {
            // `return 444`: close without a word (a reset with `reset_timedout_connection`);
            // logged with status 444. A client gone while proxied: 499, as nginx logs it.
            let rec = upstream.as_ref().map(|u| u.borrow());
            self.log(
                req,
                srv,
                lc,
                &uri,
                start,
                reply.status,
                0,
                0,
                Vec::new(),
                rec.as_deref(),
            );
            self.unread_input = body_kind != BodyKind::Empty;
            self.reset_if_asked();
            return Ok(false);
        }
        // Nothing here reads request bodies (the proxy will); a body is discarded so the next
        // request on the connection starts where it should: what has arrived now, and the rest
        // after the answer (as nginx: the answer does not wait for a body nobody reads).
        let mut discard_later = None;
        if body_kind != BodyKind::Empty
            && !too_large
            && (!srv.has_proxy || (streamed && !stream_started))
        {
            if req.expect_continue() && self.buf.is_empty() {
                self.out.extend_from_slice(shoal_http::response::CONTINUE);
                self.flush().await?;
            }
            match self.discard_now(body_kind) {
                Discard::Done => {}
                Discard::Later(d) => discard_later = Some(d),
                Discard::Gone | Discard::TimedOut | Discard::TooLarge(..) | Discard::Invalid => {
                    // A malformed chunked body: nginx answers 400 and closes.
                    crate::conn_log!(
                        Level::Info,
                        self.info.number,
                        "client sent invalid chunked body{}",
                        static_files::log_ctx(req, srv, &self.info)
                    );
                    self.unread_input = true;
                    *reply = static_files::error_reply(400, lc);
                }
            }
        }
        let mut keep = req.keep_alive()
            && !too_large
            && !lc.keepalive_timeout().0.is_zero()
            && self.requests < lc.keepalive_requests()
            && start.saturating_duration_since(self.born) < lc.keepalive_time()
            && !self.closing_after_request
            && !self.guard.0.stopping.get();
        if reply.ends_keepalive() || body_left {
            keep = false;
        }
        let logs = !lc.access_logs().is_empty();
        // `aio threads`: the request's pool. A small body is read through it before the head
        // goes out, so a full queue can still be answered with 503 (nginx's behaviour).
        let mut reply = reply;
        let mut pool = None;
        // A proxied answer needs the pool only for its temporary file (read back, written
        // with `aio_write`), and only with `aio threads`.
        let proxied = matches!(reply.body, Body::Upstream(_))
            && matches!(lc.aio, Some(super::aio::Aio::Threads(_)));
        let file = matches!(
            reply.body,
            Body::File { .. } | Body::Multipart { .. } | Body::Unsized(_)
        );
        if proxied || file {
            let r = Req {
                req,
                srv,
                host,
                info: &self.info,
                start,
                name_captures,
                client: None,
                cache_zones,
            };
            let vars = r.vars(&uri, lc, &[]);
            match super::aio::pool_for(lc.aio.as_ref(), &vars, self.info.number) {
                Ok(p) => pool = p,
                // The upstream's answer is in hand: it goes without the pool (the line is
                // logged) rather than being thrown away for a 500.
                Err(super::aio::UnknownPool) if proxied => {}
                Err(super::aio::UnknownPool) => {
                    *reply = static_files::error_reply(500, lc);
                    keep = false;
                }
            }
        }
        self.pool = pool.clone();
        self.direct = reply.direct.take();
        if pool.is_some() {
            if let Body::File {
                len, cached: None, ..
            } = reply.body
            {
                // The body's first piece is read ahead of the head (a small body whole, a
                // larger one up to MAX_GATHER when it is read rather than sent), so an
                // overflow is a 503; a HEAD answer reads nothing.
                let read_path = len <= static_files::SMALL_FILE as u64 || !lc.sendfile();
                if read_path && req.method() != "HEAD" {
                    if let Err(e) = self.preread(&mut reply, lc).await {
                        if !is_overflow(&e) {
                            return Err(e);
                        }
                        *reply = static_files::error_reply(503, lc);
                    }
                }
            }
        }
        let gzip = gzip_filter(&mut reply, req, lc);
        // The answer's headers as `$sent_http_*` reads them, listed only for a log that may.
        let sent_headers = if logs && lc.access_logs().iter().any(|l| l.reads_sent_headers) {
            let mut h = reply.header_list();
            if gzip.is_some() {
                h.retain(|(n, _)| n != "content-length");
            }
            if lc.gzip.vary.unwrap_or(false) {
                // nginx writes the gzip `Vary` from a flag in its header filter: it is not a
                // header `$sent_http_vary` can see.
                h.retain(|(n, v)| !(n == "vary" && v == "Accept-Encoding"));
            }
            h
        } else {
            Vec::new()
        };
        if gzip.is_some() && req.version() < shoal_http::Version::Http11 {
            // No chunked framing in HTTP/1.0: the end of the body is the end of the connection.
            keep = false;
        }
        match &reply.body {
            // A body of unknown length (an upstream's, or a cached answer's) to an HTTP/1.0
            // client ends with the connection (a HEAD's answer has none to end); a tunnel is
            // the connection's last use.
            Body::Upstream(u)
                if u.length.is_none()
                    && u.has_body()
                    && req.version() < shoal_http::Version::Http11
                    && req.method() != "HEAD" =>
            {
                keep = false
            }
            Body::Unsized(_)
                if req.version() < shoal_http::Version::Http11 && req.method() != "HEAD" =>
            {
                keep = false
            }
            Body::Tunnel(_) => keep = false,
            _ => {}
        }
        let status = reply.status;
        self.gzip = gzip;
        let sent = self.send(req, srv, reply, lc, keep, pool.as_ref()).await;
        self.gzip = None;
        self.direct = None;
        self.direct_file.replace(None);
        let (head_len, body_len) = sent?;
        if logs {
            let rec = upstream.as_ref().map(|u| u.borrow());
            self.log(
                req,
                srv,
                lc,
                &uri,
                start,
                status,
                head_len,
                body_len,
                sent_headers,
                rec.as_deref(),
            );
        }
        // The body nobody read, discarded now that the answer is out: the connection stays
        // only if it ends within nginx's lingering bounds.
        if let Some(d) = discard_later {
            if keep {
                keep = self.discard_after_answer(d, lc).await?;
            } else {
                self.unread_input = true;
            }
        }
        // `proxy_cache_background_update`: the stale answer is out; the update runs before
        // the next request is read (nginx's main request waits for its subrequest).
        let background = upstream
            .as_ref()
            .and_then(|u| u.borrow_mut().background.take());
        if let Some(bg) = background {
            self.flush().await?;
            let r = Req {
                req,
                srv,
                host,
                info: &self.info,
                start,
                name_captures,
                client: None,
                cache_zones,
            };
            // (Boxed: rare, and kilobytes; see `write_reply_head_and_body`.)
            Box::pin(super::proxy_cache::serve::update_in_background(&r, lc, bg)).await;
        }
        if let Some(rec) = upstream {
            super::proxy::handler::Record::recycle(rec);
        }
        Ok(keep)
    }

    #[allow(clippy::too_many_arguments)]
    fn log(
        &self,
        req: &Request,
        srv: &ServerConf,
        lc: &LocConf,
        uri: &str,
        start: Instant,
        status: u16,
        head_len: u64,
        body_len: u64,
        headers: Vec<(String, String)>,
        upstream: Option<&super::proxy::handler::Record>,
    ) {
        let logs = lc.access_logs();
        if logs.is_empty() {
            return;
        }
        let sent = Sent {
            status,
            body_bytes: body_len,
            bytes: head_len + body_len,
            headers,
        };
        let request_length = req.head_len() as u64
            + match req.body() {
                BodyKind::Length(n) => n,
                _ => 0,
            };
        let vars = Vars {
            req: Some(req),
            uri: Some(uri),
            peer: self.info.peer,
            local: self.info.local,
            server_name: srv.name(),
            document_root: Some(lc.root()),
            request_filename: None,
            connection: self.info.number,
            connection_requests: self.requests,
            start,
            request_length,
            sent: Some(&sent),
            captures: &[],
            user: None,
            doc_root: None,
            args: None,
            request_line: None,
            upstream,
        };
        super::access_log::log_request(logs, &vars);
    }

    /// Reads a request body whole, to pass it upstream: in memory up to
    /// `client_body_buffer_size` (default 16k), beyond it in an unlinked temporary file.
    async fn read_body(
        &mut self,
        kind: BodyKind,
        lc: &LocConf,
    ) -> std::io::Result<Result<RequestBody<'static>, Discard>> {
        use std::io::Write;
        let limit = lc.client_body_buffer_size.unwrap_or(16 * 1024);
        let mut memory: Vec<u8> = Vec::new();
        let mut file: Option<(std::fs::File, u64)> = None;
        let max = lc.client_max_body_size();
        let end = self
            .read_body_pieces(kind, max, lc.client_body_timeout(), |data| {
                if file.is_none() && (memory.len() + data.len()) as u64 > limit {
                    let mut f = unlinked_temp_file(&std::env::temp_dir())?;
                    f.write_all(&memory)?;
                    file = Some((f, memory.len() as u64));
                    memory = Vec::new();
                }
                match &mut file {
                    Some((f, n)) => {
                        f.write_all(&data)?;
                        *n += data.len() as u64;
                    }
                    None => memory.extend_from_slice(&data),
                }
                Ok(())
            })
            .await?;
        Ok(match end {
            Discard::Done => Ok(match file {
                Some((f, n)) => RequestBody::File(f, n),
                None => RequestBody::Memory(memory.into()),
            }),
            other => Err(other),
        })
    }

    /// Reads a request body to its end, handing each piece to `keep`; how the reading ended
    /// (`Done`, a broken framing, a chunked body over `max` (`client_max_body_size`), a client
    /// gone or silent for `timeout`).
    async fn read_body_pieces(
        &mut self,
        kind: BodyKind,
        max: u64,
        timeout: Duration,
        mut keep: impl FnMut(bytes::Bytes) -> std::io::Result<()>,
    ) -> std::io::Result<Discard> {
        let Ok(mut d) = shoal_http::BodyDecoder::new(kind, max) else {
            return Ok(Discard::Invalid);
        };
        loop {
            match d.decode_buf(&mut self.buf) {
                Ok(BodyChunk::Done) => return Ok(Discard::Done),
                Ok(BodyChunk::Data(data)) => {
                    keep(data)?;
                    continue;
                }
                Ok(BodyChunk::NeedMore) => {}
                Err(e) => return Ok(body_error(&d, e)),
            }
            self.buf.reserve(READ_CHUNK);
            let read = tokio::time::timeout(timeout, self.stream.read_buf(&mut self.buf)).await;
            match read {
                Ok(Ok(0)) => return Ok(Discard::Gone),
                Err(_) => return Ok(Discard::TimedOut),
                Ok(Ok(_)) => {}
                Ok(Err(e)) => return Err(e),
            }
        }
    }

    /// Sends an upstream's body as it arrives: what is buffered is taken, gathered output is
    /// written before each wait on the upstream. Returns the bytes sent (framing included).
    /// A body cut short is logged and ends the connection (never a short body that looks
    /// whole).
    async fn relay(
        &mut self,
        mut ub: UpstreamBody,
        chunked: bool,
        who: Who<'_>,
        lc: &LocConf,
    ) -> std::io::Result<u64> {
        let mut total = 0u64;
        // What one read brought is sent as one chunk, however the upstream chunked it (as
        // nginx re-chunks its buffers).
        let mut pending: Vec<bytes::Bytes> = Vec::new();
        loop {
            let step = ub.take();
            if !matches!(step, Ok(Piece::Data(_))) && !pending.is_empty() {
                total += self.emit_pieces(&mut pending, chunked);
            }
            match step {
                Ok(Piece::Data(d)) => {
                    pending.push(d);
                    if pending.iter().map(|p| p.len()).sum::<usize>() >= MAX_GATHER {
                        total += self.emit_pieces(&mut pending, chunked);
                        self.flush().await?;
                    }
                }
                Ok(Piece::End) => break,
                Ok(Piece::NeedMore) => {
                    if ub.buffering && !self.flush_now()? {
                        // The client is slower than the upstream: `proxy_buffering on` reads
                        // ahead, into memory and then a temporary file, so the upstream is
                        // free as soon as its answer is in.
                        let rest = self.relay_buffered(ub, chunked, who, lc).await?;
                        return Ok(total + rest);
                    }
                    self.flush().await?;
                    if let Err(e) = ub.fill().await {
                        return Err(self.upstream_body_error(ub, e, who).await);
                    }
                }
                Err(e) => return Err(self.upstream_body_error(ub, e, who).await),
            }
        }
        if chunked {
            self.out.extend_from_slice(shoal_http::response::LAST_CHUNK);
            total += shoal_http::response::LAST_CHUNK.len() as u64;
        }
        ub.finish();
        Ok(total)
    }

    /// Writes what is gathered as far as the socket takes it without waiting. Returns whether
    /// everything went.
    fn flush_now(&mut self) -> std::io::Result<bool> {
        let mut pos = 0;
        while pos < self.out.len() {
            match self.stream.try_write(&self.out[pos..]) {
                Ok(0) => return Err(std::io::ErrorKind::WriteZero.into()),
                Ok(n) => pos += n,
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                Err(e) => return Err(e),
            }
        }
        if pos == self.out.len() {
            // Kept, not split off: the buffer's allocation serves the next answer.
            self.out.clear();
            return Ok(true);
        }
        bytes::Buf::advance(&mut self.out, pos);
        Ok(false)
    }

    /// The rest of an upstream body to a client that cannot keep up: the upstream is read as
    /// fast as it sends while the client is written as fast as it takes, what waits is held
    /// in memory up to `proxy_buffers` and beyond that in an unlinked temporary file (up to
    /// `proxy_max_temp_file_size`; past it, or with 0, the upstream waits for the client). The
    /// upstream connection is released the moment its answer is complete.
    async fn relay_buffered(
        &mut self,
        ub: UpstreamBody,
        chunked: bool,
        who: Who<'_>,
        lc: &LocConf,
    ) -> std::io::Result<u64> {
        use std::collections::VecDeque;
        let memory_limit = lc.proxy.buffers_total().max(READ_CHUNK);
        // `aio threads`: the temporary file is read back through the pool when its pages are
        // not in memory, and written through it with `aio_write on`.
        let pool = self.pool.clone();
        let write_pool = pool.clone().filter(|_| lc.aio_write.unwrap_or(false));
        let file_limit = lc.proxy.max_temp_file_size.unwrap_or(1024 * 1024 * 1024);
        let send_timeout = self.rules.send_timeout;
        let mut ub = Some(ub);
        let mut queue: VecDeque<bytes::Bytes> = VecDeque::new();
        let mut queued = 0usize;
        // The temporary file: what is written and what is read back so far.
        let mut spill: Option<(Arc<std::fs::File>, u64, u64)> = None;
        let mut total = 0u64;
        if !self.out.is_empty() {
            let out = self.out.split().freeze();
            queued += out.len();
            queue.push_back(out);
        }
        loop {
            // Move file data back to memory once memory has drained.
            if queue.is_empty() {
                if let Some((f, written, read)) = &mut spill {
                    if *read < *written {
                        let want = ((*written - *read) as usize).min(MAX_GATHER);
                        let b = shoal_io::file::read_range(
                            f,
                            *read,
                            want,
                            pool.as_deref(),
                            lc.aio_residency_check(),
                        )
                        .await
                        .map_err(|e| self.pool_error(e))?;
                        let n = b.len();
                        if n == 0 {
                            return Err(std::io::Error::other("proxy temp file shrank"));
                        }
                        *read += n as u64;
                        queued += n;
                        queue.push_back(b.into());
                    }
                }
            }
            let upstream_open = ub.as_ref().is_some_and(|u| !u.is_done());
            if queue.is_empty() && !upstream_open {
                break;
            }
            let spilled = spill.as_ref().map_or(0, |s| s.1);
            let room = queued < memory_limit || spilled < file_limit;
            let stream = &mut self.stream;
            let front = queue.front().cloned();
            let step = tokio::select! {
                biased;
                w = async {
                    match &front {
                        Some(b) => crate::deadline::within(send_timeout, stream.write(b)).await,
                        None => std::future::pending().await,
                    }
                } => Err(w),
                r = async {
                    match ub.as_mut() {
                        Some(u) => u.fill().await,
                        None => std::future::pending().await,
                    }
                }, if upstream_open && room => Ok(r),
            };
            match step {
                Err(w) => {
                    let n = match w {
                        Err(_) => return Err(std::io::ErrorKind::TimedOut.into()),
                        Ok(Err(e)) => return Err(e),
                        Ok(Ok(0)) => return Err(std::io::ErrorKind::WriteZero.into()),
                        Ok(Ok(n)) => n,
                    };
                    queued -= n;
                    let front = queue.front_mut().expect("a write had something to write");
                    if n == front.len() {
                        queue.pop_front();
                    } else {
                        let _ = front.split_to(n);
                    }
                }
                Ok(Err(e)) => {
                    let u = ub.take().expect("reading an open upstream");
                    // What arrived is not sent: the answer is cut short either way.
                    return Err(self.upstream_body_error(u, e, who).await);
                }
                Ok(Ok(())) => {
                    // Everything the read brought, framed for the client.
                    let u = ub.as_mut().expect("reading an open upstream");
                    let mut pieces: Vec<bytes::Bytes> = Vec::new();
                    let mut end = false;
                    loop {
                        match u.take() {
                            Ok(Piece::Data(d)) => pieces.push(d),
                            Ok(Piece::NeedMore) => break,
                            Ok(Piece::End) => {
                                end = true;
                                break;
                            }
                            Err(e) => {
                                let u = ub.take().expect("reading an open upstream");
                                return Err(self.upstream_body_error(u, e, who).await);
                            }
                        }
                    }
                    let mut framed = BytesMut::new();
                    frame_pieces(&mut framed, &mut pieces, chunked);
                    if end {
                        if chunked {
                            framed.extend_from_slice(shoal_http::response::LAST_CHUNK);
                        }
                        // The answer is in: the upstream connection goes back or closes now.
                        if let Some(u) = ub.take() {
                            u.finish();
                        }
                    }
                    total += framed.len() as u64;
                    let framed = framed.freeze();
                    let to_file = file_limit > 0
                        && (spill.as_ref().is_some_and(|s| s.2 < s.1)
                            || queued + framed.len() > memory_limit);
                    if to_file && !framed.is_empty() {
                        if spill.is_none() {
                            // `proxy_temp_path`, else the system's temporary directory.
                            let dir = lc
                                .proxy
                                .temp_path
                                .clone()
                                .unwrap_or_else(std::env::temp_dir);
                            spill = Some((Arc::new(unlinked_temp_file(&dir)?), 0, 0));
                        }
                        let (f, written, _) = spill.as_mut().expect("just made");
                        let len = framed.len() as u64;
                        shoal_io::file::write_at(f, framed, *written, write_pool.as_deref())
                            .await
                            .map_err(|e| self.pool_error(e))?;
                        *written += len;
                    } else if !framed.is_empty() {
                        queued += framed.len();
                        queue.push_back(framed);
                    }
                }
            }
        }
        Ok(total)
    }

    /// Appends body pieces to the output, as one chunk when `chunked`. Returns the bytes
    /// added.
    fn emit_pieces(&mut self, pieces: &mut Vec<bytes::Bytes>, chunked: bool) -> u64 {
        let before = self.out.len();
        frame_pieces(&mut self.out, pieces, chunked);
        (self.out.len() - before) as u64
    }

    /// An upstream body that could not be read to its end: logged as nginx logs it, what was
    /// gathered is sent, and the connection is to be closed.
    async fn upstream_body_error(
        &mut self,
        ub: UpstreamBody,
        e: super::proxy::body::BodyError,
        who: Who<'_>,
    ) -> std::io::Error {
        let ctx = match who {
            Some((req, srv)) => ub.record.borrow().log_ctx(req, srv, &self.info),
            None => String::new(),
        };
        crate::conn_log!(
            Level::Error,
            self.info.number,
            "{e} while reading upstream{ctx}"
        );
        ub.finish();
        let _ = self.flush().await;
        std::io::Error::other("upstream body cut short")
    }

    /// A 101 from the upstream: bytes go both ways until either side closes or nothing moves
    /// for `proxy_read_timeout`.
    async fn tunnel(&mut self, mut ub: UpstreamBody, lc: &LocConf) -> std::io::Result<u64> {
        use bytes::Buf;
        self.flush().await?;
        let Some(up) = ub.stream.take() else {
            return Ok(0);
        };
        // Small messages both ways: neither side held back by Nagle (nginx, with
        // `tcp_nodelay on`, sets it on both connections of an upgraded exchange).
        if lc.tcp_nodelay() {
            self.stream.set_nodelay();
            up.set_nodelay();
        }
        // Both directions at once, each with what it has read and not yet written: a side
        // that cannot take more stops only its own direction.
        let mut c2u = BytesMut::from(&self.buf[..]);
        self.buf.clear();
        let mut u2c = std::mem::take(&mut ub.buf);
        let idle = ub.read_timeout;
        let (client_wait, upstream_wait) = (self.rules.send_timeout, lc.proxy.send_timeout());
        let (mut client_open, mut upstream_open) = (true, true);
        let mut total = 0u64;
        let client = &self.stream;
        #[derive(Clone, Copy)]
        enum Ev {
            ClientRead,
            ClientWrite,
            UpRead,
            UpWrite,
        }
        loop {
            if (!client_open && c2u.is_empty()) || (!upstream_open && u2c.is_empty()) {
                break;
            }
            // Room to read into (a read into a full buffer would look like an EOF).
            for b in [&mut c2u, &mut u2c] {
                if b.capacity() - b.len() < 1024 {
                    b.reserve(READ_CHUNK);
                }
            }
            // Waiting to write: that side's timeout; waiting for either to speak: the idle one.
            let (wait, who) = match (!u2c.is_empty(), !c2u.is_empty()) {
                (true, _) => (client_wait, "client"),
                (false, true) => (upstream_wait, "upstream"),
                (false, false) => (idle, "upstream"),
            };
            let step = crate::deadline::within(wait, async {
                tokio::select! {
                    r = client.readable(), if client_open && c2u.is_empty() => Some((Ev::ClientRead, r)),
                    r = up.writable(), if !c2u.is_empty() => Some((Ev::UpWrite, r)),
                    r = up.readable(), if upstream_open && u2c.is_empty() => Some((Ev::UpRead, r)),
                    r = client.writable(), if !u2c.is_empty() => Some((Ev::ClientWrite, r)),
                    else => None,
                }
            })
            .await;
            let ev = match step {
                Err(_) => {
                    crate::conn_log!(
                        if who == "client" { Level::Info } else { Level::Error },
                        self.info.number,
                        "{who} timed out (110: Connection timed out) while proxying upgraded connection, client: {}",
                        self.info.client()
                    );
                    break;
                }
                Ok(None) | Ok(Some((_, Err(_)))) => break,
                Ok(Some((ev, Ok(())))) => ev,
            };
            let r = match ev {
                Ev::ClientRead => client.try_read_buf(&mut c2u).map(|n| {
                    client_open = n > 0;
                }),
                Ev::UpRead => up.try_read_buf(&mut u2c).map(|n| {
                    upstream_open = n > 0;
                    total += n as u64;
                }),
                Ev::ClientWrite => client.try_write(&u2c).map(|n| u2c.advance(n)),
                Ev::UpWrite => up.try_write(&c2u).map(|n| c2u.advance(n)),
            };
            match r {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                Err(_) => break,
            }
        }
        ub.record.borrow_mut().finish(true);
        Ok(total)
    }

    /// Drops what has arrived of a request body nobody reads, without waiting for more
    /// (nginx's `ngx_http_discard_request_body` before the answer): `Later` with the decoder
    /// when the rest is still to come. No size limit applies, as in nginx: the wait for the
    /// rest is bounded by time instead (see [`Conn::discard_after_answer`]).
    fn discard_now(&mut self, kind: BodyKind) -> Discard {
        let Ok(d) = shoal_http::BodyDecoder::new(kind, 0) else {
            return Discard::Invalid;
        };
        self.discard_buffered(d)
    }

    /// Drops the body bytes in the read buffer.
    fn discard_buffered(&mut self, mut d: shoal_http::BodyDecoder) -> Discard {
        loop {
            match d.decode_buf(&mut self.buf) {
                Ok(BodyChunk::Done) => return Discard::Done,
                Ok(BodyChunk::Data(_)) => {}
                Ok(BodyChunk::NeedMore) => return Discard::Later(d),
                Err(e) => return body_error(&d, e),
            }
        }
    }

    /// The rest of a discarded body, after the answer: read and dropped for at most
    /// `lingering_time`, each wait at most `lingering_timeout` (nginx's bounds there, not
    /// `client_body_timeout`). Returns whether it ended in time, so the connection can serve
    /// its next request.
    async fn discard_after_answer(
        &mut self,
        mut d: shoal_http::BodyDecoder,
        lc: &LocConf,
    ) -> std::io::Result<bool> {
        let deadline = Instant::now() + lc.lingering_time();
        loop {
            d = match self.discard_buffered(d) {
                Discard::Done => return Ok(true),
                Discard::Later(d) => d,
                Discard::Invalid | Discard::TooLarge(..) | Discard::Gone | Discard::TimedOut => {
                    crate::conn_log!(
                        Level::Info,
                        self.info.number,
                        "client sent invalid chunked body, client: {}",
                        self.info.client()
                    );
                    return Ok(false);
                }
            };
            // The answer goes out before the wait.
            self.flush().await?;
            let wait = lc
                .lingering_timeout()
                .min(deadline.saturating_duration_since(Instant::now()));
            if wait.is_zero() {
                return Ok(false);
            }
            if self.buf.capacity() - self.buf.len() < 1024 {
                self.buf.reserve(READ_CHUNK);
            }
            match tokio::time::timeout(wait, self.stream.read_buf(&mut self.buf)).await {
                Ok(Ok(n)) if n > 0 => {}
                // Silent past the bound, closed, or an error: the connection ends here.
                _ => return Ok(false),
            }
        }
    }

    /// Answers a request that could not be read (400, 408, 414, ...) and closes; it is
    /// logged with the request line read so far, as nginx logs it. `head_only`: the refused
    /// request's method was `HEAD`, so the page is left out (as nginx does once it has read
    /// the method).
    async fn error_and_close(
        &mut self,
        code: u16,
        srv: &ServerConf,
        line: Option<&str>,
        shape: RefusedShape,
    ) -> std::io::Result<()> {
        let start = Instant::now();
        let lc = &srv.loc;
        let mut reply = Box::new(static_files::error_reply(code, lc));
        // nginx's headers filter runs for these answers too, with the server's configuration:
        // `add_header ... always` (none of these statuses takes the others).
        if let Some(headers) = &lc.add_header {
            let vars = self.refused_vars(srv, None, line, start);
            super::phases::add_headers(headers, false, &vars, &mut reply);
        }
        let status = reply.status;
        let (head_len, body_len) = self
            .write_reply_head_and_body(None, reply, lc, false, shape)
            .await?;
        self.flush().await?;
        self.log_refused(srv, status, head_len, body_len, line, start);
        Ok(())
    }

    /// The access log line of a request refused before it was parsed.
    fn log_refused(
        &self,
        srv: &ServerConf,
        status: u16,
        head_len: u64,
        body_len: u64,
        line: Option<&str>,
        start: Instant,
    ) {
        let logs = srv.loc.access_logs();
        if logs.is_empty() {
            return;
        }
        let sent = Sent {
            status,
            body_bytes: body_len,
            bytes: head_len + body_len,
            headers: Vec::new(),
        };
        let vars = self.refused_vars(srv, Some(&sent), line, start);
        super::access_log::log_request(logs, &vars);
    }

    /// Variables for a request refused before it was parsed: no request, the server's name.
    fn refused_vars<'a>(
        &'a self,
        srv: &'a ServerConf,
        sent: Option<&'a Sent>,
        line: Option<&'a str>,
        start: Instant,
    ) -> Vars<'a> {
        Vars {
            req: None,
            uri: None,
            peer: self.info.peer,
            local: self.info.local,
            server_name: srv.name(),
            document_root: None,
            request_filename: None,
            connection: self.info.number,
            connection_requests: self.requests + 1,
            start,
            request_length: 0,
            sent,
            captures: &[],
            user: None,
            doc_root: None,
            args: None,
            request_line: line,
            upstream: None,
        }
    }

    async fn send(
        &mut self,
        req: &Request,
        srv: &ServerConf,
        reply: Box<Reply>,
        lc: &LocConf,
        keep: bool,
        pool: Option<&Arc<ThreadPool>>,
    ) -> std::io::Result<(u64, u64)> {
        self.pool = pool.cloned();
        let r = self
            .write_reply_head_and_body(Some((req, srv)), reply, lc, keep, RefusedShape::default())
            .await;
        self.pool = None;
        r
    }

    /// Reads a small file body through the pool (page-cache hits inline first, unless
    /// `aio_residency_check off`), turning it into bytes.
    async fn preread(&mut self, reply: &mut Reply, lc: &LocConf) -> std::io::Result<()> {
        let Body::File {
            file,
            offset,
            len,
            cached,
        } = std::mem::replace(&mut reply.body, Body::Empty)
        else {
            return Ok(());
        };
        if let Some(c) = cached {
            reply.body = Body::Bytes(c[offset as usize..(offset + len) as usize].to_vec());
            return Ok(());
        }
        let piece = self.output_buffers(lc).map_or(MAX_GATHER, |(_, size)| size);
        let first = len.min(piece as u64);
        let data = self.read_piece(&file, offset, first as usize, lc).await?;
        if (data.len() as u64) < first {
            return Err(std::io::Error::other("file shrank while being sent"));
        }
        reply.body = if first == len {
            Body::Bytes(data)
        } else {
            Body::Chain(
                data,
                Box::new(Body::File {
                    file,
                    offset: offset + first,
                    len: len - first,
                    cached: None,
                }),
            )
        };
        Ok(())
    }

    /// Sends a body through the gzip compressor, as chunks (`chunked`) or raw (HTTP/1.0).
    /// Files are read a piece at a time (through the pool with `aio threads`), so the body is
    /// never held whole. Returns the compressed bytes sent.
    async fn send_gzipped(
        &mut self,
        body: Body,
        level: u32,
        chunked: bool,
        lc: &LocConf,
        who: Who<'_>,
    ) -> std::io::Result<u64> {
        let len = body.length();
        let mut z = super::gzip::Compressor::new(level, len);
        let mut total = 0u64;
        let body = match body {
            Body::Unsized(inner) => *inner,
            Body::Absent(_) => Body::Empty,
            other => other,
        };
        let body = match body {
            Body::Chain(first, rest) => {
                total += self.emit(z.feed(&first)?, chunked);
                *rest
            }
            other => other,
        };
        match body {
            Body::Empty => {}
            Body::Bytes(b) | Body::Chain(b, _) => {
                total += self.emit(z.feed(&b)?, chunked);
            }
            Body::File {
                cached: Some(c),
                offset,
                len,
                ..
            } => {
                let data = &c[offset as usize..(offset + len) as usize];
                total += self.emit(z.feed(data)?, chunked);
            }
            Body::File {
                file, offset, len, ..
            } => {
                // A compressed body is read through the output buffers whatever `sendfile`
                // says (nginx's gzip filter needs the bytes).
                let piece = lc.output_buffers().1;
                let mut off = offset;
                let end = offset + len;
                while off < end {
                    let want = ((end - off) as usize).min(piece);
                    let data = self.read_piece(&file, off, want, lc).await?;
                    if data.is_empty() {
                        return Err(std::io::Error::other("file shrank while being sent"));
                    }
                    off += data.len() as u64;
                    total += self.emit(z.feed(&data)?, chunked);
                    if self.out.len() >= MAX_GATHER {
                        self.flush().await?;
                    }
                }
            }
            Body::Multipart { .. } => {
                return Err(std::io::Error::other("gzip never applies to 206 answers"));
            }
            Body::Upstream(mut ub) => loop {
                match ub.take() {
                    Ok(Piece::Data(d)) => {
                        let out = z.feed(&d)?;
                        total += self.emit(out, chunked);
                        if self.out.len() >= MAX_GATHER {
                            self.flush().await?;
                        }
                    }
                    Ok(Piece::End) => {
                        ub.finish();
                        break;
                    }
                    Ok(Piece::NeedMore) => {
                        self.flush().await?;
                        if let Err(e) = ub.fill().await {
                            return Err(self.upstream_body_error(*ub, e, who).await);
                        }
                    }
                    Err(e) => return Err(self.upstream_body_error(*ub, e, who).await),
                }
            },
            Body::Tunnel(_) => {
                return Err(std::io::Error::other("gzip never applies to a tunnel"));
            }
            Body::Unsized(_) | Body::Absent(_) => unreachable!("unwrapped above"),
        }
        total += self.emit(z.finish()?, chunked);
        if chunked {
            self.out.extend_from_slice(shoal_http::response::LAST_CHUNK);
            total += shoal_http::response::LAST_CHUNK.len() as u64;
        }
        Ok(total)
    }

    /// Appends compressed bytes to the output, framed as a chunk when `chunked`. Returns the
    /// bytes added, framing included (what `$body_bytes_sent` counts, as nginx).
    fn emit(&mut self, data: &[u8], chunked: bool) -> u64 {
        if data.is_empty() {
            return 0;
        }
        let before = self.out.len();
        if chunked {
            shoal_http::response::write_chunk(&mut self.out, data);
        } else {
            self.out.extend_from_slice(data);
        }
        (self.out.len() - before) as u64
    }

    /// Logs a pool overflow as nginx does (`thread pool "NAME" queue overflow: N tasks
    /// waiting`) and passes the error on.
    fn pool_error(&self, e: std::io::Error) -> std::io::Error {
        if let Some(o) = shoal_io::pool::Overflow::from_io(&e) {
            // nginx logs this line from the pool, without the connection's number.
            crate::error_log!(Level::Error, "{o}");
        }
        e
    }

    async fn write_reply_head_and_body(
        &mut self,
        who: Who<'_>,
        mut reply: Box<Reply>,
        lc: &LocConf,
        keep: bool,
        refused: RefusedShape,
    ) -> std::io::Result<(u64, u64)> {
        let req = who.map(|(r, _)| r);
        let head_only = req.map_or(refused.head, |r| r.method() == "HEAD");
        // No chunked framing before HTTP/1.1; no head at all for HTTP/0.9.
        let http10 = req.is_some_and(|r| r.version() < shoal_http::Version::Http11);
        let http09 = req.map_or(refused.http09, |r| {
            r.version() == shoal_http::Version::Http09
        });
        // An answer made in the poll that read its request (a file, an error page) is dated by
        // the request's start; one that waited (a proxied answer) by the clock.
        let date = DATE.with(|d| {
            let mut d = d.borrow_mut();
            if reply.proxied || matches!(reply.body, Body::Upstream(_) | Body::Tunnel(_)) {
                *d.now()
            } else {
                *d.at_instant(request_now())
            }
        });
        let length = reply.body.length();
        // A body of unknown length: chunked for HTTP/1.1 clients. The answer to a HEAD says
        // neither (nginx's chunked filter skips a HEAD, converted to a GET upstream or not).
        let upstream_unsized = !head_only
            && matches!(&reply.body, Body::Upstream(u) if u.length.is_none() && u.has_body());
        let file_unsized = !head_only && matches!(reply.body, Body::Unsized(_));
        let tunnel = matches!(reply.body, Body::Tunnel(_));
        let last_modified = reply.last_modified;
        let head = ResponseHead {
            status: reply.status,
            reason: reply.reason.as_deref(),
            server: Some(tokens(lc.server_tokens())),
            date: Some(&date),
            // nginx writes a Content-Type only when it has a value (an upstream's may be empty).
            content_type: reply
                .content_type
                .as_deref()
                .filter(|t| !t.is_empty())
                .map(str::as_bytes),
            length: match (length, self.gzip, http10) {
                // A compressed HEAD answer says neither (nginx skips its chunked filter).
                (_, Some(_), _) if head_only => BodyLength::Unknown,
                (_, Some(_), false) => BodyLength::Chunked,
                (_, Some(_), true) => BodyLength::Unknown,
                (Some(n), None, _) => BodyLength::Length(n),
                (None, None, false) if upstream_unsized || file_unsized => BodyLength::Chunked,
                (None, None, _) => BodyLength::Unknown,
            },
            last_modified: last_modified.as_ref(),
            location: reply.location.as_deref().map(str::as_bytes),
            connection: if tunnel {
                Connection::Upgrade
            } else if keep {
                Connection::KeepAlive
            } else {
                Connection::Close
            },
            keep_alive_timeout: if keep {
                lc.keepalive_timeout().1.map(|d| d.as_secs())
            } else {
                None
            },
            headers: &[],
        };
        let before = self.out.len();
        if !http09 {
            head.write_fields(&mut self.out);
            // The handler's headers, `add_header`'s, then the upstream's that are not UTF-8.
            for (n, v) in &reply.headers {
                shoal_http::response::header(&mut self.out, n.as_bytes(), v.as_bytes());
            }
            for (n, v) in &reply.extra {
                shoal_http::response::header(&mut self.out, n.as_bytes(), v.as_bytes());
            }
            for (n, v) in &reply.raw_extra {
                shoal_http::response::header(&mut self.out, n.as_bytes(), v);
            }
            self.out.extend_from_slice(b"\r\n");
        }
        let head_len = (self.out.len() - before) as u64;
        // The head is written: only the body is left of the reply, whose box the worker keeps.
        let body = std::mem::replace(&mut reply.body, Body::Empty);
        Reply::recycle(reply);
        if head_only {
            if let Body::Upstream(u) = body {
                // A HEAD converted to GET for the cache: the body is still stored.
                u.finish_or_store();
            }
            self.maybe_flush().await?;
            return Ok((head_len, 0));
        }
        // A tunnel and a compressed body run in futures of their own, made for the answer:
        // each is kilobytes, and inline they would size every connection's task, an idle
        // one's too. (The proxy's relay is not boxed: moving its future into a box cost the
        // proxied answer more than the memory it saves.)
        if let Body::Tunnel(u) = body {
            let body_len = Box::pin(self.tunnel(*u, lc)).await?;
            return Ok((head_len, body_len));
        }
        if let Some(level) = self.gzip {
            let body_len = Box::pin(self.send_gzipped(body, level, !http10, lc, who)).await?;
            self.maybe_flush().await?;
            return Ok((head_len, body_len));
        }
        if let Body::Upstream(u) = body {
            let chunked = upstream_unsized && !http10;
            let body_len = self.relay(*u, chunked, who, lc).await?;
            self.maybe_flush().await?;
            return Ok((head_len, body_len));
        }
        if let Body::Unsized(inner) = body {
            let body_len = self.send_unsized(*inner, !http10, lc).await?;
            self.maybe_flush().await?;
            return Ok((head_len, body_len));
        }
        let body_len = match body {
            Body::Absent(_) => 0,
            _ => length.unwrap_or(0),
        };
        match body {
            Body::Empty | Body::Absent(_) => {}
            Body::Bytes(b) => self.out.extend_from_slice(&b),
            Body::Chain(first, rest) => {
                self.out.extend_from_slice(&first);
                match *rest {
                    Body::File {
                        file, offset, len, ..
                    } => self.copy_file(&file, offset, len, lc).await?,
                    Body::Bytes(b) => self.out.extend_from_slice(&b),
                    _ => return Err(std::io::Error::other("a chained body ends in a file")),
                }
            }
            Body::Multipart {
                file,
                parts,
                cached,
            } => {
                for (header, br) in &parts.parts {
                    self.out.extend_from_slice(header);
                    match &cached {
                        Some(c) => self
                            .out
                            .extend_from_slice(&c[br.start as usize..br.end as usize]),
                        None => {
                            self.copy_file(&file, br.start, br.end - br.start, lc)
                                .await?
                        }
                    }
                }
                self.out.extend_from_slice(&parts.trailer);
            }
            Body::File {
                cached: Some(c),
                offset,
                len,
                ..
            } => self
                .out
                .extend_from_slice(&c[offset as usize..(offset + len) as usize]),
            Body::File {
                file, offset, len, ..
            } => self.copy_file(&file, offset, len, lc).await?,
            Body::Upstream(_) | Body::Tunnel(_) | Body::Unsized(_) => unreachable!("sent above"),
        }
        self.maybe_flush().await?;
        Ok((head_len, body_len))
    }

    /// Sends a cached file body whose length was not told: as chunks when `chunked` (of
    /// `output_buffers`' size with `sendfile off`, whole with it on, as nginx's chunked
    /// filter frames what its output chain hands it), else as it is, to the close. Returns
    /// the bytes sent, framing included.
    async fn send_unsized(
        &mut self,
        body: Body,
        chunked: bool,
        lc: &LocConf,
    ) -> std::io::Result<u64> {
        let Body::File {
            file,
            offset,
            len,
            cached,
        } = body
        else {
            return Err(std::io::Error::other("an unsized body is a file"));
        };
        let piece = if chunked && !lc.sendfile() {
            lc.output_buffers().1 as u64
        } else {
            len.max(1)
        };
        let mut total = 0u64;
        let mut off = 0u64;
        while off < len {
            let n = piece.min(len - off);
            if chunked {
                let at = self.out.len();
                shoal_http::response::write_chunk_header(&mut self.out, n as usize);
                total += (self.out.len() - at) as u64 + 2;
            }
            match &cached {
                Some(c) => {
                    let at = (offset + off) as usize;
                    self.out.extend_from_slice(&c[at..at + n as usize]);
                }
                None => self.copy_file(&file, offset + off, n, lc).await?,
            }
            if chunked {
                self.out.extend_from_slice(b"\r\n");
            }
            total += n;
            off += n;
        }
        if chunked {
            self.out.extend_from_slice(shoal_http::response::LAST_CHUNK);
            total += shoal_http::response::LAST_CHUNK.len() as u64;
        }
        Ok(total)
    }

    /// Reads a piece of the current answer's file: with `O_DIRECT` for `directio` files, through
    /// the pool with `aio threads` (page-cache hits inline unless `aio_residency_check off`),
    /// else inline.
    async fn read_piece(
        &self,
        file: &Arc<std::fs::File>,
        off: u64,
        want: usize,
        lc: &LocConf,
    ) -> std::io::Result<Vec<u8>> {
        let result = match (&self.direct, &self.pool) {
            (Some((path, align)), pool) => {
                let opened = self.direct_file.borrow().clone();
                let file = match opened {
                    Some(f) => f,
                    None => {
                        // The answer's file was just opened and stat-ed on this worker: its
                        // inode is cached, so this open does not wait for the disk.
                        let f = Arc::new(shoal_io::direct::DirectFile::open(path)?);
                        self.direct_file.replace(Some(f.clone()));
                        f
                    }
                };
                shoal_io::direct::read_direct(&file, off, want, *align, pool.as_deref()).await
            }
            (None, Some(p)) => {
                shoal_io::file::read_range(file, off, want, Some(p), lc.aio_residency_check()).await
            }
            (None, None) => {
                let mut buf = vec![0; want];
                read_at(file, &mut buf, off).map(|n| {
                    buf.truncate(n);
                    buf
                })
            }
        };
        result.map_err(|e| self.pool_error(e))
    }

    /// `output_buffers` (NUMBER, SIZE) when the current answer's file is read rather than sent
    /// with sendfile (`sendfile off`, `directio`); `None` when sendfile sends it.
    fn output_buffers(&self, lc: &LocConf) -> Option<(usize, usize)> {
        (!lc.sendfile() || self.direct.is_some()).then(|| lc.output_buffers())
    }

    /// Sends a file range after what is gathered in `out`: small ranges are read into `out`
    /// whole, all of them with `sendfile off` or `directio` a piece of `output_buffers` at a
    /// time; large ones go by sendfile, with TCP_CORK around the head and the file when
    /// `tcp_nopush on` (nginx's way to send them in full packets).
    async fn copy_file(
        &mut self,
        file: &Arc<std::fs::File>,
        offset: u64,
        len: u64,
        lc: &LocConf,
    ) -> std::io::Result<()> {
        let pool = self.pool.clone();
        // Read, not sent with sendfile: through the output buffers, or whole when the file is
        // small enough to go out with the head.
        let buffered = self.output_buffers(lc);
        if len <= static_files::SMALL_FILE as u64 || buffered.is_some() {
            let (buffers, piece) = buffered.unwrap_or((1, MAX_GATHER));
            let mut off = offset;
            let end = offset + len;
            while off < end {
                let want = ((end - off) as usize).min(piece);
                let n = match (&pool, &self.direct) {
                    (None, None) => {
                        let start = self.out.len();
                        self.out.resize(start + want, 0);
                        let n = read_at(file, &mut self.out[start..], off)?;
                        self.out.truncate(start + n);
                        n
                    }
                    _ => {
                        // After the head, an overflow can only close the connection.
                        let data = self.read_piece(file, off, want, lc).await?;
                        self.out.extend_from_slice(&data);
                        data.len()
                    }
                };
                if n == 0 {
                    // The file shrank under us: the length we promised cannot be kept.
                    return Err(std::io::Error::other("file shrank while being sent"));
                }
                off += n as u64;
                if buffered.is_some() && off < end {
                    // Each piece goes out as it is read, as nginx writes each output buffer
                    // it fills; a client slower than the disk leaves at most `buffers` pieces
                    // unsent before the next read waits for it. (The last piece waits for the
                    // answer's end, so pipelined answers still go out together.)
                    self.flush_to((buffers - 1) * piece).await?;
                } else if self.out.len() >= MAX_GATHER {
                    self.flush().await?;
                }
            }
            return Ok(());
        }
        let cork = lc.tcp_nopush() && matches!(self.stream, Stream::Tcp(_));
        if cork {
            let _ = shoal_io::syscall::set_tcp_cork(self.stream.as_fd(), true);
        }
        self.flush().await?;
        let sent = self
            .send_file_range(file, offset, len, pool.as_ref(), lc)
            .await;
        if cork {
            let _ = shoal_io::syscall::set_tcp_cork(self.stream.as_fd(), false);
        }
        sent
    }

    /// sendfile in chunks of `sendfile_max_chunk`, letting other connections run between
    /// chunks. With a pool (`aio threads`), resident ranges go inline and cold ones as a pool
    /// task (all of them with `aio_residency_check off`). A full socket is waited for with a
    /// fresh poll: a pool thread's writes leave tokio's cached readiness stale.
    async fn send_file_range(
        &mut self,
        file: &Arc<std::fs::File>,
        offset: u64,
        len: u64,
        pool: Option<&Arc<ThreadPool>>,
        lc: &LocConf,
    ) -> std::io::Result<()> {
        let chunk = match lc.sendfile_max_chunk() {
            0 => u64::MAX,
            n => n,
        };
        let mut off = offset;
        let end = offset + len;
        while off < end {
            let count = (end - off).min(chunk);
            let sent = shoal_io::file::sendfile_range(
                self.stream.as_fd(),
                file,
                off,
                count,
                pool.map(|p| &**p),
                lc.aio_residency_check(),
            )
            .await
            .map_err(|e| self.pool_error(e))?;
            off += sent.bytes;
            if sent.socket_full {
                // `send_timeout` bounds the wait for the client to take more, as for a write.
                let fd = self.stream.as_fd();
                let writable = self.stream.try_io_write(|| {
                    if shoal_io::syscall::writable_now(fd)? {
                        Ok(())
                    } else {
                        Err(std::io::ErrorKind::WouldBlock.into())
                    }
                });
                match crate::deadline::within(self.rules.send_timeout, writable).await {
                    Ok(r) => r?,
                    Err(_) => return Err(std::io::ErrorKind::TimedOut.into()),
                }
            } else if sent.bytes == 0 {
                return Err(std::io::Error::other("file shrank while being sent"));
            } else {
                tokio::task::yield_now().await;
            }
        }
        Ok(())
    }

    /// Writes the gathered answers unless more pipelined requests are already buffered and the
    /// batch is still small.
    async fn maybe_flush(&mut self) -> std::io::Result<()> {
        if self.buf.is_empty() || self.out.len() >= MAX_GATHER {
            self.flush().await?;
        }
        Ok(())
    }

    /// Writes what is gathered. `send_timeout` bounds each wait for the client to take more,
    /// not the whole transfer (nginx's rule).
    async fn flush(&mut self) -> std::io::Result<()> {
        self.flush_to(0).await
    }

    /// Writes what the socket takes of what is gathered, then waits for the client only while
    /// more than `keep` bytes of it are left (`send_timeout` bounding each wait, as in
    /// [`Conn::flush`]). After an error nothing is left to send.
    async fn flush_to(&mut self, keep: usize) -> std::io::Result<()> {
        // Most answers fit the socket's buffer: one send, without a future or a timer.
        if self.out.is_empty() || self.flush_now()? {
            return Ok(());
        }
        while self.out.len() > keep {
            let write = self.stream.write(&self.out);
            let err = match crate::deadline::within(self.rules.send_timeout, write).await {
                Ok(Ok(0)) => std::io::ErrorKind::WriteZero.into(),
                Ok(Ok(n)) => {
                    bytes::Buf::advance(&mut self.out, n);
                    continue;
                }
                Ok(Err(e)) => e,
                Err(_) => std::io::ErrorKind::TimedOut.into(),
            };
            self.out.clear();
            return Err(err);
        }
        Ok(())
    }

    /// The end of a connection we chose to close: nginx's lingering close when input may
    /// still come (`lingering_close on`) or always (`always`): stop writing, then read and
    /// drop what arrives for up to `lingering_time`, each wait bounded by `lingering_timeout`,
    /// so the client reads our answer instead of a reset.
    async fn close(&mut self) {
        use super::directives::Lingering;
        let linger = match self.rules.lingering {
            Lingering::Off => false,
            Lingering::Always => true,
            Lingering::On => self.unread_input || !self.buf.is_empty(),
        };
        if !linger {
            return;
        }
        if !self.unread_body {
            if let Stream::Tcp(s) = &self.stream {
                let _ = socket2::SockRef::from(s).shutdown(std::net::Shutdown::Write);
            }
        }
        let deadline = Instant::now() + self.rules.lingering_time;
        let mut sink = BytesMut::with_capacity(READ_CHUNK);
        loop {
            let wait = self
                .rules
                .lingering_timeout
                .min(deadline.saturating_duration_since(Instant::now()));
            if wait.is_zero() {
                return;
            }
            sink.clear();
            match tokio::time::timeout(wait, self.stream.read_buf(&mut sink)).await {
                Ok(Ok(n)) if n > 0 => continue,
                _ => return,
            }
        }
    }

    /// `reset_timedout_connection on`: a timed-out connection is closed with a reset
    /// (SO_LINGER 0), freeing its memory at once.
    fn reset_if_asked(&self) {
        if self.rules.reset_timedout {
            if let Stream::Tcp(s) = &self.stream {
                let _ = socket2::SockRef::from(s).set_linger(Some(Duration::ZERO));
            }
        }
    }
}

/// The gzip header filter: decides, and adjusts the headers of a compressed answer.
/// Returns the compression level to use.
fn gzip_filter(reply: &mut Reply, req: &Request, lc: &LocConf) -> Option<u32> {
    if !lc.gzip.enabled() {
        return None;
    }
    let seen: &Reply = reply;
    // A static file's time is not a Last-Modified header yet when nginx's gzip filter looks
    // (it is written by the header filter, later); only a proxied one would be.
    let header = |name: &str| match name {
        "last-modified" if !seen.proxied => None,
        _ => seen.header(name),
    };
    let facts = super::gzip::ResponseFacts {
        status: seen.status,
        content_type: seen.content_type.as_deref(),
        content_length: seen.body.length(),
        already_encoded: seen
            .header("content-encoding")
            .is_some_and(|v| !v.is_empty()),
        head_only: req.method() == "HEAD",
        header: &header,
    };
    let (compress, vary) = super::gzip::decide(&lc.gzip, req, &facts);
    if vary {
        reply.extra.push(("Vary".into(), "Accept-Encoding".into()));
    }
    if !compress {
        return None;
    }
    reply.headers.retain(|(n, _)| *n != "Accept-Ranges");
    if reply.proxied {
        reply
            .extra
            .retain(|(n, _)| !n.eq_ignore_ascii_case("accept-ranges"));
    }
    for (n, v) in reply.headers.iter_mut() {
        if *n == "ETag" && v.starts_with('"') {
            *v = format!("W/{v}").into();
        }
    }
    if reply.proxied {
        for (n, v) in reply.extra.iter_mut() {
            if n.eq_ignore_ascii_case("etag") && v.starts_with('"') {
                *v = format!("W/{v}").into();
            }
        }
    }
    reply.headers.push(("Content-Encoding", "gzip".into()));
    Some(lc.gzip.level())
}

/// The request line at the start of `head` (without CR LF), for the access log; with
/// `complete`, only a line that ended.
/// Whether a refused request's bytes start with the method `HEAD` (after the empty lines nginx
/// skips): nginx knows the method once the space after it is read, and leaves the page out.
fn is_head_request(bytes: &[u8]) -> bool {
    let start = bytes
        .iter()
        .position(|&b| b != b'\r' && b != b'\n')
        .unwrap_or(bytes.len());
    bytes[start..].starts_with(b"HEAD ")
}

fn request_line(head: &[u8], complete: bool) -> Option<String> {
    let end = match memchr::memchr(b'\n', head) {
        Some(e) => e,
        None if complete || head.is_empty() => return None,
        None => head.len(),
    };
    let line = head[..end.min(8192)]
        .strip_suffix(b"\r")
        .unwrap_or(&head[..end.min(8192)]);
    Some(shoal_http::lossy(line).into_owned())
}

/// Appends body pieces, as one chunk when `chunked` (nothing for no bytes: an empty chunk
/// would end the body). What one read brought goes as one chunk, however the upstream chunked
/// it, as nginx re-chunks its buffers.
fn frame_pieces(out: &mut BytesMut, pieces: &mut Vec<bytes::Bytes>, chunked: bool) {
    let len: usize = pieces.iter().map(|p| p.len()).sum();
    let framed = chunked && len > 0;
    if framed {
        shoal_http::response::write_chunk_header(out, len);
    }
    for p in pieces.drain(..) {
        out.extend_from_slice(&p);
    }
    if framed {
        out.extend_from_slice(shoal_http::response::CHUNK_END);
    }
}

/// An unlinked temporary file in `dir` (`O_TMPFILE`): a request body, or an upstream answer
/// held for a slow client. Nothing is left behind whatever happens to the process.
fn unlinked_temp_file(dir: &std::path::Path) -> std::io::Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .custom_flags(libc::O_TMPFILE)
        .mode(0o600)
        .open(dir)
}

/// What a body decoder's error means for the request: 413 for a chunk over
/// `client_max_body_size`, else a broken framing (400).
fn body_error(d: &shoal_http::BodyDecoder, e: shoal_http::Error) -> Discard {
    match (e.kind(), d.oversize()) {
        (shoal_http::ErrorKind::PayloadTooLarge, Some((before, size))) => {
            Discard::TooLarge(before, size)
        }
        _ => Discard::Invalid,
    }
}

fn is_overflow(e: &std::io::Error) -> bool {
    shoal_io::pool::Overflow::from_io(e).is_some()
}

fn read_at(file: &std::fs::File, buf: &mut [u8], off: u64) -> std::io::Result<usize> {
    use std::os::unix::fs::FileExt;
    file.read_at(buf, off)
}

fn tokens(t: ServerTokens) -> shoal_http::ServerTokens {
    match t {
        ServerTokens::On => shoal_http::ServerTokens::On,
        ServerTokens::Off => shoal_http::ServerTokens::Off,
        ServerTokens::Build => shoal_http::ServerTokens::Build,
    }
}
