//! `resolver ADDRESS ... [valid=TIME] [ipv4=on|off] [ipv6=on|off] [status_zone=ZONE]` and
//! `resolver_timeout TIME` (nginx's core module), at http, server and location level and, as
//! nginx 1.27.3+ allows, in an `upstream` block (for its `server ... resolve` lines).
//!
//! `ipv4=` is nginx 1.23.1+'s (1.22 reads it as an address); its words are the later
//! nginx's. An address is `IP`, `IP:PORT`, `[IPv6]:PORT` or a name looked up when the configuration is
//! read (every address it has), port 53 unless written. `status_zone=` (statistics of a
//! commercial nginx) is accepted and counts nothing here.

use std::net::{IpAddr, Ipv6Addr, SocketAddr, ToSocketAddrs};
use std::sync::Arc;
use std::time::Duration;

use shoal_conf::{Directive, Error};

use super::Resolver;
use crate::conf::{err, set_once, time_arg, Args, Builder, Command, Ctx, Scope};
use crate::http::loc_conf;

pub static DIRECTIVES: &[Command] = &[
    Command::new(
        "resolver",
        Ctx::HSL.or(Ctx::UPSTREAM),
        Args::ONE_OR_MORE,
        set_resolver,
    ),
    Command::new(
        "resolver_timeout",
        Ctx::HSL.or(Ctx::UPSTREAM),
        Args::ONE,
        set_resolver_timeout,
    ),
];

/// `resolver` and `resolver_timeout` at location level.
#[derive(Clone, Debug, Default)]
pub struct ResolverLoc {
    pub resolver: Option<Arc<Resolver>>,
    pub timeout: Option<Duration>,
}

impl ResolverLoc {
    pub fn merge(&mut self, parent: &Self) {
        crate::conf::merge(&mut self.resolver, &parent.resolver);
        crate::conf::merge(&mut self.timeout, &parent.timeout);
    }

    /// `resolver_timeout` (default 30s).
    pub fn timeout(&self) -> Duration {
        self.timeout.unwrap_or(Duration::from_secs(30))
    }
}

/// Reads a `resolver` line's arguments (nginx's `ngx_resolver_create`).
pub fn parse(d: &Directive) -> Result<Resolver, Error> {
    let mut servers = Vec::new();
    let mut r = Resolver::new(Vec::new());
    for a in &d.args {
        let v = a.value.as_str();
        let invalid = || err(d, format!("invalid parameter: {v}"));
        if let Some(t) = v.strip_prefix("valid=") {
            let t = crate::conf::parse_time(t).ok_or_else(invalid)?;
            r.valid = Some(Duration::from_secs(t.as_secs()));
            continue;
        }
        if let Some(f) = v.strip_prefix("ipv4=") {
            r.ipv4 = flag(f).ok_or_else(invalid)?;
            continue;
        }
        if let Some(f) = v.strip_prefix("ipv6=") {
            r.ipv6 = flag(f).ok_or_else(invalid)?;
            continue;
        }
        if v.starts_with("status_zone=") {
            continue;
        }
        let addrs = server_addrs(v).map_err(|m| err(d, format!("{m} in resolver \"{v}\"")))?;
        servers.extend(addrs);
    }
    if !r.ipv4 && !r.ipv6 {
        return Err(err(d, "\"ipv4\" and \"ipv6\" cannot both be \"off\""));
    }
    r.servers = servers;
    Ok(r)
}

fn flag(v: &str) -> Option<bool> {
    match v {
        "on" => Some(true),
        "off" => Some(false),
        _ => None,
    }
}

/// A DNS server's address as nginx's `ngx_parse_url` reads it (default port 53), and its
/// error words.
fn server_addrs(text: &str) -> Result<Vec<SocketAddr>, &'static str> {
    let port_of = |p: &str| -> Result<u16, &'static str> {
        match p.parse::<u32>() {
            Ok(n) if (1..=65535).contains(&n) => Ok(n as u16),
            _ => Err("invalid port"),
        }
    };
    if let Some(rest) = text.strip_prefix('[') {
        let (host, after) = rest.split_once(']').ok_or("invalid host")?;
        let ip: Ipv6Addr = host.parse().map_err(|_| "invalid IPv6 address")?;
        let port = match after.strip_prefix(':') {
            Some(p) => port_of(p)?,
            None if after.is_empty() => 53,
            None => return Err("invalid host"),
        };
        return Ok(vec![SocketAddr::new(IpAddr::V6(ip), port)]);
    }
    let (host, port) = match text.rsplit_once(':') {
        Some((h, p)) => (h, port_of(p)?),
        None => (text, 53),
    };
    if host.is_empty() {
        return Err("no host");
    }
    if let Ok(ip) = host.parse::<IpAddr>() {
        return Ok(vec![SocketAddr::new(ip, port)]);
    }
    let mut out: Vec<SocketAddr> = (host, port)
        .to_socket_addrs()
        .map_err(|_| "host not found")?
        .collect();
    out.dedup();
    if out.is_empty() {
        return Err("host not found");
    }
    Ok(out)
}

fn set_resolver(_: &mut Builder, d: &Directive, s: &mut Scope<'_>) -> Result<(), Error> {
    let r = Arc::new(parse(d)?);
    if let Scope::Upstream(u) = s {
        return set_once(&mut u.resolver, r, d);
    }
    set_once(&mut loc_conf(s).resolver.resolver, r, d)
}

fn set_resolver_timeout(_: &mut Builder, d: &Directive, s: &mut Scope<'_>) -> Result<(), Error> {
    let t = time_arg(d, 0)?;
    if let Scope::Upstream(u) = s {
        return set_once(&mut u.resolver_timeout, t, d);
    }
    set_once(&mut loc_conf(s).resolver.timeout, t, d)
}

/// The resolver's place in the module list (the proxy reads `lc.resolver`).
pub struct Module;

impl crate::http::modules::HttpModule for Module {
    type Loc = ResolverLoc;
    const DIRECTIVES: &'static [Command] = DIRECTIVES;

    fn merge(loc: &mut ResolverLoc, parent: &ResolverLoc) {
        loc.merge(parent);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn server_addresses() {
        assert_eq!(
            server_addrs("127.0.0.1").unwrap(),
            vec!["127.0.0.1:53".parse().unwrap()]
        );
        assert_eq!(
            server_addrs("127.0.0.1:5353").unwrap(),
            vec!["127.0.0.1:5353".parse().unwrap()]
        );
        assert_eq!(
            server_addrs("[::1]").unwrap(),
            vec!["[::1]:53".parse().unwrap()]
        );
        assert_eq!(server_addrs("127.0.0.1:0"), Err("invalid port"));
        assert_eq!(server_addrs("127.0.0.1:x"), Err("invalid port"));
        assert_eq!(server_addrs("[::1"), Err("invalid host"));
        assert_eq!(server_addrs(":53"), Err("no host"));
        assert_eq!(server_addrs("no-such-host.invalid"), Err("host not found"));
    }
}
