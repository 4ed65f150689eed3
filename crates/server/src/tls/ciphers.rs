//! OpenSSL's cipher strings (`ssl_ciphers`, `ssl_conf_command Ciphersuites`) read as OpenSSL
//! 3.0 reads them, and mapped onto the suites rustls offers; OpenSSL's names of suites for
//! `$ssl_cipher` and `$ssl_ciphers`.
//!
//! The string is evaluated over every suite OpenSSL knows (the generated `ciphers_table.rs`),
//! so that a string OpenSSL accepts is accepted here even when it selects nothing rustls has
//! (`AES128-SHA`), and a string that selects nothing at all is nginx's error. rustls has six
//! TLSv1.2 suites (ECDHE with ECDSA or RSA, AES-GCM or ChaCha20-Poly1305) and the three of
//! TLSv1.3; the others are known by name only.

use rustls::crypto::aws_lc_rs::ALL_CIPHER_SUITES;
use rustls::SupportedCipherSuite;

/// One suite as OpenSSL knows it.
#[derive(Debug)]
pub(super) struct Cipher {
    /// The IANA code point.
    pub id: u16,
    /// OpenSSL's name (`ECDHE-RSA-AES128-GCM-SHA256`, `TLS_AES_128_GCM_SHA256`).
    pub name: &'static str,
    pub tls13: bool,
    /// The encryption's strength in bits (what `@STRENGTH` sorts by).
    pub bits: u16,
    /// Bit `i` set: alias `ALIASES[i]` selects this suite.
    pub aliases: u128,
}

include!("ciphers_table.rs");

/// Why a cipher string was refused, in OpenSSL's words (`SSL routines::REASON`).
#[derive(Debug, PartialEq, Eq)]
pub enum CipherError {
    /// `error:0A0000B9:SSL routines::no cipher match`
    NoMatch,
    /// `error:0A00010D:SSL routines::invalid command` (an unknown `@` command).
    InvalidCommand,
}

impl CipherError {
    /// The text nginx prints after `(SSL: `.
    pub fn openssl(&self) -> &'static str {
        match self {
            CipherError::NoMatch => "error:0A0000B9:SSL routines::no cipher match",
            CipherError::InvalidCommand => "error:0A00010D:SSL routines::invalid command",
        }
    }
}

/// OpenSSL's name of a suite by its code point (`None`: OpenSSL does not know it either).
pub fn openssl_name(id: u16) -> Option<&'static str> {
    CIPHERS.iter().find(|c| c.id == id).map(|c| c.name)
}

/// The TLSv1.2 (and older) suites a cipher string selects, in its order, as OpenSSL's
/// `SSL_CTX_set_cipher_list` builds them.
fn evaluate(spec: &str) -> Result<Vec<&'static Cipher>, CipherError> {
    struct Entry {
        cipher: &'static Cipher,
        active: bool,
        killed: bool,
    }
    let mut list: Vec<Entry> = CIPHERS
        .iter()
        .filter(|c| !c.tls13)
        .map(|cipher| Entry {
            cipher,
            active: false,
            killed: false,
        })
        .collect();
    for rule in spec.split([':', ',', ' ', ';']).filter(|r| !r.is_empty()) {
        if let Some(command) = rule.strip_prefix('@') {
            if command == "STRENGTH" {
                list.sort_by_key(|e| std::cmp::Reverse(e.cipher.bits));
                continue;
            }
            if command
                .strip_prefix("SECLEVEL=")
                .is_some_and(|n| n.len() == 1 && n.as_bytes()[0].is_ascii_digit())
            {
                continue;
            }
            return Err(CipherError::InvalidCommand);
        }
        let (op, body) = match rule.as_bytes()[0] {
            b'!' | b'-' | b'+' => (rule.as_bytes()[0], &rule[1..]),
            _ => (b'=', rule),
        };
        // `A+B`: the suites every part selects; a part nobody knows voids the rule.
        let mut matches: Option<Vec<bool>> = Some(vec![true; list.len()]);
        for part in body.split('+') {
            let Some(sel) = matches.as_mut() else { break };
            if let Some(bit) = ALIASES.iter().position(|a| *a == part) {
                for (m, e) in sel.iter_mut().zip(&list) {
                    *m &= e.cipher.aliases & (1u128 << bit) != 0;
                }
            } else if list.iter().any(|e| e.cipher.name == part) {
                for (m, e) in sel.iter_mut().zip(&list) {
                    *m &= e.cipher.name == part;
                }
            } else {
                matches = None;
            }
        }
        let Some(sel) = matches else { continue };
        let (hit, mut rest): (Vec<_>, Vec<_>) = list.into_iter().zip(sel).partition(|(e, m)| {
            *m && match op {
                b'=' => !e.killed && !e.active,
                // `+` moves, `-` takes out, only what is in the list now.
                b'+' | b'-' => e.active,
                _ => true,
            }
        });
        let mut hit: Vec<Entry> = hit.into_iter().map(|(e, _)| e).collect();
        let rest_entries = rest.drain(..).map(|(e, _)| e);
        list = match op {
            b'=' | b'+' => {
                for e in &mut hit {
                    e.active = true;
                }
                rest_entries.chain(hit).collect()
            }
            b'-' => {
                for e in &mut hit {
                    e.active = false;
                }
                hit.into_iter().chain(rest_entries).collect()
            }
            _ => {
                for e in &mut hit {
                    e.active = false;
                    e.killed = true;
                }
                hit.into_iter().chain(rest_entries).collect()
            }
        };
    }
    let out: Vec<&'static Cipher> = list.iter().filter(|e| e.active).map(|e| e.cipher).collect();
    if out.is_empty() {
        return Err(CipherError::NoMatch);
    }
    Ok(out)
}

/// What a cipher string (`ssl_ciphers`) gives rustls: its TLSv1.2 suites in the string's order
/// (possibly none: the string selected only suites rustls lacks).
pub fn tls12_suites(spec: &str) -> Result<Vec<SupportedCipherSuite>, CipherError> {
    Ok(evaluate(spec)?
        .into_iter()
        .filter_map(|c| rustls_suite(c.id))
        .filter(|s| s.version() == &rustls::version::TLS12)
        .collect())
}

/// `ssl_conf_command Ciphersuites`: TLSv1.3 suite names separated by `:`, every one known, in
/// the order given (an unknown name refuses the whole list, as OpenSSL does).
pub fn tls13_suites(spec: &str) -> Result<Vec<SupportedCipherSuite>, CipherError> {
    let mut out = Vec::new();
    for name in spec.split(':').filter(|n| !n.is_empty()) {
        let c = CIPHERS
            .iter()
            .find(|c| c.tls13 && c.name == name)
            .ok_or(CipherError::NoMatch)?;
        if let Some(s) = rustls_suite(c.id) {
            out.push(s);
        }
    }
    Ok(out)
}

/// OpenSSL 3.0's default TLSv1.3 suites, in its order.
pub fn default_tls13_suites() -> Vec<SupportedCipherSuite> {
    tls13_suites("TLS_AES_256_GCM_SHA384:TLS_CHACHA20_POLY1305_SHA256:TLS_AES_128_GCM_SHA256")
        .expect("the default suites are known")
}

fn rustls_suite(id: u16) -> Option<SupportedCipherSuite> {
    ALL_CIPHER_SUITES
        .iter()
        .find(|s| u16::from(s.suite()) == id)
        .copied()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(spec: &str) -> Vec<&'static str> {
        evaluate(spec).unwrap().iter().map(|c| c.name).collect()
    }

    #[test]
    fn nginx_default_string() {
        let all = names("HIGH:!aNULL:!MD5");
        assert!(all.contains(&"ECDHE-RSA-AES128-GCM-SHA256"));
        assert!(!all.iter().any(|n| n.starts_with("ADH")));
        let rustls: Vec<_> = tls12_suites("HIGH:!aNULL:!MD5").unwrap();
        assert_eq!(rustls.len(), 6);
    }

    #[test]
    fn nothing_selected_is_an_error() {
        assert_eq!(evaluate("FOO").err(), Some(CipherError::NoMatch));
        assert_eq!(evaluate("").err(), Some(CipherError::NoMatch));
        assert_eq!(evaluate("HIGH:!HIGH").err(), Some(CipherError::NoMatch));
        assert_eq!(
            evaluate("HIGH:@FOO").err(),
            Some(CipherError::InvalidCommand)
        );
        // Unknown rules are skipped, as OpenSSL skips them.
        assert!(evaluate("FOO:HIGH").is_ok());
    }

    #[test]
    fn a_string_of_suites_rustls_lacks_selects_none_of_its() {
        assert_eq!(names("AES128-SHA"), vec!["AES128-SHA"]);
        assert!(tls12_suites("AES128-SHA").unwrap().is_empty());
    }

    #[test]
    fn order_and_operators() {
        let ordered = names("ECDHE-RSA-CHACHA20-POLY1305:ECDHE-RSA-AES128-GCM-SHA256");
        assert_eq!(
            ordered,
            vec!["ECDHE-RSA-CHACHA20-POLY1305", "ECDHE-RSA-AES128-GCM-SHA256"]
        );
        // `+` moves to the end; `-` removes for now, `!` for good.
        let moved = names("ECDHE-RSA-AES128-GCM-SHA256:ECDHE-RSA-CHACHA20-POLY1305:+AESGCM");
        assert_eq!(moved[0], "ECDHE-RSA-CHACHA20-POLY1305");
        let readded = names("ECDHE+AESGCM:-AES128:AES128+ECDHE+aRSA+AESGCM");
        assert_eq!(readded.last(), Some(&"ECDHE-RSA-AES128-GCM-SHA256"));
        let killed = names("ECDHE+AESGCM:!AES128:AES128");
        assert!(!killed.iter().any(|n| n.contains("AES128")));
    }

    /// The evaluator agrees with this machine's OpenSSL on the strings real configurations use.
    #[test]
    fn agrees_with_openssl() {
        let specs = [
            "HIGH:!aNULL:!MD5",
            "ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-RSA-AES128-GCM-SHA256:ECDHE-ECDSA-AES256-GCM-SHA384:ECDHE-RSA-AES256-GCM-SHA384:ECDHE-ECDSA-CHACHA20-POLY1305:ECDHE-RSA-CHACHA20-POLY1305:DHE-RSA-AES128-GCM-SHA256:DHE-RSA-AES256-GCM-SHA384",
            "EECDH+AESGCM:EDH+AESGCM",
            "EECDH+AESGCM:EDH+AESGCM:AES256+EECDH:AES256+EDH",
            "ALL:!EXPORT:!LOW:!aNULL:!eNULL:!SSLv2",
            "HIGH:!aNULL:!MD5:@STRENGTH",
            "DEFAULT:!RSA",
            "kEECDH+aECDSA:-AES128:AES128+kEECDH",
        ];
        for spec in specs {
            let Ok(out) = std::process::Command::new("openssl")
                .args(["ciphers", &format!("{spec}:@SECLEVEL=0")])
                .output()
            else {
                return; // no openssl here: nothing to compare with
            };
            let theirs: Vec<String> = String::from_utf8_lossy(&out.stdout)
                .trim()
                .split(':')
                .filter(|n| !n.starts_with("TLS_"))
                .map(str::to_string)
                .collect();
            assert_eq!(names(spec), theirs, "{spec}");
        }
    }

    #[test]
    fn tls13_names() {
        assert_eq!(tls13_suites("TLS_AES_128_GCM_SHA256").unwrap().len(), 1);
        assert_eq!(tls13_suites("TLS_FOO").err(), Some(CipherError::NoMatch));
        assert_eq!(default_tls13_suites().len(), 3);
        assert_eq!(openssl_name(0xC02F), Some("ECDHE-RSA-AES128-GCM-SHA256"));
        assert_eq!(openssl_name(0x1301), Some("TLS_AES_128_GCM_SHA256"));
    }
}
