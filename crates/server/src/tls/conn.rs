//! [`TlsConn`]: a TCP connection that speaks TLS, with the readiness-style methods of a plain
//! socket (`try_read`, `try_write`, `readable`, `writable`, peeking for the peer's end), so
//! that everything above the transport treats it as it treats a socket.
//!
//! Both sides use it: a client's connection after `tls::accept` (a `ServerConnection`) and an
//! upstream's after [`TlsConn::connect`] (a `ClientConnection`). rustls is driven directly,
//! without tokio-rustls: we choose the record size (`ssl_buffer_size`) and when to send.
//!
//! The one thing to know: a write says it took bytes only once their records are all on the
//! socket (or the socket is full and the last of them is held back). rustls encrypts what it is
//! given at once, so when the socket cannot take every record, the last plaintext byte is not
//! reported as written: the caller, which sees a short write, waits for the socket and calls
//! again with the same bytes (OpenSSL's rule for `SSL_write`), and that call sends the records
//! left before it takes anything new. So "everything was written" always means "everything is
//! in the kernel", and no answer stays behind in a user-space buffer while the connection
//! waits for the client's next request.
//!
//! Interior mutability (a `RefCell`) lets the methods take `&self` as a socket's do: a
//! connection lives on one worker thread, and no borrow is held across an `await`. The methods
//! the transport calls are kept out of line, so that a plain connection's code, which shares
//! their `match`, is compiled as it was without TLS. Runs on the worker; never blocks.

use std::cell::RefCell;
use std::io::{self, BufRead, IoSlice, Read, Write};
use std::task::{ready, Context, Poll};

use bytes::BytesMut;
use rustls::Connection;
use tokio::net::TcpStream;

use super::error::{Call, TlsError};

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

/// An I/O error carrying a TLS failure (its `get_ref()` is a [`TlsError`] with nginx's line).
pub fn tls_io_error(e: TlsError) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, e)
}

/// The [`TlsError`] inside an error from a TLS connection's reads or writes, if it is one
/// (else the error is the socket's own).
pub fn tls_error(e: &io::Error) -> Option<&TlsError> {
    e.get_ref().and_then(|i| i.downcast_ref::<TlsError>())
}

/// A TLS connection ready for application data.
pub struct TlsConn {
    tcp: TcpStream,
    st: RefCell<State>,
}

struct State {
    conn: Connection,
    /// Plaintext bytes per record written (`ssl_buffer_size`).
    record: usize,
    /// 0-RTT data read during the handshake, given to reads before anything else.
    early: Vec<u8>,
    early_pos: usize,
    /// Plaintext bytes at the front of the caller's next write that are already encrypted but
    /// were not reported written (their records are not all on the socket yet).
    held: usize,
    /// The peer's close_notify or the socket's end was read.
    eof: bool,
    /// Our close_notify is queued.
    closing: bool,
}

impl std::fmt::Debug for TlsConn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TlsConn")
            .field("record", &self.st.borrow().record)
            .finish_non_exhaustive()
    }
}

/// rustls's record size limit on plaintext.
const MAX_RECORD: usize = 16384;

impl TlsConn {
    /// A connection whose handshake is over: `conn` is the server or client side of it,
    /// `record` the plaintext size of the records writes make, `early` the 0-RTT data the
    /// handshake read.
    pub fn new(tcp: TcpStream, conn: impl Into<Connection>, record: usize, early: Vec<u8>) -> Self {
        TlsConn {
            tcp,
            st: RefCell::new(State {
                conn: conn.into(),
                record: record.clamp(512, MAX_RECORD),
                early,
                early_pos: 0,
                held: 0,
                eof: false,
                closing: false,
            }),
        }
    }

    /// The client side of a handshake with an upstream on `tcp`: runs it to its end (the
    /// caller bounds it with `proxy_connect_timeout`). The error is what nginx logs before
    /// `while SSL handshaking to upstream`.
    pub async fn connect(tcp: TcpStream, conn: rustls::ClientConnection) -> Result<Self, TlsError> {
        let this = TlsConn::new(tcp, conn, MAX_RECORD, Vec::new());
        let io = |e: io::Error| TlsError::io(Call::Handshake, &e);
        loop {
            // Out first: the ClientHello, then each flight the server's asks for.
            loop {
                let r = {
                    let mut st = this.st.borrow_mut();
                    if !st.conn.wants_write() {
                        break;
                    }
                    st.conn.write_tls(&mut SockWrite(&this.tcp))
                };
                match r {
                    Ok(_) => {}
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                        this.tcp.writable().await.map_err(io)?
                    }
                    Err(e) => return Err(io(e)),
                }
            }
            if !this.st.borrow().conn.is_handshaking() {
                return Ok(this);
            }
            let r = this.st.borrow_mut().conn.read_tls(&mut SockRead(&this.tcp));
            match r {
                Ok(0) => return Err(TlsError::peer_closed()),
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    this.tcp.readable().await.map_err(io)?;
                    continue;
                }
                Err(e) => return Err(io(e)),
            }
            let mut st = this.st.borrow_mut();
            if let Err(e) = st.conn.process_new_packets() {
                // Our alert goes out, best effort.
                let _ = st.conn.write_tls(&mut SockWrite(&this.tcp));
                return Err(TlsError::from_rustls(Call::Handshake, &e));
            }
        }
    }

    /// The TCP socket (for its addresses and options; reading or writing it directly would
    /// corrupt the TLS stream).
    pub fn tcp(&self) -> &TcpStream {
        &self.tcp
    }

    /// The plaintext size of the records writes make.
    pub fn record_size(&self) -> usize {
        self.st.borrow().record
    }

    pub fn set_record_size(&self, n: usize) {
        self.st.borrow_mut().record = n.clamp(512, MAX_RECORD);
    }

    /// The rustls connection, for what the handshake settled (certificates, protocol).
    pub fn with_connection<T>(&self, f: impl FnOnce(&Connection) -> T) -> T {
        f(&self.st.borrow().conn)
    }

    // -----------------------------------------------------------------------------------------
    // Reading

    /// Whether a read would return without the socket: decrypted bytes wait, or the end (or
    /// an error) was seen.
    #[inline(never)]
    pub fn read_ready_now(&self) -> bool {
        let mut st = self.st.borrow_mut();
        if st.eof || st.early_pos < st.early.len() {
            return true;
        }
        !matches!(st.conn.reader().fill_buf(), Err(e) if e.kind() == io::ErrorKind::WouldBlock)
    }

    /// Appends decrypted bytes to `buf` (`room` readies it first, once there are bytes to put
    /// in it): `Ok(n > 0)`, `Ok(0)` at the end (close_notify, or the socket's end without one,
    /// which nginx takes as an end too), `WouldBlock` when the socket has nothing more.
    #[inline(never)]
    pub fn try_read_into(
        &self,
        buf: &mut BytesMut,
        room: impl FnOnce(&mut BytesMut),
    ) -> io::Result<usize> {
        let mut st = self.st.borrow_mut();
        let st = &mut *st;
        if st.early_pos < st.early.len() {
            room(buf);
            buf.extend_from_slice(&st.early[st.early_pos..]);
            let n = st.early.len() - st.early_pos;
            st.early = Vec::new();
            st.early_pos = 0;
            return Ok(n);
        }
        let mut room = Some(room);
        loop {
            if st.eof {
                return Ok(0);
            }
            let mut n = 0;
            loop {
                let mut reader = st.conn.reader();
                match reader.fill_buf() {
                    Ok([]) => {
                        if n == 0 {
                            // close_notify.
                            st.eof = true;
                        }
                        return Ok(n);
                    }
                    Ok(chunk) => {
                        if let Some(r) = room.take() {
                            r(buf);
                        }
                        buf.extend_from_slice(chunk);
                        let len = chunk.len();
                        reader.consume(len);
                        n += len;
                    }
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                    Err(e) if n > 0 => {
                        // Given with the next read.
                        let _ = e;
                        return Ok(n);
                    }
                    Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => {
                        st.eof = true;
                        return Ok(0);
                    }
                    Err(e) => return Err(e),
                }
            }
            if n > 0 {
                return Ok(n);
            }
            st.pull(&self.tcp, Call::Read)?;
        }
    }

    /// Decrypted bytes into `out` (at most its room), as `AsyncRead` reads.
    fn try_read_slice(&self, out: &mut [u8]) -> io::Result<usize> {
        let mut st = self.st.borrow_mut();
        let st = &mut *st;
        if st.early_pos < st.early.len() {
            let n = out.len().min(st.early.len() - st.early_pos);
            out[..n].copy_from_slice(&st.early[st.early_pos..st.early_pos + n]);
            st.early_pos += n;
            if st.early_pos == st.early.len() {
                st.early = Vec::new();
                st.early_pos = 0;
            }
            return Ok(n);
        }
        loop {
            if st.eof || out.is_empty() {
                return Ok(0);
            }
            match st.conn.reader().read(out) {
                Ok(0) => {
                    st.eof = true;
                    return Ok(0);
                }
                Ok(n) => return Ok(n),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => {
                    st.eof = true;
                    return Ok(0);
                }
                Err(e) => return Err(e),
            }
            st.pull(&self.tcp, Call::Read)?;
        }
    }

    /// [`TlsConn::try_read_into`], waiting for the socket.
    #[inline(never)]
    pub fn poll_read_into(
        &self,
        cx: &mut Context<'_>,
        buf: &mut BytesMut,
        room: impl Fn(&mut BytesMut),
    ) -> Poll<io::Result<usize>> {
        loop {
            match self.try_read_into(buf, &room) {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    ready!(self.tcp.poll_read_ready(cx))?;
                }
                r => return Poll::Ready(r),
            }
        }
    }

    /// Decrypted bytes into `buf`, waiting for the socket (`AsyncRead`).
    pub fn poll_read(
        &self,
        cx: &mut Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        loop {
            match self.try_read_slice(buf.initialize_unfilled()) {
                Ok(n) => {
                    buf.advance(n);
                    return Poll::Ready(Ok(()));
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    ready!(self.tcp.poll_read_ready(cx))?;
                }
                Err(e) => return Poll::Ready(Err(e)),
            }
        }
    }

    /// Ready when a read would find bytes or the end without waiting, or the socket has
    /// something (a record, perhaps not whole: the read that follows says).
    #[inline(never)]
    pub fn poll_read_ready(&self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        if self.read_ready_now() {
            return Poll::Ready(Ok(()));
        }
        self.tcp.poll_read_ready(cx)
    }

    /// Waits until a read may have something (see [`TlsConn::poll_read_ready`]).
    pub async fn readable(&self) -> io::Result<()> {
        if self.read_ready_now() {
            return Ok(());
        }
        self.tcp.readable().await
    }

    /// Whether the peer has ended the connection (`Ok(true)`: close_notify, the socket's end
    /// or a broken stream) or sent bytes (`Ok(false)`: decrypted and kept for the next read,
    /// which is as good as unread); `WouldBlock` when the socket has nothing whole to say.
    #[inline(never)]
    pub fn try_peek_closed(&self) -> io::Result<bool> {
        let mut st = self.st.borrow_mut();
        let st = &mut *st;
        loop {
            if st.eof {
                return Ok(true);
            }
            if st.early_pos < st.early.len() {
                return Ok(false);
            }
            match st.conn.reader().fill_buf() {
                Ok([]) => return Ok(true),
                Ok(_) => return Ok(false),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(_) => return Ok(true),
            }
            match st.pull(&self.tcp, Call::Read) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Err(e),
                Err(_) => return Ok(true),
            }
        }
    }

    // -----------------------------------------------------------------------------------------
    // Writing

    /// Whether encrypted bytes wait for the socket.
    pub fn write_pending(&self) -> bool {
        self.st.borrow().conn.wants_write()
    }

    /// Writes what can go now of `data` (see the module's note on what "taken" means);
    /// `WouldBlock` when nothing could be taken.
    #[inline(never)]
    pub fn try_write(&self, data: &[u8]) -> io::Result<usize> {
        self.try_write_vectored(&[IoSlice::new(data)])
    }

    /// [`TlsConn::try_write`] of slices taken as one run of bytes: a head and a body share
    /// records (a short head does not make a short record).
    #[inline(never)]
    pub fn try_write_vectored(&self, bufs: &[IoSlice<'_>]) -> io::Result<usize> {
        let mut st = self.st.borrow_mut();
        let st = &mut *st;
        if st.conn.wants_write() {
            st.send(&self.tcp)?;
            if st.conn.wants_write() {
                return Err(io::ErrorKind::WouldBlock.into());
            }
        }
        let total: usize = bufs.iter().map(|b| b.len()).sum();
        // The records of the bytes held back are all out now.
        let done = st.held.min(total);
        st.held -= done;
        if done == total {
            return Ok(done);
        }
        let taken = st.encrypt(bufs, done)?;
        match st.send(&self.tcp) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
            Err(e) => return Err(e),
        }
        if !st.conn.wants_write() {
            return Ok(done + taken);
        }
        // Records are left: the last byte stays the caller's until they are out.
        if taken == 0 {
            return if done > 0 {
                Ok(done)
            } else {
                Err(io::ErrorKind::WouldBlock.into())
            };
        }
        st.held = 1;
        match done + taken - 1 {
            0 => Err(io::ErrorKind::WouldBlock.into()),
            n => Ok(n),
        }
    }

    /// Waits until a write may take bytes: at once when no record waits for the socket.
    pub async fn writable(&self) -> io::Result<()> {
        if !self.write_pending() {
            return Ok(());
        }
        self.tcp.writable().await
    }

    /// Sends the records waiting for the socket, waiting for it as needed.
    pub async fn flush(&self) -> io::Result<()> {
        loop {
            let r = self.st.borrow_mut().send(&self.tcp);
            match r {
                Ok(()) => return Ok(()),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => self.tcp.writable().await?,
                Err(e) => return Err(e),
            }
        }
    }

    /// Polls the records waiting for the socket out (`AsyncWrite::poll_flush`).
    pub fn poll_flush(&self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        loop {
            let r = self.st.borrow_mut().send(&self.tcp);
            match r {
                Ok(()) => return Poll::Ready(Ok(())),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    ready!(self.tcp.poll_write_ready(cx))?
                }
                Err(e) => return Poll::Ready(Err(e)),
            }
        }
    }

    /// Writes what can go of `bufs`, waiting for the socket (`AsyncWrite::poll_write`).
    pub fn poll_write_vectored(
        &self,
        cx: &mut Context<'_>,
        bufs: &[IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        loop {
            match self.try_write_vectored(bufs) {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    ready!(self.tcp.poll_write_ready(cx))?
                }
                r => return Poll::Ready(r),
            }
        }
    }

    /// Writes every byte of `bufs` (a response head and body, say) in records of
    /// [`TlsConn::record_size`], and waits until they are on the socket.
    pub async fn write_all_vectored(&self, bufs: &[&[u8]]) -> io::Result<()> {
        let total: usize = bufs.iter().map(|b| b.len()).sum();
        let mut done = 0;
        let mut rest: Vec<IoSlice<'_>> = Vec::with_capacity(bufs.len());
        while done < total {
            rest.clear();
            let mut skip = done;
            for b in bufs {
                if skip >= b.len() {
                    skip -= b.len();
                    continue;
                }
                rest.push(IoSlice::new(&b[skip..]));
                skip = 0;
            }
            match self.try_write_vectored(&rest) {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(n) => done += n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => self.tcp.writable().await?,
                Err(e) => return Err(e),
            }
        }
        self.flush().await
    }

    /// Queues our close_notify (once) and sends what waits (nginx's `SSL_shutdown()`, which
    /// does not wait for the peer's). The caller bounds the wait.
    pub async fn close_notify(&self) -> io::Result<()> {
        self.queue_close_notify();
        self.flush().await
    }

    /// Queues our close_notify, once; [`TlsConn::flush`] sends it.
    pub fn queue_close_notify(&self) {
        let mut st = self.st.borrow_mut();
        if !st.closing {
            st.closing = true;
            st.conn.send_close_notify();
        }
    }

    /// Runs a non-blocking write syscall of the caller's on the socket, once the records
    /// waiting are out (for the writer's readiness checks; nothing writes raw bytes here).
    pub async fn try_io_write<R>(&self, f: impl FnMut() -> io::Result<R>) -> io::Result<R> {
        self.flush().await?;
        self.tcp.async_io(tokio::io::Interest::WRITABLE, f).await
    }
}

impl State {
    /// Reads what the socket has into rustls and decrypts it (`WouldBlock`: nothing there).
    fn pull(&mut self, tcp: &TcpStream, call: Call) -> io::Result<()> {
        match self.conn.read_tls(&mut SockRead(tcp)) {
            Ok(_) => {}
            Err(e) => return Err(e),
        }
        if let Err(e) = self.conn.process_new_packets() {
            // Our alert goes out, best effort.
            let _ = self.conn.write_tls(&mut SockWrite(tcp));
            return Err(tls_io_error(TlsError::from_rustls(call, &e)));
        }
        // A key update, session tickets or an alert to answer: out now if the socket takes
        // them, else with the next write.
        if self.conn.wants_write() {
            let _ = self.send(tcp);
        }
        Ok(())
    }

    /// Sends encrypted records until none is left (`WouldBlock`: the socket is full).
    fn send(&mut self, tcp: &TcpStream) -> io::Result<()> {
        while self.conn.wants_write() {
            self.conn.write_tls(&mut SockWrite(tcp))?;
        }
        Ok(())
    }

    /// Encrypts the bytes of `bufs` after the first `skip`, in records of `self.record`
    /// plaintext bytes, for as long as rustls's buffer takes them; returns the bytes taken.
    fn encrypt(&mut self, bufs: &[IoSlice<'_>], skip: usize) -> io::Result<usize> {
        let mut taken = 0;
        // The slices of one record; a head and a body rarely make more than four.
        let mut record = RecordSlices::new();
        loop {
            record.clear();
            let mut room = self.record;
            let mut skip = skip + taken;
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
            let want = self.record - room;
            let n = self.conn.writer().write_vectored(record.as_slice())?;
            taken += n;
            if n < want {
                // rustls's buffer is full: the socket must take some first.
                return Ok(taken);
            }
        }
    }
}

/// A record's slices, without an allocation for the usual few.
struct RecordSlices<'a> {
    inline: [IoSlice<'a>; 4],
    len: usize,
    spill: Vec<IoSlice<'a>>,
}

impl<'a> RecordSlices<'a> {
    fn new() -> Self {
        RecordSlices {
            inline: [IoSlice::new(&[]); 4],
            len: 0,
            spill: Vec::new(),
        }
    }

    fn clear(&mut self) {
        self.len = 0;
        self.spill.clear();
    }

    fn push(&mut self, s: IoSlice<'a>) {
        if self.spill.is_empty() && self.len < self.inline.len() {
            self.inline[self.len] = s;
            self.len += 1;
            return;
        }
        if self.spill.is_empty() {
            self.spill.extend_from_slice(&self.inline[..self.len]);
        }
        self.spill.push(s);
    }

    fn is_empty(&self) -> bool {
        self.len == 0 && self.spill.is_empty()
    }

    fn as_slice(&self) -> &[IoSlice<'a>] {
        if self.spill.is_empty() {
            &self.inline[..self.len]
        } else {
            &self.spill
        }
    }
}
