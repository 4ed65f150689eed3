//! nginx's ngx_http_limit_conn_module: `limit_conn_zone`, `limit_conn`, `limit_conn_status`,
//! `limit_conn_log_level`, `limit_conn_dry_run` and `$limit_conn_status`.
//!
//! A zone counts, per key, the requests in progress. [`LimitConnLoc::acquire`] takes one unit
//! of every `limit_conn` of the location in order (a key evaluating to nothing is skipped, one
//! over 255 bytes is logged and skipped, as nginx does); a key at its limit refuses the
//! request with `limit_conn_status` (503) and `limiting connections by zone "addr"` at
//! `limit_conn_log_level`, releasing what it took. The units come back when the returned
//! [`Guard`] is dropped: keep it with the request until it ends (nginx releases them when the
//! request's pool goes). A count that falls to 0 frees its state, so nothing is evicted; a
//! zone too full for a new key refuses the request with nginx's
//! `ngx_slab_alloc() failed: no memory in limit_conn_zone "addr"` at `crit` (without the
//! request). Dry run counts nothing past a limit and refuses nothing.
//!
//! The preaccess step calls it once per main request (nginx skips a request whose
//! `$limit_conn_status` is set) with the client and an evaluator for the keys' variables.

use std::fmt;
use std::sync::{Arc, OnceLock};

use shoal_conf::{Directive, Error};

use crate::conf::{err, flag_arg, set_once, Args, Builder, Command, Ctx, Scope};
use crate::error;
use crate::http::access::Client;
use crate::http::limit_zone::{self, Key, Registry, Shards, Tag, Zone};
use crate::http::loc_conf;
use crate::log::Level;
use crate::variables::Template;

/// http's levels and stream's: the module is nginx's http and stream limit_conn in one.
const HSL_SS: Ctx = Ctx::HSL.or(Ctx::SS);

/// The level a `limit_conn*` line writes into: an http location's or a stream level's.
fn conn_conf<'a>(s: &'a mut Scope<'_>) -> &'a mut LimitConnLoc {
    if !matches!(s, Scope::Stream(_) | Scope::StreamServer(_)) {
        return &mut loc_conf(s).limit_conn;
    }
    match s {
        Scope::Stream(st) => &mut st.srv.limit_conn,
        Scope::StreamServer(srv) => &mut srv.conf.limit_conn,
        _ => unreachable!("checked above"),
    }
}

pub static DIRECTIVES: &[Command] = &[
    Command::new(
        "limit_conn_zone",
        Ctx::HTTP.or(Ctx::STREAM),
        Args::Take(2, 2),
        set_limit_conn_zone,
    ),
    Command::new("limit_conn", HSL_SS, Args::TWO, set_limit_conn),
    Command::new("limit_conn_status", Ctx::HSL, Args::ONE, set_status),
    Command::new("limit_conn_log_level", HSL_SS, Args::ONE, set_log_level),
    Command::new("limit_conn_dry_run", HSL_SS, Args::Flag, set_dry_run),
];

/// A state's node in nginx's slab: 36 bytes before the key.
const NODE: u64 = 36;
/// nginx stores the key's length in a byte.
const MAX_KEY: usize = 255;

/// A zone's counts (shared by every worker and kept across reloads).
pub type Memory = Shards<u32>;

/// A `limit_conn_zone`, from its first mention in the configuration.
pub struct ConnZone {
    name: String,
    key: OnceLock<Key>,
    memory: OnceLock<Arc<Memory>>,
}

impl fmt::Debug for ConnZone {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ConnZone")
            .field("name", &self.name)
            .field("key", &self.key.get())
            .finish()
    }
}

impl ConnZone {
    fn new(name: &str) -> ConnZone {
        ConnZone {
            name: name.to_string(),
            key: OnceLock::new(),
            memory: OnceLock::new(),
        }
    }

    /// A zone with its memory, outside any configuration (tests).
    pub fn standalone(name: &str, size: u64, key: &str) -> Result<Arc<ConnZone>, error::Error> {
        let z = ConnZone::new(name);
        let _ = z.key.set(Key::compile(key)?);
        z.attach(size, &Registry::default())?;
        Ok(Arc::new(z))
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub(crate) fn attach(&self, size: u64, registry: &Registry) -> Result<(), error::Error> {
        let key = self.key.get().ok_or_else(|| {
            error::Error::invalid(format!("zero size shared memory zone \"{}\"", self.name))
        })?;
        let reserved = [64, 23 + self.name.len() as u64];
        let memory = registry.adopt(Tag::LimitConn, &self.name, size, key.text(), || {
            Shards::new(&self.name, size, &reserved, NODE + 1)
        })?;
        let _ = self.memory.set(memory);
        Ok(())
    }

    /// The counts (for tests and diagnostics).
    pub fn memory(&self) -> Option<&Memory> {
        self.memory.get().map(|m| &**m)
    }
}

/// One `limit_conn ZONE NUMBER` line.
#[derive(Clone, Debug)]
pub struct Limit {
    pub zone: Arc<ConnZone>,
    pub conn: u32,
}

/// The module's location-level configuration.
#[derive(Clone, Debug, Default)]
pub struct LimitConnLoc {
    /// The `limit_conn` lines of the level that has some (a level's replace its parent's).
    pub limits: Option<Arc<Vec<Limit>>>,
    pub log_level: Option<Level>,
    pub status: Option<u16>,
    pub dry_run: Option<bool>,
}

/// `$limit_conn_status`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Status {
    Passed,
    Rejected,
    RejectedDryRun,
}

impl Status {
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Passed => "PASSED",
            Status::Rejected => "REJECTED",
            Status::RejectedDryRun => "REJECTED_DRY_RUN",
        }
    }
}

/// One error-log line of the module's.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Line<'a> {
    /// `limiting connections[, dry run,] by zone "Z"`.
    Limiting { dry_run: bool, zone: &'a str },
    /// `the value of the "KEY" key is more than 255 bytes: "VALUE"`.
    KeyTooLong { key: &'a str, value: Vec<u8> },
    /// `ngx_slab_alloc() failed: no memory in limit_conn_zone "Z"`, without the request's
    /// context, at `crit`.
    NoMemory { zone: &'a str },
}

impl Line<'_> {
    /// Whether the line carries the request's context.
    pub fn about_request(&self) -> bool {
        !matches!(self, Line::NoMemory { .. })
    }
}

impl fmt::Display for Line<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Line::Limiting { dry_run, zone } => write!(
                f,
                "limiting connections{} by zone \"{zone}\"",
                if *dry_run { ", dry run," } else { "" }
            ),
            Line::KeyTooLong { key, value } => write!(
                f,
                "the value of the \"{key}\" key is more than 255 bytes: \"{}\"",
                String::from_utf8_lossy(value)
            ),
            Line::NoMemory { zone } => write!(
                f,
                "ngx_slab_alloc() failed: no memory in limit_conn_zone \"{zone}\""
            ),
        }
    }
}

/// The units a request holds; dropping it gives them back.
#[derive(Default)]
pub struct Guard {
    held: Vec<(Arc<Memory>, Box<[u8]>)>,
}

impl fmt::Debug for Guard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Guard({} held)", self.held.len())
    }
}

impl Drop for Guard {
    fn drop(&mut self) {
        for (memory, key) in self.held.drain(..) {
            release(&memory, &key);
        }
    }
}

fn release(memory: &Memory, key: &[u8]) {
    let mut shard = memory.lock(key);
    let gone = match shard.peek_mut(key) {
        Some(n) if *n > 1 => {
            *n -= 1;
            false
        }
        Some(_) => true,
        None => false,
    };
    if gone {
        shard.remove(key);
        memory.slab.free(NODE + key.len() as u64);
    }
}

/// The module's answer for a request.
#[derive(Debug)]
pub struct Outcome<'a> {
    /// `$limit_conn_status`; `None` when no limit applied.
    pub status: Option<Status>,
    /// `Some(status)`: finish the request with it.
    pub reject: Option<u16>,
    /// Keep with the request until it ends.
    pub guard: Guard,
    /// Lines to log, each at its level.
    pub lines: Vec<(Level, Line<'a>)>,
}

impl LimitConnLoc {
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

    /// `limit_conn_log_level` (default `error`).
    pub fn log_level(&self) -> Level {
        self.log_level.unwrap_or(Level::Error)
    }

    /// `limit_conn_status` (default 503).
    pub fn status(&self) -> u16 {
        self.status.unwrap_or(503)
    }

    /// `limit_conn_dry_run` (default off).
    pub fn dry_run(&self) -> bool {
        self.dry_run.unwrap_or(false)
    }

    /// Takes a unit of every limit for the request.
    pub fn acquire(
        &self,
        client: &Client,
        eval: &mut dyn FnMut(&Template) -> String,
    ) -> Outcome<'_> {
        let mut out = Outcome {
            status: None,
            reject: None,
            guard: Guard::default(),
            lines: Vec::new(),
        };
        let mut key = Vec::new();
        for limit in self.limits() {
            let (Some(k), Some(memory)) = (limit.zone.key.get(), limit.zone.memory.get()) else {
                continue;
            };
            key.clear();
            k.eval(client, eval, &mut key);
            if key.is_empty() {
                continue;
            }
            if key.len() > MAX_KEY {
                out.lines.push((
                    Level::Error,
                    Line::KeyTooLong {
                        key: k.text(),
                        value: std::mem::take(&mut key),
                    },
                ));
                continue;
            }
            out.status = Some(Status::Passed);
            let mut shard = memory.lock(&key);
            let refused = match shard.get_mut(&key) {
                Some(n) if *n >= limit.conn => Some(Line::Limiting {
                    dry_run: self.dry_run(),
                    zone: limit.zone.name(),
                }),
                Some(n) => {
                    *n += 1;
                    None
                }
                None if memory.slab.alloc(NODE + key.len() as u64) => {
                    if shard.insert(&key, 1) {
                        None
                    } else {
                        // Its shard's slots are all taken: as a full zone.
                        memory.slab.free(NODE + key.len() as u64);
                        Some(Line::NoMemory {
                            zone: limit.zone.name(),
                        })
                    }
                }
                None => Some(Line::NoMemory {
                    zone: limit.zone.name(),
                }),
            };
            drop(shard);
            if let Some(line) = refused {
                let level = match line {
                    Line::NoMemory { .. } => Level::Crit,
                    _ => self.log_level(),
                };
                out.lines.push((level, line));
                // What this request took so far goes back at once.
                out.guard = Guard::default();
                if self.dry_run() {
                    out.status = Some(Status::RejectedDryRun);
                } else {
                    out.status = Some(Status::Rejected);
                    out.reject = Some(self.status());
                }
                return out;
            }
            out.guard.held.push((memory.clone(), key.as_slice().into()));
        }
        out
    }
}

fn set_limit_conn_zone(b: &mut Builder, d: &Directive, _: &mut Scope<'_>) -> Result<(), Error> {
    let key = Key::compile(&d.args[0].value).map_err(|m| err(d, m))?;
    let v = d.args[1].value.as_str();
    let Some((name, size)) = limit_zone::zone_param(d, v)? else {
        return Err(err(d, format!("invalid parameter \"{v}\"")));
    };
    if name.is_empty() {
        return Err(err(
            d,
            format!("\"{}\" must have \"zone\" parameter", d.name),
        ));
    }
    let Zone::Conn(z) = b.shm_zones.add(d, &name, size, Tag::LimitConn, || {
        Zone::Conn(Arc::new(ConnZone::new(&name)))
    })?
    else {
        unreachable!("a LimitConn name holds a limit_conn zone")
    };
    if let Some(bound) = z.key.get() {
        return Err(err(
            d,
            format!(
                "{} \"{name}\" is already bound to key \"{}\"",
                d.name,
                bound.text()
            ),
        ));
    }
    let _ = z.key.set(key);
    Ok(())
}

fn set_limit_conn(b: &mut Builder, d: &Directive, s: &mut Scope<'_>) -> Result<(), Error> {
    let name = d.args[0].value.as_str();
    let Zone::Conn(zone) = b.shm_zones.add(d, name, 0, Tag::LimitConn, || {
        Zone::Conn(Arc::new(ConnZone::new(name)))
    })?
    else {
        unreachable!("a LimitConn name holds a limit_conn zone")
    };
    let n = d.args[1].value.as_str();
    let conn = crate::conf::parse_number(n)
        .filter(|c| *c > 0 && *c <= i64::MAX as u64)
        .ok_or_else(|| err(d, format!("invalid number of connections \"{n}\"")))?;
    if conn > 65535 {
        return Err(err(d, "connection limit must be less 65536"));
    }
    let lc = conn_conf(s);
    let mut limits = lc.limits.as_deref().cloned().unwrap_or_default();
    if limits.iter().any(|l| Arc::ptr_eq(&l.zone, &zone)) {
        return Err(crate::conf::duplicate(d));
    }
    limits.push(Limit {
        zone,
        conn: conn as u32,
    });
    lc.limits = Some(Arc::new(limits));
    Ok(())
}

fn set_status(_: &mut Builder, d: &Directive, s: &mut Scope<'_>) -> Result<(), Error> {
    let v = limit_zone::status(d)?;
    set_once(&mut conn_conf(s).status, v, d)
}

fn set_log_level(_: &mut Builder, d: &Directive, s: &mut Scope<'_>) -> Result<(), Error> {
    let v = limit_zone::log_level(d)?;
    set_once(&mut conn_conf(s).log_level, v, d)
}

fn set_dry_run(_: &mut Builder, d: &Directive, s: &mut Scope<'_>) -> Result<(), Error> {
    set_once(&mut conn_conf(s).dry_run, flag_arg(d), d)
}

/// `limit_conn`'s place in the module list: its preaccess handler.
pub struct Module;

impl crate::http::modules::HttpModule for Module {
    type Loc = LimitConnLoc;
    const DIRECTIVES: &'static [Command] = DIRECTIVES;
    const VARIABLES: &'static [&'static str] = &["limit_conn_status"];

    fn merge(loc: &mut LimitConnLoc, parent: &LimitConnLoc) {
        loc.merge(parent);
    }

    const PREACCESS: bool = true;

    fn in_use(loc: &LimitConnLoc) -> bool {
        !loc.limits().is_empty()
    }

    async fn preaccess(
        loc: &LimitConnLoc,
        cx: &crate::http::modules::Cx<'_, '_, '_>,
    ) -> Option<Box<crate::http::reply::Reply>> {
        if loc.limits().is_empty() {
            return None;
        }
        let out = loc.acquire(&cx.client(), &mut |t| cx.eval(t));
        for (level, line) in &out.lines {
            if line.about_request() {
                cx.log(*level, line);
            } else {
                crate::error_log!(*level, "{line}");
            }
        }
        if let Some(s) = out.status {
            cx.r.extras
                .set_var("limit_conn_status", s.as_str().to_string());
        }
        // The counts go back when the request ends.
        cx.r.extras.hold(Box::new(out.guard));
        out.reject
            .map(|code| Box::new(crate::http::reply::error_reply(code, cx.lc)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn loc(limits: Vec<Limit>) -> LimitConnLoc {
        LimitConnLoc {
            limits: Some(Arc::new(limits)),
            ..Default::default()
        }
    }

    fn client(ip: &str) -> Client {
        Client::Inet(ip.parse().unwrap())
    }

    fn no_vars(_: &Template) -> String {
        unreachable!("these keys have no variables")
    }

    #[test]
    fn counts_until_the_guard_goes() {
        let z = ConnZone::standalone("addr", 32768, "$binary_remote_addr").unwrap();
        let lc = loc(vec![Limit {
            zone: z.clone(),
            conn: 2,
        }]);
        let a = lc.acquire(&client("10.0.0.1"), &mut no_vars);
        let b = lc.acquire(&client("10.0.0.1"), &mut no_vars);
        assert_eq!((a.status, a.reject), (Some(Status::Passed), None));
        assert_eq!(b.reject, None);
        let c = lc.acquire(&client("10.0.0.1"), &mut no_vars);
        assert_eq!((c.status, c.reject), (Some(Status::Rejected), Some(503)));
        assert_eq!(c.lines[0].0, Level::Error);
        assert_eq!(
            c.lines[0].1.to_string(),
            "limiting connections by zone \"addr\""
        );
        // Another address has its own count.
        assert_eq!(lc.acquire(&client("10.0.0.2"), &mut no_vars).reject, None);
        drop(a);
        let d = lc.acquire(&client("10.0.0.1"), &mut no_vars);
        assert_eq!(d.reject, None);
        drop((b, c, d));
        assert_eq!(z.memory().unwrap().len(), 0, "counts at 0 free their state");
    }

    #[test]
    fn a_refusal_gives_back_what_it_took() {
        let wide = ConnZone::standalone("wide", 32768, "$binary_remote_addr").unwrap();
        let narrow = ConnZone::standalone("narrow", 32768, "x").unwrap();
        let lc = loc(vec![
            Limit {
                zone: wide.clone(),
                conn: 10,
            },
            Limit {
                zone: narrow.clone(),
                conn: 1,
            },
        ]);
        let first = lc.acquire(&client("10.0.0.1"), &mut no_vars);
        assert_eq!(first.reject, None);
        let second = lc.acquire(&client("10.0.0.1"), &mut no_vars);
        assert_eq!(second.reject, Some(503));
        assert_eq!(
            *wide
                .memory()
                .unwrap()
                .lock(&[10, 0, 0, 1])
                .peek_mut(&[10, 0, 0, 1])
                .unwrap(),
            1
        );
    }

    #[test]
    fn dry_run_and_levels() {
        let z = ConnZone::standalone("dry", 32768, "$binary_remote_addr").unwrap();
        let mut lc = loc(vec![Limit { zone: z, conn: 1 }]);
        lc.dry_run = Some(true);
        lc.log_level = Some(Level::Notice);
        let _a = lc.acquire(&client("10.0.0.1"), &mut no_vars);
        let b = lc.acquire(&client("10.0.0.1"), &mut no_vars);
        assert_eq!((b.status, b.reject), (Some(Status::RejectedDryRun), None));
        assert_eq!(b.lines[0].0, Level::Notice);
        assert_eq!(
            b.lines[0].1.to_string(),
            "limiting connections, dry run, by zone \"dry\""
        );
    }

    #[test]
    fn empty_long_keys_and_a_full_zone() {
        let z = ConnZone::standalone("c32", 32768, "$arg_k").unwrap();
        let lc = loc(vec![Limit { zone: z, conn: 1 }]);
        let o = lc.acquire(&client("10.0.0.1"), &mut |_| String::new());
        assert_eq!((o.status, o.reject), (None, None));
        let o = lc.acquire(&client("10.0.0.1"), &mut |_| "k".repeat(256));
        assert_eq!(o.status, None);
        assert_eq!(
            o.lines[0].1.to_string(),
            format!(
                "the value of the \"$arg_k\" key is more than 255 bytes: \"{}\"",
                "k".repeat(256)
            )
        );
        // 80 keys of 201 bytes fill a 32k zone, as nginx's did here.
        let mut held = Vec::new();
        for i in 0..80 {
            let o = lc.acquire(&client("10.0.0.1"), &mut |_| {
                format!("{i:03}{}", "y".repeat(198))
            });
            assert_eq!(o.reject, None, "key {i}");
            held.push(o.guard);
        }
        let o = lc.acquire(&client("10.0.0.1"), &mut |_| {
            format!("999{}", "y".repeat(198))
        });
        assert_eq!(o.reject, Some(503));
        assert_eq!(o.lines[0].0, Level::Crit);
        assert!(!o.lines[0].1.about_request());
        assert_eq!(
            o.lines[0].1.to_string(),
            "ngx_slab_alloc() failed: no memory in limit_conn_zone \"c32\""
        );
        held.pop();
        let o = lc.acquire(&client("10.0.0.1"), &mut |_| {
            format!("999{}", "y".repeat(198))
        });
        assert_eq!(o.reject, None);
    }

    #[test]
    fn counts_hold_across_threads() {
        let z = ConnZone::standalone("threads", 1 << 20, "$arg_k").unwrap();
        let lc = Arc::new(loc(vec![Limit {
            zone: z.clone(),
            conn: 3,
        }]));
        let threads: Vec<_> = (0..4)
            .map(|t| {
                let lc = lc.clone();
                std::thread::spawn(move || {
                    let mut refused = 0;
                    for i in 0..500 {
                        let k = format!("{}", i % 7);
                        let a = lc.acquire(&client("10.0.0.1"), &mut |_| k.clone());
                        let b = lc.acquire(&client("10.0.0.1"), &mut |_| format!("t{t}"));
                        refused +=
                            usize::from(a.reject.is_some()) + usize::from(b.reject.is_some());
                    }
                    refused
                })
            })
            .collect();
        let refused: usize = threads.into_iter().map(|t| t.join().unwrap()).sum();
        // Each thread holds at most one unit of a key at a time: never more than 3... per
        // key "i % 7" four threads may meet, so some may be refused, but every unit comes
        // back.
        assert!(refused <= 4 * 500);
        assert_eq!(z.memory().unwrap().len(), 0);
        assert_eq!(z.memory().unwrap().slab.room_for(NODE + 4), {
            let fresh = ConnZone::standalone("fresh", 1 << 20, "$arg_k").unwrap();
            fresh.memory().unwrap().slab.room_for(NODE + 4)
        });
    }

    #[test]
    fn defaults_and_names() {
        let lc = LimitConnLoc::default();
        assert_eq!(
            (lc.status(), lc.log_level(), lc.dry_run()),
            (503, Level::Error, false)
        );
        let o = lc.acquire(&client("10.0.0.1"), &mut no_vars);
        assert_eq!((o.status, o.reject), (None, None));
        assert_eq!(Status::Passed.as_str(), "PASSED");
        assert_eq!(Status::Rejected.as_str(), "REJECTED");
        assert_eq!(Status::RejectedDryRun.as_str(), "REJECTED_DRY_RUN");
    }
}
