//! The frame layer and the connection's state (RFC 9113), for a server or a client
//! ([`Role`]), sans I/O.
//!
//! The caller owns the socket and the read buffer. [`Connection::recv`] parses the whole frames
//! its input holds (a partial frame stays in the caller's buffer: `recv` says how many bytes it
//! consumed) and queues [`Event`]s the caller takes with [`Connection::poll_event`]. Request
//! bodies are not copied: a DATA event is a range of the input given to the `recv` that queued
//! it, so the caller takes every event before it drops the consumed bytes. A header block is a
//! range too when it came in one HEADERS frame, or an owned buffer when CONTINUATIONs carried it;
//! it stays undecoded (HPACK is the `hpack` room, one level up).
//!
//! Frames to send go into an internal buffer the caller drains ([`Connection::pending_output`],
//! [`Connection::advance`]); DATA frames may be filled by the caller in place
//! ([`Connection::send_data_with`]: a file's bytes read straight into the output).
//!
//! Every rule RFC 9113 gives a receiver is checked here, with the error it names: a connection
//! error queues a GOAWAY and makes `recv` return [`ConnError`] (the caller flushes the output and
//! closes); a stream error queues a RST_STREAM and an [`Event::Reset`]. Floods (rapid reset,
//! frames that make us work without progress, a peer that never reads) are counted in
//! `flood.rs` and end the connection with ENHANCE_YOUR_CALM.
//!
//! Memory: a stream is a 20-byte record in a vector sorted by id, removed once closed; an idle
//! connection that called [`Connection::shrink`] holds no heap buffer at all.
//! `size_of::<Connection>()` is 304 bytes on x86-64.
//!
//! A server's loop, in short (HPACK and the socket left out):
//!
//! ```
//! use shoal_http2::frame::{Config, Connection, Event, PREFACE};
//!
//! let mut conn = Connection::new(Config::default());
//! // What the socket gave: the preface, an empty SETTINGS, a GET on stream 1.
//! let mut buf = PREFACE.to_vec();
//! buf.extend_from_slice(&[0, 0, 0, 4, 0, 0, 0, 0, 0]);
//! buf.extend_from_slice(&[0, 0, 2, 1, 5, 0, 0, 0, 1, 0x82, 0x84]);
//! let used = conn.recv(&buf).expect("no connection error");
//! while let Some(event) = conn.poll_event() {
//!     if let Event::Headers { stream, block, .. } = event {
//!         let _request = block.bytes(&buf); // to the HPACK decoder
//!         conn.send_headers(stream, &[0x88], false).unwrap(); // :status 200
//!         conn.send_data(stream, b"hello", true).unwrap();
//!     }
//! }
//! buf.drain(..used);
//! let out = conn.pending_output().len(); // written to the socket
//! conn.advance(out);
//! assert_eq!(conn.open_streams(), 0);
//! ```

mod conn;
mod control;
mod flood;
mod parse;
mod send;
pub(crate) mod stream;
mod write;

#[cfg(test)]
pub(crate) mod tests;

use std::ops::Range;

pub use conn::{Connection, STREAM_ID_HIGH};
pub use flood::IDLE_FRAMES;
pub use send::Refused;

/// The client connection preface (RFC 9113, 3.4).
pub const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// The largest window and stream id: 2^31 − 1.
pub const MAX_WINDOW: u32 = 0x7fff_ffff;

/// A frame header's length.
pub const HEAD_LEN: usize = 9;

/// The initial window and frame size every peer starts with (RFC 9113, 6.5.2).
pub const DEFAULT_WINDOW: u32 = 65_535;
/// See [`DEFAULT_WINDOW`].
pub const DEFAULT_FRAME_SIZE: u32 = 16_384;
/// The largest SETTINGS_MAX_FRAME_SIZE: 2^24 − 1.
pub const MAX_FRAME_SIZE: u32 = 0xff_ffff;

/// Frame types (RFC 9113, 6).
pub(crate) mod kind {
    pub const DATA: u8 = 0x0;
    pub const HEADERS: u8 = 0x1;
    pub const PRIORITY: u8 = 0x2;
    pub const RST_STREAM: u8 = 0x3;
    pub const SETTINGS: u8 = 0x4;
    pub const PUSH_PROMISE: u8 = 0x5;
    pub const PING: u8 = 0x6;
    pub const GOAWAY: u8 = 0x7;
    pub const WINDOW_UPDATE: u8 = 0x8;
    pub const CONTINUATION: u8 = 0x9;
}

/// Frame flags.
pub(crate) mod flag {
    pub const END_STREAM: u8 = 0x1;
    pub const ACK: u8 = 0x1;
    pub const END_HEADERS: u8 = 0x4;
    pub const PADDED: u8 = 0x8;
    pub const PRIORITY: u8 = 0x20;
}

/// SETTINGS identifiers (RFC 9113, 6.5.2).
pub(crate) mod setting {
    pub const HEADER_TABLE_SIZE: u16 = 0x1;
    pub const ENABLE_PUSH: u16 = 0x2;
    pub const MAX_CONCURRENT_STREAMS: u16 = 0x3;
    pub const INITIAL_WINDOW_SIZE: u16 = 0x4;
    pub const MAX_FRAME_SIZE: u16 = 0x5;
    pub const MAX_HEADER_LIST_SIZE: u16 = 0x6;
}

/// An error code of RST_STREAM and GOAWAY (RFC 9113, 7). A peer's unknown code is kept as is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Reason(pub u32);

impl Reason {
    pub const NO_ERROR: Reason = Reason(0x0);
    pub const PROTOCOL_ERROR: Reason = Reason(0x1);
    pub const INTERNAL_ERROR: Reason = Reason(0x2);
    pub const FLOW_CONTROL_ERROR: Reason = Reason(0x3);
    pub const SETTINGS_TIMEOUT: Reason = Reason(0x4);
    pub const STREAM_CLOSED: Reason = Reason(0x5);
    pub const FRAME_SIZE_ERROR: Reason = Reason(0x6);
    pub const REFUSED_STREAM: Reason = Reason(0x7);
    pub const CANCEL: Reason = Reason(0x8);
    pub const COMPRESSION_ERROR: Reason = Reason(0x9);
    pub const CONNECT_ERROR: Reason = Reason(0xa);
    pub const ENHANCE_YOUR_CALM: Reason = Reason(0xb);
    pub const INADEQUATE_SECURITY: Reason = Reason(0xc);
    pub const HTTP_1_1_REQUIRED: Reason = Reason(0xd);

    /// The code's name in RFC 9113, for log lines; `None` for a code it does not define.
    pub fn name(self) -> Option<&'static str> {
        const NAMES: [&str; 14] = [
            "NO_ERROR",
            "PROTOCOL_ERROR",
            "INTERNAL_ERROR",
            "FLOW_CONTROL_ERROR",
            "SETTINGS_TIMEOUT",
            "STREAM_CLOSED",
            "FRAME_SIZE_ERROR",
            "REFUSED_STREAM",
            "CANCEL",
            "COMPRESSION_ERROR",
            "CONNECT_ERROR",
            "ENHANCE_YOUR_CALM",
            "INADEQUATE_SECURITY",
            "HTTP_1_1_REQUIRED",
        ];
        NAMES.get(self.0 as usize).copied()
    }
}

/// What the server announces and enforces, from its configuration.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Config {
    /// SETTINGS_MAX_CONCURRENT_STREAMS (`http2_max_concurrent_streams`): a stream past it is
    /// refused with REFUSED_STREAM.
    pub max_concurrent_streams: u32,
    /// SETTINGS_INITIAL_WINDOW_SIZE: each stream's receive window (`http2_body_preread_size`).
    pub initial_window_size: u32,
    /// The connection's receive window, raised to it by a WINDOW_UPDATE right after the
    /// preface's SETTINGS (nginx opens it to 2^31 − 1).
    pub connection_window: u32,
    /// SETTINGS_MAX_FRAME_SIZE: the largest frame accepted, so the caller's read buffer holds
    /// at least this plus 9 bytes.
    pub max_frame_size: u32,
    /// SETTINGS_HEADER_TABLE_SIZE: the HPACK decoder's dynamic table (announced only when not
    /// the default 4096).
    pub header_table_size: u32,
    /// SETTINGS_MAX_HEADER_LIST_SIZE. An encoded header block longer than this plus
    /// [`Config::header_slack`] is not buffered: the connection ends (CONTINUATION flood).
    pub max_header_list_size: u32,
    /// How far past `max_header_list_size` an encoded block may go (HPACK may encode a list in
    /// more bytes than its RFC 9113 size for unindexed literals; the decoder checks the list).
    pub header_slack: u32,
    /// The output queue's bound: past it, a PING or SETTINGS that wants an answer ends the
    /// connection (a peer that sends them but never reads).
    pub max_output: usize,
}

impl Default for Config {
    /// nginx's defaults: 128 streams, a 64 KB body preread window, 16 KB frames.
    fn default() -> Config {
        Config {
            max_concurrent_streams: 128,
            initial_window_size: 65_536,
            connection_window: MAX_WINDOW,
            max_frame_size: DEFAULT_FRAME_SIZE,
            header_table_size: 4096,
            max_header_list_size: 16 * 1024,
            header_slack: 4096,
            max_output: 64 * 1024,
        }
    }
}

/// The settings the peer announced, as they stand.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PeerSettings {
    /// For the HPACK encoder.
    pub header_table_size: u32,
    pub enable_push: bool,
    /// Each stream's send window starts here.
    pub initial_window_size: u32,
    /// Frames we send are cut to this.
    pub max_frame_size: u32,
    /// `None`: unlimited.
    pub max_header_list_size: Option<u32>,
    /// How many streams we may open (a client's bound; `None`: unlimited).
    pub max_concurrent_streams: Option<u32>,
}

impl Default for PeerSettings {
    fn default() -> PeerSettings {
        PeerSettings {
            header_table_size: 4096,
            enable_push: true,
            initial_window_size: DEFAULT_WINDOW,
            max_frame_size: DEFAULT_FRAME_SIZE,
            max_header_list_size: None,
            max_concurrent_streams: None,
        }
    }
}

/// A header block: in the input of the `recv` that queued it, or gathered from CONTINUATIONs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Block {
    Input(Range<usize>),
    Owned(Vec<u8>),
}

impl Block {
    /// The encoded block; `input` is what was given to the `recv` that queued it.
    pub fn bytes<'a>(&'a self, input: &'a [u8]) -> &'a [u8] {
        match self {
            Block::Input(r) => &input[r.clone()],
            Block::Owned(v) => v,
        }
    }
}

/// What `recv` found, in the order frames came.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Event {
    /// A new stream's request headers.
    Headers {
        stream: u32,
        block: Block,
        end_stream: bool,
    },
    /// A stream's trailers (always the end of its request).
    Trailers { stream: u32, block: Block },
    /// Request body bytes: `data` is a range of the input. The caller reports them with
    /// [`Connection::consumed`] once it has taken them, which reopens the windows. An empty
    /// range with `end_stream` ends the body.
    Data {
        stream: u32,
        data: Range<usize>,
        end_stream: bool,
    },
    /// A header block to run through the HPACK decoder for its table's sake only, then forget:
    /// its stream was refused or is gone (its RST_STREAM, if one is due, is queued).
    Discard { block: Block },
    /// The stream is gone: reset by the peer, or by us for a stream error (the RST_STREAM is
    /// queued). The caller stops working on it.
    Reset {
        stream: u32,
        code: Reason,
        by_peer: bool,
    },
    /// The peer is going away: finish the streams in flight, take no new work.
    GoAway { last_stream: u32, code: Reason },
    /// A send window grew: `stream` 0 is the connection's (every stream may go on).
    WindowOpened { stream: u32 },
    /// The peer's settings changed ([`Connection::peer_settings`]); each stream's send window
    /// may have moved with SETTINGS_INITIAL_WINDOW_SIZE.
    SettingsChanged,
}

/// Which end of the connection we are: the rules for stream ids and header blocks differ
/// (RFC 9113, 5.1.1 and 8.1), the rest is the same.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Role {
    /// We answer streams the peer (a client) opens.
    #[default]
    Server,
    /// We open streams (odd ids) and the peer (a server) answers them; it may open none.
    Client,
}

impl Role {
    /// The peer's name in a log line: nginx says "client" or "upstream".
    pub fn peer_name(self) -> &'static str {
        match self {
            Role::Server => "client",
            Role::Client => "upstream",
        }
    }
}

/// A connection error: its GOAWAY is queued. The caller sends the output and closes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ConnError {
    pub code: Reason,
    /// For the error log, nginx's text for the case where it has one (nginx 1.22's
    /// `ngx_http_v2.c`), its style elsewhere: each `{}` is one of `args`, in order.
    pub what: &'static str,
    pub args: [u32; 2],
    /// Our end of the connection: a client's peer is named "upstream" in the text.
    pub role: Role,
}

impl std::fmt::Display for ConnError {
    /// The log line's text: `what` with its `args` (the error code is not in it, as nginx's).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut args = self.args.iter();
        let mut parts = self.what.split("{}");
        let first = parts.next().unwrap_or("");
        // nginx's texts name the client; a client's peer is its upstream.
        match first.strip_prefix("client") {
            Some(rest) if self.role == Role::Client => write!(f, "upstream{rest}")?,
            _ => f.write_str(first)?,
        }
        for part in parts {
            write!(f, "{}{part}", args.next().unwrap_or(&0))?;
        }
        Ok(())
    }
}

impl std::error::Error for ConnError {}

/// Why a send was refused: the stream is gone (reset, or its response already ended).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StreamGone;
