//! nginx's SCGI module: `scgi_pass` and the `scgi_*` directives, on the upstream layer
//! ([`crate::http::upstream`]): the request is a netstring of params (`CONTENT_LENGTH` first,
//! then `scgi_param`, then the client's headers as `HTTP_*`), then the body as it is; the
//! answer is read as an HTTP or CGI head ([`crate::http::upstream::cgi`]). The exchange is
//! the params protocols' ([`crate::http::upstream::cgi_like`]).

use std::sync::Arc;

use bytes::BytesMut;
use shoal_conf::{Directive, Error};

use crate::conf::{Args, Builder, Command, Ctx, Scope};
use crate::http::loc_conf;
use crate::http::modules::HttpModule;
use crate::http::upstream::cgi::CgiHead;
use crate::http::upstream::cgi_like::{CgiConf, Pass};
use crate::http::upstream::params::{self, Param};
use crate::http::upstream::protocol::BodyFraming;
use crate::http::upstream::{Proto, UpstreamLoc};

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
    c.pass = Some(Arc::new(Pass::parse(d, None, None)?));
    Ok(())
}

fn set_param(_: &mut Builder, d: &Directive, s: &mut Scope<'_>) -> Result<(), Error> {
    params::push(&mut scgi(s).params, d)
}

impl CgiConf for ScgiLoc {
    const PROTO: Proto = Proto::Scgi;
    const SCHEME: &'static str = "scgi";
    const HIDDEN: &'static [&'static str] = shoal_http::scgi::HIDDEN_HEADERS;
    /// The netstring tells the body's length: a chunked body is read whole first.
    const STREAMS_CHUNKED: bool = false;
    const FRAMING: BodyFraming = BodyFraming::Raw;
    type Head = CgiHead;

    crate::http::upstream::cgi_like::cgi_fields!(scgi);

    fn write_head(
        &self,
        pairs: &[(Vec<u8>, Vec<u8>)],
        body_len: u64,
        out: &mut BytesMut,
    ) -> Result<(), (shoal_http::log::Level, String)> {
        let params = pairs.iter().map(|(n, v)| (&n[..], &v[..]));
        shoal_http::scgi::request_head(out, body_len, params)
            .map_err(|e| (e.level(), e.to_string()))
    }

    fn head_decoder(&self, head: bool) -> CgiHead {
        CgiHead::new(head)
    }
}
