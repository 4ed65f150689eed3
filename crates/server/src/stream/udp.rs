//! `listen ... udp`: datagram sessions. A worker reads its UDP socket; the datagrams of one
//! client address belong to one session while it lasts, which has its own connected socket to
//! the peer it chose. Each answer goes back to the client from the listening socket.
//!
//! A session ends when the peer has sent `proxy_responses` datagrams per client datagram
//! (and the client has sent `proxy_requests` ones, when that is set), or after
//! `proxy_timeout` without a datagram either way; once `proxy_requests` datagrams came, the
//! client's next one starts a new session, as in nginx. Access, `limit_conn`, `set` and the
//! access log are the TCP sessions' ([`super::session`]).

use std::cell::RefCell;
use std::collections::HashMap;
use std::net::SocketAddr;
use std::os::fd::OwnedFd;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Instant;

use tokio::net::UdpSocket;
use tokio::sync::mpsc;

use super::session::{dynamic_upstream, real_peer, Ctx};
use super::vars::{Session, Tried, Try};
use super::Handler;
use crate::http::transport::ConnInfo;
use crate::listen::SocketKey;
use crate::log::Level;
use crate::upstream::conf::{PeerAddr, UpstreamConf};
use crate::upstream::{state, Input, PeerResult};
use crate::worker::{ConnGuard, Worker};

/// The largest datagram read.
const MAX_DATAGRAM: usize = 65535;

/// Datagrams a session has not yet passed on, at most: past it, a client's datagrams are
/// dropped (as a full socket buffer drops them), so a flood holds no more memory than this
/// per session, and sessions are bounded by `worker_connections`.
const QUEUED: usize = 64;

type Sessions = Rc<RefCell<HashMap<SocketAddr, mpsc::Sender<Vec<u8>>>>>;

/// Reads one listening UDP socket of this worker until the task is aborted.
pub async fn serve_socket(worker: Rc<Worker>, fd: OwnedFd, key: SocketKey) {
    let sock = match UdpSocket::from_std(std::net::UdpSocket::from(fd)) {
        Ok(s) => Rc::new(s),
        Err(e) => {
            crate::error_log!(Level::Alert, "cannot poll {}: {e}", key.addr);
            return;
        }
    };
    let local = sock.local_addr().ok();
    let sessions: Sessions = Rc::default();
    let mut buf = vec![0u8; MAX_DATAGRAM];
    loop {
        let (n, from) = match sock.recv_from(&mut buf).await {
            Ok(x) => x,
            Err(e) => {
                crate::error_log!(
                    Level::Alert,
                    "recvmsg() failed {}",
                    shoal_conf::os_error(&e)
                );
                tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                continue;
            }
        };
        let data = buf[..n].to_vec();
        let data = match sessions.borrow().get(&from) {
            Some(tx) => match tx.try_send(data) {
                Ok(()) | Err(mpsc::error::TrySendError::Full(_)) => continue,
                Err(mpsc::error::TrySendError::Closed(d)) => d,
            },
            None => data,
        };
        let limit = worker.current.borrow().config.events.worker_connections();
        if worker.active.get() >= limit {
            crate::error_log!(Level::Alert, "{limit} worker_connections are not enough");
            continue;
        }
        let generation = worker.current.borrow().clone();
        let Some(stream) = generation.config.stream.clone() else {
            continue;
        };
        let Some(srv) = stream.server_for(&key.addr, local, true).cloned() else {
            continue;
        };
        worker.active.set(worker.active.get() + 1);
        let guard = ConnGuard(worker.clone());
        let number = worker.next_connection_number();
        let (tx, rx) = mpsc::channel(QUEUED);
        sessions.borrow_mut().insert(from, tx);
        let (sock, sessions, key) = (sock.clone(), sessions.clone(), key.clone());
        tokio::task::spawn_local(crate::log::scoped(async move {
            crate::log::set_scope(srv.conf.error_log.as_ref());
            let info = ConnInfo {
                number,
                peer: Some(from),
                local,
                socket: key.addr.clone(),
                tls: None,
                proxy: None,
            };
            let peer = real_peer(&srv, &info);
            let mut cx = Ctx {
                info,
                peer,
                srv: &srv,
                stream: &stream,
                user: HashMap::new(),
                session: Session::new(true),
                worker: guard.0.clone(),
            };
            crate::conn_log!(
                Level::Info,
                number,
                "udp client {from} connected to {}",
                key.addr
            );
            run(&mut cx, &sock, from, data, rx, &sessions).await;
            let mut map = sessions.borrow_mut();
            if map.get(&from).is_some_and(|tx| tx.is_closed()) {
                map.remove(&from);
            }
            drop(map);
            cx.log();
            drop(guard);
        }));
    }
}

/// One datagram session, from its first datagram.
async fn run(
    cx: &mut Ctx<'_>,
    sock: &UdpSocket,
    client: SocketAddr,
    first: Vec<u8>,
    mut rx: mpsc::Receiver<Vec<u8>>,
    sessions: &Sessions,
) {
    cx.session.bytes_received.set(first.len() as u64);
    let _units = match cx.preaccess() {
        Ok(g) => g,
        Err(status) => {
            cx.session.status.set(status);
            return;
        }
    };
    let handler = cx.srv.handler.clone();
    let u = match handler {
        Some(Handler::Return(t)) => {
            let v = cx.eval(&t);
            if sock.send_to(v.as_bytes(), client).await.is_ok() {
                cx.session.bytes_sent.set(v.len() as u64);
            }
            return;
        }
        Some(Handler::Upstream(u)) => u,
        Some(Handler::Dynamic(t)) => match dynamic_upstream(cx, &t).await {
            Some(u) => u,
            None => return,
        },
        None => {
            cx.session.status.set(500);
            return;
        }
    };
    proxy(cx, sock, client, first, &mut rx, sessions, &u).await;
}

#[allow(clippy::too_many_arguments)]
async fn proxy(
    cx: &mut Ctx<'_>,
    sock: &UdpSocket,
    client: SocketAddr,
    first: Vec<u8>,
    rx: &mut mpsc::Receiver<Vec<u8>>,
    sessions: &Sessions,
    u: &Arc<UpstreamConf>,
) {
    let conf = &cx.srv.conf;
    // The key's bytes as nginx hashes them (`$binary_remote_addr`'s raw, not as text).
    let key = u.hash_key.as_ref().map(|t| cx.vars().eval_bytes(t));
    let input = Input {
        client: cx.peer.map(|p| p.ip()),
        key: key.as_deref().unwrap_or(&[]),
    };
    let mut attempt = state::start(u, input);
    let (up, addr) = loop {
        let now = Instant::now();
        let Some(peer) = state::pick(u, &mut attempt, now) else {
            crate::conn_log!(
                Level::Error,
                cx.info.number,
                "no live upstreams while connecting to upstream{}",
                cx.log_ctx()
            );
            cx.session.status.set(502);
            return;
        };
        let addr = u.addrs[peer].clone();
        cx.session.tries.borrow_mut().push(Try {
            addr: Tried::Peer(addr.clone()),
            ..Default::default()
        });
        cx.worker.next_connection_number();
        match connect(cx, &addr).await {
            Ok(s) => {
                cx.session
                    .with_try(|t| t.connect_time = Some(now.elapsed()));
                crate::conn_log!(
                    Level::Info,
                    cx.info.number,
                    "udp proxy {} connected to {addr}",
                    s.local_addr()
                        .map_or_else(|_| "-".to_string(), |a| a.to_string())
                );
                break (s, addr);
            }
            Err(m) => {
                crate::conn_log!(
                    Level::Error,
                    cx.info.number,
                    "{m} while connecting to upstream{}, upstream: \"{addr}\"",
                    cx.log_ctx()
                );
                if state::free(u, &mut attempt, PeerResult::Failed) {
                    crate::conn_log!(
                        Level::Warn,
                        cx.info.number,
                        "upstream server temporarily disabled while connecting to upstream{}, upstream: \"{addr}\"",
                        cx.log_ctx()
                    );
                }
                if !(conf.next_upstream() && attempt.tries() > 0) {
                    cx.session.status.set(502);
                    return;
                }
            }
        }
    };
    let started = Instant::now();
    let responses_per = conf.responses;
    let requests_max = conf.requests.unwrap_or(0);
    let timeout = conf.timeout();
    let mut requests = 0u64;
    let mut responses = 0u64;
    let mut failed = None;
    let mut timed_out = false;
    let mut pending = Some(first);
    let mut buf = vec![0u8; MAX_DATAGRAM];
    loop {
        if let Some(d) = pending.take() {
            match up.send(&d).await {
                Ok(n) => {
                    requests += 1;
                    cx.session.with_try(|t| t.bytes_sent += n as u64);
                }
                Err(e) => {
                    failed = Some(format!("send() failed {}", shoal_conf::os_error(&e)));
                    break;
                }
            }
            if requests_max > 0 && requests >= requests_max {
                // The client's next datagram starts a new session.
                sessions.borrow_mut().remove(&client);
                rx.close();
            }
        }
        if let Some(per) = responses_per {
            if responses >= per * requests && (requests_max == 0 || requests >= requests_max) {
                break;
            }
        }
        tokio::select! {
            d = rx.recv(), if !rx.is_closed() => {
                if let Some(d) = d {
                    cx.session.bytes_received.set(cx.session.bytes_received.get() + d.len() as u64);
                    pending = Some(d);
                }
            }
            r = up.recv(&mut buf) => match r {
                Ok(n) => {
                    responses += 1;
                    cx.session.with_try(|t| {
                        t.bytes_received += n as u64;
                        if t.first_byte_time.is_none() {
                            t.first_byte_time = Some(started.elapsed());
                        }
                    });
                    if sock.send_to(&buf[..n], client).await.is_ok() {
                        cx.session.bytes_sent.set(cx.session.bytes_sent.get() + n as u64);
                    }
                }
                Err(e) => {
                    failed = Some(format!("recv() failed {}", shoal_conf::os_error(&e)));
                    break;
                }
            },
            _ = tokio::time::sleep(timeout) => {
                timed_out = true;
                break;
            }
        }
    }
    cx.session
        .with_try(|t| t.session_time = Some(started.elapsed()));
    let (up_sent, up_received) = cx
        .session
        .tries
        .borrow()
        .last()
        .map_or((0, 0), |t| (t.bytes_sent, t.bytes_received));
    let short = responses_per.is_some_and(|per| responses < per * requests);
    if timed_out && short {
        // Fewer answers than `proxy_responses` expects: the peer failed (nginx's 502).
        failed = Some("upstream timed out (110: Connection timed out)".to_string());
        responses = 0;
    }
    if failed.is_none() {
        crate::conn_log!(
            Level::Info,
            cx.info.number,
            "udp {}, packets from/to client:{requests}/{responses}, bytes from/to client:{}/{}, bytes from/to upstream:{up_received}/{up_sent}",
            if timed_out { "timed out" } else { "done" },
            cx.session.bytes_received.get(),
            cx.session.bytes_sent.get()
        );
    }
    let outcome = match failed {
        Some(m) => {
            crate::conn_log!(
                Level::Error,
                cx.info.number,
                "{m} while proxying connection{}, upstream: \"{addr}\"",
                cx.log_ctx()
            );
            if responses == 0 {
                cx.session.status.set(502);
            }
            PeerResult::Failed
        }
        None => PeerResult::Success,
    };
    state::free(u, &mut attempt, outcome);
}

/// A UDP socket connected to a peer (no unix datagram peers), bound to `proxy_bind`'s address.
async fn connect(cx: &Ctx<'_>, addr: &PeerAddr) -> crate::error::Result<UdpSocket> {
    use crate::error::Error;
    use socket2::{Domain, Socket, Type};
    let PeerAddr::Inet(a) = addr else {
        return Err(Error::invalid(
            "unix datagram upstreams are not supported by shoal",
        ));
    };
    let failed = |e: std::io::Error| Error::failed("connect()", e);
    let s =
        Socket::new(Domain::for_address(*a), Type::DGRAM.nonblocking(), None).map_err(failed)?;
    if let Some(Some(bind)) = &cx.srv.conf.bind {
        let text = cx.eval(&bind.addr);
        crate::upstream::bind::apply(&s, &text, bind.transparent, *a, false)?;
    }
    // (An unbound socket gets its port here, as with bind(0.0.0.0:0).)
    s.connect(&(*a).into()).map_err(failed)?;
    UdpSocket::from_std(s.into()).map_err(failed)
}
