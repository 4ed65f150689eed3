//! `proxy_bind $remote_addr transparent` (stream TCP and UDP, and http's `proxy_bind`): the
//! upstream sees the client's own address. Three network namespaces stand for the client, the
//! proxy and the upstream (`ip netns`, veth pairs, two subnets), and the proxy's namespace
//! routes what comes back from the upstream's side to itself (`ip rule iif ... lookup 100`,
//! `local 0.0.0.0/0 dev lo table 100`), as nginx's documentation has it. shoal runs there with
//! `user nobody`: its root master's serving child keeps `CAP_NET_RAW` for `IP_TRANSPARENT` and
//! nothing else. IPv4 and IPv6 (the same lab, `fd77:1::/64` and `fd77:2::/64`); and the reload
//! that adds the first `transparent` (a new child, with the capability).
//!
//! Needs root (network namespaces); fails loudly without.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream, UdpSocket};
use std::os::fd::AsRawFd;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use crate::common::{Prefix, BIN};

const CLIENT: &str = "10.77.1.2";
const PROXY: &str = "10.77.1.1";
const PROXY_UP: &str = "10.77.2.1";
const UPSTREAM: &str = "10.77.2.2";
const CLIENT6: &str = "fd77:1::2";
const PROXY6: &str = "fd77:1::1";
const PROXY_UP6: &str = "fd77:2::1";
const UPSTREAM6: &str = "fd77:2::2";

/// Runs `ip ARGS`, which must succeed.
fn ip(args: &[&str]) {
    let out = Command::new("ip").args(args).output().expect("running ip");
    assert!(
        out.status.success(),
        "ip {}: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The three namespaces, removed (with their links) when dropped.
struct Lab {
    cl: String,
    px: String,
    up: String,
}

impl Drop for Lab {
    fn drop(&mut self) {
        for n in [&self.cl, &self.px, &self.up] {
            let _ = Command::new("ip").args(["netns", "del", n]).status();
        }
    }
}

impl Lab {
    fn new() -> Lab {
        // SAFETY: geteuid has no preconditions.
        assert_eq!(
            unsafe { libc::geteuid() },
            0,
            "the transparent proxy tests make network namespaces: run them as root"
        );
        static N: AtomicUsize = AtomicUsize::new(0);
        let tag = format!(
            "shoal{}t{}",
            std::process::id(),
            N.fetch_add(1, Ordering::SeqCst)
        );
        let lab = Lab {
            cl: format!("{tag}cl"),
            px: format!("{tag}px"),
            up: format!("{tag}up"),
        };
        for n in [&lab.cl, &lab.px, &lab.up] {
            ip(&["netns", "add", n]);
            ip(&["-n", n, "link", "set", "lo", "up"]);
        }
        let (cl, px, up) = (lab.cl.as_str(), lab.px.as_str(), lab.up.as_str());
        ip(&[
            "-n", px, "link", "add", "p0", "type", "veth", "peer", "name", "c0", "netns", cl,
        ]);
        ip(&[
            "-n", px, "link", "add", "p1", "type", "veth", "peer", "name", "u0", "netns", up,
        ]);
        for (ns, dev, addr, via) in [
            (px, "p0", format!("{PROXY}/24"), None),
            (px, "p1", format!("{PROXY_UP}/24"), None),
            (cl, "c0", format!("{CLIENT}/24"), Some(PROXY)),
            (up, "u0", format!("{UPSTREAM}/24"), Some(PROXY_UP)),
        ] {
            ip(&["-n", ns, "addr", "add", &addr, "dev", dev]);
            ip(&["-n", ns, "link", "set", dev, "up"]);
            if let Some(gw) = via {
                ip(&["-n", ns, "route", "add", "default", "via", gw]);
            }
        }
        // The same over IPv6 (no duplicate address detection: the addresses work at once).
        for (ns, dev, addr, via) in [
            (px, "p0", format!("{PROXY6}/64"), None),
            (px, "p1", format!("{PROXY_UP6}/64"), None),
            (cl, "c0", format!("{CLIENT6}/64"), Some(PROXY6)),
            (up, "u0", format!("{UPSTREAM6}/64"), Some(PROXY_UP6)),
        ] {
            ip(&["-n", ns, "-6", "addr", "add", &addr, "dev", dev, "nodad"]);
            if let Some(gw) = via {
                ip(&["-n", ns, "-6", "route", "add", "default", "via", gw]);
            }
        }
        // What the upstream sends back to the client's address is the proxy's to take.
        ip(&["-n", px, "rule", "add", "iif", "p1", "lookup", "100"]);
        ip(&[
            "-n",
            px,
            "route",
            "add",
            "local",
            "0.0.0.0/0",
            "dev",
            "lo",
            "table",
            "100",
        ]);
        ip(&["-n", px, "-6", "rule", "add", "iif", "p1", "lookup", "100"]);
        ip(&[
            "-n", px, "-6", "route", "add", "local", "::/0", "dev", "lo", "table", "100",
        ]);
        lab
    }
}

/// Runs `f` on a thread that has entered namespace `ns` (sockets it makes belong there, and may
/// be used from any thread afterwards).
fn in_ns<T: Send + 'static>(ns: &str, f: impl FnOnce() -> T + Send + 'static) -> T {
    let path = format!("/run/netns/{ns}");
    std::thread::spawn(move || {
        let file = std::fs::File::open(&path).expect("opening the namespace");
        // SAFETY: a namespace file descriptor, for this thread only.
        let r = unsafe { libc::setns(file.as_raw_fd(), libc::CLONE_NEWNET) };
        assert_eq!(r, 0, "setns({path}): {}", std::io::Error::last_os_error());
        f()
    })
    .join()
    .expect("the thread in the namespace")
}

/// The upstream: on TCP port 7000, `from ADDR` to each connection after its first line; on
/// 7002, an HTTP answer with that as its body; on UDP 7001, `from ADDR` to each datagram.
fn upstream(lab: &Lab) {
    let (t, h, u, t6) = in_ns(&lab.up, || {
        (
            TcpListener::bind((UPSTREAM, 7000)).unwrap(),
            TcpListener::bind((UPSTREAM, 7002)).unwrap(),
            UdpSocket::bind((UPSTREAM, 7001)).unwrap(),
            TcpListener::bind((UPSTREAM6, 7000)).unwrap(),
        )
    });
    for (l, head_end) in [(t, &b"\n"[..]), (h, &b"\r\n\r\n"[..]), (t6, &b"\n"[..])] {
        std::thread::spawn(move || {
            for c in l.incoming() {
                let Ok(mut c) = c else { return };
                let _ = c.set_read_timeout(Some(Duration::from_secs(10)));
                let mut got = Vec::new();
                let mut buf = [0u8; 1024];
                while !got.ends_with(head_end) {
                    match c.read(&mut buf) {
                        Ok(n) if n > 0 => got.extend_from_slice(&buf[..n]),
                        _ => break,
                    }
                }
                let from = format!("from {}\n", c.peer_addr().unwrap().ip());
                let answer = if head_end.len() > 1 {
                    format!(
                        "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{from}",
                        from.len()
                    )
                } else {
                    from
                };
                let _ = c.write_all(answer.as_bytes());
            }
        });
    }
    std::thread::spawn(move || {
        let mut buf = [0u8; 1024];
        while let Ok((_, peer)) = u.recv_from(&mut buf) {
            let _ = u.send_to(format!("from {}\n", peer.ip()).as_bytes(), peer);
        }
    });
}

/// shoal in the proxy's namespace, killed when dropped.
struct Proxy {
    child: Child,
    prefix: Prefix,
}

impl Drop for Proxy {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Sends `data` from the client's namespace to the proxy's `port`, and reads until the end.
fn tcp_from_client(lab: &Lab, port: u16, data: &'static [u8]) -> std::io::Result<String> {
    tcp_from_client_to(lab, PROXY.parse().unwrap(), port, data)
}

/// [`tcp_from_client`] to the proxy's address `to`.
fn tcp_from_client_to(
    lab: &Lab,
    to: std::net::IpAddr,
    port: u16,
    data: &'static [u8],
) -> std::io::Result<String> {
    in_ns(&lab.cl, move || {
        let mut c = TcpStream::connect_timeout(&(to, port).into(), Duration::from_secs(5))?;
        c.set_read_timeout(Some(Duration::from_secs(10)))?;
        c.write_all(data)?;
        let mut got = Vec::new();
        c.read_to_end(&mut got)?;
        Ok(String::from_utf8_lossy(&got).into_owned())
    })
}

fn start(lab: &Lab, body: &str) -> Proxy {
    let prefix = Prefix::new();
    let conf = format!(
        "daemon off;\nuser nobody nogroup;\nworker_processes 2;\nerror_log logs/error.log info;\n\
         pid logs/shoal.pid;\nevents {{ }}\n{body}\n"
    );
    prefix.write_conf(&conf);
    let child = Command::new("ip")
        .args(["netns", "exec", &lab.px, BIN.as_str(), "-p"])
        .arg(prefix.path())
        .arg("-c")
        .arg(prefix.path().join("conf/shoal.conf"))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("starting shoal in the proxy's namespace");
    let p = Proxy { child, prefix };
    let deadline = Instant::now() + Duration::from_secs(10);
    // Started once the plain (not transparent) server answers.
    while tcp_from_client(lab, 9009, b"up?\n").map_or(true, |t| t.is_empty()) {
        assert!(
            Instant::now() < deadline,
            "shoal did not start: {}",
            p.prefix.read("logs/error.log")
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    p
}

/// Root master `pid` stays root; every thread of its serving child runs as `nobody` with
/// `CAP_NET_RAW` (13) and no other capability.
fn only_net_raw(pid: u32) {
    let uid = crate::common::proc_status(pid as i32, "Uid:").unwrap();
    assert!(uid.split_whitespace().all(|u| u == "0"), "master Uid {uid}");
    let child = crate::common::serving_child(pid as i32);
    let caps = crate::common::thread_caps(child);
    assert!(
        !caps.is_empty() && caps.iter().all(|&c| c == 1 << 13),
        "CapEff {caps:x?}"
    );
}

#[test]
fn stream_tcp_and_udp_upstreams_see_the_client_s_address() {
    let lab = Lab::new();
    upstream(&lab);
    let p = start(
        &lab,
        &format!(
            "stream {{\n\
             server {{ listen {PROXY}:9000; proxy_pass {UPSTREAM}:7000; \
               proxy_bind $remote_addr transparent; }}\n\
             server {{ listen {PROXY}:9001 udp; proxy_pass {UPSTREAM}:7001; proxy_responses 1; \
               proxy_bind $remote_addr transparent; }}\n\
             server {{ listen {PROXY}:9009; proxy_pass {UPSTREAM}:7000; }}\n}}"
        ),
    );
    only_net_raw(p.child.id());
    // Without transparent, the upstream sees the proxy; with it, the client.
    assert_eq!(
        tcp_from_client(&lab, 9009, b"hi\n").unwrap(),
        format!("from {PROXY_UP}\n")
    );
    for _ in 0..3 {
        assert_eq!(
            tcp_from_client(&lab, 9000, b"hi\n").unwrap(),
            format!("from {CLIENT}\n")
        );
    }
    let got = in_ns(&lab.cl, || {
        let u = UdpSocket::bind((CLIENT, 0)).unwrap();
        u.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        u.send_to(b"hi", (PROXY, 9001)).unwrap();
        let mut buf = [0u8; 64];
        let n = u.recv(&mut buf).expect("the UDP answer");
        String::from_utf8_lossy(&buf[..n]).into_owned()
    });
    assert_eq!(got, format!("from {CLIENT}\n"));
    let log = p.prefix.read("logs/error.log");
    assert!(
        log.contains(&format!("proxy {CLIENT}:")),
        "the proxy's own address is the client's: {log}"
    );
}

#[test]
fn stream_over_ipv6_the_upstream_sees_the_client_s_address() {
    let lab = Lab::new();
    upstream(&lab);
    let p = start(
        &lab,
        &format!(
            "stream {{\n\
             server {{ listen [{PROXY6}]:9000; proxy_pass [{UPSTREAM6}]:7000; \
               proxy_bind $remote_addr transparent; }}\n\
             server {{ listen [{PROXY6}]:9002; proxy_pass [{UPSTREAM6}]:7000; }}\n\
             server {{ listen {PROXY}:9009; proxy_pass {UPSTREAM}:7000; }}\n}}"
        ),
    );
    only_net_raw(p.child.id());
    let to = PROXY6.parse().unwrap();
    assert_eq!(
        tcp_from_client_to(&lab, to, 9002, b"hi\n").unwrap(),
        format!("from {PROXY_UP6}\n"),
        "without transparent, the proxy's own address"
    );
    for _ in 0..3 {
        assert_eq!(
            tcp_from_client_to(&lab, to, 9000, b"hi\n").unwrap(),
            format!("from {CLIENT6}\n")
        );
    }
}

#[test]
fn http_proxy_bind_transparent_shows_the_client_s_address() {
    let lab = Lab::new();
    upstream(&lab);
    let p = start(
        &lab,
        &format!(
            "stream {{ server {{ listen {PROXY}:9009; proxy_pass {UPSTREAM}:7000; }} }}\n\
             http {{ access_log off; server {{ listen {PROXY}:8080; location / {{ \
               proxy_pass http://{UPSTREAM}:7002; proxy_bind $remote_addr transparent; }} }} }}"
        ),
    );
    only_net_raw(p.child.id());
    let got = tcp_from_client(&lab, 8080, b"GET / HTTP/1.0\r\nHost: x\r\n\r\n").unwrap();
    assert!(got.starts_with("HTTP/1.1 200 OK\r\n"), "{got}");
    assert!(got.ends_with(&format!("\r\n\r\nfrom {CLIENT}\n")), "{got}");
}

/// A reload that brings the first `transparent` under `user`: the root master forks a child
/// on it that keeps `CAP_NET_RAW`; the next reload without it, a child with no capability.
#[test]
fn a_reload_brings_the_first_transparent_after_user() {
    use crate::common::{self, free_port, Shoal};
    use std::os::unix::fs::PermissionsExt;
    // SAFETY: geteuid has no preconditions.
    assert_eq!(
        unsafe { libc::geteuid() },
        0,
        "`user nobody` needs root: run the transparent proxy tests as root"
    );
    let (port, port2) = (free_port(), free_port());
    let p = common::Prefix::new();
    std::fs::set_permissions(p.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let s = Shoal::start_in(
        p,
        &common::conf_with(port, "user nobody nogroup;", ""),
        port,
        &[],
    );
    let first = common::serving_child(s.pid);
    assert!(common::thread_caps(first).iter().all(|&c| c == 0));
    // The logs were given to `nobody` (as nginx's master does), so that the child can open
    // them again on SIGUSR1.
    for f in ["logs/error.log", "logs/access.log"] {
        use std::os::unix::fs::MetadataExt;
        assert_eq!(
            std::fs::metadata(s.prefix.join(f)).unwrap().uid(),
            65534,
            "{f}"
        );
    }
    let with = |extra: &str| {
        common::conf_with(port, "user nobody nogroup;", "").replacen(
            "    server {\n",
            &format!("    server {{ listen 127.0.0.1:{port2}; {extra} }}\n    server {{\n"),
            1,
        )
    };
    let hup = |s: &Shoal| {
        let out = s.prefix.run(&["-s", "reload"]);
        assert_eq!(out.status.code(), Some(0), "-s reload");
    };
    s.prefix.write_conf(&with(
        "location / { proxy_pass http://127.0.0.1:9; proxy_bind $remote_addr transparent; }",
    ));
    hup(&s);
    common::wait_for("the old child to end", || {
        (!common::alive(first)).then_some(())
    });
    let second = common::serving_child(s.pid);
    let caps = common::thread_caps(second);
    assert!(caps.iter().all(|&c| c == 1 << 13), "CapEff {caps:x?}");
    common::wait_for("the new port", || {
        std::net::TcpStream::connect(("127.0.0.1", port2)).ok()
    });
    // Without `transparent`, no capability again.
    s.prefix.write_conf(&with("return 200 taken;"));
    hup(&s);
    let r = common::wait_for("the new configuration", || {
        common::get(port2, "/").ok().filter(|r| r.body == b"taken")
    });
    assert_eq!(r.status, 200);
    common::wait_for("the second child to end", || {
        (!common::alive(second)).then_some(())
    });
    let third = common::serving_child(s.pid);
    assert!(common::thread_caps(third).iter().all(|&c| c == 0));
    // The `user` line of a reload is the one the process runs as: no warning about it.
    let log = s.prefix.read("logs/error.log");
    assert!(!log.contains("\"user\" directive"), "{log}");
}
