//! geo's address tables: built as nginx builds them (so that the same lines give the same
//! warnings and errors), looked up as one sorted list of boundaries.
//!
//! [`Prefixes`] is the CIDR form: networks by (address, length), the most specific one that
//! holds an address giving its value, as nginx's radix tree does; a network written twice
//! replaces the first, `delete` removes one. [`Ranges`] is the `ranges` form, kept as nginx
//! keeps it: pieces within each /16 (its "segment"), disjoint and sorted; a range equal to a
//! piece replaces its value (nginx warns `duplicate range`), one inside a piece splits it
//! silently, any other overlap is an error; `delete` removes pieces exactly as written.
//!
//! Both compile to a [`Lookup`]: the addresses where the value changes, sorted, with the value
//! from each on; an address is found by binary search, O(log n) whatever the table's size and
//! shape (nginx: a radix tree walk, or a scan within a segment).

use std::collections::{BTreeMap, HashMap};

/// The index of a value in the geo's list of values.
pub type Value = u32;

const NONE: Value = Value::MAX;

/// An address as a number: IPv4 (`u32`) or IPv6 (`u128`).
pub trait Addr: Copy + Ord + std::hash::Hash + std::fmt::Debug {
    const BITS: u32;
    /// The last address of the network `self`/`len`.
    fn last(self, len: u8) -> Self;
    /// The next address, `None` after the last.
    fn next(self) -> Option<Self>;
}

impl Addr for u32 {
    const BITS: u32 = 32;
    fn last(self, len: u8) -> u32 {
        self | u32::MAX.checked_shr(u32::from(len)).unwrap_or(0)
    }
    fn next(self) -> Option<u32> {
        self.checked_add(1)
    }
}

impl Addr for u128 {
    const BITS: u32 = 128;
    fn last(self, len: u8) -> u128 {
        self | u128::MAX.checked_shr(u32::from(len)).unwrap_or(0)
    }
    fn next(self) -> Option<u128> {
        self.checked_add(1)
    }
}

/// Where values change, sorted: `starts[i]` on has `values[i]` (`NONE`: no value).
#[derive(Clone, Debug, Default)]
pub struct Lookup<A> {
    starts: Vec<A>,
    values: Vec<Value>,
}

impl<A: Addr> Lookup<A> {
    /// The value for an address, if a network or range holds it.
    pub fn find(&self, a: A) -> Option<Value> {
        let i = self.starts.partition_point(|s| *s <= a);
        let v = *self.values.get(i.checked_sub(1)?)?;
        (v != NONE).then_some(v)
    }

    /// Adds a boundary (non-decreasing); a second one at the same address replaces the first.
    fn push(&mut self, at: A, v: Value) {
        if self.starts.last() == Some(&at) {
            *self.values.last_mut().expect("a value for each start") = v;
        } else {
            self.starts.push(at);
            self.values.push(v);
        }
    }

    /// How many boundaries (for tests and sizes).
    pub fn boundaries(&self) -> usize {
        self.starts.len()
    }
}

/// The CIDR form of one address family.
#[derive(Debug)]
pub struct Prefixes<A> {
    nets: HashMap<(A, u8), Value>,
}

impl<A: Addr> Default for Prefixes<A> {
    fn default() -> Self {
        Prefixes {
            nets: HashMap::new(),
        }
    }
}

impl<A: Addr> Prefixes<A> {
    /// Sets a network's value (`net` without host bits); the value it replaces, if any.
    pub fn insert(&mut self, net: A, len: u8, v: Value) -> Option<Value> {
        self.nets.insert((net, len), v)
    }

    /// Removes a network; false when there was none.
    pub fn remove(&mut self, net: A, len: u8) -> bool {
        self.nets.remove(&(net, len)).is_some()
    }

    pub fn is_empty(&self) -> bool {
        self.nets.is_empty()
    }

    /// The boundaries of the most specific networks. Two networks are nested or apart, so a
    /// walk in address order (the wider first where they start together) with the open
    /// networks on a stack finds every change.
    pub fn compile(&self) -> Lookup<A> {
        let mut nets: Vec<(A, u8, Value)> =
            self.nets.iter().map(|(&(a, l), &v)| (a, l, v)).collect();
        nets.sort_unstable_by(|x, y| x.0.cmp(&y.0).then(x.1.cmp(&y.1)));
        let mut out = Lookup {
            starts: Vec::with_capacity(nets.len() * 2),
            values: Vec::with_capacity(nets.len() * 2),
        };
        let mut open: Vec<(A, Value)> = Vec::new();
        for (start, len, v) in nets {
            close_before(&mut open, &mut out, Some(start));
            out.push(start, v);
            open.push((start.last(len), v));
        }
        close_before(&mut open, &mut out, None);
        out
    }
}

/// Closes the open networks that end before `at` (all of them for `None`), each giving the
/// value back to the one around it.
fn close_before<A: Addr>(open: &mut Vec<(A, Value)>, out: &mut Lookup<A>, at: Option<A>) {
    while let Some(&(end, _)) = open.last() {
        if at.is_some_and(|a| end >= a) {
            break;
        }
        open.pop();
        if let Some(after) = end.next() {
            out.push(after, open.last().map_or(NONE, |&(_, v)| v));
        }
    }
}

/// One piece of a range within a segment.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Piece {
    lo: u16,
    hi: u16,
    v: Value,
}

/// The `ranges` form (IPv4 only).
#[derive(Debug, Default)]
pub struct Ranges {
    segments: BTreeMap<u16, Vec<Piece>>,
}

/// The segments a range covers, with the part of each: (segment, low, high).
fn pieces(start: u32, end: u32) -> impl Iterator<Item = (u16, u16, u16)> {
    let (first, last) = ((start >> 16) as u16, (end >> 16) as u16);
    (first..=last).map(move |s| {
        let lo = if s == first { start as u16 } else { 0 };
        let hi = if s == last { end as u16 } else { u16::MAX };
        (s, lo, hi)
    })
}

impl Ranges {
    /// Adds `start..=end` (`start <= end`). `duplicate` is called with the old value of each
    /// piece it replaces whole; an overlap nginx refuses is `Err` with the piece it overlaps.
    pub fn add(
        &mut self,
        start: u32,
        end: u32,
        v: Value,
        duplicate: &mut dyn FnMut(Value),
    ) -> Result<(), (u32, u32)> {
        for (seg, lo, hi) in pieces(start, end) {
            let list = self.segments.entry(seg).or_default();
            let i = list.partition_point(|p| p.hi < lo);
            let new = Piece { lo, hi, v };
            match list.get(i).copied() {
                Some(p) if p.lo <= hi => {
                    if lo < p.lo || hi > p.hi {
                        let base = u32::from(seg) << 16;
                        return Err((base | u32::from(p.lo), base | u32::from(p.hi)));
                    }
                    if (lo, hi) == (p.lo, p.hi) {
                        duplicate(p.v);
                        list[i].v = v;
                        continue;
                    }
                    // Inside a piece: it splits around the new one.
                    let mut parts = Vec::with_capacity(3);
                    if lo > p.lo {
                        parts.push(Piece { hi: lo - 1, ..p });
                    }
                    parts.push(new);
                    if hi < p.hi {
                        parts.push(Piece { lo: hi + 1, ..p });
                    }
                    list.splice(i..=i, parts);
                }
                _ => list.insert(i, new),
            }
        }
        Ok(())
    }

    /// Removes the pieces of `start..=end`, each only if there is one exactly so; false when
    /// some were not there.
    pub fn delete(&mut self, start: u32, end: u32) -> bool {
        let mut all = true;
        for (seg, lo, hi) in pieces(start, end) {
            let list = self.segments.entry(seg).or_default();
            match list.iter().position(|p| (p.lo, p.hi) == (lo, hi)) {
                Some(i) => {
                    list.remove(i);
                }
                None => all = false,
            }
        }
        all
    }

    pub fn is_empty(&self) -> bool {
        self.segments.values().all(Vec::is_empty)
    }

    pub fn compile(&self) -> Lookup<u32> {
        let mut out = Lookup::default();
        for (&seg, list) in &self.segments {
            let base = u32::from(seg) << 16;
            for p in list {
                out.push(base | u32::from(p.lo), p.v);
                if let Some(after) = (base | u32::from(p.hi)).next() {
                    out.push(after, NONE);
                }
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::Ipv4Addr;

    fn v4(s: &str) -> u32 {
        u32::from(s.parse::<Ipv4Addr>().unwrap())
    }

    fn prefixes(nets: &[(&str, u8, Value)]) -> Lookup<u32> {
        let mut p = Prefixes::default();
        for &(a, l, v) in nets {
            p.insert(v4(a), l, v);
        }
        p.compile()
    }

    #[test]
    fn the_most_specific_network_wins() {
        // The documentation's example: 127.0.0.1 is RU (1), not US (0).
        let t = prefixes(&[
            ("127.0.0.0", 24, 0),
            ("127.0.0.1", 32, 1),
            ("10.1.0.0", 16, 1),
            ("192.168.1.0", 24, 2),
        ]);
        for (a, want) in [
            ("127.0.0.1", Some(1)),
            ("127.0.0.0", Some(0)),
            ("127.0.0.2", Some(0)),
            ("127.0.0.255", Some(0)),
            ("127.0.1.0", None),
            ("10.1.255.255", Some(1)),
            ("10.2.0.0", None),
            ("192.168.1.9", Some(2)),
            ("0.0.0.0", None),
            ("255.255.255.255", None),
        ] {
            assert_eq!(t.find(v4(a)), want, "{a}");
        }
        // A default (/0) under everything, nested networks ending together.
        let t = prefixes(&[
            ("0.0.0.0", 0, 9),
            ("10.0.0.0", 8, 1),
            ("10.255.0.0", 16, 2),
            ("10.255.255.0", 24, 3),
        ]);
        for (a, want) in [
            ("9.255.255.255", Some(9)),
            ("10.0.0.0", Some(1)),
            ("10.254.255.255", Some(1)),
            ("10.255.0.0", Some(2)),
            ("10.255.255.255", Some(3)),
            ("11.0.0.0", Some(9)),
            ("255.255.255.255", Some(9)),
        ] {
            assert_eq!(t.find(v4(a)), want, "{a}");
        }
    }

    #[test]
    fn networks_replaced_and_deleted() {
        let mut p: Prefixes<u32> = Prefixes::default();
        assert_eq!(p.insert(v4("0.0.0.0"), 1, 0), None);
        assert_eq!(p.insert(v4("1.0.0.0"), 8, 1), None);
        assert_eq!(p.insert(v4("1.0.0.0"), 8, 2), Some(1));
        assert!(p.remove(v4("1.0.0.0"), 8));
        assert!(!p.remove(v4("1.0.0.0"), 8));
        assert_eq!(p.compile().find(v4("1.0.0.1")), Some(0));
        assert_eq!(p.compile().find(v4("128.0.0.0")), None);
        let mut six: Prefixes<u128> = Prefixes::default();
        six.insert(0, 0, 5);
        six.insert(1, 128, 6);
        let t = six.compile();
        assert_eq!(t.find(1), Some(6));
        assert_eq!(t.find(2), Some(5));
        assert_eq!(t.find(u128::MAX), Some(5));
    }

    fn ranges(list: &[(&str, &str, Value)]) -> (Ranges, Vec<Value>) {
        let mut r = Ranges::default();
        let mut dups = Vec::new();
        for &(s, e, v) in list {
            r.add(v4(s), v4(e), v, &mut |old| dups.push(old)).unwrap();
        }
        (r, dups)
    }

    #[test]
    fn ranges_as_nginx_keeps_them() {
        // The lookups checked against nginx 1.22.
        let (r, dups) = ranges(&[
            ("1.2.3.0", "1.2.3.255", 0),
            ("1.2.3.10", "1.2.3.20", 1),
            ("1.3.0.0", "1.6.0.20", 2),
            ("1.4.0.0", "1.4.255.255", 3),
        ]);
        assert_eq!(dups, vec![2]);
        let t = r.compile();
        for (a, want) in [
            ("1.2.3.4", Some(0)),
            ("1.2.3.9", Some(0)),
            ("1.2.3.10", Some(1)),
            ("1.2.3.20", Some(1)),
            ("1.2.3.21", Some(0)),
            ("1.2.4.0", None),
            ("1.3.5.5", Some(2)),
            ("1.4.0.0", Some(3)),
            ("1.6.0.20", Some(2)),
            ("1.6.0.21", None),
            ("1.0.0.1", None),
        ] {
            assert_eq!(t.find(v4(a)), want, "{a}");
        }
        // A range equal to several segments' pieces warns once per segment.
        let (_, dups) = ranges(&[("1.0.0.0", "1.2.255.255", 0), ("1.0.0.0", "1.2.255.255", 1)]);
        assert_eq!(dups, vec![0, 0, 0]);
    }

    #[test]
    fn overlaps_name_the_piece() {
        let ov = |a: (&str, &str), b: (&str, &str)| {
            let mut r = Ranges::default();
            r.add(v4(a.0), v4(a.1), 0, &mut |_| {}).unwrap();
            r.add(v4(b.0), v4(b.1), 1, &mut |_| {})
                .map_err(|(s, e)| format!("{}-{}", Ipv4Addr::from(s), Ipv4Addr::from(e)))
        };
        // As nginx: `range "B" overlaps "PIECE"`.
        assert_eq!(
            ov(("1.2.3.0", "1.2.3.255"), ("1.2.3.10", "1.2.4.5")),
            Err("1.2.3.0-1.2.3.255".into())
        );
        assert_eq!(
            ov(("1.2.3.10", "1.2.4.5"), ("1.2.3.0", "1.2.3.255")),
            Err("1.2.3.10-1.2.4.5".into())
        );
        assert_eq!(
            ov(("1.2.3.10", "1.2.3.20"), ("1.2.3.0", "1.2.3.255")),
            Err("1.2.3.10-1.2.3.20".into())
        );
        assert_eq!(
            ov(("127.0.0.1", "127.0.0.1"), ("127.0.0.1", "127.0.0.255")),
            Err("127.0.0.1-127.0.0.1".into())
        );
        assert_eq!(
            ov(("1.2.0.0", "1.5.255.255"), ("1.1.255.0", "1.2.0.20")),
            Ok(())
        );
    }

    #[test]
    fn ranges_deleted_as_written() {
        let (mut r, _) = ranges(&[("1.2.3.0", "1.2.3.255", 0), ("1.2.3.10", "1.2.3.20", 1)]);
        assert!(r.delete(v4("1.2.3.10"), v4("1.2.3.20")));
        assert!(r.delete(v4("1.2.3.0"), v4("1.2.3.9")));
        assert!(!r.delete(v4("1.2.3.0"), v4("1.2.3.9")));
        assert!(!r.delete(v4("1.2.0.0"), v4("1.2.255.255")));
        let t = r.compile();
        assert_eq!(t.find(v4("1.2.3.5")), None);
        assert_eq!(t.find(v4("1.2.3.15")), None);
        assert_eq!(t.find(v4("1.2.3.21")), Some(0));
    }

    /// A deterministic pseudo-random sequence (xorshift), for tables without a crate.
    fn rng(seed: &mut u64) -> u64 {
        *seed ^= *seed << 13;
        *seed ^= *seed >> 7;
        *seed ^= *seed << 17;
        *seed
    }

    /// The compiled table against a linear search for the most specific network.
    #[test]
    fn compiled_prefixes_agree_with_a_linear_search() {
        let mut seed = 0x5eed_u64;
        for round in 0..50 {
            let mut p: Prefixes<u32> = Prefixes::default();
            let mut list = Vec::new();
            for v in 0..(round * 4 + 1) {
                // Few distinct high bits, so that networks nest.
                let len = (rng(&mut seed) % 33) as u8;
                let a = (rng(&mut seed) as u32) & 0xc0ff_ff0f;
                let net = a & u32::MAX.checked_shl(32 - u32::from(len)).unwrap_or(0);
                p.insert(net, len, v);
                list.retain(|&(n, l, _)| (n, l) != (net, len));
                list.push((net, len, v));
            }
            let t = p.compile();
            for _ in 0..200 {
                let a =
                    (rng(&mut seed) as u32) & 0xc0ff_ff0f | (rng(&mut seed) as u32 & 0x0000_00f0);
                let want = list
                    .iter()
                    .filter(|&&(n, l, _)| {
                        a.checked_shr(32 - u32::from(l)).unwrap_or(0)
                            == n.checked_shr(32 - u32::from(l)).unwrap_or(0)
                    })
                    .max_by_key(|&&(_, l, _)| l)
                    .map(|&(_, _, v)| v);
                assert_eq!(t.find(a), want, "{a:#x}");
            }
        }
    }

    /// The cost of one lookup in a 10,000-network table (not a test: run with
    /// `cargo test -p shoal-server --release geo_lookup_cost -- --ignored --nocapture`).
    #[test]
    #[ignore]
    fn geo_lookup_cost() {
        let mut seed = 0x9e37_79b9_u64;
        let mut p: Prefixes<u32> = Prefixes::default();
        for v in 0..10_000 {
            let len = 8 + (rng(&mut seed) % 25) as u8;
            let a = rng(&mut seed) as u32;
            p.insert(a & (u32::MAX << (32 - u32::from(len))), len, v % 200);
        }
        let t = p.compile();
        let addrs: Vec<u32> = (0..1 << 16).map(|_| rng(&mut seed) as u32).collect();
        let rounds = 100;
        let start = std::time::Instant::now();
        let mut hits = 0u64;
        for _ in 0..rounds {
            for &a in &addrs {
                hits += u64::from(t.find(std::hint::black_box(a)).is_some());
            }
        }
        let ns = start.elapsed().as_nanos() as f64 / (rounds * addrs.len()) as f64;
        println!(
            "geo: 10000 networks, {} boundaries: {ns:.1} ns/lookup ({hits} hits)",
            t.boundaries()
        );
    }
}
