//! `random` and `random two [least_conn]` (`ngx_http_upstream_random_module`): a peer drawn
//! with probability proportional to its weight; with `two`, two distinct usable peers drawn and
//! the one with fewer connections per weight taken (the second drawn on a tie).
//!
//! The generator is injected: a xorshift64 seeded by the caller, so a test replays the same
//! draws and each worker can have its own stream. Like the hash methods, 20 failed draws hand
//! the choice to round robin.

use std::time::Instant;

use super::{Attempt, Balancer};
use crate::upstream::peers::Peer;

/// Failed draws before round robin takes over (nginx's constant).
const MAX_ROUNDS: u32 = 20;

/// Marsaglia's xorshift64 (shifts 13, 7, 17): small, fast, and reproducible from its seed; not
/// for anything an attacker should not predict.
#[derive(Debug, Clone)]
pub struct XorShift(u64);

impl XorShift {
    /// A generator from `seed`; 0, which xorshift cannot leave, is replaced by a constant.
    pub fn new(seed: u64) -> XorShift {
        XorShift(if seed == 0 {
            0x9E37_79B9_7F4A_7C15
        } else {
            seed
        })
    }

    /// The next value.
    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }
}

/// The cumulative weights of the primaries: peer `i` owns `[ranges[i-1], ranges[i])`.
pub(super) fn ranges(peers: &[Peer]) -> Vec<u64> {
    peers
        .iter()
        .filter(|p| !p.server.backup)
        .scan(0, |sum, p| {
            *sum += u64::from(p.server.weight);
            Some(*sum)
        })
        .collect()
}

impl Balancer {
    /// Draws a primary by weight (`ngx_http_upstream_peek_random_peer`), `down` ones included.
    fn peek(&mut self) -> usize {
        let x = self.rng.next_u64() % self.peers.total_weight();
        let (mut i, mut j) = (0, self.ranges.len());
        while j - i > 1 {
            let k = (i + j) / 2;
            if x < self.ranges[k - 1] {
                j = k;
            } else {
                i = k;
            }
        }
        i
    }

    /// `random`: draws until a usable peer the request has not tried comes up.
    pub(super) fn random(&mut self, a: &mut Attempt, now: Instant) -> Option<usize> {
        if a.rounds > MAX_ROUNDS || self.peers.single() {
            return self.round_robin(a, now);
        }
        loop {
            let i = self.peek();
            if !a.is_tried(i) && self.peers.get(i).is_usable(now) {
                return Some(self.take(a, i, now));
            }
            a.rounds += 1;
            if a.rounds > MAX_ROUNDS {
                return self.round_robin(a, now);
            }
        }
    }

    /// `random two least_conn`: the first usable draw, then a second distinct one; the second
    /// unless it has more connections per weight. As in nginx, the first accepted draw counts
    /// toward the 20 as well.
    pub(super) fn random_two(&mut self, a: &mut Attempt, now: Instant) -> Option<usize> {
        if a.rounds > MAX_ROUNDS || self.peers.single() {
            return self.round_robin(a, now);
        }
        let mut prev: Option<usize> = None;
        loop {
            let i = self.peek();
            if prev != Some(i) && !a.is_tried(i) && self.peers.get(i).is_usable(now) {
                if let Some(p) = prev {
                    let (x, y) = (self.peers.get(i), self.peers.get(p));
                    let chosen = if i64::from(x.conns) * y.weight > i64::from(y.conns) * x.weight {
                        p
                    } else {
                        i
                    };
                    return Some(self.take(a, chosen, now));
                }
                prev = Some(i);
            }
            a.rounds += 1;
            if a.rounds > MAX_ROUNDS {
                return self.round_robin(a, now);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Instant;

    use super::*;
    use crate::upstream::{Input, Method, PeerResult, ServerEntry};

    fn weighted(w: &[u32]) -> Vec<ServerEntry> {
        w.iter()
            .enumerate()
            .map(|(i, &w)| ServerEntry {
                weight: w,
                ..ServerEntry::new(format!("10.0.0.{i}:80"))
            })
            .collect()
    }

    #[test]
    fn xorshift_replays_from_its_seed() {
        let (mut a, mut b) = (XorShift::new(42), XorShift::new(42));
        let xs: Vec<u64> = (0..5).map(|_| a.next_u64()).collect();
        let ys: Vec<u64> = (0..5).map(|_| b.next_u64()).collect();
        assert_eq!(xs, ys);
        assert_ne!(XorShift::new(0).next_u64(), 0);
        assert_ne!(XorShift::new(1).next_u64(), XorShift::new(2).next_u64());
    }

    #[test]
    fn ranges_are_cumulative() {
        let b = Balancer::new(Method::Random { two: false }, &weighted(&[2, 1, 3]), 1).unwrap();
        assert_eq!(b.ranges, [2, 3, 6]);
    }

    #[test]
    fn random_follows_the_weights() {
        let now = Instant::now();
        let mut b = Balancer::new(Method::Random { two: false }, &weighted(&[5, 3, 2]), 7).unwrap();
        let mut count = [0u32; 3];
        for _ in 0..100_000 {
            let mut a = b.start(Input::default());
            let i = b.pick(&mut a, now).unwrap();
            count[i] += 1;
            b.free(&mut a, PeerResult::Success, || now);
        }
        for (c, w) in count.iter().zip([5, 3, 2]) {
            let share = f64::from(*c) / 100_000.0;
            assert!((share - f64::from(w) / 10.0).abs() < 0.01, "{count:?}");
        }
    }

    #[test]
    fn random_is_deterministic_for_a_seed() {
        let now = Instant::now();
        let run = |seed| {
            let mut b =
                Balancer::new(Method::Random { two: false }, &weighted(&[1; 4]), seed).unwrap();
            (0..20)
                .map(|_| {
                    let mut a = b.start(Input::default());
                    let i = b.pick(&mut a, now).unwrap();
                    b.free(&mut a, PeerResult::Success, || now);
                    i
                })
                .collect::<Vec<_>>()
        };
        assert_eq!(run(3), run(3));
        assert_ne!(run(3), run(4));
    }

    #[test]
    fn random_two_never_takes_the_loaded_peer() {
        let now = Instant::now();
        let mut b = Balancer::new(Method::Random { two: true }, &weighted(&[1; 3]), 9).unwrap();
        // Five open connections on peer 0.
        for _ in 0..5 {
            b.peers.slice_mut()[0].conns += 1;
        }
        let mut count = [0u32; 3];
        for _ in 0..1000 {
            let mut a = b.start(Input::default());
            let i = b.pick(&mut a, now).unwrap();
            count[i] += 1;
            b.free(&mut a, PeerResult::Success, || now);
        }
        assert_eq!(count[0], 0, "{count:?}");
        assert!(count[1] > 300 && count[2] > 300, "{count:?}");
    }

    #[test]
    fn random_two_weighs_connections_by_weight() {
        let now = Instant::now();
        // Peer 0 has 3 connections at weight 4 (0.75 each), peer 1 one at weight 1.
        let mut b = Balancer::new(Method::Random { two: true }, &weighted(&[4, 1]), 5).unwrap();
        b.peers.slice_mut()[0].conns = 3;
        b.peers.slice_mut()[1].conns = 1;
        for _ in 0..50 {
            let mut a = b.start(Input::default());
            assert_eq!(b.pick(&mut a, now), Some(0));
            b.free(&mut a, PeerResult::Success, || now);
        }
    }

    #[test]
    fn random_two_spreads_an_idle_upstream() {
        let now = Instant::now();
        let mut b = Balancer::new(Method::Random { two: true }, &weighted(&[1; 4]), 11).unwrap();
        let mut count = [0u32; 4];
        for _ in 0..4000 {
            let mut a = b.start(Input::default());
            count[b.pick(&mut a, now).unwrap()] += 1;
            b.free(&mut a, PeerResult::Success, || now);
        }
        assert!(count.iter().all(|&c| c > 800), "{count:?}");
    }

    #[test]
    fn random_skips_down_and_tried_then_gives_up() {
        let now = Instant::now();
        let mut entries = weighted(&[1; 3]);
        entries[1].down = true;
        for two in [false, true] {
            let mut b = Balancer::new(Method::Random { two }, &entries, 13).unwrap();
            let mut a = b.start(Input::default());
            let first = b.pick(&mut a, now).unwrap();
            b.free(&mut a, PeerResult::Failed, || now);
            let second = b.pick(&mut a, now).unwrap();
            b.free(&mut a, PeerResult::Failed, || now);
            let mut got = [first, second];
            got.sort_unstable();
            assert_eq!(got, [0, 2]);
            assert_eq!(b.pick(&mut a, now), None);
        }
    }
}
