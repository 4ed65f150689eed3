use super::*;

/// Decodes `input` fed in pieces of `step` bytes; returns the body and the bytes left after it.
fn decode_in_steps(input: &[u8], step: usize, max: u64) -> Result<(Vec<u8>, Vec<u8>), Error> {
    let mut d = ChunkedDecoder::with_max_size(max);
    let mut buf = BytesMut::new();
    let mut body = Vec::new();
    let mut fed = 0;
    loop {
        match d.decode_buf(&mut buf)? {
            BodyChunk::Data(b) => body.extend_from_slice(&b),
            BodyChunk::Done => {
                let mut rest = buf.to_vec();
                rest.extend_from_slice(&input[fed..]);
                return Ok((body, rest));
            }
            BodyChunk::NeedMore => {
                assert!(buf.is_empty());
                if fed == input.len() {
                    return Err(Error::bad_request("truncated"));
                }
                let n = step.min(input.len() - fed);
                buf.extend_from_slice(&input[fed..fed + n]);
                fed += n;
            }
        }
    }
}

fn decode_all(input: &[u8]) -> Result<(Vec<u8>, Vec<u8>), Error> {
    decode_in_steps(input, input.len().max(1), 0)
}

fn status(input: &[u8]) -> u16 {
    match decode_all(input) {
        Ok(_) => 200,
        Err(e) => e.status(),
    }
}

#[test]
fn chunked_basic_with_extensions_and_trailers() {
    let input = b"5\r\nhello\r\n6;name=val\r\n world\r\nA \r\n0123456789\r\n0\r\nX-T: 1\r\nY: 2\r\n\r\nNEXT";
    let (body, rest) = decode_all(input).unwrap();
    assert_eq!(body, b"hello world0123456789");
    assert_eq!(rest, b"NEXT");
}

#[test]
fn byte_by_byte_equals_all_at_once() {
    let input = b"1a\r\nabcdefghijklmnopqrstuvwxyz\r\n3;x\r\n123\r\n00\r\nTrailer: v\r\n\r\nGET /";
    let whole = decode_all(input).unwrap();
    for step in 1..input.len() {
        assert_eq!(
            decode_in_steps(input, step, 0).unwrap(),
            whole,
            "step {step}"
        );
    }
}

#[test]
fn borrowed_decode_reports_consumption() {
    let mut d = ChunkedDecoder::new();
    let input = b"3\r\nabc\r\n0\r\n\r\nrest";
    let (n, c) = d.decode(input).unwrap();
    assert_eq!((n, c), (6, Chunk::Data(b"abc")));
    let (m, c) = d.decode(&input[n..]).unwrap();
    assert_eq!((m, c), (7, Chunk::Done));
    assert!(d.is_done());
    assert_eq!(d.received(), 3);
    assert_eq!(d.decode(b"more").unwrap(), (0, Chunk::Done));
    let (n, c) = ChunkedDecoder::new().decode(b"3\r").unwrap();
    assert_eq!((n, c), (2, Chunk::NeedMore));
}

#[test]
fn bad_chunk_sizes_are_400() {
    for bad in [
        &b"\r\n"[..],
        b"g\r\n",
        b"-1\r\nx\r\n0\r\n\r\n",
        b"+1\r\nx\r\n0\r\n\r\n",
        b"0x1\r\nx\r\n0\r\n\r\n",
        b" 1\r\nx\r\n0\r\n\r\n",
        b"1 2\r\nx\r\n0\r\n\r\n",
        b"ffffffffffffffffff\r\n",
        b"8000000000000000\r\n",
        b"1\r\rx\r\n0\r\n\r\n",
        b"1;a\x00\r\nx\r\n0\r\n\r\n",
        b"1\r\nxy\r\n0\r\n\r\n",
        b"1\r\nx0\r\n\r\n",
        b"0\r\nX: 1\r\r\n",
        b"0\r\n\r\r",
    ] {
        assert_eq!(status(bad), 400, "{}", String::from_utf8_lossy(bad));
    }
    // The largest size nginx takes is still fine to announce.
    let mut d = ChunkedDecoder::new();
    let (n, _) = d.decode(b"7ffffffffffffff\r\n").unwrap();
    assert_eq!(n, 17);
}

/// nginx takes a bare LF wherever its chunk grammar has a line end; so does the request
/// decoder (and a CR not followed by LF is still an error).
#[test]
fn bare_lf_ends_chunk_lines_as_in_nginx() {
    for ok in [
        &b"1\nx\r\n0\r\n\r\n"[..],
        b"1;a\nx\r\n0\r\n\r\n",
        b"1 \nx\r\n0\r\n\r\n",
        b"1\r\nx\n0\r\n\r\n",
        b"1\nx\n0\n\n",
        b"1\r\nx\r\n0\r\nX: 1\n\r\n",
        b"1\r\nx\r\n0\r\nX: 1\nY: 2\n\n",
    ] {
        let mut d = ChunkedDecoder::new();
        let mut data = Vec::new();
        let mut rest = ok;
        loop {
            let (n, c) = d
                .decode(rest)
                .unwrap_or_else(|e| panic!("{}: {e}", String::from_utf8_lossy(ok)));
            rest = &rest[n..];
            match c {
                Chunk::Data(b) => data.extend_from_slice(b),
                Chunk::Done => break,
                Chunk::NeedMore => panic!("{}: incomplete", String::from_utf8_lossy(ok)),
            }
        }
        assert_eq!(data, b"x", "{}", String::from_utf8_lossy(ok));
        assert!(rest.is_empty());
    }
    for bad in [&b"1\rx\r\n0\r\n\r\n"[..], b"1\r\nx\r0\r\n\r\n"] {
        assert_eq!(status(bad), 400, "{}", String::from_utf8_lossy(bad));
    }
}

/// A 413 tells how much came before the chunk that went over, and that chunk's size.
#[test]
fn oversize_names_the_chunk_that_went_over() {
    let mut d = ChunkedDecoder::with_max_size(10);
    let (n, _) = d.decode(b"4\r\nabcd\r\n").unwrap();
    assert_eq!(n, 7);
    let _ = d.decode(b"\r\n").unwrap();
    let e = d.decode(b"7\r\n").unwrap_err();
    assert_eq!(e.status(), 413);
    assert_eq!(d.oversize(), (4, 7));
}

#[test]
fn errors_stick() {
    let mut d = ChunkedDecoder::new();
    assert!(d.decode(b"z").is_err());
    assert!(d.decode(b"1\r\nx\r\n").is_err());
    assert!(d.decode(b"").is_err());
}

#[test]
fn long_size_lines_and_trailers_are_bounded() {
    let mut line = b"1;".to_vec();
    line.resize(5000, b'e');
    assert_eq!(status(&line), 400);
    let mut trailers = b"0\r\n".to_vec();
    for _ in 0..1000 {
        trailers.extend_from_slice(b"X-Trailer: 1234567890\r\n");
    }
    assert_eq!(status(&trailers), 400);
    // Leading zeros are fine however many (no value growth).
    let mut zeros = vec![b'0'; 100];
    zeros.extend_from_slice(b"1\r\nx\r\n0\r\n\r\n");
    assert_eq!(decode_all(&zeros).unwrap().0, b"x");
}

#[test]
fn max_body_size_while_chunked() {
    let input = b"4\r\nabcd\r\n4\r\nefgh\r\n0\r\n\r\n";
    assert!(decode_in_steps(input, 3, 8).is_ok());
    let e = decode_in_steps(input, 3, 7).unwrap_err();
    assert_eq!(e.status(), 413);
    // Refused when the size is read, before the data arrives.
    let mut d = ChunkedDecoder::with_max_size(10);
    assert_eq!(d.decode(b"b\r\n").unwrap_err().status(), 413);
}

#[test]
fn length_decoder() {
    let mut d = LengthDecoder::new(5);
    assert_eq!(d.decode(b"abc"), b"abc");
    assert_eq!(d.remaining(), 2);
    assert_eq!(d.decode(b"defGET"), b"de");
    assert!(d.is_done());
    assert_eq!(d.decode(b"more"), b"");
    let mut buf = BytesMut::from(&b"xyzNEXT"[..]);
    let mut d = BodyDecoder::new(BodyKind::Length(3), 0).unwrap();
    assert_eq!(
        d.decode_buf(&mut buf).unwrap(),
        BodyChunk::Data(Bytes::from_static(b"xyz"))
    );
    assert_eq!(d.decode_buf(&mut buf).unwrap(), BodyChunk::Done);
    assert_eq!(&buf[..], b"NEXT");
    let mut empty = BodyDecoder::new(BodyKind::Empty, 0).unwrap();
    assert!(empty.is_done());
    assert_eq!(empty.decode_buf(&mut buf).unwrap(), BodyChunk::Done);
    let mut d = LengthDecoder::new(2);
    assert_eq!(d.decode_buf(&mut BytesMut::new()), BodyChunk::NeedMore);
}

#[test]
fn encoder_output_decodes() {
    let mut out = Vec::new();
    for piece in [&b"a"[..], &[b'x'; 300], b"", b"tail"] {
        crate::response::write_chunk(&mut out, piece);
    }
    out.extend_from_slice(crate::response::LAST_CHUNK);
    let (body, rest) = decode_all(&out).unwrap();
    assert_eq!(body.len(), 1 + 300 + 4);
    assert!(rest.is_empty());
}

#[test]
fn content_length_values() {
    assert_eq!(parse_content_length(b"0"), Some(0));
    assert_eq!(parse_content_length(b"007"), Some(7));
    assert_eq!(parse_content_length(b""), None);
    assert_eq!(parse_content_length(b"1e3"), None);
    assert_eq!(parse_content_length(b"18446744073709551616"), None);
}

/// A size past the limit is a 413 when it is read, with what came before and its size; a size
/// nginx 1.22 cannot take (over 0x7ffffffffffffff) is a 400 whatever the limit, when the byte
/// after it arrives (found by the differential fuzzer: nginx answered 400 where shoal took
/// 0x7fffffffffffffff).
#[test]
fn the_largest_chunk_size_is_nginx_s() {
    let input = b"8\r\n12345678\r\n7ffffffffffffff\r\n";
    let mut d = ChunkedDecoder::with_max_size(16);
    assert_eq!(d.decode(input).unwrap(), (11, Chunk::Data(b"12345678")));
    assert_eq!(d.decode(&input[11..]).unwrap_err().status(), 413);
    assert_eq!(d.oversize(), (8, 0x7ff_ffff_ffff_ffff));
    for max in [0, 16, i64::MAX as u64] {
        for size in [
            &b"800000000000000"[..],
            b"7ffffffffffffffa",
            b"0800000000000000",
        ] {
            for end in [&b"\r\n"[..], b"\n", b";", b" ", b"\r", b"0"] {
                let mut line = size.to_vec();
                line.extend_from_slice(end);
                let mut d = ChunkedDecoder::with_max_size(max);
                assert_eq!(d.decode(size).unwrap(), (size.len(), Chunk::NeedMore));
                let e = d.decode(end).unwrap_err();
                assert_eq!(e.status(), 400, "{max} {}", String::from_utf8_lossy(&line));
                let mut up = ChunkedDecoder::for_upstream();
                assert!(up.decode(&line).is_err());
            }
        }
    }
    // A size nginx could not count the rest of is refused at its last digit, not at the
    // byte after it: nginx answers it as soon as its buffer ends there.
    for max in [0, 16] {
        let e = ChunkedDecoder::with_max_size(max).decode(b"7ffffffffffffffb");
        assert_eq!(e.unwrap_err().status(), 400);
    }
    assert!(ChunkedDecoder::new().decode(b"7ffffffffffffffa").is_ok());
    // Leading zeros are no part of the size.
    let mut d = ChunkedDecoder::new();
    assert!(d.decode(b"00000007ffffffffffffff\r\n").is_ok());
}
