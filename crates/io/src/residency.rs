//! "Is this file range in the page cache?": the question that decides whether a worker may read
//! or sendfile a range inline or must post it to a thread pool. Runs on the worker; never blocks.
//!
//! The answer comes from `cachestat(2)` (Linux ≥ 6.5: page counts, no side effects), else from
//! 1-byte `preadv2(RWF_NOWAIT)` probes (which, on a miss, start the kernel's readahead: a free
//! prefetch, but the answer is a sample: the first and last byte of the range, and a binary
//! search for the end of a cached prefix). What each filesystem refuses is remembered per worker
//! thread and per `st_dev`: tmpfs/ramfs are memory and always [`Residency::Resident`]; a
//! filesystem that refuses `RWF_NOWAIT` and is not memory (FUSE, some network filesystems)
//! answers [`Residency::Unknown`], and the caller offloads. Whether the kernel has `cachestat`
//! at all is asked once per process.
//!
//! The answer is advice, true when given: pages may be evicted a microsecond later. Reads made
//! on its strength stay correct, only slower.

use std::cell::RefCell;
use std::os::fd::BorrowedFd;

use crate::syscall::{self, Cachestat, NowaitRead};

/// Whether a file range is in the page cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Residency {
    /// Every page of the range is cached (or the range is empty, past the end of the file, or on
    /// a memory filesystem): reading it will not wait for a disk.
    Resident,
    /// The first page of the range is not cached.
    NotResident,
    /// The first `n` bytes of the range (0 < n < range length) are cached, the page after them is
    /// not.
    ResidentPrefix(u64),
    /// The filesystem cannot tell (it refuses `RWF_NOWAIT` and `cachestat`, or a call failed):
    /// treat as not resident.
    Unknown,
}

/// How to ask; [`Probe::Auto`] is what the server wants, the others exist for tests and
/// side-by-side benchmarks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Probe {
    /// `cachestat` when the kernel and filesystem have it, else `preadv2(RWF_NOWAIT)`.
    Auto,
    /// `cachestat` only (an unsupported `cachestat` gives [`Residency::Unknown`]).
    Cachestat,
    /// `preadv2(RWF_NOWAIT)` probes only.
    Nowait,
}

/// What a filesystem is, for the offload decision.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FsKind {
    /// tmpfs or ramfs: memory, reads never wait for a disk.
    Memory,
    /// A filesystem that refuses `RWF_NOWAIT` and is not memory (FUSE, ...): always offload.
    Refuses,
    /// A filesystem with a page cache that answers `RWF_NOWAIT` (ext4, xfs, btrfs, ...).
    Disk,
}

/// What one filesystem (one `st_dev`) refused, learned on this thread.
#[derive(Debug, Clone, Copy)]
struct FsInfo {
    dev: u64,
    kind: FsKind,
    cachestat_refused: bool,
}

thread_local! {
    /// A handful of filesystems per process: a Vec beats a map.
    static FILESYSTEMS: RefCell<Vec<FsInfo>> = const { RefCell::new(Vec::new()) };
}

/// Finds (or learns, with one `fstatfs`) what filesystem `dev` is.
fn fs_info(fd: BorrowedFd<'_>, dev: u64) -> FsInfo {
    if let Some(info) = FILESYSTEMS.with_borrow(|fss| fss.iter().find(|fs| fs.dev == dev).copied())
    {
        return info;
    }
    let kind = match syscall::fs_type(fd) {
        Ok(syscall::TMPFS_MAGIC) | Ok(syscall::RAMFS_MAGIC) => FsKind::Memory,
        Ok(syscall::FUSE_SUPER_MAGIC) => FsKind::Refuses,
        // An unknown answer: assume a disk and learn from what RWF_NOWAIT says.
        _ => FsKind::Disk,
    };
    let info = FsInfo {
        dev,
        kind,
        cachestat_refused: false,
    };
    FILESYSTEMS.with_borrow_mut(|fss| fss.push(info));
    info
}

fn update(dev: u64, f: impl FnOnce(&mut FsInfo)) {
    FILESYSTEMS.with_borrow_mut(|fss| {
        if let Some(fs) = fss.iter_mut().find(|fs| fs.dev == dev) {
            f(fs);
        }
    });
}

/// What kind of filesystem holds `fd` (whose `st_dev` is `dev`), as this thread knows it.
pub fn filesystem(fd: BorrowedFd<'_>, dev: u64) -> FsKind {
    fs_info(fd, dev).kind
}

/// Records that `preadv2(RWF_NOWAIT)` answered `EOPNOTSUPP` for a file of `dev`; returns what the
/// filesystem is now known to be ([`FsKind::Memory`] stays memory, anything else becomes
/// [`FsKind::Refuses`]).
pub fn note_nowait_refused(fd: BorrowedFd<'_>, dev: u64) -> FsKind {
    let info = fs_info(fd, dev);
    if info.kind == FsKind::Disk {
        update(dev, |fs| fs.kind = FsKind::Refuses);
        return FsKind::Refuses;
    }
    info.kind
}

/// Is `[off, off + len)` of `fd` in the page cache? Costs one `fstat` more than
/// [`check_known`]; use that one when the file's `st_dev` and size are at hand (open-file cache).
pub fn check(fd: BorrowedFd<'_>, off: u64, len: u64) -> Residency {
    match syscall::fstat(fd) {
        Ok(st) => check_known(fd, st.dev, st.size, off, len, Probe::Auto),
        Err(_) => Residency::Unknown,
    }
}

/// Is `[off, off + len)` of `fd` (on filesystem `dev`, `size` bytes long) in the page cache?
/// The part of the range past `size` does not count: there is nothing to read there.
pub fn check_known(
    fd: BorrowedFd<'_>,
    dev: u64,
    size: u64,
    off: u64,
    len: u64,
    probe: Probe,
) -> Residency {
    let end = off.saturating_add(len).min(size);
    if off >= end {
        return Residency::Resident;
    }
    let info = fs_info(fd, dev);
    match info.kind {
        FsKind::Memory => return Residency::Resident,
        FsKind::Refuses => return Residency::Unknown,
        FsKind::Disk => {}
    }
    let try_cachestat = match probe {
        Probe::Auto => !info.cachestat_refused && syscall::cachestat_in_kernel(),
        Probe::Cachestat => true,
        Probe::Nowait => false,
    };
    if try_cachestat {
        match by_cachestat(fd, off, end) {
            Ok(Some(answer)) => return answer,
            Ok(None) => {
                update(dev, |fs| fs.cachestat_refused = true);
                if probe == Probe::Cachestat {
                    return Residency::Unknown;
                }
            }
            Err(()) => return Residency::Unknown,
        }
    }
    match by_nowait(fd, off, end) {
        Some(answer) => answer,
        None => {
            note_nowait_refused(fd, dev);
            Residency::Unknown
        }
    }
}

/// Pages of `[off, end)`: from the page holding `off` to the page holding `end - 1`.
fn page_span(off: u64, end: u64) -> (u64, u64) {
    let page = syscall::page_size();
    let first = off / page;
    (first, (end - 1) / page - first + 1)
}

/// `Ok(None)`: cachestat unsupported; `Err(())`: it failed otherwise.
fn by_cachestat(fd: BorrowedFd<'_>, off: u64, end: u64) -> Result<Option<Residency>, ()> {
    let page = syscall::page_size();
    let (first, pages) = page_span(off, end);
    let cached = |n: u64| -> Result<Option<u64>, ()> {
        match syscall::cachestat(fd, first * page, n * page) {
            Ok(Cachestat::Stat(st)) => Ok(Some(st.nr_cache)),
            Ok(Cachestat::Unsupported) => Ok(None),
            Err(_) => Err(()),
        }
    };
    let Some(all) = cached(pages)? else {
        return Ok(None);
    };
    if all >= pages {
        // cachestat's nr_cache also counts pages whose read is still in flight (readahead
        // just issued): sending them inline would wait for the disk. Confirm with probes.
        return Ok(Some(if readable_now(fd, off, end) {
            Residency::Resident
        } else {
            Residency::NotResident
        }));
    }
    if all == 0 || cached(1)? != Some(1) {
        return Ok(Some(Residency::NotResident));
    }
    // Binary search for the longest fully cached prefix: `lo` pages are, `hi` pages are not.
    let (mut lo, mut hi) = (1, pages);
    while hi - lo > 1 {
        let mid = lo + (hi - lo) / 2;
        if cached(mid)?.ok_or(())? == mid {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    let prefix = (first + lo) * page - off;
    if !readable_now(fd, off, off + prefix) {
        return Ok(Some(Residency::NotResident));
    }
    Ok(Some(Residency::ResidentPrefix(prefix)))
}

/// Whether `off..end` can be read without waiting: 1-byte `preadv2(RWF_NOWAIT)` probes at both
/// ends and evenly between (at most 8), since a page under read answers EAGAIN while cachestat
/// already counts it. Readahead fills a window front to back, so the probes at the far end
/// catch the usual case.
fn readable_now(fd: BorrowedFd<'_>, off: u64, end: u64) -> bool {
    if end <= off {
        return true;
    }
    const PROBES: u64 = 8;
    let span = end - off;
    let mut byte = [0u8; 1];
    for i in 0..PROBES {
        let at = if i == PROBES - 1 {
            end - 1
        } else {
            off + span * i / PROBES
        };
        match syscall::preadv2_nowait(fd, &mut byte, at) {
            Ok(NowaitRead::Full) => {}
            // The file ended before `at` (it shrank): nothing left to wait for.
            Ok(NowaitRead::Short(0)) => {}
            // tmpfs and friends refuse RWF_NOWAIT: cachestat's word stands.
            Ok(NowaitRead::Unsupported) => return true,
            _ => return false,
        }
    }
    true
}

/// `None`: the filesystem refuses `RWF_NOWAIT`.
fn by_nowait(fd: BorrowedFd<'_>, off: u64, end: u64) -> Option<Residency> {
    let page = syscall::page_size();
    // Some(true): the byte at `at` is cached (or past the end); Some(false): it is not.
    let probe = |at: u64| -> Option<Result<bool, ()>> {
        let mut byte = [0u8; 1];
        match syscall::preadv2_nowait(fd, &mut byte, at) {
            Ok(NowaitRead::Full) | Ok(NowaitRead::Short(_)) => Some(Ok(true)),
            Ok(NowaitRead::WouldBlock) => Some(Ok(false)),
            Ok(NowaitRead::Unsupported) => None,
            Err(_) => Some(Err(())),
        }
    };
    let answer = |r: Result<bool, ()>| r.unwrap_or(false);
    if !answer(probe(off)?) {
        return Some(Residency::NotResident);
    }
    if answer(probe(end - 1)?) {
        return Some(Residency::Resident);
    }
    let (first, pages) = page_span(off, end);
    if pages == 1 {
        // Evicted between the two probes.
        return Some(Residency::NotResident);
    }
    // The first page is cached, the last is not: search for the first uncached page.
    let (mut lo, mut hi) = (0, pages - 1);
    while hi - lo > 1 {
        let mid = lo + (hi - lo) / 2;
        if answer(probe((first + mid) * page)?) {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    Some(Residency::ResidentPrefix((first + hi) * page - off))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::syscall::Advice;
    use std::io::Write;
    use std::os::fd::AsFd;

    fn file_in(dir: &str, len: usize) -> tempfile::NamedTempFile {
        let mut f = tempfile::NamedTempFile::new_in(dir).expect("temp file");
        f.write_all(&vec![0x5a; len]).expect("write");
        f.as_file()
            .sync_all()
            .expect("sync: clean pages can be dropped");
        f
    }

    fn check_by(f: &std::fs::File, off: u64, len: u64, probe: Probe) -> Residency {
        let st = syscall::fstat(f.as_fd()).unwrap();
        check_known(f.as_fd(), st.dev, st.size, off, len, probe)
    }

    #[test]
    fn var_tmp_is_a_disk_not_tmpfs() {
        // The tests below rely on /var/tmp having a page cache that fadvise can empty.
        let f = file_in("/var/tmp", 1);
        assert_ne!(
            syscall::fs_type(f.as_file().as_fd()).unwrap(),
            syscall::TMPFS_MAGIC
        );
    }

    #[test]
    fn hot_file_is_resident_by_every_probe() {
        let f = file_in("/var/tmp", 1 << 20);
        let file = f.as_file();
        for probe in [Probe::Auto, Probe::Cachestat, Probe::Nowait] {
            assert_eq!(
                check_by(file, 0, 1 << 20, probe),
                Residency::Resident,
                "{probe:?}"
            );
            assert_eq!(
                check_by(file, 12345, 100_000, probe),
                Residency::Resident,
                "{probe:?}"
            );
        }
        assert_eq!(check(file.as_fd(), 0, 1 << 20), Residency::Resident);
        // Empty ranges and ranges past the end have nothing to wait for.
        assert_eq!(check(file.as_fd(), 5, 0), Residency::Resident);
        assert_eq!(check(file.as_fd(), 2 << 20, 10), Residency::Resident);
    }

    #[test]
    fn evicted_file_is_not_resident() {
        let f = file_in("/var/tmp", 1 << 20);
        let file = f.as_file();
        let allowed =
            |r: Residency| matches!(r, Residency::NotResident | Residency::ResidentPrefix(_));
        syscall::fadvise(file.as_fd(), 0, 0, Advice::DontNeed).unwrap();
        let by_cachestat = check_by(file, 0, 1 << 20, Probe::Cachestat);
        assert!(allowed(by_cachestat), "{by_cachestat:?}");
        syscall::fadvise(file.as_fd(), 0, 0, Advice::DontNeed).unwrap();
        let by_nowait = check_by(file, 0, 1 << 20, Probe::Nowait);
        assert!(allowed(by_nowait), "{by_nowait:?}");
    }

    #[test]
    fn cached_prefix_is_found_by_both_probes() {
        let page = syscall::page_size();
        let f = file_in("/var/tmp", 1024 * page as usize);
        let file = f.as_file();
        // Evict all, then cache exactly the first 10 pages (no readahead on this open file).
        // fadvise(DONTNEED) of a middle range cannot be used: the writer's large folios span it.
        syscall::fadvise(file.as_fd(), 0, 0, Advice::DontNeed).unwrap();
        syscall::fadvise(file.as_fd(), 0, 0, Advice::Random).unwrap();
        let mut buf = vec![0u8; 10 * page as usize];
        assert_eq!(
            syscall::pread_full(file.as_fd(), &mut buf, 0).unwrap(),
            buf.len()
        );
        let by_cachestat = check_by(file, 100, 1024 * page, Probe::Cachestat);
        let Residency::ResidentPrefix(n) = by_cachestat else {
            panic!("{by_cachestat:?}")
        };
        assert!(n >= 10 * page - 100 && n < 1024 * page - 100, "{n}");
        // The RWF_NOWAIT probes may bring pages in as they go: at least as long a prefix.
        let by_nowait = check_by(file, 100, 1024 * page, Probe::Nowait);
        match by_nowait {
            Residency::ResidentPrefix(m) => assert!(m >= n, "{m} < {n}"),
            r => assert_eq!(r, Residency::Resident),
        }
    }

    #[test]
    fn cachestat_agrees_with_preadv2_on_a_hot_file() {
        let f = file_in("/var/tmp", 3 << 20);
        let file = f.as_file();
        let mut buf = vec![0u8; 3 << 20];
        assert_eq!(
            syscall::preadv2_nowait(file.as_fd(), &mut buf, 0).unwrap(),
            NowaitRead::Full
        );
        match syscall::cachestat(file.as_fd(), 0, 3 << 20).unwrap() {
            Cachestat::Stat(st) => assert_eq!(st.nr_cache, (3 << 20) / syscall::page_size()),
            Cachestat::Unsupported => panic!("this kernel (6.x) has cachestat"),
        }
        assert_eq!(
            check_by(file, 0, 3 << 20, Probe::Cachestat),
            check_by(file, 0, 3 << 20, Probe::Nowait)
        );
    }

    #[test]
    fn tmpfs_is_memory_hence_resident() {
        let f = file_in("/dev/shm", 1 << 16);
        let file = f.as_file();
        let st = syscall::fstat(file.as_fd()).unwrap();
        assert_eq!(filesystem(file.as_fd(), st.dev), FsKind::Memory);
        // tmpfs refuses RWF_NOWAIT; the tmpfs rule answers before asking.
        let mut buf = [0u8; 16];
        assert_eq!(
            syscall::preadv2_nowait(file.as_fd(), &mut buf, 0).unwrap(),
            NowaitRead::Unsupported
        );
        syscall::fadvise(file.as_fd(), 0, 0, Advice::DontNeed).unwrap();
        for probe in [Probe::Auto, Probe::Cachestat, Probe::Nowait] {
            assert_eq!(check_by(file, 0, 1 << 16, probe), Residency::Resident);
        }
        assert_eq!(note_nowait_refused(file.as_fd(), st.dev), FsKind::Memory);
    }

    #[test]
    fn a_refusing_disk_filesystem_answers_unknown() {
        // No FUSE mount here: teach this thread that /var/tmp's filesystem refuses RWF_NOWAIT.
        let f = file_in("/var/tmp", 4096);
        let file = f.as_file();
        let st = syscall::fstat(file.as_fd()).unwrap();
        assert_eq!(filesystem(file.as_fd(), st.dev), FsKind::Disk);
        assert_eq!(note_nowait_refused(file.as_fd(), st.dev), FsKind::Refuses);
        assert_eq!(check(file.as_fd(), 0, 4096), Residency::Unknown);
        // Other threads learn for themselves.
        let fd = file.try_clone().unwrap();
        let other = std::thread::spawn(move || check(fd.as_fd(), 0, 4096))
            .join()
            .unwrap();
        assert_eq!(other, Residency::Resident);
    }
}
