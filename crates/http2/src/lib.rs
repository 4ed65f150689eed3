//! shoal's own HTTP/2 server codec (RFC 9113, RFC 7541), replacing the `h2` crate on the
//! client side of the server (issue 22): the `h2` crate keeps about 30 KB of buffers per
//! connection that it never gives back, and costs ~14k instructions per request; nginx keeps
//! an idle HTTP/2 connection in under 2 KB.
//!
//! A pure library, sans I/O: bytes in, events out; frames to send into the caller's buffer.
//! No sockets, no tokio, no clock: the server's `http/h2` room drives it from its transport.
//!
//! Rooms: `hpack` (header compression: the static and dynamic tables, Huffman, the decoder's
//! bounds against bombs) and `frame` (the frame layer and the connection's state: streams,
//! flow control, settings, and the flood counters), and `server` (requests and answers: the
//! checks of RFC 9113, 8 between the two and the server).
#![forbid(unsafe_code)]

pub mod frame;
pub mod hpack;
pub mod server;
