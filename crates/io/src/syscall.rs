//! Thin, typed wrappers over the Linux system calls shoal's file path needs: `sendfile`, `pread`,
//! `preadv2(RWF_NOWAIT)`, `cachestat`, `posix_fadvise`, `fstat`/`fstatfs`, TCP_CORK/TCP_NODELAY and
//! an `O_DIRECT` open.
//!
//! This is the only module of the crate with `unsafe`; every block says why it holds. The wrappers
//! neither decide nor retry policy (that is `residency` and `file`): they retry `EINTR`, turn the
//! answers callers branch on into enum variants and every other failure into an `io::Error`.
//! Whether a call may block is the caller's business: `pread` and `sendfile` from a file that is
//! not in the page cache wait for the disk and belong on a pool thread; `preadv2(RWF_NOWAIT)`
//! and `cachestat` never wait and are meant for the worker.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, RawFd};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;
use std::sync::OnceLock;

/// `cachestat(2)`'s syscall number. It is 451 on every architecture that has it (the number was
/// allocated after the syscall tables were unified), and libc does not export it for all targets.
const SYS_CACHESTAT: libc::c_long = 451;

/// `statfs.f_type` of tmpfs (and of `/dev/shm`).
pub const TMPFS_MAGIC: i64 = 0x0102_1994;
/// `statfs.f_type` of ramfs.
pub const RAMFS_MAGIC: i64 = 0x8584_58f6;
/// `statfs.f_type` of FUSE mounts.
pub const FUSE_SUPER_MAGIC: i64 = 0x6573_5546;

/// Runs a syscall wrapper until it stops failing with `EINTR`.
fn retry_eintr(mut call: impl FnMut() -> isize) -> io::Result<usize> {
    loop {
        let ret = call();
        if ret >= 0 {
            return Ok(ret as usize);
        }
        let err = io::Error::last_os_error();
        if err.raw_os_error() != Some(libc::EINTR) {
            return Err(err);
        }
    }
}

/// Converts a file offset for the kernel, refusing offsets that do not fit `off_t`.
fn to_off(offset: u64) -> io::Result<libc::off_t> {
    libc::off_t::try_from(offset)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "file offset out of range"))
}

/// The size of a page of the page cache, in bytes.
pub fn page_size() -> u64 {
    static PAGE: OnceLock<u64> = OnceLock::new();
    *PAGE.get_or_init(|| {
        // SAFETY: sysconf takes no pointers and has no preconditions.
        let size = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
        if size > 0 {
            size as u64
        } else {
            4096
        }
    })
}

/// `sendfile(out_fd, in_fd, &offset, count)`: copies up to `count` bytes of `in_fd` starting at
/// `offset` to `out_fd` (a socket) without the file position of `in_fd` moving. Returns the
/// number of bytes sent; a nonblocking socket that is full gives `ErrorKind::WouldBlock`, and
/// 0 means `offset` is at or past the end of the file.
pub fn sendfile(
    out_fd: BorrowedFd<'_>,
    in_fd: BorrowedFd<'_>,
    offset: u64,
    count: usize,
) -> io::Result<usize> {
    let mut off = to_off(offset)?;
    retry_eintr(|| {
        // SAFETY: both fds are borrowed, hence open for the duration of the call; `off` is a live
        // local the kernel writes the new offset to and nothing else aliases it.
        unsafe { libc::sendfile(out_fd.as_raw_fd(), in_fd.as_raw_fd(), &mut off, count) }
    })
}

/// `pread(fd, buf, offset)`: reads at `offset` without moving the file position; may block on
/// the disk. Returns the number of bytes read (short only at the end of the file, or for
/// special files).
pub fn pread(fd: BorrowedFd<'_>, buf: &mut [u8], offset: u64) -> io::Result<usize> {
    let off = to_off(offset)?;
    retry_eintr(|| {
        // SAFETY: `buf` is a valid, exclusively borrowed region of `buf.len()` bytes for the whole
        // call, and the fd is borrowed, hence open.
        unsafe { libc::pread(fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len(), off) }
    })
}

/// [`pread`] into memory not yet written (a buffer's spare capacity): nothing is zeroed first.
/// Returns the number of bytes read; that many at the start of `buf` are then initialized.
pub fn pread_uninit(
    fd: BorrowedFd<'_>,
    buf: &mut [std::mem::MaybeUninit<u8>],
    offset: u64,
) -> io::Result<usize> {
    let off = to_off(offset)?;
    retry_eintr(|| {
        // SAFETY: `buf` is a valid, exclusively borrowed region of `buf.len()` bytes for the
        // whole call (the kernel only writes it), and the fd is borrowed, hence open.
        unsafe { libc::pread(fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len(), off) }
    })
}

/// Reads `buf.len()` bytes at `offset` unless the end of the file comes first, looping over
/// short reads. Returns the number of bytes read. May block.
pub fn pread_full(fd: BorrowedFd<'_>, buf: &mut [u8], offset: u64) -> io::Result<usize> {
    let mut done = 0;
    while done < buf.len() {
        match pread(fd, &mut buf[done..], offset + done as u64)? {
            0 => break,
            n => done += n,
        }
    }
    Ok(done)
}

/// Appends `len` bytes of the file at `offset` to `out`, `gap` zero bytes before each piece of
/// `piece` bytes (the last may be shorter): room for a frame's header that the caller writes
/// over, so that a file's bytes go into framed output with one `preadv` and no copy. Loops
/// over short reads; nothing is appended on an error, and a file that ends first is
/// `UnexpectedEof`. May block.
pub fn pread_framed(
    fd: BorrowedFd<'_>,
    out: &mut Vec<u8>,
    offset: u64,
    len: usize,
    piece: usize,
    gap: usize,
) -> io::Result<()> {
    let off = to_off(offset)?;
    if len == 0 {
        return Ok(());
    }
    let piece = piece.max(1);
    let size = len + gap * len.div_ceil(piece);
    out.reserve(size);
    let mut iov = Vec::with_capacity(len.div_ceil(piece));
    let mut rest = &mut out.spare_capacity_mut()[..size];
    let mut left = len;
    while left > 0 {
        let (head, after) = rest.split_at_mut(gap);
        head.fill(std::mem::MaybeUninit::new(0));
        let (data, after) = after.split_at_mut(left.min(piece));
        iov.push(libc::iovec {
            iov_base: data.as_mut_ptr().cast(),
            iov_len: data.len(),
        });
        left -= data.len();
        rest = after;
    }
    let (mut done, mut first) = (0usize, 0usize);
    while done < len {
        let at = off + done as libc::off_t;
        let count = (iov.len() - first).min(libc::UIO_MAXIOV as usize) as libc::c_int;
        // SAFETY: each iovec is a distinct region of `out`'s spare capacity, not otherwise
        // borrowed for the call (the kernel only writes it); the fd is borrowed, hence open.
        let n = retry_eintr(|| unsafe {
            libc::preadv(fd.as_raw_fd(), iov[first..].as_ptr(), count, at)
        })?;
        if n == 0 {
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
        done += n;
        // Past the pieces read whole; into the one read in part.
        let mut n = n;
        while n > 0 && n >= iov[first].iov_len {
            n -= iov[first].iov_len;
            first += 1;
        }
        if n > 0 {
            let v = &mut iov[first];
            // SAFETY: `n` is less than this region's length: the pointer stays inside it.
            v.iov_base = unsafe { v.iov_base.cast::<u8>().add(n) }.cast();
            v.iov_len -= n;
        }
    }
    let at = out.len();
    // SAFETY: the `size` bytes after the end are initialized: the gaps were zeroed, and the
    // reads filled every piece (`done == len`).
    unsafe { out.set_len(at + size) };
    Ok(())
}

/// What `preadv2(..., RWF_NOWAIT)` answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NowaitRead {
    /// The whole buffer was filled from the page cache.
    Full,
    /// Fewer bytes than asked (possibly 0): either only this prefix is in the page cache, or the
    /// file ends here. The kernel answers `EAGAIN`, not 0, when nothing is cached, so `Short(0)`
    /// with a non-empty buffer is the end of the file.
    Short(usize),
    /// `EAGAIN`: the first page is not in the page cache; reading it would wait for the disk.
    WouldBlock,
    /// `EOPNOTSUPP`: this file's filesystem refuses `RWF_NOWAIT` (tmpfs, FUSE, ...).
    Unsupported,
}

/// `preadv2(fd, [buf], offset, RWF_NOWAIT)`: reads only what is already in the page cache, never
/// waiting for the disk. Cheap enough (≈ a plain `pread` on a hot page) to try on the worker.
pub fn preadv2_nowait(fd: BorrowedFd<'_>, buf: &mut [u8], offset: u64) -> io::Result<NowaitRead> {
    let off = to_off(offset)?;
    let iov = libc::iovec {
        iov_base: buf.as_mut_ptr().cast(),
        iov_len: buf.len(),
    };
    let res = retry_eintr(|| {
        // SAFETY: `iov` describes `buf`, valid and exclusively borrowed for the call; the kernel
        // reads exactly one iovec from the pointer; the fd is borrowed, hence open.
        unsafe { libc::preadv2(fd.as_raw_fd(), &iov, 1, off, libc::RWF_NOWAIT) }
    });
    match res {
        Ok(n) if n == buf.len() => Ok(NowaitRead::Full),
        Ok(n) => Ok(NowaitRead::Short(n)),
        Err(e) if e.raw_os_error() == Some(libc::EAGAIN) => Ok(NowaitRead::WouldBlock),
        Err(e) if is_unsupported(&e) => Ok(NowaitRead::Unsupported),
        Err(e) => Err(e),
    }
}

/// True for the errors that mean "this kernel or filesystem does not do that": ENOSYS,
/// EOPNOTSUPP (= ENOTSUP on Linux).
pub fn is_unsupported(err: &io::Error) -> bool {
    matches!(
        err.raw_os_error(),
        Some(libc::ENOSYS) | Some(libc::EOPNOTSUPP)
    )
}

/// `struct cachestat` from `<linux/mman.h>`: page counts of a file range.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CacheStat {
    /// Pages of the range in the page cache (dirty and under writeback included).
    pub nr_cache: u64,
    /// Cached pages that are dirty.
    pub nr_dirty: u64,
    /// Cached pages under writeback.
    pub nr_writeback: u64,
    /// Pages of the range that were evicted from the cache.
    pub nr_evicted: u64,
    /// Evicted pages that would still be in the cache with a bigger working set.
    pub nr_recently_evicted: u64,
}

/// `struct cachestat_range` from `<linux/mman.h>`.
#[repr(C)]
struct CachestatRange {
    off: u64,
    len: u64,
}

/// What `cachestat(2)` answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cachestat {
    /// The counts for the range.
    Stat(CacheStat),
    /// `ENOSYS` (kernel older than 6.5) or `EOPNOTSUPP` (e.g. hugetlbfs): ask `preadv2` instead.
    Unsupported,
}

/// `cachestat(fd, {off, len}, &stat, 0)`: how many pages of `[off, off + len)` are in the page
/// cache, without touching them. `len == 0` means "to the end of the file". Pages past the end
/// of the file are not counted. Never blocks.
pub fn cachestat(fd: BorrowedFd<'_>, off: u64, len: u64) -> io::Result<Cachestat> {
    let range = CachestatRange { off, len };
    let mut stat = CacheStat::default();
    let res = retry_eintr(|| {
        // SAFETY: `range` and `stat` are live locals with the kernel's `#[repr(C)]` layouts
        // (two and five u64s); the kernel reads the first and writes the second only during the
        // call; the fd is borrowed, hence open; flags must be 0.
        let ret = unsafe {
            libc::syscall(
                SYS_CACHESTAT,
                fd.as_raw_fd() as libc::c_uint,
                &range as *const CachestatRange,
                &mut stat as *mut CacheStat,
                0 as libc::c_uint,
            )
        };
        ret as isize
    });
    match res {
        Ok(_) => Ok(Cachestat::Stat(stat)),
        Err(e) if is_unsupported(&e) => Ok(Cachestat::Unsupported),
        Err(e) => Err(e),
    }
}

/// Whether this kernel has `cachestat(2)` (Linux ≥ 6.5), asked once per process with a call on
/// an invalid fd: `ENOSYS` means no, `EBADF` means yes.
pub fn cachestat_in_kernel() -> bool {
    static HAS: OnceLock<bool> = OnceLock::new();
    *HAS.get_or_init(|| {
        let range = CachestatRange { off: 0, len: 1 };
        let mut stat = CacheStat::default();
        // SAFETY: as in `cachestat`; fd -1 is never valid, so the kernel only validates it.
        let ret = unsafe {
            libc::syscall(
                SYS_CACHESTAT,
                -1 as libc::c_int as libc::c_uint,
                &range as *const CachestatRange,
                &mut stat as *mut CacheStat,
                0 as libc::c_uint,
            )
        };
        !(ret < 0 && io::Error::last_os_error().raw_os_error() == Some(libc::ENOSYS))
    })
}

/// Advice for [`fadvise`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Advice {
    /// `POSIX_FADV_DONTNEED`: drop the range's clean pages from the page cache (tests use it to
    /// make a file cold).
    DontNeed,
    /// `POSIX_FADV_SEQUENTIAL`: the file will be read front to back; read ahead more.
    Sequential,
    /// `POSIX_FADV_WILLNEED`: start reading the range into the page cache now.
    WillNeed,
    /// `POSIX_FADV_RANDOM`: no readahead on this open file (tests use it to cache exact ranges).
    Random,
}

/// `posix_fadvise(fd, off, len, advice)`; `len == 0` means to the end of the file.
pub fn fadvise(fd: BorrowedFd<'_>, off: u64, len: u64, advice: Advice) -> io::Result<()> {
    let advice = match advice {
        Advice::DontNeed => libc::POSIX_FADV_DONTNEED,
        Advice::Sequential => libc::POSIX_FADV_SEQUENTIAL,
        Advice::WillNeed => libc::POSIX_FADV_WILLNEED,
        Advice::Random => libc::POSIX_FADV_RANDOM,
    };
    let (off, len) = (to_off(off)?, to_off(len)?);
    // SAFETY: no pointers are passed; the fd is borrowed, hence open.
    let ret = unsafe { libc::posix_fadvise(fd.as_raw_fd(), off, len, advice) };
    // posix_fadvise returns the error number instead of setting errno.
    if ret == 0 {
        Ok(())
    } else {
        Err(io::Error::from_raw_os_error(ret))
    }
}

/// The fields of `fstat` this crate uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stat {
    /// `st_dev`: the filesystem.
    pub dev: u64,
    /// `st_ino`.
    pub ino: u64,
    /// `st_size` in bytes.
    pub size: u64,
    /// `st_mtime` seconds.
    pub mtime: i64,
    /// `st_mtime` nanoseconds.
    pub mtime_nsec: i64,
    /// A directory.
    pub is_dir: bool,
    /// A regular file.
    pub is_file: bool,
}

/// `fstat(fd)`.
pub fn fstat(fd: BorrowedFd<'_>) -> io::Result<Stat> {
    let mut st = std::mem::MaybeUninit::<libc::stat>::uninit();
    // SAFETY: `st` points to writable storage of the size of `struct stat`; the fd is borrowed.
    let ret = unsafe { libc::fstat(fd.as_raw_fd(), st.as_mut_ptr()) };
    if ret != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: fstat returned 0, so the kernel filled the whole struct.
    let st = unsafe { st.assume_init() };
    let kind = st.st_mode & libc::S_IFMT;
    Ok(Stat {
        dev: st.st_dev,
        ino: st.st_ino,
        size: st.st_size.max(0) as u64,
        mtime: st.st_mtime,
        mtime_nsec: st.st_mtime_nsec,
        is_dir: kind == libc::S_IFDIR,
        is_file: kind == libc::S_IFREG,
    })
}

/// `fstatfs(fd).f_type`: the filesystem's magic number (compare with [`TMPFS_MAGIC`], ...).
pub fn fs_type(fd: BorrowedFd<'_>) -> io::Result<i64> {
    let mut sfs = std::mem::MaybeUninit::<libc::statfs>::uninit();
    // SAFETY: `sfs` points to writable storage of the size of `struct statfs`; fd is borrowed.
    let ret = unsafe { libc::fstatfs(fd.as_raw_fd(), sfs.as_mut_ptr()) };
    if ret != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: fstatfs returned 0, so the kernel filled the whole struct.
    let sfs = unsafe { sfs.assume_init() };
    #[allow(clippy::unnecessary_cast)] // f_type's width differs between architectures
    Ok(sfs.f_type as i64)
}

/// Sets an integer socket option.
fn setsockopt_int(
    fd: RawFd,
    level: libc::c_int,
    name: libc::c_int,
    value: libc::c_int,
) -> io::Result<()> {
    // SAFETY: the option value is a live c_int and its exact size is passed.
    let ret = unsafe {
        libc::setsockopt(
            fd,
            level,
            name,
            (&value as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if ret == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Reads an integer socket option.
fn getsockopt_int(fd: RawFd, level: libc::c_int, name: libc::c_int) -> io::Result<libc::c_int> {
    let mut value: libc::c_int = 0;
    let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: `value` and `len` are live locals; `len` holds the size of `value`.
    let ret = unsafe {
        libc::getsockopt(
            fd,
            level,
            name,
            (&mut value as *mut libc::c_int).cast(),
            &mut len,
        )
    };
    if ret == 0 {
        Ok(value)
    } else {
        Err(io::Error::last_os_error())
    }
}

/// What `TCP_INFO` says of a connection: (rtt µs, rttvar µs, snd_cwnd, rcv_space), as
/// nginx's `$tcpinfo_*` read them.
pub fn tcp_info(fd: RawFd) -> io::Result<(u32, u32, u32, u32)> {
    // SAFETY: an all-zero tcp_info is a valid value for the kernel to overwrite.
    let mut ti: libc::tcp_info = unsafe { std::mem::zeroed() };
    let mut len = std::mem::size_of::<libc::tcp_info>() as libc::socklen_t;
    // SAFETY: `ti` and `len` are live locals; `len` holds the size of `ti`.
    let ret = unsafe {
        libc::getsockopt(
            fd,
            libc::IPPROTO_TCP,
            libc::TCP_INFO,
            (&mut ti as *mut libc::tcp_info).cast(),
            &mut len,
        )
    };
    if ret != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok((
        ti.tcpi_rtt,
        ti.tcpi_rttvar,
        ti.tcpi_snd_cwnd,
        ti.tcpi_rcv_space,
    ))
}

/// TCP_CORK on (hold partial frames: header + sendfile body leave in full packets) or off (flush).
pub fn set_tcp_cork(sock: BorrowedFd<'_>, on: bool) -> io::Result<()> {
    setsockopt_int(
        sock.as_raw_fd(),
        libc::IPPROTO_TCP,
        libc::TCP_CORK,
        on as libc::c_int,
    )
}

/// Whether TCP_CORK is on.
pub fn tcp_cork(sock: BorrowedFd<'_>) -> io::Result<bool> {
    Ok(getsockopt_int(sock.as_raw_fd(), libc::IPPROTO_TCP, libc::TCP_CORK)? != 0)
}

/// TCP_NODELAY on or off.
pub fn set_tcp_nodelay(sock: BorrowedFd<'_>, on: bool) -> io::Result<()> {
    setsockopt_int(
        sock.as_raw_fd(),
        libc::IPPROTO_TCP,
        libc::TCP_NODELAY,
        on as libc::c_int,
    )
}

/// Whether TCP_NODELAY is on.
pub fn tcp_nodelay(sock: BorrowedFd<'_>) -> io::Result<bool> {
    Ok(getsockopt_int(sock.as_raw_fd(), libc::IPPROTO_TCP, libc::TCP_NODELAY)? != 0)
}

/// Whether `sock` has room to write right now: `poll(POLLOUT)` with a zero timeout.
///
/// A worker whose socket filled up in a pool thread's `sendfile` must not trust its event loop's
/// cached readiness (the loop did not see the `EAGAIN`); with tokio:
/// `loop { s.writable().await?; if s.try_io(Interest::WRITABLE, || if writable_now(fd)? { Ok(()) }
/// else { Err(ErrorKind::WouldBlock.into()) }).is_ok() { break } }`: readiness is cleared only
/// when the kernel says "full", so no edge is lost.
pub fn writable_now(sock: BorrowedFd<'_>) -> io::Result<bool> {
    let mut pfd = libc::pollfd {
        fd: sock.as_raw_fd(),
        events: libc::POLLOUT,
        revents: 0,
    };
    retry_eintr(|| {
        // SAFETY: `pfd` is one live pollfd and we pass a count of 1; timeout 0 never waits.
        unsafe { libc::poll(&mut pfd, 1, 0) as isize }
    })?;
    Ok(pfd.revents & (libc::POLLOUT | libc::POLLERR | libc::POLLHUP) != 0)
}

/// A one-byte `recv(MSG_PEEK | MSG_DONTWAIT)`: how many bytes it saw (0 is an EOF) or why not.
fn peek_one(sock: BorrowedFd<'_>) -> io::Result<usize> {
    peek(sock, &mut [0u8; 1])
}

/// `recv(MSG_PEEK | MSG_DONTWAIT)` into `buf`: the bytes waiting on a connected socket, left
/// there for the next read (0 is an EOF; `WouldBlock` when nothing has come).
pub fn peek(sock: BorrowedFd<'_>, buf: &mut [u8]) -> io::Result<usize> {
    // SAFETY: `recv` writes at most `buf.len()` bytes into the live buffer; `sock` is borrowed
    // for the call, so the descriptor stays open.
    let n = unsafe {
        libc::recv(
            sock.as_raw_fd(),
            buf.as_mut_ptr().cast(),
            buf.len(),
            libc::MSG_PEEK | libc::MSG_DONTWAIT,
        )
    };
    if n < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(n as usize)
    }
}

/// Whether a connected socket has nothing to read and no EOF pending (an idle kept-alive
/// connection is still good).
pub fn nothing_to_read(sock: BorrowedFd<'_>) -> bool {
    matches!(peek_one(sock), Err(e) if e.kind() == io::ErrorKind::WouldBlock)
}

/// Whether the next read of a connected socket would return EOF (or fail).
pub fn eof_pending(sock: BorrowedFd<'_>) -> bool {
    match peek_one(sock) {
        Ok(n) => n == 0,
        Err(e) => e.kind() != io::ErrorKind::WouldBlock,
    }
}

/// Opens `path` read-only with `O_DIRECT` (nginx's `directio`): reads bypass the page cache and
/// must use buffers, offsets and lengths aligned to the device's logical block size. Some
/// filesystems (tmpfs) refuse it with `EINVAL`.
pub fn open_direct(path: &Path) -> io::Result<File> {
    OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_DIRECT)
        .open(path)
}

/// Bytes free for an unprivileged user on the filesystem holding `path` (`statvfs`'s
/// `f_bavail * f_frsize`), for the proxy cache's `min_free`.
pub fn fs_free(path: &Path) -> io::Result<u64> {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(path.as_os_str().as_bytes())
        .map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    let mut s = std::mem::MaybeUninit::<libc::statvfs>::uninit();
    // SAFETY: `c` is a NUL-terminated path; `s` points to writable storage of the struct's size.
    let ret = unsafe { libc::statvfs(c.as_ptr(), s.as_mut_ptr()) };
    if ret != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: statvfs returned 0, so the kernel filled the whole struct.
    let s = unsafe { s.assume_init() };
    #[allow(clippy::unnecessary_cast)] // the fields' widths differ between architectures
    Ok(s.f_bavail as u64 * s.f_frsize as u64)
}

/// The process's soft limit on open files (`RLIMIT_NOFILE`), for caches that hold files open.
pub fn nofile_limit() -> io::Result<u64> {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: `lim` is a valid, writable rlimit struct.
    let ret = unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) };
    if ret != 0 {
        return Err(io::Error::last_os_error());
    }
    #[allow(clippy::unnecessary_cast)] // rlim_t's width differs between architectures
    Ok(lim.rlim_cur as u64)
}

#[cfg(test)]
mod tests;

/// `inotify_init1(IN_NONBLOCK | IN_CLOEXEC)`: a new inotify instance.
pub fn inotify_init() -> io::Result<std::os::fd::OwnedFd> {
    // SAFETY: no pointers; the flags are valid for inotify_init1.
    let fd = unsafe { libc::inotify_init1(libc::IN_NONBLOCK | libc::IN_CLOEXEC) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `fd` was just returned by the kernel, is open, and nothing else owns it.
    Ok(unsafe { <std::os::fd::OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(fd) })
}

/// `inotify_add_watch` on the file `fd` has open (through `/proc/self/fd/N`, so the very inode
/// held is watched, whatever its path says now). Returns the watch descriptor.
pub fn inotify_watch_fd(inotify: BorrowedFd<'_>, fd: BorrowedFd<'_>, mask: u32) -> io::Result<i32> {
    let path = std::ffi::CString::new(format!("/proc/self/fd/{}", fd.as_raw_fd()))
        .map_err(io::Error::other)?;
    // SAFETY: `path` is a NUL-terminated string that outlives the call; `inotify` is an open fd.
    let wd = unsafe { libc::inotify_add_watch(inotify.as_raw_fd(), path.as_ptr(), mask) };
    if wd < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(wd)
}

/// `inotify_rm_watch`; a watch the kernel already dropped (the file is gone) is not an error.
pub fn inotify_unwatch(inotify: BorrowedFd<'_>, wd: i32) {
    // SAFETY: no pointers; an unknown `wd` only gives EINVAL, which is ignored.
    unsafe { libc::inotify_rm_watch(inotify.as_raw_fd(), wd) };
}

/// One inotify event: the watch it is for and its mask (`wd` -1 with `IN_Q_OVERFLOW`: events
/// were lost).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InotifyEvent {
    pub wd: i32,
    pub mask: u32,
}

/// Reads every queued event of a non-blocking inotify instance (none: an empty list).
pub fn inotify_read(inotify: BorrowedFd<'_>) -> io::Result<Vec<InotifyEvent>> {
    let mut out = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        // SAFETY: `buf` is valid for writes of its length for the whole call.
        let n = unsafe { libc::read(inotify.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) };
        if n < 0 {
            let e = io::Error::last_os_error();
            match e.kind() {
                io::ErrorKind::Interrupted => continue,
                io::ErrorKind::WouldBlock => return Ok(out),
                _ => return Err(e),
            }
        }
        let data = &buf[..n as usize];
        // struct inotify_event: wd (i32), mask (u32), cookie (u32), len (u32), name[len].
        let mut at = 0;
        while at + 16 <= data.len() {
            let word = |i: usize| {
                [
                    data[at + i],
                    data[at + i + 1],
                    data[at + i + 2],
                    data[at + i + 3],
                ]
            };
            let wd = i32::from_ne_bytes(word(0));
            let mask = u32::from_ne_bytes(word(4));
            let len = u32::from_ne_bytes(word(12)) as usize;
            out.push(InotifyEvent { wd, mask });
            at += 16 + len;
        }
        if n == 0 {
            return Ok(out);
        }
    }
}
