//! Arbitrary bytes into the request-head parser: whole, split at an arbitrary point (to go
//! through `Ok(None)` and resume), and as a pipelined stream with bodies. Checks that nothing
//! panics (nor the replay of a refused head), that both parsing roads agree, that splitting never
//! changes the answer, and the invariants of a parsed request.
#![no_main]

use libfuzzer_sys::fuzz_target;
use shoal_http::bytes::BytesMut;
use shoal_http::{BodyChunk, BodyDecoder, HeadParser, LargeBuffers, Limits, Request};

type Outcome = Result<Option<Summary>, u16>;
type Summary = (
    String,
    Vec<u8>,
    Vec<u8>,
    Option<Vec<u8>>,
    Vec<(String, Vec<u8>)>,
    usize,
);

fn summary(r: &Request) -> Summary {
    (
        r.method().to_owned(),
        r.uri().to_vec(),
        r.path().to_vec(),
        r.query().map(<[u8]>::to_vec),
        r.headers()
            .map(|(n, v)| (n.to_owned(), v.to_vec()))
            .collect(),
        r.head_len(),
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
    assert!(r.head_len() <= limits.max_head_len());
    for (name, value) in r.headers() {
        assert!(!name.is_empty());
        assert!(!value.contains(&b'\r') && !value.contains(&b'\n'));
    }
}

fn whole(data: &[u8], limits: &Limits) -> Outcome {
    match HeadParser::new(*limits).parse_slice(data) {
        Ok(Some(r)) => {
            check(&r, limits);
            Ok(Some(summary(&r)))
        }
        Ok(None) => Ok(None),
        Err(e) => Err(e.code()),
    }
}

fn split(data: &[u8], at: usize, limits: &Limits) -> Outcome {
    let mut p = HeadParser::new(*limits);
    let mut buf = BytesMut::from(&data[..at]);
    match p.parse(&mut buf) {
        Ok(Some(r)) => return Ok(Some(summary(&r))),
        Ok(None) => {}
        // An early error must also be the answer with all the bytes: checked by the caller.
        Err(e) => {
            let _ = p.refused(&buf);
            return Err(e.code());
        }
    }
    buf.extend_from_slice(&data[at..]);
    match p.parse(&mut buf) {
        Ok(r) => Ok(r.map(|r| summary(&r))),
        Err(e) => {
            let _ = p.refused(&buf);
            Err(e.code())
        }
    }
}

/// Parses requests and their bodies one after another until the bytes run out or fail.
fn pipeline(data: &[u8], limits: &Limits) {
    let mut p = HeadParser::new(*limits);
    let mut buf = BytesMut::from(data);
    for _ in 0..64 {
        let Ok(Some(r)) = p.parse(&mut buf) else {
            return;
        };
        let Ok(mut body) = BodyDecoder::new(r.body(), 1 << 20) else {
            return;
        };
        loop {
            match body.decode_buf(&mut buf) {
                Ok(BodyChunk::Data(d)) => assert!(!d.is_empty()),
                Ok(BodyChunk::Done) => break,
                Ok(BodyChunk::NeedMore) | Err(_) => return,
            }
        }
    }
}

fuzz_target!(|input: &[u8]| {
    if input.len() < 3 {
        return;
    }
    let (ctl, data) = input.split_at(3);
    let flags = ctl[0];
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
    pipeline(data, &limits);
});
