//! Reading and sending file ranges without blocking the worker: the offload decision of
//! ARCHITECTURE.md ("Blocking work never runs on a worker"). Runs on the worker; never blocks,
//! except in the `pool: None` mode (nginx's `aio off`), where the read or sendfile is done inline
//! whatever the disk does.
//!
//! With `check_residency`, what the page cache already holds is read or sent inline (a hot hit
//! costs about a plain `pread`), and only the rest is posted to the pool: `read_range` tries
//! `preadv2(RWF_NOWAIT)` and posts the missing remainder; `sendfile_range` asks the `residency`
//! module and posts the `sendfile` itself when the range is cold. Without it every range is
//! posted, as nginx's `aio threads` does: kept so the two can be benchmarked side by side. A
//! full pool queue surfaces as an `io::Error` carrying [`Overflow`](crate::pool::Overflow) (the
//! server answers 503). The file travels to the pool as an `Arc<File>` and the socket as a `dup`
//! of it, so neither can be closed (and its number reused) under a running pool task.

use std::fs::File;
use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::sync::Arc;

use crate::pool::ThreadPool;
use crate::residency::{self, FsKind, Residency};
use crate::syscall::{self, NowaitRead};

/// Reads `len` bytes of `file` at `off` (fewer only if the file ends first).
///
/// - `pool: None`: a plain `pread` inline (may block: `aio off`);
/// - `check_residency: false`: the whole read is posted to `pool` (nginx's `aio threads`);
/// - `check_residency: true`: `preadv2(RWF_NOWAIT)` inline first; only what the page cache did
///   not hold is posted. tmpfs answers `EOPNOTSUPP` to `RWF_NOWAIT` and is read inline (it is
///   memory); other refusing filesystems are posted.
pub async fn read_range(
    file: &Arc<File>,
    off: u64,
    len: usize,
    pool: Option<&ThreadPool>,
    check_residency: bool,
) -> io::Result<Vec<u8>> {
    let mut buf = vec![0u8; len];
    let Some(pool) = pool else {
        let n = syscall::pread_full(file.as_fd(), &mut buf, off)?;
        buf.truncate(n);
        return Ok(buf);
    };
    if len == 0 {
        return Ok(buf);
    }
    let mut have = 0;
    if check_residency {
        match syscall::preadv2_nowait(file.as_fd(), &mut buf, off)? {
            NowaitRead::Full => return Ok(buf),
            NowaitRead::Short(n) => {
                // The cache's prefix ends on a page boundary; a read ending elsewhere (or empty)
                // ended at the end of the file.
                if n == 0 || (off + n as u64) % syscall::page_size() != 0 {
                    buf.truncate(n);
                    return Ok(buf);
                }
                have = n;
            }
            NowaitRead::WouldBlock => {}
            NowaitRead::Unsupported => {
                let dev = syscall::fstat(file.as_fd())?.dev;
                if residency::note_nowait_refused(file.as_fd(), dev) == FsKind::Memory {
                    let n = syscall::pread_full(file.as_fd(), &mut buf, off)?;
                    buf.truncate(n);
                    return Ok(buf);
                }
            }
        }
    }
    let file = file.clone();
    let task = move || -> io::Result<Vec<u8>> {
        let n = syscall::pread_full(file.as_fd(), &mut buf[have..], off + have as u64)?;
        buf.truncate(have + n);
        Ok(buf)
    };
    pool.post(task)?.await?
}

/// Writes all of `data` to `file` at `off`: on a `pool` thread when there is one (nginx's
/// `aio_write on` with `aio threads`: a write may wait for the disk), else inline.
pub async fn write_at<D>(
    file: &Arc<File>,
    data: D,
    off: u64,
    pool: Option<&ThreadPool>,
) -> io::Result<()>
where
    D: AsRef<[u8]> + Send + 'static,
{
    use std::os::unix::fs::FileExt;
    let Some(pool) = pool else {
        return file.write_all_at(data.as_ref(), off);
    };
    let file = file.clone();
    pool.post(move || file.write_all_at(data.as_ref(), off))?
        .await?
}

/// How `sendfile_range` will send a range.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SendfilePlan {
    /// Inline on the worker: the range is in the page cache (or there is no pool).
    Inline,
    /// This many leading bytes inline, the rest from the pool.
    InlinePrefix(u64),
    /// The `sendfile` call itself goes to the pool.
    Offload,
}

/// Decides how to send `[off, off + len)` of `file`: the residency check when asked
/// (`cachestat`, else `RWF_NOWAIT` probes), always offload when not, always inline without a
/// pool.
pub fn sendfile_plan(
    file: &File,
    off: u64,
    len: u64,
    has_pool: bool,
    check_residency: bool,
) -> SendfilePlan {
    if !has_pool {
        return SendfilePlan::Inline;
    }
    if !check_residency {
        return SendfilePlan::Offload;
    }
    match residency::check(file.as_fd(), off, len) {
        Residency::Resident => SendfilePlan::Inline,
        Residency::ResidentPrefix(n) => SendfilePlan::InlinePrefix(n),
        Residency::NotResident | Residency::Unknown => SendfilePlan::Offload,
    }
}

/// What one `sendfile_range` call did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sent {
    /// Bytes sent, from the requested offset.
    pub bytes: u64,
    /// The socket's buffer is full: wait until it is writable, then call again for the rest.
    /// If `bytes` is short of the request and the socket is not full, the file ended early.
    pub socket_full: bool,
}

/// Sends `[off, off + len)` of `file` to the nonblocking socket `sock` with `sendfile`, inline
/// or from `pool` as [`sendfile_plan`] decides, until the range is sent, the socket is full or
/// the file ends. A pool thread sending to the (nonblocking) socket never waits for the peer:
/// it returns what it sent, and the worker waits for writability and calls again (with tokio,
/// check [`writable_now`](crate::syscall::writable_now) before trusting cached readiness).
pub async fn sendfile_range(
    sock: BorrowedFd<'_>,
    file: &Arc<File>,
    off: u64,
    len: u64,
    pool: Option<&ThreadPool>,
    check_residency: bool,
) -> io::Result<Sent> {
    let inline = match sendfile_plan(file, off, len, pool.is_some(), check_residency) {
        SendfilePlan::Inline => return send_loop(sock, file.as_fd(), off, len),
        SendfilePlan::InlinePrefix(n) => {
            let sent = send_loop(sock, file.as_fd(), off, n)?;
            if sent.bytes < n {
                return Ok(sent);
            }
            n
        }
        SendfilePlan::Offload => 0,
    };
    let Some(pool) = pool else {
        unreachable!("sendfile_plan offloads only with a pool")
    };
    let sock: OwnedFd = sock.try_clone_to_owned()?;
    let file = file.clone();
    let (rest_off, rest_len) = (off + inline, len - inline);
    let task = move || send_loop(sock.as_fd(), file.as_fd(), rest_off, rest_len);
    let sent = pool.post(task)?.await??;
    Ok(Sent {
        bytes: inline + sent.bytes,
        socket_full: sent.socket_full,
    })
}

/// `sendfile` until `len` bytes are sent, the socket would block or the file ends.
fn send_loop(sock: BorrowedFd<'_>, file: BorrowedFd<'_>, off: u64, len: u64) -> io::Result<Sent> {
    // The kernel sends at most 0x7ffff000 bytes per call.
    const MAX_PER_CALL: u64 = 0x7fff_f000;
    let mut sent = 0;
    while sent < len {
        let count = (len - sent).min(MAX_PER_CALL) as usize;
        match syscall::sendfile(sock, file, off + sent, count) {
            Ok(0) => {
                return Ok(Sent {
                    bytes: sent,
                    socket_full: false,
                })
            }
            Ok(n) => sent += n as u64,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                return Ok(Sent {
                    bytes: sent,
                    socket_full: true,
                })
            }
            Err(e) => return Err(e),
        }
    }
    Ok(Sent {
        bytes: sent,
        socket_full: false,
    })
}

#[cfg(test)]
mod tests;

/// An unlinked temporary file in `dir` (`O_TMPFILE`): a request body, or an upstream answer
/// held for a slow client. Nothing is left behind whatever happens to the process.
pub fn unlinked_temp_file(dir: &std::path::Path) -> io::Result<File> {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .custom_flags(libc::O_TMPFILE)
        .mode(0o600)
        .open(dir)
}

/// `posix_fadvise(POSIX_FADV_SEQUENTIAL)` over the whole file: nginx's `ngx_read_ahead` on
/// Linux (`read_ahead`), which widens the kernel's read-ahead for it.
pub fn advise_sequential(file: &File) -> io::Result<()> {
    use std::os::fd::AsRawFd;
    // SAFETY: posix_fadvise on a descriptor `file` keeps open for the call; no memory is read.
    let rc = unsafe { libc::posix_fadvise(file.as_raw_fd(), 0, 0, libc::POSIX_FADV_SEQUENTIAL) };
    match rc {
        0 => Ok(()),
        e => Err(io::Error::from_raw_os_error(e)),
    }
}
