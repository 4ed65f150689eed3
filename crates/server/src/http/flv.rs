//! `ngx_http_flv_module`: `flv` makes a location's content handler send `.flv` files with
//! pseudo-streaming: `?start=N` (N a byte offset inside the file) answers nginx's 13-byte FLV
//! header, then the file from byte N; no `start`, an invalid one or one past the end, the
//! whole file. GET and HEAD only (405 otherwise); a URI ending in `/` or naming a directory
//! is left to the static module, as nginx declines it. ETag and `Content-Length` are of the
//! answer sent (header and tail), and ranges are taken of it.

use shoal_conf::{Directive, Error};

use super::open_file_cache;
use super::reply::{error_reply, Body, Outcome, Reply};
use super::request::Req;
use super::{loc_conf, LocConf};
use crate::conf::{Args, Builder, Command, Ctx, Scope};
use crate::log::Level;
use crate::variables::Vars;

pub static DIRECTIVES: &[Command] = &[Command::new("flv", Ctx::LOCATION, Args::NONE, set_flv)];

/// nginx's `ngx_flv_header`: signature, version 1, audio and video, a 9-byte header, and the
/// first (empty) previous-tag size.
const HEADER: &[u8; 13] = b"FLV\x01\x05\x00\x00\x00\x09\x00\x00\x00\x00";

/// The module's place in the list: `flv` in this location (not inherited: it sets the
/// location's handler, as nginx's `clcf->handler`).
pub struct Module;

impl super::modules::HttpModule for Module {
    type Loc = Option<bool>;
    const DIRECTIVES: &'static [Command] = DIRECTIVES;

    fn merge(_: &mut Option<bool>, _: &Option<bool>) {}
}

fn set_flv(_: &mut Builder, _: &Directive, s: &mut Scope<'_>) -> Result<(), Error> {
    loc_conf(s).flv = Some(true);
    Ok(())
}

/// `start` among the arguments, as nginx's `ngx_atoof` reads it: digits only, else 0.
fn start_arg(args: Option<&str>) -> u64 {
    let Some(args) = args else { return 0 };
    // The name in any case, as nginx's `ngx_http_arg` compares it.
    let value = args
        .split('&')
        .find(|a| a.get(..6).is_some_and(|n| n.eq_ignore_ascii_case("start=")))
        .map(|a| &a[6..]);
    match value {
        Some(v) if !v.is_empty() && v.bytes().all(|c| c.is_ascii_digit()) => v
            .parse::<u64>()
            .ok()
            .filter(|n| *n <= i64::MAX as u64)
            .unwrap_or(0),
        _ => 0,
    }
}

/// The answer for `uri`, or `None` where nginx's handler declines (a directory, a URI
/// ending in `/`): the static module's then.
pub fn handle(
    r: &Req<'_, '_>,
    lc: &LocConf,
    method: &str,
    uri: &str,
    args: Option<&str>,
    vars: &Vars<'_>,
) -> Option<Outcome> {
    if method != "GET" && method != "HEAD" {
        return Some(Outcome::Error(405));
    }
    if uri.ends_with('/') {
        return None;
    }
    let path = lc.doc_root().map(uri, Some(vars));
    let opened = match open_file_cache::open(lc, &path) {
        Ok(o) => o,
        Err(e) => {
            let (code, level) = match e.raw_os_error() {
                Some(libc::ENOENT | libc::ENOTDIR | libc::ENAMETOOLONG) => (404, Level::Error),
                Some(libc::EACCES | libc::EMLINK | libc::ELOOP) => (403, Level::Error),
                _ => (500, Level::Crit),
            };
            if code != 404 || lc.log_not_found() {
                crate::conn_log!(
                    level,
                    r.info.number,
                    "open() \"{}\" failed {}{}",
                    path.display(),
                    shoal_conf::os_error(&e),
                    r.log_ctx()
                );
            }
            return Some(Outcome::Reply(Box::new(error_reply(code, lc))));
        }
    };
    let file = opened.file.clone().filter(|_| !opened.info.is_dir)?;
    let size = opened.info.size;
    let mut start = start_arg(args);
    if start >= size {
        start = 0;
    }
    let len = if start > 0 {
        HEADER.len() as u64 + size - start
    } else {
        size
    };
    let mtime = opened.info.mtime;
    let mut reply = Reply::boxed(200);
    reply.last_modified = Some(shoal_http::date::format_unix_recent(mtime.max(0) as u64));
    reply.mtime = Some(mtime);
    if lc.etag() {
        let etag = shoal_io::open_file_cache::etag(mtime, len);
        reply.headers.push(("ETag", etag.into()));
    }
    reply.content_type = Some(super::static_files::uri_content_type(lc, uri).to_string());
    let rest = Body::File {
        file,
        offset: start,
        len: size - start,
        cached: if start == 0 {
            open_file_cache::small_content(lc, &opened, super::static_files::SMALL_FILE)
        } else {
            None
        },
    };
    reply.body = if start > 0 {
        Body::Chain(HEADER.to_vec(), Box::new(rest))
    } else {
        rest
    };
    reply.allow_ranges = true;
    Some(Outcome::Reply(reply))
}

#[cfg(test)]
mod tests {
    use super::start_arg;

    #[test]
    fn start_as_nginx_reads_it() {
        assert_eq!(start_arg(None), 0);
        assert_eq!(start_arg(Some("start=20")), 20);
        assert_eq!(start_arg(Some("a=1&start=7&start=9")), 7);
        assert_eq!(start_arg(Some("start=1x")), 0);
        assert_eq!(start_arg(Some("start=")), 0);
        assert_eq!(start_arg(Some("xstart=5")), 0);
        assert_eq!(start_arg(Some("START=5")), 5);
        assert_eq!(start_arg(Some("start=99999999999999999999")), 0);
    }
}
