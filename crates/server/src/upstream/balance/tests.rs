//! Round robin, `least_conn`, backups, `down`, `max_conns` and the failure accounting, through
//! the public [`Balancer`] calls with an injected clock.

use std::net::{IpAddr, Ipv4Addr};
use std::time::{Duration, Instant};

use super::*;

fn weighted(w: &[u32]) -> Vec<ServerEntry> {
    w.iter()
        .enumerate()
        .map(|(i, &w)| ServerEntry {
            weight: w,
            ..ServerEntry::new(format!("10.0.0.{i}:80"))
        })
        .collect()
}

fn backup(addr: &str) -> ServerEntry {
    ServerEntry {
        backup: true,
        ..ServerEntry::new(addr)
    }
}

/// One request's first pick, freed with `outcome`.
fn once(b: &mut Balancer, now: Instant, outcome: PeerResult) -> Option<usize> {
    let mut a = b.start(Input::default());
    let i = b.pick(&mut a, now)?;
    b.free(&mut a, outcome, || now);
    Some(i)
}

/// Requests until one lands on peer `i` (the others succeed), and fails that one.
fn fail_peer(b: &mut Balancer, i: usize, now: Instant) {
    loop {
        let mut a = b.start(Input::default());
        let got = b.pick(&mut a, now).expect("a usable peer");
        let outcome = if got == i {
            PeerResult::Failed
        } else {
            PeerResult::Success
        };
        b.free(&mut a, outcome, || now);
        if got == i {
            return;
        }
    }
}

fn secs(n: u64) -> Duration {
    Duration::from_secs(n)
}

#[test]
fn smooth_round_robin_5_1_1_is_a_a_b_a_c_a_a() {
    let now = Instant::now();
    let mut b = Balancer::new(Method::RoundRobin, &weighted(&[5, 1, 1]), 0).unwrap();
    let seq: String = (0..14)
        .map(|_| (b'a' + once(&mut b, now, PeerResult::Success).unwrap() as u8) as char)
        .collect();
    assert_eq!(seq, "aabacaaaabacaa");
}

#[test]
fn a_request_tries_each_of_many_peers_once() {
    // More peers than one word of tried bits.
    let now = Instant::now();
    let mut b = Balancer::new(Method::RoundRobin, &weighted(&[1; 130]), 0).unwrap();
    let mut a = b.start(Input::default());
    let mut seen = [false; 130];
    for _ in 0..130 {
        let i = b.pick(&mut a, now).expect("an untried peer");
        assert!(
            !std::mem::replace(&mut seen[i], true),
            "peer {i} tried twice"
        );
        // Not a failure: only the request's tried bits keep the peer from being picked again.
        b.free(&mut a, PeerResult::Success, || now);
    }
    assert_eq!(b.pick(&mut a, now), None);
}

#[test]
fn round_robin_equal_weights_take_turns() {
    let now = Instant::now();
    let mut b = Balancer::new(Method::RoundRobin, &weighted(&[1, 1, 1]), 0).unwrap();
    let seq: Vec<usize> = (0..6)
        .map(|_| once(&mut b, now, PeerResult::Success).unwrap())
        .collect();
    assert_eq!(seq, [0, 1, 2, 0, 1, 2]);
}

#[test]
fn round_robin_distribution_matches_weights_within_1_percent() {
    let now = Instant::now();
    for weights in [&[5, 3, 2][..], &[7, 2, 1, 3], &[1, 10]] {
        let mut b = Balancer::new(Method::RoundRobin, &weighted(weights), 0).unwrap();
        let mut count = vec![0u32; weights.len()];
        for _ in 0..10_000 {
            count[once(&mut b, now, PeerResult::Success).unwrap()] += 1;
        }
        let total: u32 = weights.iter().sum();
        for (c, w) in count.iter().zip(weights) {
            let want = f64::from(*w) / f64::from(total);
            assert!(
                (f64::from(*c) / 10_000.0 - want).abs() < 0.01,
                "{weights:?}: {count:?}"
            );
        }
    }
}

#[test]
fn least_conn_picks_the_fewest_connections() {
    let now = Instant::now();
    let mut b = Balancer::new(Method::LeastConn, &weighted(&[1, 1, 1]), 0).unwrap();
    for (i, n) in [3, 1, 2].into_iter().enumerate() {
        b.peers.slice_mut()[i].conns = n;
    }
    assert_eq!(once(&mut b, now, PeerResult::Success), Some(1));
    // Held (not freed) picks fill the gaps: 1 gets one more, then ties go round robin.
    let mut held = Vec::new();
    for _ in 0..3 {
        let mut a = b.start(Input::default());
        held.push(b.pick(&mut a, now).unwrap());
    }
    assert_eq!(held[0], 1);
    let conns: Vec<u32> = b.peers().all().iter().map(Peer::conns).collect();
    assert_eq!(conns, [3, 3, 3]);
}

#[test]
fn least_conn_weighs_connections_and_ties_go_round_robin() {
    let now = Instant::now();
    let mut b = Balancer::new(Method::LeastConn, &weighted(&[3, 1]), 0).unwrap();
    for _ in 0..40 {
        let mut a = b.start(Input::default());
        b.pick(&mut a, now).unwrap();
    }
    let conns: Vec<u32> = b.peers().all().iter().map(Peer::conns).collect();
    assert_eq!(conns, [30, 10]);
    // All tied on equal weights: the smooth order, not always the first.
    let mut b = Balancer::new(Method::LeastConn, &weighted(&[1, 1, 1]), 0).unwrap();
    let seq: Vec<usize> = (0..6)
        .map(|_| once(&mut b, now, PeerResult::Success).unwrap())
        .collect();
    assert_eq!(seq, [0, 1, 2, 0, 1, 2]);
}

#[test]
fn down_is_never_picked_by_any_method() {
    let now = Instant::now();
    let mut entries = weighted(&[1, 5, 1, 1]);
    entries[1].down = true;
    let methods = [
        Method::RoundRobin,
        Method::LeastConn,
        Method::IpHash,
        Method::Hash { consistent: false },
        Method::Hash { consistent: true },
        Method::Random { two: false },
        Method::Random { two: true },
    ];
    for m in methods {
        let mut b = Balancer::new(m, &entries, 1).unwrap();
        for i in 0..2000u32 {
            let key = i.to_string();
            let client = IpAddr::V4(Ipv4Addr::from(i.wrapping_mul(2_654_435_761)));
            let mut a = b.start(Input {
                client: Some(client),
                key: key.as_bytes(),
            });
            let got = b.pick(&mut a, now).unwrap();
            assert_ne!(got, 1, "{m:?}");
            b.free(&mut a, PeerResult::Success, || now);
        }
    }
}

#[test]
fn backup_only_when_every_primary_is_unavailable() {
    let t0 = Instant::now();
    let entries = [
        ServerEntry::new("a"),
        backup("c"),
        ServerEntry::new("b"),
        backup("d"),
    ];
    for m in [Method::RoundRobin, Method::LeastConn] {
        let mut b = Balancer::new(m, &entries, 0).unwrap();
        assert_eq!(b.peers().backup(), 2..4);
        for _ in 0..100 {
            assert!(once(&mut b, t0, PeerResult::Success).unwrap() < 2);
        }
        // a down, b failed (max_fails 1): the backups take turns.
        b.peers_mut().set_down(0, true);
        while once(&mut b, t0, PeerResult::Failed) != Some(1) {}
        let seq: Vec<usize> = (0..4)
            .map(|_| once(&mut b, t0, PeerResult::Success).unwrap())
            .collect();
        assert_eq!(seq.iter().filter(|&&i| i == 2).count(), 2, "{m:?} {seq:?}");
        assert_eq!(seq.iter().filter(|&&i| i == 3).count(), 2, "{m:?} {seq:?}");
        // b's fail_timeout over: back to the primaries.
        let later = t0 + secs(11);
        assert_eq!(once(&mut b, later, PeerResult::Success), Some(1));
    }
}

#[test]
fn backup_refused_by_hash_ip_hash_and_random() {
    let entries = [ServerEntry::new("a"), backup("b")];
    for m in [
        Method::IpHash,
        Method::Hash { consistent: false },
        Method::Hash { consistent: true },
        Method::Random { two: false },
        Method::Random { two: true },
    ] {
        assert!(!m.allows_backup());
        let err = Balancer::new(m, &entries, 0).unwrap_err();
        assert_eq!(
            err.to_string(),
            "balancing method does not support parameter \"backup\""
        );
    }
}

#[test]
fn one_request_tries_each_peer_once_then_the_backups() {
    let now = Instant::now();
    let entries = [
        ServerEntry::new("a"),
        ServerEntry::new("b"),
        backup("c"),
        backup("d"),
    ];
    let mut b = Balancer::new(Method::RoundRobin, &entries, 0).unwrap();
    let mut a = b.start(Input::default());
    assert_eq!(a.tries(), 4);
    let mut got = Vec::new();
    while let Some(i) = b.pick(&mut a, now) {
        got.push(i);
        b.free(&mut a, PeerResult::Failed, || now);
    }
    assert_eq!(got, [0, 1, 2, 3]);
    assert!(a.on_backup());
    assert_eq!(a.tries(), 0);
}

#[test]
fn max_conns_skips_a_full_peer() {
    let now = Instant::now();
    let mut entries = weighted(&[10, 1]);
    entries[0].max_conns = 1;
    entries[1].max_conns = 2;
    let mut b = Balancer::new(Method::RoundRobin, &entries, 0).unwrap();
    let mut open = Vec::new();
    for want in [Some(0), Some(1), Some(1), None] {
        let mut a = b.start(Input::default());
        assert_eq!(b.pick(&mut a, now), want);
        open.push(a);
    }
    b.free(&mut open[0], PeerResult::Success, || now);
    assert_eq!(once(&mut b, now, PeerResult::Success), Some(0));
}

#[test]
fn max_fails_within_fail_timeout_take_a_peer_out_until_it_passes() {
    let t0 = Instant::now();
    let mut entries = weighted(&[1, 1]);
    entries[0].max_fails = 2;
    let mut b = Balancer::new(Method::RoundRobin, &entries, 0).unwrap();
    fail_peer(&mut b, 0, t0);
    assert!(!b.peers().get(0).is_failed(t0));
    fail_peer(&mut b, 0, t0 + secs(2));
    assert!(b.peers().get(0).is_failed(t0 + secs(2)));
    // Out for fail_timeout (10s) after the last failure, the boundary included.
    for s in 3..=12 {
        assert_eq!(once(&mut b, t0 + secs(s), PeerResult::Success), Some(1));
    }
    // Then tried again; a success after that check clears the failures.
    let back = t0 + secs(12) + Duration::from_millis(1);
    let mut seen = Vec::new();
    for _ in 0..2 {
        seen.push(once(&mut b, back, PeerResult::Success).unwrap());
    }
    assert!(seen.contains(&0), "{seen:?}");
    assert_eq!(b.peers().get(0).fails(), 0);
}

#[test]
fn a_failure_after_the_timeout_takes_it_out_again_at_once() {
    let t0 = Instant::now();
    let mut entries = weighted(&[1, 1]);
    entries[0].max_fails = 2;
    let mut b = Balancer::new(Method::RoundRobin, &entries, 0).unwrap();
    for now in [t0, t0 + secs(1), t0 + secs(30)] {
        fail_peer(&mut b, 0, now);
    }
    // The count is not reset by time alone: one more failure after the timeout is enough.
    let later = t0 + secs(30);
    assert_eq!(b.peers().get(0).fails(), 3);
    assert!(b.peers().get(0).is_failed(later + secs(5)));
}

#[test]
fn success_inside_the_window_does_not_clear_failures() {
    // nginx clears fails on a success only once the peer was checked after the failure.
    let t0 = Instant::now();
    let mut entries = weighted(&[1, 1]);
    entries[0].max_fails = 2;
    let mut b = Balancer::new(Method::RoundRobin, &entries, 0).unwrap();
    fail_peer(&mut b, 0, t0);
    while once(&mut b, t0 + secs(1), PeerResult::Success) != Some(0) {}
    assert_eq!(b.peers().get(0).fails(), 1);
    while once(&mut b, t0 + secs(11), PeerResult::Success) != Some(0) {}
    assert_eq!(b.peers().get(0).fails(), 0);
}

#[test]
fn max_fails_0_never_takes_a_peer_out() {
    let now = Instant::now();
    let mut entries = weighted(&[1, 1]);
    entries[0].max_fails = 0;
    entries[1].max_fails = 0;
    let mut b = Balancer::new(Method::RoundRobin, &entries, 0).unwrap();
    let seq: Vec<usize> = (0..6)
        .map(|_| once(&mut b, now, PeerResult::Failed).unwrap())
        .collect();
    assert_eq!(seq, [0, 1, 0, 1, 0, 1]);
}

#[test]
fn a_single_peer_ignores_failures_and_is_not_retried() {
    let now = Instant::now();
    let mut b = Balancer::new(Method::LeastConn, &weighted(&[1]), 0).unwrap();
    for _ in 0..5 {
        let mut a = b.start(Input::default());
        assert_eq!(a.tries(), 1);
        assert_eq!(b.pick(&mut a, now), Some(0));
        b.free(&mut a, PeerResult::Failed, || now);
        assert_eq!(a.tries(), 0);
    }
    assert_eq!(b.peers().get(0).fails(), 0);
    assert_eq!(b.peers().get(0).conns(), 0);
    b.peers_mut().set_down(0, true);
    assert_eq!(once(&mut b, now, PeerResult::Success), None);
}

#[test]
fn effective_weight_climbs_back_after_a_failure() {
    let now = Instant::now();
    let mut entries = weighted(&[4, 4]);
    entries[0].max_fails = 4;
    let mut b = Balancer::new(Method::RoundRobin, &entries, 0).unwrap();
    let mut a = b.start(Input::default());
    assert_eq!(b.pick(&mut a, now), Some(0));
    b.free(&mut a, PeerResult::Failed, || now);
    assert_eq!(b.peers().get(0).effective_weight(), 3);
    once(&mut b, now, PeerResult::Success);
    assert_eq!(b.peers().get(0).effective_weight(), 4);
}
