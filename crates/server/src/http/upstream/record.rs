//! The record of one request's exchange with its upstream: the peers tried, what each
//! answered and how long it took; it values the `$upstream_*` variables and the context of
//! the layer's log lines.

use std::cell::RefCell;
use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::spare::Spares;
use crate::upstream::conf::PeerAddr;

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
    /// An HTTP/2 upstream's (gRPC's) instead: its fields as its codec checked them (lowercase
    /// names, no value an HTTP/1 parser would read otherwise), kept as they came rather than
    /// written out as text for the few requests that look.
    pub head_fields: Option<shoal_http2::client::Fields>,
    /// `$upstream_cache_status` (HIT, MISS, ...), when the proxy cache is on.
    pub cache_status: Option<crate::http::proxy_cache::CacheStatus>,
    /// The headers of an answer served from the cache (no upstream head then).
    pub cached_headers: std::rc::Rc<[(String, String)]>,
    /// Upstream headers the next answer keeps (an intercepted 401's `WWW-Authenticate`, an
    /// `X-Accel-Redirect`'s headers; see [`Record::hand_on`]).
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
    /// The protocol's name in log lines (`http`, `https`, `fastcgi`, ...).
    pub scheme: &'static str,
    /// `$upstream_last_server_name`: the name of the last try's `server` (as its line wrote
    /// it), or the host of a `proxy_pass` without an `upstream` block.
    pub last_server: String,
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
pub fn empty_host() -> Arc<str> {
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
            head_fields: None,
            cache_status: None,
            cached_headers: EMPTY_HEADERS.with(|h| h.clone()),
            carry: Vec::new(),
            last_fail: 0,
            cache_validators: None,
            background: None,
            scheme: "http",
            last_server: String::new(),
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

    pub(crate) fn last_mut(&mut self) -> Option<&mut Try> {
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
    pub(crate) start: Instant,
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
            head_fields,
            cache_status,
            cached_headers,
            carry,
            last_fail,
            cache_validators,
            background,
            scheme,
            last_server,
        } = self;
        last_server.clear();
        if uri.capacity() > 4096 {
            *uri = Vec::new();
        }
        uri.clear();
        tries.first = None;
        tries.more.clear();
        *head = None;
        *head_fields = None;
        *cache_status = None;
        if !cached_headers.is_empty() {
            *cached_headers = EMPTY_HEADERS.with(|h| h.clone());
        }
        carry.clear();
        *last_fail = 0;
        *cache_validators = None;
        *background = None;
        *scheme = "http";
    }

    pub(crate) fn begin(&mut self, addr: PeerAddr, now: Instant) {
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

    pub(crate) fn last(&mut self) -> &mut Try {
        self.tries.last_mut().expect("a try was begun")
    }

    pub(crate) fn fail(&mut self, status: u16) {
        let t = self.last();
        t.status = Some(status);
        t.response = Some(t.start.elapsed());
    }

    pub fn received(&mut self, n: u64) {
        if let Some(t) = self.tries.last_mut() {
            t.received += n;
        }
    }

    /// What an earlier upstream answer handed on (an intercepted 401's `WWW-Authenticate`, an
    /// `X-Accel-Redirect`'s headers): first among the answer's headers, as nginx set them before
    /// this answer's handler ran; a `Content-Type` is the answer's type, but on nginx's own
    /// page (an error page says `text/html`, with the charset of the type handed on).
    pub fn hand_on(&mut self, reply: &mut crate::http::reply::Reply) {
        if self.carry.is_empty() {
            return;
        }
        let mut front = Vec::with_capacity(self.carry.len());
        for (n, v) in self.carry.drain(..) {
            if n == "Content-Type" {
                if !reply.special {
                    reply.content_type = Some(v);
                    // Its `charset` parameter is the body's, as an upstream's is.
                    reply.charset_param = true;
                } else if let (_, Some(cs)) = crate::http::charset::split_charset(&v) {
                    // The page keeps the charset nginx read from it.
                    reply.content_type = Some(format!("text/html; charset={cs}"));
                    reply.charset_param = true;
                }
            } else {
                front.push((n.into(), v.into()));
            }
        }
        // Before what the redirect's own answer added (a file's `ETag`): nginx copied them
        // into its list first.
        let own = reply.headers.drain(..).map(|(n, v)| (n.into(), v));
        front.extend(own);
        reply.extra.splice(0..0, front);
    }

    /// The body was read (or given up on): the response time is taken.
    pub fn finish(&mut self, complete: bool) {
        if self.tries.last().is_some_and(|t| t.response.is_none()) {
            self.finish_at(complete, Instant::now());
        }
    }

    /// [`Record::finish`] with the clock read already (`now`).
    pub fn finish_at(&mut self, _complete: bool, now: Instant) {
        if let Some(t) = self.tries.last_mut() {
            t.response
                .get_or_insert_with(|| now.saturating_duration_since(t.start));
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
        let uri = shoal_http::log_text(&self.uri);
        let url = match self.tries.last() {
            Some(t) => upstream_url(&t.addr, &uri, self.scheme),
            None => format!("{}://{}{uri}", self.scheme, self.proxy_host),
        };
        crate::http::request::log_ctx_upstream(req, srv, info.peer, Some(&url))
    }

    /// The last answer's header fields in order, names as sent (none for a cached answer).
    pub fn answer_headers(&self) -> impl Iterator<Item = (&[u8], &[u8])> + '_ {
        let text = self.head.as_ref().map(|h| h.headers());
        let fields = self.head_fields.as_ref().map(|f| f.iter());
        text.into_iter()
            .flatten()
            .chain(fields.into_iter().flatten())
    }

    /// The first value of the last answer's header `name` (case-insensitive).
    #[inline]
    pub fn answer_header(&self, name: &str) -> Option<&[u8]> {
        match &self.head {
            Some(h) => h.header(name),
            None => self.fields_header(name),
        }
    }

    /// [`Record::answer_header`] in an HTTP/2 upstream's fields (apart: the proxy's path
    /// inlines the other half only).
    #[inline(never)]
    fn fields_header(&self, name: &str) -> Option<&[u8]> {
        self.head_fields
            .as_ref()?
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name.as_bytes()))
            .map(|(_, v)| v)
    }

    /// The answer's headers, names as sent: the upstream's, or the cached answer's.
    pub fn header_list(&self) -> Vec<(String, String)> {
        match self.head.is_some() || self.head_fields.is_some() {
            true => self
                .answer_headers()
                .map(|(n, v)| {
                    (
                        shoal_http::lossy(n).into_owned(),
                        shoal_http::lossy(v).into_owned(),
                    )
                })
                .collect(),
            false => self.cached_headers.to_vec(),
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
            "upstream_last_server_name" => {
                if self.tries.is_empty() {
                    return false;
                }
                out.push_str(&self.last_server);
            }
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
                let fresh = self.head.is_some() || self.head_fields.is_some();
                let found: Option<std::borrow::Cow<'_, [u8]>> = match fresh {
                    true => self
                        .answer_headers()
                        .find(|(n, _)| matches(n))
                        .map(|(_, v)| std::borrow::Cow::Borrowed(v)),
                    false => self
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

/// `http://ADDR/uri` (`fastcgi://`, ...: the record's scheme) as nginx's log lines name the
/// upstream.
pub fn upstream_url(addr: &PeerAddr, uri: &str, scheme: &str) -> String {
    match addr {
        PeerAddr::Inet(a) => format!("{scheme}://{a}{uri}"),
        PeerAddr::Unix(p) => format!("{scheme}://unix:{}:{uri}", p.display()),
    }
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
