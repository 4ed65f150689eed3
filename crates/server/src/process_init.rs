//! What nginx's `ngx_worker_process_init` applies as a worker starts: `worker_priority`,
//! `worker_cpu_affinity`, `worker_rlimit_core` and `working_directory`; and the main and events
//! directives that tune what shoal's design has no use for (`pcre_jit`, `timer_resolution`,
//! `lock_file`, `epoll_events`, `worker_aio_requests`), read and checked as nginx reads them.
//!
//! shoal's workers are threads of one process: priority and affinity are per thread (Linux's
//! nice value and CPU mask are), set by each worker on itself whenever its configuration
//! changes; the core limit and the working directory belong to the process, set by the master
//! at start and on reload (nginx's new workers set them after a reload as well). A root master
//! (`user` as root, `root_master.rs`) sets them as root before it forks its child, which
//! inherits them; the child makes itself dumpable again after its change of user.

use std::path::PathBuf;

use shoal_conf::{Directive, Error};

use crate::conf::{
    directive_err, err, number_arg, set_once, time_arg, Args, Builder, Command, Ctx, Scope,
};
use crate::log::Level;

pub static DIRECTIVES: &[Command] = &[
    Command::new("worker_priority", Ctx::MAIN, Args::ONE, set_priority),
    Command::new(
        "worker_cpu_affinity",
        Ctx::MAIN,
        Args::ONE_OR_MORE,
        set_cpu_affinity,
    ),
    Command::new("worker_rlimit_core", Ctx::MAIN, Args::ONE, set_rlimit_core),
    Command::new(
        "working_directory",
        Ctx::MAIN,
        Args::ONE,
        set_working_directory,
    ),
    // shoal's regexes are compiled to automata once, when read (crates/pcre): there is no
    // separate JIT step to turn on or off.
    Command::new("pcre_jit", Ctx::MAIN, Args::Flag, set_pcre_jit),
    // nginx caches the time and updates it at most this often, to save gettimeofday() calls;
    // shoal reads the clock through the vDSO (no system call), once per event it handles.
    Command::new(
        "timer_resolution",
        Ctx::MAIN,
        Args::ONE,
        set_timer_resolution,
    ),
    // nginx on Linux locks with atomics in shared memory and never uses the file.
    Command::new("lock_file", Ctx::MAIN, Args::ONE, set_lock_file),
    // The size of epoll_wait()'s event list: the event loop's own (mio's) list.
    Command::new("epoll_events", Ctx::EVENTS, Args::ONE, set_events_number),
    // Linux native AIO's queue depth: shoal's `aio` is io_uring and thread pools.
    Command::new(
        "worker_aio_requests",
        Ctx::EVENTS,
        Args::ONE,
        set_events_number,
    ),
];

/// The largest CPU a mask may name (the kernel's `cpu_set_t`, as nginx's `CPU_SETSIZE`).
const CPU_SETSIZE: usize = libc::CPU_SETSIZE as usize;

/// The main context's process settings, as written.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ProcessConf {
    /// `worker_priority`: the workers' nice value.
    pub priority: Option<i32>,
    pub cpu_affinity: Option<CpuAffinity>,
    /// `worker_rlimit_core`: RLIMIT_CORE, in bytes.
    pub rlimit_core: Option<u64>,
    pub working_directory: Option<PathBuf>,
    /// The directives read with nothing to do (`pcre_jit`, `timer_resolution`, ...), kept so
    /// that a duplicate is refused as nginx refuses it.
    pub moot: Vec<String>,
}

impl ProcessConf {
    /// Core dumps are asked for: after it changes to its `user`, the process stays dumpable
    /// (the kernel clears that on a change of credentials; nginx's workers set it back always,
    /// shoal only when a core limit or directory says dumps are wanted, since a dumpable
    /// process may be traced by any other of the same user).
    pub fn wants_core_dumps(&self) -> bool {
        self.rlimit_core.is_some() || self.working_directory.is_some()
    }
}

/// `worker_cpu_affinity`: a CPU mask per worker (the last one for the workers past them), or
/// `auto`: worker N on the Nth CPU of a mask (of every CPU when none is given).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CpuAffinity {
    Masks(Vec<Vec<usize>>),
    Auto(Vec<usize>),
}

impl CpuAffinity {
    /// The CPUs worker `index` runs on (nginx's `ngx_get_cpu_affinity`); `None`: an empty
    /// mask, left alone.
    pub fn for_worker(&self, index: usize) -> Option<Vec<usize>> {
        match self {
            CpuAffinity::Masks(masks) => {
                let m = masks.get(index).or(masks.last())?;
                (!m.is_empty()).then(|| m.clone())
            }
            CpuAffinity::Auto(cpus) if cpus.is_empty() => None,
            CpuAffinity::Auto(cpus) => Some(vec![cpus[index % cpus.len()]]),
        }
    }
}

fn process(b: &mut Builder) -> &mut ProcessConf {
    &mut b.main.process
}

fn set_priority(b: &mut Builder, d: &Directive, _: &mut Scope<'_>) -> Result<(), Error> {
    let v = d.args[0].value.as_str();
    let (minus, digits) = match v.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, v.strip_prefix('+').unwrap_or(v)),
    };
    let n = crate::conf::parse_number(digits)
        .filter(|n| *n <= i32::MAX as u64)
        .ok_or_else(|| directive_err(d, "invalid number"))? as i32;
    set_once(&mut process(b).priority, if minus { -n } else { n }, d)
}

fn set_cpu_affinity(b: &mut Builder, d: &Directive, _: &mut Scope<'_>) -> Result<(), Error> {
    if process(b).cpu_affinity.is_some() {
        return Err(crate::conf::duplicate(d));
    }
    let args: Vec<&str> = d.args.iter().map(|a| a.value.as_str()).collect();
    let affinity = if args[0] == "auto" {
        match args.len() {
            1 => CpuAffinity::Auto((0..CPU_SETSIZE).collect()),
            2 => CpuAffinity::Auto(mask(d, args[1])?),
            _ => {
                return Err(err(
                    d,
                    "invalid number of arguments in \"worker_cpu_affinity\" directive",
                ))
            }
        }
    } else {
        let masks = args.iter().map(|a| mask(d, a)).collect::<Result<_, _>>()?;
        CpuAffinity::Masks(masks)
    };
    process(b).cpu_affinity = Some(affinity);
    Ok(())
}

/// A mask of `0` and `1`, the last character CPU 0: the CPUs it names, lowest first.
fn mask(d: &Directive, s: &str) -> Result<Vec<usize>, Error> {
    if s.len() > CPU_SETSIZE {
        return Err(err(
            d,
            format!("\"worker_cpu_affinity\" supports up to {CPU_SETSIZE} CPUs only"),
        ));
    }
    let mut cpus = Vec::new();
    for (cpu, c) in s.bytes().rev().enumerate() {
        match c {
            b'1' => cpus.push(cpu),
            b'0' => {}
            _ => {
                return Err(err(
                    d,
                    format!(
                        "invalid character \"{}\" in \"worker_cpu_affinity\"",
                        char::from(c)
                    ),
                ))
            }
        }
    }
    Ok(cpus)
}

fn set_rlimit_core(b: &mut Builder, d: &Directive, _: &mut Scope<'_>) -> Result<(), Error> {
    let n = crate::conf::parse_size(&d.args[0].value)
        .ok_or_else(|| directive_err(d, "invalid value"))?;
    set_once(&mut process(b).rlimit_core, n, d)
}

fn set_working_directory(b: &mut Builder, d: &Directive, _: &mut Scope<'_>) -> Result<(), Error> {
    let p = b.full_path(&d.args[0].value);
    set_once(&mut process(b).working_directory, p, d)
}

fn set_pcre_jit(b: &mut Builder, d: &Directive, _: &mut Scope<'_>) -> Result<(), Error> {
    moot(b, d)
}

fn set_timer_resolution(b: &mut Builder, d: &Directive, _: &mut Scope<'_>) -> Result<(), Error> {
    time_arg(d, 0)?;
    moot(b, d)
}

fn set_lock_file(b: &mut Builder, d: &Directive, _: &mut Scope<'_>) -> Result<(), Error> {
    moot(b, d)
}

fn set_events_number(b: &mut Builder, d: &Directive, _: &mut Scope<'_>) -> Result<(), Error> {
    number_arg(d, 0)?;
    moot(b, d)
}

/// A directive read and checked, with nothing to do: once only, as nginx's setters allow.
fn moot(b: &mut Builder, d: &Directive) -> Result<(), Error> {
    let seen = &mut process(b).moot;
    if seen.contains(&d.name) {
        return Err(crate::conf::duplicate(d));
    }
    seen.push(d.name.clone());
    Ok(())
}

/// The master's part, at start and on reload: the core limit and the working directory.
/// A directory that cannot be entered is an error at start; on reload the old one stays.
pub fn apply_to_process(conf: &ProcessConf, before: Option<&ProcessConf>) -> Result<(), String> {
    if let Some(n) = conf.rlimit_core {
        if before.and_then(|b| b.rlimit_core) != Some(n) {
            let lim = libc::rlimit {
                rlim_cur: n as libc::rlim_t,
                rlim_max: n as libc::rlim_t,
            };
            // SAFETY: a valid rlimit struct.
            if unsafe { libc::setrlimit(libc::RLIMIT_CORE, &lim) } != 0 {
                let e = crate::error::Error::failed(
                    format_args!("setrlimit(RLIMIT_CORE, {n})"),
                    std::io::Error::last_os_error(),
                );
                crate::error_log!(Level::Alert, "{e}");
            }
        }
    }
    if let Some(dir) = &conf.working_directory {
        if before.and_then(|b| b.working_directory.as_ref()) != Some(dir) {
            std::env::set_current_dir(dir).map_err(|e| {
                crate::error::Error::failed(format_args!("chdir(\"{}\")", dir.display()), e)
                    .to_string()
            })?;
        }
    }
    Ok(())
}

/// After the change to `user`: dumpable again when core dumps are wanted (see
/// [`ProcessConf::wants_core_dumps`]).
pub fn keep_dumpable(conf: &ProcessConf) {
    // SAFETY: a plain prctl with integer arguments.
    if conf.wants_core_dumps() && unsafe { libc::prctl(libc::PR_SET_DUMPABLE, 1, 0, 0, 0) } != 0 {
        let e =
            crate::error::Error::failed("prctl(PR_SET_DUMPABLE)", std::io::Error::last_os_error());
        crate::error_log!(Level::Alert, "{e}");
    }
}

/// A worker's part, on its own thread whenever its configuration changes: its nice value and
/// its CPUs (each logged at `notice` as nginx does).
pub fn apply_to_worker(conf: &ProcessConf, before: Option<&ProcessConf>, index: usize) {
    // A reload that drops a line puts the worker back where the process is (nginx's new
    // workers would start there).
    let had_priority = before.and_then(|b| b.priority);
    if conf.priority != had_priority {
        // SAFETY: getpriority() on the process (its main thread, the master's own value).
        let n = conf.priority.unwrap_or_else(|| unsafe {
            libc::getpriority(libc::PRIO_PROCESS, libc::getpid() as libc::id_t)
        });
        // SAFETY: gettid() has no arguments; setpriority() on this thread's id.
        let r = unsafe {
            let tid = libc::gettid();
            libc::setpriority(libc::PRIO_PROCESS, tid as libc::id_t, n)
        };
        if r != 0 {
            let e = crate::error::Error::failed(
                format_args!("setpriority({n})"),
                std::io::Error::last_os_error(),
            );
            crate::error_log!(Level::Alert, "{e}");
        }
    }
    let cpus = conf.cpu_affinity.as_ref().and_then(|a| a.for_worker(index));
    let had = before
        .and_then(|b| b.cpu_affinity.as_ref())
        .and_then(|a| a.for_worker(index));
    if cpus == had {
        return;
    }
    match cpus {
        Some(cpus) => set_affinity(&cpus),
        None => {
            // SAFETY: an all-zero cpu_set_t is valid; the process's main thread (the
            // master, whose mask is never set) is read, then this thread takes its mask.
            unsafe {
                let mut set: libc::cpu_set_t = std::mem::zeroed();
                let size = std::mem::size_of::<libc::cpu_set_t>();
                if libc::sched_getaffinity(libc::getpid(), size, &mut set) == 0 {
                    libc::sched_setaffinity(0, size, &set);
                }
            }
        }
    }
}

fn set_affinity(cpus: &[usize]) {
    // SAFETY: an all-zero cpu_set_t is a valid empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    for &cpu in cpus {
        crate::error_log!(Level::Notice, "sched_setaffinity(): using cpu #{cpu}");
        // SAFETY: `cpu` < CPU_SETSIZE (the masks are read no longer than that).
        unsafe { libc::CPU_SET(cpu, &mut set) };
    }
    // SAFETY: `set` is a valid cpu_set_t of the size given; 0 is the calling thread.
    if unsafe { libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) } != 0 {
        let e = crate::error::Error::failed("sched_setaffinity()", std::io::Error::last_os_error());
        crate::error_log!(Level::Alert, "{e}");
    }
}

/// `worker_rlimit_nofile`, as nginx's workers set it when they start (a reload's too): a
/// failure is the error log's alert, not the terminal's (the hard limit of a container).
pub fn set_rlimit_nofile(limit: Option<u64>) {
    let Some(n) = limit else { return };
    let lim = libc::rlimit {
        rlim_cur: n as libc::rlim_t,
        rlim_max: n as libc::rlim_t,
    };
    // SAFETY: a valid rlimit struct.
    if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &lim) } != 0 {
        let e = std::io::Error::last_os_error();
        crate::error_log!(
            crate::log::Level::Alert,
            "setrlimit(RLIMIT_NOFILE, {n}) failed {}",
            shoal_conf::os_error(&e)
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn masks_name_cpus_from_the_right_and_the_last_serves_the_rest() {
        let a = CpuAffinity::Masks(vec![vec![0], vec![1, 3]]);
        assert_eq!(a.for_worker(0), Some(vec![0]));
        assert_eq!(a.for_worker(1), Some(vec![1, 3]));
        assert_eq!(a.for_worker(5), Some(vec![1, 3]));
        assert_eq!(CpuAffinity::Masks(vec![vec![]]).for_worker(0), None);
    }

    #[test]
    fn auto_takes_the_nth_cpu_of_its_mask_round_and_round() {
        let a = CpuAffinity::Auto(vec![2, 5]);
        assert_eq!(a.for_worker(0), Some(vec![2]));
        assert_eq!(a.for_worker(1), Some(vec![5]));
        assert_eq!(a.for_worker(2), Some(vec![2]));
        assert_eq!(CpuAffinity::Auto(vec![]).for_worker(0), None);
    }
}
