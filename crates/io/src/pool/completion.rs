//! The way a task's result gets back to the worker that posted it: a [`Completion`] future on the
//! worker, a `Completer` on the pool thread. Polled on the worker; never blocks (two uncontended
//! mutexes per poll).
//!
//! Each posting thread has a *port*. A pool thread that finishes a task stores the result in the
//! task's slot, then: if no wake-up is in flight to that port, it wakes the task's waker (the one
//! cross-thread wake-up: an eventfd write into the worker's tokio driver) and marks the port
//! *designated*; if one is in flight, it only queues the task's waker on the port. The first
//! completion future polled on the worker (or the designated one being dropped) drains the port
//! and wakes the queued wakers from the worker itself, which in a current_thread runtime is a
//! push on the local run queue, not a syscall. So a burst of completions costs one cross-thread
//! wake-up, where a tokio oneshot per task costs one each.

use std::future::Future;
use std::mem;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::task::{Context, Poll, Waker};

use super::TaskError;

/// Locks, ignoring poisoning: no code runs user closures while holding these locks.
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// One per posting thread: wakers of completed tasks waiting for the designated drain.
#[derive(Default)]
struct Port {
    inner: Mutex<PortInner>,
}

#[derive(Default)]
struct PortInner {
    /// Wakers of tasks completed while a wake-up was in flight.
    ready: Vec<Waker>,
    /// The slot (by address) whose cross-thread wake-up is in flight; 0: none.
    designated: usize,
}

impl Port {
    /// Takes the queued wakers and ends the designation.
    fn drain(&self) -> Vec<Waker> {
        let mut port = lock(&self.inner);
        port.designated = 0;
        mem::take(&mut port.ready)
    }
}

thread_local! {
    static PORT: Arc<Port> = Arc::new(Port::default());
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

/// A future that resolves, on the thread that polls it, with the result of a task posted to a
/// [`ThreadPool`](super::ThreadPool): `Ok(value)`, or `Err` if the task panicked.
///
/// Dropping it does not cancel the task (it is running or queued on another thread); its result
/// is dropped when it completes. It is `Send` when `T` is, but it belongs on the thread that
/// posted the task: that is where it wakes up.
#[must_use = "a completion does nothing unless awaited; dropping it discards the task's result"]
pub struct Completion<T> {
    slot: Arc<Slot<T>>,
    port: Arc<Port>,
    done: bool,
}

/// The pool thread's end: delivers the result exactly once (or `TaskError::Cancelled` if dropped
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
    let port = PORT.with(Arc::clone);
    let completion = Completion {
        slot: slot.clone(),
        port: port.clone(),
        done: false,
    };
    (
        completion,
        Completer {
            slot,
            port,
            sent: false,
        },
    )
}

fn slot_id<T>(slot: &Arc<Slot<T>>) -> usize {
    Arc::as_ptr(slot) as usize
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
                None
            } else {
                slot.result = Some(result);
                match slot.waker.take() {
                    // Never polled yet: its first poll finds the result.
                    None => None,
                    Some(waker) if port.designated == 0 => {
                        port.designated = slot_id(&self.slot);
                        Some(waker)
                    }
                    Some(waker) => {
                        port.ready.push(waker);
                        None
                    }
                }
            }
        };
        // Outside the locks: a result's Drop and a waker may do anything.
        drop(unwanted);
        if let Some(waker) = wake {
            if let Some(counter) = wakeups {
                counter.fetch_add(1, Ordering::Relaxed);
            }
            waker.wake();
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
        // Whoever is polled first wakes the rest of the batch, locally.
        for waker in self.port.drain() {
            if !waker.will_wake(cx.waker()) {
                waker.wake();
            }
        }
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
        let (batch, unwanted) = {
            let mut port = lock(&self.port.inner);
            // Dropped after being woken and before being polled: the drain is ours to do.
            let batch = if port.designated == slot_id(&self.slot) {
                port.designated = 0;
                mem::take(&mut port.ready)
            } else {
                Vec::new()
            };
            let mut slot = lock(&self.slot.inner);
            slot.abandoned = true;
            slot.waker = None;
            (batch, slot.result.take())
        };
        drop(unwanted);
        for waker in batch {
            waker.wake();
        }
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
    impl Counter {
        fn count(&self) -> usize {
            self.0.load(Ordering::SeqCst)
        }
    }

    fn poll<T>(c: &mut Completion<T>, w: &Arc<Counter>) -> Poll<Result<T, TaskError>> {
        let waker = Waker::from(w.clone());
        Pin::new(c).poll(&mut Context::from_waker(&waker))
    }

    #[test]
    fn a_batch_costs_one_cross_thread_wake_up() {
        let wakeups = AtomicU64::new(0);
        let (mut pending, mut completers): (Vec<_>, Vec<_>) = (0..5).map(|_| pair::<u32>()).unzip();
        let counters: Vec<Arc<Counter>> = (0..5).map(|_| Arc::default()).collect();
        for (c, w) in pending.iter_mut().zip(&counters) {
            assert!(poll(c, w).is_pending());
        }
        for (i, completer) in completers.drain(..).enumerate() {
            completer.complete(Ok(i as u32), &wakeups);
        }
        // Only the first completion woke its task; the others wait on the port.
        assert_eq!(wakeups.load(Ordering::SeqCst), 1);
        assert_eq!(
            counters.iter().map(|c| c.count()).collect::<Vec<_>>(),
            [1, 0, 0, 0, 0]
        );
        // Polling the woken one drains the port and wakes the rest.
        assert!(matches!(
            poll(&mut pending[0], &counters[0]),
            Poll::Ready(Ok(0))
        ));
        assert_eq!(
            counters.iter().map(|c| c.count()).collect::<Vec<_>>(),
            [1, 1, 1, 1, 1]
        );
        for (i, (c, w)) in pending.iter_mut().zip(&counters).enumerate().skip(1) {
            assert!(matches!(poll(c, w), Poll::Ready(Ok(v)) if v == i as u32));
        }
    }

    #[test]
    fn dropping_the_designated_completion_passes_the_batch_on() {
        let wakeups = AtomicU64::new(0);
        let (mut first, first_done) = pair::<u32>();
        let (mut second, second_done) = pair::<u32>();
        let (w1, w2) = (Arc::<Counter>::default(), Arc::<Counter>::default());
        assert!(poll(&mut first, &w1).is_pending());
        assert!(poll(&mut second, &w2).is_pending());
        first_done.complete(Ok(1), &wakeups);
        second_done.complete(Ok(2), &wakeups);
        assert_eq!((w1.count(), w2.count()), (1, 0));
        drop(first); // e.g. the request was cancelled in a select!
        assert_eq!(w2.count(), 1);
        assert!(matches!(poll(&mut second, &w2), Poll::Ready(Ok(2))));
        // The port is free again: the next completion wakes directly.
        let (mut third, third_done) = pair::<u32>();
        let w3 = Arc::<Counter>::default();
        assert!(poll(&mut third, &w3).is_pending());
        third_done.complete(Ok(3), &wakeups);
        assert_eq!((w3.count(), wakeups.load(Ordering::SeqCst)), (1, 2));
    }

    #[test]
    fn unpolled_and_abandoned_and_cancelled() {
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
