//! https upstreams end to end (issue 20, part 4): shoal proxying to a second shoal over TLS,
//! with the upstream's certificate checked (`proxy_ssl_verify`, `_trusted_certificate`,
//! `_name`), a client certificate (static and named with variables), SNI, sessions resumed or
//! not, kept-alive TLS connections; and an upgraded connection tunnelled through a TLS client
//! connection. Expected lines are nginx 1.22.1's.

use std::io::Read;

use crate::common::tls::{Pki, TlsClient};
use crate::common::{self, free_port, Shoal};
use crate::tls::{conf, opts};

#[test]
fn a_proxy_to_an_https_upstream_over_tls_both_ways() {
    let mut pki = Pki::new();
    pki.issue("up", &["up.test"], false);
    pki.issue("front", &["front.test"], false);
    pki.issue("proxy", &[], true);
    let ca = pki.path("ca.crt").display().to_string();
    // The upstream: a second shoal, which wants the proxy's client certificate.
    let up_port = free_port();
    let up = Shoal::start(
        &conf(&format!(
            "ssl_protocols TLSv1.2 TLSv1.3; ssl_session_cache shared:UP:1m;\n\
             server {{ listen 127.0.0.1:{up_port} ssl; server_name up.test; {}\n\
               ssl_verify_client on; ssl_client_certificate {ca};\n\
               location / {{ return 200 \"up conn=$connection reused=$ssl_session_reused sni=$ssl_server_name client=$ssl_client_s_dn uri=$uri\\n\"; }} }}",
            pki.ssl_lines("up")
        )),
        up_port,
    );
    let port = free_port();
    let cert = pki.path("proxy.crt").display().to_string();
    let key = pki.path("proxy.key").display().to_string();
    let dir = pki.dir().display().to_string();
    let s = Shoal::start(
        &conf(&format!(
            "ssl_protocols TLSv1.2 TLSv1.3;\n\
             upstream up {{ server 127.0.0.1:{up_port}; keepalive 4; }}\n\
             server {{ listen 127.0.0.1:{port} ssl; server_name front.test; {}\n\
               proxy_ssl_certificate {cert}; proxy_ssl_certificate_key {key};\n\
               proxy_ssl_protocols TLSv1.2 TLSv1.3;\n\
               proxy_ssl_verify on; proxy_ssl_trusted_certificate {ca};\n\
               proxy_ssl_server_name on; proxy_ssl_name up.test; proxy_set_header Host up.test;\n\
               location /kept/ {{ proxy_pass https://up; proxy_http_version 1.1; proxy_set_header Connection \"\"; proxy_set_header Host up.test; }}\n\
               location /new/ {{ proxy_pass https://127.0.0.1:{up_port}; }}\n\
               location /wrong/ {{ proxy_pass https://127.0.0.1:{up_port}; proxy_ssl_name other.test; }}\n\
               location /noreuse/ {{ proxy_pass https://127.0.0.1:{up_port}; proxy_ssl_session_reuse off; }}\n\
               location /dyncert/ {{ set $pname proxy; proxy_pass https://127.0.0.1:{up_port};\n\
                 proxy_ssl_certificate {dir}/$pname.crt; proxy_ssl_certificate_key {dir}/$pname.key; }}\n\
             }}",
            pki.ssl_lines("front")
        )),
        port,
    );
    let mut c = TlsClient::connect(port, &pki, &opts("front.test")).unwrap();
    let field = |body: &[u8], name: &str| -> String {
        String::from_utf8_lossy(body)
            .split_whitespace()
            .find_map(|w| w.strip_prefix(&format!("{name}=")).map(str::to_string))
            .unwrap_or_default()
    };
    // Kept alive: one upstream connection, its TLS session kept with it.
    let (status, _, first) = c.get("front.test", "/kept/a").unwrap();
    assert_eq!(status, 200, "{}", s.error_log());
    assert_eq!(field(&first, "sni"), "up.test");
    assert_eq!(field(&first, "client"), "O=Shoal");
    assert_eq!(field(&first, "uri"), "/kept/a");
    for _ in 0..3 {
        let (status, _, body) = c.get("front.test", "/kept/b").unwrap();
        assert_eq!(status, 200);
        assert_eq!(
            field(&body, "conn"),
            field(&first, "conn"),
            "the same connection"
        );
    }
    // A new connection each time: the session is resumed (`proxy_ssl_session_reuse on`).
    let (_, _, body) = c.get("front.test", "/new/").unwrap();
    let (_, _, again) = c.get("front.test", "/new/").unwrap();
    assert_ne!(field(&body, "conn"), field(&again, "conn"));
    assert_eq!(
        field(&again, "reused"),
        "r",
        "{}",
        String::from_utf8_lossy(&again)
    );
    // `proxy_ssl_session_reuse off`: a full handshake every time.
    for _ in 0..2 {
        let (_, _, body) = c.get("front.test", "/noreuse/").unwrap();
        assert_eq!(
            field(&body, "reused"),
            ".",
            "{}",
            String::from_utf8_lossy(&body)
        );
    }
    // A client certificate named with variables, read at the handshake.
    let (status, _, body) = c.get("front.test", "/dyncert/").unwrap();
    assert_eq!(status, 200, "{}", s.error_log());
    assert_eq!(field(&body, "client"), "O=Shoal");
    // The name the certificate does not have: 502 and nginx's line.
    let (status, _, _) = c.get("front.test", "/wrong/").unwrap();
    assert_eq!(status, 502);
    s.wait_log(
        "upstream SSL certificate does not match \"other.test\" while SSL handshaking to upstream, client: 127.0.0.1, server: front.test, request: \"GET /wrong/ HTTP/1.1\", upstream: \"https://127.0.0.1:",
        1,
    );
    drop(up);
}

#[test]
fn an_upstream_certificate_nobody_vouches_for_is_refused_with_nginxs_line() {
    let mut pki = Pki::new();
    let other = Pki::named("another CA");
    pki.issue("up", &["up.test"], false);
    let up_port = free_port();
    let _up = Shoal::start(
        &conf(&format!(
            "server {{ listen 127.0.0.1:{up_port} ssl; server_name up.test; {} location / {{ return 200 up; }} }}",
            pki.ssl_lines("up")
        )),
        up_port,
    );
    let port = free_port();
    let s = Shoal::start(
        &conf(&format!(
            "server {{ listen 127.0.0.1:{port}; location / {{ proxy_pass https://127.0.0.1:{up_port};\n\
               proxy_ssl_verify on; proxy_ssl_trusted_certificate {}; proxy_ssl_name up.test; }}\n\
               location /noverify/ {{ proxy_pass https://127.0.0.1:{up_port}/; }} }}",
            other.path("ca.crt").display()
        )),
        port,
    );
    let r = common::get(port, "/").unwrap();
    assert_eq!(r.status, 502);
    s.wait_log(
        "upstream SSL certificate verify error: (21:unable to verify the first certificate) while SSL handshaking to upstream",
        1,
    );
    // `proxy_ssl_verify off` (the default) takes it.
    let r = common::get(port, "/noverify/").unwrap();
    assert_eq!((r.status, &r.body[..]), (200, &b"up"[..]));
}

#[test]
fn an_upgraded_connection_tunnels_over_tls() {
    use crate::common::upstream::{Answer, Upstream};
    let mut pki = Pki::new();
    pki.issue("a", &["a.test"], false);
    let up = Upstream::start(|_| Answer::upgrade("websocket"));
    let port = free_port();
    let _s = Shoal::start(
        &conf(&format!(
            "server {{ listen 127.0.0.1:{port} ssl; server_name a.test; {}\n\
               location /ws {{ proxy_pass {}; proxy_http_version 1.1;\n\
                 proxy_set_header Upgrade $http_upgrade; proxy_set_header Connection upgrade; }} }}",
            pki.ssl_lines("a"),
            up.url()
        )),
        port,
    );
    let mut c = TlsClient::connect(port, &pki, &opts("a.test")).unwrap();
    c.send(
        b"GET /ws HTTP/1.1\r\nHost: a.test\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n",
    )
    .unwrap();
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    while !got.windows(4).any(|w| w == b"\r\n\r\n") {
        let n = c.stream.read(&mut buf).unwrap();
        assert!(n > 0, "the 101 arrives");
        got.extend_from_slice(&buf[..n]);
    }
    assert!(got.starts_with(b"HTTP/1.1 101 Switching Protocols\r\n"));
    // Bytes both ways through TLS on our side and plain TCP on the upstream's, in pieces
    // larger than a TLS record.
    let message: Vec<u8> = (0..100_000u32).map(|i| (i % 251) as u8).collect();
    c.send(&message).unwrap();
    let mut echoed = Vec::new();
    while echoed.len() < message.len() {
        let n = c.stream.read(&mut buf).unwrap();
        assert!(n > 0, "the echo arrives");
        echoed.extend_from_slice(&buf[..n]);
    }
    assert!(echoed == message, "the echo is the message");
}
