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
    /// Answered from the cache (or redirected by the `X-Accel-Redirect` it stored).
    Hit(Outcome, Rc<RefCell<Record>>),
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
        Begin::Hit(outcome, record) => {
            *hit_record = Some(record);
            Err(outcome)
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
        let pool = crate::http::aio::pool_for(lc.aio.as_ref(), &vars, r, "")
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
    // nginx passes a cached head through the upstream's header processing: an
    // `X-Accel-Redirect` stored by a location that ignored it redirects here.
    let conf = via.conf(lc);
    let target = crate::http::upstream::accel::cached_target(&record.borrow(), conf);
    let outcome = match target {
        Some(to) => crate::http::upstream::accel::redirect(r, to, reply, conf, &record),
        None => Outcome::Final(reply),
    };
    Begin::Hit(outcome, record)
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
        upstream: None,
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

mod fill;
mod object;
#[cfg(test)]
mod tests;

pub use fill::precondition_of_upstream;
pub use object::Object;
use object::*;
