//! A connection's bytes, whatever carries them: a TCP or unix socket, or TLS over TCP
//! ([`crate::tls::TlsConn`]). Both sides use it: a client's connection and an upstream's.
//!
//! Reads fill a [`BytesMut`] only once the socket has something (a buffer is taken from the
//! worker's spares then, not held by an idle connection); writes are plain or vectored. Whether
//! a file range may go by `sendfile(2)` is the transport's to say ([`Transport::can_sendfile`]):
//! an encrypting transport cannot, and the output path then reads the pieces itself.
//!
//! Every method means the same on every variant: "readable" is "a read would find bytes or the
//! end", "the peer closed" is an EOF or a close_notify, a write that returns `n` has put those
//! bytes on the socket. The plain variants' code is what it was before TLS: a TLS arm is one
//! more arm of the same `match`, never a test ahead of it.

use std::net::SocketAddr;
use std::time::Duration;

use bytes::BytesMut;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpStream, UnixStream};

use crate::listen::ListenAddr;
use crate::tls::{TlsConn, TlsInfo};

/// Read buffer size per read call.
pub const READ_CHUNK: usize = 16 * 1024;

thread_local! {
    /// Read buffers given back by connections that went idle, for the next ones that have
    /// bytes to read (an allocation reused, still warm, rather than one made and freed per
    /// request). At most 64 `READ_CHUNK`s, 1 MiB: requests in progress at once, a proxied one
    /// waiting for its upstream, each hold one.
    static SPARE_READ: crate::spare::Spares<BytesMut> = const { crate::spare::Spares::new(64) };
    /// Output buffers given back the same way: an idle connection holds none.
    static SPARE_OUT: crate::spare::Spares<BytesMut> = const { crate::spare::Spares::new(64) };
}

/// The largest output buffer kept for reuse; a larger one (a deep pipeline's answers) is freed.
const SPARE_OUT_MAX: usize = 64 * 1024;

/// Gives a connection's emptied output buffer back to the worker's spares (the connection
/// goes idle).
pub fn give_back_out_buffer(out: &mut BytesMut) {
    if out.capacity() == 0 {
        return;
    }
    let out = std::mem::take(out);
    if out.capacity() <= SPARE_OUT_MAX {
        SPARE_OUT.with(|s| s.give(out, BytesMut::clear));
    }
}

/// Readies a connection's output buffer for an answer: a spare one when it has no memory.
#[inline]
pub fn ready_out_buffer(out: &mut BytesMut) {
    if out.capacity() == 0 {
        if let Some(spare) = SPARE_OUT.with(crate::spare::Spares::take) {
            *out = spare;
        }
    }
}

/// Gives an emptied read buffer back to the worker's spares (a connection going idle).
pub fn give_back_read_buffer(buf: BytesMut) {
    if buf.capacity() <= READ_CHUNK {
        SPARE_READ.with(|s| s.give(buf, |_| {}));
    }
}

/// A connection's bytes: a TCP or unix socket, or TLS (a client's, or an upstream's).
pub enum Transport {
    Tcp(TcpStream),
    Unix(UnixStream),
    /// Boxed: a rustls connection is a kilobyte, and the plain variants are words.
    Tls(Box<TlsConn>),
}

/// Readies a read buffer for bytes that are there: a spare one when it has no memory, room
/// for a `READ_CHUNK` when little is left. (Inlined: it was the plain read's own code.)
#[inline]
fn make_room(buf: &mut BytesMut) {
    if buf.capacity() == 0 {
        if let Some(spare) = SPARE_READ.with(crate::spare::Spares::take) {
            *buf = spare;
        }
    }
    if buf.capacity() - buf.len() < 1024 {
        buf.reserve(READ_CHUNK);
    }
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
            Transport::Tls(t) => return t.poll_read_into(cx, buf, make_room),
        }
        make_room(buf);
        let mut read = tokio::io::ReadBuf::uninit(buf.spare_capacity_mut());
        match self {
            Transport::Tcp(s) => ready!(std::pin::Pin::new(s).poll_read(cx, &mut read))?,
            Transport::Unix(s) => ready!(std::pin::Pin::new(s).poll_read(cx, &mut read))?,
            Transport::Tls(_) => unreachable!("returned above"),
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
            Transport::Tls(t) => {
                std::future::poll_fn(|cx| t.poll_read_into(cx, buf, |b| b.reserve(1024))).await
            }
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
            Transport::Tls(_) => false,
        }
    }

    pub async fn write_all(&mut self, data: &[u8]) -> std::io::Result<()> {
        match self {
            Transport::Tcp(s) => s.write_all(data).await,
            Transport::Unix(s) => s.write_all(data).await,
            Transport::Tls(t) => t.write_all_vectored(&[data]).await,
        }
    }

    pub fn as_fd(&self) -> std::os::fd::BorrowedFd<'_> {
        use std::os::fd::AsFd;
        match self {
            Transport::Tcp(s) => s.as_fd(),
            Transport::Unix(s) => s.as_fd(),
            Transport::Tls(t) => t.tcp().as_fd(),
        }
    }

    pub fn raw_fd(&self) -> std::os::fd::RawFd {
        use std::os::fd::AsRawFd;
        match self {
            Transport::Tcp(s) => s.as_raw_fd(),
            Transport::Unix(s) => s.as_raw_fd(),
            Transport::Tls(t) => t.tcp().as_raw_fd(),
        }
    }

    /// Turns `TCP_NODELAY` on (nothing to do on a Unix socket). Best effort, as nginx's
    /// `ngx_tcp_nodelay` is for an upstream: a socket that refuses it still works.
    pub fn set_nodelay(&self) {
        if let Some(s) = self.tcp() {
            let _ = s.set_nodelay(true);
        }
    }

    /// The TCP socket under the connection (`None` for a unix socket), for its options.
    pub fn tcp(&self) -> Option<&TcpStream> {
        match self {
            Transport::Tcp(s) => Some(s),
            Transport::Unix(_) => None,
            Transport::Tls(t) => Some(t.tcp()),
        }
    }

    /// Sends TLS's close_notify and waits (at most 3 s, nginx's bound for `SSL_shutdown`)
    /// until it is on the socket; nothing for a plain socket.
    pub async fn close_notify(&self) {
        if let Transport::Tls(t) = self {
            let _ = tokio::time::timeout(Duration::from_secs(3), t.close_notify()).await;
        }
    }

    /// Waits until the socket may be read.
    pub async fn readable(&self) -> std::io::Result<()> {
        match self {
            Transport::Tcp(s) => s.readable().await,
            Transport::Unix(s) => s.readable().await,
            Transport::Tls(t) => t.readable().await,
        }
    }

    /// Reads what is there now into `buf` (`WouldBlock` when nothing).
    pub fn try_read_buf(&self, buf: &mut BytesMut) -> std::io::Result<usize> {
        match self {
            Transport::Tcp(s) => s.try_read_buf(buf),
            Transport::Unix(s) => s.try_read_buf(buf),
            Transport::Tls(t) => t.try_read_into(buf, |b| b.reserve(1024)),
        }
    }

    /// Waits until the peer has closed its side (an EOF is pending; true) or has sent more
    /// bytes (false: they are not consumed, and the caller should stop watching).
    pub async fn peer_closed(&self) -> bool {
        loop {
            let ready = match self {
                Transport::Tcp(s) => s.readable().await,
                Transport::Unix(s) => s.readable().await,
                Transport::Tls(t) => t.readable().await,
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
        if let Transport::Tls(t) = self {
            return t.try_peek_closed();
        }
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
            Transport::Tls(_) => unreachable!("answered above"),
        }
    }

    /// Copies what waits on a plain socket into `buf` without taking it (`WouldBlock` when
    /// nothing; the readiness is then cleared). For what comes before TLS or HTTP (a PROXY
    /// protocol header), read to its last byte and no further.
    pub fn try_peek(&self, buf: &mut [u8]) -> std::io::Result<usize> {
        let fd = self.as_fd();
        let peek = || shoal_io::syscall::peek(fd, buf);
        match self {
            Transport::Tcp(s) => s.try_io(tokio::io::Interest::READABLE, peek),
            Transport::Unix(s) => s.try_io(tokio::io::Interest::READABLE, peek),
            Transport::Tls(_) => Err(std::io::ErrorKind::Unsupported.into()),
        }
    }

    /// Reads what is there now into `buf`, at most its length (`WouldBlock` when nothing).
    pub fn try_read(&self, buf: &mut [u8]) -> std::io::Result<usize> {
        match self {
            Transport::Tcp(s) => s.try_read(buf),
            Transport::Unix(s) => s.try_read(buf),
            Transport::Tls(_) => Err(std::io::ErrorKind::Unsupported.into()),
        }
    }

    /// Writes what the socket takes now (`WouldBlock` when nothing).
    pub fn try_write(&self, data: &[u8]) -> std::io::Result<usize> {
        match self {
            Transport::Tcp(s) => s.try_write(data),
            Transport::Unix(s) => s.try_write(data),
            Transport::Tls(t) => t.try_write(data),
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
            Transport::Tls(t) => t.poll_read_ready(cx),
        }
    }

    /// Whether the runtime has seen the socket writable since a write filled it.
    pub fn poll_write_ready(
        &self,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        match self {
            Transport::Tcp(s) => s.poll_write_ready(cx),
            Transport::Unix(s) => s.poll_write_ready(cx),
            Transport::Tls(t) => t.tcp().poll_write_ready(cx),
        }
    }

    /// Waits until the socket can take more bytes (for sendfile's EAGAIN).
    pub async fn writable(&self) -> std::io::Result<()> {
        match self {
            Transport::Tcp(s) => s.writable().await,
            Transport::Unix(s) => s.writable().await,
            Transport::Tls(t) => t.writable().await,
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
            Transport::Tls(t) => t.try_io_write(f).await,
        }
    }
}

/// What the connection knows about itself, for variables and log lines.
#[derive(Clone)]
pub struct ConnInfo {
    pub number: u64,
    pub peer: Option<SocketAddr>,
    pub local: Option<SocketAddr>,
    pub socket: ListenAddr,
    /// What the TLS handshake settled (`$ssl_*`, `$https`), on a TLS connection.
    pub tls: Option<Box<TlsInfo>>,
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
