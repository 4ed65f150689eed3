//! TLS for the end-to-end tests: a CA each test makes ([`Pki`], rcgen), the certificates it
//! issues as files, and a blocking rustls client ([`TlsClient`]) that trusts that CA, chooses
//! its SNI and ALPN, may present a client certificate, and tells which certificate the server
//! showed and what the handshake settled.

use std::fs;
use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rcgen::{
    BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair, KeyUsagePurpose,
    SerialNumber,
};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use rustls::{ClientConfig, ClientConnection, RootCertStore, StreamOwned};

use super::WAIT;

/// A test CA and the certificates it issues, as PEM files in a directory of their own.
pub struct Pki {
    dir: tempfile::TempDir,
    issuer: Issuer<'static, KeyPair>,
    ca_der: CertificateDer<'static>,
    serial: u64,
}

impl Pki {
    pub fn new() -> Pki {
        Pki::named("shoal e2e CA")
    }

    /// A CA with its own name (two CAs of one name are one issuer to OpenSSL's search).
    pub fn named(cn: &str) -> Pki {
        let key = KeyPair::generate().expect("a CA key");
        let mut p = CertificateParams::new(Vec::<String>::new()).expect("CA params");
        p.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        p.distinguished_name.push(DnType::CommonName, cn);
        p.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        let ca = p.self_signed(&key).expect("the CA certificate");
        let dir = tempfile::Builder::new()
            .prefix("shoal-pki-")
            .tempdir()
            .expect("a temporary directory");
        // Workers that dropped privileges read these too.
        use std::os::unix::fs::PermissionsExt;
        fs::set_permissions(dir.path(), fs::Permissions::from_mode(0o755)).expect("chmod");
        fs::write(dir.path().join("ca.crt"), ca.pem()).expect("writing ca.crt");
        // For `openssl ocsp -rkey` (a responder signing as the CA).
        fs::write(dir.path().join("ca.key"), key.serialize_pem()).expect("writing ca.key");
        Pki {
            ca_der: ca.der().clone(),
            dir,
            issuer: Issuer::new(p, key),
            serial: 1000,
        }
    }

    /// A file of this PKI (`ca.crt`, `NAME.crt`, `NAME.key`).
    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// Issues `NAME.crt` and `NAME.key` (ECDSA P-256) for the DNS names (or IP addresses) in
    /// `sans`, with `NAME` as its CN; a client certificate when `client`. Returns its serial.
    pub fn issue(&mut self, name: &str, sans: &[&str], client: bool) -> u64 {
        self.issue_with(name, sans, client, None)
    }

    /// A server certificate as [`Pki::issue`] makes one, whose Authority Information Access
    /// names `ocsp_url` as its OCSP responder. Returns its serial.
    pub fn issue_with_ocsp(&mut self, name: &str, sans: &[&str], ocsp_url: &str) -> u64 {
        self.issue_with(name, sans, false, Some(ocsp_url))
    }

    /// Writes `index.txt`, the certificate database `openssl ocsp -index` answers from: each
    /// (serial, revoked, CN) valid, or revoked an hour ago.
    pub fn write_ocsp_index(&self, entries: &[(u64, bool, &str)]) {
        let stamp = |secs: i64| {
            let out = std::process::Command::new("date")
                .args(["-u", "-d", &format!("@{secs}"), "+%y%m%d%H%M%SZ"])
                .output()
                .expect("running date");
            String::from_utf8_lossy(&out.stdout).trim().to_string()
        };
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .expect("a clock after 1970")
            .as_secs() as i64;
        let mut text = String::new();
        for (serial, revoked, cn) in entries {
            let mut hex = format!("{serial:X}");
            if hex.len() % 2 == 1 {
                hex.insert(0, '0');
            }
            let (flag, when) = if *revoked {
                ("R", stamp(now - 3600))
            } else {
                ("V", String::new())
            };
            text.push_str(&format!(
                "{flag}\t{}\t{when}\t{hex}\tunknown\t/O=Shoal Tests/CN={cn}\n",
                stamp(now + 30 * 86400)
            ));
        }
        fs::write(self.path("index.txt"), text).expect("writing index.txt");
    }

    fn issue_with(&mut self, name: &str, sans: &[&str], client: bool, ocsp: Option<&str>) -> u64 {
        let key = KeyPair::generate().expect("a key");
        let mut p = CertificateParams::new(sans.iter().map(|s| s.to_string()).collect::<Vec<_>>())
            .expect("params");
        p.distinguished_name
            .push(DnType::OrganizationName, "Shoal Tests");
        p.distinguished_name.push(DnType::CommonName, name);
        self.serial += 1;
        p.serial_number = Some(SerialNumber::from(self.serial));
        p.extended_key_usages = vec![if client {
            rcgen::ExtendedKeyUsagePurpose::ClientAuth
        } else {
            rcgen::ExtendedKeyUsagePurpose::ServerAuth
        }];
        if let Some(url) = ocsp {
            // AuthorityInfoAccess: SEQUENCE { SEQUENCE { id-ad-ocsp, [6] URI } }
            let mut access = vec![0x06, 0x08, 0x2b, 0x06, 0x01, 0x05, 0x05, 0x07, 0x30, 0x01];
            access.push(0x86);
            access.push(url.len() as u8);
            access.extend_from_slice(url.as_bytes());
            let mut desc = vec![0x30, access.len() as u8];
            desc.extend(access);
            let mut aia = vec![0x30, desc.len() as u8];
            aia.extend(desc);
            p.custom_extensions
                .push(rcgen::CustomExtension::from_oid_content(
                    &[1, 3, 6, 1, 5, 5, 7, 1, 1],
                    aia,
                ));
        }
        let cert = p.signed_by(&key, &self.issuer).expect("signing");
        fs::write(self.path(&format!("{name}.crt")), cert.pem()).expect("writing a certificate");
        fs::write(self.path(&format!("{name}.key")), key.serialize_pem()).expect("writing a key");
        self.serial
    }

    /// A self-signed client certificate nobody vouches for (`NAME.crt`, `NAME.key`).
    pub fn self_signed(&self, name: &str) {
        let key = KeyPair::generate().expect("a key");
        let mut p = CertificateParams::new(Vec::<String>::new()).expect("params");
        p.distinguished_name.push(DnType::CommonName, name);
        let cert = p.self_signed(&key).expect("self-signing");
        fs::write(self.path(&format!("{name}.crt")), cert.pem()).expect("writing a certificate");
        fs::write(self.path(&format!("{name}.key")), key.serialize_pem()).expect("writing a key");
    }

    /// `ssl_certificate` and `ssl_certificate_key` lines for `NAME`'s files.
    pub fn ssl_lines(&self, name: &str) -> String {
        format!(
            "ssl_certificate {}; ssl_certificate_key {};",
            self.path(&format!("{name}.crt")).display(),
            self.path(&format!("{name}.key")).display()
        )
    }

    fn roots(&self) -> RootCertStore {
        let mut roots = RootCertStore::empty();
        roots.add(self.ca_der.clone()).expect("the CA as a root");
        roots
    }
}

impl Default for Pki {
    fn default() -> Pki {
        Pki::new()
    }
}

/// How a [`TlsClient`] connects.
#[derive(Clone, Default)]
pub struct Opts<'a> {
    /// The SNI name, which the server's certificate must also be valid for; `None`: connect
    /// by address (no SNI), the certificate valid for 127.0.0.1.
    pub sni: Option<&'a str>,
    /// ALPN protocols offered (none by default).
    pub alpn: &'a [&'a str],
    /// `NAME` of a client certificate of the PKI (`NAME.crt`, `NAME.key`).
    pub client_cert: Option<&'a str>,
    /// Only TLSv1.2 (else 1.2 and 1.3).
    pub tls12_only: bool,
    /// Bytes written before the handshake (a PROXY protocol header), in pieces as given.
    pub before: &'a [&'a [u8]],
}

/// A blocking TLS client on one connection (keep-alive).
pub struct TlsClient {
    pub stream: StreamOwned<ClientConnection, TcpStream>,
    /// Bytes read past the last answer.
    pending: Vec<u8>,
}

fn pem_certs(path: &Path) -> Vec<CertificateDer<'static>> {
    let text = fs::read_to_string(path).expect("reading a certificate");
    let mut out = Vec::new();
    for block in text.split("-----BEGIN CERTIFICATE-----").skip(1) {
        let b64: String = block
            .split("-----END CERTIFICATE-----")
            .next()
            .unwrap_or_default()
            .chars()
            .filter(|c| !c.is_whitespace())
            .collect();
        out.push(CertificateDer::from(base64_decode(&b64)));
    }
    out
}

fn pem_key(path: &Path) -> PrivateKeyDer<'static> {
    let text = fs::read_to_string(path).expect("reading a key");
    let b64: String = text
        .lines()
        .filter(|l| !l.starts_with("-----"))
        .collect::<String>();
    PrivateKeyDer::Pkcs8(base64_decode(&b64).into())
}

/// Standard base64 (tests only read what rcgen wrote).
pub fn base64_decode(s: &str) -> Vec<u8> {
    let val = |c: u8| -> u32 {
        match c {
            b'A'..=b'Z' => u32::from(c - b'A'),
            b'a'..=b'z' => u32::from(c - b'a') + 26,
            b'0'..=b'9' => u32::from(c - b'0') + 52,
            b'+' => 62,
            b'/' => 63,
            _ => 0,
        }
    };
    let bytes: Vec<u8> = s.bytes().filter(|&c| c != b'=').collect();
    let mut out = Vec::with_capacity(bytes.len() * 3 / 4);
    for chunk in bytes.chunks(4) {
        let mut n = 0u32;
        for (i, &c) in chunk.iter().enumerate() {
            n |= val(c) << (18 - 6 * i);
        }
        out.push((n >> 16) as u8);
        if chunk.len() > 2 {
            out.push((n >> 8) as u8);
        }
        if chunk.len() > 3 {
            out.push(n as u8);
        }
    }
    out
}

impl TlsClient {
    /// Connects to 127.0.0.1:`port` and completes the handshake.
    pub fn connect(port: u16, pki: &Pki, o: &Opts<'_>) -> io::Result<TlsClient> {
        let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
        let versions: &[&'static rustls::SupportedProtocolVersion] = if o.tls12_only {
            &[&rustls::version::TLS12]
        } else {
            &[&rustls::version::TLS13, &rustls::version::TLS12]
        };
        let b = ClientConfig::builder_with_provider(provider)
            .with_protocol_versions(versions)
            .expect("versions")
            .with_root_certificates(pki.roots());
        let mut config = match o.client_cert {
            Some(name) => b
                .with_client_auth_cert(
                    pem_certs(&pki.path(&format!("{name}.crt"))),
                    pem_key(&pki.path(&format!("{name}.key"))),
                )
                .expect("a client certificate"),
            None => b.with_no_client_auth(),
        };
        config.alpn_protocols = o.alpn.iter().map(|p| p.as_bytes().to_vec()).collect();
        let name: ServerName<'static> = match o.sni {
            Some(n) => ServerName::try_from(n.to_string()).expect("a DNS name"),
            None => ServerName::IpAddress(std::net::Ipv4Addr::LOCALHOST.into()),
        };
        let conn = ClientConnection::new(Arc::new(config), name).map_err(io::Error::other)?;
        let tcp = TcpStream::connect(("127.0.0.1", port))?;
        tcp.set_read_timeout(Some(WAIT))?;
        tcp.set_write_timeout(Some(WAIT))?;
        for piece in o.before {
            (&tcp).write_all(piece)?;
            // Separate segments: the server sees them in separate reads.
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        let mut stream = StreamOwned::new(conn, tcp);
        while stream.conn.is_handshaking() {
            stream.conn.complete_io(&mut stream.sock)?;
        }
        Ok(TlsClient {
            stream,
            pending: Vec::new(),
        })
    }

    /// The CN of the certificate the server showed.
    pub fn server_cn(&self) -> String {
        let der = &self.stream.conn.peer_certificates().expect("a certificate")[0];
        cn_of(der)
    }

    pub fn alpn(&self) -> Option<String> {
        self.stream
            .conn
            .alpn_protocol()
            .map(|p| String::from_utf8_lossy(p).into_owned())
    }

    pub fn protocol(&self) -> Option<rustls::ProtocolVersion> {
        self.stream.conn.protocol_version()
    }

    pub fn send(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.stream.write_all(bytes)?;
        self.stream.flush()
    }

    /// `GET path` (Host `host`) on this connection; the answer's status, head and body.
    pub fn get(&mut self, host: &str, path: &str) -> io::Result<(u16, String, Vec<u8>)> {
        self.send(format!("GET {path} HTTP/1.1\r\nHost: {host}\r\n\r\n").as_bytes())?;
        self.read_answer()
    }

    /// Reads one answer with a `Content-Length` (or one that ends with the connection).
    pub fn read_answer(&mut self) -> io::Result<(u16, String, Vec<u8>)> {
        let mut buf = [0u8; 16384];
        let head_end = loop {
            if let Some(i) = self.pending.windows(4).position(|w| w == b"\r\n\r\n") {
                break i + 4;
            }
            let n = self.stream.read(&mut buf)?;
            if n == 0 {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "closed before a head",
                ));
            }
            self.pending.extend_from_slice(&buf[..n]);
        };
        let head = String::from_utf8_lossy(&self.pending[..head_end]).into_owned();
        let status = head
            .split(' ')
            .nth(1)
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| io::Error::other(format!("no status in {head:?}")))?;
        let length = head.lines().find_map(|l| {
            let (n, v) = l.split_once(':')?;
            n.eq_ignore_ascii_case("content-length")
                .then(|| v.trim().parse::<usize>().ok())
                .flatten()
        });
        let mut rest = self.pending.split_off(head_end);
        self.pending.clear();
        match length {
            Some(len) => {
                while rest.len() < len {
                    let n = self.stream.read(&mut buf)?;
                    if n == 0 {
                        return Err(io::Error::new(
                            io::ErrorKind::UnexpectedEof,
                            "closed in a body",
                        ));
                    }
                    rest.extend_from_slice(&buf[..n]);
                }
                self.pending = rest.split_off(len);
            }
            None => loop {
                match self.stream.read(&mut buf) {
                    Ok(0) => break,
                    Ok(n) => rest.extend_from_slice(&buf[..n]),
                    Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => break,
                    Err(e) => return Err(e),
                }
            },
        }
        Ok((status, head, rest))
    }

    /// Whether the server ended the connection (close_notify or EOF) within `WAIT`.
    pub fn closed_by_peer(&mut self) -> bool {
        let mut buf = [0u8; 256];
        matches!(self.stream.read(&mut buf), Ok(0))
            || matches!(self.stream.read(&mut buf), Err(e) if e.kind() != io::ErrorKind::WouldBlock && e.kind() != io::ErrorKind::TimedOut)
    }
}

/// The CN of a DER certificate (rcgen's, found by its OID's bytes).
pub fn cn_of(der: &[u8]) -> String {
    // OID 2.5.4.3 then a string type and a short length: the last one is the subject's.
    let oid = [0x06, 0x03, 0x55, 0x04, 0x03];
    let mut found = String::new();
    let mut i = 0;
    while let Some(p) = der[i..].windows(oid.len()).position(|w| w == oid) {
        let at = i + p + oid.len();
        if let (Some(&_tag), Some(&len)) = (der.get(at), der.get(at + 1)) {
            if let Some(v) = der.get(at + 2..at + 2 + usize::from(len)) {
                found = String::from_utf8_lossy(v).into_owned();
            }
        }
        i = at;
    }
    found
}
