//! One HTTP/2 stream's request, from its HEADERS to its last DATA frame and its log line.
//!
//! The request is built on the codec's buffer of the stream's fields, its parts where the
//! codec put them, and checked as an HTTP/1 head is ([`shoal_http::request::plain_h2`]), so
//! every module sees the same [`Request`]; it is an HTTP/2 request (`$server_protocol` is
//! `HTTP/2.0`). A head of any but the plain shape (a field name nginx calls invalid, a control
//! byte, a head past `client_header_buffer_size`...), or one the checks refuse, is written as
//! HTTP/1 and read by the same parser as an HTTP/1 head, under the server's
//! `large_client_header_buffers` (a field over its size is nginx's 400, a path over it 414),
//! which gives nginx's answer and log line. `:authority` stands for `Host` when the client
//! sent none; several `cookie` fields are joined with `; ` (RFC 9113, 8.2.3). The
//! pseudo-headers, connection-specific fields and the body's length against `content-length`
//! were checked by the codec already (a malformed stream is reset there).

use std::io;
use std::rc::Rc;
use std::time::Instant;

use bytes::{Bytes, BytesMut};
use shoal_http::{BodyKind, HeadParser, Limits};
use shoal_http2::frame::Reason;

use super::sink::{self, H2Sink};
use super::wire::{RecvStream, SendResponse, SendStream};
use super::Shared;
use crate::error::Error;
use crate::http::answer;
use crate::http::client_body::ClientBody;
use crate::http::output::{Output, Sink, Who};
use crate::http::phases::{self, Answered};
use crate::http::reply::{Body, Reply};
use crate::http::request::{self, Extras, Req, REQUEST_NOW};
use crate::http::subrequest_body::{RequestOf, Requester};
use crate::http::upstream::relay;
use crate::http::LocConf;
use crate::log::Level;

/// Answers one stream. The connection's count of open streams drops when it ends.
pub(super) async fn run(
    sh: Rc<Shared>,
    head: shoal_http2::server::Request,
    recv: Option<RecvStream>,
    respond: SendResponse,
) {
    struct Done(Rc<Shared>);
    impl Drop for Done {
        fn drop(&mut self) {
            self.0.active.set(self.0.active.get() - 1);
            self.0.last_done.set(Instant::now());
            self.0.done.notify_one();
        }
    }
    let done = Done(sh.clone());
    crate::status::request();
    let _writing = crate::status::StreamState::start();
    // (Boxed: a request's future is kilobytes; the connection moves this one into a box of
    // its own and into a task when it waits, and a move copies every byte of a future. Built
    // in its box: `Box::pin(answer_stream(..))` would build it on the stack and copy it, 8.8k
    // instructions of `memcpy` a call under callgrind.)
    crate::pinned::pin_in_place(|| answer_stream(&done.0, head, recv, respond)).await;
}

thread_local! {
    /// The last host a stream of this worker named, validated: most name the same.
    static HOST_MEMO: std::cell::RefCell<shoal_http::uri::HostMemo> = Default::default();
}

/// Told of each field `ignore_invalid_headers` drops: its name, the host known by then.
type Dropped<'a> = dyn FnMut(&[u8], Option<&[u8]>) + 'a;

/// The stream's request built on its fields' buffer; else its head as HTTP/1 (see above).
fn request_of(
    mut h: shoal_http2::server::Request,
    limits: &Limits,
    dropped: Option<&mut Dropped<'_>>,
) -> Result<shoal_http::Request, BytesMut> {
    let parts = h.parts();
    if let Some(dropped) = dropped.filter(|_| limits.ignore_invalid_headers) {
        // The fields `ignore_invalid_headers` drops, with the host known by then (nginx's
        // info line); the others' checks are the request's own.
        let buf = h.buf();
        let mut host = parts.host.as_ref().map(|(_, v)| &buf[v.clone()]);
        for (n, v) in h.field_ranges() {
            let name = &buf[n];
            if name == b"host" && host.is_none() {
                host = Some(&buf[v]);
            } else if !name.iter().all(|&b| {
                b.is_ascii_lowercase()
                    || b.is_ascii_digit()
                    || b == b'-'
                    || (b == b'_' && limits.underscores_in_headers)
            }) {
                dropped(name, host);
            }
        }
    }
    if let Some(target) = parts.target {
        let fields = parts.host.into_iter().chain(h.field_ranges());
        let plain = shoal_http::request::plain_h2(h.buf(), parts.method, target, fields, limits);
        if let Some(plain) = plain {
            let buf = Bytes::from(h.into_buf());
            let finished = HOST_MEMO.with(|m| plain.finish(buf, limits, &mut m.borrow_mut()));
            return finished.map_err(|text| BytesMut::from(&text[..]));
        }
    }
    let mut text = Vec::new();
    h.write_http1(&mut text);
    Err(BytesMut::from(&text[..]))
}

async fn answer_stream(
    sh: &Shared,
    request: shoal_http2::server::Request,
    recv: Option<RecvStream>,
    mut respond: SendResponse,
) {
    let Some(gen) = sh.generation() else {
        respond.send_reset(Reason::REFUSED_STREAM);
        return;
    };
    let Some(route) = sh.route(&gen) else {
        respond.send_reset(Reason::REFUSED_STREAM);
        return;
    };
    let default_srv =
        super::conn_server(&gen, &sh.info).unwrap_or_else(|| gen.default_server(&route));
    let limits = default_srv.srv.limits();
    // nginx's info line for each field `ignore_invalid_headers` drops.
    let mut log_dropped = |name: &[u8], host: Option<&[u8]>| {
        let (srv, host_ctx) = match host {
            Some(h) => (
                gen.find_server_captures(&route, Some(&shoal_http::lossy(h)))
                    .0,
                format!(", host: \"{}\"", shoal_http::log_text(h)),
            ),
            None => (default_srv, String::new()),
        };
        crate::conn_log!(
            Level::Info,
            sh.info.number,
            "client sent invalid header: \"{}\" while reading client request headers, \
             client: {}, server: {}{host_ctx}",
            shoal_http::lossy(name),
            sh.info.client(),
            srv.name()
        );
    };
    let dropped = crate::log::enabled(Level::Info).then_some(&mut log_dropped as &mut Dropped<'_>);
    // (The request is built where it stays: a `Request` moved through a few `Result`s is a
    // `memcpy` each.)
    let mut req = match request_of(request, &limits, dropped) {
        Ok(r) => r,
        Err(mut head) => {
            let mut parser = HeadParser::new(limits);
            match parser.parse(&mut head) {
                Ok(Some(r)) => r,
                Ok(None) => {
                    // A head the parser wants more of cannot be: it ends with its empty line.
                    respond.send_reset(Reason::PROTOCOL_ERROR);
                    return;
                }
                Err(e) => {
                    let refused = Refused {
                        gen: &gen,
                        route: &route,
                        default_srv,
                    };
                    Box::pin(refused.answer(sh, respond, &parser, head, e)).await;
                    return;
                }
            }
        }
    };
    // The body as the stream frames it: none after END_STREAM, `content-length`'s when told,
    // else of unknown length (handed to the decoder as chunks).
    let kind = match req.body() {
        _ if recv.is_none() => BodyKind::Empty,
        BodyKind::Length(n) => BodyKind::Length(n),
        _ => BodyKind::Chunked,
    };
    req.set_h2(kind);
    let req = req;
    // Shared with the proxy, which watches it for the client's RST_STREAM while it waits.
    let respond = std::cell::RefCell::new(respond);
    // (Borrowed from the request: a validated host is text, no copy is made.)
    let host = req.host().map(shoal_http::lossy);
    let (mut srv, mut name_captures) = gen.find_server_captures(&route, host.as_deref());
    // On TLS, the checks of an HTTP/1 request on a TLS address: client certificates (495,
    // 496) and a Host other than the name SNI negotiated (421).
    let mut refuse_with = None;
    if sh.info.tls.is_some() {
        let sni = super::sni_server(&gen, &sh.info);
        if let Some((code, by)) = crate::http::h1::tls_refusal(&sh.info, &req, srv, sni) {
            refuse_with = Some(code);
            if !std::ptr::eq(by, srv) {
                (srv, name_captures) = (by, None);
            }
        }
    }
    let start = Instant::now();
    REQUEST_NOW.with(|n| n.set(Some(start)));
    struct Clear;
    impl Drop for Clear {
        fn drop(&mut self) {
            REQUEST_NOW.with(|n| n.set(None));
        }
    }
    let _clear = Clear;
    let extras = Extras::default();
    let client_body = ClientBody::h2(kind, recv);
    let cache_zones = gen.cache_zones.get().map(|z| &**z);
    let r = Req {
        req: &req,
        srv,
        host: host.as_deref(),
        info: &sh.info,
        start,
        connection_requests: sh.requests.get(),
        name_captures: name_captures.as_ref(),
        client: Some(crate::http::request::ClientWatch::Stream(&respond)),
        cache_zones,
        extras: &extras,
    };
    let Answered {
        mut reply,
        lc,
        uri,
        close,
        upstream,
        user_vars,
        args,
        ..
    } = match refuse_with {
        None => phases::process(&r, &client_body).await,
        Some(code) => Box::pin(phases::process_status(&r, &client_body, code)).await,
    };
    // A body no handler read is discarded after the answer (nginx's); a refused one is not
    // read (the stream is reset when the answer ends).
    let unread = client_body.left() == crate::http::client_body::Left::Unread;
    let recv = client_body.into_h2_stream();
    let requests = sh.requests.get();
    let logs = !lc.access_logs().is_empty();
    let prepared = if close || reply.terminate {
        None
    } else {
        let rewritten = (uri.as_str(), args.as_deref(), &user_vars);
        match answer::prepare(&r, &mut reply, lc, rewritten, false, logs).await {
            Ok(p) if !p.pool_failed => Some(p),
            Ok(_) => None,
            Err(_) => {
                respond.borrow_mut().send_reset(Reason::INTERNAL_ERROR);
                return;
            }
        }
    };
    let Some(prepared) = prepared else {
        // `return 444` (or a request nginx terminates), or `aio threads` naming no pool
        // (nginx's output fails): the stream is reset, the request logged with its status.
        respond.borrow_mut().send_reset(Reason::INTERNAL_ERROR);
        let rec = upstream.as_ref().map(|u| u.borrow());
        request::log(
            &sh.info,
            requests,
            &req,
            srv,
            lc,
            &uri,
            start,
            reply.status,
            0,
            0,
            Vec::new(),
            rec.as_deref(),
            Some(&extras),
        );
        return;
    };
    let answer::Prepared {
        output,
        changes_length,
        sent_headers,
        ..
    } = prepared;
    let head_only = req.method() == "HEAD";
    let length = sink::told_length(&reply.body, changes_length);
    let date =
        request::date(reply.proxied || matches!(reply.body, Body::Upstream(_) | Body::Tunnel(_)));
    let (status, special) = (reply.status, reply.special);
    let proxied = reply.proxied;
    let body = std::mem::replace(&mut reply.body, Body::Empty);
    let known = sink::known_length(&body, length);
    // (An upstream's answer whose head ended its stream, a gRPC trailers-only answer, ends
    // the stream with its HEADERS too: its fields are the call's trailers. So does a body
    // known to be empty, as h2o's, but an upstream's, which is read to its end.)
    let no_body = head_only
        || matches!(body, Body::Empty)
        || (known == Some(0) && !matches!(body, Body::Upstream(_)))
        || (proxied && matches!(&body, Body::Bytes(b) if b.is_empty()));
    let mut send_half: Option<SendStream> = None;
    let mut pacing = pacing_for(&r, lc, &uri, &user_vars, upstream.as_ref());
    let (started, head_len) = {
        let mut respond = respond.borrow_mut();
        sink::send_head(&mut respond, &reply, lc, length, &date, no_body)
    };
    Reply::recycle(reply);
    if let Some(p) = pacing.as_deref_mut() {
        // The HEADERS frame counts as a head's bytes count over HTTP/1.
        p.wrote(head_len as usize, Instant::now());
    }
    let sent = match started {
        Ok(send) => {
            let mut sink = H2Sink::new(send, &sh.info, lc, pacing, known);
            if no_body {
                if let Body::Upstream(u) = body {
                    // A HEAD converted to GET for the cache: the body is still stored.
                    u.finish_or_store();
                }
                send_half = Some(sink.send);
                Ok(0)
            } else {
                let who: Who<'_> = Some((&req, srv));
                let sent = if let Body::Grpc(g) = body {
                    // DATA frames, then the upstream's trailers end the stream.
                    g.relay_h2(&mut sink, who).await
                } else {
                    // The request the filters act for (ssi, addition).
                    let requester = output
                        .filters
                        .borrow()
                        .iter()
                        .any(|f| f.for_request())
                        .then(|| {
                            let r = Req { client: None, ..r };
                            RequestOf::main(r, lc, &uri, args.clone(), &user_vars)
                        });
                    let requester = requester.as_ref().map(|r| r as &dyn Requester);
                    match write_body(&mut sink, body, &output, lc, who, requester).await {
                        Ok(n) if sink.ended() => Ok(n),
                        Ok(n) => sink.finish().await.map(|()| n),
                        Err(e) => {
                            sink.send.send_reset(Reason::INTERNAL_ERROR);
                            Err(e)
                        }
                    }
                };
                send_half = Some(sink.send);
                sent
            }
        }
        Err(e) => Err(io::Error::from(Error::protocol(e))),
    };
    drop(output);
    let body_len = match sent {
        Ok(n) => {
            extras.set_completed();
            n
        }
        Err(e) => {
            if e.kind() == io::ErrorKind::TimedOut {
                crate::conn_log!(
                    Level::Info,
                    sh.info.number,
                    "client timed out (110: Connection timed out) while sending response to client{}",
                    r.log_ctx()
                );
            }
            0
        }
    };
    // `mirror`: the answer is out; the request ends when its mirrors have their answers.
    if let Some(pending) = extras.take_mirrors() {
        let r = Req { client: None, ..r };
        Box::pin(crate::http::mirror::run(&r, pending)).await;
    }
    // `post_action`: then the request runs again in its target; it is logged after.
    let mut post = None;
    if lc.post_action.target().is_some() {
        let r = Req { client: None, ..r };
        post = crate::http::post_action::run(&r, lc, status, special).await;
    }
    let (log_lc, log_uri, log_status) = match &post {
        Some((done, logged)) => (done.lc, &done.uri, *logged),
        None => (lc, &uri, status),
    };
    if !log_lc.access_logs().is_empty() {
        let rec = upstream.as_ref().map(|u| u.borrow());
        request::log(
            &sh.info,
            requests,
            &req,
            srv,
            log_lc,
            log_uri,
            start,
            log_status,
            head_len,
            body_len,
            sent_headers,
            rec.as_deref(),
            Some(&extras),
        );
    }
    // The answer is out and the client still sends: what it sends is read and dropped within
    // nginx's lingering bounds (a body no handler read up to `client_max_body_size`, a
    // refused one whatever its size, as an HTTP/1 connection lingers). A stream whose client
    // still sends past them is reset by the h2 layer with NO_ERROR once the answer's frames
    // are out (RFC 9113, 8.1), as nginx closes such a stream.
    if let Some(mut recv) = recv {
        let max = if unread { lc.client_max_body_size() } else { 0 };
        discard(&mut recv, lc, max).await;
    }
    drop(send_half);
    if let Some(bg) = answer::background(upstream.as_ref()) {
        // (The stream is over: nothing watches it.)
        let r = Req { client: None, ..r };
        answer::run_background(&r, lc, bg).await;
    }
    if let Some(rec) = upstream {
        crate::http::upstream::record::Record::recycle(rec);
    }
}

/// What answers a stream whose head the parser refused: the server it names.
struct Refused<'g> {
    gen: &'g crate::cycle::Generation,
    route: &'g crate::cycle::AddrServers,
    default_srv: &'g crate::http::ServerConf,
}

impl Refused<'_> {
    /// Answers the stream as nginx answers a head it refused (`e`: why), logs it, and logs
    /// the request line nginx would have read.
    async fn answer(
        self,
        sh: &Shared,
        mut respond: SendResponse,
        parser: &HeadParser,
        mut head: BytesMut,
        e: shoal_http::Error,
    ) {
        let refused = parser.refused(&head);
        // The head the parser refused (taken off `head` once it was whole).
        let text = match parser.failed_head() {
            Some(h) => h.clone(),
            None => head.split().freeze(),
        };
        let srv = self
            .gen
            .refused_server(self.route, &refused, self.default_srv);
        crate::conn_log!(
            Level::Info,
            sh.info.number,
            "{e} while reading client request headers, client: {}, server: {}{}",
            sh.info.client(),
            srv.name(),
            refused_context(&text, e.code())
        );
        let start = Instant::now();
        let reply = Box::new(crate::http::reply::error_reply(e.code(), &srv.loc));
        let status = reply.status;
        let date = request::date(false);
        let length = reply.body.length();
        let known = sink::known_length(&reply.body, length);
        let (sent, head_len) =
            sink::send_head(&mut respond, &reply, &srv.loc, length, &date, false);
        let mut body_len = 0;
        if let Ok(send) = sent {
            let mut sink = H2Sink::new(send, &sh.info, &srv.loc, None, known);
            let output = Output::default();
            let body = std::mem::replace(&mut { reply }.body, Body::Empty);
            if output.send_plain(&mut sink, body, &srv.loc).await.is_ok()
                && sink.finish().await.is_ok()
            {
                body_len = length.unwrap_or(0);
            }
        }
        // Logged as nginx logs a request it could not read: its request line.
        let first = text[..].split(|&b| b == b'\r').next().unwrap_or_default();
        let first = first.strip_suffix(b" HTTP/1.1").unwrap_or(first);
        let line = format!("{} HTTP/2.0", String::from_utf8_lossy(first));
        log_refused(sh, srv, status, head_len, body_len, &line, start);
    }
}

/// The end of nginx's line for a stream's head it refused, from the head as HTTP/1 writes it:
/// the request line when the whole block was read (a TRACE's 405: nginx refuses it once it
/// made the line), and the host it had (`:authority` is its `Host` as soon as it comes).
fn refused_context(head: &[u8], status: u16) -> String {
    let mut lines = head
        .split(|&b| b == b'\n')
        .map(|l| l.strip_suffix(b"\r").unwrap_or(l));
    let first = lines.next().unwrap_or_default();
    let mut s = String::new();
    if status == 405 {
        let line = first.strip_suffix(b" HTTP/1.1").unwrap_or(first);
        s = format!(", request: \"{} HTTP/2.0\"", shoal_http::log_text(line));
    }
    if let Some(host) = lines.find_map(|l| l.strip_prefix(b"host: ")) {
        s.push_str(&format!(", host: \"{}\"", shoal_http::log_text(host)));
    }
    s
}

/// `limit_rate`: how the stream's answer is paced (`None`: not at all); its rate is
/// `$limit_rate` in the access log. The same settling as HTTP/1's.
fn pacing_for(
    r: &Req<'_, '_>,
    lc: &LocConf,
    uri: &str,
    user_vars: &std::collections::HashMap<String, String>,
    upstream: Option<&Rc<std::cell::RefCell<crate::http::upstream::record::Record>>>,
) -> Option<Box<crate::http::limit_rate::Pacing>> {
    let set_rate = user_vars.get("limit_rate").map(String::as_str);
    if set_rate.is_none() && lc.limit_rate.rate.is_none() && upstream.is_none() {
        return None;
    }
    let mut vars = r.vars(uri, lc, &[]);
    vars.user = Some(user_vars);
    let rec = upstream.map(|u| u.borrow());
    let number = r.info.number;
    let pacing = crate::http::limit_rate::pacing_for(lc, set_rate, rec.as_deref(), &vars, &|m| {
        crate::conn_log!(Level::Error, number, "{m}{}", r.log_ctx())
    });
    if let Some(p) = &pacing {
        r.extras.set_var("limit_rate", p.rate().to_string());
    }
    pacing.map(Box::new)
}

/// The access log line of a stream whose fields could not be read as a request.
fn log_refused(
    sh: &Shared,
    srv: &crate::http::ServerConf,
    status: u16,
    head_len: u64,
    body_len: u64,
    line: &str,
    start: Instant,
) {
    let logs = srv.loc.access_logs();
    if logs.is_empty() {
        return;
    }
    let sent = crate::variables::Sent {
        status,
        body_bytes: body_len,
        bytes: head_len + body_len,
        headers: Vec::new(),
    };
    let vars = crate::variables::Vars {
        req: None,
        uri: None,
        peer: sh.info.peer,
        local: sh.info.local,
        server_name: srv.name(),
        document_root: None,
        request_filename: None,
        connection: sh.info.number,
        connection_requests: sh.requests.get(),
        start,
        request_length: 0,
        sent: Some(&sent),
        captures: &[],
        user: None,
        doc_root: None,
        args: None,
        request_line: Some(line.as_bytes()),
        upstream: None,
        tls: sh.info.tls.as_deref(),
        extras: None,
        conn: Some(&sh.info),
        srv: Some(srv),
        lc: Some(&srv.loc),
        stream: None,
    };
    crate::http::access_log::log_request(logs, &vars);
}

/// Reads and drops what the client still sends on a stream, up to `max` bytes (0: any), each
/// wait bounded by `lingering_timeout` and the whole by `lingering_time`.
async fn discard(recv: &mut RecvStream, lc: &LocConf, max: u64) {
    let deadline = Instant::now() + lc.lingering_time();
    let mut read = 0u64;
    while !recv.is_end_stream() && (max == 0 || read <= max) {
        let wait = lc
            .lingering_timeout()
            .min(deadline.saturating_duration_since(Instant::now()));
        match crate::deadline::within(wait, recv.data()).await {
            Ok(Some(Ok(d))) => {
                read += d.len() as u64;
                recv.release_capacity(d.len());
            }
            // The DATA frames are over; trailers may follow.
            Ok(None) => {
                let _ = crate::deadline::within(wait, recv.trailers()).await;
                return;
            }
            _ => return,
        }
    }
}

/// Sends an answer's body through `output` (no chunked framing: DATA frames carry it).
/// Returns the body bytes sent.
async fn write_body(
    sink: &mut H2Sink<'_>,
    body: Body,
    output: &Output,
    lc: &LocConf,
    who: Who<'_>,
    requester: Option<&dyn Requester>,
) -> io::Result<u64> {
    if output.filtered() {
        return output
            .send_filtered(sink, body, false, lc, who, requester)
            .await;
    }
    match body {
        Body::Upstream(u) => relay::relay(sink, output, *u, false, who, lc).await,
        Body::Unsized(inner) => output.send_unsized(sink, *inner, false, lc).await,
        // No upgrade over HTTP/2 (its request cannot ask for one).
        Body::Tunnel(_) => Ok(0),
        Body::Grpc(g) => g.relay_h2(sink, who).await,
        body => {
            let n = match &body {
                Body::Absent(_) => 0,
                b => b.length().unwrap_or(0),
            };
            output.send_plain(sink, body, lc).await?;
            sink.flush().await?;
            Ok(n)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn head_takes_authority_and_joins_cookies() {
        use shoal_http2::server::{Config, Incoming, Server};
        let mut server = Server::new(Config::default());
        let mut block = vec![0x82, 0x87, 0x04, 0x06];
        block.extend_from_slice(b"/a?b=1");
        block.push(0x01);
        block.push(11);
        block.extend_from_slice(b"example.com");
        for (n, v) in [("cookie", "a=1"), ("cookie", "b=2"), ("x-y", "z")] {
            block.push(0x00);
            block.push(n.len() as u8);
            block.extend_from_slice(n.as_bytes());
            block.push(v.len() as u8);
            block.extend_from_slice(v.as_bytes());
        }
        let mut input = shoal_http2::frame::PREFACE.to_vec();
        input.extend_from_slice(&[0, 0, 0, 4, 0, 0, 0, 0, 0]);
        let len = (block.len() as u32).to_be_bytes();
        input.extend_from_slice(&[len[1], len[2], len[3], 1, 5, 0, 0, 0, 1]);
        input.extend_from_slice(&block);
        server.recv(&input).expect("frames");
        let request = loop {
            match server.poll(&input).expect("a request") {
                Incoming::Head { head: request, .. } => break request,
                _ => continue,
            }
        };
        let mut head = Vec::new();
        request.write_http1(&mut head);
        assert_eq!(
            &head[..],
            b"GET /a?b=1 HTTP/1.1\r\nhost: example.com\r\nx-y: z\r\ncookie: a=1; b=2\r\n\r\n"
        );
        let parsed = HeadParser::default()
            .parse(&mut BytesMut::from(&head[..]))
            .expect("parsed")
            .expect("whole");
        let r: shoal_http::Request = parsed.into_h2(BodyKind::Empty);
        assert_eq!(r.version_text(), b"HTTP/2.0");
        assert_eq!(r.host(), Some(&b"example.com"[..]));
    }
}
