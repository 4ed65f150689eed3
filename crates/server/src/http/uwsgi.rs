//! nginx's uwsgi module: `uwsgi_pass` and the `uwsgi_*` directives, on the upstream layer
//! ([`crate::http::upstream`]): the request is a uwsgi packet of vars (`uwsgi_param`, the
//! client's headers as `HTTP_*`) with `uwsgi_modifier1`/`uwsgi_modifier2`, then the body as
//! it is; the answer is read as an HTTP or CGI head ([`crate::http::upstream::cgi`]). Unlike
//! FastCGI and SCGI, a uwsgi answer's `Status` header is passed on. The exchange is the params
//! protocols' ([`crate::http::upstream::cgi_like`]).

use std::sync::Arc;

use bytes::BytesMut;
use shoal_conf::{Directive, Error};

use crate::conf::{err, set_once, Args, Builder, Command, Ctx, Scope};
use crate::http::loc_conf;
use crate::http::modules::HttpModule;
use crate::http::proxy::ssl::{ProxySsl, UpstreamTls};
use crate::http::upstream::cgi::CgiHead;
use crate::http::upstream::cgi_like::{CgiConf, Pass};
use crate::http::upstream::params::{self, Param};
use crate::http::upstream::protocol::BodyFraming;
use crate::http::upstream::{Proto, UpstreamLoc};
use crate::http::LocConf;

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
        /// `uwsgi_ssl_*`: `suwsgi://` upstreams, through the proxy's TLS client.
        pub ssl: ProxySsl,
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
        loc.ssl.merge(&parent.ssl);
    }
}

fn uwsgi<'a>(s: &'a mut Scope<'_>) -> &'a mut UwsgiLoc {
    &mut loc_conf(s).m.uwsgi
}

fn set_pass(_: &mut Builder, d: &Directive, s: &mut Scope<'_>) -> Result<(), Error> {
    let u = uwsgi(s);
    if u.pass.is_some() {
        return Err(crate::conf::duplicate(d));
    }
    u.pass = Some(Arc::new(Pass::parse(
        d,
        Some("uwsgi://"),
        Some("suwsgi://"),
    )?));
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

impl CgiConf for UwsgiLoc {
    const PROTO: Proto = Proto::Uwsgi;
    const SCHEME: &'static str = "uwsgi";
    const HIDDEN: &'static [&'static str] = shoal_http::uwsgi::HIDDEN_HEADERS;
    /// A chunked body is read whole first: the packet has no framing for it.
    const STREAMS_CHUNKED: bool = false;
    const FRAMING: BodyFraming = BodyFraming::Raw;
    type Head = CgiHead;

    crate::http::upstream::cgi_like::cgi_fields!(uwsgi);

    fn write_head(
        &self,
        pairs: &[(Vec<u8>, Vec<u8>)],
        _body_len: u64,
        out: &mut BytesMut,
    ) -> Result<(), (shoal_http::log::Level, String)> {
        let vars = pairs.iter().map(|(n, v)| (&n[..], &v[..]));
        shoal_http::uwsgi::request_head(out, self.modifier1(), self.modifier2(), vars)
            .map_err(|e| (e.level(), e.to_string()))
    }

    fn head_decoder(&self, head: bool) -> CgiHead {
        CgiHead::new(head)
    }

    fn tls(&self) -> Option<&UpstreamTls> {
        self.ssl.built.get().map(|t| &**t)
    }
}

/// Builds a `suwsgi://` location's TLS client when the configuration is finished (its
/// errors, `no uwsgi_ssl_trusted_certificate for uwsgi_ssl_verify`, are nginx's).
pub fn link(lc: &LocConf) -> Result<(), Error> {
    match &lc.uwsgi.pass {
        Some(p) if p.tls => crate::http::proxy::ssl::build(&lc.uwsgi.ssl, "uwsgi", &[]),
        _ => Ok(()),
    }
}
