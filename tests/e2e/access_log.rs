//! `log_format` and `access_log` end to end: the default `logs/access.log combined`, formats
//! with `escape=default|json|none` and the request, response and connection variables, `off`
//! and inheritance (a level's own `access_log` lines replace its parent's), several logs,
//! `buffer=`/`flush=`, `gzip`, `if=`, SIGUSR1, paths with variables, configuration errors, and
//! what is logged for requests that could not be read. Expected values are nginx 1.22.1's.
//!
//! A line is written after its answer is sent, so a test that has read an answer still polls
//! (bounded) for the line. Requests that must not be logged are sent on one keep-alive
//! connection before one that must: when that last line is there, the earlier requests were
//! all through the logging step.

use std::io::Write;
use std::net::TcpStream;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::common::client::exchange;
use crate::common::{self, conf_with, free_port, wait_for, Client, Prefix, Shoal, INDEX};

/// Starts shoal with extra http-level lines and server lines (root `html`).
fn start(http: &str, server: &str) -> Shoal {
    let port = free_port();
    Shoal::start(&conf(port, http, server), port)
}

fn conf(port: u16, http: &str, server: &str) -> String {
    format!(
        "daemon off;\n\
         error_log logs/error.log notice;\n\
         events {{ worker_connections 256; }}\n\
         http {{\n\
         \x20   include mime.types;\n\
         \x20   default_type application/octet-stream;\n\
         {http}\n\
         \x20   server {{\n\
         \x20       listen 127.0.0.1:{port};\n\
         \x20       server_name localhost;\n\
         \x20       root html;\n\
         {server}\n\
         \x20   }}\n\
         }}\n"
    )
}

/// The complete lines of a log file in the prefix.
fn lines(s: &Shoal, file: &str) -> Vec<String> {
    let text = s.prefix.read(file);
    text.lines().map(str::to_string).collect()
}

/// Waits until `file` has at least `n` lines; returns them.
fn wait_lines(s: &Shoal, file: &str, n: usize) -> Vec<String> {
    wait_for(&format!("{n} lines in {file}"), || {
        let l = lines(s, file);
        (l.len() >= n && s.prefix.read(file).ends_with('\n')).then_some(l)
    })
}

/// The fields of a line in the combined format.
#[derive(Debug, PartialEq)]
struct Combined {
    addr: String,
    user: String,
    time: String,
    request: String,
    status: String,
    bytes: String,
    referer: String,
    agent: String,
}

/// Parses `$remote_addr - $remote_user [$time_local] "$request" $status $body_bytes_sent
/// "$http_referer" "$http_user_agent"`, checking the shape of every field (a hand-written
/// version of the regex `^(\S+) - (\S+) \[(\d\d/[A-Z][a-z]{2}/\d{4}:\d\d:\d\d:\d\d [+-]\d{4})\]
/// "(.*)" (\d{3}) (\d+) "(.*)" "(.*)"$`; quoted fields hold no raw `"`: it is escaped).
fn parse_combined(line: &str) -> Option<Combined> {
    let (addr, rest) = line.split_once(" - ")?;
    let (user, rest) = rest.split_once(" [")?;
    let (time, rest) = rest.split_once("] \"")?;
    let (request, rest) = rest.split_once("\" ")?;
    let (status, rest) = rest.split_once(' ')?;
    let (bytes, rest) = rest.split_once(" \"")?;
    let (referer, rest) = rest.split_once("\" \"")?;
    let agent = rest.strip_suffix('"')?;
    let t = time.as_bytes();
    let digits =
        |r: std::ops::Range<usize>| t.get(r).is_some_and(|s| s.iter().all(u8::is_ascii_digit));
    let time_ok = t.len() == 26
        && digits(0..2)
        && t[2] == b'/'
        && t[3].is_ascii_uppercase()
        && t[4].is_ascii_lowercase()
        && t[5].is_ascii_lowercase()
        && t[6] == b'/'
        && digits(7..11)
        && t[11] == b':'
        && digits(12..14)
        && t[14] == b':'
        && digits(15..17)
        && t[17] == b':'
        && digits(18..20)
        && t[20] == b' '
        && (t[21] == b'+' || t[21] == b'-')
        && digits(22..26);
    let no_space = |s: &str| !s.is_empty() && !s.contains(' ');
    let ok = no_space(addr)
        && no_space(user)
        && time_ok
        && status.len() == 3
        && status.bytes().all(|b| b.is_ascii_digit())
        && !bytes.is_empty()
        && bytes.bytes().all(|b| b.is_ascii_digit())
        && ![request, referer, agent].iter().any(|f| f.contains('"'));
    ok.then(|| Combined {
        addr: addr.into(),
        user: user.into(),
        time: time.into(),
        request: request.into(),
        status: status.into(),
        bytes: bytes.into(),
        referer: referer.into(),
        agent: agent.into(),
    })
}

#[track_caller]
fn combined(line: &str) -> Combined {
    parse_combined(line).unwrap_or_else(|| panic!("not a combined line: {line:?}"))
}

/// Whether `$time_local`'s month is one of nginx's English abbreviations.
fn month_ok(time: &str) -> bool {
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    MONTHS.contains(&&time[3..6])
}

#[test]
fn default_access_log_is_combined_at_http_level() {
    let port = free_port();
    let s = Shoal::start(&conf_with(port, "", ""), port);
    let mut c = Client::connect(port);
    c.send(
        b"GET /index.html?x=1 HTTP/1.1\r\nHost: localhost\r\nReferer: http://example.com/from\r\n\
          User-Agent: tester/1.0 (x)\r\n\r\n",
    )
    .unwrap();
    let r = c.read_response().unwrap();
    assert_eq!(r.status, 200);
    let r = c.get("/nope.html").unwrap();
    assert_eq!(r.status, 404);
    let not_found_len = r.body.len();
    let l = wait_lines(&s, "logs/access.log", 2);
    assert_eq!(l.len(), 2, "{l:?}");
    let a = combined(&l[0]);
    assert!(month_ok(&a.time), "{a:?}");
    assert_eq!(
        a,
        Combined {
            addr: "127.0.0.1".into(),
            user: "-".into(),
            time: a.time.clone(),
            request: "GET /index.html?x=1 HTTP/1.1".into(),
            status: "200".into(),
            bytes: INDEX.len().to_string(),
            referer: "http://example.com/from".into(),
            agent: "tester/1.0 (x)".into(),
        }
    );
    let b = combined(&l[1]);
    assert_eq!(b.request, "GET /nope.html HTTP/1.1");
    assert_eq!(b.status, "404");
    assert_eq!(b.bytes, not_found_len.to_string());
    assert_eq!(b.referer, "-");
    assert_eq!(b.agent, "-");
}

#[test]
fn log_format_variables_and_escaping() {
    let s = start(
        "log_format v '$status $body_bytes_sent $request_time $http_user_agent \
         $sent_http_content_type $request_length $connection $connection_requests $http_x_none';\n\
         log_format j escape=json '{\"ua\":\"$http_user_agent\",\"none\":\"$http_x_none\",\"s\":$status}';\n\
         log_format n escape=none '$http_user_agent|$http_x_none|$request';\n\
         access_log logs/v.log v;\n\
         access_log logs/j.log j;\n\
         access_log logs/n.log n;",
        "",
    );
    let first = "GET /index.html HTTP/1.1\r\nHost: localhost\r\nUser-Agent: a\"b\\c d\r\n\r\n";
    let second = "GET /index.html?q HTTP/1.1\r\nHost: localhost\r\n\r\n";
    let mut c = Client::connect(s.port);
    c.send(first.as_bytes()).unwrap();
    assert_eq!(c.read_response().unwrap().status, 200);
    c.send(second.as_bytes()).unwrap();
    assert_eq!(c.read_response().unwrap().status, 200);
    wait_lines(&s, "logs/v.log", 2);
    let mut other = Client::connect(s.port);
    assert_eq!(other.get("/index.html").unwrap().status, 200);

    let v = wait_lines(&s, "logs/v.log", 3);
    let fields: Vec<Vec<&str>> = v.iter().map(|l| l.split(' ').collect()).collect();
    // a"b\c d: the space makes two fields here.
    let f = &fields[0];
    assert_eq!(f.len(), 10, "{v:?}");
    assert_eq!(f[0], "200");
    assert_eq!(f[1], INDEX.len().to_string());
    let t = f[2]
        .split_once('.')
        .expect("$request_time is SECONDS.MILLIS");
    assert!(
        !t.0.is_empty()
            && t.0.bytes().all(|b| b.is_ascii_digit())
            && t.1.len() == 3
            && t.1.bytes().all(|b| b.is_ascii_digit()),
        "$request_time {:?}",
        f[2]
    );
    assert_eq!(f[3], "a\\x22b\\x5Cc", "default escaping of \" and \\");
    assert_eq!(f[4], "d");
    assert_eq!(f[5], "text/html");
    assert_eq!(
        f[6],
        first.len().to_string(),
        "$request_length is the whole request head"
    );
    let conn: u64 = f[7].parse().expect("$connection is a number");
    assert!(conn > 0);
    assert_eq!(f[8], "1");
    assert_eq!(f[9], "-", "a variable without a value is - by default");

    let g = &fields[1];
    assert_eq!(g.len(), 9, "{v:?}");
    assert_eq!(g[3], "-", "no User-Agent: -");
    assert_eq!(g[5], second.len().to_string());
    assert_eq!(g[6], conn.to_string(), "the same connection");
    assert_eq!(g[7], "2", "the connection's second request");
    assert_eq!(g[8], "-");

    let h = &fields[2];
    assert_ne!(
        h[6],
        conn.to_string(),
        "another connection has another number"
    );
    assert_eq!(h[7], "1");

    let j = wait_lines(&s, "logs/j.log", 3);
    assert_eq!(j[0], r#"{"ua":"a\"b\\c d","none":"","s":200}"#);
    assert_eq!(
        j[1], r#"{"ua":"","none":"","s":200}"#,
        "json: a variable without a value is empty"
    );
    let n = wait_lines(&s, "logs/n.log", 3);
    assert_eq!(n[0], "a\"b\\c d||GET /index.html HTTP/1.1");
    assert_eq!(n[1], "||GET /index.html?q HTTP/1.1");
}

/// Bytes that are not printable ASCII are logged as nginx logs them: each byte as itself,
/// `\xHH` with the default escaping (DEL too), raw with `json` and `none`; bytes that are
/// not UTF-8 are not replaced first.
#[test]
fn bytes_beyond_ascii_are_escaped_as_themselves() {
    let s = start(
        "log_format j escape=json '$http_user_agent|$request';\n\
         log_format n escape=none '$http_user_agent|$request_uri';\n\
         access_log logs/access.log;\n\
         access_log logs/j.log j;\n\
         access_log logs/n.log n;",
        "",
    );
    let mut c = Client::connect(s.port);
    c.send(
        b"GET /index.html?q=\xff\xc3\xa9 HTTP/1.1\r\nHost: localhost\r\n\
          User-Agent: x\xffy\xc3\xa9\x7f\r\n\r\n",
    )
    .unwrap();
    assert_eq!(c.read_response().unwrap().status, 200);

    let line = combined(&wait_lines(&s, "logs/access.log", 1)[0]);
    assert_eq!(line.request, "GET /index.html?q=\\xFF\\xC3\\xA9 HTTP/1.1");
    assert_eq!(line.agent, "x\\xFFy\\xC3\\xA9\\x7F");
    let read = |file: &str| {
        wait_for(&format!("a line in {file}"), || {
            std::fs::read(s.prefix.join(file))
                .ok()
                .filter(|b| b.ends_with(b"\n"))
        })
    };
    assert_eq!(
        read("logs/j.log"),
        b"x\xffy\xc3\xa9\x7f|GET /index.html?q=\xff\xc3\xa9 HTTP/1.1\n"
    );
    assert_eq!(
        read("logs/n.log"),
        b"x\xffy\xc3\xa9\x7f|/index.html?q=\xff\xc3\xa9\n"
    );
}

/// nginx's `$body_bytes_sent` is what went out after the head, the chunked framing of a
/// compressed answer included; `$sent_http_*` are the response's headers after the gzip
/// filter (Content-Encoding is one; nginx's `Vary: Accept-Encoding` is written by the header
/// filter itself and is not, so `$sent_http_vary` is `-`).
#[test]
fn sent_bytes_and_headers_of_a_compressed_answer() {
    let s = start(
        "log_format b '$status $body_bytes_sent $bytes_sent [$sent_http_content_encoding] [$sent_http_vary] [$sent_http_content_length]';\n\
         access_log logs/b.log b;\n\
         gzip on;\n\
         gzip_vary on;",
        "",
    );
    let out = exchange(
        s.port,
        b"GET /index.html HTTP/1.1\r\nHost: localhost\r\nAccept-Encoding: gzip\r\nConnection: close\r\n\r\n",
    );
    let head_end = out
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .expect("a complete head")
        + 4;
    let head = String::from_utf8_lossy(&out[..head_end]);
    assert!(head.contains("Content-Encoding: gzip"), "{head}");
    let body_on_wire = out.len() - head_end;
    let l = wait_lines(&s, "logs/b.log", 1);
    assert_eq!(
        l[0],
        format!("200 {body_on_wire} {} [gzip] [-] [-]", out.len()),
        "head:\n{head}"
    );
}

#[test]
fn access_log_off_and_levels_replace_inherited_logs() {
    let s = start(
        "log_format short '$request_uri $status';\n\
         access_log logs/main.log;",
        "location /off/ { alias html/; access_log off; }\n\
         location /own/ { alias html/; access_log logs/own.log short; }\n\
         location /two/ { alias html/; access_log logs/two_a.log short; access_log logs/two_b.log combined; }",
    );
    let mut c = Client::connect(s.port);
    for path in [
        "/off/index.html",
        "/own/index.html",
        "/two/index.html",
        "/index.html",
    ] {
        assert_eq!(c.get(path).unwrap().status, 200, "{path}");
    }
    let main = wait_lines(&s, "logs/main.log", 1);
    assert_eq!(
        main.len(),
        1,
        "only the request with no access_log of its own: {main:?}"
    );
    assert_eq!(combined(&main[0]).request, "GET /index.html HTTP/1.1");
    assert_eq!(lines(&s, "logs/own.log"), ["/own/index.html 200"]);
    assert_eq!(lines(&s, "logs/two_a.log"), ["/two/index.html 200"]);
    let b = lines(&s, "logs/two_b.log");
    assert_eq!(b.len(), 1, "{b:?}");
    assert_eq!(combined(&b[0]).request, "GET /two/index.html HTTP/1.1");
    assert!(
        !s.prefix.join("logs/access.log").exists(),
        "with an access_log at http level the default log is not opened"
    );
}

#[test]
fn access_log_off_at_http_level_logs_nothing() {
    let s = start(
        "access_log off;",
        "location /on/ { alias html/; access_log logs/on.log; }",
    );
    let mut c = Client::connect(s.port);
    assert_eq!(c.get("/index.html").unwrap().status, 200);
    assert_eq!(c.get("/on/index.html").unwrap().status, 200);
    let on = wait_lines(&s, "logs/on.log", 1);
    assert_eq!(on.len(), 1);
    assert!(!s.prefix.join("logs/access.log").exists());
}

/// `buffer=4k` with a long `flush=`: lines go out when the next one would not fit, whole, and
/// the rest when the worker stops.
#[test]
fn buffered_lines_go_out_when_the_buffer_fills_and_at_stop() {
    let mut s = start(
        "log_format pad '$request_uri $http_x_pad';\n\
         access_log logs/buf.log pad buffer=4k flush=1h;",
        "location / { return 204; }",
    );
    let pad = "p".repeat(180);
    let mut c = Client::connect(s.port);
    let n = 60; // 60 lines of about 190 bytes: about 11 KiB, so at least two buffers written.
    for i in 0..n {
        c.send(format!("GET /r{i} HTTP/1.1\r\nHost: localhost\r\nX-Pad: {pad}\r\n\r\n").as_bytes())
            .unwrap();
        let r = c.read_head().unwrap();
        assert_eq!(r.status, 204);
    }
    let written = wait_lines(&s, "logs/buf.log", 1);
    let text = s.prefix.read("logs/buf.log");
    assert!(text.len() <= 4096 * 3, "written in buffers of at most 4k");
    assert!(
        written.len() < n,
        "the last lines stay in the buffer until it fills or the worker stops: {} of {n} written",
        written.len()
    );
    for (i, l) in written.iter().enumerate() {
        assert_eq!(*l, format!("/r{i} {pad}"), "lines whole and in order");
    }
    drop(c);
    s.signal(libc::SIGQUIT);
    s.wait_exit();
    let all = lines(&s, "logs/buf.log");
    assert_eq!(all.len(), n, "every line written at stop");
    assert_eq!(all[n - 1], format!("/r{} {pad}", n - 1));
}

/// `buffer=4k flush=1s`: one line is held, then written within a few seconds.
#[test]
fn buffered_line_is_flushed_after_flush_time() {
    let s = start("access_log logs/f.log combined buffer=4k flush=1s;", "");
    let sent = Instant::now();
    assert_eq!(common::get(s.port, "/index.html").unwrap().status, 200);
    // Checked only if this runs well within the flush time (a slow machine skips the check
    // rather than failing it).
    if sent.elapsed() < Duration::from_millis(700) {
        assert_eq!(
            s.prefix.read("logs/f.log"),
            "",
            "the line waits in the buffer"
        );
    }
    let l = wait_lines(&s, "logs/f.log", 1);
    assert_eq!(l.len(), 1);
    assert_eq!(combined(&l[0]).request, "GET /index.html HTTP/1.1");
}

/// Decompresses with the system's `gzip -dc` (all members, as `zcat` does).
fn gunzip(data: &[u8]) -> Option<Vec<u8>> {
    let mut child = Command::new("gzip")
        .arg("-dc")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("running gzip");
    let mut stdin = child.stdin.take().expect("stdin");
    let data = data.to_vec();
    let w = std::thread::spawn(move || {
        let _ = stdin.write_all(&data);
    });
    let out = child.wait_with_output().expect("gzip output");
    let _ = w.join();
    out.status.success().then_some(out.stdout)
}

#[test]
fn gzip_log_is_a_series_of_gzip_members() {
    let mut s = start(
        "log_format u '$request_uri';\n\
         access_log logs/z.log u gzip flush=1s;",
        "location / { return 204; }",
    );
    let mut c = Client::connect(s.port);
    let ask = |c: &mut Client, i: usize| {
        c.send(format!("GET /z{i} HTTP/1.1\r\nHost: localhost\r\n\r\n").as_bytes())
            .unwrap();
        assert_eq!(c.read_head().unwrap().status, 204);
    };
    for i in 0..5 {
        ask(&mut c, i);
    }
    let want = |n: usize| (0..n).map(|i| format!("/z{i}\n")).collect::<String>();
    // flush=1s writes the first member.
    wait_for("the first gzip member", || {
        let data = std::fs::read(s.prefix.join("logs/z.log")).unwrap_or_default();
        (!data.is_empty() && gunzip(&data).is_some_and(|t| t == want(5).as_bytes())).then_some(())
    });
    for i in 5..8 {
        ask(&mut c, i);
    }
    drop(c);
    s.signal(libc::SIGQUIT);
    s.wait_exit();
    let data = std::fs::read(s.prefix.join("logs/z.log")).expect("the log");
    assert_eq!(&data[..2], &[0x1f, 0x8b], "a gzip member");
    let text = gunzip(&data).expect("gzip -dc reads the whole file");
    assert_eq!(String::from_utf8_lossy(&text), want(8));
    // Two members: the second starts after the first ends (a second gzip header).
    assert!(
        data.windows(3).skip(10).any(|w| w == [0x1f, 0x8b, 0x08]),
        "a second member written at stop"
    );
}

#[test]
fn access_log_if_condition() {
    let s = start(
        "log_format u '$request_uri';\n\
         access_log logs/if.log u if=$arg_log;",
        "location / { return 204; }",
    );
    let mut c = Client::connect(s.port);
    for q in [
        "/?log=1",
        "/?log=0",
        "/",
        "/?log=",
        "/?log=yes",
        "/?other=1",
        "/?log=last",
    ] {
        c.send(format!("GET {q} HTTP/1.1\r\nHost: localhost\r\n\r\n").as_bytes())
            .unwrap();
        assert_eq!(c.read_head().unwrap().status, 204);
    }
    let l = wait_lines(&s, "logs/if.log", 3);
    assert_eq!(l, ["/?log=1", "/?log=yes", "/?log=last"]);
}

#[test]
fn usr1_reopens_the_log_after_a_rename() {
    let s = start(
        "log_format u '$request_uri';\naccess_log logs/access.log u;",
        "location / { return 204; }",
    );
    let mut c = Client::connect(s.port);
    let mut sent = 0;
    let mut ask = |c: &mut Client| {
        c.send(format!("GET /n{sent} HTTP/1.1\r\nHost: localhost\r\n\r\n").as_bytes())
            .unwrap();
        assert_eq!(c.read_head().unwrap().status, 204);
        sent += 1;
        sent
    };
    ask(&mut c);
    wait_lines(&s, "logs/access.log", 1);
    std::fs::rename(
        s.prefix.join("logs/access.log"),
        s.prefix.join("logs/access.log.1"),
    )
    .expect("renaming the log");
    // Still written to the renamed file until the reopen.
    ask(&mut c);
    wait_lines(&s, "logs/access.log.1", 2);
    s.signal(libc::SIGUSR1);
    let total = wait_for("a new logs/access.log after SIGUSR1", || {
        let n = ask(&mut c);
        let new = lines(&s, "logs/access.log");
        (!new.is_empty()).then_some(n)
    });
    let old = lines(&s, "logs/access.log.1");
    let new = wait_for("every line in one of the two files", || {
        let new = lines(&s, "logs/access.log");
        (old.len() + new.len() == total).then_some(new)
    });
    assert_eq!(&old[..2], ["/n0", "/n1"]);
    let mut all = old.clone();
    all.extend(new.iter().cloned());
    let want: Vec<String> = (0..total).map(|i| format!("/n{i}")).collect();
    assert_eq!(all, want, "each line once, in order, old file first");
    assert_eq!(
        new.last().map(String::as_str),
        Some(format!("/n{}", total - 1).as_str())
    );
    assert!(
        s.error_log().contains("reopening logs"),
        "{}",
        s.error_log()
    );
}

#[test]
fn unknown_log_format_fails_at_t_with_file_and_line() {
    let p = Prefix::new();
    let text = "events {}\nhttp {\n    log_format a '$status';\n    server {\n        listen 127.0.0.1:1;\n        access_log logs/x.log x;\n    }\n}\n";
    let file = p.write_conf(text);
    let out = p.run(&["-t"]);
    let err = String::from_utf8_lossy(&out.stderr);
    let file = file.display();
    assert_eq!(
        err,
        format!("shoal: [emerg] unknown log format \"x\" in {file}:6\nshoal: configuration file {file} test failed\n")
    );
    assert_eq!(out.status.code(), Some(1));
    // escape= with an unknown value, and a duplicate name.
    p.write_conf("events {}\nhttp {\n    log_format a escape=xml '$status';\n}\n");
    let err = String::from_utf8_lossy(&p.run(&["-t"]).stderr).into_owned();
    assert!(
        err.starts_with(&format!(
            "shoal: [emerg] unknown log format escaping \"xml\" in {file}:3\n"
        )),
        "{err}"
    );
    p.write_conf("events {}\nhttp {\n    log_format a '$status';\n    log_format a '$uri';\n}\n");
    let err = String::from_utf8_lossy(&p.run(&["-t"]).stderr).into_owned();
    assert!(
        err.starts_with(&format!(
            "shoal: [emerg] duplicate \"log_format\" name \"a\" in {file}:4\n"
        )),
        "{err}"
    );
}

/// Requests that could not be read are logged as nginx logs them: `$request` is the request
/// line as far as it was read (escaped), or the parsed line when the head failed later, with
/// the status sent and the bytes of the error page.
#[test]
fn bad_requests_are_logged_with_what_was_read_of_the_request_line() {
    let port = free_port();
    let s = Shoal::start(&conf_with(port, "", ""), port);

    let mut wrong = Vec::new();
    // A request line that is not HTTP (a TLS hello on a plain port, say).
    let out = exchange(port, b"\x16\x03\x01garbage\r\n\r\n");
    assert!(
        out.starts_with(b"HTTP/1.1 400 Bad Request\r\n"),
        "{}",
        String::from_utf8_lossy(&out)
    );
    let page = body_len(&out);
    let l = wait_lines(&s, "logs/access.log", 1);
    let a = combined(&l[0]);
    assert_eq!(
        (a.status.as_str(), a.bytes.clone()),
        ("400", page.to_string())
    );
    if a.request != "\\x16\\x03\\x01garbage" {
        wrong.push(format!(
            "unparsable line: $request {:?}, nginx logs \\x16\\x03\\x01garbage",
            a.request
        ));
    }

    // HTTP/1.1 without Host: the line was parsed.
    let out = exchange(port, b"GET /index.html HTTP/1.1\r\n\r\n");
    assert!(
        out.starts_with(b"HTTP/1.1 400 Bad Request\r\n"),
        "{}",
        String::from_utf8_lossy(&out)
    );
    let l = wait_lines(&s, "logs/access.log", 2);
    let b = combined(&l[1]);
    assert_eq!(b.status, "400");
    assert_eq!(b.bytes, body_len(&out).to_string());
    if b.request != "GET /index.html HTTP/1.1" {
        wrong.push(format!(
            "no Host: $request {:?}, nginx logs GET /index.html HTTP/1.1",
            b.request
        ));
    }
    assert!(
        wrong.is_empty(),
        "400s logged unlike nginx:\n{}",
        wrong.join("\n")
    );

    // A client that closes in the middle of its head: nginx logs a 400 with no bytes sent.
    {
        let mut c = TcpStream::connect(("127.0.0.1", port)).unwrap();
        c.write_all(b"GET /half HTTP/1.1\r\nHo").unwrap();
    }
    let l = wait_lines(&s, "logs/access.log", 3);
    let c = combined(&l[2]);
    assert_eq!(
        (c.request.as_str(), c.status.as_str(), c.bytes.as_str()),
        ("GET /half HTTP/1.1", "400", "0")
    );
}

/// The body length of a raw response with Content-Length.
fn body_len(out: &[u8]) -> usize {
    let head_end = out
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .expect("a head")
        + 4;
    out.len() - head_end
}

#[test]
fn log_path_with_variables() {
    let s = start(
        "log_format u '$host $request_uri';\naccess_log logs/$host.log u;",
        "",
    );
    for host in ["alpha.test", "beta.test", "alpha.test"] {
        let mut c = Client::connect(s.port);
        c.send(format!("GET /index.html HTTP/1.1\r\nHost: {host}\r\n\r\n").as_bytes())
            .unwrap();
        assert_eq!(c.read_response().unwrap().status, 200);
    }
    let a = wait_lines(&s, "logs/alpha.test.log", 2);
    assert_eq!(a, ["alpha.test /index.html", "alpha.test /index.html"]);
    let b = wait_lines(&s, "logs/beta.test.log", 1);
    assert_eq!(b, ["beta.test /index.html"]);
    assert!(!s.prefix.join("logs/access.log").exists());
}

/// A `map` on `$sent_http_*` logged through its variable sees the answer's headers (the line's
/// headers are listed for any format that may read them, through a variable of the
/// configuration too); `combined`, which cannot, is written alongside.
#[test]
fn a_map_of_sent_headers_in_a_log_format_sees_the_answer() {
    let s = start(
        "map $sent_http_content_type $kind { default other; ~^text/html page; }\n\
         log_format k '$kind $status';\n\
         access_log logs/k.log k;\n\
         access_log logs/c.log combined;",
        "",
    );
    let mut c = Client::connect(s.port);
    assert_eq!(c.get("/index.html").unwrap().status, 200);
    assert_eq!(c.get("/nope.html").unwrap().status, 404);
    let k = wait_lines(&s, "logs/k.log", 2);
    assert_eq!(k, ["page 200", "page 404"]);
    assert_eq!(wait_lines(&s, "logs/c.log", 2).len(), 2);
}
