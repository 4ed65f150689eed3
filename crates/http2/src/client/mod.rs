//! A client's requests and answers (RFC 9113, 8): the frame layer in its client [`Role`](crate::frame::Role) and
//! HPACK, for an upstream connection (shoal's `grpc_pass`), sans I/O like the server's room.
//!
//! A [`Client`] owns a connection's [`Connection`], its HPACK [`Decoder`](crate::hpack::Decoder) and [`Encoder`].
//! [`Client::request`] encodes a request's head and opens its stream; the body goes through
//! the frame layer ([`Client::conn_mut`], [`Connection::send_data`], within the server's
//! windows), trailers through [`Client::send_trailers`]. [`Client::recv`] gives it the
//! socket's bytes; [`Client::poll`] turns the frame layer's events into [`Incoming`]s:
//!
//! - every header block is decoded, in order, those of reset streams too (the dynamic table
//!   must follow the server's encoder); one HPACK cannot decode ends the connection with
//!   COMPRESSION_ERROR ([`Incoming::Closed`]);
//! - an answer's head is checked (RFC 9113, 8.3.2: one `:status` of three digits, no other
//!   pseudo-header; the field rules of 8.2) and interim (1xx) heads are skipped; a malformed
//!   head, trailers with pseudo-headers, or a body that disagrees with `content-length` reset
//!   the stream with PROTOCOL_ERROR ([`Incoming::Malformed`], for the log);
//! - a head past the decoder's [`Bounds`] resets the stream ([`Incoming::TooLarge`]).
//!
//! Answer body bytes are not copied: [`Incoming::Data`] is a range of the input, and the
//! caller gives them back with [`Connection::consumed`] as it takes them (the server's
//! windows reopen then: a slow reader slows the server). The frame layer's receiver rules and
//! flood limits are the server's, in the client's role: a server may open no stream (its
//! pushes are refused by our SETTINGS), DATA before a head is malformed, and a GOAWAY
//! reports the streams it did not process as refused ([`Reason::REFUSED_STREAM`]).
//!
//! ```
//! use shoal_http2::client::{Client, Config, Incoming, RequestHead};
//!
//! let mut client = Client::new(Config::default());
//! let head = RequestHead { method: b"POST", scheme: b"http", authority: b"a", path: b"/s/M" };
//! let stream = client.request(&head, [(&b"te"[..], &b"trailers"[..])], false).unwrap();
//! client.conn_mut().send_data(stream, b"\0\0\0\0\0", true).unwrap();
//! let n = client.conn().pending_output().len(); // the preface, SETTINGS, HEADERS, DATA
//! client.conn_mut().advance(n);
//! // The server's SETTINGS, then its answer: HEADERS `:status 200` (static index 8).
//! let mut input = vec![0, 0, 0, 4, 0, 0, 0, 0, 0];
//! input.extend_from_slice(&[0, 0, 1, 1, 4, 0, 0, 0, 1, 0x88]);
//! let used = client.recv(&input).expect("no connection error");
//! let mut status = 0;
//! while let Some(incoming) = client.poll(&input) {
//!     if let Incoming::Head { head: response, .. } = incoming {
//!         status = response.status();
//!     }
//! }
//! assert_eq!((status, used), (200, input.len()));
//! ```

mod repeat;
#[cfg(test)]
mod tests;

use std::ops::Range;

use crate::exchange::{self, Codec, Counted, Side};
use crate::frame::{self, Connection, Reason, Refused};
pub use crate::frame::{ConnError, StreamGone};
use crate::hpack::{Bounds, DecodeError, Encoder, Field};
use crate::server::request::{check_forbidden, check_regular, parse_length, Hint, TrailersBuilder};
pub use crate::server::Fields;

/// The connection's settings and the decoder's bounds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Config {
    /// Each stream's receive window (`initial_window_size`), the connection's, the largest
    /// frame and header list we take.
    pub frame: frame::Config,
    /// What one answer's header block may expand to.
    pub bounds: Bounds,
    /// How much of the server's HPACK table the encoder may fill (0: none).
    pub encoder_table: usize,
}

impl Default for Config {
    fn default() -> Config {
        Config {
            frame: frame::Config {
                // A server opens no stream: nothing to bound.
                max_concurrent_streams: 0,
                initial_window_size: frame::DEFAULT_WINDOW,
                connection_window: frame::DEFAULT_WINDOW,
                ..frame::Config::default()
            },
            bounds: Bounds::default(),
            encoder_table: crate::hpack::DEFAULT_TABLE_SIZE,
        }
    }
}

/// A request's pseudo-headers (RFC 9113, 8.3.1).
#[derive(Clone, Copy, Debug)]
pub struct RequestHead<'a> {
    pub method: &'a [u8],
    pub scheme: &'a [u8],
    pub authority: &'a [u8],
    pub path: &'a [u8],
}

/// An answer's head: its status and fields, checked.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Response {
    status: u16,
    fields: Fields,
    content_length: Option<u64>,
}

impl Response {
    pub fn status(&self) -> u16 {
        self.status
    }

    /// The regular fields, in order.
    pub fn fields(&self) -> &Fields {
        &self.fields
    }

    pub fn content_length(&self) -> Option<u64> {
        self.content_length
    }

    /// The regular fields, kept (the head's `$upstream_http_*`) once its status was read.
    pub fn into_fields(self) -> Fields {
        self.fields
    }
}

/// What the server sent, as the caller handles it.
pub type Incoming = crate::exchange::Incoming<Response, &'static str>;

/// One connection's client side: the frame layer, HPACK, and the answers' checks.
#[derive(Debug)]
pub struct Client {
    /// The frame layer, HPACK, the answers' bodies coming (with what their
    /// `content-length` still announces).
    c: Codec,
    /// Streams whose request was a HEAD (their answer has no body, whatever its length).
    heads_only: Vec<u32>,
    /// What the last answer's head took: the next one's room (a server's answers on a
    /// connection look alike, and an indexed field is one byte for many).
    head_hint: Hint,
    /// The last request's block, for the same head again.
    repeat: repeat::Repeat,
    /// Trailers the caller was done with ([`Client::recycle`]): the next ones' buffers.
    spare: Option<Fields>,
}

/// The most heap a recycled [`Fields`] may hold to be kept.
const SPARE_MAX: usize = 4096;

impl Client {
    /// A connection to a server: the preface and our SETTINGS are in the output already.
    pub fn new(cfg: Config) -> Client {
        let table = cfg.frame.header_table_size;
        let encoder = Encoder::for_requests(cfg.encoder_table);
        Client {
            c: Codec::new(Connection::client(cfg.frame), cfg.bounds, table, encoder),
            heads_only: Vec::new(),
            head_hint: Hint::default(),
            repeat: repeat::Repeat::default(),
            spare: None,
        }
    }

    /// Gives back trailers the caller is done with: the next answer's trailers are decoded
    /// into their buffers (a call's trailers are alike the last one's: no allocation).
    pub fn recycle(&mut self, fields: Fields) {
        if fields.heap_bytes() <= SPARE_MAX {
            self.spare = Some(fields);
        }
    }

    /// Opens a stream with a request's head: the pseudo-headers, then `fields` (names
    /// lowercased; the connection-specific ones and any pseudo-header among them dropped,
    /// RFC 9113, 8.2.2). `end_stream`: a request without a body. Returns the stream's id.
    pub fn request<'f, I>(
        &mut self,
        head: &RequestHead<'_>,
        fields: I,
        end_stream: bool,
    ) -> Result<u32, Refused>
    where
        I: IntoIterator<Item = (&'f [u8], &'f [u8])>,
    {
        if self.c.closed {
            return Err(Refused::Closed);
        }
        self.c.conn.can_open()?;
        let mut block = std::mem::take(&mut self.c.block);
        block.clear();
        let e = &mut self.c.encoder;
        e.begin(&mut block);
        self.repeat.encode(e, head, fields, &mut block);
        // (Encoded only once the stream could open: the server's table follows what it
        // receives, and what the encoder put in its copy must go.)
        let opened = self.c.conn.open_stream(&block, end_stream);
        self.c.block = block;
        let id = opened.expect("can_open said yes");
        self.c.bodies.expect(id, None);
        if head.method == b"HEAD" {
            self.heads_only.push(id);
        }
        Ok(id)
    }

    /// Queues a request's trailers after its body: `fields` as [`Client::request`] takes
    /// them; they end the request.
    pub fn send_trailers<'f, I>(&mut self, stream: u32, fields: I) -> Result<(), StreamGone>
    where
        I: IntoIterator<Item = (&'f [u8], &'f [u8])>,
    {
        self.repeat.forget();
        self.c.send_trailers(stream, fields)
    }

    /// Resets a stream (a call abandoned): [`Connection::reset`], and what this layer knew
    /// of its answer is dropped. Prefer it to the frame layer's.
    pub fn reset(&mut self, stream: u32, code: Reason) {
        self.forget_body(stream);
        self.c.conn.reset(stream, code);
    }

    fn decode_head(&mut self, stream: u32, block: &[u8], end_stream: bool) -> Option<Incoming> {
        let mut b = ResponseBuilder::new(block.len(), self.head_hint);
        let decoded = self
            .c
            .decoder
            .decode(block, &mut self.c.scratch, |f| b.field(f));
        let response = match decoded {
            Ok(()) => b.finish(),
            Err(DecodeError::Refused(what)) => Err(what),
            Err(DecodeError::TooLarge(which)) => {
                self.reset(stream, Reason::CANCEL);
                return Some(Incoming::TooLarge { stream, which });
            }
            Err(DecodeError::Compression(_)) => return Some(self.c.compression()),
        };
        let response = match response {
            Ok(r) if r.status < 200 && end_stream => Err("upstream sent interim head that ended"),
            Ok(r) if r.status < 200 => {
                // 1xx: the final head is still to come (RFC 9113, 8.1).
                self.c.conn.interim(stream);
                let _ = r;
                return None;
            }
            r => r,
        };
        let response = match response {
            Ok(r) => r,
            Err(what) => return Some(self.malformed(stream, what)),
        };
        self.head_hint = response.fields.hint();
        let no_body = matches!(response.status, 204 | 304) || self.heads_only.contains(&stream);
        let left = response.content_length.filter(|_| !no_body);
        if end_stream {
            self.forget_body(stream);
            if left.is_some_and(|n| n > 0) {
                return Some(self.malformed(stream, "upstream sent too short body"));
            }
        } else if self.c.bodies.forget(stream).is_some() {
            self.c.bodies.expect(stream, left);
        }
        Some(Incoming::Head {
            stream,
            head: response,
            end_stream,
        })
    }

    fn decode_trailers(&mut self, stream: u32, block: &[u8]) -> Option<Incoming> {
        let Some(body) = self.forget_body(stream) else {
            return self.c.discard(block);
        };
        let mut b = TrailersBuilder::new(block.len(), self.spare.take());
        match self
            .c
            .decoder
            .decode(block, &mut self.c.scratch, |f| b.field(f))
        {
            Ok(()) if body.left.is_some_and(|n| n > 0) => {
                Some(self.malformed(stream, "upstream sent too short body"))
            }
            Ok(()) => Some(Incoming::Trailers {
                stream,
                fields: b.finish(),
            }),
            Err(DecodeError::Refused(_)) => {
                Some(self.malformed(stream, "upstream sent invalid trailer"))
            }
            Err(DecodeError::TooLarge(which)) => {
                self.c.conn.reset(stream, Reason::CANCEL);
                Some(Incoming::TooLarge { stream, which })
            }
            Err(DecodeError::Compression(_)) => Some(self.c.compression()),
        }
    }

    /// Drops what is known of a stream's answer.
    fn forget_body(&mut self, stream: u32) -> Option<exchange::Body> {
        if let Some(i) = self.heads_only.iter().position(|&s| s == stream) {
            self.heads_only.swap_remove(i);
        }
        self.c.bodies.forget(stream)
    }

    fn malformed(&mut self, stream: u32, what: &'static str) -> Incoming {
        self.forget_body(stream);
        self.c.conn.reset_ended(stream, Reason::PROTOCOL_ERROR);
        Incoming::Malformed { stream, why: what }
    }

    /// Frees the buffers not in use (an idle connection): see [`Connection::shrink`].
    pub fn shrink(&mut self) {
        self.heads_only = Vec::new();
        self.spare = None;
        self.repeat.shrink();
        self.c.shrink();
    }
}

exchange::side_methods!(Client, "server");

impl Side for Client {
    type Head = Response;
    type Why = &'static str;

    fn codec(&mut self) -> &mut Codec {
        &mut self.c
    }

    fn head(&mut self, stream: u32, block: &[u8], end_stream: bool) -> Option<Incoming> {
        self.decode_head(stream, block, end_stream)
    }

    fn trailers(&mut self, stream: u32, block: &[u8]) -> Option<Incoming> {
        self.decode_trailers(stream, block)
    }

    fn data(&mut self, stream: u32, data: Range<usize>, end_stream: bool) -> Option<Incoming> {
        let n = data.len() as u64;
        match self.c.bodies.count(stream, n, end_stream) {
            Counted::Fine => {
                if end_stream {
                    self.forget_body(stream);
                }
                Some(Incoming::Data {
                    stream,
                    data,
                    end_stream,
                })
            }
            // An answer this layer refused: its window is given back here.
            Counted::Unknown => {
                self.c.conn.consumed(stream, n as u32);
                None
            }
            Counted::TooLong | Counted::Short(..) => {
                self.c.conn.consumed(stream, n as u32);
                let what = "upstream sent body that disagrees with its length";
                Some(self.malformed(stream, what))
            }
        }
    }

    fn forget(&mut self, stream: u32) {
        self.forget_body(stream);
    }
}

/// Builds a [`Response`] from the fields of one header block, checking each as it comes.
struct ResponseBuilder {
    fields: Fields,
    status: Option<u16>,
    content_length: Option<u64>,
    regular_seen: bool,
}

impl ResponseBuilder {
    fn new(block_len: usize, hint: Hint) -> ResponseBuilder {
        ResponseBuilder {
            fields: Fields::with_capacity(block_len, hint, None),
            status: None,
            content_length: None,
            regular_seen: false,
        }
    }

    fn field(&mut self, f: Field<'_>) -> Result<(), &'static str> {
        if f.name.first() == Some(&b':') {
            if self.regular_seen {
                return Err("upstream sent pseudo-header after a regular header");
            }
            if f.name != b":status" {
                return Err("upstream sent invalid pseudo-header");
            }
            if self.status.is_some() {
                return Err("upstream sent duplicate :status header");
            }
            self.status = Some(match f.value {
                [a @ b'1'..=b'9', b @ b'0'..=b'9', c @ b'0'..=b'9'] => {
                    u16::from(a - b'0') * 100 + u16::from(b - b'0') * 10 + u16::from(c - b'0')
                }
                _ => return Err("upstream sent invalid :status header"),
            });
            return Ok(());
        }
        self.regular_seen = true;
        // A field from the HPACK tables (an upstream's answers repeat theirs) had its
        // characters checked once, when stored.
        let checked = match f.checked {
            true => check_forbidden(f.name, f.value),
            false => check_regular(f.name, f.value),
        };
        if checked.is_err() {
            return Err("upstream sent invalid header");
        }
        if f.name == b"content-length" {
            let n = parse_length(f.value).map_err(|_| "upstream sent invalid content-length")?;
            if self.content_length.is_some_and(|m| m != n) {
                return Err("upstream sent duplicate content-length header");
            }
            self.content_length = Some(n);
        }
        self.fields.push(f.name, f.value);
        Ok(())
    }

    fn finish(self) -> Result<Response, &'static str> {
        let status = self.status.ok_or("upstream sent no :status header")?;
        Ok(Response {
            status,
            fields: self.fields,
            content_length: self.content_length,
        })
    }
}
