//! `proxy_redirect`: an upstream's `Location` and `Refresh` rewritten on their way to the
//! client.

use std::cell::RefCell;
use std::rc::Rc;

use super::{ProxyPass, Redirect, RedirectFrom, Target};
use crate::http::request::Req;
use crate::http::upstream::record::Record;
use crate::http::LocConf;
use crate::variables::Vars;

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
    let rec = record.borrow();
    let uri = shoal_http::lossy(r.req.path()).into_owned();
    let mut vars: Vars<'_> = r.vars(&uri, lc, &[]);
    vars.upstream = Some(&rec);
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
                if let Some(caps) = crate::variables::capture(re, value) {
                    let v = Vars {
                        captures: &caps.numbered,
                        ..vars
                    };
                    return Some(v.eval(&rule.to));
                }
            }
        }
    }
    None
}
