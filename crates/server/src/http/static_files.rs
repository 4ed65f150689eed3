//! Static content: files and directories under `root`/`alias`, `index`, ETag and
//! Last-Modified with 304s (`etag`, `if_modified_since`), byte ranges (206, multipart, 416,
//! `If-Range`, `max_ranges`), `disable_symlinks`, and nginx's answers and log lines for what
//! is missing or forbidden.
//!
//! Runs on the worker. Opening and stat-ing a file happen inline for now; the thread-pool issue
//! moves cold reads and slow paths off the worker.

use std::fs::File;
use std::io::ErrorKind;
use std::path::{Component, Path};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::UNIX_EPOCH;

use shoal_http::date::DATE_LEN;
use shoal_http::Request;

use super::conn::ConnInfo;
use super::directives::IfModifiedSince;
use super::phases::Req;
use super::range::{self, Ranges};
use super::{LocConf, ServerConf, ServerTokens};
use crate::log::Level;
use crate::variables::Vars;

/// Bodies up to this size are read and sent with the head in one write.
pub const SMALL_FILE: usize = 32 * 1024;

/// A response body.
pub enum Body {
    Empty,
    Bytes(Vec<u8>),
    File {
        file: File,
        offset: u64,
        len: u64,
    },
    /// A `multipart/byteranges` answer over one file.
    Multipart {
        file: File,
        parts: range::Multipart,
    },
}

impl Body {
    /// The body's length, for `Content-Length` (`None`: no body at all).
    pub fn length(&self) -> Option<u64> {
        match self {
            Body::Empty => None,
            Body::Bytes(b) => Some(b.len() as u64),
            Body::File { len, .. } => Some(*len),
            Body::Multipart { parts, .. } => Some(parts.total_len()),
        }
    }
}

/// A response to send.
pub struct Reply {
    pub status: u16,
    pub content_type: Option<String>,
    pub location: Option<String>,
    pub last_modified: Option<[u8; DATE_LEN]>,
    /// The file's modification time (for `expires modified`).
    pub mtime: Option<i64>,
    /// Headers the handler sets, in nginx's order (ETag, Accept-Ranges, Content-Range, ...).
    pub headers: Vec<(&'static str, String)>,
    /// Headers from `add_header`.
    pub extra: Vec<(String, String)>,
    pub body: Body,
}

impl Reply {
    /// A reply with `status` and nothing else.
    pub fn new(status: u16) -> Reply {
        Reply {
            status,
            content_type: None,
            location: None,
            last_modified: None,
            mtime: None,
            headers: Vec::new(),
            extra: Vec::new(),
            body: Body::Empty,
        }
    }

    /// The response headers beyond the fixed ones, lowercase, for `$sent_http_*`.
    pub fn header_list(&self) -> Vec<(String, String)> {
        let mut out = Vec::with_capacity(self.headers.len() + self.extra.len() + 3);
        if let Some(t) = &self.content_type {
            out.push(("content-type".into(), t.clone()));
        }
        if let Some(n) = self.body.length() {
            out.push(("content-length".into(), n.to_string()));
        }
        if let Some(l) = &self.location {
            out.push(("location".into(), l.clone()));
        }
        for (n, v) in &self.headers {
            out.push((n.to_ascii_lowercase(), v.clone()));
        }
        for (n, v) in &self.extra {
            out.push((n.to_ascii_lowercase(), v.clone()));
        }
        out
    }
}

/// What a content handler decided.
pub enum Outcome {
    Reply(Reply),
    /// An internal redirect to this URI (index files, `try_files`' fallback).
    Internal(String),
    /// An internal redirect to a named location.
    Named(String),
}

/// nginx's error answer for `code`: its HTML page (or an empty body where nginx sends none).
pub fn error_reply(code: u16, lc: &LocConf) -> Reply {
    let tokens = match lc.server_tokens() {
        ServerTokens::On => shoal_http::ServerTokens::On,
        ServerTokens::Off => shoal_http::ServerTokens::Off,
        ServerTokens::Build => shoal_http::ServerTokens::Build,
    };
    let mut r = Reply::new(code);
    if let Some(page) = shoal_http::error_page(code, tokens) {
        r.content_type = Some("text/html".into());
        r.body = Body::Bytes(page.to_vec());
    }
    r
}

/// Context for log lines: `, client: ..., server: ..., request: "...", host: "..."`.
pub fn log_ctx(req: &Request, srv: &ServerConf, info: &ConnInfo) -> String {
    let mut s = format!(
        ", client: {}, server: {}, request: \"{} {} {}\"",
        info.client(),
        srv.name(),
        req.method(),
        String::from_utf8_lossy(req.uri()),
        req.version().as_str()
    );
    if let Some(h) = req.header("host") {
        s.push_str(&format!(", host: \"{}\"", String::from_utf8_lossy(h)));
    }
    s
}

/// Answers `uri` from the file system, as nginx's index and static modules do.
pub fn handle(r: &Req<'_, '_>, lc: &LocConf, method: &str, uri: &str, vars: &Vars<'_>) -> Outcome {
    if method != "GET" && method != "HEAD" {
        return Outcome::Reply(error_reply(405, lc));
    }
    if uri.ends_with('/') {
        return index(r, lc, uri, vars);
    }
    Outcome::Reply(serve_file(r, lc, uri, vars))
}

/// `index`: the first index file that exists, reached by an internal redirect (so its
/// location applies); none: 403 for an existing directory, else 404.
fn index(r: &Req<'_, '_>, lc: &LocConf, uri: &str, vars: &Vars<'_>) -> Outcome {
    let dir = lc.doc_root().map(uri, Some(vars));
    for name in lc.index() {
        if name.starts_with('/') {
            return Outcome::Internal(name.clone());
        }
        let mut candidate = dir.clone().into_os_string();
        candidate.push(name);
        if std::fs::metadata(&candidate).is_ok_and(|m| !m.is_dir()) {
            return Outcome::Internal(format!("{uri}{name}"));
        }
    }
    let reply = match std::fs::metadata(&dir) {
        Ok(m) if m.is_dir() => {
            crate::conn_log!(
                Level::Error,
                r.info.number,
                "directory index of \"{}\" is forbidden{}",
                dir.display(),
                r.log_ctx()
            );
            error_reply(403, lc)
        }
        _ => {
            if lc.log_not_found() {
                let first = lc.index().first().cloned().unwrap_or_default();
                crate::conn_log!(
                    Level::Error,
                    r.info.number,
                    "\"{}{}\" is not found (2: No such file or directory){}",
                    dir.display(),
                    first,
                    r.log_ctx()
                );
            }
            error_reply(404, lc)
        }
    };
    Outcome::Reply(reply)
}

/// `disable_symlinks on`: no component of the path may be a symbolic link.
fn has_symlink(path: &Path) -> bool {
    let mut cur = std::path::PathBuf::new();
    for c in path.components() {
        cur.push(c);
        if matches!(c, Component::Normal(_))
            && std::fs::symlink_metadata(&cur).is_ok_and(|m| m.file_type().is_symlink())
        {
            return true;
        }
    }
    false
}

fn serve_file(r: &Req<'_, '_>, lc: &LocConf, uri: &str, vars: &Vars<'_>) -> Reply {
    let full = lc.doc_root().map(uri, Some(vars));
    if lc.disable_symlinks() && has_symlink(&full) {
        crate::conn_log!(
            Level::Error,
            r.info.number,
            "open() \"{}\" failed (40: Too many levels of symbolic links){}",
            full.display(),
            r.log_ctx()
        );
        return error_reply(403, lc);
    }
    // `gzip_static`: a precompressed FILE.gz goes out as it is, with Content-Encoding: gzip.
    let mut precompressed = false;
    let opened = if super::gzip::static_wanted(&lc.gzip, r.req) {
        let mut gz = full.clone().into_os_string();
        gz.push(".gz");
        match File::open(&gz) {
            Ok(f) if f.metadata().is_ok_and(|m| m.is_file()) => {
                precompressed = true;
                Ok(f)
            }
            _ => File::open(&full),
        }
    } else {
        File::open(&full)
    };
    let file = match opened {
        Ok(f) => f,
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
            return error_reply(code, lc);
        }
    };
    let meta = match file.metadata() {
        Ok(m) => m,
        Err(e) => {
            crate::conn_log!(
                Level::Crit,
                r.info.number,
                "fstat() \"{}\" failed {}{}",
                full.display(),
                shoal_conf::os_error(&e),
                r.log_ctx()
            );
            return error_reply(500, lc);
        }
    };
    if meta.is_dir() {
        let mut reply = error_reply(301, lc);
        let mut target = format!("{uri}/");
        if let Some(q) = r.req.query() {
            target.push('?');
            target.push_str(&String::from_utf8_lossy(q));
        }
        reply.location = Some(absolute_location(lc, &target, r.host, r.info, r.srv));
        return reply;
    }
    let mtime = meta
        .modified()
        .ok()
        .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0);
    let size = meta.len();
    let etag = format!("\"{:x}-{:x}\"", mtime, size);
    let last_modified = shoal_http::date::format_unix(mtime.max(0) as u64);
    if not_modified(r.req, lc, &etag, mtime) {
        let mut reply = Reply::new(304);
        reply.last_modified = Some(last_modified);
        reply.mtime = Some(mtime);
        if lc.etag() {
            reply.headers.push(("ETag", etag));
        }
        return reply;
    }
    let content_type = lc.content_type(&full).to_string();
    let mut reply = Reply::new(200);
    reply.last_modified = Some(last_modified);
    reply.mtime = Some(mtime);
    if lc.etag() {
        reply.headers.push(("ETag", etag.clone()));
    }
    if precompressed {
        reply.headers.push(("Content-Encoding", "gzip".into()));
        if lc.gzip.vary.unwrap_or(false) {
            reply.extra.push(("Vary".into(), "Accept-Encoding".into()));
        }
    }
    // A compressed answer has no length to take ranges of: nginx's gzip filter runs first.
    let compressed = !precompressed && super::gzip::would_compress(&lc.gzip, r.req, &content_type, size);
    let ranges_on = lc.max_ranges() != Some(0) && !compressed;
    let range_header = r
        .req
        .header("range")
        .filter(|_| ranges_on && !r.whole.get());
    let if_range_ok = match r.req.header("if-range") {
        Some(v) => range::if_range_allows(v, if lc.etag() { &etag } else { "" }, mtime),
        None => true,
    };
    match range_header
        .filter(|_| if_range_ok)
        .map(|h| range::parse(h, size, lc.max_ranges()))
    {
        None | Some(Ranges::Full) => {
            if ranges_on {
                reply.headers.push(("Accept-Ranges", "bytes".into()));
            }
            reply.content_type = Some(content_type);
            reply.body = Body::File {
                file,
                offset: 0,
                len: size,
            };
        }
        Some(Ranges::Unsatisfiable) => {
            let mut e = error_reply(416, lc);
            e.headers
                .push(("Content-Range", range::unsatisfiable_content_range(size)));
            return e;
        }
        Some(Ranges::Satisfiable(list)) if list.len() == 1 => {
            let br = &list[0];
            reply.status = 206;
            reply.content_type = Some(content_type);
            reply
                .headers
                .push(("Content-Range", range::content_range(br, size)));
            reply.body = Body::File {
                file,
                offset: br.start,
                len: br.end - br.start,
            };
        }
        Some(Ranges::Satisfiable(list)) => {
            static BOUNDARY: AtomicU64 = AtomicU64::new(1);
            let seed = BOUNDARY.fetch_add(1, Ordering::Relaxed);
            let parts = range::multipart(&list, size, &content_type, seed);
            reply.status = 206;
            reply.content_type = Some(parts.content_type());
            reply.body = Body::Multipart { file, parts };
        }
    }
    reply
}

/// nginx's conditional GET: `If-None-Match` (an ETag or `*`) first, else `If-Modified-Since`
/// compared as `if_modified_since` says (`exact`: equal; `before`: not older).
fn not_modified(req: &Request, lc: &LocConf, etag: &str, mtime: i64) -> bool {
    if let Some(inm) = req.header("if-none-match") {
        if !lc.etag() {
            return false;
        }
        let inm = String::from_utf8_lossy(inm);
        return inm.trim() == "*"
            || inm
                .split(',')
                .map(|t| t.trim().trim_start_matches("W/"))
                .any(|t| t == etag);
    }
    let mode = lc.if_modified_since();
    if mode == IfModifiedSince::Off {
        return false;
    }
    if let Some(ims) = req.header("if-modified-since") {
        if let Some(t) = shoal_http::date::parse(ims) {
            if let Ok(d) = t.duration_since(UNIX_EPOCH) {
                let ims = d.as_secs() as i64;
                return match mode {
                    IfModifiedSince::Exact => ims == mtime,
                    IfModifiedSince::Before => ims >= mtime,
                    IfModifiedSince::Off => false,
                };
            }
        }
    }
    false
}

/// A `Location` for a local path, as nginx builds it: absolute with `absolute_redirect on`
/// (the default) from the Host (or the server name with `server_name_in_redirect on`) and the
/// local port unless `port_in_redirect off` or the port is 80; the path alone otherwise.
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
    let name = if lc.server_name_in_redirect() && !srv.name().is_empty() {
        srv.name().to_string()
    } else if let Some(h) = host {
        h.to_string()
    } else if !srv.name().is_empty() {
        srv.name().to_string()
    } else {
        match info.local {
            Some(l) => match l.ip() {
                std::net::IpAddr::V6(v6) => format!("[{v6}]"),
                v4 => v4.to_string(),
            },
            None => "localhost".to_string(),
        }
    };
    let port = match info.local {
        Some(l) if lc.port_in_redirect() && l.port() != 80 => format!(":{}", l.port()),
        _ => String::new(),
    };
    format!("http://{name}{port}{path}")
}
