//! nginx's range filter (`max_ranges`): on a 200 that allows ranges, a 206 of one range or
//! `multipart/byteranges`, a 416 when none is satisfiable, else the 200 with
//! `Accept-Ranges: bytes`. What a range header means is `range.rs`'s; a cacheable upstream
//! answer being streamed is cut by `proxy_cache/partial.rs`.

use std::sync::atomic::{AtomicU64, Ordering};

use shoal_http::Request;

use super::modules::{Cx, HttpModule};
use super::range::{self, Ranges};
use super::reply::{Body, Reply};
use super::LocConf;

/// The range filter's place in the module list (`max_ranges` is a core directive).
pub struct Module;

impl HttpModule for Module {
    type Loc = ();
    const DIRECTIVES: &'static [crate::conf::Command] = &[];

    fn merge(_: &mut (), _: &()) {}

    fn header_filter(_: &(), cx: &Cx<'_, '_, '_>, reply: &mut Box<Reply>) {
        let (r, lc) = (cx.r, cx.lc);
        if reply.status == 200 && reply.allow_ranges {
            // A cacheable upstream answer is streamed: a range is cut from the stream.
            let unsatisfiable = if matches!(reply.body, Body::Upstream(_)) {
                super::proxy_cache::partial::range_filter(r.req, lc, reply)
            } else {
                of_file(r.req, lc, reply)
            };
            if let Some(content_range) = unsatisfiable {
                // nginx finalizes the request with 416 from inside the filter chain: what the
                // headers filter added for the 200 stays, the chain runs again for the 416 (so an
                // `add_header ... always` is sent twice, and the charset is added), and the
                // validators go (a proxied
                // answer's are among the headers it passed on).
                let mut e = super::reply::error_reply(416, lc);
                e.headers = std::mem::take(&mut reply.headers);
                e.headers.retain(|(n, _)| *n != "ETag");
                e.extra = std::mem::take(&mut reply.extra);
                e.extra.retain(|(n, _)| {
                    !n.eq_ignore_ascii_case("etag") && !n.eq_ignore_ascii_case("last-modified")
                });
                e.extra.push(("Content-Range".into(), content_range.into()));
                **reply = e;
                super::headers::filter(cx, reply);
                // userid's too: its cookie is sent a second time, as nginx sends it.
                <super::userid::Module as HttpModule>::header_filter(&cx.lc.userid, cx, reply);
                // The sub and charset filters too (the 416 page is HTML: its type, rewriting
                // and recoding are the page's now).
                super::sub::filter(&cx.lc.sub, cx, reply);
                super::charset::filter(&cx.lc.charset, cx, reply);
            }
        }
    }
}

/// nginx's range filter on a 200 that allows ranges: a 206 (one range, or multipart), or
/// the whole 200 with `Accept-Ranges: bytes`. Returns the `Content-Range` of a 416 when no
/// range is satisfiable (the caller answers it, as nginx finalizes the request there).
fn of_file(req: &Request, lc: &LocConf, reply: &mut Reply) -> Option<String> {
    // A cached object's body starts after its header: ranges are taken from `base` on. A
    // stored HEAD answer's are taken of the length it tells, and have no bytes either.
    let (size, base) = match &reply.body {
        Body::File { len, offset, .. } => (*len, *offset),
        Body::Absent(len) => (*len, 0),
        // `flv`'s header before the file's tail: ranges are of the two.
        Body::Chain(first, rest) if matches!(**rest, Body::File { .. }) => {
            (first.len() as u64 + rest.length().unwrap_or(0), 0)
        }
        _ => return None,
    };
    let content_type = reply.content_type.as_deref().unwrap_or_default();
    // A compressed answer has no length to take ranges of: nginx's gzip filter runs first.
    if lc.max_ranges() == Some(0) || super::gzip::would_compress(&lc.gzip, req, content_type, size)
    {
        return None;
    }
    // No `Range` (most requests): the whole answer, its validators not looked at.
    let decision = match req.header("range") {
        None => None,
        Some(_) => {
            let etag = reply.etag().unwrap_or("");
            let mtime = match (reply.last_modified, reply.mtime) {
                (Some(_), Some(t)) => t,
                _ => -1,
            };
            range::requested(req, size, etag, mtime, lc.max_ranges())
        }
    };
    if matches!(reply.body, Body::Chain(..)) {
        return of_chain(reply, decision, size);
    }
    let list = match decision {
        // The whole answer, its body as it is (a cached object's already from `base` on).
        None | Some(Ranges::Full) => {
            reply.extra.push(("Accept-Ranges".into(), "bytes".into()));
            return None;
        }
        Some(Ranges::Unsatisfiable) => return Some(range::unsatisfiable_content_range(size)),
        Some(Ranges::Satisfiable(list)) => list,
    };
    let (file, cached) = match std::mem::replace(&mut reply.body, Body::Empty) {
        Body::File { file, cached, .. } => (Some(file), cached),
        _ => (None, None),
    };
    if let [br] = &list[..] {
        reply.status = 206;
        reply.reason = None;
        reply.extra.push((
            "Content-Range".into(),
            range::content_range(br, size).into(),
        ));
        let len = br.end - br.start;
        reply.body = match file {
            Some(file) => Body::File {
                file,
                offset: base + br.start,
                len,
                cached,
            },
            None => Body::Absent(len),
        };
    } else {
        static BOUNDARY: AtomicU64 = AtomicU64::new(1);
        let seed = BOUNDARY.fetch_add(1, Ordering::Relaxed);
        let mut parts = range::multipart(&list, size, content_type, seed);
        for (_, br) in &mut parts.parts {
            br.start += base;
            br.end += base;
        }
        reply.status = 206;
        reply.reason = None;
        reply.content_type = Some(parts.content_type());
        reply.body = match file {
            Some(file) => Body::Multipart {
                file,
                parts,
                cached,
            },
            // nginx's multipart filter passes an empty body by: the parts' length is
            // told, nothing is sent.
            None => Body::Absent(parts.total_len()),
        };
    }
    None
}

/// The range filter on bytes then a file's range (`flv`'s header and tail): a 206 of one
/// range; several are answered whole (nginx would send them as `multipart/byteranges`).
fn of_chain(reply: &mut Reply, decision: Option<Ranges>, size: u64) -> Option<String> {
    let br = match decision {
        Some(Ranges::Unsatisfiable) => return Some(range::unsatisfiable_content_range(size)),
        Some(Ranges::Satisfiable(list)) if list.len() == 1 => list[0],
        _ => {
            reply.extra.push(("Accept-Ranges".into(), "bytes".into()));
            return None;
        }
    };
    let Body::Chain(first, rest) = std::mem::replace(&mut reply.body, Body::Empty) else {
        unreachable!("a chain, as the caller checked");
    };
    let Body::File {
        file,
        offset,
        len: _,
        cached,
    } = *rest
    else {
        unreachable!("a chain over a file, as the caller checked");
    };
    let p = first.len() as u64;
    let tail = |start: u64, end: u64| Body::File {
        file,
        offset: offset + start - p,
        len: end - start,
        cached,
    };
    reply.body = if br.end <= p {
        Body::Bytes(first[br.start as usize..br.end as usize].to_vec())
    } else if br.start >= p {
        tail(br.start, br.end)
    } else {
        Body::Chain(
            first[br.start as usize..].to_vec(),
            Box::new(tail(p, br.end)),
        )
    };
    reply.status = 206;
    reply.reason = None;
    reply.extra.push((
        "Content-Range".into(),
        range::content_range(&br, size).into(),
    ));
    None
}
