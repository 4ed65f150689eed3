//! One TCP (or unix-socket) stream session, nginx's phases in order: the PROXY protocol header
//! (`listen ... proxy_protocol`) and `set_real_ip_from` (post-accept), `set` and `limit_conn`
//! (preaccess), `allow`/`deny` (access), `ssl_preread` (preread), then the content handler
//! (`proxy_pass` or `return`), and the access log.
//!
//! Proxying picks a peer with the upstream's balancer, connects within
//! `proxy_connect_timeout` (the next peer on failure while `proxy_next_upstream*` allow), then
//! relays both ways with a `proxy_buffer_size` buffer each, `proxy_timeout` bounding the time
//! between two successive reads or writes on either side, and `proxy_upload_rate` /
//! `proxy_download_rate` pacing each direction. Without `proxy_half_close` the session ends
//! when either side has closed and what it sent was passed on; with it, the other side's
//! write half is shut and the session lasts until both have.
//!
//! With `proxy_ssl on` the upstream connection speaks TLS, through the http proxy's client
//! ([`crate::http::proxy::ssl`]). A `proxy_pass` with variables names an upstream block, an
//! address, or a host the stream `resolver` looks up ([`crate::resolver`]).
//!
//! Runs on the worker; never blocks.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::os::fd::OwnedFd;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::net::{TcpStream, UnixStream};

use super::relay::{relay, write_all};
use super::vars::{Session, Tried, Try};
use super::{Handler, ServerConf, StreamConf};
use crate::cycle::Generation;
use crate::error::{Error, Result};
use crate::http::access::{Answer, Client};
use crate::http::transport::{ConnInfo, Transport};
use crate::listen::{ListenAddr, SocketKey};
use crate::log::Level;
use crate::upstream::conf::{PeerAddr, UpstreamConf};
use crate::upstream::{state, Input, PeerResult};
use crate::variables::{Template, Vars};
use crate::worker::ConnGuard;

/// What a session knows of itself while it runs: the connection, the chosen server, the
/// values of `set`, its variables.
pub struct Ctx<'a> {
    pub info: ConnInfo,
    /// The client's address after `set_real_ip_from` (the connection's own otherwise).
    pub peer: Option<SocketAddr>,
    pub srv: &'a ServerConf,
    pub stream: &'a StreamConf,
    pub user: HashMap<String, String>,
    pub session: Session,
    /// The worker: an upstream connection takes a connection number too, as in nginx.
    pub worker: std::rc::Rc<crate::worker::Worker>,
}

impl Ctx<'_> {
    pub fn vars(&self) -> Vars<'_> {
        Vars {
            req: None,
            uri: None,
            peer: self.peer,
            local: self.info.local,
            server_name: "",
            document_root: None,
            request_filename: None,
            connection: self.info.number,
            connection_requests: 1,
            start: self.session.start,
            request_length: 0,
            sent: None,
            captures: &[],
            user: Some(&self.user),
            doc_root: None,
            args: None,
            request_line: None,
            upstream: None,
            tls: self.info.tls.as_deref(),
            extras: None,
            conn: Some(&self.info),
            srv: None,
            lc: None,
            stream: Some(&self.session),
        }
    }

    pub fn eval(&self, t: &Template) -> String {
        self.vars().eval(t)
    }

    /// `, client: ADDR, server: LISTEN` (nginx's stream log context).
    pub fn log_ctx(&self) -> String {
        let client = match self.peer {
            Some(p) => p.ip().to_string(),
            None => "unix:".to_string(),
        };
        format!(", client: {client}, server: {}", self.info.socket)
    }

    /// The proxy's context: the stream's, the upstream and the byte counts.
    fn proxy_ctx(&self, upstream: &str, up_sent: u64, up_received: u64) -> String {
        format!(
            "{}, upstream: \"{upstream}\", bytes from/to client:{}/{}, bytes from/to upstream:{}/{}",
            self.log_ctx(),
            self.session.bytes_received.get(),
            self.session.bytes_sent.get(),
            up_received,
            up_sent,
        )
    }

    /// The client as the access and limit_conn modules see it.
    pub fn client(&self) -> Client {
        match self.peer {
            Some(p) => Client::Inet(p.ip()),
            None => Client::Unix,
        }
    }

    /// Writes the access log lines.
    pub fn log(&self) {
        if let Some(logs) = &self.srv.conf.access_log {
            crate::http::access_log::log_request(logs, &self.vars());
        }
    }

    /// The phases before content: `set`, `limit_conn`, `allow`/`deny`. `Err(status)` ends
    /// the session with that `$status`; the guard holds the `limit_conn` units.
    pub fn preaccess(&mut self) -> Result<crate::http::limit_conn::Guard, u16> {
        for (name, t) in &self.srv.sets {
            let v = self.eval(t);
            self.user.insert(name.clone(), v);
        }
        let client = self.client();
        let lc = &self.srv.conf.limit_conn;
        let outcome = {
            let mut eval = |t: &Template| self.eval(t);
            lc.acquire(&client, &mut eval)
        };
        for (level, line) in &outcome.lines {
            crate::conn_log!(
                *level,
                self.info.number,
                "{line} while initializing session{}",
                self.log_ctx()
            );
        }
        if outcome.reject.is_some() {
            return Err(503);
        }
        let guard = outcome.guard;
        if let Some(rules) = &self.srv.conf.access {
            if rules.check(&client) == Answer::Forbidden {
                crate::conn_log!(
                    Level::Error,
                    self.info.number,
                    "access forbidden by rule while initializing session{}",
                    self.log_ctx()
                );
                return Err(403);
            }
        }
        Ok(guard)
    }
}

/// Serves one accepted stream connection until it ends.
pub async fn serve(
    fd: OwnedFd,
    accepted_peer: Option<SocketAddr>,
    key: SocketKey,
    generation: Arc<Generation>,
    number: u64,
    guard: ConnGuard,
) {
    let Some(stream) = generation.config.stream.clone() else {
        return;
    };
    let mut info = ConnInfo {
        number,
        peer: None,
        local: None,
        socket: key.addr.clone(),
        tls: None,
        proxy: None,
    };
    let client = match key.addr {
        ListenAddr::Unix(_) => match UnixStream::from_std(std::os::unix::net::UnixStream::from(fd))
        {
            Ok(s) => Transport::Unix(s),
            Err(_) => return,
        },
        ListenAddr::Inet(listen) => match TcpStream::from_std(std::net::TcpStream::from(fd)) {
            Ok(s) => {
                // accept() said who the peer is; a listener on one address is the local one
                // (getsockname() only for a wildcard listener, as nginx).
                info.peer = accepted_peer.or_else(|| s.peer_addr().ok());
                info.local = match listen.ip().is_unspecified() {
                    true => s.local_addr().ok(),
                    false => Some(listen),
                };
                Transport::Tcp(s)
            }
            Err(_) => return,
        },
    };
    let Some(srv) = stream.server_for(&key.addr, info.local, false).cloned() else {
        return;
    };
    crate::log::set_scope(srv.conf.error_log.as_ref());
    crate::conn_log!(
        Level::Info,
        number,
        "client {} connected to {}",
        info.peer
            .map_or_else(|| "unix:".to_string(), |p| p.to_string()),
        key.addr
    );
    if srv.conf.tcp_nodelay.unwrap_or(true) {
        if let Transport::Tcp(s) = &client {
            let _ = s.set_nodelay(true);
        }
    }
    let pp = srv.listen.iter().any(|l| l.opts.proxy_protocol)
        || stream
            .servers
            .iter()
            .flat_map(|s| s.listen.iter())
            .any(|l| l.addr == key.addr && !l.opts.udp && l.opts.proxy_protocol);
    let mut pp_failed = false;
    if pp {
        let slot = crate::worker::IdleSlot::new(&guard.0.wake_idle);
        let read = crate::http::h1::proxy_protocol::read(
            &client,
            &mut info,
            &slot,
            &guard.0,
            srv.conf.proxy_protocol_timeout(),
            4096,
        );
        pp_failed = !Box::pin(read).await;
    }
    let peer = real_peer(&srv, &info);
    let mut cx = Ctx {
        info,
        peer,
        srv: &srv,
        stream: &stream,
        user: HashMap::new(),
        session: Session::new(false),
        worker: guard.0.clone(),
    };
    if pp_failed {
        cx.session.status.set(400);
    } else {
        run(&mut cx, client).await;
    }
    cx.log();
    drop(guard);
}

/// The client's address after `set_real_ip_from`: the PROXY protocol header's, when the
/// connection comes from a trusted address.
pub fn real_peer(srv: &ServerConf, info: &ConnInfo) -> Option<SocketAddr> {
    let (Some(from), Some(h)) = (srv.conf.real_ip_from.as_deref(), info.proxy.as_deref()) else {
        return info.peer;
    };
    if !from.contains(info.peer.map(|p| p.ip())) {
        return info.peer;
    }
    match crate::http::realip::forwarded::parse_addr(h.src_addr.as_bytes()) {
        Some(ip) => Some(SocketAddr::new(ip, h.src_port)),
        None => info.peer,
    }
}

async fn run(cx: &mut Ctx<'_>, client: Transport) {
    let _units = match cx.preaccess() {
        Ok(g) => g,
        Err(status) => {
            cx.session.status.set(status);
            return;
        }
    };
    // The rarer steps (TLS, ssl_preread, a resolved proxy_pass) are boxed futures, made only
    // when used: a plain session's state machine, allocated per session, stays small.
    let client = match cx.srv.tls.clone() {
        Some(tls) => match Box::pin(handshake(cx, client, &tls)).await {
            Some(c) => c,
            None => {
                cx.session.status.set(500);
                return;
            }
        },
        None => client,
    };
    if cx.srv.conf.ssl_preread.unwrap_or(false) && !Box::pin(preread(cx, &client)).await {
        return;
    }
    let handler = cx.srv.handler.clone();
    match handler {
        Some(Handler::Return(t)) => {
            let v = cx.eval(&t);
            match write_all(&client, v.as_bytes()).await {
                Ok(()) => cx.session.bytes_sent.set(v.len() as u64),
                Err(e) => crate::conn_log!(
                    Level::Info,
                    cx.info.number,
                    "send() failed {} while sending to client{}",
                    shoal_conf::os_error(&e),
                    cx.log_ctx()
                ),
            }
        }
        Some(Handler::Upstream(u)) => proxy(cx, client, &u).await,
        Some(Handler::Dynamic(t)) => {
            let Some(u) = Box::pin(dynamic_upstream(cx, &t)).await else {
                return;
            };
            proxy(cx, client, &u).await
        }
        None => cx.session.status.set(500),
    }
}

/// The TLS handshake of a `listen ... ssl` server (nginx's ssl phase, after access), within
/// `ssl_handshake_timeout`; `None` when it failed (logged as nginx logs it).
async fn handshake(
    cx: &mut Ctx<'_>,
    client: Transport,
    tls: &crate::tls::AddrTls,
) -> Option<Transport> {
    let Transport::Tcp(tcp) = client else {
        return Some(client);
    };
    let timeout = cx
        .srv
        .conf
        .ssl_handshake_timeout
        .unwrap_or(Duration::from_secs(60));
    let fail = |cx: &Ctx<'_>, level: Level, m: &str| {
        crate::conn_log!(
            level,
            cx.info.number,
            "{m} while SSL handshaking{}",
            cx.log_ctx()
        );
    };
    match tokio::time::timeout(timeout, crate::tls::accept(tcp, tls, cx.info.peer)).await {
        Err(_) => {
            fail(
                cx,
                Level::Info,
                "client timed out (110: Connection timed out)",
            );
            None
        }
        Ok(Err(e)) => {
            fail(cx, e.level, &e.message);
            None
        }
        Ok(Ok(crate::tls::Accepted::PlainHttp(_))) => {
            fail(
                cx,
                Level::Info,
                "SSL_do_handshake() failed (SSL: error:0A00009C:SSL routines::http request)",
            );
            None
        }
        Ok(Ok(crate::tls::Accepted::Tls(stream))) => {
            let (conn, info) = stream.into_parts();
            cx.info.tls = Some(Box::new(info));
            Some(Transport::Tls(Box::new(conn)))
        }
    }
}

/// The upstream of a `proxy_pass` with variables (nginx's `ngx_stream_proxy_eval` and its
/// resolve handler): an upstream block by its name, a literal address, or a name looked up
/// with the `resolver`. `None`: the session ends, logged as nginx logs it, with its `$status`
/// (500, as nginx's, whether the value was wrong or the name could not be resolved).
pub async fn dynamic_upstream(cx: &Ctx<'_>, t: &Template) -> Option<Arc<UpstreamConf>> {
    let name = cx.eval(t);
    let fail = |status: u16, m: String| {
        crate::conn_log!(
            Level::Error,
            cx.info.number,
            "{m}{}, bytes from/to client:{}/{}, bytes from/to upstream:0/0",
            cx.log_ctx(),
            cx.session.bytes_received.get(),
            cx.session.bytes_sent.get()
        );
        cx.session.status.set(status);
        None
    };
    if let Some(u) = cx.stream.upstreams.iter().find(|u| u.name == name) {
        return Some(u.clone());
    }
    let host = match literal_upstream(&name) {
        Ok(Literal::Upstream(u)) => return Some(u),
        Ok(Literal::Name(host, port)) => (host, port),
        Err(m) => return fail(500, m.into()),
    };
    let conf = &cx.srv.conf;
    let Some(r) = &conf.resolver else {
        return fail(500, format!("no resolver defined to resolve {}", host.0));
    };
    match crate::resolver::resolve(r, &host.0, conf.resolver_timeout()).await {
        Ok(addrs) => {
            let mut u = UpstreamConf::resolved(&host.0, &addrs, host.1);
            u.stream = true;
            Some(Arc::new(u))
        }
        // nginx 1.22 ends these with 500 too (read from its access log).
        Err(f) => fail(500, format!("{} could not be resolved {f}", host.0)),
    }
}

/// What the value of a `proxy_pass` with variables names, when no upstream block has it.
pub enum Literal {
    /// An address (or a unix socket): its upstream.
    Upstream(Arc<UpstreamConf>),
    /// A host name and port, for the resolver.
    Name(String, u16),
}

/// Reads the value of a `proxy_pass` with variables that named no upstream block.
pub fn literal_upstream(name: &str) -> Result<Literal> {
    if name.starts_with("unix:") {
        return super::implicit_upstream(name).map(|u| Literal::Upstream(Arc::new(u)));
    }
    let (host, port) = crate::upstream::conf::split_host_port(name, 0)?;
    if port == 0 {
        return Err(Error::invalid(format!("no port in upstream \"{name}\"")));
    }
    let bare = host.trim_start_matches('[').trim_end_matches(']');
    if bare.parse::<std::net::IpAddr>().is_err() {
        return Ok(Literal::Name(bare.to_string(), port));
    }
    let mut u = super::implicit_upstream(name)?;
    u.ephemeral = true;
    Ok(Literal::Upstream(Arc::new(u)))
}

/// `ssl_preread`: waits (up to `preread_timeout`, `preread_buffer_size` bytes) for the
/// client's ClientHello and reads its server name, ALPN protocols and version, without taking
/// the bytes (they go to the upstream as they came). False: the session ends (logged).
async fn preread(cx: &mut Ctx<'_>, client: &Transport) -> bool {
    let max = cx.srv.conf.preread_buffer_size();
    let deadline = tokio::time::Instant::now() + cx.srv.conf.preread_timeout();
    let mut buf = vec![0u8; max.max(1)];
    loop {
        let n = match client.try_peek(&mut buf) {
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => 0,
            Err(_) => return false,
        };
        match super::preread::parse(&buf[..n]) {
            super::preread::Hello::Done(p) => {
                *cx.session.preread.borrow_mut() = p;
                return true;
            }
            super::preread::Hello::More if n < max => {}
            // Not TLS (or larger than the buffer): nothing to tell, the session goes on.
            _ => return true,
        }
        if n > 0 && client.try_peek_closed().is_ok_and(|closed| closed) {
            return true;
        }
        tokio::select! {
            r = client.readable() => {
                if r.is_err() {
                    return false;
                }
                // Readable again with the same bytes: wait for more to come.
                if n > 0 {
                    tokio::time::sleep(Duration::from_millis(1)).await;
                }
            }
            _ = tokio::time::sleep_until(deadline) => {
                crate::conn_log!(
                    Level::Info,
                    cx.info.number,
                    "preread timed out (110: Connection timed out){}",
                    cx.log_ctx()
                );
                return true;
            }
        }
    }
}

/// Connects to a peer of `u` and relays the session.
async fn proxy(cx: &mut Ctx<'_>, client: Transport, u: &Arc<UpstreamConf>) {
    let conf = &cx.srv.conf;
    // The key's bytes as nginx hashes them (`$binary_remote_addr`'s raw, not as text).
    let key = u.hash_key.as_ref().map(|t| cx.vars().eval_bytes(t));
    let input = Input {
        client: cx.peer.map(|p| p.ip()),
        key: key.as_deref().unwrap_or(&[]),
    };
    let mut attempt = state::start(u, input);
    let max_tries = conf.next_upstream_tries.unwrap_or(0);
    let deadline = conf
        .next_upstream_timeout
        .filter(|t| !t.is_zero())
        .map(|t| Instant::now() + t);
    let mut tries = 0u64;
    let (upstream, addr) = loop {
        let now = Instant::now();
        let Some(peer) = state::pick(u, &mut attempt, now) else {
            // nginx names the upstream as the peer (`$upstream_addr`).
            cx.session.tries.borrow_mut().push(Try {
                addr: Tried::Name(u.name.clone()),
                ..Default::default()
            });
            crate::conn_log!(
                Level::Error,
                cx.info.number,
                "no live upstreams while connecting to upstream{}",
                cx.proxy_ctx(&u.name, 0, 0)
            );
            cx.session.status.set(502);
            return;
        };
        tries += 1;
        let addr = u.addrs[peer].clone();
        cx.session.tries.borrow_mut().push(Try {
            addr: Tried::Peer(addr.clone()),
            ..Default::default()
        });
        cx.worker.next_connection_number();
        match connect(cx, &addr, &u.name).await {
            Ok((s, header)) => {
                cx.session.with_try(|t| {
                    t.connect_time = Some(now.elapsed());
                    t.bytes_sent += header;
                });
                break (s, addr);
            }
            Err(m) => {
                let ctx = cx.proxy_ctx(&addr.to_string(), 0, 0);
                crate::conn_log!(Level::Error, cx.info.number, "{m}{ctx}");
                if state::free(u, &mut attempt, PeerResult::Failed) {
                    let action = m.find(" while ").map_or("", |i| &m[i..]);
                    crate::conn_log!(
                        Level::Warn,
                        cx.info.number,
                        "upstream server temporarily disabled{action}{ctx}"
                    );
                }
                let more = conf.next_upstream()
                    && attempt.tries() > 0
                    && (max_tries == 0 || tries < max_tries)
                    && deadline.is_none_or(|d| Instant::now() < d);
                if !more {
                    cx.session.status.set(502);
                    return;
                }
            }
        }
    };
    let started = Instant::now();
    relay(cx, &client, &upstream, &addr, started).await;
    cx.session
        .with_try(|t| t.session_time = Some(started.elapsed()));
    state::free(u, &mut attempt, PeerResult::Success);
}

/// A new connection to a peer, within `proxy_connect_timeout`, from `proxy_bind`'s address,
/// with `proxy_socket_keepalive`, then (as nginx orders them) the PROXY protocol header of
/// `proxy_protocol on` in plain, and the TLS handshake of `proxy_ssl on` (bounded by
/// `proxy_connect_timeout` again). `host` is the `proxy_pass` name, the default
/// `proxy_ssl_name`. Gives the header's length; the error is nginx's line before its context.
async fn connect(cx: &Ctx<'_>, addr: &PeerAddr, host: &str) -> Result<(Transport, u64)> {
    let conf = &cx.srv.conf;
    let plain = connect_plain(cx, addr)
        .await
        .map_err(|e| e.context(|m| format!("{m} while connecting to upstream")))?;
    // nginx says so once the upstream is ready, after a TLS handshake.
    // (The local address is asked of the kernel only when the line is written.)
    let connected = |tcp: &TcpStream| {
        crate::conn_log!(
            Level::Info,
            cx.info.number,
            "proxy {} connected to {}",
            tcp.local_addr()
                .map_or_else(|_| "-".to_string(), |a| a.to_string()),
            addr
        );
    };
    if let Transport::Tcp(s) = &plain {
        if conf.tcp_nodelay.unwrap_or(true) {
            let _ = s.set_nodelay(true);
        }
    }
    let mut header_len = 0;
    if conf.proxy_protocol.unwrap_or(false) {
        let header = proxy_protocol_header(&cx.info, cx.peer);
        write_all(&plain, header.as_bytes()).await.map_err(|e| {
            Error::failed("send()", e).context(|m| format!("{m} while proxying connection"))
        })?;
        header_len = header.len() as u64;
    }
    let Some(tls) = conf
        .proxy_ssl_on
        .filter(|on| *on)
        .and_then(|_| conf.proxy_ssl.built.get())
    else {
        if let Transport::Tcp(s) = &plain {
            connected(s);
        }
        return Ok((plain, header_len));
    };
    let Transport::Tcp(tcp) = plain else {
        // nginx speaks TLS over a unix socket too; the TLS client here wants a TcpStream.
        return Err(Error::tls(
            "SSL to a unix socket upstream is not supported by shoal",
        ));
    };
    let local = crate::log::enabled(Level::Info).then(|| tcp.local_addr());
    let vars = cx.vars();
    let hs = crate::http::proxy::ssl::handshake(tcp, tls, host, &vars);
    match tokio::time::timeout(conf.connect_timeout(), Box::pin(hs)).await {
        Err(_) => Err(timed_out(
            "upstream timed out (110: Connection timed out) while SSL handshaking to upstream",
        )),
        Ok(Err(e)) => Err(e),
        Ok(Ok(c)) => {
            if let Some(local) = local {
                crate::conn_log!(
                    Level::Info,
                    cx.info.number,
                    "proxy {} connected to {}",
                    local.map_or_else(|_| "-".to_string(), |a| a.to_string()),
                    addr
                );
            }
            Ok((Transport::Tls(Box::new(c)), header_len))
        }
    }
}

/// The TCP (or unix socket) connection of [`connect`].
async fn connect_plain(cx: &Ctx<'_>, addr: &PeerAddr) -> Result<Transport> {
    let conf = &cx.srv.conf;
    let timeout = conf.connect_timeout();
    let failed = |e: std::io::Error| Error::failed("connect()", e);
    let timed_out = || timed_out("upstream timed out (110: Connection timed out)");
    match addr {
        PeerAddr::Unix(p) => match tokio::time::timeout(timeout, UnixStream::connect(p)).await {
            Err(_) => Err(timed_out()),
            Ok(Err(e)) => Err(failed(e)),
            Ok(Ok(s)) => Ok(Transport::Unix(s)),
        },
        PeerAddr::Inet(a) => {
            use socket2::{Domain, Socket, Type};
            let socket = Socket::new(Domain::for_address(*a), Type::STREAM.nonblocking(), None)
                .map_err(failed)?;
            if conf.socket_keepalive.unwrap_or(false) {
                let _ = socket.set_keepalive(true);
            }
            if let Some(Some(bind)) = &conf.bind {
                let text = cx.eval(&bind.addr);
                crate::upstream::bind::apply(&socket, &text, bind.transparent, *a, true)?;
            }
            let socket = tokio::net::TcpSocket::from_std_stream(socket.into());
            match tokio::time::timeout(timeout, socket.connect(*a)).await {
                Err(_) => Err(timed_out()),
                Ok(Err(e)) => Err(failed(e)),
                Ok(Ok(s)) => Ok(Transport::Tcp(s)),
            }
        }
    }
}

/// A connect or handshake that `proxy_connect_timeout` ended, worded `msg` (ETIMEDOUT kept).
fn timed_out(msg: &str) -> Error {
    Error::io(std::io::Error::from_raw_os_error(libc::ETIMEDOUT), msg)
}

/// The PROXY protocol version 1 header nginx sends an upstream (`proxy_protocol on`).
pub fn proxy_protocol_header(info: &ConnInfo, peer: Option<SocketAddr>) -> String {
    match (peer, info.local) {
        (Some(src), Some(dst)) if src.is_ipv4() == dst.is_ipv4() => format!(
            "PROXY {} {} {} {} {}\r\n",
            if src.is_ipv4() { "TCP4" } else { "TCP6" },
            src.ip(),
            dst.ip(),
            src.port(),
            dst.port()
        ),
        _ => "PROXY UNKNOWN\r\n".to_string(),
    }
}
