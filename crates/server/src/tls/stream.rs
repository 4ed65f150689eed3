//! [`TlsStream`]: a client's TLS connection after its handshake, with what the handshake
//! settled ([`TlsInfo`]).
//!
//! It is tokio's `AsyncRead + AsyncWrite` (what the h2 crate will take) over a [`TlsConn`],
//! and has the writer's fast path: [`TlsStream::write_all_vectored`] encrypts a head and a body
//! in records of `ssl_buffer_size` plaintext bytes and sends them with one `writev` when the
//! socket takes them. The HTTP/1 transport takes the [`TlsConn`] and the [`TlsInfo`] apart
//! ([`TlsStream::into_parts`]). Runs on a worker; never blocks.

use std::io::{self, IoSlice};
use std::pin::Pin;
use std::task::{ready, Context, Poll};

use rustls::ServerConnection;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;

use super::conn::TlsConn;
use super::info::TlsInfo;

pub use super::conn::tls_error;

/// A TLS connection ready for application data.
pub struct TlsStream {
    conn: TlsConn,
    info: TlsInfo,
}

impl std::fmt::Debug for TlsStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TlsStream")
            .field("info", &self.info)
            .field("conn", &self.conn)
            .finish()
    }
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
            conn: TlsConn::new(io, conn, record_size, early),
            info,
        }
    }

    /// What the handshake settled.
    pub fn info(&self) -> &TlsInfo {
        &self.info
    }

    /// The connection and what its handshake settled, apart (for a transport that keeps the
    /// one and lends the other to requests).
    pub fn into_parts(self) -> (TlsConn, TlsInfo) {
        (self.conn, self.info)
    }

    /// The TCP socket (for its addresses and options; reading or writing it directly would
    /// corrupt the TLS stream).
    pub fn get_ref(&self) -> &TcpStream {
        self.conn.tcp()
    }

    /// The plaintext size of the records writes make (`ssl_buffer_size`, at most 16 KiB).
    pub fn record_size(&self) -> usize {
        self.conn.record_size()
    }

    pub fn set_record_size(&mut self, n: usize) {
        self.conn.set_record_size(n);
    }

    /// Writes every byte of `bufs` (a response head and body, say), in records of
    /// [`TlsStream::record_size`].
    pub async fn write_all_vectored(&mut self, bufs: &[&[u8]]) -> io::Result<()> {
        self.conn.write_all_vectored(bufs).await
    }

    /// Writes all of `buf`.
    pub async fn write_all(&mut self, buf: &[u8]) -> io::Result<()> {
        self.conn.write_all_vectored(&[buf]).await
    }

    /// Sends close_notify and flushes (nginx's `SSL_shutdown()`); the caller then closes.
    pub async fn close_notify(&mut self) -> io::Result<()> {
        self.conn.close_notify().await
    }
}

impl AsyncRead for TlsStream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        self.conn.poll_read(cx, buf)
    }
}

impl AsyncWrite for TlsStream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        self.conn.poll_write_vectored(cx, &[IoSlice::new(buf)])
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        self.conn.poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        true
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.conn.poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.conn.queue_close_notify();
        ready!(self.conn.poll_flush(cx))?;
        // The write half of the socket ends too.
        Poll::Ready(socket2::SockRef::from(self.conn.tcp()).shutdown(std::net::Shutdown::Write))
    }
}
