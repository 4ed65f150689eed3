//! The peers of one `upstream` block: what each `server` line configured (weight, `max_fails`,
//! `fail_timeout`, `max_conns`, `backup`, `down`) and the state nginx keeps per peer for its
//! balancers (current and effective weight, active connections, failures, last check).
//!
//! An address is opaque here: a label as the `server` line wrote it (consistent hashing hashes
//! that text, as nginx does) and the index of the line, so the caller can map a chosen peer back
//! to the sockets it resolved. Primaries come first, then backups, each in configuration order.
//!
//! The one thing to know: nothing here reads the clock. Every call that depends on time takes
//! `now`, so the failure accounting ([`Peers::release`]) is deterministic under test.

use std::ops::Range;
use std::time::{Duration, Instant};

use super::UpstreamError;

/// One `server` line of an `upstream` block, as the configuration parsed it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerEntry {
    /// The address as written (`10.0.0.1:8080`, `backend.example.com`, `unix:/tmp/app.sock`).
    pub addr: String,
    /// `weight=`, default 1; never 0.
    pub weight: u32,
    /// `max_fails=`, default 1; 0 turns the failure accounting off for this peer.
    pub max_fails: u32,
    /// `fail_timeout=`, default 10s.
    pub fail_timeout: Duration,
    /// `max_conns=`, default 0: unlimited.
    pub max_conns: u32,
    /// `backup`: used only when every primary is unavailable.
    pub backup: bool,
    /// `down`: never chosen.
    pub down: bool,
}

impl ServerEntry {
    /// A `server ADDR;` line with nginx's defaults.
    pub fn new(addr: impl Into<String>) -> ServerEntry {
        ServerEntry {
            addr: addr.into(),
            weight: 1,
            max_fails: 1,
            fail_timeout: Duration::from_secs(10),
            max_conns: 0,
            backup: false,
            down: false,
        }
    }
}

/// How a use of a peer ended, for the failure accounting.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PeerResult {
    /// The upstream answered. Also what nginx records when it passes a request on without
    /// counting a failure (`proxy_next_upstream http_404`, a non-idempotent request).
    Success,
    /// An error that `proxy_next_upstream` counts: connect refused, timeout, `http_502`...
    Failed,
}

/// One peer: its configuration and the state the balancers keep for it.
#[derive(Debug, Clone)]
pub struct Peer {
    /// The `server` line.
    pub server: ServerEntry,
    /// The position of that line in the `upstream` block.
    pub entry: usize,
    pub(super) weight: i64,
    pub(super) current_weight: i64,
    pub(super) effective_weight: i64,
    pub(super) conns: u32,
    pub(super) fails: u32,
    /// When the peer last failed or was last chosen after `fail_timeout` had passed; `None` is
    /// nginx's 0, "long ago".
    pub(super) checked: Option<Instant>,
    /// When the peer last failed.
    pub(super) accessed: Option<Instant>,
}

impl Peer {
    fn new(server: ServerEntry, entry: usize) -> Peer {
        let weight = i64::from(server.weight);
        Peer {
            server,
            entry,
            weight,
            current_weight: 0,
            effective_weight: weight,
            conns: 0,
            fails: 0,
            checked: None,
            accessed: None,
        }
    }

    /// Active connections (chosen and not yet released).
    pub fn conns(&self) -> u32 {
        self.conns
    }

    /// Failures counted since the last success that followed a check.
    pub fn fails(&self) -> u32 {
        self.fails
    }

    /// The smooth round robin's running weight.
    pub fn current_weight(&self) -> i64 {
        self.current_weight
    }

    /// The weight round robin uses now: lowered by failures, climbing back by one per pick.
    pub fn effective_weight(&self) -> i64 {
        self.effective_weight
    }

    /// `max_fails` failures and `fail_timeout` not yet passed since the last check.
    pub fn is_failed(&self, now: Instant) -> bool {
        self.server.max_fails != 0
            && self.fails >= self.server.max_fails
            && self
                .checked
                .is_some_and(|c| now.saturating_duration_since(c) <= self.server.fail_timeout)
    }

    /// At `max_conns` active connections.
    pub fn is_full(&self) -> bool {
        self.server.max_conns != 0 && self.conns >= self.server.max_conns
    }

    /// Neither `down`, nor failed, nor full: what every balancer asks before choosing a peer.
    pub fn is_usable(&self, now: Instant) -> bool {
        !self.server.down && !self.is_failed(now) && !self.is_full()
    }

    /// Chosen: count the connection, and if `fail_timeout` has passed since the last check,
    /// this choice is the new check (a success after it resets the failures).
    pub(super) fn take(&mut self, now: Instant) {
        let timeout = self.server.fail_timeout;
        if self
            .checked
            .is_none_or(|c| now.saturating_duration_since(c) > timeout)
        {
            self.checked = Some(now);
        }
        self.conns += 1;
    }
}

/// The peers of one upstream, primaries then backups.
#[derive(Debug, Clone)]
pub struct Peers {
    peers: Vec<Peer>,
    primaries: usize,
    total_weight: u64,
}

impl Peers {
    /// Builds the list from the `server` lines in configuration order.
    pub fn new(entries: &[ServerEntry]) -> Result<Peers, UpstreamError> {
        if let Some(e) = entries.iter().find(|e| e.weight == 0) {
            return Err(UpstreamError::InvalidWeight(e.addr.clone()));
        }
        let (primary, backup): (Vec<_>, Vec<_>) = entries
            .iter()
            .cloned()
            .enumerate()
            .partition(|(_, e)| !e.backup);
        if primary.is_empty() {
            return Err(UpstreamError::NoServers);
        }
        let primaries = primary.len();
        let peers: Vec<Peer> = primary
            .into_iter()
            .chain(backup)
            .map(|(i, e)| Peer::new(e, i))
            .collect();
        let total_weight = peers[..primaries]
            .iter()
            .map(|p| u64::from(p.server.weight))
            .sum();
        Ok(Peers {
            peers,
            primaries,
            total_weight,
        })
    }

    /// All peers; a balancer's answer indexes this slice.
    pub fn all(&self) -> &[Peer] {
        &self.peers
    }

    /// The peer at `index`.
    pub fn get(&self, index: usize) -> &Peer {
        &self.peers[index]
    }

    /// Number of peers, backups included.
    pub fn len(&self) -> usize {
        self.peers.len()
    }

    /// Never true: [`Peers::new`] refuses an upstream without primaries.
    pub fn is_empty(&self) -> bool {
        self.peers.is_empty()
    }

    /// Indexes of the primary peers.
    pub fn primary(&self) -> Range<usize> {
        0..self.primaries
    }

    /// Indexes of the backup peers (empty without `backup` lines).
    pub fn backup(&self) -> Range<usize> {
        self.primaries..self.peers.len()
    }

    /// Sum of the primaries' configured weights, `down` ones included (the hash methods map a
    /// hash onto this range, so taking a peer down moves only its own keys).
    pub fn total_weight(&self) -> u64 {
        self.total_weight
    }

    /// One primary and no backup: nginx's `single`, where the peer is used whatever its
    /// failures (only `down` and `max_conns` refuse it) and a failure is never retried.
    pub fn single(&self) -> bool {
        self.peers.len() == 1
    }

    /// How many peers one request may try: those not `down`, backups included (nginx's
    /// `ngx_http_upstream_tries`, the bound `proxy_next_upstream_tries 0` means).
    pub fn tries(&self) -> usize {
        self.peers.iter().filter(|p| !p.server.down).count()
    }

    /// Takes a peer out of rotation or puts it back, as `down` in the configuration would.
    pub fn set_down(&mut self, index: usize, down: bool) {
        self.peers[index].server.down = down;
    }

    pub(super) fn slice_mut(&mut self) -> &mut [Peer] {
        &mut self.peers
    }

    /// The end of one use of a peer (nginx's `ngx_http_upstream_free_round_robin_peer`): a
    /// failure counts toward `max_fails`, restarts `fail_timeout` and lowers the effective
    /// weight by `weight / max_fails`; a success clears the failures only if the peer was
    /// checked (chosen once `fail_timeout` had passed) after the last failure, so failures
    /// inside one `fail_timeout` window add up even with successes between them. `now` is
    /// asked for only when a failure is counted (a success reads no clock). True when this
    /// failure reached `max_fails` (nginx's `upstream server temporarily disabled`).
    pub fn release(
        &mut self,
        index: usize,
        outcome: PeerResult,
        now: impl FnOnce() -> Instant,
    ) -> bool {
        let single = self.single();
        let peer = &mut self.peers[index];
        debug_assert!(peer.conns > 0, "release without a matching pick");
        peer.conns = peer.conns.saturating_sub(1);
        if single {
            return false;
        }
        match outcome {
            PeerResult::Failed => {
                let now = now();
                peer.fails += 1;
                peer.accessed = Some(now);
                peer.checked = Some(now);
                if peer.server.max_fails != 0 {
                    peer.effective_weight -= peer.weight / i64::from(peer.server.max_fails);
                }
                peer.effective_weight = peer.effective_weight.max(0);
                peer.server.max_fails != 0 && peer.fails >= peer.server.max_fails
            }
            PeerResult::Success => {
                if peer.accessed < peer.checked {
                    peer.fails = 0;
                }
                false
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn backup(addr: &str) -> ServerEntry {
        ServerEntry {
            backup: true,
            ..ServerEntry::new(addr)
        }
    }

    #[test]
    fn defaults_are_nginx_defaults() {
        let e = ServerEntry::new("10.0.0.1:80");
        assert_eq!(e.weight, 1);
        assert_eq!(e.max_fails, 1);
        assert_eq!(e.fail_timeout, Duration::from_secs(10));
        assert_eq!(e.max_conns, 0);
        assert!(!e.backup && !e.down);
    }

    #[test]
    fn primaries_first_then_backups_with_their_line_numbers() {
        let peers = Peers::new(&[
            backup("b1"),
            ServerEntry::new("a"),
            backup("b2"),
            ServerEntry::new("c"),
        ])
        .unwrap();
        let order: Vec<_> = peers
            .all()
            .iter()
            .map(|p| (p.server.addr.as_str(), p.entry))
            .collect();
        assert_eq!(order, [("a", 1), ("c", 3), ("b1", 0), ("b2", 2)]);
        assert_eq!(peers.primary(), 0..2);
        assert_eq!(peers.backup(), 2..4);
        assert!(!peers.single());
    }

    #[test]
    fn tries_and_total_weight() {
        let peers = Peers::new(&[
            ServerEntry {
                weight: 3,
                ..ServerEntry::new("a")
            },
            ServerEntry {
                down: true,
                weight: 2,
                ..ServerEntry::new("b")
            },
            backup("c"),
        ])
        .unwrap();
        assert_eq!(peers.tries(), 2);
        assert_eq!(peers.total_weight(), 5);
    }

    #[test]
    fn refuses_no_primaries_and_zero_weight() {
        assert_eq!(Peers::new(&[]).unwrap_err(), UpstreamError::NoServers);
        assert_eq!(
            Peers::new(&[backup("b")]).unwrap_err(),
            UpstreamError::NoServers
        );
        let zero = ServerEntry {
            weight: 0,
            ..ServerEntry::new("a")
        };
        assert_eq!(
            Peers::new(&[zero]).unwrap_err().to_string(),
            "invalid parameter \"weight=0\" for server \"a\""
        );
    }

    #[test]
    fn failure_lowers_effective_weight() {
        let t0 = Instant::now();
        let a = ServerEntry {
            weight: 10,
            max_fails: 5,
            ..ServerEntry::new("a")
        };
        let mut peers = Peers::new(&[a, ServerEntry::new("b")]).unwrap();
        peers.slice_mut()[0].take(t0);
        peers.release(0, PeerResult::Failed, || t0);
        assert_eq!(peers.get(0).effective_weight(), 8);
        assert_eq!(peers.get(0).fails(), 1);
        assert!(!peers.get(0).is_failed(t0));
    }
}
