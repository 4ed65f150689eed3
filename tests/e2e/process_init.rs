//! What each worker sets up as it starts, as nginx's `ngx_worker_process_init`:
//! `worker_priority` and `worker_cpu_affinity` on the worker threads (the master's own stays as
//! it was), `worker_rlimit_core` and `working_directory` on the process; all of them again on
//! reload; a working directory that cannot be entered refused at start and kept on reload. And
//! the tuning directives shoal has no use for (`pcre_jit`, `timer_resolution`, `lock_file`,
//! `epoll_events`, `worker_aio_requests`) accepted and checked as nginx checks them.

use std::fs;

use crate::common::{conf_with, free_port, run_str, Prefix, Shoal};

/// One line of /proc/PID/task/TID/status, or of /proc/PID/limits.
fn proc_field(path: &str, key: &str) -> String {
    let text = fs::read_to_string(path).unwrap_or_default();
    text.lines()
        .find(|l| l.starts_with(key))
        .map(|l| l[key.len()..].trim().to_string())
        .unwrap_or_default()
}

/// (thread name, nice value, allowed CPUs) of each thread of `pid`.
fn threads(pid: i32) -> Vec<(String, i64, String)> {
    let mut out = Vec::new();
    for t in fs::read_dir(format!("/proc/{pid}/task")).unwrap().flatten() {
        let dir = t.path().display().to_string();
        let name = fs::read_to_string(format!("{dir}/comm")).unwrap_or_default();
        let stat = fs::read_to_string(format!("{dir}/stat")).unwrap_or_default();
        // The fields after the command's closing parenthesis: nice is the 19th of the line.
        let after = &stat[stat.rfind(')').unwrap_or(0) + 2..];
        let nice = after
            .split(' ')
            .nth(16)
            .and_then(|n| n.parse().ok())
            .unwrap_or(99);
        let cpus = proc_field(&format!("{dir}/status"), "Cpus_allowed_list:");
        out.push((name.trim().to_string(), nice, cpus));
    }
    out.sort();
    out
}

fn workers(pid: i32) -> Vec<(String, i64, String)> {
    threads(pid)
        .into_iter()
        .filter(|t| t.0.starts_with("shoal-worker-"))
        .collect()
}

fn cpus_online() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

#[test]
fn worker_threads_take_their_priority_and_cpu_and_the_process_its_core_limit_and_directory() {
    let port = free_port();
    let prefix = Prefix::new();
    fs::create_dir(prefix.join("wd")).unwrap();
    fs::create_dir(prefix.join("wd2")).unwrap();
    let n = cpus_online().min(2);
    let main = |prio: i32, wd: &str| {
        format!(
            "worker_processes {n};\nworker_cpu_affinity auto;\nworker_priority {prio};\n\
             worker_rlimit_core 100m;\nworking_directory {wd};\n"
        )
    };
    let s = Shoal::start_in(prefix, &conf_with(port, &main(5, "wd"), ""), port, &[]);
    // The master binds the sockets; each worker sets itself up as it takes its first command.
    let ws = crate::common::wait_for("the workers set up", || {
        let ws = workers(s.pid);
        (ws.len() == n && ws.iter().all(|w| w.1 == 5)).then_some(ws)
    });
    for (i, w) in ws.iter().enumerate() {
        assert_eq!(w.2, i.to_string(), "worker {i} on CPU {i}: {ws:?}");
        s.wait_log(&format!("sched_setaffinity(): using cpu #{i}"), 1);
    }
    let master = threads(s.pid).into_iter().find(|t| t.0 == "shoal").unwrap();
    assert_eq!(master.1, 0, "the master's nice value stays");
    let cwd = fs::read_link(format!("/proc/{}/cwd", s.pid)).unwrap();
    assert_eq!(cwd, s.prefix.join("wd").canonicalize().unwrap());
    let limit = proc_field(&format!("/proc/{}/limits", s.pid), "Max core file size");
    assert!(limit.starts_with("104857600"), "{limit}");

    // A reload: a new nice value and directory on the same threads and process.
    s.prefix.write_conf(&conf_with(port, &main(7, "wd2"), ""));
    s.signal(libc::SIGHUP);
    s.wait_log("reconfigured (generation 2)", 1);
    crate::common::wait_for("the workers' new nice value", || {
        workers(s.pid).iter().all(|w| w.1 == 7).then_some(())
    });
    let cwd = fs::read_link(format!("/proc/{}/cwd", s.pid)).unwrap();
    assert_eq!(cwd, s.prefix.join("wd2").canonicalize().unwrap());

    // A directory that is not there: the reload goes on, the process stays where it was.
    s.prefix
        .write_conf(&conf_with(port, &main(7, "missing"), ""));
    s.signal(libc::SIGHUP);
    s.wait_log("reconfigured (generation 3)", 1);
    let log = s.error_log();
    assert!(
        log.contains("[alert]") && log.contains("chdir(\"") && log.contains("missing\") failed"),
        "{log}"
    );
    let cwd = fs::read_link(format!("/proc/{}/cwd", s.pid)).unwrap();
    assert_eq!(cwd, s.prefix.join("wd2").canonicalize().unwrap());

    // Lines taken out: the workers go back to the master's nice value and CPUs.
    s.prefix
        .write_conf(&conf_with(port, &format!("worker_processes {n};"), ""));
    s.signal(libc::SIGHUP);
    s.wait_log("reconfigured (generation 4)", 1);
    let master = threads(s.pid).into_iter().find(|t| t.0 == "shoal").unwrap();
    crate::common::wait_for("the workers back with the master", || {
        workers(s.pid)
            .iter()
            .all(|w| w.1 == master.1 && w.2 == master.2)
            .then_some(())
    });
}

#[test]
fn a_working_directory_that_cannot_be_entered_stops_the_start() {
    let port = free_port();
    let prefix = Prefix::new();
    prefix.write_conf(&conf_with(port, "working_directory nowhere;", ""));
    let out = prefix.run(&[]);
    assert_eq!(out.status.code(), Some(1));
    let log = prefix.read("logs/error.log") + &String::from_utf8_lossy(&out.stderr);
    assert!(
        log.contains("[emerg]") && log.contains("nowhere\") failed (2: No such file or directory)"),
        "{log}"
    );
}

#[test]
fn tuning_shoal_has_no_use_for_is_accepted_and_checked_as_nginx_checks_it() {
    let ok = "pcre_jit on;\ntimer_resolution 100ms;\nlock_file logs/nginx.lock;\n\
              worker_priority -0;\nworker_cpu_affinity 01 10;\nworker_rlimit_core 1g;\n\
              events { epoll_events 512; worker_aio_requests 32; }\n";
    let prefix = Prefix::new();
    let conf = prefix.write_conf(ok);
    let (code, out) = run_str(&[
        "-t",
        "-p",
        prefix.path().to_str().unwrap(),
        "-c",
        conf.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{out}");
    for (bad, want) in [
        (
            "pcre_jit yes;",
            "invalid value \"yes\" in \"pcre_jit\" directive, it must be \"on\" or \"off\"",
        ),
        (
            "timer_resolution 10q;",
            "\"timer_resolution\" directive invalid value",
        ),
        (
            "worker_priority x;",
            "\"worker_priority\" directive invalid number",
        ),
        (
            "worker_cpu_affinity 0120;",
            "invalid character \"2\" in \"worker_cpu_affinity\"",
        ),
        (
            "worker_cpu_affinity auto 01 10;",
            "invalid number of arguments in \"worker_cpu_affinity\" directive",
        ),
        (
            "worker_rlimit_core lots;",
            "\"worker_rlimit_core\" directive invalid value",
        ),
        (
            "lock_file a;\nlock_file b;",
            "\"lock_file\" directive is duplicate",
        ),
    ] {
        let conf = prefix.write_conf(&format!("{bad}\nevents {{ }}\n"));
        let (code, out) = run_str(&[
            "-t",
            "-p",
            prefix.path().to_str().unwrap(),
            "-c",
            conf.to_str().unwrap(),
        ]);
        assert_eq!(code, 1, "{bad}: {out}");
        assert!(out.contains(&format!("[emerg] {want} in ")), "{bad}: {out}");
    }
    let conf = prefix.write_conf("events { epoll_events none; }\n");
    let (code, out) = run_str(&[
        "-t",
        "-p",
        prefix.path().to_str().unwrap(),
        "-c",
        conf.to_str().unwrap(),
    ]);
    assert_eq!(code, 1);
    assert!(
        out.contains("\"epoll_events\" directive invalid number"),
        "{out}"
    );
}
