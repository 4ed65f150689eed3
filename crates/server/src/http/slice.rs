//! nginx's ngx_http_slice_module: `slice SIZE` (0: off) and `$slice_range`.
//!
//! A large answer is fetched in slices of `SIZE` bytes, each its own upstream request (and
//! cache object, with `$slice_range` in `proxy_cache_key`), the location passing
//! `proxy_set_header Range $slice_range`. The main request fetches the slice that holds the
//! start of the client's range; its 206 tells the whole length (`Content-Range`), and the
//! header filter here makes of it the client's answer: a 200 of the whole, or a 206 of the
//! client's one range (several ranges: the whole 200, as nginx's `single_range`). The
//! following slices are fetched while the body is written ([`super::streamed`]), each by the
//! location's content handler again (nginx's `NGX_HTTP_SUBREQUEST_CLONE`), and must agree: a
//! 206 of exactly the next slice with the first's `ETag`, or the answer ends there, the
//! connection closed, with nginx's error line (`etag mismatch in slice response`, ...). A main
//! answer that is not a 206 (the upstream ignored `Range`) goes as it is.
//!
//! As in nginx, nothing happens unless `$slice_range` was evaluated for the request (the
//! first evaluation decides where the slices start).

use shoal_conf::{Directive, Error};

use crate::conf::{set_once, size_arg, Args, Builder, Command, Ctx, Scope};
use crate::http::loc_conf;
use crate::http::modules::{Cx, HttpModule};
use crate::http::range::{self, ByteRange, Ranges};
use crate::http::reply::{Body, Outcome, Reply};
use crate::http::request::Req;
use crate::http::streamed::{NextPart, Streamed};
use crate::http::LocConf;
use crate::log::Level;
use crate::variables::Vars;

pub static DIRECTIVES: &[Command] = &[Command::new("slice", Ctx::HSL, Args::ONE, set_slice)];

/// The variable the module values (and where it keeps its value for the request).
const VAR: &str = "slice_range";

/// `slice` at location level.
#[derive(Clone, Debug, Default)]
pub struct SliceLoc {
    size: Option<u64>,
}

impl SliceLoc {
    /// `slice` (default 0: off).
    pub fn size(&self) -> u64 {
        self.size.unwrap_or(0)
    }
}

fn set_slice(_: &mut Builder, d: &Directive, s: &mut Scope<'_>) -> Result<(), Error> {
    let n = size_arg(d, 0)?;
    set_once(&mut loc_conf(s).slice.size, n, d)
}

/// `bytes=START-LAST` of the slice that starts at `start`.
fn slice_range(start: u64, size: u64) -> String {
    format!("bytes={start}-{}", start.saturating_add(size - 1))
}

/// nginx's `ngx_http_slice_get_start`: where the client's range starts (0 for a suffix, for
/// several ranges, with `If-Range`, or for anything it cannot read).
fn client_start(req: &shoal_http::Request) -> u64 {
    if req.header("if-range").is_some() {
        return 0;
    }
    let Some(h) = req.header("range") else {
        return 0;
    };
    if h.len() < 7 || !h[..6].eq_ignore_ascii_case(b"bytes=") || h.contains(&b',') {
        return 0;
    }
    let p = &h[6..];
    let p = &p[p.iter().take_while(|&&c| c == b' ').count()..];
    let mut start: u64 = 0;
    for &c in p.iter().take_while(|c| c.is_ascii_digit()) {
        match start
            .checked_mul(10)
            .and_then(|s| s.checked_add(u64::from(c - b'0')))
        {
            Some(s) if s <= i64::MAX as u64 => start = s,
            _ => return 0,
        }
    }
    start
}

/// A slice's `Content-Range` as nginx's `ngx_http_slice_parse_content_range` reads it:
/// `bytes START-LAST/(SIZE|*)`; the end exclusive, the size `None` for `*`.
fn parse_content_range(v: &str) -> Option<(u64, u64, Option<u64>)> {
    fn number(p: &[u8]) -> Option<(u64, &[u8])> {
        let n = p.iter().take_while(|c| c.is_ascii_digit()).count();
        if n == 0 {
            return None;
        }
        let v: u64 = std::str::from_utf8(&p[..n]).ok()?.parse().ok()?;
        (v <= i64::MAX as u64).then_some((v, &p[n..]))
    }
    fn spaces(p: &[u8]) -> &[u8] {
        &p[p.iter().take_while(|&&c| c == b' ').count()..]
    }
    let p = v.as_bytes().strip_prefix(b"bytes ")?;
    let (start, p) = number(spaces(p))?;
    let p = spaces(p).strip_prefix(b"-")?;
    let (last, p) = number(spaces(p))?;
    let p = spaces(p).strip_prefix(b"/")?;
    let p = spaces(p);
    let (complete, p) = match p.strip_prefix(b"*") {
        Some(rest) => (None, rest),
        None => {
            let (n, rest) = number(p)?;
            (Some(n), rest)
        }
    };
    if !spaces(p).is_empty() || start > last {
        return None;
    }
    Some((start, last + 1, complete))
}

/// Why a slice's answer is refused: nginx's error line.
fn check_slice(
    reply: &Reply,
    start: u64,
    size: u64,
    etag: Option<&str>,
) -> Result<Checked, String> {
    if reply.status != 206 {
        return Err(format!(
            "unexpected status code {} in slice response",
            reply.status
        ));
    }
    let tag = reply.header("etag");
    if let Some(want) = etag {
        if tag != Some(want) {
            return Err("etag mismatch in slice response".into());
        }
    }
    let Some((s, e, complete)) = reply.header("content-range").and_then(parse_content_range) else {
        return Err("invalid range in slice response".into());
    };
    let Some(complete) = complete else {
        return Err("no complete length in slice response".into());
    };
    let end = s.saturating_add(size).min(complete);
    if s != start || e != end {
        return Err(format!("unexpected range in slice response: {s}-{e}"));
    }
    Ok(Checked {
        start: s,
        end,
        complete,
        etag: tag.map(str::to_string),
    })
}

/// A slice's answer that agrees with what was asked.
struct Checked {
    start: u64,
    end: u64,
    complete: u64,
    etag: Option<String>,
}

/// A slice's body cut to the part of `window` it holds (`start`: where the slice starts).
fn cut(body: Body, start: u64, end: u64, window: ByteRange) -> Body {
    let from = window.start.clamp(start, end) - start;
    let to = window.end.clamp(start, end) - start;
    let to = to.max(from);
    match body {
        Body::Upstream(mut ub) => {
            ub.narrow_to(ByteRange {
                start: from,
                end: to,
            });
            Body::Upstream(ub)
        }
        Body::File {
            file,
            offset,
            len,
            cached,
        } => Body::File {
            file,
            offset: offset + from,
            len: (to - from).min(len.saturating_sub(from)),
            cached,
        },
        Body::Bytes(b) => {
            let (a, z) = ((from as usize).min(b.len()), (to as usize).min(b.len()));
            Body::Bytes(b[a..z].to_vec())
        }
        _ => Body::Empty,
    }
}

/// The slices after the first, fetched while the answer is written.
struct Slices {
    /// The first slice's body (already cut to the window), sent first.
    first: Option<Body>,
    size: u64,
    /// Where the next slice starts.
    next: u64,
    /// What the client is sent of the whole.
    window: ByteRange,
    etag: Option<String>,
    /// The request's URI, arguments and `set` variables, for the subrequests.
    uri: String,
    args: Option<String>,
    vars: std::collections::HashMap<String, String>,
}

impl Streamed for Slices {
    fn length(&self) -> Option<u64> {
        Some(self.window.end - self.window.start)
    }

    fn next<'a>(&'a mut self, r: &'a Req<'_, '_>, lc: &'a LocConf) -> NextPart<'a> {
        Box::pin(async move {
            if let Some(first) = self.first.take() {
                return Ok(Some(first));
            }
            if self.next >= self.window.end {
                return Ok(None);
            }
            r.extras.set_var(VAR, slice_range(self.next, self.size));
            let rw = crate::http::rewrite::State {
                uri: self.uri.clone(),
                args: self.args.clone(),
                vars: self.vars.clone(),
                ..Default::default()
            };
            let outcome = crate::http::phases::clone_content(r, lc, &rw).await;
            let reply = match outcome {
                Outcome::Reply(reply) | Outcome::Final(reply) => reply,
                Outcome::Error(code) => Box::new(crate::http::reply::error_reply(code, lc)),
                _ => Box::new(crate::http::reply::error_reply(500, lc)),
            };
            let checked = check_slice(&reply, self.next, self.size, self.etag.as_deref());
            let mut reply = reply;
            let body = std::mem::replace(&mut reply.body, Body::Empty);
            let ok = match checked {
                Ok(c) => c,
                Err(m) => return Err(fail(r, &m, body)),
            };
            self.next = ok.end;
            Ok(Some(cut(body, ok.start, ok.end, self.window)))
        })
    }
}

/// A slice refused: nginx's line at `error`, the body dropped (its upstream connection
/// closed), and the error that ends the answer.
fn fail(r: &Req<'_, '_>, msg: &str, body: Body) -> std::io::Error {
    if let Body::Upstream(ub) = body {
        ub.finish();
    }
    crate::conn_log!(
        Level::Error,
        r.info.number,
        "{msg} while reading response header from upstream{}",
        r.log_ctx()
    );
    std::io::Error::from(crate::error::Error::invalid("slice refused"))
}

/// The module's place in the list: the variable, and the header filter before the range
/// filter's.
pub struct Module;

impl HttpModule for Module {
    type Loc = SliceLoc;
    const DIRECTIVES: &'static [Command] = DIRECTIVES;
    const VARIABLES: &'static [&'static str] = &[VAR];

    fn merge(loc: &mut SliceLoc, parent: &SliceLoc) {
        crate::conf::merge(&mut loc.size, &parent.size);
    }

    fn variable(
        loc: Option<&SliceLoc>,
        _name: &str,
        vars: &Vars<'_>,
        out: &mut String,
    ) -> Option<bool> {
        let size = loc.map_or(0, SliceLoc::size);
        let extras = vars.extras?;
        if extras.var(VAR, out) {
            return Some(true);
        }
        if size == 0 {
            return Some(false);
        }
        let req = vars.req?;
        let start = size * (client_start(req) / size);
        let v = slice_range(start, size);
        out.push_str(&v);
        extras.set_var(VAR, v);
        Some(true)
    }

    fn header_filter(loc: &SliceLoc, cx: &Cx<'_, '_, '_>, reply: &mut Box<Reply>) {
        let size = loc.size();
        if size == 0 {
            return;
        }
        let mut asked = String::new();
        if !cx.r.extras.var(VAR, &mut asked) {
            return;
        }
        if reply.status != 206 {
            // The upstream ignored the range: the answer goes as it came.
            return;
        }
        let Some(start) = asked
            .strip_prefix("bytes=")
            .and_then(|s| s.split('-').next())
            .and_then(|s| s.parse::<u64>().ok())
        else {
            return;
        };
        let checked = match check_slice(reply, start, size, None) {
            Ok(c) => c,
            Err(m) => {
                crate::conn_log!(
                    Level::Error,
                    cx.r.info.number,
                    "{m} while reading response header from upstream{}",
                    cx.r.log_ctx()
                );
                if let Body::Upstream(ub) = std::mem::replace(&mut reply.body, Body::Empty) {
                    ub.finish();
                }
                **reply = crate::http::reply::error_reply(502, cx.lc);
                reply.terminate = true;
                return;
            }
        };
        let complete = checked.complete;
        reply.status = 200;
        reply.reason = None;
        reply.upstream_status = false;
        reply
            .headers
            .retain(|(n, _)| !n.eq_ignore_ascii_case("content-range"));
        reply.extra.retain(|(n, _)| {
            !n.eq_ignore_ascii_case("content-range") && !n.eq_ignore_ascii_case("accept-ranges")
        });
        // nginx's range filter over the whole, one range at most (`single_range`).
        let etag = checked.etag.clone().unwrap_or_default();
        let mtime = reply
            .header("last-modified")
            .and_then(|v| shoal_http::date::parse(v.as_bytes()))
            .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
            .map_or(-1, |d| d.as_secs() as i64);
        let decision = if cx.lc.max_ranges() == Some(0) {
            None
        } else {
            range::requested(cx.r.req, complete, &etag, mtime, Some(1))
        };
        let window = match decision {
            Some(Ranges::Satisfiable(list)) if list.len() == 1 => {
                let br = list[0];
                reply.status = 206;
                // After the upstream's headers, as nginx's range filter adds it.
                let cr = range::content_range(&br, complete);
                reply.extra.push(("Content-Range".into(), cr.into()));
                br
            }
            Some(Ranges::Unsatisfiable) => {
                if let Body::Upstream(ub) = std::mem::replace(&mut reply.body, Body::Empty) {
                    ub.finish();
                }
                let mut e = crate::http::reply::error_reply(416, cx.lc);
                e.headers.push((
                    "Content-Range",
                    range::unsatisfiable_content_range(complete).into(),
                ));
                e.extra = std::mem::take(&mut reply.extra);
                e.extra.retain(|(n, _)| {
                    !n.eq_ignore_ascii_case("etag") && !n.eq_ignore_ascii_case("last-modified")
                });
                **reply = e;
                return;
            }
            _ => {
                reply.extra.push(("Accept-Ranges".into(), "bytes".into()));
                ByteRange {
                    start: 0,
                    end: complete,
                }
            }
        };
        // A window that starts past the first slice (a suffix range): the slices from the
        // one that holds its start.
        let mut next = checked.end;
        if next.saturating_add(size) <= window.start {
            next = size * (window.start / size);
        }
        let body = std::mem::replace(&mut reply.body, Body::Empty);
        let first = cut(body, checked.start, checked.end, window);
        reply.body = Body::Streamed(Box::new(Slices {
            first: Some(first),
            size,
            next,
            window,
            etag: checked.etag,
            uri: cx.rw.uri.clone(),
            args: cx.rw.args.clone(),
            vars: cx.rw.vars.clone(),
        }));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn start_of(range: &str) -> u64 {
        let raw = format!("GET / HTTP/1.1\r\nHost: x\r\n{range}\r\n");
        let req = shoal_http::request::parse_request(raw.as_bytes(), &Default::default())
            .expect("a valid head")
            .expect("a whole head");
        client_start(&req)
    }

    #[test]
    fn client_start_as_nginx_reads_it() {
        assert_eq!(start_of(""), 0);
        assert_eq!(start_of("Range: bytes=500-600\r\n"), 500);
        assert_eq!(start_of("Range: bytes= 7-\r\n"), 7);
        assert_eq!(start_of("Range: bytes=-100\r\n"), 0);
        assert_eq!(start_of("Range: bytes=5-6,9-10\r\n"), 0);
        assert_eq!(start_of("Range: BYTES=12-\r\n"), 12);
        assert_eq!(start_of("Range: bytes=99999999999999999999-\r\n"), 0);
        assert_eq!(start_of("If-Range: \"x\"\r\nRange: bytes=5-\r\n"), 0);
    }

    #[test]
    fn content_range_as_nginx_reads_it() {
        assert_eq!(
            parse_content_range("bytes 0-9/100"),
            Some((0, 10, Some(100)))
        );
        assert_eq!(parse_content_range("bytes 10-19/*"), Some((10, 20, None)));
        assert_eq!(
            parse_content_range("bytes  1 - 2 / 3 "),
            Some((1, 3, Some(3)))
        );
        assert_eq!(parse_content_range("bytes 5-4/10"), None);
        assert_eq!(parse_content_range("bytes */10"), None);
        assert_eq!(parse_content_range("items 0-1/2"), None);
        assert_eq!(parse_content_range("bytes 0-1/2x"), None);
    }
}
