//! What nginx knew when it refused a request head: which host it had chosen its server by, and
//! which error it saw first in a request line too long to read.
//!
//! nginx parses a head left to right as it arrives and picks the virtual server as soon as it
//! meets a host (an absolute-form target, or a valid `Host` line); until then the default server
//! of the address is in charge. So a head refused in its request line, or in a header line before
//! `Host`, is answered with the default server's configuration, one refused at or after a later
//! line with the server of the host read so far, and one refused after the whole head (no `Host`
//! in HTTP/1.1, `TRACE`, bad framing) with the server a complete request would get. shoal parses
//! a head once it is complete, so after an error it replays nginx's walk here. Nothing here runs
//! for a request that is served.

use bytes::Bytes;

use super::{
    header_line_content, keep_header, line_content, nginx_method, parse_request_line,
    parse_version, scheme_byte, split_absolute, valid_authority, valid_authority_prefix,
    version_prefix, UNIQUE,
};
use crate::error::Error;
use crate::limits::Limits;
use crate::uri;

/// How far nginx got into a refused head.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Refused {
    /// The host nginx had picked its server by (lowercased, without port), if any.
    pub host: Option<Bytes>,
    /// Every line passed nginx's per-line checks: the error came after the head, so the server
    /// is the one for `host`, or for "no Host" (a `server_name ""` server) when there is none.
    /// Otherwise it is `host`'s server, or the default server.
    pub head_read: bool,
    /// The request line passed: nginx was reading the headers when it refused the head (its
    /// log line says "while reading client request headers", not "request line").
    pub line_read: bool,
    /// The value of the first `Host` line, as it came (valid or not): the `host: "..."` of
    /// nginx's log line.
    pub host_line: Option<Bytes>,
    /// The walk's error as nginx logs it, with the values it names (`client sent duplicate
    /// host header: "Host: b", previous value: "Host: a"`), next to the context of the
    /// [`Error`] it details.
    pub detail: Option<(&'static str, String)>,
}

impl Refused {
    /// What to log for `e`, the error the head was refused with: nginx's line with its
    /// values when the walk found that same error, else the error's own words.
    pub fn what<'a>(&'a self, e: &Error) -> std::borrow::Cow<'a, str> {
        match &self.detail {
            Some((context, line)) if *context == e.context() => line.into(),
            _ => e.context().into(),
        }
    }
}

/// nginx's line for an invalid header line: the line up to where its parser put the header's
/// end when it stopped (a control byte or space in the name, a NUL in the value, a CR not
/// before the LF, a line starting with a CR not followed by the LF; at a CR after a value's
/// trailing spaces, the first of those spaces), then the byte there in hex.
fn invalid_line_detail(line: &[u8]) -> String {
    let mut content = line.strip_suffix(b"\n").unwrap_or(line);
    if content.first() != Some(&b'\r') {
        while let [rest @ .., b'\r'] = content {
            content = rest;
        }
    }
    let colon = memchr::memchr(b':', content).unwrap_or(content.len());
    let stop = content.iter().enumerate().position(|(i, &b)| {
        b == b'\r'
            || (i < colon && (b <= 0x20 || b == 0x7f))
            || (i == 0 && b == b':')
            || (i > colon && b == 0)
    });
    let mut stop = stop.unwrap_or(content.len());
    if content.get(stop) == Some(&b'\r') && stop > colon {
        // nginx's `sw_space_after_value`: the end was set at the first space after the value.
        let value = &content[colon + 1..stop];
        let spaces = value.iter().rev().take_while(|&&b| b == b' ').count();
        if spaces > 0 && spaces < value.len() {
            stop -= spaces;
        }
    }
    let byte = content.get(stop).copied().unwrap_or(b'\r');
    format!(
        "client sent invalid header line: \"{}\\x{byte:02x}...\"",
        crate::log_text(&content[..stop])
    )
}

/// nginx's line for a second `name` header: both lines as they came.
fn duplicate_detail(what: &str, (name, value): Line, (pname, pvalue): Line) -> String {
    let l = crate::log_text;
    format!(
        "client sent duplicate {what}: \"{}: {}\", previous value: \"{}: {}\"",
        l(name),
        l(value),
        l(pname),
        l(pvalue)
    )
}

/// A header line's name and (trimmed) value.
type Line<'a> = (&'a [u8], &'a [u8]);

/// Replays nginx's walk over `head` (complete lines only; `complete`: it ends with its empty
/// line) up to the first line nginx would refuse.
pub(super) fn walk(head: &[u8], limits: &Limits, complete: bool) -> Refused {
    let (mut out, _) = walk_to_error(head, limits);
    out.head_read &= complete;
    out
}

/// The error nginx answers for the first wrong line among the complete lines of `head`: it
/// reads each line as it comes, so that is its answer even when a later line is too long.
pub(crate) fn first_line_error(head: &[u8], limits: &Limits) -> Option<Error> {
    walk_to_error(head, limits).1
}

/// nginx's walk: how far it got (`head_read` set when the empty line was reached) and the
/// error it stopped at, if any.
fn walk_to_error(head: &[u8], limits: &Limits) -> (Refused, Option<Error>) {
    let mut out = Refused::default();
    let invalid_line = Error::bad_request("client sent invalid header line");
    let duplicate = Error::bad_request("client sent duplicate header line");
    let mut lines = head.split_inclusive(|&b| b == b'\n');
    let request_line = loop {
        let Some(line) = lines.next().filter(|l| l.ends_with(b"\n")) else {
            return (out, None);
        };
        match line_content(super::skip_leading_cr(line)) {
            Ok([]) => {}
            Ok(content) => break content,
            Err(_) => return (out, Some(Error::bad_request("client sent invalid request"))),
        }
    };
    let target = match parse_request_line(request_line) {
        Ok((_, target, _)) => target,
        Err(e) => return (out, Some(e)),
    };
    let path = if target.first() == Some(&b'/') {
        uri::split_query(target).0
    } else {
        let (authority, path, _) = match split_absolute(target) {
            Ok(parts) => parts,
            Err(e) => return (out, Some(e)),
        };
        let Ok(host) = uri::validate_host(authority) else {
            let e = Error::bad_request("client sent invalid host in request line");
            return (out, Some(e));
        };
        out.host = Some(Bytes::copy_from_slice(&host));
        path
    };
    // The path is normalised with the request line, before any header is read.
    if let Err(e) = uri::normalize_path(path, limits.merge_slashes) {
        out.host = None;
        return (out, Some(e));
    }
    out.line_read = true;
    let mut host_seen: Option<Line> = None;
    let mut kept = 0usize;
    let mut unique_seen: [Option<Line>; UNIQUE.len()] = [None; UNIQUE.len()];
    let mut framing_seen: [Option<Line>; 3] = [None; 3];
    for line in lines {
        // A line that starts with a CR is the head's end: nginx refuses it at the byte after
        // the CR, when that is not the LF, before the line is whole.
        let early_end = matches!(line, [b'\r', b, ..] if *b != b'\n');
        if !line.ends_with(b"\n") && !early_end {
            return (out, None);
        }
        let content = match header_line_content(line) {
            Ok(content) => content,
            Err(e) => {
                out.detail = Some((e.context(), invalid_line_detail(line)));
                return (out, Some(e));
            }
        };
        if content.is_empty() {
            out.head_read = true;
            // nginx checks the framing once the head is read.
            if let Some((_, te)) =
                framing_seen[1].filter(|(_, te)| !te.eq_ignore_ascii_case(b"chunked"))
            {
                let line = format!(
                    "client sent unknown \"Transfer-Encoding\": \"{}\"",
                    crate::log_text(te)
                );
                out.detail = Some(("client sent unknown \"Transfer-Encoding\"", line));
            }
            return (out, None);
        }
        let (name, value) = match memchr::memchr(b':', content) {
            Some(colon) => (&content[..colon], &content[colon + 1..]),
            None => (content, &content[content.len()..]),
        };
        let value = super::trim_ows(value);
        if name.is_empty() || name.iter().any(|&b| b <= 0x20 || b == 0x7f) || value.contains(&0) {
            out.detail = Some((invalid_line.context(), invalid_line_detail(line)));
            return (out, Some(invalid_line));
        }
        if !keep_header(name, limits) {
            continue;
        }
        kept += 1;
        if kept > super::MAX_HEADERS {
            return (out, Some(super::too_many_headers()));
        }
        if name.eq_ignore_ascii_case(b"host") {
            if let Some(previous) = host_seen.replace((name, value)) {
                let line = duplicate_detail("host header", (name, value), previous);
                out.detail = Some((duplicate.context(), line));
                return (out, Some(duplicate));
            }
            out.host_line = Some(Bytes::copy_from_slice(value));
            let host = match uri::validate_host(value) {
                Ok(host) => host,
                Err(e) => return (out, Some(e)),
            };
            if out.host.is_none() {
                out.host = Some(Bytes::copy_from_slice(&host));
            }
            continue;
        }
        let framing = [&b"content-length"[..], b"transfer-encoding", b"expect"];
        let seen = match framing.iter().position(|f| name.eq_ignore_ascii_case(f)) {
            Some(i) => &mut framing_seen[i],
            None => match UNIQUE.iter().position(|u| name.eq_ignore_ascii_case(u)) {
                Some(i) => &mut unique_seen[i],
                None => continue,
            },
        };
        if let Some(previous) = seen.replace((name, value)) {
            let line = duplicate_detail("header line", (name, value), previous);
            out.detail = Some((duplicate.context(), line));
            return (out, Some(duplicate));
        }
    }
    (out, None)
}

/// The error nginx answers for the part `seen` of a request line it could not fit, when that part
/// is already wrong (nginx reads the method, the target and the version as they arrive, before it
/// finds the line too long). `None`: the line is fine so far, so it is a 414.
pub(crate) fn line_prefix_error(seen: &[u8]) -> Option<Error> {
    // CRs before a request are skipped; a CR that ended the part read is the line's end to
    // come.
    let seen = super::skip_leading_cr(seen);
    let seen = seen.strip_suffix(b"\r").unwrap_or(seen);
    let invalid = Error::bad_request("client sent invalid request");
    let method_end = memchr::memchr(b' ', seen);
    let method = &seen[..method_end.unwrap_or(seen.len())];
    if method_end == Some(0) || !(method.is_empty() || nginx_method(method)) {
        return Some(Error::bad_request("client sent invalid method"));
    }
    let rest = skip_spaces(&seen[method_end?..]);
    let target_end = memchr::memchr(b' ', rest);
    let target = &rest[..target_end.unwrap_or(rest.len())];
    if target.iter().any(|&b| b <= 0x20 || b == 0x7f) {
        return Some(invalid);
    }
    match target.first() {
        None | Some(b'/') => {}
        Some(b) if b.is_ascii_alphabetic() => {
            let checked = match target_end {
                Some(_) => split_absolute(target).map(drop),
                None => absolute_prefix(target),
            };
            if let Err(e) = checked {
                return Some(e);
            }
        }
        Some(_) => return Some(invalid),
    }
    let rest = skip_spaces(&rest[target_end?..]);
    let version_end = memchr::memchr(b' ', rest);
    let version = &rest[..version_end.unwrap_or(rest.len())];
    let checked = match version_end {
        Some(_) => parse_version(version).map(drop),
        None => version_prefix(version).map(drop),
    };
    if let Err(e) = checked {
        return Some(e);
    }
    // After a whole version only spaces may come before the line's end.
    if !skip_spaces(&rest[version_end?..]).is_empty() {
        return Some(invalid);
    }
    None
}

/// The start of an absolute-form target: a scheme (its first letter checked by the caller),
/// `://`, then what can still become a host.
fn absolute_prefix(t: &[u8]) -> Result<(), Error> {
    let scheme_end = t.iter().position(|&b| !scheme_byte(b)).unwrap_or(t.len());
    let rest = &t[scheme_end..];
    if !(rest.starts_with(b"://") || b"://".starts_with(rest)) {
        return Err(Error::bad_request("client sent invalid request"));
    }
    let authority = rest.get(3..).unwrap_or_default();
    let ok = match authority.iter().position(|&b| b == b'/' || b == b'?') {
        Some(e) => valid_authority(&authority[..e]),
        None => valid_authority_prefix(authority),
    };
    if ok {
        Ok(())
    } else {
        Err(Error::bad_request("client sent invalid request"))
    }
}

fn skip_spaces(mut s: &[u8]) -> &[u8] {
    while let [b' ', rest @ ..] = s {
        s = rest;
    }
    s
}
