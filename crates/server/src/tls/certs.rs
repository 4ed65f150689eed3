//! Reading certificates, keys, CA lists, CRLs and OCSP responses from PEM/DER files or
//! `data:` values, with nginx's messages when they cannot be read.
//!
//! Messages give nginx's first part (`cannot load certificate "F": PEM_read_bio_X509_AUX()
//! failed`) and an OpenSSL-like detail (`(SSL: error:0480006C:PEM routines::no start line...)`);
//! the detail may differ from OpenSSL's where rustls and OpenSSL fail for different reasons.
//! Keys may be encrypted (`ssl_password_file`): PKCS#8 (`ENCRYPTED PRIVATE KEY`) and OpenSSL's
//! traditional `Proc-Type: 4,ENCRYPTED` with AES-CBC. Runs on the master thread, or on a worker
//! for a certificate named with variables (nginx also reads those at the handshake).

use std::path::Path;
use std::sync::Arc;

use rustls::pki_types::{CertificateDer, CertificateRevocationListDer, PrivateKeyDer};
use rustls::sign::CertifiedKey;

use crate::error::Error;

/// One PEM section: its label, its headers (`Proc-Type`, `DEK-Info`) and its bytes.
struct PemBlock {
    label: String,
    headers: Vec<(String, String)>,
    der: Vec<u8>,
}

/// The PEM sections of a text, in order; a section whose base64 is broken ends the list with
/// `Err` (what OpenSSL calls `bad base64 decode`).
fn pem_blocks(data: &[u8]) -> Vec<Result<PemBlock, ()>> {
    let text = String::from_utf8_lossy(data);
    let mut out = Vec::new();
    let mut lines = text.lines();
    while let Some(line) = lines.next() {
        let Some(label) = line
            .trim()
            .strip_prefix("-----BEGIN ")
            .and_then(|l| l.strip_suffix("-----"))
        else {
            continue;
        };
        let end = format!("-----END {label}-----");
        let mut headers = Vec::new();
        let mut b64 = String::new();
        let mut closed = false;
        for l in lines.by_ref() {
            let l = l.trim();
            if l == end {
                closed = true;
                break;
            }
            match l.split_once(':') {
                Some((k, v)) if b64.is_empty() => {
                    headers.push((k.trim().to_string(), v.trim().to_string()))
                }
                _ => b64.push_str(l),
            }
        }
        match (closed, base64_decode(&b64)) {
            (true, Some(der)) => out.push(Ok(PemBlock {
                label: label.to_string(),
                headers,
                der,
            })),
            _ => {
                out.push(Err(()));
                break;
            }
        }
    }
    out
}

fn base64_decode(s: &str) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(s.len() * 3 / 4);
    let (mut acc, mut bits) = (0u32, 0u32);
    for c in s.bytes() {
        let v = match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' => 62,
            b'/' => 63,
            b'=' => break,
            b' ' | b'\t' => continue,
            _ => return None,
        };
        acc = (acc << 6) | u32::from(v);
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
        }
    }
    Some(out)
}

/// The contents of a file or a `data:` value; the error is nginx's `BIO_new_file() failed`
/// detail (`(SSL: error:80000002:system library::No such file or directory:calling
/// fopen(F, r) error:10000080:BIO routines::no such file)`).
pub fn read_source(name: &str, mode: &str) -> Result<Vec<u8>, Error> {
    if let Some(data) = name.strip_prefix("data:") {
        return Ok(data.as_bytes().to_vec());
    }
    std::fs::read(name).map_err(|e| {
        let errno = e.raw_os_error().unwrap_or(0);
        let text = shoal_conf::os_error(&e);
        let text = text
            .trim_start_matches(|c: char| c == '(' || c.is_ascii_digit() || c == ':' || c == ' ')
            .trim_end_matches(')');
        let bio = if errno == libc::ENOENT {
            "error:10000080:BIO routines::no such file"
        } else {
            "error:10080002:BIO routines::system lib"
        };
        let msg = format!(
            "(SSL: error:{:08X}:system library::{text}:calling fopen({name}, {mode}) {bio})",
            0x8000_0000u32 | errno as u32
        );
        Error::io(e, msg)
    })
}

const NO_START_LINE: &str = "error:0480006C:PEM routines::no start line";
const BAD_BASE64: &str = "error:04800064:PEM routines::bad base64 decode";

/// A certificate chain: the server's certificate first, then the rest of the file.
pub fn load_certificate(name: &str) -> Result<Vec<CertificateDer<'static>>, Error> {
    let fail = |what: &str, detail: &str| {
        Error::tls(format!(
            "cannot load certificate \"{name}\": {what} failed {detail}"
        ))
    };
    let data = read_source(name, "r").map_err(|d| {
        d.context(|d| format!("cannot load certificate \"{name}\": BIO_new_file() failed {d}"))
    })?;
    let mut chain = Vec::new();
    for block in pem_blocks(&data) {
        let Ok(block) = block else {
            let what = if chain.is_empty() {
                "PEM_read_bio_X509_AUX()"
            } else {
                "PEM_read_bio_X509()"
            };
            return Err(fail(what, &format!("(SSL: {BAD_BASE64})")));
        };
        if !matches!(
            block.label.as_str(),
            "CERTIFICATE" | "TRUSTED CERTIFICATE" | "X509 CERTIFICATE"
        ) {
            continue;
        }
        if x509_parser::parse_x509_certificate(&block.der).is_err() {
            let what = if chain.is_empty() {
                "PEM_read_bio_X509_AUX()"
            } else {
                "PEM_read_bio_X509()"
            };
            return Err(fail(
                what,
                "(SSL: error:0680007B:asn1 encoding routines::header too long)",
            ));
        }
        chain.push(CertificateDer::from(block.der));
    }
    if chain.is_empty() {
        return Err(fail(
            "PEM_read_bio_X509_AUX()",
            &format!("(SSL: {NO_START_LINE}:Expecting: TRUSTED CERTIFICATE)"),
        ));
    }
    Ok(chain)
}

/// A private key, decrypted with the first of `passwords` that works.
pub fn load_key(name: &str, passwords: Option<&[String]>) -> Result<PrivateKeyDer<'static>, Error> {
    let fail = |what: &str, detail: &str| {
        Error::tls(format!(
            "cannot load certificate key \"{name}\": {what} failed {detail}"
        ))
    };
    let read_fail = |detail: &str| fail("PEM_read_bio_PrivateKey()", &format!("(SSL: {detail})"));
    let data = read_source(name, "r").map_err(|d| {
        d.context(|d| format!("cannot load certificate key \"{name}\": BIO_new_file() failed {d}"))
    })?;
    for block in pem_blocks(&data) {
        let Ok(block) = block else {
            return Err(read_fail(BAD_BASE64));
        };
        let encrypted = block.label == "ENCRYPTED PRIVATE KEY"
            || block
                .headers
                .iter()
                .any(|(k, v)| k == "Proc-Type" && v.contains("ENCRYPTED"));
        let der = if encrypted {
            let Some(passwords) = passwords.filter(|p| !p.is_empty()) else {
                return Err(read_fail("error:04800068:PEM routines::bad password read"));
            };
            passwords
                .iter()
                .find_map(|p| decrypt_key(&block, p))
                .ok_or_else(|| read_fail("error:1C800064:Provider routines::bad decrypt"))?
        } else {
            block.der
        };
        let label = if block.label == "ENCRYPTED PRIVATE KEY" {
            "PRIVATE KEY"
        } else {
            block.label.as_str()
        };
        let key = match label {
            "PRIVATE KEY" => PrivateKeyDer::Pkcs8(der.into()),
            "RSA PRIVATE KEY" => PrivateKeyDer::Pkcs1(der.into()),
            "EC PRIVATE KEY" => PrivateKeyDer::Sec1(der.into()),
            _ => continue,
        };
        return Ok(key);
    }
    Err(read_fail(
        "error:1E08010C:DECODER routines::unsupported:No supported data to decode. Input type: PEM",
    ))
}

/// Decrypts a PKCS#8 `ENCRYPTED PRIVATE KEY`, or a traditional key with `DEK-Info: AES-*-CBC`
/// (OpenSSL's `EVP_BytesToKey` with MD5, one round, the IV's first 8 bytes as the salt).
fn decrypt_key(block: &PemBlock, password: &str) -> Option<Vec<u8>> {
    if block.label == "ENCRYPTED PRIVATE KEY" {
        let info = pkcs8::EncryptedPrivateKeyInfo::try_from(block.der.as_slice()).ok()?;
        let doc = info.decrypt(password.as_bytes()).ok()?;
        return Some(doc.as_bytes().to_vec());
    }
    let dek = block
        .headers
        .iter()
        .find(|(k, _)| k == "DEK-Info")?
        .1
        .as_str();
    let (alg, iv_hex) = dek.split_once(',')?;
    let iv = hex_decode(iv_hex.trim())?;
    let key_len = match alg.trim() {
        "AES-128-CBC" => 16,
        "AES-192-CBC" => 24,
        "AES-256-CBC" => 32,
        _ => return None,
    };
    if iv.len() != 16 {
        return None;
    }
    let salt = &iv[..8];
    let mut key = Vec::new();
    let mut prev: Vec<u8> = Vec::new();
    while key.len() < key_len {
        use md5::Digest;
        let mut h = md5::Md5::new();
        h.update(&prev);
        h.update(password.as_bytes());
        h.update(salt);
        prev = h.finalize().to_vec();
        key.extend_from_slice(&prev);
    }
    key.truncate(key_len);
    aes_cbc_decrypt(&key, &iv, &block.der)
}

fn aes_cbc_decrypt(key: &[u8], iv: &[u8], data: &[u8]) -> Option<Vec<u8>> {
    use cbc::cipher::{block_padding::Pkcs7, BlockDecryptMut, KeyIvInit};
    match key.len() {
        16 => cbc::Decryptor::<aes::Aes128>::new_from_slices(key, iv)
            .ok()?
            .decrypt_padded_vec_mut::<Pkcs7>(data)
            .ok(),
        24 => cbc::Decryptor::<aes::Aes192>::new_from_slices(key, iv)
            .ok()?
            .decrypt_padded_vec_mut::<Pkcs7>(data)
            .ok(),
        _ => cbc::Decryptor::<aes::Aes256>::new_from_slices(key, iv)
            .ok()?
            .decrypt_padded_vec_mut::<Pkcs7>(data)
            .ok(),
    }
}

fn hex_decode(s: &str) -> Option<Vec<u8>> {
    if s.len() % 2 != 0 {
        return None;
    }
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(s.get(i..i + 2)?, 16).ok())
        .collect()
}

/// A certificate with its key, checked to belong together (nginx: `SSL_CTX_use_PrivateKey("K")
/// failed (SSL: error:05800074:x509 certificate routines::key values mismatch)`).
pub fn load_pair(
    cert: &str,
    key: &str,
    passwords: Option<&[String]>,
) -> Result<Arc<CertifiedKey>, Error> {
    let chain = load_certificate(cert)?;
    let der = load_key(key, passwords)?;
    let signing = rustls::crypto::aws_lc_rs::sign::any_supported_type(&der).map_err(|_| {
        Error::tls(format!(
            "cannot load certificate key \"{key}\": PEM_read_bio_PrivateKey() failed (SSL: error:1E08010C:DECODER routines::unsupported)"
        ))
    })?;
    let ck = CertifiedKey::new(chain, signing);
    ck.keys_match().map_err(|_| {
        Error::tls(format!(
            "SSL_CTX_use_PrivateKey(\"{key}\") failed (SSL: error:05800074:x509 certificate routines::key values mismatch)"
        ))
    })?;
    Ok(Arc::new(ck))
}

/// The certificates of a CA file (`ssl_client_certificate`, `ssl_trusted_certificate`);
/// `what` is nginx's function name in the message.
pub fn load_ca_file(name: &str) -> Result<Vec<CertificateDer<'static>>, Error> {
    let fail = |detail: &str| {
        Error::tls(format!(
            "SSL_CTX_load_verify_locations(\"{name}\") failed (SSL: {detail})"
        ))
    };
    let data = read_source(name, "r").map_err(|d| {
        d.context(|d| {
            let d = d.trim_start_matches("(SSL: ").trim_end_matches(')');
            format!(
                "SSL_CTX_load_verify_locations(\"{name}\") failed (SSL: {d} \
                 error:05880002:x509 certificate routines::system lib)"
            )
        })
    })?;
    let mut out = Vec::new();
    for block in pem_blocks(&data) {
        let Ok(block) = block else {
            return Err(fail(BAD_BASE64));
        };
        if matches!(block.label.as_str(), "CERTIFICATE" | "TRUSTED CERTIFICATE") {
            out.push(CertificateDer::from(block.der));
        }
    }
    if out.is_empty() {
        return Err(fail(
            "error:05800088:x509 certificate routines::no certificate or crl found",
        ));
    }
    Ok(out)
}

/// The CRLs of an `ssl_crl` file.
pub fn load_crl_file(name: &str) -> Result<Vec<CertificateRevocationListDer<'static>>, Error> {
    let fail = |detail: &str| {
        Error::tls(format!(
            "X509_LOOKUP_load_file(\"{name}\") failed (SSL: {detail})"
        ))
    };
    let data = read_source(name, "r").map_err(|d| {
        d.context(|d| {
            let d = d.trim_start_matches("(SSL: ").trim_end_matches(')');
            format!(
                "X509_LOOKUP_load_file(\"{name}\") failed (SSL: {d} \
                 error:05880002:x509 certificate routines::system lib)"
            )
        })
    })?;
    let mut out = Vec::new();
    for block in pem_blocks(&data) {
        let Ok(block) = block else {
            return Err(fail(BAD_BASE64));
        };
        if block.label == "X509 CRL" {
            out.push(CertificateRevocationListDer::from(block.der));
        }
    }
    if out.is_empty() {
        return Err(fail(
            "error:05800088:x509 certificate routines::no certificate or crl found",
        ));
    }
    Ok(out)
}

/// An OCSP response (DER) for stapling.
pub fn load_ocsp_response(name: &str) -> Result<Vec<u8>, Error> {
    let data = read_source(name, "rb")
        .map_err(|d| d.context(|d| format!("BIO_new_file(\"{name}\") failed {d}")))?;
    // An OCSPResponse is a DER SEQUENCE whose length covers the file.
    let fits = matches!(x509_parser::der_parser::der::parse_der(&data), Ok((rest, obj))
        if rest.is_empty() && obj.header.tag() == x509_parser::der_parser::asn1_rs::Tag::Sequence);
    if !fits {
        return Err(Error::tls(format!(
            "d2i_OCSP_RESPONSE_bio(\"{name}\") failed (SSL: error:0680008E:asn1 encoding routines::not enough data)"
        )));
    }
    Ok(data)
}

/// `ssl_dhparam`: read and checked as nginx checks it (PKCS#3 `DH PARAMETERS`, or the X9.42 form
/// `openssl dhparam -dsaparam` writes); rustls has no DHE suite to use it with.
pub fn check_dhparam(name: &str) -> Result<(), Error> {
    let data = read_source(name, "r")
        .map_err(|d| d.context(|d| format!("BIO_new_file(\"{name}\") failed {d}")))?;
    let found = pem_blocks(&data).into_iter().any(
        |b| matches!(b, Ok(b) if b.label == "DH PARAMETERS" || b.label == "X9.42 DH PARAMETERS"),
    );
    if !found {
        return Err(Error::tls(format!(
            "PEM_read_bio_DHparams(\"{name}\") failed (SSL: {NO_START_LINE}:Expecting: DH PARAMETERS)"
        )));
    }
    Ok(())
}

/// The OCSP responder URL of a certificate's Authority Information Access, if any.
pub fn ocsp_responder_url(cert: &CertificateDer<'_>) -> Option<String> {
    use x509_parser::extensions::{GeneralName, ParsedExtension};
    let (_, x) = x509_parser::parse_x509_certificate(cert).ok()?;
    for ext in x.extensions() {
        if let ParsedExtension::AuthorityInfoAccess(aia) = ext.parsed_extension() {
            for desc in &aia.accessdescs {
                if desc.access_method == x509_parser::oid_registry::OID_PKIX_ACCESS_DESCRIPTOR_OCSP
                {
                    if let GeneralName::URI(u) = desc.access_location {
                        return Some(u.to_string());
                    }
                }
            }
        }
    }
    None
}

/// Whether `issuer` looks like the issuer of `cert`, as OpenSSL's `X509_check_issued` decides:
/// the names match, and so do the key identifiers when both certificates have them.
pub fn issued_by(cert: &CertificateDer<'_>, issuer: &CertificateDer<'_>) -> bool {
    use x509_parser::extensions::ParsedExtension;
    let (Ok((_, c)), Ok((_, i))) = (
        x509_parser::parse_x509_certificate(cert),
        x509_parser::parse_x509_certificate(issuer),
    ) else {
        return false;
    };
    if c.issuer().as_raw() != i.subject().as_raw() {
        return false;
    }
    let aki = c
        .extensions()
        .iter()
        .find_map(|e| match e.parsed_extension() {
            ParsedExtension::AuthorityKeyIdentifier(a) => a.key_identifier.as_ref().map(|k| k.0),
            _ => None,
        });
    let ski = i
        .extensions()
        .iter()
        .find_map(|e| match e.parsed_extension() {
            ParsedExtension::SubjectKeyIdentifier(k) => Some(k.0),
            _ => None,
        });
    match (aki, ski) {
        (Some(a), Some(s)) => a == s,
        _ => true,
    }
}

/// A path shown in messages: as written when it is a `data:` value, else resolved.
pub fn display_name(name: &str, conf_prefix: &Path) -> String {
    if name.starts_with("data:") || Path::new(name).is_absolute() {
        name.to_string()
    } else {
        conf_prefix.join(name).display().to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pem_with_headers_and_garbage() {
        let text = b"junk\n-----BEGIN RSA PRIVATE KEY-----\nProc-Type: 4,ENCRYPTED\nDEK-Info: AES-128-CBC,00112233445566778899AABBCCDDEEFF\n\nAAEC\n-----END RSA PRIVATE KEY-----\n";
        let blocks = pem_blocks(text);
        let b = blocks[0].as_ref().unwrap();
        assert_eq!(b.label, "RSA PRIVATE KEY");
        assert_eq!(b.headers.len(), 2);
        assert_eq!(b.der, vec![0, 1, 2]);
        assert!(
            pem_blocks(b"-----BEGIN CERTIFICATE-----\n!!\n-----END CERTIFICATE-----\n")[0].is_err()
        );
        assert!(pem_blocks(b"-----BEGIN CERTIFICATE-----\nAAAA\n")[0].is_err());
    }

    #[test]
    fn messages_for_missing_and_bad_files() {
        let e = load_certificate("/nonexistent/x.crt").unwrap_err();
        assert_eq!(
            e,
            "cannot load certificate \"/nonexistent/x.crt\": BIO_new_file() failed (SSL: error:80000002:system library::No such file or directory:calling fopen(/nonexistent/x.crt, r) error:10000080:BIO routines::no such file)"
        );
        let e = load_certificate("data:garbage").unwrap_err();
        assert_eq!(
            e,
            "cannot load certificate \"data:garbage\": PEM_read_bio_X509_AUX() failed (SSL: error:0480006C:PEM routines::no start line:Expecting: TRUSTED CERTIFICATE)"
        );
        let e = load_key("data:garbage", None).unwrap_err();
        assert!(e.starts_with("cannot load certificate key \"data:garbage\": PEM_read_bio_PrivateKey() failed (SSL: error:1E08010C:DECODER routines::unsupported"), "{e}");
    }

    #[test]
    fn pairs_and_mismatches() {
        let a = rcgen::generate_simple_self_signed(vec!["a.test".into()]).unwrap();
        let b = rcgen::generate_simple_self_signed(vec!["b.test".into()]).unwrap();
        let cert = format!("data:{}", a.cert.pem());
        let key = format!("data:{}", a.signing_key.serialize_pem());
        assert!(load_pair(&cert, &key, None).is_ok());
        let other = format!("data:{}", b.signing_key.serialize_pem());
        let e = load_pair(&cert, &other, None).unwrap_err();
        assert!(
            e.ends_with(
                "failed (SSL: error:05800074:x509 certificate routines::key values mismatch)"
            ),
            "{e}"
        );
    }

    #[test]
    fn traditional_encryption() {
        // EVP_BytesToKey(MD5) + AES-128-CBC, made by hand: the same routine encrypts.
        use cbc::cipher::{block_padding::Pkcs7, BlockEncryptMut, KeyIvInit};
        use md5::Digest;
        let plain = b"0123456789 a key that is not a key".to_vec();
        let iv = [7u8; 16];
        let mut h = md5::Md5::new();
        h.update(b"pw");
        h.update(&iv[..8]);
        let key = h.finalize();
        let enc = cbc::Encryptor::<aes::Aes128>::new_from_slices(&key, &iv)
            .unwrap()
            .encrypt_padded_vec_mut::<Pkcs7>(&plain);
        let block = PemBlock {
            label: "RSA PRIVATE KEY".into(),
            headers: vec![(
                "DEK-Info".into(),
                format!("AES-128-CBC,{}", "07".repeat(16)),
            )],
            der: enc,
        };
        assert_eq!(decrypt_key(&block, "pw"), Some(plain));
        assert_eq!(decrypt_key(&block, "wrong"), None);
    }
}
