//! OCSP stapling from the responder (issue 20): `ssl_stapling on` without a file, against a real
//! responder (`openssl ocsp`, answering from the `index.txt` the test's CA writes), checked with
//! `openssl s_client -status`. A good certificate gets its answer stapled (after the first
//! handshake, which starts the fetch, as in nginx); a revoked one gets none and nginx's line; a
//! responder that is down costs the staple, not the handshake; a responder named by a host is
//! looked up with the `resolver`, or, without one, at the addresses found when the
//! configuration was read, with nginx's warning.
//!
//! The log lines are nginx 1.22.1's, checked against it with the same certificates and
//! responder.

use std::process::{Child, Command, Stdio};

use crate::common::dns::{v4, Dns, A};
use crate::common::tls::Pki;
use crate::common::{free_port, wait_for, Shoal};
use crate::tls::{conf, openssl};

/// `openssl ocsp` answering for the PKI's CA from its `index.txt`, signing as the CA; killed
/// when dropped.
struct Responder {
    child: Child,
}

impl Responder {
    fn start(pki: &Pki, port: u16) -> Responder {
        Responder::signed_by(pki, port, pki)
    }

    /// A responder for `pki`'s CA whose answers `signer`'s CA signs.
    fn signed_by(pki: &Pki, port: u16, signer: &Pki) -> Responder {
        let log = pki.path("ocsp.log");
        let child = Command::new("openssl")
            .args(["ocsp", "-index", "index.txt", "-port", &port.to_string()])
            .arg("-rsigner")
            .arg(signer.path("ca.crt"))
            .arg("-rkey")
            .arg(signer.path("ca.key"))
            .args(["-CA", "ca.crt"])
            .args(["-nmin", "5"])
            .current_dir(pki.dir())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).expect("creating ocsp.log"))
            .spawn()
            .expect("running openssl ocsp");
        // Not probed with a connection: the responder serves one connection at a time and
        // would wait on the probe.
        wait_for("the OCSP responder to listen", || {
            std::fs::read_to_string(&log)
                .ok()
                .filter(|l| l.contains("waiting for OCSP client connections"))
        });
        Responder { child }
    }
}

impl Drop for Responder {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `openssl s_client -status` to `name` on `port`: its whole output.
fn status(port: u16, name: &str) -> String {
    openssl(
        &[
            "s_client",
            "-connect",
            &format!("127.0.0.1:{port}"),
            "-servername",
            name,
            "-status",
        ],
        b"",
    )
}

/// Waits for `s_client -status` to `name` to show a stapled answer; its output.
fn wait_stapled(s: &Shoal, port: u16, name: &str) -> String {
    let deadline = std::time::Instant::now() + crate::common::WAIT;
    loop {
        let out = status(port, name);
        if out.contains("OCSP Response Status: successful") {
            return out;
        }
        if std::time::Instant::now() > deadline {
            panic!(
                "no answer stapled for {name}:\n{out}\nerror log:\n{}\nstderr:\n{}",
                s.error_log(),
                s.stderr()
            );
        }
    }
}

/// Waits for `needle` in the error log; the log, and the responder's, when it does not come.
fn wait_line(s: &Shoal, pki: &Pki, needle: &str) {
    let deadline = std::time::Instant::now() + crate::common::WAIT;
    while !s.error_log().contains(needle) {
        if std::time::Instant::now() > deadline {
            panic!(
                "no {needle:?} in the error log:\n{}\nresponder:\n{}",
                s.error_log(),
                std::fs::read_to_string(pki.path("ocsp.log")).unwrap_or_default()
            );
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// `ssl_trusted_certificate` of the PKI's CA: where the issuer of its certificates is found.
fn trusted(pki: &Pki) -> String {
    format!("ssl_trusted_certificate {};", pki.path("ca.crt").display())
}

/// A server on `port` named `name` with `cert`'s pair, stapling from the responder.
fn server(pki: &Pki, port: u16, name: &str, cert: &str, extra: &str) -> String {
    format!(
        "server {{ listen 127.0.0.1:{port} ssl; server_name {name}; {} ssl_stapling on; {extra} location / {{ return 200 \"{name}\\n\"; }} }}",
        pki.ssl_lines(cert)
    )
}

#[test]
fn a_good_certificate_is_stapled_a_revoked_one_is_not() {
    let mut pki = Pki::new();
    let rport = free_port();
    let url = format!("http://127.0.0.1:{rport}/");
    let good = pki.issue_with_ocsp("good", &["good.test"], &url);
    let revoked = pki.issue_with_ocsp("revoked", &["revoked.test"], &url);
    pki.write_ocsp_index(&[(good, false, "good"), (revoked, true, "revoked")]);
    let _responder = Responder::start(&pki, rport);
    let port = free_port();
    let verify = format!("ssl_stapling_verify on; {}", trusted(&pki));
    let s = Shoal::start(
        &conf(&format!(
            "{}\n{}",
            server(&pki, port, "good.test", "good", &verify),
            server(&pki, port, "revoked.test", "revoked", &verify)
        )),
        port,
    );
    // The first handshake has no answer yet and starts the fetch; a later one gets it.
    let first = status(port, "good.test");
    assert!(first.contains("CONNECTED"), "{first}");
    let stapled = wait_stapled(&s, port, "good.test");
    assert!(stapled.contains("Cert Status: good"), "{stapled}");
    assert!(
        stapled.contains("Responder Id: CN = shoal e2e CA"),
        "{stapled}"
    );

    // Revoked: nginx's line, no staple, and the handshake still completes.
    let out = status(port, "revoked.test");
    assert!(out.contains("CONNECTED"), "{out}");
    let crt = pki.path("revoked.crt");
    wait_line(
        &s,
        &pki,
        &format!(
            "certificate status \"revoked\" in the OCSP response while requesting certificate status, responder: 127.0.0.1, peer: 127.0.0.1:{rport}, certificate: \"{}\"",
            crt.display()
        ),
    );
    let again = status(port, "revoked.test");
    assert!(again.contains("OCSP response: no response sent"), "{again}");
    assert!(again.contains("CONNECTED"), "{again}");
    let log = s.error_log();
    assert!(
        !log.contains("no resolver defined"),
        "an address needs no resolver:\n{log}"
    );
    assert_eq!(log.matches("[error]").count(), 1, "{log}");
}

#[test]
fn a_responder_that_is_down_costs_the_staple_not_the_handshake() {
    let mut pki = Pki::new();
    // Nothing listens there.
    let rport = free_port();
    let serial = pki.issue_with_ocsp("a", &["a.test"], &format!("http://127.0.0.1:{rport}/ocsp"));
    pki.write_ocsp_index(&[(serial, false, "a")]);
    let port = free_port();
    let s = Shoal::start(
        &conf(&server(&pki, port, "a.test", "a", &trusted(&pki))),
        port,
    );
    let out = status(port, "a.test");
    assert!(out.contains("CONNECTED"), "{out}");
    assert!(out.contains("OCSP response: no response sent"), "{out}");
    let ctx = format!(
        " while requesting certificate status, responder: 127.0.0.1, peer: 127.0.0.1:{rport}, certificate: \"{}\"",
        pki.path("a.crt").display()
    );
    s.wait_log("[error] ", 2);
    let log = s.error_log();
    assert!(
        log.contains(&format!("recv() failed (111: Connection refused){ctx}")),
        "{log}"
    );
    assert!(
        log.contains(&format!(
            "OCSP responder prematurely closed connection{ctx}"
        )),
        "{log}"
    );
    // A failed fetch is retried after 5 minutes, not at every handshake.
    let (status_code, _, body) = {
        let mut c = crate::common::tls::TlsClient::connect(port, &pki, &crate::tls::opts("a.test"))
            .expect("a handshake");
        c.get("a.test", "/").expect("an answer")
    };
    assert_eq!((status_code, body), (200, b"a.test\n".to_vec()));
    assert_eq!(s.error_log().matches("[error] ").count(), 2);
}

#[test]
fn a_responder_host_is_looked_up_with_the_resolver_or_where_it_was_at_start() {
    let mut pki = Pki::new();
    let rport = free_port();
    let url = format!("http://localhost:{rport}/");
    let a = pki.issue_with_ocsp("a", &["a.test"], &url);
    let b = pki.issue_with_ocsp("b", &["b.test"], &url);
    pki.write_ocsp_index(&[(a, false, "a"), (b, false, "b")]);
    let _responder = Responder::start(&pki, rport);
    let dns = Dns::start(&[("localhost", v4("127.0.0.1", 30))]);
    let port = free_port();
    let s = Shoal::start(
        &conf(&format!(
            "{}\n{}",
            server(
                &pki,
                port,
                "a.test",
                "a",
                &format!("resolver {}; {}", dns.addr(), trusted(&pki))
            ),
            server(&pki, port, "b.test", "b", &trusted(&pki))
        )),
        port,
    );
    for name in ["a.test", "b.test"] {
        status(port, name);
        let out = wait_stapled(&s, port, name);
        assert!(out.contains("Cert Status: good"), "{name}: {out}");
    }
    assert!(dns.asked("localhost", A) >= 1, "the resolver was asked");
    let log = s.error_log();
    assert_eq!(
        log.matches(&format!(
            "no resolver defined to resolve localhost while requesting certificate status, responder: localhost, certificate: \"{}\"",
            pki.path("b.crt").display()
        ))
        .count(),
        1,
        "{log}"
    );
    assert!(!log.contains("a.crt\""), "a.test has a resolver:\n{log}");
}

#[test]
fn what_cannot_be_stapled_is_warned_about_at_start() {
    let mut pki = Pki::new();
    pki.issue("plain", &["plain.test"], false);
    pki.issue_with_ocsp("https", &["https.test"], "https://127.0.0.1/");
    pki.issue_with_ocsp("nohost", &["nohost.test"], "http://no-such-host.invalid/");
    let port = free_port();
    let s = Shoal::start(
        &conf(&format!(
            "{}\n{}\n{}",
            server(&pki, port, "plain.test", "plain", ""),
            server(&pki, port, "https.test", "https", &trusted(&pki)),
            server(&pki, port, "nohost.test", "nohost", &trusted(&pki))
        )),
        port,
    );
    // Startup warnings go to the terminal (and the log once it is open), as nginx's.
    let log = s.stderr();
    let name = |n: &str| pki.path(&format!("{n}.crt")).display().to_string();
    for w in [
        format!("\"ssl_stapling\" ignored, issuer certificate not found for certificate \"{}\"", name("plain")),
        format!("\"ssl_stapling\" ignored, invalid URL prefix in OCSP responder \"https://127.0.0.1/\" in the certificate \"{}\"", name("https")),
        format!("\"ssl_stapling\" ignored, host not found in OCSP responder \"no-such-host.invalid/\" in the certificate \"{}\"", name("nohost")),
    ] {
        // Logged after the configuration is read, as nginx logs them: no `in FILE:LINE`.
        assert!(log.contains(&format!("{w}\n")), "{w}\n{log}");
    }
}

#[test]
fn ssl_stapling_verify_refuses_an_answer_signed_by_a_stranger() {
    let mut pki = Pki::new();
    let stranger = Pki::named("a stranger");
    let rport = free_port();
    let url = format!("http://127.0.0.1:{rport}/");
    let a = pki.issue_with_ocsp("a", &["a.test"], &url);
    let b = pki.issue_with_ocsp("b", &["b.test"], &url);
    pki.write_ocsp_index(&[(a, false, "a"), (b, false, "b")]);
    let _responder = Responder::signed_by(&pki, rport, &stranger);
    let port = free_port();
    let verify = format!("ssl_stapling_verify on; {}", trusted(&pki));
    let s = Shoal::start(
        &conf(&format!(
            "{}\n{}",
            server(&pki, port, "a.test", "a", &verify),
            server(&pki, port, "b.test", "b", &trusted(&pki))
        )),
        port,
    );
    // Verified: the signer chains to no trusted certificate (nginx's words); no staple.
    status(port, "a.test");
    wait_line(
        &s,
        &pki,
        &format!(
            "OCSP_basic_verify() failed (SSL: error:13800065:OCSP routines::certificate verify error:Verify error: self-signed certificate) while requesting certificate status, responder: 127.0.0.1, peer: 127.0.0.1:{rport}, certificate: \"{}\"",
            pki.path("a.crt").display()
        ),
    );
    let out = status(port, "a.test");
    assert!(out.contains("OCSP response: no response sent"), "{out}");
    // Not verified (the default): the signature alone is checked, and the answer stapled.
    status(port, "b.test");
    let out = wait_stapled(&s, port, "b.test");
    assert!(out.contains("Responder Id: CN = a stranger"), "{out}");
}
