//! Each call's handles on its stream: [`open`] makes them; [`HeadWait`] (the answer's head),
//! [`RecvStream`] (its DATA and trailers) and [`SendStream`] (the request's DATA, trailers, a
//! reset) work on the connection's shared state ([`super::Inner`]) and wake its task when they
//! queue a frame.

use std::task::{Context, Poll};

use bytes::Bytes;
use shoal_http2::client::{Fields, Response};
use shoal_http2::frame::Reason;

use super::{wake, Core, Slot, StreamError, OUT_MAX};

/// Opens a stream for a call: its handles. The head is encoded by the codec here.
pub fn open<'f>(
    core: &Core,
    head: &shoal_http2::client::RequestHead<'_>,
    fields: impl IntoIterator<Item = (&'f [u8], &'f [u8])>,
    end: bool,
) -> Result<(HeadWait, RecvStream, SendStream), StreamError> {
    let mut me = core.borrow_mut();
    if let Some(e) = &me.closed {
        return Err(e.clone());
    }
    let id = me
        .client
        .request(head, fields, end)
        .map_err(|_| StreamError::Refused)?;
    let data = std::mem::take(&mut me.spare_data);
    me.slots.push(Slot {
        id,
        data,
        sent_end: end,
        handles: 3,
        ..Slot::default()
    });
    me.queued();
    let h = |core: &Core| Handle {
        core: core.clone(),
        id,
    };
    Ok((HeadWait(h(core)), RecvStream(h(core)), SendStream(h(core))))
}

/// A handle on one stream.
struct Handle {
    core: Core,
    id: u32,
}

impl Drop for Handle {
    fn drop(&mut self) {
        self.core.borrow_mut().drop_handle(self.id);
    }
}

/// The answer's head, awaited.
pub struct HeadWait(Handle);

impl HeadWait {
    /// The stream's id.
    pub fn id(&self) -> u32 {
        self.0.id
    }
}

impl std::future::Future for HeadWait {
    type Output = Result<(Response, bool), StreamError>;

    fn poll(self: std::pin::Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let h = &self.0;
        let mut me = h.core.borrow_mut();
        let closed = me.closed.clone();
        let Some(s) = me.slot(h.id) else {
            return Poll::Ready(Err(StreamError::Closed));
        };
        if let Some(head) = s.head.take() {
            return Poll::Ready(Ok(head));
        }
        if let Some(e) = s.failed.clone().or(closed) {
            return Poll::Ready(Err(e));
        }
        s.recv_waker = Some(cx.waker().clone());
        Poll::Pending
    }
}

/// The answer's body: its DATA frames and trailers as they come.
pub struct RecvStream(Handle);

impl RecvStream {
    /// The next DATA frame's bytes; `None` at the body's end.
    pub fn poll_data(&mut self, cx: &mut Context<'_>) -> Poll<Option<Result<Bytes, StreamError>>> {
        let h = &self.0;
        let mut me = h.core.borrow_mut();
        let closed = me.closed.clone();
        let Some(s) = me.slot(h.id) else {
            return Poll::Ready(Some(Err(StreamError::Closed)));
        };
        if let Some(d) = s.data.pop_front() {
            return Poll::Ready(Some(Ok(d)));
        }
        if let Some(e) = &s.failed {
            return Poll::Ready(Some(Err(e.clone())));
        }
        if s.ended {
            return Poll::Ready(None);
        }
        if let Some(e) = closed {
            return Poll::Ready(Some(Err(e)));
        }
        s.recv_waker = Some(cx.waker().clone());
        Poll::Pending
    }

    pub async fn data(&mut self) -> Option<Result<Bytes, StreamError>> {
        std::future::poll_fn(|cx| self.poll_data(cx)).await
    }

    /// The trailers, once the DATA frames are over (`None`: the body ended without).
    pub async fn trailers(&mut self) -> Result<Option<Fields>, StreamError> {
        std::future::poll_fn(|cx| {
            let h = &self.0;
            let mut me = h.core.borrow_mut();
            let s = match me.check(h.id) {
                Ok(s) => s,
                Err(e) => return Poll::Ready(Err(e)),
            };
            if s.ended {
                return Poll::Ready(Ok(s.trailers.take()));
            }
            s.recv_waker = Some(cx.waker().clone());
            Poll::Pending
        })
        .await
    }

    /// Gives the trailers back once relayed: the connection's next ones use their buffers.
    pub fn recycle(&mut self, trailers: Fields) {
        self.0.core.borrow_mut().client.recycle(trailers);
    }

    /// Whether the answer ended and every byte of it was taken.
    pub fn is_end_stream(&self) -> bool {
        let mut me = self.0.core.borrow_mut();
        me.slot(self.0.id)
            .is_some_and(|s| s.ended && s.data.is_empty())
    }

    /// `n` bytes taken: back to the upstream's windows at once, the stream's (the upstream
    /// may send again as soon as the client took anything, as from nginx), the connection's
    /// when half of it waits.
    pub fn release_capacity(&mut self, n: usize) {
        let mut me = self.0.core.borrow_mut();
        if me.closed.is_some() || n == 0 {
            return;
        }
        let before = me.client.conn().pending_output().len();
        me.client.conn_mut().consumed(self.0.id, n as u32);
        me.client.conn_mut().window_back(self.0.id);
        if me.client.conn().pending_output().len() != before {
            me.queued();
        }
    }
}

/// The request's body: DATA within the upstream's windows, trailers, a reset.
pub struct SendStream(Handle);

impl SendStream {
    /// How many bytes of DATA go at once now: the upstream's windows, less what waits for
    /// the socket past a bound (0 while DATA queued before waits).
    pub fn capacity(&self) -> usize {
        let mut me = self.0.core.borrow_mut();
        let waiting = me.client.conn().pending_output().len();
        let id = self.0.id;
        match me.check(id) {
            Ok(s) if s.unsent.is_empty() => {}
            _ => return 0,
        }
        let window = me.client.conn_mut().window(id).unwrap_or(0);
        window.min(OUT_MAX.saturating_sub(waiting))
    }

    /// Ready with the capacity once some is there; an error once the stream is gone.
    pub fn poll_capacity(
        &mut self,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<usize, StreamError>>> {
        if let Err(e) = self.0.core.borrow_mut().check(self.0.id) {
            return Poll::Ready(Some(Err(e)));
        }
        let now = self.capacity();
        if now > 0 {
            return Poll::Ready(Some(Ok(now)));
        }
        let mut me = self.0.core.borrow_mut();
        if me.client.conn_mut().window(self.0.id).is_err() {
            return Poll::Ready(Some(Err(StreamError::Local(Reason::STREAM_CLOSED))));
        }
        if let Some(s) = me.slot(self.0.id) {
            s.send_waker = Some(cx.waker().clone());
        }
        Poll::Pending
    }

    /// Nothing: [`SendStream::capacity`] is what the windows allow now.
    pub fn reserve_capacity(&mut self, _n: usize) {}

    /// Queues DATA: what the windows take now goes in the codec's output, the rest waits
    /// here for them to open (in order).
    pub fn send_data(&mut self, data: Bytes, end: bool) -> Result<(), StreamError> {
        let mut me = self.0.core.borrow_mut();
        let id = self.0.id;
        let s = me.check(id)?;
        if s.sent_end {
            return Err(StreamError::Local(Reason::STREAM_CLOSED));
        }
        s.sent_end = end;
        if !s.unsent.is_empty() {
            s.unsent.push_back((data, end));
            return Ok(());
        }
        let n = me
            .client
            .conn_mut()
            .send_data(id, &data, end)
            .map_err(|_| StreamError::Local(Reason::STREAM_CLOSED))?;
        if n < data.len() {
            if let Some(s) = me.slot(id) {
                s.unsent.push_back((data.slice(n..), end));
            }
        }
        me.queued();
        Ok(())
    }

    /// Queues the request's trailers, which end it (after any DATA still waiting: then they
    /// are sent as an empty END_STREAM DATA frame instead, as nginx does without them).
    pub fn send_trailers<'f>(
        &mut self,
        fields: impl IntoIterator<Item = (&'f [u8], &'f [u8])>,
    ) -> Result<(), StreamError> {
        let mut me = self.0.core.borrow_mut();
        let id = self.0.id;
        let s = me.check(id)?;
        if s.sent_end {
            return Err(StreamError::Local(Reason::STREAM_CLOSED));
        }
        s.sent_end = true;
        if !s.unsent.is_empty() {
            s.unsent.push_back((Bytes::new(), true));
            return Ok(());
        }
        me.client
            .send_trailers(id, fields)
            .map_err(|_| StreamError::Local(Reason::STREAM_CLOSED))?;
        me.queued();
        Ok(())
    }

    /// Resets the stream.
    pub fn send_reset(&mut self, code: Reason) {
        let mut me = self.0.core.borrow_mut();
        let id = self.0.id;
        let Some(s) = me.slot(id) else { return };
        if s.failed.is_some() {
            return;
        }
        s.failed = Some(StreamError::Local(code));
        s.sent_end = true;
        s.unsent.clear();
        wake(&mut s.recv_waker);
        if me.closed.is_none() {
            me.client.reset(id, code);
            me.queued();
        }
    }
}
