//! nginx's charset module: `charset`, `source_charset`, `override_charset`, `charset_types`
//! and `charset_map`, and an upstream's `X-Accel-Charset`.
//!
//! Its header filter runs after the headers filter and before gzip and ranges (nginx's order):
//! for an answer of a listed type (`charset_types`, `text/html` always), it adds
//! `; charset=NAME` to `Content-Type`, and when the body's charset (`source_charset`, or the
//! one an upstream's `Content-Type` names) differs, it adds a [`recode::Recoder`] to the
//! answer's body filters. Between 8-bit charsets the length stands (ranges still apply, to
//! the recoded bytes); to or from UTF-8 it does not: the answer is sent chunked and without
//! ranges. An encoded answer (`Content-Encoding`), one without a type, and a 304 are left
//! alone. What an upstream says of its charset is kept unless `override_charset on`;
//! `X-Accel-Charset` names the charset whatever the location says.
//!
//! The charsets and maps are read into one [`table::Charsets`] for the configuration; a
//! location that recodes between two named charsets without a map between them is refused
//! once everything is read, in nginx's words. Charsets named by variables are found per
//! request; a name nothing in the configuration knows recodes nothing (logged, as nginx).

pub mod recode;
pub mod table;

use std::sync::Arc;

use shoal_conf::{Directive, Error};

use super::loc_conf;
use super::mime_types::{types_slot, Types};
use super::modules::{Cx, HttpModule};
use super::reply::Reply;
use crate::conf::{err, flag_arg, merge, set_once, Args, Builder, Command, Ctx, Scope};
use crate::log::Level;
use crate::variables::Template;
use table::Charsets;

const HSLI: Ctx = Ctx::HSL.or(Ctx::LIF);

pub static DIRECTIVES: &[Command] = &[
    Command::new("charset", HSLI, Args::ONE, set_charset),
    Command::new("source_charset", HSLI, Args::ONE, set_source_charset),
    Command::new("override_charset", HSLI, Args::Flag, set_override_charset),
    Command::new(
        "charset_types",
        Ctx::HSL,
        Args::ONE_OR_MORE,
        set_charset_types,
    ),
    Command::block("charset_map", Ctx::HTTP, Args::TWO, set_charset_map),
];

/// nginx's `charset_types` default (`text/html` is in every list).
const DEFAULT_TYPES: &[&str] = &[
    "text/html",
    "text/xml",
    "text/plain",
    "text/vnd.wap.wml",
    "application/javascript",
    "application/rss+xml",
];

/// A `charset` or `source_charset` value.
#[derive(Clone, Debug)]
pub enum Value {
    Off,
    /// A name the configuration knows (an index in [`Charsets`]).
    Name(usize),
    /// `$variable`: the name is found per request.
    Var(Template),
}

/// The module's settings at one level.
#[derive(Clone, Debug, Default)]
pub struct CharsetLoc {
    /// The configuration's charsets and maps (set at http level once everything is read,
    /// inherited by every level).
    pub charsets: Option<Arc<Charsets>>,
    pub charset: Option<Value>,
    pub source: Option<Value>,
    pub override_charset: Option<bool>,
    pub types: Option<Types>,
}

impl CharsetLoc {
    fn types_match(&self, content_type: &str) -> bool {
        Types::matches(self.types.as_ref(), DEFAULT_TYPES, content_type)
    }
}

fn cs<'a>(s: &'a mut Scope<'_>) -> &'a mut CharsetLoc {
    &mut loc_conf(s).charset
}

/// A `charset`/`source_charset` argument: `off`, `$name`, or a charset the configuration
/// now knows.
fn value(b: &mut Builder, d: &Directive) -> Result<Value, Error> {
    let v = &d.args[0].value;
    if v == "off" {
        return Ok(Value::Off);
    }
    if v.starts_with('$') {
        return Template::compile(v).map(Value::Var).map_err(|m| err(d, m));
    }
    Ok(Value::Name(b.charsets.add(v)))
}

fn set_charset(b: &mut Builder, d: &Directive, s: &mut Scope<'_>) -> Result<(), Error> {
    if cs(s).charset.is_some() {
        return Err(crate::conf::duplicate(d));
    }
    cs(s).charset = Some(value(b, d)?);
    Ok(())
}

fn set_source_charset(b: &mut Builder, d: &Directive, s: &mut Scope<'_>) -> Result<(), Error> {
    if cs(s).source.is_some() {
        return Err(crate::conf::duplicate(d));
    }
    cs(s).source = Some(value(b, d)?);
    Ok(())
}

fn set_override_charset(_: &mut Builder, d: &Directive, s: &mut Scope<'_>) -> Result<(), Error> {
    set_once(&mut cs(s).override_charset, flag_arg(d), d)
}

/// `charset_types` (nginx's `ngx_http_types_slot`).
fn set_charset_types(b: &mut Builder, d: &Directive, s: &mut Scope<'_>) -> Result<(), Error> {
    types_slot(b, d, &mut cs(s).types)
}

fn set_charset_map(b: &mut Builder, d: &Directive, _: &mut Scope<'_>) -> Result<(), Error> {
    b.charsets.read_map(d)
}

/// Hands the configuration's charsets to the http level (every level inherits them); called
/// once everything is read, before levels are merged.
pub fn finish(b: &mut Builder, http: &mut CharsetLoc) {
    http.charsets = Some(Arc::new(std::mem::take(&mut b.charsets)));
}

/// nginx's check of a merged level: recoding between two charsets named in the configuration
/// needs a `charset_map` between them.
pub fn check(loc: &CharsetLoc) -> Result<(), Error> {
    let (Some(Value::Name(dst)), Some(Value::Name(src)), Some(charsets)) =
        (&loc.charset, &loc.source, &loc.charsets)
    else {
        return Ok(());
    };
    charsets.check(*src, *dst)
}

/// The charset module's place in the module list: its header filter.
pub struct Module;

impl HttpModule for Module {
    type Loc = CharsetLoc;
    const DIRECTIVES: &'static [Command] = DIRECTIVES;

    fn merge(loc: &mut CharsetLoc, parent: &CharsetLoc) {
        merge(&mut loc.charsets, &parent.charsets);
        merge(&mut loc.charset, &parent.charset);
        merge(&mut loc.source, &parent.source);
        merge(&mut loc.override_charset, &parent.override_charset);
        merge(&mut loc.types, &parent.types);
    }

    fn header_filter(loc: &CharsetLoc, cx: &Cx<'_, '_, '_>, reply: &mut Box<Reply>) {
        filter(loc, cx, reply);
    }
}

/// An upstream's `Content-Type`, as nginx's proxy reads it (`ngx_http_upstream_copy_content_type`):
/// the length of the type before a `; charset=` parameter, and that parameter's value (quotes
/// taken off), if there is one.
pub(crate) fn split_charset(ct: &str) -> (usize, Option<&str>) {
    let b = ct.as_bytes();
    let mut i = 0;
    while let Some(p) = memchr::memchr(b';', &b[i..]) {
        let semi = i + p;
        let mut j = semi + 1;
        while j < b.len() && b[j] == b' ' {
            j += 1;
        }
        if j == b.len() {
            break;
        }
        if b.len() - j >= 8 && b[j..j + 8].eq_ignore_ascii_case(b"charset=") {
            let mut v = &ct[j + 8..];
            v = v.strip_prefix('"').unwrap_or(v);
            v = v.strip_suffix('"').unwrap_or(v);
            return (semi, Some(v));
        }
        // nginx steps past the character after the spaces whatever it is.
        i = j + 1;
        if i >= b.len() {
            break;
        }
    }
    (b.len(), None)
}

/// The type the filters test against their `*_types` (nginx's `content_type_len`): an
/// upstream's `Content-Type` before its `; charset=` parameter, any other as it is; `None`
/// when the answer has none.
pub fn tested_type(reply: &Reply) -> Option<&str> {
    let ct = reply.content_type.as_deref().filter(|t| !t.is_empty())?;
    if reply.proxied || reply.upstream_status || reply.charset_param {
        Some(&ct[..split_charset(ct).0])
    } else {
        Some(ct)
    }
}

/// A charset for a request: its name and its index, if the configuration knows it.
struct Named {
    name: String,
    index: Option<usize>,
}

/// nginx's charset header filter (`ngx_http_charset_header_filter`, main requests).
pub fn filter(loc: &CharsetLoc, cx: &Cx<'_, '_, '_>, reply: &mut Reply) {
    let log = |line: &dyn std::fmt::Display| cx.log(Level::Error, line);
    run(loc, reply, &|t| cx.eval(t), Some(&log));
}

/// The filter for an answer to a request that could not be read (a 400, a 414): the
/// server's charset, variables empty (nginx's filter runs for those pages too).
pub fn refused(loc: &CharsetLoc, reply: &mut Reply) {
    run(loc, reply, &|_| String::new(), None);
}

/// Whether this location's charset filter would send an HTML answer of its own as UTF-8
/// (autoindex then measures names in characters, as nginx's does once the filter ran).
pub fn html_charset_is_utf8(cx: &Cx<'_, '_, '_>) -> bool {
    let mut probe = Reply::new(200);
    probe.content_type = Some("text/html".into());
    run(&cx.lc.charset, &mut probe, &|t| cx.eval(t), None);
    probe
        .content_type
        .as_deref()
        .and_then(|t| t.rsplit_once("; charset="))
        .is_some_and(|(_, c)| c.eq_ignore_ascii_case("utf-8"))
}

/// Where the filter's error lines go (none for a probe).
type Log<'a> = Option<&'a dyn Fn(&dyn std::fmt::Display)>;

/// The filter: `eval` values the variables, `log` writes its error lines.
fn run(loc: &CharsetLoc, reply: &mut Reply, eval: &dyn Fn(&Template) -> String, log: Log<'_>) {
    let Some(charsets) = loc.charsets.as_deref() else {
        return;
    };
    // No charset asked for (most locations): nothing to look at in the answer.
    let over = reply.override_charset.as_deref();
    if over.is_none_or(str::is_empty) && matches!(loc.charset, None | Some(Value::Off)) {
        return;
    }
    if reply
        .header("content-encoding")
        .is_some_and(|v| !v.is_empty())
    {
        return;
    }
    let Some(ct) = reply.content_type.as_deref().filter(|t| !t.is_empty()) else {
        return;
    };
    // Only an upstream's type (or one that says it is the body's) is read for a charset; a
    // static one is a type as written.
    let upstream = reply.proxied || reply.upstream_status || reply.charset_param;
    let (type_len, said) = if upstream {
        split_charset(ct)
    } else {
        (ct.len(), None)
    };
    let said = said.filter(|s| !s.is_empty());
    let known = |name: String| {
        let index = charsets.find(&name);
        Named { name, index }
    };
    // The charset to send.
    let dst = match reply.override_charset.as_deref().filter(|c| !c.is_empty()) {
        Some(over) => {
            let Some(i) = charsets.find(over) else {
                if let Some(log) = log {
                    log(&format_args!("unknown charset \"{over}\" to override"));
                }
                return;
            };
            Named {
                name: over.to_string(),
                index: Some(i),
            }
        }
        None => {
            let charset = match &loc.charset {
                None | Some(Value::Off) => return,
                Some(c) => c,
            };
            if said.is_some() {
                if !loc.override_charset.unwrap_or(false) {
                    return;
                }
            } else if !loc.types_match(&ct[..type_len]) {
                return;
            }
            match charset {
                Value::Name(i) => Named {
                    name: charsets.name(*i).to_string(),
                    index: Some(*i),
                },
                Value::Var(t) => known(eval(t)),
                Value::Off => return,
            }
        }
    };
    // The body's charset.
    let src = match said {
        Some(s) => Some(known(s.to_string())),
        None => match &loc.source {
            None | Some(Value::Off) => None,
            Some(Value::Name(i)) => Some(Named {
                name: charsets.name(*i).to_string(),
                index: Some(*i),
            }),
            Some(Value::Var(t)) => Some(known(eval(t))),
        },
    };
    let recode = match &src {
        None => None,
        Some(src) => match (src.index, dst.index) {
            (Some(s), Some(d)) if s == d => None,
            (Some(s), Some(d)) => match charsets.recode(s, d) {
                Some(r) => Some(r),
                None => return no_map(log, &src.name, &dst.name),
            },
            // Names nothing knows: only one that the body's name begins with is "the same".
            (None, None)
                if src.name.len() >= dst.name.len()
                    && src.name.as_bytes()[..dst.name.len()]
                        .eq_ignore_ascii_case(dst.name.as_bytes()) =>
            {
                None
            }
            _ => return no_map(log, &src.name, &dst.name),
        },
    };
    // nginx's `ngx_http_set_charset`: a 301 or 302 names no charset (Netscape 4 took it for
    // the next page's), and loses an upstream's.
    let ct = if matches!(reply.status, 301 | 302) {
        ct[..type_len].to_string()
    } else {
        format!("{}; charset={}", &ct[..type_len], dst.name)
    };
    reply.content_type = Some(ct);
    if let Some(how) = recode {
        if !how.keeps_length() {
            // No length, so no ranges (nginx's range filter needs one).
            reply.allow_ranges = false;
        }
        reply.filters.push(Box::new(recode::Recoder::new(how)));
    }
}

fn no_map(log: Log<'_>, src: &str, dst: &str) {
    if let Some(log) = log {
        log(&format_args!(
            "no \"charset_map\" between the charsets \"{src}\" and \"{dst}\""
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn upstream_types_as_nginx_splits_them() {
        assert_eq!(split_charset("text/html"), (9, None));
        assert_eq!(
            split_charset("text/html; charset=koi8-r"),
            (9, Some("koi8-r"))
        );
        assert_eq!(
            split_charset("text/html;charset=\"KOI8-R\""),
            (9, Some("KOI8-R"))
        );
        assert_eq!(split_charset("text/html ; charset=x"), (10, Some("x")));
        assert_eq!(
            split_charset("text/html;   charset=koi8-r;x=y"),
            (9, Some("koi8-r;x=y"))
        );
        assert_eq!(split_charset("text/html; q=1; charset=a"), (14, Some("a")));
        assert_eq!(split_charset("text/html; q=1"), (14, None));
        assert_eq!(split_charset("text/html;  "), (12, None));
        assert_eq!(split_charset("a;;charset=x"), (12, None));
        assert_eq!(split_charset("a; Charset="), (1, Some("")));
    }
}
