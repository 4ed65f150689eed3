//! `$proxy_protocol_addr`, `$proxy_protocol_port`, `$proxy_protocol_server_addr`,
//! `$proxy_protocol_server_port` and `$proxy_protocol_tlv_NAME`: what the PROXY protocol header
//! of a `listen ... proxy_protocol` connection said (read before the first request by
//! `h1/proxy_protocol.rs`, parsed by [`shoal_http::proxy_protocol`]).
//!
//! As nginx: on a connection without a header, or with one that carried no addresses
//! (`UNKNOWN`, LOCAL), the variables are not found; a port of 0 is empty. The TLV variables
//! are nginx 1.23.2's (1.22 has none): a TLV by name (`alpn`, `authority`, `unique_id`,
//! `netns`, `ssl`, `ssl_version`, `ssl_cn`, `ssl_cipher`, `ssl_sig_alg`, `ssl_key_alg`,
//! `ssl_verify`) or by number (`0xNN`, `ssl_0xNN`); a name nginx does not know is not found.
//! The header does not change `$remote_addr`: `real_ip_header proxy_protocol` does that.

use std::fmt::Write as _;

use shoal_http::proxy_protocol::TlvName;

use crate::conf::Command;
use crate::variables::Vars;

/// The variables' module: no directives (the `listen` parameter is the listen module's).
pub struct Module;

impl crate::http::modules::HttpModule for Module {
    type Loc = ();
    const DIRECTIVES: &'static [Command] = &[];
    const VARIABLES: &'static [&'static str] = &[
        "proxy_protocol_addr",
        "proxy_protocol_port",
        "proxy_protocol_server_addr",
        "proxy_protocol_server_port",
        "proxy_protocol_tlv_*",
    ];

    fn merge(_: &mut (), _: &()) {}

    fn variable(_: Option<&()>, name: &str, vars: &Vars<'_>, out: &mut String) -> Option<bool> {
        let Some(h) = vars.conn.and_then(|c| c.proxy.as_deref()) else {
            return Some(false);
        };
        let port = |out: &mut String, p: u16| {
            if p != 0 {
                let _ = write!(out, "{p}");
            }
        };
        Some(match name {
            "proxy_protocol_addr" => {
                out.push_str(&h.src_addr);
                true
            }
            "proxy_protocol_server_addr" => {
                out.push_str(&h.dst_addr);
                true
            }
            "proxy_protocol_port" => {
                port(out, h.src_port);
                true
            }
            "proxy_protocol_server_port" => {
                port(out, h.dst_port);
                true
            }
            _ => name
                .strip_prefix("proxy_protocol_tlv_")
                .and_then(TlvName::parse)
                .is_some_and(|n| h.tlv(n, out)),
        })
    }
}
