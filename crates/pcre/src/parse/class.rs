//! Character classes (`[...]`, POSIX names, `\d`-style escapes) and the escapes that stand
//! for one byte (`\x41`, `\o{101}`, `\101`, `\cA`, ...), as PCRE2 reads them without UTF and
//! with its default "C" locale tables. Part of the parser: it works on `Parser`'s position.

use super::*;

impl Parser<'_> {
    /// PCRE2 refuses `[:alpha:]` (and `[.a.]`, `[=a=]`) outside a class.
    pub(super) fn posix_outside_class(&self) -> Option<ParseError> {
        let open = self.pos - 1;
        let kind = *self.pat.get(self.pos)?;
        if !matches!(kind, b':' | b'.' | b'=') {
            return None;
        }
        self.posix_end(self.pos)?;
        Some(if kind == b':' {
            self.error(E_POSIX_OUTSIDE, open)
        } else {
            self.error(E_POSIX_COLLATING, open)
        })
    }

    /// At `[:`, `[.` or `[=` (`at` is the `:`): the index just past the closing `:]` when this
    /// is a POSIX item, PCRE2's way (no `]` or `\` may come before the terminator).
    fn posix_end(&self, at: usize) -> Option<usize> {
        let term = self.pat[at];
        let mut i = at + 1;
        while i < self.pat.len() {
            let b = self.pat[i];
            if b == b'\\' && matches!(self.pat.get(i + 1), Some(b']' | b'\\')) {
                i += 2;
                continue;
            }
            if b == b'[' && matches!(self.pat.get(i + 1), Some(b':' | b'.' | b'=')) {
                return None;
            }
            if b == b']' {
                return None;
            }
            if b == term && self.pat.get(i + 1) == Some(&b']') {
                return Some(i + 2);
            }
            i += 1;
        }
        None
    }

    /// A class after its `[`, up to and including its `]`.
    pub(super) fn class(&mut self, flags: &Flags) -> Result<ByteSet, ParseError> {
        let mut set = ByteSet::EMPTY;
        let negate = self.eat(b"^");
        let mut first = true;
        // The last single byte added, which a `-` may turn into a range's start.
        let mut last: Option<u8> = None;
        // The last item was a class escape or POSIX class (a `-` after it is invalid).
        let mut last_was_set = false;
        loop {
            if self.class_quote_switch() {
                continue;
            }
            if self.in_quote {
                let Some(b) = self.peek() else {
                    return Err(self.error(E_CLASS_END, self.pat.len()));
                };
                self.pos += 1;
                add_byte(&mut set, b, flags);
                last = Some(b);
                last_was_set = false;
                first = false;
                continue;
            }
            let Some(c) = self.peek() else {
                return Err(self.error(E_CLASS_END, self.pat.len()));
            };
            if flags.extended == 2 && (c == b' ' || c == b'\t') {
                self.pos += 1;
                continue;
            }
            if c == b']' && !first {
                self.pos += 1;
                break;
            }
            first = false;
            if c == b'[' && matches!(self.peek_at(1), Some(b':' | b'.' | b'=')) {
                if let Some(end) = self.posix_end(self.pos + 1) {
                    if self.pat[self.pos + 1] != b':' {
                        return Err(self.error(E_POSIX_COLLATING, self.pos));
                    }
                    let name_start = self.pos + 2;
                    let name = &self.pat[name_start..end - 2];
                    let (neg, name) = match name.strip_prefix(b"^") {
                        Some(n) => (true, n),
                        None => (false, name),
                    };
                    let Some(mut s) = posix_class(name, flags.caseless) else {
                        return Err(self.error(E_POSIX_UNKNOWN, name_start));
                    };
                    if neg {
                        s = s.negated();
                    }
                    self.pos = end;
                    set.union(&s);
                    last = None;
                    last_was_set = true;
                    continue;
                }
            }
            if c == b'-' && self.peek_at(1) != Some(b']') {
                if last_was_set {
                    return Err(self.error(E_INVALID_RANGE, self.pos));
                }
                if let Some(lo) = last {
                    let dash = self.pos;
                    self.pos += 1;
                    let hi = match self.range_end()? {
                        Some(ClassAtom::Byte(b)) => b,
                        Some(ClassAtom::Set(_)) => {
                            return Err(self.error(E_INVALID_RANGE, self.pos))
                        }
                        Some(ClassAtom::Posix) => return Err(self.error(E_INVALID_RANGE, dash)),
                        None => {
                            // `[a-\Q\E]`: nothing follows; the `-` is a literal.
                            add_byte(&mut set, b'-', flags);
                            last = None;
                            continue;
                        }
                    };
                    if hi < lo {
                        return Err(self.error(E_RANGE_ORDER, self.pos - 1));
                    }
                    let mut r = ByteSet::range(lo, hi);
                    if flags.caseless {
                        r = r.caseless();
                    }
                    set.union(&r);
                    last = None;
                    continue;
                }
            }
            match self.class_atom()? {
                ClassAtom::Byte(b) => {
                    add_byte(&mut set, b, flags);
                    last = Some(b);
                    last_was_set = false;
                }
                ClassAtom::Set(s) => {
                    set.union(&s);
                    last = None;
                    last_was_set = true;
                }
                ClassAtom::Posix => {
                    // Read above when complete; an incomplete `[:` is literal.
                    add_byte(&mut set, b'[', flags);
                    last = Some(b'[');
                    last_was_set = false;
                }
            }
        }
        Ok(if negate { set.negated() } else { set })
    }

    /// Enters or leaves `\Q...\E` inside a class; whether it did.
    fn class_quote_switch(&mut self) -> bool {
        if self.eat(b"\\E") {
            self.in_quote = false;
            return true;
        }
        if !self.in_quote && self.eat(b"\\Q") {
            self.in_quote = true;
            return true;
        }
        false
    }

    /// The end of a range after its `-`, or `None` when the class ends there.
    fn range_end(&mut self) -> Result<Option<ClassAtom>, ParseError> {
        while self.class_quote_switch() {}
        if self.in_quote {
            return Ok(match self.peek() {
                Some(b) => {
                    self.pos += 1;
                    Some(ClassAtom::Byte(b))
                }
                None => return Err(self.error(E_CLASS_END, self.pat.len())),
            });
        }
        if self.peek() == Some(b']') {
            return Ok(None);
        }
        self.class_atom().map(Some)
    }

    /// One member of a class at the current position.
    fn class_atom(&mut self) -> Result<ClassAtom, ParseError> {
        let Some(c) = self.peek() else {
            return Err(self.error(E_CLASS_END, self.pat.len()));
        };
        self.pos += 1;
        if c == b'['
            && matches!(self.peek(), Some(b':' | b'.' | b'='))
            && self.posix_end(self.pos).is_some()
        {
            return Ok(ClassAtom::Posix);
        }
        if c != b'\\' {
            return Ok(ClassAtom::Byte(c));
        }
        let Some(e) = self.peek() else {
            return Err(self.error(E_BACKSLASH_END, self.pat.len()));
        };
        let at = self.pos;
        self.pos += 1;
        Ok(match e {
            b'd' => ClassAtom::Set(digit()),
            b'D' => ClassAtom::Set(digit().negated()),
            b'w' => ClassAtom::Set(word()),
            b'W' => ClassAtom::Set(word().negated()),
            b's' => ClassAtom::Set(space()),
            b'S' => ClassAtom::Set(space().negated()),
            b'h' => ClassAtom::Set(hspace()),
            b'H' => ClassAtom::Set(hspace().negated()),
            b'v' => ClassAtom::Set(vspace()),
            b'V' => ClassAtom::Set(vspace().negated()),
            b'b' => ClassAtom::Byte(0x08),
            b'N' => return Err(self.error(E_N_IN_CLASS, at + 1)),
            b'B' | b'R' | b'X' => return Err(self.error(E_CLASS_ESCAPE, at)),
            b'p' | b'P' => return Err(self.unsupported("\\p and \\P", at - 1)),
            b'1'..=b'9' => {
                if e >= b'8' {
                    ClassAtom::Byte(e)
                } else {
                    self.pos = at;
                    ClassAtom::Byte(self.octal_digits()?)
                }
            }
            _ => {
                self.pos = at;
                ClassAtom::Byte(self.char_escape()?)
            }
        })
    }

    /// Up to three octal digits at the current position.
    pub(super) fn octal_digits(&mut self) -> Result<u8, ParseError> {
        let mut v: u32 = 0;
        for _ in 0..3 {
            match self.peek() {
                Some(d @ b'0'..=b'7') => {
                    v = v * 8 + u32::from(d - b'0');
                    self.pos += 1;
                }
                _ => break,
            }
        }
        u8::try_from(v).map_err(|_| self.error(E_OCTAL_BIG, self.pos))
    }

    /// An escape standing for one byte, the current position just past the `\`:
    /// `\a \e \f \n \r \t \0oo \o{} \xhh \x{} \cX` and escaped punctuation.
    pub(super) fn char_escape(&mut self) -> Result<u8, ParseError> {
        let at = self.pos;
        let Some(e) = self.peek() else {
            return Err(self.error(E_BACKSLASH_END, self.pat.len()));
        };
        self.pos += 1;
        Ok(match e {
            b'a' => 0x07,
            b'e' => 0x1b,
            b'f' => 0x0c,
            b'n' => b'\n',
            b'r' => b'\r',
            b't' => b'\t',
            b'0' => {
                // `\0` and up to two more octal digits.
                let mut v: u32 = 0;
                for _ in 0..2 {
                    match self.peek() {
                        Some(d @ b'0'..=b'7') => {
                            v = v * 8 + u32::from(d - b'0');
                            self.pos += 1;
                        }
                        _ => break,
                    }
                }
                v as u8
            }
            b'o' => {
                if self.peek() != Some(b'{') {
                    return Err(self.error(E_O_BRACE, at));
                }
                self.pos += 1;
                self.braced_number(8)?
            }
            b'x' => {
                if self.peek() == Some(b'{') {
                    self.pos += 1;
                    self.braced_number(16)?
                } else {
                    let mut v: u32 = 0;
                    for _ in 0..2 {
                        match self.peek().and_then(|d| (d as char).to_digit(16)) {
                            Some(d) => {
                                v = v * 16 + d;
                                self.pos += 1;
                            }
                            None => break,
                        }
                    }
                    v as u8
                }
            }
            b'c' => {
                let Some(x) = self.peek() else {
                    return Err(self.error(E_C_END, self.pat.len()));
                };
                if !(0x20..0x7f).contains(&x) {
                    return Err(self.error(E_C_PRINTABLE, self.pos));
                }
                self.pos += 1;
                x.to_ascii_uppercase() ^ 0x40
            }
            b'L' | b'l' | b'U' | b'u' => return Err(self.error(E_UNSUPPORTED_ESCAPE, at + 1)),
            b'N' if self.peek() == Some(b'{') => {
                if self.rest().starts_with(b"{U+") {
                    return Err(self.error(E_N_U, at + 1));
                }
                return Err(self.error(E_UNSUPPORTED_ESCAPE, at + 1));
            }
            e if e.is_ascii_alphanumeric() => return Err(self.error(E_UNKNOWN_ESCAPE, at)),
            e => e,
        })
    }

    /// The digits of `\x{...}` or `\o{...}` after the `{`, and the `}`.
    fn braced_number(&mut self, radix: u32) -> Result<u8, ParseError> {
        let start = self.pos;
        let mut v: u64 = 0;
        while let Some(d) = self.peek().and_then(|d| (d as char).to_digit(radix)) {
            v = (v * u64::from(radix) + u64::from(d)).min(u64::from(u32::MAX));
            self.pos += 1;
        }
        if self.peek() != Some(b'}') {
            if self.pos == start && self.peek().is_none_or(|b| b == b'}') {
                return Err(self.error(E_DIGITS_MISSING, start));
            }
            let msg = if radix == 16 { E_NON_HEX } else { E_NON_OCTAL };
            return Err(self.error(msg, start));
        }
        if self.pos == start {
            return Err(self.error(E_DIGITS_MISSING, start));
        }
        self.pos += 1;
        u8::try_from(v).map_err(|_| self.error(E_TOO_LARGE_CODE, self.pos - 1))
    }
}

enum ClassAtom {
    Byte(u8),
    Set(ByteSet),
    /// `[:name:]`, read by the caller.
    Posix,
}

fn add_byte(set: &mut ByteSet, b: u8, flags: &Flags) {
    let s = ByteSet::of(b);
    set.union(&if flags.caseless { s.caseless() } else { s });
}

pub(super) fn digit() -> ByteSet {
    ByteSet::range(b'0', b'9')
}

pub(super) fn word() -> ByteSet {
    let mut s = ByteSet::range(b'0', b'9');
    s.insert_range(b'A', b'Z');
    s.insert_range(b'a', b'z');
    s.insert(b'_');
    s
}

/// `\s`: space, HT, LF, VT, FF, CR.
pub(super) fn space() -> ByteSet {
    let mut s = ByteSet::range(0x09, 0x0d);
    s.insert(b' ');
    s
}

/// `\h` without UTF: HT, space, NBSP.
pub(super) fn hspace() -> ByteSet {
    let mut s = ByteSet::of(b'\t');
    s.insert(b' ');
    s.insert(0xa0);
    s
}

/// `\v` without UTF: LF, VT, FF, CR, NEL.
pub(super) fn vspace() -> ByteSet {
    let mut s = ByteSet::range(0x0a, 0x0d);
    s.insert(0x85);
    s
}

/// A POSIX class by name, for the "C" locale. Caseless, `[:upper:]` and `[:lower:]` become
/// `[:alpha:]`, as in PCRE2.
fn posix_class(name: &[u8], caseless: bool) -> Option<ByteSet> {
    let mut s = ByteSet::EMPTY;
    match name {
        b"alpha" => {
            s.insert_range(b'A', b'Z');
            s.insert_range(b'a', b'z');
        }
        b"lower" if caseless => return posix_class(b"alpha", false),
        b"upper" if caseless => return posix_class(b"alpha", false),
        b"lower" => s.insert_range(b'a', b'z'),
        b"upper" => s.insert_range(b'A', b'Z'),
        b"digit" => s = digit(),
        b"alnum" => {
            s = digit();
            s.insert_range(b'A', b'Z');
            s.insert_range(b'a', b'z');
        }
        b"space" => s = space(),
        b"blank" => {
            s.insert(b' ');
            s.insert(b'\t');
        }
        b"cntrl" => {
            s.insert_range(0, 0x1f);
            s.insert(0x7f);
        }
        b"graph" => s.insert_range(0x21, 0x7e),
        b"print" => s.insert_range(0x20, 0x7e),
        b"punct" => {
            for b in 0x21..=0x7eu8 {
                if !b.is_ascii_alphanumeric() {
                    s.insert(b);
                }
            }
        }
        b"xdigit" => {
            s = digit();
            s.insert_range(b'A', b'F');
            s.insert_range(b'a', b'f');
        }
        b"word" => s = word(),
        b"ascii" => s.insert_range(0, 0x7f),
        _ => return None,
    }
    Some(s)
}
