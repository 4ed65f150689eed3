//! The request sent upstream, as nginx's proxy module writes it (`create_request`):
//!
//! - the request line: the method, the URI by nginx's rules (a `proxy_pass` without a URI
//!   passes the client's URI as it was sent, unless a rewrite or an internal redirect changed
//!   it; with a URI part, that part replaces the location's prefix), and `HTTP/1.0` unless
//!   `proxy_http_version 1.1`;
//! - the headers: the `proxy_set_header` lines in order, then nginx's defaults they did not
//!   override (`Host: $proxy_host`, `Connection: close`, the body's `Content-Length`, and
//!   `TE`, `Keep-Alive`, `Expect`, `Upgrade` emptied), then the client's headers except those
//!   named by either list; a header whose value comes out empty is not sent.

use super::{HttpVersion, ProxyLoc};
use crate::variables::{Template, Vars};

/// nginx's default `proxy_set_header` list. `None` values are emptied headers (never sent, and
/// the client's are dropped); `Content-Length` is the body's, written by [`write_head`].
/// Request headers nginx's `ngx_http_proxy_cache_headers` set empty.
const CACHE_DROPPED: &[&str] = &[
    "If-Modified-Since",
    "If-Unmodified-Since",
    "If-None-Match",
    "If-Match",
    "Range",
    "If-Range",
];

const DEFAULTS: &[(&str, Option<&str>)] = &[
    ("Host", Some("$proxy_host")),
    ("Connection", Some("close")),
    ("Content-Length", None),
    ("Transfer-Encoding", None),
    ("TE", None),
    ("Keep-Alive", None),
    ("Expect", None),
    ("Upgrade", None),
];

/// The URI sent upstream.
pub struct UriParts<'a> {
    /// The client's request target as sent.
    pub unparsed: &'a [u8],
    /// Whether a rewrite or an internal redirect changed the URI (nginx's
    /// `!valid_unparsed_uri`).
    pub changed: bool,
    /// `$uri` now (decoded): the client's bytes unless a rewrite changed it.
    pub uri: &'a [u8],
    /// `$args` now: the client's bytes unless a rewrite changed them.
    pub args: Option<&'a [u8]>,
    /// The client's path had `%` or `+`, or the request is internal: `$uri` is escaped.
    pub escape: bool,
    /// A `rewrite ... break` changed the URI in this location: a URI part of `proxy_pass` is
    /// ignored.
    pub rewritten_break: bool,
}

impl<'a> UriParts<'a> {
    /// The parts of a request whose `$uri` and `$args` are now `rw`'s. Those are text, the
    /// client's bytes through the lossy decoder: when they still read the same the URI did not
    /// change, and the client's bytes (invalid UTF-8 too) are what goes upstream, as in nginx.
    pub fn new(
        req: &'a shoal_http::Request,
        rw: &'a crate::http::rewrite::State,
        internal: bool,
        escape: bool,
    ) -> UriParts<'a> {
        let path = req.path();
        let query = req.query();
        // The byte comparison is the usual answer; the decoder runs only when it fails.
        let same_uri = rw.uri.as_bytes() == path || *shoal_http::lossy(path) == *rw.uri;
        let args = rw.args.as_deref();
        let same_args = args.map(str::as_bytes) == query
            || matches!((query, args), (Some(q), Some(a)) if *shoal_http::lossy(q) == *a);
        // An absolute-form target without a path (`http://host?a`) has no URI to send as it
        // came: nginx sends the parsed one.
        let unparsed = req.uri();
        UriParts {
            unparsed,
            changed: internal
                || rw.internal
                || !same_uri
                || !same_args
                || unparsed.first() != Some(&b'/'),
            uri: if same_uri { path } else { rw.uri.as_bytes() },
            args: if same_args {
                query
            } else {
                args.map(str::as_bytes)
            },
            escape,
            rewritten_break: rw.rewritten_break,
        }
    }
}

/// The URI for a static `proxy_pass` (its URI part and location prefix given).
pub fn upstream_uri(parts: &UriParts<'_>, pass_uri: Option<&str>, location: &str) -> Vec<u8> {
    let mut out = Vec::with_capacity(parts.unparsed.len() + 16);
    let pass_uri = pass_uri.filter(|_| !parts.rewritten_break);
    match pass_uri {
        None if !parts.changed => out.extend_from_slice(parts.unparsed),
        _ => {
            let rest = match pass_uri {
                Some(p) => {
                    out.extend_from_slice(p.as_bytes());
                    parts.uri.get(location.len()..).unwrap_or_default()
                }
                None => parts.uri,
            };
            if parts.escape {
                escape_uri(rest, &mut out);
            } else {
                out.extend_from_slice(rest);
            }
            if let Some(a) = parts.args.filter(|a| !a.is_empty()) {
                out.push(b'?');
                out.extend_from_slice(a);
            }
        }
    }
    out
}

/// nginx's `NGX_ESCAPE_URI`: controls, space, `#`, `%`, `?` and bytes above 0x7e.
pub fn escape_uri(v: &[u8], out: &mut Vec<u8>) {
    const HEX: &[u8; 16] = b"0123456789ABCDEF";
    for &c in v {
        if c <= b' ' || c >= 0x7f || matches!(c, b'#' | b'%' | b'?') {
            out.extend_from_slice(&[b'%', HEX[(c >> 4) as usize], HEX[(c & 15) as usize]]);
        } else {
            out.push(c);
        }
    }
}

/// What the request line and the framing headers say.
pub struct Head<'a> {
    pub method: &'a str,
    pub uri: &'a [u8],
    /// The length of the body that follows.
    pub body_len: Option<u64>,
    pub chunked: bool,
    /// The answer may be stored (nginx's `u->cacheable`): the client's `Range` and `If-*`
    /// stay home.
    pub cacheable: bool,
}

/// Writes the request line and headers.
pub fn write_head(out: &mut Vec<u8>, head: &Head<'_>, conf: &ProxyLoc, vars: &Vars<'_>) {
    let &Head {
        method,
        uri,
        body_len,
        chunked,
        cacheable,
    } = head;
    out.extend_from_slice(method.as_bytes());
    out.push(b' ');
    out.extend_from_slice(uri);
    out.extend_from_slice(match conf.http_version() {
        HttpVersion::V10 => b" HTTP/1.0\r\n",
        HttpVersion::V11 => b" HTTP/1.1\r\n",
    });
    let set: &[(String, Template)] = conf.set_header.as_deref().map_or(&[], Vec::as_slice);
    let overridden = |name: &[u8]| {
        set.iter()
            .any(|(n, _)| n.as_bytes().eq_ignore_ascii_case(name))
    };
    let mut value = String::new();
    for (name, t) in set {
        if name.eq_ignore_ascii_case("Content-Length") {
            // nginx's `$proxy_internal_body_length` stands for it when set literally.
            if let Some(n) = body_len {
                header_line(out, name, n.to_string().as_bytes());
            }
            continue;
        }
        value.clear();
        vars.eval_into(t, &mut value);
        if !value.is_empty() {
            header_line(out, name, value.as_bytes());
        }
    }
    for (name, default) in DEFAULTS {
        if overridden(name.as_bytes()) {
            continue;
        }
        match (*name, default) {
            ("Content-Length", _) => {
                if let Some(n) = body_len {
                    header_line(out, name, n.to_string().as_bytes());
                }
            }
            // A body streamed from a chunked client request (`proxy_request_buffering off`).
            ("Transfer-Encoding", _) if chunked => header_line(out, name, b"chunked"),
            ("Host", _) => {
                let host = vars.upstream.map_or("", |u| &*u.proxy_host);
                header_line(out, name, host.as_bytes());
            }
            (_, Some(v)) => header_line(out, name, v.as_bytes()),
            (_, None) => {}
        }
    }
    // nginx's cache headers: `If-Modified-Since: $upstream_cache_last_modified` and
    // `If-None-Match: $upstream_cache_etag` (set only when revalidating an expired object).
    if let Some((lm, etag)) = vars.upstream.and_then(|u| u.cache_validators.as_ref()) {
        if let (Some(v), false) = (lm, overridden(b"If-Modified-Since")) {
            header_line(out, "If-Modified-Since", v.as_bytes());
        }
        if let (Some(v), false) = (etag, overridden(b"If-None-Match")) {
            header_line(out, "If-None-Match", v.as_bytes());
        }
    }
    if conf.pass_request_headers() {
        if let Some(req) = vars.req {
            // The names kept are ASCII: nginx's name characters, or with
            // `ignore_invalid_headers off` RFC tokens (the head parser refuses anything else).
            for (name, v) in req.header_fields() {
                let named = |d: &&str| d.as_bytes().eq_ignore_ascii_case(name);
                if overridden(name) || DEFAULTS.iter().any(|(d, _)| named(d)) {
                    continue;
                }
                // For an answer that may be stored, nginx's cache headers empty these (what
                // is stored must be the whole, unconditional answer); a scarce request, or a
                // range past `proxy_cache_max_range_offset`, sends them on.
                if cacheable && CACHE_DROPPED.iter().any(named) {
                    continue;
                }
                header_line(out, name, v);
            }
        }
    }
    out.extend_from_slice(b"\r\n");
}

fn header_line(out: &mut Vec<u8>, name: impl AsRef<[u8]>, value: &[u8]) {
    out.extend_from_slice(name.as_ref());
    out.extend_from_slice(b": ");
    out.extend_from_slice(value);
    out.extend_from_slice(b"\r\n");
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parts<'a>(unparsed: &'a [u8], uri: &'a str, args: Option<&'a str>) -> UriParts<'a> {
        UriParts {
            unparsed,
            changed: false,
            uri: uri.as_bytes(),
            args: args.map(str::as_bytes),
            escape: false,
            rewritten_break: false,
        }
    }

    #[test]
    fn without_uri_part_the_client_uri_goes_as_sent() {
        let p = parts(b"/a%20b/../c?x=1", "/c", Some("x=1"));
        assert_eq!(upstream_uri(&p, None, "/"), b"/a%20b/../c?x=1");
    }

    #[test]
    fn a_changed_uri_goes_escaped_when_the_client_escaped() {
        let mut p = parts(b"/a%20b?x=1", "/new path", Some("y=2"));
        p.changed = true;
        p.escape = true;
        assert_eq!(upstream_uri(&p, None, "/"), b"/new%20path?y=2");
        p.escape = false;
        assert_eq!(upstream_uri(&p, None, "/"), b"/new path?y=2");
    }

    #[test]
    fn a_uri_part_replaces_the_location_prefix() {
        let p = parts(b"/one/x/y?q", "/one/x/y", Some("q"));
        assert_eq!(upstream_uri(&p, Some("/two/"), "/one/"), b"/two/x/y?q");
        let p = parts(b"/one", "/one", None);
        assert_eq!(upstream_uri(&p, Some("/"), "/one"), b"/");
    }

    #[test]
    fn after_rewrite_break_the_uri_part_is_ignored() {
        let mut p = parts(b"/one/x", "/other", None);
        p.changed = true;
        p.rewritten_break = true;
        assert_eq!(upstream_uri(&p, Some("/two/"), "/one/"), b"/other");
    }

    #[test]
    fn escaping_is_nginx_uri_escaping() {
        let mut out = Vec::new();
        escape_uri("a b#c%d?e/f&g+h\u{e9}".as_bytes(), &mut out);
        assert_eq!(out, b"a%20b%23c%25d%3Fe/f&g+h%C3%A9");
    }
}
