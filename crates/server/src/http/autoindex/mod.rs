//! nginx's autoindex module: `autoindex`, `autoindex_exact_size`, `autoindex_format
//! html|xml|json|jsonp` and `autoindex_localtime`: the listing of a directory a request for
//! `.../` reaches when none of its `index` files exists.
//!
//! The listing is nginx's to the byte ([`render`]): entries that do not start with `.`,
//! directories first, then by name as bytes; symbolic links followed (a broken one is listed
//! as itself); HTML names escaped, cut at 50 characters (bytes, unless the answer's charset is
//! UTF-8) with `..>`; JSONP's callback taken from `callback=` and checked as nginx checks it.
//! The answer has no length (chunked, as nginx sends it).
//!
//! Runs on the worker: the directory is read a few hundred entries at a time (each `stat`ed),
//! letting other connections run between batches, so a directory of 10,000 files holds no
//! one up for long (tests/autoindex.rs measures it).

mod render;

use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use shoal_conf::{Directive, Error};

use super::loc_conf;
use super::modules::{Cx, HttpModule};
use super::output::BodyFilter;
use super::reply::{error_reply, Body, Reply};
use super::request::Req;
use super::rewrite;
use super::LocConf;
use crate::conf::{flag_arg, invalid_value, merge, set_once, Args, Builder, Command, Ctx, Scope};
use crate::log::Level;
pub use render::{Entry, Format, Kind};

pub static DIRECTIVES: &[Command] = &[
    Command::new("autoindex", Ctx::HSL, Args::Flag, set_autoindex),
    Command::new("autoindex_exact_size", Ctx::HSL, Args::Flag, set_exact_size),
    Command::new("autoindex_format", Ctx::HSL, Args::ONE, set_format),
    Command::new("autoindex_localtime", Ctx::HSL, Args::Flag, set_localtime),
];

/// The module's settings at one level.
#[derive(Clone, Debug, Default)]
pub struct AutoindexLoc {
    pub enable: Option<bool>,
    pub exact_size: Option<bool>,
    pub format: Option<Format>,
    pub localtime: Option<bool>,
}

impl AutoindexLoc {
    /// `autoindex` (default off).
    pub fn enabled(&self) -> bool {
        self.enable.unwrap_or(false)
    }
}

fn ai<'a>(s: &'a mut Scope<'_>) -> &'a mut AutoindexLoc {
    &mut loc_conf(s).autoindex
}

fn set_autoindex(_: &mut Builder, d: &Directive, s: &mut Scope<'_>) -> Result<(), Error> {
    set_once(&mut ai(s).enable, flag_arg(d), d)
}

fn set_exact_size(_: &mut Builder, d: &Directive, s: &mut Scope<'_>) -> Result<(), Error> {
    set_once(&mut ai(s).exact_size, flag_arg(d), d)
}

fn set_localtime(_: &mut Builder, d: &Directive, s: &mut Scope<'_>) -> Result<(), Error> {
    set_once(&mut ai(s).localtime, flag_arg(d), d)
}

fn set_format(_: &mut Builder, d: &Directive, s: &mut Scope<'_>) -> Result<(), Error> {
    let f = match d.args[0].value.as_str() {
        "html" => Format::Html,
        "xml" => Format::Xml,
        "json" => Format::Json,
        "jsonp" => Format::Jsonp,
        other => return Err(invalid_value(d, other)),
    };
    set_once(&mut ai(s).format, f, d)
}

/// The autoindex module's place in the module list (its handler is reached from the index
/// module's: `static_files`).
pub struct Module;

impl HttpModule for Module {
    type Loc = AutoindexLoc;
    const DIRECTIVES: &'static [Command] = DIRECTIVES;

    fn merge(loc: &mut AutoindexLoc, parent: &AutoindexLoc) {
        merge(&mut loc.enable, &parent.enable);
        merge(&mut loc.exact_size, &parent.exact_size);
        merge(&mut loc.format, &parent.format);
        merge(&mut loc.localtime, &parent.localtime);
    }
}

/// Entries read between two yields to the worker's other connections.
const BATCH: usize = 256;

/// The longest JSONP callback nginx takes.
const MAX_CALLBACK: usize = 128;

/// The listing of `dir` (the URI's directory, with its trailing `/`), as nginx's autoindex
/// handler answers a GET or a HEAD.
pub async fn answer(
    r: &Req<'_, '_>,
    lc: &LocConf,
    rw: &rewrite::State,
    method: &str,
    dir: &Path,
) -> Box<Reply> {
    let conf = &lc.autoindex;
    // The directory without its trailing slash, as nginx names it in its log lines.
    let bytes = dir.as_os_str().as_encoded_bytes();
    let path = if bytes.len() > 1 && bytes.ends_with(b"/") {
        Path::new(std::ffi::OsStr::from_bytes(&bytes[..bytes.len() - 1]))
    } else {
        dir
    };
    let list = match open_dir(r, lc, path) {
        Ok(l) => l,
        Err(reply) => return reply,
    };
    let mut format = conf.format.unwrap_or(Format::Html);
    let mut callback = "";
    if format == Format::Jsonp {
        callback = arg(rw.args.as_deref().unwrap_or(""), "callback").unwrap_or("");
        let why = if callback.len() > MAX_CALLBACK {
            Some("too long")
        } else if !callback
            .bytes()
            .all(|c| c.is_ascii_alphanumeric() || c == b'_' || c == b'.')
        {
            Some("invalid")
        } else {
            None
        };
        if let Some(why) = why {
            crate::conn_log!(
                Level::Info,
                r.info.number,
                "client sent {why} callback name: \"{callback}\"{}",
                r.log_ctx()
            );
            return Box::new(error_reply(400, lc));
        }
        if callback.is_empty() {
            format = Format::Json;
        }
    }
    let mut reply = Reply::boxed(200);
    reply.content_type = Some(format.content_type().to_string());
    // XML says its charset the way an upstream does: the charset filter keeps it.
    reply.charset_param = format == Format::Xml;
    reply.filters.push(Box::new(NoLength::default()));
    if method == "HEAD" {
        return reply;
    }
    let entries = match read(list, path, r).await {
        Ok(e) => e,
        Err(()) => return Box::new(error_reply(500, lc)),
    };
    let cx = Cx {
        r,
        lc,
        rw,
        upstream: None,
    };
    let opts = render::Options {
        format,
        callback,
        uri: &rw.uri,
        exact_size: conf.exact_size.unwrap_or(true),
        localtime: conf.localtime.unwrap_or(false),
        utf8: format == Format::Html && super::charset::html_charset_is_utf8(&cx),
    };
    reply.body = Body::Bytes(render::render(&opts, entries));
    reply
}

/// `NAME`'s value in the arguments, as nginx's `ngx_http_arg` finds it (not unescaped).
fn arg<'a>(args: &'a str, name: &str) -> Option<&'a str> {
    args.split('&').find_map(|pair| {
        let (k, v) = pair.split_once('=')?;
        k.eq_ignore_ascii_case(name).then_some(v)
    })
}

/// Reads the directory's entries, `BATCH` at a time: names not starting with `.`, each
/// `stat`ed (a link that leads nowhere, `lstat`ed). An entry that cannot be looked at for lack
/// of permission is left out (logged); another failure fails the listing.
async fn read(list: std::fs::ReadDir, path: &Path, r: &Req<'_, '_>) -> Result<Vec<Entry>, ()> {
    let mut entries = Vec::new();
    let mut since_yield = 0;
    for de in list {
        since_yield += 1;
        if since_yield == BATCH {
            since_yield = 0;
            tokio::task::yield_now().await;
        }
        let de = match de {
            Ok(de) => de,
            Err(e) => {
                crate::conn_log!(
                    Level::Crit,
                    r.info.number,
                    "readdir() \"{}\" failed {}{}",
                    path.display(),
                    shoal_conf::os_error(&e),
                    r.log_ctx()
                );
                return Err(());
            }
        };
        let name = de.file_name();
        let name = name.as_encoded_bytes();
        if name.first() == Some(&b'.') {
            continue;
        }
        let full = de.path();
        let meta = match std::fs::metadata(&full) {
            Ok(m) => m,
            Err(e) if matches!(e.raw_os_error(), Some(libc::ENOENT | libc::ELOOP)) => {
                match std::fs::symlink_metadata(&full) {
                    Ok(m) => m,
                    Err(e) => {
                        stat_failed(r, "lstat()", &full, &e);
                        return Err(());
                    }
                }
            }
            Err(e) => {
                stat_failed(r, "stat()", &full, &e);
                if e.raw_os_error() == Some(libc::EACCES) {
                    continue;
                }
                return Err(());
            }
        };
        entries.push(Entry::new(name.to_vec(), &meta));
    }
    Ok(entries)
}

/// A directory opened for listing, or nginx's answer when `opendir()` fails (404 for a
/// missing one, 403 for a forbidden one, 500 else, with its log line): `autoindex`'s and
/// `random_index`'s.
pub(super) fn open_dir(
    r: &Req<'_, '_>,
    lc: &LocConf,
    path: &Path,
) -> Result<std::fs::ReadDir, Box<Reply>> {
    std::fs::read_dir(path).map_err(|e| {
        let (code, level) = match e.raw_os_error() {
            Some(libc::ENOENT | libc::ENOTDIR | libc::ENAMETOOLONG) => (404, Level::Error),
            Some(libc::EACCES) => (403, Level::Error),
            _ => (500, Level::Crit),
        };
        crate::conn_log!(
            level,
            r.info.number,
            "opendir() \"{}\" failed {}{}",
            path.display(),
            shoal_conf::os_error(&e),
            r.log_ctx()
        );
        Box::new(error_reply(code, lc))
    })
}

fn stat_failed(r: &Req<'_, '_>, call: &str, path: &Path, e: &io::Error) {
    crate::conn_log!(
        Level::Crit,
        r.info.number,
        "{call} \"{}\" failed {}{}",
        path.display(),
        shoal_conf::os_error(e),
        r.log_ctx()
    );
}

/// A body filter that changes nothing but the framing: the answer is sent without a length
/// (chunked to HTTP/1.1, to the close to HTTP/1.0), as nginx sends a listing.
#[derive(Default)]
struct NoLength {
    out: Vec<u8>,
}

impl BodyFilter for NoLength {
    fn feed(&mut self, data: &[u8]) -> io::Result<&[u8]> {
        self.out.clear();
        self.out.extend_from_slice(data);
        Ok(&self.out)
    }

    fn finish(&mut self) -> io::Result<&[u8]> {
        self.out.clear();
        Ok(&self.out)
    }
}

/// Whether a request the index module found no index file for is listed (nginx's autoindex
/// handler takes GET and HEAD only).
pub fn wanted(lc: &LocConf, method: &str) -> bool {
    lc.autoindex.enabled() && matches!(method, "GET" | "HEAD")
}
