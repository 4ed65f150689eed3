//! A gRPC call's heads: the request's as the upstream gets it (HTTP/2 fields made from the
//! client's request, nginx's grpc defaults) and the client's reply made from the answer's
//! (the layer's header passing, `$upstream_http_*`).

use std::borrow::Cow;
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
#[cfg(test)]
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

/// What the upstream's head does with a request header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Passed {
    /// Sent as it came.
    As,
    /// `TE`: `te: trailers` when the client said so.
    Te,
    /// `Content-Length`: the body's length.
    Length,
    /// One of the others of `NOT_PASSED`.
    Never,
}

/// What becomes of a request header, whatever its case: by its length first, then each byte
/// compared with its letters' case folded (no early exit: every call asks this of each of
/// the client's headers).
fn passed(name: &[u8]) -> Passed {
    let is = |lit: &[u8]| crate::http::upstream::header::folded_eq(name, lit);
    let never = match name.len() {
        2 if is(b"te") => return Passed::Te,
        14 if is(b"content-length") => return Passed::Length,
        4 => is(b"host"),
        6 => is(b"expect"),
        7 => is(b"upgrade"),
        10 => is(b"connection") || is(b"keep-alive"),
        16 => is(b"proxy-connection"),
        17 => is(b"transfer-encoding"),
        _ => false,
    };
    if never {
        Passed::Never
    } else {
        Passed::As
    }
}

/// A request's head as the upstream gets it (made once per try): the pseudo-headers and the
/// fields, borrowed from the client's head and the configuration where they can be (the
/// head is encoded before the try's first wait: nothing needs to own them).
pub(super) struct UpstreamHead<'a> {
    method: &'a [u8],
    scheme: &'static str,
    authority: Cow<'a, [u8]>,
    path: Bytes,
    /// Names as they came (the codec lowercases them), values.
    fields: Vec<(&'a [u8], Cow<'a, [u8]>)>,
}

impl UpstreamHead<'_> {
    /// The pseudo-headers, for the codec.
    pub fn head(&self) -> RequestHead<'_> {
        RequestHead {
            method: self.method,
            scheme: self.scheme.as_bytes(),
            authority: &self.authority,
            path: &self.path,
        }
    }

    pub fn fields(&self) -> impl Iterator<Item = (&[u8], &[u8])> + '_ {
        self.fields.iter().map(|(n, v)| (*n, &v[..]))
    }
}

/// Whether a value may go in a field (RFC 9110, 5.5: no control characters but tab). Every
/// byte is looked at (no early exit: a loop the compiler widens; values are short and valid).
fn valid_value(v: &[u8]) -> bool {
    v.iter()
        .fold(true, |ok, &c| ok & (c >= 0x20 || c == b'\t') & (c != 0x7f))
}

/// The request's head as the upstream gets it: `:method`, `:scheme`, `:authority` (the
/// address as written, or `grpc_set_header Host`'s value), `:path` (the client's URI, or the
/// rewritten one), the client's headers but the connection's own, then `grpc_set_header`'s.
/// `authority` is `host` made into one already (a `grpc_pass` without variables). The
/// client's names and values are borrowed from its head, not copied.
#[allow(clippy::too_many_arguments)]
pub(super) fn request_head<'a>(
    r: &'a Req<'_, '_>,
    lc: &'a LocConf,
    rw: &rewrite::State,
    vars: &Vars<'_>,
    host: &'a str,
    authority: Option<&'a http::uri::Authority>,
    tls: bool,
    method: &'a str,
    whole_len: Option<usize>,
) -> UpstreamHead<'a> {
    let g = &lc.grpc;
    let mut parts = UriParts::new(r.req, rw, rw.internal, false);
    let head = r.req.head_bytes();
    // The client's URI as it came is a slice of its head; a rewritten one is made (escaped
    // when the client's path had `%`, or the request is internal).
    let path = match parts.changed {
        false if within(head, parts.unparsed) => head.slice_ref(parts.unparsed),
        _ => {
            parts.escape = rw.internal || {
                let target = r.req.uri();
                let path = target.split(|&c| c == b'?').next().unwrap_or_default();
                path.contains(&b'%')
            };
            Bytes::from(upstream_uri(&parts, None, ""))
        }
    };
    let set = g.set_header.as_deref().map_or(&[][..], Vec::as_slice);
    let is_set = |name: &[u8]| {
        !set.is_empty()
            && set
                .iter()
                .any(|(n, _)| n.as_bytes().eq_ignore_ascii_case(name))
    };
    let mut set_host = None;
    let mut fields: Vec<(&[u8], Cow<'_, [u8]>)> =
        Vec::with_capacity(r.req.header_count() + set.len() + 2);
    // The client's `Content-Length` (its first), seen on the way.
    let mut client_length = None;
    if g.up.pass_request_headers() {
        let mut trailers = false;
        for (name, value) in r.req.header_fields() {
            if name.is_empty() {
                continue;
            }
            match passed(name) {
                Passed::As => {}
                // nginx's `TE: $grpc_internal_trailers`.
                Passed::Te => {
                    trailers |= value
                        .split(|&c| c == b',')
                        .any(|t| t.trim_ascii().eq_ignore_ascii_case(b"trailers"));
                    continue;
                }
                Passed::Length => {
                    client_length = client_length.or(Some(value));
                    continue;
                }
                Passed::Never => continue,
            }
            if is_set(name) || !valid_value(value) {
                continue;
            }
            fields.push((name, Cow::Borrowed(value)));
        }
        if trailers && !is_set(b"te") {
            fields.push((b"te", Cow::Borrowed(b"trailers")));
        }
    } else {
        client_length = r.req.header("content-length");
    }
    // `Content-Length: $content_length`: a whole body's length, or the client's word.
    if !is_set(b"content-length") {
        let length = match whole_len {
            Some(n) => Some(Cow::Owned(n.to_string().into_bytes())),
            None => client_length.map(Cow::Borrowed),
        };
        if let Some(l) = length.filter(|l| valid_value(l)) {
            fields.push((b"content-length", l));
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
            fields.push((name.as_bytes(), Cow::Owned(v.into_bytes())));
        }
    }
    let authority: Option<Cow<'_, [u8]>> = match (set_host, authority) {
        (None, Some(a)) => Some(Cow::Borrowed(a.as_str().as_bytes())),
        (Some(h), _) => http::uri::Authority::try_from(h.as_str())
            .ok()
            .map(|_| Cow::Owned(h.into_bytes())),
        (None, None) => http::uri::Authority::try_from(host)
            .ok()
            .map(|_| Cow::Borrowed(host.as_bytes())),
    };
    // A unix socket's or an odd name: `localhost`, as nginx's `:authority` for one.
    let authority = authority.unwrap_or(Cow::Borrowed(b"localhost"));
    let path = match http::uri::PathAndQuery::from_maybe_shared(path.clone()) {
        Ok(_) => path,
        Err(_) => Bytes::from_static(b"/"),
    };
    let method = match http::Method::from_bytes(method.as_bytes()) {
        Ok(_) => method.as_bytes(),
        Err(_) => b"POST",
    };
    UpstreamHead {
        method,
        scheme: if tls { "https" } else { "http" },
        authority,
        path,
        fields,
    }
}

/// Whether `part` lies within `whole`'s bytes (so that `Bytes::slice_ref` takes it).
fn within(whole: &Bytes, part: &[u8]) -> bool {
    let (w, p) = (whole.as_ptr() as usize, part.as_ptr() as usize);
    !part.is_empty() && p >= w && p + part.len() <= w + whole.len()
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
    let mut reply = Reply::boxed(status);
    reply.proxied = true;
    reply.upstream_status = true;
    // The head's fields as the layer passes an upstream's, taken as they are: the HTTP/2
    // codec checked them (a status of three digits, lowercase names, values without CR, LF,
    // NUL or spaces at their ends), so they read as an HTTP/1 parser would read them written
    // out, and `$upstream_http_*` looks in them (`Record::head_fields`).
    let fields = head.into_fields();
    let lines = fields.iter().map(|(name, value)| {
        let known = UpstreamHeader::of(name);
        Line {
            name,
            value,
            kind: Kind::fresh(known),
            hidden: known.hidden(),
        }
    });
    pass_head(&mut reply, lines, false, lc, conf, None, r);
    {
        let mut rec = record.borrow_mut();
        // The head's length as `HTTP/1.1 DDD X` and `name: value` lines would be (nginx
        // counts the head out of `$upstream_response_length` as text too).
        let text: usize = fields.iter().map(|(n, v)| n.len() + v.len() + 4).sum();
        rec.last().head_len = (text + 18) as u64;
        rec.head_fields = Some(fields);
    }
    if body.recv.is_end_stream() {
        // Trailers-only: the head is the whole answer.
        let mut body = body;
        let now = std::time::Instant::now();
        body.record.borrow_mut().finish_at(true, now);
        if let Some((u, peer, c)) = body.conn.take() {
            conn::put_idle(&u, peer, c, now);
        }
        // nginx's length of an answer whose head ended the stream: 0, told.
        reply.body = Body::Bytes(Vec::new());
    } else {
        reply.body = Body::Grpc(Box::new(body));
    }
    reply
}

#[cfg(test)]
mod tests {
    use super::{passed, Passed, NOT_PASSED};

    #[test]
    fn not_passed_is_the_list_whatever_the_case() {
        let not_passed = |name: &[u8]| passed(name) != Passed::As;
        for name in NOT_PASSED {
            assert!(not_passed(name.as_bytes()), "{name}");
            assert!(not_passed(name.to_ascii_uppercase().as_bytes()), "{name}");
        }
        assert_eq!(passed(b"TE"), Passed::Te);
        assert_eq!(passed(b"Content-Length"), Passed::Length);
        assert_eq!(passed(b"Host"), Passed::Never);
        for name in [
            "",
            "t",
            "tee",
            "hosts",
            "user-agent",
            "content-type",
            "grpc-timeout",
            "content-lengths",
            "keep-alivx",
            "proxy-connectiom",
        ] {
            assert!(!not_passed(name.as_bytes()), "{name}");
        }
    }
}
