//! The Huffman coding of string literals (RFC 7541 §5.2, the code of Appendix B).
//!
//! Decoding walks the code's tree four bits at a time: a table built at compile time from
//! [`CODES`] gives, for each inner node of the tree and each nibble, the node reached and the
//! symbol completed on the way, if any (codes are 5 bits or longer, so at most one). Two
//! look-ups per input byte, no bit arithmetic.
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

/// A step of the decoder, packed in 32 bits (one load): the node reached (bits 0..8), the
/// symbol completed (8..16), whether one was (bit 16), whether it was EOS (bit 17).
type Step = u32;
const EMIT: u32 = 1 << 16;
const FAIL: u32 = 1 << 17;

/// Inner nodes of the tree (257 leaves: 256 inner nodes); node 0 is the root. A child is an
/// inner node's index, or `LEAF | symbol`.
const LEAF: u16 = 0x8000;
/// By node and nibble.
const STEPS: [[Step; 16]; 256] = steps();
/// Whether a string may end at a node: at the root, or after at most 7 ones (a prefix of EOS).
const ACCEPT: [bool; 256] = accept();

const fn tree() -> [[u16; 2]; 256] {
    let mut tree = [[0u16; 2]; 256];
    let mut nodes = 1;
    let mut s = 0;
    while s < 257 {
        let (code, len) = CODES[s];
        let mut node = 0;
        let mut i = len as u32;
        while i > 1 {
            i -= 1;
            let bit = ((code >> i) & 1) as usize;
            if tree[node][bit] == 0 {
                tree[node][bit] = nodes as u16;
                nodes += 1;
            }
            node = tree[node][bit] as usize;
        }
        tree[node][(code & 1) as usize] = LEAF | s as u16;
        s += 1;
    }
    tree
}

const fn steps() -> [[Step; 16]; 256] {
    let tree = tree();
    let mut steps = [[0; 16]; 256];
    let mut node = 0;
    while node < 256 {
        let mut nibble = 0;
        while nibble < 16 {
            let mut at = node;
            let mut step: Step = 0;
            let mut i = 4;
            while i > 0 {
                i -= 1;
                let child = tree[at][(nibble >> i) & 1];
                if child & LEAF != 0 {
                    let sym = child & !LEAF;
                    if sym == 256 {
                        step |= FAIL;
                    } else {
                        step |= EMIT | (sym as u32) << 8;
                    }
                    at = 0;
                } else {
                    at = child as usize;
                }
            }
            steps[node][nibble] = step | at as u32;
            nibble += 1;
        }
        node += 1;
    }
    steps
}

const fn accept() -> [bool; 256] {
    let tree = tree();
    let mut accept = [false; 256];
    accept[0] = true;
    // Down the all-ones path (EOS's) from the root, up to 7 bits.
    let mut node = 0;
    let mut depth = 0;
    while depth < 7 {
        node = tree[node][1] as usize;
        accept[node] = true;
        depth += 1;
    }
    accept
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
/// length, which may exceed `keep`. Symbols gather in a small array and go to `dst` 64 at a
/// time.
pub fn decode(src: &[u8], dst: &mut Vec<u8>, keep: usize) -> Result<usize, HuffmanError> {
    let mut chunk = [0u8; 64];
    let mut k = 0usize;
    let mut flushed = 0usize;
    let mut node = 0usize;
    let mut flags = 0u32;
    for &b in src {
        let step = STEPS[node][(b >> 4) as usize];
        chunk[k & 63] = (step >> 8) as u8;
        k += ((step & EMIT) >> 16) as usize;
        let step2 = STEPS[(step & 0xff) as usize][(b & 15) as usize];
        chunk[k & 63] = (step2 >> 8) as u8;
        k += ((step2 & EMIT) >> 16) as usize;
        flags |= step | step2;
        node = (step2 & 0xff) as usize;
        if k >= 62 {
            store(dst, &chunk[..k], flushed, keep);
            flushed += k;
            k = 0;
        }
    }
    if flags & FAIL != 0 {
        return Err(HuffmanError::Eos);
    }
    if !ACCEPT[node] {
        return Err(HuffmanError::Padding);
    }
    store(dst, &chunk[..k], flushed, keep);
    Ok(flushed + k)
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
