//! Variables: `$name` and `${name}` in directive arguments, compiled once when the configuration
//! is read (an unknown name is `[emerg] unknown "name" variable`, as in nginx) and evaluated
//! lazily per request: nothing is computed for a variable no template uses.
//!
//! A [`Template`] is literal text and variable references. [`Vars`] is what a request offers to
//! evaluate them: the request, its connection, the chosen server and location, and, once the
//! answer is sent, the response (for `$status`, `$body_bytes_sent`, `$sent_http_*` in logs).
//!
//! Variables a configuration computes (`map`, `split_clients`) are resolved the way nginx
//! resolves variable indexes: when the configuration has been read. Each template reference to
//! a declared name holds a slot ([`UserVar`]) that [`end_config`] points at the definition, which
//! the `http` block owns ([`crate::http::HttpConf::variables`]); so a request needs nothing but
//! its templates to evaluate them, and a reload's generation never sees another's definitions.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::fmt::Write as _;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::{Arc, OnceLock, Weak};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use shoal_http::Request;

/// A variable reference, resolved at configuration time.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Var {
    Uri,
    RequestUri,
    Args,
    IsArgs,
    Host,
    Hostname,
    RemoteAddr,
    RemotePort,
    RemoteUser,
    ServerAddr,
    ServerPort,
    ServerName,
    ServerProtocol,
    Scheme,
    Request,
    RequestMethod,
    RequestLength,
    RequestTime,
    RequestFilename,
    DocumentRoot,
    RealpathRoot,
    ContentType,
    ContentLength,
    Status,
    BodyBytesSent,
    BytesSent,
    Connection,
    ConnectionRequests,
    Msec,
    Pid,
    TimeLocal,
    TimeIso8601,
    ConnectionsActive,
    ConnectionsReading,
    ConnectionsWriting,
    ConnectionsWaiting,
    /// `$arg_NAME`
    Arg(String),
    /// `$http_NAME` (the name with `_` for `-`, lowercase)
    Http(String),
    /// `$sent_http_NAME`
    SentHttp(String),
    /// `$cookie_NAME`
    Cookie(String),
    /// `$1`..`$9`: a regex capture of the last match.
    Capture(usize),
    /// A variable the configuration declares: `set $name`, a named regex capture
    /// `(?<name>...)`, `map`, `split_clients`. Undeclared names are reported when the whole
    /// configuration has been read, as nginx does.
    User(UserVar),
    /// Variables of the upstream and proxy modules (`$upstream_cache_status`,
    /// `$upstream_addr`, `$upstream_http_NAME`, `$proxy_host`, ...): known names whose value,
    /// for a request that was not proxied, is "not found", as in nginx.
    Upstream(String),
    /// `$proxy_add_x_forwarded_for`: the client's `X-Forwarded-For` with `$remote_addr` added.
    ProxyAddXForwardedFor,
    /// `$https`: `on` on a TLS connection, else empty.
    Https,
    /// The ssl module's `$ssl_*` (the name without `$`): "not found" on a plain connection.
    Ssl(&'static str),
    /// A variable of a module in [`crate::http::modules`] (`$limit_req_status`): the value the
    /// module set for the request, if any.
    Module(&'static str),
}

impl Var {
    /// Whether the variable's value is made of characters no log escaping changes (numbers,
    /// times, addresses): written into a log line without the escaping scan.
    fn log_clean(&self) -> bool {
        matches!(
            self,
            Var::Status
                | Var::BodyBytesSent
                | Var::BytesSent
                | Var::Connection
                | Var::ConnectionRequests
                | Var::Msec
                | Var::Pid
                | Var::TimeLocal
                | Var::TimeIso8601
                | Var::RemoteAddr
                | Var::RemotePort
                | Var::ServerPort
                | Var::RequestLength
                | Var::RequestTime
        )
    }

    /// The variable for `name`, or `None` if shoal has no such variable.
    pub fn lookup(name: &str) -> Option<Var> {
        Some(match name {
            "uri" | "document_uri" => Var::Uri,
            "request_uri" => Var::RequestUri,
            "args" | "query_string" => Var::Args,
            "is_args" => Var::IsArgs,
            "host" => Var::Host,
            "hostname" => Var::Hostname,
            "remote_addr" => Var::RemoteAddr,
            "remote_port" => Var::RemotePort,
            "remote_user" => Var::RemoteUser,
            "server_addr" => Var::ServerAddr,
            "server_port" => Var::ServerPort,
            "server_name" => Var::ServerName,
            "server_protocol" => Var::ServerProtocol,
            "scheme" => Var::Scheme,
            "request" => Var::Request,
            "request_method" => Var::RequestMethod,
            "request_length" => Var::RequestLength,
            "request_time" => Var::RequestTime,
            "request_filename" => Var::RequestFilename,
            "document_root" => Var::DocumentRoot,
            "realpath_root" => Var::RealpathRoot,
            "content_type" => Var::ContentType,
            "content_length" => Var::ContentLength,
            "status" => Var::Status,
            "body_bytes_sent" => Var::BodyBytesSent,
            "bytes_sent" => Var::BytesSent,
            "connection" => Var::Connection,
            "connection_requests" => Var::ConnectionRequests,
            "msec" => Var::Msec,
            "pid" => Var::Pid,
            "time_local" => Var::TimeLocal,
            "time_iso8601" => Var::TimeIso8601,
            "proxy_add_x_forwarded_for" => Var::ProxyAddXForwardedFor,
            "https" => Var::Https,
            "upstream_addr"
            | "upstream_status"
            | "upstream_response_time"
            | "upstream_connect_time"
            | "upstream_header_time"
            | "upstream_response_length"
            | "upstream_bytes_received"
            | "upstream_bytes_sent"
            | "upstream_cache_status"
            | "upstream_cache_last_modified"
            | "upstream_cache_etag"
            | "upstream_queue_time"
            | "proxy_host"
            | "proxy_port"
            | "gzip_ratio" => Var::Upstream(name.to_string()),
            "connections_active" => Var::ConnectionsActive,
            "connections_reading" => Var::ConnectionsReading,
            "connections_writing" => Var::ConnectionsWriting,
            "connections_waiting" => Var::ConnectionsWaiting,
            _ => {
                if let Some(n) = name.strip_prefix("arg_") {
                    Var::Arg(n.to_string())
                } else if let Some(n) = name.strip_prefix("http_") {
                    Var::Http(n.to_ascii_lowercase())
                } else if let Some(n) = name.strip_prefix("sent_http_") {
                    Var::SentHttp(n.to_ascii_lowercase())
                } else if name.starts_with("upstream_http_")
                    || name.starts_with("upstream_cookie_")
                    || name.starts_with("upstream_trailer_")
                {
                    Var::Upstream(name.to_string())
                } else if let Some(n) = name.strip_prefix("cookie_") {
                    Var::Cookie(n.to_string())
                } else if name.len() == 1 && name.as_bytes()[0].is_ascii_digit() {
                    Var::Capture((name.as_bytes()[0] - b'0') as usize)
                } else if let Some(&n) = crate::tls::info::VARIABLES.iter().find(|&&n| n == name) {
                    Var::Ssl(n)
                } else if let Some(n) = crate::http::modules::has_variable(name) {
                    Var::Module(n)
                } else {
                    return None;
                }
            }
        })
    }
}

/// A variable computed when used, from others (`map`, `split_clients`).
pub trait Compute: Send + Sync + std::fmt::Debug {
    /// Appends the value; false when it has none ("not found").
    fn compute(&self, vars: &Vars<'_>, out: &mut String) -> bool;
}

/// Where a template finds the definition of a computed variable, once the configuration is read.
type Slot = Arc<OnceLock<Weak<dyn Compute>>>;

/// A reference to a declared variable: its name, and the definition if `map` or
/// `split_clients` computes it (the `http` block owns definitions; templates only point at them,
/// so a map that uses itself is no reference cycle).
#[derive(Clone)]
pub struct UserVar {
    pub name: String,
    slot: Slot,
}

impl UserVar {
    /// The reference of a template being compiled: one slot per name per configuration.
    fn new(name: &str) -> UserVar {
        let slot = SLOTS.with(|s| s.borrow_mut().entry(name.to_string()).or_default().clone());
        UserVar {
            name: name.to_string(),
            slot,
        }
    }

    /// The definition, when a `map` or `split_clients` computes this variable.
    pub fn computed(&self) -> Option<Arc<dyn Compute>> {
        self.slot.get().and_then(Weak::upgrade)
    }
}

impl From<&str> for UserVar {
    /// A reference outside any configuration (never computed).
    fn from(name: &str) -> UserVar {
        UserVar {
            name: name.to_string(),
            slot: Slot::default(),
        }
    }
}

impl PartialEq for UserVar {
    fn eq(&self, other: &UserVar) -> bool {
        self.name == other.name
    }
}

impl Eq for UserVar {}

impl std::fmt::Debug for UserVar {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "${}", self.name)
    }
}

/// Whether `name` is one of shoal's own variables, which a configuration may not define
/// (nginx: `the duplicate "uri" variable`). Prefixed families (`$http_x`, `$arg_x`, ...) and
/// `$args` are not: nginx lets `map` and `split_clients` take those over.
pub fn is_builtin(name: &str) -> bool {
    match Var::lookup(name) {
        None | Some(Var::Arg(_) | Var::Http(_) | Var::SentHttp(_) | Var::Cookie(_)) => false,
        Some(Var::Capture(_)) => false,
        Some(Var::Upstream(n)) => !["upstream_http_", "upstream_cookie_", "upstream_trailer_"]
            .iter()
            .any(|p| n.starts_with(p)),
        Some(_) => name != "args",
    }
}

/// One piece of a template.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Piece {
    Text(String),
    Var(Var),
}

/// A directive argument with variables, compiled.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct Template {
    pub pieces: Vec<Piece>,
}

impl Template {
    /// Whether a `$sent_http_*` variable is in it.
    pub fn uses_sent_headers(&self) -> bool {
        self.pieces
            .iter()
            .any(|p| matches!(p, Piece::Var(Var::SentHttp(_))))
    }

    /// Whether evaluating it may read the answer's headers: `$sent_http_*`, or a variable of
    /// the configuration's (a `map` may take its value from one).
    pub fn may_read_sent_headers(&self) -> bool {
        self.pieces
            .iter()
            .any(|p| matches!(p, Piece::Var(Var::SentHttp(_) | Var::User(_))))
    }

    /// Compiles `s`. Errors are nginx's: `invalid variable name in "..."`,
    /// `unknown "name" variable`.
    pub fn compile(s: &str) -> Result<Template, String> {
        let b = s.as_bytes();
        let mut pieces = Vec::new();
        let mut text = String::new();
        let mut i = 0;
        while i < b.len() {
            if b[i] != b'$' {
                let next = memchr::memchr(b'$', &b[i..]).map_or(b.len(), |p| i + p);
                text.push_str(&s[i..next]);
                i = next;
                continue;
            }
            i += 1;
            let braced = b.get(i) == Some(&b'{');
            if braced {
                i += 1;
            }
            let start = i;
            if b.get(i).is_some_and(|c| c.is_ascii_digit()) && !braced {
                i += 1;
            } else {
                while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_') {
                    i += 1;
                }
            }
            let name = &s[start..i];
            if braced {
                if b.get(i) != Some(&b'}') {
                    return Err(format!(
                        "the closing bracket in \"{name}\" variable is missing"
                    ));
                }
                i += 1;
            }
            if name.is_empty() {
                return Err(format!("invalid variable name in \"{s}\""));
            }
            // A name `map`/`split_clients` defined takes over a built-in family's (`$http_x`),
            // as in nginx; for uses written before the definition the built-in stays.
            let computed = !name.starts_with(|c: char| c.is_ascii_digit()) && is_defined(name);
            let var = match Var::lookup(name).filter(|_| !computed) {
                Some(v) => v,
                None => {
                    note_used(name);
                    Var::User(UserVar::new(name))
                }
            };
            if !text.is_empty() {
                pieces.push(Piece::Text(std::mem::take(&mut text)));
            }
            pieces.push(Piece::Var(var));
        }
        if !text.is_empty() {
            pieces.push(Piece::Text(text));
        }
        Ok(Template { pieces })
    }

    /// Whether the template has no variables.
    pub fn is_static(&self) -> bool {
        self.pieces.iter().all(|p| matches!(p, Piece::Text(_)))
    }

    /// The template's value when it is one variable alone whose value is a constant text
    /// (`add_header X-Cache-Status $upstream_cache_status`): nothing to build or copy.
    pub fn constant_value(&self, vars: &Vars<'_>) -> Option<&'static str> {
        match self.pieces.as_slice() {
            [Piece::Var(Var::Upstream(name))] => vars.upstream?.constant(name),
            _ => None,
        }
    }
}

thread_local! {
    /// While a configuration is read: names used but not built in, and names declared.
    static USED: RefCell<Vec<String>> = const { RefCell::new(Vec::new()) };
    static DECLARED: RefCell<Vec<String>> = const { RefCell::new(Vec::new()) };
    /// The slot of each name templates use, and the definitions of computed variables (the last
    /// one of a name wins, as in nginx, where a second `map` replaces the first's handler).
    static SLOTS: RefCell<HashMap<String, Slot>> = RefCell::new(HashMap::new());
    static DEFINED: RefCell<HashMap<String, Weak<dyn Compute>>> = RefCell::new(HashMap::new());
}

fn note_used(name: &str) {
    USED.with(|u| u.borrow_mut().push(name.to_string()));
}

/// Declares a variable (`set $name`, a named capture).
pub fn declare(name: &str) {
    DECLARED.with(|d| d.borrow_mut().push(name.to_string()));
}

/// Declares a computed variable (`map`, `split_clients`). The caller keeps `def` alive for as
/// long as the configuration is (templates hold weak references).
pub fn define(name: &str, def: &Arc<dyn Compute>) {
    declare(name);
    DEFINED.with(|d| d.borrow_mut().insert(name.to_string(), Arc::downgrade(def)));
}

fn is_defined(name: &str) -> bool {
    DEFINED.with(|d| d.borrow().contains_key(name))
}

/// Starts reading a configuration: forgets the names of the previous one.
pub fn begin_config() {
    USED.with(|u| u.borrow_mut().clear());
    DECLARED.with(|d| d.borrow_mut().clear());
    SLOTS.with(|s| s.borrow_mut().clear());
    DEFINED.with(|d| d.borrow_mut().clear());
    read_hostname();
}

/// Ends reading: points every template's reference to a computed variable at its definition,
/// then reports the first used name nothing declares, in nginx's words
/// (`unknown "name" variable`, reported without a place, as nginx does).
pub fn end_config() -> Result<(), String> {
    let defined = DEFINED.with(|d| std::mem::take(&mut *d.borrow_mut()));
    let slots = SLOTS.with(|s| std::mem::take(&mut *s.borrow_mut()));
    for (name, slot) in slots {
        if let Some(def) = defined.get(&name) {
            let _ = slot.set(def.clone());
        }
    }
    let declared: std::collections::HashSet<String> =
        DECLARED.with(|d| d.borrow().iter().cloned().collect());
    let used = USED.with(|u| std::mem::take(&mut *u.borrow_mut()));
    for name in used {
        if !declared.contains(&name) {
            return Err(format!("unknown \"{name}\" variable"));
        }
    }
    Ok(())
}

/// A regex match's captures: numbered ones (`$1`..`$9`) and named ones (variables).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Captures {
    pub numbered: Vec<Option<String>>,
    pub named: Vec<(String, String)>,
}

/// Matches `regex` against `text`, keeping its captures (location, `server_name`, `rewrite`
/// and `if` regexes all feed variables this way).
pub fn capture(regex: &shoal_pcre::Regex, text: &str) -> Option<Captures> {
    let caps = regex.captures(text)?;
    Some(Captures {
        numbered: caps
            .iter()
            .map(|m| m.map(|m| m.as_str().to_string()))
            .collect(),
        named: regex
            .capture_names()
            .flatten()
            .filter_map(|n| {
                caps.name(n)
                    .map(|m| (n.to_string(), m.as_str().to_string()))
            })
            .collect(),
    })
}

/// How a value is escaped where it is written (`log_format ... escape=`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Escape {
    /// `"`, `\`, control characters and bytes ≥ 0x7F as `\xXX`.
    #[default]
    Default,
    /// JSON string escaping.
    Json,
    None,
}

/// The response, once sent (for log variables).
#[derive(Clone, Debug, Default)]
pub struct Sent {
    pub status: u16,
    pub body_bytes: u64,
    pub bytes: u64,
    /// Response headers, lowercase names.
    pub headers: Vec<(String, String)>,
}

/// What a request offers to variables.
#[derive(Clone)]
pub struct Vars<'a> {
    pub req: Option<&'a Request>,
    /// The URI after internal redirects (`$uri`), when it differs from the request's.
    pub uri: Option<&'a str>,
    pub peer: Option<SocketAddr>,
    pub local: Option<SocketAddr>,
    pub server_name: &'a str,
    pub document_root: Option<&'a Path>,
    pub request_filename: Option<&'a Path>,
    pub connection: u64,
    pub connection_requests: u64,
    pub start: Instant,
    pub request_length: u64,
    pub sent: Option<&'a Sent>,
    pub captures: &'a [Option<String>],
    /// Values of declared variables (`set`, named captures) for this request.
    pub user: Option<&'a std::collections::HashMap<String, String>>,
    /// `root`/`alias` in force, for `$request_filename`.
    pub doc_root: Option<&'a crate::http::DocRoot>,
    /// The arguments after rewrites (`Some(None)`: none); `None`: the request's own.
    pub args: Option<Option<&'a str>>,
    /// The request line of a request refused before it was parsed (`$request` in the log).
    pub request_line: Option<&'a str>,
    /// A proxied request's upstream exchange (`$upstream_*`, `$proxy_host`, `$proxy_port`).
    pub upstream: Option<&'a crate::http::proxy::handler::Record>,
    /// What the connection's TLS handshake settled (`$https`, `$scheme`, `$ssl_*`).
    pub tls: Option<&'a crate::tls::TlsInfo>,
    /// What the modules keep for the request (their variables' values).
    pub extras: Option<&'a crate::http::request::Extras>,
}

impl Vars<'_> {
    /// Appends the value of `v`; returns false when the variable has no value (nginx's
    /// "not found", which access logs write as `-`).
    pub fn value(&self, v: &Var, out: &mut String) -> bool {
        let req = self.req;
        match v {
            Var::Uri => match (self.uri, req) {
                (Some(u), _) => out.push_str(u),
                (None, Some(r)) => out.push_str(&shoal_http::lossy(r.path())),
                (None, None) => return false,
            },
            Var::RequestUri => match req {
                Some(r) => out.push_str(&shoal_http::lossy(r.uri())),
                None => return false,
            },
            Var::Args => match self.args {
                Some(Some(a)) => out.push_str(a),
                Some(None) => return false,
                None => match req.and_then(|r| r.query()) {
                    Some(q) => out.push_str(&shoal_http::lossy(q)),
                    None => return false,
                },
            },
            Var::IsArgs => {
                // nginx: `?` only when there are arguments (`GET /q?` has none).
                let has = match self.args {
                    Some(a) => a.is_some_and(|a| !a.is_empty()),
                    None => req.and_then(|r| r.query()).is_some_and(|q| !q.is_empty()),
                };
                if has {
                    out.push('?');
                }
            }
            Var::Host => match req.and_then(|r| r.host()) {
                Some(h) => out.push_str(&shoal_http::lossy(h)),
                None => out.push_str(self.server_name),
            },
            Var::Hostname => out.push_str(&HOSTNAME.read().unwrap_or_else(|e| e.into_inner())),
            Var::RemoteAddr => match self.peer {
                Some(p) => with_peer_ip_text(p.ip(), |t| out.push_str(t)),
                None => out.push_str("unix:"),
            },
            Var::RemotePort => {
                if let Some(p) = self.peer {
                    let _ = write!(out, "{}", p.port());
                }
            }
            // As nginx: the user of a `Basic` Authorization header, whatever auth_basic said.
            Var::RemoteUser => {
                let Some(c) = req
                    .and_then(|r| crate::http::auth_basic::credentials(r.header("authorization")))
                else {
                    return false;
                };
                out.push_str(&shoal_http::lossy(&c.user));
            }
            Var::Module(name) => match self.extras {
                Some(e) => return e.var(name, out),
                None => return false,
            },
            Var::ServerAddr => match self.local {
                Some(l) => {
                    let _ = write!(out, "{}", l.ip());
                }
                None => out.push_str("unix:"),
            },
            Var::ServerPort => {
                if let Some(l) = self.local {
                    let _ = write!(out, "{}", l.port());
                }
            }
            Var::ServerName => out.push_str(self.server_name),
            Var::ServerProtocol => match req {
                Some(r) => out.push_str(&String::from_utf8_lossy(r.version_text())),
                None => return false,
            },
            Var::Scheme => out.push_str(if self.tls.is_some() { "https" } else { "http" }),
            Var::Https => {
                if self.tls.is_some() {
                    out.push_str("on");
                }
            }
            Var::Ssl(name) => {
                let Some(v) = self.tls.and_then(|t| t.variable(name)) else {
                    return false;
                };
                // nginx: an empty value is "not found", but for the two it reads from static
                // strings.
                if v.is_empty() && !matches!(*name, "ssl_protocol" | "ssl_cipher") {
                    return false;
                }
                out.push_str(&v);
            }
            Var::Request => match req {
                None if self.request_line.is_some() => {
                    out.push_str(self.request_line.unwrap_or_default());
                }
                Some(r) => {
                    out.push_str(r.method());
                    out.push(' ');
                    out.push_str(&shoal_http::lossy(r.target()));
                    out.push_str(r.version().line_suffix());
                }
                None => return false,
            },
            Var::RequestMethod => match req {
                Some(r) => out.push_str(r.method()),
                None => return false,
            },
            Var::RequestLength => {
                let _ = write!(out, "{}", self.request_length);
            }
            Var::RequestTime => {
                let ms = self.start.elapsed().as_millis();
                let _ = write!(out, "{}.{:03}", ms / 1000, ms % 1000);
            }
            Var::RequestFilename => match (self.request_filename, self.doc_root) {
                (Some(p), _) => out.push_str(&p.to_string_lossy()),
                (None, Some(root)) => {
                    let uri = match (self.uri, req) {
                        (Some(u), _) => u.to_string(),
                        (None, Some(r)) => shoal_http::lossy(r.path()).into_owned(),
                        (None, None) => return false,
                    };
                    out.push_str(&root.map(&uri, Some(self)).to_string_lossy());
                }
                (None, None) => return false,
            },
            Var::DocumentRoot => match self.document_root {
                Some(p) => out.push_str(&p.to_string_lossy()),
                None => return false,
            },
            Var::RealpathRoot => match self
                .document_root
                .and_then(|p| std::fs::canonicalize(p).ok())
            {
                Some(p) => out.push_str(&p.to_string_lossy()),
                None => return false,
            },
            Var::ContentType => match req.and_then(|r| r.header("content-type")) {
                Some(v) => out.push_str(&shoal_http::lossy(v)),
                None => return false,
            },
            Var::ContentLength => match req.and_then(|r| r.header("content-length")) {
                Some(v) => out.push_str(&shoal_http::lossy(v)),
                None => return false,
            },
            Var::Status => {
                out.push_str(std::str::from_utf8(&self.status_digits()).unwrap_or("000"))
            }
            Var::BodyBytesSent => push_decimal(out, self.sent.map_or(0, |s| s.body_bytes)),
            Var::BytesSent => push_decimal(out, self.sent.map_or(0, |s| s.bytes)),
            Var::Connection => {
                let _ = write!(out, "{}", self.connection);
            }
            Var::ConnectionRequests => {
                let _ = write!(out, "{}", self.connection_requests);
            }
            Var::Msec => {
                let d = SystemTime::now()
                    .duration_since(UNIX_EPOCH)
                    .unwrap_or_default();
                let _ = write!(out, "{}.{:03}", d.as_secs(), d.subsec_millis());
            }
            Var::Pid => {
                let _ = write!(out, "{}", std::process::id());
            }
            Var::TimeLocal => with_local_time(|t| out.push_str(&t.local)),
            Var::TimeIso8601 => with_local_time(|t| out.push_str(&t.iso8601)),
            Var::ConnectionsActive => {
                let _ = write!(out, "{}", crate::status::snapshot().active());
            }
            Var::ConnectionsReading => {
                let _ = write!(out, "{}", crate::status::snapshot().reading);
            }
            Var::ConnectionsWriting => {
                let _ = write!(out, "{}", crate::status::snapshot().writing);
            }
            Var::ConnectionsWaiting => {
                let _ = write!(out, "{}", crate::status::snapshot().waiting);
            }
            Var::Arg(name) => match self
                .args
                .map(|a| a.map(str::as_bytes))
                .unwrap_or_else(|| req.and_then(|r| r.query()))
                .and_then(|q| arg(q, name))
            {
                Some(v) => out.push_str(&shoal_http::lossy(v)),
                None => return false,
            },
            Var::Http(name) => {
                let Some(values) = http_values(req, name) else {
                    return false;
                };
                let mut found = false;
                for v in values {
                    if found {
                        out.push_str(http_separator(name));
                    }
                    out.push_str(&shoal_http::lossy(v));
                    found = true;
                }
                return found;
            }
            Var::SentHttp(name) => {
                let Some(s) = self.sent else { return false };
                match s
                    .headers
                    .iter()
                    .find(|(n, _)| header_matches(n.as_bytes(), name))
                {
                    Some((_, v)) => out.push_str(v),
                    None => return false,
                }
            }
            Var::Cookie(name) => match req.and_then(|r| cookie(r, name)) {
                Some(v) => out.push_str(&v),
                None => return false,
            },
            Var::Capture(n) => match self.captures.get(*n).and_then(|c| c.as_deref()) {
                Some(v) => out.push_str(v),
                None => return false,
            },
            Var::Upstream(name) => match self.upstream {
                Some(rec) => return rec.value(name, out),
                None => return false,
            },
            Var::ProxyAddXForwardedFor => {
                let mut xff = String::new();
                if self.value(&Var::Http("x_forwarded_for".into()), &mut xff) {
                    out.push_str(&xff);
                    out.push_str(", ");
                }
                self.value(&Var::RemoteAddr, out);
            }
            // A value `set` gave wins over the definition (nginx: `set` stores into the
            // variable, which is then valid for the request).
            Var::User(u) => match self.user.and_then(|m| m.get(&u.name)) {
                Some(v) => out.push_str(v),
                None => match u.computed() {
                    Some(def) => return self.compute(&u.name, &*def, out),
                    None => return false,
                },
            },
        }
        true
    }

    /// Evaluates a computed variable, as nginx's `ngx_http_get_indexed_variable` does: at most
    /// 100 evaluations deep (deeper is `cycle while evaluating variable`, logged, and the
    /// variable not found), and, within one outermost evaluation, each variable computed once
    /// (nginx caches per request), so that a map using itself twice stays linear.
    fn compute(&self, name: &str, def: &dyn Compute, out: &mut String) -> bool {
        let key = def as *const dyn Compute as *const () as usize;
        let hit = MEMO.with(|m| {
            m.borrow()
                .iter()
                .find(|(k, _)| *k == key)
                .map(|(_, v)| v.clone())
        });
        match hit {
            Some(Some(v)) => {
                out.push_str(&v);
                return true;
            }
            Some(None) => return false,
            None => {}
        }
        let depth = DEPTH.get();
        if depth == 0 {
            crate::log::log(
                crate::log::Level::Error,
                Some(self.connection),
                format_args!(
                    "cycle while evaluating variable \"{name}\"{}",
                    self.log_ctx()
                ),
            );
            return false;
        }
        struct Restore(u32);
        impl Drop for Restore {
            fn drop(&mut self) {
                DEPTH.set(self.0);
                if self.0 == MAX_DEPTH {
                    MEMO.with(|m| m.borrow_mut().clear());
                }
            }
        }
        let _restore = Restore(depth);
        DEPTH.set(depth - 1);
        let start = out.len();
        let found = def.compute(self, out);
        if depth < MAX_DEPTH {
            let v = found.then(|| out[start..].to_string());
            MEMO.with(|m| m.borrow_mut().push((key, v)));
        }
        found
    }

    /// `, client: ..., server: ..., request: "...", host: "..."` for an error log line.
    fn log_ctx(&self) -> String {
        let mut s = String::from(", client: ");
        match self.peer {
            Some(p) => {
                let _ = write!(s, "{}", p.ip());
            }
            None => s.push_str("unix:"),
        }
        let _ = write!(s, ", server: {}", self.server_name);
        if let Some(r) = self.req {
            let _ = write!(
                s,
                ", request: \"{} {}{}\"",
                r.method(),
                shoal_http::lossy(r.target()),
                r.version().line_suffix()
            );
            if let Some(h) = r.header("host") {
                let _ = write!(s, ", host: \"{}\"", shoal_http::lossy(h));
            }
        }
        s
    }

    /// Evaluates a template (variables without a value are empty).
    pub fn eval(&self, t: &Template) -> String {
        // One allocation for the usual value: the text, and room for the variables' values.
        let hint: usize = t
            .pieces
            .iter()
            .map(|p| match p {
                Piece::Text(s) => s.len(),
                Piece::Var(_) => 32,
            })
            .sum();
        let mut out = String::with_capacity(hint);
        self.eval_into(t, &mut out);
        out
    }

    /// Evaluates a template onto the end of `out`.
    pub fn eval_into(&self, t: &Template, out: &mut String) {
        for p in &t.pieces {
            match p {
                Piece::Text(s) => out.push_str(s),
                Piece::Var(v) => {
                    self.value(v, out);
                }
            }
        }
    }

    /// Evaluates a `log_format`: values escaped; a variable without a value is written as `-`
    /// with the default escaping and as nothing with `json` and `none` (nginx's rule).
    pub fn eval_log(&self, t: &Template, escape: Escape, out: &mut Vec<u8>) {
        let mut val = String::new();
        for p in &t.pieces {
            match p {
                Piece::Text(s) => out.extend_from_slice(s.as_bytes()),
                Piece::Var(v) => {
                    let found = match self.log_value(v, escape, out) {
                        Some(found) => found,
                        None => {
                            val.clear();
                            let found = self.value(v, &mut val);
                            if v.log_clean() {
                                out.extend_from_slice(val.as_bytes());
                            } else {
                                escape_into(val.as_bytes(), escape, out);
                            }
                            found
                        }
                    };
                    if !found && escape == Escape::Default {
                        out.push(b'-');
                    }
                }
            }
        }
    }

    /// `$status`: three digits, `000` before there is an answer; nginx's codes 494–497 are
    /// the 400 they went out as.
    fn status_digits(&self) -> [u8; 3] {
        let code = self
            .sent
            .map_or(0, |s| shoal_http::status::wire_status(s.status).min(999));
        [
            b'0' + (code / 100) as u8,
            b'0' + (code / 10 % 10) as u8,
            b'0' + (code % 10) as u8,
        ]
    }

    /// Writes, escaped, the value of a variable logs usually hold (`combined`'s and the
    /// like): straight from the request's bytes, as nginx logs them (a byte that is not UTF-8
    /// is escaped as itself, not as a replacement character), and through less code than
    /// [`Vars::value`]. Returns whether the variable had a value, or `None` for the others.
    fn log_value(&self, v: &Var, escape: Escape, out: &mut Vec<u8>) -> Option<bool> {
        let req = self.req;
        Some(match v {
            Var::RemoteAddr => {
                match self.peer {
                    Some(p) => with_peer_ip_text(p.ip(), |t| out.extend_from_slice(t.as_bytes())),
                    None => out.extend_from_slice(b"unix:"),
                }
                true
            }
            Var::TimeLocal => {
                with_local_time(|t| out.extend_from_slice(t.local.as_bytes()));
                true
            }
            Var::TimeIso8601 => {
                with_local_time(|t| out.extend_from_slice(t.iso8601.as_bytes()));
                true
            }
            Var::Request => match (req, self.request_line) {
                (Some(r), _) => {
                    out.extend_from_slice(r.method().as_bytes());
                    out.push(b' ');
                    escape_into(r.target(), escape, out);
                    out.extend_from_slice(r.version().line_suffix().as_bytes());
                    true
                }
                (None, Some(line)) => {
                    escape_into(line.as_bytes(), escape, out);
                    true
                }
                (None, None) => false,
            },
            Var::RequestUri => match req {
                Some(r) => {
                    escape_into(r.uri(), escape, out);
                    true
                }
                None => false,
            },
            Var::Status => {
                out.extend_from_slice(&self.status_digits());
                true
            }
            Var::BodyBytesSent | Var::BytesSent => {
                let n = self.sent.map_or(0, |s| match v {
                    Var::BodyBytesSent => s.body_bytes,
                    _ => s.bytes,
                });
                let mut digits = [0u8; 20];
                out.extend_from_slice(shoal_http::response::decimal(n, &mut digits));
                true
            }
            Var::Http(name) => {
                let Some(values) = http_values(req, name) else {
                    return Some(false);
                };
                let mut found = false;
                for v in values {
                    if found {
                        out.extend_from_slice(http_separator(name).as_bytes());
                    }
                    escape_into(v, escape, out);
                    found = true;
                }
                found
            }
            _ => return None,
        })
    }
}

/// nginx's `ngx_http_variable_depth`: how deep computed variables may nest.
const MAX_DEPTH: u32 = 100;

thread_local! {
    /// Evaluation is synchronous on the worker's thread: how deep it is now, and the values
    /// computed so far in the outermost evaluation.
    static DEPTH: Cell<u32> = const { Cell::new(MAX_DEPTH) };
    static MEMO: RefCell<Vec<(usize, Option<String>)>> = const { RefCell::new(Vec::new()) };
}

/// The values of the request headers `$http_NAME` names, in order; `None` when there is no
/// request or its summary of names says none was sent.
fn http_values<'r>(
    req: Option<&'r Request>,
    name: &'r str,
) -> Option<impl Iterator<Item = &'r [u8]> + 'r> {
    let r = req.filter(|r| r.may_have_header(name.as_bytes()))?;
    Some(
        r.header_fields()
            .filter(move |(n, _)| header_matches(n, name))
            .map(|(_, v)| v),
    )
}

/// What joins repeated headers in `$http_NAME`: ", " (nginx), "; " for Cookie.
fn http_separator(name: &str) -> &'static str {
    if name == "cookie" {
        "; "
    } else {
        ", "
    }
}

fn header_matches(header: &[u8], var_name: &str) -> bool {
    header.len() == var_name.len()
        && header
            .iter()
            .zip(var_name.bytes())
            .all(|(&h, v)| h.to_ascii_lowercase() == v || (h == b'-' && v == b'_'))
}

/// `$arg_NAME`: the first `NAME=value` of the query string (names compared case-insensitively,
/// as nginx does).
fn arg<'q>(query: &'q [u8], name: &str) -> Option<&'q [u8]> {
    for pair in query.split(|&c| c == b'&') {
        let (k, v) = match pair.iter().position(|&c| c == b'=') {
            Some(p) => (&pair[..p], &pair[p + 1..]),
            None => (pair, &b""[..]),
        };
        if k.eq_ignore_ascii_case(name.as_bytes()) {
            return Some(v);
        }
    }
    None
}

fn cookie(r: &Request, name: &str) -> Option<String> {
    for v in r.header_all("cookie") {
        for part in v.split(|&c| c == b';') {
            let part = part.trim_ascii();
            if let Some(p) = part.iter().position(|&c| c == b'=') {
                if part[..p].eq_ignore_ascii_case(name.as_bytes()) {
                    return Some(shoal_http::lossy(&part[p + 1..]).into_owned());
                }
            }
        }
    }
    None
}

/// The bytes the default log escaping writes as `\xHH`: `"`, the backslash, and all but
/// printable ASCII.
static ESCAPED: [bool; 256] = {
    let mut t = [true; 256];
    let mut c = 0x20;
    while c < 0x7f {
        t[c] = c == b'"' as usize || c == b'\\' as usize;
        c += 1;
    }
    t
};

/// Escapes `v` into `out` as `log_format ... escape=` says.
pub fn escape_into(v: &[u8], escape: Escape, out: &mut Vec<u8>) {
    const HEX: &[u8; 16] = b"0123456789ABCDEF";
    match escape {
        Escape::None => out.extend_from_slice(v),
        Escape::Default => {
            let needs = |c: u8| ESCAPED[usize::from(c)];
            let mut rest = v;
            // The usual value has nothing to escape: its clean runs are copied whole.
            while let Some(i) = rest.iter().position(|&c| needs(c)) {
                let c = rest[i];
                out.extend_from_slice(&rest[..i]);
                out.extend_from_slice(&[
                    b'\\',
                    b'x',
                    HEX[(c >> 4) as usize],
                    HEX[(c & 15) as usize],
                ]);
                rest = &rest[i + 1..];
            }
            out.extend_from_slice(rest);
        }
        Escape::Json => {
            for &c in v {
                match c {
                    b'"' => out.extend_from_slice(b"\\\""),
                    b'\\' => out.extend_from_slice(b"\\\\"),
                    b'\n' => out.extend_from_slice(b"\\n"),
                    b'\r' => out.extend_from_slice(b"\\r"),
                    b'\t' => out.extend_from_slice(b"\\t"),
                    0x08 => out.extend_from_slice(b"\\b"),
                    0x0c => out.extend_from_slice(b"\\f"),
                    c if c < 0x20 => out.extend_from_slice(&[
                        b'\\',
                        b'u',
                        b'0',
                        b'0',
                        HEX[(c >> 4) as usize],
                        HEX[(c & 15) as usize],
                    ]),
                    c => out.push(c),
                }
            }
        }
    }
}

/// `$hostname`: read when a configuration is read, as nginx reads it at each cycle's start, and
/// kept in lower case as nginx keeps it.
static HOSTNAME: std::sync::RwLock<String> = std::sync::RwLock::new(String::new());

fn read_hostname() {
    let name = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|s| s.trim().to_ascii_lowercase())
        .unwrap_or_default();
    *HOSTNAME.write().unwrap_or_else(|e| e.into_inner()) = name;
}

/// The local time at `secs` after the epoch, and its offset from UTC in seconds.
pub(crate) fn local_tm(secs: u64) -> (libc::tm, i64) {
    let now = secs as libc::time_t;
    // SAFETY: an all-zero tm is valid for localtime_r to overwrite.
    let mut tm: libc::tm = unsafe { std::mem::zeroed() };
    // SAFETY: valid pointers for the call's duration.
    unsafe { libc::localtime_r(&now, &mut tm) };
    let off = tm.tm_gmtoff;
    (tm, off)
}

fn tz(off: i64, colon: bool) -> String {
    let sign = if off < 0 { '-' } else { '+' };
    let off = off.abs();
    if colon {
        format!("{sign}{:02}:{:02}", off / 3600, (off % 3600) / 60)
    } else {
        format!("{sign}{:02}{:02}", off / 3600, (off % 3600) / 60)
    }
}

/// `$time_local` and `$time_iso8601` of one second, formatted once for it.
struct LocalTime {
    secs: u64,
    local: String,
    iso8601: String,
}

thread_local! {
    static LOCAL_TIME: RefCell<Option<LocalTime>> = const { RefCell::new(None) };
    /// The text of the last client address written (`$remote_addr`), kept: the same few
    /// clients make most requests.
    static PEER_IP: RefCell<Option<(std::net::IpAddr, String)>> = const { RefCell::new(None) };
}

/// Calls `f` with this second's local times, formatting them when the second changed (nginx
/// too formats its cached times once per second).
fn with_local_time<R>(f: impl FnOnce(&LocalTime) -> R) -> R {
    let secs = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    LOCAL_TIME.with(|c| {
        let mut c = c.borrow_mut();
        if !matches!(&*c, Some(t) if t.secs == secs) {
            *c = None;
        }
        f(c.get_or_insert_with(|| {
            let (tm, off) = local_tm(secs);
            LocalTime {
                secs,
                local: time_local(&tm, off),
                iso8601: time_iso8601(&tm, off),
            }
        }))
    })
}

/// Calls `f` with `ip` as `$remote_addr` writes it.
fn with_peer_ip_text<R>(ip: std::net::IpAddr, f: impl FnOnce(&str) -> R) -> R {
    PEER_IP.with(|c| {
        let mut c = c.borrow_mut();
        if !matches!(&*c, Some((last, _)) if *last == ip) {
            *c = Some((ip, ip.to_string()));
        }
        f(c.as_ref().map_or("", |(_, text)| text))
    })
}

/// Appends `n` in decimal.
fn push_decimal(out: &mut String, n: u64) {
    let mut digits = [0u8; 20];
    let text = shoal_http::response::decimal(n, &mut digits);
    out.push_str(std::str::from_utf8(text).unwrap_or_default());
}

/// `$time_local`: `21/Nov/2026:10:00:00 +0000`.
fn time_local(tm: &libc::tm, off: i64) -> String {
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    format!(
        "{:02}/{}/{}:{:02}:{:02}:{:02} {}",
        tm.tm_mday,
        MONTHS[tm.tm_mon.clamp(0, 11) as usize],
        tm.tm_year + 1900,
        tm.tm_hour,
        tm.tm_min,
        tm.tm_sec,
        tz(off, false)
    )
}

/// `$time_iso8601`: `2026-11-21T10:00:00+00:00`.
fn time_iso8601(tm: &libc::tm, off: i64) -> String {
    format!(
        "{}-{:02}-{:02}T{:02}:{:02}:{:02}{}",
        tm.tm_year + 1900,
        tm.tm_mon + 1,
        tm.tm_mday,
        tm.tm_hour,
        tm.tm_min,
        tm.tm_sec,
        tz(off, true)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compile() {
        let t = Template::compile("$remote_addr - ${status}x $http_user_agent").unwrap();
        assert_eq!(
            t.pieces,
            vec![
                Piece::Var(Var::RemoteAddr),
                Piece::Text(" - ".into()),
                Piece::Var(Var::Status),
                Piece::Text("x ".into()),
                Piece::Var(Var::Http("user_agent".into())),
            ]
        );
        begin_config();
        assert_eq!(
            Template::compile("$nope").unwrap().pieces,
            vec![Piece::Var(Var::User("nope".into()))]
        );
        assert_eq!(end_config().unwrap_err(), "unknown \"nope\" variable");
        begin_config();
        declare("later");
        Template::compile("$later").unwrap();
        assert!(end_config().is_ok());
        assert_eq!(
            Template::compile("a$").unwrap_err(),
            "invalid variable name in \"a$\""
        );
        assert!(Template::compile("${uri").is_err());
        assert_eq!(
            Template::compile("$1x").unwrap().pieces[0],
            Piece::Var(Var::Capture(1))
        );
        assert!(Template::compile("plain").unwrap().is_static());
    }

    #[test]
    fn builtin_names_cannot_be_defined() {
        assert!(is_builtin("uri"));
        assert!(is_builtin("query_string"));
        assert!(is_builtin("upstream_addr"));
        assert!(!is_builtin("args"), "nginx lets map take $args over");
        assert!(!is_builtin("http_foo"));
        assert!(!is_builtin("upstream_http_foo"));
        assert!(!is_builtin("disk"));
    }

    #[test]
    fn escapes() {
        let mut out = Vec::new();
        escape_into(b"a\"b\\c\x01\xff", Escape::Default, &mut out);
        assert_eq!(out, b"a\\x22b\\x5Cc\\x01\\xFF");
        out.clear();
        escape_into(b"\"clean run\" ends", Escape::Default, &mut out);
        assert_eq!(out, b"\\x22clean run\\x22 ends");
        out.clear();
        escape_into(b"a\"\n\x01", Escape::Json, &mut out);
        assert_eq!(out, b"a\\\"\\n\\u0001");
    }

    #[test]
    fn numbers_and_times_as_nginx_writes_them() {
        let mut out = String::new();
        for n in [0, 7, 10, 612, u64::MAX] {
            out.clear();
            push_decimal(&mut out, n);
            assert_eq!(out, n.to_string());
        }
        // The same second's text, again from the cache; its shape is nginx's.
        let a = with_local_time(|t| (t.secs, t.local.clone(), t.iso8601.clone()));
        let b = with_local_time(|t| (t.secs, t.local.clone(), t.iso8601.clone()));
        assert!(a == b || b.0 == a.0 + 1, "{a:?} {b:?}");
        let (local, iso) = (a.1.as_bytes(), a.2.as_bytes());
        assert_eq!(
            (local.len(), local[2], local[6], local[11], local[20]),
            (26, b'/', b'/', b':', b' ')
        );
        assert_eq!(
            (iso.len(), iso[4], iso[10], iso[22]),
            (25, b'-', b'T', b':')
        );
    }

    #[test]
    fn args_and_headers() {
        assert_eq!(arg(b"a=1&B=2&c", "b"), Some(&b"2"[..]));
        assert_eq!(arg(b"a=1&c", "c"), Some(&b""[..]));
        assert_eq!(arg(b"a=1", "z"), None);
        assert!(header_matches(b"User-Agent", "user_agent"));
        assert!(!header_matches(b"User-Agent", "user_agen"));
    }
}
