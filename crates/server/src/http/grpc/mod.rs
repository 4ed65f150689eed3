//! nginx's grpc module (`ngx_http_grpc_module`): `grpc_pass` sends a request to a gRPC server
//! over HTTP/2 (cleartext `grpc://`, TLS `grpcs://` with ALPN `h2`), on the upstream layer's
//! peers, balancing, connect, `grpc_next_upstream`, timeouts, hidden and passed headers,
//! `grpc_intercept_errors` and `$upstream_*`; the HTTP/2 client is shoal's own codec
//! (`shoal_http2::client`), driven by a task of the worker's per connection.
//!
//! - [`conn`]: HTTP/2 connections to upstreams and the worker's cache of idle ones.
//! - [`wire`]: a connection's task and each call's handles on its codec.
//! - [`run`]: one call's exchange (peer, connection, the stream, the answer's head awaited).
//! - [`head`]: the request's head for the upstream, the client's reply from the answer's.
//! - [`body`]: both bodies relayed as they come, and the answer's trailers.
//! - [`meter`]: the size of an answer's head as it came (`grpc_buffer_size`).
//! - [`streamed`]: an HTTP/1 client's chunked body sent as it comes.
//!
//! Unlike the other protocols, nothing is buffered: a call's request body goes upstream frame
//! by frame as the client sends it, and its answer goes to the client frame by frame (nginx's
//! grpc module does the same), so streaming calls work in both directions. The TLS settings
//! are the proxy's code under `grpc_ssl_*` names ([`crate::http::proxy::ssl`]).
//!
//! Runs on the worker; everything waits on sockets, nothing blocks.

pub mod body;
pub mod conn;
pub mod head;
pub mod meter;
pub mod run;
pub mod streamed;
pub mod wire;

pub use run::handle;

use std::sync::Arc;

use shoal_conf::{Directive, Error};

use crate::conf::{err, Args, Builder, Command, Ctx, Scope};
use crate::http::loc_conf;
use crate::http::modules::HttpModule;
use crate::http::proxy::ssl::ProxySsl;
use crate::http::upstream::conf as up;
use crate::http::upstream::target::Target;
use crate::http::upstream::UpstreamLoc;
use crate::http::LocConf;
use crate::upstream::conf::UpstreamConf;
use crate::variables::Template;

/// `grpc_pass ADDRESS`.
#[derive(Debug)]
pub struct GrpcPass {
    pub target: Target,
    /// `grpcs://`: TLS to the upstream. With variables, the evaluated text says.
    pub tls: bool,
    /// The address as written without its scheme: the `:authority` sent (unless
    /// `grpc_set_header Host` says otherwise), `$proxy_host`-like.
    pub host: Arc<str>,
    /// `host` as a URI's authority, made once (`None`: not one, `localhost` is sent).
    pub authority: Option<http::uri::Authority>,
    /// Where the directive is, for errors found when upstreams are linked.
    pub span: shoal_conf::Span,
}

/// `grpc://` and `grpcs://` off the front of an address: the rest and whether it is TLS.
pub fn strip_scheme(url: &str) -> (&str, bool) {
    let lower = url
        .get(..8)
        .map(str::to_ascii_lowercase)
        .unwrap_or_default();
    if lower.starts_with("grpc://") {
        (&url[7..], false)
    } else if lower == "grpcs://" {
        (&url[8..], true)
    } else {
        (url, false)
    }
}

/// The grpc module's location-level settings; the shared ones are in `up`.
#[derive(Clone, Debug, Default)]
pub struct GrpcLoc {
    pub up: UpstreamLoc,
    /// Not inherited by nested locations; `if` blocks take their location's.
    pub pass: Option<Arc<GrpcPass>>,
    /// `grpc_set_header NAME VALUE` (an empty value removes the header).
    pub set_header: Option<Arc<Vec<(String, Template)>>>,
    /// `grpc_ssl_*`.
    pub ssl: ProxySsl,
}

const HSL: Ctx = Ctx::HSL;

/// The module in the list ([`crate::http::modules`]).
pub struct Module;

impl HttpModule for Module {
    type Loc = GrpcLoc;
    const DIRECTIVES: &'static [Command] = &[
        Command::new("grpc_pass", Ctx::LOCATION.or(Ctx::LIF), Args::ONE, set_pass),
        Command::new("grpc_set_header", HSL, Args::TWO, set_set_header),
        Command::new("grpc_hide_header", HSL, Args::ONE, up::set_hide_header),
        Command::new("grpc_pass_header", HSL, Args::ONE, up::set_pass_header),
        Command::new(
            "grpc_ignore_headers",
            HSL,
            Args::ONE_OR_MORE,
            up::set_ignore_headers,
        ),
        Command::new("grpc_bind", HSL, Args::Take(1, 2), up::set_bind),
        Command::new(
            "grpc_socket_keepalive",
            HSL,
            Args::Flag,
            up::set_socket_keepalive,
        ),
        Command::new("grpc_buffer_size", HSL, Args::ONE, up::set_buffer_size),
        Command::new(
            "grpc_connect_timeout",
            HSL,
            Args::ONE,
            up::set_connect_timeout,
        ),
        Command::new("grpc_send_timeout", HSL, Args::ONE, up::set_send_timeout),
        Command::new("grpc_read_timeout", HSL, Args::ONE, up::set_read_timeout),
        Command::new(
            "grpc_intercept_errors",
            HSL,
            Args::Flag,
            up::set_intercept_errors,
        ),
        Command::new(
            "grpc_next_upstream",
            HSL,
            Args::ONE_OR_MORE,
            up::set_next_upstream,
        ),
        Command::new(
            "grpc_next_upstream_tries",
            HSL,
            Args::ONE,
            up::set_next_upstream_tries,
        ),
        Command::new(
            "grpc_next_upstream_timeout",
            HSL,
            Args::ONE,
            up::set_next_upstream_timeout,
        ),
    ];

    fn merge(loc: &mut GrpcLoc, parent: &GrpcLoc) {
        loc.up.merge(&parent.up);
        crate::conf::merge(&mut loc.set_header, &parent.set_header);
        loc.ssl.merge(&parent.ssl);
    }
}

fn grpc<'a>(s: &'a mut Scope<'_>) -> &'a mut GrpcLoc {
    &mut loc_conf(s).m.grpc
}

fn set_pass(_: &mut Builder, d: &Directive, s: &mut Scope<'_>) -> Result<(), Error> {
    if grpc(s).pass.is_some() {
        return Err(crate::conf::duplicate(d));
    }
    let url = d.args[0].value.as_str();
    let (rest, tls) = strip_scheme(url);
    let (target, host) = Target::parse(rest).map_err(|m| err(d, m))?;
    grpc(s).pass = Some(Arc::new(GrpcPass {
        target,
        tls,
        authority: http::uri::Authority::from_maybe_shared(bytes::Bytes::from(host.clone())).ok(),
        host: Arc::from(host),
        span: d.span.clone(),
    }));
    Ok(())
}

fn set_set_header(_: &mut Builder, d: &Directive, s: &mut Scope<'_>) -> Result<(), Error> {
    let value = Template::compile(&d.args[1].value).map_err(|m| err(d, m))?;
    let list = grpc(s).set_header.get_or_insert_with(Default::default);
    Arc::make_mut(list).push((d.args[0].value.clone(), value));
    Ok(())
}

/// Links a location's `grpc_pass` to its upstream once all are read, and builds its TLS
/// settings when it may speak TLS (`grpcs://`, or an address with variables).
pub fn link(lc: &LocConf, upstreams: &[Arc<UpstreamConf>]) -> Result<(), Error> {
    let Some(p) = &lc.grpc.pass else {
        return Ok(());
    };
    p.target.link(0, &p.span, upstreams)?;
    if p.tls || matches!(p.target, Target::Dynamic { .. }) {
        crate::http::proxy::ssl::build(&lc.grpc.ssl, "grpc", &[b"h2"])?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::strip_scheme;

    #[test]
    fn schemes() {
        assert_eq!(
            strip_scheme("grpc://127.0.0.1:9000"),
            ("127.0.0.1:9000", false)
        );
        assert_eq!(strip_scheme("grpcs://backend"), ("backend", true));
        assert_eq!(strip_scheme("GRPCS://backend"), ("backend", true));
        assert_eq!(strip_scheme("unix:/tmp/s"), ("unix:/tmp/s", false));
        assert_eq!(strip_scheme("$up"), ("$up", false));
    }
}
