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
use h2::SendStream;

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

/// The answer's head as an `http` response: what [`crate::http::h1`] writes as HTTP/1 lines.
/// Returns it and its size as nginx's `$bytes_sent` counts a head (the fields' names and
/// values, uncompressed).
pub fn head(
    reply: &Reply,
    lc: &LocConf,
    length: Option<u64>,
    date: &[u8],
) -> (http::Response<()>, u64) {
    let status = shoal_http::status::wire_status(reply.status);
    let mut resp = http::Response::new(());
    *resp.status_mut() = http::StatusCode::from_u16(status).unwrap_or(http::StatusCode::OK);
    let mut size = 9u64;
    let h = resp.headers_mut();
    // The head's own fields, under names made once (`http`'s constants).
    let mut own =
        |name: http::HeaderName,
         value: Result<http::HeaderValue, http::header::InvalidHeaderValue>| {
            if let Ok(v) = value {
                size += (name.as_str().len() + http::HeaderValue::len(&v)) as u64 + 2;
                h.append(name, v);
            }
        };
    use http::header;
    use http::HeaderValue as Value;
    own(
        header::SERVER,
        Ok(Value::from_static(tokens(lc.server_tokens()).server())),
    );
    own(header::DATE, Value::from_bytes(date));
    if let Some(ct) = reply.content_type.as_deref().filter(|t| !t.is_empty()) {
        own(header::CONTENT_TYPE, Value::from_str(ct));
    }
    if let Some(n) = length {
        own(header::CONTENT_LENGTH, Ok(Value::from(n)));
    }
    if let Some(lm) = &reply.last_modified {
        own(header::LAST_MODIFIED, Value::from_bytes(lm));
    }
    if let Some(loc) = reply.location.as_deref() {
        own(header::LOCATION, Value::from_str(loc));
    }
    // The handler's and the filters' fields: `HeaderName::from_bytes` lowers a name and
    // knows the standard ones without an allocation.
    let mut put = |name: &str, value: &[u8]| {
        if CONNECTION_SPECIFIC
            .iter()
            .any(|c| c.eq_ignore_ascii_case(name))
        {
            return;
        }
        let (Ok(n), Ok(v)) = (
            http::HeaderName::from_bytes(name.as_bytes()),
            http::HeaderValue::from_bytes(value),
        ) else {
            return;
        };
        size += (name.len() + value.len()) as u64 + 2;
        h.append(n, v);
    };
    for (n, v) in &reply.headers {
        put(n, v.as_bytes());
    }
    for (n, v) in &reply.extra {
        put(n, v.as_bytes());
    }
    for (n, v) in &reply.raw_extra {
        put(n, v);
    }
    (resp, size)
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
    pub send: SendStream<Bytes>,
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

    fn sendfile_socket(&self) -> Option<BorrowedFd<'_>> {
        None
    }

    fn set_cork(&self, _on: bool) {}

    async fn until_writable(&mut self) -> io::Result<()> {
        Ok(())
    }
}
