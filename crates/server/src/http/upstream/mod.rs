//! nginx's upstream module (`ngx_http_upstream`): one implementation of what every upstream
//! protocol does the same way (choosing a peer, connecting, keep-alive pools, sending the
//! request, buffering the answer in memory and temporary files, `*_next_upstream`, timeouts,
//! `*_intercept_errors`, hidden and passed headers, the cache's hook, `$upstream_*`), and a
//! small codec per protocol: `proxy` (HTTP), `fastcgi`, `uwsgi`, `scgi`, `memcached`.
//!
//! - [`conf`]: the settings every protocol shares ([`UpstreamLoc`]) and their directives.
//! - [`protocol`]: what a protocol module supplies ([`protocol::Protocol`]); [`cgi_like`]
//!   the part FastCGI, uwsgi and SCGI share.
//! - [`run`]: one request's exchange; [`connect`] and [`send`] its connection and request.
//! - [`body`], [`relay`]: the answer's body, read while the client is written.
//! - [`answer`]: the answer's head turned into the client's; [`accel`]: `X-Accel-Redirect`.
//! - [`record`]: what `$upstream_*` report.
//! - [`store`]: `*_store`, answers kept as files.
//! - [`target`]: where a location's requests go.
//!
//! Runs on the worker; everything waits on sockets, nothing blocks.

pub mod accel;
pub mod answer;
pub mod body;
pub mod cgi;
pub mod cgi_like;
pub mod conf;
pub mod connect;
pub mod header;
pub mod params;
pub mod protocol;
pub mod record;
pub mod relay;
pub mod run;
pub mod send;
pub mod store;
pub mod target;

pub use conf::{NextUpstream, Proto, UpstreamLoc};
