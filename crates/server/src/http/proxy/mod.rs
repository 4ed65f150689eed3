//! nginx's proxy module: `proxy_pass` and the `proxy_*` directives that shape the request sent
//! upstream and the answer passed back.
//!
//! - [`ProxyLoc`]: the directives, merged down like every location-level setting.
//! - [`request`]: the request line and headers sent upstream (nginx's `create_request`).
//! - [`handler`]: one request's exchange: choose a peer, connect (or reuse a kept-alive
//!   connection), send, read the head, try the next peer when `proxy_next_upstream` says so.
//! - [`body`]: the answer's body, read from the upstream while it is written to the client.
//!
//! Runs on the worker; everything waits on sockets, nothing blocks.

pub mod answer;
pub mod body;
pub mod handler;
pub mod parse;
pub mod relay;
pub mod request;
pub mod ssl;

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use shoal_conf::{Directive, Error};

use super::location::Match;
use super::{loc_conf, LocConf};
use crate::conf::{
    directive_err, err, flag_arg, invalid_value, merge, set_once, size_arg, time_arg, Args,
    Builder, Command, Ctx, Scope,
};
use crate::upstream::conf::{split_host_port, UpstreamConf};
use crate::variables::Template;

const HSL: Ctx = Ctx::HSL;

pub static DIRECTIVES: &[Command] = &[
    Command::new(
        "proxy_pass",
        Ctx::LOCATION.or(Ctx::LIF).or(Ctx::LMT),
        Args::ONE,
        set_proxy_pass,
    ),
    Command::new("proxy_set_header", HSL, Args::TWO, set_set_header),
    Command::new("proxy_http_version", HSL, Args::ONE, set_http_version),
    Command::new(
        "proxy_pass_request_headers",
        HSL,
        Args::Flag,
        set_pass_request_headers,
    ),
    Command::new(
        "proxy_pass_request_body",
        HSL,
        Args::Flag,
        set_pass_request_body,
    ),
    Command::new("proxy_set_body", HSL, Args::ONE, set_set_body),
    Command::new("proxy_method", HSL, Args::ONE, set_method),
    Command::new("proxy_hide_header", HSL, Args::ONE, set_hide_header),
    Command::new("proxy_pass_header", HSL, Args::ONE, set_pass_header),
    Command::new(
        "proxy_ignore_headers",
        HSL,
        Args::ONE_OR_MORE,
        set_ignore_headers,
    ),
    Command::new("proxy_redirect", HSL, Args::Take(1, 2), set_redirect),
    Command::new("proxy_buffering", HSL, Args::Flag, set_buffering),
    Command::new("proxy_limit_rate", HSL, Args::ONE, set_limit_rate),
    Command::new("proxy_force_ranges", HSL, Args::Flag, set_force_ranges),
    Command::new(
        "proxy_request_buffering",
        HSL,
        Args::Flag,
        set_request_buffering,
    ),
    Command::new("proxy_buffers", HSL, Args::TWO, set_buffers),
    Command::new("proxy_buffer_size", HSL, Args::ONE, set_buffer_size),
    Command::new(
        "proxy_busy_buffers_size",
        HSL,
        Args::ONE,
        set_busy_buffers_size,
    ),
    Command::new(
        "proxy_max_temp_file_size",
        HSL,
        Args::ONE,
        set_max_temp_file_size,
    ),
    Command::new(
        "proxy_temp_file_write_size",
        HSL,
        Args::ONE,
        set_temp_file_write_size,
    ),
    Command::new("proxy_temp_path", HSL, Args::Take(1, 4), set_temp_path),
    Command::new("proxy_connect_timeout", HSL, Args::ONE, set_connect_timeout),
    Command::new("proxy_send_timeout", HSL, Args::ONE, set_send_timeout),
    Command::new("proxy_read_timeout", HSL, Args::ONE, set_read_timeout),
    Command::new(
        "proxy_next_upstream",
        HSL,
        Args::ONE_OR_MORE,
        set_next_upstream,
    ),
    Command::new(
        "proxy_next_upstream_tries",
        HSL,
        Args::ONE,
        set_next_upstream_tries,
    ),
    Command::new(
        "proxy_next_upstream_timeout",
        HSL,
        Args::ONE,
        set_next_upstream_timeout,
    ),
    Command::new(
        "proxy_intercept_errors",
        HSL,
        Args::Flag,
        set_intercept_errors,
    ),
    Command::new(
        "proxy_socket_keepalive",
        HSL,
        Args::Flag,
        set_socket_keepalive,
    ),
    Command::new("proxy_bind", HSL, Args::Take(1, 2), set_bind),
];

/// `proxy_pass URL`.
#[derive(Debug)]
pub struct ProxyPass {
    /// The URL as written (`proxy_redirect default` and log lines use it).
    pub url: String,
    pub target: Target,
    /// The URI part (`http://backend/app/` → `/app/`); `None` passes the client's URI.
    pub uri: Option<String>,
    /// `$proxy_host`: `host[:port]` as written (the port only when written).
    pub host: Arc<str>,
    /// `$proxy_port`.
    pub port: u16,
    /// The location's prefix (a URI part replaces it in the passed URI).
    pub location: String,
    /// Where the directive is, for errors found when upstreams are linked.
    pub span: shoal_conf::Span,
    /// `https://`: the upstream speaks TLS (`proxy_ssl_*`). A URL with variables says per
    /// request.
    pub https: bool,
}

/// Where requests go.
#[derive(Debug)]
pub enum Target {
    /// A name to find among the `upstream` blocks once all are read, else to resolve
    /// (`port`: written explicitly).
    Named {
        name: String,
        port: Option<u16>,
        upstream: OnceLock<Arc<UpstreamConf>>,
    },
    /// `http://unix:/path:`.
    Unix(Arc<UpstreamConf>),
    /// A URL with variables: evaluated per request; its host names an `upstream` block, is
    /// an address, or is looked up by the location's `resolver`.
    Dynamic {
        template: Template,
        upstreams: OnceLock<Vec<Arc<UpstreamConf>>>,
    },
}

impl ProxyPass {
    /// The upstream of a static target (linked when the configuration was read).
    pub fn upstream(&self) -> Option<&Arc<UpstreamConf>> {
        match &self.target {
            Target::Named { upstream, .. } => upstream.get(),
            Target::Unix(u) => Some(u),
            Target::Dynamic { .. } => None,
        }
    }
}

/// `proxy_http_version`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HttpVersion {
    V10,
    V11,
}

/// `proxy_redirect`.
#[derive(Clone, Debug)]
pub enum Redirect {
    /// `default`: the `proxy_pass` URL is replaced by the location's name.
    Default,
    Off,
    /// `FROM TO` lines, in order; FROM is a prefix, or a regex (`~`, `~*`).
    Rules(Vec<RedirectRule>),
}

#[derive(Clone, Debug)]
pub struct RedirectRule {
    pub from: RedirectFrom,
    pub to: Template,
}

#[derive(Clone, Debug)]
pub enum RedirectFrom {
    /// A prefix (with variables, evaluated per request), compared as nginx does, without
    /// regard to case.
    Prefix(Template),
    /// `default` among other rules.
    Default,
    Regex(shoal_pcre::Regex),
}

/// `proxy_next_upstream` conditions (nginx's `NGX_HTTP_UPSTREAM_FT_*`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct NextUpstream(pub u32);

impl NextUpstream {
    pub const ERROR: u32 = 1;
    pub const TIMEOUT: u32 = 1 << 1;
    pub const INVALID_HEADER: u32 = 1 << 2;
    pub const HTTP_500: u32 = 1 << 3;
    pub const HTTP_502: u32 = 1 << 4;
    pub const HTTP_503: u32 = 1 << 5;
    pub const HTTP_504: u32 = 1 << 6;
    pub const HTTP_403: u32 = 1 << 7;
    pub const HTTP_404: u32 = 1 << 8;
    pub const HTTP_429: u32 = 1 << 9;
    pub const NON_IDEMPOTENT: u32 = 1 << 10;
    pub const OFF: u32 = 1 << 31;

    pub fn has(self, bit: u32) -> bool {
        self.0 & bit != 0
    }

    /// The condition an upstream status stands for, if any.
    pub fn of_status(status: u16) -> u32 {
        match status {
            500 => Self::HTTP_500,
            502 => Self::HTTP_502,
            503 => Self::HTTP_503,
            504 => Self::HTTP_504,
            403 => Self::HTTP_403,
            404 => Self::HTTP_404,
            429 => Self::HTTP_429,
            _ => 0,
        }
    }
}

crate::conf::conf_slots! {
    /// The proxy module's location-level settings.
    #[derive(Clone, Debug, Default)]
    pub struct ProxyLoc {
        http_version: HttpVersion = HttpVersion::V10,
        pass_request_headers: bool = true,
        pass_request_body: bool = true,
        buffering: bool = true,
        request_buffering: bool = true,
        force_ranges: bool = false,
        /// `proxy_buffers NUMBER SIZE`.
        buffers: (usize, usize) = (8, 4096),
        buffer_size: usize = 4096,
        busy_buffers_size: usize = 8192,
        /// `proxy_limit_rate` (bytes per second; 0: none).
        limit_rate: u64 = 0,
        /// `proxy_max_temp_file_size` (0: no temporary file; the upstream waits).
        max_temp_file_size: u64 = 1024 * 1024 * 1024,
        temp_file_write_size: usize = 8192,
        connect_timeout: Duration = Duration::from_secs(60),
        send_timeout: Duration = Duration::from_secs(60),
        read_timeout: Duration = Duration::from_secs(60),
        next_upstream: NextUpstream = NextUpstream(NextUpstream::ERROR | NextUpstream::TIMEOUT),
        /// `proxy_next_upstream_tries` (0: no limit).
        next_upstream_tries: u64 = 0,
        /// `proxy_next_upstream_timeout` (0: no limit).
        next_upstream_timeout: Duration = Duration::ZERO,
        intercept_errors: bool = false,
        socket_keepalive: bool = false,
    }
    others {
        /// Not inherited by nested locations; `if` blocks take their location's.
        pub pass: Option<Arc<ProxyPass>>,
        pub set_header: Option<Arc<Vec<(String, Template)>>>,
        pub set_body: Option<Template>,
        /// `proxy_method`: the method sent upstream (variables allowed), the client's when
        /// unset.
        pub method: Option<Template>,
        pub hide_header: Option<Arc<Vec<String>>>,
        pub pass_header: Option<Arc<Vec<String>>>,
        pub ignore_headers: Option<Arc<Vec<String>>>,
        pub redirect: Option<Redirect>,
        pub temp_path: Option<crate::http::temp_file::TempPath>,
        /// `proxy_bind ADDRESS [transparent] | off` (`Some(None)`: off).
        pub bind: Option<Option<Template>>,
        /// The proxy cache's directives (`proxy_cache`, `proxy_cache_key`, ...).
        pub cache: crate::http::proxy_cache::CacheLoc,
        /// `proxy_ssl_*`: https upstreams.
        pub ssl: ssl::ProxySsl,
    }
}

impl ProxyLoc {
    pub fn merge(&mut self, parent: &ProxyLoc) {
        self.merge_slots(parent);
        merge(&mut self.set_header, &parent.set_header);
        merge(&mut self.set_body, &parent.set_body);
        merge(&mut self.method, &parent.method);
        merge(&mut self.hide_header, &parent.hide_header);
        merge(&mut self.pass_header, &parent.pass_header);
        merge(&mut self.ignore_headers, &parent.ignore_headers);
        merge(&mut self.redirect, &parent.redirect);
        merge(&mut self.temp_path, &parent.temp_path);
        merge(&mut self.bind, &parent.bind);
        self.cache.merge(&parent.cache);
        self.ssl.merge(&parent.ssl);
    }

    pub fn redirect(&self) -> &Redirect {
        self.redirect.as_ref().unwrap_or(&Redirect::Default)
    }

    /// How much of an answer is read ahead of the client: `proxy_buffers` in all.
    pub fn buffers_total(&self) -> usize {
        let (n, size) = self.buffers();
        n * size
    }

    /// Whether `proxy_ignore_headers` names `header` (as the directive spells it).
    pub fn ignores(&self, header: &str) -> bool {
        self.ignore_headers
            .as_ref()
            .is_some_and(|l| l.iter().any(|h| h.eq_ignore_ascii_case(header)))
    }

    /// Whether a header the upstream sent is passed to the client: not one of nginx's hidden
    /// ones (`Date`, `Server`, `X-Pad`, `X-Accel-*`) unless `proxy_pass_header` names it, and
    /// not one `proxy_hide_header` names.
    pub fn passes(&self, name: &str) -> bool {
        let name = name.as_bytes();
        self.passes_known(name, UpstreamHeader::of(name).hidden())
    }

    /// [`ProxyLoc::passes`] for a header already looked up (`hidden`: one of nginx's hidden
    /// ones), its name as the upstream sent it.
    pub fn passes_known(&self, name: &[u8], hidden: bool) -> bool {
        let listed = |list: &Option<Arc<Vec<String>>>| {
            list.as_ref()
                .is_some_and(|l| l.iter().any(|h| h.as_bytes().eq_ignore_ascii_case(name)))
        };
        if listed(&self.hide_header) {
            return false;
        }
        !hidden || listed(&self.pass_header)
    }
}

/// The upstream headers the proxy treats apart, by name (any case).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UpstreamHeader {
    /// `Connection`, `Keep-Alive`, `Transfer-Encoding`, `Content-Length`: the upstream
    /// connection's own, never passed as they came.
    HopByHop,
    /// Hidden from the client unless `proxy_pass_header` names it (nginx's
    /// `ngx_http_proxy_hide_headers`): `Date`, `Server`, `X-Pad`, `X-Accel-*`.
    Hidden,
    /// `X-Accel-Buffering` (hidden too).
    XAccelBuffering,
    ContentType,
    AcceptRanges,
    Location,
    Refresh,
    Other,
}

impl UpstreamHeader {
    /// Looks a name up: by its length first, so most names are compared once or not at all.
    pub fn of(name: &[u8]) -> UpstreamHeader {
        use UpstreamHeader::*;
        // `lit` is lowercase. Every byte is compared (no early exit: a loop the compiler can
        // widen), a letter's case bit folded.
        let is = |lit: &[u8]| {
            name.len() == lit.len()
                && name.iter().zip(lit).fold(0u8, |diff, (&a, &b)| {
                    let fold = if b.is_ascii_lowercase() { 0x20 } else { 0 };
                    diff | ((a | fold) ^ b)
                }) == 0
        };
        match name.len() {
            4 if is(b"date") => Hidden,
            5 if is(b"x-pad") => Hidden,
            6 if is(b"server") => Hidden,
            7 if is(b"refresh") => Refresh,
            8 if is(b"location") => Location,
            10 if is(b"connection") || is(b"keep-alive") => HopByHop,
            12 if is(b"content-type") => ContentType,
            13 if is(b"accept-ranges") => AcceptRanges,
            14 if is(b"content-length") => HopByHop,
            15 if is(b"x-accel-expires") || is(b"x-accel-charset") => Hidden,
            16 if is(b"x-accel-redirect") => Hidden,
            17 if is(b"transfer-encoding") => HopByHop,
            17 if is(b"x-accel-buffering") => XAccelBuffering,
            18 if is(b"x-accel-limit-rate") => Hidden,
            _ => Other,
        }
    }

    /// One of nginx's hidden headers.
    pub fn hidden(self) -> bool {
        matches!(
            self,
            UpstreamHeader::Hidden | UpstreamHeader::XAccelBuffering
        )
    }
}

fn proxy<'a>(s: &'a mut Scope<'_>) -> &'a mut ProxyLoc {
    &mut loc_conf(s).proxy
}

fn set_proxy_pass(b: &mut Builder, d: &Directive, s: &mut Scope<'_>) -> Result<(), Error> {
    let (kind, location) = match s {
        Scope::Location(l) => (l.kind, l.name.clone()),
        _ => unreachable!("proxy_pass is allowed in locations only"),
    };
    if proxy(s).pass.is_some() {
        return Err(crate::conf::duplicate(d));
    }
    let url = d.args[0].value.clone();
    let template = Template::compile(&url).map_err(|m| err(d, m))?;
    let _ = b;
    let pass = if !template.is_static() {
        if !url.starts_with("http://") && !url.starts_with("https://") && !url.starts_with('$') {
            return Err(err(d, "invalid URL prefix"));
        }
        ProxyPass {
            url: url.clone(),
            target: Target::Dynamic {
                template,
                upstreams: OnceLock::new(),
            },
            uri: None,
            host: Arc::from(""),
            port: 80,
            location,
            span: d.span.clone(),
            https: false,
        }
    } else {
        let (rest, https) = if let Some(r) = url.strip_prefix("http://") {
            (r, false)
        } else if let Some(r) = url.strip_prefix("https://") {
            (r, true)
        } else {
            return Err(err(d, "invalid URL prefix"));
        };
        let default_port = if https { 443 } else { 80 };
        if https && rest.starts_with("unix:") {
            return Err(err(
                d,
                "https to a unix socket is not supported by shoal (\"proxy_pass https://unix:...\")",
            ));
        }
        let (target, uri, host, port) = if let Some(path) = rest.strip_prefix("unix:") {
            // `unix:/path:/uri`: the socket's path ends at the first `:`.
            let (sock, uri) = match path.split_once(':') {
                Some((p, u)) => (p, Some(u.to_string())),
                None => (path, None),
            };
            if sock.is_empty() {
                return Err(err(
                    d,
                    format!("no path in the unix domain socket \"{url}\""),
                ));
            }
            let u = Arc::new(UpstreamConf::unix(sock));
            let host = format!("unix:{sock}");
            (Target::Unix(u), uri.filter(|u| !u.is_empty()), host, 80)
        } else {
            let (authority, uri) = match rest.find('/') {
                Some(i) => (&rest[..i], Some(rest[i..].to_string())),
                None => (rest, None),
            };
            let (name, port) = split_host_port(authority, default_port).map_err(|m| err(d, m))?;
            let port_written = if authority.starts_with('[') {
                authority.contains("]:")
            } else {
                authority.contains(':')
            };
            let written = port_written.then_some(port);
            (
                Target::Named {
                    name,
                    port: written,
                    upstream: OnceLock::new(),
                },
                uri,
                authority.to_string(),
                port,
            )
        };
        if uri.is_some() && !matches!(kind, Match::Prefix | Match::Exact | Match::NoRegex) {
            return Err(err(
                d,
                "\"proxy_pass\" cannot have URI part in location given by regular expression, or inside named location, or inside \"if\" statement, or inside \"limit_except\" block",
            ));
        }
        ProxyPass {
            url: url.clone(),
            target,
            uri,
            host: Arc::from(host),
            port,
            location,
            span: d.span.clone(),
            https,
        }
    };
    proxy(s).pass = Some(Arc::new(pass));
    Ok(())
}

/// Links every `proxy_pass` of a configuration to its upstream, once all `upstream` blocks are
/// read: a block of that name (which may not be given a port), else the name resolved now.
pub fn link(pass: &ProxyPass, upstreams: &[Arc<UpstreamConf>]) -> Result<(), Error> {
    match &pass.target {
        Target::Named {
            name,
            port,
            upstream,
        } => {
            if upstream.get().is_some() {
                return Ok(());
            }
            let found = upstreams.iter().find(|u| u.name == *name);
            let u = match (found, port) {
                (Some(_), Some(p)) => {
                    return Err(Error::new(
                        format!("upstream \"{name}\" may not have port {p}"),
                        Some(pass.span.clone()),
                    ));
                }
                (Some(u), None) => u.clone(),
                (None, p) => Arc::new(
                    UpstreamConf::implicit(name, p.unwrap_or(pass.port))
                        .map_err(|m| Error::new(m, Some(pass.span.clone())))?,
                ),
            };
            let _ = upstream.set(u);
        }
        Target::Unix(_) => {}
        Target::Dynamic { upstreams: all, .. } => {
            let _ = all.set(upstreams.to_vec());
        }
    }
    Ok(())
}

fn set_set_header(_: &mut Builder, d: &Directive, s: &mut Scope<'_>) -> Result<(), Error> {
    let value = Template::compile(&d.args[1].value).map_err(|m| err(d, m))?;
    let p = proxy(s);
    let list = p.set_header.get_or_insert_with(Default::default);
    Arc::make_mut(list).push((d.args[0].value.clone(), value));
    Ok(())
}

fn set_http_version(_: &mut Builder, d: &Directive, s: &mut Scope<'_>) -> Result<(), Error> {
    let v = match d.args[0].value.as_str() {
        "1.0" => HttpVersion::V10,
        "1.1" => HttpVersion::V11,
        other => return Err(invalid_value(d, other)),
    };
    set_once(&mut proxy(s).http_version, v, d)
}

fn set_pass_request_headers(
    _: &mut Builder,
    d: &Directive,
    s: &mut Scope<'_>,
) -> Result<(), Error> {
    set_once(&mut proxy(s).pass_request_headers, flag_arg(d), d)
}

fn set_pass_request_body(_: &mut Builder, d: &Directive, s: &mut Scope<'_>) -> Result<(), Error> {
    set_once(&mut proxy(s).pass_request_body, flag_arg(d), d)
}

fn set_set_body(_: &mut Builder, d: &Directive, s: &mut Scope<'_>) -> Result<(), Error> {
    let t = Template::compile(&d.args[0].value).map_err(|m| err(d, m))?;
    set_once(&mut proxy(s).set_body, t, d)
}

fn set_method(_: &mut Builder, d: &Directive, s: &mut Scope<'_>) -> Result<(), Error> {
    let t = Template::compile(&d.args[0].value).map_err(|m| err(d, m))?;
    set_once(&mut proxy(s).method, t, d)
}

fn push_name(list: &mut Option<Arc<Vec<String>>>, name: &str) {
    Arc::make_mut(list.get_or_insert_with(Default::default)).push(name.to_string());
}

fn set_hide_header(_: &mut Builder, d: &Directive, s: &mut Scope<'_>) -> Result<(), Error> {
    push_name(&mut proxy(s).hide_header, &d.args[0].value);
    Ok(())
}

fn set_pass_header(_: &mut Builder, d: &Directive, s: &mut Scope<'_>) -> Result<(), Error> {
    push_name(&mut proxy(s).pass_header, &d.args[0].value);
    Ok(())
}

fn set_ignore_headers(_: &mut Builder, d: &Directive, s: &mut Scope<'_>) -> Result<(), Error> {
    const KNOWN: &[&str] = &[
        "X-Accel-Redirect",
        "X-Accel-Expires",
        "X-Accel-Limit-Rate",
        "X-Accel-Buffering",
        "X-Accel-Charset",
        "Expires",
        "Cache-Control",
        "Set-Cookie",
        "Vary",
    ];
    let p = proxy(s);
    if p.ignore_headers.is_some() {
        return Err(crate::conf::duplicate(d));
    }
    let mut list = Vec::new();
    for a in &d.args {
        match KNOWN.iter().find(|k| k.eq_ignore_ascii_case(&a.value)) {
            Some(k) => list.push(k.to_string()),
            None => return Err(invalid_value(d, &a.value)),
        }
    }
    p.ignore_headers = Some(Arc::new(list));
    Ok(())
}

fn set_redirect(_: &mut Builder, d: &Directive, s: &mut Scope<'_>) -> Result<(), Error> {
    let p = proxy(s);
    let first = d.args[0].value.as_str();
    if d.args.len() == 1 {
        let value = match first {
            "off" => Redirect::Off,
            "false" => Redirect::Off,
            "default" => Redirect::Default,
            _ => return Err(crate::conf::invalid_args(d)),
        };
        if let Some(Redirect::Rules(_)) = p.redirect {
            if matches!(value, Redirect::Off) {
                return Err(directive_err(d, "is duplicate"));
            }
        }
        if p.redirect.is_some() && !matches!(value, Redirect::Default) {
            return Err(crate::conf::duplicate(d));
        }
        match value {
            Redirect::Default => {
                let rules = match p.redirect.take() {
                    Some(Redirect::Rules(r)) => r,
                    _ => Vec::new(),
                };
                if rules.is_empty() {
                    p.redirect = Some(Redirect::Default);
                } else {
                    let mut rules = rules;
                    rules.push(RedirectRule {
                        from: RedirectFrom::Default,
                        to: Template::compile("").map_err(|m| err(d, m))?,
                    });
                    p.redirect = Some(Redirect::Rules(rules));
                }
            }
            other => p.redirect = Some(other),
        }
        return Ok(());
    }
    let to = Template::compile(&d.args[1].value).map_err(|m| err(d, m))?;
    let from = if let Some(re) = first.strip_prefix("~*") {
        RedirectFrom::Regex(
            shoal_pcre::RegexBuilder::new(re)
                .caseless(true)
                .build()
                .map_err(|e| err(d, e.to_string()))?,
        )
    } else if let Some(re) = first.strip_prefix('~') {
        RedirectFrom::Regex(shoal_pcre::Regex::new(re).map_err(|e| err(d, e.to_string()))?)
    } else {
        RedirectFrom::Prefix(Template::compile(first).map_err(|m| err(d, m))?)
    };
    let rule = RedirectRule { from, to };
    match &mut p.redirect {
        Some(Redirect::Rules(r)) => r.push(rule),
        Some(Redirect::Default) => {
            p.redirect = Some(Redirect::Rules(vec![
                RedirectRule {
                    from: RedirectFrom::Default,
                    to: Template::compile("").map_err(|m| err(d, m))?,
                },
                rule,
            ]))
        }
        Some(Redirect::Off) => return Err(crate::conf::duplicate(d)),
        None => p.redirect = Some(Redirect::Rules(vec![rule])),
    }
    Ok(())
}

fn set_limit_rate(_: &mut Builder, d: &Directive, s: &mut Scope<'_>) -> Result<(), Error> {
    let n = size_arg(d, 0)?;
    set_once(&mut proxy(s).limit_rate, n, d)
}

fn set_buffering(_: &mut Builder, d: &Directive, s: &mut Scope<'_>) -> Result<(), Error> {
    set_once(&mut proxy(s).buffering, flag_arg(d), d)
}

fn set_force_ranges(_: &mut Builder, d: &Directive, s: &mut Scope<'_>) -> Result<(), Error> {
    set_once(&mut proxy(s).force_ranges, flag_arg(d), d)
}

fn set_request_buffering(_: &mut Builder, d: &Directive, s: &mut Scope<'_>) -> Result<(), Error> {
    set_once(&mut proxy(s).request_buffering, flag_arg(d), d)
}

fn set_buffers(_: &mut Builder, d: &Directive, s: &mut Scope<'_>) -> Result<(), Error> {
    set_once(&mut proxy(s).buffers, crate::conf::bufs_arg(d)?, d)
}

fn set_buffer_size(_: &mut Builder, d: &Directive, s: &mut Scope<'_>) -> Result<(), Error> {
    let n = size_arg(d, 0)?;
    set_once(&mut proxy(s).buffer_size, n as usize, d)
}

fn set_busy_buffers_size(_: &mut Builder, d: &Directive, s: &mut Scope<'_>) -> Result<(), Error> {
    let n = size_arg(d, 0)?;
    set_once(&mut proxy(s).busy_buffers_size, n as usize, d)
}

fn set_max_temp_file_size(_: &mut Builder, d: &Directive, s: &mut Scope<'_>) -> Result<(), Error> {
    let n = size_arg(d, 0)?;
    set_once(&mut proxy(s).max_temp_file_size, n, d)
}

fn set_temp_file_write_size(
    _: &mut Builder,
    d: &Directive,
    s: &mut Scope<'_>,
) -> Result<(), Error> {
    let n = size_arg(d, 0)?;
    set_once(&mut proxy(s).temp_file_write_size, n as usize, d)
}

/// `proxy_temp_path PATH [L1 [L2 [L3]]]`: where an answer that outgrows `proxy_buffers` waits
/// for the client, in nginx's numbered files and levels.
fn set_temp_path(b: &mut Builder, d: &Directive, s: &mut Scope<'_>) -> Result<(), Error> {
    let path = crate::http::temp_file::TempPath::parse(b, d)?;
    set_once(&mut proxy(s).temp_path, path, d)
}

fn set_connect_timeout(_: &mut Builder, d: &Directive, s: &mut Scope<'_>) -> Result<(), Error> {
    let t = time_arg(d, 0)?;
    set_once(&mut proxy(s).connect_timeout, t, d)
}

fn set_send_timeout(_: &mut Builder, d: &Directive, s: &mut Scope<'_>) -> Result<(), Error> {
    let t = time_arg(d, 0)?;
    set_once(&mut proxy(s).send_timeout, t, d)
}

fn set_read_timeout(_: &mut Builder, d: &Directive, s: &mut Scope<'_>) -> Result<(), Error> {
    let t = time_arg(d, 0)?;
    set_once(&mut proxy(s).read_timeout, t, d)
}

fn set_next_upstream(_: &mut Builder, d: &Directive, s: &mut Scope<'_>) -> Result<(), Error> {
    let mut bits = 0u32;
    for a in &d.args {
        bits |= match a.value.as_str() {
            "error" => NextUpstream::ERROR,
            "timeout" => NextUpstream::TIMEOUT,
            "invalid_header" => NextUpstream::INVALID_HEADER,
            "http_500" => NextUpstream::HTTP_500,
            "http_502" => NextUpstream::HTTP_502,
            "http_503" => NextUpstream::HTTP_503,
            "http_504" => NextUpstream::HTTP_504,
            "http_403" => NextUpstream::HTTP_403,
            "http_404" => NextUpstream::HTTP_404,
            "http_429" => NextUpstream::HTTP_429,
            "non_idempotent" => NextUpstream::NON_IDEMPOTENT,
            "off" => NextUpstream::OFF,
            other => return Err(invalid_value(d, other)),
        };
    }
    if bits & NextUpstream::OFF != 0 && bits != NextUpstream::OFF {
        return Err(err(
            d,
            format!("invalid value \"off\" in \"{}\" directive", d.name),
        ));
    }
    set_once(&mut proxy(s).next_upstream, NextUpstream(bits), d)
}

fn set_next_upstream_tries(_: &mut Builder, d: &Directive, s: &mut Scope<'_>) -> Result<(), Error> {
    let n = crate::conf::number_arg(d, 0)?;
    set_once(&mut proxy(s).next_upstream_tries, n, d)
}

fn set_next_upstream_timeout(
    _: &mut Builder,
    d: &Directive,
    s: &mut Scope<'_>,
) -> Result<(), Error> {
    let t = time_arg(d, 0)?;
    set_once(&mut proxy(s).next_upstream_timeout, t, d)
}

fn set_intercept_errors(_: &mut Builder, d: &Directive, s: &mut Scope<'_>) -> Result<(), Error> {
    set_once(&mut proxy(s).intercept_errors, flag_arg(d), d)
}

fn set_socket_keepalive(_: &mut Builder, d: &Directive, s: &mut Scope<'_>) -> Result<(), Error> {
    set_once(&mut proxy(s).socket_keepalive, flag_arg(d), d)
}

fn set_bind(_: &mut Builder, d: &Directive, s: &mut Scope<'_>) -> Result<(), Error> {
    if let Some(a) = d.args.get(1) {
        if a.value != "transparent" {
            return Err(invalid_value(d, &a.value));
        }
        return Err(err(
            d,
            "\"proxy_bind ... transparent\" is not supported by shoal",
        ));
    }
    let v = if d.args[0].value == "off" {
        None
    } else {
        Some(Template::compile(&d.args[0].value).map_err(|m| err(d, m))?)
    };
    set_once(&mut proxy(s).bind, v, d)
}

/// The location-level part of linking: every `proxy_pass` below `lc` (this location's and
/// those of its nested locations and `if` blocks).
pub fn link_all(lc: &LocConf, upstreams: &[Arc<UpstreamConf>]) -> Result<(), Error> {
    if let Some(p) = &lc.proxy.pass {
        link(p, upstreams)?;
        // An https URL, or one with variables that may be (nginx makes its SSL context for
        // both).
        if p.https || matches!(p.target, Target::Dynamic { .. }) {
            ssl::build(&lc.proxy.ssl)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::UpstreamHeader;

    /// The names compared one by one, as the lookup replaced them.
    fn by_comparison(name: &str) -> UpstreamHeader {
        let is = |n: &str| name.eq_ignore_ascii_case(n);
        if [
            "connection",
            "keep-alive",
            "transfer-encoding",
            "content-length",
        ]
        .iter()
        .any(|n| is(n))
        {
            UpstreamHeader::HopByHop
        } else if is("x-accel-buffering") {
            UpstreamHeader::XAccelBuffering
        } else if [
            "date",
            "server",
            "x-pad",
            "x-accel-expires",
            "x-accel-redirect",
            "x-accel-limit-rate",
            "x-accel-charset",
        ]
        .iter()
        .any(|n| is(n))
        {
            UpstreamHeader::Hidden
        } else if is("content-type") {
            UpstreamHeader::ContentType
        } else if is("accept-ranges") {
            UpstreamHeader::AcceptRanges
        } else if is("location") {
            UpstreamHeader::Location
        } else if is("refresh") {
            UpstreamHeader::Refresh
        } else {
            UpstreamHeader::Other
        }
    }

    #[test]
    fn upstream_headers_are_known_in_any_case() {
        let names = [
            "Connection",
            "KEEP-ALIVE",
            "transfer-encoding",
            "Content-Length",
            "X-Accel-Buffering",
            "date",
            "Server",
            "X-Pad",
            "x-accel-expires",
            "X-Accel-Redirect",
            "X-ACCEL-LIMIT-RATE",
            "X-Accel-Charset",
            "Content-Type",
            "Accept-Ranges",
            "LOCATION",
            "Refresh",
            // Near misses: same length, one byte off.
            "Connectiom",
            "keep_alive",
            "Content-Typf",
            "Locatiom",
            "Dat3",
            "Serve",
            "X-Pads",
            "X-Accel-Bufferinh",
            "Transfer-Encodinf",
            "",
            "ETag",
            "Cache-Control",
            "Set-Cookie",
        ];
        for n in names {
            assert_eq!(UpstreamHeader::of(n.as_bytes()), by_comparison(n), "{n}");
        }
        assert!(UpstreamHeader::of(b"SERVER").hidden());
        assert!(UpstreamHeader::of(b"x-accel-buffering").hidden());
        assert!(!UpstreamHeader::of(b"Content-Type").hidden());
    }
}
