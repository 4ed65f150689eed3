//! An upstream HTTP/2 connection on shoal's own client codec ([`shoal_http2::client`]): the
//! connection's task, and each call's handles on the codec: [`HeadWait`] (the answer's
//! head), [`RecvStream`] (its DATA and trailers) and [`SendStream`] (the request's DATA and
//! trailers).
//!
//! The task owns the socket, as `http/h2/drive.rs` owns a client's: it writes everything the
//! codec queued (one write per poll), reads, feeds the codec, and hands each stream's DATA to
//! its slot here (copied out of the read buffer). A handle queues frames in the codec's output
//! directly and wakes the task. The answer's DATA is given back to the windows
//! ([`RecvStream::release_capacity`]) only as the call's relay takes it, so the upstream sends
//! at most a window (`grpc_buffer_size`) ahead of the client; the WINDOW_UPDATE goes as soon
//! as half the window was taken, whatever the relay does meanwhile.
//!
//! The task ends when the upstream closes or fails, or once the connection's owner
//! ([`super::conn::H2Conn`]) is gone and its streams are over: it then says GOAWAY and closes.

use std::cell::RefCell;
use std::collections::VecDeque;
use std::io::{self, IoSlice};
use std::rc::Rc;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use bytes::Bytes;
use shoal_http2::client::{Client, Fields, Incoming, Response};
use shoal_http2::frame::Reason;
use tokio::io::ReadBuf;

mod handles;

pub use handles::{open, HeadWait, RecvStream, SendStream};

use super::meter::Frames;
use crate::http::h2::io::{flush, read, write};
use crate::http::transport::Transport;

/// A read buffer's size: a whole frame of the default size and more.
const READ_BUF: usize = 32 * 1024;

/// What an idle connection whose buffers were let go reads into (a GOAWAY, a PING, the
/// close): the read buffer is made again only when bytes come.
const IDLE_READ: usize = 256;

/// The most request body waiting for the socket before a sender waits.
const OUT_MAX: usize = 64 * 1024;

/// How a stream (or its connection) failed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StreamError {
    /// The upstream reset the stream with this code.
    Reset(Reason),
    /// The upstream refused the stream before doing anything with it (REFUSED_STREAM, or
    /// past its GOAWAY's last stream): another connection may take the call.
    Refused,
    /// The connection closed (or failed to read or write).
    Closed,
    /// The upstream broke the protocol: the connection's error, or the stream's.
    Protocol(String),
    /// The answer's head or trailers passed the decoder's bounds.
    TooLarge,
    /// We reset the stream (`Reason`), or it is gone on our side.
    Local(Reason),
}

impl StreamError {
    /// nginx's words for it, for the line logged with "while ...".
    pub fn line(&self) -> String {
        match self {
            StreamError::Reset(r) => format!("upstream rejected request with error {}", r.0),
            StreamError::Refused | StreamError::Closed => {
                "upstream prematurely closed connection".to_string()
            }
            StreamError::Protocol(m) => m.clone(),
            StreamError::TooLarge => "upstream sent too big header".to_string(),
            StreamError::Local(r) => format!("stream reset ({})", r.0),
        }
    }
}

/// One call's side of the connection.
#[derive(Default)]
struct Slot {
    id: u32,
    head: Option<(Response, bool)>,
    /// DATA received, not taken yet.
    data: VecDeque<Bytes>,
    /// The answer's END_STREAM came (with its head, DATA or trailers).
    ended: bool,
    trailers: Option<Fields>,
    failed: Option<StreamError>,
    /// The request's DATA past the windows, queued here until they open; `true`: its end.
    unsent: VecDeque<(Bytes, bool)>,
    /// The request's END_STREAM (or RST_STREAM) went, or is queued in `unsent`.
    sent_end: bool,
    /// Live handles.
    handles: u8,
    recv_waker: Option<Waker>,
    send_waker: Option<Waker>,
}

fn wake(w: &mut Option<Waker>) {
    if let Some(w) = w.take() {
        w.wake();
    }
}

/// What the connection's task and its calls share.
pub struct Inner {
    pub client: Client,
    slots: Vec<Slot>,
    /// The last stream's DATA queue, emptied, for the next one (a connection carries one call
    /// at a time: its queue is allocated once, not per call).
    spare_data: VecDeque<Bytes>,
    conn_waker: Option<Waker>,
    /// Set while the connection's task runs: it sends what is queued before it sleeps.
    driving: bool,
    /// The connection is gone: every stream's operation fails with this.
    closed: Option<StreamError>,
    /// The upstream said GOAWAY: no new stream.
    going_away: bool,
    /// Live owners ([`super::conn::H2Conn`]): at 0, with no stream, the task ends.
    pub owners: usize,
    /// The answer's head size as it came ([`Frames`]).
    pub frames: Frames,
    /// The connection sat in the idle cache for a while: its task lets its buffers go.
    shrink: bool,
    /// The socket, between the task's polls (it takes it while it runs): a call writes the
    /// frames that open its stream itself ([`Batch`]).
    transport: Option<Transport>,
    /// A [`Batch`] is open: what is queued meanwhile wakes nobody (`held` notes it).
    holding: bool,
    held: bool,
}

pub type Core = Rc<RefCell<Inner>>;

impl Inner {
    fn slot(&mut self, id: u32) -> Option<&mut Slot> {
        self.slots.iter_mut().rev().find(|s| s.id == id)
    }

    /// Wakes the connection's task (not while it runs: it sends before it sleeps; nor in a
    /// [`Batch`], which sends what was queued when it ends).
    pub fn queued(&mut self) {
        if self.holding {
            self.held = true;
        } else if !self.driving {
            wake(&mut self.conn_waker);
        }
    }

    /// Writes the codec's output to a plain socket at once, from a call's task; true when
    /// the socket took all of it (it has room, most of the time). Otherwise (TLS, a full
    /// socket, an error) the connection's task is left to it: a noop waker is all this
    /// registers, and the task's own write puts its waker back.
    fn write_now(&mut self) -> bool {
        let Some(t) = self.transport.as_mut() else {
            return false;
        };
        if matches!(t, Transport::Tls(_)) || self.closed.is_some() {
            return false;
        }
        let mut cx = Context::from_waker(Waker::noop());
        loop {
            let out = self.client.conn().pending_output();
            if out.is_empty() {
                break;
            }
            match write(t, &mut cx, &[IoSlice::new(out)]) {
                Poll::Ready(Ok(n)) if n > 0 => self.client.conn_mut().advance(n),
                _ => return false,
            }
        }
        // (Room in the output for a sender that waited for it, as after the task's writes.)
        self.window_opened();
        true
    }

    /// Whether a new call may open a stream here.
    pub fn usable(&self) -> bool {
        self.closed.is_none() && !self.going_away && self.client.conn().can_open().is_ok()
    }

    /// Whether every call's stream is over (no handle left).
    pub fn quiet(&self) -> bool {
        self.slots.is_empty()
    }

    /// Asks the connection's task to free its read buffer and the codec's spare buffers,
    /// once it has no stream (a connection idle in the cache: nginx frees an idle keepalive
    /// connection's buffer too).
    pub fn shrink_idle(&mut self) {
        self.shrink = true;
        self.queued();
    }

    fn fail_all(&mut self, e: StreamError) {
        if self.closed.is_none() {
            self.closed = Some(e);
        }
        for s in &mut self.slots {
            wake(&mut s.recv_waker);
            wake(&mut s.send_waker);
        }
    }

    fn check(&mut self, id: u32) -> Result<&mut Slot, StreamError> {
        let closed = self.closed.clone();
        let s = self.slot(id).ok_or(StreamError::Closed)?;
        if let Some(e) = &s.failed {
            return Err(e.clone());
        }
        match closed {
            Some(e) if !s.ended => Err(e),
            _ => Ok(s),
        }
    }

    /// Hands what the codec found to the streams.
    fn incoming(&mut self, got: Incoming, input: &[u8]) {
        match got {
            Incoming::Head {
                stream,
                head: response,
                end_stream,
            } => {
                if let Some(s) = self.slot(stream) {
                    s.head = Some((response, end_stream));
                    s.ended |= end_stream;
                    wake(&mut s.recv_waker);
                }
            }
            Incoming::Data {
                stream,
                data,
                end_stream,
            } => {
                let n = data.len();
                let taken = match self.slot(stream) {
                    Some(s) if s.failed.is_none() => {
                        if n > 0 {
                            s.data.push_back(Bytes::copy_from_slice(&input[data]));
                        }
                        s.ended |= end_stream;
                        wake(&mut s.recv_waker);
                        true
                    }
                    _ => false,
                };
                if !taken {
                    self.client.conn_mut().consumed(stream, n as u32);
                }
            }
            Incoming::Trailers { stream, fields } => {
                if let Some(s) = self.slot(stream) {
                    s.trailers = Some(fields);
                    s.ended = true;
                    wake(&mut s.recv_waker);
                }
            }
            Incoming::TooLarge { stream, .. } => self.stream_failed(stream, StreamError::TooLarge),
            Incoming::Malformed { stream, why } => {
                self.stream_failed(stream, StreamError::Protocol(why.to_string()))
            }
            Incoming::Reset {
                stream,
                code,
                by_peer,
            } => {
                let e = match (by_peer, code) {
                    (true, Reason::REFUSED_STREAM) => StreamError::Refused,
                    (true, code) => StreamError::Reset(code),
                    (false, code) => StreamError::Protocol(format!(
                        "upstream sent invalid frame (stream error {:#x})",
                        code.0
                    )),
                };
                self.stream_failed(stream, e);
            }
            Incoming::GoAway { .. } => self.going_away = true,
            Incoming::WindowOpened { .. } | Incoming::SettingsChanged => self.window_opened(),
            Incoming::Closed(e) => self.fail_all(StreamError::Protocol(e.to_string())),
        }
    }

    fn stream_failed(&mut self, id: u32, e: StreamError) {
        let mut queued = 0;
        if let Some(s) = self.slot(id) {
            s.failed.get_or_insert(e);
            queued = s.data.drain(..).map(|d| d.len()).sum::<usize>();
            s.unsent.clear();
            wake(&mut s.recv_waker);
            wake(&mut s.send_waker);
        }
        if queued > 0 {
            self.client.conn_mut().consumed(id, queued as u32);
        }
    }

    /// The windows grew, or output drained: the request's DATA waiting goes, waiting senders
    /// try again.
    fn window_opened(&mut self) {
        for i in 0..self.slots.len() {
            let id = self.slots[i].id;
            while let Some((d, end)) = self.slots[i].unsent.pop_front() {
                let n = self
                    .client
                    .conn_mut()
                    .send_data(id, &d, end)
                    .unwrap_or(d.len());
                if n < d.len() {
                    self.slots[i].unsent.push_front((d.slice(n..), end));
                    break;
                }
            }
            if self.slots[i].unsent.is_empty() {
                wake(&mut self.slots[i].send_waker);
            }
        }
    }

    /// A handle is gone: the stream is reset if the call left it unfinished, and forgotten
    /// with its last handle.
    fn drop_handle(&mut self, id: u32) {
        let Some(i) = self.slots.iter().position(|s| s.id == id) else {
            return;
        };
        let s = &mut self.slots[i];
        s.handles -= 1;
        if s.handles > 0 {
            return;
        }
        let unfinished = s.failed.is_none() && !(s.ended && s.sent_end && s.unsent.is_empty());
        let queued = match s.data.is_empty() {
            true => 0,
            false => s.data.drain(..).map(|d| d.len()).sum::<usize>(),
        };
        let gone = self.slots.swap_remove(i);
        if self.spare_data.capacity() < gone.data.capacity() {
            self.spare_data = gone.data;
        }
        if self.closed.is_some() {
            return;
        }
        let before = self.client.conn().pending_output().len();
        if queued > 0 {
            self.client.conn_mut().consumed(id, queued as u32);
        }
        if unfinished {
            self.client.reset(id, Reason::CANCEL);
        }
        // The task is woken only for a frame to send, or to end a connection nobody needs:
        // a call that ended well queues nothing (a wake-up per call for nothing otherwise).
        let end = self.owners == 0 && self.slots.is_empty();
        if end || self.client.conn().pending_output().len() != before {
            self.queued();
        }
    }
}

/// Starts a connection's task on the worker: the preface and SETTINGS are queued already
/// (each stream's window `window`).
pub fn start(t: Transport, client: Client) -> Core {
    let core = Rc::new(RefCell::new(Inner {
        client,
        slots: Vec::new(),
        spare_data: VecDeque::new(),
        conn_waker: None,
        driving: false,
        closed: None,
        going_away: false,
        owners: 1,
        frames: Frames::default(),
        shrink: false,
        transport: Some(t),
        holding: false,
        held: false,
    }));
    tokio::task::spawn_local(drive(core.clone()));
    core
}

/// The frames a call queues as it opens its stream (its HEADERS, the body's first DATA),
/// written together as the batch ends, by the call itself when the socket takes them at
/// once: the connection's task is not woken for them (it is, to write them, when the socket
/// does not take them all). Its read of the answer was armed at its last poll already.
pub struct Batch<'a>(&'a Core);

impl<'a> Batch<'a> {
    pub fn new(core: &'a Core) -> Batch<'a> {
        core.borrow_mut().holding = true;
        Batch(core)
    }
}

impl Drop for Batch<'_> {
    fn drop(&mut self) {
        let mut me = self.0.borrow_mut();
        me.holding = false;
        if std::mem::take(&mut me.held) && !me.write_now() {
            me.queued();
        }
    }
}

/// The connection's task.
async fn drive(core: Core) {
    // Zeroed once: reads go into it in place (no zeroing per read).
    let mut buf = Input {
        bytes: vec![0; READ_BUF],
        filled: 0,
    };
    let mut unflushed = false;
    let end = std::future::poll_fn(|cx| {
        let mut me = core.borrow_mut();
        me.driving = true;
        match &me.conn_waker {
            Some(w) if w.will_wake(cx.waker()) => {}
            _ => me.conn_waker = Some(cx.waker().clone()),
        }
        let Some(mut t) = me.transport.take() else {
            return Poll::Ready(Err(StreamError::Closed));
        };
        let r = poll_conn(&mut t, &mut buf, &mut unflushed, &mut me, cx);
        me.transport = Some(t);
        me.driving = false;
        r
    })
    .await;
    // (What came before the end stays for the calls to take: an upstream may close right
    // after its answer.)
    let t = {
        let mut me = core.borrow_mut();
        me.fail_all(end.err().unwrap_or(StreamError::Closed));
        me.transport.take()
    };
    if let Some(mut t @ Transport::Tls(_)) = t {
        // A TLS upstream hears close_notify (within a second).
        let shut = std::future::poll_fn(|cx| match &mut t {
            Transport::Tls(s) => {
                s.queue_close_notify();
                s.poll_flush(cx)
            }
            _ => Poll::Ready(Ok(())),
        });
        let _ = tokio::time::timeout(Duration::from_secs(1), shut).await;
    }
}

/// Writes, reads, feeds the codec; ready when the connection is over: `Ok` when it ended
/// because nobody needs it, the error that ended it otherwise.
fn poll_conn(
    t: &mut Transport,
    buf: &mut Input,
    unflushed: &mut bool,
    me: &mut Inner,
    cx: &mut Context<'_>,
) -> Poll<Result<(), StreamError>> {
    loop {
        if me.owners == 0 && me.slots.is_empty() && me.closed.is_none() {
            // Nobody needs it: a GOAWAY, then the close (the output is written first).
            me.client.conn_mut().goaway(Reason::NO_ERROR);
            me.closed = Some(StreamError::Closed);
        }
        if let Err(e) = poll_write(t, unflushed, me, cx) {
            me.fail_all(StreamError::Closed);
            let _ = e;
            return Poll::Ready(Err(StreamError::Closed));
        }
        if let Some(e) = &me.closed {
            if me.client.conn().pending_output().is_empty() && !*unflushed {
                return Poll::Ready(match e {
                    StreamError::Closed => Ok(()),
                    e => Err(e.clone()),
                });
            }
            return Poll::Pending;
        }
        let idle = me.slots.is_empty() && buf.filled == 0;
        if std::mem::take(&mut me.shrink) && idle && !*unflushed {
            buf.bytes = Vec::new();
            me.client.shrink();
            me.spare_data = VecDeque::new();
        }
        // Read (a frame larger than the buffer grows it); a buffer let go is made again for
        // a call, or once an idle connection's bytes came.
        let mut small = [0u8; IDLE_READ];
        let into = match buf.bytes.len() {
            0 if idle => &mut small[..],
            0 => {
                buf.bytes = vec![0; READ_BUF];
                &mut buf.bytes[..]
            }
            len if buf.filled == len => {
                buf.bytes.resize(2 * len, 0);
                &mut buf.bytes[buf.filled..]
            }
            _ => &mut buf.bytes[buf.filled..],
        };
        let mut rb = ReadBuf::new(into);
        let got = read(t, cx, &mut rb);
        let n = rb.filled().len();
        if buf.bytes.is_empty() && n > 0 {
            let mut bytes = vec![0; READ_BUF];
            bytes[..n].copy_from_slice(&small[..n]);
            buf.bytes = bytes;
        }
        match got {
            Poll::Pending => return Poll::Pending,
            Poll::Ready(Err(_)) => {
                me.fail_all(StreamError::Closed);
                return Poll::Ready(Err(StreamError::Closed));
            }
            Poll::Ready(Ok(())) if n == 0 => {
                me.fail_all(StreamError::Closed);
                return Poll::Ready(Err(StreamError::Closed));
            }
            Poll::Ready(Ok(())) => {}
        }
        me.frames.scan(&buf.bytes[buf.filled..buf.filled + n]);
        buf.filled += n;
        // (The codec stops after an answer's head: it goes on with the rest once the head
        // was decoded.)
        loop {
            let input = &buf.bytes[..buf.filled];
            let got = me.client.recv(input);
            while let Some(got) = me.client.poll(input) {
                me.incoming(got, input);
            }
            match got {
                Ok(used) => {
                    buf.bytes.copy_within(used..buf.filled, 0);
                    buf.filled -= used;
                    if used == 0 || buf.filled == 0 {
                        break;
                    }
                }
                Err(e) => {
                    // The GOAWAY is written before the connection closes.
                    me.fail_all(StreamError::Protocol(e.to_string()));
                    break;
                }
            }
        }
    }
}

/// The read buffer: `filled` bytes of it read and not yet used.
struct Input {
    bytes: Vec<u8>,
    filled: usize,
}

fn poll_write(
    t: &mut Transport,
    unflushed: &mut bool,
    me: &mut Inner,
    cx: &mut Context<'_>,
) -> io::Result<()> {
    let mut wrote = false;
    loop {
        let out = me.client.conn().pending_output();
        if out.is_empty() {
            break;
        }
        match write(t, cx, &[IoSlice::new(out)]) {
            Poll::Ready(Ok(0)) => return Err(io::ErrorKind::WriteZero.into()),
            Poll::Ready(Ok(n)) => {
                me.client.conn_mut().advance(n);
                wrote = true;
            }
            Poll::Ready(Err(e)) => return Err(e),
            Poll::Pending => break,
        }
    }
    if wrote || *unflushed {
        match flush(t, cx) {
            Poll::Ready(Ok(())) => *unflushed = false,
            Poll::Ready(Err(e)) => return Err(e),
            Poll::Pending => *unflushed = true,
        }
    }
    if wrote {
        me.window_opened();
    }
    Ok(())
}
