//! A small deflate encoder (RFC 1951) in a gzip member (RFC 1952), for answers whose whole body
//! is in hand and small: the gzip filter's JSON and short pages at `gzip_comp_level` 1–4.
//!
//! What it is for is a cheap start. A general deflate library sets up per stream what a 32 KiB
//! window needs (zlib-rs clears a 128 KB hash head on every reset); here the per-worker
//! [`Encoder`] keeps a 16 KB hash head whose entries carry the position they were written at
//! plus a generation base, so an entry from an earlier body reads as empty and nothing is
//! cleared between answers. The LZ77 stage is greedy (no lazy matching) with a short hash chain
//! per level; each piece of up to [`BLOCK`] bytes becomes one block, dynamic Huffman
//! (lengths limited to 15 bits, code lengths run-length coded as §3.2.7 says), fixed Huffman or
//! stored, whichever is shortest, so incompressible input grows by a few bytes at most.
//!
//! What it deliberately does not do: stream (the input is one slice), lazy matching, or large
//! inputs well: matches never cross a [`BLOCK`] boundary. Callers keep zlib for those.

use crate::crc32::Crc32;

/// Input bytes per deflate block; matches stay inside a block, so every distance fits the
/// 32 KiB window and a stored block (at most 65,535 bytes) can always hold the block.
pub const BLOCK: usize = 32 * 1024;

const HASH_BITS: u32 = 12;
const HASH_SIZE: usize = 1 << HASH_BITS;
const MIN_MATCH: usize = 4;
const MAX_MATCH: usize = 258;
/// A symbol with this bit is a match: length in bits 16..25, distance in bits 0..16.
const MATCH: u32 = 1 << 31;
const END_OF_BLOCK: usize = 256;
const LIT_CODES: usize = 286;
const LIT_ALPHABET: usize = 288;
const DIST_CODES: usize = 30;
const CL_CODES: usize = 19;

/// RFC 1951 §3.2.5: lengths 3..=258 by code 257..=285, and distances by code 0..=29.
const LEN_BASE: [u16; 29] = [
    3, 4, 5, 6, 7, 8, 9, 10, 11, 13, 15, 17, 19, 23, 27, 31, 35, 43, 51, 59, 67, 83, 99, 115, 131,
    163, 195, 227, 258,
];
const LEN_EXTRA: [u8; 29] = [
    0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3, 4, 4, 4, 4, 5, 5, 5, 5, 0,
];
const DIST_BASE: [u16; 30] = [
    1, 2, 3, 4, 5, 7, 9, 13, 17, 25, 33, 49, 65, 97, 129, 193, 257, 385, 513, 769, 1025, 1537,
    2049, 3073, 4097, 6145, 8193, 12289, 16385, 24577,
];
const DIST_EXTRA: [u8; 30] = [
    0, 0, 0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7, 8, 8, 9, 9, 10, 10, 11, 11, 12, 12, 13,
    13,
];
/// §3.2.7: the order the code-length code's lengths are sent in.
const CL_ORDER: [usize; CL_CODES] = [
    16, 17, 18, 0, 8, 7, 9, 6, 10, 5, 11, 4, 12, 3, 13, 2, 14, 1, 15,
];

/// Length - 3 → length code - 257.
static LEN_CODE: [u8; 256] = len_codes();
/// Distance - 1 → distance code: below 256 directly, above by (distance - 1) >> 7 from 256
/// (every code past 16 spans a multiple of 128 distances, aligned).
static DIST_CODE: [u8; 512] = dist_codes();

const fn len_codes() -> [u8; 256] {
    let mut t = [0u8; 256];
    let mut code = 0;
    while code < 29 {
        let mut l = LEN_BASE[code] as usize;
        let end = l + (1 << LEN_EXTRA[code]);
        while l < end && l <= MAX_MATCH {
            // Ascending, so 258 ends up with its own code 285, not 284 plus 31 extra.
            t[l - 3] = code as u8;
            l += 1;
        }
        code += 1;
    }
    t
}

const fn dist_codes() -> [u8; 512] {
    let mut t = [0u8; 512];
    let mut code = 0;
    while code < 30 {
        let mut d = DIST_BASE[code] as usize;
        let end = d + (1 << DIST_EXTRA[code]);
        while d < end {
            if d - 1 < 256 {
                t[d - 1] = code as u8;
                d += 1;
            } else {
                t[256 + ((d - 1) >> 7)] = code as u8;
                d += 128;
            }
        }
        code += 1;
    }
    t
}

fn dist_code(dist: usize) -> usize {
    let d = dist - 1;
    if d < 256 {
        DIST_CODE[d] as usize
    } else {
        DIST_CODE[256 + (d >> 7)] as usize
    }
}

/// A reusable encoder: keep one per thread and hand it every small body.
pub struct Encoder {
    /// Hash of 4 bytes → `base + position` of the latest position with it (older than `base`:
    /// empty).
    head: Box<[u32; HASH_SIZE]>,
    /// Position → the previous entry of its hash chain (written before it is read).
    prev: Vec<u32>,
    /// The generation base of the current block.
    base: u32,
    syms: Vec<u32>,
    /// Literal/length frequencies over the whole 288-symbol alphabet (286 and 287 never occur),
    /// the fixed code's size.
    lit_freq: [u32; LIT_ALPHABET],
    dist_freq: [u32; DIST_CODES],
    fixed_lit: Code<LIT_ALPHABET>,
    fixed_dist: Code<DIST_CODES>,
    tree: Box<Tree>,
}

impl Default for Encoder {
    fn default() -> Encoder {
        Encoder::new()
    }
}

/// A canonical Huffman code: bit lengths and the codes, bit-reversed for LSB-first output.
#[derive(Clone, Copy)]
struct Code<const N: usize> {
    len: [u8; N],
    code: [u16; N],
}

impl<const N: usize> Code<N> {
    /// The length-limited Huffman code for `freq`, and the bits its symbols take under it
    /// (Σ frequency × length).
    fn build(freq: &[u32; N], limit: u32, tree: &mut Tree) -> (Code<N>, u64) {
        let mut len = [0u8; N];
        let mut used = [0u16; N];
        let n = lengths(freq, limit, &mut len, &mut used, tree);
        let used = &used[..n];
        let bits = used
            .iter()
            .map(|&s| u64::from(freq[s as usize]) * u64::from(len[s as usize]))
            .sum();
        (Code::canonical(len, used), bits)
    }

    /// The canonical code for these lengths (every symbol with a nonzero length gets one).
    fn from_lengths(len: [u8; N]) -> Code<N> {
        let mut used = [0u16; N];
        let mut n = 0;
        for (s, &l) in len.iter().enumerate() {
            used[n] = s as u16;
            n += usize::from(l > 0);
        }
        Code::canonical(len, &used[..n])
    }

    /// RFC 1951 §3.2.2's codes for `len`; `used` is every symbol with a nonzero length, in
    /// symbol order (only those are visited: a small body uses a fraction of the alphabet).
    fn canonical(len: [u8; N], used: &[u16]) -> Code<N> {
        let mut count = [0u16; 16];
        for &s in used {
            count[len[s as usize] as usize] += 1;
        }
        let mut next = [0u16; 16];
        let mut c = 0u16;
        for bits in 1..16 {
            c = (c + count[bits - 1]) << 1;
            next[bits] = c;
        }
        let mut code = [0u16; N];
        for &s in used {
            let l = len[s as usize];
            let n = &mut next[l as usize];
            code[s as usize] = (u32::from(*n).reverse_bits() >> (32 - u32::from(l))) as u16;
            *n += 1;
        }
        Code { len, code }
    }

    #[inline(always)]
    fn put(&self, w: &mut Bits<'_>, sym: usize) {
        debug_assert!(self.len[sym] > 0, "symbol {sym} has a code");
        w.put(u32::from(self.code[sym]), u32::from(self.len[sym]));
    }
}

/// LSB-first bit output (§3.1.1).
struct Bits<'a> {
    out: &'a mut Vec<u8>,
    acc: u64,
    n: u32,
}

impl Bits<'_> {
    #[inline(always)]
    fn put(&mut self, v: u32, len: u32) {
        debug_assert!(len <= 32 && (len == 32 || v >> len == 0));
        self.acc |= u64::from(v) << self.n;
        self.n += len;
        if self.n >= 32 {
            self.out.extend_from_slice(&(self.acc as u32).to_le_bytes());
            self.acc >>= 32;
            self.n -= 32;
        }
    }

    /// Pads to a byte boundary and writes out what is pending.
    fn align(&mut self) {
        while self.n > 0 {
            self.out.push(self.acc as u8);
            self.acc >>= 8;
            self.n = self.n.saturating_sub(8);
        }
        self.acc = 0;
    }
}

/// (hash chain steps, length good enough to stop looking, longest match whose inner
/// positions go into the hash) per `gzip_comp_level`. Skipping the inside of long matches is
/// what keeps repetitive input cheap; what it loses is a few later matches.
fn effort(level: u32) -> (u32, usize, usize) {
    match level {
        0 | 1 => (4, 16, 8),
        2 => (8, 32, 16),
        3 => (16, 64, 32),
        _ => (32, MAX_MATCH, MAX_MATCH),
    }
}

fn load32(d: &[u8], i: usize) -> u32 {
    u32::from_le_bytes([d[i], d[i + 1], d[i + 2], d[i + 3]])
}

fn load64(d: &[u8], i: usize) -> u64 {
    u64::from_le_bytes(d[i..i + 8].try_into().expect("an 8-byte slice"))
}

fn hash(d: &[u8], i: usize) -> usize {
    (load32(d, i).wrapping_mul(0x9E37_79B1) >> (32 - HASH_BITS)) as usize
}

/// How many bytes at `p` repeat those at `q` (< `p`), up to `max`.
fn match_len(d: &[u8], q: usize, p: usize, max: usize) -> usize {
    let mut l = 0;
    while l + 8 <= max {
        let x = load64(d, q + l) ^ load64(d, p + l);
        if x != 0 {
            return l + (x.trailing_zeros() / 8) as usize;
        }
        l += 8;
    }
    while l < max && d[q + l] == d[p + l] {
        l += 1;
    }
    l
}

impl Encoder {
    /// An encoder (allocates its 16 KB hash head once).
    pub fn new() -> Encoder {
        let mut lit = [0u8; LIT_ALPHABET];
        for (s, l) in lit.iter_mut().enumerate() {
            *l = match s {
                0..=143 => 8,
                144..=255 => 9,
                256..=279 => 7,
                _ => 8,
            };
        }
        Encoder {
            head: Box::new([0; HASH_SIZE]),
            prev: Vec::new(),
            base: 1,
            syms: Vec::new(),
            lit_freq: [0; LIT_ALPHABET],
            dist_freq: [0; DIST_CODES],
            fixed_lit: Code::from_lengths(lit),
            fixed_dist: Code::from_lengths([5; DIST_CODES]),
            tree: Box::new(Tree::new()),
        }
    }

    /// Appends to `out` a gzip member of `data` (nginx's header: no name, no time, OS Unix),
    /// compressed with `level`'s effort.
    pub fn gzip(&mut self, data: &[u8], level: u32, out: &mut Vec<u8>) {
        out.extend_from_slice(&[0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 3]);
        self.deflate(data, level, out);
        out.extend_from_slice(&Crc32::new().update(data).finish().to_le_bytes());
        out.extend_from_slice(&(data.len() as u32).to_le_bytes());
    }

    /// Appends to `out` a raw deflate stream of `data`.
    pub fn deflate(&mut self, data: &[u8], level: u32, out: &mut Vec<u8>) {
        let mut w = Bits { out, acc: 0, n: 0 };
        let mut blocks = data.chunks(BLOCK).peekable();
        if blocks.peek().is_none() {
            self.block(&[], level, true, &mut w);
        }
        while let Some(b) = blocks.next() {
            self.block(b, level, blocks.peek().is_none(), &mut w);
        }
        w.align();
    }

    /// Starts a new generation of the hash head for a block of `len` bytes.
    fn new_generation(&mut self, len: usize) {
        self.base = self.base.wrapping_add(BLOCK as u32 + 1);
        if self.base == 0 || u32::MAX - self.base < BLOCK as u32 + 1 {
            // Once every ~130,000 blocks the tags wrap: then (only then) the head is cleared.
            self.head.fill(0);
            self.base = 1;
        }
        if self.prev.len() < len {
            self.prev.resize(len, 0);
        }
    }

    /// Greedy LZ77 over one block into `syms`, counting symbol frequencies.
    fn lz77(&mut self, d: &[u8], level: u32) {
        let (chain, nice, insert) = effort(level);
        self.new_generation(d.len());
        self.lit_freq = [0; LIT_ALPHABET];
        self.dist_freq = [0; DIST_CODES];
        // Split borrows, so the loop keeps them in registers rather than reloading through
        // `self` after every store.
        let Encoder {
            head,
            prev,
            base,
            syms,
            lit_freq,
            dist_freq,
            ..
        } = self;
        let head = &mut **head;
        let base = *base;
        let n = d.len();
        let prev = &mut prev[..n];
        syms.clear();
        syms.reserve(n + 1);
        // Positions from which a 4-byte hash can be read.
        let hashed = (n + 1).saturating_sub(MIN_MATCH);
        let mut p = 0;
        while p < hashed {
            let h = hash(d, p);
            let max = (n - p).min(MAX_MATCH);
            let (mut best, mut best_dist) = (0, 0);
            let mut cand = head[h];
            let mut steps = chain;
            while cand >= base && steps > 0 {
                let q = (cand - base) as usize;
                debug_assert!(q < p, "chains only hold earlier positions of this block");
                // A longer match must also differ nowhere up to `best`: its byte there first.
                if d[q + best] == d[p + best] {
                    let l = match_len(d, q, p, max);
                    if l > best {
                        best = l;
                        best_dist = p - q;
                        if l >= nice || l == max {
                            break;
                        }
                    }
                }
                cand = prev[q];
                steps -= 1;
            }
            prev[p] = head[h];
            head[h] = base + p as u32;
            if best >= MIN_MATCH {
                debug_assert!((1..=32768).contains(&best_dist));
                syms.push(MATCH | ((best as u32) << 16) | best_dist as u32);
                lit_freq[257 + LEN_CODE[best - 3] as usize] += 1;
                dist_freq[dist_code(best_dist)] += 1;
                let last = if best <= insert {
                    (p + best).min(hashed)
                } else {
                    p + 1
                };
                for (i, link) in prev.iter_mut().enumerate().take(last).skip(p + 1) {
                    let h = hash(d, i);
                    *link = head[h];
                    head[h] = base + i as u32;
                }
                p += best;
            } else {
                syms.push(u32::from(d[p]));
                lit_freq[d[p] as usize] += 1;
                p += 1;
            }
        }
        for &b in &d[p.min(n)..] {
            syms.push(u32::from(b));
            lit_freq[b as usize] += 1;
        }
        lit_freq[END_OF_BLOCK] += 1;
    }

    /// Extra bits of the lengths and distances (the same under any code).
    fn extra_bits(&self) -> u64 {
        let lens = self.lit_freq[257..257 + LEN_EXTRA.len()]
            .iter()
            .zip(LEN_EXTRA);
        let dists = self.dist_freq.iter().zip(DIST_EXTRA);
        lens.chain(dists)
            .map(|(&f, e)| u64::from(f) * u64::from(e))
            .sum()
    }

    /// Bits the symbols take under the fixed code (§3.2.6), extra bits aside.
    fn fixed_bits(&self) -> u64 {
        let sum = |r: std::ops::Range<usize>| -> u64 {
            self.lit_freq[r].iter().map(|&f| u64::from(f)).sum()
        };
        let dist: u64 = self.dist_freq.iter().map(|&f| u64::from(f)).sum();
        8 * sum(0..144) + 9 * sum(144..256) + 7 * sum(256..280) + 8 * sum(280..288) + 5 * dist
    }

    fn block(&mut self, d: &[u8], level: u32, last: bool, w: &mut Bits<'_>) {
        self.lz77(d, level);
        let tree = &mut self.tree;
        let (lit, lit_bits) = Code::build(&self.lit_freq, 15, tree);
        let (dist, dist_bits) = Code::build(&self.dist_freq, 15, tree);
        let header = DynamicHeader::new(&lit.len[..LIT_CODES], &dist.len, tree);
        let extra = self.extra_bits();
        let dynamic = 3 + header.bits() + lit_bits + dist_bits + extra;
        let fixed = 3 + self.fixed_bits() + extra;
        let pad = u64::from((8 - (w.n + 3) % 8) % 8);
        let stored = 3 + pad + 32 + 8 * d.len() as u64;
        let last = u32::from(last);
        if stored < dynamic.min(fixed) {
            w.put(last, 1);
            w.put(0, 2);
            w.align();
            let n = d.len() as u16;
            w.out.extend_from_slice(&n.to_le_bytes());
            w.out.extend_from_slice(&(!n).to_le_bytes());
            w.out.extend_from_slice(d);
        } else if fixed <= dynamic {
            w.put(last, 1);
            w.put(1, 2);
            self.put_symbols(w, &self.fixed_lit, &self.fixed_dist);
        } else {
            w.put(last, 1);
            w.put(2, 2);
            header.put(w);
            self.put_symbols(w, &lit, &dist);
        }
    }

    fn put_symbols(&self, w: &mut Bits<'_>, lit: &Code<LIT_ALPHABET>, dist: &Code<DIST_CODES>) {
        for &s in &self.syms {
            if s & MATCH == 0 {
                lit.put(w, s as usize);
                continue;
            }
            let len = ((s >> 16) & 0x1ff) as usize;
            let d = (s & 0xffff) as usize;
            let lc = LEN_CODE[len - 3] as usize;
            lit.put(w, 257 + lc);
            w.put(
                (len - LEN_BASE[lc] as usize) as u32,
                u32::from(LEN_EXTRA[lc]),
            );
            let dc = dist_code(d);
            dist.put(w, dc);
            w.put(
                (d - DIST_BASE[dc] as usize) as u32,
                u32::from(DIST_EXTRA[dc]),
            );
        }
        lit.put(w, END_OF_BLOCK);
    }
}

/// A dynamic block's header (§3.2.7): the code lengths, run-length coded, and their own code.
struct DynamicHeader {
    hlit: usize,
    hdist: usize,
    hclen: usize,
    /// (code-length symbol, extra bits value).
    runs: [(u8, u8); LIT_CODES + DIST_CODES],
    nruns: usize,
    cl: Code<CL_CODES>,
}

impl DynamicHeader {
    fn new(lit: &[u8], dist: &[u8], tree: &mut Tree) -> DynamicHeader {
        let hlit = 257.max(lit.iter().rposition(|&l| l > 0).map_or(0, |i| i + 1));
        let hdist = 1.max(dist.iter().rposition(|&l| l > 0).map_or(0, |i| i + 1));
        let mut seq = [0u8; LIT_CODES + DIST_CODES];
        seq[..hlit].copy_from_slice(&lit[..hlit]);
        seq[hlit..hlit + hdist].copy_from_slice(&dist[..hdist]);
        let seq = &seq[..hlit + hdist];
        let mut runs = [(0u8, 0u8); LIT_CODES + DIST_CODES];
        let mut nruns = 0;
        let mut push = |sym: u8, extra: u8| {
            runs[nruns] = (sym, extra);
            nruns += 1;
        };
        let mut i = 0;
        while i < seq.len() {
            let cur = seq[i];
            let mut run = seq[i..].iter().take_while(|&&l| l == cur).count();
            i += run;
            if cur == 0 {
                while run >= 11 {
                    let r = run.min(138);
                    push(18, (r - 11) as u8);
                    run -= r;
                }
                if run >= 3 {
                    push(17, (run - 3) as u8);
                    run = 0;
                }
            } else {
                push(cur, 0);
                run -= 1;
                while run >= 3 {
                    let r = run.min(6);
                    push(16, (r - 3) as u8);
                    run -= r;
                }
            }
            for _ in 0..run {
                push(cur, 0);
            }
        }
        let mut freq = [0u32; CL_CODES];
        for &(s, _) in &runs[..nruns] {
            freq[s as usize] += 1;
        }
        let (cl, _) = Code::build(&freq, 7, tree);
        let hclen = 4.max(
            CL_ORDER
                .iter()
                .rposition(|&s| cl.len[s] > 0)
                .map_or(0, |i| i + 1),
        );
        DynamicHeader {
            hlit,
            hdist,
            hclen,
            runs,
            nruns,
            cl,
        }
    }

    fn bits(&self) -> u64 {
        let mut bits = 5 + 5 + 4 + 3 * self.hclen as u64;
        for &(s, _) in &self.runs[..self.nruns] {
            bits += u64::from(self.cl.len[s as usize]) + u64::from(cl_extra_bits(s));
        }
        bits
    }

    fn put(&self, w: &mut Bits<'_>) {
        w.put((self.hlit - 257) as u32, 5);
        w.put((self.hdist - 1) as u32, 5);
        w.put((self.hclen - 4) as u32, 4);
        for &s in &CL_ORDER[..self.hclen] {
            w.put(u32::from(self.cl.len[s]), 3);
        }
        for &(s, extra) in &self.runs[..self.nruns] {
            self.cl.put(w, s as usize);
            w.put(u32::from(extra), cl_extra_bits(s));
        }
    }
}

fn cl_extra_bits(sym: u8) -> u32 {
    match sym {
        16 => 2,
        17 => 3,
        18 => 7,
        _ => 0,
    }
}

/// The Huffman tree's working arrays, kept with the encoder: every slot is written before it
/// is read, so nothing is cleared per code (three codes a block).
pub(crate) struct Tree {
    /// (frequency << 16 | symbol) of the used symbols: sorting these plain integers is the
    /// frequency order.
    leaves: [u32; LIT_ALPHABET],
    /// The leaves' weights in that order, then a sentinel.
    leaf_w: [u32; LIT_ALPHABET + 1],
    /// The internal nodes' weights in the order they are made, then a sentinel.
    node_w: [u32; LIT_ALPHABET],
    /// Node ids: leaves 0..n, internal nodes n..2n-1.
    parent: [u16; 2 * LIT_ALPHABET],
    depth: [u32; 2 * LIT_ALPHABET],
}

impl Tree {
    pub(crate) fn new() -> Tree {
        Tree {
            leaves: [0; LIT_ALPHABET],
            leaf_w: [0; LIT_ALPHABET + 1],
            node_w: [0; LIT_ALPHABET],
            parent: [0; 2 * LIT_ALPHABET],
            depth: [0; 2 * LIT_ALPHABET],
        }
    }
}

/// Huffman code lengths for `freq`, none longer than `limit`, into `len` (zeroed by the
/// caller); the symbols given a length go to `used` in symbol order, and their number is
/// returned.
///
/// A Huffman tree from the symbols sorted by frequency (two queues: leaves, and internal nodes,
/// which are made in nondecreasing weight), its depths clamped to `limit` and the Kraft sum
/// brought back to one by moving codes one level down; then the lengths are dealt out
/// shortest to the most frequent. Fewer than two used symbols get two codes of one bit, the
/// simplest complete code every inflater takes.
fn lengths<const N: usize>(
    freq: &[u32; N],
    limit: u32,
    len: &mut [u8; N],
    used: &mut [u16; N],
    tree: &mut Tree,
) -> usize {
    debug_assert!(N <= LIT_ALPHABET && freq.iter().all(|&f| f <= u32::from(u16::MAX)));
    debug_assert!(len.iter().all(|&l| l == 0));
    let mut n = 0;
    for (s, &f) in freq.iter().enumerate() {
        // Branch-free: an unused symbol is written and then overwritten.
        tree.leaves[n] = f << 16 | s as u32;
        used[n] = s as u16;
        n += usize::from(f > 0);
    }
    if n < 2 {
        let one = if n == 1 { used[0] as usize } else { 0 };
        let other = usize::from(one == 0);
        len[one] = 1;
        len[other] = 1;
        used[0] = one.min(other) as u16;
        used[1] = one.max(other) as u16;
        return 2;
    }
    let Tree {
        leaves,
        leaf_w,
        node_w,
        parent,
        depth,
    } = tree;
    let leaves = &mut leaves[..n];
    leaves.sort_unstable();
    // Two queues, the sorted leaves and the internal nodes (made in nondecreasing weight),
    // each with a sentinel weight past its end that no sum reaches, so each pick is one
    // comparison and conditional moves, not a branch the data would steer.
    for (w, &l) in leaf_w.iter_mut().zip(leaves.iter()) {
        *w = l >> 16;
    }
    leaf_w[n] = u32::MAX;
    let (mut i, mut j) = (0, 0);
    for k in 0..n - 1 {
        node_w[k] = u32::MAX;
        let mut take = || {
            let leaf = leaf_w[i] <= node_w[j];
            let (w, id) = if leaf {
                (leaf_w[i], i)
            } else {
                (node_w[j], n + j)
            };
            i += usize::from(leaf);
            j += usize::from(!leaf);
            (w, id)
        };
        let (wa, a) = take();
        let (wb, b) = take();
        node_w[k] = wa + wb;
        parent[a] = (n + k) as u16;
        parent[b] = (n + k) as u16;
    }
    // Depths from the root (the last node) down; a parent is always made after its children.
    depth[2 * n - 2] = 0;
    for k in (0..2 * n - 2).rev() {
        depth[k] = depth[parent[k] as usize] + 1;
    }
    let mut count = [0u32; 16];
    for &d in &depth[..n] {
        count[d.min(limit) as usize] += 1;
    }
    let mut kraft: u64 = (1..=limit)
        .map(|l| u64::from(count[l as usize]) << (limit - l))
        .sum();
    while kraft > 1 << limit {
        // One code from the longest level moves under a shorter code, which goes down a
        // level with it: the sum falls by one unit each time.
        count[limit as usize] -= 1;
        let l = (1..limit)
            .rev()
            .find(|&l| count[l as usize] > 0)
            .expect("while over, some code is shorter than the limit");
        count[l as usize] -= 1;
        count[l as usize + 1] += 2;
        kraft -= 1;
    }
    // Rarest first get the longest codes.
    let mut i = 0;
    for l in (1..=limit).rev() {
        for _ in 0..count[l as usize] {
            len[(leaves[i] & 0xffff) as usize] = l as u8;
            i += 1;
        }
    }
    n
}

#[cfg(test)]
#[path = "deflate_tests.rs"]
mod tests;
