//! A worker: one OS thread running one tokio current_thread runtime. Connections live and die
//! on the worker that accepted them; nothing here is `Send` across workers.
//!
//! The master sends each worker a [`Command`] through a watch channel: the configuration
//! generation to serve and whether to stop. On a new generation the worker starts accepting on
//! sockets it did not have and stops on those that went away; connections keep the generation
//! they were accepted with until their current request ends, then take the newest. A graceful
//! stop closes idle keep-alive connections at once, lets busy ones finish their request, and
//! ends when none is left or `worker_shutdown_timeout` has passed.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use tokio::sync::{watch, Notify};
use tokio::task::JoinHandle;

use crate::accept::Acceptor;
use crate::cycle::Generation;
use crate::error_log;
use crate::listen::{SocketKey, SocketKind};
use crate::log::Level;

/// What the master wants of a worker.
#[derive(Clone)]
pub struct Command {
    pub generation: Arc<Generation>,
    pub stop: Stop,
}

/// Stop requests, in increasing urgency.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Stop {
    Run,
    /// SIGWINCH while a new binary runs: stop accepting and finish as `Graceful` does, but
    /// let idle keep-alive connections take one more request (answered with
    /// `Connection: close`) for [`DRAIN_GRACE`] first, so a request sent as the connection
    /// would have closed is not lost.
    Drain,
    /// SIGQUIT, or a worker retired by a reload: finish in-flight requests, then exit.
    Graceful,
    /// SIGTERM/SIGINT: exit now.
    Fast,
}

/// State shared by the tasks of one worker.
pub struct Worker {
    pub index: usize,
    /// Connections open on this worker.
    pub active: Cell<usize>,
    /// Set once a graceful stop began: idle connections close, busy ones close after their
    /// current request.
    pub stopping: Cell<bool>,
    /// A draining stop's grace ([`Stop::Drain`]): a connection accepted just before it still
    /// reads its first request (only a request-less wait closes it, once the grace is over).
    pub draining: Cell<bool>,
    /// Wakes idle connections: a graceful stop began (`stopping` is set) or a new generation
    /// arrived.
    pub wake_idle: Rc<IdleWakers>,
    /// Woken when a connection closes (the accept loops wait on it at `worker_connections`,
    /// the graceful stop waits on it for the last connection).
    pub closed_notify: Notify,
    /// The newest generation, for connections between requests.
    pub current: RefCell<Arc<Generation>>,
    /// Connection numbers (`$connection`, `*N` in the error log), shared by all workers.
    pub counter: Arc<std::sync::atomic::AtomicU64>,
}

impl Worker {
    /// The next connection number (from 1, as nginx).
    pub fn next_connection_number(&self) -> u64 {
        self.counter
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed)
            + 1
    }
}

/// Decrements a worker's connection count when a connection task ends, however it ends.
pub struct ConnGuard(pub Rc<Worker>);

impl Drop for ConnGuard {
    fn drop(&mut self) {
        self.0.active.set(self.0.active.get() - 1);
        self.0.closed_notify.notify_waiters();
    }
}

/// The connections of a worker that wait between requests, to be woken all at once. A
/// `Notify` would take a lock and a list insertion and removal per wait, on every request;
/// here each connection has a slot for its task's waker, filled at its first wait and kept
/// while the task's waker stays the same, and a wait is a comparison of counters.
///
/// The same slots say which connections are reusable (nginx's word): waiting for a request
/// with nothing of it read. When `worker_connections` are all taken, the longest waiting of
/// those are closed to make room ([`IdleWakers::reuse_oldest`]), as nginx drains its
/// reusable connections.
#[derive(Default)]
pub struct IdleWakers {
    /// Bumped by every [`wake_all`](Self::wake_all): a wait ends when it sees another value
    /// than the one it started with.
    epoch: Cell<u64>,
    slots: RefCell<Vec<Slot>>,
    free: RefCell<Vec<usize>>,
    /// Numbers the reusable waits in the order they began (0: none).
    tickets: Cell<u64>,
    /// Slots whose connection is reusable now.
    reusable: Cell<usize>,
    /// `tickets` at the last [`sweep`](Self::sweep): a parkable wait with a ticket at or below
    /// it has lasted a whole sweep interval.
    swept: Cell<u64>,
    /// The task of the worker's parked connections (`http/h1/park.rs`), and whether a wake or
    /// a reuse came for them since it last looked.
    parked_waker: RefCell<Option<Waker>>,
    parked_woken: Cell<bool>,
}

/// One connection's place.
#[derive(Default)]
struct Slot {
    waker: Option<Waker>,
    /// When its reusable wait began (a ticket of [`IdleWakers::tickets`]); 0 when busy.
    reusable_since: u64,
    /// Chosen to be closed to make room: its wait ends, and it closes.
    reuse: bool,
    /// The wait may end in parking (an HTTP/1 keep-alive wait with nothing read).
    parkable: bool,
    /// Asked by a sweep to park: its wait ends, and its task hands the connection to a small
    /// one (`http/h1/park.rs`).
    park: bool,
    /// Parked: a sweep passes it by.
    parked: bool,
}

impl IdleWakers {
    /// The value a wait starts with (see [`IdleSlot::wait`]).
    pub fn epoch(&self) -> u64 {
        self.epoch.get()
    }

    /// Ends every wait begun before this call.
    pub fn wake_all(&self) {
        self.epoch.set(self.epoch.get() + 1);
        self.wake_parked();
        let wakers: Vec<Waker> = self
            .slots
            .borrow_mut()
            .iter_mut()
            .filter_map(|s| s.waker.take())
            .collect();
        // Woken with no borrow held: a task woken here may be polled before this returns.
        for w in wakers {
            w.wake();
        }
    }

    /// How many connections are reusable now (waiting for a request, nothing of it read).
    pub fn reusable(&self) -> usize {
        self.reusable.get()
    }

    /// Closes up to `n` reusable connections, those that have waited longest first: each one's
    /// wait ends and it closes (see [`IdleSlot::reused`]). Returns how many were chosen.
    pub fn reuse_oldest(&self, n: usize) -> usize {
        let mut chosen: Vec<Waker> = Vec::new();
        {
            let mut slots = self.slots.borrow_mut();
            let mut waiting: Vec<(u64, usize)> = slots
                .iter()
                .enumerate()
                .filter(|(_, s)| s.reusable_since != 0 && !s.reuse)
                .map(|(i, s)| (s.reusable_since, i))
                .collect();
            let n = n.min(waiting.len());
            if n == 0 {
                return 0;
            }
            if n < waiting.len() {
                waiting.select_nth_unstable(n - 1);
            }
            for &(_, i) in &waiting[..n] {
                let slot = &mut slots[i];
                if slot.parked {
                    self.parked_woken.set(true);
                }
                slot.reuse = true;
                slot.reusable_since = 0;
                self.reusable.set(self.reusable.get() - 1);
                if let Some(w) = slot.waker.take() {
                    chosen.push(w);
                }
            }
        }
        if self.parked_woken.get() {
            self.wake_parked();
        }
        let count = chosen.len();
        for w in chosen {
            w.wake();
        }
        count
    }

    /// Leaves the waker of the parked connections' task (see `parked_woken`).
    pub fn register_parked(&self, waker: &Waker) {
        let mut held = self.parked_waker.borrow_mut();
        if !held.as_ref().is_some_and(|w| w.will_wake(waker)) {
            *held = Some(waker.clone());
        }
    }

    /// Whether a wake or a reuse came for the parked connections since the last call.
    pub fn take_parked_woken(&self) -> bool {
        self.parked_woken.replace(false)
    }

    fn wake_parked(&self) {
        self.parked_woken.set(true);
        let waker = self.parked_waker.borrow().clone();
        if let Some(w) = waker {
            w.wake();
        }
    }

    /// Asks every parkable connection that has waited since the last sweep (a whole sweep
    /// interval, [`PARK_SWEEP`]) to park: its wait ends, and its task gives way to a small one
    /// holding only what the connection must keep. Connections that keep sending are never
    /// asked, so their requests cost nothing more.
    pub fn sweep(&self) {
        let swept = self.swept.replace(self.tickets.get());
        if self.reusable.get() == 0 {
            return;
        }
        let mut asked: Vec<Waker> = Vec::new();
        for s in self.slots.borrow_mut().iter_mut() {
            if s.parkable
                && !s.parked
                && !s.park
                && !s.reuse
                && s.reusable_since != 0
                && s.reusable_since <= swept
            {
                s.park = true;
                if let Some(w) = s.waker.take() {
                    asked.push(w);
                }
            }
        }
        // Woken with no borrow held (see `wake_all`).
        for w in asked {
            w.wake();
        }
    }

    /// Slots in use (for tests).
    pub fn slots_in_use(&self) -> usize {
        self.slots.borrow().len() - self.free.borrow().len()
    }
}

/// A connection's place in its worker's [`IdleWakers`], given back when dropped.
pub struct IdleSlot {
    wakers: Rc<IdleWakers>,
    index: usize,
}

impl IdleSlot {
    pub fn new(wakers: &Rc<IdleWakers>) -> IdleSlot {
        let index = match wakers.free.borrow_mut().pop() {
            Some(i) => i,
            None => {
                let mut slots = wakers.slots.borrow_mut();
                slots.push(Slot::default());
                slots.len() - 1
            }
        };
        IdleSlot {
            wakers: wakers.clone(),
            index,
        }
    }

    /// Completes once [`IdleWakers::wake_all`] has been called after the epoch `since` was
    /// read (at once if it already has), or once the connection was chosen to be reused.
    pub fn wait(&self, since: u64) -> IdleWait<'_> {
        IdleWait { slot: self, since }
    }

    /// Marks the connection reusable (waiting for a request with nothing of it read) or not.
    pub fn set_reusable(&self, reusable: bool) {
        self.set_idle(reusable, false);
    }

    /// [`set_reusable`](Self::set_reusable), and whether a wait that lasts a sweep interval
    /// should end in parking ([`IdleWakers::sweep`]).
    pub fn set_idle(&self, reusable: bool, parkable: bool) {
        let mut slots = self.wakers.slots.borrow_mut();
        let slot = &mut slots[self.index];
        slot.parkable = parkable;
        if reusable == (slot.reusable_since != 0) || slot.reuse {
            return;
        }
        let n = self.wakers.reusable.get();
        if reusable {
            let t = self.wakers.tickets.get() + 1;
            self.wakers.tickets.set(t);
            slot.reusable_since = t;
            self.wakers.reusable.set(n + 1);
        } else {
            slot.reusable_since = 0;
            self.wakers.reusable.set(n - 1);
        }
    }

    /// Whether the connection was chosen to be closed to make room for new ones.
    pub fn reused(&self) -> bool {
        self.wakers.slots.borrow()[self.index].reuse
    }

    /// Whether a sweep asked this connection to park (the request is cleared).
    pub fn take_park(&self) -> bool {
        std::mem::take(&mut self.wakers.slots.borrow_mut()[self.index].park)
    }

    /// Drops the waker left here (a parked connection's ended task's).
    pub fn forget_waker(&self) {
        self.wakers.slots.borrow_mut()[self.index].waker = None;
    }

    /// The connection parked (or woke from it): sweeps pass it by while it is.
    pub fn set_parked(&self, parked: bool) {
        self.wakers.slots.borrow_mut()[self.index].parked = parked;
    }
}

impl Drop for IdleSlot {
    fn drop(&mut self) {
        self.set_reusable(false);
        self.wakers.slots.borrow_mut()[self.index] = Slot::default();
        self.wakers.free.borrow_mut().push(self.index);
    }
}

/// See [`IdleSlot::wait`].
pub struct IdleWait<'a> {
    slot: &'a IdleSlot,
    since: u64,
}

impl Future for IdleWait<'_> {
    type Output = ();

    // Inlined into the connection's wait for its next request (and the TLS handshake's): a
    // call of its own there cost the plain path ~40 instructions per request.
    #[inline]
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let wakers = &self.slot.wakers;
        if wakers.epoch.get() != self.since {
            return Poll::Ready(());
        }
        let mut slots = wakers.slots.borrow_mut();
        let slot = &mut slots[self.slot.index];
        if slot.reuse || slot.park {
            return Poll::Ready(());
        }
        let held = &mut slot.waker;
        if !held.as_ref().is_some_and(|w| w.will_wake(cx.waker())) {
            *held = Some(cx.waker().clone());
        }
        Poll::Pending
    }
}

thread_local! {
    static WORKER_INDEX: Cell<usize> = const { Cell::new(0) };
}

/// The index of the worker running on this thread (0 elsewhere).
pub fn current_index() -> usize {
    WORKER_INDEX.with(Cell::get)
}

/// Runs worker `index` until told to stop. Called on the worker's own thread.
pub fn run(index: usize, rx: watch::Receiver<Command>, counter: Arc<std::sync::atomic::AtomicU64>) {
    WORKER_INDEX.with(|w| w.set(index));
    let rt = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            error_log!(Level::Alert, "worker {index}: runtime failed: {e}");
            return;
        }
    };
    let local = tokio::task::LocalSet::new();
    local.block_on(&rt, serve(index, rx, counter));
    // Dropping the runtime aborts whatever is left (fast stop or shutdown timeout).
}

async fn serve(
    index: usize,
    mut rx: watch::Receiver<Command>,
    counter: Arc<std::sync::atomic::AtomicU64>,
) {
    let first = rx.borrow_and_update().clone();
    let worker = Rc::new(Worker {
        index,
        active: Cell::new(0),
        stopping: Cell::new(false),
        draining: Cell::new(false),
        wake_idle: Rc::default(),
        closed_notify: Notify::new(),
        current: RefCell::new(first.generation.clone()),
        counter,
    });
    // Buffered access logs: written when their `flush=` age is reached, and at exit.
    let ticker = tokio::task::spawn_local(async {
        let mut tick = tokio::time::interval(Duration::from_millis(500));
        loop {
            tick.tick().await;
            crate::http::access_log::flush_buffers(false);
        }
    });
    // Idle keep-alive connections shed their state (see `IdleWakers::sweep`).
    let wakers = worker.wake_idle.clone();
    let sweeper = tokio::task::spawn_local(async move {
        let mut tick = tokio::time::interval(PARK_SWEEP);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            wakers.sweep();
            crate::spare::release_shed();
        }
    });
    serve_commands(&worker, &mut rx, first).await;
    ticker.abort();
    sweeper.abort();
    crate::http::access_log::flush_buffers(true);
}

async fn serve_commands(worker: &Rc<Worker>, rx: &mut watch::Receiver<Command>, first: Command) {
    let worker = worker.clone();
    let mut accepting: HashMap<SocketKey, JoinHandle<()>> = HashMap::new();
    let mut cmd = first;
    let mut applied: Option<crate::process_init::ProcessConf> = None;
    loop {
        match cmd.stop {
            Stop::Run => {
                #[cfg(debug_assertions)]
                injected_panic();
                let process = &cmd.generation.config.main.process;
                crate::process_init::apply_to_worker(process, applied.as_ref(), worker.index);
                applied = Some(process.clone());
                *worker.current.borrow_mut() = cmd.generation.clone();
                worker.wake_idle.wake_all();
                reconcile(&worker, &cmd.generation, &mut accepting);
            }
            Stop::Drain => {
                graceful_stop(&worker, &cmd.generation, &mut accepting, Some(DRAIN_GRACE)).await;
                return;
            }
            Stop::Graceful => {
                graceful_stop(&worker, &cmd.generation, &mut accepting, None).await;
                return;
            }
            Stop::Fast => return,
        }
        if rx.changed().await.is_err() {
            // The master is gone: nothing will ever tell us to stop gracefully.
            return;
        }
        cmd = rx.borrow_and_update().clone();
    }
}

/// Fault injection for the tests, in debug builds only: a worker that takes a new command
/// while the file `SHOAL_TEST_WORKER_PANIC` names exists removes it and panics, outside any
/// connection task (one worker does: only one removes the file), so the tests can see the
/// master replace a dead worker.
#[cfg(debug_assertions)]
fn injected_panic() {
    if let Some(path) = std::env::var_os("SHOAL_TEST_WORKER_PANIC") {
        if std::fs::remove_file(path).is_ok() {
            panic!("injected by SHOAL_TEST_WORKER_PANIC");
        }
    }
}

/// Starts accepting on this worker's new sockets and stops on the ones that went away.
fn reconcile(
    worker: &Rc<Worker>,
    generation: &Arc<Generation>,
    accepting: &mut HashMap<SocketKey, JoinHandle<()>>,
) {
    let mine: Vec<_> = generation
        .sockets
        .iter()
        .filter(|s| s.key.worker.is_none() || s.key.worker == Some(worker.index))
        .collect();
    accepting.retain(|key, task| {
        let keep = mine.iter().any(|s| s.key == *key);
        if !keep {
            task.abort();
        }
        keep
    });
    let multi_accept = generation.config.events.multi_accept();
    for sock in mine {
        if accepting.contains_key(&sock.key) {
            continue;
        }
        let shared = sock.key.worker.is_none();
        if sock.key.kind == SocketKind::StreamUdp {
            // Datagrams: read, not accepted.
            match sock.dup() {
                Ok(fd) => {
                    let task = tokio::task::spawn_local(crate::stream::udp::serve_socket(
                        worker.clone(),
                        fd,
                        sock.key.clone(),
                    ));
                    accepting.insert(sock.key.clone(), task);
                }
                Err(e) if e.kind() == std::io::ErrorKind::NotConnected => {}
                Err(e) => error_log!(
                    Level::Alert,
                    "worker {} cannot poll {}: {}",
                    worker.index,
                    sock.key.addr,
                    e
                ),
            }
            continue;
        }
        let acceptor = match sock
            .dup()
            .and_then(|fd| Acceptor::new(fd, shared, multi_accept))
        {
            Ok(a) => a,
            // A newer reload already dropped this socket: the next command says so.
            Err(e) if e.kind() == std::io::ErrorKind::NotConnected => continue,
            Err(e) => {
                error_log!(
                    Level::Alert,
                    "worker {} cannot poll {}: {}",
                    worker.index,
                    sock.key.addr,
                    e
                );
                continue;
            }
        };
        error_log!(
            Level::Debug,
            "worker {} accepting on {}{}",
            worker.index,
            sock.key.addr,
            if acceptor.is_exclusive() {
                " (EPOLLEXCLUSIVE)"
            } else {
                ""
            }
        );
        let task =
            tokio::task::spawn_local(accept_loop(worker.clone(), acceptor, sock.key.clone()));
        accepting.insert(sock.key.clone(), task);
    }
}

async fn accept_loop(worker: Rc<Worker>, acceptor: Acceptor, key: SocketKey) {
    loop {
        let (fd, peer) = match acceptor.accept().await {
            Ok(x) => x,
            Err(e) => {
                error_log!(
                    Level::Alert,
                    "accept4() failed {}",
                    shoal_conf::os_error(&e)
                );
                // EMFILE and friends: back off as nginx does, instead of spinning.
                tokio::time::sleep(Duration::from_millis(500)).await;
                continue;
            }
        };
        let limit = worker.current.borrow().config.events.worker_connections();
        if worker.active.get() >= limit && !make_room(&worker, limit).await {
            // As nginx: the new connection is closed at once rather than left waiting in
            // the backlog for a slot.
            error_log!(Level::Alert, "{limit} worker_connections are not enough");
            drop(fd);
            continue;
        }
        let generation = worker.current.borrow().clone();
        worker.active.set(worker.active.get() + 1);
        let guard = ConnGuard(worker.clone());
        let number = worker.next_connection_number();
        let key = key.clone();
        if key.kind == SocketKind::Stream {
            // Boxed: the task then moves a pointer, not the session's whole state machine
            // (a few copies of it per session, a tenth of its user time once).
            let session = Box::pin(crate::stream::session::serve(
                fd, peer, key, generation, number, guard,
            ));
            tokio::task::spawn_local(crate::log::scoped(session));
            continue;
        }
        // Boxed, and built in its box: an HTTP/1 connection's future is sized by its deepest
        // request state (kilobytes), and the task would copy it whole at its spawn, at each
        // change of its stage and at its end.
        let conn = crate::pinned::pin_in_place(|| {
            crate::http::h1::serve(fd, key, generation, number, guard)
        });
        tokio::task::spawn_local(crate::log::scoped(conn));
    }
}

/// Every `worker_connections` slot is taken and a new connection came: as nginx, room is
/// made by closing connections that wait for a request (the longest waiting first, an eighth
/// of them, 1 to 32 at a time), with nginx's warning. Returns whether a slot is free.
async fn make_room(worker: &Worker, limit: usize) -> bool {
    let reusable = worker.wake_idle.reusable();
    if reusable == 0 {
        return false;
    }
    error_log!(
        Level::Warn,
        "{limit} worker_connections are not enough, reusing connections"
    );
    worker.wake_idle.reuse_oldest((reusable / 8).clamp(1, 32));
    // The chosen ones close at their next poll.
    while worker.active.get() >= limit {
        let closed = worker.closed_notify.notified();
        if worker.active.get() < limit
            || tokio::time::timeout(Duration::from_secs(1), closed)
                .await
                .is_err()
        {
            break;
        }
    }
    worker.active.get() < limit
}

/// How long a draining worker's idle keep-alive connections wait for one more request.
pub const DRAIN_GRACE: Duration = Duration::from_secs(1);

/// How often idle keep-alive connections are asked to park ([`IdleWakers::sweep`]): one that
/// waited between one and two of these for its next request sheds its task's state.
pub const PARK_SWEEP: Duration = Duration::from_millis(50);

async fn graceful_stop(
    worker: &Rc<Worker>,
    generation: &Arc<Generation>,
    accepting: &mut HashMap<SocketKey, JoinHandle<()>>,
    grace: Option<Duration>,
) {
    for (_, task) in accepting.drain() {
        task.abort();
    }
    worker.stopping.set(true);
    let all_closed = || async {
        while worker.active.get() > 0 {
            let closed = worker.closed_notify.notified();
            if worker.active.get() == 0 {
                break;
            }
            closed.await;
        }
    };
    // `worker_shutdown_timeout` counts from the stop, as nginx's does, the drain's grace within.
    let deadline = generation
        .config
        .main
        .worker_shutdown_timeout
        .map(|t| tokio::time::Instant::now() + t);
    if let Some(grace) = grace {
        // Idle connections are left waiting: a request that comes is answered with
        // `Connection: close` (a busy connection's is too), then they close.
        worker.draining.set(true);
        let end = tokio::time::Instant::now() + grace;
        let end = deadline.map_or(end, |d| d.min(end));
        let _ = tokio::time::timeout_at(end, all_closed()).await;
        worker.draining.set(false);
    }
    worker.wake_idle.wake_all();
    let wait_idle = all_closed();
    match deadline {
        Some(d) => {
            if tokio::time::timeout_at(d, wait_idle).await.is_err() {
                error_log!(
                    Level::Notice,
                    "worker {}: shutdown timeout, closing {} connection(s)",
                    worker.index,
                    worker.active.get()
                );
            }
        }
        None => wait_idle.await,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs `f` on a current-thread runtime inside a LocalSet, as a worker does.
    fn on_worker<F: Future>(f: F) -> F::Output {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .unwrap();
        tokio::task::LocalSet::new().block_on(&rt, f)
    }

    #[test]
    fn wake_all_ends_the_waits_begun_before_it_and_only_those() {
        on_worker(async {
            let wakers = Rc::new(IdleWakers::default());
            let ended = Rc::new(Cell::new(0));
            let mut tasks = Vec::new();
            for _ in 0..3 {
                let (wakers, ended) = (wakers.clone(), ended.clone());
                tasks.push(tokio::task::spawn_local(async move {
                    let slot = IdleSlot::new(&wakers);
                    // Woken spuriously (another wake of the task) the wait goes on.
                    slot.wait(wakers.epoch()).await;
                    ended.set(ended.get() + 1);
                    // A wait begun after the wake is not ended by it.
                    let again = slot.wait(wakers.epoch());
                    tokio::select! {
                        _ = again => panic!("an earlier wake_all ended a later wait"),
                        _ = tokio::time::sleep(Duration::from_millis(20)) => {}
                    }
                }));
            }
            tokio::task::yield_now().await;
            assert_eq!(wakers.slots_in_use(), 3);
            assert_eq!(ended.get(), 0);
            wakers.wake_all();
            for t in tasks {
                tokio::time::timeout(Duration::from_secs(10), t)
                    .await
                    .expect("a waiting task was not woken")
                    .unwrap();
            }
            assert_eq!(ended.get(), 3);
            // Slots are given back, and reused.
            assert_eq!(wakers.slots_in_use(), 0);
            let slot = IdleSlot::new(&wakers);
            assert_eq!(wakers.slots.borrow().len(), 3);
            // A wait that starts with an old epoch is over at once.
            slot.wait(wakers.epoch() - 1).await;
        });
    }

    /// A sweep asks to park only the parkable waits that lasted since the sweep before it, and
    /// none that is parked already; the ask ends the wait, and is taken once.
    #[test]
    fn a_sweep_parks_the_waits_that_lasted_a_whole_interval() {
        let wakers = Rc::new(IdleWakers::default());
        let long = IdleSlot::new(&wakers);
        let renewed = IdleSlot::new(&wakers);
        let busy = IdleSlot::new(&wakers);
        let other = IdleSlot::new(&wakers);
        long.set_idle(true, true);
        renewed.set_idle(true, true);
        other.set_idle(true, false);
        wakers.sweep();
        // Nothing has waited a whole interval yet.
        assert!(!long.take_park() && !renewed.take_park());
        // `renewed` gets a request and waits again: a wait of its own, younger than the sweep.
        renewed.set_idle(false, false);
        renewed.set_idle(true, true);
        busy.set_idle(false, true);
        wakers.sweep();
        assert!(long.take_park(), "a whole interval idle");
        assert!(!long.take_park(), "taken once");
        assert!(!renewed.take_park() && !busy.take_park() && !other.take_park());
        // The ask ends a wait begun in the same epoch.
        wakers.sweep();
        on_worker(async {
            tokio::time::timeout(Duration::from_secs(10), renewed.wait(wakers.epoch()))
                .await
                .expect("a sweep's ask did not end the wait");
        });
        assert!(renewed.take_park());
        // Asked again while it waits on; once parked, passed by.
        assert!(long.take_park());
        long.set_parked(true);
        wakers.sweep();
        wakers.sweep();
        assert!(!long.take_park());
    }
}
