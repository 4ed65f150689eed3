//! `listen`: parsing the directive, and opening listening sockets with its options.
//!
//! Sockets are opened by the master and outlive reloads: a [`SocketKey`] names a socket
//! (address, and the worker it belongs to when `reuseport` gives each worker its own), so a
//! reload keeps the sockets whose key stays, opens new ones and closes the rest. As in nginx, a
//! wildcard address (`*:80`) takes the connections of specific addresses on the same port
//! (`127.0.0.1:80`) unless those say `bind`; the server is then chosen by the connection's
//! local address.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, ToSocketAddrs};
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::PathBuf;
use std::time::Duration;

use socket2::{Domain, Socket, TcpKeepalive, Type};

use shoal_conf::{Directive, Error};

use crate::conf::{err, Args, Builder, Command, Ctx, Scope};
use crate::error;

pub static DIRECTIVES: &[Command] = &[Command::new(
    "listen",
    Ctx::SERVER,
    Args::ONE_OR_MORE,
    set_listen,
)];

/// An address to listen on.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ListenAddr {
    Inet(SocketAddr),
    Unix(PathBuf),
}

impl ListenAddr {
    fn is_wildcard(&self) -> bool {
        matches!(self, ListenAddr::Inet(a) if a.ip().is_unspecified())
    }
}

impl fmt::Display for ListenAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ListenAddr::Inet(a) => write!(f, "{a}"),
            ListenAddr::Unix(p) => write!(f, "unix:{}", p.display()),
        }
    }
}

/// `so_keepalive=on|off|[keepidle]:[keepintvl]:[keepcnt]`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum SoKeepalive {
    Off,
    On,
    Tuned {
        idle: Option<Duration>,
        interval: Option<Duration>,
        count: Option<u32>,
    },
}

/// The socket options of a `listen` (they belong to the address, not to one server).
#[derive(Clone, Debug, PartialEq, Eq, Hash, Default)]
pub struct SocketOptions {
    pub reuseport: bool,
    pub backlog: Option<i32>,
    pub rcvbuf: Option<usize>,
    pub sndbuf: Option<usize>,
    pub ipv6only: Option<bool>,
    pub so_keepalive: Option<SoKeepalive>,
    pub deferred: bool,
    pub bind: bool,
    pub fastopen: Option<u32>,
    /// `ssl`: the address speaks TLS. Not a socket option (every server's listen may say it
    /// without "duplicate listen options"), but, as they, a property of the address: one
    /// listen saying it makes the address TLS for all its servers, as in nginx.
    pub ssl: bool,
    /// `proxy_protocol`: connections begin with a PROXY protocol header. A property of the
    /// address as `ssl` is (nginx ORs it over the address's listens).
    pub proxy_protocol: bool,
    /// `udp` (stream): a datagram socket. Part of the address for stream, which tells
    /// `listen 53 udp` from `listen 53`.
    pub udp: bool,
    /// `http2` (deprecated since nginx 1.25.1 for the `http2` directive): HTTP/2 for every
    /// server of the address, a property of the address as `ssl` is.
    pub http2: bool,
}

impl SocketOptions {
    /// Whether a socket option is written (which makes the address need a socket of its own).
    pub fn any_set(&self) -> bool {
        SocketOptions {
            ssl: false,
            proxy_protocol: false,
            udp: false,
            http2: false,
            ..self.clone()
        } != SocketOptions::default()
    }
}

/// One `listen` directive.
#[derive(Clone, Debug)]
pub struct ListenConf {
    pub addr: ListenAddr,
    pub default_server: bool,
    pub opts: SocketOptions,
}

fn set_listen(b: &mut Builder, d: &Directive, s: &mut Scope<'_>) -> Result<(), Error> {
    let Scope::Server(srv) = s else {
        unreachable!("the registry allows listen in server only")
    };
    let addrs = parse_addr(&d.args[0].value).map_err(|m| {
        err(
            d,
            format!("{m} in \"{}\" of the \"listen\" directive", d.args[0].value),
        )
    })?;
    if srv.ssl.listen_span.is_none() {
        srv.ssl.listen_span = Some(d.span.clone());
    }
    let mut opts = SocketOptions::default();
    let mut default_server = false;
    for a in &d.args[1..] {
        let v = a.value.as_str();
        let (key, val) = match v.split_once('=') {
            Some((k, val)) => (k, Some(val)),
            None => (v, None),
        };
        match (key, val) {
            ("default_server" | "default", None) => default_server = true,
            ("deferred", None) => {
                opts.deferred = true;
                opts.bind = true;
            }
            ("ssl", None) => opts.ssl = true,
            ("proxy_protocol", None) => opts.proxy_protocol = true,
            ("http2", None) => {
                b.warn(
                    "the \"listen ... http2\" directive is deprecated, use the \"http2\" directive instead",
                    &d.span,
                );
                opts.http2 = true;
            }
            ("quic", None) => {
                return Err(err(
                    d,
                    format!("the \"{key}\" parameter of the \"listen\" directive is not supported by shoal yet"),
                ));
            }
            _ => match socket_option(&mut opts, key, val) {
                Ok(true) => {}
                Ok(false) => return Err(err(d, format!("invalid parameter \"{v}\""))),
                Err(m) => return Err(err(d, m)),
            },
        }
    }
    for addr in addrs {
        if srv.listen.iter().any(|l| l.addr == addr) {
            return Err(err(d, format!("a duplicate listen {addr}")));
        }
        let seen = b.listens.iter_mut().find(|(a, _, _)| *a == addr);
        match seen {
            Some((_, had_opts, had_default)) => {
                if opts.any_set() && *had_opts {
                    return Err(err(d, format!("duplicate listen options for {addr}")));
                }
                if default_server && *had_default {
                    return Err(err(d, format!("a duplicate default server for {addr}")));
                }
                *had_opts |= opts.any_set();
                *had_default |= default_server;
            }
            None => b
                .listens
                .push((addr.clone(), opts.any_set(), default_server)),
        }
        srv.listen.push(ListenConf {
            addr,
            default_server,
            opts: opts.clone(),
        });
    }
    Ok(())
}

/// The socket options http's and stream's `listen` share (`reuseport`, `bind`, `backlog=`,
/// `rcvbuf=`, `sndbuf=`, `fastopen=`, `ipv6only=`, `so_keepalive=`): `Ok(false)` when `key` is
/// none of them, `Err` with nginx's message for a bad value.
pub fn socket_option(
    opts: &mut SocketOptions,
    key: &str,
    val: Option<&str>,
) -> Result<bool, error::Error> {
    let bad = || error::Error::invalid(format!("invalid {key} \"{}\"", val.unwrap_or("")));
    match (key, val) {
        ("reuseport", None) => opts.reuseport = true,
        ("bind", None) => {}
        ("backlog", Some(n)) => {
            let n: i32 = n.parse().ok().filter(|n| *n != 0).ok_or_else(bad)?;
            opts.backlog = Some(n);
        }
        ("rcvbuf", Some(n)) => {
            opts.rcvbuf = Some(crate::conf::parse_size(n).ok_or_else(bad)? as usize);
        }
        ("sndbuf", Some(n)) => {
            opts.sndbuf = Some(crate::conf::parse_size(n).ok_or_else(bad)? as usize);
        }
        ("fastopen", Some(n)) => opts.fastopen = Some(n.parse().map_err(|_| bad())?),
        ("ipv6only", Some(v)) => {
            let on = crate::conf::parse_flag(v)
                .ok_or_else(|| error::Error::invalid(format!("invalid ipv6only flags \"{v}\"")))?;
            opts.ipv6only = Some(on);
        }
        ("so_keepalive", Some(v)) => {
            opts.so_keepalive = Some(parse_so_keepalive(v).ok_or_else(|| {
                error::Error::invalid(format!("invalid so_keepalive value: \"{v}\""))
            })?);
        }
        _ => return Ok(false),
    }
    // Every one of them needs a socket of its own for the address.
    opts.bind = true;
    Ok(true)
}

fn parse_so_keepalive(v: &str) -> Option<SoKeepalive> {
    match v {
        "on" => return Some(SoKeepalive::On),
        "off" => return Some(SoKeepalive::Off),
        _ => {}
    }
    let mut parts = v.split(':');
    let (idle, interval, count) = (parts.next()?, parts.next()?, parts.next()?);
    if parts.next().is_some() {
        return None;
    }
    let time = |s: &str| -> Option<Option<Duration>> {
        if s.is_empty() {
            Some(None)
        } else {
            crate::conf::parse_time(s).map(Some)
        }
    };
    let count = if count.is_empty() {
        None
    } else {
        Some(count.parse().ok()?)
    };
    Some(SoKeepalive::Tuned {
        idle: time(idle)?,
        interval: time(interval)?,
        count,
    })
}

/// nginx's reading of a listen address: `ADDR:PORT`, `PORT`, `*:PORT`, `ADDR` (port 80),
/// `[::]:PORT`, `unix:/path`, and a port range in place of a port (`127.0.0.1:8000-8010`,
/// `8000-8010`, nginx 1.15.10+: one address per port). A host name may resolve to several
/// addresses; each address comes with every port of the range, in order.
pub fn parse_addr(s: &str) -> Result<Vec<ListenAddr>, &'static str> {
    if let Some(path) = s.strip_prefix("unix:") {
        if path.is_empty() {
            return Err("no path in the unix domain socket");
        }
        return Ok(vec![ListenAddr::Unix(PathBuf::from(path))]);
    }
    let inet = |ips: &[IpAddr], (lo, hi): (u16, u16)| -> Vec<ListenAddr> {
        ips.iter()
            .flat_map(|&ip| (lo..=hi).map(move |p| ListenAddr::Inet(SocketAddr::new(ip, p))))
            .collect()
    };
    if let Some(rest) = s.strip_prefix('[') {
        let (host, after) = rest.split_once(']').ok_or("invalid host")?;
        let ip: Ipv6Addr = host.parse().map_err(|_| "invalid IPv6 address")?;
        let ports = match after.strip_prefix(':') {
            Some(p) => ports_of(p)?,
            None if after.is_empty() => (80, 80),
            None => return Err("invalid host"),
        };
        return Ok(inet(&[IpAddr::V6(ip)], ports));
    }
    if let Some(ports) = port_only(s) {
        return Ok(inet(&[IpAddr::V4(Ipv4Addr::UNSPECIFIED)], ports?));
    }
    let (host, ports) = match s.rsplit_once(':') {
        Some((h, p)) => (h, ports_of(p)?),
        None => (s, (80, 80)),
    };
    if host == "*" {
        return Ok(inet(&[IpAddr::V4(Ipv4Addr::UNSPECIFIED)], ports));
    }
    if let Ok(ip) = host.parse::<Ipv4Addr>() {
        return Ok(inet(&[IpAddr::V4(ip)], ports));
    }
    if host.is_empty() {
        return Err("no host");
    }
    let mut ips: Vec<IpAddr> = (host, ports.0)
        .to_socket_addrs()
        .map_err(|_| "host not found")?
        .map(|a| a.ip())
        .collect();
    ips.sort();
    ips.dedup();
    if ips.is_empty() {
        return Err("host not found");
    }
    let mut out = inet(&ips, ports);
    out.sort();
    Ok(out)
}

fn port_of(p: &str) -> Result<u16, &'static str> {
    match p.parse::<u32>() {
        Ok(n) if (1..=65535).contains(&n) && p.bytes().all(|c| c.is_ascii_digit()) => Ok(n as u16),
        _ => Err("invalid port"),
    }
}

/// `PORT` or `FIRST-LAST` after an address's colon; nginx checks the last port first.
fn ports_of(p: &str) -> Result<(u16, u16), &'static str> {
    match p.split_once('-') {
        Some((first, last)) => {
            let last = port_of(last)?;
            let first = port_of(first)?;
            if first > last {
                return Err("invalid port range");
            }
            Ok((first, last))
        }
        None => port_of(p).map(|n| (n, n)),
    }
}

/// A listen address that is only a port or a port range (`8000`, `8000-8010`): `None` when
/// it is not one (a host name such as `backend-2`).
fn port_only(s: &str) -> Option<Result<(u16, u16), &'static str>> {
    let digits = |t: &str| !t.is_empty() && t.bytes().all(|c| c.is_ascii_digit());
    match s.split_once('-') {
        None if digits(s) => Some(ports_of(s)),
        Some((first, last)) if digits(first) && digits(last) => Some(ports_of(s)),
        _ => None,
    }
}

/// Names one listening socket: its address, and the worker it serves when `reuseport` gives
/// each worker a socket of its own (`None`: one socket shared by every worker).
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SocketKey {
    pub addr: ListenAddr,
    pub worker: Option<usize>,
    /// Which module's connections it takes (an http and a stream socket never share a key).
    pub kind: SocketKind,
}

/// What a listening socket serves.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum SocketKind {
    #[default]
    Http,
    /// A `stream {}` TCP or unix listener.
    Stream,
    /// A `stream {}` `listen ... udp`.
    StreamUdp,
}

/// The sockets a configuration needs: each bound address with its options. Specific addresses
/// covered by a wildcard on the same port (and not marked `bind`) are served by the wildcard.
pub fn bound_addresses(listens: &[&ListenConf]) -> Vec<(ListenAddr, SocketOptions)> {
    let mut out: Vec<(ListenAddr, SocketOptions)> = Vec::new();
    for l in listens {
        if let Some(existing) = out.iter_mut().find(|(a, _)| *a == l.addr) {
            if l.opts.any_set() {
                let ssl = existing.1.ssl;
                existing.1 = l.opts.clone();
                existing.1.ssl |= ssl;
            }
            existing.1.ssl |= l.opts.ssl;
            continue;
        }
        out.push((l.addr.clone(), l.opts.clone()));
    }
    let wildcards: Vec<SocketAddr> = out
        .iter()
        .filter(|(a, _)| a.is_wildcard())
        .filter_map(|(a, _)| match a {
            ListenAddr::Inet(s) => Some(*s),
            ListenAddr::Unix(_) => None,
        })
        .collect();
    out.retain(|(a, o)| match a {
        ListenAddr::Inet(s) if !s.ip().is_unspecified() && !o.bind => !wildcards
            .iter()
            .any(|w| w.port() == s.port() && w.is_ipv4() == s.is_ipv4()),
        _ => true,
    });
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

/// nginx's default backlog on Linux.
const DEFAULT_BACKLOG: i32 = 511;

/// Opens, configures, binds and listens. The error reads as nginx's:
/// `bind() to 0.0.0.0:80 failed (98: Address already in use)`.
pub fn open_socket(addr: &ListenAddr, opts: &SocketOptions) -> Result<OwnedFd, error::Error> {
    let (domain, sockaddr) = match addr {
        ListenAddr::Inet(a) => (Domain::for_address(*a), socket2::SockAddr::from(*a)),
        ListenAddr::Unix(p) => (
            Domain::UNIX,
            socket2::SockAddr::unix(p)
                .map_err(|e| error::Error::invalid(format!("bad unix path {}", e)))?,
        ),
    };
    let os = |what: &str, e: std::io::Error| error::Error::failed(format_args!("{what} {addr}"), e);
    let ty = if opts.udp { Type::DGRAM } else { Type::STREAM };
    let sock =
        Socket::new(domain, ty.cloexec().nonblocking(), None).map_err(|e| os("socket()", e))?;
    if let ListenAddr::Inet(a) = addr {
        sock.set_reuse_address(true)
            .map_err(|e| os("setsockopt(SO_REUSEADDR)", e))?;
        if opts.reuseport {
            sock.set_reuse_port(true)
                .map_err(|e| os("setsockopt(SO_REUSEPORT)", e))?;
        }
        if a.is_ipv6() {
            sock.set_only_v6(opts.ipv6only.unwrap_or(true))
                .map_err(|e| os("setsockopt(IPV6_V6ONLY)", e))?;
        }
        if let Some(n) = opts.fastopen.filter(|_| !opts.udp) {
            setsockopt_int(
                &sock,
                libc::IPPROTO_TCP,
                libc::TCP_FASTOPEN,
                n as libc::c_int,
            )
            .map_err(|e| os("setsockopt(TCP_FASTOPEN)", e))?;
        }
        if opts.deferred && !opts.udp {
            setsockopt_int(&sock, libc::IPPROTO_TCP, libc::TCP_DEFER_ACCEPT, 1)
                .map_err(|e| os("setsockopt(TCP_DEFER_ACCEPT)", e))?;
        }
        match opts.so_keepalive.as_ref().filter(|_| !opts.udp) {
            None => {}
            Some(SoKeepalive::Off) => sock
                .set_keepalive(false)
                .map_err(|e| os("setsockopt(SO_KEEPALIVE)", e))?,
            Some(SoKeepalive::On) => sock
                .set_keepalive(true)
                .map_err(|e| os("setsockopt(SO_KEEPALIVE)", e))?,
            Some(SoKeepalive::Tuned {
                idle,
                interval,
                count,
            }) => {
                let mut ka = TcpKeepalive::new();
                if let Some(t) = idle {
                    ka = ka.with_time(*t);
                }
                if let Some(t) = interval {
                    ka = ka.with_interval(*t);
                }
                if let Some(n) = count {
                    ka = ka.with_retries(*n);
                }
                sock.set_tcp_keepalive(&ka)
                    .map_err(|e| os("setsockopt(SO_KEEPALIVE)", e))?;
            }
        }
    }
    if let Some(n) = opts.rcvbuf {
        sock.set_recv_buffer_size(n)
            .map_err(|e| os("setsockopt(SO_RCVBUF)", e))?;
    }
    if let Some(n) = opts.sndbuf {
        sock.set_send_buffer_size(n)
            .map_err(|e| os("setsockopt(SO_SNDBUF)", e))?;
    }
    sock.bind(&sockaddr).map_err(|e| os("bind() to", e))?;
    if let ListenAddr::Unix(p) = addr {
        use std::os::unix::fs::PermissionsExt;
        let _ = std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o666));
    }
    if !opts.udp {
        sock.listen(opts.backlog.unwrap_or(DEFAULT_BACKLOG))
            .map_err(|e| os("listen() to", e))?;
    }
    Ok(sock.into())
}

/// An integer socket option socket2 does not wrap.
fn setsockopt_int(
    sock: &Socket,
    level: libc::c_int,
    name: libc::c_int,
    value: libc::c_int,
) -> std::io::Result<()> {
    // SAFETY: a valid socket fd and a pointer to a c_int of the size passed.
    let rc = unsafe {
        libc::setsockopt(
            sock.as_raw_fd(),
            level,
            name,
            &value as *const libc::c_int as *const libc::c_void,
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn inet(s: &str) -> ListenAddr {
        ListenAddr::Inet(s.parse().unwrap())
    }

    #[test]
    fn addresses() {
        assert_eq!(parse_addr("8080").unwrap(), vec![inet("0.0.0.0:8080")]);
        assert_eq!(parse_addr("*:81").unwrap(), vec![inet("0.0.0.0:81")]);
        assert_eq!(parse_addr("127.0.0.1").unwrap(), vec![inet("127.0.0.1:80")]);
        assert_eq!(parse_addr("[::]:8080").unwrap(), vec![inet("[::]:8080")]);
        assert_eq!(parse_addr("[::1]").unwrap(), vec![inet("[::1]:80")]);
        assert_eq!(
            parse_addr("unix:/tmp/s.sock").unwrap(),
            vec![ListenAddr::Unix("/tmp/s.sock".into())]
        );
        assert_eq!(parse_addr("70000"), Err("invalid port"));
        assert_eq!(parse_addr("1.2.3.4:0"), Err("invalid port"));
        assert_eq!(
            parse_addr("127.0.0.1:8000-8002").unwrap(),
            vec![
                inet("127.0.0.1:8000"),
                inet("127.0.0.1:8001"),
                inet("127.0.0.1:8002")
            ]
        );
        assert_eq!(
            parse_addr("9000-9001").unwrap(),
            vec![inet("0.0.0.0:9000"), inet("0.0.0.0:9001")]
        );
        assert_eq!(parse_addr("[::1]:80-80").unwrap(), vec![inet("[::1]:80")]);
        assert_eq!(parse_addr("1.2.3.4:9-8"), Err("invalid port range"));
        assert_eq!(parse_addr("9-8"), Err("invalid port range"));
        assert_eq!(parse_addr("1.2.3.4:1-70000"), Err("invalid port"));
        assert_eq!(parse_addr("1.2.3.4:0-5"), Err("invalid port"));
        assert_eq!(parse_addr("1.2.3.4:5-"), Err("invalid port"));
        assert!(parse_addr("localhost:8080")
            .unwrap()
            .contains(&inet("127.0.0.1:8080")));
    }

    #[test]
    fn wildcard_covers_specific_addresses() {
        let l = |a: &str, bind: bool| ListenConf {
            addr: inet(a),
            default_server: false,
            opts: SocketOptions {
                bind,
                ..Default::default()
            },
        };
        let a = l("0.0.0.0:80", false);
        let b = l("127.0.0.1:80", false);
        let c = l("127.0.0.2:80", true);
        let got: Vec<_> = bound_addresses(&[&a, &b, &c])
            .into_iter()
            .map(|x| x.0)
            .collect();
        assert_eq!(got, vec![inet("0.0.0.0:80"), inet("127.0.0.2:80")]);
    }

    #[test]
    fn so_keepalive_forms() {
        assert_eq!(parse_so_keepalive("on"), Some(SoKeepalive::On));
        assert_eq!(
            parse_so_keepalive("30m::10"),
            Some(SoKeepalive::Tuned {
                idle: Some(Duration::from_secs(1800)),
                interval: None,
                count: Some(10)
            })
        );
        assert_eq!(parse_so_keepalive("1:2"), None);
    }
}
