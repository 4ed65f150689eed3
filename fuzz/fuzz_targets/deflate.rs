//! Arbitrary bytes through shoal's small deflate encoder at every level it serves: the gzip
//! member must decode (flate2) to exactly the input, and never be longer than stored blocks.
#![no_main]

use std::io::Read;

use libfuzzer_sys::fuzz_target;
use shoal_http::deflate::{Encoder, BLOCK};

fuzz_target!(|input: &[u8]| {
    let Some((&ctl, data)) = input.split_first() else {
        return;
    };
    let level = u32::from(ctl % 4) + 1;
    let mut enc = Encoder::new();
    // Twice through one encoder: the second body must not see the first one's hash entries.
    for _ in 0..2 {
        let mut z = Vec::new();
        enc.gzip(data, level, &mut z);
        let blocks = data.len().div_ceil(BLOCK).max(1);
        assert!(z.len() <= data.len() + 5 * blocks + 18);
        let mut back = Vec::new();
        flate2::read::GzDecoder::new(&z[..])
            .read_to_end(&mut back)
            .expect("a valid gzip member");
        assert!(back == data);
    }
});
