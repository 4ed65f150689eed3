//! nginx's `stream {}`: TCP and UDP proxying. The directive table of the stream core, proxy,
//! log, access, limit_conn, realip, return, set and ssl_preread modules, their configuration
//! (stream level → server, one [`merge`](Level::merge)), and the modules' runtime in
//! [`session`] (TCP and unix sockets) and [`udp`] (datagrams).
//!
//! What it shares with http rather than copies: the `upstream {}` block and its balancers
//! ([`crate::upstream`]), `listen`'s socket options ([`crate::listen::socket_option`]),
//! `allow`/`deny` rules, `limit_conn` zones, `set_real_ip_from`, `map`/`geo`/`split_clients`,
//! `log_format`/`access_log` ([`crate::http::access_log`]), the PROXY protocol reader, and the
//! variables engine (a session's own values come from [`vars::Session`]).
//!
//! A stream `server` is chosen by the address a connection came to, nothing else (no names).
//! Sessions hold the configuration they started with: a reload leaves them running on it, and a
//! graceful stop waits for them as for any connection (`worker_shutdown_timeout`).

pub mod preread;
mod relay;
pub mod session;
pub mod udp;
pub mod vars;

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use shoal_conf::{Directive, Error, Span};

use crate::conf::{
    err, flag_arg, set_once, size_arg, time_arg, Args, Builder, Command, Ctx, Scope,
};
use crate::http::access::Rules;
use crate::http::access_log::{AccessLog, LogFormat};
use crate::http::limit_conn::LimitConnLoc;
use crate::http::realip::forwarded::Trusted;
use crate::listen::{ListenAddr, SocketOptions};
use crate::upstream::conf::{split_host_port, UpstreamConf};
use crate::variables::{Compute, Template};

const SS: Ctx = Ctx::SS;
const SRV: Ctx = Ctx::STREAM_SERVER;

pub static DIRECTIVES: &[Command] = &[
    Command::block("stream", Ctx::MAIN, Args::NONE, set_stream),
    Command::block("server", Ctx::STREAM, Args::NONE, set_server),
    Command::new("listen", SRV, Args::ONE_OR_MORE, set_listen),
    Command::new("proxy_pass", SRV, Args::ONE, set_proxy_pass),
    Command::new("return", SRV, Args::ONE, set_return),
    Command::new("set", SRV, Args::TWO, set_set),
    Command::new("proxy_connect_timeout", SS, Args::ONE, set_time),
    Command::new("proxy_timeout", SS, Args::ONE, set_time),
    Command::new("proxy_next_upstream", SS, Args::Flag, set_flag),
    Command::new("proxy_next_upstream_tries", SS, Args::ONE, set_number),
    Command::new("proxy_next_upstream_timeout", SS, Args::ONE, set_time),
    Command::new("proxy_buffer_size", SS, Args::ONE, set_size),
    Command::new("proxy_upload_rate", SS, Args::ONE, set_size),
    Command::new("proxy_download_rate", SS, Args::ONE, set_size),
    Command::new("proxy_responses", SS, Args::ONE, set_number),
    Command::new("proxy_requests", SS, Args::ONE, set_number),
    Command::new("proxy_bind", SS, Args::Take(1, 2), set_proxy_bind),
    Command::new("proxy_socket_keepalive", SS, Args::Flag, set_flag),
    Command::new("proxy_half_close", SS, Args::Flag, set_flag),
    Command::new("proxy_protocol", SS, Args::Flag, set_flag),
    // `proxy_ssl_*` are the http proxy's table (crate::http::proxy::ssl), allowed here too.
    Command::new("proxy_ssl", SS, Args::Flag, set_flag),
    Command::new("tcp_nodelay", SS, Args::Flag, set_flag),
    Command::new("preread_buffer_size", SS, Args::ONE, set_size),
    Command::new("preread_timeout", SS, Args::ONE, set_time),
    Command::new("proxy_protocol_timeout", SS, Args::ONE, set_time),
    Command::new("ssl_preread", SS, Args::Flag, set_flag),
    Command::new("log_format", Ctx::STREAM, Args::ONE_OR_MORE, set_log_format),
    Command::new("access_log", SS, Args::ONE_OR_MORE, set_access_log),
    Command::new("resolver", SS, Args::ONE_OR_MORE, set_resolver),
    Command::new("resolver_timeout", SS, Args::ONE, set_time),
    Command::new(
        "variables_hash_max_size",
        Ctx::STREAM,
        Args::ONE,
        set_hash_size,
    ),
    Command::new(
        "variables_hash_bucket_size",
        Ctx::STREAM,
        Args::ONE,
        set_hash_size,
    ),
    Command::new("map_hash_max_size", Ctx::STREAM, Args::ONE, set_hash_size),
    Command::new(
        "map_hash_bucket_size",
        Ctx::STREAM,
        Args::ONE,
        set_hash_size,
    ),
    // What shoal's stream lacks: refused by name, as nginx_directives.rs refuses the rest
    // (these names are http directives shoal has, so that table is never reached for them).
    Command::new("ssl_handshake_timeout", SS, Args::ONE, set_time),
    Command::new("ssl_alpn", SS, Args::ONE_OR_MORE, set_ssl_alpn),
];

/// The settings a stream server inherits from the `stream` block (nginx's `srv_conf`s of the
/// stream core, proxy, log, access, limit_conn, realip and ssl_preread modules). Unset is
/// `None`; the accessors give nginx's defaults.
#[derive(Clone, Debug, Default)]
pub struct Level {
    pub connect_timeout: Option<Duration>,
    pub timeout: Option<Duration>,
    pub next_upstream: Option<bool>,
    pub next_upstream_tries: Option<u64>,
    pub next_upstream_timeout: Option<Duration>,
    pub buffer_size: Option<u64>,
    pub upload_rate: Option<u64>,
    pub download_rate: Option<u64>,
    pub responses: Option<u64>,
    pub requests: Option<u64>,
    /// `proxy_bind ADDRESS|off [transparent]` (`Some(None)`: off).
    pub bind: Option<Option<crate::upstream::bind::BindConf>>,
    pub socket_keepalive: Option<bool>,
    pub half_close: Option<bool>,
    pub proxy_protocol: Option<bool>,
    pub tcp_nodelay: Option<bool>,
    pub preread_buffer_size: Option<u64>,
    pub preread_timeout: Option<Duration>,
    pub proxy_protocol_timeout: Option<Duration>,
    pub ssl_preread: Option<bool>,
    /// `access_log` lines of the level that has some (`Some(empty)`: `off`).
    pub access_log: Option<Arc<Vec<Arc<AccessLog>>>>,
    pub access: Option<Arc<Rules>>,
    pub limit_conn: LimitConnLoc,
    pub real_ip_from: Option<Arc<Trusted>>,
    /// The stream ssl module's settings (`ssl_certificate`, `ssl_protocols`, ...).
    pub ssl: crate::tls::SslConf,
    pub ssl_handshake_timeout: Option<Duration>,
    /// `ssl_alpn`: the protocols a `listen ... ssl` handshake chooses from, in the server's
    /// order of preference (none set: no ALPN, as nginx's stream module).
    pub ssl_alpn: Option<Arc<Vec<Vec<u8>>>>,
    /// `error_log` of the level that has some: a session's lines go there.
    pub error_log: Option<Arc<crate::log::ErrorLog>>,
    /// `proxy_ssl`: TLS toward the upstream.
    pub proxy_ssl_on: Option<bool>,
    /// `proxy_ssl_*`: the http proxy's TLS client settings, built when `proxy_ssl` is on.
    pub proxy_ssl: crate::http::proxy::ssl::ProxySsl,
    /// `resolver`: looks up the names of a `proxy_pass` with variables.
    pub resolver: Option<Arc<crate::resolver::Resolver>>,
    pub resolver_timeout: Option<Duration>,
}

impl Level {
    fn merge(&mut self, p: &Level) {
        use crate::conf::merge;
        merge(&mut self.connect_timeout, &p.connect_timeout);
        merge(&mut self.timeout, &p.timeout);
        merge(&mut self.next_upstream, &p.next_upstream);
        merge(&mut self.next_upstream_tries, &p.next_upstream_tries);
        merge(&mut self.next_upstream_timeout, &p.next_upstream_timeout);
        merge(&mut self.buffer_size, &p.buffer_size);
        merge(&mut self.upload_rate, &p.upload_rate);
        merge(&mut self.download_rate, &p.download_rate);
        merge(&mut self.responses, &p.responses);
        merge(&mut self.requests, &p.requests);
        merge(&mut self.bind, &p.bind);
        merge(&mut self.socket_keepalive, &p.socket_keepalive);
        merge(&mut self.half_close, &p.half_close);
        merge(&mut self.proxy_protocol, &p.proxy_protocol);
        merge(&mut self.tcp_nodelay, &p.tcp_nodelay);
        merge(&mut self.preread_buffer_size, &p.preread_buffer_size);
        merge(&mut self.preread_timeout, &p.preread_timeout);
        merge(&mut self.proxy_protocol_timeout, &p.proxy_protocol_timeout);
        merge(&mut self.ssl_preread, &p.ssl_preread);
        merge(&mut self.access_log, &p.access_log);
        merge(&mut self.access, &p.access);
        merge(&mut self.real_ip_from, &p.real_ip_from);
        self.limit_conn.merge(&p.limit_conn);
        self.ssl.merge(&p.ssl);
        merge(&mut self.ssl_handshake_timeout, &p.ssl_handshake_timeout);
        merge(&mut self.ssl_alpn, &p.ssl_alpn);
        merge(&mut self.error_log, &p.error_log);
        merge(&mut self.proxy_ssl_on, &p.proxy_ssl_on);
        self.proxy_ssl.merge(&p.proxy_ssl);
        merge(&mut self.resolver, &p.resolver);
        merge(&mut self.resolver_timeout, &p.resolver_timeout);
    }

    /// `resolver_timeout` (30s).
    pub fn resolver_timeout(&self) -> Duration {
        self.resolver_timeout.unwrap_or(Duration::from_secs(30))
    }

    /// `proxy_connect_timeout` (60s).
    pub fn connect_timeout(&self) -> Duration {
        self.connect_timeout.unwrap_or(Duration::from_secs(60))
    }
    /// `proxy_timeout` (10m).
    pub fn timeout(&self) -> Duration {
        self.timeout.unwrap_or(Duration::from_secs(600))
    }
    /// `proxy_next_upstream` (on).
    pub fn next_upstream(&self) -> bool {
        self.next_upstream.unwrap_or(true)
    }
    /// `proxy_buffer_size` (16k).
    pub fn buffer_size(&self) -> usize {
        self.buffer_size.unwrap_or(16 * 1024) as usize
    }
    /// `preread_buffer_size` (16k).
    pub fn preread_buffer_size(&self) -> usize {
        self.preread_buffer_size.unwrap_or(16 * 1024) as usize
    }
    /// `preread_timeout` (30s).
    pub fn preread_timeout(&self) -> Duration {
        self.preread_timeout.unwrap_or(Duration::from_secs(30))
    }
    /// `proxy_protocol_timeout` (30s).
    pub fn proxy_protocol_timeout(&self) -> Duration {
        self.proxy_protocol_timeout
            .unwrap_or(Duration::from_secs(30))
    }
}

/// Where a server sends its sessions.
#[derive(Clone, Debug)]
pub enum Handler {
    /// `proxy_pass NAME|HOST:PORT|unix:PATH` (resolved when the configuration is read).
    Upstream(Arc<UpstreamConf>),
    /// `proxy_pass` with variables: `HOST:PORT` or an upstream's name, made per session.
    Dynamic(Template),
    /// `return VALUE`: the value is sent and the session ends.
    Return(Template),
}

/// One `listen` of a stream server.
#[derive(Clone, Debug)]
pub struct Listen {
    pub addr: ListenAddr,
    pub opts: SocketOptions,
}

/// A `server {}` of `stream`.
#[derive(Clone, Debug, Default)]
pub struct ServerConf {
    pub listen: Vec<Listen>,
    pub conf: Level,
    pub handler: Option<Handler>,
    /// The TLS context of a `listen ... ssl` server.
    pub tls: Option<Arc<crate::tls::AddrTls>>,
    /// `proxy_pass NAME` waiting for the upstreams to be known (a block may come later).
    pending_pass: Option<(String, Span)>,
    /// `set $name VALUE` lines, in order.
    pub sets: Vec<(String, Template)>,
    /// The stream's `log_format`s defined before this server (what its `access_log` sees).
    formats: HashMap<String, Arc<LogFormat>>,
}

/// The `stream {}` block.
#[derive(Clone, Debug, Default)]
pub struct StreamConf {
    pub servers: Vec<Arc<ServerConf>>,
    pub upstreams: Vec<Arc<UpstreamConf>>,
    /// The stream level's settings, inherited by the servers.
    pub srv: Level,
    /// The definitions of `map`, `geo` and `split_clients` variables (templates point at
    /// them).
    pub variables: Vec<Arc<dyn Compute>>,
    /// Stream's own `log_format`s (nginx keeps them apart from http's, and has no
    /// `combined`).
    pub formats: HashMap<String, Arc<LogFormat>>,
    /// The server of each listen address.
    pub routes: HashMap<(ListenAddr, bool), usize>,
}

impl StreamConf {
    /// Every bound address with its options (a specific address covered by a wildcard on the
    /// same port, and not marked `bind`, is served by the wildcard, as in http).
    pub fn bound_addresses(&self) -> Vec<(ListenAddr, SocketOptions)> {
        let mut out = Vec::new();
        for udp in [false, true] {
            let ls: Vec<crate::listen::ListenConf> = self
                .servers
                .iter()
                .flat_map(|s| s.listen.iter())
                .filter(|l| l.opts.udp == udp)
                .map(|l| crate::listen::ListenConf {
                    addr: l.addr.clone(),
                    default_server: false,
                    opts: l.opts.clone(),
                })
                .collect();
            let refs: Vec<&crate::listen::ListenConf> = ls.iter().collect();
            for (a, mut o) in crate::listen::bound_addresses(&refs) {
                o.udp = udp;
                out.push((a, o));
            }
        }
        out
    }

    /// The server for a session that came to `local` through the socket bound to `socket`.
    pub fn server_for(
        &self,
        socket: &ListenAddr,
        local: Option<SocketAddr>,
        udp: bool,
    ) -> Option<&Arc<ServerConf>> {
        if self.routes.len() <= 8 {
            // A few addresses (the usual case): compared in turn, cheaper per session than
            // hashing the key (the exact address first, as below).
            let mut by_socket = None;
            for ((addr, u), i) in &self.routes {
                if *u != udp {
                    continue;
                }
                if matches!(addr, ListenAddr::Inet(a) if Some(*a) == local) {
                    return self.servers.get(*i);
                }
                if addr == socket {
                    by_socket = Some(*i);
                }
            }
            return by_socket.and_then(|i| self.servers.get(i));
        }
        let exact = local.and_then(|l| self.routes.get(&(ListenAddr::Inet(l), udp)));
        let i = exact.or_else(|| self.routes.get(&(socket.clone(), udp)))?;
        self.servers.get(*i)
    }

    /// After the whole configuration is read: upstream names resolved, levels merged, routes
    /// made.
    pub fn finish(&mut self, b: &mut Builder) -> Result<(), Error> {
        let parent = self.srv.clone();
        for (i, srv) in self.servers.iter_mut().enumerate() {
            let srv = Arc::make_mut(srv);
            srv.conf.merge(&parent);
            if let Some((name, span)) = srv.pending_pass.take() {
                let at = |m: crate::error::Error| Error::new(m, Some(span.clone()));
                let u = match self.upstreams.iter().find(|u| u.name == name) {
                    Some(u) => u.clone(),
                    None => Arc::new(implicit_upstream(&name).map_err(at)?),
                };
                srv.handler = Some(Handler::Upstream(u));
            }
            if srv.conf.proxy_ssl_on.unwrap_or(false) {
                crate::http::proxy::ssl::build(&srv.conf.proxy_ssl, "proxy", &[])?;
            }
            if let Some(l) = srv.listen.iter().find(|l| l.opts.ssl) {
                let alpn = srv.conf.ssl_alpn.as_deref().map_or(&[][..], |v| &v[..]);
                let alpn: Vec<&[u8]> = alpn.iter().map(Vec::as_slice).collect();
                srv.tls = Some(crate::tls::build::single(
                    l.addr.clone(),
                    &srv.conf.ssl,
                    &alpn,
                    b,
                )?);
            }
            for l in &srv.listen {
                self.routes.entry((l.addr.clone(), l.opts.udp)).or_insert(i);
            }
        }
        Ok(())
    }
}

/// The upstream `proxy_pass HOST:PORT` or `proxy_pass unix:PATH` makes when no block has the
/// name. A name without a port is nginx's `no port in upstream "NAME"`.
pub fn implicit_upstream(name: &str) -> Result<UpstreamConf, crate::error::Error> {
    if let Some(path) = name.strip_prefix("unix:") {
        return Ok(UpstreamConf::unix(path));
    }
    let (host, port) = split_host_port(name, 0)?;
    if port == 0 {
        return Err(crate::error::Error::invalid(format!(
            "no port in upstream \"{name}\""
        )));
    }
    let mut u = UpstreamConf::implicit(&host, port)?;
    u.stream = true;
    Ok(u)
}

/// The stream level a directive writes into (`None` outside stream).
pub(crate) fn level<'a>(s: &'a mut Scope<'_>) -> Option<&'a mut Level> {
    match s {
        Scope::Stream(st) => Some(&mut st.srv),
        Scope::StreamServer(srv) => Some(&mut srv.conf),
        _ => None,
    }
}

fn stream_level<'a>(s: &'a mut Scope<'_>) -> &'a mut Level {
    level(s).expect("the registry allows this directive in stream only")
}

fn server<'a>(s: &'a mut Scope<'_>) -> &'a mut ServerConf {
    match s {
        Scope::StreamServer(srv) => srv,
        _ => unreachable!("the registry allows this directive in a stream server only"),
    }
}

fn set_stream(b: &mut Builder, d: &Directive, _: &mut Scope<'_>) -> Result<(), Error> {
    if b.stream.is_some() {
        return Err(crate::conf::duplicate(d));
    }
    let mut st = StreamConf::default();
    let body = d.block.as_deref().unwrap_or_default();
    b.walk(body, Ctx::STREAM, &mut Scope::Stream(&mut st))?;
    b.stream = Some(st);
    Ok(())
}

fn set_server(b: &mut Builder, d: &Directive, s: &mut Scope<'_>) -> Result<(), Error> {
    let Scope::Stream(st) = s else {
        unreachable!("the registry allows server in stream only")
    };
    let mut srv = ServerConf {
        formats: st.formats.clone(),
        ..Default::default()
    };
    let body = d.block.as_deref().unwrap_or_default();
    b.walk(body, Ctx::STREAM_SERVER, &mut Scope::StreamServer(&mut srv))?;
    if srv.listen.is_empty() {
        return Err(err(d, "no \"listen\" is defined for server"));
    }
    if srv.handler.is_none() && srv.pending_pass.is_none() {
        return Err(err(d, "no handler for server"));
    }
    for l in &srv.listen {
        let taken = st
            .servers
            .iter()
            .flat_map(|s| s.listen.iter())
            .any(|o| o.addr == l.addr && o.opts.udp == l.opts.udp);
        if taken {
            let addr = match &l.addr {
                ListenAddr::Inet(a) => a.to_string(),
                ListenAddr::Unix(p) => format!("unix:{}", p.display()),
            };
            return Err(err(
                d,
                format!("duplicate \"{addr}\" address and port pair"),
            ));
        }
    }
    st.servers.push(Arc::new(srv));
    Ok(())
}

fn set_listen(_: &mut Builder, d: &Directive, s: &mut Scope<'_>) -> Result<(), Error> {
    let srv = server(s);
    let text = &d.args[0].value;
    let addrs = crate::listen::parse_addr(text)
        .map_err(|m| err(d, format!("{m} in \"{text}\" of the \"listen\" directive")))?;
    let mut opts = SocketOptions::default();
    for a in &d.args[1..] {
        let v = a.value.as_str();
        let (key, val) = match v.split_once('=') {
            Some((k, val)) => (k, Some(val)),
            None => (v, None),
        };
        match (key, val) {
            ("udp", None) => opts.udp = true,
            ("ssl", None) => opts.ssl = true,
            ("proxy_protocol", None) => opts.proxy_protocol = true,
            _ => match crate::listen::socket_option(&mut opts, key, val) {
                Ok(true) => {}
                Ok(false) => return Err(err(d, format!("the invalid \"{v}\" parameter"))),
                Err(m) => return Err(err(d, m)),
            },
        }
    }
    if opts.udp && opts.proxy_protocol {
        return Err(err(
            d,
            "\"proxy_protocol\" parameter is incompatible with \"udp\"",
        ));
    }
    for addr in addrs {
        if srv
            .listen
            .iter()
            .any(|l| l.addr == addr && l.opts.udp == opts.udp)
        {
            return Err(err(
                d,
                format!("duplicate \"{}\" address and port pair", addr_text(&addr)),
            ));
        }
        srv.listen.push(Listen {
            addr,
            opts: opts.clone(),
        });
    }
    Ok(())
}

fn addr_text(a: &ListenAddr) -> String {
    match a {
        ListenAddr::Inet(a) => a.to_string(),
        ListenAddr::Unix(p) => format!("unix:{}", p.display()),
    }
}

fn set_proxy_pass(_: &mut Builder, d: &Directive, s: &mut Scope<'_>) -> Result<(), Error> {
    let srv = server(s);
    if srv.handler.is_some() || srv.pending_pass.is_some() {
        return Err(crate::conf::duplicate(d));
    }
    let text = &d.args[0].value;
    let t = Template::compile(text).map_err(|m| err(d, m))?;
    if t.is_static() {
        srv.pending_pass = Some((text.clone(), d.span.clone()));
    } else {
        srv.handler = Some(Handler::Dynamic(t));
    }
    Ok(())
}

fn set_return(_: &mut Builder, d: &Directive, s: &mut Scope<'_>) -> Result<(), Error> {
    let srv = server(s);
    if srv.handler.is_some() || srv.pending_pass.is_some() {
        return Err(crate::conf::duplicate(d));
    }
    let t = Template::compile(&d.args[0].value).map_err(|m| err(d, m))?;
    srv.handler = Some(Handler::Return(t));
    Ok(())
}

fn set_set(_: &mut Builder, d: &Directive, s: &mut Scope<'_>) -> Result<(), Error> {
    let arg = d.args[0].value.as_str();
    let name = match arg.strip_prefix('$') {
        Some(n) if !n.is_empty() => n,
        _ => return Err(err(d, format!("invalid variable name \"{arg}\""))),
    };
    if crate::variables::is_builtin(name) {
        return Err(err(d, format!("the duplicate \"{name}\" variable")));
    }
    crate::variables::declare(name);
    let t = Template::compile(&d.args[1].value).map_err(|m| err(d, m))?;
    server(s).sets.push((name.to_string(), t));
    Ok(())
}

fn set_time(_: &mut Builder, d: &Directive, s: &mut Scope<'_>) -> Result<(), Error> {
    let t = time_arg(d, 0)?;
    let l = stream_level(s);
    let slot = match d.name.as_str() {
        "proxy_connect_timeout" => &mut l.connect_timeout,
        "proxy_timeout" => &mut l.timeout,
        "proxy_next_upstream_timeout" => &mut l.next_upstream_timeout,
        "preread_timeout" => &mut l.preread_timeout,
        "ssl_handshake_timeout" => &mut l.ssl_handshake_timeout,
        "proxy_protocol_timeout" => &mut l.proxy_protocol_timeout,
        "resolver_timeout" => &mut l.resolver_timeout,
        other => unreachable!("{other} is not a stream time"),
    };
    set_once(slot, t, d)
}

fn set_flag(_: &mut Builder, d: &Directive, s: &mut Scope<'_>) -> Result<(), Error> {
    let v = flag_arg(d);
    let l = stream_level(s);
    let slot = match d.name.as_str() {
        "proxy_next_upstream" => &mut l.next_upstream,
        "proxy_socket_keepalive" => &mut l.socket_keepalive,
        "proxy_half_close" => &mut l.half_close,
        "proxy_protocol" => &mut l.proxy_protocol,
        "tcp_nodelay" => &mut l.tcp_nodelay,
        "ssl_preread" => &mut l.ssl_preread,
        "proxy_ssl" => &mut l.proxy_ssl_on,
        other => unreachable!("{other} is not a stream flag"),
    };
    set_once(slot, v, d)
}

fn set_size(_: &mut Builder, d: &Directive, s: &mut Scope<'_>) -> Result<(), Error> {
    let n = size_arg(d, 0)?;
    let l = stream_level(s);
    let slot = match d.name.as_str() {
        "proxy_buffer_size" => &mut l.buffer_size,
        "proxy_upload_rate" => &mut l.upload_rate,
        "proxy_download_rate" => &mut l.download_rate,
        "preread_buffer_size" => &mut l.preread_buffer_size,
        other => unreachable!("{other} is not a stream size"),
    };
    set_once(slot, n, d)
}

fn set_number(_: &mut Builder, d: &Directive, s: &mut Scope<'_>) -> Result<(), Error> {
    let n = crate::conf::number_arg(d, 0)?;
    let l = stream_level(s);
    let slot = match d.name.as_str() {
        "proxy_next_upstream_tries" => &mut l.next_upstream_tries,
        "proxy_responses" => &mut l.responses,
        "proxy_requests" => &mut l.requests,
        other => unreachable!("{other} is not a stream number"),
    };
    set_once(slot, n, d)
}

fn set_proxy_bind(b: &mut Builder, d: &Directive, s: &mut Scope<'_>) -> Result<(), Error> {
    let bind =
        crate::upstream::bind::parse(b, d, |p| err(d, format!("invalid parameter \"{p}\"")))?;
    set_once(&mut stream_level(s).bind, bind, d)
}

/// `ssl_alpn PROTOCOL ...`: a name is at most 255 bytes (one length byte on the wire).
fn set_ssl_alpn(_: &mut Builder, d: &Directive, s: &mut Scope<'_>) -> Result<(), Error> {
    if d.args.iter().any(|a| a.value.len() > 255) {
        return Err(crate::conf::directive_err(d, "protocol too long"));
    }
    let list = d.args.iter().map(|a| a.value.as_bytes().to_vec()).collect();
    set_once(&mut stream_level(s).ssl_alpn, Arc::new(list), d)
}

fn set_log_format(_: &mut Builder, d: &Directive, s: &mut Scope<'_>) -> Result<(), Error> {
    let Scope::Stream(st) = s else {
        unreachable!("the registry allows log_format in stream only")
    };
    let f = crate::http::access_log::parse_log_format(d, &st.formats)?;
    st.formats.insert(f.name.clone(), Arc::new(f));
    Ok(())
}

fn set_access_log(b: &mut Builder, d: &Directive, s: &mut Scope<'_>) -> Result<(), Error> {
    let path = &d.args[0].value;
    if path == "off" {
        if d.args.len() > 1 {
            return Err(crate::conf::invalid_args(d));
        }
        stream_level(s).access_log = Some(Arc::new(Vec::new()));
        return Ok(());
    }
    let Some(name) = d.args.get(1).map(|a| a.value.as_str()) else {
        return Err(err(d, "log format is not specified"));
    };
    let formats = match s {
        Scope::Stream(st) => &st.formats,
        Scope::StreamServer(srv) => &srv.formats,
        _ => unreachable!("the registry allows this access_log in stream only"),
    };
    let format = formats
        .get(name)
        .cloned()
        .ok_or_else(|| err(d, format!("unknown log format \"{name}\"")))?;
    let log = crate::http::access_log::build_access_log(b, d, format, 2)?;
    let l = stream_level(s);
    let list = l.access_log.get_or_insert_with(|| Arc::new(Vec::new()));
    Arc::make_mut(list).push(Arc::new(log));
    Ok(())
}

/// `resolver`: the DNS servers that look up the name of a `proxy_pass` with variables when a
/// session needs it (names without variables are resolved when the configuration is read,
/// as nginx does). The same directive as http's ([`crate::resolver::conf`]).
fn set_resolver(_: &mut Builder, d: &Directive, s: &mut Scope<'_>) -> Result<(), Error> {
    let r = Arc::new(crate::resolver::conf::parse(d)?);
    set_once(&mut stream_level(s).resolver, r, d)
}

fn set_hash_size(_: &mut Builder, d: &Directive, _: &mut Scope<'_>) -> Result<(), Error> {
    size_arg(d, 0).map(|_| ())
}
