//! `log_format` and `access_log`: one line per request, in nginx's formats, buffered per
//! worker when `buffer=` is given.
//!
//! Runs on the worker. Without `buffer=`, a line is one `write(2)` (as nginx). With it, lines
//! gather in a per-worker buffer written when the next line would not fit, when the oldest line
//! is `flush=` old (a per-worker ticker checks), on reopen, and when the worker stops; with
//! `gzip[=LEVEL]` each written buffer is one gzip member, so `zcat` reads the file whole.
//! Log files are opened when the configuration is read (so `-t` checks them, as nginx's does) and
//! reopened in place on SIGUSR1. A path with variables is opened for each line, or kept open
//! per worker by `open_log_file_cache` ([`LogFileCache`]). A `syslog:` target sends each line
//! as a datagram ([`crate::syslog`]).

use std::cell::RefCell;
use std::collections::HashMap;
use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, RwLock, Weak};
use std::time::{Duration, Instant};

use shoal_conf::{Directive, Error};
use shoal_io::fxhash::FxHashMap;

use super::loc_conf;
use crate::conf::{err, Builder, Scope};
use crate::error;
use crate::variables::{Escape, Template, Vars};

/// nginx's predefined format.
pub const COMBINED: &str = "$remote_addr - $remote_user [$time_local] \"$request\" $status $body_bytes_sent \"$http_referer\" \"$http_user_agent\"";

/// A `log_format`.
#[derive(Debug)]
pub struct LogFormat {
    pub name: String,
    pub escape: Escape,
    pub template: Template,
}

/// An open log file, shared by every `access_log` naming the same path.
#[derive(Debug)]
pub struct LogFile {
    pub path: PathBuf,
    file: RwLock<File>,
}

impl LogFile {
    fn open(path: &Path) -> std::io::Result<File> {
        crate::log::open_append(path)
    }

    fn write(&self, data: &[u8]) {
        let f = self.file.read().unwrap_or_else(|e| e.into_inner());
        if let Err(e) = (&*f).write_all(data) {
            crate::error_log!(
                crate::log::Level::Alert,
                "write() to \"{}\" failed {}",
                self.path.display(),
                shoal_conf::os_error(&e)
            );
        }
    }
}

/// Every log file opened by any configuration still alive, for SIGUSR1.
static OPEN_FILES: Mutex<Vec<Weak<LogFile>>> = Mutex::new(Vec::new());

/// Calls `f` with every open access log file.
pub(crate) fn for_each_file(mut f: impl FnMut(&Path, &File)) {
    let files: Vec<Arc<LogFile>> = OPEN_FILES
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .iter()
        .filter_map(Weak::upgrade)
        .collect();
    for l in files {
        f(&l.path, &l.file.read().unwrap_or_else(|e| e.into_inner()));
    }
}

/// Reopens every access log file (SIGUSR1). Buffered lines written afterwards go to the new
/// file.
pub fn reopen() {
    let mut files = OPEN_FILES.lock().unwrap_or_else(|e| e.into_inner());
    files.retain(|w| w.strong_count() > 0);
    for f in files.iter().filter_map(Weak::upgrade) {
        match LogFile::open(&f.path) {
            Ok(new) => *f.file.write().unwrap_or_else(|e| e.into_inner()) = new,
            Err(e) => crate::error_log!(
                crate::log::Level::Alert,
                "open() \"{}\" failed {}",
                f.path.display(),
                shoal_conf::os_error(&e)
            ),
        }
    }
}

/// Where a log goes: a file opened at configuration time, or a path with variables opened
/// for each line.
#[derive(Debug)]
pub enum LogTarget {
    File(Arc<LogFile>),
    Dynamic { path: Template, prefix: PathBuf },
    Syslog(crate::syslog::Peer),
}

/// `open_log_file_cache max=N [inactive=TIME] [min_uses=N] [valid=TIME]`: files of paths
/// with variables kept open by each worker (at most `max`, the least recently used closed
/// first), closed when unused for `inactive`, kept only once used `min_uses` times within
/// `inactive`, and opened again (the name looked up anew) after `valid`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LogFileCache {
    pub max: usize,
    pub inactive: Duration,
    pub min_uses: u64,
    pub valid: Duration,
}

pub(super) fn set_open_log_file_cache(
    _: &mut Builder,
    d: &Directive,
    s: &mut Scope<'_>,
) -> Result<(), Error> {
    let lc = loc_conf(s);
    if lc.open_log_file_cache.is_some() {
        return Err(crate::conf::duplicate(d));
    }
    let mut c = LogFileCache {
        max: 0,
        inactive: Duration::from_secs(10),
        min_uses: 1,
        valid: Duration::from_secs(60),
    };
    let mut off = false;
    for a in &d.args {
        let v = a.value.as_str();
        let ok = if let Some(n) = v.strip_prefix("max=") {
            crate::conf::parse_number(n).map(|n| c.max = n as usize)
        } else if let Some(t) = v.strip_prefix("inactive=") {
            crate::conf::parse_time(t).map(|t| c.inactive = t)
        } else if let Some(n) = v.strip_prefix("min_uses=") {
            crate::conf::parse_number(n).map(|n| c.min_uses = n)
        } else if let Some(t) = v.strip_prefix("valid=") {
            crate::conf::parse_time(t).map(|t| c.valid = t)
        } else if v == "off" {
            off = true;
            Some(())
        } else {
            None
        };
        if ok.is_none() {
            return Err(err(
                d,
                format!("invalid \"open_log_file_cache\" parameter \"{v}\""),
            ));
        }
    }
    if off {
        lc.open_log_file_cache = Some(None);
        return Ok(());
    }
    if c.max == 0 {
        return Err(err(
            d,
            "\"open_log_file_cache\" must have \"max\" parameter",
        ));
    }
    lc.open_log_file_cache = Some(Some(c));
    Ok(())
}

/// A file `open_log_file_cache` keeps open.
struct Cached {
    file: File,
    opened: Instant,
    last: Instant,
    uses: u64,
}

thread_local! {
    /// `open_log_file_cache`: the worker's open files, by path (a path not kept open yet has
    /// no file, only its uses).
    static OPEN_LOGS: RefCell<HashMap<PathBuf, Option<Cached>>> = RefCell::new(HashMap::new());
    /// Uses of paths not kept open yet (`min_uses`), with the time of the first.
    static USES: RefCell<HashMap<PathBuf, (u64, Instant)>> = RefCell::new(HashMap::new());
}

/// Writes a line to a path with variables: through the worker's cache of open files when
/// `cache` is on, else opened for the line.
fn write_dynamic(path: &Path, line: &[u8], cache: Option<&LogFileCache>) -> std::io::Result<()> {
    let Some(c) = cache else {
        return LogFile::open(path)?.write_all(line);
    };
    let now = Instant::now();
    OPEN_LOGS.with(|open| {
        let mut open = open.borrow_mut();
        // Close what was unused for `inactive` or opened longer than `valid` ago.
        open.retain(|_, e| {
            e.as_ref().is_some_and(|e| {
                now.duration_since(e.last) < c.inactive && now.duration_since(e.opened) < c.valid
            })
        });
        if let Some(Some(e)) = open.get_mut(path) {
            e.last = now;
            e.uses += 1;
            return e.file.write_all(line);
        }
        let mut f = LogFile::open(path)?;
        f.write_all(line)?;
        let uses = USES.with(|u| {
            let mut u = u.borrow_mut();
            u.retain(|_, (_, first)| now.duration_since(*first) < c.inactive);
            let e = u.entry(path.to_path_buf()).or_insert((0, now));
            e.0 += 1;
            e.0
        });
        if uses >= c.min_uses {
            USES.with(|u| u.borrow_mut().remove(path));
            if open.len() >= c.max {
                // The least recently used goes.
                let oldest = open
                    .iter()
                    .min_by_key(|(_, e)| e.as_ref().map(|e| e.last))
                    .map(|(p, _)| p.clone());
                if let Some(p) = oldest {
                    open.remove(&p);
                }
            }
            open.insert(
                path.to_path_buf(),
                Some(Cached {
                    file: f,
                    opened: now,
                    last: now,
                    uses,
                }),
            );
        }
        Ok(())
    })
}

/// One `access_log` directive.
#[derive(Debug)]
pub struct AccessLog {
    pub target: LogTarget,
    pub format: Arc<LogFormat>,
    pub buffer: Option<usize>,
    pub flush: Option<Duration>,
    pub gzip: Option<u32>,
    pub condition: Option<Template>,
    /// Whether writing a line may read the answer's headers (its format, condition or path:
    /// see [`Template::may_read_sent_headers`]): only then are they listed for it. Found when
    /// the configuration is read.
    pub reads_sent_headers: bool,
}

/// State of `log_format`s while the configuration is read (they must precede their use).
#[derive(Default)]
pub struct Formats {
    pub formats: HashMap<String, Arc<LogFormat>>,
    pub files: HashMap<PathBuf, Arc<LogFile>>,
}

impl Formats {
    fn combined(&mut self) -> Arc<LogFormat> {
        self.formats
            .entry("combined".to_string())
            .or_insert_with(|| {
                Arc::new(LogFormat {
                    name: "combined".into(),
                    escape: Escape::Default,
                    template: Template::compile(COMBINED).expect("the combined format compiles"),
                })
            })
            .clone()
    }

    /// The log file at `path`, opened once per configuration whoever names it.
    pub fn file(&mut self, path: &Path) -> Result<Arc<LogFile>, error::Error> {
        if let Some(f) = self.files.get(path) {
            return Ok(f.clone());
        }
        let file = LogFile::open(path)
            .map_err(|e| error::Error::failed(format_args!("open() \"{}\"", path.display()), e))?;
        let f = Arc::new(LogFile {
            path: path.to_path_buf(),
            file: RwLock::new(file),
        });
        OPEN_FILES
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(Arc::downgrade(&f));
        self.files.insert(path.to_path_buf(), f.clone());
        Ok(f)
    }
}

pub(super) fn set_log_format(
    b: &mut Builder,
    d: &Directive,
    _: &mut Scope<'_>,
) -> Result<(), Error> {
    b.formats.combined();
    let format = parse_log_format(d, &b.formats.formats)?;
    b.formats
        .formats
        .insert(format.name.clone(), Arc::new(format));
    Ok(())
}

/// A `log_format NAME [escape=...] STRING...` line (http's or stream's, each with its own
/// names: `defined` are the ones its block has so far).
pub fn parse_log_format(
    d: &Directive,
    defined: &HashMap<String, Arc<LogFormat>>,
) -> Result<LogFormat, Error> {
    let name = d.args[0].value.clone();
    if defined.contains_key(&name) {
        return Err(err(d, format!("duplicate \"log_format\" name \"{name}\"")));
    }
    let mut rest = &d.args[1..];
    let mut escape = Escape::Default;
    if let Some(e) = rest.first().and_then(|a| a.value.strip_prefix("escape=")) {
        escape = match e {
            "default" => Escape::Default,
            "json" => Escape::Json,
            "none" => Escape::None,
            other => return Err(err(d, format!("unknown log format escaping \"{other}\""))),
        };
        rest = &rest[1..];
    }
    if rest.is_empty() {
        return Err(crate::conf::invalid_args(d));
    }
    let text: String = rest.iter().map(|a| a.value.as_str()).collect();
    let template = Template::compile(&text).map_err(|m| err(d, m))?;
    Ok(LogFormat {
        name,
        escape,
        template,
    })
}

pub(super) fn set_access_log(
    b: &mut Builder,
    d: &Directive,
    s: &mut Scope<'_>,
) -> Result<(), Error> {
    let lc = loc_conf(s);
    let path = &d.args[0].value;
    if path == "off" {
        if d.args.len() > 1 {
            return Err(crate::conf::invalid_args(d));
        }
        // nginx's `off` silences the whole level, whatever else it lists.
        lc.access_log = Some(Arc::new(Vec::new()));
        lc.access_log_off = true;
        return Ok(());
    }
    let format = match d.args.get(1).filter(|a| !a.value.contains('=')) {
        Some(a) => match a.value.as_str() {
            "combined" => b.formats.combined(),
            name => b
                .formats
                .formats
                .get(name)
                .cloned()
                .ok_or_else(|| err(d, format!("unknown log format \"{name}\"")))?,
        },
        None => b.formats.combined(),
    };
    let params_from = if d.args.get(1).is_some_and(|a| !a.value.contains('=')) {
        2
    } else {
        1
    };
    let log = build_access_log(b, d, format, params_from)?;
    push_log(lc, log);
    Ok(())
}

/// Adds a log to the level's list, unless the level said `access_log off`.
fn push_log(lc: &mut super::LocConf, log: AccessLog) {
    if lc.access_log_off {
        return;
    }
    let list = lc.access_log.get_or_insert_with(|| Arc::new(Vec::new()));
    Arc::make_mut(list).push(Arc::new(log));
}

/// An `access_log PATH ... [buffer=] [flush=] [gzip[=]] [if=]` line once its format is
/// known: the parameters from `d.args[params_from..]`, the file opened (or the path compiled).
pub fn build_access_log(
    b: &mut Builder,
    d: &Directive,
    format: Arc<LogFormat>,
    params_from: usize,
) -> Result<AccessLog, Error> {
    let path = &d.args[0].value;
    let syslog = match path.strip_prefix("syslog:") {
        Some(args) => Some(crate::syslog::SyslogConf::parse(args).map_err(|m| err(d, m))?),
        None => None,
    };
    let (mut buffer, mut flush, mut gzip, mut condition) = (None, None, None, None);
    for a in &d.args[params_from..] {
        let v = a.value.as_str();
        if let Some(n) = v.strip_prefix("buffer=") {
            buffer = Some(
                crate::conf::parse_size(n)
                    .filter(|n| *n > 0)
                    .ok_or_else(|| err(d, format!("invalid buffer size \"{n}\"")))?
                    as usize,
            );
        } else if let Some(t) = v.strip_prefix("flush=") {
            flush = Some(
                crate::conf::parse_time(t)
                    .filter(|t| !t.is_zero())
                    .ok_or_else(|| err(d, format!("invalid flush time \"{t}\"")))?,
            );
        } else if v == "gzip" {
            gzip = Some(1);
        } else if let Some(l) = v.strip_prefix("gzip=") {
            gzip = Some(
                l.parse::<u32>()
                    .ok()
                    .filter(|l| (1..=9).contains(l))
                    .ok_or_else(|| err(d, format!("invalid compression level \"{l}\"")))?,
            );
        } else if let Some(c) = v.strip_prefix("if=") {
            condition = Some(Template::compile(c).map_err(|m| err(d, m))?);
        } else {
            return Err(err(d, format!("invalid parameter \"{v}\"")));
        }
    }
    if (flush.is_some() || gzip.is_some()) && buffer.is_none() {
        // nginx: flush= and gzip imply a 64k buffer.
        buffer = Some(64 * 1024);
    }
    if let Some(conf) = syslog {
        if buffer.is_some() {
            return Err(err(d, "logs to syslog cannot be buffered"));
        }
        let reads_sent_headers = format.template.may_read_sent_headers()
            || condition
                .as_ref()
                .is_some_and(Template::may_read_sent_headers);
        return Ok(AccessLog {
            target: LogTarget::Syslog(crate::syslog::Peer::new(conf)),
            format,
            buffer,
            flush,
            gzip,
            condition,
            reads_sent_headers,
        });
    }
    let template = Template::compile(path).map_err(|m| err(d, m))?;
    let target = if template.is_static() {
        LogTarget::File(b.formats.file(&b.full_path(path)).map_err(|m| err(d, m))?)
    } else {
        if buffer.is_some() {
            return Err(err(d, "buffered logs cannot have variables in name"));
        }
        LogTarget::Dynamic {
            path: template,
            prefix: b.prefix.clone(),
        }
    };
    let reads_sent_headers = format.template.may_read_sent_headers()
        || condition
            .as_ref()
            .is_some_and(Template::may_read_sent_headers)
        || matches!(&target, LogTarget::Dynamic { path, .. } if path.may_read_sent_headers());
    Ok(AccessLog {
        target,
        format,
        buffer,
        flush,
        gzip,
        condition,
        reads_sent_headers,
    })
}

/// The default access log at http level: `logs/access.log combined`.
pub(super) fn default_logs(b: &mut Builder) -> Result<Arc<Vec<Arc<AccessLog>>>, error::Error> {
    let format = b.formats.combined();
    let file = b.formats.file(&b.full_path("logs/access.log"))?;
    Ok(Arc::new(vec![Arc::new(AccessLog {
        target: LogTarget::File(file),
        format,
        buffer: None,
        flush: None,
        gzip: None,
        condition: None,
        reads_sent_headers: false,
    })]))
}

/// A worker's pending lines for one buffered log.
struct Pending {
    log: Arc<AccessLog>,
    data: Vec<u8>,
    since: Instant,
}

thread_local! {
    /// By the log's address: FxHash, as a line looks its buffer up.
    static BUFFERS: RefCell<FxHashMap<usize, Pending>> = RefCell::new(FxHashMap::default());
}

/// Writes one request's line to each log.
pub fn log_request(logs: &[Arc<AccessLog>], vars: &Vars<'_>) {
    for log in logs {
        if let Some(c) = &log.condition {
            let v = vars.eval(c);
            if v.is_empty() || v == "0" {
                continue;
            }
        }
        if let (LogTarget::File(file), Some(size)) = (&log.target, log.buffer) {
            buffered(log, file, vars, size);
            continue;
        }
        let mut line = Vec::with_capacity(256);
        if let LogTarget::Syslog(peer) = &log.target {
            // The header, then the line without its line feed (nginx's).
            peer.header(peer.conf.severity, &mut line);
            vars.eval_log(&log.format.template, log.format.escape, &mut line);
            if let Err(e) = peer.send(&line) {
                crate::error_log!(
                    crate::log::Level::Alert,
                    "send() failed {}",
                    shoal_conf::os_error(&e)
                );
            }
            continue;
        }
        vars.eval_log(&log.format.template, log.format.escape, &mut line);
        line.push(b'\n');
        match &log.target {
            LogTarget::Syslog(_) => unreachable!("sent above"),
            LogTarget::Dynamic { path, prefix } => {
                let p = vars.eval(path);
                let p = if Path::new(&p).is_absolute() {
                    PathBuf::from(p)
                } else {
                    prefix.join(p)
                };
                let cache = vars.lc.and_then(|lc| lc.open_log_file_cache.flatten());
                match write_dynamic(&p, &line, cache.as_ref()) {
                    Ok(()) => {}
                    Err(e) => crate::error_log!(
                        crate::log::Level::Error,
                        "open() \"{}\" failed {}",
                        p.display(),
                        shoal_conf::os_error(&e)
                    ),
                }
            }
            LogTarget::File(file) => file.write(&line),
        }
    }
}

/// `buffer=`: the line is written into the worker's buffer for `log`; what was there goes to
/// the file first when the line does not fit after it, and a line larger than the buffer goes
/// straight out.
fn buffered(log: &Arc<AccessLog>, file: &Arc<LogFile>, vars: &Vars<'_>, size: usize) {
    let key = Arc::as_ptr(log) as usize;
    BUFFERS.with(|b| {
        let mut b = b.borrow_mut();
        let p = b.entry(key).or_insert_with(|| Pending {
            log: log.clone(),
            // Room for a usual line past the buffer's size: the line is written in before it
            // is known not to fit.
            data: Vec::with_capacity(size.saturating_add(4096)),
            since: Instant::now(),
        });
        let start = p.data.len();
        vars.eval_log(&log.format.template, log.format.escape, &mut p.data);
        p.data.push(b'\n');
        // Whether the line is the first in the buffer (its age starts with it).
        let mut first = start == 0;
        if start > 0 && p.data.len() > size {
            write_out(&p.log, file, &p.data[..start]);
            p.data.drain(..start);
            first = true;
        }
        if p.data.len() > size {
            write_out(&p.log, file, &p.data);
            p.data.clear();
        } else if first {
            p.since = Instant::now();
        }
    });
}

fn write_out(log: &AccessLog, file: &LogFile, data: &[u8]) {
    match log.gzip {
        None => file.write(data),
        Some(level) => {
            let mut enc = flate2::write::GzEncoder::new(
                Vec::with_capacity(data.len() / 4),
                flate2::Compression::new(level),
            );
            if enc.write_all(data).is_ok() {
                if let Ok(z) = enc.finish() {
                    file.write(&z);
                }
            }
        }
    }
}

/// Writes buffers older than their `flush=` (all of them with `all`), and forgets buffers of
/// logs no configuration uses any more. Called by the worker's ticker and when it stops.
pub fn flush_buffers(all: bool) {
    BUFFERS.with(|b| {
        let mut b = b.borrow_mut();
        let now = Instant::now();
        b.retain(|_, p| {
            let due = all
                || Arc::strong_count(&p.log) == 1
                || p.log
                    .flush
                    .is_some_and(|f| now.duration_since(p.since) >= f);
            if due && !p.data.is_empty() {
                if let LogTarget::File(f) = &p.log.target {
                    write_out(&p.log, f, &p.data);
                }
                p.data.clear();
            }
            Arc::strong_count(&p.log) > 1
        });
    });
}
