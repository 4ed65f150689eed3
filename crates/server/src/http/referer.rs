//! nginx's ngx_http_referer_module: `valid_referers` and `$invalid_referer` (empty when the
//! request's `Referer` is valid, `1` when not), with `referer_hash_max_size` and
//! `referer_hash_bucket_size` accepted (they size nginx's hash; nothing here).
//!
//! A `Referer` is judged as nginx judges it (checked against nginx 1.22): none sent is valid
//! with `none`; one shorter than `http://i.ru` or not starting with `http://` or `https://`
//! (any case) is valid with `blocked`; otherwise its host (up to `/` or `:`, lowercased, at
//! most 256 bytes) is looked up among the names as nginx's combined hash does (exact, then the
//! longest `*.`/`.` wildcard, then the longest `.*` one); a name written with a path
//! (`example.com/galleries/`) then also needs the referer's path (from its first `/` after
//! the host, port skipped) to begin with that path, case-sensitively, and a mismatch is
//! invalid without looking further. Then `server_names` (the names of the request's server,
//! its regexes matched against the host), then the `~` regexes, caseless, against what
//! follows the scheme. Only the first `Referer` line counts.
//!
//! The variable is computed when a template uses it, in the location the template belongs to:
//! `if ($invalid_referer)` in a location sees that location's `valid_referers`.
//!
//! Unlike nginx: the server's names are matched after the names written, not in one hash with
//! them (the answer differs only for a referer host both match in different ways, where nginx
//! may refuse the configuration as conflicting); and `none` or `blocked` without a name is
//! refused line by line, where nginx looks at all the lines of a level together.

use std::sync::Arc;

use shoal_conf::{Directive, Error};
use shoal_pcre::{Regex, RegexBuilder};

use crate::conf::{err, number_arg, Args, Builder, Command, Ctx, Scope};
use crate::http::loc_conf;
use crate::http::map::{Keys, Source};
use crate::variables::Vars;

pub static DIRECTIVES: &[Command] = &[
    Command::new(
        "valid_referers",
        Ctx::SERVER.or(Ctx::LOCATION),
        Args::ONE_OR_MORE,
        set_valid_referers,
    ),
    Command::new(
        "referer_hash_max_size",
        Ctx::SERVER.or(Ctx::LOCATION),
        Args::ONE,
        set_hash_size,
    ),
    Command::new(
        "referer_hash_bucket_size",
        Ctx::SERVER.or(Ctx::LOCATION),
        Args::ONE,
        set_hash_size,
    ),
];

/// One `valid_referers` line.
#[derive(Debug, Default)]
pub struct Referers {
    none: bool,
    blocked: bool,
    server_names: bool,
    /// Host names, with the path each was written with (`None`: any path).
    keys: Keys,
    uris: Vec<Option<String>>,
    regexes: Vec<Regex>,
}

/// The shortest referer nginx reads a host from.
const SHORTEST: usize = "http://i.ru".len();

/// The longest host nginx looks up.
const MAX_HOST: usize = 256;

impl Referers {
    /// Whether a request's `Referer` (`None`: none sent) is invalid, for a request to a
    /// server with `names` and `name_regexes`.
    pub fn invalid(
        &self,
        referer: Option<&[u8]>,
        names: &[String],
        name_regexes: &[Regex],
    ) -> bool {
        let Some(referer) = referer else {
            return !self.none;
        };
        let rest = (referer.len() >= SHORTEST)
            .then(|| strip_scheme(referer))
            .flatten();
        let Some(rest) = rest else {
            return !self.blocked;
        };
        let host_len = rest
            .iter()
            .position(|&c| c == b'/' || c == b':')
            .unwrap_or(rest.len());
        if host_len > MAX_HOST {
            return true;
        }
        let host = String::from_utf8_lossy(&rest[..host_len]).to_ascii_lowercase();
        if let Some(i) = self.keys.find(&host) {
            return match &self.uris[i] {
                None => false,
                Some(uri) => {
                    let after = &rest[host_len..];
                    let path = after
                        .iter()
                        .position(|&c| c == b'/')
                        .map_or(&[][..], |p| &after[p..]);
                    !path.starts_with(uri.as_bytes())
                }
            };
        }
        if self.server_names {
            if names.iter().any(|n| name_matches(n, &host)) {
                return false;
            }
            if name_regexes.iter().any(|re| re.is_match(&host)) {
                return false;
            }
        }
        if !self.regexes.is_empty() {
            let text = String::from_utf8_lossy(rest);
            if self.regexes.iter().any(|re| re.is_match(&text)) {
                return false;
            }
        }
        true
    }
}

/// What follows `http://` or `https://` (any case).
fn strip_scheme(r: &[u8]) -> Option<&[u8]> {
    for scheme in [&b"http://"[..], b"https://"] {
        if r.len() >= scheme.len() && r[..scheme.len()].eq_ignore_ascii_case(scheme) {
            return Some(&r[scheme.len()..]);
        }
    }
    None
}

/// Whether a `server_name` (exact, `*.x`, `.x`, `x.*`) matches a lowercase host.
fn name_matches(name: &str, host: &str) -> bool {
    let name = name.to_ascii_lowercase();
    if let Some(domain) = name.strip_prefix("*.") {
        return host.len() > domain.len() + 1
            && host.ends_with(domain)
            && host.as_bytes()[host.len() - domain.len() - 1] == b'.';
    }
    if let Some(domain) = name.strip_prefix('.') {
        return host == domain
            || (host.len() > domain.len()
                && host.ends_with(domain)
                && host.as_bytes()[host.len() - domain.len() - 1] == b'.');
    }
    if let Some(prefix) = name.strip_suffix(".*") {
        return host.len() > prefix.len() + 1
            && host.starts_with(prefix)
            && host.as_bytes()[prefix.len()] == b'.';
    }
    name == host
}

/// The referer module's location-level configuration.
#[derive(Clone, Debug, Default)]
pub struct RefererLoc {
    /// The `valid_referers` of the level that has one.
    pub referers: Option<Arc<Referers>>,
}

fn set_valid_referers(_: &mut Builder, d: &Directive, s: &mut Scope<'_>) -> Result<(), Error> {
    let lc = loc_conf(s);
    // nginx adds the lines of a level together.
    let mut r = lc
        .referer
        .referers
        .take()
        .map(|own| Arc::try_unwrap(own).expect("a level's own lines: merged only later"))
        .unwrap_or_default();
    for a in &d.args {
        let v = a.value.as_str();
        match v {
            "none" => r.none = true,
            "blocked" => r.blocked = true,
            "server_names" => r.server_names = true,
            _ => {
                if let Some(pattern) = v.strip_prefix('~') {
                    let re = RegexBuilder::new(pattern)
                        .caseless(true)
                        .build()
                        .map_err(|e| err(d, e.to_string()))?;
                    r.regexes.push(re);
                    continue;
                }
                let (name, uri) = match v.find('/') {
                    Some(p) => (&v[..p], Some(v[p..].to_string())),
                    None => (v, None),
                };
                let source = Source::wildcard(name)
                    .ok_or_else(|| err(d, format!("invalid hostname or wildcard \"{name}\"")))?;
                r.uris.push(uri);
                if !r.keys.add(source, r.uris.len() - 1) {
                    return Err(err(
                        d,
                        format!("conflicting parameter \"{}\"", name.to_ascii_lowercase()),
                    ));
                }
            }
        }
    }
    // nginx checks this once the level is read (see the module's note).
    if (r.none || r.blocked) && r.keys.is_empty() && !r.server_names {
        return Err(err(
            d,
            "the \"none\" or \"blocked\" referers are specified in the \"valid_referers\" \
             directive without any valid referer",
        ));
    }
    lc.referer.referers = Some(Arc::new(r));
    Ok(())
}

fn set_hash_size(_: &mut Builder, d: &Directive, _: &mut Scope<'_>) -> Result<(), Error> {
    number_arg(d, 0).map(|_| ())
}

/// The referer module's place in the module list: `$invalid_referer`.
pub struct Module;

impl crate::http::modules::HttpModule for Module {
    type Loc = RefererLoc;
    const DIRECTIVES: &'static [Command] = DIRECTIVES;
    const VARIABLES: &'static [&'static str] = &["invalid_referer"];

    fn merge(loc: &mut RefererLoc, parent: &RefererLoc) {
        crate::conf::merge(&mut loc.referers, &parent.referers);
    }

    fn variable(
        loc: Option<&RefererLoc>,
        _name: &str,
        vars: &Vars<'_>,
        out: &mut String,
    ) -> Option<bool> {
        // No `valid_referers`: every referer is valid.
        let Some(refs) = loc.and_then(|l| l.referers.as_deref()) else {
            return Some(true);
        };
        let Some(req) = vars.req else {
            return Some(true);
        };
        let (names, regexes) = match vars.srv {
            Some(srv) => (&srv.names[..], &srv.name_regexes[..]),
            None => (&[][..], &[][..]),
        };
        if refs.invalid(req.header("referer"), names, regexes) {
            out.push('1');
        }
        Some(true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refs(args: &[&str]) -> Referers {
        let mut r = Referers::default();
        for v in args {
            match *v {
                "none" => r.none = true,
                "blocked" => r.blocked = true,
                "server_names" => r.server_names = true,
                v if v.starts_with('~') => r
                    .regexes
                    .push(RegexBuilder::new(&v[1..]).caseless(true).build().unwrap()),
                v => {
                    let (name, uri) = match v.find('/') {
                        Some(p) => (&v[..p], Some(v[p..].to_string())),
                        None => (v, None),
                    };
                    r.uris.push(uri);
                    assert!(r
                        .keys
                        .add(Source::wildcard(name).unwrap(), r.uris.len() - 1));
                }
            }
        }
        r
    }

    fn names() -> (Vec<String>, Vec<Regex>) {
        (
            vec![
                "localhost".into(),
                "www.myhost.com".into(),
                "*.wild.com".into(),
            ],
            vec![Regex::new(r"^re\d+\.rx\.com$").unwrap()],
        )
    }

    /// The answers nginx 1.22 gave for each referer (`true`: invalid).
    #[test]
    fn referers_as_nginx_judges_them() {
        let all = refs(&[
            "none",
            "blocked",
            "server_names",
            "*.example.com",
            "example.*",
            "www.site.org/galleries/",
            r"~\.google\.",
        ]);
        let sn = refs(&["server_names"]);
        let (n, re) = names();
        let long = format!("http://{}.example.com/", "a".repeat(250));
        let fits = format!("http://{}.example.com/", "a".repeat(240));
        for (referer, in_all, in_sn) in [
            (None, false, true),
            (Some(""), false, true),
            (Some("http://a.example.com/x"), false, true),
            (Some("http://example.com/x"), false, true),
            (Some("http://example.org"), false, true),
            (Some("http://example.co.uk/"), false, true),
            (Some("https://www.site.org/galleries/x"), false, true),
            (Some("http://www.site.org/other"), true, true),
            (Some("http://www.site.org"), true, true),
            (Some("http://www.google.com/search"), false, true),
            (Some("ftp://x"), false, true),
            (Some("blah"), false, true),
            (Some("http://localhost/"), false, false),
            (Some("http://LOCALHOST/"), false, false),
            (Some("HTTP://localhost/"), false, false),
            (Some("http://localhost:8080/"), false, false),
            (Some("http://www.myhost.com"), false, false),
            (Some("http://a.wild.com/"), false, false),
            (Some("http://re12.rx.com/"), false, false),
            (Some("http://"), false, true),
            (Some("https://"), false, true),
            (Some("http://localhost."), true, true),
            (Some("http://i.ru"), true, true),
            (Some("http://localhost?x"), true, true),
            (Some("http://user@localhost/"), true, true),
            (Some(long.as_str()), true, true),
            (Some(fits.as_str()), false, true),
        ] {
            let r = referer.map(str::as_bytes);
            assert_eq!(all.invalid(r, &n, &re), in_all, "{referer:?} all");
            assert_eq!(sn.invalid(r, &n, &re), in_sn, "{referer:?} server_names");
        }
    }

    #[test]
    fn paths_and_regexes() {
        let uri = refs(&["site.org/a", "b.org/b/", "*.w.org/x/"]);
        let re = refs(&[r"~^x\.com/p", r"~Y\.COM"]);
        let mixed = refs(&["site.org/a", r"~site\.org/z"]);
        for (r, referer, invalid) in [
            (&uri, "http://site.org/abc", false),
            (&uri, "http://site.org/", true),
            (&uri, "http://site.org:80/a", false),
            (&uri, "http://b.org/b/c", false),
            (&uri, "http://b.org/b", true),
            (&uri, "http://q.w.org/x/1", false),
            (&uri, "http://w.org/x/1", true),
            (&uri, "http://Site.Org/a", false),
            (&uri, "http://site.org/A", true),
            (&re, "http://x.com/p", false),
            (&re, "http://X.COM/P", false),
            (&re, "http://y.com/", false),
            (&re, "http://a.x.com/p", true),
            (&re, "https://x.com/pq", false),
            (&re, "http://zx.com/p", true),
            (&re, "http://x.com:99/p", true),
            // A name's path that does not match ends the search: the regex is not tried.
            (&mixed, "http://site.org/z", true),
            (&mixed, "http://site.org:8/a", false),
            (&mixed, "http://site.org:8", true),
        ] {
            assert_eq!(
                r.invalid(Some(referer.as_bytes()), &[], &[]),
                invalid,
                "{referer}"
            );
        }
    }

    #[test]
    fn server_name_patterns() {
        for (name, host, m) in [
            ("*.a.com", "x.a.com", true),
            ("*.a.com", "a.com", false),
            (".a.com", "a.com", true),
            (".a.com", "x.y.a.com", true),
            (".a.com", "xa.com", false),
            ("www.a.*", "www.a.org", true),
            ("www.a.*", "www.a", false),
            ("A.com", "a.com", true),
        ] {
            assert_eq!(name_matches(name, host), m, "{name} {host}");
        }
    }
}
