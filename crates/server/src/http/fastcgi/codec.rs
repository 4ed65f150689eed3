//! FastCGI as one protocol of the upstream layer: the request's records (`BEGIN_REQUEST`, the
//! params, the body in `STDIN` records) and the answer's (the head from `STDOUT`, `STDERR`
//! logged as nginx logs it and matched against `fastcgi_catch_stderr`, the end at
//! `END_REQUEST`), through the codec in `shoal_http::fastcgi`.

use std::cell::RefCell;
use std::rc::Rc;
use std::sync::Arc;

use bytes::BytesMut;
use shoal_http::fastcgi::{self, Event};

use super::FastcgiLoc;
use crate::http::client_body::{BodyToSend, ClientBody};
use crate::http::reply::{Outcome, Reply};
use crate::http::request::Req;
use crate::http::rewrite;
use crate::http::upstream::body::{BodyError, Framing, Piece};
use crate::http::upstream::protocol::{
    level, BodyCodec, BodyFraming, Dest, Encoded, HeadDecoder, HeadError, Log, Parsed, Protocol,
};
use crate::http::upstream::record::Record;
use crate::http::upstream::run::Answer;
use crate::http::upstream::target::{self, Target};
use crate::http::upstream::Proto;
use crate::http::LocConf;
use crate::log::Level;
use crate::variables::Vars;

/// Runs the exchange for a request in a `fastcgi_pass` location.
pub async fn handle(
    r: &Req<'_, '_>,
    lc: &LocConf,
    rw: &rewrite::State,
    method: &str,
    client_body: &ClientBody<'_>,
    cached: crate::http::upstream::run::Cached<'_>,
) -> (Outcome, Option<Rc<RefCell<Record>>>) {
    let f = Fastcgi {
        lc,
        conf: &lc.fastcgi,
        cacheable: cached.cacheable,
    };
    // FastCGI frames any body in records: a chunked one streams as well as any.
    crate::http::upstream::run::handle(r, lc, rw, &f, method, client_body, true, cached.validators)
        .await
}

/// One request's `fastcgi_pass`.
struct Fastcgi<'a> {
    lc: &'a LocConf,
    conf: &'a FastcgiLoc,
    cacheable: bool,
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

impl Protocol for Fastcgi<'_> {
    type Head = FastcgiHead;
    const PROTO: Proto = Proto::Fastcgi;

    async fn dest(&self, r: &Req<'_, '_>, vars: &Vars<'_>) -> Result<Dest, Outcome> {
        let Some(pass) = &self.conf.pass else {
            return Err(Outcome::Error(500));
        };
        dest_of(&pass.target, "fastcgi", r, vars)
    }

    fn encode(
        &self,
        r: &Req<'_, '_>,
        vars: &Vars<'_>,
        _dest: &Dest,
        _method: &str,
        body: &BodyToSend<'_, '_>,
    ) -> Result<Encoded, Outcome> {
        let up = &self.conf.up;
        let pairs = crate::http::upstream::params::eval(
            self.conf.params.as_deref().map(Vec::as_slice),
            r,
            vars,
            up.pass_request_headers(),
            read_length(r, body),
            self.cacheable,
        );
        // nginx puts every param in one record, and refuses more than it holds.
        let len = fastcgi::encode::params_len(pairs.iter().map(|(n, v)| (&n[..], &v[..])));
        if let Err(e) = fastcgi::encode::check_params_len(len) {
            crate::conn_log!(level(e.level()), r.info.number, "{e}{}", r.log_ctx());
            return Err(Outcome::Error(500));
        }
        let mut head = BytesMut::with_capacity(len + 64);
        fastcgi::encode::begin_request(&mut head, self.conf.keep_conn());
        fastcgi::encode::params(&mut head, pairs.iter().map(|(n, v)| (&n[..], &v[..])));
        Ok(Encoded {
            head: head.to_vec(),
            set_body: None,
            send_body: up.pass_request_body(),
            framing: BodyFraming::FastcgiStdin,
        })
    }

    fn head_decoder(&self, _r: &Req<'_, '_>, method: &str) -> FastcgiHead {
        let keep_conn = self.conf.keep_conn();
        FastcgiHead {
            decoder: Some(fastcgi::Decoder::new(
                self.conf.up.buffer_size(),
                keep_conn,
                method == "HEAD",
            )),
            catch: self.conf.catch_stderr.clone(),
            keep_conn,
        }
    }

    fn reply(&self, answer: Answer, r: &Req<'_, '_>, record: &Rc<RefCell<Record>>) -> Box<Reply> {
        crate::http::upstream::answer::reply_of(
            answer,
            self.lc,
            &self.conf.up,
            |name, _| {
                fastcgi::HIDDEN_HEADERS
                    .iter()
                    .any(|h| h.as_bytes().eq_ignore_ascii_case(name))
            },
            None,
            r,
            record,
        )
    }
}

/// The length of a body read whole without a `Content-Length` (a chunked one).
pub fn read_length(r: &Req<'_, '_>, body: &BodyToSend<'_, '_>) -> Option<u64> {
    match body {
        BodyToSend::Whole(_) if r.req.header("content-length").is_none() => body.len(),
        _ => None,
    }
}

/// A FastCGI answer's head: the records up to the end of the head, stderr logged on the way.
pub struct FastcgiHead {
    decoder: Option<fastcgi::Decoder>,
    catch: Option<Arc<Vec<String>>>,
    keep_conn: bool,
}

impl HeadDecoder for FastcgiHead {
    fn bounded(&self) -> bool {
        true
    }

    fn decode(
        &mut self,
        buf: &mut BytesMut,
        _max: usize,
        log: Log<'_>,
    ) -> Result<Option<Parsed>, HeadError> {
        let Some(decoder) = self.decoder.as_mut() else {
            return Err(HeadError::Invalid("upstream sent no head".into()));
        };
        loop {
            match decoder.decode(buf) {
                Ok(None) => return Ok(None),
                Ok(Some(Event::Stderr(e))) => {
                    log(level(e.level()), &e);
                    // `fastcgi_catch_stderr`: the answer is an invalid one.
                    if let Some(list) = &self.catch {
                        let text = e.bytes();
                        if list
                            .iter()
                            .any(|c| memchr::memmem::find(text, c.as_bytes()).is_some())
                        {
                            return Err(HeadError::Caught);
                        }
                    }
                }
                Ok(Some(Event::Head(head))) => {
                    let status = head.status();
                    let reason = Parsed::reason_of(status, head.reason());
                    let decoder = self.decoder.take().expect("decoding");
                    return Ok(Some(Parsed {
                        status,
                        reason,
                        framing: Framing::Codec,
                        codec: Some(Box::new(FastcgiBody {
                            decoder,
                            keep_conn: self.keep_conn,
                            length: head.content_length(),
                            taken: 0,
                        })),
                        content_length: head.content_length(),
                        reusable: self.keep_conn,
                        upgrade: false,
                        consumed: head.head_len(),
                        head,
                        intercept: false,
                    }));
                }
                // Nothing else comes before the head.
                Ok(Some(_)) => {}
                Err(e) => return Err(HeadError::Invalid(e.to_string())),
            }
        }
    }
}

/// A FastCGI answer's body: stdout up to `END_REQUEST`.
struct FastcgiBody {
    decoder: fastcgi::Decoder,
    keep_conn: bool,
    /// The head's `Content-Length`, and the body's bytes so far.
    length: Option<u64>,
    taken: u64,
}

impl BodyCodec for FastcgiBody {
    fn take(&mut self, buf: &mut BytesMut, log: Log<'_>) -> Result<Piece, BodyError> {
        loop {
            match self.decoder.decode(buf) {
                Ok(Some(Event::Stdout(b))) => {
                    self.taken += b.len() as u64;
                    return Ok(Piece::Data(b));
                }
                Ok(Some(Event::Stderr(e))) => log(level(e.level()), &e),
                Ok(Some(Event::Surplus(s))) => log(level(s.level()), &s),
                Ok(Some(Event::End(_))) => return Ok(Piece::End),
                Ok(Some(Event::Head(_))) => {}
                Ok(None) if self.decoder.is_done() => return Ok(Piece::End),
                Ok(None) => return Ok(Piece::NeedMore),
                Err(e) => return Err(BodyError::Protocol(e.to_string())),
            }
        }
    }

    fn eof(&mut self) -> Result<(), BodyError> {
        self.decoder
            .eof()
            .map_err(|e| BodyError::Protocol(e.to_string()))?;
        // A close is the end of an answer without keep-conn, but not before its length.
        if self.length.is_some_and(|n| self.taken < n) {
            return Err(BodyError::Closed);
        }
        Ok(())
    }

    fn reusable(&self) -> bool {
        self.keep_conn && self.decoder.is_done()
    }
}
