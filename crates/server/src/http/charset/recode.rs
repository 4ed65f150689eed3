//! The charset body filter: an answer's bytes recoded as they go, between 8-bit charsets byte
//! for byte, from an 8-bit charset to UTF-8, or from UTF-8 to an 8-bit charset.
//!
//! UTF-8 is read as nginx reads it (`ngx_utf8_decode`): a lead byte says how many bytes
//! follow (0xC2–0xDF one, 0xE0–0xEF two, 0xF0–0xFF three) and any byte of 0x80 or more is
//! taken as a continuation; a byte under 0x80 where a continuation should be ends the
//! sequence, that byte included, as one `?`; so do an overlong form, a stray continuation,
//! 0xC0 and 0xC1, and a character past U+10FFFF. A character the map lacks is written
//! `&#N;`. A sequence cut by the end of a piece waits for the next piece; one cut by the end
//! of the body is dropped, as nginx drops it. Unlike nginx, a piece's end never changes the
//! outcome: an invalid sequence across two pieces reads as it would in one (nginx can lose
//! a byte there). Never blocks, never fails.

use std::io;

use super::table::Recode;
use crate::http::output::BodyFilter;

/// What one UTF-8 sequence at the start of some bytes is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Decoded {
    /// A character (possibly past U+10FFFF) and the bytes it took.
    Char(u32, usize),
    /// Not a character: this many bytes are consumed as one.
    Invalid(usize),
    /// The lead byte wants more bytes than there are.
    Incomplete,
}

/// Decodes the sequence at the start of `b` (not empty), as `ngx_utf8_decode` does.
pub fn decode(b: &[u8]) -> Decoded {
    let lead = u32::from(b[0]);
    let (mut c, more, least) = match lead {
        0xf0.. => (lead & 0x07, 3, 0x1_0000),
        0xe0.. => (lead & 0x0f, 2, 0x800),
        0xc2.. => (lead & 0x1f, 1, 0x80),
        _ => return Decoded::Invalid(1),
    };
    if b.len() - 1 < more {
        return Decoded::Incomplete;
    }
    for (i, &next) in b[1..=more].iter().enumerate() {
        if next < 0x80 {
            return Decoded::Invalid(i + 2);
        }
        c = (c << 6) | u32::from(next & 0x3f);
    }
    if c < least {
        return Decoded::Invalid(more + 1);
    }
    Decoded::Char(c, more + 1)
}

/// Recodes an answer's body (a [`BodyFilter`]).
pub struct Recoder {
    how: Recode,
    out: Vec<u8>,
    /// From UTF-8: the start of a sequence the last piece cut (at most 3 bytes).
    saved: Vec<u8>,
}

impl Recoder {
    pub fn new(how: Recode) -> Recoder {
        Recoder {
            how,
            out: Vec::new(),
            saved: Vec::new(),
        }
    }

    /// From UTF-8: recodes `b` into `out`, stopping once at least `stop` bytes are consumed
    /// (or at a cut sequence). Returns the bytes consumed and whether it stopped at a cut.
    fn from_utf8(
        table: &super::table::FromUtf8,
        b: &[u8],
        stop: usize,
        out: &mut Vec<u8>,
    ) -> (usize, bool) {
        let mut i = 0;
        while i < stop {
            // A run of ASCII goes as it is.
            let ascii = b[i..stop]
                .iter()
                .position(|&c| c >= 0x80)
                .unwrap_or(stop - i);
            out.extend_from_slice(&b[i..i + ascii]);
            i += ascii;
            if i >= stop {
                break;
            }
            match decode(&b[i..]) {
                Decoded::Incomplete => return (i, true),
                Decoded::Invalid(n) => {
                    out.push(b'?');
                    i += n;
                }
                Decoded::Char(c, n) => {
                    i += n;
                    match table.get(c) {
                        Some(byte) if c <= 0xffff => out.push(byte),
                        _ if c > 0x10_ffff => out.push(b'?'),
                        _ => {
                            use std::io::Write;
                            let _ = write!(out, "&#{c};");
                        }
                    }
                }
            }
        }
        (i, false)
    }
}

impl BodyFilter for Recoder {
    fn feed(&mut self, data: &[u8]) -> io::Result<&[u8]> {
        self.out.clear();
        match &self.how {
            Recode::Bytes(t) => self.out.extend(data.iter().map(|&b| t[usize::from(b)])),
            Recode::ToUtf8(t) => {
                for &b in data {
                    self.out.extend_from_slice(t[usize::from(b)].as_bytes());
                }
            }
            Recode::FromUtf8(t) => {
                let mut start = 0;
                if !self.saved.is_empty() {
                    // The cut sequence with the first bytes of this piece: decoded until the
                    // saved bytes are used up (4 more bytes always complete a sequence).
                    let had = self.saved.len();
                    let mut joined = std::mem::take(&mut self.saved);
                    joined.extend_from_slice(&data[..data.len().min(4)]);
                    let (used, cut) = Self::from_utf8(t, &joined, had, &mut self.out);
                    if cut {
                        // Fewer than 4 bytes came: all of them are in `joined`.
                        self.saved = joined[used..].to_vec();
                        return Ok(&self.out);
                    }
                    start = used - had;
                }
                let rest = &data[start..];
                let (used, cut) = Self::from_utf8(t, rest, rest.len(), &mut self.out);
                if cut {
                    self.saved = rest[used..].to_vec();
                }
            }
        }
        Ok(&self.out)
    }

    fn finish(&mut self) -> io::Result<&[u8]> {
        // A sequence the body's end cut is dropped (nginx sends nothing for it).
        self.saved.clear();
        self.out.clear();
        Ok(&self.out)
    }

    fn keeps_length(&self) -> bool {
        self.how.keeps_length()
    }
}

#[cfg(test)]
mod tests {
    use super::super::table::Charsets;
    use super::*;

    fn charsets() -> Charsets {
        let text = "charset_map k utf-8 { C1 D0B0; C2 D0B1; 80 E282AC; 41 D0B0; }\n\
                    charset_map k w { C1 E0; C2 E1; }";
        let parsed = shoal_conf::parse_str(
            text,
            Some(std::path::Path::new("/t.conf")),
            std::path::Path::new("/"),
        )
        .unwrap();
        let mut cs = Charsets::default();
        for d in &parsed.directives {
            cs.read_map(d).unwrap();
        }
        cs
    }

    fn recoder(src: &str, dst: &str) -> Recoder {
        let cs = charsets();
        let how = cs
            .recode(cs.find(src).unwrap(), cs.find(dst).unwrap())
            .unwrap();
        Recoder::new(how)
    }

    /// The body fed in pieces of `size` bytes.
    fn run(r: &mut Recoder, data: &[u8], size: usize) -> Vec<u8> {
        let mut out = Vec::new();
        for piece in data.chunks(size.max(1)) {
            out.extend_from_slice(r.feed(piece).unwrap());
        }
        out.extend_from_slice(r.finish().unwrap());
        out
    }

    #[test]
    fn nginx_reading_of_utf8() {
        // What nginx 1.22 sends for each input, with a map that has а (U+0430) and €.
        let cases: &[(&[u8], &[u8])] = &[
            ("а€b".as_bytes(), b"A\x80b"),
            ("Б😀☃".as_bytes(), b"&#1041;&#128512;&#9731;"),
            (b"bad \xff\xfe x", b"bad ?x"),
            (b" \xe2\x82 y", b" ?y"),
            (b" \xc0\xaf z", b" ?? z"),
            (b"\xf7\xbf\xbf\xbf|\xf4\x90\x80\x80|\x80", b"?|?|?"),
            (b"\xed\xa0\x80|\xc2\x80", b"&#55296;|&#128;"),
            (b"\xf8\x88\x80\x80\x80", b"??"),
            (b"abc\xe2\x82", b"abc"),
            (b"abc\xf0", b"abc"),
        ];
        for (input, want) in cases {
            for size in [1, 2, 3, 5, 64] {
                let got = run(&mut recoder("utf-8", "k"), input, size);
                assert_eq!(got, *want, "{input:?} in pieces of {size}");
            }
        }
    }

    #[test]
    fn eight_bit_and_to_utf8() {
        let mut r = recoder("k", "w");
        assert!(r.keeps_length());
        assert_eq!(run(&mut r, b"\xc1\xc2\xc3 a", 2), b"\xe0\xe1? a");
        let mut r = recoder("w", "k");
        assert_eq!(run(&mut r, b"\xe0\xe1\xe2 a", 2), b"\xc1\xc2? a");
        let mut r = recoder("k", "utf-8");
        assert!(!r.keeps_length());
        assert_eq!(run(&mut r, b"\xc1\xc2A\x80\x81", 1), "аба€?".as_bytes());
    }

    #[test]
    fn decoder() {
        assert_eq!(decode(b"\xd0\xb0"), Decoded::Char(0x430, 2));
        assert_eq!(decode(b"\xd0"), Decoded::Incomplete);
        assert_eq!(decode(b"\xf0A"), Decoded::Incomplete);
        assert_eq!(decode(b"\xf0ABC"), Decoded::Invalid(2));
        assert_eq!(decode(b"A"), Decoded::Invalid(1));
        assert_eq!(decode(b"\xe0\x80\x80"), Decoded::Invalid(3));
        assert_eq!(decode(b"\xf0\x9f\x98\x80"), Decoded::Char(0x1f600, 4));
    }
}
