//! nginx's `X-Accel-Redirect`: an upstream's answer that names a URI (or a named location)
//! is not sent; the request is redirected there internally, as a GET (a HEAD stays one),
//! and takes a few of the answer's headers with it (Discourse's uploads and backups, PHP
//! applications' private downloads: the upstream says which file, nginx sends it).
//! `*_ignore_headers X-Accel-Redirect` turns it off. A cached answer is redirected too (nginx
//! never stores one it redirected, but one a location ignoring the header stored is).
//!
//! What is decided here is the target and the headers handed on; the phases redirect
//! (`phases.rs`, an upstream handler's `Outcome::Internal` or `Outcome::Named`) and put
//! the headers first among the answer's own (`Record::carry`).

use std::cell::RefCell;

use super::record::Record;
use super::UpstreamLoc;
use crate::http::reply::{Outcome, Reply};
use crate::http::request::Req;
use crate::log::Level;

/// The headers a redirected answer hands on (nginx's `redirect` ones in
/// `ngx_http_upstream_headers_in`), whatever `*_hide_header` says.
const HANDED_ON: [&str; 6] = [
    "Content-Type",
    "Content-Disposition",
    "Cache-Control",
    "Expires",
    "Accept-Ranges",
    "Set-Cookie",
];

/// The answer's `X-Accel-Redirect`, unless the location ignores it.
pub fn target(head: &shoal_http::upstream::UpstreamHead, conf: &UpstreamLoc) -> Option<String> {
    let v = head.header("x-accel-redirect")?;
    (!conf.ignores("X-Accel-Redirect")).then(|| shoal_http::lossy(v).into_owned())
}

/// The `X-Accel-Redirect` of an answer from the cache (its stored head), unless the location
/// ignores it.
pub fn cached_target(rec: &Record, conf: &UpstreamLoc) -> Option<String> {
    let (_, v) = rec
        .cached_headers
        .iter()
        .find(|(n, _)| n.eq_ignore_ascii_case("x-accel-redirect"))?;
    (!conf.ignores("X-Accel-Redirect")).then(|| v.clone())
}

/// Redirects to `target`: the headers handed on go into the record's `carry` (the
/// `Content-Type` the phases give the answer; a `Set-Cookie` as `proxy_cookie_*` rewrote it
/// in `reply`, the answer as the protocol made it), the upstream connection is dropped with
/// `reply`. An unsafe URI is nginx's 404 and its log line.
pub fn redirect(
    r: &Req<'_, '_>,
    target: String,
    reply: Box<Reply>,
    conf: &UpstreamLoc,
    record: &RefCell<Record>,
) -> Outcome {
    let mut rec = record.borrow_mut();
    rec.finish(false);
    let mut cookies = reply
        .extra
        .iter()
        .filter(|(n, _)| n.eq_ignore_ascii_case("set-cookie"))
        .map(|(_, v)| v.to_string());
    let mut carried = Vec::new();
    let mut hand_on = |name: &[u8], value: &[u8]| {
        let Some(known) = HANDED_ON
            .iter()
            .find(|h| h.as_bytes().eq_ignore_ascii_case(name))
        else {
            return;
        };
        let raw = shoal_http::lossy(value).into_owned();
        let value = match *known {
            "Set-Cookie" => cookies.next().unwrap_or(raw),
            // `*_force_ranges`: the range filter says it itself.
            "Accept-Ranges" if conf.force_ranges() => return,
            _ => raw,
        };
        let name = match *known {
            // The answer's own field (`Record::carry` is read for it by that name).
            "Content-Type" => "Content-Type".to_string(),
            _ => shoal_http::lossy(name).into_owned(),
        };
        carried.push((name, value));
    };
    // A fresh answer's head, or the one a cached answer stored.
    match &rec.head {
        Some(head) => head.headers().for_each(|(n, v)| hand_on(n, v)),
        None => rec
            .cached_headers
            .iter()
            .for_each(|(n, v)| hand_on(n.as_bytes(), v.as_bytes())),
    }
    rec.carry.append(&mut carried);
    if target.starts_with('@') {
        return Outcome::Named(target);
    }
    let args = target.split_once('?').map(|(_, a)| a);
    match crate::http::dav::unsafe_uri(target.as_bytes()) {
        // The path decoded, the arguments as they came (the phases split them again at the
        // first `?`, as nginx's redirect does with a decoded `%3F`).
        Ok(decoded) => {
            let mut uri = shoal_http::lossy(&decoded).into_owned();
            if let Some(a) = args {
                uri.push('?');
                uri.push_str(a);
            }
            Outcome::Internal(uri)
        }
        Err(shown) => {
            crate::conn_log!(
                Level::Error,
                r.info.number,
                "unsafe URI \"{}\" was detected while reading response header from \
                 upstream{}",
                shoal_http::lossy(&shown),
                rec.log_ctx(r.req, r.srv, r.info)
            );
            Outcome::Error(404)
        }
    }
}
