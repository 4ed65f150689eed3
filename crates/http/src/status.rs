//! Status codes: nginx's status lines and nginx-shaped HTML error pages.
//!
//! nginx knows a fixed set of reason phrases (some of them its own, like "302 Moved
//! Temporarily" and "503 Service Temporarily Unavailable"); a status it has no phrase for goes
//! out as the bare number followed by a space. Codes 494–497 are nginx's internal refinements of
//! 400: they go out as 400 with a page that says what was wrong.
//!
//! Error pages are static strings in two parts, the status-specific head and the tail that names
//! the server, so serving one never formats or allocates.

use crate::response::ServerTokens;

/// The status line text after `HTTP/1.1 ` (`"404 Not Found"`), as nginx writes it, or `None`
/// when nginx has no phrase for `code`.
pub fn status_line(code: u16) -> Option<&'static str> {
    Some(match code {
        100 => "100 Continue",
        101 => "101 Switching Protocols",
        200 => "200 OK",
        201 => "201 Created",
        202 => "202 Accepted",
        204 => "204 No Content",
        206 => "206 Partial Content",
        301 => "301 Moved Permanently",
        302 => "302 Moved Temporarily",
        303 => "303 See Other",
        304 => "304 Not Modified",
        307 => "307 Temporary Redirect",
        308 => "308 Permanent Redirect",
        400 => "400 Bad Request",
        401 => "401 Unauthorized",
        402 => "402 Payment Required",
        403 => "403 Forbidden",
        404 => "404 Not Found",
        405 => "405 Not Allowed",
        406 => "406 Not Acceptable",
        408 => "408 Request Time-out",
        409 => "409 Conflict",
        410 => "410 Gone",
        411 => "411 Length Required",
        412 => "412 Precondition Failed",
        413 => "413 Request Entity Too Large",
        414 => "414 Request-URI Too Large",
        415 => "415 Unsupported Media Type",
        416 => "416 Requested Range Not Satisfiable",
        421 => "421 Misdirected Request",
        429 => "429 Too Many Requests",
        500 => "500 Internal Server Error",
        501 => "501 Not Implemented",
        502 => "502 Bad Gateway",
        503 => "503 Service Temporarily Unavailable",
        504 => "504 Gateway Time-out",
        505 => "505 HTTP Version Not Supported",
        507 => "507 Insufficient Storage",
        _ => return None,
    })
}

/// The reason phrase alone (`"Not Found"`), or `None` when nginx has none for `code`.
pub fn reason(code: u16) -> Option<&'static str> {
    status_line(code).map(|l| l.get(4..).unwrap_or_default())
}

/// The status sent on the wire for an nginx code: 494–497 become 400, others are themselves.
pub const fn wire_status(code: u16) -> u16 {
    match code {
        494..=497 => 400,
        c => c,
    }
}

/// An nginx-style error page: a status-specific head and a tail naming the server.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ErrorPage {
    /// `<html>` through the `<h1>` line (and the explanation line for 494–497).
    pub head: &'static str,
    /// `<hr><center>shoal…</center>` through `</html>`.
    pub tail: &'static str,
}

impl ErrorPage {
    /// Total body length (for `Content-Length`).
    pub fn len(&self) -> usize {
        self.head.len() + self.tail.len()
    }

    /// Never empty; present for the `len` convention.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Appends the body to `out`.
    pub fn write_to(&self, out: &mut impl bytes::BufMut) {
        out.put_slice(self.head.as_bytes());
        out.put_slice(self.tail.as_bytes());
    }

    /// The body as one vector.
    pub fn to_vec(&self) -> Vec<u8> {
        let mut v = Vec::with_capacity(self.len());
        self.write_to(&mut v);
        v
    }
}

macro_rules! page {
    ($title:literal) => {
        concat!(
            "<html>\r\n<head><title>",
            $title,
            "</title></head>\r\n<body>\r\n<center><h1>",
            $title,
            "</h1></center>\r\n"
        )
    };
    ($title:literal, $h1:literal, $text:literal) => {
        concat!(
            "<html>\r\n<head><title>",
            $title,
            "</title></head>\r\n<body>\r\n<center><h1>",
            $h1,
            "</h1></center>\r\n<center>",
            $text,
            "</center>\r\n"
        )
    };
}

/// The head part of nginx's page for `code`, or `None` when nginx sends no page for it.
fn page_head(code: u16) -> Option<&'static str> {
    Some(match code {
        301 => page!("301 Moved Permanently"),
        302 => page!("302 Found"),
        303 => page!("303 See Other"),
        307 => page!("307 Temporary Redirect"),
        308 => page!("308 Permanent Redirect"),
        400 => page!("400 Bad Request"),
        401 => page!("401 Authorization Required"),
        402 => page!("402 Payment Required"),
        403 => page!("403 Forbidden"),
        404 => page!("404 Not Found"),
        405 => page!("405 Not Allowed"),
        406 => page!("406 Not Acceptable"),
        408 => page!("408 Request Time-out"),
        409 => page!("409 Conflict"),
        410 => page!("410 Gone"),
        411 => page!("411 Length Required"),
        412 => page!("412 Precondition Failed"),
        413 => page!("413 Request Entity Too Large"),
        414 => page!("414 Request-URI Too Large"),
        415 => page!("415 Unsupported Media Type"),
        416 => page!("416 Requested Range Not Satisfiable"),
        421 => page!("421 Misdirected Request"),
        429 => page!("429 Too Many Requests"),
        494 => page!(
            "400 Request Header Or Cookie Too Large",
            "400 Bad Request",
            "Request Header Or Cookie Too Large"
        ),
        495 => page!(
            "400 The SSL certificate error",
            "400 Bad Request",
            "The SSL certificate error"
        ),
        496 => page!(
            "400 No required SSL certificate was sent",
            "400 Bad Request",
            "No required SSL certificate was sent"
        ),
        497 => page!(
            "400 The plain HTTP request was sent to HTTPS port",
            "400 Bad Request",
            "The plain HTTP request was sent to HTTPS port"
        ),
        500 => page!("500 Internal Server Error"),
        501 => page!("501 Not Implemented"),
        502 => page!("502 Bad Gateway"),
        503 => page!("503 Service Temporarily Unavailable"),
        504 => page!("504 Gateway Time-out"),
        505 => page!("505 HTTP Version Not Supported"),
        507 => page!("507 Insufficient Storage"),
        _ => return None,
    })
}

macro_rules! tail {
    ($server:expr) => {
        concat!(
            "<hr><center>",
            $server,
            "</center>\r\n</body>\r\n</html>\r\n"
        )
    };
}

/// The page tail for `tokens`.
pub fn page_tail(tokens: ServerTokens) -> &'static str {
    match tokens {
        ServerTokens::On => tail!(concat!("shoal/", env!("CARGO_PKG_VERSION"))),
        ServerTokens::Off => tail!("shoal"),
        ServerTokens::Build => tail!(concat!("shoal/", env!("CARGO_PKG_VERSION"), " (build)")),
    }
}

/// nginx's error page for `code` (an nginx code: 494 for "Request Header Or Cookie Too
/// Large"), or `None` when nginx sends an empty body for it. Send it as `text/html` with the
/// status [`wire_status`]`(code)`.
pub fn error_page(code: u16, tokens: ServerTokens) -> Option<ErrorPage> {
    Some(ErrorPage {
        head: page_head(code)?,
        tail: page_tail(tokens),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn page_shape() {
        let p = error_page(404, ServerTokens::On).unwrap();
        assert_eq!(
            String::from_utf8(p.to_vec()).unwrap(),
            "<html>\r\n<head><title>404 Not Found</title></head>\r\n<body>\r\n\
             <center><h1>404 Not Found</h1></center>\r\n<hr><center>shoal/0.1.0</center>\r\n\
             </body>\r\n</html>\r\n"
        );
        let off = error_page(500, ServerTokens::Off).unwrap();
        assert!(off.tail.contains("<hr><center>shoal</center>"));
        let build = error_page(500, ServerTokens::Build).unwrap();
        assert!(build
            .tail
            .contains("<hr><center>shoal/0.1.0 (build)</center>"));
        assert_eq!(p.len(), p.to_vec().len());
    }

    #[test]
    fn header_too_large_page() {
        let p = error_page(494, ServerTokens::Off).unwrap();
        assert_eq!(
            p.head,
            "<html>\r\n<head><title>400 Request Header Or Cookie Too Large</title></head>\r\n\
             <body>\r\n<center><h1>400 Bad Request</h1></center>\r\n\
             <center>Request Header Or Cookie Too Large</center>\r\n"
        );
        assert_eq!(wire_status(494), 400);
    }

    #[test]
    fn phrases() {
        assert_eq!(status_line(414), Some("414 Request-URI Too Large"));
        assert_eq!(reason(413), Some("Request Entity Too Large"));
        assert_eq!(reason(505), Some("HTTP Version Not Supported"));
        assert_eq!(reason(501), Some("Not Implemented"));
        assert_eq!(reason(299), None);
        assert!(error_page(200, ServerTokens::On).is_none());
        for code in [400, 413, 414, 494, 501, 505] {
            assert!(error_page(code, ServerTokens::On).is_some());
        }
    }
}
