//! `user`: who serves. Started as root with `user`, shoal is two processes as nginx is: a
//! root master (`root_master.rs`) that reads configurations, binds, owns the pid file and the
//! logs' files, and a serving child that changes to `user` ([`drop_to`]) before it starts any
//! thread. The child keeps no capability (the master binds every port, below 1024 too), but
//! `CAP_NET_RAW` when its configuration has `transparent`, as nginx's workers.
//!
//! The log files are given to `user` by the master (as nginx's master does when it opens
//! them), so that the child can open them again on SIGUSR1.

use std::ffi::CString;

use crate::error::Error;

/// Whether the process runs as root.
pub fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() == 0 }
}

/// Whether the process started as root: it is, or it is a root master's child that changed
/// to its `user` (what nginx decides by the master's `getuid() == 0`, such as the default
/// `listen` port 80, is decided as root).
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

/// The `user [group]` this process (a root master's child) changed to, if it did.
static DROPPED: std::sync::OnceLock<(String, Option<String>)> = std::sync::OnceLock::new();

/// The `user [group]` this process changed to at its start (`None`: it did not).
pub fn dropped_to() -> Option<&'static (String, Option<String>)> {
    DROPPED.get()
}

/// Gives every open log file (error and access logs) to `user`, and makes it readable and
/// writable by its owner, as nginx's master does when it reopens logs: the serving child, as
/// `user`, opens the same paths again on SIGUSR1, which a file left to root (0644) would
/// refuse. Failures are logged and not fatal.
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

/// Changes to `user [group]` (setgid, initgroups, setuid), as nginx's workers do: every
/// capability goes with root, but `CAP_NET_RAW` with `transparent` (some `proxy_bind ...
/// transparent`), kept for `IP_TRANSPARENT`. Call before any thread starts: the threads
/// started afterwards inherit the credentials.
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
        if transparent && libc::prctl(libc::PR_SET_KEEPCAPS, 1, 0, 0, 0) != 0 {
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
    if transparent {
        keep_net_raw()?;
    }
    Ok(())
}

// The kernel's `__user_cap_header_struct` and `__user_cap_data_struct` (version 1: one 32-bit
// set of each kind, enough for the one below).
#[repr(C)]
struct CapHeader {
    version: u32,
    pid: libc::c_int,
}
#[repr(C)]
struct CapData {
    effective: u32,
    permitted: u32,
    inheritable: u32,
}
const LINUX_CAPABILITY_VERSION_1: u32 = 0x1998_0330;
const CAP_NET_RAW: u32 = 13;

/// capset(): `CAP_NET_RAW` effective and permitted, nothing else (after setuid with
/// `PR_SET_KEEPCAPS`, which kept the permitted set).
fn keep_net_raw() -> Result<(), Error> {
    let caps = 1 << CAP_NET_RAW;
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
