//! nginx's not-modified filter: on a 200, `If-Unmodified-Since` and `If-Match` that fail give
//! 412; `If-Modified-Since` (per `if_modified_since`) and `If-None-Match` that hold give 304.
//! An upstream's answer is taken only when it is cacheable (nginx's
//! `r->disable_not_modified = !u->cacheable`); its body still goes to the cache.

use shoal_http::Request;

use super::directives::IfModifiedSince;
use super::modules::{Cx, HttpModule};
use super::reply::{Body, Reply};
use super::LocConf;

/// The not-modified filter's place in the module list (its directives are core ones:
/// `etag`, `if_modified_since`).
pub struct Module;

impl HttpModule for Module {
    type Loc = ();
    const DIRECTIVES: &'static [crate::conf::Command] = &[];

    fn merge(_: &mut (), _: &()) {}

    fn header_filter(_: &(), cx: &Cx<'_, '_, '_>, reply: &mut Box<Reply>) {
        let (r, lc) = (cx.r, cx.lc);
        let cacheable = matches!(&reply.body, Body::Upstream(u) if u.cacheable);
        if reply.status == 200 && (!reply.proxied || cacheable) {
            // nginx's not-modified filter takes an upstream's answer only when it is cacheable
            // (`r->disable_not_modified = !u->cacheable`); the body is still read into the cache.
            let verdict = if cacheable {
                super::proxy_cache::serve::precondition_of_upstream(r.req, lc, reply)
            } else {
                precondition(r.req, lc, reply)
            };
            if verdict.is_some() {
                if let Body::Upstream(u) = std::mem::replace(&mut reply.body, Body::Empty) {
                    u.finish_or_store();
                }
            }
            match verdict {
                Some(412) => **reply = super::reply::error_reply(412, lc),
                Some(_) => {
                    reply.status = 304;
                    reply.reason = None;
                    reply.content_type = None;
                    reply.body = Body::Empty;
                    reply.allow_ranges = false;
                    // `ngx_http_clear_accept_ranges`: a cached head's own goes too; and so
                    // does the coding of the body not sent (`gzip_static`'s, an upstream's).
                    reply.headers.retain(|(n, _)| *n != "Content-Encoding");
                    reply.extra.retain(|(n, _)| {
                        !n.eq_ignore_ascii_case("accept-ranges")
                            && !n.eq_ignore_ascii_case("content-encoding")
                    });
                }
                None => {}
            }
        }
    }
}

/// nginx's not-modified filter on a 200 (`ngx_http_not_modified_header_filter`), for files
/// and any other 200 alike: `If-Unmodified-Since` then `If-Match` fail with 412; then
/// `If-Modified-Since` (per `if_modified_since`; "modified" ends the test with the 200) and
/// `If-None-Match` give 304. `None`: the 200 stands.
pub fn precondition(req: &Request, lc: &LocConf, reply: &Reply) -> Option<u16> {
    // nginx's `last_modified_time`, -1 when the answer has none.
    let mtime = match (reply.last_modified, reply.mtime) {
        (Some(_), Some(t)) => t,
        _ => -1,
    };
    // nginx's reader: anything after the seconds is ignored; -1 is its "no date".
    let time = |v: &[u8]| shoal_http::date::parse_http_time(v).unwrap_or(-1);
    if let Some(v) = req.header("if-unmodified-since") {
        if mtime == -1 || time(v) < mtime {
            return Some(412);
        }
    }
    if let Some(v) = req.header("if-match") {
        if !etag_matches(v, reply.etag(), false) {
            return Some(412);
        }
    }
    let ims = req.header("if-modified-since");
    let inm = req.header("if-none-match");
    if ims.is_none() && inm.is_none() {
        return None;
    }
    if let Some(v) = ims {
        let modified = match lc.if_modified_since() {
            _ if mtime == -1 => true,
            IfModifiedSince::Off => true,
            mode => {
                let t = time(v);
                t != mtime && (mode == IfModifiedSince::Exact || t < mtime)
            }
        };
        if modified {
            return None;
        }
    }
    if let Some(v) = inm {
        if !etag_matches(v, reply.etag(), true) {
            return None;
        }
    }
    Some(304)
}

/// `ngx_http_test_if_match`: `*` matches anything (even without an ETag); otherwise one of the
/// listed tags must equal ours byte for byte, ignoring `W/` on both sides when `weak`.
fn etag_matches(list: &[u8], etag: Option<&str>, weak: bool) -> bool {
    if list == b"*" {
        return true;
    }
    let Some(etag) = etag else {
        return false;
    };
    let mut etag = etag.as_bytes();
    if weak && etag.len() > 2 && etag.starts_with(b"W/") {
        etag = &etag[2..];
    }
    let mut p = 0;
    while p < list.len() {
        if weak && list.len() - p > 2 && list[p..].starts_with(b"W/") {
            p += 2;
        }
        if etag.len() > list.len() - p {
            return false;
        }
        if list[p..].starts_with(etag) {
            let mut q = p + etag.len();
            while q < list.len() && matches!(list[q], b' ' | b'\t') {
                q += 1;
            }
            if q == list.len() || list[q] == b',' {
                return true;
            }
        }
        while p < list.len() && list[p] != b',' {
            p += 1;
        }
        while p < list.len() && matches!(list[p], b' ' | b'\t' | b',') {
            p += 1;
        }
    }
    false
}
