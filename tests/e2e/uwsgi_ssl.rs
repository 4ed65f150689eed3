//! `uwsgi_pass suwsgi://` and `uwsgi_ssl_*`: uwsgi's python3 plugin on a `--ssl-socket` with
//! certificates the test makes, reached through the proxy's TLS client (`http/proxy/ssl.rs`),
//! its verification and its errors as nginx's.

use std::path::Path;

use crate::common::backends;
use crate::common::client::request;
use crate::common::tls::Pki;
use crate::common::{free_port, Client, Prefix, Shoal};

/// A WSGI app answering `tls:PATH_INFO`.
const WSGI_APP: &str = r#"
def application(environ, start_response):
    start_response('200 OK', [('Content-Type', 'text/plain'), ('X-App', 'wsgi')])
    return [('tls:' + environ.get('PATH_INFO', '')).encode()]
"#;

fn ask(port: u16, path: &str) -> crate::common::Response {
    Client::connect(port)
        .ask(&request("GET", path, ""))
        .unwrap_or_else(|e| panic!("no answer for {path}: {e}"))
}

#[test]
fn suwsgi_speaks_uwsgi_over_tls_and_verifies_as_nginx() {
    let mut pki = Pki::new();
    pki.issue("backend", &["localhost"], false);
    let app = backends::uwsgi_tls(WSGI_APP, &pki.path("backend.crt"), &pki.path("backend.key"));
    let addr = app.listen.pass();
    let ca = pki.path("ca.crt");
    let port = free_port();
    let p = Prefix::new();
    let repo = Path::new(env!("CARGO_MANIFEST_DIR"));
    std::fs::copy(repo.join("conf/uwsgi_params"), p.join("conf/uwsgi_params")).unwrap();
    let conf = format!(
        "daemon off;\nerror_log logs/error.log info;\nevents {{ }}\nhttp {{\n    \
         include uwsgi_params;\n    uwsgi_ssl_trusted_certificate {ca};\n    \
         server {{\n        listen 127.0.0.1:{port};\n        server_name localhost;\n        \
         location /plain/ {{ uwsgi_pass suwsgi://{addr}; }}\n        \
         location /verified/ {{ uwsgi_ssl_verify on; uwsgi_ssl_name localhost; \
         uwsgi_ssl_session_reuse on; uwsgi_ssl_protocols TLSv1.2 TLSv1.3; \
         uwsgi_pass suwsgi://{addr}; }}\n        \
         location /misnamed/ {{ uwsgi_ssl_verify on; uwsgi_ssl_name other.example; \
         uwsgi_pass suwsgi://{addr}; }}\n        \
         location /cleartext/ {{ uwsgi_pass uwsgi://{addr}; uwsgi_read_timeout 2s; }}\n    }}\n}}\n",
        ca = ca.display()
    );
    let s = Shoal::start_in(p, &conf, port, &[]);

    let r = ask(port, "/plain/a");
    assert_eq!(
        r.status,
        200,
        "{}\n{}\n{}",
        r.show(),
        s.error_log(),
        app.log()
    );
    assert_eq!(r.body, b"tls:/plain/a");
    assert_eq!(r.header("x-app"), Some("wsgi"));
    for _ in 0..2 {
        let r = ask(port, "/verified/b");
        assert_eq!(r.status, 200, "{}\n{}", r.show(), s.error_log());
        assert_eq!(r.body, b"tls:/verified/b");
    }
    let r = ask(port, "/misnamed/c");
    assert_eq!(r.status, 502);
    let log = s.error_log();
    assert!(
        log.contains("upstream SSL certificate does not match \"other.example\""),
        "{log}"
    );
    // The uwsgi protocol in clear to a TLS socket gets no answer it can read.
    let r = ask(port, "/cleartext/d");
    assert!(r.status == 502 || r.status == 504, "{}", r.show());
}

#[test]
fn suwsgi_settings_are_checked_as_nginx_checks_them() {
    let p = Prefix::new();
    let text = "events { }\nhttp {\n    server { location / { uwsgi_pass suwsgi://127.0.0.1:1; \
                uwsgi_ssl_verify on; } }\n}\n";
    p.write_conf(text);
    let out = p.run(&["-t"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.starts_with("shoal: [emerg] no uwsgi_ssl_trusted_certificate for uwsgi_ssl_verify"),
        "{err}"
    );
    assert_eq!(out.status.code(), Some(1));
    // Without `suwsgi://` the TLS settings are only kept.
    let p = Prefix::new();
    p.write_conf(
        "events { }\nhttp {\n    server { location / { uwsgi_pass 127.0.0.1:1; \
         uwsgi_ssl_verify on; uwsgi_ssl_ciphers HIGH; } }\n}\n",
    );
    let out = p.run(&["-t"]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
