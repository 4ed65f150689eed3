//! CRC-32 as zlib and nginx's `ngx_crc32` compute it (IEEE 802.3, reflected, polynomial
//! 0xEDB88320), kept as a running state because nginx's hashes feed it piecewise: the `hash`
//! balancer prefixes a rehash counter to the key, and the consistent ring continues one
//! "host\0port" state with each previous point.
//!
//! Not for integrity checks of large data: a byte-at-a-time table is enough for keys.

const TABLE: [u32; 256] = table();

const fn table() -> [u32; 256] {
    let mut t = [0u32; 256];
    let mut i = 0;
    while i < 256 {
        let mut c = i as u32;
        let mut k = 0;
        while k < 8 {
            c = if c & 1 != 0 {
                0xEDB8_8320 ^ (c >> 1)
            } else {
                c >> 1
            };
            k += 1;
        }
        t[i] = c;
        i += 1;
    }
    t
}

/// A CRC-32 in progress (nginx's `ngx_crc32_init` / `_update` / `_final`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Crc32(u32);

impl Default for Crc32 {
    fn default() -> Crc32 {
        Crc32::new()
    }
}

impl Crc32 {
    /// The initial state.
    pub const fn new() -> Crc32 {
        Crc32(0xFFFF_FFFF)
    }

    /// Feeds `data`.
    pub fn update(self, data: &[u8]) -> Crc32 {
        let mut c = self.0;
        for &b in data {
            c = TABLE[((c ^ u32::from(b)) & 0xFF) as usize] ^ (c >> 8);
        }
        Crc32(c)
    }

    /// The checksum of everything fed so far.
    pub const fn finish(self) -> u32 {
        self.0 ^ 0xFFFF_FFFF
    }
}

/// The CRC-32 of `data` (nginx's `ngx_crc32_long`).
pub fn crc32(data: &[u8]) -> u32 {
    Crc32::new().update(data).finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn check_values() {
        assert_eq!(crc32(b""), 0);
        assert_eq!(crc32(b"123456789"), 0xCBF4_3926);
        assert_eq!(
            crc32(b"The quick brown fox jumps over the lazy dog"),
            0x414F_A339
        );
    }

    #[test]
    fn piecewise_equals_whole() {
        let s = Crc32::new().update(b"1234").update(b"56789").finish();
        assert_eq!(s, crc32(b"123456789"));
    }
}
