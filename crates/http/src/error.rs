//! The codec's one error type: what went wrong with a request, and the answer nginx gives.
//!
//! Every error here comes from untrusted input (a client's or an upstream's bytes) and maps to an
//! HTTP status; the connection should be closed after the answer, because the framing of whatever
//! follows can no longer be trusted. The context reads like nginx's info-level log line
//! (`client sent invalid header line`), so the server can log it as is.

use std::fmt;

/// The class of a request error; each maps to one status code.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ErrorKind {
    /// Malformed request: 400 Bad Request.
    BadRequest,
    /// A header line or the whole head is over the `large_client_header_buffers` limits: 400 on
    /// the wire, nginx's internal 494 ("Request Header Or Cookie Too Large").
    HeaderTooLarge,
    /// The request line does not fit in one large header buffer: 414.
    UriTooLong,
    /// The body is over `client_max_body_size`: 413.
    PayloadTooLarge,
    /// An unknown `Transfer-Encoding`: 501.
    NotImplemented,
    /// An HTTP version above 1.x: 505.
    VersionNotSupported,
    /// `TRACE` or `CONNECT`, refused with the head as nginx does: 405.
    MethodNotAllowed,
}

/// A request error: a kind (hence a status) and a short reason for the error log.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Error {
    kind: ErrorKind,
    context: &'static str,
}

impl Error {
    /// An error of `kind`, with `context` in nginx's words (`client sent invalid method`).
    pub const fn new(kind: ErrorKind, context: &'static str) -> Error {
        Error { kind, context }
    }

    /// Shorthand for a 400 with `context`.
    pub const fn bad_request(context: &'static str) -> Error {
        Error::new(ErrorKind::BadRequest, context)
    }

    /// The class of the error.
    pub const fn kind(&self) -> ErrorKind {
        self.kind
    }

    /// Why, as nginx would log it.
    pub const fn context(&self) -> &'static str {
        self.context
    }

    /// nginx's internal code: the one `error_page` directives match and the one
    /// [`crate::status::error_page`] takes (494 for a too-large header, which goes out as 400).
    pub const fn code(&self) -> u16 {
        match self.kind {
            ErrorKind::BadRequest => 400,
            ErrorKind::HeaderTooLarge => 494,
            ErrorKind::UriTooLong => 414,
            ErrorKind::PayloadTooLarge => 413,
            ErrorKind::NotImplemented => 501,
            ErrorKind::VersionNotSupported => 505,
            ErrorKind::MethodNotAllowed => 405,
        }
    }

    /// The status that goes out on the wire.
    pub const fn status(&self) -> u16 {
        crate::status::wire_status(self.code())
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.context)
    }
}

impl std::error::Error for Error {}
