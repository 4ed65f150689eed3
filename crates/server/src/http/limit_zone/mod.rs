//! What `limit_req` and `limit_conn` share (and the names of `upstream` zones): their zones' names, sizes and keys as a
//! configuration declares them, the zones' memory (sharded maps bounded as nginx's slab bounds
//! them), and the zones kept across reloads.
//!
//! **Names.** nginx keeps one table of shared memory zones per configuration: a name is
//! declared with a size by `limit_req_zone`/`limit_conn_zone` and may be used by `limit_req`/
//! `limit_conn` before or after that; a name used by one module and declared by the other is
//! `already declared for a different use`, one used but never declared is
//! `zero size shared memory zone "NAME"` once everything is read. [`ShmZones`] is that table
//! ([`crate::conf::Builder::shm_zones`]); [`finish`] checks it and gives every zone its memory.
//!
//! **Memory.** A zone is one shared mapping (`shoal_io::shm`), made where the configuration is
//! read: by the root master before it forks a child (so the old child and the new one, during
//! a reload, count in the same states, as nginx's workers of two cycles do), or by the one
//! process. Its states are split over up to 16 shards by a keyed hash of the key, each shard a
//! process-shared lock over an LRU table (`shoal_io::shm::lru`), so workers meet on a lock only when their
//! keys share a shard. The zone's size bounds its states as nginx's slab allocator would
//! ([`slab`]); the least recently used state of the shard at hand is what gets evicted
//! (nginx's queue is one per zone: a small zone gets one shard and the exact order).
//!
//! **Reloads.** nginx maps a zone into the new cycle when its name, module and size are
//! unchanged, with its states; a changed key with the same size fails the reload
//! (`limit_req "one" uses the "$uri" key while previously it used the "$binary_remote_addr"
//! key`). [`Registry`] keeps the live zones (weakly: they go with the last configuration that
//! uses them) to do the same.
//!
//! **Keys** are templates evaluated per request; `$binary_remote_addr` is read here from the
//! client's address (4 or 16 bytes, `unix:` for a unix socket), not as text.

pub mod slab;

use std::any::Any;
use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex, OnceLock, Weak};

use shoal_conf::{Directive, Error};
use shoal_io::shm::lru;

use crate::conf::err;
use crate::error;
use crate::http::access::Client;
use crate::http::{limit_conn, limit_req};
use crate::variables::Template;

/// Which module a zone belongs to (nginx's shared memory tag).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Tag {
    LimitReq,
    LimitConn,
    /// An `upstream`'s `zone` (its peers' state: `upstream/state.rs`).
    Upstream,
}

/// A zone of the configuration being read, by the module that owns it.
#[derive(Clone, Debug)]
pub enum Zone {
    Req(Arc<limit_req::ReqZone>),
    Conn(Arc<limit_conn::ConnZone>),
    /// Nothing to set aside: the upstream keeps its shared state itself.
    Upstream,
}

impl Zone {
    fn tag(&self) -> Tag {
        match self {
            Zone::Req(_) => Tag::LimitReq,
            Zone::Conn(_) => Tag::LimitConn,
            Zone::Upstream => Tag::Upstream,
        }
    }
}

struct Entry {
    /// 0 until a `*_zone` directive declares it.
    size: u64,
    zone: Zone,
}

/// The zones a configuration names, in the order they were first named.
#[derive(Default)]
pub struct ShmZones {
    entries: Vec<(String, Entry)>,
}

impl std::fmt::Debug for ShmZones {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list()
            .entries(self.entries.iter().map(|(n, e)| (n, e.size)))
            .finish()
    }
}

impl ShmZones {
    /// The zone `name` of `tag`'s module, made by `make` the first time it is named; `size` 0
    /// for a use, the declared size for a declaration (nginx's `ngx_shared_memory_add`).
    pub fn add(
        &mut self,
        d: &Directive,
        name: &str,
        size: u64,
        tag: Tag,
        make: impl FnOnce() -> Zone,
    ) -> Result<Zone, Error> {
        if let Some((_, e)) = self.entries.iter_mut().find(|(n, _)| n == name) {
            if e.zone.tag() != tag {
                return Err(err(
                    d,
                    format!(
                        "the shared memory zone \"{name}\" is already declared for a different use"
                    ),
                ));
            }
            if e.size == 0 {
                e.size = size;
            }
            if size != 0 && size != e.size {
                return Err(err(
                    d,
                    format!(
                        "the size {size} of shared memory zone \"{name}\" conflicts with already \
                         declared size {}",
                        e.size
                    ),
                ));
            }
            return Ok(e.zone.clone());
        }
        let zone = make();
        debug_assert_eq!(zone.tag(), tag);
        self.entries.push((
            name.to_string(),
            Entry {
                size,
                zone: zone.clone(),
            },
        ));
        Ok(zone)
    }
}

/// Once the configuration is read: every named zone must have been declared, and gets its
/// memory (the running one's, when a zone of that name, module and size runs already).
pub fn finish(b: &mut crate::conf::Builder) -> Result<(), Error> {
    finish_with(&mut b.shm_zones, Registry::global())
}

/// [`finish`] against a given registry.
pub fn finish_with(zones: &mut ShmZones, registry: &Registry) -> Result<(), Error> {
    for (name, e) in &zones.entries {
        if e.size == 0 {
            return Err(Error::new(
                format!("zero size shared memory zone \"{name}\""),
                None,
            ));
        }
        match &e.zone {
            Zone::Req(z) => z.attach(e.size, registry),
            Zone::Conn(z) => z.attach(e.size, registry),
            Zone::Upstream => Ok(()),
        }
        .map_err(|m| Error::new(m, None))?;
    }
    Ok(())
}

/// The zones of the running configurations, for a reload to take over.
#[derive(Default)]
pub struct Registry {
    zones: Mutex<HashMap<(Tag, String), Kept>>,
}

struct Kept {
    size: u64,
    key: String,
    memory: Weak<dyn Any + Send + Sync>,
}

impl Registry {
    /// The process's registry.
    pub fn global() -> &'static Registry {
        static GLOBAL: OnceLock<Registry> = OnceLock::new();
        GLOBAL.get_or_init(Registry::default)
    }

    /// The memory of zone `name`: the running one if its size matches (an error naming the
    /// previous key if the key changed, as nginx refuses such a reload), else new from `make`.
    pub fn adopt<M: Any + Send + Sync>(
        &self,
        tag: Tag,
        name: &str,
        size: u64,
        key: &str,
        make: impl FnOnce() -> Result<M, error::Error>,
    ) -> Result<Arc<M>, error::Error> {
        let mut zones = self.zones.lock().unwrap_or_else(|e| e.into_inner());
        zones.retain(|_, k| k.memory.strong_count() > 0);
        let id = (tag, name.to_string());
        if let Some(kept) = zones.get(&id) {
            if kept.size == size {
                if let Some(memory) = kept.memory.upgrade().and_then(|m| m.downcast::<M>().ok()) {
                    if kept.key != key {
                        let module = match tag {
                            Tag::LimitReq => "limit_req",
                            Tag::LimitConn => "limit_conn_zone",
                            Tag::Upstream => "upstream",
                        };
                        return Err(error::Error::invalid(format!(
                            "{module} \"{name}\" uses the \"{key}\" key while previously it used \
                             the \"{}\" key",
                            kept.key
                        )));
                    }
                    return Ok(memory);
                }
            }
        }
        let memory = Arc::new(make()?);
        let weak: Weak<dyn Any + Send + Sync> = {
            let any: Arc<dyn Any + Send + Sync> = memory.clone();
            Arc::downgrade(&any)
        };
        zones.insert(
            id,
            Kept {
                size,
                key: key.to_string(),
                memory: weak,
            },
        );
        Ok(memory)
    }
}

/// A zone's states: shards of LRU tables in one shared region, bounded by a [`slab::Slab`].
pub struct Shards<V> {
    shards: Box<[lru::Table<V>]>,
    ids: lru::Ids,
    pub slab: slab::Slab,
}

impl<V: Copy + Send + shoal_io::shm::Plain> Shards<V> {
    /// The memory of zone `name` of `size` bytes, with the module's own allocations
    /// (`reserved`) made, whose states take at least `smallest` bytes each: one shard per 256
    /// states it can hold, at most 16, each with room for twice its share (the keyed hash
    /// spreads keys evenly; a shard that is full anyway refuses as a full zone does).
    pub fn new(
        name: &str,
        size: u64,
        reserved: &[u64],
        smallest: u64,
    ) -> Result<Shards<V>, error::Error> {
        let states = slab::most(size, smallest).clamp(1, u64::from(u32::MAX / 4));
        let n = (states / 256).clamp(1, 16).next_power_of_two();
        let each = if n == 1 {
            states
        } else {
            (2 * states / n + 256).min(states)
        } as u32;
        let bytes = slab::Slab::BYTES + n as usize * (lru::Table::<V>::bytes(each) + 128);
        let region = shoal_io::shm::Region::new(name, bytes).map_err(|e| {
            error::Error::failed(format_args!("mmap(MAP_ANON|MAP_SHARED, {bytes})"), e)
        })?;
        let mut carver = shoal_io::shm::Carver::new(region);
        let slab = slab::Slab::new(size, reserved, &mut carver);
        let shards = (0..n).map(|_| lru::Table::new(&mut carver, each)).collect();
        Ok(Shards {
            shards,
            ids: lru::Ids::new(),
            slab,
        })
    }

    fn shard_of(&self, key: &[u8]) -> usize {
        (self.ids.second(key) as usize) & (self.shards.len() - 1)
    }

    /// The shard of `key`, locked.
    pub fn lock(&self, key: &[u8]) -> lru::Lru<'_, V> {
        self.shards[self.shard_of(key)].lock(&self.ids)
    }

    /// Every shard but `key`'s that is free right now, for an eviction the key's own shard
    /// cannot make.
    pub fn others(&self, key: &[u8]) -> impl Iterator<Item = lru::Lru<'_, V>> {
        let mine = self.shard_of(key);
        self.shards
            .iter()
            .enumerate()
            .filter(move |(i, _)| *i != mine)
            .filter_map(|(_, s)| s.try_lock(&self.ids))
    }

    /// States in the zone (takes every shard's lock in turn: for tests and diagnostics).
    pub fn len(&self) -> usize {
        self.shards.iter().map(|s| s.lock(&self.ids).len()).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// nginx's `ngx_current_msec`: milliseconds on the system's monotonic clock, the same in
/// every process (the zones' states, shared by the root master's children, hold such times).
pub fn now_ms() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime with a valid timespec pointer.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1000 + ts.tv_nsec as u64 / 1_000_000
}

/// A zone's key: text with variables, `$binary_remote_addr` read from the client.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Key {
    text: String,
    pieces: Vec<Piece>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum Piece {
    Template(Template),
    BinaryRemoteAddr,
}

const BINARY_REMOTE_ADDR: &str = "binary_remote_addr";

impl Key {
    /// Compiles a key (errors in nginx's words, from [`Template::compile`]).
    pub fn compile(text: &str) -> Result<Key, error::Error> {
        let mut pieces = Vec::new();
        let mut rest = text;
        let mut literal = String::new();
        while let Some(at) = rest.find('$') {
            let after = &rest[at + 1..];
            let (len, found) = if let Some(tail) = after.strip_prefix(BINARY_REMOTE_ADDR) {
                let word = tail
                    .bytes()
                    .next()
                    .is_some_and(|c| c.is_ascii_alphanumeric() || c == b'_');
                (BINARY_REMOTE_ADDR.len(), !word)
            } else if after.starts_with("{binary_remote_addr}") {
                (BINARY_REMOTE_ADDR.len() + 2, true)
            } else {
                (0, false)
            };
            if !found {
                literal.push_str(&rest[..at + 1]);
                rest = after;
                continue;
            }
            literal.push_str(&rest[..at]);
            if !literal.is_empty() {
                pieces.push(Piece::Template(Template::compile(&literal)?));
                literal.clear();
            }
            pieces.push(Piece::BinaryRemoteAddr);
            rest = &after[len..];
        }
        literal.push_str(rest);
        if !literal.is_empty() {
            pieces.push(Piece::Template(Template::compile(&literal)?));
        }
        Ok(Key {
            text: text.to_string(),
            pieces,
        })
    }

    /// The key as written (`$binary_remote_addr`), for messages.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// Appends the key's value for a request to `out`.
    pub fn eval(
        &self,
        client: &Client,
        eval: &mut dyn FnMut(&Template) -> String,
        out: &mut Vec<u8>,
    ) {
        for p in &self.pieces {
            match p {
                Piece::Template(t) if t.is_static() => {
                    for piece in &t.pieces {
                        if let crate::variables::Piece::Text(s) = piece {
                            out.extend_from_slice(s.as_bytes());
                        }
                    }
                }
                // (A variable holding `$binary_remote_addr`, by `map` say: its raw bytes.)
                Piece::Template(t) => crate::variables::raw_bytes_into(&eval(t), out),
                Piece::BinaryRemoteAddr => match client {
                    Client::Inet(IpAddr::V4(a)) => out.extend_from_slice(&a.octets()),
                    Client::Inet(IpAddr::V6(a)) => out.extend_from_slice(&a.octets()),
                    Client::Unix => out.extend_from_slice(b"unix:"),
                },
            }
        }
    }
}

/// Splits `zone=NAME:SIZE` as nginx does (the first `:`): `Ok(None)` when it is no `zone=`
/// parameter.
pub fn zone_param(d: &Directive, arg: &str) -> Result<Option<(String, u64)>, Error> {
    let Some(v) = arg.strip_prefix("zone=") else {
        return Ok(None);
    };
    let invalid = || err(d, format!("invalid zone size \"{arg}\""));
    let (name, size) = v.split_once(':').ok_or_else(invalid)?;
    let size = crate::conf::parse_size_km(size).ok_or_else(invalid)?;
    if size < 8 * slab::PAGE {
        return Err(err(d, format!("zone \"{arg}\" is too small")));
    }
    Ok(Some((name.to_string(), size)))
}

/// A log level of `limit_req_log_level` / `limit_conn_log_level` (`info`, `notice`, `warn`,
/// `error`, in any case).
pub fn log_level(d: &Directive) -> Result<crate::log::Level, Error> {
    use crate::log::Level;
    let v = &d.args[0].value;
    [Level::Info, Level::Notice, Level::Warn, Level::Error]
        .into_iter()
        .find(|l| v.eq_ignore_ascii_case(l.name()))
        .ok_or_else(|| crate::conf::invalid_value(d, v))
}

/// `limit_req_status` / `limit_conn_status`: 400 to 599.
pub fn status(d: &Directive) -> Result<u16, Error> {
    let n = crate::conf::number_arg(d, 0)?;
    if !(400..=599).contains(&n) {
        return Err(err(d, "value must be between 400 and 599"));
    }
    Ok(n as u16)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn eval_key(k: &Key, client: Client) -> Vec<u8> {
        let mut out = Vec::new();
        k.eval(&client, &mut |t| format!("<{}>", t.pieces.len()), &mut out);
        out
    }

    #[test]
    fn binary_remote_addr_is_the_address_bytes() {
        let k = Key::compile("$binary_remote_addr").unwrap();
        assert_eq!(k.text(), "$binary_remote_addr");
        assert_eq!(
            eval_key(&k, Client::Inet("10.0.0.1".parse().unwrap())),
            vec![10, 0, 0, 1]
        );
        assert_eq!(eval_key(&k, Client::Inet("::1".parse().unwrap())).len(), 16);
        assert_eq!(eval_key(&k, Client::Unix), b"unix:");
        let k = Key::compile("a${binary_remote_addr}b").unwrap();
        assert_eq!(
            eval_key(&k, Client::Inet("1.2.3.4".parse().unwrap())),
            b"a\x01\x02\x03\x04b"
        );
        let k = Key::compile("").unwrap();
        assert_eq!(eval_key(&k, Client::Unix), b"");
    }

    #[test]
    fn other_variables_are_templates() {
        crate::variables::begin_config();
        let k = Key::compile("$uri$binary_remote_addr").unwrap();
        assert_eq!(
            eval_key(&k, Client::Inet("1.2.3.4".parse().unwrap())),
            b"<1>\x01\x02\x03\x04"
        );
        assert!(Key::compile("${uri").is_err());
        // `$binary_remote_addrx` is another (unknown) variable, left to the template.
        let k = Key::compile("$binary_remote_addrx").unwrap();
        assert_eq!(k.pieces.len(), 1);
        assert!(matches!(k.pieces[0], Piece::Template(_)));
        assert!(crate::variables::end_config().is_err());
    }

    #[test]
    fn the_registry_keeps_a_zone_of_the_same_size_and_key() {
        let r = Registry::default();
        let a = r
            .adopt(Tag::LimitReq, "one", 32768, "$a", || Ok(1u32))
            .unwrap();
        let b = r
            .adopt(Tag::LimitReq, "one", 32768, "$a", || Ok(2u32))
            .unwrap();
        assert!(Arc::ptr_eq(&a, &b));
        let e = r
            .adopt(Tag::LimitReq, "one", 32768, "$b", || Ok(3u32))
            .unwrap_err();
        assert_eq!(
            e,
            "limit_req \"one\" uses the \"$b\" key while previously it used the \"$a\" key"
        );
        let c = r
            .adopt(Tag::LimitReq, "one", 65536, "$b", || Ok(4u32))
            .unwrap();
        assert_eq!(*c, 4);
        let d = r
            .adopt(Tag::LimitConn, "one", 65536, "$b", || Ok(5u32))
            .unwrap();
        assert_eq!(*d, 5);
        drop((a, b, c, d));
        let f = r
            .adopt(Tag::LimitReq, "one", 65536, "$z", || Ok(6u32))
            .unwrap();
        assert_eq!(*f, 6, "nothing runs with it any more");
    }
}
