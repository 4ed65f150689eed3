//! Tokens of nginx's configuration syntax, one directive's worth at a time.
//!
//! This reproduces, byte for byte, the behaviour of nginx's `ngx_conf_read_token`: words split
//! on space, tab, CR and LF; `;`, `{` and `}` act only where nginx lets them (a `}` that does not
//! begin a token is part of the word, as is a `#`); quotes may span lines; a backslash makes the
//! next character ordinary; `${` does not open a block. It does not know what a directive is or
//! where blocks end: the parser pairs `{` with `}`.
//!
//! The one thing to know: the lexer reads the whole directive before returning it, so its line is
//! the line of the terminating `;` or `{`, which is the line nginx reports.

use std::sync::Arc;

/// nginx's `NGX_CONF_BUFFER`: a token (counted from its first character, or from just after its
/// opening quote) must end within this many bytes, as nginx cannot hold a longer one.
pub(crate) const MAX_TOKEN: usize = 4096;

/// One word of a directive after escape processing.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Word {
    pub value: String,
    pub quoted: bool,
}

/// What one call to [`Lexer::next`] found.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Event {
    /// `name args ;` (never empty).
    Simple(Vec<Word>),
    /// `name args {` (never empty).
    BlockStart(Vec<Word>),
    /// A `}` that began a token.
    BlockEnd,
    /// End of input between directives.
    Eof,
}

/// A syntax error with the line nginx would report.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct LexError {
    pub message: String,
    pub line: usize,
}

/// A lexer over one file's bytes (or the `-g` command line).
pub(crate) struct Lexer {
    text: Arc<[u8]>,
    pos: usize,
    line: usize,
    command_line: bool,
}

fn is_space(ch: u8) -> bool {
    matches!(ch, b' ' | b'\t' | b'\r' | b'\n')
}

impl Lexer {
    /// A lexer for a file's text. `command_line` selects nginx's `-g` behaviour: no token length
    /// limit and a different end-of-input message.
    pub fn new(text: Arc<[u8]>, command_line: bool) -> Self {
        Lexer {
            text,
            pos: 0,
            line: 1,
            command_line,
        }
    }

    /// The line the lexer is on (1-based): after [`Lexer::next`] returned a directive, the line
    /// of its `;` or `{`.
    pub fn line(&self) -> usize {
        self.line
    }

    fn err(&self, message: impl Into<String>, line: usize) -> LexError {
        LexError {
            message: message.into(),
            line,
        }
    }

    /// `unexpected "X"` for the character that starts at byte `at`, shown whole if it is UTF-8.
    fn unexpected(&self, at: usize) -> LexError {
        let rest = &self.text[at..self.text.len().min(at + 4)];
        let shown = match std::str::from_utf8(rest) {
            Ok(s) => s.chars().next().map(String::from),
            Err(e) if e.valid_up_to() > 0 => std::str::from_utf8(&rest[..e.valid_up_to()])
                .ok()
                .and_then(|s| s.chars().next().map(String::from)),
            Err(_) => None,
        }
        .unwrap_or_else(|| char::REPLACEMENT_CHARACTER.to_string());
        self.err(format!("unexpected \"{shown}\""), self.line)
    }

    /// Reads the next directive (all its words and its terminator), a `}`, or the end of input.
    pub fn next(&mut self) -> Result<Event, LexError> {
        let mut words: Vec<Word> = Vec::new();
        // The names are nginx's: `last_space` = between tokens, `need_space` = just after a
        // closing quote, `escaped` = the previous byte was a backslash.
        let mut last_space = true;
        let mut need_space = false;
        let mut comment = false;
        let mut escaped = false;
        let mut variable = false;
        let mut d_quoted = false;
        let mut s_quoted = false;
        // Where the current token's bytes start, and its line, for the length limit.
        let mut start = self.pos;
        let mut start_line = self.line;

        loop {
            if self.pos >= self.text.len() {
                if !words.is_empty() || !last_space {
                    let message = if self.command_line {
                        "unexpected end of parameter, expecting \";\""
                    } else {
                        "unexpected end of file, expecting \";\" or \"}\""
                    };
                    return Err(self.err(message, self.line));
                }
                return Ok(Event::Eof);
            }
            if !self.command_line && self.pos - start >= MAX_TOKEN {
                return Err(self.too_long(start, start_line, d_quoted, s_quoted));
            }

            let ch = self.text[self.pos];
            self.pos += 1;

            if ch == b'\n' {
                self.line += 1;
                comment = false;
            }
            if comment {
                continue;
            }
            if escaped {
                escaped = false;
                continue;
            }

            if need_space {
                match ch {
                    _ if is_space(ch) => {
                        last_space = true;
                        need_space = false;
                        continue;
                    }
                    b';' => return Ok(Event::Simple(words)),
                    b'{' => return Ok(Event::BlockStart(words)),
                    // `if ($a = "b")`: the `)` starts the next word.
                    b')' => {
                        last_space = true;
                        need_space = false;
                    }
                    _ => return Err(self.unexpected(self.pos - 1)),
                }
            }

            if last_space {
                start = self.pos - 1;
                start_line = self.line;
                match ch {
                    _ if is_space(ch) => {}
                    b';' | b'{' => {
                        if words.is_empty() {
                            return Err(self.unexpected(self.pos - 1));
                        }
                        return Ok(if ch == b';' {
                            Event::Simple(words)
                        } else {
                            Event::BlockStart(words)
                        });
                    }
                    b'}' => {
                        if !words.is_empty() {
                            return Err(self.unexpected(self.pos - 1));
                        }
                        return Ok(Event::BlockEnd);
                    }
                    b'#' => comment = true,
                    b'\\' => {
                        escaped = true;
                        last_space = false;
                    }
                    b'"' => {
                        start += 1;
                        d_quoted = true;
                        last_space = false;
                    }
                    b'\'' => {
                        start += 1;
                        s_quoted = true;
                        last_space = false;
                    }
                    b'$' => {
                        variable = true;
                        last_space = false;
                    }
                    _ => last_space = false,
                }
                continue;
            }

            if ch == b'{' && variable {
                continue;
            }
            variable = false;
            match ch {
                b'\\' => {
                    escaped = true;
                    continue;
                }
                b'$' => {
                    variable = true;
                    continue;
                }
                _ => {}
            }

            let found_quoted = if d_quoted {
                if ch != b'"' {
                    continue;
                }
                d_quoted = false;
                need_space = true;
                true
            } else if s_quoted {
                if ch != b'\'' {
                    continue;
                }
                s_quoted = false;
                need_space = true;
                true
            } else if is_space(ch) || ch == b';' || ch == b'{' {
                last_space = true;
                false
            } else {
                continue;
            };

            words.push(Word {
                value: unescape(&self.text[start..self.pos - 1]),
                quoted: found_quoted,
            });
            match ch {
                b';' => return Ok(Event::Simple(words)),
                b'{' => return Ok(Event::BlockStart(words)),
                _ => {}
            }
        }
    }

    /// nginx's two "too long parameter" errors, reported at the line where the token started.
    fn too_long(&self, start: usize, line: usize, d_quoted: bool, s_quoted: bool) -> LexError {
        let message = if d_quoted {
            "too long parameter, probably missing terminating \"\"\" character".to_string()
        } else if s_quoted {
            "too long parameter, probably missing terminating \"'\" character".to_string()
        } else {
            let head = &self.text[start..self.text.len().min(start + 10)];
            format!(
                "too long parameter \"{}...\" started",
                String::from_utf8_lossy(head)
            )
        };
        self.err(message, line)
    }
}

/// Copies a token out as nginx does: `\"`, `\'`, `\\` lose the backslash, `\t`, `\r`, `\n` become
/// TAB, CR, LF, and any other backslash is kept (`\.php$` stays a regex).
fn unescape(raw: &[u8]) -> String {
    let mut out = Vec::with_capacity(raw.len());
    let mut i = 0;
    while i < raw.len() {
        if raw[i] == b'\\' {
            match raw.get(i + 1) {
                Some(b'"' | b'\'' | b'\\') => i += 1,
                Some(&c @ (b't' | b'r' | b'n')) => {
                    out.push(match c {
                        b't' => b'\t',
                        b'r' => b'\r',
                        _ => b'\n',
                    });
                    i += 2;
                    continue;
                }
                _ => {}
            }
        }
        out.push(raw[i]);
        i += 1;
    }
    // Bytes that are not UTF-8 (a `map` key written as `$binary_remote_addr`'s raw bytes) are
    // kept, as private-use characters that give the bytes back.
    crate::raw::text_from_bytes(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lex_all(text: &str) -> Result<Vec<Event>, LexError> {
        let mut lexer = Lexer::new(Arc::from(text.as_bytes()), false);
        let mut events = Vec::new();
        loop {
            let event = lexer.next()?;
            if event == Event::Eof {
                return Ok(events);
            }
            events.push(event);
        }
    }

    /// The words of the only directive in `text`.
    fn words(text: &str) -> Vec<(String, bool)> {
        match lex_all(text).expect("lexes").as_slice() {
            [Event::Simple(w)] | [Event::BlockStart(w)] => {
                w.iter().map(|w| (w.value.clone(), w.quoted)).collect()
            }
            other => panic!("expected one directive, got {other:?}"),
        }
    }

    fn plain(values: &[&str]) -> Vec<(String, bool)> {
        values.iter().map(|v| (v.to_string(), false)).collect()
    }

    fn lex_err(text: &str) -> (String, usize) {
        let e = lex_all(text).expect_err("should fail");
        (e.message, e.line)
    }

    #[test]
    fn separators() {
        assert_eq!(words("a\tb\r\nc  d;"), plain(&["a", "b", "c", "d"]));
    }

    #[test]
    fn comment_only_at_token_start() {
        assert_eq!(words("a#b c # d;\ne;"), plain(&["a#b", "c", "e"]));
        assert_eq!(words("# x ; { }\nf;"), plain(&["f"]));
    }

    #[test]
    fn brace_after_word_is_part_of_it() {
        assert_eq!(words("a foo};"), plain(&["a", "foo}"]));
        assert_eq!(
            lex_all("a{}").unwrap(),
            vec![
                Event::BlockStart(vec![Word {
                    value: "a".into(),
                    quoted: false
                }]),
                Event::BlockEnd
            ]
        );
    }

    #[test]
    fn quotes_span_lines_and_keep_specials() {
        assert_eq!(
            words("a \"x;{}#\n y\" 'q\"' b;"),
            vec![
                ("a".into(), false),
                ("x;{}#\n y".into(), true),
                ("q\"".into(), true),
                ("b".into(), false)
            ]
        );
        assert_eq!(
            words("a \"\";"),
            vec![("a".into(), false), ("".into(), true)]
        );
        assert_eq!(words("a\"b c\";"), plain(&["a\"b", "c\""]));
    }

    #[test]
    fn after_closing_quote() {
        assert_eq!(
            words("a \"b\";"),
            vec![("a".into(), false), ("b".into(), true)]
        );
        assert_eq!(
            words("a 'b'{"),
            vec![("a".into(), false), ("b".into(), true)]
        );
        assert_eq!(
            words("if ($a = \"b\");"),
            vec![
                ("if".into(), false),
                ("($a".into(), false),
                ("=".into(), false),
                ("b".into(), true),
                (")".into(), false)
            ]
        );
        assert_eq!(lex_err("a \"b\"c;"), ("unexpected \"c\"".into(), 1));
        assert_eq!(lex_err("a \"b\n\"\"c\";"), ("unexpected \"\"\"".into(), 2));
        assert_eq!(lex_err("a 'b'é;"), ("unexpected \"é\"".into(), 1));
    }

    #[test]
    fn escapes() {
        let q = |v: &str| (v.to_string(), true);
        let u = |v: &str| (v.to_string(), false);
        assert_eq!(
            words(r#"a "x\"y" 'p\'q' \\ \t\r\n \.php$ "\d" \;b;"#),
            vec![
                u("a"),
                q("x\"y"),
                q("p'q"),
                u("\\"),
                u("\t\r\n"),
                u("\\.php$"),
                q("\\d"),
                u("\\;b")
            ]
        );
        assert_eq!(words("a \\\"b;"), plain(&["a", "\"b"]));
        assert_eq!(words("a\\ b;"), plain(&["a\\ b"]));
    }

    #[test]
    fn variables() {
        assert_eq!(words("a ${b}c $d{"), plain(&["a", "${b}c", "$d"]));
        assert_eq!(words("a ${{b} $;"), plain(&["a", "${{b}", "$"]));
        assert_eq!(words("a x${b}{"), plain(&["a", "x${b}"]));
        assert_eq!(
            words("a \"${b}\";"),
            vec![("a".into(), false), ("${b}".into(), true)]
        );
    }

    #[test]
    fn errors_and_lines() {
        assert_eq!(lex_err(";"), ("unexpected \";\"".into(), 1));
        assert_eq!(lex_err("\n\n  {"), ("unexpected \"{\"".into(), 3));
        assert_eq!(lex_err("a b\n}"), ("unexpected \"}\"".into(), 2));
        let eof = "unexpected end of file, expecting \";\" or \"}\"";
        assert_eq!(lex_err("a b\n"), (eof.into(), 2));
        assert_eq!(lex_err("a"), (eof.into(), 1));
        assert_eq!(lex_err("a \"b;\n\n"), (eof.into(), 3));
        assert_eq!(lex_err("\\"), (eof.into(), 1));
        assert_eq!(lex_all("# only a comment").unwrap(), vec![]);
    }

    #[test]
    fn directive_line_is_terminator_line() {
        let mut lexer = Lexer::new(Arc::from(&b"\na\nb\n\nc;"[..]), false);
        assert!(matches!(lexer.next(), Ok(Event::Simple(_))));
        assert_eq!(lexer.line(), 5);
    }

    #[test]
    fn command_line_mode() {
        let mut lexer = Lexer::new(Arc::from(&b"daemon off"[..]), true);
        let e = lexer.next().unwrap_err();
        assert_eq!(e.message, "unexpected end of parameter, expecting \";\"");
        let long = format!("a {};", "x".repeat(10_000));
        let mut lexer = Lexer::new(Arc::from(long.as_bytes()), true);
        assert!(lexer.next().is_ok());
    }

    #[test]
    fn too_long_tokens() {
        let ok = format!("a {};", "x".repeat(MAX_TOKEN - 1));
        assert!(lex_all(&ok).is_ok());
        let long = format!("a\n{};", "x".repeat(MAX_TOKEN));
        assert_eq!(
            lex_err(&long),
            ("too long parameter \"xxxxxxxxxx...\" started".into(), 2)
        );
        let quoted = format!("a \"\n{}", "x".repeat(MAX_TOKEN));
        assert_eq!(
            lex_err(&quoted),
            (
                "too long parameter, probably missing terminating \"\"\" character".into(),
                1
            )
        );
        let quoted = format!("a '{}", "x".repeat(MAX_TOKEN + 1));
        assert_eq!(
            lex_err(&quoted),
            (
                "too long parameter, probably missing terminating \"'\" character".into(),
                1
            )
        );
        // A long token that reaches the end of the file is an end-of-file error, as in nginx.
        let at_eof = format!("a \"{}", "x".repeat(MAX_TOKEN));
        assert_eq!(
            lex_err(&at_eof).0,
            "unexpected end of file, expecting \";\" or \"}\""
        );
        // Long comments count too (nginx keeps the comment in its buffer).
        let comment = format!("#{}\na;", "x".repeat(MAX_TOKEN));
        assert!(lex_err(&comment)
            .0
            .starts_with("too long parameter \"#xxxxxxxxx...\""));
    }
}
