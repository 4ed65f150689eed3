//! `msie_padding` and `msie_refresh` (nginx's http core): what nginx does to its own special
//! answers for some browsers, told apart by their `User-Agent` as nginx tells them.
//!
//! `msie_padding` (on by default): an error page of nginx's own (4xx, 5xx) sent to MSIE or
//! Chrome over HTTP/1.0 or later gets six comment lines after it, so that the browser shows it
//! instead of its own "friendly" page. `msie_refresh` (off by default): nginx's own 301 or 302
//! to MSIE becomes a 200 whose HTML page refreshes to the location.
//!
//! As nginx's special-response handler, this runs before the other header filters (first in
//! the module list): `add_header` sees the refresh's 200. Unlike nginx, a redirect written as
//! an absolute URL to this very server (`return 302 http://HOST:PORT/path`) refreshes to its
//! path alone, as if written `/path`.

use shoal_conf::{Directive, Error};

use super::reply::{Body, Reply};
use crate::conf::{flag_arg, set_once, Args, Builder, Command, Ctx, Scope};
use crate::http::loc_conf;
use crate::http::modules::Cx;

pub static DIRECTIVES: &[Command] = &[
    Command::new(
        "msie_padding",
        Ctx::HTTP.or(Ctx::SERVER).or(Ctx::LOCATION),
        Args::Flag,
        set_msie_padding,
    ),
    Command::new(
        "msie_refresh",
        Ctx::HTTP.or(Ctx::SERVER).or(Ctx::LOCATION),
        Args::Flag,
        set_msie_refresh,
    ),
];

#[derive(Clone, Debug, Default)]
pub struct MsieLoc {
    padding: Option<bool>,
    refresh: Option<bool>,
}

fn set_msie_padding(_: &mut Builder, d: &Directive, s: &mut Scope<'_>) -> Result<(), Error> {
    set_once(&mut loc_conf(s).msie.padding, flag_arg(d), d)
}

fn set_msie_refresh(_: &mut Builder, d: &Directive, s: &mut Scope<'_>) -> Result<(), Error> {
    set_once(&mut loc_conf(s).msie.refresh, flag_arg(d), d)
}

const PADDING: &str = "<!-- a padding to disable MSIE and Chrome friendly error page -->\r\n";
const REFRESH_HEAD: &str = "<html><head><meta http-equiv=\"Refresh\" content=\"0; URL=";
const REFRESH_TAIL: &str = "\"></head><body></body></html>\r\n";

/// The browsers nginx recognises (ngx_http_process_user_agent): MSIE unless it is Opera;
/// Chrome unless it is Gecko (Firefox) first.
#[derive(Debug, PartialEq, Eq)]
enum Browser {
    Msie,
    Chrome,
    Other,
}

fn browser(ua: &[u8]) -> Browser {
    let has = |s: &[u8]| ua.windows(s.len()).any(|w| w == s);
    let opera = has(b"Opera");
    let msie = !opera
        && ua
            .windows(5)
            .position(|w| w == b"MSIE ")
            .is_some_and(|p| p + 7 < ua.len());
    if msie {
        Browser::Msie
    } else if !opera && !has(b"Gecko/") && has(b"Chrome/") {
        Browser::Chrome
    } else {
        Browser::Other
    }
}

/// Whether nginx counts the agent as MSIE (its `msie` flag, `$msie`).
pub fn is_msie(ua: &[u8]) -> bool {
    browser(ua) == Browser::Msie
}

/// A location for the refresh page: space, quotes and bytes outside printable ASCII as `%XX`
/// (nginx's `NGX_ESCAPE_REFRESH`).
fn escape_refresh(location: &str, out: &mut String) {
    for &b in location.as_bytes() {
        if matches!(b, b' ' | b'"' | b'\'') || !(0x20..0x7f).contains(&b) {
            out.push_str(&format!("%{b:02X}"));
        } else {
            out.push(b as char);
        }
    }
}

/// The module's place in the module list: its header filter.
pub struct Module;

impl crate::http::modules::HttpModule for Module {
    type Loc = MsieLoc;
    const DIRECTIVES: &'static [Command] = DIRECTIVES;

    fn merge(loc: &mut MsieLoc, parent: &MsieLoc) {
        crate::conf::merge(&mut loc.padding, &parent.padding);
        crate::conf::merge(&mut loc.refresh, &parent.refresh);
    }

    fn header_filter(loc: &MsieLoc, cx: &Cx<'_, '_, '_>, reply: &mut Box<Reply>) {
        if !reply.special {
            return;
        }
        let req = cx.r.req;
        let Some(ua) = req.header("user-agent") else {
            return;
        };
        let padding = loc.padding.unwrap_or(true) && reply.status >= 400;
        let refresh = loc.refresh.unwrap_or(false) && matches!(reply.status, 301 | 302);
        if !padding && !refresh {
            return;
        }
        let browser = browser(ua);
        if refresh && browser == Browser::Msie {
            let Some(location) = reply.location.take() else {
                return;
            };
            // nginx writes the location as given: a local path it would make absolute only
            // later, in its header filter (shoal makes it absolute when the answer is made).
            let r = cx.r;
            let prefix =
                crate::http::static_files::absolute_location(cx.lc, "", r.host, r.info, r.srv);
            let written = match location.strip_prefix(&prefix) {
                Some(path) if !prefix.is_empty() && path.starts_with('/') => path,
                _ => &location,
            };
            let mut page = String::from(REFRESH_HEAD);
            escape_refresh(written, &mut page);
            page.push_str(REFRESH_TAIL);
            reply.status = 200;
            reply.content_type = Some("text/html".into());
            reply.last_modified = None;
            reply.mtime = None;
            reply.headers.retain(|(n, _)| *n != "ETag");
            reply.allow_ranges = false;
            reply.body = Body::Bytes(page.into_bytes());
            return;
        }
        let http10 = !matches!(req.version(), shoal_http::Version::Http09);
        if padding && browser != Browser::Other && http10 {
            if let Body::Bytes(page) = &mut reply.body {
                if !page.is_empty() {
                    for _ in 0..6 {
                        page.extend_from_slice(PADDING.as_bytes());
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn browsers_as_nginx_tells_them() {
        let chrome = b"Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) \
                       Chrome/120.0.0.0 Safari/537.36";
        assert_eq!(browser(chrome), Browser::Chrome);
        let firefox = b"Mozilla/5.0 (X11; Linux x86_64; rv:120.0) Gecko/20100101 Firefox/120.0";
        assert_eq!(browser(firefox), Browser::Other);
        assert_eq!(
            browser(b"Mozilla/4.0 (compatible; MSIE 6.0; Windows NT 5.1)"),
            Browser::Msie
        );
        assert_eq!(browser(b"Opera/9.80 (MSIE 6.0) Chrome/1"), Browser::Other);
        // nginx wants two bytes past "MSIE ".
        assert_eq!(browser(b"x MSIE 6"), Browser::Other);
        assert_eq!(browser(b"curl/8.0"), Browser::Other);
    }

    #[test]
    fn refresh_locations_escape_spaces_quotes_and_high_bytes() {
        let mut s = String::new();
        escape_refresh("/a b\"c'd%e\u{e9}", &mut s);
        assert_eq!(s, "/a%20b%22c%27d%e%C3%A9");
    }
}
