//! HTTP/2 connections to gRPC upstreams, on shoal's own client codec over the upstream
//! layer's connect (TCP with `grpc_bind` and `grpc_socket_keepalive`, a unix socket, TLS with
//! ALPN `h2` for `grpcs://`), and the worker's cache of idle ones (`keepalive N` in the
//! `upstream` block).
//!
//! A connection carries one call at a time, as nginx's grpc module uses its upstream
//! connections: `keepalive N` keeps N idle connections per worker, as it does for the proxy,
//! `max_conns` and `least_conn` count calls as connections, and one slow call never shares a
//! TCP window (or a head-of-line loss) with another. Multiplexing would save handshakes only
//! where `keepalive` already saves them.
//!
//! Each connection's frames are read and written by a task of its own on the worker
//! ([`super::wire`]); it ends when the upstream closes, or once the connection is dropped and
//! its streams are over.
//!
//! While the cache holds connections, one task of the worker's ([`sweep`]) looks at them
//! every second: one idle that long frees its read buffer (32 KB) and the codec's spare
//! buffers, and one idle `keepalive_timeout` is closed, as nginx's timer closes an idle
//! keepalive connection, with no call needed to find it stale.
//!
//! `grpc_buffer_size` is each stream's window (what the upstream may send ahead of what the
//! client took: nginx reads at most that much before its client is written) and the bound of
//! an answer's head ([`super::meter`]); a connection is made for one size and reused only by
//! calls of the same (the window is a connection's setting in HTTP/2).

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::time::{Duration, Instant};

use shoal_http2::client::{Client, Config};
use shoal_io::fxhash::FxHashMap;

use super::wire::{self, Core};
use crate::http::transport::Transport;
use crate::upstream::conf::UpstreamConf;

/// One HTTP/2 connection to a peer.
pub struct H2Conn {
    pub core: Core,
    /// When it was opened (`keepalive_time`).
    pub born: Instant,
    /// Calls it carried (`keepalive_requests`).
    pub requests: u64,
    pub tls: bool,
    /// Each stream's window: the `grpc_buffer_size` it was made for.
    pub window: u32,
    /// `grpc_read_timeout` for the answers' heads: one runtime timer for the connection's
    /// life (a call has the connection to itself), not one made for each call.
    pub timer: crate::deadline::Timer,
}

/// The most a stream's window may be (RFC 9113, 6.9.1).
pub const MAX_WINDOW: usize = (1 << 31) - 1;

impl H2Conn {
    /// Starts HTTP/2 on a connection just made: the preface and SETTINGS (each stream's
    /// `window`) are queued, and a task of the worker's drives the connection from now on
    /// (the first request goes with them: the server's SETTINGS need not come first).
    pub fn start(stream: Transport, window: u32) -> H2Conn {
        let tls = matches!(stream, Transport::Tls(_));
        let mut cfg = Config::default();
        cfg.frame.initial_window_size = window;
        // The connection's window is open wide, as nginx's: each stream's bounds what an
        // upstream sends ahead (one call at a time).
        cfg.frame.connection_window = shoal_http2::frame::MAX_WINDOW;
        // What the codec decodes of a head is bounded too (its fields decoded can be larger
        // than they came: the bound that counts is the meter's).
        let list = (window as usize).saturating_mul(32).max(64 * 1024);
        cfg.bounds.list = list;
        cfg.bounds.field = list;
        cfg.frame.max_header_list_size = list.min(u32::MAX as usize) as u32;
        H2Conn {
            core: wire::start(stream, Client::new(cfg)),
            born: Instant::now(),
            requests: 0,
            tls,
            window,
            timer: crate::deadline::Timer::new(),
        }
    }

    /// The size of `stream`'s answer's head as it came, once it came whole.
    pub fn head_size(&self, stream: u32) -> Option<usize> {
        self.core.borrow().frames.head_size(stream)
    }

    /// Whether the connection can still carry a call (no GOAWAY, not closed, no call on it).
    fn usable(&self) -> bool {
        let me = self.core.borrow();
        me.usable() && me.quiet()
    }
}

impl Drop for H2Conn {
    fn drop(&mut self) {
        // The task ends the connection once its streams are over.
        let mut me = self.core.borrow_mut();
        me.owners -= 1;
        me.queued();
    }
}

struct Idle {
    conn: H2Conn,
    peer: usize,
    since: Instant,
    /// Its upstream's `keepalive_timeout`.
    timeout: Duration,
    /// Its buffers were let go ([`sweep`]).
    shrunk: bool,
}

thread_local! {
    /// Idle connections by upstream id, oldest first.
    static IDLE: RefCell<FxHashMap<u64, VecDeque<Idle>>> = RefCell::new(FxHashMap::default());
    /// Whether the worker's [`sweep`] task runs.
    static SWEEPING: Cell<bool> = const { Cell::new(false) };
}

/// How long a connection stays idle in the cache before its task lets its buffers go (the
/// 32 KB read buffer above all): long enough that a busy upstream's connections, idle
/// between two calls, keep theirs.
const SHRINK_AFTER: Duration = Duration::from_secs(1);

/// An idle connection to `peer` (TLS or not, as `tls` says, made for streams of `window`),
/// most recently used first; the ones idle past `keepalive_timeout` at `now` are closed on
/// the way.
pub fn take_idle(
    u: &UpstreamConf,
    peer: usize,
    tls: bool,
    window: u32,
    now: Instant,
) -> Option<H2Conn> {
    u.keepalive?;
    IDLE.with(|m| {
        let mut m = m.borrow_mut();
        let list = m.get_mut(&u.id)?;
        expire(list, now, u);
        while let Some(pos) = list
            .iter()
            .rposition(|i| i.peer == peer && i.conn.tls == tls && i.conn.window == window)
        {
            let idle = list.remove(pos)?;
            if idle.conn.usable() {
                return Some(idle.conn);
            }
        }
        None
    })
}

/// Puts a connection whose call ended well back in the cache, if the upstream keeps
/// connections and this one may carry more (`keepalive_requests`, `keepalive_time`); the
/// oldest idle one goes when the cache is full. `now`: the clock as the call ended.
pub fn put_idle(u: &UpstreamConf, peer: usize, conn: H2Conn, now: Instant) {
    let Some(max) = u.keepalive else {
        return;
    };
    if conn.requests >= u.keepalive_requests()
        || now.saturating_duration_since(conn.born) >= u.keepalive_time()
        || !conn.core.borrow().usable()
    {
        return;
    }
    IDLE.with(|m| {
        let mut m = m.borrow_mut();
        let list = m.entry(u.id).or_default();
        expire(list, now, u);
        if list.len() >= max {
            list.pop_front();
        }
        list.push_back(Idle {
            conn,
            peer,
            since: now,
            timeout: u.keepalive_timeout(),
            shrunk: false,
        });
    });
    if !SWEEPING.replace(true) {
        tokio::task::spawn_local(sweep());
    }
}

/// The worker's task while it has idle connections: every [`SHRINK_AFTER`], the ones idle
/// that long free their buffers, and the ones idle `keepalive_timeout` are closed, as nginx
/// closes them, calls or not (one timer for the worker, none per call).
async fn sweep() {
    loop {
        tokio::time::sleep(SHRINK_AFTER).await;
        let now = Instant::now();
        let any = IDLE.with(|m| {
            let mut m = m.borrow_mut();
            for list in m.values_mut() {
                list.retain(|i| now.saturating_duration_since(i.since) < i.timeout);
            }
            m.retain(|_, list| !list.is_empty());
            for idle in m.values_mut().flat_map(|list| list.iter_mut()) {
                if !idle.shrunk && now.saturating_duration_since(idle.since) >= SHRINK_AFTER {
                    idle.shrunk = true;
                    idle.conn.core.borrow_mut().shrink_idle();
                }
            }
            !m.is_empty()
        });
        if !any {
            SWEEPING.set(false);
            return;
        }
    }
}

fn expire(list: &mut VecDeque<Idle>, now: Instant, u: &UpstreamConf) {
    let Some(cutoff) = now.checked_sub(u.keepalive_timeout()) else {
        return;
    };
    while list.front().is_some_and(|i| i.since <= cutoff) {
        list.pop_front();
    }
}
