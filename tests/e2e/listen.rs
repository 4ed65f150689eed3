//! Workers and listening sockets: `worker_processes auto`, one SO_REUSEPORT socket per worker
//! with `reuseport`, one shared socket polled with EPOLLEXCLUSIVE without it, unix sockets.

use std::fs;
use std::io::{Read, Write};

use crate::common::{self, free_port, wait_for, Shoal};

/// What `nproc` prints (the CPUs this process may run on), as nginx counts them.
fn nproc() -> usize {
    let out = std::process::Command::new("nproc")
        .output()
        .expect("running nproc");
    String::from_utf8_lossy(&out.stdout)
        .trim()
        .parse()
        .expect("nproc's number")
}

#[test]
fn worker_processes_auto_starts_one_worker_per_core() {
    let port = free_port();
    let s = Shoal::start(&common::conf_with(port, "worker_processes auto;", ""), port);
    let want = nproc();
    wait_for("a worker per core", || {
        (s.worker_threads() == want).then_some(())
    });
    let mut names: Vec<String> = s
        .thread_names()
        .into_iter()
        .filter(|n| n.starts_with("shoal-worker-"))
        .collect();
    names.sort();
    let expected: Vec<String> = (0..want).map(|i| format!("shoal-worker-{i}")).collect();
    assert_eq!(names, expected);
    s.wait_log(&format!("started, {want} worker(s)"), 1);
}

#[test]
fn reuseport_opens_a_socket_per_worker() {
    let port = free_port();
    let conf = common::conf_with(port, "worker_processes 2;", "").replace(
        &format!("listen 127.0.0.1:{port};"),
        &format!("listen 127.0.0.1:{port} reuseport;"),
    );
    let s = Shoal::start(&conf, port);
    assert_eq!(common::listening_sockets(port), 2);
    for _ in 0..20 {
        assert_eq!(common::get(port, "/").unwrap().status, 200);
    }
    // A reload down to one worker closes the second worker's socket.
    s.prefix
        .write_conf(&conf.replace("worker_processes 2;", "worker_processes 1;"));
    s.signal(libc::SIGHUP);
    s.wait_log("reconfigured (generation 2)", 1);
    wait_for("one listening socket", || {
        (common::listening_sockets(port) == 1).then_some(())
    });
    wait_for("one worker", || (s.worker_threads() == 1).then_some(()));
    for _ in 0..20 {
        assert_eq!(common::get(port, "/").unwrap().status, 200);
    }
}

/// One epoll registration as /proc/PID/fdinfo shows it.
#[derive(Debug, PartialEq, Eq, PartialOrd, Ord, Clone)]
struct Registration {
    /// The registered fd's number.
    tfd: i32,
    events: u32,
    /// The registered file's inode (the socket's).
    ino: String,
}

/// Every epoll registration of process `pid`. An epoll fd duplicated by the runtime lists the
/// same registrations twice; they are counted once.
fn epoll_registrations(pid: i32) -> Vec<Registration> {
    let mut out = Vec::new();
    let Ok(dir) = fs::read_dir(format!("/proc/{pid}/fdinfo")) else {
        return out;
    };
    for e in dir.filter_map(|e| e.ok()) {
        let Ok(info) = fs::read_to_string(e.path()) else {
            continue;
        };
        for l in info.lines().filter(|l| l.starts_with("tfd:")) {
            // tfd: N events: HEX data: HEX pos:0 ino:HEX sdev:HEX
            let f: Vec<&str> = l.split_whitespace().collect();
            let field = |name: &str| f.iter().position(|t| *t == name).and_then(|i| f.get(i + 1));
            let ino = f.iter().find_map(|t| t.strip_prefix("ino:"));
            if let (Some(tfd), Some(ev), Some(ino)) = (field("tfd:"), field("events:"), ino) {
                if let (Ok(tfd), Ok(events)) = (tfd.parse(), u32::from_str_radix(ev, 16)) {
                    out.push(Registration {
                        tfd,
                        events,
                        ino: ino.to_string(),
                    });
                }
            }
        }
    }
    out.sort();
    out.dedup();
    out
}

const EPOLLEXCLUSIVE: u32 = 0x1000_0000;

#[test]
fn shared_socket_is_polled_with_epollexclusive() {
    let port = free_port();
    let s = Shoal::start(&common::conf_with(port, "worker_processes 2;", ""), port);
    assert_eq!(common::listening_sockets(port), 1);
    // Each worker polls its own duplicate of the shared socket with EPOLLEXCLUSIVE.
    let exclusive = || -> Vec<Registration> {
        epoll_registrations(s.pid)
            .into_iter()
            .filter(|r| r.events & EPOLLEXCLUSIVE != 0)
            .collect()
    };
    let regs = wait_for("two EPOLLEXCLUSIVE registrations", || {
        Some(exclusive()).filter(|r| r.len() == 2)
    });
    assert_ne!(regs[0].tfd, regs[1].tfd, "{regs:?}");
    assert_eq!(regs[0].ino, regs[1].ino, "not the same socket: {regs:?}");
    // And connections are served through it, by both workers over time.
    for _ in 0..50 {
        assert_eq!(common::get(port, "/").unwrap().status, 200);
    }
}

#[test]
fn reuseport_sockets_are_not_exclusive() {
    let port = free_port();
    let conf = common::conf_with(port, "worker_processes 2;", "").replace(
        &format!("listen 127.0.0.1:{port};"),
        &format!("listen 127.0.0.1:{port} reuseport;"),
    );
    let s = Shoal::start(&conf, port);
    assert_eq!(common::get(port, "/").unwrap().status, 200);
    let any_exclusive = epoll_registrations(s.pid)
        .iter()
        .any(|r| r.events & EPOLLEXCLUSIVE != 0);
    assert!(
        !any_exclusive,
        "a per-worker socket needs no EPOLLEXCLUSIVE"
    );
}

#[test]
fn two_ports_and_server_selection() {
    let (a, b) = (free_port(), free_port());
    let s = Shoal::start(
        &common::conf_with(a, "", &format!("        listen 127.0.0.1:{b};")),
        a,
    );
    s.wait_port(b);
    assert_eq!(common::get(a, "/").unwrap().body, common::INDEX.as_bytes());
    assert_eq!(common::get(b, "/").unwrap().body, common::INDEX.as_bytes());
}

#[test]
fn ipv6_loopback() {
    let Ok(probe) = std::net::TcpListener::bind("[::1]:0") else {
        eprintln!("no IPv6 loopback here; skipped");
        return;
    };
    let port = probe.local_addr().unwrap().port();
    drop(probe);
    let conf = common::basic_conf(port).replace("listen 127.0.0.1:", "listen [::1]:");
    let s = Shoal::spawn(common::Prefix::new(), &conf, &[]);
    let mut c = wait_for("[::1] to answer", || {
        assert!(common::alive(s.pid), "shoal exited: {}", s.stderr());
        std::net::TcpStream::connect(("::1", port)).ok()
    });
    c.write_all(b"GET / HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
        .unwrap();
    c.set_read_timeout(Some(common::WAIT)).unwrap();
    let mut resp = String::new();
    c.read_to_string(&mut resp).unwrap();
    assert!(resp.starts_with("HTTP/1.1 200 OK\r\n"), "{resp}");
    assert!(resp.ends_with(common::INDEX), "{resp}");
}

#[test]
fn unix_socket() {
    let port = free_port();
    let p = common::Prefix::new();
    let sock = p.join("shoal.sock");
    let conf = common::conf_with(
        port,
        "",
        &format!("        listen unix:{};", sock.display()),
    );
    let mut s = Shoal::start_in(p, &conf, port, &[]);
    let mut c = std::os::unix::net::UnixStream::connect(&sock).expect("connecting to the socket");
    c.set_read_timeout(Some(common::WAIT)).unwrap();
    c.write_all(b"GET / HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
        .unwrap();
    let mut resp = String::new();
    c.read_to_string(&mut resp).unwrap();
    assert!(resp.starts_with("HTTP/1.1 200 OK\r\n"), "{resp}");
    s.signal(libc::SIGQUIT);
    assert_eq!(s.wait_exit().code(), Some(0));
    assert!(!sock.exists(), "the socket file outlived shoal");
}

/// `listen ADDR:FIRST-LAST` (nginx 1.15.10+): a socket on each port of the range.
#[test]
fn a_port_range_listens_on_each_port() {
    // Three free ports in a row (the first found from a free one).
    let base = loop {
        let p = crate::common::free_port();
        if p < 65000 && (1..3).all(|i| std::net::TcpListener::bind(("127.0.0.1", p + i)).is_ok()) {
            break p;
        }
    };
    let listen = format!("listen 127.0.0.1:{}-{};", base + 1, base + 2);
    let port = crate::common::free_port();
    let conf = crate::common::conf_with(port, "", &listen);
    let s = crate::common::Shoal::start(&conf, port);
    let want = crate::common::get(port, "/").unwrap().status;
    for p in [base + 1, base + 2] {
        s.wait_port(p);
        assert_eq!(crate::common::get(p, "/").unwrap().status, want);
    }
}
