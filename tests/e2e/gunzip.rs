//! `gunzip` end to end: a gzip answer (an upstream's, a `gzip_static always` file) inflated
//! for a client that takes no gzip and passed as it is to one that does; a body that inflates
//! to far more than the memory shoal may hold goes out whole with shoal's resident set bounded;
//! a body that is not gzip ends the answer with nginx's error-log line.

use std::io::{BufRead, Read, Write};
use std::process::{Command, Stdio};

use crate::common::client::{request, Client};
use crate::common::upstream::{Answer, Upstream};
use crate::common::*;

/// `gzip -c -n` of `data`.
pub fn gzip(data: &[u8]) -> Vec<u8> {
    let mut child = Command::new("gzip")
        .args(["-c", "-n"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("running gzip -c");
    let mut stdin = child.stdin.take().unwrap();
    let data = data.to_vec();
    let writer = std::thread::spawn(move || {
        let _ = stdin.write_all(&data);
    });
    let out = child.wait_with_output().expect("gzip -c output");
    writer.join().unwrap();
    assert!(out.status.success(), "gzip -c failed");
    out.stdout
}

fn start(port: u16, prefix: Prefix, server: &str) -> Shoal {
    let conf = format!(
        "daemon off;\nworker_processes 1;\nerror_log logs/error.log info;\n\
         events {{ worker_connections 64; }}\n\
         http {{\n    access_log off;\n    default_type text/plain;\n    server {{\n        \
         listen 127.0.0.1:{port};\n        server_name localhost;\n{server}\n    }}\n}}\n"
    );
    Shoal::start_in(prefix, &conf, port, &[])
}

#[test]
fn a_gzip_answer_is_inflated_for_a_client_that_takes_no_gzip() {
    let text = "an upstream's text, compressed\n".repeat(500);
    let gz = gzip(text.as_bytes());
    let body = gz.clone();
    let up = Upstream::start(move |_| {
        Answer::ok(body.clone())
            .header("Content-Encoding", "gzip")
            .header("ETag", "\"e1\"")
            .header("Accept-Ranges", "bytes")
    });
    let port = free_port();
    let _s = start(
        port,
        Prefix::new(),
        &format!(
            "gzip_vary on;\nlocation / {{ proxy_pass {}; gunzip on; gunzip_buffers 4 1k; }}",
            up.url()
        ),
    );
    let mut c = Client::connect(port);
    let plain = c.ask(&request("GET", "/", "")).unwrap();
    assert_eq!(plain.status, 200);
    assert_eq!(String::from_utf8_lossy(&plain.body), text);
    assert_eq!(plain.header("content-encoding"), None, "{}", plain.show());
    assert_eq!(plain.header("transfer-encoding"), Some("chunked"));
    assert_eq!(plain.header("content-length"), None);
    assert_eq!(plain.header("accept-ranges"), None);
    assert_eq!(plain.header("etag"), Some("W/\"e1\""));
    assert_eq!(plain.header("vary"), Some("Accept-Encoding"));
    let zipped = c
        .ask(&request("GET", "/", "Accept-Encoding: gzip\r\n"))
        .unwrap();
    assert_eq!(zipped.header("content-encoding"), Some("gzip"));
    assert_eq!(zipped.body, gz);
    assert_eq!(zipped.header("etag"), Some("\"e1\""));
}

/// The peak resident set of a process in KiB (`VmHWM`).
fn peak_kib(pid: i32) -> u64 {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("/proc/PID/status");
    s.lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().strip_suffix("kB"))
        .and_then(|v| v.trim().parse().ok())
        .expect("a VmHWM line")
}

#[test]
fn a_body_that_inflates_a_thousandfold_goes_out_in_bounded_memory() {
    const INFLATED: usize = 256 << 20;
    let prefix = Prefix::new();
    std::fs::write(prefix.join("html/zeros.txt.gz"), gzip(&vec![0u8; INFLATED])).unwrap();
    std::fs::write(prefix.join("html/zeros.txt"), "").unwrap();
    let port = free_port();
    let s = start(
        port,
        prefix,
        "location / { gzip_static always; gunzip on; }",
    );
    // A first answer sizes the worker's buffers; the peak after it is the baseline.
    let warm = Client::connect(port)
        .ask(&request("GET", "/index.html", ""))
        .unwrap();
    assert_eq!(warm.status, 200);
    let before = peak_kib(s.pid);
    let mut c = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    c.write_all(request("GET", "/zeros.txt", "Connection: close\r\n").as_bytes())
        .unwrap();
    let mut c = std::io::BufReader::new(c);
    let mut line = String::new();
    let mut head = String::new();
    while line != "\r\n" {
        line.clear();
        c.read_line(&mut line).unwrap();
        head.push_str(&line);
    }
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    assert!(head.contains("Transfer-Encoding: chunked"), "{head}");
    // The chunks' payload, checked and counted as it comes (never held).
    let mut zeros = 0usize;
    let mut piece = Vec::new();
    loop {
        line.clear();
        c.read_line(&mut line).unwrap();
        let size = usize::from_str_radix(line.trim_end(), 16).unwrap();
        piece.resize(size + 2, 1);
        c.read_exact(&mut piece).unwrap();
        if size == 0 {
            break;
        }
        assert!(piece[..size].iter().all(|&b| b == 0));
        zeros += size;
    }
    assert_eq!(zeros, INFLATED);
    let grown = peak_kib(s.pid).saturating_sub(before);
    assert!(grown < 32 * 1024, "the peak grew by {grown} KiB");
}

#[test]
fn a_body_that_is_not_gzip_ends_the_answer_with_nginx_s_line() {
    let prefix = Prefix::new();
    std::fs::write(prefix.join("html/bad.txt.gz"), "plain, not gzip\n").unwrap();
    std::fs::write(prefix.join("html/bad.txt"), "").unwrap();
    let port = free_port();
    let s = start(
        port,
        prefix,
        "location / { gzip_static always; gunzip on; }",
    );
    let mut c = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    c.write_all(request("GET", "/bad.txt", "").as_bytes())
        .unwrap();
    let mut got = Vec::new();
    let _ = c.read_to_end(&mut got);
    // The whole body was one piece: nothing of the answer went out (as nginx).
    assert!(got.is_empty(), "{}", String::from_utf8_lossy(&got));
    s.wait_log(
        "inflate() failed: 4, -3 while sending response to client, client: 127.0.0.1",
        1,
    );
}
