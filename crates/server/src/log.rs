//! The error log: `error_log FILE|stderr [LEVEL]`, several allowed, in nginx's line format
//! (`2026/11/21 10:00:00 [error] 1234#1240: *45 message, client: ..., server: ...`).
//!
//! One global sink set (the main context's), swapped on reload; `error_log` in `http`, `server`
//! and `location` gives that level its own set, which replaces the main one for what a request
//! logs there (nginx's `ngx_set_connection_log`): the connection's task carries the set of
//! the location it is in (a task-local: [`scoped`], [`set_scope`]), and a line goes to it. Targets are files,
//! `stderr`, `syslog:` ([`crate::syslog`]) and `memory:SIZE` (nginx's cyclic buffer read with a
//! debugger: nothing here reads it, so nothing is kept). Files are reopened in place on SIGUSR1.
//! A line is formatted once and written with one `write(2)` per file (O_APPEND), as nginx does:
//! the error log is not buffered, so a line is never lost on a crash. A line below every
//! sink's level costs one atomic load. A request's bytes are written as they came, as nginx
//! writes them (a path with `\xff` in it is that byte, not U+FFFD): text made for a line with
//! `shoal_http::log_text` carries them, and the writer gives them back ([`raw_bytes`]).

use std::fmt;
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, RwLock};

use shoal_conf::{Directive, Error};

use crate::conf::{err, Args, Builder, Command, Ctx, Scope};

pub static DIRECTIVES: &[Command] = &[Command::new(
    "error_log",
    Ctx::MAIN.or(Ctx::HSL).or(Ctx::SS),
    Args::ONE_OR_MORE,
    set_error_log,
)];

/// nginx's severity levels, most severe first.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
#[repr(u8)]
pub enum Level {
    Emerg = 1,
    Alert,
    Crit,
    Error,
    Warn,
    Notice,
    Info,
    Debug,
}

impl Level {
    pub fn name(self) -> &'static str {
        match self {
            Level::Emerg => "emerg",
            Level::Alert => "alert",
            Level::Crit => "crit",
            Level::Error => "error",
            Level::Warn => "warn",
            Level::Notice => "notice",
            Level::Info => "info",
            Level::Debug => "debug",
        }
    }

    pub fn parse(s: &str) -> Option<Level> {
        Some(match s {
            "emerg" => Level::Emerg,
            "alert" => Level::Alert,
            "crit" => Level::Crit,
            "error" => Level::Error,
            "warn" => Level::Warn,
            "notice" => Level::Notice,
            "info" => Level::Info,
            "debug" => Level::Debug,
            _ => return None,
        })
    }
}

/// Where an error log goes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Target {
    Stderr,
    File(PathBuf),
    Syslog(crate::syslog::SyslogConf),
    /// `memory:SIZE`.
    Memory,
}

/// One `error_log` directive.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ErrorLogConf {
    pub target: Target,
    pub level: Level,
}

fn set_error_log(b: &mut Builder, d: &Directive, s: &mut Scope<'_>) -> Result<(), Error> {
    let conf = parse_error_log(b, d)?;
    if let Scope::Main = s {
        b.error_logs.push(conf);
        return Ok(());
    }
    let sink = Sink::open(&conf).map_err(|m| err(d, m))?;
    CONTEXT_MAX.fetch_max(conf.level as u8, Ordering::Relaxed);
    // A stream level's, or an http location's.
    let slot = if matches!(s, Scope::Stream(_) | Scope::StreamServer(_)) {
        &mut crate::stream::level(s)
            .expect("a stream scope has a stream level")
            .error_log
    } else {
        &mut crate::http::loc_conf(s).error_log
    };
    let log = slot.get_or_insert_with(|| {
        Arc::new(ErrorLog {
            sinks: Vec::with_capacity(1),
        })
    });
    let sink = Arc::new(sink);
    let mut all = CONTEXT_SINKS.lock().unwrap_or_else(|e| e.into_inner());
    all.retain(|w| w.strong_count() > 0);
    all.push(Arc::downgrade(&sink));
    drop(all);
    Arc::make_mut(log).sinks.push(sink);
    Ok(())
}

fn parse_error_log(b: &Builder, d: &Directive) -> Result<ErrorLogConf, Error> {
    let file = &d.args[0].value;
    let target = if file == "stderr" {
        Target::Stderr
    } else if let Some(args) = file.strip_prefix("syslog:") {
        Target::Syslog(crate::syslog::SyslogConf::parse(args).map_err(|m| err(d, m))?)
    } else if let Some(size) = file.strip_prefix("memory:") {
        if crate::conf::parse_size(size).is_none_or(|n| n == 0) {
            return Err(err(d, format!("invalid buffer size \"{size}\"")));
        }
        Target::Memory
    } else {
        Target::File(b.full_path(file))
    };
    // nginx's `ngx_log_set_levels`: one level, and any of the `debug_*` groups (which mean
    // `debug` here: shoal's debug lines are not grouped).
    const DEBUG_GROUPS: &[&str] = &[
        "debug_core",
        "debug_alloc",
        "debug_mutex",
        "debug_event",
        "debug_http",
        "debug_mail",
        "debug_stream",
    ];
    let mut level = None;
    let mut debug = false;
    for a in &d.args[1..] {
        let v = a.value.as_str();
        if let Some(l) = Level::parse(v) {
            if level.is_some() {
                return Err(err(d, format!("duplicate log level \"{v}\"")));
            }
            level = Some(l);
        } else if DEBUG_GROUPS.contains(&v) {
            debug = true;
        } else {
            return Err(err(d, format!("invalid log level \"{v}\"")));
        }
    }
    let level = match (level, debug) {
        (_, true) => Level::Debug,
        (Some(l), false) => l,
        (None, false) => Level::Error,
    };
    Ok(ErrorLogConf { target, level })
}

/// One open target.
#[derive(Debug)]
struct Sink {
    level: Level,
    target: Target,
    /// A file target's file, replaced in place on SIGUSR1.
    file: RwLock<Option<File>>,
    syslog: Option<crate::syslog::Peer>,
}

impl Sink {
    /// Opens a target: nginx's message for a file that cannot be opened.
    fn open(c: &ErrorLogConf) -> crate::error::Result<Sink> {
        let file = match &c.target {
            Target::File(p) => Some(open_append(p).map_err(|e| {
                crate::error::Error::failed(format_args!("open() \"{}\"", p.display()), e)
            })?),
            _ => None,
        };
        let syslog = match &c.target {
            Target::Syslog(s) => Some(crate::syslog::Peer::new(s.clone())),
            _ => None,
        };
        Ok(Sink {
            level: c.level,
            target: c.target.clone(),
            file: RwLock::new(file),
            syslog,
        })
    }

    /// Reopens a file target; the old file stays on failure (returned as nginx's message).
    fn reopen(&self) -> crate::error::Result<()> {
        let Target::File(p) = &self.target else {
            return Ok(());
        };
        let f = open_append(p).map_err(|e| {
            crate::error::Error::failed(format_args!("open() \"{}\"", p.display()), e)
        })?;
        *self.file.write().unwrap_or_else(|e| e.into_inner()) = Some(f);
        Ok(())
    }

    /// Writes a line (a syslog one carries the whole error log line after its header,
    /// without the line feed).
    fn write(&self, level: Level, line: &[u8]) {
        if level > self.level {
            return;
        }
        match &self.target {
            Target::Stderr => {
                let _ = std::io::stderr().lock().write_all(line);
            }
            Target::File(_) => {
                if let Some(f) = &*self.file.read().unwrap_or_else(|e| e.into_inner()) {
                    let _ = (&*f).write_all(line);
                }
            }
            Target::Syslog(_) => {
                if let Some(peer) = &self.syslog {
                    let mut msg = Vec::with_capacity(line.len() + 64);
                    peer.header(level as u8 - 1, &mut msg);
                    msg.extend_from_slice(line.strip_suffix(b"\n").unwrap_or(line));
                    let _ = peer.send(&msg);
                }
            }
            Target::Memory => {}
        }
    }
}

/// The open error logs of one level.
#[derive(Clone, Debug)]
pub struct ErrorLog {
    sinks: Vec<Arc<Sink>>,
}

static MAX_LEVEL: AtomicU8 = AtomicU8::new(Level::Notice as u8);
/// The most verbose level of any `error_log` below the main context (raised as they are
/// read, never lowered: a reload that drops one only costs formatting lines nobody takes).
static CONTEXT_MAX: AtomicU8 = AtomicU8::new(0);
static CURRENT: RwLock<Option<Arc<ErrorLog>>> = RwLock::new(None);

thread_local! {
    /// The error log scope of the connection task being polled on this worker thread: a
    /// pointer to its [`Scoped`]'s cell, set for the length of each poll (null between polls
    /// and outside a connection's task).
    static SCOPE: std::cell::Cell<*const ScopeCell> = const { std::cell::Cell::new(std::ptr::null()) };
}

type ScopeCell = std::cell::RefCell<Option<Arc<ErrorLog>>>;

/// A connection's task with its own error log scope (see [`scoped`]). Its cell is made
/// current for each poll (and for the inner future's drop) and the one before it put back
/// after: two stores of a thread-local pointer per poll, where a tokio task-local swapped
/// the value in and out.
pub struct Scoped<F> {
    scope: ScopeCell,
    fut: std::mem::ManuallyDrop<F>,
}

/// Puts back the scope current before a poll (or drop), however that ends.
struct Restore(*const ScopeCell);

impl Drop for Restore {
    fn drop(&mut self) {
        SCOPE.with(|c| c.set(self.0));
    }
}

impl<F> Scoped<F> {
    /// Makes this scope current until the guard is dropped.
    fn enter(&self) -> Restore {
        Restore(SCOPE.with(|c| c.replace(&self.scope)))
    }
}

impl<F: std::future::Future> std::future::Future for Scoped<F> {
    type Output = F::Output;
    fn poll(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<F::Output> {
        // SAFETY: `fut` is structurally pinned: never moved out of `self` (it is dropped in
        // place by `Drop`), and `Scoped` has no `Unpin` impl of its own.
        let this = unsafe { self.get_unchecked_mut() };
        let _restore = this.enter();
        // SAFETY: as above; `scope` is a different field, only read through the pointer.
        unsafe { std::pin::Pin::new_unchecked(&mut *this.fut) }.poll(cx)
    }
}

impl<F> Drop for Scoped<F> {
    fn drop(&mut self) {
        // What the task's futures log as they are dropped goes to its scope, as at a poll.
        let _restore = self.enter();
        // SAFETY: dropped once, here; never used again.
        unsafe { std::mem::ManuallyDrop::drop(&mut self.fut) };
    }
}

/// Runs a connection's task with its own error log scope (the main log until [`set_scope`]
/// says otherwise), made current at each poll.
pub fn scoped<F: std::future::Future>(f: F) -> Scoped<F> {
    scoped_in(None, f)
}

/// [`scoped`], starting with `scope` (a connection's task handing over to another).
pub fn scoped_in<F: std::future::Future>(scope: Option<Arc<ErrorLog>>, f: F) -> Scoped<F> {
    Scoped {
        scope: std::cell::RefCell::new(scope),
        fut: std::mem::ManuallyDrop::new(f),
    }
}

/// Runs `f` on the current task's scope cell, if a connection's task is being polled.
fn with_scope<T>(f: impl FnOnce(&ScopeCell) -> T) -> Option<T> {
    let p = SCOPE.with(|c| c.get());
    // SAFETY: a non-null pointer is set only while the `Scoped` it points into is being
    // polled or dropped on this thread (pinned, so in place), and put back before that ends.
    (!p.is_null()).then(|| f(unsafe { &*p }))
}

/// The current task's error log scope (`None`: the main log, or outside a connection's task).
pub fn scope() -> Option<Arc<ErrorLog>> {
    with_scope(|s| s.borrow().clone()).flatten()
}

/// The error log for what the current task logs from now on (`None`: the main one). Outside
/// a connection's task, nothing changes.
pub fn set_scope(log: Option<&Arc<ErrorLog>>) {
    with_scope(|s| {
        let mut s = s.borrow_mut();
        let same = match (&*s, log) {
            (None, None) => true,
            (Some(a), Some(b)) => Arc::ptr_eq(a, b),
            _ => false,
        };
        if !same {
            *s = log.cloned();
        }
    });
}

/// Every sink of an `error_log` below the main context still alive, for SIGUSR1.
static CONTEXT_SINKS: std::sync::Mutex<Vec<std::sync::Weak<Sink>>> =
    std::sync::Mutex::new(Vec::new());

/// Opens a log file for appending (created 0644, close-on-exec), as nginx opens its logs.
pub(crate) fn open_append(path: &std::path::Path) -> std::io::Result<File> {
    OpenOptions::new()
        .append(true)
        .create(true)
        .mode(0o644)
        .custom_flags(libc::O_CLOEXEC)
        .open(path)
}

impl ErrorLog {
    /// Opens every target. Fails with nginx's message for the first file that cannot be opened.
    pub fn open(confs: &[ErrorLogConf]) -> crate::error::Result<ErrorLog> {
        let mut sinks = Vec::with_capacity(confs.len());
        for c in confs {
            sinks.push(Arc::new(Sink::open(c)?));
        }
        Ok(ErrorLog { sinks })
    }

    /// Makes this the process's error log.
    pub fn install(self) {
        let max = self
            .sinks
            .iter()
            .map(|s| s.level)
            .max()
            .unwrap_or(Level::Emerg);
        MAX_LEVEL.store(max as u8, Ordering::Relaxed);
        *CURRENT.write().unwrap_or_else(|e| e.into_inner()) = Some(Arc::new(self));
    }

    /// Whether any target writes to standard error.
    pub fn has_stderr(&self) -> bool {
        self.sinks.iter().any(|s| s.target == Target::Stderr)
    }

    fn write(&self, level: Level, line: &[u8]) {
        for s in &self.sinks {
            s.write(level, line);
        }
    }
}

/// Every sink of the error logs: the main one's, then every level's still alive.
fn all_sinks() -> Vec<Arc<Sink>> {
    let current = CURRENT.read().unwrap_or_else(|e| e.into_inner()).clone();
    let mut all: Vec<Arc<Sink>> = current.iter().flat_map(|c| c.sinks.clone()).collect();
    all.extend(
        CONTEXT_SINKS
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .filter_map(std::sync::Weak::upgrade),
    );
    all
}

/// Reopens every file of the error logs, the main one's and every level's (SIGUSR1). Targets
/// that fail keep their old file and the failure is logged.
pub fn reopen() {
    let failures: Vec<_> = all_sinks()
        .iter()
        .filter_map(|s| s.reopen().err())
        .collect();
    if !use_stderr() {
        redirect_stderr();
    }
    for f in failures {
        log(Level::Alert, None, format_args!("{f}"));
    }
}

/// Calls `f` with every open file of the error logs (the main one's and every level's).
pub(crate) fn for_each_file(mut f: impl FnMut(&std::path::Path, &File)) {
    for s in all_sinks() {
        if let (Target::File(p), Some(file)) = (
            &s.target,
            &*s.file.read().unwrap_or_else(|e| e.into_inner()),
        ) {
            f(p, file);
        }
    }
}

/// Points the process's standard error at the current error log's first file, as nginx's
/// `ngx_log_redirect_stderr` does once started: whatever still writes to fd 2 (a panic message)
/// lands in the log, and the terminal or pipe that started shoal is no longer held open. Nothing
/// happens when a target is `stderr` itself.
pub fn redirect_stderr() {
    let current = CURRENT.read().unwrap_or_else(|e| e.into_inner()).clone();
    let Some(current) = current else { return };
    if current.has_stderr() {
        return;
    }
    let files: Vec<_> = current.sinks.iter().map(|s| s.file.read()).collect();
    let first = files
        .iter()
        .find_map(|f| f.as_ref().ok().and_then(|f| f.as_ref()));
    if let Some(f) = first {
        use std::os::fd::AsRawFd;
        // SAFETY: dup2 of an open file onto fd 2; fd 2 is replaced atomically.
        if unsafe { libc::dup2(f.as_raw_fd(), libc::STDERR_FILENO) } == -1 {
            let e = std::io::Error::last_os_error();
            log(
                Level::Alert,
                None,
                format_args!("dup2(STDERR) failed {}", shoal_conf::os_error(&e)),
            );
        }
    }
}

/// Whether messages are still shown on the terminal (see [`set_use_stderr`]).
pub fn use_stderr() -> bool {
    USE_STDERR.load(Ordering::Relaxed)
}

static USE_STDERR: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(true);

/// Whether messages are also shown on the terminal as `shoal: [LEVEL] ...` (until startup is
/// complete, as nginx's `ngx_use_stderr`).
pub fn set_use_stderr(on: bool) {
    USE_STDERR.store(on, Ordering::Relaxed);
}

/// A message about the configuration or the process (startup, reload, signals): to the error
/// log, and to the terminal as nginx prints it there (`shoal: [emerg] ...`) while there is one.
pub fn report(level: Level, msg: &str) {
    let current = CURRENT.read().unwrap_or_else(|e| e.into_inner()).clone();
    match current {
        None => {
            if USE_STDERR.load(Ordering::Relaxed) {
                eprintln!("shoal: [{}] {msg}", level.name());
            }
        }
        Some(current) => {
            log(level, None, format_args!("{msg}"));
            if USE_STDERR.load(Ordering::Relaxed) && !current.has_stderr() && level <= Level::Warn {
                eprintln!("shoal: [{}] {msg}", level.name());
            }
        }
    }
}

/// Whether a message at `level` would be written anywhere.
#[inline]
pub fn enabled(level: Level) -> bool {
    level as u8 <= MAX_LEVEL.load(Ordering::Relaxed)
        || level as u8 <= CONTEXT_MAX.load(Ordering::Relaxed)
}

thread_local! {
    /// This thread's id, with the pid it was read in: a root master's forked child
    /// (`root_master.rs`) is the master's thread copied, and must not print its id.
    static TID: std::cell::Cell<(u32, i64)> = const { std::cell::Cell::new((0, 0)) };
}

/// The calling thread's id, read once per process.
fn tid(pid: u32) -> i64 {
    TID.with(|t| match t.get() {
        (p, tid) if p == pid => tid,
        _ => {
            // SAFETY: gettid has no preconditions and cannot fail.
            let tid = unsafe { libc::syscall(libc::SYS_gettid) };
            t.set((pid, tid));
            tid
        }
    })
}

/// Writes one line: `TIME [LEVEL] PID#TID: [*CONN ]MESSAGE`.
pub fn log(level: Level, conn: Option<u64>, msg: fmt::Arguments<'_>) {
    if !enabled(level) {
        return;
    }
    let current = match scope() {
        Some(scoped) => Some(scoped),
        None => CURRENT.read().unwrap_or_else(|e| e.into_inner()).clone(),
    };
    let mut line = String::with_capacity(128);
    use std::fmt::Write as _;
    let pid = std::process::id();
    let _ = write!(
        line,
        "{} [{}] {}#{}: ",
        local_time(),
        level.name(),
        pid,
        tid(pid)
    );
    if let Some(c) = conn {
        let _ = write!(line, "*{c} ");
    }
    let _ = line.write_fmt(msg);
    line.push('\n');
    let line = raw_bytes(&line);
    match current {
        Some(log) => log.write(level, &line),
        None => {
            let _ = std::io::stderr().lock().write_all(&line);
        }
    }
}

/// A formatted line as the bytes it is written as: the bytes of a request that
/// `shoal_http::log_text` carried as characters are themselves again (nginx writes a
/// request's bytes unchanged).
fn raw_bytes(line: &str) -> std::borrow::Cow<'_, [u8]> {
    // Such a character is encoded F4 8F BC..BF xx.
    if memchr::memchr(0xf4, line.as_bytes()).is_none() {
        return std::borrow::Cow::Borrowed(line.as_bytes());
    }
    let mut out = Vec::with_capacity(line.len());
    for c in line.chars() {
        match u32::from(c).checked_sub(shoal_http::LOG_BYTE_BASE) {
            Some(b @ 0..=0xff) => out.push(b as u8),
            _ => out.extend_from_slice(c.encode_utf8(&mut [0; 4]).as_bytes()),
        }
    }
    std::borrow::Cow::Owned(out)
}

/// `2026/11/21 10:00:00` in local time, as nginx's error log prints it.
pub fn local_time() -> String {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as libc::time_t)
        .unwrap_or(0);
    // SAFETY: an all-zero tm is a valid value for localtime_r to overwrite.
    let mut tm: libc::tm = unsafe { std::mem::zeroed() };
    // SAFETY: both pointers are valid for the duration of the call.
    unsafe { libc::localtime_r(&now, &mut tm) };
    format!(
        "{:04}/{:02}/{:02} {:02}:{:02}:{:02}",
        tm.tm_year + 1900,
        tm.tm_mon + 1,
        tm.tm_mday,
        tm.tm_hour,
        tm.tm_min,
        tm.tm_sec
    )
}

/// `error_log!(Level::Error, "...", args)`: a line without a connection.
#[macro_export]
macro_rules! error_log {
    ($level:expr, $($arg:tt)*) => {
        if $crate::log::enabled($level) {
            $crate::log::log($level, None, format_args!($($arg)*))
        }
    };
}

/// `conn_log!(Level::Info, conn_number, "...", args)`: a line about connection `*N`.
#[macro_export]
macro_rules! conn_log {
    ($level:expr, $conn:expr, $($arg:tt)*) => {
        if $crate::log::enabled($level) {
            $crate::log::log($level, Some($conn), format_args!($($arg)*))
        }
    };
}

#[cfg(test)]
mod raw_tests {
    #[test]
    fn a_requests_bytes_are_written_as_they_came() {
        for b in [
            &b"GET /a HTTP/1.1"[..],
            b"/\xff\x80z",
            "caf\u{e9} \u{10ff0a}".as_bytes(),
        ] {
            let line = format!("request: \"{}\"\n", shoal_http::log_text(b));
            let mut want = b"request: \"".to_vec();
            want.extend_from_slice(b);
            want.extend_from_slice(b"\"\n");
            assert_eq!(super::raw_bytes(&line), want);
        }
    }
}

#[cfg(test)]
mod scope_tests {
    use super::*;
    use std::cell::Cell;
    use std::future::Future;
    use std::rc::Rc;

    fn log() -> Arc<ErrorLog> {
        Arc::new(ErrorLog { sinks: Vec::new() })
    }

    fn is(s: Option<Arc<ErrorLog>>, want: &Arc<ErrorLog>) -> bool {
        s.is_some_and(|s| Arc::ptr_eq(&s, want))
    }

    #[test]
    fn each_task_sees_its_own_scope_at_every_poll_and_none_outside() {
        let (a, b) = (log(), log());
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        tokio::task::LocalSet::new().block_on(&rt, async {
            assert!(scope().is_none());
            let (a2, b2) = (a.clone(), b.clone());
            let first = tokio::task::spawn_local(scoped(async move {
                assert!(scope().is_none());
                set_scope(Some(&a2));
                tokio::task::yield_now().await;
                assert!(is(scope(), &a2));
                // A scope within the task's (an HTTP/2 stream's), then the task's again.
                let inner = b2.clone();
                scoped_in(Some(b2), async move {
                    assert!(is(scope(), &inner));
                    tokio::task::yield_now().await;
                    assert!(is(scope(), &inner));
                })
                .await;
                assert!(is(scope(), &a2));
            }));
            let second = tokio::task::spawn_local(scoped(async {
                for _ in 0..3 {
                    assert!(scope().is_none(), "another task's scope leaked");
                    tokio::task::yield_now().await;
                }
            }));
            first.await.unwrap();
            second.await.unwrap();
            assert!(scope().is_none());
        });
    }

    #[test]
    fn the_inner_future_is_dropped_within_its_scope() {
        struct Probe(Rc<Cell<bool>>, Arc<ErrorLog>);
        impl Drop for Probe {
            fn drop(&mut self) {
                self.0.set(is(scope(), &self.1));
            }
        }
        let a = log();
        let seen = Rc::new(Cell::new(false));
        let probe = Probe(seen.clone(), a.clone());
        let mut f = Box::pin(scoped_in(Some(a), async move {
            let _probe = probe;
            std::future::pending::<()>().await
        }));
        let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
        assert!(f.as_mut().poll(&mut cx).is_pending());
        assert!(scope().is_none());
        drop(f);
        assert!(seen.get(), "dropped outside its scope");
        assert!(scope().is_none());
    }
}
