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

use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::{Arc, OnceLock, Weak};

use crate::error::Error;

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
    /// `$binary_remote_addr` outside the limit zones' keys (which read the bytes themselves).
    BinaryRemoteAddr,
    /// `$request_id`: 32 hex digits, random, one per request.
    RequestId,
    /// `$connection_time`: seconds since the connection was accepted, in milliseconds.
    ConnectionTime,
    /// `$nginx_version`: the nginx version shoal answers as (its reference, 1.22.1).
    NginxVersion,
    /// `$pipe`: `p` for a pipelined request, else `.`.
    Pipe,
    /// `$request_completion`: `OK` once the answer went out whole, else empty.
    RequestCompletion,
    /// `$request_body`: the body when it was read into memory (a proxied location's).
    RequestBody,
    /// `$request_body_file`: the file of `client_body_in_file_only`.
    RequestBodyFile,
    /// `$sent_trailer_NAME`: a trailer sent with the answer (shoal sends none yet).
    SentTrailer(String),
    /// `$tcpinfo_rtt`, `_rttvar`, `_snd_cwnd`, `_rcv_space`: the field's place.
    TcpInfo(u8),
    /// A variable of a module in [`crate::http::modules`] (`$limit_req_status`): the value the
    /// module set for the request, if any.
    Module(&'static str),
    /// A variable only a `stream {}` session has (`$bytes_received`, `$session_time`,
    /// `$protocol`, `$ssl_preread_*`, ...): "not found" elsewhere.
    Stream(&'static str),
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
                | Var::RequestId
                | Var::ConnectionTime
                | Var::Pipe
                | Var::TcpInfo(_)
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
            | "upstream_last_server_name"
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
            "binary_remote_addr" => Var::BinaryRemoteAddr,
            "request_id" => Var::RequestId,
            "connection_time" => Var::ConnectionTime,
            "nginx_version" => Var::NginxVersion,
            "pipe" => Var::Pipe,
            "request_completion" => Var::RequestCompletion,
            "request_body" => Var::RequestBody,
            "request_body_file" => Var::RequestBodyFile,
            "tcpinfo_rtt" => Var::TcpInfo(0),
            "tcpinfo_rttvar" => Var::TcpInfo(1),
            "tcpinfo_snd_cwnd" => Var::TcpInfo(2),
            "tcpinfo_rcv_space" => Var::TcpInfo(3),
            "connections_active" => Var::ConnectionsActive,
            "connections_reading" => Var::ConnectionsReading,
            "connections_writing" => Var::ConnectionsWriting,
            "connections_waiting" => Var::ConnectionsWaiting,
            _ => {
                if let Some(n) = name.strip_prefix("arg_") {
                    Var::Arg(n.to_string())
                } else if let Some(n) = name.strip_prefix("http_") {
                    Var::Http(n.to_ascii_lowercase())
                } else if let Some(n) = name.strip_prefix("sent_trailer_") {
                    Var::SentTrailer(n.to_ascii_lowercase())
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
                } else if let Some(&n) = crate::stream::vars::NAMES.iter().find(|&&n| n == name) {
                    Var::Stream(n)
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

impl Var {
    /// Whether it is one of a prefixed family's (`$http_x`, `$arg_x`, `$cookie_x`,
    /// `$sent_http_x`, `$upstream_http_x`, ...), which a declared variable of the same name
    /// takes over.
    fn is_family(&self) -> bool {
        match self {
            Var::Arg(_)
            | Var::Http(_)
            | Var::SentHttp(_)
            | Var::SentTrailer(_)
            | Var::Cookie(_) => true,
            Var::Upstream(n) => ["upstream_http_", "upstream_cookie_", "upstream_trailer_"]
                .iter()
                .any(|p| n.starts_with(p)),
            _ => false,
        }
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
    /// Whether evaluating it may read the answer's headers: `$sent_http_*`, or a variable of
    /// the configuration's (a `map` may take its value from one).
    pub fn may_read_sent_headers(&self) -> bool {
        self.pieces
            .iter()
            .any(|p| matches!(p, Piece::Var(Var::SentHttp(_) | Var::User(_))))
    }

    /// Compiles `s`. Errors are nginx's: `invalid variable name in "..."`,
    /// `unknown "name" variable`.
    pub fn compile(s: &str) -> Result<Template, Error> {
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
                    return Err(Error::invalid(format!(
                        "the closing bracket in \"{name}\" variable is missing"
                    )));
                }
                i += 1;
            }
            if name.is_empty() {
                return Err(Error::invalid(format!("invalid variable name in \"{s}\"")));
            }
            // A name `map`/`split_clients` defined, or `set` or a named capture declared,
            // takes over a built-in family's (`$http_x`: GitLab's `set
            // $http_host_with_default`), as in nginx; for uses written before the
            // declaration the built-in stays.
            let computed = !name.starts_with(|c: char| c.is_ascii_digit()) && is_defined(name);
            let taken_over = |v: &Var| computed || (v.is_family() && is_declared(name));
            let var = match Var::lookup(name).filter(|v| !taken_over(v)) {
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

fn is_declared(name: &str) -> bool {
    DECLARED.with(|d| d.borrow().iter().any(|n| n == name))
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
    values::read_hostname();
}

/// Ends reading: points every template's reference to a computed variable at its definition,
/// then reports the first used name nothing declares, in nginx's words
/// (`unknown "name" variable`, reported without a place, as nginx does).
pub fn end_config() -> Result<(), Error> {
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
            return Err(Error::invalid(format!("unknown \"{name}\" variable")));
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

mod eval;
#[cfg(test)]
mod tests;
mod values;

pub use eval::Vars;
pub(crate) use values::local_tm;
pub use values::{escape_into, push_raw_byte, raw_bytes_into};

/// The host's name as `$hostname` gives it (syslog headers use it too).
pub fn hostname() -> String {
    values::HOSTNAME
        .read()
        .unwrap_or_else(|e| e.into_inner())
        .clone()
}
