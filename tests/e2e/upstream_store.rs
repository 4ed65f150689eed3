//! `*_store` and `*_ignore_client_abort` of the FastCGI, uwsgi and SCGI modules, end to end with
//! real backends (PHP-FPM, uwsgi's python3 plugin, a small SCGI server in Python): the shared
//! upstream layer's one implementation (`http/upstream/store.rs`, `upstream/run.rs`), reached by
//! each protocol's directives.

use std::io::Write;
use std::net::TcpStream;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::time::Duration;

use crate::common::backends;
use crate::common::client::request;
use crate::common::{free_port, wait_for, Client, Prefix, Shoal};

/// An SCGI server: answers `scgi:URI`, a second late for a URI with `slow` in it.
const SCGI_SERVER: &str = r#"
import socketserver, sys, time

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
        f.read(1)
        items = data.split(b'\0')[:-1]
        env = dict(zip(items[0::2], items[1::2]))
        uri = env.get(b'REQUEST_URI', b'')
        if b'slow' in uri:
            time.sleep(1)
        self.wfile.write(b'Status: 200 OK\r\nContent-Type: text/plain\r\n\r\nscgi:' + uri)

class Server(socketserver.ThreadingTCPServer):
    allow_reuse_address = True
    daemon_threads = True

Server(('127.0.0.1', int(sys.argv[1])), Handler).serve_forever()
"#;

/// A WSGI app answering `wsgi:PATH_INFO`.
const WSGI_APP: &str = r#"
def application(environ, start_response):
    start_response('200 OK', [('Content-Type', 'text/plain')])
    return [('wsgi:' + environ.get('PATH_INFO', '')).encode()]
"#;

fn start(http: &str, server: &str) -> (Shoal, u16) {
    let port = free_port();
    let p = Prefix::new();
    let repo = Path::new(env!("CARGO_MANIFEST_DIR"));
    for f in ["uwsgi_params", "scgi_params", "fastcgi_params"] {
        std::fs::copy(repo.join("conf").join(f), p.join("conf").join(f)).expect("copying");
    }
    for d in ["store", "tmp/f", "tmp/u", "tmp/s"] {
        std::fs::create_dir_all(p.join(d)).unwrap();
    }
    let conf = format!(
        "daemon off;\nerror_log logs/error.log info;\nevents {{ }}\nhttp {{\n    \
         log_format s '$uri $status';\n    access_log logs/access.log s;\n    \
         fastcgi_temp_path tmp/f;\n    uwsgi_temp_path tmp/u;\n    scgi_temp_path tmp/s;\n\
         {http}\n    server {{\n        listen 127.0.0.1:{port};\n        \
         server_name localhost;\n{server}\n    }}\n}}\n"
    );
    (Shoal::start_in(p, &conf, port, &[]), port)
}

fn ask(port: u16, path: &str) -> crate::common::Response {
    Client::connect(port)
        .ask(&request("GET", path, ""))
        .unwrap_or_else(|e| panic!("no answer for {path}: {e}"))
}

fn mode(p: &Path) -> u32 {
    std::fs::metadata(p).unwrap().permissions().mode() & 0o777
}

fn stored(s: &Shoal, rel: &str) -> String {
    let f = s.prefix.join(rel);
    wait_for(&format!("{} stored", f.display()), || {
        f.exists().then_some(())
    });
    std::fs::read_to_string(&f).unwrap()
}

#[test]
fn fastcgi_uwsgi_and_scgi_store_their_answers() {
    let php = backends::php_fpm_on(true, 1);
    let script = php.path().join("hello.php");
    std::fs::write(&script, "<?php echo 'php:' . $_SERVER['REQUEST_URI'];").unwrap();
    let app = backends::uwsgi_with(WSGI_APP);
    let scgi = backends::python_scgi(SCGI_SERVER);
    let (s, port) = start(
        "",
        &format!(
            "root store;\n\
             location /php/ {{ include fastcgi_params; fastcgi_param SCRIPT_FILENAME {}; \
             fastcgi_store on; fastcgi_store_access user:rw group:r all:r; fastcgi_pass {}; }}\n\
             location /u/ {{ include uwsgi_params; uwsgi_store $document_root/wsgi$uri; \
             uwsgi_pass {}; }}\n\
             location /s/ {{ include scgi_params; scgi_store on; scgi_pass {}; }}\n\
             location /s/off/ {{ include scgi_params; scgi_store off; scgi_pass {}; }}",
            script.display(),
            php.listen.pass(),
            app.listen.pass(),
            scgi.listen.pass(),
            scgi.listen.pass(),
        ),
    );
    let r = ask(port, "/php/a.txt");
    assert_eq!(r.body, b"php:/php/a.txt", "{}\n{}", r.show(), s.error_log());
    assert_eq!(stored(&s, "store/php/a.txt"), "php:/php/a.txt");
    assert_eq!(mode(&s.prefix.join("store/php/a.txt")), 0o644);

    let r = ask(port, "/u/dir/b.txt");
    assert_eq!(r.body, b"wsgi:/u/dir/b.txt", "{}", s.error_log());
    assert_eq!(stored(&s, "store/wsgi/u/dir/b.txt"), "wsgi:/u/dir/b.txt");
    assert_eq!(mode(&s.prefix.join("store/wsgi/u/dir/b.txt")), 0o600);

    let r = ask(port, "/s/c.txt");
    assert_eq!(r.body, b"scgi:/s/c.txt", "{}", s.error_log());
    assert_eq!(stored(&s, "store/s/c.txt"), "scgi:/s/c.txt");

    let r = ask(port, "/s/off/d.txt");
    assert_eq!(r.body, b"scgi:/s/off/d.txt");
    assert!(!s.prefix.join("store/s/off/d.txt").exists());
    // Each protocol's temporary files are in its `*_temp_path`, and none is left.
    for d in ["tmp/f", "tmp/u", "tmp/s"] {
        let left: Vec<_> = std::fs::read_dir(s.prefix.join(d)).unwrap().collect();
        assert!(left.is_empty(), "{d}: {left:?}");
    }
}

/// Sends a request for `path` and closes before the (slow) answer.
fn ask_and_leave(port: u16, path: &str) {
    let mut c = TcpStream::connect(("127.0.0.1", port)).unwrap();
    c.write_all(request("GET", path, "").as_bytes()).unwrap();
    std::thread::sleep(Duration::from_millis(300));
    drop(c);
}

#[test]
fn ignore_client_abort_keeps_the_exchange_of_a_client_gone() {
    let scgi = backends::python_scgi(SCGI_SERVER);
    let (s, port) = start(
        "",
        &format!(
            "location /abort/ {{ include scgi_params; scgi_pass {0}; }}\n\
             location /ignore/ {{ include scgi_params; scgi_ignore_client_abort on; \
             scgi_pass {0}; }}\n\
             location /others/ {{ fastcgi_ignore_client_abort on; uwsgi_ignore_client_abort on; \
             proxy_ignore_client_abort off; return 204; }}",
            scgi.listen.pass()
        ),
    );
    ask_and_leave(port, "/abort/slow");
    ask_and_leave(port, "/ignore/slow");
    let log = wait_for("two lines in the access log", || {
        let l = s.prefix.read("logs/access.log");
        (l.lines().count() >= 2).then_some(l)
    });
    // A client gone while the answer is awaited ends the exchange (499), unless ignored:
    // then the exchange runs to its end and the answer is the upstream's.
    assert!(
        log.contains("/abort/slow 499\n"),
        "{log}\n{}",
        s.error_log()
    );
    assert!(
        log.contains("/ignore/slow 200\n"),
        "{log}\n{}",
        s.error_log()
    );
    let errors = s.error_log();
    assert_eq!(
        errors
            .matches("client prematurely closed connection, so upstream connection is closed too")
            .count(),
        1,
        "{errors}"
    );
    assert_eq!(ask(port, "/others/").status, 204);
}

#[test]
fn store_and_cache_exclude_each_other_as_in_nginx() {
    for (lines, message) in [
        (
            "fastcgi_store on; fastcgi_cache z;",
            "\"fastcgi_cache\" directive is incompatible with \"fastcgi_store\"",
        ),
        (
            "uwsgi_cache z2; uwsgi_store on;",
            "\"uwsgi_store\" directive is incompatible with \"uwsgi_cache\"",
        ),
        ("scgi_store_access user:rw bad;", "invalid value \"bad\""),
    ] {
        let p = Prefix::new();
        let text = format!(
            "events {{ }}\nhttp {{\n    fastcgi_cache_path c1 keys_zone=z:1m;\n    \
             uwsgi_cache_path c2 keys_zone=z2:1m;\n    server {{ location / {{ {lines} }} }}\n}}\n"
        );
        let file = p.write_conf(&text);
        let out = p.run(&["-t"]);
        let err = String::from_utf8_lossy(&out.stderr);
        let want = format!("shoal: [emerg] {message} in {}:5\n", file.display());
        assert!(err.starts_with(&want), "{err}\nwanted {want}");
        assert_eq!(out.status.code(), Some(1));
    }
}
