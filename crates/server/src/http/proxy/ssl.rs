//! https upstreams: the `proxy_ssl_*` directives and the client side of TLS toward an
//! upstream, as nginx's `ngx_http_proxy_module` and `ngx_http_upstream_ssl_*` do it.
//!
//! A location whose `proxy_pass` may speak https (an `https://` URL, or one with variables)
//! gets an [`UpstreamTls`] when the configuration is finished: a rustls `ClientConfig` from its
//! protocols, ciphers, client certificate and session cache, and what `proxy_ssl_verify` needs.
//! [`handshake`] runs on the worker after the TCP connection is made, bounded by
//! `proxy_connect_timeout`, and fails with nginx's lines (`upstream SSL certificate verify
//! error: (N:reason) while SSL handshaking to upstream`, `upstream SSL certificate does not match
//! "NAME"`).
//!
//! As nginx, the handshake itself takes any certificate (its signature over the handshake is
//! checked: the upstream holds the key) and `proxy_ssl_verify` judges the chain and the name
//! afterwards, with OpenSSL's codes. Sessions are resumed from a cache per location
//! (`proxy_ssl_session_reuse`); a kept-alive connection keeps its TLS session as it is.
//!
//! The stream proxy's `proxy_ssl_*` are these same directives and this same client: the
//! table is allowed in `stream` and its servers too, where the settings live in the stream
//! level ([`crate::stream::Level::proxy_ssl`]).
//!
//! `uwsgi_ssl_*` are the same directives and the same client, for `uwsgi_pass suwsgi://`
//! (their settings in [`crate::http::uwsgi::UwsgiLoc::ssl`]).

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, OnceLock};

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::Resumption;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{ClientConfig, DigitallySignedStruct, SignatureScheme};
use shoal_conf::{Directive, Error};

use crate::conf::{
    directive_err, err, flag_arg, invalid_value, merge, number_arg, set_once, Args, Builder,
    Command, Ctx, Scope,
};
use crate::error;
use crate::tls::conf::{Located, Protocols, VerifyClient};
use crate::tls::verify::ClientAuth;
use crate::tls::{certs, ciphers, TlsConn};
use crate::variables::{Template, Vars};

/// http, server, location, and stream's stream and server levels.
const HSL: Ctx = Ctx::HSL.or(Ctx::SS);

/// The `*_ssl_*` directives of a module whose upstreams may speak TLS (`proxy`, `grpc`,
/// `uwsgi`): one
/// implementation, the settings found by the directive's prefix.
macro_rules! ssl_directives {
    ($p:literal, $ctx:expr) => {
        &[
            Command::new(
                concat!($p, "_ssl_certificate"),
                $ctx,
                Args::ONE,
                set_certificate,
            ),
            Command::new(
                concat!($p, "_ssl_certificate_key"),
                $ctx,
                Args::ONE,
                set_key,
            ),
            Command::new(
                concat!($p, "_ssl_certificate_cache"),
                $ctx,
                Args::Take(1, 3),
                set_certificate_cache,
            ),
            Command::new(concat!($p, "_ssl_ciphers"), $ctx, Args::ONE, set_ciphers),
            Command::new(
                concat!($p, "_ssl_conf_command"),
                $ctx,
                Args::TWO,
                set_conf_command,
            ),
            Command::new(concat!($p, "_ssl_crl"), $ctx, Args::ONE, set_crl),
            Command::new(concat!($p, "_ssl_name"), $ctx, Args::ONE, set_name),
            Command::new(
                concat!($p, "_ssl_password_file"),
                $ctx,
                Args::ONE,
                set_password_file,
            ),
            Command::new(
                concat!($p, "_ssl_protocols"),
                $ctx,
                Args::ONE_OR_MORE,
                set_protocols,
            ),
            Command::new(
                concat!($p, "_ssl_server_name"),
                $ctx,
                Args::Flag,
                set_server_name,
            ),
            Command::new(
                concat!($p, "_ssl_session_reuse"),
                $ctx,
                Args::Flag,
                set_session_reuse,
            ),
            Command::new(
                concat!($p, "_ssl_trusted_certificate"),
                $ctx,
                Args::ONE,
                set_trusted,
            ),
            Command::new(concat!($p, "_ssl_verify"), $ctx, Args::Flag, set_verify),
            Command::new(
                concat!($p, "_ssl_verify_depth"),
                $ctx,
                Args::ONE,
                set_verify_depth,
            ),
        ]
    };
}

/// `proxy_ssl_*`.
pub static DIRECTIVES: &[Command] = ssl_directives!("proxy", HSL);

/// `grpc_ssl_*` (for `grpcs://` upstreams).
pub static GRPC_DIRECTIVES: &[Command] = ssl_directives!("grpc", Ctx::HSL);

/// `uwsgi_ssl_*` (for `suwsgi://` upstreams).
pub static UWSGI_DIRECTIVES: &[Command] = ssl_directives!("uwsgi", Ctx::HSL);

/// The `proxy_ssl_*` settings of one level; `None`: not written here.
#[derive(Clone, Debug, Default)]
pub struct ProxySsl {
    /// As written (a name with variables is read at each handshake).
    pub certificate: Option<Located<String>>,
    pub certificate_key: Option<Located<String>>,
    /// `proxy_ssl_certificate_cache` (nginx 1.27.4): `Some(None)` is `off`, the default.
    pub certificate_cache: Option<Option<crate::tls::conf::CertCacheConf>>,
    pub ciphers: Option<Located<String>>,
    pub conf_commands: Option<Vec<Located<(String, String)>>>,
    /// Full paths (resolved as nginx resolves them, against the configuration's directory).
    pub crl: Option<Located<PathBuf>>,
    pub name: Option<Template>,
    pub passwords: Option<Arc<Vec<String>>>,
    pub protocols: Option<Protocols>,
    pub server_name: Option<bool>,
    pub session_reuse: Option<bool>,
    pub trusted: Option<Located<PathBuf>>,
    pub verify: Option<bool>,
    pub verify_depth: Option<u32>,
    /// The configuration's directory, for certificate names with variables.
    pub conf_prefix: Option<PathBuf>,
    /// What a handshake needs, built when the configuration is finished (a location that may
    /// proxy to https only).
    pub built: OnceLock<Arc<UpstreamTls>>,
}

impl ProxySsl {
    pub fn merge(&mut self, parent: &ProxySsl) {
        merge(&mut self.certificate, &parent.certificate);
        merge(&mut self.certificate_key, &parent.certificate_key);
        merge(&mut self.certificate_cache, &parent.certificate_cache);
        merge(&mut self.ciphers, &parent.ciphers);
        merge(&mut self.conf_commands, &parent.conf_commands);
        merge(&mut self.crl, &parent.crl);
        merge(&mut self.name, &parent.name);
        merge(&mut self.passwords, &parent.passwords);
        merge(&mut self.protocols, &parent.protocols);
        merge(&mut self.server_name, &parent.server_name);
        merge(&mut self.session_reuse, &parent.session_reuse);
        merge(&mut self.trusted, &parent.trusted);
        merge(&mut self.verify, &parent.verify);
        merge(&mut self.verify_depth, &parent.verify_depth);
        merge(&mut self.conf_prefix, &parent.conf_prefix);
    }
}

/// The settings the directive `d` sets: stream's `proxy_ssl_*`, or an http location's
/// `grpc_ssl_*`, `uwsgi_ssl_*` or `proxy_ssl_*`.
fn ssl<'a>(s: &'a mut Scope<'_>, d: &Directive) -> &'a mut ProxySsl {
    if matches!(s, Scope::Stream(_) | Scope::StreamServer(_)) {
        let l = crate::stream::level(s).expect("a stream scope has a level");
        return &mut l.proxy_ssl;
    }
    let lc = crate::http::loc_conf(s);
    if d.name.starts_with("grpc_") {
        &mut lc.m.grpc.ssl
    } else if d.name.starts_with("uwsgi_") {
        &mut lc.m.uwsgi.ssl
    } else {
        &mut lc.proxy.ssl
    }
}

fn full_path(b: &Builder, name: &str) -> PathBuf {
    crate::tls::conf::conf_path(b, name)
}

fn located<T>(value: T, d: &Directive) -> Located<T> {
    Located {
        value,
        span: d.span.clone(),
    }
}

fn set_certificate(b: &mut Builder, d: &Directive, s: &mut Scope<'_>) -> Result<(), Error> {
    Template::compile(&d.args[0].value).map_err(|m| err(d, m))?;
    let c = ssl(s, d);
    c.conf_prefix = Some(b.conf_prefix.clone());
    set_once(&mut c.certificate, located(d.args[0].value.clone(), d), d)
}

fn set_key(b: &mut Builder, d: &Directive, s: &mut Scope<'_>) -> Result<(), Error> {
    Template::compile(&d.args[0].value).map_err(|m| err(d, m))?;
    let c = ssl(s, d);
    c.conf_prefix = Some(b.conf_prefix.clone());
    set_once(
        &mut c.certificate_key,
        located(d.args[0].value.clone(), d),
        d,
    )
}

fn set_certificate_cache(_: &mut Builder, d: &Directive, s: &mut Scope<'_>) -> Result<(), Error> {
    let c = crate::tls::conf::parse_certificate_cache(d)?;
    set_once(&mut ssl(s, d).certificate_cache, c, d)
}

fn set_ciphers(_: &mut Builder, d: &Directive, s: &mut Scope<'_>) -> Result<(), Error> {
    set_once(
        &mut ssl(s, d).ciphers,
        located(d.args[0].value.clone(), d),
        d,
    )
}

fn set_conf_command(_: &mut Builder, d: &Directive, s: &mut Scope<'_>) -> Result<(), Error> {
    let pair = (d.args[0].value.clone(), d.args[1].value.clone());
    ssl(s, d)
        .conf_commands
        .get_or_insert_with(Vec::new)
        .push(located(pair, d));
    Ok(())
}

fn set_crl(b: &mut Builder, d: &Directive, s: &mut Scope<'_>) -> Result<(), Error> {
    let p = full_path(b, &d.args[0].value);
    set_once(&mut ssl(s, d).crl, located(p, d), d)
}

fn set_name(_: &mut Builder, d: &Directive, s: &mut Scope<'_>) -> Result<(), Error> {
    let t = Template::compile(&d.args[0].value).map_err(|m| err(d, m))?;
    set_once(&mut ssl(s, d).name, t, d)
}

/// nginx reads the file at the directive: one password a line, tried in order.
fn set_password_file(b: &mut Builder, d: &Directive, s: &mut Scope<'_>) -> Result<(), Error> {
    if ssl(s, d).passwords.is_some() {
        return Err(crate::conf::duplicate(d));
    }
    let path = full_path(b, &d.args[0].value);
    let text = std::fs::read(&path).map_err(|e| {
        err(
            d,
            format!(
                "open() \"{}\" failed {}",
                path.display(),
                shoal_conf::os_error(&e)
            ),
        )
    })?;
    let passwords: Vec<String> = text
        .split(|&c| c == b'\n')
        .map(|l| String::from_utf8_lossy(l.strip_suffix(b"\r").unwrap_or(l)).into_owned())
        .filter(|l| !l.is_empty())
        .collect();
    if passwords.is_empty() {
        return Err(err(
            d,
            format!("empty password file \"{}\"", path.display()),
        ));
    }
    ssl(s, d).passwords = Some(Arc::new(passwords));
    Ok(())
}

fn set_protocols(_: &mut Builder, d: &Directive, s: &mut Scope<'_>) -> Result<(), Error> {
    let mut p = Protocols::default();
    for a in &d.args {
        match a.value.as_str() {
            "SSLv2" | "SSLv3" | "TLSv1" | "TLSv1.1" => p.legacy = true,
            "TLSv1.2" => p.tls12 = true,
            "TLSv1.3" => p.tls13 = true,
            other => return Err(invalid_value(d, other)),
        }
    }
    set_once(&mut ssl(s, d).protocols, p, d)
}

fn set_server_name(_: &mut Builder, d: &Directive, s: &mut Scope<'_>) -> Result<(), Error> {
    set_once(&mut ssl(s, d).server_name, flag_arg(d), d)
}

fn set_session_reuse(_: &mut Builder, d: &Directive, s: &mut Scope<'_>) -> Result<(), Error> {
    set_once(&mut ssl(s, d).session_reuse, flag_arg(d), d)
}

fn set_trusted(b: &mut Builder, d: &Directive, s: &mut Scope<'_>) -> Result<(), Error> {
    let p = full_path(b, &d.args[0].value);
    set_once(&mut ssl(s, d).trusted, located(p, d), d)
}

fn set_verify(_: &mut Builder, d: &Directive, s: &mut Scope<'_>) -> Result<(), Error> {
    set_once(&mut ssl(s, d).verify, flag_arg(d), d)
}

fn set_verify_depth(_: &mut Builder, d: &Directive, s: &mut Scope<'_>) -> Result<(), Error> {
    let n = number_arg(d, 0)?;
    let n = u32::try_from(n).map_err(|_| directive_err(d, "invalid number"))?;
    set_once(&mut ssl(s, d).verify_depth, n, d)
}

// ---------------------------------------------------------------------------------------------
// Built once per location

/// What a location's handshakes with its https upstreams need.
#[derive(Debug)]
pub struct UpstreamTls {
    /// The client configuration, with the static client certificate if any.
    config: Arc<ClientConfig>,
    /// `proxy_ssl_certificate` with variables: the names, and configurations made for the
    /// pairs met so far (by their evaluated names).
    dynamic: Option<Dynamic>,
    /// `proxy_ssl_verify on`: the anchors, CRLs and depth that judge the upstream's chain.
    verify: Option<ClientAuth>,
    name: Option<Template>,
}

#[derive(Debug)]
struct Dynamic {
    cert: Template,
    key: Template,
    prefix: PathBuf,
    passwords: Option<Arc<Vec<String>>>,
    /// A copy of the location's configuration without a client certificate.
    base: ClientConfig,
    /// `proxy_ssl_certificate_cache`; without it (nginx's default) the files are read at
    /// every handshake.
    cache: Option<(crate::tls::conf::CertCacheConf, Mutex<MadeCache>)>,
}

/// The configurations made, by (certificate, key) name.
type MadeCache = HashMap<(String, String), Made>;

/// A configuration made for one pair of certificate names, kept by the cache.
#[derive(Debug)]
struct Made {
    config: Arc<ClientConfig>,
    loaded: std::time::Instant,
    used: std::time::Instant,
}

/// Builds the location's [`UpstreamTls`] (nginx's `ngx_http_proxy_set_ssl`), once; `prefix`
/// names the module's directives in errors (`proxy`, `grpc`, `uwsgi`), `alpn` the protocols
/// offered (gRPC's `h2`; none for the proxy and uwsgi).
pub fn build(ssl: &ProxySsl, prefix: &str, alpn: &[&[u8]]) -> Result<(), Error> {
    if ssl.built.get().is_some() {
        return Ok(());
    }
    let built = make(ssl, prefix, alpn)?;
    let _ = ssl.built.set(Arc::new(built));
    Ok(())
}

fn make(ssl: &ProxySsl, prefix: &str, alpn: &[&[u8]]) -> Result<UpstreamTls, Error> {
    fn e(m: impl Into<String>, span: Option<&shoal_conf::Span>) -> Error {
        Error::new(m, span.cloned())
    }
    // nginx 1.22: `TLSv1 TLSv1.1 TLSv1.2`, `DEFAULT`.
    let mut protocols = ssl.protocols.unwrap_or(Protocols {
        tls12: true,
        tls13: false,
        legacy: true,
    });
    let mut cipher_string = ssl
        .ciphers
        .as_ref()
        .map_or_else(|| "DEFAULT".to_string(), |c| c.value.clone());
    let mut curves = "auto".to_string();
    let mut tls13_suites = ciphers::default_tls13_suites();
    let (mut prefer, mut tickets, mut tls13_tickets) = (false, true, 0usize);
    for cmd in ssl.conf_commands.as_deref().unwrap_or_default() {
        crate::tls::openssl_conf_command(
            cmd,
            &mut protocols,
            &mut cipher_string,
            &mut curves,
            &mut tls13_suites,
            &mut prefer,
            &mut tickets,
            &mut tls13_tickets,
        )
        .map_err(|mut e| {
            // The command came from this module's directive.
            if e.message.starts_with("\"ssl_conf_command ") {
                e.message.insert_str(1, "proxy_");
            }
            e
        })?;
    }
    let span = ssl.ciphers.as_ref().map(|c| &c.span);
    let tls12_suites = ciphers::tls12_suites(&cipher_string).map_err(|c| {
        e(
            format!(
                "SSL_CTX_set_cipher_list(\"{cipher_string}\") failed (SSL: {})",
                c.openssl()
            ),
            span,
        )
    })?;
    let groups = crate::tls::parse_groups(&curves).map_err(|m| e(m, None))?;
    let mut versions = Vec::new();
    if protocols.tls13 && !tls13_suites.is_empty() {
        versions.push(&rustls::version::TLS13);
    }
    if protocols.tls12 && !tls12_suites.is_empty() {
        versions.push(&rustls::version::TLS12);
    }
    let mut suites = tls13_suites;
    suites.extend(tls12_suites);
    let provider = rustls::crypto::CryptoProvider {
        cipher_suites: suites,
        kx_groups: groups,
        ..rustls::crypto::aws_lc_rs::default_provider()
    };
    let algs = provider.signature_verification_algorithms;
    let builder = ClientConfig::builder_with_provider(Arc::new(provider))
        .with_protocol_versions(&versions)
        .map_err(|err| e(format!("SSL_CTX_new() failed ({err})"), None))?
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(AnyCertificate(algs)));
    // Verification: nginx wants the trusted certificates then.
    let verify = if ssl.verify.unwrap_or(false) {
        let Some(trusted) = &ssl.trusted else {
            return Err(Error::new(
                format!("no {prefix}_ssl_trusted_certificate for {prefix}_ssl_verify"),
                None,
            ));
        };
        let name = trusted.value.display().to_string();
        let anchors = certs::load_ca_file(&name).map_err(|m| e(m, Some(&trusted.span)))?;
        let crls = match &ssl.crl {
            Some(c) => certs::load_crl_file(&c.value.display().to_string())
                .map_err(|m| e(m, Some(&c.span)))?,
            None => Vec::new(),
        };
        let depth = ssl.verify_depth.unwrap_or(1);
        Some(
            ClientAuth::new(VerifyClient::On, &[], &anchors, &crls, depth)
                .map_err(|m| e(m, Some(&trusted.span)))?,
        )
    } else {
        None
    };
    let resumption = if ssl.session_reuse.unwrap_or(true) {
        Resumption::in_memory_sessions(256)
    } else {
        Resumption::disabled()
    };
    let finish = |mut c: ClientConfig| {
        c.resumption = resumption.clone();
        c.enable_sni = ssl.server_name.unwrap_or(false);
        c.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
        c
    };
    let (config, dynamic) = match (&ssl.certificate, &ssl.certificate_key) {
        (None, _) => (finish(builder.with_no_client_auth()), None),
        (Some(cert), None) => {
            return Err(e(
                format!(
                    "no \"{prefix}_ssl_certificate_key\" is defined for certificate \"{}\"",
                    cert.value
                ),
                Some(&cert.span),
            ))
        }
        (Some(cert), Some(key)) => {
            let compile =
                |l: &Located<String>| Template::compile(&l.value).map_err(|m| e(m, Some(&l.span)));
            let (cert_t, key_t) = (compile(cert)?, compile(key)?);
            let prefix = ssl.conf_prefix.clone().unwrap_or_default();
            if cert_t.is_static() && key_t.is_static() {
                let ck = certified_key(&cert.value, &key.value, &prefix, ssl.passwords.as_deref())
                    .map_err(|m| e(m, Some(&cert.span)))?;
                let c = builder.with_client_cert_resolver(Arc::new(OneCertificate(ck)));
                (finish(c), None)
            } else {
                let base = finish(builder.with_no_client_auth());
                (
                    base.clone(),
                    Some(Dynamic {
                        cert: cert_t,
                        key: key_t,
                        prefix,
                        passwords: ssl.passwords.clone(),
                        base,
                        cache: ssl
                            .certificate_cache
                            .flatten()
                            .map(|c| (c, Mutex::new(HashMap::new()))),
                    }),
                )
            }
        }
    };
    Ok(UpstreamTls {
        config: Arc::new(config),
        dynamic,
        verify,
        name: ssl.name.clone(),
    })
}

/// A client certificate and its key, named as written (relative names against the
/// configuration's directory), checked to belong together.
fn certified_key(
    cert: &str,
    key: &str,
    prefix: &std::path::Path,
    passwords: Option<&Vec<String>>,
) -> Result<Arc<rustls::sign::CertifiedKey>, error::Error> {
    let full = |n: &str| {
        if n.starts_with("data:") || std::path::Path::new(n).is_absolute() {
            n.to_string()
        } else {
            prefix.join(n).display().to_string()
        }
    };
    let chain = certs::load_certificate(&full(cert))?;
    let der = certs::load_key(&full(key), passwords.map(|v| v.as_slice()))?;
    let signer = rustls::crypto::aws_lc_rs::sign::any_supported_type(&der).map_err(|_| {
        error::Error::tls(format!(
            "cannot load certificate key \"{key}\": PEM_read_bio_PrivateKey() failed (SSL: error:1E08010C:DECODER routines::unsupported)"
        ))
    })?;
    let ck = rustls::sign::CertifiedKey::new(chain, signer);
    // A certificate rustls cannot read (X.509 v1) is OpenSSL's to judge: only a mismatch is
    // an error here.
    if let Err(rustls::Error::InconsistentKeys(_)) = ck.keys_match() {
        return Err(error::Error::tls(format!(
            "SSL_use_PrivateKey(\"{key}\") failed (SSL: error:05800074:x509 certificate routines::key values mismatch)"
        )));
    }
    Ok(Arc::new(ck))
}

impl UpstreamTls {
    /// The configuration for a handshake, its client certificate chosen now when the names
    /// have variables.
    fn config_for(&self, vars: &Vars<'_>) -> Result<Arc<ClientConfig>, error::Error> {
        let Some(d) = &self.dynamic else {
            return Ok(self.config.clone());
        };
        let names = (vars.eval(&d.cert), vars.eval(&d.key));
        let make = |names: &(String, String)| -> Result<Arc<ClientConfig>, error::Error> {
            let ck = certified_key(&names.0, &names.1, &d.prefix, d.passwords.as_deref())?;
            let mut c = d.base.clone();
            c.client_auth_cert_resolver = Arc::new(OneCertificate(ck));
            Ok(Arc::new(c))
        };
        let Some((conf, cache)) = &d.cache else {
            return make(&names);
        };
        let now = std::time::Instant::now();
        if let Some(m) = cache
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get_mut(&names)
            .filter(|m| now.duration_since(m.loaded) < conf.valid)
        {
            m.used = now;
            return Ok(m.config.clone());
        }
        let config = make(&names)?;
        let mut map = cache.lock().unwrap_or_else(|e| e.into_inner());
        map.retain(|_, m| now.duration_since(m.used) < conf.inactive);
        if map.len() >= conf.max {
            if let Some(oldest) = map
                .iter()
                .min_by_key(|(_, m)| m.used)
                .map(|(k, _)| k.clone())
            {
                map.remove(&oldest);
            }
        }
        map.insert(
            names,
            Made {
                config: config.clone(),
                loaded: now,
                used: now,
            },
        );
        Ok(config)
    }
}

/// The name a handshake uses (`proxy_ssl_name`, else the `proxy_pass` host), without a port
/// (nginx strips it: the name may come from `$proxy_host` or `$http_host`).
fn ssl_name(tls: &UpstreamTls, host: &str, vars: &Vars<'_>) -> String {
    let name = match &tls.name {
        Some(t) => vars.eval(t),
        None => host.to_string(),
    };
    let end = if let Some(rest) = name.strip_prefix('[') {
        rest.find(']').map_or(name.len(), |i| i + 2)
    } else {
        0
    };
    match name[end..].find(':') {
        Some(i) => name[..end + i].to_string(),
        None => name,
    }
}

/// The TLS handshake with an upstream on `tcp` (the caller bounds it by
/// `proxy_connect_timeout`), and `proxy_ssl_verify`'s judgement. The error is nginx's line
/// before its context.
pub async fn handshake(
    tcp: tokio::net::TcpStream,
    tls: &UpstreamTls,
    host: &str,
    vars: &Vars<'_>,
) -> Result<TlsConn, error::Error> {
    let name = ssl_name(tls, host, vars);
    let bare = name.trim_start_matches('[').trim_end_matches(']');
    // As nginx: no SNI for an address (RFC 6066), nor without `proxy_ssl_server_name on`;
    // a name rustls cannot take as a DNS name (an upstream block's `backend_1`) goes as the
    // peer's address, which sends none either.
    let server_name: ServerName<'static> = match bare.parse::<std::net::IpAddr>() {
        Ok(ip) => ServerName::IpAddress(ip.into()),
        Err(_) => match ServerName::try_from(bare.to_string()) {
            Ok(n) => n,
            // A unix socket (`unix:/path`) has no IP address: any address sends no SNI.
            Err(_) => ServerName::IpAddress(
                tcp.peer_addr()
                    .map_or(std::net::Ipv4Addr::LOCALHOST.into(), |a| a.ip())
                    .into(),
            ),
        },
    };
    let config = tls
        .config_for(vars)
        .map_err(|m| m.context(|m| format!("{m} while SSL handshaking to upstream")))?;
    let conn = rustls::ClientConnection::new(config, server_name.clone()).map_err(|e| {
        error::Error::tls(format!(
            "SSL_new() failed ({e}) while SSL handshaking to upstream"
        ))
    })?;
    let conn = TlsConn::connect(tcp, conn).await.map_err(|e| {
        error::Error::tls(format!("{} while SSL handshaking to upstream", e.message))
    })?;
    if let Some(v) = &tls.verify {
        let chain = conn.with_connection(|c| c.peer_certificates().map(<[_]>::to_vec));
        let chain = chain.unwrap_or_default();
        let verdict = v.verify_server(&chain);
        if !verdict.is_ok() {
            return Err(error::Error::tls(format!(
                "upstream SSL certificate verify error: ({}:{}) while SSL handshaking to upstream",
                verdict.code, verdict.reason
            )));
        }
        let matches = chain.first().is_some_and(|leaf| {
            webpki::EndEntityCert::try_from(leaf)
                .is_ok_and(|ee| ee.verify_is_valid_for_subject_name(&server_name).is_ok())
        });
        if !matches {
            return Err(error::Error::tls(format!(
                "upstream SSL certificate does not match \"{name}\" while SSL handshaking to upstream"
            )));
        }
    }
    Ok(conn)
}

/// A client certificate read for one pair of names.
#[derive(Debug)]
struct OneCertificate(Arc<rustls::sign::CertifiedKey>);

impl rustls::client::ResolvesClientCert for OneCertificate {
    fn resolve(
        &self,
        _root_hint_subjects: &[&[u8]],
        _sigschemes: &[SignatureScheme],
    ) -> Option<Arc<rustls::sign::CertifiedKey>> {
        Some(self.0.clone())
    }

    fn has_certs(&self) -> bool {
        true
    }
}

/// nginx's verify callback: every chain passes the handshake (`proxy_ssl_verify` judges it
/// after); the signature over the handshake is checked, so the upstream holds the key.
#[derive(Debug)]
struct AnyCertificate(rustls::crypto::WebPkiSupportedAlgorithms);

impl ServerCertVerifier for AnyCertificate {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.0)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.0)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.supported_schemes()
    }
}
