//! nginx's gzip filter: `gzip`, `gzip_types`, `gzip_comp_level`, `gzip_min_length`,
//! `gzip_buffers`, `gzip_http_version`, `gzip_proxied`, `gzip_vary`, `gzip_disable`, and
//! `gzip_static`.
//!
//! The decision is nginx's, made when the header is about to go out: the response is 200, 403
//! or 404, not already encoded, of a listed type (`text/html` always), at least
//! `gzip_min_length` long when the length is known; the request accepts gzip, is at least
//! `gzip_http_version`, its User-Agent is not disabled, and if it came through a proxy (a `Via`
//! header) `gzip_proxied` allows it. Then `Content-Length` and `Accept-Ranges` go (no ranges
//! from a compressed stream), a strong ETag is weakened, and the body is compressed as it is
//! sent (never held whole): chunked for HTTP/1.1, closed for HTTP/1.0. Compression is flate2
//! on zlib-rs (measured fastest here, ARCHITECTURE.md), driven through zlib-rs's own API so the
//! memory level can be sized like nginx's; small bodies of known length at levels 1–4 go to
//! shoal's own encoder instead, whose setup costs nothing ([`Compressor`]).

use std::sync::Arc;

use shoal_conf::{Directive, Error};
use shoal_http::Request;
use shoal_pcre::{Regex, RegexBuilder};

use super::loc_conf;
use crate::conf::{
    err, flag_arg, merge, number_arg, set_once, size_arg, Args, Builder, Command, Ctx, Scope,
};

pub static DIRECTIVES: &[Command] = &[
    Command::new("gzip", Ctx::HSL.or(Ctx::LIF), Args::Flag, set_gzip),
    Command::new("gzip_types", Ctx::HSL, Args::ONE_OR_MORE, set_gzip_types),
    Command::new("gzip_comp_level", Ctx::HSL, Args::ONE, set_gzip_comp_level),
    Command::new("gzip_min_length", Ctx::HSL, Args::ONE, set_gzip_min_length),
    Command::new("gzip_buffers", Ctx::HSL, Args::TWO, set_gzip_buffers),
    Command::new(
        "gzip_http_version",
        Ctx::HSL,
        Args::ONE,
        set_gzip_http_version,
    ),
    Command::new(
        "gzip_proxied",
        Ctx::HSL,
        Args::ONE_OR_MORE,
        set_gzip_proxied,
    ),
    Command::new("gzip_vary", Ctx::HSL, Args::Flag, set_gzip_vary),
    Command::new(
        "gzip_disable",
        Ctx::HSL,
        Args::ONE_OR_MORE,
        set_gzip_disable,
    ),
    Command::new("gzip_static", Ctx::HSL, Args::ONE, set_gzip_static),
];

/// `gzip_proxied` flags.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Proxied {
    pub expired: bool,
    pub no_cache: bool,
    pub no_store: bool,
    pub private: bool,
    pub no_last_modified: bool,
    pub no_etag: bool,
    pub auth: bool,
    pub any: bool,
}

/// `gzip_static`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GzipStatic {
    Off,
    On,
    Always,
}

crate::conf::conf_slots! {
    /// The gzip directives at location level.
    #[derive(Clone, Debug, Default)]
    pub struct GzipLoc {
        /// `gzip`.
        enable: bool = false,
        /// `gzip_comp_level`.
        comp_level: u32 = 1,
        /// `gzip_min_length`.
        min_length: u64 = 20,
        /// `gzip_http_version 1.0`.
        http_version_10: bool = false,
        proxied: Proxied = Proxied::default(),
        /// `gzip_vary`.
        vary: bool = false,
        disable_msie6: bool = false,
        /// `gzip_static`.
        static_: GzipStatic = GzipStatic::Off,
    }
    others {
        /// `gzip_types` (`None` inside: `*`).
        pub types: Option<Option<Arc<Vec<String>>>>,
        pub disable: Option<Arc<Vec<Regex>>>,
        /// `gzip_buffers`: read only to refuse a second one (not inherited, so a level below
        /// may have its own).
        pub buffers: Option<(usize, usize)>,
    }
}

impl GzipLoc {
    pub fn merge(&mut self, p: &GzipLoc) {
        self.merge_slots(p);
        merge(&mut self.types, &p.types);
        merge(&mut self.disable, &p.disable);
    }

    /// nginx's `ngx_http_test_content_type`: `gzip_types *` takes any answer, one with no
    /// type too (Netdata's sub-path recipe and an upstream that names none); else the type
    /// must be listed.
    fn types_match(&self, content_type: Option<&str>) -> bool {
        match content_type.filter(|t| !t.is_empty()) {
            Some(t) => self.type_ok(t),
            None => matches!(self.types, Some(None)),
        }
    }

    fn type_ok(&self, content_type: &str) -> bool {
        // The type before its parameters, without the spaces around it, compared as bytes and
        // without case: nothing copied, no character decoded.
        let ct = content_type.as_bytes();
        let base = ct[..memchr::memchr(b';', ct).unwrap_or(ct.len())].trim_ascii();
        if base.eq_ignore_ascii_case(b"text/html") {
            return true;
        }
        match &self.types {
            Some(None) => true,
            Some(Some(list)) => list.iter().any(|t| t.as_bytes().eq_ignore_ascii_case(base)),
            None => false,
        }
    }
}

fn gz<'a>(s: &'a mut Scope<'_>) -> &'a mut GzipLoc {
    &mut loc_conf(s).gzip
}

fn set_gzip(_: &mut Builder, d: &Directive, s: &mut Scope<'_>) -> Result<(), Error> {
    set_once(&mut gz(s).enable, flag_arg(d), d)
}

fn set_gzip_types(_: &mut Builder, d: &Directive, s: &mut Scope<'_>) -> Result<(), Error> {
    let g = gz(s);
    if g.types.is_some() {
        return Err(crate::conf::duplicate(d));
    }
    if d.args.iter().any(|a| a.value == "*") {
        g.types = Some(None);
        return Ok(());
    }
    let list = d
        .args
        .iter()
        .map(|a| a.value.to_ascii_lowercase())
        .collect();
    g.types = Some(Some(Arc::new(list)));
    Ok(())
}

fn set_gzip_comp_level(_: &mut Builder, d: &Directive, s: &mut Scope<'_>) -> Result<(), Error> {
    let n = number_arg(d, 0)?;
    if !(1..=9).contains(&n) {
        return Err(err(d, "value must be between 1 and 9"));
    }
    set_once(&mut gz(s).comp_level, n as u32, d)
}

fn set_gzip_min_length(_: &mut Builder, d: &Directive, s: &mut Scope<'_>) -> Result<(), Error> {
    let n = size_arg(d, 0)?;
    set_once(&mut gz(s).min_length, n, d)
}

/// `gzip_buffers NUMBER SIZE`: nginx's output buffers for compressed data. shoal writes
/// compressed output as it comes; the values are checked (and a second one in the same
/// context is a duplicate, as in nginx) and otherwise need no effect.
fn set_gzip_buffers(_: &mut Builder, d: &Directive, s: &mut Scope<'_>) -> Result<(), Error> {
    set_once(&mut gz(s).buffers, crate::conf::bufs_arg(d)?, d)
}

fn set_gzip_http_version(_: &mut Builder, d: &Directive, s: &mut Scope<'_>) -> Result<(), Error> {
    let v = match d.args[0].value.as_str() {
        "1.0" => true,
        "1.1" => false,
        other => return Err(crate::conf::invalid_value(d, other)),
    };
    set_once(&mut gz(s).http_version_10, v, d)
}

fn set_gzip_proxied(_: &mut Builder, d: &Directive, s: &mut Scope<'_>) -> Result<(), Error> {
    let mut p = Proxied::default();
    for a in &d.args {
        match a.value.as_str() {
            "off" => p = Proxied::default(),
            "expired" => p.expired = true,
            "no-cache" => p.no_cache = true,
            "no-store" => p.no_store = true,
            "private" => p.private = true,
            "no_last_modified" => p.no_last_modified = true,
            "no_etag" => p.no_etag = true,
            "auth" => p.auth = true,
            "any" => p.any = true,
            other => return Err(crate::conf::invalid_value(d, other)),
        }
    }
    set_once(&mut gz(s).proxied, p, d)
}

fn set_gzip_vary(_: &mut Builder, d: &Directive, s: &mut Scope<'_>) -> Result<(), Error> {
    set_once(&mut gz(s).vary, flag_arg(d), d)
}

fn set_gzip_disable(_: &mut Builder, d: &Directive, s: &mut Scope<'_>) -> Result<(), Error> {
    let g = gz(s);
    let mut list: Vec<Regex> = g.disable.as_deref().cloned().unwrap_or_default();
    for a in &d.args {
        if a.value == "msie6" {
            g.disable_msie6 = Some(true);
            continue;
        }
        let re = RegexBuilder::new(&a.value)
            .caseless(true)
            .build()
            .map_err(|e| err(d, e.to_string()))?;
        list.push(re);
    }
    g.disable = Some(Arc::new(list));
    Ok(())
}

fn set_gzip_static(_: &mut Builder, d: &Directive, s: &mut Scope<'_>) -> Result<(), Error> {
    let v = match d.args[0].value.as_str() {
        "off" => GzipStatic::Off,
        "on" => GzipStatic::On,
        "always" => GzipStatic::Always,
        other => return Err(crate::conf::invalid_value(d, other)),
    };
    set_once(&mut gz(s).static_, v, d)
}

/// Whether the client accepts gzip, as nginx reads Accept-Encoding: a `gzip` token (not
/// `x-gzip`) whose q-value, if any (`q=` or `Q=`), is not zero.
pub fn accepts_gzip(req: &Request) -> bool {
    req.header_all("accept-encoding").any(|v| {
        shoal_http::lossy(v).split(',').any(|item| {
            let mut parts = item.split(';');
            let coding = parts.next().unwrap_or("").trim();
            if !coding.eq_ignore_ascii_case("gzip") {
                return false;
            }
            for p in parts {
                let p = p.trim();
                if p.len() >= 2 && p[..2].eq_ignore_ascii_case("q=") {
                    return p[2..]
                        .trim()
                        .parse::<f32>()
                        .map(|q| q > 0.0)
                        .unwrap_or(false);
                }
            }
            true
        })
    })
}

fn msie6(ua: &str) -> bool {
    // nginx's `msie6` (ngx_http_process_user_agent): "MSIE 4." and "MSIE 5." always, "MSIE 6."
    // unless "SV1" follows; never for Opera, which claims to be MSIE.
    if ua.contains("Opera") {
        return false;
    }
    let Some(p) = ua.find("MSIE ") else {
        return false;
    };
    let b = ua.as_bytes();
    if p + 7 >= b.len() || b[p + 6] != b'.' {
        return false;
    }
    match b[p + 5] {
        b'4' | b'5' => true,
        b'6' => !ua[p + 8..].contains("SV1"),
        _ => false,
    }
}

/// What the response offers to the decision.
pub struct ResponseFacts<'a> {
    pub status: u16,
    pub content_type: Option<&'a str>,
    pub content_length: Option<u64>,
    pub already_encoded: bool,
    pub head_only: bool,
    /// The response's headers as `gzip_proxied` reads them (`Expires`, `Cache-Control`,
    /// `Last-Modified`, `ETag`): looked up only for a request that came through a proxy.
    pub header: &'a dyn Fn(&str) -> Option<&'a str>,
}

/// The decision: `(compress, add Vary: Accept-Encoding)`.
pub fn decide(g: &GzipLoc, req: &Request, resp: &ResponseFacts<'_>) -> (bool, bool) {
    if !g.enable()
        || !matches!(resp.status, 200 | 403 | 404)
        || resp.already_encoded
        || resp.content_length.is_some_and(|n| n < g.min_length())
        || !g.types_match(resp.content_type)
    {
        return (false, false);
    }
    (gzip_ok(g, req, resp), g.vary())
}

/// nginx's `ngx_http_gzip_ok`, the request side of the decision (`gunzip` asks it too):
/// the HTTP version, `Accept-Encoding`, `gzip_proxied` for a request with `Via`, and
/// `gzip_disable`.
pub fn gzip_ok(g: &GzipLoc, req: &Request, resp: &ResponseFacts<'_>) -> bool {
    let version_ok = match req.version() {
        shoal_http::Version::Http09 => false,
        shoal_http::Version::Http10 => g.http_version_10(),
        shoal_http::Version::Http11 | shoal_http::Version::Http2 => true,
    };
    if !version_ok || !accepts_gzip(req) {
        return false;
    }
    if req.header("via").is_some() && !proxied_ok(g, req, resp) {
        return false;
    }
    let ua = req
        .header("user-agent")
        .map(String::from_utf8_lossy)
        .unwrap_or_default();
    if g.disable_msie6() && msie6(&ua) {
        return false;
    }
    !g.disable
        .as_ref()
        .is_some_and(|list| list.iter().any(|re| re.is_match(&ua)))
}

/// `gzip_proxied` for a request that came through a proxy (it has `Via`), in nginx's order:
/// `any`; `auth` with an Authorization header; then an `Expires` header alone decides (only
/// `expired` with a date already past compresses); then a `Cache-Control` header alone decides
/// (`no-cache`, `no-store`, `private`); then `no_last_modified` / `no_etag` can only refuse.
fn proxied_ok(g: &GzipLoc, req: &Request, resp: &ResponseFacts<'_>) -> bool {
    let p = g.proxied();
    if p == Proxied::default() {
        return false;
    }
    if p.any {
        return true;
    }
    if p.auth && req.header("authorization").is_some() {
        return true;
    }
    if let Some(e) = (resp.header)("expires") {
        if !p.expired {
            return false;
        }
        let Some(at) = shoal_http::date::parse(e.as_bytes()) else {
            return false;
        };
        return at < std::time::SystemTime::now();
    }
    if let Some(cc) = (resp.header)("cache-control") {
        let has = |token: &str| cc.split(',').any(|t| t.trim().eq_ignore_ascii_case(token));
        return (p.no_cache && has("no-cache"))
            || (p.no_store && has("no-store"))
            || (p.private && has("private"));
    }
    if p.no_last_modified && (resp.header)("last-modified").is_some() {
        return false;
    }
    if p.no_etag && (resp.header)("etag").is_some() {
        return false;
    }
    true
}

/// Whether a plain file answer of `content_type` and `size` would be compressed for `req`
/// (the static handler asks, because a compressed answer is never a range).
pub fn would_compress(g: &GzipLoc, req: &Request, content_type: &str, size: u64) -> bool {
    let facts = ResponseFacts {
        status: 200,
        content_type: Some(content_type),
        content_length: Some(size),
        already_encoded: false,
        head_only: req.method() == "HEAD",
        // A file has a Last-Modified and an ETag; their values do not matter here.
        header: &|name| matches!(name, "last-modified" | "etag").then_some(""),
    };
    decide(g, req, &facts).0
}

/// `gzip_static`: whether to look for `FILE.gz` for this request (`on`: the client accepts
/// gzip and passes the same request checks as the gzip filter; `always`: every client).
pub fn static_wanted(g: &GzipLoc, req: &Request) -> bool {
    match g.static_() {
        GzipStatic::Off => false,
        GzipStatic::Always => true,
        GzipStatic::On => {
            let version_ok = match req.version() {
                shoal_http::Version::Http09 => false,
                shoal_http::Version::Http10 => g.http_version_10(),
                shoal_http::Version::Http11 | shoal_http::Version::Http2 => true,
            };
            let ua = req
                .header("user-agent")
                .map(|u| shoal_http::lossy(u).into_owned())
                .unwrap_or_default();
            version_ok
                && accepts_gzip(req)
                && !(g.disable_msie6() && msie6(&ua))
                && !g
                    .disable
                    .as_ref()
                    .is_some_and(|l| l.iter().any(|re| re.is_match(&ua)))
                && (req.header("via").is_none() || g.proxied().any)
        }
    }
}

/// The gzip filter's place in the module list: its header filter decides, and adds a
/// [`Compressor`] to the answer's body filters at the level it chose.
pub struct Module;

impl crate::http::modules::HttpModule for Module {
    type Loc = ();
    const DIRECTIVES: &'static [crate::conf::Command] = &[];

    fn merge(_: &mut (), _: &()) {}

    fn header_filter(
        _: &(),
        cx: &crate::http::modules::Cx<'_, '_, '_>,
        reply: &mut Box<crate::http::reply::Reply>,
    ) {
        if let Some(level) = header_filter(reply, cx.r.req, cx.lc) {
            let len = known_length(reply);
            reply.filters.push(Box::new(Compressor::new(level, len)));
        }
    }
}

/// The body's length as this filter sees it: none once an earlier filter changes it (the
/// charset filter recoding to or from UTF-8 clears nginx's `Content-Length` before gzip looks).
fn known_length(reply: &crate::http::reply::Reply) -> Option<u64> {
    if reply.filters.iter().all(|f| f.keeps_length()) {
        reply.body.length()
    } else {
        None
    }
}

/// shoal's own `Vary: Accept-Encoding`, once whichever of gzip, `gzip_static` and gunzip says
/// it first (nginx's `r->gzip_vary` is a flag; an upstream's own `Vary` is another line).
/// nginx writes it in a place of its own, after `Connection`, before every other header:
/// first of the handler's.
pub(crate) fn add_vary(reply: &mut crate::http::reply::Reply) {
    if !reply.headers.iter().any(|(n, _)| *n == "Vary") {
        reply.headers.insert(0, ("Vary", "Accept-Encoding".into()));
    }
}

/// The gzip header filter: decides, and adjusts the headers of a compressed answer.
/// Returns the compression level to use.
pub fn header_filter(
    reply: &mut crate::http::reply::Reply,
    req: &shoal_http::Request,
    lc: &crate::http::LocConf,
) -> Option<u32> {
    if !lc.gzip.enable() {
        return None;
    }
    let seen: &crate::http::reply::Reply = reply;
    // A static file's time is not a Last-Modified header yet when nginx's gzip filter looks
    // (it is written by the header filter, later); only a proxied one would be.
    let header = |name: &str| match name {
        "last-modified" if !seen.proxied => None,
        _ => seen.header(name),
    };
    let facts = ResponseFacts {
        status: seen.status,
        content_type: seen.content_type.as_deref(),
        content_length: known_length(seen),
        already_encoded: seen
            .header("content-encoding")
            .is_some_and(|v| !v.is_empty()),
        head_only: req.method() == "HEAD",
        header: &header,
    };
    let (compress, vary) = decide(&lc.gzip, req, &facts);
    if vary {
        add_vary(reply);
    }
    if !compress {
        return None;
    }
    reply.headers.retain(|(n, _)| *n != "Accept-Ranges");
    if reply.proxied {
        reply
            .extra
            .retain(|(n, _)| !n.eq_ignore_ascii_case("accept-ranges"));
    }
    for (n, v) in reply.headers.iter_mut() {
        if *n == "ETag" && v.starts_with('"') {
            *v = format!("W/{v}").into();
        }
    }
    if reply.proxied {
        for (n, v) in reply.extra.iter_mut() {
            if n.eq_ignore_ascii_case("etag") && v.starts_with('"') {
                *v = format!("W/{v}").into();
            }
        }
    }
    // After `add_header`'s and userid's (nginx's gzip filter runs after theirs).
    reply.extra.push(("Content-Encoding".into(), "gzip".into()));
    Some(lc.gzip.comp_level())
}

mod compress;
pub mod gunzip;
#[cfg(test)]
mod tests;

pub use compress::{Compressor, SMALL_MAX};
