//! The content phase of a location whose handler is an upstream's (`proxy_pass`,
//! `fastcgi_pass`, ...): the cache asked first, then the protocol's exchange.

use std::cell::RefCell;
use std::rc::Rc;

use crate::http::client_body::ClientBody;
use crate::http::reply::Outcome;
use crate::http::request::Req;
use crate::http::rewrite;
use crate::http::upstream::record::Record;
use crate::http::LocConf;

/// An upstream module's content handler (`proxy_pass`, `fastcgi_pass`, ...): the cache's
/// lookup first when the location has one, the upstream's answer sent as it is; shoal's own
/// errors (and upstream errors `*_intercept_errors` takes) meet `error_page`.
#[allow(clippy::too_many_arguments)]
pub(super) async fn cached_outcome(
    r: &Req<'_, '_>,
    lc: &LocConf,
    via: crate::http::proxy_cache::serve::Via<'_>,
    rw: &rewrite::State,
    internal: bool,
    method: &str,
    body: &ClientBody<'_>,
    upstream: &mut Option<Rc<RefCell<Record>>>,
) -> Outcome {
    use crate::http::proxy_cache::serve::Via;
    let plan =
        match crate::http::proxy_cache::serve::begin(r, lc, via, rw, internal, method, upstream)
            .await
        {
            Ok(plan) => plan,
            // A HIT, a purge's answer, a zone that does not exist.
            Err(answered) => return answered,
        };
    // `proxy_cache_convert_head`: a HEAD that may be cached goes upstream as a GET, so that
    // what comes back has a body to store. Off, it goes as a HEAD and its bodiless answer is
    // stored under the same key (nginx's way: a key without `$request_method` then answers a
    // GET with it). The other protocols always convert.
    let convert = match via {
        Via::Proxy(_) => lc.proxy.cache.convert_head(),
        Via::Other(_) => true,
    };
    let up_method = if method == "HEAD" && plan.is_some() && convert {
        "GET"
    } else {
        method
    };
    let validators = plan.as_ref().and_then(|p| p.validators());
    let cacheable = plan.as_ref().is_some_and(|p| p.cacheable());
    let (mut outcome, record) = match via {
        Via::Proxy(pass) => {
            let st = crate::http::proxy::codec::UriState {
                rw,
                internal,
                validators,
                cacheable,
            };
            crate::http::proxy::codec::handle(r, lc, pass, st, up_method, body).await
        }
        Via::Other(proto) => {
            let cached = crate::http::upstream::run::Cached {
                validators,
                cacheable,
            };
            upstream_handle(r, lc, proto, rw, up_method, body, cached).await
        }
    };
    // What an earlier, intercepted answer handed on goes with this record.
    if let (Some(old), Some(new)) = (upstream.as_ref(), record.as_ref()) {
        new.borrow_mut().carry.append(&mut old.borrow_mut().carry);
    }
    if let (Some(plan), Some(rec)) = (plan, &record) {
        outcome = crate::http::proxy_cache::serve::answer(plan, outcome, rec, lc, via, r, rw);
    }
    *upstream = record;
    outcome
}

/// The exchange of `fastcgi_pass`, `uwsgi_pass`, `scgi_pass` and `memcached_pass` locations.
pub async fn upstream_handle(
    r: &Req<'_, '_>,
    lc: &LocConf,
    proto: crate::http::upstream::Proto,
    rw: &rewrite::State,
    method: &str,
    body: &ClientBody<'_>,
    cached: crate::http::upstream::run::Cached<'_>,
) -> (Outcome, Option<Rc<RefCell<Record>>>) {
    use crate::http::fastcgi::FastcgiLoc;
    use crate::http::scgi::ScgiLoc;
    use crate::http::upstream::{cgi_like, Proto};
    use crate::http::uwsgi::UwsgiLoc;
    match proto {
        Proto::Fastcgi => cgi_like::handle::<FastcgiLoc>(r, lc, rw, method, body, cached).await,
        Proto::Uwsgi => cgi_like::handle::<UwsgiLoc>(r, lc, rw, method, body, cached).await,
        Proto::Scgi => cgi_like::handle::<ScgiLoc>(r, lc, rw, method, body, cached).await,
        Proto::Memcached => crate::http::memcached::handle(r, lc, rw, method, body, cached).await,
        Proto::Grpc => crate::http::grpc::handle(r, lc, rw, method, body).await,
        Proto::Http => (Outcome::Error(500), None),
    }
}
