//! nginx's ngx_http_limit_req_module: `limit_req_zone`, `limit_req` (`burst`, `nodelay`,
//! `delay`), `limit_req_status`, `limit_req_log_level`, `limit_req_dry_run` and
//! `$limit_req_status`.
//!
//! A zone keeps, per key, nginx's leaky bucket: the excess in thousandths of a request and
//! the time of the last accounted request in milliseconds. A request at `now` makes
//! `excess = max(0, excess − rate × ms / 1000 + 1000)` (the rate in thousandths of a request
//! per second, so `30r/m` drains 500 per second and `1r/m` 16, nginx's integer division);
//! over `burst` it is refused with `limit_req_status` (503), and within it, delayed by
//! `(excess − delay) × 1000 / rate` ms when the excess is over `delay=` (0 by default,
//! unbounded with `nodelay`). Several `limit_req` of a location are looked up in order; only
//! the last accounts at lookup time, the earlier ones when all passed, and the longest delay
//! wins (its excess and zone are what the log line says). A key evaluating to nothing is not
//! accounted; one over 65535 bytes is logged and skipped.
//!
//! The log lines are nginx's: `limiting requests, excess: 1.000 by zone "one"` at
//! `limit_req_log_level`, `delaying request, excess: 0.500, by zone "one"` one level lower
//! (`info` stays `info`), both with `, dry run` after the verb in dry-run mode, and
//! `could not allocate node in limit_req zone "one"` at `alert` (without the request: nginx
//! writes it to the cycle's log) when even evicting the least recently used state left no
//! room. The state of a new key first drops up to two states idle for a minute and drained;
//! a full zone drops its oldest.
//!
//! The access phase's preaccess step calls [`LimitReqLoc::check`] once per main request (nginx
//! skips it for a request whose `$limit_req_status` is set, as after an internal redirect),
//! with the client, an evaluator for the keys' variables and [`now_ms`]; it waits out a
//! [`Action::Delay`] on its timer, and sets `$limit_req_status` from [`Outcome::status`].

use std::fmt;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use shoal_conf::{Directive, Error};

use crate::conf::{err, flag_arg, set_once, Args, Builder, Command, Ctx, Scope};
use crate::error;
use crate::http::access::Client;
use crate::http::limit_zone::{self, Key, Registry, Shards, Tag, Zone};
use crate::http::loc_conf;
use crate::log::Level;
use crate::variables::Template;

pub use crate::http::limit_zone::now_ms;

pub static DIRECTIVES: &[Command] = &[
    Command::new(
        "limit_req_zone",
        Ctx::HTTP,
        Args::Take(3, 3),
        set_limit_req_zone,
    ),
    Command::new("limit_req", Ctx::HSL, Args::Take(1, 3), set_limit_req),
    Command::new("limit_req_status", Ctx::HSL, Args::ONE, set_status),
    Command::new("limit_req_log_level", Ctx::HSL, Args::ONE, set_log_level),
    Command::new("limit_req_dry_run", Ctx::HSL, Args::Flag, set_dry_run),
];

/// A state's node in nginx's slab: 80 bytes before the key.
const NODE: u64 = 80;
/// The longest key nginx accounts (its node stores the length in 16 bits).
const MAX_KEY: usize = 65535;

/// One key's bucket.
#[derive(Clone, Copy, Debug, Default)]
pub struct Bucket {
    /// In thousandths of a request.
    excess: u64,
    /// When it was last accounted ([`now_ms`]).
    last: u64,
    /// Requests between their lookup and their accounting (several `limit_req`): such a
    /// state is not evicted.
    count: u32,
    /// Made by a lookup that did not account: its first accounting finds no excess (nginx's
    /// `last = 0`, "long ago").
    fresh: bool,
}

// SAFETY: numbers and a flag.
unsafe impl shoal_io::shm::Plain for Bucket {}

/// A zone's states (shared by every worker and kept across reloads).
pub type Memory = Shards<Bucket>;

/// A `limit_req_zone`, from its first mention in the configuration.
pub struct ReqZone {
    name: String,
    decl: OnceLock<Decl>,
    memory: OnceLock<Arc<Memory>>,
}

#[derive(Debug)]
struct Decl {
    key: Key,
    /// Thousandths of a request per second (nginx's `ctx->rate`).
    rate: u64,
}

impl fmt::Debug for ReqZone {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ReqZone")
            .field("name", &self.name)
            .field("decl", &self.decl.get())
            .finish()
    }
}

/// What a key's lookup found (nginx's `ngx_http_limit_req_lookup` results).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Lookup {
    /// Over the burst, with this excess.
    Busy(u64),
    /// No room for a new state.
    NoRoom,
    /// Within the burst; not accounted yet (an earlier `limit_req` of several).
    Held,
    /// Within the burst and accounted, with this excess.
    Done(u64),
}

impl ReqZone {
    fn new(name: &str) -> ReqZone {
        ReqZone {
            name: name.to_string(),
            decl: OnceLock::new(),
            memory: OnceLock::new(),
        }
    }

    /// A zone with its memory, outside any configuration (tests).
    pub fn standalone(
        name: &str,
        size: u64,
        key: &str,
        rate: u64,
    ) -> Result<Arc<ReqZone>, error::Error> {
        let z = ReqZone::new(name);
        let _ = z.decl.set(Decl {
            key: Key::compile(key)?,
            rate,
        });
        z.attach(size, &Registry::default())?;
        Ok(Arc::new(z))
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// Gives the zone its memory once the configuration is read.
    pub(crate) fn attach(&self, size: u64, registry: &Registry) -> Result<(), error::Error> {
        let decl = self.decl.get().ok_or_else(|| {
            error::Error::invalid(format!("zero size shared memory zone \"{}\"", self.name))
        })?;
        let reserved = [80, 22 + self.name.len() as u64];
        let memory = registry.adopt(Tag::LimitReq, &self.name, size, decl.key.text(), || {
            Shards::new(&self.name, size, &reserved, NODE + 1)
        })?;
        let _ = self.memory.set(memory);
        Ok(())
    }

    /// The states (for tests and diagnostics).
    pub fn memory(&self) -> Option<&Memory> {
        self.memory.get().map(|m| &**m)
    }

    fn parts(&self) -> Option<(&Decl, &Memory)> {
        Some((self.decl.get()?, self.memory.get()?))
    }

    /// nginx's leaky bucket for `key` at `now`; accounts the request when `account`, else
    /// holds the state for [`ReqZone::account`].
    fn lookup(&self, key: &[u8], now: u64, burst: u64, account: bool) -> Lookup {
        let Some((decl, memory)) = self.parts() else {
            debug_assert!(false, "a zone is attached before any request");
            return Lookup::Done(0);
        };
        let mut shard = memory.lock(key);
        if let Some(b) = shard.get_mut(key) {
            let excess = if b.fresh { 0 } else { drain(b, decl.rate, now) };
            if excess > burst {
                return Lookup::Busy(excess);
            }
            if account {
                b.fresh = false;
                b.excess = excess;
                if now != b.last {
                    b.last = now;
                }
                return Lookup::Done(excess);
            }
            b.count += 1;
            return Lookup::Held;
        }
        let size = NODE + key.len() as u64;
        expire(&mut shard, memory, decl.rate, now, 1);
        if !memory.slab.alloc(size) {
            expire(&mut shard, memory, decl.rate, now, 0);
            if shard.is_empty() {
                // Nothing of this shard's to give back: the oldest of another one.
                for mut other in memory.others(key) {
                    if evict_oldest(&mut other, memory) {
                        break;
                    }
                }
            }
            if !memory.slab.alloc(size) {
                return Lookup::NoRoom;
            }
        }
        let count = u32::from(!account);
        let bucket = Bucket {
            excess: 0,
            last: now,
            count,
            fresh: !account,
        };
        let placed = shard.insert(key, bucket)
            || (evict_oldest(&mut shard, memory) && shard.insert(key, bucket));
        if !placed {
            // The shard's slots are all taken (keys crowding one shard): as a full zone.
            memory.slab.free(size);
            return Lookup::NoRoom;
        }
        if account {
            Lookup::Done(0)
        } else {
            Lookup::Held
        }
    }

    /// Accounts a request held by [`ReqZone::lookup`]; its excess after.
    fn account(&self, key: &[u8], now: u64) -> Option<u64> {
        let (decl, memory) = self.parts()?;
        let mut shard = memory.lock(key);
        let b = shard.peek_mut(key)?;
        let excess = if b.fresh { 0 } else { drain(b, decl.rate, now) };
        b.fresh = false;
        if now != b.last {
            b.last = now;
        }
        b.excess = excess;
        b.count = b.count.saturating_sub(1);
        Some(excess)
    }

    /// Lets go of a state held by [`ReqZone::lookup`] without accounting.
    fn release(&self, key: &[u8]) {
        if let Some((_, memory)) = self.parts() {
            if let Some(b) = memory.lock(key).peek_mut(key) {
                b.count = b.count.saturating_sub(1);
            }
        }
    }

    fn rate(&self) -> u64 {
        self.decl.get().map_or(1000, |d| d.rate)
    }
}

/// The excess a request at `now` brings to `b` (nginx's arithmetic, in thousandths).
fn drain(b: &Bucket, rate: u64, now: u64) -> u64 {
    let ms = now.wrapping_sub(b.last) as i64;
    let ms = if ms < -60_000 {
        1
    } else if ms < 0 {
        0
    } else {
        ms as u64
    };
    let drained = u128::from(rate) * u128::from(ms) / 1000;
    (u128::from(b.excess) + 1000).saturating_sub(drained) as u64
}

/// nginx's `ngx_http_limit_req_expire`: from the oldest, up to two states idle for a minute
/// and drained; with `n == 0`, the oldest first whatever it is. Stops at a held state.
fn expire(
    shard: &mut shoal_io::shm::lru::Lru<'_, Bucket>,
    memory: &Memory,
    rate: u64,
    now: u64,
    mut n: u32,
) {
    while n < 3 {
        let Some((_, b)) = shard.oldest() else {
            return;
        };
        if b.count > 0 {
            return;
        }
        if n != 0 {
            let ms = (now as i64).wrapping_sub(b.last as i64).unsigned_abs();
            if ms < 60_000 {
                return;
            }
            if u128::from(b.excess) > u128::from(rate) * u128::from(ms) / 1000 {
                return;
            }
        }
        n += 1;
        if let Some((key_len, _)) = shard.pop_oldest() {
            memory.slab.free(NODE + key_len as u64);
        }
    }
}

fn evict_oldest(shard: &mut shoal_io::shm::lru::Lru<'_, Bucket>, memory: &Memory) -> bool {
    match shard.oldest() {
        Some((_, b)) if b.count == 0 => {
            if let Some((key_len, _)) = shard.pop_oldest() {
                memory.slab.free(NODE + key_len as u64);
            }
            true
        }
        _ => false,
    }
}

/// One `limit_req` line.
#[derive(Clone, Debug)]
pub struct Limit {
    pub zone: Arc<ReqZone>,
    /// `burst=`, in thousandths.
    pub burst: u64,
    /// `delay=` in thousandths (`u64::MAX` for `nodelay`).
    pub delay: u64,
}

/// The module's location-level configuration.
#[derive(Clone, Debug, Default)]
pub struct LimitReqLoc {
    /// The `limit_req` lines of the level that has some (a level's replace its parent's).
    pub limits: Option<Arc<Vec<Limit>>>,
    pub log_level: Option<Level>,
    pub status: Option<u16>,
    pub dry_run: Option<bool>,
}

/// `$limit_req_status`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Status {
    Passed,
    Delayed,
    Rejected,
    DelayedDryRun,
    RejectedDryRun,
}

impl Status {
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Passed => "PASSED",
            Status::Delayed => "DELAYED",
            Status::Rejected => "REJECTED",
            Status::DelayedDryRun => "DELAYED_DRY_RUN",
            Status::RejectedDryRun => "REJECTED_DRY_RUN",
        }
    }
}

/// What to do with the request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    /// Go on.
    Pass,
    /// Go on after this long (the worker's timer; the connection stays open).
    Delay(Duration),
    /// Finish with this status (`limit_req_status`).
    Reject(u16),
}

/// One error-log line of the module's.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Line<'a> {
    /// `limiting requests[, dry run], excess: E by zone "Z"`.
    Limiting {
        dry_run: bool,
        excess: u64,
        zone: &'a str,
    },
    /// `delaying request[, dry run], excess: E, by zone "Z"`.
    Delaying {
        dry_run: bool,
        excess: u64,
        zone: &'a str,
    },
    /// `the value of the "KEY" key is more than 65535 bytes: "VALUE"`.
    KeyTooLong { key: &'a str, value: Vec<u8> },
    /// `could not allocate node in limit_req zone "Z"`: written without the request's
    /// context (nginx's cycle log), at `alert`.
    NoRoom { zone: &'a str },
}

impl Line<'_> {
    /// Whether the line carries the request's context (`*N ...`, `, client: ...`).
    pub fn about_request(&self) -> bool {
        !matches!(self, Line::NoRoom { .. })
    }
}

impl fmt::Display for Line<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let dry = |d: bool| if d { ", dry run" } else { "" };
        match self {
            Line::Limiting {
                dry_run,
                excess,
                zone,
            } => write!(
                f,
                "limiting requests{}, excess: {}.{:03} by zone \"{zone}\"",
                dry(*dry_run),
                excess / 1000,
                excess % 1000
            ),
            Line::Delaying {
                dry_run,
                excess,
                zone,
            } => write!(
                f,
                "delaying request{}, excess: {}.{:03}, by zone \"{zone}\"",
                dry(*dry_run),
                excess / 1000,
                excess % 1000
            ),
            Line::KeyTooLong { key, value } => write!(
                f,
                "the value of the \"{key}\" key is more than 65535 bytes: \"{}\"",
                String::from_utf8_lossy(value)
            ),
            Line::NoRoom { zone } => {
                write!(f, "could not allocate node in limit_req zone \"{zone}\"")
            }
        }
    }
}

/// The module's answer for a request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Outcome<'a> {
    /// `$limit_req_status`; `None` when no limit applied (none here, or every key empty).
    pub status: Option<Status>,
    pub action: Action,
    /// Lines to log, each at its level, in order.
    pub lines: Vec<(Level, Line<'a>)>,
}

impl LimitReqLoc {
    /// Fills what this level left unset from its parent.
    pub fn merge(&mut self, parent: &Self) {
        crate::conf::merge(&mut self.limits, &parent.limits);
        crate::conf::merge(&mut self.log_level, &parent.log_level);
        crate::conf::merge(&mut self.status, &parent.status);
        crate::conf::merge(&mut self.dry_run, &parent.dry_run);
    }

    pub fn limits(&self) -> &[Limit] {
        self.limits
            .as_deref()
            .map(Vec::as_slice)
            .unwrap_or_default()
    }

    /// `limit_req_log_level` (default `error`).
    pub fn log_level(&self) -> Level {
        self.log_level.unwrap_or(Level::Error)
    }

    /// The level of the delays' lines: one below `limit_req_log_level`, `info` at least.
    pub fn delay_log_level(&self) -> Level {
        match self.log_level() {
            Level::Error => Level::Warn,
            Level::Warn => Level::Notice,
            _ => Level::Info,
        }
    }

    /// `limit_req_status` (default 503).
    pub fn status(&self) -> u16 {
        self.status.unwrap_or(503)
    }

    /// `limit_req_dry_run` (default off).
    pub fn dry_run(&self) -> bool {
        self.dry_run.unwrap_or(false)
    }

    /// Applies the location's limits to a request at `now` ([`now_ms`]). `eval` evaluates the
    /// keys' variables for the request.
    pub fn check(
        &self,
        client: &Client,
        eval: &mut dyn FnMut(&Template) -> String,
        now: u64,
    ) -> Outcome<'_> {
        let limits = self.limits();
        let mut lines = Vec::new();
        let mut held: Vec<(usize, Vec<u8>)> = Vec::new();
        let mut key = Vec::new();
        // nginx's `rc` and `limit`: the last lookup's result and the last limit looked at.
        let mut rc: Option<Lookup> = None;
        let mut current = 0;
        for (i, limit) in limits.iter().enumerate() {
            current = i;
            let Some(decl) = limit.zone.decl.get() else {
                continue;
            };
            key.clear();
            decl.key.eval(client, eval, &mut key);
            if key.is_empty() {
                continue;
            }
            if key.len() > MAX_KEY {
                lines.push((
                    Level::Error,
                    Line::KeyTooLong {
                        key: decl.key.text(),
                        value: std::mem::take(&mut key),
                    },
                ));
                continue;
            }
            let found = limit
                .zone
                .lookup(&key, now, limit.burst, i + 1 == limits.len());
            rc = Some(found);
            if found != Lookup::Held {
                break;
            }
            held.push((i, key.clone()));
        }
        let dry_run = self.dry_run();
        let Some(rc) = rc else {
            return Outcome {
                status: None,
                action: Action::Pass,
                lines,
            };
        };
        if let Lookup::Busy(_) | Lookup::NoRoom = rc {
            let zone = limits[current].zone.name();
            match rc {
                Lookup::Busy(excess) => lines.push((
                    self.log_level(),
                    Line::Limiting {
                        dry_run,
                        excess,
                        zone,
                    },
                )),
                _ => lines.push((Level::Alert, Line::NoRoom { zone })),
            }
            for (i, k) in &held {
                limits[*i].zone.release(k);
            }
            let (status, action) = if dry_run {
                (Status::RejectedDryRun, Action::Pass)
            } else {
                (Status::Rejected, Action::Reject(self.status()))
            };
            return Outcome {
                status: Some(status),
                action,
                lines,
            };
        }
        // All within their bursts: account the held ones and take the longest delay.
        let mut excess = match rc {
            Lookup::Done(e) => e,
            _ => 0,
        };
        let mut at = current;
        let mut max_delay = delay_ms(&limits[at], excess);
        for (i, k) in held.iter().rev() {
            let Some(e) = limits[*i].zone.account(k, now) else {
                continue;
            };
            let d = delay_ms(&limits[*i], e);
            if d > max_delay {
                max_delay = d;
                excess = e;
                at = *i;
            }
        }
        if max_delay == 0 {
            return Outcome {
                status: Some(Status::Passed),
                action: Action::Pass,
                lines,
            };
        }
        lines.push((
            self.delay_log_level(),
            Line::Delaying {
                dry_run,
                excess,
                zone: limits[at].zone.name(),
            },
        ));
        let (status, action) = if dry_run {
            (Status::DelayedDryRun, Action::Pass)
        } else {
            (
                Status::Delayed,
                Action::Delay(Duration::from_millis(max_delay)),
            )
        };
        Outcome {
            status: Some(status),
            action,
            lines,
        }
    }
}

/// How long `excess` over `limit`'s `delay=` waits, in ms.
fn delay_ms(limit: &Limit, excess: u64) -> u64 {
    if excess <= limit.delay {
        return 0;
    }
    let rate = limit.zone.rate().max(1);
    ((u128::from(excess - limit.delay) * 1000) / u128::from(rate)) as u64
}

fn set_limit_req_zone(b: &mut Builder, d: &Directive, _: &mut Scope<'_>) -> Result<(), Error> {
    let key = Key::compile(&d.args[0].value).map_err(|m| err(d, m))?;
    let mut zone: Option<(String, u64)> = None;
    let mut rate: u64 = 1000;
    for a in &d.args[1..] {
        let v = a.value.as_str();
        if let Some(z) = limit_zone::zone_param(d, v)? {
            zone = Some(z);
            continue;
        }
        if let Some(r) = v.strip_prefix("rate=") {
            rate = parse_rate(r).ok_or_else(|| err(d, format!("invalid rate \"{v}\"")))?;
            continue;
        }
        return Err(err(d, format!("invalid parameter \"{v}\"")));
    }
    let (name, size) = zone
        .filter(|(n, _)| !n.is_empty())
        .ok_or_else(|| err(d, format!("\"{}\" must have \"zone\" parameter", d.name)))?;
    let Zone::Req(z) = b.shm_zones.add(d, &name, size, Tag::LimitReq, || {
        Zone::Req(Arc::new(ReqZone::new(&name)))
    })?
    else {
        unreachable!("a LimitReq name holds a limit_req zone")
    };
    if let Some(bound) = z.decl.get() {
        return Err(err(
            d,
            format!(
                "{} \"{name}\" is already bound to key \"{}\"",
                d.name,
                bound.key.text()
            ),
        ));
    }
    let _ = z.decl.set(Decl { key, rate });
    Ok(())
}

/// `N`, `Nr/s` or `Nr/m` (N > 0) in thousandths of a request per second.
fn parse_rate(v: &str) -> Option<u64> {
    let (n, scale) = if let Some(n) = v.strip_suffix("r/s") {
        (n, 1)
    } else if let Some(n) = v.strip_suffix("r/m") {
        (n, 60)
    } else {
        (v, 1)
    };
    let n = crate::conf::parse_number(n).filter(|n| *n > 0 && *n <= i64::MAX as u64)?;
    Some(n.saturating_mul(1000) / scale)
}

fn set_limit_req(b: &mut Builder, d: &Directive, s: &mut Scope<'_>) -> Result<(), Error> {
    let mut zone: Option<Arc<ReqZone>> = None;
    let mut burst: u64 = 0;
    let mut delay: u64 = 0;
    let mut nodelay = false;
    for a in &d.args {
        let v = a.value.as_str();
        if let Some(name) = v.strip_prefix("zone=") {
            let Zone::Req(z) = b.shm_zones.add(d, name, 0, Tag::LimitReq, || {
                Zone::Req(Arc::new(ReqZone::new(name)))
            })?
            else {
                unreachable!("a LimitReq name holds a limit_req zone")
            };
            zone = Some(z);
        } else if let Some(n) = v.strip_prefix("burst=") {
            burst = positive(n).ok_or_else(|| err(d, format!("invalid burst value \"{v}\"")))?;
        } else if let Some(n) = v.strip_prefix("delay=") {
            delay = positive(n).ok_or_else(|| err(d, format!("invalid delay value \"{v}\"")))?;
        } else if v == "nodelay" {
            nodelay = true;
        } else {
            return Err(err(d, format!("invalid parameter \"{v}\"")));
        }
    }
    let zone =
        zone.ok_or_else(|| err(d, format!("\"{}\" must have \"zone\" parameter", d.name)))?;
    let lc = &mut loc_conf(s).limit_req;
    let mut limits = lc.limits.as_deref().cloned().unwrap_or_default();
    if limits.iter().any(|l| Arc::ptr_eq(&l.zone, &zone)) {
        return Err(crate::conf::duplicate(d));
    }
    limits.push(Limit {
        zone,
        burst: burst.saturating_mul(1000),
        delay: if nodelay {
            u64::MAX
        } else {
            delay.saturating_mul(1000)
        },
    });
    lc.limits = Some(Arc::new(limits));
    Ok(())
}

/// A number > 0 as nginx's `ngx_atoi` reads it.
fn positive(n: &str) -> Option<u64> {
    crate::conf::parse_number(n).filter(|n| *n > 0 && *n <= i64::MAX as u64)
}

fn set_status(_: &mut Builder, d: &Directive, s: &mut Scope<'_>) -> Result<(), Error> {
    let v = limit_zone::status(d)?;
    set_once(&mut loc_conf(s).limit_req.status, v, d)
}

fn set_log_level(_: &mut Builder, d: &Directive, s: &mut Scope<'_>) -> Result<(), Error> {
    let v = limit_zone::log_level(d)?;
    set_once(&mut loc_conf(s).limit_req.log_level, v, d)
}

fn set_dry_run(_: &mut Builder, d: &Directive, s: &mut Scope<'_>) -> Result<(), Error> {
    set_once(&mut loc_conf(s).limit_req.dry_run, flag_arg(d), d)
}

/// `limit_req`'s place in the module list: its preaccess handler.
pub struct Module;

impl crate::http::modules::HttpModule for Module {
    type Loc = LimitReqLoc;
    const DIRECTIVES: &'static [Command] = DIRECTIVES;
    const VARIABLES: &'static [&'static str] = &["limit_req_status"];

    fn merge(loc: &mut LimitReqLoc, parent: &LimitReqLoc) {
        loc.merge(parent);
    }

    const PREACCESS: bool = true;

    fn in_use(loc: &LimitReqLoc) -> bool {
        !loc.limits().is_empty()
    }

    async fn preaccess(
        loc: &LimitReqLoc,
        cx: &crate::http::modules::Cx<'_, '_, '_>,
    ) -> Option<Box<crate::http::reply::Reply>> {
        if loc.limits().is_empty() {
            return None;
        }
        let out = loc.check(
            &cx.client(),
            &mut |t| cx.eval(t),
            crate::http::limit_zone::now_ms(),
        );
        for (level, line) in &out.lines {
            if line.about_request() {
                cx.log(*level, line);
            } else {
                crate::error_log!(*level, "{line}");
            }
        }
        if let Some(s) = out.status {
            cx.r.extras
                .set_var("limit_req_status", s.as_str().to_string());
        }
        match out.action {
            Action::Pass => None,
            Action::Delay(d) => {
                tokio::time::sleep(d).await;
                None
            }
            Action::Reject(code) => Some(Box::new(crate::http::reply::error_reply(code, cx.lc))),
        }
    }
}

#[cfg(test)]
mod tests;
