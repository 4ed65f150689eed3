//! Groups after their `(`: captures, named groups, `(?:`, option settings, atomic groups,
//! lookarounds, branch resets, `(*VERB)`s.

use super::*;

impl Parser<'_> {
    /// A group after its `(`.
    pub(super) fn group(&mut self, flags: &mut Flags) -> Result<Item, ParseError> {
        let open = self.pos - 1;
        if self.depth >= MAX_NESTING {
            return Err(self.error(E_NESTED, open));
        }
        if self.eat(b"*") {
            return self.verb(flags, open);
        }
        if !self.eat(b"?") {
            if flags.no_auto_capture {
                return self.group_body(flags, open, Kind::Group);
            }
            self.groups += 1;
            if self.names.len() <= self.groups as usize {
                self.names.push(None);
            }
            return self.group_body(flags, open, Kind::Capture(self.groups));
        }
        let Some(c) = self.peek() else {
            return Err(self.error(E_MISSING_PAREN, self.pat.len()));
        };
        self.pos += 1;
        match c {
            b':' => self.group_body(flags, open, Kind::Group),
            b'|' => self.group_body(flags, open, Kind::BranchReset),
            b'>' => self.group_body(flags, open, Kind::Atomic),
            b'=' => self.group_body(flags, open, Kind::Around(false, false)),
            b'!' => self.group_body(flags, open, Kind::Around(false, true)),
            b'<' if self.peek() == Some(b'=') => {
                self.pos += 1;
                self.group_body(flags, open, Kind::Around(true, false))
            }
            b'<' if self.peek() == Some(b'!') => {
                self.pos += 1;
                self.group_body(flags, open, Kind::Around(true, true))
            }
            // `(?*...)` and `(?<*...)`: `(*napla:...)` and `(*naplb:...)` by other names.
            b'*' => Err(self.unsupported("non-atomic assertions", open)),
            b'<' if self.peek() == Some(b'*') => {
                Err(self.unsupported("non-atomic assertions", open))
            }
            b'<' => self.named_group(flags, open, b'>'),
            b'\'' => self.named_group(flags, open, b'\''),
            b'P' => match self.peek() {
                Some(b'<') => {
                    self.pos += 1;
                    self.named_group(flags, open, b'>')
                }
                Some(b'=') => {
                    self.pos += 1;
                    let name = self.name(b')')?;
                    Ok(self.named_ref(name, flags))
                }
                Some(b'>') => Err(self.unsupported("subroutine calls", open)),
                None => Err(self.error(E_MISSING_PAREN, self.pat.len())),
                _ => Err(self.error(E_AFTER_P, self.pos)),
            },
            b'R' | b'&' | b'0'..=b'9' | b'+' => Err(self.unsupported("recursion", open)),
            b'-' if self.peek().is_some_and(|b| b.is_ascii_digit()) => {
                Err(self.unsupported("recursion", open))
            }
            b'(' => Err(self.unsupported("conditional groups", open)),
            b'C' => Err(self.unsupported("callouts", open)),
            _ => {
                self.pos -= 1;
                self.options(flags, open)
            }
        }
    }

    /// `(?i)`, `(?-i)`, `(?^i)`, `(?i:...)`: the current position is at the first letter.
    pub(super) fn options(&mut self, flags: &mut Flags, open: usize) -> Result<Item, ParseError> {
        let mut f = *flags;
        let mut unset = false;
        if self.eat(b"^") {
            f.caseless = false;
            f.multiline = false;
            f.no_auto_capture = false;
            f.dotall = false;
            f.extended = 0;
            f.ungreedy = false;
            if self.peek() == Some(b'-') {
                return Err(self.error(E_HYPHEN, self.pos));
            }
        }
        loop {
            let Some(c) = self.peek() else {
                return Err(self.error(E_MISSING_PAREN, self.pat.len()));
            };
            self.pos += 1;
            let on = !unset;
            match c {
                b'-' if !unset => unset = true,
                b'i' => f.caseless = on,
                b'm' => f.multiline = on,
                b'n' => f.no_auto_capture = on,
                b's' => f.dotall = on,
                b'J' => f.dupnames = on,
                b'U' => f.ungreedy = on,
                b'x' => {
                    if !on {
                        f.extended = 0;
                    } else if self.peek() == Some(b'x') {
                        self.pos += 1;
                        f.extended = 2;
                    } else {
                        f.extended = 1;
                    }
                }
                b')' => {
                    *flags = f;
                    return Ok(Item::Nothing);
                }
                b':' => return self.group_body(&f, open, Kind::Group),
                _ => return Err(self.error(E_AFTER_QUESTION, self.pos - 1)),
            }
        }
    }

    pub(super) fn named_group(
        &mut self,
        flags: &mut Flags,
        open: usize,
        term: u8,
    ) -> Result<Item, ParseError> {
        let (name, _) = self.name(term)?;
        let n = self.groups + 1;
        let same_number = self.names.get(n as usize).cloned().flatten();
        if let Some(other) = same_number {
            // A branch reset gave this number a name already.
            if other != name {
                return Err(self.error(E_DIFFERENT_NAMES, self.pos));
            }
        } else if !flags.dupnames && self.named.iter().any(|(m, g)| *m == name && *g != n) {
            return Err(self.error(E_DUP_NAME, self.pos));
        }
        self.groups = n;
        if self.names.len() <= n as usize {
            self.names.push(Some(name.clone()));
        } else {
            self.names[n as usize] = Some(name.clone());
        }
        self.named.push((name, n));
        self.group_body(flags, open, Kind::Capture(n))
    }

    /// `(*...)`: a verb or an alphabetic assertion; the current position is after `(*`.
    pub(super) fn verb(&mut self, flags: &mut Flags, open: usize) -> Result<Item, ParseError> {
        let name_len = self
            .rest()
            .iter()
            .take_while(|b| b.is_ascii_alphanumeric() || **b == b'_')
            .count();
        match self.peek() {
            // `(*)` (or `(*` at the end): the `*` quantifies nothing.
            None | Some(b')') if name_len == 0 => {
                return Err(self.error(E_NOT_REPEATABLE, open + 1))
            }
            // `(*?`, `(*+`: PCRE2 reads a verb's name that is not there.
            Some(c) if name_len == 0 && c != b':' => return Err(self.error(E_VERB, self.pos)),
            _ => {}
        }
        let name = String::from_utf8_lossy(&self.rest()[..name_len]).into_owned();
        self.pos += name_len;
        if self.eat(b":") {
            let kind = match name.as_str() {
                "pla" | "positive_lookahead" => Kind::Around(false, false),
                "nla" | "negative_lookahead" => Kind::Around(false, true),
                "plb" | "positive_lookbehind" => Kind::Around(true, false),
                "nlb" | "negative_lookbehind" => Kind::Around(true, true),
                "atomic" => Kind::Atomic,
                "" | "MARK" | "PRUNE" | "SKIP" | "THEN" => {
                    return Err(self.unsupported("backtracking verbs", open))
                }
                "napla"
                | "naplb"
                | "non_atomic_positive_lookahead"
                | "non_atomic_positive_lookbehind" => {
                    return Err(self.unsupported("non-atomic assertions", open))
                }
                "sr" | "script_run" | "asr" | "atomic_script_run" => {
                    return Err(self.unsupported("script runs", open))
                }
                _ => return Err(self.error(E_VERB, self.pos - 1)),
            };
            return self.group_body(flags, open, kind);
        }
        if !self.eat(b")") {
            return Err(self.error(E_VERB, self.pos));
        }
        match name.as_str() {
            "FAIL" | "F" => Ok(Item::Node(Node::Fail)),
            "ACCEPT" | "COMMIT" | "PRUNE" | "SKIP" | "THEN" => {
                Err(self.unsupported("backtracking verbs", open))
            }
            _ => Err(self.error(E_VERB, self.pos - 1)),
        }
    }

    /// A group's branches and its `)`.
    pub(super) fn group_body(
        &mut self,
        flags: &Flags,
        open: usize,
        kind: Kind,
    ) -> Result<Item, ParseError> {
        self.depth += 1;
        let around = matches!(kind, Kind::Around(..));
        if around {
            self.in_around += 1;
        }
        let mut inner = *flags;
        let body = if let Kind::BranchReset = kind {
            self.branch_reset(&mut inner)?
        } else {
            self.alternation(&mut inner)?
        };
        if around {
            self.in_around -= 1;
        }
        self.depth -= 1;
        if self.peek() != Some(b')') {
            return Err(self.error(E_MISSING_PAREN, self.pat.len()));
        }
        self.pos += 1;
        Ok(Item::Node(match kind {
            Kind::Capture(n) => Node::Capture(n, Box::new(body)),
            Kind::Group | Kind::BranchReset => Node::Group(Box::new(body)),
            Kind::Atomic => Node::Atomic(Box::new(body)),
            Kind::Around(behind, negate) => Node::Around {
                behind,
                negate,
                body: Box::new(body),
                offset: open,
            },
        }))
    }

    /// `(?|...)`: every branch numbers its groups from the same start.
    pub(super) fn branch_reset(&mut self, flags: &mut Flags) -> Result<Node, ParseError> {
        let start = self.groups;
        let mut most = start;
        let mut branches = Vec::new();
        loop {
            self.groups = start;
            branches.push(self.sequence(flags)?);
            most = most.max(self.groups);
            if self.peek() == Some(b'|') && !self.in_quote {
                self.pos += 1;
                continue;
            }
            break;
        }
        self.groups = most;
        Ok(if branches.len() == 1 {
            branches.pop().expect("one branch")
        } else {
            Node::Alt(branches)
        })
    }
}

pub(super) enum Kind {
    Capture(u32),
    Group,
    BranchReset,
    Atomic,
    Around(bool, bool),
}
