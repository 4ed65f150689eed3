//! Directives from tokens: blocks paired up, `include` spliced in, a span on every directive.
//!
//! This follows nginx's `ngx_conf_parse`: a file's body is a list of directives, a `}` closes the
//! innermost block opened *in the same file*, and the end of a file ends only that file (an
//! included file never closes its includer's block). `include` is resolved here because it is
//! syntax: a relative pattern is taken from the configuration prefix, a pattern with `*?[` is a
//! glob whose matches are read in sorted order (no match is fine), and an include loop is an error.
//!
//! The parser is iterative (an explicit stack of open files and blocks), so neither deep nesting
//! nor long include chains can overflow the thread's stack; block nesting is still capped at
//! [`MAX_DEPTH`] so that the resulting tree stays cheap to walk and drop.

use crate::lexer::{Event, Lexer, Word};
use crate::{os_error, Arg, Directive, Error, Parsed, SourceFile, Span};
use std::collections::HashMap;
use std::fs;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The deepest nesting of blocks accepted (`a { b { ... } }`); real configurations use under 10.
pub const MAX_DEPTH: usize = 256;

/// Parses `path` and every file it includes. Relative `include` paths resolve against
/// `conf_prefix` (the directory of the main configuration file, as nginx does).
///
/// If `path` cannot be read the error has no span:
/// `open() "/etc/shoal/shoal.conf" failed (2: No such file or directory)`.
pub fn parse_file(path: &Path, conf_prefix: &Path) -> Result<Parsed, Error> {
    let mut parser = Parser::new(conf_prefix);
    parser.open(path, None, Vec::new())?;
    parser.run()
}

/// Parses text that is not a file: `-g` directives (`file` = `None`: errors say `in command
/// line`) or the built-in default configuration.
///
/// With `file` = `None` the text is held to nginx's `-g` rules: block directives are refused
/// (`block directives are not supported in -g option`) and a missing `;` reads
/// `unexpected end of parameter, expecting ";"`. [`Parsed::files`] then lists only the files
/// the text includes; with `Some(path)` it starts with `text` under `path`.
pub fn parse_str(text: &str, file: Option<&Path>, conf_prefix: &Path) -> Result<Parsed, Error> {
    let mut parser = Parser::new(conf_prefix);
    let bytes: Arc<[u8]> = Arc::from(text.as_bytes());
    let frame = match file {
        None => FileFrame {
            lexer: Lexer::new(bytes, true),
            file: None,
            key: None,
            command_line: true,
            pending: Vec::new(),
            include_span: None,
        },
        Some(path) => {
            let shared: Arc<Path> = Arc::from(path);
            parser.files.push(SourceFile {
                path: path.to_path_buf(),
                text: text.to_string(),
            });
            parser
                .cache
                .insert(path.to_path_buf(), (shared.clone(), bytes.clone()));
            FileFrame {
                lexer: Lexer::new(bytes, false),
                file: Some(shared),
                key: Some(identity(path)),
                command_line: false,
                pending: Vec::new(),
                include_span: None,
            }
        }
    };
    parser.file_frames.push(parser.stack.len());
    parser.stack.push(Frame {
        directives: Vec::new(),
        kind: Kind::File(frame),
    });
    parser.run()
}

/// A file being read: its lexer and where it came from.
struct FileFrame {
    lexer: Lexer,
    file: Option<Arc<Path>>,
    /// What identifies the file for loop detection (its canonical path when it has one).
    key: Option<PathBuf>,
    /// The `-g` command line, where blocks are not allowed.
    command_line: bool,
    /// Further matches of the glob this file came from, the next one last.
    pending: Vec<PathBuf>,
    /// The `include` that read this file (for errors opening the pending matches).
    include_span: Option<Span>,
}

/// What a stack entry is collecting directives for.
enum Kind {
    File(FileFrame),
    /// An open block: its directive, waiting for the `}`.
    Block {
        name: String,
        args: Vec<Arg>,
        span: Span,
    },
}

struct Frame {
    directives: Vec<Directive>,
    kind: Kind,
}

struct Parser<'a> {
    conf_prefix: &'a Path,
    /// Open files and blocks, innermost last; the bottom entry is the main file.
    stack: Vec<Frame>,
    /// Index in `stack` of each open file, innermost last.
    file_frames: Vec<usize>,
    /// Open blocks over all files.
    depth: usize,
    /// Every file read, by the path it was opened as, so it is read (and listed) once.
    cache: HashMap<PathBuf, (Arc<Path>, Arc<[u8]>)>,
    files: Vec<SourceFile>,
}

/// The file's identity for loop detection: symlinks and `./` spellings resolved when possible.
fn identity(path: &Path) -> PathBuf {
    fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf())
}

fn has_glob_chars(path: &Path) -> bool {
    path.as_os_str()
        .as_encoded_bytes()
        .iter()
        .any(|b| matches!(b, b'*' | b'?' | b'['))
}

fn to_arg(word: Word) -> Arg {
    Arg {
        value: word.value,
        quoted: word.quoted,
    }
}

impl<'a> Parser<'a> {
    fn new(conf_prefix: &'a Path) -> Self {
        Parser {
            conf_prefix,
            stack: Vec::new(),
            file_frames: Vec::new(),
            depth: 0,
            cache: HashMap::new(),
            files: Vec::new(),
        }
    }

    /// Reads a file once (later reads share the first); nginx reads only `st_size` bytes, so
    /// `/dev/zero` or a FIFO reads as empty rather than forever.
    fn load(&mut self, path: &Path, span: &Option<Span>) -> Result<(Arc<Path>, Arc<[u8]>), Error> {
        if let Some(loaded) = self.cache.get(path) {
            return Ok(loaded.clone());
        }
        let fail = |call: &str, e: &std::io::Error| {
            Error::new(
                format!("{call}() \"{}\" failed {}", path.display(), os_error(e)),
                span.clone(),
            )
        };
        let mut f = fs::File::open(path).map_err(|e| fail("open", &e))?;
        let size = f.metadata().map_err(|e| fail("fstat", &e))?.len();
        let mut bytes = Vec::with_capacity(usize::try_from(size).unwrap_or(0).min(1 << 24));
        f.by_ref()
            .take(size)
            .read_to_end(&mut bytes)
            .map_err(|e| fail("pread", &e))?;
        let loaded: (Arc<Path>, Arc<[u8]>) = (Arc::from(path), Arc::from(bytes));
        self.files.push(SourceFile {
            path: path.to_path_buf(),
            text: String::from_utf8_lossy(&loaded.1).into_owned(),
        });
        self.cache.insert(path.to_path_buf(), loaded.clone());
        Ok(loaded)
    }

    /// Pushes a file to be read next. `span` is the `include` that asked for it (`None` for the
    /// main file); `pending` are the glob matches still to read after it.
    fn open(
        &mut self,
        path: &Path,
        span: Option<Span>,
        pending: Vec<PathBuf>,
    ) -> Result<(), Error> {
        let key = identity(path);
        let looped = self.file_frames.iter().any(|&i| match &self.stack[i].kind {
            Kind::File(f) => f.key.as_ref() == Some(&key),
            Kind::Block { .. } => false,
        });
        if looped {
            return Err(Error::new(
                format!("include loop: \"{}\" includes itself", path.display()),
                span,
            ));
        }
        let (file, bytes) = self.load(path, &span)?;
        self.file_frames.push(self.stack.len());
        self.stack.push(Frame {
            directives: Vec::new(),
            kind: Kind::File(FileFrame {
                lexer: Lexer::new(bytes, false),
                file: Some(file),
                key: Some(key),
                command_line: false,
                pending,
                include_span: span,
            }),
        });
        Ok(())
    }

    /// `include PATTERN;`: the matched files are pushed, to be read before the next directive.
    fn include(&mut self, args: &[Arg], span: Span) -> Result<(), Error> {
        let [pattern] = args else {
            return Err(Error::new(
                "invalid number of arguments in \"include\" directive",
                Some(span),
            ));
        };
        let path = self.conf_prefix.join(&pattern.value);
        if !has_glob_chars(&path) {
            return self.open(&path, Some(span), Vec::new());
        }
        let mut matches = glob_sorted(&path);
        matches.reverse();
        match matches.pop() {
            Some(first) => self.open(&first, Some(span), matches),
            None => Ok(()),
        }
    }

    fn current_file(&mut self) -> &mut FileFrame {
        let i = *self
            .file_frames
            .last()
            .expect("a file is open while parsing");
        match &mut self.stack[i].kind {
            Kind::File(f) => f,
            Kind::Block { .. } => unreachable!("file_frames indexes only files"),
        }
    }

    fn push_directive(&mut self, d: Directive) {
        self.stack
            .last_mut()
            .expect("a file is open while parsing")
            .directives
            .push(d);
    }

    fn run(mut self) -> Result<Parsed, Error> {
        loop {
            let f = self.current_file();
            let event = f.lexer.next();
            let line = f.lexer.line();
            let file = f.file.clone();
            let command_line = f.command_line;
            let event = event.map_err(|e| {
                Error::new(
                    e.message,
                    Some(Span {
                        file: file.clone(),
                        line: e.line,
                    }),
                )
            })?;
            let span = Span { file, line };
            match event {
                Event::Eof => {
                    let top = self.stack.pop().expect("a file is open while parsing");
                    let Kind::File(done) = top.kind else {
                        return Err(Error::new(
                            "unexpected end of file, expecting \"}\"",
                            Some(span),
                        ));
                    };
                    self.file_frames.pop();
                    match self.stack.last_mut() {
                        None => {
                            return Ok(Parsed {
                                directives: top.directives,
                                files: self.files,
                            })
                        }
                        Some(parent) => parent.directives.extend(top.directives),
                    }
                    let mut pending = done.pending;
                    if let Some(next) = pending.pop() {
                        self.open(&next, done.include_span, pending)?;
                    }
                }
                Event::BlockEnd => {
                    let top = self.stack.pop().expect("a file is open while parsing");
                    let Kind::Block {
                        name,
                        args,
                        span: block_span,
                    } = top.kind
                    else {
                        return Err(Error::new("unexpected \"}\"", Some(span)));
                    };
                    self.depth -= 1;
                    self.push_directive(Directive {
                        name,
                        args,
                        block: Some(top.directives),
                        span: block_span,
                    });
                }
                Event::Simple(words) => {
                    let mut words = words.into_iter().map(to_arg);
                    let name = words
                        .next()
                        .expect("the lexer never returns an empty directive");
                    let args: Vec<Arg> = words.collect();
                    if name.value == "include" {
                        self.include(&args, span)?;
                    } else {
                        self.push_directive(Directive {
                            name: name.value,
                            args,
                            block: None,
                            span,
                        });
                    }
                }
                Event::BlockStart(words) => {
                    let mut words = words.into_iter().map(to_arg);
                    let name = words
                        .next()
                        .expect("the lexer never returns an empty directive");
                    if command_line {
                        return Err(Error::new(
                            "block directives are not supported in -g option",
                            Some(span),
                        ));
                    }
                    if name.value == "include" {
                        return Err(Error::new(
                            "directive \"include\" is not terminated by \";\"",
                            Some(span),
                        ));
                    }
                    if self.depth >= MAX_DEPTH {
                        return Err(Error::new(
                            format!("too many nested blocks (the limit is {MAX_DEPTH})"),
                            Some(span),
                        ));
                    }
                    self.depth += 1;
                    self.stack.push(Frame {
                        directives: Vec::new(),
                        kind: Kind::Block {
                            name: name.value,
                            args: words.collect(),
                            span,
                        },
                    });
                }
            }
        }
    }
}

/// The files matching `pattern`, sorted bytewise as glibc's `glob()` sorts them in the C locale.
/// Like `glob()` without `GLOB_ERR`, unreadable directories are skipped, and a leading `.` must be
/// matched literally. A pattern the `glob` crate rejects (say, an unclosed `[`) is taken
/// literally, as `glob()` does.
fn glob_sorted(pattern: &Path) -> Vec<PathBuf> {
    let options = glob::MatchOptions {
        case_sensitive: true,
        require_literal_separator: true,
        require_literal_leading_dot: true,
    };
    let mut found: Vec<PathBuf> = match pattern
        .to_str()
        .ok_or(())
        .and_then(|p| glob::glob_with(p, options).map_err(|_| ()))
    {
        Ok(paths) => paths.filter_map(Result::ok).collect(),
        Err(()) if pattern.exists() => vec![pattern.to_path_buf()],
        Err(()) => Vec::new(),
    };
    found.sort_by(|a, b| {
        a.as_os_str()
            .as_encoded_bytes()
            .cmp(b.as_os_str().as_encoded_bytes())
    });
    found
}
