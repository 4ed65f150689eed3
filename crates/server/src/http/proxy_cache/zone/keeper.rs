//! The zones' life outside requests: the registry of running zones (kept across reloads),
//! their directories, and the two threads each zone has, nginx's cache loader (the directory
//! walked once after start) and cache manager (`inactive`, `max_size`, `min_free`).

use super::*;

pub(super) static PENDING_UNLINK: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());

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
pub(super) fn disk_size(m: &std::fs::Metadata) -> u64 {
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
                if let Err(e) = make_dir(&c.path) {
                    crate::error_log!(
                        Level::Emerg,
                        "mkdir() \"{}\" failed {}",
                        c.path.display(),
                        shoal_conf::os_error(&e)
                    );
                }
                if c.use_temp_path {
                    let _ = make_dir(&c.temp_path);
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

/// Creates a cache directory and the ones above it that are missing, 0700 as nginx makes
/// them (the process runs with umask 0 once daemonized: `create_dir_all` would make them
/// writable by everyone).
pub fn make_dir(path: &std::path::Path) -> std::io::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(path)
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
            if let Err(e) = make_dir(d) {
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
pub(super) fn start(z: &Arc<Zone>) {
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
pub(super) fn load(z: &Zone) {
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
