//! The uwsgi packet against a real uwsgi (Debian's `uwsgi` with its python3 plugin) running a
//! small WSGI application, over a unix socket; the answer read with the SCGI/uwsgi head parser
//! and body framing.

mod backends;

use std::collections::HashMap;
use std::process::Command;

use backends::Server;
use shoal_http::bytes::BytesMut;
use shoal_http::cgi::{framing, http_param_name, CgiHeadParser};
use shoal_http::crc32::crc32;
use shoal_http::uwsgi::{request_head, MAX_VARS};
use shoal_http::{BodyChunk, UpstreamBodyDecoder, UpstreamHead};

/// Echoes what it was given; `/missing` is a 404, `/cgi` answers without a reason phrase.
const APP: &str = r#"
import zlib

def application(environ, start_response):
    length = int(environ.get('CONTENT_LENGTH') or 0)
    body = environ['wsgi.input'].read(length) if length else b''
    path = environ.get('PATH_INFO', '')
    status = '404 Not Found' if path == '/missing' else '200 OK'
    lines = []
    for k, v in sorted(environ.items()):
        if isinstance(v, str):
            lines.append('%s=%s' % (k, v if len(v) < 200 else 'len:%d' % len(v)))
    lines.append('BODY=%d:%d' % (len(body), zlib.crc32(body)))
    out = ('\n'.join(lines) + '\n').encode()
    start_response(status, [('Content-Type', 'text/plain'), ('X-Method', environ['REQUEST_METHOD']),
                            ('Content-Length', str(len(out)))])
    return [out]
"#;

fn uwsgi() -> Server {
    let dir = backends::tempdir();
    std::fs::write(dir.path().join("app.py"), APP).expect("writing the app");
    let socket = dir.path().join("uwsgi.sock");
    let mut cmd = Command::new(backends::program(&["uwsgi"], "uwsgi"));
    cmd.env_clear()
        .env("PATH", "/usr/bin:/bin")
        .args([
            "--plugins-dir",
            "/usr/lib/uwsgi/plugins",
            "--plugin",
            "python3",
        ])
        .args(["--uwsgi-socket", &socket.display().to_string()])
        .args([
            "--wsgi-file",
            "app.py",
            "--processes",
            "1",
            "--buffer-size",
            "65535",
        ])
        .args(["--disable-logging", "--die-on-term"]);
    Server::start("uwsgi", cmd, dir, socket, true)
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

fn vars(
    method: &str,
    path: &str,
    body: &[u8],
    headers: &[(&str, &[u8])],
) -> Vec<(Vec<u8>, Vec<u8>)> {
    let mut v: Vec<(Vec<u8>, Vec<u8>)> = [
        ("QUERY_STRING", "q=1"),
        ("REQUEST_METHOD", method),
        (
            "CONTENT_TYPE",
            if body.is_empty() {
                ""
            } else {
                "application/octet-stream"
            },
        ),
        ("REQUEST_URI", path),
        ("PATH_INFO", path),
        ("DOCUMENT_ROOT", "/srv"),
        ("SERVER_PROTOCOL", "HTTP/1.1"),
        ("REQUEST_SCHEME", "http"),
        ("REMOTE_ADDR", "127.0.0.1"),
        ("REMOTE_PORT", "50000"),
        ("SERVER_PORT", "80"),
        ("SERVER_NAME", "localhost"),
    ]
    .iter()
    .map(|(k, v)| (k.as_bytes().to_vec(), v.as_bytes().to_vec()))
    .collect();
    v.push((
        b"CONTENT_LENGTH".to_vec(),
        if body.is_empty() {
            Vec::new()
        } else {
            body.len().to_string().into_bytes()
        },
    ));
    for (name, value) in headers {
        v.push((http_param_name(name.as_bytes()), value.to_vec()));
    }
    v
}

/// One request: the packet and the body, then the answer up to the close.
fn request(server: &Server, vars: &[(Vec<u8>, Vec<u8>)], body: &[u8]) -> Reply {
    let mut out = BytesMut::new();
    request_head(&mut out, 0, 0, vars.iter().map(|(k, v)| (&k[..], &v[..]))).expect("vars fit");
    out.extend_from_slice(body);
    let answer = server.exchange(&out);
    let mut buf = BytesMut::from(&answer[..]);
    let head = CgiHeadParser::http_or_cgi()
        .parse_buf(&mut buf, 4096)
        .expect("a valid head")
        .unwrap_or_else(|| panic!("a complete head: {:?}\n{}", answer, server.log()));
    let mut decoder = UpstreamBodyDecoder::new(framing(&head, false));
    let mut body = Vec::new();
    loop {
        match decoder.decode_buf(&mut buf).expect("a valid body") {
            BodyChunk::Data(b) => body.extend_from_slice(&b),
            BodyChunk::NeedMore => {
                decoder.eof().expect("a complete body");
                break;
            }
            BodyChunk::Done => break,
        }
    }
    assert!(buf.is_empty(), "bytes after the body");
    Reply { head, body }
}

#[test]
fn vars_body_and_answer() {
    let server = uwsgi();
    let body: Vec<u8> = (0..50_000u32).map(|i| (i * 13 % 256) as u8).collect();
    let v = vars("POST", "/echo", &body, &[("X-Custom", b"custom value")]);
    let r = request(&server, &v, &body);
    assert_eq!(
        (r.head.status(), r.head.status_line()),
        (200, &b"200 OK"[..])
    );
    assert_eq!(r.head.header("x-method"), Some(&b"POST"[..]));
    let vars = r.vars();
    assert_eq!(vars["REQUEST_METHOD"], "POST");
    assert_eq!(vars["PATH_INFO"], "/echo");
    assert_eq!(vars["QUERY_STRING"], "q=1");
    assert_eq!(vars["HTTP_X_CUSTOM"], "custom value");
    assert_eq!(vars["BODY"], format!("50000:{}", crc32(&body)));
    assert_eq!(r.head.content_length(), Some(r.body.len() as u64));

    let r = request(&server, &vars_get("/missing"), b"");
    assert_eq!((r.head.status(), r.head.reason()), (404, &b"Not Found"[..]));
}

fn vars_get(path: &str) -> Vec<(Vec<u8>, Vec<u8>)> {
    vars("GET", path, b"", &[])
}

#[test]
fn vars_up_to_the_packet_limit() {
    let server = uwsgi();
    let mut v = vars_get("/echo");
    let used: usize = v.iter().map(|(k, val)| 4 + k.len() + val.len()).sum();
    // Fill the packet to exactly 65535 bytes of vars.
    let name = b"HTTP_X_FILL".to_vec();
    v.push((name.clone(), vec![b'f'; MAX_VARS - used - 4 - name.len()]));
    let r = request(&server, &v, b"");
    assert_eq!(
        r.vars()["HTTP_X_FILL"],
        format!("len:{}", MAX_VARS - used - 4 - name.len())
    );
    // One byte more is nginx's refusal.
    v.last_mut().expect("the fill").1.push(b'f');
    let e = request_head(
        &mut BytesMut::new(),
        0,
        0,
        v.iter().map(|(k, val)| (&k[..], &val[..])),
    )
    .unwrap_err();
    assert_eq!(e.to_string(), "uwsgi request is too big: 65536");
}
