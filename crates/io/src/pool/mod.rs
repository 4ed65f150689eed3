//! nginx's `thread_pool NAME threads=N max_queue=M`: a named pool of N OS threads behind one
//! bounded FIFO (a mutex and a condvar). Tasks run on a pool thread and may block; posting runs
//! on the worker and never blocks: a full queue refuses the task at once, and the error reads
//! like nginx's (`thread pool "NAME" queue overflow: N tasks waiting`) so the server can answer
//! 503 and log it.
//!
//! `max_queue` bounds the tasks that *wait*: a task that an idle thread will pick up right away
//! does not count, so `max_queue=0` accepts exactly as many tasks as there are idle threads. The
//! result comes back through a [`Completion`] future, resolved on the posting worker with one
//! cross-thread wake-up per burst of completions (see the `completion` module). A panicking task
//! neither kills its thread nor hangs its poster, who gets [`TaskError::Panicked`]. Dropping the
//! pool is a graceful shutdown: queued tasks still run, then the threads are joined, so drop it
//! on the master thread, not on a worker.

mod completion;

use std::any::Any;
use std::collections::VecDeque;
use std::fmt;
use std::io;
use std::panic::{self, AssertUnwindSafe};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

pub use completion::Completion;

/// The name of the pool `aio threads` uses when none is named.
pub const DEFAULT_POOL_NAME: &str = "default";
/// nginx's default `threads=` for the `default` pool.
pub const DEFAULT_THREADS: usize = 32;
/// nginx's default `max_queue=`.
pub const DEFAULT_MAX_QUEUE: usize = 65536;
/// How long a task may run before [`ThreadPool::stuck`] reports it.
pub const DEFAULT_STUCK_THRESHOLD: Duration = Duration::from_secs(60);

/// A post refused because `max_queue` tasks are already waiting.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Overflow {
    /// The pool's name.
    pub pool: Arc<str>,
    /// Tasks waiting for a thread when the post was refused.
    pub waiting: usize,
}

impl fmt::Display for Overflow {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "thread pool \"{}\" queue overflow: {} tasks waiting",
            self.pool, self.waiting
        )
    }
}

impl std::error::Error for Overflow {}

impl Overflow {
    /// The overflow inside an `io::Error` made from one (by the `file` module), if it is one.
    pub fn from_io(err: &io::Error) -> Option<&Overflow> {
        err.get_ref()?.downcast_ref()
    }
}

impl From<Overflow> for io::Error {
    fn from(o: Overflow) -> io::Error {
        io::Error::other(o)
    }
}

/// Why a posted task gave no result.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TaskError {
    /// The task panicked, with this message; the pool thread lives on.
    Panicked(String),
    /// The task was dropped without running (never expected: shutdown drains the queue).
    Cancelled,
}

impl fmt::Display for TaskError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TaskError::Panicked(msg) => write!(f, "thread pool task panicked: {msg}"),
            TaskError::Cancelled => f.write_str("thread pool task cancelled"),
        }
    }
}

impl std::error::Error for TaskError {}

impl From<TaskError> for io::Error {
    fn from(e: TaskError) -> io::Error {
        io::Error::other(e)
    }
}

/// A snapshot of a pool's counters (each read atomically, not all at one instant).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PoolStats {
    /// The pool's name.
    pub name: Arc<str>,
    /// `threads=`.
    pub threads: usize,
    /// `max_queue=`.
    pub max_queue: usize,
    /// Tasks posted and not yet started.
    pub queued: usize,
    /// Of those, the ones no idle thread is about to take: what `max_queue` bounds.
    pub waiting: usize,
    /// Threads running a task.
    pub busy: usize,
    /// Tasks finished (panicked ones included).
    pub completed: u64,
    /// Tasks that panicked.
    pub panicked: u64,
    /// Posts refused with [`Overflow`].
    pub overflows: u64,
    /// Cross-thread wake-ups sent to posting workers (≤ `completed`: one per burst).
    pub wakeups: u64,
}

/// A task that has been running longer than the pool's stuck threshold.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StuckTask {
    /// The thread running it, `NAME-i`.
    pub thread: String,
    /// How long it has been running.
    pub running_for: Duration,
}

/// A task as the pool threads see it: given the pool's counters, it runs, counts itself and
/// delivers its result.
type Job = Box<dyn FnOnce(&Counters) + Send>;

#[derive(Default)]
struct Counters {
    queued: AtomicUsize,
    busy: AtomicUsize,
    completed: AtomicU64,
    panicked: AtomicU64,
    overflows: AtomicU64,
    wakeups: AtomicU64,
}

struct State {
    queue: VecDeque<Job>,
    /// Threads waiting on the condvar.
    sleeping: usize,
    shutdown: bool,
}

struct Shared {
    name: Arc<str>,
    threads: usize,
    max_queue: usize,
    stuck_threshold: Duration,
    state: Mutex<State>,
    work: Condvar,
    counters: Counters,
    epoch: Instant,
    /// Per thread: when its current task started (ns since `epoch`, plus 1); 0 when idle.
    started: Box<[AtomicU64]>,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        // Tasks never run under this lock, so poisoning cannot leave it inconsistent.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn thread_name(&self, i: usize) -> String {
        // Short: the kernel keeps 15 bytes of a thread's name (what top and ps show).
        format!("{}-{}", self.name, i)
    }
}

/// Configures a [`ThreadPool`]; [`ThreadPool::new`] covers the usual case.
#[derive(Debug, Clone)]
pub struct Builder {
    name: String,
    threads: usize,
    max_queue: usize,
    stuck_threshold: Duration,
}

impl Builder {
    /// A pool named `name` with nginx's defaults (32 threads, max_queue 65536).
    pub fn new(name: &str) -> Builder {
        Builder {
            name: name.to_owned(),
            threads: DEFAULT_THREADS,
            max_queue: DEFAULT_MAX_QUEUE,
            stuck_threshold: DEFAULT_STUCK_THRESHOLD,
        }
    }

    /// `threads=`: how many OS threads (at least 1).
    pub fn threads(mut self, threads: usize) -> Builder {
        self.threads = threads;
        self
    }

    /// `max_queue=`: how many tasks may wait for a thread.
    pub fn max_queue(mut self, max_queue: usize) -> Builder {
        self.max_queue = max_queue;
        self
    }

    /// After how long a running task is reported by [`ThreadPool::stuck`] (default a minute).
    pub fn stuck_threshold(mut self, threshold: Duration) -> Builder {
        self.stuck_threshold = threshold;
        self
    }

    /// Starts the threads.
    pub fn build(self) -> io::Result<ThreadPool> {
        if self.threads == 0 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("thread pool \"{}\" needs at least one thread", self.name),
            ));
        }
        let shared = Arc::new(Shared {
            name: self.name.into(),
            threads: self.threads,
            max_queue: self.max_queue,
            stuck_threshold: self.stuck_threshold,
            state: Mutex::new(State {
                queue: VecDeque::new(),
                sleeping: 0,
                shutdown: false,
            }),
            work: Condvar::new(),
            counters: Counters::default(),
            epoch: Instant::now(),
            started: (0..self.threads).map(|_| AtomicU64::new(0)).collect(),
        });
        let mut pool = ThreadPool {
            shared,
            handles: Vec::with_capacity(self.threads),
        };
        for i in 0..pool.shared.threads {
            let shared = pool.shared.clone();
            // On failure, dropping `pool` stops and joins the threads already started.
            let handle = thread::Builder::new()
                .name(pool.shared.thread_name(i))
                .spawn(move || run(&shared, i))?;
            pool.handles.push(handle);
        }
        Ok(pool)
    }
}

/// A named, bounded pool of threads for blocking work (nginx's `thread_pool`).
///
/// Share it between workers as `Arc<ThreadPool>`; posting takes `&self`.
pub struct ThreadPool {
    shared: Arc<Shared>,
    handles: Vec<JoinHandle<()>>,
}

impl fmt::Debug for ThreadPool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ThreadPool")
            .field("name", &self.shared.name)
            .field("threads", &self.shared.threads)
            .field("max_queue", &self.shared.max_queue)
            .finish()
    }
}

impl ThreadPool {
    /// `thread_pool NAME threads=THREADS max_queue=MAX_QUEUE`.
    pub fn new(name: &str, threads: usize, max_queue: usize) -> io::Result<ThreadPool> {
        Builder::new(name)
            .threads(threads)
            .max_queue(max_queue)
            .build()
    }

    /// The pool `aio threads` uses when no `thread_pool default` is configured: `default`, 32
    /// threads, max_queue 65536.
    pub fn default_pool() -> io::Result<ThreadPool> {
        Builder::new(DEFAULT_POOL_NAME).build()
    }

    /// A builder for the less usual settings (stuck threshold).
    pub fn builder(name: &str) -> Builder {
        Builder::new(name)
    }

    /// The pool's name.
    pub fn name(&self) -> &str {
        &self.shared.name
    }

    /// Posts `task` to run on a pool thread. Never blocks: if `max_queue` tasks are already
    /// waiting, the task is refused (and dropped) with [`Overflow`]. The returned future
    /// resolves on the thread that awaits it, normally this one.
    pub fn post<T, F>(&self, task: F) -> Result<Completion<T>, Overflow>
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        let shared = &*self.shared;
        let mut state = shared.lock();
        // `busy` rises under this lock (when a thread takes a task) and falls just before a
        // task's result is delivered, when its thread is already on its way back to the queue.
        let free = shared.threads
            - shared
                .counters
                .busy
                .load(Ordering::Relaxed)
                .min(shared.threads);
        if state.queue.len() >= free + shared.max_queue {
            let waiting = state.queue.len() - free.min(state.queue.len());
            drop(state);
            shared.counters.overflows.fetch_add(1, Ordering::Relaxed);
            return Err(Overflow {
                pool: shared.name.clone(),
                waiting,
            });
        }
        let (completion, completer) = completion::pair();
        state.queue.push_back(Box::new(move |counters: &Counters| {
            let result = panic::catch_unwind(AssertUnwindSafe(task)).map_err(|payload| {
                counters.panicked.fetch_add(1, Ordering::Relaxed);
                TaskError::Panicked(panic_message(payload.as_ref()))
            });
            // Counted before the poster can see the result, so stats read after an await agree.
            counters.busy.fetch_sub(1, Ordering::Relaxed);
            counters.completed.fetch_add(1, Ordering::Relaxed);
            completer.complete(result, &counters.wakeups);
        }));
        shared
            .counters
            .queued
            .store(state.queue.len(), Ordering::Relaxed);
        let wake = state.sleeping > 0;
        drop(state);
        if wake {
            shared.work.notify_one();
        }
        Ok(completion)
    }

    /// The pool's counters.
    pub fn stats(&self) -> PoolStats {
        let s = &*self.shared;
        let queued = s.counters.queued.load(Ordering::Relaxed);
        let busy = s.counters.busy.load(Ordering::Relaxed).min(s.threads);
        PoolStats {
            name: s.name.clone(),
            threads: s.threads,
            max_queue: s.max_queue,
            queued,
            waiting: queued.saturating_sub(s.threads - busy),
            busy,
            completed: s.counters.completed.load(Ordering::Relaxed),
            panicked: s.counters.panicked.load(Ordering::Relaxed),
            overflows: s.counters.overflows.load(Ordering::Relaxed),
            wakeups: s.counters.wakeups.load(Ordering::Relaxed),
        }
    }

    /// The tasks running for longer than the stuck threshold (a minute unless configured), for
    /// the server to log from a timer. A task is reported on every call while it runs.
    pub fn stuck(&self) -> Vec<StuckTask> {
        let s = &*self.shared;
        let now = s.epoch.elapsed();
        s.started
            .iter()
            .enumerate()
            .filter_map(|(i, started)| {
                let started = started.load(Ordering::Relaxed);
                let running_for = now.saturating_sub(Duration::from_nanos(started.checked_sub(1)?));
                (running_for > s.stuck_threshold).then(|| StuckTask {
                    thread: s.thread_name(i),
                    running_for,
                })
            })
            .collect()
    }
}

impl Drop for ThreadPool {
    /// Graceful: the threads finish every queued task, then exit and are joined. Blocks.
    fn drop(&mut self) {
        self.shared.lock().shutdown = true;
        self.shared.work.notify_all();
        let me = thread::current().id();
        for handle in self.handles.drain(..) {
            // A task that drops the last handle of its own pool must not join itself.
            if handle.thread().id() != me {
                let _ = handle.join();
            }
        }
    }
}

/// A pool thread: take the oldest task, run it, repeat; exit when shut down and drained.
fn run(shared: &Shared, index: usize) {
    let counters = &shared.counters;
    let mut state = shared.lock();
    loop {
        if let Some(job) = state.queue.pop_front() {
            counters.queued.store(state.queue.len(), Ordering::Relaxed);
            counters.busy.fetch_add(1, Ordering::Relaxed);
            drop(state);
            let since = shared.epoch.elapsed().as_nanos() as u64;
            shared.started[index].store(since + 1, Ordering::Relaxed);
            job(counters);
            shared.started[index].store(0, Ordering::Relaxed);
            state = shared.lock();
            continue;
        }
        if state.shutdown {
            return;
        }
        state.sleeping += 1;
        state = shared
            .work
            .wait(state)
            .unwrap_or_else(PoisonError::into_inner);
        state.sleeping -= 1;
    }
}

fn panic_message(payload: &(dyn Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_owned()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "non-string panic payload".to_owned()
    }
}

#[cfg(test)]
mod tests;
