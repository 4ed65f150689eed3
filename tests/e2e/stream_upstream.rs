//! The stream proxy's way to its upstreams, end to end: `proxy_ssl*` (TLS toward an upstream,
//! the http proxy's TLS client shared) against an https shoal started here, and `proxy_pass`
//! with variables naming a host the stream `resolver` looks up (a DNS server started here).
//! Expected lines are nginx 1.22.1's.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use crate::common::dns::{v4, Dns, Entry, A};
use crate::common::tls::Pki;
use crate::common::{free_port, Shoal};
use crate::stream::{tcp, Echo};

/// A stream block around `body` (a probe server of its own tells when shoal serves).
fn stream_conf(body: &str, probe: u16) -> String {
    format!(
        "daemon off;\nworker_processes 1;\nerror_log logs/error.log info;\nevents {{ }}\n\
         stream {{\n    log_format s '$status $upstream_addr $bytes_sent';\n    \
         access_log logs/stream.log s;\n{body}\n    \
         server {{ listen 127.0.0.1:{probe}; return ok; access_log off; }}\n}}\n"
    )
}

fn start(body: &str) -> Shoal {
    let probe = free_port();
    Shoal::start(&stream_conf(body, probe), probe)
}

/// An HTTP/1.0 request for `path` over a plain connection to `port`; the whole answer.
fn http_get(port: u16, path: &str) -> String {
    let mut c = TcpStream::connect(("127.0.0.1", port)).expect("connecting");
    c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    c.write_all(format!("GET {path} HTTP/1.0\r\nHost: up.test\r\n\r\n").as_bytes())
        .unwrap();
    let mut got = Vec::new();
    let _ = c.read_to_end(&mut got);
    String::from_utf8_lossy(&got).into_owned()
}

fn field(answer: &str, name: &str) -> String {
    answer
        .split_whitespace()
        .find_map(|w| w.strip_prefix(&format!("{name}=")).map(str::to_string))
        .unwrap_or_default()
}

#[test]
fn proxy_ssl_speaks_tls_to_the_upstream_and_checks_its_certificate() {
    let mut pki = Pki::new();
    pki.issue("up", &["up.test"], false);
    pki.issue("proxy", &[], true);
    let ca = pki.path("ca.crt").display().to_string();
    // The upstream: an https shoal that wants a client certificate and says what it saw.
    let up_port = free_port();
    let _up = Shoal::start(
        &crate::tls::conf(&format!(
            "ssl_protocols TLSv1.2 TLSv1.3; ssl_session_cache shared:UP:1m;\n\
             server {{ listen 127.0.0.1:{up_port} ssl; server_name up.test; {}\n\
               ssl_verify_client optional; ssl_client_certificate {ca};\n\
               location / {{ return 200 \"sni=$ssl_server_name reused=$ssl_session_reused client=$ssl_client_s_dn uri=$uri\\n\"; }} }}",
            pki.ssl_lines("up")
        )),
        up_port,
    );
    let (ok, wrong, noreuse, plain, other_ca) = (
        free_port(),
        free_port(),
        free_port(),
        free_port(),
        free_port(),
    );
    let other = Pki::named("another CA");
    let cert = pki.path("proxy.crt").display().to_string();
    let key = pki.path("proxy.key").display().to_string();
    let s = start(&format!(
        "    proxy_ssl_protocols TLSv1.2 TLSv1.3;\n\
         proxy_ssl_trusted_certificate {ca};\n\
         upstream up {{ server 127.0.0.1:{up_port}; }}\n\
         server {{ listen 127.0.0.1:{ok}; proxy_pass up; proxy_ssl on;\n\
           proxy_ssl_certificate {cert}; proxy_ssl_certificate_key {key};\n\
           proxy_ssl_verify on; proxy_ssl_verify_depth 2;\n\
           proxy_ssl_server_name on; proxy_ssl_name up.test; }}\n\
         server {{ listen 127.0.0.1:{wrong}; proxy_pass 127.0.0.1:{up_port}; proxy_ssl on;\n\
           proxy_ssl_verify on; proxy_ssl_name other.test; }}\n\
         server {{ listen 127.0.0.1:{noreuse}; proxy_pass 127.0.0.1:{up_port}; proxy_ssl on;\n\
           proxy_ssl_session_reuse off; proxy_ssl_server_name on; proxy_ssl_name up.test; }}\n\
         server {{ listen 127.0.0.1:{plain}; proxy_pass 127.0.0.1:{up_port}; }}\n\
         server {{ listen 127.0.0.1:{other_ca}; proxy_pass 127.0.0.1:{up_port}; proxy_ssl on;\n\
           proxy_ssl_verify on; proxy_ssl_trusted_certificate {}; proxy_ssl_name up.test; }}",
        other.path("ca.crt").display()
    ));
    let first = http_get(ok, "/a");
    assert!(
        first.starts_with("HTTP/1.1 200"),
        "{first}\n{}",
        s.error_log()
    );
    assert_eq!(field(&first, "sni"), "up.test");
    assert_eq!(field(&first, "client"), "O=Shoal", "{first}");
    assert_eq!(field(&first, "uri"), "/a");
    // The next session resumes the TLS session (`proxy_ssl_session_reuse` is on).
    let again = http_get(ok, "/b");
    assert_eq!(field(&again, "reused"), "r", "{again}");
    for _ in 0..2 {
        let a = http_get(noreuse, "/");
        assert_eq!(field(&a, "reused"), ".", "{a}");
        assert_eq!(field(&a, "client"), "", "no client certificate here");
    }
    // A name the certificate does not have: the session is closed, with nginx's line.
    assert_eq!(http_get(wrong, "/"), "");
    s.wait_log(
        &format!(
            "upstream SSL certificate does not match \"other.test\" while SSL handshaking to upstream, client: 127.0.0.1, server: 127.0.0.1:{wrong}, upstream: \"127.0.0.1:{up_port}\", bytes from/to client:0/0, bytes from/to upstream:0/0"
        ),
        1,
    );
    assert_eq!(http_get(other_ca, "/"), "");
    s.wait_log(
        "upstream SSL certificate verify error: (21:unable to verify the first certificate) while SSL handshaking to upstream, client: 127.0.0.1",
        1,
    );
    // Without proxy_ssl the bytes go as they are: the https server sees no TLS.
    let a = http_get(plain, "/");
    assert!(a.contains("400"), "{a}");
}

#[test]
fn proxy_ssl_configuration_errors_read_as_nginx_s() {
    let port = free_port();
    let prefix = crate::common::Prefix::new();
    prefix.write_conf(&stream_conf(
        &format!(
            "server {{ listen 127.0.0.1:{port}; proxy_pass 127.0.0.1:1; proxy_ssl on; proxy_ssl_verify on; }}"
        ),
        free_port(),
    ));
    let out = prefix.run(&["-t"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("[emerg] no proxy_ssl_trusted_certificate for proxy_ssl_verify"),
        "{err}"
    );
    assert!(!out.status.success());
}

#[test]
fn proxy_pass_with_variables_resolves_names_with_the_stream_resolver() {
    let dns = Dns::start(&[
        ("backend.test", v4("127.0.0.1", 30)),
        ("nx.test", Entry::NxDomain),
    ]);
    let a = Echo::start("A:");
    let (port, udp_port, nx) = (free_port(), free_port(), free_port());
    let s = start(&format!(
        "    resolver {dns}; resolver_timeout 5s;\n\
         server {{ listen 127.0.0.1:{port}; set $h backend.test; proxy_pass $h:{up}; }}\n\
         server {{ listen 127.0.0.1:{udp_port} udp; set $h backend.test; proxy_pass $h:{up}; proxy_responses 1; }}\n\
         server {{ listen 127.0.0.1:{nx}; set $h nx.test; proxy_pass $h:{up}; }}",
        dns = dns.addr(),
        up = a.port
    ));
    for _ in 0..3 {
        assert_eq!(tcp(port, b"hi"), b"A:hi", "{}", s.error_log());
    }
    assert_eq!(
        dns.asked("backend.test", A),
        1,
        "one question, then the cache"
    );
    assert_eq!(
        crate::stream::udp(udp_port, b"dgram").as_deref(),
        Some(&b"A:dgram"[..])
    );
    // A name the DNS server does not know: the session is closed, 500 as in nginx 1.22.
    assert_eq!(tcp(nx, b"x"), b"");
    s.wait_log(
        &format!(
            "nx.test could not be resolved (3: Host not found), client: 127.0.0.1, \
             server: 127.0.0.1:{nx}, bytes from/to client:0/0, bytes from/to upstream:0/0"
        ),
        1,
    );
    let log = crate::common::wait_for("the sessions logged", || {
        let t = s.prefix.read("logs/stream.log");
        (t.lines().count() >= 5).then_some(t)
    });
    assert!(
        log.contains(&format!("200 127.0.0.1:{} 4\n", a.port)),
        "{log}"
    );
    assert!(log.contains("500 - 0\n"), "{log}");
}

#[test]
fn a_name_without_a_resolver_is_nginx_s_500() {
    let port = free_port();
    let s = start(&format!(
        "server {{ listen 127.0.0.1:{port}; set $h backend.test; proxy_pass $h:80; }}"
    ));
    assert_eq!(tcp(port, b"x"), b"");
    s.wait_log(
        &format!(
            "no resolver defined to resolve backend.test, client: 127.0.0.1, server: 127.0.0.1:{port}, bytes from/to client:0/0, bytes from/to upstream:0/0"
        ),
        1,
    );
    let log = crate::common::wait_for("the session logged", || {
        let t = s.prefix.read("logs/stream.log");
        (!t.is_empty()).then_some(t)
    });
    assert_eq!(log, "500 - 0\n");
}
