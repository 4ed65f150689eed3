use super::*;

fn zone(name: &str, size: u64, key: &str, rate: u64) -> Arc<ReqZone> {
    ReqZone::standalone(name, size, key, rate).expect("zone")
}

fn loc(limits: Vec<Limit>) -> LimitReqLoc {
    LimitReqLoc {
        limits: Some(Arc::new(limits)),
        ..Default::default()
    }
}

fn limit(zone: &Arc<ReqZone>, burst: u64, delay: Option<u64>) -> Limit {
    Limit {
        zone: zone.clone(),
        burst: burst * 1000,
        delay: delay.map_or(u64::MAX, |d| d * 1000),
    }
}

fn client(ip: &str) -> Client {
    Client::Inet(ip.parse().unwrap())
}

fn no_vars(_: &Template) -> String {
    unreachable!("these keys have no variables")
}

fn at(lc: &LimitReqLoc, ip: &str, now: u64) -> (Option<Status>, Action) {
    let o = lc.check(&client(ip), &mut no_vars, now);
    (o.status, o.action)
}

#[test]
fn rates() {
    assert_eq!(parse_rate("1r/s"), Some(1000));
    assert_eq!(parse_rate("30r/m"), Some(500));
    assert_eq!(parse_rate("1r/m"), Some(16));
    assert_eq!(parse_rate("5"), Some(5000));
    for bad in [
        "0r/s", "1r/h", "1.5r/s", "r/s", "", "-1r/s", "1R/s", "1r/S", "1r",
    ] {
        assert_eq!(parse_rate(bad), None, "{bad}");
    }
}

/// rate=2r/s burst=2 (delay 0): pass, 500 ms, 1000 ms, refused (as nginx did here: 200 at
/// once, 200 after ~0.5 s and ~1 s, then 503s).
#[test]
fn burst_delays_then_refuses() {
    let z = zone("burst", 32768, "$binary_remote_addr", 2000);
    let lc = loc(vec![limit(&z, 2, Some(0))]);
    assert_eq!(at(&lc, "10.0.0.1", 0), (Some(Status::Passed), Action::Pass));
    let o = lc.check(&client("10.0.0.1"), &mut no_vars, 0);
    assert_eq!(o.action, Action::Delay(Duration::from_millis(500)));
    assert_eq!(o.status, Some(Status::Delayed));
    assert_eq!(
        o.lines,
        vec![(
            Level::Warn,
            Line::Delaying {
                dry_run: false,
                excess: 1000,
                zone: "burst"
            }
        )]
    );
    assert_eq!(
        o.lines[0].1.to_string(),
        "delaying request, excess: 1.000, by zone \"burst\""
    );
    assert_eq!(
        at(&lc, "10.0.0.1", 0).1,
        Action::Delay(Duration::from_millis(1000))
    );
    let o = lc.check(&client("10.0.0.1"), &mut no_vars, 14);
    assert_eq!(o.action, Action::Reject(503));
    assert_eq!(o.status, Some(Status::Rejected));
    assert_eq!(
        o.lines[0].1.to_string(),
        "limiting requests, excess: 2.972 by zone \"burst\""
    );
    assert_eq!(o.lines[0].0, Level::Error);
    // Another client has its own bucket.
    assert_eq!(at(&lc, "10.0.0.2", 14).1, Action::Pass);
    // 1.5 s later the first one's 2.000 drained to -1.000 + 1.000 = 0.
    assert_eq!(
        at(&lc, "10.0.0.1", 1500),
        (Some(Status::Passed), Action::Pass)
    );
}

#[test]
fn nodelay_and_delay_parameter() {
    let z = zone("nodelay", 32768, "$binary_remote_addr", 1000);
    let lc = loc(vec![limit(&z, 2, None)]);
    for _ in 0..3 {
        assert_eq!(at(&lc, "10.0.0.1", 0), (Some(Status::Passed), Action::Pass));
    }
    assert_eq!(at(&lc, "10.0.0.1", 0).1, Action::Reject(503));
    // burst=3 delay=1 at 1r/s: two at once, then 1 s, 2 s, then refused.
    let z = zone("delay", 32768, "$binary_remote_addr", 1000);
    let lc = loc(vec![limit(&z, 3, Some(1))]);
    assert_eq!(at(&lc, "10.0.0.1", 0).1, Action::Pass);
    assert_eq!(at(&lc, "10.0.0.1", 0).1, Action::Pass);
    assert_eq!(
        at(&lc, "10.0.0.1", 0).1,
        Action::Delay(Duration::from_secs(1))
    );
    assert_eq!(
        at(&lc, "10.0.0.1", 0).1,
        Action::Delay(Duration::from_secs(2))
    );
    assert_eq!(at(&lc, "10.0.0.1", 0).1, Action::Reject(503));
}

#[test]
fn per_minute_rates_drain_as_nginx_divides() {
    // 1r/m is 16 thousandths per second: after 60 s only 0.960 has drained.
    let z = zone("minute", 32768, "$binary_remote_addr", 16);
    let lc = loc(vec![limit(&z, 0, Some(0))]);
    assert_eq!(at(&lc, "10.0.0.1", 0).1, Action::Pass);
    let o = lc.check(&client("10.0.0.1"), &mut no_vars, 60_000);
    assert_eq!(
        o.lines[0].1.to_string(),
        "limiting requests, excess: 0.040 by zone \"minute\""
    );
    assert_eq!(at(&lc, "10.0.0.1", 62_500).1, Action::Pass);
}

#[test]
fn dry_run_counts_but_never_holds() {
    let z = zone("dry", 32768, "$binary_remote_addr", 1000);
    let mut lc = loc(vec![limit(&z, 1, Some(0))]);
    lc.dry_run = Some(true);
    lc.log_level = Some(Level::Info);
    assert_eq!(at(&lc, "10.0.0.1", 0), (Some(Status::Passed), Action::Pass));
    let o = lc.check(&client("10.0.0.1"), &mut no_vars, 0);
    assert_eq!(o.status, Some(Status::DelayedDryRun));
    assert_eq!(o.action, Action::Pass);
    assert_eq!(o.lines[0].0, Level::Info);
    assert_eq!(
        o.lines[0].1.to_string(),
        "delaying request, dry run, excess: 1.000, by zone \"dry\""
    );
    let o = lc.check(&client("10.0.0.1"), &mut no_vars, 0);
    assert_eq!(o.status, Some(Status::RejectedDryRun));
    assert_eq!(o.action, Action::Pass);
    assert_eq!(
        o.lines[0].1.to_string(),
        "limiting requests, dry run, excess: 2.000 by zone \"dry\""
    );
}

#[test]
fn the_longest_delay_wins() {
    let slow = zone("slow", 32768, "$binary_remote_addr", 1000);
    let fast = zone("fast", 32768, "$binary_remote_addr", 10_000);
    let lc = loc(vec![limit(&slow, 5, Some(0)), limit(&fast, 5, Some(0))]);
    assert_eq!(at(&lc, "10.0.0.1", 0).1, Action::Pass);
    let o = lc.check(&client("10.0.0.1"), &mut no_vars, 0);
    // fast: 1.000 → 100 ms; slow: 1.000 → 1000 ms.
    assert_eq!(o.action, Action::Delay(Duration::from_millis(1000)));
    assert_eq!(
        o.lines[0].1.to_string(),
        "delaying request, excess: 1.000, by zone \"slow\""
    );
    // A refusal by the second leaves the first unaccounted.
    let strict = zone("strict", 32768, "$binary_remote_addr", 1000);
    let lenient = zone("lenient", 32768, "$binary_remote_addr", 1000);
    let lc = loc(vec![limit(&lenient, 5, None), limit(&strict, 0, None)]);
    assert_eq!(at(&lc, "10.0.0.9", 0).1, Action::Pass);
    assert_eq!(at(&lc, "10.0.0.9", 0).1, Action::Reject(503));
    let only_lenient = loc(vec![limit(&lenient, 0, None)]);
    let o = only_lenient.check(&client("10.0.0.9"), &mut no_vars, 0);
    assert_eq!(
        o.lines[0].1.to_string(),
        "limiting requests, excess: 1.000 by zone \"lenient\"",
        "one request accounted, not two"
    );
}

#[test]
fn empty_and_long_keys_are_not_accounted() {
    let z = zone("keys", 32768, "$arg_k", 1000);
    let lc = loc(vec![limit(&z, 0, None)]);
    let o = lc.check(&client("10.0.0.1"), &mut |_| String::new(), 0);
    assert_eq!((o.status, o.action), (None, Action::Pass));
    let long = "k".repeat(65536);
    let o = lc.check(&client("10.0.0.1"), &mut |_| long.clone(), 0);
    assert_eq!((o.status, o.action), (None, Action::Pass));
    assert_eq!(o.lines[0].0, Level::Error);
    assert!(o.lines[0]
        .1
        .to_string()
        .starts_with("the value of the \"$arg_k\" key is more than 65535 bytes: \"kkk"));
    assert_eq!(z.memory().unwrap().len(), 0);
}

/// A 32k zone holds 191 states of short keys (as nginx's did here); one more evicts the
/// least recently used.
#[test]
fn a_full_zone_evicts_the_least_recently_used() {
    let z = zone("lru", 32768, "$arg_k", 16);
    let lc = loc(vec![limit(&z, 0, None)]);
    let key = |i: usize| format!("{i}xxx");
    for i in 0..191 {
        assert_eq!(
            lc.check(&client("10.0.0.1"), &mut |_| key(i), 0).action,
            Action::Pass
        );
    }
    assert_eq!(z.memory().unwrap().len(), 191);
    // Key 0 is refreshed (refused: the lookup still moves it up).
    assert_eq!(
        lc.check(&client("10.0.0.1"), &mut |_| key(0), 1).action,
        Action::Reject(503)
    );
    assert_eq!(
        lc.check(&client("10.0.0.1"), &mut |_| key(500), 2).action,
        Action::Pass
    );
    assert_eq!(z.memory().unwrap().len(), 191);
    // Key 1 was the oldest: gone, so it passes again; key 0 is still limited.
    assert_eq!(
        lc.check(&client("10.0.0.1"), &mut |_| key(1), 3).action,
        Action::Pass
    );
    assert_eq!(
        lc.check(&client("10.0.0.1"), &mut |_| key(0), 4).action,
        Action::Reject(503)
    );
}

/// A key of a bigger size class finds no page when the zone is full of small ones: nginx's
/// `could not allocate node`, at alert, without the request; the oldest was dropped trying.
#[test]
fn no_room_for_a_bigger_state() {
    let z = zone("full", 32768, "$arg_k", 16);
    let lc = loc(vec![limit(&z, 0, None)]);
    for i in 0..191 {
        lc.check(&client("10.0.0.1"), &mut |_| format!("{i}xxx"), 0);
    }
    let o = lc.check(&client("10.0.0.1"), &mut |_| "L".repeat(100), 0);
    assert_eq!(o.action, Action::Reject(503));
    assert_eq!(o.status, Some(Status::Rejected));
    assert_eq!(o.lines.len(), 1);
    assert_eq!(o.lines[0].0, Level::Alert);
    assert!(!o.lines[0].1.about_request());
    assert_eq!(
        o.lines[0].1.to_string(),
        "could not allocate node in limit_req zone \"full\""
    );
    assert_eq!(z.memory().unwrap().len(), 190);
}

#[test]
fn idle_drained_states_make_room_first() {
    let z = zone("stale", 32768, "$arg_k", 1000);
    let lc = loc(vec![limit(&z, 0, None)]);
    for i in 0..10 {
        lc.check(&client("10.0.0.1"), &mut |_| format!("{i}"), 0);
    }
    // A minute later a new key drops two idle, drained states.
    lc.check(&client("10.0.0.1"), &mut |_| "new".into(), 61_000);
    assert_eq!(z.memory().unwrap().len(), 9);
}

#[test]
fn zones_are_shared_by_threads() {
    let z = zone("threads", 1 << 20, "$arg_k", 1000);
    let lc = Arc::new(loc(vec![limit(&z, 1000, None)]));
    let passed = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let threads: Vec<_> = (0..4)
        .map(|t| {
            let lc = lc.clone();
            let passed = passed.clone();
            std::thread::spawn(move || {
                for i in 0..2000u64 {
                    // One shared key and a key per thread and iteration.
                    let k = if i % 2 == 0 {
                        "shared".to_string()
                    } else {
                        format!("{t}-{i}")
                    };
                    let o = lc.check(&client("10.0.0.1"), &mut |_| k.clone(), 0);
                    if o.action == Action::Pass {
                        passed.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    }
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    // "shared": 4000 requests at one instant, burst 1000: exactly 1001 pass; every other
    // key passes once.
    assert_eq!(
        passed.load(std::sync::atomic::Ordering::Relaxed),
        1001 + 4000
    );
    assert_eq!(z.memory().unwrap().len(), 4001);
}

#[test]
fn defaults_and_inheritance() {
    let lc = LimitReqLoc::default();
    assert_eq!(lc.status(), 503);
    assert_eq!(lc.log_level(), Level::Error);
    assert_eq!(lc.delay_log_level(), Level::Warn);
    assert!(!lc.dry_run());
    assert!(lc.limits().is_empty());
    let o = lc.check(&client("10.0.0.1"), &mut no_vars, 0);
    assert_eq!((o.status, o.action), (None, Action::Pass));
    let z = zone("inherit", 32768, "$binary_remote_addr", 1000);
    let parent = LimitReqLoc {
        limits: Some(Arc::new(vec![limit(&z, 1, None)])),
        log_level: Some(Level::Info),
        status: Some(429),
        dry_run: Some(true),
    };
    let mut child = LimitReqLoc::default();
    child.merge(&parent);
    assert_eq!(child.limits().len(), 1);
    assert_eq!((child.status(), child.dry_run()), (429, true));
    assert_eq!(child.delay_log_level(), Level::Info);
    let notice = LimitReqLoc {
        log_level: Some(Level::Notice),
        ..Default::default()
    };
    assert_eq!(notice.delay_log_level(), Level::Info);
}

#[test]
fn status_names() {
    let all = [
        (Status::Passed, "PASSED"),
        (Status::Delayed, "DELAYED"),
        (Status::Rejected, "REJECTED"),
        (Status::DelayedDryRun, "DELAYED_DRY_RUN"),
        (Status::RejectedDryRun, "REJECTED_DRY_RUN"),
    ];
    for (s, name) in all {
        assert_eq!(s.as_str(), name);
    }
}
