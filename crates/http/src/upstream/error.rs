//! Why an upstream's answer was refused, in nginx's log words.

use super::*;

/// Why an upstream's answer was refused. Each reads like nginx's error-log line (level `error`
/// unless said otherwise); all are a 502 for the client (`proxy_next_upstream invalid_header`
/// may try another server first), except [`UpstreamError::NoValidHeader`], see there.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum UpstreamError {
    /// The head did not fit in `proxy_buffer_size` bytes.
    TooBigHeader,
    /// The status line is not `HTTP/major.minor SP code ...`. nginx logs this, then relays the
    /// bytes as they are (HTTP/0.9 style: status 200 for `$upstream_status`, `009` logged, no
    /// head sent to the client, body to the upstream's close, connections not reused).
    NoValidHeader,
    /// A header line nginx's parser refuses; `line` is the line up to the offending byte (as
    /// nginx's `header_name_start..header_end`), `byte` the byte at that point.
    InvalidHeader {
        /// The line up to the offending byte (without it).
        line: Vec<u8>,
        /// The offending byte.
        byte: u8,
    },
    /// [`Rules::Nginx123`]: a second `Content-Length` or `Transfer-Encoding` line.
    DuplicateHeader {
        /// The repeated line's name and value.
        name: Vec<u8>,
        /// Its value.
        value: Vec<u8>,
        /// The first line's name.
        previous_name: Vec<u8>,
        /// The first line's value.
        previous_value: Vec<u8>,
    },
    /// [`Rules::Nginx123`]: both `Content-Length` and `Transfer-Encoding`.
    ContentLengthAndTransferEncoding,
    /// [`Rules::Nginx123`]: a `Transfer-Encoding` other than exactly `chunked`.
    UnknownTransferEncoding(Vec<u8>),
    /// [`Rules::Nginx123`]: a `Content-Length` that is not a plain decimal number.
    InvalidContentLength {
        /// The header's name as sent.
        name: Vec<u8>,
        /// Its value.
        value: Vec<u8>,
    },
    /// A CGI-style head ([`crate::cgi`]) whose `Status` value does not start with three
    /// digits; the value as sent.
    InvalidStatus(Vec<u8>),
    /// A chunked body that does not parse.
    InvalidChunkedResponse,
    /// The upstream closed before the body's framing said it was over.
    PrematureClose,
}

/// Writes `bytes` for the error log: printable ASCII as is, anything else as `\xNN` (nginx
/// writes the raw bytes; a log line here is text).
pub(super) fn escaped(f: &mut fmt::Formatter<'_>, bytes: &[u8]) -> fmt::Result {
    for &b in bytes {
        if (0x20..0x7f).contains(&b) {
            fmt::Write::write_char(f, char::from(b))?;
        } else {
            write!(f, "\\x{b:02x}")?;
        }
    }
    Ok(())
}

impl fmt::Display for UpstreamError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            UpstreamError::TooBigHeader => f.write_str("upstream sent too big header"),
            UpstreamError::NoValidHeader => f.write_str("upstream sent no valid HTTP/1.0 header"),
            UpstreamError::InvalidHeader { line, byte } => {
                // nginx: "upstream sent invalid header: \"%*s\\x%02xd...\"".
                f.write_str("upstream sent invalid header: \"")?;
                escaped(f, line)?;
                write!(f, "\\x{byte:02x}...\"")
            }
            UpstreamError::DuplicateHeader {
                name,
                value,
                previous_name,
                previous_value,
            } => {
                f.write_str("upstream sent duplicate header line: \"")?;
                escaped(f, name)?;
                f.write_str(": ")?;
                escaped(f, value)?;
                f.write_str("\", previous value: \"")?;
                escaped(f, previous_name)?;
                f.write_str(": ")?;
                escaped(f, previous_value)?;
                f.write_str("\"")
            }
            UpstreamError::ContentLengthAndTransferEncoding => f.write_str(
                "upstream sent \"Content-Length\" and \"Transfer-Encoding\" headers at the same time",
            ),
            UpstreamError::UnknownTransferEncoding(v) => {
                f.write_str("upstream sent unknown \"Transfer-Encoding\": \"")?;
                escaped(f, v)?;
                f.write_str("\"")
            }
            UpstreamError::InvalidContentLength { name, value } => {
                f.write_str("upstream sent invalid \"Content-Length\" header: \"")?;
                escaped(f, name)?;
                f.write_str(": ")?;
                escaped(f, value)?;
                f.write_str("\"")
            }
            UpstreamError::InvalidStatus(v) => {
                f.write_str("upstream sent invalid status \"")?;
                escaped(f, v)?;
                f.write_str("\"")
            }
            UpstreamError::InvalidChunkedResponse => {
                f.write_str("upstream sent invalid chunked response")
            }
            UpstreamError::PrematureClose => {
                f.write_str("upstream prematurely closed connection while reading upstream")
            }
        }
    }
}

impl std::error::Error for UpstreamError {}
