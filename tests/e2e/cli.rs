//! nginx's command line: `-v`, `-V`, `-h`, `-g`, `-e`, `-s` without a running instance, the
//! startup failures (address in use, unwritable pid file or error log), the error log's line
//! format, and daemon mode.

use std::fs;
use std::net::TcpListener;
use std::process::{Command, Stdio};

use crate::common::{self, free_port, parse_log_line, wait_for, KillOnDrop, Prefix, Shoal};

#[test]
fn version() {
    let (code, err) = common::run_str(&["-v"]);
    assert_eq!(code, 0);
    assert_eq!(
        err,
        format!("shoal version: shoal/{}\n", env!("CARGO_PKG_VERSION"))
    );
}

#[test]
fn version_and_configure_options() {
    let (code, err) = common::run_str(&["-V"]);
    assert_eq!(code, 0);
    let mut lines = err.lines();
    assert_eq!(
        lines.next(),
        Some(format!("shoal version: shoal/{}", env!("CARGO_PKG_VERSION")).as_str())
    );
    assert!(err.contains("\nconfigure arguments: --prefix="), "{err}");
    assert!(err.contains("--conf-path="), "{err}");
}

#[test]
fn help() {
    for flag in ["-h", "-?"] {
        let (code, err) = common::run_str(&[flag]);
        assert_eq!(code, 0);
        assert!(
            err.starts_with("Usage: shoal [-?hvVtTq] [-s signal]"),
            "{err}"
        );
        assert!(err.contains("-g directives : set global directives out of configuration file"));
    }
}

#[test]
fn invalid_options() {
    assert_eq!(
        common::run_str(&["-x"]),
        (1, "shoal: invalid option: \"x\"\n".into())
    );
    assert_eq!(
        common::run_str(&["-c"]),
        (1, "shoal: option \"-c\" requires file name\n".into())
    );
    // nginx checks the signal name while reading the options, before the configuration.
    assert_eq!(
        common::run_str(&["-s", "bogus"]),
        (1, "shoal: invalid option: \"-s bogus\"\n".into())
    );
}

#[test]
fn relative_conf_resolves_against_the_prefix() {
    let p = Prefix::new();
    let file = p.write_conf("events {}\n");
    let out = p.run(&["-t"]);
    assert_eq!(out.status.code(), Some(0));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(&format!(
            "shoal: configuration file {} test is successful",
            file.display()
        )),
        "{err}"
    );
}

#[test]
fn signal_without_a_running_instance() {
    let p = Prefix::new();
    p.write_conf("events {}\n");
    let out = p.run(&["-s", "reload"]);
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        format!(
            "shoal: [error] open() \"{}\" failed (2: No such file or directory)\n",
            p.pid_file().display()
        )
    );
    assert_eq!(out.status.code(), Some(1));
}

#[test]
fn signal_with_a_broken_configuration_is_not_sent() {
    // As nginx, `-s` reads the configuration (for the pid path) and stops at its error.
    let p = Prefix::new();
    let file = p.write_conf("events {}\nbroken;\n");
    let out = p.run(&["-s", "reload"]);
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        format!(
            "shoal: [emerg] unknown directive \"broken\" in {}:2\n",
            file.display()
        )
    );
    assert_eq!(out.status.code(), Some(1));
}

#[test]
fn global_directives() {
    let port = free_port();
    let conf = common::basic_conf(port);
    let s = Shoal::start_in(Prefix::new(), &conf, port, &["-g", "worker_processes 2;"]);
    wait_for("two worker threads", || {
        (s.worker_threads() == 2).then_some(())
    });
    assert_eq!(common::get(port, "/").unwrap().status, 200);
}

#[test]
fn global_directive_duplicated_in_the_file() {
    let p = Prefix::new();
    let file = p.write_conf("events {}\n\nworker_processes 2;\n");
    let out = p.run(&["-g", "worker_processes 2;", "-t"]);
    let f = file.display();
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        format!(
            "shoal: [emerg] \"worker_processes\" directive is duplicate in {f}:3\n\
             shoal: configuration file {f} test failed\n"
        )
    );
    assert_eq!(out.status.code(), Some(1));
}

#[test]
fn address_in_use() {
    let taken = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().port();
    let p = Prefix::new();
    p.write_conf(&common::basic_conf(port).replace("error_log logs/error.log notice;", ""));
    let out = p.run(&[]);
    let err = String::from_utf8_lossy(&out.stderr);
    let bind =
        format!("shoal: [emerg] bind() to 127.0.0.1:{port} failed (98: Address already in use)\n");
    // nginx tries five times before giving up.
    assert_eq!(err.matches(&bind).count(), 5, "{err}");
    assert!(
        err.ends_with("shoal: [emerg] still could not bind()\n"),
        "{err}"
    );
    assert_eq!(out.status.code(), Some(1));
    assert!(!p.pid_file().exists());
    // The same lines, in nginx's format, in the default error log.
    let log = p.read("logs/error.log");
    assert_eq!(
        log.matches(&bind["shoal: [emerg] ".len()..]).count(),
        5,
        "{log}"
    );
    drop(taken);
}

#[test]
fn unwritable_pid_file() {
    let port = free_port();
    let p = Prefix::new();
    p.write_conf(&common::conf_with(port, "pid /proc/nope/shoal.pid;", ""));
    let out = p.run(&[]);
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        "shoal: [emerg] open() \"/proc/nope/shoal.pid\" failed (2: No such file or directory)\n"
    );
    assert_eq!(out.status.code(), Some(1));
    // It released the port it had bound.
    TcpListener::bind(("127.0.0.1", port)).expect("the port is free again");
}

#[test]
fn unwritable_error_log() {
    let port = free_port();
    let p = Prefix::new();
    p.write_conf(&common::basic_conf(port).replace(
        "error_log logs/error.log notice;",
        "error_log /proc/nope/error.log;",
    ));
    let out = p.run(&[]);
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        "shoal: [emerg] open() \"/proc/nope/error.log\" failed (2: No such file or directory)\n"
    );
    assert_eq!(out.status.code(), Some(1));
    assert!(!p.pid_file().exists());
}

/// Every line of `log` is in nginx's format, from process `pid`.
#[track_caller]
fn all_lines_nginx_format(log: &str, pid: i32) {
    assert!(!log.is_empty());
    for line in log.lines() {
        let (level, lpid, tid, _) =
            parse_log_line(line).unwrap_or_else(|| panic!("not nginx's format: {line:?}"));
        assert!(
            ["emerg", "alert", "crit", "error", "warn", "notice", "info", "debug"]
                .contains(&level.as_str()),
            "{line}"
        );
        assert_eq!(lpid as i32, pid, "{line}");
        assert!(tid > 0, "{line}");
    }
}

#[test]
fn error_log_format() {
    let port = free_port();
    let s = Shoal::start(&common::basic_conf(port), port);
    assert_eq!(common::get(port, "/nope.html").unwrap().status, 404);
    let file = s.prefix.join("html/nope.html");
    let needle = format!(
        "open() \"{}\" failed (2: No such file or directory)",
        file.display()
    );
    s.wait_log(&needle, 1);
    s.wait_log(" started, ", 1);
    let log = s.error_log();
    all_lines_nginx_format(&log, s.pid);
    let notice = log
        .lines()
        .find(|l| l.contains(" [notice] "))
        .expect("a notice line");
    assert!(
        notice.contains(&format!("shoal/{}", env!("CARGO_PKG_VERSION"))),
        "{log}"
    );
    let err = log.lines().find(|l| l.contains(&needle)).unwrap();
    let (level, _, _, msg) = parse_log_line(err).unwrap();
    assert_eq!(level, "error");
    // `*N` names the connection, as nginx does.
    assert!(msg.starts_with('*'), "{err}");
}

#[test]
fn dash_e_sets_the_error_log() {
    let port = free_port();
    let p = Prefix::new();
    let elog = p.join("other.log");
    let conf = common::basic_conf(port).replace("error_log logs/error.log notice;", "");
    let e = elog.display().to_string();
    let s = Shoal::start_in(p, &conf, port, &["-e", &e]);
    assert_eq!(common::get(port, "/missing").unwrap().status, 404);
    wait_for("the 404 line in the -e file", || {
        fs::read_to_string(&elog)
            .ok()
            .filter(|t| t.contains("/missing\" failed (2: No such file or directory)"))
    });
    all_lines_nginx_format(&fs::read_to_string(&elog).unwrap(), s.pid);
    assert!(
        !s.prefix.join("logs/error.log").exists(),
        "-e replaces the default error log"
    );
}

#[test]
fn error_log_at_several_levels() {
    let port = free_port();
    let conf = common::conf_with(port, "error_log logs/second.log error;", "");
    let s = Shoal::start(&conf, port);
    assert_eq!(common::get(port, "/missing").unwrap().status, 404);
    s.wait_log("/missing\" failed", 1);
    let second = wait_for("the 404 line in second.log", || {
        Some(s.prefix.read("logs/second.log")).filter(|t| t.contains("/missing\" failed"))
    });
    all_lines_nginx_format(&second, s.pid);
    s.wait_log(" started, ", 1);
    assert!(
        !second.contains("[notice]"),
        "second.log is at level error:\n{second}"
    );
}

/// Starts shoal on `p`'s configuration (`daemon on`) and waits for the launching process to
/// exit 0: its pid and the daemon's (from the pid file). The output goes to a file: the daemon
/// must not keep a pipe of ours open.
fn start_daemon(p: &Prefix) -> (i32, i32) {
    let out_file = fs::File::create(p.join("stderr.txt")).unwrap();
    let mut child = Command::new(&*common::BIN)
        .args(p.args())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(out_file)
        .spawn()
        .unwrap();
    let launcher = child.id() as i32;
    let _launcher_guard = KillOnDrop(launcher);
    let status = wait_for("the launching process to exit", || {
        child.try_wait().unwrap()
    });
    assert_eq!(status.code(), Some(0), "{}", p.read("stderr.txt"));
    (launcher, wait_for("the pid file", || p.pid_in_file()))
}

#[test]
fn daemon_mode() {
    let port = free_port();
    let p = Prefix::new();
    p.write_conf(&common::basic_conf(port).replace("daemon off;", "daemon on;"));
    let (launcher, pid) = start_daemon(&p);
    let _guard = KillOnDrop(pid);
    assert_ne!(pid, launcher);
    assert!(common::alive(pid));
    let r = common::get(port, "/").unwrap();
    assert_eq!(r.status, 200);
    assert_eq!(r.body, common::INDEX.as_bytes());

    let out = p.run(&["-s", "stop"]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    wait_for("the daemon to exit", || (!common::alive(pid)).then_some(()));
    wait_for("the pid file to go", || {
        (!p.pid_file().exists()).then_some(())
    });
}

/// A daemon runs with umask 0 (as nginx's): every file and directory it makes must set its
/// own mode, as nginx does: the pid file 0644, cache directories 0700, cache files 0600 (they
/// were 0666 and 0777: anyone on the machine could rewrite a cached answer).
#[test]
fn a_daemon_s_files_are_not_writable_by_others() {
    use std::os::unix::fs::PermissionsExt;
    let port = free_port();
    let up = free_port();
    let p = Prefix::new();
    let conf = common::conf_with(
        port,
        "",
        "location / { proxy_pass http://127.0.0.1:UP; proxy_cache c; proxy_cache_valid 200 1m; }
         }
    proxy_cache_path cache levels=1:2 keys_zone=c:1m;
         server { listen 127.0.0.1:UP; location / { return 200 \"cached\\n\"; }",
    )
    .replace("daemon off;", "daemon on;")
    .replace("UP", &up.to_string());
    p.write_conf(&conf);
    let (_, pid) = start_daemon(&p);
    let _guard = KillOnDrop(pid);
    common::wait_port_of(pid, port);
    let r = common::get(port, "/x").unwrap();
    assert_eq!(r.body, b"cached\n");
    // The cache file is written after the answer: wait for it.
    let cached = wait_for("the cached file", || {
        walk(&p.join("cache")).into_iter().find(|f| f.is_file())
    });
    let mode = |f: &std::path::Path| fs::metadata(f).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&p.pid_file()), 0o644);
    assert_eq!(mode(&cached), 0o600, "{}", cached.display());
    for d in walk(&p.join("cache")).iter().filter(|d| d.is_dir()) {
        assert_eq!(mode(d), 0o700, "{}", d.display());
    }
    for f in walk(&p.join("")) {
        assert_eq!(mode(&f) & 0o002, 0, "{} is writable by others", f.display());
    }
    let out = p.run(&["-s", "stop"]);
    assert_eq!(out.status.code(), Some(0));
    wait_for("the daemon to exit", || (!common::alive(pid)).then_some(()));
}

/// Every path under `dir` (itself included).
fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = vec![dir.to_path_buf()];
    if let Ok(entries) = fs::read_dir(dir) {
        for e in entries.flatten() {
            let path = e.path();
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                out.extend(walk(&path));
            } else {
                out.push(path);
            }
        }
    }
    out
}

#[test]
fn daemon_does_not_hold_the_output_pipe() {
    // nginx points its stderr at the error log once started, so `nginx 2>&1 | cat` returns:
    // the pipe's reader sees EOF while the daemon runs.
    let port = free_port();
    let p = Prefix::new();
    p.write_conf(&common::basic_conf(port).replace("daemon off;", "daemon on;"));
    let mut child = Command::new(&*common::BIN)
        .args(p.args())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let _launcher_guard = KillOnDrop(child.id() as i32);
    let (tx, rx) = std::sync::mpsc::channel();
    for pipe in [
        Box::new(child.stdout.take().unwrap()) as Box<dyn std::io::Read + Send>,
        Box::new(child.stderr.take().unwrap()),
    ] {
        let tx = tx.clone();
        std::thread::spawn(move || {
            let mut pipe = pipe;
            let mut v = Vec::new();
            let _ = pipe.read_to_end(&mut v);
            let _ = tx.send(v);
        });
    }
    let status = wait_for("the launching process to exit", || {
        child.try_wait().unwrap()
    });
    assert_eq!(status.code(), Some(0));
    let pid = wait_for("the pid file", || p.pid_in_file());
    let _guard = KillOnDrop(pid);
    common::wait_port_of(pid, port);
    for _ in 0..2 {
        rx.recv_timeout(common::WAIT)
            .expect("the daemon still holds the launcher's stdout or stderr");
    }
    assert!(common::alive(pid));
    common::signal(pid, libc::SIGTERM);
    wait_for("the daemon to exit", || (!common::alive(pid)).then_some(()));
}

#[test]
fn signal_to_a_stale_pid() {
    let p = Prefix::new();
    p.write_conf("events {}\n");
    // pid_max itself is never a process id.
    let pid_max: i32 = fs::read_to_string("/proc/sys/kernel/pid_max")
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    fs::write(p.pid_file(), format!("{pid_max}\n")).unwrap();
    let out = p.run(&["-s", "stop"]);
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        format!("shoal: [alert] kill({pid_max}, 15) failed (3: No such process)\n")
    );
    assert_eq!(out.status.code(), Some(1));

    fs::write(p.pid_file(), "garbage\n").unwrap();
    let out = p.run(&["-s", "reopen"]);
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        format!(
            "shoal: [error] invalid PID number \"garbage\" in \"{}\"\n",
            p.pid_file().display()
        )
    );
    assert_eq!(out.status.code(), Some(1));
}

/// The README's first command: with no `-c` and nothing at /etc/shoal/shoal.conf, the built-in
/// configuration must load on a fresh machine (no /usr/share/shoal prefix to hold logs).
#[test]
fn the_builtin_configuration_loads_without_a_prefix() {
    let _etc = common::ETC_SHOAL.lock().unwrap_or_else(|e| e.into_inner());
    if std::path::Path::new("/etc/shoal/shoal.conf").exists() {
        eprintln!(
            "skipped: /etc/shoal/shoal.conf exists, so the built-in configuration is not used"
        );
        return;
    }
    let (code, err) = common::run_str(&["-t"]);
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("built-in.conf test is successful"), "{err}");
}

/// As root, the built-in configuration serves the checkout's `html/` as its owner (root's
/// default, `nobody`, cannot read a checkout in a 0700 home such as /root).
#[test]
fn the_builtin_configuration_serves_as_the_checkouts_owner() {
    use std::os::unix::fs::MetadataExt;
    let _etc = common::ETC_SHOAL.lock().unwrap_or_else(|e| e.into_inner());
    // SAFETY: geteuid has no preconditions.
    if std::path::Path::new("/etc/shoal/shoal.conf").exists() || unsafe { libc::geteuid() } != 0 {
        eprintln!("skipped: not root, or /etc/shoal/shoal.conf exists");
        return;
    }
    let html = std::fs::metadata(concat!(env!("CARGO_MANIFEST_DIR"), "/html")).unwrap();
    let out = common::run(&["-T".to_string()]);
    let dump = String::from_utf8_lossy(&out.stdout);
    let line = dump
        .lines()
        .find(|l| l.starts_with("user "))
        .unwrap_or_else(|| panic!("no user line: {dump}"));
    let mut words = line.trim_end_matches(';').split_whitespace().skip(1);
    let id = |db: &str, name: Option<&str>| -> u32 {
        let text = std::fs::read_to_string(db).unwrap();
        let entry = text
            .lines()
            .find(|l| l.split(':').next() == name)
            .unwrap_or_else(|| panic!("{name:?} in {db}"));
        entry.split(':').nth(2).unwrap().parse().unwrap()
    };
    assert_eq!(id("/etc/passwd", words.next()), html.uid(), "{line}");
    assert_eq!(id("/etc/group", words.next()), html.gid(), "{line}");
    assert_eq!(out.status.code(), Some(0));
}
