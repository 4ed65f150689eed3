//! The proxy as one protocol of the upstream layer: where `proxy_pass` sends a request, the
//! HTTP/1 request written for it ([`super::request`]), its answer's head read back
//! ([`super::parse`]) and passed on through `proxy_redirect` and `proxy_cookie_*`.

use std::cell::RefCell;
use std::rc::Rc;
use std::sync::Arc;

use shoal_http::upstream::UpstreamRequest;

use super::parse::HttpHead;
use super::request::{self, UriParts};
use super::{HttpVersion, ProxyPass, Target, UpstreamHeader};
use crate::http::client_body::{BodyToSend, ClientBody};
use crate::http::reply::{Outcome, Reply};
use crate::http::request::Req;
use crate::http::rewrite;
use crate::http::upstream::protocol::{BodyFraming, Dest, Encoded, Protocol};
use crate::http::upstream::record::Record;
use crate::http::upstream::run::Answer;
use crate::http::upstream::Proto;
use crate::http::LocConf;
use crate::log::Level;
use crate::upstream::conf::{split_host_port, UpstreamConf};
use crate::variables::Vars;

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

/// Runs the exchange for a request in a `proxy_pass` location. Returns what it came to and
/// the record of the exchange (for `$upstream_*`), if it got as far as choosing an upstream.
#[allow(clippy::manual_async_fn)]
pub fn handle<'a, 'r, 's, 'b>(
    r: &'a Req<'r, 's>,
    lc: &'a LocConf,
    pass: &'a ProxyPass,
    st: UriState<'a>,
    method: &'a str,
    client_body: &'a ClientBody<'b>,
) -> impl std::future::Future<Output = (Outcome, Option<Rc<RefCell<Record>>>)> + use<'a, 'r, 's, 'b>
{
    // (Not an `async fn`: the upstream layer's future is the request's, with no state
    // machine of this function's around it, polled at every wake-up.)
    let http = Http {
        lc,
        pass,
        internal: st.internal,
        rw: st.rw,
        cacheable: st.cacheable,
    };
    // A chunked body is streamed only to an HTTP/1.1 upstream, as nginx.
    let chunked = lc.proxy.http_version() == HttpVersion::V11;
    crate::http::upstream::run::handle(
        r,
        lc,
        st.rw,
        http,
        method,
        client_body,
        chunked,
        st.validators,
    )
}

/// One request's `proxy_pass`.
struct Http<'a> {
    lc: &'a LocConf,
    pass: &'a ProxyPass,
    rw: &'a rewrite::State,
    internal: bool,
    cacheable: bool,
}

impl Http<'_> {
    fn parts<'r>(&'r self, r: &'r Req<'_, '_>) -> UriParts<'r> {
        // nginx escapes `$uri` when the client's path had a `%` (`quoted_uri`; a `+` does
        // not count) or the request is internal.
        let escape = self.internal || {
            let target = r.req.uri();
            let path = target.split(|&c| c == b'?').next().unwrap_or_default();
            path.contains(&b'%')
        };
        UriParts::new(r.req, self.rw, self.internal, escape)
    }
}

impl Protocol for Http<'_> {
    type Head = HttpHead;
    const PROTO: Proto = Proto::Http;

    async fn dest(&self, r: &Req<'_, '_>, vars: &Vars<'_>) -> Result<Dest, Outcome> {
        let pass = self.pass;
        let parts = self.parts(r);
        // Where to: the linked upstream, or the URL's variables evaluated now.
        match &pass.target {
            Target::Dynamic {
                template,
                upstreams,
            } => {
                let url = vars.eval(template);
                let known = upstreams.get().map_or(&[][..], Vec::as_slice);
                match dynamic_target(&url, known, &self.lc.resolver).await {
                    Ok((upstream, uri_part, host, port, https)) => {
                        let uri = match uri_part {
                            Some(u) => u.into_bytes(),
                            None => request::upstream_uri(&parts, None, ""),
                        };
                        Ok(Dest {
                            upstream,
                            uri,
                            host: Arc::from(host),
                            port,
                            scheme: if https { "https" } else { "http" },
                            tls: https,
                        })
                    }
                    Err((status, message)) => {
                        crate::conn_log!(Level::Error, r.info.number, "{message}{}", r.log_ctx());
                        Err(Outcome::Error(status))
                    }
                }
            }
            _ => {
                let Some(u) = pass.upstream() else {
                    return Err(Outcome::Error(500));
                };
                let uri = request::upstream_uri(&parts, pass.uri.as_deref(), &pass.location);
                Ok(Dest {
                    upstream: u.clone(),
                    uri,
                    host: pass.host.clone(),
                    port: pass.port,
                    scheme: if pass.https { "https" } else { "http" },
                    tls: pass.https,
                })
            }
        }
    }

    fn encode(
        &self,
        r: &Req<'_, '_>,
        vars: &Vars<'_>,
        dest: &Dest,
        method: &str,
        body: &BodyToSend<'_, '_>,
    ) -> Result<Encoded, Outcome> {
        let conf = &self.lc.proxy;
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
        let chunked = set_body.is_none()
            && conf.pass_request_body()
            && matches!(body, BodyToSend::Streaming(..))
            && body_len.is_none();
        // `proxy_method`, unless the cache turned a HEAD into a GET (nginx's `u->method`
        // comes first).
        let custom;
        let sent_method = match &conf.method {
            Some(t) if !(method == "GET" && r.req.method() == "HEAD") => {
                custom = vars.eval(t);
                custom.as_str()
            }
            _ => method,
        };
        let mut head = Vec::with_capacity(512);
        let req = request::Head {
            method: sent_method,
            uri: &dest.uri,
            body_len,
            chunked,
            cacheable: self.cacheable,
        };
        request::write_head(&mut head, &req, conf, vars);
        Ok(Encoded {
            head,
            send_body: set_body.is_none() && conf.pass_request_body(),
            set_body,
            framing: if chunked {
                BodyFraming::Chunked
            } else {
                BodyFraming::Raw
            },
        })
    }

    fn head_decoder(&self, r: &Req<'_, '_>, method: &str) -> HttpHead {
        HttpHead::new(UpstreamRequest {
            head: method == "HEAD",
            upgrade: r.req.header("upgrade").is_some(),
        })
    }

    fn reply(&self, answer: Answer, r: &Req<'_, '_>, record: &Rc<RefCell<Record>>) -> Box<Reply> {
        let (lc, pass) = (self.lc, self.pass);
        crate::http::upstream::answer::reply_of(
            answer,
            lc,
            &lc.proxy.up,
            |_, known: UpstreamHeader| known.hidden(),
            Some(&super::redirect::Rewriter {
                pass,
                r,
                lc,
                record,
            }),
            r,
            record,
        )
    }

    fn tls(&self) -> Option<&super::ssl::UpstreamTls> {
        self.lc.proxy.ssl.built.get().map(|t| &**t)
    }
}

/// A URL with variables, evaluated: an upstream block by the host's name, an address, or a
/// name the location's `resolver` looks up.
#[allow(clippy::type_complexity)]
pub async fn dynamic_target(
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
    if let Some(path) = rest.strip_prefix("unix:") {
        let (sock, uri) = match path.split_once(':') {
            Some((p, u)) => (p, Some(u.to_string()).filter(|u| !u.is_empty())),
            None => (path, None),
        };
        let mut u = UpstreamConf::unix(sock);
        u.ephemeral = true;
        // nginx's `$proxy_host` for a unix socket.
        return Ok((Arc::new(u), uri, "localhost".to_string(), 80, https));
    }
    let (authority, uri) = match rest.find('/') {
        Some(i) => (&rest[..i], Some(rest[i..].to_string())),
        None => (rest, None),
    };
    let (name, port) = split_host_port(authority, default_port).map_err(|m| (500, m.into()))?;
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
    let mut u = UpstreamConf::implicit(&name, port).map_err(|m| (502, m.into()))?;
    u.ephemeral = true;
    Ok((Arc::new(u), uri, authority.to_string(), port, https))
}
