//! memcached's text protocol as nginx 1.22's `memcached_pass` speaks it: one `get KEY\r\n`, and
//! the answer `VALUE KEY FLAGS BYTES\r\n`, the value, `\r\nEND\r\n` (or `END\r\n` alone: not
//! found, a 404), checked as nginx checks it and with nginx's messages.
//!
//! What nginx does (checked against nginx 1.22.1 with a memcached server that sends each
//! case): the key (`$memcached_key`) is sent with space, `%` and the control bytes 0x00-0x1f
//! written `%XX` (upper-case hex), everything else as is; an empty key is an error before
//! anything is sent (500). The `VALUE` line must end with CR LF and name the key as sent,
//! followed by one space; the flags are only read (and must be a number) when
//! `memcached_gzip_flag` is set, and any of its bits in them means `Content-Encoding: gzip`;
//! the length is the rest of the line and must be a number. Any other first line, `ERROR` and
//! `SERVER_ERROR ...` included, is `memcached sent invalid response` (502). After the value,
//! anything but exactly `\r\nEND\r\n` is `memcached sent invalid trailer`: the client has its
//! body by then, so only the log and the upstream connection suffer.
//!
//! nginx logs every one of these with the action ` while reading response header from
//! upstream`, the trailer's too. Pure: bytes in, values out, no sockets.

use std::fmt;

use bytes::{Bytes, BytesMut};

use crate::body::{parse_content_length, BodyChunk};
use crate::log::{write_bytes, Level};

/// What follows the value.
const TRAILER: &[u8] = b"\r\nEND\r\n";

/// `key` as nginx sends it: space, `%` and bytes below 0x20 as `%XX`.
pub fn escape_key(key: &[u8]) -> Vec<u8> {
    const HEX: &[u8; 16] = b"0123456789ABCDEF";
    let mut out = Vec::with_capacity(key.len());
    for &b in key {
        if b <= 0x20 || b == b'%' {
            out.extend_from_slice(&[b'%', HEX[usize::from(b >> 4)], HEX[usize::from(b & 15)]]);
        } else {
            out.push(b);
        }
    }
    out
}

/// A `get` to send, and the key as sent (the answer must name it).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Request {
    /// `get KEY\r\n`.
    pub bytes: Bytes,
    /// The escaped key.
    pub key: Vec<u8>,
}

/// The `get` for `key` (the value of `$memcached_key`, not yet escaped). An empty key is
/// [`MemcachedError::KeyNotSet`].
pub fn request(key: &[u8]) -> Result<Request, MemcachedError> {
    if key.is_empty() {
        return Err(MemcachedError::KeyNotSet);
    }
    let key = escape_key(key);
    let bytes = [&b"get "[..], &key, b"\r\n"].concat();
    Ok(Request {
        bytes: Bytes::from(bytes),
        key,
    })
}

/// The first line of the answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Answer {
    /// `VALUE`: a 200 with `Content-Length` (and `Content-Encoding: gzip` if `gzip`); the value
    /// follows, read with [`Decoder::decode_body`].
    Found(Value),
    /// `END`: a 404; nginx logs [`NotFound`] at `info`.
    NotFound(NotFound),
}

/// What a `VALUE` line says.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Value {
    /// The flags, if they are a number (nginx reads them only with `memcached_gzip_flag`).
    pub flags: Option<u64>,
    /// A bit of `memcached_gzip_flag` is set in the flags.
    pub gzip: bool,
    /// The value's length.
    pub length: u64,
}

/// The key was not in memcached: nginx's `info` line.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct NotFound {
    /// The key as sent.
    pub key: Vec<u8>,
}

impl NotFound {
    /// nginx logs it at `info`.
    pub fn level(&self) -> Level {
        Level::Info
    }
}

impl fmt::Display for NotFound {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("key: \"")?;
        write_bytes(f, &self.key)?;
        f.write_str("\" was not found by memcached")
    }
}

/// Why a request or an answer failed, in nginx's words (level `error`). Before the value, the
/// client gets 502 ([`MemcachedError::KeyNotSet`]: 500); after it, only the log and the
/// upstream connection know.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum MemcachedError {
    /// `$memcached_key` is empty or not set: nothing was sent (500).
    KeyNotSet,
    /// The `VALUE` line names another key.
    InvalidKey {
        /// The line, without CR LF.
        line: Vec<u8>,
        /// The key as sent.
        key: Vec<u8>,
    },
    /// The flags are not a number (checked with `memcached_gzip_flag` only).
    InvalidFlags {
        /// The line, without CR LF.
        line: Vec<u8>,
        /// The key as sent.
        key: Vec<u8>,
    },
    /// The length is not a number.
    InvalidLength {
        /// The line, without CR LF.
        line: Vec<u8>,
        /// The key as sent.
        key: Vec<u8>,
    },
    /// A first line that is neither `VALUE ...` nor `END`, or does not end with CR LF.
    InvalidResponse {
        /// The line, without its LF (and without CR when it has one).
        line: Vec<u8>,
    },
    /// Anything but `\r\nEND\r\n` after the value.
    InvalidTrailer,
    /// The first line does not end within the buffer (`memcached_buffer_size`).
    TooBigHeader,
    /// The connection closed before the answer was over.
    PrematureClose,
}

impl MemcachedError {
    /// nginx logs all of them at `error`.
    pub fn level(&self) -> Level {
        Level::Error
    }

    /// The status the client gets when the error comes before the value: 500 when nothing was
    /// sent, else 502.
    pub fn status(&self) -> u16 {
        match self {
            MemcachedError::KeyNotSet => 500,
            _ => 502,
        }
    }
}

impl fmt::Display for MemcachedError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let with_key = |f: &mut fmt::Formatter<'_>, what: &str, line: &[u8], key: &[u8]| {
            write!(f, "memcached sent invalid {what} in response \"")?;
            write_bytes(f, line)?;
            f.write_str("\" for key \"")?;
            write_bytes(f, key)?;
            f.write_str("\"")
        };
        match self {
            MemcachedError::KeyNotSet => f.write_str("the \"$memcached_key\" variable is not set"),
            MemcachedError::InvalidKey { line, key } => with_key(f, "key", line, key),
            MemcachedError::InvalidFlags { line, key } => with_key(f, "flags", line, key),
            MemcachedError::InvalidLength { line, key } => with_key(f, "length", line, key),
            MemcachedError::InvalidResponse { line } => {
                f.write_str("memcached sent invalid response: \"")?;
                write_bytes(f, line)?;
                f.write_str("\"")
            }
            MemcachedError::InvalidTrailer => f.write_str("memcached sent invalid trailer"),
            MemcachedError::TooBigHeader => f.write_str("upstream sent too big header"),
            MemcachedError::PrematureClose => f.write_str("upstream prematurely closed connection"),
        }
    }
}

impl std::error::Error for MemcachedError {}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    /// Before the first line.
    Head,
    /// In the value: this many bytes to come.
    Value(u64),
    /// In the trailer: this many of its bytes seen.
    Trailer(usize),
    /// The answer is over (the trailer, or `END`).
    Done,
    /// An error was returned.
    Failed,
}

/// Reads one answer: [`Decoder::decode_head`] until it has the first line, then
/// [`Decoder::decode_body`] until [`BodyChunk::Done`].
#[derive(Clone, Debug)]
pub struct Decoder {
    key: Vec<u8>,
    gzip_flag: u64,
    state: State,
}

impl Decoder {
    /// A decoder for the answer to `request`; `gzip_flag` is `memcached_gzip_flag` (0: off).
    pub fn new(request: &Request, gzip_flag: u64) -> Decoder {
        Decoder {
            key: request.key.clone(),
            gzip_flag,
            state: State::Head,
        }
    }

    /// Looks for the first line in the first `max` bytes of `buf` (`memcached_buffer_size`);
    /// on success it is taken off `buf`, which then starts with the value (after `END`: with
    /// whatever followed, not part of the answer). `Ok(None)`: read more.
    pub fn decode_head(
        &mut self,
        buf: &mut BytesMut,
        max: usize,
    ) -> Result<Option<Answer>, MemcachedError> {
        if self.state != State::Head {
            return Err(MemcachedError::InvalidResponse { line: Vec::new() });
        }
        let seen = &buf[..buf.len().min(max)];
        let Some(lf) = memchr::memchr(b'\n', seen) else {
            if buf.len() >= max {
                self.state = State::Failed;
                return Err(MemcachedError::TooBigHeader);
            }
            return Ok(None);
        };
        let answer = self.first_line(&seen[..lf]);
        match &answer {
            Ok(Answer::Found(v)) => {
                let _ = buf.split_to(lf + 1);
                self.state = if v.length == 0 {
                    State::Trailer(0)
                } else {
                    State::Value(v.length)
                };
            }
            Ok(Answer::NotFound(_)) => {
                let _ = buf.split_to(lf + 1);
                self.state = State::Done;
            }
            Err(_) => self.state = State::Failed,
        }
        answer.map(Some)
    }

    /// The first line, without its LF.
    fn first_line(&self, line: &[u8]) -> Result<Answer, MemcachedError> {
        let Some(line) = line.strip_suffix(b"\r") else {
            return Err(MemcachedError::InvalidResponse {
                line: line.to_vec(),
            });
        };
        let invalid = || MemcachedError::InvalidResponse {
            line: line.to_vec(),
        };
        if line == b"END" {
            return Ok(Answer::NotFound(NotFound {
                key: self.key.clone(),
            }));
        }
        let Some(rest) = line.strip_prefix(b"VALUE ") else {
            return Err(invalid());
        };
        let Some(rest) = rest.strip_prefix(&self.key[..]) else {
            return Err(MemcachedError::InvalidKey {
                line: line.to_vec(),
                key: self.key.clone(),
            });
        };
        let Some(rest) = rest.strip_prefix(b" ") else {
            return Err(invalid());
        };
        let Some(space) = memchr::memchr(b' ', rest) else {
            return Err(invalid());
        };
        let flags = parse_content_length(&rest[..space]);
        if self.gzip_flag != 0 && flags.is_none() {
            return Err(MemcachedError::InvalidFlags {
                line: line.to_vec(),
                key: self.key.clone(),
            });
        }
        let Some(length) = parse_content_length(&rest[space + 1..]) else {
            return Err(MemcachedError::InvalidLength {
                line: line.to_vec(),
                key: self.key.clone(),
            });
        };
        Ok(Answer::Found(Value {
            flags,
            gzip: flags.is_some_and(|f| f & self.gzip_flag != 0),
            length,
        }))
    }

    /// The next piece of the value from the front of `buf`, then the trailer's check:
    /// [`BodyChunk::Done`] once `\r\nEND\r\n` has come with nothing after it in `buf`.
    pub fn decode_body(&mut self, buf: &mut BytesMut) -> Result<BodyChunk, MemcachedError> {
        match self.state {
            State::Value(left) => {
                if buf.is_empty() {
                    return Ok(BodyChunk::NeedMore);
                }
                let n = usize::try_from(left).unwrap_or(usize::MAX).min(buf.len());
                let left = left - n as u64;
                self.state = if left == 0 {
                    State::Trailer(0)
                } else {
                    State::Value(left)
                };
                Ok(BodyChunk::Data(buf.split_to(n).freeze()))
            }
            State::Trailer(seen) => {
                let want = &TRAILER[seen..];
                let n = want.len().min(buf.len());
                if buf[..n] != want[..n] || buf.len() > want.len() {
                    self.state = State::Failed;
                    return Err(MemcachedError::InvalidTrailer);
                }
                let _ = buf.split_to(n);
                if seen + n == TRAILER.len() {
                    self.state = State::Done;
                    Ok(BodyChunk::Done)
                } else {
                    self.state = State::Trailer(seen + n);
                    Ok(BodyChunk::NeedMore)
                }
            }
            State::Done => Ok(BodyChunk::Done),
            State::Head | State::Failed => Err(MemcachedError::InvalidTrailer),
        }
    }

    /// Whether the answer is over: the connection may serve another `get`.
    pub fn is_done(&self) -> bool {
        self.state == State::Done
    }

    /// The connection closed: fine once the answer is over.
    pub fn eof(&self) -> Result<(), MemcachedError> {
        match self.state {
            State::Done => Ok(()),
            _ => Err(MemcachedError::PrematureClose),
        }
    }
}

#[cfg(test)]
#[path = "memcached_tests.rs"]
mod tests;
