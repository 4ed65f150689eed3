//! nginx's SCGI module: `scgi_pass` and the `scgi_*` directives, on the upstream layer
//! ([`crate::http::upstream`]): the request is a netstring of params (`CONTENT_LENGTH` first,
//! then `scgi_param`, then the client's headers as `HTTP_*`), then the body as it is; the
//! answer is read as an HTTP or CGI head ([`crate::http::upstream::cgi`]).

use std::cell::RefCell;
use std::rc::Rc;
use std::sync::Arc;

use bytes::BytesMut;
use shoal_conf::{Directive, Error};

use crate::conf::{Args, Builder, Command, Ctx, Scope};
use crate::http::client_body::{BodyToSend, ClientBody};
use crate::http::loc_conf;
use crate::http::modules::HttpModule;
use crate::http::reply::{Outcome, Reply};
use crate::http::request::Req;
use crate::http::rewrite;
use crate::http::upstream::cgi::CgiHead;
use crate::http::upstream::params::{self, Param};
use crate::http::upstream::protocol::{level, BodyFraming, Dest, Encoded, Protocol};
use crate::http::upstream::record::Record;
use crate::http::upstream::run::Answer;
use crate::http::upstream::{Proto, UpstreamLoc};
use crate::http::uwsgi::{hidden, Pass};
use crate::http::LocConf;
use crate::variables::Vars;

/// The SCGI module's location-level settings; the shared ones are in `up`.
#[derive(Clone, Debug, Default)]
pub struct ScgiLoc {
    pub up: UpstreamLoc,
    /// Not inherited by nested locations; `if` blocks take their location's.
    pub pass: Option<Arc<Pass>>,
    pub params: Option<Arc<Vec<Param>>>,
}

/// The module in the list ([`crate::http::modules`]).
pub struct Module;

impl HttpModule for Module {
    type Loc = ScgiLoc;
    const DIRECTIVES: &'static [Command] = crate::http::upstream::conf::upstream_directives!(
        "scgi",
        cache,
        [
            Command::new("scgi_pass", Ctx::LOCATION.or(Ctx::LIF), Args::ONE, set_pass),
            Command::new("scgi_param", Ctx::HSL, Args::Take(2, 3), set_param),
        ]
    );

    fn merge(loc: &mut ScgiLoc, parent: &ScgiLoc) {
        loc.up.merge(&parent.up);
        crate::conf::merge(&mut loc.params, &parent.params);
    }
}

fn scgi<'a>(s: &'a mut Scope<'_>) -> &'a mut ScgiLoc {
    &mut loc_conf(s).m.scgi
}

fn set_pass(_: &mut Builder, d: &Directive, s: &mut Scope<'_>) -> Result<(), Error> {
    let c = scgi(s);
    if c.pass.is_some() {
        return Err(crate::conf::duplicate(d));
    }
    c.pass = Some(Arc::new(Pass::parse(d, None)?));
    Ok(())
}

fn set_param(_: &mut Builder, d: &Directive, s: &mut Scope<'_>) -> Result<(), Error> {
    params::push(&mut scgi(s).params, d)
}

/// Runs the exchange for a request in an `scgi_pass` location.
pub async fn handle(
    r: &Req<'_, '_>,
    lc: &LocConf,
    rw: &rewrite::State,
    method: &str,
    client_body: &ClientBody<'_>,
    cached: crate::http::upstream::run::Cached<'_>,
) -> (Outcome, Option<Rc<RefCell<Record>>>) {
    let c = Scgi {
        lc,
        cacheable: cached.cacheable,
    };
    // The netstring tells the body's length: a chunked body is read whole first.
    crate::http::upstream::run::handle(r, lc, rw, &c, method, client_body, false, cached.validators)
        .await
}

struct Scgi<'a> {
    lc: &'a LocConf,
    cacheable: bool,
}

impl Protocol for Scgi<'_> {
    type Head = CgiHead;
    const PROTO: Proto = Proto::Scgi;

    async fn dest(&self, r: &Req<'_, '_>, vars: &Vars<'_>) -> Result<Dest, Outcome> {
        let Some(pass) = &self.lc.scgi.pass else {
            return Err(Outcome::Error(500));
        };
        crate::http::fastcgi::codec::dest_of(&pass.target, "scgi", r, vars)
    }

    fn encode(
        &self,
        r: &Req<'_, '_>,
        vars: &Vars<'_>,
        _dest: &Dest,
        _method: &str,
        body: &BodyToSend<'_, '_>,
    ) -> Result<Encoded, Outcome> {
        let conf = &self.lc.scgi;
        let pairs = params::eval(
            conf.params.as_deref().map(Vec::as_slice),
            r,
            vars,
            conf.up.pass_request_headers(),
            crate::http::fastcgi::codec::read_length(r, body),
            self.cacheable,
        );
        let send_body = conf.up.pass_request_body();
        let len = if send_body {
            body.len().unwrap_or(0)
        } else {
            0
        };
        let mut head = BytesMut::new();
        let params = pairs.iter().map(|(n, v)| (&n[..], &v[..]));
        if let Err(e) = shoal_http::scgi::request_head(&mut head, len, params) {
            crate::conn_log!(level(e.level()), r.info.number, "{e}{}", r.log_ctx());
            return Err(Outcome::Error(500));
        }
        Ok(Encoded {
            head: head.to_vec(),
            set_body: None,
            send_body,
            framing: BodyFraming::Raw,
        })
    }

    fn head_decoder(&self, _r: &Req<'_, '_>, method: &str) -> CgiHead {
        CgiHead::new(method == "HEAD")
    }

    fn reply(&self, answer: Answer, r: &Req<'_, '_>, record: &Rc<RefCell<Record>>) -> Box<Reply> {
        crate::http::upstream::answer::reply_of(
            answer,
            self.lc,
            &self.lc.scgi.up,
            |name, _| hidden(shoal_http::scgi::HIDDEN_HEADERS, name),
            None,
            r,
            record,
        )
    }
}
