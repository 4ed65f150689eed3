//! `server NAME resolve` in an `upstream` block (nginx 1.27.3+): the name is looked up at run
//! time by the `resolver` of the block (or of `http`), and the upstream's peers follow its
//! addresses as they change.
//!
//! nginx keeps such an upstream in shared memory (`zone` is required, and checked here as
//! nginx checks it). shoal's workers each keep their own view of the names and, for such an
//! upstream, their own peer state (the zone is not shared here): once a second at most, a
//! request to the upstream asks the resolver (its cache answers until the TTL or `valid=`
//! runs out) and, when the addresses changed, the worker's upstream is rebuilt with the
//! static `server` lines and one peer per address of each resolved line. A line whose lookup fails keeps the addresses it had. Until a name
//! has addresses its line has no peers; an upstream with no peer at all is nginx's `no live
//! upstreams` (502).
//!
//! The name is not looked up when the configuration is read, as in nginx.

use std::cell::RefCell;
use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use shoal_conf::Error;
use tokio::time::Instant;

use super::conf::{PeerAddr, UpstreamConf};
use super::ServerEntry;
use crate::log::Level;
use crate::resolver::Resolver;

/// How often a worker asks again about an upstream's names.
const RECHECK: Duration = Duration::from_secs(1);

/// An upstream's `resolve` lines.
#[derive(Debug, Default)]
pub struct Resolving {
    pub lines: Vec<ResolveLine>,
    /// The resolver and its timeout: the block's, else the http level's (linked once the
    /// configuration is read).
    pub resolver: OnceLock<(Arc<Resolver>, Duration)>,
}

/// One `server NAME[:PORT] ... resolve` line.
#[derive(Debug, Clone)]
pub struct ResolveLine {
    pub host: String,
    pub port: u16,
    /// Its parameters (`weight=`, `max_fails=`, `backup`...), for each address.
    pub entry: ServerEntry,
}

/// Once everything is read: each upstream with `resolve` lines gets its resolver, or the
/// configuration is refused in nginx's words.
pub fn link(u: &UpstreamConf, http: &crate::resolver::conf::ResolverLoc) -> Result<(), Error> {
    let Some(r) = &u.resolving else {
        return Ok(());
    };
    let resolver = u.resolver.clone().or_else(|| http.resolver.clone());
    let Some(resolver) = resolver else {
        return Err(Error::new(
            format!(
                "no resolver defined to resolve names at run time in upstream \"{}\" in {}",
                u.name,
                u.span.as_ref().map_or(String::new(), |s| s.to_string())
            ),
            None,
        ));
    };
    let timeout = u.resolver_timeout.unwrap_or_else(|| http.timeout());
    let _ = r.resolver.set((resolver, timeout));
    Ok(())
}

/// What a worker made of an upstream's names.
struct Current {
    upstream: Option<Arc<UpstreamConf>>,
    /// Each line's addresses, sorted.
    addrs: Vec<Vec<IpAddr>>,
    checked: Instant,
}

thread_local! {
    static CURRENT: RefCell<HashMap<u64, Current>> = RefCell::new(HashMap::new());
}

/// The upstream as this worker sees it now: `base` with the peers its names resolve to;
/// `None` when it has no peer at all.
pub async fn current(base: &Arc<UpstreamConf>) -> Option<Arc<UpstreamConf>> {
    let Some(resolving) = &base.resolving else {
        return Some(base.clone());
    };
    let now = Instant::now();
    let (previous, fresh) = CURRENT.with(|c| {
        let c = c.borrow();
        match c.get(&base.id) {
            Some(cur) => (
                Some((cur.upstream.clone(), cur.addrs.clone())),
                now < cur.checked + RECHECK,
            ),
            None => (None, false),
        }
    });
    if fresh {
        return previous.and_then(|p| p.0);
    }
    let Some((resolver, timeout)) = resolving.resolver.get() else {
        return Some(base.clone());
    };
    let mut addrs = Vec::with_capacity(resolving.lines.len());
    for (i, line) in resolving.lines.iter().enumerate() {
        match crate::resolver::resolve(resolver, &line.host, *timeout).await {
            Ok(a) => {
                let mut a = a.to_vec();
                a.sort();
                addrs.push(a);
            }
            Err(f) => {
                crate::error_log!(
                    Level::Error,
                    "{} could not be resolved {f} in upstream \"{}\"",
                    line.host,
                    base.name
                );
                let kept = previous
                    .as_ref()
                    .and_then(|p| p.1.get(i).cloned())
                    .unwrap_or_default();
                addrs.push(kept);
            }
        }
    }
    let upstream = match previous {
        Some((u, old)) if old == addrs => u,
        _ => {
            let mut extra = Vec::new();
            for (line, list) in resolving.lines.iter().zip(&addrs) {
                for &ip in list {
                    let a = SocketAddr::new(ip, line.port);
                    let mut e = line.entry.clone();
                    e.addr = a.to_string();
                    extra.push((e, PeerAddr::Inet(a)));
                }
            }
            let u = base.with_resolved(extra);
            let usable =
                !u.entries.is_empty() && super::Balancer::new(u.method, &u.entries, 0).is_ok();
            usable.then(|| Arc::new(u))
        }
    };
    CURRENT.with(|c| {
        c.borrow_mut().insert(
            base.id,
            Current {
                upstream: upstream.clone(),
                addrs,
                checked: Instant::now(),
            },
        )
    });
    upstream
}
