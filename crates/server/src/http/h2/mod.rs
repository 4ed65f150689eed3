//! One HTTP/2 connection on a worker (nginx's `ngx_http_v2_module`), on the `h2` crate's
//! server side: frames, HPACK, flow control and the protocol's checks are the crate's; this
//! room is the connection's life (settings from the configuration, keep-alive, graceful stop)
//! and, in `stream.rs`, each stream's request, which walks the same phases, modules and
//! filters as an HTTP/1 request and writes its answer as DATA frames (`sink.rs`).
//!
//! A connection comes here when TLS's ALPN chose `h2`, or on a plain address with `http2`
//! on when its first bytes are the HTTP/2 preface (h2c with prior knowledge; anything else is
//! HTTP/1, as nginx 1.25.1+ tells them apart). Its settings are its default server's (the one
//! SNI chose, over TLS): `http2_max_concurrent_streams`, `http2_body_preread_size` (each
//! stream's window), `large_client_header_buffers` (the header list's bound). It ends, with a
//! GOAWAY and the streams in flight finishing, after `keepalive_timeout` with no stream open,
//! after `keepalive_requests` streams, on a graceful stop or a reload that removed its socket
//! (`worker_shutdown_timeout` bounds the wait, as the worker's).
//!
//! Runs on the worker; never blocks. Each stream is a task of its own on the worker.

pub mod conf;
pub(crate) mod io;
pub(crate) mod sink;
mod stream;

use std::cell::{Cell, RefCell};
use std::future::Future;
use std::rc::Rc;
use std::sync::Arc;
use std::task::Poll;
use std::time::{Duration, Instant};

use tokio::sync::Notify;

use super::transport::{ConnInfo, Transport};
use super::ServerConf;
use crate::cycle::Generation;
use crate::listen::SocketKey;
use crate::log::Level;
use crate::worker::{ConnGuard, IdleSlot};

/// The client connection preface (RFC 9113, 3.4).
pub const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// How long a connection that sent GOAWAY stays once its last stream ended.
const GOAWAY_LINGER: Duration = Duration::from_secs(1);

/// What a connection's streams share.
pub(crate) struct Shared {
    pub info: ConnInfo,
    /// The configuration the connection's next stream takes (the newest while its socket is
    /// in it).
    generation: RefCell<Arc<Generation>>,
    worker: Rc<crate::worker::Worker>,
    /// Streams opened so far (`$connection_requests`, `keepalive_requests`).
    requests: Cell<u64>,
    /// Streams being answered.
    active: Cell<usize>,
    /// When the last stream ended (the idle timer's start).
    last_done: Cell<Instant>,
    /// Woken when a stream ends.
    done: Notify,
}

impl Shared {
    /// The generation a new stream takes: the worker's newest when the socket is still in it.
    /// `None`: a reload removed the socket (the connection is going away).
    fn generation(&self) -> Option<Arc<Generation>> {
        let current = self.worker.current.borrow().clone();
        if current.id == self.generation.borrow().id {
            return Some(current);
        }
        if current
            .sockets
            .iter()
            .any(|s| s.key.addr == self.info.socket)
        {
            *self.generation.borrow_mut() = current.clone();
            return Some(current);
        }
        None
    }
}

/// Whether a plain connection to `key` may speak HTTP/2 (`listen ... http2`, or `http2 on` in
/// its default server).
pub fn plain_allowed(generation: &Generation, key: &SocketKey, info: &ConnInfo) -> bool {
    generation
        .servers_for(&key.addr, info.local)
        .is_some_and(|r| r.http2 || generation.default_server(r).loc.http2.enabled())
}

/// Whether the first bytes of a plain connection are the HTTP/2 preface, looked at without
/// taking them (at most `timeout` for them to come). Anything else is HTTP/1's.
pub async fn starts_with_preface(stream: &Transport, timeout: Duration) -> bool {
    let deadline = Instant::now() + timeout;
    let mut buf = [0u8; PREFACE.len()];
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if crate::deadline::within(left, stream.readable())
            .await
            .is_err()
        {
            return false;
        }
        match stream.try_peek(&mut buf) {
            Ok(0) => return false,
            Ok(n) if buf[..n] != PREFACE[..n] => return false,
            Ok(n) if n == PREFACE.len() => return true,
            // A preface cut in two packets: its rest is awaited (the readiness stays set
            // while bytes wait, so a short sleep rather than a spin).
            Ok(_) => tokio::time::sleep(Duration::from_millis(5)).await,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
            Err(_) => return false,
        }
    }
}

/// The server SNI named (`None`: no SNI, or no `server_name` matched it).
fn sni_server<'g>(gen: &'g Generation, info: &ConnInfo) -> Option<&'g ServerConf> {
    let name = info.tls.as_ref()?.server_name.as_deref()?;
    let route = gen.servers_for(&info.socket, info.local)?;
    let servers = &gen.config.http.as_ref()?.servers;
    let name = name.trim_end_matches('.').to_ascii_lowercase();
    crate::cycle::match_name(servers, route, &name).map(|(i, _)| &servers[i])
}

/// The server whose settings the connection takes: the one SNI named, else the default.
fn conn_server<'g>(gen: &'g Generation, info: &ConnInfo) -> Option<&'g ServerConf> {
    let route = gen.servers_for(&info.socket, info.local)?;
    Some(sni_server(gen, info).unwrap_or_else(|| gen.default_server(route)))
}

/// Serves an HTTP/2 connection until it closes.
pub async fn serve(
    stream: Transport,
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
    let limits = srv.srv.limits();
    let header_list =
        limits.large_client_header_buffers.num * limits.large_client_header_buffers.size;
    let streams = h2c.max_concurrent_streams();
    let preread = h2c.body_preread_size();
    let mut builder = h2::server::Builder::new();
    builder
        .max_concurrent_streams(streams)
        .initial_window_size(preread)
        // The connection's window: every stream's preread at once (nginx opens it wide).
        .initial_connection_window_size(
            (preread as u64 * streams.max(1) as u64).clamp(65_535, (1 << 31) - 1) as u32,
        )
        .max_header_list_size(header_list.min(u32::MAX as usize) as u32)
        .max_send_buffer_size(h2c.chunk_size().max(16 * 1024) * 4)
        // Rapid reset (CVE-2023-44487): streams the client resets before they are answered
        // count against this; past it the connection ends with ENHANCE_YOUR_CALM.
        .max_pending_accept_reset_streams(streams as usize)
        .max_local_error_reset_streams(Some(streams as usize * 2));
    // nginx's `tcp_nodelay` on an HTTP/2 connection: its frames go out as they are made (a
    // gRPC answer's HEADERS, DATA and trailers are small, and a client waits for each).
    if srv.loc.tcp_nodelay() {
        stream.set_nodelay();
    }
    let recv_buffer = h2c.recv_buffer_size();
    let header_timeout = srv.srv.client_header_timeout();
    let keepalive = srv.loc.keepalive_timeout().0;
    let keepalive_requests = srv.loc.keepalive_requests();
    let number = info.number;
    let client = info.client();
    let server_name = srv.name().to_string();
    let io = io::Io::new(stream, recv_buffer);
    let out = io.handle();
    let handshake = async {
        let mut handshake = std::pin::pin!(builder.handshake::<_, bytes::Bytes>(io));
        std::future::poll_fn(|cx| {
            let r = handshake.as_mut().poll(cx);
            // (The server's SETTINGS go out with the handshake.)
            let _ = out.send(cx);
            r
        })
        .await
    };
    let mut conn = match crate::deadline::within(header_timeout, handshake).await {
        Ok(Ok(c)) => c,
        Ok(Err(e)) => {
            crate::conn_log!(
                Level::Info,
                number,
                "client sent invalid HTTP/2 connection preface ({e}), client: {client}, server: {server_name}"
            );
            return;
        }
        Err(_) => {
            crate::conn_log!(
                Level::Info,
                number,
                "client timed out (110: Connection timed out) while reading client request headers, client: {client}, server: {server_name}"
            );
            return;
        }
    };
    let worker = guard.0.clone();
    // Its place in `stub_status`: waiting while no stream is answered.
    let mut state = crate::status::ConnState::accepted();
    let shared = Rc::new(Shared {
        info,
        generation: RefCell::new(generation),
        worker: worker.clone(),
        requests: Cell::new(0),
        active: Cell::new(0),
        last_done: Cell::new(Instant::now()),
        done: Notify::new(),
    });
    let mut going_away = false;
    // When the GOAWAY went: the connection ends at most a second after its last stream (the
    // crate waits for the client's PING acknowledgement, which a client may never send).
    let mut went_away = Instant::now();
    let mut epoch = worker.wake_idle.epoch();
    if worker.stopping.get() {
        conn.graceful_shutdown();
        going_away = true;
    }
    // One timer, moved as its deadline moves (no timer made and dropped per request): the
    // idle connection's `keepalive_timeout`, or the linger after a GOAWAY.
    let mut timer = std::pin::pin!(tokio::time::sleep_until(Instant::now().into()));
    loop {
        // (Its streams count as writing, each on its own.)
        state.set(if shared.active.get() > 0 {
            crate::status::State::Streams
        } else {
            crate::status::State::Waiting
        });
        let idle = shared.active.get() == 0 && !going_away;
        // With no stream open it is reusable, as an idle HTTP/1 keep-alive connection: at
        // `worker_connections` it may be closed to admit a new client.
        idle_slot.set_reusable(idle);
        let (armed, deadline) = if going_away {
            let gone_until = shared.last_done.get().max(went_away) + GOAWAY_LINGER;
            (shared.active.get() == 0, gone_until)
        } else {
            (idle, shared.last_done.get() + keepalive)
        };
        if armed && timer.deadline() != tokio::time::Instant::from_std(deadline) {
            timer.as_mut().reset(deadline.into());
        }
        tokio::select! {
            r = accept(&mut conn, &out) => match r {
                Some(Ok((req, respond))) => {
                    let n = shared.requests.get() + 1;
                    shared.requests.set(n);
                    shared.active.set(shared.active.get() + 1);
                    state.set(crate::status::State::Streams);
                    // The stream runs at once on the connection's task: an answer ready now
                    // (a file in the page cache) costs no task and no wake-up, and its frames
                    // go out with this poll's. One that waits goes on as a task of its own.
                    let answer = stream::run(shared.clone(), req, respond);
                    let mut answer = Box::pin(crate::log::scoped_in(scope.clone(), answer));
                    let first = std::future::poll_fn(|cx| Poll::Ready(answer.as_mut().poll(cx)));
                    if first.await.is_pending() {
                        tokio::task::spawn_local(answer);
                    }
                    if n >= keepalive_requests && !going_away {
                        conn.graceful_shutdown();
                        (going_away, went_away) = (true, Instant::now());
                    }
                }
                Some(Err(e)) => {
                    log_conn_error(&e, number, &client);
                    break;
                }
                None => break,
            },
            _ = shared.done.notified() => {}
            _ = idle_slot.wait(epoch), if !going_away => {
                epoch = worker.wake_idle.epoch();
                if idle_slot.reused() {
                    // Chosen to make room (nginx finalizes such a connection with a GOAWAY
                    // NO_ERROR at once): the GOAWAY goes, and the connection ends.
                    conn.abrupt_shutdown(h2::Reason::NO_ERROR);
                    close_after_goaway(&mut conn, &out).await;
                    break;
                }
                if worker.stopping.get() || shared.generation().is_none() {
                    conn.graceful_shutdown();
                    (going_away, went_away) = (true, Instant::now());
                }
            }
            _ = timer.as_mut(), if armed => {
                if going_away {
                    break;
                }
                conn.graceful_shutdown();
                (going_away, went_away) = (true, Instant::now());
            }
        }
    }
    drop(conn);
    // The streams end with the connection's end; the guard counts it until then.
    while shared.active.get() > 0 {
        let done = shared.done.notified();
        if shared.active.get() == 0 {
            break;
        }
        done.await;
    }
    drop(guard);
}

type Conn = h2::server::Connection<io::Io, bytes::Bytes>;
type Accepted = Result<
    (
        http::Request<h2::RecvStream>,
        h2::server::SendResponse<bytes::Bytes>,
    ),
    h2::Error,
>;

/// The connection's next stream: the `h2` crate reads and writes frames until one comes; what
/// it wrote goes out when it has nothing more to do ([`io::Io::send`]).
async fn accept(conn: &mut Conn, out: &io::Io) -> Option<Accepted> {
    std::future::poll_fn(|cx| {
        let r = conn.poll_accept(cx);
        if !matches!(r, Poll::Ready(Some(Ok(_)))) {
            let _ = out.send(cx);
        }
        r
    })
    .await
}

/// Polls a connection that sent its last GOAWAY until the frame is out (at most a second);
/// a stream the client opened meanwhile is refused with it.
async fn close_after_goaway(conn: &mut Conn, out: &io::Io) {
    let drain = async {
        while let Some(Ok((_, mut respond))) = accept(conn, out).await {
            respond.send_reset(h2::Reason::REFUSED_STREAM);
        }
    };
    let _ = tokio::time::timeout(Duration::from_secs(1), drain).await;
}

/// The connection ended on an error: nginx's log line for what the client did.
fn log_conn_error(e: &h2::Error, number: u64, client: &str) {
    if e.is_io() {
        crate::conn_log!(
            Level::Info,
            number,
            "{e} while processing HTTP/2 connection, client: {client}"
        );
        return;
    }
    if e.is_go_away() && e.is_remote() {
        // The client said goodbye.
        return;
    }
    crate::conn_log!(
        Level::Info,
        number,
        "client sent invalid HTTP/2 frames ({e}) while processing HTTP/2 connection, client: {client}"
    );
}
