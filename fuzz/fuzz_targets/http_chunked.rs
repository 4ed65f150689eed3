//! The chunked request-body decoder, two ways.
//!
//! Raw: arbitrary bytes, fed all at once, split at an arbitrary point, byte by byte and through
//! `BodyDecoder::decode_buf`, must give the same body, the same end (or the same error, after
//! the same body bytes) and the same `oversize()`. Built: the input is a recipe for a valid
//! encoding (sizes with leading zeros or upper case, whitespace and extensions after them, CRLF
//! or bare LF line ends, trailers) whose body is known: it must decode to exactly that body and
//! end where the encoding ends, or fail with 413 at the chunk that takes it over the limit.
//!
//! Both check `client_max_body_size` as nginx applies it: never a body byte past the limit, a
//! 413 exactly when the announced sizes pass it (never a 400 for that, but for a size nginx
//! cannot take at all: over 0x7ffffffffffffff), and `oversize()` naming the bytes before the
//! chunk that went over and that chunk's size. Nothing may panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use shoal_http::bytes::BytesMut;
use shoal_http::{BodyChunk, BodyDecoder, BodyKind, Chunk, ChunkedDecoder};

/// What follows a built body on the connection.
const NEXT: &[u8] = b"GET / HTTP/1.1\r\n";

/// The largest body nginx takes (`off_t`).
const MAX_LENGTH: u64 = i64::MAX as u64;

/// The largest chunk size nginx 1.22 takes.
const MAX_CHUNK_SIZE: u64 = MAX_LENGTH >> 4;

/// `Ok(consumed through the end)`, `Ok(None)` (needs more), or the error's status.
type End = Result<Option<usize>, u16>;

#[derive(Debug, PartialEq, Eq)]
struct Outcome {
    /// Body bytes handed out, in order (before the error, if any).
    body: Vec<u8>,
    /// `Ok(consumed through the end)` or `Ok(None)` (needs more), or the error's status.
    end: End,
    /// `received()` when it stopped.
    received: u64,
    /// `oversize()` after a 413.
    oversize: Option<(u64, u64)>,
}

/// Checks what holds after each step of any feed.
fn step_invariants(d: &ChunkedDecoder, body_len: usize, max: u64) {
    let len = body_len as u64;
    assert!(len <= d.received(), "more body than announced");
    if max != 0 {
        assert!(len <= max, "a body byte past client_max_body_size");
    }
}

fn finish(d: &ChunkedDecoder, body: Vec<u8>, end: End, max: u64) -> Outcome {
    let received = d.received();
    if max != 0 && received > max {
        // Announcing more than the limit is a 413 at once, whatever else is wrong.
        assert_eq!(end, Err(413), "sizes over the limit must be a 413");
    }
    let oversize = match end {
        Err(413) => {
            assert_ne!(max, 0);
            let (before, size) = d.oversize();
            assert!(size > 0);
            assert!(before <= max, "the limit was passed before this chunk");
            assert_eq!(before.checked_add(size), Some(received));
            assert!(before + size > max);
            assert_eq!(
                before,
                body.len() as u64,
                "earlier chunks are all handed out"
            );
            Some((before, size))
        }
        Err(status) => {
            assert_eq!(status, 400);
            None
        }
        Ok(None) => None,
        Ok(Some(_)) => {
            assert!(d.is_done());
            assert_eq!(received, body.len() as u64);
            None
        }
    };
    Outcome {
        body,
        end,
        received,
        oversize,
    }
}

/// Feeds `data` through `decode`, the bytes arriving in pieces ending at `cuts`.
fn feed(d: ChunkedDecoder, data: &[u8], cuts: &[usize], max: u64) -> Outcome {
    let mut d = d;
    let mut body = Vec::new();
    let mut pos = 0;
    let mut pending: Vec<u8> = Vec::new();
    let mut consumed_total = 0;
    for &cut in cuts.iter().chain(std::iter::once(&data.len())) {
        let cut = cut.clamp(pos, data.len());
        pending.extend_from_slice(&data[pos..cut]);
        pos = cut;
        loop {
            let (n, chunk) = match d.decode(&pending) {
                Ok(r) => r,
                Err(e) => {
                    // An error sticks.
                    assert_eq!(
                        d.decode(b"0\r\n\r\n").map_err(|e| e.status()),
                        Err(e.status())
                    );
                    return finish(&d, body, Err(e.status()), max);
                }
            };
            assert!(n <= pending.len());
            match chunk {
                Chunk::Data(b) => {
                    assert!(!b.is_empty());
                    assert_eq!(
                        b.as_ptr(),
                        pending[n - b.len()..].as_ptr(),
                        "data ends what was consumed"
                    );
                    body.extend_from_slice(b);
                }
                Chunk::NeedMore => assert_eq!(n, pending.len()),
                Chunk::Done => {
                    assert!(d.is_done());
                    assert_eq!(d.decode(b"more").ok(), Some((0, Chunk::Done)));
                    let end = Ok(Some(consumed_total + n));
                    return finish(&d, body, end, max);
                }
            }
            step_invariants(&d, body.len(), max);
            consumed_total += n;
            pending.drain(..n);
            if pending.is_empty() {
                break;
            }
        }
    }
    finish(&d, body, Ok(None), max)
}

/// The same through `BodyDecoder::decode_buf` (the server's road), `step` bytes at a time.
fn feed_buf(data: &[u8], step: usize, max: u64) -> (Vec<u8>, End, Option<(u64, u64)>) {
    let mut d =
        BodyDecoder::new(BodyKind::Chunked, max).expect("a chunked body is never refused up front");
    let mut buf = BytesMut::new();
    let mut body = Vec::new();
    let mut fed = 0;
    loop {
        match d.decode_buf(&mut buf) {
            Ok(BodyChunk::Data(b)) => {
                assert!(!b.is_empty());
                body.extend_from_slice(&b);
                if max != 0 {
                    assert!(body.len() as u64 <= max);
                }
            }
            Ok(BodyChunk::Done) => {
                assert!(d.is_done());
                return (body, Ok(Some(fed - buf.len())), None);
            }
            Ok(BodyChunk::NeedMore) => {
                assert!(buf.is_empty());
                if fed == data.len() {
                    return (body, Ok(None), None);
                }
                let n = step.min(data.len() - fed);
                buf.extend_from_slice(&data[fed..fed + n]);
                fed += n;
            }
            Err(e) => {
                let over = (e.status() == 413).then(|| d.oversize().expect("chunked"));
                return (body, Err(e.status()), over);
            }
        }
    }
}

/// All the ways of feeding `data` agree; returns the whole-input outcome.
fn all_roads(data: &[u8], at: usize, max: u64) -> Outcome {
    let all = feed(ChunkedDecoder::with_max_size(max), data, &[], max);
    assert_eq!(
        all,
        feed(ChunkedDecoder::with_max_size(max), data, &[at], max)
    );
    if data.len() <= 1024 {
        let every: Vec<usize> = (1..data.len()).collect();
        assert_eq!(
            all,
            feed(ChunkedDecoder::with_max_size(max), data, &every, max)
        );
    }
    let step = at.max(1);
    let (body, end, over) = feed_buf(data, step, max);
    assert_eq!((&body, &end, &over), (&all.body, &all.end, &all.oversize));
    // An upstream's decoder takes all the request decoder takes, the same way.
    if max == 0 {
        if let Ok(Some(_)) = all.end {
            let up = feed(ChunkedDecoder::for_upstream(), data, &[at], 0);
            assert_eq!((&up.body, &up.end), (&all.body, &all.end));
        }
    }
    all
}

/// Reads bytes off the recipe, zeros once it runs out.
struct Recipe<'a>(&'a [u8]);

impl Recipe<'_> {
    fn byte(&mut self) -> u8 {
        match self.0.split_first() {
            Some((&b, rest)) => {
                self.0 = rest;
                b
            }
            None => 0,
        }
    }

    fn bytes(&mut self, n: usize) -> &[u8] {
        let n = n.min(self.0.len());
        let (a, b) = self.0.split_at(n);
        self.0 = b;
        a
    }
}

/// A valid encoding from `recipe`: the encoded bytes, the chunk sizes, and the body.
fn build(recipe: &[u8]) -> (Vec<u8>, Vec<u64>, Vec<u8>) {
    let mut r = Recipe(recipe);
    let mut out = Vec::new();
    let mut sizes = Vec::new();
    let mut body = Vec::new();
    let eol =
        |out: &mut Vec<u8>, bit: bool| out.extend_from_slice(if bit { b"\n" } else { b"\r\n" });
    let n_chunks = r.byte() % 8;
    for i in 0..=n_chunks {
        let shape = r.byte();
        let last = i == n_chunks;
        // A few huge sizes (never sent in full: a limit stops them), else small ones.
        let size: u64 = if last {
            0
        } else if shape & 0x70 == 0x70 {
            MAX_LENGTH >> (r.byte() % 8)
        } else {
            u64::from(r.byte() % 48) + 1
        };
        let zeros = usize::from(shape & 3);
        out.extend(std::iter::repeat_n(b'0', zeros));
        let hex = if shape & 4 != 0 {
            format!("{size:X}")
        } else {
            format!("{size:x}")
        };
        out.extend_from_slice(hex.as_bytes());
        if shape & 8 != 0 {
            out.extend_from_slice(if r.byte() & 1 == 0 { b" " } else { b"\t \t" });
        }
        if shape & 0x80 != 0 {
            out.extend_from_slice(b";ext");
            for &b in r.bytes(6) {
                // Visible ASCII (and a tab) only: the strict decoder's extension bytes.
                out.push(if b == b'\t' || (0x20..0x7f).contains(&b) {
                    b
                } else {
                    b'='
                });
            }
        }
        eol(&mut out, shape & 0x40 != 0);
        sizes.push(size);
        if last || shape & 0x70 == 0x70 {
            if !last {
                // The rest cannot be sent: the recipe is what came before the huge chunk.
                return (out, sizes, body);
            }
            break;
        }
        let data: Vec<u8> = (0..size).map(|k| r.byte().wrapping_add(k as u8)).collect();
        out.extend_from_slice(&data);
        body.extend_from_slice(&data);
        eol(&mut out, shape & 0x20 != 0);
    }
    for _ in 0..r.byte() % 4 {
        let t = r.byte();
        out.extend_from_slice(b"X-T");
        out.push(b'a' + t % 26);
        out.extend_from_slice(b": v\tw x");
        eol(&mut out, t & 0x80 != 0);
    }
    eol(&mut out, r.byte() & 1 != 0);
    (out, sizes, body)
}

/// A built encoding decodes to its body, or to a 413 at the chunk that passes `max`.
fn check_built(recipe: &[u8], max: u64, at: usize) {
    let (mut encoded, sizes, body) = build(recipe);
    let end = encoded.len();
    let complete = sizes.last() == Some(&0);
    encoded.extend_from_slice(NEXT);
    let got = all_roads(&encoded, at % (encoded.len() + 1), max);
    let mut total = 0u64;
    let mut expect_body = 0usize;
    for &size in &sizes {
        if size == 0 {
            break;
        }
        if size > MAX_CHUNK_SIZE {
            // nginx 1.22 takes no size past off_t's maximum over 16, whatever the limit.
            assert_eq!(got.end, Err(400), "size {size:#x}");
            assert_eq!(got.body, body[..expect_body]);
            return;
        }
        let over = total.checked_add(size).expect("bounded sizes");
        if max != 0 && over > max {
            assert_eq!(got.end, Err(413), "sizes {sizes:?} max {max}");
            assert_eq!(got.oversize, Some((total, size)));
            assert_eq!(got.body, body[..expect_body]);
            return;
        }
        if over > MAX_LENGTH {
            assert_eq!(got.end, Err(400), "sizes {sizes:?} over off_t");
            return;
        }
        total = over;
        expect_body += usize::try_from(size).expect("small chunks are sent in full");
    }
    if complete {
        assert_eq!(got.end, Ok(Some(end)));
        assert_eq!(got.body, body);
    } else {
        // A huge chunk within the limit: what follows the encoding is its data.
        assert_eq!(got.end, Ok(None));
        assert_eq!(got.body[..body.len()], body[..]);
        assert_eq!(&got.body[body.len()..], NEXT);
    }
}

fuzz_target!(|input: &[u8]| {
    if input.len() < 2 {
        return;
    }
    let (ctl, data) = input.split_at(2);
    let max = match ctl[0] & 0x7f {
        0 => 0,
        0x7d => MAX_LENGTH - 1,
        0x7e => MAX_LENGTH,
        0x7f => u64::MAX,
        n => u64::from(n) * 8,
    };
    let at = usize::from(ctl[1]);
    if ctl[0] & 0x80 != 0 {
        check_built(data, max, at);
    } else {
        all_roads(data, at % (data.len() + 1), max);
    }
});
