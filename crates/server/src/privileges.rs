//! `user`: who the process runs as. shoal's workers are threads of one process, so dropping
//! privileges applies to the whole process; it happens once the listening sockets, pid file and
//! logs are open. After it, a reload cannot bind new privileged ports (the error says so).

use std::ffi::CString;

/// Whether the process runs as root.
pub fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() == 0 }
}

/// Resolves `user [group]` to ids, with nginx's messages (`getpwnam("x") failed`).
pub fn lookup(user: &str, group: Option<&str>) -> Result<(libc::uid_t, libc::gid_t), String> {
    let cuser = CString::new(user).map_err(|_| format!("getpwnam(\"{user}\") failed"))?;
    // SAFETY: a valid NUL-terminated string; the result is read before any other getpw call.
    let pw = unsafe { libc::getpwnam(cuser.as_ptr()) };
    if pw.is_null() {
        return Err(format!("getpwnam(\"{user}\") failed"));
    }
    // SAFETY: pw is non-null and points to libc's static passwd record.
    let (uid, pw_gid) = unsafe { ((*pw).pw_uid, (*pw).pw_gid) };
    let gid = match group {
        None => pw_gid,
        Some(g) => {
            let cgroup = CString::new(g).map_err(|_| format!("getgrnam(\"{g}\") failed"))?;
            // SAFETY: as above, for the group database.
            let gr = unsafe { libc::getgrnam(cgroup.as_ptr()) };
            if gr.is_null() {
                return Err(format!("getgrnam(\"{g}\") failed"));
            }
            // SAFETY: gr is non-null.
            unsafe { (*gr).gr_gid }
        }
    };
    Ok((uid, gid))
}

/// Drops to `user [group]` (setgid, initgroups, setuid), as nginx's workers do.
pub fn drop_to(user: &str, group: Option<&str>) -> Result<(), String> {
    let (uid, gid) = lookup(user, group)?;
    let cuser = CString::new(user).map_err(|_| "bad user name".to_string())?;
    // SAFETY: plain syscalls with valid arguments; failures are checked.
    unsafe {
        if libc::setgid(gid) != 0 {
            return Err(format!(
                "setgid({gid}) failed {}",
                shoal_conf::os_error(&std::io::Error::last_os_error())
            ));
        }
        if libc::initgroups(cuser.as_ptr(), gid) != 0 {
            return Err(format!(
                "initgroups({user}, {gid}) failed {}",
                shoal_conf::os_error(&std::io::Error::last_os_error())
            ));
        }
        if libc::setuid(uid) != 0 {
            return Err(format!(
                "setuid({uid}) failed {}",
                shoal_conf::os_error(&std::io::Error::last_os_error())
            ));
        }
    }
    Ok(())
}
