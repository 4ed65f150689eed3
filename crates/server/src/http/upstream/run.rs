//! One request's exchange with its upstream, whatever the protocol: choose a peer (the
//! upstream's balancer), take a kept-alive connection to it or connect
//! (`*_connect_timeout`), send the request the protocol wrote (`*_send_timeout`), read the
//! answer's head with the protocol's decoder (`*_read_timeout`, at most `*_buffer_size`), and
//! let the protocol turn it into a reply whose body stays on the upstream connection until
//! the client is written.
//!
//! A failure is logged with nginx's words and context, counted against the peer
//! (`max_fails`/`fail_timeout`), and the next peer is tried while `*_next_upstream` allows
//! (a request that was already sent is not retried unless idempotent or `non_idempotent` is
//! given); when none is left, the answer is 502 (504 after a timeout). A kept-alive connection
//! the upstream closed before answering is not the peer's fault: the request is sent again on
//! a new connection.

use std::cell::RefCell;
use std::rc::Rc;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use bytes::BytesMut;

use super::body::UpstreamBody;
use super::connect::connect;
use super::protocol::{Encoded, HeadDecoder, HeadError, Protocol};
use super::record::Record;
use super::send::{first_write, send_request, SendError};
use super::{NextUpstream, UpstreamLoc};
use crate::deadline::Timer;
use crate::http::client_body::{BodyToSend, ClientBody, Failure};
use crate::http::reply::{Outcome, Reply};
use crate::http::request::{ClientWatch, Req};
use crate::http::rewrite;
use crate::http::transport::Transport;
use crate::http::LocConf;
use crate::log::Level;
use crate::upstream::conf::{PeerAddr, UpstreamConf};
use crate::upstream::{state, Input, PeerResult};

/// A client's body that could not be read ends the request as nginx ends it: logged, then
/// its 400 or 413 (`error_page` applies), or closed without an answer (a client gone, or
/// silent past `client_body_timeout`).
/// The client closed while the upstream was asked (`proxy_ignore_client_abort off`): nginx's
/// line, a 499 in the log, and the peer freed as a success (it did nothing wrong).
pub(crate) fn client_gone(
    r: &Req<'_, '_>,
    record: &RefCell<Record>,
    upstream: &UpstreamConf,
    attempt: &mut crate::upstream::Attempt,
) -> Outcome {
    crate::conn_log!(
        Level::Info,
        r.info.number,
        "client prematurely closed connection, so upstream connection is closed too \
         while reading response header from upstream{}",
        record.borrow().log_ctx(r.req, r.srv, r.info)
    );
    record.borrow_mut().fail(499);
    state::free(upstream, attempt, PeerResult::Success);
    Outcome::Final(Reply::boxed(499))
}

/// [`client_gone`]'s twin for a client's body that failed: the peer freed as a success, the
/// request ended as [`body_failed`] says.
pub(crate) fn client_body_failed(
    r: &Req<'_, '_>,
    f: Failure,
    upstream: &UpstreamConf,
    attempt: &mut crate::upstream::Attempt,
) -> Outcome {
    state::free(upstream, attempt, PeerResult::Success);
    body_failed(r, f)
}

pub(crate) fn body_failed(r: &Req<'_, '_>, f: Failure) -> Outcome {
    crate::http::client_body::log_failure(f, r);
    if f.silent() {
        let mut reply = Reply::boxed(f.status());
        reply.terminate = true;
        Outcome::Final(reply)
    } else {
        Outcome::Error(f.status())
    }
}

/// What the cache asks of a request it sends upstream (nothing without a cache).
#[derive(Clone, Copy, Default)]
pub struct Cached<'a> {
    /// `*_cache_revalidate`: the expired object's Last-Modified and ETag.
    pub validators: Option<&'a (Option<String>, Option<String>)>,
    /// The answer may be stored: the client's `Range` and `If-*` stay home (nginx's
    /// `u->cacheable`).
    pub cacheable: bool,
}

/// Why one try failed.
pub(crate) enum Fail {
    /// The client closed while the answer was awaited: not the upstream's fault.
    ClientGone,
    /// The client's streamed body was malformed (400), over `client_max_body_size` (413), or
    /// timed out (408).
    ClientBody(Failure),
    /// `error`: refused, reset, closed early (502).
    Error(String),
    /// `timeout` (504).
    Timeout(String),
    /// `invalid_header` (502).
    Invalid(String),
}

/// Runs the exchange for a request in a location whose content handler is an upstream
/// protocol's (`p`). Returns what it came to and the record of the exchange (for
/// `$upstream_*`), if it got as far as choosing an upstream.
#[allow(clippy::too_many_arguments)]
pub async fn handle<P: Protocol>(
    r: &Req<'_, '_>,
    lc: &LocConf,
    rw: &rewrite::State,
    p: P,
    method: &str,
    client_body: &ClientBody<'_>,
    streams_chunked: bool,
    validators: Option<&(Option<String>, Option<String>)>,
) -> (Outcome, Option<Rc<RefCell<Record>>>) {
    let conf = P::PROTO.conf(lc);
    // The body first (read whole, or set to stream with `*_request_buffering off`), as
    // nginx reads it before it starts the upstream.
    let body = match client_body
        .for_upstream(lc, r, conf.request_buffering(), streams_chunked)
        .await
    {
        Ok(b) => b,
        Err(f) => return (body_failed(r, f), None),
    };
    let mut record = None;
    let handled = run(r, lc, rw, &p, method, &body, validators, &mut record).await;
    (handled, record)
}

#[allow(clippy::too_many_arguments)]
async fn run<P: Protocol>(
    r: &Req<'_, '_>,
    lc: &LocConf,
    rw: &rewrite::State,
    p: &P,
    method: &str,
    body: &BodyToSend<'_, '_>,
    validators: Option<&(Option<String>, Option<String>)>,
    record_out: &mut Option<Rc<RefCell<Record>>>,
) -> Outcome {
    let conf = P::PROTO.conf(lc);
    let vars = r.vars_rw(rw, lc);
    let mut dest = match p.dest(r, &vars).await {
        Ok(d) => d,
        Err(o) => return o,
    };
    // `server ... resolve` lines: the peers their names have now.
    if dest.upstream.resolving.is_some() {
        match crate::upstream::resolve::current(&dest.upstream).await {
            Some(u) => dest.upstream = u,
            None => {
                crate::conn_log!(
                    Level::Error,
                    r.info.number,
                    "no live upstreams while connecting to upstream{}",
                    r.log_ctx()
                );
                return Outcome::Error(502);
            }
        }
    }
    // An https upstream: the location's TLS settings, built with the configuration.
    let tls = match (dest.tls, p.tls()) {
        (false, _) => None,
        (true, Some(t)) => Some(Handshake {
            tls: t,
            host: &dest.host,
            vars: &vars,
        }),
        (true, None) => return Outcome::Error(500),
    };

    let record = Record::start(&dest.host, dest.port);
    record.borrow_mut().scheme = dest.scheme;
    record.borrow_mut().cache_validators = validators.cloned();
    *record_out = Some(record.clone());

    // The request, written once for every try.
    let encoded = {
        let rec = record.borrow();
        let mut v = r.vars_rw(rw, lc);
        v.upstream = Some(&rec);
        match p.encode(r, &v, &dest, method, body) {
            Ok(e) => e,
            Err(o) => return o,
        }
    };
    let first = first_write(&encoded, body);
    let upstream = dest.upstream.clone();
    // The key's bytes as nginx hashes them (`$binary_remote_addr`'s raw, not as text).
    let hash_key = upstream.hash_key.as_ref().map(|t| vars.eval_bytes(t));
    let bind = match &conf.bind {
        Some(Some(b)) => Some((vars.eval(&b.addr), b.transparent)),
        _ => None,
    };
    let input = Input {
        client: r.peer().map(|p| p.ip()),
        key: hash_key.as_deref().unwrap_or(&[]),
    };
    let mut attempt = state::start(&upstream, input);
    let next = conf.next_upstream();
    let max_tries = conf.next_upstream_tries();
    let deadline = match conf.next_upstream_timeout() {
        Duration::ZERO => None,
        t => Some(Instant::now() + t),
    };
    let idempotent = !matches!(method, "POST" | "LOCK" | "PATCH");
    let mut tries = 0u64;
    let mut last_status = 502;
    record.borrow_mut().uri = dest.uri;
    loop {
        // One clock read for the choice, the try's start and the keep-alive cache's expiry.
        let now = Instant::now();
        let Some(peer) = state::pick(&upstream, &mut attempt, now) else {
            let uri_text = shoal_http::lossy(&record.borrow().uri).into_owned();
            crate::conn_log!(
                Level::Error,
                r.info.number,
                "no live upstreams while connecting to upstream{}",
                ctx_with_upstream(r, &format!("{}://{}{uri_text}", dest.scheme, upstream.name))
            );
            // nginx's `NGX_HTTP_UPSTREAM_FT_NOLIVE`: 502, whatever failed before.
            let _ = last_status;
            return Outcome::Error(502);
        };
        tries += 1;
        let addr = &upstream.addrs[peer];
        {
            let mut rec = record.borrow_mut();
            rec.begin(addr.clone(), now);
            // `$upstream_last_server_name`: the `server` line's name, or `proxy_pass`'s host.
            let name = match upstream.implicit {
                true => upstream.name.as_str(),
                false => upstream.entries[peer].addr.as_str(),
            };
            rec.last_server.clear();
            rec.last_server.push_str(name);
        }
        let (result, sent_any) = exchange(
            Peer {
                upstream: &upstream,
                peer,
                addr,
                bind: bind.as_ref().map(|(t, on)| (t.as_str(), *on)),
            },
            conf,
            &encoded,
            &first,
            body,
            || p.head_decoder(r, method),
            &record,
            r,
            idempotent || next.has(NextUpstream::NON_IDEMPOTENT),
            tls.as_ref(),
        )
        .await;
        let fail = match result {
            Ok(mut answer) => {
                answer.body.proto = P::PROTO;
                let status = answer.status;
                let bit = NextUpstream::of_status(status);
                let more = attempt.tries() > 1
                    && next.has(bit)
                    && !body.consumed()
                    && (idempotent || next.has(NextUpstream::NON_IDEMPOTENT))
                    && (max_tries == 0 || tries < max_tries)
                    && deadline.is_none_or(|d| Instant::now() < d);
                if more {
                    // Counted as a failure but for 403 and 404 (nginx's rule).
                    let outcome = if matches!(status, 403 | 404) {
                        PeerResult::Success
                    } else {
                        PeerResult::Failed
                    };
                    state::free(&upstream, &mut attempt, outcome);
                    drop(answer);
                    record.borrow_mut().finish(false);
                    last_status = status;
                    continue;
                }
                state::free(&upstream, &mut attempt, PeerResult::Success);
                if answer.intercept {
                    record.borrow_mut().finish(false);
                    return Outcome::Error(status);
                }
                if conf.intercept_errors()
                    && status >= 300
                    && lc
                        .error_page
                        .as_deref()
                        .is_some_and(|p| p.iter().any(|e| e.codes.contains(&status)))
                {
                    let mut rec = record.borrow_mut();
                    rec.finish(false);
                    // nginx keeps a 401's `WWW-Authenticate` for the error page's answer.
                    if status == 401 {
                        if let Some(v) = answer.head.header("www-authenticate") {
                            rec.carry.push((
                                "WWW-Authenticate".to_string(),
                                shoal_http::lossy(v).into_owned(),
                            ));
                        }
                    }
                    return Outcome::Error(status);
                }
                let accel = super::accel::target(&answer.head, conf);
                let mut reply = p.reply(answer, r, &record);
                if let Some(target) = accel {
                    return super::accel::redirect(r, target, reply, conf, &record);
                }
                // `*_store`: a 200 answer kept as a file as it is read.
                if conf.store.enabled() {
                    let vars = r.vars_rw(rw, lc);
                    let conn = r.info.number;
                    super::store::attach_for(&mut reply, lc, conf, &rw.uri, &vars, conn);
                }
                return Outcome::Final(reply);
            }
            Err(f) => f,
        };
        let (status, bit, message) = match fail {
            Fail::ClientGone => return client_gone(r, &record, &upstream, &mut attempt),
            Fail::ClientBody(f) => return client_body_failed(r, f, &upstream, &mut attempt),
            Fail::Error(m) => (502, NextUpstream::ERROR, m),
            Fail::Timeout(m) => (504, NextUpstream::TIMEOUT, m),
            Fail::Invalid(m) => (502, NextUpstream::INVALID_HEADER, m),
        };
        record.borrow_mut().last_fail = bit;
        // (`fastcgi_catch_stderr` logged its stderr line already.)
        if !message.is_empty() {
            crate::conn_log!(
                Level::Error,
                r.info.number,
                "{message}{}",
                record.borrow().log_ctx(r.req, r.srv, r.info)
            );
        }
        record.borrow_mut().fail(status);
        state::free(&upstream, &mut attempt, PeerResult::Failed);
        last_status = status;
        let more = attempt.tries() > 0
            && next.has(bit)
            && !body.consumed()
            && (!sent_any || idempotent || next.has(NextUpstream::NON_IDEMPOTENT))
            && (max_tries == 0 || tries < max_tries)
            && deadline.is_none_or(|d| Instant::now() < d);
        if !more {
            return Outcome::Error(status);
        }
    }
}

/// Whether the client closed its connection (`Ready(true)`) or sent more (`Ready(false)`: the
/// bytes stay unread), as [`Stream::peer_closed`] waits for it, but polled through the socket's
/// one reader slot: no waiter is queued on the socket and taken off again per wait.
pub(crate) fn poll_client_closed(c: ClientWatch<'_>, cx: &mut Context<'_>) -> Poll<bool> {
    let c = match c {
        ClientWatch::Conn(t) => t,
        // An HTTP/2 stream: the client reset it (or the connection is gone).
        ClientWatch::Stream(s) => return s.borrow_mut().poll_reset(cx).map(|_| true),
    };
    loop {
        match c.poll_read_ready(cx) {
            Poll::Pending => return Poll::Pending,
            Poll::Ready(Err(_)) => return Poll::Ready(true),
            Poll::Ready(Ok(())) => {}
        }
        // A readiness the peek finds stale is cleared; the next poll waits anew.
        match c.try_peek_closed() {
            Ok(eof) => return Poll::Ready(eof),
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => continue,
            Err(_) => return Poll::Ready(true),
        }
    }
}

/// What a connection to an https upstream needs for its handshake: the location's TLS
/// settings, the `proxy_pass` host (the default `proxy_ssl_name`), the request's variables.
pub struct Handshake<'a> {
    pub tls: &'a crate::http::proxy::ssl::UpstreamTls,
    pub host: &'a str,
    pub vars: &'a crate::variables::Vars<'a>,
}

/// `, client: ..., server: ..., request: "...", upstream: "...", host: "..."`.
fn ctx_with_upstream(r: &Req<'_, '_>, upstream: &str) -> String {
    r.log_ctx_upstream(upstream)
}

/// An answer's head, read; its body still on the connection.
pub struct Answer {
    pub status: u16,
    pub reason: Option<String>,
    pub head: shoal_http::upstream::UpstreamHead,
    /// Boxed where it is made: it is large, and it is boxed in the reply in the end.
    pub body: Box<UpstreamBody>,
    pub upgrade: bool,
    /// The layer answers with its own page of this status (memcached's miss).
    pub intercept: bool,
}

/// The peer a try goes to.
#[derive(Clone, Copy)]
struct Peer<'a> {
    upstream: &'a Arc<UpstreamConf>,
    peer: usize,
    addr: &'a PeerAddr,
    /// `proxy_bind`'s address for this request, and whether it is `transparent`.
    bind: Option<(&'a str, bool)>,
}

/// One try: connect, send, read the head. Returns the answer or the failure, and whether any
/// of the request reached the upstream (a non-idempotent request is then not retried).
#[allow(clippy::too_many_arguments)]
async fn exchange<H: HeadDecoder>(
    to: Peer<'_>,
    conf: &UpstreamLoc,
    encoded: &Encoded,
    first: &[u8],
    body: &BodyToSend<'_, '_>,
    decoder: impl Fn() -> H,
    record: &Rc<RefCell<Record>>,
    r: &Req<'_, '_>,
    resend_ok: bool,
    tls: Option<&Handshake<'_>>,
) -> (Result<Answer, Fail>, bool) {
    // A cached connection may have been closed by the upstream just now: then the request
    // goes once more on a new connection, and the failure is not the peer's.
    let mut fresh_only = false;
    let start = record.borrow_mut().last().start;
    loop {
        let cached = (!fresh_only).then_some(start);
        let (stream, reused, sent) = match connect(
            to.upstream,
            to.peer,
            to.addr,
            conf,
            to.bind,
            cached,
            first,
            tls,
        )
        .await
        {
            Ok(x) => x,
            Err(f) => return (Err(f), false),
        };
        let was_cached = reused.is_some();
        // A cached connection took no time to get (nginx reports 0.000 for it).
        let (timer, born, requests, connect) = match reused {
            Some((timer, born, requests)) => (timer, born, requests, Duration::ZERO),
            None => {
                let now = Instant::now();
                (Timer::new(), now, 0, now.saturating_duration_since(start))
            }
        };
        record.borrow_mut().last().connect = Some(connect);
        let conn = Conn {
            born,
            requests: requests + 1,
        };
        match send_and_read(
            (stream, timer),
            conf,
            encoded,
            (first, sent),
            body,
            decoder(),
            record,
            to,
            conn,
            r,
        )
        .await
        {
            Ok(a) => return (Ok(a), true),
            Err((f, nothing_read)) => {
                // Sent again only when nginx would send it to another peer: an idempotent
                // method (or `non_idempotent`), and a body that can be sent twice.
                if was_cached
                    && nothing_read
                    && resend_ok
                    && !body.consumed()
                    && matches!(f, Fail::Error(_))
                {
                    crate::conn_log!(
                        Level::Debug,
                        r.info.number,
                        "a kept-alive upstream connection was closed, sending again"
                    );
                    fresh_only = true;
                    continue;
                }
                return (Err(f), true);
            }
        }
    }
}

/// A connection's age and use, for the keep-alive cache.
#[derive(Clone, Copy)]
struct Conn {
    born: Instant,
    requests: u64,
}

/// Sends the request on `stream` (`first`, the request's first write, of which `sent` bytes
/// went out as the connection was made, then the rest) and reads the answer's head. On failure,
/// whether nothing at all was read back.
#[allow(clippy::too_many_arguments)]
async fn send_and_read<H: HeadDecoder>(
    (mut stream, mut timer): (Transport, Timer),
    conf: &UpstreamLoc,
    encoded: &Encoded,
    (first, sent): (&[u8], usize),
    body: &BodyToSend<'_, '_>,
    mut decoder: H,
    record: &Rc<RefCell<Record>>,
    to: Peer<'_>,
    conn: Conn,
    r: &Req<'_, '_>,
) -> Result<Answer, (Fail, bool)> {
    let send_timeout = conf.send_timeout();
    // `*_send_timeout` bounds each wait for the upstream to take more, not the transfer.
    let result = send_request(
        &mut stream,
        &mut timer,
        first,
        sent,
        encoded,
        body,
        send_timeout,
    )
    .await;
    match result {
        Err(SendError::TimedOut) => {
            return Err((
                Fail::Timeout(
                    "upstream timed out (110: Connection timed out) while sending request to \
                     upstream"
                        .into(),
                ),
                true,
            ))
        }
        Err(SendError::Client(Failure::Gone | Failure::Refused)) => {
            return Err((Fail::ClientGone, true))
        }
        Err(SendError::Client(f)) => return Err((Fail::ClientBody(f), true)),
        Err(SendError::Io(e)) => {
            return Err((
                Fail::Error(format!(
                    "writev() failed {} while sending request to upstream",
                    shoal_conf::os_error(&e)
                )),
                true,
            ))
        }
        Ok(()) => {}
    }
    {
        let mut rec = record.borrow_mut();
        let sent = encoded.head.len() as u64
            + match (&encoded.set_body, encoded.send_body) {
                (Some(b), _) => b.len() as u64,
                (None, true) => body.len().unwrap_or(0),
                (None, false) => 0,
            };
        rec.last().sent = sent;
    }
    let read_timeout = conf.read_timeout();
    let max = conf.buffer_size();
    let mut buf = BytesMut::with_capacity(max.max(4096));
    // `*_ignore_client_abort on`: the client is not watched.
    let mut watch_client = !conf.ignore_client_abort();
    let client = r.client;
    let mut log = |level: Level, line: &dyn std::fmt::Display| {
        crate::conn_log!(
            level,
            r.info.number,
            "{line} while reading response header from upstream{}",
            record.borrow().log_ctx(r.req, r.srv, r.info)
        );
    };
    let mut bytes_room = BytesMut::new();
    let parsed = loop {
        match decoder.decode(&mut buf, max, &mut log) {
            Ok(Some(p)) => break p,
            Ok(None) => {}
            Err(HeadError::Caught) => return Err((Fail::Invalid(String::new()), false)),
            Err(HeadError::Invalid(message)) => {
                return Err((
                    Fail::Invalid(format!(
                        "{message} while reading response header from upstream"
                    )),
                    buf.is_empty(),
                ))
            }
        }
        if buf.capacity() - buf.len() < 1024 {
            buf.reserve(max);
        }
        // A decoder that counts `*_buffer_size` as nginx's buffer fills (FastCGI) gets at most
        // what that buffer has room for at a time.
        let bounded = decoder.bounded();
        if bounded {
            bytes_room = BytesMut::with_capacity(max.saturating_sub(buf.len()).max(8));
        }
        let target = if bounded { &mut bytes_room } else { &mut buf };
        // While waiting, the client is watched: one that closes ends the exchange (nginx's
        // `proxy_ignore_client_abort off`); one that sends more (a pipelined request) is not
        // watched any further.
        let read = timer.within(read_timeout, stream.read_buf(target));
        let read = match client.filter(|_| watch_client) {
            None => read.await,
            Some(c) => {
                // The upstream first: the client is looked at only while its answer is awaited.
                let mut read = std::pin::pin!(read);
                let watched = std::future::poll_fn(|cx| {
                    if let Poll::Ready(r) = std::future::Future::poll(read.as_mut(), cx) {
                        return Poll::Ready(Some(r));
                    }
                    if watch_client {
                        match poll_client_closed(c, cx) {
                            Poll::Ready(true) => return Poll::Ready(None),
                            Poll::Ready(false) => watch_client = false,
                            Poll::Pending => {}
                        }
                    }
                    Poll::Pending
                })
                .await;
                match watched {
                    Some(r) => r,
                    None => return Err((Fail::ClientGone, false)),
                }
            }
        };
        match read {
            Err(_) => {
                return Err((
                    Fail::Timeout(
                        "upstream timed out (110: Connection timed out) while reading response header from upstream"
                            .into(),
                    ),
                    buf.is_empty(),
                ))
            }
            Ok(Err(e)) => {
                return Err((
                    Fail::Error(format!(
                        "recv() failed {} while reading response header from upstream",
                        shoal_conf::os_error(&e)
                    )),
                    buf.is_empty(),
                ))
            }
            Ok(Ok(0)) => {
                return Err((
                    Fail::Error(
                        "upstream prematurely closed connection while reading response header from upstream"
                            .into(),
                    ),
                    buf.is_empty(),
                ))
            }
            Ok(Ok(n)) => {
                if bounded {
                    buf.extend_from_slice(&bytes_room);
                }
                record.borrow_mut().received(n as u64)
            }
        }
    };
    {
        let mut rec = record.borrow_mut();
        let t = rec.last();
        t.header = Some(t.start.elapsed());
        t.status = Some(parsed.status);
        t.head_len = parsed.consumed as u64;
    }
    let mut body = Box::new(UpstreamBody::new(
        stream,
        buf,
        parsed.framing,
        parsed.content_length,
        parsed.reusable,
        to.upstream.clone(),
        to.peer,
        conn.born,
        conn.requests,
        read_timeout,
        timer,
        record.clone(),
    ));
    if let Some(codec) = parsed.codec {
        body.set_codec(
            codec,
            r.info.number,
            record.borrow().log_ctx(r.req, r.srv, r.info),
        );
    }
    Ok(Answer {
        status: parsed.status,
        reason: parsed.reason,
        head: parsed.head,
        body,
        upgrade: parsed.upgrade,
        intercept: parsed.intercept,
    })
}
