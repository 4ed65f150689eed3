//! The one HTTP/1.1 client of the end-to-end tests, plain std over `TcpStream` on purpose: the
//! thing under test is shoal's HTTP code, so the other end must not share it. It reads as a
//! careful client does: a head line that does not end in CRLF is an error, not a shrug.
//!
//! Two ways to talk, for two kinds of test:
//! - [`Client`], one keep-alive connection: requests one after another or pipelined, each answer
//!   read on its own, by Content-Length ([`Client::read_response`], what every answer of shoal's
//!   own carries) or in whichever framing the server chose ([`Client::read_framed`]: chunked, or
//!   to the close). [`get`], [`ask`] and [`answer_to`] are one such exchange on a new connection.
//! - the [`exchange`] family: bytes sent on a new connection and everything read until the
//!   server closes it, for answers whose framing or whose end is what the test looks at;
//!   [`status_of`], [`body_of`], [`cache_status`] and [`dechunk`] take such a transcript apart.
//!
//! Every read is bounded by [`WAIT`]: a server that does not answer fails the test, never hangs
//! it.

use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream};

use super::WAIT;

/// `METHOD target HTTP/1.1`, `Host: localhost`, then `headers` (each line ending in CRLF) and the
/// blank line.
pub fn request(method: &str, target: &str, headers: &str) -> String {
    format!("{method} {target} HTTP/1.1\r\nHost: localhost\r\n{headers}\r\n")
}

/// An answer read by [`Client`].
#[derive(Debug)]
pub struct Response {
    pub status: u16,
    /// Header lines as (lowercased name, value).
    pub headers: Vec<(String, String)>,
    /// The body, chunked framing removed.
    pub body: Vec<u8>,
    /// The status line and header lines as they came, CRLFs and the blank line included.
    pub head: String,
}

impl Response {
    /// The first value of a header (name compared case-insensitively).
    pub fn header(&self, name: &str) -> Option<&str> {
        let name = name.to_ascii_lowercase();
        self.headers
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, v)| v.as_str())
    }

    /// Whether the body is gzip-compressed (`Content-Encoding: gzip`).
    pub fn gzipped(&self) -> bool {
        self.header("content-encoding") == Some("gzip")
    }

    /// A short description for assertion messages: the status, the headers, the body's length.
    pub fn show(&self) -> String {
        let hs: Vec<String> = self
            .headers
            .iter()
            .map(|(n, v)| format!("{n}: {v}"))
            .collect();
        format!(
            "{} [{}] body {} bytes",
            self.status,
            hs.join("; "),
            self.body.len()
        )
    }
}

/// A connection to 127.0.0.1:`port` whose reads and writes give up after [`WAIT`].
fn connect(port: u16) -> TcpStream {
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    let s = TcpStream::connect_timeout(&addr, WAIT)
        .unwrap_or_else(|e| panic!("connecting to {addr}: {e}"));
    s.set_read_timeout(Some(WAIT)).expect("read timeout");
    s.set_write_timeout(Some(WAIT)).expect("write timeout");
    s
}

/// A raw HTTP/1.1 client on one keep-alive connection.
pub struct Client {
    reader: BufReader<TcpStream>,
}

impl Client {
    pub fn connect(port: u16) -> Client {
        Client {
            reader: BufReader::new(connect(port)),
        }
    }

    pub fn stream(&self) -> &TcpStream {
        self.reader.get_ref()
    }

    /// Writes raw bytes.
    pub fn send(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.reader.get_mut().write_all(bytes)
    }

    /// `GET path` with keep-alive; the answer by Content-Length ([`Client::read_response`]).
    pub fn get(&mut self, path: &str) -> io::Result<Response> {
        self.send(request("GET", path, "").as_bytes())?;
        self.read_response()
    }

    /// Sends `req` and reads its answer in whichever framing ([`Client::read_framed`]).
    pub fn ask(&mut self, req: &str) -> io::Result<Response> {
        self.send(req.as_bytes())?;
        self.read_framed()
    }

    /// One line of a head, which must end in CRLF; returned without it.
    fn head_line(&mut self, line: &mut String, what: &str) -> io::Result<()> {
        line.clear();
        if self.reader.read_line(line)? == 0 {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                what.to_string(),
            ));
        }
        if !line.ends_with("\r\n") {
            return Err(io::Error::other(format!(
                "a line cut short or without CRLF: {line:?}"
            )));
        }
        Ok(())
    }

    /// Reads a status line and headers.
    pub fn read_head(&mut self) -> io::Result<Response> {
        let mut line = String::new();
        self.head_line(&mut line, "connection closed")?;
        let mut head = line.clone();
        let status = line
            .strip_prefix("HTTP/1.1 ")
            .and_then(|r| r.get(..3))
            .and_then(|c| c.parse().ok())
            .ok_or_else(|| io::Error::other(format!("bad status line {line:?}")))?;
        let mut headers = Vec::new();
        loop {
            self.head_line(&mut line, "closed in the head")?;
            head.push_str(&line);
            let l = line.trim_end_matches(['\r', '\n']);
            if l.is_empty() {
                break;
            }
            let (n, v) = l
                .split_once(':')
                .ok_or_else(|| io::Error::other(format!("bad header {l:?}")))?;
            headers.push((n.trim().to_ascii_lowercase(), v.trim().to_string()));
        }
        Ok(Response {
            status,
            headers,
            body: Vec::new(),
            head,
        })
    }

    /// Reads an answer whose body is framed by Content-Length; an answer without one is an
    /// error (every answer shoal makes itself carries one).
    pub fn read_response(&mut self) -> io::Result<Response> {
        let mut r = self.read_head()?;
        let len: usize = r
            .header("content-length")
            .ok_or_else(|| io::Error::other("no Content-Length"))?
            .parse()
            .map_err(|_| io::Error::other("bad Content-Length"))?;
        r.body = vec![0; len];
        self.reader.read_exact(&mut r.body)?;
        Ok(r)
    }

    /// Reads an answer in any of HTTP/1.1's framings: none for 1xx, 204 and 304; chunked (the
    /// body decoded; a chunk not followed by CRLF, or a trailer, is an error); Content-Length;
    /// else everything until the server closes.
    pub fn read_framed(&mut self) -> io::Result<Response> {
        let mut r = self.read_head()?;
        if r.status < 200 || r.status == 204 || r.status == 304 {
            return Ok(r);
        }
        if r.header("transfer-encoding") == Some("chunked") {
            let mut line = String::new();
            loop {
                self.head_line(&mut line, "closed in a chunk size")?;
                let size = line.trim_end().split(';').next().unwrap_or("").trim();
                let size = usize::from_str_radix(size, 16)
                    .map_err(|_| io::Error::other(format!("bad chunk size {line:?}")))?;
                if size == 0 {
                    self.head_line(&mut line, "closed after the last chunk")?;
                    if line != "\r\n" {
                        return Err(io::Error::other(format!("unexpected trailer {line:?}")));
                    }
                    return Ok(r);
                }
                let at = r.body.len();
                r.body.resize(at + size, 0);
                self.reader.read_exact(&mut r.body[at..])?;
                self.head_line(&mut line, "closed after a chunk")?;
                if line != "\r\n" {
                    return Err(io::Error::other(format!("a chunk ends with {line:?}")));
                }
            }
        }
        if let Some(n) = r.header("content-length") {
            let n: usize = n
                .parse()
                .map_err(|_| io::Error::other(format!("bad Content-Length {n:?}")))?;
            r.body = vec![0; n];
            self.reader.read_exact(&mut r.body)?;
        } else {
            self.reader.read_to_end(&mut r.body)?;
        }
        Ok(r)
    }

    /// Reads exactly `n` body bytes.
    pub fn read_body(&mut self, n: usize) -> io::Result<Vec<u8>> {
        let mut v = vec![0; n];
        self.reader.read_exact(&mut v)?;
        Ok(v)
    }

    /// Whether the server closed the connection (an end of file or a reset) within [`WAIT`];
    /// a read that times out is not a close.
    pub fn closed_by_peer(&mut self) -> bool {
        let mut b = [0u8; 1];
        match self.reader.read(&mut b) {
            Ok(0) => true,
            Ok(_) => false,
            Err(e) => !matches!(
                e.kind(),
                io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
            ),
        }
    }
}

/// One `GET path` on a new connection ([`Client::get`]).
pub fn get(port: u16, path: &str) -> io::Result<Response> {
    Client::connect(port).get(path)
}

/// One `GET path` with `headers` on a new connection, the answer in whichever framing
/// ([`Client::read_framed`]); panics when none comes.
pub fn ask(port: u16, path: &str, headers: &str) -> Response {
    Client::connect(port)
        .ask(&request("GET", path, headers))
        .unwrap_or_else(|e| panic!("no answer to GET {path}: {e}"))
}

/// Sends `raw` on a new connection, tolerating a write that fails because the server already
/// answered and stopped reading, then reads one answer ([`Client::read_response`]); panics
/// when none comes.
pub fn answer_to(port: u16, raw: &[u8]) -> Response {
    let mut c = Client::connect(port);
    let _ = c.send(raw);
    c.read_response().unwrap_or_else(|e| {
        let start = String::from_utf8_lossy(&raw[..raw.len().min(60)]).into_owned();
        panic!("no answer to {start:?}...: {e}")
    })
}

/// Sends `raw` on a new connection and reads until the server closes it (or [`WAIT`] passes):
/// every byte it sent.
pub fn exchange<R: AsRef<[u8]> + ?Sized>(port: u16, raw: &R) -> Vec<u8> {
    let mut s = connect(port);
    s.write_all(raw.as_ref()).expect("sending");
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    out
}

/// [`exchange`], as text (bytes that are not UTF-8 replaced).
pub fn exchange_text<R: AsRef<[u8]> + ?Sized>(port: u16, raw: &R) -> String {
    String::from_utf8_lossy(&exchange(port, raw)).into_owned()
}

/// Sends `raw` on a new connection, half-closes it (the end of the request, for a server that
/// answers everything it was sent before closing) and reads until the server closes: every
/// byte it sent. A reset or a timeout fails the test.
pub fn exchange_half_closed(port: u16, raw: &[u8]) -> Vec<u8> {
    let mut s = connect(port);
    s.write_all(raw).expect("writing the request");
    s.shutdown(Shutdown::Write).expect("half-closing");
    let mut out = Vec::new();
    s.read_to_end(&mut out).expect("reading the answer");
    out
}

/// `METHOD path` with `headers` and `Connection: close` on a new connection: the whole answer
/// as text ([`exchange_text`]).
pub fn request_close(port: u16, method: &str, path: &str, headers: &str) -> String {
    exchange_text(
        port,
        &request(method, path, &format!("{headers}Connection: close\r\n")),
    )
}

/// `GET path` with `Connection: close` on a new connection: the whole answer as text.
pub fn get_close(port: u16, path: &str) -> String {
    request_close(port, "GET", path, "")
}

/// The status code of an answer read whole (`HTTP/1.x NNN ...`); 0 when there is no status line
/// (the server closed without answering).
pub fn status_of<R: AsRef<[u8]> + ?Sized>(resp: &R) -> u16 {
    resp.as_ref()
        .get(9..12)
        .and_then(|c| std::str::from_utf8(c).ok())
        .and_then(|c| c.parse().ok())
        .unwrap_or(0)
}

/// What follows the head of an answer read whole ("" when there is no head).
pub fn body_of(resp: &str) -> &str {
    resp.split_once("\r\n\r\n").map_or("", |(_, b)| b)
}

/// The head and the body of an answer read whole; the head with its blank line, as
/// [`Response::head`]. Panics when there is no end of head.
pub fn head_and_body(resp: &[u8]) -> (String, Vec<u8>) {
    let split = resp
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .unwrap_or_else(|| panic!("no end of head in {:?}", String::from_utf8_lossy(resp)))
        + 4;
    (
        String::from_utf8_lossy(&resp[..split]).into_owned(),
        resp[split..].to_vec(),
    )
}

/// The `X-Cache-Status` header of an answer read whole (the test configurations add it with
/// `add_header X-Cache-Status $upstream_cache_status`); "" when there is none.
pub fn cache_status(resp: &str) -> String {
    resp.lines()
        .find_map(|l| l.strip_prefix("X-Cache-Status: "))
        .unwrap_or("")
        .trim()
        .to_string()
}

/// A chunked body with its framing removed; `None` when the framing is broken, or when anything
/// but the final CRLF follows the last chunk.
pub fn dechunk<B: AsRef<[u8]> + ?Sized>(body: &B) -> Option<Vec<u8>> {
    let mut b = body.as_ref();
    let mut out = Vec::new();
    loop {
        let eol = b.windows(2).position(|w| w == b"\r\n")?;
        let size = std::str::from_utf8(&b[..eol]).ok()?.split(';').next()?;
        let n = usize::from_str_radix(size.trim(), 16).ok()?;
        b = &b[eol + 2..];
        if n == 0 {
            return (b == b"\r\n").then_some(out);
        }
        out.extend_from_slice(b.get(..n)?);
        b = b.get(n..)?.strip_prefix(b"\r\n")?;
    }
}
