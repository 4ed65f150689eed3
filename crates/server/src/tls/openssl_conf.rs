//! OpenSSL's settings that nginx passes through, mapped onto rustls: `ssl_ecdh_curve` (group
//! names) and `ssl_conf_command` (the `SSL_CONF_cmd` commands that have a counterpart; a clear
//! error for the rest). Messages are OpenSSL's, as nginx prints them.

use rustls::crypto::SupportedKxGroup;
use rustls::SupportedCipherSuite;
use shoal_conf::Error;

use super::ciphers;
use super::conf::{Located, Protocols};

/// `ssl_ecdh_curve`: `auto` (OpenSSL 3.0's default list, less what rustls lacks) or a
/// `:`-separated list of names OpenSSL knows; `X25519MLKEM768` too (OpenSSL 3.5's name).
pub(crate) fn parse_groups(
    spec: &str,
) -> Result<Vec<&'static dyn SupportedKxGroup>, crate::error::Error> {
    use rustls::crypto::aws_lc_rs::kx_group;
    if spec == "auto" {
        return Ok(vec![
            kx_group::X25519,
            kx_group::SECP256R1,
            kx_group::SECP384R1,
        ]);
    }
    let mut out: Vec<&'static dyn SupportedKxGroup> = Vec::new();
    for name in spec.split(':') {
        let g: Option<&'static dyn SupportedKxGroup> = match name.to_ascii_lowercase().as_str() {
            "x25519" => Some(kx_group::X25519),
            "prime256v1" | "p-256" | "secp256r1" => Some(kx_group::SECP256R1),
            "secp384r1" | "p-384" => Some(kx_group::SECP384R1),
            "x25519mlkem768" => Some(kx_group::X25519MLKEM768),
            "secp256r1mlkem768" => Some(kx_group::SECP256R1MLKEM768),
            // Known to OpenSSL, not offered by rustls.
            "x448" | "secp521r1" | "p-521" | "ffdhe2048" | "ffdhe3072" | "ffdhe4096"
            | "ffdhe6144" | "ffdhe8192" | "brainpoolp256r1" | "brainpoolp384r1"
            | "brainpoolp512r1" | "secp224r1" | "p-224" | "secp256k1" => None,
            _ => {
                return Err(crate::error::Error::tls(format!(
                    "SSL_CTX_set1_curves_list(\"{spec}\") failed (SSL: error:0A080106:SSL routines::passed invalid argument:group '{name}' cannot be set)"
                )))
            }
        };
        if let Some(g) = g {
            if !out.iter().any(|o| o.name() == g.name()) {
                out.push(g);
            }
        }
    }
    if out.is_empty() {
        return Err(crate::error::Error::tls(format!(
            "\"ssl_ecdh_curve\" \"{spec}\" names no group shoal has (X25519, prime256v1, secp384r1, X25519MLKEM768)"
        )));
    }
    Ok(out)
}

/// `ssl_conf_command NAME VALUE`: the OpenSSL commands that map onto rustls.
#[allow(clippy::too_many_arguments)]
pub(crate) fn apply_conf_command(
    cmd: &Located<(String, String)>,
    protocols: &mut Protocols,
    cipher_string: &mut String,
    curves: &mut String,
    tls13_suites: &mut Vec<SupportedCipherSuite>,
    prefer: &mut bool,
    tickets: &mut bool,
    tls13_tickets: &mut usize,
) -> Result<(), Error> {
    let (name, value) = (&cmd.value.0, &cmd.value.1);
    let failed = |detail: String| {
        Error::new(
            format!("SSL_CONF_cmd(\"{name}\", \"{value}\") failed (SSL: {detail})"),
            None,
        )
    };
    let bad_value = || {
        failed(format!(
            "error:0A000180:SSL routines::bad value:cmd={name}, value={value}"
        ))
    };
    let unsupported = || {
        Error::new(
            format!("\"ssl_conf_command {name}\" is not supported by shoal"),
            Some(cmd.span.clone()),
        )
    };
    match name.to_ascii_lowercase().as_str() {
        "ciphersuites" => {
            *tls13_suites = ciphers::tls13_suites(value).map_err(|_| {
                failed(format!(
                    "error:0A0000B9:SSL routines::no cipher match error:0A000180:SSL routines::bad value:cmd={name}, value={value}"
                ))
            })?;
        }
        "cipherstring" => *cipher_string = value.clone(),
        "groups" | "curves" => *curves = value.clone(),
        "protocol" => {
            for item in value.split(',').map(str::trim) {
                let (on, v) = match item.as_bytes().first() {
                    Some(b'-') => (false, &item[1..]),
                    Some(b'+') => (true, &item[1..]),
                    _ => (true, item),
                };
                match v {
                    "ALL" => {
                        protocols.tls12 = on;
                        protocols.tls13 = on;
                    }
                    "TLSv1.2" => protocols.tls12 = on,
                    "TLSv1.3" => protocols.tls13 = on,
                    "SSLv2" | "SSLv3" | "TLSv1" | "TLSv1.1" => {}
                    _ => return Err(bad_value()),
                }
            }
        }
        "minprotocol" | "maxprotocol" => {
            let rank = |v: &str| match v {
                "None" => Some(0),
                "SSLv3" => Some(1),
                "TLSv1" => Some(2),
                "TLSv1.1" => Some(3),
                "TLSv1.2" => Some(4),
                "TLSv1.3" => Some(5),
                _ => None,
            };
            let r = rank(value).ok_or_else(bad_value)?;
            if name.eq_ignore_ascii_case("minprotocol") {
                protocols.tls12 &= r <= 4;
            } else if r != 0 {
                protocols.tls13 &= r >= 5;
                protocols.tls12 &= r >= 4;
            }
        }
        "options" => {
            for item in value.split(',').map(str::trim) {
                let (on, v) = match item.as_bytes().first() {
                    Some(b'-') => (false, &item[1..]),
                    _ => (true, item),
                };
                match v {
                    "ServerPreference" => *prefer = on,
                    "SessionTicket" => *tickets = on,
                    // Renegotiation is never allowed, compression never offered.
                    "NoRenegotiation" if on => {}
                    "Compression" if !on => {}
                    _ => return Err(unsupported()),
                }
            }
        }
        "numtickets" => {
            *tls13_tickets = value.parse().map_err(|_| bad_value())?;
        }
        // OpenSSL's commands that have no counterpart here.
        "signaturealgorithms"
        | "clientsignaturealgorithms"
        | "ecdhparameters"
        | "dhparameters"
        | "certificate"
        | "privatekey"
        | "serverinfofile"
        | "chaincafile"
        | "chaincapath"
        | "verifycafile"
        | "verifycapath"
        | "requestcafile"
        | "clientcafile"
        | "clientcapath"
        | "recordpadding"
        | "verifymode" => return Err(unsupported()),
        _ => {
            return Err(failed(format!(
                "error:0A000182:SSL routines::unknown cmd name:cmd={name}"
            )))
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn groups() {
        assert_eq!(parse_groups("auto").unwrap().len(), 3);
        assert_eq!(parse_groups("X25519MLKEM768:prime256v1").unwrap().len(), 2);
        assert_eq!(
            parse_groups("x25519:P-256:secp521r1:X448").unwrap().len(),
            2
        );
        assert_eq!(
            parse_groups("foo").unwrap_err(),
            "SSL_CTX_set1_curves_list(\"foo\") failed (SSL: error:0A080106:SSL routines::passed invalid argument:group 'foo' cannot be set)"
        );
        assert!(parse_groups("X448").is_err());
    }
}
