//! The parsed tree compiled into the matcher's program: instructions, splits for choices,
//! loops for repeats (with the empty-iteration check PCRE2 makes).

use super::*;

pub(super) struct Compiler {
    pub(super) insts: Vec<Inst>,
    pub(super) regs: usize,
    pub(super) groups: u32,
    pub(super) group_lens: Vec<Option<usize>>,
}

impl Compiler {
    pub(super) fn push(&mut self, i: Inst) -> Result<usize, TooLarge> {
        if self.insts.len() >= MAX_PROGRAM {
            return Err(TooLarge);
        }
        self.insts.push(i);
        Ok(self.insts.len() - 1)
    }

    pub(super) fn here(&self) -> u32 {
        self.insts.len() as u32
    }

    pub(super) fn patch(&mut self, at: usize, to: u32) {
        match &mut self.insts[at] {
            Inst::Split(_, b) => *b = to,
            Inst::Jump(t) => *t = to,
            Inst::AroundStart { cont, .. } => *cont = to,
            Inst::LoopEnd { exit, .. } => *exit = to,
            _ => unreachable!("only jumps are patched"),
        }
    }

    pub(super) fn node(&mut self, n: &Node) -> Result<(), TooLarge> {
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

    pub(super) fn repeat(
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
    pub(super) fn split(&mut self, greed: Greed) -> Result<usize, TooLarge> {
        let next = self.here() + 1;
        match greed {
            Greed::Lazy => self.push(Inst::Split(0, next)),
            _ => self.push(Inst::Split(next, 0)),
        }
    }

    pub(super) fn patch_exit(&mut self, at: usize, greed: Greed, to: u32) {
        match (&mut self.insts[at], greed) {
            (Inst::Split(a, _), Greed::Lazy) => *a = to,
            (Inst::Split(_, b), _) => *b = to,
            _ => unreachable!("patch_exit is given a split"),
        }
    }
}
