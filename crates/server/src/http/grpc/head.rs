//! A gRPC call's heads: the request's as the upstream gets it (HTTP/2 fields made from the
//! client's request, nginx's grpc defaults) and the client's reply made from the answer's
//! (the layer's header passing, `$upstream_http_*`).

use std::cell::RefCell;
use std::rc::Rc;

use bytes::Bytes;
use shoal_http2::client::RequestHead;

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

/// A request's head as the upstream gets it (made once per try): the pseudo-headers and the
/// fields, values sliced out of the client's head rather than copied.
pub(super) struct UpstreamHead {
    method: http::Method,
    scheme: &'static str,
    authority: Bytes,
    path: Bytes,
    /// Names as they came (the codec lowercases them), values.
    fields: Vec<(Bytes, Bytes)>,
}

impl UpstreamHead {
    /// The pseudo-headers, for the codec.
    pub fn head(&self) -> RequestHead<'_> {
        RequestHead {
            method: self.method.as_str().as_bytes(),
            scheme: self.scheme.as_bytes(),
            authority: &self.authority,
            path: &self.path,
        }
    }

    pub fn fields(&self) -> impl Iterator<Item = (&[u8], &[u8])> + '_ {
        self.fields.iter().map(|(n, v)| (&n[..], &v[..]))
    }
}

/// Whether a value may go in a field (RFC 9110, 5.5: no control characters but tab).
fn valid_value(v: &[u8]) -> bool {
    !v.iter().any(|&c| (c < 0x20 && c != b'\t') || c == 0x7f)
}

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
) -> UpstreamHead {
    let g = &lc.grpc;
    let escape = rw.internal || {
        let target = r.req.uri();
        let path = target.split(|&c| c == b'?').next().unwrap_or_default();
        path.contains(&b'%')
    };
    let parts = UriParts::new(r.req, rw, rw.internal, escape);
    let path = upstream_uri(&parts, None, "");
    let set = g.set_header.as_deref().map_or(&[][..], Vec::as_slice);
    let is_set = |name: &[u8]| {
        set.iter()
            .any(|(n, _)| n.as_bytes().eq_ignore_ascii_case(name))
    };
    let mut set_host = None;
    let mut fields = Vec::with_capacity(r.req.header_count() + set.len() + 2);
    let head = r.req.head_bytes();
    if g.up.pass_request_headers() {
        for (name, value) in r.req.header_fields() {
            if name.is_empty()
                || NOT_PASSED
                    .iter()
                    .any(|n| n.as_bytes().eq_ignore_ascii_case(name))
                || is_set(name)
                || !valid_value(value)
            {
                continue;
            }
            fields.push((head.slice_ref(name), head.slice_ref(value)));
        }
        // nginx's `TE: $grpc_internal_trailers`.
        let trailers = r.req.header_all("te").any(|v| {
            v.split(|&c| c == b',')
                .any(|t| t.trim_ascii().eq_ignore_ascii_case(b"trailers"))
        });
        if trailers && !is_set(b"te") {
            fields.push((Bytes::from_static(b"te"), Bytes::from_static(b"trailers")));
        }
    }
    // `Content-Length: $content_length`: a whole body's length, or the client's word.
    if !is_set(b"content-length") {
        let length = match whole_len {
            Some(n) => Some(Bytes::from(n.to_string())),
            None => r.req.header("content-length").map(|v| head.slice_ref(v)),
        };
        if let Some(l) = length.filter(|l| valid_value(l)) {
            fields.push((Bytes::from_static(b"content-length"), l));
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
        if valid_value(v.as_bytes()) {
            fields.push((Bytes::copy_from_slice(name.as_bytes()), Bytes::from(v)));
        }
    }
    let authority = match (set_host, authority) {
        (None, Some(a)) => Some(a.clone()),
        (Some(h), _) => http::uri::Authority::from_maybe_shared(Bytes::from(h)).ok(),
        (None, None) => {
            http::uri::Authority::from_maybe_shared(Bytes::copy_from_slice(host.as_bytes())).ok()
        }
    };
    // A unix socket's or an odd name: `localhost`, as nginx's `:authority` for one.
    let authority = authority.map_or(Bytes::from_static(b"localhost"), |a| {
        Bytes::copy_from_slice(a.as_str().as_bytes())
    });
    let path = Bytes::from(path);
    let path = match http::uri::PathAndQuery::from_maybe_shared(path.clone()) {
        Ok(_) => path,
        Err(_) => Bytes::from_static(b"/"),
    };
    UpstreamHead {
        method: http::Method::from_bytes(method.as_bytes()).unwrap_or(http::Method::POST),
        scheme: if tls { "https" } else { "http" },
        authority,
        path,
        fields,
    }
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
