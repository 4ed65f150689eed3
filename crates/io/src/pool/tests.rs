//! Pool tests: real threads, gates we open ourselves, no timing assertions.

use super::*;
use std::future::Future;
use std::rc::Rc;
use std::sync::mpsc;

/// A door tasks wait at until the test opens it.
#[derive(Default)]
struct Gate {
    open: Mutex<bool>,
    cond: Condvar,
}

impl Gate {
    fn wait(&self) {
        let mut open = self.open.lock().unwrap();
        while !*open {
            open = self.cond.wait(open).unwrap();
        }
    }
    fn open(&self) {
        *self.open.lock().unwrap() = true;
        self.cond.notify_all();
    }
}

/// Posts `n` tasks that report when they start and then wait at `gate`; returns once all `n`
/// are running (so they occupy `n` threads).
fn occupy(pool: &ThreadPool, n: usize, gate: &Arc<Gate>) -> Vec<Completion<()>> {
    let (started_tx, started) = mpsc::channel();
    let blocked = (0..n)
        .map(|_| {
            let (gate, started_tx) = (gate.clone(), started_tx.clone());
            pool.post(move || {
                started_tx.send(()).unwrap();
                gate.wait();
            })
            .expect("room for the blocking tasks")
        })
        .collect();
    for _ in 0..n {
        started.recv().unwrap();
    }
    blocked
}

#[tokio::test]
async fn tasks_run_on_named_threads_and_complete_on_the_poster() {
    let pool = ThreadPool::new("names", 3, 16).unwrap();
    let poster = thread::current().id();
    // The tasks wait until every completion has been polled once, so none can finish before
    // its poster waits for it and at least one wake-up must cross threads.
    let gate = Arc::new(Gate::default());
    let mut completions = Vec::new();
    for i in 0..10u64 {
        let gate = gate.clone();
        completions.push(
            pool.post(move || {
                gate.wait();
                (i * i, thread::current().name().unwrap().to_owned())
            })
            .unwrap(),
        );
    }
    for c in &mut completions {
        let first = std::future::poll_fn(|cx| {
            std::task::Poll::Ready(std::pin::Pin::new(&mut *c).poll(cx).is_pending())
        });
        assert!(first.await, "a gated task cannot have finished");
    }
    gate.open();
    for (i, c) in completions.into_iter().enumerate() {
        let (square, name) = c.await.unwrap();
        assert_eq!(square, (i * i) as u64);
        assert!(name.starts_with("names-"), "{name}");
        assert_eq!(thread::current().id(), poster);
    }
    let stats = pool.stats();
    assert_eq!(
        (stats.completed, stats.busy, stats.queued, stats.overflows),
        (10, 0, 0, 0)
    );
    assert!(stats.wakeups >= 1 && stats.wakeups <= 10, "{stats:?}");
}

#[test]
fn completions_work_in_not_send_tasks() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let local = tokio::task::LocalSet::new();
    let pool = Arc::new(ThreadPool::new("local", 2, 64).unwrap());
    let total = local.block_on(&rt, async {
        let handles: Vec<_> = (0..20u32)
            .map(|i| {
                let pool = pool.clone();
                tokio::task::spawn_local(async move {
                    let here = Rc::new(i); // !Send, held across the await
                    let doubled = pool.post(move || i * 2).unwrap().await.unwrap();
                    *here + doubled
                })
            })
            .collect();
        let mut total = 0;
        for h in handles {
            total += h.await.unwrap();
        }
        total
    });
    assert_eq!(total, (0..20).map(|i| i * 3).sum::<u32>());
    assert_eq!(pool.stats().completed, 20);
}

#[tokio::test]
async fn a_full_queue_refuses_with_nginx_words() {
    let pool = ThreadPool::new("blocked", 2, 3).unwrap();
    let gate = Arc::new(Gate::default());
    let running = occupy(&pool, 2, &gate);
    let waiting: Vec<_> = (0..3)
        .map(|i| pool.post(move || i).expect("max_queue=3 lets 3 wait"))
        .collect();
    let stats = pool.stats();
    assert_eq!((stats.busy, stats.queued, stats.waiting), (2, 3, 3));

    let err = pool.post(|| 99).map(|_| ()).unwrap_err();
    assert_eq!(
        err.to_string(),
        "thread pool \"blocked\" queue overflow: 3 tasks waiting"
    );
    assert_eq!(
        err,
        Overflow {
            pool: "blocked".into(),
            waiting: 3
        }
    );
    let io_err = io::Error::from(err);
    assert_eq!(Overflow::from_io(&io_err).map(|o| o.waiting), Some(3));
    assert_eq!(pool.stats().overflows, 1);

    gate.open();
    for c in running {
        c.await.unwrap();
    }
    for (i, c) in waiting.into_iter().enumerate() {
        assert_eq!(c.await.unwrap(), i);
    }
    let stats = pool.stats();
    assert_eq!(
        (stats.completed, stats.busy, stats.queued, stats.overflows),
        (5, 0, 0, 1)
    );
    // Room again.
    assert_eq!(pool.post(|| 7).unwrap().await.unwrap(), 7);
}

#[tokio::test]
async fn max_queue_zero_accepts_one_task_per_idle_thread() {
    let pool = ThreadPool::new("zero", 3, 0).unwrap();
    let gate = Arc::new(Gate::default());
    // Accepted without waiting for the threads to take them: each has an idle thread.
    let accepted: Vec<_> = (0..3)
        .map(|_| {
            let gate = gate.clone();
            pool.post(move || gate.wait())
                .expect("an idle thread for each")
        })
        .collect();
    let err = pool.post(|| ()).map(|_| ()).unwrap_err();
    assert_eq!(
        err.to_string(),
        "thread pool \"zero\" queue overflow: 0 tasks waiting"
    );
    gate.open();
    for c in accepted {
        c.await.unwrap();
    }
    // All three threads are idle again (busy falls before a result is delivered).
    let gate = Arc::new(Gate::default());
    let again = occupy(&pool, 3, &gate);
    assert!(pool.post(|| ()).is_err());
    gate.open();
    for c in again {
        c.await.unwrap();
    }
    assert_eq!(pool.stats().overflows, 2);
}

#[tokio::test]
async fn a_panicking_task_errs_its_poster_and_spares_the_thread() {
    let pool = ThreadPool::new("panics", 1, 4).unwrap();
    let before = pool.post(|| thread::current().id()).unwrap().await.unwrap();
    let err = pool
        .post(|| -> u8 { panic!("boom") })
        .unwrap()
        .await
        .unwrap_err();
    assert_eq!(err, TaskError::Panicked("boom".into()));
    assert_eq!(err.to_string(), "thread pool task panicked: boom");
    let err = pool
        .post(|| -> u8 { panic!("{}", String::from("formatted")) })
        .unwrap()
        .await;
    assert_eq!(err, Err(TaskError::Panicked("formatted".into())));
    // The same (only) thread still serves.
    assert_eq!(
        pool.post(|| thread::current().id()).unwrap().await.unwrap(),
        before
    );
    let stats = pool.stats();
    assert_eq!((stats.completed, stats.panicked, stats.busy), (4, 2, 0));
}

#[tokio::test]
async fn a_long_task_is_reported_stuck() {
    let pool = ThreadPool::builder("slow")
        .threads(2)
        .max_queue(4)
        .stuck_threshold(Duration::from_millis(100))
        .build()
        .unwrap();
    let patient = ThreadPool::new("patient", 1, 4).unwrap(); // threshold: a minute
    let gate = Arc::new(Gate::default());
    let running = occupy(&pool, 1, &gate);
    let running_patient = occupy(&patient, 1, &gate);
    // Waiting for the threshold to pass is the point of the test; nothing asserts how fast.
    let mut stuck = pool.stuck();
    for _ in 0..3000 {
        if !stuck.is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
        stuck = pool.stuck();
    }
    assert_eq!(stuck.len(), 1, "{stuck:?}");
    assert!(stuck[0].thread.starts_with("slow-"), "{stuck:?}");
    assert!(stuck[0].running_for > Duration::from_millis(100));
    assert!(patient.stuck().is_empty());
    gate.open();
    for c in running.into_iter().chain(running_patient) {
        c.await.unwrap();
    }
    // The result reaches us a moment before the pool thread clears its "running since" mark:
    // what must hold is that the task stops being reported once done.
    let mut still = pool.stuck();
    for _ in 0..500 {
        if still.is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
        still = pool.stuck();
    }
    assert!(still.is_empty(), "{still:?}");
}

#[test]
fn drop_drains_the_queue_then_joins() {
    let pool = ThreadPool::new("drain", 1, 100).unwrap();
    let gate = Arc::new(Gate::default());
    let first = occupy(&pool, 1, &gate);
    let ran = Arc::new(AtomicUsize::new(0));
    let queued: Vec<_> = (0..50)
        .map(|i| {
            let ran = ran.clone();
            pool.post(move || {
                ran.fetch_add(1, Ordering::SeqCst);
                i
            })
            .unwrap()
        })
        .collect();
    let opener = {
        let gate = gate.clone();
        thread::spawn(move || gate.open())
    };
    drop(pool); // blocks until the gate opens and all 50 queued tasks ran
    assert_eq!(ran.load(Ordering::SeqCst), 50);
    opener.join().unwrap();
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    rt.block_on(async {
        for c in first {
            c.await.unwrap();
        }
        for (i, c) in queued.into_iter().enumerate() {
            assert_eq!(c.await.unwrap(), i);
        }
    });
}

#[test]
fn zero_threads_is_refused_and_defaults_are_nginx_ones() {
    assert_eq!(
        ThreadPool::new("none", 0, 1).unwrap_err().kind(),
        io::ErrorKind::InvalidInput
    );
    let pool = ThreadPool::default_pool().unwrap();
    let stats = pool.stats();
    assert_eq!(
        (&*stats.name, stats.threads, stats.max_queue),
        ("default", 32, 65536)
    );
}

#[tokio::test]
async fn dropped_completions_do_not_strand_the_others() {
    // Many posts, half of the completions dropped at random points: every kept one resolves.
    let pool = ThreadPool::new("dropped", 4, 10_000).unwrap();
    for round in 0..20 {
        let mut kept = Vec::new();
        for i in 0..200u32 {
            let c = pool.post(move || i).unwrap();
            if (i + round) % 2 == 0 {
                kept.push((i, c));
            }
        }
        for (i, c) in kept {
            assert_eq!(c.await.unwrap(), i);
        }
    }
}

#[tokio::test]
async fn a_completion_left_unpolled_does_not_delay_others() {
    // One thread: X completes before Y. A polls X's completion once, then awaits only a signal
    // that B sends after Y's result arrived: B must not wait for A to poll X again.
    let pool = Arc::new(ThreadPool::new("unpolled", 1, 8).unwrap());
    let gate = Arc::new(Gate::default());
    let (signal, signalled) = tokio::sync::oneshot::channel::<()>();
    let x = {
        let gate = gate.clone();
        pool.post(move || gate.wait()).unwrap()
    };
    let a = tokio::spawn(async move {
        let mut x = x;
        std::future::poll_fn(|cx| {
            assert!(std::pin::Pin::new(&mut x).poll(cx).is_pending());
            std::task::Poll::Ready(())
        })
        .await;
        signalled.await.unwrap();
        x.await.unwrap();
    });
    let y = pool.post(|| 42).unwrap();
    let b = tokio::spawn(async move {
        let v = y.await.unwrap();
        signal.send(()).unwrap();
        v
    });
    tokio::task::yield_now().await; // let A register its waker
    gate.open();
    assert_eq!(b.await.unwrap(), 42);
    a.await.unwrap();
}

/// CPU time of the calling thread (utime + stime from /proc/thread-self/stat), in clock ticks.
fn thread_cpu_ticks() -> u64 {
    let stat = std::fs::read_to_string("/proc/thread-self/stat").unwrap();
    // Fields after the parenthesised name: state is field 3, utime 14, stime 15.
    let after = &stat[stat.rfind(')').unwrap() + 2..];
    let fields: Vec<&str> = after.split(' ').collect();
    fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap()
}

/// Batching vs a tokio oneshot per task, in bursts of 64 tiny tasks: wall time and the posting
/// worker's own CPU time per task. Prints, asserts nothing about time:
/// `cargo test -p shoal-io --lib -- --ignored --nocapture completion_cost`.
#[test]
#[ignore]
fn completion_cost() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let pool = ThreadPool::new("bench", 4, 100_000).unwrap();
    let (bursts, burst) = (4_000, 64);
    let n = (bursts * burst) as u32;
    for round in 0..3 {
        let (t, cpu) = (Instant::now(), thread_cpu_ticks());
        let before = pool.stats();
        rt.block_on(async {
            for _ in 0..bursts {
                let cs: Vec<_> = (0..burst).map(|i| pool.post(move || i).unwrap()).collect();
                for c in cs {
                    c.await.unwrap();
                }
            }
        });
        let (batched, batched_cpu) = (
            t.elapsed() / n,
            (thread_cpu_ticks() - cpu) as f64 * 1e4 / n as f64,
        );
        let after = pool.stats();
        let (t, cpu) = (Instant::now(), thread_cpu_ticks());
        rt.block_on(async {
            for _ in 0..bursts {
                let rxs: Vec<_> = (0..burst)
                    .map(|i| {
                        let (tx, rx) = tokio::sync::oneshot::channel();
                        drop(pool.post(move || {
                            let _ = tx.send(i);
                        }));
                        rx
                    })
                    .collect();
                for rx in rxs {
                    rx.await.unwrap();
                }
            }
        });
        let (oneshot, oneshot_cpu) = (
            t.elapsed() / n,
            (thread_cpu_ticks() - cpu) as f64 * 1e4 / n as f64,
        );
        println!(
            "round {round}: batched {batched:?}/task, worker CPU {batched_cpu:.2} µs/task, {} wake-ups for {} \
             tasks; oneshot {oneshot:?}/task, worker CPU {oneshot_cpu:.2} µs/task",
            after.wakeups - before.wakeups,
            after.completed - before.completed,
        );
    }
}
