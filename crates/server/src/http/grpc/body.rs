//! A gRPC call's bodies once the upstream answered: the upstream's DATA frames relayed to the
//! client as they come, then its trailers (`grpc-status`, `grpc-message`, metadata) as the
//! client's trailers; and the client's DATA frames relayed to the upstream as they come (a
//! task of its own, started with the call: client-streaming and bidirectional calls need
//! both directions at once). Nothing is buffered beyond a frame: each side's window is given
//! back only once the other side took the bytes, so a slow reader slows its writer.
//!
//! An upstream that resets the stream or closes mid-answer is logged as nginx logs it, and
//! the client's stream is reset (its answer's head is out already). A call that ends well
//! gives its connection back to the worker's cache.
//!
//! A client's body whose length was not told is held to `client_max_body_size` as its DATA
//! frames come ([`Limit`], nginx's count for an HTTP/2 stream): the frame that passes it is
//! not sent, the upstream's stream is reset, and the call ends with 413 before the answer's
//! head, or with the client's stream reset after it, logged as nginx logs it.

use std::cell::{Cell, RefCell};
use std::io;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use crate::http::h2::wire::RecvStream as ClientStream;
use bytes::Bytes;
use shoal_http2::client::Fields;
use shoal_http2::frame::Reason;

use super::conn::{self, H2Conn};
use super::wire::{RecvStream, SendStream, StreamError};
use crate::error::{Error, Kind};
use crate::http::h2::sink::H2Sink;
use crate::http::output::{Sink, Who};
use crate::http::transport::ConnInfo;
use crate::http::upstream::record::Record;
use crate::log::Level;
use crate::upstream::conf::UpstreamConf;

/// The task that relays the client's body; aborted when the call ends first.
pub struct Pump(pub tokio::task::JoinHandle<()>);

impl Drop for Pump {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// The answer's body of a gRPC call, still on the upstream's stream.
pub struct GrpcBody {
    pub recv: RecvStream,
    pub read_timeout: Duration,
    pub record: Rc<RefCell<Record>>,
    /// The connection, for the cache once the call ended well.
    pub conn: Option<(Arc<UpstreamConf>, usize, H2Conn)>,
    pub pump: Option<Pump>,
    /// The client's body bytes when it passed `client_max_body_size` (0: it did not).
    pub over: Rc<Cell<u64>>,
}

/// `client_max_body_size` for a client's body whose length was not told: its DATA bytes are
/// counted as they come, as nginx counts an HTTP/2 stream's. The frame that passes the limit
/// is not sent; `over` tells the call how many bytes had come.
pub struct Limit {
    /// 0: none (no limit, or a length told and checked before).
    pub max: u64,
    pub received: u64,
    pub over: Rc<Cell<u64>>,
}

impl Limit {
    /// Counts `n` more bytes; true when they pass the limit (noted in `over`).
    fn passed(&mut self, n: usize) -> bool {
        self.received += n as u64;
        if self.max != 0 && self.received > self.max {
            self.over.set(self.received);
            return true;
        }
        false
    }
}

/// nginx's line for a body of untold length past `client_max_body_size`.
pub fn too_large_line(received: u64) -> String {
    format!(
        "client intended to send too large chunked body: {received} bytes while sending \
         request to upstream"
    )
}

/// How the upstream's side of a call ended badly.
enum Broke {
    TimedOut,
    /// The line nginx logs (`upstream rejected request with error N`, ...).
    Upstream(String),
    /// The client's body passed `client_max_body_size` (its bytes so far): the upstream's
    /// stream was reset for it.
    TooLarge(u64),
    /// The client's side failed (gone, reset, `send_timeout`).
    Client(io::Error),
}

impl GrpcBody {
    /// The next piece of the answer's body (`None` at its end).
    async fn next(&mut self) -> Result<Option<Bytes>, Broke> {
        match crate::deadline::within(self.read_timeout, self.recv.data()).await {
            Err(_) => Err(Broke::TimedOut),
            Ok(None) => Ok(None),
            Ok(Some(Ok(d))) => {
                self.record.borrow_mut().received(d.len() as u64);
                Ok(Some(d))
            }
            Ok(Some(Err(e))) => Err(self.broke(&e)),
        }
    }

    /// What an error on the upstream's stream means: the client's body too large (the
    /// stream was reset for it), or the upstream's doing.
    fn broke(&self, e: &StreamError) -> Broke {
        match self.over.get() {
            0 => Broke::Upstream(e.line()),
            n => Broke::TooLarge(n),
        }
    }

    /// The trailers after the last DATA frame.
    async fn trailers(&mut self) -> Result<Option<Fields>, Broke> {
        match crate::deadline::within(self.read_timeout, self.recv.trailers()).await {
            Err(_) => Err(Broke::TimedOut),
            Ok(Ok(t)) => Ok(t),
            Ok(Err(e)) => Err(self.broke(&e)),
        }
    }

    /// Gives `n` bytes of window back to the upstream: the client took them.
    fn taken(&mut self, n: usize) {
        self.recv.release_capacity(n);
    }

    /// The call ended well: the connection goes back to the cache.
    fn done(mut self) {
        // One clock read for the record and the cache.
        let now = std::time::Instant::now();
        self.record.borrow_mut().finish_at(true, now);
        if let Some((u, peer, c)) = self.conn.take() {
            conn::put_idle(&u, peer, c, now);
        }
    }

    /// Logs how the call broke, its context made only now (most calls never need it).
    fn log_broke(&self, b: &Broke, info: &ConnInfo, who: Who<'_>) {
        let ctx = || match who {
            Some((req, srv)) => self.record.borrow().log_ctx(req, srv, info),
            None => String::new(),
        };
        let number = info.number;
        match b {
            Broke::TimedOut => crate::conn_log!(
                Level::Error,
                number,
                "upstream timed out (110: Connection timed out) while reading upstream{}",
                ctx()
            ),
            Broke::Upstream(m) => {
                crate::conn_log!(Level::Error, number, "{m} while reading upstream{}", ctx())
            }
            Broke::TooLarge(n) => {
                crate::conn_log!(Level::Error, number, "{}{}", too_large_line(*n), ctx())
            }
            Broke::Client(_) => {}
        }
        self.record.borrow_mut().finish(false);
    }

    /// Relays the answer to an HTTP/2 client: DATA frames, then the trailers (or an empty
    /// DATA frame with END_STREAM when the upstream sent none). Returns the body bytes sent.
    pub async fn relay_h2(mut self, sink: &mut H2Sink<'_>, who: Who<'_>) -> io::Result<u64> {
        let mut total = 0u64;
        let result = loop {
            match self.next().await {
                Ok(Some(d)) => {
                    let n = d.len();
                    // (Meanwhile the connection's task takes what the upstream sends, up to
                    // the window it was given: `grpc_buffer_size`.)
                    if let Err(e) = sink.send_bytes(d).await {
                        break Err(Broke::Client(e));
                    }
                    self.taken(n);
                    total += n as u64;
                }
                Ok(None) => break self.trailers().await,
                Err(b) => break Err(b),
            }
        };
        match result {
            Ok(t) => {
                let sent = match t {
                    Some(t) => {
                        let sent = sink.send.send_trailers(t.iter());
                        self.recv.recycle(t);
                        sent
                    }
                    None => sink.send.send_data(Bytes::new(), true),
                };
                sent.map_err(|e| io::Error::from(Error::protocol(e)))?;
                self.done();
                Ok(total)
            }
            Err(b) => {
                self.log_broke(&b, sink.info, who);
                sink.send
                    .send_reset(shoal_http2::frame::Reason::INTERNAL_ERROR);
                Err(match b {
                    Broke::Client(e) => e,
                    _ => upstream_failed(),
                })
            }
        }
    }

    /// Relays the answer to an HTTP/1 client: chunked (the trailers in the last chunk) when
    /// `chunked`, else as it is, to the connection's close. Returns the body bytes sent.
    pub async fn relay_h1<S: Sink>(
        mut self,
        sink: &mut S,
        chunked: bool,
        who: Who<'_>,
    ) -> io::Result<u64> {
        let mut total = 0u64;
        loop {
            match self.next().await {
                Ok(Some(d)) => {
                    let n = d.len();
                    total += sink.emit(&d, chunked);
                    sink.flush().await?;
                    self.taken(n);
                }
                Ok(None) => break,
                Err(b) => {
                    self.log_broke(&b, sink.info(), who);
                    return Err(upstream_failed());
                }
            }
        }
        let trailers = match self.trailers().await {
            Ok(t) => t,
            Err(b) => {
                self.log_broke(&b, sink.info(), who);
                return Err(upstream_failed());
            }
        };
        if chunked {
            let out = sink.out();
            let before = out.len();
            out.extend_from_slice(b"0\r\n");
            for (name, value) in trailers.iter().flat_map(Fields::iter) {
                shoal_http::response::header(out, name, value);
            }
            out.extend_from_slice(b"\r\n");
            total += (out.len() - before) as u64;
        }
        sink.flush().await?;
        self.done();
        Ok(total)
    }
}

/// What a relay gives its caller once the upstream broke the answer (logged already by
/// `log_broke`): the client's stream or connection is then ended.
fn upstream_failed() -> io::Error {
    Error::new(Kind::Protocol, "upstream failed").into()
}

/// An HTTP/2 stream's first window (RFC 9113, 6.9.2): what a new stream may send before the
/// peer says more.
pub const FIRST_WINDOW: usize = 65_535;

/// Where the client's body stands once what had arrived was sent with the request's head.
pub enum Ready {
    /// It ended (the upstream's stream too).
    Ended,
    /// More may come: [`pump`] relays it.
    More,
}

/// Sends the client's DATA frames that are there already, without waiting, up to the
/// stream's first window: they leave with the request's HEADERS in one write (a unary call's
/// whole body, usually). A frame past `limit` resets the upstream's stream.
pub fn send_ready(from: &mut ClientStream, to: &mut SendStream, limit: &mut Limit) -> Ready {
    let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
    let mut sent = 0usize;
    while sent < FIRST_WINDOW {
        // (A pending poll leaves a no-op waker; the pump's first poll puts its own.)
        match from.poll_data(&mut cx) {
            // (A frame past the window waits in the h2 layer's queue: at most one frame.)
            std::task::Poll::Ready(Some(Ok(d))) => {
                let n = d.len();
                if limit.passed(n) {
                    to.send_reset(Reason::CANCEL);
                    return Ready::Ended;
                }
                let end = from.is_end_stream();
                if to.send_data(d, end).is_err() {
                    return Ready::Ended;
                }
                from.release_capacity(n);
                sent += n;
                if end {
                    return Ready::Ended;
                }
            }
            std::task::Poll::Ready(None) => {
                // Ended without more DATA; trailers, if any, are the pump's.
                if from.is_end_stream() {
                    let _ = to.send_data(Bytes::new(), true);
                    return Ready::Ended;
                }
                return Ready::More;
            }
            std::task::Poll::Ready(Some(Err(_))) => {
                to.send_reset(Reason::CANCEL);
                return Ready::Ended;
            }
            std::task::Poll::Pending => return Ready::More,
        }
    }
    Ready::More
}

/// Relays the client's body to the upstream as it comes: DATA frames within the upstream's
/// window (`send_timeout` for each wait), each one's window given back to the client once
/// the upstream took it, then the client's trailers or END_STREAM. `read_timeout` bounds
/// each wait for the client (`client_body_timeout`); a client that fails, or a frame past
/// `limit`, resets the upstream's stream.
pub async fn pump(
    mut from: ClientStream,
    mut to: SendStream,
    read_timeout: Duration,
    send_timeout: Duration,
    mut limit: Limit,
) {
    loop {
        match crate::deadline::within(read_timeout, from.data()).await {
            Ok(Some(Ok(d))) => {
                let n = d.len();
                if limit.passed(n) {
                    to.send_reset(Reason::CANCEL);
                    return;
                }
                // The client's last frame (no trailers after it) ends the upstream's stream
                // too: one frame, not an empty one after it.
                let last = from.is_end_stream();
                if !send_data(&mut to, d, send_timeout, last).await {
                    return;
                }
                from.release_capacity(n);
                if last {
                    return;
                }
            }
            Ok(None) => {
                let end = match from.trailers().await {
                    Ok(Some(t)) => {
                        let fields = t.iter().map(|(n, v)| (n.as_str().as_bytes(), v.as_bytes()));
                        to.send_trailers(fields)
                    }
                    _ => to.send_data(Bytes::new(), true),
                };
                let _ = end;
                return;
            }
            Ok(Some(Err(_))) | Err(_) => {
                to.send_reset(Reason::CANCEL);
                return;
            }
        }
    }
}

/// Sends `d` on `to` as its window takes it (`send_timeout` for each wait), its last frame
/// with END_STREAM when `end`; false when the stream failed (it is reset).
pub(super) async fn send_data(
    to: &mut SendStream,
    mut d: Bytes,
    send_timeout: Duration,
    end: bool,
) -> bool {
    if d.is_empty() && end {
        return to.send_data(d, true).is_ok();
    }
    while !d.is_empty() {
        to.reserve_capacity(d.len());
        let cap = loop {
            let c = to.capacity();
            if c > 0 {
                break Some(c);
            }
            let wait = std::future::poll_fn(|cx| to.poll_capacity(cx));
            match crate::deadline::within(send_timeout, wait).await {
                Ok(Some(Ok(_))) => {}
                _ => break None,
            }
        };
        let Some(cap) = cap else {
            to.send_reset(Reason::CANCEL);
            return false;
        };
        let piece = d.split_to(cap.min(d.len()));
        if to.send_data(piece, end && d.is_empty()).is_err() {
            return false;
        }
    }
    true
}

/// Sends a body read whole, then END_STREAM.
pub async fn send_all(to: &mut SendStream, d: Bytes, send_timeout: Duration) {
    send_data(to, d, send_timeout, true).await;
}
