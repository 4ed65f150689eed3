//! A fast, non-cryptographic hash for the worker's own tables (the open-file cache, the
//! small-file contents), keyed by paths: the multiply-rotate hash rustc uses internally
//! ("FxHash"), a few instructions per 8 bytes where SipHash takes dozens.
//!
//! Not for tables an attacker can grow without bound: it has no per-process key, so colliding
//! keys can be crafted. The tables using it are bounded (`open_file_cache max=`), so a crafted
//! collision costs at most a scan of that bound.

use std::hash::{BuildHasherDefault, Hasher};

/// The hasher; see the module comment.
#[derive(Default, Clone, Copy)]
pub struct FxHasher {
    hash: u64,
}

const SEED: u64 = 0x51_7c_c1_b7_27_22_0a_95;

impl FxHasher {
    #[inline]
    fn add(&mut self, word: u64) {
        self.hash = (self.hash.rotate_left(5) ^ word).wrapping_mul(SEED);
    }
}

impl Hasher for FxHasher {
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for c in &mut chunks {
            self.add(u64::from_le_bytes(c.try_into().expect("8-byte chunk")));
        }
        let rest = chunks.remainder();
        if !rest.is_empty() {
            // The little-endian word of the bytes left, zero-padded (a loop of at most seven:
            // a copy of a length not known here is a `memcpy` call).
            let mut w = 0u64;
            for (i, &b) in rest.iter().enumerate() {
                w |= u64::from(b) << (8 * i);
            }
            self.add(w ^ ((rest.len() as u64) << 56));
        }
    }

    #[inline]
    fn write_u8(&mut self, n: u8) {
        self.add(u64::from(n));
    }

    #[inline]
    fn write_u32(&mut self, n: u32) {
        self.add(u64::from(n));
    }

    #[inline]
    fn write_u64(&mut self, n: u64) {
        self.add(n);
    }

    #[inline]
    fn write_usize(&mut self, n: usize) {
        self.add(n as u64);
    }

    #[inline]
    fn finish(&self) -> u64 {
        self.hash
    }
}

/// A `HashMap` with [`FxHasher`].
pub type FxHashMap<K, V> = std::collections::HashMap<K, V, BuildHasherDefault<FxHasher>>;

#[cfg(test)]
mod tests {
    use super::*;
    use std::hash::{BuildHasher, Hash};

    fn h<T: Hash>(t: T) -> u64 {
        BuildHasherDefault::<FxHasher>::default().hash_one(t)
    }

    #[test]
    fn equal_keys_hash_equal_and_near_keys_differ() {
        assert_eq!(h("/var/www/a.html"), h(String::from("/var/www/a.html")));
        let paths: Vec<String> = (0..1000).map(|i| format!("/var/www/{i}.html")).collect();
        let mut hashes: Vec<u64> = paths.iter().map(|p| h(p.as_str())).collect();
        hashes.sort_unstable();
        hashes.dedup();
        assert_eq!(hashes.len(), 1000, "no collisions among 1000 near paths");
        // Trailing bytes and lengths count.
        assert_ne!(h(&b"ab"[..]), h(&b"ab\0"[..]));
    }

    #[test]
    fn works_as_a_map() {
        let mut m: FxHashMap<std::path::PathBuf, u32> = FxHashMap::default();
        for i in 0..100 {
            m.insert(format!("/x/{i}").into(), i);
        }
        assert_eq!(m.get(std::path::Path::new("/x/42")), Some(&42));
    }
}
