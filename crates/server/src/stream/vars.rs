//! A stream session's variables: what [`Session`] answers for the names whose value in a
//! session is its own (`$status`, `$bytes_sent`, `$bytes_received`, `$session_time`,
//! `$protocol`, `$upstream_*`, `$ssl_preread_*`). Every other name (`$remote_addr`,
//! `$server_port`, `$connection`, `$time_local`, `$hostname`, a `map`...) is the variables
//! engine's, from the addresses and the connection number the session puts in its `Vars`.

use std::cell::{Cell, RefCell};
use std::fmt::Write as _;
use std::time::{Duration, Instant};

use crate::upstream::conf::PeerAddr;
use crate::variables::Var;

/// The variables only a stream session has (see [`Var::Stream`]).
pub const NAMES: &[&str] = &[
    "bytes_received",
    "session_time",
    "protocol",
    "upstream_first_byte_time",
    "upstream_session_time",
    "ssl_preread_server_name",
    "ssl_preread_alpn_protocols",
    "ssl_preread_protocol",
];

/// Who a try went to: a peer (its text made only when `$upstream_addr` or a log line asks,
/// not per session), or the upstream's name when no peer was left (nginx's `$upstream_addr`
/// then).
#[derive(Clone, Debug)]
pub enum Tried {
    Peer(PeerAddr),
    Name(String),
}

impl Default for Tried {
    fn default() -> Tried {
        Tried::Name(String::new())
    }
}

impl From<&str> for Tried {
    fn from(name: &str) -> Tried {
        Tried::Name(name.to_string())
    }
}

impl std::fmt::Display for Tried {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Tried::Peer(p) => p.fmt(f),
            Tried::Name(n) => f.write_str(n),
        }
    }
}

/// One upstream tried by a session.
#[derive(Clone, Debug, Default)]
pub struct Try {
    pub addr: Tried,
    pub bytes_sent: u64,
    pub bytes_received: u64,
    /// `None`: the connection was not made.
    pub connect_time: Option<Duration>,
    pub first_byte_time: Option<Duration>,
    pub session_time: Option<Duration>,
}

/// What `ssl_preread` read of a ClientHello.
#[derive(Clone, Debug, Default)]
pub struct Preread {
    pub server_name: String,
    pub alpn_protocols: String,
    pub protocol: String,
}

/// A session's own values, updated as it goes.
#[derive(Debug)]
pub struct Session {
    pub start: Instant,
    pub udp: bool,
    pub status: Cell<u16>,
    /// From the client.
    pub bytes_received: Cell<u64>,
    /// To the client.
    pub bytes_sent: Cell<u64>,
    pub tries: RefCell<Vec<Try>>,
    pub preread: RefCell<Option<Preread>>,
}

impl Session {
    pub fn new(udp: bool) -> Session {
        Session {
            start: Instant::now(),
            udp,
            status: Cell::new(200),
            bytes_received: Cell::new(0),
            bytes_sent: Cell::new(0),
            tries: RefCell::new(Vec::new()),
            preread: RefCell::new(None),
        }
    }

    /// The current try's record.
    pub fn with_try(&self, f: impl FnOnce(&mut Try)) {
        if let Some(t) = self.tries.borrow_mut().last_mut() {
            f(t);
        }
    }

    /// The session's value of `v` (`Some(found)`), or `None` when the name is not one a
    /// session answers.
    pub fn value(&self, v: &Var, out: &mut String) -> Option<bool> {
        match v {
            Var::Status => {
                let _ = write!(out, "{:03}", self.status.get());
            }
            Var::BytesSent => {
                let _ = write!(out, "{}", self.bytes_sent.get());
            }
            Var::Stream(name) => return Some(self.own(name, out)),
            Var::Upstream(name) => return Some(self.upstream(name, out)),
            _ => return None,
        }
        Some(true)
    }

    fn own(&self, name: &str, out: &mut String) -> bool {
        match name {
            "bytes_received" => {
                let _ = write!(out, "{}", self.bytes_received.get());
            }
            "session_time" => msec(out, self.start.elapsed()),
            "protocol" => out.push_str(if self.udp { "UDP" } else { "TCP" }),
            "upstream_first_byte_time" | "upstream_session_time" => {
                return self.upstream(name, out)
            }
            _ => {
                let p = self.preread.borrow();
                let Some(p) = p.as_ref() else {
                    return false;
                };
                out.push_str(match name {
                    "ssl_preread_server_name" => &p.server_name,
                    "ssl_preread_alpn_protocols" => &p.alpn_protocols,
                    _ => &p.protocol,
                });
            }
        }
        true
    }

    /// `$upstream_*`: one value per upstream tried, `, `-separated, as nginx writes them.
    fn upstream(&self, name: &str, out: &mut String) -> bool {
        let tries = self.tries.borrow();
        if tries.is_empty() {
            return false;
        }
        for (i, t) in tries.iter().enumerate() {
            if i > 0 {
                out.push_str(", ");
            }
            let time = |out: &mut String, d: Option<Duration>| match d {
                Some(d) => msec(out, d),
                None => out.push('-'),
            };
            match name {
                "upstream_addr" => {
                    let _ = write!(out, "{}", t.addr);
                }
                "upstream_bytes_sent" => {
                    let _ = write!(out, "{}", t.bytes_sent);
                }
                "upstream_bytes_received" => {
                    let _ = write!(out, "{}", t.bytes_received);
                }
                "upstream_connect_time" => time(out, t.connect_time),
                "upstream_first_byte_time" => time(out, t.first_byte_time),
                "upstream_session_time" => time(out, t.session_time),
                _ => return false,
            }
        }
        true
    }
}

/// Seconds with milliseconds (`0.012`), as nginx's times are written.
fn msec(out: &mut String, d: Duration) {
    let ms = d.as_millis();
    let _ = write!(out, "{}.{:03}", ms / 1000, ms % 1000);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_of_a_session() {
        let s = Session::new(false);
        s.bytes_received.set(5);
        s.bytes_sent.set(7);
        let mut out = String::new();
        assert_eq!(s.value(&Var::Status, &mut out), Some(true));
        assert_eq!(out, "200");
        out.clear();
        assert_eq!(s.value(&Var::Stream("protocol"), &mut out), Some(true));
        assert_eq!(out, "TCP");
        out.clear();
        assert_eq!(
            s.value(&Var::Upstream("upstream_addr".into()), &mut out),
            Some(false),
            "no upstream tried: not found"
        );
        s.tries.borrow_mut().push(Try {
            addr: "127.0.0.1:1".into(),
            ..Default::default()
        });
        s.tries.borrow_mut().push(Try {
            addr: "127.0.0.1:2".into(),
            connect_time: Some(Duration::from_millis(1234)),
            ..Default::default()
        });
        out.clear();
        s.value(&Var::Upstream("upstream_addr".into()), &mut out);
        assert_eq!(out, "127.0.0.1:1, 127.0.0.1:2");
        out.clear();
        s.value(&Var::Upstream("upstream_connect_time".into()), &mut out);
        assert_eq!(out, "-, 1.234");
        assert_eq!(s.value(&Var::RemoteAddr, &mut out), None);
    }
}
