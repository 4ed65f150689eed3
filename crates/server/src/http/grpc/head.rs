//! A gRPC call's heads: the request's as the upstream gets it (HTTP/2 fields made from the
//! client's request, nginx's grpc defaults) and the client's reply made from the answer's
//! (the layer's header passing, `$upstream_http_*`).

use std::cell::RefCell;
use std::rc::Rc;

use bytes::Bytes;

use super::conn;
use super::run::Answer;
use crate::http::proxy::request::{upstream_uri, UriParts};
use crate::http::reply::{Body, Reply};
use crate::http::request::Req;
use crate::http::rewrite;
use crate::http::upstream::answer::{pass_head, Kind, Line};
use crate::http::upstream::header::UpstreamHeader;
use crate::http::upstream::record::Record;
use crate::http::upstream::UpstreamLoc;
use crate::http::LocConf;
use crate::variables::Vars;

/// Request headers never sent as they came (nginx's grpc defaults: `Host` becomes
/// `:authority`, `TE` is `trailers` when the client said so, the length is the body's).
const NOT_PASSED: &[&str] = &[
    "host",
    "connection",
    "keep-alive",
    "proxy-connection",
    "transfer-encoding",
    "upgrade",
    "expect",
    "te",
    "content-length",
];

/// The request's head as the upstream gets it: `:method`, `:scheme`, `:authority` (the
/// address as written, or `grpc_set_header Host`'s value), `:path` (the client's URI, or the
/// rewritten one), the client's headers but the connection's own, then `grpc_set_header`'s.
/// `authority` is `host` made into one already (a `grpc_pass` without variables). The
/// client's values are slices of its head's bytes, not copies.
#[allow(clippy::too_many_arguments)]
pub(super) fn request_head(
    r: &Req<'_, '_>,
    lc: &LocConf,
    rw: &rewrite::State,
    vars: &Vars<'_>,
    host: &str,
    authority: Option<&http::uri::Authority>,
    tls: bool,
    method: &str,
    whole_len: Option<usize>,
) -> http::Request<()> {
    use http::{HeaderName, HeaderValue};
    let g = &lc.grpc;
    let escape = rw.internal || {
        let target = r.req.uri();
        let path = target.split(|&c| c == b'?').next().unwrap_or_default();
        path.contains(&b'%')
    };
    let parts = UriParts::new(r.req, rw, rw.internal, escape);
    let path = upstream_uri(&parts, None, "");
    let set = g.set_header.as_deref().map_or(&[][..], Vec::as_slice);
    let is_set = |name: &str| set.iter().any(|(n, _)| n.eq_ignore_ascii_case(name));
    let mut set_host = None;
    let mut headers = http::HeaderMap::with_capacity(r.req.header_count() + set.len() + 2);
    let mut add = |name: HeaderName,
                   value: Result<HeaderValue, http::header::InvalidHeaderValue>| {
        if let Ok(v) = value {
            headers.append(name, v);
        }
    };
    if g.up.pass_request_headers() {
        let head = r.req.head_bytes();
        for (name, value) in r.req.headers() {
            if NOT_PASSED.iter().any(|n| n.eq_ignore_ascii_case(name)) || is_set(name) {
                continue;
            }
            // (The name is made lowercase by `HeaderName::from_bytes`.)
            if let Ok(n) = HeaderName::from_bytes(name.as_bytes()) {
                add(n, HeaderValue::from_maybe_shared(head.slice_ref(value)));
            }
        }
        // nginx's `TE: $grpc_internal_trailers`.
        let trailers = r.req.header_all("te").any(|v| {
            v.split(|&c| c == b',')
                .any(|t| t.trim_ascii().eq_ignore_ascii_case(b"trailers"))
        });
        if trailers && !is_set("te") {
            add(http::header::TE, Ok(HeaderValue::from_static("trailers")));
        }
    }
    // `Content-Length: $content_length`: a whole body's length, or the client's word.
    if !is_set("content-length") {
        let length = match whole_len {
            Some(n) => Some(Ok(HeaderValue::from(n))),
            None => r
                .req
                .header("content-length")
                .map(|v| HeaderValue::from_maybe_shared(r.req.head_bytes().slice_ref(v))),
        };
        if let Some(l) = length {
            add(http::header::CONTENT_LENGTH, l);
        }
    }
    for (name, value) in set {
        let v = vars.eval(value);
        if v.is_empty() {
            continue;
        }
        if name.eq_ignore_ascii_case("host") {
            set_host = Some(v);
            continue;
        }
        if let Ok(n) = HeaderName::from_bytes(name.as_bytes()) {
            add(n, HeaderValue::from_str(&v));
        }
    }
    let scheme = if tls {
        http::uri::Scheme::HTTPS
    } else {
        http::uri::Scheme::HTTP
    };
    let authority = match (set_host, authority) {
        (None, Some(a)) => Some(a.clone()),
        (Some(h), _) => http::uri::Authority::from_maybe_shared(Bytes::from(h)).ok(),
        (None, None) => {
            http::uri::Authority::from_maybe_shared(Bytes::copy_from_slice(host.as_bytes())).ok()
        }
    };
    // A unix socket's or an odd name: `localhost`, as nginx's `:authority` for one.
    let authority = authority.unwrap_or_else(|| http::uri::Authority::from_static("localhost"));
    let path = http::uri::PathAndQuery::from_maybe_shared(Bytes::from(path))
        .unwrap_or_else(|_| http::uri::PathAndQuery::from_static("/"));
    let mut uri = http::uri::Parts::default();
    uri.scheme = Some(scheme);
    uri.authority = Some(authority);
    uri.path_and_query = Some(path);
    let mut req = http::Request::new(());
    *req.method_mut() = http::Method::from_bytes(method.as_bytes()).unwrap_or(http::Method::POST);
    *req.uri_mut() =
        http::Uri::from_parts(uri).unwrap_or_else(|_| http::Uri::from_static("http://localhost/"));
    *req.headers_mut() = headers;
    req
}

/// The client's reply from an answer's head: the status, the head's fields passed as nginx
/// passes an upstream's (`grpc_hide_header`, `grpc_pass_header`), the body and trailers still
/// to relay; a head that ended the stream (a trailers-only answer: an error status with its
/// message) is the whole answer.
pub(super) fn reply_of(
    answer: Answer,
    lc: &LocConf,
    conf: &UpstreamLoc,
    r: &Req<'_, '_>,
    record: &Rc<RefCell<Record>>,
) -> Box<Reply> {
    let Answer { status, head, body } = answer;
    // The head as an upstream's (HTTP/1 text and positions in it): `$upstream_http_*` and
    // the layer's header passing take it as any upstream's.
    let fields = || head.fields().iter();
    let made = shoal_http::upstream::head_of_fields(status, fields);
    let mut reply = Reply::boxed(status);
    reply.proxied = true;
    reply.upstream_status = true;
    if let Ok((parsed, len)) = made {
        record.borrow_mut().last().head_len = len as u64;
        let lines = parsed.headers().map(|(name, value)| {
            let known = UpstreamHeader::of(name);
            Line {
                name,
                value,
                kind: Kind::fresh(known),
                hidden: known.hidden(),
            }
        });
        pass_head(&mut reply, lines, false, lc, conf, None, r);
        record.borrow_mut().head = Some(parsed);
    }
    if body.recv.is_end_stream() {
        // Trailers-only: the head is the whole answer.
        let mut body = body;
        body.record.borrow_mut().finish(true);
        if let Some((u, peer, c)) = body.conn.take() {
            conn::put_idle(&u, peer, c);
        }
        // nginx's length of an answer whose head ended the stream: 0, told.
        reply.body = Body::Bytes(Vec::new());
    } else {
        reply.body = Body::Grpc(Box::new(body));
    }
    reply
}
