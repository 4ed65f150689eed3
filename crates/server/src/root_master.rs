//! The root master: shoal started as root is two processes, as nginx is. This one
//! stays root and never serves: it reads every configuration (keys that only root may read,
//! includes), binds the listening sockets (ports below 1024 too), owns the pid file and the
//! log files, and forks the **child** that serves (`master::serve`: the worker threads and
//! their runtimes), which changes to `user` first (nginx's default `nobody` without the line).
//!
//! Signals: HUP reads the new configuration here, forks a child on it and, once that child
//! runs, tells the old one to drain (a bad configuration is an `[emerg]` and the old child
//! serves on); USR1 reopens the logs here, gives them to `user` and tells the child to
//! reopen them; USR2 is the binary upgrade (`upgrade.rs`, the new binary inherits the
//! sockets); QUIT, TERM and INT go to the children (QUIT as WINCH, a drained stop, while another
//! master serves on the same sockets); WINCH while a new binary runs stops the child, HUP then
//! starts one again; a child that dies unasked is replaced.
//!
//! Respawn: the current generation always has one serving child, as nginx's master respawns
//! its workers. One that dies unasked is replaced at once, or after [`PAUSE`] if it lived less
//! than that (a child that cannot start is not forked in a tight loop), and so is a replacement
//! that ends before it serves, until one serves. A reload's child that ends before it serves
//! is the reload's failure: the old child serves on.
//!
//! The one thing to know: `fork()` copies only the calling thread, so this process must never
//! start a thread or a runtime. Reading a configuration and binding start none; the thread
//! pools, the cache zones' threads and the workers are started by the child. [`fork_child`]
//! checks it, and signals are taken with `sigwaitinfo()`, not a runtime.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::cycle::Generation;
use crate::error::Error;
use crate::log::{report, Level};
use crate::master::{move_pid, next_generation, reapply_process, Options};

/// A serving child and whether it is still wanted.
struct Child {
    pid: libc::pid_t,
    /// Told to stop (a reload replaced it, WINCH, QUIT, TERM): its end is expected.
    stopping: bool,
    /// When it said it serves.
    started: Instant,
    /// The shared memory it was forked with, kept mapped here while it lives: a zone the next
    /// configuration drops is still the old child's, and a lock it holds there when it dies
    /// is released by [`release_shared`].
    _regions: Vec<std::sync::Arc<shoal_io::shm::Region>>,
}

impl Child {
    fn new(pid: libc::pid_t) -> Child {
        Child {
            pid,
            stopping: false,
            started: Instant::now(),
            _regions: shoal_io::shm::live(),
        }
    }
}

/// How long a child must have served not to be taken for one that cannot start, and the
/// pause before such a child's replacement.
const PAUSE: Duration = Duration::from_secs(1);

struct RootMaster {
    opts: Options,
    generation: Arc<Generation>,
    pid_path: PathBuf,
    children: Vec<Child>,
    /// The new binary started by SIGUSR2, while it runs.
    new_binary: Option<libc::pid_t>,
    /// SIGWINCH stopped the child (a new binary serves); SIGHUP starts one again.
    noaccepting: bool,
    /// QUIT, TERM or INT: the master ends with its last child.
    exiting: bool,
    /// When to start a child for the current generation, which has none serving.
    respawn: Option<Instant>,
}

/// Runs the root master with the first generation, bound, and the pid file written; returns
/// the exit code. The signals of `master::HANDLED` are blocked.
pub(crate) fn run(opts: Options, generation: Arc<Generation>, pid_path: PathBuf) -> i32 {
    give_logs(&generation);
    block(libc::SIGCHLD, libc::SIG_BLOCK);
    let mut m = RootMaster {
        opts,
        generation: generation.clone(),
        pid_path,
        children: Vec::new(),
        new_binary: None,
        noaccepting: false,
        exiting: false,
        respawn: None,
    };
    // Before the first child: the counters every child shares.
    crate::status::share();
    match fork_child(&m.opts, &generation, None, &m.pid_path) {
        Ok(pid) => m.children.push(Child::new(pid)),
        Err(e) => {
            report(Level::Emerg, &e);
            let _ = std::fs::remove_file(&m.pid_path);
            return 1;
        }
    }
    // Started: from now on messages go to the error log only, and so does fd 2 (nginx).
    crate::log::redirect_stderr();
    crate::log::set_use_stderr(false);
    while !(m.exiting && m.children.is_empty()) {
        if let Some(sig) = wait_signal(m.respawn) {
            m.signal(sig);
        }
        m.respawn_when_due();
    }
    crate::error_log!(Level::Notice, "exit");
    let _ = std::fs::remove_file(&m.pid_path);
    0
}

impl RootMaster {
    fn signal(&mut self, sig: libc::c_int) {
        match sig {
            libc::SIGCHLD => self.reap(),
            libc::SIGHUP if self.exiting => {}
            libc::SIGHUP if self.noaccepting && self.new_binary.is_some() => {
                crate::error_log!(
                    Level::Notice,
                    "signal 1 (SIGHUP) received, starting the worker processes again"
                );
                self.noaccepting = false;
                self.start_child();
            }
            libc::SIGHUP => self.reload(),
            libc::SIGUSR1 => {
                crate::error_log!(Level::Notice, "reopening logs");
                crate::log::reopen();
                crate::http::access_log::reopen();
                give_logs(&self.generation);
                self.tell(libc::SIGUSR1, |_| true);
            }
            libc::SIGUSR2 => {
                if let Some((pid, oldbin)) =
                    crate::upgrade::change_binary(&self.pid_path, &self.generation, self.new_binary)
                {
                    self.new_binary = Some(pid);
                    self.pid_path = oldbin;
                }
            }
            libc::SIGWINCH if self.new_binary.is_some() && !self.exiting => {
                crate::error_log!(
                    Level::Notice,
                    "signal 28 (SIGWINCH) received, stop accepting connections"
                );
                self.noaccepting = true;
                self.stop_children(libc::SIGWINCH);
            }
            libc::SIGQUIT => {
                crate::error_log!(Level::Notice, "gracefully shutting down");
                self.exiting = true;
                // Another master serves on the same sockets (a binary upgrade or its
                // rollback): the child drains (WINCH), idle keep-alive connections getting
                // one more request, since the other one is there to take the next.
                let other = self.new_binary.is_some() || crate::upgrade::old_master_running();
                self.stop_children(if other { libc::SIGWINCH } else { libc::SIGQUIT });
            }
            libc::SIGTERM | libc::SIGINT => {
                crate::error_log!(Level::Notice, "exiting");
                self.exiting = true;
                self.tell(libc::SIGTERM, |_| true);
                for c in &mut self.children {
                    c.stopping = true;
                }
            }
            _ => {}
        }
    }

    /// Sends `sig` to the children `which` selects.
    fn tell(&self, sig: libc::c_int, which: impl Fn(&Child) -> bool) {
        for c in self.children.iter().filter(|c| which(c)) {
            // SAFETY: kill on our own child's pid (not yet reaped, so not reused).
            unsafe { libc::kill(c.pid, sig) };
        }
    }

    /// Tells the serving children to stop with `sig` (QUIT graceful, WINCH drained); those
    /// already stopping go on as they were told.
    fn stop_children(&mut self, sig: libc::c_int) {
        self.tell(sig, |c| !c.stopping);
        for c in &mut self.children {
            c.stopping = true;
        }
    }

    /// A child on the current generation (at a rollback, or in place of one that died); if it
    /// ends before it serves, another one after [`PAUSE`].
    fn start_child(&mut self) {
        self.respawn = None;
        match fork_child(&self.opts, &self.generation, None, &self.pid_path) {
            Ok(pid) => self.children.push(Child::new(pid)),
            Err(e) => {
                crate::error_log!(
                    Level::Alert,
                    "{e}, starting a new one in {} s",
                    PAUSE.as_secs()
                );
                self.respawn = Some(Instant::now() + PAUSE);
            }
        }
    }

    /// The respawn's time come: a child, unless one serves or none is wanted.
    fn respawn_when_due(&mut self) {
        let Some(at) = self.respawn else { return };
        if Instant::now() < at {
            return;
        }
        self.respawn = None;
        if !self.exiting && !self.noaccepting && self.children.iter().all(|c| c.stopping) {
            self.start_child();
        }
    }

    /// SIGCHLD: every ended child reaped. A serving child that ended unasked is replaced, as
    /// nginx's master respawns a worker (after [`PAUSE`] if it lived less than that); the new
    /// binary's end gives the pid file its name back.
    fn reap(&mut self) {
        loop {
            let mut status: libc::c_int = 0;
            // SAFETY: waitpid with a valid status pointer.
            let pid = unsafe { libc::waitpid(-1, &mut status, libc::WNOHANG) };
            if pid <= 0 {
                return;
            }
            if self.new_binary == Some(pid) {
                self.new_binary = None;
                self.pid_path = crate::upgrade::new_binary_exited(pid, status, &self.pid_path);
                if self.noaccepting && !self.exiting {
                    self.noaccepting = false;
                    self.start_child();
                }
                continue;
            }
            let Some(i) = self.children.iter().position(|c| c.pid == pid) else {
                continue;
            };
            let child = self.children.remove(i);
            log_exit(pid, status);
            release_shared(pid);
            if child.stopping || self.exiting || self.noaccepting {
                continue;
            }
            if child.started.elapsed() < PAUSE {
                crate::error_log!(
                    Level::Alert,
                    "worker process {pid} served less than {} s, starting a new one in {0} s",
                    PAUSE.as_secs()
                );
                self.respawn = Some(Instant::now() + PAUSE);
            } else {
                self.respawn = Some(Instant::now());
            }
        }
    }

    /// SIGHUP: the configuration read again as root; a child forked on it and, once it runs,
    /// the old one told to drain. On any failure the old child serves on.
    fn reload(&mut self) {
        let Some(generation) = next_generation(&self.opts, &self.generation, |_| {}) else {
            return;
        };
        let id = generation.id;
        crate::log::redirect_stderr();
        let config = &generation.config;
        if self.new_binary.is_none() {
            move_pid(&mut self.pid_path, config.pid_path());
        }
        give_logs(&generation);
        if let Some(h) = &config.http {
            crate::http::proxy_cache::zone::make_dirs(&h.cache_paths, user_ids(&generation));
        }
        reapply_process(&generation, &self.generation);
        let pid = match fork_child(
            &self.opts,
            &generation,
            Some(&self.generation),
            &self.pid_path,
        ) {
            Ok(pid) => pid,
            Err(e) => {
                crate::error_log!(Level::Alert, "{e}, the old configuration serves on");
                return;
            }
        };
        // The new child already accepts on the same sockets: the old one drains (WINCH), idle
        // keep-alive connections taking one more request, so that a request sent as one
        // closes is not lost (a single process hands them to the new generation instead).
        self.stop_children(libc::SIGWINCH);
        self.children.push(Child::new(pid));
        self.respawn = None;
        let old = std::mem::replace(&mut self.generation, generation);
        old.close_sockets_not_in(&self.generation);
        crate::error_log!(Level::Notice, "reconfigured (generation {id})");
    }
}

/// nginx's line for a worker's end: `worker process PID exited with code N` (notice) or
/// `... exited on signal N` (alert).
fn log_exit(pid: libc::pid_t, status: libc::c_int) {
    if libc::WIFSIGNALED(status) {
        let core = if libc::WCOREDUMP(status) {
            " (core dumped)"
        } else {
            ""
        };
        crate::error_log!(
            Level::Alert,
            "worker process {pid} exited on signal {}{core}",
            libc::WTERMSIG(status)
        );
    } else {
        crate::error_log!(
            Level::Notice,
            "worker process {pid} exited with code {}",
            libc::WEXITSTATUS(status)
        );
    }
}

/// What a reaped child held in the memory children share: a zone's lock it died holding
/// (nginx's line), and its counters' lines.
fn release_shared(pid: libc::pid_t) {
    for zone in shoal_io::shm::force_unlock(pid as u32) {
        crate::error_log!(
            Level::Alert,
            "shared memory zone \"{zone}\" was locked by {pid}"
        );
    }
    crate::status::forget_process(pid as u32);
}

/// The `user` of a generation's configuration as ids (`None`: none, or unknown).
fn user_ids(generation: &Generation) -> Option<(libc::uid_t, libc::gid_t)> {
    let (user, group) = generation.config.main.user.as_ref()?;
    crate::privileges::lookup(user, group.as_deref()).ok()
}

/// Gives the open log files to the generation's `user`, so that its child opens them again on
/// SIGUSR1 (nginx's master does the same).
fn give_logs(generation: &Generation) {
    if let Some((user, group)) = &generation.config.main.user {
        crate::privileges::give_log_files(user, group.as_deref());
    }
}

/// Forks the child serving `generation` and waits until its workers run (it writes a byte) or
/// it ends (the pipe's end of file). `old`: the generation the master had until now, whose
/// sockets the new one does not keep are closed in the child (the old child still has its own).
fn fork_child(
    opts: &Options,
    generation: &Arc<Generation>,
    old: Option<&Arc<Generation>>,
    pid_path: &std::path::Path,
) -> Result<libc::pid_t, Error> {
    let threads = std::fs::read_dir("/proc/self/task").map_or(1, |d| d.count());
    if threads != 1 {
        // A bug of ours: fork() would copy locks other threads hold, and none of them.
        return Err(Error::invalid(format!(
            "the master has {threads} threads: no child can be forked safely"
        )));
    }
    let mut fds = [0 as libc::c_int; 2];
    // SAFETY: fds is valid for two ints.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(Error::failed("pipe2()", std::io::Error::last_os_error()));
    }
    let master = std::process::id() as libc::pid_t;
    // SAFETY: pipe2 returned two open fds that nothing else owns.
    let (read_end, write_end) =
        unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    // SAFETY: the process is single-threaded (checked above), so the child is a whole copy of
    // it and may run anything; it never returns into the master's code (it exits).
    match unsafe { libc::fork() } {
        -1 => Err(Error::failed("fork()", std::io::Error::last_os_error())),
        0 => {
            drop(read_end);
            let code = child(opts, generation, old, pid_path, write_end, master);
            std::process::exit(code)
        }
        pid => {
            drop(write_end);
            if !ready_in_time(&read_end) {
                // The master must not hang on a child that hangs: it is taken as started (its
                // end, if it comes, is reaped as any child's).
                crate::error_log!(
                    Level::Alert,
                    "child process {pid} has not started serving in {} s, taken as started",
                    READY_WAIT.as_secs()
                );
                return Ok(pid);
            }
            let mut byte = [0u8; 1];
            let n = loop {
                // SAFETY: a read into a one-byte buffer from our open pipe.
                let n = unsafe { libc::read(read_end.as_raw_fd(), byte.as_mut_ptr().cast(), 1) };
                if n >= 0
                    || std::io::Error::last_os_error().kind() != std::io::ErrorKind::Interrupted
                {
                    break n;
                }
            };
            if n == 1 {
                crate::error_log!(Level::Notice, "start worker process {pid}");
                return Ok(pid);
            }
            let mut status = 0;
            // SAFETY: waitpid on the child just forked, with a valid status pointer.
            unsafe { libc::waitpid(pid, &mut status, 0) };
            log_exit(pid, status);
            Err(Error::invalid(format!(
                "worker process {pid} exited before it served"
            )))
        }
    }
}

/// How long the master waits for a new child to say it serves.
const READY_WAIT: std::time::Duration = std::time::Duration::from_secs(30);

/// Whether the child's pipe has its byte or its end of file within [`READY_WAIT`].
fn ready_in_time(read_end: &OwnedFd) -> bool {
    let deadline = std::time::Instant::now() + READY_WAIT;
    loop {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        let mut pfd = libc::pollfd {
            fd: read_end.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: poll on one valid pollfd.
        let n = unsafe { libc::poll(&mut pfd, 1, left.as_millis() as libc::c_int) };
        if n > 0 {
            return true;
        }
        if n == 0 {
            return false;
        }
        if std::io::Error::last_os_error().kind() != std::io::ErrorKind::Interrupted {
            return true;
        }
    }
}

/// The child's life: its credentials, then `master::serve`. Returns its exit code.
fn child(
    opts: &Options,
    generation: &Arc<Generation>,
    old: Option<&Arc<Generation>>,
    pid_path: &std::path::Path,
    ready: OwnedFd,
    master: libc::pid_t,
) -> i32 {
    crate::upgrade::serve_under_master();
    block(libc::SIGCHLD, libc::SIG_UNBLOCK);
    if let Some(old) = old {
        old.close_sockets_not_in(generation);
    }
    let main = &generation.config.main;
    if let Some((user, group)) = &main.user {
        if let Err(e) =
            crate::privileges::drop_to(user, group.as_deref(), main.transparent.is_some())
        {
            report(Level::Emerg, &e);
            return 1;
        }
    }
    crate::process_init::keep_dumpable(&main.process);
    // A child that outlived its master could be neither reloaded nor stopped through the pid
    // file: the master's end, however it comes (SIGKILL), is its graceful stop. Set after the
    // change of user, which clears it.
    // SAFETY: prctl and getppid with integer arguments only.
    unsafe {
        libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGQUIT);
        if libc::getppid() != master {
            return 0;
        }
    }
    crate::master::serve(
        opts.clone(),
        generation.clone(),
        pid_path.to_path_buf(),
        Some(ready),
    )
}

/// Blocks or unblocks one signal for this (the only) thread.
fn block(sig: libc::c_int, how: libc::c_int) {
    // SAFETY: the set is initialised by sigemptyset before use; the signal number is valid.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, sig);
        libc::pthread_sigmask(how, &set, std::ptr::null_mut());
    }
}

/// The next signal of `master::HANDLED` or SIGCHLD (all blocked, so they wait for this), or
/// `None` once `until` has come.
fn wait_signal(until: Option<Instant>) -> Option<libc::c_int> {
    // SAFETY: the set is initialised by sigemptyset before use.
    let set = unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        for s in crate::master::HANDLED.into_iter().chain([libc::SIGCHLD]) {
            libc::sigaddset(&mut set, s);
        }
        set
    };
    loop {
        let sig = match until {
            // SAFETY: a valid set; sigwaitinfo accepts a null info pointer.
            None => unsafe { libc::sigwaitinfo(&set, std::ptr::null_mut()) },
            Some(at) => {
                let left = at.saturating_duration_since(Instant::now());
                if left.is_zero() {
                    return None;
                }
                let timeout = libc::timespec {
                    tv_sec: left.as_secs() as libc::time_t,
                    tv_nsec: left.subsec_nanos() as libc::c_long,
                };
                // SAFETY: a valid set and timespec; a null info pointer is accepted.
                unsafe { libc::sigtimedwait(&set, std::ptr::null_mut(), &timeout) }
            }
        };
        if sig > 0 {
            return Some(sig);
        }
    }
}
