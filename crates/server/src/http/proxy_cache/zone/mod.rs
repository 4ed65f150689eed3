//! One `keys_zone`: the index of a cache directory, shared by every worker, and the two
//! background threads that keep it (nginx's cache loader and cache manager processes).
//!
//! **The index** maps a key's MD5 to what the workers need to decide without touching the disk:
//! whether the object exists, its size, until when it is fresh, how often it was asked for
//! (`proxy_cache_min_uses`), whether someone is filling it (`updating`), and when it was last
//! used (`inactive`). Workers are threads of one process, so it is plain memory: 16 shards,
//! each a `Mutex` over a map and an LRU order (a `BTreeMap` from a global use stamp to the
//! key; a use writes its stamp in the node only, and the order is brought up to date when it
//! is walked, so a hit costs one map lookup, not two moves in the tree). A request locks one
//! shard for a few hundred nanoseconds; two workers rarely meet on the same shard, and
//! nothing waits for I/O under a lock. The LRU is per shard: eviction takes
//! a shard's oldest, which is within a shard's spread of the global oldest (nginx's own is one
//! queue under one shared-memory mutex; sharding trades exact order for no contention).
//! The zone's size bounds the keys, about 8,000 per MB as nginx's nodes take.
//!
//! **The loader** walks the directory once after start, `loader_files` entries per batch
//! (for at most `loader_threshold`), sleeping `loader_sleep` between batches, and adds each
//! object it finds; until it is done the zone is "cold" and a key missing from the index is
//! still looked for on disk. Files that are not objects (temp files a crash left beside the
//! objects) are removed. **The manager** removes objects unused for `inactive`, and the least
//! recently used ones while the cache is over `max_size` or the disk under `min_free`.
//! Both run on their own threads (they block on the disk by design), never on a worker.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};

use arc_swap::ArcSwap;

use super::md5;
use super::CachePathConf;
use crate::log::Level;

const SHARDS: usize = 16;

/// What the index knows of one key.
#[derive(Clone, Debug, Default)]
pub struct Node {
    /// Where the entry is filed in its shard's LRU order (the `BTreeMap`'s key).
    stamp: u64,
    /// The last use (a stamp of its shard's, at or after `stamp`; see [`Shard::stamp`]): a
    /// use only writes this, and the entry is filed anew at it when the LRU order is walked
    /// (see [`oldest`]).
    used: u64,
    /// Fresh until (unix seconds); 0: not known yet (found by the loader).
    pub valid_sec: i64,
    /// Requests for the key since it entered the index.
    pub uses: u64,
    /// Bytes on disk (0 when not stored).
    pub size: u64,
    /// A fill is in progress.
    pub updating: bool,
    /// Since when (for `proxy_cache_lock_age`).
    pub updating_since: Option<Instant>,
    /// The object is on disk.
    pub exists: bool,
    /// Last use (unix seconds), for `inactive`.
    pub accessed: i64,
    /// The object's generation: a new value (never reused in the zone) each time the object
    /// on disk changes (stored, refreshed by a revalidation, found by the loader, lost); 0
    /// while none is known. A worker's copy of an object is good only while this is the same.
    pub gen: u64,
}

#[derive(Default)]
struct Shard {
    map: super::md5::DigestMap<Node>,
    lru: BTreeMap<u64, [u8; 16]>,
    /// The last stamp given (see [`Shard::stamp`]).
    last_stamp: u64,
}

impl Shard {
    /// A stamp for a use now: the time of the request being answered, in nanoseconds, made
    /// later than every earlier stamp of the shard. Stamps order uses across the shards by
    /// time (the least recently used object of the zone is the oldest of the shards'
    /// oldest), and no shared counter is written for one: a HIT on one worker and a HIT on
    /// another touch nothing in common but the shard's lock.
    fn stamp(&mut self) -> u64 {
        static BASE: OnceLock<Instant> = OnceLock::new();
        let at = crate::http::request::request_now();
        let t = at.saturating_duration_since(*BASE.get_or_init(Instant::now));
        let s = (t.as_nanos() as u64).max(self.last_stamp + 1);
        self.last_stamp = s;
        s
    }
}

/// The cache's figures (for status pages).
#[derive(Debug, Default)]
pub struct Stats {
    /// (Counted per request, from every worker: see [`Tally`].)
    pub hits: crate::status::Tally,
    pub misses: crate::status::Tally,
    pub evictions: AtomicU64,
    pub write_errors: AtomicU64,
}

/// One `keys_zone` and its directory.
pub struct Zone {
    conf: ArcSwap<CachePathConf>,
    shards: Box<[Mutex<Shard>]>,
    /// The last object generation given (see [`Node::gen`]).
    gens: AtomicU64,
    /// Bytes of the objects on disk that the index knows.
    bytes: AtomicI64,
    /// The loader has not finished: a key not in the index may still be on disk.
    cold: AtomicBool,
    stop: AtomicBool,
    temp_counter: AtomicU64,
    /// Bumped by each reload that keeps this zone: the workers' copies of its objects go.
    epoch: AtomicU64,
    pub stats: Stats,
}

/// Unix seconds now.
pub fn now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64)
}

impl Zone {
    /// A zone for `conf`, empty and cold (call [`Zone::start`] to load and manage it).
    pub fn new(conf: Arc<CachePathConf>) -> Zone {
        Zone {
            conf: ArcSwap::new(conf),
            shards: (0..SHARDS).map(|_| Mutex::new(Shard::default())).collect(),
            gens: AtomicU64::new(0),
            bytes: AtomicI64::new(0),
            cold: AtomicBool::new(true),
            stop: AtomicBool::new(false),
            temp_counter: AtomicU64::new(0),
            epoch: AtomicU64::new(0),
            stats: Stats::default(),
        }
    }

    pub fn conf(&self) -> Arc<CachePathConf> {
        self.conf.load_full()
    }

    pub fn is_cold(&self) -> bool {
        self.cold.load(Ordering::Acquire)
    }

    /// The reload epoch (see [`Node::gen`] for the object's own).
    pub fn epoch(&self) -> u64 {
        self.epoch.load(Ordering::Acquire)
    }

    /// Bytes the index counts on disk.
    pub fn bytes(&self) -> u64 {
        self.bytes.load(Ordering::Relaxed).max(0) as u64
    }

    /// Keys in the index.
    pub fn entries(&self) -> usize {
        self.shards.iter().map(|s| lock(s).map.len()).sum()
    }

    fn shard(&self, key: &[u8; 16]) -> MutexGuard<'_, Shard> {
        lock(&self.shards[key[15] as usize % SHARDS])
    }

    /// A new object generation, never given before in the zone.
    fn next_gen(&self) -> u64 {
        self.gens.fetch_add(1, Ordering::Relaxed) + 1
    }

    fn per_shard(&self) -> usize {
        self.conf().max_keys().div_ceil(SHARDS)
    }

    /// The path of the object named `key` (levels from the end of its hex name).
    pub fn path_of(&self, key: &[u8; 16]) -> PathBuf {
        path_in(&self.conf(), key)
    }

    /// A request for `key`: counts a use, moves it to the front, adds it when absent. Returns
    /// what the index knows (after the use).
    pub fn touch(&self, key: &[u8; 16]) -> Node {
        self.touch_at(key, now())
    }

    /// [`Zone::touch`] at `accessed` (unix seconds, the caller's reading of [`now`]).
    pub fn touch_at(&self, key: &[u8; 16], accessed: i64) -> Node {
        let mut sh = self.shard(key);
        let stamp = sh.stamp();
        // A known key (every hit): its use is written down, the LRU order is left as it is.
        if let Some(n) = sh.map.get_mut(key) {
            n.used = stamp;
            n.uses += 1;
            n.accessed = accessed;
            return n.clone();
        }
        let cap = self.per_shard();
        let mut evicted = Vec::new();
        let node = {
            let sh = &mut *sh;
            while sh.map.len() >= cap {
                match evict_one(sh) {
                    Some((k, n)) => evicted.push((k, n)),
                    None => break,
                }
            }
            let n = sh.map.entry(*key).or_default();
            n.stamp = stamp;
            n.used = stamp;
            n.uses = 1;
            n.accessed = accessed;
            sh.lru.insert(stamp, *key);
            n.clone()
        };
        drop(sh);
        for (k, n) in evicted {
            self.forget(&k, &n);
        }
        node
    }

    /// What the index knows of `key`, without counting a use.
    pub fn peek(&self, key: &[u8; 16]) -> Option<Node> {
        self.shard(key).map.get(key).cloned()
    }

    /// Marks a fill of `key` started; false if another is in progress (and younger than `age`).
    pub fn begin_update(&self, key: &[u8; 16], age: Option<Duration>) -> bool {
        let mut sh = self.shard(key);
        let Some(n) = sh.map.get_mut(key) else {
            return true;
        };
        if n.updating {
            match (age, n.updating_since) {
                (Some(a), Some(t)) if t.elapsed() >= a => {}
                (None, _) => {}
                _ => return false,
            }
        }
        n.updating = true;
        n.updating_since = Some(Instant::now());
        true
    }

    /// A fill ended without storing anything.
    pub fn end_update(&self, key: &[u8; 16]) {
        if let Some(n) = self.shard(key).map.get_mut(key) {
            n.updating = false;
            n.updating_since = None;
        }
    }

    /// An object was renamed into place: `size` bytes on disk, fresh until `valid_sec`.
    pub fn stored(&self, key: &[u8; 16], size: u64, valid_sec: i64) {
        let gen = self.next_gen();
        let old_size;
        {
            let mut sh = self.shard(key);
            let sh = &mut *sh;
            let stamp = sh.stamp();
            let n = sh.map.entry(*key).or_default();
            sh.lru.remove(&n.stamp);
            n.stamp = stamp;
            n.used = stamp;
            old_size = if n.exists { n.size } else { 0 };
            n.gen = gen;
            n.exists = true;
            n.size = size;
            n.valid_sec = valid_sec;
            n.updating = false;
            n.updating_since = None;
            n.accessed = now();
            sh.lru.insert(stamp, *key);
        }
        self.bytes
            .fetch_add(size as i64 - old_size as i64, Ordering::Relaxed);
    }

    /// A revalidated object is fresh again until `valid_sec`.
    pub fn refreshed(&self, key: &[u8; 16], valid_sec: i64) {
        let gen = self.next_gen();
        if let Some(n) = self.shard(key).map.get_mut(key) {
            n.valid_sec = valid_sec;
            n.gen = gen;
        }
    }

    /// The loader found an object on disk (not known yet, or known only as asked for).
    fn loaded(&self, key: &[u8; 16], size: u64) {
        let gen = self.next_gen();
        let cap = self.per_shard();
        let mut evicted = Vec::new();
        {
            let mut sh = self.shard(key);
            let sh = &mut *sh;
            if let Some(n) = sh.map.get(key) {
                if n.exists {
                    return;
                }
            } else {
                while sh.map.len() >= cap {
                    match evict_one(sh) {
                        Some(e) => evicted.push(e),
                        None => break,
                    }
                }
            }
            let stamp = sh.stamp();
            let n = sh.map.entry(*key).or_default();
            sh.lru.remove(&n.stamp);
            n.stamp = stamp;
            n.used = stamp;
            n.gen = gen;
            n.exists = true;
            n.size = size;
            n.accessed = now();
            sh.lru.insert(stamp, *key);
        }
        self.bytes.fetch_add(size as i64, Ordering::Relaxed);
        for (k, n) in evicted {
            self.forget(&k, &n);
        }
    }

    /// Drops `key` from the index (its file is left to the caller). Returns whether it was
    /// stored.
    pub fn remove(&self, key: &[u8; 16]) -> bool {
        let node = {
            let mut sh = self.shard(key);
            let n = sh.map.remove(key);
            if let Some(n) = &n {
                sh.lru.remove(&n.stamp);
            }
            n
        };
        match node {
            Some(n) if n.exists => {
                self.bytes.fetch_sub(n.size as i64, Ordering::Relaxed);
                true
            }
            _ => false,
        }
    }

    /// Marks `key` as not on disk (its file was found bad and removed).
    pub fn lost(&self, key: &[u8; 16]) {
        let gen = self.next_gen();
        let size = {
            let mut sh = self.shard(key);
            match sh.map.get_mut(key) {
                Some(n) if n.exists => {
                    n.exists = false;
                    n.gen = gen;
                    std::mem::take(&mut n.size)
                }
                _ => 0,
            }
        };
        self.bytes.fetch_sub(size as i64, Ordering::Relaxed);
    }

    /// An entry evicted to make room: its bytes leave the count, its file goes.
    fn forget(&self, key: &[u8; 16], n: &Node) {
        self.stats.evictions.fetch_add(1, Ordering::Relaxed);
        if n.exists {
            self.bytes.fetch_sub(n.size as i64, Ordering::Relaxed);
            // The unlink runs off the worker: the manager's thread takes the list.
            lock(&PENDING_UNLINK).push(self.path_of(key));
        }
    }

    /// A unique temp file name for a fill of `key`: beside the object (`use_temp_path=off`)
    /// or under the temp path.
    pub fn temp_path_for(&self, key: &[u8; 16]) -> PathBuf {
        let conf = self.conf();
        let n = self.temp_counter.fetch_add(1, Ordering::Relaxed);
        let name = format!("{}.{}.{n}", md5::hex(key), std::process::id());
        if conf.use_temp_path {
            conf.temp_path.join(name)
        } else {
            let mut p = path_in(&conf, key);
            p.set_file_name(name);
            p
        }
    }

    /// Removes the least recently used object not being filled; returns its path and size.
    fn evict_lru(&self) -> Option<(PathBuf, u64)> {
        let evictable = |n: &Node| n.exists && !n.updating;
        // The shard whose oldest entry is the oldest.
        let mut best: Option<(usize, u64)> = None;
        for (i, s) in self.shards.iter().enumerate() {
            let mut sh = lock(s);
            if let Some((stamp, _)) = oldest(&mut sh, 0, evictable) {
                if best.is_none_or(|(_, b)| stamp < b) {
                    best = Some((i, stamp));
                }
            }
        }
        let (i, stamp) = best?;
        let mut sh = lock(&self.shards[i]);
        // Used or changed since it was found: not the oldest any more (the next round looks
        // again).
        let key = *sh.lru.get(&stamp)?;
        if !sh
            .map
            .get(&key)
            .is_some_and(|n| n.used == stamp && evictable(n))
        {
            return None;
        }
        let n = sh.map.remove(&key)?;
        sh.lru.remove(&stamp);
        drop(sh);
        self.bytes.fetch_sub(n.size as i64, Ordering::Relaxed);
        self.stats.evictions.fetch_add(1, Ordering::Relaxed);
        Some((self.path_of(&key), n.size))
    }

    /// Entries unused since `before` (unix seconds) and not being filled.
    fn inactive_keys(&self, before: i64, max: usize) -> Vec<[u8; 16]> {
        let mut out = Vec::new();
        for s in self.shards.iter() {
            let mut sh = lock(s);
            let mut from = 0;
            while out.len() < max {
                // The LRU order is by use: once an entry is younger, so is the rest.
                let Some((stamp, k)) =
                    oldest(&mut sh, from, |n| n.accessed >= before || !n.updating)
                else {
                    break;
                };
                if sh.map.get(&k).is_none_or(|n| n.accessed >= before) {
                    break;
                }
                out.push(k);
                from = stamp + 1;
            }
            if out.len() >= max {
                break;
            }
        }
        out
    }
}

/// The oldest entry of a shard filed at `from` or later for which `wanted` holds, with the
/// stamp it is filed at. An entry used since it was filed is filed anew at its last use on the
/// way (a use only writes [`Node::used`]), so the order walked is the order of last use.
fn oldest(
    sh: &mut Shard,
    mut from: u64,
    wanted: impl Fn(&Node) -> bool,
) -> Option<(u64, [u8; 16])> {
    loop {
        let (&stamp, &key) = sh.lru.range(from..).next()?;
        let Some(n) = sh.map.get_mut(&key) else {
            // Not kept apart from the map anywhere; dropped if it ever is.
            debug_assert!(false, "an LRU entry without its node");
            sh.lru.remove(&stamp);
            continue;
        };
        if n.used != stamp {
            // Used since: filed anew behind (its use is later than this stamp).
            debug_assert!(n.used > stamp);
            sh.lru.remove(&stamp);
            n.stamp = n.used;
            sh.lru.insert(n.used, key);
            continue;
        }
        if wanted(n) {
            return Some((stamp, key));
        }
        from = stamp + 1;
    }
}

/// Removes the oldest entry of a full shard that is not being filled.
fn evict_one(sh: &mut Shard) -> Option<([u8; 16], Node)> {
    let (stamp, key) = oldest(sh, 0, |n| !n.updating)?;
    sh.lru.remove(&stamp);
    let n = sh.map.remove(&key)?;
    Some((key, n))
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic under the lock leaves plain data: still usable.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Files whose index entries were evicted by workers, for the manager to unlink.
mod keeper;
#[cfg(test)]
mod tests;

use keeper::PENDING_UNLINK;
pub use keeper::{all, configure, make_dir, make_dirs, path_in, within, Zones};
