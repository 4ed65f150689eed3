//! Helpers for the thread-pool tests (`aio.rs`, `aio_cold.rs`): data files on a real disk,
//! page-cache eviction and residency, a slow disk emulated with a cgroup v1 blkio read throttle
//! on shoal's process, and a look at shoal's threads in `/proc` (state, name, bytes read).
//!
//! The slow disk is ARCHITECTURE.md's recipe: the data files live on a disk-backed filesystem
//! (not tmpfs: there, reads never wait), are evicted with `posix_fadvise(DONTNEED)`, and shoal's
//! process is put in a cgroup whose `blkio.throttle.read_bps_device` holds the disk's major:minor.
//! That needs root and the v1 blkio controller; without them the slow-disk tests fail with a
//! message saying so (never pass silently). Every cgroup made here is removed when its guard
//! drops, after lifting the throttle so queued reads finish at once.

use std::ffi::CString;
use std::fs;
use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::os::fd::AsRawFd;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// Where the data files go unless `SHOAL_AIO_DATA_DIR` says otherwise: /var/tmp is on the root
/// disk on the CI machines (and /tmp may be a tmpfs elsewhere).
pub const DEFAULT_DATA_BASE: &str = "/var/tmp";

/// The cgroup v1 blkio hierarchy.
pub const BLKIO: &str = "/sys/fs/cgroup/blkio";

const TMPFS_MAGIC: i64 = 0x0102_1994;
const RAMFS_MAGIC: i64 = 0x8584_58f6;

/// A temporary directory of data files on a disk-backed filesystem, readable by shoal.
pub struct DataDir {
    pub dir: tempfile::TempDir,
}

impl DataDir {
    /// A new directory under `SHOAL_AIO_DATA_DIR` (default /var/tmp); fails if that is a
    /// memory filesystem, where nothing is ever cold.
    pub fn new() -> DataDir {
        let base = std::env::var("SHOAL_AIO_DATA_DIR").unwrap_or_else(|_| DEFAULT_DATA_BASE.into());
        let dir = tempfile::Builder::new()
            .prefix("shoal-aio-")
            .tempdir_in(&base)
            .unwrap_or_else(|e| panic!("creating a data directory in {base}: {e}"));
        let kind = fs_type(dir.path());
        assert!(
            kind != TMPFS_MAGIC && kind != RAMFS_MAGIC,
            "{base} is a memory filesystem (statfs f_type {kind:#x}): cold reads cannot be \
             emulated there; point SHOAL_AIO_DATA_DIR at a directory on a real disk"
        );
        DataDir { dir }
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// Writes `size` pseudo-random bytes (from `seed`) to `name`, flushed to the disk so they
    /// can be evicted; returns the content.
    pub fn write(&self, name: &str, size: usize, seed: u64) -> Vec<u8> {
        let data = pattern(size, seed);
        let path = self.path().join(name);
        let mut f = fs::File::create(&path).unwrap_or_else(|e| panic!("creating {path:?}: {e}"));
        f.write_all(&data).expect("writing a data file");
        f.sync_all().expect("fsync of a data file");
        data
    }

    /// Like [`DataDir::write`], but the file never enters the page cache: written with
    /// `O_DIRECT` from an aligned buffer (the unaligned tail, under a page, the ordinary way).
    /// For tests that need a file cold without relying on eviction.
    pub fn write_cold(&self, name: &str, size: usize, seed: u64) -> Vec<u8> {
        use std::os::unix::fs::OpenOptionsExt;
        const ALIGN: usize = 4096;
        let data = pattern(size, seed);
        let path = self.path().join(name);
        let aligned = size / ALIGN * ALIGN;
        {
            let f = fs::OpenOptions::new()
                .write(true)
                .create(true)
                .truncate(true)
                .custom_flags(libc::O_DIRECT)
                .open(&path)
                .unwrap_or_else(|e| panic!("creating {path:?} with O_DIRECT: {e}"));
            let layout = std::alloc::Layout::from_size_align(aligned.max(ALIGN), ALIGN).unwrap();
            // SAFETY: a non-zero layout; the buffer is filled, written and freed below.
            let buf = unsafe { std::alloc::alloc(layout) };
            assert!(!buf.is_null(), "allocating an aligned buffer");
            // SAFETY: buf holds at least `aligned` bytes and does not overlap `data`.
            unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), buf, aligned) };
            // SAFETY: buf is valid for `aligned` bytes.
            let slice = unsafe { std::slice::from_raw_parts(buf, aligned) };
            let written = std::os::unix::fs::FileExt::write_at(&f, slice, 0);
            // SAFETY: allocated above with this layout.
            unsafe { std::alloc::dealloc(buf, layout) };
            assert_eq!(
                written.expect("O_DIRECT write"),
                aligned,
                "short O_DIRECT write"
            );
        }
        let mut f = fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .expect("reopening");
        f.write_all(&data[aligned..]).expect("writing the tail");
        f.sync_all().expect("fsync of a data file");
        data
    }

    pub fn file(&self, name: &str) -> PathBuf {
        self.path().join(name)
    }
}

impl Default for DataDir {
    fn default() -> Self {
        DataDir::new()
    }
}

/// `size` bytes of xorshift64* output: every offset differs, so a misplaced byte shows.
pub fn pattern(size: usize, seed: u64) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut v = Vec::with_capacity(size + 8);
    while v.len() < size {
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        v.extend_from_slice(&x.wrapping_mul(0x2545_F491_4F6C_DD1D).to_le_bytes());
    }
    v.truncate(size);
    v
}

/// The filesystem type (`statfs` f_type) of `path`.
pub fn fs_type(path: &Path) -> i64 {
    let c = CString::new(path.as_os_str().as_bytes()).expect("a path without NUL");
    // SAFETY: statfs(2) fills a zeroed, properly sized struct from a valid C string.
    let mut st: libc::statfs = unsafe { std::mem::zeroed() };
    let rc = unsafe { libc::statfs(c.as_ptr(), &mut st) };
    assert_eq!(rc, 0, "statfs({path:?}): {}", io::Error::last_os_error());
    st.f_type as i64
}

/// How many of `path`'s pages are in the page cache (mmap + mincore: no readahead, unlike a
/// `RWF_NOWAIT` probe).
pub fn resident_pages(path: &Path) -> (usize, usize) {
    let f = fs::File::open(path).unwrap_or_else(|e| panic!("opening {path:?}: {e}"));
    let len = f.metadata().expect("fstat").len() as usize;
    if len == 0 {
        return (0, 0);
    }
    // SAFETY: sysconf has no preconditions.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) } as usize;
    let pages = len.div_ceil(page);
    // SAFETY: a private read-only mapping of an open file of `len` bytes, unmapped below; only
    // mincore looks at it, no byte is read.
    unsafe {
        let addr = libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ,
            libc::MAP_SHARED,
            f.as_raw_fd(),
            0,
        );
        assert_ne!(
            addr,
            libc::MAP_FAILED,
            "mmap: {}",
            io::Error::last_os_error()
        );
        let mut vec = vec![0u8; pages];
        let rc = libc::mincore(addr, len, vec.as_mut_ptr());
        let err = io::Error::last_os_error();
        libc::munmap(addr, len);
        assert_eq!(rc, 0, "mincore: {err}");
        (vec.iter().filter(|b| **b & 1 == 1).count(), pages)
    }
}

/// Drops `path` from the page cache (`fdatasync` + `posix_fadvise(DONTNEED)`), and checks that
/// no page is left.
pub fn evict(path: &Path) {
    let f = fs::File::open(path).unwrap_or_else(|e| panic!("opening {path:?}: {e}"));
    f.sync_data().expect("fdatasync");
    for _ in 0..20 {
        // SAFETY: posix_fadvise on an open descriptor; advice only, no memory is touched.
        let rc = unsafe { libc::posix_fadvise(f.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
        assert_eq!(rc, 0, "posix_fadvise(DONTNEED) on {path:?}: errno {rc}");
        if resident_pages(path).0 == 0 {
            return;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    panic!(
        "{path:?} stays in the page cache after posix_fadvise(DONTNEED): {:?}",
        resident_pages(path)
    );
}

/// A whole block device, as `MAJ:MIN` for blkio files.
#[derive(Debug, Clone)]
pub struct BlockDev(pub String);

/// The whole disk under `path` (a partition maps to its disk: blkio throttles whole devices),
/// or why there is none.
pub fn disk_of(path: &Path) -> Result<BlockDev, String> {
    let dev = fs::metadata(path)
        .map_err(|e| format!("stat {path:?}: {e}"))?
        .dev();
    let major = ((dev >> 8) & 0xfff) | ((dev >> 32) & !0xfff);
    let minor = (dev & 0xff) | ((dev >> 12) & !0xff);
    if major == 0 {
        return Err(format!(
            "{path:?} is on an anonymous device ({major}:{minor}: overlay, btrfs subvolume, network \
             or memory filesystem); blkio cannot throttle it. Set SHOAL_AIO_DATA_DIR to a directory \
             on a block device"
        ));
    }
    let sys = PathBuf::from(format!("/sys/dev/block/{major}:{minor}"));
    if !sys.exists() {
        return Err(format!("no {sys:?} for the device of {path:?}"));
    }
    if sys.join("partition").exists() {
        let disk = fs::read_to_string(sys.join("../dev"))
            .map_err(|e| format!("reading the disk of partition {major}:{minor}: {e}"))?;
        return Ok(BlockDev(disk.trim().to_string()));
    }
    Ok(BlockDev(format!("{major}:{minor}")))
}

/// Checks that a slow disk can be emulated for `data` (root, cgroup v1 blkio with a throttle, a
/// real block device); panics with what is missing otherwise.
pub fn require_slow_disk(data: &DataDir) -> BlockDev {
    let why = "this test emulates a slow disk with a cgroup v1 blkio read throttle on shoal's \
               process (see ARCHITECTURE.md); it must run as root on a host with \
               /sys/fs/cgroup/blkio (CI does)";
    // SAFETY: geteuid has no preconditions.
    let euid = unsafe { libc::geteuid() };
    assert_eq!(euid, 0, "not root (euid {euid}): {why}");
    assert!(
        Path::new(BLKIO)
            .join("blkio.throttle.read_bps_device")
            .exists(),
        "no {BLKIO}/blkio.throttle.read_bps_device: {why}"
    );
    disk_of(data.path()).unwrap_or_else(|e| panic!("{e}: {why}"))
}

static CGROUPS: AtomicUsize = AtomicUsize::new(0);

/// A blkio cgroup holding one process, with its reads from one disk throttled. Dropping it
/// lifts the throttle, moves the processes back to the root cgroup and removes the cgroup.
pub struct Throttle {
    dir: PathBuf,
    dev: BlockDev,
}

impl Throttle {
    /// Puts `pid` (all its threads) in a new cgroup reading at most `bps` bytes per second from
    /// `dev`.
    pub fn new(dev: &BlockDev, bps: u64, pid: i32) -> Throttle {
        remove_stale_cgroups();
        let name = format!(
            "shoal-aio-test-{}-{}",
            std::process::id(),
            CGROUPS.fetch_add(1, Ordering::Relaxed)
        );
        let dir = Path::new(BLKIO).join(name);
        fs::create_dir(&dir).unwrap_or_else(|e| panic!("creating cgroup {dir:?}: {e}"));
        let t = Throttle {
            dir,
            dev: dev.clone(),
        };
        t.write(
            "blkio.throttle.read_bps_device",
            &format!("{} {bps}", dev.0),
        );
        t.write("cgroup.procs", &pid.to_string());
        let procs = fs::read_to_string(t.dir.join("cgroup.procs")).unwrap_or_default();
        assert!(
            procs.lines().any(|l| l.trim() == pid.to_string()),
            "pid {pid} is not in {:?} after moving it there (cgroup.procs: {procs:?})",
            t.dir
        );
        t
    }

    fn write(&self, file: &str, value: &str) {
        let p = self.dir.join(file);
        fs::write(&p, value).unwrap_or_else(|e| panic!("writing {value:?} to {p:?}: {e}"));
    }

    /// Removes the limit: reads queued by the throttle go to the disk at once.
    pub fn lift(&self) {
        let _ = fs::write(
            self.dir.join("blkio.throttle.read_bps_device"),
            format!("{} 0", self.dev.0),
        );
    }
}

impl Drop for Throttle {
    fn drop(&mut self) {
        self.lift();
        remove_cgroup(&self.dir);
    }
}

/// Moves every process of a cgroup back to the root and removes it, retrying for a few seconds.
fn remove_cgroup(dir: &Path) {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        if let Ok(procs) = fs::read_to_string(dir.join("cgroup.procs")) {
            for pid in procs.lines() {
                let _ = fs::write(Path::new(BLKIO).join("cgroup.procs"), pid.trim());
            }
        }
        match fs::remove_dir(dir) {
            Ok(()) => return,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return,
            Err(e) if Instant::now() > deadline => {
                eprintln!("warning: cannot remove cgroup {dir:?}: {e}");
                return;
            }
            Err(_) => std::thread::sleep(Duration::from_millis(20)),
        }
    }
}

/// Removes the cgroups that earlier runs of these tests left behind (their creator is gone).
fn remove_stale_cgroups() {
    let Ok(entries) = fs::read_dir(BLKIO) else {
        return;
    };
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let Some(rest) = name.strip_prefix("shoal-aio-test-") else {
            continue;
        };
        let creator: i32 = rest
            .split('-')
            .next()
            .and_then(|p| p.parse().ok())
            .unwrap_or(0);
        if creator > 0 && !Path::new(&format!("/proc/{creator}")).exists() {
            if let Ok(t) = fs::read_to_string(e.path().join("blkio.throttle.read_bps_device")) {
                for l in t.lines() {
                    if let Some(dev) = l.split_whitespace().next() {
                        let _ = fs::write(
                            e.path().join("blkio.throttle.read_bps_device"),
                            format!("{dev} 0"),
                        );
                    }
                }
            }
            remove_cgroup(&e.path());
        }
    }
}

/// One thread of a process, from `/proc/PID/task/TID`.
#[derive(Debug, Clone)]
pub struct ThreadInfo {
    pub tid: i32,
    /// `comm`: the first 15 bytes of the thread's name.
    pub name: String,
    /// `R`, `S`, `D`, ...
    pub state: char,
    /// Bytes this thread read with read/pread/sendfile (`io` rchar).
    pub rchar: u64,
}

/// The threads of `pid`, by thread id.
pub fn threads(pid: i32) -> Vec<ThreadInfo> {
    let mut v = Vec::new();
    let Ok(dir) = fs::read_dir(format!("/proc/{pid}/task")) else {
        return v;
    };
    for e in dir.flatten() {
        let Ok(tid) = e.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let p = e.path();
        let name = fs::read_to_string(p.join("comm"))
            .unwrap_or_default()
            .trim_end()
            .to_string();
        let stat = fs::read_to_string(p.join("stat")).unwrap_or_default();
        let state = stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.trim_start().chars().next())
            .unwrap_or('?');
        let io = fs::read_to_string(p.join("io")).unwrap_or_default();
        let rchar = io
            .lines()
            .find_map(|l| l.strip_prefix("rchar:"))
            .and_then(|n| n.trim().parse().ok())
            .unwrap_or(0);
        v.push(ThreadInfo {
            tid,
            name,
            state,
            rchar,
        });
    }
    v.sort_by_key(|t| t.tid);
    v
}

/// The threads of `pid` whose name starts with `prefix`.
pub fn threads_named(pid: i32, prefix: &str) -> Vec<ThreadInfo> {
    threads(pid)
        .into_iter()
        .filter(|t| t.name.starts_with(prefix))
        .collect()
}

/// The kernel stack of thread `tid` of `pid` (root only), for a message.
pub fn kernel_stack(pid: i32, tid: i32) -> String {
    fs::read_to_string(format!("/proc/{pid}/task/{tid}/stack")).unwrap_or_default()
}

/// Waits (at most `limit`) until every one of `count` threads named `prefix*` is blocked in the
/// kernel (`D`) at the same moment; panics with their states otherwise.
pub fn wait_blocked(pid: i32, prefix: &str, count: usize, limit: Duration) {
    let deadline = Instant::now() + limit;
    loop {
        let t = threads_named(pid, prefix);
        if t.len() == count && t.iter().all(|t| t.state == 'D') {
            return;
        }
        if Instant::now() > deadline {
            panic!(
                "the {count} threads {prefix}* never were all blocked on the disk (state D) within \
                 {limit:?}: {t:?}. Is the blkio throttle effective on this disk?"
            );
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Opens a connection and sends `GET path`; the answer is left unread.
pub fn send_get(port: u16, path: &str) -> TcpStream {
    let mut s = TcpStream::connect(("127.0.0.1", port)).expect("connecting");
    s.write_all(format!("GET {path} HTTP/1.1\r\nHost: localhost\r\n\r\n").as_bytes())
        .expect("sending a request");
    s
}

/// Bytes readable on `s` right now, without waiting (and a flag for end of stream).
pub fn drain_now(s: &mut TcpStream) -> (usize, bool) {
    s.set_nonblocking(true).expect("nonblocking");
    let mut buf = [0u8; 65536];
    let mut n = 0;
    let mut eof = false;
    loop {
        match s.read(&mut buf) {
            Ok(0) => {
                eof = true;
                break;
            }
            Ok(k) => n += k,
            Err(_) => break,
        }
    }
    s.set_nonblocking(false).expect("blocking");
    (n, eof)
}

/// Runs `f` on its own thread and waits at most `limit` for its result (`None` if it is late;
/// the thread is left to finish on its own).
pub fn within<T: Send + 'static>(
    limit: Duration,
    f: impl FnOnce() -> T + Send + 'static,
) -> Option<T> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    rx.recv_timeout(limit).ok()
}

/// Runs `f` on its own thread; its result arrives on the receiver.
pub fn spawn<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> mpsc::Receiver<T> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    rx
}

/// A configuration with one worker (so cold and hot requests share it), errors at debug level,
/// and one server on 127.0.0.1:`port` whose root is `data`.
pub fn conf(port: u16, data: &Path, main: &str, server: &str) -> String {
    format!(
        "daemon off;\n\
         pid logs/shoal.pid;\n\
         error_log logs/error.log debug;\n\
         worker_processes 1;\n\
         {main}\n\
         events {{ worker_connections 256; }}\n\
         http {{\n\
         \x20   include mime.types;\n\
         \x20   default_type application/octet-stream;\n\
         \x20   access_log off;\n\
         \x20   server {{\n\
         \x20       listen 127.0.0.1:{port};\n\
         \x20       server_name localhost;\n\
         \x20       root {};\n\
         {server}\n\
         \x20   }}\n\
         }}\n",
        data.display()
    )
}

/// Asserts that `body` is `want`, naming the first differing byte rather than printing MiBs.
#[track_caller]
pub fn assert_body(body: &[u8], want: &[u8], what: &str) {
    if body != want {
        let at = body.iter().zip(want).position(|(a, b)| a != b);
        panic!(
            "{what}: body of {} bytes differs from the file's {} bytes (first difference at {at:?})",
            body.len(),
            want.len()
        );
    }
}
