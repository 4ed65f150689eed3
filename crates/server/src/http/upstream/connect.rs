//! A connection to a peer: a kept-alive one from the worker's cache, or a new one (TCP with
//! `*_bind` and `*_socket_keepalive`, a unix socket, TLS for an https upstream), within
//! `*_connect_timeout`; failures worded as nginx's log lines.

use std::time::{Duration, Instant};

use super::run::{Fail, Handshake};
use super::UpstreamLoc;
use crate::deadline::Timer;
use crate::http::transport::Transport;
use crate::upstream::conf::{PeerAddr, UpstreamConf};
use crate::upstream::state;

/// Connects to a peer: a kept-alive connection when one is cached (and `cached`, the try's
/// start, allows), else a new one. A cached one comes with its timer, when it was opened and how many requests
/// it carried; a new one with how much of `first` (the request's first write) it has sent
/// already.
#[allow(clippy::type_complexity, clippy::too_many_arguments)]
pub(crate) async fn connect(
    upstream: &UpstreamConf,
    peer: usize,
    addr: &PeerAddr,
    conf: &UpstreamLoc,
    bind: Option<(&str, bool)>,
    cached: Option<Instant>,
    first: &[u8],
    tls: Option<&Handshake<'_>>,
) -> Result<(Transport, Option<(Timer, Instant, u64)>, usize), Fail> {
    if let Some(now) = cached {
        if let Some(r) = state::take_idle(upstream, peer, now, tls.is_some()) {
            return Ok((r.stream, Some((r.timer, r.born, r.requests)), 0));
        }
    }
    let timeout = conf.connect_timeout();
    match addr {
        PeerAddr::Inet(a) => {
            let Some(h) = tls else {
                let (s, sent) = connect_tcp(*a, conf, bind, first, timeout).await?;
                return Ok((Transport::Tcp(s), None, sent));
            };
            // TLS: the handshake first (nothing of the request goes with the connection),
            // bounded by `proxy_connect_timeout` as nginx bounds it.
            let (s, _) = connect_tcp(*a, conf, bind, &[], timeout).await?;
            tls_handshake(s, h, timeout).await
        }
        PeerAddr::Unix(p) => {
            let s = match tokio::time::timeout(timeout, tokio::net::UnixStream::connect(p)).await {
                Err(_) => return Err(connect_timed_out()),
                Ok(Err(e)) => return Err(connect_failed(e)),
                Ok(Ok(s)) => s,
            };
            let Some(h) = tls else {
                return Ok((Transport::Unix(s), None, 0));
            };
            // `proxy_pass https://unix:...`: the TLS layer drives a stream socket through
            // tokio's TcpStream, whose reads, writes, peeks and readiness are those of any
            // stream socket; only its addresses and TCP options (unused here) differ.
            let fd = s
                .into_std()
                .map(std::os::fd::OwnedFd::from)
                .map_err(connect_failed)?;
            let s = tokio::net::TcpStream::from_std(std::net::TcpStream::from(fd))
                .map_err(connect_failed)?;
            tls_handshake(s, h, timeout).await
        }
    }
}

/// The TLS handshake over a connected socket, bounded by `proxy_connect_timeout` as nginx
/// bounds it.
async fn tls_handshake(
    s: tokio::net::TcpStream,
    h: &Handshake<'_>,
    timeout: Duration,
) -> Result<(Transport, Option<(Timer, Instant, u64)>, usize), Fail> {
    match tokio::time::timeout(
        timeout,
        crate::http::proxy::ssl::handshake(s, h.tls, h.host, h.vars),
    )
    .await
    {
        Err(_) => Err(Fail::Timeout(
            "upstream timed out (110: Connection timed out) while SSL handshaking to upstream"
                .into(),
        )),
        Ok(Err(m)) => Err(Fail::Error(m.into())),
        Ok(Ok(c)) => Ok((Transport::Tls(Box::new(c)), None, 0)),
    }
}

fn connect_timed_out() -> Fail {
    Fail::Timeout(
        "upstream timed out (110: Connection timed out) while connecting to upstream".into(),
    )
}

fn connect_failed(e: std::io::Error) -> Fail {
    Fail::Error(format!(
        "connect() failed {} while connecting to upstream",
        shoal_conf::os_error(&e)
    ))
}

/// A new TCP connection to `a` (with `proxy_bind`'s address as evaluated for the request, and
/// whether it is `transparent`, and `proxy_socket_keepalive`), and how much of `first` it has
/// sent.
///
/// A non-blocking connect() says EINPROGRESS even when the handshake is already over, as it
/// is to a near peer (loopback: the peer's answer is processed before connect() returns). So
/// `first` is written at once: taken, the connection is up and a turn of the event loop (wait
/// for writable, then getsockopt(SO_ERROR)) is saved; EAGAIN, it is still being made and is
/// waited for as nginx does, within `proxy_connect_timeout`. An error from that write is the
/// connection's own (refused, reset, unreachable: what nginx reads with SO_ERROR), and is
/// logged as nginx logs it, `connect() failed (111: Connection refused)`.
async fn connect_tcp(
    a: std::net::SocketAddr,
    conf: &UpstreamLoc,
    bind: Option<(&str, bool)>,
    first: &[u8],
    timeout: Duration,
) -> Result<(tokio::net::TcpStream, usize), Fail> {
    use socket2::{Domain, Socket, Type};
    use std::io::Write;
    let socket = Socket::new(Domain::for_address(a), Type::STREAM.nonblocking(), None)
        .map_err(connect_failed)?;
    if conf.socket_keepalive.unwrap_or(false) {
        let _ = socket.set_keepalive(true);
    }
    if let Some((text, transparent)) = bind {
        crate::upstream::bind::apply(&socket, text, transparent, a, true)
            .map_err(|m| Fail::Error(format!("{m} while connecting to upstream")))?;
    }
    match socket.connect(&a.into()) {
        Ok(()) => {}
        Err(e) if e.raw_os_error() == Some(libc::EINPROGRESS) => {}
        Err(e) => return Err(connect_failed(e)),
    }
    let std = std::net::TcpStream::from(socket);
    let sent = match (&std).write(first) {
        Ok(n) if n > 0 => Some(n),
        Ok(_) => None,
        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => None,
        Err(e) => return Err(connect_failed(e)),
    };
    let stream = tokio::net::TcpStream::from_std(std).map_err(connect_failed)?;
    if let Some(n) = sent {
        return Ok((stream, n));
    }
    match tokio::time::timeout(timeout, stream.writable()).await {
        Err(_) => Err(connect_timed_out()),
        Ok(Err(e)) => Err(connect_failed(e)),
        Ok(Ok(())) => match stream.take_error() {
            Ok(None) => Ok((stream, 0)),
            Ok(Some(e)) | Err(e) => Err(connect_failed(e)),
        },
    }
}
