//! Escapes outside a class (`\d`, `\x{..}`, `\o{..}`, `\c`, backreferences `\1`, `\g`,
//! `\k`) and subpattern names.

use super::*;

impl Parser<'_> {
    /// An escape outside a class; the current position is just past the `\`.
    pub(super) fn escape(&mut self, flags: &mut Flags) -> Result<Item, ParseError> {
        let at = self.pos;
        let Some(e) = self.peek() else {
            return Err(self.error(E_BACKSLASH_END, self.pat.len()));
        };
        self.pos += 1;
        let set = |s: ByteSet| Ok(Item::Node(Node::Class(s)));
        match e {
            b'd' => set(digit()),
            b'D' => set(digit().negated()),
            b'w' => set(word()),
            b'W' => set(word().negated()),
            b's' => set(space()),
            b'S' => set(space().negated()),
            b'h' => set(hspace()),
            b'H' => set(hspace().negated()),
            b'v' => set(vspace()),
            b'V' => set(vspace().negated()),
            b'N' if self.peek() != Some(b'{') => set(ByteSet::of(b'\n').negated()),
            b'C' => set(ByteSet::FULL),
            b'R' => {
                // (?>\r\n|\n|\x0b|\f|\r|\x85): atomic, so `\R\n` never splits a CRLF.
                let crlf = Node::Concat(vec![Node::Byte(b'\r'), Node::Byte(b'\n')]);
                let mut one = vspace();
                one.insert(b'\r');
                Ok(Item::Node(Node::Atomic(Box::new(Node::Alt(vec![
                    crlf,
                    Node::Class(one),
                ])))))
            }
            b'b' => Ok(Item::Fixed(Node::Look(Look::WordBoundary))),
            b'B' => Ok(Item::Fixed(Node::Look(Look::NotWordBoundary))),
            b'A' | b'G' => Ok(Item::Fixed(Node::Look(Look::Start))),
            b'Z' => Ok(Item::Fixed(Node::Look(Look::EndOrFinalNewline))),
            b'z' => Ok(Item::Fixed(Node::Look(Look::End))),
            b'K' => {
                if self.in_around > 0 {
                    return Err(self.error(E_K_LOOKAROUND, self.pat.len()));
                }
                Ok(Item::Fixed(Node::KeepOut))
            }
            b'X' => Err(self.unsupported("\\X", at - 1)),
            b'p' | b'P' => Err(self.unsupported("\\p and \\P", at - 1)),
            // `skip_ignored` reads these before an item; nothing is left to do.
            b'Q' | b'E' => Ok(Item::Nothing),
            b'g' => self.g_reference(flags),
            b'k' => self.k_reference(flags),
            b'1'..=b'9' => {
                // A backreference when below 10, starting with 8 or 9, or when that many
                // groups are open already; else up to three octal digits.
                let digits: Vec<u8> = self.pat[at..]
                    .iter()
                    .copied()
                    .take_while(u8::is_ascii_digit)
                    .collect();
                let n = digits
                    .iter()
                    .fold(0u64, |v, d| (v * 10 + u64::from(d - b'0')).min(1 << 20));
                // (A number above PCRE2's 65,535 groups is no reference: `\1...` is then
                // octal; `\8...` too big a group, or with 9 digits or more (too long for
                // PCRE2 to read as a number) the digit itself.)
                let fits = n <= 65_535;
                if fits && (n < 10 || e >= b'8' || n <= u64::from(self.groups)) {
                    self.pos = at + digits.len();
                    let n = u32::try_from(n).unwrap_or(u32::MAX);
                    // (Reported, if missing, at its last digit.)
                    let last = self.pos - 1;
                    self.refs.push(Ref::Number(n, last));
                    return Ok(Item::Node(Node::Backref {
                        groups: vec![n],
                        caseless: flags.caseless,
                        at: last,
                    }));
                }
                if e >= b'8' && digits.len() <= 8 {
                    return Err(self.error(E_GROUP_BIG, at + digits.len()));
                }
                if e >= b'8' {
                    self.pos = at + 1;
                    return Ok(Item::Node(literal(e, flags)));
                }
                self.pos = at;
                let b = self.octal_digits()?;
                Ok(Item::Node(literal(b, flags)))
            }
            _ => {
                self.pos = at;
                let b = self.char_escape()?;
                Ok(Item::Node(literal(b, flags)))
            }
        }
    }

    /// `\g` forms: `\gN`, `\g{N}`, `\g-N`, `\g{-N}`, `\g{+N}`... and `\g{name}`; `\g<...>`
    /// and `\g'...'` are subroutine calls.
    pub(super) fn g_reference(&mut self, flags: &Flags) -> Result<Item, ParseError> {
        let g = self.pos - 2;
        // PCRE2 reports a braced form's errors at its brace, a plain one's after it.
        let brace = self.pos;
        let braced = self.eat(b"{");
        match self.peek() {
            Some(b'<' | b'\'') if !braced => {
                return Err(self.unsupported("subroutine calls", g));
            }
            _ => {}
        }
        let sign = match self.peek() {
            Some(b'-') => {
                self.pos += 1;
                -1
            }
            Some(b'+') => {
                self.pos += 1;
                1
            }
            _ => 0,
        };
        let digits = self
            .rest()
            .iter()
            .take_while(|b| b.is_ascii_digit())
            .count();
        if digits == 0 {
            if braced && sign == 0 {
                // `\g{name}`.
                let name = self.name(b'}')?;
                return Ok(self.named_ref(name, flags));
            }
            return Err(self.error(E_G_SYNTAX, brace));
        }
        let n: u64 = self.rest()[..digits]
            .iter()
            .fold(0u64, |v, d| (v * 10 + u64::from(d - b'0')).min(1 << 20));
        if n > 65_535 {
            // PCRE2 stops at the digit that made the number too big (a braced one at `{`).
            let mut v = 0u64;
            let over = self.rest()[..digits].iter().position(|d| {
                v = v * 10 + u64::from(d - b'0');
                v > 65_535
            });
            let at = if braced {
                brace
            } else {
                self.pos + over.unwrap_or(digits) + 1
            };
            return Err(self.error(E_GROUP_BIG, at));
        }
        self.pos += digits;
        if braced && !self.eat(b"}") {
            return Err(self.error(E_G_SYNTAX, brace));
        }
        let at = if braced { brace } else { self.pos };
        if sign != 0 && n == 0 {
            return Err(self.error(E_ZERO_RELATIVE, at));
        }
        let n = match sign {
            -1 if n > u64::from(self.groups) => return Err(self.error(E_NO_SUBPATTERN, at)),
            -1 => u64::from(self.groups) + 1 - n,
            1 => u64::from(self.groups) + n,
            _ => n,
        };
        let n = u32::try_from(n).unwrap_or(u32::MAX);
        // PCRE2 reports a missing group at the reference's last character, group 0 (refused
        // as it is read) just after it.
        let last = if n == 0 { self.pos } else { self.pos - 1 };
        self.refs.push(Ref::Number(n, last));
        Ok(Item::Node(Node::Backref {
            groups: vec![n],
            caseless: flags.caseless,
            at: last,
        }))
    }

    /// `\k<name>`, `\k'name'`, `\k{name}`.
    pub(super) fn k_reference(&mut self, flags: &Flags) -> Result<Item, ParseError> {
        let term = match self.peek() {
            Some(b'<') => b'>',
            Some(b'\'') => b'\'',
            Some(b'{') => b'}',
            _ => return Err(self.error(E_K_SYNTAX, self.pos)),
        };
        self.pos += 1;
        let name = self.name(term)?;
        Ok(self.named_ref(name, flags))
    }

    pub(super) fn named_ref(&mut self, (name, at): (String, usize), flags: &Flags) -> Item {
        self.refs.push(Ref::Name(name.clone(), at));
        // The groups are filled in by `check_refs`, once every name is known.
        Item::Node(Node::Backref {
            groups: vec![u32::MAX - self.refs.len() as u32 + 1],
            caseless: flags.caseless,
            at,
        })
    }

    /// A group name ending with `term`, and where it starts.
    pub(super) fn name(&mut self, term: u8) -> Result<(String, usize), ParseError> {
        let start = self.pos;
        if self.peek().is_some_and(|b| b.is_ascii_digit()) {
            return Err(self.error(E_NAME_DIGIT, start));
        }
        let len = self
            .rest()
            .iter()
            .take_while(|b| b.is_ascii_alphanumeric() || **b == b'_')
            .count();
        if len > MAX_NAME {
            return Err(self.error(E_NAME_LONG, start + len));
        }
        self.pos += len;
        if len == 0 {
            return Err(self.error(E_NAME_EXPECTED, start));
        }
        if self.peek() != Some(term) {
            return Err(self.error(E_NAME_TERMINATOR, self.pos));
        }
        self.pos += 1;
        let name = String::from_utf8_lossy(&self.pat[start..start + len]).into_owned();
        Ok((name, start))
    }
}
