//! The parsed pattern: a tree of nodes over bytes, with the pattern's options already applied
//! (a caseless letter is a two-byte class, `.` is the class it stands for, `^` and `$` are the
//! assertion their mode makes them), and the questions the engines ask of it: fixed length for
//! lookbehinds, minimum length and first bytes for skipping start positions, and whether the
//! linear-time engine can run it.
//!
//! Nothing here knows PCRE's syntax (that is `parse.rs`) or how a match runs.

/// A set of bytes: one bit per value.
#[derive(Clone, Copy, PartialEq, Eq, Default, Debug)]
pub struct ByteSet([u64; 4]);

impl ByteSet {
    pub const EMPTY: ByteSet = ByteSet([0; 4]);
    pub const FULL: ByteSet = ByteSet([u64::MAX; 4]);

    pub fn of(b: u8) -> ByteSet {
        let mut s = ByteSet::EMPTY;
        s.insert(b);
        s
    }

    pub fn range(lo: u8, hi: u8) -> ByteSet {
        let mut s = ByteSet::EMPTY;
        s.insert_range(lo, hi);
        s
    }

    pub fn insert(&mut self, b: u8) {
        self.0[usize::from(b >> 6)] |= 1 << (b & 63);
    }

    pub fn insert_range(&mut self, lo: u8, hi: u8) {
        for b in lo..=hi {
            self.insert(b);
        }
    }

    #[inline]
    pub fn contains(&self, b: u8) -> bool {
        self.0[usize::from(b >> 6)] & (1 << (b & 63)) != 0
    }

    pub fn union(&mut self, o: &ByteSet) {
        for (a, b) in self.0.iter_mut().zip(o.0) {
            *a |= b;
        }
    }

    pub fn negated(&self) -> ByteSet {
        ByteSet(self.0.map(|w| !w))
    }

    pub fn is_empty(&self) -> bool {
        self.0 == [0; 4]
    }

    pub fn count(&self) -> u32 {
        self.0.iter().map(|w| w.count_ones()).sum()
    }

    /// The one byte in the set, if it holds exactly one.
    pub fn single(&self) -> Option<u8> {
        (self.count() == 1).then(|| (0..=255u8).find(|&b| self.contains(b)))?
    }

    /// With the other case of every ASCII letter in it: PCRE2's default character tables (the
    /// "C" locale, which nginx never changes) give case only to ASCII letters.
    pub fn caseless(&self) -> ByteSet {
        let mut s = *self;
        for b in b'A'..=b'Z' {
            if self.contains(b) || self.contains(b.to_ascii_lowercase()) {
                s.insert(b);
                s.insert(b.to_ascii_lowercase());
            }
        }
        s
    }

    /// The set as ascending inclusive ranges.
    pub fn ranges(&self) -> Vec<(u8, u8)> {
        let mut out = Vec::new();
        let mut b = 0usize;
        while b < 256 {
            if self.contains(b as u8) {
                let lo = b;
                while b + 1 < 256 && self.contains((b + 1) as u8) {
                    b += 1;
                }
                out.push((lo as u8, b as u8));
            }
            b += 1;
        }
        out
    }
}

/// Zero-width assertions.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Look {
    /// `\A`, `\G`, and `^` outside multiline mode.
    Start,
    /// `^` in multiline mode: the start, or after a newline that is not the subject's last byte.
    StartLine,
    /// `\z`.
    End,
    /// `$` outside multiline mode, and `\Z`: the end, or before a newline that is the last byte.
    EndOrFinalNewline,
    /// `$` in multiline mode: the end, or before any newline.
    EndLine,
    /// `\b` (ASCII word characters).
    WordBoundary,
    /// `\B`.
    NotWordBoundary,
}

/// How a repetition prefers to match.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Greed {
    Greedy,
    Lazy,
    /// Greedy and never gives back (`a*+`).
    Possessive,
}

#[derive(Clone, PartialEq, Eq, Debug)]
pub enum Node {
    Empty,
    Byte(u8),
    Class(ByteSet),
    Look(Look),
    Concat(Vec<Node>),
    Alt(Vec<Node>),
    /// A capturing group, numbered from 1.
    Capture(u32, Box<Node>),
    /// A non-capturing group.
    Group(Box<Node>),
    /// `(?>...)`.
    Atomic(Box<Node>),
    /// `(?=...)`, `(?!...)`, `(?<=...)`, `(?<!...)`; `offset` is where the group starts in the
    /// pattern (PCRE2 reports a lookbehind's error there).
    Around {
        behind: bool,
        negate: bool,
        body: Box<Node>,
        offset: usize,
    },
    Repeat {
        body: Box<Node>,
        min: u32,
        max: Option<u32>,
        greed: Greed,
    },
    /// A backreference: the first of `groups` that is set (several with duplicate names);
    /// `at` is where the pattern names the group.
    Backref {
        groups: Vec<u32>,
        caseless: bool,
        at: usize,
    },
    /// `\K`: the reported match starts here.
    KeepOut,
    /// `(*FAIL)`.
    Fail,
}

impl Node {
    /// The length of every match of this node when it is always the same, as PCRE2 requires
    /// of a lookbehind's branches. `groups[n]` is the fixed length of group `n`, if known.
    pub fn fixed_len(&self, groups: &[Option<usize>]) -> Option<usize> {
        match self {
            Node::Empty | Node::Look(_) | Node::Around { .. } | Node::Fail => Some(0),
            Node::Byte(_) | Node::Class(_) => Some(1),
            Node::Concat(v) => v
                .iter()
                .try_fold(0usize, |n, x| n.checked_add(x.fixed_len(groups)?)),
            Node::Alt(v) => {
                let first = v.first()?.fixed_len(groups)?;
                v.iter()
                    .all(|x| x.fixed_len(groups) == Some(first))
                    .then_some(first)
            }
            Node::Capture(_, b) | Node::Group(b) | Node::Atomic(b) => b.fixed_len(groups),
            // A lookahead obeyed or not is still empty; a repeated lookbehind is made so
            // that its count varies only when PCRE2's count did (see `quantified`).
            Node::Repeat { body, .. } if matches!(**body, Node::Around { behind: false, .. }) => {
                Some(0)
            }
            Node::Repeat { body, min, max, .. } => {
                if Some(*min) != *max {
                    return None;
                }
                body.fixed_len(groups)?.checked_mul(*min as usize)
            }
            Node::Backref { groups: g, .. } => match g.as_slice() {
                [one] => groups.get(*one as usize).copied().flatten(),
                _ => None,
            },
            Node::KeepOut => None,
        }
    }

    /// The fewest bytes a match of this node consumes (lookarounds consume none).
    pub fn min_len(&self) -> usize {
        match self {
            Node::Empty | Node::Look(_) | Node::Around { .. } | Node::KeepOut => 0,
            Node::Backref { .. } | Node::Fail => 0,
            Node::Byte(_) | Node::Class(_) => 1,
            Node::Concat(v) => v.iter().fold(0usize, |n, x| n.saturating_add(x.min_len())),
            Node::Alt(v) => v.iter().map(Node::min_len).min().unwrap_or(0),
            Node::Capture(_, b) | Node::Group(b) | Node::Atomic(b) => b.min_len(),
            Node::Repeat { body, min, .. } => body.min_len().saturating_mul(*min as usize),
        }
    }

    /// The bytes a match can start with, or `None` when it can start with anything or match
    /// empty (then no start position can be skipped).
    pub fn first_bytes(&self) -> Option<ByteSet> {
        let mut set = ByteSet::EMPTY;
        match self.first_into(&mut set) {
            First::Consumes => Some(set),
            First::MayBeEmpty | First::Unknown => None,
        }
    }

    fn first_into(&self, set: &mut ByteSet) -> First {
        match self {
            Node::Byte(b) => {
                set.insert(*b);
                First::Consumes
            }
            Node::Class(c) => {
                set.union(c);
                First::Consumes
            }
            // A failing node starts nothing: it adds no byte and lets nothing through.
            Node::Fail => First::Consumes,
            Node::Empty | Node::Look(_) | Node::Around { .. } => First::MayBeEmpty,
            Node::Backref { .. } | Node::KeepOut => First::Unknown,
            Node::Concat(v) => {
                for x in v {
                    match x.first_into(set) {
                        First::MayBeEmpty => continue,
                        other => return other,
                    }
                }
                First::MayBeEmpty
            }
            Node::Alt(v) => {
                let mut out = First::Consumes;
                for x in v {
                    match x.first_into(set) {
                        First::Unknown => return First::Unknown,
                        First::MayBeEmpty => out = First::MayBeEmpty,
                        First::Consumes => {}
                    }
                }
                out
            }
            Node::Capture(_, b) | Node::Group(b) | Node::Atomic(b) => b.first_into(set),
            Node::Repeat { body, min, .. } => match body.first_into(set) {
                First::Consumes if *min == 0 => First::MayBeEmpty,
                other => other,
            },
        }
    }

    /// A byte (or a letter in both cases) that every match consumes, if one is known. A
    /// subject without it cannot match: the search ends at once, as PCRE2's does with its
    /// "last code unit", instead of backtracking to its limit first.
    pub fn required_bytes(&self) -> Option<ByteSet> {
        match self {
            Node::Byte(b) => Some(ByteSet::of(*b)),
            Node::Class(s) if s.count() <= 2 => Some(*s),
            Node::Concat(v) => v.iter().rev().find_map(Node::required_bytes),
            Node::Alt(v) => {
                let first = v.first()?.required_bytes()?;
                v.iter()
                    .all(|x| x.required_bytes() == Some(first))
                    .then_some(first)
            }
            Node::Capture(_, b) | Node::Group(b) | Node::Atomic(b) => b.required_bytes(),
            Node::Repeat { body, min, .. } if *min > 0 => body.required_bytes(),
            _ => None,
        }
    }

    /// Whether every match must start at the subject's start (`^` or `\A` leading every
    /// branch), so only offset 0 is tried.
    pub fn anchored(&self) -> bool {
        match self {
            Node::Look(Look::Start) => true,
            Node::Concat(v) => v.first().is_some_and(Node::anchored),
            Node::Alt(v) => !v.is_empty() && v.iter().all(Node::anchored),
            Node::Capture(_, b) | Node::Group(b) | Node::Atomic(b) => b.anchored(),
            Node::Repeat { body, min, .. } => *min > 0 && body.anchored(),
            _ => false,
        }
    }

    /// Calls `f` on this node and every node below it.
    pub fn walk(&self, f: &mut impl FnMut(&Node)) {
        f(self);
        match self {
            Node::Concat(v) | Node::Alt(v) => v.iter().for_each(|x| x.walk(f)),
            Node::Capture(_, b) | Node::Group(b) | Node::Atomic(b) => b.walk(f),
            Node::Around { body, .. } | Node::Repeat { body, .. } => body.walk(f),
            _ => {}
        }
    }
}

enum First {
    /// Every match consumes a byte of the set first.
    Consumes,
    /// A match may consume nothing (the set holds what it starts with when it does not).
    MayBeEmpty,
    Unknown,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn byte_set_ranges_and_case() {
        let s = ByteSet::range(b'a', b'c');
        assert_eq!(s.ranges(), vec![(b'a', b'c')]);
        let c = s.caseless();
        assert_eq!(c.ranges(), vec![(b'A', b'C'), (b'a', b'c')]);
        assert_eq!(ByteSet::of(0xe9).caseless(), ByteSet::of(0xe9));
        assert_eq!(ByteSet::of(7).single(), Some(7));
        assert_eq!(ByteSet::FULL.negated(), ByteSet::EMPTY);
        assert_eq!(ByteSet::FULL.ranges(), vec![(0, 255)]);
    }

    #[test]
    fn fixed_length() {
        let ab = Node::Concat(vec![Node::Byte(b'a'), Node::Byte(b'b')]);
        assert_eq!(ab.fixed_len(&[]), Some(2));
        let alt = Node::Alt(vec![Node::Byte(b'a'), ab.clone()]);
        assert_eq!(alt.fixed_len(&[]), None);
        let rep = Node::Repeat {
            body: Box::new(ab),
            min: 3,
            max: Some(3),
            greed: Greed::Greedy,
        };
        assert_eq!(rep.fixed_len(&[]), Some(6));
        assert_eq!(rep.min_len(), 6);
        assert_eq!(rep.required_bytes(), Some(ByteSet::of(b'b')));
        let optional = Node::Repeat {
            body: Box::new(Node::Byte(b'x')),
            min: 0,
            max: None,
            greed: Greed::Greedy,
        };
        assert_eq!(optional.required_bytes(), None);
        assert_eq!(alt.required_bytes(), None);
    }
}
