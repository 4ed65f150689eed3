//! Real client addresses end to end, shoal alone (what the differential suite cannot compare:
//! unix sockets, logs, timeouts, TLVs nginx 1.22 lacks): `set_real_ip_from unix:` on a unix
//! listener; PROXY protocol v1 and v2 headers written here, TLVs by name and number, malformed
//! ones closed with nginx's log lines while another client goes on, a header that never comes
//! timed out, one split across writes waited for; realip's address in the access and error
//! logs; a huge `X-Forwarded-For` costing no more than its header limit.

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::time::{Duration, Instant};

use crate::common::{free_port, Client, Shoal};

fn conf(port: u16, http: &str, listen: &str, server: &str) -> String {
    format!(
        "daemon off;\nerror_log logs/error.log info;\nevents {{ }}\n\
         http {{\n{http}\n    server {{\n        listen 127.0.0.1:{port}{listen};\n\
         {server}\n    }}\n}}\n"
    )
}

/// Sends `bytes` on a new connection and reads until the server closes.
fn exchange(port: u16, bytes: &[u8]) -> Vec<u8> {
    let mut c = Client::connect(port);
    // A server that answers before reading it all may close on the rest: not an error here.
    let _ = c.send(bytes);
    let mut out = Vec::new();
    let _ = c.stream().try_clone().unwrap().read_to_end(&mut out);
    out
}

fn body(answer: &[u8]) -> String {
    let text = String::from_utf8_lossy(answer);
    text.split_once("\r\n\r\n")
        .map_or(String::new(), |(_, b)| b.to_string())
}

/// A PROXY protocol v2 header (PROXY command, TCP over IPv4, 1.2.3.4:1111 to
/// 5.6.7.8:2222) with TLVs.
fn v2(tlvs: &[u8]) -> Vec<u8> {
    let mut body = vec![1, 2, 3, 4, 5, 6, 7, 8, 0x04, 0x57, 0x08, 0xae];
    body.extend_from_slice(tlvs);
    let mut h = b"\r\n\r\n\0\r\nQUIT\n\x21\x11".to_vec();
    h.extend_from_slice(&(body.len() as u16).to_be_bytes());
    h.extend_from_slice(&body);
    h
}

fn tlv(t: u8, v: &[u8]) -> Vec<u8> {
    let mut out = vec![t];
    out.extend_from_slice(&(v.len() as u16).to_be_bytes());
    out.extend_from_slice(v);
    out
}

#[test]
fn a_unix_socket_trusted_with_unix() {
    let port = free_port();
    let prefix = crate::common::Prefix::new();
    let sock = prefix.join("s.sock");
    let s = Shoal::start_in(
        prefix,
        &conf(
            port,
            "log_format real '$remote_addr $remote_port $realip_remote_addr';\n\
             access_log logs/access.log real;",
            &format!(";\n        listen unix:{}", sock.display()),
            "set_real_ip_from unix:;\n\
             location / { return 200 \"ra=$remote_addr rp=$remote_port \
             rra=$realip_remote_addr rrp=$realip_remote_port\\n\"; }",
        ),
        port,
        &[],
    );
    let ask = |headers: &str| {
        let mut u = UnixStream::connect(&sock).unwrap();
        u.set_read_timeout(Some(crate::common::WAIT)).unwrap();
        u.write_all(format!("GET / HTTP/1.0\r\n{headers}\r\n").as_bytes())
            .unwrap();
        let mut out = Vec::new();
        u.read_to_end(&mut out).unwrap();
        body(&out)
    };
    assert_eq!(
        ask("X-Real-IP: 1.2.3.4:99\r\n"),
        "ra=1.2.3.4 rp=99 rra=unix: rrp=\n"
    );
    assert_eq!(ask(""), "ra=unix: rp= rra=unix: rrp=\n");
    // TCP clients are not trusted by `unix:`.
    let tcp = body(&exchange(
        port,
        b"GET / HTTP/1.0\r\nX-Real-IP: 1.2.3.4\r\n\r\n",
    ));
    assert!(tcp.starts_with("ra=127.0.0.1 rp="), "{tcp}");
    assert!(tcp.contains(" rra=127.0.0.1 rrp="), "{tcp}");
    let log = std::fs::read_to_string(s.prefix.join("logs/access.log")).unwrap();
    assert!(log.starts_with("1.2.3.4 99 unix:\nunix:  unix:\n"), "{log}");
}

#[test]
fn proxy_protocol_addresses_tlvs_and_the_access_log() {
    let port = free_port();
    let s = Shoal::start(
        &conf(
            port,
            "log_format pp '$proxy_protocol_addr:$proxy_protocol_port \
             $proxy_protocol_server_addr:$proxy_protocol_server_port $remote_addr \
             $proxy_protocol_tlv_alpn';\n\
             access_log logs/access.log pp;",
            " proxy_protocol",
            "location / { return 200 \"alpn=$proxy_protocol_tlv_alpn \
             a=$proxy_protocol_tlv_authority x=$proxy_protocol_tlv_0x02 \
             ea=$proxy_protocol_tlv_0xEA v=$proxy_protocol_tlv_ssl_version \
             s21=$proxy_protocol_tlv_ssl_0x21 cn=$proxy_protocol_tlv_ssl_cn \
             verify=$proxy_protocol_tlv_ssl_verify u=$proxy_protocol_tlv_unique_id \
             bad=$proxy_protocol_tlv_nope\\n\"; }\n\
             location /real/ { return 200 \"$remote_addr $remote_port\\n\"; }\n\
             set_real_ip_from 127.0.0.1;\n\
             real_ip_header proxy_protocol;",
        ),
        port,
    );
    let mut ssl = vec![0x05];
    ssl.extend_from_slice(&0u32.to_be_bytes());
    ssl.extend_from_slice(&tlv(0x21, b"TLSv1.3"));
    ssl.extend_from_slice(&tlv(0x22, b"client.example"));
    let mut tlvs = tlv(0x01, b"h2");
    tlvs.extend_from_slice(&tlv(0x02, b"example.com"));
    tlvs.extend_from_slice(&tlv(0x20, &ssl));
    tlvs.extend_from_slice(&tlv(0xea, b"vpce-0123"));
    let mut req = v2(&tlvs);
    req.extend_from_slice(b"GET / HTTP/1.0\r\n\r\n");
    assert_eq!(
        body(&exchange(port, &req)),
        "alpn=h2 a=example.com x=example.com ea=vpce-0123 v=TLSv1.3 s21=TLSv1.3 \
         cn=client.example verify=0 u= bad=\n"
    );
    // realip from the header (its port too), at the server's level: `return` sees it.
    let v1 = b"PROXY TCP6 2001:db8::7 ::1 4242 443\r\nGET /real/ HTTP/1.0\r\n\r\n";
    assert_eq!(body(&exchange(port, v1)), "2001:db8::7 4242\n");
    let unknown = b"PROXY UNKNOWN\r\nGET /real/ HTTP/1.0\r\n\r\n";
    assert!(body(&exchange(port, unknown)).starts_with("127.0.0.1 "));
    // A keep-alive connection keeps its header for every request.
    let mut c = Client::connect(port);
    c.send(b"PROXY TCP4 9.8.7.6 5.6.7.8 1000 80\r\n").unwrap();
    for _ in 0..2 {
        let r = c.get("/real/").unwrap();
        assert_eq!(r.body, b"9.8.7.6 1000\n");
    }
    drop(c);
    let log = crate::common::wait_for("the access log", || {
        let l = std::fs::read_to_string(s.prefix.join("logs/access.log")).ok()?;
        (l.lines().count() >= 5).then_some(l)
    });
    let lines: Vec<&str> = log.lines().collect();
    assert_eq!(lines[0], "1.2.3.4:1111 5.6.7.8:2222 1.2.3.4 h2");
    assert_eq!(lines[1], "2001:db8::7:4242 ::1:443 2001:db8::7 -");
    assert_eq!(lines[2], "-:- -:- 127.0.0.1 -");
    assert_eq!(lines[3], "9.8.7.6:1000 5.6.7.8:80 9.8.7.6 -");
}

#[test]
fn malformed_headers_close_with_nginx_lines_and_others_go_on() {
    let port = free_port();
    let s = Shoal::start(
        &conf(
            port,
            "",
            " proxy_protocol",
            "location / { return 200 \"$proxy_protocol_addr\\n\"; }",
        ),
        port,
    );
    // A client in the middle of its keep-alive connection.
    let mut good = Client::connect(port);
    good.send(b"PROXY TCP4 1.2.3.4 5.6.7.8 1111 2222\r\n")
        .unwrap();
    assert_eq!(good.get("/").unwrap().body, b"1.2.3.4\n");
    let mut version3 = v2(&[]);
    version3[12] = 0x31;
    let mut short = v2(&[]);
    short[15] = 4;
    short.truncate(20);
    let mut huge = v2(&tlv(0xe0, &[b'x'; 2000]));
    huge.truncate(100);
    for (bytes, line) in [
        (
            &b"PROXY TCP5 1.2.3.4 5.6.7.8 1111 2222\r\nGET / HTTP/1.0\r\n\r\n"[..],
            Some(
                "broken header: \"PROXY TCP5 1.2.3.4 5.6.7.8 1111 2222\r\nGET / HTTP/1.0\r\n\r\n\"",
            ),
        ),
        (
            b"GET / HTTP/1.1\r\nHost: x\r\n\r\n",
            Some("broken header: \"GET / HTTP/1.1\r\nHost: x\r\n\r\n\""),
        ),
        (&version3, Some("unknown PROXY protocol version: 3")),
        // Longer than `client_header_buffer_size` (1k).
        (&huge, Some("header is too large")),
        // nginx says nothing of a too short address block.
        (&short, None),
    ] {
        let mut c = Client::connect(port);
        c.send(bytes).unwrap();
        assert!(c.closed_by_peer(), "{bytes:?}");
        if let Some(line) = line {
            s.wait_log(
                &format!(
                    "{line} while reading PROXY protocol, client: 127.0.0.1, \
                     server: 127.0.0.1:{port}"
                ),
                1,
            );
        }
    }
    assert!(s.error_log().contains("[error]"));
    // The first client was not disturbed.
    assert_eq!(good.get("/").unwrap().body, b"1.2.3.4\n");
    // A client that closes before its header: info, as nginx.
    drop(std::net::TcpStream::connect(("127.0.0.1", port)).unwrap());
    s.wait_log(
        "client closed connection while reading PROXY protocol, client: 127.0.0.1",
        1,
    );
}

#[test]
fn a_header_that_never_comes_times_out_and_a_split_one_is_waited_for() {
    let port = free_port();
    let s = Shoal::start(
        &conf(
            port,
            "client_header_timeout 1s;",
            " proxy_protocol",
            "location / { return 200 \"$proxy_protocol_addr\\n\"; }",
        ),
        port,
    );
    let t = Instant::now();
    let mut silent = Client::connect(port);
    let mut partial = Client::connect(port);
    partial.send(b"PROXY TCP4 1.2.").unwrap();
    assert!(silent.closed_by_peer());
    assert!(partial.closed_by_peer());
    assert!(
        t.elapsed() >= Duration::from_millis(900),
        "{:?}",
        t.elapsed()
    );
    s.wait_log(
        &format!(
            "client timed out (110: Connection timed out) while reading PROXY protocol, \
             client: 127.0.0.1, server: 127.0.0.1:{port}"
        ),
        2,
    );
    // A header in pieces: nginx reads only its first read; shoal waits for the rest.
    let mut c = Client::connect(port);
    for piece in [
        &b"PRO"[..],
        b"XY TCP4 1.2.3.4 5.6.7.8",
        b" 1111 2222\r",
        b"\n",
    ] {
        c.send(piece).unwrap();
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(c.get("/").unwrap().body, b"1.2.3.4\n");
    let h = v2(&[]);
    let mut c = Client::connect(port);
    c.send(&h[..7]).unwrap();
    std::thread::sleep(Duration::from_millis(50));
    c.send(&h[7..]).unwrap();
    assert_eq!(c.get("/").unwrap().body, b"1.2.3.4\n");
}

#[test]
fn the_real_address_in_the_logs() {
    let port = free_port();
    let s = Shoal::start(
        &conf(
            port,
            "log_format real '$remote_addr|$remote_port|$realip_remote_addr|$status';\n\
             access_log logs/access.log real;",
            "",
            "root html;\n\
             set_real_ip_from 127.0.0.1;\n\
             real_ip_header X-Forwarded-For;\n\
             real_ip_recursive on;",
        ),
        port,
    );
    let r = exchange(
        port,
        b"GET /missing HTTP/1.0\r\nX-Forwarded-For: 203.0.113.9:5555, 127.0.0.1\r\n\r\n",
    );
    assert!(r.starts_with(b"HTTP/1.1 404"));
    s.wait_log("client: 203.0.113.9, server: ", 1);
    // The next request on a connection starts from the connection's own address.
    let mut c = Client::connect(port);
    c.send(b"GET /missing HTTP/1.1\r\nHost: x\r\nX-Forwarded-For: 198.51.100.1\r\n\r\n")
        .unwrap();
    assert_eq!(c.read_response().unwrap().status, 404);
    assert_eq!(c.get("/missing").unwrap().status, 404);
    drop(c);
    let log = crate::common::wait_for("the access log", || {
        let l = std::fs::read_to_string(s.prefix.join("logs/access.log")).ok()?;
        (l.lines().count() >= 3).then_some(l)
    });
    let lines: Vec<&str> = log.lines().collect();
    assert!(
        lines[0].starts_with("203.0.113.9|5555|127.0.0.1|404"),
        "{log}"
    );
    assert!(lines[1].starts_with("198.51.100.1||127.0.0.1|404"), "{log}");
    assert!(lines[2].starts_with("127.0.0.1|"), "{log}");
    assert!(!lines[2].starts_with("127.0.0.1||"), "{log}");
}

#[test]
fn a_huge_forwarded_for_costs_no_more_than_its_header_limit() {
    let port = free_port();
    let _s = Shoal::start(
        &conf(
            port,
            "large_client_header_buffers 4 512k;",
            "",
            "set_real_ip_from 127.0.0.1;\n\
             set_real_ip_from 10.0.0.0/8;\n\
             real_ip_header X-Forwarded-For;\n\
             real_ip_recursive on;\n\
             location / { return 200 \"$remote_addr\\n\"; }",
        ),
        port,
    );
    // 30,000 trusted hops (about 360 kB) behind the real client, walked in one pass.
    let mut chain = String::from("198.51.100.7");
    for i in 0..30_000 {
        chain.push_str(&format!(", 10.{}.{}.1", i / 256 % 256, i % 256));
    }
    let t = Instant::now();
    let r = exchange(
        port,
        format!("GET / HTTP/1.0\r\nX-Forwarded-For: {chain}\r\n\r\n").as_bytes(),
    );
    assert_eq!(body(&r), "198.51.100.7\n");
    assert!(t.elapsed() < Duration::from_secs(2), "{:?}", t.elapsed());
    // Junk as long: the walk stops at its first word.
    let junk = "x".repeat(400_000);
    let r = exchange(
        port,
        format!("GET / HTTP/1.0\r\nX-Forwarded-For: {junk}\r\n\r\n").as_bytes(),
    );
    assert_eq!(body(&r), "127.0.0.1\n");
    // Past the header limit: refused before anything reads it, as any header.
    let over = "1".repeat(600_000);
    let r = exchange(
        port,
        format!("GET / HTTP/1.0\r\nX-Forwarded-For: {over}\r\n\r\n").as_bytes(),
    );
    assert!(
        r.starts_with(b"HTTP/1.1 400"),
        "{}",
        String::from_utf8_lossy(&r[..40.min(r.len())])
    );
}

/// `-t` on an `http` block holding `http`: its stderr, and whether it passed.
fn test_http(http: &str) -> (bool, String) {
    let p = crate::common::Prefix::new();
    fs_write(&p, "geo.inc", "1.2.3.4 x;\nranges;\n");
    p.write_conf(&format!("events {{}}\nhttp {{\n{http}\n}}\n"));
    let out = p.run(&["-t"]);
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn fs_write(p: &crate::common::Prefix, name: &str, text: &str) {
    std::fs::write(p.join("conf").join(name), text).unwrap();
}

/// The messages nginx 1.22 gives for each (its `-t` run on the same lines), at its level.
#[test]
fn configuration_messages_are_nginx_ones() {
    for (http, level, message) in [
        (
            "server { set_real_ip_from 1.2.3.5/24; }",
            "warn",
            "low address bits of 1.2.3.5/24 are meaningless",
        ),
        (
            "server { real_ip_header X-Real-IP; real_ip_header X-Forwarded-For; }",
            "emerg",
            "\"real_ip_header\" directive is duplicate",
        ),
        (
            "server { real_ip_recursive maybe; }",
            "emerg",
            "invalid value \"maybe\" in \"real_ip_recursive\" directive, it must be \"on\" or \"off\"",
        ),
        (
            "geo $a { 1.2.3.4 x; ranges; }",
            "emerg",
            "the \"ranges\" directive must be the first directive inside \"geo\" block",
        ),
        (
            "geo $a { include geo.inc; }",
            "emerg",
            "the \"ranges\" directive must be the first directive inside \"geo\" block in ",
        ),
        (
            "geo $a { 1.2.3.4 x y; }",
            "emerg",
            "invalid number of the geo parameters",
        ),
        ("geo $a { default; }", "emerg", "invalid number of the geo parameters"),
        (
            "geo $a { 255.255.255.255/32 x; }",
            "emerg",
            "invalid network \"255.255.255.255/32\"",
        ),
        ("geo $a { proxy all; }", "emerg", "invalid network \"all\""),
        ("geo $a { ranges x; }", "emerg", "invalid network \"ranges\""),
        (
            "geo $a { 10.1.2.3/16 x; }",
            "warn",
            "low address bits of 10.1.2.3/16 are meaningless",
        ),
        (
            "geo $a { 10.1.0.0/16 x; 10.1.2.3/16 y; }",
            "warn",
            "duplicate network \"10.1.2.3/16\", value: \"y\", old value: \"x\"",
        ),
        (
            "geo $a { default a; default b; }",
            "warn",
            "duplicate network \"default\", value: \"b\", old value: \"a\"",
        ),
        (
            "geo $a { delete 1.2.3.0/24; }",
            "warn",
            "no network \"1.2.3.0/24\" to delete",
        ),
        (
            "geo $a { ranges; delete 1.2.3.0-1.2.3.5; }",
            "warn",
            "no address range \"1.2.3.0-1.2.3.5\" to delete",
        ),
        (
            "geo $a { ranges; 1.2.3.9-1.2.3.5 x; }",
            "emerg",
            "invalid range \"1.2.3.9-1.2.3.5\"",
        ),
        ("geo $a { ranges; 1.2.3.4 x; }", "emerg", "invalid range \"1.2.3.4\""),
        ("geo $a { ranges; ::1-::2 x; }", "emerg", "invalid range \"::1-::2\""),
        (
            "geo $a { ranges; 1.2.3.0-1.2.3.255 a; 1.2.3.10-1.2.4.5 b; }",
            "emerg",
            "range \"1.2.3.10-1.2.4.5\" overlaps \"1.2.3.0-1.2.3.255\"",
        ),
        (
            "geo $a { ranges; 10.0.0.0-10.255.255.255 a; 10.1.0.0-10.1.255.255 b; }",
            "warn",
            "duplicate range \"10.1.0.0-10.1.255.255\", value: \"b\", old value: \"a\"",
        ),
        (
            "geo $a { ranges; default a; default b; }",
            "warn",
            "duplicate default geo range value: \"b\", old value: \"a\"",
        ),
        ("geo a { }", "emerg", "invalid variable name \"a\""),
        ("geo $uri { }", "emerg", "the duplicate \"uri\" variable"),
        ("geo $a $b { }", "emerg", "unknown \"a\" variable"),
        (
            "geo $a $b $c { }",
            "emerg",
            "invalid number of arguments in \"geo\" directive",
        ),
        (
            "server { location / { valid_referers none blocked; } }",
            "emerg",
            "the \"none\" or \"blocked\" referers are specified in the \"valid_referers\" \
             directive without any valid referer",
        ),
        (
            "server { location / { valid_referers a.*.b; } }",
            "emerg",
            "invalid hostname or wildcard \"a.*.b\"",
        ),
        (
            "server { location / { valid_referers a.com/x A.COM/y; } }",
            "emerg",
            "conflicting parameter \"a.com\"",
        ),
        (
            "server { location / { valid_referers ~[; } }",
            "emerg",
            "pcre2_compile() failed: missing terminating ] for character class in \"[\"",
        ),
        (
            "valid_referers a.com;",
            "emerg",
            "\"valid_referers\" directive is not allowed here",
        ),
    ] {
        let (ok, err) = test_http(http);
        assert!(
            err.contains(&format!("[{level}] {message}")),
            "{http}\n{err}"
        );
        assert_eq!(ok, level == "warn", "{http}\n{err}");
    }
}

/// `listen ... ssl proxy_protocol` (a TLS address behind a load balancer): the header comes
/// before the ClientHello, whole or in pieces, and the handshake reads on from its last byte.
#[test]
fn a_proxy_header_before_the_tls_handshake() {
    use crate::common::tls::{Opts, Pki, TlsClient};
    let mut pki = Pki::new();
    pki.issue("a", &["a.test"], false);
    let port = free_port();
    let s = Shoal::start(
        &conf(
            port,
            "",
            " ssl proxy_protocol",
            &format!(
                "server_name a.test;\n{}\n\
                 set_real_ip_from 127.0.0.1;\nreal_ip_header proxy_protocol;\n\
                 location / {{ return 200 \"$remote_addr $proxy_protocol_port $https\\n\"; }}",
                pki.ssl_lines("a")
            ),
        ),
        port,
    );
    let v1: &[u8] = b"PROXY TCP4 9.8.7.6 5.6.7.8 1000 443\r\n";
    for before in [vec![v1], vec![&v1[..9], &v1[9..]], vec![&v2(&[])[..]]] {
        let o = Opts {
            sni: Some("a.test"),
            before: &before,
            ..Opts::default()
        };
        let mut c = TlsClient::connect(port, &pki, &o).expect("a handshake after the header");
        let (status, _, body) = c.get("a.test", "/").unwrap();
        assert_eq!(status, 200);
        let want = if before.len() == 1 && before[0][0] == b'\r' {
            "1.2.3.4 1111 on\n"
        } else {
            "9.8.7.6 1000 on\n"
        };
        assert_eq!(String::from_utf8_lossy(&body), want);
    }
    // No header at all: the ClientHello is no PROXY header, and the connection closes with
    // nginx's line.
    let o = Opts {
        sni: Some("a.test"),
        ..Opts::default()
    };
    assert!(TlsClient::connect(port, &pki, &o).is_err());
    crate::common::wait_for("the broken header line", || {
        let l = std::fs::read_to_string(s.prefix.join("logs/error.log")).ok()?;
        l.contains("broken header: ").then_some(())
    });
}
