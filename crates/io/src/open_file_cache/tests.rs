//! Open-file cache tests: real files in a temp dir, a fake clock (`t0 + seconds`).

use super::*;
use std::time::{SystemTime, UNIX_EPOCH};

fn cache(max: usize, min_uses: u32, errors: bool) -> OpenFileCache {
    OpenFileCache::new(OpenFileCacheConfig {
        max,
        inactive: Duration::from_secs(20),
        valid: Duration::from_secs(30),
        min_uses,
        errors,
    })
}

struct Files {
    dir: tempfile::TempDir,
}

impl Files {
    fn new() -> Files {
        Files {
            dir: tempfile::tempdir_in("/var/tmp").unwrap(),
        }
    }
    fn write(&self, name: &str, data: &[u8]) -> PathBuf {
        let path = self.dir.path().join(name);
        std::fs::write(&path, data).unwrap();
        path
    }
    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }
}

fn at(t0: Instant, secs: u64) -> Instant {
    t0 + Duration::from_secs(secs)
}

fn same_fd(a: &OpenedFile, b: &OpenedFile) -> bool {
    Arc::ptr_eq(a.file.as_ref().unwrap(), b.file.as_ref().unwrap())
}

#[test]
fn hits_share_the_fd_and_the_lru_one_is_evicted() {
    let files = Files::new();
    let (a, b, c) = (
        files.write("a", b"aaaa"),
        files.write("b", b"bb"),
        files.write("c", b"c"),
    );
    let mut cache = cache(2, 1, false);
    let t0 = Instant::now();
    let first_a = cache.get(&a, t0).unwrap();
    assert_eq!(first_a.info.size, 4);
    cache.get(&b, at(t0, 1)).unwrap();
    assert!(matches!(cache.lookup(&a, at(t0, 2)), Lookup::Hit(hit) if same_fd(&hit, &first_a)));
    assert_eq!(cache.paths(), [a.clone(), b.clone()]);
    // c evicts b, the least recently used.
    cache.get(&c, at(t0, 3)).unwrap();
    assert_eq!(cache.paths(), [c.clone(), a.clone()]);
    assert!(matches!(cache.lookup(&b, at(t0, 4)), Lookup::Miss));
    assert!(matches!(cache.lookup(&a, at(t0, 4)), Lookup::Hit(_)));
    assert_eq!(cache.len(), 2);
}

#[test]
fn entries_are_revalidated_after_valid() {
    let files = Files::new();
    let a = files.write("a", b"old");
    let mut cache = cache(10, 1, false);
    let t0 = Instant::now();
    let old = cache.get(&a, t0).unwrap();
    // Replaced by a rename (how deploys update files): a new inode, new size.
    let tmp = files.write("a.new", b"new and longer");
    std::fs::rename(&tmp, &a).unwrap();
    // Still valid (and used often enough not to go inactive): the old answer.
    for s in [10, 20, 29] {
        let Lookup::Hit(hit) = cache.lookup(&a, at(t0, s)) else {
            panic!("hit at {s}s")
        };
        assert_eq!((hit.info.size, hit.info.inode), (3, old.info.inode));
    }
    // 30 s: re-opened.
    assert!(matches!(cache.lookup(&a, at(t0, 30)), Lookup::Miss));
    let new = cache.get(&a, at(t0, 30)).unwrap();
    assert_eq!(new.info.size, 14);
    assert_ne!(new.info.inode, old.info.inode);
    assert!(!same_fd(&new, &old));
    assert!(matches!(cache.lookup(&a, at(t0, 31)), Lookup::Hit(hit) if hit.info.size == 14));
}

#[test]
fn inactive_entries_are_dropped() {
    let files = Files::new();
    let (a, b) = (files.write("a", b"a"), files.write("b", b"b"));
    let mut cache = cache(10, 1, false);
    let t0 = Instant::now();
    cache.get(&a, t0).unwrap();
    cache.get(&b, at(t0, 15)).unwrap();
    // At 21 s, a (last used at 0) is inactive: any call drops it from the LRU end.
    assert!(matches!(cache.lookup(&b, at(t0, 21)), Lookup::Hit(_)));
    assert_eq!(cache.paths(), [b]);
    assert_eq!(cache.expire(at(t0, 30)), 0);
    assert_eq!(cache.expire(at(t0, 42)), 1);
    assert!(cache.is_empty());
}

#[test]
fn the_fd_is_kept_after_min_uses() {
    let files = Files::new();
    let a = files.write("a", b"abc");
    let mut cache = cache(10, 3, false);
    let t0 = Instant::now();
    // Uses 1 and 2: opened for the caller, counted, not kept.
    cache.get(&a, t0).unwrap();
    assert!(matches!(cache.lookup(&a, at(t0, 1)), Lookup::Miss));
    cache.insert(&a, &open(&a), at(t0, 1));
    // Use 3 (within inactive of the previous one): kept.
    assert!(matches!(cache.lookup(&a, at(t0, 2)), Lookup::Miss));
    cache.insert(&a, &open(&a), at(t0, 2));
    assert!(matches!(cache.lookup(&a, at(t0, 3)), Lookup::Hit(_)));
    // Uses spread wider than `inactive` never add up: each round is 2 uses (the get and the
    // lookup), and the next round comes after the entry went inactive.
    let b = files.write("b", b"b");
    for s in [0, 21, 42, 63] {
        cache.get(&b, at(t0, 100 + s)).unwrap();
        assert!(matches!(cache.lookup(&b, at(t0, 100 + s)), Lookup::Miss));
    }
}

#[test]
fn errors_are_cached_only_with_open_file_cache_errors() {
    let files = Files::new();
    let missing = files.path("missing");
    let t0 = Instant::now();
    for errors in [true, false] {
        let _ = std::fs::remove_file(&missing);
        let mut cache = cache(10, 1, errors);
        assert_eq!(
            cache.get(&missing, t0).unwrap_err().kind(),
            io::ErrorKind::NotFound
        );
        std::fs::write(&missing, b"here now").unwrap();
        let soon = cache.get(&missing, at(t0, 5));
        if errors {
            let err = soon.unwrap_err();
            assert_eq!(err.raw_os_error(), Some(libc::ENOENT));
            // ... until `valid` expires.
            assert_eq!(cache.get(&missing, at(t0, 30)).unwrap().info.size, 8);
        } else {
            assert_eq!(soon.unwrap().info.size, 8);
        }
    }
    // ENOTDIR is an error like another.
    let file = files.write("plain", b"x");
    let mut cache = cache(10, 1, true);
    let under_file = file.join("child");
    assert_eq!(
        cache.get(&under_file, t0).unwrap_err().raw_os_error(),
        Some(libc::ENOTDIR)
    );
    assert!(
        matches!(cache.lookup(&under_file, at(t0, 1)), Lookup::Error(e) if e.raw_os_error() == Some(libc::ENOTDIR))
    );
}

#[test]
fn metadata_and_nginx_etag() {
    let files = Files::new();
    let a = files.write("a", &vec![0u8; 0x1234]);
    let mtime = UNIX_EPOCH + Duration::from_secs(0x5f5e_1000);
    std::fs::File::options()
        .write(true)
        .open(&a)
        .unwrap()
        .set_modified(mtime)
        .unwrap();
    let opened = open(&a).unwrap();
    let meta = std::fs::metadata(&a).unwrap();
    use std::os::unix::fs::MetadataExt;
    assert_eq!(
        *opened.info,
        FileInfo {
            size: 0x1234,
            mtime: 0x5f5e_1000,
            inode: meta.ino(),
            dev: meta.dev(),
            is_dir: false,
            etag: "\"5f5e1000-1234\"".into(),
            content: Default::default(),
        }
    );
    // Opened again, the same ETag; once the file changed, its new one (the last one made
    // is shared only for the same mtime and size).
    assert_eq!(open(&a).unwrap().info.etag, opened.info.etag);
    let f = std::fs::File::options().write(true).open(&a).unwrap();
    f.set_len(0x10).unwrap();
    f.set_modified(mtime).unwrap();
    assert_eq!(&*open(&a).unwrap().info.etag, "\"5f5e1000-10\"");
    assert_eq!(etag(1_700_000_000, 612), "\"6553f100-264\"");
    // Zeros, single digits, the widest values: as `format!("{:x}")` writes them.
    for (mtime, size) in [(0, 0), (15, 16), (i64::MAX, u64::MAX), (1, 1 << 60)] {
        assert_eq!(etag(mtime, size), format!("\"{mtime:x}-{size:x}\""));
    }
    // Before the epoch, nginx's signed `%xT`: a minus and the magnitude.
    assert_eq!(etag(-16, 5), "\"-10-5\"");
    assert_eq!(etag(i64::MIN, 0), "\"-8000000000000000-0\"");
    // Directories are cached without an fd.
    let mut cache = cache(10, 1, false);
    let dir = cache.get(files.dir.path(), Instant::now()).unwrap();
    assert!(dir.info.is_dir && dir.file.is_none());
    assert!(SystemTime::now() > mtime);
}

#[test]
fn max_zero_caches_nothing() {
    let files = Files::new();
    let a = files.write("a", b"a");
    let mut cache = cache(0, 1, true);
    let t0 = Instant::now();
    cache.get(&a, t0).unwrap();
    assert!(cache.get(&files.path("nope"), t0).is_err());
    assert!(cache.is_empty());
    assert!(matches!(cache.lookup(&a, t0), Lookup::Miss));
}

#[test]
fn slots_are_reused_after_eviction() {
    let files = Files::new();
    let mut cache = cache(3, 1, false);
    let t0 = Instant::now();
    let paths: Vec<_> = (0..50).map(|i| files.write(&i.to_string(), b"x")).collect();
    for (i, p) in paths.iter().enumerate() {
        cache.get(p, at(t0, i as u64 / 10)).unwrap();
        assert!(cache.len() <= 3);
    }
    assert_eq!(
        cache.paths(),
        [paths[49].clone(), paths[48].clone(), paths[47].clone()]
    );
    assert!(cache.nodes.len() <= 3);
    cache.clear();
    assert!(cache.is_empty() && cache.paths().is_empty());
}
