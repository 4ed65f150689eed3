//! The PROXY protocol header on a `listen ... proxy_protocol` connection: read before the
//! first request, and on a TLS address before the handshake, within the default server's
//! `client_header_timeout`, and no longer than its `client_header_buffer_size` (nginx 1.22
//! reads it from the first buffer of the request, which has that size).
//!
//! The header is read to its last byte and no further, as nginx's TLS path does it: the bytes
//! are peeked, parsed, and only the header's own are taken off the socket, so what follows
//! (the first request, or the ClientHello) is read by whoever comes next as if the header had
//! never been there.
//!
//! A header nginx would refuse closes the connection with nginx's line at `error` (`broken
//! header: "..."`, `unknown PROXY protocol version: N`, `header is too large`, each `while
//! reading PROXY protocol`); a timeout, or a client that closes first, with nginx's line at
//! `info`. A header split across reads is waited for (nginx parses only its first read).
//! While nothing has come the connection may be closed for a graceful stop or to make room,
//! as an idle one is.

use std::time::{Duration, Instant};

use shoal_http::proxy_protocol::{parse, Broken, Parsed};

use crate::http::transport::{ConnInfo, Transport};
use crate::log::Level;
use crate::worker::{IdleSlot, Worker};

/// Reads the header of the plain socket `stream` into `info.proxy`; false when the
/// connection is to be closed (logged as nginx logs it).
pub(crate) async fn read(
    stream: &Transport,
    info: &mut ConnInfo,
    slot: &IdleSlot,
    worker: &Worker,
    timeout: Duration,
    max: usize,
) -> bool {
    let deadline = tokio::time::Instant::from_std(Instant::now() + timeout);
    // The header's bytes taken off the socket so far (a header split across packets), and
    // a place to peek at what follows them.
    let mut taken: Vec<u8> = Vec::new();
    let mut peeked = vec![0u8; max];
    loop {
        let empty = taken.is_empty();
        slot.set_reusable(empty);
        let ready = tokio::select! {
            biased;
            r = stream.readable() => Some(r),
            _ = slot.wait(worker.wake_idle.epoch()), if empty => {
                if worker.stopping.get() || slot.reused() {
                    slot.set_reusable(false);
                    return false;
                }
                // A reload: the header is the same whatever the configuration.
                None
            }
            _ = tokio::time::sleep_until(deadline) => {
                slot.set_reusable(false);
                log_while(info, Level::Info, "client timed out (110: Connection timed out)");
                return false;
            }
        };
        slot.set_reusable(false);
        match ready {
            None => continue,
            Some(Err(e)) => {
                log_while(info, Level::Info, &e.to_string());
                return false;
            }
            Some(Ok(())) => {}
        }
        let n = match stream.try_peek(&mut peeked[..max - taken.len()]) {
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => continue,
            Err(e) => {
                log_while(info, Level::Info, &e.to_string());
                return false;
            }
            Ok(0) if taken.is_empty() => {
                log_while(info, Level::Info, "client closed connection");
                return false;
            }
            // Closed in the middle: what came is no header (nginx, reading it at once, says
            // so).
            Ok(0) => {
                broken(info, Broken::Header, &taken, max);
                return false;
            }
            Ok(n) => n,
        };
        let start = taken.len();
        taken.extend_from_slice(&peeked[..n]);
        match parse(&taken, max) {
            Parsed::Done { header, len } => {
                // The header's bytes still on the socket: all peeked, so the read finds them.
                if take(stream, &mut peeked[..len - start]).is_err() {
                    return false;
                }
                info.proxy = header.map(Box::new);
                return true;
            }
            Parsed::Broken(b) => {
                broken(info, b, &taken, max);
                return false;
            }
            // Every byte so far is the header's: take them, and wait for the rest.
            Parsed::Incomplete => {
                if take(stream, &mut peeked[..n]).is_err() {
                    return false;
                }
            }
        }
    }
}

/// Takes exactly `buf.len()` bytes already seen waiting off the socket.
fn take(stream: &Transport, buf: &mut [u8]) -> std::io::Result<()> {
    let mut at = 0;
    while at < buf.len() {
        match stream.try_read(&mut buf[at..])? {
            0 => return Err(std::io::ErrorKind::UnexpectedEof.into()),
            n => at += n,
        }
    }
    Ok(())
}

/// Logs a refused header with the bytes read (at most `max` of them).
fn broken(info: &ConnInfo, b: Broken, read: &[u8], max: usize) {
    if let Some(m) = b.message(&read[..read.len().min(max)]) {
        log_while(info, Level::Error, &m);
    }
}

/// `WHAT while reading PROXY protocol, client: ..., server: ADDRESS` (nginx names the
/// listening address: no server is chosen yet).
fn log_while(info: &ConnInfo, level: Level, what: &str) {
    crate::conn_log!(
        level,
        info.number,
        "{what} while reading PROXY protocol, client: {}, server: {}",
        info.client(),
        info.socket
    );
}
