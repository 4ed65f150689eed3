//! Resumption: by ticket across workers, by session id in a shared cache, neither when both
//! are off, ticket key files rotating, and 0-RTT early data.

use std::fs;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::Arc;
use std::time::Duration;

use rustls::pki_types::ServerName;

use super::{sni_conf_single, tls_context, Client, ClientOpts, Pki, Worker, TIMEOUT};

#[test]
fn resumption_by_ticket_across_two_workers() {
    let mut p = Pki::new();
    p.issue("a", &["a.test"], false, false);
    let tls = tls_context(
        p.dir.path(),
        &sni_conf_single(&p, "ssl_session_cache shared:SSL:1m;"),
    );
    let w1 = Worker::spawn(tls.clone(), 3, TIMEOUT);
    let w2 = Worker::spawn(tls, 3, TIMEOUT);
    for versions in [
        &[&rustls::version::TLS13][..],
        &[&rustls::version::TLS12][..],
    ] {
        let c = Client::new(ClientOpts {
            versions: Some(versions),
            ..Default::default()
        });
        c.get(w1.addr, "a.test").unwrap();
        assert_eq!(w1.next_tls().ssl_session_reused(), ".");
        c.get(w2.addr, "a.test").unwrap();
        let info = w2.next_tls();
        assert_eq!(info.ssl_session_reused(), "r", "{versions:?}");
    }
    // A session is for its server name.
    let c = Client::new(ClientOpts::default());
    c.get(w1.addr, "a.test").unwrap();
    w1.next_tls();
    c.get(w2.addr, "").unwrap();
    assert_eq!(w2.next_tls().ssl_session_reused(), ".");
}

#[test]
fn resumption_by_session_id_in_a_shared_cache() {
    let mut p = Pki::new();
    p.issue("a", &["a.test"], false, false);
    let tls = tls_context(
        p.dir.path(),
        &sni_conf_single(
            &p,
            "ssl_session_cache shared:SSL:1m; ssl_session_tickets off;",
        ),
    );
    let w1 = Worker::spawn(tls.clone(), 2, TIMEOUT);
    let w2 = Worker::spawn(tls, 2, TIMEOUT);
    for versions in [
        &[&rustls::version::TLS12][..],
        &[&rustls::version::TLS13][..],
    ] {
        let c = Client::new(ClientOpts {
            versions: Some(versions),
            ..Default::default()
        });
        c.get(w1.addr, "a.test").unwrap();
        let first = w1.next_tls();
        c.get(w2.addr, "a.test").unwrap();
        let second = w2.next_tls();
        assert_eq!(second.ssl_session_reused(), "r", "{versions:?}");
        if versions[0] == &rustls::version::TLS12 {
            assert_eq!(first.session_id.len(), 32);
            assert_eq!(first.session_id, second.session_id);
        }
    }
}

#[test]
fn no_cache_and_no_tickets_resume_nothing() {
    let mut p = Pki::new();
    p.issue("a", &["a.test"], false, false);
    let tls = tls_context(
        p.dir.path(),
        &sni_conf_single(&p, "ssl_session_cache off; ssl_session_tickets off;"),
    );
    let w = Worker::spawn(tls, 4, TIMEOUT);
    for versions in [
        &[&rustls::version::TLS12][..],
        &[&rustls::version::TLS13][..],
    ] {
        let c = Client::new(ClientOpts {
            versions: Some(versions),
            ..Default::default()
        });
        c.get(w.addr, "a.test").unwrap();
        c.get(w.addr, "a.test").unwrap();
        assert_eq!(w.next_tls().ssl_session_reused(), ".");
        assert_eq!(w.next_tls().ssl_session_reused(), ".");
    }
}

#[test]
fn ticket_key_files_rotate_by_order() {
    let mut p = Pki::new();
    p.issue("a", &["a.test"], false, false);
    fs::write(p.path("old.key"), [7u8; 48]).unwrap();
    fs::write(p.path("new.key"), [9u8; 80]).unwrap();
    let d = p.dir.path().display();
    let conf = |keys: &str| {
        tls_context(
            p.dir.path(),
            &sni_conf_single(&p, &format!("ssl_session_cache off; {keys}")),
        )
    };
    let old = Worker::spawn(
        conf(&format!("ssl_session_ticket_key {d}/old.key;")),
        1,
        TIMEOUT,
    );
    let rotated = Worker::spawn(
        conf(&format!(
            "ssl_session_ticket_key {d}/new.key; ssl_session_ticket_key {d}/old.key;"
        )),
        2,
        TIMEOUT,
    );
    let dropped = Worker::spawn(
        conf(&format!("ssl_session_ticket_key {d}/new.key;")),
        1,
        TIMEOUT,
    );
    // TLS 1.2: one ticket, renewed on resumption; the client keeps the latest.
    let c = Client::new(ClientOpts {
        versions: Some(&[&rustls::version::TLS12]),
        ..Default::default()
    });
    c.get(old.addr, "a.test").unwrap();
    assert_eq!(old.next_tls().ssl_session_reused(), ".");
    c.get(rotated.addr, "a.test").unwrap();
    assert_eq!(
        rotated.next_tls().ssl_session_reused(),
        "r",
        "the old key still decrypts"
    );
    let c2 = Client::new(ClientOpts {
        versions: Some(&[&rustls::version::TLS12]),
        ..Default::default()
    });
    c2.get(rotated.addr, "a.test").unwrap();
    rotated.next_tls();
    // c2's ticket is under the new key: the server that only has the new key resumes it.
    c2.get(dropped.addr, "a.test").unwrap();
    assert_eq!(dropped.next_tls().ssl_session_reused(), "r");
}

#[test]
fn a_ticket_under_a_dropped_key_is_a_full_handshake() {
    let mut p = Pki::new();
    p.issue("a", &["a.test"], false, false);
    fs::write(p.path("old.key"), [7u8; 48]).unwrap();
    fs::write(p.path("new.key"), [9u8; 80]).unwrap();
    let d = p.dir.path().display();
    let conf = |keys: &str| {
        tls_context(
            p.dir.path(),
            &sni_conf_single(&p, &format!("ssl_session_cache off; {keys}")),
        )
    };
    let old = Worker::spawn(
        conf(&format!("ssl_session_ticket_key {d}/old.key;")),
        1,
        TIMEOUT,
    );
    let new = Worker::spawn(
        conf(&format!("ssl_session_ticket_key {d}/new.key;")),
        1,
        TIMEOUT,
    );
    let c = Client::new(ClientOpts::default());
    c.get(old.addr, "a.test").unwrap();
    old.next_tls();
    c.get(new.addr, "a.test").unwrap();
    assert_eq!(new.next_tls().ssl_session_reused(), ".");
}

#[test]
fn early_data_is_read_before_the_handshake_ends() {
    let mut p = Pki::new();
    p.issue("a", &["a.test"], false, false);
    let tls = tls_context(p.dir.path(), &sni_conf_single(&p, "ssl_early_data on;"));
    let w = Worker::spawn(tls, 2, TIMEOUT);
    let mut c = Client::new(ClientOpts::default());
    Arc::get_mut(&mut c.config).unwrap().enable_early_data = true;
    c.get(w.addr, "a.test").unwrap();
    assert_eq!(w.next_tls().ssl_early_data(), "");
    // Resumed with the request in 0-RTT data.
    let mut conn =
        rustls::ClientConnection::new(c.config.clone(), ServerName::try_from("a.test").unwrap())
            .unwrap();
    let request = b"GET / HTTP/1.1\r\nHost: x\r\n\r\n";
    let sent_early = match conn.early_data() {
        Some(mut e) => e.write_all(request).is_ok(),
        None => false,
    };
    assert!(
        sent_early,
        "the first connection left a ticket that allows 0-RTT"
    );
    let tcp = TcpStream::connect(w.addr).unwrap();
    tcp.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut s = rustls::StreamOwned::new(conn, tcp);
    while s.conn.is_handshaking() {
        s.conn.complete_io(&mut s.sock).unwrap();
    }
    assert!(s.conn.is_early_data_accepted());
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    assert!(out.ends_with("sni=a.test\n"), "{out}");
    let info = w.next_tls();
    assert_eq!(info.ssl_early_data(), "1");
    assert_eq!(info.ssl_session_reused(), "r");
}
