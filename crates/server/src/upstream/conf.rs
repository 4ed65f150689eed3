//! The `upstream NAME { ... }` block and what `proxy_pass host:port` makes without one (nginx's
//! implicit upstream): `server ADDRESS [weight= max_fails= fail_timeout= max_conns= backup
//! down]`, the balancing method (`least_conn`, `ip_hash`, `hash KEY [consistent]`, `random [two
//! [least_conn]]`) and the keep-alive cache (`keepalive`, `keepalive_requests`,
//! `keepalive_time`, `keepalive_timeout`).
//!
//! Names are resolved when the configuration is read, as nginx does without a `resolver`: a
//! `server` line whose name has several addresses becomes one peer per address.

use std::fmt;
use std::net::{SocketAddr, ToSocketAddrs};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use shoal_conf::{Directive, Error};

use super::{Method, ServerEntry, UpstreamError};
use crate::conf::{err, parse_number, parse_time, time_arg, Args, Builder, Command, Ctx, Scope};
use crate::error;
use crate::variables::Template;

/// The upstream directives http's and stream's blocks both have.
const UPS: Ctx = Ctx::UPSTREAM.or(Ctx::STREAM_UPSTREAM);

pub static DIRECTIVES: &[Command] = &[
    Command::block(
        "upstream",
        Ctx::HTTP.or(Ctx::STREAM),
        Args::ONE,
        set_upstream,
    ),
    Command::new(
        "server",
        Ctx::UPSTREAM.or(Ctx::STREAM_UPSTREAM),
        Args::Take(1, usize::MAX),
        set_server,
    ),
    Command::new("keepalive", Ctx::UPSTREAM, Args::ONE, set_keepalive),
    Command::new(
        "keepalive_requests",
        Ctx::UPSTREAM,
        Args::ONE,
        set_keepalive_requests,
    ),
    Command::new(
        "keepalive_time",
        Ctx::UPSTREAM,
        Args::ONE,
        set_keepalive_time,
    ),
    Command::new(
        "keepalive_timeout",
        Ctx::UPSTREAM,
        Args::ONE,
        set_keepalive_timeout,
    ),
    Command::new("least_conn", UPS, Args::NONE, set_least_conn),
    Command::new("ip_hash", Ctx::UPSTREAM, Args::NONE, set_ip_hash),
    Command::new("hash", UPS, Args::Take(1, 2), set_hash),
    Command::new("random", UPS, Args::Take(0, 2), set_random),
    Command::new("zone", UPS, Args::Take(1, 2), set_zone),
];

/// Where a peer is.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum PeerAddr {
    Inet(SocketAddr),
    Unix(PathBuf),
}

impl fmt::Display for PeerAddr {
    /// As `$upstream_addr` and the error log write it: `127.0.0.1:8080`, `[::1]:80`,
    /// `unix:/path`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PeerAddr::Inet(a) => write!(f, "{a}"),
            PeerAddr::Unix(p) => write!(f, "unix:{}", p.display()),
        }
    }
}

/// One upstream: its peers (one per resolved address), how to choose among them, and its
/// keep-alive cache.
#[derive(Debug)]
pub struct UpstreamConf {
    pub name: String,
    /// Unique per configuration read: the key of each worker's state for this upstream.
    pub id: u64,
    pub method: Method,
    /// `hash KEY`.
    pub hash_key: Option<Template>,
    /// The peers, one per address, in `server` line order.
    pub entries: Vec<ServerEntry>,
    /// Their addresses, parallel to `entries`.
    pub addrs: Vec<PeerAddr>,
    /// `keepalive N`: idle connections each worker keeps (none without the directive).
    pub keepalive: Option<usize>,
    pub keepalive_requests: Option<u64>,
    pub keepalive_time: Option<Duration>,
    pub keepalive_timeout: Option<Duration>,
    /// Made by `proxy_pass host:port` (no block): nginx does not count failures for a
    /// single implicit peer either way, and its `$upstream_addr` is the same.
    pub implicit: bool,
    /// Made for one request from a URL with variables: its per-worker state is not kept.
    pub ephemeral: bool,
    /// A `stream {}` upstream: its `server` lines must name a port.
    pub stream: bool,
    /// An ephemeral upstream's balancer (made at its first use, gone with the request), or
    /// a `zone`'s (shared by the workers, gone with the configuration).
    pub own_balancer: std::sync::OnceLock<std::sync::Mutex<super::Balancer>>,
    /// `resolver` and `resolver_timeout` in the block (nginx 1.27.3+), for `resolve` lines.
    pub resolver: Option<Arc<crate::resolver::Resolver>>,
    pub resolver_timeout: Option<Duration>,
    /// `zone` (needed by `resolve`, as in nginx).
    pub zone: bool,
    /// `server ... resolve` lines: names looked up at run time ([`super::resolve`]).
    pub resolving: Option<Box<super::resolve::Resolving>>,
    /// Where the block is (for messages about it once everything is read).
    pub span: Option<shoal_conf::Span>,
}

impl UpstreamConf {
    fn new(name: &str, implicit: bool) -> UpstreamConf {
        static NEXT: AtomicU64 = AtomicU64::new(1);
        UpstreamConf {
            name: name.to_string(),
            id: NEXT.fetch_add(1, Ordering::Relaxed),
            method: Method::RoundRobin,
            hash_key: None,
            entries: Vec::new(),
            addrs: Vec::new(),
            keepalive: None,
            keepalive_requests: None,
            keepalive_time: None,
            keepalive_timeout: None,
            implicit,
            ephemeral: false,
            stream: false,
            own_balancer: std::sync::OnceLock::new(),
            resolver: None,
            resolver_timeout: None,
            zone: false,
            resolving: None,
            span: None,
        }
    }

    /// This upstream with `extra` peers (what its `resolve` lines resolve to now) after its
    /// own: a new upstream for the balancer (its own id), the same settings.
    pub fn with_resolved(&self, extra: Vec<(ServerEntry, PeerAddr)>) -> UpstreamConf {
        let mut u = UpstreamConf::new(&self.name, self.implicit);
        u.method = self.method;
        u.hash_key = self.hash_key.clone();
        u.entries = self.entries.clone();
        u.addrs = self.addrs.clone();
        for (e, a) in extra {
            u.entries.push(e);
            u.addrs.push(a);
        }
        u.keepalive = self.keepalive;
        u.keepalive_requests = self.keepalive_requests;
        u.keepalive_time = self.keepalive_time;
        u.keepalive_timeout = self.keepalive_timeout;
        u.zone = self.zone;
        u
    }

    /// The upstream `proxy_pass http://HOST[:PORT]` makes when no block is named HOST: one
    /// peer per address of HOST.
    pub fn implicit(host: &str, port: u16) -> Result<UpstreamConf, error::Error> {
        let mut u = UpstreamConf::new(host, true);
        let addrs = resolve(host, port)?;
        for a in addrs {
            u.entries.push(ServerEntry::new(a.to_string()));
            u.addrs.push(PeerAddr::Inet(a));
        }
        Ok(u)
    }

    /// The upstream of a name the resolver looked up for one request: one peer per address.
    pub fn resolved(host: &str, addrs: &[std::net::IpAddr], port: u16) -> UpstreamConf {
        let mut u = UpstreamConf::new(host, true);
        for &ip in addrs {
            let a = SocketAddr::new(ip, port);
            u.entries.push(ServerEntry::new(a.to_string()));
            u.addrs.push(PeerAddr::Inet(a));
        }
        u.ephemeral = true;
        u
    }

    /// The upstream of `proxy_pass http://unix:/path`.
    pub fn unix(path: &str) -> UpstreamConf {
        let mut u = UpstreamConf::new(&format!("unix:{path}"), true);
        u.entries.push(ServerEntry::new(format!("unix:{path}")));
        u.addrs.push(PeerAddr::Unix(PathBuf::from(path)));
        u
    }

    /// `keepalive_requests` (default 1000).
    pub fn keepalive_requests(&self) -> u64 {
        self.keepalive_requests.unwrap_or(1000)
    }

    /// `keepalive_time` (default 1h).
    pub fn keepalive_time(&self) -> Duration {
        self.keepalive_time.unwrap_or(Duration::from_secs(3600))
    }

    /// `keepalive_timeout` (default 60s).
    pub fn keepalive_timeout(&self) -> Duration {
        self.keepalive_timeout.unwrap_or(Duration::from_secs(60))
    }
}

/// The addresses of `host:port` (a literal address, or a name looked up now).
fn resolve(host: &str, port: u16) -> Result<Vec<SocketAddr>, error::Error> {
    let bare = host
        .strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .unwrap_or(host);
    if let Ok(ip) = bare.parse::<std::net::IpAddr>() {
        return Ok(vec![SocketAddr::new(ip, port)]);
    }
    let mut out: Vec<SocketAddr> = Vec::new();
    match (bare, port).to_socket_addrs() {
        Ok(it) => {
            for a in it {
                if !out.contains(&a) {
                    out.push(a);
                }
            }
        }
        Err(_) => {
            return Err(error::Error::resolve(format!(
                "host not found in upstream \"{host}\""
            )))
        }
    }
    if out.is_empty() {
        return Err(error::Error::resolve(format!(
            "host not found in upstream \"{host}\""
        )));
    }
    Ok(out)
}

/// `HOST[:PORT]` as an upstream `server` line or `proxy_pass` writes it: the host and the
/// port (`default` when none is written). An IPv6 address is in brackets.
pub fn split_host_port(text: &str, default: u16) -> Result<(String, u16), error::Error> {
    let invalid_port = || error::Error::invalid(format!("invalid port in upstream \"{text}\""));
    let (host, port) = if let Some(rest) = text.strip_prefix('[') {
        let end = rest.find(']').ok_or_else(|| {
            error::Error::invalid(format!("invalid IPv6 address in upstream \"{text}\""))
        })?;
        let host = &text[..end + 2];
        match &rest[end + 1..] {
            "" => (host, None),
            p => (host, Some(p.strip_prefix(':').ok_or_else(invalid_port)?)),
        }
    } else {
        match text.rsplit_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (text, None),
        }
    };
    let port = match port {
        None => default,
        Some(p) => match p.parse::<u32>() {
            Ok(n) if (1..=65535).contains(&n) => n as u16,
            _ => return Err(invalid_port()),
        },
    };
    if host.is_empty() {
        return Err(error::Error::invalid(format!(
            "no host in upstream \"{text}\""
        )));
    }
    Ok((host.to_string(), port))
}

fn upstream_conf<'a>(s: &'a mut Scope<'_>) -> &'a mut UpstreamConf {
    match s {
        Scope::Upstream(u) => u,
        _ => unreachable!("the registry allows upstream directives in upstream blocks only"),
    }
}

fn set_upstream(b: &mut Builder, d: &Directive, s: &mut Scope<'_>) -> Result<(), Error> {
    let (upstreams, ctx) = match s {
        Scope::Http(http) => (&mut http.upstreams, Ctx::UPSTREAM),
        Scope::Stream(stream) => (&mut stream.upstreams, Ctx::STREAM_UPSTREAM),
        _ => unreachable!("upstream is allowed in http and stream only"),
    };
    let name = d.args[0].value.clone();
    if upstreams.iter().any(|u| u.name == name) {
        return Err(err(d, format!("duplicate upstream \"{name}\"")));
    }
    let mut u = UpstreamConf::new(&name, false);
    u.stream = ctx == Ctx::STREAM_UPSTREAM;
    u.span = Some(d.span.clone());
    let body = d.block.as_deref().unwrap_or_default();
    b.walk(body, ctx, &mut Scope::Upstream(&mut u))?;
    if u.entries.is_empty() && !body.iter().any(|d| d.name == "server") {
        // nginx reports it at the block's closing brace; shoal knows the opening line.
        return Err(err(d, "no servers are inside upstream"));
    }
    if u.resolving.is_some() && !u.zone {
        return Err(Error::new(
            format!(
                "resolving names at run time requires upstream \"{name}\" in {} to be in \
                 shared memory",
                d.span
            ),
            None,
        ));
    }
    // Peers that come from names looked up at run time are checked as they come.
    let checked = match super::Balancer::new(u.method, &u.entries, 0) {
        Err(UpstreamError::NoServers) if u.resolving.is_some() => Ok(()),
        other => other.map(|_| ()),
    };
    if let Err(e) = checked {
        let message = match e {
            UpstreamError::NoServers => format!("no servers in upstream \"{name}\""),
            other => other.to_string(),
        };
        return Err(err(d, message));
    }
    upstreams.push(Arc::new(u));
    Ok(())
}

fn set_server(_: &mut Builder, d: &Directive, s: &mut Scope<'_>) -> Result<(), Error> {
    let u = upstream_conf(s);
    let text = d.args[0].value.as_str();
    let mut entry = ServerEntry::new(text);
    let mut run_time = false;
    for a in &d.args[1..] {
        let v = a.value.as_str();
        let bad = || err(d, format!("invalid parameter \"{v}\""));
        let num = |x: &str| parse_number(x).and_then(|n| u32::try_from(n).ok());
        if let Some(x) = v.strip_prefix("weight=") {
            entry.weight = num(x).filter(|&n| n > 0).ok_or_else(bad)?;
        } else if let Some(x) = v.strip_prefix("max_fails=") {
            entry.max_fails = num(x).ok_or_else(bad)?;
        } else if let Some(x) = v.strip_prefix("fail_timeout=") {
            entry.fail_timeout = parse_time(x).ok_or_else(bad)?;
        } else if let Some(x) = v.strip_prefix("max_conns=") {
            entry.max_conns = num(x).ok_or_else(bad)?;
        } else if v == "backup" {
            entry.backup = true;
        } else if v == "down" {
            entry.down = true;
        } else if v == "resolve" {
            run_time = true;
        } else if v.starts_with("service=") {
            return Err(err(
                d,
                "the \"service\" parameter of the \"server\" directive is not supported by shoal yet",
            ));
        } else {
            return Err(bad());
        }
    }
    if entry.backup && !u.method.allows_backup() {
        return Err(err(
            d,
            "balancing method does not support parameter \"backup\"",
        ));
    }
    if run_time && !text.starts_with("unix:") {
        let (host, port) = split_host_port(text, 80).map_err(|m| err(d, m))?;
        let bare = host.trim_start_matches('[').trim_end_matches(']');
        if bare.parse::<std::net::IpAddr>().is_err() {
            let r = u.resolving.get_or_insert_with(Default::default);
            r.lines.push(super::resolve::ResolveLine {
                host: bare.to_string(),
                port,
                entry,
            });
            return Ok(());
        }
    }
    let addrs: Vec<PeerAddr> = if let Some(path) = text.strip_prefix("unix:") {
        vec![PeerAddr::Unix(PathBuf::from(path))]
    } else {
        let default_port = if u.stream { 0 } else { 80 };
        let (host, port) = split_host_port(text, default_port).map_err(|m| err(d, m))?;
        if port == 0 {
            return Err(err(d, format!("no port in upstream \"{text}\"")));
        }
        resolve(&host, port)
            .map_err(|m| err(d, m))?
            .into_iter()
            .map(PeerAddr::Inet)
            .collect()
    };
    let many = addrs.len() > 1;
    for a in addrs {
        let mut e = entry.clone();
        if many {
            // Consistent hashing hashes what the line wrote; several addresses of one name
            // are told apart by their own text.
            e.addr = a.to_string();
        }
        u.entries.push(e);
        u.addrs.push(a);
    }
    Ok(())
}

fn set_method(b: &mut Builder, d: &Directive, s: &mut Scope<'_>, m: Method) -> Result<(), Error> {
    let u = upstream_conf(s);
    if u.method != Method::RoundRobin {
        b.warn("load balancing method redefined", &d.span);
    }
    if !m.allows_backup() && u.entries.iter().any(|e| e.backup) {
        return Err(err(
            d,
            "balancing method does not support parameter \"backup\"",
        ));
    }
    u.method = m;
    Ok(())
}

fn set_least_conn(b: &mut Builder, d: &Directive, s: &mut Scope<'_>) -> Result<(), Error> {
    set_method(b, d, s, Method::LeastConn)
}

fn set_ip_hash(b: &mut Builder, d: &Directive, s: &mut Scope<'_>) -> Result<(), Error> {
    set_method(b, d, s, Method::IpHash)
}

fn set_hash(b: &mut Builder, d: &Directive, s: &mut Scope<'_>) -> Result<(), Error> {
    let consistent = match d.args.get(1).map(|a| a.value.as_str()) {
        None => false,
        Some("consistent") => true,
        Some(other) => return Err(err(d, format!("invalid parameter \"{other}\""))),
    };
    let key = Template::compile(&d.args[0].value).map_err(|m| err(d, m))?;
    set_method(b, d, s, Method::Hash { consistent })?;
    upstream_conf(s).hash_key = Some(key);
    Ok(())
}

fn set_random(b: &mut Builder, d: &Directive, s: &mut Scope<'_>) -> Result<(), Error> {
    let words: Vec<&str> = d.values().collect();
    let two = match words.as_slice() {
        [] => false,
        ["two"] | ["two", "least_conn"] => true,
        ["two", other] | [other, ..] => {
            return Err(err(d, format!("invalid parameter \"{other}\"")));
        }
    };
    set_method(b, d, s, Method::Random { two })
}

fn set_keepalive(_: &mut Builder, d: &Directive, s: &mut Scope<'_>) -> Result<(), Error> {
    let v = &d.args[0].value;
    let n = parse_number(v).filter(|&n| n > 0).ok_or_else(|| {
        err(
            d,
            format!("invalid value \"{v}\" in \"keepalive\" directive"),
        )
    })?;
    let u = upstream_conf(s);
    if u.keepalive.is_some() {
        return Err(crate::conf::duplicate(d));
    }
    u.keepalive = Some(n as usize);
    Ok(())
}

fn set_keepalive_requests(_: &mut Builder, d: &Directive, s: &mut Scope<'_>) -> Result<(), Error> {
    let n = crate::conf::number_arg(d, 0)?;
    crate::conf::set_once(&mut upstream_conf(s).keepalive_requests, n, d)
}

fn set_keepalive_time(_: &mut Builder, d: &Directive, s: &mut Scope<'_>) -> Result<(), Error> {
    let t = time_arg(d, 0)?;
    crate::conf::set_once(&mut upstream_conf(s).keepalive_time, t, d)
}

fn set_keepalive_timeout(_: &mut Builder, d: &Directive, s: &mut Scope<'_>) -> Result<(), Error> {
    let t = time_arg(d, 0)?;
    crate::conf::set_once(&mut upstream_conf(s).keepalive_timeout, t, d)
}

/// `zone NAME [SIZE]`: the peers' state shared by the workers (`state.rs`), as nginx shares
/// it through shared memory. The name and size are checked as nginx checks a shared memory
/// zone's (several upstreams may share one named once with a size); shoal's workers are
/// threads, so no memory is set aside.
fn set_zone(b: &mut Builder, d: &Directive, s: &mut Scope<'_>) -> Result<(), Error> {
    let name = &d.args[0].value;
    let size = match d.args.get(1) {
        Some(a) => {
            let size = crate::conf::parse_size(&a.value)
                .ok_or_else(|| err(d, format!("invalid zone size \"{}\"", a.value)))?;
            // nginx's least: eight pages.
            if size < 8 * 4096 {
                return Err(err(d, format!("zone \"{name}\" is too small")));
            }
            size
        }
        None => 0,
    };
    use crate::http::limit_zone::{Tag, Zone};
    b.shm_zones
        .add(d, name, size, Tag::Upstream, || Zone::Upstream)?;
    upstream_conf(s).zone = true;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_and_port() {
        assert_eq!(
            split_host_port("127.0.0.1:8080", 80).unwrap(),
            ("127.0.0.1".into(), 8080)
        );
        assert_eq!(
            split_host_port("backend", 80).unwrap(),
            ("backend".into(), 80)
        );
        assert_eq!(
            split_host_port("[::1]:81", 80).unwrap(),
            ("[::1]".into(), 81)
        );
        assert_eq!(split_host_port("[::1]", 80).unwrap(), ("[::1]".into(), 80));
        assert_eq!(
            split_host_port("127.0.0.1:99999", 80).unwrap_err(),
            "invalid port in upstream \"127.0.0.1:99999\""
        );
        assert!(split_host_port("h:0", 80).is_err());
    }

    #[test]
    fn literal_addresses_need_no_lookup() {
        assert_eq!(
            resolve("[::1]", 8080).unwrap(),
            vec!["[::1]:8080".parse().unwrap()]
        );
        assert_eq!(
            resolve("127.0.0.1", 80).unwrap(),
            vec!["127.0.0.1:80".parse().unwrap()]
        );
        assert!(resolve("no-such-host.invalid", 80).is_err());
    }

    #[test]
    fn addresses_print_as_upstream_addr() {
        assert_eq!(
            PeerAddr::Inet("[::1]:80".parse().unwrap()).to_string(),
            "[::1]:80"
        );
        assert_eq!(
            PeerAddr::Unix("/tmp/a.sock".into()).to_string(),
            "unix:/tmp/a.sock"
        );
    }
}
