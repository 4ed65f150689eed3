//! nginx's `ngx_http_v2_module` directives (as nginx 1.25.1+ reads them) and `$http2`.
//!
//! `http2 on|off` (http, server) turns HTTP/2 on for a server: offered by ALPN on a TLS address
//! (the server SNI chose), spoken with prior knowledge (h2c) on a plain one (the default
//! server's). The older `listen ... http2` is read in `listen.rs` and does the same for every
//! server of its address. The obsolete directives are accepted with nginx's warnings and
//! change nothing: keep-alive, request counts and header sizes come from `keepalive_timeout`,
//! `keepalive_requests`, `client_header_timeout` and `large_client_header_buffers`, as in
//! nginx 1.19.7+.

use shoal_conf::{Directive, Error};

use crate::conf::{
    directive_err, err, flag_arg, number_arg, set_once, size_arg, Args, Builder, Command, Ctx,
    Scope,
};
use crate::http::loc_conf;
use crate::variables::Vars;

const HS: Ctx = Ctx::HTTP.or(Ctx::SERVER);

pub static DIRECTIVES: &[Command] = &[
    Command::new("http2", HS, Args::Flag, set_http2),
    Command::new("http2_recv_buffer_size", Ctx::HTTP, Args::ONE, set_size),
    Command::new("http2_pool_size", HS, Args::ONE, set_size),
    Command::new("http2_max_concurrent_streams", HS, Args::ONE, set_streams),
    Command::new("http2_body_preread_size", HS, Args::ONE, set_size),
    Command::new("http2_streams_index_size", HS, Args::ONE, set_index_size),
    Command::new("http2_chunk_size", Ctx::HSL, Args::ONE, set_size),
    Command::new("http2_max_concurrent_pushes", HS, Args::ONE, obsolete),
    Command::new("http2_max_requests", HS, Args::ONE, obsolete),
    Command::new("http2_max_field_size", HS, Args::ONE, obsolete),
    Command::new("http2_max_header_size", HS, Args::ONE, obsolete),
    Command::new("http2_recv_timeout", HS, Args::ONE, obsolete),
    Command::new("http2_idle_timeout", HS, Args::ONE, obsolete),
    Command::new("http2_push_preload", Ctx::HSL, Args::Flag, obsolete),
    Command::new("http2_push", Ctx::HSL, Args::ONE, obsolete),
];

/// The largest flow-control window (RFC 9113): `http2_body_preread_size`'s bound.
const MAX_WINDOW: u64 = (1 << 31) - 1;
/// The largest frame payload HTTP/2 allows: `http2_chunk_size` is cut to it.
const MAX_FRAME_SIZE: u64 = (1 << 24) - 1;

/// The module's settings at one level (merged http → server → location).
#[derive(Clone, Debug, Default)]
pub struct H2Loc {
    pub enable: Option<bool>,
    pub recv_buffer_size: Option<u64>,
    pub pool_size: Option<u64>,
    pub max_concurrent_streams: Option<u64>,
    pub body_preread_size: Option<u64>,
    pub streams_index_size: Option<u64>,
    pub chunk_size: Option<u64>,
}

impl H2Loc {
    /// `http2` (default off).
    pub fn enabled(&self) -> bool {
        self.enable.unwrap_or(false)
    }

    /// `http2_max_concurrent_streams` (default 128).
    pub fn max_concurrent_streams(&self) -> u32 {
        self.max_concurrent_streams
            .unwrap_or(128)
            .min(u32::MAX as u64) as u32
    }

    /// `http2_body_preread_size` (default 64k): each stream's initial window.
    pub fn body_preread_size(&self) -> u32 {
        self.body_preread_size.unwrap_or(65536) as u32
    }

    /// `http2_chunk_size` (default 8k): the largest DATA frame sent.
    pub fn chunk_size(&self) -> usize {
        self.chunk_size.unwrap_or(8 * 1024) as usize
    }

    /// `http2_recv_buffer_size` (default 256k): how much is read from a connection at once
    /// (less nginx's 32 bytes of state: see `io.rs`).
    pub fn recv_buffer_size(&self) -> usize {
        self.recv_buffer_size.unwrap_or(256 * 1024) as usize
    }
}

fn h2<'a>(s: &'a mut Scope<'_>) -> &'a mut H2Loc {
    &mut loc_conf(s).http2
}

fn set_http2(_: &mut Builder, d: &Directive, s: &mut Scope<'_>) -> Result<(), Error> {
    set_once(&mut h2(s).enable, flag_arg(d), d)
}

fn set_size(_: &mut Builder, d: &Directive, s: &mut Scope<'_>) -> Result<(), Error> {
    let mut n = size_arg(d, 0)?;
    let c = h2(s);
    let slot = match d.name.as_str() {
        "http2_recv_buffer_size" => {
            // nginx keeps two state buffers of 16 bytes at its start.
            if n <= 32 {
                return Err(directive_err(d, "value is too small"));
            }
            &mut c.recv_buffer_size
        }
        "http2_pool_size" => {
            if n < 112 {
                return Err(err(d, "the pool size must be no less than 112"));
            }
            if n % 16 != 0 {
                return Err(err(d, "the pool size must be a multiple of 16"));
            }
            &mut c.pool_size
        }
        "http2_body_preread_size" => {
            if n > MAX_WINDOW {
                return Err(err(
                    d,
                    format!("the maximum body preread buffer size is {MAX_WINDOW}"),
                ));
            }
            &mut c.body_preread_size
        }
        _ => {
            if n == 0 {
                return Err(err(d, "the http2 chunk size cannot be zero"));
            }
            n = n.min(MAX_FRAME_SIZE);
            &mut c.chunk_size
        }
    };
    set_once(slot, n, d)
}

fn set_streams(_: &mut Builder, d: &Directive, s: &mut Scope<'_>) -> Result<(), Error> {
    let n = number_arg(d, 0)?;
    set_once(&mut h2(s).max_concurrent_streams, n, d)
}

fn set_index_size(_: &mut Builder, d: &Directive, s: &mut Scope<'_>) -> Result<(), Error> {
    let n = number_arg(d, 0)?;
    if n == 0 || !n.is_power_of_two() {
        return Err(directive_err(d, "must be a power of two"));
    }
    set_once(&mut h2(s).streams_index_size, n, d)
}

/// The directives nginx made obsolete: a warning naming what replaced them, nothing else.
fn obsolete(b: &mut Builder, d: &Directive, _: &mut Scope<'_>) -> Result<(), Error> {
    let instead = match d.name.as_str() {
        "http2_recv_timeout" => Some("client_header_timeout"),
        "http2_idle_timeout" => Some("keepalive_timeout"),
        "http2_max_requests" => Some("keepalive_requests"),
        "http2_max_field_size" | "http2_max_header_size" => Some("large_client_header_buffers"),
        _ => None,
    };
    let message = match instead {
        Some(new) => format!(
            "the \"{}\" directive is obsolete, use the \"{new}\" directive instead",
            d.name
        ),
        None => format!("the \"{}\" directive is obsolete, ignored", d.name),
    };
    b.warn(message, &d.span);
    Ok(())
}

/// The module's place in the module list: its directives and `$http2`.
pub struct Module;

impl crate::http::modules::HttpModule for Module {
    type Loc = H2Loc;
    const DIRECTIVES: &'static [Command] = DIRECTIVES;
    const VARIABLES: &'static [&'static str] = &["http2"];

    fn merge(loc: &mut H2Loc, parent: &H2Loc) {
        use crate::conf::merge;
        merge(&mut loc.enable, &parent.enable);
        merge(&mut loc.recv_buffer_size, &parent.recv_buffer_size);
        merge(&mut loc.pool_size, &parent.pool_size);
        merge(
            &mut loc.max_concurrent_streams,
            &parent.max_concurrent_streams,
        );
        merge(&mut loc.body_preread_size, &parent.body_preread_size);
        merge(&mut loc.streams_index_size, &parent.streams_index_size);
        merge(&mut loc.chunk_size, &parent.chunk_size);
    }

    /// `$http2`: `h2` for a request on an HTTP/2 stream over TLS, `h2c` over a plain
    /// connection, empty otherwise.
    fn variable(_: Option<&H2Loc>, name: &str, vars: &Vars<'_>, out: &mut String) -> Option<bool> {
        if name != "http2" {
            return None;
        }
        if vars
            .req
            .is_some_and(|r| r.version() == shoal_http::Version::Http2)
        {
            out.push_str(if vars.tls.is_some() { "h2" } else { "h2c" });
        }
        Some(true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_nginx_s() {
        let c = H2Loc::default();
        assert!(!c.enabled());
        assert_eq!(c.max_concurrent_streams(), 128);
        assert_eq!(c.body_preread_size(), 65536);
        assert_eq!(c.chunk_size(), 8192);
        assert_eq!(c.recv_buffer_size(), 262144);
    }
}
