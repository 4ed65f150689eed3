//! `limit_req` and `limit_conn` against real nginx: `*_status`, `*_log_level`, `*_dry_run`,
//! `$limit_req_status` and `$limit_conn_status`; the answers compared, and the error log's
//! `limiting ...` / `delaying ...` lines compared with their level.

use std::io::Read;
use std::net::TcpStream;
use std::time::{Duration, Instant};

use crate::diff::{Conf, Pair};

/// The error log's lines about limits, as `[level] message` without the time, the pid, the
/// connection number, or the `excess` value's digits (which depend on the milliseconds between
/// two requests: checked for nginx's shape, `N.NNN`, and written `X`).
fn limit_lines(log: &str) -> Vec<String> {
    log.lines()
        .filter(|l| l.contains("limiting ") || l.contains("delaying request"))
        .map(|l| {
            let at = l.find(" [").expect("a level");
            let (level, rest) = l[at + 1..].split_at(l[at + 1..].find("] ").unwrap() + 2);
            let msg = &rest[rest.find(": ").unwrap() + 2..];
            let msg = match msg.strip_prefix('*') {
                Some(m) => &m[m.find(' ').unwrap() + 1..],
                None => msg,
            };
            let msg = match msg.find("excess: ") {
                Some(e) => {
                    let num_at = e + "excess: ".len();
                    let end = msg[num_at..]
                        .find([',', ' '])
                        .map_or(msg.len(), |x| num_at + x);
                    let num = &msg[num_at..end];
                    let (int, frac) = num.split_once('.').expect("excess N.NNN");
                    assert!(
                        !int.is_empty()
                            && int.bytes().all(|c| c.is_ascii_digit())
                            && frac.len() == 3
                            && frac.bytes().all(|c| c.is_ascii_digit()),
                        "excess {num} in {l}"
                    );
                    format!("{}X{}", &msg[..num_at], &msg[end..])
                }
                None => msg.to_string(),
            };
            format!("{level}{msg}")
        })
        .collect()
}

/// Both error logs' limit lines, compared once shoal has written as many as nginx (a log line
/// may be written a moment after its answer; bounded).
fn same_limit_lines(p: &Pair) -> Vec<String> {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let (n, s) = (limit_lines(&p.nginx_log()), limit_lines(&p.shoal_log()));
        if s.len() >= n.len() || Instant::now() > deadline {
            assert_eq!(s, n, "limit log lines: shoal (left), nginx (right)");
            return n;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn limit_req_status_log_level_and_dry_run() {
    let p = Pair::with(Conf {
        // One key per location ($uri), one request a minute: a second request is over.
        http: "limit_req_zone $uri zone=r:1m rate=1r/m;",
        server: "add_header X-L \"[$limit_req_status]\" always;\n\
                 location /plain/ { alias {HTML}/; limit_req zone=r; }\n\
                 location /status/ { alias {HTML}/; limit_req zone=r; limit_req_status 429; \
                     limit_req_log_level warn; }\n\
                 location /notice/ { alias {HTML}/; limit_req zone=r; limit_req_log_level notice; }\n\
                 location /info/ { alias {HTML}/; limit_req zone=r; limit_req_log_level info; }\n\
                 location /dry/ { alias {HTML}/; limit_req zone=r; limit_req_dry_run on; }\n\
                 location /drydelay/ { alias {HTML}/; limit_req zone=r burst=5; \
                     limit_req_dry_run on; limit_req_log_level warn; }\n\
                 location /nodelay/ { alias {HTML}/; limit_req zone=r burst=1 nodelay; }\n\
                 location /none/ { alias {HTML}/; }\n\
                 location /page/ { alias {HTML}/; limit_req zone=r; error_page 503 /index.html; }",
        ..Default::default()
    });
    let mut all = String::new();
    for loc in [
        "plain", "status", "notice", "info", "dry", "drydelay", "nodelay", "none", "page",
    ] {
        for _ in 0..3 {
            all.push_str(&p.get(&format!("/{loc}/a.txt"), ""));
        }
    }
    for v in [
        "[PASSED]",
        "[REJECTED]",
        "[REJECTED_DRY_RUN]",
        "[DELAYED_DRY_RUN]",
        "429",
        "X-L: []",
    ] {
        assert!(all.contains(v), "no {v} in:\n{all}");
    }
    let lines = same_limit_lines(&p);
    for level in ["[error]", "[warn]", "[notice]", "[info]"] {
        assert!(lines.iter().any(|l| l.starts_with(level)), "{lines:#?}");
    }
    assert!(lines.iter().any(|l| l.contains("dry run")), "{lines:#?}");
}

/// A connection whose request (`path`) is still being answered: a file too large for the
/// socket buffers, and a client that reads only the head. Returns once the head came, so the
/// request has passed its limits and counts.
fn held(port: u16, path: &str) -> TcpStream {
    let sock = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
    sock.set_recv_buffer_size(4096).unwrap();
    let to: std::net::SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    sock.connect_timeout(&to.into(), Duration::from_secs(10))
        .unwrap();
    let mut c: TcpStream = sock.into();
    c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    std::io::Write::write_all(
        &mut c,
        format!("GET {path} HTTP/1.1\r\nHost: x\r\n\r\n").as_bytes(),
    )
    .unwrap();
    let mut got = Vec::new();
    let mut buf = [0u8; 1024];
    while !got.windows(4).any(|w| w == b"\r\n\r\n") {
        match c.read(&mut buf) {
            Ok(0) | Err(_) => panic!("no head from {port}: {got:?}"),
            Ok(n) => got.extend_from_slice(&buf[..n]),
        }
    }
    assert!(got.starts_with(b"HTTP/1.1 200"), "{port}: {got:?}");
    c
}

#[test]
fn limit_conn_status_log_level_and_dry_run() {
    let p = Pair::with(Conf {
        http: "limit_conn_zone $binary_remote_addr zone=c:1m;",
        server: "add_header X-C \"[$limit_conn_status]\" always;\n\
                 location /held/ { alias {HTML}/; limit_conn c 1; }\n\
                 location /plain/ { alias {HTML}/; limit_conn c 1; }\n\
                 location /two/ { alias {HTML}/; limit_conn c 2; }\n\
                 location /status/ { alias {HTML}/; limit_conn c 1; limit_conn_status 429; \
                     limit_conn_log_level warn; }\n\
                 location /info/ { alias {HTML}/; limit_conn c 1; limit_conn_log_level info; }\n\
                 location /dry/ { alias {HTML}/; limit_conn c 1; limit_conn_dry_run on; \
                     limit_conn_log_level notice; }\n\
                 location /page/ { alias {HTML}/; limit_conn c 1; error_page 503 /index.html; }\n\
                 location /none/ { alias {HTML}/; }",
        ..Default::default()
    });
    std::fs::write(p.html().join("big.bin"), vec![b'z'; 32 << 20]).unwrap();
    let paths = [
        "/plain/a.txt",
        "/two/a.txt",
        "/status/a.txt",
        "/info/a.txt",
        "/dry/a.txt",
        "/page/a.txt",
        "/none/a.txt",
    ];
    let mut all = String::new();
    // Nothing held: every request passes.
    for path in paths {
        all.push_str(&p.get(path, ""));
    }
    let (n, s) = p.ports();
    let holds = [held(n, "/held/big.bin"), held(s, "/held/big.bin")];
    for path in paths {
        all.push_str(&p.get(path, ""));
    }
    // Compared now: the wait below may be refused a different number of times on each.
    let lines = same_limit_lines(&p);
    for level in ["[error]", "[warn]", "[notice]", "[info]"] {
        assert!(lines.iter().any(|l| l.starts_with(level)), "{lines:#?}");
    }
    drop(holds);
    // Once each server has seen its held connection close, requests pass again.
    for port in [n, s] {
        let deadline = Instant::now() + Duration::from_secs(10);
        while crate::common::client::ask(port, "/plain/a.txt", "").status != 200 {
            assert!(
                Instant::now() < deadline,
                "{port}: the held request still counts"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    all.push_str(&p.get("/plain/a.txt", ""));
    for v in [
        "[PASSED]",
        "[REJECTED]",
        "[REJECTED_DRY_RUN]",
        "429",
        "503",
        "X-C: []",
    ] {
        assert!(all.contains(v), "no {v} in:\n{all}");
    }
}
