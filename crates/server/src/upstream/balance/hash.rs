//! The hashing balancers, as nginx computes them: `ip_hash`
//! (`ngx_http_upstream_ip_hash_module`), `hash KEY` and `hash KEY consistent`
//! (`ngx_http_upstream_hash_module`).
//!
//! `ip_hash` and `hash` map a hash onto the primaries' configured weights (`down` peers keep
//! their share, so taking one down moves only its own clients) and, when the peer found is not
//! usable, hash again. The consistent ring gives each peer `160 * weight` points, each the
//! crc32 of "host\0port" followed by the previous point (compatible with
//! Cache::Memcached::Fast); a key goes to the first point at or after its crc32, and an
//! unusable peer passes it to the next point. All three give up after 20 failed steps and let
//! round robin choose among the peers the request has not tried.

use std::net::IpAddr;
use std::time::Instant;

use super::{Attempt, Balancer};
use crate::upstream::crc32::{crc32, Crc32};
use crate::upstream::peers::Peer;

/// Failed steps of a walk before round robin takes over (nginx's constant).
const MAX_ROUNDS: u32 = 20;

/// Points per unit of weight on the consistent ring.
const POINTS_PER_WEIGHT: u32 = 160;

/// One point of the consistent ring.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Point {
    hash: u32,
    /// The server text it was hashed from, as the index of the first peer with that text.
    server: usize,
}

/// The consistent-hash ring (`hash ... consistent`), sorted by hash, duplicates removed.
#[derive(Debug, Clone, Default)]
pub struct Ring {
    points: Vec<Point>,
    /// Per peer: the index of the first peer with the same address text.
    server: Vec<usize>,
}

impl Ring {
    /// Builds the ring over the peers (the consistent method has no backups).
    pub(super) fn new(peers: &[Peer]) -> Ring {
        let server: Vec<usize> = peers
            .iter()
            .enumerate()
            .map(|(i, p)| {
                peers[..i]
                    .iter()
                    .position(|q| q.server.addr == p.server.addr)
                    .unwrap_or(i)
            })
            .collect();
        let mut points = Vec::new();
        for (i, p) in peers.iter().enumerate() {
            let (host, port) = host_port(&p.server.addr);
            let base = Crc32::new().update(host).update(b"\0").update(port);
            let mut prev = 0u32;
            for _ in 0..POINTS_PER_WEIGHT * p.server.weight {
                let hash = base.update(&prev.to_le_bytes()).finish();
                points.push(Point {
                    hash,
                    server: server[i],
                });
                prev = hash;
            }
        }
        points.sort_by_key(|p| p.hash);
        points.dedup_by_key(|p| p.hash);
        Ring { points, server }
    }

    /// Number of points.
    pub fn len(&self) -> usize {
        self.points.len()
    }

    /// Whether the ring has no points (any method but `hash ... consistent`).
    pub fn is_empty(&self) -> bool {
        self.points.is_empty()
    }

    /// The first point at or after the key's crc32 (`len()` past the last: the walk wraps).
    pub(super) fn find(&self, key: &[u8]) -> u32 {
        let hash = crc32(key);
        self.points.partition_point(|p| p.hash < hash) as u32
    }
}

/// Splits an address as nginx does for the ring: `unix:PATH` is all host; otherwise the
/// digits after the last `:` are the port; anything else is all host with an empty port.
fn host_port(addr: &str) -> (&[u8], &[u8]) {
    let b = addr.as_bytes();
    if b.len() >= 5 && b[..5].eq_ignore_ascii_case(b"unix:") {
        return (&b[5..], b"");
    }
    let digits = b.iter().rev().take_while(|c| c.is_ascii_digit()).count();
    match b.len().checked_sub(digits + 1) {
        Some(colon) if b[colon] == b':' => (&b[..colon], &b[colon + 1..]),
        _ => (b, b""),
    }
}

/// `ip_hash`'s start: the first three octets of an IPv4 client, all sixteen of an IPv6 one,
/// nginx's 0.0.0 for a client without an IP address; the hash starts at 89.
pub(super) fn start_ip_hash(a: &mut Attempt, client: Option<IpAddr>) {
    match client {
        Some(IpAddr::V4(v4)) => {
            a.addr[..3].copy_from_slice(&v4.octets()[..3]);
            a.addr_len = 3;
        }
        Some(IpAddr::V6(v6)) => {
            a.addr = v6.octets();
            a.addr_len = 16;
        }
        None => a.addr_len = 3,
    }
    a.hash = 89;
}

/// `rehash` in decimal, as nginx's `%ui` prints it.
fn decimal(mut n: u32, buf: &mut [u8; 10]) -> &[u8] {
    let mut at = buf.len();
    loop {
        at -= 1;
        buf[at] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            return &buf[at..];
        }
    }
}

impl Balancer {
    /// The primary whose slice of the configured weights holds `w` (< total weight).
    fn peer_at_weight(&self, mut w: u64) -> usize {
        let peers = self.peers.all();
        let mut p = 0;
        while w >= peers[p].weight as u64 {
            w -= peers[p].weight as u64;
            p += 1;
        }
        p
    }

    /// Whether the peer a walk landed on may be taken.
    fn open(&self, a: &Attempt, p: usize, now: Instant) -> bool {
        !a.is_tried(p) && self.peers.get(p).is_usable(now)
    }

    /// `ip_hash` (`ngx_http_upstream_get_ip_hash_peer`): `hash = (hash * 113 + byte) % 6271`
    /// over the address bytes, again for each step of the walk.
    pub(super) fn ip_hash(&mut self, a: &mut Attempt, now: Instant) -> Option<usize> {
        if a.rounds > MAX_ROUNDS || self.peers.single() {
            return self.round_robin(a, now);
        }
        let mut hash = a.hash;
        loop {
            for &b in &a.addr[..a.addr_len] {
                hash = (hash * 113 + u32::from(b)) % 6271;
            }
            let p = self.peer_at_weight(u64::from(hash) % self.peers.total_weight());
            if self.open(a, p, now) {
                a.hash = hash;
                return Some(self.take(a, p, now));
            }
            a.rounds += 1;
            if a.rounds > MAX_ROUNDS {
                return self.round_robin(a, now);
            }
        }
    }

    /// `hash KEY` (`ngx_http_upstream_get_hash_peer`): the sum of
    /// `(crc32([REHASH] KEY) >> 16) & 0x7fff` over the steps, REHASH omitted at the first
    /// (compatible with Cache::Memcached).
    pub(super) fn hash(&mut self, a: &mut Attempt, now: Instant) -> Option<usize> {
        if a.rounds > MAX_ROUNDS || self.peers.single() || a.key.is_empty() {
            return self.round_robin(a, now);
        }
        loop {
            let mut crc = Crc32::new();
            if a.rehash > 0 {
                crc = crc.update(decimal(a.rehash, &mut [0; 10]));
            }
            let step = (crc.update(&a.key).finish() >> 16) & 0x7fff;
            a.hash = a.hash.wrapping_add(step);
            a.rehash += 1;
            let p = self.peer_at_weight(u64::from(a.hash) % self.peers.total_weight());
            if self.open(a, p, now) {
                return Some(self.take(a, p, now));
            }
            a.rounds += 1;
            if a.rounds > MAX_ROUNDS {
                return self.round_robin(a, now);
            }
        }
    }

    /// `hash KEY consistent` (`ngx_http_upstream_get_chash_peer`): the peers with the point's
    /// server text, by smooth round robin among them; none usable, the next point.
    pub(super) fn chash(&mut self, a: &mut Attempt, now: Instant) -> Option<usize> {
        if a.rounds > MAX_ROUNDS || self.peers.len() < 2 || a.key_empty {
            return self.round_robin(a, now);
        }
        loop {
            let point = self.ring.points[a.hash as usize % self.ring.points.len()];
            let server = &self.ring.server;
            let range = self.peers.primary();
            let best = super::smooth_pick(self.peers.slice_mut(), range, |i, p| {
                server[i] == point.server && !a.is_tried(i) && p.is_usable(now)
            });
            if let Some(i) = best {
                return Some(self.take(a, i, now));
            }
            a.hash = a.hash.wrapping_add(1);
            a.rounds += 1;
            if a.rounds > MAX_ROUNDS {
                return self.round_robin(a, now);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::net::{Ipv4Addr, Ipv6Addr};

    use super::*;
    use crate::upstream::{Input, Method, PeerResult, ServerEntry};

    fn servers(n: usize) -> Vec<ServerEntry> {
        (0..n)
            .map(|i| ServerEntry::new(format!("10.0.0.{i}:8080")))
            .collect()
    }

    /// Picks and frees (success) once for `input`.
    fn one(b: &mut Balancer, input: Input<'_>, now: Instant) -> usize {
        let mut a = b.start(input);
        let i = b.pick(&mut a, now).expect("a usable peer");
        b.free(&mut a, PeerResult::Success, || now);
        i
    }

    fn v4(a: u8, b: u8, c: u8, d: u8) -> Input<'static> {
        Input {
            client: Some(IpAddr::V4(Ipv4Addr::new(a, b, c, d))),
            key: b"",
        }
    }

    fn key(k: &[u8]) -> Input<'_> {
        Input {
            client: None,
            key: k,
        }
    }

    #[test]
    fn host_port_as_nginx_splits_it() {
        assert_eq!(host_port("10.0.0.1:8080"), (&b"10.0.0.1"[..], &b"8080"[..]));
        assert_eq!(host_port("example.com"), (&b"example.com"[..], &b""[..]));
        assert_eq!(host_port("[::1]:80"), (&b"[::1]"[..], &b"80"[..]));
        assert_eq!(host_port("UNIX:/tmp/a:1"), (&b"/tmp/a:1"[..], &b""[..]));
        assert_eq!(host_port("host:"), (&b"host"[..], &b""[..]));
        assert_eq!(host_port("a:b1"), (&b"a:b1"[..], &b""[..]));
    }

    #[test]
    fn ring_has_160_points_per_weight_sorted() {
        let mut entries = servers(3);
        entries[2].weight = 2;
        let b = Balancer::new(Method::Hash { consistent: true }, &entries, 0).unwrap();
        assert_eq!(b.ring.len(), 160 * 4);
        assert!(b.ring.points.windows(2).all(|w| w[0].hash < w[1].hash));
        // The first point of a peer is crc32("host\0port" + four zero bytes).
        let first = crc32(b"10.0.0.0\08080\0\0\0\0");
        assert!(b
            .ring
            .points
            .iter()
            .any(|p| p.hash == first && p.server == 0));
    }

    #[test]
    fn ip_hash_known_value() {
        // 89 -> (89*113+192)%6271 = 3978 -> 4441 -> 154; 154 % 2 = 0, 154 % 3 = 1.
        let now = Instant::now();
        let mut two = Balancer::new(Method::IpHash, &servers(2), 0).unwrap();
        assert_eq!(one(&mut two, v4(192, 168, 1, 7), now), 0);
        let mut three = Balancer::new(Method::IpHash, &servers(3), 0).unwrap();
        assert_eq!(one(&mut three, v4(192, 168, 1, 7), now), 1);
    }

    #[test]
    fn ip_hash_same_24_same_peer() {
        let now = Instant::now();
        let mut b = Balancer::new(Method::IpHash, &servers(3), 0).unwrap();
        let mut seen = [false; 3];
        for net in 0..=255u8 {
            let first = one(&mut b, v4(10, 20, net, 1), now);
            seen[first] = true;
            for host in 2..=255u8 {
                assert_eq!(one(&mut b, v4(10, 20, net, host), now), first);
            }
        }
        assert_eq!(seen, [true; 3]);
    }

    #[test]
    fn ip_hash_uses_the_whole_ipv6_address() {
        let now = Instant::now();
        let mut b = Balancer::new(Method::IpHash, &servers(3), 0).unwrap();
        let mut seen = [false; 3];
        for last in 0..=255u16 {
            let addr = Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, last);
            let input = Input {
                client: Some(IpAddr::V6(addr)),
                key: b"",
            };
            seen[one(&mut b, input, now)] = true;
        }
        assert_eq!(seen, [true; 3]);
    }

    #[test]
    fn ip_hash_down_peer_moves_only_its_clients() {
        let now = Instant::now();
        let mut b = Balancer::new(Method::IpHash, &servers(3), 0).unwrap();
        let before: Vec<usize> = (0..=255)
            .map(|n| one(&mut b, v4(172, 16, n, 1), now))
            .collect();
        b.peers_mut().set_down(1, true);
        for (n, &was) in before.iter().enumerate() {
            let now_at = one(&mut b, v4(172, 16, n as u8, 1), now);
            assert_ne!(now_at, 1);
            if was != 1 {
                assert_eq!(now_at, was);
            }
        }
    }

    #[test]
    fn ip_hash_falls_back_to_round_robin_after_20_steps() {
        let now = Instant::now();
        let mut entries = servers(2);
        entries[0].weight = 1000;
        entries[0].down = true;
        let mut b = Balancer::new(Method::IpHash, &entries, 0).unwrap();
        let mut fell_back = 0;
        for n in 0..50 {
            let mut a = b.start(v4(192, 0, n, 1));
            assert_eq!(b.pick(&mut a, now), Some(1));
            fell_back += usize::from(a.rounds > MAX_ROUNDS);
            b.free(&mut a, PeerResult::Success, || now);
        }
        assert!(fell_back > 40, "{fell_back}");
    }

    #[test]
    fn hash_spreads_keys_evenly_and_stably() {
        let now = Instant::now();
        let mut b = Balancer::new(Method::Hash { consistent: false }, &servers(4), 0).unwrap();
        let mut count = [0u32; 4];
        for i in 0..20_000 {
            let k = format!("/static/img/{i}.png");
            let at = one(&mut b, key(k.as_bytes()), now);
            assert_eq!(one(&mut b, key(k.as_bytes()), now), at);
            count[at] += 1;
        }
        for c in count {
            assert!((f64::from(c) / 20_000.0 - 0.25).abs() < 0.02, "{count:?}");
        }
    }

    #[test]
    fn hash_rehashes_past_an_unusable_peer_only() {
        let now = Instant::now();
        let mut b = Balancer::new(Method::Hash { consistent: false }, &servers(4), 0).unwrap();
        let keys: Vec<String> = (0..2000).map(|i| format!("user{i}")).collect();
        let before: Vec<usize> = keys
            .iter()
            .map(|k| one(&mut b, key(k.as_bytes()), now))
            .collect();
        b.peers_mut().set_down(2, true);
        for (k, &was) in keys.iter().zip(&before) {
            let at = one(&mut b, key(k.as_bytes()), now);
            assert_ne!(at, 2);
            if was != 2 {
                assert_eq!(at, was);
            }
        }
    }

    #[test]
    fn hash_with_an_empty_key_is_round_robin() {
        let now = Instant::now();
        for consistent in [false, true] {
            let mut b = Balancer::new(Method::Hash { consistent }, &servers(3), 0).unwrap();
            let seq: Vec<usize> = (0..6).map(|_| one(&mut b, key(b""), now)).collect();
            assert_eq!(seq, [0, 1, 2, 0, 1, 2]);
        }
    }

    /// Where each key goes, as the peer's address.
    fn chash_map(entries: &[ServerEntry], keys: &[String], down: Option<usize>) -> Vec<String> {
        let now = Instant::now();
        let mut b = Balancer::new(Method::Hash { consistent: true }, entries, 0).unwrap();
        if let Some(d) = down {
            b.peers_mut().set_down(d, true);
        }
        keys.iter()
            .map(|k| {
                let i = one(&mut b, key(k.as_bytes()), now);
                b.peers().get(i).server.addr.clone()
            })
            .collect()
    }

    #[test]
    fn consistent_hash_moves_only_the_keys_of_a_removed_peer() {
        let keys: Vec<String> = (0..3000).map(|i| format!("/objects/{i:x}")).collect();
        for n in 2..=7 {
            let all = servers(n);
            let before = chash_map(&all, &keys, None);
            for gone in 0..n {
                let gone_addr = &all[gone].addr;
                let mut fewer = all.clone();
                fewer.remove(gone);
                let removed = chash_map(&fewer, &keys, None);
                let downed = chash_map(&all, &keys, Some(gone));
                for ((was, r), d) in before.iter().zip(&removed).zip(&downed) {
                    assert_ne!(r, gone_addr);
                    assert_eq!(r, d, "removing and marking down agree");
                    if was != gone_addr {
                        assert_eq!(was, r, "n={n} gone={gone}");
                    }
                }
            }
        }
    }

    #[test]
    fn consistent_hash_follows_the_weights() {
        let now = Instant::now();
        let mut entries = servers(3);
        entries[2].weight = 2;
        let mut b = Balancer::new(Method::Hash { consistent: true }, &entries, 0).unwrap();
        let mut count = [0u32; 3];
        for i in 0..20_000 {
            count[one(&mut b, key(format!("k{i}").as_bytes()), now)] += 1;
        }
        for (c, share) in count.iter().zip([0.25, 0.25, 0.5]) {
            assert!((f64::from(*c) / 20_000.0 - share).abs() < 0.05, "{count:?}");
        }
    }

    #[test]
    fn consistent_hash_retry_goes_to_another_peer() {
        let now = Instant::now();
        let mut b = Balancer::new(Method::Hash { consistent: true }, &servers(3), 0).unwrap();
        let mut a = b.start(key(b"/video/1"));
        let first = b.pick(&mut a, now).unwrap();
        b.free(&mut a, PeerResult::Failed, || now);
        let second = b.pick(&mut a, now).unwrap();
        assert_ne!(first, second);
        b.free(&mut a, PeerResult::Failed, || now);
        let third = b.pick(&mut a, now).unwrap();
        assert!(third != first && third != second);
        b.free(&mut a, PeerResult::Failed, || now);
        assert_eq!(b.pick(&mut a, now), None);
    }

    #[test]
    fn rehash_prefix_is_decimal() {
        assert_eq!(decimal(0, &mut [0; 10]), b"0");
        assert_eq!(decimal(17, &mut [0; 10]), b"17");
        assert_eq!(decimal(u32::MAX, &mut [0; 10]), b"4294967295");
    }
}
