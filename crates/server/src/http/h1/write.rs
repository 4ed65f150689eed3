//! Writing answers on an HTTP/1 connection: the head as HTTP/1 says it (`Connection`,
//! `Keep-Alive`, chunked framing of a body of unknown length to an HTTP/1.1 client, none at all
//! for HTTP/0.9), the body through [`Output`], answers gathered into one write while pipelined
//! requests wait; and the answer to a request that could not be read. The connection is the
//! [`Sink`] the output path writes into: `send_timeout` bounds each wait for the client.

use std::io;
use std::os::fd::BorrowedFd;
use std::time::{Duration, Instant};

use bytes::BytesMut;
use shoal_http::{BodyLength, Connection, ResponseHead};

use super::Conn;
use crate::http::limit_rate::Pacing;
use crate::http::output::{Output, Sink, Who};
use crate::http::reply::{Body, LocationAt, Reply};
use crate::http::request;
use crate::http::subrequest_body::Requester;
use crate::http::transport::{ConnInfo, Transport};
use crate::http::upstream::relay;
use crate::http::{LocConf, ServerConf, ServerTokens};
use crate::variables::{Sent, Vars};

impl Conn {
    /// Writes an answer: its HTTP/1 head (`Connection`, `Keep-Alive`, chunked framing decided
    /// here, for this protocol), then its body as `output` produces it. Returns the head's
    /// and the body's byte counts (framing included), as the access log counts them.
    #[allow(clippy::too_many_arguments)]
    pub(super) async fn write_answer(
        &mut self,
        who: Who<'_>,
        mut reply: Box<Reply>,
        lc: &LocConf,
        keep: bool,
        output: &Output,
        refused: RefusedShape,
        requester: Option<&dyn Requester>,
    ) -> std::io::Result<(u64, u64)> {
        super::super::transport::ready_out_buffer(&mut self.out);
        let req = who.map(|(r, _)| r);
        let head_only = req.map_or(refused.head, |r| r.method() == "HEAD");
        // No chunked framing before HTTP/1.1 or with `chunked_transfer_encoding off` (the
        // body then ends with the connection); no head at all for HTTP/0.9.
        let no_chunks = match req {
            Some(r) => !crate::http::framing::chunks_allowed(r, lc),
            None => !refused.http11 || !lc.framing.chunked(),
        };
        let http09 = req.map_or(refused.http09, |r| {
            r.version() == shoal_http::Version::Http09
        });
        // An answer made in the poll that read its request (a file, an error page) is dated by
        // the request's start; one that waited (a proxied answer) by the clock.
        let date = request::date(
            reply.proxied || matches!(reply.body, Body::Upstream(_) | Body::Tunnel(_)),
        );
        let length = reply.body.length();
        // A body of unknown length: chunked for HTTP/1.1 clients. The answer to a HEAD says
        // neither (nginx's chunked filter skips a HEAD, converted to a GET upstream or not).
        let upstream_unsized = !head_only
            && matches!(&reply.body, Body::Upstream(u) if u.length.is_none() && u.has_body());
        let file_unsized = !head_only && matches!(reply.body, Body::Unsized(_) | Body::Grpc(_));
        let tunnel = matches!(reply.body, Body::Tunnel(_));
        let last_modified = reply.last_modified;
        let head = ResponseHead {
            status: reply.status,
            reason: reply.reason.as_deref(),
            server: (!reply.upstream_server).then(|| tokens(lc.server_tokens())),
            date: (!reply.upstream_date).then_some(&date),
            // nginx writes a Content-Type only when it has a value (an upstream's may be empty).
            content_type: reply
                .content_type
                .as_deref()
                .filter(|t| !t.is_empty())
                .map(str::as_bytes),
            length: match (length, output.changes_length(), no_chunks) {
                // A compressed HEAD answer says neither (nginx skips its chunked filter).
                (_, true, _) if head_only => BodyLength::Unknown,
                (_, true, false) => BodyLength::Chunked,
                (_, true, true) => BodyLength::Unknown,
                (Some(n), false, _) => BodyLength::Length(n),
                (None, false, false) if upstream_unsized || file_unsized => BodyLength::Chunked,
                (None, false, _) => BodyLength::Unknown,
            },
            last_modified: last_modified
                .as_ref()
                .filter(|_| reply.last_modified_listed.is_none()),
            location: reply
                .location
                .as_deref()
                .filter(|_| reply.location_at == LocationAt::Fixed)
                .map(str::as_bytes),
            connection: if tunnel {
                Connection::Upgrade
            } else if keep {
                Connection::KeepAlive
            } else {
                Connection::Close
            },
            keep_alive_timeout: if keep {
                lc.keepalive_timeout().1.map(|d| d.as_secs())
            } else {
                None
            },
            headers: &[],
        };
        let before = self.out.len();
        if !http09 {
            head.write_fields(&mut self.out);
            // The handler's headers, then `add_header`'s and an upstream's; a `Location`, a
            // cached answer's `Last-Modified` and values that are not UTF-8 among them where
            // they were added, as nginx keeps them in its list.
            let listed = reply.location.as_deref().map(str::as_bytes);
            let put_location = |out: &mut BytesMut| {
                if let Some(l) = listed {
                    shoal_http::response::header(out, b"Location", l);
                }
            };
            let location_at = match reply.location_at {
                LocationAt::Fixed => usize::MAX,
                LocationAt::First => {
                    put_location(&mut self.out);
                    usize::MAX
                }
                LocationAt::Extra(n) => n.min(reply.extra.len()),
            };
            let modified_at = match (reply.last_modified_listed, &last_modified) {
                (Some(n), Some(_)) => n.min(reply.extra.len()),
                _ => usize::MAX,
            };
            for (n, v) in &reply.headers {
                shoal_http::response::header(&mut self.out, n.as_bytes(), v.as_bytes());
            }
            let extras = reply
                .extra
                .iter()
                .map(|(n, v)| (n.as_bytes(), v.as_bytes()));
            for (i, field) in extras.map(Some).chain([None]).enumerate() {
                if i == location_at {
                    put_location(&mut self.out);
                }
                if let Some(lm) = last_modified.as_ref().filter(|_| i == modified_at) {
                    shoal_http::response::header(&mut self.out, b"Last-Modified", lm);
                }
                for (_, n, v) in reply
                    .raw_extra
                    .iter()
                    .filter(|(at, _, _)| *at == i || (field.is_none() && *at > reply.extra.len()))
                {
                    shoal_http::response::header(&mut self.out, n.as_bytes(), v);
                }
                if let Some((n, v)) = field {
                    shoal_http::response::header(&mut self.out, n, v);
                }
            }
            self.out.extend_from_slice(b"\r\n");
        }
        let head_len = (self.out.len() - before) as u64;
        // The head is written: only the body is left of the reply, whose box the worker keeps.
        let body = std::mem::replace(&mut reply.body, Body::Empty);
        Reply::recycle(reply);
        if head_only {
            if let Body::Upstream(u) = body {
                // A HEAD converted to GET for the cache: the body is still stored.
                u.finish_or_store();
            }
            self.maybe_flush().await?;
            return Ok((head_len, 0));
        }
        // A tunnel and a compressed body run in futures of their own, made for the answer:
        // each is kilobytes, and inline they would size every connection's task, an idle
        // one's too. (The proxy's relay is not boxed: moving its future into a box cost the
        // proxied answer more than the memory it saves.)
        if let Body::Tunnel(u) = body {
            let send_timeout = self.rules.send_timeout;
            let (stream, buf) = (&self.stream, &mut self.buf);
            let mut sink = Writer {
                stream,
                out: &mut self.out,
                info: &self.info,
                send_timeout,
                pipelined: false,
            };
            let body_len =
                Box::pin(relay::tunnel(&mut sink, stream, buf, send_timeout, *u, lc)).await?;
            return Ok((head_len, body_len));
        }
        if output.filtered() {
            let chunked = !no_chunks && output.changes_length();
            let body_len =
                Box::pin(output.send_filtered(self, body, chunked, lc, who, requester)).await?;
            self.maybe_flush().await?;
            return Ok((head_len, body_len));
        }
        if let Body::Upstream(u) = body {
            let chunked = upstream_unsized && !no_chunks;
            let body_len = relay::relay(self, output, *u, chunked, who, lc).await?;
            self.maybe_flush().await?;
            return Ok((head_len, body_len));
        }
        if let Body::Grpc(g) = body {
            // Chunked to an HTTP/1.1 client, the trailers in its last chunk.
            let body_len = Box::pin(g.relay_h1(self, !no_chunks, who)).await?;
            return Ok((head_len, body_len));
        }
        if let Body::Unsized(inner) = body {
            let body_len = output.send_unsized(self, *inner, !no_chunks, lc).await?;
            self.maybe_flush().await?;
            return Ok((head_len, body_len));
        }
        let body_len = match body {
            Body::Absent(_) => 0,
            _ => length.unwrap_or(0),
        };
        output.send_plain(self, body, lc).await?;
        Ok((head_len, body_len))
    }

    /// Answers a request that could not be read (400, 408, 414, ...) and closes; it is
    /// logged with the request line read so far, as nginx logs it. `head_only`: the refused
    /// request's method was `HEAD`, so the page is left out (as nginx does once it has read
    /// the method).
    pub(super) async fn error_and_close(
        &mut self,
        code: u16,
        srv: &ServerConf,
        line: Option<&[u8]>,
        shape: RefusedShape,
    ) -> std::io::Result<()> {
        let start = Instant::now();
        let lc = &srv.loc;
        let mut reply = Box::new(crate::http::reply::error_reply(code, lc));
        // nginx's headers filter runs for these answers too, with the server's configuration:
        // `add_header ... always` (none of these statuses takes the others).
        if let Some(headers) = &lc.add_header {
            let vars = self.refused_vars(srv, None, line, start);
            crate::http::headers::add_headers(headers, false, &vars, &mut reply);
        }
        // And its sub and charset filters (`charset utf-8;` names the page's charset).
        crate::http::sub::refused(&lc.sub, &mut reply);
        crate::http::charset::refused(&lc.charset, &mut reply);
        let output = Output::default();
        *output.filters.borrow_mut() = std::mem::take(&mut reply.filters);
        let status = reply.status;
        // (Boxed: the writer's state is kilobytes; inline it would size every connection's
        // task, which waits in the same loop that calls this.)
        let write = self.write_answer(None, reply, lc, false, &output, shape, None);
        let (head_len, body_len) = Box::pin(write).await?;
        self.flush().await?;
        self.log_refused(srv, status, head_len, body_len, line, start);
        Ok(())
    }

    /// The access log line of a request refused before it was parsed.
    pub(super) fn log_refused(
        &self,
        srv: &ServerConf,
        status: u16,
        head_len: u64,
        body_len: u64,
        line: Option<&[u8]>,
        start: Instant,
    ) {
        let logs = srv.loc.access_logs();
        if logs.is_empty() {
            return;
        }
        let sent = Sent {
            status,
            body_bytes: body_len,
            bytes: head_len + body_len,
            headers: Vec::new(),
        };
        let vars = self.refused_vars(srv, Some(&sent), line, start);
        crate::http::access_log::log_request(logs, &vars);
    }

    /// Variables for a request refused before it was parsed: no request, the server's name.
    fn refused_vars<'a>(
        &'a self,
        srv: &'a ServerConf,
        sent: Option<&'a Sent>,
        line: Option<&'a [u8]>,
        start: Instant,
    ) -> Vars<'a> {
        Vars {
            req: None,
            uri: None,
            peer: self.info.peer,
            local: self.info.local,
            server_name: srv.name(),
            document_root: None,
            request_filename: None,
            connection: self.info.number,
            connection_requests: self.requests + 1,
            start,
            request_length: 0,
            sent,
            captures: &[],
            user: None,
            doc_root: None,
            args: None,
            request_line: line,
            upstream: None,
            tls: self.info.tls.as_deref(),
            extras: None,
            conn: Some(&self.info),
            srv: Some(srv),
            lc: Some(&srv.loc),
            stream: None,
        }
    }
}

impl Conn {
    /// `limit_rate`: how the answer about to be written is paced (`None`: not at all); its
    /// rate is `$limit_rate` in the access log.
    pub(super) fn pacing_for(
        &self,
        (req, srv, host, start, extras): (
            &shoal_http::Request,
            &ServerConf,
            Option<&str>,
            Instant,
            &crate::http::request::Extras,
        ),
        lc: &LocConf,
        uri: &str,
        user_vars: &std::collections::HashMap<String, String>,
        upstream: Option<&std::rc::Rc<std::cell::RefCell<crate::http::upstream::record::Record>>>,
    ) -> Option<Box<Pacing>> {
        let set_rate = user_vars.get("limit_rate").map(String::as_str);
        // No rate from `set`, the location or an upstream's header: nothing to evaluate.
        if set_rate.is_none()
            && lc.limit_rate.rate.is_none()
            && upstream
                .is_none_or(|u| crate::http::limit_rate::accel_rate(lc, &u.borrow()).is_none())
        {
            return None;
        }
        let r = request::Req {
            req,
            srv,
            host,
            info: &self.info,
            start,
            connection_requests: self.requests,
            name_captures: None,
            client: None,
            cache_zones: None,
            extras,
        };
        let mut vars = r.vars(uri, lc, &[]);
        vars.user = Some(user_vars);
        let rec = upstream.map(|u| u.borrow());
        let number = self.info.number;
        let pacing =
            crate::http::limit_rate::pacing_for(lc, set_rate, rec.as_deref(), &vars, &|m| {
                crate::conn_log!(crate::log::Level::Error, number, "{m}{}", r.log_ctx())
            });
        if let Some(p) = &pacing {
            extras.set_var("limit_rate", p.rate().to_string());
        }
        pacing.map(Box::new)
    }
}

impl Sink for Conn {
    fn out(&mut self) -> &mut BytesMut {
        &mut self.out
    }

    fn info(&self) -> &ConnInfo {
        &self.info
    }

    fn more_requests_buffered(&self) -> bool {
        !self.buf.is_empty()
    }

    fn flush_now(&mut self) -> io::Result<bool> {
        match self.pacing.as_deref_mut() {
            None => flush_now(&self.stream, &mut self.out),
            Some(p) => paced_flush_now(&self.stream, &mut self.out, p),
        }
    }

    async fn flush_to(&mut self, keep: usize) -> io::Result<()> {
        match self.pacing.as_deref_mut() {
            None => flush_to(&self.stream, &mut self.out, self.rules.send_timeout, keep).await,
            Some(p) => {
                paced_flush_to(
                    &self.stream,
                    &mut self.out,
                    self.rules.send_timeout,
                    keep,
                    p,
                )
                .await
            }
        }
    }

    async fn write_some(&mut self, data: &[u8]) -> io::Result<usize> {
        match self.pacing.as_deref_mut() {
            None => write_some(&self.stream, data, self.rules.send_timeout).await,
            Some(p) => paced_write_some(&self.stream, data, self.rules.send_timeout, p).await,
        }
    }

    fn sendfile_socket(&self) -> Option<BorrowedFd<'_>> {
        // A paced answer is read and written a piece at a time: each write is measured.
        (self.stream.can_sendfile() && self.pacing.is_none()).then(|| self.stream.as_fd())
    }

    fn set_cork(&self, on: bool) {
        if let Transport::Tcp(_) = self.stream {
            let _ = shoal_io::syscall::set_tcp_cork(self.stream.as_fd(), on);
        }
    }

    async fn until_writable(&mut self) -> io::Result<()> {
        until_writable(&self.stream, self.rules.send_timeout).await
    }
}

/// `limit_rate`: writes what the pacing allows now of `out`, without waiting. Whether
/// everything went.
fn paced_flush_now(stream: &Transport, out: &mut BytesMut, p: &mut Pacing) -> io::Result<bool> {
    let now = Instant::now();
    let Ok(allowed) = p.allowed(now) else {
        return Ok(out.is_empty());
    };
    let n = allowed.min(out.len());
    let mut pos = 0;
    while pos < n {
        match stream.try_write(&out[pos..n]) {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(w) => pos += w,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
            Err(e) => return Err(e),
        }
    }
    if pos > 0 {
        p.wrote(pos, now);
    }
    bytes::Buf::advance(out, pos);
    Ok(out.is_empty())
}

/// `limit_rate`: [`flush_to`] a paced piece at a time, sleeping between them as nginx's
/// delayed write event does.
async fn paced_flush_to(
    stream: &Transport,
    out: &mut BytesMut,
    send_timeout: Duration,
    keep: usize,
    p: &mut Pacing,
) -> io::Result<()> {
    while out.len() > keep {
        let allowed = match p.allowed(Instant::now()) {
            Ok(n) => n,
            Err(at) => {
                tokio::time::sleep_until(at.into()).await;
                continue;
            }
        };
        let n = allowed.min(out.len());
        let mut piece = out.split_to(n);
        while !piece.is_empty() {
            match write_some(stream, &piece, send_timeout).await {
                Ok(0) => {
                    out.clear();
                    return Err(io::ErrorKind::WriteZero.into());
                }
                Ok(w) => bytes::Buf::advance(&mut piece, w),
                Err(e) => {
                    out.clear();
                    return Err(e);
                }
            }
        }
        p.wrote(n, Instant::now());
    }
    Ok(())
}

/// `limit_rate`: [`write_some`] once the pacing allows, at most what it allows. A wait that
/// is dropped (the relay's upstream read won) has written nothing.
async fn paced_write_some(
    stream: &Transport,
    data: &[u8],
    send_timeout: Duration,
    p: &mut Pacing,
) -> io::Result<usize> {
    let allowed = loop {
        match p.allowed(Instant::now()) {
            Ok(n) => break n,
            Err(at) => tokio::time::sleep_until(at.into()).await,
        }
    };
    let n = write_some(stream, &data[..allowed.min(data.len())], send_timeout).await?;
    p.wrote(n, Instant::now());
    Ok(n)
}

/// The connection's writing half, apart from its read buffer (a tunnel takes both).
struct Writer<'a> {
    stream: &'a Transport,
    out: &'a mut BytesMut,
    info: &'a ConnInfo,
    send_timeout: Duration,
    pipelined: bool,
}

impl Sink for Writer<'_> {
    fn out(&mut self) -> &mut BytesMut {
        self.out
    }

    fn info(&self) -> &ConnInfo {
        self.info
    }

    fn more_requests_buffered(&self) -> bool {
        self.pipelined
    }

    fn flush_now(&mut self) -> io::Result<bool> {
        flush_now(self.stream, self.out)
    }

    async fn flush_to(&mut self, keep: usize) -> io::Result<()> {
        flush_to(self.stream, self.out, self.send_timeout, keep).await
    }

    async fn write_some(&mut self, data: &[u8]) -> io::Result<usize> {
        write_some(self.stream, data, self.send_timeout).await
    }

    fn sendfile_socket(&self) -> Option<BorrowedFd<'_>> {
        self.stream.can_sendfile().then(|| self.stream.as_fd())
    }

    fn set_cork(&self, on: bool) {
        if let Transport::Tcp(_) = self.stream {
            let _ = shoal_io::syscall::set_tcp_cork(self.stream.as_fd(), on);
        }
    }

    async fn until_writable(&mut self) -> io::Result<()> {
        until_writable(self.stream, self.send_timeout).await
    }
}

/// Writes what the socket takes of `out` now. Returns whether everything went.
pub(super) fn flush_now(stream: &Transport, out: &mut BytesMut) -> io::Result<bool> {
    let mut pos = 0;
    while pos < out.len() {
        match stream.try_write(&out[pos..]) {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(n) => pos += n,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
            Err(e) => return Err(e),
        }
    }
    if pos == out.len() {
        // Kept, not split off: the buffer's allocation serves the next answer.
        out.clear();
        return Ok(true);
    }
    bytes::Buf::advance(out, pos);
    Ok(false)
}

/// Writes what the socket takes of `out`, then waits for the client only while more than
/// `keep` bytes of it are left, `send_timeout` bounding each wait for the client to take more,
/// not the whole transfer (nginx's rule). After an error nothing is left to send.
pub(super) async fn flush_to(
    stream: &Transport,
    out: &mut BytesMut,
    send_timeout: Duration,
    keep: usize,
) -> io::Result<()> {
    // Most answers fit the socket's buffer: one send, without a future or a timer.
    if out.is_empty() || flush_now(stream, out)? {
        return Ok(());
    }
    // (Boxed: the wait's timer is most of a kilobyte, and this future is part of every
    // connection's task, idle ones' too.)
    Box::pin(wait_and_flush(stream, out, send_timeout, keep)).await
}

/// The rest of [`flush_to`], when the client did not take everything at once.
async fn wait_and_flush(
    stream: &Transport,
    out: &mut BytesMut,
    send_timeout: Duration,
    keep: usize,
) -> io::Result<()> {
    while out.len() > keep {
        let write = stream.write(out);
        let err = match crate::deadline::within(send_timeout, write).await {
            Ok(Ok(0)) => io::ErrorKind::WriteZero.into(),
            Ok(Ok(n)) => {
                bytes::Buf::advance(out, n);
                continue;
            }
            Ok(Err(e)) => e,
            Err(_) => io::ErrorKind::TimedOut.into(),
        };
        out.clear();
        return Err(err);
    }
    Ok(())
}

/// Writes some of `data`, waiting at most `send_timeout` for the client to take any.
async fn write_some(stream: &Transport, data: &[u8], send_timeout: Duration) -> io::Result<usize> {
    match crate::deadline::within(send_timeout, stream.write(data)).await {
        Ok(r) => r,
        Err(_) => Err(io::ErrorKind::TimedOut.into()),
    }
}

/// Waits until the socket takes more (a fresh poll: a pool thread's `sendfile` leaves the
/// runtime's cached readiness stale), at most `send_timeout`.
async fn until_writable(stream: &Transport, send_timeout: Duration) -> io::Result<()> {
    let fd = stream.as_fd();
    let writable = stream.try_io_write(|| {
        if shoal_io::syscall::writable_now(fd)? {
            Ok(())
        } else {
            Err(io::ErrorKind::WouldBlock.into())
        }
    });
    match crate::deadline::within(send_timeout, writable).await {
        Ok(r) => r,
        Err(_) => Err(io::ErrorKind::TimedOut.into()),
    }
}

/// What nginx knew of a refused request's shape when it answered: its method was `HEAD` (the
/// page is left out), it was an HTTP/0.9 simple request (the page goes without a head), or its
/// request line was read as HTTP/1.1 (a page without a length may then go chunked).
#[derive(Clone, Copy, Default)]
pub(super) struct RefusedShape {
    pub(super) head: bool,
    pub(super) http09: bool,
    pub(super) http11: bool,
}

impl RefusedShape {
    pub(super) fn of(bytes: &[u8]) -> RefusedShape {
        // A 0.9 `HEAD /` is refused with the page (only a GET is a 0.9 request to nginx).
        let http09 = shoal_http::request::is_simple_request(bytes);
        let line = request_line(bytes, true).unwrap_or_default();
        RefusedShape {
            head: !http09 && is_head_request(bytes),
            http09,
            http11: line.ends_with(b" HTTP/1.1"),
        }
    }
}

/// Whether a refused request's bytes start with the method `HEAD` (after the empty lines nginx
/// skips): nginx knows the method once the space after it is read, and leaves the page out.
pub(super) fn is_head_request(bytes: &[u8]) -> bool {
    let start = bytes
        .iter()
        .position(|&b| b != b'\r' && b != b'\n')
        .unwrap_or(bytes.len());
    bytes[start..].starts_with(b"HEAD ")
}

/// The request line read so far at the start of `head`, for the `$request` of a request
/// refused or abandoned before it was parsed, as nginx's variable takes it: from the first
/// byte after the empty lines nginx skips to a CR, an LF or the end of what was read (a
/// client that closed or timed out halfway: `"GET /pa"`; empty lines only: `""`), its
/// bytes as they came (the log escapes them); with `complete`, only a line that ended.
/// `None`: nothing was read.
pub(super) fn request_line(head: &[u8], complete: bool) -> Option<Vec<u8>> {
    if head.is_empty() {
        return None;
    }
    let start = head.iter().position(|&b| b != b'\r' && b != b'\n');
    let head = &head[start.unwrap_or(head.len())..];
    let end = match memchr::memchr2(b'\r', b'\n', head) {
        Some(e) => e,
        None if complete => return None,
        None => head.len(),
    };
    Some(head[..end.min(8192)].to_vec())
}

fn tokens(t: ServerTokens) -> shoal_http::ServerTokens {
    match t {
        ServerTokens::On => shoal_http::ServerTokens::On,
        ServerTokens::Off => shoal_http::ServerTokens::Off,
        ServerTokens::Build => shoal_http::ServerTokens::Build,
    }
}
