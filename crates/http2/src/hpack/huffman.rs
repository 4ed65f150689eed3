//! The Huffman coding of string literals (RFC 7541 §5.2, the code of Appendix B).
//!
//! Decoding uses that the code is canonical: read 32 bits ahead (ones past the end, the
//! padding's value), and the symbol's length is the first length whose left-aligned limit is
//! above them; a 256-entry table answers the codes of 8 bits or fewer (every common header
//! byte) in one look-up. The tables are built at compile time from [`CODES`].
//!
//! The end of a string is strict, as §5.2 requires: padding longer than 7 bits, padding that is
//! not all ones (the start of EOS), and an EOS inside the string are errors.

use super::huffman_table::CODES;

/// Why a Huffman-coded string is refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HuffmanError {
    /// Padding longer than 7 bits, or not the most significant bits of EOS.
    Padding,
    /// The EOS symbol inside the string.
    Eos,
}

const MIN_LEN: usize = 5;
const MAX_LEN: usize = 30;

/// Per length `L` (index), one past the last code of that length, left-aligned in 32 bits
/// (so it can reach 2^32); `u64::MAX`-free: 0 for lengths without codes below the first.
const LIMIT: [u64; MAX_LEN + 1] = limits();
/// Per length, the first code of that length (right-aligned).
const FIRST: [u32; MAX_LEN + 1] = firsts();
/// Per length, where its symbols start in [`SORTED`].
const OFFSET: [u16; MAX_LEN + 1] = offsets();
/// The symbols in code order (by length, then symbol).
const SORTED: [u16; 257] = sorted();
/// By the first 8 bits ahead: the symbol and its length when a code of 8 bits or fewer starts
/// there; length 0 when the code is longer.
const FAST: [(u16, u8); 256] = fast();

const fn count(len: usize) -> u32 {
    let mut n = 0;
    let mut s = 0;
    while s < 257 {
        if CODES[s].1 as usize == len {
            n += 1;
        }
        s += 1;
    }
    n
}

const fn firsts() -> [u32; MAX_LEN + 1] {
    let mut out = [0u32; MAX_LEN + 1];
    let mut len = MIN_LEN;
    while len <= MAX_LEN {
        // The smallest code of this length among the symbols that have it.
        let mut first = u32::MAX;
        let mut s = 0;
        while s < 257 {
            if CODES[s].1 as usize == len && CODES[s].0 < first {
                first = CODES[s].0;
            }
            s += 1;
        }
        out[len] = first;
        len += 1;
    }
    out
}

const fn limits() -> [u64; MAX_LEN + 1] {
    let firsts = firsts();
    let mut out = [0u64; MAX_LEN + 1];
    let mut len = MIN_LEN;
    let mut prev = 0u64;
    while len <= MAX_LEN {
        let n = count(len);
        if n == 0 {
            out[len] = prev;
        } else {
            out[len] = ((firsts[len] as u64) + n as u64) << (32 - len);
            prev = out[len];
        }
        len += 1;
    }
    out
}

const fn offsets() -> [u16; MAX_LEN + 1] {
    let mut out = [0u16; MAX_LEN + 1];
    let mut len = MIN_LEN;
    let mut at = 0u16;
    while len <= MAX_LEN {
        out[len] = at;
        at += count(len) as u16;
        len += 1;
    }
    out
}

const fn sorted() -> [u16; 257] {
    let offsets = offsets();
    let firsts = firsts();
    let mut out = [0u16; 257];
    let mut s = 0;
    while s < 257 {
        let (code, len) = CODES[s];
        let len = len as usize;
        out[offsets[len] as usize + (code - firsts[len]) as usize] = s as u16;
        s += 1;
    }
    out
}

const fn fast() -> [(u16, u8); 256] {
    let mut out = [(0u16, 0u8); 256];
    let mut s = 0;
    while s < 257 {
        let (code, len) = CODES[s];
        if len <= 8 {
            let shift = 8 - len as u32;
            let start = (code << shift) as usize;
            let mut i = 0;
            while i < (1usize << shift) {
                out[start + i] = (s as u16, len);
                i += 1;
            }
        }
        s += 1;
    }
    out
}

/// The length of `src` Huffman-coded, in bytes.
pub fn encoded_len(src: &[u8]) -> usize {
    let bits: usize = src.iter().map(|&b| CODES[b as usize].1 as usize).sum();
    bits.div_ceil(8)
}

/// Appends `src` Huffman-coded to `dst`, padded with the most significant bits of EOS.
pub fn encode(src: &[u8], dst: &mut Vec<u8>) {
    // Codes gather in `acc` (fewer than 32 bits pending, plus one code of at most 30) and
    // leave 4 bytes at a time.
    let mut acc: u64 = 0;
    let mut bits: u32 = 0;
    for &b in src {
        let (code, len) = CODES[b as usize];
        acc = (acc << len) | code as u64;
        bits += len as u32;
        if bits >= 32 {
            bits -= 32;
            dst.extend_from_slice(&((acc >> bits) as u32).to_be_bytes());
        }
    }
    while bits >= 8 {
        bits -= 8;
        dst.push((acc >> bits) as u8);
    }
    if bits > 0 {
        dst.push(((acc << (8 - bits)) as u8) | (0xff >> bits));
    }
}

/// Decodes `src`, appending at most `keep` bytes of the result to `dst` (the rest is checked
/// and counted, never stored: an oversized string costs no memory). Returns the decoded
/// length, which may exceed `keep`.
///
/// The accumulator is topped up with ones past the end (the padding's value), so a code is
/// always looked up with 32 bits in hand; `left` counts the real bits, and a code that runs
/// past them is the end: valid only as up to 7 ones. Symbols gather in a small array and go
/// to `dst` 64 at a time.
pub fn decode(src: &[u8], dst: &mut Vec<u8>, keep: usize) -> Result<usize, HuffmanError> {
    let mut chunk = [0u8; 64];
    let mut k = 0usize;
    let mut flushed = 0usize;
    let mut acc: u64 = 0;
    let mut bits: u32 = 0;
    let mut left = src.len() * 8;
    let mut rest = src;
    let end = loop {
        if bits < 32 {
            if let Some((four, tail)) = rest.split_first_chunk::<4>() {
                acc = (acc << 32) | u32::from_be_bytes(*four) as u64;
                rest = tail;
            } else {
                let mut four = [0xff; 4];
                four[..rest.len()].copy_from_slice(rest);
                acc = (acc << 32) | u32::from_be_bytes(four) as u64;
                rest = &[];
            }
            bits += 32;
        }
        let ahead = (acc >> (bits - 32)) as u32;
        let (sym, len) = match FAST[(ahead >> 24) as usize] {
            // Codes of 8 bits or fewer: never EOS, and whole while 30 bits are left.
            (sym, len) if len != 0 && left >= 30 => (sym, len as usize),
            _ => {
                if left < 8 {
                    // The end: padding is fewer than 8 bits, all ones (the start of EOS).
                    let mask = (1u32 << left) - 1;
                    if left == 0 || (ahead >> (32 - left)) & mask == mask {
                        break Ok(());
                    }
                }
                let (sym, len) = long_code(ahead);
                if len > left {
                    break Err(HuffmanError::Padding);
                }
                if sym == 256 {
                    break Err(HuffmanError::Eos);
                }
                (sym, len)
            }
        };
        bits -= len as u32;
        left -= len;
        chunk[k & 63] = sym as u8;
        k += 1;
        if k == 64 {
            store(dst, &chunk, flushed, keep);
            flushed += 64;
            k = 0;
        }
    };
    end?;
    store(dst, &chunk[..k], flushed, keep);
    Ok(flushed + k)
}

/// The symbol and code length at the start of `ahead`, whatever the length.
fn long_code(ahead: u32) -> (u16, usize) {
    let (sym, len) = FAST[(ahead >> 24) as usize];
    if len != 0 {
        return (sym, len as usize);
    }
    let mut len = 10;
    while (ahead as u64) >= LIMIT[len] {
        len += 1;
    }
    let code = ahead >> (32 - len);
    (
        SORTED[OFFSET[len] as usize + (code - FIRST[len]) as usize],
        len,
    )
}

/// Appends what of `chunk` fits under `keep`, `done` symbols having come before it.
fn store(dst: &mut Vec<u8>, chunk: &[u8], done: usize, keep: usize) {
    let room = keep.saturating_sub(done).min(chunk.len());
    dst.extend_from_slice(&chunk[..room]);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_code_is_canonical_and_complete() {
        // Kraft's sum of 2^-len over all symbols is exactly 1: no code space left over, so
        // every 30-bit sequence starts with exactly one code.
        let kraft: u64 = CODES.iter().map(|&(_, len)| 1u64 << (30 - len)).sum();
        assert_eq!(kraft, 1 << 30);
        let mut order: Vec<(u8, u16)> = (0..257u16).map(|s| (CODES[s as usize].1, s)).collect();
        order.sort();
        // Canonical: in (length, symbol) order each code is the previous one plus one, shifted
        // to its length.
        let mut next = 0u32;
        let mut prev_len = order[0].0;
        for &(len, sym) in &order {
            next <<= len - prev_len;
            prev_len = len;
            assert_eq!(CODES[sym as usize].0, next, "symbol {sym}");
            next += 1;
        }
        // A few codes as the RFC prints them.
        assert_eq!(CODES[b'a' as usize], (0x3, 5));
        assert_eq!(CODES[0], (0x1ff8, 13));
        assert_eq!(CODES[256], (0x3fffffff, 30));
    }

    #[test]
    fn every_octet_alone_and_all_together() {
        for b in 0..=255u8 {
            let mut enc = Vec::new();
            encode(&[b], &mut enc);
            assert_eq!(enc.len(), encoded_len(&[b]));
            let mut dec = Vec::new();
            assert_eq!(decode(&enc, &mut dec, usize::MAX), Ok(1), "octet {b}");
            assert_eq!(dec, [b]);
        }
        let all: Vec<u8> = (0..=255u8).chain((0..=255u8).rev()).collect();
        let mut enc = Vec::new();
        encode(&all, &mut enc);
        let mut dec = Vec::new();
        assert_eq!(decode(&enc, &mut dec, usize::MAX), Ok(all.len()));
        assert_eq!(dec, all);
    }

    #[test]
    fn the_end_of_a_string_is_strict() {
        let mut out = Vec::new();
        // 'a' (00011) padded with 111: valid.
        assert_eq!(decode(&[0b0001_1111], &mut out, 10), Ok(1));
        // Padding not all ones.
        assert_eq!(
            decode(&[0b0001_1110], &mut out, 10),
            Err(HuffmanError::Padding)
        );
        // A whole byte of padding (8 bits).
        assert_eq!(
            decode(&[0b0001_1111, 0xff], &mut out, 10),
            Err(HuffmanError::Padding)
        );
        assert_eq!(decode(&[0xff], &mut out, 10), Err(HuffmanError::Padding));
        // EOS (30 ones) then padding: EOS inside a string.
        assert_eq!(
            decode(&[0xff, 0xff, 0xff, 0xff], &mut out, 10),
            Err(HuffmanError::Eos)
        );
        // Empty is empty.
        assert_eq!(decode(&[], &mut out, 10), Ok(0));
    }

    #[test]
    fn keep_bounds_what_is_stored() {
        let mut enc = Vec::new();
        encode(&[b'x'; 100], &mut enc);
        let mut out = vec![1, 2];
        assert_eq!(decode(&enc, &mut out, 10), Ok(100));
        assert_eq!(out.len(), 12);
    }
}
