//! A connection's codec ([`shoal_http2::server::Server`]) shared by the connection's task and
//! its streams, and each stream's handles on it: [`RecvStream`] (the request's DATA and
//! trailers), [`SendResponse`] (the answer's HEADERS, the client's RST_STREAM watched) and
//! [`SendStream`] (the answer's DATA and trailers).
//!
//! The connection's task owns the socket: it feeds the codec what it reads, hands each
//! stream's DATA to its slot here (copied out of the read buffer, which the task frees when
//! idle), and writes the codec's output. A stream's handle queues frames in the codec's output
//! directly and wakes the task, which sends everything queued with one write per poll. A
//! request's DATA is given back to the windows ([`RecvStream::release_capacity`]) as the
//! request layer takes it; an answer's DATA goes within the client's windows and a bound on
//! the output waiting for the socket ([`SendStream::capacity`]).

use std::cell::RefCell;
use std::collections::VecDeque;
use std::os::fd::BorrowedFd;
use std::rc::Rc;
use std::task::{Context, Poll, Waker};

use bytes::Bytes;
use shoal_http2::frame::{Reason, HEAD_LEN};
use shoal_http2::server::{Lists, Server};

/// Why a stream's operation failed: the stream was reset, or the connection is gone.
#[derive(Debug, Clone, Copy)]
pub struct StreamError(pub Option<Reason>);

impl std::fmt::Display for StreamError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.0 {
            Some(r) => write!(
                f,
                "stream error: {}",
                r.name()
                    .map_or_else(|| format!("{:#x}", r.0), str::to_string)
            ),
            None => f.write_str("connection closed"),
        }
    }
}

impl std::error::Error for StreamError {}

thread_local! {
    /// The lists of idle connections' codecs and streams, for the next connection whose
    /// streams start (see [`Inner::shrink`]).
    static SPARE_LISTS: crate::spare::Spares<(Lists, Vec<Slot>)> =
        const { crate::spare::Spares::new(16) };
}

/// The largest list kept for another connection, in bytes (larger ones are freed).
const LISTS_MAX: usize = 4096;

/// One stream's side of the connection.
#[derive(Default)]
struct Slot {
    id: u32,
    /// DATA received, not taken yet.
    data: VecDeque<Bytes>,
    /// The request's END_STREAM came (with DATA or trailers).
    ended: bool,
    /// (Boxed: rare, and a slot is moved when another stream's is removed.)
    trailers: Option<Box<http::HeaderMap>>,
    /// The stream is gone (reset by either side).
    reset: Option<Reason>,
    /// Reset by the codec as malformed (its line is logged already).
    refused: bool,
    /// The answer's END_STREAM went.
    answered: bool,
    recv_alive: bool,
    /// Live send handles (the response's, its stream's).
    senders: u8,
    recv_waker: Option<Waker>,
    send_waker: Option<Waker>,
    reset_waker: Option<Waker>,
}

fn wake(w: &mut Option<Waker>) {
    if let Some(w) = w.take() {
        w.wake();
    }
}

/// What the connection's task and its streams share.
pub(crate) struct Inner {
    pub server: Server,
    slots: Vec<Slot>,
    /// The connection's task, woken when a stream queued output.
    pub conn_waker: Option<Waker>,
    /// Set while the connection's task runs: it sends what is queued before it sleeps.
    pub driving: bool,
    /// The most output waiting for the socket before a stream's DATA waits.
    pub out_max: usize,
    /// The connection is gone: every stream's operation fails.
    pub closed: bool,
}

pub(crate) type Core = Rc<RefCell<Inner>>;

impl Inner {
    pub fn new(server: Server, out_max: usize) -> Inner {
        Inner {
            server,
            slots: Vec::new(),
            conn_waker: None,
            driving: false,
            out_max,
            closed: false,
        }
    }

    fn slot(&mut self, id: u32) -> Option<&mut Slot> {
        let i = self.slot_at(id)?;
        Some(&mut self.slots[i])
    }

    /// Where a stream's slot is: the newest first (its request), else a scan.
    fn slot_at(&self, id: u32) -> Option<usize> {
        match self.slots.last() {
            Some(s) if s.id == id => Some(self.slots.len() - 1),
            _ => self.slots.iter().position(|s| s.id == id),
        }
    }

    /// Wakes the connection's task (not while it runs: it sends before it sleeps).
    fn queued(&mut self) {
        if !self.driving {
            wake(&mut self.conn_waker);
        }
    }

    /// A new stream: its handles. A request whose HEADERS ended it has no body, and no
    /// handle on one (`None`: nothing to set up and drop again for most GETs).
    pub fn open(
        &mut self,
        core: &Core,
        id: u32,
        ended: bool,
    ) -> (Option<RecvStream>, SendResponse) {
        self.slots.push(Slot {
            id,
            ended,
            recv_alive: !ended,
            senders: 1,
            ..Slot::default()
        });
        let recv = (!ended).then(|| RecvStream {
            core: core.clone(),
            id,
        });
        (
            recv,
            SendResponse {
                core: core.clone(),
                id,
            },
        )
    }

    /// A stream's DATA (copied from the read buffer); given back at once when nobody reads it.
    pub fn data(&mut self, id: u32, data: &[u8], end: bool) {
        let taken = match self.slot(id) {
            Some(s) if s.recv_alive && s.reset.is_none() => {
                if !data.is_empty() {
                    s.data.push_back(Bytes::copy_from_slice(data));
                }
                s.ended |= end;
                wake(&mut s.recv_waker);
                true
            }
            Some(s) => {
                s.ended |= end;
                false
            }
            None => false,
        };
        if !taken {
            self.server.conn_mut().consumed(id, data.len() as u32);
        }
    }

    pub fn trailers(&mut self, id: u32, fields: http::HeaderMap) {
        if let Some(s) = self.slot(id) {
            s.ended = true;
            s.trailers = Some(Box::new(fields));
            wake(&mut s.recv_waker);
        }
    }

    /// The stream is gone: its handles fail from now on.
    pub fn reset(&mut self, id: u32, code: Reason) {
        let mut queued = 0;
        if let Some(s) = self.slot(id) {
            s.reset.get_or_insert(code);
            queued = s.data.drain(..).map(|d| d.len()).sum::<usize>();
            wake(&mut s.recv_waker);
            wake(&mut s.send_waker);
            wake(&mut s.reset_waker);
        }
        if queued > 0 {
            self.server.conn_mut().consumed(id, queued as u32);
        }
    }

    /// The codec reset the stream as malformed (and the connection's task logged why).
    pub fn refused(&mut self, id: u32) {
        if let Some(s) = self.slot(id) {
            s.refused = true;
        }
        self.reset(id, Reason::PROTOCOL_ERROR);
    }

    /// A send window grew (`id` 0: the connection's), or output drained: waiting senders try
    /// again.
    pub fn window_opened(&mut self, id: u32) {
        for s in &mut self.slots {
            if id == 0 || s.id == id {
                wake(&mut s.send_waker);
            }
        }
    }

    /// Whether a stream waits for room to send.
    pub fn senders_waiting(&self) -> bool {
        self.slots.iter().any(|s| s.send_waker.is_some())
    }

    /// The connection ended: every stream's handle fails.
    pub fn close(&mut self) {
        self.closed = true;
        for s in &mut self.slots {
            wake(&mut s.recv_waker);
            wake(&mut s.send_waker);
            wake(&mut s.reset_waker);
        }
    }

    /// Gives the lists the connection's streams used to the worker's spares when none is
    /// left (and frees the codec's other buffers not in use).
    pub fn shrink(&mut self) {
        let lists = self.server.take_lists();
        let slots = if self.slots.is_empty() {
            std::mem::take(&mut self.slots)
        } else {
            Vec::new()
        };
        self.server.shrink();
        if lists.heap_bytes() + slots.capacity() > 0 {
            SPARE_LISTS.with(|s| {
                s.give((lists, slots), |(l, slots)| {
                    l.bound(LISTS_MAX);
                    if slots.capacity() * std::mem::size_of::<Slot>() > LISTS_MAX {
                        *slots = Vec::new();
                    }
                })
            });
        }
    }

    /// Lists for the streams to come, from the worker's spares, when the connection holds
    /// none (it gave them up when idle: [`Inner::shrink`]).
    pub fn ready_lists(&mut self) {
        if self.slots.capacity() > 0 {
            return;
        }
        if let Some((lists, slots)) = SPARE_LISTS.with(|s| s.take()) {
            self.server.give_lists(lists);
            self.slots = slots;
        }
    }

    /// [`Inner::shrink`] for a connection idle a whole sweep interval (`IdleWakers::sweep`):
    /// the codec gives up what it can rebuild ([`Server::park`]).
    pub fn park(&mut self) {
        self.shrink();
        if self.slots.is_empty() {
            self.server.park();
        }
    }

    /// Forgets the slot at `i` (see [`Inner::slot_at`]) once no handle is left.
    fn forget_if_done(&mut self, i: usize) {
        let s = &self.slots[i];
        if !s.recv_alive && s.senders == 0 {
            self.slots.swap_remove(i);
            // (Kept sorted enough: lookups scan, the newest first.)
        }
    }

    /// The answer's END_STREAM went: a request body nobody reads any more is refused
    /// (RST_STREAM NO_ERROR, RFC 9113, 8.1).
    fn answered(&mut self, id: u32) {
        let Some(s) = self.slot(id) else { return };
        s.answered = true;
        if !s.recv_alive && !s.ended && s.reset.is_none() {
            s.reset = Some(Reason::NO_ERROR);
            self.server.reset(id, Reason::NO_ERROR);
        }
    }

    fn check(&mut self, id: u32) -> Result<(), StreamError> {
        if self.closed {
            return Err(StreamError(None));
        }
        match self.slot(id) {
            Some(s) if s.reset.is_some() => Err(StreamError(s.reset)),
            Some(_) => Ok(()),
            None => Err(StreamError(None)),
        }
    }

    fn send_fields<'f>(
        &mut self,
        id: u32,
        status: Option<u16>,
        fields: impl IntoIterator<Item = (&'f [u8], &'f [u8])>,
        end: bool,
    ) -> Result<(), StreamError> {
        self.check(id)?;
        let sent = match status {
            Some(st) => self.server.send_answer(id, st, fields, end),
            None => self.server.send_trailers(id, fields),
        };
        sent.map_err(|_| StreamError(Some(Reason::STREAM_CLOSED)))?;
        if end {
            self.answered(id);
        }
        self.queued();
        Ok(())
    }
}

/// A request's body: its DATA frames and trailers as they come.
pub struct RecvStream {
    core: Core,
    id: u32,
}

impl RecvStream {
    /// Whether the codec refused the stream as malformed (see [`Inner::refused`]).
    pub fn refused(&self) -> bool {
        let mut me = self.core.borrow_mut();
        me.slot(self.id).is_some_and(|s| s.refused)
    }

    /// The next DATA frame's bytes; `None` at the body's end.
    pub fn poll_data(&mut self, cx: &mut Context<'_>) -> Poll<Option<Result<Bytes, StreamError>>> {
        let mut me = self.core.borrow_mut();
        let closed = me.closed;
        let Some(s) = me.slot(self.id) else {
            return Poll::Ready(Some(Err(StreamError(None))));
        };
        if let Some(d) = s.data.pop_front() {
            return Poll::Ready(Some(Ok(d)));
        }
        if let Some(r) = s.reset {
            return Poll::Ready(Some(Err(StreamError(Some(r)))));
        }
        if s.ended {
            return Poll::Ready(None);
        }
        if closed {
            return Poll::Ready(Some(Err(StreamError(None))));
        }
        s.recv_waker = Some(cx.waker().clone());
        Poll::Pending
    }

    pub async fn data(&mut self) -> Option<Result<Bytes, StreamError>> {
        std::future::poll_fn(|cx| self.poll_data(cx)).await
    }

    /// The trailers, once the DATA frames are over (`None`: the body ended without).
    pub async fn trailers(&mut self) -> Result<Option<http::HeaderMap>, StreamError> {
        std::future::poll_fn(|cx| {
            let mut me = self.core.borrow_mut();
            let closed = me.closed;
            let Some(s) = me.slot(self.id) else {
                return Poll::Ready(Err(StreamError(None)));
            };
            if s.ended {
                return Poll::Ready(Ok(s.trailers.take().map(|t| *t)));
            }
            if let Some(r) = s.reset {
                return Poll::Ready(Err(StreamError(Some(r))));
            }
            if closed {
                return Poll::Ready(Err(StreamError(None)));
            }
            s.recv_waker = Some(cx.waker().clone());
            Poll::Pending
        })
        .await
    }

    /// Whether the body ended and every byte of it was taken.
    pub fn is_end_stream(&self) -> bool {
        let mut me = self.core.borrow_mut();
        me.slot(self.id)
            .is_some_and(|s| s.ended && s.data.is_empty())
    }

    /// `n` bytes taken: back to the client's windows (a WINDOW_UPDATE when half waits).
    pub fn release_capacity(&mut self, n: usize) {
        let mut me = self.core.borrow_mut();
        if me.closed {
            return;
        }
        let before = me.server.conn().pending_output().len();
        me.server.conn_mut().consumed(self.id, n as u32);
        if me.server.conn().pending_output().len() != before {
            me.queued();
        }
    }
}

impl Drop for RecvStream {
    fn drop(&mut self) {
        let mut me = self.core.borrow_mut();
        let id = self.id;
        let Some(i) = me.slot_at(id) else { return };
        let s = &mut me.slots[i];
        s.recv_alive = false;
        s.recv_waker = None;
        let queued = s.data.drain(..).map(|d| d.len()).sum::<usize>();
        let refuse = s.answered && !s.ended && s.reset.is_none();
        if refuse {
            s.reset = Some(Reason::NO_ERROR);
        }
        if !me.closed {
            if queued > 0 {
                me.server.conn_mut().consumed(id, queued as u32);
            }
            if refuse {
                me.server.reset(id, Reason::NO_ERROR);
            }
            if queued > 0 || refuse {
                me.queued();
            }
        }
        me.forget_if_done(i);
    }
}

/// A stream's answer, before its HEADERS.
pub struct SendResponse {
    core: Core,
    id: u32,
}

impl SendResponse {
    /// Sends the answer's HEADERS (`end`: no body follows): `:status`, then the fields
    /// `fields` hands to the encoder (see [`super::sink::head`]; not called when the stream
    /// is gone). The body goes on the stream returned.
    pub fn send_response(
        &mut self,
        status: u16,
        end: bool,
        fields: impl FnOnce(&mut shoal_http2::server::AnswerFields<'_>),
    ) -> Result<SendStream, StreamError> {
        let mut me = self.core.borrow_mut();
        me.check(self.id)?;
        let sent = me.server.send_answer_by(self.id, status, end, fields);
        sent.map_err(|_| StreamError(Some(Reason::STREAM_CLOSED)))?;
        if end {
            me.answered(self.id);
        }
        me.queued();
        if let Some(s) = me.slot(self.id) {
            s.senders += 1;
        }
        Ok(SendStream {
            core: self.core.clone(),
            id: self.id,
        })
    }

    /// Resets the stream.
    pub fn send_reset(&mut self, code: Reason) {
        send_reset(&self.core, self.id, code);
    }

    /// Ready once the stream is reset (by the client, or the connection is gone).
    pub fn poll_reset(&mut self, cx: &mut Context<'_>) -> Poll<Result<Reason, StreamError>> {
        let mut me = self.core.borrow_mut();
        let closed = me.closed;
        let Some(s) = me.slot(self.id) else {
            return Poll::Ready(Err(StreamError(None)));
        };
        if let Some(r) = s.reset {
            return Poll::Ready(Ok(r));
        }
        if closed {
            return Poll::Ready(Err(StreamError(None)));
        }
        s.reset_waker = Some(cx.waker().clone());
        Poll::Pending
    }
}

fn send_reset(core: &Core, id: u32, code: Reason) {
    let mut me = core.borrow_mut();
    if me.closed {
        return;
    }
    let Some(s) = me.slot(id) else { return };
    if s.reset.is_some() {
        return;
    }
    s.reset = Some(code);
    me.server.reset(id, code);
    me.queued();
}

fn drop_sender(core: &Core, id: u32) {
    let mut me = core.borrow_mut();
    let Some(i) = me.slot_at(id) else { return };
    let s = &mut me.slots[i];
    s.senders -= 1;
    let abandoned = s.senders == 0 && !s.answered && s.reset.is_none();
    if s.senders == 0 {
        s.send_waker = None;
        s.reset_waker = None;
    }
    if abandoned {
        s.reset = Some(Reason::CANCEL);
        if !me.closed {
            me.server.reset(id, Reason::CANCEL);
            me.queued();
        }
    }
    me.forget_if_done(i);
}

impl Drop for SendResponse {
    fn drop(&mut self) {
        drop_sender(&self.core, self.id);
    }
}

/// A stream's answer once its HEADERS went: DATA, trailers.
pub struct SendStream {
    core: Core,
    id: u32,
}

impl SendStream {
    /// Nothing: [`SendStream::capacity`] is what the windows and the output allow now.
    pub fn reserve_capacity(&mut self, _n: usize) {}

    /// How many bytes of DATA may be sent now: the client's windows, less what waits for the
    /// socket past the connection's bound.
    pub fn capacity(&self) -> usize {
        let mut me = self.core.borrow_mut();
        if me.closed {
            return 0;
        }
        let waiting = me.server.conn().pending_output().len();
        let room = me.out_max.saturating_sub(waiting);
        let window = me.server.conn_mut().window(self.id).unwrap_or(0);
        window.min(room)
    }

    /// Ready with the capacity once some is there; an error once the stream is gone.
    pub fn poll_capacity(
        &mut self,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<usize, StreamError>>> {
        if let Err(e) = self.core.borrow_mut().check(self.id) {
            return Poll::Ready(Some(Err(e)));
        }
        let now = self.capacity();
        if now > 0 {
            return Poll::Ready(Some(Ok(now)));
        }
        let mut me = self.core.borrow_mut();
        if me.server.conn_mut().window(self.id).is_err() {
            return Poll::Ready(Some(Err(StreamError(Some(Reason::STREAM_CLOSED)))));
        }
        if let Some(s) = me.slot(self.id) {
            s.send_waker = Some(cx.waker().clone());
        }
        Poll::Pending
    }

    /// Queues DATA (within [`SendStream::capacity`]: the bytes past the windows are an
    /// error).
    pub fn send_data(&mut self, data: Bytes, end: bool) -> Result<(), StreamError> {
        let mut me = self.core.borrow_mut();
        me.check(self.id)?;
        let n = me
            .server
            .conn_mut()
            .send_data(self.id, &data, end)
            .map_err(|_| StreamError(Some(Reason::STREAM_CLOSED)))?;
        if n < data.len() {
            return Err(StreamError(Some(Reason::FLOW_CONTROL_ERROR)));
        }
        if end {
            me.answered(self.id);
        }
        me.queued();
        Ok(())
    }

    /// Reads up to `n` bytes of `file` at `offset` straight into DATA frames of at most `frame`
    /// bytes, in the codec's output (the caller keeps `n` within [`SendStream::capacity`]):
    /// the file's bytes go to the socket from where they were read (`end`: they end the
    /// body, END_STREAM on the last frame once all `n` went). The bytes queued, or the
    /// read's error with nothing queued.
    pub fn send_file(
        &mut self,
        file: BorrowedFd<'_>,
        offset: u64,
        n: usize,
        frame: usize,
        end: bool,
    ) -> Result<std::io::Result<usize>, StreamError> {
        let mut me = self.core.borrow_mut();
        me.check(self.id)?;
        let sent = me
            .server
            .conn_mut()
            .send_data_with_end(self.id, n, frame, end, |out, len, frame| {
                shoal_io::syscall::pread_framed(file, out, offset, len, frame, HEAD_LEN)
            })
            .map_err(|_| StreamError(Some(Reason::STREAM_CLOSED)))?;
        if let Ok(sent) = sent {
            if end && sent == n && n > 0 {
                me.answered(self.id);
            }
            if sent > 0 {
                me.queued();
            }
        }
        Ok(sent)
    }

    /// Queues the trailers, which end the stream.
    pub fn send_trailers<'f>(
        &mut self,
        fields: impl IntoIterator<Item = (&'f [u8], &'f [u8])>,
    ) -> Result<(), StreamError> {
        self.core
            .borrow_mut()
            .send_fields(self.id, None, fields, true)
    }

    pub fn send_reset(&mut self, code: Reason) {
        send_reset(&self.core, self.id, code);
    }
}

impl Drop for SendStream {
    fn drop(&mut self) {
        drop_sender(&self.core, self.id);
    }
}
