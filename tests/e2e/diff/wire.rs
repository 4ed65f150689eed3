//! The harness's side of the wire: a raw exchange with one server (plain or TLS, kept open or
//! half-closed), and the transcript normalised to what must match between nginx and shoal.

use std::io::{ErrorKind, Read, Write};
use std::net::{Shutdown, TcpStream};
use std::time::Duration;

use super::*;

#[derive(Clone, Copy)]
pub(super) enum Mode {
    HalfClose,
    KeepOpen,
    /// Half-closed, bodies compared byte for byte.
    Bytes,
    /// Kept open, bodies compared byte for byte.
    KeepOpenBytes,
}

/// Raw bytes received, and how the exchange ended.
pub(super) struct Transcript {
    pub(super) bytes: Vec<u8>,
    end: &'static str,
}

pub(super) fn exchange(port: u16, req: &[u8], mode: Mode) -> Transcript {
    let mut s = TcpStream::connect(("127.0.0.1", port)).expect("connecting");
    s.set_write_timeout(Some(WAIT)).expect("write timeout");
    // A server may answer and close before reading all of a large request: a failed write is
    // part of the transcript, not a test error.
    let wrote = s.write_all(req);
    if let Mode::HalfClose | Mode::Bytes = mode {
        let _ = s.shutdown(Shutdown::Write);
    }
    // Kept open, the transcript ends when nothing more comes for a short while: whether the
    // server closed by itself is a matter of that wait. But an answer that has not come yet,
    // or has come in part, is waited for as long as it takes (up to WAIT): on a busy machine
    // an answer may take longer than that short while, and a slow answer is not a missing one.
    let quiet = match mode {
        Mode::HalfClose | Mode::Bytes => WAIT,
        Mode::KeepOpen | Mode::KeepOpenBytes => Duration::from_millis(300),
    };
    let head_request = req.starts_with(b"HEAD ");
    let mut bytes = Vec::new();
    let mut buf = [0u8; 16384];
    let end = loop {
        let patience = if unfinished(&bytes, head_request) {
            WAIT
        } else {
            quiet
        };
        s.set_read_timeout(Some(patience)).expect("read timeout");
        match s.read(&mut buf) {
            Ok(0) => break "[closed]",
            Ok(n) => bytes.extend_from_slice(&buf[..n]),
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                break match mode {
                    Mode::KeepOpen | Mode::KeepOpenBytes => "[kept open]",
                    Mode::HalfClose | Mode::Bytes => "[no close after 10s]",
                };
            }
            Err(e) if e.kind() == ErrorKind::ConnectionReset => break "[reset]",
            // A read with a timeout is interrupted when the process is stopped and resumed.
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            Err(e) => panic!("reading from {port}: {e}"),
        }
    };
    // A reset after a refused request is how both close with unread input: not a difference.
    let end = if wrote.is_err() || end == "[reset]" {
        "[closed]"
    } else {
        end
    };
    Transcript { bytes, end }
}

/// [`exchange`] over TLS: the request, then what comes until the server closes (a
/// close_notify or the socket's end) or, the answers complete, says nothing for a moment.
pub(super) fn exchange_tls(
    port: u16,
    req: &[u8],
    pki: &crate::common::tls::Pki,
    client_cert: bool,
) -> Transcript {
    let opts = crate::common::tls::Opts {
        sni: Some("localhost"),
        client_cert: client_cert.then_some("client"),
        ..Default::default()
    };
    let mut c = crate::common::tls::TlsClient::connect(port, pki, &opts).expect("a handshake");
    c.send(req).expect("sending over TLS");
    let head_request = req.starts_with(b"HEAD ");
    let mut bytes = Vec::new();
    let mut buf = [0u8; 16384];
    let end = loop {
        let patience = if unfinished(&bytes, head_request) {
            WAIT
        } else {
            Duration::from_millis(300)
        };
        c.stream
            .sock
            .set_read_timeout(Some(patience))
            .expect("read timeout");
        match c.stream.read(&mut buf) {
            Ok(0) => break "[closed]",
            Ok(n) => bytes.extend_from_slice(&buf[..n]),
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                break "[kept open]"
            }
            // The socket's end without close_notify: an end as well.
            Err(e) if e.kind() == ErrorKind::UnexpectedEof => break "[closed]",
            Err(e) if e.kind() == ErrorKind::ConnectionReset => break "[closed]",
            Err(e) => panic!("reading from {port} over TLS: {e}"),
        }
    };
    Transcript { bytes, end }
}

/// Whether more of an answer is surely on its way: no whole head of a final answer yet
/// (interim 1xx answers skipped), or a body begun and not ended as its framing tells
/// (Content-Length, or chunked to its last chunk and trailer). A head followed by nothing yet
/// is not waited for: some answers tell a length and send no body (a HIT of a stored HEAD
/// answer); nor is a body delimited by the close.
fn unfinished(bytes: &[u8], head_request: bool) -> bool {
    let mut rest = bytes;
    loop {
        let Some(end) = find(rest, b"\r\n\r\n") else {
            return true;
        };
        let head = String::from_utf8_lossy(&rest[..end]).into_owned();
        let body = &rest[end + 4..];
        let Some(status) = head
            .strip_prefix("HTTP/1.")
            .and_then(|r| r.get(2..5))
            .and_then(|c| c.parse::<u16>().ok())
        else {
            // Not an answer this can read: what comes is judged by the quiet wait alone.
            return false;
        };
        if (100..200).contains(&status) && status != 101 {
            rest = body;
            continue;
        }
        if body.is_empty() || head_request || matches!(status, 101 | 204 | 304) {
            return false;
        }
        let chunked = header(&head, "transfer-encoding")
            .is_some_and(|v| v.to_ascii_lowercase().contains("chunked"));
        if chunked {
            return !chunked_whole(body);
        }
        return match header(&head, "content-length").map(str::parse::<usize>) {
            Some(Ok(n)) => body.len() < n,
            _ => false,
        };
    }
}

/// Whether a chunked body is complete: chunks up to the last (size 0), then the trailer.
fn chunked_whole(mut body: &[u8]) -> bool {
    loop {
        let Some(eol) = find(body, b"\r\n") else {
            return false;
        };
        let line = String::from_utf8_lossy(&body[..eol]);
        let size = line.split(';').next().unwrap_or("").trim();
        let Ok(size) = usize::from_str_radix(size, 16) else {
            return false;
        };
        body = &body[eol + 2..];
        if size == 0 {
            return body.starts_with(b"\r\n") || find(body, b"\r\n\r\n").is_some();
        }
        if body.len() < size + 2 {
            return false;
        }
        body = &body[size + 2..];
    }
}

/// The transcript as comparable text: per response the status line, the headers in the order
/// they were written (without `Date` and `Server`), and the body; then how the connection
/// ended.
pub(super) fn normalise(t: &Transcript, port: u16, exact: bool) -> String {
    let mut out = String::new();
    let mut rest: &[u8] = &t.bytes;
    while !rest.is_empty() {
        let Some(head_end) = find(rest, b"\r\n\r\n") else {
            out.push_str(&format!(
                "[garbage] {}\n",
                String::from_utf8_lossy(rest).escape_debug()
            ));
            break;
        };
        let head = String::from_utf8_lossy(&rest[..head_end]).into_owned();
        rest = &rest[head_end + 4..];
        let mut lines = head.split("\r\n");
        let status = lines.next().unwrap_or_default().to_string();
        let mut headers: Vec<(String, String)> = lines
            .map(|l| match l.split_once(':') {
                Some((n, v)) => (n.to_string(), v.trim().to_string()),
                None => (format!("[bad line] {l}"), String::new()),
            })
            .filter(|(n, _)| !n.eq_ignore_ascii_case("date") && !n.eq_ignore_ascii_case("server"))
            .collect();
        let len = headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case("content-length"))
            .and_then(|(_, v)| v.parse::<usize>().ok());
        let bodiless = status.contains(" 304 ") || status.contains(" 204 ");
        // A HEAD answer has a Content-Length but no body: the next bytes are the next
        // status line, or nothing.
        let body_len = match len {
            _ if bodiless => 0,
            Some(n) if rest.starts_with(b"HTTP/1.") || rest.is_empty() => {
                if rest.is_empty() || n == 0 {
                    0
                } else {
                    n.min(rest.len())
                }
            }
            Some(n) => n.min(rest.len()),
            None => rest.len(),
        };
        let mut body = if exact {
            exact_text(&rest[..body_len])
        } else {
            String::from_utf8_lossy(&rest[..body_len]).into_owned()
        };
        rest = &rest[body_len..];
        // The boundary of a multipart answer is per server.
        if let Some(b) = headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case("content-type"))
            .and_then(|(_, v)| v.split_once("boundary="))
            .map(|(_, b)| b.to_string())
        {
            body = body.replace(&b, "BOUNDARY");
            for (_, v) in &mut headers {
                *v = v.replace(&b, "BOUNDARY");
            }
        }
        let before = body.len();
        body = server_token(&body);
        // The server token's length differs (nginx/1.22.1, shoal/0.1.0): the normalised body's
        // length stands for Content-Length. A HEAD answer has no body to normalise; its length
        // is corrected by the token's when it is one of the server's own error pages (HTML
        // without an ETag, so not a file).
        let own_page = body_len == 0
            && status.split(' ').nth(1).is_some_and(|c| c >= "300")
            && header(&head, "content-type") == Some("text/html")
            && header(&head, "etag").is_none();
        let token = header(&head, "server").unwrap_or_default();
        for (n, v) in &mut headers {
            *v = v.replace(&format!(":{port}"), ":PORT");
            if n.eq_ignore_ascii_case("content-length") {
                if before != body.len() && body_len == before {
                    *v = body.len().to_string();
                } else if own_page {
                    if let Ok(len) = v.parse::<usize>() {
                        let norm = if token.contains('/') {
                            "SERVER/VERSION"
                        } else {
                            "SERVER"
                        };
                        *v = format!("{} (HEAD)", (len + norm.len()).saturating_sub(token.len()));
                    }
                }
            }
            if n.eq_ignore_ascii_case("expires") {
                *v = expires_value(v);
            }
        }
        body = body.replace(&format!(":{port}"), ":PORT");
        out.push_str(&status);
        out.push('\n');
        for (n, v) in headers {
            out.push_str(&format!("{n}: {v}\n"));
        }
        out.push_str(&format!("\n{}\n", body.escape_debug()));
        out.push_str("----\n");
    }
    out.push_str(t.end);
    out
}

/// Bytes as text without losing any: valid UTF-8 as it is, every other byte as `\xNN`.
fn exact_text(mut b: &[u8]) -> String {
    let mut out = String::new();
    loop {
        match std::str::from_utf8(b) {
            Ok(s) => {
                out.push_str(s);
                return out;
            }
            Err(e) => {
                let good = e.valid_up_to();
                out.push_str(std::str::from_utf8(&b[..good]).expect("checked valid"));
                let bad = e.error_len().unwrap_or(b.len() - good);
                for &c in &b[good..good + bad] {
                    out.push_str(&format!("\\x{c:02x}"));
                }
                b = &b[good + bad..];
            }
        }
    }
}

/// `Expires` moves with the clock: a fixed date (epoch, max) is compared as is; any other is
/// checked for the HTTP-date shape and compared as `<date>`.
fn expires_value(v: &str) -> String {
    const FIXED: [&str; 2] = [
        "Thu, 01 Jan 1970 00:00:01 GMT",
        "Thu, 31 Dec 2037 23:55:55 GMT",
    ];
    if FIXED.contains(&v) {
        return v.to_string();
    }
    let b = v.as_bytes();
    let shape = b.len() == 29
        && &b[3..5] == b", "
        && v.ends_with(" GMT")
        && b[5..7].iter().all(u8::is_ascii_digit)
        && b[12..16].iter().all(u8::is_ascii_digit)
        && b[19] == b':'
        && b[22] == b':';
    if shape {
        "<date>".into()
    } else {
        format!("<bad date {v:?}>")
    }
}

/// The one line of an error page that names the server.
fn server_token(body: &str) -> String {
    let mut out = body.to_string();
    for name in ["nginx", "shoal"] {
        out = replace_versioned(&out, name);
        out = out.replace(
            &format!("<center>{name}</center>"),
            "<center>SERVER</center>",
        );
    }
    out
}

/// `name/1.2.3` → `SERVER/VERSION`.
fn replace_versioned(s: &str, name: &str) -> String {
    let pat = format!("{name}/");
    let mut out = String::new();
    let mut rest = s;
    while let Some(i) = rest.find(&pat) {
        out.push_str(&rest[..i]);
        let after = &rest[i + pat.len()..];
        let v = after
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(after.len());
        if v == 0 {
            out.push_str(&pat);
        } else {
            out.push_str("SERVER/VERSION");
        }
        rest = &after[v..];
    }
    out.push_str(rest);
    out
}

/// A header's value in a raw head (case-insensitive name).
fn header<'a>(head: &'a str, name: &str) -> Option<&'a str> {
    head.split("\r\n").skip(1).find_map(|l| {
        let (n, v) = l.split_once(':')?;
        n.eq_ignore_ascii_case(name).then(|| v.trim())
    })
}

pub(super) fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}
