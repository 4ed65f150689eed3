//! The error log: `error_log FILE|stderr [LEVEL]`, several allowed, in nginx's line format
//! (`2026/11/21 10:00:00 [error] 1234#1240: *45 message, client: ..., server: ...`).
//!
//! One global sink set, swapped on reload and reopened on SIGUSR1. A line is formatted once
//! and written with one `write(2)` per file (O_APPEND), as nginx does: the error log is not
//! buffered, so a line is never lost on a crash. A line below every sink's level costs one
//! atomic load.

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
    Args::Take(1, 2),
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
}

/// One `error_log` directive.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ErrorLogConf {
    pub target: Target,
    pub level: Level,
}

fn set_error_log(b: &mut Builder, d: &Directive, s: &mut Scope<'_>) -> Result<(), Error> {
    let conf = parse_error_log(b, d)?;
    match s {
        Scope::Main => b.error_logs.push(conf),
        _ => b.warn(
            "\"error_log\" below the main context is not implemented yet: its messages go to \
             the main error log",
            &d.span,
        ),
    }
    Ok(())
}

fn parse_error_log(b: &Builder, d: &Directive) -> Result<ErrorLogConf, Error> {
    let file = &d.args[0].value;
    let target = if file == "stderr" {
        Target::Stderr
    } else if file.starts_with("syslog:") || file.starts_with("memory:") {
        return Err(err(
            d,
            format!("\"{file}\" error log targets are not supported by shoal"),
        ));
    } else {
        Target::File(b.full_path(file))
    };
    let level = match d.args.get(1) {
        None => Level::Error,
        Some(a) => Level::parse(&a.value)
            .ok_or_else(|| err(d, format!("invalid log level \"{}\"", a.value)))?,
    };
    Ok(ErrorLogConf { target, level })
}

struct Sink {
    level: Level,
    target: Target,
    file: Option<File>,
}

/// The open error logs.
pub struct ErrorLog {
    sinks: Vec<Sink>,
}

static MAX_LEVEL: AtomicU8 = AtomicU8::new(Level::Notice as u8);
static CURRENT: RwLock<Option<Arc<ErrorLog>>> = RwLock::new(None);

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
    pub fn open(confs: &[ErrorLogConf]) -> Result<ErrorLog, String> {
        let mut sinks = Vec::with_capacity(confs.len());
        for c in confs {
            let file = match &c.target {
                Target::Stderr => None,
                Target::File(p) => Some(open_append(p).map_err(|e| {
                    format!(
                        "open() \"{}\" failed {}",
                        p.display(),
                        shoal_conf::os_error(&e)
                    )
                })?),
            };
            sinks.push(Sink {
                level: c.level,
                target: c.target.clone(),
                file,
            });
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
            if level > s.level {
                continue;
            }
            let _ = match &s.file {
                Some(f) => (&*f).write_all(line),
                None => std::io::stderr().lock().write_all(line),
            };
        }
    }
}

/// Reopens every file of the current error log (SIGUSR1). Targets that fail keep their old
/// file and the failure is logged.
pub fn reopen() {
    let current = CURRENT.read().unwrap_or_else(|e| e.into_inner()).clone();
    let Some(current) = current else { return };
    let mut sinks = Vec::with_capacity(current.sinks.len());
    let mut failures = Vec::new();
    for s in &current.sinks {
        let file = match &s.target {
            Target::Stderr => None,
            Target::File(p) => match open_append(p) {
                Ok(f) => Some(f),
                Err(e) => {
                    failures.push(format!(
                        "open() \"{}\" failed {}",
                        p.display(),
                        shoal_conf::os_error(&e)
                    ));
                    s.file.as_ref().and_then(|f| f.try_clone().ok())
                }
            },
        };
        sinks.push(Sink {
            level: s.level,
            target: s.target.clone(),
            file,
        });
    }
    ErrorLog { sinks }.install();
    if !use_stderr() {
        redirect_stderr();
    }
    for f in failures {
        log(Level::Alert, None, format_args!("{f}"));
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
    if let Some(f) = current.sinks.iter().find_map(|s| s.file.as_ref()) {
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
}

thread_local! {
    static TID: i64 = {
        // SAFETY: gettid has no preconditions and cannot fail.
        unsafe { libc::syscall(libc::SYS_gettid) }
    };
}

/// Writes one line: `TIME [LEVEL] PID#TID: [*CONN ]MESSAGE`.
pub fn log(level: Level, conn: Option<u64>, msg: fmt::Arguments<'_>) {
    if !enabled(level) {
        return;
    }
    let current = CURRENT.read().unwrap_or_else(|e| e.into_inner()).clone();
    let mut line = String::with_capacity(128);
    use std::fmt::Write as _;
    let _ = write!(
        line,
        "{} [{}] {}#{}: ",
        local_time(),
        level.name(),
        std::process::id(),
        TID.with(|t| *t)
    );
    if let Some(c) = conn {
        let _ = write!(line, "*{c} ");
    }
    let _ = line.write_fmt(msg);
    line.push('\n');
    match current {
        Some(log) => log.write(level, line.as_bytes()),
        None => {
            let _ = std::io::stderr().lock().write_all(line.as_bytes());
        }
    }
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
