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
    ) -> Result<ClientAuth, String> {
        let mut anchors = Vec::new();
        let mut names = Vec::new();
        for (i, c) in hints.iter().chain(trusted).enumerate() {
            let a = webpki::anchor_from_trusted_cert(c)
                .map_err(|e| format!("invalid CA certificate: {e}"))?
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
                    .map_err(|e| format!("invalid CRL: {e}"))
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
        let Some(leaf) = chain.first() else {
            return Verdict::err(50, "application verification failure");
        };
        let Ok(ee) = webpki::EndEntityCert::try_from(leaf) else {
            return Verdict::err(4, "unable to decode issuer public key");
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
            webpki::KeyUsage::client_auth(),
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

    fn openssl_error(&self, e: &webpki::Error, leaf: &CertificateDer<'_>) -> Verdict {
        use webpki::Error as E;
        match e {
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
        webpki::EndEntityCert::try_from(end_entity).map_err(|_| {
            rustls::Error::InvalidCertificate(rustls::CertificateError::BadEncoding)
        })?;
        Ok(ClientCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.algs)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.algs)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.algs.supported_schemes()
    }
}

/// A verifier that asks for nothing (`ssl_verify_client off`).
pub fn no_client_auth() -> Arc<dyn ClientCertVerifier> {
    rustls::server::WebPkiClientVerifier::no_client_auth()
}
