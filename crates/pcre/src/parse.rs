//! PCRE2's pattern syntax, read as nginx compiles it (8-bit, no UTF, default character tables,
//! newline LF, caseless when asked) into the tree of `ast.rs`, with PCRE2 10.42's messages and
//! error offsets for what it rejects.
//!
//! What PCRE2 accepts but this crate does not run (recursion and subroutine calls,
//! conditional groups, callouts, backtracking verbs other than `(*FAIL)`, `\p` properties,
//! `\X`, leading `(*UTF)`-style settings) is refused with a message that says so, never run
//! with another meaning.
//!
//! Rooms: this file reads sequences, alternations, quantifiers and items; [`escape`] the
//! escapes, [`group`] what follows a `(`, [`class`] bracketed classes, [`checks`] what is
//! checked once the tree is read, [`messages`] PCRE2's words.

use crate::ast::{ByteSet, Greed, Look, Node};

mod checks;
mod class;
mod escape;
mod group;
mod messages;

use checks::{check_lookbehinds, resolve_names};
use class::{digit, hspace, space, vspace, word};
use messages::*;

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
                    items.push(self.quantified(last, min, max, flags)?);
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
                        items.push(self.quantified(last, min, max, flags)?);
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
    fn quantified(
        &mut self,
        body: Node,
        min: u32,
        max: Option<u32>,
        flags: &Flags,
    ) -> Result<Node, ParseError> {
        // PCRE2 looks for the suffix past what it ignores: `a*(?#c)+` is `a*+`, but in
        // `a*\Q+\E` the `+` is a literal.
        self.skip_ignored(flags)?;
        let suffix = if self.in_quote { None } else { self.peek() };
        let greed = match suffix {
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
        if let Node::Around { behind, .. } = body {
            return Ok(match (min, max) {
                (_, Some(0)) => Node::Empty,
                (0, _) => Node::Repeat {
                    body: Box::new(body),
                    min: 0,
                    max: Some(1),
                    greed,
                },
                // Still obeyed once (a second pass matches the same empty span), but a
                // lookbehind repeated a varying number of times has no fixed length for a
                // lookbehind around it, as PCRE2 10.42 says.
                (_, max) if behind && max != Some(min) => Node::Repeat {
                    body: Box::new(body),
                    min: 1,
                    max: None,
                    greed,
                },
                _ => body,
            });
        }
        Ok(Node::Repeat {
            body: Box::new(body),
            min,
            max,
            greed,
        })
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
}

/// A literal byte, with its other case when caseless.
fn literal(b: u8, flags: &Flags) -> Node {
    if flags.caseless && b.is_ascii_alphabetic() {
        Node::Class(ByteSet::of(b).caseless())
    } else {
        Node::Byte(b)
    }
}
