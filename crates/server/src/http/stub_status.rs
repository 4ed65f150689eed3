//! `stub_status`: nginx's basic status page (`text/plain`, never cached), from the counters in
//! `crate::status`.

use shoal_conf::{Directive, Error};

use super::reply::{Body, Reply};
use crate::conf::{Args, Builder, Command, Ctx, Scope};

pub static DIRECTIVES: &[Command] = &[Command::new(
    "stub_status",
    Ctx::SERVER.or(Ctx::LOCATION),
    Args::Take(0, 1),
    set_stub_status,
)];

fn set_stub_status(_: &mut Builder, d: &Directive, s: &mut Scope<'_>) -> Result<(), Error> {
    // nginx accepted `stub_status on|off` before 1.7.5; any argument still means on.
    let _ = d;
    super::loc_conf(s).stub_status = Some(true);
    Ok(())
}

/// The page, as nginx answers it (GET and HEAD only); or, in a `proxy_cache_status`
/// location, the cache zones' figures (`super::proxy_cache::status_page`).
pub fn reply(method: &str, lc: &super::LocConf) -> Reply {
    if method != "GET" && method != "HEAD" {
        return super::reply::error_reply(405, lc);
    }
    let mut r = Reply::new(200);
    r.content_type = Some("text/plain".into());
    let page = if lc.proxy.cache.status_page == Some(true) {
        super::proxy_cache::status_page()
    } else {
        crate::status::snapshot().render()
    };
    r.body = Body::Bytes(page.into_bytes());
    r
}
