//! The charsets a configuration names and the `charset_map` tables between them: nginx's
//! charset module's main configuration, read once and shared by every location.
//!
//! A charset is known by every name `charset`, `source_charset` or `charset_map` writes
//! (compared without case; the first spelling is the one sent in `Content-Type`); `utf-8` is
//! the only multi-byte one. A map between two 8-bit charsets is one 256-byte table each way
//! (the bytes it does not name: ASCII as it is, the rest `?`); a map to `utf-8` gives each byte
//! one character (BMP only, as nginx reads it) and the way back from a character to its byte.
//! Nothing here runs per request but the lookups.

use std::sync::Arc;

use shoal_conf::{Directive, Error};

use crate::conf::err;

/// One charset a configuration names.
#[derive(Clone, Debug)]
struct Charset {
    /// As first written.
    name: String,
    utf8: bool,
}

/// A byte's character in UTF-8 (1 to 3 bytes).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Utf8Char {
    pub len: u8,
    pub bytes: [u8; 3],
}

impl Utf8Char {
    pub fn as_bytes(&self) -> &[u8] {
        &self.bytes[..usize::from(self.len)]
    }
}

/// The way back from UTF-8: for each character up to U+FFFF, the byte it maps to (0: none),
/// in pages of 256 characters allocated only where the map has some.
#[derive(Clone, Debug, Default)]
pub struct FromUtf8 {
    pages: Vec<Option<Box<[u8; 256]>>>,
}

impl FromUtf8 {
    /// The byte of character `c`, if the map has one.
    pub fn get(&self, c: u32) -> Option<u8> {
        let page = self.pages.get((c >> 8) as usize)?.as_ref()?;
        match page[(c & 0xff) as usize] {
            0 => None,
            b => Some(b),
        }
    }

    fn set(&mut self, c: u32, b: u8) {
        if self.pages.is_empty() {
            self.pages.resize_with(256, || None);
        }
        let page = self.pages[(c >> 8) as usize].get_or_insert_with(|| Box::new([0; 256]));
        page[(c & 0xff) as usize] = b;
    }
}

/// What a `charset_map` made.
#[derive(Debug)]
enum Table {
    /// Between two 8-bit charsets: the map's way and the way back.
    Bytes {
        forth: Arc<[u8; 256]>,
        back: Arc<[u8; 256]>,
    },
    /// From an 8-bit charset to UTF-8 and back.
    Utf8 {
        to: Arc<[Utf8Char; 256]>,
        from: Arc<FromUtf8>,
    },
}

/// How a body is recoded from one charset to another.
#[derive(Clone, Debug)]
pub enum Recode {
    /// Byte for byte: the length stands.
    Bytes(Arc<[u8; 256]>),
    /// Each byte to its UTF-8 character.
    ToUtf8(Arc<[Utf8Char; 256]>),
    /// UTF-8 characters to bytes (`&#N;` for a character the map lacks).
    FromUtf8(Arc<FromUtf8>),
}

impl Recode {
    /// Whether the recoded body is as long as the original (8-bit to 8-bit).
    pub fn keeps_length(&self) -> bool {
        matches!(self, Recode::Bytes(_))
    }
}

/// The charsets of a configuration and the maps between them.
#[derive(Debug, Default)]
pub struct Charsets {
    names: Vec<Charset>,
    maps: Vec<(usize, usize, Table)>,
}

impl Charsets {
    /// The index of `name`, added if new (nginx's `ngx_http_add_charset`).
    pub fn add(&mut self, name: &str) -> usize {
        if let Some(i) = self.find(name) {
            return i;
        }
        self.names.push(Charset {
            name: name.to_string(),
            utf8: name.eq_ignore_ascii_case("utf-8"),
        });
        self.names.len() - 1
    }

    /// The index of a charset by name, without case.
    pub fn find(&self, name: &str) -> Option<usize> {
        self.names
            .iter()
            .position(|c| c.name.eq_ignore_ascii_case(name))
    }

    /// A charset's name as the configuration first wrote it.
    pub fn name(&self, i: usize) -> &str {
        &self.names[i].name
    }

    /// How to recode from `src` to `dst`, if a `charset_map` between them (either way) says.
    pub fn recode(&self, src: usize, dst: usize) -> Option<Recode> {
        self.maps.iter().find_map(|(a, b, t)| match t {
            Table::Bytes { forth, back } if (*a, *b) == (src, dst) => {
                Some(Recode::Bytes(forth.clone()))
            }
            Table::Bytes { forth: _, back } if (*a, *b) == (dst, src) => {
                Some(Recode::Bytes(back.clone()))
            }
            Table::Utf8 { to, .. } if (*a, *b) == (src, dst) => Some(Recode::ToUtf8(to.clone())),
            Table::Utf8 { from, .. } if (*a, *b) == (dst, src) => {
                Some(Recode::FromUtf8(from.clone()))
            }
            _ => None,
        })
    }

    /// Whether a map between `a` and `b` (either way) exists.
    fn has_map(&self, a: usize, b: usize) -> bool {
        self.maps
            .iter()
            .any(|(x, y, _)| (*x, *y) == (a, b) || (*x, *y) == (b, a))
    }

    /// `charset_map SRC DST { CODE VALUE; ... }`: codes are hexadecimal bytes; values too, or
    /// a character's UTF-8 bytes in hexadecimal when DST is `utf-8`. nginx's checks and words.
    pub fn read_map(&mut self, d: &Directive) -> Result<(), Error> {
        let (src_name, dst_name) = (&d.args[0].value, &d.args[1].value);
        let src = self.add(src_name);
        let dst = self.add(dst_name);
        if src == dst {
            return Err(err(
                d,
                format!(
                    "\"charset_map\" between the same charsets \"{src_name}\" and \"{dst_name}\""
                ),
            ));
        }
        if self.has_map(src, dst) {
            return Err(err(
                d,
                format!("duplicate \"charset_map\" between \"{src_name}\" and \"{dst_name}\""),
            ));
        }
        let lines = d.block.as_deref().unwrap_or_default();
        let table = if self.names[dst].utf8 {
            let mut to = [Utf8Char {
                len: 1,
                bytes: [b'?', 0, 0],
            }; 256];
            for (b, c) in to.iter_mut().enumerate().take(0x80) {
                c.bytes[0] = b as u8;
            }
            let mut from = FromUtf8::default();
            for line in lines {
                let (code, value) = map_line(line)?;
                let c = utf8_value(value).ok_or_else(|| invalid(line, value))?;
                to[code as usize] = c.1;
                from.set(c.0, code);
            }
            Table::Utf8 {
                to: Arc::new(to),
                from: Arc::new(from),
            }
        } else {
            let mut forth = [b'?'; 256];
            for (b, c) in forth.iter_mut().enumerate().take(0x80) {
                *c = b as u8;
            }
            let mut back = forth;
            for line in lines {
                let (code, value) = map_line(line)?;
                let to = byte(value).ok_or_else(|| invalid(line, value))?;
                forth[code as usize] = to;
                back[to as usize] = code;
            }
            Table::Bytes {
                forth: Arc::new(forth),
                back: Arc::new(back),
            }
        };
        self.maps.push((src, dst, table));
        Ok(())
    }

    /// nginx's check once the configuration is read: a location that recodes between two
    /// charsets it names (not variables) needs a map between them.
    pub fn check(&self, src: usize, dst: usize) -> Result<(), Error> {
        if src == dst || self.has_map(src, dst) {
            return Ok(());
        }
        Err(Error::new(
            format!(
                "no \"charset_map\" between the charsets \"{}\" and \"{}\"",
                self.name(src),
                self.name(dst)
            ),
            None,
        ))
    }
}

/// A map's line: its code (a byte) and its value, unparsed.
fn map_line(line: &Directive) -> Result<(u8, &str), Error> {
    if line.block.is_some() {
        return Err(err(line, "unexpected \"{\""));
    }
    if line.args.len() != 1 {
        return Err(err(line, "invalid parameters number"));
    }
    let code = byte(&line.name).ok_or_else(|| invalid(line, &line.name))?;
    Ok((code, &line.args[0].value))
}

fn invalid(line: &Directive, v: &str) -> Error {
    err(line, format!("invalid value \"{v}\""))
}

/// A byte in hexadecimal (`ngx_hextoi`, at most 0xFF): any number of digits, none other.
fn byte(s: &str) -> Option<u8> {
    if s.is_empty() || !s.bytes().all(|c| c.is_ascii_hexdigit()) {
        return None;
    }
    let trimmed = s.trim_start_matches('0');
    if trimmed.len() > 2 {
        return None;
    }
    u8::from_str_radix(if trimmed.is_empty() { "0" } else { trimmed }, 16).ok()
}

/// A `utf-8` map's value: hexadecimal bytes whose first character is valid UTF-8 up to U+FFFF
/// (as nginx checks it; what follows that character is accepted and left out: nginx keeps room
/// for three bytes only). Returns the character and its bytes.
fn utf8_value(s: &str) -> Option<(u32, Utf8Char)> {
    if s.is_empty() || s.len() % 2 != 0 {
        return None;
    }
    let bytes = (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(s.get(i..i + 2)?, 16).ok())
        .collect::<Option<Vec<u8>>>()?;
    let (c, len) = match super::recode::decode(&bytes) {
        super::recode::Decoded::Char(c, len) if c <= 0xffff => (c, len),
        _ => return None,
    };
    let mut out = Utf8Char {
        len: len as u8,
        bytes: [0; 3],
    };
    out.bytes[..len].copy_from_slice(&bytes[..len]);
    Some((c, out))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(text: &str) -> Result<Charsets, String> {
        let parsed = shoal_conf::parse_str(
            text,
            Some(std::path::Path::new("/t.conf")),
            std::path::Path::new("/"),
        )
        .map_err(|e| e.to_string())?;
        let mut cs = Charsets::default();
        for d in &parsed.directives {
            cs.read_map(d).map_err(|e| e.message)?;
        }
        Ok(cs)
    }

    #[test]
    fn bytes_both_ways_the_last_line_winning() {
        let cs = map("charset_map a b { 41 42; 80 81; 80 82; 83 84; 85 84; 00 2E; }").unwrap();
        let (a, b) = (cs.find("A").unwrap(), cs.find("b").unwrap());
        let Some(Recode::Bytes(f)) = cs.recode(a, b) else {
            panic!("a table");
        };
        assert_eq!(
            [f[0x41], f[0x42], f[0], f[0x80], f[0x81], f[0x83], f[0x85], f[0x86]],
            [b'B', b'B', b'.', 0x82, b'?', 0x84, 0x84, b'?']
        );
        let Some(Recode::Bytes(r)) = cs.recode(b, a) else {
            panic!("a table");
        };
        assert_eq!(
            [r[0x42], r[0x41], r[0x2e], r[0x81], r[0x82], r[0x84], r[0x85]],
            [b'A', b'A', 0, 0x80, 0x80, 0x85, b'?']
        );
        assert_eq!(cs.name(a), "a");
    }

    #[test]
    fn utf8_maps_and_their_checks() {
        let cs = map("charset_map c UTF-8 { 41 D0B0; 80 E282AC; 81 e282ac; 82 C2A0; }").unwrap();
        let (c, u) = (cs.find("c").unwrap(), cs.find("utf-8").unwrap());
        let Some(Recode::ToUtf8(to)) = cs.recode(c, u) else {
            panic!("to utf-8");
        };
        assert_eq!(to[0x41].as_bytes(), "а".as_bytes());
        assert_eq!(to[0x80].as_bytes(), "€".as_bytes());
        assert_eq!(to[0x42].as_bytes(), b"B");
        assert_eq!(to[0x90].as_bytes(), b"?");
        let Some(Recode::FromUtf8(from)) = cs.recode(u, c) else {
            panic!("from utf-8");
        };
        assert_eq!(from.get(0x20ac), Some(0x81));
        assert_eq!(from.get(0x430), Some(0x41));
        assert_eq!(from.get(0x431), None);
        for bad in ["41", "C2", "E282A", "F09F9880", "ZZ", "C0AF", ""] {
            let e = map(&format!("charset_map c utf-8 {{ 80 \"{bad}\"; }}")).unwrap_err();
            assert_eq!(e, format!("invalid value \"{bad}\""));
        }
        // Past the first character: accepted, as by nginx.
        assert!(map("charset_map c utf-8 { 80 E282AC41; }").is_ok());
    }

    /// The maps shipped in conf/ agree with each other: koi-win maps a KOI8-R byte to the
    /// windows-1251 byte of the same character, as koi-utf and win-utf name them, and has
    /// every such pair.
    #[test]
    fn shipped_maps_agree() {
        let conf = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../conf");
        let mut cs = Charsets::default();
        for f in ["koi-win", "koi-utf", "win-utf"] {
            let parsed = shoal_conf::parse_file(&conf.join(f), &conf).unwrap();
            for d in &parsed.directives {
                cs.read_map(d).unwrap();
            }
        }
        let (k, w, u) = (
            cs.find("koi8-r").unwrap(),
            cs.find("windows-1251").unwrap(),
            cs.find("utf-8").unwrap(),
        );
        let (Some(Recode::ToUtf8(ku)), Some(Recode::FromUtf8(uw)), Some(Recode::Bytes(kw))) =
            (cs.recode(k, u), cs.recode(u, w), cs.recode(k, w))
        else {
            panic!("the three maps");
        };
        let mut pairs = 0;
        for b in 0x80..=0xffusize {
            let c = ku[b].as_bytes();
            assert_ne!(c, b"?", "KOI8-R defines every byte");
            let cp = match super::super::recode::decode(c) {
                super::super::recode::Decoded::Char(cp, _) => cp,
                other => panic!("{b:#x}: {other:?}"),
            };
            match uw.get(cp) {
                Some(wb) => {
                    assert_eq!(kw[b], wb, "{b:#x}");
                    pairs += 1;
                }
                None => assert_eq!(kw[b], b'?', "{b:#x}"),
            }
        }
        // The Cyrillic letters (66), and the few signs both have.
        assert!(pairs >= 66, "{pairs}");
    }

    #[test]
    fn nginx_words_for_bad_maps() {
        let e = |t: &str| map(t).unwrap_err();
        assert_eq!(
            e("charset_map a A { }"),
            "\"charset_map\" between the same charsets \"a\" and \"A\""
        );
        assert_eq!(
            e("charset_map a b { } charset_map B a { }"),
            "duplicate \"charset_map\" between \"B\" and \"a\""
        );
        assert_eq!(e("charset_map a b { 80; }"), "invalid parameters number");
        assert_eq!(
            e("charset_map a b { 80 81 82; }"),
            "invalid parameters number"
        );
        assert_eq!(e("charset_map a b { 100 81; }"), "invalid value \"100\"");
        assert_eq!(e("charset_map a b { 80 0x81; }"), "invalid value \"0x81\"");
        assert_eq!(e("charset_map a b { 80 81 { } }"), "unexpected \"{\"");
        assert!(map("charset_map a b { 080 8; FF ff; }").is_ok());
    }
}
