//! Request bodies: how one is framed (none, `Content-Length`, chunked), and the incremental
//! decoders that cut it out of a connection's buffer.
//!
//! Framing is where request smuggling lives, so every ambiguity is a 400 and the connection is
//! closed after the answer: `Content-Length` with `Transfer-Encoding`, a repeated
//! `Content-Length` (even an identical one), a length that is not plain digits, `Transfer-Encoding`
//! on HTTP/1.0. A coding other than exactly `chunked` is 501, as nginx answers. The chunked
//! decoder is strict where nginx's grammar is loose without a reason: hex digits only (no sign,
//! no `0x`, no space before), only whitespace between the size and `;`, no control characters
//! in extensions or trailers, the line end right after each chunk's data. Like nginx, it takes a
//! bare LF as a line end wherever CRLF is expected.
//!
//! Decoders never copy body bytes: [`ChunkedDecoder::decode`] hands back slices of its input,
//! the `_buf` variants split `Bytes` off the buffer. Trailer fields are read and dropped, as nginx
//! does.
//!
//! An upstream's chunked response is read with [`ChunkedDecoder::for_upstream`], which takes
//! what nginx's `ngx_http_parse_chunked` takes: a bare LF wherever CRLF is expected, and any bytes
//! in chunk extensions and trailers (the [`crate::upstream`] room wraps it).

use bytes::{Bytes, BytesMut};

use crate::error::{Error, ErrorKind};
use crate::request::Version;

/// How a request body is delimited.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BodyKind {
    /// No body.
    Empty,
    /// Exactly this many bytes (`Content-Length`).
    Length(u64),
    /// `Transfer-Encoding: chunked`.
    Chunked,
}

impl BodyKind {
    /// Checks a declared length against `client_max_body_size` (`max`, 0 = unlimited), as nginx
    /// does before reading any of the body: 413 if over. A chunked body is checked while decoded.
    pub fn check_max_size(&self, max: u64) -> Result<(), Error> {
        match *self {
            BodyKind::Length(n) if max != 0 && n > max => Err(too_large()),
            _ => Ok(()),
        }
    }
}

fn too_large() -> Error {
    Error::new(
        ErrorKind::PayloadTooLarge,
        "client intended to send too large body",
    )
}

/// The largest body length accepted: nginx's `off_t` maximum.
const MAX_LENGTH: u64 = i64::MAX as u64;

/// Parses a `Content-Length` value: ASCII digits only, at most `i64::MAX`.
pub fn parse_content_length(v: &[u8]) -> Option<u64> {
    if v.is_empty() || v.len() > 19 {
        return None;
    }
    let mut n: u64 = 0;
    for &b in v {
        if !b.is_ascii_digit() {
            return None;
        }
        n = n.checked_mul(10)?.checked_add(u64::from(b - b'0'))?;
    }
    (n <= MAX_LENGTH).then_some(n)
}

/// Decides the framing from the (single) `Content-Length` and `Transfer-Encoding` values.
pub(crate) fn framing(
    version: Version,
    content_length: Option<&[u8]>,
    transfer_encoding: Option<&[u8]>,
) -> Result<BodyKind, Error> {
    let length = match content_length {
        Some(v) => Some(parse_content_length(v).ok_or(Error::bad_request(
            "client sent invalid \"Content-Length\" header",
        ))?),
        None => None,
    };
    if let Some(te) = transfer_encoding {
        if version < Version::Http11 {
            return Err(Error::bad_request(
                "client sent HTTP/1.0 request with \"Transfer-Encoding\" header",
            ));
        }
        if length.is_some() {
            return Err(Error::bad_request(
                "client sent \"Content-Length\" and \"Transfer-Encoding\" headers at the same time",
            ));
        }
        if !te.eq_ignore_ascii_case(b"chunked") {
            return Err(Error::new(
                ErrorKind::NotImplemented,
                "client sent unknown \"Transfer-Encoding\"",
            ));
        }
        return Ok(BodyKind::Chunked);
    }
    Ok(match length {
        Some(0) | None => BodyKind::Empty,
        Some(n) => BodyKind::Length(n),
    })
}

/// What a decoder found in the bytes it was given (borrowed form).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Chunk<'a> {
    /// Body bytes.
    Data(&'a [u8]),
    /// All input was consumed (framing only); feed more.
    NeedMore,
    /// The body is complete; bytes after it belong to the next request.
    Done,
}

/// What a decoder found in a buffer (owned form, split off the buffer).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum BodyChunk {
    /// Body bytes.
    Data(Bytes),
    /// The buffer holds no body bytes yet; read more.
    NeedMore,
    /// The body is complete; the buffer now starts at the next request.
    Done,
}

/// Cuts a `Content-Length` body out of the input.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LengthDecoder {
    remaining: u64,
}

impl LengthDecoder {
    /// A decoder for a body of `len` bytes.
    pub fn new(len: u64) -> LengthDecoder {
        LengthDecoder { remaining: len }
    }

    /// Bytes still expected.
    pub fn remaining(&self) -> u64 {
        self.remaining
    }

    /// Whether the whole body has been taken.
    pub fn is_done(&self) -> bool {
        self.remaining == 0
    }

    /// Takes body bytes from the front of `input`; the slice's length is what was consumed.
    pub fn decode<'a>(&mut self, input: &'a [u8]) -> &'a [u8] {
        let n = usize::try_from(self.remaining)
            .unwrap_or(usize::MAX)
            .min(input.len());
        self.remaining -= n as u64;
        &input[..n]
    }

    /// Splits body bytes off the front of `buf`.
    pub fn decode_buf(&mut self, buf: &mut BytesMut) -> BodyChunk {
        if self.is_done() {
            return BodyChunk::Done;
        }
        let n = self.decode(buf).len();
        if n == 0 {
            BodyChunk::NeedMore
        } else {
            BodyChunk::Data(buf.split_to(n).freeze())
        }
    }
}

/// The largest chunk size: nginx refuses a size past `off_t`'s maximum over 16 (whatever
/// `client_max_body_size` says), wherever it reads chunk sizes.
const MAX_CHUNK_SIZE: u64 = MAX_LENGTH >> 4;

/// Longest chunk-size line (size and extensions) accepted.
const MAX_SIZE_LINE: usize = 4096;
/// Most trailer bytes accepted.
const MAX_TRAILERS: usize = 8192;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    /// Expecting the first hex digit of a size.
    SizeStart,
    /// In the hex digits.
    Size,
    /// Whitespace after the digits, before `;` or CR.
    SizeWs,
    /// In a chunk extension.
    Ext,
    /// Expecting the LF of the size line.
    SizeLf,
    /// In chunk data.
    Data,
    /// Expecting the CR after chunk data.
    DataCr,
    /// Expecting the LF after chunk data.
    DataLf,
    /// At the start of a trailer line (or of the final CRLF).
    TrailerStart,
    /// In a trailer line.
    Trailer,
    /// Expecting the LF of a trailer line.
    TrailerLf,
    /// Expecting the LF of the final CRLF.
    EndLf,
    /// The body is over.
    Done,
    /// An error was returned; it is returned again.
    Failed(Error),
}

/// Incremental, strict decoder of a chunked body.
#[derive(Clone, Debug)]
pub struct ChunkedDecoder {
    state: State,
    /// Size of the chunk being read, then bytes of it still to come.
    size: u64,
    /// Length of the current size line, or of the trailers so far.
    line_len: usize,
    /// Body bytes announced so far (for `client_max_body_size`).
    total: u64,
    max_size: u64,
    /// nginx's own chunk grammar (upstream responses): bare LF ends lines, extensions and
    /// trailers take any byte.
    lenient: bool,
}

impl Default for ChunkedDecoder {
    fn default() -> ChunkedDecoder {
        ChunkedDecoder::new()
    }
}

impl ChunkedDecoder {
    /// A decoder with no size limit.
    pub fn new() -> ChunkedDecoder {
        ChunkedDecoder::with_max_size(0)
    }

    /// A decoder that fails with 413 as soon as a chunk size would take the body over `max`
    /// bytes (`client_max_body_size`; 0 = unlimited).
    pub fn with_max_size(max: u64) -> ChunkedDecoder {
        ChunkedDecoder {
            state: State::SizeStart,
            size: 0,
            line_len: 0,
            total: 0,
            max_size: max,
            lenient: false,
        }
    }

    /// A decoder for a chunked response from an upstream, with the grammar of nginx's
    /// `ngx_http_parse_chunked`: LF alone ends a size line, a chunk's data or a trailer line,
    /// whitespace after the size starts an extension, and extensions and trailers take any byte.
    /// The line-length bounds of the strict decoder still apply (nginx's bound is its buffer).
    pub fn for_upstream() -> ChunkedDecoder {
        ChunkedDecoder {
            lenient: true,
            ..ChunkedDecoder::new()
        }
    }

    /// Whether the last chunk and the trailers have been read.
    pub fn is_done(&self) -> bool {
        self.state == State::Done
    }

    /// Body bytes announced by the chunk sizes read so far.
    pub fn received(&self) -> u64 {
        self.total
    }

    /// After a 413: the body bytes announced before the chunk that went over the limit, and
    /// that chunk's size (nginx's `too large chunked body: N+M bytes`).
    pub fn oversize(&self) -> (u64, u64) {
        (self.total.saturating_sub(self.size), self.size)
    }

    /// Reads from the front of `input`. Returns how many bytes were consumed and what they
    /// were: some data (framing before it consumed too), `NeedMore` (everything consumed), or
    /// `Done` (bytes after the body are left unconsumed).
    pub fn decode<'a>(&mut self, input: &'a [u8]) -> Result<(usize, Chunk<'a>), Error> {
        let (consumed, data) = self.step(input)?;
        Ok(match data {
            Some((start, end)) => (consumed, Chunk::Data(&input[start..end])),
            None if self.state == State::Done => (consumed, Chunk::Done),
            None => (consumed, Chunk::NeedMore),
        })
    }

    /// Like [`ChunkedDecoder::decode`] on a buffer: framing is dropped from `buf`, data split
    /// off it.
    pub fn decode_buf(&mut self, buf: &mut BytesMut) -> Result<BodyChunk, Error> {
        let (consumed, data) = self.step(buf)?;
        match data {
            Some((start, end)) => {
                let _ = buf.split_to(start);
                let data = buf.split_to(end - start).freeze();
                debug_assert_eq!(consumed, end);
                Ok(BodyChunk::Data(data))
            }
            None => {
                let _ = buf.split_to(consumed);
                Ok(if self.state == State::Done {
                    BodyChunk::Done
                } else {
                    BodyChunk::NeedMore
                })
            }
        }
    }

    fn fail(&mut self, e: Error) -> Result<(usize, Option<(usize, usize)>), Error> {
        self.state = State::Failed(e);
        Err(e)
    }

    /// The size line is over: on to the data, or to the trailers after the last chunk.
    fn end_size_line(&mut self, invalid: Error) -> Result<(), Error> {
        self.line_len = 0;
        if self.size == 0 {
            self.state = State::TrailerStart;
            return Ok(());
        }
        self.total = self.total.saturating_add(self.size);
        // The limit first: nginx compares each size with what the limit leaves, so a size
        // past both the limit and off_t is a 413.
        if self.max_size != 0 && self.total > self.max_size {
            self.fail(too_large())?;
        }
        if self.total > MAX_LENGTH {
            self.fail(invalid)?;
        }
        self.state = State::Data;
        Ok(())
    }

    /// The state machine: (consumed, data range within input).
    fn step(&mut self, input: &[u8]) -> Result<(usize, Option<(usize, usize)>), Error> {
        let invalid = Error::bad_request("client sent invalid chunked body");
        let mut i = 0;
        while i < input.len() {
            let b = input[i];
            match self.state {
                State::Failed(e) => return Err(e),
                State::Done => return Ok((i, None)),
                State::Data => {
                    let avail = input.len() - i;
                    let n = usize::try_from(self.size).unwrap_or(usize::MAX).min(avail);
                    self.size -= n as u64;
                    if self.size == 0 {
                        self.state = State::DataCr;
                    }
                    return Ok((i + n, Some((i, i + n))));
                }
                State::SizeStart | State::Size => {
                    // nginx checks the size before each byte after its first digit, the one
                    // that ends it included: the largest size it takes is 0x7ffffffffffffff.
                    if self.state == State::Size && self.size > MAX_CHUNK_SIZE {
                        return self.fail(invalid);
                    }
                    if let Some(d) = hex_digit(b) {
                        self.size = self.size << 4 | u64::from(d);
                        // And a size that would overflow its count of bytes still to come
                        // (nginx's `ctx->length`) is refused at once, not at the next byte.
                        if self.size > MAX_LENGTH - 5 {
                            return self.fail(invalid);
                        }
                        self.state = State::Size;
                    } else if self.state == State::SizeStart {
                        return self.fail(invalid);
                    } else {
                        match b {
                            b'\r' => self.state = State::SizeLf,
                            b'\n' => self.end_size_line(invalid)?,
                            b';' => self.state = State::Ext,
                            b' ' | b'\t' if self.lenient => self.state = State::Ext,
                            b' ' | b'\t' => self.state = State::SizeWs,
                            _ => return self.fail(invalid),
                        }
                    }
                    if self.state != State::Data && self.state != State::TrailerStart {
                        self.line_len += 1;
                    }
                }
                State::SizeWs => {
                    match b {
                        b' ' | b'\t' => {}
                        b'\r' => self.state = State::SizeLf,
                        b'\n' => {
                            self.end_size_line(invalid)?;
                            i += 1;
                            continue;
                        }
                        b';' => self.state = State::Ext,
                        _ => return self.fail(invalid),
                    }
                    self.line_len += 1;
                }
                State::Ext => {
                    match b {
                        b'\r' => self.state = State::SizeLf,
                        b'\n' => self.end_size_line(invalid)?,
                        _ if self.lenient => {}
                        b'\t' => {}
                        _ if b < 0x20 || b == 0x7f => return self.fail(invalid),
                        _ => {}
                    }
                    if self.state == State::Ext || self.state == State::SizeLf {
                        self.line_len += 1;
                    }
                }
                State::SizeLf => {
                    if b != b'\n' {
                        return self.fail(invalid);
                    }
                    self.end_size_line(invalid)?;
                }
                State::DataCr => match b {
                    b'\r' => self.state = State::DataLf,
                    b'\n' => self.state = State::SizeStart,
                    _ => return self.fail(invalid),
                },
                State::DataLf => {
                    if b != b'\n' {
                        return self.fail(invalid);
                    }
                    self.state = State::SizeStart;
                }
                State::TrailerStart => {
                    self.state = match b {
                        b'\r' => State::EndLf,
                        b'\n' => {
                            self.state = State::Done;
                            return Ok((i + 1, None));
                        }
                        b'\0' if self.lenient => State::Trailer,
                        b'\0' => return self.fail(invalid),
                        _ => State::Trailer,
                    };
                    self.line_len += 1;
                }
                State::Trailer => {
                    match b {
                        b'\r' => self.state = State::TrailerLf,
                        b'\n' => self.state = State::TrailerStart,
                        b'\0' if self.lenient => {}
                        b'\0' => return self.fail(invalid),
                        _ => {}
                    }
                    self.line_len += 1;
                }
                State::TrailerLf => {
                    if b != b'\n' {
                        return self.fail(invalid);
                    }
                    self.state = State::TrailerStart;
                }
                State::EndLf => {
                    if b != b'\n' {
                        return self.fail(invalid);
                    }
                    self.state = State::Done;
                    return Ok((i + 1, None));
                }
            }
            let limit = match self.state {
                State::Size | State::SizeWs | State::Ext | State::SizeLf => MAX_SIZE_LINE,
                _ => MAX_TRAILERS,
            };
            if self.line_len > limit {
                return self.fail(invalid);
            }
            i += 1;
        }
        match self.state {
            State::Failed(e) => Err(e),
            _ => Ok((i, None)),
        }
    }
}

fn hex_digit(b: u8) -> Option<u8> {
    match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        b'A'..=b'F' => Some(b - b'A' + 10),
        _ => None,
    }
}

/// Either decoder, chosen from a request's [`BodyKind`].
#[derive(Clone, Debug)]
pub enum BodyDecoder {
    /// A `Content-Length` body (or an empty one: length 0).
    Length(LengthDecoder),
    /// A chunked body.
    Chunked(ChunkedDecoder),
}

impl BodyDecoder {
    /// The decoder for `kind`, enforcing `client_max_body_size` (`max`, 0 = unlimited): a
    /// declared length over it is refused here with 413, before any body byte is read.
    pub fn new(kind: BodyKind, max: u64) -> Result<BodyDecoder, Error> {
        kind.check_max_size(max)?;
        Ok(match kind {
            BodyKind::Empty => BodyDecoder::Length(LengthDecoder::new(0)),
            BodyKind::Length(n) => BodyDecoder::Length(LengthDecoder::new(n)),
            BodyKind::Chunked => BodyDecoder::Chunked(ChunkedDecoder::with_max_size(max)),
        })
    }

    /// Whether the body is complete.
    pub fn is_done(&self) -> bool {
        match self {
            BodyDecoder::Length(d) => d.is_done(),
            BodyDecoder::Chunked(d) => d.is_done(),
        }
    }

    /// After a 413 of a chunked body: what came before the chunk that went over the limit,
    /// and its size (see [`ChunkedDecoder::oversize`]); `None` for a length.
    pub fn oversize(&self) -> Option<(u64, u64)> {
        match self {
            BodyDecoder::Length(_) => None,
            BodyDecoder::Chunked(d) => Some(d.oversize()),
        }
    }

    /// Takes the next piece of body from the front of `buf`.
    pub fn decode_buf(&mut self, buf: &mut BytesMut) -> Result<BodyChunk, Error> {
        match self {
            BodyDecoder::Length(d) => Ok(d.decode_buf(buf)),
            BodyDecoder::Chunked(d) => d.decode_buf(buf),
        }
    }
}

#[cfg(test)]
#[path = "body_tests.rs"]
mod tests;
