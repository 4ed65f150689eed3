//! [`TlsStream`]: a TCP connection after its handshake, driven by `rustls::ServerConnection`
//! directly (no tokio-rustls: we choose record sizes and when to flush).
//!
//! It is tokio's `AsyncRead + AsyncWrite` (what the HTTP/1 driver and the h2 crate take), and
//! has the writer's fast paths: [`TlsStream::write_all_vectored`] encrypts a head and a body in
//! records of `ssl_buffer_size` plaintext bytes and sends them with one `writev` when they fit
//! rustls's buffer. Runs on a worker; never blocks (the socket is non-blocking and every wait is
//! tokio's readiness).

use std::io::{self, IoSlice, Read, Write};
use std::pin::Pin;
use std::task::{ready, Context, Poll};

use rustls::ServerConnection;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;

use super::error::{Call, TlsError};
use super::info::TlsInfo;

/// `Read` over a tokio socket without waiting (`WouldBlock` when nothing is there).
pub(super) struct SockRead<'a>(pub &'a TcpStream);

impl Read for SockRead<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.0.try_read(buf)
    }
}

/// `Write` over a tokio socket without waiting.
pub(super) struct SockWrite<'a>(pub &'a TcpStream);

impl Write for SockWrite<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0.try_write(buf)
    }
    fn write_vectored(&mut self, bufs: &[IoSlice<'_>]) -> io::Result<usize> {
        self.0.try_write_vectored(bufs)
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// A TLS connection ready for application data.
pub struct TlsStream {
    io: TcpStream,
    conn: ServerConnection,
    info: TlsInfo,
    record_size: usize,
    /// 0-RTT data read during the handshake, served before anything else.
    early: Vec<u8>,
    early_pos: usize,
    /// The peer's close_notify or the socket's end was seen.
    eof: bool,
    /// Our close_notify is queued.
    closing: bool,
}

impl std::fmt::Debug for TlsStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TlsStream")
            .field("info", &self.info)
            .field("record_size", &self.record_size)
            .finish_non_exhaustive()
    }
}

/// An I/O error carrying a TLS failure (its `get_ref()` is a [`TlsError`] with nginx's line).
fn tls_io_error(e: TlsError) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, e)
}

/// The [`TlsError`] inside an error from [`TlsStream`]'s reads or writes, if it is one (else
/// the error is the socket's own).
pub fn tls_error(e: &io::Error) -> Option<&TlsError> {
    e.get_ref().and_then(|i| i.downcast_ref::<TlsError>())
}

impl TlsStream {
    pub(super) fn new(
        io: TcpStream,
        conn: ServerConnection,
        info: TlsInfo,
        record_size: usize,
        early: Vec<u8>,
    ) -> TlsStream {
        TlsStream {
            io,
            conn,
            info,
            record_size: record_size.clamp(512, 16384),
            early,
            early_pos: 0,
            eof: false,
            closing: false,
        }
    }

    /// What the handshake settled.
    pub fn info(&self) -> &TlsInfo {
        &self.info
    }

    /// The TCP socket (for its addresses and options; reading or writing it directly would
    /// corrupt the TLS stream).
    pub fn get_ref(&self) -> &TcpStream {
        &self.io
    }

    /// The plaintext size of the records writes make (`ssl_buffer_size`, at most 16 KiB).
    pub fn record_size(&self) -> usize {
        self.record_size
    }

    pub fn set_record_size(&mut self, n: usize) {
        self.record_size = n.clamp(512, 16384);
    }

    /// Encrypts `bufs` in records of `record_size` plaintext bytes (a head and its body share
    /// records: a short head does not make a short record) for as long as rustls's buffer takes
    /// them; returns the plaintext bytes taken.
    fn encrypt_some(&mut self, bufs: &[IoSlice<'_>]) -> io::Result<usize> {
        let mut taken = 0;
        // The slices of one record; a head and a body rarely make more than four.
        let mut record: Vec<IoSlice<'_>> = Vec::with_capacity(bufs.len().min(8));
        loop {
            record.clear();
            let mut room = self.record_size;
            let mut skip = taken;
            for b in bufs {
                if room == 0 {
                    break;
                }
                if skip >= b.len() {
                    skip -= b.len();
                    continue;
                }
                let part = &b[skip..];
                skip = 0;
                let n = part.len().min(room);
                record.push(IoSlice::new(&part[..n]));
                room -= n;
            }
            if record.is_empty() {
                return Ok(taken);
            }
            let n = self.conn.writer().write_vectored(&record)?;
            taken += n;
            if n < self.record_size - room {
                // rustls's buffer is full: the socket must take some first.
                return Ok(taken);
            }
        }
    }

    /// Sends what rustls has encrypted, as far as the socket takes it now.
    fn poll_flush_tls(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        while self.conn.wants_write() {
            match self.conn.write_tls(&mut SockWrite(&self.io)) {
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    ready!(self.io.poll_write_ready(cx))?;
                }
                Err(e) => return Poll::Ready(Err(e)),
            }
        }
        Poll::Ready(Ok(()))
    }

    fn poll_write_slices(
        &mut self,
        cx: &mut Context<'_>,
        bufs: &[IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        loop {
            let n = self.encrypt_some(bufs)?;
            // Push out what can go without waiting; wait only if nothing was taken.
            let flushed = self.poll_flush_tls(cx)?;
            if n > 0 {
                return Poll::Ready(Ok(n));
            }
            if bufs.iter().all(|b| b.is_empty()) {
                return Poll::Ready(Ok(0));
            }
            if flushed.is_pending() {
                return Poll::Pending;
            }
        }
    }

    /// Writes every byte of `bufs` (a response head and body, say), in records of
    /// [`TlsStream::record_size`], flushing as rustls's buffer fills and once at the end.
    pub async fn write_all_vectored(&mut self, bufs: &[&[u8]]) -> io::Result<()> {
        let total: usize = bufs.iter().map(|b| b.len()).sum();
        let mut done = 0;
        while done < total {
            let mut rest: Vec<IoSlice<'_>> = Vec::with_capacity(bufs.len());
            let mut skip = done;
            for b in bufs {
                if skip >= b.len() {
                    skip -= b.len();
                    continue;
                }
                rest.push(IoSlice::new(&b[skip..]));
                skip = 0;
            }
            let n = std::future::poll_fn(|cx| self.poll_write_slices(cx, &rest)).await?;
            if n == 0 {
                return Err(io::ErrorKind::WriteZero.into());
            }
            done += n;
        }
        std::future::poll_fn(|cx| self.poll_flush_tls(cx)).await
    }

    /// Writes all of `buf`.
    pub async fn write_all(&mut self, buf: &[u8]) -> io::Result<()> {
        self.write_all_vectored(&[buf]).await
    }

    /// Sends close_notify and flushes (nginx's `SSL_shutdown()`); the caller then closes.
    pub async fn close_notify(&mut self) -> io::Result<()> {
        if !self.closing {
            self.closing = true;
            self.conn.send_close_notify();
        }
        std::future::poll_fn(|cx| self.poll_flush_tls(cx)).await
    }

    /// Reads and decrypts what the socket has; `Ok(false)` at the socket's end.
    fn poll_fill(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<bool>> {
        loop {
            match self.conn.read_tls(&mut SockRead(&self.io)) {
                Ok(0) => return Poll::Ready(Ok(false)),
                Ok(_) => break,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    ready!(self.io.poll_read_ready(cx))?;
                }
                Err(e) => return Poll::Ready(Err(e)),
            }
        }
        if let Err(e) = self.conn.process_new_packets() {
            // Let the alert out, best effort, before reporting.
            let _ = self.conn.write_tls(&mut SockWrite(&self.io));
            return Poll::Ready(Err(tls_io_error(TlsError::from_rustls(Call::Read, &e))));
        }
        // A key update or session tickets may want an answer.
        if self.conn.wants_write() {
            let _ = self.poll_flush_tls(cx)?;
        }
        Poll::Ready(Ok(true))
    }
}

impl AsyncRead for TlsStream {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = &mut *self;
        if this.early_pos < this.early.len() {
            let n = buf.remaining().min(this.early.len() - this.early_pos);
            buf.put_slice(&this.early[this.early_pos..this.early_pos + n]);
            this.early_pos += n;
            if this.early_pos == this.early.len() {
                this.early = Vec::new();
                this.early_pos = 0;
            }
            return Poll::Ready(Ok(()));
        }
        loop {
            if this.eof {
                return Poll::Ready(Ok(()));
            }
            match this.conn.reader().read(buf.initialize_unfilled()) {
                Ok(0) => {
                    // close_notify: the end of the stream.
                    this.eof = true;
                    return Poll::Ready(Ok(()));
                }
                Ok(n) => {
                    buf.advance(n);
                    return Poll::Ready(Ok(()));
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                // The socket ended without close_notify: an end all the same, as for nginx.
                Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => {
                    this.eof = true;
                    return Poll::Ready(Ok(()));
                }
                Err(e) => return Poll::Ready(Err(e)),
            }
            if !ready!(this.poll_fill(cx))? {
                this.eof = true;
                return Poll::Ready(Ok(()));
            }
        }
    }
}

impl AsyncWrite for TlsStream {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        self.poll_write_slices(cx, &[IoSlice::new(buf)])
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        self.poll_write_slices(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        true
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.poll_flush_tls(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        if !self.closing {
            self.closing = true;
            self.conn.send_close_notify();
        }
        ready!(self.poll_flush_tls(cx))?;
        Pin::new(&mut self.io).poll_shutdown(cx)
    }
}
