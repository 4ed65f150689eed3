//! The SCGI netstring against a small SCGI server in Python (standard library only), over a
//! unix socket; its answers, with a `Status` header or an HTTP status line, read with the
//! SCGI/uwsgi head parser and body framing.

mod backends;

use std::collections::HashMap;
use std::process::Command;

use backends::Server;
use shoal_http::bytes::BytesMut;
use shoal_http::cgi::{framing, http_param_name, CgiHeadParser};
use shoal_http::crc32::crc32;
use shoal_http::scgi::request_head;
use shoal_http::{BodyChunk, Framing, UpstreamBodyDecoder, UpstreamHead};

/// Reads the netstring and the body as the SCGI protocol says, and echoes them; `/http`
/// answers with a status line, `/redirect` with `Location` alone, anything else with a
/// `Status` header.
const SERVER: &str = r#"
import os, socket, sys, zlib

path = sys.argv[1]
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.bind(path)
s.listen(16)
while True:
    c, _ = s.accept()
    f = c.makefile('rb')
    digits = b''
    while True:
        ch = f.read(1)
        if ch == b':' or ch == b'':
            break
        if not ch.isdigit():
            raise SystemExit('bad netstring length: %r' % (digits + ch))
        digits += ch
    if not digits:
        # A connection closed before a request: the test's check that we listen.
        f.close()
        c.close()
        continue
    head = f.read(int(digits))
    if f.read(1) != b',':
        raise SystemExit('netstring without its comma')
    items = head.split(b'\0')
    if items[-1] != b'':
        raise SystemExit('the last value is not NUL-terminated')
    items = items[:-1]
    names, values = items[0::2], items[1::2]
    env = dict(zip(names, values))
    body = f.read(int(env[b'CONTENT_LENGTH']))
    out = [b'FIRST=' + names[0], b'COUNT=%d' % len(names)]
    for k, v in zip(names, values):
        out.append(k + b'=' + (v if len(v) < 200 else b'len:%d' % len(v)))
    out.append(b'BODY=%d:%d' % (len(body), zlib.crc32(body)))
    text = b'\n'.join(out) + b'\n'
    uri = env.get(b'REQUEST_URI', b'')
    if uri == b'/http':
        head = b'HTTP/1.1 202 Accepted\r\nContent-Type: text/plain\r\n'
    elif uri == b'/redirect':
        head = b'Location: /elsewhere\r\n'
    else:
        head = b'Status: 201 Created\r\nContent-Type: text/plain\r\n'
    c.sendall(head + b'Content-Length: %d\r\n\r\n' % len(text) + text)
    # The file object holds the socket open too.
    f.close()
    c.close()
"#;

fn scgi() -> Server {
    let dir = backends::tempdir();
    std::fs::write(dir.path().join("scgi.py"), SERVER).expect("writing the server");
    let socket = dir.path().join("scgi.sock");
    let mut cmd = Command::new(backends::program(&["python3"], "python3"));
    cmd.env_clear().arg("scgi.py").arg(&socket);
    Server::start("scgi", cmd, dir, socket, false)
}

struct Reply {
    head: UpstreamHead,
    body: Vec<u8>,
}

impl Reply {
    fn vars(&self) -> HashMap<String, String> {
        String::from_utf8_lossy(&self.body)
            .lines()
            .filter_map(|l| l.split_once('='))
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .collect()
    }
}

fn request(server: &Server, uri: &str, body: &[u8], headers: &[(&str, &[u8])]) -> Reply {
    let mut params: Vec<(Vec<u8>, Vec<u8>)> = [
        (
            "REQUEST_METHOD",
            if body.is_empty() { "GET" } else { "POST" },
        ),
        ("REQUEST_URI", uri),
        ("QUERY_STRING", ""),
        ("CONTENT_TYPE", ""),
        ("SCGI", "1"),
        ("SERVER_PROTOCOL", "HTTP/1.1"),
        ("REMOTE_ADDR", "127.0.0.1"),
        ("SERVER_NAME", "localhost"),
    ]
    .iter()
    .map(|(k, v)| (k.as_bytes().to_vec(), v.as_bytes().to_vec()))
    .collect();
    for (name, value) in headers {
        params.push((http_param_name(name.as_bytes()), value.to_vec()));
    }
    let mut out = BytesMut::new();
    request_head(
        &mut out,
        body.len() as u64,
        params.iter().map(|(k, v)| (&k[..], &v[..])),
    )
    .expect("no NUL in the params");
    out.extend_from_slice(body);
    let answer = server.exchange(&out);
    let mut buf = BytesMut::from(&answer[..]);
    let head = CgiHeadParser::http_or_cgi()
        .parse_buf(&mut buf, 4096)
        .expect("a valid head")
        .unwrap_or_else(|| panic!("a complete head: {:?}\n{}", answer, server.log()));
    let framing = framing(&head, false);
    assert!(matches!(framing, Framing::Length(_)), "{framing:?}");
    let mut decoder = UpstreamBodyDecoder::new(framing);
    let mut body = Vec::new();
    loop {
        match decoder.decode_buf(&mut buf).expect("a valid body") {
            BodyChunk::Data(b) => body.extend_from_slice(&b),
            BodyChunk::NeedMore => panic!("the body is shorter than its length"),
            BodyChunk::Done => break,
        }
    }
    assert!(buf.is_empty(), "bytes after the body");
    Reply { head, body }
}

#[test]
fn netstring_body_and_status_header() {
    let server = scgi();
    let body: Vec<u8> = (0..70_000u32).map(|i| (i * 31 % 256) as u8).collect();
    let big = vec![b'v'; 100_000];
    let r = request(
        &server,
        "/echo",
        &body,
        &[("X-Custom", b"custom value"), ("X-Big", &big)],
    );
    assert_eq!(
        (r.head.status(), r.head.status_line()),
        (201, &b"201 Created"[..])
    );
    assert_eq!(r.head.header("status"), Some(&b"201 Created"[..]));
    let vars = r.vars();
    assert_eq!(vars["FIRST"], "CONTENT_LENGTH");
    assert_eq!(vars["CONTENT_LENGTH"], "70000");
    assert_eq!(vars["COUNT"], "11");
    assert_eq!(vars["SCGI"], "1");
    assert_eq!(vars["HTTP_X_CUSTOM"], "custom value");
    assert_eq!(vars["HTTP_X_BIG"], "len:100000");
    assert_eq!(vars["BODY"], format!("70000:{}", crc32(&body)));
}

#[test]
fn status_line_and_location_answers() {
    let server = scgi();
    let r = request(&server, "/http", b"", &[]);
    assert_eq!(
        (r.head.status(), r.head.status_line()),
        (202, &b"202 Accepted"[..])
    );
    assert_eq!(r.vars()["CONTENT_LENGTH"], "0");
    let r = request(&server, "/redirect", b"", &[]);
    assert_eq!(
        (r.head.status(), r.head.status_line()),
        (302, &b"302 Moved Temporarily"[..])
    );
    assert_eq!(r.head.header("location"), Some(&b"/elsewhere"[..]));
}
