//! Bodies on both sides of the proxy: the client's request body as read before the upstream is
//! contacted (nginx's `proxy_request_buffering on`: in memory up to
//! `client_body_buffer_size`, beyond it in an unlinked temporary file), and the upstream's
//! answer body, taken from the upstream connection piece by piece as the client is written
//! (of an answer being cached, maybe one range only, while the cache gets it all).
//!
//! An answer's connection goes back to the worker's keep-alive cache only when its body was
//! read to its very end and nothing follows it.

use std::cell::RefCell;
use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use shoal_http::{BodyChunk, ChunkedDecoder};

use super::protocol::BodyCodec;
use super::record::Record;
use crate::deadline::Timer;
use crate::http::range::ByteRange;
use crate::http::transport::Transport;
use crate::upstream::conf::UpstreamConf;

/// How an upstream's body ends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Framing {
    /// No body (HEAD, 1xx, 204, 304).
    None,
    Length(u64),
    Chunked,
    /// Until the upstream closes.
    Close,
    /// Framed by the protocol ([`UpstreamBody::set_codec`]: FastCGI records, memcached).
    Codec,
}

/// One step of reading an upstream body.
pub enum Piece {
    Data(Bytes),
    /// Nothing buffered: [`UpstreamBody::fill`] next (after sending what is gathered).
    NeedMore,
    End,
}

/// Why an upstream body could not be read to its end; the text is nginx's log line start.
#[derive(Debug)]
pub enum BodyError {
    Closed,
    TimedOut,
    Invalid,
    Io(std::io::Error),
    /// The protocol's own words (`upstream sent unsupported FastCGI protocol version: 0`).
    Protocol(String),
}

impl std::fmt::Display for BodyError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            BodyError::Closed => f.write_str("upstream prematurely closed connection"),
            BodyError::TimedOut => f.write_str("upstream timed out (110: Connection timed out)"),
            BodyError::Invalid => f.write_str("upstream sent invalid chunked response"),
            BodyError::Io(e) => write!(f, "recv() failed {}", shoal_conf::os_error(e)),
            BodyError::Protocol(m) => f.write_str(m),
        }
    }
}

/// The body of an upstream's answer, still on its connection.
pub struct UpstreamBody {
    pub stream: Option<Transport>,
    /// Bytes read past what was taken.
    pub buf: BytesMut,
    pub framing: Framing,
    remaining: u64,
    chunked: ChunkedDecoder,
    /// `Content-Length` for the client, when the upstream gave one.
    pub length: Option<u64>,
    /// The upstream allows another request on this connection after this answer.
    pub reusable: bool,
    done: bool,
    pub upstream: Arc<UpstreamConf>,
    pub peer: usize,
    pub born: Instant,
    pub requests: u64,
    pub read_timeout: Duration,
    /// The connection's timer (it goes back to the keep-alive cache with it).
    pub timer: Timer,
    pub record: Rc<RefCell<Record>>,
    /// The proxy cache's fill: given every piece taken, and the end.
    pub tee: Option<Box<dyn crate::http::proxy_cache::serve::Tee>>,
    /// nginx's `u->cacheable` once the headers were read: the answer may be stored as far as
    /// they go (the not-modified and range filters take it on that alone).
    pub cacheable: bool,
    /// `proxy_buffering` for this answer, as its `X-Accel-Buffering` may have turned it: read
    /// ahead of a slow client, and the only road that stores the answer in the cache.
    pub buffering: bool,
    /// The one range a 206 sends of this body (nginx's range body filter on an answer being
    /// cached): what lies outside it is read, and given to the fill, but not taken.
    window: Option<ByteRange>,
    /// Body bytes read so far, where the window is measured from.
    offset: u64,
    /// The protocol's body decoder ([`Framing::Codec`]), with the connection's number and
    /// the log context of what it says on the side.
    codec: Option<(Box<dyn BodyCodec>, u64, String)>,
    /// The protocol, whose settings (`*_buffers`, `*_temp_path`) apply to the body.
    pub proto: super::Proto,
    /// `proxy_limit_rate`: how fast the answer is read.
    pub limit: Option<crate::http::limit_rate::Pacing>,
}

impl UpstreamBody {
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        stream: Transport,
        buf: BytesMut,
        framing: Framing,
        length: Option<u64>,
        reusable: bool,
        upstream: Arc<UpstreamConf>,
        peer: usize,
        born: Instant,
        requests: u64,
        read_timeout: Duration,
        timer: Timer,
        record: Rc<RefCell<Record>>,
    ) -> UpstreamBody {
        UpstreamBody {
            stream: Some(stream),
            buf,
            framing,
            remaining: match framing {
                Framing::Length(n) => n,
                _ => 0,
            },
            chunked: ChunkedDecoder::for_upstream(),
            length,
            reusable,
            done: framing == Framing::None,
            upstream,
            peer,
            born,
            requests,
            read_timeout,
            timer,
            record,
            tee: None,
            cacheable: false,
            buffering: true,
            window: None,
            offset: 0,
            codec: None,
            proto: super::Proto::Http,
            limit: None,
        }
    }

    /// Hands the body's framing to the protocol's decoder; its log lines go to connection
    /// `conn` with `ctx` (`, client: ..., upstream: ...`).
    pub fn set_codec(&mut self, codec: Box<dyn BodyCodec>, conn: u64, ctx: String) {
        self.framing = Framing::Codec;
        self.done = false;
        self.codec = Some((codec, conn, ctx));
    }

    /// Sends only `range` of the body to the client (a single-range 206); its `length` becomes
    /// the range's. The whole body is still read, for the fill.
    pub fn narrow_to(&mut self, range: ByteRange) {
        debug_assert!(self.offset == 0, "narrowed before any of the body is taken");
        self.length = Some(range.end - range.start);
        self.window = Some(range);
    }

    /// The next piece from what is buffered (a cache fill gets a copy); with a window, only
    /// what falls in it.
    pub fn take(&mut self) -> Result<Piece, BodyError> {
        loop {
            let piece = self.take_buffered();
            let Ok(Piece::Data(d)) = piece else {
                return piece;
            };
            if let Some(tee) = self.tee.as_mut() {
                tee.data(&d);
            }
            let at = self.offset;
            self.offset += d.len() as u64;
            let Some(w) = self.window else {
                return Ok(Piece::Data(d));
            };
            let (start, end) = (w.start.max(at), w.end.min(self.offset));
            if start < end {
                return Ok(Piece::Data(
                    d.slice((start - at) as usize..(end - at) as usize),
                ));
            }
            // Outside the window: read on (for the fill), nothing for the client.
        }
    }

    fn take_buffered(&mut self) -> Result<Piece, BodyError> {
        if self.done {
            return Ok(Piece::End);
        }
        match self.framing {
            Framing::None => Ok(Piece::End),
            Framing::Length(_) => {
                if self.remaining == 0 {
                    self.done = true;
                    return Ok(Piece::End);
                }
                if self.buf.is_empty() {
                    return Ok(Piece::NeedMore);
                }
                let n = (self.buf.len() as u64).min(self.remaining) as usize;
                self.remaining -= n as u64;
                Ok(Piece::Data(self.buf.split_to(n).freeze()))
            }
            Framing::Chunked => match self.chunked.decode_buf(&mut self.buf) {
                Ok(BodyChunk::Data(d)) => Ok(Piece::Data(d)),
                Ok(BodyChunk::NeedMore) => Ok(Piece::NeedMore),
                Ok(BodyChunk::Done) => {
                    self.done = true;
                    Ok(Piece::End)
                }
                Err(_) => Err(BodyError::Invalid),
            },
            Framing::Close => {
                if self.buf.is_empty() {
                    return Ok(Piece::NeedMore);
                }
                let n = self.buf.len();
                Ok(Piece::Data(self.buf.split_to(n).freeze()))
            }
            Framing::Codec => {
                let Some((codec, conn, ctx)) = self.codec.as_mut() else {
                    return Err(BodyError::Invalid);
                };
                let (conn, ctx) = (*conn, &*ctx);
                let mut log = |level, line: &dyn std::fmt::Display| {
                    crate::conn_log!(level, conn, "{line} while reading upstream{ctx}");
                };
                let piece = codec.take(&mut self.buf, &mut log);
                if let Ok(Piece::End) = piece {
                    self.done = true;
                }
                piece
            }
        }
    }

    /// Reads more from the upstream (`proxy_read_timeout` bounds the wait).
    pub async fn fill(&mut self) -> Result<(), BodyError> {
        let Some(stream) = self.stream.as_mut() else {
            return Err(BodyError::Closed);
        };
        if self.buf.capacity() - self.buf.len() < 4096 {
            self.buf.reserve(32 * 1024);
        }
        // `proxy_limit_rate`: no more than the pace allows (a wait that is dropped has read
        // nothing).
        let mut room = usize::MAX;
        if let Some(p) = &self.limit {
            room = loop {
                match p.allowed(Instant::now()) {
                    Ok(n) => break n,
                    Err(at) => tokio::time::sleep_until(at.into()).await,
                }
            };
        }
        let spare = self.buf.capacity() - self.buf.len();
        let n = if room < spare {
            // A paced read: into a buffer of the allowed size, then appended.
            let mut piece = BytesMut::with_capacity(room);
            let read = self
                .timer
                .within(self.read_timeout, stream.read_buf(&mut piece))
                .await;
            self.buf.extend_from_slice(&piece);
            read
        } else {
            self.timer
                .within(self.read_timeout, stream.read_buf(&mut self.buf))
                .await
        };
        let n = match n {
            Err(_) => return Err(BodyError::TimedOut),
            Ok(Err(e)) => return Err(BodyError::Io(e)),
            Ok(Ok(n)) => n,
        };
        self.record.borrow_mut().received(n as u64);
        if let Some(p) = &mut self.limit {
            p.wrote(n, Instant::now());
        }
        if n == 0 {
            self.stream = None;
            if let Some((codec, ..)) = self.codec.as_mut() {
                codec.eof()?;
                self.done = true;
                self.reusable = false;
                return Ok(());
            }
            if self.framing == Framing::Close {
                self.done = true;
                self.reusable = false;
                return Ok(());
            }
            return Err(BodyError::Closed);
        }
        Ok(())
    }

    /// Whether the answer has a body at all (not a HEAD answer, a 204 or a 304).
    pub fn has_body(&self) -> bool {
        self.framing != Framing::None
    }

    /// The body has been read to its end.
    pub fn is_done(&self) -> bool {
        self.done
    }

    /// Reads the body to its end with no client, for the cache's fill (a background update,
    /// or an answer the client takes no body of: HEAD, 304), then ends the exchange.
    pub async fn drain(mut self) {
        loop {
            match self.take() {
                Ok(Piece::Data(_)) => {}
                Ok(Piece::NeedMore) => {
                    if self.fill().await.is_err() {
                        break;
                    }
                }
                Ok(Piece::End) | Err(_) => break,
            }
        }
        self.finish();
    }

    /// Ends the exchange, or, when a cache fill rides on a body not read yet, leaves a task
    /// on the worker that reads it into the cache (nginx keeps reading an answer it stores
    /// after the client has what it wants).
    pub fn finish_or_store(self) {
        if self.tee.is_some() && !self.done && self.stream.is_some() {
            tokio::task::spawn_local(self.drain());
        } else {
            self.finish();
        }
    }

    /// Ends the exchange: the connection goes back to the keep-alive cache if its answer was
    /// read whole and nothing more came; otherwise it is closed.
    pub fn finish(mut self) {
        let whole = self.done
            && self.buf.is_empty()
            && self.reusable
            && self.codec.as_ref().is_none_or(|(c, ..)| c.reusable());
        // One clock read for the response time and the keep-alive cache.
        let now = Instant::now();
        self.record.borrow_mut().finish_at(self.done, now);
        if let Some(tee) = self.tee.take() {
            tee.end(self.done);
        }
        if let (true, Some(stream)) = (whole, self.stream.take()) {
            crate::upstream::state::put_idle(
                &self.upstream,
                self.peer,
                stream,
                std::mem::take(&mut self.timer),
                (self.born, now),
                self.requests,
            );
        }
    }
}
