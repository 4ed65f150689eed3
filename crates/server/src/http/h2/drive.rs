//! The connection's task: owns the socket, feeds the codec what it reads, starts a stream for
//! each request, and writes the codec's output (everything queued, one write per poll).
//!
//! The read buffer is the worker's spare while the connection has no stream and no partial
//! frame: an idle connection holds no buffer (and the codec frees its own or lends them to the
//! worker's spares, `Inner::shrink`). One idle
//! for a whole sweep interval parks ([`Kept`], `h1/park.rs`): its task ends until it is needed.
//!
//! What the codec refuses is logged here, at `info`, as nginx logs it: a malformed request
//! with the stream's context, a connection error with the connection's.

use std::cell::{Cell, RefCell};
use std::future::Future;
use std::io;
use std::io::IoSlice;
use std::rc::Rc;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use shoal_http2::frame::{Reason, PREFACE};
use shoal_http2::server::{Config, Incoming, Malformed, Server};
use tokio::io::ReadBuf;
use tokio::sync::Notify;

use super::io::{flush, read, write};
use super::wire::{Core, Inner, RecvStream, SendResponse};
use super::{conn_server, stream, Shared, GOAWAY_LINGER};
use crate::cycle::Generation;
use crate::http::transport::{ConnInfo, Transport};
use crate::log::Level;
use crate::worker::{ConnGuard, IdleSlot};

/// The streams one read opened, started once the codec is let go (no body handle: the
/// HEADERS ended the stream).
type Fresh = Vec<(
    shoal_http2::server::Request,
    Option<RecvStream>,
    SendResponse,
)>;

thread_local! {
    /// Read buffers of connections gone idle.
    static SPARE_READ: crate::spare::Spares<Vec<u8>> = const { crate::spare::Spares::new(16) };
    /// The lists of new streams of connections gone idle (a connection between two bursts of
    /// requests holds none, and the next burst does not grow one from nothing).
    static SPARE_FRESH: crate::spare::Spares<Fresh> = const { crate::spare::Spares::new(16) };
    /// The codec's output buffers of connections gone idle, for the same reason (a burst of
    /// answers grew each from nothing, a realloc at each doubling).
    static SPARE_OUT: crate::spare::Spares<Vec<u8>> = const { crate::spare::Spares::new(4) };
}

/// The largest output buffer kept for another connection (the codec frees larger ones).
const SPARE_OUT_MAX: usize = 16 * 1024;

/// A read buffer's size: a whole frame of the default size and more.
const READ_BUF: usize = 32 * 1024;

/// What a poll of the socket came to (or the idle wait: park).
enum Step {
    Read,
    Eof,
    Failed(io::Error),
    Park,
}

/// What a connection keeps from one task to the next, all but its socket: when it has waited
/// a whole sweep interval with no stream, its task ends and this waits in the worker's parked
/// set (`h1/park.rs`) with the socket, out of the reactor; input, a wake of the idle list or
/// its `keepalive_timeout` gives it a task again ([`resume`]).
pub(crate) struct Kept {
    core: Core,
    shared: Rc<Shared>,
    scope: Option<Arc<crate::log::ErrorLog>>,
    pub(crate) idle_slot: IdleSlot,
    guard: ConnGuard,
    state: crate::status::ConnState,
    recv_max: usize,
    header_timeout: Duration,
    keepalive: Duration,
    keepalive_requests: u64,
    started: Instant,
}

impl Kept {
    pub(crate) fn number(&self) -> u64 {
        self.shared.info.number
    }

    /// The worker's idle list.
    pub(crate) fn wake_idle(&self) -> Rc<crate::worker::IdleWakers> {
        self.guard.0.wake_idle.clone()
    }
}

/// The socket's side of the connection's task.
struct Wire {
    t: Transport,
    buf: Vec<u8>,
    /// The most one read takes (`http2_recv_buffer_size` less nginx's state buffers).
    recv_max: usize,
    /// A TLS flush waits for the socket.
    unflushed: bool,
}

impl Wire {
    /// Writes what the codec queued, then reads once the socket has bytes. `idle`: no stream
    /// is open, so once the output is out the codec's buffers and the read buffer go (the read
    /// buffer comes back when the socket has bytes).
    fn poll(&mut self, core: &Core, idle: bool, cx: &mut Context<'_>) -> Poll<Step> {
        let mut me = core.borrow_mut();
        match &me.conn_waker {
            Some(w) if w.will_wake(cx.waker()) => {}
            _ => me.conn_waker = Some(cx.waker().clone()),
        }
        if let Err(e) = self.poll_write(&mut me, cx) {
            return Poll::Ready(Step::Failed(e));
        }
        if idle && self.buf.is_empty() && me.server.conn().pending_output().is_empty() {
            if let Some(out) = me.server.conn_mut().take_output_buffer() {
                if out.capacity() <= SPARE_OUT_MAX {
                    SPARE_OUT.with(|s| s.give(out, Vec::clear));
                }
            }
            me.shrink();
            if self.buf.capacity() > 0 {
                let b = std::mem::take(&mut self.buf);
                SPARE_READ.with(|s| s.give(b, Vec::clear));
            }
        }
        drop(me);
        if self.buf.capacity() == 0 {
            if let Err(e) = std::task::ready!(self.t.poll_read_ready(cx)) {
                return Poll::Ready(Step::Failed(e));
            }
            self.buf = SPARE_READ
                .with(|s| s.take())
                .unwrap_or_else(|| Vec::with_capacity(READ_BUF));
        }
        if self.buf.capacity() - self.buf.len() < 4096 {
            self.buf.reserve(READ_BUF);
        }
        let room = (self.buf.capacity() - self.buf.len()).min(self.recv_max);
        let len = self.buf.len();
        let spare = &mut self.buf.spare_capacity_mut()[..room];
        let mut rb = ReadBuf::uninit(spare);
        match read(&mut self.t, cx, &mut rb) {
            Poll::Pending => {
                // Readable, yet nothing to read (over TLS, a record with no application data,
                // or part of one): an idle connection waits without the buffer again.
                if idle && self.buf.is_empty() {
                    let b = std::mem::take(&mut self.buf);
                    SPARE_READ.with(|s| s.give(b, Vec::clear));
                }
                Poll::Pending
            }
            Poll::Ready(Err(e)) => Poll::Ready(Step::Failed(e)),
            Poll::Ready(Ok(())) => {
                let n = rb.filled().len();
                // SAFETY: the read initialized these `n` bytes after the buffer's end.
                unsafe { self.buf.set_len(len + n) };
                Poll::Ready(if n == 0 { Step::Eof } else { Step::Read })
            }
        }
    }

    fn poll_write(&mut self, me: &mut Inner, cx: &mut Context<'_>) -> io::Result<()> {
        let mut wrote = false;
        loop {
            let out = me.server.conn().pending_output();
            if out.is_empty() {
                break;
            }
            match write(&mut self.t, cx, &[IoSlice::new(out)]) {
                Poll::Ready(Ok(0)) => return Err(io::ErrorKind::WriteZero.into()),
                Poll::Ready(Ok(n)) => {
                    me.server.conn_mut().advance(n);
                    wrote = true;
                }
                Poll::Ready(Err(e)) => return Err(e),
                Poll::Pending => break,
            }
        }
        if wrote || self.unflushed {
            match flush(&mut self.t, cx) {
                Poll::Ready(Ok(())) => self.unflushed = false,
                Poll::Ready(Err(e)) => return Err(e),
                Poll::Pending => self.unflushed = true,
            }
        }
        if wrote && me.senders_waiting() {
            me.window_opened(0);
        }
        Ok(())
    }

    fn output_done(&self, core: &Core) -> bool {
        !self.unflushed && core.borrow().server.conn().pending_output().is_empty()
    }

    /// Sends what is queued (at most a second), closes the writing side, and reads what the
    /// client still sends until it closes (at most [`GOAWAY_LINGER`]), so that it reads the
    /// last frames rather than a reset.
    async fn close(&mut self, core: &Core, linger: bool) {
        let flushed = std::future::poll_fn(|cx| {
            let mut me = core.borrow_mut();
            match self.poll_write(&mut me, cx) {
                Err(_) => Poll::Ready(false),
                Ok(()) if me.server.conn().pending_output().is_empty() && !self.unflushed => {
                    Poll::Ready(true)
                }
                Ok(()) => Poll::Pending,
            }
        });
        if !matches!(
            tokio::time::timeout(Duration::from_secs(1), flushed).await,
            Ok(true)
        ) {
            return;
        }
        let t = &mut self.t;
        let shut = std::future::poll_fn(|cx| {
            use tokio::io::AsyncWrite;
            match t {
                Transport::Tcp(s) => std::pin::Pin::new(s).poll_shutdown(cx),
                Transport::Unix(s) => std::pin::Pin::new(s).poll_shutdown(cx),
                Transport::Tls(t) => {
                    t.queue_close_notify();
                    t.poll_flush(cx)
                }
            }
        });
        if !matches!(
            tokio::time::timeout(Duration::from_secs(1), shut).await,
            Ok(Ok(()))
        ) {
            return;
        }
        if !linger {
            return;
        }
        let mut sink = [0u8; 4096];
        let drain = std::future::poll_fn(|cx| loop {
            let mut rb = ReadBuf::new(&mut sink);
            match read(t, cx, &mut rb) {
                Poll::Ready(Ok(())) if !rb.filled().is_empty() => continue,
                Poll::Ready(_) => return Poll::Ready(()),
                Poll::Pending => return Poll::Pending,
            }
        });
        let _ = tokio::time::timeout(GOAWAY_LINGER, drain).await;
    }
}

/// The most output a connection's answers queue before they wait for the socket.
fn out_max(srv: &crate::http::ServerConf) -> usize {
    srv.loc.http2.chunk_size().max(16 * 1024) * 4
}

/// The codec's settings from the connection's server.
fn config(srv: &crate::http::ServerConf) -> Config {
    let h2c = &srv.loc.http2;
    let limits = srv.srv.limits();
    let (num, size) = (
        limits.large_client_header_buffers.num,
        limits.large_client_header_buffers.size,
    );
    let streams = h2c.max_concurrent_streams();
    let preread = h2c.body_preread_size();
    let mut cfg = Config::default().header_buffers(num, size);
    // A field is held to the list only here: the request's parser holds each to `size` as
    // an HTTP/1 head's (nginx's 400 and 414, with their log lines).
    cfg.bounds.field = cfg.bounds.list;
    // `server`, `date`, `content-type`, a page's `content-length`, `last-modified`, `etag`...
    // repeat from answer to answer: indexed once in the client's table, they are a byte each
    // after that rather than encoded again (as h2o's). Room for an answer's usual fields
    // twice over, so that a new `date` each second does not push the others out.
    cfg.encoder_table = 1024;
    cfg.frame.max_concurrent_streams = streams;
    cfg.frame.initial_window_size = preread;
    // The connection's window: every stream's preread at once (nginx opens it wide).
    cfg.frame.connection_window =
        (preread as u64 * streams.max(1) as u64).clamp(65_535, (1 << 31) - 1) as u32;
    // A client that asks for answers (PING, SETTINGS) and does not read is held to this on
    // top of what the answers may queue.
    cfg.frame.max_output += out_max(srv);
    cfg
}

/// Serves an HTTP/2 connection until it closes.
pub async fn serve(
    transport: Transport,
    info: ConnInfo,
    generation: Arc<Generation>,
    guard: ConnGuard,
    idle_slot: IdleSlot,
) {
    let Some(srv) = conn_server(&generation, &info) else {
        return;
    };
    // The connection's lines go to its server's error log; each stream's to its location's
    // (nginx gives each stream a connection of its own, its log set by the location found).
    let scope = srv.loc.error_log.clone();
    crate::log::set_scope(scope.as_ref());
    let h2c = &srv.loc.http2;
    // nginx's `tcp_nodelay` on an HTTP/2 connection: its frames go out as they are made (a
    // gRPC answer's HEADERS, DATA and trailers are small, and a client waits for each).
    if srv.loc.tcp_nodelay() {
        transport.set_nodelay();
    }
    let core: Core = Rc::new(RefCell::new(Inner::new(
        Server::new(config(srv)),
        out_max(srv),
    )));
    let kept = Kept {
        core,
        recv_max: h2c.recv_buffer_size().saturating_sub(32).max(1),
        header_timeout: srv.srv.client_header_timeout(),
        keepalive: srv.loc.keepalive_timeout().0,
        keepalive_requests: srv.loc.keepalive_requests(),
        // Its place in `stub_status`: waiting while no stream is answered.
        state: crate::status::ConnState::accepted(),
        shared: Rc::new(Shared {
            info,
            generation: RefCell::new(generation),
            route: RefCell::new(None),
            worker: guard.0.clone(),
            requests: Cell::new(0),
            active: Cell::new(0),
            last_done: Cell::new(Instant::now()),
            done: Notify::new(),
        }),
        scope,
        idle_slot,
        guard,
        started: Instant::now(),
    };
    let epoch = kept.guard.0.wake_idle.epoch();
    run(transport, kept, false, epoch).await;
}

/// A parked connection's task: its loop again, from the idle wait it left in the epoch
/// `since` of the worker's idle list (a wake since then is seen at once).
pub(crate) async fn resume(t: Transport, kept: Kept, since: u64) {
    run(t, kept, true, since).await;
}

/// The connection's loop. `resumed`: it parked (its handshake and its codec's park are done).
async fn run(t: Transport, kept: Kept, resumed: bool, mut epoch: u64) {
    let Kept {
        core,
        shared,
        scope,
        idle_slot,
        guard,
        mut state,
        recv_max,
        header_timeout,
        keepalive,
        keepalive_requests,
        started,
    } = kept;
    let mut wire = Wire {
        t,
        buf: Vec::new(),
        recv_max,
        unflushed: false,
    };
    let number = shared.info.number;
    let worker = guard.0.clone();
    // Bytes of frames taken so far: the preface and the client's SETTINGS make the handshake.
    let mut handshaken = resumed;
    let mut going_away = false;
    // The codec gave up what an idle connection can rebuild (see `Inner::park`).
    let mut parked = resumed;
    let mut went_away = Instant::now();
    if worker.stopping.get() {
        core.borrow_mut().server.conn_mut().goaway(Reason::NO_ERROR);
        going_away = true;
    }
    let mut timer = std::pin::pin!(tokio::time::sleep_until(Instant::now().into()));
    let mut fresh: Fresh = Vec::new();
    loop {
        let active = shared.active.get();
        state.set(if active > 0 {
            crate::status::State::Streams
        } else {
            crate::status::State::Waiting
        });
        let idle = active == 0 && !going_away && handshaken;
        // A wait that lasts a sweep interval parks the codec (`IdleWakers::sweep`), once.
        idle_slot.set_idle(idle, idle && !parked);
        if active == 0 && fresh.capacity() > 0 {
            SPARE_FRESH.with(|s| s.give(std::mem::take(&mut fresh), Vec::clear));
        }
        if going_away && active == 0 && wire.output_done(&core) {
            Box::pin(wire.close(&core, true)).await;
            break;
        }
        let (armed, deadline) = if !handshaken {
            (true, started + header_timeout)
        } else if going_away {
            (
                active == 0,
                shared.last_done.get().max(went_away) + GOAWAY_LINGER,
            )
        } else {
            (idle, shared.last_done.get() + keepalive)
        };
        if armed && timer.deadline() != tokio::time::Instant::from_std(deadline) {
            timer.as_mut().reset(deadline.into());
        }
        let step = tokio::select! {
            s = std::future::poll_fn(|cx| wire.poll(&core, active == 0, cx)) => s,
            _ = shared.done.notified() => continue,
            _ = idle_slot.wait(epoch), if !going_away => {
                if idle_slot.take_park() {
                    core.borrow_mut().park();
                    crate::spare::shed();
                    parked = true;
                    Step::Park
                } else {
                epoch = worker.wake_idle.epoch();
                if idle_slot.reused() {
                    // Chosen to make room (nginx finalizes such a connection with a GOAWAY
                    // NO_ERROR at once): the GOAWAY goes, and the connection ends.
                    core.borrow_mut().server.conn_mut().goaway(Reason::NO_ERROR);
                    Box::pin(wire.close(&core, false)).await;
                    break;
                }
                if worker.stopping.get() || shared.generation().is_none() {
                    core.borrow_mut().server.conn_mut().goaway(Reason::NO_ERROR);
                    (going_away, went_away) = (true, Instant::now());
                }
                continue;
                }
            }
            _ = timer.as_mut(), if armed => {
                if !handshaken {
                    let gen = shared.generation.borrow().clone();
                    let server = conn_server(&gen, &shared.info).map_or("", |s| s.name());
                    crate::conn_log!(
                        Level::Info,
                        number,
                        "client timed out (110: Connection timed out) while reading client request headers, client: {}, server: {server}",
                        shared.info.client()
                    );
                    break;
                }
                if going_away {
                    break;
                }
                core.borrow_mut().server.conn_mut().goaway(Reason::NO_ERROR);
                (going_away, went_away) = (true, Instant::now());
                continue;
            }
        };
        match step {
            Step::Read => {}
            Step::Park => {
                // With nothing in flight, the task ends: the connection waits in the
                // worker's parked set without it (nor its socket's registration, nor its
                // timer), and comes back here from the same wait.
                if active == 0 && wire.buf.is_empty() && wire.output_done(&core) {
                    core.borrow_mut().conn_waker = None;
                    let deadline = shared.last_done.get() + keepalive;
                    let kept = Kept {
                        core,
                        shared,
                        scope,
                        idle_slot,
                        guard,
                        state,
                        recv_max: wire.recv_max,
                        header_timeout,
                        keepalive,
                        keepalive_requests,
                        started,
                    };
                    crate::http::h1::park_h2(wire.t, kept, deadline, epoch);
                    return;
                }
                continue;
            }
            Step::Eof => break,
            Step::Failed(e) => {
                crate::conn_log!(
                    Level::Info,
                    number,
                    "{e} while processing HTTP/2 connection, client: {}, server: {}",
                    shared.info.client(),
                    shared.info.socket
                );
                break;
            }
        }
        // The frames read: events to the streams, new streams started.
        let failed = {
            let mut me = core.borrow_mut();
            me.driving = true;
            me.ready_lists();
            if me.server.conn().output_capacity() == 0 {
                if let Some(out) = SPARE_OUT.with(|s| s.take()) {
                    me.server.conn_mut().give_output_buffer(out);
                }
            }
            let (used, mut failed) = match me.server.recv(&wire.buf) {
                Ok(n) => (n, None),
                Err(e) => (0, Some(e)),
            };
            if used > PREFACE.len() {
                handshaken = true;
            }
            while let Some(inc) = me.server.poll(&wire.buf) {
                match inc {
                    Incoming::Head {
                        stream,
                        head: request,
                        end_stream,
                    } => {
                        // (Its buffer becomes the request's: see `stream.rs`.)
                        let (recv, respond) = me.open(&core, stream, end_stream);
                        if fresh.capacity() == 0 {
                            fresh = SPARE_FRESH.with(|s| s.take()).unwrap_or_default();
                        }
                        fresh.push((request, recv, respond));
                    }
                    Incoming::Data {
                        stream,
                        data,
                        end_stream,
                    } => me.data(stream, &wire.buf[data], end_stream),
                    Incoming::Trailers { stream, fields } => {
                        let mut map = http::HeaderMap::new();
                        for (n, v) in fields.iter() {
                            if let (Ok(n), Ok(v)) = (
                                http::HeaderName::from_bytes(n),
                                http::HeaderValue::from_bytes(v),
                            ) {
                                map.append(n, v);
                            }
                        }
                        me.server.recycle(fields);
                        me.trailers(stream, map);
                    }
                    Incoming::TooLarge { stream, .. } => {
                        // The header list past `large_client_header_buffers`: 431.
                        me.server.refuse(stream, 431);
                    }
                    Incoming::Malformed { stream, why } => {
                        me.refused(stream);
                        log_malformed(&shared, &why, me.server.refused_host());
                    }
                    Incoming::Reset {
                        stream,
                        code,
                        by_peer,
                    } => {
                        if !by_peer {
                            if let Some((len, window)) = me.server.conn().flow_violation(stream) {
                                // nginx's line, with the connection's context.
                                crate::conn_log!(
                                    Level::Info,
                                    number,
                                    "client violated flow control for stream {stream}: received DATA frame length {len}, available window {window} while processing HTTP/2 connection, client: {}, server: {}",
                                    shared.info.client(),
                                    shared.info.socket
                                );
                            }
                        }
                        me.reset(stream, code)
                    }
                    Incoming::GoAway { .. } => {
                        if !going_away {
                            (going_away, went_away) = (true, Instant::now());
                        }
                    }
                    Incoming::WindowOpened { stream } => me.window_opened(stream),
                    Incoming::SettingsChanged => me.window_opened(0),
                    Incoming::Closed(e) => failed = Some(e),
                }
            }
            if failed.is_none() {
                wire.buf.drain(..used);
            }
            failed
        };
        parked &= fresh.is_empty();
        for (head, recv, respond) in fresh.drain(..) {
            let n = shared.requests.get() + 1;
            shared.requests.set(n);
            shared.active.set(shared.active.get() + 1);
            state.set(crate::status::State::Streams);
            start_stream(&shared, &scope, head, recv, respond);
            if n >= keepalive_requests && !going_away {
                core.borrow_mut().server.conn_mut().goaway(Reason::NO_ERROR);
                (going_away, went_away) = (true, Instant::now());
            }
        }
        core.borrow_mut().driving = false;
        if let Some(e) = failed {
            // nginx's line: the listening address as the server (none is chosen for the
            // connection as a whole).
            crate::conn_log!(
                Level::Info,
                number,
                "{e} while processing HTTP/2 connection, client: {}, server: {}",
                shared.info.client(),
                shared.info.socket
            );
            core.borrow_mut().close();
            Box::pin(wire.close(&core, true)).await;
            break;
        }
    }
    core.borrow_mut().close();
    // The streams end with the connection's end; the guard counts it until then.
    while shared.active.get() > 0 {
        let done = shared.done.notified();
        if shared.active.get() == 0 {
            break;
        }
        done.await;
    }
    drop(wire);
    drop(guard);
}

/// nginx's line for a malformed request, at `info`: what was wrong, and the stream's context
/// (its server, and the host when the block gave one before it was refused, as nginx's
/// `:authority` is a `Host` from then on; the request's line is not known, so none is given).
fn log_malformed(shared: &Shared, why: &Malformed, host: Option<&[u8]>) {
    if !crate::log::enabled(Level::Info) {
        return;
    }
    let gen = shared.generation.borrow().clone();
    let server = conn_server(&gen, &shared.info).map_or("", |s| s.name());
    let context = if why.in_head() {
        " while reading client request headers"
    } else {
        ""
    };
    let host = match host {
        Some(h) => format!(", host: \"{}\"", shoal_http::log_text(h)),
        None => String::new(),
    };
    crate::conn_log!(
        Level::Info,
        shared.info.number,
        "{why}{context}, client: {}, server: {server}{host}",
        shared.info.client()
    );
}

/// Runs a stream at once on the connection's task: an answer ready now (a file in the page
/// cache) costs no task and no wake-up, and its frames go out with this poll's. One that waits
/// goes on as a task of its own.
fn start_stream(
    shared: &Rc<Shared>,
    scope: &Option<Arc<crate::log::ErrorLog>>,
    head: shoal_http2::server::Request,
    recv: Option<RecvStream>,
    respond: SendResponse,
) {
    let answer = stream::run(shared.clone(), head, recv, respond);
    let mut answer = Box::pin(crate::log::scoped_in(scope.clone(), answer));
    let waker = std::task::Waker::noop();
    let mut cx = Context::from_waker(waker);
    // (Polled once with a waker that does nothing, then handed to a task whose first poll
    // puts its own.)
    if answer.as_mut().poll(&mut cx).is_pending() {
        tokio::task::spawn_local(answer);
    }
}
