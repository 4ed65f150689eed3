//! What we send: a client's new streams, HEADERS and DATA within the peer's windows, resets,
//! GOAWAY, PING, and the output buffer the caller drains.

use std::collections::VecDeque;

use super::conn::Connection;
use super::stream::Stream;
use super::{flag, kind, write, Event, Reason, Role, StreamGone, HEAD_LEN, MAX_WINDOW};

/// Why a client could not open a stream.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refused {
    /// The peer's SETTINGS_MAX_CONCURRENT_STREAMS are open: wait for one to end.
    Busy,
    /// Never on this connection: it is going away (a GOAWAY either way, a connection error),
    /// its stream ids are spent, or we are its server.
    Closed,
}

/// An output buffer that grew past this (or past the connection's `max_output`, the larger)
/// is freed once drained, rather than kept: one that carries an answer's DATA keeps its room
/// from write to write rather than grow it from nothing each time; an idle connection's goes
/// ([`Connection::shrink`]).
const KEEP_OUTPUT: usize = 16 * 1024;

impl Connection {
    /// Opens a stream (a client's) with its request's header block (encoded by the caller),
    /// cut into HEADERS and CONTINUATIONs as [`Connection::send_headers`] does; `end_stream`:
    /// a request without a body. Returns the stream's id.
    pub fn open_stream(&mut self, block: &[u8], end_stream: bool) -> Result<u32, Refused> {
        self.can_open()?;
        let id = self.next_local_id;
        self.next_local_id += 2;
        // Its answer's head is still to come.
        self.push_stream(id, false, end_stream, false);
        let max_frame = self.peer.max_frame_size as usize;
        write::headers(&mut self.out, id, block, end_stream, max_frame);
        self.flood.progress();
        Ok(id)
    }

    /// Whether [`Connection::open_stream`] would open a stream now (a caller that encodes
    /// the block with HPACK asks first: a block not sent must not be encoded).
    pub fn can_open(&self) -> Result<(), Refused> {
        if self.role != Role::Client
            || self.goaway_received
            || self.goaway_sent
            || self.dead.is_some()
            || self.next_local_id > MAX_WINDOW
        {
            return Err(Refused::Closed);
        }
        if self
            .peer
            .max_concurrent_streams
            .is_some_and(|max| self.streams.len() >= max as usize)
        {
            return Err(Refused::Busy);
        }
        Ok(())
    }

    /// The answer's head just reported on `stream` was interim (1xx): the next header block
    /// is its head again, not trailers.
    pub fn interim(&mut self, stream: u32) {
        if let Some(s) = self.streams.get(stream) {
            s.head_in = false;
        }
    }

    /// Queues an answer's header block (encoded by the caller), cut into HEADERS and
    /// CONTINUATIONs by the client's SETTINGS_MAX_FRAME_SIZE. `end_stream`: an answer without
    /// a body, or trailers.
    pub fn send_headers(
        &mut self,
        stream: u32,
        block: &[u8],
        end_stream: bool,
    ) -> Result<(), StreamGone> {
        self.send_headers_with(stream, end_stream, |out| out.extend_from_slice(block))
    }

    /// [`Connection::send_headers`] for a block `encode` appends to the output itself (room
    /// left for the frame's header before it): no copy of the block. `encode` is not called
    /// for a stream gone. A block past the client's SETTINGS_MAX_FRAME_SIZE is moved into
    /// HEADERS and CONTINUATION frames afterwards.
    pub fn send_headers_with(
        &mut self,
        stream: u32,
        end_stream: bool,
        encode: impl FnOnce(&mut Vec<u8>),
    ) -> Result<(), StreamGone> {
        let max_frame = self.peer.max_frame_size as usize;
        let s = self
            .streams
            .get(stream)
            .filter(|s| !s.local_closed)
            .ok_or(StreamGone)?;
        s.local_closed = end_stream;
        let at = self.out.len();
        self.out.extend_from_slice(&[0; HEAD_LEN]);
        encode(&mut self.out);
        let len = self.out.len() - at - HEAD_LEN;
        if len <= max_frame {
            let flags = flag::END_HEADERS | if end_stream { flag::END_STREAM } else { 0 };
            write::head_at(
                &mut self.out[at..at + HEAD_LEN],
                len,
                kind::HEADERS,
                flags,
                stream,
            );
        } else {
            let block = self.out.split_off(at + HEAD_LEN);
            self.out.truncate(at);
            write::headers(&mut self.out, stream, &block, end_stream, max_frame);
        }
        self.flood.progress();
        if end_stream {
            self.answered(stream);
        }
        Ok(())
    }

    /// How many body bytes `stream` may send now: the smaller of its window and the
    /// connection's (0 when either is spent).
    pub fn window(&mut self, stream: u32) -> Result<usize, StreamGone> {
        let conn = self.send_window;
        let s = self
            .streams
            .get(stream)
            .filter(|s| !s.local_closed)
            .ok_or(StreamGone)?;
        Ok(conn.min(s.send_window as i64).max(0) as usize)
    }

    /// Queues as much of `data` as the windows take, in frames of at most the client's
    /// SETTINGS_MAX_FRAME_SIZE, and says how much that was. END_STREAM goes on the last frame
    /// only when all of `data` went (an empty `data` with `end_stream` ends the body).
    pub fn send_data(
        &mut self,
        stream: u32,
        data: &[u8],
        end_stream: bool,
    ) -> Result<usize, StreamGone> {
        let n = self.window(stream)?.min(data.len());
        let end = end_stream && n == data.len();
        if n == 0 && !end {
            return Ok(0);
        }
        let max_frame = self.peer.max_frame_size as usize;
        self.out.reserve(n + HEAD_LEN * (n / max_frame + 1));
        let mut sent = 0;
        loop {
            let len = (n - sent).min(max_frame);
            let last = sent + len == n;
            let flags = if last && end {
                super::flag::END_STREAM
            } else {
                0
            };
            write::head(&mut self.out, len, kind::DATA, flags, stream);
            self.out.extend_from_slice(&data[sent..sent + len]);
            sent += len;
            if last {
                break;
            }
        }
        self.charge(stream, n, end);
        Ok(n)
    }

    /// Queues DATA frames for up to `n` bytes that `fill` appends to the output itself: a
    /// file's bytes read straight into the buffer the socket is written from, moved once
    /// rather than read into one buffer and copied into this one. The frames carry at most
    /// `frame` bytes each (and the client's SETTINGS_MAX_FRAME_SIZE), within the windows;
    /// none ends the stream ([`Connection::send_data_with_end`] may). `fill(out, len, frame)` appends, for each frame in turn (all
    /// `frame` long but the last), [`HEAD_LEN`] bytes of room that the frame's header is
    /// written over, then the frame's payload: `len` payload bytes in all, or an error and
    /// nothing. Returns the payload bytes queued (0 and no frame when the windows are spent),
    /// or `fill`'s error with nothing queued.
    pub fn send_data_with<E>(
        &mut self,
        stream: u32,
        n: usize,
        frame: usize,
        fill: impl FnOnce(&mut Vec<u8>, usize, usize) -> Result<(), E>,
    ) -> Result<Result<usize, E>, StreamGone> {
        self.send_data_with_end(stream, n, frame, false, fill)
    }

    /// [`Connection::send_data_with`], END_STREAM on the last frame when `end` and all `n`
    /// bytes went (the body's end known ahead: no empty DATA frame after it).
    pub fn send_data_with_end<E>(
        &mut self,
        stream: u32,
        n: usize,
        frame: usize,
        end: bool,
        fill: impl FnOnce(&mut Vec<u8>, usize, usize) -> Result<(), E>,
    ) -> Result<Result<usize, E>, StreamGone> {
        let len = self.window(stream)?.min(n);
        if len == 0 {
            return Ok(Ok(0));
        }
        let end = end && len == n;
        let frame = frame.clamp(1, self.peer.max_frame_size as usize);
        let at = self.out.len();
        if let Err(e) = fill(&mut self.out, len, frame) {
            self.out.truncate(at);
            return Ok(Err(e));
        }
        let size = len + HEAD_LEN * len.div_ceil(frame);
        debug_assert_eq!(self.out.len(), at + size, "fill appended the frames");
        // (Framing holds whatever `fill` did: the frames' headers say what the bytes are.)
        self.out.resize(at + size, 0);
        let (mut pos, mut left) = (at, len);
        while left > 0 {
            let l = left.min(frame);
            let flags = if end && l == left {
                super::flag::END_STREAM
            } else {
                0
            };
            write::head_at(
                &mut self.out[pos..pos + HEAD_LEN],
                l,
                kind::DATA,
                flags,
                stream,
            );
            pos += HEAD_LEN + l;
            left -= l;
        }
        self.charge(stream, len, end);
        Ok(Ok(len))
    }

    fn charge(&mut self, stream: u32, n: usize, end: bool) {
        self.send_window -= n as i64;
        if let Some(s) = self.streams.get(stream) {
            s.send_window -= n as i32;
            s.local_closed = end;
        }
        self.flood.progress();
        if end {
            self.answered(stream);
        }
    }

    /// A stream's answer ended: it counts against rapid resets no more, and is forgotten once
    /// its request ended too.
    fn answered(&mut self, stream: u32) {
        self.flood.answered();
        self.close_if_done(stream);
    }

    /// Resets a stream (an answer abandoned, a request refused by the layer above: a
    /// `content-length` that disagrees with the DATA frames is PROTOCOL_ERROR; NO_ERROR after
    /// an answer that ended before its request's body, RFC 9113, 8.1). Nothing is sent for a
    /// stream already gone. What the client sent before it saw the reset is ignored.
    pub fn reset(&mut self, stream: u32, code: Reason) {
        if self.streams.remove(stream).is_some() {
            write::rst_stream(&mut self.out, stream, code);
            self.streams.note_reset(stream);
        }
    }

    /// Resets a stream the layer above refuses after its last frame (a body shorter than its
    /// `content-length`), even when both sides had ended it and this layer forgot it already
    /// (its answer went before the body's END_STREAM came). Nothing is sent for an idle
    /// stream.
    pub fn reset_ended(&mut self, stream: u32, code: Reason) {
        if self.streams.remove(stream).is_none() && self.idle(stream) {
            return;
        }
        write::rst_stream(&mut self.out, stream, code);
        self.streams.note_reset(stream);
    }

    /// Queues a GOAWAY naming the last stream the client opened: streams up to it go on, new
    /// ones are ignored. With NO_ERROR it is the graceful stop (reload, `-s quit`,
    /// `keepalive_requests`); the first such is the only one sent, while an error code is
    /// always sent.
    pub fn goaway(&mut self, code: Reason) {
        if self.goaway_sent && code == Reason::NO_ERROR {
            return;
        }
        write::goaway(&mut self.out, self.last_peer_id, code);
        self.goaway_sent = true;
    }

    /// Whether we sent a GOAWAY: the connection ends once its streams are done.
    pub fn going_away(&self) -> bool {
        self.goaway_sent
    }

    /// Queues a PING (its ACK is not reported).
    pub fn ping(&mut self, payload: [u8; 8]) {
        write::ping(&mut self.out, false, payload);
    }

    /// What waits to be written to the socket.
    pub fn pending_output(&self) -> &[u8] {
        &self.out[self.out_start..]
    }

    /// `n` bytes of [`Connection::pending_output`] were written.
    pub fn advance(&mut self, n: usize) {
        self.out_start += n;
        debug_assert!(self.out_start <= self.out.len());
        if self.out_start >= self.out.len() {
            self.out_start = 0;
            if self.out.capacity() > KEEP_OUTPUT.max(self.cfg.max_output) {
                self.out = Vec::new();
            } else {
                self.out.clear();
            }
        }
    }

    /// The output buffer, emptied, when everything in it was written (`None`: output waits,
    /// or there is no buffer): for a caller that keeps buffers for its next busy connection
    /// rather than free one and grow another from nothing.
    pub fn take_output_buffer(&mut self) -> Option<Vec<u8>> {
        if self.out_start != self.out.len() || self.out.capacity() == 0 {
            return None;
        }
        self.out_start = 0;
        let mut out = std::mem::take(&mut self.out);
        out.clear();
        Some(out)
    }

    /// The output buffer's room (0: the connection holds none).
    pub fn output_capacity(&self) -> usize {
        self.out.capacity()
    }

    /// Gives the connection an output buffer (emptied first) when it holds none.
    pub fn give_output_buffer(&mut self, mut out: Vec<u8>) {
        if self.out.capacity() == 0 {
            out.clear();
            self.out = out;
            self.out_start = 0;
        }
    }

    /// Moves out the lists of streams and events when they are empty (an idle connection),
    /// for another connection's [`Connection::give_lists`]; a list in use stays.
    pub(crate) fn take_lists(&mut self) -> (Vec<Stream>, VecDeque<Event>) {
        let events = if self.events.is_empty() {
            std::mem::take(&mut self.events)
        } else {
            VecDeque::new()
        };
        (self.streams.take_list(), events)
    }

    /// Gives the connection empty lists from [`Connection::take_lists`], each where it holds
    /// none.
    pub(crate) fn give_lists(&mut self, (streams, events): (Vec<Stream>, VecDeque<Event>)) {
        self.streams.give_list(streams);
        if self.events.capacity() == 0 && events.is_empty() {
            self.events = events;
        }
    }

    /// Frees every buffer not in use: for an idle connection, which then holds no heap
    /// memory (no stream, no output, no event).
    pub fn shrink(&mut self) {
        if self.out_start == self.out.len() {
            self.out = Vec::new();
            self.out_start = 0;
        }
        self.shrink_events();
        self.streams.shrink();
    }
}
