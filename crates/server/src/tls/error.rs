//! TLS failures of a connection, in nginx's words and at nginx's log levels.
//!
//! nginx logs what a client caused (garbage, a protocol or cipher it cannot agree on, an alert
//! it sent, a reset) at `info`, and what points at the server at `crit`; its lines read
//! `SSL_do_handshake() failed (SSL: error:0A00010B:SSL routines::wrong version number)`. rustls's
//! errors are mapped onto the OpenSSL reason that nginx on OpenSSL 3 would print for the same
//! input. The caller appends nginx's context (`while SSL handshaking, client: ..., server: ...`).

use std::fmt;
use std::io;

use crate::log::Level;

/// A TLS failure: what nginx would log, and at which level.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsError {
    pub level: Level,
    /// The line without nginx's `while ...` context, e.g. `SSL_do_handshake() failed (SSL:
    /// error:0A0000C1:SSL routines::no shared cipher)`.
    pub message: String,
}

impl fmt::Display for TlsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for TlsError {}

/// Which OpenSSL call nginx names in the line.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Call {
    Handshake,
    Read,
    Write,
    Shutdown,
}

impl Call {
    fn name(self) -> &'static str {
        match self {
            Call::Handshake => "SSL_do_handshake()",
            Call::Read => "SSL_read()",
            Call::Write => "SSL_write()",
            Call::Shutdown => "SSL_shutdown()",
        }
    }
}

impl TlsError {
    fn info(message: String) -> TlsError {
        TlsError {
            level: Level::Info,
            message,
        }
    }

    /// An OpenSSL reason (`0A0000C1`, `no shared cipher`) failing `call`.
    pub fn openssl(call: Call, code: u32, reason: &str, level: Level) -> TlsError {
        TlsError {
            level,
            message: format!(
                "{} failed (SSL: error:{code:08X}:SSL routines::{reason})",
                call.name()
            ),
        }
    }

    /// The client closed the connection before sending anything.
    pub fn closed_before_hello() -> TlsError {
        TlsError::info("client closed connection".to_string())
    }

    /// The client closed the connection in the middle of the handshake.
    pub fn peer_closed() -> TlsError {
        TlsError::info("peer closed connection in SSL handshake".to_string())
    }

    /// The handshake did not finish in time (the caller's timeout).
    pub fn timed_out() -> TlsError {
        TlsError::info("client timed out (110: Connection timed out)".to_string())
    }

    /// `ssl_reject_handshake on` answered the handshake.
    pub fn rejected() -> TlsError {
        TlsError::info("handshake rejected".to_string())
    }

    /// A socket error during `call` (`SSL_do_handshake() failed (104: Connection reset by
    /// peer)`); a reset or a broken pipe is the client's doing (info), anything else is crit.
    pub fn io(call: Call, e: &io::Error) -> TlsError {
        let level = match e.kind() {
            io::ErrorKind::ConnectionReset
            | io::ErrorKind::BrokenPipe
            | io::ErrorKind::NotConnected
            | io::ErrorKind::TimedOut
            | io::ErrorKind::ConnectionRefused
            | io::ErrorKind::ConnectionAborted => Level::Info,
            _ => Level::Crit,
        };
        TlsError {
            level,
            message: format!("{} failed {}", call.name(), shoal_conf::os_error(e)),
        }
    }

    /// A rustls error during `call`, as the OpenSSL reason nginx would print.
    pub fn from_rustls(call: Call, e: &rustls::Error) -> TlsError {
        let (code, reason, level) = openssl_reason(e);
        let reason = match reason {
            Reason::Static(r) => r.to_string(),
            Reason::Alert(text, n) => format!("{text}:SSL alert number {n}"),
        };
        TlsError::openssl(call, code, &reason, level)
    }
}

enum Reason {
    Static(&'static str),
    Alert(String, u8),
}

fn openssl_reason(e: &rustls::Error) -> (u32, Reason, Level) {
    use rustls::{Error as E, InvalidMessage as M, PeerIncompatible as P};
    let info = |code: u32, r: &'static str| (0x0A00_0000 | code, Reason::Static(r), Level::Info);
    match e {
        E::InvalidMessage(M::InvalidContentType | M::UnknownProtocolVersion) => {
            info(0x10B, "wrong version number")
        }
        // Not among the reasons nginx puts down to the client (`ngx_ssl_connection_error`):
        // nginx logs this one at crit.
        E::InvalidMessage(M::MessageTooLarge | M::CertificatePayloadTooLarge)
        | E::PeerSentOversizedRecord => (
            0x0A00_00C6,
            Reason::Static("packet length too long"),
            Level::Crit,
        ),
        E::InvalidMessage(_) => info(0xF4, "unexpected message"),
        E::InappropriateMessage { .. } | E::InappropriateHandshakeMessage { .. } => {
            info(0xF4, "unexpected message")
        }
        // rustls rebuffs a renegotiation with a `no_renegotiation` warning, as OpenSSL does
        // with nginx's settings, and gives up on a client that keeps asking.
        E::PeerMisbehaved(rustls::PeerMisbehaved::TooManyRenegotiationRequests) => {
            info(0x153, "no renegotiation")
        }
        E::PeerMisbehaved(_) => info(0xF4, "unexpected message"),
        E::PeerIncompatible(p) => match p {
            P::NoCipherSuitesInCommon => info(0xC1, "no shared cipher"),
            P::NoKxGroupsInCommon => info(0x19A, "no shared groups"),
            P::NoSignatureSchemesInCommon | P::SignatureAlgorithmsExtensionRequired => {
                info(0x76, "no suitable signature algorithm")
            }
            P::SupportedVersionsExtensionRequired
            | P::Tls12NotOffered
            | P::Tls12NotOfferedOrEnabled
            | P::Tls13RequiredForQuic => info(0x102, "unsupported protocol"),
            _ => info(0xE5, "ssl handshake failure"),
        },
        E::NoApplicationProtocol => info(0xEB, "no application protocol"),
        E::DecryptError => info(0x119, "decryption failed or bad record mac"),
        E::AlertReceived(a) => {
            let n = u8::from(*a);
            (
                0x0A00_0000 | (1000 + u32::from(n)),
                Reason::Alert(alert_text(n), n),
                Level::Info,
            )
        }
        E::InvalidCertificate(_) | E::NoCertificatesPresented => {
            info(0x86, "certificate verify failed")
        }
        _ => (
            0x0A00_0000 | 0xC0103,
            Reason::Static("internal error"),
            Level::Crit,
        ),
    }
}

/// OpenSSL's text for an alert a peer sent (`sslv3 alert handshake failure`).
fn alert_text(n: u8) -> String {
    let s = match n {
        0 => "sslv3 alert close notify",
        10 => "sslv3 alert unexpected message",
        20 => "sslv3 alert bad record mac",
        30 => "sslv3 alert decompression failure",
        40 => "sslv3 alert handshake failure",
        41 => "sslv3 alert no certificate",
        42 => "sslv3 alert bad certificate",
        43 => "sslv3 alert unsupported certificate",
        44 => "sslv3 alert certificate revoked",
        45 => "sslv3 alert certificate expired",
        46 => "sslv3 alert certificate unknown",
        47 => "sslv3 alert illegal parameter",
        48 => "tlsv1 alert unknown ca",
        49 => "tlsv1 alert access denied",
        50 => "tlsv1 alert decode error",
        51 => "tlsv1 alert decrypt error",
        70 => "tlsv1 alert protocol version",
        71 => "tlsv1 alert insufficient security",
        80 => "tlsv1 alert internal error",
        86 => "tlsv1 alert inappropriate fallback",
        90 => "tlsv1 alert user cancelled",
        100 => "tlsv1 alert no renegotiation",
        109 => "tlsv13 alert missing extension",
        110 => "tlsv1 unsupported extension",
        112 => "tlsv1 unrecognized name",
        113 => "tlsv1 bad certificate status response",
        116 => "tlsv13 alert certificate required",
        120 => "tlsv1 alert no application protocol",
        _ => return format!("reason({})", 1000 + u32::from(n)),
    };
    s.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wording_and_levels() {
        let e = TlsError::from_rustls(
            Call::Handshake,
            &rustls::Error::PeerIncompatible(rustls::PeerIncompatible::NoCipherSuitesInCommon),
        );
        assert_eq!(
            e.message,
            "SSL_do_handshake() failed (SSL: error:0A0000C1:SSL routines::no shared cipher)"
        );
        assert_eq!(e.level, Level::Info);
        let e = TlsError::from_rustls(
            Call::Read,
            &rustls::Error::AlertReceived(rustls::AlertDescription::HandshakeFailure),
        );
        assert_eq!(
            e.message,
            "SSL_read() failed (SSL: error:0A000410:SSL routines::sslv3 alert handshake failure:SSL alert number 40)"
        );
        let e = TlsError::from_rustls(Call::Handshake, &rustls::Error::General("x".into()));
        assert_eq!(e.level, Level::Crit);
        let reset = io::Error::from_raw_os_error(libc::ECONNRESET);
        let e = TlsError::io(Call::Handshake, &reset);
        assert_eq!(
            e.message,
            "SSL_do_handshake() failed (104: Connection reset by peer)"
        );
        assert_eq!(e.level, Level::Info);
    }
}
