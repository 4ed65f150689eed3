//! Why a request was refused as malformed (RFC 9113, 8.1.1): what the checks of `request.rs`
//! and the body's count found, with what the log line names (the field, the value, the
//! counts). Its `Display` is nginx's text for the case (nginx 1.22's `ngx_http_v2.c`), or a
//! line in its style where nginx lets the request through; the caller adds the context
//! ("while reading client request headers, client: ..."). Made only on the error path: the
//! copies of a name or value cost nothing to a well-formed request.

use std::fmt;

/// A malformed request, its trailers or its body (the stream is reset with PROTOCOL_ERROR).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Malformed {
    /// A name with uppercase, controls, space, a colon or non-ASCII, or empty.
    InvalidName(Box<[u8]>),
    /// A value with NUL, CR or LF, or (RFC 9113, 8.2.1) space or tab at either end; `te`
    /// other than `trailers`.
    InvalidValue {
        name: Box<[u8]>,
        value: Box<[u8]>,
    },
    /// `connection`, `keep-alive`, `proxy-connection`, `transfer-encoding`, `upgrade`.
    ConnectionSpecific(Box<[u8]>),
    /// A pseudo-header after a regular field.
    PseudoAfterRegular(Box<[u8]>),
    UnknownPseudo(Box<[u8]>),
    /// `:method`, `:scheme`, `:authority` or `:path` twice.
    DuplicatePseudo(&'static str),
    /// A pseudo-header a request needs is missing.
    NoPseudo(&'static str),
    EmptyPseudo(&'static str),
    /// `:path` neither origin form nor `*` (for OPTIONS).
    InvalidPath(Box<[u8]>),
    /// CONNECT with `:scheme` or `:path`.
    ConnectWithPath,
    ConnectWithoutAuthority,
    /// `host` other than `:authority` (nginx takes `:authority` as the first `host`).
    DuplicateHost {
        host: Box<[u8]>,
        authority: Box<[u8]>,
    },
    InvalidContentLength,
    /// Two `content-length` fields that disagree.
    DuplicateContentLength {
        value: u64,
        previous: u64,
    },
    /// END_STREAM on the request's HEADERS, with a `content-length` above 0.
    ClosedEarly,
    /// A pseudo-header in trailers.
    PseudoInTrailers(Box<[u8]>),
    /// DATA past the `content-length`.
    BodyTooLong,
    /// The body ended short of the `content-length`.
    BodyShort {
        received: u64,
        declared: u64,
    },
}

impl Malformed {
    /// Whether it was found while the request's head was read (nginx's "while reading client
    /// request headers"), rather than in its body.
    pub fn in_head(&self) -> bool {
        !matches!(self, Malformed::BodyTooLong | Malformed::BodyShort { .. })
    }
}

/// Bytes as nginx writes them in a log line (as they came; invalid UTF-8 replaced).
struct Raw<'a>(&'a [u8]);

impl fmt::Display for Raw<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&String::from_utf8_lossy(self.0))
    }
}

impl fmt::Display for Malformed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use Malformed::*;
        match self {
            InvalidName(n) => write!(f, "client sent invalid header name: \"{}\"", Raw(n)),
            InvalidValue { name, value } => write!(
                f,
                "client sent header \"{}\" with invalid value: \"{}\"",
                Raw(name),
                Raw(value)
            ),
            ConnectionSpecific(n) => {
                write!(f, "client sent connection-specific header: \"{}\"", Raw(n))
            }
            PseudoAfterRegular(n) => write!(
                f,
                "client sent pseudo-header \"{}\" after a regular header",
                Raw(n)
            ),
            UnknownPseudo(n) => write!(f, "client sent unknown pseudo-header \"{}\"", Raw(n)),
            DuplicatePseudo(n) => write!(f, "client sent duplicate {n} header"),
            NoPseudo(n) => write!(f, "client sent no {n} header"),
            EmptyPseudo(n) => write!(f, "client sent empty {n} header"),
            InvalidPath(p) => write!(f, "client sent invalid :path header: \"{}\"", Raw(p)),
            ConnectWithPath => f.write_str("client sent :scheme or :path in CONNECT"),
            ConnectWithoutAuthority => f.write_str("client sent no :authority in CONNECT"),
            DuplicateHost { host, authority } => write!(
                f,
                "client sent duplicate host header: \"host: {}\", previous value: \"host: {}\"",
                Raw(host),
                Raw(authority)
            ),
            InvalidContentLength => f.write_str("client sent invalid \"Content-Length\" header"),
            DuplicateContentLength { value, previous } => write!(
                f,
                "client sent duplicate header line: \"content-length: {value}\", previous value: \"content-length: {previous}\""
            ),
            ClosedEarly => f.write_str("client prematurely closed stream"),
            PseudoInTrailers(n) => write!(f, "client sent pseudo-header \"{}\" in trailers", Raw(n)),
            BodyTooLong => f.write_str("client intended to send body data larger than declared"),
            BodyShort { received, declared } => write!(
                f,
                "client prematurely closed stream: only {received} out of {declared} bytes of request body received"
            ),
        }
    }
}
