//! `ngx_http_dav_module`: `dav_methods` (PUT, DELETE, MKCOL, COPY, MOVE), `dav_access`,
//! `create_full_put_path`, `min_delete_depth`; a content handler for the methods a location
//! lists, before the static module (which refuses them with 405).
//!
//! As nginx's: a PUT's body is read whole into a temporary file of `client_body_temp_path`
//! (`client_max_body_size` holds), which gets `dav_access`'s mode and the request's `Date` as
//! its time and is renamed over the URI's file (201 with `Location` when new, 204 when
//! replaced); MKCOL makes one directory (201); DELETE removes a file or, with `Depth:
//! infinity`, a tree (204); COPY and MOVE take `Destination` (on this server, mapped with this
//! location's `root`/`alias`), `Depth` and `Overwrite` (201 for a directory, 204 for a file).
//! The checks on the headers and the URI run on the worker; the file-system work (`fs.rs`) runs
//! on the location's thread pool with `aio threads`, else on the worker (as nginx does it).
//! No PROPFIND, LOCK or the other WebDAV methods, as nginx.

use std::os::unix::fs::{DirBuilderExt, MetadataExt};
use std::path::Path;
use std::sync::{Arc, Mutex};

use shoal_conf::{Directive, Error};
use shoal_http::BodyKind;

use super::client_body::ClientBody;
use super::reply::{error_reply, Outcome};
use super::request::Req;
use super::rewrite;
use super::{loc_conf, LocConf};
use crate::conf::{flag_arg, merge, number_arg, set_once, Args, Builder, Command, Ctx, Scope};
use crate::log::Level;

mod destination;
pub(crate) use destination::unsafe_uri;
mod fs;

use destination::{Depth, Refused};
use fs::Log;

pub static DIRECTIVES: &[Command] = &[
    Command::new("dav_methods", Ctx::HSL, Args::ONE_OR_MORE, set_methods),
    Command::new("dav_access", Ctx::HSL, Args::Take(1, 3), set_access),
    Command::new(
        "create_full_put_path",
        Ctx::HSL,
        Args::Flag,
        set_create_full_put_path,
    ),
    Command::new(
        "min_delete_depth",
        Ctx::HSL,
        Args::ONE,
        set_min_delete_depth,
    ),
];

/// The methods `dav_methods` names, as bits (`off` has one of its own, as nginx's).
const METHODS: [(&str, u8); 6] = [
    ("off", 1),
    ("put", 2),
    ("delete", 4),
    ("mkcol", 8),
    ("copy", 16),
    ("move", 32),
];

/// The DAV settings at one level.
#[derive(Clone, Debug, Default)]
pub struct DavLoc {
    methods: Option<u8>,
    access: Option<u32>,
    create_full_put_path: Option<bool>,
    min_delete_depth: Option<u64>,
}

impl DavLoc {
    /// `dav_access` (default `user:rw`).
    fn access(&self) -> u32 {
        self.access.unwrap_or(0o600)
    }
}

/// The module's place in the list (its directives; the handler is called from the content
/// phase).
pub struct Module;

impl super::modules::HttpModule for Module {
    type Loc = DavLoc;
    const DIRECTIVES: &'static [Command] = DIRECTIVES;

    fn merge(loc: &mut DavLoc, parent: &DavLoc) {
        merge(&mut loc.methods, &parent.methods);
        merge(&mut loc.access, &parent.access);
        merge(&mut loc.create_full_put_path, &parent.create_full_put_path);
        merge(&mut loc.min_delete_depth, &parent.min_delete_depth);
    }
}

/// nginx's `ngx_conf_set_bitmask_slot`: names (any case) add to what an earlier
/// `dav_methods` at this level set; one named twice is a warning.
fn set_methods(b: &mut Builder, d: &Directive, s: &mut Scope<'_>) -> Result<(), Error> {
    let mut mask = loc_conf(s).dav.methods.unwrap_or(0);
    for a in &d.args {
        let v = a.value.as_str();
        let Some(&(_, bit)) = METHODS.iter().find(|(n, _)| n.eq_ignore_ascii_case(v)) else {
            return Err(crate::conf::invalid_value(d, v));
        };
        if mask & bit != 0 {
            b.warn(format!("duplicate value \"{v}\""), &d.span);
        }
        mask |= bit;
    }
    loc_conf(s).dav.methods = Some(mask);
    Ok(())
}

fn set_access(_: &mut Builder, d: &Directive, s: &mut Scope<'_>) -> Result<(), Error> {
    if loc_conf(s).dav.access.is_some() {
        return Err(crate::conf::duplicate(d));
    }
    loc_conf(s).dav.access = Some(super::upstream::store::access_arg(d)?);
    Ok(())
}

fn set_create_full_put_path(
    _: &mut Builder,
    d: &Directive,
    s: &mut Scope<'_>,
) -> Result<(), Error> {
    set_once(&mut loc_conf(s).dav.create_full_put_path, flag_arg(d), d)
}

fn set_min_delete_depth(_: &mut Builder, d: &Directive, s: &mut Scope<'_>) -> Result<(), Error> {
    let n = number_arg(d, 0)?;
    set_once(&mut loc_conf(s).dav.min_delete_depth, n, d)
}

/// The bit of a method `dav_methods` can name (methods are case-sensitive, as nginx parses
/// them).
fn bit(method: &str) -> u8 {
    match method {
        "PUT" => 2,
        "DELETE" => 4,
        "MKCOL" => 8,
        "COPY" => 16,
        "MOVE" => 32,
        _ => 0,
    }
}

/// Whether the location's DAV handler answers `method`.
pub fn wanted(lc: &LocConf, method: &str) -> bool {
    lc.dav.methods.is_some_and(|m| m & bit(method) != 0)
}

/// Answers a DAV method for the current URI (`rw.uri`).
pub async fn handle(
    r: &Req<'_, '_>,
    lc: &LocConf,
    method: &str,
    rw: &rewrite::State,
    body: &ClientBody<'_>,
) -> Outcome {
    let uri = rw.uri.as_str();
    let conn = r.info.number;
    let log = |level: Level, line: &str| crate::conn_log!(level, conn, "{line}{}", r.log_ctx());
    let vars = r.vars_rw(rw, lc);
    let path = lc.doc_root().map(uri, Some(&vars));
    let slash = uri.ends_with('/');
    let conf = lc.dav.clone();
    let header = |name: &str| r.req.header(name).map(<[u8]>::to_vec);
    if method != "PUT" && body.kind() != BodyKind::Empty {
        let what = match method {
            "DELETE" => "DELETE with body is",
            "MKCOL" => "MKCOL with body is",
            _ => "COPY and MOVE with body are",
        };
        log(Level::Error, &format!("{what} unsupported"));
        return Outcome::Error(415);
    }
    let (status, created) = match method {
        "PUT" => {
            if slash {
                log(Level::Error, "cannot PUT to a collection");
                return Outcome::Error(409);
            }
            if r.req.header("content-range").is_some() {
                log(Level::Error, "PUT with range is unsupported");
                return Outcome::Error(501);
            }
            if body.kind() == BodyKind::Empty && r.req.header("content-length").is_none() {
                log(Level::Error, "PUT request body must be in a file");
                return Outcome::Error(500);
            }
            let temp = match body.read_to_file(lc, r).await {
                Ok(t) => t,
                Err(f) => return super::upstream::run::body_failed(r, f),
            };
            let date = r.req.header("date").and_then(shoal_http::date::parse);
            let status = run(r, lc, &vars, move |l| put(l, &temp, &path, &conf, date)).await;
            (status, true)
        }
        "MKCOL" => {
            if !slash {
                log(Level::Error, "MKCOL can create a collection only");
                return Outcome::Error(409);
            }
            let dir = fs::strip_slash(&path);
            let mode = fs::dir_access(conf.access());
            let status = run(r, lc, &vars, move |l| {
                match std::fs::DirBuilder::new().mode(mode).create(&dir) {
                    Ok(()) => 201,
                    Err(e) => fs::error(l, &e, 409, "mkdir()", &dir),
                }
            })
            .await;
            (status, true)
        }
        "DELETE" => {
            if let Some(min) = conf.min_delete_depth.filter(|&m| m > 0) {
                let (mut d, mut ok) = (0, false);
                for (i, c) in uri.bytes().enumerate() {
                    if c == b'/' {
                        d += 1;
                        if d >= min && i + 1 < uri.len() {
                            ok = true;
                            break;
                        }
                    }
                }
                if !ok {
                    log(
                        Level::Error,
                        &format!("insufficient URI depth:{d} to DELETE"),
                    );
                    return Outcome::Error(409);
                }
            }
            let depth = header("depth");
            let status = run(r, lc, &vars, move |l| delete(l, &path, slash, depth)).await;
            (status, false)
        }
        _ => {
            let copy = match copy_move_args(r, uri, method, &log) {
                Ok(c) => c,
                Err(status) => return Outcome::Error(status),
            };
            let to = lc.doc_root().map(&copy.dest_uri, Some(&vars));
            let (uri, method) = (uri.to_string(), method.to_string());
            let status = run(r, lc, &vars, move |l| {
                copy_move(l, &path, &to, &uri, &method, &copy, conf.access())
            })
            .await;
            (status, false)
        }
    };
    if status >= 300 {
        return Outcome::Error(status);
    }
    let mut reply = Box::new(error_reply(status, lc));
    if status == 201 && created {
        let mut escaped = Vec::with_capacity(uri.len());
        super::proxy::request::escape_uri(uri.as_bytes(), &mut escaped);
        let escaped = String::from_utf8_lossy(&escaped);
        reply.redirect_to_path(lc, &escaped, r.host, r.info, r.srv);
    }
    Outcome::Reply(reply)
}

/// Runs `work` on the location's thread pool (`aio threads`), else (or when the pool's queue
/// is full) here; then writes the lines it logged.
async fn run<F>(r: &Req<'_, '_>, lc: &LocConf, vars: &crate::variables::Vars<'_>, work: F) -> u16
where
    F: FnOnce(&mut Log) -> u16 + Send + 'static,
{
    let conn = r.info.number;
    // A pool named by a variable that names none is logged; nginx's DAV module uses no pool
    // at all, so the work runs here then.
    let pool = super::aio::pool_for(lc.aio.as_ref(), vars, r, "")
        .ok()
        .flatten();
    let work = Arc::new(Mutex::new(Some(work)));
    let go = |work: &Mutex<Option<F>>| {
        let mut log = Log::default();
        let status = match work.lock().ok().and_then(|mut w| w.take()) {
            Some(w) => w(&mut log),
            None => 500,
        };
        (status, log)
    };
    let posted = pool.and_then(|p| {
        let w = work.clone();
        p.post(move || go(&w)).ok()
    });
    let (status, log) = match posted {
        Some(done) => done.await.unwrap_or_else(|_| (500, Log::default())),
        None => go(&work),
    };
    for (level, line) in log.0 {
        crate::conn_log!(level, conn, "{line}{}", r.log_ctx());
    }
    status
}

/// PUT, once the body is in `temp`: renamed over `path` (201 if it is new, 204 if it
/// replaced a file; 409 over a directory).
fn put(
    log: &mut Log,
    temp: &Path,
    path: &Path,
    conf: &DavLoc,
    date: Option<std::time::SystemTime>,
) -> u16 {
    let status = match std::fs::metadata(path) {
        Err(_) => 201,
        Ok(m) if m.is_dir() => {
            let e = std::io::Error::from_raw_os_error(libc::EISDIR);
            log.0.push((
                Level::Error,
                format!(
                    "\"{}\" could not be created {}",
                    path.display(),
                    shoal_conf::os_error(&e)
                ),
            ));
            if let Err(e) = std::fs::remove_file(temp) {
                fs::error(log, &e, 500, "unlink()", temp);
            }
            return 409;
        }
        Ok(_) => 204,
    };
    let ext = fs::Rename {
        access: Some(conf.access()),
        path_access: conf.access(),
        time: date,
        create_path: conf.create_full_put_path.unwrap_or(false),
        delete_file: true,
    };
    match fs::ext_rename(log, temp, path, &ext) {
        Ok(()) => status,
        Err(()) => 500,
    }
}

/// `client sent invalid "Depth" header: "..."`, logged where nginx reads the header.
fn read_depth(log: &mut Log, value: Option<&[u8]>, dflt: Depth) -> Depth {
    let d = destination::depth(value, dflt);
    if d == Depth::Invalid {
        log.0.push((
            Level::Error,
            format!(
                "client sent invalid \"Depth\" header: \"{}\"",
                String::from_utf8_lossy(value.unwrap_or_default())
            ),
        ));
    }
    d
}

/// DELETE: a file (`Depth` 0 or infinity), or a directory named with its slash (`Depth`
/// infinity) and everything in it.
fn delete(log: &mut Log, path: &Path, slash: bool, depth: Option<Vec<u8>>) -> u16 {
    let m = match std::fs::symlink_metadata(path) {
        Ok(m) => m,
        Err(e) => {
            let not_found = if e.raw_os_error() == Some(libc::ENOTDIR) {
                409
            } else {
                404
            };
            return fs::error(log, &e, not_found, "lstat()", path);
        }
    };
    let dir = m.is_dir();
    if dir {
        if !slash {
            let e = std::io::Error::from_raw_os_error(libc::EISDIR);
            log.0.push((
                Level::Error,
                format!(
                    "DELETE \"{}\" failed {}",
                    path.display(),
                    shoal_conf::os_error(&e)
                ),
            ));
            return 409;
        }
        if read_depth(log, depth.as_deref(), Depth::Infinity) != Depth::Infinity {
            log.0
                .push((Level::Error, "\"Depth\" header must be infinity".into()));
            return 400;
        }
    } else if !matches!(
        read_depth(log, depth.as_deref(), Depth::Zero),
        Depth::Zero | Depth::Infinity
    ) {
        log.0.push((
            Level::Error,
            "\"Depth\" header must be 0 or infinity".into(),
        ));
        return 400;
    }
    let target = if dir {
        fs::strip_slash(path)
    } else {
        path.to_path_buf()
    };
    match fs::delete_path(log, &target, dir) {
        Ok(()) => 204,
        Err(s) => s,
    }
}

/// What COPY and MOVE read from the request, checked on the worker.
struct CopyArgs {
    /// The destination's path, decoded.
    dest_uri: String,
    /// `Destination` as sent (for log lines).
    dest: String,
    overwrite: bool,
}

/// nginx's checks of `Destination`, `Depth` and `Overwrite`, in its order; `Err` is the
/// status (logged).
fn copy_move_args(
    r: &Req<'_, '_>,
    uri: &str,
    method: &str,
    log: &dyn Fn(Level, &str),
) -> Result<CopyArgs, u16> {
    let Some(dest) = r.req.header("destination") else {
        log(Level::Error, "client sent no \"Destination\" header");
        return Err(400);
    };
    let dest_text = String::from_utf8_lossy(dest).into_owned();
    let host = r.req.host();
    let dest_uri = match destination::parse(dest, host, r.info.tls.is_some()) {
        Ok(p) => p,
        Err(Refused::NoHost) => {
            log(Level::Error, "client sent no \"Host\" header");
            return Err(400);
        }
        Err(Refused::OtherHost) => {
            log(
                Level::Error,
                &format!(
                    "\"Destination\" URI \"{dest_text}\" is handled by different repository than the source URI"
                ),
            );
            return Err(400);
        }
        Err(Refused::Invalid { unsafe_uri }) => {
            if let Some(u) = unsafe_uri {
                log(
                    Level::Error,
                    &format!(
                        "unsafe URI \"{}\" was detected",
                        String::from_utf8_lossy(&u)
                    ),
                );
            }
            log(
                Level::Error,
                &format!("client sent invalid \"Destination\" header: \"{dest_text}\""),
            );
            return Err(400);
        }
    };
    let dest_uri = String::from_utf8_lossy(&dest_uri).into_owned();
    // nginx looks at the header's last byte, arguments and all.
    if uri.ends_with('/') != dest.ends_with(b"/") {
        log(
            Level::Error,
            &format!(
                "both URI \"{uri}\" and \"Destination\" URI \"{dest_text}\" should be either collections or non-collections"
            ),
        );
        return Err(409);
    }
    let depth_value = r.req.header("depth");
    let depth = destination::depth(depth_value, Depth::Infinity);
    if depth == Depth::Invalid {
        log(
            Level::Error,
            &format!(
                "client sent invalid \"Depth\" header: \"{}\"",
                String::from_utf8_lossy(depth_value.unwrap_or_default())
            ),
        );
    }
    if depth != Depth::Infinity {
        if method == "COPY" && depth != Depth::Zero {
            log(Level::Error, "\"Depth\" header must be 0 or infinity");
            return Err(400);
        }
        if method != "COPY" {
            log(Level::Error, "\"Depth\" header must be infinity");
            return Err(400);
        }
    }
    let overwrite = match r.req.header("overwrite") {
        None => true,
        Some(b"T" | b"t") => true,
        Some(b"F" | b"f") => false,
        Some(v) => {
            log(
                Level::Error,
                &format!(
                    "client sent invalid \"Overwrite\" header: \"{}\"",
                    String::from_utf8_lossy(v)
                ),
            );
            return Err(400);
        }
    };
    Ok(CopyArgs {
        dest_uri,
        dest: dest_text,
        overwrite,
    })
}

/// COPY or MOVE of `path` (for `uri`) to `to`, as `ngx_http_dav_copy_move_handler`.
fn copy_move(
    log: &mut Log,
    path: &Path,
    to: &Path,
    uri: &str,
    method: &str,
    a: &CopyArgs,
    access: u32,
) -> u16 {
    let (to, slash) = match to.as_os_str().as_encoded_bytes().ends_with(b"/") {
        true => (fs::strip_slash(to), true),
        false => (to.to_path_buf(), false),
    };
    let mut overwrite = a.overwrite;
    let dest_dir = match std::fs::symlink_metadata(&to) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            overwrite = false;
            false
        }
        Err(e) => return fs::error(log, &e, 404, "lstat()", &to),
        Ok(m) => {
            if m.is_dir() && !slash {
                log.0.push((
                    Level::Error,
                    format!(
                        "\"{uri}\" could not be {method}ed to collection \"{}\"",
                        a.dest
                    ),
                ));
                return 409;
            }
            if !overwrite {
                let e = std::io::Error::from_raw_os_error(libc::EEXIST);
                log.0.push((
                    Level::Error,
                    format!(
                        "\"{}\" could not be created {}",
                        to.display(),
                        shoal_conf::os_error(&e)
                    ),
                ));
                return 412;
            }
            m.is_dir()
        }
    };
    let src = match std::fs::symlink_metadata(path) {
        Ok(m) => m,
        Err(e) => return fs::error(log, &e, 404, "lstat()", path),
    };
    if src.is_dir() {
        if !uri.ends_with('/') {
            log.0
                .push((Level::Error, format!("\"{uri}\" is collection")));
            return 400;
        }
        if overwrite {
            if let Err(s) = fs::delete_path(log, &to, dest_dir) {
                return s;
            }
        }
        let from = fs::strip_slash(path);
        if method == "MOVE" && std::fs::rename(&from, &to).is_ok() {
            return 201;
        }
        let mode = src.mode() & 0o777;
        if let Err(e) = std::fs::DirBuilder::new().mode(mode).create(&to) {
            return fs::error(log, &e, 404, "mkdir()", &to);
        }
        if fs::copy_tree(log, &from, &to).is_err() {
            return 500;
        }
        if method == "MOVE" {
            if let Err(s) = fs::delete_path(log, &from, true) {
                return s;
            }
        }
        return 201;
    }
    if method == "MOVE" {
        let ext = fs::Rename {
            access: None,
            path_access: access,
            time: None,
            create_path: true,
            delete_file: false,
        };
        return match fs::ext_rename(log, path, &to, &ext) {
            Ok(()) => 204,
            Err(()) => 500,
        };
    }
    let cf = fs::CopyFile {
        size: Some(src.len()),
        access: Some(src.mode() & 0o777),
        time: Some(
            std::time::UNIX_EPOCH + std::time::Duration::from_secs(src.mtime().max(0) as u64),
        ),
    };
    match fs::copy_file(log, path, &to, &cf) {
        Ok(()) => 204,
        Err(()) => 500,
    }
}
