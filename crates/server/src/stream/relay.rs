//! A stream session's relay: bytes both ways between the client and the upstream, paced by
//! `proxy_upload_rate` / `proxy_download_rate`, bounded by `proxy_timeout`, each direction's end
//! (or failure) logged at nginx's level with nginx's action words.
//!
//! One future polls both directions and the idle timer by hand, as nginx's
//! `ngx_stream_proxy_process` handles both sides in one event handler: a wake-up reads and
//! writes what each side allows without waiting, registers interest where a side would block,
//! and reads the clock once if bytes moved. (Two futures under a `select!` cost a readiness
//! future and a timer poll per branch per wake-up: twice nginx's user time per request.) A
//! direction moves at most [`TURN`] reads per wake-up, then the task yields, so one busy
//! session does not hold the worker while others wait.

use std::borrow::Cow;
use std::cell::Cell;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use super::session::Ctx;
use crate::http::transport::Transport;
use crate::log::Level;
use crate::upstream::conf::PeerAddr;

pub(super) async fn write_all(t: &Transport, mut data: &[u8]) -> std::io::Result<()> {
    while !data.is_empty() {
        let n = t.write(data).await?;
        data = &data[n..];
    }
    Ok(())
}

/// How a direction of the relay ended.
enum End {
    /// Its source closed, and everything it sent was passed on.
    Eof,
    /// Reading its source failed.
    Recv(std::io::Error),
    /// Writing to its destination failed.
    Send(std::io::Error),
}

/// The level of a failed socket call, as nginx's `ngx_connection_error` chooses it: a peer
/// that went away (reset, broken pipe, unreachable, ...) is `info` on the client's connection
/// and `error` on the upstream's; another system error is `alert`.
fn socket_error_level(e: &std::io::Error, client: bool) -> Level {
    let gone = matches!(
        e.raw_os_error(),
        Some(
            libc::ECONNRESET
                | libc::EPIPE
                | libc::ENOTCONN
                | libc::ETIMEDOUT
                | libc::ECONNREFUSED
                | libc::ENETDOWN
                | libc::ENETUNREACH
                | libc::EHOSTDOWN
                | libc::EHOSTUNREACH
        )
    );
    match (gone, client) {
        (true, true) => Level::Info,
        (true, false) => Level::Error,
        // Not a socket's error (TLS): the session's own failure.
        _ if e.raw_os_error().is_none() => Level::Error,
        (false, _) => Level::Alert,
    }
}

/// The line and level of a relay's failed direction (`from_client`: the client-to-upstream
/// one), with nginx's action words.
fn failed(end: End, from_client: bool) -> (Level, Cow<'static, str>) {
    let (e, call, client, action) = match (end, from_client) {
        (End::Recv(e), true) => (e, "recv", true, "reading from client"),
        (End::Send(e), true) => (e, "send", false, "sending to upstream"),
        (End::Recv(e), false) => (e, "recv", false, "reading from upstream"),
        (End::Send(e), false) => (e, "send", true, "sending to client"),
        (End::Eof, _) => unreachable!("an end of file is no failure"),
    };
    (
        socket_error_level(&e, client),
        format!(
            "{call}() failed {} while proxying and {action}",
            shoal_conf::os_error(&e)
        )
        .into(),
    )
}

/// Reads a direction makes per wake-up before the task yields to the others (nginx's event
/// loop bounds a connection's turn by its buffer; a relay that finds its source never empty
/// would otherwise loop on).
const TURN: usize = 16;

/// Relays both ways until the session ends, then logs why, as nginx does.
pub(super) async fn relay(
    cx: &Ctx<'_>,
    client: &Transport,
    upstream: &Transport,
    addr: &PeerAddr,
    started: Instant,
) {
    let conf = &cx.srv.conf;
    let size = conf.buffer_size().max(1);
    let half_close = conf.half_close.unwrap_or(false);
    let up_sent = Cell::new(0u64);
    let up_received = Cell::new(0u64);
    let first_byte = Cell::new(None::<Duration>);
    let mut up = Dir::new(client, upstream, size, conf.upload_rate.unwrap_or(0));
    let mut down = Dir::new(upstream, client, size, conf.download_rate.unwrap_or(0));
    let counts_up = Counts {
        read: &cx.session.bytes_received,
        written: &up_sent,
        first_read: None,
    };
    let counts_down = Counts {
        read: &up_received,
        written: &cx.session.bytes_sent,
        first_read: Some((&first_byte, started)),
    };
    let timeout = conf.timeout();
    let mut activity = Instant::now();
    // Armed once; when it fires, re-armed from the last activity if there was some since
    // (nginx moves its timer only when it changes, not on every read).
    let idle = tokio::time::sleep(timeout);
    let mut idle = std::pin::pin!(idle);
    // Whether the timer's waker is registered: after that a wake-up only looks whether it
    // fired (a load), where a poll of it per wake-up cost more than the read it guards.
    let mut armed = false;
    let message = std::future::poll_fn(|cx| {
        let mut moved = false;
        if !up.done {
            match up.poll(cx, &counts_up, half_close, &mut moved) {
                Poll::Ready(End::Eof) => {
                    up.done = true;
                    if !half_close || down.done {
                        return Poll::Ready((Level::Info, "client disconnected".into()));
                    }
                }
                Poll::Ready(end) => return Poll::Ready(failed(end, true)),
                Poll::Pending => {}
            }
        }
        if !down.done {
            match down.poll(cx, &counts_down, half_close, &mut moved) {
                Poll::Ready(End::Eof) => {
                    down.done = true;
                    if !half_close || up.done {
                        return Poll::Ready((Level::Info, "upstream disconnected".into()));
                    }
                }
                Poll::Ready(end) => return Poll::Ready(failed(end, false)),
                Poll::Pending => {}
            }
        }
        if moved {
            activity = Instant::now();
        }
        if armed && !idle.is_elapsed() {
            return Poll::Pending;
        }
        if !tokio::task::coop::has_budget_remaining() {
            // A poll now could come back pending without registering: the next turn arms it.
            cx.waker().wake_by_ref();
            return Poll::Pending;
        }
        while idle.as_mut().poll(cx).is_ready() {
            let due = activity + timeout;
            if due <= Instant::now() {
                return Poll::Ready((
                    Level::Info,
                    "connection timed out (110: Connection timed out) while proxying connection"
                        .into(),
                ));
            }
            idle.as_mut().reset(tokio::time::Instant::from_std(due));
        }
        armed = true;
        Poll::Pending
    })
    .await;
    cx.session.with_try(|t| {
        t.bytes_sent += up_sent.get();
        t.bytes_received = up_received.get();
        t.first_byte_time = first_byte.get();
    });
    let (level, what): (Level, Cow<'static, str>) = message;
    if !crate::log::enabled(level) {
        // Nothing to write: no text made (the usual end, `info` under an `error` log).
        return;
    }
    let (from_client, to_client) = (cx.session.bytes_received.get(), cx.session.bytes_sent.get());
    let (from_up, to_up) = (up_received.get(), up_sent.get());
    if what.ends_with("disconnected") {
        crate::conn_log!(
            level,
            cx.info.number,
            "{what}, bytes from/to client:{from_client}/{to_client}, bytes from/to upstream:{from_up}/{to_up}"
        );
    } else {
        crate::conn_log!(
            level,
            cx.info.number,
            "{what}{}, upstream: \"{addr}\", bytes from/to client:{from_client}/{to_client}, bytes from/to upstream:{from_up}/{to_up}",
            cx.log_ctx()
        );
    }
}

/// Where a direction counts its bytes: the session's and its try's counters.
struct Counts<'a> {
    read: &'a Cell<u64>,
    written: &'a Cell<u64>,
    /// Where to note the first byte's time, from when (the upstream's direction).
    first_read: Option<(&'a Cell<Option<Duration>>, Instant)>,
}

/// One direction of a relay: what was read from its source and not yet written on.
struct Dir<'a> {
    from: &'a Transport,
    to: &'a Transport,
    buf: bytes::BytesMut,
    /// How much of `buf` is written.
    pos: usize,
    /// Bytes per second (0: unlimited), since `begun`, `total` so far, and the timer that
    /// holds the next read back.
    rate: u64,
    begun: Instant,
    total: u64,
    pace: Option<Pin<Box<tokio::time::Sleep>>>,
    /// A TCP source's wait for bytes is registered (see [`poll_read`]).
    waiting: bool,
    /// The source's end was reached and passed on (with `proxy_half_close`).
    done: bool,
}

impl<'a> Dir<'a> {
    fn new(from: &'a Transport, to: &'a Transport, size: usize, rate: u64) -> Dir<'a> {
        Dir {
            from,
            to,
            buf: bytes::BytesMut::with_capacity(size),
            pos: 0,
            rate,
            begun: Instant::now(),
            total: 0,
            pace: None,
            waiting: false,
            done: false,
        }
    }

    /// Moves what can be moved now: `Ready` when the direction ended (its source's end passed
    /// on, or a failure), `Pending` with a wake-up registered (or asked for, after a turn).
    fn poll(
        &mut self,
        cx: &mut Context<'_>,
        counts: &Counts<'_>,
        half_close: bool,
        moved: &mut bool,
    ) -> Poll<End> {
        for _ in 0..TURN {
            while self.pos < self.buf.len() {
                match self.to.try_write(&self.buf[self.pos..]) {
                    Ok(0) => return Poll::Ready(End::Send(std::io::ErrorKind::WriteZero.into())),
                    Ok(n) => {
                        self.pos += n;
                        counts.written.set(counts.written.get() + n as u64);
                        *moved = true;
                    }
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                        match self.to.poll_write_ready(cx) {
                            Poll::Ready(Ok(())) => {}
                            Poll::Ready(Err(e)) => return Poll::Ready(End::Send(e)),
                            Poll::Pending => return Poll::Pending,
                        }
                    }
                    Err(e) => return Poll::Ready(End::Send(e)),
                }
            }
            if self.rate > 0 && self.paced(cx).is_pending() {
                return Poll::Pending;
            }
            self.buf.clear();
            self.pos = 0;
            let n = match poll_read(self.from, cx, &mut self.buf, &mut self.waiting) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(Ok(0)) => {
                    if half_close {
                        let _ = socket2::SockRef::from(&self.to.as_fd())
                            .shutdown(std::net::Shutdown::Write);
                    }
                    return Poll::Ready(End::Eof);
                }
                Poll::Ready(Ok(n)) => n,
                Poll::Ready(Err(e)) => return Poll::Ready(End::Recv(e)),
            };
            if let Some((f, started)) = counts.first_read {
                if f.get().is_none() {
                    f.set(Some(started.elapsed()));
                }
            }
            *moved = true;
            counts.read.set(counts.read.get() + n as u64);
            self.total += n as u64;
        }
        // A turn's worth: the others run before this session goes on.
        cx.waker().wake_by_ref();
        Poll::Pending
    }

    /// Paced (nginx's limit): no more than `rate` bytes per second on average; `Pending`
    /// while the next read must wait, its timer set.
    fn paced(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        let due = self.begun + Duration::from_secs_f64(self.total as f64 / self.rate as f64);
        if due <= Instant::now() {
            return Poll::Ready(());
        }
        let due = tokio::time::Instant::from_std(due);
        let pace = self
            .pace
            .get_or_insert_with(|| Box::pin(tokio::time::sleep_until(due)));
        if pace.deadline() != due {
            pace.as_mut().reset(due);
        }
        pace.as_mut().poll(cx)
    }
}

/// Reads what is there into `buf`'s spare room (a plain socket fills at most its capacity),
/// or registers for the source's next readiness.
///
/// `waiting`: a TCP source came back pending last time, its task's waker registered. Until an
/// event comes the socket's readiness stays clear and the waker stays (only an event takes
/// it), so a wake-up that the other side caused only looks (a load, no recv) instead of
/// registering again under the registration's lock: half the relay's waits per request.
fn poll_read(
    t: &Transport,
    cx: &mut Context<'_>,
    buf: &mut bytes::BytesMut,
    waiting: &mut bool,
) -> Poll<std::io::Result<usize>> {
    if let (Transport::Tcp(s), true) = (t, std::mem::take(waiting)) {
        let mut called = false;
        match read_tcp(s, buf, &mut called) {
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock && !called => {
                *waiting = true;
                return Poll::Pending;
            }
            // The event was stale (EAGAIN): the readiness is cleared, wait anew below.
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
            other => return Poll::Ready(other),
        }
    }
    loop {
        match t.poll_read_ready(cx) {
            Poll::Pending => {
                *waiting = matches!(t, Transport::Tcp(_));
                return Poll::Pending;
            }
            Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
            Poll::Ready(Ok(())) => {}
        }
        let r = match t {
            Transport::Tcp(s) => read_tcp(s, buf, &mut false),
            _ => t.try_read_buf(buf),
        };
        match r {
            // The readiness is cleared: the next poll registers for the next event.
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => continue,
            other => return Poll::Ready(other),
        }
    }
}

/// A TCP socket's read as nginx's: one that fills less than the room offered has drained the
/// socket, so the socket's readiness is cleared with it, and the next read waits for the
/// reactor's next event instead of making a recv() only to hear EAGAIN (two calls saved per
/// short session). Safe with edge-triggered epoll: bytes or an end of file arriving after this
/// read are a new event; one already seen stays (tokio keeps a pending close's readiness, and
/// clears only the readiness of the event this read answered).
/// `called`: set when the recv was made (tokio answers `WouldBlock` without one while the
/// socket's readiness is clear).
fn read_tcp(
    s: &tokio::net::TcpStream,
    buf: &mut bytes::BytesMut,
    called: &mut bool,
) -> std::io::Result<usize> {
    use std::os::fd::AsRawFd;
    let mut drained = None;
    let r = s.try_io(tokio::io::Interest::READABLE, || {
        *called = true;
        let spare = buf.spare_capacity_mut();
        let room = spare.len();
        // SAFETY: recv writes at most `room` bytes into the buffer's spare capacity.
        let n = unsafe { libc::recv(s.as_raw_fd(), spare.as_mut_ptr().cast(), room, 0) };
        if n < 0 {
            return Err(std::io::Error::last_os_error());
        }
        let n = n as usize;
        // SAFETY: recv initialized the first `n` bytes of the spare capacity.
        unsafe { buf.set_len(buf.len() + n) };
        if n > 0 && n < room {
            drained = Some(n);
            return Err(std::io::ErrorKind::WouldBlock.into());
        }
        Ok(n)
    });
    match drained {
        Some(n) => Ok(n),
        None => r,
    }
}
