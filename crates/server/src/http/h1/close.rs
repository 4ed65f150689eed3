//! How an HTTP/1 connection ends: the rules in force (`lingering_close`, `lingering_time`,
//! `lingering_timeout`, `send_timeout`, `reset_timedout_connection`), the lingering read before
//! the close, and the reset nginx sends a timed-out client.

use std::time::{Duration, Instant};

use bytes::BytesMut;

use super::Conn;
use crate::http::transport::Transport;
use crate::http::transport::READ_CHUNK;
use crate::http::LocConf;

/// `lingering_*`, `send_timeout` and `reset_timedout_connection` in force.
#[derive(Clone, Copy)]
pub(crate) struct CloseRules {
    lingering: crate::http::directives::Lingering,
    lingering_time: Duration,
    lingering_timeout: Duration,
    pub(super) send_timeout: Duration,
    pub(super) reset_timedout: bool,
}

impl CloseRules {
    pub(super) fn of(lc: &LocConf) -> CloseRules {
        CloseRules {
            lingering: lc.lingering_close(),
            lingering_time: lc.lingering_time(),
            lingering_timeout: lc.lingering_timeout(),
            send_timeout: lc.send_timeout(),
            reset_timedout: lc.reset_timedout_connection(),
        }
    }
}

impl Conn {
    /// The end of a connection we chose to close: nginx's lingering close when input may
    /// still come (`lingering_close on`) or always (`always`): stop writing, then read and
    /// drop what arrives for up to `lingering_time`, each wait bounded by `lingering_timeout`,
    /// so the client reads our answer instead of a reset.
    pub(super) async fn close(&mut self) {
        use crate::http::directives::Lingering;
        let linger = match self.rules.lingering {
            Lingering::Off => false,
            Lingering::Always => true,
            Lingering::On => self.unread_input || !self.buf.is_empty(),
        };
        // TLS: our close_notify first, as nginx's `SSL_shutdown()` (it waits for none back).
        // (Boxed, as the handshake: a plain connection's task carries no TLS state.)
        if let Transport::Tls(_) = self.stream {
            Box::pin(self.stream.close_notify()).await;
        }
        if !linger {
            return;
        }
        if !self.unread_body {
            if let Some(s) = self.stream.tcp() {
                let _ = socket2::SockRef::from(s).shutdown(std::net::Shutdown::Write);
            }
        }
        let deadline = Instant::now() + self.rules.lingering_time;
        let mut sink = BytesMut::with_capacity(READ_CHUNK);
        loop {
            let wait = self
                .rules
                .lingering_timeout
                .min(deadline.saturating_duration_since(Instant::now()));
            if wait.is_zero() {
                return;
            }
            sink.clear();
            match tokio::time::timeout(wait, self.stream.read_buf(&mut sink)).await {
                Ok(Ok(n)) if n > 0 => continue,
                _ => return,
            }
        }
    }

    /// `reset_timedout_connection on`: a timed-out connection is closed with a reset
    /// (SO_LINGER 0), freeing its memory at once.
    pub(super) fn reset_if_asked(&self) {
        if self.rules.reset_timedout {
            if let Some(s) = self.stream.tcp() {
                let _ = socket2::SockRef::from(s).set_linger(Some(Duration::ZERO));
            }
        }
    }
}
