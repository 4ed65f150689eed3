//! Reading a request's head on an HTTP/1 connection: the waits between requests (idle
//! keep-alive, graceful stop, reload, `worker_connections` reuse) and within one
//! (`client_header_timeout`), and the parser and request slot a head is read into.

use std::time::Instant;

use shoal_http::{HeadParser, Request};

use super::Conn;
use crate::http::output::Sink;
use crate::http::ServerConf;
use crate::log::Level;
use crate::status::State;

/// What reading one request takes: the head parser and the slot the request is parsed into.
/// Taken when a request's first byte is there and given back with its answer, so an idle
/// connection holds none (the worker keeps a few, as it keeps read buffers).
pub(super) struct Reading {
    pub(super) parser: HeadParser,
    pub(super) slot: Option<Request>,
}

thread_local! {
    static SPARE_READING: crate::spare::Spares<Box<Reading>> =
        const { crate::spare::Spares::new(64) };
}

impl Reading {
    pub(super) fn take(limits: shoal_http::Limits) -> Box<Reading> {
        let mut rd = SPARE_READING
            .with(crate::spare::Spares::take)
            .unwrap_or_else(|| {
                Box::new(Reading {
                    parser: HeadParser::default(),
                    slot: None,
                })
            });
        rd.parser.next_request(limits);
        rd
    }

    /// The request is answered: its head (which shares the read buffer's memory) goes.
    pub(super) fn give_back(rd: Option<Box<Reading>>) {
        if let Some(rd) = rd {
            SPARE_READING.with(|s| s.give(rd, |rd| rd.slot = None));
        }
    }
}

/// Why reading a head stopped without a request.
pub(super) enum ReadEnd {
    /// A new configuration arrived while the connection was idle: look again.
    Reloaded,
    /// The client closed in the middle of a head: logged as a 400, nothing sent.
    Abandoned,
    /// The client closed, or a graceful stop closed an idle connection: close quietly.
    Closed,
    /// `client_header_timeout` ran out mid-head.
    HeaderTimeout,
    /// `keepalive_timeout` ran out while idle.
    Idle,
    /// Idle for a sweep interval: the connection parks (`park.rs`) until its `deadline`
    /// (`keepalive_timeout`), woken by input or by the wakes of the epoch `since` on.
    Park { deadline: Instant, since: u64 },
}

impl Conn {
    /// Reads until a complete head is in the buffer, and parses it into `reading`'s slot
    /// (taken when the first byte is there). The outer error is I/O; the inner is why there is
    /// no request.
    #[allow(clippy::type_complexity)]
    pub(super) async fn read_head(
        &mut self,
        reading: &mut Option<Box<Reading>>,
        srv: &ServerConf,
    ) -> std::io::Result<Result<Result<(), shoal_http::Error>, ReadEnd>> {
        let worker = self.guard.0.clone();
        if let Some(rd) = reading {
            // Left from a wait a reload ended: the head starts again under today's limits.
            rd.parser.next_request(srv.srv.limits());
        }
        let header_timeout = srv.srv.client_header_timeout();
        // The idle wait after an answer is the answered request's location's (nginx's);
        // before the first request, the default server's.
        let keepalive = self
            .keepalive
            .unwrap_or_else(|| srv.loc.keepalive_timeout().0);
        let mut header_deadline: Option<Instant> = None;
        // A connection back from parking keeps the deadline it had.
        let mut idle_deadline: Option<Instant> = self.resume_deadline.take();
        loop {
            if !self.buf.is_empty() {
                if self.state.get() != State::Reading {
                    // nginx counts a request when its first byte arrives.
                    crate::status::request();
                }
                self.state.set(State::Reading);
                let rd = reading.get_or_insert_with(|| Reading::take(srv.srv.limits()));
                match rd.parser.parse_into(&mut self.buf, &mut rd.slot) {
                    Ok(true) => {
                        self.state.set(State::Writing);
                        return Ok(Ok(Ok(())));
                    }
                    Ok(false) => {}
                    Err(e) => {
                        self.state.set(State::Writing);
                        return Ok(Ok(Err(e)));
                    }
                }
            } else {
                self.state.set(State::Waiting);
            }
            // Nothing more to parse: the gathered answers go out before we wait. (Most go at
            // once; the wait for a client that does not take them is boxed, so its future is
            // not part of every idle connection's task.)
            if !self.out.is_empty() && !super::write::flush_now(&self.stream, &mut self.out)? {
                Box::pin(self.flush()).await?;
            }
            // (Empty lines before a request are dropped as they come, but they began one: nginx
            // waits for its head, with `client_header_timeout`.)
            let idle = self.buf.is_empty() && self.requests > 0 && reading.is_none();
            // A graceful stop closes every connection with no request in progress (while a
            // drain's grace lasts, not one that has yet to send its first).
            let fresh = self.requests == 0 && worker.draining.get();
            if self.buf.is_empty() && worker.stopping.get() && !fresh {
                return Ok(Err(ReadEnd::Closed));
            }
            let deadline = if idle {
                *idle_deadline.get_or_insert_with(|| Instant::now() + keepalive)
            } else {
                *header_deadline.get_or_insert_with(|| Instant::now() + header_timeout)
            };
            let empty = self.buf.is_empty();
            if empty && self.buf.capacity() > 0 {
                // A connection waiting for its next request holds no read buffer (nginx frees
                // its header buffer on keep-alive too): it goes back to the worker, and one is
                // taken again when bytes arrive (see `Transport::poll_read_into`).
                crate::http::transport::give_back_read_buffer(std::mem::take(&mut self.buf));
            }
            if empty {
                // Nor an output buffer.
                crate::http::transport::give_back_out_buffer(&mut self.out);
            }
            let since = worker.wake_idle.epoch();
            let wake = self.idle_slot.wait(since);
            // One timer per connection (not a new one per request), moved only to an earlier
            // deadline: moving it later for each wait cost more than the early wake-up it
            // saves (it fires, is found early, and is moved then).
            let deadline_t = tokio::time::Instant::from_std(deadline);
            if self.timer.deadline() > deadline_t || self.timer.is_elapsed() {
                self.timer.as_mut().reset(deadline_t);
            }
            // Waiting with nothing of a request read: the worker may close this connection
            // to make room for a new one (nginx's reusable connections).
            // An idle keep-alive wait with nothing of a request begun may end in parking.
            // (TLS too: its read returned nothing here only with no decrypted byte left, so
            // the socket's readiness is all a parked connection waits for.)
            let parkable = idle && reading.is_none();
            self.idle_slot.set_idle(empty, parkable);
            let (stream, buf) = (&mut self.stream, &mut self.buf);
            let slot = &self.idle_slot;
            let mut waited = false;
            let n = tokio::select! {
                biased;
                r = std::future::poll_fn(|cx| {
                    let r = stream.poll_read_into(cx, buf);
                    waited |= r.is_pending();
                    r
                }) => {
                    slot.set_reusable(false);
                    r?
                }
                _ = wake, if empty => {
                    if slot.take_park() {
                        // (Not once its deadline passed: the timer closes it now.)
                        if parkable && Instant::now() < deadline {
                            // (Still reusable: a parked connection may be closed for room.)
                            return Ok(Err(ReadEnd::Park { deadline, since }));
                        }
                        continue;
                    }
                    slot.set_reusable(false);
                    // A graceful stop, a reload (look again: the loop closes or moves on), or
                    // `worker_connections` all taken: this one closes for a new one.
                    return Ok(Err(if worker.stopping.get() || slot.reused() { ReadEnd::Closed } else { ReadEnd::Reloaded }));
                }
                _ = &mut self.timer => {
                    if Instant::now() < deadline {
                        // An earlier wait's deadline: this one's is later.
                        self.timer.as_mut().reset(deadline_t);
                        continue;
                    }
                    slot.set_reusable(false);
                    return Ok(Err(if idle { ReadEnd::Idle } else { ReadEnd::HeaderTimeout }));
                }
            };
            if waited {
                // The task gave the worker away while the socket had nothing: the fairness
                // count starts again (only answers read without a wait lead to a yield).
                self.since_yield = 0;
            }
            if n == 0 {
                if !self.buf.is_empty() || reading.is_some() {
                    return Ok(Err(ReadEnd::Abandoned));
                }
                if self.requests > 0 {
                    // nginx's keep-alive handler, without the request's context.
                    crate::conn_log!(
                        Level::Info,
                        self.info.number,
                        "client {} closed keepalive connection",
                        self.info.client()
                    );
                }
                return Ok(Err(ReadEnd::Closed));
            }
            // After an idle wait, `client_header_timeout` starts with the bytes that ended it:
            // the next wait (only if the head is still incomplete) sets it, a few µs later,
            // so a head that came whole costs no clock read for it.
        }
    }
}

/// nginx's info line for each header line `ignore_invalid_headers` dropped (`client sent
/// invalid header line: "x_y: 1" while reading client request headers`): the lines of the
/// head that are not among the request's headers. Its server and host are what nginx knew at
/// that line: the Host's server and value if a Host line came before, else the default
/// server. Called only when info lines are written.
pub(super) fn log_dropped_headers(
    req: &Request,
    srv: &str,
    default_srv: &str,
    info: &crate::http::transport::ConnInfo,
) {
    let head = req.head_bytes();
    let mut kept = req.header_fields().map(|(n, _)| n.as_ptr()).peekable();
    let mut host: Option<&[u8]> = None;
    let mut referer: Option<&[u8]> = None;
    // The request line, then the header lines up to the empty one.
    for line in head.split(|&b| b == b'\n').skip(1) {
        // (nginx takes any number of CRs before a header line's LF.)
        let mut line = line;
        while let [rest @ .., b'\r'] = line {
            line = rest;
        }
        if line.is_empty() {
            break;
        }
        if kept.peek() == Some(&line.as_ptr()) {
            kept.next();
            let value = |name: &[u8]| {
                let n = name.len();
                (line.len() >= n && line[..n].eq_ignore_ascii_case(name))
                    .then(|| line[n..].trim_ascii())
            };
            host = host.or_else(|| value(b"host:"));
            referer = referer.or_else(|| value(b"referer:"));
            continue;
        }
        let end = line
            .iter()
            .rposition(|b| !matches!(b, b' ' | b'\t'))
            .map_or(0, |i| i + 1);
        let (srv, host_ctx) = match host {
            Some(h) => (srv, format!(", host: \"{}\"", shoal_http::log_text(h))),
            None => (default_srv, String::new()),
        };
        let referrer_ctx = referer.map_or(String::new(), |r| {
            format!(", referrer: \"{}\"", shoal_http::log_text(r))
        });
        crate::conn_log!(
            Level::Info,
            info.number,
            "client sent invalid header line: \"{}\" while reading client request headers, \
             client: {}, server: {}, request: \"{} {}{}\"{}{}",
            shoal_http::log_text(&line[..end]),
            info.client(),
            srv,
            req.method(),
            shoal_http::log_text(req.target()),
            req.version().line_suffix(),
            host_ctx,
            referrer_ctx
        );
    }
}

/// What nginx was reading when a head ended without a request: the request line (a
/// "pipelined" one when it came behind the last answer, in the same read) until it ended,
/// then the headers.
pub(super) fn reading(line_read: bool, pipelined: bool) -> &'static str {
    match (line_read, pipelined) {
        (true, _) => "request headers",
        (false, true) => "pipelined request line",
        (false, false) => "request line",
    }
}

/// Whether the request line at the start of `buf` (after the empty lines nginx skips) ended.
pub(super) fn line_ended(buf: &[u8]) -> bool {
    let start = buf.iter().position(|&b| b != b'\r' && b != b'\n');
    start.is_some_and(|s| memchr::memchr(b'\n', &buf[s..]).is_some())
}

/// nginx's info line for a head that ended without a request (`what`: the error, a timeout,
/// the client's close): what it was reading, the server in charge, and, as its log handler
/// adds them, the request line read so far and the first `Host` line's value.
pub(super) fn log_unread_head(
    what: &dyn std::fmt::Display,
    reading: &str,
    srv: &str,
    line: Option<&[u8]>,
    host: Option<&[u8]>,
    info: &crate::http::transport::ConnInfo,
) {
    let line = line.map_or(String::new(), |l| {
        format!(", request: \"{}\"", shoal_http::log_text(l))
    });
    let host = host.map_or(String::new(), |h| {
        format!(", host: \"{}\"", shoal_http::log_text(h))
    });
    crate::conn_log!(
        Level::Info,
        info.number,
        "{what} while reading client {reading}, client: {}, server: {srv}{line}{host}",
        info.client()
    );
}

/// [`log_unread_head`]'s `what` for a head `client_header_timeout` ended.
pub(super) const TIMED_OUT: &str = "client timed out (110: Connection timed out)";
/// [`log_unread_head`]'s `what` for a head the client closed the connection in.
pub(super) const CLOSED: &str = "client prematurely closed connection";

impl Conn {
    /// [`log_unread_head`] for a head the client abandoned or let time out, with the server
    /// that was reading it.
    pub(super) fn log_unread(&self, what: &str, srv: &ServerConf, line: Option<&[u8]>) {
        if crate::log::enabled(Level::Info) {
            let reading = reading(line_ended(&self.buf), self.pipelined_next);
            let host = host_read(&self.buf);
            log_unread_head(&what, reading, srv.name(), line, host, &self.info);
        }
    }
}

/// The value of the first `Host` line among the header lines of `buf` that ended (nginx
/// reads a header line once its LF came).
fn host_read(buf: &[u8]) -> Option<&[u8]> {
    let start = buf.iter().position(|&b| b != b'\r' && b != b'\n')?;
    let mut lines = buf[start..].split_inclusive(|&b| b == b'\n');
    lines.next().filter(|l| l.ends_with(b"\n"))?;
    for line in lines {
        let content = line.strip_suffix(b"\n")?;
        let content = content.strip_suffix(b"\r").unwrap_or(content);
        if content.is_empty() {
            return None;
        }
        if content.len() >= 5 && content[..5].eq_ignore_ascii_case(b"host:") {
            return Some(content[5..].trim_ascii());
        }
    }
    None
}
