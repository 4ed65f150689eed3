//! One HTTP/2 connection on a worker (nginx's `ngx_http_v2_module`), on shoal's own codec
//! (`shoal-http2`): frames, HPACK, flow control and the protocol's checks are the codec's;
//! `drive.rs` is the connection's task (the socket, the read buffer, one write per poll),
//! `wire.rs` each stream's handles on the codec; this room is the connection's life (settings from the configuration, keep-alive, graceful stop)
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
mod drive;
pub(crate) mod io;
pub(crate) mod sink;
mod stream;
pub(crate) mod wire;

pub use drive::serve;
pub(crate) use drive::{resume, Kept};

use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::Notify;

use super::transport::{ConnInfo, Transport};
use super::ServerConf;
use crate::cycle::Generation;
use crate::listen::SocketKey;

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
    /// The servers of the connection's address in `generation` (looked up once, not per
    /// stream; forgotten when the generation changes).
    route: RefCell<Option<Arc<crate::cycle::AddrServers>>>,
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
            *self.route.borrow_mut() = None;
            return Some(current);
        }
        None
    }

    /// The servers of the connection's address in `gen`, the generation
    /// [`Shared::generation`] returned.
    fn route(&self, gen: &Generation) -> Option<Arc<crate::cycle::AddrServers>> {
        if let Some(r) = &*self.route.borrow() {
            return Some(r.clone());
        }
        let r = gen.servers_for(&self.info.socket, self.info.local).cloned();
        self.route.borrow_mut().clone_from(&r);
        r
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
