//! The directives of nginx's `ngx_http_ssl_module`, read into [`SslConf`] (one per http block
//! and one per server) and merged http → server as nginx merges them.
//!
//! Setters only read and check values, in nginx's words; files named by directives are read
//! when the configuration is finished ([`super::finish`]), where nginx reads them too, so a
//! reload reads every certificate afresh. `ssl_password_file` is the exception: nginx reads it
//! at the directive, and so does this module.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use shoal_conf::{Directive, Error, Span};

use crate::conf::{
    directive_err, err, flag_arg, invalid_value, number_arg, parse_size, parse_time, set_once,
    size_arg, time_arg, Args, Builder, Command, Ctx, Scope,
};

const HS: Ctx = Ctx::HTTP.or(Ctx::SERVER);
/// The directives nginx's stream ssl module has too.
const HSS: Ctx = HS.or(Ctx::SS);

pub static DIRECTIVES: &[Command] = &[
    Command::new("ssl", HS, Args::Flag, set_ssl),
    Command::new("ssl_buffer_size", HS, Args::ONE, set_buffer_size),
    Command::new("ssl_certificate", HSS, Args::ONE, set_certificate),
    Command::new("ssl_certificate_key", HSS, Args::ONE, set_certificate_key),
    Command::new(
        "ssl_certificate_cache",
        HS,
        Args::Take(1, 3),
        set_certificate_cache,
    ),
    Command::new("ssl_ciphers", HSS, Args::ONE, set_ciphers),
    Command::new(
        "ssl_client_certificate",
        HSS,
        Args::ONE,
        set_client_certificate,
    ),
    Command::new("ssl_conf_command", HSS, Args::TWO, set_conf_command),
    Command::new("ssl_crl", HSS, Args::ONE, set_crl),
    Command::new("ssl_dhparam", HSS, Args::ONE, set_dhparam),
    Command::new("ssl_early_data", HS, Args::Flag, set_early_data),
    Command::new("ssl_ecdh_curve", HSS, Args::ONE, set_ecdh_curve),
    Command::new("ssl_ocsp", HS, Args::ONE, set_ocsp),
    Command::new("ssl_ocsp_cache", HS, Args::ONE, set_ocsp_cache),
    Command::new("ssl_ocsp_responder", HS, Args::ONE, set_ocsp_responder),
    Command::new("ssl_password_file", HSS, Args::ONE, set_password_file),
    Command::new("ssl_prefer_server_ciphers", HSS, Args::Flag, set_prefer),
    Command::new("ssl_protocols", HSS, Args::ONE_OR_MORE, set_protocols),
    Command::new("ssl_reject_handshake", HS, Args::Flag, set_reject),
    Command::new(
        "ssl_session_cache",
        HSS,
        Args::Take(1, 2),
        set_session_cache,
    ),
    Command::new("ssl_session_ticket_key", HSS, Args::ONE, set_ticket_key),
    Command::new("ssl_session_tickets", HSS, Args::Flag, set_tickets),
    Command::new("ssl_session_timeout", HSS, Args::ONE, set_session_timeout),
    Command::new("ssl_stapling", HS, Args::Flag, set_stapling),
    Command::new("ssl_stapling_file", HS, Args::ONE, set_stapling_file),
    Command::new(
        "ssl_stapling_responder",
        HS,
        Args::ONE,
        set_stapling_responder,
    ),
    Command::new("ssl_stapling_verify", HS, Args::Flag, set_stapling_verify),
    Command::new("ssl_trusted_certificate", HSS, Args::ONE, set_trusted),
    Command::new("ssl_verify_client", HSS, Args::ONE, set_verify_client),
    Command::new("ssl_verify_depth", HSS, Args::ONE, set_verify_depth),
];

/// A value from the configuration with the place it was written (for later messages).
#[derive(Clone, Debug)]
pub struct Located<T> {
    pub value: T,
    pub span: Span,
}

/// `ssl_protocols` as a set (nginx keeps SSLv2..TLSv1.3 as bits).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Protocols {
    pub tls12: bool,
    pub tls13: bool,
    /// SSLv2, SSLv3, TLSv1 or TLSv1.1 was named: accepted and not offered, as nginx on
    /// OpenSSL 3 at its default security level treats them.
    pub legacy: bool,
}

/// `ssl_verify_client`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum VerifyClient {
    Off,
    On,
    Optional,
    OptionalNoCa,
}

/// `ssl_session_cache`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SessionCacheConf {
    /// `off`: no session is resumed by id. `none` (nginx's default) is neither off nor a cache.
    pub off: bool,
    /// `builtin[:N]`: N sessions.
    pub builtin: Option<usize>,
    /// `shared:NAME:SIZE`.
    pub shared: Option<(String, usize)>,
}

/// `ssl_certificate_cache max=N [inactive=time] [valid=time]` (`None`: off).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CertCacheConf {
    pub max: usize,
    pub inactive: Duration,
    pub valid: Duration,
}

/// `ssl_ocsp on|off|leaf` (checking client certificates with a responder).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ocsp {
    Off,
    On,
    Leaf,
}

/// The ssl module's settings of one level (http or server); `None`: not written here.
#[derive(Clone, Debug, Default)]
pub struct SslConf {
    /// The obsolete `ssl on|off`, and where.
    pub enable: Option<Located<bool>>,
    pub buffer_size: Option<usize>,
    /// `ssl_certificate` lines of this level (nginx inherits the whole list or none).
    pub certificates: Option<Vec<Located<String>>>,
    pub certificate_keys: Option<Vec<Located<String>>>,
    pub certificate_cache: Option<Option<CertCacheConf>>,
    pub ciphers: Option<Located<String>>,
    pub client_certificate: Option<Located<String>>,
    pub conf_commands: Option<Vec<Located<(String, String)>>>,
    pub crl: Option<Located<String>>,
    pub dhparam: Option<Located<String>>,
    pub early_data: Option<bool>,
    pub ecdh_curve: Option<Located<String>>,
    pub ocsp: Option<Located<Ocsp>>,
    pub ocsp_cache: Option<String>,
    pub ocsp_responder: Option<String>,
    /// The passwords of `ssl_password_file`, read at the directive as nginx reads them.
    pub passwords: Option<Arc<Vec<String>>>,
    pub prefer_server_ciphers: Option<bool>,
    pub protocols: Option<Protocols>,
    pub reject_handshake: Option<bool>,
    pub session_cache: Option<Located<SessionCacheConf>>,
    pub session_ticket_keys: Option<Vec<Located<PathBuf>>>,
    pub session_tickets: Option<bool>,
    pub session_timeout: Option<Duration>,
    pub stapling: Option<Located<bool>>,
    pub stapling_file: Option<Located<String>>,
    pub stapling_responder: Option<String>,
    pub stapling_verify: Option<bool>,
    pub trusted_certificate: Option<Located<String>>,
    pub verify_client: Option<VerifyClient>,
    pub verify_depth: Option<u32>,
    /// The server's first `listen` (set by that directive): its file is the server block's,
    /// which nginx's `no "ssl_certificate" is defined ...` names with the block's line.
    pub listen_span: Option<Span>,
}

/// nginx's defaults, in one place.
pub mod defaults {
    use std::time::Duration;

    pub const BUFFER_SIZE: usize = 16 * 1024;
    pub const CIPHERS: &str = "HIGH:!aNULL:!MD5";
    pub const ECDH_CURVE: &str = "auto";
    pub const SESSION_TIMEOUT: Duration = Duration::from_secs(300);
    pub const VERIFY_DEPTH: u32 = 1;
    /// OpenSSL's built-in session cache size (`builtin` without a size).
    pub const BUILTIN_SESSIONS: usize = 20480;
}

macro_rules! inherit {
    ($child:ident, $parent:ident, $($field:ident),+) => {
        $( if $child.$field.is_none() { $child.$field.clone_from(&$parent.$field); } )+
    };
}

impl SslConf {
    /// Inheritance from the http level (nginx's `ngx_http_ssl_merge_srv_conf`): every value; a
    /// list (`ssl_certificate`, `ssl_certificate_key`, `ssl_conf_command`...) as a whole.
    pub fn merge(&mut self, parent: &SslConf) {
        inherit!(
            self,
            parent,
            enable,
            buffer_size,
            certificate_cache,
            ciphers,
            client_certificate,
            conf_commands,
            crl,
            dhparam,
            early_data,
            ecdh_curve,
            ocsp,
            ocsp_cache,
            ocsp_responder,
            passwords,
            prefer_server_ciphers,
            protocols,
            reject_handshake,
            session_cache,
            session_ticket_keys,
            session_tickets,
            session_timeout,
            stapling,
            stapling_file,
            stapling_responder,
            stapling_verify,
            trusted_certificate,
            verify_client,
            verify_depth
        );
        inherit!(self, parent, certificates, certificate_keys);
    }

    /// `ssl on` was written (for this server, after merge).
    pub fn enabled(&self) -> bool {
        self.enable.as_ref().is_some_and(|e| e.value)
    }

    pub fn buffer_size(&self) -> usize {
        self.buffer_size.unwrap_or(defaults::BUFFER_SIZE)
    }

    pub fn session_timeout(&self) -> Duration {
        self.session_timeout.unwrap_or(defaults::SESSION_TIMEOUT)
    }

    pub fn verify_client(&self) -> VerifyClient {
        self.verify_client.unwrap_or(VerifyClient::Off)
    }

    pub fn verify_depth(&self) -> u32 {
        self.verify_depth.unwrap_or(defaults::VERIFY_DEPTH)
    }

    /// nginx 1.22's default: `TLSv1 TLSv1.1 TLSv1.2` (TLSv1.3 joined the default in 1.23.4;
    /// Debian's nginx.conf names it). TLSv1 and TLSv1.1 are not offered (see [`Protocols`]).
    pub fn protocols(&self) -> Protocols {
        self.protocols.unwrap_or(Protocols {
            tls12: true,
            tls13: false,
            legacy: true,
        })
    }
}

/// The ssl settings of whatever level a directive is in.
fn conf<'a>(s: &'a mut Scope<'_>) -> &'a mut SslConf {
    match s {
        Scope::Http(h) => &mut h.ssl.conf,
        Scope::Server(srv) => &mut srv.ssl,
        Scope::Stream(st) => &mut st.srv.ssl,
        Scope::StreamServer(srv) => &mut srv.conf.ssl,
        _ => unreachable!(
            "the registry allows ssl directives in http, stream and their servers only"
        ),
    }
}

fn located<T>(value: T, d: &Directive) -> Located<T> {
    Located {
        value,
        span: d.span.clone(),
    }
}

fn arg(d: &Directive) -> String {
    d.args[0].value.clone()
}

fn set_ssl(b: &mut Builder, d: &Directive, s: &mut Scope<'_>) -> Result<(), Error> {
    b.warn(
        "the \"ssl\" directive is deprecated, use the \"listen ... ssl\" directive instead",
        &d.span,
    );
    set_once(&mut conf(s).enable, located(flag_arg(d), d), d)
}

fn set_buffer_size(_: &mut Builder, d: &Directive, s: &mut Scope<'_>) -> Result<(), Error> {
    let n = size_arg(d, 0)? as usize;
    set_once(&mut conf(s).buffer_size, n, d)
}

fn push<T>(list: &mut Option<Vec<Located<T>>>, value: T, d: &Directive) {
    list.get_or_insert_with(Vec::new).push(located(value, d));
}

fn set_certificate(_: &mut Builder, d: &Directive, s: &mut Scope<'_>) -> Result<(), Error> {
    push(&mut conf(s).certificates, arg(d), d);
    Ok(())
}

fn set_certificate_key(_: &mut Builder, d: &Directive, s: &mut Scope<'_>) -> Result<(), Error> {
    push(&mut conf(s).certificate_keys, arg(d), d);
    Ok(())
}

/// `ssl_certificate_cache off | max=N [inactive=time] [valid=time]` (nginx 1.27.4; defaults
/// inactive=10s, valid=60s).
fn set_certificate_cache(_: &mut Builder, d: &Directive, s: &mut Scope<'_>) -> Result<(), Error> {
    let c = conf(s);
    if c.certificate_cache.is_some() {
        return Err(crate::conf::duplicate(d));
    }
    c.certificate_cache = Some(parse_certificate_cache(d)?);
    Ok(())
}

/// The arguments of `ssl_certificate_cache` (and the proxy's `proxy_ssl_certificate_cache`):
/// `None` for `off`.
pub fn parse_certificate_cache(d: &Directive) -> Result<Option<CertCacheConf>, Error> {
    if d.args.len() == 1 && d.args[0].value == "off" {
        return Ok(None);
    }
    let mut cache = CertCacheConf {
        max: 0,
        inactive: Duration::from_secs(10),
        valid: Duration::from_secs(60),
    };
    for a in &d.args {
        let v = a.value.as_str();
        let bad = || err(d, format!("invalid parameter \"{v}\""));
        if let Some(n) = v.strip_prefix("max=") {
            cache.max = crate::conf::parse_number(n)
                .filter(|n| *n > 0)
                .ok_or_else(bad)? as usize;
        } else if let Some(t) = v.strip_prefix("inactive=") {
            cache.inactive = parse_time(t).ok_or_else(bad)?;
        } else if let Some(t) = v.strip_prefix("valid=") {
            cache.valid = parse_time(t).ok_or_else(bad)?;
        } else {
            return Err(bad());
        }
    }
    if cache.max == 0 {
        return Err(err(
            d,
            format!("\"{}\" must have \"max\" parameter", d.name),
        ));
    }
    Ok(Some(cache))
}

fn set_ciphers(_: &mut Builder, d: &Directive, s: &mut Scope<'_>) -> Result<(), Error> {
    set_once(&mut conf(s).ciphers, located(arg(d), d), d)
}

fn set_client_certificate(_: &mut Builder, d: &Directive, s: &mut Scope<'_>) -> Result<(), Error> {
    set_once(&mut conf(s).client_certificate, located(arg(d), d), d)
}

fn set_conf_command(_: &mut Builder, d: &Directive, s: &mut Scope<'_>) -> Result<(), Error> {
    let pair = (d.args[0].value.clone(), d.args[1].value.clone());
    push(&mut conf(s).conf_commands, pair, d);
    Ok(())
}

fn set_crl(_: &mut Builder, d: &Directive, s: &mut Scope<'_>) -> Result<(), Error> {
    set_once(&mut conf(s).crl, located(arg(d), d), d)
}

fn set_dhparam(_: &mut Builder, d: &Directive, s: &mut Scope<'_>) -> Result<(), Error> {
    set_once(&mut conf(s).dhparam, located(arg(d), d), d)
}

fn set_early_data(_: &mut Builder, d: &Directive, s: &mut Scope<'_>) -> Result<(), Error> {
    set_once(&mut conf(s).early_data, flag_arg(d), d)
}

fn set_ecdh_curve(_: &mut Builder, d: &Directive, s: &mut Scope<'_>) -> Result<(), Error> {
    set_once(&mut conf(s).ecdh_curve, located(arg(d), d), d)
}

fn set_ocsp(_: &mut Builder, d: &Directive, s: &mut Scope<'_>) -> Result<(), Error> {
    let v = match d.args[0].value.as_str() {
        "off" => Ocsp::Off,
        "on" => Ocsp::On,
        "leaf" => Ocsp::Leaf,
        other => return Err(invalid_value(d, other)),
    };
    set_once(&mut conf(s).ocsp, located(v, d), d)
}

/// `ssl_ocsp_cache off | [shared:]name:size`.
fn set_ocsp_cache(_: &mut Builder, d: &Directive, s: &mut Scope<'_>) -> Result<(), Error> {
    let v = arg(d);
    let ok = v == "off"
        || {
            let rest = v.strip_prefix("shared:").unwrap_or(&v);
            matches!(rest.split_once(':'), Some((name, size)) if !name.is_empty() && parse_size(size).is_some())
        };
    if !ok {
        return Err(err(d, format!("invalid OCSP cache \"{v}\"")));
    }
    set_once(&mut conf(s).ocsp_cache, v, d)
}

fn set_ocsp_responder(_: &mut Builder, d: &Directive, s: &mut Scope<'_>) -> Result<(), Error> {
    set_once(&mut conf(s).ocsp_responder, arg(d), d)
}

/// nginx reads the password file here: one password a line, tried in order.
fn set_password_file(b: &mut Builder, d: &Directive, s: &mut Scope<'_>) -> Result<(), Error> {
    if conf(s).passwords.is_some() {
        return Err(crate::conf::duplicate(d));
    }
    let path = conf_path(b, &d.args[0].value);
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
    conf(s).passwords = Some(Arc::new(passwords));
    Ok(())
}

fn set_prefer(_: &mut Builder, d: &Directive, s: &mut Scope<'_>) -> Result<(), Error> {
    set_once(&mut conf(s).prefer_server_ciphers, flag_arg(d), d)
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
    set_once(&mut conf(s).protocols, p, d)
}

fn set_reject(_: &mut Builder, d: &Directive, s: &mut Scope<'_>) -> Result<(), Error> {
    set_once(&mut conf(s).reject_handshake, flag_arg(d), d)
}

/// `ssl_session_cache off | none | [builtin[:size]] [shared:name:size]`, as nginx reads it:
/// of `off`, `none` and `builtin` the last one written counts; `off` turns a shared cache off too.
fn set_session_cache(_: &mut Builder, d: &Directive, s: &mut Scope<'_>) -> Result<(), Error> {
    let mut c = SessionCacheConf::default();
    for a in &d.args {
        let v = a.value.as_str();
        let invalid = || err(d, format!("invalid session cache \"{v}\""));
        match v {
            "off" => {
                c.off = true;
                c.builtin = None;
            }
            "none" => {
                c.off = false;
                c.builtin = None;
            }
            "builtin" => {
                c.off = false;
                c.builtin = Some(defaults::BUILTIN_SESSIONS);
            }
            _ => {
                if let Some(n) = v.strip_prefix("builtin:") {
                    let n = crate::conf::parse_number(n).ok_or_else(invalid)?;
                    c.off = false;
                    c.builtin = Some(n as usize);
                } else if let Some(rest) = v.strip_prefix("shared:") {
                    let (name, size) = rest.rsplit_once(':').ok_or_else(invalid)?;
                    if name.is_empty() {
                        return Err(invalid());
                    }
                    let size = parse_size(size).ok_or_else(invalid)? as usize;
                    if size < super::session::MIN_ZONE_SIZE {
                        return Err(err(d, format!("session cache \"{v}\" is too small")));
                    }
                    c.shared = Some((name.to_string(), size));
                } else {
                    return Err(invalid());
                }
            }
        }
    }
    set_once(&mut conf(s).session_cache, located(c, d), d)
}

fn set_ticket_key(b: &mut Builder, d: &Directive, s: &mut Scope<'_>) -> Result<(), Error> {
    let path = conf_path(b, &d.args[0].value);
    push(&mut conf(s).session_ticket_keys, path, d);
    Ok(())
}

fn set_tickets(_: &mut Builder, d: &Directive, s: &mut Scope<'_>) -> Result<(), Error> {
    set_once(&mut conf(s).session_tickets, flag_arg(d), d)
}

fn set_session_timeout(_: &mut Builder, d: &Directive, s: &mut Scope<'_>) -> Result<(), Error> {
    let t = time_arg(d, 0)?;
    set_once(&mut conf(s).session_timeout, t, d)
}

fn set_stapling(_: &mut Builder, d: &Directive, s: &mut Scope<'_>) -> Result<(), Error> {
    set_once(&mut conf(s).stapling, located(flag_arg(d), d), d)
}

fn set_stapling_file(_: &mut Builder, d: &Directive, s: &mut Scope<'_>) -> Result<(), Error> {
    set_once(&mut conf(s).stapling_file, located(arg(d), d), d)
}

fn set_stapling_responder(_: &mut Builder, d: &Directive, s: &mut Scope<'_>) -> Result<(), Error> {
    set_once(&mut conf(s).stapling_responder, arg(d), d)
}

fn set_stapling_verify(_: &mut Builder, d: &Directive, s: &mut Scope<'_>) -> Result<(), Error> {
    set_once(&mut conf(s).stapling_verify, flag_arg(d), d)
}

fn set_trusted(_: &mut Builder, d: &Directive, s: &mut Scope<'_>) -> Result<(), Error> {
    set_once(&mut conf(s).trusted_certificate, located(arg(d), d), d)
}

fn set_verify_client(_: &mut Builder, d: &Directive, s: &mut Scope<'_>) -> Result<(), Error> {
    let v = match d.args[0].value.as_str() {
        "off" => VerifyClient::Off,
        "on" => VerifyClient::On,
        "optional" => VerifyClient::Optional,
        "optional_no_ca" => VerifyClient::OptionalNoCa,
        other => return Err(invalid_value(d, other)),
    };
    set_once(&mut conf(s).verify_client, v, d)
}

fn set_verify_depth(_: &mut Builder, d: &Directive, s: &mut Scope<'_>) -> Result<(), Error> {
    let n = number_arg(d, 0)?;
    let n = u32::try_from(n).map_err(|_| directive_err(d, "invalid number"))?;
    set_once(&mut conf(s).verify_depth, n, d)
}

/// A file name of an ssl directive, resolved as nginx resolves them: against the directory of
/// the main configuration file (`ngx_conf_full_name(..., 1)`), not the prefix.
pub fn conf_path(b: &Builder, name: &str) -> PathBuf {
    let p = std::path::Path::new(name);
    if p.is_absolute() {
        p.to_path_buf()
    } else {
        b.conf_prefix.join(p)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn merge_takes_lists_whole() {
        let span = Span {
            file: None,
            line: 1,
        };
        let l = |s: &str| Located {
            value: s.to_string(),
            span: span.clone(),
        };
        let parent = SslConf {
            certificates: Some(vec![l("a.crt"), l("b.crt")]),
            certificate_keys: Some(vec![l("a.key"), l("b.key")]),
            session_timeout: Some(Duration::from_secs(60)),
            ..Default::default()
        };
        let mut child = SslConf {
            certificates: Some(vec![l("c.crt")]),
            ..Default::default()
        };
        child.merge(&parent);
        assert_eq!(child.certificates.as_ref().map(Vec::len), Some(1));
        // Keys are their own list, inherited apart from the certificates (as in nginx).
        assert_eq!(child.certificate_keys.as_ref().map(Vec::len), Some(2));
        assert_eq!(child.session_timeout(), Duration::from_secs(60));
        let mut other = SslConf::default();
        other.merge(&parent);
        assert_eq!(other.certificate_keys.as_ref().map(Vec::len), Some(2));
        assert_eq!(other.buffer_size(), 16384);
        assert!(other.protocols().legacy);
    }
}
