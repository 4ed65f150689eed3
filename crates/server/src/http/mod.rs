//! The http context: `http`, `server`, `location` and the core directives that every request
//! consults (`root`, `index`, `types`, `keepalive_timeout`, `sendfile`, ...).
//!
//! Configuration is three levels, as in nginx: the `http` block, each `server`, each
//! `location`. A location-level directive written at http or server level is the default for
//! everything below it: [`LocConf::merge`] fills what a level left unset from its parent, once,
//! after the walk, and the accessors hold nginx's defaults, so each default lives in one place.

pub mod access_log;
pub mod conn;
pub mod location;
pub mod static_files;

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use shoal_conf::{Directive, Error};

use crate::conf::{
    directive_err, err, flag_arg, invalid_value, merge, number_arg, set_once, time_arg, Args,
    Builder, Command, Ctx, Scope,
};
use crate::listen::ListenConf;
pub use location::{LocationConf, Match};

pub static DIRECTIVES: &[Command] = &[
    Command::block("server", Ctx::HTTP, Args::NONE, set_server),
    Command::block(
        "location",
        Ctx::SERVER.or(Ctx::LOCATION),
        Args::Take(1, 2),
        location::set_location,
    ),
    Command::new(
        "server_name",
        Ctx::SERVER,
        Args::ONE_OR_MORE,
        set_server_name,
    ),
    Command::new("root", Ctx::HSL.or(Ctx::LIF), Args::ONE, set_root),
    Command::new("index", Ctx::HSL, Args::ONE_OR_MORE, set_index),
    Command::block("types", Ctx::HSL, Args::NONE, set_types),
    Command::new("default_type", Ctx::HSL, Args::ONE, set_default_type),
    Command::new("sendfile", Ctx::HSL.or(Ctx::LIF), Args::Flag, set_sendfile),
    Command::new("tcp_nopush", Ctx::HSL, Args::Flag, set_tcp_nopush),
    Command::new("tcp_nodelay", Ctx::HSL, Args::Flag, set_tcp_nodelay),
    Command::new(
        "keepalive_timeout",
        Ctx::HSL,
        Args::Take(1, 2),
        set_keepalive_timeout,
    ),
    Command::new(
        "keepalive_requests",
        Ctx::HSL,
        Args::ONE,
        set_keepalive_requests,
    ),
    Command::new("server_tokens", Ctx::HSL, Args::ONE, set_server_tokens),
    Command::new(
        "log_format",
        Ctx::HTTP,
        Args::Take(2, usize::MAX),
        access_log::set_log_format,
    ),
    Command::new(
        "access_log",
        Ctx::HSL.or(Ctx::LIF).or(Ctx::LMT),
        Args::ONE_OR_MORE,
        access_log::set_access_log,
    ),
    Command::new(
        "client_header_timeout",
        Ctx::HTTP.or(Ctx::SERVER),
        Args::ONE,
        set_client_header_timeout,
    ),
];

/// The `http` block.
#[derive(Clone, Debug, Default)]
pub struct HttpConf {
    pub servers: Vec<ServerConf>,
    /// Server-level defaults written at http level.
    pub srv: SrvConf,
    /// Location-level defaults written at http level.
    pub loc: LocConf,
}

/// Server-level settings that may be written at http level too.
#[derive(Clone, Debug, Default)]
pub struct SrvConf {
    pub client_header_timeout: Option<Duration>,
}

impl SrvConf {
    fn merge(&mut self, parent: &SrvConf) {
        merge(
            &mut self.client_header_timeout,
            &parent.client_header_timeout,
        );
    }

    /// `client_header_timeout` (default 60s).
    pub fn client_header_timeout(&self) -> Duration {
        self.client_header_timeout
            .unwrap_or(Duration::from_secs(60))
    }
}

/// One `server` block.
#[derive(Clone, Debug, Default)]
pub struct ServerConf {
    pub listen: Vec<ListenConf>,
    pub names: Vec<String>,
    pub srv: SrvConf,
    pub loc: LocConf,
    pub locations: Vec<LocationConf>,
    /// Where the block is, for log lines.
    pub line: usize,
}

impl ServerConf {
    /// The first `server_name`, or `""` (what `$server_name` is).
    pub fn name(&self) -> &str {
        self.names.first().map(String::as_str).unwrap_or("")
    }
}

/// `server_tokens on|off|build`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ServerTokens {
    On,
    Off,
    Build,
}

/// Location-level settings (also written at http and server level as defaults).
#[derive(Clone, Debug, Default)]
pub struct LocConf {
    pub root: Option<PathBuf>,
    pub index: Option<Vec<String>>,
    pub types: Option<Arc<HashMap<String, String>>>,
    pub default_type: Option<String>,
    pub sendfile: Option<bool>,
    pub tcp_nopush: Option<bool>,
    pub tcp_nodelay: Option<bool>,
    pub keepalive_timeout: Option<(Duration, Option<Duration>)>,
    pub keepalive_requests: Option<u64>,
    pub server_tokens: Option<ServerTokens>,
    /// `access_log` lines of this level (empty: `access_log off`).
    pub access_log: Option<Arc<Vec<Arc<access_log::AccessLog>>>>,
}

impl LocConf {
    /// Fills what this level left unset from its parent.
    pub fn merge(&mut self, parent: &LocConf) {
        merge(&mut self.root, &parent.root);
        merge(&mut self.index, &parent.index);
        merge(&mut self.types, &parent.types);
        merge(&mut self.default_type, &parent.default_type);
        merge(&mut self.sendfile, &parent.sendfile);
        merge(&mut self.tcp_nopush, &parent.tcp_nopush);
        merge(&mut self.tcp_nodelay, &parent.tcp_nodelay);
        merge(&mut self.keepalive_timeout, &parent.keepalive_timeout);
        merge(&mut self.keepalive_requests, &parent.keepalive_requests);
        merge(&mut self.server_tokens, &parent.server_tokens);
        merge(&mut self.access_log, &parent.access_log);
    }

    /// Sets the defaults at the top (http) level, so every level below inherits them.
    fn set_defaults(&mut self, prefix: &std::path::Path) {
        self.root.get_or_insert_with(|| prefix.join("html"));
        self.index.get_or_insert_with(|| vec!["index.html".into()]);
        self.types.get_or_insert_with(|| Arc::new(default_types()));
        self.default_type.get_or_insert_with(|| "text/plain".into());
        self.sendfile.get_or_insert(false);
        self.tcp_nopush.get_or_insert(false);
        self.tcp_nodelay.get_or_insert(true);
        self.keepalive_timeout
            .get_or_insert((Duration::from_secs(75), None));
        self.keepalive_requests.get_or_insert(1000);
        self.server_tokens.get_or_insert(ServerTokens::On);
    }

    /// The document root (after merge, always set).
    pub fn root(&self) -> &std::path::Path {
        self.root.as_deref().unwrap_or(std::path::Path::new("html"))
    }

    pub fn index(&self) -> &[String] {
        self.index.as_deref().unwrap_or_default()
    }

    /// The MIME type for a file name, from `types` then `default_type`.
    pub fn content_type(&self, path: &std::path::Path) -> &str {
        let ext = path.extension().and_then(|e| e.to_str());
        if let (Some(ext), Some(types)) = (ext, &self.types) {
            if let Some(t) = types
                .get(ext)
                .or_else(|| types.get(&ext.to_ascii_lowercase()))
            {
                return t;
            }
        }
        self.default_type.as_deref().unwrap_or("text/plain")
    }

    pub fn sendfile(&self) -> bool {
        self.sendfile.unwrap_or(false)
    }

    pub fn tcp_nopush(&self) -> bool {
        self.tcp_nopush.unwrap_or(false)
    }

    pub fn tcp_nodelay(&self) -> bool {
        self.tcp_nodelay.unwrap_or(true)
    }

    /// `keepalive_timeout TIMEOUT [HEADER_TIMEOUT]`; zero disables keep-alive.
    pub fn keepalive_timeout(&self) -> (Duration, Option<Duration>) {
        self.keepalive_timeout
            .unwrap_or((Duration::from_secs(75), None))
    }

    pub fn keepalive_requests(&self) -> u64 {
        self.keepalive_requests.unwrap_or(1000)
    }

    pub fn server_tokens(&self) -> ServerTokens {
        self.server_tokens.unwrap_or(ServerTokens::On)
    }

    /// The access logs in force (empty with `access_log off`).
    pub fn access_logs(&self) -> &[Arc<access_log::AccessLog>] {
        self.access_log
            .as_deref()
            .map(Vec::as_slice)
            .unwrap_or_default()
    }
}

/// nginx's built-in types when no `types` block is given.
fn default_types() -> HashMap<String, String> {
    [
        ("html", "text/html"),
        ("gif", "image/gif"),
        ("jpg", "image/jpeg"),
    ]
    .into_iter()
    .map(|(e, t)| (e.to_string(), t.to_string()))
    .collect()
}

/// The location-level configuration of whatever scope a directive is in.
pub fn loc_conf<'a>(s: &'a mut Scope<'_>) -> &'a mut LocConf {
    match s {
        Scope::Http(h) => &mut h.loc,
        Scope::Server(srv) => &mut srv.loc,
        Scope::Location(l) => &mut l.loc,
        _ => unreachable!(
            "the registry allows location-level directives in http, server and location only"
        ),
    }
}

fn srv_conf<'a>(s: &'a mut Scope<'_>) -> &'a mut SrvConf {
    match s {
        Scope::Http(h) => &mut h.srv,
        Scope::Server(srv) => &mut srv.srv,
        _ => unreachable!("the registry allows server-level directives in http and server only"),
    }
}

fn set_server(b: &mut Builder, d: &Directive, s: &mut Scope<'_>) -> Result<(), Error> {
    let Scope::Http(http) = s else {
        unreachable!("server is allowed in http only")
    };
    let mut srv = ServerConf {
        line: d.span.line,
        ..Default::default()
    };
    let body = d.block.as_deref().unwrap_or_default();
    b.walk(body, Ctx::SERVER, &mut Scope::Server(&mut srv))?;
    http.servers.push(srv);
    Ok(())
}

fn set_server_name(_: &mut Builder, d: &Directive, s: &mut Scope<'_>) -> Result<(), Error> {
    let Scope::Server(srv) = s else {
        unreachable!("server_name is allowed in server only")
    };
    for a in &d.args {
        let name = a.value.to_ascii_lowercase();
        if name.is_empty() && !a.quoted {
            continue;
        }
        srv.names.push(name);
    }
    Ok(())
}

fn set_root(b: &mut Builder, d: &Directive, s: &mut Scope<'_>) -> Result<(), Error> {
    let p = b.full_path(&d.args[0].value);
    set_once(&mut loc_conf(s).root, p, d)
}

fn set_index(_: &mut Builder, d: &Directive, s: &mut Scope<'_>) -> Result<(), Error> {
    for a in &d.args {
        if a.value.is_empty() {
            return Err(err(d, "index \"\" in \"index\" directive is invalid"));
        }
    }
    let list = loc_conf(s).index.get_or_insert_with(Vec::new);
    list.extend(d.args.iter().map(|a| a.value.clone()));
    Ok(())
}

fn set_types(b: &mut Builder, d: &Directive, s: &mut Scope<'_>) -> Result<(), Error> {
    let lc = loc_conf(s);
    let mut map: HashMap<String, String> = match &lc.types {
        Some(t) => (**t).clone(),
        None => HashMap::new(),
    };
    for line in d.block.as_deref().unwrap_or_default() {
        if line.block.is_some() {
            return Err(err(line, "unexpected \"{\""));
        }
        if line.args.is_empty() {
            return Err(crate::conf::invalid_args(line));
        }
        let ty = line.name.clone();
        for ext in &line.args {
            let ext = ext.value.to_ascii_lowercase();
            if let Some(prev) = map.get(&ext) {
                if *prev != ty {
                    b.warn(
                        format!(
                            "duplicate extension \"{ext}\", content type: \"{ty}\", previous content type: \"{prev}\""
                        ),
                        &line.span,
                    );
                }
            }
            map.insert(ext, ty.clone());
        }
    }
    lc.types = Some(Arc::new(map));
    Ok(())
}

fn set_default_type(_: &mut Builder, d: &Directive, s: &mut Scope<'_>) -> Result<(), Error> {
    set_once(&mut loc_conf(s).default_type, d.args[0].value.clone(), d)
}

fn set_sendfile(_: &mut Builder, d: &Directive, s: &mut Scope<'_>) -> Result<(), Error> {
    set_once(&mut loc_conf(s).sendfile, flag_arg(d), d)
}

fn set_tcp_nopush(_: &mut Builder, d: &Directive, s: &mut Scope<'_>) -> Result<(), Error> {
    set_once(&mut loc_conf(s).tcp_nopush, flag_arg(d), d)
}

fn set_tcp_nodelay(_: &mut Builder, d: &Directive, s: &mut Scope<'_>) -> Result<(), Error> {
    set_once(&mut loc_conf(s).tcp_nodelay, flag_arg(d), d)
}

fn set_keepalive_timeout(_: &mut Builder, d: &Directive, s: &mut Scope<'_>) -> Result<(), Error> {
    let t = time_arg(d, 0)?;
    let header = match d.args.get(1) {
        Some(_) => Some(Duration::from_secs(time_arg(d, 1)?.as_secs())),
        None => None,
    };
    set_once(&mut loc_conf(s).keepalive_timeout, (t, header), d)
}

fn set_keepalive_requests(_: &mut Builder, d: &Directive, s: &mut Scope<'_>) -> Result<(), Error> {
    let n = number_arg(d, 0)?;
    set_once(&mut loc_conf(s).keepalive_requests, n, d)
}

fn set_server_tokens(_: &mut Builder, d: &Directive, s: &mut Scope<'_>) -> Result<(), Error> {
    let v = match d.args[0].value.as_str() {
        "on" => ServerTokens::On,
        "off" => ServerTokens::Off,
        "build" => ServerTokens::Build,
        other => return Err(invalid_value(d, other)),
    };
    set_once(&mut loc_conf(s).server_tokens, v, d)
}

fn set_client_header_timeout(
    _: &mut Builder,
    d: &Directive,
    s: &mut Scope<'_>,
) -> Result<(), Error> {
    let t = time_arg(d, 0)?;
    if t.is_zero() {
        return Err(directive_err(d, "invalid value"));
    }
    set_once(&mut srv_conf(s).client_header_timeout, t, d)
}

impl HttpConf {
    /// Applies inheritance: http → server → location → nested location, and nginx's default
    /// listen (`*:80` as root, `*:8000` otherwise) for servers without one.
    pub fn finish(&mut self, b: &mut Builder) -> Result<(), Error> {
        let prefix = b.prefix.clone();
        let prefix = prefix.as_path();
        if self.loc.access_log.is_none() {
            self.loc.access_log =
                Some(access_log::default_logs(b).map_err(|m| Error::new(m, None))?);
        }
        self.loc.set_defaults(prefix);
        let default_port = if crate::privileges::is_root() {
            80
        } else {
            8000
        };
        for srv in &mut self.servers {
            srv.srv.merge(&self.srv);
            srv.loc.merge(&self.loc);
            if srv.listen.is_empty() {
                srv.listen.push(ListenConf {
                    addr: crate::listen::ListenAddr::Inet(std::net::SocketAddr::from((
                        [0, 0, 0, 0],
                        default_port,
                    ))),
                    default_server: false,
                    opts: Default::default(),
                });
            }
            for l in &mut srv.locations {
                l.finish(&srv.loc);
            }
        }
        Ok(())
    }

    /// Every listen of every server.
    pub fn listens(&self) -> Vec<&ListenConf> {
        self.servers.iter().flat_map(|s| s.listen.iter()).collect()
    }
}
