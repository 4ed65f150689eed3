//! Connection and request counters for `stub_status` and the `$connections_*` variables,
//! and [`Tally`], the count they and the cache zones' figures are kept in.
//!
//! Every worker counts, per request: a counter all of them added to had its cache line moved
//! between their cores at each addition, which cost more than the rest of the counting. A
//! [`Tally`] gives each thread a line of its own, written by it alone, and sums the lines
//! when read (each figure is exact, a set of them is taken while others move, as in nginx);
//! a worker that retires leaves its additions in the totals.
//!
//! The counters are in memory shared across `fork()` (`shoal_io::shm`), made by [`share`]
//! before the root master forks its first child: the children of successive configurations
//! count in the same figures, as nginx's workers of two cycles do, and a thread's line is
//! claimed in a table there, so that no two live threads of any process write one line. A
//! line goes back when its thread ends (its additions stay in it), or when the master reaps a
//! process that had lines ([`forget_process`]).
//!
//! A connection is in exactly one state at a time: waiting (idle, before its first byte or
//! between keep-alive requests), reading (a request head is arriving), or writing (the request
//! is being answered). [`ConnState`] moves it and keeps the counts right however the
//! connection ends.

use std::cell::Cell;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering::Relaxed};
use std::sync::OnceLock;

/// A count that many threads add to and few read: each of the first [`TALLY_SLOTS`] threads
/// that count has a cache line of its own, where only it writes (an addition is a load and a
/// store, no locked instruction); later threads share one more line, added to atomically. A
/// read sums the lines. Additions wrap (`u64::MAX` takes one away), so a sum stays right when
/// a thread takes away what another added.
pub struct Tally {
    /// The threads' own lines, then the shared one.
    slots: [Slot; TALLY_SLOTS + 1],
}

#[repr(align(128))]
struct Slot(AtomicU64);

// SAFETY: atomic numbers.
unsafe impl shoal_io::shm::Plain for Tally {}

/// Enough for a worker per core on most machines, twice over (an old child's workers hold
/// theirs while a new child's start).
const TALLY_SLOTS: usize = 64;

/// A thread's claim on a line, given back when the thread ends. It is its process's: a child
/// forked from this thread finds the parent's claim in its copy of the thread-locals, and
/// takes a line of its own (the parent's thread still writes that one).
struct Claim {
    line: Cell<usize>,
    pid: Cell<u32>,
}

impl Claim {
    fn take() -> Claim {
        let (line, pid) = Claim::line_for_me();
        Claim {
            line: Cell::new(line),
            pid: Cell::new(pid),
        }
    }

    fn line_for_me() -> (usize, u32) {
        let me = shoal_io::shm::pid();
        let owners = &counters().owners;
        let free = owners.iter().position(|o| {
            o.load(Relaxed) == 0
                && o.compare_exchange(0, me, std::sync::atomic::Ordering::Acquire, Relaxed)
                    .is_ok()
        });
        (free.unwrap_or(TALLY_SLOTS), me)
    }

    /// This thread's line, claimed again in a forked child.
    fn line(&self) -> usize {
        if self.pid.get() != shoal_io::shm::pid() {
            let (line, pid) = Claim::line_for_me();
            self.line.set(line);
            self.pid.set(pid);
        }
        self.line.get()
    }
}

impl Drop for Claim {
    fn drop(&mut self) {
        // (Not a parent's line, in a forked child that never counted.)
        if self.pid.get() != shoal_io::shm::pid() {
            return;
        }
        if let Some(o) = counters().owners.get(self.line.get()) {
            o.store(0, std::sync::atomic::Ordering::Release);
        }
    }
}

thread_local! {
    /// This thread's line in every [`Tally`]: its own below [`TALLY_SLOTS`], else the shared
    /// one.
    static TALLY_SLOT: Claim = Claim::take();
}

impl Tally {
    pub const fn new() -> Tally {
        Tally {
            slots: [const { Slot(AtomicU64::new(0)) }; TALLY_SLOTS + 1],
        }
    }

    pub fn add(&self, n: u64) {
        // (A thread's last additions, from other thread-locals' destructors: the shared line.)
        let i = TALLY_SLOT.try_with(Claim::line).unwrap_or(TALLY_SLOTS);
        let slot = &self.slots[i].0;
        if i < TALLY_SLOTS {
            slot.store(slot.load(Relaxed).wrapping_add(n), Relaxed);
        } else {
            slot.fetch_add(n, Relaxed);
        }
    }

    pub fn get(&self) -> u64 {
        self.slots
            .iter()
            .fold(0u64, |sum, s| sum.wrapping_add(s.0.load(Relaxed)))
    }
}

impl Default for Tally {
    fn default() -> Tally {
        Tally::new()
    }
}

impl std::fmt::Debug for Tally {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Tally({})", self.get())
    }
}

/// The figures, and who holds the tallies' lines.
struct Counters {
    accepts: Tally,
    handled: Tally,
    requests: Tally,
    reading: Tally,
    writing: Tally,
    waiting: Tally,
    /// Open client connections (an HTTP/2 connection answering streams is in none of the
    /// three states: its streams are, each in `Writing`, as nginx counts them).
    active: Tally,
    /// What an HTTP/2 connection with streams open counts in: nothing shown.
    streams: Tally,
    /// The pid of the process whose thread holds each line, 0 for none.
    owners: [AtomicU32; TALLY_SLOTS],
}

// SAFETY: tallies and pids.
unsafe impl shoal_io::shm::Plain for Counters {}

fn counters() -> &'static Counters {
    static C: OnceLock<&'static Counters> = OnceLock::new();
    C.get_or_init(|| {
        let fresh = || Counters {
            accepts: Tally::new(),
            handled: Tally::new(),
            requests: Tally::new(),
            reading: Tally::new(),
            writing: Tally::new(),
            waiting: Tally::new(),
            active: Tally::new(),
            streams: Tally::new(),
            owners: [const { AtomicU32::new(0) }; TALLY_SLOTS],
        };
        let bytes = std::mem::size_of::<Counters>() + 256;
        match shoal_io::shm::Region::new("stub_status", bytes) {
            // Kept for the process's life, as statics.
            Ok(r) => &**Box::leak(Box::new(shoal_io::shm::Carver::new(r).place(fresh()))),
            // (Without shared memory the counters are this process's.)
            Err(_) => Box::leak(Box::new(fresh())),
        }
    })
}

/// Makes the counters, in memory every process forked after this call shares: the root master
/// calls it before its first child.
pub fn share() {
    counters();
}

/// Gives back the lines a reaped process's threads held (their additions stay counted).
pub fn forget_process(pid: u32) {
    for o in &counters().owners {
        let _ = o.compare_exchange(pid, 0, std::sync::atomic::Ordering::AcqRel, Relaxed);
    }
}

const ONE_LESS: u64 = u64::MAX;

/// A snapshot of the counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Snapshot {
    pub active: u64,
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
        self.active
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
    Snapshot {
        active: counters().active.get(),
        accepts: counters().accepts.get(),
        handled: counters().handled.get(),
        requests: counters().requests.get(),
        reading: counters().reading.get(),
        writing: counters().writing.get(),
        waiting: counters().waiting.get(),
    }
}

/// Counts one request.
pub fn request() {
    counters().requests.add(1);
}

/// Where a connection is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum State {
    Waiting,
    Reading,
    Writing,
    /// An HTTP/2 connection whose streams are being answered (each counted by its
    /// [`StreamState`]).
    Streams,
}

fn counter(s: State) -> &'static Tally {
    match s {
        State::Waiting => &counters().waiting,
        State::Reading => &counters().reading,
        State::Writing => &counters().writing,
        State::Streams => &counters().streams,
    }
}

/// One HTTP/2 stream being answered: `Writing` until it is dropped (nginx counts a stream's
/// request from its HEADERS, read whole, to its end).
pub struct StreamState(());

impl StreamState {
    pub fn start() -> StreamState {
        counters().writing.add(1);
        StreamState(())
    }
}

impl Drop for StreamState {
    fn drop(&mut self) {
        counters().writing.add(ONE_LESS);
    }
}

/// One connection's place in the counters; dropping it removes the connection.
pub struct ConnState(State);

impl ConnState {
    /// A connection just accepted (and handled): waiting for its first byte.
    pub fn accepted() -> ConnState {
        let c = counters();
        c.accepts.add(1);
        c.handled.add(1);
        c.waiting.add(1);
        c.active.add(1);
        ConnState(State::Waiting)
    }

    /// Where the connection is.
    pub fn get(&self) -> State {
        self.0
    }

    /// Moves the connection to `to`.
    pub fn set(&mut self, to: State) {
        if self.0 != to {
            counter(self.0).add(ONE_LESS);
            counter(to).add(1);
            self.0 = to;
        }
    }
}

impl Drop for ConnState {
    fn drop(&mut self) {
        counter(self.0).add(ONE_LESS);
        counters().active.add(ONE_LESS);
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
        assert_eq!(delta(|s| s.active), 3);
        // An HTTP/2 connection with two streams: the streams write, the connection is in
        // no state of its own.
        let mut h2 = ConnState::accepted();
        h2.set(State::Streams);
        let streams = [StreamState::start(), StreamState::start()];
        let busy = snapshot();
        assert_eq!(busy.active.wrapping_sub(during.active), 1);
        assert_eq!(busy.writing.wrapping_sub(during.writing), 2);
        assert_eq!(busy.waiting.wrapping_sub(during.waiting), 0);
        drop(streams);
        drop(h2);
        drop(states);
        let after = snapshot();
        assert_eq!(after.reading.wrapping_sub(before.reading), 0);
        assert_eq!(after.writing.wrapping_sub(before.writing), 0);
        assert_eq!(after.waiting.wrapping_sub(before.waiting), 0);
        assert_eq!(after.active.wrapping_sub(before.active), 0);
        assert_eq!(after.requests - before.requests, 2);
    }

    /// A thread's line is claimed by its process: a child forked from a thread that counts
    /// (its thread-locals copied) takes a line of its own, and does not write the parent's
    /// (an addition is a load and a store: two writers of one line lose counts).
    #[test]
    fn a_forked_child_counts_in_a_line_of_its_own() {
        let _lines = LINES.lock().unwrap_or_else(|e| e.into_inner());
        let t = Tally::new();
        t.add(1);
        let parent_line = t.slots.iter().position(|s| s.0.load(Relaxed) != 0).unwrap();
        assert!(parent_line < TALLY_SLOTS, "this thread has a line");
        assert_eq!(
            counters().owners[parent_line].load(Relaxed),
            shoal_io::shm::pid()
        );
        // SAFETY: fork in a test; the child touches only atomics, its stack and this thread's
        // initialised thread-locals, then exits.
        let child = unsafe { libc::fork() };
        if child == 0 {
            let t = Tally::new();
            t.add(1);
            let line = t.slots.iter().position(|s| s.0.load(Relaxed) != 0);
            let own = line.is_some_and(|i| {
                i != parent_line
                    && (i == TALLY_SLOTS
                        || counters().owners[i].load(Relaxed) == shoal_io::shm::pid())
            });
            // SAFETY: ends the child without the harness's exit paths.
            unsafe { libc::_exit(if own { 0 } else { 1 }) };
        }
        let mut status = 0;
        // SAFETY: our child, a valid status pointer.
        unsafe { libc::waitpid(child, &mut status, 0) };
        assert!(libc::WIFEXITED(status), "{status:#x}");
        assert_eq!(
            libc::WEXITSTATUS(status),
            0,
            "the child wrote the parent's line"
        );
        let child_lines = || {
            counters()
                .owners
                .iter()
                .filter(|o| o.load(Relaxed) == child as u32)
                .count()
        };
        assert_eq!(
            child_lines(),
            1,
            "the dead child's line, until it is reaped"
        );
        forget_process(child as u32);
        assert_eq!(child_lines(), 0, "given back");
        assert_eq!(
            counters().owners[parent_line].load(Relaxed),
            shoal_io::shm::pid(),
            "still the parent's"
        );
    }

    /// Held by a test that takes every line, and one that needs one of its own.
    static LINES: std::sync::Mutex<()> = std::sync::Mutex::new(());

    #[test]
    fn a_tally_sums_what_every_thread_added() {
        let _lines = LINES.lock().unwrap_or_else(|e| e.into_inner());
        let t = Tally::default();
        std::thread::scope(|s| {
            // More threads than lines of their own: the later ones share the last.
            let all: Vec<_> = (1..=(TALLY_SLOTS as u64 + 20))
                .map(|n| {
                    let t = &t;
                    s.spawn(move || t.add(n))
                })
                .collect();
            // (Joined each: ended whole, their lines given back, when `LINES` is.)
            for h in all {
                h.join().unwrap();
            }
        });
        t.add(1000);
        let k = TALLY_SLOTS as u64 + 20;
        assert_eq!(t.get(), 1000 + k * (k + 1) / 2);
    }

    #[test]
    fn render_matches_nginx_layout() {
        let s = Snapshot {
            active: 6,
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
