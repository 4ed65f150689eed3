//! The upstream answer's headers the layer treats apart, by name: hop-by-hop lines, nginx's
//! hidden ones, and those the client's answer takes into its own fields.

/// The upstream headers the proxy treats apart, by name (any case).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UpstreamHeader {
    /// `Connection`, `Keep-Alive`, `Transfer-Encoding`, `Content-Length`: the upstream
    /// connection's own, never passed as they came.
    HopByHop,
    /// Hidden from the client unless `proxy_pass_header` names it (nginx's
    /// `ngx_http_proxy_hide_headers`): `Date`, `Server`, `X-Pad`, `X-Accel-*`.
    Hidden,
    /// `X-Accel-Buffering` (hidden too).
    XAccelBuffering,
    ContentType,
    AcceptRanges,
    Location,
    Refresh,
    /// `Set-Cookie` (the proxy's `proxy_cookie_*` rewrite it).
    SetCookie,
    Other,
}

/// Whether header name `name` is `lit` (lowercase) whatever its case. Every byte is
/// compared (no early exit: a loop the compiler can widen), a letter's case bit folded.
#[inline]
pub(crate) fn folded_eq(name: &[u8], lit: &[u8]) -> bool {
    name.len() == lit.len()
        && name.iter().zip(lit).fold(0u8, |diff, (&a, &b)| {
            let fold = if b.is_ascii_lowercase() { 0x20 } else { 0 };
            diff | ((a | fold) ^ b)
        }) == 0
}

impl UpstreamHeader {
    /// Looks a name up: by its length first, so most names are compared once or not at all.
    pub fn of(name: &[u8]) -> UpstreamHeader {
        use UpstreamHeader::*;
        let is = |lit: &[u8]| folded_eq(name, lit);
        match name.len() {
            4 if is(b"date") => Hidden,
            5 if is(b"x-pad") => Hidden,
            6 if is(b"server") => Hidden,
            7 if is(b"refresh") => Refresh,
            8 if is(b"location") => Location,
            10 if is(b"connection") || is(b"keep-alive") => HopByHop,
            10 if is(b"set-cookie") => SetCookie,
            12 if is(b"content-type") => ContentType,
            13 if is(b"accept-ranges") => AcceptRanges,
            14 if is(b"content-length") => HopByHop,
            15 if is(b"x-accel-expires") || is(b"x-accel-charset") => Hidden,
            16 if is(b"x-accel-redirect") => Hidden,
            17 if is(b"transfer-encoding") => HopByHop,
            17 if is(b"x-accel-buffering") => XAccelBuffering,
            18 if is(b"x-accel-limit-rate") => Hidden,
            _ => Other,
        }
    }

    /// One of nginx's hidden headers.
    pub fn hidden(self) -> bool {
        matches!(
            self,
            UpstreamHeader::Hidden | UpstreamHeader::XAccelBuffering
        )
    }
}

#[cfg(test)]
mod tests {
    use super::UpstreamHeader;

    /// The names compared one by one, as the lookup replaced them.
    fn by_comparison(name: &str) -> UpstreamHeader {
        let is = |n: &str| name.eq_ignore_ascii_case(n);
        if [
            "connection",
            "keep-alive",
            "transfer-encoding",
            "content-length",
        ]
        .iter()
        .any(|n| is(n))
        {
            UpstreamHeader::HopByHop
        } else if is("x-accel-buffering") {
            UpstreamHeader::XAccelBuffering
        } else if [
            "date",
            "server",
            "x-pad",
            "x-accel-expires",
            "x-accel-redirect",
            "x-accel-limit-rate",
            "x-accel-charset",
        ]
        .iter()
        .any(|n| is(n))
        {
            UpstreamHeader::Hidden
        } else if is("content-type") {
            UpstreamHeader::ContentType
        } else if is("accept-ranges") {
            UpstreamHeader::AcceptRanges
        } else if is("location") {
            UpstreamHeader::Location
        } else if is("refresh") {
            UpstreamHeader::Refresh
        } else if is("set-cookie") {
            UpstreamHeader::SetCookie
        } else {
            UpstreamHeader::Other
        }
    }

    #[test]
    fn upstream_headers_are_known_in_any_case() {
        let names = [
            "Connection",
            "KEEP-ALIVE",
            "transfer-encoding",
            "Content-Length",
            "X-Accel-Buffering",
            "date",
            "Server",
            "X-Pad",
            "x-accel-expires",
            "X-Accel-Redirect",
            "X-ACCEL-LIMIT-RATE",
            "X-Accel-Charset",
            "Content-Type",
            "Accept-Ranges",
            "LOCATION",
            "Refresh",
            // Near misses: same length, one byte off.
            "Connectiom",
            "keep_alive",
            "Content-Typf",
            "Locatiom",
            "Dat3",
            "Serve",
            "X-Pads",
            "X-Accel-Bufferinh",
            "Transfer-Encodinf",
            "",
            "ETag",
            "Cache-Control",
            "Set-Cookie",
            "SET-COOKIE",
            "Set-Cookif",
        ];
        for n in names {
            assert_eq!(UpstreamHeader::of(n.as_bytes()), by_comparison(n), "{n}");
        }
        assert!(UpstreamHeader::of(b"SERVER").hidden());
        assert!(UpstreamHeader::of(b"x-accel-buffering").hidden());
        assert!(!UpstreamHeader::of(b"Content-Type").hidden());
    }
}
