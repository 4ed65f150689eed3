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
static PENDING_UNLINK: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());

/// The object's path for a configuration.
pub fn path_in(conf: &CachePathConf, key: &[u8; 16]) -> PathBuf {
    let name = md5::hex(key);
    let mut p = conf.path.clone();
    let mut end = name.len();
    for &l in &conf.levels {
        p.push(&name[end - l..end]);
        end -= l;
    }
    p.push(&name);
    p
}

/// Bytes a file takes on disk.
fn disk_size(m: &std::fs::Metadata) -> u64 {
    use std::os::unix::fs::MetadataExt;
    (m.blocks() * 512).max(m.len())
}

// ---- the registry of running zones ----

/// By name; looked up once per request in a cached location, so with the fast hash (the
/// names are the configuration's, a handful).
pub type Zones = shoal_io::fxhash::FxHashMap<String, Arc<Zone>>;

fn registry() -> &'static ArcSwap<Zones> {
    static R: OnceLock<ArcSwap<Zones>> = OnceLock::new();
    R.get_or_init(|| ArcSwap::from_pointee(Zones::default()))
}

/// Every running zone (for status pages).
pub fn all() -> Vec<Arc<Zone>> {
    registry().load().values().cloned().collect()
}

/// Makes `paths` the running zones (at start and on reload): a zone with the same name and
/// directory keeps its index (its limits may change); others are created, with their
/// directories, and loaded in the background; zones no longer configured stop their threads.
/// Returns them, for the generation of `paths` to keep: until a connection moves on to that
/// generation its requests go on using the zones of their own (a zone whose directory a
/// reload changed is another zone under the same name).
pub fn configure(paths: &[Arc<CachePathConf>]) -> Arc<Zones> {
    let old = registry().load_full();
    let mut new = Zones::default();
    for c in paths {
        match old.get(&c.zone) {
            Some(z) if z.conf().path == c.path => {
                z.conf.store(c.clone());
                z.epoch.fetch_add(1, Ordering::AcqRel);
                new.insert(c.zone.clone(), z.clone());
            }
            _ => {
                if let Err(e) = std::fs::create_dir_all(&c.path) {
                    crate::error_log!(
                        Level::Emerg,
                        "mkdir() \"{}\" failed {}",
                        c.path.display(),
                        shoal_conf::os_error(&e)
                    );
                }
                if c.use_temp_path {
                    let _ = std::fs::create_dir_all(&c.temp_path);
                }
                let z = Arc::new(Zone::new(c.clone()));
                start(&z);
                new.insert(c.zone.clone(), z);
            }
        }
    }
    for (name, z) in old.iter() {
        if !new.get(name).is_some_and(|n| Arc::ptr_eq(n, z)) {
            z.stop.store(true, Ordering::Release);
        }
    }
    let new = Arc::new(new);
    registry().store(new.clone());
    new
}

/// Creates each cache directory (and its temp directory) and, when running as root, gives
/// them to the workers' user.
pub fn make_dirs(paths: &[Arc<CachePathConf>], owner: Option<(libc::uid_t, libc::gid_t)>) {
    for c in paths {
        let mut dirs = vec![c.path.as_path()];
        if c.use_temp_path {
            dirs.push(c.temp_path.as_path());
        }
        for d in dirs {
            if let Err(e) = std::fs::create_dir_all(d) {
                crate::error_log!(
                    Level::Emerg,
                    "mkdir() \"{}\" failed {}",
                    d.display(),
                    shoal_conf::os_error(&e)
                );
                continue;
            }
            if let Some((uid, gid)) = owner {
                let _ = std::os::unix::fs::chown(d, Some(uid), Some(gid));
            }
        }
    }
}

/// Starts the zone's loader and manager threads.
fn start(z: &Arc<Zone>) {
    let weak = Arc::downgrade(z);
    let _ = std::thread::Builder::new()
        .name("cache-loader".into())
        .spawn(move || {
            if let Some(z) = weak.upgrade() {
                load(&z);
                z.cold.store(false, Ordering::Release);
            }
        });
    let weak = Arc::downgrade(z);
    let _ = std::thread::Builder::new()
        .name("cache-manager".into())
        .spawn(move || loop {
            let Some(z) = weak.upgrade() else { return };
            if z.stop.load(Ordering::Acquire) {
                return;
            }
            let sleep = manage(&z);
            drop(z);
            std::thread::sleep(sleep);
        });
}

/// The loader: walks the directory, `loader_files` entries per batch.
fn load(z: &Zone) {
    let conf = z.conf();
    let mut stack = vec![(conf.path.clone(), 0usize)];
    let mut batch = 0u64;
    let mut batch_start = Instant::now();
    let mut files = 0u64;
    while let Some((dir, depth)) = stack.pop() {
        let Ok(rd) = std::fs::read_dir(&dir) else {
            continue;
        };
        for e in rd.flatten() {
            if z.stop.load(Ordering::Acquire) {
                return;
            }
            let path = e.path();
            let Ok(m) = e.metadata() else { continue };
            if m.is_dir() {
                if depth < conf.levels.len() {
                    stack.push((path, depth + 1));
                }
                continue;
            }
            let name = e.file_name();
            let key = name.to_str().and_then(md5::unhex);
            match key {
                Some(k) if depth == conf.levels.len() && path == path_in(&conf, &k) => {
                    z.loaded(&k, disk_size(&m));
                    files += 1;
                }
                // An object being filled now (`use_temp_path=off` puts it beside the others):
                // its writer is this process, or another one still running (an old binary).
                _ if name.to_str().is_some_and(is_live_temp_file) => {}
                _ => {
                    // A temp file a crash left beside the objects, or a stranger.
                    crate::error_log!(
                        Level::Crit,
                        "cache file \"{}\" is not a cache object, deleted",
                        path.display()
                    );
                    let _ = std::fs::remove_file(&path);
                }
            }
            batch += 1;
            if batch >= conf.loader_files.max(1) || batch_start.elapsed() >= conf.loader_threshold {
                std::thread::sleep(conf.loader_sleep);
                batch = 0;
                batch_start = Instant::now();
            }
        }
    }
    crate::error_log!(
        Level::Notice,
        "http file cache: {} {} files, {}M of disk",
        conf.path.display(),
        files,
        z.bytes() / (1024 * 1024)
    );
}

/// Whether `name` is a temp file of [`Zone::temp_path_for`]'s (`HEX.PID.N`) whose process is
/// alive: a fill in progress, not a crash's leftover.
fn is_live_temp_file(name: &str) -> bool {
    let mut parts = name.split('.');
    let (Some(key), Some(pid), Some(n), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return false;
    };
    if md5::unhex(key).is_none() || n.parse::<u64>().is_err() {
        return false;
    }
    match pid.parse::<u32>() {
        Ok(p) if p == std::process::id() => true,
        Ok(p) => Path::new("/proc").join(p.to_string()).exists(),
        Err(_) => false,
    }
}

/// One round of the manager: evicted files unlinked, inactive objects removed, then the LRU
/// ones while over `max_size` or under `min_free`. Returns how long to sleep.
fn manage(z: &Zone) -> Duration {
    let conf = z.conf();
    let pending = std::mem::take(&mut *lock(&PENDING_UNLINK));
    for p in pending {
        // A key evicted and stored again since keeps its new file.
        let fresh = p
            .file_name()
            .and_then(|n| n.to_str())
            .and_then(md5::unhex)
            .and_then(|k| z.peek(&k))
            .is_some_and(|n| n.exists);
        if !fresh {
            let _ = std::fs::remove_file(&p);
        }
    }
    let started = Instant::now();
    let mut done = 0u64;
    let over_budget = |done: u64| {
        done >= conf.manager_files.max(1) || started.elapsed() >= conf.manager_threshold
    };
    let before = now() - conf.inactive.as_secs() as i64;
    for k in z.inactive_keys(before, conf.manager_files.max(1) as usize) {
        if z.remove(&k) {
            let _ = std::fs::remove_file(z.path_of(&k));
        }
        done += 1;
    }
    loop {
        if over_budget(done) {
            return conf.manager_sleep;
        }
        let over_size = conf.max_size.is_some_and(|m| z.bytes() > m);
        let low_disk = conf.min_free > 0
            && shoal_io::syscall::fs_free(&conf.path).is_ok_and(|free| free < conf.min_free);
        if !over_size && !low_disk {
            break;
        }
        match z.evict_lru() {
            Some((p, _)) => {
                let _ = std::fs::remove_file(&p);
                done += 1;
            }
            None => break,
        }
    }
    if done > 0 {
        conf.manager_sleep
    } else {
        Duration::from_millis(200).max(conf.manager_sleep)
    }
}

/// Whether `path` is inside `dir` (for the temp path check).
pub fn within(path: &Path, dir: &Path) -> bool {
    path.starts_with(dir)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn conf(dir: &Path, zone_size: u64) -> Arc<CachePathConf> {
        Arc::new(CachePathConf {
            path: dir.to_path_buf(),
            levels: vec![1, 2],
            zone: "z".into(),
            zone_size,
            inactive: Duration::from_secs(600),
            max_size: None,
            min_free: 0,
            use_temp_path: false,
            manager_files: 100,
            manager_sleep: Duration::from_millis(50),
            manager_threshold: Duration::from_millis(200),
            loader_files: 100,
            loader_sleep: Duration::from_millis(1),
            loader_threshold: Duration::from_millis(200),
            temp_path: dir.join("tmp"),
            span: shoal_conf::Span {
                file: None,
                line: 0,
            },
        })
    }

    #[test]
    fn levels_come_from_the_end_of_the_name() {
        let c = conf(Path::new("/c"), 1 << 20);
        let k = md5::unhex("b7f54b2df7773722d382f4809d65029c").unwrap();
        assert_eq!(
            path_in(&c, &k),
            Path::new("/c/c/29/b7f54b2df7773722d382f4809d65029c")
        );
    }

    #[test]
    fn the_zone_size_bounds_the_keys_and_the_oldest_go() {
        // 8 KiB: 64 keys, 4 per shard.
        let z = Zone::new(conf(Path::new("/nonexistent"), 8192));
        let keys: Vec<[u8; 16]> = (0..200u32).map(|i| md5::md5(&i.to_le_bytes())).collect();
        for k in &keys {
            z.touch(k);
        }
        assert!(z.entries() <= 64, "{}", z.entries());
        // The last one touched is there, the first is not.
        assert!(z.peek(keys.last().unwrap()).is_some());
        assert!(z.peek(&keys[0]).is_none());
    }

    #[test]
    fn bytes_follow_stores_and_removals_and_lru_eviction_takes_the_oldest() {
        let z = Zone::new(conf(Path::new("/nonexistent"), 1 << 20));
        let a = md5::md5(b"a");
        let b = md5::md5(b"b");
        z.touch(&a);
        z.stored(&a, 100, 1);
        z.touch(&b);
        z.stored(&b, 50, 1);
        assert_eq!(z.bytes(), 150);
        z.touch(&a);
        let (p, size) = z.evict_lru().unwrap();
        assert_eq!(size, 50);
        assert!(p.ends_with(md5::hex(&b)));
        assert_eq!(z.bytes(), 100);
        assert!(z.remove(&a));
        assert_eq!(z.bytes(), 0);
    }

    /// Keys of one shard (the shard is the digest's last byte).
    fn same_shard(n: usize) -> Vec<[u8; 16]> {
        (0..10_000u32)
            .map(|i| md5::md5(&i.to_le_bytes()))
            .filter(|k| k[15] as usize % SHARDS == 3)
            .take(n)
            .collect()
    }

    #[test]
    fn a_key_used_again_is_not_the_one_a_full_shard_drops() {
        // 8 KiB: 64 keys, 4 per shard.
        let z = Zone::new(conf(Path::new("/nonexistent"), 8192));
        let k = same_shard(5);
        for key in &k[..4] {
            z.touch(key);
        }
        // The first key is used again: the second is now the least recently used.
        z.touch(&k[0]);
        z.touch(&k[4]);
        assert!(z.peek(&k[0]).is_some());
        assert!(z.peek(&k[1]).is_none());
        assert!(z.peek(&k[4]).is_some());
        assert_eq!(z.peek(&k[0]).unwrap().uses, 2);
    }

    #[test]
    fn inactive_keys_are_found_behind_a_key_used_since() {
        let z = Zone::new(conf(Path::new("/nonexistent"), 1 << 20));
        let k = same_shard(3);
        for key in &k {
            z.touch(key);
        }
        // All three unused for a long time, then the first one used again.
        for key in &k {
            z.shard(key).map.get_mut(key).unwrap().accessed = 0;
        }
        z.touch(&k[0]);
        let mut found = z.inactive_keys(now() - 60, 100);
        found.sort();
        let mut want = vec![k[1], k[2]];
        want.sort();
        assert_eq!(found, want);
        // Nothing is lost or doubled in the order on the way.
        let sh = z.shard(&k[0]);
        assert_eq!(sh.lru.len(), 3);
        assert_eq!(sh.lru.get(&sh.map[&k[0]].stamp), Some(&k[0]));
    }

    #[test]
    fn one_fill_at_a_time() {
        let z = Zone::new(conf(Path::new("/nonexistent"), 1 << 20));
        let a = md5::md5(b"a");
        z.touch(&a);
        assert!(z.begin_update(&a, Some(Duration::from_secs(5))));
        assert!(!z.begin_update(&a, Some(Duration::from_secs(5))));
        assert!(z.begin_update(&a, Some(Duration::ZERO)));
        z.end_update(&a);
        assert!(z.begin_update(&a, Some(Duration::from_secs(5))));
    }

    #[test]
    fn the_loader_finds_objects_and_deletes_leftovers() {
        let dir = tempfile::tempdir().unwrap();
        let c = conf(dir.path(), 1 << 20);
        let k = md5::md5(b"key");
        let p = path_in(&c, &k);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(&p, b"x").unwrap();
        // A fill whose process is gone (a pid that just exited) is a leftover; one of a
        // live process (this one) is a fill in progress.
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let gone = child.id();
        child.wait().unwrap();
        let leftover = p.with_file_name(format!("{}.{gone}.2", md5::hex(&k)));
        std::fs::write(&leftover, b"half").unwrap();
        let filling = p.with_file_name(format!("{}.{}.3", md5::hex(&k), std::process::id()));
        std::fs::write(&filling, b"half").unwrap();
        let z = Zone::new(c);
        load(&z);
        assert!(z.peek(&k).is_some_and(|n| n.exists));
        assert!(!leftover.exists());
        assert!(filling.exists());
        assert!(p.exists());
    }
}
