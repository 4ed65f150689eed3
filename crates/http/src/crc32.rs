//! CRC-32 as zlib and nginx's `ngx_crc32` compute it (IEEE 802.3, reflected, polynomial
//! 0xEDB88320), kept as a running state because nginx's hashes feed it piecewise: the `hash`
//! balancer prefixes a rehash counter to the key, and the consistent ring continues one
//! "host\0port" state with each previous point.
//!
//! Also the gzip trailer's checksum ([`crate::deflate`]): inputs of [`LONG`] bytes and more go to
//! zlib-rs's folding CRC (carry-less multiplication where the CPU has it, ~10× this file's
//! slicing-by-8); shorter ones go eight bytes at a step here (eight 1 KB tables, each byte's
//! contribution shifted one more byte).

static TABLES: [[u32; 256]; 8] = tables();

/// From this length on, zlib-rs's CRC is the faster (its own cut-over is 64 bytes).
const LONG: usize = 64;

const fn tables() -> [[u32; 256]; 8] {
    let mut t = [[0u32; 256]; 8];
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
        t[0][i] = c;
        i += 1;
    }
    // t[k][i]: the CRC of byte i followed by k zero bytes.
    let mut k = 1;
    while k < 8 {
        let mut i = 0;
        while i < 256 {
            let prev = t[k - 1][i];
            t[k][i] = t[0][(prev & 0xFF) as usize] ^ (prev >> 8);
            i += 1;
        }
        k += 1;
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
        if data.len() >= LONG {
            // zlib's crc32() takes and returns the finished value (the register inverted).
            return Crc32(!zlib_rs::crc32::crc32(!self.0, data));
        }
        let mut c = self.0;
        let mut words = data.chunks_exact(8);
        for w in &mut words {
            let lo = c ^ u32::from_le_bytes([w[0], w[1], w[2], w[3]]);
            c = TABLES[7][(lo & 0xFF) as usize]
                ^ TABLES[6][((lo >> 8) & 0xFF) as usize]
                ^ TABLES[5][((lo >> 16) & 0xFF) as usize]
                ^ TABLES[4][(lo >> 24) as usize]
                ^ TABLES[3][w[4] as usize]
                ^ TABLES[2][w[5] as usize]
                ^ TABLES[1][w[6] as usize]
                ^ TABLES[0][w[7] as usize];
        }
        for &b in words.remainder() {
            c = TABLES[0][((c ^ u32::from(b)) & 0xFF) as usize] ^ (c >> 8);
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
        // Every split of a longer input (the eight-byte steps and the byte tail agree).
        let data: Vec<u8> = (0..100u32).map(|i| (i * 37 + 11) as u8).collect();
        let bytewise = data.iter().fold(Crc32::new(), |c, b| c.update(&[*b]));
        assert!(data.len() > LONG, "both roads are taken");
        for cut in 0..data.len() {
            let s = Crc32::new().update(&data[..cut]).update(&data[cut..]);
            assert_eq!(s, bytewise, "cut {cut}");
        }
    }
}
