//! shoal's own HTTP/2 codec (RFC 9113, RFC 7541), both ends: the server side for shoal's
//! clients (issue 22: the `h2` crate kept about 30 KB of buffers per connection that it never
//! gave back, and cost ~14k instructions per request), the client side for its gRPC upstreams
//! (issue 23: the `h2` crate's client cost ~40k instructions per call).
//!
//! A pure library, sans I/O: bytes in, events out; frames to send into the caller's buffer.
//! No sockets, no tokio, no clock: the server's `http/h2` room drives it from its transport,
//! `http/grpc` drives a client.
//!
//! Rooms: `hpack` (header compression: the static and dynamic tables, Huffman, the decoder's
//! bounds against bombs) and `frame` (the frame layer and the connection's state: streams,
//! flow control, settings, and the flood counters, in either role), `server` (requests and
//! answers: the checks of RFC 9113, 8 between the two and the server), `client` (the same
//! for a client: requests out, answers checked) and `exchange` (what those two share: what
//! they report, bodies held to their `content-length`).
#![forbid(unsafe_code)]

pub mod client;
pub mod exchange;
pub mod frame;
pub mod hpack;
pub mod server;
