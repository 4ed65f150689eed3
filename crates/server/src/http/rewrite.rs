//! nginx's rewrite module: `rewrite`, `return`, `set`, `break`, `if`, `rewrite_log`,
//! `uninitialized_variable_warn`.
//!
//! The directives of one level (server, location, or an `if` block) compile into a list of
//! [`Code`]s run in order, as nginx's rewrite module does: the server's list before the
//! location is found, the location's after. `rewrite ... last` ends the list and searches the
//! location again with the new URI (at most 10 URI changes, internal redirects included, then
//! 500), as does a rewrite without a flag once the list ends; `break` ends the list and stays;
//! `redirect`/`permanent` (or a replacement starting with `http://`, `https://`, `$scheme`)
//! answer 302/301. An `if` whose condition holds runs its own list, and in a location its
//! other directives (`root`, `add_header`, ...) configure the request from then on.
//!
//! Runs on the worker.

use std::collections::HashMap;
use std::sync::Arc;

use shoal_conf::{Directive, Error};
use shoal_pcre::{Regex, RegexBuilder};

use super::directives::Return;
use super::location::{LocationConf, Match};
use super::reply::Outcome;
use super::request::Req;
use super::LocConf;
use crate::conf::{err, flag_arg, set_once, Args, Builder, Command, Ctx, Scope};
use crate::log::Level;
use crate::variables::Captures;
use crate::variables::{Template, Vars};

mod replacement;
use replacement::{expand, unescape_redirect};

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
        /// The replacement without a trailing `?`.
        replacement: Template,
        flag: Flag,
        /// The replacement starts with `http://`, `https://` or `$scheme`: a redirect.
        external: bool,
        /// The request's arguments are kept (the replacement does not end with `?`).
        add_args: bool,
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
pub(crate) fn regex(d: &Directive, source: &str, caseless: bool) -> Result<Regex, Error> {
    let re = RegexBuilder::new(source)
        .caseless(caseless)
        .build()
        .map_err(|e| err(d, e.to_string()))?;
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
    // A last `?` drops the request's arguments (nginx strips it before compiling).
    let (repl, add_args) = match repl.strip_suffix('?') {
        Some(r) => (r, false),
        None => (repl, true),
    };
    codes(s).push(Code::Rewrite {
        regex: re,
        source,
        replacement: compile(d, repl)?,
        flag,
        external,
        add_args,
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
    // nginx lets `set` change `$args`, `$limit_rate` and `$uid_reset` and take over the
    // prefixed families (`$http_x`, `$arg_x`, ...); every other built-in variable is
    // "duplicate".
    if crate::variables::is_builtin(name) && name != "limit_rate" && name != "uid_reset" {
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
    // As nginx: a lone `(` or `)` is a word of its own (`if ($a = "")` ends in the words `""`
    // and `)`); an empty quoted word stays a word.
    let first = words.first_mut().ok_or_else(bad)?;
    if !first.starts_with('(') {
        return Err(bad());
    }
    if first.len() == 1 {
        words.remove(0);
    } else {
        first.remove(0);
    }
    let last = words.last_mut().ok_or_else(bad)?;
    if !last.ends_with(')') {
        return Err(bad());
    }
    if last.len() == 1 {
        words.pop();
    } else {
        last.pop();
    }
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
enum Flow<'c> {
    /// Every code ran; go on (the location is searched again if `State::uri_changed`).
    Done,
    /// `break`, or `rewrite ... break` (`last` at server level): stop rewriting, stay.
    Break,
    /// `rewrite ... last` in a location: search the location again.
    Last,
    /// A redirect: (status, Location).
    Redirect(u16, String),
    /// `return`.
    Return(&'c Return),
    /// The rewritten URI is empty: 500, as nginx.
    Empty,
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
    /// A rewrite without `break` changed the URI: at the end of the location's list the
    /// location is searched again, flag or not (nginx's `r->uri_changed`).
    pub uri_changed: bool,
    /// A `rewrite ... break` changed the URI: an `alias` can no longer map it, 500 (nginx's
    /// `!r->valid_location`). An internal redirect clears it.
    pub rewritten_break: bool,
    /// A rewrite to a URI makes the request internal: `internal` locations take it.
    pub internal: bool,
    /// The request's path was sent with `%` or `+`: numbered captures copied into new
    /// arguments or into a redirect are escaped (nginx's `quoted_uri`, `plus_in_uri`).
    pub quoted_uri: bool,
    /// The status an `error_page` answers with, for `$status` while it is served (nginx's
    /// `r->err_status`).
    pub err_status: Option<crate::variables::Sent>,
    /// The upstream exchange an `X-Accel-Redirect` or an intercepted answer came from: its
    /// `$upstream_*` and the headers it handed on (`$sent_http_*`) still read in the
    /// location the request went to, as nginx's request keeps them.
    pub upstream: Option<std::rc::Rc<std::cell::RefCell<super::upstream::record::Record>>>,
}

/// `f` with the request's variables as a rewrite step sees them: with the upstream exchange
/// a redirect came from (see [`State::upstream`]), and `$status` the one a `return` answers
/// with (`returned`: nginx sets it before its text is evaluated), unless an `error_page` set
/// its own.
fn with_vars<T>(
    r: &Req<'_, '_>,
    st: &State,
    lc: &LocConf,
    returned: Option<u16>,
    f: impl FnOnce(&Vars<'_>) -> T,
) -> T {
    let rec = st.upstream.as_ref().map(|u| u.borrow());
    if rec.is_none() && (returned.is_none() || st.err_status.is_some()) {
        return f(&r.vars_rw(st, lc));
    }
    let sent = crate::variables::Sent {
        status: st
            .err_status
            .as_ref()
            .map_or(returned.unwrap_or(0), |s| s.status),
        headers: rec.as_ref().map_or_else(Vec::new, |rec| {
            let lower = |(n, v): &(String, String)| (n.to_ascii_lowercase(), v.clone());
            rec.carry.iter().map(lower).collect()
        }),
        ..Default::default()
    };
    let mut vars = r.vars_rw(st, lc);
    vars.sent = Some(&sent);
    vars.upstream = rec.as_deref();
    f(&vars)
}

/// Runs `codes` (of a level whose `if_blocks` they index) for a request, and what they came
/// to: `Continue` (on to the next phase), `Again` (a location's rewrite changed the URI:
/// search the location again), or an answer (`return`, a redirect; a rewritten URI of zero
/// length is a 500). `active_if` is set to the last location-level `if` block whose condition
/// held: its configuration applies, to the answer too.
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
) -> Outcome {
    let flow = run_codes(codes, level_ifs, st, active_if, r, lc, conn, in_location);
    let lc = active_if.map_or(lc, |b| &b.loc);
    match flow {
        // A rewrite without a flag changed the URI: searched again too.
        Flow::Last | Flow::Done if in_location && st.uri_changed => {
            st.uri_changed = false;
            st.cycles += 1;
            Outcome::Again
        }
        Flow::Done | Flow::Break | Flow::Last => Outcome::Continue,
        Flow::Return(ret) => with_vars(r, st, lc, Some(ret.code), |v| do_return(ret, lc, v, r)),
        Flow::Redirect(status, url) => {
            let mut reply = crate::http::reply::error_reply(status, lc);
            if url.starts_with('/') {
                reply.redirect_to_path(lc, &url, r.host, r.info, r.srv);
            } else {
                reply.redirect_to_url(url);
            }
            Outcome::Reply(Box::new(reply))
        }
        Flow::Empty => Outcome::Error(500),
    }
}

/// `return`, as nginx's `ngx_http_script_return_code`: 301/302/303/307/308 answer nginx's
/// page with the text as `Location` (empty without one); a code of 400 or more without a text
/// (or with a literal empty one) answers nginx's page, which `error_page` may take over; any
/// other is sent as it is with the text as body (`ngx_http_send_response`: typed by the URI's
/// extension), and `error_page` does not apply.
fn do_return(
    ret: &Return,
    lc: &LocConf,
    vars: &crate::variables::Vars<'_>,
    r: &Req<'_, '_>,
) -> Outcome {
    let no_text = ret.text.as_ref().is_none_or(|t| t.pieces.is_empty());
    let text = ret.text.as_ref().map(|t| vars.eval(t)).unwrap_or_default();
    match ret.code {
        301 | 302 | 303 | 307 | 308 => {
            let mut reply = crate::http::reply::error_reply(ret.code, lc);
            reply.continue_first = true;
            if text.starts_with('/') {
                reply.redirect_to_path(lc, &text, r.host, r.info, r.srv);
            } else {
                reply.redirect_to_url(text);
            }
            Outcome::Reply(Box::new(reply))
        }
        code if code >= 400 && no_text => Outcome::Error(code),
        code => {
            let mut reply = crate::http::reply::Reply::new(code);
            let uri = vars.uri.unwrap_or_default();
            reply.content_type =
                Some(crate::http::static_files::uri_content_type(lc, uri).to_string());
            // `$binary_remote_addr`'s bytes (itself, or a variable holding it) as they are.
            let body = if text.as_bytes().contains(&0xEF) {
                let mut raw = Vec::with_capacity(text.len());
                crate::variables::raw_bytes_into(&text, &mut raw);
                raw
            } else {
                text.into_bytes()
            };
            reply.body = crate::http::reply::Body::Bytes(body);
            Outcome::Final(Box::new(reply))
        }
    }
}

#[allow(clippy::too_many_arguments)]
fn run_codes<'c>(
    codes: &'c [Code],
    level_ifs: &'c [LocationConf],
    st: &mut State,
    active_if: &mut Option<&'c LocationConf>,
    r: &Req<'_, '_>,
    lc: &LocConf,
    conn: u64,
    in_location: bool,
) -> Flow<'c> {
    let log = lc.rewrite_log();
    for code in codes {
        match code {
            Code::Rewrite {
                regex,
                source,
                replacement,
                flag,
                external,
                add_args,
            } => {
                let Some(caps) = crate::variables::capture(regex, &st.uri) else {
                    if log {
                        crate::conn_log!(
                            Level::Notice,
                            conn,
                            "\"{source}\" does not match \"{}\"",
                            st.uri
                        );
                    }
                    // nginx forgets the captures of an earlier match.
                    st.captures.clear();
                    continue;
                };
                if log {
                    crate::conn_log!(Level::Notice, conn, "\"{source}\" matches \"{}\"", st.uri);
                }
                set_captures(st, caps);
                let redirect = *external || matches!(flag, Flag::Redirect | Flag::Permanent);
                if !redirect {
                    st.internal = true;
                    if *flag == Flag::Break {
                        st.rewritten_break = true;
                        st.uri_changed = false;
                    } else {
                        st.uri_changed = true;
                    }
                }
                let quoted = st.quoted_uri;
                let (new, args_at) = with_vars(r, st, lc, None, |v| {
                    expand(replacement, v, redirect, quoted)
                });
                let old_args = st.args.as_deref().filter(|a| !a.is_empty() && *add_args);
                if redirect {
                    let status = if *flag == Flag::Permanent { 301 } else { 302 };
                    // The request's arguments follow the replacement's own (`&`) or start them
                    // (`?`), unless the replacement ends with `?`.
                    let mut location = unescape_redirect(&new);
                    if let Some(a) = old_args {
                        location.push(if args_at.is_some() { '&' } else { '?' });
                        location.push_str(a);
                    }
                    if log {
                        crate::conn_log!(Level::Notice, conn, "rewritten redirect: \"{location}\"");
                    }
                    return Flow::Redirect(status, location);
                }
                let (path, args) = match args_at {
                    Some(i) => {
                        let mut a = new[i + 1..].to_string();
                        if let Some(old) = old_args {
                            a.push('&');
                            a.push_str(old);
                        }
                        (new[..i].to_string(), (!a.is_empty()).then_some(a))
                    }
                    None if *add_args => (new, st.args.take()),
                    None => (new, None),
                };
                if log {
                    crate::conn_log!(
                        Level::Notice,
                        conn,
                        "rewritten data: \"{path}\", args: \"{}\"",
                        args.as_deref().unwrap_or("")
                    );
                }
                if path.is_empty() {
                    crate::conn_log!(
                        Level::Error,
                        conn,
                        "the rewritten URI has a zero length{}",
                        r.log_ctx()
                    );
                    return Flow::Empty;
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
                let v = with_vars(r, st, lc, None, |v| v.eval(value));
                if name == "args" {
                    // The request's arguments themselves (what `$args`, `$is_args` and the
                    // proxied URI use).
                    st.args = (!v.is_empty()).then_some(v);
                } else {
                    st.vars.insert(name.clone(), v);
                }
            }
            Code::Break => {
                st.uri_changed = false;
                return Flow::Break;
            }
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
                match run_codes(
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

/// The numbered captures become `$1`..`$9`, the named ones variables.
fn set_captures(st: &mut State, c: Captures) {
    st.captures = c.numbered;
    st.vars.extend(c.named);
}

fn holds(cond: &Cond, st: &mut State, r: &Req<'_, '_>, lc: &LocConf) -> bool {
    match cond {
        Cond::Value(t) => {
            let v = with_vars(r, st, lc, None, |v| v.eval(t));
            !(v.is_empty() || v == "0")
        }
        Cond::Eq { value, to, negate } => {
            with_vars(r, st, lc, None, |v| v.eval(value) == v.eval(to)) != *negate
        }
        Cond::Regex {
            value,
            regex,
            negate,
        } => {
            let v = with_vars(r, st, lc, None, |v| v.eval(value));
            // A match sets the captures (negated or not); no match forgets them.
            match crate::variables::capture(regex, &v) {
                Some(caps) => {
                    set_captures(st, caps);
                    !*negate
                }
                None => {
                    st.captures.clear();
                    *negate
                }
            }
        }
        Cond::File { path, test, negate } => {
            let p = with_vars(r, st, lc, None, |v| v.eval(path));
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
