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
