//! A connection's start: its socket taken into the runtime, then what comes before any
//! request: a PROXY protocol header (`listen ... proxy_protocol`) and, on a TLS address, the
//! handshake (`tls.rs`).

use std::os::fd::OwnedFd;

use tokio::net::{TcpStream, UnixStream};

use super::{proxy_protocol, tls};
use crate::cycle::Generation;
use crate::http::transport::{ConnInfo, Transport};
use crate::listen::{ListenAddr, SocketKey};
use crate::worker::ConnGuard;

/// The connection's transport and what it knows of itself: a unix or TCP socket, or on a
/// TLS address the connection once its handshake is over (`None`: it failed, logged). The
/// flag: the address is a TLS one (the client may have spoken plain HTTP to it).
pub(super) async fn make_stream(
    fd: OwnedFd,
    key: &SocketKey,
    generation: &Generation,
    number: u64,
    slot: &crate::worker::IdleSlot,
    guard: &ConnGuard,
) -> std::io::Result<Option<(Transport, ConnInfo, bool)>> {
    let mut info = ConnInfo {
        number,
        peer: None,
        local: None,
        socket: key.addr.clone(),
        tls: None,
        proxy: None,
    };
    let plain = match key.addr {
        ListenAddr::Unix(_) => {
            let s = std::os::unix::net::UnixStream::from(fd);
            Transport::Unix(UnixStream::from_std(s)?)
        }
        ListenAddr::Inet(_) => {
            let s = std::net::TcpStream::from(fd);
            let s = TcpStream::from_std(s)?;
            info.peer = s.peer_addr().ok();
            info.local = s.local_addr().ok();
            Transport::Tcp(s)
        }
    };
    // `listen ... proxy_protocol`: the header comes first, before TLS's handshake too, within
    // the default server's `client_header_timeout` and `client_header_buffer_size`.
    let route = generation.servers_for(&key.addr, info.local);
    if let Some(r) = route.filter(|r| r.proxy_protocol) {
        let srv = &generation.default_server(r).srv;
        let (timeout, max) = (
            srv.client_header_timeout(),
            srv.limits().client_header_buffer_size,
        );
        let read = proxy_protocol::read(&plain, &mut info, slot, &guard.0, timeout, max);
        if !Box::pin(read).await {
            return Ok(None);
        }
    }
    let tls = generation
        .config
        .http
        .as_ref()
        .filter(|h| !h.ssl.addrs.is_empty())
        .and_then(|h| h.ssl.for_addr(&key.addr, info.local));
    let plain = match (plain, tls) {
        // `listen unix:... ssl`: the TLS layer drives the stream socket through tokio's
        // TcpStream (reads, writes, peeks and readiness are any stream socket's).
        (Transport::Unix(s), Some(_)) => {
            let fd = std::os::fd::OwnedFd::from(s.into_std()?);
            Transport::Tcp(TcpStream::from_std(std::net::TcpStream::from(fd))?)
        }
        (plain, _) => plain,
    };
    match (plain, tls) {
        (Transport::Tcp(s), Some(tls)) => {
            // (Boxed: the handshake's state is kilobytes, and inline it would size and shape
            // every connection's task, a plain one's too.)
            let start = Box::pin(tls::start(
                s, key, generation, tls, &mut info, slot, &guard.0,
            ));
            Ok(match start.await? {
                tls::Start::Tls(t) | tls::Start::Plain(t) => Some((t, info, true)),
                tls::Start::Closed => None,
            })
        }
        (plain, _) => Ok(Some((plain, info, false))),
    }
}
