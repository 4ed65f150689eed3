//! TLS termination: nginx's `ngx_http_ssl_module` on rustls (aws-lc-rs provider).
//!
//! The configuration side ([`conf`]) reads the directives; [`finish`] (called once by
//! `HttpConf::finish`) merges them http → server, reads every certificate, key, CA, CRL and
//! ticket key afresh (so a reload is a fresh read, and a bad file is an `[emerg]`), runs nginx's
//! checks, and builds an [`AddrTls`] per TLS address. The connection side
//! ([`handshake::accept`]) takes a TCP connection accepted on such an address, tells plain HTTP
//! from TLS, chooses the server by SNI, completes the handshake and returns a [`TlsStream`]
//! with its [`TlsInfo`]. This module knows nothing of HTTP: the transport calls it, and the
//! request path reads [`TlsInfo`].
//!
//! As in nginx, the protocols, ciphers and curves of an address are those of its default
//! server (OpenSSL settles them before the SNI callback runs); the certificate, client
//! verification, session cache and tickets are those of the server SNI chose.

pub mod build;
pub mod certs;
pub mod ciphers;
pub mod conf;
#[cfg(test)]
mod conf_tests;
pub mod conn;
pub mod error;
pub mod handshake;
pub mod info;
pub mod ocsp;
mod openssl_conf;
mod select;
pub mod session;
pub mod stapling;
pub mod stream;
pub mod verify;

use std::collections::BTreeMap;
use std::sync::Arc;

pub use build::{AddrTls, ServerTls};
pub use conf::{SslConf, DIRECTIVES};
pub use conn::TlsConn;
pub use error::TlsError;
pub use handshake::{accept, Accepted};
pub use info::TlsInfo;
pub(crate) use openssl_conf::{apply_conf_command as openssl_conf_command, parse_groups};
pub use stream::TlsStream;

use crate::listen::ListenAddr;

/// The ssl state of an http block: its directives (the defaults its servers inherit) and,
/// once the configuration is finished, a context per address that speaks TLS.
#[derive(Clone, Debug, Default)]
pub struct HttpSsl {
    pub conf: SslConf,
    pub addrs: BTreeMap<ListenAddr, Arc<AddrTls>>,
}

impl HttpSsl {
    /// The TLS context of an address (a wildcard socket's own address, or the specific one the
    /// connection arrived on: the same rule as [`crate::cycle::Generation::servers_for`]).
    pub fn for_addr(
        &self,
        socket: &ListenAddr,
        local: Option<std::net::SocketAddr>,
    ) -> Option<&Arc<AddrTls>> {
        if let Some(l) = local {
            if let Some(t) = self.addrs.get(&ListenAddr::Inet(l)) {
                return Some(t);
            }
        }
        self.addrs.get(socket)
    }
}

pub use build::finish;
