//! Choosing a peer for a request, as nginx's balancers choose it: smooth weighted round robin
//! (the default), `least_conn`, and, in [`hash`] and [`random`], `ip_hash`, `hash KEY
//! [consistent]` and `random [two least_conn]`.
//!
//! A request's life with a [`Balancer`]: [`Balancer::start`] makes its [`Attempt`] (what it has
//! tried, where a hash walk stands), [`Balancer::pick`] chooses a peer, [`Balancer::free`] ends
//! that use with an [`PeerResult`]; on a failure the proxy may pick again while
//! [`Attempt::tries`] is not 0 (`proxy_next_upstream`), never getting a peer twice.
//!
//! The one thing to know: `backup` peers are allowed with round robin and `least_conn` only
//! ([`Method::allows_backup`]), as in nginx; they are used once no primary is usable, and the
//! request then stays on them. Every other method, once its hash or random walk has failed 20
//! times, falls back to round robin over the peers the request has not tried.

pub mod hash;
pub mod random;

use std::net::IpAddr;
use std::ops::Range;
use std::time::Instant;

use super::peers::{Peer, PeerResult, Peers, ServerEntry};
use super::UpstreamError;
use hash::Ring;
use random::XorShift;

/// The balancing method of an `upstream` block.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Method {
    /// No method directive: smooth weighted round robin.
    RoundRobin,
    /// `least_conn`: fewest active connections per weight, ties by weighted round robin.
    LeastConn,
    /// `ip_hash`: the client's /24 (IPv4) or whole address (IPv6).
    IpHash,
    /// `hash KEY` (crc32 of the key) or `hash KEY consistent` (a ketama ring).
    Hash { consistent: bool },
    /// `random`, or `random two [least_conn]`: the less loaded of two random peers.
    Random { two: bool },
}

impl Method {
    /// Whether `server ... backup` may be used with this method (nginx: not with `hash`,
    /// `ip_hash` or `random`).
    pub fn allows_backup(self) -> bool {
        matches!(self, Method::RoundRobin | Method::LeastConn)
    }
}

/// What a request brings to the choice: `ip_hash` reads `client`, `hash` reads `key`.
#[derive(Debug, Clone, Copy, Default)]
pub struct Input<'a> {
    /// The client's address; `None` (a UNIX-socket client) hashes as nginx's pseudo-address
    /// 0.0.0. An IPv4 client on a dual-stack socket is an IPv6 address to nginx, and here.
    pub client: Option<IpAddr>,
    /// The evaluated `hash` key; an empty key makes `hash` behave as round robin.
    pub key: &'a [u8],
}

/// A bit per peer, the first 64 held in place: an upstream of up to 64 peers costs a request
/// no allocation.
#[derive(Debug, Clone)]
struct Tried {
    low: u64,
    high: Vec<u64>,
}

impl Tried {
    fn new(peers: usize) -> Tried {
        Tried {
            low: 0,
            high: vec![0; peers.saturating_sub(64).div_ceil(64)],
        }
    }

    fn word(&mut self, i: usize) -> &mut u64 {
        match i / 64 {
            0 => &mut self.low,
            w => &mut self.high[w - 1],
        }
    }

    fn get(&self, i: usize) -> bool {
        let w = match i / 64 {
            0 => self.low,
            w => self.high[w - 1],
        };
        w & (1 << (i % 64)) != 0
    }

    fn set(&mut self, i: usize) {
        *self.word(i) |= 1 << (i % 64);
    }
}

/// One request's progress through the peers (nginx's per-request peer data).
#[derive(Debug, Clone)]
pub struct Attempt {
    /// Bit per peer: tried by this request.
    tried: Tried,
    /// Round robin and `least_conn` moved to the backups; they stay there.
    backup: bool,
    current: Option<usize>,
    tries: usize,
    /// Failed steps of a hash or random walk; past 20, round robin takes over.
    rounds: u32,
    /// `ip_hash`: the running hash; `hash`: the sum of the rehashes; consistent: the point.
    hash: u32,
    rehash: u32,
    addr: [u8; 16],
    addr_len: usize,
    key: Vec<u8>,
    key_empty: bool,
}

impl Attempt {
    /// Peers this request may still try (nginx's `pc->tries`): starts at [`Peers::tries`],
    /// one less per [`Balancer::free`], 0 at once when the upstream has a single peer.
    pub fn tries(&self) -> usize {
        self.tries
    }

    /// The peer picked and not yet freed.
    pub fn current(&self) -> Option<usize> {
        self.current
    }

    /// Whether this request has moved to the backup peers.
    pub fn on_backup(&self) -> bool {
        self.backup
    }

    fn is_tried(&self, i: usize) -> bool {
        self.tried.get(i)
    }
}

/// The balancer of one upstream: its peers, the method, and what the method precomputes.
#[derive(Debug, Clone)]
pub struct Balancer {
    method: Method,
    peers: Peers,
    /// `hash ... consistent` only.
    ring: Ring,
    /// `random` only: cumulative primary weights.
    ranges: Vec<u64>,
    rng: XorShift,
}

impl Balancer {
    /// Builds the balancer for `method` over the `server` lines; `seed` feeds `random`'s
    /// generator (give each worker its own).
    pub fn new(
        method: Method,
        entries: &[ServerEntry],
        seed: u64,
    ) -> Result<Balancer, UpstreamError> {
        if !method.allows_backup() && entries.iter().any(|e| e.backup) {
            return Err(UpstreamError::BackupNotSupported);
        }
        let peers = Peers::new(entries)?;
        let ring = match method {
            Method::Hash { consistent: true } => Ring::new(peers.all()),
            _ => Ring::default(),
        };
        let ranges = match method {
            Method::Random { .. } => random::ranges(peers.all()),
            _ => Vec::new(),
        };
        Ok(Balancer {
            method,
            peers,
            ring,
            ranges,
            rng: XorShift::new(seed),
        })
    }

    /// The method this balancer applies.
    pub fn method(&self) -> Method {
        self.method
    }

    /// The peers and their state.
    pub fn peers(&self) -> &Peers {
        &self.peers
    }

    /// The peers, to take one `down` or bring it back at run time.
    pub fn peers_mut(&mut self) -> &mut Peers {
        &mut self.peers
    }

    /// Starts a request: hashes its client address or key as the method needs.
    pub fn start(&self, input: Input<'_>) -> Attempt {
        let mut a = Attempt {
            tried: Tried::new(self.peers.len()),
            backup: false,
            current: None,
            tries: self.peers.tries(),
            rounds: 0,
            hash: 0,
            rehash: 0,
            addr: [0; 16],
            addr_len: 3,
            key: Vec::new(),
            key_empty: input.key.is_empty(),
        };
        match self.method {
            Method::IpHash => hash::start_ip_hash(&mut a, input.client),
            Method::Hash { consistent: false } => a.key = input.key.to_vec(),
            Method::Hash { consistent: true } => a.hash = self.ring.find(input.key),
            _ => {}
        }
        a
    }

    /// Chooses a peer the request has not tried and counts a connection to it; `None` when
    /// every peer (backups included) is `down`, failed, at `max_conns` or already tried: nginx
    /// answers 502 "no live upstreams".
    pub fn pick(&mut self, a: &mut Attempt, now: Instant) -> Option<usize> {
        match self.method {
            Method::RoundRobin => self.round_robin(a, now),
            Method::LeastConn => self.least_conn(a, now),
            Method::IpHash => self.ip_hash(a, now),
            Method::Hash { consistent: false } => self.hash(a, now),
            Method::Hash { consistent: true } => self.chash(a, now),
            Method::Random { two: false } => self.random(a, now),
            Method::Random { two: true } => self.random_two(a, now),
        }
    }

    /// Ends the use of the peer [`Balancer::pick`] returned: releases its connection and does
    /// the failure accounting ([`Peers::release`]). Nothing to do without a current peer.
    /// `now` is asked for only when a failure is counted. True when this failure disabled the
    /// peer (nginx logs `upstream server temporarily disabled`).
    pub fn free(
        &mut self,
        a: &mut Attempt,
        outcome: PeerResult,
        now: impl FnOnce() -> Instant,
    ) -> bool {
        let Some(i) = a.current.take() else {
            return false;
        };
        let disabled = self.peers.release(i, outcome, now);
        a.tries = if self.peers.single() {
            0
        } else {
            a.tries.saturating_sub(1)
        };
        disabled
    }

    /// The list the request draws from: primaries, or backups once it moved there.
    fn list(&self, a: &Attempt) -> Range<usize> {
        if a.backup {
            self.peers.backup()
        } else {
            self.peers.primary()
        }
    }

    /// Moves the request to the backups if there are any and it is not there yet.
    fn to_backup(&self, a: &mut Attempt) -> bool {
        if a.backup || self.peers.backup().is_empty() {
            return false;
        }
        a.backup = true;
        true
    }

    /// Commits a choice: the peer's connection and check time, the request's tried bit.
    fn take(&mut self, a: &mut Attempt, i: usize, now: Instant) -> usize {
        self.peers.slice_mut()[i].take(now);
        a.tried.set(i);
        a.current = Some(i);
        i
    }

    /// Weighted round robin (`ngx_http_upstream_get_round_robin_peer`).
    fn round_robin(&mut self, a: &mut Attempt, now: Instant) -> Option<usize> {
        if self.peers.single() {
            // One peer: used whatever its failures; no check time, no tried bit.
            let p = &mut self.peers.slice_mut()[0];
            if p.server.down || p.is_full() {
                return None;
            }
            p.conns += 1;
            a.current = Some(0);
            return Some(0);
        }
        let list = self.list(a);
        let best = smooth_pick(self.peers.slice_mut(), list, |i, p| {
            !a.is_tried(i) && p.is_usable(now)
        });
        match best {
            Some(i) => Some(self.take(a, i, now)),
            None if self.to_backup(a) => self.round_robin(a, now),
            None => None,
        }
    }

    /// `least_conn` (`ngx_http_upstream_get_least_conn_peer`): the fewest connections per
    /// weight; among equals, smooth round robin from the first of them onwards.
    fn least_conn(&mut self, a: &mut Attempt, now: Instant) -> Option<usize> {
        if self.peers.single() {
            return self.round_robin(a, now);
        }
        let list = self.list(a);
        let peers = self.peers.all();
        let load = |p: &Peer, by: &Peer| i64::from(p.conns) * by.weight;
        let mut best: Option<usize> = None;
        let mut many = false;
        for i in list.clone() {
            let p = &peers[i];
            if a.is_tried(i) || !p.is_usable(now) {
                continue;
            }
            match best {
                Some(b) if load(p, &peers[b]) > load(&peers[b], p) => {}
                Some(b) if load(p, &peers[b]) == load(&peers[b], p) => many = true,
                _ => {
                    best = Some(i);
                    many = false;
                }
            }
        }
        let Some(b) = best else {
            return if self.to_backup(a) {
                self.least_conn(a, now)
            } else {
                None
            };
        };
        let chosen = if many {
            let (bc, bw) = (i64::from(peers[b].conns), peers[b].weight);
            smooth_pick(self.peers.slice_mut(), b..list.end, |i, p| {
                !a.is_tried(i) && p.is_usable(now) && i64::from(p.conns) * bw == bc * p.weight
            })
            .expect("the least loaded peer is among its equals")
        } else {
            b
        };
        Some(self.take(a, chosen, now))
    }
}

/// nginx's smooth weighted round robin (`ngx_http_upstream_get_peer`) over the peers of
/// `range` that `eligible` accepts: each adds its effective weight to its current weight (and
/// a lowered effective weight climbs back by one); the highest current weight wins, first on
/// ties, and gives back the total. Weights 5, 1, 1 pick `a a b a c a a`.
fn smooth_pick(
    peers: &mut [Peer],
    range: Range<usize>,
    eligible: impl Fn(usize, &Peer) -> bool,
) -> Option<usize> {
    let mut best: Option<usize> = None;
    let mut total = 0;
    for i in range {
        if !eligible(i, &peers[i]) {
            continue;
        }
        let p = &mut peers[i];
        p.current_weight += p.effective_weight;
        total += p.effective_weight;
        if p.effective_weight < p.weight {
            p.effective_weight += 1;
        }
        let current = p.current_weight;
        if best.is_none_or(|b| current > peers[b].current_weight) {
            best = Some(i);
        }
    }
    let b = best?;
    peers[b].current_weight -= total;
    Some(b)
}

#[cfg(test)]
mod tests;
