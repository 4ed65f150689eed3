//! TLS handshakes over real sockets on 127.0.0.1: `shoal_server::tls::accept` as the server
//! (configured from nginx configuration text, as `-t` reads it), rustls and `openssl s_client`
//! as clients, with a CA and certificates each test makes (rcgen). No server binary: the
//! transport that will call `accept` is not wired yet, so each test runs "workers" of its own
//! (threads with a current_thread runtime, as shoal's).
//!
//! A module of the one end-to-end binary (so CI links one), though it drives the library.

use std::fs;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{mpsc, Arc, Mutex};
use std::time::Duration;

use rcgen::{
    BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair, KeyUsagePurpose,
    SerialNumber,
};
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::{ClientConfig, DigitallySignedStruct, SignatureScheme};
use shoal_server::tls::{self, Accepted, AddrTls, TlsError, TlsInfo};

// ---------------------------------------------------------------------------------------------
// Certificates

/// A test CA and the files of the certificates it issues, in a temporary directory.
struct Pki {
    dir: tempfile::TempDir,
    issuer: Issuer<'static, KeyPair>,
    serial: u64,
}

impl Pki {
    fn new() -> Pki {
        let key = KeyPair::generate().unwrap();
        let mut p = CertificateParams::new(Vec::<String>::new()).unwrap();
        p.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        p.distinguished_name
            .push(DnType::CommonName, "shoal test CA");
        p.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        let ca = p.self_signed(&key).unwrap();
        let dir = tempfile::tempdir().unwrap();
        fs::write(dir.path().join("ca.crt"), ca.pem()).unwrap();
        Pki {
            dir,
            issuer: Issuer::new(p, key),
            serial: 100,
        }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// Issues `NAME.crt`/`NAME.key` for DNS names `sans` (server) or as a client certificate;
    /// `rsa` picks RSA-2048 over ECDSA P-256. Returns the serial.
    fn issue(&mut self, name: &str, sans: &[&str], rsa: bool, client: bool) -> u64 {
        let key = if rsa {
            KeyPair::generate_for(&rcgen::PKCS_RSA_SHA256).unwrap()
        } else {
            KeyPair::generate().unwrap()
        };
        let mut p =
            CertificateParams::new(sans.iter().map(|s| s.to_string()).collect::<Vec<_>>()).unwrap();
        p.distinguished_name
            .push(DnType::OrganizationName, "Shoal Tests");
        p.distinguished_name.push(DnType::CommonName, name);
        self.serial += 1;
        p.serial_number = Some(SerialNumber::from(self.serial));
        if client {
            p.extended_key_usages = vec![rcgen::ExtendedKeyUsagePurpose::ClientAuth];
        }
        let cert = p.signed_by(&key, &self.issuer).unwrap();
        fs::write(self.path(&format!("{name}.crt")), cert.pem()).unwrap();
        fs::write(self.path(&format!("{name}.key")), key.serialize_pem()).unwrap();
        self.serial
    }

    /// A self-signed client certificate nobody vouches for.
    fn self_signed_client(&self, name: &str) {
        let key = KeyPair::generate().unwrap();
        let mut p = CertificateParams::new(Vec::<String>::new()).unwrap();
        p.distinguished_name.push(DnType::CommonName, name);
        let cert = p.self_signed(&key).unwrap();
        fs::write(self.path(&format!("{name}.crt")), cert.pem()).unwrap();
        fs::write(self.path(&format!("{name}.key")), key.serialize_pem()).unwrap();
    }

    /// `crl.pem` revoking `serials`.
    fn crl(&self, serials: &[u64]) {
        let crl = rcgen::CertificateRevocationListParams {
            this_update: rcgen::date_time_ymd(2020, 1, 1),
            next_update: rcgen::date_time_ymd(2100, 1, 1),
            crl_number: SerialNumber::from(1u64),
            issuing_distribution_point: None,
            revoked_certs: serials
                .iter()
                .map(|&s| rcgen::RevokedCertParams {
                    serial_number: SerialNumber::from(s),
                    revocation_time: rcgen::date_time_ymd(2021, 1, 1),
                    reason_code: Some(rcgen::RevocationReason::KeyCompromise),
                    invalidity_date: None,
                })
                .collect(),
            key_identifier_method: rcgen::KeyIdMethod::Sha256,
        }
        .signed_by(&self.issuer)
        .unwrap();
        fs::write(self.path("crl.pem"), crl.pem().unwrap()).unwrap();
    }
}

// ---------------------------------------------------------------------------------------------
// The server side

/// Reads `http { ... }` text as shoal reads a configuration, and returns the TLS context of
/// `127.0.0.1:8443` (the address is only a key here: workers bind ports of their own).
fn tls_context(dir: &Path, http: &str) -> Arc<AddrTls> {
    let file = dir.join("shoal.conf");
    // nginx 1.22 offers TLSv1.2 only unless told: these tests are about TLSv1.3 too.
    let protocols = if http.contains("ssl_protocols") {
        ""
    } else {
        "ssl_protocols TLSv1.2 TLSv1.3;"
    };
    fs::write(
        &file,
        format!("events {{}}\nhttp {{\naccess_log off;\n{protocols}\n{http}\n}}\n"),
    )
    .unwrap();
    let config = shoal_server::config::load(&shoal_server::config::Source {
        file: &file,
        builtin: None,
        prefix: dir,
        globals: None,
    })
    .unwrap_or_else(|e| panic!("configuration: {}", e.message));
    let http = config.http.expect("an http block");
    http.ssl
        .addrs
        .get(&shoal_server::listen::ListenAddr::Inet(
            "127.0.0.1:8443".parse().unwrap(),
        ))
        .expect("127.0.0.1:8443 speaks TLS")
        .clone()
}

/// What a worker made of one connection.
#[derive(Debug)]
enum Outcome {
    Tls(Box<TlsInfo>),
    Plain,
    Failed(TlsError),
    TimedOut,
}

/// A worker thread serving `conns` connections, one after the other: a handshake bounded by
/// `timeout`, then one request answered with a summary of the connection.
struct Worker {
    addr: SocketAddr,
    outcomes: mpsc::Receiver<Outcome>,
}

impl Worker {
    fn spawn(tls: Arc<AddrTls>, conns: usize, timeout: Duration) -> Worker {
        let (addr_tx, addr_rx) = mpsc::channel();
        let (tx, outcomes) = mpsc::channel();
        std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async move {
                let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
                addr_tx.send(listener.local_addr().unwrap()).unwrap();
                for _ in 0..conns {
                    let (tcp, peer) = listener.accept().await.unwrap();
                    let outcome =
                        match tokio::time::timeout(timeout, tls::accept(tcp, &tls, Some(peer)))
                            .await
                        {
                            Err(_) => Outcome::TimedOut,
                            Ok(Err(e)) => Outcome::Failed(e),
                            Ok(Ok(Accepted::PlainHttp(_))) => Outcome::Plain,
                            Ok(Ok(Accepted::Tls(mut s))) => {
                                answer(&mut s).await;
                                Outcome::Tls(Box::new(s.info().clone()))
                            }
                        };
                    if tx.send(outcome).is_err() {
                        return;
                    }
                }
            });
        });
        Worker {
            addr: addr_rx.recv().unwrap(),
            outcomes,
        }
    }

    fn next(&self) -> Outcome {
        self.outcomes
            .recv_timeout(Duration::from_secs(10))
            .expect("the worker reports every connection")
    }

    fn next_tls(&self) -> TlsInfo {
        match self.next() {
            Outcome::Tls(i) => *i,
            other => panic!("expected a handshake, got {other:?}"),
        }
    }

    fn next_error(&self) -> TlsError {
        match self.next() {
            Outcome::Failed(e) => e,
            other => panic!("expected a failed handshake, got {other:?}"),
        }
    }
}

/// Reads a request head and answers with the connection's summary.
async fn answer(s: &mut tls::TlsStream) {
    use tokio::io::AsyncReadExt;
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    while !got.windows(4).any(|w| w == b"\r\n\r\n") {
        match s.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => got.extend_from_slice(&buf[..n]),
        }
    }
    let i = s.info();
    let body = format!(
        "server={} protocol={} cipher={} reused={} verify={} s_dn={} alpn={} sni={}\n",
        i.server,
        i.ssl_protocol(),
        i.ssl_cipher(),
        i.ssl_session_reused(),
        i.ssl_client_verify(),
        i.ssl_client_s_dn(),
        i.ssl_alpn_protocol(),
        i.ssl_server_name(),
    );
    let head = format!(
        "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    let _ = s
        .write_all_vectored(&[head.as_bytes(), body.as_bytes()])
        .await;
    let _ = s.close_notify().await;
}

// ---------------------------------------------------------------------------------------------
// The rustls client

/// Accepts any server certificate (the tests look at which one came), remembers it, and offers
/// only `schemes` (to make the server choose between RSA and ECDSA).
#[derive(Debug)]
struct Recorder {
    seen: Mutex<Option<CertificateDer<'static>>>,
    /// The stapled OCSP response of the last handshake.
    ocsp: Mutex<Vec<u8>>,
    schemes: Vec<SignatureScheme>,
    algs: rustls::crypto::WebPkiSupportedAlgorithms,
}

impl ServerCertVerifier for Recorder {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        _: &[CertificateDer<'_>],
        _: &ServerName<'_>,
        ocsp: &[u8],
        _: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        *self.seen.lock().unwrap() = Some(end_entity.clone().into_owned());
        *self.ocsp.lock().unwrap() = ocsp.to_vec();
        Ok(ServerCertVerified::assertion())
    }
    fn verify_tls12_signature(
        &self,
        m: &[u8],
        c: &CertificateDer<'_>,
        d: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(m, c, d, &self.algs)
    }
    fn verify_tls13_signature(
        &self,
        m: &[u8],
        c: &CertificateDer<'_>,
        d: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(m, c, d, &self.algs)
    }
    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.schemes.clone()
    }
}

struct Client {
    config: Arc<ClientConfig>,
    recorder: Arc<Recorder>,
}

#[derive(Default)]
struct ClientOpts<'a> {
    versions: Option<&'a [&'static rustls::SupportedProtocolVersion]>,
    schemes: Option<Vec<SignatureScheme>>,
    alpn: Option<Vec<&'a str>>,
    /// Client certificate files (cert, key).
    cert: Option<(PathBuf, PathBuf)>,
}

impl Client {
    fn new(o: ClientOpts<'_>) -> Client {
        let provider = rustls::crypto::aws_lc_rs::default_provider();
        let algs = provider.signature_verification_algorithms;
        let recorder = Arc::new(Recorder {
            seen: Mutex::new(None),
            ocsp: Mutex::new(Vec::new()),
            schemes: o.schemes.unwrap_or_else(|| algs.supported_schemes()),
            algs,
        });
        let b = ClientConfig::builder_with_provider(Arc::new(provider))
            .with_protocol_versions(
                o.versions
                    .unwrap_or(&[&rustls::version::TLS13, &rustls::version::TLS12]),
            )
            .unwrap()
            .dangerous()
            .with_custom_certificate_verifier(recorder.clone());
        let mut config = match o.cert {
            Some((c, k)) => {
                let chain = vec![CertificateDer::from(pem_der(
                    &fs::read_to_string(c).unwrap(),
                ))];
                let key = PrivateKeyDer::Pkcs8(pem_der(&fs::read_to_string(k).unwrap()).into());
                b.with_client_auth_cert(chain, key).unwrap()
            }
            None => b.with_no_client_auth(),
        };
        config.alpn_protocols = o
            .alpn
            .unwrap_or(vec!["http/1.1"])
            .iter()
            .map(|p| p.as_bytes().to_vec())
            .collect();
        Client {
            config: Arc::new(config),
            recorder,
        }
    }

    /// One request; the body on success. `sni` "" connects by address (no SNI).
    fn get(&self, addr: SocketAddr, sni: &str) -> Result<String, String> {
        let name = if sni.is_empty() {
            ServerName::IpAddress(addr.ip().into())
        } else {
            ServerName::try_from(sni.to_string()).unwrap()
        };
        let conn = rustls::ClientConnection::new(self.config.clone(), name).unwrap();
        let tcp = TcpStream::connect(addr).unwrap();
        tcp.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let mut s = rustls::StreamOwned::new(conn, tcp);
        s.write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
            .map_err(|e| e.to_string())?;
        let mut out = String::new();
        s.read_to_string(&mut out).map_err(|e| e.to_string())?;
        Ok(out.split("\r\n\r\n").nth(1).unwrap_or_default().to_string())
    }

    /// The CN of the certificate the server presented last.
    fn seen_cn(&self) -> String {
        let der = self.recorder.seen.lock().unwrap().clone().unwrap();
        let (_, c) = x509_parser::parse_x509_certificate(&der).unwrap();
        let cn = c
            .subject()
            .iter_common_name()
            .next()
            .and_then(|a| a.as_str().ok())
            .unwrap_or_default()
            .to_string();
        cn
    }

    fn seen_key_is_rsa(&self) -> bool {
        let der = self.recorder.seen.lock().unwrap().clone().unwrap();
        let (_, c) = x509_parser::parse_x509_certificate(&der).unwrap();
        c.public_key().algorithm.algorithm.to_id_string() == "1.2.840.113549.1.1.1"
    }
}

fn pem_der(pem: &str) -> Vec<u8> {
    let b64: String = pem.lines().filter(|l| !l.starts_with("-----")).collect();
    let mut out = Vec::new();
    let (mut acc, mut bits) = (0u32, 0);
    for c in b64.bytes() {
        let v = match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' => 62,
            b'/' => 63,
            _ => continue,
        };
        acc = (acc << 6) | u32::from(v);
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
        }
    }
    out
}

// ---------------------------------------------------------------------------------------------
// openssl s_client

fn have_openssl() -> bool {
    Command::new("openssl")
        .arg("version")
        .output()
        .is_ok_and(|o| o.status.success())
}

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

// ---------------------------------------------------------------------------------------------
// Tests

const TIMEOUT: Duration = Duration::from_secs(5);

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

/// One server `a.test` with `extra` directives.
fn sni_conf_single(p: &Pki, extra: &str) -> String {
    let d = p.dir.path().display();
    format!(
        "server {{ listen 127.0.0.1:8443 ssl; server_name a.test;
           ssl_certificate {d}/a.crt; ssl_certificate_key {d}/a.key; {extra} }}"
    )
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
