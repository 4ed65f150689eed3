//! The master: owns the configuration, the listening sockets, the pid file and the signals,
//! and starts the workers. It runs on the process's main thread.
//!
//! Startup follows nginx's order, so every failure is reported to the terminal with exit code 1
//! before the process detaches: configuration → error logs → listening sockets → daemon → pid
//! file → `user` → workers. Then signals: HUP reload, QUIT graceful stop, TERM/INT fast stop,
//! USR1 reopen logs. A reload validates everything (configuration, log files, new sockets)
//! before switching; on any failure the old generation keeps serving.
//!
//! Started as root, the process splits as nginx's does: this thread's startup runs in a root
//! master that never serves (`root_master.rs`), and [`serve`] (the workers, their signals) in
//! the child it forks, which changes to `user` (nginx's default `nobody` without the line). Not
//! with `user root` (nothing to drop) nor `master_process off`: one process, root.

use std::path::PathBuf;
use std::sync::atomic::AtomicU64;
use std::sync::Arc;
use std::thread::JoinHandle;

use tokio::signal::unix::{signal, SignalKind};
use tokio::sync::watch;

use crate::config::{self, Config, Source};
use crate::cycle::Generation;
use crate::error::Error;
use crate::log::{report, ErrorLog, ErrorLogConf, Level, Target};
use crate::worker::{self, Command, Stop};

/// How shoal was started (the command line, resolved).
#[derive(Clone, Debug)]
pub struct Options {
    /// `-p`, with a trailing slash removed.
    pub prefix: PathBuf,
    /// `-c`, resolved against the prefix.
    pub conf_file: PathBuf,
    /// The built-in configuration's text, when there is no file.
    pub builtin: Option<&'static str>,
    /// `-g`.
    pub globals: Option<String>,
    /// `-e`: the error log before (and unless) the configuration names one.
    pub error_log: Option<Target>,
}

impl Options {
    /// Reads and checks the configuration.
    pub fn load(&self) -> Result<Config, shoal_conf::Error> {
        config::load(&Source {
            file: &self.conf_file,
            builtin: self.builtin,
            prefix: &self.prefix,
            globals: self.globals.as_deref(),
        })
    }

    /// nginx's compiled-in error log, or `-e`.
    fn default_error_log(&self) -> ErrorLogConf {
        ErrorLogConf {
            target: self
                .error_log
                .clone()
                .unwrap_or_else(|| Target::File(self.prefix.join("logs/error.log"))),
            level: Level::Error,
        }
    }

    /// The error logs of a configuration: its `error_log` lines, else the default.
    pub(crate) fn error_logs(&self, conf: &Config) -> Vec<ErrorLogConf> {
        if conf.error_logs.is_empty() {
            vec![self.default_error_log()]
        } else {
            conf.error_logs.clone()
        }
    }
}

/// The checks `-t` makes beyond the configuration itself, as nginx's test mode does: the pid
/// file and the error log files can be opened (they are created, as nginx creates them).
pub fn check_for_test(conf: &Config) -> Result<(), shoal_conf::Error> {
    // nginx's `-t` creates the pid file if it is missing (empty; a running server's is left
    // as it is): a pid path that cannot be written fails the test, not the next start.
    use std::os::unix::fs::OpenOptionsExt;
    let pid_path = conf.pid_path();
    std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o644)
        .open(&pid_path)
        .map_err(|e| {
            let e = Error::failed(format_args!("open() \"{}\"", pid_path.display()), e);
            shoal_conf::Error::new(e.to_string(), None)
        })?;
    ErrorLog::open(&conf.error_logs)
        .map(|_| ())
        .map_err(|e| shoal_conf::Error::new(e, None))
}

/// Prints a configuration's `[warn]` lines.
pub fn report_warnings(conf: &Config) {
    print_warnings(&conf.warnings);
}

fn print_warnings(warnings: &[crate::conf::Warning]) {
    for w in warnings {
        match &w.span {
            Some(span) => report(Level::Warn, &format!("{} in {}", w.message, span)),
            None => report(Level::Warn, &w.message),
        }
    }
}

/// Prints why a configuration was refused: the warnings read before its error, then the
/// error, as nginx logs them while it reads.
pub fn report_refused(e: &shoal_conf::Error) {
    print_warnings(&crate::config::take_failed_warnings());
    report(Level::Emerg, &e.to_string());
}

struct WorkerHandle {
    /// Which thread this is: never reused, so the end of a retired worker is not taken for
    /// the end of the one started later with its index.
    serial: u64,
    tx: watch::Sender<Command>,
    thread: JoinHandle<()>,
}

struct Master {
    opts: Options,
    /// A root master's child: the master reloads, reopens logs as root and changes binaries;
    /// this process only serves, and WINCH (the master's QUIT while a new binary serves) is
    /// its drained stop.
    child: bool,
    generation: Arc<Generation>,
    workers: Vec<WorkerHandle>,
    /// Where each worker thread says it ended (its serial), however it ended.
    exits: tokio::sync::mpsc::UnboundedSender<u64>,
    exited: Option<tokio::sync::mpsc::UnboundedReceiver<u64>>,
    /// The next worker thread's serial.
    serials: u64,
    /// Workers retired by a reload that lowered `worker_processes`, still finishing.
    retired: Vec<WorkerHandle>,
    counter: Arc<AtomicU64>,
    /// The pid file (renamed to `.oldbin` while a new binary runs).
    pid_path: PathBuf,
    /// The new binary started by SIGUSR2, while it runs.
    new_binary: Option<libc::pid_t>,
    /// SIGWINCH stopped the workers (a new binary serves); SIGHUP brings them back.
    noaccepting: bool,
}

/// Runs shoal until it is told to stop. Returns the process exit code.
pub fn run(opts: Options) -> i32 {
    // Until the signal loop's handlers exist, a signal waits instead of acting by default
    // (SIGHUP's default is to terminate): nginx installs its handlers before anything else.
    mask_signals(libc::SIG_BLOCK);
    let conf = match opts.load() {
        Ok(c) => c,
        Err(e) => {
            report_refused(&e);
            return 1;
        }
    };
    report_warnings(&conf);
    // The startup error log: nginx reports an unopenable default log and goes on; an explicit
    // `error_log` that cannot be opened is fatal.
    let log = match ErrorLog::open(&opts.error_logs(&conf)) {
        Ok(l) => l,
        Err(e) if conf.error_logs.is_empty() => {
            report(Level::Alert, &format!("could not open error log file: {e}"));
            ErrorLog::open(&[ErrorLogConf {
                target: Target::Stderr,
                level: Level::Error,
            }])
            .expect("stderr always opens")
        }
        Err(e) => {
            report(Level::Emerg, &e);
            return 1;
        }
    };
    log.install();
    crate::process_init::set_rlimit_nofile(conf.main.worker_rlimit_nofile);
    let conf = Arc::new(conf);
    // A binary upgrade: the old master's sockets, named in `NGINX`, are taken instead of bound.
    let inherited = crate::upgrade::inherit();
    let generation = match Generation::new(1, conf.clone(), None) {
        Ok(g) => Arc::new(g),
        Err(e) => {
            if e == *crate::cycle::STILL_COULD_NOT_BIND {
                report(Level::Emerg, &e);
            }
            return 1;
        }
    };
    crate::upgrade::close_unused();
    // Started by an old master, this one stays its child (as nginx's new binary does).
    if conf.main.daemon() && !inherited {
        if let Err(e) = daemonize() {
            report(Level::Emerg, &e);
            return 1;
        }
        crate::log::set_use_stderr(false);
    }
    let pid_path = conf.pid_path();
    if let Err(e) = write_pid(&pid_path) {
        report(Level::Emerg, &e);
        return 1;
    }
    // Cache directories are made before privileges go, and given to the workers' user (nginx's
    // `ngx_create_paths`).
    if let Some(h) = &conf.http {
        let owner = conf
            .main
            .user
            .as_ref()
            .filter(|_| crate::privileges::is_root())
            .and_then(|(u, g)| crate::privileges::lookup(u, g.as_deref()).ok());
        crate::http::proxy_cache::zone::make_dirs(&h.cache_paths, owner);
    }
    if let Err(e) = crate::process_init::apply_to_process(&conf.main.process, None) {
        report(Level::Emerg, &e);
        let _ = std::fs::remove_file(&pid_path);
        return 1;
    }
    // As root (with `user`, or nginx's default `nobody`): nginx's root master, serving through
    // a child.
    if conf.main.root_master() {
        return crate::root_master::run(opts, generation, pid_path);
    }
    serve(opts, generation, pid_path, None)
}

/// Serves `generation` with the workers until a signal says to stop; returns the exit code.
/// `ready`: this process is a root master's child (`root_master.rs`), told the workers run by
/// a byte written there; the pid file is then the master's.
pub(crate) fn serve(
    opts: Options,
    generation: Arc<Generation>,
    pid_path: PathBuf,
    ready: Option<std::os::fd::OwnedFd>,
) -> i32 {
    use std::io::Write as _;
    let child = ready.is_some();
    // Started: from now on messages go to the error log only, and so does fd 2 (nginx).
    crate::log::redirect_stderr();
    crate::log::set_use_stderr(false);
    let (exits, exited) = tokio::sync::mpsc::unbounded_channel();
    let mut master = Master {
        opts,
        child,
        generation,
        workers: Vec::new(),
        exits,
        exited: Some(exited),
        serials: 0,
        retired: Vec::new(),
        counter: Arc::new(AtomicU64::new(0)),
        pid_path,
        new_binary: None,
        noaccepting: false,
    };
    // Pool threads start after daemon(): threads do not survive fork.
    if let Err(e) = crate::pools::configure(
        &master.generation.config.main.thread_pools,
        master.generation.config.main.workers(),
    ) {
        report(Level::Emerg, &e);
        if !child {
            let _ = std::fs::remove_file(&master.pid_path);
        }
        return 1;
    }
    let zones = crate::http::proxy_cache::zone::configure(
        master
            .generation
            .config
            .http
            .as_ref()
            .map_or(&[][..], |h| &h.cache_paths[..]),
    );
    let _ = master.generation.cache_zones.set(zones);
    master.resize_workers();
    if master.workers.is_empty() {
        // (nginx's worker that cannot start exits with 2, a fatal error.)
        crate::error_log!(Level::Emerg, "no worker could be started");
        if !child {
            let _ = std::fs::remove_file(&master.pid_path);
        }
        return 2;
    }
    crate::error_log!(
        Level::Notice,
        "shoal/{} started, {} worker(s)",
        crate::VERSION,
        master.workers.len()
    );
    if let Some(ready) = ready {
        let _ = std::fs::File::from(ready).write_all(b"1");
    }
    let code = master.signals();
    if !child {
        let _ = std::fs::remove_file(&master.pid_path);
    }
    code
}

impl Master {
    /// Starts worker `index`; false (logged) when no thread can be made (`RLIMIT_NPROC`,
    /// memory): the process serves with the workers it has.
    fn spawn_worker(&mut self, index: usize) -> bool {
        match self.start_worker(index) {
            Ok(w) => {
                self.workers.push(w);
                true
            }
            Err(e) => {
                crate::error_log!(
                    Level::Alert,
                    "pthread_create() failed {}",
                    shoal_conf::os_error(&e)
                );
                false
            }
        }
    }

    fn start_worker(&mut self, index: usize) -> std::io::Result<WorkerHandle> {
        self.serials += 1;
        let serial = self.serials;
        let (tx, rx) = watch::channel(Command {
            generation: self.generation.clone(),
            stop: Stop::Run,
        });
        let counter = self.counter.clone();
        let exits = self.exits.clone();
        let thread = std::thread::Builder::new()
            .name(format!("shoal-worker-{index}"))
            .spawn(move || {
                /// Tells the master the thread ended, also when it unwinds from a panic.
                struct Ended(u64, tokio::sync::mpsc::UnboundedSender<u64>);
                impl Drop for Ended {
                    fn drop(&mut self) {
                        let _ = self.1.send(self.0);
                    }
                }
                let _ended = Ended(serial, exits);
                worker::run(index, rx, counter)
            })?;
        Ok(WorkerHandle { serial, tx, thread })
    }

    /// A worker thread ended. Unless it was told to stop, it died (a panic outside any
    /// connection task): logged at `[alert]` and started again with the current
    /// configuration, as nginx's master respawns a worker process. The other workers and
    /// their connections are not touched.
    fn worker_exited(&mut self, serial: u64) {
        // A retired worker (not among the current ones) ends as it was told.
        let Some(index) = self.workers.iter().position(|w| w.serial == serial) else {
            return;
        };
        let w = &self.workers[index];
        // A worker told to stop ends as told. (The message comes from the thread's last
        // moments: it may not have finished yet, and is joined below.)
        if w.tx.borrow().stop != Stop::Run {
            return;
        }
        let fresh = match self.start_worker(index) {
            Ok(w) => w,
            Err(e) => {
                crate::error_log!(
                    Level::Alert,
                    "worker {index} exited unexpectedly and cannot be started again: \
                     pthread_create() failed {}",
                    shoal_conf::os_error(&e)
                );
                return;
            }
        };
        let dead = std::mem::replace(&mut self.workers[index], fresh);
        let why = match dead.thread.join() {
            Ok(()) => "it returned".to_string(),
            Err(panic) => match (panic.downcast_ref::<&str>(), panic.downcast_ref::<String>()) {
                (Some(m), _) => format!("it panicked: {m}"),
                (_, Some(m)) => format!("it panicked: {m}"),
                _ => "it panicked".to_string(),
            },
        };
        crate::error_log!(
            Level::Alert,
            "worker {index} exited unexpectedly ({why}), starting it again"
        );
    }

    /// Starts or retires workers to match `worker_processes`.
    fn resize_workers(&mut self) {
        let want = self.generation.config.main.workers();
        while self.workers.len() < want {
            let index = self.workers.len();
            if !self.spawn_worker(index) {
                break;
            }
        }
        while self.workers.len() > want {
            let w = self.workers.pop().expect("len > want >= 1");
            let _ = w.tx.send(Command {
                generation: self.generation.clone(),
                stop: Stop::Graceful,
            });
            self.retired.push(w);
        }
        self.retired.retain(|w| !w.thread.is_finished());
    }

    fn broadcast(&self, stop: Stop) {
        for w in self.workers.iter().chain(self.retired.iter()) {
            let generation = w.tx.borrow().generation.clone();
            let _ = w.tx.send(Command {
                generation: if stop == Stop::Run {
                    self.generation.clone()
                } else {
                    generation
                },
                stop,
            });
        }
    }

    /// The signal loop. Returns the exit code.
    fn signals(&mut self) -> i32 {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("the master's runtime");
        rt.block_on(async {
            let mut hup = signal(SignalKind::hangup()).expect("SIGHUP handler");
            let mut quit = signal(SignalKind::quit()).expect("SIGQUIT handler");
            let mut term = signal(SignalKind::terminate()).expect("SIGTERM handler");
            let mut int = signal(SignalKind::interrupt()).expect("SIGINT handler");
            let mut usr1 = signal(SignalKind::user_defined1()).expect("SIGUSR1 handler");
            let mut usr2 = signal(SignalKind::user_defined2()).expect("SIGUSR2 handler");
            let mut winch = signal(SignalKind::window_change()).expect("SIGWINCH handler");
            let mut chld = signal(SignalKind::child()).expect("SIGCHLD handler");
            let mut pool_report = tokio::time::interval(std::time::Duration::from_secs(10));
            // The handlers are in place: what arrived while starting is delivered now. The
            // workers were started with these signals blocked, so they all come here.
            mask_signals(libc::SIG_UNBLOCK);
            let mut exited = self.exited.take().expect("the signal loop runs once");
            loop {
                tokio::select! {
                    Some(serial) = exited.recv() => self.worker_exited(serial),
                    _ = hup.recv() => self.hangup(),
                    _ = chld.recv() => self.reap_new_binary(),
                    _ = usr1.recv() => {
                        crate::error_log!(Level::Notice, "reopening logs");
                        crate::log::reopen();
                        crate::http::access_log::reopen();
                    }
                    _ = usr2.recv() => self.change_binary(),
                    _ = winch.recv() => {
                        if !self.child {
                            self.stop_accepting();
                            continue;
                        }
                        crate::error_log!(Level::Notice, "gracefully shutting down");
                        self.broadcast(Stop::Drain);
                        break;
                    }
                    _ = pool_report.tick() => crate::pools::report(),
                    _ = quit.recv() => {
                        crate::error_log!(Level::Notice, "gracefully shutting down");
                        // Another master serves on the same sockets (a binary upgrade or its
                        // rollback): idle keep-alive connections get one more request, as on
                        // WINCH, since the other one is there to take the next.
                        let other = self.new_binary.is_some() || crate::upgrade::old_master_running();
                        self.broadcast(if other { Stop::Drain } else { Stop::Graceful });
                        break;
                    }
                    _ = term.recv() => { crate::error_log!(Level::Notice, "exiting"); self.broadcast(Stop::Fast); break; }
                    _ = int.recv() => { crate::error_log!(Level::Notice, "exiting"); self.broadcast(Stop::Fast); break; }
                }
            }
        });
        // A child's copies of the master's sockets: closed now, so that a socket the master's
        // next configuration dropped stops listening while this child finishes.
        if self.child {
            self.generation.sockets.iter().for_each(|s| s.close());
        }
        for w in self.workers.drain(..).chain(self.retired.drain(..)) {
            let _ = w.thread.join();
        }
        crate::error_log!(Level::Notice, "exit");
        0
    }

    /// SIGHUP: a reload; or, when SIGWINCH stopped the workers while a new binary runs, the
    /// workers started again on the configuration they had (a rollback: nginx does not read
    /// the file then either).
    fn hangup(&mut self) {
        if self.child {
            return;
        }
        if self.noaccepting && self.new_binary.is_some() {
            crate::error_log!(
                Level::Notice,
                "signal 1 (SIGHUP) received, starting the worker processes again"
            );
            self.start_accepting();
            return;
        }
        self.reload();
    }

    /// SIGUSR2 (`upgrade::change_binary`); a root master's child leaves it to the master.
    fn change_binary(&mut self) {
        if self.child {
            return;
        }
        if let Some((pid, oldbin)) =
            crate::upgrade::change_binary(&self.pid_path, &self.generation, self.new_binary)
        {
            self.new_binary = Some(pid);
            self.pid_path = oldbin;
        }
    }

    /// SIGCHLD: if the new binary exited, the pid file gets its name back and, if WINCH had
    /// stopped the workers, they start again: this master serves alone once more.
    fn reap_new_binary(&mut self) {
        let Some(pid) = self.new_binary else {
            return;
        };
        let mut status: libc::c_int = 0;
        // SAFETY: waitpid on our own child, with a valid status pointer.
        if unsafe { libc::waitpid(pid, &mut status, libc::WNOHANG) } != pid {
            return;
        }
        self.new_binary = None;
        self.pid_path = crate::upgrade::new_binary_exited(pid, status, &self.pid_path);
        if self.noaccepting {
            self.start_accepting();
        }
    }

    /// SIGWINCH while a new binary runs: the workers stop accepting and finish gracefully
    /// (idle keep-alive connections answer one more request first); the master stays, so
    /// HUP can bring them back. Without a new binary it is a terminal's resize, ignored.
    fn stop_accepting(&mut self) {
        if self.new_binary.is_none() {
            return;
        }
        crate::error_log!(
            Level::Notice,
            "signal 28 (SIGWINCH) received, stop accepting connections"
        );
        self.noaccepting = true;
        self.broadcast(Stop::Drain);
    }

    /// Fresh workers on the current configuration, the drained ones left to finish.
    fn start_accepting(&mut self) {
        self.noaccepting = false;
        self.retired.append(&mut self.workers);
        self.resize_workers();
    }

    /// SIGHUP: a new generation from the configuration file, or the old one stays.
    fn reload(&mut self) {
        let Some(generation) = next_generation(&self.opts, &self.generation, |conf| {
            // This process started as one (`user root`, `master_process off`, or not root) and
            // stays one; the split into a root master and a child as `user` (written, or
            // nginx's default `nobody`) is made at a start.
            if conf.main.root_master() {
                crate::error_log!(
                    Level::Warn,
                    "\"user\" takes effect at the next start: shoal started as one process \
                     serves as root until then"
                );
            }
        }) else {
            return;
        };
        let id = generation.id;
        if !crate::log::use_stderr() {
            crate::log::redirect_stderr();
        }
        move_pid(&mut self.pid_path, generation.config.pid_path());
        if let Err(e) = crate::pools::configure(
            &generation.config.main.thread_pools,
            generation.config.main.workers(),
        ) {
            report(Level::Emerg, &e);
            return;
        }
        let zones = crate::http::proxy_cache::zone::configure(
            generation
                .config
                .http
                .as_ref()
                .map_or(&[][..], |h| &h.cache_paths[..]),
        );
        let _ = generation.cache_zones.set(zones);
        crate::process_init::keep_dumpable(&generation.config.main.process);
        reapply_process(&generation, &self.generation);
        let old = std::mem::replace(&mut self.generation, generation);
        old.close_sockets_not_in(&self.generation);
        self.broadcast_generation();
        self.resize_workers();
        crate::error_log!(Level::Notice, "reconfigured (generation {id})");
    }

    fn broadcast_generation(&self) {
        for w in &self.workers {
            let _ = w.tx.send(Command {
                generation: self.generation.clone(),
                stop: Stop::Run,
            });
        }
    }
}

/// A reload's first half, the same for both masters: the configuration read again (a refusal
/// logged, `None`: the old one serves on), `check`ed, its error log opened and installed, and a
/// generation made on it (its sockets bound).
pub(crate) fn next_generation(
    opts: &Options,
    current: &Arc<Generation>,
    check: impl FnOnce(&Config),
) -> Option<Arc<Generation>> {
    crate::error_log!(Level::Notice, "signal 1 (SIGHUP) received, reconfiguring");
    let conf = match opts.load() {
        Ok(c) => c,
        Err(e) => {
            report_refused(&e);
            return None;
        }
    };
    report_warnings(&conf);
    check(&conf);
    let log = match ErrorLog::open(&opts.error_logs(&conf)) {
        Ok(l) => l,
        Err(e) => {
            report(Level::Emerg, &e);
            return None;
        }
    };
    let generation = match Generation::new(current.id + 1, Arc::new(conf), Some(current)) {
        Ok(g) => Arc::new(g),
        Err(e) => {
            report(Level::Emerg, &e);
            return None;
        }
    };
    log.install();
    Some(generation)
}

/// The pid file written where a new configuration's `pid` names, the old one removed.
pub(crate) fn move_pid(pid_path: &mut PathBuf, new_pid: PathBuf) {
    if new_pid == *pid_path {
        return;
    }
    match write_pid(&new_pid) {
        Ok(()) => {
            let _ = std::fs::remove_file(&*pid_path);
            *pid_path = new_pid;
        }
        Err(e) => report(Level::Alert, &e),
    }
}

/// The process's limits and working directory from a new generation (set again at a reload,
/// as nginx's new workers set them).
pub(crate) fn reapply_process(new: &Generation, old: &Generation) {
    let main = &new.config.main;
    crate::process_init::set_rlimit_nofile(main.worker_rlimit_nofile);
    if let Err(e) =
        crate::process_init::apply_to_process(&main.process, Some(&old.config.main.process))
    {
        crate::error_log!(Level::Alert, "{e}, the working directory stays");
    }
}

/// The signals the master handles.
pub(crate) const HANDLED: [libc::c_int; 7] = [
    libc::SIGHUP,
    libc::SIGQUIT,
    libc::SIGTERM,
    libc::SIGINT,
    libc::SIGUSR1,
    libc::SIGUSR2,
    libc::SIGWINCH,
];

/// Blocks or unblocks [`HANDLED`] for the calling thread (threads started meanwhile inherit it).
pub(crate) fn mask_signals(how: libc::c_int) {
    // SAFETY: the set is initialised by sigemptyset before use; the signal numbers are valid.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        for s in HANDLED {
            libc::sigaddset(&mut set, s);
        }
        libc::pthread_sigmask(how, &set, std::ptr::null_mut());
    }
}

/// Writes the pid file (`PID\n`, as nginx).
pub(crate) fn write_pid(path: &PathBuf) -> Result<(), Error> {
    use std::io::Write as _;
    use std::os::unix::fs::OpenOptionsExt;
    // 0644 as nginx's, whatever the umask (0 once daemonized).
    std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o644)
        .open(path)
        .and_then(|mut f| f.write_all(format!("{}\n", std::process::id()).as_bytes()))
        .map_err(|e| Error::failed(format_args!("open() \"{}\"", path.display()), e))
}

/// Detaches from the terminal: fork (the parent exits 0), setsid, stdin/stdout to /dev/null.
/// Must run before any thread is started.
fn daemonize() -> Result<(), Error> {
    // SAFETY: called while the process is single-threaded (no worker exists yet), so fork is
    // safe; the parent exits at once without running destructors.
    unsafe {
        match libc::fork() {
            -1 => return Err(Error::failed("fork()", std::io::Error::last_os_error())),
            0 => {}
            _ => libc::_exit(0),
        }
        if libc::setsid() == -1 {
            return Err(Error::failed("setsid()", std::io::Error::last_os_error()));
        }
        libc::umask(0);
        let null = libc::open(c"/dev/null".as_ptr(), libc::O_RDWR);
        if null >= 0 {
            libc::dup2(null, 0);
            libc::dup2(null, 1);
            if null > 2 {
                libc::close(null);
            }
        }
    }
    Ok(())
}
