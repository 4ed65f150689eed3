//! The connection's [`Transport`] as the `h2` crate reads and writes it (tokio's
//! `AsyncRead`/`AsyncWrite`). A shutdown is TLS's close_notify, or a plain socket's FIN.
//!
//! `http2_recv_buffer_size` bounds each read as nginx's buffer does: nginx reads a connection
//! into one per-worker buffer of that size, less the 32 bytes it keeps for a frame cut between
//! two reads, so no read takes more than `size − 32` bytes. The `h2` crate reads into a buffer
//! of its own (grown to a frame's size); [`Io`] hands it at most that many bytes per read.

use std::io;
use std::io::IoSlice;
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use crate::http::transport::Transport;

/// nginx's state buffer, kept twice at the start of its receive buffer.
const STATE_BUFFER: usize = 16;

/// An HTTP/2 connection's bytes.
pub struct Io {
    transport: Transport,
    /// The most one read takes (`http2_recv_buffer_size` less nginx's state buffers).
    recv_max: usize,
}

impl Io {
    /// `recv_buffer_size`: `http2_recv_buffer_size` (more than 32, as the directive checks).
    pub fn new(transport: Transport, recv_buffer_size: usize) -> Io {
        Io {
            transport,
            recv_max: recv_buffer_size.saturating_sub(2 * STATE_BUFFER).max(1),
        }
    }
}

impl AsyncRead for Io {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if buf.remaining() <= this.recv_max {
            return read(&mut this.transport, cx, buf);
        }
        // A window of the crate's buffer, `recv_max` long, read into in place (zeroed first
        // where it never was: only a buffer smaller than the crate's usual pays for that).
        let window = buf.initialize_unfilled_to(this.recv_max);
        let mut part = ReadBuf::new(window);
        let r = read(&mut this.transport, cx, &mut part);
        let n = part.filled().len();
        buf.advance(n);
        r
    }
}

fn read(t: &mut Transport, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
    match t {
        Transport::Tcp(s) => Pin::new(s).poll_read(cx, buf),
        Transport::Unix(s) => Pin::new(s).poll_read(cx, buf),
        Transport::Tls(t) => t.poll_read(cx, buf),
    }
}

impl AsyncWrite for Io {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match &mut self.get_mut().transport {
            Transport::Tcp(s) => Pin::new(s).poll_write(cx, buf),
            Transport::Unix(s) => Pin::new(s).poll_write(cx, buf),
            Transport::Tls(t) => t.poll_write_vectored(cx, &[IoSlice::new(buf)]),
        }
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        match &mut self.get_mut().transport {
            Transport::Tcp(s) => Pin::new(s).poll_write_vectored(cx, bufs),
            Transport::Unix(s) => Pin::new(s).poll_write_vectored(cx, bufs),
            Transport::Tls(t) => t.poll_write_vectored(cx, bufs),
        }
    }

    fn is_write_vectored(&self) -> bool {
        true
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match &mut self.get_mut().transport {
            Transport::Tcp(_) | Transport::Unix(_) => Poll::Ready(Ok(())),
            Transport::Tls(t) => t.poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match &mut self.get_mut().transport {
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
            let mut io = Io::new(io.transport, 256 * 1024);
            while rest.len() < 992 {
                let n = io.read(&mut buf).await.expect("read");
                assert!(n > 8 || rest.len() + n == 992);
                rest.extend_from_slice(&buf[..n]);
            }
            assert_eq!(rest, vec![7u8; 992]);
        });
    }
}
