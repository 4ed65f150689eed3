//! Changing the binary on the fly, as nginx's documentation describes it: SIGUSR2 to the
//! master starts a new one on the same listening sockets (the pid file becomes `.oldbin`),
//! WINCH stops the old workers, QUIT finishes the upgrade; or HUP brings the old workers back
//! and the new binary's exit hands everything back to the old master. Under load: no request
//! is lost, no connection reset.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use crate::common::{self, free_port, wait_for, Client, KillOnDrop, Shoal};

fn conf(port: u16) -> String {
    common::conf_with(
        port,
        "worker_processes 2;",
        "location = /pid { return 200 \"$pid\"; }",
    )
}

/// The pid named in `logs/shoal.pid.oldbin`.
fn oldbin_pid(s: &Shoal) -> Option<i32> {
    s.prefix.read("logs/shoal.pid.oldbin").trim().parse().ok()
}

/// Worker threads of `pid`.
fn workers_of(pid: i32) -> usize {
    common::thread_names(pid)
        .iter()
        .filter(|n| n.starts_with("shoal-worker"))
        .count()
}

/// Clients asking `/pid` over keep-alive connections (and one with a new connection per
/// request) until stopped: what answered, and every failure with its reason. A
/// `Connection: close` answer is no failure: the client connects again, as browsers do.
/// (`privsep.rs` reloads under it too.)
pub(crate) struct Load {
    stop: Arc<AtomicBool>,
    /// What the test is doing (said in each failure).
    phase: Arc<Mutex<&'static str>>,
    answers: Arc<AtomicUsize>,
    pids: Arc<Mutex<Vec<String>>>,
    failures: Arc<Mutex<Vec<String>>>,
    threads: Vec<std::thread::JoinHandle<()>>,
}

impl Load {
    pub(crate) fn start(port: u16) -> Load {
        let stop = Arc::new(AtomicBool::new(false));
        let answers = Arc::new(AtomicUsize::new(0));
        let pids = Arc::new(Mutex::new(Vec::new()));
        let failures = Arc::new(Mutex::new(Vec::new()));
        let phase = Arc::new(Mutex::new("start"));
        let threads = (0..5)
            .map(|i| {
                let (stop, answers, pids, failures) = (
                    stop.clone(),
                    answers.clone(),
                    pids.clone(),
                    failures.clone(),
                );
                let phase = phase.clone();
                let fail = move |what: String| {
                    let p = *phase.lock().unwrap();
                    failures
                        .lock()
                        .unwrap()
                        .push(format!("{p}: client {i}: {what}"));
                };
                std::thread::spawn(move || {
                    let mut client: Option<Client> = None;
                    while !stop.load(Ordering::Relaxed) {
                        // Thread 0 opens a connection per request.
                        let c = client.get_or_insert_with(|| Client::connect(port));
                        match c.get("/pid") {
                            Ok(r) if r.status == 200 => {
                                answers.fetch_add(1, Ordering::Relaxed);
                                let pid = String::from_utf8_lossy(&r.body).into_owned();
                                let mut seen = pids.lock().unwrap();
                                if !seen.contains(&pid) {
                                    seen.push(pid);
                                }
                                if i == 0 || r.header("connection") == Some("close") {
                                    client = None;
                                }
                                if i == 0 {
                                    // At most a thousand connections a second: faster, the
                                    // loopback's ports come round again while the server
                                    // still closes their last use (a reset with no upgrade).
                                    std::thread::sleep(std::time::Duration::from_millis(1));
                                }
                            }
                            Ok(r) => {
                                fail(format!("status {}", r.status));
                                client = None;
                            }
                            Err(e) => {
                                fail(e.to_string());
                                client = None;
                            }
                        }
                    }
                })
            })
            .collect();
        Load {
            stop,
            phase,
            answers,
            pids,
            failures,
            threads,
        }
    }

    pub(crate) fn phase(&self, what: &'static str) {
        *self.phase.lock().unwrap() = what;
    }

    /// Waits until `n` more answers came.
    pub(crate) fn wait_answers(&self, n: usize) {
        let from = self.answers.load(Ordering::Relaxed);
        wait_for(&format!("{n} more answers"), || {
            (self.answers.load(Ordering::Relaxed) >= from + n).then_some(())
        });
    }

    /// Waits until an answer came from `pid`.
    pub(crate) fn wait_pid(&self, pid: i32) {
        let want = pid.to_string();
        wait_for(&format!("an answer from pid {pid}"), || {
            self.pids.lock().unwrap().contains(&want).then_some(())
        });
    }

    pub(crate) fn finish(self) -> (usize, Vec<String>, Vec<String>) {
        self.stop.store(true, Ordering::Relaxed);
        for t in self.threads {
            t.join().unwrap();
        }
        let pids = self.pids.lock().unwrap().clone();
        let failures = self.failures.lock().unwrap().clone();
        (self.answers.load(Ordering::Relaxed), pids, failures)
    }
}

/// USR2 to `s`: the new master's pid, once it wrote the pid file (the old one's renamed).
fn start_new_binary(s: &Shoal) -> i32 {
    s.signal(libc::SIGUSR2);
    let new = wait_for("the new binary's pid file", || {
        s.prefix.pid_in_file().filter(|&p| p != s.pid)
    });
    assert_eq!(oldbin_pid(s), Some(s.pid), "{}", s.error_log());
    s.wait_log(&format!("start new binary process {new}"), 1);
    s.wait_log("using inherited sockets from \"", 1);
    new
}

#[test]
fn an_upgrade_under_load_loses_no_request() {
    let port = free_port();
    let mut s = Shoal::start(&conf(port), port);
    let load = Load::start(port);
    load.wait_answers(200);
    load.phase("USR2");
    let new = start_new_binary(&s);
    let _new_guard = KillOnDrop(new);
    // Both serve: the sockets are the same ones.
    assert_eq!(common::listening_sockets(port), 1);
    load.wait_pid(new);
    // WINCH: the old workers stop accepting and finish; the old master stays.
    load.phase("WINCH");
    s.signal(libc::SIGWINCH);
    s.wait_log("stop accepting connections", 1);
    wait_for("the old workers to end", || {
        (workers_of(s.pid) == 0).then_some(())
    });
    assert!(common::alive(s.pid));
    load.wait_answers(200);
    // QUIT: the upgrade is done.
    load.phase("QUIT");
    s.signal(libc::SIGQUIT);
    assert!(s.wait_exit().success());
    load.phase("after");
    load.wait_answers(200);
    let (answers, pids, failures) = load.finish();
    assert!(
        failures.is_empty(),
        "{} of {answers}: {failures:?}",
        failures.len()
    );
    assert!(
        pids.contains(&s.pid.to_string()) && pids.contains(&new.to_string()),
        "{pids:?}"
    );
    // The new master is the only one now: its pid file, no `.oldbin`, and it serves.
    assert_eq!(s.prefix.pid_in_file(), Some(new));
    assert!(!s.prefix.join("logs/shoal.pid.oldbin").exists());
    let r = common::get(port, "/pid").unwrap();
    assert_eq!(r.body, new.to_string().as_bytes());
    assert_eq!(workers_of(new), 2);
    // It stops as any master does, removing its pid file.
    common::signal(new, libc::SIGQUIT);
    wait_for("the new master to exit", || {
        (!common::alive(new)).then_some(())
    });
    assert!(!s.prefix.pid_file().exists());
    let log = s.error_log();
    assert!(
        !log.contains("[emerg]") && !log.contains("[alert]"),
        "{log}"
    );
}

#[test]
fn a_rollback_brings_the_old_workers_back() {
    let port = free_port();
    let s = Shoal::start(&conf(port), port);
    let new = start_new_binary(&s);
    let _new_guard = KillOnDrop(new);
    s.signal(libc::SIGWINCH);
    wait_for("the old workers to end", || {
        (workers_of(s.pid) == 0).then_some(())
    });
    let load = Load::start(port);
    load.wait_pid(new);
    // HUP to the old master: its workers again, on the configuration it had.
    s.signal(libc::SIGHUP);
    wait_for("the old workers to start", || {
        (workers_of(s.pid) == 2).then_some(())
    });
    load.wait_pid(s.pid);
    // QUIT to the new one: the old master serves alone, under its pid file's own name.
    common::signal(new, libc::SIGQUIT);
    s.wait_log(&format!("new binary process {new} exited with code 0"), 1);
    wait_for("the pid file back", || {
        (s.prefix.pid_in_file() == Some(s.pid)).then_some(())
    });
    assert!(!s.prefix.join("logs/shoal.pid.oldbin").exists());
    load.wait_answers(200);
    let (answers, _, failures) = load.finish();
    assert!(
        failures.is_empty(),
        "{} of {answers}: {failures:?}",
        failures.len()
    );
    let r = common::get(port, "/pid").unwrap();
    assert_eq!(r.body, s.pid.to_string().as_bytes());
}

#[test]
fn a_new_binary_that_fails_leaves_the_old_one_serving() {
    let port = free_port();
    let s = Shoal::start(&conf(port), port);
    // The file is broken by the time the new binary reads it.
    let good = s.prefix.read("conf/shoal.conf");
    s.prefix
        .write_conf(&format!("{good}\nbroken_directive on;\n"));
    s.signal(libc::SIGUSR2);
    s.wait_log("start new binary process ", 1);
    s.wait_log(" exited with code 1", 1);
    wait_for("the pid file back", || {
        (s.prefix.pid_in_file() == Some(s.pid)).then_some(())
    });
    assert!(!s.prefix.join("logs/shoal.pid.oldbin").exists());
    let r = common::get(port, "/pid").unwrap();
    assert_eq!(r.body, s.pid.to_string().as_bytes());
    // A second USR2 is taken (the first new binary is gone); with one running, it is refused.
    s.prefix.write_conf(&good);
    let new = start_new_binary(&s);
    let _new_guard = KillOnDrop(new);
    s.signal(libc::SIGUSR2);
    s.wait_log("the changing binary signal is ignored", 1);
    // And the new binary refuses it while its old master runs.
    common::signal(new, libc::SIGUSR2);
    s.wait_log("the changing binary signal is ignored", 2);
    common::signal(new, libc::SIGQUIT);
    s.wait_log(&format!("new binary process {new} exited with code 0"), 1);
}

#[test]
fn sockets_named_in_the_nginx_variable_are_taken_not_bound() {
    // nginx's form of the hand-over: a listening socket bound by someone else, its number in
    // `NGINX`. shoal listens on it (a bind of its own would fail: no SO_REUSEADDR here).
    let port = free_port();
    let listener = std::net::TcpListener::bind(("127.0.0.1", port)).unwrap();
    let fd = std::os::fd::AsRawFd::as_raw_fd(&listener);
    // Inherited across exec: the flag the standard library sets is cleared.
    // SAFETY: fcntl on this test's own open fd.
    unsafe {
        let flags = libc::fcntl(fd, libc::F_GETFD);
        libc::fcntl(fd, libc::F_SETFD, flags & !libc::FD_CLOEXEC);
    }
    let value = format!("{fd};");
    let s = Shoal::start_in_env(
        common::Prefix::new(),
        &conf(port),
        port,
        &[],
        &[("NGINX", std::ffi::OsStr::new(&value))],
    );
    drop(listener);
    let r = common::get(port, "/pid").unwrap();
    assert_eq!(r.body, s.pid.to_string().as_bytes());
    s.wait_log(&format!("using inherited sockets from \"{value}\""), 1);
    assert!(!s.error_log().contains("bind()"), "{}", s.error_log());
}

/// UDP sockets bound to `port` (/proc/net/udp).
fn udp_sockets(port: u16) -> usize {
    let want = format!(":{port:04X}");
    std::fs::read_to_string("/proc/net/udp")
        .unwrap_or_default()
        .lines()
        .skip(1)
        .filter(|l| {
            l.split_whitespace()
                .nth(1)
                .is_some_and(|a| a.ends_with(&want))
        })
        .count()
}

/// One datagram to `port`, its answer.
fn udp_ask(port: u16) -> Option<String> {
    let s = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    s.set_read_timeout(Some(std::time::Duration::from_secs(3)))
        .unwrap();
    s.send_to(b"?", ("127.0.0.1", port)).unwrap();
    let mut buf = [0u8; 64];
    let (n, _) = s.recv_from(&mut buf).ok()?;
    Some(String::from_utf8_lossy(&buf[..n]).into_owned())
}

#[test]
fn a_stream_udp_listener_and_a_tcp_one_on_its_port_are_taken_over() {
    let (port, sp) = (free_port(), free_port());
    let text = format!(
        "{}\nstream {{ server {{ listen 127.0.0.1:{sp} udp; return \"udp $pid\"; }}\n\
         server {{ listen 127.0.0.1:{sp}; return \"tcp $pid\"; }} }}\n",
        conf(port)
    );
    let mut s = Shoal::start(&text, port);
    let tcp_ask = || {
        let mut c = std::net::TcpStream::connect(("127.0.0.1", sp)).unwrap();
        let mut got = String::new();
        std::io::Read::read_to_string(&mut c, &mut got).unwrap();
        got
    };
    assert_eq!(udp_ask(sp), Some(format!("udp {}", s.pid)));
    assert_eq!(tcp_ask(), format!("tcp {}", s.pid));
    let new = start_new_binary(&s);
    let _new_guard = KillOnDrop(new);
    // The same sockets: one UDP and one listening TCP socket on the port, shared.
    assert_eq!(udp_sockets(sp), 1, "{}", s.error_log());
    assert_eq!(common::listening_sockets(sp), 1);
    s.signal(libc::SIGWINCH);
    wait_for("the old workers to end", || {
        (workers_of(s.pid) == 0).then_some(())
    });
    assert_eq!(udp_ask(sp), Some(format!("udp {new}")));
    assert_eq!(tcp_ask(), format!("tcp {new}"));
    s.signal(libc::SIGQUIT);
    assert!(s.wait_exit().success());
    assert_eq!(udp_ask(sp), Some(format!("udp {new}")));
    assert_eq!(udp_sockets(sp), 1);
    let log = s.error_log();
    assert!(
        !log.contains("[emerg]") && !log.contains("[alert]"),
        "{log}"
    );
    common::signal(new, libc::SIGQUIT);
    wait_for("the new master to exit", || {
        (!common::alive(new)).then_some(())
    });
}
