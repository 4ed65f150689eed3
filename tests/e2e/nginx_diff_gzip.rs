//! shoal against real nginx for the gzip filter with seed 004's settings
//! (`tests/confs/seed004-*.conf`): which answers are compressed and which are not.
//!
//! Every scenario starts nginx and shoal with one configuration (the harness in `diff/mod.rs`)
//! and asserts they answer alike. nginx is the reference: a difference is a bug in shoal.
//!
//! Compressed answers cannot be compared byte for byte (zlib implementations differ): for those
//! this file reads the raw answers itself, removes the chunked framing, decompresses with the
//! system's `gzip -dc`, and compares status, headers (framing included: both must send
//! `Transfer-Encoding: chunked`) and the decompressed body.

use std::fs;
use std::io::Write;
use std::process::{Command, Stdio};

use crate::common::client::{dechunk, exchange_half_closed};
use crate::diff::{Conf, Pair};

fn req(path: &str, headers: &str) -> Vec<u8> {
    format!("GET {path} HTTP/1.1\r\nHost: localhost\r\n{headers}\r\n").into_bytes()
}

/// seed 004's gzip lines (`tests/confs/seed004-*.conf`).
const SEED004_GZIP: &str = "    gzip on;\n    gzip_vary on;\n    gzip_proxied any;\n    \
     gzip_comp_level 2;\n    gzip_buffers 16 8k;\n    gzip_http_version 1.1;\n    \
     gzip_min_length 256;\n    gzip_types text/plain text/css application/json \
     application/x-javascript text/xml application/xml application/xml+rss text/javascript;\n";

/// The ports nginx and shoal listen on, from the configurations the harness wrote.
fn ports(p: &Pair) -> (u16, u16) {
    let dir = p
        .html()
        .parent()
        .expect("the pair's directory")
        .to_path_buf();
    let port = |who: &str| -> u16 {
        let conf = fs::read_to_string(dir.join(who).join("conf/test.conf"))
            .expect("the harness's configuration");
        conf.split("listen 127.0.0.1:")
            .nth(1)
            .and_then(|r| r.split(';').next())
            .and_then(|p| p.parse().ok())
            .expect("the listen port")
    };
    (port("nginx"), port("shoal"))
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

fn gunzip(data: &[u8]) -> Vec<u8> {
    let mut child = Command::new("gzip")
        .arg("-dc")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("running gzip -dc");
    let mut stdin = child.stdin.take().expect("gzip's stdin");
    let data = data.to_vec();
    let writer = std::thread::spawn(move || {
        let _ = stdin.write_all(&data);
    });
    let out = child.wait_with_output().expect("gzip -dc");
    writer.join().expect("the writer thread");
    assert!(
        out.status.success(),
        "gzip -dc failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

/// One answer (the connection carries only one) as comparable text: status, sorted headers but
/// `Date` and `Server`, and the body unchunked and decompressed.
fn decoded(raw: &[u8], head_request: bool) -> String {
    let end = find(raw, b"\r\n\r\n").expect("a complete head");
    let head = String::from_utf8_lossy(&raw[..end]).into_owned();
    let body = &raw[end + 4..];
    let mut lines = head.split("\r\n");
    let status = lines.next().unwrap_or_default().to_string();
    let mut headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(n, v)| (n.to_ascii_lowercase(), v.trim().to_string()))
        .filter(|(n, _)| n != "date" && n != "server")
        .collect();
    headers.sort();
    let has = |name: &str, value: &str| headers.iter().any(|(n, v)| n == name && v == value);
    let mut body = body.to_vec();
    if !head_request && has("transfer-encoding", "chunked") {
        body = dechunk(&body).unwrap_or_else(|| b"[broken chunked framing]".to_vec());
    }
    if !head_request && has("content-encoding", "gzip") {
        body = gunzip(&body);
    }
    let mut out = status;
    out.push('\n');
    for (n, v) in headers {
        out.push_str(&format!("{n}: {v}\n"));
    }
    out.push('\n');
    out.push_str(&String::from_utf8_lossy(&body));
    out
}

/// Sends `req` to both and compares the decoded answers; returns nginx's.
fn check_gzip(p: &Pair, req: &[u8]) -> String {
    let (np, sp) = ports(p);
    let head_request = req.starts_with(b"HEAD ");
    let n = decoded(&exchange_half_closed(np, req), head_request);
    let s = decoded(&exchange_half_closed(sp, req), head_request);
    assert_eq!(
        n,
        s,
        "shoal differs from nginx for {:?}\n--- nginx\n{n}\n--- shoal\n{s}",
        String::from_utf8_lossy(req)
    );
    n
}

fn gzip_pair(server: &str) -> Pair {
    let p = Pair::with(Conf {
        http: SEED004_GZIP,
        server,
        ..Default::default()
    });
    let html = p.html();
    let text: String = (0..200)
        .map(|i| format!("line {i} of a long text\n"))
        .collect();
    fs::write(html.join("big.txt"), &text).expect("big.txt");
    fs::write(html.join("big.css"), &text).expect("big.css");
    fs::write(html.join("big.json"), &text).expect("big.json");
    fs::write(html.join("big.html"), format!("<pre>{text}</pre>")).expect("big.html");
    fs::write(html.join("big.png"), &text).expect("big.png");
    fs::write(html.join("edge.txt"), "x".repeat(256)).expect("edge.txt");
    fs::write(html.join("under.txt"), "x".repeat(255)).expect("under.txt");
    p
}

#[test]
fn gzip_seed004_compressed_answers() {
    let p = gzip_pair(
        "location = /ret.txt { return 200 \"$request_uri returned with a text long enough to be \
         compressed, or is it? 0123456789012345678901234567890123456789012345678901234567890123\
         456789012345678901234567890123456789012345678901234567890123456789012345678901234567890\
         12345678901234567890123456789012345678901234567890123456789\"; }\n\
         location /rw/ { rewrite ^/rw/(.*)$ /$1 break; }",
    );
    let ae = "Accept-Encoding: gzip, deflate\r\n";
    for u in [
        "/big.txt",
        "/big.css",
        "/big.json",
        "/big.html",
        "/edge.txt",
        "/ret.txt",
        "/rw/big.txt",
    ] {
        let r = check_gzip(&p, &req(u, ae));
        assert!(r.contains("content-encoding: gzip"), "{u}: {r}");
        assert!(r.contains("transfer-encoding: chunked"), "{u}: {r}");
    }
    check_gzip(
        &p,
        &req("/big.txt", "Accept-Encoding: gzip\r\nVia: 1.1 proxy\r\n"),
    );
    check_gzip(&p, &req("/big.txt", "Accept-Encoding: GZIP\r\n"));
    check_gzip(
        &p,
        &req("/big.txt", "Accept-Encoding: br;q=1, gzip;q=0.5\r\n"),
    );
    check_gzip(&p, &req("/big.txt", &format!("{ae}Range: bytes=0-9\r\n")));
    check_gzip(
        &p,
        &req("/big.txt", &format!("{ae}If-None-Match: W/\"x\"\r\n")),
    );
}

#[test]
fn gzip_seed004_uncompressed_answers() {
    let p = gzip_pair("location = /small { return 200 \"small\"; }");
    let ae = "Accept-Encoding: gzip\r\n";
    // Not compressed: type not listed, too short, no or refused Accept-Encoding, HTTP/1.0,
    // error pages (short), HEAD.
    for u in ["/big.png", "/under.txt", "/small", "/nope", "/a.txt"] {
        p.get(u, ae);
    }
    p.get("/big.txt", "");
    p.get("/big.txt", "Accept-Encoding: gzip;q=0\r\n");
    p.get("/big.txt", "Accept-Encoding: identity\r\n");
    p.check(b"GET /big.txt HTTP/1.0\r\nAccept-Encoding: gzip\r\n\r\n");
    check_gzip(
        &p,
        b"HEAD /big.txt HTTP/1.1\r\nHost: localhost\r\nAccept-Encoding: gzip\r\n\r\n",
    );
    p.head("/big.txt", "");
}
