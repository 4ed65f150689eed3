use std::io::Read;

use proptest::prelude::*;

use super::*;

fn gunzip(z: &[u8]) -> Vec<u8> {
    let mut back = Vec::new();
    flate2::read::GzDecoder::new(z)
        .read_to_end(&mut back)
        .expect("a valid gzip member");
    back
}

fn inflate(z: &[u8]) -> Vec<u8> {
    let mut back = Vec::new();
    flate2::read::DeflateDecoder::new(z)
        .read_to_end(&mut back)
        .expect("a valid deflate stream");
    back
}

/// Compresses `data` at every level through one encoder and checks both wrappers decode to it;
/// returns the level 2 gzip member.
fn round_trip(enc: &mut Encoder, data: &[u8]) -> Vec<u8> {
    let mut at2 = Vec::new();
    for level in 1..=4 {
        let mut z = Vec::new();
        enc.gzip(data, level, &mut z);
        assert!(
            gunzip(&z) == data,
            "gzip, level {level}, {} bytes",
            data.len()
        );
        assert_eq!(&z[..10], &[0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 3]);
        let mut raw = Vec::new();
        enc.deflate(data, level, &mut raw);
        assert!(inflate(&raw) == data, "deflate, level {level}");
        // Never worse than stored blocks (5 bytes each) plus the gzip framing.
        let blocks = data.len().div_ceil(BLOCK).max(1);
        assert!(z.len() <= data.len() + 5 * blocks + 18, "level {level}");
        if level == 2 {
            at2 = z;
        }
    }
    at2
}

fn random(n: usize, seed: u64) -> Vec<u8> {
    let mut x = seed | 1;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 24) as u8
        })
        .collect()
}

fn text(n: usize) -> Vec<u8> {
    let words = [
        "shoal ", "nginx ", "worker ", "deflate ", "the ", "a ", "gzip ", "header\n", "of ",
    ];
    let mut r = random(n, 7).into_iter();
    let mut out = Vec::new();
    while out.len() < n {
        out.extend_from_slice(words[r.next().unwrap_or(0) as usize % words.len()].as_bytes());
    }
    out.truncate(n);
    out
}

const JSON: &[u8] = include_bytes!("../../../bench/gzip/api.json");

/// The BTYPE of the first block of a raw deflate stream.
fn first_block_type(enc: &mut Encoder, data: &[u8]) -> u8 {
    let mut raw = Vec::new();
    enc.deflate(data, 2, &mut raw);
    (raw[0] >> 1) & 3
}

#[test]
fn small_and_degenerate_inputs() {
    let mut enc = Encoder::new();
    round_trip(&mut enc, b"");
    round_trip(&mut enc, b"x");
    round_trip(&mut enc, b"\0");
    round_trip(&mut enc, b"abc");
    round_trip(&mut enc, b"abcd");
    round_trip(&mut enc, b"abcdabcd");
    round_trip(&mut enc, b"aaaaaaaaaa");
    for n in [1, 2, 3, 4, 5, 100, 1000, 70_000] {
        round_trip(&mut enc, &vec![b'z'; n]);
        round_trip(&mut enc, &vec![0; n]);
    }
}

#[test]
fn each_block_type_is_chosen_and_valid() {
    let mut enc = Encoder::new();
    assert_eq!(first_block_type(&mut enc, b"hello hello"), 1, "fixed");
    assert_eq!(first_block_type(&mut enc, JSON), 2, "dynamic");
    assert_eq!(first_block_type(&mut enc, &random(5000, 3)), 0, "stored");
    for n in [0, 1, 17, 300, 5000, 16_384, 40_000] {
        let r = random(n, n as u64 + 1);
        let z = round_trip(&mut enc, &r);
        assert!(z.len() <= n + 5 * n.div_ceil(BLOCK).max(1) + 18);
    }
}

#[test]
fn text_and_json() {
    let mut enc = Encoder::new();
    let z = round_trip(&mut enc, JSON);
    assert!(z.len() < JSON.len() / 2, "{} bytes", z.len());
    for n in [10, 500, 4096, 16_383, 16_384, 16_385, 100_000] {
        round_trip(&mut enc, &text(n));
    }
}

#[test]
fn block_boundaries() {
    let mut enc = Encoder::new();
    let t = text(3 * BLOCK + 10);
    for n in [
        BLOCK - 1,
        BLOCK,
        BLOCK + 1,
        2 * BLOCK,
        2 * BLOCK + 3,
        3 * BLOCK + 10,
    ] {
        round_trip(&mut enc, &t[..n]);
        round_trip(&mut enc, &random(n, 11));
    }
}

#[test]
fn longest_matches_and_farthest_distances() {
    let mut enc = Encoder::new();
    // A 258-byte random piece repeated: matches of exactly 258, then 259 and 257 lengths
    // of repeat (a 258 match and a short one, or one just short of the maximum).
    for len in [257, 258, 259, 516, 517] {
        let piece = random(len, len as u64);
        let mut d = piece.clone();
        d.extend_from_slice(&piece);
        d.extend_from_slice(&piece);
        round_trip(&mut enc, &d);
    }
    // A piece at the start of a block repeated at the far end: distances near 32 KiB.
    for gap in [BLOCK - 300, BLOCK - 259, BLOCK - 40] {
        let mut d = random(gap, 5);
        let head = d[..300.min(BLOCK - gap)].to_vec();
        d.extend_from_slice(&head);
        round_trip(&mut enc, &d);
    }
}

#[test]
fn a_reused_encoder_forgets_earlier_bodies() {
    let mut enc = Encoder::new();
    // Same-hash entries left from the previous body must not be taken as matches.
    for i in 0..50 {
        round_trip(&mut enc, &text(100 + i * 37));
        round_trip(&mut enc, &random(200 + i, i as u64));
    }
    // The generation tags wrapping around.
    enc.base = u32::MAX - 3 * (BLOCK as u32 + 1);
    for n in [5000, 40_000, 100_000, 70] {
        round_trip(&mut enc, &text(n));
    }
    assert!(enc.base < 1 << 24, "the tags wrapped");
}

#[test]
fn lengths_are_limited_and_complete() {
    // Fibonacci frequencies: an unlimited Huffman code would be 23 deep (24 symbols, the
    // largest count still within a block's 16-bit frequencies).
    let mut fib = [0u32; LIT_CODES];
    let (mut a, mut b) = (1u32, 1u32);
    for f in fib.iter_mut().take(24) {
        *f = a;
        (a, b) = (b, a + b);
    }
    for limit in [7, 15] {
        let mut len = [0u8; LIT_CODES];
        let mut used = [0u16; LIT_CODES];
        let n = lengths(&fib, limit, &mut len, &mut used, &mut Tree::new());
        assert_eq!(
            &used[..n],
            &(0..24).collect::<Vec<u16>>()[..],
            "in symbol order"
        );
        assert!(len.iter().all(|&l| u32::from(l) <= limit));
        let kraft: u64 = len
            .iter()
            .filter(|&&l| l > 0)
            .map(|&l| 1u64 << (limit - u32::from(l)))
            .sum();
        assert_eq!(kraft, 1 << limit, "limit {limit}");
        // More frequent never longer.
        for i in 1..24 {
            assert!(len[i] <= len[i - 1]);
        }
    }
    // And through the encoder: literals with Fibonacci counts, shuffled so few match.
    let mut d = Vec::new();
    for (s, &f) in fib.iter().take(22).enumerate() {
        d.extend(std::iter::repeat_n(s as u8 * 11, f as usize));
    }
    let mut x = 99u64;
    for i in (1..d.len()).rev() {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        d.swap(i, (x % (i as u64 + 1)) as usize);
    }
    round_trip(&mut Encoder::new(), &d);
}

#[test]
fn tables_match_the_rfc() {
    assert_eq!(LEN_CODE[0], 0);
    assert_eq!(LEN_CODE[258 - 3], 28);
    assert_eq!(LEN_CODE[257 - 3], 27);
    assert_eq!(LEN_CODE[11 - 3], 8);
    assert_eq!(dist_code(1), 0);
    assert_eq!(dist_code(4), 3);
    assert_eq!(dist_code(5), 4);
    assert_eq!(dist_code(256), 15);
    assert_eq!(dist_code(257), 16);
    assert_eq!(dist_code(24576), 28);
    assert_eq!(dist_code(24577), 29);
    assert_eq!(dist_code(32768), 29);
    for d in 1..=32768 {
        let c = dist_code(d);
        assert!(d >= DIST_BASE[c] as usize && d - (DIST_BASE[c] as usize) < 1 << DIST_EXTRA[c]);
    }
}

/// Sizes against zlib's level 2 (run with `--nocapture` to see them).
#[test]
fn sizes_against_zlib() {
    use std::io::Write;
    let mut enc = Encoder::new();
    for (name, data) in [("api.json", JSON.to_vec()), ("text 16 KiB", text(16_384))] {
        let mut z = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::new(2));
        z.write_all(&data).expect("to a Vec");
        let zlib = z.finish().expect("to a Vec").len();
        for level in 1..=4 {
            let mut ours = Vec::new();
            enc.gzip(&data, level, &mut ours);
            println!(
                "{name}: {} bytes, zlib level 2 {zlib}, ours level {level} {}",
                data.len(),
                ours.len()
            );
            assert!(ours.len() <= zlib + zlib / 5, "{name} level {level}");
        }
    }
}

proptest! {
    #[test]
    fn arbitrary_bytes_round_trip(data in proptest::collection::vec(any::<u8>(), 0..3000), level in 1u32..=4) {
        let mut z = Vec::new();
        Encoder::new().gzip(&data, level, &mut z);
        prop_assert_eq!(gunzip(&z), data);
    }

    #[test]
    fn small_alphabets_round_trip(data in proptest::collection::vec(0u8..4, 0..40_000), level in 1u32..=4) {
        let mut z = Vec::new();
        Encoder::new().gzip(&data, level, &mut z);
        prop_assert_eq!(gunzip(&z), data);
    }
}

/// Time per body on seed 004's JSON (`CARGO_PROFILE_DEV_OPT_LEVEL=3 cargo test -p shoal-http
/// --lib -- --ignored --nocapture deflate::tests::speed`).
#[test]
#[ignore]
fn speed() {
    let mut enc = Encoder::new();
    let mut out = Vec::with_capacity(4096);
    // SPEED_LEVEL=N times one level (for `perf stat`).
    let levels = match std::env::var("SPEED_LEVEL")
        .ok()
        .and_then(|l| l.parse().ok())
    {
        Some(l) => l..=l,
        None => 1..=4,
    };
    for level in levels {
        let rounds = 200_000;
        let t = std::time::Instant::now();
        for _ in 0..rounds {
            out.clear();
            enc.gzip(std::hint::black_box(JSON), level, &mut out);
        }
        let us = t.elapsed().as_secs_f64() * 1e6 / f64::from(rounds);
        println!("api.json level {level}: {us:.2} us, {} bytes", out.len());
    }
}
