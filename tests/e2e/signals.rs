//! Signals and the process's life: reloads (a hundred, with keep-alive connections held open;
//! a broken file; adding and removing a port), graceful and fast stops with work in flight,
//! the pid file, and reopening the error log.

use std::fs;

use crate::common::{self, free_port, Client, Shoal};

/// A 200 with the test index page.
#[track_caller]
fn assert_index(r: std::io::Result<common::Response>, what: &str) {
    let r = r.unwrap_or_else(|e| panic!("{what}: {e}"));
    assert_eq!(r.status, 200, "{what}");
    assert_eq!(r.body, common::INDEX.as_bytes(), "{what}");
}

#[test]
fn hundred_reloads_with_keepalive_connections_held() {
    let port = free_port();
    let conf = common::conf_with(port, "worker_processes 2;", "");
    let s = Shoal::start(&conf, port);
    let mut held: Vec<Client> = (0..4).map(|_| s.client(port)).collect();
    for (i, c) in held.iter_mut().enumerate() {
        assert_index(c.get("/"), &format!("connection {i} before any reload"));
    }
    for n in 1..=100 {
        s.dash_s("reload");
        s.wait_log(&format!("reconfigured (generation {})", n + 1), 1);
        for (i, c) in held.iter_mut().enumerate() {
            assert_index(c.get("/"), &format!("held connection {i} after reload {n}"));
        }
        if n % 10 == 0 {
            assert_index(
                common::get(port, "/"),
                &format!("a new connection after reload {n}"),
            );
        }
    }
    assert_eq!(s.worker_threads(), 2);
    assert!(!s.error_log().contains("[emerg]"), "{}", s.error_log());
}

#[test]
fn reload_with_a_broken_file_keeps_the_old_configuration() {
    let port = free_port();
    let s = Shoal::start(&common::basic_conf(port), port);
    let mut held = s.client(port);
    assert_index(held.get("/"), "before");
    let good = s.prefix.read("conf/shoal.conf");
    let file = s
        .prefix
        .write_conf(&format!("{good}\nbroken_directive on;\n"));
    let lines = good.lines().count() + 2;
    s.signal(libc::SIGHUP);
    let msg = "[emerg] ";
    let want = format!(
        "unknown directive \"broken_directive\" in {}:{lines}",
        file.display()
    );
    s.wait_log(&want, 1);
    let log = s.error_log();
    let line = log.lines().find(|l| l.contains(&want)).unwrap();
    assert!(line.contains(msg), "{line}");
    assert!(common::parse_log_line(line).is_some(), "{line}");
    assert!(!log.contains("reconfigured"), "{log}");
    assert_index(held.get("/"), "held connection after the failed reload");
    assert_index(
        common::get(port, "/"),
        "new connection after the failed reload",
    );

    // The file is fixed: the next reload takes it.
    s.prefix.write_conf(&good);
    s.signal(libc::SIGHUP);
    s.wait_log("reconfigured (generation 2)", 1);
    assert_index(held.get("/"), "held connection after the good reload");
}

#[test]
fn reload_adds_and_removes_a_port() {
    let (a, b) = (free_port(), free_port());
    let one = common::basic_conf(a);
    let two = common::conf_with(a, "", &format!("        listen 127.0.0.1:{b};"));
    let s = Shoal::start(&one, a);
    assert!(
        std::net::TcpStream::connect(("127.0.0.1", b)).is_err(),
        "port {b} is not configured yet"
    );
    let mut on_a = s.client(a);
    assert_index(on_a.get("/"), "port a");

    s.prefix.write_conf(&two);
    s.dash_s("reload");
    s.wait_log("reconfigured (generation 2)", 1);
    s.wait_port(b);
    assert_index(common::get(b, "/"), "the added port");
    let mut on_b = s.client(b);
    assert_index(on_b.get("/"), "a connection held on the added port");

    s.prefix.write_conf(&one);
    s.dash_s("reload");
    s.wait_log("reconfigured (generation 3)", 1);
    // The removed port closes even though a keep-alive connection on it is still open; that
    // connection, idle, is woken by the reload and closed.
    s.wait_port_closed(b);
    assert!(
        on_b.closed_by_peer(),
        "the idle connection on the removed port is still open"
    );
    assert_eq!(common::listening_sockets(b), 0);
    assert_index(on_a.get("/"), "port a after removing b");
    assert_index(common::get(a, "/"), "new connection on port a");
}

#[test]
fn reload_changes_what_is_served() {
    let port = free_port();
    let s = Shoal::start(&common::basic_conf(port), port);
    fs::create_dir(s.prefix.join("other")).unwrap();
    fs::write(s.prefix.join("other/index.html"), "other root\n").unwrap();
    let mut held = s.client(port);
    assert_index(held.get("/"), "before");
    s.prefix
        .write_conf(&common::basic_conf(port).replace("root html;", "root other;"));
    s.signal(libc::SIGHUP);
    s.wait_log("reconfigured (generation 2)", 1);
    let body = |r: common::Response| String::from_utf8_lossy(&r.body).into_owned();
    assert_eq!(
        body(common::get(port, "/").unwrap()),
        "other root\n",
        "a new connection"
    );
    // A request that arrives on a held keep-alive connection after the reload is served by
    // the new configuration, as on a new connection (in nginx the old worker would have
    // closed the idle connection, and the client's retry would reach a new worker).
    assert_eq!(
        body(held.get("/").unwrap()),
        "other root\n",
        "a held connection"
    );
}

#[test]
fn quit_lets_a_slow_request_finish() {
    let port = free_port();
    let mut s = Shoal::start(&common::basic_conf(port), port);
    let mut slow = s.client(port);
    // Half a request head.
    slow.send(b"GET / HTTP/1.1\r\nHost: localhost\r\n").unwrap();
    let mut idle = s.client(port);
    assert_index(idle.get("/"), "the idle connection's first request");
    s.dash_s("quit");
    s.wait_log("gracefully shutting down", 1);
    // An idle keep-alive connection is closed at once, as nginx does.
    assert!(idle.closed_by_peer(), "the idle connection was not closed");
    assert!(!s.exited(), "shoal exited with a request in flight");
    slow.send(b"User-Agent: e2e\r\n\r\n").unwrap();
    let r = slow.read_response().unwrap();
    assert_eq!(r.status, 200);
    assert_eq!(r.body, common::INDEX.as_bytes());
    assert_eq!(r.header("connection"), Some("close"));
    assert!(slow.closed_by_peer());
    let status = s.wait_exit();
    assert_eq!(status.code(), Some(0));
    assert!(
        !s.prefix.pid_file().exists(),
        "the pid file outlived the process"
    );
}

#[test]
fn quit_lets_a_large_response_finish() {
    let port = free_port();
    let mut s = Shoal::start(&common::basic_conf(port), port);
    let size = 16 << 20;
    let data: Vec<u8> = (0..size).map(|i| (i % 251) as u8).collect();
    fs::write(s.prefix.join("html/big.bin"), &data).unwrap();
    let mut c = s.client(port);
    // A small receive buffer keeps most of the response in the server while it stops.
    c.send(b"GET /big.bin HTTP/1.1\r\nHost: localhost\r\n\r\n")
        .unwrap();
    let head = c.read_head().unwrap();
    assert_eq!(head.status, 200);
    assert_eq!(
        head.header("content-length"),
        Some(size.to_string().as_str())
    );
    let first = c.read_body(64 * 1024).unwrap();
    s.signal(libc::SIGQUIT);
    s.wait_log("gracefully shutting down", 1);
    assert!(!s.exited(), "shoal exited with a response in flight");
    let rest = c.read_body(size - first.len()).unwrap();
    assert!(
        first == data[..first.len()] && rest == data[first.len()..],
        "the body differs"
    );
    assert!(c.closed_by_peer());
    assert_eq!(s.wait_exit().code(), Some(0));
    assert!(!s.prefix.pid_file().exists());
}

#[test]
fn term_stops_at_once() {
    let port = free_port();
    let mut s = Shoal::start(&common::basic_conf(port), port);
    let mut c = s.client(port);
    c.send(b"GET / HTTP/1.1\r\n").unwrap();
    s.dash_s("stop");
    assert_eq!(s.wait_exit().code(), Some(0));
    assert!(c.closed_by_peer());
    assert!(!s.prefix.pid_file().exists());
    s.wait_log("exit", 1);
}

#[test]
fn int_stops_at_once() {
    let port = free_port();
    let mut s = Shoal::start(&common::basic_conf(port), port);
    s.signal(libc::SIGINT);
    assert_eq!(s.wait_exit().code(), Some(0));
    assert!(!s.prefix.pid_file().exists());
}

#[test]
fn pid_file_life_cycle() {
    let port = free_port();
    let p = common::Prefix::new();
    let pid_file = p.pid_file();
    assert!(!pid_file.exists());
    let mut s = Shoal::spawn(p, &common::basic_conf(port), &[]);
    // Written once listening: whenever the file exists, the port answers.
    let pid = common::wait_for("the pid file", || s.prefix.pid_in_file());
    assert!(
        std::net::TcpStream::connect(("127.0.0.1", port)).is_ok(),
        "the pid file exists before the port listens"
    );
    assert_eq!(pid, s.pid);
    assert_eq!(
        fs::read_to_string(&pid_file).unwrap(),
        format!("{}\n", s.pid)
    );
    s.wait_port(port);
    // A reload keeps it.
    s.signal(libc::SIGHUP);
    s.wait_log("reconfigured (generation 2)", 1);
    assert_eq!(s.prefix.pid_in_file(), Some(s.pid));
    s.dash_s("quit");
    assert_eq!(s.wait_exit().code(), Some(0));
    assert!(!pid_file.exists(), "the pid file outlived the process");
}

#[test]
fn pid_directive_moves_the_file_on_reload() {
    let port = free_port();
    let s = Shoal::start(&common::basic_conf(port), port);
    assert_eq!(s.prefix.pid_in_file(), Some(s.pid));
    s.prefix
        .write_conf(&common::conf_with(port, "pid logs/other.pid;", ""));
    s.signal(libc::SIGHUP);
    s.wait_log("reconfigured (generation 2)", 1);
    assert_eq!(s.prefix.read("logs/other.pid"), format!("{}\n", s.pid));
    assert!(!s.prefix.pid_file().exists());
}

#[test]
fn usr1_reopens_the_error_log() {
    let port = free_port();
    let s = Shoal::start(&common::basic_conf(port), port);
    s.wait_log("started", 1);
    let log = s.prefix.join("logs/error.log");
    let rotated = s.prefix.join("logs/error.log.1");
    fs::rename(&log, &rotated).unwrap();
    s.dash_s("reopen");
    common::wait_for("a new error.log", || log.exists().then_some(()));
    assert_eq!(common::get(port, "/after-reopen").unwrap().status, 404);
    s.wait_log("/after-reopen\" failed", 1);
    let old = fs::read_to_string(&rotated).unwrap();
    assert!(old.contains("reopening logs"), "{old}");
    assert!(
        !old.contains("/after-reopen"),
        "a line went to the rotated file:\n{old}"
    );
    for line in s.error_log().lines() {
        assert!(common::parse_log_line(line).is_some(), "{line}");
    }
}

#[test]
fn reload_onto_a_busy_port_keeps_the_old_configuration() {
    let port = free_port();
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let busy = taken.local_addr().unwrap().port();
    let s = Shoal::start(&common::basic_conf(port), port);
    let mut held = s.client(port);
    assert_index(held.get("/"), "before");
    s.prefix.write_conf(&common::conf_with(
        port,
        "",
        &format!("        listen 127.0.0.1:{busy};"),
    ));
    s.signal(libc::SIGHUP);
    s.wait_log("still could not bind()", 1);
    let log = s.error_log();
    assert_eq!(
        log.matches(&format!("[emerg] {}#", s.pid)).count(),
        6,
        "five bind() failures and the final line:\n{log}"
    );
    assert!(log.contains(&format!(
        ": bind() to 127.0.0.1:{busy} failed (98: Address already in use)\n"
    )));
    assert!(!log.contains("reconfigured"), "{log}");
    assert_index(held.get("/"), "held connection after the failed reload");
    assert_index(
        common::get(port, "/"),
        "new connection after the failed reload",
    );
    drop(taken);
}

#[test]
fn reload_with_an_unwritable_error_log_keeps_the_old_configuration() {
    let port = free_port();
    let s = Shoal::start(&common::basic_conf(port), port);
    s.prefix.write_conf(&common::basic_conf(port).replace(
        "error_log logs/error.log notice;",
        "error_log logs/error.log notice;\nerror_log /proc/nope/error.log;",
    ));
    s.signal(libc::SIGHUP);
    s.wait_log("[emerg] ", 1);
    assert!(
        s.error_log()
            .contains(": open() \"/proc/nope/error.log\" failed (2: No such file or directory)\n"),
        "{}",
        s.error_log()
    );
    assert!(!s.error_log().contains("reconfigured"));
    assert_index(common::get(port, "/"), "after the failed reload");
}

#[test]
fn worker_shutdown_timeout_ends_a_stuck_request() {
    let port = free_port();
    let mut s = Shoal::start(
        &common::conf_with(port, "worker_shutdown_timeout 200ms;", ""),
        port,
    );
    let mut stuck = s.client(port);
    stuck.send(b"GET / HTTP/1.1\r\n").unwrap();
    // The head is incomplete and stays so: only the timeout can end the worker.
    s.dash_s("quit");
    assert_eq!(s.wait_exit().code(), Some(0));
    assert!(stuck.closed_by_peer());
    assert!(!s.prefix.pid_file().exists());
}

#[test]
fn user_directive_still_removes_the_pid_file() {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("not root: `user` is ignored; skipped");
        return;
    }
    let port = free_port();
    let p = common::Prefix::new();
    // `nobody` must be able to read the prefix to serve it.
    use std::os::unix::fs::PermissionsExt;
    fs::set_permissions(p.path(), fs::Permissions::from_mode(0o755)).unwrap();
    let mut s = Shoal::start_in(
        p,
        &common::conf_with(port, "user nobody nogroup;", ""),
        port,
        &[],
    );
    // The child serving as `nobody` is forked once the sockets and the pid file are in place.
    common::serving_child(s.pid);
    assert_index(common::get(port, "/"), "served as nobody");
    assert_eq!(s.prefix.pid_in_file(), Some(s.pid));
    s.dash_s("quit");
    assert_eq!(s.wait_exit().code(), Some(0));
    // The master, still root, removed it before it exited.
    assert!(!s.prefix.pid_file().exists());
}

/// A reload after `user` binds ports below 1024, the master being root as nginx's (certbot
/// adds `listen 443 ssl` and reloads), and a `server` without `listen` still takes port 80
/// (nginx decides by the master's `getuid() == 0`, not by the workers' user).
#[test]
fn a_reload_after_user_binds_privileged_ports() {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("not root: `user` is ignored; skipped");
        return;
    }
    let port = free_port();
    let low = (600..1000)
        .find(|&p| std::net::TcpListener::bind(("127.0.0.1", p)).is_ok())
        .expect("a free port below 1000");
    let p = common::Prefix::new();
    use std::os::unix::fs::PermissionsExt;
    fs::set_permissions(p.path(), fs::Permissions::from_mode(0o755)).unwrap();
    let s = Shoal::start_in(
        p,
        &common::conf_with(port, "user nobody nogroup;", ""),
        port,
        &[],
    );
    // The serving child keeps no capability: the master binds.
    let child = common::serving_child(s.pid);
    let caps = common::thread_caps(child);
    assert!(caps.iter().all(|&c| c == 0), "CapEff {caps:x?}");
    s.prefix.write_conf(
        &common::conf_with(port, "user nobody nogroup;", "").replacen(
            "    server {\n",
            &format!(
                "    server {{ listen 127.0.0.1:{low}; return 200 \"low\\n\"; }}\n    \
             server {{ server_name eighty; return 200 \"eighty\\n\"; }}\n    server {{\n"
            ),
            1,
        ),
    );
    s.dash_s("reload");
    common::wait_for("the reload to bind the port below 1024", || {
        std::net::TcpStream::connect(("127.0.0.1", low)).ok()
    });
    let r = common::get(low, "/").expect("the port below 1024");
    assert_eq!((r.status, &r.body[..]), (200, &b"low\n"[..]));
    let r = common::get(80, "/").expect("the server without listen on port 80");
    assert_eq!((r.status, &r.body[..]), (200, &b"eighty\n"[..]));
    assert_index(common::get(port, "/"), "the first port");
}

/// `worker_rlimit_nofile` is set as nginx's workers set it: a limit the kernel refuses is an
/// alert in the error log (not on the terminal: nginx's workers say it after the start), and
/// a reload's new value is taken.
#[test]
fn worker_rlimit_nofile_failures_go_to_the_log_and_a_reload_sets_it() {
    let nr_open: u64 = fs::read_to_string("/proc/sys/fs/nr_open")
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let port = free_port();
    let too_many = format!("worker_rlimit_nofile {};", nr_open + 1);
    let s = Shoal::start(&common::conf_with(port, &too_many, ""), port);
    assert_index(common::get(port, "/"), "started");
    let want = format!(
        "[alert] {}#{}: setrlimit(RLIMIT_NOFILE, {}) failed (1: Operation not permitted)",
        s.pid,
        s.pid,
        nr_open + 1
    );
    assert!(s.error_log().contains(&want), "{}", s.error_log());
    let stderr = fs::read_to_string(s.prefix.join("stderr.txt")).unwrap();
    assert!(!stderr.contains("setrlimit"), "{stderr}");
    s.prefix
        .write_conf(&common::conf_with(port, "worker_rlimit_nofile 1234;", ""));
    s.dash_s("reload");
    common::wait_for("the reload's limit", || {
        let limits = fs::read_to_string(format!("/proc/{}/limits", s.pid)).ok()?;
        let line = limits.lines().find(|l| l.starts_with("Max open files"))?;
        let figures: Vec<&str> = line.split_whitespace().collect();
        (figures[3..5] == ["1234", "1234"]).then_some(())
    });
}
