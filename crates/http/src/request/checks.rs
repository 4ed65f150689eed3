//! The checks every road shares once it has a request line and header lines: the target,
//! `Host`, headers allowed once, body framing (`Content-Length`, `Transfer-Encoding`),
//! keep-alive and `Expect`.

use super::*;

/// Headers nginx 1.22 allows once per request (beyond Host, Content-Length, Transfer-Encoding
/// and Expect, checked where they are read).
pub(super) const UNIQUE: [&[u8]; 7] = [
    b"content-range",
    b"if-modified-since",
    b"if-unmodified-since",
    b"if-match",
    b"if-none-match",
    b"if-range",
    b"authorization",
];

/// nginx's `ngx_strcasestrn`: is `needle` anywhere in `hay`, ignoring ASCII case?
pub(super) fn contains_ignore_case(hay: &[u8], needle: &[u8]) -> bool {
    hay.windows(needle.len())
        .any(|w| w.eq_ignore_ascii_case(needle))
}

/// The checks the roads share: target, Host, framing, keep-alive.
pub(super) fn finish(head: Bytes, raw: RawHead, limits: &Limits) -> Result<Request, Error> {
    let mut out = None;
    finish_into(
        &mut { head },
        &mut { raw },
        limits,
        &mut uri::HostMemo::default(),
        &mut out,
    )?;
    // (Filled whenever it succeeds.)
    out.ok_or(Error::bad_request("client sent invalid request"))
}

/// [`finish`] into `out`; its headers are taken from `raw`, and `head` (left empty) when it
/// succeeds: a refused head stays with the caller without a second reference to it.
pub(super) fn finish_into(
    head: &mut Bytes,
    raw: &mut RawHead,
    limits: &Limits,
    host_memo: &mut uri::HostMemo,
    out: &mut Option<Request>,
) -> Result<(), Error> {
    let mut host_header: Option<&[u8]> = None;
    let mut content_length: Option<&[u8]> = None;
    let mut transfer_encoding: Option<&[u8]> = None;
    let mut close = false;
    let mut keep_alive_token = false;
    let mut expect_continue: Option<bool> = None;
    let mut unique_seen = 0u8;
    let duplicate = Error::bad_request("client sent duplicate header line");
    let mut names = 0u64;
    if raw.headers.len() > MAX_HEADERS {
        return Err(too_many_headers());
    }
    for h in &raw.headers {
        let name = h.name.get(head);
        let value = h.value.get(head);
        names |= name_bit(name);
        if name.eq_ignore_ascii_case(b"host") {
            if host_header.replace(value).is_some() {
                return Err(duplicate);
            }
        } else if name.eq_ignore_ascii_case(b"content-length") {
            // Even an identical duplicate is refused: nginx does, and it closes a smuggling door.
            if content_length.replace(value).is_some() {
                return Err(duplicate);
            }
        } else if name.eq_ignore_ascii_case(b"transfer-encoding") {
            if transfer_encoding.replace(value).is_some() {
                return Err(duplicate);
            }
        } else if name.eq_ignore_ascii_case(b"connection") {
            // As nginx: the last line that names either wins, found as a substring anywhere.
            if contains_ignore_case(value, b"close") {
                (close, keep_alive_token) = (true, false);
            } else if contains_ignore_case(value, b"keep-alive") {
                (close, keep_alive_token) = (false, true);
            }
        } else if name.eq_ignore_ascii_case(b"expect") {
            if expect_continue
                .replace(value.eq_ignore_ascii_case(b"100-continue"))
                .is_some()
            {
                return Err(duplicate);
            }
        } else if let Some(i) = UNIQUE.iter().position(|u| name.eq_ignore_ascii_case(u)) {
            // nginx 1.22 keeps one of these and refuses a second.
            if unique_seen & (1 << i) != 0 {
                return Err(duplicate);
            }
            unique_seen |= 1 << i;
        }
    }
    let expect_continue = expect_continue == Some(true);

    // The target: origin-form, or absolute-form whose host wins over Host (as nginx).
    let target = raw.target.get(head);
    let (path_part, query, target_host, request_uri) = if target.first() == Some(&b'/') {
        let (p, q) = uri::split_query(target);
        (p, q, None, Piece::InHead(raw.target))
    } else {
        let (authority, p, q) = split_absolute(target)?;
        // What follows the authority: `$request_uri`, and what goes upstream.
        let rest = Span::of(head, authority).end;
        let rest = head.get(rest..raw.target.end).unwrap_or_default();
        let request_uri = if rest.is_empty() {
            Piece::Own(b"/".to_vec())
        } else {
            Piece::InHead(Span::of(head, rest))
        };
        (p, q, Some(authority), request_uri)
    };
    let path = Piece::of(head, uri::normalize_path(path_part, limits.merge_slashes)?);

    // nginx validates Host even when the request line's host is the one used.
    let header_host = host_header.map(|h| host_memo.validate(h)).transpose()?;
    let host = match target_host {
        Some(h) => Some(
            uri::validate_host(h)
                .map_err(|_| Error::bad_request("client sent invalid host in request line"))?,
        ),
        None => header_host,
    };
    if host_header.is_none() && raw.version >= Version::Http11 {
        return Err(Error::bad_request(
            "client sent HTTP/1.1 request without \"Host\" header",
        ));
    }
    let host = host.map(|h| Piece::of(head, h));

    let body = body::framing(raw.version, content_length, transfer_encoding)?;
    // nginx refuses these with the head, whatever the location would have done.
    let method = raw.method.get(head);
    if method == b"TRACE" {
        return Err(Error::new(
            ErrorKind::MethodNotAllowed,
            "client sent TRACE method",
        ));
    }
    if method == b"CONNECT" {
        return Err(Error::new(
            ErrorKind::MethodNotAllowed,
            "client sent CONNECT method",
        ));
    }
    let keep_alive = match raw.version {
        Version::Http11 | Version::Http2 => !close,
        Version::Http10 => keep_alive_token && !close,
        Version::Http09 => false,
    };
    let query = query.map(|q| Span::of(head, q));
    let usual_method = match method {
        b"GET" => Some("GET"),
        b"HEAD" => Some("HEAD"),
        b"POST" => Some("POST"),
        _ => None,
    };
    *out = Some(Request {
        method: raw.method,
        usual_method,
        target: raw.target,
        request_uri,
        query,
        version: raw.version,
        headers: std::mem::take(&mut raw.headers),
        names,
        path,
        host,
        keep_alive,
        expect_continue: expect_continue && raw.version >= Version::Http11,
        body,
        len: head.len(),
        head: std::mem::take(head),
    });
    Ok(())
}
