//! How an answer goes on the wire, nginx's core directives for it: `postpone_output`,
//! `chunked_transfer_encoding` and `send_lowat`.
//!
//! - `postpone_output SIZE` (default 1460): an upstream's answer read with `proxy_buffering on`
//!   goes out once this much of it is gathered (its head included) or it ends, as nginx's write
//!   filter holds it; 0 writes each piece as it comes. (Other answers are whole, or end soon
//!   enough that nothing waits on it; `proxy_buffering off` writes at once, as in nginx.)
//! - `chunked_transfer_encoding off`: a body of unknown length is sent without chunks to
//!   HTTP/1.1 clients too, ended by closing the connection.
//! - `send_lowat SIZE`: Linux does not let `SO_SNDLOWAT` be set (`setsockopt` fails with
//!   `ENOPROTOOPT`), so nginx on Linux warns `"send_lowat" is not supported, ignored` and does
//!   nothing; so does shoal. The same goes for the upstream side's `proxy_send_lowat` and
//!   `fastcgi_send_lowat` (nginx has no `uwsgi_send_lowat`, `scgi_send_lowat` or
//!   `grpc_send_lowat`: they are unknown directives to both).

use shoal_conf::{Directive, Error};

use super::loc_conf;
use crate::conf::{flag_arg, merge, set_once, size_arg, Args, Builder, Command, Ctx, Scope};

pub static DIRECTIVES: &[Command] = &[
    Command::new("postpone_output", Ctx::HSL, Args::ONE, set_postpone_output),
    Command::new(
        "chunked_transfer_encoding",
        Ctx::HSL,
        Args::Flag,
        set_chunked_transfer_encoding,
    ),
    Command::new("send_lowat", Ctx::HSL, Args::ONE, set_send_lowat),
    Command::new("proxy_send_lowat", Ctx::HSL, Args::ONE, set_upstream_lowat),
    Command::new(
        "fastcgi_send_lowat",
        Ctx::HSL,
        Args::ONE,
        set_upstream_lowat,
    ),
];

/// The settings of one level.
#[derive(Clone, Debug, Default)]
pub struct FramingLoc {
    pub postpone_output: Option<u64>,
    pub chunked: Option<bool>,
    /// Read only to refuse a second one.
    pub send_lowat: Option<u64>,
    /// `proxy_send_lowat`, `fastcgi_send_lowat`: likewise.
    pub proxy_send_lowat: Option<u64>,
    pub fastcgi_send_lowat: Option<u64>,
}

impl FramingLoc {
    /// `postpone_output` (default 1460).
    pub fn postpone_output(&self) -> usize {
        self.postpone_output.unwrap_or(1460) as usize
    }

    /// `chunked_transfer_encoding` (default on).
    pub fn chunked(&self) -> bool {
        self.chunked.unwrap_or(true)
    }
}

fn framing<'a>(s: &'a mut Scope<'_>) -> &'a mut FramingLoc {
    &mut loc_conf(s).framing
}

fn set_postpone_output(_: &mut Builder, d: &Directive, s: &mut Scope<'_>) -> Result<(), Error> {
    let n = size_arg(d, 0)?;
    set_once(&mut framing(s).postpone_output, n, d)
}

fn set_chunked_transfer_encoding(
    _: &mut Builder,
    d: &Directive,
    s: &mut Scope<'_>,
) -> Result<(), Error> {
    set_once(&mut framing(s).chunked, flag_arg(d), d)
}

fn set_send_lowat(b: &mut Builder, d: &Directive, s: &mut Scope<'_>) -> Result<(), Error> {
    let n = size_arg(d, 0)?;
    set_once(&mut framing(s).send_lowat, n, d)?;
    b.warn("\"send_lowat\" is not supported, ignored", &d.span);
    Ok(())
}

/// `proxy_send_lowat`, `fastcgi_send_lowat`: nginx's size slot (a repeat refused first, then
/// the value read), then its Linux warning.
fn set_upstream_lowat(b: &mut Builder, d: &Directive, s: &mut Scope<'_>) -> Result<(), Error> {
    let loc = framing(s);
    let slot = if d.name == "proxy_send_lowat" {
        &mut loc.proxy_send_lowat
    } else {
        &mut loc.fastcgi_send_lowat
    };
    if slot.is_some() {
        return Err(crate::conf::duplicate(d));
    }
    *slot = Some(size_arg(d, 0)?);
    b.warn(format!("\"{}\" is not supported, ignored", d.name), &d.span);
    Ok(())
}

/// The framing directives' place in the module list.
pub struct Module;

impl super::modules::HttpModule for Module {
    type Loc = FramingLoc;
    const DIRECTIVES: &'static [Command] = DIRECTIVES;

    fn merge(loc: &mut FramingLoc, parent: &FramingLoc) {
        merge(&mut loc.postpone_output, &parent.postpone_output);
        merge(&mut loc.chunked, &parent.chunked);
        merge(&mut loc.send_lowat, &parent.send_lowat);
        merge(&mut loc.proxy_send_lowat, &parent.proxy_send_lowat);
        merge(&mut loc.fastcgi_send_lowat, &parent.fastcgi_send_lowat);
    }
}

/// Whether a body of unknown length may be sent chunked to this request: HTTP/1.1 or later,
/// and `chunked_transfer_encoding` on.
pub fn chunks_allowed(req: &shoal_http::Request, lc: &super::LocConf) -> bool {
    req.version() >= shoal_http::Version::Http11 && lc.framing.chunked()
}
