//! The worker's hot objects: what a HIT needs, kept per worker so that a hit of a hot object
//! touches no file (the `open_file_cache` of the proxy cache). An entry holds the open file
//! (so a large body is sent from it without open/fstat/close), the object's fixed header and
//! its stored head already parsed, and for a small object (a body up to `SMALL_FILE`) the
//! whole file's bytes, sent from memory with the head in one write.
//!
//! The one thing to know: an entry is only ever used after the shared index
//! ([`super::zone`]) said, for this very request, that the object is still the one the entry
//! was taken from: the same zone (a reload that moves the cache makes another zone), the same
//! reload epoch, and the same [`Node::gen`], which changes whenever the object on disk does
//! (stored over, revalidated, purged, evicted, found bad). Freshness is read from the entry's
//! header on every hit, as from the file's. So a worker never answers from a copy the index no
//! longer vouches for; the cost of the check is the shard lock a hit takes anyway, plus one
//! `fstat` of the held file, which catches a file changed behind shoal's back (truncated or
//! overwritten in place: read again, and a logged miss if it is bad).
//!
//! Entries are found by the whole key (a fast hash, then the key compared byte for byte), and
//! each keeps its key's MD5: a hit of a hot object computes no digest, and a key is only ever
//! answered with a copy read for that very key (nginx compares the key stored in the file; two
//! keys of one digest never share a copy).
//!
//! Bounded in entries (open files) and bytes per worker, and in open files for all workers
//! together (an eighth of `RLIMIT_NOFILE`, so the copies never starve `accept`); the least
//! recently used entry goes first.
//! Thread-local: nothing here takes a lock.
//!
//! The file's own check costs nothing per hit where inotify is to be had: each worker watches
//! the files its entries hold (`IN_MODIFY`, `IN_ATTRIB`: written, truncated, its times, mode or
//! links changed), and a hit first takes the events the worker's event loop has seen the
//! instance readable for ([`take_changes`]); an entry whose file had any is dropped, so the
//! object is read again. The kernel queues the event in the very write that changes the file,
//! before any later request can arrive, so the next hit sees it. An entry without a watch (no
//! inotify instance, no watch left) `fstat`s its file on every hit instead.

use std::cell::RefCell;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock, Weak};

use std::os::fd::{AsFd, OwnedFd};

use shoal_io::fxhash::FxHashMap;
use tokio::io::unix::AsyncFd;

use super::serve::Object;
use super::zone::{Node, Zone};

/// Entries per worker (each one open file).
const MAX_ENTRIES: usize = 512;
/// Bytes of kept small objects per worker.
const MAX_BYTES: usize = 16 << 20;

/// Files the entries of all workers hold open.
static HELD: AtomicUsize = AtomicUsize::new(0);

/// The most files all workers' entries may hold: an eighth of the open-file limit, read once
/// (`worker_rlimit_nofile` is set before the workers start).
fn held_max() -> usize {
    static MAX: OnceLock<usize> = OnceLock::new();
    *MAX.get_or_init(|| {
        shoal_io::syscall::nofile_limit().map_or(128, |n| (n / 8).min(1 << 20) as usize)
    })
}

struct Entry {
    /// The inotify watch on the held file; `None`: checked with an fstat per hit.
    wd: Option<i32>,
    zone: Weak<Zone>,
    epoch: u64,
    gen: u64,
    /// The key's MD5 (the object's name in the index), kept so that a hit needs not compute it.
    md5: [u8; 16],
    obj: Object,
    bytes: usize,
    used: u64,
}

impl Drop for Entry {
    fn drop(&mut self) {
        HELD.fetch_sub(1, Ordering::Relaxed);
    }
}

#[derive(Default)]
struct Hot {
    /// By the whole key: an entry is found only by the very key its object was read for.
    map: FxHashMap<Box<[u8]>, Entry>,
    bytes: usize,
    tick: u64,
    /// The worker's inotify instance, made with its first entry.
    watch: Option<Watch>,
    /// No instance could be made: entries check their files with fstat.
    watch_failed: bool,
}

/// The worker's inotify instance and which entry each watch is for.
struct Watch {
    fd: AsyncFd<OwnedFd>,
    by_wd: FxHashMap<i32, Box<[u8]>>,
}

/// What changes an object's file in a way a hit must notice.
const WATCHED: u32 = libc::IN_MODIFY | libc::IN_ATTRIB | libc::IN_DELETE_SELF | libc::IN_MOVE_SELF;

impl Hot {
    fn remove(&mut self, key: &[u8]) {
        if let Some(e) = self.map.remove(key) {
            self.bytes -= e.bytes;
            if let (Some(wd), Some(w)) = (e.wd, &mut self.watch) {
                w.by_wd.remove(&wd);
                shoal_io::syscall::inotify_unwatch(w.fd.get_ref().as_fd(), wd);
            }
        }
    }

    /// A watch on `obj`'s file for the entry of `key`, making the instance first if needed.
    fn watch(&mut self, key: &[u8], obj: &Object) -> Option<i32> {
        if self.watch.is_none() && !self.watch_failed {
            // Registering needs the worker's reactor; without one (never on a worker) the
            // entries keep their fstat.
            if tokio::runtime::Handle::try_current().is_err() {
                self.watch_failed = true;
                return None;
            }
            let made = shoal_io::syscall::inotify_init().and_then(|fd| {
                // SAFETY: the OwnedFd is the instance's only owner and keeps it open, the
                // same descriptor, for as long as the AsyncFd lives.
                unsafe { AsyncFd::register_with_interest(fd, tokio::io::Interest::READABLE) }
                    .map_err(Into::into)
            });
            match made {
                Ok(fd) => {
                    self.watch = Some(Watch {
                        fd,
                        by_wd: FxHashMap::default(),
                    })
                }
                Err(_) => self.watch_failed = true,
            }
        }
        let w = self.watch.as_mut()?;
        let wd = shoal_io::syscall::inotify_watch_fd(
            w.fd.get_ref().as_fd(),
            obj.file().as_fd(),
            WATCHED,
        )
        .ok()?;
        // The kernel answers the same watch for the same inode: another entry holding this
        // very file (two keys of one digest, or a file linked twice behind shoal's back) is
        // dropped, so no entry is left believing in a watch that is now another's.
        if let Some(other) = w.by_wd.insert(wd, key.into()) {
            if *other != *key {
                if let Some(mut e) = self.map.remove(&other) {
                    self.bytes -= e.bytes;
                    e.wd = None;
                }
            }
        }
        Some(wd)
    }

    fn evict_oldest(&mut self) {
        let oldest = self
            .map
            .iter()
            .min_by_key(|(_, e)| e.used)
            .map(|(k, _)| k.clone());
        if let Some(k) = oldest {
            self.remove(&k);
        }
    }
}

thread_local! {
    static HOT: RefCell<Hot> = RefCell::new(Hot::default());
}

fn same_zone(w: &Weak<Zone>, zone: &Arc<Zone>) -> bool {
    std::ptr::eq(w.as_ptr(), Arc::as_ptr(zone))
}

/// The worker's copy of the object of `key` in `zone`, found by the key itself (a fast hash
/// and a comparison of the whole key, no MD5); to be confirmed against the index
/// ([`Found::confirm`]) before it answers.
pub struct Found {
    /// The key's MD5, as it was computed when the copy was kept.
    pub md5: [u8; 16],
    gen: u64,
    watched: bool,
    obj: Object,
}

/// The worker's copy for `key` in `zone`, if it has one from this zone and reload epoch (a
/// copy from another is dropped).
pub fn find(zone: &Arc<Zone>, key: &[u8]) -> Option<Found> {
    HOT.with(|h| {
        let mut h = h.borrow_mut();
        let h = &mut *h;
        let e = h.map.get_mut(key)?;
        if !same_zone(&e.zone, zone) || e.epoch != zone.epoch() {
            h.remove(key);
            return None;
        }
        h.tick += 1;
        e.used = h.tick;
        Some(Found {
            md5: e.md5,
            gen: e.gen,
            watched: e.wd.is_some(),
            obj: e.obj.clone(),
        })
    })
}

impl Found {
    /// The object, if `node` (the index's answer for this key, just now) still vouches for
    /// the copy: the object exists, and it is the same generation. A copy that no longer
    /// matches is dropped.
    pub fn confirm(self, key: &[u8], node: &Node) -> Option<Object> {
        let good = node.exists
            && node.gen != 0
            && self.gen == node.gen
            && (self.watched || self.obj.unchanged());
        if good {
            Some(self.obj)
        } else {
            forget(key);
            None
        }
    }
}

/// Keeps `obj`, read from disk for `key` (whose MD5 is `md5`) after the index said `node`.
pub fn put(zone: &Arc<Zone>, md5: &[u8; 16], key: &[u8], node: &Node, obj: &Object) {
    if !node.exists || node.gen == 0 {
        return;
    }
    let bytes = obj.kept_bytes() + key.len();
    if bytes > MAX_BYTES / 4 {
        return;
    }
    HOT.with(|h| {
        let mut h = h.borrow_mut();
        h.remove(key);
        while h.map.len() >= MAX_ENTRIES
            || h.bytes + bytes > MAX_BYTES
            || HELD.load(Ordering::Relaxed) >= held_max()
        {
            if h.map.is_empty() {
                return;
            }
            h.evict_oldest();
        }
        h.tick += 1;
        let used = h.tick;
        h.bytes += bytes;
        HELD.fetch_add(1, Ordering::Relaxed);
        let wd = h.watch(key, obj);
        h.map.insert(
            key.into(),
            Entry {
                wd,
                zone: Arc::downgrade(zone),
                epoch: zone.epoch(),
                gen: node.gen,
                md5: *md5,
                obj: obj.clone(),
                bytes,
                used,
            },
        );
    })
}

/// Drops the worker's copy for `key` (the object was found changed or bad).
pub fn forget(key: &[u8]) {
    HOT.with(|h| h.borrow_mut().remove(key));
}

/// Drops the entries whose files changed: the events of the worker's inotify instance, if its
/// event loop has seen it readable (no system call otherwise). Called before a hit looks.
///
/// The readiness the event loop recorded is only read (`try_io`): nobody waits on the
/// instance, the next hit looks again. Polling it instead stored the request's waker in the
/// instance's slot under a lock on every hit, and woke a task for nothing when a file changed.
pub fn take_changes() {
    HOT.with(|h| {
        let mut h = h.borrow_mut();
        let events = {
            let Some(w) = &h.watch else { return };
            let mut drained = Vec::new();
            let read = w.fd.try_io(tokio::io::Interest::READABLE, |fd| {
                // Read to the end of the queue, then say so, so that the readiness is
                // cleared (the event loop runs on this thread: nothing comes in between).
                drained = shoal_io::syscall::inotify_read(fd.as_fd())?;
                Err::<(), _>(std::io::ErrorKind::WouldBlock.into())
            });
            match read {
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                    if drained.is_empty() {
                        return;
                    }
                    Ok(drained)
                }
                Err(e) => Err(e),
                Ok(()) => Ok(drained),
            }
        };
        let changed: Vec<Box<[u8]>> = match &events {
            // Events lost (the queue overflowed) or unreadable: every entry is suspect.
            Err(_) => h.map.keys().cloned().collect(),
            Ok(ev) if ev.iter().any(|e| e.mask & libc::IN_Q_OVERFLOW != 0) => {
                h.map.keys().cloned().collect()
            }
            Ok(ev) => {
                let w = h.watch.as_ref().expect("read above");
                ev.iter()
                    .filter_map(|e| w.by_wd.get(&e.wd).cloned())
                    .collect()
            }
        };
        for key in changed {
            h.remove(&key);
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::proxy_cache::md5::md5;
    use std::fs::File;

    fn zone() -> Arc<Zone> {
        let dir = std::path::Path::new("/nonexistent");
        let conf = crate::http::proxy_cache::CachePathConf {
            path: dir.to_path_buf(),
            levels: vec![1, 2],
            zone: "z".into(),
            zone_size: 1 << 20,
            inactive: std::time::Duration::from_secs(600),
            max_size: None,
            min_free: 0,
            use_temp_path: false,
            manager_files: 100,
            manager_sleep: std::time::Duration::from_millis(50),
            manager_threshold: std::time::Duration::from_millis(200),
            loader_files: 100,
            loader_sleep: std::time::Duration::from_millis(1),
            loader_threshold: std::time::Duration::from_millis(200),
            temp_path: dir.join("tmp"),
            span: shoal_conf::Span {
                file: None,
                line: 0,
            },
        };
        Arc::new(Zone::new(Arc::new(conf)))
    }

    /// The index's node for `key` once its object is stored.
    fn stored(z: &Zone, key: &[u8]) -> Node {
        z.touch(&md5(key));
        z.stored(&md5(key), 10, i64::MAX);
        z.touch(&md5(key))
    }

    fn object(dir: &tempfile::TempDir, name: &str) -> (Object, std::path::PathBuf) {
        let p = dir.path().join(name);
        std::fs::write(&p, b"object").unwrap();
        (Object::of_file(File::open(&p).unwrap()), p)
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_copy_is_found_by_its_very_key_and_brings_the_keys_digest() {
        let z = zone();
        let dir = tempfile::tempdir().unwrap();
        let (obj, _) = object(&dir, "a");
        let node = stored(&z, b"http://h/a");
        put(&z, &md5(b"http://h/a"), b"http://h/a", &node, &obj);
        let f = find(&z, b"http://h/a").expect("kept");
        assert_eq!(f.md5, md5(b"http://h/a"));
        assert!(f
            .confirm(b"http://h/a", &z.touch(&md5(b"http://h/a")))
            .is_some());
        // Another key, even one a byte longer or shorter, finds nothing.
        assert!(find(&z, b"http://h/a?").is_none());
        assert!(find(&z, b"http://h/").is_none());
        // Another zone finds nothing, and the copy goes.
        assert!(find(&zone(), b"http://h/a").is_none());
        assert!(find(&z, b"http://h/a").is_none());
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_copy_the_index_no_longer_vouches_for_is_dropped() {
        let z = zone();
        let dir = tempfile::tempdir().unwrap();
        let (obj, _) = object(&dir, "b");
        let node = stored(&z, b"k");
        put(&z, &md5(b"k"), b"k", &node, &obj);
        // Stored over since: another generation.
        z.stored(&md5(b"k"), 10, i64::MAX);
        let f = find(&z, b"k").expect("kept");
        assert!(f.confirm(b"k", &z.touch(&md5(b"k"))).is_none());
        assert!(find(&z, b"k").is_none());
    }

    #[tokio::test(flavor = "current_thread")]
    async fn two_keys_holding_one_file_keep_one_copy() {
        // The kernel gives one watch per inode: the copy that held it first goes, or dropping
        // either would leave the other unwatched.
        let z = zone();
        let dir = tempfile::tempdir().unwrap();
        let (obj, p) = object(&dir, "c");
        let other = Object::of_file(File::open(&p).unwrap());
        let n1 = stored(&z, b"one");
        let n2 = stored(&z, b"two");
        put(&z, &md5(b"one"), b"one", &n1, &obj);
        put(&z, &md5(b"two"), b"two", &n2, &other);
        if HOT.with(|h| h.borrow().watch.is_some()) {
            assert!(find(&z, b"one").is_none());
        }
        let f = find(&z, b"two").expect("kept");
        assert!(f.confirm(b"two", &z.touch(&md5(b"two"))).is_some());
    }
}
