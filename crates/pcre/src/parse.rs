//! PCRE2's pattern syntax, read as nginx compiles it (8-bit, no UTF, default character tables,
//! newline LF, caseless when asked) into the tree of `ast.rs`, with PCRE2 10.42's messages and
//! error offsets for what it rejects.
//!
//! What PCRE2 accepts but this crate does not run (recursion and subroutine calls,
//! conditional groups, callouts, backtracking verbs other than `(*FAIL)`, `\p` properties,
//! `\X`, leading `(*UTF)`-style settings) is refused with a message that says so, never run
//! with another meaning.

use crate::ast::{ByteSet, Greed, Look, Node};

mod class;

use class::{digit, hspace, space, vspace, word};

/// A pattern that does not compile: PCRE2's message (or, for a feature PCRE2 has and this crate
/// lacks, ours), and the byte offset PCRE2 reports.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParseError {
    pub message: String,
    pub offset: usize,
    /// PCRE2 accepts the pattern; this crate does not run it.
    pub unsupported: bool,
}

/// The result of parsing.
pub struct Parsed {
    pub node: Node,
    /// The number of capturing groups (group 0 not counted).
    pub groups: u32,
    /// Group names, indexed by group number (`names[0]` is always `None`).
    pub names: Vec<Option<String>>,
    /// Each group's fixed length, if it has one, indexed by group number.
    pub group_lens: Vec<Option<usize>>,
}

const MAX_REPEAT: u32 = 65535;
const MAX_NAME: usize = 32;
const MAX_NESTING: usize = 250;

const E_BACKSLASH_END: &str = "\\ at end of pattern";
const E_C_END: &str = "\\c at end of pattern";
const E_UNKNOWN_ESCAPE: &str = "unrecognized character follows \\";
const E_QUANT_ORDER: &str = "numbers out of order in {} quantifier";
const E_QUANT_BIG: &str = "number too big in {} quantifier";
const E_CLASS_END: &str = "missing terminating ] for character class";
const E_CLASS_ESCAPE: &str = "escape sequence is invalid in character class";
const E_RANGE_ORDER: &str = "range out of order in character class";
const E_NOT_REPEATABLE: &str = "quantifier does not follow a repeatable item";
const E_AFTER_QUESTION: &str = "unrecognized character after (? or (?-";
const E_POSIX_OUTSIDE: &str = "POSIX named classes are supported only within a class";
const E_POSIX_COLLATING: &str = "POSIX collating elements are not supported";
const E_MISSING_PAREN: &str = "missing closing parenthesis";
const E_NO_SUBPATTERN: &str = "reference to non-existent subpattern";
const E_COMMENT: &str = "missing ) after (?# comment";
const E_NESTED: &str = "parentheses are too deeply nested";
const E_UNMATCHED_PAREN: &str = "unmatched closing parenthesis";
const E_LOOKBEHIND: &str = "lookbehind assertion is not fixed length";
const E_ZERO_RELATIVE: &str = "a relative value of zero is not allowed";
const E_POSIX_UNKNOWN: &str = "unknown POSIX class name";
const E_TOO_LARGE_CODE: &str = "character code point value in \\x{} or \\o{} is too large";
const E_UNSUPPORTED_ESCAPE: &str = "PCRE2 does not support \\F, \\L, \\l, \\N{name}, \\U, or \\u";
const E_AFTER_P: &str = "unrecognized character after (?P";
const E_NAME_TERMINATOR: &str = "syntax error in subpattern name (missing terminator?)";
const E_DUP_NAME: &str = "two named subpatterns have the same name (PCRE2_DUPNAMES not set)";
const E_NAME_DIGIT: &str = "subpattern name must start with a non-digit";
const E_NAME_LONG: &str = "subpattern name is too long (maximum 32 code units)";
const E_INVALID_RANGE: &str = "invalid range in character class";
const E_OCTAL_BIG: &str = "octal value is greater than \\377 in 8-bit non-UTF-8 mode";
const E_O_BRACE: &str = "missing opening brace after \\o";
const E_G_SYNTAX: &str =
    "\\g is not followed by a braced, angle-bracketed, or quoted name/number or by a plain number";
const E_VERB: &str = "(*VERB) not recognized or malformed";
const E_NAME_EXPECTED: &str = "subpattern name expected";
const E_NON_OCTAL: &str = "non-octal character in \\o{} (closing brace missing?)";
const E_DIFFERENT_NAMES: &str =
    "different names for subpatterns of the same number are not allowed";
const E_NON_HEX: &str = "non-hex character in \\x{} (closing brace missing?)";
const E_C_PRINTABLE: &str = "\\c must be followed by a printable ASCII character";
const E_K_SYNTAX: &str = "\\k is not followed by a braced, angle-bracketed, or quoted name";
const E_N_IN_CLASS: &str = "\\N is not supported in a class";
const E_DIGITS_MISSING: &str = "digits missing in \\x{} or \\o{} or \\N{U+}";
const E_N_U: &str = "\\N{U+dddd} is supported only in Unicode (UTF) mode";
const E_HYPHEN: &str = "invalid hyphen in option setting";
const E_K_LOOKAROUND: &str =
    "\\K is not allowed in lookarounds (but see PCRE2_EXTRA_ALLOW_LOOKAROUND_BSK)";

/// Parses `pattern` with PCRE2_CASELESS when `caseless`.
pub fn parse(pattern: &str, caseless: bool) -> Result<Parsed, ParseError> {
    let mut p = Parser {
        pat: pattern.as_bytes(),
        pos: 0,
        groups: 0,
        names: vec![None],
        named: Vec::new(),
        refs: Vec::new(),
        depth: 0,
        in_quote: false,
        in_around: 0,
    };
    p.leading_verbs()?;
    let mut flags = Flags {
        caseless,
        ..Flags::default()
    };
    let node = p.alternation(&mut flags)?;
    if p.pos < p.pat.len() {
        // Only an unmatched `)` stops the top level early.
        return Err(p.error(E_UNMATCHED_PAREN, p.pos));
    }
    let mut node = node;
    let refs: Vec<(String, Vec<u32>)> = p
        .refs
        .iter()
        .map(|r| match r {
            Ref::Name(name, _) => {
                let groups = p
                    .named
                    .iter()
                    .filter(|(m, _)| m == name)
                    .map(|(_, g)| *g)
                    .collect();
                (name.clone(), groups)
            }
            Ref::Number(..) => (String::new(), Vec::new()),
        })
        .collect();
    resolve_names(&mut node, &refs);
    let mut group_lens = vec![None; p.groups as usize + 1];
    node.walk(&mut |n| {
        if let Node::Capture(i, b) = n {
            // A group that refers to itself from inside has no fixed length for PCRE2.
            let mut own = false;
            b.walk(&mut |x| {
                own |= matches!(x, Node::Backref { groups, .. } if groups.contains(i));
            });
            group_lens[*i as usize] = if own { None } else { b.fixed_len(&[]) };
        }
    });
    check_lookbehinds(&p, &node, &group_lens)?;
    p.check_refs()?;
    Ok(Parsed {
        node,
        groups: p.groups,
        names: p.names,
        group_lens,
    })
}

/// The options that can change inside a pattern.
#[derive(Clone, Copy, Default)]
struct Flags {
    caseless: bool,
    multiline: bool,
    dotall: bool,
    /// 1 for `(?x)`, 2 for `(?xx)` (spaces and tabs in classes ignored too).
    extended: u8,
    no_auto_capture: bool,
    dupnames: bool,
    ungreedy: bool,
}

enum Ref {
    Number(u32, usize),
    Name(String, usize),
}

struct Parser<'a> {
    pat: &'a [u8],
    pos: usize,
    groups: u32,
    names: Vec<Option<String>>,
    /// Every name with its group, in order of appearance (duplicates under `(?J)`).
    named: Vec<(String, u32)>,
    /// Backreferences, checked once every group is known (they may point forward).
    refs: Vec<Ref>,
    depth: usize,
    /// Inside `\Q...\E`.
    in_quote: bool,
    /// How many lookarounds enclose the current position (`\K` is refused inside one).
    in_around: usize,
}

/// What an item was, for whether a quantifier may follow it.
enum Item {
    Node(Node),
    /// An assertion PCRE2 refuses to repeat (`^`, `$`, `\b`, ...).
    Fixed(Node),
    /// Nothing (an option setting, a comment): a quantifier applies to the item before.
    Nothing,
}

impl<'a> Parser<'a> {
    fn error(&self, message: &str, offset: usize) -> ParseError {
        ParseError {
            message: message.to_string(),
            offset: offset.min(self.pat.len()),
            unsupported: false,
        }
    }

    fn unsupported(&self, what: &str, offset: usize) -> ParseError {
        ParseError {
            message: format!("{what} is not supported by shoal"),
            offset: offset.min(self.pat.len()),
            unsupported: true,
        }
    }

    fn peek(&self) -> Option<u8> {
        self.pat.get(self.pos).copied()
    }

    fn peek_at(&self, n: usize) -> Option<u8> {
        self.pat.get(self.pos + n).copied()
    }

    fn rest(&self) -> &'a [u8] {
        &self.pat[self.pos.min(self.pat.len())..]
    }

    fn eat(&mut self, s: &[u8]) -> bool {
        if self.rest().starts_with(s) {
            self.pos += s.len();
            true
        } else {
            false
        }
    }

    /// `(*UTF)`, `(*LIMIT_MATCH=n)` and the like, which only PCRE2 itself reads at the very
    /// start of a pattern. None is run here: each is refused by name.
    fn leading_verbs(&mut self) -> Result<(), ParseError> {
        if !self.rest().starts_with(b"(*") {
            return Ok(());
        }
        let name: Vec<u8> = self.rest()[2..]
            .iter()
            .copied()
            .take_while(|b| b.is_ascii_uppercase() || *b == b'_' || b.is_ascii_digit())
            .collect();
        let known = [
            "UTF",
            "UTF8",
            "UCP",
            "NO_AUTO_POSSESS",
            "NO_DOTSTAR_ANCHOR",
            "NO_JIT",
            "NO_START_OPT",
            "NOTEMPTY",
            "NOTEMPTY_ATSTART",
            "CR",
            "LF",
            "CRLF",
            "ANYCRLF",
            "ANY",
            "NUL",
            "BSR_ANYCRLF",
            "BSR_UNICODE",
            "LIMIT_MATCH",
            "LIMIT_DEPTH",
            "LIMIT_HEAP",
            "LIMIT_RECURSION",
        ];
        if known.iter().any(|k| k.as_bytes() == name.as_slice()) {
            let shown = String::from_utf8_lossy(&name);
            return Err(self.unsupported(&format!("(*{shown})"), 0));
        }
        Ok(())
    }

    /// Skips what `(?x)` ignores, `\E` outside a quote, and `\Q\E`; enters `\Q`.
    fn skip_ignored(&mut self, flags: &Flags) -> Result<(), ParseError> {
        loop {
            if self.in_quote {
                if self.eat(b"\\E") {
                    self.in_quote = false;
                    continue;
                }
                return Ok(());
            }
            if self.eat(b"\\E") {
                continue;
            }
            if self.rest().starts_with(b"\\Q") {
                self.pos += 2;
                self.in_quote = true;
                continue;
            }
            if flags.extended > 0 {
                match self.peek() {
                    Some(b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r') => {
                        self.pos += 1;
                        continue;
                    }
                    Some(b'#') => {
                        while let Some(b) = self.peek() {
                            self.pos += 1;
                            if b == b'\n' {
                                break;
                            }
                        }
                        continue;
                    }
                    _ => {}
                }
            }
            if self.rest().starts_with(b"(?#") {
                match self.rest().iter().position(|&b| b == b')') {
                    Some(i) => self.pos += i + 1,
                    None => return Err(self.error(E_COMMENT, self.pat.len())),
                }
                continue;
            }
            return Ok(());
        }
    }

    /// Branches separated by `|`, up to a `)` or the end. Option changes carry from one branch
    /// to the next, as in PCRE2: `(a(?i)b|c)` matches `C`.
    fn alternation(&mut self, flags: &mut Flags) -> Result<Node, ParseError> {
        let mut branches = vec![self.sequence(flags)?];
        while self.peek() == Some(b'|') && !self.in_quote {
            self.pos += 1;
            branches.push(self.sequence(flags)?);
        }
        Ok(if branches.len() == 1 {
            branches.pop().expect("one branch")
        } else {
            Node::Alt(branches)
        })
    }

    /// One branch: items and their quantifiers.
    fn sequence(&mut self, flags: &mut Flags) -> Result<Node, ParseError> {
        let mut items: Vec<Node> = Vec::new();
        // Whether the last item may take a quantifier.
        let mut repeatable = false;
        loop {
            self.skip_ignored(flags)?;
            if self.in_quote {
                if self.pos >= self.pat.len() {
                    break;
                }
                let b = self.pat[self.pos];
                self.pos += 1;
                items.push(literal(b, flags));
                repeatable = true;
                continue;
            }
            let Some(c) = self.peek() else { break };
            match c {
                b'|' | b')' => break,
                b'*' | b'+' | b'?' => {
                    if !repeatable {
                        return Err(self.error(E_NOT_REPEATABLE, self.pos));
                    }
                    let (min, max) = match c {
                        b'*' => (0, None),
                        b'+' => (1, None),
                        _ => (0, Some(1)),
                    };
                    self.pos += 1;
                    let last = items.pop().expect("a repeatable item");
                    items.push(self.quantified(last, min, max, flags));
                    repeatable = false;
                    continue;
                }
                b'{' => {
                    if let Some((min, max, end)) = self.braces()? {
                        if !repeatable {
                            return Err(self.error(E_NOT_REPEATABLE, end - 1));
                        }
                        self.pos = end;
                        let last = items.pop().expect("a repeatable item");
                        items.push(self.quantified(last, min, max, flags));
                        repeatable = false;
                        continue;
                    }
                    self.pos += 1;
                    items.push(literal(b'{', flags));
                    repeatable = true;
                    continue;
                }
                _ => {}
            }
            match self.item(flags)? {
                Item::Node(n) => {
                    items.push(n);
                    repeatable = true;
                }
                Item::Fixed(n) => {
                    items.push(n);
                    repeatable = false;
                }
                // PCRE2 refuses a quantifier right after an option setting.
                Item::Nothing => repeatable = false,
            }
        }
        Ok(match items.len() {
            0 => Node::Empty,
            1 => items.pop().expect("one item"),
            _ => Node::Concat(items),
        })
    }

    /// Applies a quantifier just read, with its `?` or `+` suffix.
    fn quantified(&mut self, body: Node, min: u32, max: Option<u32>, flags: &Flags) -> Node {
        let greed = match self.peek() {
            Some(b'?') => {
                self.pos += 1;
                if flags.ungreedy {
                    Greed::Greedy
                } else {
                    Greed::Lazy
                }
            }
            Some(b'+') => {
                self.pos += 1;
                Greed::Possessive
            }
            _ if flags.ungreedy => Greed::Lazy,
            _ => Greed::Greedy,
        };
        // PCRE2: a repeated assertion is obeyed once at most, or never with {0}.
        if let Node::Around { .. } = body {
            return match (min, max) {
                (_, Some(0)) => Node::Empty,
                (0, _) => Node::Repeat {
                    body: Box::new(body),
                    min: 0,
                    max: Some(1),
                    greed,
                },
                _ => body,
            };
        }
        Node::Repeat {
            body: Box::new(body),
            min,
            max,
            greed,
        }
    }

    /// `{n}`, `{n,}` or `{n,m}` at the current `{`: the bounds and where it ends, or `None`
    /// when the brace is a literal (`{,n}` is one in PCRE2 10.42).
    #[allow(clippy::type_complexity)]
    fn braces(&self) -> Result<Option<(u32, Option<u32>, usize)>, ParseError> {
        let s = self.rest();
        let digits = |from: usize| s[from..].iter().take_while(|b| b.is_ascii_digit()).count();
        let n1 = digits(1);
        if n1 == 0 {
            return Ok(None);
        }
        let mut i = 1 + n1;
        let second = match s.get(i) {
            Some(b'}') => None,
            Some(b',') => {
                let n2 = digits(i + 1);
                let at = i + 1 + n2;
                if s.get(at) != Some(&b'}') {
                    return Ok(None);
                }
                Some((i + 1, n2))
            }
            _ => return Ok(None),
        };
        let number = |from: usize, len: usize, end: usize| -> Result<u32, ParseError> {
            let v: u64 = s[from..from + len].iter().fold(0u64, |v, d| {
                (v * 10 + u64::from(d - b'0')).min(u64::MAX / 20)
            });
            if v > u64::from(MAX_REPEAT) {
                return Err(self.error(E_QUANT_BIG, self.pos + end));
            }
            Ok(v as u32)
        };
        let min = number(1, n1, 1 + n1)?;
        let max = match second {
            None => Some(min),
            Some((_, 0)) => {
                i += 1;
                None
            }
            Some((from, len)) => {
                i = from + len;
                let max = number(from, len, i)?;
                if max < min {
                    return Err(self.error(E_QUANT_ORDER, self.pos + i));
                }
                Some(max)
            }
        };
        Ok(Some((min, max, self.pos + i + 1)))
    }

    /// One item at the current position (not a quantifier, `|` or `)`).
    fn item(&mut self, flags: &mut Flags) -> Result<Item, ParseError> {
        let c = self.pat[self.pos];
        self.pos += 1;
        Ok(match c {
            b'^' => Item::Fixed(Node::Look(if flags.multiline {
                Look::StartLine
            } else {
                Look::Start
            })),
            b'$' => Item::Fixed(Node::Look(if flags.multiline {
                Look::EndLine
            } else {
                Look::EndOrFinalNewline
            })),
            b'.' => Item::Node(Node::Class(if flags.dotall {
                ByteSet::FULL
            } else {
                ByteSet::of(b'\n').negated()
            })),
            b'[' => {
                if let Some(e) = self.posix_outside_class() {
                    return Err(e);
                }
                Item::Node(Node::Class(self.class(flags)?))
            }
            b'(' => self.group(flags)?,
            b'\\' => self.escape(flags)?,
            _ => Item::Node(literal(c, flags)),
        })
    }

    /// An escape outside a class; the current position is just past the `\`.
    fn escape(&mut self, flags: &mut Flags) -> Result<Item, ParseError> {
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
                if n < 10 || e >= b'8' || n <= u64::from(self.groups) {
                    self.pos = at + digits.len();
                    let n = u32::try_from(n).unwrap_or(u32::MAX);
                    self.refs.push(Ref::Number(n, at));
                    return Ok(Item::Node(Node::Backref {
                        groups: vec![n],
                        caseless: flags.caseless,
                        at,
                    }));
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
    fn g_reference(&mut self, flags: &Flags) -> Result<Item, ParseError> {
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
        self.refs.push(Ref::Number(n, self.pos));
        Ok(Item::Node(Node::Backref {
            groups: vec![n],
            caseless: flags.caseless,
            at: self.pos,
        }))
    }

    /// `\k<name>`, `\k'name'`, `\k{name}`.
    fn k_reference(&mut self, flags: &Flags) -> Result<Item, ParseError> {
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

    fn named_ref(&mut self, (name, at): (String, usize), flags: &Flags) -> Item {
        self.refs.push(Ref::Name(name.clone(), at));
        // The groups are filled in by `check_refs`, once every name is known.
        Item::Node(Node::Backref {
            groups: vec![u32::MAX - self.refs.len() as u32 + 1],
            caseless: flags.caseless,
            at,
        })
    }

    /// A group name ending with `term`, and where it starts.
    fn name(&mut self, term: u8) -> Result<(String, usize), ParseError> {
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

    /// A group after its `(`.
    fn group(&mut self, flags: &mut Flags) -> Result<Item, ParseError> {
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
    fn options(&mut self, flags: &mut Flags, open: usize) -> Result<Item, ParseError> {
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

    fn named_group(
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
    fn verb(&mut self, flags: &mut Flags, open: usize) -> Result<Item, ParseError> {
        let name_len = self
            .rest()
            .iter()
            .take_while(|b| b.is_ascii_alphanumeric() || **b == b'_')
            .count();
        if name_len == 0 && self.peek() != Some(b':') {
            // `(*)`: the `*` quantifies nothing.
            return Err(self.error(E_NOT_REPEATABLE, open + 1));
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
    fn group_body(&mut self, flags: &Flags, open: usize, kind: Kind) -> Result<Item, ParseError> {
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
    fn branch_reset(&mut self, flags: &mut Flags) -> Result<Node, ParseError> {
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

    /// Every backreference points at a group that exists; named ones get their numbers.
    fn check_refs(&self) -> Result<(), ParseError> {
        for r in &self.refs {
            match r {
                Ref::Number(n, at) if *n == 0 || *n > self.groups => {
                    return Err(self.error(E_NO_SUBPATTERN, *at));
                }
                Ref::Name(name, at) if !self.named.iter().any(|(m, _)| m == name) => {
                    return Err(self.error(E_NO_SUBPATTERN, *at));
                }
                _ => {}
            }
        }
        Ok(())
    }
}

/// Fills the named backreferences' group numbers in, from the placeholders `named_ref` left.
fn resolve_names(node: &mut Node, refs: &[(String, Vec<u32>)]) {
    match node {
        Node::Backref { groups, .. } => {
            if let [g] = groups.as_slice() {
                let i = (u32::MAX - g) as usize;
                if *g > u32::MAX - refs.len() as u32 {
                    *groups = refs[i].1.clone();
                }
            }
        }
        Node::Concat(v) | Node::Alt(v) => v.iter_mut().for_each(|x| resolve_names(x, refs)),
        Node::Capture(_, b) | Node::Group(b) | Node::Atomic(b) => resolve_names(b, refs),
        Node::Around { body, .. } | Node::Repeat { body, .. } => resolve_names(body, refs),
        _ => {}
    }
}

enum Kind {
    Capture(u32),
    Group,
    BranchReset,
    Atomic,
    Around(bool, bool),
}

/// Every lookbehind's branches have a fixed length each (PCRE2's rule), reported at the
/// lookbehind's `(`.
fn check_lookbehinds(
    p: &Parser<'_>,
    node: &Node,
    groups: &[Option<usize>],
) -> Result<(), ParseError> {
    let mut bad = None;
    node.walk(&mut |n| {
        let Node::Around {
            behind: true,
            body,
            offset,
            ..
        } = n
        else {
            return;
        };
        if bad.is_some() {
            return;
        }
        // PCRE2 reports a reference to a missing group in a lookbehind here, at the reference.
        body.walk(&mut |b| {
            if let Node::Backref { groups: g, at, .. } = b {
                if bad.is_none() && (g.is_empty() || g.iter().any(|&n| n == 0 || n > p.groups)) {
                    bad = Some(p.error(E_NO_SUBPATTERN, *at));
                }
            }
        });
        let branches: Vec<&Node> = match body.as_ref() {
            Node::Alt(v) => v.iter().collect(),
            b => vec![b],
        };
        if bad.is_none() && branches.iter().any(|b| b.fixed_len(groups).is_none()) {
            bad = Some(p.error(E_LOOKBEHIND, *offset));
        }
    });
    bad.map_or(Ok(()), Err)
}

/// A literal byte, with its other case when caseless.
fn literal(b: u8, flags: &Flags) -> Node {
    if flags.caseless && b.is_ascii_alphabetic() {
        Node::Class(ByteSet::of(b).caseless())
    } else {
        Node::Byte(b)
    }
}
