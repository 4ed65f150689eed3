//! Kept-alive upstream connections (`keepalive`, `keepalive_timeout`): reused and counted at
//! the upstream, dropped when idle too long or over the limit, `proxy_read_timeout` on each
//! wait, and a connection the upstream closed, retried without sending a POST twice.

use std::time::Duration;

use crate::common::upstream::{Answer, Upstream};
use crate::common::*;

use super::start;

/// shoal proxying `location /` to the upstream at `up_port` through `upstream ka { ...;
/// UPSTREAM }` with kept-alive connections (HTTP/1.1, `Connection ""`), and `location_extra`.
fn start_kept(port: u16, up_port: u16, upstream: &str, location_extra: &str) -> Shoal {
    start(
        port,
        &format!("upstream ka {{ server 127.0.0.1:{up_port}; {upstream} }}"),
        &format!(
            "location / {{ proxy_pass http://ka; proxy_http_version 1.1; \
             proxy_set_header Connection \"\"; {location_extra} }}"
        ),
    )
}

#[test]
fn keepalive_connections_are_reused_and_counted_at_the_upstream() {
    let up = Upstream::hello("hi");
    let plain = Upstream::hello("hi");
    let port = free_port();
    let _s = start(
        port,
        &format!(
            "upstream kept {{ server 127.0.0.1:{}; keepalive 4; }}\n\
             upstream plain {{ server 127.0.0.1:{}; }}",
            up.port(),
            plain.port()
        ),
        "location /k { proxy_pass http://kept; proxy_http_version 1.1; \
         proxy_set_header Connection \"\"; }\n\
         location /p { proxy_pass http://plain; }",
    );
    let mut c = Client::connect(port);
    for _ in 0..20 {
        let r = c.get("/k").unwrap();
        assert_eq!(r.status, 200);
        assert_eq!(r.body, b"hi");
        let r = c.get("/p").unwrap();
        assert_eq!(r.status, 200);
    }
    assert_eq!(up.request_count(), 20);
    assert_eq!(
        up.accepted(),
        1,
        "one upstream connection carried every request"
    );
    assert_eq!(
        plain.accepted(),
        20,
        "without keepalive, a connection per request"
    );
    assert!(up.requests().iter().all(|r| r.version == "HTTP/1.1"));
}

#[test]
fn an_upstream_connection_idle_past_keepalive_timeout_is_not_reused() {
    let up = Upstream::hello("hi");
    let port = free_port();
    let _s = start_kept(port, up.port(), "keepalive 4; keepalive_timeout 1s;", "");
    let mut c = Client::connect(port);
    assert_eq!(c.get("/").unwrap().status, 200);
    assert_eq!(c.get("/").unwrap().status, 200);
    assert_eq!(up.accepted(), 1, "reused while fresh");
    std::thread::sleep(Duration::from_millis(1500));
    assert_eq!(c.get("/").unwrap().status, 200);
    assert_eq!(up.accepted(), 2, "idle 1.5 s: closed, a new one made");
    assert_eq!(c.get("/").unwrap().status, 200);
    assert_eq!(up.accepted(), 2);
}

#[test]
fn a_burst_over_keepalive_n_leaves_the_n_most_recent_connections() {
    // Three requests at once on `keepalive 1`: each holds an upstream connection until all
    // three reached the upstream. Once their answers are out, the cache keeps one (the cache
    // is trimmed at the end of the worker's turn, not at each return) and closes two; the next
    // request takes the kept one.
    let arrived = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let seen = arrived.clone();
    let up = Upstream::start(move |_| {
        seen.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        wait_for("three requests at the upstream at once", || {
            (seen.load(std::sync::atomic::Ordering::SeqCst) >= 3).then_some(())
        });
        Answer::ok("burst")
    });
    let port = free_port();
    let _s = start_kept(port, up.port(), "keepalive 1;", "");
    let clients: Vec<_> = (0..3)
        .map(|_| {
            std::thread::spawn(move || {
                let r = Client::connect(port).get("/").unwrap();
                (r.status, r.body)
            })
        })
        .collect();
    for c in clients {
        assert_eq!(c.join().unwrap(), (200, b"burst".to_vec()));
    }
    assert_eq!(up.accepted(), 3);
    up.wait_open(1);
    let r = Client::connect(port).get("/").unwrap();
    assert_eq!((r.status, &r.body[..]), (200, &b"burst"[..]));
    assert_eq!(
        up.accepted(),
        3,
        "the kept connection carried the next request"
    );
    assert_eq!(arrived.load(std::sync::atomic::Ordering::SeqCst), 4);
}

#[test]
fn proxy_read_timeout_bounds_each_wait_on_a_kept_alive_connection() {
    // A kept-alive connection keeps one timer for its life: each wait for an answer is still
    // bounded from its own start, not from an earlier request's.
    let up = Upstream::start(|r| match r.target.as_str() {
        "/late" => Answer::ok("late").delay_head(Duration::from_millis(1200)),
        "/trickle" => Answer::ok("trickled").delay_body(3, Duration::from_millis(1200)),
        "/silent" => Answer::ok("never").delay_head(Duration::from_secs(6)),
        _ => Answer::ok("fast"),
    });
    let port = free_port();
    let s = start_kept(port, up.port(), "keepalive 2;", "proxy_read_timeout 2s;");
    let mut c = Client::connect(port);
    let r = c.get("/fast").unwrap();
    assert_eq!((r.status, &r.body[..]), (200, &b"fast"[..]));
    // 2.4 s after the first wait began, 1.2 s into this one.
    std::thread::sleep(Duration::from_millis(1200));
    let r = c.get("/late").unwrap();
    assert_eq!((r.status, &r.body[..]), (200, &b"late"[..]));
    std::thread::sleep(Duration::from_millis(1200));
    // The body's second piece 1.2 s after its first: within the limit between two reads.
    let r = c.get("/trickle").unwrap();
    assert_eq!((r.status, &r.body[..]), (200, &b"trickled"[..]));
    assert_eq!(up.accepted(), 1, "one upstream connection carried them all");
    let start = std::time::Instant::now();
    let r = c.get("/silent").unwrap();
    assert_eq!(r.status, 504);
    assert!(
        start.elapsed() >= Duration::from_secs(2),
        "{:?}",
        start.elapsed()
    );
    s.wait_log(
        "upstream timed out (110: Connection timed out) while reading response header from \
         upstream, client: 127.0.0.1",
        1,
    );
}

#[test]
fn a_kept_alive_connection_the_upstream_closed_is_not_an_error() {
    // Each answer says nothing against keep-alive, then the upstream closes the connection:
    // the cached connection is dead when the next request comes. Some are dropped when the
    // close is seen first; the others fail before any answer byte and are sent again on a new
    // connection. Either way every client request succeeds and nothing is logged as an error.
    let up =
        Upstream::start(|_| Answer::raw("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok").close());
    let port = free_port();
    let s = start_kept(port, up.port(), "keepalive 4;", "");
    let mut c = Client::connect(port);
    for i in 0..20 {
        let r = c.get("/").unwrap();
        assert_eq!(r.status, 200, "request {i}");
        assert_eq!(r.body, b"ok");
        if i % 2 == 0 {
            // Give the close time to arrive before the next request, half of the time.
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    assert_eq!(
        up.request_count(),
        20,
        "each request reached the upstream once"
    );
    assert!(!s.error_log().contains("[error]"), "{}", s.error_log());
}

#[test]
fn a_post_is_never_sent_twice_on_a_dead_kept_alive_connection() {
    // The upstream reads the second request of each connection and closes without a word.
    let up = Upstream::start(|r| {
        if r.seq >= 2 {
            Answer::hang_up()
        } else {
            Answer::ok("first")
        }
    });
    let port = free_port();
    let _s = start_kept(port, up.port(), "keepalive 2;", "");
    let mut c = Client::connect(port);
    assert_eq!(c.get("/warm").unwrap().status, 200);
    c.send(b"POST /once HTTP/1.1\r\nHost: localhost\r\nContent-Length: 3\r\n\r\nabc")
        .unwrap();
    let r = c.read_response().unwrap();
    assert_eq!(
        r.status, 502,
        "nginx answers 502 rather than sending the POST again"
    );
    let posts = up.requests().iter().filter(|r| r.method == "POST").count();
    assert_eq!(posts, 1, "the upstream saw the POST once");
    // A GET in the same situation is sent again on a new connection.
    let r = c.get("/warm2").unwrap();
    assert_eq!(r.status, 200);
    let r = c.get("/again").unwrap();
    assert_eq!(
        r.status, 200,
        "an idempotent request is retried on a fresh connection"
    );
}
