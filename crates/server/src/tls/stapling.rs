//! OCSP stapling from the responder (`ssl_stapling on` without `ssl_stapling_file`), as
//! nginx's `ngx_event_openssl_stapling.c` does it: a [`Staple`] per certificate holds the last
//! good answer; a handshake that chooses the certificate gets it stapled while it is valid
//! (until its nextUpdate), and starts a refresh when one is due. The refresh asks the
//! responder (the certificate's Authority Information Access URL, or `ssl_stapling_responder`)
//! with an HTTP/1.0 GET, checks the answer ([`super::ocsp::check`]) and keeps it if the status
//! is good. As nginx: the first handshake goes without a staple; a good answer is refreshed
//! 5 minutes before its nextUpdate but at least hourly and at most every 5 minutes; a failed
//! one is retried after 5 minutes; every step has 60 seconds.
//!
//! The responder's name is looked up when the configuration is read (nginx's `ngx_parse_url`);
//! at the refresh, with the server's `resolver` when it has one, else those addresses are
//! used with nginx's warning `no resolver defined to resolve NAME`.
//!
//! Unlike nginx, whose worker processes each fetch and keep their own answer, a staple here is
//! shared by the workers of a configuration: one refresh serves them all. The refresh runs on
//! the worker whose handshake found it due (a task of its own; the handshake never waits).

use std::cell::RefCell;
use std::fmt;
use std::net::{IpAddr, SocketAddr, ToSocketAddrs};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rustls::pki_types::CertificateDer;
use rustls::sign::CertifiedKey;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use super::ocsp::{self, CertId, Status, Trust};
use crate::error::Error;
use crate::log::Level;
use crate::resolver::Resolver;

/// nginx's `staple->timeout`: connecting, sending and reading, each.
const TIMEOUT: Duration = Duration::from_secs(60);
/// The most of an answer nginx reads (its buffer).
const MAX_ANSWER: usize = 16384;

/// Where a responder is: `http://HOST[:PORT][/URI]`, read as nginx's `ngx_parse_url` reads it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Responder {
    pub host: String,
    pub port: u16,
    pub uri: String,
    /// The addresses found when the configuration was read.
    pub addrs: Vec<SocketAddr>,
    /// The host is an address: nothing to look up.
    pub literal: bool,
}

impl Responder {
    /// Reads `url`; `Err` is the end of nginx's warning (`"ssl_stapling" ignored, ...`) without
    /// the certificate's name.
    pub fn parse(url: &str) -> Result<Responder, Error> {
        let rest = match url.get(..7) {
            Some(p) if url.len() > 7 && p.eq_ignore_ascii_case("http://") => &url[7..],
            _ => {
                return Err(Error::invalid(format!(
                    "invalid URL prefix in OCSP responder \"{url}\""
                )))
            }
        };
        let fail = |what: &str| Error::invalid(format!("{what} in OCSP responder \"{rest}\""));
        let not_found = || Error::resolve(format!("host not found in OCSP responder \"{rest}\""));
        let (hostport, uri) = match rest.find('/') {
            Some(i) => (&rest[..i], &rest[i..]),
            None => (rest, ""),
        };
        let (host, port) = if let Some(v6) = hostport.strip_prefix('[') {
            let (h, after) = v6.split_once(']').ok_or_else(|| fail("invalid host"))?;
            (format!("[{h}]"), after.strip_prefix(':'))
        } else {
            match hostport.rsplit_once(':') {
                Some((h, p)) => (h.to_string(), Some(p)),
                None => (hostport.to_string(), None),
            }
        };
        let port = match port {
            None => 80,
            Some(p) => match p.parse::<u32>() {
                Ok(n) if (1..=65535).contains(&n) => n as u16,
                _ => return Err(fail("invalid port")),
            },
        };
        if host.is_empty() {
            return Err(fail("no host"));
        }
        let bare = host.trim_start_matches('[').trim_end_matches(']');
        let (addrs, literal) = match bare.parse::<IpAddr>() {
            Ok(ip) => (vec![SocketAddr::new(ip, port)], true),
            Err(_) => match (bare, port).to_socket_addrs() {
                Ok(a) => (a.collect::<Vec<_>>(), false),
                Err(_) => return Err(not_found()),
            },
        };
        if addrs.is_empty() {
            return Err(not_found());
        }
        Ok(Responder {
            host,
            port,
            uri: if uri.is_empty() {
                "/".into()
            } else {
                uri.into()
            },
            addrs,
            literal,
        })
    }

    /// nginx's request: `GET URI/BASE64 HTTP/1.0` (the base64 escaped as a URI component),
    /// `Host` without the port.
    fn request(&self, der: &[u8]) -> Vec<u8> {
        let b64 = base64(der);
        let mut path = self.uri.clone();
        if !path.ends_with('/') {
            path.push('/');
        }
        for c in b64.chars() {
            match c {
                '+' => path.push_str("%2B"),
                '/' => path.push_str("%2F"),
                '=' => path.push_str("%3D"),
                c => path.push(c),
            }
        }
        format!("GET {path} HTTP/1.0\r\nHost: {}\r\n\r\n", self.host).into_bytes()
    }
}

fn base64(data: &[u8]) -> String {
    const T: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(data.len().div_ceil(3) * 4);
    for chunk in data.chunks(3) {
        let n = chunk
            .iter()
            .enumerate()
            .fold(0u32, |a, (i, &b)| a | u32::from(b) << (16 - 8 * i));
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(T[(n >> (18 - 6 * i) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// One certificate's stapling: what to ask, how to check, and the last good answer.
pub struct Staple {
    /// The `ssl_certificate` name, for log lines.
    name: String,
    /// The certificate and key, without an answer.
    key: Arc<CertifiedKey>,
    id: CertId,
    responder: Responder,
    resolver: Option<(Arc<Resolver>, Duration)>,
    chain: Vec<CertificateDer<'static>>,
    trusted: Arc<Vec<CertificateDer<'static>>>,
    verify: bool,
    state: Mutex<State>,
}

impl fmt::Debug for Staple {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Staple").field("name", &self.name).finish()
    }
}

#[derive(Default)]
struct State {
    /// The key with the last good answer, and until when it may be stapled (unix seconds).
    current: Option<(Arc<CertifiedKey>, i64)>,
    /// When the next refresh is due (unix seconds).
    refresh: i64,
    loading: bool,
}

/// What [`Staple::new`] needs besides the certificate.
pub struct StapleConf {
    pub responder: Responder,
    pub resolver: Option<(Arc<Resolver>, Duration)>,
    pub trusted: Arc<Vec<CertificateDer<'static>>>,
    pub verify: bool,
}

thread_local! {
    /// Staples a handshake on this worker found due, to be refreshed by tasks of their own.
    static DUE: RefCell<Vec<Arc<Staple>>> = const { RefCell::new(Vec::new()) };
}

impl Staple {
    /// `None` when the certificate or its issuer does not parse.
    pub fn new(
        name: String,
        key: Arc<CertifiedKey>,
        issuer: &CertificateDer<'_>,
        conf: StapleConf,
    ) -> Option<Staple> {
        let id = CertId::new(key.cert.first()?, issuer)?;
        Some(Staple {
            name,
            chain: key.cert[1..].to_vec(),
            key,
            id,
            responder: conf.responder,
            resolver: conf.resolver,
            trusted: conf.trusted,
            verify: conf.verify,
            state: Mutex::new(State::default()),
        })
    }

    /// The key a handshake gets: with the last good answer while it is valid. Marks a refresh
    /// due on this worker ([`spawn_due`] starts it).
    pub fn key(self: &Arc<Self>) -> Arc<CertifiedKey> {
        let now = ocsp::unix_now();
        let mut st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let key = match &st.current {
            Some((k, valid)) if *valid >= now => k.clone(),
            _ => self.key.clone(),
        };
        if !st.loading && st.refresh < now {
            st.loading = true;
            DUE.with(|d| d.borrow_mut().push(self.clone()));
        }
        key
    }

    /// Asks the responder and keeps a good answer; when the next refresh is due either way.
    async fn refresh(self: Arc<Self>) {
        let answer = self.fetch().await;
        let checked = answer.and_then(|(der, peer)| {
            let trust = Trust {
                chain: &self.chain,
                trusted: &self.trusted,
                verify: self.verify,
            };
            match ocsp::check(&der, &self.id, &trust, ocsp::unix_now()) {
                Ok(c) if c.status == Status::Good => Ok((der, c)),
                Ok(c) => {
                    self.log(
                        Level::Error,
                        Some(peer),
                        format_args!(
                            "certificate status \"{}\" in the OCSP response",
                            c.status.name()
                        ),
                    );
                    Err(())
                }
                Err(m) => {
                    self.log(Level::Error, Some(peer), format_args!("{m}"));
                    Err(())
                }
            }
        });
        let now = ocsp::unix_now();
        let mut st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        st.loading = false;
        match checked {
            Ok((der, c)) => {
                let valid = c.next_update.unwrap_or(i64::MAX);
                let mut key = (*self.key).clone();
                key.ocsp = Some(der);
                st.current = Some((Arc::new(key), valid));
                st.refresh = (valid.saturating_sub(300)).min(now + 3600).max(now + 300);
            }
            Err(()) => st.refresh = now + 300,
        }
    }

    /// The responder's answer body and the address that gave it (the first that did); every
    /// failure logged as nginx logs it.
    async fn fetch(&self) -> Result<(Vec<u8>, SocketAddr), ()> {
        let addrs = self.addresses().await?;
        let request = self.responder.request(&self.id.request());
        for addr in addrs {
            match self.ask(addr, &request).await {
                Ok(Some(body)) => return Ok((body, addr)),
                // An answer that is not 200: nginx gives up without a word.
                Ok(None) => return Err(()),
                Err(()) => continue,
            }
        }
        Err(())
    }

    async fn addresses(&self) -> Result<Vec<SocketAddr>, ()> {
        let r = &self.responder;
        if r.literal {
            return Ok(r.addrs.clone());
        }
        let Some((resolver, timeout)) = self
            .resolver
            .as_ref()
            .filter(|(r, _)| !r.servers.is_empty())
        else {
            self.log(
                Level::Warn,
                None,
                format_args!("no resolver defined to resolve {}", r.host),
            );
            return Ok(r.addrs.clone());
        };
        match crate::resolver::resolve(resolver, &r.host, *timeout).await {
            Ok(ips) => Ok(ips.iter().map(|ip| SocketAddr::new(*ip, r.port)).collect()),
            Err(f) => {
                self.log(
                    Level::Error,
                    None,
                    format_args!("{} could not be resolved {f}", r.host),
                );
                Err(())
            }
        }
    }

    /// One exchange with the responder at `addr`: `Ok(None)` for an answer other than 200,
    /// `Err` when this address failed (the next one is tried).
    async fn ask(&self, addr: SocketAddr, request: &[u8]) -> Result<Option<Vec<u8>>, ()> {
        let peer = Some(addr);
        let timed_out = || {
            self.log(
                Level::Error,
                peer,
                format_args!("OCSP responder timed out (110: Connection timed out)"),
            )
        };
        let mut tcp = match tokio::time::timeout(TIMEOUT, TcpStream::connect(addr)).await {
            Err(_) => {
                timed_out();
                return Err(());
            }
            Ok(Err(e)) if e.kind() == std::io::ErrorKind::ConnectionRefused => {
                // nginx's non-blocking connect learns of the refusal when it reads.
                self.log(
                    Level::Error,
                    peer,
                    format_args!("recv() failed {}", errno(&e)),
                );
                self.log(
                    Level::Error,
                    peer,
                    format_args!("OCSP responder prematurely closed connection"),
                );
                return Err(());
            }
            Ok(Err(e)) => {
                self.log(
                    Level::Error,
                    peer,
                    format_args!("connect() failed {}", errno(&e)),
                );
                return Err(());
            }
            Ok(Ok(t)) => t,
        };
        match tokio::time::timeout(TIMEOUT, tcp.write_all(request)).await {
            Err(_) => {
                timed_out();
                return Err(());
            }
            Ok(Err(e)) => {
                self.log(
                    Level::Error,
                    peer,
                    format_args!("send() failed {}", errno(&e)),
                );
                return Err(());
            }
            Ok(Ok(())) => {}
        }
        let mut buf = Vec::with_capacity(4096);
        loop {
            let mut chunk = [0u8; 4096];
            let room = (MAX_ANSWER - buf.len()).min(chunk.len());
            if room == 0 {
                break;
            }
            match tokio::time::timeout(TIMEOUT, tcp.read(&mut chunk[..room])).await {
                Err(_) => {
                    timed_out();
                    return Err(());
                }
                Ok(Err(e)) => {
                    self.log(
                        Level::Error,
                        peer,
                        format_args!("recv() failed {}", errno(&e)),
                    );
                    break;
                }
                Ok(Ok(0)) => break,
                Ok(Ok(n)) => buf.extend_from_slice(&chunk[..n]),
            }
        }
        match parse_answer(&buf) {
            Answer::Body(200, body) => Ok(Some(body.to_vec())),
            Answer::Body(..) => Ok(None),
            Answer::Invalid => {
                self.log(
                    Level::Error,
                    peer,
                    format_args!("OCSP responder sent invalid response"),
                );
                Err(())
            }
            Answer::BadType(t) => {
                self.log(
                    Level::Error,
                    peer,
                    format_args!("OCSP responder sent invalid \"Content-Type\" header: \"{t}\""),
                );
                Err(())
            }
            Answer::Short => {
                self.log(
                    Level::Error,
                    peer,
                    format_args!("OCSP responder prematurely closed connection"),
                );
                Err(())
            }
        }
    }

    /// A line with nginx's context: `... while requesting certificate status, responder: HOST,
    /// peer: ADDR, certificate: "NAME"`.
    fn log(&self, level: Level, peer: Option<SocketAddr>, msg: fmt::Arguments<'_>) {
        let peer = peer.map(|p| format!(", peer: {p}")).unwrap_or_default();
        crate::error_log!(
            level,
            "{msg} while requesting certificate status, responder: {}{peer}, certificate: \"{}\"",
            self.responder.host,
            self.name
        );
    }
}

fn errno(e: &std::io::Error) -> String {
    shoal_conf::os_error(e)
}

/// Starts the refreshes handshakes on this worker found due. Called by the handshake once
/// the certificate is chosen; runs on a worker (a `LocalSet`).
pub fn spawn_due() {
    let due = DUE.with(|d| std::mem::take(&mut *d.borrow_mut()));
    for s in due {
        tokio::task::spawn_local(s.refresh());
    }
}

/// Calls [`spawn_due`] when dropped: held by a handshake, so every way out of it starts the
/// refreshes its certificate choice found due.
pub struct SpawnDue;

impl Drop for SpawnDue {
    fn drop(&mut self) {
        spawn_due();
    }
}

/// What a responder sent, read as nginx's parser reads it.
#[derive(Debug, PartialEq, Eq)]
enum Answer<'a> {
    Body(u16, &'a [u8]),
    Invalid,
    BadType(String),
    /// The connection ended inside the head.
    Short,
}

fn parse_answer(buf: &[u8]) -> Answer<'_> {
    let Some(line_end) = buf.iter().position(|&b| b == b'\n') else {
        return if buf.is_empty() || b"HTTP/".starts_with(&buf[..buf.len().min(5)]) {
            Answer::Short
        } else {
            Answer::Invalid
        };
    };
    let line = String::from_utf8_lossy(&buf[..line_end]);
    let line = line.trim_end_matches('\r');
    let code = line
        .strip_prefix("HTTP/")
        .and_then(|l| l.split_once(' '))
        .filter(|(v, _)| {
            v.split_once('.')
                .is_some_and(|(a, b)| !a.is_empty() && !b.is_empty())
        })
        .map(|(_, rest)| rest.trim_start())
        .and_then(|rest| rest.get(..3))
        .and_then(|c| c.parse::<u16>().ok());
    let Some(code) = code else {
        return Answer::Invalid;
    };
    let mut at = line_end + 1;
    loop {
        let Some(end) = buf[at..].iter().position(|&b| b == b'\n') else {
            return Answer::Short;
        };
        let line = &buf[at..at + end];
        at += end + 1;
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        if line.is_empty() {
            return Answer::Body(code, &buf[at..]);
        }
        let Some(colon) = line.iter().position(|&b| b == b':') else {
            return Answer::Invalid;
        };
        let name = &line[..colon];
        if name.is_empty() || !name.iter().all(|b| b.is_ascii_alphanumeric() || *b == b'-') {
            return Answer::Invalid;
        }
        if name.eq_ignore_ascii_case(b"content-type") {
            let value = String::from_utf8_lossy(&line[colon + 1..])
                .trim()
                .to_string();
            if !value.eq_ignore_ascii_case("application/ocsp-response") {
                return Answer::BadType(value);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn responder_urls() {
        let r = Responder::parse("http://127.0.0.1:8888").unwrap();
        assert_eq!(
            (r.host.as_str(), r.port, r.uri.as_str()),
            ("127.0.0.1", 8888, "/")
        );
        assert!(r.literal);
        let r = Responder::parse("HTTP://[::1]/ocsp").unwrap();
        assert_eq!(
            (r.host.as_str(), r.port, r.uri.as_str()),
            ("[::1]", 80, "/ocsp")
        );
        assert_eq!(
            Responder::parse("https://ocsp.test/").unwrap_err(),
            "invalid URL prefix in OCSP responder \"https://ocsp.test/\""
        );
        assert_eq!(
            Responder::parse("http://a.test:0/").unwrap_err(),
            "invalid port in OCSP responder \"a.test:0/\""
        );
        assert_eq!(
            Responder::parse("http://no-such-host.invalid/").unwrap_err(),
            "host not found in OCSP responder \"no-such-host.invalid/\""
        );
    }

    #[test]
    fn requests_escape_base64() {
        let r = Responder::parse("http://127.0.0.1/ocsp").unwrap();
        let req = String::from_utf8(r.request(&[0xfb, 0xff, 0xfe, 0x01])).unwrap();
        assert_eq!(
            req,
            "GET /ocsp/%2B%2F%2F%2BAQ%3D%3D HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n"
        );
        assert_eq!(base64(b"abc"), "YWJj");
        assert_eq!(base64(b"ab"), "YWI=");
    }

    #[test]
    fn answers() {
        assert_eq!(
            parse_answer(b"HTTP/1.0 200 OK\r\nContent-type: application/ocsp-response\r\nContent-Length: 2\r\n\r\n01"),
            Answer::Body(200, b"01")
        );
        assert_eq!(
            parse_answer(b"HTTP/1.0 400 Bad Request\r\n\r\n"),
            Answer::Body(400, b"")
        );
        assert_eq!(
            parse_answer(b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\n\r\n<html>"),
            Answer::BadType("text/html".into())
        );
        assert_eq!(parse_answer(b""), Answer::Short);
        assert_eq!(parse_answer(b"HTTP/1.0 200 OK\r\nServer: x"), Answer::Short);
        assert_eq!(parse_answer(b"SSH-2.0-OpenSSH\r\n"), Answer::Invalid);
    }
}
