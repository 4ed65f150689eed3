//! Connection and request counters for `stub_status` and the `$connections_*` variables.
//!
//! Each thread counts in its own block (written by that thread alone, read by any): a count
//! is a load and a store, not a locked instruction, and the block stays in its core's cache.
//! Counters shared by every worker were moved between the workers' cores several times per
//! request, which cost more than the rest of the counting. A snapshot sums the blocks (each
//! figure is exact, a set of them is taken while others move, as in nginx); a worker that
//! retires leaves its block, so the totals keep what it counted.
//!
//! A connection is in exactly one state at a time: waiting (idle, before its first byte or
//! between keep-alive requests), reading (a request head is arriving), or writing (the request
//! is being answered). [`ConnState`] moves it and keeps the counts right however the
//! connection ends.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Mutex;

/// One thread's counters, alone on their cache lines. The state counts are the thread's
/// arrivals minus its departures, in wrapping arithmetic: their sum over the threads is the
/// count, wherever a connection's state was dropped.
#[derive(Default)]
#[repr(align(128))]
struct Counters {
    accepts: AtomicU64,
    handled: AtomicU64,
    requests: AtomicU64,
    reading: AtomicU64,
    writing: AtomicU64,
    waiting: AtomicU64,
}

/// Every thread's counters that ever counted (threads are few: workers live across reloads).
static ALL: Mutex<Vec<&'static Counters>> = Mutex::new(Vec::new());

thread_local! {
    static MINE: &'static Counters = {
        let c: &'static Counters = Box::leak(Box::default());
        ALL.lock().unwrap_or_else(|e| e.into_inner()).push(c);
        c
    };
}

/// Adds `by` (wrapping: `u64::MAX` takes one away) to one of this thread's counters. Only
/// this thread writes them, so a load and a store suffice.
fn add(which: fn(&Counters) -> &AtomicU64, by: u64) {
    MINE.with(|c| {
        let n = which(c);
        n.store(n.load(Relaxed).wrapping_add(by), Relaxed);
    });
}

const ONE_LESS: u64 = u64::MAX;

/// A count that many threads add to and few read (a cache zone's hits and misses): a thread
/// adds on a cache line of its own (one of a few, by thread), a read sums them (one line
/// every worker added to moved between their cores at each addition).
pub struct Tally {
    slots: [Slot; TALLY_SLOTS],
}

#[derive(Default)]
#[repr(align(128))]
struct Slot(AtomicU64);

const TALLY_SLOTS: usize = 16;

thread_local! {
    /// This thread's slot in every [`Tally`] (threads beyond the slots share them, safely:
    /// an addition is atomic).
    static TALLY_SLOT: usize = {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        NEXT.fetch_add(1, Relaxed) as usize % TALLY_SLOTS
    };
}

impl Default for Tally {
    fn default() -> Tally {
        Tally {
            slots: std::array::from_fn(|_| Slot::default()),
        }
    }
}

impl std::fmt::Debug for Tally {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Tally({})", self.get())
    }
}

impl Tally {
    pub fn add(&self, n: u64) {
        let i = TALLY_SLOT.with(|i| *i);
        self.slots[i].0.fetch_add(n, Relaxed);
    }

    pub fn get(&self) -> u64 {
        self.slots
            .iter()
            .fold(0u64, |sum, s| sum.wrapping_add(s.0.load(Relaxed)))
    }
}

/// A snapshot of the counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Snapshot {
    pub accepts: u64,
    pub handled: u64,
    pub requests: u64,
    pub reading: u64,
    pub writing: u64,
    pub waiting: u64,
}

impl Snapshot {
    /// `Active connections`: every open client connection.
    pub fn active(&self) -> u64 {
        self.reading + self.writing + self.waiting
    }

    /// nginx's `stub_status` page, byte for byte.
    pub fn render(&self) -> String {
        format!(
            "Active connections: {} \nserver accepts handled requests\n {} {} {} \nReading: {} Writing: {} Waiting: {} \n",
            self.active(),
            self.accepts,
            self.handled,
            self.requests,
            self.reading,
            self.writing,
            self.waiting
        )
    }
}

/// The counters now.
pub fn snapshot() -> Snapshot {
    let mut s = Snapshot::default();
    for c in ALL.lock().unwrap_or_else(|e| e.into_inner()).iter() {
        let sum = |total: &mut u64, n: &AtomicU64| *total = total.wrapping_add(n.load(Relaxed));
        sum(&mut s.accepts, &c.accepts);
        sum(&mut s.handled, &c.handled);
        sum(&mut s.requests, &c.requests);
        sum(&mut s.reading, &c.reading);
        sum(&mut s.writing, &c.writing);
        sum(&mut s.waiting, &c.waiting);
    }
    s
}

/// Counts one request.
pub fn request() {
    add(|c| &c.requests, 1);
}

/// Where a connection is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum State {
    Waiting,
    Reading,
    Writing,
}

fn counter(s: State) -> fn(&Counters) -> &AtomicU64 {
    match s {
        State::Waiting => |c| &c.waiting,
        State::Reading => |c| &c.reading,
        State::Writing => |c| &c.writing,
    }
}

/// One connection's place in the counters; dropping it removes the connection.
pub struct ConnState(State);

impl ConnState {
    /// A connection just accepted (and handled): waiting for its first byte.
    pub fn accepted() -> ConnState {
        MINE.with(|c| {
            for n in [&c.accepts, &c.handled, &c.waiting] {
                n.store(n.load(Relaxed).wrapping_add(1), Relaxed);
            }
        });
        ConnState(State::Waiting)
    }

    /// Where the connection is.
    pub fn get(&self) -> State {
        self.0
    }

    /// Moves the connection to `to`.
    pub fn set(&mut self, to: State) {
        if self.0 != to {
            add(counter(self.0), ONE_LESS);
            add(counter(to), 1);
            self.0 = to;
        }
    }
}

impl Drop for ConnState {
    fn drop(&mut self) {
        // (At a thread's exit its counters may be gone already: nothing is left to count.)
        let _ = MINE.try_with(|c| {
            let n = counter(self.0)(c);
            n.store(n.load(Relaxed).wrapping_add(ONE_LESS), Relaxed);
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Counts taken on several threads, connections dropped on another thread than the one
    /// that counted them, and a thread that ended: the snapshot's figures are the sums.
    #[test]
    fn counts_from_every_thread_add_up() {
        // Other tests count too: compare differences, from a thread that counts nothing else.
        let before = snapshot();
        let states: Vec<ConnState> = std::thread::scope(|s| {
            let a = s.spawn(|| {
                let mut c = ConnState::accepted();
                c.set(State::Reading);
                request();
                c
            });
            let b = s.spawn(|| {
                let mut c = ConnState::accepted();
                c.set(State::Reading);
                request();
                c.set(State::Writing);
                let d = ConnState::accepted();
                vec![c, d]
            });
            let mut all = vec![a.join().unwrap()];
            all.extend(b.join().unwrap());
            all
        });
        let during = snapshot();
        assert_eq!(during.accepts - before.accepts, 3);
        assert_eq!(during.handled - before.handled, 3);
        assert_eq!(during.requests - before.requests, 2);
        let delta = |f: fn(&Snapshot) -> u64| f(&during).wrapping_sub(f(&before));
        assert_eq!(delta(|s| s.reading), 1);
        assert_eq!(delta(|s| s.writing), 1);
        assert_eq!(delta(|s| s.waiting), 1);
        drop(states);
        let after = snapshot();
        assert_eq!(after.reading.wrapping_sub(before.reading), 0);
        assert_eq!(after.writing.wrapping_sub(before.writing), 0);
        assert_eq!(after.waiting.wrapping_sub(before.waiting), 0);
        assert_eq!(after.requests - before.requests, 2);
    }

    #[test]
    fn a_tally_sums_what_every_thread_added() {
        let t = Tally::default();
        std::thread::scope(|s| {
            for n in 1..=20u64 {
                let t = &t;
                s.spawn(move || t.add(n));
            }
        });
        t.add(1000);
        assert_eq!(t.get(), 1000 + 20 * 21 / 2);
    }

    #[test]
    fn render_matches_nginx_layout() {
        let s = Snapshot {
            accepts: 16,
            handled: 16,
            requests: 31,
            reading: 1,
            writing: 2,
            waiting: 3,
        };
        assert_eq!(
            s.render(),
            "Active connections: 6 \nserver accepts handled requests\n 16 16 31 \nReading: 1 Writing: 2 Waiting: 3 \n"
        );
    }
}
