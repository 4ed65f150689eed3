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
