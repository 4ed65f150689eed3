//! nginx's map module: `map STRING $variable { ... }` defines a variable whose value is chosen
//! by the value of STRING (itself evaluated per request) from a table of sources.
//!
//! The table's lookup is nginx's `ngx_http_map_find`: an exact source, compared without regard
//! to ASCII case (nginx lowercases both); with `hostnames`, then the longest leading wildcard
//! (`*.example.com`, `.example.com`, which also matches `example.com`), then the longest
//! trailing one (`www.example.*`); then the `~`/`~*` regexes in the order written, whose
//! captures (`$1`, named) the value may use. A value may contain variables. Nothing matches:
//! `default`, or the empty string. Regexes never see an empty STRING, as in nginx.
//!
//! The variable is computed when a template uses it ([`crate::variables::Compute`]), once per
//! evaluation rather than once per request: `volatile` is accepted and is what shoal always
//! does. Unlike nginx, a regex match here does not change the request's `$1`.. elsewhere.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use shoal_conf::{Directive, Error};
use shoal_pcre::{Regex, RegexBuilder};

use crate::conf::{err, Args, Builder, Command, Ctx, Scope};
use crate::variables::{self, Captures, Compute, Template, Vars};

pub static DIRECTIVES: &[Command] = &[Command::block(
    "map",
    Ctx::HTTP.or(Ctx::STREAM),
    Args::TWO,
    set_map,
)];

/// One `map` block.
#[derive(Debug)]
pub struct Map {
    source: Template,
    /// `hostnames`: a trailing dot of the source's value is dropped before the lookup.
    hostnames: bool,
    /// The values, indexed by the table below.
    values: Vec<Template>,
    /// Exact sources and, with `hostnames`, wildcards.
    keys: Keys,
    regexes: Vec<(Regex, usize)>,
    default: Option<usize>,
}

/// What a lookup found: a value, and the captures of the regex that chose it.
type Found = (usize, Option<Captures>);

impl Map {
    fn find(&self, key: &str) -> Option<Found> {
        let low = key.to_ascii_lowercase();
        if let Some(i) = self.keys.find(&low) {
            return Some((i, None));
        }
        if key.is_empty() {
            return None;
        }
        self.regexes
            .iter()
            .find_map(|(re, i)| variables::capture(re, key).map(|c| (*i, Some(c))))
    }
}

impl Compute for Map {
    fn compute(&self, vars: &Vars<'_>, out: &mut String) -> bool {
        let mut key = vars.eval(&self.source);
        if self.hostnames && key.ends_with('.') {
            key.pop();
        }
        let (value, caps) = match self.find(&key) {
            Some((i, caps)) => (Some(i), caps),
            None => (self.default, None),
        };
        let Some(value) = value.map(|i| &self.values[i]) else {
            return true;
        };
        match caps {
            None => out.push_str(&vars.eval(value)),
            Some(caps) => {
                // The value sees the regex's captures, as the request's would be in nginx.
                let mut user = vars.user.cloned().unwrap_or_default();
                user.extend(caps.named);
                let vars = Vars {
                    captures: &caps.numbered,
                    user: Some(&user),
                    ..*vars
                };
                out.push_str(&vars.eval(value));
            }
        }
        true
    }
}

/// A source of a `hostnames` map (or a `valid_referers` name), as nginx's `ngx_hash_add_key`
/// reads it.
pub(crate) enum Source {
    Exact(String),
    /// `.example.com` (`dot`) or `*.example.com`: the domain.
    Head {
        domain: String,
        dot: bool,
    },
    /// `www.example.*`: the prefix.
    Tail(String),
}

impl Source {
    /// `None`: `invalid hostname or wildcard`.
    pub(crate) fn wildcard(key: &str) -> Option<Source> {
        let b = key.as_bytes();
        if b.iter().filter(|&&c| c == b'*').count() > 1 || key.contains("..") || b.contains(&0) {
            return None;
        }
        let low = key.to_ascii_lowercase();
        if b.len() > 1 && b[0] == b'.' {
            return Some(Source::Head {
                domain: low[1..].to_string(),
                dot: true,
            });
        }
        if b.len() > 2 {
            if key.starts_with("*.") {
                return Some(Source::Head {
                    domain: low[2..].to_string(),
                    dot: false,
                });
            }
            if key.ends_with(".*") {
                return Some(Source::Tail(low[..low.len() - 2].to_string()));
            }
        }
        if key.contains('*') {
            return None;
        }
        Some(Source::Exact(low))
    }
}

/// nginx's combined hash of names: exact names (lowercase), then the longest leading
/// wildcard, then the longest trailing one; each gives the index of its value. The conflict
/// checks need the exact names a `.example.com` adds.
#[derive(Debug, Default)]
pub(crate) struct Keys {
    names: HashSet<String>,
    exact: HashMap<String, usize>,
    /// Leading wildcards by their domain: `*.example.com` and `.example.com` are both
    /// `example.com`, the second also matching the domain itself (`true`).
    head: HashMap<String, (usize, bool)>,
    /// Trailing wildcards by their prefix: `www.example.*` is `www.example`.
    tail: HashMap<String, usize>,
}

impl Keys {
    /// The value for a lowercase name (nginx's `ngx_hash_find_combined`).
    pub(crate) fn find(&self, name: &str) -> Option<usize> {
        if let Some(&i) = self.exact.get(name) {
            return Some(i);
        }
        if name.is_empty() {
            return None;
        }
        self.find_head(name).or_else(|| self.find_tail(name))
    }

    /// The longest leading wildcard matching `name` (nginx's `ngx_hash_find_wc_head`).
    fn find_head(&self, name: &str) -> Option<usize> {
        if self.head.is_empty() {
            return None;
        }
        if let Some(&(i, true)) = self.head.get(name) {
            return Some(i);
        }
        name.match_indices('.')
            .find_map(|(p, _)| self.head.get(&name[p + 1..]).map(|&(i, _)| i))
    }

    /// The longest trailing wildcard matching `name` (nginx's `ngx_hash_find_wc_tail`).
    fn find_tail(&self, name: &str) -> Option<usize> {
        if self.tail.is_empty() {
            return None;
        }
        name.rmatch_indices('.')
            .find_map(|(p, _)| self.tail.get(&name[..p]).copied())
    }

    /// Whether there are any names.
    pub(crate) fn is_empty(&self) -> bool {
        self.exact.is_empty() && self.head.is_empty() && self.tail.is_empty()
    }

    /// Adds a source; false if it conflicts with one already there.
    pub(crate) fn add(&mut self, source: Source, value: usize) -> bool {
        match source {
            Source::Exact(k) => {
                if !self.names.insert(k.clone()) {
                    return false;
                }
                self.exact.insert(k, value);
            }
            Source::Head { domain, dot } => {
                if dot && !self.names.insert(domain.clone()) {
                    return false;
                }
                if self.head.contains_key(&domain) {
                    return false;
                }
                self.head.insert(domain, (value, dot));
            }
            Source::Tail(prefix) => {
                if self.tail.contains_key(&prefix) {
                    return false;
                }
                self.tail.insert(prefix, value);
            }
        }
        true
    }
}

fn compile(d: &Directive, text: &str) -> Result<Template, Error> {
    Template::compile(text).map_err(|m| err(d, m))
}

/// The variable a `map` or `split_clients` defines (`$name`), checked as nginx checks it.
pub(crate) fn variable_name(d: &Directive) -> Result<&str, Error> {
    let arg = d.args[1].value.as_str();
    let name = match arg.strip_prefix('$') {
        Some(n) if !n.is_empty() => n,
        _ => return Err(err(d, format!("invalid variable name \"{arg}\""))),
    };
    if variables::is_builtin(name) {
        return Err(err(d, format!("the duplicate \"{name}\" variable")));
    }
    Ok(name)
}

/// Registers a computed variable with the `http` or `stream` block that owns it.
pub(crate) fn define(s: &mut Scope<'_>, name: &str, def: Arc<dyn Compute>) {
    variables::define(name, &def);
    match s {
        Scope::Http(h) => h.variables.push(def),
        Scope::Stream(st) => st.variables.push(def),
        _ => unreachable!("map, geo and split_clients are allowed in http and stream only"),
    }
}

fn set_map(_: &mut Builder, d: &Directive, s: &mut Scope<'_>) -> Result<(), Error> {
    let source = compile(d, &d.args[0].value)?;
    let name = variable_name(d)?;
    let mut keys = Keys::default();
    let mut values = Vec::new();
    let mut regexes = Vec::new();
    let mut default = None;
    let mut hostnames = false;
    for e in d.block.as_deref().unwrap_or_default() {
        if e.block.is_some() {
            return Err(err(e, "unexpected \"{\""));
        }
        match (e.name.as_str(), e.args.len()) {
            ("hostnames", 0) => {
                hostnames = true;
                continue;
            }
            ("volatile", 0) => continue,
            (_, 1) => {}
            _ => return Err(err(e, "invalid number of the map parameters")),
        }
        // (`include` inside the block was spliced in by the parser.)
        values.push(compile(e, &e.args[0].value)?);
        let value = values.len() - 1;
        if e.name == "default" {
            if default.is_some() {
                return Err(err(e, "duplicate default map parameter"));
            }
            default = Some(value);
            continue;
        }
        if let Some(pattern) = e.name.strip_prefix('~') {
            let (pattern, caseless) = match pattern.strip_prefix('*') {
                Some(p) => (p, true),
                None => (pattern, false),
            };
            let re = RegexBuilder::new(pattern)
                .caseless(caseless)
                .build()
                .map_err(|x| err(e, x.to_string()))?;
            for n in re.capture_names().flatten() {
                variables::declare(n);
            }
            regexes.push((re, value));
            continue;
        }
        let key = e.name.strip_prefix('\\').unwrap_or(&e.name);
        // nginx reads the `hostnames` flag as it goes: sources before it are exact.
        let parsed = if hostnames {
            Source::wildcard(key)
                .ok_or_else(|| err(e, format!("invalid hostname or wildcard \"{key}\"")))?
        } else {
            Source::Exact(key.to_ascii_lowercase())
        };
        if !keys.add(parsed, value) {
            return Err(err(
                e,
                format!("conflicting parameter \"{}\"", key.to_ascii_lowercase()),
            ));
        }
    }
    // nginx builds the map's tables when the block ends: exact keys whole, wildcards by label.
    let mut key_lens: Vec<usize> = keys.exact.keys().map(String::len).collect();
    for e in d.block.as_deref().unwrap_or_default() {
        let k = e.name.strip_prefix('\\').unwrap_or(&e.name);
        if hostnames && (k.starts_with('*') || k.starts_with('.') || k.ends_with('*')) {
            key_lens.extend(k.split('.').map(str::len));
        }
    }
    // (stream's maps have its defaults: shoal has no stream `map_hash_*` directives.)
    let mut stream_sizes = Default::default();
    let sizes = if matches!(s, Scope::Stream(_)) {
        &mut stream_sizes
    } else {
        &mut super::loc_conf(s).hash_sizes
    };
    super::hash_sizes::check_map(sizes, &key_lens)?;
    let map = Map {
        source,
        hostnames,
        values,
        keys,
        regexes,
        default,
    };
    define(s, name, Arc::new(map));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(entries: &[(&str, usize)], hostnames: bool) -> Map {
        let mut keys = Keys::default();
        let mut regexes = Vec::new();
        for &(k, v) in entries {
            if let Some(p) = k.strip_prefix('~') {
                regexes.push((Regex::new(p).unwrap(), v));
            } else if hostnames {
                assert!(keys.add(Source::wildcard(k).unwrap(), v), "{k}");
            } else {
                assert!(keys.add(Source::Exact(k.to_ascii_lowercase()), v), "{k}");
            }
        }
        Map {
            source: Template::default(),
            hostnames,
            values: Vec::new(),
            keys,
            regexes,
            default: None,
        }
    }

    fn found(m: &Map, key: &str) -> Option<usize> {
        m.find(key).map(|(i, _)| i)
    }

    #[test]
    fn exact_sources_ignore_case() {
        let m = map(&[("Foo", 1), ("", 2), ("~^x", 3), ("~^$", 4)], false);
        assert_eq!(found(&m, "foo"), Some(1));
        assert_eq!(found(&m, "FOO"), Some(1));
        assert_eq!(found(&m, ""), Some(2));
        assert_eq!(found(&m, "xy"), Some(3));
        assert_eq!(found(&m, "Xy"), None, "regexes see the value as it is");
        // Without hostnames a wildcard is a plain word.
        let m = map(&[("*.example.com", 1), ("~^$", 4)], false);
        assert_eq!(found(&m, "a.example.com"), None);
        assert_eq!(found(&m, "*.example.com"), Some(1));
        assert_eq!(found(&m, ""), None, "a regex never sees an empty value");
    }

    #[test]
    fn hostnames_precedence() {
        // The cases checked against nginx 1.22.
        let m = map(
            &[
                ("example.com", 1),
                ("*.example.com", 2),
                (".b.example.com", 3),
                ("*.c.b.example.com", 4),
                ("www.*", 5),
                ("www.example.*", 6),
                ("~^www\\.ex", 7),
                (".org", 8),
            ],
            true,
        );
        for (name, want) in [
            ("example.com", Some(1)),
            ("EXAMPLE.com", Some(1)),
            ("a.example.com", Some(2)),
            ("b.example.com", Some(3)),
            ("x.b.example.com", Some(3)),
            ("c.b.example.com", Some(3)),
            ("y.c.b.example.com", Some(4)),
            ("www.example.com", Some(2)),
            ("www.example", Some(5)),
            ("www.exa.b", Some(5)),
            ("www", None),
            ("a.org", Some(8)),
            ("org", Some(8)),
            ("xorg", None),
            ("", None),
        ] {
            assert_eq!(found(&m, name), want, "{name}");
        }
    }

    #[test]
    fn wildcard_sources() {
        assert!(Source::wildcard("a.*.b").is_none());
        assert!(Source::wildcard("*").is_none());
        assert!(Source::wildcard("*.").is_none());
        assert!(Source::wildcard("**.a").is_none());
        assert!(Source::wildcard("a..b").is_none());
        assert!(matches!(Source::wildcard("."), Some(Source::Exact(k)) if k == "."));
        let mut keys = Keys::default();
        assert!(keys.add(Source::wildcard("example.com").unwrap(), 0));
        assert!(keys.add(Source::wildcard("*.example.com").unwrap(), 0));
        assert!(!keys.add(Source::wildcard(".example.com").unwrap(), 0));
        let mut keys = Keys::default();
        assert!(keys.add(Source::wildcard(".Example.com").unwrap(), 0));
        assert!(!keys.add(Source::wildcard("example.COM").unwrap(), 0));
        assert!(keys.add(Source::wildcard("WWW.ex.*").unwrap(), 0));
        assert!(!keys.add(Source::wildcard("www.ex.*").unwrap(), 0));
    }
}
