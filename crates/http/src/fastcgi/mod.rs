//! FastCGI 1.0 as nginx 1.22 speaks it to an application: the request's records out
//! ([`encode`]), the answer's records in ([`Decoder`]), with nginx's record layout, limits and
//! messages.
//!
//! Pure: bytes in, events out, no sockets. The upstream layer writes what [`encode`] builds,
//! feeds what it reads to a [`Decoder`] and acts on the [`Event`]s: the head
//! ([`crate::UpstreamHead`], the type the HTTP proxy consumes), stdout bytes for the body,
//! stderr text for the error log, the end of the request. Errors word nginx's log lines; all
//! are at level `error` and, before the head, nginx's 502.
//!
//! What nginx does that shapes this room (checked against nginx 1.22.1 with FastCGI servers
//! that send each case):
//!
//! - One request per connection at a time, request id 1; `fastcgi_keep_conn on` sets the
//!   `FCGI_KEEP_CONN` flag, and only then can the connection serve another request, after
//!   `END_REQUEST`. Without it the application closes the connection, and a close is a normal
//!   end of the answer even without `END_REQUEST` (nginx logs nothing).
//! - Records are padded to a multiple of 8 bytes with zeros; the body goes in `STDIN` records of
//!   at most 32 KiB. nginx puts all params in one record and refuses more than 65535 bytes of
//!   them (`[alert] fastcgi request record is too big: N`, 500); [`encode::params`] instead
//!   spreads them over several records, which the protocol allows and PHP-FPM reads, and
//!   [`encode::check_params_len`] gives nginx's refusal to a caller that wants it.
//! - The answer's record headers are checked byte by byte as they arrive: the version, then the
//!   type (only `STDOUT`, `STDERR` and `END_REQUEST` are taken), then the request id.
//! - `STDERR` text is logged piece by piece as it is read (`FastCGI sent in stderr: "..."`),
//!   trailing CR, LF, `.` and space trimmed, the first byte always kept.
//! - The head (the stdout up to the empty line) must end within the first `fastcgi_buffer_size`
//!   bytes of the answer, counting record headers, padding and any stderr before it; nginx
//!   starts counting afresh when everything read so far was stderr and has been logged.
//! - The body is the stdout after the head, up to `END_REQUEST`; with a `Content-Length`, bytes
//!   beyond it are dropped (`[warn] upstream sent more data than specified in "Content-Length"
//!   header`) and an `END_REQUEST` before it is `upstream prematurely closed FastCGI request`.

use std::fmt;

use bytes::Bytes;

use crate::log::{write_bytes, Level};
use crate::upstream::{UpstreamError, UpstreamHead};

mod decode;
pub mod encode;

pub use decode::Decoder;

/// The protocol version nginx speaks and accepts.
pub const VERSION: u8 = 1;
/// The request id nginx uses for every request.
pub const REQUEST_ID: u16 = 1;
/// Bytes in a record header.
pub const HEADER_LEN: usize = 8;

/// The headers nginx does not pass from a FastCGI answer to the client (unless
/// `fastcgi_pass_header` says so).
pub const HIDDEN_HEADERS: &[&str] = &[
    "Status",
    "X-Accel-Expires",
    "X-Accel-Redirect",
    "X-Accel-Limit-Rate",
    "X-Accel-Buffering",
    "X-Accel-Charset",
];

/// The FastCGI record types.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum RecordType {
    /// `FCGI_BEGIN_REQUEST`: the role and the keep-conn flag.
    BeginRequest = 1,
    /// `FCGI_ABORT_REQUEST`.
    AbortRequest = 2,
    /// `FCGI_END_REQUEST`: the application's exit status and the protocol status.
    EndRequest = 3,
    /// `FCGI_PARAMS`: the name-value pairs (CGI variables).
    Params = 4,
    /// `FCGI_STDIN`: the request body.
    Stdin = 5,
    /// `FCGI_STDOUT`: the answer.
    Stdout = 6,
    /// `FCGI_STDERR`: text for the error log.
    Stderr = 7,
    /// `FCGI_DATA`.
    Data = 8,
    /// `FCGI_GET_VALUES`.
    GetValues = 9,
    /// `FCGI_GET_VALUES_RESULT`.
    GetValuesResult = 10,
    /// `FCGI_UNKNOWN_TYPE`.
    UnknownType = 11,
}

/// What a [`Decoder`] found in the bytes it was given.
#[derive(Clone, Debug)]
pub enum Event {
    /// The answer's head, once; [`crate::cgi`] says how its status is decided. Its bytes are
    /// the stdout bytes of the head (not the records around them).
    Head(UpstreamHead),
    /// Body bytes (stdout after the head), never empty.
    Stdout(Bytes),
    /// A piece of stderr, for the error log (and `fastcgi_catch_stderr`).
    Stderr(Stderr),
    /// Stdout went past the head's `Content-Length`; the rest is dropped. Once per answer.
    Surplus(Surplus),
    /// `END_REQUEST`, with its padding read: the answer is complete.
    End(EndRequest),
}

/// The content of `END_REQUEST`. nginx reads neither field; they are here for the log and the
/// tests. Bytes the record does not have read as 0.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct EndRequest {
    /// The application's exit status.
    pub app_status: u32,
    /// `FCGI_REQUEST_COMPLETE` (0), `FCGI_CANT_MPX_CONN` (1), `FCGI_OVERLOADED` (2),
    /// `FCGI_UNKNOWN_ROLE` (3).
    pub protocol_status: u8,
}

/// A piece of an application's stderr, as read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Stderr(Bytes);

impl Stderr {
    /// The bytes as the application sent them (what `fastcgi_catch_stderr` looks in).
    pub fn bytes(&self) -> &Bytes {
        &self.0
    }

    /// What nginx logs: trailing CR, LF, `.` and space left out, but never the first byte.
    pub fn text(&self) -> &[u8] {
        let b = &self.0[..];
        let kept = b
            .iter()
            .rposition(|c| !matches!(c, b'\r' | b'\n' | b'.' | b' '))
            .map_or(1, |i| i + 1);
        &b[..kept.min(b.len())]
    }

    /// nginx logs it at `error`.
    pub fn level(&self) -> Level {
        Level::Error
    }
}

impl fmt::Display for Stderr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("FastCGI sent in stderr: \"")?;
        write_bytes(f, self.text())?;
        f.write_str("\"")
    }
}

/// Stdout past the head's `Content-Length`: nginx's `warn` line.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Surplus;

impl Surplus {
    /// nginx logs it at `warn`.
    pub fn level(&self) -> Level {
        Level::Warn
    }
}

impl fmt::Display for Surplus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("upstream sent more data than specified in \"Content-Length\" header")
    }
}

/// Why an answer was refused. Each reads like nginx's error-log line (level `error`); before
/// the head the client gets 502 (`fastcgi_next_upstream` may try another server first), after
/// it the answer is cut short and both connections are closed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FastcgiError {
    /// A record header's version byte is not 1.
    UnsupportedVersion(u8),
    /// A record type other than `STDOUT`, `STDERR` and `END_REQUEST`.
    InvalidRecordType(u8),
    /// The request id's high byte is not 0.
    UnexpectedRequestIdHigh(u8),
    /// The request id's low byte is not 1.
    UnexpectedRequestIdLow(u8),
    /// A record that may not come yet: `END_REQUEST` before the head is over.
    UnexpectedRecord(u8),
    /// An empty `STDOUT` record (the end of stdout) before the head is over.
    PrematureStdout,
    /// `END_REQUEST` before the head's `Content-Length` worth of body.
    PrematureRequest,
    /// The connection closed before the head was over, or (with keep-conn) before
    /// `END_REQUEST`.
    PrematureClose,
    /// The head does not parse: too big, a bad line, a bad `Status`.
    Head(UpstreamError),
}

impl FastcgiError {
    /// nginx logs all of them at `error`.
    pub fn level(&self) -> Level {
        Level::Error
    }
}

impl fmt::Display for FastcgiError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FastcgiError::UnsupportedVersion(v) => {
                write!(f, "upstream sent unsupported FastCGI protocol version: {v}")
            }
            FastcgiError::InvalidRecordType(t) => {
                write!(f, "upstream sent invalid FastCGI record type: {t}")
            }
            FastcgiError::UnexpectedRequestIdHigh(b) => {
                write!(
                    f,
                    "upstream sent unexpected FastCGI request id high byte: {b}"
                )
            }
            FastcgiError::UnexpectedRequestIdLow(b) => {
                write!(
                    f,
                    "upstream sent unexpected FastCGI request id low byte: {b}"
                )
            }
            FastcgiError::UnexpectedRecord(t) => {
                write!(f, "upstream sent unexpected FastCGI record: {t}")
            }
            FastcgiError::PrematureStdout => {
                f.write_str("upstream prematurely closed FastCGI stdout")
            }
            FastcgiError::PrematureRequest => {
                f.write_str("upstream prematurely closed FastCGI request")
            }
            FastcgiError::PrematureClose => f.write_str("upstream prematurely closed connection"),
            FastcgiError::Head(e) => e.fmt(f),
        }
    }
}

impl std::error::Error for FastcgiError {}

impl From<UpstreamError> for FastcgiError {
    fn from(e: UpstreamError) -> FastcgiError {
        FastcgiError::Head(e)
    }
}

#[cfg(test)]
mod tests;
