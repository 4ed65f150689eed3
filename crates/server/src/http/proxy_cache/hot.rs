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
use std::task::{Context, Poll};

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
    key: Box<[u8]>,
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
    map: super::md5::DigestMap<Entry>,
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
    by_wd: FxHashMap<i32, [u8; 16]>,
}

/// What changes an object's file in a way a hit must notice.
const WATCHED: u32 = libc::IN_MODIFY | libc::IN_ATTRIB | libc::IN_DELETE_SELF | libc::IN_MOVE_SELF;

impl Hot {
    fn remove(&mut self, md5: &[u8; 16]) {
        if let Some(e) = self.map.remove(md5) {
            self.bytes -= e.bytes;
            if let (Some(wd), Some(w)) = (e.wd, &mut self.watch) {
                w.by_wd.remove(&wd);
                shoal_io::syscall::inotify_unwatch(w.fd.get_ref().as_fd(), wd);
            }
        }
    }

    /// A watch on `obj`'s file for the entry of `md5`, making the instance first if needed.
    fn watch(&mut self, md5: &[u8; 16], obj: &Object) -> Option<i32> {
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
        w.by_wd.insert(wd, *md5);
        Some(wd)
    }

    fn evict_oldest(&mut self) {
        let oldest = self.map.iter().min_by_key(|(_, e)| e.used).map(|(k, _)| *k);
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

/// The worker's copy of the object `node` (the index's answer for `md5`, just now) describes,
/// if it has one; a copy that no longer matches is dropped.
pub fn get(zone: &Arc<Zone>, md5: &[u8; 16], key: &[u8], node: &Node) -> Option<Object> {
    HOT.with(|h| {
        let mut h = h.borrow_mut();
        let h = &mut *h;
        let e = h.map.get_mut(md5)?;
        let good = node.exists
            && node.gen != 0
            && e.gen == node.gen
            && same_zone(&e.zone, zone)
            && e.epoch == zone.epoch()
            && *e.key == *key
            && (e.wd.is_some() || e.obj.unchanged());
        if !good {
            h.remove(md5);
            return None;
        }
        h.tick += 1;
        e.used = h.tick;
        Some(e.obj.clone())
    })
}

/// Keeps `obj`, read from disk after the index said `node` for `md5`.
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
        h.remove(md5);
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
        let wd = h.watch(md5, obj);
        h.map.insert(
            *md5,
            Entry {
                wd,
                zone: Arc::downgrade(zone),
                epoch: zone.epoch(),
                gen: node.gen,
                key: key.into(),
                obj: obj.clone(),
                bytes,
                used,
            },
        );
    })
}

/// Drops the worker's copy of `md5` (the object was found changed or bad).
pub fn forget(md5: &[u8; 16]) {
    HOT.with(|h| h.borrow_mut().remove(md5));
}

/// Drops the entries whose files changed: the events of the worker's inotify instance, if its
/// event loop has seen it readable (no system call otherwise). Called before a hit looks.
pub fn take_changes(cx: &mut Context<'_>) {
    HOT.with(|h| {
        let mut h = h.borrow_mut();
        let events = {
            let Some(w) = &h.watch else { return };
            let Poll::Ready(Ok(mut ready)) = w.fd.poll_read_ready(cx) else {
                return;
            };
            let events = shoal_io::syscall::inotify_read(w.fd.get_ref().as_fd());
            ready.clear_ready();
            events
        };
        let changed: Vec<[u8; 16]> = match &events {
            // Events lost (the queue overflowed) or unreadable: every entry is suspect.
            Err(_) => h.map.keys().copied().collect(),
            Ok(ev) if ev.iter().any(|e| e.mask & libc::IN_Q_OVERFLOW != 0) => {
                h.map.keys().copied().collect()
            }
            Ok(ev) => {
                let w = h.watch.as_ref().expect("read above");
                ev.iter()
                    .filter_map(|e| w.by_wd.get(&e.wd).copied())
                    .collect()
            }
        };
        for md5 in changed {
            h.remove(&md5);
        }
    })
}
