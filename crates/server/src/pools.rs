//! The thread pools of the running configuration (`thread_pool NAME threads=N max_queue=M`,
//! plus the implicit `default` one when `aio threads` names none).
//!
//! As in nginx, where each worker process has its own pools, each worker thread has its own
//! instance of every pool: `threads` and `max_queue` are per worker, and one worker's tasks
//! never wait behind another's.
//!
//! The master builds them at start and on each reload: a pool whose name, threads and
//! max_queue (and the number of workers) did not change is kept, with its queue and counters;
//! a changed or removed one is retired on a thread of its own, which finishes the tasks still
//! queued (they belong to requests in flight) before the threads exit. Workers look pools up
//! without a lock.

use std::collections::HashMap;
use std::sync::Arc;

use arc_swap::ArcSwap;
use shoal_io::pool::ThreadPool;

use crate::core::ThreadPoolConf;
use crate::error::Error;
use crate::log::Level;

/// Per name: the configuration and one instance per worker.
type Pools = HashMap<String, (ThreadPoolConf, Vec<Arc<ThreadPool>>)>;

fn registry() -> &'static ArcSwap<Pools> {
    static REGISTRY: std::sync::OnceLock<ArcSwap<Pools>> = std::sync::OnceLock::new();
    REGISTRY.get_or_init(|| ArcSwap::from_pointee(HashMap::new()))
}

/// The calling worker's instance of the pool named `name`, if the running configuration has
/// it.
pub fn get(name: &str) -> Option<Arc<ThreadPool>> {
    let index = crate::worker::current_index();
    registry()
        .load()
        .get(name)
        .and_then(|(_, instances)| instances.get(index % instances.len().max(1)).cloned())
}

/// Makes `confs` the running pools, one instance of each per worker. Fails (leaving the old
/// ones) if a thread cannot start.
pub fn configure(confs: &[ThreadPoolConf], workers: usize) -> Result<(), Error> {
    let old = registry().load_full();
    let mut new: Pools = HashMap::new();
    for c in confs {
        match old.get(&c.name) {
            Some((oc, instances)) if oc == c && instances.len() == workers => {
                new.insert(c.name.clone(), (c.clone(), instances.clone()));
            }
            _ => {
                let mut instances = Vec::with_capacity(workers);
                for _ in 0..workers.max(1) {
                    let pool = ThreadPool::new(&c.name, c.threads, c.max_queue).map_err(|e| {
                        let msg = format!("thread pool \"{}\" could not start: {e}", c.name);
                        Error::io(e, msg)
                    })?;
                    instances.push(Arc::new(pool));
                }
                new.insert(c.name.clone(), (c.clone(), instances));
            }
        }
    }
    registry().store(Arc::new(new));
    // Instances no configuration uses any more: dropped off the master thread, since dropping
    // one waits for its queued tasks.
    let current = registry().load();
    let retired: Vec<Arc<ThreadPool>> = old
        .iter()
        .filter(|(name, (c, instances))| {
            current.get(*name).is_none_or(|(now, now_instances)| {
                now != c || now_instances.len() != instances.len()
            })
        })
        .flat_map(|(_, (_, p))| p.iter().cloned())
        .collect();
    drop(old);
    if !retired.is_empty() {
        let _ = std::thread::Builder::new()
            .name("pool-retire".into())
            .spawn(move || drop(retired));
    }
    Ok(())
}

/// Logs each pool instance's figures at debug level and every task stuck for over a minute
/// at warn (called by the master periodically).
pub fn report() {
    for (name, (_, instances)) in registry().load().iter() {
        for (worker, pool) in instances.iter().enumerate() {
            let s = pool.stats();
            crate::error_log!(
                Level::Debug,
                "thread pool \"{name}\" of worker {worker}: {} queued, {} busy, {} completed, {} overflows",
                s.waiting,
                s.busy,
                s.completed,
                s.overflows
            );
            for t in pool.stuck() {
                crate::error_log!(
                    Level::Warn,
                    "thread pool \"{name}\": a task has been running for {} s on {}",
                    t.running_for.as_secs(),
                    t.thread
                );
            }
        }
    }
}
