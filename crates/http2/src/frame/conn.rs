//! The connection: what `recv` does with each frame the peer sends (RFC 9113, 5 and 6), for
//! either [`Role`]: a server's peer opens streams, a client's answers the ones we open.

use std::collections::VecDeque;

use super::flood::Flood;
use super::parse::{conn_err, conn_err_n, u32_at, unpad, Head};
use super::stream::{Stream, Streams};
use super::{flag, kind, setting, write};
use super::{Block, Config, ConnError, Event, PeerSettings, Reason, Role};
use super::{DEFAULT_FRAME_SIZE, DEFAULT_WINDOW, HEAD_LEN, MAX_FRAME_SIZE, MAX_WINDOW, PREFACE};

/// From this stream id on, a new stream makes us send a graceful GOAWAY: the client has few
/// ids left and should open a new connection while this one finishes.
pub const STREAM_ID_HIGH: u32 = MAX_WINDOW - 2 * 1024;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    /// Waiting for the client's 24-byte preface.
    Preface,
    /// The first frame must be a SETTINGS (RFC 9113, 3.4).
    FirstSettings,
    Frames,
}

/// What a header block is for, once whole.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum BlockFor {
    New,
    Trailers,
    Discard,
}

/// A header block waiting for its CONTINUATIONs.
#[derive(Debug)]
struct Partial {
    stream: u32,
    end_stream: bool,
    purpose: BlockFor,
    block: Vec<u8>,
}

/// One HTTP/2 connection, sans I/O: see the module's documentation.
#[derive(Debug)]
pub struct Connection {
    pub(super) cfg: Config,
    pub(super) role: Role,
    /// The id our next stream takes (a client's: odd; a server opens none).
    pub(super) next_local_id: u32,
    pub(super) peer: PeerSettings,
    phase: Phase,
    pub(super) streams: Streams,
    /// The highest stream id the peer used (every id at or below it is closed or open).
    pub(super) last_peer_id: u32,
    /// The connection's send window: negative never, but i64 keeps sums honest.
    pub(super) send_window: i64,
    /// What the client may still send on the connection.
    pub(super) recv_window: i64,
    /// Body bytes consumed and not given back to the connection's window yet.
    pub(super) recv_unacked: u32,
    /// Each stream's receive window in force: 65535 until the client acknowledged ours.
    pub(super) local_initial: u32,
    /// Our SETTINGS frames the client has not acknowledged.
    pub(super) settings_unacked: u32,
    partial: Option<Box<Partial>>,
    pub(super) goaway_sent: bool,
    pub(super) goaway_received: bool,
    pub(super) dead: Option<ConnError>,
    pub(super) out: Vec<u8>,
    pub(super) out_start: usize,
    pub(super) events: VecDeque<Event>,
    pub(super) flood: Flood,
    /// A client's `recv` stops after an answer's head: the caller decodes it (an interim
    /// head makes the next block a head again, [`Connection::interim`]) before more frames
    /// are read.
    paused: bool,
    /// The streams reset for DATA past their window in the last [`Connection::recv`]: each
    /// with the frame's length and the window it had (see [`Connection::flow_violation`]).
    /// Boxed: a connection that sees none holds a pointer's worth.
    violations: Option<Box<Violations>>,
}

/// The flow-control violations of one read (the first few): stream, frame length, window.
#[derive(Debug, Default)]
struct Violations {
    list: [(u32, u32, u32); 8],
    len: usize,
}

impl Connection {
    /// A connection whose client preface is still to come; our SETTINGS (and the connection
    /// window's WINDOW_UPDATE) are already in the output, as the server preface (RFC 9113, 3.4).
    pub fn new(cfg: Config) -> Connection {
        Connection::start(cfg, Role::Server)
    }

    /// A client's connection: the preface, our SETTINGS (no push) and the connection window's
    /// WINDOW_UPDATE are in the output; the server's SETTINGS must come first (RFC 9113,
    /// 3.4). Streams are opened with [`Connection::open_stream`].
    pub fn client(cfg: Config) -> Connection {
        Connection::start(cfg, Role::Client)
    }

    fn start(mut cfg: Config, role: Role) -> Connection {
        cfg.initial_window_size = cfg.initial_window_size.min(MAX_WINDOW);
        cfg.connection_window = cfg.connection_window.clamp(DEFAULT_WINDOW, MAX_WINDOW);
        cfg.max_frame_size = cfg.max_frame_size.clamp(DEFAULT_FRAME_SIZE, MAX_FRAME_SIZE);
        let mut c = Connection {
            role,
            next_local_id: if role == Role::Client { 1 } else { 2 },
            peer: PeerSettings::default(),
            phase: match role {
                Role::Server => Phase::Preface,
                Role::Client => Phase::FirstSettings,
            },
            streams: Streams::default(),
            last_peer_id: 0,
            send_window: DEFAULT_WINDOW as i64,
            recv_window: cfg.connection_window as i64,
            recv_unacked: 0,
            local_initial: DEFAULT_WINDOW,
            settings_unacked: 1,
            partial: None,
            goaway_sent: false,
            goaway_received: false,
            dead: None,
            out: Vec::new(),
            out_start: 0,
            events: VecDeque::new(),
            flood: Flood::default(),
            paused: false,
            violations: None,
            cfg,
        };
        let cfg = &c.cfg;
        let mut params = match role {
            Role::Server => vec![(setting::MAX_CONCURRENT_STREAMS, cfg.max_concurrent_streams)],
            Role::Client => {
                c.out.extend_from_slice(PREFACE);
                vec![(setting::ENABLE_PUSH, 0)]
            }
        };
        params.push((setting::INITIAL_WINDOW_SIZE, cfg.initial_window_size));
        if cfg.max_frame_size != DEFAULT_FRAME_SIZE {
            params.push((setting::MAX_FRAME_SIZE, cfg.max_frame_size));
        }
        if cfg.header_table_size != 4096 {
            params.push((setting::HEADER_TABLE_SIZE, cfg.header_table_size));
        }
        params.push((setting::MAX_HEADER_LIST_SIZE, cfg.max_header_list_size));
        write::settings(&mut c.out, &params);
        if cfg.connection_window > DEFAULT_WINDOW {
            let more = cfg.connection_window - DEFAULT_WINDOW;
            write::window_update(&mut c.out, 0, more);
        }
        c
    }

    /// Parses the whole frames `input` holds and returns how many bytes it used; the rest
    /// (part of a frame) is for the next call, with more bytes after it. A client's stops
    /// after an answer's head, so that the caller decodes it first: it calls again with the
    /// rest while a call uses bytes. Events go to the
    /// queue ([`Connection::poll_event`]); ranges in them index this `input`.
    ///
    /// A connection error queues its GOAWAY and is returned, now and on every later call.
    pub fn recv(&mut self, input: &[u8]) -> Result<usize, ConnError> {
        if let Some(e) = self.dead {
            return Err(e);
        }
        self.flood.new_streams = 0;
        self.violations = None;
        let mut pos = 0;
        if self.phase == Phase::Preface {
            let n = input.len().min(PREFACE.len());
            if input[..n] != PREFACE[..n] {
                let e = conn_err(Reason::PROTOCOL_ERROR, "invalid connection preface");
                return Err(self.fail(e));
            }
            if n < PREFACE.len() {
                return Ok(0);
            }
            pos = n;
            self.phase = Phase::FirstSettings;
        }
        while input.len() - pos >= HEAD_LEN {
            let head = Head::parse(&input[pos..]);
            if head.len > self.cfg.max_frame_size as usize {
                let e = conn_err(
                    Reason::FRAME_SIZE_ERROR,
                    "sent frame larger than SETTINGS_MAX_FRAME_SIZE",
                );
                return Err(self.fail(e));
            }
            let start = pos + HEAD_LEN;
            if input.len() - start < head.len {
                break;
            }
            if let Err(e) = self.frame(head, input, start) {
                return Err(self.fail(e));
            }
            pos = start + head.len;
            if std::mem::take(&mut self.paused) {
                break;
            }
        }
        Ok(pos)
    }

    #[cfg(test)]
    pub(super) fn events_capacity(&self) -> usize {
        self.events.capacity()
    }

    pub(super) fn shrink_events(&mut self) {
        if self.events.is_empty() {
            self.events = VecDeque::new();
        }
    }

    /// The next event, oldest first.
    pub fn poll_event(&mut self) -> Option<Event> {
        self.events.pop_front()
    }

    /// The client's settings as they stand.
    pub fn peer_settings(&self) -> &PeerSettings {
        &self.peer
    }

    /// Streams open (or half-closed) now.
    pub fn open_streams(&self) -> usize {
        self.streams.len()
    }

    /// The highest stream id the client used.
    pub fn last_stream(&self) -> u32 {
        self.last_peer_id
    }

    /// Whether the client has yet to acknowledge our SETTINGS: the caller may end a connection
    /// that takes too long with SETTINGS_TIMEOUT ([`Connection::close_with`], RFC 9113, 6.5.3).
    pub fn awaiting_settings_ack(&self) -> bool {
        self.settings_unacked > 0
    }

    /// Whether the client sent GOAWAY.
    pub fn peer_going_away(&self) -> bool {
        self.goaway_received
    }

    /// The connection error that ended the connection, if one did.
    pub fn error(&self) -> Option<ConnError> {
        self.dead
    }

    /// Ends the connection for an error found above this layer (a header block HPACK cannot
    /// decode: COMPRESSION_ERROR): its GOAWAY is queued, and `recv` returns it from now on.
    pub fn close_with(&mut self, e: ConnError) {
        if self.dead.is_none() {
            self.fail(e);
        }
    }

    /// Queues the GOAWAY of a connection error and ends the connection.
    fn fail(&mut self, mut e: ConnError) -> ConnError {
        e.role = self.role;
        write::goaway(&mut self.out, self.last_peer_id, e.code);
        self.goaway_sent = true;
        self.dead = Some(e);
        self.partial = None;
        e
    }

    fn frame(&mut self, head: Head, input: &[u8], start: usize) -> Result<(), ConnError> {
        let payload = &input[start..start + head.len];
        if self.phase == Phase::FirstSettings {
            if head.kind != kind::SETTINGS || head.has(flag::ACK) {
                return Err(conn_err(
                    Reason::PROTOCOL_ERROR,
                    "sent no SETTINGS after the preface",
                ));
            }
            self.phase = Phase::Frames;
        }
        if let Some(p) = &self.partial {
            if head.kind != kind::CONTINUATION || head.stream != p.stream {
                return Err(conn_err(
                    Reason::PROTOCOL_ERROR,
                    "client sent inappropriate frame while CONTINUATION was expected",
                ));
            }
        }
        match head.kind {
            kind::DATA => self.data(head, payload, start),
            kind::HEADERS => self.headers(head, payload, start),
            kind::PRIORITY => self.priority(head, payload),
            kind::RST_STREAM => self.rst_stream(head, payload),
            kind::SETTINGS => self.settings(head, payload),
            kind::PUSH_PROMISE => Err(conn_err(
                Reason::PROTOCOL_ERROR,
                "client sent PUSH_PROMISE frame",
            )),
            kind::PING => self.ping_frame(head, payload),
            kind::GOAWAY => self.goaway_frame(head, payload),
            kind::WINDOW_UPDATE => self.window_update(head, payload),
            kind::CONTINUATION => self.continuation(head, payload),
            // Unknown types are ignored (RFC 9113, 5.5).
            _ => Ok(()),
        }
    }

    /// An id not used yet: by the peer (above the last it used), or by us (from the next we
    /// open on: a server opens none, so every even id is idle to it).
    pub(super) fn idle(&self, id: u32) -> bool {
        if (id % 2 == 1) == (self.role == Role::Client) {
            id >= self.next_local_id
        } else {
            id > self.last_peer_id
        }
    }

    /// A stream error: RST_STREAM queued, the stream forgotten (and the caller told, if it
    /// knew it).
    /// A stream the last [`Connection::recv`] reset with FLOW_CONTROL_ERROR: the length of
    /// the DATA frame past its window, and the window (nginx's log line names both).
    pub fn flow_violation(&self, stream: u32) -> Option<(u32, u32)> {
        let seen = self.violations.as_deref()?;
        seen.list[..seen.len]
            .iter()
            .find(|v| v.0 == stream)
            .map(|&(_, len, window)| (len, window))
    }

    pub(super) fn stream_error(&mut self, id: u32, code: Reason) -> Result<(), ConnError> {
        // A client that makes us answer RST_STREAMs and does not read them is bounded as one
        // that sends PINGs.
        self.answer_room()?;
        write::rst_stream(&mut self.out, id, code);
        self.streams.note_reset(id);
        if self.streams.remove(id).is_some() {
            self.events.push_back(Event::Reset {
                stream: id,
                code,
                by_peer: false,
            });
        }
        self.flood.idle_frame()
    }

    /// Room in the output for an answer the client asked for (PING, SETTINGS ACK).
    pub(super) fn answer_room(&self) -> Result<(), ConnError> {
        if self.out.len() - self.out_start > self.cfg.max_output {
            return Err(conn_err(Reason::ENHANCE_YOUR_CALM, "http2 flood detected"));
        }
        Ok(())
    }

    fn data(&mut self, head: Head, payload: &[u8], start: usize) -> Result<(), ConnError> {
        let id = head.stream;
        if id == 0 {
            return Err(conn_err(
                Reason::PROTOCOL_ERROR,
                "client sent DATA frame with incorrect identifier",
            ));
        }
        let (from, to) = unpad(&head, payload, 0)?;
        if self.idle(id) {
            return Err(conn_err(
                Reason::PROTOCOL_ERROR,
                "sent DATA on an idle stream",
            ));
        }
        let len = head.len as u32;
        if len as i64 > self.recv_window {
            return Err(conn_err_n(
                Reason::FLOW_CONTROL_ERROR,
                "client violated connection flow control: received DATA frame length {}, available window {}",
                len,
                self.recv_window.clamp(0, u32::MAX as i64) as u32,
            ));
        }
        self.recv_window -= len as i64;
        let end = head.has(flag::END_STREAM);
        if self.streams.reset_lately(id) && self.streams.get(id).is_none() {
            // In flight when we reset the stream: only the connection's window counts it.
            self.conn_consumed(len);
            return self.flood.idle_frame();
        }
        let code = match self.streams.get(id) {
            None => Some(Reason::STREAM_CLOSED),
            Some(s) if s.remote_closed => Some(Reason::STREAM_CLOSED),
            // An answer's DATA before its head is malformed (RFC 9113, 8.1).
            Some(s) if !s.head_in => Some(Reason::PROTOCOL_ERROR),
            Some(s) if len as i64 > s.recv_window as i64 => Some(Reason::FLOW_CONTROL_ERROR),
            Some(s) => {
                s.recv_window -= len as i32;
                s.remote_closed = end;
                None
            }
        };
        if code == Some(Reason::FLOW_CONTROL_ERROR) {
            let window = self
                .streams
                .get(id)
                .map_or(0, |s| s.recv_window.max(0) as u32);
            let seen = self.violations.get_or_insert_with(Default::default);
            if let Some(slot) = seen.list.get_mut(seen.len) {
                *slot = (id, len, window);
                seen.len += 1;
            }
        }
        if let Some(code) = code {
            // Nobody takes these bytes: they go back to the connection's window at once.
            self.conn_consumed(len);
            return self.stream_error(id, code);
        }
        if from == to && !end {
            self.flood.idle_frame()?;
        } else {
            self.flood.progress();
        }
        self.events.push_back(Event::Data {
            stream: id,
            data: start + from..start + to,
            end_stream: end,
        });
        let padding = len - (to - from) as u32;
        if padding > 0 {
            self.consumed(id, padding);
        }
        if end {
            self.close_if_done(id);
        }
        Ok(())
    }

    /// Forgets a stream closed both ways.
    pub(super) fn close_if_done(&mut self, id: u32) {
        if let Some(s) = self.streams.get(id) {
            if s.remote_closed && s.local_closed {
                self.streams.remove(id);
            }
        }
    }

    /// Gives `n` bytes back to the connection's receive window, with a WINDOW_UPDATE once half
    /// of it waits.
    pub(super) fn conn_consumed(&mut self, n: u32) {
        self.recv_unacked += n;
        if self.recv_unacked >= self.cfg.connection_window / 2 {
            write::window_update(&mut self.out, 0, self.recv_unacked);
            self.recv_window += self.recv_unacked as i64;
            self.recv_unacked = 0;
        }
    }

    /// Opens `stream`'s receive window by `n` more at once (a WINDOW_UPDATE), beyond what
    /// [`Connection::consumed`] gives back: nginx does so when a request body is read into a
    /// buffer larger than `http2_body_preread_size`, and it is the only way a body comes at all
    /// with a preread size of 0. The window stays at most 2^31 − 1; nothing is sent for a stream
    /// gone or whose body has ended.
    pub fn open_window(&mut self, stream: u32, n: u32) {
        let Some(s) = self.streams.get(stream) else {
            return;
        };
        let n = n.min((MAX_WINDOW as i64 - s.recv_window as i64).max(0) as u32);
        if s.remote_closed || n == 0 {
            return;
        }
        s.recv_window += n as i32;
        write::window_update(&mut self.out, stream, n);
    }

    /// Gives `n` body bytes of `stream` back to its window and the connection's, with a
    /// WINDOW_UPDATE when half the window waits (none for a stream whose body has ended).
    pub fn consumed(&mut self, stream: u32, n: u32) {
        if n == 0 {
            return;
        }
        self.conn_consumed(n);
        let half = (self.cfg.initial_window_size / 2).max(1);
        if let Some(s) = self.streams.get(stream) {
            if s.remote_closed {
                return;
            }
            s.unacked += n;
            if s.unacked >= half {
                let inc = s.unacked;
                s.recv_window += inc as i32;
                s.unacked = 0;
                write::window_update(&mut self.out, stream, inc);
            }
        }
    }

    /// Gives back at once what was consumed of `stream` and not given back yet (a
    /// WINDOW_UPDATE now, whatever its size): for a reader that wants the peer to send again
    /// as soon as it took anything, as nginx's grpc module reads an upstream.
    pub fn window_back(&mut self, stream: u32) {
        if let Some(s) = self.streams.get(stream) {
            if s.remote_closed || s.unacked == 0 {
                return;
            }
            let inc = s.unacked;
            s.recv_window += inc as i32;
            s.unacked = 0;
            write::window_update(&mut self.out, stream, inc);
        }
    }

    fn headers(&mut self, head: Head, payload: &[u8], start: usize) -> Result<(), ConnError> {
        let id = head.stream;
        if id == 0 {
            return Err(conn_err_n(
                Reason::PROTOCOL_ERROR,
                "client sent HEADERS frame with incorrect identifier {}, the last was {}",
                0,
                self.last_peer_id,
            ));
        }
        let fixed = if head.has(flag::PRIORITY) { 5 } else { 0 };
        let (from, to) = unpad(&head, payload, fixed)?;
        let self_dep = fixed > 0 && u32_at(payload, from - 5) & MAX_WINDOW == id;
        let end_stream = head.has(flag::END_STREAM);
        let reset_lately = self.streams.reset_lately(id);
        let purpose = match self.streams.get(id) {
            // The answer's head on a stream we opened (a client's).
            Some(s) if !s.head_in && !self_dep => {
                s.head_in = true;
                s.remote_closed = end_stream;
                self.flood.progress();
                BlockFor::New
            }
            Some(s) if s.remote_closed => {
                self.stream_error(id, Reason::STREAM_CLOSED)?;
                BlockFor::Discard
            }
            Some(_) if !end_stream || self_dep => {
                self.stream_error(id, Reason::PROTOCOL_ERROR)?;
                BlockFor::Discard
            }
            Some(s) => {
                s.remote_closed = true;
                BlockFor::Trailers
            }
            None if self.role == Role::Client => self.closed_headers(id, reset_lately)?,
            None if id % 2 == 0 => {
                return Err(conn_err_n(
                    Reason::PROTOCOL_ERROR,
                    "client sent HEADERS frame with incorrect identifier {}, the last was {}",
                    id,
                    self.last_peer_id,
                ));
            }
            // Trailers in flight on a stream we reset: decoded for HPACK's sake, then dropped.
            None if id <= self.last_peer_id && reset_lately => BlockFor::Discard,
            None if id <= self.last_peer_id => {
                return Err(conn_err_n(
                    Reason::PROTOCOL_ERROR,
                    "client sent HEADERS frame with incorrect identifier {}, the last was {}",
                    id,
                    self.last_peer_id,
                ));
            }
            None => self.open(id, end_stream, self_dep)?,
        };
        if head.has(flag::END_HEADERS) {
            self.block_done(
                id,
                purpose,
                Block::Input(start + from..start + to),
                end_stream,
            );
            return Ok(());
        }
        self.block_bound(to - from)?;
        self.partial = Some(Box::new(Partial {
            stream: id,
            end_stream,
            purpose,
            block: payload[from..to].to_vec(),
        }));
        Ok(())
    }

    /// A client's HEADERS on a stream it does not have: a server opens none (we refuse its
    /// pushes), and one it sends after the stream closed is refused (decoded for HPACK's
    /// sake, then dropped).
    fn closed_headers(&mut self, id: u32, reset_lately: bool) -> Result<BlockFor, ConnError> {
        if self.idle(id) {
            return Err(conn_err(
                Reason::PROTOCOL_ERROR,
                "sent HEADERS on an idle stream",
            ));
        }
        if !reset_lately {
            self.stream_error(id, Reason::STREAM_CLOSED)?;
        }
        Ok(BlockFor::Discard)
    }

    /// A new stream from the client, or why not.
    fn open(&mut self, id: u32, end_stream: bool, self_dep: bool) -> Result<BlockFor, ConnError> {
        self.last_peer_id = id;
        if self.goaway_sent {
            // Streams after our GOAWAY are ignored (RFC 9113, 6.8).
            return Ok(BlockFor::Discard);
        }
        self.flood.new_stream(self.cfg.max_concurrent_streams)?;
        if self_dep {
            self.stream_error(id, Reason::PROTOCOL_ERROR)?;
            return Ok(BlockFor::Discard);
        }
        if self.streams.len() >= self.cfg.max_concurrent_streams as usize {
            self.stream_error(id, Reason::REFUSED_STREAM)?;
            return Ok(BlockFor::Discard);
        }
        self.push_stream(id, end_stream, false, true);
        self.flood.progress();
        if id >= STREAM_ID_HIGH {
            self.goaway(Reason::NO_ERROR);
        }
        Ok(BlockFor::New)
    }

    /// A new stream's record, its windows as the settings in force make them.
    pub(super) fn push_stream(&mut self, id: u32, remote: bool, local: bool, head_in: bool) {
        self.streams.push(Stream {
            id,
            send_window: self.peer.initial_window_size as i32,
            recv_window: self.local_initial as i32,
            unacked: 0,
            remote_closed: remote,
            local_closed: local,
            head_in,
        });
    }

    /// A header block longer than the configured list plus slack is not buffered.
    fn block_bound(&self, len: usize) -> Result<(), ConnError> {
        if len
            > (self.cfg.max_header_list_size as usize)
                .saturating_add(self.cfg.header_slack as usize)
        {
            return Err(conn_err(
                Reason::ENHANCE_YOUR_CALM,
                "client sent too large header",
            ));
        }
        Ok(())
    }

    fn block_done(&mut self, stream: u32, purpose: BlockFor, block: Block, end_stream: bool) {
        self.paused = purpose == BlockFor::New && self.role == Role::Client;
        if end_stream && purpose != BlockFor::Discard {
            self.close_if_done(stream);
        }
        self.events.push_back(match purpose {
            BlockFor::New => Event::Headers {
                stream,
                block,
                end_stream,
            },
            BlockFor::Trailers => Event::Trailers { stream, block },
            BlockFor::Discard => Event::Discard { block },
        });
    }

    fn continuation(&mut self, head: Head, payload: &[u8]) -> Result<(), ConnError> {
        let Some(p) = self.partial.as_mut() else {
            return Err(conn_err(
                Reason::PROTOCOL_ERROR,
                "client sent unexpected CONTINUATION frame",
            ));
        };
        let total = p.block.len() + payload.len();
        self.block_bound(total)?;
        let p = self.partial.as_mut().expect("checked above");
        p.block.extend_from_slice(payload);
        if head.has(flag::END_HEADERS) {
            let p = self.partial.take().expect("checked above");
            self.block_done(p.stream, p.purpose, Block::Owned(p.block), p.end_stream);
        } else if payload.is_empty() {
            self.flood.idle_frame()?;
        }
        Ok(())
    }
}
