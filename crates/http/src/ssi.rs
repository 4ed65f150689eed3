//! The SSI command reader (nginx's `ngx_http_ssi_parse`): finds `<!--# command param="value"
//! ... -->` in a body that comes in pieces, a command split anywhere between them.
//!
//! It only reads: what a command does is the server's. Text between commands is handed back
//! as slices of the input (a prefix of `<!--#` held from the previous piece as a slice of a
//! constant), so nothing of the body is copied; what it keeps is one command being read,
//! bounded by nginx's limits (a name of 32 bytes, 16 parameters of 32-byte names, values of
//! `ssi_value_length`). A malformed command is skipped up to its `-->` and reported, with the
//! line nginx logs for it.

/// What starts a command.
const START: &[u8; 5] = b"<!--#";
/// nginx's `NGX_HTTP_SSI_COMMAND_LEN`.
pub const COMMAND_LEN: usize = 32;
/// nginx's `NGX_HTTP_SSI_PARAM_LEN`.
pub const PARAM_LEN: usize = 32;
/// nginx's `NGX_HTTP_SSI_MAX_PARAMS`.
pub const MAX_PARAMS: usize = 16;

/// One command read whole.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Command {
    pub name: Vec<u8>,
    /// `(name, value)` in the order written; a value keeps its backslashes (`\"` is `\"`).
    pub params: Vec<(Vec<u8>, Vec<u8>)>,
}

impl Command {
    /// The value of parameter `name`.
    pub fn param(&self, name: &[u8]) -> Option<&[u8]> {
        self.params
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_slice())
    }
}

/// What the reader found next.
#[derive(Debug, PartialEq, Eq)]
pub enum Event<'a> {
    /// Body text, passed on as it is.
    Text(&'a [u8]),
    /// A command, its `-->` read.
    Command(Command),
    /// A malformed command, skipped up to its `-->`: the line nginx logs (at `error`).
    Error(String),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    /// Text; `Start(n)`: the first `n` bytes of `<!--#` were seen last.
    Start(usize),
    Precommand,
    Command,
    Preparam,
    Param,
    Preequal,
    Prevalue,
    /// A quoted value; the quote that ends it.
    Value(u8),
    /// After a backslash in a value: the next byte is taken as it is.
    Quoted(u8),
    Postparam,
    CommentEnd0,
    CommentEnd1,
    Error,
    ErrorEnd0,
    ErrorEnd1,
}

/// The reader's state between pieces of a body.
#[derive(Debug)]
pub struct Parser {
    state: State,
    /// How many bytes of `<!--#` came in earlier pieces and were not handed back.
    held: usize,
    command: Command,
    value_len: usize,
    /// The line logged for the malformed command being skipped.
    error: String,
}

impl Parser {
    /// A reader whose parameter values are at most `value_len` bytes (`ssi_value_length`).
    pub fn new(value_len: usize) -> Parser {
        Parser {
            state: State::Start(0),
            held: 0,
            command: Command::default(),
            value_len,
            error: String::new(),
        }
    }

    /// Whether the reader is between commands (nothing of one seen).
    pub fn in_text(&self) -> bool {
        self.state == State::Start(0)
    }

    /// The body ended: what was held of a command (`<!-` too, as nginx) is dropped.
    pub fn finish(&mut self) {
        self.state = State::Start(0);
        self.held = 0;
    }

    /// Reads from `data`: the next event, if any, and how many bytes of `data` were used
    /// (all of them when no event came). Call again with the rest.
    pub fn next<'a>(&mut self, data: &'a [u8]) -> (Option<Event<'a>>, usize) {
        if let State::Start(seen) = self.state {
            return self.text(data, seen);
        }
        for (i, &ch) in data.iter().enumerate() {
            if let Some(ev) = self.step(ch) {
                return (Some(ev), i + 1);
            }
        }
        (None, data.len())
    }

    /// Text, and the start of a command in it.
    fn text<'a>(&mut self, data: &'a [u8], mut seen: usize) -> (Option<Event<'a>>, usize) {
        let mut i = 0;
        if seen == 0 {
            match data.iter().position(|&c| c == b'<') {
                None => return (text(data), data.len()),
                Some(0) => {}
                Some(at) => return (text(&data[..at]), at),
            }
        }
        while i < data.len() {
            if data[i] == START[seen] {
                seen += 1;
                i += 1;
                if seen == START.len() {
                    self.held = 0;
                    self.state = State::Precommand;
                    return (None, i);
                }
                continue;
            }
            // Not a command: what was seen is text. The held part goes first; what came in
            // this piece is read again (a `<` in it may start a command).
            self.state = State::Start(0);
            if self.held > 0 {
                let held = self.held;
                self.held = 0;
                return (Some(Event::Text(&START[..held])), 0);
            }
            let upto = if data[i] == b'<' { i } else { i + 1 };
            return (Some(Event::Text(&data[..upto])), upto);
        }
        // The piece ends inside `<!--#`: held for the next one.
        self.held += i;
        self.state = State::Start(seen);
        (None, data.len())
    }

    fn fail(&mut self, line: String, state: State) -> Option<Event<'static>> {
        self.error = line;
        self.state = state;
        None
    }

    fn name(&self) -> String {
        String::from_utf8_lossy(&self.command.name).into_owned()
    }

    fn step(&mut self, ch: u8) -> Option<Event<'static>> {
        let space = matches!(ch, b' ' | b'\r' | b'\n' | b'\t');
        match self.state {
            State::Start(_) => unreachable!("text is read by Parser::text"),
            State::Precommand => {
                if !space {
                    self.command = Command {
                        name: vec![ch],
                        params: Vec::new(),
                    };
                    self.state = State::Command;
                }
            }
            State::Command => match ch {
                _ if space => self.state = State::Preparam,
                b'-' => self.state = State::CommentEnd0,
                _ if self.command.name.len() == COMMAND_LEN => {
                    let line = format!(
                        "the \"{}{}...\" SSI command is too long",
                        self.name(),
                        ch as char
                    );
                    return self.fail(line, State::Error);
                }
                _ => self.command.name.push(ch),
            },
            State::Preparam => match ch {
                _ if space => {}
                b'-' => self.state = State::CommentEnd0,
                _ if self.command.params.len() == MAX_PARAMS => {
                    let line = format!("too many SSI command parameters: \"{}\"", self.name());
                    return self.fail(line, State::Error);
                }
                _ => {
                    self.command.params.push((vec![ch], Vec::new()));
                    self.state = State::Param;
                }
            },
            State::Param => {
                let Command { name, params } = &mut self.command;
                let key = &mut params.last_mut().expect("in a parameter").0;
                match ch {
                    _ if space => self.state = State::Preequal,
                    b'=' => self.state = State::Prevalue,
                    b'-' => {
                        key.push(ch);
                        let line = format!(
                            "invalid \"{}\" parameter in \"{}\" SSI command",
                            String::from_utf8_lossy(key),
                            String::from_utf8_lossy(name)
                        );
                        return self.fail(line, State::ErrorEnd0);
                    }
                    _ if key.len() == PARAM_LEN => {
                        let line = format!(
                            "too long \"{}{}...\" parameter in \"{}\" SSI command",
                            String::from_utf8_lossy(key),
                            ch as char,
                            String::from_utf8_lossy(name)
                        );
                        return self.fail(line, State::Error);
                    }
                    _ => key.push(ch),
                }
            }
            State::Preequal => match ch {
                _ if space => {}
                b'=' => self.state = State::Prevalue,
                _ => {
                    let line = format!(
                        "unexpected \"{}\" symbol after \"{}\" parameter in \"{}\" SSI command",
                        ch as char,
                        self.last_key(),
                        self.name()
                    );
                    return self.fail(line, error_state(ch));
                }
            },
            State::Prevalue => match ch {
                _ if space => {}
                b'"' | b'\'' => self.state = State::Value(ch),
                _ => {
                    let line = format!(
                        "unexpected \"{}\" symbol before value of \"{}\" parameter in \"{}\" SSI command",
                        ch as char,
                        self.last_key(),
                        self.name()
                    );
                    return self.fail(line, error_state(ch));
                }
            },
            State::Value(quote) if ch == quote => self.state = State::Postparam,
            State::Value(quote) | State::Quoted(quote) => {
                let value_len = self.value_len;
                let Command { name, params } = &mut self.command;
                let (key, value) = params.last_mut().expect("in a parameter");
                if value.len() == value_len {
                    let line = format!(
                        "too long \"{}{}...\" value of \"{}\" parameter in \"{}\" SSI command",
                        String::from_utf8_lossy(value),
                        ch as char,
                        String::from_utf8_lossy(key),
                        String::from_utf8_lossy(name)
                    );
                    return self.fail(line, State::Error);
                }
                value.push(ch);
                self.state = match self.state {
                    // A backslash is kept, and the byte after it too (a quote among them).
                    State::Value(_) if ch == b'\\' => State::Quoted(quote),
                    _ => State::Value(quote),
                };
            }
            State::Postparam => match ch {
                _ if space => self.state = State::Preparam,
                b'-' => self.state = State::CommentEnd0,
                _ => {
                    let (key, value) = self.command.params.last().expect("after a parameter");
                    let line = format!(
                        "unexpected \"{}\" symbol after \"{}\" value of \"{}\" parameter in \"{}\" SSI command",
                        ch as char,
                        String::from_utf8_lossy(value),
                        String::from_utf8_lossy(key),
                        self.name()
                    );
                    return self.fail(line, State::Error);
                }
            },
            State::CommentEnd0 | State::CommentEnd1 => match (self.state, ch) {
                (State::CommentEnd0, b'-') => self.state = State::CommentEnd1,
                (State::CommentEnd1, b'>') => {
                    self.state = State::Start(0);
                    return Some(Event::Command(std::mem::take(&mut self.command)));
                }
                _ => {
                    let line = format!(
                        "unexpected \"{}\" symbol in \"{}\" SSI command",
                        ch as char,
                        self.name()
                    );
                    return self.fail(line, State::Error);
                }
            },
            State::Error => {
                if ch == b'-' {
                    self.state = State::ErrorEnd0;
                }
            }
            State::ErrorEnd0 => {
                self.state = if ch == b'-' {
                    State::ErrorEnd1
                } else {
                    State::Error
                };
            }
            State::ErrorEnd1 => {
                if ch == b'>' {
                    self.state = State::Start(0);
                    self.command = Command::default();
                    return Some(Event::Error(std::mem::take(&mut self.error)));
                }
                self.state = State::Error;
            }
        }
        None
    }

    fn last_key(&self) -> String {
        self.command
            .params
            .last()
            .map(|(k, _)| String::from_utf8_lossy(k).into_owned())
            .unwrap_or_default()
    }
}

fn text(data: &[u8]) -> Option<Event<'_>> {
    (!data.is_empty()).then_some(Event::Text(data))
}

/// After an unexpected byte: a `-` may already start the `-->` the command is skipped to.
fn error_state(ch: u8) -> State {
    if ch == b'-' {
        State::ErrorEnd0
    } else {
        State::Error
    }
}

#[cfg(test)]
mod tests;
