//! nginx's sub module (`ngx_http_sub_module`): `sub_filter`, `sub_filter_once`,
//! `sub_filter_types` and `sub_filter_last_modified`.
//!
//! Its header filter runs after the headers filter and before charset and gzip (nginx's
//! order: the body is rewritten before it is recoded and compressed). It takes an answer of
//! any status whose type is listed (`text/html` always; `*` any) and whose length is not 0,
//! and adds a [`matcher::SubFilter`] to its body filters: the `Content-Length` goes (chunked
//! to HTTP/1.1), no ranges, and the `Last-Modified` and `ETag` go too unless
//! `sub_filter_last_modified on`, which keeps the first and makes the second weak. As in
//! nginx, `Content-Encoding` is not looked at: a compressed body is searched as it is.
//!
//! The `sub_filter` lines of a level are inherited whole, and only by a level that has none.
//! Strings are lowercased when read (matching ignores ASCII case); one with variables is
//! valued per request, lowercased, and left out when empty (with all of them empty the
//! filter does not apply). Replacements with variables are valued with the head.

pub mod matcher;

use std::sync::Arc;

use shoal_conf::{Directive, Error};

use super::loc_conf;
use super::mime_types::{types_slot, Types};
use super::modules::{Cx, HttpModule};
use super::reply::{Body, Reply};
use crate::conf::{err, flag_arg, merge, set_once, Args, Builder, Command, Ctx, Scope};
use crate::variables::{Piece, Template};
use matcher::{SubFilter, Tables};

pub static DIRECTIVES: &[Command] = &[
    Command::new("sub_filter", Ctx::HSL, Args::TWO, set_sub_filter),
    Command::new(
        "sub_filter_types",
        Ctx::HSL,
        Args::ONE_OR_MORE,
        set_sub_filter_types,
    ),
    Command::new("sub_filter_once", Ctx::HSL, Args::Flag, set_sub_filter_once),
    Command::new(
        "sub_filter_last_modified",
        Ctx::HSL,
        Args::Flag,
        set_sub_filter_last_modified,
    ),
];

/// nginx keeps a level's strings' indexes in a byte.
const MAX_LINES: usize = 255;

/// One `sub_filter STRING REPLACEMENT` line.
#[derive(Clone, Debug)]
struct Line {
    /// Lowercase (its variables' values are lowercased when valued).
    string: Template,
    replacement: Template,
}

/// A level's `sub_filter` lines.
#[derive(Clone, Debug, Default)]
pub struct Lines {
    lines: Vec<Line>,
    /// When no string has variables: the tables, made once for every request.
    tables: Option<Arc<Tables>>,
    /// When no replacement has variables: their bytes, by line.
    values: Option<Arc<Vec<Vec<u8>>>>,
}

/// The module's settings at one level.
#[derive(Clone, Debug, Default)]
pub struct SubLoc {
    pub lines: Option<Arc<Lines>>,
    pub once: Option<bool>,
    pub last_modified: Option<bool>,
    pub types: Option<Types>,
}

fn sub<'a>(s: &'a mut Scope<'_>) -> &'a mut SubLoc {
    &mut loc_conf(s).sub
}

/// A template's text when it has no variables.
fn text_of(t: &Template) -> Option<String> {
    t.pieces
        .iter()
        .map(|p| match p {
            Piece::Text(s) => Some(s.as_str()),
            Piece::Var(_) => None,
        })
        .collect()
}

fn set_sub_filter(_: &mut Builder, d: &Directive, s: &mut Scope<'_>) -> Result<(), Error> {
    if d.args[0].value.is_empty() {
        return Err(err(d, "empty search pattern"));
    }
    let lines = sub(s).lines.get_or_insert_with(Default::default);
    if lines.lines.len() == MAX_LINES {
        return Err(err(d, "number of search patterns exceeds 255"));
    }
    // nginx lowercases the argument before reading its variables (their names ignore case).
    let string = Template::compile(&d.args[0].value.to_ascii_lowercase()).map_err(|m| err(d, m))?;
    let replacement = Template::compile(&d.args[1].value).map_err(|m| err(d, m))?;
    let lines = Arc::make_mut(lines);
    lines.lines.push(Line {
        string,
        replacement,
    });
    let strings: Option<Vec<(Vec<u8>, usize)>> = lines
        .lines
        .iter()
        .enumerate()
        .map(|(i, l)| text_of(&l.string).map(|t| (t.into_bytes(), i)))
        .collect();
    lines.tables = strings.map(|s| Arc::new(Tables::new(s)));
    let values: Option<Vec<Vec<u8>>> = lines
        .lines
        .iter()
        .map(|l| text_of(&l.replacement).map(String::into_bytes))
        .collect();
    lines.values = values.map(Arc::new);
    Ok(())
}

fn set_sub_filter_types(b: &mut Builder, d: &Directive, s: &mut Scope<'_>) -> Result<(), Error> {
    types_slot(b, d, &mut sub(s).types)
}

fn set_sub_filter_once(_: &mut Builder, d: &Directive, s: &mut Scope<'_>) -> Result<(), Error> {
    set_once(&mut sub(s).once, flag_arg(d), d)
}

fn set_sub_filter_last_modified(
    _: &mut Builder,
    d: &Directive,
    s: &mut Scope<'_>,
) -> Result<(), Error> {
    set_once(&mut sub(s).last_modified, flag_arg(d), d)
}

/// The sub module's place in the module list: its header filter.
pub struct Module;

impl HttpModule for Module {
    type Loc = SubLoc;
    const DIRECTIVES: &'static [Command] = DIRECTIVES;

    fn merge(loc: &mut SubLoc, parent: &SubLoc) {
        merge(&mut loc.lines, &parent.lines);
        merge(&mut loc.once, &parent.once);
        merge(&mut loc.last_modified, &parent.last_modified);
        merge(&mut loc.types, &parent.types);
    }

    fn header_filter(loc: &SubLoc, cx: &Cx<'_, '_, '_>, reply: &mut Box<Reply>) {
        filter(loc, cx, reply);
    }
}

/// nginx's sub header filter (`ngx_http_sub_header_filter`).
pub fn filter(loc: &SubLoc, cx: &Cx<'_, '_, '_>, reply: &mut Reply) {
    let Some(lines) = &loc.lines else {
        return;
    };
    if lines.tables.is_some() && lines.values.is_some() {
        // No variables to value.
        return run(loc, reply, &|_| Vec::new());
    }
    let rec = cx.upstream.map(|u| u.borrow());
    let mut vars = cx.r.vars_rw(cx.rw, cx.lc);
    vars.upstream = rec.as_deref();
    run(loc, reply, &|t| vars.eval_bytes(t));
}

/// The filter for an answer to a request that could not be read (a 400, a 414): the
/// server's lines, variables empty (nginx's filter runs for those pages too).
pub fn refused(loc: &SubLoc, reply: &mut Reply) {
    let text = |t: &Template| {
        let mut out = Vec::new();
        for p in &t.pieces {
            if let Piece::Text(s) = p {
                out.extend_from_slice(s.as_bytes());
            }
        }
        out
    };
    run(loc, reply, &text);
}

/// The filter: `eval` values the variables.
fn run(loc: &SubLoc, reply: &mut Reply, eval: &dyn Fn(&Template) -> Vec<u8>) {
    let Some(lines) = &loc.lines else {
        return;
    };
    // (A tunnel's bytes and a gRPC call's frames are relayed as they are, as nginx's body
    // filters never see them.)
    if reply.body.length() == Some(0)
        || reply.terminate
        || matches!(reply.body, Body::Tunnel(_) | Body::Grpc(_))
    {
        return;
    }
    let listed = Types::matches_answer(
        loc.types.as_ref(),
        &["text/html"],
        super::charset::tested_type(reply),
    );
    if !listed {
        return;
    }
    let tables = match &lines.tables {
        Some(t) => t.clone(),
        None => {
            let strings: Vec<(Vec<u8>, usize)> = lines
                .lines
                .iter()
                .enumerate()
                .filter_map(|(i, l)| {
                    let mut s = eval(&l.string);
                    s.make_ascii_lowercase();
                    (!s.is_empty()).then_some((s, i))
                })
                .collect();
            if strings.is_empty() {
                return;
            }
            Arc::new(Tables::new(strings))
        }
    };
    let values = match &lines.values {
        Some(v) => v.clone(),
        None => Arc::new(lines.lines.iter().map(|l| eval(&l.replacement)).collect()),
    };
    // No length, so no ranges.
    reply.allow_ranges = false;
    if loc.last_modified.unwrap_or(false) {
        weak_etag(reply);
    } else {
        clear_validators(reply);
    }
    let once = loc.once.unwrap_or(true);
    // nginx's buffered upstream reads are not the end of what it has at hand; a file's
    // pieces and unbuffered reads (`flush`) are.
    let whole_pieces = !matches!(&reply.body, Body::Upstream(u) if u.buffering);
    reply
        .filters
        .push(Box::new(SubFilter::new(tables, values, once, whole_pieces)));
}

/// `ngx_http_clear_last_modified` and `ngx_http_clear_etag`: the answer's own and any passed
/// on or added.
pub(crate) fn clear_validators(reply: &mut Reply) {
    let validator =
        |n: &str| n.eq_ignore_ascii_case("etag") || n.eq_ignore_ascii_case("last-modified");
    reply.last_modified = None;
    reply.headers.retain(|(n, _)| !validator(n));
    reply.extra.retain(|(n, _)| !validator(n));
    reply.raw_extra.retain(|(_, n, _)| !validator(n));
}

/// `ngx_http_weak_etag`: a strong ETag becomes weak, a weak one stays, one that is neither
/// (no opening quote) goes.
pub(crate) fn weak_etag(reply: &mut Reply) {
    fn weaken(v: &str) -> Option<String> {
        if v.len() > 2 && v.starts_with("W/") {
            Some(v.to_string())
        } else if v.starts_with('"') {
            Some(format!("W/{v}"))
        } else {
            None
        }
    }
    let is_etag = |n: &str| n.eq_ignore_ascii_case("etag");
    reply.headers.retain_mut(|(n, v)| {
        if !is_etag(n) {
            return true;
        }
        weaken(v).map(|w| *v = w.into()).is_some()
    });
    reply.extra.retain_mut(|(n, v)| {
        if !is_etag(n) {
            return true;
        }
        weaken(v).map(|w| *v = w.into()).is_some()
    });
    reply.raw_extra.retain_mut(|(_, n, v)| {
        if !is_etag(n) {
            return true;
        }
        if v.len() > 2 && v.starts_with(b"W/") {
            true
        } else if v.first() == Some(&b'"') {
            v.splice(0..0, *b"W/");
            true
        } else {
            false
        }
    });
}
