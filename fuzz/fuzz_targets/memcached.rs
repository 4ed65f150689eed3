//! Arbitrary bytes as memcached's answer to a `get`: the first line and the value, fed whole
//! and in pieces, with and without `memcached_gzip_flag`. Nothing may panic; a value is never
//! longer than its line said nor than what came; the answer does not depend on how the bytes
//! arrive, except for bytes after the trailer, seen only when they come with it (as in
//! nginx). The key, from the input too, must escape to bytes memcached takes as one word.
#![no_main]

use libfuzzer_sys::fuzz_target;
use shoal_http::bytes::BytesMut;
use shoal_http::memcached::{escape_key, request, Answer, Decoder, MemcachedError};
use shoal_http::BodyChunk;

fn exchange(
    key: &[u8],
    gzip: u64,
    data: &[u8],
    chunk: usize,
) -> Result<(Answer, Vec<u8>), MemcachedError> {
    let req = request(key)?;
    let mut d = Decoder::new(&req, gzip);
    let mut buf = BytesMut::new();
    let mut pieces = data.chunks(chunk.max(1));
    let head = loop {
        if let Some(a) = d.decode_head(&mut buf, 256)? {
            break a;
        }
        match pieces.next() {
            Some(p) => buf.extend_from_slice(p),
            None => {
                d.eof()?;
                panic!("eof before the head must be an error");
            }
        }
    };
    let mut value = Vec::new();
    if let Answer::Found(v) = &head {
        loop {
            match d.decode_body(&mut buf)? {
                BodyChunk::Data(b) => {
                    assert!(!b.is_empty());
                    value.extend_from_slice(&b);
                    assert!(value.len() as u64 <= v.length);
                }
                BodyChunk::Done => break,
                BodyChunk::NeedMore => match pieces.next() {
                    Some(p) => buf.extend_from_slice(p),
                    None => {
                        d.eof()?;
                        panic!("eof before the end must be an error");
                    }
                },
            }
        }
        assert_eq!(value.len() as u64, v.length);
    }
    assert!(d.is_done());
    Ok((head, value))
}

fuzz_target!(|input: &[u8]| {
    let Some((&ctl, rest)) = input.split_first() else {
        return;
    };
    let key_len = usize::from(ctl & 7).min(rest.len());
    let (key, data) = rest.split_at(key_len);
    // One word for memcached, and `%XX` undoes to the key.
    let escaped = escape_key(key);
    assert!(!escaped.iter().any(|&b| b <= 0x20));
    let mut back = Vec::new();
    let mut i = 0;
    while i < escaped.len() {
        if escaped[i] == b'%' {
            let hex = std::str::from_utf8(&escaped[i + 1..i + 3]).expect("hex digits");
            assert_eq!(hex, hex.to_uppercase());
            back.push(u8::from_str_radix(hex, 16).expect("hex digits"));
            i += 3;
        } else {
            back.push(escaped[i]);
            i += 1;
        }
    }
    assert_eq!(back, key);
    let gzip = u64::from(ctl >> 6);
    let whole = exchange(key, gzip, data, data.len());
    if let Err(e) = &whole {
        let _ = e.to_string();
    }
    assert!(whole.as_ref().map_or(true, |(_, v)| v.len() <= data.len()));
    for chunk in [1, 2, 5, 11] {
        let pieces = exchange(key, gzip, data, chunk);
        if !(whole == Err(MemcachedError::InvalidTrailer) && pieces.is_ok()) {
            assert_eq!(pieces, whole, "pieces of {chunk}");
        }
    }
});
