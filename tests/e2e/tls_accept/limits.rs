//! What a handshake may not do: ALPN without http/1.1, protocols and ciphers outside the
//! configured ones, garbage, plain HTTP and stalls on the TLS port, fragmented and oversized
//! ClientHellos; and the records `ssl_buffer_size` makes.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::{mpsc, Arc};
use std::time::Duration;

use rustls::pki_types::ServerName;
use shoal_server::tls::{self, Accepted};

use super::{sni_conf_single, tls_context, Client, ClientOpts, Outcome, Pki, Worker, TIMEOUT};

#[test]
fn alpn_without_http11_is_refused() {
    let mut p = Pki::new();
    p.issue("a", &["a.test"], false, false);
    let tls = tls_context(p.dir.path(), &sni_conf_single(&p, ""));
    let w = Worker::spawn(tls, 2, TIMEOUT);
    let h2_only = Client::new(ClientOpts {
        alpn: Some(vec!["h2"]),
        ..Default::default()
    });
    assert!(h2_only.get(w.addr, "a.test").is_err());
    let e = w.next_error();
    assert_eq!(
        e.message,
        "SSL_do_handshake() failed (SSL: error:0A0000EB:SSL routines::no application protocol)"
    );
    assert_eq!(e.level, shoal_server::log::Level::Info);
    // No ALPN at all is fine.
    let none = Client::new(ClientOpts {
        alpn: Some(vec![]),
        ..Default::default()
    });
    none.get(w.addr, "a.test").unwrap();
    assert_eq!(w.next_tls().ssl_alpn_protocol(), "");
}

#[test]
fn protocol_limits() {
    let mut p = Pki::new();
    p.issue("a", &["a.test"], false, false);
    let only13 = tls_context(p.dir.path(), &sni_conf_single(&p, "ssl_protocols TLSv1.3;"));
    let w = Worker::spawn(only13, 2, TIMEOUT);
    let c12 = Client::new(ClientOpts {
        versions: Some(&[&rustls::version::TLS12]),
        ..Default::default()
    });
    assert!(c12.get(w.addr, "a.test").is_err());
    let e = w.next_error();
    assert_eq!(
        e.message,
        "SSL_do_handshake() failed (SSL: error:0A000102:SSL routines::unsupported protocol)"
    );
    let c = Client::new(ClientOpts::default());
    c.get(w.addr, "a.test").unwrap();
    assert_eq!(w.next_tls().ssl_protocol(), "TLSv1.3");
    // Debian's line: TLSv1 and TLSv1.1 are accepted and not offered.
    let debian = tls_context(
        p.dir.path(),
        &sni_conf_single(&p, "ssl_protocols TLSv1 TLSv1.1 TLSv1.2;"),
    );
    let w = Worker::spawn(debian, 1, TIMEOUT);
    c.get(w.addr, "a.test").unwrap();
    assert_eq!(w.next_tls().ssl_protocol(), "TLSv1.2");
    // Nothing left to offer: every handshake fails.
    let none = tls_context(p.dir.path(), &sni_conf_single(&p, "ssl_protocols TLSv1;"));
    assert!(none.no_protocols);
    let w = Worker::spawn(none, 1, TIMEOUT);
    assert!(c.get(w.addr, "a.test").is_err());
    assert!(w.next_error().message.contains("no protocols available"));
}

#[test]
fn ciphers_and_server_preference() {
    let mut p = Pki::new();
    p.issue("a", &["a.test"], false, false);
    let tls = tls_context(
        p.dir.path(),
        &sni_conf_single(
            &p,
            "ssl_ciphers ECDHE-ECDSA-CHACHA20-POLY1305:ECDHE-ECDSA-AES128-GCM-SHA256;
             ssl_prefer_server_ciphers on;
             ssl_conf_command Ciphersuites TLS_CHACHA20_POLY1305_SHA256;",
        ),
    );
    let w = Worker::spawn(tls, 2, TIMEOUT);
    let c12 = Client::new(ClientOpts {
        versions: Some(&[&rustls::version::TLS12]),
        ..Default::default()
    });
    c12.get(w.addr, "a.test").unwrap();
    assert_eq!(w.next_tls().ssl_cipher(), "ECDHE-ECDSA-CHACHA20-POLY1305");
    let c13 = Client::new(ClientOpts::default());
    c13.get(w.addr, "a.test").unwrap();
    let info = w.next_tls();
    assert_eq!(info.ssl_cipher(), "TLS_CHACHA20_POLY1305_SHA256");
    assert!(info.ssl_ciphers().contains("TLS_AES_256_GCM_SHA384"));
    assert!(!info.ssl_curves().is_empty());
    assert!(!info.ssl_curve().is_empty());
}

/// Raw bytes to the TLS port; the worker's outcome.
fn raw(w: &Worker, bytes: &[u8], then_close: bool) -> Outcome {
    let mut s = TcpStream::connect(w.addr).unwrap();
    s.write_all(bytes).unwrap();
    if then_close {
        s.shutdown(std::net::Shutdown::Write).unwrap();
    }
    let outcome = w.next();
    drop(s);
    outcome
}

#[test]
fn garbage_plain_http_and_stalls() {
    let mut p = Pki::new();
    p.issue("a", &["a.test"], false, false);
    let tls = tls_context(p.dir.path(), &sni_conf_single(&p, ""));
    let w = Worker::spawn(tls, 7, Duration::from_millis(300));
    assert!(matches!(
        raw(&w, b"GET / HTTP/1.0\r\n\r\n", false),
        Outcome::Plain
    ));
    match raw(&w, b"\x16\x99garbage\r\n\r\n", false) {
        Outcome::Failed(e) => {
            // nginx: `SSL_do_handshake() failed (SSL: error:0A00010B:SSL routines::wrong
            // version number)`.
            assert_eq!(
                e.message,
                "SSL_do_handshake() failed (SSL: error:0A00010B:SSL routines::wrong version number)"
            );
            assert_eq!(e.level, shoal_server::log::Level::Info);
        }
        other => panic!("{other:?}"),
    }
    match raw(&w, b"\x16\x03\x01\x00\x05hello", false) {
        Outcome::Failed(e) => assert_eq!(
            e.message,
            "SSL_do_handshake() failed (SSL: error:0A0000F4:SSL routines::unexpected message)"
        ),
        other => panic!("{other:?}"),
    }
    match raw(&w, b"\x16\x03\x01\x00\x50\x01", true) {
        Outcome::Failed(e) => assert_eq!(e.message, "peer closed connection in SSL handshake"),
        other => panic!("{other:?}"),
    }
    match raw(&w, b"", true) {
        Outcome::Failed(e) => assert_eq!(e.message, "client closed connection"),
        other => panic!("{other:?}"),
    }
    // A stalled handshake is the caller's timeout; the worker goes on serving.
    assert!(matches!(
        raw(&w, b"\x16\x03\x01\x00\x50\x01", false),
        Outcome::TimedOut
    ));
    let c = Client::new(ClientOpts::default());
    c.get(w.addr, "a.test").unwrap();
    w.next_tls();
}

#[test]
fn records_of_ssl_buffer_size() {
    let mut p = Pki::new();
    p.issue("a", &["a.test"], false, false);
    let tls = tls_context(p.dir.path(), &sni_conf_single(&p, "ssl_buffer_size 4k;"));
    assert_eq!(tls.server(0).unwrap().buffer_size, 4096);
    let (addr_tx, addr_rx) = mpsc::channel();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async move {
            let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            addr_tx.send(l.local_addr().unwrap()).unwrap();
            let (tcp, peer) = l.accept().await.unwrap();
            if let Ok(Accepted::Tls(mut s)) = tls::accept(tcp, &tls, Some(peer)).await {
                let head = vec![b'h'; 100];
                let body = vec![b'b'; 10_000];
                s.write_all_vectored(&[&head, &body]).await.unwrap();
                s.close_notify().await.unwrap();
            }
        });
    });
    let addr = addr_rx.recv().unwrap();
    // A client that looks at the records as they come.
    let c = Client::new(ClientOpts::default());
    let mut conn =
        rustls::ClientConnection::new(c.config.clone(), ServerName::try_from("a.test").unwrap())
            .unwrap();
    let mut tcp = TcpStream::connect(addr).unwrap();
    tcp.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    while conn.is_handshaking() {
        conn.complete_io(&mut tcp).unwrap();
    }
    let mut wire = Vec::new();
    tcp.read_to_end(&mut wire).unwrap();
    let mut sizes = Vec::new();
    let mut at = 0;
    while at + 5 <= wire.len() {
        let len = usize::from(u16::from_be_bytes([wire[at + 3], wire[at + 4]]));
        sizes.push(len);
        at += 5 + len;
    }
    // TLS 1.3 records: plaintext + 1 (content type) + 16 (tag). Tickets come first.
    let data: Vec<usize> = sizes.iter().copied().filter(|&n| n > 1000).collect();
    assert_eq!(
        data,
        vec![4096 + 17, 4096 + 17, 10_100 - 2 * 4096 + 17],
        "{sizes:?}"
    );
    let mut plain = Vec::new();
    let mut rd = &wire[..];
    while !rd.is_empty() {
        conn.read_tls(&mut rd).unwrap();
        conn.process_new_packets().unwrap();
        let _ = conn.reader().read_to_end(&mut plain);
    }
    assert_eq!(plain.len(), 10_100);
}

#[test]
fn fragmented_and_oversized_client_hellos() {
    let mut p = Pki::new();
    p.issue("a", &["a.test"], false, false);
    let tls = tls_context(p.dir.path(), &sni_conf_single(&p, ""));
    let w = Worker::spawn(tls, 4, TIMEOUT);
    // A ClientHello in 64-byte records, and one written a byte at a time.
    let mut c = Client::new(ClientOpts::default());
    Arc::get_mut(&mut c.config).unwrap().max_fragment_size = Some(64);
    c.get(w.addr, "a.test").unwrap();
    assert_eq!(w.next_tls().ssl_server_name(), "a.test");
    let mut hello = Vec::new();
    let mut conn = rustls::ClientConnection::new(
        Client::new(ClientOpts::default()).config,
        ServerName::try_from("a.test").unwrap(),
    )
    .unwrap();
    conn.write_tls(&mut hello).unwrap();
    let mut tcp = TcpStream::connect(w.addr).unwrap();
    tcp.set_nodelay(true).unwrap();
    for b in &hello {
        tcp.write_all(std::slice::from_ref(b)).unwrap();
    }
    conn.complete_io(&mut tcp).unwrap();
    assert!(!conn.is_handshaking());
    drop(tcp);
    // The worker answers that connection's (absent) request and closes.
    w.next_tls();
    // A record longer than TLS allows, and a handshake message announcing 16 MiB.
    // (nginx logs the first at crit: it is not among the reasons it puts down to clients.)
    use shoal_server::log::Level;
    for (bytes, reason, level) in [
        (
            &b"\x16\x03\x01\x48\x01\x01"[..],
            "packet length too long",
            Level::Crit,
        ),
        (
            &b"\x16\x03\x01\x00\x04\x01\xff\xff\xff"[..],
            "unexpected message",
            Level::Info,
        ),
    ] {
        match raw(&w, bytes, false) {
            Outcome::Failed(e) => {
                assert!(e.message.ends_with(&format!("{reason})")), "{e}");
                assert_eq!(e.level, level, "{e}");
            }
            other => panic!("{other:?}"),
        }
    }
}
