//! `resolver` and `resolver_timeout` end to end: `proxy_pass` with variables naming a host a
//! DNS server started here answers for (a UDP socket on 127.0.0.1 answering from a table and
//! counting questions). Answers kept for their TTL or `valid=`, NXDOMAIN and silence as
//! nginx reports them (502 and its log lines), the next server asked when one refuses, a
//! truncated answer asked again over TCP, `ipv6=off`, and the configuration's errors.

use crate::common::dns::{v4, Dns, Entry, A, AAAA};
use crate::common::upstream::Upstream;
use crate::common::{free_port, get, Shoal};

fn conf(port: u16, http: &str, location: &str) -> String {
    format!(
        "daemon off;\nerror_log logs/error.log info;\nevents {{ }}\n\
         http {{\n    access_log off;\n{http}\n    server {{\n        \
         listen 127.0.0.1:{port};\n        server_name localhost;\n        \
         location / {{\n{location}\n        }}\n    }}\n}}\n"
    )
}

/// A location proxying to `$name` on the upstream's port, through `resolver` (`res`).
fn proxied(port: u16, res: &str, up: &Upstream) -> Shoal {
    let location = format!(
        "            {res}\n            set $name $arg_h;\n            \
         proxy_pass http://$name:{}/;",
        up.port()
    );
    Shoal::start(&conf(port, "", &location), port)
}

#[test]
fn a_name_is_resolved_and_kept_for_its_ttl() {
    let dns = Dns::start(&[("backend.test", v4("127.0.0.1", 30))]);
    let up = Upstream::hello("from backend");
    let port = free_port();
    let s = proxied(port, &format!("resolver {};", dns.addr()), &up);
    for _ in 0..3 {
        let r = get(port, "/?h=backend.test").unwrap();
        assert_eq!(r.status, 200, "{}", s.error_log());
        assert_eq!(r.body, b"from backend");
    }
    assert_eq!(
        dns.asked("backend.test", A),
        1,
        "one question, then the cache"
    );
    assert_eq!(dns.asked("backend.test", AAAA), 1);
    // Case does not make another name.
    assert_eq!(get(port, "/?h=BACKEND.test").unwrap().status, 200);
    assert_eq!(dns.asked("backend.test", A), 1);
}

#[test]
fn a_zero_ttl_is_asked_again_unless_valid_says() {
    let dns = Dns::start(&[("zero.test", v4("127.0.0.1", 0))]);
    let up = Upstream::hello("ok");
    let port = free_port();
    let _s = proxied(port, &format!("resolver {};", dns.addr()), &up);
    for _ in 0..2 {
        assert_eq!(get(port, "/?h=zero.test").unwrap().status, 200);
    }
    assert_eq!(dns.asked("zero.test", A), 2);

    let port = free_port();
    let _s = proxied(
        port,
        &format!("resolver {} valid=1h ipv6=off;", dns.addr()),
        &up,
    );
    for _ in 0..2 {
        assert_eq!(get(port, "/?h=zero.test").unwrap().status, 200);
    }
    assert_eq!(dns.asked("zero.test", A), 3, "valid= keeps it");
    assert_eq!(dns.asked("zero.test", AAAA), 2, "ipv6=off asks no AAAA");
}

#[test]
fn no_such_name_is_a_502_with_nginx_line() {
    let dns = Dns::start(&[("gone.test", Entry::NxDomain)]);
    let up = Upstream::hello("never");
    let port = free_port();
    let s = proxied(port, &format!("resolver {};", dns.addr()), &up);
    let r = get(port, "/?h=gone.test").unwrap();
    assert_eq!(r.status, 502);
    s.wait_log(
        "gone.test could not be resolved (3: Host not found), client: 127.0.0.1",
        1,
    );
    // Kept (10 s by default): not asked again at once.
    assert_eq!(get(port, "/?h=gone.test").unwrap().status, 502);
    assert_eq!(dns.asked("gone.test", A), 1);
    dns.set("fail.test", Entry::ServFail);
    assert_eq!(get(port, "/?h=fail.test").unwrap().status, 502);
    s.wait_log("fail.test could not be resolved (2: Server failure)", 1);
    assert_eq!(up.accepted(), 0);
}

#[test]
fn silence_times_out_at_resolver_timeout() {
    let dns = Dns::start(&[("slow.test", Entry::Silent)]);
    let up = Upstream::hello("never");
    let port = free_port();
    let s = proxied(
        port,
        &format!("resolver {}; resolver_timeout 1s;", dns.addr()),
        &up,
    );
    let r = get(port, "/?h=slow.test").unwrap();
    assert_eq!(r.status, 502);
    s.wait_log(
        "slow.test could not be resolved (110: Operation timed out)",
        1,
    );
    // A timeout is not kept.
    dns.set("slow.test", v4("127.0.0.1", 30));
    assert_eq!(get(port, "/?h=slow.test").unwrap().status, 200);
}

#[test]
fn without_a_resolver_a_name_is_a_502() {
    let up = Upstream::hello("never");
    let port = free_port();
    let s = proxied(port, "", &up);
    assert_eq!(get(port, "/?h=backend.test").unwrap().status, 502);
    s.wait_log("no resolver defined to resolve backend.test", 1);
    // An address needs no resolver.
    assert_eq!(get(port, "/?h=127.0.0.1").unwrap().status, 200);
}

#[test]
fn a_refusing_server_passes_the_question_on() {
    let dns = Dns::start(&[("two.test", v4("127.0.0.1", 30))]);
    let up = Upstream::hello("second");
    // A UDP port nobody listens on: the kernel refuses the datagram.
    let closed = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let closed_port = closed.local_addr().unwrap().port();
    drop(closed);
    let port = free_port();
    let _s = proxied(
        port,
        &format!("resolver 127.0.0.1:{closed_port} {};", dns.addr()),
        &up,
    );
    for name in ["two.test", "Two.test"] {
        let r = get(port, &format!("/?h={name}")).unwrap();
        assert_eq!(r.status, 200);
        assert_eq!(r.body, b"second");
    }
}

#[test]
fn a_truncated_answer_is_asked_again_over_tcp() {
    let dns = Dns::start(&[(
        "big.test",
        Entry::Truncated(vec!["127.0.0.1".parse().unwrap()], 30),
    )]);
    let up = Upstream::hello("over tcp");
    let port = free_port();
    let _s = proxied(port, &format!("resolver {} ipv6=off;", dns.addr()), &up);
    let r = get(port, "/?h=big.test").unwrap();
    assert_eq!(r.status, 200);
    assert_eq!(r.body, b"over tcp");
    assert_eq!(dns.asked_tcp(), 1);
}

#[test]
fn several_addresses_are_peers_in_turn() {
    let a = Upstream::hello("a");
    // Another address of the loopback, the same port: a second server there.
    let b_listener = std::net::TcpListener::bind(("127.0.0.2", a.port()));
    let Ok(b_listener) = b_listener else {
        // 127.0.0.2 is not usable here (or the port is taken on it): nothing to check.
        return;
    };
    drop(b_listener);
    let dns = Dns::start(&[(
        "many.test",
        Entry::Addrs(
            vec!["127.0.0.1".parse().unwrap(), "127.0.0.2".parse().unwrap()],
            30,
        ),
    )]);
    let port = free_port();
    let s = proxied(port, &format!("resolver {};", dns.addr()), &a);
    // Each request starts at a random address (as nginx's); 127.0.0.2 refuses, and the
    // next address answers (proxy_next_upstream error).
    for _ in 0..24 {
        assert_eq!(get(port, "/?h=many.test").unwrap().status, 200);
    }
    s.wait_log("connect() failed (111: Connection refused)", 1);
}

/// `shoal -t` on `conf`: (success, stderr).
fn test_conf(conf: &str) -> (bool, String) {
    let p = crate::common::Prefix::new();
    p.write_conf(conf);
    let out = p.run(&["-t"]);
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn resolver_parameters_of_later_nginx() {
    // `ipv4=` (1.23.1+) and `status_zone=` (accepted, counting nothing).
    let ok = conf(
        free_port(),
        "resolver 127.0.0.1:53 ipv4=on ipv6=off status_zone=dns valid=5s;",
        "",
    );
    let (passed, err) = test_conf(&ok);
    assert!(passed, "{err}");
    for (line, message) in [
        (
            "resolver 127.0.0.1 ipv4=off ipv6=off;",
            "\"ipv4\" and \"ipv6\" cannot both be \"off\"",
        ),
        (
            "resolver 127.0.0.1 ipv4=maybe;",
            "invalid parameter: ipv4=maybe",
        ),
        ("resolver 127.0.0.1 valid=x;", "invalid parameter: valid=x"),
    ] {
        let (passed, err) = test_conf(&conf(free_port(), line, ""));
        assert!(!passed);
        assert!(err.contains(&format!("[emerg] {message} in ")), "{err}");
    }
}

#[test]
fn upstream_resolve_needs_a_zone_and_a_resolver() {
    let no_zone = conf(
        free_port(),
        "resolver 127.0.0.1;\nupstream app { server app.test resolve; }",
        "proxy_pass http://app;",
    );
    let (passed, err) = test_conf(&no_zone);
    assert!(!passed);
    assert!(
        err.contains("resolving names at run time requires upstream \"app\" in ")
            && err.contains("shoal.conf:7 to be in shared memory"),
        "{err}"
    );
    let no_resolver = conf(
        free_port(),
        "upstream app { zone app 64k; server app.test resolve; }",
        "proxy_pass http://app;",
    );
    let (passed, err) = test_conf(&no_resolver);
    assert!(!passed);
    assert!(
        err.contains("no resolver defined to resolve names at run time in upstream \"app\" in "),
        "{err}"
    );
    // The resolver may be the block's own (1.27.3+); the name is not looked up at -t.
    let own = conf(
        free_port(),
        "upstream app { zone app 64k; resolver 127.0.0.1:1 valid=1s; resolver_timeout 1s;\n\
         server no-such-name.test:8080 resolve weight=2; server 127.0.0.1:1 backup; }",
        "proxy_pass http://app;",
    );
    let (passed, err) = test_conf(&own);
    assert!(passed, "{err}");
}

#[test]
fn upstream_resolve_follows_the_name() {
    let dns = Dns::start(&[("app.test", v4("127.0.0.1", 1))]);
    let up = Upstream::hello("app");
    let port = free_port();
    let http = format!(
        // `valid=`: the error answer below is not kept for nginx's 10 s either.
        "resolver {} valid=1s;\nupstream app {{ zone app 64k; server app.test:{} resolve; }}",
        dns.addr(),
        up.port()
    );
    let s = Shoal::start(&conf(port, &http, "proxy_pass http://app;"), port);
    let r = get(port, "/").unwrap();
    assert_eq!(r.status, 200, "{}", s.error_log());
    assert_eq!(r.body, b"app");
    // A failed lookup keeps the addresses the name had.
    dns.set("app.test", Entry::NxDomain);
    std::thread::sleep(std::time::Duration::from_millis(2100));
    assert_eq!(get(port, "/").unwrap().status, 200);
    s.wait_log(
        "app.test could not be resolved (3: Host not found) in upstream \"app\"",
        1,
    );
    // A new address (where nothing listens): the upstream follows it.
    dns.set("app.test", v4("127.0.0.3", 1));
    crate::common::wait_for("the new address to be used", || {
        std::thread::sleep(std::time::Duration::from_millis(200));
        (get(port, "/").unwrap().status == 502).then_some(())
    });
    assert!(s.error_log().contains("127.0.0.3"), "{}", s.error_log());
}

#[test]
fn requests_at_the_same_time_share_one_question() {
    let dns = Dns::start(&[(
        "busy.test",
        Entry::Slow(
            vec!["127.0.0.1".parse().unwrap()],
            30,
            std::time::Duration::from_millis(500),
        ),
    )]);
    let up = Upstream::hello("shared");
    let port = free_port();
    let s = proxied(port, &format!("resolver {} ipv6=off;", dns.addr()), &up);
    let clients: Vec<_> = (0..5)
        .map(|_| std::thread::spawn(move || get(port, "/?h=busy.test").map(|r| r.status)))
        .collect();
    for c in clients {
        let status = c.join().unwrap();
        assert_eq!(status.ok(), Some(200), "{}\n{}", s.error_log(), s.stderr());
    }
    assert_eq!(dns.asked("busy.test", A), 1);
}

/// Requests whose URLs made upstreams of their own, overlapping on one worker, each keep
/// their own peer state (a later one used to take the earlier one's place).
#[test]
fn overlapping_requests_to_addresses_from_variables() {
    let up = Upstream::start(|_| {
        crate::common::upstream::Answer::ok("slow")
            .delay_head(std::time::Duration::from_millis(300))
    });
    let port = free_port();
    let s = proxied(port, "", &up);
    let clients: Vec<_> = (0..4)
        .map(|_| std::thread::spawn(move || get(port, "/?h=127.0.0.1").map(|r| r.status)))
        .collect();
    for c in clients {
        let status = c.join().unwrap();
        assert_eq!(status.ok(), Some(200), "{}", s.stderr());
    }
}
