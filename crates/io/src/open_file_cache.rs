//! nginx's `open_file_cache max=N inactive=T`, `open_file_cache_valid`,
//! `open_file_cache_min_uses` and `open_file_cache_errors`: a per-worker LRU of path → open fd
//! and its metadata (size, mtime, inode, directory or not, and the ETag nginx would send).
//! Runs on the worker; [`OpenFileCache::lookup`] and [`OpenFileCache::insert`] never touch the
//! filesystem; [`open`] does (an `open` and an `fstat`, fast when the metadata is cached, but a
//! blocking call: the server may post it to a pool and insert the result on return).
//! [`OpenFileCache::get`] is lookup, open on a miss, insert: the inline convenience.
//!
//! One per worker thread: `&mut self` everywhere, no locks, not `Sync`. Time is a parameter
//! (`now`), so tests drive a fake clock. Semantics, as in nginx: an entry unused for `inactive`
//! is dropped (a couple of the oldest are checked at each call, and [`OpenFileCache::expire`]
//! sweeps); the `max`-th entry evicts the least recently used; an entry older than `valid` is
//! re-opened and re-stat'ed on its next use (a file replaced by a rename gets the new inode);
//! a file's fd is kept only once it has been used `min_uses` times (uses count while the entry
//! lives, i.e. within `inactive` of each other); with `errors`, a failed open (ENOENT, EACCES,
//! ...) is cached like a file, until `valid` expires. Directories are cached without an fd.

use std::cell::Cell;
use std::ffi::OsStr;
use std::fs::{File, OpenOptions};
use std::io;
use std::marker::PhantomData;
use std::os::fd::AsFd;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::syscall;

/// nginx's open-file-cache directives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OpenFileCacheConfig {
    /// `open_file_cache max=`: entries kept; 0 caches nothing (`open_file_cache off`).
    pub max: usize,
    /// `open_file_cache inactive=`: an entry unused this long is dropped (nginx: 60s).
    pub inactive: Duration,
    /// `open_file_cache_valid`: an entry this old is re-checked on its next use (nginx: 60s).
    pub valid: Duration,
    /// `open_file_cache_min_uses`: uses within `inactive` before the fd is kept (nginx: 1).
    pub min_uses: u32,
    /// `open_file_cache_errors on`: cache failed opens too (nginx: off).
    pub errors: bool,
}

impl Default for OpenFileCacheConfig {
    /// nginx's defaults, with `max=1000` (nginx has no default: the cache is off unless set).
    fn default() -> Self {
        OpenFileCacheConfig {
            max: 1000,
            inactive: Duration::from_secs(60),
            valid: Duration::from_secs(60),
            min_uses: 1,
            errors: false,
        }
    }
}

/// What the cache knows of a path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileInfo {
    /// Size in bytes.
    pub size: u64,
    /// Modification time, seconds since the epoch.
    pub mtime: i64,
    /// Inode number.
    pub inode: u64,
    /// Device (`st_dev`): the filesystem, for the residency check.
    pub dev: u64,
    /// A directory (cached without an fd).
    pub is_dir: bool,
    /// nginx's ETag for this mtime and size ([`etag`]), made once per open (at most: the
    /// last one made is shared), not per answer.
    pub etag: Arc<str>,
    /// A small file's bytes, read once while this metadata is current: a cached entry is
    /// re-opened (and gets a new, empty record) when `valid` expires, so the bytes never
    /// outlive the metadata they were read with.
    pub content: std::sync::OnceLock<bytes::Bytes>,
}

/// An opened path: the shared fd (`None` for a directory) and its metadata.
#[derive(Debug, Clone)]
pub struct OpenedFile {
    /// The open file, shareable with a pool thread; `None` for directories.
    pub file: Option<Arc<File>>,
    /// Its metadata as of the open (or last revalidation).
    pub info: Arc<FileInfo>,
}

/// nginx's ETag for a file of this mtime and size: `"%xT-%xO"`, e.g. `"5f5e1000-1234"`.
pub fn etag(mtime: i64, size: u64) -> String {
    // By hand, into a string of the exact size: `format!` costs more than the rest, and a
    // string shrunk into a box is a `realloc`.
    fn digits(v: u64) -> usize {
        (16 - v.leading_zeros() as usize / 4).max(1)
    }
    fn hex(out: &mut String, v: u64) {
        for i in (0..digits(v)).rev() {
            out.push(char::from(
                b"0123456789abcdef"[(v >> (4 * i)) as usize & 15],
            ));
        }
    }
    let m = mtime.unsigned_abs();
    let mut s = String::with_capacity(3 + usize::from(mtime < 0) + digits(m) + digits(size));
    s.push('"');
    // nginx's `%xT` is signed: a time before the epoch is `-` and the hex of its magnitude.
    if mtime < 0 {
        s.push('-');
    }
    hex(&mut s, m);
    s.push('-');
    hex(&mut s, size);
    s.push('"');
    s
}

thread_local! {
    /// The last ETag made on this thread: a file opened for each request (no
    /// `open_file_cache`) has the same one every time.
    static LAST_ETAG: std::cell::RefCell<Option<(i64, u64, Arc<str>)>> =
        const { std::cell::RefCell::new(None) };
}

/// [`etag`], shared with the last file of the same mtime and size opened on this thread.
fn shared_etag(mtime: i64, size: u64) -> Arc<str> {
    LAST_ETAG.with(|last| {
        let mut last = last.borrow_mut();
        match &*last {
            Some((m, s, e)) if *m == mtime && *s == size => e.clone(),
            _ => {
                let e: Arc<str> = Arc::from(etag(mtime, size));
                *last = Some((mtime, size, e.clone()));
                e
            }
        }
    })
}

/// Opens `path` read-only (nonblocking, so a FIFO cannot hang it) and stats the fd. Blocking:
/// run it inline only when the metadata is likely cached, else on a pool thread.
pub fn open(path: &Path) -> io::Result<OpenedFile> {
    let file = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)?;
    let st = syscall::fstat(file.as_fd())?;
    let info = FileInfo {
        size: st.size,
        mtime: st.mtime,
        inode: st.ino,
        dev: st.dev,
        is_dir: st.is_dir,
        etag: shared_etag(st.mtime, st.size),
        content: Default::default(),
    };
    Ok(OpenedFile {
        file: (!st.is_dir).then(|| Arc::new(file)),
        info: Arc::new(info),
    })
}

/// What [`OpenFileCache::lookup`] found.
#[derive(Debug)]
pub enum Lookup {
    /// A valid cached file or directory.
    Hit(OpenedFile),
    /// A valid cached error (`open_file_cache_errors on`).
    Error(io::Error),
    /// Not cached, not yet used `min_uses` times, or due for revalidation: [`open`] it and
    /// [`insert`](OpenFileCache::insert) the result.
    Miss,
}

enum Cached {
    /// Counted, nothing kept (fewer than `min_uses` uses, or awaiting its first insert).
    Uses,
    File(OpenedFile),
    /// The errno of a failed open.
    Error(i32),
}

struct Node {
    /// The path's bytes: a path's own `Hash` walks its components, bytes hash in words.
    path: Arc<OsStr>,
    cached: Cached,
    uses: u32,
    /// When the cached answer is to be checked again: obtained + `valid`. Deadlines rather
    /// than times of use, so a lookup compares instead of subtracting three times.
    revalidate_at: Instant,
    /// When the entry is dropped unless used again: last use + `inactive`.
    inactive_at: Instant,
    /// Towards the most recently used end.
    prev: Option<usize>,
    /// Towards the least recently used end.
    next: Option<usize>,
}

/// The per-worker open-file cache. See the module documentation.
pub struct OpenFileCache {
    config: OpenFileCacheConfig,
    index: crate::fxhash::FxHashMap<Arc<OsStr>, usize>,
    nodes: Vec<Option<Node>>,
    free: Vec<usize>,
    /// Most recently used.
    head: Option<usize>,
    /// Least recently used.
    tail: Option<usize>,
    /// Per worker: not `Sync`.
    _not_sync: PhantomData<Cell<()>>,
}

/// `now + d`, or as far as an `Instant` goes (a configured time too long to add never comes).
fn later(now: Instant, d: Duration) -> Instant {
    now.checked_add(d)
        .or_else(|| now.checked_add(Duration::from_secs(u32::MAX as u64)))
        .unwrap_or(now)
}

/// How many stale entries each call checks at the LRU end, as nginx does.
const EXPIRE_PER_CALL: usize = 2;

impl OpenFileCache {
    /// An empty cache.
    pub fn new(config: OpenFileCacheConfig) -> OpenFileCache {
        OpenFileCache {
            config,
            index: Default::default(),
            nodes: Vec::new(),
            free: Vec::new(),
            head: None,
            tail: None,
            _not_sync: PhantomData,
        }
    }

    /// The configuration.
    pub fn config(&self) -> &OpenFileCacheConfig {
        &self.config
    }

    /// Entries held (paths being counted towards `min_uses` included).
    pub fn len(&self) -> usize {
        self.index.len()
    }

    /// Nothing cached.
    pub fn is_empty(&self) -> bool {
        self.index.is_empty()
    }

    /// Looks `path` up at time `now`, counting a use. Never touches the filesystem.
    pub fn lookup(&mut self, path: &Path, now: Instant) -> Lookup {
        self.expire_some(now, EXPIRE_PER_CALL);
        let Some(&i) = self.index.get(path.as_os_str()) else {
            return Lookup::Miss;
        };
        if now > self.node(i).inactive_at {
            self.remove(i);
            return Lookup::Miss;
        }
        self.touch(i);
        let (inactive, errors) = (self.config.inactive, self.config.errors);
        let node = self.node_mut(i);
        node.uses = node.uses.saturating_add(1);
        node.inactive_at = later(now, inactive);
        if now >= node.revalidate_at {
            return Lookup::Miss;
        }
        match &node.cached {
            Cached::File(opened) => Lookup::Hit(opened.clone()),
            Cached::Error(errno) if errors => Lookup::Error(io::Error::from_raw_os_error(*errno)),
            Cached::Error(_) | Cached::Uses => Lookup::Miss,
        }
    }

    /// Records the result of opening `path` at `now` (after a [`Lookup::Miss`]). A path not
    /// looked up before counts as one use.
    pub fn insert(&mut self, path: &Path, result: &io::Result<OpenedFile>, now: Instant) {
        if self.config.max == 0 {
            return;
        }
        let cached = match result {
            Ok(opened) => Cached::File(opened.clone()),
            Err(e) => match e.raw_os_error() {
                Some(errno) if self.config.errors => Cached::Error(errno),
                // Not cached: forget the path, as nginx does.
                _ => {
                    if let Some(&i) = self.index.get(path.as_os_str()) {
                        self.remove(i);
                    }
                    return;
                }
            },
        };
        let i = match self.index.get(path.as_os_str()) {
            Some(&i) => i,
            None => self.add(path, now),
        };
        let (min_uses, valid, inactive) = (
            self.config.min_uses,
            self.config.valid,
            self.config.inactive,
        );
        let node = self.node_mut(i);
        node.revalidate_at = later(now, valid);
        node.inactive_at = later(now, inactive);
        node.cached = match cached {
            Cached::File(_) if node.uses < min_uses => Cached::Uses,
            cached => cached,
        };
    }

    /// [`lookup`](Self::lookup); on a miss, [`open`] inline and [`insert`](Self::insert).
    pub fn get(&mut self, path: &Path, now: Instant) -> io::Result<OpenedFile> {
        match self.lookup(path, now) {
            Lookup::Hit(opened) => Ok(opened),
            Lookup::Error(e) => Err(e),
            Lookup::Miss => {
                let result = open(path);
                self.insert(path, &result, now);
                result
            }
        }
    }

    /// Drops every entry unused for longer than `inactive`; returns how many.
    pub fn expire(&mut self, now: Instant) -> usize {
        self.expire_some(now, usize::MAX)
    }

    /// Drops everything (e.g. on reload).
    pub fn clear(&mut self) {
        self.index.clear();
        self.nodes.clear();
        self.free.clear();
        self.head = None;
        self.tail = None;
    }

    fn expire_some(&mut self, now: Instant, at_most: usize) -> usize {
        let mut dropped = 0;
        while dropped < at_most {
            match self.tail {
                Some(i) if now > self.node(i).inactive_at => {
                    self.remove(i);
                    dropped += 1;
                }
                _ => break,
            }
        }
        dropped
    }

    fn node(&self, i: usize) -> &Node {
        self.nodes[i].as_ref().expect("indexed nodes are live")
    }

    fn node_mut(&mut self, i: usize) -> &mut Node {
        self.nodes[i].as_mut().expect("indexed nodes are live")
    }

    /// A new entry with one use, at the most recently used end; evicts the least recently used
    /// one if the cache is full.
    fn add(&mut self, path: &Path, now: Instant) -> usize {
        if self.index.len() >= self.config.max {
            if let Some(lru) = self.tail {
                self.remove(lru);
            }
        }
        let path: Arc<OsStr> = Arc::from(path.as_os_str());
        let node = Node {
            path: path.clone(),
            cached: Cached::Uses,
            uses: 1,
            revalidate_at: later(now, self.config.valid),
            inactive_at: later(now, self.config.inactive),
            prev: None,
            next: None,
        };
        let i = match self.free.pop() {
            Some(i) => {
                self.nodes[i] = Some(node);
                i
            }
            None => {
                self.nodes.push(Some(node));
                self.nodes.len() - 1
            }
        };
        self.index.insert(path, i);
        self.link_front(i);
        i
    }

    fn remove(&mut self, i: usize) {
        self.unlink(i);
        let node = self.nodes[i].take().expect("removing a live node");
        self.index.remove(&node.path);
        self.free.push(i);
    }

    /// Moves node `i` to the most recently used end.
    fn touch(&mut self, i: usize) {
        if self.head != Some(i) {
            self.unlink(i);
            self.link_front(i);
        }
    }

    fn unlink(&mut self, i: usize) {
        let (prev, next) = {
            let n = self.node(i);
            (n.prev, n.next)
        };
        match prev {
            Some(p) => self.node_mut(p).next = next,
            None => self.head = next,
        }
        match next {
            Some(n) => self.node_mut(n).prev = prev,
            None => self.tail = prev,
        }
    }

    fn link_front(&mut self, i: usize) {
        let old = self.head;
        {
            let n = self.node_mut(i);
            n.prev = None;
            n.next = old;
        }
        match old {
            Some(h) => self.node_mut(h).prev = Some(i),
            None => self.tail = Some(i),
        }
        self.head = Some(i);
    }

    /// Paths from most to least recently used (for tests and the status page).
    pub fn paths(&self) -> Vec<PathBuf> {
        let mut out = Vec::with_capacity(self.index.len());
        let mut at = self.head;
        while let Some(i) = at {
            out.push(PathBuf::from(&*self.node(i).path));
            at = self.node(i).next;
        }
        out
    }
}

#[cfg(test)]
mod tests;
