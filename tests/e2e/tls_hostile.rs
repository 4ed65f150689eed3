//! Bad input on a TLS address (issue 20, part 5): garbage, a record too long, an alert in the
//! handshake, a ClientHello a byte at a time, stalled handshakes (closed after
//! `client_header_timeout` while other clients are served at once), a renegotiation, a body
//! refused over TLS. Each ends as nginx 1.22.1 ends it, with its log line and level.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use crate::common::tls::{Pki, TlsClient};
use crate::common::{self, free_port, Shoal};
use crate::tls::{conf, openssl, opts};

/// A ClientHello as a rustls client writes it (for SNI `a.test`).
fn client_hello() -> Vec<u8> {
    let config = rustls::ClientConfig::builder_with_provider(std::sync::Arc::new(
        rustls::crypto::aws_lc_rs::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_root_certificates(rustls::RootCertStore::empty())
    .with_no_client_auth();
    let mut conn =
        rustls::ClientConnection::new(std::sync::Arc::new(config), "a.test".try_into().unwrap())
            .unwrap();
    let mut hello = Vec::new();
    conn.write_tls(&mut hello).unwrap();
    hello
}

/// Sends `bytes` to a fresh connection and reads until the server closes (bounded).
fn raw(port: u16, bytes: &[u8]) -> Vec<u8> {
    let mut t = TcpStream::connect(("127.0.0.1", port)).unwrap();
    t.set_read_timeout(Some(common::WAIT)).unwrap();
    t.write_all(bytes).unwrap();
    let mut out = Vec::new();
    let _ = t.read_to_end(&mut out);
    out
}

#[test]
fn garbage_alerts_and_oversized_hellos_are_logged_as_nginx_and_closed() {
    let mut pki = Pki::new();
    pki.issue("a", &["a.test"], false);
    let port = free_port();
    let s = Shoal::start(
        &conf(&format!(
            "ssl_protocols TLSv1.2 TLSv1.3;\n\
             server {{ listen 127.0.0.1:{port} ssl; server_name a.test; {} location / {{ return 200 ok; }} }}",
            pki.ssl_lines("a")
        )),
        port,
    );
    let tail = format!("while SSL handshaking, client: 127.0.0.1, server: 127.0.0.1:{port}");
    // A handshake record that is no ClientHello.
    raw(port, b"\x16\x03\x01\x00\x05hello");
    s.wait_log(
        &format!("SSL_do_handshake() failed (SSL: error:0A0000F4:SSL routines::unexpected message) {tail}"),
        1,
    );
    // A version nobody speaks.
    raw(port, b"\x16\x09\x09\x00\x05hello");
    s.wait_log(
        &format!("SSL_do_handshake() failed (SSL: error:0A00010B:SSL routines::wrong version number) {tail}"),
        1,
    );
    // A record longer than TLS allows: crit, as nginx.
    raw(port, b"\x16\x03\x01\xff\xff\x01\x00");
    s.wait_log("[crit]", 1);
    s.wait_log(
        &format!("SSL_do_handshake() failed (SSL: error:0A0000C6:SSL routines::packet length too long) {tail}"),
        1,
    );
    // A ClientHello, then the client's fatal alert.
    let mut bytes = client_hello();
    bytes.extend_from_slice(b"\x15\x03\x03\x00\x02\x02\x28");
    raw(port, &bytes);

    s.wait_log(
        &format!("SSL_do_handshake() failed (SSL: error:0A000410:SSL routines::sslv3 alert handshake failure:SSL alert number 40) {tail}"),
        1,
    );
    // A ClientHello sent a byte at a time is still one.
    let mut t = TcpStream::connect(("127.0.0.1", port)).unwrap();
    t.set_nodelay(true).unwrap();
    for b in client_hello() {
        t.write_all(&[b]).unwrap();
    }
    let mut first = [0u8; 1];
    t.set_read_timeout(Some(common::WAIT)).unwrap();
    t.read_exact(&mut first).unwrap();
    assert_eq!(first[0], 0x16, "a ServerHello answers");
    // The worker still serves.
    let mut c = TlsClient::connect(port, &pki, &opts("a.test")).unwrap();
    assert_eq!(c.get("a.test", "/").unwrap().0, 200);
}

#[test]
fn a_stalled_handshake_slows_nobody_and_is_closed_after_client_header_timeout() {
    let mut pki = Pki::new();
    pki.issue("a", &["a.test"], false);
    let port = free_port();
    let s = Shoal::start(
        &conf(&format!(
            "client_header_timeout 2s;\n\
             server {{ listen 127.0.0.1:{port} ssl; server_name a.test; {} location / {{ return 200 ok; }} }}",
            pki.ssl_lines("a")
        )),
        port,
    );
    // One client says nothing; another sends half a ClientHello.
    let silent = TcpStream::connect(("127.0.0.1", port)).unwrap();
    let mut half = TcpStream::connect(("127.0.0.1", port)).unwrap();
    let hello = client_hello();
    half.write_all(&hello[..hello.len() / 2]).unwrap();
    // Meanwhile others are served at once (one worker).
    let start = Instant::now();
    for _ in 0..3 {
        let mut c = TlsClient::connect(port, &pki, &opts("a.test")).unwrap();
        assert_eq!(c.get("a.test", "/").unwrap().0, 200);
    }
    assert!(
        start.elapsed() < Duration::from_secs(1),
        "served in {:?} beside stalled handshakes",
        start.elapsed()
    );
    // Both stalled ones are closed after client_header_timeout, with nginx's line.
    s.wait_log(
        &format!("client timed out (110: Connection timed out) while SSL handshaking, client: 127.0.0.1, server: 127.0.0.1:{port}"),
        2,
    );
    for mut t in [silent, half] {
        t.set_read_timeout(Some(common::WAIT)).unwrap();
        let mut buf = [0u8; 64];
        assert!(matches!(t.read(&mut buf), Ok(0) | Err(_)), "closed");
    }
    let waited = start.elapsed();
    assert!(
        waited >= Duration::from_millis(1500),
        "not before the timeout: {waited:?}"
    );
}

#[test]
fn renegotiation_is_refused_and_the_connection_goes_on_or_ends_as_nginxs() {
    let mut pki = Pki::new();
    pki.issue("a", &["a.test"], false);
    let port = free_port();
    let s = Shoal::start(
        &conf(&format!(
            "server {{ listen 127.0.0.1:{port} ssl; server_name a.test; {} location / {{ return 200 ok; }} }}",
            pki.ssl_lines("a")
        )),
        port,
    );
    // s_client's `R` asks for a renegotiation (TLSv1.2): refused with no_renegotiation, which
    // OpenSSL's client answers with a fatal alert, as it does to nginx.
    let out = openssl(
        &[
            "s_client",
            "-connect",
            &format!("127.0.0.1:{port}"),
            "-servername",
            "a.test",
            "-tls1_2",
        ],
        b"R\n",
    );
    assert!(out.contains("RENEGOTIATING"), "{out}");
    assert!(out.contains("no renegotiation"), "{out}");
    s.wait_log(
        &format!("SSL_read() failed (SSL: error:0A000410:SSL routines::sslv3 alert handshake failure:SSL alert number 40) while waiting for request, client: 127.0.0.1, server: 127.0.0.1:{port}"),
        1,
    );
    let mut c = TlsClient::connect(port, &pki, &opts("a.test")).unwrap();
    assert_eq!(c.get("a.test", "/").unwrap().0, 200);
}

#[test]
fn a_refused_body_over_tls_lingers_so_the_client_reads_its_413() {
    let mut pki = Pki::new();
    pki.issue("a", &["a.test"], false);
    let port = free_port();
    let _s = Shoal::start(
        &conf(&format!(
            "client_max_body_size 1k;\n\
             server {{ listen 127.0.0.1:{port} ssl; server_name a.test; {} location / {{ return 200 ok; }} }}",
            pki.ssl_lines("a")
        )),
        port,
    );
    for _ in 0..3 {
        let mut c = TlsClient::connect(port, &pki, &opts("a.test")).unwrap();
        let body = 4 << 20;
        c.send(
            format!("POST / HTTP/1.1\r\nHost: a.test\r\nContent-Length: {body}\r\n\r\n").as_bytes(),
        )
        .unwrap();
        // The whole body goes before the answer is read (curl without `Expect`): the server,
        // which answered at once, reads and drops it through TLS rather than resetting.
        let chunk = vec![b'x'; 64 * 1024];
        for _ in 0..body / chunk.len() {
            c.send(&chunk)
                .expect("the server lingers: no reset while the body goes");
        }
        let (status, head, _) = c.read_answer().expect("the 413 arrives whole");
        assert_eq!(status, 413, "{head}");
        assert!(head.contains("Connection: close"), "{head}");
    }
}
