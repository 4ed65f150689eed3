//! Arbitrary bytes as a CGI-style answer head (FastCGI's stdout, an SCGI or uwsgi answer),
//! with a small or a default buffer: one parser fed byte by byte (it resumes where it stopped)
//! must answer what a fresh one answers on the whole, and `parse_buf` the same. Nothing may
//! panic; a head found lies within the buffer, its names are not empty and its values hold no
//! LF or NUL.
#![no_main]

use libfuzzer_sys::fuzz_target;
use shoal_http::bytes::BytesMut;
use shoal_http::cgi::{framing, CgiHeadParser};
use shoal_http::UpstreamHead;

type Summary = (
    u16,
    Vec<u8>,
    Vec<u8>,
    Vec<(Vec<u8>, Vec<u8>)>,
    Option<u64>,
    usize,
);

fn summary(h: &UpstreamHead) -> Summary {
    (
        h.status(),
        h.status_line().to_vec(),
        h.reason().to_vec(),
        h.headers().map(|(n, v)| (n.to_vec(), v.to_vec())).collect(),
        h.content_length(),
        h.head_len(),
    )
}

fn parser(http: bool) -> CgiHeadParser {
    if http {
        CgiHeadParser::http_or_cgi()
    } else {
        CgiHeadParser::cgi()
    }
}

fuzz_target!(|input: &[u8]| {
    let Some((&ctl, data)) = input.split_first() else {
        return;
    };
    let http = ctl & 1 != 0;
    let max = if ctl & 2 == 0 {
        4096
    } else {
        usize::from(ctl >> 2) + 1
    };
    let whole = parser(http)
        .parse(data, max)
        .map(|h| h.map(|h| summary(&h)));
    if let Ok(Some(s)) = &whole {
        assert!(s.5 <= data.len() && s.5 <= max && s.0 <= 999 && !s.1.is_empty());
        for (name, value) in &s.3 {
            assert!(!name.is_empty());
            assert!(!value.contains(&b'\n') && !value.contains(&0));
        }
        let h = parser(http).parse(data, max).unwrap().unwrap();
        let _ = framing(&h, ctl & 4 != 0);
    }
    if let Err(e) = &whole {
        let _ = e.to_string();
    }
    let mut buf = BytesMut::from(data);
    let split = parser(http)
        .parse_buf(&mut buf, max)
        .map(|h| h.map(|h| summary(&h)));
    assert_eq!(split, whole);
    if data.len() <= 2048 {
        let mut p = parser(http);
        let mut first = Ok(None);
        for end in 0..=data.len() {
            first = p.parse(&data[..end], max).map(|h| h.map(|h| summary(&h)));
            if first != Ok(None) {
                break;
            }
        }
        assert_eq!(first, whole);
    }
});
