//! nginx's range filter on an upstream answer the cache may take (a MISS, EXPIRED or BYPASS
//! whose headers leave it cacheable, stored or not): the answer is streamed to the client as
//! it is read, so nginx cuts at most one range from it (`r->single_range`, set by
//! `ngx_http_upstream_copy_allow_ranges`).
//!
//! - One satisfiable range: 206 with `Content-Range`, the body that window of the stream; the
//!   fill still gets every byte, so the object stored is the whole answer.
//! - Several: the whole 200 with `Accept-Ranges`, as for a `Range` it ignores (a HIT of the
//!   stored object answers them `multipart/byteranges`).
//! - None satisfiable: 416, and the answer is not stored (nginx finalizes the request before
//!   it reads the body).
//! - No length (a chunked or close-delimited answer), `max_ranges 0`, or an answer the gzip
//!   filter compresses (it runs first): the 200 as it is, not even `Accept-Ranges`.
//!
//! Runs on the worker, in the header filters (`phases`); the window is cut in
//! `UpstreamBody::take`.

use shoal_http::Request;

use crate::http::range::{self, Ranges};
use crate::http::reply::{Body, Reply};
use crate::http::LocConf;

/// The range filter for a 200 with an upstream body that allows ranges: the reply is made a
/// 206, or keeps its 200 with `Accept-Ranges`. Returns the `Content-Range` of a 416 instead;
/// the body is then ended unread and not stored.
pub fn range_filter(req: &Request, lc: &LocConf, reply: &mut Reply) -> Option<String> {
    let Body::Upstream(ub) = &reply.body else {
        return None;
    };
    // nginx's range header filter wants `content_length_n`; without it, it does nothing.
    let size = ub.length?;
    if lc.max_ranges() == Some(0) || compressed(req, lc, reply, size) {
        return None;
    }
    let etag = reply.header("etag").unwrap_or("");
    // nginx's `last_modified_time`, -1 when the answer has none.
    let mtime = reply
        .header("last-modified")
        .and_then(|v| shoal_http::date::parse(v.as_bytes()))
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map_or(-1, |d| d.as_secs() as i64);
    let decision = range::requested(req, size, etag, mtime, Some(1));
    match decision {
        None | Some(Ranges::Full) => {
            reply.extra.push(("Accept-Ranges".into(), "bytes".into()));
        }
        Some(Ranges::Unsatisfiable) => {
            if let Body::Upstream(ub) = std::mem::replace(&mut reply.body, Body::Empty) {
                ub.finish();
            }
            return Some(range::unsatisfiable_content_range(size));
        }
        Some(Ranges::Satisfiable(list)) => {
            debug_assert_eq!(list.len(), 1, "parsed with a limit of one range");
            let br = list[0];
            reply.status = 206;
            reply.reason = None;
            reply.extra.push((
                "Content-Range".into(),
                range::content_range(&br, size).into(),
            ));
            if let Body::Upstream(ub) = &mut reply.body {
                ub.narrow_to(br);
            }
        }
    }
    None
}

/// Whether the gzip filter will compress this 200 (it runs before the range filter and
/// takes the length away); the facts as the connection gives them for a proxied answer.
fn compressed(req: &Request, lc: &LocConf, reply: &Reply, size: u64) -> bool {
    if !lc.gzip.enable() {
        return false;
    }
    let facts = crate::http::gzip::ResponseFacts {
        status: reply.status,
        content_type: reply.content_type.as_deref(),
        content_length: Some(size),
        already_encoded: reply
            .header("content-encoding")
            .is_some_and(|v| !v.is_empty()),
        head_only: req.method() == "HEAD",
        header: &|name| reply.header(name),
    };
    crate::http::gzip::decide(&lc.gzip, req, &facts).0
}
