//! What the server's room and the client's share between the frame layer and HPACK: what
//! each reports ([`Incoming`], the frame layer's events turned by `poll`), the bodies
//! held to their `content-length` (`Lengths`), fields encoded, blocks decoded for the
//! table's sake only. Each side keeps what differs: a request's checks or an answer's.

use std::ops::Range;

use crate::frame::{ConnError, Connection, Event, Reason, StreamGone};
use crate::hpack::{Bounds, DecodeError, Decoder, Encoder};

/// What the peer sent, as the caller handles it: `H` is the head a side reads, a request's
/// for a server ([`crate::server::Incoming`]), an answer's for a client
/// ([`crate::client::Incoming`]).
#[derive(Debug, PartialEq, Eq)]
pub enum Incoming<H, W> {
    /// A new request (a server's), or a stream's answer (a client's: its final head).
    /// `end_stream`: no body follows.
    Head {
        stream: u32,
        head: H,
        end_stream: bool,
    },
    /// Body bytes: a range of the input given to the side's `poll`, to give back with
    /// [`Connection::consumed`]. With `end_stream`, the body is over (and matched its
    /// `content-length`).
    Data {
        stream: u32,
        data: Range<usize>,
        end_stream: bool,
    },
    /// The body's trailers: it is over.
    Trailers {
        stream: u32,
        fields: crate::server::Fields,
    },
    /// A header block past the decoder's bounds. A server's stream is still open for an
    /// answer (`Server::refuse`; its body is dropped): shoal's answers are nginx's 400 for a
    /// name or value past [`crate::hpack::Bounds::field`], a 431 for the list past
    /// [`crate::hpack::Bounds::list`]. A client's stream was reset (CANCEL).
    TooLarge {
        stream: u32,
        which: crate::hpack::TooLarge,
    },
    /// A malformed head or trailers, or a body that disagrees with its `content-length`: the
    /// stream was reset with PROTOCOL_ERROR. `why` is for the log.
    Malformed { stream: u32, why: W },
    /// The stream is gone: reset by the peer (a client's streams past a server's GOAWAY are
    /// refused so: REFUSED_STREAM), or by us (a server's for a body that disagrees with its
    /// `content-length`; a stream error of the frame layer).
    Reset {
        stream: u32,
        code: Reason,
        by_peer: bool,
    },
    /// The peer is going away (as [`Event::GoAway`]).
    GoAway { last_stream: u32, code: Reason },
    /// A send window grew (as [`Event::WindowOpened`]).
    WindowOpened { stream: u32 },
    /// The peer's settings changed (the encoder follows its table size already).
    SettingsChanged,
    /// A connection error found here (COMPRESSION_ERROR): its GOAWAY is queued; the caller
    /// sends the output and closes. Nothing comes after it.
    Closed(ConnError),
}

/// What both sides hold: the frame layer, HPACK both ways, the bodies coming.
#[derive(Debug)]
pub(crate) struct Codec {
    pub conn: Connection,
    pub decoder: Decoder,
    pub encoder: Encoder,
    /// Huffman-decoded strings while their field is copied out.
    pub scratch: Vec<u8>,
    /// A block while it is encoded.
    pub block: Vec<u8>,
    /// The bodies still coming.
    pub bodies: Lengths,
    /// A connection error was found here (COMPRESSION_ERROR): later events are dropped.
    pub closed: bool,
}

impl Codec {
    /// `table`: our SETTINGS_HEADER_TABLE_SIZE, which the decoder takes at once when above
    /// the protocol's 4,096 (a lower one binds only once the peer acknowledged it).
    pub fn new(conn: Connection, bounds: Bounds, table: u32, encoder: Encoder) -> Codec {
        let mut decoder = Decoder::new(bounds);
        if table as usize > crate::hpack::DEFAULT_TABLE_SIZE {
            decoder.set_limit(table as usize);
        }
        Codec {
            conn,
            decoder,
            encoder,
            scratch: Vec::new(),
            block: Vec::new(),
            bodies: Lengths::default(),
            closed: false,
        }
    }

    /// Queues trailers after a body: `fields` as [`encode_fields`] takes them; they end the
    /// stream. Nothing is encoded for a stream gone (the HPACK tables stay the peer's).
    pub fn send_trailers<'f, I>(&mut self, stream: u32, fields: I) -> Result<(), StreamGone>
    where
        I: IntoIterator<Item = (&'f [u8], &'f [u8])>,
    {
        self.conn.window(stream)?;
        let mut block = std::mem::take(&mut self.block);
        block.clear();
        self.encoder.begin(&mut block);
        encode_fields(&mut self.encoder, fields, &mut block);
        let sent = self.conn.send_headers(stream, &block, true);
        self.block = block;
        sent
    }

    /// Ends the connection for a block HPACK cannot decode: its GOAWAY is queued.
    fn compression_error(&mut self) -> ConnError {
        let e = ConnError {
            code: Reason::COMPRESSION_ERROR,
            what: "client sent invalid header block",
            args: [0; 2],
            role: crate::frame::Role::Server,
        };
        self.conn.close_with(e);
        self.closed = true;
        self.bodies.clear();
        self.conn.error().unwrap_or(e)
    }

    /// Decodes a block for the dynamic table's sake only; `None` unless HPACK cannot (then
    /// the connection's COMPRESSION_ERROR).
    pub fn discard<H, W>(&mut self, block: &[u8]) -> Option<Incoming<H, W>> {
        let r = self
            .decoder
            .decode(block, &mut self.scratch, |_| Ok::<(), ()>(()));
        match r {
            Err(DecodeError::Compression(_)) => Some(self.compression()),
            _ => None,
        }
    }

    /// The connection's end for a block HPACK cannot decode.
    pub fn compression<H, W>(&mut self) -> Incoming<H, W> {
        Incoming::Closed(self.compression_error())
    }

    /// Heap bytes held between messages.
    pub fn heap_bytes(&self) -> usize {
        self.decoder.heap_bytes()
            + self.encoder.heap_bytes()
            + self.scratch.capacity()
            + self.block.capacity()
            + self.bodies.heap_bytes()
    }

    /// Moves out the lists an idle connection does not use ([`Lists`]).
    pub fn take_lists(&mut self) -> Lists {
        let (streams, events) = self.conn.take_lists();
        let mut scratch = std::mem::take(&mut self.scratch);
        let mut block = std::mem::take(&mut self.block);
        scratch.clear();
        block.clear();
        Lists {
            scratch,
            block,
            bodies: self.bodies.take_list(),
            streams,
            events,
        }
    }

    /// Takes the lists of [`Codec::take_lists`], each where this holds none.
    pub fn give_lists(&mut self, l: Lists) {
        let Lists {
            scratch,
            block,
            bodies,
            streams,
            events,
        } = l;
        if self.scratch.capacity() == 0 {
            self.scratch = scratch;
        }
        if self.block.capacity() == 0 {
            self.block = block;
        }
        if self.bodies.0.capacity() == 0 {
            self.bodies.0 = bodies;
        }
        self.conn.give_lists((streams, events));
    }

    /// Frees the buffers not in use (an idle connection): see [`Connection::shrink`].
    pub fn shrink(&mut self) {
        self.scratch = Vec::new();
        self.block = Vec::new();
        self.bodies.shrink();
        self.conn.shrink();
    }
}

/// The methods every side has over its [`Codec`] (in a field `c`): the frame layer, `recv`
/// and `poll`; `$peer` names the other end in their documentation.
macro_rules! side_methods {
    ($side:ident, $peer:literal) => {
        impl $side {
            /// The frame layer: for the body ([`Connection::send_data`]), windows, GOAWAY,
            /// output.
            pub fn conn(&self) -> &Connection {
                &self.c.conn
            }

            pub fn conn_mut(&mut self) -> &mut Connection {
                &mut self.c.conn
            }

            /// Parses the frames `input` holds ([`Connection::recv`]): returns the bytes used.
            pub fn recv(&mut self, input: &[u8]) -> Result<usize, ConnError> {
                self.c.conn.recv(input)
            }

            #[doc = concat!("The next thing the ", $peer, " sent; `input` is what was given")]
            /// to the last `recv`. Take every one before dropping the bytes `recv` used.
            pub fn poll(&mut self, input: &[u8]) -> Option<Incoming> {
                crate::exchange::poll(self, input)
            }
        }
    };
}
pub(crate) use side_methods;

/// A side of the connection, as [`poll`] drives it.
pub(crate) trait Side {
    type Head;
    /// Why a message is malformed, for the log.
    type Why;
    fn codec(&mut self) -> &mut Codec;
    /// Before each event.
    fn before(&mut self) {}
    fn head(
        &mut self,
        stream: u32,
        block: &[u8],
        end_stream: bool,
    ) -> Option<Incoming<Self::Head, Self::Why>>;
    fn trailers(&mut self, stream: u32, block: &[u8]) -> Option<Incoming<Self::Head, Self::Why>>;
    fn data(
        &mut self,
        stream: u32,
        data: Range<usize>,
        end_stream: bool,
    ) -> Option<Incoming<Self::Head, Self::Why>>;
    /// The stream is gone: what the side knew of it goes.
    fn forget(&mut self, stream: u32);
}

/// The next thing the peer sent, as the side reports it; `input` is what was given to the
/// last `recv`.
pub(crate) fn poll<S: Side>(side: &mut S, input: &[u8]) -> Option<Incoming<S::Head, S::Why>> {
    loop {
        let ev = side.codec().conn.poll_event()?;
        if side.codec().closed {
            continue;
        }
        side.before();
        let control = match ev {
            Event::Headers {
                stream,
                block,
                end_stream,
            } => side.head(stream, block.bytes(input), end_stream),
            Event::Trailers { stream, block } => side.trailers(stream, block.bytes(input)),
            Event::Discard { block } => side.codec().discard(block.bytes(input)),
            Event::Data {
                stream,
                data,
                end_stream,
            } => side.data(stream, data, end_stream),
            Event::Reset {
                stream,
                code,
                by_peer,
            } => {
                side.forget(stream);
                Some(Incoming::Reset {
                    stream,
                    code,
                    by_peer,
                })
            }
            Event::GoAway { last_stream, code } => Some(Incoming::GoAway { last_stream, code }),
            Event::WindowOpened { stream } => Some(Incoming::WindowOpened { stream }),
            Event::SettingsChanged => {
                let c = side.codec();
                let size = c.conn.peer_settings().header_table_size;
                c.encoder.set_peer_table_size(size as usize);
                Some(Incoming::SettingsChanged)
            }
        };
        if control.is_some() {
            return control;
        }
    }
}

/// Encodes fields after a head's pseudo-headers (or as trailers): names lowercased, the
/// connection-specific fields and any pseudo-header among them dropped (RFC 9113, 8.2.2).
pub(crate) fn encode_fields<'f, I>(encoder: &mut Encoder, fields: I, block: &mut Vec<u8>)
where
    I: IntoIterator<Item = (&'f [u8], &'f [u8])>,
{
    for (name, value) in fields {
        if dropped(name) {
            continue;
        }
        if name.iter().any(u8::is_ascii_uppercase) {
            encoder.field(&name.to_ascii_lowercase(), value, block);
        } else {
            encoder.field(name, value, block);
        }
    }
}

/// Fields HTTP/2 does not carry (RFC 9113, 8.2.2), whatever their case; pseudo-headers are
/// the sides' own.
pub(crate) fn dropped(name: &[u8]) -> bool {
    const CONNECTION_SPECIFIC: [&[u8]; 5] = [
        b"connection",
        b"keep-alive",
        b"proxy-connection",
        b"transfer-encoding",
        b"upgrade",
    ];
    name.first() == Some(&b':')
        || CONNECTION_SPECIFIC
            .iter()
            .any(|c| c.len() == name.len() && c.eq_ignore_ascii_case(name))
}

/// The lists a connection grows while it has streams and empties once they are answered:
/// its streams, the frame layer's events, the bodies coming, HPACK's scratch and the block
/// being encoded. An idle connection gives them up ([`crate::server::Server::take_lists`])
/// for the next connection of the same thread whose streams start, rather than each
/// growing its own from nothing at every burst of requests and freeing them after it.
#[derive(Debug, Default)]
pub struct Lists {
    scratch: Vec<u8>,
    block: Vec<u8>,
    bodies: Vec<Body>,
    streams: Vec<crate::frame::stream::Stream>,
    events: std::collections::VecDeque<Event>,
}

impl Lists {
    /// Heap bytes held.
    pub fn heap_bytes(&self) -> usize {
        fn bytes<T>(n: usize) -> usize {
            n * std::mem::size_of::<T>()
        }
        self.scratch.capacity()
            + self.block.capacity()
            + bytes::<Body>(self.bodies.capacity())
            + bytes::<crate::frame::stream::Stream>(self.streams.capacity())
            + bytes::<Event>(self.events.capacity())
    }

    /// Frees each list past `max` bytes (one grown by an unusual connection), so that the
    /// lists kept for the next are what usual ones take.
    pub fn bound(&mut self, max: usize) {
        fn at_most<T>(v: &mut Vec<T>, max: usize) {
            if v.capacity() * std::mem::size_of::<T>() > max {
                *v = Vec::new();
            }
        }
        at_most(&mut self.scratch, max);
        at_most(&mut self.block, max);
        at_most(&mut self.bodies, max);
        at_most(&mut self.streams, max);
        if self.events.capacity() * std::mem::size_of::<Event>() > max {
            self.events = Default::default();
        }
    }
}

/// A body still coming.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Body {
    pub stream: u32,
    /// What `content-length` still announces.
    pub left: Option<u64>,
    /// Body bytes so far.
    pub received: u64,
}

impl Body {
    /// The bytes received and those `content-length` announced (for a body that ended short).
    pub fn counts(&self) -> (u64, u64) {
        (self.received, self.received + self.left.unwrap_or(0))
    }
}

/// How a DATA frame's bytes count against their body.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Counted {
    /// No body is expected on the stream (refused, or reset): the bytes are nobody's.
    Unknown,
    Fine,
    /// More than `content-length`: the body is forgotten.
    TooLong,
    /// An end short of `content-length` (its counts, [`Body::counts`]): the body is
    /// forgotten.
    Short(u64, u64),
}

/// The bodies still coming on a connection, by stream id, oldest first.
#[derive(Debug, Default)]
pub(crate) struct Lengths(Vec<Body>);

impl Lengths {
    /// A body is coming on `stream`, announced `left` bytes long (`None`: not told). A
    /// stream already known takes the new length.
    pub fn expect(&mut self, stream: u32, left: Option<u64>) {
        match self.0.iter_mut().find(|b| b.stream == stream) {
            Some(b) => b.left = left,
            None => self.0.push(Body {
                stream,
                left,
                received: 0,
            }),
        }
    }

    /// Forgets `stream`'s body: what was known of it.
    pub fn forget(&mut self, stream: u32) -> Option<Body> {
        let i = self.0.iter().position(|b| b.stream == stream)?;
        Some(self.0.remove(i))
    }

    /// Counts `n` more bytes of `stream`'s body; `end`: its last. A body that ended (well or
    /// not) is forgotten.
    pub fn count(&mut self, stream: u32, n: u64, end: bool) -> Counted {
        let Some(i) = self.0.iter().position(|b| b.stream == stream) else {
            return Counted::Unknown;
        };
        let body = &mut self.0[i];
        body.received += n;
        let counted = match body.left.as_mut() {
            Some(left) if n > *left => Counted::TooLong,
            Some(left) => {
                *left -= n;
                if end && *left > 0 {
                    let (got, declared) = body.counts();
                    Counted::Short(got, declared)
                } else {
                    Counted::Fine
                }
            }
            None => Counted::Fine,
        };
        if counted != Counted::Fine || end {
            self.0.remove(i);
        }
        counted
    }

    #[cfg(test)]
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn heap_bytes(&self) -> usize {
        self.0.capacity() * std::mem::size_of::<Body>()
    }

    /// The list when no body is coming (see [`Codec::take_lists`]).
    pub fn take_list(&mut self) -> Vec<Body> {
        if self.0.is_empty() {
            std::mem::take(&mut self.0)
        } else {
            Vec::new()
        }
    }

    /// Frees the list when no body is coming.
    pub fn shrink(&mut self) {
        if self.0.is_empty() {
            self.0 = Vec::new();
        }
    }

    pub fn clear(&mut self) {
        self.0 = Vec::new();
    }
}
