//! Logs against real nginx: what `error_log syslog:` and `access_log syslog:` send (one UDP
//! receiver run here takes both servers' datagrams, told apart by their tag `s<PORT>`), at
//! http level and in a location with its own facility, severity and `nohostname`, compared
//! after normalising only what must differ (the clock, process and connection numbers, the
//! tag).

use std::net::UdpSocket;
use std::time::{Duration, Instant};

use crate::diff::{Conf, Pair};

/// `<PRI>Mmm dd hh:mm:ss ` → `<PRI>TIME `; `YYYY/MM/DD HH:MM:SS [` → `DATE [`; `PID#TID: *N `
/// → `PID: *N `; the server's tag → `TAG`.
fn normalise(d: &str, port: u16) -> String {
    let mut s = d.to_string();
    if let Some(end) = s.find('>') {
        if s.len() > end + 16 {
            s.replace_range(end + 1..end + 16, "TIME");
        }
    }
    if let Some(at) = s.find(" [") {
        // The error log line's own time, 19 characters before its level.
        if at >= 19 && s.as_bytes()[at - 19].is_ascii_digit() {
            s.replace_range(at - 19..at, "DATE");
        }
    }
    if let Some(at) = s.find('#') {
        let start = s[..at].rfind(' ').map_or(0, |i| i + 1);
        let end = s[at..].find(':').map_or(at, |i| at + i);
        s.replace_range(start..end, "PID");
    }
    if let Some(at) = s.find(": *") {
        let end = s[at + 3..].find(' ').map_or(s.len(), |i| at + 3 + i);
        s.replace_range(at + 3..end, "N");
    }
    s.replace(&format!("s{port}:"), "TAG:")
}

#[test]
fn syslog_datagrams_as_nginx() {
    let rx = UdpSocket::bind("127.0.0.1:0").unwrap();
    rx.set_read_timeout(Some(Duration::from_millis(300)))
        .unwrap();
    let rp = rx.local_addr().unwrap().port();
    let http = format!(
        "    error_log syslog:server=127.0.0.1:{rp},tag=s{{PORT}} warn;\n    \
         log_format short '$request_method $uri $status \"$http_x_a\"';\n    \
         access_log syslog:server=127.0.0.1:{rp},tag=s{{PORT}} short;"
    );
    let server = format!(
        "location /x/ {{ error_log syslog:server=127.0.0.1:{rp},facility=local3,nohostname,\
         tag=s{{PORT}} info; access_log syslog:server=127.0.0.1:{rp},severity=warn,\
         facility=user,tag=s{{PORT}} short; }}"
    );
    let p = Pair::with(Conf {
        http: &http,
        server: &server,
        ..Default::default()
    });
    let (np, sp) = p.ports();
    for (path, headers) in [
        ("/none", "X-A: \"quoted\\\"\r\n"),
        ("/a.txt", ""),
        ("/x/none", ""),
        ("/x/a.txt", "X-A: caf\u{e9}\r\n"),
    ] {
        p.get(path, headers);
    }
    let mut from_nginx = Vec::new();
    let mut from_shoal = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut buf = [0u8; 65536];
    // Each server sends 3 error lines, 2 info lines (keep-alive connections the client
    // closed, in the last location's log) and 2 access lines (`access_log off` silences the
    // http level, whatever else it lists).
    while (from_nginx.len() < 7 || from_shoal.len() < 7) && Instant::now() < deadline {
        if let Ok(n) = rx.recv(&mut buf) {
            let d = String::from_utf8_lossy(&buf[..n]).into_owned();
            if d.contains(&format!("s{np}:")) {
                from_nginx.push(normalise(&d, np));
            } else if d.contains(&format!("s{sp}:")) {
                from_shoal.push(normalise(&d, sp));
            }
        }
    }
    // Lines of one request may arrive in either order between the error and access logs:
    // compare them sorted.
    from_nginx.sort();
    from_shoal.sort();
    assert_eq!(from_nginx.len(), 7, "{from_nginx:#?}");
    assert_eq!(from_nginx, from_shoal);
}

/// The error log lines about requests, from the bytes of each server's file: what follows the
/// connection's number, for the lines that name a request.
fn request_lines(prefix: &std::path::Path) -> Vec<Vec<u8>> {
    let log = std::fs::read(prefix.join("logs/error.log")).expect("an error log");
    log.split(|&b| b == b'\n')
        .filter(|l| l.windows(12).any(|w| w == b", request: \""))
        .map(|l| {
            let at = l.windows(2).position(|w| w == b" *").expect("a connection");
            let rest = &l[at + 2..];
            let end = rest.iter().position(|&b| b == b' ').unwrap_or(rest.len());
            rest[end..].to_vec()
        })
        .collect()
}

/// nginx writes a request's bytes into its error log as they came (shoal wrote U+FFFD for
/// each byte that is not UTF-8): the request line, the host and the referrer of a request it
/// serves, and of one it refuses, a refused header line (the CR it stopped at in hex, as
/// nginx's own format has it), a dropped one, a refused host and transfer coding.
#[test]
fn request_bytes_go_into_the_error_log_as_they_came() {
    let p = Pair::new("location /deny/ { deny all; }");
    for req in [
        &b"GET /deny/\xff\x80z HTTP/1.1\r\nHost: \xffh\x80\r\nX\xffH: 1\r\nReferer: r\xff\x01\"\r\n\r\n"[..],
        b"GET /deny/caf\xc3\xa9 HTTP/1.1\r\nHost: localhost\r\n\r\n",
        b"GET /\xff\x80 HTTP/1.1\r\nHost: localhost\r\nX: \xff\x80\x01\rz\r\n\r\n",
        b"GET /\xff\x01\x80 HTTP/1.1\r\nHost: localhost\r\n\r\n",
        b"GET /\xff HTTP/1.1\r\nHost: a\xff/b\r\n\r\n",
        b"GET /\xff HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: \xffx\r\n\r\n",
    ] {
        p.check_open_bytes(req);
    }
    let (n, s) = p.prefixes();
    let (n, s) = (request_lines(&n), request_lines(&s));
    let show = |v: &[Vec<u8>]| {
        v.iter()
            .map(|l| String::from_utf8_lossy(l).escape_debug().to_string())
            .collect::<Vec<_>>()
    };
    assert_eq!(n.len(), 7, "{:#?}", show(&n));
    assert!(
        n[0].windows(6).any(|w| w == b"/\xff\x80z H"),
        "{:#?}",
        show(&n)
    );
    assert_eq!(show(&s), show(&n));
    assert_eq!(s, n);
}
