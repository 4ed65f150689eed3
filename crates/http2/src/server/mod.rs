//! Requests and answers (RFC 9113, 8): the room between the frame layer and HPACK on one
//! side and the server on the other, sans I/O like both.
//!
//! A [`Server`] owns a connection's [`Connection`], its HPACK [`Decoder`](crate::hpack::Decoder) and [`Encoder`].
//! [`Server::recv`] gives it the socket's bytes; [`Server::poll`] turns the frame layer's
//! events into [`Incoming`]s: a header block becomes a checked [`Request`] (or trailers), a
//! DATA frame is checked against the request's `content-length`. What the frame layer leaves
//! to the layer above is done here:
//!
//! - every header block is decoded, in order, those of refused or reset streams too (the
//!   dynamic table must follow the client's encoder); one HPACK cannot decode ends the
//!   connection with COMPRESSION_ERROR ([`Incoming::Closed`]);
//! - a malformed request (RFC 9113, 8.1.1: the pseudo-headers of 8.3, the field rules of
//!   8.2, a body that disagrees with `content-length`) is reset with PROTOCOL_ERROR and
//!   reported for the log ([`Incoming::Malformed`]); the connection goes on;
//! - a block past the decoder's [`Bounds`] is [`Incoming::TooLarge`]: the caller answers it
//!   (nginx's 400, or 431) with [`Server::refuse`]; its body, if one comes, is dropped.
//!
//! A [`Request`] holds its fields in one buffer, each byte copied once from the header block
//! (or HPACK's tables) on its way through the checks; [`Request::write_http1`] writes the
//! head an HTTP/1 parser reads (shoal's server rebuilds one today), and
//! [`Server::recycle`] gives the buffers back for the next request. Request body bytes are
//! not copied: [`Incoming::Data`] is a range of the input, as in the frame layer, and the
//! caller gives them back with [`Connection::consumed`] (bytes this layer drops, it gives
//! back itself). A stream the caller abandons is reset with [`Server::reset`], so that this
//! layer forgets it too.
//!
//! Memory: `size_of::<Server>()` is 800 bytes on x86-64 (the encoder's memo of places and
//! the tables' marks of checked entries among them); an idle connection that called
//! [`Server::shrink`] keeps on the heap only the HPACK tables the client filled (up to
//! SETTINGS_HEADER_TABLE_SIZE) and the encoder's budget ([`Config::encoder_table`]); one
//! that called [`Server::park`] not even the latter. The lists its streams grow can go to
//! another connection between bursts of requests ([`Server::take_lists`], [`Lists`]).
//!
//! Our SETTINGS_HEADER_TABLE_SIZE, when below the protocol's 4,096, binds the decoder from
//! the first [`Server::poll`] after the `recv` that brought the client's acknowledgement:
//! a block the client sent just before its ACK, in the same read, is held to the new size
//! already. (shoal announces the default 4,096, as nginx does, so this never happens there;
//! the frame layer reports no event for the ACK to do better.)
//!
//! Answers: [`Server::send_answer`] encodes a status and fields (names lowercased,
//! connection-specific fields dropped, RFC 9113, 8.2.2) and queues them
//! ([`Server::send_answer_by`]: fields the caller made fit, handed over as it makes them); the body goes
//! through the frame layer ([`Server::conn_mut`], [`Connection::send_data`]), trailers through
//! [`Server::send_trailers`].
//!
//! ```
//! use shoal_http2::frame::PREFACE;
//! use shoal_http2::server::{Config, Incoming, Server};
//!
//! let mut server = Server::new(Config::default());
//! // GET http://a/: :method GET, :scheme http, :path / by their static indexes, then
//! // :authority "a" (name by index 1).
//! let block = [0x82, 0x86, 0x84, 0x01, 0x01, b'a'];
//! // The preface, an empty SETTINGS, the HEADERS (END_STREAM | END_HEADERS) on stream 1.
//! let mut input = PREFACE.to_vec();
//! input.extend_from_slice(&[0, 0, 0, 4, 0, 0, 0, 0, 0]);
//! input.extend_from_slice(&[0, 0, block.len() as u8, 1, 5, 0, 0, 0, 1]);
//! input.extend_from_slice(&block);
//! let used = server.recv(&input).expect("no connection error");
//! while let Some(incoming) = server.poll(&input) {
//!     if let Incoming::Head { stream, head: request, .. } = incoming {
//!         assert_eq!(request.path(), Some(&b"/"[..]));
//!         assert_eq!(request.host(), Some(&b"a"[..]));
//!         server.send_answer(stream, 200, [(&b"content-type"[..], &b"text/plain"[..])], false)
//!             .unwrap();
//!         server.conn_mut().send_data(stream, b"hello", true).unwrap();
//!     }
//! }
//! input.drain(..used);
//! let n = server.conn().pending_output().len(); // to the socket
//! server.conn_mut().advance(n);
//! ```

mod answer;
mod malformed;
pub(crate) mod request;
#[cfg(test)]
pub(crate) mod tests;

use std::ops::Range;

pub use crate::exchange::Lists;
use crate::exchange::{self, Body, Codec, Counted, Side};
use crate::frame::{self, Connection, Reason};
pub use crate::frame::{ConnError, StreamGone};
use crate::hpack::{Bounds, DecodeError, Encoder};
pub use answer::AnswerFields;
pub use malformed::Malformed;
pub use request::{Fields, Parts, Request};
use request::{Hint, RequestBuilder, TrailersBuilder};

/// The connection's settings and the decoder's bounds (by default nginx's, and no table for
/// the encoder).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Config {
    pub frame: frame::Config,
    /// What one header block may expand to (`large_client_header_buffers`).
    pub bounds: Bounds,
    /// How much of the client's HPACK table the encoder may fill with the answers' fields,
    /// all but cookies and credentials ([`Encoder::for_answers`]; 0: none, and no table kept).
    pub encoder_table: usize,
}

impl Config {
    /// The bounds of nginx's `large_client_header_buffers NUM SIZE`: a name or value up to
    /// SIZE, a header list up to NUM × SIZE, announced as SETTINGS_MAX_HEADER_LIST_SIZE.
    pub fn header_buffers(mut self, num: usize, size: usize) -> Config {
        let list = num.saturating_mul(size);
        self.bounds = Bounds { list, field: size };
        self.frame.max_header_list_size = list.min(u32::MAX as usize) as u32;
        self
    }
}

/// What the client sent, as the caller handles it.
pub type Incoming = crate::exchange::Incoming<Request, Malformed>;

/// One connection's server side: the frame layer, HPACK, and the requests' checks.
#[derive(Debug)]
pub struct Server {
    /// The frame layer, HPACK, the request bodies coming.
    c: Codec,
    /// Our SETTINGS_HEADER_TABLE_SIZE, given to the decoder once the client acknowledged it.
    table_size: Option<u32>,
    /// The last request's size, for the next one's buffer.
    hint: Hint,
    /// A request's buffers given back ([`Server::recycle`]), for the next one.
    spare: Option<Fields>,
    /// See [`Server::refused_host`].
    refused_host: Option<Box<[u8]>>,
}

impl Server {
    /// A connection whose client preface is still to come; our SETTINGS are in the output
    /// already ([`Connection::new`]).
    pub fn new(cfg: Config) -> Server {
        // Until the client acknowledges our SETTINGS it may still use the protocol's 4,096.
        let table = cfg.frame.header_table_size;
        let encoder = Encoder::for_answers(cfg.encoder_table);
        Server {
            c: Codec::new(Connection::new(cfg.frame), cfg.bounds, table, encoder),
            table_size: (table as usize != crate::hpack::DEFAULT_TABLE_SIZE).then_some(table),
            hint: Hint::default(),
            spare: None,
            refused_host: None,
        }
    }

    fn headers(&mut self, stream: u32, block: &[u8], end_stream: bool) -> Option<Incoming> {
        let mut b = RequestBuilder::new(block.len(), self.hint, self.spare.take());
        let decoded = self
            .c
            .decoder
            .decode(block, &mut self.c.scratch, |f| b.field(f));
        let request = match decoded {
            Ok(()) => b.finish(),
            Err(DecodeError::Refused(what)) => Err(what),
            Err(DecodeError::TooLarge(which)) => return Some(Incoming::TooLarge { stream, which }),
            Err(DecodeError::Compression(_)) => return Some(self.c.compression()),
        };
        // (The host of a request refused once built is the request's.)
        let mut built_host = None;
        let request = match request {
            Ok(r) if end_stream && r.content_length().is_some_and(|n| n > 0) => {
                built_host = r.host().map(Box::from);
                Err(Malformed::ClosedEarly)
            }
            r => r,
        };
        match request {
            Ok(request) => {
                self.hint = request.fields().hint();
                if !end_stream {
                    self.c.bodies.expect(stream, request.content_length());
                }
                Some(Incoming::Head {
                    stream,
                    head: request,
                    end_stream,
                })
            }
            Err(what) => {
                let refused = self.malformed(stream, what);
                self.refused_host = built_host.or_else(|| b.host().map(Box::from));
                Some(refused)
            }
        }
    }

    /// The host the last request reported [`Incoming::Malformed`] had when it was refused
    /// (its `host` field, else `:authority`, as far as the block went): nginx names it in
    /// its log line. `None` for a body or trailers refused.
    pub fn refused_host(&self) -> Option<&[u8]> {
        self.refused_host.as_deref()
    }

    fn decode_trailers(&mut self, stream: u32, block: &[u8]) -> Option<Incoming> {
        let Some(body) = self.forget(stream) else {
            // A refused request's: for the table only.
            return self.c.discard(block);
        };
        let mut b = TrailersBuilder::new(block.len(), self.spare.take());
        match self
            .c
            .decoder
            .decode(block, &mut self.c.scratch, |f| b.field(f))
        {
            Ok(()) if body.left.is_some_and(|n| n > 0) => {
                let (received, declared) = body.counts();
                Some(self.malformed(stream, Malformed::BodyShort { received, declared }))
            }
            Ok(()) => Some(Incoming::Trailers {
                stream,
                fields: b.finish(),
            }),
            Err(DecodeError::Refused(what)) => Some(self.malformed(stream, what)),
            Err(DecodeError::TooLarge(which)) => Some(Incoming::TooLarge { stream, which }),
            Err(DecodeError::Compression(_)) => Some(self.c.compression()),
        }
    }

    /// Drops what is known of a stream's body.
    fn forget(&mut self, stream: u32) -> Option<Body> {
        self.c.bodies.forget(stream)
    }

    /// A body that disagrees with its `content-length`: its bytes go back to the window,
    /// the stream is reset (even when both sides ended it).
    fn body_refused(&mut self, stream: u32, n: u64, why: Malformed) -> Incoming {
        self.refused_host = None;
        self.c.conn.consumed(stream, n as u32);
        self.c.conn.reset_ended(stream, Reason::PROTOCOL_ERROR);
        Incoming::Malformed { stream, why }
    }

    fn malformed(&mut self, stream: u32, why: Malformed) -> Incoming {
        self.refused_host = None;
        self.forget(stream);
        self.c.conn.reset(stream, Reason::PROTOCOL_ERROR);
        Incoming::Malformed { stream, why }
    }

    /// Heap bytes held between requests: the HPACK tables, the buffers kept for reuse.
    pub fn heap_bytes(&self) -> usize {
        self.c.heap_bytes() + self.spare.as_ref().map_or(0, Fields::heap_bytes)
    }

    /// Gives back the buffers of a request (or trailers) the caller is done with (its head
    /// written out with [`Request::write_http1`], say): the next request's fields go there
    /// instead of two new allocations. Buffers past 16 KB are freed instead.
    pub fn recycle(&mut self, fields: Fields) {
        if fields.heap_bytes() <= 16 * 1024 {
            self.spare = Some(fields);
        }
    }

    /// [`Server::shrink`], and what an idle connection can rebuild when it is used again:
    /// the encoder's copy of what it put in the client's table ([`Encoder::forget`]). For a
    /// connection idle for a while, not between every two requests: the next answer's
    /// repeated fields cost their literals again.
    pub fn park(&mut self) {
        self.shrink();
        self.c.encoder.forget();
    }

    /// The lists an idle connection does not use, emptied, for another connection's
    /// [`Server::give_lists`] (lists in use stay: they are empty in what this returns).
    pub fn take_lists(&mut self) -> Lists {
        self.c.take_lists()
    }

    /// Lists from [`Server::take_lists`] (bound them first: [`Lists::bound`]), each taken
    /// where this connection holds none.
    pub fn give_lists(&mut self, lists: Lists) {
        self.c.give_lists(lists);
    }

    /// Frees the buffers not in use (an idle connection): see [`Connection::shrink`].
    pub fn shrink(&mut self) {
        self.spare = None;
        self.c.shrink();
    }
}

exchange::side_methods!(Server, "client");

impl Side for Server {
    type Head = Request;
    type Why = Malformed;

    fn codec(&mut self) -> &mut Codec {
        &mut self.c
    }

    fn before(&mut self) {
        if let Some(size) = self.table_size {
            if !self.c.conn.awaiting_settings_ack() {
                self.c.decoder.set_limit(size as usize);
                self.table_size = None;
            }
        }
    }

    fn head(&mut self, stream: u32, block: &[u8], end_stream: bool) -> Option<Incoming> {
        self.headers(stream, block, end_stream)
    }

    fn trailers(&mut self, stream: u32, block: &[u8]) -> Option<Incoming> {
        self.decode_trailers(stream, block)
    }

    fn data(&mut self, stream: u32, data: Range<usize>, end_stream: bool) -> Option<Incoming> {
        let n = data.len() as u64;
        match self.c.bodies.count(stream, n, end_stream) {
            Counted::Fine => Some(Incoming::Data {
                stream,
                data,
                end_stream,
            }),
            // A refused request's body: its window is given back here.
            Counted::Unknown => {
                self.c.conn.consumed(stream, n as u32);
                None
            }
            Counted::TooLong => Some(self.body_refused(stream, n, Malformed::BodyTooLong)),
            Counted::Short(received, declared) => {
                let why = Malformed::BodyShort { received, declared };
                Some(self.body_refused(stream, n, why))
            }
        }
    }

    fn forget(&mut self, stream: u32) {
        self.c.bodies.forget(stream);
    }
}
