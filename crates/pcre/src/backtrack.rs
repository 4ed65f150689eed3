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
//!
//! Rooms: this file runs a program; [`compile`] makes it from the tree, [`stack`] holds a
//! match's choice points and captures.

use std::cell::RefCell;

use crate::ast::{ByteSet, Greed, Look, Node};
use crate::MatchError;

mod compile;
mod stack;

use compile::Compiler;
use stack::{Frame, Scratch};

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
