//! `error_log` below the main context, `syslog:` targets and `open_log_file_cache` end to
//! end: a location's (or server's, or http's) own error logs take what its requests log, in
//! place of the main log, several at once with their own levels; `syslog:` lines for
//! `error_log` and `access_log` arrive at a UDP receiver run here, in nginx's RFC 3164 form
//! (checked against nginx itself in `nginx_diff_logs`); a path with variables kept open by
//! `open_log_file_cache`; configuration errors in nginx's words.

use std::net::UdpSocket;
use std::time::Duration;

use crate::common::{free_port, wait_for, Prefix, Shoal};

fn start(http: &str, server: &str) -> Shoal {
    let port = free_port();
    let conf = format!(
        "daemon off;\nerror_log logs/error.log info;\nevents {{ }}\n\
         http {{\n{http}\n    server {{\n        \
         listen 127.0.0.1:{port};\n        root html;\n{server}\n    }}\n}}\n"
    );
    Shoal::start(&conf, port)
}

fn get(port: u16, path: &str) -> u16 {
    crate::common::client::ask(port, path, "").status
}

/// Waits until `file` in the prefix holds `needle`.
fn wait_in(s: &Shoal, file: &str, needle: &str) -> String {
    wait_for(&format!("{needle:?} in {file}"), || {
        let t = s.prefix.read(file);
        t.contains(needle).then_some(t)
    })
}

#[test]
fn each_level_has_its_own_error_logs() {
    let s = start(
        "    error_log logs/http.log;",
        "error_log logs/server.log warn;\n\
         location /loc/ { error_log logs/loc.log info; error_log logs/loc2.log error; error_log logs/loc3.log crit; }\n\
         location /quiet/ { error_log logs/quiet.log crit; }\n\
         location /main/ { }",
    );
    let mut c = crate::common::Client::connect(s.port);
    let r = c
        .ask("GET /loc/none HTTP/1.1\r\nHost: localhost\r\n\r\n")
        .unwrap();
    assert_eq!(r.status, 404);
    drop(c);
    assert_eq!(get(s.port, "/quiet/none"), 404);
    assert_eq!(get(s.port, "/main/none"), 404);
    let line = "open() \"";
    let loc = wait_in(
        &s,
        "logs/loc.log",
        "/loc/none\" failed (2: No such file or directory)",
    );
    assert!(loc.contains("[error]"), "{loc}");
    // Every log of the location, each at its level.
    wait_in(&s, "logs/loc2.log", "/loc/none\"");
    wait_in(&s, "logs/server.log", "/main/none\"");
    // Nothing of these requests in the http level's log or the main one; a crit-only log
    // takes no error line.
    std::thread::sleep(Duration::from_millis(200));
    for f in ["logs/http.log", "logs/quiet.log"] {
        assert!(
            !s.prefix.read(f).contains(line),
            "{f}: {}",
            s.prefix.read(f)
        );
    }
    assert!(!s.error_log().contains(line), "{}", s.error_log());
    assert!(!s.prefix.read("logs/loc3.log").contains(line));
    assert!(!s.prefix.read("logs/server.log").contains("/loc/none"));
}

#[test]
fn the_http_level_log_replaces_the_main_one_and_usr1_reopens_it() {
    let s = start("    error_log logs/http.log;", "location / { }");
    assert_eq!(get(s.port, "/none"), 404);
    wait_in(&s, "logs/http.log", "/none\" failed");
    assert!(!s.error_log().contains("/none\" failed"));
    std::fs::rename(
        s.prefix.join("logs/http.log"),
        s.prefix.join("logs/http.log.1"),
    )
    .unwrap();
    s.signal(libc::SIGUSR1);
    wait_for("the reopened log", || {
        s.prefix.join("logs/http.log").exists().then_some(())
    });
    assert_eq!(get(s.port, "/again"), 404);
    wait_in(&s, "logs/http.log", "/again\" failed");
}

/// A UDP receiver on 127.0.0.1: its port and the datagrams it got within the wait.
struct Receiver(UdpSocket);

impl Receiver {
    fn new() -> Receiver {
        let s = UdpSocket::bind("127.0.0.1:0").unwrap();
        s.set_read_timeout(Some(Duration::from_millis(200)))
            .unwrap();
        Receiver(s)
    }

    fn port(&self) -> u16 {
        self.0.local_addr().unwrap().port()
    }

    /// Datagrams until one contains `needle` (bounded).
    fn until(&self, needle: &str) -> Vec<String> {
        let mut got = Vec::new();
        let deadline = std::time::Instant::now() + crate::common::WAIT;
        let mut buf = [0u8; 65536];
        while std::time::Instant::now() < deadline {
            if let Ok(n) = self.0.recv(&mut buf) {
                got.push(String::from_utf8_lossy(&buf[..n]).into_owned());
                if got.last().unwrap().contains(needle) {
                    return got;
                }
            }
        }
        panic!("no datagram with {needle:?}; got {got:?}");
    }
}

fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .unwrap()
        .trim()
        .to_ascii_lowercase()
}

/// `Mmm dd hh:mm:ss ` at the start of a syslog header.
fn strip_time(s: &str) -> Option<&str> {
    let b = s.as_bytes();
    let ok = b.len() > 16
        && b[..3].iter().all(u8::is_ascii_alphabetic)
        && b[3] == b' '
        && (b[4] == b' ' || b[4].is_ascii_digit())
        && b[5].is_ascii_digit()
        && b[6] == b' '
        && b[9] == b':'
        && b[12] == b':'
        && b[15] == b' ';
    ok.then(|| &s[16..])
}

#[test]
fn syslog_lines_as_nginx_sends_them() {
    let rx = Receiver::new();
    let p = rx.port();
    let s = start(
        &format!(
            "    error_log syslog:server=127.0.0.1:{p},facility=local0,tag=web warn;\n    \
             log_format short '$request_method $uri $status';\n    \
             access_log syslog:server=127.0.0.1:{p} short;"
        ),
        &format!(
            "location /x/ {{ error_log syslog:server=127.0.0.1:{p},nohostname info; \
             access_log syslog:server=127.0.0.1:{p},severity=notice,tag=acc short if=$arg_log; }}"
        ),
    );
    let host = hostname();
    assert_eq!(get(s.port, "/none"), 404);
    let got = rx.until("GET /none 404");
    // local0.err: <131>; the error log's line whole after the header, no line feed.
    let err = got
        .iter()
        .find(|d| d.contains("open()"))
        .expect("the error line");
    let rest = strip_time(err.strip_prefix("<131>").expect(err)).expect(err);
    let rest = rest.strip_prefix(&format!("{host} web: ")).expect(err);
    assert!(rest.contains(" [error] "), "{err}");
    assert!(
        rest.ends_with("request: \"GET /none HTTP/1.1\", host: \"localhost\""),
        "{err:?}"
    );
    // local7.info: <190>, tag nginx.
    let acc = got.last().unwrap();
    let rest = strip_time(acc.strip_prefix("<190>").expect(acc)).expect(acc);
    assert_eq!(rest, format!("{host} nginx: GET /none 404"));
    // The location's: no hostname, severity notice for the access log, `if=`.
    assert_eq!(get(s.port, "/x/none?log=1"), 404);
    let got = rx.until("GET /x/none 404");
    let err = got
        .iter()
        .find(|d| d.contains("open()"))
        .expect("the error line");
    let rest = strip_time(err.strip_prefix("<187>").expect(err)).expect(err);
    assert!(rest.starts_with("nginx: 20"), "{err}");
    let acc = got.last().unwrap();
    let rest = strip_time(acc.strip_prefix("<189>").expect(acc)).expect(acc);
    assert_eq!(rest, format!("{host} acc: GET /x/none 404"));
    assert_eq!(get(s.port, "/x/none"), 404);
    let got = rx.until("open()");
    assert!(!got.iter().any(|d| d.contains("acc:")), "{got:?}");
}

#[test]
fn open_log_file_cache_keeps_a_file_open() {
    let s = start(
        "",
        "location /c/ { open_log_file_cache max=10 inactive=1m valid=1m; \
             access_log logs/$arg_f.log; }\n\
         location /n/ { open_log_file_cache off; access_log logs/$arg_f.log; }",
    );
    assert_eq!(get(s.port, "/c/none?f=cached"), 404);
    wait_in(&s, "logs/cached.log", "/c/none");
    // Removed under an open file: the next line goes to the open (unlinked) file.
    std::fs::remove_file(s.prefix.join("logs/cached.log")).unwrap();
    assert_eq!(get(s.port, "/c/none?f=cached"), 404);
    assert_eq!(get(s.port, "/n/none?f=plain"), 404);
    wait_in(&s, "logs/plain.log", "/n/none");
    std::fs::remove_file(s.prefix.join("logs/plain.log")).unwrap();
    assert_eq!(get(s.port, "/n/none?f=plain"), 404);
    // Without the cache the file is opened again for each line.
    wait_in(&s, "logs/plain.log", "/n/none");
    assert!(!s.prefix.join("logs/cached.log").exists());
}

#[test]
fn configuration_errors() {
    for (line, msg) in [
        (
            "error_log syslog:server=127.0.0.1,facility=nope;",
            "unknown syslog facility \"nope\"",
        ),
        (
            "error_log syslog:facility=local0;",
            "no syslog server specified",
        ),
        (
            "error_log syslog:server=127.0.0.1,tag=a-b;",
            "syslog \"tag\" only allows alphanumeric characters and underscore",
        ),
        (
            "access_log syslog:server=127.0.0.1,x=1;",
            "unknown syslog parameter \"x=1\"",
        ),
        (
            "access_log syslog:server=127.0.0.1 combined buffer=4k;",
            "logs to syslog cannot be buffered",
        ),
        ("error_log logs/e.log loud;", "invalid log level \"loud\""),
        (
            "error_log logs/e.log warn error;",
            "duplicate log level \"error\"",
        ),
        ("error_log memory:0;", "invalid buffer size \"0\""),
        (
            "open_log_file_cache inactive=10s;",
            "\"open_log_file_cache\" must have \"max\" parameter",
        ),
        (
            "open_log_file_cache max=x;",
            "invalid \"open_log_file_cache\" parameter \"max=x\"",
        ),
    ] {
        let prefix = Prefix::new();
        prefix.write_conf(&format!(
            "events {{ }}\nhttp {{ server {{ listen 127.0.0.1:{}; location / {{\n{line}\n}} }} }}\n",
            free_port()
        ));
        let out = prefix.run(&["-t"]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains(&format!("{msg} in ")) && err.contains("shoal.conf:3"),
            "{line}: {err}"
        );
        assert!(!out.status.success());
    }
    // What nginx accepts: memory:, stderr and syslog in every context.
    let prefix = Prefix::new();
    prefix.write_conf(&format!(
        "error_log memory:1m debug;\nevents {{ }}\nhttp {{ error_log stderr debug_http debug_event; server {{ \
         listen 127.0.0.1:{}; error_log syslog:server=unix:/dev/log; location / {{ \
         error_log memory:32k; }} }} }}\n",
        free_port()
    ));
    let out = prefix.run(&["-t"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn the_main_error_log_to_a_unix_syslog_socket() {
    let prefix = Prefix::new();
    let path = prefix.join("log.sock");
    let rx = std::os::unix::net::UnixDatagram::bind(&path).unwrap();
    rx.set_read_timeout(Some(crate::common::WAIT)).unwrap();
    let port = free_port();
    let conf = format!(
        "daemon off;\nerror_log syslog:server=unix:{},tag=main info;\nevents {{ }}\n\
         http {{ server {{ listen 127.0.0.1:{port}; }} }}\n",
        path.display()
    );
    let _s = Shoal::start_in(prefix, &conf, port, &[]);
    let mut buf = [0u8; 4096];
    let n = rx
        .recv(&mut buf)
        .expect("a datagram from the main error log");
    let d = String::from_utf8_lossy(&buf[..n]).into_owned();
    // local7 (23) at notice (5) or info (6).
    assert!(d.starts_with("<189>") || d.starts_with("<190>"), "{d}");
    let rest = strip_time(&d[5..]).expect(&d);
    assert!(rest.starts_with(&format!("{} main: 20", hostname())), "{d}");
    assert!(!d.ends_with('\n'), "{d:?}");
}

/// Header lines `ignore_invalid_headers` drops are logged at info as nginx 1.22 logs them: the
/// line as sent (trailing blanks cut), the default server's name, and the host only once a
/// Host line came before (nginx's text, checked by experiment). The request is answered.
#[test]
fn dropped_header_lines_are_logged_at_info() {
    let s = start("", "server_name named;\nlocation / { return 200 ok; }");
    let answer = crate::common::client::exchange_text(
        s.port,
        "GET /a?b HTTP/1.1\r\nx_z: 3  \r\nHost: b\r\nAfter_Host:v\r\nbad@h: 2\r\n\
         Connection: close\r\n\r\n",
    );
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    let ctx = ", client: 127.0.0.1, server: named, request: \"GET /a?b HTTP/1.1\"";
    let log = wait_in(&s, "logs/error.log", "\"bad@h: 2\"");
    for want in [
        format!("client sent invalid header line: \"x_z: 3\" while reading client request headers{ctx}\n"),
        format!("client sent invalid header line: \"After_Host:v\" while reading client request headers{ctx}, host: \"b\"\n"),
        format!("client sent invalid header line: \"bad@h: 2\" while reading client request headers{ctx}, host: \"b\"\n"),
    ] {
        assert!(log.contains(&want), "{want:?} in\n{log}");
        let line = log.lines().find(|l| l.ends_with(want.trim_end())).expect("the line");
        assert!(line.contains(" [info] "), "{line}");
    }
    // Kept lines are not logged.
    assert!(!log.contains("\"Host: b\""), "{log}");
}
