//! Static content: `root`, `index`, files and directories, ETag / Last-Modified with 304s, and
//! nginx's answers and log lines for what is missing or forbidden.
//!
//! Runs on the worker. Opening and stat-ing a file happen inline for now; the thread-pool issue
//! moves slow paths off the worker.

use std::fs::File;
use std::io::ErrorKind;
use std::path::{Path, PathBuf};
use std::time::UNIX_EPOCH;

use shoal_http::date::DATE_LEN;
use shoal_http::Request;

use super::conn::ConnInfo;
use super::{LocConf, ServerConf, ServerTokens};
use crate::log::Level;

/// Bodies up to this size are read and sent with the head in one write.
pub const SMALL_FILE: usize = 32 * 1024;

/// A response body.
pub enum Body {
    Empty,
    Bytes(Vec<u8>),
    Static(&'static [u8]),
    File { file: File, offset: u64, len: u64 },
}

impl Body {
    /// The body's length, for `Content-Length` (`None`: no body at all).
    pub fn length(&self) -> Option<u64> {
        match self {
            Body::Empty => None,
            Body::Bytes(b) => Some(b.len() as u64),
            Body::Static(b) => Some(b.len() as u64),
            Body::File { len, .. } => Some(*len),
        }
    }
}

/// A response to send.
pub struct Reply {
    pub status: u16,
    pub content_type: Option<String>,
    pub location: Option<String>,
    pub last_modified: Option<[u8; DATE_LEN]>,
    pub headers: Vec<(&'static str, String)>,
    pub body: Body,
}

impl Reply {
    /// The response headers beyond the fixed ones, lowercase, for `$sent_http_*`.
    pub fn header_list(&self) -> Vec<(String, String)> {
        let mut out = Vec::with_capacity(self.headers.len() + 3);
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
        out
    }

    fn new(status: u16) -> Reply {
        Reply {
            status,
            content_type: None,
            location: None,
            last_modified: None,
            headers: Vec::new(),
            body: Body::Empty,
        }
    }
}

/// nginx's error answer for `code`: its HTML page (or an empty body where nginx sends none).
pub fn error_reply(code: u16, lc: &LocConf) -> Reply {
    let tokens = match lc.server_tokens() {
        ServerTokens::On => shoal_http::ServerTokens::On,
        ServerTokens::Off => shoal_http::ServerTokens::Off,
        ServerTokens::Build => shoal_http::ServerTokens::Build,
    };
    let mut r = Reply::new(shoal_http::status::wire_status(code));
    if let Some(page) = shoal_http::error_page(code, tokens) {
        r.content_type = Some("text/html".into());
        r.body = Body::Bytes(page.to_vec());
    }
    r
}

/// Context for log lines: `, client: ..., server: ..., request: "...", host: "..."`.
fn log_ctx(req: &Request, srv: &ServerConf, info: &ConnInfo) -> String {
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

/// Answers a request from the file system.
pub fn handle(
    req: &Request,
    srv: &ServerConf,
    lc: &LocConf,
    path: &str,
    host: Option<&str>,
    info: &ConnInfo,
) -> Reply {
    let method = req.method();
    if method != "GET" && method != "HEAD" {
        return error_reply(405, lc);
    }
    if path.ends_with('/') {
        return index(req, srv, lc, path, host, info);
    }
    serve_file(req, srv, lc, path, host, info)
}

/// `index`: the first index file that exists, served as if its URI had been asked for (an
/// internal redirect, so its location applies).
fn index(
    req: &Request,
    srv: &ServerConf,
    lc: &LocConf,
    path: &str,
    host: Option<&str>,
    info: &ConnInfo,
) -> Reply {
    let dir = full_path(lc.root(), path);
    for name in lc.index() {
        let uri = if name.starts_with('/') {
            name.clone()
        } else {
            format!("{path}{name}")
        };
        let target_lc = match super::location::find(&srv.locations, &uri) {
            Some(l) => &l.loc,
            None => &srv.loc,
        };
        let candidate = full_path(target_lc.root(), &uri);
        match std::fs::metadata(&candidate) {
            Ok(m) if !m.is_dir() => return serve_file(req, srv, target_lc, &uri, host, info),
            _ => continue,
        }
    }
    match std::fs::metadata(&dir) {
        Ok(m) if m.is_dir() => {
            crate::conn_log!(
                Level::Error,
                info.number,
                "directory index of \"{}\" is forbidden{}",
                dir.display(),
                log_ctx(req, srv, info)
            );
            error_reply(403, lc)
        }
        _ => {
            let first = lc.index().first().cloned().unwrap_or_default();
            crate::conn_log!(
                Level::Error,
                info.number,
                "\"{}{}\" is not found (2: No such file or directory){}",
                dir.display(),
                first,
                log_ctx(req, srv, info)
            );
            error_reply(404, lc)
        }
    }
}

fn full_path(root: &Path, uri: &str) -> PathBuf {
    let mut p = root.as_os_str().to_owned();
    p.push(uri);
    PathBuf::from(p)
}

fn serve_file(
    req: &Request,
    srv: &ServerConf,
    lc: &LocConf,
    path: &str,
    host: Option<&str>,
    info: &ConnInfo,
) -> Reply {
    let full = full_path(lc.root(), path);
    let file = match File::open(&full) {
        Ok(f) => f,
        Err(e) => {
            let (code, level) = match e.kind() {
                ErrorKind::NotFound => (404, Level::Error),
                ErrorKind::PermissionDenied => (403, Level::Error),
                _ if e.raw_os_error() == Some(libc::ENOTDIR) => (404, Level::Error),
                _ => (500, Level::Crit),
            };
            crate::conn_log!(
                level,
                info.number,
                "open() \"{}\" failed {}{}",
                full.display(),
                shoal_conf::os_error(&e),
                log_ctx(req, srv, info)
            );
            return error_reply(code, lc);
        }
    };
    let meta = match file.metadata() {
        Ok(m) => m,
        Err(e) => {
            crate::conn_log!(
                Level::Crit,
                info.number,
                "fstat() \"{}\" failed {}{}",
                full.display(),
                shoal_conf::os_error(&e),
                log_ctx(req, srv, info)
            );
            return error_reply(500, lc);
        }
    };
    if meta.is_dir() {
        return redirect_to_dir(lc, path, host, info);
    }
    let mtime = meta
        .modified()
        .ok()
        .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let size = meta.len();
    let etag = format!("\"{mtime:x}-{size:x}\"");
    let last_modified = shoal_http::date::format_unix(mtime);
    if not_modified(req, &etag, mtime) {
        let mut r = Reply::new(304);
        r.last_modified = Some(last_modified);
        r.headers.push(("ETag", etag));
        return r;
    }
    let mut r = Reply::new(200);
    r.content_type = Some(lc.content_type(&full).to_string());
    r.last_modified = Some(last_modified);
    r.headers.push(("ETag", etag));
    r.headers.push(("Accept-Ranges", "bytes".into()));
    r.body = Body::File {
        file,
        offset: 0,
        len: size,
    };
    r
}

/// nginx's conditional GET: `If-None-Match` (an ETag or `*`) first, else `If-Modified-Since`
/// equal to the file's time (`if_modified_since exact`, the default).
fn not_modified(req: &Request, etag: &str, mtime: u64) -> bool {
    if let Some(inm) = req.header("if-none-match") {
        let inm = String::from_utf8_lossy(inm);
        return inm.trim() == "*"
            || inm
                .split(',')
                .map(|t| t.trim().trim_start_matches("W/"))
                .any(|t| t == etag);
    }
    if let Some(ims) = req.header("if-modified-since") {
        if let Some(t) = shoal_http::date::parse(ims) {
            if let Ok(d) = t.duration_since(UNIX_EPOCH) {
                return d.as_secs() == mtime;
            }
        }
    }
    false
}

/// A directory asked for without its slash: 301 to it, with an absolute `Location` built from
/// the Host and the local port as nginx does by default (`absolute_redirect on`,
/// `port_in_redirect on`, `server_name_in_redirect off`).
fn redirect_to_dir(lc: &LocConf, path: &str, host: Option<&str>, info: &ConnInfo) -> Reply {
    let mut r = error_reply(301, lc);
    let location = match (host, info.local) {
        (Some(h), Some(local)) => {
            let port = local.port();
            if port == 80 {
                format!("http://{h}{path}/")
            } else {
                format!("http://{h}:{port}{path}/")
            }
        }
        (None, Some(local)) => {
            let ip = match local.ip() {
                std::net::IpAddr::V6(v6) => format!("[{v6}]"),
                v4 => v4.to_string(),
            };
            if local.port() == 80 {
                format!("http://{ip}{path}/")
            } else {
                format!("http://{ip}:{}{path}/", local.port())
            }
        }
        _ => format!("{path}/"),
    };
    r.location = Some(location);
    r
}
