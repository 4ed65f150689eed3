//! Idle HTTP/2 connections park as HTTP/1's do (`h1/park.rs`, `h2/drive.rs`): one with no
//! stream for a sweep interval gives up its task and waits in the worker's parked set (seen
//! here as its socket in that epoll), then goes on where it was: its next streams are
//! answered on the same connection, with its HPACK state, a graceful stop reaches it with a
//! GOAWAY.

use crate::common::{wait_for, Shoal};
use crate::h2::conf;
use crate::h2_hostile::{get_block, END_HEADERS, END_STREAM, GOAWAY, H2, HEADERS};
use crate::keepalive_park::parked;

/// Asks `path` on `stream` and reads its answer's body to the end.
fn ask(c: &mut H2, stream: u32, path: &str) -> Vec<u8> {
    c.frame(
        HEADERS,
        END_STREAM | END_HEADERS,
        stream,
        &get_block(path, &[]),
    );
    let mut body = Vec::new();
    loop {
        let f = c
            .until(|f| f.2 == stream || f.0 == GOAWAY)
            .expect("an answer");
        assert_ne!(f.0, GOAWAY, "the connection went away");
        if f.0 == 0 {
            body.extend_from_slice(&f.3);
        }
        if f.1 & END_STREAM != 0 {
            return body;
        }
    }
}

#[test]
fn idle_http2_connections_park_and_go_on() {
    let port = crate::common::free_port();
    let s = Shoal::start(
        &conf(
            port,
            "",
            "location = /n { return 200 \"$connection $connection_requests\"; }",
        ),
        port,
    );
    let mut conns: Vec<H2> = (0..5).map(|_| H2::connect(port, &[])).collect();
    let firsts: Vec<Vec<u8>> = conns.iter_mut().map(|c| ask(c, 1, "/n")).collect();
    wait_for("5 parked connections", || {
        (parked(s.pid) == 5).then_some(())
    });
    // Each answers again as the same connection, its requests counted on; the answer's
    // repeated fields (indexed before the park, forgotten by it) decode right.
    for (c, first) in conns.iter_mut().zip(&firsts) {
        let number = String::from_utf8_lossy(first);
        let number = number.split(' ').next().unwrap();
        assert_eq!(ask(c, 3, "/n"), format!("{number} 2").into_bytes());
        assert_eq!(ask(c, 5, "/n"), format!("{number} 3").into_bytes());
    }
    // Parked again, a graceful stop sends each its GOAWAY.
    wait_for("5 parked again", || (parked(s.pid) == 5).then_some(()));
    s.signal(libc::SIGQUIT);
    for c in &mut conns {
        assert!(c.until(|f| f.0 == GOAWAY).is_some(), "a GOAWAY");
    }
}
