//! What nginx keeps in shared memory, kept across a reload by the root master's children too
//! (`user` as root: each configuration is served by a child of its own): the `limit_req`
//! buckets, the `limit_conn` counts (the old child's requests in flight count against the new
//! child's), the `stub_status` figures, and the TLS sessions of `ssl_session_cache shared:`.
//!
//! Needs root (`user` is ignored otherwise): each test says so and returns.

use std::fs;
use std::io::{Read, Write};
use std::net::TcpListener;
use std::os::unix::fs::PermissionsExt;
use std::time::Duration;

use crate::common::tls::Pki;
use crate::common::{self, free_port, wait_for, Prefix, Shoal};
use crate::tls::openssl;

fn root() -> bool {
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    if !root {
        eprintln!("not root: `user` is ignored; skipped");
    }
    root
}

fn conf(port: u16, upstream: u16, extra: &str) -> String {
    format!(
        "daemon off;\n\
         user nobody nogroup;\n\
         error_log logs/error.log notice;\n\
         events {{ worker_connections 256; }}\n\
         http {{\n\
         \x20   limit_req_zone $binary_remote_addr zone=one:32k rate=1r/m;\n\
         \x20   limit_conn_zone $binary_remote_addr zone=addr:32k;\n\
         \x20   server {{\n\
         \x20       listen 127.0.0.1:{port};\n\
         \x20       root html;\n\
         \x20       location /limited {{ limit_req zone=one; try_files /index.html =404; }}\n\
         \x20       location /slow {{ limit_conn addr 1; proxy_pass http://127.0.0.1:{upstream}; }}\n\
         \x20       location /status {{ stub_status; }}\n\
         {extra}\n\
         \x20   }}\n\
         }}\n"
    )
}

fn start(port: u16, upstream: u16) -> Shoal {
    let p = Prefix::new();
    fs::set_permissions(p.path(), fs::Permissions::from_mode(0o755)).unwrap();
    Shoal::start_in(p, &conf(port, upstream, ""), port, &[])
}

/// Reloads onto a configuration with `/gen` answering `n`, and waits until the new child
/// serves it (the old one may still be draining).
fn reload(s: &Shoal, port: u16, upstream: u16, n: u32) {
    s.prefix.write_conf(&conf(
        port,
        upstream,
        &format!("location /gen {{ return 200 {n}; }}"),
    ));
    s.dash_s("reload");
    wait_for("the new child serving", || {
        let r = common::get(port, "/gen").ok()?;
        (r.status == 200 && r.body == n.to_string().as_bytes()).then_some(())
    });
}

fn requests(port: u16) -> u64 {
    let r = common::get(port, "/status").expect("the status page");
    let body = String::from_utf8_lossy(&r.body).into_owned();
    let line = body.lines().nth(2).unwrap_or_default();
    line.split_whitespace()
        .nth(2)
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no figures in {body:?}"))
}

/// With `rate=1r/m` a client refused before a reload is refused after it: the new child sees
/// the old child's bucket. And the status page's figures go on from where they were.
#[test]
fn limit_req_and_the_counters_outlive_a_reload() {
    if !root() {
        return;
    }
    let (port, up) = (free_port(), free_port());
    let s = start(port, up);
    let first = common::serving_child(s.pid);
    assert_eq!(common::get(port, "/limited").unwrap().status, 200);
    assert_eq!(common::get(port, "/limited").unwrap().status, 503);
    let before = requests(port);
    assert!(before >= 3, "{before}");
    reload(&s, port, up, 1);
    wait_for("the first child to end", || {
        (!common::alive(first)).then_some(())
    });
    assert_eq!(
        common::get(port, "/limited").unwrap().status,
        503,
        "the bucket went with the old child"
    );
    let after = requests(port);
    assert!(after > before + 2, "requests {before} then {after}");
    s.wait_log("by zone \"one\"", 2);
}

/// A request in flight in the old child holds its `limit_conn` unit: the new child refuses
/// the same client's second one, as nginx's new workers do, until the first one ends.
#[test]
fn limit_conn_counts_the_old_childs_requests() {
    if !root() {
        return;
    }
    let (port, up) = (free_port(), free_port());
    let upstream = TcpListener::bind(("127.0.0.1", up)).unwrap();
    let s = start(port, up);
    let slow = std::thread::spawn(move || common::get(port, "/slow").expect("an answer"));
    let (mut held, _) = upstream.accept().unwrap();
    reload(&s, port, up, 1);
    assert_eq!(
        common::get(port, "/slow").unwrap().status,
        503,
        "the old child's request did not count"
    );
    s.wait_log("limiting connections by zone \"addr\"", 1);
    // The first one ends: its unit comes back.
    held.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut head = [0u8; 512];
    let _ = held.read(&mut head);
    held.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 4\r\nConnection: close\r\n\r\nslow")
        .unwrap();
    drop(held);
    let r = slow.join().unwrap();
    assert_eq!((r.status, &r.body[..]), (200, &b"slow"[..]));
    let next = std::thread::spawn(move || common::get(port, "/slow").expect("an answer"));
    let (mut again, _) = upstream.accept().unwrap();
    let _ = again.read(&mut head);
    again
        .write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 4\r\nConnection: close\r\n\r\nnext")
        .unwrap();
    drop(again);
    assert_eq!(next.join().unwrap().status, 200);
}

/// A TLS session stored (by id: no tickets) by the first child is resumed by the child of the
/// next configuration, as nginx's shared cache outlives a reload.
#[test]
fn tls_sessions_by_id_outlive_a_reload() {
    if !root() {
        return;
    }
    let mut pki = Pki::new();
    pki.issue("a", &["a.test"], false);
    let port = free_port();
    let conf = |gen: u32| {
        format!(
            "daemon off;\nuser nobody nogroup;\nerror_log logs/error.log notice;\n\
             events {{ worker_connections 256; }}\n\
             http {{ server {{ listen 127.0.0.1:{port} ssl; server_name a.test; {}\n\
               ssl_session_cache shared:SSL:1m; ssl_session_tickets off;\n\
               location / {{ return 200 \"gen{gen} reused=$ssl_session_reused\\n\"; }} }} }}\n",
            pki.ssl_lines("a")
        )
    };
    let p = Prefix::new();
    fs::set_permissions(p.path(), fs::Permissions::from_mode(0o755)).unwrap();
    let s = Shoal::start_in(p, &conf(0), port, &[]);
    let first = common::serving_child(s.pid);
    let addr = format!("127.0.0.1:{port}");
    let sess = s.prefix.join("sess").display().to_string();
    let req = b"GET / HTTP/1.1\r\nHost: a.test\r\nConnection: close\r\n\r\n";
    let base = [
        "s_client",
        "-connect",
        &addr,
        "-servername",
        "a.test",
        "-tls1_2",
        "-no_ticket",
    ];
    let out = openssl(&[&base[..], &["-sess_out", &sess]].concat(), req);
    assert!(out.contains("gen0 reused=."), "{out}");
    s.prefix.write_conf(&conf(1));
    s.dash_s("reload");
    wait_for("the first child to end", || {
        (!common::alive(first)).then_some(())
    });
    let out = openssl(&[&base[..], &["-sess_in", &sess]].concat(), req);
    assert!(
        out.contains("gen1 reused=r"),
        "the session was forgotten: {out}"
    );
    assert!(out.contains("\nReused, "), "{out}");
}

/// A zone the system cannot map (here: an address-space limit below its size) fails the
/// configuration with nginx's words, and nothing crashes: `limit_req_zone`, and a TLS
/// session cache.
#[test]
fn a_zone_too_large_to_map_fails_the_configuration() {
    use std::os::unix::process::CommandExt;
    let p = Prefix::new();
    let mut pki = Pki::new();
    pki.issue("a", &["a.test"], false);
    let tls = format!("listen 127.0.0.1:2 ssl; {}", pki.ssl_lines("a"));
    for (zone, server) in [
        (
            "limit_req_zone $binary_remote_addr zone=one:3000m rate=1r/s;",
            "",
        ),
        ("limit_conn_zone $binary_remote_addr zone=addr:3000m;", ""),
        ("ssl_session_cache shared:SSL:3000m;", &tls[..]),
    ] {
        p.write_conf(&format!(
            "events {{}}\nhttp {{\n    {zone}\n    server {{ listen 127.0.0.1:1; {server} }}\n}}\n"
        ));
        let mut cmd = std::process::Command::new(&*common::BIN);
        cmd.args(p.args()).arg("-t");
        // SAFETY: setrlimit only, between fork and exec.
        unsafe {
            cmd.pre_exec(|| {
                let limit = libc::rlimit {
                    rlim_cur: 2 << 30,
                    rlim_max: 2 << 30,
                };
                libc::setrlimit(libc::RLIMIT_AS, &limit);
                Ok(())
            });
        }
        let out = cmd.output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{zone}: {err}");
        assert!(
            err.contains("[emerg] mmap(MAP_ANON|MAP_SHARED, ")
                && err.contains(") failed (12: Cannot allocate memory)"),
            "{zone}: {err}"
        );
    }
}
