//! A generation: one configuration with the listening sockets it needs and the routes from a
//! connection's address to its servers. Reloads build a new generation, reusing the sockets of
//! the old one that are still wanted (nginx's "cycle").

use std::collections::HashMap;
use std::net::SocketAddr;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::sync::{Arc, Mutex, OnceLock};

use crate::config::Config;
use crate::error::Error;
use crate::http::ServerConf;
use crate::listen::{bound_addresses, open_socket, ListenAddr, SocketKey, SocketKind};

/// An open listening socket, owned by the master. A unix socket's file is removed when the
/// socket is closed.
///
/// Connections hold the generation they started on, and so its `Listening`s; a socket that a
/// reload drops is therefore closed explicitly ([`Listening::close`]) rather than when the last
/// reference goes, or it would keep listening (the kernel completing handshakes nobody
/// accepts) for as long as a keep-alive connection of the old generation stays open.
#[derive(Debug)]
pub struct Listening {
    pub key: SocketKey,
    fd: Mutex<Option<OwnedFd>>,
}

impl Listening {
    fn new(key: SocketKey, fd: OwnedFd) -> Listening {
        Listening {
            key,
            fd: Mutex::new(Some(fd)),
        }
    }

    /// A close-on-exec duplicate for a worker to poll; fails once the socket is closed.
    pub fn dup(&self) -> std::io::Result<OwnedFd> {
        let fd = self.fd.lock().unwrap_or_else(|e| e.into_inner());
        match fd.as_ref() {
            Some(fd) => fd.try_clone(),
            None => Err(std::io::Error::new(
                std::io::ErrorKind::NotConnected,
                "the listening socket was closed by a reload",
            )),
        }
    }

    /// The socket's fd, while it is open (for diagnostics).
    pub fn raw_fd(&self) -> Option<RawFd> {
        let fd = self.fd.lock().unwrap_or_else(|e| e.into_inner());
        fd.as_ref().map(|f| f.as_raw_fd())
    }

    /// Closes the master's fd (the socket stops listening once the workers dropped their
    /// duplicates) and removes a unix socket's file, unless a new binary took the socket.
    pub fn close(&self) {
        let fd = self.fd.lock().unwrap_or_else(|e| e.into_inner()).take();
        if fd.is_some() && !crate::upgrade::handed_over() {
            if let ListenAddr::Unix(p) = &self.key.addr {
                let _ = std::fs::remove_file(p);
            }
        }
    }
}

impl Drop for Listening {
    fn drop(&mut self) {
        self.close();
    }
}

/// The captures of a `server_name ~regex` match.
pub type NameCaptures = crate::variables::Captures;

/// The servers reachable at one address, and which of them is the default.
#[derive(Clone, Debug)]
pub struct AddrServers {
    /// Indices into `http.servers`, in configuration order.
    pub servers: Vec<usize>,
    pub default: usize,
    /// A `listen` of the address says `proxy_protocol`: connections begin with its header.
    pub proxy_protocol: bool,
    /// A `listen` of the address says `http2` (nginx's deprecated way to turn it on).
    pub http2: bool,
}

/// The servers of each listen address, in configuration order, and which is the default (the
/// first, unless one says `default_server`).
pub fn address_routes(http: &crate::http::HttpConf) -> HashMap<ListenAddr, AddrServers> {
    let mut routes: HashMap<ListenAddr, AddrServers> = HashMap::new();
    for (i, srv) in http.servers.iter().enumerate() {
        for l in &srv.listen {
            let entry = routes.entry(l.addr.clone()).or_insert(AddrServers {
                servers: Vec::new(),
                default: i,
                proxy_protocol: false,
                http2: false,
            });
            // As `ssl`: one listen saying it makes the address speak it, for all its servers.
            entry.proxy_protocol |= l.opts.proxy_protocol;
            entry.http2 |= l.opts.http2;
            if !entry.servers.contains(&i) {
                entry.servers.push(i);
            }
            if l.default_server {
                entry.default = i;
            }
        }
    }
    routes
}

/// What name matching needs of a server: its names and its `~regex` names.
pub trait Named {
    fn names(&self) -> &[String];
    fn name_regexes(&self) -> &[shoal_pcre::Regex];
}

impl Named for ServerConf {
    fn names(&self) -> &[String] {
        &self.names
    }
    fn name_regexes(&self) -> &[shoal_pcre::Regex] {
        &self.name_regexes
    }
}

/// The server for a host name among `candidates` (indices into `servers`), in nginx's order:
/// exact name, the longest `*.suffix`, the longest `prefix.*`, the first matching `~regex` (its
/// captures returned); `None` when no name matches.
pub fn match_name<S: Named>(
    servers: &[S],
    candidates: &AddrServers,
    host: &str,
) -> Option<(usize, Option<NameCaptures>)> {
    if let Some(i) = find_by_name(servers, candidates, host) {
        return Some((i, None));
    }
    for &i in &candidates.servers {
        for re in servers[i].name_regexes() {
            if let Some(caps) = crate::variables::capture(re, host) {
                return Some((i, Some(caps)));
            }
        }
    }
    None
}

fn find_by_name<S: Named>(servers: &[S], candidates: &AddrServers, host: &str) -> Option<usize> {
    let host = host.trim_end_matches('.');
    if let Some(&i) = candidates
        .servers
        .iter()
        .find(|&&i| servers[i].names().iter().any(|n| n == host))
    {
        return Some(i);
    }
    let mut best: Option<(usize, usize)> = None;
    for &i in &candidates.servers {
        for n in servers[i].names() {
            let hit = if let Some(suffix) = n.strip_prefix("*.") {
                host.len() > suffix.len() + 1
                    && host.ends_with(suffix)
                    && host.as_bytes()[host.len() - suffix.len() - 1] == b'.'
            } else if let Some(suffix) = n.strip_prefix('.') {
                host == suffix
                    || (host.ends_with(suffix)
                        && host
                            .as_bytes()
                            .get(host.len().wrapping_sub(suffix.len() + 1))
                            == Some(&b'.'))
            } else {
                false
            };
            if hit && best.is_none_or(|(_, len)| n.len() > len) {
                best = Some((i, n.len()));
            }
        }
    }
    if let Some((i, _)) = best {
        return Some(i);
    }
    for &i in &candidates.servers {
        for n in servers[i].names() {
            if let Some(prefix) = n.strip_suffix(".*") {
                if host.len() > prefix.len() + 1
                    && host.starts_with(prefix)
                    && host.as_bytes()[prefix.len()] == b'.'
                {
                    return Some(i);
                }
            }
        }
    }
    None
}

/// One configuration with everything needed to serve it.
pub struct Generation {
    pub id: u64,
    pub config: Arc<Config>,
    pub sockets: Vec<Arc<Listening>>,
    /// Shared so that a connection can keep its own for as long as the generation lasts.
    /// (Looked up for every request: hashed with Fx, not SipHash; the keys are the
    /// configuration's own addresses, nothing a client chooses.)
    pub routes: shoal_io::fxhash::FxHashMap<ListenAddr, Arc<AddrServers>>,
    /// The proxy cache zones of this configuration, set by the master once they run: a
    /// request finds its zone here, not among the latest configuration's, which a reload
    /// replaces before the connections of this generation move on.
    pub cache_zones: OnceLock<Arc<crate::http::proxy_cache::zone::Zones>>,
}

impl Generation {
    /// Opens (or takes over from `old`) every socket `config` needs. On failure nothing of
    /// `old` is touched, and the error reads as nginx's.
    pub fn new(
        id: u64,
        config: Arc<Config>,
        old: Option<&Generation>,
    ) -> Result<Generation, Error> {
        let workers = config.main.workers();
        let mut sockets = Vec::new();
        let mut routes = HashMap::new();
        if let Some(http) = &config.http {
            for (addr, opts) in bound_addresses(&http.listens()) {
                open_for_workers(&mut sockets, old, workers, addr, &opts, SocketKind::Http)?;
            }
            routes = address_routes(http);
        }
        if let Some(stream) = &config.stream {
            for (addr, opts) in stream.bound_addresses() {
                let kind = if opts.udp {
                    SocketKind::StreamUdp
                } else {
                    SocketKind::Stream
                };
                open_for_workers(&mut sockets, old, workers, addr, &opts, kind)?;
            }
        }
        Ok(Generation {
            id,
            config,
            sockets,
            routes: routes.into_iter().map(|(a, s)| (a, Arc::new(s))).collect(),
            cache_zones: OnceLock::new(),
        })
    }

    /// Closes the sockets of this generation that `next` does not have (a reload switched).
    pub fn close_sockets_not_in(&self, next: &Generation) {
        for s in &self.sockets {
            if !next.sockets.iter().any(|n| Arc::ptr_eq(n, s)) {
                s.close();
            }
        }
    }

    /// The servers for a connection accepted on `socket` with local address `local`: the
    /// specific address if configured, else the socket's own (wildcard) address.
    pub fn servers_for(
        &self,
        socket: &ListenAddr,
        local: Option<SocketAddr>,
    ) -> Option<&Arc<AddrServers>> {
        if let Some(l) = local {
            if let Some(r) = self.routes.get(&ListenAddr::Inet(l)) {
                return Some(r);
            }
        }
        self.routes.get(socket)
    }

    fn http(&self) -> &crate::http::HttpConf {
        self.config
            .http
            .as_ref()
            .expect("a connection implies an http block")
    }

    /// The default server of an address: the one in charge until a request names a host (its
    /// `client_header_timeout`, and the answer to a head refused before a host was read).
    pub fn default_server<'a>(&'a self, candidates: &AddrServers) -> &'a ServerConf {
        &self.http().servers[candidates.default]
    }

    /// The server for a head refused after nginx had read `refused` of it: the host's, the one
    /// for "no Host" when the whole head was read without one, else `default` (the address's
    /// default server, or the one SNI named on a TLS address).
    pub fn refused_server<'a>(
        &'a self,
        candidates: &AddrServers,
        refused: &shoal_http::Refused,
        default: &'a ServerConf,
    ) -> &'a ServerConf {
        match &refused.host {
            Some(h) => self.find_server(candidates, Some(&String::from_utf8_lossy(h))),
            None if refused.head_read => self.find_server(candidates, None),
            None => default,
        }
    }

    /// The server for a Host among `candidates` (see [`Generation::find_server_captures`]).
    pub fn find_server<'a>(
        &'a self,
        candidates: &AddrServers,
        host: Option<&str>,
    ) -> &'a ServerConf {
        self.find_server_captures(candidates, host).0
    }

    /// The server for a Host among `candidates`, in nginx's order: exact name, the longest
    /// `*.suffix`, the longest `prefix.*`, the first matching `~regex` (its captures returned),
    /// else the default server. Without a Host, a server named `""` before the default.
    pub fn find_server_captures<'a>(
        &'a self,
        candidates: &AddrServers,
        host: Option<&str>,
    ) -> (&'a ServerConf, Option<NameCaptures>) {
        let servers = &self.http().servers;
        // A lone server is chosen whatever the Host, unless its names could capture from it.
        if let [only] = candidates.servers[..] {
            if servers[only].name_regexes.is_empty() {
                return (&servers[only], None);
            }
        }
        let Some(host) = host.filter(|h| !h.is_empty()) else {
            if let Some(&i) = candidates
                .servers
                .iter()
                .find(|&&i| servers[i].names.iter().any(|n| n.is_empty()))
            {
                return (&servers[i], None);
            }
            return (&servers[candidates.default], None);
        };
        match match_name(servers, candidates, host) {
            Some((i, caps)) => (&servers[i], caps),
            None => (&servers[candidates.default], None),
        }
    }
}

/// nginx tries a busy address five times, half a second apart, logging each failure, before
/// giving up with `still could not bind()`.
/// Opens (or takes over from `old`) the sockets of one bound address: one per worker with
/// `reuseport`, else one shared.
fn open_for_workers(
    sockets: &mut Vec<Arc<Listening>>,
    old: Option<&Generation>,
    workers: usize,
    addr: ListenAddr,
    opts: &crate::listen::SocketOptions,
    kind: SocketKind,
) -> Result<(), Error> {
    let keys: Vec<SocketKey> = if opts.reuseport {
        (0..workers)
            .map(|w| SocketKey {
                addr: addr.clone(),
                worker: Some(w),
                kind,
            })
            .collect()
    } else {
        vec![SocketKey {
            addr: addr.clone(),
            worker: None,
            kind,
        }]
    };
    for key in keys {
        let reused = old.and_then(|g| g.sockets.iter().find(|s| s.key == key).cloned());
        let sock = match reused {
            Some(s) => s,
            None => {
                // A socket the old binary handed over (a binary upgrade), else a new one.
                let fd = match inherited(&key) {
                    Some(fd) => fd,
                    None => open_with_retries(&key.addr, opts)?,
                };
                Arc::new(Listening::new(key.clone(), fd))
            }
        };
        sockets.push(sock);
    }
    Ok(())
}

/// The socket the old binary handed over for `key` in a binary upgrade, known by its address
/// and its type (a stream `udp` listener takes the datagram socket of its address).
fn inherited(key: &SocketKey) -> Option<OwnedFd> {
    crate::upgrade::take(&key.addr, key.kind == SocketKind::StreamUdp)
}

fn open_with_retries(
    addr: &ListenAddr,
    opts: &crate::listen::SocketOptions,
) -> Result<OwnedFd, Error> {
    for attempt in 0..5 {
        match open_socket(addr, opts) {
            Ok(fd) => return Ok(fd),
            Err(e) => {
                let in_use =
                    e.io_error().and_then(std::io::Error::raw_os_error) == Some(libc::EADDRINUSE);
                crate::log::report(crate::log::Level::Emerg, &e);
                if !in_use {
                    return Err(e);
                }
                if attempt < 4 {
                    std::thread::sleep(std::time::Duration::from_millis(500));
                }
            }
        }
    }
    Err(Error::invalid(STILL_COULD_NOT_BIND))
}

/// The failure after the retries of a busy address: logged by the caller (each try's was
/// logged as it failed).
pub const STILL_COULD_NOT_BIND: &str = "still could not bind()";
