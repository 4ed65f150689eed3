//! Which certificate a handshake gets (SNI, RSA or ECDSA, `ssl_reject_handshake`) and how
//! certificates are read: named with variables, afresh on a reload, encrypted keys, `data:`
//! values and chains, a stapled OCSP response from a file.

use std::fs;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::Command;
use std::sync::Arc;

use rustls::pki_types::{CertificateDer, ServerName};
use rustls::{ClientConfig, SignatureScheme};
use shoal_server::tls;

use super::{
    have_openssl, pem_der, sni_conf_single, tls_context, Client, ClientOpts, Pki, Worker, TIMEOUT,
};

/// Three servers on one address; `a.test` is the default.
fn sni_conf(p: &Pki) -> String {
    let d = p.dir.path().display();
    format!(
        "server {{ listen 127.0.0.1:8443 ssl; server_name a.test;
           ssl_certificate {d}/a.crt; ssl_certificate_key {d}/a.key; }}
         server {{ listen 127.0.0.1:8443 ssl; server_name b.test *.wild.test;
           ssl_certificate {d}/b.crt; ssl_certificate_key {d}/b.key; }}
         server {{ listen 127.0.0.1:8443 ssl; server_name ~^re(\\d+)\\.test$;
           ssl_certificate {d}/re.crt; ssl_certificate_key {d}/re.key; }}
         server {{ listen 127.0.0.1:8443 ssl; server_name nocert.test; }}"
    )
}

#[test]
fn sni_chooses_the_server_and_the_default_answers_the_rest() {
    let mut p = Pki::new();
    p.issue("a", &["a.test"], false, false);
    p.issue("b", &["b.test"], false, false);
    p.issue("re", &["re1.test"], false, false);
    let tls = tls_context(p.dir.path(), &sni_conf(&p));
    let w = Worker::spawn(tls, 6, TIMEOUT);
    let c = Client::new(ClientOpts::default());
    for (sni, cn, server) in [
        ("b.test", "b", 1),
        ("x.wild.test", "b", 1),
        ("re42.test", "re", 2),
        ("unknown.test", "a", 0),
        ("", "a", 0),
        // A server without certificates answers with the default server's, as nginx's does.
        ("nocert.test", "a", 3),
    ] {
        let body = c.get(w.addr, sni).unwrap();
        assert_eq!(c.seen_cn(), cn, "SNI {sni:?}");
        let info = w.next_tls();
        assert_eq!(info.server, server, "SNI {sni:?}");
        assert!(body.contains(&format!("server={server} ")), "{body}");
        assert_eq!(info.ssl_server_name(), sni);
        assert_eq!(info.ssl_protocol(), "TLSv1.3");
        assert_eq!(info.ssl_alpn_protocol(), "http/1.1");
    }
}

#[test]
fn rsa_or_ecdsa_by_the_clients_signature_schemes() {
    let mut p = Pki::new();
    p.issue("rsa", &["a.test"], true, false);
    p.issue("ec", &["a.test"], false, false);
    let d = p.dir.path().display();
    let tls = tls_context(
        p.dir.path(),
        &format!(
            "server {{ listen 127.0.0.1:8443 ssl; server_name a.test;
               ssl_certificate {d}/rsa.crt; ssl_certificate_key {d}/rsa.key;
               ssl_certificate {d}/ec.crt; ssl_certificate_key {d}/ec.key; }}"
        ),
    );
    let w = Worker::spawn(tls, 4, TIMEOUT);
    let any = Client::new(ClientOpts::default());
    any.get(w.addr, "a.test").unwrap();
    assert!(
        !any.seen_key_is_rsa(),
        "ECDSA first when the client lists it first"
    );
    w.next_tls();
    let rsa_only = Client::new(ClientOpts {
        schemes: Some(vec![
            SignatureScheme::RSA_PSS_SHA256,
            SignatureScheme::RSA_PKCS1_SHA256,
        ]),
        ..Default::default()
    });
    rsa_only.get(w.addr, "a.test").unwrap();
    assert!(rsa_only.seen_key_is_rsa());
    w.next_tls();
    // TLSv1.2 picks an ECDHE-RSA suite with the RSA certificate.
    let rsa12 = Client::new(ClientOpts {
        versions: Some(&[&rustls::version::TLS12]),
        schemes: Some(vec![SignatureScheme::RSA_PKCS1_SHA256]),
        ..Default::default()
    });
    rsa12.get(w.addr, "a.test").unwrap();
    let info = w.next_tls();
    assert_eq!(info.ssl_protocol(), "TLSv1.2");
    assert!(
        info.ssl_cipher().starts_with("ECDHE-RSA-"),
        "{}",
        info.ssl_cipher()
    );
    let ec12 = Client::new(ClientOpts {
        versions: Some(&[&rustls::version::TLS12]),
        ..Default::default()
    });
    ec12.get(w.addr, "a.test").unwrap();
    let info = w.next_tls();
    assert!(
        info.ssl_cipher().starts_with("ECDHE-ECDSA-"),
        "{}",
        info.ssl_cipher()
    );
}

#[test]
fn reject_handshake() {
    let mut p = Pki::new();
    p.issue("a", &["a.test"], false, false);
    let d = p.dir.path().display();
    let tls = tls_context(
        p.dir.path(),
        &format!(
            "server {{ listen 127.0.0.1:8443 ssl default_server; ssl_reject_handshake on; }}
             server {{ listen 127.0.0.1:8443 ssl; server_name a.test;
               ssl_certificate {d}/a.crt; ssl_certificate_key {d}/a.key; }}"
        ),
    );
    let w = Worker::spawn(tls, 3, TIMEOUT);
    let c = Client::new(ClientOpts::default());
    c.get(w.addr, "a.test").unwrap();
    assert_eq!(w.next_tls().server, 1);
    for sni in ["other.test", ""] {
        let e = c.get(w.addr, sni).unwrap_err();
        assert!(
            e.contains("UnrecognisedName") || e.contains("unrecognized"),
            "{e}"
        );
        let e = w.next_error();
        assert_eq!(e.message, "handshake rejected");
        assert_eq!(e.level, shoal_server::log::Level::Info);
    }
}

#[test]
fn certificates_named_with_variables_are_read_at_the_handshake() {
    let mut p = Pki::new();
    p.issue("a.test", &["a.test"], false, false);
    p.issue("b.test", &["b.test"], false, false);
    let d = p.dir.path().display();
    let tls = tls_context(
        p.dir.path(),
        &format!(
            "server {{ listen 127.0.0.1:8443 ssl;
               ssl_certificate {d}/$ssl_server_name.crt;
               ssl_certificate_key {d}/$ssl_server_name.key;
               ssl_certificate_cache max=10; }}"
        ),
    );
    let w = Worker::spawn(tls, 3, TIMEOUT);
    let c = Client::new(ClientOpts::default());
    c.get(w.addr, "a.test").unwrap();
    assert_eq!(c.seen_cn(), "a.test");
    w.next_tls();
    c.get(w.addr, "b.test").unwrap();
    assert_eq!(c.seen_cn(), "b.test");
    w.next_tls();
    assert!(c.get(w.addr, "missing.test").is_err());
    let e = w.next_error();
    assert!(e.message.starts_with("cannot load certificate"), "{e}");
    assert_eq!(e.level, shoal_server::log::Level::Error);
}

#[test]
fn a_reload_reads_certificates_afresh() {
    let mut p = Pki::new();
    p.issue("a", &["a.test"], false, false);
    p.issue("b", &["b.test"], false, false);
    let conf = sni_conf_single(&p, "");
    let first = tls_context(p.dir.path(), &conf);
    // The files change: the next load serves the new certificate...
    fs::copy(p.path("b.crt"), p.path("a.crt")).unwrap();
    fs::copy(p.path("b.key"), p.path("a.key")).unwrap();
    let second = tls_context(p.dir.path(), &conf);
    let (w1, w2) = (
        Worker::spawn(first, 1, TIMEOUT),
        Worker::spawn(second, 1, TIMEOUT),
    );
    let c = Client::new(ClientOpts::default());
    c.get(w1.addr, "a.test").unwrap();
    assert_eq!(
        c.seen_cn(),
        "a",
        "a loaded configuration keeps what it read"
    );
    w1.next_tls();
    c.get(w2.addr, "a.test").unwrap();
    assert_eq!(c.seen_cn(), "b");
    w2.next_tls();
    // ...and a key that does not match is the load's error, in nginx's words.
    fs::copy(p.path("ca.crt"), p.path("a.crt")).unwrap();
    let file = p.path("shoal.conf");
    let e = shoal_server::config::load(&shoal_server::config::Source {
        file: &file,
        builtin: None,
        prefix: p.dir.path(),
        globals: None,
    })
    .expect_err("a mismatched key fails the load");
    assert_eq!(
        e.message,
        format!(
            "SSL_CTX_use_PrivateKey(\"{}\") failed (SSL: error:05800074:x509 certificate routines::key values mismatch)",
            p.path("a.key").display()
        )
    );
}

#[test]
fn encrypted_keys_data_values_and_chains() {
    let mut p = Pki::new();
    p.issue("a", &["a.test"], false, false);
    p.issue("b", &["b.test"], false, false);
    // b's certificate with the CA after it: a chain.
    let chain = fs::read_to_string(p.path("b.crt")).unwrap()
        + &fs::read_to_string(p.path("ca.crt")).unwrap();
    fs::write(p.path("b-chain.crt"), &chain).unwrap();
    let key_pem = fs::read_to_string(p.path("a.key")).unwrap();
    let cert_pem = fs::read_to_string(p.path("a.crt")).unwrap();
    let d = p.dir.path().display();
    let mut encrypted = String::new();
    if have_openssl() {
        // PKCS#8 with AES-256 (OpenSSL 3's default) in the handshake below...
        let pkcs8 = Command::new("openssl")
            .args([
                "pkcs8",
                "-topk8",
                "-v2",
                "aes-256-cbc",
                "-passout",
                "pass:secret",
            ])
            .arg("-in")
            .arg(p.path("b.key"))
            .output()
            .unwrap();
        assert!(pkcs8.status.success());
        fs::write(p.path("b-enc.key"), &pkcs8.stdout).unwrap();
        assert!(String::from_utf8_lossy(&pkcs8.stdout).contains("ENCRYPTED PRIVATE KEY"));
        fs::write(p.path("pw"), "wrong\nsecret\n").unwrap();
        encrypted = format!("ssl_password_file {d}/pw; ssl_certificate_key {d}/b-enc.key;");
        // ...and OpenSSL's traditional form (`Proc-Type: 4,ENCRYPTED`, AES-128-CBC).
        let traditional = Command::new("openssl")
            .args(["ec", "-aes128", "-passout", "pass:secret"])
            .arg("-in")
            .arg(p.path("b.key"))
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&traditional.stdout).to_string();
        assert!(text.contains("DEK-Info: AES-128-CBC"), "{text}");
        let name = format!("data:{text}");
        let pw = vec!["wrong".to_string(), "secret".to_string()];
        assert!(tls::certs::load_key(&name, Some(&pw)).is_ok());
        let e = tls::certs::load_key(&name, Some(&pw[..1])).unwrap_err();
        assert!(e.ends_with("PEM_read_bio_PrivateKey() failed (SSL: error:1C800064:Provider routines::bad decrypt)"), "{e}");
    } else {
        encrypted.push_str(&format!("ssl_certificate_key {d}/b.key;"));
    }
    let tls = tls_context(
        p.dir.path(),
        &format!(
            "server {{ listen 127.0.0.1:8443 ssl; server_name a.test;
               ssl_certificate \"data:{cert_pem}\"; ssl_certificate_key \"data:{key_pem}\"; }}
             server {{ listen 127.0.0.1:8443 ssl; server_name b.test;
               ssl_certificate {d}/b-chain.crt; {encrypted} }}"
        ),
    );
    let w = Worker::spawn(tls, 2, TIMEOUT);
    let c = Client::new(ClientOpts::default());
    c.get(w.addr, "a.test").unwrap();
    assert_eq!(c.seen_cn(), "a");
    w.next_tls();
    // The chain arrives whole: a client that trusts only the CA verifies it.
    let roots = {
        let mut r = rustls::RootCertStore::empty();
        r.add(CertificateDer::from(pem_der(
            &fs::read_to_string(p.path("ca.crt")).unwrap(),
        )))
        .unwrap();
        r
    };
    let strict = ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::aws_lc_rs::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_root_certificates(roots)
    .with_no_client_auth();
    let conn =
        rustls::ClientConnection::new(Arc::new(strict), ServerName::try_from("b.test").unwrap())
            .unwrap();
    let mut s = rustls::StreamOwned::new(conn, TcpStream::connect(w.addr).unwrap());
    s.write_all(b"GET / HTTP/1.1\r\n\r\n").unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    assert_eq!(s.conn.peer_certificates().map(<[_]>::len), Some(2));
    assert_eq!(w.next_tls().server, 1);
}

#[test]
fn stapling_from_a_file() {
    let mut p = Pki::new();
    p.issue("a", &["a.test"], false, false);
    // Any DER response is stapled as it is (OCSPResponse { responseStatus: tryLater }).
    let response = [0x30, 0x03, 0x0a, 0x01, 0x03];
    fs::write(p.path("a.ocsp"), response).unwrap();
    let d = p.dir.path().display();
    let tls = tls_context(
        p.dir.path(),
        &sni_conf_single(
            &p,
            &format!("ssl_stapling on; ssl_stapling_file {d}/a.ocsp;"),
        ),
    );
    let w = Worker::spawn(tls, 1, TIMEOUT);
    let c = Client::new(ClientOpts::default());
    c.get(w.addr, "a.test").unwrap();
    w.next_tls();
    assert_eq!(*c.recorder.ocsp.lock().unwrap(), response);
}
