//! nginx's ngx_http_realip_module: `set_real_ip_from`, `real_ip_header`, `real_ip_recursive`,
//! `$realip_remote_addr`, `$realip_remote_port`. A request that comes from a trusted address
//! takes its client address (and port, when one is given) from a header or from the
//! connection's PROXY protocol header.
//!
//! **Where it runs**, as in nginx: at the post-read phase, once per request before the
//! server's rewrites, with the server's configuration; and at the preaccess phase with the
//! location's, unless the address was changed already. So a location's `set_real_ip_from` is
//! not seen by a `return` or `if` of that location (they run before preaccess), and is by
//! everything after: `allow`/`deny`, `limit_req`/`limit_conn` keys (`$binary_remote_addr`),
//! the content handler and the access log.
//!
//! **What changes**: the address lives in the request's extras
//! ([`crate::http::request::Extras::real_client`]) for the request's life, as nginx changes
//! the connection's address until the request's pool goes: `$remote_addr`, `$remote_port`
//! (empty when the header gave no port), `$binary_remote_addr`, `ip_hash`, the `client:` of
//! the request's error-log lines and the access log all see it; the connection's own address
//! stays `$realip_remote_addr`. The next request on the connection starts from the
//! connection's address again.
//!
//! The header is read as nginx reads it (see [`forwarded`]): `X-Real-IP` and any other named
//! header by their first line, `X-Forwarded-For` by all of its lines from the last. The names
//! `X-Real-IP` and `X-Forwarded-For` are nginx's only when written so (any other spelling is a
//! header like any other: its first line only).
//!
//! Unlike nginx, a location reached by an internal redirect does not try again when the first
//! location did not change the address (shoal's preaccess phase runs once per request).

pub mod forwarded;

use std::net::{SocketAddr, ToSocketAddrs};
use std::sync::Arc;

use shoal_conf::{Directive, Error};

use self::forwarded::{Cidr, Trusted};
use crate::conf::{err, flag_arg, set_once, Args, Builder, Command, Ctx, Scope};
use crate::http::loc_conf;
use crate::http::modules::Cx;
use crate::variables::Vars;

pub static DIRECTIVES: &[Command] = &[
    Command::new(
        "set_real_ip_from",
        Ctx::HSL.or(Ctx::SS),
        Args::ONE,
        set_real_ip_from,
    ),
    Command::new("real_ip_header", Ctx::HSL, Args::ONE, set_real_ip_header),
    Command::new(
        "real_ip_recursive",
        Ctx::HSL,
        Args::Flag,
        set_real_ip_recursive,
    ),
];

/// Where the client address is read from (`real_ip_header`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Source {
    /// `X-Real-IP` (the default): its first line.
    XRealIp,
    /// `X-Forwarded-For`: all of its lines.
    XForwardedFor,
    /// `proxy_protocol`: the connection's PROXY protocol header.
    ProxyProtocol,
    /// Any other header (lowercase name): its first line.
    Header(String),
}

/// The realip module's location-level configuration.
#[derive(Clone, Debug, Default)]
pub struct RealipLoc {
    /// `set_real_ip_from` lines of the level that has some (a level with any replaces its
    /// parent's, as in nginx).
    pub from: Option<Arc<Trusted>>,
    pub source: Option<Source>,
    pub recursive: Option<bool>,
}

impl RealipLoc {
    /// Fills what this level left unset from its parent.
    pub fn merge(&mut self, parent: &Self) {
        crate::conf::merge(&mut self.from, &parent.from);
        crate::conf::merge(&mut self.source, &parent.source);
        crate::conf::merge(&mut self.recursive, &parent.recursive);
    }

    /// The client address this configuration gives a request, if it changes it.
    fn real_client(&self, cx: &Cx<'_, '_, '_>) -> Option<SocketAddr> {
        let from = self.from.as_deref()?;
        let r = cx.r;
        let conn = r.info.peer.map(|p| p.ip());
        if !from.contains(conn) {
            return None;
        }
        let recursive = self.recursive.unwrap_or(false);
        let walk = |values: &[&[u8]]| forwarded::forwarded(conn, values, from, recursive);
        match self.source.as_ref().unwrap_or(&Source::XRealIp) {
            Source::ProxyProtocol => {
                let h = r.info.proxy.as_deref()?;
                let ip = forwarded::parse_addr(h.src_addr.as_bytes())?;
                Some(SocketAddr::new(ip, h.src_port))
            }
            Source::XRealIp => walk(&[r.req.header("x-real-ip")?]),
            Source::Header(name) => walk(&[r.req.header(name)?]),
            Source::XForwardedFor => {
                let values: Vec<&[u8]> = r.req.header_all("x-forwarded-for").collect();
                walk(&values)
            }
        }
    }

    /// Changes the request's client address if this configuration says so and no earlier
    /// phase did (nginx's handler, at post-read and at preaccess).
    fn apply(&self, cx: &Cx<'_, '_, '_>) {
        if cx.r.extras.real_client().is_some() {
            return;
        }
        if let Some(addr) = self.real_client(cx) {
            cx.r.extras.set_real_client(addr);
        }
    }
}

fn set_real_ip_from(b: &mut Builder, d: &Directive, s: &mut Scope<'_>) -> Result<(), Error> {
    if let Some(level) = crate::stream::level(s) {
        return add_trusted(b, d, &mut level.real_ip_from);
    }
    add_trusted(b, d, &mut loc_conf(s).realip.from)
}

/// Adds a `set_real_ip_from` line to the trusted addresses of its level (http's location,
/// stream's server).
pub fn add_trusted(
    b: &mut Builder,
    d: &Directive,
    slot: &mut Option<Arc<Trusted>>,
) -> Result<(), Error> {
    let text = d.args[0].value.as_str();
    let mut from = slot.as_deref().cloned().unwrap_or_default();
    if text == "unix:" {
        from.add(Cidr::Unix);
    } else if let Some((cidr, masked)) = Cidr::parse(text) {
        from.add(cidr);
        if masked {
            b.warn(
                format!("low address bits of {text} are meaningless"),
                &d.span,
            );
        }
    } else {
        // A host name: every address it has (nginx 1.13.1+).
        let addrs: Vec<SocketAddr> = (text, 0)
            .to_socket_addrs()
            .map_err(|_| err(d, format!("host not found in set_real_ip_from \"{text}\"")))?
            .collect();
        if addrs.is_empty() {
            return Err(err(
                d,
                format!("host not found in set_real_ip_from \"{text}\""),
            ));
        }
        for a in addrs {
            from.add(Cidr::host(a.ip()));
        }
    }
    *slot = Some(Arc::new(from));
    Ok(())
}

fn set_real_ip_header(_: &mut Builder, d: &Directive, s: &mut Scope<'_>) -> Result<(), Error> {
    // nginx compares the two names it knows case-sensitively.
    let source = match d.args[0].value.as_str() {
        "X-Real-IP" => Source::XRealIp,
        "X-Forwarded-For" => Source::XForwardedFor,
        "proxy_protocol" => Source::ProxyProtocol,
        other => Source::Header(other.to_ascii_lowercase()),
    };
    set_once(&mut loc_conf(s).realip.source, source, d)
}

fn set_real_ip_recursive(_: &mut Builder, d: &Directive, s: &mut Scope<'_>) -> Result<(), Error> {
    set_once(&mut loc_conf(s).realip.recursive, flag_arg(d), d)
}

/// realip's place in the module list: its post-read and preaccess handlers, its variables.
pub struct Module;

impl crate::http::modules::HttpModule for Module {
    type Loc = RealipLoc;
    const DIRECTIVES: &'static [Command] = DIRECTIVES;
    const VARIABLES: &'static [&'static str] = &["realip_remote_addr", "realip_remote_port"];

    fn merge(loc: &mut RealipLoc, parent: &RealipLoc) {
        loc.merge(parent);
    }

    fn post_read(loc: &RealipLoc, cx: &Cx<'_, '_, '_>) {
        loc.apply(cx);
    }

    const PREACCESS: bool = true;

    /// (Without `set_real_ip_from` no address is trusted: nothing to replace.)
    fn in_use(loc: &RealipLoc) -> bool {
        loc.from.is_some()
    }

    async fn preaccess(
        loc: &RealipLoc,
        cx: &Cx<'_, '_, '_>,
    ) -> Option<Box<crate::http::reply::Reply>> {
        loc.apply(cx);
        None
    }

    /// The connection's own address and port, whatever realip did.
    fn variable(
        _loc: Option<&RealipLoc>,
        name: &str,
        vars: &Vars<'_>,
        out: &mut String,
    ) -> Option<bool> {
        use std::fmt::Write as _;
        let peer = vars.conn.map_or(vars.peer, |c| c.peer);
        match name {
            "realip_remote_addr" => match peer {
                Some(p) => {
                    let _ = write!(out, "{}", p.ip());
                }
                None => out.push_str("unix:"),
            },
            _ => {
                if let Some(p) = peer.filter(|p| p.port() != 0) {
                    let _ = write!(out, "{}", p.port());
                }
            }
        }
        Some(true)
    }
}
