//! Which peer a request goes to: the balancing methods' distributions (weighted round robin,
//! the hashes, `random`, backup peers), and the peers a failure takes out (`proxy_next_upstream`,
//! `max_fails`, a `zone` shared between workers, no live upstreams).

use std::time::Duration;

use crate::common::client::{body_of, get_close, status_of};
use crate::common::upstream::{Answer, Upstream};
use crate::common::*;

use super::start;

#[test]
fn next_upstream_skips_a_dead_peer_and_max_fails_takes_it_out() {
    let live = Upstream::hello("live");
    let dead = free_port();
    let port = free_port();
    let s = start(
        port,
        &format!(
            "upstream pair {{ server 127.0.0.1:{dead} max_fails=1 fail_timeout=30s; \
             server 127.0.0.1:{}; }}",
            live.port()
        ),
        "location / { proxy_pass http://pair; }",
    );
    for _ in 0..10 {
        let resp = get_close(port, "/");
        assert_eq!(status_of(&resp), 200, "{resp}");
        assert_eq!(body_of(&resp), "live");
    }
    // The dead peer failed once, then was out for fail_timeout: one refusal logged.
    let log = s.error_log();
    assert_eq!(log.matches("connect() failed (111").count(), 1, "{log}");
    assert_eq!(live.request_count(), 10);
}

#[test]
fn a_zone_shares_a_dead_peer_s_failure_between_workers() {
    let live = Upstream::hello("live");
    let dead = free_port();
    let port = free_port();
    // Four workers on `reuseport` sockets: the kernel spreads the connections over them.
    let conf = format!(
        "daemon off;\nworker_processes 4;\nerror_log logs/error.log info;\n\
         events {{ worker_connections 1024; }}\n\
         http {{\n    access_log off;\n    \
         upstream pair {{ zone pair 64k; server 127.0.0.1:{dead} max_fails=1 fail_timeout=30s; \
         server 127.0.0.1:{}; }}\n    \
         server {{\n        listen 127.0.0.1:{port} reuseport;\n        \
         location / {{ proxy_pass http://pair; }}\n    }}\n}}\n",
        live.port()
    );
    let s = Shoal::start(&conf, port);
    for _ in 0..40 {
        let resp = get_close(port, "/");
        assert_eq!(status_of(&resp), 200, "{resp}");
    }
    // One worker met the dead peer; the others knew it from the zone.
    let log = s.error_log();
    assert_eq!(log.matches("connect() failed (111").count(), 1, "{log}");
    assert_eq!(live.request_count(), 40);
}

#[test]
fn weighted_round_robin_and_hashes_distribute_as_nginx() {
    let a = Upstream::hello("a");
    let b = Upstream::hello("b");
    let port = free_port();
    let _s = start(
        port,
        &format!(
            "upstream wrr {{ server 127.0.0.1:{pa} weight=3; server 127.0.0.1:{pb}; }}\n\
             upstream iph {{ ip_hash; server 127.0.0.1:{pa}; server 127.0.0.1:{pb}; }}\n\
             upstream key {{ hash $arg_k consistent; server 127.0.0.1:{pa}; server 127.0.0.1:{pb}; }}\n\
             upstream lc {{ least_conn; server 127.0.0.1:{pa}; server 127.0.0.1:{pb}; }}",
            pa = a.port(),
            pb = b.port()
        ),
        "location /wrr { proxy_pass http://wrr; }\n\
         location /iph { proxy_pass http://iph; }\n\
         location /key { proxy_pass http://key; }\n\
         location /lc { proxy_pass http://lc; }",
    );
    let mut c = Client::connect(port);
    let mut seq = String::new();
    for _ in 0..8 {
        seq.push_str(std::str::from_utf8(&c.get("/wrr").unwrap().body).unwrap());
    }
    // nginx's smooth weighted round robin for weights 3:1.
    assert_eq!(seq, "aabaaaba");
    let first = c.get("/iph").unwrap().body;
    for _ in 0..10 {
        assert_eq!(
            c.get("/iph").unwrap().body,
            first,
            "ip_hash keeps a client on one peer"
        );
    }
    let mut seen = std::collections::HashSet::new();
    for k in 0..40 {
        let one = c.get(&format!("/key?k={k}")).unwrap().body;
        assert_eq!(
            c.get(&format!("/key?k={k}")).unwrap().body,
            one,
            "same key, same peer"
        );
        seen.insert(one);
    }
    assert_eq!(seen.len(), 2, "40 keys land on both peers");
    // least_conn with no concurrency alternates like round robin.
    let x = c.get("/lc").unwrap().body;
    let y = c.get("/lc").unwrap().body;
    assert_ne!(x, y);
}

#[test]
fn no_live_upstreams_is_502_even_after_a_timeout() {
    let a = Upstream::start(|_| Answer::ok("late").delay_head(Duration::from_secs(3)));
    let b = Upstream::start(|_| Answer::ok("late").delay_head(Duration::from_secs(3)));
    let port = free_port();
    let s = start(
        port,
        &format!(
            "upstream two {{ server 127.0.0.1:{} max_fails=1 fail_timeout=30s; \
             server 127.0.0.1:{} max_fails=1 fail_timeout=30s; }}",
            a.port(),
            b.port()
        ),
        "location / { proxy_pass http://two; proxy_read_timeout 300ms; }",
    );
    // Both peers time out (and are out for 30 s): 504.
    let r = get_close(port, "/first");
    assert_eq!(status_of(&r), 504, "{r}");
    // Now none is live: nginx's 502, whatever failed before.
    let r = get_close(port, "/second");
    assert_eq!(status_of(&r), 502, "{r}");
    s.wait_log("no live upstreams while connecting to upstream", 1);
}

#[test]
fn random_hash_and_backup_peers() {
    let a = Upstream::hello("a");
    let b = Upstream::hello("b");
    let dead = free_port();
    let port = free_port();
    let _s = start(
        port,
        &format!(
            "upstream rnd {{ random two least_conn; server 127.0.0.1:{pa}; server 127.0.0.1:{pb}; }}\n\
             upstream hs {{ hash $arg_k; server 127.0.0.1:{pa}; server 127.0.0.1:{pb}; }}\n\
             upstream bk {{ server 127.0.0.1:{dead}; server 127.0.0.1:{pb} backup; }}\n\
             upstream dn {{ server 127.0.0.1:{pa} down; server 127.0.0.1:{pb}; }}",
            pa = a.port(),
            pb = b.port()
        ),
        "location /rnd { proxy_pass http://rnd; }\n\
         location /hs { proxy_pass http://hs; }\n\
         location /bk { proxy_pass http://bk; }\n\
         location /dn { proxy_pass http://dn; }",
    );
    let mut c = Client::connect(port);
    let mut counts = std::collections::HashMap::new();
    for _ in 0..200 {
        *counts.entry(c.get("/rnd").unwrap().body).or_insert(0) += 1;
    }
    assert_eq!(
        counts.len(),
        2,
        "random spreads over both peers: {counts:?}"
    );
    assert!(
        counts.values().all(|&n| n >= 40),
        "roughly even: {counts:?}"
    );
    let mut seen = std::collections::HashSet::new();
    for k in 0..30 {
        let one = c.get(&format!("/hs?k=key{k}")).unwrap().body;
        for _ in 0..3 {
            assert_eq!(c.get(&format!("/hs?k=key{k}")).unwrap().body, one);
        }
        seen.insert(one);
    }
    assert_eq!(seen.len(), 2, "hash spreads 30 keys over both peers");
    // The primary refuses: the backup answers.
    for _ in 0..5 {
        assert_eq!(c.get("/bk").unwrap().body, b"b");
    }
    // A `down` peer is never chosen.
    for _ in 0..10 {
        assert_eq!(c.get("/dn").unwrap().body, b"b");
    }
    assert_eq!(a.requests().iter().filter(|r| r.target == "/dn").count(), 0);
}
