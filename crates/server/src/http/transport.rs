//! A connection's bytes, whatever carries them: a TCP or unix socket today, TLS next. Both
//! sides use it: a client's connection and an upstream's.
//!
//! Reads fill a [`BytesMut`] only once the socket has something (a buffer is taken from the
//! worker's spares then, not held by an idle connection); writes are plain or vectored. Whether
//! a file range may go by `sendfile(2)` is the transport's to say ([`Transport::can_sendfile`]):
//! an encrypting transport cannot, and the output path then reads the pieces itself.

use std::net::SocketAddr;

use bytes::BytesMut;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpStream, UnixStream};

use crate::listen::ListenAddr;

/// Read buffer size per read call.
pub const READ_CHUNK: usize = 16 * 1024;

thread_local! {
    /// Read buffers given back by connections that went idle, for the next ones that have
    /// bytes to read (an allocation reused, still warm, rather than one made and freed per
    /// request). At most 64 `READ_CHUNK`s, 1 MiB: requests in progress at once, a proxied one
    /// waiting for its upstream, each hold one.
    static SPARE_READ: crate::spare::Spares<BytesMut> = const { crate::spare::Spares::new(64) };
}

/// Gives an emptied read buffer back to the worker's spares (a connection going idle).
pub fn give_back_read_buffer(buf: BytesMut) {
    if buf.capacity() <= READ_CHUNK {
        SPARE_READ.with(|s| s.give(buf, |_| {}));
    }
}

/// A connection's bytes: a TCP or unix socket (a client's, or an upstream's).
pub enum Transport {
    Tcp(TcpStream),
    Unix(UnixStream),
}

impl Transport {
    /// Reads into `buf` once the socket has bytes (or its end) to give, making room in `buf`
    /// (`READ_CHUNK`) only then. The read clears the socket's readiness when it comes back
    /// short, as `read_buf` does, so the next wait needs no read that finds nothing.
    pub fn poll_read_into(
        &mut self,
        cx: &mut std::task::Context<'_>,
        buf: &mut BytesMut,
    ) -> std::task::Poll<std::io::Result<usize>> {
        use std::task::ready;
        use tokio::io::AsyncRead;
        match self {
            Transport::Tcp(s) => ready!(s.poll_read_ready(cx))?,
            Transport::Unix(s) => ready!(s.poll_read_ready(cx))?,
        }
        if buf.capacity() == 0 {
            if let Some(spare) = SPARE_READ.with(crate::spare::Spares::take) {
                *buf = spare;
            }
        }
        if buf.capacity() - buf.len() < 1024 {
            buf.reserve(READ_CHUNK);
        }
        let mut read = tokio::io::ReadBuf::uninit(buf.spare_capacity_mut());
        match self {
            Transport::Tcp(s) => ready!(std::pin::Pin::new(s).poll_read(cx, &mut read))?,
            Transport::Unix(s) => ready!(std::pin::Pin::new(s).poll_read(cx, &mut read))?,
        }
        let n = read.filled().len();
        // SAFETY: `poll_read` initialized the first `n` bytes of the spare capacity.
        unsafe { buf.set_len(buf.len() + n) };
        std::task::Poll::Ready(Ok(n))
    }

    pub async fn read_buf(&mut self, buf: &mut BytesMut) -> std::io::Result<usize> {
        match self {
            Transport::Tcp(s) => s.read_buf(buf).await,
            Transport::Unix(s) => s.read_buf(buf).await,
        }
    }

    /// Writes some of `data`, waiting until the socket takes any.
    pub async fn write(&self, data: &[u8]) -> std::io::Result<usize> {
        loop {
            match self.try_write(data) {
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => self.writable().await?,
                other => return other,
            }
        }
    }

    /// Whether a file range may be sent to this transport with `sendfile(2)`: the bytes go
    /// to the socket as they are (an encrypting transport cannot).
    pub fn can_sendfile(&self) -> bool {
        match self {
            Transport::Tcp(_) | Transport::Unix(_) => true,
        }
    }

    pub async fn write_all(&mut self, data: &[u8]) -> std::io::Result<()> {
        match self {
            Transport::Tcp(s) => s.write_all(data).await,
            Transport::Unix(s) => s.write_all(data).await,
        }
    }

    pub fn as_fd(&self) -> std::os::fd::BorrowedFd<'_> {
        use std::os::fd::AsFd;
        match self {
            Transport::Tcp(s) => s.as_fd(),
            Transport::Unix(s) => s.as_fd(),
        }
    }

    pub fn raw_fd(&self) -> std::os::fd::RawFd {
        use std::os::fd::AsRawFd;
        match self {
            Transport::Tcp(s) => s.as_raw_fd(),
            Transport::Unix(s) => s.as_raw_fd(),
        }
    }

    /// Turns `TCP_NODELAY` on (nothing to do on a Unix socket). Best effort, as nginx's
    /// `ngx_tcp_nodelay` is for an upstream: a socket that refuses it still works.
    pub fn set_nodelay(&self) {
        if let Transport::Tcp(s) = self {
            let _ = s.set_nodelay(true);
        }
    }

    /// Waits until the socket may be read.
    pub async fn readable(&self) -> std::io::Result<()> {
        match self {
            Transport::Tcp(s) => s.readable().await,
            Transport::Unix(s) => s.readable().await,
        }
    }

    /// Reads what is there now into `buf` (`WouldBlock` when nothing).
    pub fn try_read_buf(&self, buf: &mut BytesMut) -> std::io::Result<usize> {
        match self {
            Transport::Tcp(s) => s.try_read_buf(buf),
            Transport::Unix(s) => s.try_read_buf(buf),
        }
    }

    /// Waits until the peer has closed its side (an EOF is pending; true) or has sent more
    /// bytes (false: they are not consumed, and the caller should stop watching).
    pub async fn peer_closed(&self) -> bool {
        loop {
            let ready = match self {
                Transport::Tcp(s) => s.readable().await,
                Transport::Unix(s) => s.readable().await,
            };
            if ready.is_err() {
                return true;
            }
            match self.try_peek_closed() {
                Ok(eof) => return eof,
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => continue,
                Err(_) => return true,
            }
        }
    }

    /// Whether what the runtime saw readable is an EOF (`Ok(true)`) or bytes (`Ok(false)`,
    /// not consumed), looked at without reading; `WouldBlock` when the readiness was stale
    /// (it is cleared, so the next wait waits anew).
    pub fn try_peek_closed(&self) -> std::io::Result<bool> {
        let fd = self.as_fd();
        let peek = || {
            if shoal_io::syscall::nothing_to_read(fd) {
                Err(std::io::ErrorKind::WouldBlock.into())
            } else {
                Ok(shoal_io::syscall::eof_pending(fd))
            }
        };
        match self {
            Transport::Tcp(s) => s.try_io(tokio::io::Interest::READABLE, peek),
            Transport::Unix(s) => s.try_io(tokio::io::Interest::READABLE, peek),
        }
    }

    /// Writes what the socket takes now (`WouldBlock` when nothing).
    pub fn try_write(&self, data: &[u8]) -> std::io::Result<usize> {
        match self {
            Transport::Tcp(s) => s.try_write(data),
            Transport::Unix(s) => s.try_write(data),
        }
    }

    /// Whether the runtime has seen the socket readable (data or EOF) since a read drained it.
    pub fn poll_read_ready(
        &self,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        match self {
            Transport::Tcp(s) => s.poll_read_ready(cx),
            Transport::Unix(s) => s.poll_read_ready(cx),
        }
    }

    /// Waits until the socket can take more bytes (for sendfile's EAGAIN).
    pub async fn writable(&self) -> std::io::Result<()> {
        match self {
            Transport::Tcp(s) => s.writable().await,
            Transport::Unix(s) => s.writable().await,
        }
    }

    /// Runs a nonblocking write syscall, waiting for writability on EAGAIN.
    pub async fn try_io_write<R>(
        &self,
        f: impl FnMut() -> std::io::Result<R>,
    ) -> std::io::Result<R> {
        match self {
            Transport::Tcp(s) => s.async_io(tokio::io::Interest::WRITABLE, f).await,
            Transport::Unix(s) => s.async_io(tokio::io::Interest::WRITABLE, f).await,
        }
    }
}

/// What the connection knows about itself, for variables and log lines.
pub struct ConnInfo {
    pub number: u64,
    pub peer: Option<SocketAddr>,
    pub local: Option<SocketAddr>,
    pub socket: ListenAddr,
    /// What a PROXY protocol header said (`listen ... proxy_protocol`), when it carried
    /// addresses.
    pub proxy: Option<Box<shoal_http::proxy_protocol::Header>>,
}

impl ConnInfo {
    /// `client: 127.0.0.1` as nginx's log lines say it (`unix:` for unix sockets).
    pub fn client(&self) -> String {
        match self.peer {
            Some(p) => p.ip().to_string(),
            None => "unix:".to_string(),
        }
    }
}
