//! What a worker keeps of its finished requests to reuse for the next ones: read buffers,
//! upstream records, reply boxes. Each kind is a short list per thread, the last one given
//! back taken first (it is still warm in the cache); what does not fit is freed.

use std::cell::RefCell;

/// Spare values of one kind, at most `keep` of them (for a `thread_local!`).
pub struct Spares<T> {
    list: RefCell<Vec<T>>,
    keep: usize,
}

impl<T> Spares<T> {
    pub const fn new(keep: usize) -> Spares<T> {
        Spares {
            list: RefCell::new(Vec::new()),
            keep,
        }
    }

    /// The last one given back, if any.
    pub fn take(&self) -> Option<T> {
        self.list.borrow_mut().pop()
    }

    /// Keeps `value` if there is room, once `empty` has readied it for its next use (run
    /// before it is kept: what it drops may give back spares of its own); else drops it.
    pub fn give(&self, mut value: T, empty: impl FnOnce(&mut T)) {
        if self.list.borrow().len() >= self.keep {
            return;
        }
        empty(&mut value);
        let mut list = self.list.borrow_mut();
        if list.len() < self.keep {
            list.push(value);
        }
    }
}

/// How this process gives the memory its threads freed back to the system (set once by the
/// binary, which chooses the allocator; none in tests).
static RELEASE_FREED: std::sync::OnceLock<fn()> = std::sync::OnceLock::new();

/// Sets how [`release_freed`] gives freed memory back (the allocator's own call).
pub fn set_release_freed(release: fn()) {
    let _ = RELEASE_FREED.set(release);
}

/// Gives back to the system what the calling thread freed and its allocator still holds: after
/// many connections' tasks ended at once (parking), so an idle worker's RSS is what it uses.
pub fn release_freed() {
    if let Some(release) = RELEASE_FREED.get() {
        release();
    }
}

/// After this many idle connections shed memory (`shed`), the worker's next sweep has the
/// allocator give it back (`release_shed`): else it holds the freed blocks, and an idle
/// worker's RSS shows buffers and tables no connection uses. At most one release per
/// `RELEASE_EVERY` (one costs 30–160 µs with ~1,000 idle connections).
const RELEASE_AFTER: usize = 64;
const RELEASE_EVERY: std::time::Duration = std::time::Duration::from_millis(250);

thread_local! {
    /// Connections that shed memory since the last release, and when that was.
    static SHED: std::cell::Cell<(usize, Option<std::time::Instant>)> =
        const { std::cell::Cell::new((0, None)) };
}

/// An idle connection freed memory it will not need until it is used again (an HTTP/2
/// connection's codec parking): counted for [`release_shed`].
pub fn shed() {
    SHED.with(|s| {
        let (n, at) = s.get();
        s.set((n + 1, at));
    });
}

/// Run by the worker's sweep: gives freed memory back once enough connections shed theirs.
pub fn release_shed() {
    SHED.with(|s| {
        let (n, at) = s.get();
        if n < RELEASE_AFTER || at.is_some_and(|t| t.elapsed() < RELEASE_EVERY) {
            return;
        }
        s.set((0, Some(std::time::Instant::now())));
        release_freed();
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_last_given_is_taken_first_and_no_more_than_keep_are_kept() {
        let s = Spares::new(2);
        for v in [vec![1], vec![2], vec![3]] {
            s.give(v, |v| v.push(0));
        }
        assert_eq!(s.take(), Some(vec![2, 0]));
        assert_eq!(s.take(), Some(vec![1, 0]));
        assert_eq!(s.take(), None);
    }
}
