//! [`TlsInfo`]: what a TLS connection negotiated, and the value of each of nginx's `$ssl_*`
//! variables computed from it.
//!
//! Values are written as nginx (on OpenSSL) writes them: OpenSSL's names of suites and groups,
//! distinguished names in RFC 2253 form (`CN=x,O=y`, nginx 1.11.6+) or the legacy one
//! (`/O=y/CN=x`), serials in upper-case hex, times as `Nov  6 10:00:00 2026 GMT`. A value is
//! computed when asked for (the certificate is parsed then), so a connection that logs no
//! `$ssl_client_*` pays nothing for them.

use std::fmt::Write as _;
use std::time::{SystemTime, UNIX_EPOCH};

use rustls::pki_types::CertificateDer;

use super::verify::Verdict;

/// What a TLS handshake settled, for the request path and `$ssl_*`.
#[derive(Clone, Debug, Default)]
pub struct TlsInfo {
    /// `TLSv1.2`, `TLSv1.3`.
    pub protocol: &'static str,
    /// The suite's IANA code point.
    pub cipher: u16,
    /// The client's suites, in its order (`$ssl_ciphers`).
    pub client_ciphers: Vec<u16>,
    /// The client's groups (`$ssl_curves`).
    pub client_groups: Vec<u16>,
    /// The key exchange group (`$ssl_curve`); none on a resumed TLSv1.2 session.
    pub group: Option<u16>,
    pub server_name: Option<String>,
    pub session_id: Vec<u8>,
    pub session_reused: bool,
    /// The request arrived as 0-RTT data, before the handshake finished.
    pub early_data: bool,
    pub alpn: Option<Vec<u8>>,
    /// The client's certificate chain, leaf first (empty: none sent).
    pub client_chain: Vec<CertificateDer<'static>>,
    /// The chain's verdict, when one was sent and `ssl_verify_client` is not off.
    pub client_verdict: Option<Verdict>,
    /// The server block SNI chose (an index into `http.servers`).
    pub server: usize,
}

/// OpenSSL's name of a group (`0x001d` → `X25519`); others as nginx prints them, `0x001e`.
pub fn group_name(id: u16) -> String {
    let name = match id {
        0x0017 => "prime256v1",
        0x0018 => "secp384r1",
        0x0019 => "secp521r1",
        0x001d => "X25519",
        0x001e => "X448",
        0x0100 => "ffdhe2048",
        0x0101 => "ffdhe3072",
        0x0102 => "ffdhe4096",
        0x0103 => "ffdhe6144",
        0x0104 => "ffdhe8192",
        0x11ec => "X25519MLKEM768",
        0x11eb => "SecP256r1MLKEM768",
        _ => return format!("0x{id:04x}"),
    };
    name.to_string()
}

/// The names of the variables [`TlsInfo::variable`] knows.
pub const VARIABLES: &[&str] = &[
    "ssl_protocol",
    "ssl_cipher",
    "ssl_ciphers",
    "ssl_curve",
    "ssl_curves",
    "ssl_server_name",
    "ssl_session_id",
    "ssl_session_reused",
    "ssl_early_data",
    "ssl_alpn_protocol",
    "ssl_client_verify",
    "ssl_client_s_dn",
    "ssl_client_i_dn",
    "ssl_client_s_dn_legacy",
    "ssl_client_i_dn_legacy",
    "ssl_client_serial",
    "ssl_client_fingerprint",
    "ssl_client_cert",
    "ssl_client_raw_cert",
    "ssl_client_escaped_cert",
    "ssl_client_v_start",
    "ssl_client_v_end",
    "ssl_client_v_remain",
];

impl TlsInfo {
    /// `$ssl_protocol`.
    pub fn ssl_protocol(&self) -> String {
        self.protocol.to_string()
    }

    /// `$ssl_cipher`: OpenSSL's name of the suite.
    pub fn ssl_cipher(&self) -> String {
        super::ciphers::openssl_name(self.cipher)
            .map(str::to_string)
            .unwrap_or_else(|| format!("0x{:04x}", self.cipher))
    }

    /// `$ssl_ciphers`: the client's suites, `:`-separated, unknown ones in hex.
    pub fn ssl_ciphers(&self) -> String {
        let mut out = String::new();
        for (i, &c) in self.client_ciphers.iter().enumerate() {
            if i > 0 {
                out.push(':');
            }
            match super::ciphers::openssl_name(c) {
                Some(n) => out.push_str(n),
                None => {
                    let _ = write!(out, "0x{c:04x}");
                }
            }
        }
        out
    }

    /// `$ssl_curve`.
    pub fn ssl_curve(&self) -> String {
        self.group.map(group_name).unwrap_or_default()
    }

    /// `$ssl_curves`.
    pub fn ssl_curves(&self) -> String {
        self.client_groups
            .iter()
            .map(|&g| group_name(g))
            .collect::<Vec<_>>()
            .join(":")
    }

    /// `$ssl_server_name`.
    pub fn ssl_server_name(&self) -> String {
        self.server_name.clone().unwrap_or_default()
    }

    /// `$ssl_session_id`: hex.
    pub fn ssl_session_id(&self) -> String {
        hex(&self.session_id, false)
    }

    /// `$ssl_session_reused`: `r` or `.`.
    pub fn ssl_session_reused(&self) -> String {
        if self.session_reused { "r" } else { "." }.to_string()
    }

    /// `$ssl_early_data`: `1` while the request came in 0-RTT data, else empty.
    pub fn ssl_early_data(&self) -> String {
        if self.early_data { "1" } else { "" }.to_string()
    }

    /// `$ssl_alpn_protocol`.
    pub fn ssl_alpn_protocol(&self) -> String {
        self.alpn
            .as_deref()
            .map(|p| String::from_utf8_lossy(p).into_owned())
            .unwrap_or_default()
    }

    /// `$ssl_client_verify`: `NONE`, `SUCCESS` or `FAILED:reason`.
    pub fn ssl_client_verify(&self) -> String {
        match (&self.client_verdict, self.client_chain.is_empty()) {
            (_, true) | (None, _) => "NONE".to_string(),
            (Some(v), _) if v.is_ok() => "SUCCESS".to_string(),
            (Some(v), _) => format!("FAILED:{}", v.reason),
        }
    }

    fn leaf(&self) -> Option<x509_parser::certificate::X509Certificate<'_>> {
        let der = self.client_chain.first()?;
        x509_parser::parse_x509_certificate(der)
            .ok()
            .map(|(_, c)| c)
    }

    /// `$ssl_client_s_dn` (RFC 2253).
    pub fn ssl_client_s_dn(&self) -> String {
        self.leaf()
            .map(|c| dn_rfc2253(c.subject()))
            .unwrap_or_default()
    }

    /// `$ssl_client_i_dn` (RFC 2253).
    pub fn ssl_client_i_dn(&self) -> String {
        self.leaf()
            .map(|c| dn_rfc2253(c.issuer()))
            .unwrap_or_default()
    }

    /// `$ssl_client_s_dn_legacy`.
    pub fn ssl_client_s_dn_legacy(&self) -> String {
        self.leaf()
            .map(|c| dn_legacy(c.subject()))
            .unwrap_or_default()
    }

    /// `$ssl_client_i_dn_legacy`.
    pub fn ssl_client_i_dn_legacy(&self) -> String {
        self.leaf()
            .map(|c| dn_legacy(c.issuer()))
            .unwrap_or_default()
    }

    /// `$ssl_client_serial`: upper-case hex.
    pub fn ssl_client_serial(&self) -> String {
        self.leaf()
            .map(|c| {
                let raw = c.tbs_certificate.raw_serial();
                // DER keeps a leading zero for a positive number whose top bit is set; OpenSSL
                // prints the number, not the encoding.
                let raw = if raw.len() > 1 && raw[0] == 0 {
                    &raw[1..]
                } else {
                    raw
                };
                hex(raw, true)
            })
            .unwrap_or_default()
    }

    /// `$ssl_client_fingerprint`: SHA-1 of the certificate, lower-case hex.
    pub fn ssl_client_fingerprint(&self) -> String {
        let Some(der) = self.client_chain.first() else {
            return String::new();
        };
        let d = aws_lc_rs::digest::digest(&aws_lc_rs::digest::SHA1_FOR_LEGACY_USE_ONLY, der);
        hex(d.as_ref(), false)
    }

    /// `$ssl_client_raw_cert`: the certificate in PEM.
    pub fn ssl_client_raw_cert(&self) -> String {
        self.client_chain
            .first()
            .map(|c| pem(c))
            .unwrap_or_default()
    }

    /// `$ssl_client_cert` (deprecated): the PEM with a tab before every line but the first.
    pub fn ssl_client_cert(&self) -> String {
        let raw = self.ssl_client_raw_cert();
        let trimmed = raw.strip_suffix('\n').unwrap_or(&raw);
        trimmed.replace('\n', "\n\t")
    }

    /// `$ssl_client_escaped_cert`: the PEM, urlencoded.
    pub fn ssl_client_escaped_cert(&self) -> String {
        let raw = self.ssl_client_raw_cert();
        let mut out = String::with_capacity(raw.len() * 3 / 2);
        for b in raw.bytes() {
            if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
                out.push(b as char);
            } else {
                let _ = write!(out, "%{b:02X}");
            }
        }
        out
    }

    /// `$ssl_client_v_start`.
    pub fn ssl_client_v_start(&self) -> String {
        self.leaf()
            .map(|c| openssl_time(c.validity().not_before.timestamp()))
            .unwrap_or_default()
    }

    /// `$ssl_client_v_end`.
    pub fn ssl_client_v_end(&self) -> String {
        self.leaf()
            .map(|c| openssl_time(c.validity().not_after.timestamp()))
            .unwrap_or_default()
    }

    /// `$ssl_client_v_remain`: whole days until the certificate expires (0 once it has).
    pub fn ssl_client_v_remain(&self) -> String {
        self.leaf()
            .map(|c| {
                let now = SystemTime::now()
                    .duration_since(UNIX_EPOCH)
                    .map(|d| d.as_secs() as i64)
                    .unwrap_or(0);
                let left = c.validity().not_after.timestamp() - now;
                (left.max(0) / 86400).to_string()
            })
            .unwrap_or_default()
    }

    /// The value of `$NAME` (without the `$`), if it is one of the ssl module's variables.
    pub fn variable(&self, name: &str) -> Option<String> {
        Some(match name {
            "ssl_protocol" => self.ssl_protocol(),
            "ssl_cipher" => self.ssl_cipher(),
            "ssl_ciphers" => self.ssl_ciphers(),
            "ssl_curve" => self.ssl_curve(),
            "ssl_curves" => self.ssl_curves(),
            "ssl_server_name" => self.ssl_server_name(),
            "ssl_session_id" => self.ssl_session_id(),
            "ssl_session_reused" => self.ssl_session_reused(),
            "ssl_early_data" => self.ssl_early_data(),
            "ssl_alpn_protocol" => self.ssl_alpn_protocol(),
            "ssl_client_verify" => self.ssl_client_verify(),
            "ssl_client_s_dn" => self.ssl_client_s_dn(),
            "ssl_client_i_dn" => self.ssl_client_i_dn(),
            "ssl_client_s_dn_legacy" => self.ssl_client_s_dn_legacy(),
            "ssl_client_i_dn_legacy" => self.ssl_client_i_dn_legacy(),
            "ssl_client_serial" => self.ssl_client_serial(),
            "ssl_client_fingerprint" => self.ssl_client_fingerprint(),
            "ssl_client_cert" => self.ssl_client_cert(),
            "ssl_client_raw_cert" => self.ssl_client_raw_cert(),
            "ssl_client_escaped_cert" => self.ssl_client_escaped_cert(),
            "ssl_client_v_start" => self.ssl_client_v_start(),
            "ssl_client_v_end" => self.ssl_client_v_end(),
            "ssl_client_v_remain" => self.ssl_client_v_remain(),
            _ => return None,
        })
    }
}

fn hex(bytes: &[u8], upper: bool) -> String {
    let mut out = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        let _ = if upper {
            write!(out, "{b:02X}")
        } else {
            write!(out, "{b:02x}")
        };
    }
    out
}

fn pem(der: &[u8]) -> String {
    const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut b64 = String::with_capacity(der.len() * 4 / 3 + 4);
    for chunk in der.chunks(3) {
        let n = chunk.len();
        let v = (u32::from(chunk[0]) << 16)
            | (u32::from(*chunk.get(1).unwrap_or(&0)) << 8)
            | u32::from(*chunk.get(2).unwrap_or(&0));
        for i in 0..4 {
            if i <= n {
                b64.push(ALPHABET[(v >> (18 - 6 * i)) as usize & 63] as char);
            } else {
                b64.push('=');
            }
        }
    }
    let mut out = String::from("-----BEGIN CERTIFICATE-----\n");
    for line in b64.as_bytes().chunks(64) {
        out.push_str(std::str::from_utf8(line).unwrap_or_default());
        out.push('\n');
    }
    out.push_str("-----END CERTIFICATE-----\n");
    out
}

/// OpenSSL's `ASN1_TIME_print`: `Nov  6 10:00:00 2026 GMT`.
fn openssl_time(ts: i64) -> String {
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    let days = ts.div_euclid(86400);
    let secs = ts.rem_euclid(86400);
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{} {:2} {:02}:{:02}:{:02} {} GMT",
        MONTHS[(m - 1) as usize],
        d,
        secs / 3600,
        secs % 3600 / 60,
        secs % 60,
        y
    )
}

/// OpenSSL's short name of an attribute type, or the dotted OID.
fn attr_name(oid: &x509_parser::der_parser::oid::Oid<'_>) -> String {
    let s = oid.to_id_string();
    let short = match s.as_str() {
        "2.5.4.3" => "CN",
        "2.5.4.4" => "SN",
        "2.5.4.5" => "serialNumber",
        "2.5.4.6" => "C",
        "2.5.4.7" => "L",
        "2.5.4.8" => "ST",
        "2.5.4.9" => "street",
        "2.5.4.10" => "O",
        "2.5.4.11" => "OU",
        "2.5.4.12" => "title",
        "2.5.4.13" => "description",
        "2.5.4.15" => "businessCategory",
        "2.5.4.17" => "postalCode",
        "2.5.4.41" => "name",
        "2.5.4.42" => "GN",
        "2.5.4.43" => "initials",
        "2.5.4.44" => "generationQualifier",
        "2.5.4.46" => "dnQualifier",
        "2.5.4.65" => "pseudonym",
        "2.5.4.97" => "organizationIdentifier",
        "1.2.840.113549.1.9.1" => "emailAddress",
        "0.9.2342.19200300.100.1.1" => "UID",
        "0.9.2342.19200300.100.1.25" => "DC",
        "1.3.6.1.4.1.311.60.2.1.1" => "jurisdictionL",
        "1.3.6.1.4.1.311.60.2.1.2" => "jurisdictionST",
        "1.3.6.1.4.1.311.60.2.1.3" => "jurisdictionC",
        _ => return s,
    };
    short.to_string()
}

/// An attribute's value as text, or `None` when it is not a string type.
fn attr_text(a: &x509_parser::x509::AttributeTypeAndValue<'_>) -> Option<String> {
    a.as_str().ok().map(str::to_string)
}

/// RFC 2253 as OpenSSL's `XN_FLAG_RFC2253` writes it: the last RDN first, `,` between RDNs,
/// `+` inside one, `,+"\<>;` escaped, a leading `#`/space and a trailing space escaped,
/// control and non-ASCII bytes as `\XX`; a value of unknown type as `#` and its DER in hex.
pub fn dn_rfc2253(name: &x509_parser::x509::X509Name<'_>) -> String {
    let mut out = String::new();
    let rdns: Vec<_> = name.iter_rdn().collect();
    for (i, rdn) in rdns.iter().rev().enumerate() {
        if i > 0 {
            out.push(',');
        }
        for (j, a) in rdn.iter().enumerate() {
            if j > 0 {
                out.push('+');
            }
            out.push_str(&attr_name(a.attr_type()));
            out.push('=');
            match attr_text(a) {
                Some(v) => escape_2253(&v, &mut out),
                None => {
                    out.push('#');
                    out.push_str(&hex(a.attr_value().as_bytes(), true));
                }
            }
        }
    }
    out
}

fn escape_2253(v: &str, out: &mut String) {
    let bytes = v.as_bytes();
    for (i, &b) in bytes.iter().enumerate() {
        let first = i == 0;
        let last = i + 1 == bytes.len();
        match b {
            b',' | b'+' | b'"' | b'\\' | b'<' | b'>' | b';' => {
                out.push('\\');
                out.push(b as char);
            }
            b'#' if first => out.push_str("\\#"),
            b' ' if first || last => out.push_str("\\ "),
            0..=0x1f | 0x7f..=0xff => {
                let _ = write!(out, "\\{b:02X}");
            }
            _ => out.push(b as char),
        }
    }
}

/// OpenSSL's `X509_NAME_oneline`: `/C=US/O=x/CN=y`, in the certificate's order; bytes outside
/// printable ASCII as `\xHH`.
pub fn dn_legacy(name: &x509_parser::x509::X509Name<'_>) -> String {
    let mut out = String::new();
    for rdn in name.iter_rdn() {
        for a in rdn.iter() {
            out.push('/');
            out.push_str(&attr_name(a.attr_type()));
            out.push('=');
            match attr_text(a) {
                Some(v) => {
                    for b in v.bytes() {
                        if (0x20..0x7f).contains(&b) {
                            out.push(b as char);
                        } else {
                            let _ = write!(out, "\\x{b:02X}");
                        }
                    }
                }
                None => {
                    out.push('#');
                    out.push_str(&hex(a.attr_value().as_bytes(), true));
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cert_with(dn: &[(rcgen::DnType, &str)], serial: &[u8]) -> CertificateDer<'static> {
        let mut p = rcgen::CertificateParams::new(vec!["c.test".into()]).unwrap();
        p.distinguished_name = rcgen::DistinguishedName::new();
        for (t, v) in dn {
            p.distinguished_name.push(t.clone(), *v);
        }
        p.serial_number = Some(rcgen::SerialNumber::from_slice(serial));
        p.not_before = rcgen::date_time_ymd(2026, 1, 5);
        p.not_after = rcgen::date_time_ymd(2126, 11, 26);
        let key = rcgen::KeyPair::generate().unwrap();
        p.self_signed(&key).unwrap().der().clone()
    }

    #[test]
    fn client_certificate_values() {
        let der = cert_with(
            &[
                (rcgen::DnType::CountryName, "US"),
                (rcgen::DnType::OrganizationName, "Acme, Inc"),
                (rcgen::DnType::CommonName, " client#1"),
            ],
            &[0x00, 0x8f, 0x01],
        );
        let info = TlsInfo {
            client_chain: vec![der.clone()],
            client_verdict: Some(Verdict::OK),
            ..Default::default()
        };
        assert_eq!(info.ssl_client_s_dn(), "CN=\\ client#1,O=Acme\\, Inc,C=US");
        assert_eq!(
            info.ssl_client_s_dn_legacy(),
            "/C=US/O=Acme, Inc/CN= client#1"
        );
        assert_eq!(info.ssl_client_i_dn(), info.ssl_client_s_dn());
        assert_eq!(info.ssl_client_serial(), "8F01");
        assert_eq!(info.ssl_client_v_start(), "Jan  5 00:00:00 2026 GMT");
        assert_eq!(info.ssl_client_v_end(), "Nov 26 00:00:00 2126 GMT");
        assert_eq!(info.ssl_client_verify(), "SUCCESS");
        assert!(info.ssl_client_v_remain().parse::<u64>().unwrap() > 30000);
        let raw = info.ssl_client_raw_cert();
        assert!(raw.starts_with("-----BEGIN CERTIFICATE-----\n"));
        assert!(raw.lines().all(|l| l.len() <= 64));
        assert!(info.ssl_client_cert().contains("\n\t"));
        assert!(info
            .ssl_client_escaped_cert()
            .starts_with("-----BEGIN%20CERTIFICATE-----%0A"));
        assert_eq!(info.ssl_client_fingerprint().len(), 40);
        let failed = TlsInfo {
            client_verdict: Some(Verdict {
                code: 10,
                reason: "certificate has expired",
            }),
            ..info.clone()
        };
        assert_eq!(failed.ssl_client_verify(), "FAILED:certificate has expired");
        assert_eq!(TlsInfo::default().ssl_client_verify(), "NONE");
        assert_eq!(TlsInfo::default().ssl_client_s_dn(), "");
    }

    #[test]
    fn names_and_lists() {
        let info = TlsInfo {
            protocol: "TLSv1.3",
            cipher: 0x1301,
            client_ciphers: vec![0x1301, 0xc02f, 0x0a0a],
            client_groups: vec![0x001d, 0x0017, 0x11ec, 0x2a2a],
            group: Some(0x001d),
            session_id: vec![0xab, 0x01],
            ..Default::default()
        };
        assert_eq!(info.ssl_cipher(), "TLS_AES_128_GCM_SHA256");
        assert_eq!(
            info.ssl_ciphers(),
            "TLS_AES_128_GCM_SHA256:ECDHE-RSA-AES128-GCM-SHA256:0x0a0a"
        );
        assert_eq!(info.ssl_curves(), "X25519:prime256v1:X25519MLKEM768:0x2a2a");
        assert_eq!(info.ssl_curve(), "X25519");
        assert_eq!(info.ssl_session_id(), "ab01");
        assert_eq!(info.ssl_session_reused(), ".");
        assert_eq!(info.variable("ssl_protocol").as_deref(), Some("TLSv1.3"));
        assert_eq!(info.variable("ssl_nope"), None);
    }

    #[test]
    fn times() {
        assert_eq!(openssl_time(0), "Jan  1 00:00:00 1970 GMT");
        assert_eq!(openssl_time(951_782_400), "Feb 29 00:00:00 2000 GMT");
    }
}
