//! Arbitrary bytes into the chunked decoder: all at once, split at an arbitrary point, and byte
//! by byte must give the same body, the same end and the same verdict; nothing may panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use shoal_http::{Chunk, ChunkedDecoder};

/// (body, bytes consumed through the end, or the error's status)
type Outcome = Result<(Vec<u8>, Option<usize>), u16>;

fn feed(data: &[u8], cuts: &[usize], max: u64) -> Outcome {
    let mut d = ChunkedDecoder::with_max_size(max);
    let mut body = Vec::new();
    let mut pos = 0;
    let mut pending: Vec<u8> = Vec::new();
    let mut consumed_total = 0;
    for &cut in cuts.iter().chain(std::iter::once(&data.len())) {
        let cut = cut.clamp(pos, data.len());
        pending.extend_from_slice(&data[pos..cut]);
        pos = cut;
        loop {
            let (n, chunk) = d.decode(&pending).map_err(|e| e.status())?;
            assert!(n <= pending.len());
            match chunk {
                Chunk::Data(b) => {
                    assert!(!b.is_empty());
                    body.extend_from_slice(b);
                }
                Chunk::NeedMore => assert_eq!(n, pending.len()),
                Chunk::Done => {
                    assert!(d.is_done());
                    return Ok((body, Some(consumed_total + n)));
                }
            }
            consumed_total += n;
            pending.drain(..n);
            if pending.is_empty() {
                break;
            }
        }
    }
    Ok((body, None))
}

fuzz_target!(|input: &[u8]| {
    if input.len() < 2 {
        return;
    }
    let (ctl, data) = input.split_at(2);
    let max = u64::from(ctl[0]) * 16;
    let at = usize::from(ctl[1]) % (data.len() + 1);
    let all = feed(data, &[], max);
    assert_eq!(all, feed(data, &[at], max));
    if data.len() <= 512 {
        let every: Vec<usize> = (1..data.len()).collect();
        assert_eq!(all, feed(data, &every, max));
    }
    if let Ok((body, _)) = &all {
        assert!(body.len() <= data.len());
        if max != 0 {
            assert!(body.len() as u64 <= max);
        }
    }
});
