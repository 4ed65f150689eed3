//! An upstream's answer head turned into the client's, one way for an answer fresh from the
//! upstream (a MISS, or a request with no cache) and one stored (a HIT, STALE, REVALIDATED):
//! hop-by-hop lines and nginx's hidden ones left out (`proxy_hide_header`,
//! `proxy_pass_header`), `Location` and `Refresh` through `proxy_redirect`, `Content-Type`,
//! `Accept-Ranges` and, for a stored answer, `ETag` and `Last-Modified` where the filters look
//! for them.
//!
//! What a line is ([`Kind`]) is decided by name as the head is read: each time for a fresh
//! answer, once per stored object (its hits reuse it).

use std::cell::RefCell;
use std::rc::Rc;

use super::handler::Record;
use super::{ProxyPass, Redirect, RedirectFrom, Target, UpstreamHeader};
use crate::http::reply::Reply;
use crate::http::request::Req;
use crate::http::LocConf;
use crate::variables::Vars;

/// What one line of an upstream's head is to the client's answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// Framing and hop-by-hop lines (`Connection`, `Keep-Alive`, `Transfer-Encoding`,
    /// `Content-Length`; a stored `Upgrade`): never passed on.
    Dropped,
    /// `X-Accel-Buffering`: turns `proxy_buffering` on or off for this answer (hidden).
    Buffering,
    ContentType,
    AcceptRanges,
    Location,
    Refresh,
    /// A stored answer's `ETag` (the not-modified and range filters read it).
    ETag,
    /// A stored answer's `Last-Modified` on a 200 or 206 whose date parses: the time it tells
    /// and its text as nginx writes it; otherwise it is passed as it came.
    LastModified(Option<(i64, [u8; shoal_http::date::DATE_LEN])>),
    Other,
}

impl Kind {
    /// A fresh answer's line, by its name (`ETag` and `Last-Modified` pass as they came).
    pub fn fresh(known: UpstreamHeader) -> Kind {
        match known {
            UpstreamHeader::HopByHop => Kind::Dropped,
            UpstreamHeader::XAccelBuffering => Kind::Buffering,
            UpstreamHeader::ContentType => Kind::ContentType,
            UpstreamHeader::AcceptRanges => Kind::AcceptRanges,
            UpstreamHeader::Location => Kind::Location,
            UpstreamHeader::Refresh => Kind::Refresh,
            UpstreamHeader::Hidden | UpstreamHeader::Other => Kind::Other,
        }
    }

    /// A stored answer's line of status `status`, decided once when the object is read.
    pub fn stored(known: UpstreamHeader, name: &str, value: &str, status: u16) -> Kind {
        let is = |n: &str| name.eq_ignore_ascii_case(n);
        match known {
            UpstreamHeader::HopByHop => return Kind::Dropped,
            UpstreamHeader::AcceptRanges => return Kind::AcceptRanges,
            UpstreamHeader::ContentType => return Kind::ContentType,
            UpstreamHeader::Location => return Kind::Location,
            UpstreamHeader::Refresh => return Kind::Refresh,
            _ => {}
        }
        if is("upgrade") {
            Kind::Dropped
        } else if is("etag") {
            Kind::ETag
        } else if is("last-modified") {
            // The answer's time for the not-modified filter on a 200 or 206; any other answer
            // passes the upstream's line as it came (nginx keeps the header whatever the
            // status).
            let t = matches!(status, 200 | 206)
                .then(|| shoal_http::date::parse(value.as_bytes()))
                .flatten();
            Kind::LastModified(t.map(|t| {
                let secs = t
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(0, |d| d.as_secs() as i64);
                (secs, shoal_http::date::format(t))
            }))
        } else {
            Kind::Other
        }
    }
}

/// One line of a head: its name, value, kind, and whether nginx hides it by default.
pub struct Line<'a> {
    pub name: &'a [u8],
    pub value: &'a [u8],
    pub kind: Kind,
    pub hidden: bool,
}

/// What the head said beyond its lines.
#[derive(Default)]
pub struct Passed {
    /// `X-Accel-Buffering: yes|no` (unless `proxy_ignore_headers` names it).
    pub buffering: Option<bool>,
    /// A stored answer said `Accept-Ranges` (its ranges are then the range filter's).
    pub allows_ranges: bool,
}

/// Puts a head's lines on `reply`, as nginx's upstream module passes them to the client;
/// `stored`: the head is a cached object's (`Accept-Ranges` allows ranges instead of being
/// passed, `ETag` and `Last-Modified` go where the filters read them).
pub fn pass_head<'a>(
    reply: &mut Reply,
    lines: impl Iterator<Item = Line<'a>>,
    stored: bool,
    lc: &LocConf,
    pass: &ProxyPass,
    r: &Req<'_, '_>,
    record: &Rc<RefCell<Record>>,
) -> Passed {
    let conf = &lc.proxy;
    let mut passed = Passed::default();
    for line in lines {
        let Line {
            name,
            value,
            kind,
            hidden,
        } = line;
        // `X-Accel-Buffering: yes|no` turns `proxy_buffering` on or off for this answer,
        // unless `proxy_ignore_headers` names it (nginx's `change_buffering`).
        if kind == Kind::Buffering && !conf.ignores("X-Accel-Buffering") {
            if value.eq_ignore_ascii_case(b"no") {
                passed.buffering = Some(false);
            } else if value.eq_ignore_ascii_case(b"yes") {
                passed.buffering = Some(true);
            }
        }
        // `X-Accel-Charset`: the charset the charset filter sends, whatever the location
        // says, unless `proxy_ignore_headers` names it (nginx's `override_charset`).
        if hidden
            && name.eq_ignore_ascii_case(b"x-accel-charset")
            && !conf.ignores("X-Accel-Charset")
        {
            reply.override_charset = Some(shoal_http::lossy(value).into_owned());
        }
        if kind == Kind::Dropped || !conf.passes_known(name, hidden) {
            continue;
        }
        // The name as text only where it is kept (a known header's value has its field).
        let text = |name: &[u8]| shoal_http::lossy(name).into_owned();
        let value = match std::str::from_utf8(value) {
            Ok(v) => v,
            Err(_) => {
                // Not text: passed on as the bytes it is.
                reply.raw_extra.push((text(name), value.to_vec()));
                continue;
            }
        };
        match kind {
            Kind::Dropped => {}
            Kind::ContentType => reply.content_type = Some(value.to_string()),
            // A stored answer's allows ranges; the range filter says so itself.
            Kind::AcceptRanges if stored => passed.allows_ranges = true,
            // `proxy_force_ranges`: the range filter answers for ranges and says so itself
            // (`ngx_http_upstream_copy_allow_ranges` copies nothing).
            Kind::AcceptRanges if conf.force_ranges() => {}
            Kind::Location => {
                reply.location = Some(location(pass, r, lc, record, value.to_string()));
            }
            Kind::Refresh => {
                let at = value.to_ascii_lowercase().find("url=");
                let v = match at {
                    Some(i) => {
                        let (a, b) = value.split_at(i + 4);
                        match redirect(pass, r, lc, record, b) {
                            Some(new) => format!("{a}{new}"),
                            None => value.to_string(),
                        }
                    }
                    None => value.to_string(),
                };
                reply.extra.push((text(name).into(), v.into()));
            }
            Kind::ETag if stored => reply.headers.push(("ETag", value.to_string().into())),
            Kind::LastModified(Some((secs, text))) if stored => {
                reply.mtime = Some(secs);
                reply.last_modified = Some(text);
            }
            _ => reply
                .extra
                .push((text(name).into(), value.to_string().into())),
        }
    }
    passed
}

/// An upstream's `Location` as passed on: through `proxy_redirect`, and made absolute only when
/// a rule rewrote it (nginx's header filter completes a relative Location it set itself, not
/// one it passes on as it came).
pub(crate) fn location(
    pass: &ProxyPass,
    r: &Req<'_, '_>,
    lc: &LocConf,
    record: &Rc<RefCell<Record>>,
    value: String,
) -> String {
    match redirect(pass, r, lc, record, &value) {
        Some(v) if v.starts_with('/') => {
            crate::http::static_files::absolute_location(lc, &v, r.host, r.info, r.srv)
        }
        Some(v) => v,
        None => value,
    }
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
