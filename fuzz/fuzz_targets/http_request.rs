//! Arbitrary bytes into the request-head parser: whole, split at an arbitrary point (to go
//! through `Ok(None)` and resume), and as a pipelined stream with bodies (chunked ones held to a
//! `client_max_body_size`). Checks that nothing panics (nor the replay of a refused head), that
//! the parsing roads agree, that splitting never changes the answer, and the invariants of a
//! parsed request: its path, host and header values, `$request_uri` of an absolute-form target
//! (what follows the authority), an HTTP/0.9 simple request (a GET, its line alone), at most
//! 1,000 header lines.
//!
//! A second mode builds heads of about a thousand header lines, some that
//! `ignore_invalid_headers` drops (which do not count), some refused, in an order the input
//! chooses, and checks nginx's answer: the first of "too many header lines" (494) or a refused
//! line (400) that a left-to-right reading meets.
#![no_main]

use libfuzzer_sys::fuzz_target;
use shoal_http::bytes::BytesMut;
use shoal_http::request::{is_simple_request, MAX_HEADERS};
use shoal_http::{
    BodyChunk, BodyDecoder, BodyKind, HeadParser, LargeBuffers, Limits, Request, Version,
};

type Outcome = Result<Option<Summary>, u16>;
type Summary = (
    String,
    Vec<u8>,
    Vec<u8>,
    Option<Vec<u8>>,
    Vec<(String, Vec<u8>)>,
    usize,
);

/// The request's parts and the bytes it took off the buffer (its head, and the CRs and LFs
/// before it).
fn summary(r: &Request, consumed: usize) -> Summary {
    (
        r.method().to_owned(),
        r.uri().to_vec(),
        r.path().to_vec(),
        r.query().map(<[u8]>::to_vec),
        r.headers()
            .map(|(n, v)| (n.to_owned(), v.to_vec()))
            .collect(),
        consumed,
    )
}

fn check(r: &Request, limits: &Limits) {
    let path = r.path();
    assert!(path.starts_with(b"/"));
    assert!(!path.contains(&0));
    for seg in path.split(|&b| b == b'/') {
        assert!(seg != b"." && seg != b"..", "dot segment left in {path:?}");
    }
    if limits.merge_slashes {
        assert!(!path.windows(2).any(|w| w == b"//"));
    }
    if let Some(h) = r.host() {
        assert!(!h.is_empty());
        assert!(!h.iter().any(u8::is_ascii_uppercase));
    }
    // Within the limits but for the CRs and LFs before the request line, which nginx skips.
    let lead = r
        .head()
        .iter()
        .take_while(|&&b| b == b'\r' || b == b'\n')
        .count();
    assert!(r.head_len() - lead <= limits.max_head_len());
    assert!(r.header_count() <= MAX_HEADERS);
    for (name, value) in r.headers() {
        assert!(!name.is_empty());
        assert!(!value.contains(&b'\r') && !value.contains(&b'\n') && !value.contains(&0));
        // Spaces around a value are cut, a tab is kept.
        assert!(!value.starts_with(b" ") && !value.ends_with(b" "));
    }
    // `$request_uri`: the target in origin-form; in absolute-form what follows the
    // authority, `/` when nothing does.
    let (target, uri) = (r.target(), r.uri());
    if target.starts_with(b"/") {
        assert_eq!(uri, target);
    } else {
        assert!(r.host().is_some());
        let scheme = target.iter().position(|&b| b == b':').expect("a scheme");
        let after = &target[scheme + 3..];
        assert!(
            after.len() > uri.len() || uri == b"/",
            "{target:?} gave {uri:?}"
        );
        assert!(after.ends_with(uri) || uri == b"/");
        assert!(uri.starts_with(b"/") || uri.starts_with(b"?"), "{uri:?}");
    }
    let simple = is_simple_request(r.head());
    if r.version() == Version::Http09 {
        // A GET and its line alone, answered at the line's end.
        assert_eq!(r.method(), "GET");
        assert!(simple);
        assert_eq!(r.header_count(), 0);
        assert!(!r.keep_alive() && !r.expect_continue());
        assert_eq!(r.body(), BodyKind::Empty);
        assert!(r.version_text().is_empty());
        let head = r.head();
        let start = head
            .iter()
            .position(|&b| b != b'\r' && b != b'\n')
            .expect("a line");
        assert_eq!(memchr_count(&head[start..]), 1, "one line");
        assert!(head.ends_with(b"\n"));
    } else {
        assert!(!simple, "a request with a version is no simple request");
        assert!(!r.version_text().is_empty());
    }
}

fn memchr_count(b: &[u8]) -> usize {
    b.iter().filter(|&&c| c == b'\n').count()
}

fn whole(data: &[u8], limits: &Limits) -> Outcome {
    let mut p = HeadParser::new(*limits);
    match p.parse_slice(data) {
        Ok(Some(r)) => {
            check(&r, limits);
            Ok(Some(summary(&r, r.head_len())))
        }
        Ok(None) => Ok(None),
        Err(e) => {
            let _ = p.refused(data);
            Err(e.code())
        }
    }
}

/// A request the connection's road took off its buffer: the CRs and LFs before it were dropped
/// from the buffer, so that no number of them grows it, and are no part of its head.
fn taken(r: &Request, consumed: usize, limits: &Limits) -> Summary {
    check(r, limits);
    assert!(!r.head().starts_with(b"\r") && !r.head().starts_with(b"\n"));
    assert!(r.head_len() <= limits.max_head_len());
    summary(r, consumed)
}

fn split(data: &[u8], at: usize, limits: &Limits) -> Outcome {
    let mut p = HeadParser::new(*limits);
    let mut buf = BytesMut::from(&data[..at]);
    match p.parse(&mut buf) {
        Ok(Some(r)) => return Ok(Some(taken(&r, at - buf.len(), limits))),
        Ok(None) => {}
        // An early error must also be the answer with all the bytes: checked by the caller.
        Err(e) => {
            let _ = p.refused(&buf);
            return Err(e.code());
        }
    }
    buf.extend_from_slice(&data[at..]);
    match p.parse(&mut buf) {
        Ok(r) => Ok(r.map(|r| taken(&r, data.len() - buf.len(), limits))),
        Err(e) => {
            let _ = p.refused(&buf);
            Err(e.code())
        }
    }
}

/// Parses requests and their bodies one after another until the bytes run out or fail.
fn pipeline(data: &[u8], limits: &Limits, max_body: u64) {
    let mut p = HeadParser::new(*limits);
    let mut buf = BytesMut::from(data);
    for _ in 0..64 {
        let Ok(Some(r)) = p.parse(&mut buf) else {
            return;
        };
        let Ok(mut body) = BodyDecoder::new(r.body(), max_body) else {
            assert!(matches!(r.body(), BodyKind::Length(n) if n > max_body));
            return;
        };
        let mut len = 0u64;
        loop {
            match body.decode_buf(&mut buf) {
                Ok(BodyChunk::Data(d)) => {
                    assert!(!d.is_empty());
                    len += d.len() as u64;
                    assert!(max_body == 0 || len <= max_body);
                }
                Ok(BodyChunk::Done) => break,
                Ok(BodyChunk::NeedMore) => return,
                Err(e) => {
                    if e.status() == 413 {
                        let (before, size) = body.oversize().expect("only a chunked body");
                        assert_eq!(before, len);
                        assert!(before + size > max_body);
                    }
                    return;
                }
            }
        }
        p.next_request(*limits);
    }
}

/// The kinds of header line the count mode strings together.
const LINES: [&[u8]; 8] = [
    b"X-Kept: v\r\n",
    b"X_Under: v\r\n",
    b"X.Dot: v\r\n",
    b"X@At: v\r\n",
    b"Content-Type:\tv\t\r\n",
    b"X-Ctl: a\x01b\n",
    b"X-Nul: a\x00b\r\n",
    b" folded\r\n",
];

/// A head of `filler` plain lines (Host first) then one line per byte of `kinds`; checks nginx's
/// answer, found by reading the lines left to right.
fn count_mode(filler: usize, kinds: &[u8], limits: &Limits) {
    let mut head = b"GET / HTTP/1.1\r\nHost: a\r\n".to_vec();
    for _ in 1..filler {
        head.extend_from_slice(b"A: b\r\n");
    }
    let mut kept = filler;
    let mut expect: Result<usize, u16> = Ok(0);
    if kept > MAX_HEADERS {
        expect = Err(494);
    }
    for &k in kinds.iter().take(24) {
        let k = usize::from(k) % LINES.len();
        head.extend_from_slice(LINES[k]);
        if expect.is_err() {
            continue;
        }
        let keep = match k {
            0 | 4 | 5 => Some(true),
            1 => Some(limits.underscores_in_headers || !limits.ignore_invalid_headers),
            2 => Some(!limits.ignore_invalid_headers),
            3 if limits.ignore_invalid_headers => Some(false),
            _ => None,
        };
        match keep {
            None => expect = Err(400),
            Some(false) => {}
            Some(true) => {
                kept += 1;
                if kept > MAX_HEADERS {
                    expect = Err(494);
                }
            }
        }
    }
    head.extend_from_slice(b"\r\n");
    let expect = expect.map(|_| kept);
    let got = HeadParser::new(*limits)
        .parse_slice(&head)
        .map(|r| r.expect("a whole head").header_count())
        .map_err(|e| e.code());
    assert_eq!(got, expect, "{filler} lines, then kinds {kinds:?}");
    assert!(
        shoal_http::request::roads_agree(&head, limits),
        "roads disagree"
    );
}

fuzz_target!(|input: &[u8]| {
    if input.len() < 3 {
        return;
    }
    let (ctl, data) = input.split_at(3);
    let flags = ctl[0];
    // A thousand lines are slow to parse: one input in 32 (the parser's other roads are the
    // same for them as for short heads).
    if flags & 0xf8 == 0xf8 {
        let limits = Limits {
            ignore_invalid_headers: flags & 2 == 0,
            underscores_in_headers: flags & 4 != 0,
            ..Limits::default()
        };
        count_mode(MAX_HEADERS - 12 + usize::from(ctl[1] % 16), data, &limits);
        return;
    }
    let limits = if flags & 1 == 0 {
        Limits::default()
    } else {
        // Small buffers so the limits are reached by short inputs.
        Limits {
            client_header_buffer_size: 16 + usize::from(ctl[1] & 0x3f),
            large_client_header_buffers: LargeBuffers {
                num: usize::from(ctl[1] >> 6) + 1,
                size: 32 + usize::from(ctl[2]),
            },
            ignore_invalid_headers: flags & 2 == 0,
            underscores_in_headers: flags & 4 != 0,
            merge_slashes: flags & 8 == 0,
        }
    };
    assert!(
        shoal_http::request::roads_agree(data, &limits),
        "roads disagree"
    );
    let all = whole(data, &limits);
    let at = if data.is_empty() {
        0
    } else {
        usize::from(u16::from_le_bytes([ctl[1], ctl[2]])) % (data.len() + 1)
    };
    let parts = split(data, at, &limits);
    match (&all, &parts) {
        // An error found early (a line that can no longer fit) is the same error later.
        (Err(a), Err(b)) => assert_eq!(a, b),
        _ => assert_eq!(all, parts),
    }
    let max_body = match flags >> 4 {
        0 => 0,
        n => u64::from(n) * 4,
    };
    pipeline(data, &limits, max_body);
});
