//! The request layer: one request's context as the phases and modules see it ([`Req`]),
//! whatever protocol brought it, and what every request shares: its start ("now" for the
//! request, the `Date` header) and its access log lines (the log phase).

use std::cell::RefCell;
use std::time::Instant;

use shoal_http::{BodyKind, DateCache, Request};

use super::transport::ConnInfo;
use super::{LocConf, ServerConf};
use crate::variables::{Sent, Vars};

thread_local! {
    static DATE: RefCell<DateCache> = RefCell::new(DateCache::new());
    /// When the request being answered on this worker started (read once per request, used
    /// wherever "now" within the request is good enough: the Date header, open-file cache
    /// validity).
    pub(super) static REQUEST_NOW: std::cell::Cell<Option<Instant>> = const { std::cell::Cell::new(None) };
}

/// The current request's start, or the clock when no request is being answered.
pub fn request_now() -> Instant {
    REQUEST_NOW.with(|n| n.get()).unwrap_or_else(Instant::now)
}

/// The wall clock's second at the current request's start (see [`request_now`]), read from
/// the worker's date cache: a clock read at most once a second.
pub fn request_unix_secs() -> i64 {
    let at = request_now();
    DATE.with(|d| d.borrow_mut().secs_at_instant(at) as i64)
}

/// The `Date` header's text: the request's start for an answer made in the poll that read it
/// (a file, an error page), the clock for one that `waited` (a proxied answer).
/// Both through the date cache's second: within it, the text is had for an `Instant`
/// compared (no wall clock read, no conversion to Unix time).
pub fn date(waited: bool) -> [u8; shoal_http::date::DATE_LEN] {
    let at = if waited {
        Instant::now()
    } else {
        request_now()
    };
    DATE.with(|d| *d.borrow_mut().at_instant(at))
}

/// What the modules keep for one request: their variables' values (`$limit_req_status`),
/// what must be held until the request ends (a `limit_conn` count), whether the preaccess
/// phase ran (once per request, internal redirects included), and the client address realip
/// gave the request.
#[derive(Default)]
pub struct Extras {
    vars: RefCell<Vec<(&'static str, String)>>,
    /// `$request_id`, made at its first use.
    request_id: std::cell::Cell<Option<[u8; 16]>>,
    /// The request's bytes were in the buffer when the one before it was answered (`$pipe`).
    pipelined: std::cell::Cell<bool>,
    /// The answer was sent whole (`$request_completion`).
    completed: std::cell::Cell<bool>,
    /// When the connection was accepted (`$connection_time`) and its socket (`$tcpinfo_*`).
    conn_born: std::cell::Cell<Option<std::time::Instant>>,
    socket: std::cell::Cell<Option<std::os::fd::RawFd>>,
    /// The body read into memory (`$request_body`), and the file it was written to with
    /// `client_body_in_file_only` (`$request_body_file`).
    body: RefCell<Option<bytes::Bytes>>,
    body_file: RefCell<Option<String>>,
    /// Declared variables a module set for the request (`auth_request_set`).
    user_vars: RefCell<Vec<(String, String)>>,
    holds: RefCell<Vec<Box<dyn std::any::Any>>>,
    /// `mirror`'s subrequests, left to run once the answer is out.
    mirrors: RefCell<Option<super::mirror::Pending>>,
    preaccess_done: std::cell::Cell<bool>,
    /// An `error_page` or an `X-Accel-Redirect` sent the request to a URI: it goes on as a
    /// GET (a HEAD stays one), `$request_method` included (nginx's `r->method_name`).
    as_get: std::cell::Cell<bool>,
    real_client: std::cell::Cell<Option<std::net::SocketAddr>>,
    /// The file `try_files` found under a regex location's alias: nginx maps the URI to the
    /// alias and the name from then on (`r->add_uri_to_alias`), for `$request_filename` too.
    alias_file: RefCell<Option<std::path::PathBuf>>,
    /// The userid module's identifiers (`$uid_got`, `$uid_set`, its cookie).
    pub userid: super::userid::Slot,
}

impl Extras {
    /// Sets a module variable's value for the request.
    pub fn set_var(&self, name: &'static str, value: String) {
        let mut vars = self.vars.borrow_mut();
        match vars.iter_mut().find(|(n, _)| *n == name) {
            Some((_, v)) => *v = value,
            None => vars.push((name, value)),
        }
    }

    /// Appends a module variable's value to `out`; false when it has none.
    pub fn var(&self, name: &str, out: &mut String) -> bool {
        match self.vars.borrow().iter().find(|(n, _)| *n == name) {
            Some((_, v)) => {
                out.push_str(v);
                true
            }
            None => false,
        }
    }

    /// Sets a declared variable's value for the rest of the request (`auth_request_set`).
    pub fn set_user_var(&self, name: &str, value: String) {
        let mut vars = self.user_vars.borrow_mut();
        match vars.iter_mut().find(|(n, _)| n == name) {
            Some((_, v)) => *v = value,
            None => vars.push((name.to_string(), value)),
        }
    }

    /// Appends a declared variable's value a module set; false when none did.
    pub fn user_var(&self, name: &str, out: &mut String) -> bool {
        match self.user_vars.borrow().iter().find(|(n, _)| n == name) {
            Some((_, v)) => {
                out.push_str(v);
                true
            }
            None => false,
        }
    }

    /// `$request_id`: 16 random bytes in hex, the same for the whole request.
    pub fn request_id(&self, out: &mut String) {
        let id = match self.request_id.get() {
            Some(id) => id,
            None => {
                let mut id = [0u8; 16];
                aws_lc_rs::rand::fill(&mut id).expect("the system's random source works");
                self.request_id.set(Some(id));
                id
            }
        };
        use std::fmt::Write as _;
        for b in id {
            let _ = write!(out, "{b:02x}");
        }
    }

    /// The connection's part of the request: whether it was pipelined, when the connection
    /// was accepted, its socket.
    pub fn set_connection(
        &self,
        pipelined: bool,
        born: std::time::Instant,
        socket: Option<std::os::fd::RawFd>,
    ) {
        self.pipelined.set(pipelined);
        self.conn_born.set(Some(born));
        self.socket.set(socket);
    }

    pub fn pipelined(&self) -> bool {
        self.pipelined.get()
    }

    pub fn conn_born(&self) -> Option<std::time::Instant> {
        self.conn_born.get()
    }

    pub fn socket(&self) -> Option<std::os::fd::RawFd> {
        self.socket.get()
    }

    /// The answer went out whole.
    pub fn set_completed(&self) {
        self.completed.set(true);
    }

    pub fn completed(&self) -> bool {
        self.completed.get()
    }

    /// The body as read into memory.
    pub fn set_body(&self, body: bytes::Bytes) {
        *self.body.borrow_mut() = Some(body);
    }

    /// Appends `$request_body`; false when the body was not read into memory.
    pub fn body(&self, out: &mut String) -> bool {
        match &*self.body.borrow() {
            Some(b) => {
                out.push_str(&String::from_utf8_lossy(b));
                true
            }
            None => false,
        }
    }

    pub fn set_body_file(&self, name: String) {
        *self.body_file.borrow_mut() = Some(name);
    }

    pub fn body_file(&self, out: &mut String) -> bool {
        match &*self.body_file.borrow() {
            Some(n) => {
                out.push_str(n);
                true
            }
            None => false,
        }
    }

    /// Keeps `what` until the request ends (dropped with the request).
    /// Leaves `mirror`'s subrequests to run after the answer (the first call only: nginx
    /// mirrors a request once).
    pub fn set_mirrors(&self, pending: super::mirror::Pending) {
        self.mirrors.borrow_mut().get_or_insert(pending);
    }

    /// Whether `mirror`'s subrequests were decided for the request.
    pub fn mirrored(&self) -> bool {
        self.mirrors.borrow().is_some()
    }

    /// `mirror`'s subrequests, taken to be run.
    pub fn take_mirrors(&self) -> Option<super::mirror::Pending> {
        self.mirrors.borrow_mut().take()
    }

    pub fn hold(&self, what: Box<dyn std::any::Any>) {
        self.holds.borrow_mut().push(what);
    }

    /// Whether the preaccess phase ran for the request.
    pub fn preaccess_done(&self) -> bool {
        self.preaccess_done.get()
    }

    pub fn set_preaccess_done(&self) {
        self.preaccess_done.set(true);
    }

    /// Whether an internal redirect made the request a GET.
    pub fn as_get(&self) -> bool {
        self.as_get.get()
    }

    pub fn set_as_get(&self) {
        self.as_get.set(true);
    }

    /// `$request_filename` after `try_files` found `file` under a regex location's alias.
    pub fn set_alias_file(&self, file: std::path::PathBuf) {
        *self.alias_file.borrow_mut() = Some(file);
    }

    /// Writes the file [`Extras::set_alias_file`] recorded, if one was.
    pub fn alias_file(&self, out: &mut String) -> bool {
        match &*self.alias_file.borrow() {
            Some(f) => {
                out.push_str(&f.to_string_lossy());
                true
            }
            None => false,
        }
    }

    /// The client address realip set for the request (nginx changes the connection's
    /// address for the request's life: `$remote_addr`, the access and limit modules and the
    /// logs see it; port 0 when the header gave none).
    pub fn real_client(&self) -> Option<std::net::SocketAddr> {
        self.real_client.get()
    }

    pub fn set_real_client(&self, addr: std::net::SocketAddr) {
        self.real_client.set(Some(addr));
    }
}

/// What tells that a request's client went away: an HTTP/1 connection's socket closing, an
/// HTTP/2 stream's RST_STREAM.
#[derive(Clone, Copy)]
pub enum ClientWatch<'r> {
    Conn(&'r super::transport::Transport),
    Stream(&'r RefCell<super::h2::wire::SendResponse>),
}

/// Per-request state the phases share.
///
/// `'s` is the configuration's lifetime (what the answer may borrow), `'r` the request's.
pub struct Req<'s, 'r> {
    pub req: &'r Request,
    pub srv: &'s ServerConf,
    pub host: Option<&'r str>,
    pub info: &'r ConnInfo,
    pub start: std::time::Instant,
    /// Requests made on the connection so far, this one included (`$connection_requests`).
    pub connection_requests: u64,
    /// Captures of a `server_name ~regex` match, for `$1`.. and named variables.
    pub name_captures: Option<&'r crate::cycle::NameCaptures>,
    /// The client, watched while the proxy waits for an upstream (a client that closes, or
    /// resets its stream, makes nginx give up the upstream too).
    pub client: Option<ClientWatch<'r>>,
    /// The proxy cache zones of the request's generation (set by the master before any
    /// worker sees it; `None` only for a generation that never ran).
    pub cache_zones: Option<&'r super::proxy_cache::zone::Zones>,
    /// What the modules keep for the request.
    pub extras: &'r Extras,
}

/// A request's variables with the rewrite state ([`Req::vars_rw`]), made the first time a
/// handler asks: a static file's answer needs them only for a `root`, an `index` or a
/// `disable_symlinks from=` with variables, and making them is a few hundred bytes written.
pub struct LazyVars<'b, 's, 'r> {
    r: &'b Req<'s, 'r>,
    st: &'b super::rewrite::State,
    lc: &'b LocConf,
    made: std::cell::OnceCell<Vars<'b>>,
}

impl<'b> LazyVars<'b, '_, '_> {
    pub fn get(&self) -> &Vars<'b> {
        self.made.get_or_init(|| self.r.vars_rw(self.st, self.lc))
    }
}

/// A request's parts but its connection's, for a writer that needs the request again while
/// it holds the connection (the subrequests of its body filters, its mirrors, `post_action`).
#[derive(Clone, Copy)]
pub struct ReqParts<'s, 'r> {
    pub req: &'r Request,
    pub srv: &'s ServerConf,
    pub host: Option<&'r str>,
    pub start: std::time::Instant,
    pub connection_requests: u64,
    pub name_captures: Option<&'r crate::cycle::NameCaptures>,
    pub cache_zones: Option<&'r super::proxy_cache::zone::Zones>,
    pub extras: &'r Extras,
}

impl<'s, 'r> ReqParts<'s, 'r> {
    /// The request on the connection `info` (no client watch: the answer is being written).
    pub fn with<'x>(&self, info: &'x ConnInfo) -> Req<'s, 'x>
    where
        'r: 'x,
    {
        Req {
            req: self.req,
            srv: self.srv,
            host: self.host,
            info,
            start: self.start,
            connection_requests: self.connection_requests,
            name_captures: self.name_captures,
            client: None,
            cache_zones: self.cache_zones,
            extras: self.extras,
        }
    }
}

impl<'s, 'r> Req<'s, 'r> {
    /// The client's address as the request sees it: realip's once it changed it, else the
    /// connection's (`None`: a unix-domain socket).
    pub fn peer(&self) -> Option<std::net::SocketAddr> {
        peer(self.info, Some(self.extras))
    }

    /// [`Req::vars_rw`], made only when a handler asks for them (see [`LazyVars`]).
    pub fn lazy_vars<'b>(
        &'b self,
        st: &'b super::rewrite::State,
        lc: &'b LocConf,
    ) -> LazyVars<'b, 's, 'r> {
        LazyVars {
            r: self,
            st,
            lc,
            made: std::cell::OnceCell::new(),
        }
    }

    /// Variables with the rewrite state: the current URI and arguments, the last captures and
    /// the declared variables' values.
    pub fn vars_rw<'b>(&'b self, st: &'b super::rewrite::State, lc: &'b LocConf) -> Vars<'b> {
        let mut v = self.vars(&st.uri, lc, &st.captures);
        v.user = Some(&st.vars);
        v.args = Some(st.args.as_deref());
        v.sent = st.err_status.as_ref();
        v
    }

    pub fn vars<'b>(
        &'b self,
        uri: &'b str,
        lc: &'b LocConf,
        captures: &'b [Option<String>],
    ) -> Vars<'b> {
        Vars {
            req: Some(self.req),
            uri: Some(uri),
            peer: self.peer(),
            local: self.info.local,
            server_name: self.srv.name(),
            document_root: Some(lc.root()),
            request_filename: None,
            connection: self.info.number,
            connection_requests: self.connection_requests,
            start: self.start,
            request_length: 0,
            sent: None,
            captures,
            user: None,
            doc_root: Some(lc.doc_root()),
            args: None,
            request_line: None,
            upstream: None,
            tls: self.info.tls.as_deref(),
            extras: Some(self.extras),
            conn: Some(self.info),
            srv: Some(self.srv),
            lc: Some(lc),
            stream: None,
        }
    }

    /// `, client: ..., server: ..., request: "...", host: "..."` for error log lines.
    pub fn log_ctx(&self) -> String {
        log_ctx_of(self.req, self.srv, self.peer())
    }

    /// [`Req::log_ctx`] with the upstream's `, upstream: "..."`.
    pub fn log_ctx_upstream(&self, upstream: &str) -> String {
        log_ctx_upstream(self.req, self.srv, self.peer(), Some(upstream))
    }
}

/// The client's address for a request: realip's, else the connection's.
fn peer(info: &ConnInfo, extras: Option<&Extras>) -> Option<std::net::SocketAddr> {
    match extras.and_then(Extras::real_client) {
        Some(real) => Some(real),
        None => info.peer,
    }
}

/// Context for log lines: `, client: ..., server: ..., request: "...", host: "..."`.
pub fn log_ctx(req: &Request, srv: &ServerConf, info: &ConnInfo) -> String {
    log_ctx_of(req, srv, info.peer)
}

pub(crate) fn log_ctx_of(
    req: &Request,
    srv: &ServerConf,
    client: Option<std::net::SocketAddr>,
) -> String {
    log_ctx_upstream(req, srv, client, None)
}

/// [`log_ctx_of`] with `, upstream: "..."` where nginx puts it, before the host.
pub(crate) fn log_ctx_upstream(
    req: &Request,
    srv: &ServerConf,
    client: Option<std::net::SocketAddr>,
    upstream: Option<&str>,
) -> String {
    let client = match client {
        Some(p) => p.ip().to_string(),
        None => "unix:".to_string(),
    };
    // The request's bytes as they came (`log_text`), as nginx writes them.
    let mut s = format!(
        ", client: {}, server: {}, request: \"{} {}{}\"",
        client,
        srv.name(),
        req.method(),
        shoal_http::log_text(req.target()),
        req.version().line_suffix()
    );
    if let Some(up) = upstream {
        s.push_str(", upstream: \"");
        s.push_str(up);
        s.push('"');
    }
    push_host_referrer(&mut s, req);
    s
}

/// The end of nginx's context for a request's log lines: `, host: "..."` and `, referrer:
/// "..."`, each when the request has that header.
pub(crate) fn push_host_referrer(s: &mut String, req: &Request) {
    use std::fmt::Write as _;
    if let Some(h) = req.header("host") {
        let _ = write!(s, ", host: \"{}\"", shoal_http::log_text(h));
    }
    if let Some(r) = req.header("referer") {
        let _ = write!(s, ", referrer: \"{}\"", shoal_http::log_text(r));
    }
}

/// Writes a request's access log lines (the log phase): what was sent, the request's
/// variables, the upstream exchange.
#[allow(clippy::too_many_arguments)]
pub fn log(
    info: &ConnInfo,
    requests: u64,
    req: &Request,
    srv: &ServerConf,
    lc: &LocConf,
    uri: &str,
    start: Instant,
    status: u16,
    head_len: u64,
    body_len: u64,
    headers: Vec<(String, String)>,
    upstream: Option<&super::upstream::record::Record>,
    extras: Option<&Extras>,
) {
    let logs = lc.access_logs();
    if logs.is_empty() {
        return;
    }
    let sent = Sent {
        status,
        body_bytes: body_len,
        bytes: head_len + body_len,
        headers,
    };
    let request_length = req.head_len() as u64
        + match req.body() {
            BodyKind::Length(n) => n,
            _ => 0,
        };
    let vars = Vars {
        req: Some(req),
        uri: Some(uri),
        peer: peer(info, extras),
        local: info.local,
        server_name: srv.name(),
        document_root: Some(lc.root()),
        request_filename: None,
        connection: info.number,
        connection_requests: requests,
        start,
        request_length,
        sent: Some(&sent),
        captures: &[],
        user: None,
        doc_root: Some(lc.doc_root()),
        args: None,
        request_line: None,
        upstream,
        tls: info.tls.as_deref(),
        extras,
        conn: Some(info),
        srv: Some(srv),
        lc: Some(lc),
        stream: None,
    };
    super::access_log::log_request(logs, &vars);
}
