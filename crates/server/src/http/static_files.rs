//! Static content: files and directories under `root`/`alias`, `index`, ETag and
//! Last-Modified with 304s (`etag`, `if_modified_since`), byte ranges (206, multipart, 416,
//! `If-Range`, `max_ranges`), `disable_symlinks`, and nginx's answers and log lines for what
//! is missing or forbidden.
//!
//! Runs on the worker. Opening and stat-ing a file happen inline for now; the thread-pool issue
//! moves cold reads and slow paths off the worker.

use std::borrow::Cow;
use std::ffi::OsStr;
use std::io::ErrorKind;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Component, Path};

use super::open_file_cache;

use super::reply::{error_reply, Body, Outcome, Reply};
use super::request::{LazyVars, Req};
use super::transport::ConnInfo;
use super::{LocConf, ServerConf};
use crate::log::Level;

/// Bodies up to this size are read and sent with the head in one write.
pub const SMALL_FILE: usize = 32 * 1024;

/// Answers `uri` from the file system, as nginx's index and static modules do.
/// A POST is looked up like a GET (so a missing file is a 404, a directory a 301) and refused
/// with a 405 only when it finds a file, as nginx's static module does.
pub fn handle(r: &Req<'_, '_>, lc: &LocConf, method: &str, uri: &str, vars: &LazyVars) -> Outcome {
    if !matches!(method, "GET" | "HEAD" | "POST") {
        return Outcome::Reply(Box::new(error_reply(405, lc)));
    }
    if uri.ends_with('/') {
        return index(r, lc, method, uri, vars);
    }
    Outcome::Reply(serve_file(r, lc, uri, vars, method == "POST"))
}

/// The file `uri` maps to (the request's variables made only for a root that has some).
fn file_of(lc: &LocConf, uri: &str, vars: &LazyVars) -> std::path::PathBuf {
    let root = lc.doc_root();
    root.map(uri, root.template.as_ref().map(|_| vars.get()))
}

/// `index`, as `ngx_http_index_handler`: the first index file that exists (a stat, so a file
/// or a directory) is reached by an internal redirect, so its location applies; an absolute
/// name is redirected to when reached. A name that fails with ENOTDIR or EACCES ends the
/// search (404, 403); at the first that does not exist, the directory itself is checked (a
/// missing one is a 404). Nothing found in an existing directory: its listing with
/// `autoindex on` (GET and HEAD), else 403, from nginx's content phase.
fn index(r: &Req<'_, '_>, lc: &LocConf, method: &str, uri: &str, vars: &LazyVars) -> Outcome {
    // The directory's path with room for a name after it: each candidate is made in place
    // (the room of the longest fixed name; a name from variables may grow it).
    let room = lc.index().iter().map(|n| n.text.len()).max().unwrap_or(0);
    let root = lc.doc_root();
    let vars_of = root.template.as_ref().map(|_| vars.get());
    let mut path = root
        .map_with_room(uri, vars_of, room)
        .into_os_string()
        .into_vec();
    let dir_len = path.len();
    let mut dir_tested = false;
    for index_name in lc.index() {
        let evaluated;
        let name = match &index_name.template {
            Some(t) => {
                evaluated = vars.get().eval(t);
                &evaluated
            }
            None => &index_name.text,
        };
        if name.starts_with('/') {
            return Outcome::Internal(name.clone());
        }
        path.truncate(dir_len);
        path.extend_from_slice(name.as_bytes());
        let candidate = Path::new(OsStr::from_bytes(&path));
        let internal = || {
            let mut target = String::with_capacity(uri.len() + name.len());
            target.push_str(uri);
            target.push_str(name);
            target
        };
        // With `open_file_cache`, a cached index file needs no stat (nginx's index module
        // tests through the cache too); a miss or an error is decided by the stat below.
        if lc.open_file_cache.enabled() && open_file_cache::open(lc, candidate).is_ok() {
            return Outcome::Internal(internal());
        }
        let err = match std::fs::metadata(candidate) {
            Ok(_) => return Outcome::Internal(internal()),
            Err(e) => e,
        };
        let errno = err.raw_os_error();
        if matches!(
            errno,
            Some(libc::ENOTDIR | libc::ENAMETOOLONG | libc::EACCES)
        ) {
            return Outcome::Reply(Box::new(index_error(r, lc, candidate, &err)));
        }
        if !dir_tested {
            // The directory, without the URI's trailing slash.
            let d = Path::new(OsStr::from_bytes(&path[..dir_len - 1]));
            match std::fs::metadata(d) {
                Ok(m) if m.is_dir() => {}
                Ok(_) => {
                    crate::conn_log!(
                        Level::Alert,
                        r.info.number,
                        "\"{}\" is not a directory{}",
                        d.display(),
                        r.log_ctx()
                    );
                    return Outcome::Reply(Box::new(error_reply(500, lc)));
                }
                Err(e) if e.kind() == ErrorKind::NotFound => {
                    return Outcome::Reply(Box::new(index_error(r, lc, candidate, &e)));
                }
                Err(e) => {
                    crate::conn_log!(
                        Level::Crit,
                        r.info.number,
                        "stat() \"{}\" failed {}{}",
                        d.display(),
                        shoal_conf::os_error(&e),
                        r.log_ctx()
                    );
                    return Outcome::Reply(Box::new(error_reply(500, lc)));
                }
            }
            dir_tested = true;
        }
        if err.kind() != ErrorKind::NotFound {
            crate::conn_log!(
                Level::Crit,
                r.info.number,
                "stat() \"{}\" failed {}{}",
                candidate.display(),
                shoal_conf::os_error(&err),
                r.log_ctx()
            );
            return Outcome::Reply(Box::new(error_reply(500, lc)));
        }
    }
    path.truncate(dir_len);
    let dir = std::path::PathBuf::from(std::ffi::OsString::from_vec(path));
    if super::autoindex::wanted(lc, method) {
        return Outcome::Autoindex(dir);
    }
    crate::conn_log!(
        Level::Error,
        r.info.number,
        "directory index of \"{}\" is forbidden{}",
        dir.display(),
        r.log_ctx()
    );
    Outcome::Reply(Box::new(error_reply(403, lc)))
}

/// `ngx_http_index_error`: 403 for EACCES, else 404 (logged unless `log_not_found off`).
fn index_error(r: &Req<'_, '_>, lc: &LocConf, path: &Path, e: &std::io::Error) -> Reply {
    if e.kind() == ErrorKind::PermissionDenied {
        crate::conn_log!(
            Level::Error,
            r.info.number,
            "\"{}\" is forbidden {}{}",
            path.display(),
            shoal_conf::os_error(e),
            r.log_ctx()
        );
        return error_reply(403, lc);
    }
    if lc.log_not_found() {
        crate::conn_log!(
            Level::Error,
            r.info.number,
            "\"{}\" is not found {}{}",
            path.display(),
            shoal_conf::os_error(e),
            r.log_ctx()
        );
    }
    error_reply(404, lc)
}

/// Where `disable_symlinks on` finds a symbolic link in a path.
#[derive(PartialEq)]
enum Symlink {
    None,
    /// A directory on the way: nginx's `O_DIRECTORY|O_NOFOLLOW` open of it fails with ENOTDIR.
    OnTheWay,
    /// The file itself: its `O_NOFOLLOW` open fails with ELOOP.
    Last,
}

/// `disable_symlinks on`: no component of the path past its first `skip` bytes (`from=`'s
/// part) may be a symbolic link.
fn find_symlink(path: &Path, skip: usize) -> Symlink {
    let mut cur = std::path::PathBuf::new();
    let mut components = path.components().peekable();
    while let Some(c) = components.next() {
        cur.push(c);
        if matches!(c, Component::Normal(_))
            && cur.as_os_str().len() > skip
            && std::fs::symlink_metadata(&cur).is_ok_and(|m| m.file_type().is_symlink())
        {
            return if components.peek().is_some() {
                Symlink::OnTheWay
            } else {
                Symlink::Last
            };
        }
    }
    Symlink::None
}

/// `disable_symlinks on from=PART`: how many leading bytes of `path` are not checked
/// (`None`: none of it is), as nginx settles it. PART must be the start of the path and end
/// at a component's end; a PART that is the whole path turns the check off; any other PART
/// leaves the whole path checked.
fn symlinks_from(lc: &LocConf, path: &Path, vars: &LazyVars) -> Option<usize> {
    let Some(Some(t)) = &lc.disable_symlinks_from else {
        return Some(0);
    };
    let from = vars.get().eval(t);
    let path = path.as_os_str().as_encoded_bytes();
    let from = from.as_bytes();
    if from.is_empty() || !path.starts_with(from) {
        return Some(0);
    }
    if from.len() == path.len() {
        return None;
    }
    if path[from.len()] == b'/' {
        return Some(from.len());
    }
    Some(if from.ends_with(b"/") {
        from.len() - 1
    } else {
        0
    })
}

fn serve_file(r: &Req<'_, '_>, lc: &LocConf, uri: &str, vars: &LazyVars, post: bool) -> Box<Reply> {
    let full = file_of(lc, uri, vars);
    let skip = match lc.disable_symlinks() {
        true => symlinks_from(lc, &full, vars),
        false => None,
    };
    if let Some(skip) = skip {
        let (code, why) = match find_symlink(&full, skip) {
            Symlink::None => (0, ""),
            Symlink::OnTheWay => (404, "20: Not a directory"),
            Symlink::Last => (403, "40: Too many levels of symbolic links"),
        };
        if code != 0 {
            if code != 404 || lc.log_not_found() {
                crate::conn_log!(
                    Level::Error,
                    r.info.number,
                    "open() \"{}\" failed ({}){}",
                    full.display(),
                    why,
                    r.log_ctx()
                );
            }
            return Box::new(error_reply(code, lc));
        }
    }
    // `gzip_static`: a precompressed FILE.gz goes out as it is, with Content-Encoding: gzip
    // and without ranges. A client that does not take it still learns, with `gzip_vary on`,
    // that the answer varies (nginx's gzip_static handler does both).
    let mut precompressed = false;
    let mut vary_for_static = false;
    let mut path = Cow::Borrowed(full.as_path());
    let opened = if lc.gzip.static_() != super::gzip::GzipStatic::Off {
        let mut gz = full.clone().into_os_string();
        gz.push(".gz");
        let gz = std::path::PathBuf::from(gz);
        let gz_file = open_file_cache::open(lc, &gz)
            .ok()
            .filter(|o| !o.info.is_dir);
        match gz_file {
            Some(o) if super::gzip::static_wanted(&lc.gzip, r.req) => {
                precompressed = true;
                path = Cow::Owned(gz);
                Ok(o)
            }
            Some(_) => {
                vary_for_static = lc.gzip.vary();
                open_file_cache::open(lc, &full)
            }
            None => open_file_cache::open(lc, &full),
        }
    } else {
        open_file_cache::open(lc, &full)
    };
    let opened = match opened {
        Ok(o) => o,
        Err(e) => {
            let (code, level) = match e.kind() {
                ErrorKind::NotFound => (404, Level::Error),
                ErrorKind::PermissionDenied => (403, Level::Error),
                _ if e.raw_os_error() == Some(libc::ENOTDIR) => (404, Level::Error),
                _ if e.raw_os_error() == Some(libc::ENAMETOOLONG) => (404, Level::Error),
                _ => (500, Level::Crit),
            };
            if code != 404 || lc.log_not_found() {
                crate::conn_log!(
                    level,
                    r.info.number,
                    "open() \"{}\" failed {}{}",
                    full.display(),
                    shoal_conf::os_error(&e),
                    r.log_ctx()
                );
            }
            return Box::new(error_reply(code, lc));
        }
    };
    let Some(file) = opened.file.clone().filter(|_| !opened.info.is_dir) else {
        let mut reply = Box::new(error_reply(301, lc));
        let mut target = format!("{uri}/");
        if let Some(q) = r.req.query() {
            target.push('?');
            target.push_str(&shoal_http::lossy(q));
        }
        reply.redirect_to_path(lc, &target, r.host, r.info, r.srv);
        return reply;
    };
    if post {
        return Box::new(error_reply(405, lc));
    }
    let mtime = opened.info.mtime;
    let size = opened.info.size;
    // `read_ahead`: nginx's hint for a file over its NGX_MIN_READ_AHEAD (128 KiB).
    if lc.read_ahead() > 0 && size > 128 * 1024 {
        if let Err(e) = shoal_io::file::advise_sequential(&file) {
            crate::conn_log!(
                Level::Alert,
                r.info.number,
                "posix_fadvise(POSIX_FADV_SEQUENTIAL) \"{}\" failed {}{}",
                full.display(),
                shoal_conf::os_error(&e),
                r.log_ctx()
            );
        }
    }
    // `directio SIZE`: files this large bypass the page cache (and sendfile), as nginx.
    let direct = lc.directio().is_some_and(|t| size >= t);
    let mut reply = Reply::boxed(200);
    reply.set_content_type(uri_content_type(lc, uri));
    reply.last_modified = Some(shoal_http::date::format_unix_recent(mtime.max(0) as u64));
    reply.mtime = Some(mtime);
    if lc.etag() {
        reply
            .headers
            .push(("ETag", String::from(&*opened.info.etag).into()));
    }
    if precompressed {
        reply.headers.push(("Content-Encoding", "gzip".into()));
    }
    if (precompressed || vary_for_static) && lc.gzip.vary() {
        super::gzip::add_vary(&mut reply);
    }
    reply.body = Body::File {
        file,
        offset: 0,
        len: size,
        cached: if direct {
            None
        } else {
            open_file_cache::small_content(lc, &opened, SMALL_FILE)
        },
    };
    if direct {
        reply.direct = Some((path.into_owned(), lc.directio_alignment() as usize));
    }
    // The 304/412 and 206/416 decisions are the header filters' (`phases::finish`), made on
    // this 200 in nginx's order, whatever produced it (an `error_page ... =200` too). The
    // gzip_static answer takes no ranges (nginx's handler does not allow them).
    reply.allow_ranges = !precompressed;
    reply
}

/// The type of an answer for `uri`, as `ngx_http_set_content_type`: from the URI's extension
/// (after the last `.` of the last segment, unless the segment starts with it), looked up in
/// `types` (as written, then lowercased), else `default_type`. nginx types by the URI, not by
/// the file: an `alias` to `x.txt` at `/one` is `default_type`.
pub fn uri_content_type<'a>(lc: &'a LocConf, uri: &str) -> &'a str {
    let b = uri.as_bytes();
    let mut exten = None;
    let mut i = b.len();
    while i > 2 {
        i -= 1;
        if b[i] == b'.' && b[i - 1] != b'/' {
            exten = Some(&uri[i + 1..]);
            break;
        }
        if b[i] == b'/' {
            break;
        }
    }
    if let (Some(ext), Some(types)) = (exten, &lc.types) {
        if let Some(t) = types
            .get(ext)
            .or_else(|| types.get(&ext.to_ascii_lowercase()))
        {
            return t;
        }
    }
    lc.default_type.as_deref().unwrap_or("text/plain")
}

/// A `Location` for a local path, as nginx builds it: absolute with `absolute_redirect on`
/// (the default) from the Host (or the server name with `server_name_in_redirect on`) and the
/// local port unless `port_in_redirect off` or the port is the scheme's (80, 443 over TLS);
/// the path alone otherwise.
pub fn absolute_location(
    lc: &LocConf,
    path: &str,
    host: Option<&str>,
    info: &ConnInfo,
    srv: &ServerConf,
) -> String {
    if !lc.absolute_redirect() {
        return path.to_string();
    }
    // Without a Host (HTTP/1.0), nginx names the local address, not the server.
    let name = if lc.server_name_in_redirect() && !srv.name().is_empty() {
        srv.name().to_string()
    } else if let Some(h) = host {
        h.to_string()
    } else {
        match info.local {
            Some(l) => match l.ip() {
                std::net::IpAddr::V6(v6) => format!("[{v6}]"),
                v4 => v4.to_string(),
            },
            None => "localhost".to_string(),
        }
    };
    // `https` and its default port on a TLS connection.
    let (scheme, default_port) = match info.tls {
        Some(_) => ("https", 443),
        None => ("http", 80),
    };
    let port = match info.local {
        Some(l) if lc.port_in_redirect() && l.port() != default_port => {
            format!(":{}", l.port())
        }
        _ => String::new(),
    };
    format!("{scheme}://{name}{port}{path}")
}
