//! A variable's value for one request: [`Vars`], what a request offers, and the match from
//! each [`Var`] to where its value comes from.

use std::cell::{Cell, RefCell};
use std::fmt::Write as _;
use std::net::SocketAddr;
use std::path::Path;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use shoal_http::Request;

use super::values::*;
use super::*;

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
    pub request_line: Option<&'a [u8]>,
    /// A proxied request's upstream exchange (`$upstream_*`, `$proxy_host`, `$proxy_port`).
    pub upstream: Option<&'a crate::http::upstream::record::Record>,
    /// What the connection's TLS handshake settled (`$https`, `$scheme`, `$ssl_*`).
    pub tls: Option<&'a crate::tls::TlsInfo>,
    /// What the modules keep for the request (their variables' values).
    pub extras: Option<&'a crate::http::request::Extras>,
    /// The connection: its own client address (`$realip_remote_addr`) and PROXY protocol
    /// header (`$proxy_protocol_*`).
    pub conn: Option<&'a crate::http::transport::ConnInfo>,
    /// The server and the location the template is evaluated in, for the variables a module
    /// computes from its configuration (`$invalid_referer`).
    pub srv: Option<&'a crate::http::ServerConf>,
    pub lc: Option<&'a crate::http::LocConf>,
    /// A `stream {}` session: its own values of `$status`, `$bytes_sent`, `$upstream_*`, ...
    pub stream: Option<&'a crate::stream::vars::Session>,
}

impl Vars<'_> {
    /// `$document_root`: a `root`/`alias` with variables (`root $site_root/pub`) evaluated
    /// for this request; a `$document_root` inside its own root's text evaluates empty.
    fn document_root(&self) -> Option<std::borrow::Cow<'_, Path>> {
        match self.doc_root {
            Some(d) if d.template.is_some() => {
                let inner = Vars {
                    doc_root: None,
                    document_root: None,
                    ..self.clone()
                };
                Some(std::borrow::Cow::Owned(
                    d.evaluate(Some(&inner)).into_owned(),
                ))
            }
            _ => self.document_root.map(std::borrow::Cow::Borrowed),
        }
    }

    /// Appends the value of `v`; returns false when the variable has no value (nginx's
    /// "not found", which access logs write as `-`).
    pub fn value(&self, v: &Var, out: &mut String) -> bool {
        if let Some(s) = self.stream {
            if let Some(found) = s.value(v, out) {
                return found;
            }
        }
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
            // The address's 4 or 16 bytes, one character each (a byte past 0x7f as a
            // private-use character: values are text here, and the bytes come back where an
            // answer, a log or a zone key takes them, see `values::raw_bytes_into`); empty
            // for a unix socket (nginx: its one byte family).
            Var::BinaryRemoteAddr => match self.peer.map(|p| p.ip()) {
                Some(std::net::IpAddr::V4(a)) => {
                    a.octets().iter().for_each(|&b| push_raw_byte(out, b))
                }
                Some(std::net::IpAddr::V6(a)) => {
                    a.octets().iter().for_each(|&b| push_raw_byte(out, b))
                }
                None => {}
            },
            // Empty for a unix socket, and for an address realip took without a port.
            Var::RemotePort => {
                if let Some(p) = self.peer.filter(|p| p.port() != 0) {
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
            Var::Module(name) => {
                if let Some(found) = crate::http::modules::variable(name, self, out) {
                    return found;
                }
                return self.extras.is_some_and(|e| e.var(name, out));
            }
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
                    out.push_str(&shoal_http::lossy(self.request_line.unwrap_or_default()));
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
                Some(r) if r.method() != "HEAD" && self.extras.is_some_and(|e| e.as_get()) => {
                    out.push_str("GET")
                }
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
                    if root.whole_alias() && self.extras.is_some_and(|e| e.alias_file(out)) {
                        return true;
                    }
                    let uri = match (self.uri, req) {
                        (Some(u), _) => u.to_string(),
                        (None, Some(r)) => shoal_http::lossy(r.path()).into_owned(),
                        (None, None) => return false,
                    };
                    out.push_str(&root.map(&uri, Some(self)).to_string_lossy());
                }
                (None, None) => return false,
            },
            Var::DocumentRoot => match self.document_root() {
                Some(p) => out.push_str(&p.to_string_lossy()),
                None => return false,
            },
            Var::RealpathRoot => match self
                .document_root()
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
            Var::RequestId => match self.extras {
                Some(e) => e.request_id(out),
                None => return false,
            },
            Var::ConnectionTime => {
                let Some(born) = self.extras.and_then(|e| e.conn_born()) else {
                    return false;
                };
                let ms = born.elapsed().as_millis();
                let _ = write!(out, "{}.{:03}", ms / 1000, ms % 1000);
            }
            Var::NginxVersion => out.push_str("1.22.1"),
            Var::Pipe => out.push(if self.extras.is_some_and(|e| e.pipelined()) {
                'p'
            } else {
                '.'
            }),
            Var::RequestCompletion => {
                if self.extras.is_some_and(|e| e.completed()) {
                    out.push_str("OK");
                }
            }
            Var::RequestBody => {
                if !self.extras.is_some_and(|e| e.body(out)) {
                    return false;
                }
            }
            Var::RequestBodyFile => {
                if !self.extras.is_some_and(|e| e.body_file(out)) {
                    return false;
                }
            }
            Var::SentTrailer(_) => return false,
            Var::TcpInfo(field) => {
                let Some(fd) = self.extras.and_then(|e| e.socket()) else {
                    return false;
                };
                let Ok(info) = shoal_io::syscall::tcp_info(fd) else {
                    return false;
                };
                let v = [info.0, info.1, info.2, info.3][usize::from(*field).min(3)];
                let _ = write!(out, "{v}");
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
            // A session's own (answered above when there is one).
            Var::Stream(_) => return false,
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
                None if self.extras.is_some_and(|e| e.user_var(&u.name, out)) => {}
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
                shoal_http::log_text(r.target()),
                r.version().line_suffix()
            );
            crate::http::request::push_host_referrer(&mut s, r);
        }
        s
    }

    /// `t`'s value as bytes: a binary value's (`$binary_remote_addr`) raw bytes as themselves,
    /// as nginx hashes or compares them (a `hash` key), not its text form.
    pub fn eval_bytes(&self, t: &Template) -> Vec<u8> {
        let text = self.eval(t);
        if !text.as_bytes().contains(&0xEF) {
            return text.into_bytes();
        }
        let mut raw = Vec::with_capacity(text.len());
        raw_bytes_into(&text, &mut raw);
        raw
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

    /// `$binary_remote_addr`'s raw bytes (none for a unix-domain socket).
    fn binary_remote_addr(&self, out: &mut Vec<u8>) {
        match self.peer.map(|p| p.ip()) {
            Some(std::net::IpAddr::V4(a)) => out.extend_from_slice(&a.octets()),
            Some(std::net::IpAddr::V6(a)) => out.extend_from_slice(&a.octets()),
            None => {}
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
                                // A binary value a variable holds (`map` to
                                // `$binary_remote_addr`) is escaped as its bytes.
                                let mut raw = Vec::new();
                                raw_bytes_into(&val, &mut raw);
                                escape_into(&raw, escape, out);
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
        if self.stream.is_some() && matches!(v, Var::Status | Var::BytesSent) {
            // A stream session's, not an HTTP answer's.
            return None;
        }
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
            // Its raw bytes, escaped as any other value's (`\xC0\xA8...`), as nginx logs it.
            Var::BinaryRemoteAddr => {
                let mut raw = Vec::with_capacity(16);
                self.binary_remote_addr(&mut raw);
                escape_into(&raw, escape, out);
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
                    escape_into(line, escape, out);
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
pub(super) const MAX_DEPTH: u32 = 100;

thread_local! {
    /// Evaluation is synchronous on the worker's thread: how deep it is now, and the values
    /// computed so far in the outermost evaluation.
    pub(super) static DEPTH: Cell<u32> = const { Cell::new(MAX_DEPTH) };
    pub(super) static MEMO: RefCell<Vec<(usize, Option<String>)>> = const { RefCell::new(Vec::new()) };
}
