//! uwsgi, SCGI and memcached end to end, each with a real server started by the test: uwsgi
//! with its python3 plugin running a WSGI app, a small SCGI server in Python written here,
//! memcached with values the test stores. shoal alone (params, bodies, statuses, logs), then
//! nginx and shoal on the same backend with the same answers (see `diff/mod.rs`).

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;

use crate::common::backends::{self, Backend};
use crate::common::client::request;
use crate::common::{free_port, Client, Prefix, Shoal};
use crate::diff::{Conf, Pair};

/// A WSGI app: echoes what uwsgi was told, `?status=404` for a 404.
const WSGI_APP: &str = r#"
def application(environ, start_response):
    qs = environ.get('QUERY_STRING', '')
    n = int(environ.get('CONTENT_LENGTH') or 0)
    body = environ['wsgi.input'].read(n) if n else b''
    status = '404 Not Found' if 'status=404' in qs else '200 OK'
    keys = ['REQUEST_METHOD', 'QUERY_STRING', 'REQUEST_URI', 'PATH_INFO', 'CONTENT_LENGTH',
            'CONTENT_TYPE', 'HTTP_X_TEST', 'SERVER_PROTOCOL', 'SERVER_NAME', 'REMOTE_ADDR']
    out = ''.join('%s=%s\n' % (k, environ.get(k, '(unset)')) for k in keys)
    out += 'BODY_LEN=%d\n' % len(body)
    if 'big=1' in qs:
        out += 'x' * 200000
    start_response(status, [('Content-Type', 'text/plain'), ('X-App', 'wsgi')])
    return [out.encode()]
"#;

/// An SCGI server: reads the netstring and the body, answers with CGI header lines and the
/// params it got.
const SCGI_SERVER: &str = r#"
import socketserver, sys

class Handler(socketserver.StreamRequestHandler):
    def handle(self):
        f = self.rfile
        length = b''
        while True:
            c = f.read(1)
            if c == b':':
                break
            length += c
        data = f.read(int(length))
        f.read(1)  # the comma
        items = data.split(b'\0')[:-1]
        env = dict(zip(items[0::2], items[1::2]))
        body = f.read(int(env.get(b'CONTENT_LENGTH', b'0')))
        qs = env.get(b'QUERY_STRING', b'')
        status = b'404 Not Found' if b'status=404' in qs else b'200 OK'
        out = b''
        for k in [b'CONTENT_LENGTH', b'SCGI', b'REQUEST_METHOD', b'REQUEST_URI', b'QUERY_STRING',
                  b'HTTP_X_TEST', b'SERVER_NAME']:
            out += k + b'=' + env.get(k, b'(unset)') + b'\n'
        out += b'FIRST=' + items[0] + b'\n'
        out += b'BODY_LEN=' + str(len(body)).encode() + b'\n'
        self.wfile.write(b'Status: ' + status + b'\r\nContent-Type: text/plain\r\nX-Scgi: yes\r\nServer: py-scgi\r\n\r\n' + out)

class Server(socketserver.ThreadingTCPServer):
    allow_reuse_address = True
    daemon_threads = True

Server(('127.0.0.1', int(sys.argv[1])), Handler).serve_forever()
"#;

fn prefix_with_params() -> Prefix {
    let p = Prefix::new();
    let repo = Path::new(env!("CARGO_MANIFEST_DIR"));
    for f in ["uwsgi_params", "scgi_params"] {
        std::fs::copy(repo.join("conf").join(f), p.join("conf").join(f)).expect("copying");
    }
    p
}

fn start(server: &str) -> (Shoal, u16) {
    start_http("", server)
}

fn start_http(http: &str, server: &str) -> (Shoal, u16) {
    let port = free_port();
    let conf = format!(
        "daemon off;\nerror_log logs/error.log info;\nevents {{ }}\nhttp {{\n    \
         include mime.types;\n{http}\n    server {{\n        listen 127.0.0.1:{port};\n        \
         server_name localhost;\n{server}\n    }}\n}}\n"
    );
    (
        Shoal::start_in(prefix_with_params(), &conf, port, &[]),
        port,
    )
}

fn ask(port: u16, req: &str) -> crate::common::Response {
    Client::connect(port)
        .ask(req)
        .unwrap_or_else(|e| panic!("no answer to {req:?}: {e}"))
}

fn post(port: u16, path: &str, body: &[u8]) -> crate::common::Response {
    let mut c = Client::connect(port);
    c.send(
        format!(
            "POST {path} HTTP/1.1\r\nHost: localhost\r\nContent-Type: text/plain\r\n\
             Content-Length: {}\r\n\r\n",
            body.len()
        )
        .as_bytes(),
    )
    .unwrap();
    c.send(body).unwrap();
    c.read_framed().expect("an answer")
}

fn text(r: &crate::common::Response) -> String {
    String::from_utf8_lossy(&r.body).into_owned()
}

#[test]
fn uwsgi_runs_a_wsgi_app() {
    let app = backends::uwsgi_with(WSGI_APP);
    let (s, port) = start_http(
        "uwsgi_cache_path cache keys_zone=w:1m;",
        &format!(
            "location /cached/ {{ include uwsgi_params; uwsgi_cache w; uwsgi_cache_key $uri; \
         uwsgi_cache_valid 200 1m; add_header X-Cache $upstream_cache_status; \
         uwsgi_pass {}; }}\n\
         location / {{ include uwsgi_params; uwsgi_pass {}; }}\n\
         location /hidden/ {{ include uwsgi_params; uwsgi_hide_header X-App; \
         uwsgi_modifier1 0; uwsgi_pass uwsgi://{}; }}",
            app.listen.pass(),
            app.listen.pass(),
            app.listen.pass()
        ),
    );
    let miss = ask(port, &request("GET", "/cached/one", ""));
    assert_eq!(miss.header("x-cache"), Some("MISS"), "{}", s.error_log());
    let hit = ask(port, &request("GET", "/cached/one", ""));
    assert_eq!(hit.header("x-cache"), Some("HIT"));
    assert_eq!(hit.body, miss.body);
    let r = ask(port, &request("GET", "/app/x?a=1", "X-Test: t\r\n"));
    assert_eq!(
        r.status,
        200,
        "{}\n{}\n{}",
        r.show(),
        s.error_log(),
        app.log()
    );
    assert_eq!(r.header("x-app"), Some("wsgi"));
    let t = text(&r);
    for want in [
        "REQUEST_METHOD=GET",
        "QUERY_STRING=a=1",
        "REQUEST_URI=/app/x?a=1",
        "PATH_INFO=/app/x",
        "HTTP_X_TEST=t",
    ] {
        assert!(t.contains(want), "{want} in {t}");
    }
    let r = post(port, "/up", &vec![b'z'; 300_000]);
    assert!(text(&r).contains("BODY_LEN=300000"), "{}", text(&r));
    let r = ask(port, &request("GET", "/?status=404", ""));
    assert_eq!(r.status, 404);
    let r = ask(port, &request("GET", "/hidden/?big=1", ""));
    assert_eq!(r.status, 200);
    assert!(r.header("x-app").is_none());
    assert!(r.body.len() > 200_000);
}

#[test]
fn scgi_talks_to_a_python_server() {
    let srv = backends::python_scgi(SCGI_SERVER);
    let (s, port) = start(&format!(
        "location / {{ include scgi_params; scgi_pass {}; }}",
        srv.listen.pass()
    ));
    let r = ask(port, &request("GET", "/s?q=2", "X-Test: yes\r\n"));
    assert_eq!(
        r.status,
        200,
        "{}\n{}\n{}",
        r.show(),
        s.error_log(),
        srv.log()
    );
    assert_eq!(r.header("x-scgi"), Some("yes"));
    assert!(r.header("status").is_none(), "Status is hidden for SCGI");
    // Its Server line stands for shoal's (one line, the application's).
    assert_eq!(r.head.matches("Server:").count(), 1, "{}", r.head);
    assert_eq!(r.header("server"), Some("py-scgi"));
    let t = text(&r);
    for want in [
        "CONTENT_LENGTH=0",
        "SCGI=1",
        "REQUEST_URI=/s?q=2",
        "HTTP_X_TEST=yes",
        "FIRST=CONTENT_LENGTH",
    ] {
        assert!(t.contains(want), "{want} in {t}");
    }
    let r = post(port, "/p", b"hello body");
    assert!(text(&r).contains("BODY_LEN=10") && text(&r).contains("CONTENT_LENGTH=10"));
    let r = ask(port, &request("GET", "/?status=404", ""));
    assert_eq!(r.status, 404);
}

/// Stores `value` under `key` with `flags`.
fn store(mc: &Backend, key: &str, flags: u32, value: &[u8]) {
    let crate::common::backends::Listen::Tcp(port) = mc.listen else {
        unreachable!("memcached listens on TCP")
    };
    let mut s = TcpStream::connect(("127.0.0.1", port)).expect("memcached");
    s.write_all(format!("set {key} {flags} 0 {}\r\n", value.len()).as_bytes())
        .unwrap();
    s.write_all(value).unwrap();
    s.write_all(b"\r\n").unwrap();
    let mut got = [0u8; 8];
    s.read_exact(&mut got).unwrap();
    assert_eq!(&got, b"STORED\r\n");
}

#[test]
fn memcached_hits_misses_and_gzip() {
    let mc = backends::memcached();
    store(&mc, "/page.html", 0, b"<p>from memcached</p>");
    store(&mc, "/z.txt", 2, b"pretend-gzip");
    let dead = free_port();
    let (s, port) = start(&format!(
        "location / {{ set $memcached_key \"$uri\"; memcached_gzip_flag 2; \
         memcached_pass {}; error_page 404 = /fallback; }}\n\
         location = /fallback {{ return 200 \"fallback\\n\"; }}\n\
         location /nokey/ {{ memcached_pass {}; }}\n\
         location /next/ {{ set $memcached_key /page.html; memcached_pass \
         127.0.0.1:{dead}; }}",
        mc.listen.pass(),
        mc.listen.pass()
    ));
    let r = ask(port, &request("GET", "/page.html", ""));
    assert_eq!(r.status, 200, "{}\n{}", r.show(), s.error_log());
    assert_eq!(r.body, b"<p>from memcached</p>");
    assert_eq!(r.header("content-type"), Some("text/html"));
    let r = ask(port, &request("GET", "/z.txt", ""));
    assert_eq!(r.header("content-encoding"), Some("gzip"));
    assert_eq!(r.body, b"pretend-gzip");
    // A miss: nginx's 404, through error_page, and its info line.
    let r = ask(port, &request("GET", "/missing", ""));
    assert_eq!(r.body, b"fallback\n");
    s.wait_log(
        "key: \"/missing\" was not found by memcached while reading response header from upstream",
        1,
    );
    // No key: 500, nginx's line.
    let r = ask(port, &request("GET", "/nokey/", ""));
    assert_eq!(r.status, 500);
    s.wait_log("the \"$memcached_key\" variable is not set", 1);
    let r = ask(port, &request("GET", "/next/", ""));
    assert_eq!(r.status, 502);
    s.wait_log("upstream: \"memcached://127.0.0.1:", 1);
}

#[test]
fn uwsgi_scgi_and_memcached_answer_as_through_nginx() {
    let app = backends::uwsgi_with(WSGI_APP);
    let srv = backends::python_scgi(SCGI_SERVER);
    let mc = backends::memcached();
    store(&mc, "/mc/page.html", 0, b"<p>cached page</p>");
    let server = format!(
        "location /w/ {{ include uwsgi_params; uwsgi_pass {}; }}\n\
         location /s/ {{ include scgi_params; scgi_pass {}; }}\n\
         location /mc/ {{ set $memcached_key $uri; memcached_pass {}; }}",
        app.listen.pass(),
        srv.listen.pass(),
        mc.listen.pass()
    );
    let p = Pair::with(Conf {
        server: &server,
        ..Default::default()
    });
    for path in [
        "/w/a?b=1",
        "/w/?status=404",
        "/s/x?y=2",
        "/s/?status=404",
        "/mc/page.html",
        "/mc/none",
    ] {
        let a = p.get_open(path, "X-Test: diff\r\n");
        assert!(!a.contains(" 502 "), "{path}: {a}");
        p.head_open(path, "");
    }
    for path in ["/w/post", "/s/post"] {
        p.check_open(
            format!("POST {path} HTTP/1.0\r\nHost: localhost\r\nContent-Length: 5\r\n\r\nhello")
                .as_bytes(),
        );
    }
}
