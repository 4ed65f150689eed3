//! The way a task's result gets back to the worker that posted it: a [`Completion`] future on the
//! worker, a `Completer` on the pool thread. Polled on the worker; never blocks (uncontended
//! mutexes only).
//!
//! Each posting thread has a *port*: a queue of wakers of completed tasks and a tokio `Notify`,
//! drained by a small task that the first post from inside a current_thread runtime spawns on
//! it (and that the next post re-spawns if that runtime went away). A pool thread that finishes
//! a task stores the result in the task's slot and queues the poster's waker on the port; only
//! the completion that finds the port idle notifies the drainer: that is the one cross-thread
//! wake-up (an eventfd write into the worker's driver) for the whole burst. The drainer, on the
//! worker, wakes the queued tasks, which in a current_thread runtime is a push on the local run
//! queue, not a syscall. A tokio oneshot per task would cost one eventfd write per completion.
//! Outside a current_thread runtime (a plain thread, a multi-thread runtime) there is no
//! drainer and each completion wakes its poster directly.

use std::future::Future;
use std::mem;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::task::{Context, Poll, Waker};

use tokio::runtime::{Handle, RuntimeFlavor};
use tokio::sync::Notify;

use super::TaskError;

/// Locks, ignoring poisoning: no code that can panic runs while these locks are held.
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// One per posting thread.
#[derive(Default)]
struct Port {
    inner: Mutex<PortInner>,
    /// Wakes the drainer: one permit per burst.
    notify: Notify,
}

#[derive(Default)]
struct PortInner {
    /// Wakers of completed tasks, for the drainer to wake.
    ready: Vec<Waker>,
    /// The drainer has been notified and has not drained yet.
    notified: bool,
    /// A drainer task is alive on this thread's runtime.
    drainer: bool,
}

thread_local! {
    static PORT: Arc<Port> = Arc::new(Port::default());
}

/// This thread's port, with a drainer running if this thread is in a current_thread runtime.
fn current_port() -> Arc<Port> {
    let port = PORT.with(Arc::clone);
    if !lock(&port.inner).drainer {
        if let Ok(handle) = Handle::try_current() {
            if handle.runtime_flavor() == RuntimeFlavor::CurrentThread {
                lock(&port.inner).drainer = true;
                // The guard is made here, not in the task: a task dropped before its first poll
                // (a runtime shutting down) must still clear the flag.
                drop(handle.spawn(drain(DrainerAlive(port.clone()))));
            }
        }
    }
    port
}

/// Clears the port's drainer flag when the drainer dies (its runtime shut down), waking what it
/// left queued so nothing is stranded.
struct DrainerAlive(Arc<Port>);

impl Drop for DrainerAlive {
    fn drop(&mut self) {
        let batch = {
            let mut port = lock(&self.0.inner);
            port.drainer = false;
            port.notified = false;
            mem::take(&mut port.ready)
        };
        batch.into_iter().for_each(Waker::wake);
    }
}

/// The drainer task: on each notification, wake every queued poster, from the worker.
async fn drain(alive: DrainerAlive) {
    let mut batch = Vec::new();
    loop {
        alive.0.notify.notified().await;
        {
            let mut port = lock(&alive.0.inner);
            port.notified = false;
            mem::swap(&mut port.ready, &mut batch);
        }
        // `batch` keeps its capacity for the next burst.
        batch.drain(..).for_each(Waker::wake);
    }
}

/// A task's result and its poster's waker, shared by the two ends.
struct Slot<T> {
    inner: Mutex<SlotInner<T>>,
}

struct SlotInner<T> {
    result: Option<Result<T, TaskError>>,
    waker: Option<Waker>,
    /// The [`Completion`] was dropped: nobody wants the result.
    abandoned: bool,
}

/// A future that resolves with the result of a task posted to a
/// [`ThreadPool`](super::ThreadPool): `Ok(value)`, or `Err` if the task panicked.
///
/// Dropping it does not cancel the task (it is running or queued on another thread); its result
/// is dropped when it completes. It is `Send` when `T` is, but it is meant to be awaited on the
/// thread that posted the task: that is the worker the completion wakes.
#[must_use = "a completion does nothing unless awaited; dropping it discards the task's result"]
pub struct Completion<T> {
    slot: Arc<Slot<T>>,
    done: bool,
}

/// The pool thread's end: delivers the result exactly once (`TaskError::Cancelled` if dropped
/// unused).
pub(crate) struct Completer<T> {
    slot: Arc<Slot<T>>,
    port: Arc<Port>,
    sent: bool,
}

/// A connected [`Completion`] (for this thread) and `Completer` (for a pool thread).
pub(crate) fn pair<T>() -> (Completion<T>, Completer<T>) {
    let slot = Arc::new(Slot {
        inner: Mutex::new(SlotInner {
            result: None,
            waker: None,
            abandoned: false,
        }),
    });
    let completion = Completion {
        slot: slot.clone(),
        done: false,
    };
    (
        completion,
        Completer {
            slot,
            port: current_port(),
            sent: false,
        },
    )
}

/// What a completing pool thread must do after releasing the locks.
enum Wake {
    Nothing,
    Drainer,
    Poster(Waker),
}

impl<T> Completer<T> {
    /// Stores the result and wakes the poster; counts cross-thread wake-ups in `wakeups`.
    pub(crate) fn complete(mut self, result: Result<T, TaskError>, wakeups: &AtomicU64) {
        self.sent = true;
        self.deliver(result, Some(wakeups));
    }

    fn deliver(&self, result: Result<T, TaskError>, wakeups: Option<&AtomicU64>) {
        let mut unwanted = None;
        let wake = {
            let mut port = lock(&self.port.inner);
            let mut slot = lock(&self.slot.inner);
            if slot.abandoned {
                unwanted = Some(result);
                Wake::Nothing
            } else {
                slot.result = Some(result);
                match slot.waker.take() {
                    // Not polled yet: its first poll finds the result.
                    None => Wake::Nothing,
                    Some(waker) if !port.drainer => Wake::Poster(waker),
                    Some(waker) => {
                        port.ready.push(waker);
                        if mem::replace(&mut port.notified, true) {
                            Wake::Nothing
                        } else {
                            Wake::Drainer
                        }
                    }
                }
            }
        };
        // Outside the locks: a result's Drop and a waker may do anything.
        drop(unwanted);
        let count = || {
            if let Some(counter) = wakeups {
                counter.fetch_add(1, Ordering::Relaxed);
            }
        };
        match wake {
            Wake::Nothing => {}
            Wake::Drainer => {
                count();
                self.port.notify.notify_one();
            }
            Wake::Poster(waker) => {
                count();
                waker.wake();
            }
        }
    }
}

impl<T> Drop for Completer<T> {
    fn drop(&mut self) {
        if !self.sent {
            self.deliver(Err(TaskError::Cancelled), None);
        }
    }
}

impl<T> Future for Completion<T> {
    type Output = Result<T, TaskError>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        assert!(!self.done, "Completion polled after it returned Ready");
        let mut slot = lock(&self.slot.inner);
        if let Some(result) = slot.result.take() {
            drop(slot);
            self.done = true;
            return Poll::Ready(result);
        }
        if !slot.waker.as_ref().is_some_and(|w| w.will_wake(cx.waker())) {
            slot.waker = Some(cx.waker().clone());
        }
        Poll::Pending
    }
}

impl<T> Drop for Completion<T> {
    fn drop(&mut self) {
        if self.done {
            return;
        }
        let (result, waker) = {
            let mut slot = lock(&self.slot.inner);
            slot.abandoned = true;
            (slot.result.take(), slot.waker.take())
        };
        drop((result, waker));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;
    use std::task::Wake;

    /// A waker that counts its wake-ups.
    #[derive(Default)]
    struct Counter(AtomicUsize);
    impl Wake for Counter {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }
    fn counts(counters: &[Arc<Counter>]) -> Vec<usize> {
        counters
            .iter()
            .map(|c| c.0.load(Ordering::SeqCst))
            .collect()
    }

    fn poll<T>(c: &mut Completion<T>, w: &Arc<Counter>) -> Poll<Result<T, TaskError>> {
        let waker = Waker::from(w.clone());
        Pin::new(c).poll(&mut Context::from_waker(&waker))
    }

    fn current_thread() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap()
    }

    #[test]
    fn a_burst_costs_one_cross_thread_wake_up() {
        current_thread().block_on(async {
            let wakeups = AtomicU64::new(0);
            let (mut pending, completers): (Vec<_>, Vec<_>) = (0..5).map(|_| pair::<u32>()).unzip();
            let counters: Vec<Arc<Counter>> = (0..5).map(|_| Arc::default()).collect();
            for (c, w) in pending.iter_mut().zip(&counters) {
                assert!(poll(c, w).is_pending());
            }
            // Completed from another thread, all before the worker runs again.
            std::thread::spawn(move || {
                let wakeups = AtomicU64::new(0);
                for (i, completer) in completers.into_iter().enumerate() {
                    completer.complete(Ok(i as u32), &wakeups);
                }
                assert_eq!(wakeups.load(Ordering::SeqCst), 1);
            })
            .join()
            .unwrap();
            assert_eq!(counts(&counters), [0; 5]);
            // The drainer runs when this task yields, and wakes all five.
            while counts(&counters) != [1; 5] {
                tokio::task::yield_now().await;
            }
            for (i, (c, w)) in pending.iter_mut().zip(&counters).enumerate() {
                assert!(matches!(poll(c, w), Poll::Ready(Ok(v)) if v == i as u32));
            }
            // The port is idle again: the next completion notifies again.
            let (mut c, done) = pair::<u32>();
            let w = Arc::<Counter>::default();
            assert!(poll(&mut c, &w).is_pending());
            done.complete(Ok(9), &wakeups);
            assert_eq!(wakeups.load(Ordering::SeqCst), 1);
            while counts(std::slice::from_ref(&w)) != [1] {
                tokio::task::yield_now().await;
            }
        });
    }

    #[test]
    fn without_a_runtime_each_completion_wakes_its_poster() {
        let wakeups = AtomicU64::new(0);
        let (mut a, a_done) = pair::<u32>();
        let (mut b, b_done) = pair::<u32>();
        let (wa, wb) = (Arc::<Counter>::default(), Arc::<Counter>::default());
        assert!(poll(&mut a, &wa).is_pending() && poll(&mut b, &wb).is_pending());
        a_done.complete(Ok(1), &wakeups);
        b_done.complete(Ok(2), &wakeups);
        assert_eq!(counts(&[wa.clone(), wb.clone()]), [1, 1]);
        assert_eq!(wakeups.load(Ordering::SeqCst), 2);
        assert!(matches!(poll(&mut a, &wa), Poll::Ready(Ok(1))));
        assert!(matches!(poll(&mut b, &wb), Poll::Ready(Ok(2))));
    }

    #[test]
    fn a_new_runtime_gets_a_new_drainer_and_nothing_is_stranded() {
        let wakeups = AtomicU64::new(0);
        let w = Arc::<Counter>::default();
        let mut leftover = current_thread()
            .block_on(async {
                let (mut c, done) = pair::<u32>();
                assert!(poll(&mut c, &w).is_pending());
                // Completed, queued for the drainer, and the runtime goes away before it drains.
                done.complete(Ok(1), &wakeups);
                Some(c) // in an Option: handed out, not awaited
            })
            .expect("returned above");
        assert_eq!(counts(std::slice::from_ref(&w)), [1]); // woken by the dying drainer
        assert!(matches!(poll(&mut leftover, &w), Poll::Ready(Ok(1))));
        current_thread().block_on(async {
            let (mut c, done) = pair::<u32>();
            let w = Arc::<Counter>::default();
            assert!(poll(&mut c, &w).is_pending());
            done.complete(Ok(2), &wakeups);
            while counts(std::slice::from_ref(&w)) != [1] {
                tokio::task::yield_now().await;
            }
            assert!(matches!(poll(&mut c, &w), Poll::Ready(Ok(2))));
        });
    }

    #[test]
    fn unpolled_abandoned_and_cancelled() {
        let wakeups = AtomicU64::new(0);
        // Completed before the first poll: no wake-up needed, the poll finds it.
        let (mut c, done) = pair::<&str>();
        done.complete(Ok("early"), &wakeups);
        assert!(matches!(
            poll(&mut c, &Arc::default()),
            Poll::Ready(Ok("early"))
        ));
        // Abandoned: the result is dropped, nobody is woken.
        let (c, done) = pair::<Arc<()>>();
        drop(c);
        let value = Arc::new(());
        done.complete(Ok(value.clone()), &wakeups);
        assert_eq!(Arc::strong_count(&value), 1);
        // A completer dropped unused reports Cancelled.
        let (mut c, done) = pair::<u8>();
        drop(done);
        assert!(matches!(
            poll(&mut c, &Arc::default()),
            Poll::Ready(Err(TaskError::Cancelled))
        ));
        assert_eq!(wakeups.load(Ordering::SeqCst), 0);
    }
}
