//! The rest of issue 21's directives and variables against real nginx, where an answer can be
//! compared: `$realip_remote_addr` / `$realip_remote_port` (the client's own port, made the
//! same for both by binding the client to it), `X-Accel-Limit-Rate` setting `$limit_rate`,
//! `auth_delay`'s answers, `open_log_file_cache` (accepted, and the logs it writes through),
//! `$connection_time`'s shape. (`$proxy_protocol_tlv_*` cannot be compared: nginx 1.22.1, the
//! reference, has no such variables; they came in 1.23.2.)

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use crate::common::client::head_and_body;
use crate::common::free_port;
use crate::common::upstream::{Answer, Upstream};
use crate::diff::{Conf, Pair};
use crate::nginx_diff_access::basic;

/// `req` sent from 127.0.0.1:`from` to `port`, the whole answer read until the server closes.
fn from_port(from: u16, port: u16, req: &[u8]) -> Vec<u8> {
    let sock = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
    sock.set_reuse_address(true).unwrap();
    let local: SocketAddr = format!("127.0.0.1:{from}").parse().unwrap();
    sock.bind(&local.into()).expect("binding the client's port");
    let to: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    sock.connect_timeout(&to.into(), Duration::from_secs(10))
        .unwrap();
    let mut c: TcpStream = sock.into();
    c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    c.write_all(req).unwrap();
    let mut got = Vec::new();
    let _ = c.read_to_end(&mut got);
    got
}

#[test]
fn realip_remote_port_and_addr() {
    let p = Pair::with(Conf {
        server: "set_real_ip_from 127.0.0.1;\n\
                 real_ip_header X-Real-IP;\n\
                 location / { return 200 \"$remote_addr|$remote_port|$realip_remote_addr|\
                 $realip_remote_port\\n\"; }\n\
                 location /xff { real_ip_header X-Forwarded-For; alias {HTML}/a.txt; \
                 add_header X-R \"$remote_addr|$remote_port|$realip_remote_addr|$realip_remote_port\"; }",
        ..Default::default()
    });
    let (n, s) = p.ports();
    let from = free_port();
    for headers in [
        "",
        "X-Real-IP: 10.1.2.3\r\n",
        "X-Real-IP: 10.1.2.3:8080\r\n",
        "X-Real-IP: [2001:db8::7]:443\r\n",
        "X-Real-IP: bogus\r\n",
    ] {
        for path in ["/", "/xff"] {
            let extra = if path == "/xff" {
                headers.replace("X-Real-IP", "X-Forwarded-For")
            } else {
                headers.to_string()
            };
            let req = format!("GET {path} HTTP/1.0\r\nHost: x\r\n{extra}\r\n");
            let answers: Vec<(String, Vec<u8>)> = [n, s]
                .iter()
                .map(|&port| {
                    let (head, body) = head_and_body(&from_port(from, port, req.as_bytes()));
                    // Sorted, as the harness compares heads.
                    let mut head: Vec<String> = head
                        .lines()
                        .filter(|l| !l.starts_with("Date:") && !l.starts_with("Server:"))
                        .map(String::from)
                        .collect();
                    head.sort();
                    (head.join("\n"), body)
                })
                .collect();
            assert_eq!(answers[1], answers[0], "{req}: shoal (left), nginx (right)");
            let all = format!("{}{}", answers[0].0, String::from_utf8_lossy(&answers[0].1));
            assert!(
                all.contains(&format!("|127.0.0.1|{from}")),
                "{req}: the client's own port: {all}"
            );
        }
    }
}

#[test]
fn x_accel_limit_rate_sets_limit_rate() {
    let up = Upstream::start(|r| {
        let answer = Answer::ok("rated\n");
        match r.target.split_once("rate=") {
            Some((_, v)) => answer.header("X-Accel-Limit-Rate", v),
            None => answer,
        }
    });
    let p = Pair::with(Conf {
        server: &format!(
            "add_header X-Rate \"[$limit_rate]\" always;\n\
             location /p/ {{ proxy_pass http://127.0.0.1:{0}; }}\n\
             location /conf/ {{ limit_rate 8k; proxy_pass http://127.0.0.1:{0}; }}\n\
             location /ignore/ {{ proxy_ignore_headers X-Accel-Limit-Rate; \
             proxy_pass http://127.0.0.1:{0}; }}\n\
             location /buffering/ {{ proxy_buffering off; proxy_pass http://127.0.0.1:{0}; }}\n\
             location /set/ {{ set $limit_rate 4k; proxy_pass http://127.0.0.1:{0}; }}",
            up.port()
        ),
        ..Default::default()
    });
    let mut all = String::new();
    for loc in ["p", "conf", "ignore", "buffering", "set"] {
        for q in [
            "",
            "?rate=1000",
            "?rate=0",
            "?rate=off",
            "?rate=12k",
            "?rate=-5",
        ] {
            all.push_str(&p.get_open(&format!("/{loc}/{q}"), ""));
        }
    }
    assert!(all.contains("X-Rate: [1000]"), "{all}");
}

#[test]
fn auth_delay_answers_as_nginx() {
    let p = Pair::with(Conf {
        server: "location /auth/ { alias {HTML}/; auth_basic on; auth_basic_user_file {HTML}/pw; \
                 auth_delay 150ms; }\n\
                 location /deny/ { alias {HTML}/; deny all; auth_delay 150ms; }\n\
                 location /any/ { alias {HTML}/; satisfy any; deny all; auth_basic on; \
                 auth_basic_user_file {HTML}/pw; auth_delay 150ms; }",
        ..Default::default()
    });
    std::fs::write(p.html().join("pw"), "u:{PLAIN}p\n").unwrap();
    // Asked half-closed too: a client that closes during the delay gets no answer (nginx's
    // `client prematurely closed connection`, a 499).
    for loc in ["auth", "deny", "any"] {
        let path = format!("/{loc}/a.txt");
        for headers in [String::new(), basic("u", "p"), basic("u", "bad")] {
            p.get(&path, &headers);
            p.get_open(&path, &headers);
        }
        // Keep-alive after a delayed 401: the next request on the connection is answered too.
        p.check_open(
            format!(
                "GET {path} HTTP/1.1\r\nHost: x\r\n\r\nGET {path} HTTP/1.1\r\nHost: x\r\n{}\
                 Connection: close\r\n\r\n",
                basic("u", "p")
            )
            .as_bytes(),
        );
    }
    for log in [p.nginx_log(), p.shoal_log()] {
        assert!(
            log.contains("client prematurely closed connection, client: 127.0.0.1"),
            "{log}"
        );
    }
}

#[test]
fn open_log_file_cache_writes_as_nginx() {
    use std::os::unix::fs::PermissionsExt;
    // The logs, by absolute path (a relative one with variables is the request's root's, in
    // nginx), in a directory the workers may write as `nobody`; `$server_port` tells nginx's
    // from shoal's.
    let dir = tempfile::Builder::new()
        .prefix("shoal-olfc-")
        .tempdir()
        .unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
    let d = dir.path().display();
    // `server_tokens off`: the error page's length is then the same on both (`nginx`, `shoal`).
    let http = "server_tokens off;\n\
                log_format plain '$host $request $status $body_bytes_sent';\n\
                open_log_file_cache max=10 inactive=20s min_uses=2 valid=1m;"
        .to_string();
    let server = format!(
        "access_log {d}/$host-$server_port.log plain;\n\
         location /off/ {{ alias {{HTML}}/; open_log_file_cache off; \
         access_log {d}/off-$arg_n-$server_port.log plain; }}\n\
         location /one/ {{ alias {{HTML}}/; open_log_file_cache max=1; \
         access_log {d}/one-$arg_n-$server_port.log plain; }}"
    );
    let p = Pair::with(Conf {
        http: &http,
        server: &server,
        ..Default::default()
    });
    for (path, host) in [
        ("/a.txt", "localhost"),
        ("/a.txt", "other"),
        ("/missing", "localhost"),
        ("/off/a.txt?n=1", "localhost"),
        ("/off/a.txt?n=2", "localhost"),
        ("/one/a.txt?n=1", "localhost"),
        ("/one/a.txt?n=2", "localhost"),
        ("/one/a.txt?n=1", "localhost"),
    ] {
        p.check(format!("GET {path} HTTP/1.0\r\nHost: {host}\r\n\r\n").as_bytes());
    }
    let (n, s) = p.ports();
    for file in ["localhost", "other", "off-1", "off-2", "one-1", "one-2"] {
        let read = |port: u16| {
            std::fs::read_to_string(dir.path().join(format!("{file}-{port}.log")))
                .unwrap_or_default()
        };
        // Each server writes its line after the answer is sent: the last ones may land just
        // after the test read its answer.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        let (mut nl, mut sl) = (read(n), read(s));
        while (nl.is_empty() || sl != nl) && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(50));
            (nl, sl) = (read(n), read(s));
        }
        assert!(!nl.is_empty(), "nginx wrote no {file}: {}", p.nginx_log());
        assert_eq!(sl, nl, "{file}: shoal (left), nginx (right)");
    }
}

#[test]
fn connection_time_has_nginx_shape() {
    let p = Pair::new("location /t { return 200 \"$connection_time\\n\"; }");
    let (n, s) = p.ports();
    for port in [n, s] {
        let r = crate::common::client::ask(port, "/t", "");
        let v = String::from_utf8_lossy(&r.body).trim_end().to_string();
        let (secs, ms) = v.split_once('.').unwrap_or_else(|| panic!("{port}: {v}"));
        assert!(
            !secs.is_empty()
                && secs.bytes().all(|c| c.is_ascii_digit())
                && ms.len() == 3
                && ms.bytes().all(|c| c.is_ascii_digit()),
            "{port}: {v}"
        );
    }
}
