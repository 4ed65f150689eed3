//! The PROXY protocol header on a `listen ... proxy_protocol` connection: read before the
//! first request, within the default server's `client_header_timeout`, and no longer than its
//! `client_header_buffer_size` (nginx 1.22 reads it from the first buffer of the request,
//! which has that size). What follows it in the buffer is the first request's.
//!
//! A header nginx would refuse closes the connection with nginx's line at `error` (`broken
//! header: "..."`, `unknown PROXY protocol version: N`, `header is too large`, each `while
//! reading PROXY protocol`); a timeout, or a client that closes first, with nginx's line at
//! `info`. A header split across reads is waited for (nginx parses only its first read).
//! While nothing has come the connection may be closed for a graceful stop or to make room,
//! as an idle one is.

use std::time::{Duration, Instant};

use shoal_http::proxy_protocol::{parse, Broken, Parsed};

use super::Conn;
use crate::log::Level;

impl Conn {
    /// Reads the header into `self.info.proxy`; false when the connection is to be closed
    /// (logged as nginx logs it).
    pub(super) async fn read_proxy_protocol(&mut self, timeout: Duration, max: usize) -> bool {
        let worker = self.guard.0.clone();
        let deadline = tokio::time::Instant::from_std(Instant::now() + timeout);
        loop {
            if !self.buf.is_empty() {
                match parse(&self.buf, max) {
                    Parsed::Done { header, len } => {
                        bytes::Buf::advance(&mut self.buf, len);
                        self.info.proxy = header.map(Box::new);
                        return true;
                    }
                    Parsed::Broken(b) => {
                        self.broken(b, max);
                        return false;
                    }
                    Parsed::Incomplete => {}
                }
            }
            let empty = self.buf.is_empty();
            self.idle_slot.set_reusable(empty);
            let wake = self.idle_slot.wait(worker.wake_idle.epoch());
            let (stream, buf) = (&mut self.stream, &mut self.buf);
            let read = tokio::select! {
                biased;
                r = std::future::poll_fn(|cx| stream.poll_read_into(cx, buf)) => Some(r),
                _ = wake, if empty => {
                    if worker.stopping.get() || self.idle_slot.reused() {
                        return false;
                    }
                    // A reload: the header is the same whatever the configuration.
                    None
                }
                _ = tokio::time::sleep_until(deadline) => {
                    self.idle_slot.set_reusable(false);
                    self.log_while(Level::Info, "client timed out (110: Connection timed out)");
                    return false;
                }
            };
            self.idle_slot.set_reusable(false);
            match read {
                None => continue,
                Some(Ok(0)) if self.buf.is_empty() => {
                    self.log_while(Level::Info, "client closed connection");
                    return false;
                }
                // Closed in the middle: what came is no header (nginx, reading it at once,
                // says so).
                Some(Ok(0)) => {
                    self.broken(Broken::Header, max);
                    return false;
                }
                Some(Ok(_)) => {}
                Some(Err(e)) => {
                    self.log_while(Level::Info, &e.to_string());
                    return false;
                }
            }
        }
    }

    /// Logs a refused header with the bytes read (at most `max` of them).
    fn broken(&self, b: Broken, max: usize) {
        let read = &self.buf[..self.buf.len().min(max)];
        if let Some(m) = b.message(read) {
            self.log_while(Level::Error, &m);
        }
    }

    /// `WHAT while reading PROXY protocol, client: ..., server: ADDRESS` (nginx names the
    /// listening address: no server is chosen yet).
    fn log_while(&self, level: Level, what: &str) {
        crate::conn_log!(
            level,
            self.info.number,
            "{what} while reading PROXY protocol, client: {}, server: {}",
            self.info.client(),
            self.info.socket
        );
    }
}
