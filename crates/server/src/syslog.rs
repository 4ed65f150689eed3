//! `syslog:` targets of `error_log` and `access_log`:
//! `syslog:server=ADDR[:PORT][,facility=F][,severity=S][,tag=T][,nohostname]`, parsed with
//! nginx's messages, and lines sent as nginx sends them: one datagram per line (UDP, or a
//! unix datagram socket for `server=unix:PATH`), an RFC 3164 header
//! `<PRI>Mmm dd hh:mm:ss HOSTNAME TAG: ` before the text, no line feed.
//!
//! The socket is made at the first line, as nginx's is; a send that fails is dropped (logged
//! once to the main error log at `alert` as nginx's `sendto() failed` is): a log line never
//! waits.

use crate::error::Error;
use std::net::{SocketAddr, ToSocketAddrs, UdpSocket};
use std::os::unix::net::UnixDatagram;
use std::path::PathBuf;
use std::sync::OnceLock;

/// nginx's facility names, in their number's order.
const FACILITIES: &[&str] = &[
    "kern", "user", "mail", "daemon", "auth", "intern", "lpr", "news", "uucp", "clock", "authpriv",
    "ftp", "ntp", "audit", "alert", "cron", "local0", "local1", "local2", "local3", "local4",
    "local5", "local6", "local7",
];

/// nginx's severity names, in their number's order.
const SEVERITIES: &[&str] = &[
    "emerg", "alert", "crit", "error", "warn", "notice", "info", "debug",
];

/// Where the lines go.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Server {
    Inet(SocketAddr),
    Unix(PathBuf),
}

/// One `syslog:` target as written.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SyslogConf {
    pub server: Server,
    /// The facility's number (default `local7`, 23).
    pub facility: u8,
    /// The severity's number for access log lines (default `info`, 6); an error log line
    /// uses its own level.
    pub severity: u8,
    /// Default `nginx`, as nginx's: what syslog filters written for nginx match.
    pub tag: String,
    pub hostname: bool,
}

impl SyslogConf {
    /// Reads what follows `syslog:`; `Err` is nginx's message.
    pub fn parse(args: &str) -> Result<SyslogConf, Error> {
        let mut server = None;
        let mut facility = None;
        let mut severity = None;
        let mut tag = None;
        let mut hostname = true;
        for p in args.split(',') {
            if let Some(v) = p.strip_prefix("server=") {
                if server.is_some() {
                    return Err(Error::invalid("duplicate syslog \"server\""));
                }
                server = Some(parse_server(v)?);
            } else if let Some(v) = p.strip_prefix("facility=") {
                if facility.is_some() {
                    return Err(Error::invalid("duplicate syslog \"facility\""));
                }
                let n = FACILITIES
                    .iter()
                    .position(|f| *f == v)
                    .ok_or_else(|| Error::invalid(format!("unknown syslog facility \"{v}\"")))?;
                facility = Some(n as u8);
            } else if let Some(v) = p.strip_prefix("severity=") {
                if severity.is_some() {
                    return Err(Error::invalid("duplicate syslog \"severity\""));
                }
                let n = SEVERITIES
                    .iter()
                    .position(|s| *s == v)
                    .ok_or_else(|| Error::invalid(format!("unknown syslog severity \"{v}\"")))?;
                severity = Some(n as u8);
            } else if let Some(v) = p.strip_prefix("tag=") {
                if tag.is_some() {
                    return Err(Error::invalid("duplicate syslog \"tag\""));
                }
                if v.len() > 32 {
                    return Err(Error::invalid("syslog tag length exceeds 32"));
                }
                if !v.bytes().all(|c| c.is_ascii_alphanumeric() || c == b'_') {
                    return Err(Error::invalid(
                        "syslog \"tag\" only allows alphanumeric characters and underscore",
                    ));
                }
                tag = Some(v.to_string());
            } else if p == "nohostname" {
                hostname = false;
            } else {
                return Err(Error::invalid(format!("unknown syslog parameter \"{p}\"")));
            }
        }
        Ok(SyslogConf {
            server: server.ok_or_else(|| Error::invalid("no syslog server specified"))?,
            facility: facility.unwrap_or(23),
            severity: severity.unwrap_or(6),
            tag: tag.unwrap_or_else(|| "nginx".into()),
            hostname,
        })
    }
}

fn parse_server(v: &str) -> Result<Server, Error> {
    if let Some(path) = v.strip_prefix("unix:") {
        return Ok(Server::Unix(PathBuf::from(path)));
    }
    // A port is optional (514); an IPv6 address is in brackets.
    let with_port = match v.rsplit_once(':') {
        Some((host, port)) if !host.ends_with(':') && port.bytes().all(|c| c.is_ascii_digit()) => {
            if port.is_empty() || port.parse::<u16>().map_or(true, |p| p == 0) {
                return Err(Error::invalid(format!("invalid port in \"{v}\"")));
            }
            v.to_string()
        }
        _ => format!("{v}:514"),
    };
    let lookup = with_port.trim_start_matches('[').replacen("]:", ":", 1);
    let addr = if v.starts_with('[') {
        lookup.rsplit_once(':').and_then(|(h, p)| {
            let ip: std::net::IpAddr = h.parse().ok()?;
            Some(SocketAddr::new(ip, p.parse().ok()?))
        })
    } else {
        with_port.to_socket_addrs().ok().and_then(|mut a| a.next())
    };
    addr.map(Server::Inet)
        .ok_or_else(|| Error::resolve(format!("host not found in \"{v}\"")))
}

/// A target's socket, made at its first line.
#[derive(Debug)]
enum Socket {
    Udp(UdpSocket),
    Unix(UnixDatagram),
}

/// A `syslog:` target in use.
#[derive(Debug)]
pub struct Peer {
    pub conf: SyslogConf,
    socket: OnceLock<Option<Socket>>,
}

impl Peer {
    pub fn new(conf: SyslogConf) -> Peer {
        Peer {
            conf,
            socket: OnceLock::new(),
        }
    }

    /// `<PRI>Mmm dd hh:mm:ss HOSTNAME TAG: ` for a line of `severity` (nginx's
    /// `ngx_syslog_add_header`), appended to `out`.
    pub fn header(&self, severity: u8, out: &mut Vec<u8>) {
        use std::io::Write as _;
        let pri = u32::from(self.conf.facility) * 8 + u32::from(severity);
        let _ = write!(out, "<{pri}>{} ", syslog_time());
        if self.conf.hostname {
            out.extend_from_slice(crate::variables::hostname().as_bytes());
            out.push(b' ');
        }
        out.extend_from_slice(self.conf.tag.as_bytes());
        out.extend_from_slice(b": ");
    }

    /// Sends one line (header included). Failures are dropped: a log line never waits.
    pub fn send(&self, line: &[u8]) -> std::io::Result<()> {
        let socket = self.socket.get_or_init(|| match &self.conf.server {
            Server::Inet(addr) => {
                let bind: SocketAddr = if addr.is_ipv4() {
                    ([0, 0, 0, 0], 0).into()
                } else {
                    (std::net::Ipv6Addr::UNSPECIFIED, 0).into()
                };
                let s = UdpSocket::bind(bind).ok()?;
                s.connect(addr).ok()?;
                s.set_nonblocking(true).ok()?;
                Some(Socket::Udp(s))
            }
            Server::Unix(path) => {
                let s = UnixDatagram::unbound().ok()?;
                s.connect(path).ok()?;
                s.set_nonblocking(true).ok()?;
                Some(Socket::Unix(s))
            }
        });
        match socket {
            Some(Socket::Udp(s)) => s.send(line).map(drop),
            Some(Socket::Unix(s)) => s.send(line).map(drop),
            None => Err(Error::invalid("no syslog socket").into()),
        }
    }
}

/// `Mmm dd hh:mm:ss` in local time (nginx's `ngx_cached_syslog_time`: the day padded with a
/// space).
fn syslog_time() -> String {
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let (tm, _) = crate::variables::local_tm(secs);
    format!(
        "{} {:2} {:02}:{:02}:{:02}",
        MONTHS[tm.tm_mon.clamp(0, 11) as usize],
        tm.tm_mday,
        tm.tm_hour,
        tm.tm_min,
        tm.tm_sec
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_as_nginx() {
        let c = SyslogConf::parse("server=127.0.0.1:5140,facility=local0,tag=web_1,nohostname")
            .unwrap();
        assert_eq!(c.server, Server::Inet("127.0.0.1:5140".parse().unwrap()));
        assert_eq!((c.facility, c.severity, c.hostname), (16, 6, false));
        assert_eq!(c.tag, "web_1");
        let c = SyslogConf::parse("server=127.0.0.1").unwrap();
        assert_eq!(c.server, Server::Inet("127.0.0.1:514".parse().unwrap()));
        assert_eq!((c.facility, c.tag.as_str()), (23, "nginx"));
        let c = SyslogConf::parse("server=[::1]:99,severity=debug").unwrap();
        assert_eq!(c.server, Server::Inet("[::1]:99".parse().unwrap()));
        assert_eq!(c.severity, 7);
        let c = SyslogConf::parse("server=unix:/dev/log").unwrap();
        assert_eq!(c.server, Server::Unix("/dev/log".into()));
        for (bad, msg) in [
            ("facility=local0", "no syslog server specified"),
            (
                "server=127.0.0.1,facility=x",
                "unknown syslog facility \"x\"",
            ),
            (
                "server=127.0.0.1,severity=x",
                "unknown syslog severity \"x\"",
            ),
            ("server=127.0.0.1,foo", "unknown syslog parameter \"foo\""),
            (
                "server=127.0.0.1,tag=a-b",
                "syslog \"tag\" only allows alphanumeric characters and underscore",
            ),
            (
                "server=127.0.0.1,server=127.0.0.1",
                "duplicate syslog \"server\"",
            ),
        ] {
            assert_eq!(SyslogConf::parse(bad).unwrap_err(), msg, "{bad}");
        }
    }
}
