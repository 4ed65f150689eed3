//! The load-balancing core of nginx's `upstream` block: the peer list the `server` lines build
//! ([`peers`]) and the methods that choose a peer for a request ([`balance`]): smooth weighted
//! round robin, `least_conn`, `ip_hash`, `hash KEY [consistent]` and `random [two least_conn]`,
//! with nginx's `max_fails`/`fail_timeout` accounting and `backup` peers.
//!
//! Pure: no sockets, no resolver, no clock, no locks. It does not parse directives or evaluate
//! the `hash` key; the caller does, then owns one [`Balancer`] per upstream (per worker, as
//! nginx without a `zone`), passes `now` into every call, and maps a chosen peer index back to
//! the addresses it resolved for that `server` line. ([`bind`], `proxy_bind`'s socket setup
//! shared by http and stream, is the exception.)

pub mod balance;
pub mod bind;
pub mod conf;
pub use shoal_http::crc32;
pub mod peers;
pub mod resolve;
pub mod state;

pub use balance::{Attempt, Balancer, Input, Method};
pub use peers::{Peer, PeerResult, Peers, ServerEntry};

use std::fmt;

/// Why an `upstream` block cannot be balanced; the text is nginx's `[emerg]` message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum UpstreamError {
    /// No primary `server` line (none at all, or only `backup` ones).
    NoServers,
    /// `backup` with `hash`, `ip_hash` or `random`, which nginx refuses.
    BackupNotSupported,
    /// `weight=0` on the server with this address.
    InvalidWeight(String),
}

impl fmt::Display for UpstreamError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            UpstreamError::NoServers => f.write_str("no servers in upstream"),
            UpstreamError::BackupNotSupported => {
                f.write_str("balancing method does not support parameter \"backup\"")
            }
            UpstreamError::InvalidWeight(addr) => {
                write!(f, "invalid parameter \"weight=0\" for server \"{addr}\"")
            }
        }
    }
}

impl std::error::Error for UpstreamError {}
