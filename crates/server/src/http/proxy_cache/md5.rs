//! MD5 (RFC 1321), for cache keys: nginx names a cache object by the MD5 of its key, so shoal
//! must too for its files to be laid out the same way. Not used for anything that needs a
//! secure hash. Pure; a dozen lines of tables and one compression function, so no dependency.

const S: [u32; 64] = [
    7, 12, 17, 22, 7, 12, 17, 22, 7, 12, 17, 22, 7, 12, 17, 22, 5, 9, 14, 20, 5, 9, 14, 20, 5, 9,
    14, 20, 5, 9, 14, 20, 4, 11, 16, 23, 4, 11, 16, 23, 4, 11, 16, 23, 4, 11, 16, 23, 6, 10, 15,
    21, 6, 10, 15, 21, 6, 10, 15, 21, 6, 10, 15, 21,
];

const K: [u32; 64] = [
    0xd76aa478, 0xe8c7b756, 0x242070db, 0xc1bdceee, 0xf57c0faf, 0x4787c62a, 0xa8304613, 0xfd469501,
    0x698098d8, 0x8b44f7af, 0xffff5bb1, 0x895cd7be, 0x6b901122, 0xfd987193, 0xa679438e, 0x49b40821,
    0xf61e2562, 0xc040b340, 0x265e5a51, 0xe9b6c7aa, 0xd62f105d, 0x02441453, 0xd8a1e681, 0xe7d3fbc8,
    0x21e1cde6, 0xc33707d6, 0xf4d50d87, 0x455a14ed, 0xa9e3e905, 0xfcefa3f8, 0x676f02d9, 0x8d2a4c8a,
    0xfffa3942, 0x8771f681, 0x6d9d6122, 0xfde5380c, 0xa4beea44, 0x4bdecfa9, 0xf6bb4b60, 0xbebfbc70,
    0x289b7ec6, 0xeaa127fa, 0xd4ef3085, 0x04881d05, 0xd9d4d039, 0xe6db99e5, 0x1fa27cf8, 0xc4ac5665,
    0xf4292244, 0x432aff97, 0xab9423a7, 0xfc93a039, 0x655b59c3, 0x8f0ccc92, 0xffeff47d, 0x85845dd1,
    0x6fa87e4f, 0xfe2ce6e0, 0xa3014314, 0x4e0811a1, 0xf7537e82, 0xbd3af235, 0x2ad7d2bb, 0xeb86d391,
];

fn block(state: &mut [u32; 4], chunk: &[u8]) {
    let mut m = [0u32; 16];
    for (i, w) in m.iter_mut().enumerate() {
        *w = u32::from_le_bytes([
            chunk[i * 4],
            chunk[i * 4 + 1],
            chunk[i * 4 + 2],
            chunk[i * 4 + 3],
        ]);
    }
    let [mut a, mut b, mut c, mut d] = *state;
    // The four rounds as four loops of constant shape (one match per step kept the compiler
    // from unrolling: MD5 was 2% of a cache hit).
    macro_rules! round {
        ($range:expr, $f:expr, $g:expr) => {
            for i in $range {
                let f: u32 = $f(b, c, d);
                let g: usize = $g(i);
                let t = d;
                d = c;
                c = b;
                b = b.wrapping_add(
                    a.wrapping_add(f)
                        .wrapping_add(K[i])
                        .wrapping_add(m[g])
                        .rotate_left(S[i]),
                );
                a = t;
            }
        };
    }
    round!(0..16, |b: u32, c: u32, d: u32| (b & c) | (!b & d), |i| i);
    round!(16..32, |b: u32, c: u32, d: u32| (d & b) | (!d & c), |i| (5
        * i
        + 1)
        % 16);
    round!(32..48, |b: u32, c: u32, d: u32| b ^ c ^ d, |i| (3 * i + 5)
        % 16);
    round!(48..64, |b: u32, c: u32, d: u32| c ^ (b | !d), |i| (7 * i)
        % 16);
    state[0] = state[0].wrapping_add(a);
    state[1] = state[1].wrapping_add(b);
    state[2] = state[2].wrapping_add(c);
    state[3] = state[3].wrapping_add(d);
}

/// The MD5 digest of `data`.
pub fn md5(data: &[u8]) -> [u8; 16] {
    let mut state = [0x67452301u32, 0xefcdab89, 0x98badcfe, 0x10325476];
    let mut chunks = data.chunks_exact(64);
    for c in &mut chunks {
        block(&mut state, c);
    }
    let rest = chunks.remainder();
    let mut tail = [0u8; 128];
    tail[..rest.len()].copy_from_slice(rest);
    tail[rest.len()] = 0x80;
    let n = if rest.len() < 56 { 64 } else { 128 };
    tail[n - 8..n].copy_from_slice(&((data.len() as u64).wrapping_mul(8)).to_le_bytes());
    for c in tail[..n].chunks_exact(64) {
        block(&mut state, c);
    }
    let mut out = [0u8; 16];
    for (i, w) in state.iter().enumerate() {
        out[i * 4..i * 4 + 4].copy_from_slice(&w.to_le_bytes());
    }
    out
}

/// Lowercase hex, as nginx names cache files.
pub fn hex(d: &[u8; 16]) -> String {
    const H: &[u8; 16] = b"0123456789abcdef";
    let mut s = String::with_capacity(32);
    for b in d {
        s.push(H[(b >> 4) as usize] as char);
        s.push(H[(b & 15) as usize] as char);
    }
    s
}

/// The digest a 32-character hex name stands for.
pub fn unhex(s: &str) -> Option<[u8; 16]> {
    let b = s.as_bytes();
    if b.len() != 32 {
        return None;
    }
    let v = |c: u8| match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        _ => None,
    };
    let mut out = [0u8; 16];
    for (i, o) in out.iter_mut().enumerate() {
        *o = (v(b[2 * i])? << 4) | v(b[2 * i + 1])?;
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc1321_vectors() {
        let cases: &[(&str, &str)] = &[
            ("", "d41d8cd98f00b204e9800998ecf8427e"),
            ("a", "0cc175b9c0f1b6a831c399e269772661"),
            ("abc", "900150983cd24fb0d6963f7d28e17f72"),
            ("message digest", "f96b697d7cb7938d525a2f31aaf161d0"),
            (
                "abcdefghijklmnopqrstuvwxyz",
                "c3fcd3d76192e4007dfb496cca67e13b",
            ),
            (
                "12345678901234567890123456789012345678901234567890123456789012345678901234567890",
                "57edf4a22be3c955ac49da2e2107b67a",
            ),
        ];
        for (input, want) in cases {
            assert_eq!(hex(&md5(input.as_bytes())), *want, "{input:?}");
        }
    }

    #[test]
    fn lengths_around_the_padding_edge() {
        // 55, 56 and 64 bytes cross the one-block/two-block padding boundary.
        assert_eq!(hex(&md5(&[b'a'; 56])), "3b0c8ac703f828b04c6c197006d17218");
        assert_eq!(hex(&md5(&[b'a'; 64])), "014842d480b571495a4a0363793f7367");
        let d = md5(b"x");
        assert_eq!(unhex(&hex(&d)), Some(d));
        assert_eq!(unhex("zz"), None);
    }
}

/// A table keyed by digests: the digest's bits are already uniform, so they are only mixed
/// with a per-process random seed (which keys share a bucket cannot be chosen from outside),
/// not run through SipHash on every lookup.
pub type DigestMap<V> = std::collections::HashMap<[u8; 16], V, DigestHash>;

/// The [`std::hash::BuildHasher`] of a [`DigestMap`].
#[derive(Clone)]
pub struct DigestHash {
    seed: u64,
}

impl Default for DigestHash {
    fn default() -> DigestHash {
        static SEED: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
        let seed = *SEED.get_or_init(|| {
            use std::hash::{BuildHasher, Hasher};
            std::collections::hash_map::RandomState::new()
                .build_hasher()
                .finish()
        });
        DigestHash { seed }
    }
}

impl std::hash::BuildHasher for DigestHash {
    type Hasher = DigestHasher;
    fn build_hasher(&self) -> DigestHasher {
        DigestHasher(self.seed)
    }
}

/// Folds 8 bytes at a time into the state with a folded multiply.
pub struct DigestHasher(u64);

impl std::hash::Hasher for DigestHasher {
    fn write(&mut self, bytes: &[u8]) {
        for chunk in bytes.chunks(8) {
            let mut word = [0u8; 8];
            word[..chunk.len()].copy_from_slice(chunk);
            // A folded multiply: both halves of the 128-bit product, so a change in any bit
            // (the top ones too) reaches every bit of the state.
            let m = u128::from(self.0 ^ u64::from_le_bytes(word)) * 0x9e37_79b9_7f4a_7c15;
            self.0 = (m as u64) ^ ((m >> 64) as u64);
        }
    }

    fn write_usize(&mut self, n: usize) {
        self.write(&n.to_le_bytes());
    }

    fn finish(&self) -> u64 {
        self.0
    }
}

#[cfg(test)]
mod digest_map_tests {
    use super::*;

    #[test]
    fn digests_that_differ_in_any_byte_hash_apart() {
        use std::hash::BuildHasher;
        let h = DigestHash::default();
        let base = md5(b"http://example.com/");
        let mut seen = std::collections::HashSet::new();
        seen.insert(h.hash_one(base));
        for i in 0..16 {
            for bit in 0..8 {
                let mut d = base;
                d[i] ^= 1 << bit;
                assert!(seen.insert(h.hash_one(d)), "byte {i} bit {bit}");
            }
        }
    }

    #[test]
    fn a_digest_map_finds_what_it_holds() {
        let mut m: DigestMap<usize> = DigestMap::default();
        for i in 0..1000usize {
            m.insert(md5(i.to_string().as_bytes()), i);
        }
        for i in 0..1000usize {
            assert_eq!(m.get(&md5(i.to_string().as_bytes())), Some(&i));
        }
        assert_eq!(m.get(&md5(b"absent")), None);
    }
}
