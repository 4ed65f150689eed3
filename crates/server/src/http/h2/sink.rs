//! Writing an answer on an HTTP/2 stream: its head as a HEADERS frame (the status, `server`,
//! `date`, the length when known, the handler's and the filters' headers, never the ones
//! HTTP/2 forbids), its body as DATA frames of at most `http2_chunk_size`, sent only as the
//! client's window (and the connection's send buffer) take them, so a client that does not
//! read holds at most a window of the answer in memory and `send_timeout` ends it.
//!
//! `limit_rate` paces a stream's DATA as HTTP/1's writer paces its bytes (nginx's write filter
//! runs per stream): before each frame the [`Pacing`] says how much may go, after it how long
//! to wait; the HEADERS frame counts as the head's bytes do.

use std::io;
use std::os::fd::BorrowedFd;
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};

use super::wire::SendStream;
use crate::error::Error;
use crate::http::limit_rate::Pacing;
use crate::http::output::Sink;
use crate::http::reply::{Body, Reply};
use crate::http::transport::ConnInfo;
use crate::http::{LocConf, ServerTokens};

/// Headers no HTTP/2 message carries (RFC 9113, 8.2.2): an upstream's are dropped.
const CONNECTION_SPECIFIC: &[&str] = &[
    "connection",
    "keep-alive",
    "proxy-connection",
    "transfer-encoding",
    "upgrade",
];

/// An answer's head as the codec encodes it: the status and the fields (names lowercased) in
/// one buffer.
#[derive(Default)]
pub struct Head {
    pub status: u16,
    buf: Vec<u8>,
    /// Each field's name and value lengths, in order.
    spans: Vec<(u32, u32)>,
}

impl Head {
    /// Appends a field whose name is lowercase already.
    fn push(&mut self, name: &[u8], value: &[u8]) {
        self.buf.extend_from_slice(name);
        self.buf.extend_from_slice(value);
        self.spans.push((name.len() as u32, value.len() as u32));
    }

    /// Appends a field, its name lowercased.
    fn push_lowered(&mut self, name: &[u8], value: &[u8]) {
        if name.iter().any(u8::is_ascii_uppercase) {
            self.buf.extend(name.iter().map(u8::to_ascii_lowercase));
            self.buf.extend_from_slice(value);
            self.spans.push((name.len() as u32, value.len() as u32));
        } else {
            self.push(name, value);
        }
    }

    /// The fields, in order.
    pub fn fields(&self) -> impl Iterator<Item = (&[u8], &[u8])> + '_ {
        let mut at = 0usize;
        self.spans.iter().map(move |&(n, v)| {
            let (n, v) = (n as usize, v as usize);
            let field = (&self.buf[at..at + n], &self.buf[at + n..at + n + v]);
            at += n + v;
            field
        })
    }
}

/// The answer's head: what [`crate::http::h1`] writes as HTTP/1 lines. Returns it and its
/// size as nginx's `$bytes_sent` counts a head (the fields' names and values, uncompressed).
pub fn head(reply: &Reply, lc: &LocConf, length: Option<u64>, date: &[u8]) -> (Head, u64) {
    let mut h = Head {
        status: shoal_http::status::wire_status(reply.status),
        buf: Vec::with_capacity(256),
        spans: Vec::with_capacity(8 + reply.headers.len() + reply.extra.len()),
    };
    let mut size = 9u64;
    // `made`: a field made here, valid as it is (a lowercase name, a value without control
    // bytes). Another with a control byte in its value (a line break, a NUL) is dropped, as
    // the `http` crate's checks did, and its name is lowercased.
    let mut other = |h: &mut Head, name: &[u8], value: &[u8], made: bool| {
        if made {
            size += (name.len() + value.len()) as u64 + 2;
            h.push(name, value);
            return;
        }
        if value.iter().any(|&b| (b < 0x20 && b != b'\t') || b == 0x7f) || name.is_empty() {
            return;
        }
        size += (name.len() + value.len()) as u64 + 2;
        h.push_lowered(name, value);
    };
    other(
        &mut h,
        b"server",
        tokens(lc.server_tokens()).server().as_bytes(),
        true,
    );
    other(&mut h, b"date", date, true);
    if let Some(ct) = reply.content_type.as_deref().filter(|t| !t.is_empty()) {
        other(&mut h, b"content-type", ct.as_bytes(), false);
    }
    if let Some(n) = length {
        let mut digits = [0u8; 20];
        other(&mut h, b"content-length", decimal(n, &mut digits), true);
    }
    if let Some(lm) = &reply.last_modified {
        other(&mut h, b"last-modified", lm.as_ref(), true);
    }
    if let Some(loc) = reply.location.as_deref() {
        other(&mut h, b"location", loc.as_bytes(), false);
    }
    // The handler's and the filters' fields.
    let mut put = |h: &mut Head, name: &str, value: &[u8]| {
        // (Nor a name a pseudo-header's: the codec takes these fields as they are.)
        if name.starts_with(':')
            || CONNECTION_SPECIFIC
                .iter()
                .any(|c| c.eq_ignore_ascii_case(name))
        {
            return;
        }
        other(h, name.as_bytes(), value, false);
    };
    for (n, v) in &reply.headers {
        put(&mut h, n, v.as_bytes());
    }
    for (n, v) in &reply.extra {
        put(&mut h, n, v.as_bytes());
    }
    for (n, v) in &reply.raw_extra {
        put(&mut h, n, v);
    }
    (h, size)
}

/// `n` in decimal, written at the end of `buf`.
fn decimal(mut n: u64, buf: &mut [u8; 20]) -> &[u8] {
    let mut i = buf.len();
    loop {
        i -= 1;
        buf[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            return &buf[i..];
        }
    }
}

fn tokens(t: ServerTokens) -> shoal_http::ServerTokens {
    match t {
        ServerTokens::On => shoal_http::ServerTokens::On,
        ServerTokens::Off => shoal_http::ServerTokens::Off,
        ServerTokens::Build => shoal_http::ServerTokens::Build,
    }
}

/// The body length an answer's head tells, as HTTP/1's does (`None`: none told).
pub fn told_length(body: &Body, changes_length: bool) -> Option<u64> {
    if changes_length {
        return None;
    }
    body.length()
}

/// A stream's writing half: body bytes are gathered in `out` and go as DATA frames.
pub struct H2Sink<'a> {
    pub send: SendStream,
    pub out: BytesMut,
    pub info: &'a ConnInfo,
    pub send_timeout: Duration,
    /// `http2_chunk_size`: the largest DATA frame.
    pub chunk: usize,
    /// `limit_rate`: the pacing of the stream's answer (`None`: none).
    pub pacing: Option<Box<Pacing>>,
}

impl H2Sink<'_> {
    /// Waits until the stream may send more (its window and the connection's buffer), at most
    /// `send_timeout`. The stream reset by the client is an error.
    async fn capacity(&mut self, want: usize) -> io::Result<usize> {
        self.send.reserve_capacity(want);
        loop {
            let now = self.send.capacity();
            if now > 0 {
                return Ok(now);
            }
            let wait = std::future::poll_fn(|cx| self.send.poll_capacity(cx));
            match crate::deadline::within(self.send_timeout, wait).await {
                Err(_) => return Err(io::ErrorKind::TimedOut.into()),
                Ok(None) => return Err(io::ErrorKind::BrokenPipe.into()),
                Ok(Some(Err(e))) => return Err(io::Error::from(Error::protocol(e))),
                Ok(Some(Ok(_))) => {}
            }
        }
    }

    /// How many bytes `limit_rate` lets go now, after waiting for its pause (`usize::MAX`:
    /// no rate).
    async fn paced(&self) -> usize {
        let Some(p) = self.pacing.as_deref() else {
            return usize::MAX;
        };
        loop {
            match p.allowed(Instant::now()) {
                Ok(n) => return n,
                Err(at) => tokio::time::sleep_until(at.into()).await,
            }
        }
    }

    /// Sends `n` bytes of `out` (`end`: they end the stream).
    fn send_out(&mut self, n: usize, end: bool) -> io::Result<()> {
        let data = self.out.split_to(n).freeze();
        self.send
            .send_data(data, end)
            .map_err(|e| io::Error::from(Error::protocol(e)))?;
        if let Some(p) = self.pacing.as_deref_mut() {
            p.wrote(n, Instant::now());
        }
        Ok(())
    }

    /// Sends `data` as DATA frames (without END_STREAM), as the client's window takes it:
    /// a relayed frame, without a copy.
    pub async fn send_bytes(&mut self, mut data: Bytes) -> io::Result<()> {
        self.flush_to(0).await?;
        while !data.is_empty() {
            let cap = self.capacity(data.len()).await?;
            let piece = data.split_to(cap.min(data.len()).min(self.chunk));
            self.send
                .send_data(piece, false)
                .map_err(|e| io::Error::from(Error::protocol(e)))?;
        }
        Ok(())
    }

    /// [`Sink::send_file`]: as much of `want` as the windows, the connection's output and
    /// `limit_rate` take.
    async fn file_frames(
        &mut self,
        file: &std::fs::File,
        offset: u64,
        want: usize,
    ) -> io::Result<usize> {
        use std::os::fd::AsFd;
        self.flush_to(0).await?;
        let allowed = self.paced().await;
        let cap = self.capacity(want.min(allowed)).await?;
        let n = cap.min(want).min(allowed);
        let sent = self
            .send
            .send_file(file.as_fd(), offset, n, self.chunk)
            .map_err(|e| io::Error::from(Error::protocol(e)))??;
        if let Some(p) = self.pacing.as_deref_mut() {
            p.wrote(sent, Instant::now());
        }
        Ok(sent)
    }

    /// Sends everything gathered and ends the stream (an empty DATA frame with END_STREAM when
    /// nothing is left).
    pub async fn finish(&mut self) -> io::Result<()> {
        if self.out.is_empty() {
            return self
                .send
                .send_data(Bytes::new(), true)
                .map_err(|e| io::Error::from(Error::protocol(e)));
        }
        while !self.out.is_empty() {
            let allowed = self.paced().await;
            let cap = self.capacity(self.out.len().min(allowed)).await?;
            let n = cap.min(self.out.len()).min(self.chunk).min(allowed);
            let last = n == self.out.len();
            self.send_out(n, last)?;
        }
        Ok(())
    }
}

impl Sink for H2Sink<'_> {
    fn out(&mut self) -> &mut BytesMut {
        &mut self.out
    }

    fn info(&self) -> &ConnInfo {
        self.info
    }

    fn more_requests_buffered(&self) -> bool {
        false
    }

    fn flush_now(&mut self) -> io::Result<bool> {
        while !self.out.is_empty() {
            let allowed = match self.pacing.as_deref().map(|p| p.allowed(Instant::now())) {
                None => usize::MAX,
                Some(Ok(n)) => n,
                Some(Err(_)) => return Ok(false),
            };
            self.send.reserve_capacity(self.out.len().min(allowed));
            let cap = self.send.capacity();
            if cap == 0 {
                return Ok(false);
            }
            let n = cap.min(self.out.len()).min(self.chunk).min(allowed);
            self.send_out(n, false)?;
        }
        Ok(true)
    }

    async fn flush_to(&mut self, keep: usize) -> io::Result<()> {
        while self.out.len() > keep {
            let allowed = self.paced().await;
            let cap = match self.capacity(self.out.len().min(allowed)).await {
                Ok(c) => c,
                Err(e) => {
                    self.out.clear();
                    return Err(e);
                }
            };
            let n = cap.min(self.out.len()).min(self.chunk).min(allowed);
            self.send_out(n, false)?;
        }
        Ok(())
    }

    async fn write_some(&mut self, data: &[u8]) -> io::Result<usize> {
        // (A wait that is dropped has sent nothing: the pause comes before the frame.)
        let allowed = self.paced().await;
        let cap = self.capacity(data.len().min(allowed)).await?;
        let n = cap.min(data.len()).min(self.chunk).min(allowed);
        self.send
            .send_data(Bytes::copy_from_slice(&data[..n]), false)
            .map_err(|e| io::Error::from(Error::protocol(e)))?;
        if let Some(p) = self.pacing.as_deref_mut() {
            p.wrote(n, Instant::now());
        }
        Ok(n)
    }

    async fn send_file(
        &mut self,
        file: &std::fs::File,
        offset: u64,
        want: usize,
    ) -> Option<io::Result<usize>> {
        Some(self.file_frames(file, offset, want).await)
    }

    fn sendfile_socket(&self) -> Option<BorrowedFd<'_>> {
        None
    }

    fn set_cork(&self, _on: bool) {}

    async fn until_writable(&mut self) -> io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_head_s_fields_keep_their_order_with_names_lowercased() {
        let mut h = Head::default();
        h.push(b"server", b"shoal");
        h.push_lowered(b"X-Thing", b"A b");
        h.push_lowered(b"etag", b"\"1\"");
        let got: Vec<_> = h.fields().collect();
        assert_eq!(
            got,
            [
                (&b"server"[..], &b"shoal"[..]),
                (b"x-thing", b"A b"),
                (b"etag", b"\"1\""),
            ]
        );
        let mut digits = [0u8; 20];
        assert_eq!(decimal(0, &mut digits), b"0");
        assert_eq!(decimal(612, &mut digits), b"612");
        assert_eq!(decimal(u64::MAX, &mut digits), b"18446744073709551615");
    }
}
