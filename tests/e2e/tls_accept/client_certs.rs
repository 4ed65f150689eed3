//! Client certificates (`ssl_verify_client`, `ssl_client_certificate`, `ssl_crl`) and the
//! variables that describe them; and `openssl s_client` as the client, for SNI, ALPN,
//! resumption, a client certificate and a refused renegotiation.

use std::io::Write;
use std::net::SocketAddr;
use std::process::{Command, Stdio};
use std::time::Duration;

use super::{have_openssl, sni_conf_single, tls_context, Client, ClientOpts, Pki, Worker, TIMEOUT};

/// Runs `openssl s_client` against `addr` with `args`, sending one request; its stdout and
/// stderr together.
fn s_client(addr: SocketAddr, args: &[&str]) -> String {
    let mut child = Command::new("openssl")
        .arg("s_client")
        .arg("-connect")
        .arg(addr.to_string())
        .args(args)
        .arg("-ign_eof")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("openssl runs");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(b"GET / HTTP/1.0\r\n\r\n")
        .unwrap();
    let out = child.wait_with_output().unwrap();
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

fn client_cert_conf(p: &Pki, mode: &str, extra: &str) -> String {
    let d = p.dir.path().display();
    sni_conf_single(
        p,
        &format!("ssl_verify_client {mode}; ssl_client_certificate {d}/ca.crt; {extra}"),
    )
}

#[test]
fn client_certificates() {
    let mut p = Pki::new();
    p.issue("a", &["a.test"], false, false);
    let serial = p.issue("alice", &[], false, true);
    p.self_signed_client("mallory");
    let tls = tls_context(p.dir.path(), &client_cert_conf(&p, "on", ""));
    let w = Worker::spawn(tls, 3, TIMEOUT);
    let alice = Client::new(ClientOpts {
        cert: Some((p.path("alice.crt"), p.path("alice.key"))),
        ..Default::default()
    });
    let body = alice.get(w.addr, "a.test").unwrap();
    assert!(body.contains("verify=SUCCESS"), "{body}");
    let info = w.next_tls();
    // The certificate says CN first, then O: RFC 2253 writes them the other way round.
    assert_eq!(info.ssl_client_s_dn(), "O=Shoal Tests,CN=alice");
    assert_eq!(info.ssl_client_s_dn_legacy(), "/CN=alice/O=Shoal Tests");
    assert_eq!(info.ssl_client_i_dn(), "CN=shoal test CA");
    assert_eq!(info.ssl_client_serial(), format!("{serial:X}"));
    // No certificate: the handshake succeeds (nginx answers 496 per request).
    let anonymous = Client::new(ClientOpts::default());
    let body = anonymous.get(w.addr, "a.test").unwrap();
    assert!(body.contains("verify=NONE"), "{body}");
    w.next_tls();
    // A certificate nobody vouches for: the handshake succeeds, the verdict fails.
    let mallory = Client::new(ClientOpts {
        cert: Some((p.path("mallory.crt"), p.path("mallory.key"))),
        ..Default::default()
    });
    let body = mallory.get(w.addr, "a.test").unwrap();
    assert!(
        body.contains("verify=FAILED:self-signed certificate"),
        "{body}"
    );
    let v = w.next_tls().client_verdict.unwrap();
    assert!(v.is_unknown_issuer(), "optional_no_ca forgives it: {v:?}");
}

#[test]
fn client_certificates_optional_no_ca_and_crl() {
    let mut p = Pki::new();
    p.issue("a", &["a.test"], false, false);
    p.issue("alice", &[], false, true);
    let bob = p.issue("bob", &[], false, true);
    p.crl(&[bob]);
    let d = p.dir.path().display();
    let tls = tls_context(
        p.dir.path(),
        &client_cert_conf(&p, "optional", &format!("ssl_crl {d}/crl.pem;")),
    );
    let w = Worker::spawn(tls, 2, TIMEOUT);
    for (name, want) in [
        ("alice", "verify=SUCCESS"),
        ("bob", "verify=FAILED:certificate revoked"),
    ] {
        let c = Client::new(ClientOpts {
            cert: Some((
                p.path(&format!("{name}.crt")),
                p.path(&format!("{name}.key")),
            )),
            ..Default::default()
        });
        let body = c.get(w.addr, "a.test").unwrap();
        assert!(body.contains(want), "{name}: {body}");
        w.next_tls();
    }
    // optional_no_ca without any CA: a certificate is asked for and judged "unknown issuer".
    let tls = tls_context(
        p.dir.path(),
        &sni_conf_single(&p, "ssl_verify_client optional_no_ca;"),
    );
    let w = Worker::spawn(tls, 1, TIMEOUT);
    let c = Client::new(ClientOpts {
        cert: Some((p.path("alice.crt"), p.path("alice.key"))),
        ..Default::default()
    });
    let body = c.get(w.addr, "a.test").unwrap();
    assert!(
        body.contains("verify=FAILED:unable to get local issuer certificate"),
        "{body}"
    );
    assert!(w.next_tls().client_verdict.unwrap().is_unknown_issuer());
}

#[test]
fn openssl_s_client_sni_alpn_resumption_and_client_certificates() {
    if !have_openssl() {
        eprintln!("no openssl here: skipped");
        return;
    }
    let mut p = Pki::new();
    p.issue("a", &["a.test"], false, false);
    p.issue("b", &["b.test"], true, false);
    p.issue("alice", &[], false, true);
    let d = p.dir.path().display();
    let tls = tls_context(
        p.dir.path(),
        &format!(
            "ssl_session_cache shared:S:1m;
             server {{ listen 127.0.0.1:8443 ssl; server_name a.test;
               ssl_certificate {d}/a.crt; ssl_certificate_key {d}/a.key;
               ssl_verify_client optional; ssl_client_certificate {d}/ca.crt; }}
             server {{ listen 127.0.0.1:8443 ssl; server_name b.test;
               ssl_certificate {d}/b.crt; ssl_certificate_key {d}/b.key; }}"
        ),
    );
    let w = Worker::spawn(tls, 8, TIMEOUT);
    let ca = p.path("ca.crt").display().to_string();
    // SNI and ALPN.
    let out = s_client(
        w.addr,
        &["-servername", "b.test", "-alpn", "http/1.1", "-CAfile", &ca],
    );
    assert!(out.contains("CN = b"), "{out}");
    assert!(out.contains("ALPN protocol: http/1.1"), "{out}");
    assert!(out.contains("Verify return code: 0 (ok)"), "{out}");
    assert_eq!(w.next_tls().server, 1);
    // Resumption by session id (TLS 1.2, no ticket) and by ticket (TLS 1.3).
    let sess = p.path("sess.pem").display().to_string();
    for args in [&["-tls1_2", "-no_ticket"][..], &["-tls1_3"][..]] {
        let mut first: Vec<&str> = vec!["-servername", "a.test", "-sess_out", &sess];
        first.extend_from_slice(args);
        let out = s_client(w.addr, &first);
        assert!(out.contains("New, TLSv1"), "{out}");
        w.next_tls();
        let mut again: Vec<&str> = vec!["-servername", "a.test", "-sess_in", &sess];
        again.extend_from_slice(args);
        let out = s_client(w.addr, &again);
        assert!(out.contains("Reused, TLSv1"), "{args:?}: {out}");
        assert_eq!(w.next_tls().ssl_session_reused(), "r");
    }
    // A client certificate.
    let (cert, key) = (
        p.path("alice.crt").display().to_string(),
        p.path("alice.key").display().to_string(),
    );
    let out = s_client(
        w.addr,
        &["-servername", "a.test", "-cert", &cert, "-key", &key],
    );
    assert!(
        out.contains("verify=SUCCESS s_dn=O=Shoal Tests,CN=alice"),
        "{out}"
    );
    assert!(
        out.contains("Acceptable client certificate CA names"),
        "{out}"
    );
    w.next_tls();
    // A TLS 1.2 client that asks to renegotiate gets a no_renegotiation warning and gives up.
    let mut child = Command::new("openssl")
        .args(["s_client", "-connect", &w.addr.to_string(), "-tls1_2"])
        .args(["-servername", "a.test"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    std::thread::sleep(Duration::from_millis(500));
    stdin.write_all(b"R\n").unwrap();
    std::thread::sleep(Duration::from_millis(500));
    drop(stdin);
    let out = child.wait_with_output().unwrap();
    let text =
        String::from_utf8_lossy(&out.stderr).to_string() + &String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("RENEGOTIATING"), "{text}");
    assert!(text.contains("no renegotiation"), "{text}");
    w.next_tls();
}
