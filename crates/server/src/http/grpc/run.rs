//! One gRPC call's exchange with its upstream: choose a peer (the upstream's balancer), take
//! an idle HTTP/2 connection to it or make one (`grpc_connect_timeout`, TLS for `grpcs://`),
//! open a stream with the request's head, start relaying the client's body, and wait for the
//! answer's head (`grpc_read_timeout`). The answer's body and trailers are relayed after the
//! head is sent to the client ([`super::body`]).
//!
//! Failures are nginx's: logged with its words and context, counted against the peer, the
//! next peer tried while `grpc_next_upstream` allows (never once some of a streamed body is
//! gone); with none left, 502 (504 after a timeout), which a gRPC client reads as
//! `UNAVAILABLE`. A stream the upstream resets before its head is
//! `upstream rejected request with error N` and `invalid_header`, and so is a head larger
//! than `grpc_buffer_size` (`upstream sent too big header`). An idle connection the
//! upstream closed or sent GOAWAY on is not the peer's fault: the call goes on a new one.
//!
//! A streamed client body past `client_max_body_size` before the answer's head came is
//! nginx's 413 (its line logged with the upstream named, the peer not blamed). An HTTP/1
//! client's chunked body is streamed too ([`super::streamed`]); one with a length is read
//! first (it can then go again to another peer).

use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::sync::Arc;
use std::task::Poll;
use std::time::{Duration, Instant};

use bytes::Bytes;
use shoal_http2::client::Response;
use shoal_http2::frame::Reason;

use super::body::{self, GrpcBody, Limit, Pump};
use super::conn::{self, H2Conn};
use super::head;
use super::streamed;
use super::strip_scheme;
use super::wire::{self, HeadWait, StreamError};
use crate::http::client_body::{BodyToSend, ClientBody, Whole};
use crate::http::reply::Outcome;
use crate::http::request::Req;
use crate::http::rewrite;
use crate::http::upstream::record::Record;
use crate::http::upstream::run::{self, poll_client_closed, Fail, Handshake};
use crate::http::upstream::target::{self, Target};
use crate::http::upstream::{NextUpstream, UpstreamLoc};
use crate::http::LocConf;
use crate::log::Level;
use crate::upstream::conf::{PeerAddr, UpstreamConf};
use crate::upstream::{state, Input, PeerResult};

/// The client's body as the call sends it.
enum Source<'b, 'a> {
    None,
    /// Read whole (an HTTP/1 client's with a length): sent again on another try.
    Whole(Bytes),
    /// An HTTP/2 client's stream, relayed as it comes; gone once a try took it. With it,
    /// `client_max_body_size` when its length was not told (0: none).
    Stream(Option<crate::http::h2::wire::RecvStream>, u64),
    /// An HTTP/1 client's chunked body, sent as it is read; gone (`true`) once a try took it.
    Chunked(&'b ClientBody<'a>, bool),
}

impl Source<'_, '_> {
    /// A streamed body a try took: no other try can send it.
    fn gone(&self) -> bool {
        matches!(self, Source::Stream(None, _) | Source::Chunked(_, true))
    }
}

/// Runs a call in a `grpc_pass` location. Returns what it came to and the record of the
/// exchange (for `$upstream_*`), if it got as far as choosing an upstream.
pub async fn handle(
    r: &Req<'_, '_>,
    lc: &LocConf,
    rw: &rewrite::State,
    method: &str,
    client_body: &ClientBody<'_>,
) -> (Outcome, Option<Rc<RefCell<Record>>>) {
    // An HTTP/2 client's body is relayed frame by frame, an HTTP/1 client's chunked one
    // piece by piece; an HTTP/1 client's with a length is read first. A length told was held
    // to `client_max_body_size` when the location was found; an untold one is counted as its
    // frames come (an HTTP/1 body's by its chunked decoder).
    let chunked = client_body.kind() == shoal_http::BodyKind::Chunked;
    let max = if chunked {
        lc.client_max_body_size()
    } else {
        0
    };
    let mut source = match client_body.take_h2() {
        Some(s) => Source::Stream(Some(s), max),
        None => match client_body.for_upstream(lc, r, !chunked, true).await {
            Ok(BodyToSend::Streaming(b, _)) => Source::Chunked(b, b.started()),
            Ok(BodyToSend::Whole(Whole::Memory(b))) if !b.is_empty() => Source::Whole(b),
            Ok(BodyToSend::Whole(Whole::File(f, n))) => {
                let mut data = vec![0; n as usize];
                match std::os::unix::fs::FileExt::read_exact_at(&*f, &mut data, 0) {
                    Ok(()) => Source::Whole(data.into()),
                    Err(_) => return (Outcome::Error(500), None),
                }
            }
            Ok(_) => Source::None,
            Err(f) => {
                crate::http::client_body::log_failure(f, r);
                return (Outcome::Error(f.status()), None);
            }
        },
    };
    let mut record = None;
    let outcome = run(r, lc, rw, method, &mut source, &mut record).await;
    (outcome, record)
}

async fn run(
    r: &Req<'_, '_>,
    lc: &LocConf,
    rw: &rewrite::State,
    method: &str,
    source: &mut Source<'_, '_>,
    record_out: &mut Option<Rc<RefCell<Record>>>,
) -> Outcome {
    let g = &lc.grpc;
    let conf = &g.up;
    let Some(pass) = g.pass.as_ref() else {
        return Outcome::Error(500);
    };
    let vars = r.vars_rw(rw, lc);
    let (mut upstream, host, tls) = match &pass.target {
        Target::Dynamic {
            template,
            upstreams,
        } => {
            let text = vars.eval(template);
            let (rest, tls) = strip_scheme(&text);
            match target::resolve(rest, 0, upstreams.get().map_or(&[][..], Vec::as_slice)) {
                Ok(found) => (found.upstream, Arc::<str>::from(found.host), tls),
                Err((status, message)) => {
                    crate::conn_log!(Level::Error, r.info.number, "{message}{}", r.log_ctx());
                    return Outcome::Error(status);
                }
            }
        }
        t => match t.upstream() {
            Some(u) => (u.clone(), pass.host.clone(), pass.tls),
            None => return Outcome::Error(500),
        },
    };
    if upstream.resolving.is_some() {
        match crate::upstream::resolve::current(&upstream).await {
            Some(u) => upstream = u,
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
    let handshake = match (tls, g.ssl.built.get()) {
        (false, _) => None,
        (true, Some(t)) => Some(Handshake {
            tls: t,
            host: &host,
            vars: &vars,
        }),
        (true, None) => return Outcome::Error(500),
    };
    let record = Record::start(&host, 0);
    record.borrow_mut().scheme = if tls { "grpcs" } else { "grpc" };
    *record_out = Some(record.clone());
    // The head is made once; a try after one that sent it makes it again (no copy kept for
    // the tries that never come).
    let whole_len = match source {
        Source::Whole(b) => Some(b.len()),
        _ => None,
    };
    let authority = match &pass.target {
        Target::Dynamic { .. } => None,
        _ => pass.authority.as_ref(),
    };
    let make_head =
        || head::request_head(r, lc, rw, &vars, &host, authority, tls, method, whole_len);
    let mut head = Some(make_head());
    // (nginx names a gRPC upstream without a URI in its log lines.)

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
    let retry_ok = idempotent || next.has(NextUpstream::NON_IDEMPOTENT);
    let mut tries = 0u64;
    // The client's body bytes when they passed `client_max_body_size` (0: they did not).
    let over = Rc::new(Cell::new(0u64));
    loop {
        let now = Instant::now();
        let Some(peer) = state::pick(&upstream, &mut attempt, now) else {
            crate::conn_log!(
                Level::Error,
                r.info.number,
                "no live upstreams while connecting to upstream{}",
                record.borrow().log_ctx(r.req, r.srv, r.info)
            );
            return Outcome::Error(502);
        };
        tries += 1;
        let addr = &upstream.addrs[peer];
        record.borrow_mut().begin(addr.clone(), now);
        let to = Peer {
            upstream: &upstream,
            peer,
            addr,
            bind: bind.as_ref().map(|(t, on)| (t.as_str(), *on)),
        };
        let more_allowed = |attempt: &crate::upstream::Attempt, sent: bool, s: &Source| {
            !s.gone()
                && (!sent || retry_ok)
                && (max_tries == 0 || tries < max_tries)
                && deadline.is_none_or(|d| Instant::now() < d)
                && attempt.tries() > 0
        };
        let heads = Heads {
            spare: &mut head,
            make: &make_head,
        };
        let fail = match call(
            to,
            conf,
            handshake.as_ref(),
            heads,
            source,
            &over,
            &record,
            r,
            lc,
        )
        .await
        {
            Ok(answer) => {
                let status = answer.status;
                let bit = NextUpstream::of_status(status);
                if next.has(bit) && attempt.tries() > 1 && more_allowed(&attempt, true, source) {
                    let outcome = if matches!(status, 403 | 404) {
                        PeerResult::Success
                    } else {
                        PeerResult::Failed
                    };
                    state::free(&upstream, &mut attempt, outcome);
                    record.borrow_mut().finish(false);
                    continue;
                }
                state::free(&upstream, &mut attempt, PeerResult::Success);
                if conf.intercept_errors()
                    && status >= 300
                    && lc
                        .error_page
                        .as_deref()
                        .is_some_and(|p| p.iter().any(|e| e.codes.contains(&status)))
                {
                    record.borrow_mut().finish(false);
                    return Outcome::Error(status);
                }
                return Outcome::Final(head::reply_of(answer, lc, conf, r, &record));
            }
            Err(_) if over.get() > 0 => {
                // The client's body passed `client_max_body_size`: its fault, not the peer's.
                crate::conn_log!(
                    Level::Error,
                    r.info.number,
                    "{}{}",
                    body::too_large_line(over.get()),
                    record.borrow().log_ctx(r.req, r.srv, r.info)
                );
                record.borrow_mut().finish(false);
                state::free(&upstream, &mut attempt, PeerResult::Success);
                return Outcome::Error(413);
            }
            Err((f, sent)) => (f, sent),
        };
        let (fail, sent) = fail;
        let (status, bit, message) = match fail {
            Fail::ClientGone => return run::client_gone(r, &record, &upstream, &mut attempt),
            Fail::ClientBody(f) => {
                return run::client_body_failed(r, f, &upstream, &mut attempt);
            }
            Fail::Error(m) => (502, NextUpstream::ERROR, m),
            Fail::Timeout(m) => (504, NextUpstream::TIMEOUT, m),
            Fail::Invalid(m) => (502, NextUpstream::INVALID_HEADER, m),
        };
        record.borrow_mut().last_fail = bit;
        crate::conn_log!(
            Level::Error,
            r.info.number,
            "{message}{}",
            record.borrow().log_ctx(r.req, r.srv, r.info)
        );
        record.borrow_mut().fail(status);
        state::free(&upstream, &mut attempt, PeerResult::Failed);
        if !(next.has(bit) && more_allowed(&attempt, sent, source)) {
            return Outcome::Error(status);
        }
    }
}

/// The request's head for a try: the one made for the call, or, for a try after the one
/// that sent it, a new one.
struct Heads<'h, 'a> {
    spare: &'h mut Option<head::UpstreamHead<'a>>,
    make: &'h dyn Fn() -> head::UpstreamHead<'a>,
}

impl<'a> Heads<'_, 'a> {
    fn take(&mut self) -> head::UpstreamHead<'a> {
        self.spare.take().unwrap_or_else(self.make)
    }
}

/// The peer a try goes to.
#[derive(Clone, Copy)]
struct Peer<'a> {
    upstream: &'a Arc<UpstreamConf>,
    peer: usize,
    addr: &'a PeerAddr,
    /// `grpc_bind`'s address for this request, and whether it is `transparent`.
    bind: Option<(&'a str, bool)>,
}

/// An answer's head; its body still on the stream.
pub struct Answer {
    pub(super) status: u16,
    pub(super) head: Response,
    pub(super) body: GrpcBody,
}

/// One try: a connection, the stream opened, the body started, the answer's head. On
/// failure, whether the request reached the upstream.
#[allow(clippy::too_many_arguments)]
async fn call(
    to: Peer<'_>,
    conf: &UpstreamLoc,
    tls: Option<&Handshake<'_>>,
    mut heads: Heads<'_, '_>,
    source: &mut Source<'_, '_>,
    over: &Rc<Cell<u64>>,
    record: &Rc<RefCell<Record>>,
    r: &Req<'_, '_>,
    lc: &LocConf,
) -> Result<Answer, (Fail, bool)> {
    let mut fresh_only = false;
    // `grpc_buffer_size`: each stream's window, and the most an answer's head may be.
    let buffer_size = conf.buffer_size();
    let window = buffer_size.clamp(1, conn::MAX_WINDOW) as u32;
    // The try's start, read as it began (a connection made again reads the clock anew).
    let mut began = record.borrow().tries.last().map(|t| t.start);
    loop {
        let start = began.take().unwrap_or_else(Instant::now);
        let cached = if fresh_only {
            None
        } else {
            conn::take_idle(to.upstream, to.peer, tls.is_some(), window, start)
        };
        let reused = cached.is_some();
        let mut c = match cached {
            Some(c) => c,
            None => {
                let (stream, _, _) = crate::http::upstream::connect::connect(
                    to.upstream,
                    to.peer,
                    to.addr,
                    conf,
                    to.bind,
                    None,
                    &[],
                    tls,
                )
                .await
                .map_err(|f| (f, false))?;
                // Frames are small and written apart (HEADERS, DATA): Nagle would hold the
                // second until the first is acknowledged, a delayed ACK later.
                stream.set_nodelay();
                H2Conn::start(stream, window)
            }
        };
        record.borrow_mut().last().connect = Some(if reused {
            Duration::ZERO
        } else {
            start.elapsed()
        });
        c.requests += 1;
        // The stream, with the request's head (its HEADERS queued), and what is there of the
        // body: written together when the batch ends.
        let batch = wire::Batch::new(&c.core);
        let no_body = matches!(source, Source::None);
        let req = heads.take();
        let opened = wire::open(&c.core, &req.head(), req.fields(), no_body);
        let (response, recv, mut stream) = match opened {
            Ok(x) => x,
            Err(_) if reused => {
                fresh_only = true;
                continue;
            }
            Err(e) => {
                return Err((
                    Fail::Error(format!("{} while sending request to upstream", e.line())),
                    false,
                ))
            }
        };
        let id = response.id();
        // The body goes while the answer is awaited (a server may answer before it ends).
        // What is there already goes with the head, in the same write.
        let mut chunked = None;
        let pump = match source {
            Source::None => None,
            Source::Whole(b) if b.len() <= body::FIRST_WINDOW => {
                let _ = stream.send_data(b.clone(), true);
                None
            }
            Source::Whole(b) => {
                let b = b.clone();
                let timeout = conf.send_timeout();
                Some(Pump(tokio::task::spawn_local(async move {
                    body::send_all(&mut stream, b, timeout).await;
                })))
            }
            Source::Stream(s, max) => match s.take() {
                Some(mut from) => {
                    let mut limit = Limit {
                        max: *max,
                        received: 0,
                        over: over.clone(),
                    };
                    match body::send_ready(&mut from, &mut stream, &mut limit) {
                        body::Ready::Ended => None,
                        body::Ready::More => {
                            let (read, send) = (lc.client_body_timeout(), conf.send_timeout());
                            Some(Pump(tokio::task::spawn_local(body::pump(
                                from, stream, read, send, limit,
                            ))))
                        }
                    }
                }
                None => {
                    stream.send_reset(Reason::CANCEL);
                    return Err((Fail::Error("request body already sent".into()), false));
                }
            },
            Source::Chunked(_, true) => {
                stream.send_reset(Reason::CANCEL);
                return Err((Fail::Error("request body already sent".into()), false));
            }
            Source::Chunked(b, taken) => {
                *taken = true;
                chunked = Some(streamed::Pump::start(b, stream, conf.send_timeout()));
                None
            }
        };
        drop(batch);
        record.borrow_mut().last().sent = 0;
        let timeout = conf.read_timeout();
        let answer = wait_head(response, timeout, r, chunked.as_mut(), &mut c.timer).await;
        // nginx's buffer holds the head as it came, or the answer is refused (the crate may
        // have refused it first, for its own bound: the same failure).
        if c.head_size(id).is_some_and(|n| n > buffer_size) {
            return Err((
                Fail::Invalid(
                    "upstream sent too big header while reading response header from upstream"
                        .into(),
                ),
                true,
            ));
        }
        let (resp, ended) = match answer {
            Ok(resp) => resp,
            Err(Waited::Refused) if reused && !source.gone() => {
                fresh_only = true;
                continue;
            }
            Err(w) => return Err((w.fail(), true)),
        };
        // An HTTP/1 client's body still coming goes whole before the answer is relayed (its
        // connection answers once the request is read), unless the answer ended the call.
        if let Some(p) = chunked.as_mut().filter(|p| p.running()) {
            if !ended {
                if let Some(f) = p.finish().await {
                    return Err((Fail::ClientBody(f), true));
                }
            }
        }
        let status = resp.status();
        {
            let mut rec = record.borrow_mut();
            let t = rec.last();
            t.header = Some(t.start.elapsed());
            t.status = Some(status);
        }
        return Ok(Answer {
            status,
            head: resp,
            body: GrpcBody {
                recv,
                read_timeout: conf.read_timeout(),
                record: record.clone(),
                conn: Some((to.upstream.clone(), to.peer, c)),
                pump,
                over: over.clone(),
            },
        });
    }
}

/// How waiting for an answer's head failed.
enum Waited {
    TimedOut,
    ClientGone,
    /// The client's chunked body failed (too large, malformed, gone, timed out).
    ClientBody(crate::http::client_body::Failure),
    /// The upstream refused the stream before doing anything with it (GOAWAY, or
    /// REFUSED_STREAM): another connection may take it.
    Refused,
    Error(String),
    Reset(String),
}

impl Waited {
    fn fail(self) -> Fail {
        match self {
            Waited::TimedOut => Fail::Timeout(
                "upstream timed out (110: Connection timed out) while reading response header \
                 from upstream"
                    .into(),
            ),
            Waited::ClientGone => Fail::ClientGone,
            Waited::ClientBody(f) => Fail::ClientBody(f),
            Waited::Refused => Fail::Error(
                "upstream prematurely closed connection while reading response header from \
                 upstream"
                    .into(),
            ),
            Waited::Error(m) => {
                Fail::Error(format!("{m} while reading response header from upstream"))
            }
            Waited::Reset(m) => {
                Fail::Invalid(format!("{m} while reading response header from upstream"))
            }
        }
    }
}

/// Waits for the answer's head within `timeout` (on the connection's `timer`), watching the
/// client: one that resets its stream (or closes) ends the wait. An HTTP/1 client's chunked
/// body goes meanwhile (`pump`; its reads see the client go, so the connection is not watched
/// besides).
async fn wait_head(
    response: HeadWait,
    timeout: Duration,
    r: &Req<'_, '_>,
    mut pump: Option<&mut streamed::Pump<'_>>,
    timer: &mut crate::deadline::Timer,
) -> Result<(Response, bool), Waited> {
    let mut response = std::pin::pin!(timer.within(timeout, response));
    let mut watch = if pump.is_some() { None } else { r.client };
    let got = std::future::poll_fn(|cx| {
        // An HTTP/2 client's stream is polled first with a waker that does nothing, and its
        // task polls it again at once: that first poll arms no timer and watches no client
        // (the answer cannot be there yet: its request was just written).
        if cx.waker().will_wake(std::task::Waker::noop()) {
            return Poll::Pending;
        }
        if let Poll::Ready(v) = std::future::Future::poll(response.as_mut(), cx) {
            return Poll::Ready(Ok(v));
        }
        if let Some(p) = pump.as_deref_mut() {
            if let Poll::Ready(Some(f)) = p.poll_end(cx) {
                return Poll::Ready(Err(Waited::ClientBody(f)));
            }
        }
        if let Some(c) = watch {
            match poll_client_closed(c, cx) {
                Poll::Ready(true) => return Poll::Ready(Err(Waited::ClientGone)),
                Poll::Ready(false) => watch = None,
                Poll::Pending => {}
            }
        }
        Poll::Pending
    })
    .await;
    match got? {
        Err(_) => Err(Waited::TimedOut),
        Ok(Ok(resp)) => Ok(resp),
        Ok(Err(StreamError::Refused)) => Err(Waited::Refused),
        Ok(Err(e @ (StreamError::Reset(_) | StreamError::TooLarge))) => {
            Err(Waited::Reset(e.line()))
        }
        Ok(Err(e)) => Err(Waited::Error(e.line())),
    }
}
