//! `stub_status` and the `$connections_*` variables end to end: nginx's page byte for byte in
//! shape, and counters that move as connections open, send half a head, make requests and
//! close. Each test has its own shoal, so the counters see only the test's connections.
//!
//! The page is read on one keep-alive connection (which is itself "writing" while it asks),
//! and every expected state is polled for (bounded): connections are accepted and closed by
//! the server a moment after the client acts. Expected figures are nginx 1.22.1's: a request
//! counts from its first byte (a head still arriving is a request already).

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use crate::common::{self, conf_with, free_port, Client, Shoal, WAIT};

/// The page's figures.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Page {
    active: u64,
    accepts: u64,
    handled: u64,
    requests: u64,
    reading: u64,
    writing: u64,
    waiting: u64,
}

/// Parses nginx's page, checking every byte that is not a figure.
fn parse(body: &str) -> Option<Page> {
    let rest = body.strip_prefix("Active connections: ")?;
    let (active, rest) = rest.split_once(" \nserver accepts handled requests\n ")?;
    let (counts, rest) = rest.split_once(" \nReading: ")?;
    let (reading, rest) = rest.split_once(" Writing: ")?;
    let (writing, rest) = rest.split_once(" Waiting: ")?;
    let waiting = rest.strip_suffix(" \n")?;
    let c: Vec<&str> = counts.split(' ').collect();
    if c.len() != 3 {
        return None;
    }
    let n = |s: &str| -> Option<u64> {
        (!s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()))
            .then(|| s.parse().ok())
            .flatten()
    };
    Some(Page {
        active: n(active)?,
        accepts: n(c[0])?,
        handled: n(c[1])?,
        requests: n(c[2])?,
        reading: n(reading)?,
        writing: n(writing)?,
        waiting: n(waiting)?,
    })
}

/// A keep-alive connection that reads the page and counts how many times it asked.
struct Status {
    c: Client,
    asked: u64,
}

impl Status {
    fn new(port: u16) -> Status {
        Status {
            c: Client::connect(port),
            asked: 0,
        }
    }

    fn page(&mut self) -> Page {
        let r = self.c.get("/status").expect("GET /status");
        assert_eq!(r.status, 200);
        assert_eq!(r.header("content-type"), Some("text/plain"));
        self.asked += 1;
        let body = String::from_utf8_lossy(&r.body).into_owned();
        parse(&body).unwrap_or_else(|| panic!("not nginx's stub_status page: {body:?}"))
    }

    /// Polls until `want` holds for the page (bounded by [`WAIT`]); returns that page.
    fn until(&mut self, what: &str, want: impl Fn(&Page) -> bool) -> Page {
        let deadline = Instant::now() + WAIT;
        loop {
            let p = self.page();
            if want(&p) {
                return p;
            }
            assert!(
                Instant::now() < deadline,
                "timed out waiting for {what}; last page: {p:?}"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

fn start() -> Shoal {
    let port = free_port();
    Shoal::start(
        &conf_with(
            port,
            "",
            "location = /status { stub_status; }\n\
             location = /vars { return 200 \"$connections_active $connections_reading $connections_writing $connections_waiting\"; }",
        ),
        port,
    )
}

#[test]
fn the_page_has_nginx_format() {
    let s = start();
    let r = common::get(s.port, "/status").unwrap();
    assert_eq!(r.status, 200);
    assert_eq!(r.header("content-type"), Some("text/plain"));
    let body = String::from_utf8(r.body.clone()).unwrap();
    let p = parse(&body).unwrap_or_else(|| panic!("{body:?}"));
    // The only connection is the one asking: it is writing its answer.
    assert_eq!(
        body,
        format!(
            "Active connections: 1 \nserver accepts handled requests\n {} {} {} \nReading: 0 Writing: 1 Waiting: 0 \n",
            p.accepts, p.handled, p.requests
        )
    );
    assert_eq!(p.accepts, p.handled);
    assert!(p.requests >= 1 && p.accepts >= 1, "{p:?}");
    // HEAD: the head only, with the length of the page.
    let mut c = Client::connect(s.port);
    c.send(b"HEAD /status HTTP/1.1\r\nHost: localhost\r\n\r\n")
        .unwrap();
    let h = c.read_head().unwrap();
    assert_eq!(h.status, 200);
    assert_eq!(h.header("content-type"), Some("text/plain"));
    // The next answer follows the head directly.
    assert_eq!(c.get("/index.html").unwrap().status, 200);
}

#[test]
fn post_is_not_allowed() {
    let s = start();
    let mut c = Client::connect(s.port);
    c.send(b"POST /status HTTP/1.1\r\nHost: localhost\r\nContent-Length: 3\r\n\r\nabc")
        .unwrap();
    let r = c.read_response().unwrap();
    assert_eq!(r.status, 405);
    assert!(String::from_utf8_lossy(&r.body).contains("405 Not Allowed"));
}

#[test]
fn counters_follow_connections_and_requests() {
    let s = start();
    let mut st = Status::new(s.port);
    let p0 = st.until("only the status connection", |p| {
        p.active == 1 && p.writing == 1 && p.reading == 0 && p.waiting == 0
    });
    let asked0 = st.asked;

    // Three connections that send nothing: waiting.
    let idle: Vec<TcpStream> = (0..3)
        .map(|_| TcpStream::connect(("127.0.0.1", s.port)).unwrap())
        .collect();
    let p1 = st.until("3 waiting", |p| p.waiting == 3);
    assert_eq!((p1.active, p1.reading, p1.writing), (4, 0, 1), "{p1:?}");
    assert_eq!(p1.accepts, p0.accepts + 3, "{p1:?}");
    assert_eq!(p1.handled, p1.accepts);
    assert_eq!(
        p1.requests,
        p0.requests + (st.asked - asked0),
        "idle connections make no request"
    );

    // Half a head: reading, and (nginx) a request already.
    let mut half = TcpStream::connect(("127.0.0.1", s.port)).unwrap();
    half.write_all(b"GET /index.html HTTP/1.1\r\nHo").unwrap();
    let asked1 = st.asked;
    let p2 = st.until("1 reading", |p| p.reading == 1);
    assert_eq!((p2.active, p2.writing, p2.waiting), (5, 1, 3), "{p2:?}");
    assert_eq!(p2.accepts, p0.accepts + 4);
    // nginx counts a request from its first byte (checked at the end, so the rest still runs).
    let p2_asked = st.asked - asked1;
    let counted_early = p2.requests == p1.requests + p2_asked + 1;

    // The half head completed: answered, then waiting for the next request.
    half.write_all(b"st: localhost\r\n\r\n").unwrap();
    half.set_read_timeout(Some(WAIT)).unwrap();
    let mut start = [0u8; 12];
    half.read_exact(&mut start).unwrap();
    assert_eq!(&start, b"HTTP/1.1 200");
    let p3 = st.until("4 waiting", |p| p.waiting == 4 && p.reading == 0);
    assert_eq!(p3.active, 5);
    assert_eq!(
        p3.requests,
        p1.requests + (st.asked - asked1) + 1,
        "the half-sent request counts once: {p3:?}"
    );

    // One connection with three keep-alive requests.
    let mut k = Client::connect(s.port);
    for _ in 0..3 {
        assert_eq!(k.get("/index.html").unwrap().status, 200);
    }
    let asked3 = st.asked;
    let p4 = st.until("5 waiting", |p| p.waiting == 5);
    assert_eq!(p4.accepts, p3.accepts + 1);
    assert_eq!(p4.requests, p3.requests + 3 + (st.asked - asked3));
    assert_eq!(p4.active, 6);

    // Closing them: active drops back to the status connection alone.
    drop(idle);
    drop(half);
    drop(k);
    let p5 = st.until("only the status connection again", |p| p.active == 1);
    assert_eq!((p5.reading, p5.writing, p5.waiting), (0, 1, 0), "{p5:?}");
    assert_eq!(p5.accepts, p4.accepts, "closing accepts nothing");
    assert!(
        counted_early,
        "nginx counts a request from its first byte, so half a head is a request: {p2:?} after {p1:?} \
         and {} status requests",
        p2_asked
    );
}

#[test]
fn connections_variables() {
    let s = start();
    let _idle: Vec<TcpStream> = (0..2)
        .map(|_| TcpStream::connect(("127.0.0.1", s.port)).unwrap())
        .collect();
    let mut half = TcpStream::connect(("127.0.0.1", s.port)).unwrap();
    half.write_all(b"GET / HTTP/1.1\r\n").unwrap();
    let mut c = Client::connect(s.port);
    // active reading writing waiting: the asking connection writes, one reads, two wait.
    let deadline = Instant::now() + WAIT;
    loop {
        let r = c.get("/vars").unwrap();
        assert_eq!(r.status, 200);
        let b = String::from_utf8_lossy(&r.body).into_owned();
        if b == "4 1 1 2" {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the variables never counted every connection: {b:?}"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// With two workers every figure is the sum of both (each counts on its own), connections
/// spread over them by `reuseport`; and a worker retired by a reload leaves its counts in the
/// totals, as nginx's shared counters do.
#[test]
fn counts_add_up_over_workers_and_outlive_a_retired_one() {
    let port = free_port();
    let conf = conf_with(
        port,
        "worker_processes 2;",
        "location = /status { stub_status; }",
    )
    .replace(
        &format!("listen 127.0.0.1:{port};"),
        &format!("listen 127.0.0.1:{port} reuseport;"),
    );
    let s = Shoal::start(&conf, port);
    let mut st = Status::new(s.port);
    // Two connections so far: the start's probe (it may be accepted, on either worker, after
    // the status connection is) and the status connection.
    let p0 = st.until("the probe and the status connection counted", |p| {
        p.active == 1 && p.accepts == 2
    });

    // Twenty connections, spread over both workers by their ports; ten make a request each.
    let mut conns: Vec<Client> = (0..20).map(|_| Client::connect(s.port)).collect();
    for c in conns.iter_mut().take(10) {
        assert_eq!(c.get("/index.html").unwrap().status, 200);
    }
    let asked = st.asked;
    let p1 = st.until("20 waiting", |p| p.waiting == 20);
    assert_eq!((p1.active, p1.reading, p1.writing), (21, 0, 1), "{p1:?}");
    assert_eq!(p1.accepts, p0.accepts + 20, "{p1:?}");
    assert_eq!(p1.handled, p1.accepts);
    assert_eq!(p1.requests, p0.requests + 10 + (st.asked - asked), "{p1:?}");

    drop(conns);
    let p2 = st.until("only the status connection again", |p| p.active == 1);
    assert_eq!((p2.reading, p2.writing, p2.waiting), (0, 1, 0), "{p2:?}");

    // Down to one worker: what the retired one counted stays counted.
    drop(st);
    s.prefix
        .write_conf(&conf.replace("worker_processes 2;", "worker_processes 1;"));
    s.signal(libc::SIGHUP);
    s.wait_log("reconfigured (generation 2)", 1);
    common::wait_for("one worker", || (s.worker_threads() == 1).then_some(()));
    let mut st = Status::new(s.port);
    let p3 = st.until("only the new status connection", |p| p.active == 1);
    assert_eq!(p3.accepts, p2.accepts + 1, "{p3:?} after {p2:?}");
    assert_eq!(p3.handled, p3.accepts);
    assert!(p3.requests > p2.requests, "{p3:?} after {p2:?}");
    assert_eq!((p3.reading, p3.writing, p3.waiting), (0, 1, 0), "{p3:?}");
}
