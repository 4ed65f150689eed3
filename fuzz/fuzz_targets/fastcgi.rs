//! Arbitrary bytes as a FastCGI application's answer: the record decoder with a small or a
//! default header buffer, keep-conn or not, a HEAD request or not, fed whole and in pieces.
//! Nothing may panic; events come in order (one head, before any body); the body is never more
//! than what came; and the answer does not depend on how the bytes arrive, except whether the
//! head fits (nginx's buffer starts over after a read of stderr alone). The first bytes also
//! make a request, whose records must walk back to what was encoded.
#![no_main]

use libfuzzer_sys::fuzz_target;
use shoal_http::bytes::BytesMut;
use shoal_http::fastcgi::{encode, Decoder, Event, FastcgiError};
use shoal_http::UpstreamError;

/// What an answer gave, pieces joined.
#[derive(Debug, PartialEq, Eq)]
struct Answer {
    head: Option<(u16, Vec<u8>, usize)>,
    stdout: Vec<u8>,
    stderr: Vec<u8>,
    surplus: usize,
    end: bool,
    error: Option<FastcgiError>,
}

fn decode(input: &[u8], max: usize, keep: bool, head_req: bool, chunk: usize) -> Answer {
    let mut d = Decoder::new(max, keep, head_req);
    let mut a = Answer {
        head: None,
        stdout: Vec::new(),
        stderr: Vec::new(),
        surplus: 0,
        end: false,
        error: None,
    };
    let mut buf = BytesMut::new();
    let mut pieces = input.chunks(chunk.max(1));
    loop {
        loop {
            match d.decode(&mut buf) {
                Ok(Some(Event::Head(h))) => {
                    assert!(a.head.is_none() && a.stdout.is_empty() && !a.end);
                    assert!(h.status() <= 999 && !h.status_line().is_empty());
                    a.head = Some((h.status(), h.status_line().to_vec(), h.header_count()));
                }
                Ok(Some(Event::Stdout(b))) => {
                    assert!(a.head.is_some() && !b.is_empty() && !a.end);
                    a.stdout.extend_from_slice(&b);
                }
                Ok(Some(Event::Stderr(e))) => {
                    assert!(!e.bytes().is_empty() && !a.end);
                    assert!(e.text().len() <= e.bytes().len());
                    let _ = e.to_string();
                    a.stderr.extend_from_slice(e.bytes());
                }
                Ok(Some(Event::Surplus(_))) => {
                    a.surplus += 1;
                    assert_eq!(a.surplus, 1);
                }
                Ok(Some(Event::End(_))) => {
                    assert!(a.head.is_some() && d.is_done());
                    a.end = true;
                }
                Ok(None) => break,
                Err(e) => {
                    let _ = e.to_string();
                    a.error = Some(e);
                    return a;
                }
            }
        }
        if d.is_done() {
            return a;
        }
        match pieces.next() {
            Some(p) => buf.extend_from_slice(p),
            None => {
                a.error = d.eof().err();
                return a;
            }
        }
    }
}

fn too_big(a: &Answer) -> bool {
    a.error == Some(FastcgiError::Head(UpstreamError::TooBigHeader))
}

/// Walks `bytes` as request records: headers valid, padding to 8 with zeros; returns each
/// record's type and content.
fn records(mut bytes: &[u8]) -> Vec<(u8, Vec<u8>)> {
    let mut out = Vec::new();
    while !bytes.is_empty() {
        assert!(bytes.len() >= 8);
        assert_eq!((bytes[0], bytes[2], bytes[3], bytes[7]), (1, 0, 1, 0));
        let len = usize::from(u16::from_be_bytes([bytes[4], bytes[5]]));
        let pad = usize::from(bytes[6]);
        assert!(pad < 8 && (len + pad) % 8 == 0);
        assert!(bytes[8 + len..8 + len + pad].iter().all(|&b| b == 0));
        out.push((bytes[1], bytes[8..8 + len].to_vec()));
        bytes = &bytes[8 + len + pad..];
    }
    out
}

fn request(data: &[u8]) {
    let mut parts = data.split(|&b| b == 0xff);
    let body = parts.next().unwrap_or_default();
    let parts: Vec<&[u8]> = parts.collect();
    let pairs: Vec<(&[u8], &[u8])> = parts
        .chunks(2)
        .map(|p| (p[0], *p.get(1).unwrap_or(&&b""[..])))
        .collect();
    let req = encode::request(true, pairs.iter().copied(), body);
    let recs = records(&req);
    let mut params = Vec::new();
    let mut stdin = Vec::new();
    for (kind, content) in &recs[1..] {
        match kind {
            4 => params.extend_from_slice(content),
            5 => stdin.extend_from_slice(content),
            _ => panic!("record type {kind}"),
        }
    }
    assert_eq!(stdin, body);
    assert_eq!(params.len(), encode::params_len(pairs.iter().copied()));
}

fuzz_target!(|input: &[u8]| {
    let Some((&ctl, data)) = input.split_first() else {
        return;
    };
    let max = if ctl & 1 == 0 {
        4096
    } else {
        usize::from(ctl >> 2) * 3
    };
    let keep = ctl & 2 != 0;
    let head_req = ctl & 0x80 != 0;
    let whole = decode(data, max, keep, head_req, data.len());
    assert!(whole.stdout.len() <= data.len());
    for chunk in [1, 3, 8, 13] {
        let pieces = decode(data, max, keep, head_req, chunk);
        if !too_big(&whole) && !too_big(&pieces) {
            assert_eq!(pieces, whole, "pieces of {chunk}");
        }
    }
    if data.len() <= 512 {
        request(data);
    }
});
