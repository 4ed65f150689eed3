//! Buffering between a fast and a slow side: `proxy_buffering` freeing the upstream while a
//! slow client reads, `proxy_request_buffering off` streaming the body, and `aio_write` sending
//! the temporary file through the thread pool.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use crate::common::client::{exchange_text, status_of};
use crate::common::upstream::{Answer, Upstream};
use crate::common::*;

use super::start;

/// A client that asks for `path` and reads only the answer's head for now.
fn slow_client(port: u16, path: &str) -> TcpStream {
    let mut slow = TcpStream::connect(("127.0.0.1", port)).unwrap();
    slow.set_read_timeout(Some(WAIT)).unwrap();
    slow.write_all(format!("GET {path} HTTP/1.1\r\nHost: localhost\r\n\r\n").as_bytes())
        .unwrap();
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        slow.read_exact(&mut byte).unwrap();
        head.push(byte[0]);
    }
    slow
}

#[test]
fn proxy_buffering_frees_the_upstream_while_a_slow_client_reads() {
    // 16 MiB: more than the sockets between them can hold, so the rest waits in shoal (memory,
    // then the temporary file) or, without buffering, in the upstream.
    const SIZE: usize = 16 << 20;
    let body: Vec<u8> = (0..SIZE).map(|i| (i % 251) as u8).collect();
    let b = body.clone();
    let up = Upstream::start(move |_| Answer::ok(b.clone()));
    let port = free_port();
    let tmp = tempfile::tempdir().unwrap();
    let _s = start(
        port,
        &format!("proxy_temp_path {};", tmp.path().display()),
        &format!(
            "location /on/ {{ proxy_pass {u}/; }}
             location /off/ {{ proxy_pass {u}/; proxy_buffering off; }}
             location /nofile/ {{ proxy_pass {u}/; proxy_max_temp_file_size 0; }}",
            u = up.url()
        ),
    );
    for (prefix, frees) in [("/on/", true), ("/off/", false), ("/nofile/", false)] {
        let mut slow = slow_client(port, &format!("{prefix}big"));
        if frees {
            // The whole answer leaves the upstream, whose connection (no keepalive) closes,
            // while the client has read nothing of the body yet.
            wait_for("the upstream connection closed", || {
                (up.open() == 0).then_some(())
            });
        } else {
            // 16 MiB cannot all be in flight: the upstream is still writing.
            assert_eq!(up.open(), 1, "{prefix}: the upstream waits for the client");
        }
        // The slow client now reads everything, intact.
        let mut got = vec![0u8; SIZE];
        slow.read_exact(&mut got).unwrap();
        assert!(got == body, "{prefix}: the body arrived intact");
        wait_for("the upstream connection closed", || {
            (up.open() == 0).then_some(())
        });
    }
}

#[test]
fn proxy_request_buffering_off_streams_the_body_upstream() {
    let up = Upstream::echo();
    let port = free_port();
    let _s = start(
        port,
        "",
        &format!(
            "location /s/ {{ proxy_pass {u}; proxy_request_buffering off; proxy_http_version 1.1; }}\n\
             location /b/ {{ proxy_pass {u}; }}",
            u = up.url()
        ),
    );
    // Half a body: streamed, the upstream is contacted before the rest comes; buffered, not.
    for (prefix, streams) in [("/b/", false), ("/s/", true)] {
        let before = up.accepted();
        let mut c = TcpStream::connect(("127.0.0.1", port)).unwrap();
        c.set_read_timeout(Some(WAIT)).unwrap();
        c.write_all(
            format!(
                "POST {prefix}x HTTP/1.1\r\nHost: localhost\r\nContent-Length: 10\r\n\r\nhello"
            )
            .as_bytes(),
        )
        .unwrap();
        if streams {
            wait_for("the upstream contacted mid-body", || {
                (up.accepted() > before).then_some(())
            });
        } else {
            // Give a buffering proxy every chance to connect early: it must not.
            std::thread::sleep(Duration::from_millis(200));
            assert_eq!(
                up.accepted(),
                before,
                "{prefix}: buffered until the body is in"
            );
        }
        c.write_all(b"world").unwrap();
        let mut out = Vec::new();
        let mut buf = [0u8; 4096];
        while !String::from_utf8_lossy(&out).contains("helloworld") {
            let n = c.read(&mut buf).unwrap();
            assert!(
                n > 0,
                "{prefix}: closed early: {}",
                String::from_utf8_lossy(&out)
            );
            out.extend_from_slice(&buf[..n]);
        }
        assert_eq!(up.last().body, b"helloworld", "{prefix}");
        assert_eq!(up.last().header("content-length"), Some("10"), "{prefix}");
    }
    // A chunked body to an HTTP/1.1 upstream goes chunked, as it comes.
    let r = exchange_text(
        port,
        "POST /s/c HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: chunked\r\n\
         Connection: close\r\n\r\n3\r\nabc\r\n4\r\ndefg\r\n0\r\n\r\n",
    );
    assert_eq!(status_of(&r), 200, "{r}");
    let seen = up.last();
    assert!(seen.chunked, "sent upstream chunked");
    assert_eq!(seen.body, b"abcdefg");
    // A keep-alive connection goes on after a streamed body.
    let mut c = Client::connect(port);
    c.send(b"POST /s/k HTTP/1.1\r\nHost: localhost\r\nContent-Length: 2\r\n\r\nok")
        .unwrap();
    assert_eq!(c.read_response().unwrap().status, 200);
    assert_eq!(c.get("/b/after").unwrap().status, 200);
}

/// The completed-task count of pool `name` in the latest periodic report (debug level, every
/// 10 s) logged after `after` bytes of the error log.
fn pool_completed(s: &Shoal, name: &str, after: usize) -> Option<u64> {
    let log = s.error_log();
    let prefix = format!("thread pool \"{name}\" of worker 0: ");
    let line = log
        .get(after..)?
        .lines()
        .rev()
        .find(|l| l.contains(&prefix))?;
    let rest = &line[line.find(&prefix)? + prefix.len()..];
    // "Q queued, B busy, N completed, O overflows"
    rest.split(", ")
        .find_map(|part| part.strip_suffix(" completed"))
        .and_then(|n| n.parse().ok())
}

#[test]
fn aio_write_sends_the_temporary_file_through_the_pool() {
    // A slow client makes the answer spill to the temporary file. With `aio threads` and
    // `aio_write on` the file is written by the pool; without `aio_write` it is written on the
    // worker, and its pages being in memory, read back there too: that pool does nothing.
    const SIZE: usize = 16 << 20;
    let body: Vec<u8> = (0..SIZE).map(|i| (i % 253) as u8).collect();
    let b = body.clone();
    let up = Upstream::start(move |_| Answer::ok(b.clone()));
    let port = free_port();
    let tmp = tempfile::tempdir().unwrap();
    let conf = format!(
        "daemon off;\nworker_processes 1;\nerror_log logs/error.log debug;\n\
         thread_pool w threads=2;\nthread_pool r threads=2;\n\
         events {{ worker_connections 1024; }}\n\
         http {{\n    proxy_temp_path {tmp};\n    server {{\n        \
         listen 127.0.0.1:{port};\n        \
         location /w/ {{ proxy_pass {u}/; aio threads=w; aio_write on; }}\n        \
         location /r/ {{ proxy_pass {u}/; aio threads=r; }}\n    }}\n}}\n",
        tmp = tmp.path().display(),
        u = up.url()
    );
    let s = Shoal::start(&conf, port);
    for prefix in ["/w/", "/r/"] {
        let mut slow = slow_client(port, &format!("{prefix}big"));
        // The whole answer is in shoal (memory and the temporary file) before the client
        // reads any of the body.
        wait_for("the upstream connection closed", || {
            (up.open() == 0).then_some(())
        });
        let mut got = vec![0u8; SIZE];
        slow.read_exact(&mut got).unwrap();
        assert!(got == body, "{prefix}: the body arrived intact");
    }
    // The next periodic report after the transfers.
    let mark = s.error_log().len();
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    let (w, r) = loop {
        if let (Some(w), Some(r)) = (pool_completed(&s, "w", mark), pool_completed(&s, "r", mark)) {
            break (w, r);
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no pool report in 30 s: {}",
            s.error_log()
        );
        std::thread::sleep(Duration::from_millis(200));
    };
    assert!(
        w > 0,
        "the temporary file's writes went through pool w: {w} tasks"
    );
    assert_eq!(r, 0, "without aio_write, pool r had nothing to do");
}
