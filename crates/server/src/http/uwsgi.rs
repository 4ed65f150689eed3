//! nginx's uwsgi module: `uwsgi_pass` and the `uwsgi_*` directives, on the upstream layer
//! ([`crate::http::upstream`]): the request is a uwsgi packet of vars (`uwsgi_param`, the
//! client's headers as `HTTP_*`) with `uwsgi_modifier1`/`uwsgi_modifier2`, then the body as
//! it is; the answer is read as an HTTP or CGI head ([`crate::http::upstream::cgi`]). Unlike
//! FastCGI and SCGI, a uwsgi answer's `Status` header is passed on.

use std::cell::RefCell;
use std::rc::Rc;
use std::sync::Arc;

use bytes::BytesMut;
use shoal_conf::{Directive, Error};

use crate::conf::{err, set_once, Args, Builder, Command, Ctx, Scope};
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
use crate::http::upstream::target::Target;
use crate::http::upstream::{Proto, UpstreamLoc};
use crate::http::LocConf;
use crate::variables::Vars;

/// `uwsgi_pass`, `scgi_pass`, `memcached_pass`: an address.
#[derive(Debug)]
pub struct Pass {
    pub target: Target,
    /// Where the directive is, for errors found when upstreams are linked.
    pub span: shoal_conf::Span,
}

impl Pass {
    /// The directive's address, without the scheme `scheme` allows (`uwsgi://`).
    pub fn parse(d: &Directive, scheme: Option<&str>) -> Result<Pass, Error> {
        let mut text = d.args[0].value.as_str();
        if let Some(s) = scheme {
            if let Some(rest) = text.strip_prefix(s) {
                text = rest;
            }
        }
        let (target, _) = Target::parse(text).map_err(|m| err(d, m))?;
        Ok(Pass {
            target,
            span: d.span.clone(),
        })
    }
}

crate::conf::conf_slots! {
    /// The uwsgi module's location-level settings; the shared ones are in `up`.
    #[derive(Clone, Debug, Default)]
    pub struct UwsgiLoc {
        modifier1: u8 = 0,
        modifier2: u8 = 0,
    }
    others {
        pub up: UpstreamLoc,
        /// Not inherited by nested locations; `if` blocks take their location's.
        pub pass: Option<Arc<Pass>>,
        pub params: Option<Arc<Vec<Param>>>,
    }
}

/// The module in the list ([`crate::http::modules`]).
pub struct Module;

impl HttpModule for Module {
    type Loc = UwsgiLoc;
    const DIRECTIVES: &'static [Command] = crate::http::upstream::conf::upstream_directives!(
        "uwsgi",
        cache,
        [
            Command::new(
                "uwsgi_pass",
                Ctx::LOCATION.or(Ctx::LIF),
                Args::ONE,
                set_pass
            ),
            Command::new("uwsgi_param", Ctx::HSL, Args::Take(2, 3), set_param),
            Command::new("uwsgi_modifier1", Ctx::HSL, Args::ONE, set_modifier),
            Command::new("uwsgi_modifier2", Ctx::HSL, Args::ONE, set_modifier),
        ]
    );

    fn merge(loc: &mut UwsgiLoc, parent: &UwsgiLoc) {
        loc.merge_slots(parent);
        loc.up.merge(&parent.up);
        crate::conf::merge(&mut loc.params, &parent.params);
    }
}

fn uwsgi<'a>(s: &'a mut Scope<'_>) -> &'a mut UwsgiLoc {
    &mut loc_conf(s).m.uwsgi
}

fn set_pass(_: &mut Builder, d: &Directive, s: &mut Scope<'_>) -> Result<(), Error> {
    if d.args[0].value.starts_with("suwsgi://") {
        return Err(err(d, "\"suwsgi://\" is not supported by shoal"));
    }
    let u = uwsgi(s);
    if u.pass.is_some() {
        return Err(crate::conf::duplicate(d));
    }
    u.pass = Some(Arc::new(Pass::parse(d, Some("uwsgi://"))?));
    Ok(())
}

fn set_param(_: &mut Builder, d: &Directive, s: &mut Scope<'_>) -> Result<(), Error> {
    params::push(&mut uwsgi(s).params, d)
}

fn set_modifier(_: &mut Builder, d: &Directive, s: &mut Scope<'_>) -> Result<(), Error> {
    let n = crate::conf::number_arg(d, 0)?;
    let Ok(n) = u8::try_from(n) else {
        return Err(err(
            d,
            format!("value must be less than 256 in \"{}\"", d.name),
        ));
    };
    let u = uwsgi(s);
    let slot = if d.name == "uwsgi_modifier1" {
        &mut u.modifier1
    } else {
        &mut u.modifier2
    };
    set_once(slot, n, d)
}

/// Runs the exchange for a request in a `uwsgi_pass` location.
pub async fn handle(
    r: &Req<'_, '_>,
    lc: &LocConf,
    rw: &rewrite::State,
    method: &str,
    client_body: &ClientBody<'_>,
    cached: crate::http::upstream::run::Cached<'_>,
) -> (Outcome, Option<Rc<RefCell<Record>>>) {
    let u = Uwsgi {
        lc,
        cacheable: cached.cacheable,
    };
    // A chunked body is read whole first: the packet has no framing for it.
    crate::http::upstream::run::handle(r, lc, rw, &u, method, client_body, false, cached.validators)
        .await
}

struct Uwsgi<'a> {
    lc: &'a LocConf,
    cacheable: bool,
}

impl Protocol for Uwsgi<'_> {
    type Head = CgiHead;
    const PROTO: Proto = Proto::Uwsgi;

    async fn dest(&self, r: &Req<'_, '_>, vars: &Vars<'_>) -> Result<Dest, Outcome> {
        let Some(pass) = &self.lc.uwsgi.pass else {
            return Err(Outcome::Error(500));
        };
        crate::http::fastcgi::codec::dest_of(&pass.target, "uwsgi", r, vars)
    }

    fn encode(
        &self,
        r: &Req<'_, '_>,
        vars: &Vars<'_>,
        _dest: &Dest,
        _method: &str,
        body: &BodyToSend<'_, '_>,
    ) -> Result<Encoded, Outcome> {
        let conf = &self.lc.uwsgi;
        let pairs = params::eval(
            conf.params.as_deref().map(Vec::as_slice),
            r,
            vars,
            conf.up.pass_request_headers(),
            crate::http::fastcgi::codec::read_length(r, body),
            self.cacheable,
        );
        let mut head = BytesMut::new();
        let vars = pairs.iter().map(|(n, v)| (&n[..], &v[..]));
        if let Err(e) =
            shoal_http::uwsgi::request_head(&mut head, conf.modifier1(), conf.modifier2(), vars)
        {
            crate::conn_log!(level(e.level()), r.info.number, "{e}{}", r.log_ctx());
            return Err(Outcome::Error(500));
        }
        Ok(Encoded {
            head: head.to_vec(),
            set_body: None,
            send_body: conf.up.pass_request_body(),
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
            &self.lc.uwsgi.up,
            |name, _| hidden(shoal_http::uwsgi::HIDDEN_HEADERS, name),
            None,
            r,
            record,
        )
    }
}

/// Whether `name` is in a protocol's list of hidden headers.
pub fn hidden(list: &[&str], name: &[u8]) -> bool {
    list.iter().any(|h| h.as_bytes().eq_ignore_ascii_case(name))
}
