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

/// `openssl ca -gencrl` over the PKI's `index.txt`: `crl.pem`, a v2 CRL signed by the CA.
fn make_crl(pki: &Pki) {
    std::fs::write(
        pki.path("ca.cnf"),
        "[ca]\ndefault_ca = d\n[d]\ndatabase = index.txt\ncrlnumber = crlnumber\ndefault_md = sha256\ndefault_crl_days = 30\n",
    )
    .unwrap();
    std::fs::write(pki.path("crlnumber"), "01\n").unwrap();
    let out = std::process::Command::new("openssl")
        .args(["ca", "-config", "ca.cnf", "-gencrl", "-keyfile", "ca.key"])
        .args(["-cert", "ca.crt", "-out", "crl.pem"])
        .current_dir(pki.dir())
        .output()
        .expect("running openssl ca");
    assert!(
        out.status.success(),
        "openssl ca -gencrl: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn proxy_ssl_crl_refuses_a_revoked_upstream_certificate_with_nginxs_line() {
    let mut pki = Pki::new();
    let good = pki.issue("good", &["good.test"], false);
    let revoked = pki.issue("revoked", &["revoked.test"], false);
    pki.write_ocsp_index(&[(good, false, "good"), (revoked, true, "revoked")]);
    make_crl(&pki);
    let (good_port, revoked_port) = (free_port(), free_port());
    let _up = Shoal::start(
        &conf(&format!(
            "server {{ listen 127.0.0.1:{good_port} ssl; {} location / {{ return 200 good; }} }}\n\
             server {{ listen 127.0.0.1:{revoked_port} ssl; {} location / {{ return 200 revoked; }} }}",
            pki.ssl_lines("good"),
            pki.ssl_lines("revoked")
        )),
        good_port,
    );
    let port = free_port();
    let ca = pki.path("ca.crt").display().to_string();
    let crl = pki.path("crl.pem").display().to_string();
    let s = Shoal::start(
        &conf(&format!(
            "server {{ listen 127.0.0.1:{port};\n\
               proxy_ssl_verify on; proxy_ssl_trusted_certificate {ca}; proxy_ssl_crl {crl};\n\
               location /good/ {{ proxy_pass https://127.0.0.1:{good_port}/; proxy_ssl_name good.test; }}\n\
               location /revoked/ {{ proxy_pass https://127.0.0.1:{revoked_port}/; proxy_ssl_name revoked.test; }} }}"
        )),
        port,
    );
    let r = common::get(port, "/good/").unwrap();
    assert_eq!(
        (r.status, &r.body[..]),
        (200, &b"good"[..]),
        "{}",
        s.error_log()
    );
    let r = common::get(port, "/revoked/").unwrap();
    assert_eq!(r.status, 502);
    s.wait_log(
        "upstream SSL certificate verify error: (23:certificate revoked) while SSL handshaking to upstream, client: 127.0.0.1, server: , request: \"GET /revoked/ HTTP/1.1\", upstream: \"https://127.0.0.1:",
        1,
    );
}

#[test]
fn an_encrypted_client_key_is_read_with_proxy_ssl_password_file() {
    let mut pki = Pki::new();
    pki.issue("up", &["up.test"], false);
    pki.issue("proxy", &[], true);
    // The proxy's client key, encrypted (PKCS#8, AES-256); the file's second password is right.
    let out = std::process::Command::new("openssl")
        .args(["pkcs8", "-topk8", "-v2", "aes-256-cbc", "-in", "proxy.key"])
        .args(["-out", "proxy.enc.key", "-passout", "pass:s3cret"])
        .current_dir(pki.dir())
        .output()
        .expect("running openssl pkcs8");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    std::fs::write(pki.path("passwords"), "wrong\ns3cret\n").unwrap();
    let ca = pki.path("ca.crt").display().to_string();
    let up_port = free_port();
    let _up = Shoal::start(
        &conf(&format!(
            "server {{ listen 127.0.0.1:{up_port} ssl; {} ssl_verify_client on; ssl_client_certificate {ca};\n\
               location / {{ return 200 \"client=$ssl_client_s_dn\"; }} }}",
            pki.ssl_lines("up")
        )),
        up_port,
    );
    let port = free_port();
    let lines = |passwords: &str| {
        conf(&format!(
            "server {{ listen 127.0.0.1:{port};\n\
               location / {{ proxy_pass https://127.0.0.1:{up_port};\n\
                 proxy_ssl_certificate {}; proxy_ssl_certificate_key {};\n\
                 {passwords} }} }}",
            pki.path("proxy.crt").display(),
            pki.path("proxy.enc.key").display()
        ))
    };
    let s = Shoal::start(
        &lines(&format!(
            "proxy_ssl_password_file {};",
            pki.path("passwords").display()
        )),
        port,
    );
    let r = common::get(port, "/").unwrap();
    assert_eq!(
        (r.status, String::from_utf8_lossy(&r.body).into_owned()),
        (200, "client=O=Shoal Tests,CN=proxy".to_string()),
        "{}",
        s.error_log()
    );
    drop(s);
    // Without the passwords the key cannot be read: `shoal -t` says so, as nginx.
    let prefix = common::Prefix::new();
    prefix.write_conf(&lines(""));
    let out = prefix.run(&["-t"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert!(
        err.contains(&format!(
            "cannot load certificate key \"{}\"",
            pki.path("proxy.enc.key").display()
        )),
        "{err}"
    );
}

#[test]
fn proxy_ssl_conf_command_maps_what_rustls_has_and_names_what_it_has_not() {
    let mut pki = Pki::new();
    pki.issue("up", &["up.test"], false);
    let up_port = free_port();
    let _up = Shoal::start(
        &conf(&format!(
            "ssl_protocols TLSv1.2 TLSv1.3;\n\
             server {{ listen 127.0.0.1:{up_port} ssl; {} location / {{ return 200 \"$ssl_protocol $ssl_cipher\"; }} }}",
            pki.ssl_lines("up")
        )),
        up_port,
    );
    let port = free_port();
    let s = Shoal::start(
        &conf(&format!(
            "server {{ listen 127.0.0.1:{port};\n\
               location / {{ proxy_pass https://127.0.0.1:{up_port}; proxy_ssl_protocols TLSv1.3;\n\
                 proxy_ssl_conf_command Ciphersuites TLS_CHACHA20_POLY1305_SHA256; }}\n\
               location /aes/ {{ proxy_pass https://127.0.0.1:{up_port}; proxy_ssl_protocols TLSv1.3;\n\
                 proxy_ssl_conf_command Ciphersuites TLS_AES_128_GCM_SHA256; }} }}"
        )),
        port,
    );
    let r = common::get(port, "/").unwrap();
    assert_eq!(
        (r.status, String::from_utf8_lossy(&r.body).into_owned()),
        (200, "TLSv1.3 TLS_CHACHA20_POLY1305_SHA256".to_string()),
        "{}",
        s.error_log()
    );
    let r = common::get(port, "/aes/").unwrap();
    assert_eq!(
        String::from_utf8_lossy(&r.body),
        "TLSv1.3 TLS_AES_128_GCM_SHA256"
    );
    // OpenSSL's words for a command it does not know; shoal's for one it cannot map.
    for (cmd, message) in [
        (
            "Foo bar",
            "SSL_CONF_cmd(\"Foo\", \"bar\") failed (SSL: error:0A000182:SSL routines::unknown cmd name:cmd=Foo)",
        ),
        (
            "VerifyMode Peer",
            "\"proxy_ssl_conf_command VerifyMode\" is not supported by shoal",
        ),
    ] {
        let prefix = common::Prefix::new();
        prefix.write_conf(&conf(&format!(
            "server {{ listen 127.0.0.1:{port}; location / {{ proxy_pass https://127.0.0.1:{up_port}; proxy_ssl_conf_command {cmd}; }} }}"
        )));
        let out = prefix.run(&["-t"]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{cmd}: {err}");
        assert!(err.contains(&format!("[emerg] {message}")), "{cmd}: {err}");
    }
}

#[test]
fn https_to_a_unix_socket_upstream() {
    let mut pki = Pki::new();
    pki.issue("up", &["up.test"], false);
    let sock = pki.path("up.sock");
    let up_port = free_port();
    // The upstream listens on a TCP port too, so the harness can tell when it is up.
    let up = Shoal::start(
        &conf(&format!(
            "server {{ listen 127.0.0.1:{up_port} ssl; listen unix:{} ssl; {} location / {{ return 200 \"up https=$https sni=$ssl_server_name uri=$uri\"; }} }}",
            sock.display(),
            pki.ssl_lines("up")
        )),
        up_port,
    );
    let port = free_port();
    let ca = pki.path("ca.crt").display().to_string();
    let s = Shoal::start(
        &conf(&format!(
            "server {{ listen 127.0.0.1:{port};\n\
               location /a/ {{ proxy_pass https://unix:{sock}:/x/; }}\n\
               location /verified/ {{ proxy_pass https://unix:{sock}:; proxy_ssl_verify on;\n\
                 proxy_ssl_trusted_certificate {ca}; proxy_ssl_name up.test; proxy_ssl_server_name on; }}\n\
               location /var/ {{ set $s {sock}; proxy_pass https://unix:$s:/v/; }} }}",
            sock = sock.display()
        )),
        port,
    );
    let r = common::get(port, "/a/b").unwrap();
    assert_eq!(
        (r.status, String::from_utf8_lossy(&r.body).into_owned()),
        (200, "up https=on sni= uri=/x/b".to_string()),
        "{}\nupstream:\n{}",
        s.error_log(),
        up.error_log()
    );
    let r = common::get(port, "/verified/c").unwrap();
    assert_eq!(
        String::from_utf8_lossy(&r.body),
        "up https=on sni=up.test uri=/verified/c",
        "{}",
        s.error_log()
    );
    let r = common::get(port, "/var/").unwrap();
    assert_eq!(String::from_utf8_lossy(&r.body), "up https=on sni= uri=/v/");
}

#[test]
fn proxy_ssl_certificate_cache_keeps_what_it_read_and_without_it_every_handshake_reads() {
    let mut pki = Pki::new();
    pki.issue("up", &["up.test"], false);
    pki.issue("first", &[], true);
    pki.issue("second", &[], true);
    let copy = |from: &str| {
        for ext in ["crt", "key"] {
            std::fs::copy(
                pki.path(&format!("{from}.{ext}")),
                pki.path(&format!("proxy.{ext}")),
            )
            .unwrap();
        }
    };
    copy("first");
    let ca = pki.path("ca.crt").display().to_string();
    let up_port = free_port();
    let _up = Shoal::start(
        &conf(&format!(
            "server {{ listen 127.0.0.1:{up_port} ssl; {} ssl_verify_client on; ssl_client_certificate {ca};\n\
               location / {{ return 200 \"$ssl_client_s_dn\"; }} }}",
            pki.ssl_lines("up")
        )),
        up_port,
    );
    let port = free_port();
    let dir = pki.dir().display();
    let s = Shoal::start(
        &conf(&format!(
            "server {{ listen 127.0.0.1:{port}; set $p proxy; proxy_ssl_session_reuse off;\n\
               proxy_ssl_certificate {dir}/$p.crt; proxy_ssl_certificate_key {dir}/$p.key;\n\
               location /read/ {{ proxy_pass https://127.0.0.1:{up_port}; }}\n\
               location /cached/ {{ proxy_pass https://127.0.0.1:{up_port};\n\
                 proxy_ssl_certificate_cache max=10 valid=1h; }} }}"
        )),
        port,
    );
    let dn = |path: &str| {
        let r = common::get(port, path).unwrap();
        assert_eq!(r.status, 200, "{}", s.error_log());
        String::from_utf8_lossy(&r.body).into_owned()
    };
    assert_eq!(dn("/read/"), "O=Shoal Tests,CN=first");
    assert_eq!(dn("/cached/"), "O=Shoal Tests,CN=first");
    copy("second");
    // No cache (nginx's default): the files are read again at the next handshake.
    assert_eq!(dn("/read/"), "O=Shoal Tests,CN=second");
    // Cached and still valid: the pair read before.
    assert_eq!(dn("/cached/"), "O=Shoal Tests,CN=first");
    // The directive's words, as nginx 1.27.4's.
    let prefix = common::Prefix::new();
    prefix.write_conf(&conf(
        "server { listen 127.0.0.1:1; proxy_ssl_certificate_cache valid=1m; }",
    ));
    let out = prefix.run(&["-t"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("[emerg] \"proxy_ssl_certificate_cache\" must have \"max\" parameter in "),
        "{err}"
    );
}
