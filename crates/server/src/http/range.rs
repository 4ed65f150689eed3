//! Byte ranges: `Range` and `If-Range` decided exactly as nginx's range filter decides them,
//! and the bytes of the 206 answers it builds (`Content-Range`, `multipart/byteranges`).
//!
//! Pure: no I/O, no configuration, no clock. The static handler asks [`if_range_allows`] and
//! [`parse`], then answers 206 with [`content_range`] or a [`Multipart`] body, 416 with
//! [`unsatisfiable_content_range`], or the whole file with 200.
//!
//! The one thing to know: nginx is not RFC 9110 here, and shoal follows nginx. A header that is
//! not `bytes=...` is ignored, but a malformed range set after `bytes=` is answered 416; too many
//! ranges, or ranges adding up to more than the file, are ignored (200). Where nginx sends
//! `Accept-Ranges: bytes` is the caller's business: on every 200 that reached the range filter
//! (including the [`Ranges::Full`] decisions below), but never when `max_ranges` is 0.

/// The half-open span `[start, end)` of the file one range selects; never empty.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ByteRange {
    pub start: u64,
    /// Exclusive.
    pub end: u64,
}

/// What nginx does with a request's `Range` header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ranges {
    /// Serve the whole file with 200, as if there were no `Range` header.
    Full,
    /// 206: one range is a `Content-Range` answer, several a `multipart/byteranges` one.
    Satisfiable(Vec<ByteRange>),
    /// 416 with `Content-Range: bytes */SIZE`.
    Unsatisfiable,
}

/// nginx's `off_t` limit: numbers past it, and range sums past it, are answered 416.
const MAX_OFF_T: i64 = i64::MAX;

/// nginx's boundary is `%0muA`: an atomic counter zero-padded to `NGX_ATOMIC_T_LEN`, which is
/// 20 on 64-bit platforms (`sizeof("-9223372036854775808") - 1`).
const BOUNDARY_DIGITS: usize = 20;

/// Decides the `Range` header `header` (the value, without the name) for a file of `size`
/// bytes, as `ngx_http_range_header_filter` and `ngx_http_range_parse` do. `max_ranges` is the
/// directive's value, `None` when unset (nginx: unlimited). Call it only when the response is a
/// 200 with a known length and [`if_range_allows`] (if the request has `If-Range`) said yes.
pub fn parse(header: &[u8], size: u64, max_ranges: Option<u64>) -> Ranges {
    // `max_ranges 0`: nginx's header filter returns before it looks at Range (and it then sends
    // no `Accept-Ranges` either).
    if max_ranges == Some(0) {
        return Ranges::Full;
    }
    // Shorter than 7 bytes, or a unit other than `bytes=` (case-insensitive): ignored.
    if header.len() < 7 || !header[..6].eq_ignore_ascii_case(b"bytes=") {
        return Ranges::Full;
    }
    parse_set(&header[6..], size, max_ranges.unwrap_or(u64::MAX))
}

/// `ngx_http_range_parse` on the range set after `bytes=`; `left` is how many satisfiable ranges
/// may still come.
fn parse_set(set: &[u8], size: u64, mut left: u64) -> Ranges {
    // nginx's `content_length_n` is an `off_t`.
    let len = i64::try_from(size).unwrap_or(MAX_OFF_T);
    let mut cur = Cursor { set, p: 0 };
    let mut ranges = Vec::new();
    let mut total: i64 = 0;
    loop {
        // Any syntax error in any range (a letter, a tab, a missing number, an empty range
        // between commas, a trailing comma) makes nginx answer 416, not ignore the header.
        let Some((start, end)) = cur.range_spec(len) else {
            return Ranges::Unsatisfiable;
        };
        if start < end {
            ranges.push(ByteRange {
                start: start as u64,
                end: end as u64,
            });
            // A sum past off_t's max is answered 416 (before the max_ranges check).
            if total > MAX_OFF_T - (end - start) {
                return Ranges::Unsatisfiable;
            }
            total += end - start;
            // One satisfiable range more than `max_ranges`: nginx declines, the header is
            // ignored, even if what follows is malformed.
            if left == 0 {
                return Ranges::Full;
            }
            left -= 1;
        } else if start == 0 {
            // An empty range from 0 (`0-`, `0-N` or `-N` on an empty file): nginx declines and
            // serves the (empty) file with 200.
            return Ranges::Full;
        }
        // Otherwise the range starts at or past the end (or `first > last`): nginx skips it.
        if cur.at() != b',' {
            break;
        }
        cur.p += 1;
    }
    if ranges.is_empty() {
        // No range was satisfiable: 416.
        return Ranges::Unsatisfiable;
    }
    if total > len {
        // Ranges adding up to more than the file (overlap amplification): nginx declines, 200.
        return Ranges::Full;
    }
    Ranges::Satisfiable(ranges)
}

/// A read position in the range set. nginx reads the header value as a NUL-terminated string,
/// so reading past the end gives 0, and a NUL (which nginx's header parser rejects) ends it.
struct Cursor<'a> {
    set: &'a [u8],
    p: usize,
}

impl Cursor<'_> {
    fn at(&self) -> u8 {
        self.set.get(self.p).copied().unwrap_or(0)
    }

    /// nginx skips only spaces (no tabs), and only around the numbers and the dash.
    fn skip_spaces(&mut self) {
        while self.at() == b' ' {
            self.p += 1;
        }
    }

    /// At least one digit; `None` (416) when there is none or the number passes off_t's max.
    fn number(&mut self) -> Option<i64> {
        if !self.at().is_ascii_digit() {
            return None;
        }
        let mut n: i64 = 0;
        while self.at().is_ascii_digit() {
            let d = i64::from(self.at() - b'0');
            if n >= MAX_OFF_T / 10 && (n > MAX_OFF_T / 10 || d > MAX_OFF_T % 10) {
                return None;
            }
            n = n * 10 + d;
            self.p += 1;
        }
        Some(n)
    }

    /// One `first-last`, `first-` or `-suffix` as `[start, end)` clamped to `len`, leaving the
    /// cursor on the `,` or the end after it; `None` is nginx's 416 for bad syntax.
    fn range_spec(&mut self, len: i64) -> Option<(i64, i64)> {
        self.skip_spaces();
        let suffix = self.at() == b'-';
        let mut start = 0;
        if suffix {
            // `- 5`: nginx allows no space between the dash and a suffix length.
            self.p += 1;
        } else {
            start = self.number()?;
            self.skip_spaces();
            if self.at() != b'-' {
                return None;
            }
            self.p += 1;
            self.skip_spaces();
            if matches!(self.at(), b',' | 0) {
                // `first-`: to the end of the file.
                return Some((start, len));
            }
        }
        let last = self.number()?;
        self.skip_spaces();
        if !matches!(self.at(), b',' | 0) {
            return None;
        }
        if suffix {
            // `-N`: the last N bytes, the whole file if N >= size; `-0` is empty, so it is
            // skipped (416 if alone) on a non-empty file and declined (200) on an empty one.
            return Some((if last < len { len - last } else { 0 }, len));
        }
        // `first-last`: `last` past the end is clamped to the last byte.
        Some((start, if last >= len { len } else { last + 1 }))
    }
}

/// The range header filter's reading of a request for a `size`-byte answer whose validators
/// are `etag` and `last_modified_secs` (-1: none): `None` when it asks for no range or its
/// `If-Range` no longer holds (the whole answer goes), else what its `Range` asks for.
pub fn requested(
    req: &shoal_http::Request,
    size: u64,
    etag: &str,
    last_modified_secs: i64,
    max_ranges: Option<u64>,
) -> Option<Ranges> {
    if let Some(v) = req.header("if-range") {
        if !if_range_allows(v, etag, last_modified_secs) {
            return None;
        }
    }
    req.header("range").map(|h| parse(h, size, max_ranges))
}

/// nginx's `If-Range` rule: a value of 2+ bytes ending in `"` is an entity tag and must equal
/// our `ETag` byte for byte (so `W/"x"` never matches a strong `"x"`); anything else is an HTTP
/// date that must equal Last-Modified to the second. `etag` is `""` when the response has no
/// ETag, `last_modified_secs` is -1 when it has no Last-Modified (nginx's convention); either
/// missing, or an unparsable date, means false: serve the full 200.
pub fn if_range_allows(if_range: &[u8], etag: &str, last_modified_secs: i64) -> bool {
    if if_range.len() >= 2 && if_range.last() == Some(&b'"') {
        // nginx compares the raw bytes: a weak `W/"x"` matches only an identical weak ETag.
        return !etag.is_empty() && if_range == etag.as_bytes();
    }
    if last_modified_secs == -1 {
        return false;
    }
    shoal_http::date::parse_http_time(if_range) == Some(last_modified_secs)
}

/// The `Content-Range` of a single-range 206: `bytes START-LAST/SIZE`.
pub fn content_range(r: &ByteRange, size: u64) -> String {
    debug_assert!(r.start < r.end, "parse never yields an empty range");
    format!("bytes {}-{}/{}", r.start, r.end - 1, size)
}

/// The `Content-Range` of a 416: `bytes */SIZE`.
pub fn unsatisfiable_content_range(size: u64) -> String {
    format!("bytes */{size}")
}

/// A `multipart/byteranges` body in nginx's layout: for each part its header bytes, then the
/// file's bytes of its range; after the last part, the trailer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Multipart {
    pub boundary: String,
    /// `CRLF --BOUNDARY CRLF [Content-Type: TYPE CRLF] Content-Range: bytes S-E/SIZE CRLF CRLF`
    /// and the range whose bytes follow it.
    pub parts: Vec<(Vec<u8>, ByteRange)>,
    /// `CRLF --BOUNDARY-- CRLF`.
    pub trailer: Vec<u8>,
}

impl Multipart {
    /// The response's `Content-Type` (it replaces the file's; nginx drops the charset too).
    pub fn content_type(&self) -> String {
        format!("multipart/byteranges; boundary={}", self.boundary)
    }

    /// The exact `Content-Length` of the body: part headers, range bytes and trailer.
    pub fn total_len(&self) -> u64 {
        let parts: u64 = self
            .parts
            .iter()
            .map(|(head, r)| head.len() as u64 + (r.end - r.start))
            .sum();
        parts + self.trailer.len() as u64
    }
}

/// Builds the multipart answer for `ranges` of a file of `size` bytes whose response
/// `Content-Type` is `content_type` (with its `; charset=...`, or `""` for none, in which case
/// nginx writes no Content-Type line in the parts). `boundary_seed` is nginx's
/// `ngx_next_temp_number(0)`: a counter shared by all workers, 1 for the first multipart answer
/// (or temporary file) after start.
pub fn multipart(
    ranges: &[ByteRange],
    size: u64,
    content_type: &str,
    boundary_seed: u64,
) -> Multipart {
    let boundary = format!("{boundary_seed:0BOUNDARY_DIGITS$}");
    let mut head = format!("\r\n--{boundary}\r\n");
    if !content_type.is_empty() {
        head.push_str(&format!("Content-Type: {content_type}\r\n"));
    }
    head.push_str("Content-Range: bytes ");
    let parts = ranges
        .iter()
        .map(|r| {
            debug_assert!(r.start < r.end, "parse never yields an empty range");
            let part = format!("{head}{}-{}/{size}\r\n\r\n", r.start, r.end - 1);
            (part.into_bytes(), *r)
        })
        .collect();
    let trailer = format!("\r\n--{boundary}--\r\n").into_bytes();
    Multipart {
        boundary,
        parts,
        trailer,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn r(start: u64, end: u64) -> ByteRange {
        ByteRange { start, end }
    }

    fn ok(v: &[(u64, u64)]) -> Ranges {
        Ranges::Satisfiable(v.iter().map(|&(s, e)| r(s, e)).collect())
    }

    fn p(h: &str, size: u64) -> Ranges {
        parse(h.as_bytes(), size, None)
    }

    #[test]
    fn unit_prefix() {
        assert_eq!(p("bytes=0-1", 10), ok(&[(0, 2)]));
        assert_eq!(p("BYTES=0-1", 10), ok(&[(0, 2)]));
        assert_eq!(p("items=0-1", 10), Ranges::Full);
        assert_eq!(p("bytes 0-1", 10), Ranges::Full);
        assert_eq!(p(" bytes=0-1", 10), Ranges::Full);
        assert_eq!(p("bytes=", 10), Ranges::Full);
        assert_eq!(p("", 10), Ranges::Full);
        // Seven bytes or more and `bytes=`: parsed, so a bad set is 416.
        assert_eq!(p("bytes= ", 10), Ranges::Unsatisfiable);
        assert_eq!(p("bytes=x", 10), Ranges::Unsatisfiable);
    }

    #[test]
    fn syntax_errors_are_416() {
        for h in [
            "bytes=0-1,",
            "bytes=0-1,,2-3",
            "bytes=,0-1",
            "bytes=a-b",
            "bytes=1-2-3",
            "bytes=\t0-1",
            "bytes=0-1\t",
            "bytes=0-1;",
            "bytes=- 5",
            "bytes=-",
            "bytes=--1",
            "bytes=+1-2",
            "bytes=1",
            "bytes=1 2-3",
            "bytes=0-x",
            "bytes=0-1 x",
        ] {
            assert_eq!(p(h, 100), Ranges::Unsatisfiable, "{h}");
        }
    }

    #[test]
    fn spaces() {
        assert_eq!(p("bytes= 0 - 1 ", 100), ok(&[(0, 2)]));
        assert_eq!(p("bytes=5 - 10 ,  20-", 100), ok(&[(5, 11), (20, 100)]));
        assert_eq!(p("bytes= -5", 100), ok(&[(95, 100)]));
        assert_eq!(p("bytes=0-1, 5-", 100), ok(&[(0, 2), (5, 100)]));
    }

    #[test]
    fn suffix() {
        assert_eq!(p("bytes=-10", 100), ok(&[(90, 100)]));
        assert_eq!(p("bytes=-100", 100), ok(&[(0, 100)]));
        assert_eq!(p("bytes=-1000", 100), ok(&[(0, 100)]));
        assert_eq!(p("bytes=-0", 100), Ranges::Unsatisfiable);
        assert_eq!(p("bytes=-0,-1", 100), ok(&[(99, 100)]));
    }

    #[test]
    fn open_ended_and_clamping() {
        assert_eq!(p("bytes=10-", 100), ok(&[(10, 100)]));
        assert_eq!(p("bytes=99-", 100), ok(&[(99, 100)]));
        assert_eq!(p("bytes=100-", 100), Ranges::Unsatisfiable);
        assert_eq!(p("bytes=50-1000", 100), ok(&[(50, 100)]));
        assert_eq!(p("bytes=0-99", 100), ok(&[(0, 100)]));
        assert_eq!(p("bytes=0-0", 100), ok(&[(0, 1)]));
        assert_eq!(p("bytes=0-9223372036854775807", 100), ok(&[(0, 100)]));
    }

    #[test]
    fn unsatisfiable_ranges_are_skipped() {
        assert_eq!(p("bytes=100-200", 100), Ranges::Unsatisfiable);
        assert_eq!(p("bytes=5-3", 100), Ranges::Unsatisfiable);
        assert_eq!(p("bytes=5-3,0-1", 100), ok(&[(0, 2)]));
        assert_eq!(p("bytes=200-300,0-1,150-", 100), ok(&[(0, 2)]));
        assert_eq!(p("bytes=200-300,150-", 100), Ranges::Unsatisfiable);
        // A skipped range is still parsed: bad syntax after it is 416.
        assert_eq!(p("bytes=0-1,200-300,x", 100), Ranges::Unsatisfiable);
    }

    #[test]
    fn multiple() {
        assert_eq!(p("bytes=0-0,2-3,-1", 100), ok(&[(0, 1), (2, 4), (99, 100)]));
        // Overlap is allowed while the sum stays within the file, in the client's order.
        assert_eq!(p("bytes=5-9,0-3", 10), ok(&[(5, 10), (0, 4)]));
    }

    #[test]
    fn sum_past_size_is_full() {
        assert_eq!(p("bytes=0-9,0-9", 10), Ranges::Full);
        assert_eq!(p("bytes=0-5,5-9", 10), Ranges::Full);
        assert_eq!(p("bytes=0-4,5-9", 10), ok(&[(0, 5), (5, 10)]));
        assert_eq!(p("bytes=0-,-1", 10), Ranges::Full);
    }

    #[test]
    fn overflow() {
        assert_eq!(p("bytes=0-9223372036854775808", 100), Ranges::Unsatisfiable);
        assert_eq!(p("bytes=9223372036854775808-", 100), Ranges::Unsatisfiable);
        assert_eq!(p("bytes=-9223372036854775808", 100), Ranges::Unsatisfiable);
        assert_eq!(
            p("bytes=-99999999999999999999999", 100),
            Ranges::Unsatisfiable
        );
        assert_eq!(p("bytes=9223372036854775807-", 100), Ranges::Unsatisfiable);
        assert_eq!(p("bytes=-9223372036854775807", 100), ok(&[(0, 100)]));
        // The running sum passing off_t's max is 416, not the sum > size decline.
        let max = i64::MAX as u64;
        assert_eq!(p("bytes=0-,0-", max), Ranges::Unsatisfiable);
        assert_eq!(p("bytes=0-", u64::MAX), ok(&[(0, max)]));
    }

    #[test]
    fn max_ranges() {
        let h = b"bytes=0-1,2-3,4-5";
        assert_eq!(parse(h, 100, Some(3)), ok(&[(0, 2), (2, 4), (4, 6)]));
        assert_eq!(parse(h, 100, Some(2)), Ranges::Full);
        assert_eq!(parse(h, 100, Some(1)), Ranges::Full);
        assert_eq!(parse(b"bytes=0-1", 100, Some(1)), ok(&[(0, 2)]));
        // Only satisfiable ranges count.
        assert_eq!(parse(b"bytes=0-1,500-", 100, Some(1)), ok(&[(0, 2)]));
        // The decline happens as soon as one too many is seen, before later syntax errors.
        assert_eq!(parse(b"bytes=0-1,2-3,x", 100, Some(1)), Ranges::Full);
        assert_eq!(parse(b"bytes=0-1,2-3,x", 100, None), Ranges::Unsatisfiable);
        // `max_ranges 0` ignores every Range header, even a malformed one.
        assert_eq!(parse(b"bytes=0-1", 100, Some(0)), Ranges::Full);
        assert_eq!(parse(b"bytes=x", 100, Some(0)), Ranges::Full);
        assert_eq!(parse(b"bytes=500-", 100, Some(0)), Ranges::Full);
    }

    #[test]
    fn empty_file() {
        assert_eq!(p("bytes=0-", 0), Ranges::Full);
        assert_eq!(p("bytes=0-0", 0), Ranges::Full);
        assert_eq!(p("bytes=0-10", 0), Ranges::Full);
        assert_eq!(p("bytes=-1", 0), Ranges::Full);
        assert_eq!(p("bytes=-0", 0), Ranges::Full);
        assert_eq!(p("bytes=1-", 0), Ranges::Unsatisfiable);
        assert_eq!(p("bytes=1-2,0-", 0), Ranges::Full);
        assert_eq!(p("bytes=x", 0), Ranges::Unsatisfiable);
    }

    #[test]
    fn content_ranges() {
        assert_eq!(content_range(&r(0, 1), 10), "bytes 0-0/10");
        assert_eq!(content_range(&r(5, 10), 10), "bytes 5-9/10");
        assert_eq!(unsatisfiable_content_range(10), "bytes */10");
        assert_eq!(unsatisfiable_content_range(0), "bytes */0");
    }

    const LM: i64 = 784_111_777; // Sun, 06 Nov 1994 08:49:37 GMT

    #[test]
    fn if_range_etag() {
        let etag = "\"5e8f-1a\"";
        assert!(if_range_allows(b"\"5e8f-1a\"", etag, LM));
        assert!(!if_range_allows(b"\"5e8f-1b\"", etag, LM));
        assert!(!if_range_allows(b"W/\"5e8f-1a\"", etag, LM));
        assert!(!if_range_allows(b"\"5e8f-1a\"", "", LM));
        assert!(!if_range_allows(b"\"5E8F-1A\"", etag, LM));
        // nginx compares bytes: a weak tag matches only the identical weak ETag.
        assert!(if_range_allows(b"W/\"x\"", "W/\"x\"", LM));
        assert!(!if_range_allows(b"\"x\"", "W/\"x\"", LM));
        // Not ending in `"`: a date, so an unterminated tag is unparsable.
        assert!(!if_range_allows(b"\"5e8f-1a", etag, LM));
        assert!(!if_range_allows(b"\"", "\"", LM));
    }

    #[test]
    fn if_range_date() {
        let allows = |v: &str, lm| if_range_allows(v.as_bytes(), "\"e\"", lm);
        assert!(allows("Sun, 06 Nov 1994 08:49:37 GMT", LM));
        assert!(allows("Sunday, 06-Nov-94 08:49:37 GMT", LM));
        assert!(allows("Sun Nov  6 08:49:37 1994", LM));
        assert!(allows("Sun Nov 06 08:49:37 1994", LM));
        // nginx checks neither the weekday nor the zone.
        assert!(allows("Xyz, 06 Nov 1994 08:49:37", LM));
        assert!(allows("Sun, 06 Nov 1994 08:49:37 PST", LM));
        // Exactly equal, not "not modified since".
        assert!(!allows("Sun, 06 Nov 1994 08:49:38 GMT", LM));
        assert!(!allows("Sun, 06 Nov 1994 08:49:36 GMT", LM));
        assert!(!allows("Sun, 06 Nov 1994 08:49:37 GMT", -1));
        assert!(allows("Tue, 29 Feb 2000 00:00:00 GMT", 951_782_400));
        assert!(allows("Fri, 01 Jan 2100 00:00:00 GMT", 4_102_444_800));
        assert!(allows("Thu, 01 Jan 1970 00:00:00 GMT", 0));
        assert!(allows("Wed, 31 Dec 1969 23:59:58 GMT", -2));
        for bad in [
            "",
            "garbage",
            "Sun, 6 Nov 1994 08:49:37 GMT",
            "Sun, 06 Nov 1994 24:00:00 GMT",
            "Sun, 06 Nov 1994 08:60:00 GMT",
            "Sun, 31 Nov 1994 08:49:37 GMT",
            "Thu, 29 Feb 2001 00:00:00 GMT",
            "Mon, 29 Feb 1900 00:00:00 GMT",
            "Sun, 06 Xov 1994 08:49:37 GMT",
            "Sun, 06 Nov 94 08:49:37 GMT",
            "Sun, 06 Nov 1994 08-49:37 GMT",
            "Sun, 06 Nov 1994 08:49",
        ] {
            assert!(!allows(bad, LM), "{bad}");
        }
    }

    #[test]
    fn multipart_exact_bytes() {
        let body = b"0123456789";
        let ranges = [r(0, 2), r(5, 6)];
        let m = multipart(&ranges, 10, "text/plain; charset=utf-8", 1);
        assert_eq!(m.boundary, "00000000000000000001");
        assert_eq!(
            m.content_type(),
            "multipart/byteranges; boundary=00000000000000000001"
        );
        let mut out = Vec::new();
        for (head, r) in &m.parts {
            out.extend_from_slice(head);
            out.extend_from_slice(&body[r.start as usize..r.end as usize]);
        }
        out.extend_from_slice(&m.trailer);
        let want = "\r\n--00000000000000000001\r\n\
                    Content-Type: text/plain; charset=utf-8\r\n\
                    Content-Range: bytes 0-1/10\r\n\r\n\
                    01\
                    \r\n--00000000000000000001\r\n\
                    Content-Type: text/plain; charset=utf-8\r\n\
                    Content-Range: bytes 5-5/10\r\n\r\n\
                    5\
                    \r\n--00000000000000000001--\r\n";
        assert_eq!(String::from_utf8(out.clone()).unwrap(), want);
        assert_eq!(m.total_len(), out.len() as u64);
    }

    #[test]
    fn multipart_without_content_type() {
        let m = multipart(&[r(1, 3), r(7, 10)], 10, "", 12_345);
        assert_eq!(
            m.parts[0].0,
            b"\r\n--00000000000000012345\r\nContent-Range: bytes 1-2/10\r\n\r\n"
        );
        assert_eq!(m.trailer, b"\r\n--00000000000000012345--\r\n");
        let heads: u64 = m.parts.iter().map(|(h, _)| h.len() as u64).sum();
        assert_eq!(m.total_len(), heads + 2 + 3 + m.trailer.len() as u64);
        assert_eq!(multipart(&[r(0, 1)], 1, "", u64::MAX).boundary.len(), 20);
    }

    /// xorshift64: a fixed, dependency-free stream for the randomized check.
    struct Rng(u64);

    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0
        }

        fn below(&mut self, n: u64) -> u64 {
            self.next() % n
        }
    }

    #[test]
    fn random_headers_never_panic_and_stay_in_bounds() {
        const PIECES: &[&str] = &[
            "0",
            "1",
            "5",
            "9",
            "-",
            "-",
            ",",
            ",",
            " ",
            "\t",
            "x",
            "\0",
            "99",
            "100",
            "101",
            "9223372036854775807",
            "9223372036854775808",
            "18446744073709551616",
        ];
        let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
        for _ in 0..10_000 {
            let mut h = if rng.below(8) == 0 {
                b"Bytes=".to_vec()
            } else {
                b"bytes=".to_vec()
            };
            for _ in 0..rng.below(12) {
                let piece = PIECES[rng.below(PIECES.len() as u64) as usize];
                h.extend_from_slice(piece.as_bytes());
            }
            let size = match rng.below(4) {
                0 => 0,
                1 => rng.below(200),
                2 => rng.next(),
                _ => rng.below(20),
            };
            let max = match rng.below(3) {
                0 => None,
                _ => Some(rng.below(4)),
            };
            if let Ranges::Satisfiable(v) = parse(&h, size, max) {
                assert!(!v.is_empty());
                assert!(max.is_none_or(|m| v.len() as u64 <= m), "{h:?}");
                let mut sum = 0u64;
                for br in &v {
                    assert!(br.start < br.end && br.end <= size, "{h:?} {size} {br:?}");
                    sum += br.end - br.start;
                }
                assert!(sum <= size, "{h:?}");
            }
            let _ = if_range_allows(&h[6..], "\"e\"", 0);
        }
    }
}
