//! The match's stack of choice points and its capture registers, with the trail that undoes
//! capture writes when a match backtracks; every push counts against the match limit.

use super::*;

#[derive(Clone, Copy)]
pub(super) enum Frame {
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
    pub(super) fn trail(&self) -> usize {
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
pub(super) struct Scratch {
    pub(super) regs: Vec<usize>,
    pub(super) stack: Vec<Frame>,
    /// (register, old value) for every write, undone on backtracking.
    pub(super) trail: Vec<(u32, usize)>,
}

impl Scratch {
    pub(super) fn set(&mut self, reg: usize, v: usize) {
        self.trail.push((reg as u32, self.regs[reg]));
        self.regs[reg] = v;
    }

    pub(super) fn undo(&mut self, to: usize) {
        while self.trail.len() > to {
            let (r, v) = self.trail.pop().expect("longer than `to`");
            self.regs[r as usize] = v;
        }
    }

    pub(super) fn push(&mut self, f: Frame, budget: &mut u64) -> Result<(), MatchError> {
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
    pub(super) fn cut(&mut self) -> Option<Frame> {
        while let Some(f) = self.stack.pop() {
            if matches!(f, Frame::Atomic { .. } | Frame::Around { .. }) {
                return Some(f);
            }
        }
        None
    }
}
