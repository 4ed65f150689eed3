//! The main context: `worker_processes`, `worker_rlimit_nofile`, `worker_shutdown_timeout`,
//! `pid`, `daemon`, `master_process`, `user`, `env`, `thread_pool`, `load_module`, and the
//! `events` / `http` blocks. Their runtime effect lives in `master.rs`; this module only reads
//! them.

use std::path::PathBuf;
use std::time::Duration;

use shoal_conf::{Directive, Error};

use crate::conf::{
    directive_err, err, flag_arg, number_arg, set_once, time_arg, Args, Builder, Command, Ctx,
    Scope,
};
use crate::event::EventsConf;
use crate::http::HttpConf;

pub static DIRECTIVES: &[Command] = &[
    Command::new(
        "worker_processes",
        Ctx::MAIN,
        Args::ONE,
        set_worker_processes,
    ),
    Command::new(
        "worker_rlimit_nofile",
        Ctx::MAIN,
        Args::ONE,
        set_rlimit_nofile,
    ),
    Command::new(
        "worker_shutdown_timeout",
        Ctx::MAIN,
        Args::ONE,
        set_shutdown_timeout,
    ),
    Command::new("pid", Ctx::MAIN, Args::ONE, set_pid),
    Command::new("daemon", Ctx::MAIN, Args::Flag, set_daemon),
    Command::new("master_process", Ctx::MAIN, Args::Flag, set_master_process),
    Command::new("user", Ctx::MAIN, Args::Take(1, 2), set_user),
    Command::new("env", Ctx::MAIN, Args::ONE, set_env),
    Command::new("load_module", Ctx::MAIN, Args::ONE, set_load_module),
    Command::new("thread_pool", Ctx::MAIN, Args::Take(2, 3), set_thread_pool),
    Command::block("events", Ctx::MAIN, Args::NONE, set_events),
    Command::block("http", Ctx::MAIN, Args::NONE, set_http),
];

/// nginx's default pid file, relative to the prefix.
pub const DEFAULT_PID: &str = "logs/shoal.pid";

/// The main context, as written (unset = nginx's default, applied by the accessors).
#[derive(Clone, Debug, Default)]
pub struct MainConf {
    pub worker_processes: Option<usize>,
    pub worker_rlimit_nofile: Option<u64>,
    pub worker_shutdown_timeout: Option<Duration>,
    pub pid: Option<PathBuf>,
    pub daemon: Option<bool>,
    pub master_process: Option<bool>,
    /// `user USER [GROUP]`: whom the workers run as when started as root; as root without the
    /// directive, nginx's default (`nobody`, [`default_user`]). `None` when not root.
    pub user: Option<(String, Option<String>)>,
    pub env: Vec<String>,
    pub thread_pools: Vec<ThreadPoolConf>,
    /// Where the first `proxy_bind ... transparent` (http or stream) is: the process keeps
    /// `CAP_NET_RAW` when it drops to `user` (nginx's `ccf->transparent`).
    pub transparent: Option<shoal_conf::Span>,
    /// `worker_priority`, `worker_cpu_affinity`, `worker_rlimit_core`, `working_directory`
    /// (`process_init.rs`).
    pub process: crate::process_init::ProcessConf,
}

/// `thread_pool NAME threads=N [max_queue=M]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ThreadPoolConf {
    pub name: String,
    pub threads: usize,
    pub max_queue: usize,
}

impl ThreadPoolConf {
    /// The pool nginx creates when `aio threads` names none: 32 threads, 65536 queued tasks.
    pub fn default_pool() -> ThreadPoolConf {
        ThreadPoolConf {
            name: "default".into(),
            threads: 32,
            max_queue: 65536,
        }
    }
}

impl MainConf {
    /// `worker_processes` (default 1; `auto` was resolved to the number of cores when read).
    pub fn workers(&self) -> usize {
        self.worker_processes.unwrap_or(1)
    }

    /// `daemon` (default on, as nginx).
    pub fn daemon(&self) -> bool {
        self.daemon.unwrap_or(true)
    }

    /// Whether shoal runs as nginx's two processes (`root_master.rs`): a root master and a
    /// serving child that changes to `user`. Not when `user` is root (`user root;`: nothing
    /// would be dropped, so one process serves as root), nor with `master_process off` (nginx's
    /// single process ignores `user`); `user` is `None` when not started as root.
    pub fn root_master(&self) -> bool {
        self.master_process != Some(false)
            && self.user.as_ref().is_some_and(|(user, group)| {
                crate::privileges::lookup(user, group.as_deref()).is_ok_and(|(uid, _)| uid != 0)
            })
    }
}

/// nginx's `user` when the directive is absent and the process runs as root (its
/// `ngx_core_module_init_conf`): `nobody`, and the group its configure script found, `nobody`
/// where that group exists, else `nogroup` (Debian has no group `nobody`).
pub fn default_user(b: &mut Builder) -> Result<(), Error> {
    if b.main.user.is_some()
        || !crate::privileges::is_root()
        || crate::privileges::dropped_to().is_some()
    {
        return Ok(());
    }
    let group = if crate::privileges::lookup("nobody", Some("nobody")).is_ok() {
        "nobody"
    } else {
        "nogroup"
    };
    crate::privileges::lookup("nobody", Some(group))
        .map_err(|m| Error::new(m.to_string(), None))?;
    b.main.user = Some(("nobody".into(), Some(group.into())));
    Ok(())
}

/// The number of cores this process may run on (`worker_processes auto`): the CPUs of its
/// affinity mask, as `nproc` counts them. Unlike `available_parallelism`, a cgroup CPU quota is
/// not counted, as nginx does not count it.
pub fn ncpu() -> usize {
    // SAFETY: an all-zero cpu_set_t is a valid empty set for sched_getaffinity to fill.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: `set` is valid for writes of the size passed.
    let r = unsafe { libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) };
    if r == 0 {
        // SAFETY: `set` was filled by sched_getaffinity.
        let n = unsafe { libc::CPU_COUNT(&set) };
        if n > 0 {
            return n as usize;
        }
    }
    std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
}

fn set_worker_processes(b: &mut Builder, d: &Directive, _: &mut Scope<'_>) -> Result<(), Error> {
    let v = &d.args[0].value;
    let n = if v == "auto" {
        ncpu()
    } else {
        match crate::conf::parse_number(v) {
            Some(n) if n > 0 && n <= 1024 => n as usize,
            _ => return Err(directive_err(d, "invalid value")),
        }
    };
    set_once(&mut b.main.worker_processes, n, d)
}

fn set_rlimit_nofile(b: &mut Builder, d: &Directive, _: &mut Scope<'_>) -> Result<(), Error> {
    let n = number_arg(d, 0)?;
    set_once(&mut b.main.worker_rlimit_nofile, n, d)
}

fn set_shutdown_timeout(b: &mut Builder, d: &Directive, _: &mut Scope<'_>) -> Result<(), Error> {
    let t = time_arg(d, 0)?;
    set_once(&mut b.main.worker_shutdown_timeout, t, d)
}

fn set_pid(b: &mut Builder, d: &Directive, _: &mut Scope<'_>) -> Result<(), Error> {
    let p = b.full_path(&d.args[0].value);
    set_once(&mut b.main.pid, p, d)
}

fn set_daemon(b: &mut Builder, d: &Directive, _: &mut Scope<'_>) -> Result<(), Error> {
    set_once(&mut b.main.daemon, flag_arg(d), d)
}

fn set_master_process(b: &mut Builder, d: &Directive, _: &mut Scope<'_>) -> Result<(), Error> {
    set_once(&mut b.main.master_process, flag_arg(d), d)
}

fn set_user(b: &mut Builder, d: &Directive, _: &mut Scope<'_>) -> Result<(), Error> {
    if b.main.user.is_some() {
        return Err(crate::conf::duplicate(d));
    }
    let user = d.args[0].value.clone();
    // nginx: "If group is omitted, a group whose name equals that of user is used" (so
    // `user nobody;` fails on Debian, which has no group `nobody`).
    let group = Some(
        d.args
            .get(1)
            .map_or_else(|| user.clone(), |a| a.value.clone()),
    );
    // A reload of a process that already became its `user`: the same line is what runs; another
    // one needs a restart.
    if let Some(now) = crate::privileges::dropped_to() {
        if now.0 != user || now.1 != group {
            b.warn(
                format!(
                    "the process runs as \"{}\" since it started: changing \"user\" needs a \
                     restart, ignored",
                    now.0
                ),
                &d.span,
            );
        }
        return Ok(());
    }
    if !crate::privileges::is_root() {
        b.warn(
            "the \"user\" directive makes sense only if the master process runs with \
             super-user privileges, ignored",
            &d.span,
        );
        return Ok(());
    }
    crate::privileges::lookup(&user, group.as_deref()).map_err(|m| err(d, m))?;
    b.main.user = Some((user, group));
    Ok(())
}

fn set_env(b: &mut Builder, d: &Directive, _: &mut Scope<'_>) -> Result<(), Error> {
    b.main.env.push(d.args[0].value.clone());
    Ok(())
}

/// `load_module FILE`: nginx loads a dynamic module; shoal's modules are built in, so the line
/// (Debian's `modules-enabled/*.conf` write one per installed `libnginx-mod-*` package) loads
/// nothing. A module shoal lacks brings nothing with it either: its directives are refused by
/// name where they are used.
fn set_load_module(_: &mut Builder, _: &Directive, _: &mut Scope<'_>) -> Result<(), Error> {
    Ok(())
}

fn set_thread_pool(b: &mut Builder, d: &Directive, _: &mut Scope<'_>) -> Result<(), Error> {
    let name = d.args[0].value.clone();
    let mut threads = None;
    let mut max_queue = 65536;
    for a in &d.args[1..] {
        let v = &a.value;
        if let Some(n) = v.strip_prefix("threads=") {
            match crate::conf::parse_number(n) {
                Some(n) if n > 0 => threads = Some(n as usize),
                _ => return Err(err(d, format!("invalid threads value \"{v}\""))),
            }
        } else if let Some(n) = v.strip_prefix("max_queue=") {
            match crate::conf::parse_number(n) {
                Some(n) => max_queue = n as usize,
                None => return Err(err(d, format!("invalid max_queue value \"{v}\""))),
            }
        } else {
            return Err(err(d, format!("invalid parameter \"{v}\"")));
        }
    }
    let Some(threads) = threads else {
        return Err(err(d, "\"thread_pool\" must have \"threads\" parameter"));
    };
    if b.main.thread_pools.iter().any(|p| p.name == name) {
        return Err(err(d, format!("duplicate thread pool \"{name}\"")));
    }
    b.main.thread_pools.push(ThreadPoolConf {
        name,
        threads,
        max_queue,
    });
    Ok(())
}

fn set_events(b: &mut Builder, d: &Directive, _: &mut Scope<'_>) -> Result<(), Error> {
    if b.events.is_some() {
        return Err(crate::conf::duplicate(d));
    }
    let mut ev = EventsConf::default();
    let body = d.block.as_deref().unwrap_or_default();
    b.walk(body, Ctx::EVENTS, &mut Scope::Events(&mut ev))?;
    b.events = Some(ev);
    Ok(())
}

fn set_http(b: &mut Builder, d: &Directive, _: &mut Scope<'_>) -> Result<(), Error> {
    if b.http.is_some() {
        return Err(crate::conf::duplicate(d));
    }
    let mut http = HttpConf::default();
    let body = d.block.as_deref().unwrap_or_default();
    b.walk(body, Ctx::HTTP, &mut Scope::Http(&mut http))?;
    b.http = Some(http);
    Ok(())
}
