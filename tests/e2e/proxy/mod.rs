//! The reverse proxy end to end: the real binary in front of real upstream servers
//! (`common/upstream.rs`) — what reaches the upstream, what reaches the client, keep-alive
//! reuse counted at the upstream, the balancing methods' distributions, unix sockets, WebSocket
//! upgrades, and every failure with nginx's status and error-log line.
//!
//! Here `start`, the one server every test begins with; the tests are in `relay` (requests and
//! answers as they pass), `keepalive`, `peers` (balancing and the peers a failure takes out),
//! `failures`, `buffering` and `tunnels`.

use crate::common::*;

mod buffering;
mod failures;
mod keepalive;
mod peers;
mod relay;
mod tunnels;

/// shoal with `http_extra` in the http block and `server` lines in the one server.
fn start(port: u16, http_extra: &str, server: &str) -> Shoal {
    let conf = format!(
        "daemon off;\nworker_processes 1;\nerror_log logs/error.log info;\n\
         events {{ worker_connections 1024; }}\n\
         http {{\n    access_log logs/access.log;\n{http_extra}\n    server {{\n        \
         listen 127.0.0.1:{port};\n        server_name localhost;\n{server}\n    }}\n}}\n"
    );
    Shoal::start(&conf, port)
}
