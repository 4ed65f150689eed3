//! Arbitrary bytes as an upstream's answer: the head parser with a small and a large buffer,
//! whole and byte by byte (an answer on a prefix must be the answer on the whole), both parsing
//! roads agreeing, and the head's body read with the decoder its framing picks. Nothing may
//! panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use shoal_http::bytes::BytesMut;
use shoal_http::upstream::roads_agree;
use shoal_http::{
    framing, parse_upstream_head_with, BodyChunk, Rules, UpstreamBodyDecoder, UpstreamHead,
    UpstreamRequest,
};

type Summary = (u16, Vec<u8>, Vec<(Vec<u8>, Vec<u8>)>, usize, bool);

fn summary(h: &UpstreamHead, n: usize) -> Summary {
    (
        h.status(),
        h.status_line().to_vec(),
        h.headers().map(|(n, v)| (n.to_vec(), v.to_vec())).collect(),
        n,
        h.keep_alive(),
    )
}

fn parse(data: &[u8], max: usize, rules: Rules) -> Result<Option<Summary>, String> {
    match parse_upstream_head_with(data, max, rules) {
        Ok(Some((h, n))) => {
            assert!(n <= data.len() && n <= max && n == h.head_len());
            for (name, value) in h.headers() {
                assert!(!name.is_empty());
                assert!(!value.contains(&b'\n') && !value.contains(&0));
            }
            Ok(Some(summary(&h, n)))
        }
        Ok(None) => {
            assert!(data.len() < max);
            Ok(None)
        }
        Err(e) => Err(e.to_string()),
    }
}

fn body(data: &[u8], max: usize, request: UpstreamRequest) {
    let Ok(Some((h, n))) = parse_upstream_head_with(data, max, Rules::Nginx122) else {
        return;
    };
    let mut decoder = UpstreamBodyDecoder::new(framing(&h, request));
    let mut buf = BytesMut::new();
    let mut total = 0;
    for piece in data[n..].chunks(7) {
        buf.extend_from_slice(piece);
        loop {
            match decoder.decode_buf(&mut buf) {
                Ok(BodyChunk::Data(d)) => {
                    assert!(!d.is_empty());
                    total += d.len();
                }
                Ok(BodyChunk::NeedMore) => break,
                Ok(BodyChunk::Done) | Err(_) => return,
            }
        }
    }
    assert!(total <= data.len() - n);
    let _ = decoder.eof();
}

fuzz_target!(|input: &[u8]| {
    let Some((&ctl, data)) = input.split_first() else {
        return;
    };
    let max = if ctl & 1 == 0 {
        4096
    } else {
        16 + usize::from(ctl >> 1)
    };
    let rules = if ctl & 0x80 == 0 {
        Rules::Nginx122
    } else {
        Rules::Nginx123
    };
    assert!(roads_agree(data), "roads disagree");
    let whole = parse(data, max, rules);
    if data.len() <= 1024 {
        // The first answer while growing the buffer byte by byte is the answer.
        let mut first = Ok(None);
        for end in 0..=data.len() {
            first = parse(&data[..end], max, rules);
            if first != Ok(None) {
                break;
            }
        }
        assert_eq!(first, whole);
    }
    let request = UpstreamRequest {
        head: ctl & 2 != 0,
        upgrade: ctl & 4 != 0,
    };
    body(data, max, request);
});
