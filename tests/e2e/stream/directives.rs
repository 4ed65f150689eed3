//! What a stream server does besides balancing: `return`, `set`, `map`, `allow`/`deny` and
//! `limit_conn`; the PROXY protocol both ways with `set_real_ip_from`; configuration errors in
//! nginx's words; and a server's own `error_log`.

use std::net::TcpStream;

use crate::common::{free_port, wait_for, Prefix, Shoal};

use super::{dead_port, log_lines, start, tcp, tcp_until, Echo};

#[test]
fn return_set_map_and_access_rules() {
    let a = Echo::start("A:");
    let (port, denied, lport) = (free_port(), free_port(), free_port());
    let s = start(
        &format!(
            "map $remote_addr $who {{ 127.0.0.1 local; default other; }}\n\
             limit_conn_zone $binary_remote_addr zone=one:1m;\n\
             server {{ listen 127.0.0.1:{port}; set $greet hello; return \"$greet $who $server_port\\n\"; }}\n\
             server {{ listen 127.0.0.1:{denied}; deny 127.0.0.1; allow all; return no; }}\n\
             server {{ listen 127.0.0.1:{lport}; limit_conn one 1; proxy_pass 127.0.0.1:{}; }}",
            a.port
        ),
        port,
    );
    assert_eq!(
        String::from_utf8(tcp(port, b"")).unwrap(),
        format!("hello local {port}\n")
    );
    assert_eq!(tcp(denied, b"x"), b"");
    s.wait_log(
        "access forbidden by rule while initializing session, client: 127.0.0.1, server: 127.0.0.1:",
        1,
    );
    // limit_conn: a second session while the first is open is refused.
    let first = TcpStream::connect(("127.0.0.1", lport)).unwrap();
    wait_for("the first session to be counted", || {
        s.error_log().contains("proxy 127.0.0.1:").then_some(())
    });
    assert_eq!(tcp(lport, b"x"), b"");
    s.wait_log("limiting connections by zone \"one\"", 1);
    drop(first);
    let text = wait_for("the refused sessions logged", || {
        let t = s.prefix.read("logs/stream.log");
        (t.contains("TCP 403 0 ") && t.contains("TCP 503 0 ") && t.lines().count() >= 4)
            .then_some(t)
    });
    assert_eq!(text.lines().count(), 4, "{text}");
}

#[test]
fn proxy_protocol_in_and_out_with_set_real_ip_from() {
    let a = Echo::start("A:");
    let (port, front, probe) = (free_port(), free_port(), free_port());
    let s = Shoal::start(
        &format!(
            "daemon off;\nerror_log logs/error.log info;\nevents {{ }}\nstream {{\n\
             log_format s '$remote_addr $proxy_protocol_addr $realip_remote_addr';\n\
             access_log logs/stream.log s;\n\
             server {{ listen 127.0.0.1:{port} proxy_protocol; set_real_ip_from 127.0.0.1; \
             proxy_pass 127.0.0.1:{}; proxy_protocol on; }}\n\
             server {{ listen 127.0.0.1:{front}; proxy_pass 127.0.0.1:{port}; proxy_protocol on; }}\n\
             server {{ listen 127.0.0.1:{probe}; return ok; access_log off; }}\n}}\n",
            a.port
        ),
        probe,
    );
    let got = tcp_until(port, b"PROXY TCP4 10.1.2.3 10.0.0.1 5555 80\r\nhi", b"hi");
    assert!(
        got.starts_with(b"A:PROXY TCP4 10.1.2.3 127.0.0.1 5555 "),
        "{got:?}"
    );
    let firsts = a.firsts.lock().unwrap().clone();
    assert!(
        firsts[0].starts_with(b"PROXY TCP4 10.1.2.3 127.0.0.1 5555 "),
        "{:?}",
        String::from_utf8_lossy(&firsts[0])
    );
    let lines = log_lines(&s, 1);
    assert_eq!(lines[0], "10.1.2.3 10.1.2.3 127.0.0.1");
    // Through the front server, which sends its own header: the client is 127.0.0.1.
    let got = tcp_until(front, b"x", b"x");
    assert!(
        got.starts_with(b"A:PROXY TCP4 127.0.0.1 127.0.0.1 "),
        "{got:?}"
    );
    let lines = log_lines(&s, 3);
    assert!(
        lines.iter().any(|l| l == "127.0.0.1 127.0.0.1 127.0.0.1"),
        "{lines:?}"
    );
    // A broken header: nginx's line, the session closed.
    assert_eq!(tcp(port, b"GARBAGE\r\n"), b"");
    s.wait_log("broken header: \"GARBAGE", 1);
}

#[test]
fn configuration_errors_read_as_nginx_s() {
    let cases: &[(&str, &str)] = &[
        ("server { listen 1234; }", "no handler for server in"),
        ("server { proxy_pass 127.0.0.1:1; }", "no \"listen\" is defined for server in"),
        (
            "server { listen 1234; proxy_pass 127.0.0.1:1; } server { listen 1234; proxy_pass 127.0.0.1:1; }",
            "duplicate \"0.0.0.0:1234\" address and port pair in",
        ),
        ("upstream u { server 127.0.0.1; } server { listen 1234; proxy_pass u; }", "no port in upstream \"127.0.0.1\" in"),
        ("server { listen 1234; proxy_pass nosuch; }", "no port in upstream \"nosuch\" in"),
        ("server { listen 1234; access_log logs/a.log; proxy_pass 127.0.0.1:1; }", "log format is not specified in"),
        ("server { listen 1234; access_log logs/a.log combined; proxy_pass 127.0.0.1:1; }", "unknown log format \"combined\" in"),
        ("upstream u { server 127.0.0.1:1; keepalive 2; } server { listen 1234; proxy_pass u; }", "\"keepalive\" directive is not allowed here in"),
        ("server { listen 1234 default_server; proxy_pass 127.0.0.1:1; }", "the invalid \"default_server\" parameter in"),
        ("server { listen 1234; proxy_pass 127.0.0.1:1; proxy_pass 127.0.0.1:2; }", "\"proxy_pass\" directive is duplicate in"),
        ("server { listen 1234; proxy_pass $nosuch; }", "unknown \"nosuch\" variable"),
        ("ssl_alpn h2; server { listen 1234; ssl_alpn a; ssl_alpn b; return x; }", "\"ssl_alpn\" directive is duplicate in"),
        (&format!("server {{ listen 1234; ssl_alpn h2 {}; return x; }}", "p".repeat(256)), "\"ssl_alpn\" directive protocol too long in"),
    ];
    for (body, want) in cases {
        let p = Prefix::new();
        p.write_conf(&format!("events {{ }}\nstream {{\n{body}\n}}\n"));
        let out = p.run(&["-t"]);
        let text = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{body}: accepted");
        assert!(text.contains(want), "{body}: {text}");
    }
    // And a good one passes, with no warning about stream being ignored.
    let p = Prefix::new();
    // (Debian's nginx.conf loads the stream module: shoal has it built in.)
    p.write_conf(
        "load_module modules/ngx_stream_module.so;\nevents { }\n\
         stream { upstream u { server 127.0.0.1:1; } server { listen 1234; proxy_pass u; } }\n",
    );
    let out = p.run(&["-t"]);
    let text = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{text}");
    assert!(!text.contains("not implemented"), "{text}");
}

#[test]
fn a_server_s_error_log_takes_its_sessions_lines() {
    let port = free_port();
    let s = start(
        &format!(
            "server {{ listen 127.0.0.1:{port}; error_log logs/srv.err info; \
             proxy_pass 127.0.0.1:{}; }}",
            dead_port()
        ),
        port,
    );
    assert_eq!(tcp(port, b"x"), b"");
    wait_for("the server's error log", || {
        s.prefix
            .read("logs/srv.err")
            .contains("(111: Connection refused) while connecting to upstream")
            .then_some(())
    });
    assert!(
        !s.error_log().contains("Connection refused"),
        "{}",
        s.error_log()
    );
}
