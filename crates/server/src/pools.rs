//! The thread pools of the running configuration (`thread_pool NAME threads=N max_queue=M`,
//! plus the implicit `default` one when `aio threads` names none).
//!
//! The master builds them at start and on each reload: a pool whose name, threads and
//! max_queue did not change is kept (its queue and counters with it); a changed or removed one
//! is retired on a thread of its own, which finishes the tasks still queued (they belong to
//! requests in flight) before the threads exit. Workers look pools up without a lock.

use std::collections::HashMap;
use std::sync::Arc;

use arc_swap::ArcSwap;
use shoal_io::pool::ThreadPool;

use crate::core::ThreadPoolConf;
use crate::log::Level;

type Pools = HashMap<String, (ThreadPoolConf, Arc<ThreadPool>)>;

fn registry() -> &'static ArcSwap<Pools> {
    static REGISTRY: std::sync::OnceLock<ArcSwap<Pools>> = std::sync::OnceLock::new();
    REGISTRY.get_or_init(|| ArcSwap::from_pointee(HashMap::new()))
}

/// The pool named `name`, if the running configuration has it.
pub fn get(name: &str) -> Option<Arc<ThreadPool>> {
    registry().load().get(name).map(|(_, p)| p.clone())
}

/// Makes `confs` the running pools. Fails (leaving the old ones) if a thread cannot start.
pub fn configure(confs: &[ThreadPoolConf]) -> Result<(), String> {
    let old = registry().load_full();
    let mut new: Pools = HashMap::new();
    for c in confs {
        match old.get(&c.name) {
            Some((oc, pool)) if oc == c => {
                new.insert(c.name.clone(), (c.clone(), pool.clone()));
            }
            _ => {
                let pool = ThreadPool::new(&c.name, c.threads, c.max_queue)
                    .map_err(|e| format!("thread pool \"{}\" could not start: {e}", c.name))?;
                new.insert(c.name.clone(), (c.clone(), Arc::new(pool)));
            }
        }
    }
    registry().store(Arc::new(new));
    // Pools no configuration names any more: dropped off the master thread, since dropping
    // one waits for its queued tasks.
    let current = registry().load();
    let retired: Vec<Arc<ThreadPool>> = old
        .iter()
        .filter(|(name, (c, _))| current.get(*name).is_none_or(|(now, _)| now != c))
        .map(|(_, (_, p))| p.clone())
        .collect();
    drop(old);
    if !retired.is_empty() {
        let _ = std::thread::Builder::new()
            .name("shoal-pool-retire".into())
            .spawn(move || drop(retired));
    }
    Ok(())
}

/// Logs each pool's figures at debug level and every task stuck for over a minute at warn
/// (called by the master periodically).
pub fn report() {
    for (name, (_, pool)) in registry().load().iter() {
        let s = pool.stats();
        crate::error_log!(
            Level::Debug,
            "thread pool \"{name}\": {} queued, {} busy, {} completed, {} overflows",
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
