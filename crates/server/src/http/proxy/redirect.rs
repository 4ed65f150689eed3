//! `proxy_redirect`: an upstream's `Location` and `Refresh` rewritten on their way to the
//! client; and what every rewriting of an upstream header value shares (the variables the
//! rules see, a regex rule's captures), which `proxy_cookie_*` ([`super::cookie`]) use too.

use std::cell::RefCell;
use std::rc::Rc;

use super::{ProxyPass, Redirect, RedirectFrom, Target};
use crate::http::request::Req;
use crate::http::upstream::record::Record;
use crate::http::LocConf;
use crate::variables::{Template, Vars};

/// The proxy's [`crate::http::upstream::answer::Rewrite`] for one answer.
pub(crate) struct Rewriter<'a, 'r, 's> {
    pub pass: &'a ProxyPass,
    pub r: &'a Req<'r, 's>,
    pub lc: &'a LocConf,
    pub record: &'a Rc<RefCell<Record>>,
}

impl crate::http::upstream::answer::Rewrite for Rewriter<'_, '_, '_> {
    fn url(&self, value: &str) -> Option<String> {
        redirect(self.pass, self.r, self.lc, self.record, value)
    }

    fn set_cookie(&self, value: &str) -> Option<String> {
        let cookie = &self.lc.proxy.cookie;
        if !cookie.rewrites() {
            return None;
        }
        with_vars(self.r, self.lc, self.record, |vars| {
            super::cookie::rewrite(cookie, value, vars)
        })
    }
}

/// Runs `f` with the variables a rule sees: the request's, and `$upstream_*` of this exchange.
pub(crate) fn with_vars<T>(
    r: &Req<'_, '_>,
    lc: &LocConf,
    record: &Rc<RefCell<Record>>,
    f: impl FnOnce(&Vars<'_>) -> T,
) -> T {
    let rec = record.borrow();
    let uri = shoal_http::lossy(r.req.path()).into_owned();
    let mut vars: Vars<'_> = r.vars(&uri, lc, &[]);
    vars.upstream = Some(&rec);
    f(&vars)
}

/// A regex rule: `to` evaluated with the captures of `re` in `value` (numbered, and named
/// ones as variables), when it matches.
pub(crate) fn by_regex(
    re: &shoal_pcre::Regex,
    to: &Template,
    value: &str,
    vars: &Vars<'_>,
) -> Option<String> {
    let caps = crate::variables::capture(re, value)?;
    if caps.named.is_empty() {
        return Some(
            Vars {
                captures: &caps.numbered,
                ..*vars
            }
            .eval(to),
        );
    }
    let mut user = vars.user.cloned().unwrap_or_default();
    user.extend(caps.named);
    Some(
        Vars {
            captures: &caps.numbered,
            user: Some(&user),
            ..*vars
        }
        .eval(to),
    )
}

/// `proxy_redirect` applied to a `Location` (or `Refresh` URL) value: the rewritten value when
/// a rule matched.
pub(crate) fn redirect(
    pass: &ProxyPass,
    r: &Req<'_, '_>,
    lc: &LocConf,
    record: &Rc<RefCell<Record>>,
    value: &str,
) -> Option<String> {
    let default_rule = || -> Option<(String, String)> {
        if matches!(pass.target, Target::Dynamic { .. }) {
            return None;
        }
        Some(match &pass.uri {
            Some(_) => (pass.url.clone(), pass.location.clone()),
            None => (format!("{}/", pass.url), "/".to_string()),
        })
    };
    let rules = match lc.proxy.redirect() {
        Redirect::Off => return None,
        Redirect::Default => {
            let (from, to) = default_rule()?;
            return value
                .strip_prefix(from.as_str())
                .map(|rest| format!("{to}{rest}"));
        }
        Redirect::Rules(rules) => rules,
    };
    with_vars(r, lc, record, |vars| {
        for rule in rules {
            match &rule.from {
                RedirectFrom::Default => {
                    if let Some((from, to)) = default_rule() {
                        if let Some(rest) = value.strip_prefix(from.as_str()) {
                            return Some(format!("{to}{rest}"));
                        }
                    }
                }
                RedirectFrom::Prefix(t) => {
                    let from = vars.eval(t);
                    if let Some(rest) = value.strip_prefix(from.as_str()) {
                        return Some(format!("{}{rest}", vars.eval(&rule.to)));
                    }
                }
                RedirectFrom::Regex(re) => {
                    if let Some(v) = by_regex(re, &rule.to, value, vars) {
                        return Some(v);
                    }
                }
            }
        }
        None
    })
}
