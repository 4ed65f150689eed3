//! The SSI body filter (nginx's `ngx_http_ssi_body_filter` and its commands): `include`,
//! `echo`, `set`, `if`/`elif`/`else`/`endif`, `config`, `block`/`endblock`.
//!
//! A piece of body is kept when fed and read when the writer asks for more
//! ([`BodyFilter::step`]): text goes on as it comes, a command's output in its place; an
//! `include` stops the reading until the writer has run its subrequest and sent its body
//! (`http/subrequest_body.rs`). So what the filter holds is one piece, the command being
//! read, and the blocks defined (`block`), however long the body.

use std::io;

use shoal_http::ssi::{Command, Event, Parser};

use super::expr::{self, Encoding, Right};
use crate::http::output::{BodyFilter, Step};
use crate::http::subrequest_body::{Answer, Ask, Requester, Target};
use crate::log::Level;

/// nginx's default `errmsg`.
const ERRMSG: &[u8] = b"[an error occurred while processing the directive]";
/// nginx's default `timefmt`.
pub(super) const TIMEFMT: &[u8] = b"%A, %d-%b-%Y %H:%M:%S %Z";

/// Where `if` stands (nginx's `ctx->conditional`).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Cond {
    None,
    If,
    Else,
}

/// What to do with the answer of the subrequest asked for.
enum Waiting {
    /// Its body went out; the named block goes instead when it gave nothing or failed.
    Include { stub: Option<Vec<u8>> },
    /// Its body is the value of an ssi variable.
    Set { var: Vec<u8> },
}

/// One answer's SSI state.
pub struct SsiFilter {
    parser: Parser,
    /// The piece being read, and how far.
    input: Vec<u8>,
    pos: usize,
    out: Vec<u8>,
    ask: Option<Ask>,
    waiting: Option<Waiting>,
    silent_errors: bool,
    /// The request's URI (relative includes start from its directory).
    uri: String,
    errmsg: Vec<u8>,
    timefmt: Vec<u8>,
    encoding: Encoding,
    /// Text and commands go out (nginx's `ctx->output`).
    output: bool,
    conditional: Cond,
    /// A branch of the `if` was taken.
    chosen: bool,
    /// The block being defined: its name and text.
    block: Option<(Vec<u8>, Vec<u8>)>,
    blocks: Vec<(Vec<u8>, Vec<u8>)>,
    /// The last regex `if`'s captures: numbered, and named.
    captures: Vec<Option<Vec<u8>>>,
    named: Vec<(Vec<u8>, Vec<u8>)>,
    /// An `include ... set=` answered: the variable and its value, stored at the next step.
    set_value: Option<(Vec<u8>, Vec<u8>)>,
    /// A stub to give as it is at the next step.
    raw: Vec<u8>,
}

impl SsiFilter {
    pub fn new(value_len: usize, silent_errors: bool, uri: &str) -> SsiFilter {
        SsiFilter {
            parser: Parser::new(value_len),
            input: Vec::new(),
            pos: 0,
            out: Vec::new(),
            ask: None,
            waiting: None,
            silent_errors,
            uri: uri.to_string(),
            errmsg: ERRMSG.to_vec(),
            timefmt: TIMEFMT.to_vec(),
            encoding: Encoding::Entity,
            output: true,
            conditional: Cond::None,
            chosen: false,
            block: None,
            blocks: Vec::new(),
            captures: Vec::new(),
            named: Vec::new(),
            set_value: None,
            raw: Vec::new(),
        }
    }

    /// A command failed: its line logged, `errmsg` in its place (unless silent).
    fn error(&mut self, r: Option<&dyn Requester>, line: &str) {
        if let Some(r) = r {
            r.log(Level::Error, line);
        }
        if !self.silent_errors {
            self.out.extend_from_slice(&self.errmsg);
        }
    }

    /// A variable as the commands see it: a capture, an ssi variable, a named capture,
    /// `$date_*`, then the request's.
    fn variable(&self, r: Option<&dyn Requester>, name: &[u8]) -> Option<Vec<u8>> {
        if name.len() == 1 && name[0].is_ascii_digit() {
            let n = (name[0] - b'0') as usize;
            return self.captures.get(n).cloned().flatten().or(Some(Vec::new()));
        }
        if let Some(r) = r {
            if let Some(v) = r.ssi_vars().borrow().get(name) {
                return Some(v.clone());
            }
        }
        if let Some((_, v)) = self.named.iter().find(|(n, _)| n == name) {
            return Some(v.clone());
        }
        match name {
            b"date_local" => return expr::date(&self.timefmt, false),
            b"date_gmt" => return expr::date(&self.timefmt, true),
            _ => {}
        }
        r?.variable(std::str::from_utf8(name).ok()?)
    }

    fn evaluate(
        &self,
        r: Option<&dyn Requester>,
        text: &[u8],
        regex: bool,
    ) -> Result<Vec<u8>, String> {
        expr::evaluate(text, regex, &mut |n| self.variable(r, n))
    }

    /// One command read whole.
    fn command(&mut self, r: Option<&dyn Requester>, c: Command) {
        let Some(spec) = SPECS.iter().find(|s| s.name.as_bytes() == c.name) else {
            if self.output {
                let line = format!(
                    "invalid SSI command: \"{}\"",
                    String::from_utf8_lossy(&c.name)
                );
                self.error(r, &line);
            }
            return;
        };
        if !self.output && !spec.block {
            if let Some((_, text)) = &mut self.block {
                // Inside a block, a command is kept as text, written again.
                text.extend_from_slice(b"<!--#");
                text.extend_from_slice(&c.name);
                for (k, v) in &c.params {
                    text.push(b' ');
                    text.extend_from_slice(k);
                    text.extend_from_slice(b"=\"");
                    text.extend_from_slice(v);
                    text.push(b'"');
                }
                text.extend_from_slice(b" -->");
                return;
            }
            if !spec.conditional {
                return;
            }
        }
        for (i, (k, _)) in c.params.iter().enumerate() {
            let known = spec.params.iter().any(|(p, _)| p.as_bytes() == k);
            if !known {
                let line = format!(
                    "invalid parameter name: \"{}\" of the SSI command \"{}\"",
                    String::from_utf8_lossy(k),
                    spec.name
                );
                return self.error(r, &line);
            }
            if c.params[..i].iter().any(|(p, _)| p == k) {
                let line = format!(
                    "duplicate \"{}\" parameter in \"{}\" SSI command",
                    String::from_utf8_lossy(k),
                    spec.name
                );
                return self.error(r, &line);
            }
        }
        for (p, mandatory) in spec.params {
            if *mandatory && c.param(p.as_bytes()).is_none() {
                let line = format!(
                    "mandatory \"{p}\" parameter is absent in \"{}\" SSI command",
                    spec.name
                );
                return self.error(r, &line);
            }
        }
        let context = match spec.name {
            "elif" => self.conditional == Cond::If,
            "else" | "endif" => self.conditional != Cond::None,
            _ => true,
        };
        if !context {
            let line = format!("invalid context of SSI command: \"{}\"", spec.name);
            return self.error(r, &line);
        }
        let done = match spec.name {
            "include" => self.include(r, &c),
            "echo" => self.echo(r, &c),
            "set" => self.set(r, &c),
            "config" => {
                if let Some(v) = c.param(b"timefmt") {
                    self.timefmt = v.to_vec();
                }
                if let Some(v) = c.param(b"errmsg") {
                    self.errmsg = v.to_vec();
                }
                Ok(())
            }
            "if" | "elif" => self.if_(r, &c),
            "else" => {
                self.output = !self.chosen;
                self.conditional = Cond::Else;
                Ok(())
            }
            "endif" => {
                self.output = true;
                self.conditional = Cond::None;
                Ok(())
            }
            "block" => {
                let name = c.param(b"name").unwrap_or_default().to_vec();
                self.block = Some((name, Vec::new()));
                self.output = false;
                Ok(())
            }
            _ => {
                // endblock
                if let Some((name, text)) = self.block.take() {
                    self.blocks.retain(|(n, _)| *n != name);
                    self.blocks.push((name, text));
                }
                self.output = true;
                Ok(())
            }
        };
        if let Err(line) = done {
            self.error(r, &line);
        }
    }

    fn include(&mut self, r: Option<&dyn Requester>, c: &Command) -> Result<(), String> {
        let file = c.param(b"file");
        let virtual_ = c.param(b"virtual");
        let stub = c.param(b"stub");
        let set = c.param(b"set");
        let uri = match (file, virtual_) {
            (Some(_), Some(_)) => {
                return Err("\"include\" may be either \"virtual=\" or \"file=\"".into())
            }
            (None, None) => return Err("no parameter in \"include\" SSI command".into()),
            (Some(u), None) | (None, Some(u)) => u,
        };
        if set.is_some() && stub.is_some() {
            return Err(
                "\"set\" and \"stub\" may not be used together in \"include\" SSI command".into(),
            );
        }
        if let Some(w) = c.param(b"wait") {
            if w != b"yes" && w != b"no" {
                return Err(format!(
                    "invalid value \"{}\" in the \"wait\" parameter",
                    String::from_utf8_lossy(w)
                ));
            }
        }
        let mut uri = self.evaluate(r, uri, false)?;
        if uri.first() != Some(&b'/') {
            // Relative to the request's directory.
            let dir = match self.uri.rfind('/') {
                Some(i) => &self.uri.as_bytes()[..=i],
                None => b"/",
            };
            uri.splice(0..0, dir.iter().copied());
        }
        if let Some(stub) = stub {
            if !self.blocks.iter().any(|(n, _)| n == stub) {
                return Err(format!(
                    "\"include\" could not find \"{}\" block",
                    String::from_utf8_lossy(stub)
                ));
            }
        }
        let (path, args) = match uri.iter().position(|&b| b == b'?') {
            Some(q) => (&uri[..q], Some(&uri[q + 1..])),
            None => (&uri[..], None),
        };
        let path = String::from_utf8_lossy(path).into_owned();
        if unsafe_uri(&path) {
            return Err(format!("unsafe URI \"{path}\" was detected"));
        }
        let stub_text = stub.and_then(|s| self.blocks.iter().find(|(n, _)| n == s));
        self.ask = Some(Ask {
            target: Target::Uri {
                uri: path,
                args: args.map(|a| String::from_utf8_lossy(a).into_owned()),
            },
            in_memory: set.is_some(),
            stub: stub_text.map(|(_, t)| t.clone()),
        });
        self.waiting = Some(match set {
            Some(var) => Waiting::Set { var: var.to_vec() },
            None => Waiting::Include {
                stub: stub.map(<[u8]>::to_vec),
            },
        });
        Ok(())
    }

    fn echo(&mut self, r: Option<&dyn Requester>, c: &Command) -> Result<(), String> {
        if let Some(e) = c.param(b"encoding") {
            match Encoding::parse(e) {
                Some(enc) => self.encoding = enc,
                // nginx logs it and echoes with the encoding it had.
                None => {
                    if let Some(r) = r {
                        let line = format!(
                            "unknown encoding \"{}\" in the \"echo\" command",
                            String::from_utf8_lossy(e)
                        );
                        r.log(Level::Error, &line);
                    }
                }
            }
        }
        let var = c.param(b"var").unwrap_or_default();
        let value = match self.variable(r, var) {
            Some(v) => v,
            None => match c.param(b"default") {
                Some(d) => self.evaluate(r, d, false)?,
                None => b"(none)".to_vec(),
            },
        };
        self.encoding.write(&value, &mut self.out);
        Ok(())
    }

    fn set(&mut self, r: Option<&dyn Requester>, c: &Command) -> Result<(), String> {
        let var = c.param(b"var").unwrap_or_default().to_vec();
        let value = self.evaluate(r, c.param(b"value").unwrap_or_default(), false)?;
        if let Some(r) = r {
            r.ssi_vars().borrow_mut().insert(var, value);
        }
        Ok(())
    }

    fn if_(&mut self, r: Option<&dyn Requester>, c: &Command) -> Result<(), String> {
        if c.name == b"if" && self.conditional != Cond::None {
            return Err("the \"if\" command inside the \"if\" command".into());
        }
        if self.chosen && c.name == b"elif" {
            self.output = false;
            return Ok(());
        }
        let text = c.param(b"expr").unwrap_or_default();
        let invalid = || {
            format!(
                "invalid expression in \"{}\"",
                String::from_utf8_lossy(text)
            )
        };
        let e = expr::split(text).ok_or_else(invalid)?;
        let left = self.evaluate(r, e.left, false)?;
        let yes = match e.right {
            None => !left.is_empty(),
            Some((negative, Right::Text(t))) => (self.evaluate(r, t, false)? == left) != negative,
            Some((negative, Right::Regex(p))) => {
                let pattern = self.evaluate(r, p, true)?;
                let pattern = String::from_utf8_lossy(&pattern);
                let regex = shoal_pcre::Regex::new(&pattern)
                    .map_err(|e| format!("{e} in \"{pattern}\""))?;
                let subject = String::from_utf8_lossy(&left);
                let caps = crate::variables::capture(&regex, &subject);
                let matched = caps.is_some();
                if let Some(caps) = caps {
                    self.captures = caps
                        .numbered
                        .into_iter()
                        .map(|c| c.map(String::into_bytes))
                        .collect();
                    for (n, v) in caps.named {
                        self.named.retain(|(k, _)| k != n.as_bytes());
                        self.named.push((n.into_bytes(), v.into_bytes()));
                    }
                }
                matched != negative
            }
        };
        self.conditional = Cond::If;
        self.output = yes;
        self.chosen = yes;
        Ok(())
    }

    /// Reads what is kept until it is read or a command asks for a subrequest.
    fn run(&mut self, r: Option<&dyn Requester>) {
        while self.pos < self.input.len() && self.ask.is_none() {
            let (ev, n) = self.parser.next(&self.input[self.pos..]);
            let text = match &ev {
                Some(Event::Text(t)) => Some(*t),
                _ => None,
            };
            if let Some(t) = text {
                if let Some((_, block)) = &mut self.block {
                    block.extend_from_slice(t);
                } else if self.output {
                    self.out.extend_from_slice(t);
                }
            }
            let ev = match ev {
                Some(Event::Command(c)) => Some(Ok(c)),
                Some(Event::Error(line)) => Some(Err(line)),
                _ => None,
            };
            self.pos += n;
            match ev {
                Some(Ok(c)) => self.command(r, c),
                Some(Err(line)) => self.error(r, &line),
                None => {}
            }
        }
    }
}

/// An include's URI that leaves the root (nginx's `ngx_http_parse_unsafe_uri`).
fn unsafe_uri(path: &str) -> bool {
    path.split('/').any(|seg| seg == "..") || path.contains('\0')
}

impl BodyFilter for SsiFilter {
    fn feed(&mut self, data: &[u8]) -> io::Result<&[u8]> {
        if self.pos == self.input.len() {
            self.input.clear();
            self.pos = 0;
        }
        self.input.extend_from_slice(data);
        Ok(&[])
    }

    fn finish(&mut self) -> io::Result<&[u8]> {
        self.parser.finish();
        Ok(&[])
    }

    fn pending(&self) -> bool {
        self.pos < self.input.len() || self.ask.is_some() || !self.raw.is_empty()
    }

    fn more(&mut self) -> io::Result<&[u8]> {
        self.out.clear();
        self.run(None);
        Ok(&self.out)
    }

    fn for_request(&self) -> bool {
        true
    }

    fn step(&mut self, r: Option<&dyn Requester>) -> io::Result<Step<'_>> {
        self.out.clear();
        if let (Some((var, value)), Some(r)) = (self.set_value.take(), r) {
            r.ssi_vars().borrow_mut().insert(var, value);
        }
        std::mem::swap(&mut self.out, &mut self.raw);
        if self.ask.is_none() {
            self.run(r);
            if !self.out.is_empty() || self.ask.is_none() {
                return Ok(Step::Data(&self.out));
            }
        }
        let ask = self.ask.take().expect("asked");
        Ok(Step::Subrequest(ask))
    }

    fn answered(&mut self, a: Answer) {
        if a.refused {
            // (Logged by whoever refused it.)
            self.waiting = None;
            if !self.silent_errors {
                self.raw = self.errmsg.clone();
            }
            return;
        }
        match self.waiting.take() {
            // (A page of the server's making was replaced by the block already, through the
            // subrequest's filters.) An empty body: the block goes as it is, as nginx's
            // does once the subrequest's own filters are done.
            Some(Waiting::Include { stub: Some(name) }) if !a.special && a.sent == 0 => {
                if let Some((_, text)) = self.blocks.iter().find(|(n, _)| *n == name) {
                    self.raw = text.clone();
                }
            }
            Some(Waiting::Set { var }) => {
                if let Some(body) = a.body {
                    self.set_value = Some((var, body));
                }
            }
            _ => {}
        }
    }
}

/// A command's name, where it may run, and its parameters (name, mandatory).
struct Spec {
    name: &'static str,
    /// Runs in a branch not taken (`if` and its kin).
    conditional: bool,
    /// Runs while a block is defined (`block`, `endblock`).
    block: bool,
    params: &'static [(&'static str, bool)],
}

const SPECS: &[Spec] = &[
    Spec {
        name: "include",
        conditional: false,
        block: false,
        params: &[
            ("virtual", false),
            ("file", false),
            ("stub", false),
            ("wait", false),
            ("set", false),
        ],
    },
    Spec {
        name: "echo",
        conditional: false,
        block: false,
        params: &[("var", true), ("default", false), ("encoding", false)],
    },
    Spec {
        name: "config",
        conditional: false,
        block: false,
        params: &[("errmsg", false), ("timefmt", false)],
    },
    Spec {
        name: "set",
        conditional: false,
        block: false,
        params: &[("var", true), ("value", true)],
    },
    Spec {
        name: "if",
        conditional: true,
        block: false,
        params: &[("expr", true)],
    },
    Spec {
        name: "elif",
        conditional: true,
        block: false,
        params: &[("expr", true)],
    },
    Spec {
        name: "else",
        conditional: true,
        block: false,
        params: &[],
    },
    Spec {
        name: "endif",
        conditional: true,
        block: false,
        params: &[],
    },
    Spec {
        name: "block",
        conditional: false,
        block: true,
        params: &[("name", true)],
    },
    Spec {
        name: "endblock",
        conditional: false,
        block: true,
        params: &[],
    },
];

#[cfg(test)]
mod tests {
    use super::*;

    /// `body` through a filter with no request (no variables but its own), fed in pieces of
    /// `size`, the writer's way: each piece's output drained before the next.
    fn run(body: &[u8], size: usize, value_len: usize) -> Vec<u8> {
        let mut f = SsiFilter::new(value_len, false, "/d/page.html");
        let mut out = Vec::new();
        for piece in body.chunks(size.max(1)) {
            out.extend_from_slice(f.feed(piece).unwrap());
            while f.pending() {
                match f.step(None).unwrap() {
                    Step::Data(d) => out.extend_from_slice(d),
                    Step::Subrequest(ask) => {
                        let Target::Uri { uri, args } = ask.target else {
                            panic!("ssi includes a URI: {ask:?}");
                        };
                        out.extend_from_slice(format!("[{uri} {args:?}]").as_bytes());
                        f.answered(Answer::default());
                    }
                }
            }
        }
        out.extend_from_slice(f.finish().unwrap());
        out
    }

    fn all_ways(body: &str) -> String {
        let whole = run(body.as_bytes(), body.len(), 256);
        for size in 1..body.len() {
            assert_eq!(run(body.as_bytes(), size, 256), whole, "pieces of {size}");
        }
        String::from_utf8(whole).unwrap()
    }

    const E: &str = "[an error occurred while processing the directive]";

    #[test]
    fn commands_split_anywhere_give_the_same_body() {
        let body = "a<!--#echo var=\"x\" default=\"<$1>\" -->b\
                    <!--#if expr=\"abc123 = /b(c)([0-9]+)/\" -->Y<!--#echo var=\"2\" -->\
                    <!--#else -->N<!--#endif -->c<!--#include file=\"f.html?q=1\" -->d\
                    <!--#config errmsg=\"E\" --><!--#nope -->e<!--";
        assert_eq!(
            all_ways(body),
            "a&lt;&gt;bY123c[/d/f.html Some(\"q=1\")]dEe"
        );
    }

    #[test]
    fn malformed_and_misplaced_commands_are_nginx_s_errors() {
        let body = "<!--#echo var=x -->|<!--#echo -->|<!--#echo var=\"a\" var=\"b\" -->|\
                    <!--#else -->|<!--#if expr=\"1\" --><!--#if expr=\"1\" --><!--#endif -->|\
                    <!--#include -->|<!--#include virtual=\"/a\" file=\"/b\" -->|\
                    <!--#include virtual=\"../x\" -->|<!--#include virtual=\"/a\" stub=\"no\" -->|\
                    <!--#if expr=\"a ~ b\" -->";
        let e = E;
        assert_eq!(
            all_ways(body),
            format!("{e}|{e}|{e}|{e}|{e}|{e}|{e}|{e}|{e}|{e}")
        );
    }

    #[test]
    fn values_too_long_are_errors() {
        // (The error message is the one just set.)
        let body = b"1<!--#config errmsg=\"12345\" -->2<!--#config errmsg=\"123456\" -->3";
        assert_eq!(run(body, body.len(), 5), b"12123453");
        assert_eq!(run(body, body.len(), 6), b"123");
    }

    #[test]
    fn blocks_keep_their_commands_as_text() {
        let body = "<!--#block name=\"b\" -->S<!--#echo var=\"uri\" encoding=\"none\"-->\
                    <!--#endblock -->x<!--#include virtual=\"/v\" stub=\"b\" -->y";
        // An empty answer: the block goes as it is.
        assert_eq!(
            all_ways(body),
            "x[/v None]S<!--#echo var=\"uri\" encoding=\"none\" -->y"
        );
    }
}
