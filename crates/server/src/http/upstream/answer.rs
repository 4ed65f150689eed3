//! An upstream's answer head turned into the client's, one way for an answer fresh from the
//! upstream (a MISS, or a request with no cache) and one stored (a HIT, STALE, REVALIDATED):
//! hop-by-hop lines and nginx's hidden ones left out (`proxy_hide_header`,
//! `proxy_pass_header`), `Location` and `Refresh` through `proxy_redirect`, `Set-Cookie`
//! through `proxy_cookie_*`, `Content-Type`,
//! `Accept-Ranges` and, for a stored answer, `ETag` and `Last-Modified` where the filters look
//! for them.
//!
//! What a line is ([`Kind`]) is decided by name as the head is read: each time for a fresh
//! answer, once per stored object (its hits reuse it).

use super::header::UpstreamHeader;
use super::UpstreamLoc;
use crate::http::reply::{LocationAt, Reply};
use crate::http::request::Req;
use crate::http::LocConf;

/// A protocol's rewriting of the header values it has rules for (the proxy's: `proxy_redirect`
/// on `Location` and `Refresh` URLs, `proxy_cookie_*` on `Set-Cookie`): the new value when a
/// rule applies.
pub trait Rewrite {
    /// A `Location` value, or the URL of a `Refresh`.
    fn url(&self, value: &str) -> Option<String>;
    /// A `Set-Cookie` value.
    fn set_cookie(&self, value: &str) -> Option<String>;
}

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
    SetCookie,
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
            UpstreamHeader::SetCookie => Kind::SetCookie,
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
            UpstreamHeader::SetCookie => return Kind::SetCookie,
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
    conf: &UpstreamLoc,
    rewrite: Option<&dyn Rewrite>,
    r: &Req<'_, '_>,
) -> Passed {
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
                reply
                    .raw_extra
                    .push((reply.extra.len(), text(name), value.to_vec()));
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
            // Through `proxy_redirect`, and made absolute only when a rule rewrote it
            // (nginx's header filter completes a relative Location it set itself, not one it
            // passes on as it came).
            Kind::Location => match rewrite.and_then(|f| f.url(value)) {
                Some(v) if v.starts_with('/') && lc.absolute_redirect() => {
                    reply.redirect_to_path(lc, &v, r.host, r.info, r.srv);
                }
                Some(v) => {
                    reply.location = Some(v);
                    reply.location_at = LocationAt::Extra(reply.extra.len());
                }
                None => {
                    reply.location = Some(value.to_string());
                    reply.location_at = LocationAt::Extra(reply.extra.len());
                }
            },
            Kind::Refresh => {
                let at = value.to_ascii_lowercase().find("url=");
                let v = match at {
                    Some(i) => {
                        let (a, b) = value.split_at(i + 4);
                        match rewrite.and_then(|f| f.url(b)) {
                            Some(new) => format!("{a}{new}"),
                            None => value.to_string(),
                        }
                    }
                    None => value.to_string(),
                };
                reply.extra.push((text(name).into(), v.into()));
            }
            Kind::SetCookie => {
                let v = match rewrite.and_then(|f| f.set_cookie(value)) {
                    Some(new) => new,
                    None => value.to_string(),
                };
                reply.extra.push((text(name).into(), v.into()));
            }
            // A cached answer's validators are the answer's own for the not-modified and
            // range filters, and stay among its headers where they came.
            Kind::LastModified(Some((secs, text))) if stored => {
                reply.mtime = Some(secs);
                reply.last_modified = Some(text);
                reply.last_modified_listed = Some(reply.extra.len());
            }
            _ => {
                // An upstream's `Server` or `Date` that is passed replaces shoal's own.
                if name.eq_ignore_ascii_case(b"server") {
                    reply.upstream_server = true;
                } else if name.eq_ignore_ascii_case(b"date") {
                    reply.upstream_date = true;
                }
                reply
                    .extra
                    .push((text(name).into(), value.to_string().into()))
            }
        }
    }
    passed
}

/// The reply to the client from an answer read fresh from the upstream: the status line and
/// the head passed on as [`pass_head`] passes it (`hidden`: whether a line is one of the
/// protocol's hidden ones), the body streamed.
pub fn reply_of(
    mut answer: super::run::Answer,
    lc: &LocConf,
    conf: &UpstreamLoc,
    hidden: impl Fn(&[u8], UpstreamHeader) -> bool,
    rewrite: Option<&dyn Rewrite>,
    r: &Req<'_, '_>,
    record: &std::rc::Rc<std::cell::RefCell<super::record::Record>>,
) -> Box<Reply> {
    let mut reply = Reply::boxed(answer.status);
    reply.proxied = true;
    reply.upstream_status = true;
    reply.reason = answer.reason.take();
    let lines = answer.head.headers().map(|(name, value)| {
        let known = UpstreamHeader::of(name);
        Line {
            name,
            value,
            kind: Kind::fresh(known),
            hidden: hidden(name, known),
        }
    });
    let passed = pass_head(&mut reply, lines, false, lc, conf, rewrite, r);
    // `*_force_ranges`: ranges of any answer, whatever it said (nginx sets
    // `r->allow_ranges` and, the answer being streamed, `r->single_range`).
    reply.allow_ranges = conf.force_ranges() && answer.status == 200;
    record.borrow_mut().head = Some(answer.head);
    let mut body = answer.body;
    body.buffering = passed.buffering.unwrap_or(conf.buffering());
    // `*_limit_rate`: the pace of reading a buffered answer (nginx's event pipe).
    if body.buffering && conf.limit_rate() > 0 {
        let start = crate::http::limit_rate::unix_secs();
        let pacer = crate::http::limit_rate::Pacer::new(conf.limit_rate(), 0, start);
        body.limit = Some(crate::http::limit_rate::Pacing::new(pacer));
    }
    reply.body = if answer.upgrade {
        crate::http::reply::Body::Tunnel(body)
    } else {
        crate::http::reply::Body::Upstream(body)
    };
    reply
}
