//! The answer a request comes to, before any byte of it is written: its status, headers and
//! body ([`Reply`], [`Body`]), and what a phase or a handler came to ([`Outcome`]).
//!
//! These are plain values, known to every module and protocol: the phases and handlers make
//! them, the header filters change them, and a protocol (HTTP/1 today) writes them. Nothing here
//! does I/O.

use std::borrow::Cow;
use std::fs::File;
use std::sync::Arc;

use shoal_http::date::DATE_LEN;

use super::range;
use super::{LocConf, ServerTokens};

/// A response body.
pub enum Body {
    Empty,
    Bytes(Vec<u8>),
    /// These bytes, then the rest of the body (a file's first piece, read before the head so
    /// a full thread pool queue can still be answered with 503).
    Chain(Vec<u8>, Box<Body>),
    /// A range of a file; `cached` holds the whole file's bytes when the open-file cache has
    /// them (small hot files), so no read is needed.
    File {
        file: Arc<File>,
        offset: u64,
        len: u64,
        cached: Option<bytes::Bytes>,
    },
    /// A `multipart/byteranges` answer over one file.
    Multipart {
        file: Arc<File>,
        parts: range::Multipart,
        cached: Option<bytes::Bytes>,
    },
    /// A proxied answer's body, still on the upstream connection.
    Upstream(Box<super::upstream::body::UpstreamBody>),
    /// A 101 from the upstream: after the head, bytes go both ways until either side closes.
    Tunnel(Box<super::upstream::body::UpstreamBody>),
    /// A gRPC call's answer, still on the upstream's HTTP/2 stream: its DATA frames, then
    /// its trailers.
    Grpc(Box<super::grpc::body::GrpcBody>),
    /// A [`Body::File`] whose length is not told: a cached answer its upstream sent chunked or
    /// to its close (nginx stores the head as it came, and has no length on the HIT either).
    /// Chunked to an HTTP/1.1 client, to the close to an HTTP/1.0 one; no ranges.
    Unsized(Box<Body>),
    /// A length told and no bytes: a cached answer to a HEAD (`proxy_cache_convert_head off`),
    /// stored with the GET's `Content-Length` and no body, which nginx sends so to a GET too;
    /// a cached 204 or 304 whose upstream told a length.
    Absent(u64),
    /// The first part of a body whose next parts are subrequests' that a body filter puts in
    /// place (`slice`'s next slices, see `http/subrequest_body.rs`), with the whole's length.
    Parts(Box<Body>, u64),
}

impl Body {
    /// The body's length, for `Content-Length` (`None`: no body at all).
    pub fn length(&self) -> Option<u64> {
        match self {
            Body::Empty => None,
            Body::Bytes(b) => Some(b.len() as u64),
            Body::Chain(b, rest) => Some(b.len() as u64 + rest.length().unwrap_or(0)),
            Body::File { len, .. } => Some(*len),
            Body::Multipart { parts, .. } => Some(parts.total_len()),
            Body::Upstream(u) => u.length,
            Body::Tunnel(_) | Body::Unsized(_) | Body::Grpc(_) => None,
            Body::Absent(n) => Some(*n),
            Body::Parts(_, n) => Some(*n),
        }
    }
}

thread_local! {
    /// Boxes of sent replies, emptied, kept by the worker for its next answers: a few, as it
    /// takes them back one per answer sent.
    static SPARE_REPLIES: crate::spare::Spares<Box<Reply>> =
        const { crate::spare::Spares::new(8) };
}

/// Where nginx writes `Location` in an HTTP/1 head: in a place of its own after
/// `Last-Modified` when its header filter made the value absolute (a path it redirects to,
/// with `absolute_redirect on`); otherwise it is one of the headers' list, where it was
/// added.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum LocationAt {
    #[default]
    Fixed,
    /// First of the list (nginx's own redirects to a URL, or to a path left relative).
    First,
    /// Before `extra[n]` (an upstream's, among its other headers).
    Extra(usize),
}

/// A response to send.
pub struct Reply {
    pub status: u16,
    pub content_type: Option<String>,
    pub location: Option<String>,
    /// Where HTTP/1 writes `location` (HTTP/2 has one place for it).
    pub location_at: LocationAt,
    pub last_modified: Option<[u8; DATE_LEN]>,
    /// `Some(n)`: HTTP/1 writes `Last-Modified` before `extra[n]`, among a cached upstream
    /// answer's headers where it came (nginx's fixed place is for a date it set itself).
    pub last_modified_listed: Option<usize>,
    /// The file's modification time (for `expires modified`).
    pub mtime: Option<i64>,
    /// Headers the handler sets, in nginx's order (ETag, `expires`' Expires and
    /// Cache-Control, ...).
    pub headers: Vec<(&'static str, Cow<'static, str>)>,
    /// Headers from `add_header`, an upstream's passed on, and nginx's own (`Vary`); then
    /// those of the filters nginx runs after its headers filter (userid's `Set-Cookie`, the
    /// range filter's `Accept-Ranges` and `Content-Range`), written after `add_header`'s.
    pub extra: Vec<(Cow<'static, str>, Cow<'static, str>)>,
    /// Headers whose value is not UTF-8 (an upstream's Latin-1 file name in
    /// `Content-Disposition`, `$binary_remote_addr` in `add_header`): sent byte for byte, as
    /// nginx does, before `extra[n]` (where they were added among the others).
    pub raw_extra: Vec<(usize, String, Vec<u8>)>,
    /// One of nginx's own error pages (after it, nginx closes for 400, 413, 414, 494–497, 500
    /// and 501; a `return 500 "text"` keeps the connection).
    pub special: bool,
    /// A `return` redirect: nginx's page, but the body was discarded first
    /// (`ngx_http_send_response`), which answers a client's `Expect: 100-continue`.
    pub continue_first: bool,
    /// Close after this answer: an error nginx generated turned keep-alive off before an
    /// `error_page` replaced its content.
    pub close_after: bool,
    /// `directio`: read this file with O_DIRECT (its path, the alignment), never sendfile.
    pub direct: Option<(std::path::PathBuf, usize)>,
    pub body: Body,
    /// nginx's `r->allow_ranges`: a static file, whose 200 the range filter may turn into a 206.
    pub allow_ranges: bool,
    /// The status line's text after the code, as an upstream sent it.
    pub reason: Option<String>,
    /// An upstream's answer: the not-modified filter leaves it alone (nginx's
    /// `disable_not_modified` without a cache).
    pub proxied: bool,
    /// The status line is an upstream's, as it came or from the cache (nginx's
    /// `headers_out.status_line`): a 204 keeps the upstream's Content-Type and Content-Length.
    pub upstream_status: bool,
    /// Nothing is sent: the connection closes and the request is only logged, with this
    /// status (nginx terminating a request: a client gone while sending its body, say).
    pub terminate: bool,
    /// The body filters the header filters chose (gzip compresses, charset recodes), in the
    /// order the body goes through them.
    pub filters: Vec<Box<dyn super::output::BodyFilter>>,
    /// An upstream's `X-Accel-Charset`: the charset the charset filter sends, whatever the
    /// location says.
    pub override_charset: Option<String>,
    /// The `charset` parameter of `content_type` is the body's charset, as an upstream's is
    /// (autoindex's XML): the charset filter reads it and keeps it.
    pub charset_param: bool,
    /// The upstream's own `Server` and `Date` lines are passed (among `extra`): they stand
    /// for shoal's, as nginx's upstream module puts them in place of its own.
    pub upstream_server: bool,
    pub upstream_date: bool,
    /// A recycled reply's last content type, emptied: [`Reply::set_content_type`] writes the
    /// next one there (a static answer's type costs no allocation).
    spare_type: String,
}

impl Reply {
    /// Whether nginx would turn keep-alive off after this answer.
    pub fn ends_keepalive(&self) -> bool {
        self.close_after
            || (self.special && matches!(self.status, 400 | 413 | 414 | 494..=497 | 500 | 501))
    }

    /// Redirects to a local path (`Location`), as nginx's header filter completes it: with
    /// the scheme and host of the request (`absolute_redirect on`), or as it is.
    pub fn redirect_to_path(
        &mut self,
        lc: &super::LocConf,
        path: &str,
        host: Option<&str>,
        info: &super::transport::ConnInfo,
        srv: &super::ServerConf,
    ) {
        self.location = Some(super::static_files::absolute_location(
            lc, path, host, info, srv,
        ));
        self.location_at = if lc.absolute_redirect() {
            LocationAt::Fixed
        } else {
            LocationAt::First
        };
    }

    /// Removes `extra[i]`, keeping a listed `Location` where it was among the others.
    pub fn remove_extra(&mut self, i: usize) {
        self.extra.remove(i);
        let at = match &mut self.location_at {
            LocationAt::Extra(n) => Some(n),
            _ => None,
        };
        let raw = self.raw_extra.iter_mut().map(|(n, _, _)| n);
        for n in at
            .into_iter()
            .chain(self.last_modified_listed.as_mut())
            .chain(raw)
        {
            if i < *n {
                *n -= 1;
            }
        }
    }

    /// Redirects to `url` as it is (an absolute URL, or a text `return` names).
    pub fn redirect_to_url(&mut self, url: String) {
        self.location = Some(url);
        self.location_at = LocationAt::First;
    }

    /// A reply with `status` and nothing else.
    pub fn new(status: u16) -> Reply {
        Reply {
            status,
            content_type: None,
            location: None,
            location_at: LocationAt::Fixed,
            last_modified: None,
            last_modified_listed: None,
            mtime: None,
            headers: Vec::new(),
            extra: Vec::new(),
            raw_extra: Vec::new(),
            special: false,
            continue_first: false,
            close_after: false,
            direct: None,
            body: Body::Empty,
            allow_ranges: false,
            reason: None,
            proxied: false,
            upstream_status: false,
            terminate: false,
            filters: Vec::new(),
            override_charset: None,
            charset_param: false,
            upstream_server: false,
            upstream_date: false,
            spare_type: String::new(),
        }
    }

    /// Sets `content_type` to `t`, in the string a recycled reply kept.
    pub fn set_content_type(&mut self, t: &str) {
        let mut s = std::mem::take(&mut self.spare_type);
        s.clear();
        s.push_str(t);
        self.content_type = Some(s);
    }

    /// A new reply in its box: an emptied one the worker kept, or a new one. (A `Reply` is a
    /// few hundred bytes: a new one is made on the stack and moved into its allocation.)
    pub fn boxed(status: u16) -> Box<Reply> {
        match SPARE_REPLIES.with(crate::spare::Spares::take) {
            Some(mut reply) => {
                reply.status = status;
                reply
            }
            None => Box::new(Reply::new(status)),
        }
    }

    /// Gives a sent reply's box back to its worker, emptied, for [`Reply::boxed`]; its lists
    /// keep their room unless it grew past what usual answers take.
    pub fn recycle(reply: Box<Reply>) {
        SPARE_REPLIES.with(|s| s.give(reply, |r| r.clear()));
    }

    fn clear(&mut self) {
        fn empty<T>(v: &mut Vec<T>) {
            if v.capacity() > 16 {
                *v = Vec::new();
            } else {
                v.clear();
            }
        }
        // Every field by name: a field added later must be emptied here too.
        let Reply {
            status: _,
            content_type,
            location,
            location_at,
            last_modified,
            last_modified_listed,
            mtime,
            headers,
            extra,
            raw_extra,
            special,
            continue_first,
            close_after,
            direct,
            body,
            allow_ranges,
            reason,
            proxied,
            upstream_status,
            terminate,
            filters,
            override_charset,
            charset_param,
            upstream_server,
            upstream_date,
            spare_type,
        } = self;
        // (Its string kept for the next one's type, unless it grew past usual types.)
        if let Some(t) = content_type.take().filter(|t| t.capacity() <= 64) {
            *spare_type = t;
        }
        *location = None;
        *location_at = LocationAt::Fixed;
        *last_modified = None;
        *last_modified_listed = None;
        *mtime = None;
        empty(headers);
        empty(extra);
        empty(raw_extra);
        *special = false;
        *continue_first = false;
        *close_after = false;
        *direct = None;
        *body = Body::Empty;
        *allow_ranges = false;
        *reason = None;
        *proxied = false;
        *upstream_status = false;
        *terminate = false;
        filters.clear();
        *override_charset = None;
        *charset_param = false;
        *upstream_server = false;
        *upstream_date = false;
    }

    /// nginx's `headers_out.etag`: the handler's `ETag`, or an upstream answer's, fresh or
    /// cached (among the headers it passed, before any `add_header` adds).
    pub fn etag(&self) -> Option<&str> {
        let own = self.headers.iter().find(|(n, _)| *n == "ETag");
        match own {
            Some((_, v)) => Some(v),
            None => self
                .extra
                .iter()
                .find(|(n, _)| n.eq_ignore_ascii_case("etag"))
                .map(|(_, v)| &**v),
        }
    }

    /// The value of header `name` (any case) among those the handler and the filters set,
    /// then the others (`add_header`'s, an upstream's).
    pub fn header(&self, name: &str) -> Option<&str> {
        let set = self.headers.iter().map(|(n, v)| (*n, &**v));
        let passed = self.extra.iter().map(|(n, v)| (&**n, &**v));
        set.chain(passed)
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v)
    }

    /// The response headers beyond the fixed ones, lowercase, for `$sent_http_*`.
    pub fn header_list(&self) -> Vec<(String, String)> {
        let mut out = Vec::with_capacity(self.headers.len() + self.extra.len() + 3);
        // An empty type is no header (nginx writes Content-Type only with a value).
        if let Some(t) = self.content_type.as_ref().filter(|t| !t.is_empty()) {
            out.push(("content-type".into(), t.clone()));
        }
        if let Some(n) = self.body.length() {
            out.push(("content-length".into(), n.to_string()));
        }
        if let Some(l) = &self.location {
            out.push(("location".into(), l.clone()));
        }
        if let Some(lm) = &self.last_modified {
            out.push(("last-modified".into(), shoal_http::lossy(lm).into_owned()));
        }
        for (n, v) in &self.headers {
            out.push((n.to_ascii_lowercase(), v.to_string()));
        }
        for (n, v) in &self.extra {
            out.push((n.to_ascii_lowercase(), v.to_string()));
        }
        for (_, n, v) in &self.raw_extra {
            out.push((n.to_ascii_lowercase(), shoal_http::lossy(v).into_owned()));
        }
        out
    }
}

/// What a phase, a handler or a module came to: the one word for it across the request's
/// way (the rewrite module's codes, the content handlers, the proxy, the cache's lookup).
pub enum Outcome {
    /// Nothing decided: the next directive, phase or handler goes on.
    Continue,
    /// Search the location again with the URI the rewrites made (`rewrite ... last`).
    Again,
    /// An answer; `error_page` may take over its status. Boxed: an answer is moved through
    /// several phases and awaits, 8 bytes at a time.
    Reply(Box<Reply>),
    /// An answer sent as it is (an upstream's, a cached one, `return` with a text):
    /// `error_page` does not apply.
    Final(Box<Reply>),
    /// nginx's own page for this status; `error_page` may take over.
    Error(u16),
    /// An internal redirect to this URI (index files, `try_files`' fallback).
    Internal(String),
    /// An internal redirect to a named location.
    Named(String),
    /// The listing of this directory (`autoindex`): the index module found no index file.
    Autoindex(std::path::PathBuf),
}

/// nginx's error answer for `code`: its HTML page (or an empty body where nginx sends none).
pub fn error_reply(code: u16, lc: &LocConf) -> Reply {
    let tokens = match lc.server_tokens() {
        ServerTokens::On => shoal_http::ServerTokens::On,
        ServerTokens::Off => shoal_http::ServerTokens::Off,
        ServerTokens::Build => shoal_http::ServerTokens::Build,
    };
    let mut r = Reply::new(code);
    r.special = true;
    match shoal_http::error_page(code, tokens) {
        Some(page) => {
            r.content_type = Some("text/html".into());
            r.body = Body::Bytes(page.to_vec());
        }
        // A code nginx has no page for (`return 418`): `Content-Length: 0`.
        None => r.body = Body::Bytes(Vec::new()),
    }
    r
}
