//! Request body and proxy temporary files, end to end: `client_body_temp_path` and
//! `proxy_temp_path` with `levels` (nginx's numbered files in level directories, logged as
//! nginx logs them), `client_body_in_file_only on|clean`; and `chunked_transfer_encoding off`
//! on a compressed answer.

use std::fs;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::common::upstream::{echo_answer, Answer, Upstream};
use crate::common::{free_port, Shoal};

fn conf(port: u16, server: &str) -> String {
    format!(
        "daemon off;\nerror_log logs/error.log info;\nevents {{ }}\n\
         http {{\n    access_log off;\n    include mime.types;\n    server {{\n        \
         listen 127.0.0.1:{port};\n        server_name localhost;\n        root html;\n\
         {server}\n    }}\n}}\n"
    )
}

/// A POST of `len` bytes of `b`, read to the close.
fn post(port: u16, path: &str, len: usize) -> Vec<u8> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let head = format!(
        "POST {path} HTTP/1.1\r\nHost: localhost\r\nContent-Length: {len}\r\n\
         Connection: close\r\n\r\n"
    );
    s.write_all(head.as_bytes()).unwrap();
    s.write_all(&vec![b'b'; len]).unwrap();
    let mut out = Vec::new();
    s.read_to_end(&mut out).unwrap();
    out
}

/// Every file under `dir`, recursively.
fn files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for e in fs::read_dir(dir).into_iter().flatten().flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(files(&p));
        } else {
            out.push(p);
        }
    }
    out
}

/// The file a log line names after `needle`.
fn logged_file(log: &str, needle: &str) -> PathBuf {
    let line = log
        .lines()
        .find(|l| l.contains(needle))
        .unwrap_or_else(|| panic!("no {needle:?} in:\n{log}"));
    let rest = &line[line.find(needle).unwrap() + needle.len()..];
    PathBuf::from(rest.split([',', ' ']).next().unwrap())
}

#[test]
fn request_bodies_in_numbered_files_under_levels() {
    let up = Upstream::start(echo_answer);
    let port = free_port();
    let s = Shoal::start(
        &conf(
            port,
            &format!(
                "client_body_temp_path body 1 2;\n\
                 location /spill/ {{ proxy_pass {0}; }}\n\
                 location /on/ {{ proxy_pass {0}; client_body_temp_path kept 2; \
                 client_body_in_file_only on; }}\n\
                 location /clean/ {{ proxy_pass {0}; client_body_temp_path cleaned 2; \
                 client_body_in_file_only clean; }}",
                up.url()
            ),
        ),
        port,
    );
    let body_dir = s.prefix.join("body");
    // Over client_body_buffer_size (16k): a file, named and levelled, gone once open.
    let r = post(port, "/spill/", 40_000);
    assert!(
        r.starts_with(b"HTTP/1.1 200"),
        "{}",
        String::from_utf8_lossy(&r)
    );
    assert!(up.last().body.len() == 40_000);
    let log = s.error_log();
    assert!(log.contains("[warn]"), "{log}");
    let f = logged_file(
        &log,
        "a client request body is buffered to a temporary file ",
    );
    let name = f.file_name().unwrap().to_str().unwrap().to_string();
    assert_eq!(name.len(), 10, "{name}");
    assert_eq!(
        f,
        body_dir.join(&name[9..]).join(&name[7..9]).join(&name),
        "levels 1 2"
    );
    assert!(!f.exists(), "unlinked once open");
    assert!(f.parent().unwrap().is_dir());
    // A small body stays in memory.
    let before = s
        .error_log()
        .matches("buffered to a temporary file")
        .count();
    post(port, "/spill/", 100);
    assert_eq!(
        s.error_log()
            .matches("buffered to a temporary file")
            .count(),
        before
    );
    // `on`: every body to a file, kept; `clean`: removed when the request ends.
    post(port, "/on/", 10);
    let kept = files(&s.prefix.join("kept"));
    assert_eq!(kept.len(), 1, "{kept:?}");
    assert_eq!(fs::read(&kept[0]).unwrap(), b"bbbbbbbbbb");
    assert!(s.error_log().contains("[notice]"));
    post(port, "/clean/", 10);
    assert_eq!(up.last().body, b"bbbbbbbbbb");
    let cleaned = s.prefix.join("cleaned");
    crate::common::wait_for("the clean file removed", || {
        files(&cleaned).is_empty().then_some(())
    });
    assert!(
        fs::read_dir(&cleaned).unwrap().next().is_some(),
        "its level directory stays"
    );
}

#[test]
fn a_slow_client_s_answer_waits_in_a_levelled_proxy_temp_file() {
    let big = vec![b'u'; 24 << 20];
    let up = Upstream::start(move |_| Answer::ok(big.clone()));
    let port = free_port();
    let s = Shoal::start(
        &conf(
            port,
            &format!(
                "location / {{ proxy_pass {}; proxy_temp_path ptmp 2 1; \
                 proxy_buffers 2 4k; proxy_busy_buffers_size 4k; }}",
                up.url()
            ),
        ),
        port,
    );
    let mut c = TcpStream::connect(("127.0.0.1", port)).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    c.write_all(b"GET /x HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
        .unwrap();
    // The client reads nothing until the upstream's answer is in.
    crate::common::wait_for("the temp file line", || {
        s.error_log()
            .contains("an upstream response is buffered to a temporary file")
            .then_some(())
    });
    let mut all = Vec::new();
    c.read_to_end(&mut all).unwrap();
    assert!(all.ends_with(&[b'u'; 100]));
    let log = s.error_log();
    let f = logged_file(
        &log,
        "an upstream response is buffered to a temporary file ",
    );
    let name = f.file_name().unwrap().to_str().unwrap().to_string();
    let want = s
        .prefix
        .join("ptmp")
        .join(&name[8..])
        .join(&name[7..8])
        .join(&name);
    assert_eq!(f, want);
    assert!(
        log.contains(" while reading upstream, client: 127.0.0.1"),
        "{log}"
    );
    assert!(!f.exists());
}

#[test]
fn chunked_transfer_encoding_off_closes_a_compressed_answer() {
    let port = free_port();
    let s = Shoal::start(
        &conf(
            port,
            "location / { gzip on; gzip_min_length 1; gzip_types text/plain; }\n\
             location /on/ { alias html/; gzip on; gzip_min_length 1; gzip_types text/plain; \
             chunked_transfer_encoding on; }\n\
             chunked_transfer_encoding off;",
        ),
        port,
    );
    fs::write(s.prefix.join("html/t.txt"), "text ".repeat(100)).unwrap();
    let get = |path: &str| {
        let mut c = TcpStream::connect(("127.0.0.1", port)).unwrap();
        c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        c.write_all(
            format!("GET {path} HTTP/1.1\r\nHost: x\r\nAccept-Encoding: gzip\r\n\r\n").as_bytes(),
        )
        .unwrap();
        let mut out = Vec::new();
        let _ = c.read_to_end(&mut out);
        out
    };
    let off = get("/t.txt");
    let head =
        String::from_utf8_lossy(&off[..off.windows(4).position(|w| w == b"\r\n\r\n").unwrap()])
            .into_owned();
    assert!(head.contains("Content-Encoding: gzip"), "{head}");
    assert!(head.contains("Connection: close"), "{head}");
    assert!(!head.contains("Transfer-Encoding"), "{head}");
    assert!(!head.contains("Content-Length"), "{head}");
    let body = &off[head.len() + 4..];
    assert!(body.starts_with(&[0x1f, 0x8b]), "raw gzip, no chunk sizes");
    // `on` in a location: chunked, and the connection stays (read times out, not closed).
    let mut c = TcpStream::connect(("127.0.0.1", port)).unwrap();
    c.set_read_timeout(Some(Duration::from_millis(500)))
        .unwrap();
    c.write_all(b"GET /on/t.txt HTTP/1.1\r\nHost: x\r\nAccept-Encoding: gzip\r\n\r\n")
        .unwrap();
    let mut buf = vec![0; 65536];
    let n = loop {
        match c.read(&mut buf) {
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            other => break other.unwrap(),
        }
    };
    let text = String::from_utf8_lossy(&buf[..n]);
    assert!(text.contains("Transfer-Encoding: chunked"), "{text}");
    assert!(text.contains("Connection: keep-alive"), "{text}");
}
