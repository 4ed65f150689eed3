//! nginx's split_clients module: `split_clients STRING $variable { PERCENT% VALUE; ... * VALUE; }`
//! spreads requests over values by a hash of STRING, for A/B tests or, as in the thread-pool
//! article, over disks (`split_clients $request_uri $disk`).
//!
//! The arithmetic is nginx's, to the bit, so that a request lands in the same bucket on both:
//! the hash is MurmurHash2 (32 bits, seed 0: nginx's `ngx_murmur_hash2`); each percentage is
//! read in hundredths (`ngx_atofp(.., 2)`: at most two decimals, `0%` refused) and becomes the
//! boundary `previous + percent * 0xffffffff / 10000`, each part's product rounded down on its
//! own; a hash below a boundary takes that part's value, `*` takes whatever is left, and a hash
//! past every boundary (percentages under 100% and no `*`) gives the empty string.
//!
//! The variable is computed when a template uses it ([`crate::variables::Compute`]).

use std::sync::Arc;

use shoal_conf::{Directive, Error};

use super::map::{define, variable_name};
use crate::conf::{err, Args, Builder, Command, Ctx, Scope};
use crate::variables::{Compute, Template, Vars};

pub static DIRECTIVES: &[Command] = &[Command::block(
    "split_clients",
    Ctx::HTTP.or(Ctx::STREAM),
    Args::TWO,
    set_split_clients,
)];

/// One `split_clients` block.
#[derive(Debug)]
pub struct SplitClients {
    source: Template,
    /// Each part's upper boundary (exclusive; 0 for `*`: everything) and value, in order.
    parts: Vec<(u32, String)>,
}

impl SplitClients {
    /// The value for a hash.
    pub fn pick(&self, hash: u32) -> &str {
        self.parts
            .iter()
            .find(|&&(bound, _)| hash < bound || bound == 0)
            .map_or("", |(_, v)| v.as_str())
    }
}

impl Compute for SplitClients {
    fn compute(&self, vars: &Vars<'_>, out: &mut String) -> bool {
        let key = vars.eval(&self.source);
        // (`$binary_remote_addr`'s raw bytes are hashed, as nginx hashes them.)
        let mut raw = Vec::new();
        crate::variables::raw_bytes_into(&key, &mut raw);
        out.push_str(self.pick(murmur_hash2(&raw)));
        true
    }
}

/// MurmurHash2, 32 bits, seed 0, as nginx's `ngx_murmur_hash2`.
pub fn murmur_hash2(data: &[u8]) -> u32 {
    const M: u32 = 0x5bd1_e995;
    // nginx: `h = 0 ^ len` with a size_t length truncated to 32 bits.
    let mut h = data.len() as u32;
    let mut chunks = data.chunks_exact(4);
    for c in &mut chunks {
        let mut k = u32::from_le_bytes([c[0], c[1], c[2], c[3]]);
        k = k.wrapping_mul(M);
        k ^= k >> 24;
        k = k.wrapping_mul(M);
        h = h.wrapping_mul(M);
        h ^= k;
    }
    let rest = chunks.remainder();
    if rest.len() == 3 {
        h ^= u32::from(rest[2]) << 16;
    }
    if rest.len() >= 2 {
        h ^= u32::from(rest[1]) << 8;
    }
    if !rest.is_empty() {
        h ^= u32::from(rest[0]);
        h = h.wrapping_mul(M);
    }
    h ^= h >> 13;
    h = h.wrapping_mul(M);
    h ^= h >> 15;
    h
}

/// nginx's `ngx_atofp(text, len, point)`: a fixed-point number with at most `point` decimals,
/// scaled by 10^point; `None` for anything else (nginx's `NGX_ERROR`).
fn atofp(text: &[u8], mut point: u32) -> Option<i64> {
    if text.is_empty() {
        return None;
    }
    let mut value: i64 = 0;
    let mut dot = false;
    for &c in text {
        if point == 0 {
            return None;
        }
        if c == b'.' {
            if dot {
                return None;
            }
            dot = true;
            continue;
        }
        if !c.is_ascii_digit() {
            return None;
        }
        value = value.checked_mul(10)?.checked_add(i64::from(c - b'0'))?;
        if dot {
            point -= 1;
        }
    }
    for _ in 0..point {
        value = value.checked_mul(10)?;
    }
    Some(value)
}

/// The boundaries of parts given in hundredths of a percent (0 for `*`), with nginx's checks and
/// its 32-bit arithmetic (`sum` and `last` are `uint32_t` there). `None`: over 100%.
fn boundaries(percents: &[u32]) -> Option<Vec<u32>> {
    let mut sum: u32 = 0;
    let mut last: u32 = 0;
    let mut out = Vec::with_capacity(percents.len());
    for &p in percents {
        sum = if p != 0 { sum.wrapping_add(p) } else { 10000 };
        if sum > 10000 {
            return None;
        }
        if p == 0 {
            out.push(0);
        } else {
            last = (u64::from(last) + u64::from(p) * 0xffff_ffff / 10000) as u32;
            out.push(last);
        }
    }
    Some(out)
}

fn set_split_clients(_: &mut Builder, d: &Directive, s: &mut Scope<'_>) -> Result<(), Error> {
    let source = Template::compile(&d.args[0].value).map_err(|m| err(d, m))?;
    let name = variable_name(d)?;
    let mut percents = Vec::new();
    let mut values = Vec::new();
    // nginx reads a part's value as its second word without counting words: a line of one word
    // takes the second word of the last line that had one (the block's own line first).
    let mut second = d.args[0].value.as_str();
    let mut last_line = d;
    for e in d.block.as_deref().unwrap_or_default() {
        if e.block.is_some() {
            return Err(err(e, "unexpected \"{\""));
        }
        last_line = e;
        if e.name == "*" {
            percents.push(0);
        } else {
            let percent = e
                .name
                .strip_suffix('%')
                .and_then(|n| atofp(n.as_bytes(), 2))
                .filter(|&n| n != 0)
                .ok_or_else(|| err(e, format!("invalid percent value \"{}\"", e.name)))?;
            // nginx keeps the low 32 bits.
            percents.push(percent as u32);
        }
        if let Some(v) = e.args.first() {
            second = &v.value;
        }
        values.push(second.to_string());
    }
    // nginx reports this at the block's closing brace, which the tree does not keep: the last
    // part's line is the nearest.
    let bounds = boundaries(&percents)
        .ok_or_else(|| err(last_line, "percent total is greater than 100%"))?;
    let split = SplitClients {
        source,
        parts: bounds.into_iter().zip(values).collect(),
    };
    define(s, name, Arc::new(split));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn murmur_hash2_vectors() {
        // From an independent implementation of Appleby's reference MurmurHash2 (seed 0), in
        // Python; the differential test checks the same against nginx itself.
        for (s, h) in [
            (&b""[..], 0),
            (b"a", 2456313694),
            (b"ab", 446775395),
            (b"abc", 324500635),
            (b"abcd", 646393889),
            (b"abcde", 1594468574),
            (b"hello world", 1151865881),
            (b"/", 2810847099),
            (b"/index.html", 2054314365),
            (b"The quick brown fox jumps over the lazy dog", 556214736),
            (b"\x00\x01\x02\x03\x04\x05\x06", 1076244380),
        ] {
            assert_eq!(murmur_hash2(s), h, "{}", shoal_http::lossy(s));
        }
    }

    #[test]
    fn percentages() {
        assert_eq!(atofp(b"33.3", 2), Some(3330));
        assert_eq!(atofp(b"33.33", 2), Some(3333));
        assert_eq!(atofp(b"33.333", 2), None);
        assert_eq!(atofp(b"5.", 2), Some(500));
        assert_eq!(atofp(b".5", 2), Some(50));
        assert_eq!(atofp(b".", 2), Some(0));
        assert_eq!(atofp(b"1..0", 2), None);
        assert_eq!(atofp(b"", 2), None);
        assert_eq!(atofp(b"1e2", 2), None);
        assert_eq!(atofp(b"99999999999999999999", 2), None);
    }

    #[test]
    fn seed000_boundaries() {
        // split_clients $request_uri $disk { 33.3% 1; 33.3% 2; * 3; }
        let b = boundaries(&[3330, 3330, 0]).unwrap();
        assert_eq!(b, vec![1_430_224_109, 2_860_448_218, 0]);
        let split = SplitClients {
            source: Template::default(),
            parts: b
                .into_iter()
                .zip(["1", "2", "3"].map(String::from))
                .collect(),
        };
        assert_eq!(split.pick(0), "1");
        assert_eq!(split.pick(1_430_224_108), "1");
        assert_eq!(split.pick(1_430_224_109), "2");
        assert_eq!(split.pick(2_860_448_217), "2");
        assert_eq!(split.pick(2_860_448_218), "3");
        assert_eq!(split.pick(u32::MAX), "3");
        assert_eq!(split.pick(murmur_hash2(b"/abc")), "1");
        assert_eq!(split.pick(murmur_hash2(b"/")), "2");
        assert_eq!(split.pick(murmur_hash2(b"/a")), "3");
    }

    #[test]
    fn totals() {
        assert_eq!(boundaries(&[10000]), Some(vec![u32::MAX]));
        assert_eq!(boundaries(&[6000, 5000]), None);
        assert_eq!(boundaries(&[0, 1000]), None, "`*` counts as the rest");
        assert_eq!(
            boundaries(&[5000, 5000, 0]),
            Some(vec![2147483647, 4294967294, 0])
        );
        // 100% leaves the top hash out, as in nginx.
        let split = SplitClients {
            source: Template::default(),
            parts: vec![(u32::MAX, "a".into())],
        };
        assert_eq!(split.pick(u32::MAX), "");
    }
}
