//! From merged [`SslConf`]s to what handshakes use: a [`ServerTls`] per server (certificates,
//! client verification, sessions) and an [`AddrTls`] per TLS address (the servers SNI can
//! choose, each with its rustls `ServerConfig`), with nginx's checks and messages.
//!
//! Runs on the master thread while a configuration is loaded (`-t`, start, reload), except
//! for certificates named with variables, which [`ServerTls::dynamic_pairs`] reads at the
//! handshake on a worker, as nginx does (`select`).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use rustls::crypto::{CryptoProvider, SupportedKxGroup};
use rustls::server::{NoServerSessionStorage, ProducesTickets, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use rustls::{ServerConfig, SupportedCipherSuite};
use shoal_conf::{Error, Span};

use crate::error;

use super::certs;
use super::ciphers;
use super::conf::{SslConf, VerifyClient};
use super::openssl_conf::{apply_conf_command, parse_groups};
pub use super::select::HandshakeVars;
use super::select::{Certs, DynamicCerts, Pairs, Part, Template};
use super::session::{self, SessionZone, TicketKey, Ticketer, ZoneStore};
use super::stapling::{Responder, Staple, StapleConf};
use super::verify::ClientAuth;
use crate::conf::Builder;
use crate::cycle::{AddrServers, Named};
use crate::http::HttpConf;
use crate::listen::ListenAddr;

/// ALPN protocols offered, most preferred first, by a server without HTTP/2.
pub const DEFAULT_ALPN: &[&[u8]] = &[b"http/1.1"];
/// The same with HTTP/2 (`http2 on`, or `listen ... http2` on the address): `h2` first, as
/// nginx prefers it.
pub const H2_ALPN: &[&[u8]] = &[b"h2", b"http/1.1"];

/// OpenSSL's `SSL_CTX_set_max_early_data` as nginx sets it (its buffer size).
const MAX_EARLY_DATA: u32 = 16384;

/// The names SNI is matched against.
#[derive(Clone, Debug, Default)]
pub struct SniNames {
    names: Vec<String>,
    regexes: Vec<shoal_pcre::Regex>,
}

impl Named for SniNames {
    fn names(&self) -> &[String] {
        &self.names
    }
    fn name_regexes(&self) -> &[shoal_pcre::Regex] {
        &self.regexes
    }
}

/// What one server block brings to a handshake.
#[derive(Debug)]
pub struct ServerTls {
    /// Its index in `http.servers`.
    pub index: usize,
    pub reject_handshake: bool,
    /// `ssl_buffer_size`: the plaintext size of the records a writer makes.
    pub buffer_size: usize,
    pub early_data: bool,
    pub client_auth: Option<Arc<ClientAuth>>,
    certs: Certs,
    prefer_server_ciphers: bool,
    session_storage: Arc<dyn rustls::server::StoresServerSessions>,
    ticketer: Option<Arc<dyn ProducesTickets>>,
    tls13_tickets: usize,
    /// What this server imposes when it is an address's default.
    versions: Vec<&'static rustls::SupportedProtocolVersion>,
    suites: Vec<SupportedCipherSuite>,
    groups: Vec<&'static dyn SupportedKxGroup>,
}

impl ServerTls {
    pub fn has_certificates(&self) -> bool {
        !matches!(self.certs, Certs::None)
    }

    /// The pairs of a server whose certificate names have variables, read now.
    pub fn dynamic_pairs(&self, vars: &HandshakeVars<'_>) -> Option<Result<Pairs, error::Error>> {
        match &self.certs {
            Certs::Dynamic(d) => Some(d.load(vars).map(Pairs::new)),
            _ => None,
        }
    }

    fn static_pairs(&self) -> Option<Arc<Pairs>> {
        match &self.certs {
            Certs::Static(p) => Some(p.clone()),
            _ => None,
        }
    }
}

/// One TLS address: the servers SNI may choose, and a rustls configuration for each.
#[derive(Debug)]
pub struct AddrTls {
    pub addr: ListenAddr,
    candidates: AddrServers,
    names: Arc<Vec<SniNames>>,
    servers: HashMap<usize, Entry>,
    /// No protocol is left to offer (`ssl_protocols TLSv1` only): every handshake fails, as
    /// OpenSSL's `no protocols available`.
    pub no_protocols: bool,
}

#[derive(Debug)]
struct Entry {
    tls: Arc<ServerTls>,
    /// `None` for a server whose certificates are read at the handshake or that rejects it.
    config: Option<Arc<ServerConfig>>,
    /// The configuration without a certificate resolver, for certificates read at the handshake.
    base: Arc<ServerConfig>,
}

impl AddrTls {
    /// The server for an SNI name (`None`: no SNI): matched as `Host` is, else the default.
    pub fn choose(&self, sni: Option<&str>) -> usize {
        let Some(name) = sni else {
            return self.candidates.default;
        };
        crate::cycle::match_name(&self.names, &self.candidates, name)
            .map(|(i, _)| i)
            .unwrap_or(self.candidates.default)
    }

    pub fn default_server(&self) -> usize {
        self.candidates.default
    }

    /// The TLS settings of server `i` (one of this address's).
    pub fn server(&self, i: usize) -> Option<&Arc<ServerTls>> {
        self.servers.get(&i).map(|e| &e.tls)
    }

    /// The rustls configuration for a handshake that chose server `i`; certificates named
    /// with variables are read now (the error is nginx's `cannot load certificate ...`).
    pub fn config_for(
        &self,
        i: usize,
        vars: &HandshakeVars<'_>,
    ) -> Option<Result<Arc<ServerConfig>, error::Error>> {
        let e = self.servers.get(&i)?;
        if let Some(c) = &e.config {
            return Some(Ok(c.clone()));
        }
        let pairs = match e.tls.dynamic_pairs(vars)? {
            Ok(p) => p,
            Err(m) => return Some(Err(m)),
        };
        let mut cfg = (*e.base).clone();
        cfg.cert_resolver = Arc::new(pairs);
        Some(Ok(Arc::new(cfg)))
    }
}

/// Merges, reads and checks the ssl settings of every server and builds the TLS addresses
/// (nginx's `ngx_http_ssl_merge_srv_conf` and `ngx_http_ssl_init`).
pub fn finish(http: &mut HttpConf, b: &mut Builder) -> Result<(), Error> {
    let routes = crate::cycle::address_routes(http);
    // An address speaks TLS when a listen of it says `ssl`, or its default server `ssl on`.
    let mut tls_addrs: Vec<ListenAddr> = Vec::new();
    for (addr, r) in &routes {
        let listed_ssl = r.servers.iter().any(|&i| {
            http.servers[i]
                .listen
                .iter()
                .any(|l| l.addr == *addr && l.opts.ssl)
        });
        if listed_ssl || http.servers[r.default].ssl.enabled() {
            tls_addrs.push(addr.clone());
        }
    }
    tls_addrs.sort();
    let parent = http.ssl.conf.clone();
    let mut built: HashMap<usize, Arc<ServerTls>> = HashMap::new();
    for (i, srv) in http.servers.iter_mut().enumerate() {
        srv.ssl.merge(&parent);
        let on_tls = tls_addrs
            .iter()
            .any(|a| routes.get(a).is_some_and(|r| r.servers.contains(&i)));
        let ssl = &srv.ssl;
        if let Some(e) = ssl.enable.as_ref().filter(|e| e.value) {
            if ssl.certificates.is_none() && !ssl.reject_handshake.unwrap_or(false) {
                return Err(Error::new(
                    "no \"ssl_certificate\" is defined for the \"ssl\" directive",
                    Some(e.span.clone()),
                ));
            }
        }
        if !on_tls && !ssl.enabled() && ssl.certificates.is_none() {
            continue;
        }
        let resolver = srv
            .loc
            .resolver
            .resolver
            .clone()
            .map(|r| (r, srv.loc.resolver.timeout()));
        let tls = build_server(i, &srv.ssl, resolver, b)?;
        built.insert(i, Arc::new(tls));
    }
    let names: Arc<Vec<SniNames>> = Arc::new(
        http.servers
            .iter()
            .map(|s| SniNames {
                names: s.names.clone(),
                regexes: s.name_regexes.clone(),
            })
            .collect(),
    );
    for addr in tls_addrs {
        let r = routes.get(&addr).expect("the address came from the routes");
        let default = &http.servers[r.default];
        let def = built
            .get(&r.default)
            .expect("every server of a TLS address was built")
            .clone();
        if !def.has_certificates() && !def.reject_handshake {
            let span = default.ssl.listen_span.clone().map(|s| Span {
                file: s.file,
                line: default.line,
            });
            return Err(Error::new(
                "no \"ssl_certificate\" is defined for the \"listen ... ssl\" directive",
                span,
            ));
        }
        let no_protocols = def.versions.is_empty();
        let mut servers = HashMap::new();
        for &i in &r.servers {
            let tls = built
                .get(&i)
                .expect("every server of a TLS address was built")
                .clone();
            // ALPN offers `h2` when the server SNI chose has it on, or the address does.
            let h2 = r.http2 || http.servers[i].loc.http2.enabled();
            let alpn = if h2 { H2_ALPN } else { DEFAULT_ALPN };
            if let Some(e) = entry(&def, tls, no_protocols, alpn)? {
                servers.insert(i, e);
            }
        }
        http.ssl.addrs.insert(
            addr.clone(),
            Arc::new(AddrTls {
                addr,
                candidates: r.clone(),
                names: names.clone(),
                servers,
                no_protocols,
            }),
        );
    }
    Ok(())
}

/// The handshake context of server `tls` on an address whose default server is `def`
/// (`None` when no protocol is left to offer).
fn entry(
    def: &ServerTls,
    tls: Arc<ServerTls>,
    no_protocols: bool,
    alpn: &[&[u8]],
) -> Result<Option<Entry>, Error> {
    if no_protocols {
        return Ok(None);
    }
    let base = server_config(def, &tls, Arc::new(Pairs::default()), alpn)
        .map_err(|m| Error::new(m, None))?;
    let pairs = tls.static_pairs().or_else(|| {
        // A server without certificates of its own answers with the default server's, as
        // nginx does.
        (!matches!(tls.certs, Certs::Dynamic(_)))
            .then(|| def.static_pairs())
            .flatten()
    });
    let config = pairs.map(|p| {
        let mut c = base.clone();
        c.cert_resolver = p;
        Arc::new(c)
    });
    Ok(Some(Entry {
        tls,
        config,
        base: Arc::new(base),
    }))
}

/// The TLS context of a `stream` server's `listen ... ssl` address: the server alone (stream
/// has no names to choose by), built from its merged settings as an http server's is. `alpn`
/// is `ssl_alpn`'s list: empty, the handshake negotiates no protocol.
pub fn single(
    addr: ListenAddr,
    ssl: &SslConf,
    alpn: &[&[u8]],
    b: &mut Builder,
) -> Result<Arc<AddrTls>, Error> {
    let tls = Arc::new(build_server(0, ssl, None, b)?);
    if !tls.has_certificates() && !tls.reject_handshake {
        return Err(Error::new(
            "no \"ssl_certificate\" is defined for the \"listen ... ssl\" directive",
            None,
        ));
    }
    let no_protocols = tls.versions.is_empty();
    let mut servers = HashMap::new();
    if let Some(e) = entry(&tls.clone(), tls, no_protocols, alpn)? {
        servers.insert(0, e);
    }
    Ok(Arc::new(AddrTls {
        addr,
        candidates: AddrServers {
            servers: vec![0],
            default: 0,
            proxy_protocol: false,
            http2: false,
        },
        names: Arc::new(vec![SniNames {
            names: Vec::new(),
            regexes: Vec::new(),
        }]),
        servers,
        no_protocols,
    }))
}

/// The rustls configuration of a handshake on an address whose default server is `def` and
/// that SNI sent to `sni`, choosing among `alpn` (the server's order of preference; a client
/// that offers none of them is refused with `no_application_protocol`, as nginx's callback).
fn server_config(
    def: &ServerTls,
    sni: &ServerTls,
    resolver: Arc<dyn ResolvesServerCert>,
    alpn: &[&[u8]],
) -> Result<ServerConfig, error::Error> {
    let provider = CryptoProvider {
        cipher_suites: def.suites.clone(),
        kx_groups: def.groups.clone(),
        ..rustls::crypto::aws_lc_rs::default_provider()
    };
    let verifier: Arc<dyn rustls::server::danger::ClientCertVerifier> = match &sni.client_auth {
        Some(a) => a.clone(),
        None => super::verify::no_client_auth(),
    };
    let mut c = ServerConfig::builder_with_provider(Arc::new(provider))
        .with_protocol_versions(&def.versions)
        .map_err(|e| error::Error::tls(format!("SSL_CTX_new() failed ({e})")))?
        .with_client_cert_verifier(verifier)
        .with_cert_resolver(resolver);
    c.ignore_client_order = sni.prefer_server_ciphers;
    c.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
    c.session_storage = sni.session_storage.clone();
    match &sni.ticketer {
        Some(t) => c.ticketer = t.clone(),
        None => c.ticketer = Arc::new(NoTickets),
    }
    c.send_tls13_tickets = sni.tls13_tickets;
    if sni.early_data {
        c.max_early_data_size = MAX_EARLY_DATA;
    }
    Ok(c)
}

/// Tickets off: rustls then resumes TLSv1.3 by its stored sessions.
#[derive(Debug)]
struct NoTickets;

impl ProducesTickets for NoTickets {
    fn enabled(&self) -> bool {
        false
    }
    fn lifetime(&self) -> u32 {
        0
    }
    fn encrypt(&self, _: &[u8]) -> Option<Vec<u8>> {
        None
    }
    fn decrypt(&self, _: &[u8]) -> Option<Vec<u8>> {
        None
    }
}

/// What a server's stapling asks the responder through: its `resolver` and `resolver_timeout`.
pub type StaplingResolver = Option<(Arc<crate::resolver::Resolver>, std::time::Duration)>;

/// The stapling of one certificate (`name`, `pair`), or nginx's warning why there is none.
fn staple_for(
    name: &str,
    pair: &Arc<CertifiedKey>,
    ssl: &SslConf,
    trusted: &Arc<Vec<rustls::pki_types::CertificateDer<'static>>>,
    resolver: StaplingResolver,
) -> Result<Staple, error::Error> {
    let leaf = &pair.cert[0];
    let issuer = pair.cert[1..]
        .iter()
        .chain(trusted.iter())
        .find(|i| certs::issued_by(leaf, i))
        .ok_or_else(|| {
            error::Error::tls(format!(
                "\"ssl_stapling\" ignored, issuer certificate not found for certificate \"{name}\""
            ))
        })?;
    let url = ssl
        .stapling_responder
        .clone()
        .or_else(|| certs::ocsp_responder_url(leaf))
        .ok_or_else(|| {
            error::Error::tls(format!(
                "\"ssl_stapling\" ignored, no OCSP responder URL in the certificate \"{name}\""
            ))
        })?;
    let responder = Responder::parse(&url).map_err(|m| {
        m.context(|m| format!("\"ssl_stapling\" ignored, {m} in the certificate \"{name}\""))
    })?;
    let conf = StapleConf {
        responder,
        resolver,
        trusted: trusted.clone(),
        verify: ssl.stapling_verify.unwrap_or(false),
    };
    Staple::new(name.to_string(), pair.clone(), issuer, conf).ok_or_else(|| {
        error::Error::tls(format!(
            "\"ssl_stapling\" ignored, OCSP_cert_to_id() failed for certificate \"{name}\""
        ))
    })
}

fn build_server(
    index: usize,
    ssl: &SslConf,
    resolver: StaplingResolver,
    b: &mut Builder,
) -> Result<ServerTls, Error> {
    fn e(m: impl Into<String>) -> Error {
        Error::new(m, None)
    }
    let passwords = ssl.passwords.clone();
    let conf_prefix = b.conf_prefix.clone();
    let full = |name: &str| -> String { certs::display_name(name, &conf_prefix) };
    // Certificates: pairs by order; a certificate without its key is nginx's error.
    let certs_conf = ssl.certificates.as_deref().unwrap_or_default();
    let keys_conf = ssl.certificate_keys.as_deref().unwrap_or_default();
    if let Some(c) = certs_conf.get(keys_conf.len()) {
        return Err(e(format!(
            "no \"ssl_certificate_key\" is defined for certificate \"{}\"",
            c.value
        )));
    }
    let mut statics = Vec::new();
    let mut dynamics = Vec::new();
    for (c, k) in certs_conf.iter().zip(keys_conf) {
        let (ct, kt) = (
            Template::parse(&full(&c.value)).map_err(e)?,
            Template::parse(&full(&k.value)).map_err(e)?,
        );
        match (ct, kt) {
            (None, None) => statics.push((full(&c.value), full(&k.value))),
            (ct, kt) => dynamics.push((
                ct.unwrap_or_else(|| Template(vec![Part::Text(full(&c.value))])),
                kt.unwrap_or_else(|| Template(vec![Part::Text(full(&k.value))])),
            )),
        }
    }
    let mut pairs = Vec::new();
    for (c, k) in &statics {
        pairs.push(certs::load_pair(c, k, passwords.as_deref().map(Vec::as_slice)).map_err(e)?);
    }
    // Client certificates.
    let mode = ssl.verify_client();
    let trusted = match &ssl.trusted_certificate {
        Some(t) => certs::load_ca_file(&full(&t.value)).map_err(e)?,
        None => Vec::new(),
    };
    let crls = match &ssl.crl {
        Some(c) => certs::load_crl_file(&full(&c.value)).map_err(e)?,
        None => Vec::new(),
    };
    let client_auth = if mode == VerifyClient::Off {
        None
    } else {
        let hints = match &ssl.client_certificate {
            Some(c) => certs::load_ca_file(&full(&c.value)).map_err(e)?,
            None if mode == VerifyClient::OptionalNoCa => Vec::new(),
            None => {
                return Err(e(
                    "no ssl_client_certificate for ssl_verify_client".to_string()
                ))
            }
        };
        Some(Arc::new(
            ClientAuth::new(mode, &hints, &trusted, &crls, ssl.verify_depth()).map_err(e)?,
        ))
    };
    // Stapling from a file, or from the responder (nginx's `ngx_ssl_stapling`), or nginx's
    // warnings for what cannot be stapled.
    let mut staples = Vec::new();
    if ssl.stapling.as_ref().is_some_and(|s| s.value) {
        match &ssl.stapling_file {
            Some(f) => {
                let resp = certs::load_ocsp_response(&full(&f.value)).map_err(e)?;
                pairs = pairs
                    .into_iter()
                    .map(|p| {
                        let mut ck = (*p).clone();
                        ck.ocsp = Some(resp.clone());
                        Arc::new(ck)
                    })
                    .collect();
            }
            None => {
                let trusted = Arc::new(trusted.clone());
                for ((name, _), p) in statics.iter().zip(&pairs) {
                    match staple_for(name, p, ssl, &trusted, resolver.clone()) {
                        Ok(s) => staples.push(Some(Arc::new(s))),
                        // nginx logs it once the configuration is read: no place.
                        Err(message) => {
                            b.warn_unplaced(message);
                            staples.push(None);
                        }
                    }
                }
            }
        }
    }
    if let Some(d) = &ssl.dhparam {
        certs::check_dhparam(&full(&d.value)).map_err(e)?;
        b.warn(
            "\"ssl_dhparam\" is ignored: shoal (rustls) has no DHE cipher suites",
            &d.span,
        );
    }
    if let Some(o) = ssl
        .ocsp
        .as_ref()
        .filter(|o| o.value != super::conf::Ocsp::Off)
    {
        return Err(Error::new(
            "\"ssl_ocsp\" is not supported by shoal yet (it needs \"resolver\" to reach the responder)",
            Some(o.span.clone()),
        ));
    }
    // Protocols, ciphers, curves, then ssl_conf_command over them.
    let mut protocols = ssl.protocols();
    let mut cipher_string = ssl
        .ciphers
        .as_ref()
        .map(|c| c.value.clone())
        .unwrap_or_else(|| super::conf::defaults::CIPHERS.to_string());
    let mut curves = ssl
        .ecdh_curve
        .as_ref()
        .map(|c| c.value.clone())
        .unwrap_or_else(|| super::conf::defaults::ECDH_CURVE.to_string());
    let mut tls13_suites = ciphers::default_tls13_suites();
    let mut prefer = ssl.prefer_server_ciphers.unwrap_or(false);
    let mut tickets = ssl.session_tickets.unwrap_or(true);
    let mut tls13_tickets = 2;
    for cmd in ssl.conf_commands.as_deref().unwrap_or_default() {
        apply_conf_command(
            cmd,
            &mut protocols,
            &mut cipher_string,
            &mut curves,
            &mut tls13_suites,
            &mut prefer,
            &mut tickets,
            &mut tls13_tickets,
        )?;
    }
    let tls12_suites = ciphers::tls12_suites(&cipher_string).map_err(|c| {
        e(format!(
            "SSL_CTX_set_cipher_list(\"{cipher_string}\") failed (SSL: {})",
            c.openssl()
        ))
    })?;
    let groups = parse_groups(&curves).map_err(e)?;
    let mut versions = Vec::new();
    if protocols.tls13 && !tls13_suites.is_empty() {
        versions.push(&rustls::version::TLS13);
    }
    if protocols.tls12 {
        if tls12_suites.is_empty() {
            let span = ssl.ciphers.as_ref().map(|c| c.span.clone());
            if let Some(span) = span {
                b.warn(
                    format!("\"ssl_ciphers\" \"{cipher_string}\" selects no cipher shoal has for TLSv1.2: TLSv1.2 is off"),
                    &span,
                );
            }
        } else {
            versions.push(&rustls::version::TLS12);
        }
    }
    let mut suites = tls13_suites;
    suites.extend(tls12_suites);
    // Sessions.
    let timeout = ssl.session_timeout();
    let context = session_context(&pairs, &dynamics, mode);
    let cache = ssl
        .session_cache
        .as_ref()
        .map(|c| c.value.clone())
        .unwrap_or_default();
    let zone: Option<Arc<SessionZone>> = match (&cache.shared, cache.builtin) {
        (Some((name, size)), _) => Some(session::shared_zone(name, *size).map_err(e)?),
        (None, Some(n)) => Some(Arc::new(SessionZone::builtin(n).map_err(e)?)),
        (None, None) if ssl.early_data.unwrap_or(false) && !cache.off => {
            // 0-RTT needs sessions the server keeps (single use): an implicit builtin cache.
            Some(Arc::new(
                SessionZone::builtin(super::conf::defaults::BUILTIN_SESSIONS).map_err(e)?,
            ))
        }
        _ => None,
    };
    let session_storage: Arc<dyn rustls::server::StoresServerSessions> = match &zone {
        Some(z) if !cache.off => Arc::new(ZoneStore::new(z.clone(), context, timeout)),
        _ => Arc::new(NoServerSessionStorage {}),
    };
    let early_data = ssl.early_data.unwrap_or(false);
    let stores = zone.is_some() && !cache.off;
    let ticketer: Option<Arc<dyn ProducesTickets>> = if !tickets || (early_data && stores) {
        // rustls accepts 0-RTT only on sessions it stores (anti-replay): tickets then name
        // stored sessions instead of carrying them.
        None
    } else {
        let files = ssl.session_ticket_keys.as_deref().unwrap_or_default();
        if files.is_empty() {
            Some(Arc::new(match &zone {
                Some(z) if !z.name.is_empty() => Ticketer::for_zone(z, timeout),
                _ => Ticketer::new(vec![TicketKey::random()], timeout),
            }))
        } else {
            let mut keys = Vec::new();
            for f in files {
                keys.push(
                    TicketKey::from_file(&f.value)
                        .map_err(|m| Error::new(m, Some(f.span.clone())))?,
                );
            }
            Some(Arc::new(Ticketer::new(keys, timeout)))
        }
    };
    if ticketer.is_none() && !stores {
        tls13_tickets = 0;
    }
    let certs = if !dynamics.is_empty() {
        let cache = ssl
            .certificate_cache
            .flatten()
            .map(|c| (c, Mutex::new(HashMap::new())));
        Certs::Dynamic(DynamicCerts {
            pairs: dynamics,
            passwords,
            cache,
        })
    } else if pairs.is_empty() {
        Certs::None
    } else {
        Certs::Static(Arc::new(Pairs {
            keys: pairs,
            staples,
        }))
    };
    Ok(ServerTls {
        index,
        reject_handshake: ssl.reject_handshake.unwrap_or(false),
        buffer_size: ssl.buffer_size(),
        early_data,
        client_auth,
        certs,
        prefer_server_ciphers: prefer,
        session_storage,
        ticketer,
        tls13_tickets,
        versions,
        suites,
        groups,
    })
}

/// 8 bytes naming a server's sessions in a shared zone: its certificates and how it verifies
/// clients (a session is resumed only by the server, or a twin of it, that made it).
fn session_context(
    pairs: &[Arc<CertifiedKey>],
    dynamics: &[(Template, Template)],
    mode: VerifyClient,
) -> [u8; 8] {
    let mut ctx = aws_lc_rs::digest::Context::new(&aws_lc_rs::digest::SHA256);
    for p in pairs {
        for c in &p.cert {
            ctx.update(c);
        }
    }
    ctx.update(format!("{dynamics:?}{mode:?}").as_bytes());
    let d = ctx.finish();
    let mut out = [0u8; 8];
    out.copy_from_slice(&d.as_ref()[..8]);
    out
}
