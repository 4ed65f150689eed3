//! OCSP (RFC 6960) as nginx's stapling uses it: the request for one certificate (a SHA-1
//! `CertID`, as OpenSSL's `OCSP_cert_to_id` makes it), and the checks of a responder's answer
//! that nginx runs before it staples one (`ngx_ssl_ocsp_verify`): a successful basic response,
//! signed by a signer it can find, trusted as `ssl_stapling_verify` asks, with a status for the
//! certificate that is still current.
//!
//! Pure: bytes in, verdicts out; no I/O, nothing kept. Error texts are nginx's first words
//! with an OpenSSL-like detail, as `certs` writes them. A hostile answer is just bytes that
//! fail a check: every read is bounded by the input.

use std::time::{SystemTime, UNIX_EPOCH};

use rustls::pki_types::CertificateDer;

use crate::error::Error;
const SEQUENCE: u8 = 0x30;
const OID: u8 = 0x06;
const OCTET_STRING: u8 = 0x04;
const INTEGER: u8 = 0x02;
const ENUMERATED: u8 = 0x0a;
const BIT_STRING: u8 = 0x03;
const GENERALIZED_TIME: u8 = 0x18;

/// id-sha1 and id-sha256, the hashes a responder may name a certificate by.
const SHA1_OID: &[u8] = &[0x2b, 0x0e, 0x03, 0x02, 0x1a];
const SHA256_OID: &[u8] = &[0x60, 0x86, 0x48, 0x01, 0x65, 0x03, 0x04, 0x02, 0x01];
/// id-pkix-ocsp-basic.
const BASIC_OID: &[u8] = &[0x2b, 0x06, 0x01, 0x05, 0x05, 0x07, 0x30, 0x01, 0x01];
/// id-kp-OCSPSigning, the purpose a delegated responder's certificate must have.
const OCSP_SIGNING_OID: &[u8] = &[0x2b, 0x06, 0x01, 0x05, 0x05, 0x07, 0x03, 0x09];

/// How far a responder's clock may be from ours (OpenSSL's `OCSP_check_validity(..., 300, -1)`).
const SKEW: i64 = 300;

/// One DER element: its tag, its contents, and all its bytes.
#[derive(Clone, Copy, Debug)]
struct Tlv<'a> {
    tag: u8,
    value: &'a [u8],
    raw: &'a [u8],
}

/// The first element of `input` and what follows it (short-form tags; lengths up to 4 bytes).
fn tlv(input: &[u8]) -> Option<(Tlv<'_>, &[u8])> {
    let (&tag, rest) = input.split_first()?;
    let (&first, rest) = rest.split_first()?;
    let (len, rest) = if first < 0x80 {
        (usize::from(first), rest)
    } else {
        let n = usize::from(first & 0x7f);
        if n == 0 || n > 4 || rest.len() < n {
            return None;
        }
        let len = rest[..n]
            .iter()
            .fold(0usize, |a, &b| (a << 8) | usize::from(b));
        (len, &rest[n..])
    };
    if rest.len() < len {
        return None;
    }
    let header = input.len() - rest.len();
    Some((
        Tlv {
            tag,
            value: &rest[..len],
            raw: &input[..header + len],
        },
        &rest[len..],
    ))
}

/// The elements inside a constructed value, in order.
fn children(value: &[u8]) -> Option<Vec<Tlv<'_>>> {
    let mut out = Vec::new();
    let mut rest = value;
    while !rest.is_empty() {
        let (t, r) = tlv(rest)?;
        out.push(t);
        rest = r;
    }
    Some(out)
}

/// The one element `input` holds, of tag `tag`.
fn expect(input: &[u8], tag: u8) -> Option<Tlv<'_>> {
    let (t, rest) = tlv(input)?;
    (t.tag == tag && rest.is_empty()).then_some(t)
}

fn wrap(tag: u8, contents: &[u8]) -> Vec<u8> {
    let len = contents.len();
    let mut out = vec![tag];
    if len < 0x80 {
        out.push(len as u8);
    } else {
        let bytes = (len as u32).to_be_bytes();
        let skip = bytes.iter().take_while(|&&b| b == 0).count();
        out.push(0x80 | (4 - skip) as u8);
        out.extend_from_slice(&bytes[skip..]);
    }
    out.extend_from_slice(contents);
    out
}

fn digest(oid: &[u8], data: &[u8]) -> Option<Vec<u8>> {
    use aws_lc_rs::digest;
    let alg = if oid == SHA1_OID {
        &digest::SHA1_FOR_LEGACY_USE_ONLY
    } else if oid == SHA256_OID {
        &digest::SHA256
    } else {
        return None;
    };
    Some(digest::digest(alg, data).as_ref().to_vec())
}

/// The parts of a certificate OCSP looks at.
struct Cert<'a> {
    tbs: &'a [u8],
    sig_alg: &'a [u8],
    signature: &'a [u8],
    serial: &'a [u8],
    issuer: &'a [u8],
    subject: &'a [u8],
    /// The SubjectPublicKeyInfo's algorithm (contents) and key bits.
    key_alg: &'a [u8],
    key: &'a [u8],
    extensions: Option<&'a [u8]>,
}

fn cert(der: &[u8]) -> Option<Cert<'_>> {
    let top = children(expect(der, SEQUENCE)?.value)?;
    let [tbs, sig_alg, sig] = top.as_slice() else {
        return None;
    };
    let fields = children(tbs.value)?;
    // An explicit version ([0]) comes first when present.
    let at = usize::from(fields.first()?.tag == 0xa0);
    let serial = fields.get(at)?;
    let issuer = fields.get(at + 2)?;
    let subject = fields.get(at + 4)?;
    let spki = children(fields.get(at + 5)?.value)?;
    let (alg, key) = (spki.first()?, spki.get(1)?);
    let extensions = fields
        .iter()
        .skip(at + 6)
        .find(|f| f.tag == 0xa3)
        .map(|f| f.value);
    Some(Cert {
        tbs: tbs.raw,
        sig_alg: sig_alg.value,
        signature: bit_string(sig)?,
        serial: serial.value,
        issuer: issuer.raw,
        subject: subject.raw,
        key_alg: alg.value,
        key: bit_string(key)?,
        extensions,
    })
}

fn bit_string<'a>(t: &Tlv<'a>) -> Option<&'a [u8]> {
    if t.tag != BIT_STRING {
        return None;
    }
    match t.value.split_first() {
        Some((0, bits)) => Some(bits),
        _ => None,
    }
}

/// Whether a certificate says it may sign OCSP answers (extended key usage OCSPSigning).
fn ocsp_signing(c: &Cert<'_>) -> bool {
    let eku_oid = [0x55, 0x1d, 0x25];
    let Some(exts) = c.extensions.and_then(|e| expect(e, SEQUENCE)) else {
        return false;
    };
    for ext in children(exts.value).unwrap_or_default() {
        let parts = children(ext.value).unwrap_or_default();
        if parts.first().map(|p| p.value) != Some(&eku_oid[..]) {
            continue;
        }
        let Some(value) = parts.last().filter(|p| p.tag == OCTET_STRING) else {
            continue;
        };
        let purposes = expect(value.value, SEQUENCE)
            .and_then(|s| children(s.value))
            .unwrap_or_default();
        return purposes.iter().any(|p| p.value == OCSP_SIGNING_OID);
    }
    false
}

/// Whether `signature` over `message` is `signer`'s, for the algorithm `sig_alg` names.
fn signed_by(message: &[u8], sig_alg: &[u8], signature: &[u8], signer: &Cert<'_>) -> bool {
    let algs = rustls::crypto::aws_lc_rs::default_provider().signature_verification_algorithms;
    algs.all.iter().any(|a| {
        a.signature_alg_id().as_ref() == sig_alg
            && a.public_key_alg_id().as_ref() == signer.key_alg
            && a.verify_signature(signer.key, message, signature).is_ok()
    })
}

/// The certificate an OCSP request asks about: issuer name and key hashes (SHA-1) and serial.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CertId {
    name_hash: Vec<u8>,
    key_hash: Vec<u8>,
    serial: Vec<u8>,
    /// The issuer's subject and key, to hash as a response's CertID says.
    issuer_name: Vec<u8>,
    issuer_key: Vec<u8>,
}

impl CertId {
    /// The id of `leaf` issued by `issuer` (`None`: a certificate that does not parse).
    pub fn new(leaf: &[u8], issuer: &[u8]) -> Option<CertId> {
        let (l, i) = (cert(leaf)?, cert(issuer)?);
        Some(CertId {
            name_hash: digest(SHA1_OID, i.subject)?,
            key_hash: digest(SHA1_OID, i.key)?,
            serial: l.serial.to_vec(),
            issuer_name: i.subject.to_vec(),
            issuer_key: i.key.to_vec(),
        })
    }

    /// The DER OCSPRequest for this certificate alone (no nonce, unsigned), as nginx sends it.
    pub fn request(&self) -> Vec<u8> {
        let alg = wrap(SEQUENCE, &[wrap(OID, SHA1_OID), vec![0x05, 0x00]].concat());
        let id = wrap(
            SEQUENCE,
            &[
                alg,
                wrap(OCTET_STRING, &self.name_hash),
                wrap(OCTET_STRING, &self.key_hash),
                wrap(INTEGER, &self.serial),
            ]
            .concat(),
        );
        let request = wrap(SEQUENCE, &id);
        let list = wrap(SEQUENCE, &request);
        wrap(SEQUENCE, &wrap(SEQUENCE, &list))
    }

    /// Whether a response's CertID (a SEQUENCE's contents) names this certificate.
    fn matches(&self, id: &[u8]) -> bool {
        let Some(parts) = children(id) else {
            return false;
        };
        let [alg, name, key, serial] = parts.as_slice() else {
            return false;
        };
        let Some(oid) = children(alg.value)
            .and_then(|a| a.first().copied())
            .filter(|o| o.tag == OID)
        else {
            return false;
        };
        serial.value == self.serial.as_slice()
            && digest(oid.value, &self.issuer_name).as_deref() == Some(name.value)
            && digest(oid.value, &self.issuer_key).as_deref() == Some(key.value)
    }

    /// Whether `c` is the issuer this id names (OpenSSL's `ocsp_match_issuerid`).
    fn issued_by(&self, c: &Cert<'_>) -> bool {
        c.subject == self.issuer_name.as_slice() && c.key == self.issuer_key.as_slice()
    }
}

/// A certificate's status in an answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Status {
    Good,
    Revoked,
    Unknown,
}

impl Status {
    /// OpenSSL's `OCSP_cert_status_str`.
    pub fn name(self) -> &'static str {
        match self {
            Status::Good => "good",
            Status::Revoked => "revoked",
            Status::Unknown => "unknown",
        }
    }
}

/// A checked answer: the certificate's status, and until when it holds (unix seconds;
/// `None`: the responder gave no nextUpdate).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Checked {
    pub status: Status,
    pub next_update: Option<i64>,
}

/// What a signer is trusted by.
pub struct Trust<'a> {
    /// The server's chain after its certificate (nginx's extra chain certificates): a signer
    /// among them is trusted as it is (`OCSP_TRUSTOTHER`).
    pub chain: &'a [CertificateDer<'static>],
    /// `ssl_trusted_certificate` (and `ssl_client_certificate`): the anchors a signer must chain
    /// to otherwise.
    pub trusted: &'a [CertificateDer<'static>],
    /// `ssl_stapling_verify`: off checks the signature only (`OCSP_NOVERIFY`).
    pub verify: bool,
}

/// nginx's `OCSP_basic_verify() failed` with OpenSSL's reason.
fn basic_verify_failed(reason: &str) -> Error {
    Error::tls(format!("OCSP_basic_verify() failed (SSL: {reason})"))
}

/// Checks a responder's answer `der` about `id` at `now` (unix seconds), as nginx does before
/// it staples it; `Err` is the line nginx logs.
pub fn check(der: &[u8], id: &CertId, trust: &Trust<'_>, now: i64) -> Result<Checked, Error> {
    let bad = || {
        Error::tls(
            "d2i_OCSP_RESPONSE() failed (SSL: error:0680007B:asn1 encoding routines::header too long)",
        )
    };
    let top = children(expect(der, SEQUENCE).ok_or_else(bad)?.value).ok_or_else(bad)?;
    let status = top
        .first()
        .filter(|s| s.tag == ENUMERATED)
        .ok_or_else(bad)?;
    let code = match status.value {
        [n] => *n,
        _ => return Err(bad()),
    };
    if code != 0 {
        let name = match code {
            1 => "malformedrequest",
            2 => "internalerror",
            3 => "trylater",
            5 => "sigrequired",
            6 => "unauthorized",
            _ => "(UNKNOWN)",
        };
        return Err(Error::tls(format!(
            "OCSP response not successful ({code}: {name})"
        )));
    }
    let no_basic = || {
        Error::tls(
            "OCSP_response_get1_basic() failed (SSL: error:13800069:OCSP routines::not basic response)",
        )
    };
    let bytes = top.get(1).filter(|b| b.tag == 0xa0).ok_or_else(no_basic)?;
    let bytes =
        children(expect(bytes.value, SEQUENCE).ok_or_else(no_basic)?.value).ok_or_else(no_basic)?;
    let [kind, body] = bytes.as_slice() else {
        return Err(no_basic());
    };
    if kind.tag != OID || kind.value != BASIC_OID || body.tag != OCTET_STRING {
        return Err(no_basic());
    }
    let basic = children(expect(body.value, SEQUENCE).ok_or_else(bad)?.value).ok_or_else(bad)?;
    let (tbs, sig_alg, sig) = match basic.as_slice() {
        [t, a, s, ..] if t.tag == SEQUENCE && a.tag == SEQUENCE => (t, a, s),
        _ => return Err(bad()),
    };
    let signature = bit_string(sig).ok_or_else(bad)?;
    let included: Vec<&[u8]> = basic
        .get(3)
        .filter(|c| c.tag == 0xa0)
        .and_then(|c| expect(c.value, SEQUENCE))
        .and_then(|s| children(s.value))
        .unwrap_or_default()
        .iter()
        .map(|c| c.raw)
        .collect();
    let data = children(tbs.value).ok_or_else(bad)?;
    let at = usize::from(data.first().ok_or_else(bad)?.tag == 0xa0);
    let responder = data.get(at).ok_or_else(bad)?;
    let responses = data
        .get(at + 2)
        .filter(|r| r.tag == SEQUENCE)
        .ok_or_else(bad)?;

    // The signer: named by the responder id, looked for in the chain, then in the answer.
    let names_signer = |c: &Cert<'_>| match responder.tag {
        0xa1 => c.subject == responder.value,
        0xa2 => expect(responder.value, OCTET_STRING)
            .is_some_and(|h| digest(SHA1_OID, c.key).as_deref() == Some(h.value)),
        _ => false,
    };
    let from_chain = trust
        .chain
        .iter()
        .map(|c| c.as_ref())
        .find(|c| cert(c).is_some_and(|c| names_signer(&c)));
    let signer_der = from_chain
        .or_else(|| {
            included
                .iter()
                .copied()
                .find(|c| cert(c).is_some_and(|c| names_signer(&c)))
        })
        .ok_or_else(|| {
            basic_verify_failed("error:13800076:OCSP routines::signer certificate not found")
        })?;
    let signer = cert(signer_der).ok_or_else(bad)?;
    if !signed_by(tbs.raw, sig_alg.value, signature, &signer) {
        return Err(basic_verify_failed(
            "error:13800075:OCSP routines::signature failure",
        ));
    }
    // `ssl_stapling_verify on`: a signer from the chain is trusted as it is; any other must
    // chain to a trusted certificate and be the issuer or a responder the issuer delegated to.
    if trust.verify && from_chain.is_none() {
        let path = chain_to_anchor(signer_der, &included, trust).ok_or_else(|| {
            // X509_verify_cert's reason, as OpenSSL words it.
            let reason = if signer.issuer == signer.subject
                && signed_by(signer.tbs, signer.sig_alg, signer.signature, &signer)
            {
                "self-signed certificate"
            } else {
                "unable to get local issuer certificate"
            };
            basic_verify_failed(&format!(
                "error:13800065:OCSP routines::certificate verify error:Verify error: {reason}"
            ))
        })?;
        let delegated = path
            .get(1)
            .and_then(|p| cert(p))
            .is_some_and(|ca| id.issued_by(&ca))
            && ocsp_signing(&signer);
        if !id.issued_by(&signer) && !delegated {
            return Err(basic_verify_failed(
                "error:13800070:OCSP routines::root ca not trusted",
            ));
        }
    }

    // The status of our certificate.
    let not_found = || Error::tls("certificate status not found in the OCSP response");
    let single = children(responses.value)
        .ok_or_else(bad)?
        .into_iter()
        .find_map(|r| {
            let parts = children(r.value)?;
            let first = parts.first()?;
            id.matches(first.value).then_some(parts)
        })
        .ok_or_else(not_found)?;
    let status = match single.get(1).map(|s| s.tag) {
        Some(0x80) => Status::Good,
        Some(0xa1) => Status::Revoked,
        Some(0x82) => Status::Unknown,
        _ => return Err(not_found()),
    };
    let time = |t: Option<&Tlv<'_>>| {
        t.filter(|t| t.tag == GENERALIZED_TIME)
            .and_then(|t| generalized_time(t.value))
    };
    let this_update = time(single.get(2)).ok_or_else(bad)?;
    let next_update = match single.get(3).filter(|n| n.tag == 0xa0) {
        Some(n) => Some(time(tlv(n.value).map(|(t, _)| t).as_ref()).ok_or_else(bad)?),
        None => None,
    };
    let invalid = |r: &str| Error::tls(format!("OCSP_check_validity() failed (SSL: error:{r})"));
    if this_update > now + SKEW {
        return Err(invalid("1380007E:OCSP routines::status not yet valid"));
    }
    if let Some(next) = next_update {
        if next < now - SKEW {
            return Err(invalid("1380007D:OCSP routines::status expired"));
        }
        if next < this_update {
            return Err(invalid(
                "1380007A:OCSP routines::nextupdate before thisupdate",
            ));
        }
    }
    Ok(Checked {
        status,
        next_update,
    })
}

/// The path from `signer` up to one of the trusted certificates, each link's signature
/// checked (`None`: no such path within a few links).
fn chain_to_anchor<'a>(
    signer: &'a [u8],
    included: &[&'a [u8]],
    trust: &'a Trust<'_>,
) -> Option<Vec<&'a [u8]>> {
    let pool: Vec<&[u8]> = trust
        .trusted
        .iter()
        .map(|c| c.as_ref())
        .chain(included.iter().copied())
        .chain(trust.chain.iter().map(|c| c.as_ref()))
        .collect();
    let mut path = vec![signer];
    let mut cur = signer;
    for _ in 0..8 {
        let c = cert(cur)?;
        let anchor = trust.trusted.iter().any(|t| {
            t.as_ref() == cur || cert(t).is_some_and(|t| t.subject == c.subject && t.key == c.key)
        });
        if anchor {
            return Some(path);
        }
        let parent = pool.iter().copied().find(|p| {
            *p != cur
                && cert(p).is_some_and(|p| {
                    p.subject == c.issuer && signed_by(c.tbs, c.sig_alg, c.signature, &p)
                })
        })?;
        path.push(parent);
        cur = parent;
    }
    None
}

/// A GeneralizedTime (`YYYYMMDDHHMMSS[.fff]Z`) as unix seconds.
fn generalized_time(v: &[u8]) -> Option<i64> {
    let s = std::str::from_utf8(v).ok()?;
    let s = s.strip_suffix('Z')?;
    let s = s.split('.').next()?;
    if s.len() != 14 || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let n = |r: std::ops::Range<usize>| s[r].parse::<i64>().ok();
    let (y, mo, d) = (n(0..4)?, n(4..6)?, n(6..8)?);
    let (h, mi, se) = (n(8..10)?, n(10..12)?, n(12..14)?);
    if !(1..=12).contains(&mo) || !(1..=31).contains(&d) || h > 23 || mi > 59 || se > 60 {
        return None;
    }
    // Days from the civil date (Howard Hinnant's algorithm).
    let y = if mo <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (mo + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    Some(days * 86_400 + h * 3600 + mi * 60 + se)
}

/// Now, in unix seconds.
pub fn unix_now() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn der_reading_is_bounded() {
        assert!(tlv(&[0x30]).is_none());
        assert!(tlv(&[0x30, 0x05, 1, 2]).is_none());
        assert!(tlv(&[0x30, 0x85, 1, 1, 1, 1, 1]).is_none());
        let (t, rest) = tlv(&[0x04, 0x81, 0x01, 9, 7]).unwrap();
        assert_eq!((t.tag, t.value, rest), (0x04, &[9u8][..], &[7u8][..]));
        let long = wrap(OCTET_STRING, &[1; 300]);
        assert_eq!(&long[..4], &[0x04, 0x82, 0x01, 0x2c]);
        assert_eq!(expect(&long, OCTET_STRING).unwrap().value.len(), 300);
    }

    #[test]
    fn times() {
        assert_eq!(generalized_time(b"19700101000000Z"), Some(0));
        assert_eq!(generalized_time(b"20261126130754Z"), Some(1_795_698_474));
        assert_eq!(generalized_time(b"20000229120000.5Z"), Some(951_825_600));
        assert_eq!(generalized_time(b"2026112613075Z"), None);
        assert_eq!(generalized_time(b"20261326130754Z"), None);
    }

    #[test]
    fn request_and_garbage_answers() {
        let ca = rcgen::generate_simple_self_signed(vec!["ca.test".into()]).unwrap();
        let leaf = rcgen::generate_simple_self_signed(vec!["a.test".into()]).unwrap();
        let id = CertId::new(leaf.cert.der(), ca.cert.der()).unwrap();
        let req = id.request();
        // OCSPRequest { TBSRequest { requestList { Request { CertID } } } }
        let mut v = expect(&req, SEQUENCE).unwrap().value;
        for _ in 0..3 {
            v = expect(v, SEQUENCE).unwrap().value;
        }
        assert!(id.matches(expect(v, SEQUENCE).unwrap().value));
        let trust = Trust {
            chain: &[],
            trusted: &[],
            verify: false,
        };
        assert!(check(b"junk", &id, &trust, 0)
            .unwrap_err()
            .starts_with("d2i_OCSP_RESPONSE() failed"));
        // What openssl's responder answers a request it cannot read.
        assert_eq!(
            check(&[0x30, 0x03, 0x0a, 0x01, 0x01], &id, &trust, 0).unwrap_err(),
            "OCSP response not successful (1: malformedrequest)"
        );
        assert!(check(&[0x30, 0x03, 0x0a, 0x01, 0x00], &id, &trust, 0)
            .unwrap_err()
            .starts_with("OCSP_response_get1_basic() failed"));
    }
}
