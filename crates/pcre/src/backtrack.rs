//! A backtracking matcher for what only a backtracker can run as PCRE2 does: lookarounds,
//! backreferences, atomic groups, possessive quantifiers, `\K`, and captures in repeated groups
//! that can match empty. The parsed pattern becomes a small program; a match walks it with an
//! explicit stack of choice points (never the thread's stack), undoing capture writes through
//! a trail when it backtracks.
//!
//! It follows PCRE2's rules where they decide the result: alternatives and quantifiers tried in
//! order, an iteration of an unbounded group that matched empty ends the loop, lookarounds are
//! atomic and keep the captures of a positive one, a backreference to an unset group fails.
//! Work is bounded: every choice point counts against a match limit (PCRE2's default,
//! 10 000 000) and the stack against a size limit, so a hostile subject gets an error, not a
//! stalled worker.

use std::cell::RefCell;

use crate::ast::{ByteSet, Greed, Look, Node};
use crate::MatchError;

/// The most instructions a program may have (PCRE2 has its own limit on compiled size).
const MAX_PROGRAM: usize = 1 << 20;
/// The most stack frames a match may hold at once (about 24 MiB).
const MAX_FRAMES: usize = 1 << 20;
const UNSET: usize = usize::MAX;

#[derive(Clone, Debug)]
enum Inst {
    Byte(u8),
    Class(Box<ByteSet>),
    Look(Look),
    /// Try `.0` first, then `.1`.
    Split(u32, u32),
    Jump(u32),
    /// Remember where group `.0` starts.
    Open(u32),
    /// Group `.0` ends here: its capture becomes (start, here).
    Close(u32),
    /// Remember where a loop's iteration starts, in register `.0`.
    Mark(u32),
    /// The end of an unbounded loop's iteration: an empty iteration leaves the loop.
    LoopEnd {
        reg: u32,
        again: u32,
        exit: u32,
    },
    /// A repeated single-byte class.
    Star {
        set: Box<ByteSet>,
        min: u32,
        max: u32,
        greed: Greed,
    },
    AtomicStart,
    AtomicEnd,
    AroundStart {
        negate: bool,
        cont: u32,
    },
    AroundEnd,
    /// A lookbehind branch starts this many bytes back.
    Back(u32),
    Backref {
        groups: Box<[u32]>,
        caseless: bool,
    },
    KeepOut,
    Fail,
    Match,
}

/// A compiled program and what lets a search skip start positions.
#[derive(Clone, Debug)]
pub struct Program {
    insts: Vec<Inst>,
    groups: u32,
    regs: usize,
    anchored: bool,
    first: Option<ByteSet>,
    min_len: usize,
    required: Option<ByteSet>,
}

/// The program is too large to build.
pub struct TooLarge;

impl Program {
    /// `group_lens[n]` is group `n`'s fixed length, if it has one (for backreferences in
    /// lookbehinds).
    pub fn new(
        node: &Node,
        groups: u32,
        group_lens: &[Option<usize>],
    ) -> Result<Program, TooLarge> {
        let mut c = Compiler {
            insts: Vec::new(),
            // Capture slots, then each group's open position, then loop registers.
            regs: 3 * (groups as usize + 1),
            groups,
            group_lens: group_lens.to_vec(),
        };
        c.node(node)?;
        c.push(Inst::Match)?;
        Ok(Program {
            insts: c.insts,
            groups,
            regs: c.regs,
            anchored: node.anchored(),
            first: node.first_bytes(),
            min_len: node.min_len(),
            required: node.required_bytes(),
        })
    }

    /// Searches `subject`; on a match, fills `slots` (two per group, group 0 first; `None` for
    /// a group that did not take part) and returns true.
    pub fn search(
        &self,
        subject: &[u8],
        slots: &mut [Option<usize>],
        limit: u64,
    ) -> Result<bool, MatchError> {
        thread_local! {
            static SCRATCH: RefCell<Scratch> = RefCell::new(Scratch::default());
        }
        SCRATCH.with(|s| match s.try_borrow_mut() {
            Ok(mut s) => self.search_with(&mut s, subject, slots, limit),
            Err(_) => self.search_with(&mut Scratch::default(), subject, slots, limit),
        })
    }

    fn search_with(
        &self,
        s: &mut Scratch,
        subject: &[u8],
        slots: &mut [Option<usize>],
        limit: u64,
    ) -> Result<bool, MatchError> {
        if let Some(req) = &self.required {
            if !subject.iter().any(|&b| req.contains(b)) {
                return Ok(false);
            }
        }
        let mut budget = limit;
        let len = subject.len();
        for start in 0..=len {
            if start > 0 && self.anchored {
                break;
            }
            if len - start < self.min_len {
                break;
            }
            if let Some(first) = &self.first {
                if start == len || !first.contains(subject[start]) {
                    continue;
                }
            }
            if budget == 0 {
                return Err(MatchError::MatchLimit);
            }
            budget -= 1;
            if self.attempt(s, subject, start, &mut budget)? {
                for (i, slot) in slots.iter_mut().enumerate() {
                    *slot = s.regs.get(i).copied().filter(|&v| v != UNSET);
                }
                // A group counts only when both ends are set.
                for g in 0..slots.len() / 2 {
                    if slots[2 * g].is_none() || slots[2 * g + 1].is_none() {
                        slots[2 * g] = None;
                        slots[2 * g + 1] = None;
                    }
                }
                return Ok(true);
            }
        }
        Ok(false)
    }

    fn attempt(
        &self,
        s: &mut Scratch,
        subject: &[u8],
        start: usize,
        budget: &mut u64,
    ) -> Result<bool, MatchError> {
        s.regs.clear();
        s.regs.resize(self.regs, UNSET);
        s.regs[0] = start;
        s.stack.clear();
        s.trail.clear();
        let mut pc = 0usize;
        let mut pos = start;
        let len = subject.len();
        loop {
            let ok = match &self.insts[pc] {
                Inst::Byte(b) => {
                    if pos < len && subject[pos] == *b {
                        pos += 1;
                        pc += 1;
                        true
                    } else {
                        false
                    }
                }
                Inst::Class(set) => {
                    if pos < len && set.contains(subject[pos]) {
                        pos += 1;
                        pc += 1;
                        true
                    } else {
                        false
                    }
                }
                Inst::Look(l) => {
                    if look(*l, subject, pos) {
                        pc += 1;
                        true
                    } else {
                        false
                    }
                }
                Inst::Split(a, b) => {
                    s.push(
                        Frame::Choice {
                            pc: *b,
                            pos,
                            trail: s.trail.len(),
                        },
                        budget,
                    )?;
                    pc = *a as usize;
                    true
                }
                Inst::Jump(t) => {
                    pc = *t as usize;
                    true
                }
                Inst::Open(g) => {
                    s.set(self.open_reg(*g), pos);
                    pc += 1;
                    true
                }
                Inst::Close(g) => {
                    let g = *g as usize;
                    let open = s.regs[self.open_reg(g as u32)];
                    s.set(2 * g, open);
                    s.set(2 * g + 1, pos);
                    pc += 1;
                    true
                }
                Inst::Mark(r) => {
                    s.set(*r as usize, pos);
                    pc += 1;
                    true
                }
                Inst::LoopEnd { reg, again, exit } => {
                    pc = if s.regs[*reg as usize] == pos {
                        *exit as usize
                    } else {
                        *again as usize
                    };
                    true
                }
                Inst::Star {
                    set,
                    min,
                    max,
                    greed,
                } => {
                    let (min, max) = (*min as usize, *max as usize);
                    let avail = len - pos;
                    if *greed == Greed::Lazy {
                        if avail < min || !subject[pos..pos + min].iter().all(|&b| set.contains(b))
                        {
                            false
                        } else {
                            pos += min;
                            if min < max {
                                s.push(
                                    Frame::Lazy {
                                        pc: pc as u32,
                                        pos,
                                        count: min as u32,
                                        trail: s.trail.len(),
                                    },
                                    budget,
                                )?;
                            }
                            pc += 1;
                            true
                        }
                    } else {
                        let n = subject[pos..pos + avail.min(max)]
                            .iter()
                            .take_while(|&&b| set.contains(b))
                            .count();
                        if n < min {
                            false
                        } else {
                            if n > min && *greed == Greed::Greedy {
                                s.push(
                                    Frame::Greedy {
                                        pc: pc as u32 + 1,
                                        least: pos + min,
                                        pos: pos + n,
                                        trail: s.trail.len(),
                                    },
                                    budget,
                                )?;
                            }
                            pos += n;
                            pc += 1;
                            true
                        }
                    }
                }
                Inst::AtomicStart => {
                    s.push(
                        Frame::Atomic {
                            trail: s.trail.len(),
                        },
                        budget,
                    )?;
                    pc += 1;
                    true
                }
                Inst::AtomicEnd => {
                    s.cut();
                    pc += 1;
                    true
                }
                Inst::AroundStart { negate, cont } => {
                    s.push(
                        Frame::Around {
                            negate: *negate,
                            cont: *cont,
                            pos,
                            trail: s.trail.len(),
                        },
                        budget,
                    )?;
                    pc += 1;
                    true
                }
                Inst::AroundEnd => match s.cut() {
                    Some(Frame::Around {
                        negate: false,
                        cont,
                        pos: at,
                        ..
                    }) => {
                        pos = at;
                        pc = cont as usize;
                        true
                    }
                    // A negative assertion's body matched: the assertion fails.
                    _ => false,
                },
                Inst::Back(n) => {
                    let n = *n as usize;
                    if pos >= n {
                        pos -= n;
                        pc += 1;
                        true
                    } else {
                        false
                    }
                }
                Inst::Backref { groups, caseless } => {
                    let set = groups.iter().find_map(|&g| {
                        let (a, b) = (s.regs[2 * g as usize], s.regs[2 * g as usize + 1]);
                        (a != UNSET && b != UNSET).then_some((a, b))
                    });
                    match set {
                        Some((a, b)) => {
                            let n = b - a;
                            let ok = pos + n <= len && {
                                let (x, y) = (&subject[a..b], &subject[pos..pos + n]);
                                if *caseless {
                                    x.eq_ignore_ascii_case(y)
                                } else {
                                    x == y
                                }
                            };
                            if ok {
                                pos += n;
                                pc += 1;
                            }
                            ok
                        }
                        None => false,
                    }
                }
                Inst::KeepOut => {
                    s.set(0, pos);
                    pc += 1;
                    true
                }
                Inst::Fail => false,
                Inst::Match => {
                    s.regs[1] = pos;
                    return Ok(true);
                }
            };
            if ok {
                continue;
            }
            // Backtrack to the newest choice point.
            loop {
                let Some(frame) = s.stack.pop() else {
                    return Ok(false);
                };
                if *budget == 0 {
                    return Err(MatchError::MatchLimit);
                }
                *budget -= 1;
                s.undo(frame.trail());
                match frame {
                    Frame::Choice { pc: p, pos: at, .. } => {
                        pc = p as usize;
                        pos = at;
                        break;
                    }
                    Frame::Greedy {
                        pc: p,
                        least,
                        pos: at,
                        trail,
                    } => {
                        let at = at - 1;
                        if at > least {
                            s.stack.push(Frame::Greedy {
                                pc: p,
                                least,
                                pos: at,
                                trail,
                            });
                        }
                        pc = p as usize;
                        pos = at;
                        break;
                    }
                    Frame::Lazy {
                        pc: p,
                        pos: at,
                        count,
                        trail,
                    } => {
                        let Inst::Star { set, max, .. } = &self.insts[p as usize] else {
                            unreachable!("a lazy frame points at its Star")
                        };
                        if at < len && set.contains(subject[at]) {
                            let count = count + 1;
                            if count < *max {
                                s.stack.push(Frame::Lazy {
                                    pc: p,
                                    pos: at + 1,
                                    count,
                                    trail,
                                });
                            }
                            pc = p as usize + 1;
                            pos = at + 1;
                            break;
                        }
                    }
                    Frame::Atomic { .. } => {}
                    Frame::Around {
                        negate: true,
                        cont,
                        pos: at,
                        ..
                    } => {
                        // The negative assertion's body failed: the assertion holds.
                        pc = cont as usize;
                        pos = at;
                        break;
                    }
                    Frame::Around { .. } => {}
                }
            }
        }
    }

    fn open_reg(&self, g: u32) -> usize {
        2 * (self.groups as usize + 1) + g as usize
    }
}

fn is_word(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_'
}

fn look(l: Look, s: &[u8], pos: usize) -> bool {
    let len = s.len();
    match l {
        Look::Start => pos == 0,
        Look::StartLine => pos == 0 || (s[pos - 1] == b'\n' && pos < len),
        Look::End => pos == len,
        Look::EndOrFinalNewline => pos == len || (pos + 1 == len && s[pos] == b'\n'),
        Look::EndLine => pos == len || s[pos] == b'\n',
        Look::WordBoundary | Look::NotWordBoundary => {
            let before = pos > 0 && is_word(s[pos - 1]);
            let after = pos < len && is_word(s[pos]);
            (before != after) == (l == Look::WordBoundary)
        }
    }
}

#[derive(Clone, Copy)]
enum Frame {
    Choice {
        pc: u32,
        pos: usize,
        trail: usize,
    },
    /// A greedy Star that can give back bytes down to `least`.
    Greedy {
        pc: u32,
        least: usize,
        pos: usize,
        trail: usize,
    },
    /// A lazy Star (at `pc`) that can take another byte.
    Lazy {
        pc: u32,
        pos: usize,
        count: u32,
        trail: usize,
    },
    Atomic {
        trail: usize,
    },
    Around {
        negate: bool,
        cont: u32,
        pos: usize,
        trail: usize,
    },
}

impl Frame {
    fn trail(&self) -> usize {
        match *self {
            Frame::Choice { trail, .. }
            | Frame::Greedy { trail, .. }
            | Frame::Lazy { trail, .. }
            | Frame::Atomic { trail }
            | Frame::Around { trail, .. } => trail,
        }
    }
}

/// Per-thread buffers, reused from one match to the next.
#[derive(Default)]
struct Scratch {
    regs: Vec<usize>,
    stack: Vec<Frame>,
    /// (register, old value) for every write, undone on backtracking.
    trail: Vec<(u32, usize)>,
}

impl Scratch {
    fn set(&mut self, reg: usize, v: usize) {
        self.trail.push((reg as u32, self.regs[reg]));
        self.regs[reg] = v;
    }

    fn undo(&mut self, to: usize) {
        while self.trail.len() > to {
            let (r, v) = self.trail.pop().expect("longer than `to`");
            self.regs[r as usize] = v;
        }
    }

    fn push(&mut self, f: Frame, budget: &mut u64) -> Result<(), MatchError> {
        if self.stack.len() >= MAX_FRAMES {
            return Err(MatchError::HeapLimit);
        }
        if *budget == 0 {
            return Err(MatchError::MatchLimit);
        }
        *budget -= 1;
        self.stack.push(f);
        Ok(())
    }

    /// Drops the choice points above the newest atomic or assertion frame, and that frame,
    /// which it returns. The trail stays: older choice points still undo these writes.
    fn cut(&mut self) -> Option<Frame> {
        while let Some(f) = self.stack.pop() {
            if matches!(f, Frame::Atomic { .. } | Frame::Around { .. }) {
                return Some(f);
            }
        }
        None
    }
}

struct Compiler {
    insts: Vec<Inst>,
    regs: usize,
    groups: u32,
    group_lens: Vec<Option<usize>>,
}

impl Compiler {
    fn push(&mut self, i: Inst) -> Result<usize, TooLarge> {
        if self.insts.len() >= MAX_PROGRAM {
            return Err(TooLarge);
        }
        self.insts.push(i);
        Ok(self.insts.len() - 1)
    }

    fn here(&self) -> u32 {
        self.insts.len() as u32
    }

    fn patch(&mut self, at: usize, to: u32) {
        match &mut self.insts[at] {
            Inst::Split(_, b) => *b = to,
            Inst::Jump(t) => *t = to,
            Inst::AroundStart { cont, .. } => *cont = to,
            Inst::LoopEnd { exit, .. } => *exit = to,
            _ => unreachable!("only jumps are patched"),
        }
    }

    fn node(&mut self, n: &Node) -> Result<(), TooLarge> {
        match n {
            Node::Empty => {}
            Node::Byte(b) => {
                self.push(Inst::Byte(*b))?;
            }
            Node::Class(s) => {
                self.push(Inst::Class(Box::new(*s)))?;
            }
            Node::Look(l) => {
                self.push(Inst::Look(*l))?;
            }
            Node::Concat(v) => {
                for x in v {
                    self.node(x)?;
                }
            }
            Node::Alt(v) => {
                let mut ends = Vec::new();
                for (i, x) in v.iter().enumerate() {
                    if i + 1 < v.len() {
                        let split = self.push(Inst::Split(self.here() + 1, 0))?;
                        self.node(x)?;
                        ends.push(self.push(Inst::Jump(0))?);
                        let next = self.here();
                        self.patch(split, next);
                    } else {
                        self.node(x)?;
                    }
                }
                let end = self.here();
                for j in ends {
                    self.patch(j, end);
                }
            }
            Node::Capture(g, b) => {
                debug_assert!(*g <= self.groups);
                self.push(Inst::Open(*g))?;
                self.node(b)?;
                self.push(Inst::Close(*g))?;
            }
            Node::Group(b) => self.node(b)?,
            Node::Atomic(b) => {
                self.push(Inst::AtomicStart)?;
                self.node(b)?;
                self.push(Inst::AtomicEnd)?;
            }
            Node::Around {
                behind,
                negate,
                body,
                ..
            } => {
                let start = self.push(Inst::AroundStart {
                    negate: *negate,
                    cont: 0,
                })?;
                if *behind {
                    let branches: Vec<&Node> = match body.as_ref() {
                        Node::Alt(v) => v.iter().collect(),
                        b => vec![b],
                    };
                    let mut ends = Vec::new();
                    for (i, x) in branches.iter().enumerate() {
                        // The parser checked every branch has a fixed length.
                        let back = x.fixed_len(&self.group_lens).unwrap_or(0) as u32;
                        let split = (i + 1 < branches.len())
                            .then(|| self.push(Inst::Split(self.here() + 1, 0)))
                            .transpose()?;
                        self.push(Inst::Back(back))?;
                        self.node(x)?;
                        if let Some(split) = split {
                            ends.push(self.push(Inst::Jump(0))?);
                            let next = self.here();
                            self.patch(split, next);
                        }
                    }
                    let end = self.here();
                    for j in ends {
                        self.patch(j, end);
                    }
                } else {
                    self.node(body)?;
                }
                self.push(Inst::AroundEnd)?;
                let cont = self.here();
                self.patch(start, cont);
            }
            Node::Repeat {
                body,
                min,
                max,
                greed,
            } => self.repeat(body, *min, *max, *greed)?,
            Node::Backref {
                groups, caseless, ..
            } => {
                self.push(Inst::Backref {
                    groups: groups.clone().into_boxed_slice(),
                    caseless: *caseless,
                })?;
            }
            Node::KeepOut => {
                self.push(Inst::KeepOut)?;
            }
            Node::Fail => {
                self.push(Inst::Fail)?;
            }
        }
        Ok(())
    }

    fn repeat(
        &mut self,
        body: &Node,
        min: u32,
        max: Option<u32>,
        greed: Greed,
    ) -> Result<(), TooLarge> {
        let single = match body {
            Node::Byte(b) => Some(ByteSet::of(*b)),
            Node::Class(s) => Some(*s),
            _ => None,
        };
        if let Some(set) = single {
            self.push(Inst::Star {
                set: Box::new(set),
                min,
                max: max.unwrap_or(u32::MAX),
                greed,
            })?;
            return Ok(());
        }
        if greed == Greed::Possessive {
            self.push(Inst::AtomicStart)?;
            self.repeat(body, min, max, Greed::Greedy)?;
            self.push(Inst::AtomicEnd)?;
            return Ok(());
        }
        for _ in 0..min {
            self.node(body)?;
        }
        match max {
            Some(max) => {
                let mut exits = Vec::new();
                for _ in min..max {
                    exits.push(self.split(greed)?);
                    self.node(body)?;
                }
                let end = self.here();
                for s in exits {
                    self.patch_exit(s, greed, end);
                }
            }
            None => {
                let reg = self.regs as u32;
                self.regs += 1;
                let top = self.here();
                let split = self.split(greed)?;
                self.push(Inst::Mark(reg))?;
                self.node(body)?;
                let end = self.push(Inst::LoopEnd {
                    reg,
                    again: top,
                    exit: 0,
                })?;
                let exit = self.here();
                self.patch(end, exit);
                self.patch_exit(split, greed, exit);
            }
        }
        Ok(())
    }

    /// A split whose "go on" branch is the next instruction; its exit is patched later.
    fn split(&mut self, greed: Greed) -> Result<usize, TooLarge> {
        let next = self.here() + 1;
        match greed {
            Greed::Lazy => self.push(Inst::Split(0, next)),
            _ => self.push(Inst::Split(next, 0)),
        }
    }

    fn patch_exit(&mut self, at: usize, greed: Greed, to: u32) {
        match (&mut self.insts[at], greed) {
            (Inst::Split(a, _), Greed::Lazy) => *a = to,
            (Inst::Split(_, b), _) => *b = to,
            _ => unreachable!("patch_exit is given a split"),
        }
    }
}
