//! nginx's headers filter (ngx_http_headers_module): `expires` and `add_header` for the
//! statuses nginx calls good (200, 201, 204, 206, 301, 302, 303, 304, 307, 308), and
//! `add_header ... always` for any. The directives are read in `directives.rs`.

use std::time::{SystemTime, UNIX_EPOCH};

use super::directives::{expires_headers, AddHeader};
use super::modules::{Cx, HttpModule};
use super::reply::Reply;

/// The headers filter's place in the module list (its directives are core ones).
pub struct Module;

impl HttpModule for Module {
    type Loc = ();
    const DIRECTIVES: &'static [crate::conf::Command] = &[];

    fn merge(_: &mut (), _: &()) {}

    fn header_filter(_: &(), cx: &Cx<'_, '_, '_>, reply: &mut Box<Reply>) {
        filter(cx, reply);
    }
}

/// nginx's headers filter: `expires` and `add_header` for 200, 201, 204, 206, 301, 302, 303,
/// 304, 307 and 308; `add_header ... always` for any status.
pub fn filter(cx: &Cx<'_, '_, '_>, reply: &mut Reply) {
    let (r, lc, rw, upstream) = (cx.r, cx.lc, cx.rw, cx.upstream);
    let good = matches!(
        reply.status,
        200 | 201 | 204 | 206 | 301 | 302 | 303 | 304 | 307 | 308
    );
    if good {
        let e = lc.expires.as_ref().and_then(|e| {
            e.eval(|t| {
                let mut vars = r.vars_rw(rw, lc);
                // h5bp's `expires $expires`, a map of `$sent_http_content_type`.
                let sent = t.may_read_sent_headers().then(|| sent_so_far(reply));
                vars.sent = sent.as_ref();
                vars.eval(t)
            })
        });
        if let Some(e) = e {
            let now = SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map(|d| d.as_secs() as i64)
                .unwrap_or(0);
            if let Some((expires, cc)) = expires_headers(e, now, reply.mtime) {
                set_expires(reply, expires, cc);
            }
        }
    }
    if let Some(headers) = &lc.add_header {
        let rec = upstream.map(|u| u.borrow());
        let mut vars = r.vars_rw(rw, lc);
        vars.upstream = rec.as_deref();
        add_headers(headers, good, &vars, reply);
    }
}

/// The answer's headers as they stand, for `$sent_http_*` in the headers filter.
fn sent_so_far(reply: &Reply) -> crate::variables::Sent {
    crate::variables::Sent {
        status: reply.status,
        body_bytes: 0,
        bytes: 0,
        headers: reply.header_list(),
    }
}

/// nginx's `add_header`: every header for a status its headers filter calls good, else the
/// `always` ones only; values from `vars`. `$sent_http_*` in a value, directly or through a
/// `map` (h5bp's `$x_frame_options` of `$sent_http_content_type`), reads the answer's headers
/// as they stand, an earlier add_header's included (nginx adds them one by one): that list is
/// made only when a value may ask for it.
pub fn add_headers(
    headers: &[AddHeader],
    good: bool,
    vars: &crate::variables::Vars<'_>,
    reply: &mut Reply,
) {
    let mut sent = headers
        .iter()
        .any(|h| h.value.may_read_sent_headers())
        .then(|| sent_so_far(reply));
    for h in headers.iter().filter(|h| good || h.always) {
        let v: std::borrow::Cow<'static, str> = match &sent {
            None => match h.value.constant_value(vars) {
                Some(c) => c.into(),
                None => vars.eval(&h.value).into(),
            },
            Some(s) => {
                let mut with_sent = vars.clone();
                with_sent.sent = Some(s);
                with_sent.eval(&h.value).into()
            }
        };
        if v.as_bytes().contains(&0xEF) {
            // `$binary_remote_addr`'s bytes (itself, or a variable holding it): sent raw, as
            // nginx sends them.
            let mut raw = Vec::with_capacity(v.len());
            crate::variables::raw_bytes_into(&v, &mut raw);
            if raw != v.as_bytes() {
                reply
                    .raw_extra
                    .push((reply.extra.len(), h.name.to_string(), raw));
                continue;
            }
        }
        if !v.is_empty() {
            if let Some(s) = &mut sent {
                s.headers.push((h.name.to_ascii_lowercase(), v.to_string()));
            }
            reply.extra.push((h.name.into(), v));
        }
    }
}

/// `expires`' two headers, as nginx's `ngx_http_set_expires` sets them: an `Expires` or
/// `Cache-Control` already there (an upstream's) gets the new value in its place, the other
/// `Cache-Control` lines go; else each is added after what is there (an upstream's headers).
fn set_expires(reply: &mut Reply, expires: String, cc: String) {
    let named = |n: &str, want: &str| n.eq_ignore_ascii_case(want);
    match reply.extra.iter_mut().find(|(n, _)| named(n, "Expires")) {
        Some((_, v)) => *v = expires.into(),
        None => reply.extra.push(("Expires".into(), expires.into())),
    }
    let mut first = None;
    let mut i = 0;
    while i < reply.extra.len() {
        if !named(&reply.extra[i].0, "Cache-Control") {
            i += 1;
        } else if first.is_none() {
            first = Some(i);
            i += 1;
        } else {
            reply.remove_extra(i);
        }
    }
    match first {
        Some(i) => reply.extra[i].1 = cc.into(),
        None => reply.extra.push(("Cache-Control".into(), cc.into())),
    }
}
