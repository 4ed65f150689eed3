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

use shoal_http2::server::AnswerFields;

use super::wire::{SendResponse, SendStream, StreamError};
use crate::error::Error;
use crate::http::limit_rate::Pacing;
use crate::http::output::Sink;
use crate::http::reply::{Body, Reply};
use crate::http::transport::ConnInfo;
use crate::http::{LocConf, ServerTokens};

/// Whether a field is one no HTTP/2 message carries (RFC 9113, 8.2.2; an upstream's are
/// dropped) or a pseudo-header's name (the codec takes the fields as they are): by length
/// first, most fields are none of these.
fn forbidden(name: &[u8]) -> bool {
    if name.first() == Some(&b':') {
        return true;
    }
    let like: &[u8] = match name.len() {
        7 => b"upgrade",
        10 if name.eq_ignore_ascii_case(b"connection") => return true,
        10 => b"keep-alive",
        16 => b"proxy-connection",
        17 => b"transfer-encoding",
        _ => return false,
    };
    name.eq_ignore_ascii_case(like)
}

/// Hands `then` a field's name with its uppercase letters lowered: a word at a time (the
/// handlers' `ETag`, the range filter's `Accept-Ranges` on every static answer).
#[inline(always)]
fn with_lowered<R>(name: &[u8], then: impl FnOnce(&[u8]) -> R) -> R {
    let n = name.len();
    let mut small = [0u8; 64];
    let upper = match n {
        // Two words of four overlapping as one (the same bytes lowered the same way).
        4..8 => {
            let w = u32_at(name, 0) as u64 | (u32_at(name, n - 4) as u64) << 32;
            let (lower, upper) = lowered(w);
            small[..4].copy_from_slice(&(lower as u32).to_le_bytes());
            small[n - 4..n].copy_from_slice(&((lower >> 32) as u32).to_le_bytes());
            upper
        }
        8..=64 => {
            let mut upper = 0;
            // The last word overlaps the one before when `n` is not a multiple of eight.
            let mut at = 0;
            loop {
                at = at.min(n - 8);
                let w = u64::from_le_bytes(name[at..at + 8].try_into().expect("8 bytes"));
                let (lower, up) = lowered(w);
                small[at..at + 8].copy_from_slice(&lower.to_le_bytes());
                upper |= up;
                if at + 8 == n {
                    break upper;
                }
                at += 8;
            }
        }
        _ => {
            if !name.iter().any(u8::is_ascii_uppercase) {
                return then(name);
            }
            let long;
            let lower = match small.get_mut(..n) {
                Some(to) => {
                    for (d, s) in to.iter_mut().zip(name) {
                        *d = s.to_ascii_lowercase();
                    }
                    &*to
                }
                None => {
                    long = name.to_ascii_lowercase();
                    &long[..]
                }
            };
            return then(lower);
        }
    };
    match upper {
        0 => then(name),
        _ => then(&small[..n]),
    }
}

/// `w` with its bytes `A`–`Z` made lowercase, and a mask that is not 0 when it had any.
#[inline]
fn lowered(w: u64) -> (u64, u64) {
    const ONES: u64 = u64::from_le_bytes([0x01; 8]);
    let seven = w & (ONES * 0x7f);
    // A byte's high bit set when its low seven bits are at least `A`, above `Z`; neither sum
    // carries into the next byte.
    let from_a = seven + ONES * (0x80 - b'A' as u64);
    let past_z = seven + ONES * (0x80 - b'Z' as u64 - 1);
    let upper = from_a & !past_z & !w & (ONES * 0x80);
    (w | upper >> 2, upper)
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().expect("4 bytes"))
}

/// The `:status` an answer goes out with.
pub fn status(reply: &Reply) -> u16 {
    shoal_http::status::wire_status(reply.status)
}

/// Where [`head`] puts an answer's fields as it makes them.
pub trait PutField {
    /// A field valid as it is: a lowercase name HTTP/2 carries, a value without control
    /// bytes.
    fn made(&mut self, name: &[u8], value: &[u8]);
    /// A field (its name lowercase) that goes only if `check` passes; whether it went.
    fn checked(&mut self, name: &[u8], value: &[u8], check: impl FnOnce() -> bool) -> bool;
}

/// Straight into the HPACK encoder: a field it sent before (checked then) is not checked
/// again ([`AnswerFields::field_checked`]).
impl PutField for AnswerFields<'_> {
    #[inline]
    fn made(&mut self, name: &[u8], value: &[u8]) {
        self.field(name, value);
    }

    #[inline]
    fn checked(&mut self, name: &[u8], value: &[u8], check: impl FnOnce() -> bool) -> bool {
        self.field_checked(name, value, check)
    }
}

/// Nowhere: the head's size alone (a stream gone).
struct Nowhere;

impl PutField for Nowhere {
    fn made(&mut self, _: &[u8], _: &[u8]) {}

    fn checked(&mut self, _: &[u8], _: &[u8], check: impl FnOnce() -> bool) -> bool {
        check()
    }
}

/// The answer's head: what [`crate::http::h1`] writes as HTTP/1 lines, each field handed to
/// `out` as it is made (a lowercase name, none HTTP/2 forbids): straight into the HPACK
/// encoder, with no list of fields in between. Returns the head's size as nginx's
/// `$bytes_sent` counts it (the fields' names and values, uncompressed).
pub fn head(
    reply: &Reply,
    lc: &LocConf,
    length: Option<u64>,
    date: &[u8],
    out: &mut impl PutField,
) -> u64 {
    // What a field adds to the size: its name, its value, ": " (as nginx counts HTTP/1's).
    let len = |name: &[u8], value: &[u8]| (name.len() + value.len()) as u64 + 2;
    // A field made here is valid as it is (a lowercase name, a value without control
    // bytes). A text from elsewhere is checked for control bytes (a line break, a NUL: such
    // a field is dropped, as the `http` crate's checks did) unless the encoder sent the same
    // field before.
    let server = tokens(lc.server_tokens()).server().as_bytes();
    out.made(b"server", server);
    out.made(b"date", date);
    let mut size = 9 + len(b"server", server) + len(b"date", date);
    let ct = reply.content_type.as_deref().filter(|t| !t.is_empty());
    if let Some(ct) = ct.map(str::as_bytes) {
        if out.checked(b"content-type", ct, || clean(ct)) {
            size += len(b"content-type", ct);
        }
    }
    if let Some(n) = length {
        let mut digits = [0u8; 20];
        let n = decimal(n, &mut digits);
        out.made(b"content-length", n);
        size += len(b"content-length", n);
    }
    if let Some(lm) = &reply.last_modified {
        out.made(b"last-modified", lm);
        size += len(b"last-modified", lm);
    }
    if let Some(loc) = reply.location.as_deref().map(str::as_bytes) {
        if out.checked(b"location", loc, || clean(loc)) {
            size += len(b"location", loc);
        }
    }
    // The handler's and the filters' fields, their names lowercased; one HTTP/2 does not
    // carry is dropped.
    let mut other = |name: &[u8], value: &[u8]| {
        let fit = || !name.is_empty() && !forbidden(name) && clean(value);
        if with_lowered(name, |lower| out.checked(lower, value, fit)) {
            size += len(name, value);
        }
    };
    for (n, v) in &reply.headers {
        other(n.as_bytes(), v.as_bytes());
    }
    for (n, v) in &reply.extra {
        other(n.as_bytes(), v.as_bytes());
    }
    for (_, n, v) in &reply.raw_extra {
        other(n.as_bytes(), v);
    }
    size
}

/// Sends the answer's HEADERS ([`head`] encoded as it is made; `end`: no body follows).
/// Returns the stream's sending half and the head's size for the log, counted even when the
/// stream was gone.
pub fn send_head(
    respond: &mut SendResponse,
    reply: &Reply,
    lc: &LocConf,
    length: Option<u64>,
    date: &[u8],
    end: bool,
) -> (Result<SendStream, StreamError>, u64) {
    let mut size = None;
    let sent = respond.send_response(status(reply), end, |f| {
        size = Some(head(reply, lc, length, date, f));
    });
    let size = size.unwrap_or_else(|| head(reply, lc, length, date, &mut Nowhere));
    (sent, size)
}

/// Whether a value has no control byte but tabs: eight bytes at a time (a word with a byte
/// below 0x20 or a 0x7f is looked at byte by byte, for its tabs).
fn clean(value: &[u8]) -> bool {
    const ONES: u64 = u64::from_le_bytes([0x01; 8]);
    const HIGH: u64 = u64::from_le_bytes([0x80; 8]);
    // Whether a byte of `w` is below `n` (≤ 0x80).
    let below = |w: u64, n: u64| w.wrapping_sub(ONES * n) & !w & HIGH != 0;
    let bytewise = |b: &[u8]| !b.iter().any(|&b| (b < 0x20 && b != b'\t') || b == 0x7f);
    let fine = |c: &[u8]| {
        let w = u64::from_le_bytes(c.try_into().expect("eight bytes"));
        !(below(w, 0x20) || below(w ^ (ONES * 0x7f), 1)) || bytewise(c)
    };
    let Some(last) = value.len().checked_sub(8) else {
        // Four to seven bytes as one word of two overlapping halves (`bytes`).
        if let Some(last) = value.len().checked_sub(4) {
            let w = u32_at(value, 0) as u64 | (u32_at(value, last) as u64) << 32;
            return !(below(w, 0x20) || below(w ^ (ONES * 0x7f), 1)) || bytewise(value);
        }
        return bytewise(value);
    };
    let mut words = value.chunks_exact(8);
    // The bytes past the last whole word are checked with the eight that end the value.
    words.all(fine) && fine(&value[last..])
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

/// The bytes an answer's body sends when they are known before they go (`told`: the length
/// its head tells, [`told_length`]): a text's, a file's or its ranges', an upstream's
/// `Content-Length`, none for a length told without a body (`Body::Absent`). `None`: the
/// end is learnt as the body goes (a streamed upstream's, a filter's output).
pub fn known_length(body: &Body, told: Option<u64>) -> Option<u64> {
    match body {
        Body::Bytes(_)
        | Body::Chain(..)
        | Body::File { .. }
        | Body::Multipart { .. }
        | Body::Upstream(_) => told,
        Body::Absent(_) => told.map(|_| 0),
        _ => None,
    }
}

/// A stream's writing half: body bytes are gathered in `out` and go as DATA frames.
///
/// A body whose length is known ahead (a file, a fixed text, an upstream's `Content-Length`)
/// ends with its last DATA frame, as nginx's and h2o's do: the frame that takes `left` to 0
/// carries END_STREAM. Only a body whose end is learnt after its last bytes went (a
/// streamed upstream's, a compressed one) is ended by an empty DATA frame.
pub struct H2Sink<'a> {
    pub send: SendStream,
    pub out: BytesMut,
    pub info: &'a ConnInfo,
    pub send_timeout: Duration,
    /// `http2_chunk_size`: the largest DATA frame.
    pub chunk: usize,
    /// `limit_rate`: the pacing of the stream's answer (`None`: none).
    pub pacing: Option<Box<Pacing>>,
    /// The body's bytes still to send when its length is known (`None`: not known).
    left: Option<u64>,
    /// A DATA frame ended the stream.
    ended: bool,
}

impl<'a> H2Sink<'a> {
    /// The sink of an answer whose HEADERS went on `send`; `length`: the body's bytes, when
    /// known before they go.
    pub fn new(
        send: SendStream,
        info: &'a ConnInfo,
        lc: &LocConf,
        pacing: Option<Box<Pacing>>,
        length: Option<u64>,
    ) -> H2Sink<'a> {
        H2Sink {
            send,
            out: BytesMut::new(),
            info,
            send_timeout: lc.send_timeout(),
            chunk: lc.http2.chunk_size(),
            pacing,
            left: length,
            ended: false,
        }
    }

    /// Whether a DATA frame ended the stream with the body's last bytes (nothing is left to
    /// [`H2Sink::finish`]).
    pub fn ended(&self) -> bool {
        self.ended && self.out.is_empty()
    }

    /// Whether `n` more bytes end the body (its length known): they go with END_STREAM.
    fn ends_with(&self, n: usize) -> bool {
        n > 0 && self.left == Some(n as u64)
    }

    /// `n` bytes went (`end`: with END_STREAM).
    fn went(&mut self, n: usize, end: bool) {
        if let Some(left) = self.left.as_mut() {
            *left = left.saturating_sub(n as u64);
        }
        self.ended |= end;
    }

    /// Queues `data` as DATA frames, END_STREAM on the last when they end the body.
    fn data(&mut self, data: Bytes) -> io::Result<()> {
        let (n, end) = (data.len(), self.ends_with(data.len()));
        self.send
            .send_data(data, end)
            .map_err(|e| io::Error::from(Error::protocol(e)))?;
        self.went(n, end);
        Ok(())
    }

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

    /// Sends `n` bytes of `out`.
    fn send_out(&mut self, n: usize) -> io::Result<()> {
        let data = self.out.split_to(n).freeze();
        self.data(data)?;
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
            self.data(piece)?;
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
        // (Each wait skipped when it would not wait: a file sent at once, in the client's
        // window, is the common case.)
        if !self.out.is_empty() {
            self.flush_to(0).await?;
        }
        let allowed = match self.pacing {
            Some(_) => self.paced().await,
            None => usize::MAX,
        };
        let cap = match self.send.capacity() {
            0 => self.capacity(want.min(allowed)).await?,
            now => now,
        };
        let n = cap.min(want).min(allowed);
        let end = self.ends_with(n);
        let sent = self
            .send
            .send_file(file.as_fd(), offset, n, self.chunk, end)
            .map_err(|e| io::Error::from(Error::protocol(e)))??;
        self.went(sent, end && sent == n);
        if let Some(p) = self.pacing.as_deref_mut() {
            p.wrote(sent, Instant::now());
        }
        Ok(sent)
    }

    /// Sends everything gathered and ends the stream (an empty DATA frame with END_STREAM when
    /// nothing is left and no frame ended it yet).
    pub async fn finish(&mut self) -> io::Result<()> {
        if self.ended && self.out.is_empty() {
            return Ok(());
        }
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
            let data = self.out.split_to(n).freeze();
            self.send
                .send_data(data, last)
                .map_err(|e| io::Error::from(Error::protocol(e)))?;
            self.went(n, last);
            if let Some(p) = self.pacing.as_deref_mut() {
                p.wrote(n, Instant::now());
            }
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
            self.send_out(n)?;
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
            self.send_out(n)?;
        }
        Ok(())
    }

    async fn write_some(&mut self, data: &[u8]) -> io::Result<usize> {
        // (A wait that is dropped has sent nothing: the pause comes before the frame.)
        let allowed = self.paced().await;
        let cap = self.capacity(data.len().min(allowed)).await?;
        let n = cap.min(data.len()).min(self.chunk).min(allowed);
        self.data(Bytes::copy_from_slice(&data[..n]))?;
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
    fn fields_lowercased_and_forbidden_ones_known() {
        let lower = |name: &[u8]| with_lowered(name, <[u8]>::to_vec);
        assert_eq!(lower(b"server"), b"server");
        assert_eq!(lower(b"X-Thing"), b"x-thing");
        assert_eq!(lower(&[b'A'; 70]), [b'a'; 70]);
        // Word by word as byte by byte: every length, every byte at every place.
        for len in 0..=72 {
            for at in 0..len {
                for b in [
                    b'@', b'A', b'M', b'Z', b'[', b'`', b'a', b'z', b'-', 0xc1, 0xda, 0xff,
                ] {
                    let mut name = vec![b'x'; len];
                    name[at] = b;
                    let got = lower(&name);
                    assert_eq!(got, name.to_ascii_lowercase(), "{b:#x} at {at} of {len}");
                }
            }
        }
        for name in [
            &b"Connection"[..],
            b"keep-alive",
            b"Proxy-Connection",
            b"transfer-encoding",
            b"UPGRADE",
            b":status",
        ] {
            assert!(forbidden(name), "{}", String::from_utf8_lossy(name));
        }
        for name in [&b"etag"[..], b"connectionx", b"keep-alivf", b"vary"] {
            assert!(!forbidden(name));
        }
        assert!(clean(b"a\tb") && !clean(b"a\nb") && !clean(b"\x7f"));
        // Word by word as byte by byte, wherever the byte is.
        for len in [0, 3, 4, 5, 7, 8, 9, 16, 23, 40] {
            for at in 0..len {
                for b in [0u8, b'\t', b'\n', 0x1f, b' ', 0x7e, 0x7f, 0x80, 0xff] {
                    let mut v = vec![b'a'; len];
                    v[at] = b;
                    let want = b == b'\t' || (b >= 0x20 && b != 0x7f);
                    assert_eq!(clean(&v), want, "{b:#x} at {at} of {len}");
                }
            }
        }
        let mut digits = [0u8; 20];
        assert_eq!(decimal(0, &mut digits), b"0");
        assert_eq!(decimal(612, &mut digits), b"612");
        assert_eq!(decimal(u64::MAX, &mut digits), b"18446744073709551615");
    }
}
