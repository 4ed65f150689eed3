//! `stream {}` against real nginx: one configuration served by both, side by side, with the
//! same TCP/UDP echo servers behind them; the same sessions made to each; what the clients got,
//! the access log lines and the error log's lines about the sessions compared, after only the
//! ports are named (each server listens on its own).
//!
//! Debian builds the stream module as a dynamic module (`nginx -V`: `--with-stream=dynamic`,
//! package libnginx-mod-stream): nginx's copy of the configuration then begins with its
//! `load_module` line. If nginx or the module is missing the tests fail, loudly.

use std::fs;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::common::{free_port, wait_for};
use crate::stream::{dead_port, tcp, tcp_until, udp, Echo};

const STREAM_MODULE: &str = "/usr/lib/nginx/modules/ngx_stream_module.so";

fn nginx_bin() -> PathBuf {
    if let Some(p) = std::env::var_os("NGINX_BIN") {
        return PathBuf::from(p);
    }
    let p = Path::new("/usr/sbin/nginx");
    assert!(
        p.exists(),
        "nginx is not installed: the stream differential tests need it (apt-get install nginx \
         libnginx-mod-stream, or set NGINX_BIN)"
    );
    p.to_path_buf()
}

/// The line nginx needs before its configuration to have `stream {}`: `load_module` when its
/// stream module is dynamic (Debian's), nothing when it is built in.
fn load_module_line() -> String {
    let out = Command::new(nginx_bin())
        .arg("-V")
        .output()
        .expect("running nginx -V");
    let v = String::from_utf8_lossy(&out.stderr);
    if !v.contains("--with-stream=dynamic") {
        assert!(
            v.contains("--with-stream"),
            "this nginx has no stream module"
        );
        return String::new();
    }
    assert!(
        Path::new(STREAM_MODULE).exists(),
        "nginx's stream module is dynamic and {STREAM_MODULE} is missing: apt-get install \
         libnginx-mod-stream"
    );
    format!("load_module {STREAM_MODULE};\n")
}

/// One server (nginx or shoal) running a configuration in its own directory.
struct Side {
    dir: tempfile::TempDir,
    child: Child,
    /// Its listen ports, `P0`, `P1`, ... in the template.
    ports: Vec<u16>,
}

impl Drop for Side {
    fn drop(&mut self) {
        crate::diff::stop(&mut self.child);
    }
}

impl Side {
    fn start(bin: &Path, template: &str, nports: usize, nginx: bool) -> Side {
        let dir = tempfile::tempdir().unwrap();
        fs::create_dir(dir.path().join("logs")).unwrap();
        let ports: Vec<u16> = (0..nports).map(|_| free_port()).collect();
        let probe = free_port();
        let mut body = template.to_string();
        for (i, p) in ports.iter().enumerate().rev() {
            body = body.replace(&format!("P{i}"), &p.to_string());
        }
        let conf = format!(
            "{}daemon off;\nworker_processes 1;\npid logs/server.pid;\n\
             error_log logs/error.log info;\nevents {{ }}\nstream {{\n    \
             log_format s '$protocol $status $bytes_sent $bytes_received \"$upstream_addr\" \
             \"$upstream_bytes_sent\" \"$upstream_bytes_received\" $server_port $connection';\n    \
             access_log logs/stream.log s;\n{body}\n    \
             server {{ listen 127.0.0.1:{probe}; return ok; access_log off; }}\n}}\n",
            if nginx {
                load_module_line()
            } else {
                String::new()
            }
        );
        let file = dir.path().join("s.conf");
        fs::write(&file, conf).unwrap();
        let child = Command::new(bin)
            .arg("-p")
            .arg(dir.path())
            .arg("-c")
            .arg(&file)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("starting {}: {e}", bin.display()));
        let side = Side { dir, child, ports };
        // (Generous: a loaded 2-core machine has taken over 10 s to start one.)
        let deadline = Instant::now() + Duration::from_secs(30);
        // Started once the probe server answers (read whole, so that the probe connection has
        // its number before the test's first session).
        let answered = || {
            let Ok(mut c) = TcpStream::connect(("127.0.0.1", probe)) else {
                return false;
            };
            let _ = c.set_read_timeout(Some(Duration::from_secs(5)));
            let mut got = Vec::new();
            let _ = c.read_to_end(&mut got);
            got == b"ok"
        };
        while !answered() {
            assert!(
                Instant::now() < deadline,
                "{} did not start: {}",
                bin.display(),
                side.read("logs/error.log")
            );
            std::thread::sleep(Duration::from_millis(10));
        }
        side
    }

    fn read(&self, p: &str) -> String {
        fs::read_to_string(self.dir.path().join(p)).unwrap_or_default()
    }

    /// The text with this side's listen ports named `P0`... and `known` ports named as given;
    /// any other `127.0.0.1:PORT` (a client's or a proxy's own) is `127.0.0.1:EPH`.
    fn normalize(&self, text: &str, known: &[(u16, String)]) -> String {
        let mut names: Vec<(String, String)> = self
            .ports
            .iter()
            .enumerate()
            .map(|(i, p)| (p.to_string(), format!("P{i}")))
            .collect();
        names.extend(known.iter().map(|(p, n)| (p.to_string(), n.clone())));
        let mut out = String::new();
        let mut rest = text;
        while let Some(at) = rest.find(|c: char| c.is_ascii_digit()) {
            out.push_str(&rest[..at]);
            let end = rest[at..]
                .find(|c: char| !c.is_ascii_digit())
                .map_or(rest.len(), |e| at + e);
            let digits = &rest[at..end];
            let after_addr = out.ends_with("127.0.0.1:") || out.ends_with("0.0.0.0:");
            match names.iter().find(|(p, _)| p == digits) {
                Some((_, n)) if after_addr || out.ends_with(' ') || out.is_empty() => {
                    out.push_str(n)
                }
                _ if after_addr => out.push_str("EPH"),
                _ => out.push_str(digits),
            }
            rest = &rest[end..];
        }
        out.push_str(rest);
        out
    }

    /// The error log's lines about sessions (`*N ...`), with their level, time and pids off.
    fn session_lines(&self, known: &[(u16, String)]) -> Vec<String> {
        self.read("logs/error.log")
            .lines()
            .filter_map(|l| {
                let level_at = l.find(" [")?;
                let level_end = l[level_at..].find("] ")? + level_at;
                let level = &l[level_at + 2..level_end];
                let star = l.find(": *")?;
                let msg = &l[star + 2..];
                Some(format!("[{level}] {}", self.normalize(msg, known)))
            })
            .collect()
    }
}

/// nginx and shoal on one template (`P0`..: their own listen ports), with `known` upstream
/// ports to name in the logs.
pub(crate) struct Pair {
    nginx: Side,
    shoal: Side,
    known: Vec<(u16, String)>,
}

impl Pair {
    pub(crate) fn new(template: &str, nports: usize, known: &[(u16, &str)]) -> Pair {
        let shoal_bin = PathBuf::from(crate::common::BIN.as_str());
        Pair {
            nginx: Side::start(&nginx_bin(), template, nports, true),
            shoal: Side::start(&shoal_bin, template, nports, false),
            known: known.iter().map(|(p, n)| (*p, n.to_string())).collect(),
        }
    }

    /// Runs `f` against each side's port `i`, and checks both got the same.
    pub(crate) fn same<T: PartialEq + std::fmt::Debug>(&self, i: usize, f: impl Fn(u16) -> T) -> T {
        let n = f(self.nginx.ports[i]);
        let s = f(self.shoal.ports[i]);
        assert_eq!(s, n, "shoal (left) and nginx (right) answered differently");
        n
    }

    /// Both access logs, once each has `n` lines, compared.
    fn same_access_log(&self, n: usize) -> Vec<String> {
        let lines = |side: &Side| {
            wait_for(
                &format!("{n} access log lines: {}", side.read("logs/stream.log")),
                || {
                    let t = side.read("logs/stream.log");
                    let v: Vec<String> =
                        t.lines().map(|l| side.normalize(l, &self.known)).collect();
                    (v.len() >= n).then_some(v)
                },
            )
        };
        let (a, b) = (lines(&self.nginx), lines(&self.shoal));
        eprintln!("nginx:\n{}\nshoal:\n{}", a.join("\n"), b.join("\n"));
        assert_eq!(b, a, "access logs: shoal (left), nginx (right)");
        a
    }

    /// Both error logs' session lines that contain one of `needles`, compared.
    fn same_error_lines(&self, needles: &[&str]) {
        let pick = |side: &Side| -> Vec<String> {
            side.session_lines(&self.known)
                .into_iter()
                .filter(|l| needles.iter().any(|n| l.contains(n)))
                .collect()
        };
        // The last lines of a session are written as it ends: give both a moment.
        std::thread::sleep(Duration::from_millis(200));
        assert_eq!(
            pick(&self.shoal),
            pick(&self.nginx),
            "error logs: shoal (left), nginx (right)"
        );
    }
}

#[test]
fn tcp_balancing_failures_and_their_logs() {
    let (a, b) = (Echo::start("A:"), Echo::start("B:"));
    let dead = dead_port();
    let known = [(a.port, "BA"), (b.port, "BB"), (dead, "DEAD")];
    let t = format!(
        "upstream w {{ server 127.0.0.1:{a} weight=3; server 127.0.0.1:{b}; }}\n\
         upstream f {{ server 127.0.0.1:{dead}; server 127.0.0.1:{a}; }}\n\
         upstream none {{ server 127.0.0.1:{dead}; }}\n\
         upstream h {{ hash $remote_addr consistent; server 127.0.0.1:{a}; server 127.0.0.1:{b}; }}\n\
         server {{ listen 127.0.0.1:P0; proxy_pass w; }}\n\
         server {{ listen 127.0.0.1:P1; proxy_pass f; }}\n\
         server {{ listen 127.0.0.1:P2; proxy_pass none; }}\n\
         server {{ listen 127.0.0.1:P3; proxy_pass h; }}\n\
         server {{ listen 127.0.0.1:P4; proxy_pass 127.0.0.1:{dead}; proxy_next_upstream off; }}",
        a = a.port,
        b = b.port
    );
    let p = Pair::new(&t, 5, &known);
    for _ in 0..8 {
        p.same(0, |port| tcp(port, b"w"));
    }
    for _ in 0..3 {
        p.same(1, |port| tcp(port, b"f"));
    }
    for _ in 0..2 {
        p.same(2, |port| tcp(port, b"n"));
    }
    for _ in 0..3 {
        p.same(3, |port| tcp(port, b"h"));
    }
    p.same(4, |port| tcp(port, b"o"));
    p.same_access_log(8 + 3 + 2 + 3 + 1);
    p.same_error_lines(&[
        "connect() failed",
        "no live upstreams",
        "client disconnected",
        "upstream disconnected",
    ]);
}

#[test]
fn return_set_map_access_and_limit_conn() {
    let a = Echo::start("A:");
    let t = format!(
        "map $remote_addr $who {{ 127.0.0.1 local; default other; }}\n\
         split_clients \"$remote_addr\" $half {{ 50% one; * two; }}\n\
         geo $net {{ default far; 127.0.0.0/8 near; }}\n\
         limit_conn_zone $binary_remote_addr zone=z:1m;\n\
         server {{ listen 127.0.0.1:P0; set $g hi; return \"$g $who $half $net $server_port $protocol $remote_addr\\n\"; }}\n\
         server {{ listen 127.0.0.1:P1; allow 10.0.0.0/8; deny all; return no; }}\n\
         server {{ listen 127.0.0.1:P2; limit_conn z 1; proxy_pass 127.0.0.1:{}; }}",
        a.port
    );
    let p = Pair::new(&t, 3, &[(a.port, "BA")]);
    p.same(0, |port| {
        p.shoal.normalize(
            &p.nginx
                .normalize(&String::from_utf8_lossy(&tcp(port, b"")), &[]),
            &[],
        )
    });
    p.same(1, |port| tcp(port, b"x"));
    p.same(2, |port| {
        let mut first = TcpStream::connect(("127.0.0.1", port)).unwrap();
        first.write_all(b"1").unwrap();
        first
            .set_read_timeout(Some(Duration::from_secs(5)))
            .unwrap();
        let mut buf = [0u8; 8];
        let n = first.read(&mut buf).unwrap_or(0);
        let second = tcp(port, b"2");
        (buf[..n].to_vec(), second)
    });
    p.same_access_log(4);
    p.same_error_lines(&["access forbidden", "limiting connections"]);
}

#[test]
fn udp_and_proxy_protocol() {
    let a = Echo::start("A:");
    let t = format!(
        "server {{ listen 127.0.0.1:P0 udp; proxy_pass 127.0.0.1:{a}; proxy_responses 1; }}\n\
         server {{ listen 127.0.0.1:P1 proxy_protocol; set_real_ip_from 127.0.0.1; \
         return \"$remote_addr $proxy_protocol_addr $proxy_protocol_port $realip_remote_addr\"; }}\n\
         server {{ listen 127.0.0.1:P2; proxy_pass 127.0.0.1:{a}; proxy_protocol on; }}",
        a = a.port
    );
    let p = Pair::new(&t, 3, &[(a.port, "BA")]);
    p.same(0, |port| udp(port, b"ping"));
    p.same(0, |port| udp(port, b"pong"));
    p.same(1, |port| {
        tcp_until(
            port,
            b"PROXY TCP4 10.9.8.7 10.0.0.1 4242 80\r\n",
            b"127.0.0.1",
        )
    });
    p.same(1, |port| tcp(port, b"GARBAGE\r\n"));
    p.same(2, |port| {
        let got = tcp_until(port, b"z", b"z");
        // The PROXY header names the client's port, which differs.
        let text = String::from_utf8_lossy(&got).into_owned();
        let mut parts: Vec<String> = text.split(' ').map(str::to_string).collect();
        if parts.len() > 4 {
            parts[4] = "CPORT".into();
            parts[5] = parts[5].split("\r\n").nth(1).unwrap_or("").to_string();
        }
        parts
    });
    p.same_access_log(5);
    p.same_error_lines(&["broken header", "udp done"]);
}

#[test]
fn configuration_errors_match_nginx() {
    let cases = [
        "server { listen 1234; }",
        "server { proxy_pass 127.0.0.1:1; }",
        "server { listen 1234; proxy_pass 127.0.0.1:1; } server { listen 1234; proxy_pass 127.0.0.1:1; }",
        "upstream u { server 127.0.0.1; } server { listen 1234; proxy_pass u; }",
        "server { listen 1234; proxy_pass nosuch; }",
        "server { listen 1234; access_log logs/a.log; proxy_pass 127.0.0.1:1; }",
        "server { listen 1234; access_log logs/a.log combined; proxy_pass 127.0.0.1:1; }",
        "upstream u { server 127.0.0.1:1; keepalive 2; } server { listen 1234; proxy_pass u; }",
        "upstream u { server 127.0.0.1:1; ip_hash; } server { listen 1234; proxy_pass u; }",
        "server { listen 1234 default_server; proxy_pass 127.0.0.1:1; }",
        "server { listen 1234; proxy_pass 127.0.0.1:1; proxy_pass 127.0.0.1:2; }",
        "server { listen 1234; proxy_pass $nosuch; }",
        "server { listen 1234; proxy_timeout 1x; proxy_pass 127.0.0.1:1; }",
        "server { listen 1234; proxy_pass 127.0.0.1:1; } proxy_buffer_size 4k; tcp_nodelay maybe;",
        "upstream u { server 127.0.0.1:1 weight=0; } server { listen 1234; proxy_pass u; }",
        "upstream u { hash $remote_addr; server 127.0.0.1:1 backup; } server { listen 1234; proxy_pass u; }",
        "server { listen 1234 udp; listen 1234; proxy_pass 127.0.0.1:1; }",
        "server { listen 1234; return; }",
        "server { listen 1234; set x 1; return x; }",
        "log_format a x; log_format a y; server { listen 1234; return x; }",
    ];
    let load = load_module_line();
    for body in cases {
        let dir = tempfile::tempdir().unwrap();
        fs::create_dir(dir.path().join("logs")).unwrap();
        let file = dir.path().join("t.conf");
        let run = |bin: &Path, prefix: &str| {
            fs::write(
                &file,
                format!("{prefix}error_log stderr;\npid logs/t.pid;\nevents {{}}\nstream {{\n{body}\n}}\n"),
            )
            .unwrap();
            let out = Command::new(bin)
                .args(["-t", "-p"])
                .arg(dir.path())
                .arg("-c")
                .arg(&file)
                .output()
                .unwrap();
            let err = String::from_utf8_lossy(&out.stderr).into_owned();
            let lines: Vec<String> = err
                .lines()
                .filter_map(|l| {
                    let at = l.find("[emerg] ")?;
                    let rest = &l[at + 8..];
                    let msg = match rest.split_once(": ") {
                        Some((pid, m)) if pid.contains('#') => m,
                        _ => rest,
                    };
                    // The line number differs by nginx's load_module line.
                    let msg = match msg.rsplit_once(':') {
                        Some((m, n)) if n.chars().all(|c| c.is_ascii_digit()) => m,
                        _ => msg,
                    };
                    Some(msg.replace(&file.display().to_string(), "FILE"))
                })
                .collect();
            (out.status.success(), lines)
        };
        let n = run(&nginx_bin(), &load);
        let s = run(Path::new(crate::common::BIN.as_str()), "");
        assert_eq!(s, n, "{body}: shoal (left), nginx (right)");
    }
}

/// A TLS ClientHello record naming `sni` and offering `alpn` and TLS 1.3 (GREASE first), as a
/// browser's would; nothing after it is needed for `ssl_preread`.
pub fn client_hello(sni: &str, alpn: &[&str]) -> Vec<u8> {
    let ext = |ty: u16, data: &[u8]| {
        let mut e = ty.to_be_bytes().to_vec();
        e.extend_from_slice(&(data.len() as u16).to_be_bytes());
        e.extend_from_slice(data);
        e
    };
    let with_len16 = |data: &[u8]| {
        let mut v = (data.len() as u16).to_be_bytes().to_vec();
        v.extend_from_slice(data);
        v
    };
    let mut name = vec![0u8];
    name.extend_from_slice(&with_len16(sni.as_bytes()));
    let mut protos = Vec::new();
    for p in alpn {
        protos.push(p.len() as u8);
        protos.extend_from_slice(p.as_bytes());
    }
    let mut exts = ext(0, &with_len16(&name));
    exts.extend(ext(16, &with_len16(&protos)));
    exts.extend(ext(43, &[4, 0x0a, 0x0a, 3, 4]));
    let mut body = vec![3, 3];
    body.extend_from_slice(&[7; 32]);
    body.push(0);
    body.extend_from_slice(&[0, 2, 0x13, 1, 1, 0]);
    body.extend_from_slice(&with_len16(&exts));
    let mut hs = vec![1, 0];
    hs.extend_from_slice(&(body.len() as u16).to_be_bytes());
    hs.extend_from_slice(&body);
    let mut rec = vec![0x16, 3, 1];
    rec.extend_from_slice(&with_len16(&hs));
    rec
}

#[test]
fn ssl_preread_routes_by_server_name() {
    let (a, b) = (Echo::start("A:"), Echo::start("B:"));
    let t = format!(
        "map $ssl_preread_server_name $be {{ a.example 127.0.0.1:{}; default 127.0.0.1:{}; }}\n\
         log_format pre '$ssl_preread_server_name|$ssl_preread_alpn_protocols|$ssl_preread_protocol|$upstream_addr';\n\
         server {{ listen 127.0.0.1:P0; ssl_preread on; proxy_pass $be; access_log logs/pre.log pre; }}",
        a.port, b.port
    );
    let p = Pair::new(&t, 1, &[(a.port, "BA"), (b.port, "BB")]);
    for (sni, alpn) in [
        ("a.example", &["h2", "http/1.1"][..]),
        ("b.example", &[][..]),
    ] {
        let hello = client_hello(sni, alpn);
        p.same(0, |port| {
            tcp_until(port, &hello, &hello[hello.len() - 4..])[..2].to_vec()
        });
    }
    // Not TLS: the variables are empty, the default upstream takes it.
    p.same(0, |port| tcp(port, b"plain"));
    let lines = |side: &Side| {
        wait_for("3 preread lines", || {
            let t = side.read("logs/pre.log");
            let v: Vec<String> = t.lines().map(|l| side.normalize(l, &p.known)).collect();
            (v.len() >= 3).then_some(v)
        })
    };
    let n = lines(&p.nginx);
    assert_eq!(lines(&p.shoal), n);
    assert_eq!(n[0], "a.example|h2,http/1.1|TLSv1.3|127.0.0.1:BA");
}

#[test]
fn upstream_tls_and_names_resolved_at_run_time() {
    use crate::common::dns::{v4, Dns, Entry};
    use crate::common::tls::Pki;
    let mut pki = Pki::new();
    pki.issue("up", &["up.test"], false);
    let other = Pki::named("another CA");
    // The TLS upstream both proxy to: a shoal answering `hi` over TLS.
    let up = free_port();
    let _up = crate::common::Shoal::start(
        &format!(
            "daemon off;\nerror_log logs/error.log info;\nevents {{ }}\nstream {{ server {{ \
             listen 127.0.0.1:{up} ssl; {} return hi; }} }}\n",
            pki.ssl_lines("up")
        ),
        up,
    );
    let a = Echo::start("A:");
    let dns = Dns::start(&[
        ("backend.test", v4("127.0.0.1", 30)),
        ("nx.test", Entry::NxDomain),
    ]);
    let ca = pki.path("ca.crt").display().to_string();
    let t = format!(
        "upstream two {{ server 127.0.0.1:{up}; server 127.0.0.1:{up}; }}\n\
         server {{ listen 127.0.0.1:P0; proxy_pass 127.0.0.1:{up}; proxy_ssl on; proxy_ssl_verify on; \
           proxy_ssl_trusted_certificate {ca}; proxy_ssl_name up.test; }}\n\
         server {{ listen 127.0.0.1:P1; proxy_pass 127.0.0.1:{up}; proxy_ssl on; proxy_ssl_verify on; \
           proxy_ssl_trusted_certificate {ca}; proxy_ssl_name other.test; }}\n\
         server {{ listen 127.0.0.1:P2; proxy_pass two; proxy_ssl on; proxy_ssl_verify on; \
           proxy_ssl_trusted_certificate {}; proxy_ssl_name up.test; }}\n\
         server {{ listen 127.0.0.1:P3; set $h backend.test; proxy_pass $h:{echo}; }}\n\
         server {{ listen 127.0.0.1:P4; set $h nx.test; proxy_pass $h:{echo}; resolver {dns}; }}",
        other.path("ca.crt").display(),
        echo = a.port,
        dns = dns.addr(),
    );
    let p = Pair::new(&t, 5, &[(up, "UP"), (a.port, "BA")]);
    assert_eq!(p.same(0, |port| tcp_until(port, b"", b"hi")), b"hi");
    for i in 1..5 {
        assert_eq!(p.same(i, |port| tcp(port, b"x")), b"");
    }
    // (nginx's resolver gives its UDP socket a connection number, shoal's does not: a session
    // after a resolution would be numbered differently, so the resolution comes last. The
    // resolved name's session is `stream_upstream`'s test.)
    p.same_access_log(5);
    p.same_error_lines(&[
        "SSL",
        "temporarily disabled",
        "resolve",
        "connected to 127.0.0.1:UP",
    ]);
}

#[test]
fn ssl_alpn_matches_nginx() {
    use crate::stream::s_client_alpn;
    let mut pki = crate::common::tls::Pki::new();
    pki.issue("srv", &["127.0.0.1", "localhost"], false);
    let t = format!(
        "ssl_alpn h2 http/1.1;\n{ssl}\n\
         log_format alpn '$status \"$ssl_alpn_protocol\"';\n\
         server {{ listen 127.0.0.1:P0 ssl; return \"<<alpn=$ssl_alpn_protocol>>\"; \
           access_log logs/alpn.log alpn; }}\n\
         server {{ listen 127.0.0.1:P1 ssl; ssl_alpn x-one; return \"<<alpn=$ssl_alpn_protocol>>\"; \
           access_log logs/alpn.log alpn; }}",
        ssl = pki.ssl_lines("srv"),
    );
    let p = Pair::new(&t, 2, &[]);
    let offers = [
        Some("http/1.1,h2"),
        Some("x,http/1.1"),
        None,
        Some("imap"),
        Some("h2,http/1.1"),
    ];
    let mut got = Vec::new();
    for o in offers {
        got.push(p.same(0, |port| s_client_alpn(port, o)));
    }
    assert_eq!(got[0], "ALPN protocol: h2 [h2]");
    assert_eq!(got[3], "refused: no application protocol");
    for o in [Some("h2,x-one"), Some("h2"), None] {
        got.push(p.same(1, |port| s_client_alpn(port, o)));
    }
    assert_eq!(got[5], "ALPN protocol: x-one [x-one]");
    let lines = |side: &Side| {
        wait_for("eight sessions logged", || {
            let t = side.read("logs/alpn.log");
            (t.lines().count() >= 8).then_some(t)
        })
    };
    let n = lines(&p.nginx);
    assert_eq!(lines(&p.shoal), n, "shoal (left), nginx (right)");
}

#[test]
fn a_stream_without_ssl_alpn_negotiates_none_as_nginx() {
    use crate::stream::s_client_alpn;
    let mut pki = crate::common::tls::Pki::new();
    pki.issue("srv", &["127.0.0.1", "localhost"], false);
    let t = format!(
        "server {{ listen 127.0.0.1:P0 ssl; {} return \"<<alpn=$ssl_alpn_protocol>>\"; }}",
        pki.ssl_lines("srv"),
    );
    let p = Pair::new(&t, 1, &[]);
    for o in [Some("h2"), Some("http/1.1"), None] {
        assert_eq!(
            p.same(0, |port| s_client_alpn(port, o)),
            "No ALPN negotiated []"
        );
    }
}
