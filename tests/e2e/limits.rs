//! Connection limits and delays, end to end: `limit_conn` counts the requests in flight per
//! key and gives the count back when each ends; `limit_req` with `burst` delays the excess on
//! the worker's timer (the connection is held, others are served); `auth_delay` holds a 401.

use std::time::{Duration, Instant};

use crate::common::upstream::{Answer, Upstream};
use crate::common::{free_port, Shoal};

fn conf(port: u16, http: &str, server: &str) -> String {
    format!(
        "daemon off;\nerror_log logs/error.log info;\nevents {{ }}\n\
         http {{\n    access_log logs/access.log;\n{http}\n    server {{\n        \
         listen 127.0.0.1:{port};\n        server_name localhost;\n        root html;\n\
         {server}\n    }}\n}}\n"
    )
}

#[test]
fn limit_conn_counts_requests_in_flight() {
    let up = Upstream::start(|_| Answer::ok("slow").delay_head(Duration::from_millis(800)));
    let port = free_port();
    let s = Shoal::start(
        &conf(
            port,
            "limit_conn_zone $binary_remote_addr zone=addr:1m;",
            &format!(
                "location / {{ proxy_pass {}; limit_conn addr 1; \
                 add_header X-C $limit_conn_status always; }}",
                up.url()
            ),
        ),
        port,
    );
    let first = std::thread::spawn(move || crate::common::get(port, "/a").map(|r| r.status));
    up.wait_requests(1);
    let second = crate::common::get(port, "/b").unwrap();
    assert_eq!(second.status, 503);
    assert_eq!(second.header("x-c"), Some("REJECTED"));
    assert_eq!(first.join().unwrap().unwrap(), 200);
    // The first one's count went back when it ended.
    let third = crate::common::get(port, "/c").unwrap();
    assert_eq!((third.status, third.header("x-c")), (200, Some("PASSED")));
    s.wait_log("limiting connections by zone \"addr\"", 1);
}

#[test]
fn limit_req_delays_the_burst_without_holding_the_worker() {
    let port = free_port();
    let s = Shoal::start(
        &conf(
            port,
            "limit_req_zone $uri zone=slow:1m rate=2r/s;",
            "location /limited/ { alias html/; limit_req zone=slow burst=5; \
             add_header X-L $limit_req_status; }\n\
             location /free { return 200 free; }",
        ),
        port,
    );
    let started = Instant::now();
    let delayed: Vec<_> = (0..3)
        .map(|_| {
            std::thread::spawn(move || {
                crate::common::get(port, "/limited/index.html")
                    .map(|r| r.header("x-l").unwrap_or_default().as_bytes().to_vec())
            })
        })
        .collect();
    // Meanwhile another client is answered at once.
    std::thread::sleep(Duration::from_millis(100));
    let t = Instant::now();
    assert_eq!(crate::common::get(port, "/free").unwrap().body, b"free");
    assert!(t.elapsed() < Duration::from_millis(300));
    let mut bodies: Vec<Vec<u8>> = delayed
        .into_iter()
        .map(|h| h.join().unwrap().unwrap())
        .collect();
    bodies.sort();
    // One passed at once, two waited their turn at 2 per second.
    assert_eq!(
        bodies,
        vec![b"DELAYED".to_vec(), b"DELAYED".to_vec(), b"PASSED".to_vec()]
    );
    assert!(
        started.elapsed() >= Duration::from_millis(900),
        "{:?}",
        started.elapsed()
    );
    s.wait_log("delaying request, excess:", 1);
}

#[test]
fn auth_delay_holds_a_401() {
    let port = free_port();
    let s = Shoal::start(
        &conf(
            port,
            "",
            "location / { auth_basic on; auth_basic_user_file /nonexistent-dir/pw; auth_delay 700ms; }\n\
             location /p/ { auth_basic on; auth_basic_user_file pw; auth_delay 700ms; }",
        ),
        port,
    );
    std::fs::write(s.prefix.join("conf/pw"), "u:{PLAIN}p\n").unwrap();
    let t = Instant::now();
    assert_eq!(crate::common::get(port, "/p/x").unwrap().status, 401);
    assert!(
        t.elapsed() >= Duration::from_millis(650),
        "{:?}",
        t.elapsed()
    );
    // A 403 (the file is missing) is not delayed.
    let t = Instant::now();
    let mut c = crate::common::Client::connect(port);
    c.send(b"GET /x HTTP/1.1\r\nHost: localhost\r\nAuthorization: Basic dTpw\r\n\r\n")
        .unwrap();
    assert_eq!(c.read_response().unwrap().status, 403);
    assert!(
        t.elapsed() < Duration::from_millis(600),
        "{:?}",
        t.elapsed()
    );
    s.wait_log("delaying unauthorized request", 1);
}
