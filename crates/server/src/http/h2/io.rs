//! The connection's [`Transport`] as the `h2` crate reads and writes it (tokio's
//! `AsyncRead`/`AsyncWrite`). A shutdown is TLS's close_notify, or a plain socket's FIN.
//!
//! `http2_recv_buffer_size` bounds each read as nginx's buffer does: nginx reads a connection
//! into one per-worker buffer of that size, less the 32 bytes it keeps for a frame cut between
//! two reads, so no read takes more than `size − 32` bytes. The `h2` crate reads into a buffer
//! of its own (grown to a frame's size); [`Io`] hands it at most that many bytes per read.
//!
//! Writes are gathered: the crate writes (and flushes) each DATA frame on its own, so small
//! frames are copied into one buffer instead, and the connection's task sends it with one
//! write when it has done all it could in a poll ([`Io::send`]), as nginx sends a connection's
//! queued frames with one `writev` per write event. Over TLS the frames of one poll share
//! records. A write of a large frame goes straight out, behind what was gathered. The buffer
//! is a worker's spare between two sends: an idle connection holds none.

use std::cell::RefCell;
use std::io;
use std::io::IoSlice;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{ready, Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use crate::http::transport::Transport;

/// nginx's state buffer, kept twice at the start of its receive buffer.
const STATE_BUFFER: usize = 16;

/// The most bytes gathered before they are written (a poll's frames beyond it go out then).
const GATHER_MAX: usize = 64 * 1024;

/// A write at least this long is not copied: it goes out at once, behind what is gathered.
const DIRECT: usize = 4096;

thread_local! {
    /// Gathering buffers between two sends.
    static SPARE_OUT: crate::spare::Spares<Vec<u8>> = const { crate::spare::Spares::new(16) };
}

/// An HTTP/2 connection's bytes: the `h2` crate's handle and the connection task's
/// ([`Io::handle`]) share them.
pub struct Io(Rc<RefCell<State>>);

struct State {
    transport: Transport,
    /// The most one read takes (`http2_recv_buffer_size` less nginx's state buffers).
    recv_max: usize,
    /// Bytes written by the crate, not yet on the socket (from `sent` on).
    out: Vec<u8>,
    sent: usize,
    /// A write that failed after the crate was told its bytes were taken: its next write
    /// or read sees the error.
    failed: Option<io::ErrorKind>,
}

impl Io {
    /// `recv_buffer_size`: `http2_recv_buffer_size` (more than 32, as the directive checks).
    pub fn new(transport: Transport, recv_buffer_size: usize) -> Io {
        Io(Rc::new(RefCell::new(State {
            transport,
            recv_max: recv_buffer_size.saturating_sub(2 * STATE_BUFFER).max(1),
            out: Vec::new(),
            sent: 0,
            failed: None,
        })))
    }

    /// The connection task's handle, to [`Io::send`] what a poll gathered.
    pub fn handle(&self) -> Io {
        Io(self.0.clone())
    }

    /// Writes everything gathered (`Pending`: the socket is full, the task is woken when it
    /// takes more). A failure is kept for the crate's next read or write.
    pub fn send(&self, cx: &mut Context<'_>) -> Poll<()> {
        let mut st = self.0.borrow_mut();
        if st.failed.is_some() {
            st.release();
            return Poll::Ready(());
        }
        let r = st.poll_drain(cx);
        match r {
            Poll::Pending => Poll::Pending,
            Poll::Ready(Ok(())) => Poll::Ready(()),
            Poll::Ready(Err(e)) => {
                st.failed = Some(e.kind());
                st.release();
                Poll::Ready(())
            }
        }
    }

    /// Whether gathered bytes wait for the socket.
    #[cfg(test)]
    fn gathered(&self) -> usize {
        let st = self.0.borrow();
        st.out.len() - st.sent
    }
}

impl State {
    /// Gives the buffer back to the worker's spares once everything in it is out.
    fn release(&mut self) {
        self.sent = 0;
        if self.out.capacity() > 0 {
            let out = std::mem::take(&mut self.out);
            SPARE_OUT.with(|s| s.give(out, Vec::clear));
        }
    }

    fn gather(&mut self, bufs: &[IoSlice<'_>]) {
        if self.out.capacity() == 0 {
            if let Some(spare) = SPARE_OUT.with(|s| s.take()) {
                self.out = spare;
            } else {
                self.out.reserve(16 * 1024);
            }
        }
        for b in bufs {
            self.out.extend_from_slice(b);
        }
    }

    fn took(&mut self, n: usize) {
        self.sent += n;
        if self.sent == self.out.len() {
            self.release();
        }
    }

    /// Writes the gathered bytes until none is left, then flushes the transport (TLS records).
    fn poll_drain(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        while self.sent < self.out.len() {
            let n = {
                let pending = IoSlice::new(&self.out[self.sent..]);
                ready!(write(&mut self.transport, cx, &[pending]))?
            };
            if n == 0 {
                return Poll::Ready(Err(io::ErrorKind::WriteZero.into()));
            }
            self.took(n);
        }
        flush(&mut self.transport, cx)
    }

    fn poll_write(
        &mut self,
        cx: &mut Context<'_>,
        bufs: &[IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        if let Some(kind) = self.failed {
            return Poll::Ready(Err(kind.into()));
        }
        let total: usize = bufs.iter().map(|b| b.len()).sum();
        loop {
            let waiting = self.out.len() - self.sent;
            if total < DIRECT && waiting + total <= GATHER_MAX {
                self.gather(bufs);
                return Poll::Ready(Ok(total));
            }
            if waiting == 0 {
                return write(&mut self.transport, cx, bufs);
            }
            // What is gathered first, the new bytes behind it in the same write.
            let n = {
                let mut all = [IoSlice::new(&[]); 8];
                all[0] = IoSlice::new(&self.out[self.sent..]);
                let k = bufs.len().min(all.len() - 1);
                all[1..=k].copy_from_slice(&bufs[..k]);
                ready!(write(&mut self.transport, cx, &all[..=k]))?
            };
            if n == 0 {
                return Poll::Ready(Err(io::ErrorKind::WriteZero.into()));
            }
            if n >= waiting {
                self.took(waiting);
                let of_bufs = n - waiting;
                if of_bufs > 0 {
                    return Poll::Ready(Ok(of_bufs));
                }
            } else {
                self.took(n);
            }
        }
    }
}

impl AsyncRead for Io {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let mut st = self.0.borrow_mut();
        let st = &mut *st;
        if let Some(kind) = st.failed {
            return Poll::Ready(Err(kind.into()));
        }
        if buf.remaining() <= st.recv_max {
            return read(&mut st.transport, cx, buf);
        }
        // A window of the crate's buffer, `recv_max` long, read into in place (zeroed first
        // where it never was: only a buffer smaller than the crate's usual pays for that).
        let window = buf.initialize_unfilled_to(st.recv_max);
        let mut part = ReadBuf::new(window);
        let r = read(&mut st.transport, cx, &mut part);
        let n = part.filled().len();
        buf.advance(n);
        r
    }
}

pub(crate) fn read(
    t: &mut Transport,
    cx: &mut Context<'_>,
    buf: &mut ReadBuf<'_>,
) -> Poll<io::Result<()>> {
    match t {
        Transport::Tcp(s) => Pin::new(s).poll_read(cx, buf),
        Transport::Unix(s) => Pin::new(s).poll_read(cx, buf),
        Transport::Tls(t) => t.poll_read(cx, buf),
    }
}

pub(crate) fn write(
    t: &mut Transport,
    cx: &mut Context<'_>,
    bufs: &[IoSlice<'_>],
) -> Poll<io::Result<usize>> {
    match t {
        Transport::Tcp(s) => Pin::new(s).poll_write_vectored(cx, bufs),
        Transport::Unix(s) => Pin::new(s).poll_write_vectored(cx, bufs),
        Transport::Tls(t) => t.poll_write_vectored(cx, bufs),
    }
}

pub(crate) fn flush(t: &mut Transport, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
    match t {
        Transport::Tcp(_) | Transport::Unix(_) => Poll::Ready(Ok(())),
        Transport::Tls(t) => t.poll_flush(cx),
    }
}

impl AsyncWrite for Io {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        self.0.borrow_mut().poll_write(cx, &[IoSlice::new(buf)])
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        self.0.borrow_mut().poll_write(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        true
    }

    /// Nothing: the connection's task sends what was gathered when its poll is over.
    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.0.borrow().failed {
            Some(kind) => Poll::Ready(Err(kind.into())),
            None => Poll::Ready(Ok(())),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let mut st = self.0.borrow_mut();
        let st = &mut *st;
        if st.failed.is_none() {
            ready!(st.poll_drain(cx))?;
        }
        match &mut st.transport {
            Transport::Tcp(s) => Pin::new(s).poll_shutdown(cx),
            Transport::Unix(s) => Pin::new(s).poll_shutdown(cx),
            Transport::Tls(t) => {
                t.queue_close_notify();
                t.poll_flush(cx)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    #[test]
    fn a_read_takes_at_most_the_buffer_less_its_state() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a runtime");
        rt.block_on(async {
            let (a, mut b) = tokio::net::UnixStream::pair().expect("a socket pair");
            b.write_all(&[7u8; 1000]).await.expect("written");
            // `http2_recv_buffer_size 40`: 8 bytes a read.
            let mut io = Io::new(Transport::Unix(a), 40);
            let mut buf = vec![0u8; 4096];
            let n = io.read(&mut buf).await.expect("read");
            assert_eq!(n, 8);
            assert_eq!(&buf[..8], &[7u8; 8]);
            // The default takes what is there.
            let mut rest = Vec::new();
            let transport = match Rc::try_unwrap(io.0) {
                Ok(st) => st.into_inner().transport,
                Err(_) => panic!("one handle"),
            };
            let mut io = Io::new(transport, 256 * 1024);
            while rest.len() < 992 {
                let n = io.read(&mut buf).await.expect("read");
                assert!(n > 8 || rest.len() + n == 992);
                rest.extend_from_slice(&buf[..n]);
            }
            assert_eq!(rest, vec![7u8; 992]);
        });
    }

    #[test]
    fn small_writes_go_out_together_when_the_task_sends() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a runtime");
        rt.block_on(async {
            let (a, mut b) = tokio::net::UnixStream::pair().expect("a socket pair");
            let mut io = Io::new(Transport::Unix(a), 256 * 1024);
            let handle = io.handle();
            for i in 0..10u8 {
                io.write_all(&[i; 100]).await.expect("taken");
                io.flush().await.expect("flushed");
            }
            // Nothing is on the socket until the task sends.
            assert_eq!(handle.gathered(), 1000);
            let mut got = [0u8; 2000];
            assert!(b.try_read(&mut got).is_err());
            std::future::poll_fn(|cx| handle.send(cx)).await;
            assert_eq!(handle.gathered(), 0);
            let mut n = 0;
            while n < 1000 {
                n += b.read(&mut got[n..]).await.expect("read");
            }
            for i in 0..10u8 {
                assert_eq!(&got[i as usize * 100..][..100], &[i; 100]);
            }
            // A large write goes at once, behind what was gathered.
            io.write_all(&[1u8; 10]).await.expect("taken");
            io.write_all(&[2u8; 8000]).await.expect("written");
            assert_eq!(handle.gathered(), 0);
            let mut n = 0;
            while n < 8010 {
                n += b.read(&mut got[..]).await.expect("read");
            }
            // A shutdown sends what waits first.
            io.write_all(b"last").await.expect("taken");
            io.shutdown().await.expect("shut");
            let mut rest = Vec::new();
            b.read_to_end(&mut rest).await.expect("read to the end");
            assert_eq!(rest, b"last");
        });
    }
}
