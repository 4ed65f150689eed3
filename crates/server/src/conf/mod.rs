//! From the parsed tree to a typed, merged [`Config`]: the directive registry.
//!
//! Each module declares its directives in a `DIRECTIVES` table beside the code that uses them
//! (name, contexts, arity, setter), as nginx modules do; [`registry`] lists the modules. The
//! walker checks a directive the way nginx's `ngx_conf_handler` does, in the same order and with
//! the same words: unknown → not allowed here → `;`/`{` → argument count → the setter.
//! Inheritance (http → server → location) is done once, after the walk, by each module's merge.

mod names;
pub mod nginx_directives;
pub(crate) mod slots;
mod values;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use shoal_conf::{Directive, Error, Span};

pub use names::intern;
pub(crate) use slots::conf_slots;
pub use values::{parse_flag, parse_number, parse_size, parse_size_km, parse_time};

use crate::core::MainConf;
use crate::event::EventsConf;
use crate::http::{HttpConf, LocationConf, ServerConf};

/// Where a directive may appear (nginx's `NGX_*_CONF` flags).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ctx(u32);

impl Ctx {
    pub const MAIN: Ctx = Ctx(1);
    pub const EVENTS: Ctx = Ctx(1 << 1);
    pub const HTTP: Ctx = Ctx(1 << 2);
    pub const SERVER: Ctx = Ctx(1 << 3);
    pub const LOCATION: Ctx = Ctx(1 << 4);
    /// `if` in a server block.
    pub const SIF: Ctx = Ctx(1 << 5);
    /// `if` in a location block.
    pub const LIF: Ctx = Ctx(1 << 6);
    pub const UPSTREAM: Ctx = Ctx(1 << 7);
    /// `limit_except` block.
    pub const LMT: Ctx = Ctx(1 << 8);
    /// Inside `types { }`: every line is `TYPE EXT...;`.
    pub const TYPES: Ctx = Ctx(1 << 9);
    /// `stream { }`.
    pub const STREAM: Ctx = Ctx(1 << 10);
    /// `server { }` inside `stream`.
    pub const STREAM_SERVER: Ctx = Ctx(1 << 11);
    /// `upstream { }` inside `stream`.
    pub const STREAM_UPSTREAM: Ctx = Ctx(1 << 12);
    /// stream and its servers: the usual place of a stream directive.
    pub const SS: Ctx = Ctx(Self::STREAM.0 | Self::STREAM_SERVER.0);
    /// http, server and location: the usual place of a location-level directive.
    pub const HSL: Ctx = Ctx(Self::HTTP.0 | Self::SERVER.0 | Self::LOCATION.0);

    pub const fn or(self, other: Ctx) -> Ctx {
        Ctx(self.0 | other.0)
    }

    pub const fn contains(self, other: Ctx) -> bool {
        self.0 & other.0 != 0
    }
}

impl std::ops::BitOr for Ctx {
    type Output = Ctx;
    fn bitor(self, rhs: Ctx) -> Ctx {
        self.or(rhs)
    }
}

/// How many arguments a directive takes.
#[derive(Clone, Copy, Debug)]
pub enum Args {
    /// Between `min` and `max` arguments, inclusive.
    Take(usize, usize),
    /// `on` or `off` (one argument; the setter reports a wrong value in nginx's words).
    Flag,
}

impl Args {
    pub const NONE: Args = Args::Take(0, 0);
    pub const ONE: Args = Args::Take(1, 1);
    pub const TWO: Args = Args::Take(2, 2);
    pub const ONE_OR_MORE: Args = Args::Take(1, usize::MAX);
    pub const ANY: Args = Args::Take(0, usize::MAX);

    fn accepts(self, n: usize) -> bool {
        match self {
            Args::Take(min, max) => n >= min && n <= max,
            Args::Flag => n == 1,
        }
    }
}

/// The configuration level a setter writes into.
pub enum Scope<'a> {
    Main,
    Events(&'a mut EventsConf),
    Http(&'a mut HttpConf),
    Server(&'a mut ServerConf),
    Location(&'a mut LocationConf),
    /// A block whose lines are data, not directives (`types {}`); handled by its owner.
    Data,
    Upstream(&'a mut crate::upstream::conf::UpstreamConf),
    /// `stream { }` itself.
    Stream(&'a mut crate::stream::StreamConf),
    /// A `server { }` of `stream`.
    StreamServer(&'a mut crate::stream::ServerConf),
}

/// A setter: applies one directive to the scope it appears in.
pub type Setter = fn(&mut Builder, &Directive, &mut Scope<'_>) -> Result<(), Error>;

/// One entry of a module's directive table.
pub struct Command {
    pub name: &'static str,
    pub ctx: Ctx,
    pub args: Args,
    /// Takes a `{ ... }` block.
    pub block: bool,
    pub set: Setter,
}

impl Command {
    /// A simple directive (`name args;`).
    pub const fn new(name: &'static str, ctx: Ctx, args: Args, set: Setter) -> Command {
        Command {
            name,
            ctx,
            args,
            block: false,
            set,
        }
    }

    /// A block directive (`name args { ... }`).
    pub const fn block(name: &'static str, ctx: Ctx, args: Args, set: Setter) -> Command {
        Command {
            name,
            ctx,
            args,
            block: true,
            set,
        }
    }
}

/// Every module's directive table. A new module adds its table here.
fn registry() -> &'static HashMap<&'static str, Vec<&'static Command>> {
    static REGISTRY: OnceLock<HashMap<&'static str, Vec<&'static Command>>> = OnceLock::new();
    REGISTRY.get_or_init(|| {
        let modules: &[&'static [Command]] = &[
            crate::core::DIRECTIVES,
            crate::event::DIRECTIVES,
            crate::process_init::DIRECTIVES,
            crate::log::DIRECTIVES,
            crate::http::DIRECTIVES,
            crate::http::directives::DIRECTIVES,
            crate::http::aio::DIRECTIVES,
            crate::http::stub_status::DIRECTIVES,
            crate::http::empty_gif::DIRECTIVES,
            crate::http::gzip::DIRECTIVES,
            crate::http::rewrite::DIRECTIVES,
            crate::http::map::DIRECTIVES,
            crate::http::geo::DIRECTIVES,
            crate::http::split_clients::DIRECTIVES,
            crate::http::open_file_cache::DIRECTIVES,
            crate::http::proxy::DIRECTIVES,
            crate::http::proxy::ssl::DIRECTIVES,
            crate::http::proxy::ssl::GRPC_DIRECTIVES,
            crate::http::proxy::ssl::UWSGI_DIRECTIVES,
            crate::http::proxy_cache::DIRECTIVES,
            crate::upstream::conf::DIRECTIVES,
            crate::listen::DIRECTIVES,
            crate::tls::DIRECTIVES,
            crate::pending::DIRECTIVES,
            crate::stream::DIRECTIVES,
        ];
        let mut map: HashMap<&'static str, Vec<&'static Command>> = HashMap::new();
        for table in modules.iter().chain(crate::http::modules::DIRECTIVE_TABLES) {
            for cmd in table.iter() {
                map.entry(cmd.name).or_default().push(cmd);
            }
        }
        map
    })
}

/// Whether shoal has an implementation of a directive (used by tests and `-V`).
pub fn is_known(name: &str) -> bool {
    registry().contains_key(name)
}

/// A non-fatal note produced while building (`[warn] ... in FILE:LINE`, or without the place
/// for what nginx logs once the configuration is read, as its stapling warnings).
#[derive(Clone, Debug)]
pub struct Warning {
    pub message: String,
    pub span: Option<Span>,
}

/// The state of one configuration being built.
pub struct Builder {
    pub main: MainConf,
    pub events: Option<EventsConf>,
    pub http: Option<HttpConf>,
    pub stream: Option<crate::stream::StreamConf>,
    pub error_logs: Vec<crate::log::ErrorLogConf>,
    /// Every listen address seen so far, with whether it had socket options / default_server
    /// (nginx reports a second set of options or a second default server at once).
    pub listens: Vec<(crate::listen::ListenAddr, bool, bool)>,
    /// nginx's prefix (`-p`): relative paths in directives resolve against it.
    pub prefix: PathBuf,
    /// The directory of the main configuration file (relative `include`s resolve against it).
    pub conf_prefix: PathBuf,
    pub warnings: Vec<Warning>,
    /// `log_format`s and open access log files, shared by every `access_log` of this
    /// configuration.
    pub formats: crate::http::access_log::Formats,
    /// Pools named by `aio threads=NAME`, checked once everything is read.
    pub pool_refs: Vec<(String, Span)>,
    /// The shared memory zones `limit_req` and `limit_conn` name, checked once everything is
    /// read.
    pub shm_zones: crate::http::limit_zone::ShmZones,
    /// The charsets `charset`, `source_charset` and `charset_map` name, and the maps.
    pub charsets: crate::http::charset::table::Charsets,
    /// The temporary paths read so far, with their levels and where (nginx refuses one name
    /// with two sets of levels).
    pub temp_paths: Vec<(PathBuf, Vec<usize>, Span)>,
}

impl Builder {
    pub fn new(prefix: PathBuf, conf_prefix: PathBuf) -> Builder {
        Builder {
            main: MainConf::default(),
            events: None,
            http: None,
            stream: None,
            error_logs: Vec::new(),
            listens: Vec::new(),
            prefix,
            conf_prefix,
            warnings: Vec::new(),
            formats: Default::default(),
            pool_refs: Vec::new(),
            shm_zones: Default::default(),
            charsets: Default::default(),
            temp_paths: Vec::new(),
        }
    }

    /// A path from a directive, resolved against the prefix as nginx does.
    pub fn full_path(&self, p: &str) -> PathBuf {
        let path = Path::new(p);
        if path.is_absolute() {
            path.to_path_buf()
        } else {
            self.prefix.join(path)
        }
    }

    pub fn warn(&mut self, message: impl Into<String>, span: &Span) {
        self.warnings.push(Warning {
            message: message.into(),
            span: Some(span.clone()),
        });
    }

    /// A warning nginx logs after reading the configuration, without `in FILE:LINE`.
    pub fn warn_unplaced(&mut self, message: impl Into<String>) {
        self.warnings.push(Warning {
            message: message.into(),
            span: None,
        });
    }

    /// Applies a list of directives in context `ctx`.
    pub fn walk(
        &mut self,
        dirs: &[Directive],
        ctx: Ctx,
        scope: &mut Scope<'_>,
    ) -> Result<(), Error> {
        for d in dirs {
            self.apply(d, ctx, scope)?;
        }
        Ok(())
    }

    fn apply(&mut self, d: &Directive, ctx: Ctx, scope: &mut Scope<'_>) -> Result<(), Error> {
        let Some(cmds) = registry().get(d.name.as_str()) else {
            return self.absent(d);
        };
        let Some(cmd) = cmds.iter().find(|c| c.ctx.contains(ctx)) else {
            return Err(err(
                d,
                format!("\"{}\" directive is not allowed here", d.name),
            ));
        };
        if !cmd.block && d.block.is_some() {
            return Err(err(
                d,
                format!("directive \"{}\" is not terminated by \";\"", d.name),
            ));
        }
        if cmd.block && d.block.is_none() {
            return Err(err(
                d,
                format!("directive \"{}\" has no opening \"{{\"", d.name),
            ));
        }
        if !cmd.args.accepts(d.args.len()) {
            return Err(invalid_args(d));
        }
        if matches!(cmd.args, Args::Flag) && parse_flag(&d.args[0].value).is_none() {
            return Err(err(
                d,
                format!(
                    "invalid value \"{}\" in \"{}\" directive, it must be \"on\" or \"off\"",
                    d.args[0].value, d.name
                ),
            ));
        }
        (cmd.set)(self, d, scope)
    }

    /// A name the registry does not have: an nginx directive shoal lacks, or unknown.
    fn absent(&mut self, d: &Directive) -> Result<(), Error> {
        use nginx_directives::Absent;
        match nginx_directives::lookup(&d.name) {
            Some((module, Absent::Inert)) => {
                self.warn(
                    format!(
                        "\"{}\" directive of {module} is not supported by shoal and has no effect",
                        d.name
                    ),
                    &d.span,
                );
                Ok(())
            }
            Some((module, Absent::Unsupported)) => Err(err(
                d,
                format!(
                    "\"{}\" directive of {module} is not supported by shoal",
                    d.name
                ),
            )),
            None => Err(err(d, format!("unknown directive \"{}\"", d.name))),
        }
    }
}

/// An error located at a directive.
pub fn err(d: &Directive, message: impl Into<String>) -> Error {
    Error::new(message, Some(d.span.clone()))
}

/// nginx's answer for a setter's complaint: `"NAME" directive MESSAGE`.
pub fn directive_err(d: &Directive, what: &str) -> Error {
    err(d, format!("\"{}\" directive {what}", d.name))
}

/// `invalid number of arguments in "NAME" directive`.
pub fn invalid_args(d: &Directive) -> Error {
    err(
        d,
        format!("invalid number of arguments in \"{}\" directive", d.name),
    )
}

/// `"NAME" directive is duplicate`.
pub fn duplicate(d: &Directive) -> Error {
    directive_err(d, "is duplicate")
}

/// `invalid value "V"` (nginx's wording for enumerated values, `ngx_conf_set_enum_slot`).
pub fn invalid_value(d: &Directive, v: &str) -> Error {
    err(d, format!("invalid value \"{v}\""))
}

/// Sets an unset field, or fails with `is duplicate` as nginx's slot setters do.
pub fn set_once<T>(slot: &mut Option<T>, value: T, d: &Directive) -> Result<(), Error> {
    if slot.is_some() {
        return Err(duplicate(d));
    }
    *slot = Some(value);
    Ok(())
}

/// The first argument as a flag (the registry checked it for `Args::Flag`).
pub fn flag_arg(d: &Directive) -> bool {
    parse_flag(&d.args[0].value).unwrap_or(false)
}

/// The first argument as a time, or `"NAME" directive invalid value`.
pub fn time_arg(d: &Directive, i: usize) -> Result<std::time::Duration, Error> {
    parse_time(&d.args[i].value).ok_or_else(|| directive_err(d, "invalid value"))
}

/// An argument as a size, or `"NAME" directive invalid value`.
pub fn size_arg(d: &Directive, i: usize) -> Result<u64, Error> {
    parse_size(&d.args[i].value).ok_or_else(|| directive_err(d, "invalid value"))
}

/// An argument as a number, or `"NAME" directive invalid number`.
pub fn number_arg(d: &Directive, i: usize) -> Result<u64, Error> {
    parse_number(&d.args[i].value).ok_or_else(|| directive_err(d, "invalid number"))
}

/// `NUMBER SIZE` of nginx's buffer directives (`output_buffers`, `proxy_buffers`, `gzip_buffers`,
/// `large_client_header_buffers`), as its `ngx_conf_set_bufs_slot` reads them: anything but a
/// positive number and a positive size is `"NAME" directive invalid value`.
pub fn bufs_arg(d: &Directive) -> Result<(usize, usize), Error> {
    let invalid = || directive_err(d, "invalid value");
    let n = parse_number(&d.args[0].value)
        .filter(|n| *n > 0)
        .ok_or_else(invalid)?;
    let size = parse_size(&d.args[1].value)
        .filter(|s| *s > 0)
        .ok_or_else(invalid)?;
    Ok((n as usize, size as usize))
}

/// Merges an inherited value: unset here → the parent's.
pub fn merge<T: Clone>(child: &mut Option<T>, parent: &Option<T>) {
    if child.is_none() {
        child.clone_from(parent);
    }
}
