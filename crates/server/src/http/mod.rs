//! The http context: `http`, `server`, `location` and the core directives that every request
//! consults (`root`, `index`, `types`, `keepalive_timeout`, `sendfile`, ...).
//!
//! Configuration is three levels, as in nginx: the `http` block, each `server`, each
//! `location`. A location-level directive written at http or server level is the default for
//! everything below it: [`LocConf::merge`] fills what a level left unset from its parent, once,
//! after the walk, and the accessors hold nginx's defaults, so each default lives in one place.

pub mod access;
pub mod access_log;
pub mod addition;
pub mod aio;
pub mod answer;
pub mod auth_basic;
pub mod auth_delay;
pub mod auth_request;
pub mod autoindex;
pub mod body_filter;
pub mod browser;
pub mod charset;
pub mod client_body;
pub mod dav;
pub mod directives;
mod doc_root;
use doc_root::{set_index, set_root};
pub use doc_root::{DocRoot, IndexName};
pub mod empty_gif;
pub mod fastcgi;
pub mod flv;
pub mod framing;
pub mod geo;
pub mod grpc;
pub mod gzip;
pub mod h1;
pub mod h2;
pub mod hash_sizes;
pub mod headers;
pub mod limit_conn;
pub mod limit_except;
pub mod limit_rate;
pub mod limit_req;
pub mod limit_zone;
pub mod location;
pub mod map;
pub mod memcached;
pub mod mime_types;
pub mod mirror;
pub mod modules;
pub mod msie;
pub mod not_modified;
pub mod open_file_cache;
pub mod output;
pub mod phases;
pub mod post_action;
pub mod proxy;
pub mod proxy_cache;
pub mod proxy_protocol;
pub mod random_index;
pub mod range;
pub mod range_filter;
pub mod realip;
pub mod referer;
pub mod reply;
pub mod request;
pub mod rewrite;
pub mod scgi;
pub mod secure_link;
pub mod sink;
pub mod slice;
pub mod split_clients;
pub mod ssi;
pub mod static_files;
pub mod stub_status;
pub mod sub;
pub mod subrequest;
pub mod subrequest_body;
pub mod temp_file;
pub mod trailers;
pub mod transport;
pub mod upstream;
pub mod userid;
pub mod uwsgi;

use std::path::{Path, PathBuf};
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
        "open_log_file_cache",
        Ctx::HSL,
        Args::Take(1, 4),
        access_log::set_open_log_file_cache,
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
    /// The variables `map` and `split_clients` define: owned here, for as long as the
    /// configuration lives; templates reach them through [`crate::variables::UserVar`].
    pub variables: Vec<Arc<dyn crate::variables::Compute>>,
    /// `upstream` blocks, in order.
    pub upstreams: Vec<Arc<crate::upstream::conf::UpstreamConf>>,
    /// `proxy_cache_path` lines, in order.
    pub cache_paths: Vec<Arc<proxy_cache::CachePathConf>>,
    /// The ssl module's http-level settings, and the TLS contexts of the addresses.
    pub ssl: crate::tls::HttpSsl,
}

crate::conf::conf_slots! {
    /// Server-level settings that may be written at http level too.
    #[derive(Clone, Debug, Default)]
    pub struct SrvConf {
        client_header_timeout: Duration = Duration::from_secs(60),
        client_header_buffer_size: usize = 1024,
        large_client_header_buffers: (usize, usize) = (4, 8192),
        ignore_invalid_headers: bool = true,
        underscores_in_headers: bool = false,
        merge_slashes: bool = true,
    }
}

impl SrvConf {
    fn merge(&mut self, parent: &SrvConf) {
        self.merge_slots(parent);
    }

    /// The request-head limits of this server.
    pub fn limits(&self) -> shoal_http::Limits {
        let (num, size) = self.large_client_header_buffers();
        shoal_http::Limits {
            client_header_buffer_size: self.client_header_buffer_size(),
            large_client_header_buffers: shoal_http::LargeBuffers { num, size },
            ignore_invalid_headers: self.ignore_invalid_headers(),
            underscores_in_headers: self.underscores_in_headers(),
            merge_slashes: self.merge_slashes(),
        }
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
    /// `server_name ~REGEX` names, in order.
    pub name_regexes: Vec<shoal_pcre::Regex>,
    /// The server's rewrite-module directives, in order (run before the location is found).
    pub rewrite: Vec<rewrite::Code>,
    /// Its `if` blocks.
    pub if_blocks: Vec<LocationConf>,
    /// Where the block is, for log lines.
    pub line: usize,
    /// The ssl module's settings (merged with the http level's in `finish`).
    pub ssl: crate::tls::SslConf,
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

crate::conf::conf_slots! {
    /// Location-level settings (also written at http and server level as defaults).
    #[derive(Clone, Debug, Default)]
    pub struct LocConf {
        sendfile: bool = false,
        tcp_nopush: bool = false,
        tcp_nodelay: bool = true,
        /// `keepalive_timeout TIMEOUT [HEADER_TIMEOUT]`; zero disables keep-alive.
        keepalive_timeout: (Duration, Option<Duration>) = (Duration::from_secs(75), None),
        keepalive_requests: u64 = 1000,
        server_tokens: ServerTokens = ServerTokens::On,
        etag: bool = true,
        if_modified_since: directives::IfModifiedSince = directives::IfModifiedSince::Exact,
        absolute_redirect: bool = true,
        port_in_redirect: bool = true,
        server_name_in_redirect: bool = false,
        log_not_found: bool = true,
        /// `recursive_error_pages`: an `error_page` target's own failure may meet an
        /// `error_page` again (within the redirect budget).
        recursive_error_pages: bool = false,
        disable_symlinks: bool = false,
        /// `client_max_body_size` (0 = unlimited).
        client_max_body_size: u64 = 1024 * 1024,
        /// `client_body_buffer_size`: a body read whole stays in memory up to it.
        client_body_buffer_size: u64 = 16 * 1024,
        client_body_timeout: Duration = Duration::from_secs(60),
        send_timeout: Duration = Duration::from_secs(60),
        /// `keepalive_time`: no request starts on a connection older than this.
        keepalive_time: Duration = Duration::from_secs(3600),
        lingering_close: directives::Lingering = directives::Lingering::On,
        lingering_time: Duration = Duration::from_secs(30),
        lingering_timeout: Duration = Duration::from_secs(5),
        reset_timedout_connection: bool = false,
        /// `sendfile_max_chunk` (0 = unlimited).
        sendfile_max_chunk: u64 = 2 * 1024 * 1024,
        /// `output_buffers NUMBER SIZE`: a file body that is read rather than sent with
        /// sendfile (`sendfile off`, `directio`, gzip) is read SIZE bytes at a time, and up to
        /// NUMBER such pieces wait for the client before the next read waits for them.
        output_buffers: (usize, usize) = (2, 32 * 1024),
        /// `aio_write`: temporary and cache files are written through the pool.
        aio_write: bool = false,
        /// `aio_residency_check`: page-cache hits are served inline.
        aio_residency_check: bool = true,
        directio_alignment: u64 = 512,
        /// `read_ahead` (0: off): nginx on Linux advises sequential reads of a file over
        /// 128 KiB it opens, whatever the size.
        read_ahead: u64 = 0,
        rewrite_log: bool = false,
        uninitialized_variable_warn: bool = true,
    }
    others {
        /// `root` or `alias`.
        pub root: Option<DocRoot>,
        pub index: Option<Vec<IndexName>>,
        /// `types`: built from the configuration, looked up with each answer's extension
        /// (FxHash: nobody outside adds keys to it).
        pub types: Option<Arc<shoal_io::fxhash::FxHashMap<String, String>>>,
        pub default_type: Option<String>,
        /// `error_log` lines of this level (unset everywhere: the main error log).
        pub error_log: Option<Arc<crate::log::ErrorLog>>,
        /// `open_log_file_cache` (`Some(None)`: `off`).
        pub open_log_file_cache: Option<Option<access_log::LogFileCache>>,
        /// This level said `access_log off` (nginx's `off` wins over its other lines).
        pub access_log_off: bool,
        /// `access_log` lines of this level (empty: `access_log off`).
        pub access_log: Option<Arc<Vec<Arc<access_log::AccessLog>>>>,
        /// Not inherited (nginx's `try_files` and `return` apply where written).
        pub try_files: Option<Arc<directives::TryFiles>>,
        pub error_page: Option<Arc<Vec<directives::ErrorPage>>>,
        pub add_header: Option<Arc<Vec<directives::AddHeader>>>,
        pub expires: Option<directives::Expires>,
        /// `max_ranges` (unset: unlimited).
        pub max_ranges: Option<u64>,
        /// `disable_symlinks ... from=PART` (`Some(None)`: a line without it).
        pub disable_symlinks_from: Option<Option<crate::variables::Template>>,
        pub aio: Option<aio::Aio>,
        /// `directio SIZE` (`Some(None)`: `off`).
        pub directio: Option<Option<u64>>,
        pub gzip: gzip::GzipLoc,
        pub open_file_cache: open_file_cache::OfcLoc,
        /// `stub_status` in this location (not inherited).
        pub stub_status: Option<bool>,
        /// `empty_gif` in this location (not inherited).
        pub empty_gif: Option<bool>,
        pub proxy: proxy::ProxyLoc,
        /// The modules' configuration, one field each (`lc.NAME`, through `Deref`): see
        /// [`modules`].
        pub m: modules::Modules,
        /// The content handler, chosen by the location's own directives once it is merged.
        pub content: Content,
    }
}

/// A location's content handler, chosen when the configuration is read by the directive that
/// sets it (nginx's `clcf->handler`; none of these is inherited): `proxy_pass`,
/// `stub_status` (or `proxy_cache_status`), else the static module (with `index`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Content {
    #[default]
    Static,
    Proxy,
    /// `fastcgi_pass`, `uwsgi_pass`, `scgi_pass`, `memcached_pass`.
    Upstream(upstream::Proto),
    StubStatus,
    EmptyGif,
    /// `flv`.
    Flv,
}

impl Content {
    fn of(lc: &LocConf) -> Content {
        if lc.stub_status == Some(true) || lc.proxy.cache.status_page == Some(true) {
            Content::StubStatus
        } else if lc.empty_gif == Some(true) {
            Content::EmptyGif
        } else if lc.flv == Some(true) {
            Content::Flv
        } else if lc.proxy.pass.is_some() {
            Content::Proxy
        } else if lc.fastcgi.pass.is_some() {
            Content::Upstream(upstream::Proto::Fastcgi)
        } else if lc.uwsgi.pass.is_some() {
            Content::Upstream(upstream::Proto::Uwsgi)
        } else if lc.scgi.pass.is_some() {
            Content::Upstream(upstream::Proto::Scgi)
        } else if lc.memcached.pass.is_some() {
            Content::Upstream(upstream::Proto::Memcached)
        } else if lc.grpc.pass.is_some() {
            Content::Upstream(upstream::Proto::Grpc)
        } else {
            Content::Static
        }
    }

    /// Whether the handler is an upstream's (`proxy_pass`, `fastcgi_pass`, ...).
    pub fn is_upstream(self) -> bool {
        matches!(self, Content::Proxy | Content::Upstream(_))
    }

    /// A nameless location (an `if` block, `limit_except`) without a handler of its own
    /// takes its location's upstream handler, as nginx's do.
    pub fn inherit(child: &mut LocConf, parent: &LocConf) {
        if child.content != Content::Static || !parent.content.is_upstream() {
            return;
        }
        child.proxy.pass.clone_from(&parent.proxy.pass);
        child.m.fastcgi.pass.clone_from(&parent.m.fastcgi.pass);
        child.m.uwsgi.pass.clone_from(&parent.m.uwsgi.pass);
        child.m.scgi.pass.clone_from(&parent.m.scgi.pass);
        child.m.memcached.pass.clone_from(&parent.m.memcached.pass);
        child.m.grpc.pass.clone_from(&parent.m.grpc.pass);
        child.content = parent.content;
    }
}

/// A module's configuration reads as the location's own field (`lc.auth_basic`).
impl std::ops::Deref for LocConf {
    type Target = modules::Modules;
    fn deref(&self) -> &modules::Modules {
        &self.m
    }
}

impl std::ops::DerefMut for LocConf {
    fn deref_mut(&mut self) -> &mut modules::Modules {
        &mut self.m
    }
}

impl LocConf {
    /// Fills what this level left unset from its parent.
    pub fn merge(&mut self, parent: &LocConf) {
        self.merge_slots(parent);
        merge(&mut self.root, &parent.root);
        merge(&mut self.index, &parent.index);
        merge(&mut self.types, &parent.types);
        merge(&mut self.default_type, &parent.default_type);
        merge(
            &mut self.disable_symlinks_from,
            &parent.disable_symlinks_from,
        );
        merge(&mut self.access_log, &parent.access_log);
        merge(&mut self.error_log, &parent.error_log);
        merge(&mut self.open_log_file_cache, &parent.open_log_file_cache);
        merge(&mut self.error_page, &parent.error_page);
        merge(&mut self.add_header, &parent.add_header);
        merge(&mut self.expires, &parent.expires);
        merge(&mut self.max_ranges, &parent.max_ranges);
        merge(&mut self.aio, &parent.aio);
        merge(&mut self.directio, &parent.directio);
        self.gzip.merge(&parent.gzip);
        self.proxy.merge(&parent.proxy);
        self.open_file_cache.merge(&parent.open_file_cache);
        self.m.merge(&parent.m);
        self.content = Content::of(self);
    }

    /// Sets the defaults at the top (http) level, so every level below inherits them.
    fn set_defaults(&mut self, prefix: &std::path::Path) {
        self.root.get_or_insert_with(|| DocRoot {
            alias: false,
            path: prefix.join("html"),
            template: None,
            alias_len: None,
            prefix: prefix.to_path_buf(),
        });
        self.index
            .get_or_insert_with(|| vec![IndexName::new("index.html")]);
        self.types.get_or_insert_with(|| Arc::new(default_types()));
        self.default_type.get_or_insert_with(|| "text/plain".into());
    }

    /// The document root (after merge, always set).
    pub fn doc_root(&self) -> &DocRoot {
        self.root
            .as_ref()
            .expect("set at http level by set_defaults")
    }

    /// `$document_root` without variables.
    pub fn root(&self) -> &std::path::Path {
        self.doc_root().base()
    }

    /// `directio` threshold, if on.
    pub fn directio(&self) -> Option<u64> {
        self.directio.flatten()
    }

    /// `max_ranges` (unset: unlimited).
    pub fn max_ranges(&self) -> Option<u64> {
        self.max_ranges
    }

    pub fn index(&self) -> &[IndexName] {
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

    /// The access logs in force (empty with `access_log off`).
    pub fn access_logs(&self) -> &[Arc<access_log::AccessLog>] {
        self.access_log
            .as_deref()
            .map(Vec::as_slice)
            .unwrap_or_default()
    }
}

/// nginx's built-in types when no `types` block is given.
fn default_types() -> shoal_io::fxhash::FxHashMap<String, String> {
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

pub(crate) fn srv_conf<'a>(s: &'a mut Scope<'_>) -> &'a mut SrvConf {
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
        if let Some(re) = a.value.strip_prefix('~') {
            // nginx compiles server name regexes caseless; captures become `$1`.. and named
            // variables for the request.
            let compiled = shoal_pcre::RegexBuilder::new(re)
                .caseless(true)
                .build()
                .map_err(|e| err(d, e.to_string()))?;
            for n in compiled.capture_names().flatten() {
                crate::variables::declare(n);
            }
            srv.name_regexes.push(compiled);
            srv.names.push(a.value.clone());
            continue;
        }
        let name = a.value.to_ascii_lowercase();
        if name.is_empty() && !a.quoted {
            continue;
        }
        srv.names.push(name);
    }
    Ok(())
}

fn set_types(b: &mut Builder, d: &Directive, s: &mut Scope<'_>) -> Result<(), Error> {
    let lc = loc_conf(s);
    let mut map: shoal_io::fxhash::FxHashMap<String, String> = match &lc.types {
        Some(t) => (**t).clone(),
        None => Default::default(),
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
            // nginx warns even when the type is the same (a `types` block repeating an
            // included `mime.types` line does).
            if let Some(prev) = map.get(&ext) {
                b.warn(
                    format!(
                        "duplicate extension \"{ext}\", content type: \"{ty}\", previous content type: \"{prev}\""
                    ),
                    &line.span,
                );
            }
            map.insert(ext, ty.clone());
        }
    }
    // nginx builds a types table where the block is: its longest key is checked once merged.
    lc.hash_sizes.own_types = map.keys().map(String::len).max();
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
        proxy_cache::resolve_temp_paths(
            &mut self.cache_paths,
            self.loc.proxy.temp_path.as_ref().map(|t| &t.path),
            prefix,
        );
        // nginx opens its default `logs/access.log` only for a server that ends up without
        // an `access_log` of its own or from http (its merge of a server's level): a
        // configuration whose every server names its log never opens (or needs) the default.
        let mut default_logs = None;
        self.loc.set_defaults(prefix);
        charset::finish(b, &mut self.loc.charset);
        let http_types = self
            .loc
            .types
            .as_ref()
            .and_then(|t| t.keys().map(String::len).max());
        hash_sizes::check_level(&self.loc.hash_sizes, Some(http_types.unwrap_or(0)), true)?;
        hash_sizes::check_variables(&self.loc.hash_sizes)?;
        let default_port = if crate::privileges::started_as_root() {
            80
        } else {
            8000
        };
        for u in &self.upstreams {
            crate::upstream::resolve::link(u, &self.loc.resolver)?;
        }
        for srv in &mut self.servers {
            srv.srv.merge(&self.srv);
            srv.loc.merge(&self.loc);
            if srv.loc.access_log.is_none() {
                if default_logs.is_none() {
                    default_logs =
                        Some(access_log::default_logs(b).map_err(|m| Error::new(m, None))?);
                }
                srv.loc.access_log = default_logs.clone();
            }
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
            for b in &mut srv.if_blocks {
                b.finish(&srv.loc);
            }
            charset::check(&srv.loc.charset)?;
            hash_sizes::check_level(&srv.loc.hash_sizes, None, true)?;
            for l in srv.locations.iter().chain(srv.if_blocks.iter()) {
                l.each_loc(&mut |lc| {
                    charset::check(&lc.charset)?;
                    hash_sizes::check_level(&lc.hash_sizes, None, false)?;
                    proxy_cache::check(&lc.proxy.up, "proxy", &self.cache_paths, None)?;
                    proxy_cache::check(&lc.fastcgi.up, "fastcgi", &self.cache_paths, None)?;
                    proxy_cache::check(&lc.uwsgi.up, "uwsgi", &self.cache_paths, None)?;
                    proxy_cache::check(&lc.scgi.up, "scgi", &self.cache_paths, None)?;
                    proxy::link_all(lc, &self.upstreams)?;
                    uwsgi::link(lc)?;
                    if let Some(p) = &lc.fastcgi.pass {
                        p.target.link(0, &p.span, &self.upstreams)?;
                    }
                    grpc::link(lc, &self.upstreams)?;
                    for p in [&lc.uwsgi.pass, &lc.scgi.pass, &lc.memcached.pass]
                        .into_iter()
                        .flatten()
                    {
                        p.target.link(0, &p.span, &self.upstreams)?;
                    }
                    Ok(())
                })?;
            }
        }
        self.check_server_names()?;
        crate::tls::finish(self, b)
    }

    /// nginx's server names table, built for an address several servers share: its exact
    /// names against `server_names_hash_*`.
    fn check_server_names(&self) -> Result<(), Error> {
        let mut by_addr: std::collections::BTreeMap<_, Vec<&ServerConf>> = Default::default();
        for srv in &self.servers {
            for l in &srv.listen {
                by_addr.entry(&l.addr).or_default().push(srv);
            }
        }
        for servers in by_addr.values().filter(|s| s.len() > 1) {
            let names: Vec<usize> = servers
                .iter()
                .flat_map(|s| s.names.iter())
                .filter(|n| !n.is_empty() && !n.starts_with(['~', '.']) && !n.contains('*'))
                .map(String::len)
                .collect();
            hash_sizes::check_server_names(&self.loc.hash_sizes, &names)?;
        }
        Ok(())
    }

    /// Every listen of every server.
    pub fn listens(&self) -> Vec<&ListenConf> {
        self.servers.iter().flat_map(|s| s.listen.iter()).collect()
    }
}
