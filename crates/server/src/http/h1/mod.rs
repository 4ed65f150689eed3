//! One HTTP/1.x connection on a worker: read a head, find the server, hand the request to the
//! request layer, write its answer, repeat while keep-alive allows.
//!
//! This is the connection's life only (the protocol): keep-alive, pipelining, timeouts,
//! lingering close, graceful stop. Reading a request body is `body.rs`; writing an answer's head
//! and framing its body is `write.rs`; what the request comes to is the phases' (`phases.rs`),
//! and how a body is produced, `output.rs` and the proxy's relay.
//!
//! Runs on the worker; never blocks. Pipelined requests are answered in order, and their
//! answers are gathered into one write while more complete requests wait in the read buffer, so
//! a deep pipeline costs one `write` per batch, not per request. An idle keep-alive connection
//! waits on three things at once: the client, `keepalive_timeout`, and a graceful stop (which
//! closes it at once). A busy connection under a graceful stop answers its current request with
//! `Connection: close`.

mod body;
mod close;
mod park;
pub(crate) use park::park_h2;
pub(crate) mod proxy_protocol;
mod read;
mod start;
mod tls;
mod write;

pub use tls::tls_refusal;

use std::os::fd::OwnedFd;
use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::BytesMut;
use shoal_http::{BodyKind, Request};

use self::body::Discard;
use self::close::CloseRules;
use self::read::{ReadEnd, Reading};
use self::write::{request_line, RefusedShape};
use super::client_body::{ClientBody, Failure, H1Source, Left};
use super::output::Sink;
use super::phases::{self, Answered};
use super::reply::Body;
use super::request::REQUEST_NOW;
use super::request::{log_ctx, Req};
use super::subrequest_body::{RequestOf, Requester};
use super::transport::{ConnInfo, Transport, READ_CHUNK};
use super::{LocConf, ServerConf};
use crate::cycle::Generation;
use crate::listen::SocketKey;
use crate::log::Level;
use crate::worker::ConnGuard;

/// Requests answered on one connection before it lets the others run.
const FAIR_BATCH: u32 = 16;

/// Writes what is gathered in `out` to `stream`, `send_timeout` bounding each wait (for a
/// `100 Continue` written while a request's body is read).
pub async fn flush(
    stream: &Transport,
    out: &mut BytesMut,
    send_timeout: Duration,
) -> std::io::Result<()> {
    write::flush_to(stream, out, send_timeout, 0).await
}

/// Serves one accepted connection until it closes.
pub async fn serve(
    fd: OwnedFd,
    key: SocketKey,
    generation: Arc<Generation>,
    number: u64,
    guard: ConnGuard,
) {
    let idle_slot = crate::worker::IdleSlot::new(&guard.0.wake_idle);
    let (stream, info, tls_address) =
        match start::make_stream(fd, &key, &generation, number, &idle_slot, &guard).await {
            Ok(Some(x)) => x,
            Ok(None) => return,
            Err(e) => {
                crate::error_log!(Level::Alert, "cannot use an accepted socket: {e}");
                return;
            }
        };
    // HTTP/2: chosen by ALPN over TLS, or by its preface on a plain address that allows it.
    let h2 = match info.tls.as_deref() {
        Some(t) => t.alpn.as_deref() == Some(b"h2"),
        None if !tls_address && super::h2::plain_allowed(&generation, &key, &info) => {
            let timeout = generation
                .servers_for(&key.addr, info.local)
                .map_or(Duration::from_secs(60), |r| {
                    generation.default_server(r).srv.client_header_timeout()
                });
            super::h2::starts_with_preface(&stream, timeout).await
        }
        None => false,
    };
    if h2 {
        if let Transport::Tcp(s) = &stream {
            let _ = s.set_nodelay(true);
        }
        // A task of its own, sized for HTTP/2's state: this one, sized for an HTTP/1
        // request's deepest state, ends and frees its memory (an idle HTTP/2 connection
        // keeps only what it uses).
        let scope = crate::log::scope();
        tokio::task::spawn_local(crate::log::scoped_in(
            scope,
            super::h2::serve(stream, info, generation, guard, idle_slot),
        ));
        return;
    }
    let default_loc = generation
        .servers_for(&key.addr, info.local)
        .map(|r| &generation.default_server(r).loc);
    // The default server's error log, until a request finds its location's.
    crate::log::set_scope(default_loc.and_then(|l| l.error_log.as_ref()));
    let rules = CloseRules::of(default_loc.unwrap_or(&LocConf::default()));
    // `tcp_nodelay on` (the default): small answers written in pieces are not held back by
    // Nagle's algorithm. (A TLS connection has it from before its handshake.)
    if let Transport::Tcp(s) = &stream {
        if default_loc.is_none_or(|lc| lc.tcp_nodelay()) {
            let _ = s.set_nodelay(true);
        }
    }
    let conn = Box::new(Conn {
        stream,
        info,
        buf: BytesMut::with_capacity(READ_CHUNK),
        out: BytesMut::new(),
        generation: Rc::new(generation),
        route: None,
        guard,
        requests: 0,
        born: Instant::now(),
        rules,
        since_yield: 0,
        timer: new_timer(),
        idle_slot,
        closing_after_request: false,
        state: crate::status::ConnState::accepted(),
        unread_input: false,
        unread_body: false,
        tls_address,
        refuse_with: None,
        sni: None,
        keepalive: None,
        pacing: None,
        pipelined_next: false,
        parking: None,
        resume_deadline: None,
    });
    drive(conn).await;
}

/// A connection's one timer (see [`Conn::timer`]).
type Timer = std::pin::Pin<Box<tokio::time::Sleep>>;

/// A connection's timer before its first wait sets it.
fn new_timer() -> Timer {
    Box::pin(tokio::time::sleep(Duration::from_secs(86_400)))
}

/// Runs `conn` until it closes, or until it parks: idle for a while, its task ends here and a
/// small one waits for its next request (`park.rs`), then runs this again in a new task.
async fn drive(mut conn: Box<Conn>) {
    let number = conn.info.number;
    // (The close is boxed: the compiler lays `run`'s and `close`'s states side by side in
    // this future, and `close`'s lingering read would be part of every connection's task.)
    match conn.run().await {
        Ok(()) => match conn.parking.take() {
            Some((deadline, since)) => park::park(conn, deadline, since),
            None => Box::pin(conn.close()).await,
        },
        Err(e) if e.kind() == std::io::ErrorKind::TimedOut => {
            crate::conn_log!(
                Level::Info,
                number,
                "client timed out (110: Connection timed out) while sending response to client, client: {}",
                conn.info.client()
            );
            conn.reset_if_asked();
        }
        Err(e) => match crate::tls::stream::tls_error(&e) {
            // A TLS failure after the handshake (an alert, a broken record): nginx's line.
            Some(t) => crate::conn_log!(
                t.level,
                number,
                "{} while waiting for request, client: {}, server: {}",
                t.message,
                conn.info.client(),
                conn.info.socket
            ),
            None => {
                crate::conn_log!(Level::Info, number, "{e}, client: {}", conn.info.client())
            }
        },
    }
}

/// (A parked connection is a `Conn` with its socket out of the worker's reactor and no timer:
/// `park.rs` moves it between the two.)
pub(super) struct Conn<S = Transport, T = Timer> {
    pub(super) stream: S,
    pub(super) info: ConnInfo,
    pub(super) buf: BytesMut,
    /// Answers gathered for one write.
    pub(super) out: BytesMut,
    /// The configuration, and below the servers at this connection's address in it (looked
    /// up once per configuration, not per request: the generation's id and the servers).
    /// Each is held through the connection's own `Rc`: taken for every request, a count of
    /// the `Arc` itself, which every worker shares, moved its line between their cores.
    #[allow(clippy::redundant_allocation)]
    generation: Rc<Arc<Generation>>,
    #[allow(clippy::redundant_allocation)]
    route: Option<(u64, Rc<Arc<crate::cycle::AddrServers>>)>,
    guard: ConnGuard,
    pub(super) requests: u64,
    /// When the connection was accepted (`keepalive_time`).
    born: Instant,
    /// How to close, from the last request's location (or the default server's).
    pub(super) rules: CloseRules,
    /// Requests answered since this task last yielded (to the scheduler, or by waiting for
    /// its socket).
    since_yield: u32,
    /// The connection's one timer (header and keep-alive timeouts), moved to each wait's
    /// deadline when that is earlier.
    timer: T,
    /// Where a graceful stop or a reload wakes this connection while it waits for a request.
    idle_slot: crate::worker::IdleSlot,
    /// The connection's socket is gone from the configuration: answer, then close.
    closing_after_request: bool,
    /// This connection's place in `stub_status`.
    state: crate::status::ConnState,
    /// The unread input is a body refused for its declared length: nginx goes on discarding
    /// it without a FIN until `lingering_timeout` passes with nothing read.
    pub(super) unread_body: bool,
    /// Input may still arrive that nobody read (a refused body, a broken request): close
    /// with a lingering read so the answer is not destroyed by a reset.
    pub(super) unread_input: bool,
    /// The connection came to a TLS address (a plain one there is answered 497).
    tls_address: bool,
    /// The request about to be handled is refused with this code (`tls.rs`), its answer the
    /// code's page or the server's `error_page` for it.
    refuse_with: Option<u16>,
    /// The server SNI named, looked up in the generation of this id (see `tls.rs`).
    sni: Option<(u64, Option<usize>)>,
    /// `keepalive_timeout` of the last answered request's location: how long the connection
    /// waits for the next one.
    keepalive: Option<Duration>,
    /// `limit_rate`: the pacing of the answer being written (boxed: most answers have none).
    pub(super) pacing: Option<Box<crate::http::limit_rate::Pacing>>,
    /// The next request's bytes were already read when the last answer was done (`$pipe`).
    pipelined_next: bool,
    /// `run` ended to park the connection: its idle deadline and the wake epoch its wait
    /// began in ([`ReadEnd::Park`]).
    parking: Option<(Instant, u64)>,
    /// Back from parking: the idle wait's deadline it had.
    resume_deadline: Option<Instant>,
}

impl Conn {
    async fn run(&mut self) -> std::io::Result<()> {
        // The parser and the request's slot exist from a request's first byte to its answer
        // (see `Reading`): a connection waiting for its next request holds neither.
        let mut reading: Option<Box<Reading>> = None;
        loop {
            // Between requests, move to the newest configuration if this socket is still in it
            // (a socket a reload removed: the connection closes).
            if !self.follow_reload() {
                self.flush().await?;
                return Ok(());
            }
            let gen = self.generation.clone();
            let Some(route) = self.route_in(&gen) else {
                return Ok(());
            };
            // On a TLS address, the server SNI named reads the head (nginx's `conf_ctx`).
            let default_srv = if self.tls_address {
                self.head_server(&gen, &route)
            } else {
                gen.default_server(&route)
            };
            self.rules = CloseRules::of(&default_srv.loc);
            let parsed = match self.read_head(&mut reading, default_srv).await? {
                Ok(r) => r,
                Err(ReadEnd::Reloaded) => continue,
                Err(ReadEnd::Abandoned) => {
                    let line = request_line(&self.buf, false);
                    self.log_unread(read::CLOSED, default_srv, line.as_deref());
                    // Only empty lines came: nginx's `$request` is empty (its info line has no
                    // request).
                    let logged = line.as_deref().unwrap_or_default();
                    self.log_refused(default_srv, 400, 0, 0, Some(logged), Instant::now());
                    return Ok(());
                }
                Err(ReadEnd::Park { deadline, since }) => {
                    self.parking = Some((deadline, since));
                    return Ok(());
                }
                Err(ReadEnd::Closed) | Err(ReadEnd::Idle) => {
                    self.flush().await?;
                    return Ok(());
                }
                Err(ReadEnd::HeaderTimeout) => {
                    // nginx closes without an answer (`ngx_http_close_request` with 408):
                    // the 408 is only logged, with what the request line had of it.
                    let line = request_line(&self.buf, false);
                    self.log_unread(read::TIMED_OUT, default_srv, line.as_deref());
                    self.log_refused(default_srv, 408, 0, 0, line.as_deref(), Instant::now());
                    self.reset_if_asked();
                    return Ok(());
                }
            };
            // The request stays in its slot (read in place, not moved out).
            // Bytes came, so the parser is there.
            let Some(rd) = reading.as_deref_mut() else {
                return Ok(());
            };
            let req = match parsed.map(|()| rd.slot.as_ref()) {
                Ok(Some(r)) => r,
                Ok(None) => return Ok(()),
                Err(e) => {
                    self.unread_input = true;
                    let refused = rd.parser.failed_head().map_or(&self.buf[..], |h| &h[..]);
                    let line = request_line(refused, false);
                    let shape = RefusedShape::of(refused);
                    // As nginx: the server of the host read before the error, else the default
                    // (the one SNI named, on a TLS address).
                    let refused = rd.parser.refused(&self.buf);
                    let srv = gen.refused_server(&route, &refused, default_srv);
                    if crate::log::enabled(Level::Info) {
                        let reading = read::reading(refused.line_read, self.pipelined_next);
                        let host = refused.host_line.as_deref();
                        let (l, info) = (line.as_deref(), &self.info);
                        let what = refused.what(&e);
                        read::log_unread_head(&what, reading, srv.name(), l, host, info);
                    }
                    Box::pin(self.error_and_close(e.code(), srv, line.as_deref(), shape)).await?;
                    return Ok(());
                }
            };
            self.requests += 1;
            // (The default server's name outlives a reload below.)
            let default_name =
                crate::log::enabled(Level::Info).then(|| default_srv.name().to_string());
            // A reload that came while the head was arriving: the request takes the newest
            // configuration (or the last one of a removed socket, then the connection closes).
            let gen = if self.follow_reload() {
                self.generation.clone()
            } else {
                self.closing_after_request = true;
                gen
            };
            let Some(route) = self.route_in(&gen) else {
                return Ok(());
            };
            let host = req.host().map(|h| shoal_http::lossy(h));
            let (mut srv, mut name_captures) = gen.find_server_captures(&route, host.as_deref());
            if self.tls_address {
                if let Some(by) = self.tls_checks(req, srv, &gen, &route) {
                    (srv, name_captures) = (by, None);
                }
            }
            if let Some(default_name) = &default_name {
                read::log_dropped_headers(req, srv.name(), default_name, &self.info);
            }
            // (Inline, not boxed: a box would take the state's kilobytes off an idle
            // connection's task, but moving the future into it copies all of them for every
            // request, +8 % instructions per static answer in bench/instructions.sh.)
            let keep = self
                .handle(
                    req,
                    srv,
                    host.as_deref(),
                    name_captures.as_ref(),
                    gen.cache_zones.get().map(|z| &**z),
                )
                .await?;
            // Its head shares the read buffer's memory: nothing of it is kept while idle.
            Reading::give_back(reading.take());
            self.pipelined_next = !self.buf.is_empty();
            if !keep {
                self.flush().await?;
                return Ok(());
            }
            // Fairness: a client that pipelines never makes us wait for its socket, so without
            // this its task would keep the worker for hundreds of requests (tokio's budget is
            // per I/O call, and one read brings many requests). Every FAIR_BATCH answers, send
            // what is gathered and let the other connections and the accept loop run.
            self.since_yield += 1;
            if self.since_yield >= FAIR_BATCH {
                self.since_yield = 0;
                self.flush().await?;
                tokio::task::yield_now().await;
            }
        }
    }

    /// The servers at this connection's address in `gen` (`None`: the address is not in it).
    #[allow(clippy::redundant_allocation)] // (see `Conn::generation`)
    fn route_in(&mut self, gen: &Generation) -> Option<Rc<Arc<crate::cycle::AddrServers>>> {
        match &self.route {
            Some((id, r)) if *id == gen.id => Some(r.clone()),
            _ => {
                let r = Rc::new(gen.servers_for(&self.info.socket, self.info.local)?.clone());
                self.route = Some((gen.id, r.clone()));
                Some(r)
            }
        }
    }

    /// Takes the worker's newest configuration if this connection's socket is still in it.
    /// Returns false when the socket was removed by a reload.
    fn follow_reload(&mut self) -> bool {
        if self.guard.0.current.borrow().id == self.generation.id {
            return true;
        }
        let current = self.guard.0.current.borrow().clone();
        if current
            .sockets
            .iter()
            .any(|s| s.key.addr == self.info.socket)
        {
            self.generation = Rc::new(current);
            true
        } else {
            false
        }
    }

    /// Answers one request. Returns whether the connection stays open.
    async fn handle(
        &mut self,
        req: &Request,
        srv: &ServerConf,
        host: Option<&str>,
        name_captures: Option<&crate::cycle::NameCaptures>,
        cache_zones: Option<&super::proxy_cache::zone::Zones>,
    ) -> std::io::Result<bool> {
        let start = Instant::now();
        REQUEST_NOW.with(|n| n.set(Some(start)));
        // Cleared however this returns: a later answer with no request (a timeout's 408) reads
        // the clock.
        struct Clear;
        impl Drop for Clear {
            fn drop(&mut self) {
                REQUEST_NOW.with(|n| n.set(None));
            }
        }
        let _clear = Clear;
        let body_kind = req.body();
        let extras = super::request::Extras::default();
        {
            use std::os::fd::AsRawFd;
            let socket =
                matches!(self.stream, Transport::Tcp(_)).then(|| self.stream.as_fd().as_raw_fd());
            extras.set_connection(std::mem::take(&mut self.pipelined_next), self.born, socket);
        }
        // The body stays where it is until a handler reads it (the proxy does), as nginx.
        let send_timeout = self.rules.send_timeout;
        let client_body = ClientBody::h1(
            body_kind,
            H1Source {
                buf: &mut self.buf,
                stream: &self.stream,
                out: &mut self.out,
                send_timeout,
                expect_continue: req.expect_continue(),
            },
        );
        let r = Req {
            req,
            srv,
            host,
            info: &self.info,
            start,
            connection_requests: self.requests,
            name_captures,
            client: Some(super::request::ClientWatch::Conn(&self.stream)),
            cache_zones,
            extras: &extras,
        };
        let Answered {
            mut reply,
            lc,
            uri,
            close,
            args,
            user_vars,
            upstream,
        } = match self.refuse_with.take() {
            None => phases::process(&r, &client_body).await,
            Some(code) => Box::pin(phases::process_status(&r, &client_body, code)).await,
        };
        let left = client_body.left();
        drop(client_body);
        self.rules = CloseRules::of(lc);
        self.keepalive = Some(lc.keepalive_timeout().0);
        // What the answer left of the body: a streamed one cut short cannot be found again,
        // a refused or lost one is not read (a lingering close drops what still comes).
        let too_large = matches!(left, Left::Failed(Failure::TooLarge { .. }));
        let body_left = left == Left::Partial;
        if matches!(left, Left::Partial | Left::Failed(_)) {
            self.unread_input = true;
        }
        if matches!(left, Left::Failed(Failure::TooLarge { chunk: None, .. })) {
            // nginx's 413 for a declared length: the body is discarded, with no FIN, so the
            // client's send goes on. A chunk past the limit is found while the body is read:
            // nginx's lingering close then (its FIN at once, the rest read and dropped).
            self.unread_body = true;
        }
        if close {
            // `return 444`: close without a word (a reset with `reset_timedout_connection`);
            // logged with status 444. A client gone while proxied: 499, as nginx logs it.
            let rec = upstream.as_ref().map(|u| u.borrow());
            self.log(
                req,
                srv,
                lc,
                &uri,
                start,
                reply.status,
                0,
                0,
                Vec::new(),
                rec.as_deref(),
                &extras,
            );
            self.unread_input = body_kind != BodyKind::Empty;
            self.reset_if_asked();
            return Ok(false);
        }
        // A body no handler read is discarded so the next request on the connection starts
        // where it should: what has arrived now, and the rest after the answer (as nginx: the
        // answer does not wait for a body nobody reads).
        let mut discard_later = None;
        if left == Left::Unread {
            // Not before one of nginx's own error pages: its special response handler marks
            // the expectation tested before it discards the body (`deny`, `return 404;`, a
            // missing file); a `return` with a text or a URL sends the 100 as it discards.
            let tested = reply.special && !reply.continue_first;
            if req.expect_continue() && self.buf.is_empty() && !tested {
                self.out.extend_from_slice(shoal_http::response::CONTINUE);
                self.flush().await?;
            }
            match self.discard_now(body_kind) {
                Discard::Done => {}
                Discard::Later(d) => discard_later = Some(d),
                Discard::Invalid => {
                    // A malformed chunked body: nginx answers 400 and closes.
                    crate::conn_log!(
                        Level::Info,
                        self.info.number,
                        "client sent invalid chunked body{}",
                        log_ctx(req, srv, &self.info)
                    );
                    self.unread_input = true;
                    *reply = crate::http::reply::error_reply(400, lc);
                }
            }
        }
        let mut keep = req.keep_alive()
            && !too_large
            && !lc.keepalive_timeout().0.is_zero()
            && self.requests < lc.keepalive_requests()
            && start.saturating_duration_since(self.born) < lc.keepalive_time()
            && !self.closing_after_request
            && !self.guard.0.stopping.get();
        if reply.ends_keepalive() || body_left {
            keep = false;
        }
        let logs = !lc.access_logs().is_empty();
        // The request again for each step after the phases (`Req` without the client watch).
        let parts = super::request::ReqParts {
            req,
            srv,
            host,
            start,
            connection_requests: self.requests,
            name_captures,
            cache_zones,
            extras: &extras,
        };
        // `aio threads`, the first piece read ahead, the body filters (the request layer's).
        let mut reply = reply;
        let prepared = {
            let r = parts.with(&self.info);
            let can_sendfile = self.stream.can_sendfile();
            let rewritten = (uri.as_str(), args.as_deref(), &user_vars);
            super::answer::prepare(&r, &mut reply, lc, rewritten, can_sendfile, logs).await?
        };
        if prepared.pool_failed {
            // nginx's output fails: nothing was sent, the connection closes.
            let rec = upstream.as_ref().map(|u| u.borrow());
            let status = reply.status;
            self.log(
                req,
                srv,
                lc,
                &uri,
                start,
                status,
                0,
                0,
                Vec::new(),
                rec.as_deref(),
                &extras,
            );
            self.unread_input = body_kind != BodyKind::Empty;
            return Ok(false);
        }
        let super::answer::Prepared {
            output,
            changes_length,
            sent_headers,
            ..
        } = prepared;
        // No chunked framing in HTTP/1.0 (or with `chunked_transfer_encoding off`): the end of
        // the body is the end of the connection (a HEAD's answer has none to end).
        let no_chunks = !super::framing::chunks_allowed(req, lc);
        if changes_length && no_chunks && req.method() != "HEAD" {
            keep = false;
        }
        match &reply.body {
            // A body of unknown length (an upstream's, or a cached answer's) to an HTTP/1.0
            // client ends with the connection (a HEAD's answer has none to end); a tunnel is
            // the connection's last use.
            Body::Upstream(u)
                if u.length.is_none() && u.has_body() && no_chunks && req.method() != "HEAD" =>
            {
                keep = false
            }
            Body::Unsized(_) | Body::Grpc(_) if no_chunks && req.method() != "HEAD" => keep = false,
            Body::Tunnel(_) => keep = false,
            _ => {}
        }
        let (status, special) = (reply.status, reply.special);
        self.pacing = self.pacing_for(
            (req, srv, host, start, &extras),
            lc,
            &uri,
            &user_vars,
            upstream.as_ref(),
        );
        // The request ssi and addition act for (the writer holds the connection: a copy).
        let sub_info;
        let requester = if output.filters.borrow().iter().any(|f| f.for_request()) {
            sub_info = self.info.clone();
            let r = parts.with(&sub_info);
            Some(RequestOf::main(r, lc, &uri, args, &user_vars))
        } else {
            None
        };
        let written = self
            .write_answer(
                Some((req, srv)),
                reply,
                lc,
                keep,
                &output,
                RefusedShape::default(),
                requester.as_ref().map(|r| r as &dyn Requester),
            )
            .await;
        if self.pacing.is_some() {
            // What is left of a paced answer goes paced too.
            let flushed = match written {
                Ok(_) => self.flush().await,
                Err(_) => Ok(()),
            };
            self.pacing = None;
            flushed?;
        }
        let (head_len, body_len) = written?;
        extras.set_completed();
        drop(output);
        // `mirror`: the answer is out; the request ends when its mirrors have their answers.
        // `post_action`: then the request runs again; it is logged after.
        let mirrors = extras.take_mirrors();
        let mut post = None;
        if mirrors.is_some() || lc.post_action.target().is_some() {
            self.flush().await?;
            let r = parts.with(&self.info);
            if let Some(pending) = mirrors {
                Box::pin(super::mirror::run(&r, pending)).await;
            }
            if lc.post_action.target().is_some() {
                post = super::post_action::run(&r, lc, status, special).await;
            }
        }
        let (log_lc, log_uri, log_status) = match &post {
            Some((done, logged)) => (done.lc, &done.uri, *logged),
            None => (lc, &uri, status),
        };
        if !log_lc.access_logs().is_empty() {
            let rec = upstream.as_ref().map(|u| u.borrow());
            self.log(
                req,
                srv,
                log_lc,
                log_uri,
                start,
                log_status,
                head_len,
                body_len,
                sent_headers,
                rec.as_deref(),
                &extras,
            );
        }
        // The body nobody read, discarded now that the answer is out: the connection stays
        // only if it ends within nginx's lingering bounds.
        if let Some(d) = discard_later {
            if keep {
                keep = self.discard_after_answer(d, lc).await?;
            } else {
                self.unread_input = true;
            }
        }
        // `proxy_cache_background_update`: the stale answer is out; the update runs before
        // the next request is read (nginx's main request waits for its subrequest).
        if let Some(bg) = super::answer::background(upstream.as_ref()) {
            self.flush().await?;
            let r = parts.with(&self.info);
            super::answer::run_background(&r, lc, bg).await;
        }
        if let Some(rec) = upstream {
            super::upstream::record::Record::recycle(rec);
        }
        Ok(keep)
    }

    /// The request's access log lines (see [`super::request::log`]).
    #[allow(clippy::too_many_arguments)]
    fn log(
        &self,
        req: &Request,
        srv: &ServerConf,
        lc: &LocConf,
        uri: &str,
        start: Instant,
        status: u16,
        head_len: u64,
        body_len: u64,
        headers: Vec<(String, String)>,
        upstream: Option<&super::upstream::record::Record>,
        extras: &super::request::Extras,
    ) {
        super::request::log(
            &self.info,
            self.requests,
            req,
            srv,
            lc,
            uri,
            start,
            status,
            head_len,
            body_len,
            headers,
            upstream,
            Some(extras),
        );
    }
}
