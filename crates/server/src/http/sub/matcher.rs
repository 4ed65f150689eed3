//! The sub filter's search: every `sub_filter` string of a location (or of a request, when
//! they hold variables) looked for at once in an answer's bytes as they stream by, and each
//! match replaced.
//!
//! The search is nginx's, so that the same bytes come out and are held back at the same
//! places (the chunks an HTTP/1.1 client sees are the same): a window as long as the
//! shortest string slides along the body, a byte table telling how far it may jump
//! (Horspool's), and at each place the strings whose byte at the window's end is the one
//! seen are tried in their table's order: the first that matches whole wins, the bytes
//! after it are searched next (a replacement is never searched). Case is ignored for ASCII
//! letters only. A string that runs past the end of the bytes received holds them back, from
//! where it starts (at most the longest string's length less one), until more come; so does,
//! in buffered upstream reads, the part of a piece the window reached past (nginx's file
//! pieces and unbuffered reads end what it has at hand, its buffered reads do not). At the end of the body what is held
//! goes out as it is, and nothing after a string cut by the body's end is searched (nginx's
//! way). With `sub_filter_once on`, each string is replaced at its first match
//! only, and once every string has been, the rest of the body passes as it is.
//!
//! Never fails, never blocks; memory is the longest string, plus one piece's output.

use std::io;
use std::sync::Arc;

use crate::http::output::BodyFilter;

/// The strings to look for, ready for the search: nginx's tables.
#[derive(Debug)]
pub struct Tables {
    /// The strings, lowercase, ordered by their byte at `min - 1` (ties keep the
    /// configuration's order).
    strings: Vec<Box<[u8]>>,
    /// Each string's place among the `sub_filter` lines (its replacement's).
    line: Vec<usize>,
    /// The shortest and longest string's length.
    min: usize,
    max: usize,
    /// How far the window's end moves past a byte: its least distance from the end of any
    /// string's first `min` bytes (up to 255 of them), `min` when none has it.
    shift: [u8; 256],
    /// The strings whose byte at `min - 1` is `c` are `first[c]..first[c + 1]`.
    first: [u16; 257],
}

impl Tables {
    /// Tables for `strings`: each lowercase and not empty, with its `sub_filter` line's
    /// index, in the configuration's order (at most 255 of them, as nginx allows; at least
    /// one).
    pub fn new(mut strings: Vec<(Vec<u8>, usize)>) -> Tables {
        debug_assert!(!strings.is_empty() && strings.len() <= 255);
        debug_assert!(strings.iter().all(|(s, _)| !s.is_empty()));
        let min = strings.iter().map(|(s, _)| s.len()).min().unwrap_or(1);
        let max = strings.iter().map(|(s, _)| s.len()).max().unwrap_or(1);
        // (A stable sort: strings ending their first window alike are tried in the
        // configuration's order.)
        strings.sort_by_key(|(s, _)| s[min - 1]);
        let span = min.min(255);
        let mut shift = [span as u8; 256];
        let mut first = [strings.len() as u16; 257];
        for (i, (s, _)) in strings.iter().enumerate().rev() {
            for j in 0..span {
                let c = usize::from(s[min - 1 - j]);
                shift[c] = shift[c].min(j as u8);
            }
            // Every byte up to this string's takes it as its first candidate (the loop goes
            // backwards, so the first string of each byte is the last written).
            for f in first.iter_mut().take(usize::from(s[min - 1]) + 1) {
                *f = i as u16;
            }
        }
        let (strings, line) = strings
            .into_iter()
            .map(|(s, l)| (s.into_boxed_slice(), l))
            .unzip();
        Tables {
            strings,
            line,
            min,
            max,
            shift,
            first,
        }
    }

    /// The longest string's length (what the filter may hold back, plus one).
    pub fn longest(&self) -> usize {
        self.max
    }
}

/// How a string compares with the bytes at a place.
enum Cmp {
    Differs,
    Equal,
    /// Equal as far as the bytes go, and they end first.
    Cut,
}

/// What a search of the bytes came to.
enum Step {
    /// String `which` matches from `start`; the bytes from `start + len` are searched next.
    Match { start: isize, which: usize },
    /// Nothing more can be said before more bytes come: the bytes from `start` on are held.
    Hold { start: isize },
}

/// The bytes being searched: those held back from earlier pieces (at negative places,
/// ending at 0), then the current piece's.
struct View<'a> {
    held: &'a [u8],
    rest: &'a [u8],
}

impl View<'_> {
    fn at(&self, i: isize) -> u8 {
        if i < 0 {
            self.held[(self.held.len() as isize + i) as usize]
        } else {
            self.rest[i as usize]
        }
    }

    fn end(&self) -> isize {
        self.rest.len() as isize
    }

    fn compare(&self, s: &[u8], start: isize) -> Cmp {
        for (i, &want) in (start..).zip(s) {
            if i >= self.end() {
                return Cmp::Cut;
            }
            if self.at(i).to_ascii_lowercase() != want {
                return Cmp::Differs;
            }
        }
        Cmp::Equal
    }
}

/// The sub filter on one answer's body (a [`BodyFilter`]).
pub struct SubFilter {
    tables: Arc<Tables>,
    /// The replacements, by `sub_filter` line.
    values: Arc<Vec<Vec<u8>>>,
    once: bool,
    /// Each piece ends what is at hand (nginx's file pieces, its unbuffered upstream reads):
    /// only a cut string is held at its end. Otherwise (buffered upstream reads) the
    /// window's reach is held too, as nginx does.
    whole_pieces: bool,
    /// With `once`: the strings already replaced (by their place in the tables), and how
    /// many are left.
    applied: Vec<bool>,
    left: usize,
    /// Bytes held back: the start of a possible match cut by the end of a piece.
    held: Vec<u8>,
    /// Where the search window ends, from the start of the bytes not searched yet.
    offset: isize,
    /// The string to try first at `offset` (the one a piece's end cut).
    resume: usize,
    out: Vec<u8>,
}

impl SubFilter {
    /// The filter for one body: `values` by `sub_filter` line, `once`: `sub_filter_once`,
    /// `whole_pieces`: each piece ends what is at hand (not buffered upstream reads).
    pub fn new(
        tables: Arc<Tables>,
        values: Arc<Vec<Vec<u8>>>,
        once: bool,
        whole_pieces: bool,
    ) -> SubFilter {
        let n = tables.strings.len();
        let offset = tables.min as isize - 1;
        SubFilter {
            tables,
            values,
            once,
            whole_pieces,
            applied: if once { vec![false; n] } else { Vec::new() },
            left: n,
            held: Vec::new(),
            offset,
            resume: 0,
            out: Vec::new(),
        }
    }

    /// Whether every string has had its one replacement (`once`): the rest passes as it is.
    fn done(&self) -> bool {
        self.once && self.left == 0
    }

    /// Searches `v` from `self.offset`, as nginx's parser does.
    fn search(&mut self, v: &View<'_>) -> Step {
        let t = &*self.tables;
        let mut off = self.offset;
        while off < v.end() {
            let c = usize::from(v.at(off).to_ascii_lowercase());
            let shift = t.shift[c];
            if shift > 0 {
                off += isize::from(shift);
                continue;
            }
            let start = off + 1 - t.min as isize;
            let from = usize::from(t.first[c]).max(self.resume);
            for i in from..usize::from(t.first[c + 1]) {
                if self.once && self.applied[i] {
                    continue;
                }
                match v.compare(&t.strings[i], start) {
                    Cmp::Differs => {}
                    Cmp::Cut => {
                        self.resume = i;
                        self.offset = off;
                        return Step::Hold { start };
                    }
                    Cmp::Equal => {
                        self.resume = 0;
                        self.offset = off + t.strings[i].len() as isize;
                        return Step::Match { start, which: i };
                    }
                }
            }
            off += 1;
            self.resume = 0;
        }
        if !self.whole_pieces {
            // The window's reach is held, whatever is there.
            self.offset = off;
            let start = off + 1 - t.min as isize;
            return Step::Hold {
                start: start.min(v.end()),
            };
        }
        // The places whose window runs past the bytes: held from the first where a string
        // (any, replaced once or not) is cut; all sent when none is.
        loop {
            let start = off + 1 - t.min as isize;
            if start >= v.end()
                || t.strings
                    .iter()
                    .any(|s| matches!(v.compare(s, start), Cmp::Cut))
            {
                self.offset = off;
                return Step::Hold {
                    start: start.min(v.end()),
                };
            }
            off += 1;
        }
    }

    /// Sends on the bytes of `held` then `rest` before `start` (copied, not taken).
    fn pass(&mut self, rest: &[u8], start: isize) {
        let l = self.held.len() as isize;
        if start < 0 {
            self.out
                .extend_from_slice(&self.held[..(l + start).max(0) as usize]);
        } else {
            self.out.extend_from_slice(&self.held);
            self.out.extend_from_slice(&rest[..start as usize]);
        }
    }
}

impl BodyFilter for SubFilter {
    fn feed(&mut self, data: &[u8]) -> io::Result<&[u8]> {
        self.out.clear();
        let mut rest = data;
        while !rest.is_empty() {
            if self.done() {
                self.out.append(&mut self.held);
                self.out.extend_from_slice(rest);
                break;
            }
            let held = std::mem::take(&mut self.held);
            let step = self.search(&View { held: &held, rest });
            self.held = held;
            let l = self.held.len() as isize;
            match step {
                Step::Match { start, which } => {
                    self.pass(rest, start);
                    let line = self.tables.line[which];
                    self.out.extend_from_slice(&self.values[line]);
                    let next = start + self.tables.strings[which].len() as isize;
                    if next <= 0 {
                        // The match ended among the held bytes: those after it stay held.
                        self.held.drain(..(l + next) as usize);
                    } else {
                        self.held.clear();
                        rest = &rest[next as usize..];
                        self.offset -= next;
                    }
                    if self.once {
                        self.applied[which] = true;
                        self.left -= 1;
                    }
                }
                Step::Hold { start } => {
                    self.pass(rest, start);
                    if start < 0 {
                        self.held.drain(..(l + start) as usize);
                    } else {
                        self.held.clear();
                    }
                    self.held.extend_from_slice(&rest[start.max(0) as usize..]);
                    self.offset -= rest.len() as isize;
                    break;
                }
            }
        }
        debug_assert!(self.held.len() < self.tables.max);
        Ok(&self.out)
    }

    fn passes_through(&self) -> bool {
        self.done() && self.held.is_empty()
    }

    fn finish(&mut self) -> io::Result<&[u8]> {
        // What a cut string held goes as it is: the body ended before the string did.
        self.out.clear();
        self.out.append(&mut self.held);
        Ok(&self.out)
    }
}

#[cfg(test)]
mod tests;
