//! Balancing in `stream {}`: weights (seen in the access log), `proxy_next_upstream` and
//! `max_fails`, every peer failing, `backup` and `down`, `hash ... consistent` and `random`.

use crate::common::free_port;

use super::{dead_port, log_lines, start, tcp, Echo};

#[test]
fn tcp_round_robin_with_weights_and_the_access_log() {
    let (a, b) = (Echo::start("A:"), Echo::start("B:"));
    let port = free_port();
    let s = start(
        &format!(
            "upstream be {{ server 127.0.0.1:{} weight=2; server 127.0.0.1:{}; }}\n\
             server {{ listen 127.0.0.1:{port}; proxy_pass be; }}",
            a.port, b.port
        ),
        port,
    );
    let answers: Vec<String> = (0..6)
        .map(|_| String::from_utf8(tcp(port, b"hello")).unwrap())
        .collect();
    assert_eq!(
        answers,
        ["A:hello", "B:hello", "A:hello", "A:hello", "B:hello", "A:hello"],
        "smooth weighted round robin, 2:1"
    );
    let lines = log_lines(&s, 6);
    assert_eq!(
        lines[0],
        format!("TCP 200 7 5 \"127.0.0.1:{}\" \"5\" \"7\"", a.port)
    );
    let log = s.error_log();
    assert!(
        log.contains(&format!("connected to 127.0.0.1:{port}")),
        "{log}"
    );
    assert!(
        log.contains("client disconnected, bytes from/to client:5/7, bytes from/to upstream:7/5"),
        "{log}"
    );
}

#[test]
fn next_upstream_skips_a_dead_peer_and_max_fails_keeps_it_out() {
    let a = Echo::start("A:");
    let dead = dead_port();
    let (port, off) = (free_port(), free_port());
    let s = start(
        &format!(
            "upstream be {{ server 127.0.0.1:{dead} max_fails=1 fail_timeout=30s; server 127.0.0.1:{}; }}\n\
             upstream be2 {{ server 127.0.0.1:{dead}; server 127.0.0.1:{}; }}\n\
             server {{ listen 127.0.0.1:{port}; proxy_pass be; }}\n\
             server {{ listen 127.0.0.1:{off}; proxy_pass be2; proxy_next_upstream off; }}",
            a.port, a.port
        ),
        port,
    );
    for _ in 0..4 {
        assert_eq!(tcp(port, b"x"), b"A:x");
    }
    let lines = log_lines(&s, 4);
    assert_eq!(
        lines[0],
        format!(
            "TCP 200 3 1 \"127.0.0.1:{dead}, 127.0.0.1:{}\" \"0, 1\" \"0, 3\"",
            a.port
        ),
        "the dead peer tried first, then the live one"
    );
    // Failed once within fail_timeout: not tried again.
    for l in &lines[1..] {
        assert_eq!(
            l,
            &format!("TCP 200 3 1 \"127.0.0.1:{}\" \"1\" \"3\"", a.port)
        );
    }
    assert_eq!(
        s.error_log()
            .matches("(111: Connection refused) while connecting to upstream")
            .count(),
        1
    );
    // Without proxy_next_upstream a failed connect ends the session: 502; the next session
    // goes to the other peer.
    assert_eq!(tcp(off, b"y"), b"");
    assert_eq!(tcp(off, b"y"), b"A:y");
    let lines = log_lines(&s, 6);
    assert_eq!(
        lines[4],
        format!("TCP 502 0 0 \"127.0.0.1:{dead}\" \"0\" \"0\"")
    );
}

#[test]
fn every_peer_failing_is_502_then_no_live_upstreams() {
    let (dead1, dead2) = (dead_port(), dead_port());
    let port = free_port();
    let s = start(
        &format!(
            "upstream be {{ server 127.0.0.1:{dead1}; server 127.0.0.1:{dead2}; }}\n\
             server {{ listen 127.0.0.1:{port}; proxy_pass be; proxy_connect_timeout 2s; }}"
        ),
        port,
    );
    assert_eq!(tcp(port, b"x"), b"");
    assert_eq!(tcp(port, b"x"), b"");
    let lines = log_lines(&s, 2);
    assert_eq!(
        lines[0],
        format!("TCP 502 0 0 \"127.0.0.1:{dead1}, 127.0.0.1:{dead2}\" \"0, 0\" \"0, 0\"")
    );
    assert_eq!(lines[1], "TCP 502 0 0 \"be\" \"0\" \"0\"");
    s.wait_log(
        "no live upstreams while connecting to upstream, client: 127.0.0.1",
        1,
    );
}

#[test]
fn backup_and_down_peers() {
    let (a, b, c) = (Echo::start("A:"), Echo::start("B:"), Echo::start("C:"));
    let port = free_port();
    let _s = start(
        &format!(
            "upstream be {{ server 127.0.0.1:{} down; server 127.0.0.1:{dead}; server 127.0.0.1:{} backup; }}\n\
             upstream lc {{ least_conn; server 127.0.0.1:{}; }}\n\
             server {{ listen 127.0.0.1:{port}; proxy_pass be; }}",
            a.port,
            b.port,
            c.port,
            dead = dead_port()
        ),
        port,
    );
    // The primary that is not down refuses: the backup answers.
    assert_eq!(tcp(port, b"q"), b"B:q");
    assert_eq!(tcp(port, b"q"), b"B:q");
}

#[test]
fn consistent_hash_keeps_a_key_on_one_peer_and_random_spreads() {
    let echoes: Vec<Echo> = ["A:", "B:", "C:"].iter().map(|t| Echo::start(t)).collect();
    let (port, rport) = (free_port(), free_port());
    let servers: String = echoes
        .iter()
        .map(|e| format!("server 127.0.0.1:{};", e.port))
        .collect();
    let _s = start(
        &format!(
            "map $server_port $k {{ default fixed-key; }}\n\
             upstream h {{ hash $k consistent; {servers} }}\n\
             upstream r {{ random two least_conn; {servers} }}\n\
             server {{ listen 127.0.0.1:{port}; proxy_pass h; }}\n\
             server {{ listen 127.0.0.1:{rport}; proxy_pass r; }}"
        ),
        port,
    );
    let first = tcp(port, b"k");
    for _ in 0..5 {
        assert_eq!(tcp(port, b"k"), first);
    }
    let mut seen = std::collections::HashSet::new();
    for _ in 0..30 {
        seen.insert(tcp(rport, b"r"));
    }
    assert!(seen.len() >= 2, "random used one peer only: {seen:?}");
}
