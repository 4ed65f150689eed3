//! `location`: the modifiers (`=`, prefix, `^~`, `~`, `~*`, `@name`), the nesting rules, and
//! the search in nginx's order: an exact match ends the search; else the longest prefix is
//! remembered (and its nested locations searched); unless it is `^~`, the regexes are tried in
//! the order written, first match wins; else the longest prefix is used.

use shoal_conf::{Directive, Error};
use shoal_pcre::{Regex, RegexBuilder};

use super::LocConf;
use crate::conf::{err, Builder, Ctx, Scope};

/// How a location matches.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Match {
    /// `location = /uri`
    Exact,
    /// `location /uri`
    Prefix,
    /// `location ^~ /uri`: a prefix that, when longest, stops the regex search.
    NoRegex,
    /// `location ~ re` / `location ~* re`
    Regex,
    /// `location @name`: only for internal redirects.
    Named,
    /// The pseudo-location of an `if` block (never found by a URI).
    If,
}

/// One `location` block.
#[derive(Clone, Debug)]
pub struct LocationConf {
    pub kind: Match,
    /// The URI, prefix, regex source or `@name`, as written.
    pub name: String,
    pub regex: Option<Regex>,
    pub loc: LocConf,
    pub nested: Vec<LocationConf>,
    /// `internal`: only internal redirects may reach it.
    pub internal: bool,
    /// Its rewrite-module directives, in order.
    pub rewrite: Vec<super::rewrite::Code>,
    /// Its `if` blocks (indexed by the `If` codes of `rewrite`).
    pub if_blocks: Vec<LocationConf>,
}

impl LocationConf {
    pub(super) fn finish(&mut self, parent: &LocConf) {
        self.loc.merge(parent);
        super::limit_except::finish(&mut self.loc);
        for n in &mut self.nested {
            n.finish(&self.loc);
        }
        for b in &mut self.if_blocks {
            b.finish(&self.loc);
            // An `if` block answers with its location's handler (nginx: a nameless location
            // takes the proxy handler of the one it is in).
            super::Content::inherit(&mut b.loc, &self.loc);
        }
    }

    /// Calls `f` with this location's configuration and every one below it (nested
    /// locations, `if` blocks).
    pub(super) fn each_loc(
        &self,
        f: &mut dyn FnMut(&LocConf) -> Result<(), shoal_conf::Error>,
    ) -> Result<(), shoal_conf::Error> {
        f(&self.loc)?;
        for n in self.nested.iter().chain(self.if_blocks.iter()) {
            n.each_loc(f)?;
        }
        Ok(())
    }
}

pub(super) fn set_location(b: &mut Builder, d: &Directive, s: &mut Scope<'_>) -> Result<(), Error> {
    let (kind, name, caseless) = match d.args.len() {
        1 => {
            let v = d.args[0].value.as_str();
            if let Some(rest) = v.strip_prefix('=') {
                (Match::Exact, rest, false)
            } else if let Some(rest) = v.strip_prefix("^~") {
                (Match::NoRegex, rest, false)
            } else if let Some(rest) = v.strip_prefix("~*") {
                (Match::Regex, rest, true)
            } else if let Some(rest) = v.strip_prefix('~') {
                (Match::Regex, rest, false)
            } else if v.starts_with('@') {
                (Match::Named, v, false)
            } else {
                (Match::Prefix, v, false)
            }
        }
        _ => {
            let name = d.args[1].value.as_str();
            match d.args[0].value.as_str() {
                "=" => (Match::Exact, name, false),
                "^~" => (Match::NoRegex, name, false),
                "~" => (Match::Regex, name, false),
                "~*" => (Match::Regex, name, true),
                m => return Err(err(d, format!("invalid location modifier \"{m}\""))),
            }
        }
    };
    let regex = if kind == Match::Regex {
        let re = RegexBuilder::new(name)
            .caseless(caseless)
            .build()
            .map_err(|e| err(d, e.to_string()))?;
        // Named captures are variables, as with nginx's PCRE.
        for n in re.capture_names().flatten() {
            crate::variables::declare(n);
        }
        Some(re)
    } else {
        None
    };
    let mut loc = LocationConf {
        kind,
        name: name.to_string(),
        regex,
        loc: LocConf::default(),
        nested: Vec::new(),
        internal: false,
        rewrite: Vec::new(),
        if_blocks: Vec::new(),
    };
    let siblings = match s {
        Scope::Server(srv) => &mut srv.locations,
        Scope::Location(parent) => {
            let pname = &parent.name;
            if parent.kind == Match::Exact {
                return Err(err(
                    d,
                    format!("location \"{name}\" cannot be inside the exact location \"{pname}\""),
                ));
            }
            if parent.kind == Match::Named {
                return Err(err(
                    d,
                    format!("location \"{name}\" cannot be inside the named location \"{pname}\""),
                ));
            }
            if kind == Match::Named {
                return Err(err(
                    d,
                    format!("named location \"{name}\" can be on the server level only"),
                ));
            }
            if kind != Match::Regex
                && parent.kind != Match::Regex
                && !name.starts_with(pname.as_str())
            {
                return Err(err(
                    d,
                    format!("location \"{name}\" is outside location \"{pname}\""),
                ));
            }
            &mut parent.nested
        }
        _ => unreachable!("location is allowed in server and location only"),
    };
    let same_key = |l: &LocationConf| {
        l.name == name
            && matches!(
                (l.kind, kind),
                (Match::Exact, Match::Exact)
                    | (Match::Named, Match::Named)
                    | (
                        Match::Prefix | Match::NoRegex,
                        Match::Prefix | Match::NoRegex
                    )
            )
    };
    if siblings.iter().any(same_key) {
        return Err(err(d, format!("duplicate location \"{name}\"")));
    }
    let body = d.block.as_deref().unwrap_or_default();
    b.walk(body, Ctx::LOCATION, &mut Scope::Location(&mut loc))?;
    if let Some(root) = &mut loc.loc.root {
        if root.alias {
            root.alias_len = match loc.kind {
                Match::Regex => None,
                _ => Some(loc.name.len()),
            };
        }
    }
    if loc.kind == Match::Regex
        && loc
            .loc
            .root
            .as_ref()
            .is_some_and(|r| r.alias && r.template.is_none())
    {
        // nginx: an alias in a regex location is the whole path; without a capture it would
        // send every URI to one file. Allowed, as nginx allows it.
    }
    siblings.push(loc);
    Ok(())
}

enum Found<'a> {
    /// An exact match or a regex match: the search is over.
    Final(&'a LocationConf),
    /// The longest prefix so far.
    Prefix(&'a LocationConf),
    /// The URI is this location's name without its final slash: a 301 to the name.
    AutoRedirect(&'a LocationConf),
    None,
}

impl LocationConf {
    /// nginx's `auto_redirect`: a location whose name ends with a slash and whose handler is
    /// `proxy_pass` answers its name without the slash with a redirect to the name.
    fn redirects_from(&self, uri: &str) -> bool {
        self.name.len() == uri.len() + 1
            && matches!(self.kind, Match::Exact | Match::Prefix | Match::NoRegex)
            && self.name.ends_with('/')
            && self.name.starts_with(uri)
            && self.loc.content.is_upstream()
    }
}

fn search<'a>(locs: &'a [LocationConf], uri: &str) -> Found<'a> {
    if let Some(exact) = locs
        .iter()
        .find(|l| l.kind == Match::Exact && l.name == uri)
    {
        return Found::Final(exact);
    }
    let mut found = Found::None;
    let mut noregex = false;
    let longest = locs
        .iter()
        .filter(|l| {
            matches!(l.kind, Match::Prefix | Match::NoRegex) && uri.starts_with(l.name.as_str())
        })
        .max_by_key(|l| l.name.len());
    // nginx's static tree ends the search (no nested, no regex locations) at such a location
    // when no prefix is the URI itself.
    if longest.is_none_or(|p| p.name.len() < uri.len()) {
        if let Some(l) = locs.iter().find(|l| l.redirects_from(uri)) {
            return Found::AutoRedirect(l);
        }
    }
    if let Some(p) = longest {
        noregex = p.kind == Match::NoRegex;
        found = Found::Prefix(p);
        match search(&p.nested, uri) {
            Found::Final(l) => return Found::Final(l),
            Found::AutoRedirect(l) => return Found::AutoRedirect(l),
            Found::Prefix(l) => found = Found::Prefix(l),
            Found::None => {}
        }
    }
    if !noregex {
        for r in locs.iter().filter(|l| l.kind == Match::Regex) {
            if r.regex.as_ref().is_some_and(|re| re.is_match(uri)) {
                return match search(&r.nested, uri) {
                    Found::Final(l) | Found::Prefix(l) => Found::Final(l),
                    Found::AutoRedirect(l) => Found::AutoRedirect(l),
                    Found::None => Found::Final(r),
                };
            }
        }
    }
    found
}

/// The location for a URI among a server's locations, in nginx's order; `None` means the
/// server level itself applies.
pub fn find<'a>(locs: &'a [LocationConf], uri: &str) -> Option<&'a LocationConf> {
    find_or_redirect(locs, uri).0
}

/// As [`find`], and whether the request is answered with nginx's `auto_redirect`: a 301 to
/// the location's name (the URI with a slash added), the location's configuration applying.
pub fn find_or_redirect<'a>(
    locs: &'a [LocationConf],
    uri: &str,
) -> (Option<&'a LocationConf>, bool) {
    match search(locs, uri) {
        Found::Final(l) | Found::Prefix(l) => (Some(l), false),
        Found::AutoRedirect(l) => (Some(l), true),
        Found::None => (None, false),
    }
}

/// A named location (`@name`), for internal redirects.
pub fn find_named<'a>(locs: &'a [LocationConf], name: &str) -> Option<&'a LocationConf> {
    locs.iter()
        .find(|l| l.kind == Match::Named && l.name == name)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn loc(kind: Match, name: &str, nested: Vec<LocationConf>) -> LocationConf {
        LocationConf {
            kind,
            name: name.into(),
            regex: (kind == Match::Regex).then(|| Regex::new(name).unwrap()),
            loc: LocConf::default(),
            nested,
            internal: false,
            rewrite: Vec::new(),
            if_blocks: Vec::new(),
        }
    }

    fn found(locs: &[LocationConf], uri: &str) -> String {
        find(locs, uri).map(|l| l.name.clone()).unwrap_or_default()
    }

    #[test]
    fn nginx_order() {
        // The example from nginx's documentation of `location`.
        let locs = vec![
            loc(Match::Exact, "/", vec![]),
            loc(Match::Prefix, "/", vec![]),
            loc(Match::Prefix, "/documents/", vec![]),
            loc(Match::NoRegex, "/images/", vec![]),
            loc(Match::Regex, r"\.(gif|jpg|jpeg)$", vec![]),
        ];
        assert_eq!(found(&locs, "/"), "/");
        assert_eq!(find(&locs, "/").unwrap().kind, Match::Exact);
        assert_eq!(found(&locs, "/index.html"), "/");
        assert_eq!(find(&locs, "/index.html").unwrap().kind, Match::Prefix);
        assert_eq!(found(&locs, "/documents/document.html"), "/documents/");
        assert_eq!(found(&locs, "/images/1.gif"), "/images/");
        assert_eq!(found(&locs, "/documents/1.jpg"), r"\.(gif|jpg|jpeg)$");
    }

    #[test]
    fn nested_prefix_then_regex() {
        let locs = vec![
            loc(
                Match::Prefix,
                "/a/",
                vec![
                    loc(Match::Prefix, "/a/b/", vec![]),
                    loc(Match::Regex, r"\.php$", vec![]),
                ],
            ),
            loc(Match::Regex, r"\.txt$", vec![]),
        ];
        assert_eq!(found(&locs, "/a/b/c"), "/a/b/");
        assert_eq!(found(&locs, "/a/x.php"), r"\.php$");
        assert_eq!(found(&locs, "/a/b/x.txt"), r"\.txt$");
        assert_eq!(found(&locs, "/z"), "");
    }
}
