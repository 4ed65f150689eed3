//! The protocols whose request is a list of params (nginx's `*_param`): FastCGI, uwsgi and
//! SCGI. What they share is here once: the address `*_pass` names and where a request goes,
//! the params evaluated (`*_param`, the client's headers as `HTTP_*`,
//! `*_pass_request_headers|body`), the headers an answer hides, the exchange. A module gives
//! its settings and how it writes the params ([`CgiConf`]); memcached takes the address and
//! the refusal's log line.

use std::cell::RefCell;
use std::rc::Rc;
use std::sync::Arc;

use bytes::BytesMut;
use shoal_conf::{Directive, Error};

use super::params::{self, Param};
use super::protocol::{level, BodyFraming, Dest, Encoded, HeadDecoder, Protocol};
use super::record::Record;
use super::run::{Answer, Cached};
use super::target::{self, Target};
use super::{Proto, UpstreamLoc};
use crate::conf::err;
use crate::http::client_body::{BodyToSend, ClientBody};
use crate::http::reply::{Outcome, Reply};
use crate::http::request::Req;
use crate::http::rewrite;
use crate::http::LocConf;
use crate::log::Level;
use crate::variables::Vars;

/// `fastcgi_pass`, `uwsgi_pass`, `scgi_pass`, `memcached_pass`: an address.
#[derive(Debug)]
pub struct Pass {
    pub target: Target,
    /// Where the directive is, for errors found when upstreams are linked.
    pub span: shoal_conf::Span,
    /// The upstream speaks TLS (`suwsgi://`).
    pub tls: bool,
}

impl Pass {
    /// The directive's address, without the scheme `scheme` allows (`uwsgi://`); `tls_scheme`
    /// (`suwsgi://`) says the upstream speaks TLS.
    pub fn parse(
        d: &Directive,
        scheme: Option<&str>,
        tls_scheme: Option<&str>,
    ) -> Result<Pass, Error> {
        let mut text = d.args[0].value.as_str();
        let mut tls = false;
        if let Some(rest) = tls_scheme.and_then(|s| text.strip_prefix(s)) {
            text = rest;
            tls = true;
        } else if let Some(rest) = scheme.and_then(|s| text.strip_prefix(s)) {
            text = rest;
        }
        let (target, _) = Target::parse(text).map_err(|m| err(d, m))?;
        Ok(Pass {
            target,
            span: d.span.clone(),
            tls,
        })
    }
}

/// What a params protocol module gives: its settings in a location, and how its request's
/// head is written.
pub trait CgiConf: Sized + 'static {
    const PROTO: Proto;
    /// The protocol's name in log lines (`upstream: "fastcgi://127.0.0.1:9000"`).
    const SCHEME: &'static str;
    /// The answer's headers passed only when `*_pass_header` names them.
    const HIDDEN: &'static [&'static str];
    /// A chunked request body streams (the protocol frames it); otherwise it is read whole
    /// first, as the head tells the body's length.
    const STREAMS_CHUNKED: bool;
    /// How the client's body follows the head.
    const FRAMING: BodyFraming;
    type Head: HeadDecoder;

    /// The module's settings in `lc`.
    fn of(lc: &LocConf) -> &Self;
    fn up(&self) -> &UpstreamLoc;
    fn pass(&self) -> Option<&Pass>;
    fn params(&self) -> Option<&[Param]>;
    /// Writes the request's head from its params (`body_len`: the body sent, 0 without one);
    /// an error is nginx's log line, with its level.
    fn write_head(
        &self,
        pairs: &[(Vec<u8>, Vec<u8>)],
        body_len: u64,
        out: &mut BytesMut,
    ) -> Result<(), (shoal_http::log::Level, String)>;
    /// A decoder for one try's answer (`head`: the request is a HEAD).
    fn head_decoder(&self, head: bool) -> Self::Head;

    /// The TLS settings of an upstream that speaks TLS (`suwsgi://`).
    fn tls(&self) -> Option<&crate::http::proxy::ssl::UpstreamTls> {
        None
    }
}

/// [`CgiConf`]'s accessors for a module whose settings are `lc.$field`, with fields `up`,
/// `pass` and `params`.
macro_rules! cgi_fields {
    ($field:ident) => {
        fn of(lc: &$crate::http::LocConf) -> &Self {
            &lc.$field
        }

        fn up(&self) -> &$crate::http::upstream::UpstreamLoc {
            &self.up
        }

        fn pass(&self) -> Option<&$crate::http::upstream::cgi_like::Pass> {
            self.pass.as_deref()
        }

        fn params(&self) -> Option<&[$crate::http::upstream::params::Param]> {
            self.params.as_deref().map(Vec::as_slice)
        }
    };
}
pub(crate) use cgi_fields;

/// Runs the exchange for a request in a location whose content handler is `C`'s `*_pass`.
pub async fn handle<C: CgiConf>(
    r: &Req<'_, '_>,
    lc: &LocConf,
    rw: &rewrite::State,
    method: &str,
    client_body: &ClientBody<'_>,
    cached: Cached<'_>,
) -> (Outcome, Option<Rc<RefCell<Record>>>) {
    let p = Cgi {
        lc,
        conf: C::of(lc),
        cacheable: cached.cacheable,
    };
    let chunked = C::STREAMS_CHUNKED;
    super::run::handle(
        r,
        lc,
        rw,
        p,
        method,
        client_body,
        chunked,
        cached.validators,
    )
    .await
}

/// One request's exchange in a params protocol's location.
struct Cgi<'a, C> {
    lc: &'a LocConf,
    conf: &'a C,
    cacheable: bool,
}

impl<C: CgiConf> Protocol for Cgi<'_, C> {
    type Head = C::Head;
    const PROTO: Proto = C::PROTO;

    async fn dest(&self, r: &Req<'_, '_>, vars: &Vars<'_>) -> Result<Dest, Outcome> {
        pass_dest(self.conf.pass(), C::SCHEME, r, vars)
    }

    fn tls(&self) -> Option<&crate::http::proxy::ssl::UpstreamTls> {
        self.conf.tls()
    }

    fn encode(
        &self,
        r: &Req<'_, '_>,
        vars: &Vars<'_>,
        _dest: &Dest,
        _method: &str,
        body: &BodyToSend<'_, '_>,
    ) -> Result<Encoded, Outcome> {
        let up = self.conf.up();
        let pairs = params::eval(
            self.conf.params(),
            r,
            vars,
            up.pass_request_headers(),
            read_length(r, body),
            self.cacheable,
        );
        let send_body = up.pass_request_body();
        let body_len = if send_body {
            body.len().unwrap_or(0)
        } else {
            0
        };
        let mut head = BytesMut::new();
        if let Err((l, e)) = self.conf.write_head(&pairs, body_len, &mut head) {
            refused(r, l, &e);
            return Err(Outcome::Error(500));
        }
        Ok(Encoded {
            head: head.to_vec(),
            set_body: None,
            send_body,
            framing: C::FRAMING,
        })
    }

    fn head_decoder(&self, _r: &Req<'_, '_>, method: &str) -> C::Head {
        self.conf.head_decoder(method == "HEAD")
    }

    fn reply(&self, answer: Answer, r: &Req<'_, '_>, record: &Rc<RefCell<Record>>) -> Box<Reply> {
        super::answer::reply_of(
            answer,
            self.lc,
            self.conf.up(),
            |name, _| hidden(C::HIDDEN, name),
            None,
            r,
            record,
        )
    }
}

/// Logs a request the protocol cannot write (nginx's line, the request's context).
pub fn refused(r: &Req<'_, '_>, l: shoal_http::log::Level, e: &dyn std::fmt::Display) {
    crate::conn_log!(level(l), r.info.number, "{e}{}", r.log_ctx());
}

/// Where a `*_pass` address sends a request (none: the location has no `*_pass`, a 500).
pub fn pass_dest(
    pass: Option<&Pass>,
    scheme: &'static str,
    r: &Req<'_, '_>,
    vars: &Vars<'_>,
) -> Result<Dest, Outcome> {
    let Some(pass) = pass else {
        return Err(Outcome::Error(500));
    };
    let mut dest = dest_of(&pass.target, scheme, r, vars)?;
    dest.tls = pass.tls;
    Ok(dest)
}

/// Where a `*_pass` address (`host:port`, `unix:/path`, an upstream, variables) sends a
/// request; `scheme` names the protocol in log lines.
pub fn dest_of(
    target: &Target,
    scheme: &'static str,
    r: &Req<'_, '_>,
    vars: &Vars<'_>,
) -> Result<Dest, Outcome> {
    let (upstream, host, port) = match target {
        Target::Dynamic {
            template,
            upstreams,
        } => {
            let text = vars.eval(template);
            match target::resolve(&text, 0, upstreams.get().map_or(&[][..], Vec::as_slice)) {
                Ok(found) => (found.upstream, found.host, found.port),
                Err((status, message)) => {
                    crate::conn_log!(Level::Error, r.info.number, "{message}{}", r.log_ctx());
                    return Err(Outcome::Error(status));
                }
            }
        }
        _ => {
            let Some(u) = target.upstream() else {
                return Err(Outcome::Error(500));
            };
            (u.clone(), u.name.clone(), 0)
        }
    };
    Ok(Dest {
        upstream,
        uri: Vec::new(),
        host: Arc::from(host),
        port,
        scheme,
        tls: false,
    })
}

/// The length of a body read whole without a `Content-Length` (a chunked one).
pub fn read_length(r: &Req<'_, '_>, body: &BodyToSend<'_, '_>) -> Option<u64> {
    match body {
        BodyToSend::Whole(_) if r.req.header("content-length").is_none() => body.len(),
        _ => None,
    }
}

/// Whether `name` is in a protocol's list of hidden headers.
pub fn hidden(list: &[&str], name: &[u8]) -> bool {
    list.iter().any(|h| h.as_bytes().eq_ignore_ascii_case(name))
}
