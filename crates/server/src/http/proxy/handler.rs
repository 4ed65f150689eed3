//! One proxied request: choose a peer (the upstream's balancer), take a kept-alive connection
//! to it or connect (`proxy_connect_timeout`), send the request (`proxy_send_timeout`), read
//! the answer's head (`proxy_read_timeout`, at most `proxy_buffer_size`), and turn it into a
//! reply whose body stays on the upstream connection until the client is written.
//!
//! A failure is logged with nginx's words and context, counted against the peer
//! (`max_fails`/`fail_timeout`), and the next peer is tried while `proxy_next_upstream` allows
//! (a request that was already sent is not retried unless idempotent or `non_idempotent` is
//! given); when none is left, the answer is 502 (504 after a timeout). A kept-alive connection
//! the upstream closed before answering is not the peer's fault: the request is sent again on
//! a new connection.

use std::borrow::Cow;
use std::cell::RefCell;
use std::rc::Rc;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use bytes::BytesMut;
use shoal_http::upstream::UpstreamRequest;

use super::body::UpstreamBody;
use super::request::{self, UriParts};
use super::{NextUpstream, ProxyLoc, ProxyPass, Target, UpstreamHeader};
use crate::deadline::Timer;
use crate::http::client_body::{BodyToSend, ClientBody, Failure, Whole};
use crate::http::reply::{Body, Outcome, Reply};
use crate::http::request::{ClientWatch, Req};
use crate::http::rewrite;
use crate::http::transport::Transport;
use crate::http::LocConf;
use crate::log::Level;
use crate::spare::Spares;
use crate::upstream::conf::{split_host_port, PeerAddr, UpstreamConf};
use crate::upstream::{state, Input, PeerResult};

/// What the `$upstream_*` variables report: one entry per peer tried.
#[derive(Debug)]
pub struct Record {
    pub proxy_host: Arc<str>,
    pub proxy_port: u16,
    /// The URI sent upstream.
    pub uri: Vec<u8>,
    pub tries: Tries,
    /// The last answer's head (`$upstream_http_NAME`).
    pub head: Option<shoal_http::upstream::UpstreamHead>,
    /// `$upstream_cache_status` (HIT, MISS, ...), when the proxy cache is on.
    pub cache_status: Option<crate::http::proxy_cache::CacheStatus>,
    /// The headers of an answer served from the cache (no upstream head then).
    pub cached_headers: std::rc::Rc<[(String, String)]>,
    /// Upstream headers an intercepted error's answer keeps (a 401's `WWW-Authenticate`).
    pub carry: Vec<(String, String)>,
    /// How the last try failed (a `NextUpstream` bit: error, timeout, invalid_header), for
    /// `proxy_cache_use_stale`.
    pub last_fail: u32,
    /// The stored object's validators sent upstream by `proxy_cache_revalidate`
    /// (`$upstream_cache_last_modified`, `$upstream_cache_etag`).
    pub cache_validators: Option<(Option<String>, Option<String>)>,
    /// `proxy_cache_background_update`: the update the connection runs once this answer
    /// (a stale one) is sent.
    pub background: Option<Box<crate::http::proxy_cache::serve::Background>>,
    /// The upstream speaks TLS (`https://` in log lines).
    pub https: bool,
}

thread_local! {
    /// The empty values a new [`Record`] starts with, shared (a record per proxied request
    /// allocates nothing before it has something to hold).
    static EMPTY_HEADERS: std::rc::Rc<[(String, String)]> = std::rc::Rc::from(Vec::new());
    /// Records of finished requests, emptied, kept by the worker for its next ones (see
    /// [`Record::start`]): a few, as it takes them back one per answer sent.
    static SPARE: Spares<Rc<RefCell<Record>>> = const { Spares::new(8) };
}

/// An empty `$proxy_host`, shared.
fn empty_host() -> Arc<str> {
    static EMPTY: std::sync::OnceLock<Arc<str>> = std::sync::OnceLock::new();
    EMPTY.get_or_init(|| Arc::from("")).clone()
}

impl Default for Record {
    fn default() -> Record {
        Record {
            proxy_host: empty_host(),
            proxy_port: 80,
            uri: Vec::new(),
            tries: Tries::default(),
            head: None,
            cache_status: None,
            cached_headers: EMPTY_HEADERS.with(|h| h.clone()),
            carry: Vec::new(),
            last_fail: 0,
            cache_validators: None,
            background: None,
            https: false,
        }
    }
}

/// The peers tried, in order. The first is held in place: most requests try one peer, and
/// then the record allocates nothing for it.
#[derive(Debug, Default)]
pub struct Tries {
    first: Option<Try>,
    more: Vec<Try>,
}

impl Tries {
    fn push(&mut self, t: Try) {
        match self.first {
            None => self.first = Some(t),
            Some(_) => self.more.push(t),
        }
    }

    /// The current (last) try.
    pub fn last(&self) -> Option<&Try> {
        self.more.last().or(self.first.as_ref())
    }

    fn last_mut(&mut self) -> Option<&mut Try> {
        match self.more.last_mut() {
            Some(t) => Some(t),
            None => self.first.as_mut(),
        }
    }

    /// The tries in order.
    pub fn iter(&self) -> impl Iterator<Item = &Try> {
        self.first.iter().chain(&self.more)
    }

    pub fn is_empty(&self) -> bool {
        self.first.is_none()
    }
}

/// One peer tried.
#[derive(Debug)]
pub struct Try {
    pub addr: PeerAddr,
    /// The answer's status, or what nginx records for a failure (502, 504).
    pub status: Option<u16>,
    start: Instant,
    pub connect: Option<Duration>,
    pub header: Option<Duration>,
    pub response: Option<Duration>,
    /// Bytes read from the upstream, head included.
    pub received: u64,
    pub head_len: u64,
    pub sent: u64,
}

impl Record {
    /// The record of a request proxied to `host:port`: an emptied one the worker kept, or a
    /// new one. (A `Record` is a few hundred bytes: a new one is made on the stack and moved,
    /// twice or more, into its allocation, which cost more than the allocation itself.)
    pub fn start(host: &Arc<str>, port: u16) -> Rc<RefCell<Record>> {
        match SPARE.with(Spares::take) {
            Some(rec) => {
                let mut r = rec.borrow_mut();
                // The same host as last time, usually: its count is left alone (every worker
                // counts a configuration's `Arc`, and each count moved its line between cores).
                if !Arc::ptr_eq(&r.proxy_host, host) {
                    r.proxy_host = host.clone();
                }
                r.proxy_port = port;
                drop(r);
                rec
            }
            None => Rc::new(RefCell::new(Record {
                proxy_host: host.clone(),
                proxy_port: port,
                ..Default::default()
            })),
        }
    }

    /// Gives a finished request's record back to its worker, emptied, for [`Record::start`];
    /// one something else still holds (a body still being read) is left to it.
    pub fn recycle(rec: Rc<RefCell<Record>>) {
        if Rc::strong_count(&rec) != 1 || Rc::weak_count(&rec) != 0 {
            return;
        }
        SPARE.with(|s| s.give(rec, |rec| rec.borrow_mut().clear()));
    }

    /// Empties the record in place, keeping what it has allocated (the URI's room) and its
    /// host (see [`Record::start`]).
    fn clear(&mut self) {
        // Every field by name: a field added later must be cleared here too.
        let Record {
            proxy_host: _,
            proxy_port: _,
            uri,
            tries,
            head,
            cache_status,
            cached_headers,
            carry,
            last_fail,
            cache_validators,
            background,
            https,
        } = self;
        if uri.capacity() > 4096 {
            *uri = Vec::new();
        }
        uri.clear();
        tries.first = None;
        tries.more.clear();
        *head = None;
        *cache_status = None;
        if !cached_headers.is_empty() {
            *cached_headers = EMPTY_HEADERS.with(|h| h.clone());
        }
        carry.clear();
        *last_fail = 0;
        *cache_validators = None;
        *background = None;
        *https = false;
    }

    fn begin(&mut self, addr: PeerAddr, now: Instant) {
        self.tries.push(Try {
            addr,
            status: None,
            start: now,
            connect: None,
            header: None,
            response: None,
            received: 0,
            head_len: 0,
            sent: 0,
        });
    }

    fn last(&mut self) -> &mut Try {
        self.tries.last_mut().expect("a try was begun")
    }

    fn fail(&mut self, status: u16) {
        let t = self.last();
        t.status = Some(status);
        t.response = Some(t.start.elapsed());
    }

    pub fn received(&mut self, n: u64) {
        if let Some(t) = self.tries.last_mut() {
            t.received += n;
        }
    }

    /// The body was read (or given up on): the response time is taken.
    pub fn finish(&mut self, _complete: bool) {
        if let Some(t) = self.tries.last_mut() {
            t.response.get_or_insert_with(|| t.start.elapsed());
        }
    }

    /// `, client: ..., server: ..., request: "...", upstream: "...", host: "..."` for a log line
    /// about the current try.
    pub fn log_ctx(
        &self,
        req: &shoal_http::Request,
        srv: &crate::http::ServerConf,
        info: &crate::http::transport::ConnInfo,
    ) -> String {
        let base = crate::http::request::log_ctx(req, srv, info);
        let uri = shoal_http::lossy(&self.uri);
        let url = match self.tries.last() {
            Some(t) => upstream_url(&t.addr, &uri, self.https),
            None => format!(
                "{}://{}{uri}",
                if self.https { "https" } else { "http" },
                self.proxy_host
            ),
        };
        let up = format!(", upstream: \"{url}\"");
        match base.find(", host: \"") {
            Some(i) => format!("{}{up}{}", &base[..i], &base[i..]),
            None => base + &up,
        }
    }

    /// The answer's headers, names as sent: the upstream's, or the cached answer's.
    pub fn header_list(&self) -> Vec<(String, String)> {
        match &self.head {
            Some(h) => h
                .headers()
                .map(|(n, v)| {
                    (
                        shoal_http::lossy(n).into_owned(),
                        shoal_http::lossy(v).into_owned(),
                    )
                })
                .collect(),
            None => self.cached_headers.to_vec(),
        }
    }

    /// The value of an upstream variable when it is a constant text, to be used without a
    /// copy: `$upstream_cache_status`.
    pub fn constant(&self, name: &str) -> Option<&'static str> {
        match name {
            "upstream_cache_status" => self.cache_status.map(|c| c.as_str()),
            _ => None,
        }
    }

    /// The value of an upstream variable (`upstream_addr`, `proxy_host`, `upstream_http_x`,
    /// ...); false when it has none.
    pub fn value(&self, name: &str, out: &mut String) -> bool {
        use std::fmt::Write;
        let secs = |d: Option<Duration>| match d {
            Some(d) => format!("{}.{:03}", d.as_secs(), d.subsec_millis()),
            None => "-".to_string(),
        };
        let list = |out: &mut String, f: &dyn Fn(&Try) -> String| {
            for (i, t) in self.tries.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                out.push_str(&f(t));
            }
            !self.tries.is_empty()
        };
        match name {
            "proxy_host" => out.push_str(&self.proxy_host),
            "proxy_port" => {
                let _ = write!(out, "{}", self.proxy_port);
            }
            "upstream_addr" => return list(out, &|t| t.addr.to_string()),
            "upstream_cache_status" => match self.constant(name) {
                Some(s) => out.push_str(s),
                None => return false,
            },
            "upstream_cache_last_modified" | "upstream_cache_etag" => {
                let v = self.cache_validators.as_ref().and_then(|(lm, etag)| {
                    if name == "upstream_cache_etag" {
                        etag.as_ref()
                    } else {
                        lm.as_ref()
                    }
                });
                match v {
                    Some(v) => out.push_str(v),
                    None => return false,
                }
            }
            "upstream_status" => {
                return list(out, &|t| {
                    t.status.map_or_else(|| "-".into(), |s| s.to_string())
                })
            }
            "upstream_connect_time" => return list(out, &|t| secs(t.connect)),
            "upstream_header_time" => return list(out, &|t| secs(t.header)),
            "upstream_response_time" => {
                return list(out, &|t| secs(t.response.or(Some(t.start.elapsed()))))
            }
            "upstream_response_length" => {
                return list(out, &|t| t.received.saturating_sub(t.head_len).to_string())
            }
            "upstream_bytes_received" => return list(out, &|t| t.received.to_string()),
            "upstream_bytes_sent" => return list(out, &|t| t.sent.to_string()),
            _ => {
                let Some(h) = name.strip_prefix("upstream_http_") else {
                    return false;
                };
                let matches = |n: &[u8]| {
                    n.len() == h.len()
                        && n.iter().zip(h.bytes()).all(|(a, b)| {
                            let a = a.to_ascii_lowercase();
                            a == b || (a == b'-' && b == b'_')
                        })
                };
                let found: Option<std::borrow::Cow<'_, [u8]>> = match &self.head {
                    Some(head) => head
                        .headers()
                        .find(|(n, _)| matches(n))
                        .map(|(_, v)| std::borrow::Cow::Borrowed(v)),
                    None => self
                        .cached_headers
                        .iter()
                        .find(|(n, _)| matches(n.as_bytes()))
                        .map(|(_, v)| std::borrow::Cow::Borrowed(v.as_bytes())),
                };
                match found {
                    Some(v) => out.push_str(&shoal_http::lossy(&v)),
                    None => return false,
                }
            }
        }
        true
    }
}

/// A client's body that could not be read ends the request as nginx ends it: logged, then
/// its 400 or 413 (`error_page` applies), or closed without an answer (a client gone, or
/// silent past `client_body_timeout`).
fn body_failed(r: &Req<'_, '_>, f: Failure) -> Outcome {
    crate::http::client_body::log_failure(f, r);
    if f.silent() {
        let mut reply = Reply::boxed(f.status());
        reply.terminate = true;
        Outcome::Final(reply)
    } else {
        Outcome::Error(f.status())
    }
}

/// The request's URI state, for the URI sent upstream.
pub struct UriState<'a> {
    pub rw: &'a rewrite::State,
    /// An internal redirect happened.
    pub internal: bool,
    /// `proxy_cache_revalidate`: the expired object's Last-Modified and ETag, sent as
    /// If-Modified-Since and If-None-Match.
    pub validators: Option<&'a (Option<String>, Option<String>)>,
    /// nginx's `u->cacheable` as the request is made: the answer may be stored, so the
    /// request asks for the whole, unconditional answer (no `Range`, no `If-*`).
    pub cacheable: bool,
}

/// Why one try failed.
enum Fail {
    /// The client closed while the answer was awaited: not the upstream's fault.
    ClientGone,
    /// The client's streamed body was malformed (400), over `client_max_body_size` (413), or
    /// timed out (408).
    ClientBody(Failure),
    /// `error`: refused, reset, closed early (502).
    Error(String),
    /// `timeout` (504).
    Timeout(String),
    /// `invalid_header` (502).
    Invalid(String),
}

/// Runs the exchange for a request in a `proxy_pass` location. Returns what it came to and
/// the record of the exchange (for `$upstream_*`), if it got as far as choosing an upstream.
pub async fn handle(
    r: &Req<'_, '_>,
    lc: &LocConf,
    pass: &ProxyPass,
    st: UriState<'_>,
    method: &str,
    client_body: &ClientBody<'_>,
) -> (Outcome, Option<Rc<RefCell<Record>>>) {
    // The body first (read whole, or set to stream with `proxy_request_buffering off`), as
    // nginx reads it before it starts the upstream.
    let body = match client_body.for_upstream(lc, r).await {
        Ok(b) => b,
        Err(f) => return (body_failed(r, f), None),
    };
    let mut record = None;
    let handled = run(r, lc, pass, st, method, &body, &mut record).await;
    (handled, record)
}

async fn run(
    r: &Req<'_, '_>,
    lc: &LocConf,
    pass: &ProxyPass,
    st: UriState<'_>,
    method: &str,
    body: &BodyToSend<'_, '_>,
    record_out: &mut Option<Rc<RefCell<Record>>>,
) -> Outcome {
    let conf = &lc.proxy;
    let vars = r.vars_rw(st.rw, lc);
    // nginx escapes `$uri` when the client's path had a `%` (`quoted_uri`; a `+` does not
    // count) or the request is internal.
    let escape = st.internal || {
        let target = r.req.uri();
        let path = target.split(|&c| c == b'?').next().unwrap_or_default();
        path.contains(&b'%')
    };
    let parts = UriParts::new(r.req, st.rw, st.internal, escape);

    // Where to: the linked upstream, or the URL's variables evaluated now.
    let (upstream, uri, host, port, https) = match &pass.target {
        Target::Dynamic {
            template,
            upstreams,
        } => {
            let url = vars.eval(template);
            let known = upstreams.get().map_or(&[][..], Vec::as_slice);
            match dynamic_target(&url, known, &lc.resolver).await {
                Ok((u, uri_part, host, port, https)) => {
                    let uri = match uri_part {
                        Some(u) => u.into_bytes(),
                        None => request::upstream_uri(&parts, None, ""),
                    };
                    (u, uri, Arc::<str>::from(host), port, https)
                }
                Err((status, message)) => {
                    crate::conn_log!(Level::Error, r.info.number, "{message}{}", r.log_ctx());
                    return Outcome::Error(status);
                }
            }
        }
        _ => {
            let Some(u) = pass.upstream() else {
                return Outcome::Error(500);
            };
            let uri = request::upstream_uri(&parts, pass.uri.as_deref(), &pass.location);
            (u.clone(), uri, pass.host.clone(), pass.port, pass.https)
        }
    };
    // `server ... resolve` lines: the peers their names have now.
    let upstream = if upstream.resolving.is_some() {
        match crate::upstream::resolve::current(&upstream).await {
            Some(u) => u,
            None => {
                crate::conn_log!(
                    Level::Error,
                    r.info.number,
                    "no live upstreams while connecting to upstream{}",
                    r.log_ctx()
                );
                return Outcome::Error(502);
            }
        }
    } else {
        upstream
    };
    // An https upstream: the location's TLS settings, built with the configuration.
    let tls = match (https, conf.ssl.built.get()) {
        (false, _) => None,
        (true, Some(t)) => Some(Handshake {
            tls: t,
            host: &host,
            vars: &vars,
        }),
        (true, None) => return Outcome::Error(500),
    };

    // `proxy_store`: where a 200 answer goes (the URI as rewritten, under root or alias).
    let store_path = if lc.proxy_store.enabled() {
        crate::http::proxy_store::path_for(lc, &st.rw.uri, &vars)
    } else {
        None
    };
    let record = Record::start(&host, port);
    record.borrow_mut().https = https;
    record.borrow_mut().cache_validators = st.validators.cloned();
    *record_out = Some(record.clone());

    // The request, written once for every try.
    let set_body = conf.set_body.as_ref().map(|t| vars.eval(t).into_bytes());
    let body_len = match (&set_body, conf.pass_request_body()) {
        (Some(b), _) => Some(b.len() as u64),
        // A `Content-Length: 0` request has no body to read, but nginx passes the length.
        (None, true) => body.len().or_else(|| {
            r.req
                .header("content-length")
                .map(<[u8]>::trim_ascii)
                .filter(|v| !v.is_empty() && v.iter().all(|&c| c == b'0'))
                .map(|_| 0)
        }),
        (None, false) => None,
    };
    let mut head = Vec::with_capacity(512);
    {
        let rec = record.borrow();
        let mut v = r.vars_rw(st.rw, lc);
        v.upstream = Some(&rec);
        let chunked = set_body.is_none()
            && conf.pass_request_body()
            && matches!(body, BodyToSend::Streaming(..))
            && body_len.is_none();
        // `proxy_method`, unless the cache turned a HEAD into a GET (nginx's `u->method`
        // comes first).
        let custom;
        let sent_method = match &conf.method {
            Some(t) if !(method == "GET" && r.req.method() == "HEAD") => {
                custom = v.eval(t);
                custom.as_str()
            }
            _ => method,
        };
        let req = request::Head {
            method: sent_method,
            uri: &uri,
            body_len,
            chunked,
            cacheable: st.cacheable,
        };
        request::write_head(&mut head, &req, conf, &v);
    }

    let first = first_write(&head, set_body.as_deref(), conf, body);

    let hash_key = upstream.hash_key.as_ref().map(|t| vars.eval(t));
    let input = Input {
        client: r.peer().map(|p| p.ip()),
        key: hash_key.as_deref().map_or(&[][..], str::as_bytes),
    };
    let mut attempt = state::start(&upstream, input);
    let next = conf.next_upstream();
    let max_tries = conf.next_upstream_tries();
    let deadline = match conf.next_upstream_timeout() {
        Duration::ZERO => None,
        t => Some(Instant::now() + t),
    };
    let idempotent = !matches!(method, "POST" | "LOCK" | "PATCH");
    let mut tries = 0u64;
    let mut last_status = 502;
    record.borrow_mut().uri = uri;
    let upgrade = r.req.header("upgrade").is_some();
    loop {
        // One clock read for the choice, the try's start and the keep-alive cache's expiry.
        let now = Instant::now();
        let Some(peer) = state::pick(&upstream, &mut attempt, now) else {
            let uri_text = shoal_http::lossy(&record.borrow().uri).into_owned();
            crate::conn_log!(
                Level::Error,
                r.info.number,
                "no live upstreams while connecting to upstream{}",
                ctx_with_upstream(
                    r,
                    &format!(
                        "{}://{}{uri_text}",
                        if https { "https" } else { "http" },
                        upstream.name
                    )
                )
            );
            // nginx's `NGX_HTTP_UPSTREAM_FT_NOLIVE`: 502, whatever failed before.
            let _ = last_status;
            return Outcome::Error(502);
        };
        tries += 1;
        let addr = &upstream.addrs[peer];
        record.borrow_mut().begin(addr.clone(), now);
        let (result, sent_any) = exchange(
            &upstream,
            peer,
            addr,
            conf,
            &head,
            &first,
            set_body.as_deref(),
            body,
            UpstreamRequest {
                head: method == "HEAD",
                upgrade,
            },
            &record,
            r.info.number,
            r.client,
            idempotent || next.has(NextUpstream::NON_IDEMPOTENT),
            tls.as_ref(),
        )
        .await;
        let fail = match result {
            Ok(answer) => {
                let status = answer.status;
                let bit = NextUpstream::of_status(status);
                let more = attempt.tries() > 1
                    && next.has(bit)
                    && !body.consumed()
                    && (idempotent || next.has(NextUpstream::NON_IDEMPOTENT))
                    && (max_tries == 0 || tries < max_tries)
                    && deadline.is_none_or(|d| Instant::now() < d);
                if more {
                    // Counted as a failure but for 403 and 404 (nginx's rule).
                    let outcome = if matches!(status, 403 | 404) {
                        PeerResult::Success
                    } else {
                        PeerResult::Failed
                    };
                    state::free(&upstream, &mut attempt, outcome);
                    drop(answer);
                    record.borrow_mut().finish(false);
                    last_status = status;
                    continue;
                }
                state::free(&upstream, &mut attempt, PeerResult::Success);
                if conf.intercept_errors()
                    && status >= 300
                    && lc
                        .error_page
                        .as_deref()
                        .is_some_and(|p| p.iter().any(|e| e.codes.contains(&status)))
                {
                    let mut rec = record.borrow_mut();
                    rec.finish(false);
                    // nginx keeps a 401's `WWW-Authenticate` for the error page's answer.
                    if status == 401 {
                        if let Some(v) = answer.head.header("www-authenticate") {
                            rec.carry.push((
                                "WWW-Authenticate".to_string(),
                                shoal_http::lossy(v).into_owned(),
                            ));
                        }
                    }
                    return Outcome::Error(status);
                }
                let mut reply = answer.into_reply(lc, pass, r, &record);
                if let Some(dest) = &store_path {
                    crate::http::proxy_store::attach(&mut reply, lc, dest.clone(), r.info.number);
                }
                return Outcome::Final(reply);
            }
            Err(f) => f,
        };
        let (status, bit, message) = match fail {
            Fail::ClientGone => {
                crate::conn_log!(
                    Level::Info,
                    r.info.number,
                    "client prematurely closed connection, so upstream connection is closed too \
                     while reading response header from upstream{}",
                    record.borrow().log_ctx(r.req, r.srv, r.info)
                );
                record.borrow_mut().fail(499);
                state::free(&upstream, &mut attempt, PeerResult::Success);
                return Outcome::Final(Reply::boxed(499));
            }
            Fail::ClientBody(f) => {
                state::free(&upstream, &mut attempt, PeerResult::Success);
                return body_failed(r, f);
            }
            Fail::Error(m) => (502, NextUpstream::ERROR, m),
            Fail::Timeout(m) => (504, NextUpstream::TIMEOUT, m),
            Fail::Invalid(m) => (502, NextUpstream::INVALID_HEADER, m),
        };
        record.borrow_mut().last_fail = bit;
        crate::conn_log!(
            Level::Error,
            r.info.number,
            "{message}{}",
            record.borrow().log_ctx(r.req, r.srv, r.info)
        );
        record.borrow_mut().fail(status);
        state::free(&upstream, &mut attempt, PeerResult::Failed);
        last_status = status;
        let more = attempt.tries() > 0
            && next.has(bit)
            && !body.consumed()
            && (!sent_any || idempotent || next.has(NextUpstream::NON_IDEMPOTENT))
            && (max_tries == 0 || tries < max_tries)
            && deadline.is_none_or(|d| Instant::now() < d);
        if !more {
            return Outcome::Error(status);
        }
    }
}

/// Why sending a request failed.
enum SendError {
    TimedOut,
    Io(std::io::Error),
    /// The client's body could not be read (streamed bodies).
    Client(Failure),
}

/// Writes `data`, each wait for the upstream bounded by `timeout`.
async fn write_timed(
    stream: &mut Transport,
    timer: &mut Timer,
    data: &[u8],
    timeout: Duration,
) -> Result<(), SendError> {
    let mut pos = 0;
    while pos < data.len() {
        match timer.within(timeout, stream.write(&data[pos..])).await {
            Err(_) => return Err(SendError::TimedOut),
            Ok(Err(e)) => return Err(SendError::Io(e)),
            Ok(Ok(0)) => return Err(SendError::Io(std::io::ErrorKind::WriteZero.into())),
            Ok(Ok(n)) => pos += n,
        }
    }
    Ok(())
}

/// A body up to this size goes in the request's first write, with the head.
const SMALL_BODY: usize = 64 * 1024;

/// The request's first write: the head, with the body when `proxy_set_body` gives it or it is
/// small and in memory (one write, so one segment for a small request).
fn first_write<'h>(
    head: &'h [u8],
    set_body: Option<&[u8]>,
    conf: &ProxyLoc,
    body: &BodyToSend<'_, '_>,
) -> Cow<'h, [u8]> {
    let with = |b: &[u8]| {
        if b.is_empty() {
            return Cow::Borrowed(head);
        }
        let mut all = Vec::with_capacity(head.len() + b.len());
        all.extend_from_slice(head);
        all.extend_from_slice(b);
        Cow::Owned(all)
    };
    match (set_body, conf.pass_request_body(), body) {
        (Some(b), _, _) => with(b),
        (None, true, BodyToSend::Whole(Whole::Memory(b))) if b.len() <= SMALL_BODY => with(b),
        _ => Cow::Borrowed(head),
    }
}

/// Sends the request: the rest of its first write (`first`, of which `sent` bytes went out as
/// the connection was made), then a body that did not fit in it (from memory, the temporary
/// file, or the client as it arrives: chunked when its length is unknown).
// A streamed body is borrowed for the whole send: only this request's task touches it, and
// nothing else borrows it until the send is over.
#[allow(clippy::await_holding_refcell_ref, clippy::too_many_arguments)]
async fn send_request(
    stream: &mut Transport,
    timer: &mut Timer,
    first: &[u8],
    sent: usize,
    set_body: Option<&[u8]>,
    conf: &ProxyLoc,
    body: &BodyToSend<'_, '_>,
    timeout: Duration,
) -> Result<(), SendError> {
    write_timed(stream, timer, &first[sent..], timeout).await?;
    // A body written after the head, in pieces: each goes out as written, not held back
    // until the previous one is acknowledged. (A request in one write needs no
    // `TCP_NODELAY`, and nginx sets none on upstream connections.)
    match (set_body, conf.pass_request_body(), body) {
        (Some(_), _, _) => Ok(()),
        (None, true, BodyToSend::Whole(Whole::Memory(b))) if b.len() <= SMALL_BODY => Ok(()),
        (None, true, BodyToSend::Whole(Whole::Memory(b))) => {
            stream.set_nodelay();
            write_timed(stream, timer, b, timeout).await
        }
        (None, true, BodyToSend::Whole(Whole::File(f, len))) => {
            stream.set_nodelay();
            let mut off = 0u64;
            let mut chunk = vec![0u8; 64 * 1024];
            while off < *len {
                let want = ((*len - off) as usize).min(chunk.len());
                let n = std::os::unix::fs::FileExt::read_at(&**f, &mut chunk[..want], off)
                    .map_err(SendError::Io)?;
                if n == 0 {
                    return Err(SendError::Io(std::io::Error::other(
                        "request body file shrank",
                    )));
                }
                write_timed(stream, timer, &chunk[..n], timeout).await?;
                off += n as u64;
            }
            Ok(())
        }
        (None, true, BodyToSend::Streaming(s, length)) => {
            stream.set_nodelay();
            let chunked = length.is_none();
            while let Some(piece) = s.next_piece().await.map_err(SendError::Client)? {
                if chunked {
                    let mut framed = Vec::with_capacity(piece.len() + 16);
                    shoal_http::response::write_chunk(&mut framed, &piece);
                    write_timed(stream, timer, &framed, timeout).await?;
                } else {
                    write_timed(stream, timer, &piece, timeout).await?;
                }
            }
            if chunked {
                write_timed(stream, timer, shoal_http::response::LAST_CHUNK, timeout).await?;
            }
            Ok(())
        }
        _ => Ok(()),
    }
}

/// Whether the client closed its connection (`Ready(true)`) or sent more (`Ready(false)`: the
/// bytes stay unread), as [`Stream::peer_closed`] waits for it, but polled through the socket's
/// one reader slot: no waiter is queued on the socket and taken off again per wait.
fn poll_client_closed(c: ClientWatch<'_>, cx: &mut Context<'_>) -> Poll<bool> {
    let c = match c {
        ClientWatch::Conn(t) => t,
        // An HTTP/2 stream: the client reset it (or the connection is gone).
        ClientWatch::Stream(s) => return s.borrow_mut().poll_reset(cx).map(|_| true),
    };
    loop {
        match c.poll_read_ready(cx) {
            Poll::Pending => return Poll::Pending,
            Poll::Ready(Err(_)) => return Poll::Ready(true),
            Poll::Ready(Ok(())) => {}
        }
        // A readiness the peek finds stale is cleared; the next poll waits anew.
        match c.try_peek_closed() {
            Ok(eof) => return Poll::Ready(eof),
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => continue,
            Err(_) => return Poll::Ready(true),
        }
    }
}

/// `http://ADDR/uri` (`https://` for TLS) as nginx's log lines name the upstream.
fn upstream_url(addr: &PeerAddr, uri: &str, https: bool) -> String {
    let scheme = if https { "https" } else { "http" };
    match addr {
        PeerAddr::Inet(a) => format!("{scheme}://{a}{uri}"),
        PeerAddr::Unix(p) => format!("{scheme}://unix:{}:{uri}", p.display()),
    }
}

/// What a connection to an https upstream needs for its handshake: the location's TLS
/// settings, the `proxy_pass` host (the default `proxy_ssl_name`), the request's variables.
pub struct Handshake<'a> {
    tls: &'a super::ssl::UpstreamTls,
    host: &'a str,
    vars: &'a crate::variables::Vars<'a>,
}

/// `, client: ..., server: ..., request: "...", upstream: "...", host: "..."`.
fn ctx_with_upstream(r: &Req<'_, '_>, upstream: &str) -> String {
    let base = r.log_ctx();
    let up = format!(", upstream: \"{upstream}\"");
    match base.find(", host: \"") {
        Some(i) => format!("{}{up}{}", &base[..i], &base[i..]),
        None => base + &up,
    }
}

/// A URL with variables, evaluated: an upstream block by the host's name, an address, or a
/// name the location's `resolver` looks up.
#[allow(clippy::type_complexity)]
async fn dynamic_target(
    url: &str,
    upstreams: &[Arc<UpstreamConf>],
    resolver: &crate::resolver::conf::ResolverLoc,
) -> Result<(Arc<UpstreamConf>, Option<String>, String, u16, bool), (u16, String)> {
    let (rest, https) = if let Some(r) = url.strip_prefix("http://") {
        (r, false)
    } else if let Some(r) = url.strip_prefix("https://") {
        (r, true)
    } else {
        return Err((500, format!("invalid URL prefix in \"{url}\"")));
    };
    let default_port = if https { 443 } else { 80 };
    if https && rest.starts_with("unix:") {
        return Err((
            500,
            format!("https to a unix socket is not supported in \"{url}\""),
        ));
    }
    if let Some(path) = rest.strip_prefix("unix:") {
        let (sock, uri) = match path.split_once(':') {
            Some((p, u)) => (p, Some(u.to_string()).filter(|u| !u.is_empty())),
            None => (path, None),
        };
        let mut u = UpstreamConf::unix(sock);
        u.ephemeral = true;
        return Ok((Arc::new(u), uri, format!("unix:{sock}"), 80, false));
    }
    let (authority, uri) = match rest.find('/') {
        Some(i) => (&rest[..i], Some(rest[i..].to_string())),
        None => (rest, None),
    };
    let (name, port) = split_host_port(authority, default_port).map_err(|m| (500, m))?;
    let port_written = if authority.starts_with('[') {
        authority.contains("]:")
    } else {
        authority.contains(':')
    };
    // An upstream block is found by name only when no port is given (nginx's rule).
    if let Some(u) = upstreams.iter().find(|u| !port_written && u.name == name) {
        return Ok((u.clone(), uri, authority.to_string(), port, https));
    }
    let bare = name.trim_start_matches('[').trim_end_matches(']');
    if bare.parse::<std::net::IpAddr>().is_err() {
        let Some(res) = &resolver.resolver else {
            return Err((502, format!("no resolver defined to resolve {name}")));
        };
        let addrs = crate::resolver::resolve(res, bare, resolver.timeout())
            .await
            .map_err(|f| (502, format!("{name} could not be resolved {f}")))?;
        let u = UpstreamConf::resolved(&name, &addrs, port);
        return Ok((Arc::new(u), uri, authority.to_string(), port, https));
    }
    let mut u = UpstreamConf::implicit(&name, port).map_err(|m| (502, m))?;
    u.ephemeral = true;
    Ok((Arc::new(u), uri, authority.to_string(), port, https))
}

/// An answer's head, read; its body still on the connection.
struct Answer {
    status: u16,
    reason: Option<String>,
    head: shoal_http::upstream::UpstreamHead,
    /// Boxed where it is made: it is large, and it is boxed in the reply in the end.
    body: Box<UpstreamBody>,
    upgrade: bool,
}

impl Answer {
    /// The reply to the client: the status line and the head passed on as
    /// [`super::answer::pass_head`] passes it, the body streamed.
    fn into_reply(
        mut self,
        lc: &LocConf,
        pass: &ProxyPass,
        r: &Req<'_, '_>,
        record: &Rc<RefCell<Record>>,
    ) -> Box<Reply> {
        let conf = &lc.proxy;
        let mut reply = Reply::boxed(self.status);
        reply.proxied = true;
        reply.upstream_status = true;
        reply.reason = self.reason;
        let lines = self.head.headers().map(|(name, value)| {
            let known = UpstreamHeader::of(name);
            super::answer::Line {
                name,
                value,
                kind: super::answer::Kind::fresh(known),
                hidden: known.hidden(),
            }
        });
        let passed = super::answer::pass_head(&mut reply, lines, false, lc, pass, r, record);
        // `proxy_force_ranges`: ranges of any answer, whatever it said (nginx sets
        // `r->allow_ranges` and, the answer being streamed, `r->single_range`).
        reply.allow_ranges = conf.force_ranges() && self.status == 200;
        record.borrow_mut().head = Some(self.head);
        self.body.buffering = passed.buffering.unwrap_or(conf.buffering());
        // `proxy_limit_rate`: the pace of reading a buffered answer (nginx's event pipe).
        if self.body.buffering && conf.limit_rate() > 0 {
            let start = crate::http::limit_rate::unix_secs();
            let pacer = crate::http::limit_rate::Pacer::new(conf.limit_rate(), 0, start);
            self.body.limit = Some(crate::http::limit_rate::Pacing::new(pacer));
        }
        reply.body = if self.upgrade {
            Body::Tunnel(self.body)
        } else {
            Body::Upstream(self.body)
        };
        reply
    }
}

/// Connects to a peer: a kept-alive connection when one is cached (and `cached`, the try's
/// start, allows), else a new one. A cached one comes with its timer, when it was opened and how many requests
/// it carried; a new one with how much of `first` (the request's first write) it has sent
/// already.
#[allow(clippy::type_complexity)]
async fn connect(
    upstream: &UpstreamConf,
    peer: usize,
    addr: &PeerAddr,
    conf: &ProxyLoc,
    cached: Option<Instant>,
    first: &[u8],
    tls: Option<&Handshake<'_>>,
) -> Result<(Transport, Option<(Timer, Instant, u64)>, usize), Fail> {
    if let Some(now) = cached {
        if let Some(r) = state::take_idle(upstream, peer, now, tls.is_some()) {
            return Ok((r.stream, Some((r.timer, r.born, r.requests)), 0));
        }
    }
    let timeout = conf.connect_timeout();
    match addr {
        PeerAddr::Inet(a) => {
            let Some(h) = tls else {
                let (s, sent) = connect_tcp(*a, conf, first, timeout).await?;
                return Ok((Transport::Tcp(s), None, sent));
            };
            // TLS: the handshake first (nothing of the request goes with the connection),
            // bounded by `proxy_connect_timeout` as nginx bounds it.
            let (s, _) = connect_tcp(*a, conf, &[], timeout).await?;
            match tokio::time::timeout(timeout, super::ssl::handshake(s, h.tls, h.host, h.vars))
                .await
            {
                Err(_) => Err(Fail::Timeout(
                    "upstream timed out (110: Connection timed out) while SSL handshaking to upstream"
                        .into(),
                )),
                Ok(Err(m)) => Err(Fail::Error(m)),
                Ok(Ok(c)) => Ok((Transport::Tls(Box::new(c)), None, 0)),
            }
        }
        PeerAddr::Unix(p) => {
            match tokio::time::timeout(timeout, tokio::net::UnixStream::connect(p)).await {
                Err(_) => Err(connect_timed_out()),
                Ok(Err(e)) => Err(connect_failed(e)),
                Ok(Ok(s)) => Ok((Transport::Unix(s), None, 0)),
            }
        }
    }
}

fn connect_timed_out() -> Fail {
    Fail::Timeout(
        "upstream timed out (110: Connection timed out) while connecting to upstream".into(),
    )
}

fn connect_failed(e: std::io::Error) -> Fail {
    Fail::Error(format!(
        "connect() failed {} while connecting to upstream",
        shoal_conf::os_error(&e)
    ))
}

/// A new TCP connection to `a` (with `proxy_bind` and `proxy_socket_keepalive`), and how much
/// of `first` it has sent.
///
/// A non-blocking connect() says EINPROGRESS even when the handshake is already over, as it
/// is to a near peer (loopback: the peer's answer is processed before connect() returns). So
/// `first` is written at once: taken, the connection is up and a turn of the event loop (wait
/// for writable, then getsockopt(SO_ERROR)) is saved; EAGAIN, it is still being made and is
/// waited for as nginx does, within `proxy_connect_timeout`. An error from that write is the
/// connection's own (refused, reset, unreachable: what nginx reads with SO_ERROR), and is
/// logged as nginx logs it, `connect() failed (111: Connection refused)`.
async fn connect_tcp(
    a: std::net::SocketAddr,
    conf: &ProxyLoc,
    first: &[u8],
    timeout: Duration,
) -> Result<(tokio::net::TcpStream, usize), Fail> {
    use socket2::{Domain, Socket, Type};
    use std::io::Write;
    let socket = Socket::new(Domain::for_address(a), Type::STREAM.nonblocking(), None)
        .map_err(connect_failed)?;
    if conf.socket_keepalive.unwrap_or(false) {
        let _ = socket.set_keepalive(true);
    }
    if let Some(Some(bind)) = &conf.bind {
        if let Some(text) = bind.pieces.first().and_then(|p| match p {
            crate::variables::Piece::Text(t) => Some(t.clone()),
            _ => None,
        }) {
            if let Ok(ip) = text.parse::<std::net::IpAddr>() {
                socket
                    .bind(&std::net::SocketAddr::new(ip, 0).into())
                    .map_err(|e| {
                        Fail::Error(format!(
                            "bind({text}) failed {} while connecting to upstream",
                            shoal_conf::os_error(&e)
                        ))
                    })?;
            }
        }
    }
    match socket.connect(&a.into()) {
        Ok(()) => {}
        Err(e) if e.raw_os_error() == Some(libc::EINPROGRESS) => {}
        Err(e) => return Err(connect_failed(e)),
    }
    let std = std::net::TcpStream::from(socket);
    let sent = match (&std).write(first) {
        Ok(n) if n > 0 => Some(n),
        Ok(_) => None,
        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => None,
        Err(e) => return Err(connect_failed(e)),
    };
    let stream = tokio::net::TcpStream::from_std(std).map_err(connect_failed)?;
    if let Some(n) = sent {
        return Ok((stream, n));
    }
    match tokio::time::timeout(timeout, stream.writable()).await {
        Err(_) => Err(connect_timed_out()),
        Ok(Err(e)) => Err(connect_failed(e)),
        Ok(Ok(())) => match stream.take_error() {
            Ok(None) => Ok((stream, 0)),
            Ok(Some(e)) | Err(e) => Err(connect_failed(e)),
        },
    }
}

/// One try: connect, send, read the head. Returns the answer or the failure, and whether any
/// of the request reached the upstream (a non-idempotent request is then not retried).
#[allow(clippy::too_many_arguments)]
async fn exchange(
    upstream: &Arc<UpstreamConf>,
    peer: usize,
    addr: &PeerAddr,
    conf: &ProxyLoc,
    head: &[u8],
    first: &[u8],
    set_body: Option<&[u8]>,
    body: &BodyToSend<'_, '_>,
    asked: UpstreamRequest,
    record: &Rc<RefCell<Record>>,
    conn: u64,
    client: Option<ClientWatch<'_>>,
    resend_ok: bool,
    tls: Option<&Handshake<'_>>,
) -> (Result<Answer, Fail>, bool) {
    // A cached connection may have been closed by the upstream just now: then the request
    // goes once more on a new connection, and the failure is not the peer's.
    let mut fresh_only = false;
    let start = record.borrow_mut().last().start;
    loop {
        let cached = (!fresh_only).then_some(start);
        let (stream, reused, sent) =
            match connect(upstream, peer, addr, conf, cached, first, tls).await {
                Ok(x) => x,
                Err(f) => return (Err(f), false),
            };
        let was_cached = reused.is_some();
        // A cached connection took no time to get (nginx reports 0.000 for it).
        let (timer, born, requests, connect) = match reused {
            Some((timer, born, requests)) => (timer, born, requests, Duration::ZERO),
            None => {
                let now = Instant::now();
                (Timer::new(), now, 0, now.saturating_duration_since(start))
            }
        };
        record.borrow_mut().last().connect = Some(connect);
        match send_and_read(
            (stream, timer),
            conf,
            head,
            (first, sent),
            set_body,
            body,
            asked,
            record,
            upstream,
            peer,
            born,
            requests + 1,
            client,
        )
        .await
        {
            Ok(a) => return (Ok(a), true),
            Err((f, nothing_read)) => {
                // Sent again only when nginx would send it to another peer: an idempotent
                // method (or `non_idempotent`), and a body that can be sent twice.
                if was_cached
                    && nothing_read
                    && resend_ok
                    && !body.consumed()
                    && matches!(f, Fail::Error(_))
                {
                    crate::conn_log!(
                        Level::Debug,
                        conn,
                        "a kept-alive upstream connection was closed, sending again"
                    );
                    fresh_only = true;
                    continue;
                }
                return (Err(f), true);
            }
        }
    }
}

/// Sends the request on `stream` (`first`, the request's first write, of which `sent` bytes
/// went out as the connection was made, then the rest) and reads the answer's head. On failure,
/// whether nothing at all was read back.
#[allow(clippy::too_many_arguments)]
async fn send_and_read(
    (mut stream, mut timer): (Transport, Timer),
    conf: &ProxyLoc,
    head: &[u8],
    (first, sent): (&[u8], usize),
    set_body: Option<&[u8]>,
    body: &BodyToSend<'_, '_>,
    asked: UpstreamRequest,
    record: &Rc<RefCell<Record>>,
    upstream: &Arc<UpstreamConf>,
    peer: usize,
    born: Instant,
    requests: u64,
    client: Option<ClientWatch<'_>>,
) -> Result<Answer, (Fail, bool)> {
    let send_timeout = conf.send_timeout();
    // `proxy_send_timeout` bounds each wait for the upstream to take more, not the transfer.
    let result = send_request(
        &mut stream,
        &mut timer,
        first,
        sent,
        set_body,
        conf,
        body,
        send_timeout,
    )
    .await;
    match result {
        Err(SendError::TimedOut) => {
            return Err((
                Fail::Timeout(
                    "upstream timed out (110: Connection timed out) while sending request to \
                     upstream"
                        .into(),
                ),
                true,
            ))
        }
        Err(SendError::Client(Failure::Gone)) => return Err((Fail::ClientGone, true)),
        Err(SendError::Client(f)) => return Err((Fail::ClientBody(f), true)),
        Err(SendError::Io(e)) => {
            return Err((
                Fail::Error(format!(
                    "writev() failed {} while sending request to upstream",
                    shoal_conf::os_error(&e)
                )),
                true,
            ))
        }
        Ok(()) => {}
    }
    {
        let mut rec = record.borrow_mut();
        let sent = head.len() as u64
            + match (set_body, conf.pass_request_body()) {
                (Some(b), _) => b.len() as u64,
                (None, true) => body.len().unwrap_or(0),
                (None, false) => 0,
            };
        rec.last().sent = sent;
    }
    let read_timeout = conf.read_timeout();
    let max = conf.buffer_size();
    let mut buf = BytesMut::with_capacity(max.max(4096));
    let mut watch_client = true;
    // Interim answers (100, 102, 103) read so far: skipped, their bytes counted against
    // `proxy_buffer_size` with the final head's (so an upstream cannot send them forever).
    let mut interim = 0usize;
    let parsed = loop {
        match super::parse::head(&mut buf, max.saturating_sub(interim), asked) {
            Ok(Some(p)) if p.is_interim() => {
                interim += p.consumed;
                continue;
            }
            Ok(Some(p)) => break p,
            Ok(None) => {}
            Err(message) => {
                return Err((
                    Fail::Invalid(format!(
                        "{message} while reading response header from upstream"
                    )),
                    buf.is_empty(),
                ))
            }
        }
        if buf.len() + interim >= max {
            return Err((
                Fail::Invalid(
                    "upstream sent too big header while reading response header from upstream"
                        .into(),
                ),
                false,
            ));
        }
        if buf.capacity() - buf.len() < 1024 {
            buf.reserve(max);
        }
        // While waiting, the client is watched: one that closes ends the exchange (nginx's
        // `proxy_ignore_client_abort off`); one that sends more (a pipelined request) is not
        // watched any further.
        let read = timer.within(read_timeout, stream.read_buf(&mut buf));
        let read = match client.filter(|_| watch_client) {
            None => read.await,
            Some(c) => {
                // The upstream first: the client is looked at only while its answer is awaited.
                let mut read = std::pin::pin!(read);
                let watched = std::future::poll_fn(|cx| {
                    if let Poll::Ready(r) = std::future::Future::poll(read.as_mut(), cx) {
                        return Poll::Ready(Some(r));
                    }
                    if watch_client {
                        match poll_client_closed(c, cx) {
                            Poll::Ready(true) => return Poll::Ready(None),
                            Poll::Ready(false) => watch_client = false,
                            Poll::Pending => {}
                        }
                    }
                    Poll::Pending
                })
                .await;
                match watched {
                    Some(r) => r,
                    None => return Err((Fail::ClientGone, false)),
                }
            }
        };
        match read {
            Err(_) => {
                return Err((
                    Fail::Timeout(
                        "upstream timed out (110: Connection timed out) while reading response header from upstream"
                            .into(),
                    ),
                    buf.is_empty(),
                ))
            }
            Ok(Err(e)) => {
                return Err((
                    Fail::Error(format!(
                        "recv() failed {} while reading response header from upstream",
                        shoal_conf::os_error(&e)
                    )),
                    buf.is_empty(),
                ))
            }
            Ok(Ok(0)) => {
                return Err((
                    Fail::Error(
                        "upstream prematurely closed connection while reading response header from upstream"
                            .into(),
                    ),
                    buf.is_empty(),
                ))
            }
            Ok(Ok(n)) => record.borrow_mut().received(n as u64),
        }
    };
    {
        let mut rec = record.borrow_mut();
        let t = rec.last();
        t.header = Some(t.start.elapsed());
        t.status = Some(parsed.status);
        t.head_len = parsed.consumed as u64;
    }
    let body = Box::new(UpstreamBody::new(
        stream,
        buf,
        parsed.framing,
        parsed.content_length,
        parsed.reusable,
        upstream.clone(),
        peer,
        born,
        requests,
        read_timeout,
        timer,
        record.clone(),
    ));
    Ok(Answer {
        status: parsed.status,
        reason: parsed.reason,
        head: parsed.head,
        body,
        upgrade: parsed.upgrade,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_try_is_reported_in_order() {
        let mut r = Record::default();
        let value = |r: &Record, name| {
            let mut s = String::new();
            r.value(name, &mut s).then_some(s)
        };
        assert_eq!(value(&r, "upstream_addr"), None);
        let now = Instant::now();
        for (port, status) in [(1, 502), (2, 504), (3, 200)] {
            r.begin(PeerAddr::Inet(([127, 0, 0, 1], port).into()), now);
            r.fail(status);
            r.received(10);
        }
        assert_eq!(
            value(&r, "upstream_addr").as_deref(),
            Some("127.0.0.1:1, 127.0.0.1:2, 127.0.0.1:3")
        );
        assert_eq!(
            value(&r, "upstream_status").as_deref(),
            Some("502, 504, 200")
        );
        assert_eq!(
            value(&r, "upstream_bytes_received").as_deref(),
            Some("10, 10, 10")
        );
        assert_eq!(
            r.tries.last().map(|t| t.addr.to_string()).as_deref(),
            Some("127.0.0.1:3")
        );
    }
}
