//! Password checks for htpasswd lines, as nginx 1.22 on Debian makes them: its own `$apr1$`,
//! `{PLAIN}`, `{SHA}` and `{SSHA}`, and for anything else the system's `crypt(3)` (libxcrypt),
//! here `$1$` (md5-crypt), `$5$` and `$6$` (sha-crypt, with `rounds=`), `$2a$`/`$2b$`/`$2y$`
//! (bcrypt), `$y$` (yescrypt, mkpasswd's default), `$sha1$`, `_` (BSDi DES) and traditional
//! DES (`htpasswd -d`). A line in none of
//! these (`htpasswd -p`'s bare text, garbage) is what crypt(3) makes of it: DES with the
//! line's first two characters as salt, or a failure; either way a mismatch, as in nginx.
//! Debian's crypt(3) also reads gost-yescrypt, scrypt (`$7$`), SunMD5 and NT hashes; shoal
//! does not, and says so ([`Verify::Unsupported`]).
//!
//! The digests, bcrypt, yescrypt and DES are vetted crates' (md-5, sha-1, sha2, pwhash,
//! yescrypt); md5-crypt,
//! apr1 and sha-crypt are assembled here from their specifications and checked against
//! `htpasswd`, `openssl passwd` and `mkpasswd` outputs. The password ends at its first NUL
//! byte (nginx hands C strings to crypt). Everything here is CPU work that may take
//! milliseconds: [`is_costly`] says which checks belong off the worker.

use md5::{Digest, Md5};
use sha1::Sha1;
use sha2::{Sha256, Sha512};

/// The result of checking a password against an htpasswd line's hash.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verify {
    Match,
    Mismatch,
    /// A scheme Debian's nginx reads and shoal does not (its prefix, e.g. `$7$`).
    Unsupported(&'static str),
}

const ITOA64: &[u8; 64] = b"./0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";

/// Schemes of Debian's crypt(3) that shoal lacks.
const UNSUPPORTED: [&str; 4] = ["$gy$", "$7$", "$md5", "$3$"];

/// Whether checking against `hash` is slow enough to run on a pool thread (every `$…$` and
/// BSDi scheme: hundreds of µs to tens of ms).
pub fn is_costly(hash: &[u8]) -> bool {
    matches!(hash.first(), Some(b'$' | b'_'))
}

/// Checks `password` against `hash` (an htpasswd line's second field).
pub fn verify(password: &[u8], hash: &[u8]) -> Verify {
    let password = match memchr::memchr(0, password) {
        Some(end) => &password[..end],
        None => password,
    };
    let computed: Option<Vec<u8>> = if hash.starts_with(b"$apr1$") {
        Some(md5_crypt(password, hash, b"$apr1$"))
    } else if let Some(plain) = hash.strip_prefix(b"{PLAIN}") {
        return same(password, plain);
    } else if let Some(stored) = hash.strip_prefix(b"{SSHA}") {
        return ssha(password, stored);
    } else if let Some(stored) = hash.strip_prefix(b"{SHA}") {
        let digest = Sha1::digest(password);
        return same(base64_encode(&digest).as_bytes(), stored);
    } else if hash.starts_with(b"$y$") {
        return yescrypt(password, hash);
    } else {
        if let Some(scheme) = UNSUPPORTED.iter().find(|p| hash.starts_with(p.as_bytes())) {
            return Verify::Unsupported(scheme);
        }
        libc_crypt(password, hash)
    };
    match computed {
        Some(c) => same(&c, hash),
        None => Verify::Mismatch,
    }
}

/// yescrypt (`$y$`, mkpasswd's default on Debian), as libxcrypt checks it; a line it cannot
/// read is a mismatch, as crypt(3)'s failure token is.
fn yescrypt(password: &[u8], hash: &[u8]) -> Verify {
    use yescrypt::{PasswordHashRef, PasswordVerifier, Yescrypt};
    let Some(parsed) = std::str::from_utf8(hash)
        .ok()
        .and_then(|h| PasswordHashRef::new(h).ok())
    else {
        return Verify::Mismatch;
    };
    match Yescrypt::default().verify_password(password, parsed) {
        Ok(()) => Verify::Match,
        Err(_) => Verify::Mismatch,
    }
}

/// What crypt(3) returns for `hash` as its setting; `None` for its failure token. (DES and
/// BSDi are deprecated for new passwords; checking old ones is what a server must still do.)
#[allow(deprecated)]
fn libc_crypt(password: &[u8], hash: &[u8]) -> Option<Vec<u8>> {
    if hash.starts_with(b"$1$") {
        return Some(md5_crypt(password, hash, b"$1$"));
    }
    if hash.starts_with(b"$5$") {
        return sha_crypt::<Sha256>(password, hash, b"$5$");
    }
    if hash.starts_with(b"$6$") {
        return sha_crypt::<Sha512>(password, hash, b"$6$");
    }
    let text = std::str::from_utf8(hash).ok()?;
    let out = if text.starts_with("$2a$") || text.starts_with("$2b$") || text.starts_with("$2y$") {
        pwhash::bcrypt::hash_with(text, password)
    } else if text.starts_with("$sha1$") {
        pwhash::sha1_crypt::hash_with(text, password)
    } else if text.starts_with('_') {
        pwhash::bsdi_crypt::hash_with(text, password)
    } else if text.starts_with('$') {
        return None;
    } else {
        // Traditional DES takes the first two characters as its salt.
        let salt = text.get(..2)?;
        if !salt.bytes().all(|c| ITOA64.contains(&c)) {
            return None;
        }
        pwhash::unix_crypt::hash_with(salt, password)
    };
    out.ok().map(String::into_bytes)
}

/// Equality of two secrets' forms without an early exit.
fn same(a: &[u8], b: &[u8]) -> Verify {
    let diff = a.len() != b.len();
    let bytes = a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y));
    if !diff && bytes == 0 {
        Verify::Match
    } else {
        Verify::Mismatch
    }
}

/// `{SSHA}base64(sha1(password + salt) + salt)`.
fn ssha(password: &[u8], stored: &[u8]) -> Verify {
    let Some(decoded) = base64_decode(stored) else {
        return Verify::Mismatch;
    };
    if decoded.len() < 20 {
        return Verify::Mismatch;
    }
    let salt = &decoded[20..];
    let mut h = Sha1::new();
    h.update(password);
    h.update(salt);
    let mut out = h.finalize().to_vec();
    out.extend_from_slice(salt);
    same(base64_encode(&out).as_bytes(), stored)
}

/// Appends `n` characters of crypt's base-64 for the low bits of `v`.
fn to64(out: &mut Vec<u8>, mut v: u32, n: usize) {
    for _ in 0..n {
        out.push(ITOA64[(v & 0x3f) as usize]);
        v >>= 6;
    }
}

/// The salt of a crypt setting: after the magic, up to `$` or `max` characters.
fn salt_of(setting: &[u8], max: usize) -> &[u8] {
    let end = memchr::memchr(b'$', setting).unwrap_or(setting.len());
    &setting[..end.min(max)]
}

/// Poul-Henning Kamp's md5-crypt (`$1$`), or Apache's `$apr1$` (the same with its own magic).
pub fn md5_crypt(password: &[u8], setting: &[u8], magic: &[u8]) -> Vec<u8> {
    let salt = salt_of(&setting[magic.len()..], 8);
    let alt = {
        let mut h = Md5::new();
        h.update(password);
        h.update(salt);
        h.update(password);
        h.finalize()
    };
    let mut h = Md5::new();
    h.update(password);
    h.update(magic);
    h.update(salt);
    let mut left = password.len();
    while left > 0 {
        let n = left.min(16);
        h.update(&alt[..n]);
        left -= n;
    }
    let mut i = password.len();
    while i > 0 {
        if i & 1 == 1 {
            h.update([0u8]);
        } else {
            h.update(&password[..1]);
        }
        i >>= 1;
    }
    let mut fin = h.finalize();
    for round in 0..1000 {
        let mut h = Md5::new();
        if round & 1 == 1 {
            h.update(password);
        } else {
            h.update(fin);
        }
        if round % 3 != 0 {
            h.update(salt);
        }
        if round % 7 != 0 {
            h.update(password);
        }
        if round & 1 == 1 {
            h.update(fin);
        } else {
            h.update(password);
        }
        fin = h.finalize();
    }
    let mut out = Vec::with_capacity(magic.len() + salt.len() + 23);
    out.extend_from_slice(magic);
    out.extend_from_slice(salt);
    out.push(b'$');
    let b = |i: usize| u32::from(fin[i]);
    for (x, y, z) in [(0, 6, 12), (1, 7, 13), (2, 8, 14), (3, 9, 15), (4, 10, 5)] {
        to64(&mut out, b(x) << 16 | b(y) << 8 | b(z), 4);
    }
    to64(&mut out, b(11), 2);
    out
}

/// Ulrich Drepper's sha-crypt (`$5$` with SHA-256, `$6$` with SHA-512), with `rounds=`.
fn sha_crypt<D: Digest + Clone>(password: &[u8], setting: &[u8], magic: &[u8]) -> Option<Vec<u8>> {
    let mut rest = &setting[magic.len()..];
    let mut rounds: Option<u64> = None;
    if let Some(r) = rest.strip_prefix(b"rounds=") {
        let end = memchr::memchr(b'$', r)?;
        let n: u64 = std::str::from_utf8(&r[..end]).ok()?.parse().ok()?;
        rounds = Some(n.clamp(1000, 999_999_999));
        rest = &r[end + 1..];
    }
    let salt = salt_of(rest, 16);
    let size = <D as Digest>::output_size();
    let b = {
        let mut h = D::new();
        h.update(password);
        h.update(salt);
        h.update(password);
        h.finalize()
    };
    let mut h = D::new();
    h.update(password);
    h.update(salt);
    let mut left = password.len();
    while left > 0 {
        let n = left.min(size);
        h.update(&b[..n]);
        left -= n;
    }
    let mut i = password.len();
    while i > 0 {
        if i & 1 == 1 {
            h.update(&b);
        } else {
            h.update(password);
        }
        i >>= 1;
    }
    let a = h.finalize();
    let repeat = |digest: &[u8], len: usize| -> Vec<u8> {
        digest.iter().copied().cycle().take(len).collect()
    };
    let p = {
        let mut h = D::new();
        for _ in 0..password.len() {
            h.update(password);
        }
        repeat(&h.finalize(), password.len())
    };
    let s = {
        let mut h = D::new();
        for _ in 0..16 + usize::from(a[0]) {
            h.update(salt);
        }
        repeat(&h.finalize(), salt.len())
    };
    let mut c = a.to_vec();
    for round in 0..rounds.unwrap_or(5000) {
        let mut h = D::new();
        if round & 1 == 1 {
            h.update(&p);
        } else {
            h.update(&c);
        }
        if round % 3 != 0 {
            h.update(&s);
        }
        if round % 7 != 0 {
            h.update(&p);
        }
        if round & 1 == 1 {
            h.update(&c);
        } else {
            h.update(&p);
        }
        c = h.finalize().to_vec();
    }
    let mut out = magic.to_vec();
    if let Some(r) = rounds {
        out.extend_from_slice(format!("rounds={r}$").as_bytes());
    }
    out.extend_from_slice(salt);
    out.push(b'$');
    let v = |i: usize| u32::from(c[i]);
    let third = size / 3;
    for i in 0..third {
        let (x, y, z) = (i, i + third, i + 2 * third);
        // The spec turns each triple one way for SHA-512 and the other for SHA-256.
        let (x, y, z) = match (i % 3, size == 64) {
            (0, _) => (x, y, z),
            (1, true) | (2, false) => (y, z, x),
            _ => (z, x, y),
        };
        to64(&mut out, v(x) << 16 | v(y) << 8 | v(z), 4);
    }
    if size == 64 {
        to64(&mut out, v(63), 2);
    } else {
        to64(&mut out, v(31) << 8 | v(30), 3);
    }
    Some(out)
}

const B64: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/// Standard base64 with padding.
pub fn base64_encode(data: &[u8]) -> String {
    let mut out = String::with_capacity(data.len().div_ceil(3) * 4);
    for chunk in data.chunks(3) {
        let n = chunk.len();
        let v = u32::from(chunk[0]) << 16
            | u32::from(*chunk.get(1).unwrap_or(&0)) << 8
            | u32::from(*chunk.get(2).unwrap_or(&0));
        for k in 0..4 {
            if k <= n {
                out.push(B64[(v >> (18 - 6 * k) & 0x3f) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// Base64 as nginx's `ngx_decode_base64` reads it: the standard alphabet up to the first `=`
/// (what follows is ignored), a length that is not 1 more than a multiple of 4.
pub fn base64_decode(text: &[u8]) -> Option<Vec<u8>> {
    let end = memchr::memchr(b'=', text).unwrap_or(text.len());
    let text = &text[..end];
    if text.len() % 4 == 1 {
        return None;
    }
    let val = |c: u8| B64.iter().position(|&x| x == c).map(|p| p as u32);
    let mut out = Vec::with_capacity(text.len() / 4 * 3 + 2);
    for chunk in text.chunks(4) {
        let mut v = 0u32;
        for (k, &c) in chunk.iter().enumerate() {
            v |= val(c)? << (18 - 6 * k);
        }
        let bytes = v.to_be_bytes();
        out.extend_from_slice(&bytes[1..chunk.len()]);
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_as_nginx() {
        assert_eq!(base64_encode(b"alice:secret"), "YWxpY2U6c2VjcmV0");
        assert_eq!(base64_encode(b"a"), "YQ==");
        assert_eq!(base64_encode(b"ab"), "YWI=");
        assert_eq!(base64_decode(b"YWI=").as_deref(), Some(&b"ab"[..]));
        assert_eq!(base64_decode(b"YWI").as_deref(), Some(&b"ab"[..]));
        assert_eq!(base64_decode(b"YQ==garbage").as_deref(), Some(&b"a"[..]));
        assert_eq!(base64_decode(b"Y"), None);
        assert_eq!(base64_decode(b"YW*="), None);
        assert_eq!(base64_decode(b"").as_deref(), Some(&b""[..]));
    }

    #[test]
    fn nginx_s_own_schemes() {
        assert_eq!(verify(b"secret", b"{PLAIN}secret"), Verify::Match);
        assert_eq!(verify(b"secreT", b"{PLAIN}secret"), Verify::Mismatch);
        assert_eq!(
            verify(b"secret", b"{SHA}5en6G6MezRroT3XKqkdPOmY/BfQ="),
            Verify::Match
        );
        // sha1("secret" + "abcd") + "abcd"
        assert_eq!(
            verify(b"secret", b"{SSHA}+RFhsab2AfzZ0VfEdyknXtUT06RhYmNk"),
            Verify::Match
        );
        assert_eq!(
            verify(b"secrets", b"{SSHA}+RFhsab2AfzZ0VfEdyknXtUT06RhYmNk"),
            Verify::Mismatch
        );
        assert_eq!(verify(b"secret", b"{SSHA}x"), Verify::Mismatch);
        // A NUL ends the password, as in nginx.
        assert_eq!(verify(b"secret\0more", b"{PLAIN}secret"), Verify::Match);
    }

    /// Outputs of `htpasswd`, `openssl passwd` and `mkpasswd` for "secret" (made on Debian 12).
    #[test]
    fn crypt_schemes_match_the_tools() {
        for hash in [
            "$apr1$eyNVepJP$hGC.S7bFeflt232gwg/SP/",
            "$apr1$kAuZnx.2$3M2CyMFX/aPQOqiW5FKcu1",
            "$1$wNOQ0e/c$a0NOso2DtiTrG9GOJK5b61",
            "$5$LkvXp0nnvTlWwb0V$Pttkz5xf5H3blSg5zJy7CWZji.uQZ8xgAArFpikMZv4",
            "$6$rikRzFwDAPCfFcyF$RAHLvbFEdsIuDsF3urOlJLsmWsIAc3uzpAEZxJ.hatSNRNtmlT5Cis.PxJjd6zr/8sRH4Sr39HqUpSOfXBhzj/",
            "$6$rounds=10000$AQ8z7pATQt.BDdBQ$hMFfAaMqPuvv6iDeoxFFIeFznmoFFeKTbWAJgk5vLDBVF8bOaO/GxdAfeZkBoW6ai1ZkRkurOk3k04a2UIAWE0",
            "$2y$05$Br8tzG5Y/EgQbT06K6k.r.HhYNiBkT33PkBvqHlahrsVnBGfH5h/G",
            "$2b$05$kKSrDBSpHZislWzNpyzrJeN4dksriC.vs2LPHxmuTt/TetsofSs2e",
            "$2a$05$uOGaVt0sqXeypys4gbbGYeisonItMXJAFJvn9lGw5fS0/7nsMv2LK",
            "_J9..iWzVGWDA3C24kjI",
            "0yUJrVkBRIb7M",
        ] {
            assert_eq!(verify(b"secret", hash.as_bytes()), Verify::Match, "{hash}");
            assert_eq!(
                verify(b"Secret", hash.as_bytes()),
                Verify::Mismatch,
                "{hash}"
            );
        }
    }

    #[test]
    fn what_crypt_cannot_read_is_a_mismatch() {
        // htpasswd -p writes the bare password, which crypt(3) reads as a DES setting.
        assert_eq!(verify(b"secret", b"secret"), Verify::Mismatch);
        assert_eq!(verify(b"secret", b"garbage"), Verify::Mismatch);
        assert_eq!(verify(b"secret", b""), Verify::Mismatch);
        assert_eq!(verify(b"secret", b"$9$x$y"), Verify::Mismatch);
        assert_eq!(verify(b"secret", b"\xff\xfe"), Verify::Mismatch);
        assert_eq!(verify(b"secret", b"$6$rounds=x$salt$h"), Verify::Mismatch);
        assert_eq!(verify(b"secret", b"$y$j9T$"), Verify::Mismatch);
        assert_eq!(verify(b"secret", b"$y$zz$salt$hash"), Verify::Mismatch);
        assert_eq!(
            verify(b"secret", b"$gy$j9T$a$b"),
            Verify::Unsupported("$gy$")
        );
    }

    /// yescrypt lines as Debian's libxcrypt makes them (`mkpasswd`, Python's `crypt` on
    /// Debian 12 for the second).
    #[test]
    fn yescrypt_as_libxcrypt() {
        let hash = b"$y$j9T$abcdefghijklmnop$wRwvHNqzMkHLG74uLLCRVTwaZ.a1aIothEUeYGf9oED";
        assert_eq!(verify(b"pw", hash), Verify::Match);
        assert_eq!(verify(b"pW", hash), Verify::Mismatch);
        assert!(is_costly(hash));
    }

    #[test]
    fn costly_schemes() {
        assert!(is_costly(b"$2y$10$abc"));
        assert!(is_costly(b"_J9..abcd"));
        assert!(!is_costly(b"{SHA}abc"));
        assert!(!is_costly(b"0yUJrVkBRIb7M"));
    }
}
