//! `user`: who the process runs as. shoal's workers are threads of one process, so dropping
//! privileges applies to the whole process; it happens once the listening sockets, pid file and
//! logs are open. It keeps `CAP_NET_BIND_SERVICE`, so that a reload binds new ports below 1024
//! as nginx's master (still root) does: certbot adds `listen 443 ssl` and reloads. A reload
//! cannot bring the first `transparent` (refused: `CAP_NET_RAW` is kept only when the start had
//! one);
//! the log files are given to `user` before the drop so that reloads and SIGUSR1 open them
//! again.
//!
//! nginx's master stays root and removes its pid file at exit; ours cannot once it is `user`
//! (the file's directory is root's), so a small process forked before the drop keeps root for
//! that one job: it waits for the master to end, then removes the pid file if it is still ours.

use std::ffi::CString;

use crate::error::Error;

/// Whether the process runs as root.
pub fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() == 0 }
}

/// Whether the process started as root: it is, or it dropped to its `user` (nginx's master
/// stays root, so what it decides by `getuid() == 0` at a reload, such as the default
/// `listen` port 80, stays as at the start).
pub fn started_as_root() -> bool {
    is_root() || DROPPED.get().is_some()
}

/// Resolves `user [group]` to ids, with nginx's messages (`getpwnam("x") failed`).
pub fn lookup(user: &str, group: Option<&str>) -> Result<(libc::uid_t, libc::gid_t), Error> {
    let cuser =
        CString::new(user).map_err(|_| Error::invalid(format!("getpwnam(\"{user}\") failed")))?;
    // SAFETY: a valid NUL-terminated string; the result is read before any other getpw call.
    let pw = unsafe { libc::getpwnam(cuser.as_ptr()) };
    if pw.is_null() {
        return Err(Error::invalid(format!("getpwnam(\"{user}\") failed")));
    }
    // SAFETY: pw is non-null and points to libc's static passwd record.
    let (uid, pw_gid) = unsafe { ((*pw).pw_uid, (*pw).pw_gid) };
    let gid = match group {
        None => pw_gid,
        Some(g) => {
            let cgroup =
                CString::new(g).map_err(|_| Error::invalid(format!("getgrnam(\"{g}\") failed")))?;
            // SAFETY: as above, for the group database.
            let gr = unsafe { libc::getgrnam(cgroup.as_ptr()) };
            if gr.is_null() {
                return Err(Error::invalid(format!("getgrnam(\"{g}\") failed")));
            }
            // SAFETY: gr is non-null.
            unsafe { (*gr).gr_gid }
        }
    };
    Ok((uid, gid))
}

/// The `user [group]` this process changed to at its start, if it did.
static DROPPED: std::sync::OnceLock<(String, Option<String>)> = std::sync::OnceLock::new();

/// The `user [group]` this process changed to at its start (`None`: it did not).
pub fn dropped_to() -> Option<&'static (String, Option<String>)> {
    DROPPED.get()
}

/// Gives every open log file (error and access logs) to `user`, and makes it readable and
/// writable by its owner, as nginx's master does when it reopens logs: once the process is
/// `user`, a reload or SIGUSR1 opens the same paths again as `user`, which a file left to
/// root (0644) would refuse. Failures are logged and not fatal.
pub fn give_log_files(user: &str, group: Option<&str>) {
    let Some((uid, _)) = lookup(user, group).ok().filter(|_| is_root()) else {
        return;
    };
    let give = |path: &std::path::Path, f: &std::fs::File| {
        use std::os::fd::AsRawFd;
        use std::os::unix::fs::{MetadataExt, PermissionsExt};
        let Ok(meta) = f.metadata() else { return };
        if meta.uid() != uid {
            // SAFETY: fchown on an open file descriptor; the group is left as it is.
            if unsafe { libc::fchown(f.as_raw_fd(), uid, u32::MAX) } != 0 {
                let e = std::io::Error::last_os_error();
                crate::error_log!(
                    crate::log::Level::Alert,
                    "chown(\"{}\", {uid}) failed {}",
                    path.display(),
                    shoal_conf::os_error(&e)
                );
            }
        }
        let mode = meta.mode();
        if mode & 0o600 != 0o600 {
            let _ = f.set_permissions(std::fs::Permissions::from_mode((mode | 0o600) & 0o7777));
        }
    };
    crate::log::for_each_file(give);
    crate::http::access_log::for_each_file(give);
}

/// Drops to `user [group]` (setgid, initgroups, setuid), as nginx's workers do. The thread
/// keeps `CAP_NET_BIND_SERVICE` across setuid (the master's part of nginx: binding ports a
/// reload adds), and with `transparent` (some `proxy_bind ... transparent`) `CAP_NET_RAW` as
/// nginx's workers do; no other capability. The worker threads, started from this one
/// afterwards, inherit them.
pub fn drop_to(user: &str, group: Option<&str>, transparent: bool) -> Result<(), Error> {
    let (uid, gid) = lookup(user, group)?;
    let _ = DROPPED.set((user.to_string(), group.map(str::to_string)));
    let cuser = CString::new(user).map_err(|_| Error::invalid("bad user name"))?;
    // SAFETY: plain syscalls with valid arguments; failures are checked.
    unsafe {
        if libc::setgid(gid) != 0 {
            return Err(Error::failed(
                format_args!("setgid({gid})"),
                std::io::Error::last_os_error(),
            ));
        }
        if libc::initgroups(cuser.as_ptr(), gid) != 0 {
            return Err(Error::failed(
                format_args!("initgroups({user}, {gid})"),
                std::io::Error::last_os_error(),
            ));
        }
        if libc::prctl(libc::PR_SET_KEEPCAPS, 1, 0, 0, 0) != 0 {
            return Err(Error::failed(
                "prctl(PR_SET_KEEPCAPS, 1)",
                std::io::Error::last_os_error(),
            ));
        }
        if libc::setuid(uid) != 0 {
            return Err(Error::failed(
                format_args!("setuid({uid})"),
                std::io::Error::last_os_error(),
            ));
        }
    }
    keep_caps(transparent)
}

// The kernel's `__user_cap_header_struct` and `__user_cap_data_struct` (version 1: one 32-bit
// set of each kind, enough for the two below).
#[repr(C)]
struct CapHeader {
    version: u32,
    pid: libc::c_int,
}
#[repr(C)]
#[derive(Default)]
struct CapData {
    effective: u32,
    permitted: u32,
    inheritable: u32,
}
const LINUX_CAPABILITY_VERSION_1: u32 = 0x1998_0330;
const CAP_NET_BIND_SERVICE: u32 = 10;
const CAP_NET_RAW: u32 = 13;

/// capset(): `CAP_NET_BIND_SERVICE`, and `CAP_NET_RAW` when `transparent` (nginx's worker
/// init), effective and permitted, nothing else.
fn keep_caps(transparent: bool) -> Result<(), Error> {
    let caps = 1 << CAP_NET_BIND_SERVICE | u32::from(transparent) << CAP_NET_RAW;
    let mut header = CapHeader {
        version: LINUX_CAPABILITY_VERSION_1,
        pid: 0,
    };
    let data = CapData {
        effective: caps,
        permitted: caps,
        inheritable: 0,
    };
    // SAFETY: pointers to structs of the kernel's layout, valid for the call.
    let r = unsafe {
        libc::syscall(
            libc::SYS_capset,
            &mut header as *mut CapHeader,
            &data as *const CapData,
        )
    };
    if r != 0 {
        return Err(Error::failed("capset()", std::io::Error::last_os_error()));
    }
    Ok(())
}

/// Whether this thread may set `IP_TRANSPARENT`: root, or `CAP_NET_RAW` effective (kept by
/// [`drop_to`] when the configuration it started with had `transparent`). A reload that adds
/// the first `transparent` after the process became `user` without it cannot take it back:
/// the capability is gone for good (the master asks here and refuses that reload).
pub fn may_set_transparent() -> bool {
    if is_root() {
        return true;
    }
    let mut header = CapHeader {
        version: LINUX_CAPABILITY_VERSION_1,
        pid: 0,
    };
    let mut data = CapData::default();
    // SAFETY: pointers to structs of the kernel's layout, valid for the call.
    let r = unsafe {
        libc::syscall(
            libc::SYS_capget,
            &mut header as *mut CapHeader,
            &mut data as *mut CapData,
        )
    };
    r == 0 && data.effective & (1 << CAP_NET_RAW) != 0
}

/// Forks the pid file's keeper (see the module doc): it stays root, waits until this process
/// has exited (the pipe it reads reaches end of file), then removes `pid_path` if it still names
/// this process. Call before [`drop_to`].
pub fn keep_pid_file(pid_path: &std::path::Path) -> Result<(), Error> {
    use std::os::unix::ffi::OsStrExt;
    // Everything the child needs is prepared here: after fork it only makes syscalls.
    let path = CString::new(pid_path.as_os_str().as_bytes())
        .map_err(|_| Error::invalid(format!("invalid pid file name \"{}\"", pid_path.display())))?;
    let mine = format!("{}\n", std::process::id()).into_bytes();
    let mut fds = [0 as libc::c_int; 2];
    // SAFETY: fds is valid for two ints.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(Error::failed("pipe2()", std::io::Error::last_os_error()));
    }
    let (read_end, write_end) = (fds[0], fds[1]);
    // SAFETY: the child calls only async-signal-safe functions (dup2, close_range/close, open,
    // read, unlink, _exit) on memory prepared before the fork, so it is sound even if other
    // threads exist.
    unsafe {
        match libc::fork() {
            -1 => {
                libc::close(read_end);
                libc::close(write_end);
                Err(Error::failed("fork()", std::io::Error::last_os_error()))
            }
            0 => {
                // The pipe's read end becomes fd 3; everything else is closed so that the
                // keeper holds no listening socket, log or terminal open.
                libc::dup2(read_end, 3);
                if libc::syscall(libc::SYS_close_range, 4u32, u32::MAX, 0u32) != 0 {
                    for fd in 4..65536 {
                        libc::close(fd);
                    }
                }
                let null = libc::open(c"/dev/null".as_ptr(), libc::O_RDWR);
                if null >= 0 {
                    libc::dup2(null, 0);
                    libc::dup2(null, 1);
                    libc::dup2(null, 2);
                    if null > 3 {
                        libc::close(null);
                    }
                }
                let mut b = [0u8; 1];
                loop {
                    let n = libc::read(3, b.as_mut_ptr().cast(), 1);
                    if n == 0 || (n < 0 && *libc::__errno_location() != libc::EINTR) {
                        break;
                    }
                }
                // Remove the file only if it still names the master: a new instance may
                // already have written its own.
                let fd = libc::open(path.as_ptr(), libc::O_RDONLY);
                if fd >= 0 {
                    let mut text = [0u8; 32];
                    let n = libc::read(fd, text.as_mut_ptr().cast(), text.len());
                    libc::close(fd);
                    if n >= 0 && text[..n as usize] == mine[..] {
                        libc::unlink(path.as_ptr());
                    }
                }
                libc::_exit(0);
            }
            _ => {
                libc::close(read_end);
                // The write end stays open (close-on-exec) for as long as this process lives.
                Ok(())
            }
        }
    }
}
