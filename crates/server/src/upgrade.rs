//! Changing the binary on the fly, as nginx does: SIGUSR2 makes the running master start the
//! binary at its own path with its listening sockets inherited, named in the `NGINX`
//! environment variable (`"6;7;"`, nginx's form, so nginx's sockets are taken too); the new
//! master uses them instead of binding. The rest of the dance (the pid file renamed to
//! `.oldbin`, WINCH, HUP for a rollback, the new binary's exit) is the master's
//! (`master.rs`, or `root_master.rs` when a root master serves through a child); this module
//! holds the two ends of the hand-over and the pid file's renames, which both masters share.
//!
//! Runs on the master thread, before the workers start (reading the variable) or from the
//! signal loop (starting the new binary).

use std::ffi::OsString;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::sync::Mutex;

use crate::listen::ListenAddr;
use crate::log::{report, Level};

/// The variable nginx passes its listening sockets in.
pub const ENV: &str = "NGINX";

/// Sockets inherited from the binary that started this one, not yet taken by a `listen`: the
/// address, whether it is a datagram (`udp`) socket, and the socket. A TCP and a UDP listener
/// on one port are two sockets of one address, told apart by their type (SO_TYPE).
static INHERITED: Mutex<Vec<(ListenAddr, bool, OwnedFd)>> = Mutex::new(Vec::new());

/// The old master's pid when this process was started by one (0: not).
static OLD_MASTER: AtomicI32 = AtomicI32::new(0);

/// A new binary has this process's sockets: a unix socket's file is not removed on close.
static HANDED_OVER: AtomicBool = AtomicBool::new(false);

/// This process is the serving child of a root master (`root_master.rs`), which owns the
/// listening sockets: a unix socket's file is the master's to remove.
static UNDER_MASTER: AtomicBool = AtomicBool::new(false);

/// Takes the sockets named in `NGINX`, if the variable is set (and removes it, so nothing this
/// process starts sees it). Must run before any thread starts. Returns whether there were any.
pub fn inherit() -> bool {
    let Some(value) = std::env::var_os(ENV) else {
        return false;
    };
    // SAFETY (of remove_var): called before the process starts any thread.
    std::env::remove_var(ENV);
    let text = value.to_string_lossy().into_owned();
    report(
        Level::Notice,
        &format!("using inherited sockets from \"{text}\""),
    );
    let mut taken = INHERITED.lock().unwrap_or_else(|e| e.into_inner());
    for part in text.split([';', ':']).filter(|p| !p.is_empty()) {
        let Some(fd) = part
            .parse::<RawFd>()
            .ok()
            .filter(|&fd| fd >= 0 && is_open(fd))
        else {
            report(
                Level::Emerg,
                &format!(
                    "invalid socket number \"{part}\" in {ENV} environment variable, \
                     ignoring the rest of the variable"
                ),
            );
            break;
        };
        // SAFETY: `fd` is open (checked above) and was handed to this process to own: nothing
        // else in it knows the number.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        set_cloexec(fd.as_raw_fd(), true);
        // nginx's own sockets are non-blocking, as shoal's are; another program's may not be.
        let _ = socket2::SockRef::from(&fd).set_nonblocking(true);
        match listening_address(&fd) {
            Some((addr, udp)) => taken.push((addr, udp, fd)),
            None => report(
                Level::Alert,
                &format!("inherited socket #{part} is not a listening socket, closed"),
            ),
        }
    }
    // SAFETY: getppid cannot fail.
    OLD_MASTER.store(unsafe { libc::getppid() }, Ordering::Relaxed);
    !taken.is_empty()
}

/// An inherited socket bound to `addr`, of datagrams (`udp`) or a listening stream socket,
/// for a `listen` of the new configuration.
pub fn take(addr: &ListenAddr, udp: bool) -> Option<OwnedFd> {
    let mut taken = INHERITED.lock().unwrap_or_else(|e| e.into_inner());
    let i = taken.iter().position(|(a, u, _)| a == addr && *u == udp)?;
    Some(taken.remove(i).2)
}

/// Closes the inherited sockets no `listen` took (the new configuration dropped them).
pub fn close_unused() {
    INHERITED.lock().unwrap_or_else(|e| e.into_inner()).clear();
}

/// This process was started by a master that is still running (a binary upgrade not yet
/// finished, from this side).
pub fn old_master_running() -> bool {
    let old = OLD_MASTER.load(Ordering::Relaxed);
    // SAFETY: getppid cannot fail.
    old > 1 && unsafe { libc::getppid() } == old
}

/// Whether another process keeps this process's sockets: a new binary holds them, or this is
/// a root master's serving child.
pub fn handed_over() -> bool {
    HANDED_OVER.load(Ordering::Relaxed) || UNDER_MASTER.load(Ordering::Relaxed)
}

/// Marks this process as a root master's serving child (see [`handed_over`]).
pub fn serve_under_master() {
    UNDER_MASTER.store(true, Ordering::Relaxed);
}

/// The new binary exited: the sockets are this process's alone again.
pub fn taken_back() {
    HANDED_OVER.store(false, Ordering::Relaxed);
}

/// Starts the binary at this process's path (the file may have been replaced: that is the
/// point) with this process's arguments and `fds` inherited, named in `NGINX`. Returns its pid.
pub fn start_new_binary(fds: &[RawFd]) -> std::io::Result<u32> {
    let exe = own_path()?;
    let named: String = fds.iter().map(|fd| format!("{fd};")).collect();
    let mut cmd = std::process::Command::new(exe);
    cmd.args(std::env::args_os().skip(1)).env(ENV, named);
    let fds = fds.to_vec();
    // SAFETY: between fork and exec the closure only calls fcntl, which is async-signal-safe,
    // on fds the parent keeps open.
    unsafe {
        cmd.pre_exec(move || {
            for &fd in &fds {
                set_cloexec(fd, false);
            }
            Ok(())
        });
    }
    let child = cmd.spawn()?;
    HANDED_OVER.store(true, Ordering::Relaxed);
    Ok(child.id())
}

/// SIGUSR2: the pid file becomes `NAME.oldbin` and the binary at this process's path starts
/// with `generation`'s listening sockets; both serve until WINCH and QUIT tell one to go. With
/// an upgrade already under way (`new_binary`, or this process is the new one), the signal is
/// ignored. Returns
/// the new binary's pid and where the pid file now is; `None` (logged) when nothing changed.
pub fn change_binary(
    pid_path: &Path,
    generation: &crate::cycle::Generation,
    new_binary: Option<libc::pid_t>,
) -> Option<(libc::pid_t, PathBuf)> {
    if new_binary.is_some() || old_master_running() {
        crate::error_log!(
            Level::Crit,
            "the changing binary signal is ignored: you should shutdown or terminate \
             before either old or new binary's process"
        );
        return None;
    }
    crate::error_log!(
        Level::Notice,
        "signal 12 (SIGUSR2) received, changing binary"
    );
    let oldbin = oldbin_path(pid_path);
    if let Err(e) = std::fs::rename(pid_path, &oldbin) {
        crate::error_log!(
            Level::Alert,
            "rename() \"{}\" to \"{}\" failed {}, ignoring the changing binary signal",
            pid_path.display(),
            oldbin.display(),
            shoal_conf::os_error(&e)
        );
        return None;
    }
    let fds: Vec<RawFd> = generation
        .sockets
        .iter()
        .filter_map(|s| s.raw_fd())
        .collect();
    match start_new_binary(&fds) {
        Ok(pid) => {
            crate::error_log!(Level::Notice, "start new binary process {pid}");
            Some((pid as libc::pid_t, oldbin))
        }
        Err(e) => {
            crate::error_log!(
                Level::Alert,
                "execve() failed while executing new binary process {}",
                shoal_conf::os_error(&e)
            );
            let _ = std::fs::rename(&oldbin, pid_path);
            None
        }
    }
}

/// The new binary `pid` ended with wait `status`: logged, the sockets are this process's alone
/// again, and the pid file gets its name back. Returns where the pid file now is.
pub fn new_binary_exited(pid: libc::pid_t, status: libc::c_int, oldbin: &Path) -> PathBuf {
    if libc::WIFEXITED(status) {
        crate::error_log!(
            Level::Notice,
            "new binary process {pid} exited with code {}",
            libc::WEXITSTATUS(status)
        );
    } else {
        crate::error_log!(
            Level::Alert,
            "new binary process {pid} exited on signal {}",
            libc::WTERMSIG(status)
        );
    }
    taken_back();
    let pid_path = original_pid_path(oldbin);
    match std::fs::rename(oldbin, &pid_path) {
        Ok(()) => pid_path,
        Err(e) => {
            crate::error_log!(
                Level::Alert,
                "rename() \"{}\" back to \"{}\" failed {} after the new binary process exited",
                oldbin.display(),
                pid_path.display(),
                shoal_conf::os_error(&e)
            );
            oldbin.to_path_buf()
        }
    }
}

/// Where the pid file goes while a new binary runs: `NAME.oldbin`.
fn oldbin_path(pid: &Path) -> PathBuf {
    let mut name = pid.as_os_str().to_owned();
    name.push(".oldbin");
    PathBuf::from(name)
}

/// The pid file's own name, from its `.oldbin` one.
fn original_pid_path(oldbin: &Path) -> PathBuf {
    let bytes = oldbin.as_os_str().as_encoded_bytes();
    match bytes.strip_suffix(b".oldbin") {
        // SAFETY: cut at an ASCII boundary of an OsStr's bytes.
        Some(b) => PathBuf::from(unsafe { std::ffi::OsStr::from_encoded_bytes_unchecked(b) }),
        None => oldbin.to_path_buf(),
    }
}

/// The path of the running binary as the kernel knows it, without the ` (deleted)` it gets
/// once the file was replaced (the new binary is at the same path).
fn own_path() -> std::io::Result<PathBuf> {
    let path = std::fs::read_link("/proc/self/exe").or_else(|_| std::env::current_exe())?;
    let bytes = path.into_os_string().into_encoded_bytes();
    let bytes = bytes
        .strip_suffix(b" (deleted)")
        .map(<[u8]>::to_vec)
        .unwrap_or(bytes);
    // SAFETY: the bytes came from an OsString, cut at an ASCII boundary.
    Ok(PathBuf::from(unsafe {
        OsString::from_encoded_bytes_unchecked(bytes)
    }))
}

fn is_open(fd: RawFd) -> bool {
    // SAFETY: F_GETFD on any number only reads the descriptor table.
    unsafe { libc::fcntl(fd, libc::F_GETFD) != -1 }
}

fn set_cloexec(fd: RawFd, on: bool) {
    // SAFETY: fcntl on an fd number; a closed one fails harmlessly.
    unsafe {
        let flags = libc::fcntl(fd, libc::F_GETFD);
        if flags >= 0 {
            let flags = if on {
                flags | libc::FD_CLOEXEC
            } else {
                flags & !libc::FD_CLOEXEC
            };
            libc::fcntl(fd, libc::F_SETFD, flags);
        }
    }
}

/// The address a listening stream socket or a bound datagram socket is bound to, and whether
/// it is the datagram one (`None`: neither).
fn listening_address(fd: &OwnedFd) -> Option<(ListenAddr, bool)> {
    let sock = socket2::SockRef::from(fd);
    let ty = sock.r#type().ok()?;
    if ty == socket2::Type::DGRAM {
        let local = sock.local_addr().ok()?.as_socket()?;
        return (local.port() != 0).then_some((ListenAddr::Inet(local), true));
    }
    if ty != socket2::Type::STREAM {
        return None;
    }
    let mut listening: libc::c_int = 0;
    let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: a valid fd, and an int-sized buffer with its length.
    let r = unsafe {
        libc::getsockopt(
            fd.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_ACCEPTCONN,
            &mut listening as *mut libc::c_int as *mut libc::c_void,
            &mut len,
        )
    };
    if r != 0 || listening == 0 {
        return None;
    }
    let local = sock.local_addr().ok()?;
    let addr = match local.as_socket() {
        Some(a) => ListenAddr::Inet(a),
        None => ListenAddr::Unix(local.as_pathname()?.to_path_buf()),
    };
    Some((addr, false))
}
