//! TLS handshakes over real sockets on 127.0.0.1: `shoal_server::tls::accept` as the server
//! (configured from nginx configuration text, as `-t` reads it), rustls and `openssl s_client`
//! as clients, with a CA and certificates each test makes (rcgen). No server binary: the
//! transport that will call `accept` is not wired yet, so each test runs "workers" of its own
//! (threads with a current_thread runtime, as shoal's).
//!
//! A module of the one end-to-end binary (so CI links one), though it drives the library.
//!
//! Here the shared pieces (the test CA `Pki`, the `Worker`s, the rustls `Client`); the tests are
//! in `certificates` (which certificate a handshake gets, and how it is read), `sessions`
//! (resumption, tickets, 0-RTT), `client_certs` (and `openssl s_client`) and `limits`
//! (protocols, ciphers, garbage, records, hellos).

use std::fs;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::Command;
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

mod certificates;
mod client_certs;
mod limits;
mod sessions;

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

// ---------------------------------------------------------------------------------------------
// Configurations

const TIMEOUT: Duration = Duration::from_secs(5);

/// One server `a.test` with `extra` directives.
fn sni_conf_single(p: &Pki, extra: &str) -> String {
    let d = p.dir.path().display();
    format!(
        "server {{ listen 127.0.0.1:8443 ssl; server_name a.test;
           ssl_certificate {d}/a.crt; ssl_certificate_key {d}/a.key; {extra} }}"
    )
}
