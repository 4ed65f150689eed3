//! One request's part in the proxy cache, around the proxy's exchange:
//!
//! 1. [`begin`]: is the cache on here (`proxy_cache`, `proxy_cache_methods`), is it a purge, a
//!    bypass? Then the key (`proxy_cache_key`) is looked up: a fresh object is a HIT, answered
//!    from the file (ranges and conditionals by the usual filters); a stale one is EXPIRED, a
//!    bad one (truncated, garbage, another key) a MISS that is logged and replaced.
//! 2. Otherwise the proxy runs, and [`Plan::attach`] decides by nginx's rules ([`super::rules`])
//!    whether its answer is stored: if so, a [`Fill`] rides on the upstream body and receives
//!    every piece the client is sent.
//! 3. The fill writes a temp file (through the `aio threads` pool with `aio_write on`, else on
//!    the worker as nginx does) and renames it into place only if the body came whole; a write
//!    error (a full disk) is logged and the fill dropped, the client is still served.
//!
//! Runs on the worker: the header of a cold object is read through the pool like any file
//! read; the rename and unlink of a fill go through the pool when writes do.

use std::borrow::Cow;
use std::cell::RefCell;
use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::sync::{Arc, Mutex};

use shoal_io::pool::ThreadPool;

use super::file::{self, Header};
use super::rules::{self, Ignore};
use super::stale;
use super::zone::{self, Zone};
use super::{md5, CacheRef, CacheStatus};
use crate::http::proxy::{ProxyPass, UpstreamHeader};
use crate::http::reply::{Body, Outcome, Reply};
use crate::http::request::Req;
use crate::http::rewrite;
use crate::http::upstream::answer::{Kind, Line};
use crate::http::upstream::record::Record;
use crate::http::upstream::{Proto, UpstreamLoc};
use crate::http::LocConf;
use crate::log::Level;

/// What a piece of an upstream body is given to while it goes to the client.
pub trait Tee {
    /// Bytes of the body, in order.
    fn data(&mut self, d: &[u8]);
    /// The body ended: `complete` when it was read to its very end.
    fn end(self: Box<Self>, complete: bool);
}

/// The protocol of a cached location: the proxy (whose `proxy_pass` gives the default key
/// and `proxy_redirect`), or FastCGI, uwsgi, SCGI (whose `*_cache_key` is required).
#[derive(Clone, Copy)]
pub enum Via<'a> {
    Proxy(&'a ProxyPass),
    Other(Proto),
}

impl Via<'_> {
    fn proto(self) -> Proto {
        match self {
            Via::Proxy(_) => Proto::Http,
            Via::Other(p) => p,
        }
    }

    /// The location's settings of the protocol.
    pub fn conf(self, lc: &LocConf) -> &UpstreamLoc {
        self.proto().conf(lc)
    }
}

/// What the cache made of a request before the upstream is asked.
enum Begin {
    /// No cache here (or not for this method).
    Off,
    /// Answered from the cache.
    Hit(Box<Reply>, Rc<RefCell<Record>>),
    /// Go upstream; the plan says what to do with the answer.
    Miss(Box<Plan>),
    /// A status to answer with (500: a zone named by a variable does not exist; a purge's
    /// 204 or 404).
    Status(u16),
}

/// A request that goes upstream with the cache on.
pub struct Plan {
    zone: Arc<Zone>,
    key: String,
    md5: [u8; 16],
    /// `$upstream_cache_status` for it: MISS, EXPIRED or BYPASS.
    pub status: CacheStatus,
    /// Not cacheable from the start (nginx's `u->cacheable = 0` before the upstream is asked):
    /// `proxy_cache_min_uses` is not reached yet, the cache lock timed out, or a range starts
    /// past `proxy_cache_max_range_offset`.
    no_store: bool,
    /// `proxy_no_cache` said no: asked once the answer's headers are in (its variables may
    /// be `$upstream_http_*`), so the request took the lock and dropped its `Range` as any
    /// other, and the answer is still cacheable for the range and not-modified filters, just
    /// not stored.
    no_cache: bool,
    pool: Option<Arc<ThreadPool>>,
    conn: u64,
    /// This request set the index's `updating` mark (the cache lock, or the update of an
    /// expired object): it is cleared when the plan ends without a fill taking it over.
    held: bool,
    /// The expired object, kept for `proxy_cache_use_stale` and `proxy_cache_revalidate`.
    stale: Option<Object>,
    /// The object's `stale-if-error` still covers now.
    stale_error: bool,
    /// The expired object's validators, when `proxy_cache_revalidate` sends them.
    validators: Option<(Option<String>, Option<String>)>,
    /// The location's protocol (its `*_cache*` settings apply).
    proto: Proto,
}

impl Drop for Plan {
    fn drop(&mut self) {
        if self.held {
            self.zone.end_update(&self.md5);
        }
    }
}

/// An update that runs after the stale answer is sent (`proxy_cache_background_update`):
/// nginx's background subrequest. It rides on the answer's [`Record`] to the connection,
/// which runs it before it reads the next request (as nginx's main request waits for it).
pub struct Background {
    plan: Box<Plan>,
    rw: rewrite::State,
    internal: bool,
}

impl std::fmt::Debug for Background {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Background({})", self.plan.key)
    }
}

fn truthy(
    vars: &crate::variables::Vars<'_>,
    list: Option<&Vec<crate::variables::Template>>,
) -> bool {
    list.is_some_and(|l| {
        l.iter().any(|t| {
            let v = vars.eval(t);
            !v.is_empty() && v != "0"
        })
    })
}

fn count(zone: &Zone, hit: bool) {
    let c = if hit {
        &zone.stats.hits
    } else {
        &zone.stats.misses
    };
    c.add(1);
}

/// The default `proxy_cache_key`: nginx 1.22's is not what its documentation says
/// (`$scheme$proxy_host$request_uri`) but `http://HOST` as `proxy_pass` writes it, then the
/// URI as sent upstream (`ngx_http_proxy_create_key`): the client's unparsed URI when
/// `proxy_pass` has no URI part and nothing changed it, else the URI with the location's prefix
/// replaced by `proxy_pass`'s (checked against nginx's file names).
fn default_key(
    r: &Req<'_, '_>,
    pass: &ProxyPass,
    rw: &rewrite::State,
    internal: bool,
    vars: &crate::variables::Vars<'_>,
) -> String {
    let uri: Option<Cow<'_, [u8]>> = match &pass.target {
        crate::http::proxy::Target::Dynamic { .. } => None,
        _ => {
            let parts = crate::http::proxy::request::UriParts::new(
                r.req,
                rw,
                internal,
                rw.quoted_uri || internal,
            );
            // Without a URI part, an unchanged request goes upstream as the client sent it:
            // borrowed, not copied (the usual case).
            Some(if pass.uri.is_none() && !parts.changed {
                Cow::Borrowed(parts.unparsed)
            } else {
                Cow::Owned(crate::http::proxy::request::upstream_uri(
                    &parts,
                    pass.uri.as_deref(),
                    &pass.location,
                ))
            })
        }
    };
    let _ = vars;
    let uri = shoal_http::lossy(uri.as_deref().unwrap_or(r.req.uri()));
    // Sized once: growing it piece by piece was two reallocations per request.
    let mut k = String::with_capacity("http://".len() + pass.host.len() + uri.len());
    k.push_str("http://");
    k.push_str(&pass.host);
    k.push_str(&uri);
    k
}

/// How often a request waiting on the cache lock looks again (nginx looks every 500 ms at
/// most; shoal sooner, the waiters are few and the look is one shard lock).
const LOCK_POLL: std::time::Duration = std::time::Duration::from_millis(20);

/// The lookup for a request in a proxied location (see the module's doc): `Ok(None)`, no
/// cache here; `Ok(Some(plan))`, go upstream with the plan; `Err(outcome)`, answered from the
/// cache (a HIT, its record in `hit_record`) or by it (a purge, a zone that does not exist).
pub async fn begin(
    r: &Req<'_, '_>,
    lc: &LocConf,
    via: Via<'_>,
    rw: &rewrite::State,
    internal: bool,
    method: &str,
    hit_record: &mut Option<Rc<RefCell<Record>>>,
) -> Result<Option<Box<Plan>>, Outcome> {
    match lookup(r, lc, via, rw, internal, method).await {
        Begin::Off => Ok(None),
        Begin::Miss(plan) => Ok(Some(plan)),
        Begin::Hit(reply, record) => {
            *hit_record = Some(record);
            Err(Outcome::Final(reply))
        }
        Begin::Status(204) => Err(Outcome::Final(Reply::boxed(204))),
        Begin::Status(code) => Err(Outcome::Error(code)),
    }
}

async fn lookup(
    r: &Req<'_, '_>,
    lc: &LocConf,
    via: Via<'_>,
    rw: &rewrite::State,
    internal: bool,
    method: &str,
) -> Begin {
    let c = &via.conf(lc).cache;
    let purge = method == "PURGE" && c.purge.is_some();
    if !c.enabled() || (!c.caches_method(method) && !purge) {
        return Begin::Off;
    }
    // Made where it will live (a HIT hands it on as it is).
    let record = match via {
        Via::Proxy(pass) => Record::start(&pass.host, pass.port),
        Via::Other(_) => Record::start(&crate::http::upstream::record::empty_host(), 0),
    };
    let (zone_name, key, bypass, pool, variant_of) = {
        let rec = record.borrow();
        let mut vars = r.vars_rw(rw, lc);
        vars.upstream = Some(&rec);
        let zone_name = match &c.cache {
            Some(CacheRef::Zone(n)) => std::borrow::Cow::Borrowed(n.as_str()),
            Some(CacheRef::Var(t)) => std::borrow::Cow::Owned(vars.eval(t)),
            _ => return Begin::Off,
        };
        let key = match &c.key {
            Some(t) => vars.eval(t),
            None => match via {
                Via::Proxy(pass) => default_key(r, pass, rw, internal, &vars),
                // `*_cache_key` is required there (checked with the configuration).
                Via::Other(_) => return Begin::Off,
            },
        };
        if purge && !truthy(&vars, c.purge.as_deref()) {
            return Begin::Off;
        }
        let bypass = truthy(&vars, c.bypass.as_deref());
        let pool = crate::http::aio::pool_for(lc.aio.as_ref(), &vars, r.info.number)
            .ok()
            .flatten();
        (zone_name, key, bypass, pool, variant_request(r.req))
    };
    // The zone of the request's own configuration: after a reload that gave the name another
    // directory, a request still under the old one keeps the old zone.
    let Some(zone) = r
        .cache_zones
        .and_then(|zones| zones.get(zone_name.as_ref()))
    else {
        crate::conn_log!(
            Level::Error,
            r.info.number,
            "cache \"{zone_name}\" not found{}",
            r.log_ctx()
        );
        return Begin::Status(500);
    };
    if purge {
        return Begin::Status(purge_key(zone, &key));
    }
    // Files changed behind shoal's back since the last look (see `hot`).
    super::hot::take_changes();
    // The worker's copy, found by the key itself, brings the key's MD5 with it; otherwise it
    // is computed, once per request (the hit path needs the digest only, not its hex name).
    let found = super::hot::find(zone, key.as_bytes());
    let md5 = match &found {
        Some(f) => f.md5,
        None => md5::md5(key.as_bytes()),
    };
    // The plan of a request that goes upstream (a fresh HIT needs none).
    let make_plan = |key: String, no_store: bool| Plan {
        zone: zone.clone(),
        key,
        md5,
        status: CacheStatus::Miss,
        no_store,
        no_cache: false,
        pool: pool.clone(),
        conn: r.info.number,
        held: false,
        stale: None,
        stale_error: false,
        validators: None,
        proto: via.proto(),
    };
    if bypass {
        let mut plan = make_plan(key, false);
        plan.status = CacheStatus::Bypass;
        return Begin::Miss(Box::new(plan));
    }
    // `proxy_cache_max_range_offset`: a range starting beyond it goes upstream (the `Range`
    // with it), and the answer is not stored.
    if let (Some(max), Some(range)) = (c.max_range_offset, r.req.header("range")) {
        if range_beyond(range, max) {
            count(zone, false);
            return Begin::Miss(Box::new(make_plan(key, true)));
        }
    }
    // One time for the index's use and the copy's freshness: the request's start, in
    // seconds (as nginx's cached time).
    let now = crate::http::request::request_unix_secs();
    let node = zone.touch_at(&md5, now);
    // The worker's copy, if the index still vouches for it (see `hot`): fresh, it is the
    // answer (the usual HIT, with nothing more to look at or plan).
    let mut from_hot = match found
        .and_then(|f| f.confirm(key.as_bytes(), &node))
        .map(|obj| obj.opened_at(now))
    {
        Some(Opened::Fresh(obj)) if !obj.variant_mismatch(&variant_of) => {
            count(zone, true);
            return hit(obj, CacheStatus::Hit, lc, via, r, record);
        }
        other => other,
    };
    // nginx's "scarce" object: asked for fewer than `proxy_cache_min_uses` times; not
    // stored, and no lock is taken for it.
    let scarce = node.uses < c.min_uses() && !node.exists;
    let mut plan = make_plan(key, scarce);
    let lock = c.lock() && !scarce;
    // `proxy_cache_lock_timeout` counts from the first wait (a HIT reads no clock for it).
    let mut wait_until = None;
    let mut known_absent = !node.exists && !zone.is_cold();
    loop {
        let opened = if let Some(opened) = from_hot.take() {
            opened
        } else if known_absent {
            Opened::None
        } else {
            // (Boxed: a read from disk, and its future would otherwise size every
            // connection's task; the worker's own copies answer without it.)
            let opened = Box::pin(open_object(
                zone,
                &plan,
                pool.as_deref(),
                lc,
                r.info.number,
                &node,
            ))
            .await;
            if let Opened::Fresh(obj) | Opened::Stale(obj) = &opened {
                super::hot::put(zone, &md5, plan.key.as_bytes(), &node, obj);
            }
            opened
        };
        let obj = match opened {
            Opened::Fresh(obj) | Opened::Stale(obj) if obj.variant_mismatch(&variant_of) => {
                count(zone, false);
                return Begin::Miss(Box::new(plan));
            }
            Opened::Fresh(obj) => {
                count(zone, true);
                return hit(obj, CacheStatus::Hit, lc, via, r, record);
            }
            Opened::Stale(obj) => obj,
            Opened::None => {
                if !lock || plan.no_store {
                    count(zone, false);
                    return Begin::Miss(Box::new(plan));
                }
                // `proxy_cache_lock`: one request fills, the others wait for its object.
                if zone.begin_update(&md5, Some(c.lock_age())) {
                    plan.held = true;
                    count(zone, false);
                    return Begin::Miss(Box::new(plan));
                }
                let now = std::time::Instant::now();
                let wait_until = *wait_until.get_or_insert(now + c.lock_timeout());
                if now >= wait_until {
                    crate::conn_log!(
                        Level::Info,
                        r.info.number,
                        "cache lock timeout{}",
                        r.log_ctx()
                    );
                    plan.no_store = true;
                    count(zone, false);
                    return Begin::Miss(Box::new(plan));
                }
                tokio::time::sleep(LOCK_POLL.min(wait_until - now)).await;
                known_absent = !zone.peek(&md5).is_some_and(|n| n.exists);
                continue;
            }
        };
        return expired(obj, plan, r, lc, via, rw, internal, record);
    }
}

/// A cached object answers: HIT, UPDATING or STALE.
fn hit(
    obj: Object,
    status: CacheStatus,
    lc: &LocConf,
    via: Via<'_>,
    r: &Req<'_, '_>,
    record: Rc<RefCell<Record>>,
) -> Begin {
    record.borrow_mut().cache_status = Some(status);
    let reply = obj.into_reply(lc, via, r, &record);
    Begin::Hit(reply, record)
}

/// An expired object (nginx's `ngx_http_file_cache_read` and `ngx_http_upstream_cache`): the
/// first request to find it updates it (upstream as EXPIRED, or STALE at once with
/// `proxy_cache_background_update`); while it does, others are answered UPDATING if
/// `proxy_cache_use_stale updating` or the object's `stale-while-revalidate` allows, else they
/// go upstream too.
#[allow(clippy::too_many_arguments)]
fn expired(
    obj: Object,
    mut plan: Plan,
    r: &Req<'_, '_>,
    lc: &LocConf,
    via: Via<'_>,
    rw: &rewrite::State,
    internal: bool,
    record: Rc<RefCell<Record>>,
) -> Begin {
    let c = &via.conf(lc).cache;
    let zone = plan.zone.clone();
    let now = zone::now();
    let h = &obj.header;
    let stale_updating = h.valid_sec + h.updating_sec >= now;
    plan.stale_error = h.valid_sec + h.error_sec >= now;
    let may_update_stale = c.use_stale() & stale::UPDATING != 0 || stale_updating;
    let mine = zone.begin_update(&plan.md5, Some(std::time::Duration::MAX));
    if mine {
        plan.held = true;
        if may_update_stale && c.background_update() {
            count(&zone, true);
            plan.status = CacheStatus::Expired;
            let validators = c.revalidate().then(|| validators_of(&obj));
            let mut bg_plan = plan;
            bg_plan.validators = validators;
            let begin = hit(obj, CacheStatus::Stale, lc, via, r, record);
            if let Begin::Hit(_, rec) = &begin {
                rec.borrow_mut().background = Some(Box::new(Background {
                    plan: Box::new(bg_plan),
                    rw: clone_state(rw),
                    internal,
                }));
            }
            return begin;
        }
    } else if may_update_stale {
        count(&zone, true);
        return hit(obj, CacheStatus::Updating, lc, via, r, record);
    }
    count(&zone, false);
    plan.status = CacheStatus::Expired;
    if c.revalidate() {
        plan.validators = Some(validators_of(&obj));
    }
    plan.stale = Some(obj);
    Begin::Miss(Box::new(plan))
}

/// `$upstream_cache_last_modified` and `$upstream_cache_etag` of an object.
fn validators_of(obj: &Object) -> (Option<String>, Option<String>) {
    let lm = (obj.header.last_modified >= 0).then(|| {
        let d = shoal_http::date::format(
            std::time::UNIX_EPOCH + std::time::Duration::from_secs(obj.header.last_modified as u64),
        );
        shoal_http::lossy(&d).into_owned()
    });
    let etag =
        (!obj.header.etag.is_empty()).then(|| shoal_http::lossy(&obj.header.etag).into_owned());
    (lm, etag)
}

fn clone_state(rw: &rewrite::State) -> rewrite::State {
    rewrite::State {
        uri: rw.uri.clone(),
        args: rw.args.clone(),
        vars: rw.vars.clone(),
        captures: rw.captures.clone(),
        cycles: rw.cycles,
        uri_changed: rw.uri_changed,
        rewritten_break: rw.rewritten_break,
        internal: rw.internal,
        quoted_uri: rw.quoted_uri,
        err_status: None,
    }
}

/// Whether a `Range` value starts at or beyond `max` (nginx's
/// `ngx_http_upstream_cache_check_range`: a suffix range `-N` always does).
fn range_beyond(range: &[u8], max: u64) -> bool {
    if range.len() < 7 || !range[..6].eq_ignore_ascii_case(b"bytes=") {
        return false;
    }
    let mut p = &range[6..];
    while let [b' ', rest @ ..] = p {
        p = rest;
    }
    if p.first() == Some(&b'-') {
        return true;
    }
    let digits = p.iter().take_while(|c| c.is_ascii_digit()).count();
    let offset = std::str::from_utf8(&p[..digits])
        .ok()
        .and_then(|s| s.parse::<u64>().ok())
        .unwrap_or(u64::MAX);
    offset >= max
}

/// The proxy's answer to a planned request: a 304 to a revalidation refreshes the stored
/// object and answers from it (REVALIDATED); an error or a status `proxy_cache_use_stale`
/// (or the object's `stale-if-error`) names answers the expired object (STALE); otherwise the
/// answer goes on, stored if it may be.
pub fn answer(
    mut plan: Box<Plan>,
    outcome: Outcome,
    record: &Rc<RefCell<Record>>,
    lc: &LocConf,
    via: Via<'_>,
    r: &Req<'_, '_>,
    rw: &crate::http::rewrite::State,
) -> Outcome {
    let c = &via.conf(lc).cache;
    if c.no_cache.is_some() {
        let rec = record.borrow();
        let mut vars = r.vars_rw(rw, lc);
        vars.upstream = Some(&rec);
        plan.no_cache = truthy(&vars, c.no_cache.as_deref());
    }
    let use_stale = c.use_stale() & !stale::OFF;
    match outcome {
        // The upstream's answer (not a 499 or a closed request: those are shoal's).
        Outcome::Final(mut reply) if reply.proxied => {
            if plan.stale.is_some() {
                if reply.status == 304 && c.revalidate() {
                    if let Body::Upstream(ub) = std::mem::replace(&mut reply.body, Body::Empty) {
                        ub.finish();
                    }
                    return Outcome::Final(plan.revalidated(record, lc, via, r));
                }
                // An upstream's status is covered by `proxy_cache_use_stale http_*` only, not
                // by `stale-if-error` (nginx 1.22's `ngx_http_upstream_test_next`).
                let bit = stale::of_status(reply.status);
                if bit != 0 && use_stale & bit != 0 {
                    return Outcome::Final(plan.serve_stale(record, lc, via, r));
                }
            }
            plan.attach(&mut reply, record, lc, r.req);
            Outcome::Final(reply)
        }
        Outcome::Error(code) => {
            if plan.stale.is_some() {
                let failed = record.borrow().last_fail;
                let bit = if failed != 0 {
                    failed
                } else {
                    stale::of_status(code) | stale::ERROR
                };
                if use_stale & bit != 0 || plan.stale_error {
                    return Outcome::Final(plan.serve_stale(record, lc, via, r));
                }
            }
            record.borrow_mut().cache_status = Some(plan.status);
            Outcome::Error(code)
        }
        other => {
            record.borrow_mut().cache_status = Some(plan.status);
            other
        }
    }
}

/// `proxy_cache_background_update`'s update, run by the connection once the stale answer is
/// sent: the request goes upstream as a GET, its answer stored (read to its end with no
/// client).
pub async fn update_in_background(r: &Req<'_, '_>, lc: &LocConf, bg: Box<Background>) {
    let Background { plan, rw, internal } = *bg;
    let validators = plan.validators.clone();
    let none = crate::http::client_body::ClientBody::none();
    let cacheable = plan.cacheable();
    let (via, (outcome, record)) = match plan.proto {
        Proto::Http => {
            let Some(pass) = &lc.proxy.pass else {
                return;
            };
            let st = crate::http::proxy::codec::UriState {
                rw: &rw,
                internal,
                validators: validators.as_ref(),
                cacheable,
            };
            (
                Via::Proxy(pass),
                crate::http::proxy::codec::handle(r, lc, pass, st, "GET", &none).await,
            )
        }
        proto => {
            let up = crate::http::upstream::run::Cached {
                validators: validators.as_ref(),
                cacheable,
            };
            (
                Via::Other(proto),
                crate::http::phases::upstream_handle(r, lc, proto, &rw, "GET", &none, up).await,
            )
        }
    };
    let Some(record) = record else {
        return;
    };
    if let Outcome::Final(reply) = answer(plan, outcome, &record, lc, via, r, &rw) {
        if let Body::Upstream(ub) = reply.body {
            ub.drain().await;
        }
    }
}

/// `proxy_cache_purge` of one key (a key ending in `*` purges every key with that prefix):
/// 204 when something was removed, 404 otherwise.
fn purge_key(zone: &Zone, key: &str) -> u16 {
    if let Some(prefix) = key.strip_suffix('*') {
        return if purge_prefix(zone, prefix.as_bytes()) > 0 {
            204
        } else {
            404
        };
    }
    let (_, md5) = file::name_of(key.as_bytes());
    let path = zone.path_of(&md5);
    let in_index = zone.remove(&md5);
    let on_disk = std::fs::remove_file(&path).is_ok();
    if in_index || on_disk {
        204
    } else {
        404
    }
}

/// Removes every object whose key starts with `prefix` (the keys are read from the files).
fn purge_prefix(zone: &Zone, prefix: &[u8]) -> usize {
    let conf = zone.conf();
    let mut n = 0;
    let mut stack = vec![conf.path.clone()];
    while let Some(dir) = stack.pop() {
        let Ok(rd) = std::fs::read_dir(&dir) else {
            continue;
        };
        for e in rd.flatten() {
            let p = e.path();
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                stack.push(p);
                continue;
            }
            let Some(k) = e.file_name().to_str().and_then(md5::unhex) else {
                continue;
            };
            let mut start = vec![0u8; 4096];
            let Ok(f) = File::open(&p) else { continue };
            let got = f.read_at(&mut start, 0).unwrap_or(0);
            if file::key_of(&start[..got]).is_some_and(|key| key.starts_with(prefix)) {
                zone.remove(&k);
                if std::fs::remove_file(&p).is_ok() {
                    n += 1;
                }
            }
        }
    }
    n
}

/// An object read from disk (or the worker's copy of one, [`super::hot`]): cheap to clone.
#[derive(Clone)]
pub struct Object {
    file: Arc<File>,
    len: u64,
    /// The file as it was read (see [`Object::unchanged`]).
    stamp: FileStamp,
    header: Rc<Header>,
    /// The stored head, parsed once (`None`: it does not parse, a 500).
    head: Option<Rc<ParsedHead>>,
    /// The whole file, when it was read whole (a small object): the body is sent from
    /// memory, no second read or sendfile.
    whole: Option<bytes::Bytes>,
}

/// What tells a file changed in place: inode, size, modification and change times.
#[derive(Clone, Copy, PartialEq, Eq)]
struct FileStamp([i64; 6]);

impl FileStamp {
    fn of(m: &std::fs::Metadata) -> FileStamp {
        use std::os::unix::fs::MetadataExt;
        FileStamp([
            m.ino() as i64,
            m.size() as i64,
            m.mtime(),
            m.mtime_nsec(),
            m.ctime(),
            m.ctime_nsec(),
        ])
    }
}

/// A stored head's status line and headers.
struct ParsedHead {
    status: u16,
    reason: String,
    /// The reason phrase is nginx's own for the status (the status line needs no copy of it).
    usual_reason: bool,
    headers: Rc<[(String, String)]>,
    /// What each of `headers` is to a hit's reply, decided once when the head is read (every
    /// hit of the object used to compare each name with a dozen others).
    lines: Box<[StoredLine]>,
    /// The length it tells, against the body stored (set once the body's size is known).
    told: Told,
}

/// What one stored line is to a hit's reply, decided once when the head is read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct StoredLine {
    kind: Kind,
    /// One nginx hides from the client unless `proxy_pass_header` names it (`Date`,
    /// `Server`, `X-Accel-*`...).
    hidden: bool,
}

/// What a stored head says of its body's length: nginx answers a HIT with the stored
/// `Content-Length`, not the file's.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Told {
    /// The body's own (the usual case).
    Body,
    /// None: the upstream sent the answer chunked or to its close.
    Unknown,
    /// A length, and no body: the answer to a HEAD (`proxy_cache_convert_head off`).
    Absent(u64),
}

impl ParsedHead {
    /// What the head tells of a stored body of `body_len` bytes; `Err` with the reason when
    /// the two cannot belong together (a body cut or grown behind the cache's back).
    fn told(&self, body_len: u64) -> Result<Told, file::Invalid> {
        let header = |name: &str| {
            self.headers
                .iter()
                .find(|(n, _)| n.eq_ignore_ascii_case(name))
                .map(|(_, v)| v.as_str())
        };
        if header("transfer-encoding").is_some() {
            return Ok(Told::Unknown);
        }
        let Some(v) = header("content-length") else {
            return Ok(Told::Unknown);
        };
        match v.parse::<u64>() {
            Ok(n) if n == body_len => Ok(Told::Body),
            Ok(n) if body_len == 0 => Ok(Told::Absent(n)),
            Ok(n) if body_len < n => Err(file::Invalid::Truncated),
            _ => Err(file::Invalid::Garbage),
        }
    }
}

impl Object {
    /// Bytes this object keeps in memory.
    pub fn kept_bytes(&self) -> usize {
        let head = self.head.as_ref().map_or(0, |h| {
            h.reason.len()
                + h.headers
                    .iter()
                    .map(|(n, v)| n.len() + v.len() + 48 + std::mem::size_of::<Line>())
                    .sum::<usize>()
        });
        self.whole.as_ref().map_or(0, |b| b.len()) + head + std::mem::size_of::<Header>() + 256
    }

    /// An object of `file` as it is now, with an empty header and no head (for tests).
    #[cfg(test)]
    pub fn of_file(file: File) -> Object {
        let meta = file.metadata().expect("a test file");
        Object {
            file: Arc::new(file),
            len: meta.len(),
            stamp: FileStamp::of(&meta),
            header: Rc::new(Header::default()),
            head: None,
            whole: None,
        }
    }

    /// The held file (for a watch on it).
    pub fn file(&self) -> &File {
        &self.file
    }

    /// Whether the open file is still as it was read (one `fstat`): the index's generation
    /// covers every change shoal makes; this covers a file changed behind its back (truncated
    /// or overwritten in place), which is then read again and, if bad, a logged miss.
    pub fn unchanged(&self) -> bool {
        self.file
            .metadata()
            .is_ok_and(|m| FileStamp::of(&m) == self.stamp)
    }

    fn opened(self) -> Opened {
        self.opened_at(zone::now())
    }

    /// Fresh or stale at `now` (unix seconds).
    fn opened_at(self, now: i64) -> Opened {
        if self.header.valid_sec < now {
            Opened::Stale(self)
        } else {
            Opened::Fresh(self)
        }
    }
}

enum Opened {
    Fresh(Object),
    Stale(Object),
    None,
}

impl Object {
    fn variant_mismatch(&self, req_variant: &dyn Fn(&[u8]) -> [u8; 16]) -> bool {
        !self.header.vary.is_empty() && req_variant(&self.header.vary) != self.header.variant
    }
}

/// The request's variant function: the MD5 of the values of the request headers a `Vary`
/// names (names lowercased, `name:value\n` each, in the Vary's order).
fn variant_request(req: &shoal_http::Request) -> impl Fn(&[u8]) -> [u8; 16] + '_ {
    move |vary: &[u8]| {
        let mut s = Vec::new();
        for name in vary.split(|&c| c == b',') {
            let name = shoal_http::lossy(name).trim().to_ascii_lowercase();
            if name.is_empty() {
                continue;
            }
            s.extend_from_slice(name.as_bytes());
            s.push(b':');
            if let Some(v) = req.header(&name) {
                s.extend_from_slice(v);
            }
            s.push(b'\n');
        }
        md5::md5(&s)
    }
}

/// Opens and checks the object of `plan.key`: a file that is not there is a miss; one that is
/// bad is logged, removed and a miss.
/// A stored object that cannot be served: logged, and removed so that this key is stored
/// anew, unless it is another key's (a wrong key: left alone, and this key is not stored over
/// it, nginx's collision rule).
fn refuse_object(zone: &Zone, plan: &Plan, path: &std::path::Path, conn: u64, why: file::Invalid) {
    crate::conn_log!(
        Level::Crit,
        conn,
        "{why}: \"{}\", key \"{}\"; a miss, the object is replaced",
        path.display(),
        plan.key
    );
    if !matches!(why, file::Invalid::WrongKey) {
        let _ = std::fs::remove_file(path);
        zone.lost(&plan.md5);
    }
}

async fn open_object(
    zone: &Zone,
    plan: &Plan,
    pool: Option<&ThreadPool>,
    lc: &LocConf,
    conn: u64,
    node: &zone::Node,
) -> Opened {
    let path = zone.path_of(&plan.md5);
    let f = match File::open(&path) {
        Ok(f) => Arc::new(f),
        Err(e) => {
            if e.kind() != io::ErrorKind::NotFound {
                crate::conn_log!(
                    Level::Crit,
                    conn,
                    "open() \"{}\" failed {}",
                    path.display(),
                    shoal_conf::os_error(&e)
                );
            }
            zone.lost(&plan.md5);
            return Opened::None;
        }
    };
    let Ok(meta) = f.metadata() else {
        return Opened::None;
    };
    let len = meta.len();
    let stamp = FileStamp::of(&meta);
    let check = lc.aio_residency_check();
    let mut start = match shoal_io::file::read_range(&f, 0, 4096, pool, check).await {
        Ok(b) => b,
        Err(_) => return Opened::None,
    };
    if start.len() >= file::HEADER_SIZE {
        let body_start = u16::from_le_bytes([start[56], start[57]]) as usize;
        if body_start > start.len() && (body_start as u64) <= len {
            match shoal_io::file::read_range(&f, 0, body_start, pool, check).await {
                Ok(b) => start = b,
                Err(_) => return Opened::None,
            }
        }
    }
    let (header, head) = match file::decode(&start, len, plan.key.as_bytes()) {
        Ok((h, head)) => (h, head.to_vec()),
        Err(why) => {
            refuse_object(zone, plan, &path, conn, why);
            return Opened::None;
        }
    };
    // A small object the worker will keep (the index knows its generation) is read whole
    // now, once, so its hits are answered from memory.
    let small = len.saturating_sub(header.body_start as u64)
        <= crate::http::static_files::SMALL_FILE as u64;
    if (start.len() as u64) < len && small && node.exists && node.gen != 0 {
        if let Ok(b) = shoal_io::file::read_range(&f, 0, len as usize, pool, check).await {
            if b.len() as u64 == len {
                start = b;
            }
        }
    }
    let mut parsed = parse_head(&head);
    if let Some(p) = &mut parsed {
        match p.told(len - header.body_start as u64) {
            Ok(t) => p.told = t,
            Err(why) => {
                refuse_object(zone, plan, &path, conn, why);
                return Opened::None;
            }
        }
    }
    let whole = (start.len() as u64 == len).then(|| bytes::Bytes::from(start));
    Object {
        file: f,
        len,
        stamp,
        header: Rc::new(header),
        head: parsed.map(Rc::new),
        whole,
    }
    .opened()
}

/// The status line and headers of a stored head (untrusted: `None` if it does not parse).
fn parse_head(head: &[u8]) -> Option<ParsedHead> {
    let text = std::str::from_utf8(head).ok()?;
    let mut lines = text.split("\r\n");
    let status_line = lines.next()?;
    let mut parts = status_line.splitn(3, ' ');
    let version = parts.next()?;
    if !version.starts_with("HTTP/") {
        return None;
    }
    let status: u16 = parts.next()?.parse().ok()?;
    let reason = parts.next().unwrap_or("").to_string();
    let usual_reason = shoal_http::status::wire_status(status) == status
        && shoal_http::status::reason(status) == Some(reason.as_str());
    let mut headers = Vec::new();
    let mut kinds = Vec::new();
    for l in lines {
        if l.is_empty() {
            continue;
        }
        let (n, v) = l.split_once(':')?;
        let v = v.trim();
        let known = UpstreamHeader::of(n.as_bytes());
        kinds.push(StoredLine {
            kind: Kind::stored(known, n, v, status),
            hidden: known.hidden(),
        });
        headers.push((n.to_string(), v.to_string()));
    }
    Some(ParsedHead {
        status,
        reason,
        usual_reason,
        headers: headers.into(),
        lines: kinds.into(),
        told: Told::Body,
    })
}

impl Object {
    /// The reply a hit sends: the stored head passed on as the proxy passes a fresh one, the
    /// body from the file; the not-modified and range filters apply (nginx's cached answers).
    fn into_reply(
        self,
        lc: &LocConf,
        via: Via<'_>,
        r: &Req<'_, '_>,
        record: &Rc<RefCell<Record>>,
    ) -> Box<Reply> {
        let conf = via.conf(lc);
        let body_start = self.header.body_start as u64;
        let Some(head) = &self.head else {
            return Box::new(crate::http::reply::error_reply(500, lc));
        };
        let status = head.status;
        let headers = &head.headers;
        let mut reply = Reply::boxed(status);
        reply.upstream_status = true;
        // A reason phrase other than nginx's own is kept (the status line is written the same
        // either way; the usual one needs no copy).
        if !head.reason.is_empty() && !head.usual_reason {
            reply.reason = Some(head.reason.clone());
        }
        // nginx takes ranges of a cached answer only when the upstream said `Accept-Ranges`
        // (`ngx_http_upstream_copy_allow_ranges`; checked against nginx 1.22), or always with
        // `proxy_force_ranges`. A header `proxy_hide_header` hides never gets that far, as on
        // the MISS. Whether a line is one of nginx's hidden ones was decided when the head was
        // read.
        let lines = headers
            .iter()
            .zip(head.lines.iter())
            .map(|((name, value), line)| Line {
                name: name.as_bytes(),
                value: value.as_bytes(),
                kind: line.kind,
                hidden: line.hidden,
            });
        let rewrite = |v: &str| match via {
            Via::Proxy(pass) => crate::http::proxy::redirect::redirect(pass, r, lc, record, v),
            Via::Other(_) => None,
        };
        let upstream_allows_ranges = crate::http::upstream::answer::pass_head(
            &mut reply,
            lines,
            true,
            lc,
            conf,
            Some(&rewrite),
            r,
        )
        .allows_ranges;
        let len = self.len.saturating_sub(body_start);
        let file = || Body::File {
            file: self.file,
            offset: body_start,
            len,
            cached: self.whole,
        };
        reply.body = match head.told {
            // No body, but the length the upstream told is passed on, as on the MISS.
            Told::Absent(n) if status == 204 || status == 304 => Body::Absent(n),
            _ if status == 204 || status == 304 => Body::Empty,
            Told::Body => file(),
            // No length, no ranges (nginx's range filter wants one), even forced.
            Told::Unknown => Body::Unsized(Box::new(file())),
            Told::Absent(n) => Body::Absent(n),
        };
        reply.allow_ranges = status == 200
            && head.told != Told::Unknown
            && (conf.force_ranges() || upstream_allows_ranges);
        record.borrow_mut().cached_headers = headers.clone();
        reply
    }
}

impl Plan {
    /// The proxy answered: `$upstream_cache_status` is set, and if the answer may be stored,
    /// a fill is attached to its body.
    pub fn attach(
        &mut self,
        reply: &mut Reply,
        record: &Rc<RefCell<Record>>,
        lc: &LocConf,
        req: &shoal_http::Request,
    ) {
        record.borrow_mut().cache_status = Some(self.status);
        if self.no_store {
            return;
        }
        let Body::Upstream(ub) = &mut reply.body else {
            return;
        };
        let c = &self.proto.conf(lc).cache;
        let mut headers = record.borrow().header_list();
        // FastCGI's and SCGI's `Status` line is theirs, not the answer's: not stored (a HIT
        // could not tell it from a passed one).
        if matches!(self.proto, Proto::Fastcgi | Proto::Scgi) {
            headers.retain(|(n, _)| !n.eq_ignore_ascii_case("status"));
        }
        let ignore = Ignore::of(self.proto.conf(lc));
        let now = zone::now();
        let Some(by_headers) = rules::by_headers(&headers, ignore, now) else {
            return;
        };
        ub.cacheable = true;
        // nginx's `ngx_http_upstream_copy_allow_ranges` for a cacheable answer: the
        // upstream's Accept-Ranges is not passed on, the range filter answers for it (one
        // range at most: see `partial`).
        let before = reply.extra.len();
        reply
            .extra
            .retain(|(n, _)| !n.eq_ignore_ascii_case("accept-ranges"));
        if reply.extra.len() != before {
            reply.allow_ranges = true;
        }
        // With `proxy_buffering off` nginx relays the answer without its event pipe, the only
        // road that writes a cache file: the answer goes to the client, never to the cache.
        // An answer to a HEAD (`proxy_cache_convert_head off`) is stored as any other: its
        // head, the GET's Content-Length in it, and no body (see `Told::Absent`).
        if self.no_cache || !ub.buffering {
            return;
        }
        let Some(st) = rules::with_valid(by_headers, reply.status, c.valid(), now) else {
            return;
        };
        // The head as received (its framing too, as nginx stores it: a HIT tells the length
        // the upstream told, or none).
        let mut head = Vec::with_capacity(512);
        head.extend_from_slice(b"HTTP/1.1 ");
        head.extend_from_slice(reply.status.to_string().as_bytes());
        head.push(b' ');
        head.extend_from_slice(
            reply
                .reason
                .as_deref()
                .or_else(|| shoal_http::status::reason(reply.status))
                .unwrap_or("")
                .as_bytes(),
        );
        head.extend_from_slice(b"\r\n");
        let mut etag = Vec::new();
        let mut last_modified = -1;
        for (n, v) in &headers {
            if n.eq_ignore_ascii_case("connection") || n.eq_ignore_ascii_case("keep-alive") {
                continue;
            }
            if n.eq_ignore_ascii_case("etag") {
                etag = v.as_bytes().to_vec();
            }
            if n.eq_ignore_ascii_case("last-modified") {
                last_modified = shoal_http::date::parse(v.as_bytes())
                    .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
                    .map_or(-1, |d| d.as_secs() as i64);
            }
            head.extend_from_slice(n.as_bytes());
            head.extend_from_slice(b": ");
            head.extend_from_slice(v.as_bytes());
            head.extend_from_slice(b"\r\n");
        }
        head.extend_from_slice(b"\r\n");

        let variant = if st.vary.is_empty() {
            [0; 16]
        } else {
            variant_request(req)(st.vary.as_bytes())
        };
        let header = Header {
            valid_sec: st.valid_sec,
            updating_sec: st.updating_sec,
            error_sec: st.error_sec,
            last_modified: if matches!(reply.status, 200 | 206) {
                last_modified
            } else {
                -1
            },
            date: now,
            etag: if matches!(reply.status, 200 | 206) {
                etag
            } else {
                Vec::new()
            },
            vary: st.vary.into_bytes(),
            variant,
            ..Default::default()
        };
        let Some(start) = file::encode(&header, self.key.as_bytes(), &head) else {
            return;
        };
        self.zone.begin_update(&self.md5, None);
        // The fill clears the mark when it ends.
        self.held = false;
        let temp = self.zone.temp_path_for(&self.md5);
        let final_path = self.zone.path_of(&self.md5);
        // The body to come, as the upstream frames it (not `ub.length`, what the client is
        // told: a HEAD's answer tells the GET's length and has no body).
        let expected = match ub.framing {
            crate::http::upstream::body::Framing::Length(n) => Some(n),
            crate::http::upstream::body::Framing::None => Some(0),
            _ => None,
        }
        .map(|n| n + start.len() as u64);
        let mut fill = Fill {
            shared: Arc::new(Mutex::new(FillFile {
                file: None,
                temp,
                final_path,
                failed: false,
                outstanding: 0,
                ended: None,
                expected,
                zone: self.zone.clone(),
                md5: self.md5,
                valid_sec: st.valid_sec,
                conn: self.conn,
            })),
            pool: if lc.aio_write() {
                self.pool.clone()
            } else {
                None
            },
            buf: Vec::with_capacity(start.len().max(FILL_CHUNK)),
            offset: 0,
            ended: false,
        };
        fill.buf.extend_from_slice(&start);
        ub.tee = Some(Box::new(fill));
    }
}

impl Plan {
    /// The expired object answers (an upstream error `proxy_cache_use_stale` covers): STALE.
    fn serve_stale(
        &mut self,
        record: &Rc<RefCell<Record>>,
        lc: &LocConf,
        via: Via<'_>,
        r: &Req<'_, '_>,
    ) -> Box<Reply> {
        let obj = self.stale.take().expect("checked by the caller");
        record.borrow_mut().cache_status = Some(CacheStatus::Stale);
        obj.into_reply(lc, via, r, record)
    }

    /// The upstream said 304 to a revalidation: the object is fresh again for what the 304's
    /// headers say (else `proxy_cache_valid` for 304; neither: it stays expired, as nginx),
    /// its header rewritten in place, and it answers: REVALIDATED.
    fn revalidated(
        &mut self,
        record: &Rc<RefCell<Record>>,
        lc: &LocConf,
        via: Via<'_>,
        r: &Req<'_, '_>,
    ) -> Box<Reply> {
        let mut obj = self.stale.take().expect("checked by the caller");
        let headers = record.borrow().header_list();
        let conf = self.proto.conf(lc);
        let ignore = Ignore::of(conf);
        let now = zone::now();
        if let Some(st) = rules::decide(304, &headers, conf.cache.valid(), ignore, now) {
            let h = Rc::make_mut(&mut obj.header);
            h.valid_sec = st.valid_sec;
            h.updating_sec = st.updating_sec;
            h.error_sec = st.error_sec;
            h.date = now;
            let path = self.zone.path_of(&self.md5);
            let written = std::fs::OpenOptions::new()
                .write(true)
                .open(&path)
                .and_then(|f| {
                    f.write_all_at(&file::encode_validity(&obj.header), file::VALIDITY_OFFSET)
                });
            match written {
                Ok(()) => self.zone.refreshed(&self.md5, st.valid_sec),
                Err(e) => crate::conn_log!(
                    Level::Crit,
                    self.conn,
                    "pwrite() \"{}\" failed {}",
                    path.display(),
                    shoal_conf::os_error(&e)
                ),
            }
        }
        record.borrow_mut().cache_status = Some(CacheStatus::Revalidated);
        obj.into_reply(lc, via, r, record)
    }

    /// Whether the answer may be stored as far as the request goes (nginx's `u->cacheable`
    /// when the request is made): not scarce, no lock timeout, no range past
    /// `proxy_cache_max_range_offset`. A bypassed request's answer is stored; `proxy_no_cache`
    /// is not asked yet.
    pub fn cacheable(&self) -> bool {
        !self.no_store
    }

    /// The validators `proxy_cache_revalidate` sends upstream for this request.
    pub fn validators(&self) -> Option<&(Option<String>, Option<String>)> {
        self.validators.as_ref()
    }
}

/// The not-modified filter's verdict for an upstream's 200 that is being stored: its
/// validators are in the passed-on headers.
pub fn precondition_of_upstream(
    req: &shoal_http::Request,
    lc: &LocConf,
    reply: &Reply,
) -> Option<u16> {
    let mut probe = Reply::new(200);
    for (n, v) in &reply.extra {
        if n.eq_ignore_ascii_case("etag") {
            probe.headers.push(("ETag", v.clone()));
        } else if n.eq_ignore_ascii_case("last-modified") {
            if let Some(t) = shoal_http::date::parse(v.as_bytes()) {
                probe.mtime = t
                    .duration_since(std::time::UNIX_EPOCH)
                    .ok()
                    .map(|d| d.as_secs() as i64);
                probe.last_modified = Some(shoal_http::date::format(t));
            }
        }
    }
    crate::http::not_modified::precondition(req, lc, &probe)
}

/// Body bytes gathered before one write.
const FILL_CHUNK: usize = 64 * 1024;

/// A fill in progress, on the worker: gathers the body and posts writes.
struct Fill {
    shared: Arc<Mutex<FillFile>>,
    pool: Option<Arc<ThreadPool>>,
    buf: Vec<u8>,
    offset: u64,
    /// `end` was called; a fill dropped without it (its body dropped unread) ends incomplete.
    ended: bool,
}

impl Drop for Fill {
    fn drop(&mut self) {
        if !self.ended {
            self.ended = true;
            lock(&self.shared).ended = Some(false);
            self.post(None);
        }
    }
}

/// The temp file's side, shared with the pool threads that write it.
struct FillFile {
    file: Option<File>,
    temp: PathBuf,
    final_path: PathBuf,
    failed: bool,
    /// Writes posted and not done.
    outstanding: usize,
    /// The body ended (whole or not); the last write commits or discards.
    ended: Option<bool>,
    /// The file's size when whole (the body's Content-Length was known).
    expected: Option<u64>,
    zone: Arc<Zone>,
    md5: [u8; 16],
    valid_sec: i64,
    conn: u64,
}

fn lock(m: &Mutex<FillFile>) -> std::sync::MutexGuard<'_, FillFile> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl FillFile {
    fn write(&mut self, data: &[u8], off: u64) {
        if self.failed {
            return;
        }
        if self.file.is_none() {
            if let Some(dir) = self.temp.parent() {
                let _ = std::fs::create_dir_all(dir);
            }
            match std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(&self.temp)
            {
                Ok(f) => self.file = Some(f),
                Err(e) => {
                    self.fail("open()", &e);
                    return;
                }
            }
        }
        let f = self.file.as_ref().expect("opened above");
        if let Err(e) = f.write_all_at(data, off) {
            self.fail("pwrite()", &e);
        }
    }

    fn fail(&mut self, call: &str, e: &io::Error) {
        crate::conn_log!(
            Level::Crit,
            self.conn,
            "{call} \"{}\" failed {}",
            self.temp.display(),
            shoal_conf::os_error(e)
        );
        self.zone
            .stats
            .write_errors
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        self.failed = true;
        self.file = None;
        let _ = std::fs::remove_file(&self.temp);
    }

    /// All writes are done and the body ended: rename into place, or drop the temp file.
    fn commit(&mut self) {
        let whole = self.ended == Some(true) && !self.failed;
        let file = self.file.take();
        let size = file
            .as_ref()
            .and_then(|f| f.metadata().ok())
            .map(|m| (m.len(), m));
        let complete = whole
            && match (self.expected, &size) {
                (Some(want), Some((got, _))) => want == *got,
                (None, Some(_)) => true,
                _ => false,
            };
        if !complete {
            if file.is_some() || size.is_some() {
                let _ = std::fs::remove_file(&self.temp);
            }
            self.zone.end_update(&self.md5);
            return;
        }
        drop(file);
        let disk = size.map_or(0, |(len, m)| {
            use std::os::unix::fs::MetadataExt;
            (m.blocks() * 512).max(len)
        });
        match place(&self.temp, &self.final_path) {
            Ok(()) => self.zone.stored(&self.md5, disk, self.valid_sec),
            Err(e) => {
                crate::conn_log!(
                    Level::Crit,
                    self.conn,
                    "rename() \"{}\" to \"{}\" failed {}",
                    self.temp.display(),
                    self.final_path.display(),
                    shoal_conf::os_error(&e)
                );
                let _ = std::fs::remove_file(&self.temp);
                self.zone.end_update(&self.md5);
            }
        }
    }
}

/// Moves a complete temp file to its object's name: a rename (atomic), or across filesystems
/// a copy beside the object, then a rename.
fn place(temp: &Path, dest: &Path) -> io::Result<()> {
    if let Some(dir) = dest.parent() {
        std::fs::create_dir_all(dir)?;
    }
    match std::fs::rename(temp, dest) {
        Ok(()) => Ok(()),
        Err(e) if e.raw_os_error() == Some(libc::EXDEV) => {
            let mut beside = dest.as_os_str().to_owned();
            beside.push(format!(".{}", std::process::id()));
            let beside = PathBuf::from(beside);
            let r = std::fs::copy(temp, &beside).and_then(|_| std::fs::rename(&beside, dest));
            let _ = std::fs::remove_file(temp);
            if r.is_err() {
                let _ = std::fs::remove_file(&beside);
            }
            r
        }
        Err(e) => Err(e),
    }
}

/// Runs a write (or the commit) of `shared`; the last one to finish after the end commits.
fn run_write(shared: &Mutex<FillFile>, data: Option<(Vec<u8>, u64)>) {
    let mut f = lock(shared);
    if let Some((d, off)) = data {
        f.write(&d, off);
        f.outstanding -= 1;
    }
    if f.outstanding == 0 && f.ended.is_some() {
        f.commit();
    }
}

impl Fill {
    fn post(&mut self, data: Option<(Vec<u8>, u64)>) {
        let shared = self.shared.clone();
        if data.is_some() {
            lock(&shared).outstanding += 1;
        }
        match &self.pool {
            Some(pool) => {
                let task_shared = shared.clone();
                let task_data = data;
                if let Err(o) = pool.post(move || run_write(&task_shared, task_data)) {
                    crate::error_log!(Level::Error, "{o}");
                    // The task was dropped: the fill is given up, the rest still commits.
                    let mut f = lock(&shared);
                    f.failed = true;
                    f.outstanding = f.outstanding.saturating_sub(1);
                    drop(f);
                    run_write(&shared, None);
                }
            }
            None => run_write(&shared, data),
        }
    }

    fn flush(&mut self) {
        if self.buf.is_empty() {
            return;
        }
        let data = std::mem::replace(&mut self.buf, Vec::with_capacity(FILL_CHUNK));
        let off = self.offset;
        self.offset += data.len() as u64;
        self.post(Some((data, off)));
    }
}

impl Tee for Fill {
    fn data(&mut self, d: &[u8]) {
        if lock(&self.shared).failed {
            return;
        }
        self.buf.extend_from_slice(d);
        if self.buf.len() >= FILL_CHUNK {
            self.flush();
        }
    }

    fn end(mut self: Box<Self>, complete: bool) {
        if complete {
            self.flush();
        }
        self.ended = true;
        lock(&self.shared).ended = Some(complete);
        self.post(None);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stored_heads_lines_are_classified_once_as_a_hit_passes_them() {
        let head = b"HTTP/1.1 200 OK\r\nServer: up\r\nContent-Type: text/plain\r\n\
            content-length: 5\r\nAccept-Ranges: bytes\r\nETag: \"e\"\r\n\
            Last-Modified: Sun, 06 Nov 1994 08:49:37 GMT\r\nX-Accel-Expires: 10\r\n\
            Location: /x\r\nX-Other: y\r\nConnection: close\r\n\r\n";
        let p = parse_head(head).expect("parses");
        assert!(p.usual_reason);
        let kinds: Vec<Kind> = p.lines.iter().map(|l| l.kind).collect();
        let lm = shoal_http::date::format(
            std::time::UNIX_EPOCH + std::time::Duration::from_secs(784111777),
        );
        assert_eq!(
            kinds,
            [
                Kind::Other,
                Kind::ContentType,
                Kind::Dropped,
                Kind::AcceptRanges,
                Kind::ETag,
                Kind::LastModified(Some((784111777, lm))),
                Kind::Other,
                Kind::Location,
                Kind::Other,
                Kind::Dropped,
            ]
        );
        // `hidden` is what a location without `proxy_hide_header`/`proxy_pass_header` says.
        let plain = crate::http::proxy::ProxyLoc::default();
        for ((name, _), line) in p.headers.iter().zip(p.lines.iter()) {
            assert_eq!(line.hidden, !plain.passes(name), "{name}");
        }
        assert!(p.lines[0].hidden && p.lines[6].hidden && !p.lines[8].hidden);
    }

    #[test]
    fn last_modified_of_another_status_and_an_unusual_reason_are_kept_as_they_came() {
        let p = parse_head(
            b"HTTP/1.1 404 Gone Fishing\r\nLast-Modified: Sun, 06 Nov 1994 08:49:37 GMT\r\n\r\n",
        )
        .expect("parses");
        assert!(!p.usual_reason);
        assert_eq!(p.lines[0].kind, Kind::LastModified(None));
        let p = parse_head(b"HTTP/1.1 200 OK\r\nLast-Modified: yesterday\r\n\r\n").expect("parses");
        assert_eq!(p.lines[0].kind, Kind::LastModified(None));
    }
}
