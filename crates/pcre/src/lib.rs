//! Regexes as nginx's PCRE2 reads them, in pure Rust.
//!
//! nginx 1.22 on Debian compiles every regex (`location ~`, `server_name ~`, `if`, `map`,
//! `rewrite`, `gzip_disable`, `proxy_redirect`, ...) with PCRE2 10.42 in 8-bit mode, without
//! UTF, with the default ("C" locale) character tables, newline LF, and `PCRE2_CASELESS` for the
//! caseless forms (`~*`, `server_name`, `gzip_disable`); it matches against the subject's
//! bytes. So `.` is one byte (never a newline), `\d \w \s \b` and case folding are ASCII only,
//! `$` matches at the end or before a final newline, and the full Perl syntax is there:
//! lookarounds, backreferences, atomic groups, possessive quantifiers, `\Q...\E`, the three
//! spellings of named groups, inline options.
//!
//! A pattern is parsed once into a tree (`parse.rs`, with PCRE2's error messages). When the tree
//! needs nothing a backtracker alone can give, it runs on the `regex` crate (linear time, and
//! as fast as shoal's regexes were before this crate); otherwise, and for the few subjects where
//! the `regex` crate's `$` would differ (one ending in a newline), on the backtracker of
//! `backtrack.rs`, bounded by a match limit. What PCRE2 accepts and this crate does not run
//! (recursion, conditionals, callouts, most backtracking verbs, `\p`, `\X`, `(*UTF)`) is
//! refused when compiling, with a message that says so.
//!
//! Errors read as nginx prints them: `pcre2_compile() failed: missing closing parenthesis in
//! "(foo"`; the caller adds ` in FILE:LINE`. A match that hits the limit is
//! `pcre2_match() failed: -47`, which nginx logs at `alert` before answering 500.

use std::borrow::Cow;
use std::fmt;
use std::sync::Arc;

mod ast;
mod backtrack;
mod parse;
mod translate;

/// PCRE2's default match limit, which nginx keeps.
pub const DEFAULT_MATCH_LIMIT: u64 = 10_000_000;

/// A compiled regex. Cloning is cheap (shared).
#[derive(Clone)]
pub struct Regex {
    inner: Arc<Inner>,
}

struct Inner {
    source: String,
    /// The `regex` crate's compilation, when it gives PCRE2's results.
    fast: Option<regex::bytes::Regex>,
    /// The same for text subjects, when every match consumes ASCII only (its bounds are then
    /// character boundaries); the `regex` crate's `&str` search costs less than its bytes one.
    fast_str: Option<regex::Regex>,
    /// The backtracker's program (absent only when `fast` runs every subject and the program
    /// would be too large).
    slow: Option<backtrack::Program>,
    /// A subject ending with `\n` goes to the backtracker.
    newline_to_slow: bool,
    /// Group names by number; `names[0]` is the whole match's `None`.
    names: Vec<Option<String>>,
    match_limit: u64,
}

impl fmt::Debug for Regex {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("Regex").field(&self.inner.source).finish()
    }
}

impl fmt::Display for Regex {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.inner.source)
    }
}

/// Options for compiling a regex: PCRE2's that nginx sets.
#[derive(Clone, Debug)]
pub struct RegexBuilder {
    pattern: String,
    caseless: bool,
    match_limit: u64,
    backtracker_only: bool,
}

impl RegexBuilder {
    pub fn new(pattern: &str) -> RegexBuilder {
        RegexBuilder {
            pattern: pattern.to_string(),
            caseless: false,
            match_limit: DEFAULT_MATCH_LIMIT,
            backtracker_only: false,
        }
    }

    /// Runs every subject on the backtracker, for tests that check it against PCRE2 on
    /// patterns the `regex` crate would otherwise run.
    #[doc(hidden)]
    pub fn backtracker_only(&mut self, yes: bool) -> &mut RegexBuilder {
        self.backtracker_only = yes;
        self
    }

    /// `PCRE2_CASELESS` (ASCII letters only), as nginx sets for `~*`.
    pub fn caseless(&mut self, yes: bool) -> &mut RegexBuilder {
        self.caseless = yes;
        self
    }

    /// How much backtracking one match may do before it fails with
    /// [`MatchError::MatchLimit`]. The count is this crate's own (choice points made and
    /// taken), close to but not the same as PCRE2's.
    pub fn match_limit(&mut self, limit: u64) -> &mut RegexBuilder {
        self.match_limit = limit;
        self
    }

    pub fn build(&self) -> Result<Regex, Error> {
        let fail = |e: parse::ParseError| Error {
            pattern: self.pattern.clone(),
            message: e.message,
            offset: e.offset,
            unsupported: e.unsupported,
        };
        let parsed = parse::parse(&self.pattern, self.caseless).map_err(fail)?;
        let syntax = translate::to_regex_syntax(&parsed.node).filter(|_| !self.backtracker_only);
        let fast = syntax.as_ref().and_then(|syntax| {
            regex::bytes::RegexBuilder::new(syntax)
                .unicode(false)
                .build()
                .ok()
        });
        // A str regex refuses what could match a non-ASCII byte alone.
        let fast_str = syntax
            .filter(|_| fast.is_some() && parsed.node.min_len() > 0)
            .and_then(|syntax| regex::Regex::new(&syntax).ok());
        let newline_to_slow = translate::final_newline_differs(&parsed.node);
        let slow = backtrack::Program::new(&parsed.node, parsed.groups, &parsed.group_lens).ok();
        if slow.is_none() && (fast.is_none() || newline_to_slow) {
            return Err(fail(parse::ParseError {
                message: "regular expression is too large".to_string(),
                offset: self.pattern.len(),
                unsupported: false,
            }));
        }
        Ok(Regex {
            inner: Arc::new(Inner {
                source: self.pattern.clone(),
                fast,
                fast_str,
                slow,
                newline_to_slow,
                names: parsed.names,
                match_limit: self.match_limit,
            }),
        })
    }
}

impl Regex {
    /// Compiles `pattern` as nginx does for `~`.
    pub fn new(pattern: &str) -> Result<Regex, Error> {
        RegexBuilder::new(pattern).build()
    }

    /// The pattern as written.
    pub fn as_str(&self) -> &str {
        &self.inner.source
    }

    /// The number of groups, the whole match (group 0) included.
    pub fn captures_len(&self) -> usize {
        self.inner.names.len()
    }

    /// Each group's name, by number, group 0 first (always `None`).
    pub fn capture_names(&self) -> impl Iterator<Item = Option<&str>> + '_ {
        self.inner.names.iter().map(|n| n.as_deref())
    }

    /// Whether the regex matches somewhere in `subject`; a match that hits the match limit
    /// counts as none (see [`Regex::try_is_match`] to tell).
    pub fn is_match(&self, subject: &str) -> bool {
        let inner = &*self.inner;
        if let Some(fast) = inner.fast_str.as_ref() {
            if !inner.to_slow(subject.as_bytes()) {
                return fast.is_match(subject);
            }
        }
        self.try_is_match(subject.as_bytes()).unwrap_or(false)
    }

    /// Whether the regex matches somewhere in `subject`, or the limit it hit.
    pub fn try_is_match(&self, subject: &[u8]) -> Result<bool, MatchError> {
        let inner = &*self.inner;
        if let Some(fast) = inner.fast.as_ref().filter(|_| !inner.to_slow(subject)) {
            return Ok(fast.is_match(subject));
        }
        let mut slots = [None; 2];
        inner
            .program()
            .search(subject, &mut slots, inner.match_limit)
    }

    /// The first match's groups; a match that hits the match limit counts as none (see
    /// [`Regex::try_captures`] to tell).
    pub fn captures<'a>(&'a self, subject: &'a str) -> Option<Captures<'a>> {
        let inner = &*self.inner;
        if let Some(fast) = inner.fast_str.as_ref() {
            if !inner.to_slow(subject.as_bytes()) {
                return fast.captures(subject).map(|c| Captures {
                    subject: subject.as_bytes(),
                    text: Some(subject),
                    names: &inner.names,
                    slots: Slots::Str(c),
                });
            }
        }
        let mut c = self.try_captures(subject.as_bytes()).ok().flatten()?;
        c.text = Some(subject);
        Some(c)
    }

    /// The first match's groups, or the limit it hit.
    pub fn try_captures<'a>(
        &'a self,
        subject: &'a [u8],
    ) -> Result<Option<Captures<'a>>, MatchError> {
        let inner = &*self.inner;
        if let Some(fast) = inner.fast.as_ref().filter(|_| !inner.to_slow(subject)) {
            return Ok(fast.captures(subject).map(|c| Captures {
                subject,
                text: None,
                names: &inner.names,
                slots: Slots::Fast(c),
            }));
        }
        let mut slots = vec![None; 2 * inner.names.len()];
        if !inner
            .program()
            .search(subject, &mut slots, inner.match_limit)?
        {
            return Ok(None);
        }
        Ok(Some(Captures {
            subject,
            text: None,
            names: &inner.names,
            slots: Slots::Slow(slots),
        }))
    }
}

impl Inner {
    fn to_slow(&self, subject: &[u8]) -> bool {
        self.newline_to_slow && subject.last() == Some(&b'\n')
    }

    fn program(&self) -> &backtrack::Program {
        self.slow
            .as_ref()
            .expect("build() keeps a program whenever the fast engine cannot run a subject")
    }
}

/// The groups of one match.
pub struct Captures<'a> {
    subject: &'a [u8],
    /// The subject as text, when it was given as text.
    text: Option<&'a str>,
    names: &'a [Option<String>],
    slots: Slots<'a>,
}

enum Slots<'a> {
    Str(regex::Captures<'a>),
    Fast(regex::bytes::Captures<'a>),
    /// Two per group: start and end.
    Slow(Vec<Option<usize>>),
}

impl<'a> Captures<'a> {
    /// Group `i` (0 is the whole match), if it took part in the match.
    pub fn get(&self, i: usize) -> Option<Match<'a>> {
        let (start, end) = match &self.slots {
            Slots::Str(c) => c.get(i).map(|m| (m.start(), m.end()))?,
            Slots::Fast(c) => c.get(i).map(|m| (m.start(), m.end()))?,
            Slots::Slow(s) => (s.get(2 * i).copied()??, s.get(2 * i + 1).copied()??),
        };
        Some(Match {
            subject: self.subject,
            text: self.text,
            start,
            end,
        })
    }

    /// The group named `name` (the first that took part, when names repeat under `(?J)`).
    pub fn name(&self, name: &str) -> Option<Match<'a>> {
        self.names
            .iter()
            .enumerate()
            .filter(|(_, n)| n.as_deref() == Some(name))
            .find_map(|(i, _)| self.get(i))
    }

    /// The number of groups, group 0 included.
    pub fn len(&self) -> usize {
        self.names.len()
    }

    /// Never true: group 0 is always there.
    pub fn is_empty(&self) -> bool {
        false
    }

    /// Every group in order, group 0 first.
    pub fn iter(&self) -> impl Iterator<Item = Option<Match<'a>>> + '_ {
        (0..self.len()).map(|i| self.get(i))
    }
}

/// Where a group matched.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Match<'a> {
    subject: &'a [u8],
    text: Option<&'a str>,
    start: usize,
    end: usize,
}

impl<'a> Match<'a> {
    pub fn start(&self) -> usize {
        self.start
    }

    pub fn end(&self) -> usize {
        self.end
    }

    pub fn range(&self) -> std::ops::Range<usize> {
        self.start..self.end
    }

    pub fn as_bytes(&self) -> &'a [u8] {
        &self.subject[self.start..self.end]
    }

    /// The matched text. A group can end inside a multi-byte character (PCRE2 matches bytes);
    /// such a piece is shown with U+FFFD.
    pub fn as_str(&self) -> Cow<'a, str> {
        match self.text.and_then(|t| t.get(self.start..self.end)) {
            Some(s) => Cow::Borrowed(s),
            None => String::from_utf8_lossy(self.as_bytes()),
        }
    }
}

/// A pattern that does not compile.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Error {
    pattern: String,
    message: String,
    offset: usize,
    unsupported: bool,
}

impl Error {
    /// PCRE2's message (or ours, for a feature this crate does not run).
    pub fn message(&self) -> &str {
        &self.message
    }

    /// The byte offset in the pattern where PCRE2 reports the error.
    pub fn offset(&self) -> usize {
        self.offset
    }

    /// PCRE2 accepts the pattern, but this crate does not run it.
    pub fn is_unsupported(&self) -> bool {
        self.unsupported
    }
}

impl fmt::Display for Error {
    /// nginx's words: `pcre2_compile() failed: MESSAGE in "PATTERN" at "REST"`, without the
    /// `at` part when the error is at the end.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if !self.unsupported {
            f.write_str("pcre2_compile() failed: ")?;
        }
        write!(f, "{} in \"{}\"", self.message, self.pattern)?;
        let rest = self
            .pattern
            .as_bytes()
            .get(self.offset..)
            .unwrap_or_default();
        if !rest.is_empty() {
            write!(f, " at \"{}\"", String::from_utf8_lossy(rest))?;
        }
        Ok(())
    }
}

impl std::error::Error for Error {}

/// A match that could not finish: nginx logs `pcre2_match() failed: CODE on "SUBJECT" using
/// "PATTERN"` at `alert` and ends the request with 500 (or closes the connection, for a
/// `server_name` regex).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MatchError {
    /// Too much backtracking (PCRE2_ERROR_MATCHLIMIT).
    MatchLimit,
    /// Too many choice points held at once (PCRE2_ERROR_HEAPLIMIT).
    HeapLimit,
}

impl MatchError {
    /// PCRE2's error code, as nginx prints it.
    pub fn code(&self) -> i32 {
        match self {
            MatchError::MatchLimit => -47,
            MatchError::HeapLimit => -63,
        }
    }
}

impl fmt::Display for MatchError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "pcre2_match() failed: {}", self.code())
    }
}

impl std::error::Error for MatchError {}

#[cfg(test)]
mod tests {
    use super::*;

    fn spans(re: &str, s: &str) -> Option<Vec<Option<(usize, usize)>>> {
        let re = Regex::new(re).expect("compiles");
        let c = re.captures(s)?;
        Some(c.iter().map(|m| m.map(|m| (m.start(), m.end()))).collect())
    }

    #[test]
    fn dollar_before_a_final_newline() {
        let re = Regex::new(r"\.php$").expect("compiles");
        assert!(re.is_match("/a.php"));
        assert!(re.is_match("/a.php\n"));
        assert!(!re.is_match("/a.php\n\n"));
        assert_eq!(
            spans(r"(php)$", "x.php\n"),
            Some(vec![Some((2, 5)), Some((2, 5))])
        );
        assert!(!Regex::new(r"php\z").expect("compiles").is_match("php\n"));
    }

    #[test]
    fn bytes_not_characters() {
        // "é" is two bytes: `.` takes one.
        assert!(Regex::new("^/..$").expect("compiles").is_match("/é"));
        assert!(!Regex::new("^/.$").expect("compiles").is_match("/é"));
        assert!(!Regex::new(r"^\w$").expect("compiles").is_match("é"));
        let c = RegexBuilder::new("^caseé$")
            .caseless(true)
            .build()
            .expect("compiles");
        assert!(c.is_match("CASEé"));
        assert!(!c.is_match("CASEÉ"));
    }

    #[test]
    fn lookaround_and_backreferences() {
        let re = Regex::new("^/(?!private)").expect("compiles");
        assert!(re.is_match("/public"));
        assert!(!re.is_match("/private/x"));
        assert!(Regex::new(r"(?<=\.)php$")
            .expect("compiles")
            .is_match("a.php"));
        assert_eq!(
            spans(r"(\w)\1", "abccd"),
            Some(vec![Some((2, 4)), Some((2, 3))])
        );
        assert!(!Regex::new(r"^(?>a+)a").expect("compiles").is_match("aaa"));
        assert!(!Regex::new(r"^a++a").expect("compiles").is_match("aaa"));
    }

    #[test]
    fn named_groups_three_ways() {
        for p in [r"(?<x>\d+)", r"(?P<x>\d+)", r"(?'x'\d+)"] {
            let re = Regex::new(p).expect("compiles");
            assert_eq!(
                re.capture_names().collect::<Vec<_>>(),
                vec![None, Some("x")]
            );
            let c = re.captures("ab12").expect("matches");
            assert_eq!(
                c.name("x").map(|m| m.as_str().into_owned()),
                Some("12".into())
            );
        }
    }

    #[test]
    fn errors_read_like_nginx() {
        let e = Regex::new("(foo").expect_err("fails");
        assert_eq!(
            e.to_string(),
            r#"pcre2_compile() failed: missing closing parenthesis in "(foo""#
        );
        let e = Regex::new("a)b").expect_err("fails");
        assert_eq!(
            e.to_string(),
            r#"pcre2_compile() failed: unmatched closing parenthesis in "a)b" at ")b""#
        );
    }

    #[test]
    fn catastrophic_backtracking_stops() {
        // The lookahead sends it to the backtracker: PCRE2 gives up on it too.
        let re = Regex::new(r"^((?=a)a+)+$").expect("compiles");
        let s = format!("{}b", "a".repeat(40));
        assert_eq!(re.try_is_match(s.as_bytes()), Err(MatchError::MatchLimit));
        assert!(!re.is_match(&s));
        // The same without the lookahead runs in linear time and answers (PCRE2 gives up).
        assert_eq!(
            Regex::new(r"^(a+)+$")
                .expect("compiles")
                .try_is_match(s.as_bytes()),
            Ok(false)
        );
        assert_eq!(
            MatchError::MatchLimit.to_string(),
            "pcre2_match() failed: -47"
        );
    }
}
