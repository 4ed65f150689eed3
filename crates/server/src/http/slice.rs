//! nginx's ngx_http_slice_module: `slice SIZE` (0: off) and `$slice_range`.
//!
//! A large answer is fetched in slices of `SIZE` bytes, each its own upstream request (and
//! cache object, with `$slice_range` in `proxy_cache_key`), the location passing
//! `proxy_set_header Range $slice_range`. The main request fetches the slice that holds the
//! start of the client's range; its 206 tells the whole length (`Content-Range`), and the
//! header filters here make of it the client's answer, as nginx's: first of all a 200 of the
//! whole ([`First`]: the filters after it see that, and gzip compresses it), then, where
//! nginx's range filter runs, a 206 of the client's one range (several ranges: the whole
//! 200, as nginx's `single_range`; none when gzip or sub changes the body's length). The
//! following slices are subrequests the slice body filter asks for once the first is over
//! (`http/subrequest_body.rs`: each the location's content handler again, nginx's
//! `NGX_HTTP_SUBREQUEST_CLONE`, its body through its own filters, then the main answer's
//! after nginx's postpone point), and must agree: a 206 of exactly the next slice with the
//! first's `ETag`, or the answer ends there, the connection closed, with nginx's error line
//! (`etag mismatch in slice response`, ...). A main answer that is not a 206 (the upstream
//! ignored `Range`) goes as it is.
//!
//! As in nginx, nothing happens unless `$slice_range` was evaluated for the request (the
//! first evaluation decides where the slices start).

use shoal_conf::{Directive, Error};

use crate::conf::{set_once, size_arg, Args, Builder, Command, Ctx, Scope};
use crate::http::body_filter::{BodyFilter, Step};
use crate::http::loc_conf;
use crate::http::modules::{Cx, HttpModule};
use crate::http::range::{self, ByteRange, Ranges};
use crate::http::reply::{Body, Reply};
use crate::http::subrequest_body::{Answer, Ask, Requester, Target};
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

/// The main request made its sliced answer (nginx's slice context on the main request), and
/// the first slice's `ETag` the next must have: the header filters of the slices'
/// subrequests leave them be. (A module value's slot, under a name no configuration spells.)
const MADE: &str = "slice made";

/// The main answer's head is out: `$slice_range` asked for the first time now (in an ssi
/// include, say) is not found, as nginx's (`r != r->main || r->headers_out.status`).
const HEAD_OUT: &str = "slice head out";

/// The main answer's head is out, its body filters about to act for it (see [`HEAD_OUT`]).
pub fn head_out(extras: &crate::http::request::Extras) {
    extras.set_var(HEAD_OUT, String::new());
}

/// The body filter of a sliced answer (nginx's slice body filter): once the first slice's
/// body is over, each next slice is a subrequest (the location's content handler again),
/// checked and cut to the client's window in its head, its body in place.
struct Slices {
    size: u64,
    /// Where the next slice starts.
    next: u64,
    /// What the client is sent of the whole.
    window: ByteRange,
    /// Where the slices end (the window's end, or the whole's when the client gets no 206:
    /// nginx fetches them all, their bytes out of the window dropped).
    until: u64,
    etag: Option<String>,
    /// The first slice's body is over.
    ended: bool,
    given: Vec<u8>,
}

impl BodyFilter for Slices {
    fn feed(&mut self, data: &[u8]) -> std::io::Result<&[u8]> {
        // (Not called: the filter passes its answer's own bytes by.)
        self.given.clear();
        self.given.extend_from_slice(data);
        Ok(&self.given)
    }

    fn finish(&mut self) -> std::io::Result<&[u8]> {
        self.ended = true;
        Ok(&[])
    }

    fn keeps_length(&self) -> bool {
        true
    }

    fn passes_through(&self) -> bool {
        true
    }

    fn pending(&self) -> bool {
        self.ended && self.next < self.until
    }

    fn for_request(&self) -> bool {
        true
    }

    fn main_only(&self) -> bool {
        true
    }

    fn step(&mut self, _r: Option<&dyn Requester>) -> std::io::Result<Step<'_>> {
        Ok(Step::Subrequest(Ask {
            target: Target::Clone {
                var: Some((VAR, slice_range(self.next, self.size))),
            },
            in_memory: false,
            stub: None,
        }))
    }

    fn subrequest_head(&mut self, reply: &mut Reply, r: &dyn Requester) -> std::io::Result<()> {
        let body = std::mem::replace(&mut reply.body, Body::Empty);
        match check_slice(reply, self.next, self.size, self.etag.as_deref()) {
            Ok(c) => {
                self.next = c.end;
                reply.body = cut(body, c.start, c.end, self.window);
                Ok(())
            }
            Err(m) => {
                if let Body::Upstream(ub) = body {
                    ub.finish();
                }
                r.log_as(Level::Error, &m, "reading response header from upstream");
                Err(std::io::Error::from(crate::error::Error::invalid(
                    "slice refused",
                )))
            }
        }
    }

    fn answered(&mut self, a: Answer) {
        if a.refused {
            // No subrequest could be made: the answer ends here.
            self.next = self.until;
        }
    }
}

/// The first of the module's two header filters, first of all (nginx's slice header
/// filter): the main request's 206 of its first slice, checked, becomes a 200 of the whole
/// length, which the filters after it see (gzip compresses it, as nginx's). The client's
/// range is decided by the second ([`Module`]), where nginx's range filter runs.
pub struct First;

impl HttpModule for First {
    type Loc = ();
    const DIRECTIVES: &'static [Command] = &[];

    fn merge(_: &mut (), _: &()) {}

    fn header_filter(_: &(), cx: &Cx<'_, '_, '_>, reply: &mut Box<Reply>) {
        let size = cx.lc.slice.size();
        let mut asked = String::new();
        if size == 0
            || reply.status != 206
            || !cx.r.extras.var(VAR, &mut asked)
            || cx.r.extras.var(MADE, &mut String::new())
        {
            // (Not sliced, the upstream ignored the range, or one of the slices'
            // subrequests: their head is the slice filter's to check.)
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
        cx.r.extras
            .set_var(MADE, checked.etag.clone().unwrap_or_default());
        reply.status = 200;
        reply.reason = None;
        reply.upstream_status = false;
        reply
            .headers
            .retain(|(n, _)| !n.eq_ignore_ascii_case("content-range"));
        reply.extra.retain(|(n, _)| {
            !n.eq_ignore_ascii_case("content-range") && !n.eq_ignore_ascii_case("accept-ranges")
        });
        let body = std::mem::replace(&mut reply.body, Body::Empty);
        reply.body = Body::Parts(Box::new(body), checked.complete);
    }
}

/// The module's place in the list: the variable, and the second header filter, before the
/// range filter's: the client's range of the whole (one range at most, nginx's
/// `single_range`), and the slice filter that fetches the next slices.
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
        if size == 0 || extras.var(HEAD_OUT, &mut String::new()) {
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
        let Body::Parts(_, complete) = reply.body else {
            return;
        };
        let mut asked = String::new();
        let mut etag = String::new();
        if size == 0 || reply.status != 200 || !cx.r.extras.var(MADE, &mut etag) {
            return;
        }
        cx.r.extras.var(VAR, &mut asked);
        let Some(start) = asked
            .strip_prefix("bytes=")
            .and_then(|s| s.split('-').next())
            .and_then(|s| s.parse::<u64>().ok())
        else {
            return;
        };
        let first_end = start.saturating_add(size).min(complete);
        // A filter that changes the body's length (gzip, sub) leaves no 206 to make, as
        // nginx's range filter after it; the range still cuts the next slices.
        let changes = reply.filters.iter().any(|f| !f.keeps_length());
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
                if !changes {
                    reply.status = 206;
                    // After the upstream's headers, as nginx's range filter adds it.
                    let cr = range::content_range(&br, complete);
                    reply.extra.push(("Content-Range".into(), cr.into()));
                }
                br
            }
            Some(Ranges::Unsatisfiable) => {
                if let Body::Parts(first, _) = std::mem::replace(&mut reply.body, Body::Empty) {
                    if let Body::Upstream(ub) = *first {
                        ub.finish();
                    }
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
                if !changes {
                    reply.extra.push(("Accept-Ranges".into(), "bytes".into()));
                }
                ByteRange {
                    start: 0,
                    end: complete,
                }
            }
        };
        let Body::Parts(first, _) = std::mem::replace(&mut reply.body, Body::Empty) else {
            unreachable!("matched above");
        };
        let (first, next, until) = if changes {
            // The next slices, all fetched, are cut to the range (nginx's range body filter
            // on its subrequests' output); the first goes whole.
            (*first, first_end, complete)
        } else {
            // A window that starts past the first slice (a suffix range): the slices from
            // the one that holds its start.
            let mut next = first_end;
            if next.saturating_add(size) <= window.start {
                next = size * (window.start / size);
            }
            (cut(*first, start, first_end, window), next, window.end)
        };
        reply.body = Body::Parts(Box::new(first), window.end - window.start);
        // First of the body filters, as nginx's slice body filter.
        reply.filters.insert(
            0,
            Box::new(Slices {
                size,
                next,
                window,
                until,
                etag: Some(etag).filter(|e| !e.is_empty()),
                ended: false,
                given: Vec::new(),
            }),
        );
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
