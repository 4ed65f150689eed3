//! Client certificates (`ssl_verify_client`, `ssl_client_certificate`,
//! `ssl_trusted_certificate`, `ssl_verify_depth`, `ssl_crl`), as nginx treats them.
//!
//! nginx lets every handshake through whatever the client's certificate (its OpenSSL verify
//! callback always says yes) and judges the result per request: no certificate with `on` is
//! 496, a certificate that failed is 495 (`optional_no_ca` forgives an unknown issuer), and
//! `$ssl_client_verify` says `SUCCESS`, `FAILED:reason` or `NONE`. So the handshake only asks
//! for a certificate and checks the client's signature with it (proof that the client holds the
//! key); [`ClientAuth::verify`] judges the chain afterwards, with OpenSSL's codes and words.

use std::sync::Arc;

use rustls::client::danger::HandshakeSignatureValid;
use rustls::crypto::WebPkiSupportedAlgorithms;
use rustls::pki_types::{CertificateDer, TrustAnchor, UnixTime};
use rustls::server::danger::{ClientCertVerified, ClientCertVerifier};
use rustls::{DigitallySignedStruct, DistinguishedName, SignatureScheme};

use super::conf::VerifyClient;
use crate::error::Error;

/// The outcome of checking a client's chain (OpenSSL's `X509_V_*` code and text).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Verdict {
    /// 0 (`X509_V_OK`) or OpenSSL's error number.
    pub code: i32,
    pub reason: &'static str,
}

impl Verdict {
    pub const OK: Verdict = Verdict {
        code: 0,
        reason: "ok",
    };

    fn err(code: i32, reason: &'static str) -> Verdict {
        Verdict { code, reason }
    }

    pub fn is_ok(&self) -> bool {
        self.code == 0
    }

    /// The errors `optional_no_ca` lets through (an issuer nobody vouches for).
    pub fn is_unknown_issuer(&self) -> bool {
        matches!(self.code, 2 | 18 | 19 | 20 | 21 | 27)
    }
}

/// How the server asks for and judges client certificates.
#[derive(Debug)]
pub struct ClientAuth {
    pub mode: VerifyClient,
    /// `ssl_client_certificate` and `ssl_trusted_certificate`, as trust anchors.
    anchors: Vec<TrustAnchor<'static>>,
    /// The subjects of `ssl_client_certificate`: the CA names sent to the client.
    hints: Vec<DistinguishedName>,
    crls: Vec<webpki::OwnedCertRevocationList>,
    depth: u32,
    algs: WebPkiSupportedAlgorithms,
}

impl ClientAuth {
    /// `hints` are the certificates of `ssl_client_certificate`, `trusted` those of
    /// `ssl_trusted_certificate`; `crls` the DER of `ssl_crl`.
    pub fn new(
        mode: VerifyClient,
        hints: &[CertificateDer<'static>],
        trusted: &[CertificateDer<'static>],
        crls: &[rustls::pki_types::CertificateRevocationListDer<'static>],
        depth: u32,
    ) -> Result<ClientAuth, Error> {
        let mut anchors = Vec::new();
        let mut names = Vec::new();
        for (i, c) in hints.iter().chain(trusted).enumerate() {
            let a = webpki::anchor_from_trusted_cert(c)
                .map_err(|e| Error::tls(format!("invalid CA certificate: {e}")))?
                .to_owned();
            if i < hints.len() {
                names.push(DistinguishedName::in_sequence(a.subject.as_ref()));
            }
            anchors.push(a);
        }
        let crls = crls
            .iter()
            .map(|c| {
                webpki::OwnedCertRevocationList::from_der(c)
                    .map_err(|e| Error::tls(format!("invalid CRL: {e}")))
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(ClientAuth {
            mode,
            anchors,
            hints: names,
            crls,
            depth,
            algs: rustls::crypto::aws_lc_rs::default_provider().signature_verification_algorithms,
        })
    }

    /// Judges a client's chain (leaf first) now, as OpenSSL would with nginx's settings.
    pub fn verify(&self, chain: &[CertificateDer<'_>]) -> Verdict {
        self.verify_at(chain, UnixTime::now())
    }

    pub fn verify_at(&self, chain: &[CertificateDer<'_>], now: UnixTime) -> Verdict {
        self.verify_chain(chain, now, webpki::KeyUsage::client_auth())
    }

    /// Judges an upstream's chain (`proxy_ssl_verify`), as OpenSSL would for nginx. An
    /// unknown issuer of a lone leaf is OpenSSL's 21 (`unable to verify the first
    /// certificate`, its error when the chain it built has one certificate; nginx 1.22 logs it
    /// so for an upstream that sends its leaf only), 20 with intermediates sent.
    pub fn verify_server(&self, chain: &[CertificateDer<'_>]) -> Verdict {
        let v = self.verify_chain(chain, UnixTime::now(), webpki::KeyUsage::server_auth());
        if v.code == 20 && chain.len() == 1 {
            return Verdict::err(21, "unable to verify the first certificate");
        }
        v
    }

    fn verify_chain(
        &self,
        chain: &[CertificateDer<'_>],
        now: UnixTime,
        usage: webpki::KeyUsage,
    ) -> Verdict {
        let Some(leaf) = chain.first() else {
            return Verdict::err(50, "application verification failure");
        };
        let ee = match webpki::EndEntityCert::try_from(leaf) {
            Ok(ee) => ee,
            // An X.509 v1 certificate (no extensions: what `openssl x509 -req` makes without
            // an extension file), which OpenSSL accepts and webpki does not.
            Err(webpki::Error::UnsupportedCertVersion) => return self.verify_v1(leaf, now),
            Err(_) => return Verdict::err(4, "unable to decode issuer public key"),
        };
        let crl_refs: Vec<webpki::CertRevocationList<'_>> =
            self.crls.iter().map(|c| c.clone().into()).collect();
        let crl_refs: Vec<&webpki::CertRevocationList<'_>> = crl_refs.iter().collect();
        let revocation = webpki::RevocationOptionsBuilder::new(&crl_refs)
            .ok()
            .map(|b| {
                b.with_depth(webpki::RevocationCheckDepth::Chain)
                    .with_status_policy(webpki::UnknownStatusPolicy::Deny)
                    .with_expiration_policy(webpki::ExpirationPolicy::Enforce)
                    .build()
            });
        let result = ee.verify_for_usage(
            self.algs.all,
            &self.anchors,
            &chain[1..],
            now,
            usage,
            revocation,
            None,
        );
        match result {
            Ok(path) => {
                // OpenSSL's depth counts the CAs above the leaf, the trusted one included.
                let cas = path.intermediate_certificates().count() as u32 + 1;
                if cas > self.depth {
                    return Verdict::err(22, "certificate chain too long");
                }
                Verdict::OK
            }
            Err(e) => self.openssl_error(&e, leaf),
        }
    }

    /// A v1 leaf, judged as OpenSSL judges it when a trusted CA issued it directly: the
    /// issuer among the anchors, its signature, the validity period.
    fn verify_v1(&self, leaf: &CertificateDer<'_>, now: UnixTime) -> Verdict {
        use x509_parser::prelude::FromDer;
        let Ok((_, cert)) = x509_parser::certificate::X509Certificate::from_der(leaf) else {
            return Verdict::err(4, "unable to decode issuer public key");
        };
        let issuer = cert.tbs_certificate.issuer.as_raw();
        let Some(anchor) = self
            .anchors
            .iter()
            .find(|a| strip_sequence(issuer) == a.subject.as_ref())
        else {
            return if self_signed(leaf) {
                Verdict::err(18, "self-signed certificate")
            } else {
                Verdict::err(20, "unable to get local issuer certificate")
            };
        };
        let spki = der_sequence(anchor.subject_public_key_info.as_ref());
        let Ok((_, spki)) = x509_parser::x509::SubjectPublicKeyInfo::from_der(&spki) else {
            return Verdict::err(6, "unable to decode issuer public key");
        };
        if cert.verify_signature(Some(&spki)).is_err() {
            return Verdict::err(7, "certificate signature failure");
        }
        let now = now.as_secs() as i64;
        let validity = cert.validity();
        if now < validity.not_before.timestamp() {
            return Verdict::err(9, "certificate is not yet valid");
        }
        if now > validity.not_after.timestamp() {
            return Verdict::err(10, "certificate has expired");
        }
        Verdict::OK
    }

    fn openssl_error(&self, e: &webpki::Error, leaf: &CertificateDer<'_>) -> Verdict {
        use webpki::Error as E;
        match e {
            // OpenSSL looks for the issuer first: a self-signed leaf nobody trusts is that,
            // whatever it says of itself.
            E::CaUsedAsEndEntity if self_signed(leaf) => {
                Verdict::err(18, "self-signed certificate")
            }
            E::UnknownIssuer => {
                if self_signed(leaf) {
                    Verdict::err(18, "self-signed certificate")
                } else {
                    Verdict::err(20, "unable to get local issuer certificate")
                }
            }
            E::CertExpired { .. } => Verdict::err(10, "certificate has expired"),
            E::CertNotValidYet { .. } => Verdict::err(9, "certificate is not yet valid"),
            E::CertRevoked => Verdict::err(23, "certificate revoked"),
            E::UnknownRevocationStatus => Verdict::err(3, "unable to get certificate CRL"),
            E::CrlExpired { .. } => Verdict::err(12, "CRL has expired"),
            E::InvalidSignatureForPublicKey
            | E::UnsupportedSignatureAlgorithmContext(_)
            | E::UnsupportedSignatureAlgorithmForPublicKeyContext(_)
            | E::SignatureAlgorithmMismatch => Verdict::err(7, "certificate signature failure"),
            E::InvalidCrlSignatureForPublicKey => Verdict::err(8, "CRL signature failure"),
            E::MaximumPathDepthExceeded => Verdict::err(22, "certificate chain too long"),
            E::RequiredEkuNotFoundContext(_) => Verdict::err(26, "unsupported certificate purpose"),
            E::CaUsedAsEndEntity => Verdict::err(24, "invalid CA certificate"),
            E::PathLenConstraintViolated => Verdict::err(25, "path length constraint exceeded"),
            _ => Verdict::err(1, "unspecified certificate verification error"),
        }
    }
}

fn self_signed(cert: &CertificateDer<'_>) -> bool {
    super::certs::issued_by(cert, cert)
}

/// The contents of a DER SEQUENCE (a name as a certificate holds it, compared with a trust
/// anchor's subject, which webpki keeps without its tag and length).
fn strip_sequence(der: &[u8]) -> &[u8] {
    let Some((&0x30, rest)) = der.split_first() else {
        return der;
    };
    let Some((&first, rest)) = rest.split_first() else {
        return der;
    };
    if first < 0x80 {
        return rest;
    }
    let n = usize::from(first & 0x7f);
    rest.get(n..).unwrap_or(der)
}

/// `contents` wrapped in a DER SEQUENCE (webpki keeps an anchor's SPKI without it).
fn der_sequence(contents: &[u8]) -> Vec<u8> {
    let len = contents.len();
    let mut out = vec![0x30];
    if len < 0x80 {
        out.push(len as u8);
    } else {
        let bytes = len.to_be_bytes();
        let skip = bytes.iter().take_while(|&&b| b == 0).count();
        out.push(0x80 | (bytes.len() - skip) as u8);
        out.extend_from_slice(&bytes[skip..]);
    }
    out.extend_from_slice(contents);
    out
}

/// A TLS signature made with the key of a certificate webpki cannot read (X.509 v1), checked
/// with the key itself.
fn verify_with_raw_key(
    message: &[u8],
    cert: &CertificateDer<'_>,
    dss: &DigitallySignedStruct,
    algs: &WebPkiSupportedAlgorithms,
) -> Result<HandshakeSignatureValid, rustls::Error> {
    use x509_parser::prelude::FromDer;
    let bad = || rustls::Error::InvalidCertificate(rustls::CertificateError::BadEncoding);
    let (_, parsed) =
        x509_parser::certificate::X509Certificate::from_der(cert).map_err(|_| bad())?;
    let key = &parsed.public_key().subject_public_key.data;
    let candidates = algs
        .mapping
        .iter()
        .find(|(scheme, _)| *scheme == dss.scheme)
        .map(|(_, a)| *a)
        .ok_or(rustls::Error::PeerMisbehaved(
            rustls::PeerMisbehaved::SignedHandshakeWithUnadvertisedSigScheme,
        ))?;
    if candidates
        .iter()
        .any(|a| a.verify_signature(key, message, dss.signature()).is_ok())
    {
        Ok(HandshakeSignatureValid::assertion())
    } else {
        Err(rustls::Error::InvalidCertificate(
            rustls::CertificateError::BadSignature,
        ))
    }
}

impl ClientCertVerifier for ClientAuth {
    fn offer_client_auth(&self) -> bool {
        self.mode != VerifyClient::Off
    }

    fn client_auth_mandatory(&self) -> bool {
        false
    }

    fn root_hint_subjects(&self) -> &[DistinguishedName] {
        &self.hints
    }

    /// Every well-formed certificate is let through; [`ClientAuth::verify`] judges it later.
    fn verify_client_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _now: UnixTime,
    ) -> Result<ClientCertVerified, rustls::Error> {
        use x509_parser::prelude::FromDer;
        if webpki::EndEntityCert::try_from(end_entity).is_err()
            && x509_parser::certificate::X509Certificate::from_der(end_entity).is_err()
        {
            return Err(rustls::Error::InvalidCertificate(
                rustls::CertificateError::BadEncoding,
            ));
        }
        Ok(ClientCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        match rustls::crypto::verify_tls12_signature(message, cert, dss, &self.algs) {
            Err(rustls::Error::InvalidCertificate(rustls::CertificateError::BadEncoding))
            | Err(rustls::Error::InvalidCertificate(rustls::CertificateError::Other(_))) => {
                verify_with_raw_key(message, cert, dss, &self.algs)
            }
            r => r,
        }
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        match rustls::crypto::verify_tls13_signature(message, cert, dss, &self.algs) {
            Err(rustls::Error::InvalidCertificate(rustls::CertificateError::BadEncoding))
            | Err(rustls::Error::InvalidCertificate(rustls::CertificateError::Other(_))) => {
                verify_with_raw_key(message, cert, dss, &self.algs)
            }
            r => r,
        }
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.algs.supported_schemes()
    }
}

/// A verifier that asks for nothing (`ssl_verify_client off`).
pub fn no_client_auth() -> Arc<dyn ClientCertVerifier> {
    rustls::server::WebPkiClientVerifier::no_client_auth()
}
