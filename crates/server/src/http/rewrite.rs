//! nginx's rewrite module: `rewrite`, `return`, `set`, `break`, `if`, `rewrite_log`,
//! `uninitialized_variable_warn`.
//!
//! The directives of one level (server, location, or an `if` block) compile into a list of
//! [`Code`]s run in order, as nginx's rewrite module does: the server's list before the
//! location is found, the location's after. `rewrite ... last` ends the list and searches the
//! location again with the new URI (at most 10 times, then 500); `break` ends the list and stays;
//! `redirect`/`permanent` (or a replacement starting with `http://`, `https://`, `$scheme`)
//! answer 302/301. An `if` whose condition holds runs its own list, and in a location its
//! other directives (`root`, `add_header`, ...) configure the request from then on.
//!
//! Runs on the worker.

use std::collections::HashMap;
use std::sync::Arc;

use regex::{Regex, RegexBuilder};
use shoal_conf::{Directive, Error};

use super::directives::Return;
use super::location::{LocationConf, Match};
use super::phases::Req;
use super::LocConf;
use crate::conf::{err, flag_arg, set_once, Args, Builder, Command, Ctx, Scope};
use crate::log::Level;
use crate::variables::Template;

const REWRITE: Ctx = Ctx::SERVER.or(Ctx::LOCATION).or(Ctx::SIF).or(Ctx::LIF);

pub static DIRECTIVES: &[Command] = &[
    Command::new("rewrite", REWRITE, Args::Take(2, 3), set_rewrite),
    Command::new("return", REWRITE, Args::Take(1, 2), set_return),
    Command::new("set", REWRITE, Args::TWO, set_set),
    Command::new("break", REWRITE, Args::NONE, set_break),
    Command::block(
        "if",
        Ctx::SERVER.or(Ctx::LOCATION),
        Args::ONE_OR_MORE,
        set_if,
    ),
    Command::new(
        "rewrite_log",
        Ctx::HTTP.or(REWRITE),
        Args::Flag,
        set_rewrite_log,
    ),
    Command::new(
        "uninitialized_variable_warn",
        Ctx::HTTP.or(REWRITE),
        Args::Flag,
        set_uninitialized_variable_warn,
    ),
];

/// `rewrite`'s last argument.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Flag {
    /// No flag: go on with the next directive.
    None,
    Last,
    Break,
    Redirect,
    Permanent,
}

/// One compiled rewrite-module directive.
#[derive(Clone, Debug)]
pub enum Code {
    Rewrite {
        regex: Regex,
        source: String,
        replacement: Template,
        flag: Flag,
        /// The replacement starts with `http://`, `https://` or `$scheme`: a redirect.
        external: bool,
    },
    Return(Arc<Return>),
    Set {
        name: String,
        value: Template,
    },
    Break,
    /// An `if` block: its condition and its pseudo-location (index into the level's
    /// `if_blocks`).
    If {
        cond: Cond,
        block: usize,
    },
}

/// An `if` condition.
#[derive(Clone, Debug)]
pub enum Cond {
    /// `($var)`: true unless empty or "0".
    Value(Template),
    Eq {
        value: Template,
        to: Template,
        negate: bool,
    },
    Regex {
        value: Template,
        regex: Regex,
        negate: bool,
    },
    /// `-f`, `-d`, `-e`, `-x` (with `!`).
    File {
        path: Template,
        test: u8,
        negate: bool,
    },
}

/// The rewrite codes of a level.
fn codes<'a>(s: &'a mut Scope<'_>) -> &'a mut Vec<Code> {
    match s {
        Scope::Server(srv) => &mut srv.rewrite,
        Scope::Location(l) => &mut l.rewrite,
        _ => unreachable!("rewrite directives are allowed in server, location and if"),
    }
}

fn compile(d: &Directive, text: &str) -> Result<Template, Error> {
    Template::compile(text).map_err(|m| err(d, m))
}

/// Compiles a regex as nginx's PCRE would take it, declaring its named captures as variables.
fn regex(d: &Directive, source: &str, caseless: bool) -> Result<Regex, Error> {
    let re = RegexBuilder::new(source)
        .case_insensitive(caseless)
        .build()
        .map_err(|e| err(d, format!("regex \"{source}\" failed to compile: {e}")))?;
    for name in re.capture_names().flatten() {
        crate::variables::declare(name);
    }
    Ok(re)
}

fn set_rewrite(_: &mut Builder, d: &Directive, s: &mut Scope<'_>) -> Result<(), Error> {
    let source = d.args[0].value.clone();
    let re = regex(d, &source, false)?;
    let repl = d.args[1].value.as_str();
    let flag = match d.args.get(2).map(|a| a.value.as_str()) {
        None => Flag::None,
        Some("last") => Flag::Last,
        Some("break") => Flag::Break,
        Some("redirect") => Flag::Redirect,
        Some("permanent") => Flag::Permanent,
        Some(other) => return Err(err(d, format!("invalid parameter \"{other}\""))),
    };
    let external =
        repl.starts_with("http://") || repl.starts_with("https://") || repl.starts_with("$scheme");
    codes(s).push(Code::Rewrite {
        regex: re,
        source,
        replacement: compile(d, repl)?,
        flag,
        external,
    });
    Ok(())
}

fn set_return(_: &mut Builder, d: &Directive, s: &mut Scope<'_>) -> Result<(), Error> {
    let first = &d.args[0].value;
    let ret = match first.parse::<u16>() {
        Ok(code) if code <= 999 => Return {
            code,
            text: match d.args.get(1) {
                Some(a) => Some(compile(d, &a.value)?),
                None => None,
            },
        },
        _ => {
            let url = first.starts_with("http://")
                || first.starts_with("https://")
                || first.starts_with("$scheme");
            if d.args.len() > 1 || !url {
                return Err(err(d, format!("invalid return code \"{first}\"")));
            }
            Return {
                code: 302,
                text: Some(compile(d, first)?),
            }
        }
    };
    codes(s).push(Code::Return(Arc::new(ret)));
    Ok(())
}

fn set_set(_: &mut Builder, d: &Directive, s: &mut Scope<'_>) -> Result<(), Error> {
    let Some(name) = d.args[0].value.strip_prefix('$') else {
        return Err(err(
            d,
            format!("invalid variable name \"{}\"", d.args[0].value),
        ));
    };
    if name.is_empty() || !name.bytes().all(|c| c.is_ascii_alphanumeric() || c == b'_') {
        return Err(err(
            d,
            format!("invalid variable name \"{}\"", d.args[0].value),
        ));
    }
    if crate::variables::Var::lookup(name).is_some() {
        return Err(err(d, format!("the duplicate \"{name}\" variable")));
    }
    crate::variables::declare(name);
    let value = compile(d, &d.args[1].value)?;
    codes(s).push(Code::Set {
        name: name.to_string(),
        value,
    });
    Ok(())
}

fn set_break(_: &mut Builder, _: &Directive, s: &mut Scope<'_>) -> Result<(), Error> {
    codes(s).push(Code::Break);
    Ok(())
}

fn set_rewrite_log(_: &mut Builder, d: &Directive, s: &mut Scope<'_>) -> Result<(), Error> {
    set_once(&mut super::loc_conf(s).rewrite_log, flag_arg(d), d)
}

fn set_uninitialized_variable_warn(
    _: &mut Builder,
    d: &Directive,
    s: &mut Scope<'_>,
) -> Result<(), Error> {
    set_once(
        &mut super::loc_conf(s).uninitialized_variable_warn,
        flag_arg(d),
        d,
    )
}

/// Parses `if`'s arguments: `(` and `)` come glued to the first and last words.
fn parse_cond(d: &Directive) -> Result<Cond, Error> {
    let mut words: Vec<String> = d.args.iter().map(|a| a.value.clone()).collect();
    let bad = || {
        err(
            d,
            format!(
                "invalid condition \"{}\"",
                d.args
                    .iter()
                    .map(|a| a.value.as_str())
                    .collect::<Vec<_>>()
                    .join(" ")
            ),
        )
    };
    let first = words.first_mut().ok_or_else(bad)?;
    if !first.starts_with('(') {
        return Err(bad());
    }
    first.remove(0);
    let last = words.last_mut().ok_or_else(bad)?;
    if !last.ends_with(')') {
        return Err(bad());
    }
    last.pop();
    words.retain(|w| !w.is_empty());
    match words.as_slice() {
        [v] if v.starts_with('$') => Ok(Cond::Value(compile(d, v)?)),
        [op, path]
            if matches!(
                op.as_str(),
                "-f" | "!-f" | "-d" | "!-d" | "-e" | "!-e" | "-x" | "!-x"
            ) =>
        {
            let negate = op.starts_with('!');
            Ok(Cond::File {
                path: compile(d, path)?,
                test: op.as_bytes()[op.len() - 1],
                negate,
            })
        }
        [v, op, rhs] if v.starts_with('$') => match op.as_str() {
            "=" | "!=" => Ok(Cond::Eq {
                value: compile(d, v)?,
                to: compile(d, rhs)?,
                negate: op == "!=",
            }),
            "~" | "~*" | "!~" | "!~*" => Ok(Cond::Regex {
                value: compile(d, v)?,
                regex: regex(d, rhs, op.ends_with('*'))?,
                negate: op.starts_with('!'),
            }),
            other => Err(err(d, format!("unexpected \"{other}\" in condition"))),
        },
        _ => Err(bad()),
    }
}

fn set_if(b: &mut Builder, d: &Directive, s: &mut Scope<'_>) -> Result<(), Error> {
    let cond = parse_cond(d)?;
    let (ctx, blocks): (Ctx, &mut Vec<LocationConf>) = match s {
        Scope::Server(srv) => (Ctx::SIF, &mut srv.if_blocks),
        Scope::Location(l) => (Ctx::LIF, &mut l.if_blocks),
        _ => unreachable!("if is allowed in server and location"),
    };
    let mut block = LocationConf {
        kind: Match::If,
        name: String::from("if"),
        regex: None,
        loc: LocConf::default(),
        nested: Vec::new(),
        internal: false,
        rewrite: Vec::new(),
        if_blocks: Vec::new(),
    };
    let body = d.block.as_deref().unwrap_or_default();
    b.walk(body, ctx, &mut Scope::Location(&mut block))?;
    blocks.push(block);
    let index = blocks.len() - 1;
    codes(s).push(Code::If { cond, block: index });
    Ok(())
}

/// What running a list of codes came to.
pub enum Flow<'c> {
    /// Every code ran; go on.
    Done,
    /// `break`: stop rewriting, stay in this location.
    Break,
    /// `rewrite ... last`: search the location again.
    Last,
    /// A redirect: (status, Location).
    Redirect(u16, String),
    /// `return`.
    Return(&'c Return),
}

/// One request's rewrite state.
#[derive(Default)]
pub struct State {
    pub uri: String,
    /// The query string (`$args`), changed by a replacement with `?`.
    pub args: Option<String>,
    pub vars: HashMap<String, String>,
    pub captures: Vec<Option<String>>,
    /// URI changes by `last` so far.
    pub cycles: u32,
}

/// Runs `codes` (of a level whose `if_blocks` they index) for a request. `active_if` is set
/// to the last location-level `if` block whose condition held: its configuration applies.
#[allow(clippy::too_many_arguments)]
pub fn run<'c>(
    codes: &'c [Code],
    level_ifs: &'c [LocationConf],
    st: &mut State,
    active_if: &mut Option<&'c LocationConf>,
    r: &Req<'_, '_>,
    lc: &LocConf,
    conn: u64,
    in_location: bool,
) -> Flow<'c> {
    let log = lc.rewrite_log.unwrap_or(false);
    for code in codes {
        match code {
            Code::Rewrite {
                regex,
                source,
                replacement,
                flag,
                external,
            } => {
                let Some(caps) = regex.captures(&st.uri) else {
                    if log {
                        crate::conn_log!(
                            Level::Notice,
                            conn,
                            "\"{source}\" does not match \"{}\"",
                            st.uri
                        );
                    }
                    continue;
                };
                if log {
                    crate::conn_log!(Level::Notice, conn, "\"{source}\" matches \"{}\"", st.uri);
                }
                st.captures = caps
                    .iter()
                    .map(|m| m.map(|m| m.as_str().to_string()))
                    .collect();
                for name in regex.capture_names().flatten() {
                    if let Some(m) = caps.name(name) {
                        st.vars.insert(name.to_string(), m.as_str().to_string());
                    }
                }
                let new = r.vars_rw(st, lc).eval(replacement);
                if *external || matches!(flag, Flag::Redirect | Flag::Permanent) {
                    let status = if *flag == Flag::Permanent { 301 } else { 302 };
                    // The request's arguments follow the replacement's own (`&`) or start them
                    // (`?`), unless the replacement ends with `?`.
                    let mut location = new;
                    if location.ends_with('?') {
                        location.pop();
                    } else if let Some(a) = &st.args {
                        location.push(if location.contains('?') { '&' } else { '?' });
                        location.push_str(a);
                    }
                    return Flow::Redirect(status, location);
                }
                let (path, args) = match new.split_once('?') {
                    Some((p, "")) => (p.to_string(), None),
                    Some((p, a)) => {
                        let mut a = a.to_string();
                        if let Some(old) = &st.args {
                            a.push('&');
                            a.push_str(old);
                        }
                        (p.to_string(), Some(a))
                    }
                    None => (new, st.args.take()),
                };
                if log {
                    crate::conn_log!(
                        Level::Notice,
                        conn,
                        "rewritten data: \"{path}\", args: \"{}\"",
                        args.as_deref().unwrap_or("")
                    );
                }
                st.uri = path;
                st.args = args;
                match flag {
                    Flag::Last if in_location => return Flow::Last,
                    Flag::Last | Flag::Break => return Flow::Break,
                    _ => {}
                }
            }
            Code::Return(r) => return Flow::Return(r),
            Code::Set { name, value } => {
                let v = r.vars_rw(st, lc).eval(value);
                st.vars.insert(name.clone(), v);
            }
            Code::Break => return Flow::Break,
            Code::If { cond, block } => {
                let Some(ifb) = level_ifs.get(*block) else {
                    continue;
                };
                if !holds(cond, st, r, lc) {
                    continue;
                }
                if in_location {
                    *active_if = Some(ifb);
                }
                match run(
                    &ifb.rewrite,
                    &ifb.if_blocks,
                    st,
                    active_if,
                    r,
                    &ifb.loc,
                    conn,
                    in_location,
                ) {
                    Flow::Done => {}
                    other => return other,
                }
            }
        }
    }
    Flow::Done
}

fn holds(cond: &Cond, st: &mut State, r: &Req<'_, '_>, lc: &LocConf) -> bool {
    match cond {
        Cond::Value(t) => {
            let v = r.vars_rw(st, lc).eval(t);
            !(v.is_empty() || v == "0")
        }
        Cond::Eq { value, to, negate } => {
            let vars = r.vars_rw(st, lc);
            (vars.eval(value) == vars.eval(to)) != *negate
        }
        Cond::Regex {
            value,
            regex,
            negate,
        } => {
            let v = r.vars_rw(st, lc).eval(value);
            match regex.captures(&v) {
                Some(caps) => {
                    if !*negate {
                        st.captures = caps
                            .iter()
                            .map(|m| m.map(|m| m.as_str().to_string()))
                            .collect();
                        for name in regex.capture_names().flatten() {
                            if let Some(m) = caps.name(name) {
                                st.vars.insert(name.to_string(), m.as_str().to_string());
                            }
                        }
                    }
                    !*negate
                }
                None => *negate,
            }
        }
        Cond::File { path, test, negate } => {
            let p = r.vars_rw(st, lc).eval(path);
            let m = std::fs::metadata(&p);
            let ok = match test {
                b'f' => m.is_ok_and(|m| m.is_file()),
                b'd' => m.is_ok_and(|m| m.is_dir()),
                b'e' => m.is_ok(),
                b'x' => {
                    use std::os::unix::fs::PermissionsExt;
                    m.is_ok_and(|m| m.permissions().mode() & 0o111 != 0)
                }
                _ => false,
            };
            ok != *negate
        }
    }
}
