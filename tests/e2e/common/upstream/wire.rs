//! The wire side of [`super::Upstream`]: reading requests off a connection (heads, Content-Length
//! and chunked bodies, pipelined requests kept for the next turn) and writing [`Answer`]s in each
//! of their framings. Runs on the connection's own thread; every wait checks `stopping`.

use std::io::{self, Read, Write};
use std::net::Shutdown;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use super::{lock, Answer, Conn, Framing, Recorded, Shared};

/// The longest request head read; past it the request gets a 400 and the connection closes.
const MAX_HEAD: usize = 64 * 1024;

/// Buffered reads on a connection; what was read past a request stays for the next one.
struct Input {
    conn: Conn,
    buf: Vec<u8>,
}

impl Input {
    /// Reads more; Ok(false) at EOF.
    fn fill(&mut self) -> io::Result<bool> {
        let mut b = [0u8; 16 * 1024];
        let n = self.conn.read(&mut b)?;
        self.buf.extend_from_slice(&b[..n]);
        Ok(n > 0)
    }

    /// Takes bytes up to and including `delim`, reading until it comes, at most `max` bytes.
    fn take_until(&mut self, delim: &[u8], max: usize) -> io::Result<Option<Vec<u8>>> {
        let mut from = 0;
        loop {
            if let Some(i) = find(&self.buf[from..], delim) {
                let end = from + i + delim.len();
                return Ok(Some(self.buf.drain(..end).collect()));
            }
            if self.buf.len() > max {
                return Err(io::Error::other("line or head too long"));
            }
            from = self.buf.len().saturating_sub(delim.len() - 1);
            if !self.fill()? {
                return Ok(None);
            }
        }
    }

    fn take_exact(&mut self, n: usize) -> io::Result<Vec<u8>> {
        while self.buf.len() < n {
            if !self.fill()? {
                return Err(io::ErrorKind::UnexpectedEof.into());
            }
        }
        Ok(self.buf.drain(..n).collect())
    }
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

fn bad(what: &str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, what.to_string())
}

/// Serves one connection until it closes, the answer says close, or the server stops.
pub(super) fn serve(conn: Conn, n: usize, sh: &Shared) {
    let mut input = Input {
        conn,
        buf: Vec::new(),
    };
    let mut seq = 0;
    while !sh.stopping.load(Ordering::SeqCst) {
        seq += 1;
        let req = match read_request(&mut input, n, seq) {
            Ok(Some(r)) => r,
            Ok(None) => return,
            Err(e) if e.kind() == io::ErrorKind::InvalidData => {
                let _ = input.conn.write_all(
                    b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
                );
                return;
            }
            Err(_) => return,
        };
        lock(&sh.requests).push(req.clone());
        let answer = (sh.handler)(&req);
        match write_answer(&mut input, &req, &answer, sh) {
            Ok(true) => {}
            Ok(false) | Err(_) => return,
        }
    }
}

/// Reads one request; Ok(None) on a clean EOF before it starts.
fn read_request(input: &mut Input, conn: usize, seq: usize) -> io::Result<Option<Recorded>> {
    // Empty lines before a request line are allowed (RFC 9112 2.2).
    while input.buf.starts_with(b"\r\n") {
        input.buf.drain(..2);
    }
    let Some(raw_head) = input.take_until(b"\r\n\r\n", MAX_HEAD)? else {
        if input.buf.is_empty() {
            return Ok(None);
        }
        return Err(io::ErrorKind::UnexpectedEof.into());
    };
    let text = std::str::from_utf8(&raw_head).map_err(|_| bad("head is not UTF-8"))?;
    let mut lines = text.split("\r\n");
    let line = lines.next().unwrap_or_default();
    let mut parts = line.split(' ');
    let (Some(method), Some(target), Some(version), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(bad("bad request line"));
    };
    if method.is_empty() || target.is_empty() || !version.starts_with("HTTP/1.") {
        return Err(bad("bad request line"));
    }
    let headers = parse_fields(lines.take_while(|l| !l.is_empty()))?;
    let mut r = Recorded {
        conn,
        seq,
        method: method.to_string(),
        target: target.to_string(),
        version: version.to_string(),
        headers,
        body: Vec::new(),
        chunked: false,
        trailers: Vec::new(),
        raw_head: raw_head.clone(),
    };
    let te = r.header_all("transfer-encoding").join(",");
    if te
        .rsplit(',')
        .next()
        .is_some_and(|t| t.trim().eq_ignore_ascii_case("chunked"))
    {
        r.chunked = true;
        read_chunked(input, &mut r)?;
    } else if !te.is_empty() {
        return Err(bad("transfer-encoding without chunked"));
    } else if let Some(cl) = r.header("content-length") {
        let len: usize = cl.parse().map_err(|_| bad("bad content-length"))?;
        r.body = input.take_exact(len)?;
    }
    Ok(Some(r))
}

fn parse_fields<'a>(lines: impl Iterator<Item = &'a str>) -> io::Result<Vec<(String, String)>> {
    let mut out = Vec::new();
    for l in lines {
        let (name, value) = l.split_once(':').ok_or_else(|| bad("header without ':'"))?;
        if name.is_empty() || name.contains([' ', '\t']) {
            return Err(bad("bad header name"));
        }
        out.push((
            name.to_string(),
            value.trim_matches([' ', '\t']).to_string(),
        ));
    }
    Ok(out)
}

fn read_chunked(input: &mut Input, r: &mut Recorded) -> io::Result<()> {
    loop {
        let line = input
            .take_until(b"\r\n", 4096)?
            .ok_or(io::ErrorKind::UnexpectedEof)?;
        let line = std::str::from_utf8(&line[..line.len() - 2]).map_err(|_| bad("chunk size"))?;
        let size = line.split(';').next().unwrap_or_default().trim();
        let size = usize::from_str_radix(size, 16).map_err(|_| bad("bad chunk size"))?;
        if size == 0 {
            break;
        }
        let data = input.take_exact(size + 2)?;
        if !data.ends_with(b"\r\n") {
            return Err(bad("chunk without CRLF"));
        }
        r.body.extend_from_slice(&data[..size]);
    }
    let mut trailer_lines = Vec::new();
    loop {
        let line = input
            .take_until(b"\r\n", MAX_HEAD)?
            .ok_or(io::ErrorKind::UnexpectedEof)?;
        if line == b"\r\n" {
            break;
        }
        let line =
            String::from_utf8(line[..line.len() - 2].to_vec()).map_err(|_| bad("trailer"))?;
        trailer_lines.push(line);
    }
    r.trailers = parse_fields(trailer_lines.iter().map(String::as_str))?;
    Ok(())
}

/// Sleeps `d`, in short steps so that stop() is not held up; false if the server is stopping.
fn pause(d: Duration, sh: &Shared) -> bool {
    let end = Instant::now() + d;
    while Instant::now() < end {
        if sh.stopping.load(Ordering::SeqCst) {
            return false;
        }
        std::thread::sleep((end - Instant::now()).min(Duration::from_millis(10)));
    }
    !sh.stopping.load(Ordering::SeqCst)
}

/// Writes an answer; Ok(true) if the connection stays open for another request.
fn write_answer(input: &mut Input, req: &Recorded, a: &Answer, sh: &Shared) -> io::Result<bool> {
    if !pause(a.delay_head, sh) {
        return Ok(false);
    }
    let mut head = format!("HTTP/1.1 {} {}\r\n", a.status, a.reason);
    for (n, v) in &a.headers {
        head.push_str(&format!("{n}: {v}\r\n"));
    }
    let no_body = req.method == "HEAD" || a.status < 200 || a.status == 204 || a.status == 304;
    // The body as wire pieces; `true` marks payload bytes, which delay_body counts.
    let mut pieces: Vec<(Vec<u8>, bool)> = Vec::new();
    let mut keep = !a.close && req.keep_alive();
    match &a.framing {
        Framing::HangUp => return Ok(false),
        Framing::Raw(bytes) => {
            input.conn.write_all(bytes)?;
            return Ok(!a.close);
        }
        Framing::Length => {
            if !(a.status < 200 || a.status == 204 || a.status == 304) {
                head.push_str(&format!("Content-Length: {}\r\n", a.body.len()));
            }
            pieces.push((a.body.clone(), true));
        }
        Framing::CutShort(len) => {
            head.push_str(&format!("Content-Length: {len}\r\n"));
            pieces.push((a.body.clone(), true));
            keep = false;
        }
        Framing::CloseDelimited => {
            pieces.push((a.body.clone(), true));
            keep = false;
        }
        Framing::Chunked(sizes) => {
            head.push_str("Transfer-Encoding: chunked\r\n");
            let mut rest = &a.body[..];
            let mut sizes = sizes.iter().copied();
            while !rest.is_empty() {
                let n = sizes.next().unwrap_or(rest.len()).clamp(1, rest.len());
                pieces.push((format!("{n:x}\r\n").into_bytes(), false));
                pieces.push((rest[..n].to_vec(), true));
                pieces.push((b"\r\n".to_vec(), false));
                rest = &rest[n..];
            }
            let mut last = b"0\r\n".to_vec();
            for (n, v) in &a.trailers {
                last.extend_from_slice(format!("{n}: {v}\r\n").as_bytes());
            }
            last.extend_from_slice(b"\r\n");
            pieces.push((last, false));
        }
        Framing::Upgrade => {}
    }
    if a.close {
        head.push_str("Connection: close\r\n");
    }
    head.push_str("\r\n");
    input.conn.write_all(head.as_bytes())?;
    if let Framing::Upgrade = a.framing {
        echo_until_eof(input)?;
        return Ok(false);
    }
    if !no_body {
        let (at, delay) = a.delay_body.unwrap_or_default();
        let mut delayed = a.delay_body.is_none();
        let mut sent = 0;
        for (bytes, payload) in &pieces {
            let mut b = &bytes[..];
            if *payload && !delayed && at < sent + b.len() {
                let (first, second) = b.split_at(at - sent);
                input.conn.write_all(first)?;
                if !pause(delay, sh) {
                    return Ok(false);
                }
                delayed = true;
                sent += first.len();
                b = second;
            }
            input.conn.write_all(b)?;
            if *payload {
                sent += b.len();
            }
        }
        if !delayed && !pause(delay, sh) {
            return Ok(false);
        }
    }
    if !keep {
        // An orderly close: our FIN after everything written.
        input.conn.shutdown(Shutdown::Write);
    }
    Ok(keep)
}

/// After a 101: echoes everything (bytes read with the request first) until EOF.
fn echo_until_eof(input: &mut Input) -> io::Result<()> {
    let early = std::mem::take(&mut input.buf);
    input.conn.write_all(&early)?;
    let mut b = [0u8; 16 * 1024];
    loop {
        let n = input.conn.read(&mut b)?;
        if n == 0 {
            input.conn.shutdown(Shutdown::Write);
            return Ok(());
        }
        input.conn.write_all(&b[..n])?;
    }
}
