//! `proxy_cookie_domain`, `proxy_cookie_path` and `proxy_cookie_flags`: an upstream's
//! `Set-Cookie` rewritten on its way to the client, as nginx's `ngx_http_proxy_rewrite_cookie`
//! does.
//!
//! A value is read as nginx reads it: attributes split at `;`, the spaces around each name and
//! value dropped; the first attribute is the cookie (`name=value`, without `=` the line is left
//! alone). Each `domain=` and `path=` goes through its directive's rules (the first that
//! matches rewrites it), then the first `proxy_cookie_flags` whose cookie matches the name
//! adds or removes flags. A value a rule changed is written back in nginx's form
//! (`name=value; attr=value; flag`); one no rule changed goes out as it came.
//!
//! Runs on the worker for every `Set-Cookie` of a proxied answer (fresh or cached), only where
//! one of the directives applies.

use std::borrow::Cow;
use std::sync::Arc;

use shoal_conf::{Directive, Error};

use super::redirect::by_regex;
use crate::conf::{duplicate, err, merge, Builder, Scope};
use crate::variables::{Template, Vars};

/// The three directives of a location, merged down: each list is inherited when the level
/// has none; `Some` of an empty list is `off`.
#[derive(Clone, Debug, Default)]
pub struct CookieLoc {
    domains: Option<Arc<Vec<Rule>>>,
    paths: Option<Arc<Vec<Rule>>>,
    flags: Option<Arc<Vec<FlagsRule>>>,
}

/// One `proxy_cookie_domain` or `proxy_cookie_path` line.
#[derive(Clone, Debug)]
struct Rule {
    from: Pattern,
    to: Template,
}

#[derive(Clone, Debug)]
enum Pattern {
    /// Text with variables: a domain equal to it (without regard to case, a leading dot
    /// kept), or a path that starts with it.
    Text(Template),
    /// `~`: the whole value is replaced when the regex matches.
    Regex(shoal_pcre::Regex),
}

/// One `proxy_cookie_flags` line: the cookie's name (compared without regard to case) and
/// the flags, with variables, read per answer.
#[derive(Clone, Debug)]
struct FlagsRule {
    cookie: Pattern,
    flags: Vec<Template>,
}

impl CookieLoc {
    pub fn merge(&mut self, parent: &CookieLoc) {
        merge(&mut self.domains, &parent.domains);
        merge(&mut self.paths, &parent.paths);
        merge(&mut self.flags, &parent.flags);
    }

    /// Whether any rule applies here (without one, `Set-Cookie` passes untouched).
    pub fn rewrites(&self) -> bool {
        fn on<T>(list: &Option<Arc<Vec<T>>>) -> bool {
            list.as_ref().is_some_and(|l| !l.is_empty())
        }
        on(&self.domains) || on(&self.paths) || on(&self.flags)
    }
}

fn cookie<'a>(s: &'a mut Scope<'_>) -> &'a mut CookieLoc {
    &mut crate::http::loc_conf(s).proxy.cookie
}

/// `off` (only alone on its level) or the list a rule joins, as nginx's setters check them.
fn rule_list<'a, T: Clone>(
    slot: &'a mut Option<Arc<Vec<T>>>,
    d: &Directive,
) -> Result<Option<&'a mut Vec<T>>, Error> {
    if slot.as_ref().is_some_and(|l| l.is_empty()) {
        return Err(duplicate(d));
    }
    if d.args.len() == 1 {
        if d.args[0].value != "off" {
            return Err(err(d, format!("invalid parameter \"{}\"", d.args[0].value)));
        }
        if slot.is_some() {
            return Err(duplicate(d));
        }
        *slot = Some(Arc::new(Vec::new()));
        return Ok(None);
    }
    Ok(Some(Arc::make_mut(
        slot.get_or_insert_with(Default::default),
    )))
}

fn template(d: &Directive, i: usize) -> Result<Template, Error> {
    Template::compile(&d.args[i].value).map_err(|m| err(d, m))
}

/// `proxy_cookie_domain off | DOMAIN REPLACEMENT`: a regex (`~`) never minds case; a leading
/// dot of a text DOMAIN is dropped (a value's own is kept).
pub fn set_domain(_: &mut Builder, d: &Directive, s: &mut Scope<'_>) -> Result<(), Error> {
    let Some(list) = rule_list(&mut cookie(s).domains, d)? else {
        return Ok(());
    };
    let first = d.args[0].value.as_str();
    let from = match first.strip_prefix('~') {
        Some(re) => Pattern::Regex(crate::http::rewrite::regex(d, re, true)?),
        None => Pattern::Text(
            Template::compile(first.strip_prefix('.').unwrap_or(first)).map_err(|m| err(d, m))?,
        ),
    };
    list.push(Rule {
        from,
        to: template(d, 1)?,
    });
    Ok(())
}

/// `proxy_cookie_path off | PATH REPLACEMENT`: a prefix, or a regex (`~`, `~*` without regard
/// to case).
pub fn set_path(_: &mut Builder, d: &Directive, s: &mut Scope<'_>) -> Result<(), Error> {
    let Some(list) = rule_list(&mut cookie(s).paths, d)? else {
        return Ok(());
    };
    let first = d.args[0].value.as_str();
    let from = if let Some(re) = first.strip_prefix("~*") {
        Pattern::Regex(crate::http::rewrite::regex(d, re, true)?)
    } else if let Some(re) = first.strip_prefix('~') {
        Pattern::Regex(crate::http::rewrite::regex(d, re, false)?)
    } else {
        Pattern::Text(template(d, 0)?)
    };
    list.push(Rule {
        from,
        to: template(d, 1)?,
    });
    Ok(())
}

/// `proxy_cookie_flags off | COOKIE FLAG [FLAG [FLAG]]`: COOKIE a name with variables or a
/// regex (`~`, never minding case); the flags are read per answer (an unknown one is ignored
/// there, as nginx does).
pub fn set_flags(_: &mut Builder, d: &Directive, s: &mut Scope<'_>) -> Result<(), Error> {
    let Some(list) = rule_list(&mut cookie(s).flags, d)? else {
        return Ok(());
    };
    let first = d.args[0].value.as_str();
    let name = match first.strip_prefix('~') {
        Some(re) => Pattern::Regex(crate::http::rewrite::regex(d, re, true)?),
        None => Pattern::Text(template(d, 0)?),
    };
    let flags = (1..d.args.len())
        .map(|i| template(d, i))
        .collect::<Result<_, _>>()?;
    list.push(FlagsRule {
        cookie: name,
        flags,
    });
    Ok(())
}

/// One attribute of a `Set-Cookie` value; `key: None` once a flag removed it.
struct Attr<'a> {
    key: Option<Cow<'a, str>>,
    value: Option<Cow<'a, str>>,
}

/// Reads a value as nginx's `ngx_http_proxy_parse_cookie`: every `;` ends an attribute (an
/// empty one too), spaces (not tabs) around the name and the value are not theirs.
fn parse(value: &str) -> Vec<Attr<'_>> {
    value
        .split(';')
        .map(|a| {
            let a = a.trim_start_matches(' ');
            let (key, value) = match a.split_once('=') {
                Some((k, v)) => (k, Some(v.trim_matches(' '))),
                None => (a, None),
            };
            Attr {
                key: Some(Cow::Borrowed(key.trim_end_matches(' '))),
                value: value.map(Cow::Borrowed),
            }
        })
        .collect()
}

/// The value rewritten by the location's rules, or `None` when no rule changed it.
pub fn rewrite(c: &CookieLoc, value: &str, vars: &Vars<'_>) -> Option<String> {
    let mut attrs = parse(value);
    // A line without `name=` is not a cookie nginx rewrites.
    attrs.first()?.value.as_ref()?;
    let mut changed = false;
    let (domains, paths) = (c.domains.as_deref(), c.paths.as_deref());
    for a in attrs.iter_mut().skip(1) {
        let (Some(key), Some(v)) = (&a.key, &a.value) else {
            continue;
        };
        let new = if key.eq_ignore_ascii_case("domain") {
            domains.and_then(|l| first_match(l, v, vars, domain))
        } else if key.eq_ignore_ascii_case("path") {
            paths.and_then(|l| first_match(l, v, vars, path))
        } else {
            None
        };
        if let Some(new) = new {
            a.value = Some(Cow::Owned(new));
            changed = true;
        }
    }
    if let Some(flags) = c.flags.as_deref() {
        changed |= edit_flags(flags, &mut attrs, vars);
    }
    changed.then(|| join(&attrs))
}

/// What a text rule keeps of a value around its replacement, when it matches.
type Kept<'v> = Option<(&'v str, &'v str)>;

/// The first rule that matches `value`, applied: a regex replaces the whole value, a text
/// rule what `text` says it matched.
fn first_match(
    rules: &[Rule],
    value: &str,
    vars: &Vars<'_>,
    text: for<'v> fn(&'v str, &str) -> Kept<'v>,
) -> Option<String> {
    rules.iter().find_map(|rule| match &rule.from {
        Pattern::Regex(re) => by_regex(re, &rule.to, value, vars),
        Pattern::Text(t) => {
            let (before, after) = text(value, &vars.eval(t))?;
            Some(format!("{before}{}{after}", vars.eval(&rule.to)))
        }
    })
}

/// A domain equal to the pattern, without regard to case; its leading dot stays.
fn domain<'v>(value: &'v str, pattern: &str) -> Kept<'v> {
    let (dot, name) = match value.strip_prefix('.') {
        Some(name) => (".", name),
        None => ("", value),
    };
    name.eq_ignore_ascii_case(pattern).then_some((dot, ""))
}

/// A path that starts with the pattern (case counts); the rest stays.
fn path<'v>(value: &'v str, pattern: &str) -> Kept<'v> {
    value.strip_prefix(pattern).map(|rest| ("", rest))
}

/// `proxy_cookie_flags`' flags, as bits.
const SECURE: u8 = 1;
const NOSECURE: u8 = 1 << 1;
const HTTPONLY: u8 = 1 << 2;
const NOHTTPONLY: u8 = 1 << 3;
const STRICT: u8 = 1 << 4;
const LAX: u8 = 1 << 5;
const NONE: u8 = 1 << 6;
const NOSAMESITE: u8 = 1 << 7;

const FLAGS: [(&str, u8); 8] = [
    ("secure", SECURE),
    ("nosecure", NOSECURE),
    ("httponly", HTTPONLY),
    ("nohttponly", NOHTTPONLY),
    ("samesite=strict", STRICT),
    ("samesite=lax", LAX),
    ("samesite=none", NONE),
    ("nosamesite", NOSAMESITE),
];

/// The SameSite values, in the order nginx prefers them when a line names several.
const SAMESITE: [(u8, &str); 3] = [
    (STRICT, "SameSite=Strict"),
    (LAX, "SameSite=Lax"),
    (NONE, "SameSite=None"),
];

/// The first `proxy_cookie_flags` whose cookie is this one, applied; false when none is, or
/// its flags came to nothing.
fn edit_flags(rules: &[FlagsRule], attrs: &mut Vec<Attr<'_>>, vars: &Vars<'_>) -> bool {
    let name = attrs[0].key.as_deref().unwrap_or_default();
    let Some(rule) = rules.iter().find(|f| match &f.cookie {
        Pattern::Regex(re) => re.is_match(name),
        Pattern::Text(t) => vars.eval(t).eq_ignore_ascii_case(name),
    }) else {
        return false;
    };
    let mut set = 0;
    for t in &rule.flags {
        let v = vars.eval(t);
        if let Some((_, bit)) = FLAGS.iter().find(|(n, _)| n.eq_ignore_ascii_case(&v)) {
            set |= bit;
        }
    }
    if set == 0 {
        return false;
    }
    // A flag the cookie has is kept (the first of its name) or removed; a SameSite has its
    // value replaced, once per value asked for. What is still asked for is added after.
    for a in attrs.iter_mut().skip(1) {
        let Some(key) = a.key.as_deref() else {
            continue;
        };
        let (on, off) = if key.eq_ignore_ascii_case("secure") {
            (SECURE, NOSECURE)
        } else if key.eq_ignore_ascii_case("httponly") {
            (HTTPONLY, NOHTTPONLY)
        } else if key.eq_ignore_ascii_case("samesite") {
            if let Some(&(bit, text)) = SAMESITE.iter().find(|(bit, _)| set & bit != 0) {
                set &= !bit;
                *a = Attr {
                    key: Some(Cow::Borrowed(text)),
                    value: None,
                };
                continue;
            }
            (0, NOSAMESITE)
        } else {
            continue;
        };
        if set & on != 0 {
            set &= !on;
        } else if set & off != 0 {
            a.key = None;
            a.value = None;
        }
    }
    let mut add = |text: &'static str| {
        attrs.push(Attr {
            key: Some(Cow::Borrowed(text)),
            value: None,
        })
    };
    if set & SECURE != 0 {
        add("Secure");
    }
    if set & HTTPONLY != 0 {
        add("HttpOnly");
    }
    if let Some(&(_, text)) = SAMESITE.iter().find(|(bit, _)| set & bit != 0) {
        add(text);
    }
    true
}

/// The attributes written back as nginx writes them: `; ` between them, `=` where there is a
/// value.
fn join(attrs: &[Attr<'_>]) -> String {
    let mut out = String::new();
    for (i, a) in attrs.iter().enumerate() {
        let Some(key) = &a.key else {
            continue;
        };
        if i > 0 {
            out.push_str("; ");
        }
        out.push_str(key);
        if let Some(v) = &a.value {
            out.push('=');
            out.push_str(v);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::{join, parse};

    #[test]
    fn a_value_is_read_and_written_back_as_nginx_does() {
        // Spaces around names and values dropped (not tabs), an empty attribute for each `;`
        // with nothing before the next, `=` kept for an empty value.
        for (raw, written) in [
            ("a=b", "a=b"),
            (" a = b ;Path= /x ;", "a=b; Path=/x; "),
            ("a=b;;secure", "a=b; ; secure"),
            ("a= ; x", "a=; x"),
            ("a=\tb\t; y=1=2", "a=\tb\t; y=1=2"),
        ] {
            assert_eq!(join(&parse(raw)), written, "{raw:?}");
        }
        assert!(parse("noeq; path=/")[0].value.is_none());
    }
}
