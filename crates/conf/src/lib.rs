//! nginx's configuration language: lexing, parsing and `include`, with a file and line on
//! every directive.
//!
//! This crate knows the *syntax* only: blocks, `;`, quotes and escapes, `#` comments, `$var` /
//! `${var}` kept verbatim for later compilation into templates, and `include` (the one directive
//! the syntax itself must understand, since it splices files into the tree). What a directive
//! means, where it is allowed and how many arguments it takes belong to the server's directive
//! registry.
//!
//! Errors read like nginx's: `unexpected "}" in /etc/shoal/shoal.conf:12`. The caller prefixes
//! `shoal: [emerg] `.

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

mod lexer;
mod parser;
pub mod raw;

pub use parser::{parse_file, parse_str, MAX_DEPTH};
pub use raw::{push_raw_byte, raw_bytes_into, text_from_bytes};

/// Where a directive (or an error) comes from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Span {
    /// The file's path as nginx would print it, or `None` for the command line (`-g`).
    pub file: Option<Arc<Path>>,
    /// 1-based line, counted as nginx counts it: the line the lexer was on when the directive
    /// *ended*, i.e. the line of its terminating `;` or `{` (a directive written over lines 3-5
    /// is at line 5; a block directive is at the line of its `{`). For a syntax error, the line
    /// of the offending character or of the end of the file. Meaningless for the command line.
    pub line: usize,
}

impl fmt::Display for Span {
    /// `/etc/shoal/shoal.conf:12`, or `command line` for `-g` directives (as nginx prints).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.file {
            Some(p) => write!(f, "{}:{}", p.display(), self.line),
            None => f.write_str("command line"),
        }
    }
}

/// One argument of a directive, after nginx's escape processing (`\"`, `\'`, `\\`, `\t`, `\r`,
/// `\n`; any other backslash is kept, so regexes read as written).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Arg {
    /// The text after escape processing; `$var` and `${var}` are kept verbatim. A byte that is
    /// not UTF-8 is a private-use character ([`raw`]).
    pub value: String,
    /// Whether the argument was written in quotes (`"..."` or `'...'`).
    pub quoted: bool,
}

/// A directive: `name arg...;` or `name arg... { ... }`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Directive {
    /// The first word (it may have been quoted, which nginx allows).
    pub name: String,
    /// The words after the name.
    pub args: Vec<Arg>,
    /// `Some` for a block directive (`http { ... }`), even an empty one.
    pub block: Option<Vec<Directive>>,
    /// Where the directive ended (see [`Span::line`]); for an included directive, the included
    /// file.
    pub span: Span,
}

impl Directive {
    /// The argument values as plain strings.
    pub fn values(&self) -> impl Iterator<Item = &str> {
        self.args.iter().map(|a| a.value.as_str())
    }
}

/// A file read while parsing, kept for `-T`, which prints every file as read.
#[derive(Clone, Debug)]
pub struct SourceFile {
    /// The path the file was opened as (relative includes joined to the prefix).
    pub path: PathBuf,
    /// Its whole text (invalid UTF-8 replaced, which nginx would not need to do).
    pub text: String,
}

/// The result of parsing a main file and everything it includes.
#[derive(Clone, Debug, Default)]
pub struct Parsed {
    /// Top-level directives with `include`s already spliced in place.
    pub directives: Vec<Directive>,
    /// Every file read, in the order first read (main file first).
    pub files: Vec<SourceFile>,
}

/// A syntax error, or an I/O error reading a file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Error {
    /// nginx's wording, e.g. `unexpected end of file, expecting ";" or "}"`.
    pub message: String,
    /// Where; `None` when there is no position (the main file cannot be opened).
    pub span: Option<Span>,
}

impl Error {
    /// An error with nginx's wording and, when there is one, its place.
    pub fn new(message: impl Into<String>, span: Option<Span>) -> Self {
        Error {
            message: message.into(),
            span,
        }
    }
}

impl fmt::Display for Error {
    /// `MESSAGE in FILE:LINE` (or `in command line`), or the bare message without a span.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.span {
            Some(span) => write!(f, "{} in {}", self.message, span),
            None => f.write_str(&self.message),
        }
    }
}

impl std::error::Error for Error {}

/// An OS error as nginx prints it: `(2: No such file or directory)`.
pub fn os_error(e: &std::io::Error) -> String {
    match e.raw_os_error() {
        Some(code) => {
            let text = e.to_string();
            // std appends " (os error N)"; nginx prints strerror only.
            let text = text
                .strip_suffix(&format!(" (os error {code})"))
                .unwrap_or(&text);
            format!("({code}: {text})")
        }
        None => format!("({e})"),
    }
}
