//! Started as root: nginx's two processes. A root master that never serves (it reads every
//! configuration, keys only root may read included, binds, owns the pid file and the logs)
//! and a serving child that runs as `user` (nginx's default `nobody` without it) with no
//! capability; one process with `user root` or `master_process off`. The certbot flow (a
//! renewed root-only key taken by a reload, a request in flight finished by the old child),
//! the processes and `-s quit`, USR1 in a root-owned directory, a bad reload, a binary
//! upgrade, children that die and children that cannot start.
//!
//! Needs root (`user` is ignored otherwise): each test says so and returns.

use std::fs;
use std::os::unix::fs::{MetadataExt, PermissionsExt};

use crate::common::tls::{Opts, Pki, TlsClient};
use crate::common::{self, free_port, wait_for, Client, KillOnDrop, Prefix, Shoal};

fn root() -> bool {
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    if !root {
        eprintln!("not root: `user` is ignored; skipped");
    }
    root
}

/// A prefix `nobody` can read (the child serves it).
fn prefix() -> Prefix {
    let p = Prefix::new();
    fs::set_permissions(p.path(), fs::Permissions::from_mode(0o755)).unwrap();
    p
}

/// shoal on a fresh prefix `nobody` can read, with `main` at the top of the configuration and
/// `server` in its server.
fn start(port: u16, main: &str, server: &str) -> Shoal {
    Shoal::start_in(prefix(), &common::conf_with(port, main, server), port, &[])
}

fn body(port: u16, path: &str) -> String {
    let r = common::get(port, path).expect("an answer");
    assert_eq!(r.status, 200);
    String::from_utf8_lossy(&r.body).into_owned()
}

#[test]
fn user_as_root_is_a_root_master_and_a_child_without_capabilities() {
    if !root() {
        return;
    }
    let port = free_port();
    let mut s = start(port, "user nobody nogroup;", "");
    let child = common::serving_child(s.pid);
    // The master: root, one thread (no runtime, nothing started before a fork).
    let uid = common::proc_status(s.pid, "Uid:").unwrap();
    assert!(uid.split_whitespace().all(|u| u == "0"), "master Uid {uid}");
    assert_eq!(common::proc_status(s.pid, "Threads:").as_deref(), Some("1"));
    // The child: every thread without any capability, the workers among them.
    let caps = common::thread_caps(child);
    assert!(caps.len() > 1, "the child's threads: {caps:?}");
    assert!(caps.iter().all(|&c| c == 0), "CapEff {caps:x?}");
    assert_eq!(body(port, "/"), common::INDEX);
    assert_eq!(s.prefix.pid_in_file(), Some(s.pid));
    s.dash_s("quit");
    assert_eq!(s.wait_exit().code(), Some(0));
    assert!(!common::alive(child), "the child outlived its master");
    // The master, still root, removed it.
    assert!(!s.prefix.pid_file().exists());
}

/// certbot renews a key only root may read and runs `nginx -s reload`: the master reads it,
/// the new child serves the new certificate and the new configuration, and the request a
/// keep-alive connection had begun is finished by the old child.
#[test]
fn the_certbot_flow_reloads_a_root_only_key() {
    if !root() {
        return;
    }
    let (port, tls) = (free_port(), free_port());
    let mut pki = Pki::new();
    let site_key = pki.path("site.key");
    let install = |pki: &Pki, name: &str| {
        fs::copy(pki.path(&format!("{name}.crt")), pki.path("site.crt")).unwrap();
        fs::copy(pki.path(&format!("{name}.key")), &site_key).unwrap();
        fs::set_permissions(&site_key, fs::Permissions::from_mode(0o600)).unwrap();
    };
    pki.issue("one", &["127.0.0.1"], false);
    install(&pki, "one");
    assert_eq!(fs::metadata(&site_key).unwrap().uid(), 0);
    let ssl = pki.ssl_lines("site");
    let conf = |text: &str| {
        common::conf_with(
            port,
            "user nobody nogroup;",
            &format!(
                "listen 127.0.0.1:{tls} ssl; {ssl}\nlocation / {{ return 200 \"{text}\\n\"; }}"
            ),
        )
    };
    let s = Shoal::start_in(prefix(), &conf("one"), port, &[]);
    let first = common::serving_child(s.pid);
    let mut c = TlsClient::connect(tls, &pki, &Opts::default()).unwrap();
    assert_eq!(c.server_cn(), "one");
    assert_eq!(c.get("localhost", "/").unwrap().2, b"one\n");
    let mut held = Client::connect(port);
    assert_eq!(held.get("/").unwrap().body, b"one\n");
    held.send(b"GET / HTTP/1.1\r\nHost: localhost\r\n").unwrap();

    pki.issue("two", &["127.0.0.1"], false);
    install(&pki, "two");
    s.prefix.write_conf(&conf("two"));
    s.dash_s("reload");
    wait_for("the renewed certificate", || {
        let mut c = TlsClient::connect(tls, &pki, &Opts::default()).ok()?;
        (c.server_cn() == "two").then_some(())?;
        (c.get("localhost", "/").ok()?.2 == b"two\n").then_some(())
    });
    assert_eq!(body(port, "/"), "two\n");
    // The request begun before the reload: the old child answers it, and closes.
    held.send(b"\r\n").unwrap();
    let r = held.read_response().unwrap();
    assert_eq!(r.body, b"one\n");
    assert_eq!(r.header("connection"), Some("close"));
    wait_for("the old child to end", || {
        (!common::alive(first)).then_some(())
    });
    let second = common::serving_child(s.pid);
    assert_ne!(second, first);
    assert!(common::thread_caps(second).iter().all(|&c| c == 0));
    let log = s.error_log();
    assert!(!log.contains("[emerg]"), "{log}");
}

/// SIGUSR1 with the logs in a root-owned directory: the master reopens them as root, gives
/// them to `nobody`, and the child writes to the new files.
#[test]
fn usr1_reopens_logs_in_a_root_owned_directory() {
    if !root() {
        return;
    }
    let port = free_port();
    let s = start(port, "user nobody nogroup;", "");
    let child = common::serving_child(s.pid);
    let logs = fs::metadata(s.prefix.join("logs")).unwrap();
    assert_eq!((logs.uid(), logs.mode() & 0o022), (0, 0), "logs/ is root's");
    assert_eq!(body(port, "/"), common::INDEX);
    for f in ["access", "error"] {
        let from = s.prefix.join(&format!("logs/{f}.log"));
        fs::rename(&from, s.prefix.join(&format!("logs/{f}.log.1"))).unwrap();
    }
    s.dash_s("reopen");
    wait_for("a request logged in the new access.log", || {
        let _ = common::get(port, "/reopened");
        s.prefix
            .read("logs/access.log")
            .contains("GET /reopened")
            .then_some(())
    });
    for f in ["logs/access.log", "logs/error.log"] {
        assert_eq!(fs::metadata(s.prefix.join(f)).unwrap().uid(), 65534, "{f}");
    }
    let old = s.prefix.read("logs/error.log.1");
    for pid in [s.pid, child] {
        let line = format!("[notice] {pid}#{pid}: reopening logs");
        assert!(old.contains(&line), "{line} in\n{old}");
    }
    assert!(!s.prefix.read("logs/access.log.1").contains("/reopened"));
    assert_eq!(common::children_of(s.pid), [child]);
}

/// A configuration that does not load: the master says why and the old child serves on; a
/// good one then replaces it.
#[test]
fn a_bad_reload_keeps_the_old_child() {
    if !root() {
        return;
    }
    let port = free_port();
    let s = start(port, "user nobody nogroup;", "");
    let child = common::serving_child(s.pid);
    s.prefix
        .write_conf(&common::conf_with(port, "user nobody nogroup;", "bogus;"));
    // `-s reload` would read the file first and refuse it: the signal is sent as such.
    s.signal(libc::SIGHUP);
    s.wait_log("unknown directive \"bogus\"", 1);
    let log = s.error_log();
    assert!(
        log.lines()
            .any(|l| l.contains(&format!("[emerg] {}#", s.pid)) && l.contains("\"bogus\"")),
        "{log}"
    );
    assert_eq!(common::children_of(s.pid), [child]);
    assert_eq!(body(port, "/"), common::INDEX);
    s.prefix.write_conf(&common::conf_with(
        port,
        "user nobody nogroup;",
        "location / { return 200 fixed; }",
    ));
    s.dash_s("reload");
    wait_for("the fixed configuration", || {
        (body(port, "/") == "fixed").then_some(())
    });
    wait_for("the old child to end", || {
        (!common::alive(child)).then_some(())
    });
}

/// The binary upgrade with `user`: the root master renames the pid file and starts the new
/// binary with the sockets; the new master is root with a child of its own; WINCH stops the
/// old child, QUIT the old master.
#[test]
fn a_binary_upgrade_with_user() {
    if !root() {
        return;
    }
    let port = free_port();
    let mut s = start(
        port,
        "user nobody nogroup;",
        "location = /pid { return 200 \"$pid\"; }",
    );
    let old_child = common::serving_child(s.pid);
    assert_eq!(body(port, "/pid"), old_child.to_string());
    s.signal(libc::SIGUSR2);
    let new = wait_for("the new binary's pid file", || {
        s.prefix.pid_in_file().filter(|&p| p != s.pid)
    });
    let _guard = KillOnDrop(new);
    let oldbin = s.prefix.read("logs/shoal.pid.oldbin");
    assert_eq!(oldbin.trim(), s.pid.to_string());
    let uid = common::proc_status(new, "Uid:").unwrap();
    assert!(
        uid.split_whitespace().all(|u| u == "0"),
        "new master Uid {uid}"
    );
    let new_child = common::serving_child(new);
    s.signal(libc::SIGWINCH);
    wait_for("the old child to end", || {
        (!common::alive(old_child)).then_some(())
    });
    // The new binary is the old master's only child now.
    assert_eq!(common::children_of(s.pid), [new]);
    assert!(common::alive(s.pid), "the old master stays");
    assert_eq!(body(port, "/pid"), new_child.to_string());
    s.signal(libc::SIGQUIT);
    assert_eq!(s.wait_exit().code(), Some(0));
    assert_eq!(s.prefix.pid_in_file(), Some(new));
    assert_eq!(body(port, "/pid"), new_child.to_string());
    common::signal(new, libc::SIGQUIT);
    wait_for("the new master to exit", || {
        (!common::alive(new)).then_some(())
    });
    assert!(!common::alive(new_child));
}

/// A child that dies unasked is replaced by a new one on the same configuration, as nginx's
/// master respawns a worker.
#[test]
fn a_killed_child_is_replaced() {
    if !root() {
        return;
    }
    let port = free_port();
    let s = start(
        port,
        "user nobody nogroup;",
        "location / { return 200 same; }",
    );
    let child = common::serving_child(s.pid);
    // Up (the master heard so): a child that dies before is a failed start.
    s.wait_log(&format!("start worker process {child}"), 1);
    common::signal(child, libc::SIGKILL);
    s.wait_log(
        &format!(
            "[alert] {0}#{0}: worker process {child} exited on signal 9",
            s.pid
        ),
        1,
    );
    let fresh = common::serving_child(s.pid);
    assert_ne!(fresh, child);
    assert_eq!(body(port, "/"), "same");
    // The master killed in turn: its child does not serve on, orphaned.
    common::signal(s.pid, libc::SIGKILL);
    wait_for("the orphaned child to end", || {
        (!common::alive(fresh)).then_some(())
    });
}

/// A reload that adds `user` to a shoal started with `user root` (one process, root): the
/// split is made at a start, so the log says the line waits for it, and serving goes on.
#[test]
fn user_added_by_a_reload_waits_for_the_next_start() {
    if !root() {
        return;
    }
    let port = free_port();
    let s = start(port, "user root;", "");
    assert!(common::children_of(s.pid).is_empty());
    s.prefix.write_conf(&common::conf_with(
        port,
        "user nobody nogroup;",
        "location / { return 200 reloaded; }",
    ));
    s.dash_s("reload");
    s.wait_log("\"user\" takes effect at the next start", 1);
    wait_for("the reloaded configuration", || {
        (body(port, "/") == "reloaded").then_some(())
    });
    assert!(common::children_of(s.pid).is_empty());
}

/// Reloads under keep-alive load lose no request: the old child drains (an idle connection
/// takes one more request, answered with `Connection: close`) instead of closing idle
/// connections as a client sends on them, since the new child already serves the sockets.
#[test]
fn reloads_under_load_lose_no_request() {
    if !root() {
        return;
    }
    let port = free_port();
    let s = start(
        port,
        "user nobody nogroup; worker_processes 2;",
        "location = /pid { return 200 \"$pid\"; }",
    );
    let load = crate::upgrade::Load::start(port);
    load.wait_answers(200);
    load.phase("reloads");
    for generation in 2..=9 {
        s.signal(libc::SIGHUP);
        s.wait_log(&format!("reconfigured (generation {generation})"), 1);
        let child = common::serving_child(s.pid);
        load.wait_pid(child);
        load.wait_answers(200);
    }
    let (answers, _, failures) = load.finish();
    assert!(
        failures.is_empty(),
        "{answers} answers, failed: {failures:?}"
    );
    // The replaced children all ended: one serves.
    wait_for("the old children to end", || {
        (common::children_of(s.pid).len() == 1).then_some(())
    });
}

/// An id of `/etc/passwd` or `/etc/group`: the third field of `name`'s line.
fn id_in(file: &str, name: &str) -> Option<String> {
    let text = fs::read_to_string(file).ok()?;
    let line = text.lines().find(|l| l.split(':').next() == Some(name))?;
    line.split(':').nth(2).map(str::to_string)
}

/// Root without `user`: nginx's default, a root master and a child as `nobody` and the group
/// nginx's configure finds, `nobody` or else `nogroup` (Debian has no group `nobody`).
#[test]
fn root_without_user_serves_as_nobody() {
    if !root() {
        return;
    }
    let port = free_port();
    let s = Shoal::start_in(
        prefix().without_user_root(),
        &common::basic_conf(port),
        port,
        &[],
    );
    assert!(!s.prefix.read("conf/shoal.conf").contains("user"));
    let child = common::serving_child(s.pid);
    let master = common::proc_status(s.pid, "Uid:").unwrap();
    assert!(
        master.split_whitespace().all(|u| u == "0"),
        "master Uid {master}"
    );
    let uid = id_in("/etc/passwd", "nobody").expect("a user nobody");
    let gid = id_in("/etc/group", "nobody")
        .or_else(|| id_in("/etc/group", "nogroup"))
        .expect("a group nobody or nogroup");
    for (field, id) in [("Uid:", &uid), ("Gid:", &gid)] {
        let got = common::proc_status(child, field).unwrap();
        assert!(
            got.split_whitespace().all(|u| u == id),
            "child {field} {got}"
        );
    }
    assert!(common::thread_caps(child).iter().all(|&c| c == 0));
    assert_eq!(body(port, "/"), common::INDEX);
}

/// `user root` drops nothing, and nginx's single process (`master_process off`) ignores
/// `user`: one process, root, serves.
#[test]
fn user_root_and_master_process_off_are_one_root_process() {
    if !root() {
        return;
    }
    for main in ["user root;", "master_process off; user nobody nogroup;"] {
        let port = free_port();
        let s = start(port, main, "");
        assert_eq!(body(port, "/"), common::INDEX, "{main}");
        assert!(common::children_of(s.pid).is_empty(), "{main}: a child");
        let uid = common::proc_status(s.pid, "Uid:").unwrap();
        assert!(
            uid.split_whitespace().all(|u| u == "0"),
            "{main}: Uid {uid}"
        );
        assert!(
            s.worker_threads() > 0,
            "{main}: the workers are its threads"
        );
    }
}

/// Sets the soft `RLIMIT_NPROC` of `pid`; returns the one it had.
fn set_nproc(pid: i32, soft: libc::rlim_t) -> libc::rlim_t {
    let mut old = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: prlimit with a null new limit only reads into `old`.
    assert_eq!(
        unsafe { libc::prlimit(pid, libc::RLIMIT_NPROC, std::ptr::null(), &mut old) },
        0
    );
    let new = libc::rlimit {
        rlim_cur: soft,
        rlim_max: old.rlim_max,
    };
    // SAFETY: prlimit with a valid new limit and a null old one.
    assert_eq!(
        unsafe { libc::prlimit(pid, libc::RLIMIT_NPROC, &new, std::ptr::null_mut()) },
        0
    );
    old.rlim_cur
}

/// A child that cannot start: the master's `RLIMIT_NPROC` at 0, which its children inherit,
/// lets none of them start a thread once it is `nobody` (root's fork is exempt). The
/// replacement of a killed child is then tried again after a pause until one serves; a reload
/// whose child cannot start leaves the old child serving.
#[test]
fn a_child_that_cannot_start_is_tried_again() {
    if !root() {
        return;
    }
    let port = free_port();
    let conf = |text: &str| {
        common::conf_with(
            port,
            "user nobody nogroup;",
            &format!("location / {{ return 200 {text}; }}"),
        )
    };
    let s = Shoal::start_in(prefix(), &conf("one"), port, &[]);
    let child = common::serving_child(s.pid);
    s.wait_log(&format!("start worker process {child}"), 1);
    let limit = set_nproc(s.pid, 0);
    common::signal(child, libc::SIGKILL);
    // Failed twice: tried again, not given up.
    s.wait_log(" exited before it served, starting a new one in 1 s", 2);
    // Said as nginx says it, without a panic.
    let log = s.error_log();
    assert!(
        log.contains("[emerg]") && log.contains("failed (11: Resource temporarily unavailable)"),
        "{log}"
    );
    assert!(!log.contains("panicked"), "{log}");
    set_nproc(s.pid, limit);
    let fresh = wait_for("a child that serves", || {
        let log = s.error_log();
        common::children_of(s.pid)
            .into_iter()
            .find(|c| log.contains(&format!("start worker process {c}\n")))
    });
    assert_ne!(fresh, child);
    assert_eq!(body(port, "/"), "one");

    // A reload whose child cannot start: the old child serves on.
    set_nproc(s.pid, 0);
    s.prefix.write_conf(&conf("two"));
    s.signal(libc::SIGHUP);
    s.wait_log(
        " exited before it served, the old configuration serves on",
        1,
    );
    assert_eq!(common::children_of(s.pid), [fresh]);
    assert_eq!(body(port, "/"), "one");
    set_nproc(s.pid, limit);
    s.signal(libc::SIGHUP);
    wait_for("the second configuration", || {
        (body(port, "/") == "two").then_some(())
    });
}

/// `user NAME;` without a group takes the group of the same name, as nginx says: `user
/// nobody;` fails on a system without a group `nobody` (Debian), `user www-data;` does not.
#[test]
fn user_without_group_takes_the_group_of_its_name() {
    if !root() {
        return;
    }
    let p = Prefix::new();
    for (user, group_exists) in [
        ("nobody", id_in("/etc/group", "nobody").is_some()),
        ("www-data", id_in("/etc/group", "www-data").is_some()),
    ] {
        if id_in("/etc/passwd", user).is_none() {
            continue;
        }
        let file = p.write_conf(&format!("user {user};\nevents {{}}\n"));
        let out = p.run(&["-t"]);
        let err = String::from_utf8_lossy(&out.stderr);
        if group_exists {
            assert_eq!(out.status.code(), Some(0), "{user}: {err}");
        } else {
            assert_eq!(
                err.lines().next(),
                Some(&*format!(
                    "shoal: [emerg] getgrnam(\"{user}\") failed in {}:1",
                    file.display()
                )),
                "{err}"
            );
            assert_eq!(out.status.code(), Some(1));
        }
    }
}
