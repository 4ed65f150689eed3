//! nginx's memcached module: `memcached_pass` answers with the value memcached holds under
//! `$memcached_key` (a `get`), through the upstream layer ([`crate::http::upstream`]): a
//! found value is a 200 with its length, the location's type for the URI, and
//! `Content-Encoding: gzip` when `memcached_gzip_flag` says so; a miss is nginx's 404 (its
//! `info` line logged, `error_page` applies, `memcached_next_upstream not_found` tries the
//! next server). The codec is `shoal_http::memcached`.

use std::cell::RefCell;
use std::rc::Rc;
use std::sync::Arc;

use bytes::BytesMut;
use shoal_conf::{Directive, Error};
use shoal_http::memcached::{self, Answer as Got, MemcachedError};
use shoal_http::BodyChunk;

use crate::conf::{err, set_once, Args, Builder, Command, Ctx, Scope};
use crate::http::client_body::{BodyToSend, ClientBody};
use crate::http::loc_conf;
use crate::http::modules::HttpModule;
use crate::http::reply::{Outcome, Reply};
use crate::http::request::Req;
use crate::http::rewrite;
use crate::http::upstream::body::{BodyError, Framing, Piece};
use crate::http::upstream::cgi_like::{self, Pass};
use crate::http::upstream::conf as up;
use crate::http::upstream::protocol::{
    level, BodyCodec, BodyFraming, Dest, Encoded, HeadDecoder, HeadError, Log, Parsed, Protocol,
};
use crate::http::upstream::record::Record;
use crate::http::upstream::run::Answer;
use crate::http::upstream::{Proto, UpstreamLoc};
use crate::http::LocConf;
use crate::variables::Vars;

crate::conf::conf_slots! {
    /// The memcached module's location-level settings; the shared ones are in `up`.
    #[derive(Clone, Debug, Default)]
    pub struct MemcachedLoc {
        /// `memcached_gzip_flag`: flag bits that mean the value is gzipped.
        gzip_flag: u64 = 0,
    }
    others {
        pub up: UpstreamLoc,
        /// Not inherited by nested locations; `if` blocks take their location's.
        pub pass: Option<Arc<Pass>>,
    }
}

const HSL: Ctx = Ctx::HSL;

/// The module in the list ([`crate::http::modules`]).
pub struct Module;

impl HttpModule for Module {
    type Loc = MemcachedLoc;
    const DIRECTIVES: &'static [Command] = &[
        Command::new(
            "memcached_pass",
            Ctx::LOCATION.or(Ctx::LIF),
            Args::ONE,
            set_pass,
        ),
        Command::new("memcached_gzip_flag", HSL, Args::ONE, set_gzip_flag),
        Command::new("memcached_bind", HSL, Args::Take(1, 2), up::set_bind),
        Command::new("memcached_buffer_size", HSL, Args::ONE, up::set_buffer_size),
        Command::new(
            "memcached_connect_timeout",
            HSL,
            Args::ONE,
            up::set_connect_timeout,
        ),
        Command::new(
            "memcached_send_timeout",
            HSL,
            Args::ONE,
            up::set_send_timeout,
        ),
        Command::new(
            "memcached_read_timeout",
            HSL,
            Args::ONE,
            up::set_read_timeout,
        ),
        Command::new(
            "memcached_force_ranges",
            HSL,
            Args::Flag,
            up::set_force_ranges,
        ),
        Command::new(
            "memcached_socket_keepalive",
            HSL,
            Args::Flag,
            up::set_socket_keepalive,
        ),
        Command::new(
            "memcached_next_upstream",
            HSL,
            Args::ONE_OR_MORE,
            up::set_next_upstream,
        ),
        Command::new(
            "memcached_next_upstream_tries",
            HSL,
            Args::ONE,
            up::set_next_upstream_tries,
        ),
        Command::new(
            "memcached_next_upstream_timeout",
            HSL,
            Args::ONE,
            up::set_next_upstream_timeout,
        ),
    ];

    fn merge(loc: &mut MemcachedLoc, parent: &MemcachedLoc) {
        loc.merge_slots(parent);
        loc.up.merge(&parent.up);
    }
}

fn memcached<'a>(s: &'a mut Scope<'_>) -> &'a mut MemcachedLoc {
    &mut loc_conf(s).m.memcached
}

fn set_pass(_: &mut Builder, d: &Directive, s: &mut Scope<'_>) -> Result<(), Error> {
    let m = memcached(s);
    if m.pass.is_some() {
        return Err(crate::conf::duplicate(d));
    }
    m.pass = Some(Arc::new(Pass::parse(d, None, None)?));
    Ok(())
}

fn set_gzip_flag(_: &mut Builder, d: &Directive, s: &mut Scope<'_>) -> Result<(), Error> {
    let n = crate::conf::number_arg(d, 0)?;
    if n > u64::from(u32::MAX) {
        return Err(err(d, "invalid number"));
    }
    set_once(&mut memcached(s).gzip_flag, n, d)
}

/// Runs the exchange for a request in a `memcached_pass` location.
pub async fn handle(
    r: &Req<'_, '_>,
    lc: &LocConf,
    rw: &rewrite::State,
    method: &str,
    client_body: &ClientBody<'_>,
    _cached: crate::http::upstream::run::Cached<'_>,
) -> (Outcome, Option<Rc<RefCell<Record>>>) {
    let uri = rw.uri.clone();
    let m = Memcached {
        lc,
        uri: &uri,
        request: RefCell::new(None),
    };
    crate::http::upstream::run::handle(r, lc, rw, m, method, client_body, false, None).await
}

struct Memcached<'a> {
    lc: &'a LocConf,
    /// The URI, whose extension gives the answer's type.
    uri: &'a str,
    /// The `get` sent (the answer must name its key).
    request: RefCell<Option<memcached::Request>>,
}

impl Protocol for Memcached<'_> {
    type Head = MemcachedHead;
    const PROTO: Proto = Proto::Memcached;

    async fn dest(&self, r: &Req<'_, '_>, vars: &Vars<'_>) -> Result<Dest, Outcome> {
        cgi_like::pass_dest(self.lc.memcached.pass.as_deref(), "memcached", r, vars)
    }

    fn encode(
        &self,
        r: &Req<'_, '_>,
        vars: &Vars<'_>,
        _dest: &Dest,
        _method: &str,
        _body: &BodyToSend<'_, '_>,
    ) -> Result<Encoded, Outcome> {
        let key = vars
            .user
            .and_then(|m| m.get("memcached_key"))
            .map_or("", String::as_str);
        let request = match memcached::request(key.as_bytes()) {
            Ok(q) => q,
            Err(e) => {
                cgi_like::refused(r, e.level(), &e);
                return Err(Outcome::Error(e.status()));
            }
        };
        let head = request.bytes.to_vec();
        *self.request.borrow_mut() = Some(request);
        Ok(Encoded {
            head,
            set_body: None,
            send_body: false,
            framing: BodyFraming::Raw,
        })
    }

    fn head_decoder(&self, _r: &Req<'_, '_>, _method: &str) -> MemcachedHead {
        let request = self.request.borrow();
        let request = request.as_ref().expect("encoded before any try");
        MemcachedHead {
            decoder: Some(memcached::Decoder::new(
                request,
                self.lc.memcached.gzip_flag(),
            )),
            content_type: self
                .lc
                .content_type(std::path::Path::new(self.uri))
                .to_string(),
        }
    }

    fn reply(&self, answer: Answer, r: &Req<'_, '_>, record: &Rc<RefCell<Record>>) -> Box<Reply> {
        let found = answer.status == 200;
        let mut reply = crate::http::upstream::answer::reply_of(
            answer,
            self.lc,
            &self.lc.memcached.up,
            |_, _| false,
            None,
            r,
            record,
        );
        // A value is a whole object: nginx takes ranges of it (and says so).
        reply.allow_ranges |= found;
        reply
    }
}

/// The first line of memcached's answer, read as the head of an HTTP answer.
pub struct MemcachedHead {
    decoder: Option<memcached::Decoder>,
    content_type: String,
}

/// A head for the layer, written as HTTP and read back.
fn head_of(text: &str) -> Result<shoal_http::upstream::UpstreamHead, HeadError> {
    match shoal_http::upstream::parse_upstream_head(text.as_bytes(), text.len() + 1) {
        Ok(Some((h, _))) => Ok(h),
        _ => Err(HeadError::Invalid("memcached sent invalid response".into())),
    }
}

impl HeadDecoder for MemcachedHead {
    fn decode(
        &mut self,
        buf: &mut BytesMut,
        max: usize,
        log: Log<'_>,
    ) -> Result<Option<Parsed>, HeadError> {
        let Some(decoder) = self.decoder.as_mut() else {
            return Err(HeadError::Invalid("memcached sent invalid response".into()));
        };
        let got = match decoder.decode_head(buf, max) {
            Ok(None) => return Ok(None),
            Ok(Some(g)) => g,
            Err(e) => return Err(HeadError::Invalid(e.to_string())),
        };
        let (status, head, length) = match got {
            Got::NotFound(nf) => {
                log(level(nf.level()), &nf);
                (404, head_of("HTTP/1.1 404 Not Found\r\n\r\n")?, None)
            }
            Got::Found(v) => {
                let gzip = if v.gzip {
                    "Content-Encoding: gzip\r\n"
                } else {
                    ""
                };
                let text = format!(
                    "HTTP/1.1 200 OK\r\nContent-Type: {}\r\nContent-Length: {}\r\n{gzip}\r\n",
                    self.content_type, v.length
                );
                (200, head_of(&text)?, Some(v.length))
            }
        };
        let decoder = self.decoder.take().expect("decoding");
        let found = status == 200;
        Ok(Some(Parsed {
            status,
            reason: None,
            framing: if found { Framing::Codec } else { Framing::None },
            codec: found.then(|| Box::new(MemcachedBody { decoder }) as Box<dyn BodyCodec>),
            content_length: length,
            reusable: true,
            upgrade: false,
            consumed: 0,
            head,
            intercept: !found,
        }))
    }
}

/// A value, then the trailer's check.
struct MemcachedBody {
    decoder: memcached::Decoder,
}

fn body_error(e: MemcachedError) -> BodyError {
    BodyError::Protocol(e.to_string())
}

impl BodyCodec for MemcachedBody {
    fn take(&mut self, buf: &mut BytesMut, _log: Log<'_>) -> Result<Piece, BodyError> {
        match self.decoder.decode_body(buf).map_err(body_error)? {
            BodyChunk::Data(d) => Ok(Piece::Data(d)),
            BodyChunk::NeedMore => Ok(Piece::NeedMore),
            BodyChunk::Done => Ok(Piece::End),
        }
    }

    fn eof(&mut self) -> Result<(), BodyError> {
        self.decoder.eof().map_err(body_error)
    }

    fn reusable(&self) -> bool {
        self.decoder.is_done()
    }
}
