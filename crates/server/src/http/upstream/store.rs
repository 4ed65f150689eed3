//! `*_store on | off | PATH` and `*_store_access` (nginx's proxy, fastcgi, uwsgi and scgi
//! modules, one implementation on the upstream layer): a 200 answer is kept as a file, as a
//! mirror of the upstream.
//!
//! As nginx does it: the body is written, as it goes to the client, to a temporary file in
//! the protocol's `*_temp_path`; once it was read whole (and as long as the upstream's
//! `Content-Length` said, when it said one) the file gets `*_store_access`'s mode and the
//! upstream's `Last-Modified` as its time, and is renamed to the URI's path under
//! `root`/`alias` (`on`) or to the evaluated PATH, the directories on the way created. An
//! answer cut short leaves nothing. Only a buffered answer is stored (`*_buffering off` stores
//! nothing), and the answer is read to its end even if the client goes.
//!
//! The writes are made on the worker, as the proxy cache's are without `aio_write`.

use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};

use shoal_conf::{Directive, Error};

use super::conf::{Proto, UpstreamLoc};
use crate::conf::{directive_err, err, Builder, Scope};
use crate::http::loc_conf;
use crate::log::Level;
use crate::variables::Template;

/// `*_store`'s value.
#[derive(Clone, Debug)]
pub enum Store {
    Off,
    /// `on`: the URI's file under `root` or `alias`.
    Root,
    /// A path with variables.
    Path(Template),
}

/// The directives at location level, in each protocol's [`UpstreamLoc`].
#[derive(Clone, Debug, Default)]
pub struct StoreLoc {
    pub store: Option<Store>,
    /// `*_store_access` as a file mode.
    pub access: Option<u32>,
}

impl StoreLoc {
    /// Whether answers are stored here.
    pub fn enabled(&self) -> bool {
        matches!(self.store, Some(Store::Root | Store::Path(_)))
    }

    /// `*_store_access` (default `user:rw`).
    pub fn access(&self) -> u32 {
        self.access.unwrap_or(0o600)
    }

    pub fn merge(&mut self, parent: &StoreLoc) {
        crate::conf::merge(&mut self.store, &parent.store);
        crate::conf::merge(&mut self.access, &parent.access);
    }
}

/// The settings of the protocol the directive `d` names by its prefix.
fn up<'a>(s: &'a mut Scope<'_>, d: &Directive) -> &'a mut UpstreamLoc {
    Proto::of_directive(&d.name).conf_mut(loc_conf(s))
}

/// `*_store on | off | PATH`; refused beside the protocol's `*_cache`, as nginx does.
pub fn set_store(_: &mut Builder, d: &Directive, s: &mut Scope<'_>) -> Result<(), Error> {
    let up = up(s, d);
    if up.store.store.is_some() {
        return Err(crate::conf::duplicate(d));
    }
    let v = d.args[0].value.as_str();
    let store = match v {
        "off" => Store::Off,
        _ if matches!(
            up.cache.cache,
            Some(
                crate::http::proxy_cache::CacheRef::Zone(_)
                    | crate::http::proxy_cache::CacheRef::Var(_)
            )
        ) =>
        {
            let prefix = d.name.strip_suffix("_store").unwrap_or("proxy");
            return Err(directive_err(
                d,
                &format!("is incompatible with \"{prefix}_cache\""),
            ));
        }
        "on" => Store::Root,
        _ => Store::Path(Template::compile(v).map_err(|m| err(d, m))?),
    };
    up.store.store = Some(store);
    Ok(())
}

/// `*_store_access`.
pub fn set_store_access(_: &mut Builder, d: &Directive, s: &mut Scope<'_>) -> Result<(), Error> {
    let up = up(s, d);
    if up.store.access.is_some() {
        return Err(crate::conf::duplicate(d));
    }
    up.store.access = Some(access_arg(d)?);
    Ok(())
}

/// nginx's `ngx_conf_set_access_slot` (`*_store_access`, `dav_access`): `user:rw|r`,
/// `group:rw|r`, `all:rw|r` as a file mode; the user's `rw` unless `user:` says otherwise.
pub fn access_arg(d: &Directive) -> Result<u32, Error> {
    let mut mode = 0u32;
    let mut user = 0o600;
    for a in &d.args {
        let v = a.value.as_str();
        let invalid = || err(d, format!("invalid value \"{v}\""));
        let (shift, right) = if let Some(r) = v.strip_prefix("user:") {
            user = 0;
            (6, r)
        } else if let Some(r) = v.strip_prefix("group:") {
            (3, r)
        } else if let Some(r) = v.strip_prefix("all:") {
            (0, r)
        } else {
            return Err(invalid());
        };
        let right = match right {
            "rw" => 6,
            "r" => 4,
            _ => return Err(invalid()),
        };
        mode |= right << shift;
    }
    Ok(mode | user)
}

/// Sets a 200 answer's body to be stored, if the location stores the protocol's answers: at
/// the URI (as rewritten) under `root`/`alias`, or the evaluated path.
pub fn attach_for(
    reply: &mut crate::http::reply::Reply,
    lc: &crate::http::LocConf,
    conf: &UpstreamLoc,
    uri: &str,
    vars: &crate::variables::Vars<'_>,
    conn: u64,
) {
    let dest = match &conf.store.store {
        None | Some(Store::Off) => return,
        Some(Store::Root) => lc.doc_root().map(uri, Some(vars)),
        Some(Store::Path(t)) => PathBuf::from(vars.eval(t)),
    };
    attach(reply, conf, dest, conn);
}

/// Sets a 200 answer's body to be stored at `dest` while it is read.
fn attach(reply: &mut crate::http::reply::Reply, conf: &UpstreamLoc, dest: PathBuf, conn: u64) {
    use crate::http::reply::Body;
    if reply.status != 200 {
        return;
    }
    let Body::Upstream(ub) = &mut reply.body else {
        return;
    };
    if !ub.buffering || ub.tee.is_some() {
        return;
    }
    let (file, temp) = match crate::http::temp_file::create_in(conf.temp_path.as_ref(), true) {
        Ok((f, Some(name))) => (f, name),
        Ok((_, None)) => return,
        Err(e) => {
            crate::conn_log!(
                Level::Crit,
                conn,
                "open() temporary file for \"{}\" failed {}",
                dest.display(),
                shoal_conf::os_error(&e)
            );
            return;
        }
    };
    // The upstream's `Last-Modified`: where the head put it (a fresh answer's passes as it
    // came).
    let mtime = match reply.mtime {
        Some(secs) => Some(std::time::UNIX_EPOCH + std::time::Duration::from_secs(secs as u64)),
        None => reply
            .extra
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case("last-modified"))
            .and_then(|(_, v)| shoal_http::date::parse(v.as_bytes())),
    };
    ub.tee = Some(Box::new(StoreFile {
        file: Some(file),
        temp,
        dest,
        expected: ub.length,
        written: 0,
        mode: conf.store.access(),
        mtime,
        conn,
    }));
}

/// The temporary file an answer is written to.
struct StoreFile {
    file: Option<File>,
    temp: PathBuf,
    dest: PathBuf,
    /// The upstream's `Content-Length`.
    expected: Option<u64>,
    written: u64,
    mode: u32,
    mtime: Option<std::time::SystemTime>,
    conn: u64,
}

impl StoreFile {
    fn fail(&mut self, what: &str, path: &Path, e: &std::io::Error) {
        crate::conn_log!(
            Level::Crit,
            self.conn,
            "{what} \"{}\" failed {}",
            path.display(),
            shoal_conf::os_error(e)
        );
        self.file = None;
    }
}

impl crate::http::proxy_cache::serve::Tee for StoreFile {
    fn data(&mut self, d: &[u8]) {
        let Some(f) = self.file.as_mut() else {
            return;
        };
        match f.write_all(d) {
            Ok(()) => self.written += d.len() as u64,
            Err(e) => {
                let temp = self.temp.clone();
                self.fail("write()", &temp, &e);
            }
        }
    }

    fn end(mut self: Box<Self>, complete: bool) {
        let whole = complete && self.expected.is_none_or(|n| n == self.written);
        let Some(file) = self.file.take().filter(|_| whole) else {
            let _ = std::fs::remove_file(&self.temp);
            return;
        };
        use std::os::unix::fs::PermissionsExt;
        if let Err(e) = file.set_permissions(std::fs::Permissions::from_mode(self.mode)) {
            let temp = self.temp.clone();
            self.fail("fchmod()", &temp, &e);
        }
        if let Some(t) = self.mtime {
            let _ = file.set_modified(t);
        }
        drop(file);
        if let Err(e) = place(&self.temp, &self.dest, self.mode) {
            crate::conn_log!(
                Level::Crit,
                self.conn,
                "rename() \"{}\" to \"{}\" failed {}",
                self.temp.display(),
                self.dest.display(),
                shoal_conf::os_error(&e)
            );
            let _ = std::fs::remove_file(&self.temp);
        }
    }
}

/// nginx's `ngx_ext_rename_file`: a rename; the missing directories created (with the
/// file's mode and the search bits its read bits allow) and the rename tried again; across
/// filesystems a copy beside the file, then a rename.
fn place(temp: &Path, dest: &Path, mode: u32) -> std::io::Result<()> {
    match std::fs::rename(temp, dest) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            if let Some(dir) = dest.parent() {
                use std::os::unix::fs::DirBuilderExt;
                let dir_mode = mode | ((mode & 0o444) >> 2);
                std::fs::DirBuilder::new()
                    .recursive(true)
                    .mode(dir_mode)
                    .create(dir)?;
            }
            std::fs::rename(temp, dest).or_else(|e| copy_over(temp, dest, e))
        }
        Err(e) => copy_over(temp, dest, e),
    }
}

fn copy_over(temp: &Path, dest: &Path, e: std::io::Error) -> std::io::Result<()> {
    if e.raw_os_error() != Some(libc::EXDEV) {
        return Err(e);
    }
    let mut beside = dest.as_os_str().to_owned();
    beside.push(format!(".{}", std::process::id()));
    let beside = PathBuf::from(beside);
    let r = std::fs::copy(temp, &beside).and_then(|_| std::fs::rename(&beside, dest));
    let _ = std::fs::remove_file(temp);
    if r.is_err() {
        let _ = std::fs::remove_file(&beside);
    }
    r
}
