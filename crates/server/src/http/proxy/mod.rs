//! nginx's proxy module: `proxy_pass` and the `proxy_*` directives that shape the HTTP request
//! sent upstream and the answer passed back. The exchange itself (peers, connections,
//! buffering, `proxy_next_upstream`, the cache) is the upstream layer's
//! ([`crate::http::upstream`]); this module is its HTTP codec.
//!
//! - [`ProxyLoc`]: the directives, merged down like every location-level setting.
//! - [`request`]: the request line and headers sent upstream (nginx's `create_request`).
//! - [`parse`]: the answer's head read back.
//! - [`codec`]: the proxy as the layer's [`crate::http::upstream::protocol::Protocol`].
//!
//! Runs on the worker; everything waits on sockets, nothing blocks.

pub mod codec;
pub mod cookie;
pub mod parse;
pub mod redirect;
pub mod request;
pub mod ssl;

pub use crate::http::upstream::header::UpstreamHeader;
pub use crate::http::upstream::target::Target;
pub use crate::http::upstream::{NextUpstream, UpstreamLoc};

use std::sync::{Arc, OnceLock};

use shoal_conf::{Directive, Error};

use super::location::Match;
use super::{loc_conf, LocConf};
use crate::conf::{
    directive_err, err, invalid_value, merge, set_once, Args, Builder, Command, Ctx, Scope,
};
use crate::upstream::conf::{split_host_port, UpstreamConf};
use crate::variables::Template;

const HSL: Ctx = Ctx::HSL;

pub static DIRECTIVES: &[Command] = crate::http::upstream::conf::upstream_directives!(
    "proxy",
    [
        Command::new(
            "proxy_pass",
            Ctx::LOCATION.or(Ctx::LIF).or(Ctx::LMT),
            Args::ONE,
            set_proxy_pass,
        ),
        Command::new("proxy_set_header", HSL, Args::TWO, set_set_header),
        Command::new("proxy_http_version", HSL, Args::ONE, set_http_version),
        Command::new("proxy_set_body", HSL, Args::ONE, set_set_body),
        Command::new("proxy_method", HSL, Args::ONE, set_method),
        Command::new("proxy_redirect", HSL, Args::Take(1, 2), set_redirect),
        Command::new(
            "proxy_cookie_domain",
            HSL,
            Args::Take(1, 2),
            cookie::set_domain
        ),
        Command::new("proxy_cookie_path", HSL, Args::Take(1, 2), cookie::set_path),
        Command::new(
            "proxy_cookie_flags",
            HSL,
            Args::Take(1, 4),
            cookie::set_flags
        ),
    ]
);

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

impl ProxyPass {
    /// The upstream of a static target (linked when the configuration was read).
    pub fn upstream(&self) -> Option<&Arc<UpstreamConf>> {
        self.target.upstream()
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

crate::conf::conf_slots! {
    /// The proxy module's location-level settings; the shared ones are in `up` (reached
    /// through `Deref`, as `lc.proxy.buffering()`).
    #[derive(Clone, Debug, Default)]
    pub struct ProxyLoc {
        http_version: HttpVersion = HttpVersion::V10,
    }
    others {
        /// What every upstream protocol has (`proxy_buffering`, `proxy_cache`, ...).
        pub up: UpstreamLoc,
        /// Not inherited by nested locations; `if` blocks take their location's.
        pub pass: Option<Arc<ProxyPass>>,
        pub set_header: Option<Arc<Vec<(String, Template)>>>,
        pub set_body: Option<Template>,
        /// `proxy_method`: the method sent upstream (variables allowed), the client's when
        /// unset.
        pub method: Option<Template>,
        pub redirect: Option<Redirect>,
        /// `proxy_cookie_domain`, `proxy_cookie_path`, `proxy_cookie_flags`.
        pub cookie: cookie::CookieLoc,
        /// `proxy_ssl_*`: https upstreams.
        pub ssl: ssl::ProxySsl,
    }
}

impl std::ops::Deref for ProxyLoc {
    type Target = UpstreamLoc;
    fn deref(&self) -> &UpstreamLoc {
        &self.up
    }
}

impl std::ops::DerefMut for ProxyLoc {
    fn deref_mut(&mut self) -> &mut UpstreamLoc {
        &mut self.up
    }
}

impl ProxyLoc {
    pub fn merge(&mut self, parent: &ProxyLoc) {
        self.merge_slots(parent);
        self.up.merge(&parent.up);
        merge(&mut self.set_header, &parent.set_header);
        merge(&mut self.set_body, &parent.set_body);
        merge(&mut self.method, &parent.method);
        merge(&mut self.redirect, &parent.redirect);
        self.cookie.merge(&parent.cookie);
        self.ssl.merge(&parent.ssl);
    }

    pub fn redirect(&self) -> &Redirect {
        self.redirect.as_ref().unwrap_or(&Redirect::Default)
    }

    /// Whether a header the upstream sent is passed to the client: not one of nginx's hidden
    /// ones (`Date`, `Server`, `X-Pad`, `X-Accel-*`) unless `proxy_pass_header` names it, and
    /// not one `proxy_hide_header` names.
    pub fn passes(&self, name: &str) -> bool {
        let name = name.as_bytes();
        self.up
            .passes_known(name, UpstreamHeader::of(name).hidden())
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
            // nginx's `$proxy_host` for a unix socket (the `Host` it sends).
            let host = "localhost".to_string();
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

fn set_method(_: &mut Builder, d: &Directive, s: &mut Scope<'_>) -> Result<(), Error> {
    let t = Template::compile(&d.args[0].value).map_err(|m| err(d, m))?;
    set_once(&mut proxy(s).method, t, d)
}

fn set_set_body(_: &mut Builder, d: &Directive, s: &mut Scope<'_>) -> Result<(), Error> {
    let t = Template::compile(&d.args[0].value).map_err(|m| err(d, m))?;
    set_once(&mut proxy(s).set_body, t, d)
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
        RedirectFrom::Regex(crate::http::rewrite::regex(d, re, true)?)
    } else if let Some(re) = first.strip_prefix('~') {
        RedirectFrom::Regex(crate::http::rewrite::regex(d, re, false)?)
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

/// The location-level part of linking: every `proxy_pass` below `lc` (this location's and
/// those of its nested locations and `if` blocks).
pub fn link_all(lc: &LocConf, upstreams: &[Arc<UpstreamConf>]) -> Result<(), Error> {
    if let Some(p) = &lc.proxy.pass {
        p.target.link(p.port, &p.span, upstreams)?;
        // An https URL, or one with variables that may be (nginx makes its SSL context for
        // both).
        if p.https || matches!(p.target, Target::Dynamic { .. }) {
            ssl::build(&lc.proxy.ssl, "proxy", &[])?;
        }
    }
    Ok(())
}
