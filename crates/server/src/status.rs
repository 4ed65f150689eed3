//! Connection and request counters for `stub_status` and the `$connections_*` variables,
//! shared by every worker (relaxed atomics: each figure is exact, a set of them is a snapshot
//! taken while others move, as in nginx).
//!
//! A connection is in exactly one state at a time: waiting (idle, before its first byte or
//! between keep-alive requests), reading (a request head is arriving), or writing (the request
//! is being answered). [`ConnState`] moves it and keeps the counts right however the
//! connection ends.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

static ACCEPTS: AtomicU64 = AtomicU64::new(0);
static HANDLED: AtomicU64 = AtomicU64::new(0);
static REQUESTS: AtomicU64 = AtomicU64::new(0);
static READING: AtomicU64 = AtomicU64::new(0);
static WRITING: AtomicU64 = AtomicU64::new(0);
static WAITING: AtomicU64 = AtomicU64::new(0);

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
    Snapshot {
        accepts: ACCEPTS.load(Relaxed),
        handled: HANDLED.load(Relaxed),
        requests: REQUESTS.load(Relaxed),
        reading: READING.load(Relaxed),
        writing: WRITING.load(Relaxed),
        waiting: WAITING.load(Relaxed),
    }
}

/// Counts one request.
pub fn request() {
    REQUESTS.fetch_add(1, Relaxed);
}

/// Where a connection is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum State {
    Waiting,
    Reading,
    Writing,
}

fn counter(s: State) -> &'static AtomicU64 {
    match s {
        State::Waiting => &WAITING,
        State::Reading => &READING,
        State::Writing => &WRITING,
    }
}

/// One connection's place in the counters; dropping it removes the connection.
pub struct ConnState(State);

impl ConnState {
    /// A connection just accepted (and handled): waiting for its first byte.
    pub fn accepted() -> ConnState {
        ACCEPTS.fetch_add(1, Relaxed);
        HANDLED.fetch_add(1, Relaxed);
        WAITING.fetch_add(1, Relaxed);
        ConnState(State::Waiting)
    }

    /// Where the connection is.
    pub fn get(&self) -> State {
        self.0
    }

    /// Moves the connection to `to`.
    pub fn set(&mut self, to: State) {
        if self.0 != to {
            counter(self.0).fetch_sub(1, Relaxed);
            counter(to).fetch_add(1, Relaxed);
            self.0 = to;
        }
    }
}

impl Drop for ConnState {
    fn drop(&mut self) {
        counter(self.0).fetch_sub(1, Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
