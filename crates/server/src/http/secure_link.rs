//! nginx's ngx_http_secure_link_module: `$secure_link` and `$secure_link_expires`.
//!
//! With `secure_link VALUE` and `secure_link_md5 EXPRESSION` (http, server, location):
//! VALUE is the link's checksum, base64url (RFC 4648 §5, padding optional), and after a comma
//! an expiry time in seconds since the epoch. `$secure_link` is `1` when the checksum is the
//! MD5 of EXPRESSION's value and the time has not passed, `0` when it has passed, and has no
//! value otherwise (a checksum longer than 24 characters or not decoding to 16 bytes, an
//! expiry that is not a positive number, a mismatch). `$secure_link_expires` is the text
//! after the comma, which EXPRESSION usually includes.
//!
//! With `secure_link_secret WORD` (location; not mixed with the two others): the request's URI
//! as sent is `/PREFIX/HASH/LINK` with HASH 32 hex digits, the MD5 of LINK (its arguments
//! included) followed by WORD; `$secure_link` is LINK when it matches, and has no value
//! otherwise.
//!
//! Unlike nginx, `$secure_link_expires` has its value also in a template that reads it
//! without (or before) `$secure_link`; nginx's is set only once `$secure_link` was evaluated.

use std::sync::Arc;

use md5::{Digest, Md5};
use shoal_conf::{Directive, Error};

use crate::conf::{err, Args, Builder, Command, Ctx, Scope};
use crate::http::loc_conf;
use crate::variables::{Template, Vars};

pub static DIRECTIVES: &[Command] = &[
    Command::new(
        "secure_link",
        Ctx::HTTP.or(Ctx::SERVER).or(Ctx::LOCATION),
        Args::ONE,
        set_secure_link,
    ),
    Command::new(
        "secure_link_md5",
        Ctx::HTTP.or(Ctx::SERVER).or(Ctx::LOCATION),
        Args::ONE,
        set_secure_link_md5,
    ),
    Command::new(
        "secure_link_secret",
        Ctx::LOCATION,
        Args::ONE,
        set_secure_link_secret,
    ),
];

/// The module's configuration of a level.
#[derive(Clone, Debug, Default)]
pub struct SecureLinkLoc {
    /// `secure_link`: the checksum and expiry.
    variable: Option<Arc<Template>>,
    /// `secure_link_md5`: what the checksum is of.
    md5: Option<Arc<Template>>,
    /// `secure_link_secret`.
    secret: Option<Arc<str>>,
}

const MIXED: &str =
    "\"secure_link_secret\" cannot be mixed with \"secure_link\" and \"secure_link_md5\"";

fn template(d: &Directive) -> Result<Arc<Template>, Error> {
    Template::compile(&d.args[0].value)
        .map(Arc::new)
        .map_err(|m| err(d, m))
}

fn set_secure_link(_: &mut Builder, d: &Directive, s: &mut Scope<'_>) -> Result<(), Error> {
    let loc = &mut loc_conf(s).secure_link;
    if loc.variable.is_some() {
        return Err(crate::conf::duplicate(d));
    }
    if loc.secret.is_some() {
        return Err(err(d, MIXED));
    }
    loc.variable = Some(template(d)?);
    Ok(())
}

fn set_secure_link_md5(_: &mut Builder, d: &Directive, s: &mut Scope<'_>) -> Result<(), Error> {
    let loc = &mut loc_conf(s).secure_link;
    if loc.md5.is_some() {
        return Err(crate::conf::duplicate(d));
    }
    if loc.secret.is_some() {
        return Err(err(d, MIXED));
    }
    loc.md5 = Some(template(d)?);
    Ok(())
}

fn set_secure_link_secret(_: &mut Builder, d: &Directive, s: &mut Scope<'_>) -> Result<(), Error> {
    let loc = &mut loc_conf(s).secure_link;
    if loc.secret.is_some() {
        return Err(crate::conf::duplicate(d));
    }
    if loc.variable.is_some() || loc.md5.is_some() {
        return Err(err(d, MIXED));
    }
    loc.secret = Some(d.args[0].value.as_str().into());
    Ok(())
}

/// nginx's `ngx_atotm`: decimal digits only, `None` for anything else or an overflow.
fn atotm(s: &[u8]) -> Option<i64> {
    if s.is_empty() {
        return None;
    }
    s.iter().try_fold(0i64, |n, &c| {
        if !c.is_ascii_digit() {
            return None;
        }
        n.checked_mul(10)?.checked_add(i64::from(c - b'0'))
    })
}

/// nginx's `ngx_decode_base64url`: up to the first `=`, every character of the URL-safe
/// alphabet, not one past a whole group of four.
fn decode_base64url(s: &[u8]) -> Option<Vec<u8>> {
    let digit = |c: u8| -> Option<u32> {
        Some(match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'-' => 62,
            b'_' => 63,
            _ => return None,
        } as u32)
    };
    let len = s.iter().position(|&c| c == b'=').unwrap_or(s.len());
    let s = &s[..len];
    if s.len() % 4 == 1 {
        return None;
    }
    let mut out = Vec::with_capacity(s.len() * 3 / 4);
    for group in s.chunks(4) {
        let mut n = 0u32;
        for (i, &c) in group.iter().enumerate() {
            n |= digit(c)? << (18 - 6 * i);
        }
        let bytes = n.to_be_bytes();
        out.extend_from_slice(&bytes[1..group.len()]);
    }
    Some(out)
}

/// What follows the comma of `secure_link`'s value, when it is a positive time.
fn expires(value: &[u8]) -> Option<(usize, i64)> {
    let comma = value.iter().position(|&c| c == b',')?;
    let t = atotm(&value[comma + 1..]).filter(|&t| t > 0);
    Some((comma, t.unwrap_or(0)))
}

/// `$secure_link` with `secure_link` and `secure_link_md5`.
fn checked(loc: &SecureLinkLoc, vars: &Vars<'_>, out: &mut String) -> bool {
    let (Some(variable), Some(md5)) = (&loc.variable, &loc.md5) else {
        return false;
    };
    let value = vars.eval_bytes(variable);
    let (hash, expiry) = match expires(&value) {
        Some((_, 0)) => return false,
        Some((comma, t)) => (&value[..comma], Some(t)),
        None => (&value[..], None),
    };
    if hash.len() > 24 {
        return false;
    }
    let Some(hash) = decode_base64url(hash).filter(|h| h.len() == 16) else {
        return false;
    };
    if Md5::digest(vars.eval_bytes(md5))[..] != hash[..] {
        return false;
    }
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64);
    out.push(if expiry.is_some_and(|t| t < now) {
        '0'
    } else {
        '1'
    });
    true
}

/// `$secure_link` with `secure_link_secret`: the LINK of `/PREFIX/HASH/LINK`.
fn checked_secret(secret: &str, vars: &Vars<'_>, out: &mut String) -> bool {
    let Some(req) = vars.req else { return false };
    let uri = req.uri();
    // The second segment is the hash, the rest the link (nginx's old form).
    let Some(start) = uri.get(1..).and_then(|u| u.iter().position(|&c| c == b'/')) else {
        return false;
    };
    let start = start + 2;
    let Some(len) = uri[start..].iter().position(|&c| c == b'/') else {
        return false;
    };
    let (hex, link) = (&uri[start..start + len], &uri[start + len + 1..]);
    if hex.len() != 32 || link.is_empty() {
        return false;
    }
    let mut h = Md5::new();
    h.update(link);
    h.update(secret.as_bytes());
    let digest = h.finalize();
    let matches = hex.chunks(2).zip(digest.iter()).all(|(pair, &b)| {
        std::str::from_utf8(pair)
            .ok()
            .and_then(|p| u8::from_str_radix(p, 16).ok())
            == Some(b)
    });
    if matches {
        out.push_str(&shoal_http::lossy(link));
    }
    matches
}

/// The module's place in the module list: its variables.
pub struct Module;

impl crate::http::modules::HttpModule for Module {
    type Loc = SecureLinkLoc;
    const DIRECTIVES: &'static [Command] = DIRECTIVES;
    const VARIABLES: &'static [&'static str] = &["secure_link", "secure_link_expires"];

    fn merge(loc: &mut SecureLinkLoc, parent: &SecureLinkLoc) {
        if loc.secret.is_some() {
            return;
        }
        crate::conf::merge(&mut loc.variable, &parent.variable);
        crate::conf::merge(&mut loc.md5, &parent.md5);
        if loc.variable.is_none() && loc.md5.is_none() {
            loc.secret = parent.secret.clone();
        }
    }

    fn variable(
        loc: Option<&SecureLinkLoc>,
        name: &str,
        vars: &Vars<'_>,
        out: &mut String,
    ) -> Option<bool> {
        let Some(loc) = loc else { return Some(false) };
        if name == "secure_link_expires" {
            if loc.secret.is_some() {
                return Some(false);
            }
            let Some(variable) = &loc.variable else {
                return Some(false);
            };
            let value = vars.eval_bytes(variable);
            return Some(match expires(&value) {
                Some((comma, t)) if t > 0 => {
                    out.push_str(&shoal_http::lossy(&value[comma + 1..]));
                    true
                }
                _ => false,
            });
        }
        Some(match &loc.secret {
            Some(secret) => checked_secret(secret, vars, out),
            None => checked(loc, vars, out),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64url_decodes_as_nginx_with_or_without_padding() {
        assert_eq!(decode_base64url(b"aGk").unwrap(), b"hi");
        assert_eq!(decode_base64url(b"aGk=").unwrap(), b"hi");
        assert_eq!(decode_base64url(b"aGk=garbage").unwrap(), b"hi");
        assert_eq!(decode_base64url(b"-_-_").unwrap(), [0xfb, 0xff, 0xbf]);
        assert!(decode_base64url(b"a+b/").is_none());
        assert!(decode_base64url(b"aGkxZ").is_none());
        assert_eq!(decode_base64url(b"").unwrap(), b"");
    }

    #[test]
    fn expiry_is_a_positive_decimal_after_the_first_comma() {
        assert_eq!(expires(b"abc,2147483647"), Some((3, 2147483647)));
        assert_eq!(expires(b"abc,0"), Some((3, 0)));
        assert_eq!(expires(b"abc,12x"), Some((3, 0)));
        assert_eq!(expires(b"abc,"), Some((3, 0)));
        assert_eq!(expires(b"abc,99999999999999999999"), Some((3, 0)));
        assert_eq!(expires(b"abc"), None);
    }
}
