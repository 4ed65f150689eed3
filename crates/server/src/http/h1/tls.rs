//! What a TLS address changes in an HTTP/1 connection's life, as nginx's `ngx_http_ssl_module`
//! and `ngx_http_request.c` do it: the handshake before the first request (bounded by the
//! default server's `client_header_timeout`, failures logged at nginx's level with `while SSL
//! handshaking`), and the checks on each request once its head is read: plain HTTP on a TLS
//! port (497), a client certificate that is missing (496) or failed (495), and a Host that is
//! not the name SNI negotiated when the Host's server verifies clients (421). A refused request
//! is answered as nginx answers it: its page (400 on the wire for 495–497), the server's
//! `error_page` for the code, then the connection closes.
//!
//! The server a request reads its head with is the one SNI chose when SNI named one (nginx's
//! `hc->conf_ctx`); the Host header then chooses the request's server as on a plain address.
//! Nothing here runs for a plain connection.

use std::net::SocketAddr;
use std::time::Duration;

use shoal_http::Request;
use tokio::net::TcpStream;

use super::Conn;
use crate::cycle::{AddrServers, Generation};
use crate::http::request::log_ctx;
use crate::http::transport::{ConnInfo, Transport};
use crate::http::ServerConf;
use crate::listen::SocketKey;
use crate::log::Level;
use crate::tls::conf::VerifyClient;
use crate::tls::{Accepted, TlsError};
use crate::worker::IdleSlot;

/// How a connection on a TLS address starts.
pub(super) enum Start {
    /// The handshake is over.
    Tls(Transport),
    /// The client speaks plain HTTP: its first request is answered 497, then it closes.
    Plain(Transport),
    /// The handshake failed, timed out, or a graceful stop came first: logged, closed.
    Closed,
}

/// Runs the TLS handshake of a connection accepted on a TLS address (`tls`), bounded by the
/// default server's `client_header_timeout`; a graceful stop closes it meanwhile.
pub(super) async fn start(
    tcp: TcpStream,
    key: &SocketKey,
    generation: &Generation,
    tls: &crate::tls::AddrTls,
    info: &mut ConnInfo,
    slot: &IdleSlot,
    worker: &crate::worker::Worker,
) -> std::io::Result<Start> {
    let default = generation
        .servers_for(&key.addr, info.local)
        .map(|r| generation.default_server(r));
    // As nginx, `tcp_nodelay` before the handshake: its flights are not held back by Nagle.
    if default.is_none_or(|s| s.loc.tcp_nodelay()) {
        let _ = tcp.set_nodelay(true);
    }
    let timeout = default.map_or(Duration::from_secs(60), |s| s.srv.client_header_timeout());
    let hs = tokio::time::timeout(timeout, crate::tls::accept(tcp, tls, info.peer));
    let mut hs = std::pin::pin!(hs);
    let outcome = loop {
        tokio::select! {
            biased;
            r = &mut hs => break r,
            _ = slot.wait(worker.wake_idle.epoch()) => {
                if worker.stopping.get() {
                    return Ok(Start::Closed);
                }
            }
        }
    };
    let fail = |e: TlsError| {
        crate::conn_log!(
            e.level,
            info.number,
            "{} while SSL handshaking, client: {}, server: {}",
            e.message,
            client(info.peer),
            key.addr
        );
        Ok(Start::Closed)
    };
    match outcome {
        Err(_) => fail(TlsError::timed_out()),
        Ok(Err(e)) => fail(e),
        Ok(Ok(Accepted::PlainHttp(tcp))) => Ok(Start::Plain(Transport::Tcp(tcp))),
        Ok(Ok(Accepted::Tls(stream))) => {
            let (conn, tls_info) = stream.into_parts();
            // `h2` (when offered) goes to the HTTP/2 driver; a client that chose nothing
            // speaks HTTP/1.1.
            info.tls = Some(Box::new(tls_info));
            Ok(Start::Tls(Transport::Tls(Box::new(conn))))
        }
    }
}

fn client(peer: Option<SocketAddr>) -> String {
    peer.map_or_else(|| "unix:".to_string(), |p| p.ip().to_string())
}

/// The SNI name as nginx keeps it for comparing with a Host: lowercased, no trailing dot.
fn sni_name(info: &ConnInfo) -> Option<String> {
    let name = info.tls.as_ref()?.server_name.as_deref()?;
    let name = name.trim_end_matches('.').to_ascii_lowercase();
    (!name.is_empty()).then_some(name)
}

impl Conn {
    /// The server that reads a head on a TLS address: the one SNI named, else the default.
    #[inline(never)]
    pub(super) fn head_server<'g>(
        &mut self,
        gen: &'g Generation,
        route: &AddrServers,
    ) -> &'g ServerConf {
        match self.sni_server(gen, route) {
            Some(s) => s,
            None => gen.default_server(route),
        }
    }

    /// The checks of a request on a TLS address (see [`Conn::tls_refusal`]): a refusal is
    /// noted for `handle`, and the connection closes after it. Returns the server that answers
    /// it when it is not `srv` (a 421 is the SNI server's). Out of line: the plain path only
    /// tests the flag.
    #[inline(never)]
    pub(super) fn tls_checks<'g>(
        &mut self,
        req: &Request,
        srv: &'g ServerConf,
        gen: &'g Generation,
        route: &AddrServers,
    ) -> Option<&'g ServerConf> {
        if self.requests > 1 {
            // `$ssl_early_data`: the first request is the one 0-RTT data can carry.
            if let Some(t) = self.info.tls.as_deref_mut() {
                t.early_data = false;
            }
        }
        let sni = self.sni_server(gen, route);
        let (code, by) = self.tls_refusal(req, srv, sni)?;
        self.refuse_with = Some(code);
        self.closing_after_request = true;
        (!std::ptr::eq(by, srv)).then_some(by)
    }

    /// The server SNI named among `route` (nginx's `hc->ssl_servername` and `hc->conf_ctx`):
    /// `None` without SNI or when no `server_name` matched it. Looked up once per generation.
    pub(super) fn sni_server<'g>(
        &mut self,
        gen: &'g Generation,
        route: &AddrServers,
    ) -> Option<&'g ServerConf> {
        let servers = &gen.config.http.as_ref()?.servers;
        match self.sni {
            Some((id, found)) if id == gen.id => return found.map(|i| &servers[i]),
            _ => {}
        }
        let found = sni_name(&self.info)
            .and_then(|name| crate::cycle::match_name(servers, route, &name).map(|(i, _)| i));
        self.sni = Some((gen.id, found));
        found.map(|i| &servers[i])
    }

    /// nginx's checks of a request on a TLS address once its head is read (see
    /// [`tls_refusal`]).
    pub(super) fn tls_refusal<'g>(
        &self,
        req: &Request,
        srv: &'g ServerConf,
        sni: Option<&'g ServerConf>,
    ) -> Option<(u16, &'g ServerConf)> {
        tls_refusal(&self.info, req, srv, sni)
    }
}

/// nginx's checks of a request on a TLS address once its head is read, for HTTP/1 and HTTP/2
/// alike: the code to answer with instead (logged here), and the server that answers it.
/// `srv` is the request's server (chosen by Host), `sni` the one SNI named.
pub fn tls_refusal<'g>(
    info: &ConnInfo,
    req: &Request,
    srv: &'g ServerConf,
    sni: Option<&'g ServerConf>,
) -> Option<(u16, &'g ServerConf)> {
    let refuse = |code: u16, srv: &'g ServerConf, what: &str| {
        crate::conn_log!(
            Level::Info,
            info.number,
            "{what} while reading client request headers{}",
            log_ctx(req, srv, info)
        );
        Some((code, srv))
    };
    // (Called for connections to a TLS address only.)
    let Some(tls) = info.tls.as_deref() else {
        return refuse(497, srv, "client sent plain HTTP request to HTTPS port");
    };
    let verify = srv.ssl.verify_client();
    if let Some(sni_srv) = sni {
        // The Host's server verifies clients: its name must be the one negotiated.
        let host = req.host().map(shoal_http::lossy).unwrap_or_default();
        if verify != VerifyClient::Off
            && sni_name(info).is_some_and(|n| !n.eq_ignore_ascii_case(&host))
        {
            return refuse(
                421,
                sni_srv,
                "client attempted to request the server name different from the one that was negotiated",
            );
        }
    }
    match (verify, &tls.client_verdict) {
        (VerifyClient::Off, _) => None,
        // `optional_no_ca` forgives an issuer nobody vouches for, nothing else.
        (mode, Some(v))
            if !(v.is_ok() || mode == VerifyClient::OptionalNoCa && v.is_unknown_issuer()) =>
        {
            refuse(
                495,
                srv,
                &format!(
                    "client SSL certificate verify error: ({}:{})",
                    v.code, v.reason
                ),
            )
        }
        (VerifyClient::On, _) if tls.client_chain.is_empty() => {
            refuse(496, srv, "client sent no required SSL certificate")
        }
        _ => None,
    }
}
