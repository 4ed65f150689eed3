//! What each worker keeps per upstream: its [`Balancer`] (peer weights, failures, active
//! connections: per worker, as nginx's without a `zone`) and its keep-alive cache, the idle
//! connections `keepalive N` allows. An upstream with `zone` has one balancer for all the
//! workers, as nginx's shared memory zone gives it: a peer's failures, `max_conns` and the
//! round robin's turn are counted once, whichever worker a request came to.
//!
//! Thread-local: a worker is one thread with one current-thread runtime, so no lock is
//! taken but a zone's (held only while a peer is chosen or freed, as nginx's zone lock). A cached connection is handed out only to a request that picked the same peer, and
//! only if it is still quiet (no EOF, no stray bytes: an upstream that closed it, or that sent
//! something unasked, makes it useless).

use std::cell::RefCell;
use std::collections::VecDeque;

use shoal_io::fxhash::FxHashMap;
use std::time::{Duration, Instant};

use super::conf::UpstreamConf;
use super::{Attempt, Balancer, Input, PeerResult};
use crate::deadline::Timer;
use crate::http::transport::Transport;

/// An idle upstream connection in a worker's keep-alive cache.
struct Idle {
    stream: Transport,
    /// The connection's timer, kept with it (made once, re-armed per wait).
    timer: Timer,
    peer: usize,
    /// When it went idle (`keepalive_timeout`).
    since: Instant,
    /// When it was opened (`keepalive_time`).
    born: Instant,
    /// Requests it has carried (`keepalive_requests`).
    requests: u64,
    /// It speaks TLS: handed only to a request for an https upstream (and a plain one only
    /// to a plain request).
    tls: bool,
}

/// A connection taken from the cache, with its history.
pub struct Reused {
    pub stream: Transport,
    pub timer: Timer,
    pub born: Instant,
    pub requests: u64,
}

#[derive(Default)]
struct WorkerState {
    /// By upstream id: the configuration's own numbers, so FxHash (several lookups per
    /// proxied request).
    balancers: FxHashMap<u64, Balancer>,
    idle: FxHashMap<u64, VecDeque<Idle>>,
    /// Caches holding more than their `keepalive N` (upstream id, N), trimmed by the task
    /// [`put_idle`] left to run after the worker's next poll for events.
    over: Vec<(u64, usize)>,
}

thread_local! {
    static STATE: RefCell<WorkerState> = RefCell::new(WorkerState::default());
}

fn with_balancer<T>(u: &UpstreamConf, f: impl FnOnce(&mut Balancer) -> T) -> T {
    let make = || {
        let seed = crate::worker::current_index() as u64 ^ u.id.rotate_left(32);
        Balancer::new(u.method, &u.entries, seed)
            .expect("upstreams are checked when the configuration is read")
    };
    // The upstream a request's URL made (`proxy_pass` with variables, a resolved name): its
    // balancer lives with it, for that request only, as in nginx; requests that overlap on
    // the worker each have their own. A `zone`'s lives with the configuration, shared by
    // the workers.
    if u.ephemeral || u.zone {
        let mut b = u
            .own_balancer
            .get_or_init(|| std::sync::Mutex::new(make()))
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        return f(&mut b);
    }
    STATE.with(|s| {
        let mut s = s.borrow_mut();
        let b = s.balancers.entry(u.id).or_insert_with(make);
        f(b)
    })
}

/// Starts a request's walk over the peers.
pub fn start(u: &UpstreamConf, input: Input<'_>) -> Attempt {
    with_balancer(u, |b| b.start(input))
}

/// Chooses a peer (`None`: no live upstreams) at `now`.
pub fn pick(u: &UpstreamConf, a: &mut Attempt, now: Instant) -> Option<usize> {
    with_balancer(u, |b| b.pick(a, now))
}

/// Ends the use of the current peer; true when this failure disabled it (`max_fails`).
pub fn free(u: &UpstreamConf, a: &mut Attempt, outcome: PeerResult) -> bool {
    with_balancer(u, |b| b.free(a, outcome, Instant::now))
}

/// A cached connection to `peer` (TLS or not, as `tls` says), most recently used first; stale
/// ones met on the way (idle `keepalive_timeout` at `now`) are closed.
pub fn take_idle(u: &UpstreamConf, peer: usize, now: Instant, tls: bool) -> Option<Reused> {
    u.keepalive?;
    let timeout = u.keepalive_timeout();
    STATE.with(|s| {
        let mut s = s.borrow_mut();
        let list = s.idle.get_mut(&u.id)?;
        expire(list, now, timeout);
        while let Some(pos) = list.iter().rposition(|i| i.peer == peer && i.tls == tls) {
            let idle = list.remove(pos)?;
            if quiet(&idle.stream) {
                return Some(Reused {
                    stream: idle.stream,
                    timer: idle.timer,
                    born: idle.born,
                    requests: idle.requests,
                });
            }
        }
        None
    })
}

/// Puts a connection whose answer was read to its end back in the cache, if the upstream
/// keeps connections and this one may carry more requests. `born`: when it was opened;
/// `now`: the clock as the answer ended.
///
/// `keepalive N` is held at the end of the worker's turn, not at every return: when this
/// connection makes the cache hold more than N, the least recently used ones are closed by a
/// task that runs once the worker has next polled for events and run what that poll woke
/// (`yield_now`). A connection returned and asked for again within that turn (a client's next
/// request arriving with the burst of answers that filled the cache) is reused instead of
/// being closed here and a new one opened a moment later. The cache holds more than N only
/// within a turn, by at most the connections returned during it.
pub fn put_idle(
    u: &UpstreamConf,
    peer: usize,
    stream: Transport,
    timer: Timer,
    (born, now): (Instant, Instant),
    requests: u64,
) {
    let Some(max) = u.keepalive else {
        return;
    };
    if requests >= u.keepalive_requests()
        || now.saturating_duration_since(born) >= u.keepalive_time()
    {
        return;
    }
    let trim = STATE.with(|s| {
        let mut s = s.borrow_mut();
        let s = &mut *s;
        let list = s.idle.entry(u.id).or_default();
        expire(list, now, u.keepalive_timeout());
        debug_assert!(list.back().is_none_or(|i| i.since <= now));
        list.push_back(Idle {
            tls: matches!(stream, Transport::Tls(_)),
            stream,
            timer,
            peer,
            since: now,
            born,
            requests,
        });
        if list.len() <= max || s.over.iter().any(|&(id, _)| id == u.id) {
            return false;
        }
        s.over.push((u.id, max));
        s.over.len() == 1
    });
    if trim {
        tokio::task::spawn_local(async {
            tokio::task::yield_now().await;
            trim_over();
        });
    }
}

/// Closes the least recently used idle connections of every cache over its `keepalive N`.
fn trim_over() {
    STATE.with(|s| {
        let mut s = s.borrow_mut();
        let s = &mut *s;
        for (id, max) in s.over.drain(..) {
            if let Some(list) = s.idle.get_mut(&id) {
                while list.len() > max {
                    list.pop_front();
                }
            }
        }
    });
}

/// Closes the connections idle for `keepalive_timeout` or longer. A connection goes in at the
/// back as it becomes idle, so the list is oldest first and the stale ones are at its front.
fn expire(list: &mut VecDeque<Idle>, now: Instant, timeout: Duration) {
    let Some(cutoff) = now.checked_sub(timeout) else {
        return;
    };
    while list.front().is_some_and(|i| i.since <= cutoff) {
        list.pop_front();
    }
}

/// Idle connections this worker holds for `u` (for tests and status).
pub fn idle_count(u: &UpstreamConf) -> usize {
    STATE.with(|s| s.borrow().idle.get(&u.id).map_or(0, VecDeque::len))
}

/// Nothing to read and no EOF: the upstream still holds its end open and sent nothing
/// unasked. The runtime's readiness answers first (no syscall, and no waker registered on the
/// socket): no read event since a read drained the socket means quiet. When it says readable
/// (data or EOF arrived, or the last read just filled its buffer), a peek decides; a readiness
/// the peek finds stale is cleared. An EOF that arrived but was not yet collected from epoll is
/// caught later: the request fails before any answer byte and is sent again on a new
/// connection.
fn quiet(stream: &Transport) -> bool {
    stream.try_peek_closed().is_err()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_connection_is_quiet_until_its_peer_sends_or_closes() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
            let (a, b) = tokio::net::UnixStream::pair().unwrap();
            let a = Transport::Unix(a);
            let Transport::Unix(s) = &a else {
                unreachable!()
            };
            assert!(quiet(&a));
            b.try_write(b"x").unwrap();
            s.readable().await.unwrap();
            assert!(!quiet(&a), "a byte unasked");
            assert_eq!(s.try_read(&mut [0u8; 8]).unwrap(), 1);
            assert!(
                quiet(&a),
                "read: the readiness left is stale, the peek says so"
            );
            assert!(quiet(&a));
            drop(b);
            s.readable().await.unwrap();
            assert!(!quiet(&a), "the peer closed");
        });
    }

    #[test]
    fn expiry_takes_the_stale_connections_from_the_front() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
            let s = Duration::from_secs(1);
            let t0 = Instant::now();
            let idle = |since| Idle {
                stream: Transport::Unix(tokio::net::UnixStream::pair().unwrap().0),
                timer: Timer::new(),
                peer: 0,
                since,
                born: since,
                requests: 1,
                tls: false,
            };
            let mut list: VecDeque<Idle> = [t0, t0 + s, t0 + 2 * s, t0 + 3 * s]
                .into_iter()
                .map(idle)
                .collect();
            expire(&mut list, t0 + 30 * s, 60 * s);
            assert_eq!(list.len(), 4, "none idle for a minute yet");
            expire(&mut list, t0 + 61 * s + s / 2, 60 * s);
            assert_eq!(list.len(), 2, "idle 61.5 s and 60.5 s: closed");
            // Idle exactly `keepalive_timeout`: closed too.
            expire(&mut list, t0 + 62 * s, 60 * s);
            assert_eq!(list.len(), 1);
            assert_eq!(list[0].since, t0 + 3 * s);
        });
    }
}
