//! The DAV methods' file-system work, as nginx's `ngx_http_dav_module` and the file helpers it
//! uses (`ngx_ext_rename_file`, `ngx_copy_file`, `ngx_walk_tree`, `ngx_create_full_path`) do
//! it, with their log lines.
//!
//! Plain blocking calls, so that a method's whole work can run on a thread pool: nothing here
//! logs; each line is kept in a [`Log`] that the worker writes when the work is done.
//!
//! One deliberate difference: nginx's tree walk `stat()`s what it meets, so a DELETE (or the
//! removal of a COPY's or MOVE's destination) follows a symbolic link to a directory and
//! empties that directory, wherever it is. Here the removal takes the link itself (its
//! `lstat()`), as nginx's walk means to with its handler for "special" entries. A COPY follows
//! links as nginx's does (it only reads through them).

use std::ffi::OsString;
use std::fs::{self, File, FileTimes, Metadata};
use std::io::{self, ErrorKind, Read, Write};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::log::Level;

/// Log lines kept for the worker to write, in order.
#[derive(Default)]
pub struct Log(pub Vec<(Level, String)>);

impl Log {
    fn push(&mut self, level: Level, line: String) {
        self.0.push((level, line));
    }

    /// `WHAT "PATH" failed (ERRNO: TEXT)`.
    fn failed(&mut self, level: Level, what: &str, path: &Path, e: &io::Error) {
        self.push(
            level,
            format!(
                "{what} \"{}\" failed {}",
                path.display(),
                shoal_conf::os_error(e)
            ),
        );
    }
}

/// nginx's `ngx_dir_access`: a directory for files of mode `a` gets the search bits its read
/// bits allow.
pub fn dir_access(a: u32) -> u32 {
    a | (a & 0o444) >> 2
}

/// `ngx_http_dav_error`: the status an error of `failed` on `path` comes to (`not_found` for
/// a missing path), with its log line.
pub fn error(log: &mut Log, e: &io::Error, not_found: u16, failed: &str, path: &Path) -> u16 {
    let (level, status) = match e.raw_os_error() {
        Some(libc::ENOENT | libc::ENOTDIR | libc::ENAMETOOLONG) => (Level::Error, not_found),
        Some(libc::EACCES | libc::EPERM) => (Level::Error, 403),
        Some(libc::EEXIST) => (Level::Error, 405),
        Some(libc::ENOSPC) => (Level::Crit, 507),
        _ => (Level::Crit, 500),
    };
    log.failed(level, failed, path, e);
    status
}

/// `path` without its last byte (a trailing `/`).
pub fn strip_slash(path: &Path) -> PathBuf {
    let b = path.as_os_str().as_bytes();
    match b.strip_suffix(b"/") {
        Some(s) if !s.is_empty() => PathBuf::from(std::ffi::OsStr::from_bytes(s)),
        _ => path.to_path_buf(),
    }
}

fn set_time(path: &Path, t: SystemTime) -> io::Result<()> {
    File::open(path)?.set_times(FileTimes::new().set_accessed(t).set_modified(t))
}

fn mtime_of(m: &Metadata) -> SystemTime {
    UNIX_EPOCH + Duration::from_secs(m.mtime().max(0) as u64)
}

/// How [`ext_rename`] places a file (nginx's `ngx_ext_rename_file_t`).
pub struct Rename {
    /// The mode the file gets first (`None`: left as it is).
    pub access: Option<u32>,
    /// The mode directories made on the way are derived from.
    pub path_access: u32,
    /// The time the file gets first.
    pub time: Option<SystemTime>,
    /// Missing directories on the way are made.
    pub create_path: bool,
    /// The source is removed if it cannot be placed.
    pub delete_file: bool,
}

/// `ngx_ext_rename_file`: `src` renamed to `to`, its mode and time set first; missing
/// directories made with `create_path`; across file systems, a copy beside `to` renamed over
/// it.
pub fn ext_rename(log: &mut Log, src: &Path, to: &Path, ext: &Rename) -> Result<(), ()> {
    let err = 'failed: {
        if let Some(mode) = ext.access {
            if let Err(e) = fs::set_permissions(src, fs::Permissions::from_mode(mode)) {
                log.failed(Level::Crit, "chmod()", src, &e);
                break 'failed None;
            }
        }
        if let Some(t) = ext.time {
            if let Err(e) = set_time(src, t) {
                log.failed(Level::Crit, "utimes()", src, &e);
                break 'failed None;
            }
        }
        let mut e = match fs::rename(src, to) {
            Ok(()) => return Ok(()),
            Err(e) => e,
        };
        if e.kind() == ErrorKind::NotFound {
            if !ext.create_path {
                break 'failed Some(e);
            }
            if let Err(e) = create_full_path(to, dir_access(ext.path_access)) {
                log.failed(Level::Crit, "mkdir()", to, &e);
                break 'failed None;
            }
            e = match fs::rename(src, to) {
                Ok(()) => return Ok(()),
                Err(e) => e,
            };
        }
        if e.raw_os_error() != Some(libc::EXDEV) {
            break 'failed Some(e);
        }
        let mut beside = OsString::from(to.as_os_str());
        beside.push(format!(".{:010}", super::super::temp_file::next_number()));
        let beside = PathBuf::from(beside);
        let cf = CopyFile {
            size: None,
            access: ext.access,
            time: ext.time,
        };
        if copy_file(log, src, &beside, &cf).is_ok() {
            match fs::rename(&beside, to) {
                Ok(()) => {
                    if let Err(e) = fs::remove_file(src) {
                        log.failed(Level::Crit, "unlink()", src, &e);
                        return Err(());
                    }
                    return Ok(());
                }
                Err(e) => {
                    log.push(
                        Level::Crit,
                        format!(
                            "rename() \"{}\" to \"{}\" failed {}",
                            beside.display(),
                            to.display(),
                            shoal_conf::os_error(&e)
                        ),
                    );
                    if let Err(e) = fs::remove_file(&beside) {
                        log.failed(Level::Crit, "unlink()", &beside, &e);
                    }
                }
            }
        }
        None
    };
    if ext.delete_file {
        if let Err(e) = fs::remove_file(src) {
            log.failed(Level::Crit, "unlink()", src, &e);
        }
    }
    if let Some(e) = err {
        log.push(
            Level::Crit,
            format!(
                "rename() \"{}\" to \"{}\" failed {}",
                src.display(),
                to.display(),
                shoal_conf::os_error(&e)
            ),
        );
    }
    Err(())
}

/// `ngx_create_full_path`: every directory on the way to `file` (not `file` itself), an
/// existing one skipped; a directory that cannot be searched is passed, its error kept.
fn create_full_path(file: &Path, mode: u32) -> io::Result<()> {
    let b = file.as_os_str().as_bytes();
    let mut last = Ok(());
    for (i, &c) in b.iter().enumerate().skip(1) {
        if c != b'/' {
            continue;
        }
        let dir = Path::new(std::ffi::OsStr::from_bytes(&b[..i]));
        match fs::DirBuilder::new().mode(mode).create(dir) {
            Ok(()) => last = Ok(()),
            Err(e) if e.kind() == ErrorKind::AlreadyExists => last = Ok(()),
            Err(e) if e.kind() == ErrorKind::PermissionDenied => last = Err(e),
            Err(e) => return Err(e),
        }
    }
    last
}

/// What [`copy_file`] gives the copy; what is `None` is the source's.
pub struct CopyFile {
    pub size: Option<u64>,
    pub access: Option<u32>,
    pub time: Option<SystemTime>,
}

/// `ngx_copy_file`: `from`'s bytes to `to` (created or truncated, with the mode given), then
/// its time.
pub fn copy_file(log: &mut Log, from: &Path, to: &Path, cf: &CopyFile) -> Result<(), ()> {
    let mut src = match File::open(from) {
        Ok(f) => f,
        Err(e) => {
            log.failed(Level::Crit, "open()", from, &e);
            return Err(());
        }
    };
    let (size, access, time) = match (cf.size, cf.access, cf.time) {
        (Some(s), Some(a), Some(t)) => (s, a, t),
        _ => match src.metadata() {
            Ok(m) => (
                cf.size.unwrap_or(m.len()),
                cf.access.unwrap_or(m.mode() & 0o777),
                cf.time.unwrap_or_else(|| mtime_of(&m)),
            ),
            Err(e) => {
                log.failed(Level::Alert, "fstat()", from, &e);
                return Err(());
            }
        },
    };
    let mut dst = match fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(access)
        .open(to)
    {
        Ok(f) => f,
        Err(e) => {
            log.failed(Level::Crit, "open()", to, &e);
            return Err(());
        }
    };
    let mut buf = vec![0u8; size.min(65536) as usize];
    let mut rest = size;
    while rest > 0 {
        let len = rest.min(buf.len() as u64) as usize;
        let n = match read_full(&mut src, &mut buf[..len]) {
            Ok(n) => n,
            Err(e) => {
                log.failed(Level::Alert, "read()", from, &e);
                return Err(());
            }
        };
        if n != len {
            log.push(
                Level::Alert,
                format!("read() has read only {n} of {rest} from {}", from.display()),
            );
            return Err(());
        }
        if let Err(e) = dst.write_all(&buf[..len]) {
            log.failed(Level::Alert, "write()", to, &e);
            return Err(());
        }
        rest -= len as u64;
    }
    if let Err(e) = dst.set_times(FileTimes::new().set_accessed(time).set_modified(time)) {
        log.failed(Level::Alert, "utimes()", to, &e);
        return Err(());
    }
    Ok(())
}

/// Reads until `buf` is full or the file ends.
fn read_full(f: &mut File, buf: &mut [u8]) -> io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match f.read(&mut buf[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(n)
}

/// What [`walk`] does with what it meets.
trait Visit {
    /// Whether entries are looked at through symbolic links (`stat()`) or not (`lstat()`).
    const FOLLOW: bool;
    fn file(&mut self, log: &mut Log, path: &Path, m: &Metadata);
    fn pre_dir(&mut self, log: &mut Log, path: &Path, m: &Metadata);
    fn post_dir(&mut self, log: &mut Log, path: &Path, m: &Metadata);
    fn special(&mut self, log: &mut Log, path: &Path);
}

/// `ngx_walk_tree`: every entry of `dir` but `.` and `..`, depth first. Only the top
/// directory's failures fail the walk; an entry that cannot be looked at is logged and passed.
fn walk<V: Visit>(log: &mut Log, dir: &Path, v: &mut V) -> Result<(), ()> {
    let entries = match fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) => {
            log.failed(Level::Crit, "opendir()", dir, &e);
            return Err(());
        }
    };
    for entry in entries {
        let entry = match entry {
            Ok(e) => e,
            Err(e) => {
                log.failed(Level::Crit, "readdir()", dir, &e);
                return Err(());
            }
        };
        let path = entry.path();
        let meta = match V::FOLLOW {
            true => fs::metadata(&path),
            false => fs::symlink_metadata(&path),
        };
        let m = match meta {
            Ok(m) => m,
            Err(e) => {
                let what = if V::FOLLOW { "stat()" } else { "lstat()" };
                log.failed(Level::Crit, what, &path, &e);
                continue;
            }
        };
        if m.is_file() {
            v.file(log, &path, &m);
        } else if m.is_dir() {
            v.pre_dir(log, &path, &m);
            let _ = walk(log, &path, v);
            v.post_dir(log, &path, &m);
        } else {
            v.special(log, &path);
        }
    }
    Ok(())
}

/// Removes what a tree holds (nginx's delete handlers: a failure is logged, the rest goes on).
struct Remove;

impl Visit for Remove {
    const FOLLOW: bool = false;
    fn file(&mut self, log: &mut Log, path: &Path, _: &Metadata) {
        self.special(log, path);
    }
    fn pre_dir(&mut self, _: &mut Log, _: &Path, _: &Metadata) {}
    fn post_dir(&mut self, log: &mut Log, path: &Path, _: &Metadata) {
        if let Err(e) = fs::remove_dir(path) {
            error(log, &e, 0, "rmdir()", path);
        }
    }
    fn special(&mut self, log: &mut Log, path: &Path) {
        if let Err(e) = fs::remove_file(path) {
            error(log, &e, 0, "unlink()", path);
        }
    }
}

/// `ngx_http_dav_delete_path`: a file, or a directory (`dir`, its path without a trailing
/// slash) and everything in it. `Err` is the status.
pub fn delete_path(log: &mut Log, path: &Path, dir: bool) -> Result<(), u16> {
    let (r, failed) = if dir {
        if walk(log, path, &mut Remove).is_err() {
            return Err(500);
        }
        (fs::remove_dir(path), "rmdir()")
    } else {
        (fs::remove_file(path), "unlink()")
    };
    r.map_err(|e| error(log, &e, 404, failed, path))
}

/// Copies a tree under `from` to the same names under `to` (nginx's copy handlers).
struct Copy<'a> {
    from: &'a Path,
    to: &'a Path,
}

impl Copy<'_> {
    fn target(&self, path: &Path) -> PathBuf {
        let rest = &path.as_os_str().as_bytes()[self.from.as_os_str().len()..];
        let mut t = OsString::from(self.to.as_os_str());
        t.push(std::ffi::OsStr::from_bytes(rest));
        PathBuf::from(t)
    }
}

impl Visit for Copy<'_> {
    const FOLLOW: bool = true;
    fn file(&mut self, log: &mut Log, path: &Path, m: &Metadata) {
        let cf = CopyFile {
            size: Some(m.len()),
            access: Some(m.mode() & 0o777),
            time: Some(mtime_of(m)),
        };
        let _ = copy_file(log, path, &self.target(path), &cf);
    }
    fn pre_dir(&mut self, log: &mut Log, path: &Path, m: &Metadata) {
        let dir = self.target(path);
        let mode = dir_access(m.mode() & 0o777);
        if let Err(e) = fs::DirBuilder::new().mode(mode).create(&dir) {
            error(log, &e, 0, "mkdir()", &dir);
        }
    }
    fn post_dir(&mut self, log: &mut Log, path: &Path, m: &Metadata) {
        let dir = self.target(path);
        if let Err(e) = set_time(&dir, mtime_of(m)) {
            log.failed(Level::Alert, "utimes()", &dir, &e);
        }
    }
    fn special(&mut self, _: &mut Log, _: &Path) {}
}

/// The contents of directory `from` copied into the existing directory `to`.
pub fn copy_tree(log: &mut Log, from: &Path, to: &Path) -> Result<(), ()> {
    walk(log, from, &mut Copy { from, to })
}
