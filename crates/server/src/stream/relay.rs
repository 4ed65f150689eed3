//! A stream session's relay: bytes both ways between the client and the upstream, paced by
//! `proxy_upload_rate` / `proxy_download_rate`, bounded by `proxy_timeout`, each direction's end
//! (or failure) logged at nginx's level with nginx's action words.

use std::borrow::Cow;
use std::cell::Cell;
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
    let activity = Cell::new(Instant::now());
    let half_close = conf.half_close.unwrap_or(false);
    let up_sent = Cell::new(0u64);
    let up_received = Cell::new(0u64);
    let first_byte = Cell::new(None::<Duration>);
    let up = Pump {
        from: client,
        to: upstream,
        rate: conf.upload_rate.unwrap_or(0),
        activity: &activity,
        read: &cx.session.bytes_received,
        written: &up_sent,
        first_read: None,
        started,
    };
    let down = Pump {
        from: upstream,
        to: client,
        rate: conf.download_rate.unwrap_or(0),
        activity: &activity,
        read: &up_received,
        written: &cx.session.bytes_sent,
        first_read: Some(&first_byte),
        started,
    };
    let timeout = conf.timeout();
    let idle = async {
        loop {
            let due = activity.get() + timeout;
            tokio::time::sleep_until(tokio::time::Instant::from_std(due)).await;
            if activity.get() + timeout <= Instant::now() {
                return;
            }
        }
    };
    let mut up_task = std::pin::pin!(up.run(size, half_close));
    let mut down_task = std::pin::pin!(down.run(size, half_close));
    let mut idle = std::pin::pin!(idle);
    let (mut up_done, mut down_done) = (false, false);
    let message = loop {
        tokio::select! {
            r = &mut up_task, if !up_done => match r {
                End::Eof => {
                    up_done = true;
                    if !half_close || down_done {
                        break (Level::Info, "client disconnected".into());
                    }
                }
                end => break failed(end, true),
            },
            r = &mut down_task, if !down_done => match r {
                End::Eof => {
                    down_done = true;
                    if !half_close || up_done {
                        break (Level::Info, "upstream disconnected".into());
                    }
                }
                end => break failed(end, false),
            },
            _ = &mut idle => break (
                Level::Info,
                "connection timed out (110: Connection timed out) while proxying connection".into(),
            ),
        }
    };
    cx.session.with_try(|t| {
        t.bytes_sent += up_sent.get();
        t.bytes_received = up_received.get();
        t.first_byte_time = first_byte.get();
    });
    let (level, what) = message;
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

/// One direction of a relay.
struct Pump<'a> {
    from: &'a Transport,
    to: &'a Transport,
    /// Bytes per second (0: unlimited).
    rate: u64,
    activity: &'a Cell<Instant>,
    read: &'a Cell<u64>,
    written: &'a Cell<u64>,
    /// Where to note the first byte's time (the upstream's direction).
    first_read: Option<&'a Cell<Option<Duration>>>,
    started: Instant,
}

impl Pump<'_> {
    async fn run(self, size: usize, half_close: bool) -> End {
        let mut buf = bytes::BytesMut::with_capacity(size);
        let begun = Instant::now();
        let mut total = 0u64;
        loop {
            if self.rate > 0 {
                // Paced: as nginx's limit, no more than `rate` bytes per second on average.
                let due = begun + Duration::from_secs_f64(total as f64 / self.rate as f64);
                let now = Instant::now();
                if due > now {
                    tokio::time::sleep(due - now).await;
                }
            }
            buf.clear();
            let n = match read(self.from, &mut buf).await {
                Ok(0) => {
                    if half_close {
                        let _ = socket2::SockRef::from(&self.to.as_fd())
                            .shutdown(std::net::Shutdown::Write);
                    }
                    return End::Eof;
                }
                Ok(n) => n,
                Err(e) => return End::Recv(e),
            };
            if let Some(f) = self.first_read {
                if f.get().is_none() {
                    f.set(Some(self.started.elapsed()));
                }
            }
            self.activity.set(Instant::now());
            self.read.set(self.read.get() + n as u64);
            if let Err(e) = write_all(self.to, &buf[..n]).await {
                return End::Send(e);
            }
            total += n as u64;
            self.activity.set(Instant::now());
            self.written.set(self.written.get() + n as u64);
        }
    }
}

/// Reads what is there into `buf`'s spare room (a plain socket fills at most its capacity).
async fn read(t: &Transport, buf: &mut bytes::BytesMut) -> std::io::Result<usize> {
    loop {
        let r = match t {
            Transport::Tcp(s) => read_tcp(s, buf),
            _ => t.try_read_buf(buf),
        };
        match r {
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => t.readable().await?,
            other => return other,
        }
    }
}

/// A TCP socket's read as nginx's: one that fills less than the room offered has drained the
/// socket, so the socket's readiness is cleared with it, and the next read waits for the
/// reactor's next event instead of making a recv() only to hear EAGAIN (two calls saved per
/// short session). Safe with edge-triggered epoll: bytes or an end of file arriving after this
/// read are a new event; one already seen stays (tokio keeps a pending close's readiness, and
/// clears only the readiness of the event this read answered).
fn read_tcp(s: &tokio::net::TcpStream, buf: &mut bytes::BytesMut) -> std::io::Result<usize> {
    use std::os::fd::AsRawFd;
    let mut drained = None;
    let r = s.try_io(tokio::io::Interest::READABLE, || {
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
