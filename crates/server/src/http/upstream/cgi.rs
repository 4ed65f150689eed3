//! The answer of an SCGI or uwsgi application: an HTTP status line and headers, or CGI
//! header lines with `Status`, read as nginx 1.22 reads them (`shoal_http::cgi`); the body up
//! to the close or the `Content-Length`. Such a connection is never reused.

use bytes::BytesMut;
use shoal_http::cgi::CgiHeadParser;
use shoal_http::upstream::Framing as CodecFraming;

use super::body::Framing;
use super::protocol::{HeadDecoder, HeadError, Log, Parsed};

/// Reads one SCGI or uwsgi answer's head.
pub struct CgiHead {
    parser: CgiHeadParser,
    head_request: bool,
}

impl CgiHead {
    pub fn new(head_request: bool) -> CgiHead {
        CgiHead {
            parser: CgiHeadParser::http_or_cgi(),
            head_request,
        }
    }
}

impl HeadDecoder for CgiHead {
    fn decode(
        &mut self,
        buf: &mut BytesMut,
        max: usize,
        _log: Log<'_>,
    ) -> Result<Option<Parsed>, HeadError> {
        let head = match self.parser.parse_buf(buf, max) {
            Ok(Some(h)) => h,
            Ok(None) => return Ok(None),
            Err(e) => return Err(HeadError::Invalid(e.to_string())),
        };
        let framing = match shoal_http::cgi::framing(&head, self.head_request) {
            CodecFraming::None => Framing::None,
            CodecFraming::Length(n) => Framing::Length(n),
            _ => Framing::Close,
        };
        let status = head.status();
        Ok(Some(Parsed {
            status,
            reason: Parsed::reason_of(status, head.reason()),
            framing,
            codec: None,
            content_length: head.content_length(),
            reusable: false,
            upgrade: false,
            consumed: head.head_len(),
            head,
            intercept: false,
        }))
    }
}
