//! HTTPS end to end (issue 20): the real binary on TLS addresses, with a CA and certificates
//! each test makes, reached by curl, `openssl s_client` and a rustls client that checks what it
//! is shown. SNI and the default server, ALPN, the default protocols, session resumption by id
//! and by ticket, 0-RTT, client certificates (495/496), 421, plain HTTP on a TLS port (497),
//! static files (small, large, ranges) with `sendfile` and `aio threads` on, gzip, a reload
//! that swaps a certificate, Debian's stock nginx.conf, the README's example. https upstreams
//! are `tls_upstream`'s, bad input `tls_hostile`'s; the helpers here serve all three.
//!
//! Expected answers and log lines are nginx 1.22.1's, checked against it with the same
//! configuration and requests. Every wait is bounded; nothing sleeps to let a server settle.

use std::fs;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::{Command, Stdio};
use std::time::Duration;

use crate::common::tls::{Opts, Pki, TlsClient};
use crate::common::{self, free_port, wait_for, Shoal};

/// A whole configuration: foreground, errors at `info`, a thread pool, `http` lines.
pub(crate) fn conf(http: &str) -> String {
    format!(
        "daemon off;\n\
         error_log logs/error.log info;\n\
         events {{ worker_connections 64; }}\n\
         http {{\n\
         \x20   include mime.types;\n\
         \x20   default_type application/octet-stream;\n\
         \x20   access_log logs/access.log;\n\
         {http}\n\
         }}\n"
    )
}

pub(crate) fn opts(sni: &str) -> Opts<'_> {
    Opts {
        sni: Some(sni),
        ..Default::default()
    }
}

/// Runs `openssl ARGS` with `input` on its stdin; its stdout and stderr together.
pub(crate) fn openssl(args: &[&str], input: &[u8]) -> String {
    let mut child = Command::new("openssl")
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("running openssl");
    let mut stdin = child.stdin.take().expect("stdin");
    stdin.write_all(input).expect("writing to openssl");
    // Held open a moment so s_client reads the answer before it sees the end of its input.
    let killer = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(800));
        drop(stdin);
    });
    let out = child.wait_with_output().expect("openssl's output");
    killer.join().expect("the stdin thread");
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

#[test]
fn sni_chooses_the_server_the_default_answers_the_rest_and_alpn_is_http11() {
    let mut pki = Pki::new();
    pki.issue("a", &["a.test", "zzz.test", "127.0.0.1"], false);
    pki.issue("b", &["b.test", "x.b.test"], false);
    let port = free_port();
    let body = "return 200 \"$server_name sni=$ssl_server_name https=$https scheme=$scheme $ssl_protocol alpn=$ssl_alpn_protocol\\n\";";
    let s = Shoal::start(
        &conf(&format!(
            "ssl_protocols TLSv1.2 TLSv1.3;\n\
             server {{ listen 127.0.0.1:{port} ssl; server_name b.test *.b.test; {} location / {{ {body} }} }}\n\
             server {{ listen 127.0.0.1:{port} ssl default_server; server_name a.test; {} location / {{ {body} }} }}",
            pki.ssl_lines("b"),
            pki.ssl_lines("a")
        )),
        port,
    );
    for (sni, cn, server) in [
        (Some("b.test"), "b", "b.test"),
        (Some("x.b.test"), "b", "b.test"),
        (Some("a.test"), "a", "a.test"),
        // No server has the name: the default server's certificate and server.
        (Some("zzz.test"), "a", "a.test"),
        // No SNI at all.
        (None, "a", "a.test"),
    ] {
        let mut c = TlsClient::connect(
            port,
            &pki,
            &Opts {
                sni,
                alpn: &["h2", "http/1.1"],
                ..Default::default()
            },
        )
        .unwrap_or_else(|e| panic!("SNI {sni:?}: {e}"));
        assert_eq!(c.server_cn(), cn, "SNI {sni:?}");
        assert_eq!(
            c.alpn().as_deref(),
            Some("http/1.1"),
            "ALPN offers http/1.1"
        );
        assert_eq!(c.protocol(), Some(rustls::ProtocolVersion::TLSv1_3));
        let host = sni.unwrap_or("127.0.0.1");
        let (status, _, body) = c.get(host, "/").expect("an answer");
        assert_eq!(status, 200);
        assert_eq!(
            String::from_utf8_lossy(&body),
            format!(
                "{server} sni={} https=on scheme=https TLSv1.3 alpn=http/1.1\n",
                sni.unwrap_or("")
            )
        );
        // Keep-alive works over TLS: a second request on the connection.
        let (status, _, _) = c.get(host, "/again").expect("a second answer");
        assert_eq!(status, 200);
    }
    // A client that offers only protocols shoal does not speak is refused, as nginx 1.21.4+.
    let refused = TlsClient::connect(
        port,
        &pki,
        &Opts {
            sni: Some("a.test"),
            alpn: &["h2"],
            ..Default::default()
        },
    );
    assert!(refused.is_err(), "no common ALPN protocol");
    s.wait_log(
        "SSL_do_handshake() failed (SSL: error:0A0000EB:SSL routines::no application protocol) while SSL handshaking, client: 127.0.0.1, server: 127.0.0.1:",
        1,
    );
    // curl, which checks the certificate against the CA.
    let out = Command::new("curl")
        .args(["-s", "--cacert"])
        .arg(pki.path("ca.crt"))
        .args([
            "--resolve",
            &format!("b.test:{port}:127.0.0.1"),
            &format!("https://b.test:{port}/curl"),
        ])
        .output()
        .expect("curl");
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "b.test sni=b.test https=on scheme=https TLSv1.3 alpn=http/1.1\n"
    );
}

#[test]
fn the_default_protocols_are_nginx_1_22s_tls12_only() {
    let mut pki = Pki::new();
    pki.issue("a", &["a.test"], false);
    let port = free_port();
    let _s = Shoal::start(
        &conf(&format!(
            "server {{ listen 127.0.0.1:{port} ssl; server_name a.test; {} location / {{ return 200 \"$ssl_protocol $ssl_cipher\"; }} }}",
            pki.ssl_lines("a")
        )),
        port,
    );
    let mut c = TlsClient::connect(port, &pki, &opts("a.test")).expect("a handshake");
    assert_eq!(c.protocol(), Some(rustls::ProtocolVersion::TLSv1_2));
    let (_, _, body) = c.get("a.test", "/").unwrap();
    assert_eq!(
        String::from_utf8_lossy(&body),
        "TLSv1.2 ECDHE-ECDSA-AES256-GCM-SHA384"
    );
}

#[test]
fn sessions_resume_by_id_and_by_ticket() {
    let mut pki = Pki::new();
    pki.issue("a", &["a.test"], false);
    let port = free_port();
    let s = Shoal::start(
        &conf(&format!(
            "log_format tls '$ssl_protocol $ssl_session_reused';\n\
             server {{ listen 127.0.0.1:{port} ssl; server_name a.test; {}\n\
               ssl_protocols TLSv1.2 TLSv1.3; ssl_session_cache shared:SSL:1m; ssl_session_timeout 5m;\n\
               access_log logs/tls.log tls; location / {{ return 200 \"ok\\n\"; }} }}",
            pki.ssl_lines("a")
        )),
        port,
    );
    let addr = format!("127.0.0.1:{port}");
    let req = b"GET / HTTP/1.1\r\nHost: a.test\r\nConnection: close\r\n\r\n";
    for (proto, tickets) in [("-tls1_2", "-no_ticket"), ("-tls1_2", ""), ("-tls1_3", "")] {
        let sess = s.prefix.join(&format!("sess{proto}{tickets}"));
        let sess = sess.display().to_string();
        let mut first = vec![
            "s_client",
            "-connect",
            &addr,
            "-servername",
            "a.test",
            proto,
        ];
        if !tickets.is_empty() {
            first.push(tickets);
        }
        let mut args = first.clone();
        args.extend(["-sess_out", &sess]);
        let out = openssl(&args, req);
        assert!(out.contains("\nNew, "), "{proto} {tickets}: {out}");
        assert!(out.contains("ok"), "{out}");
        let mut args = first.clone();
        args.extend(["-sess_in", &sess]);
        let out = openssl(&args, req);
        assert!(
            out.contains("\nReused, "),
            "{proto} {tickets}: the session resumes: {out}"
        );
    }
    wait_for("the access log", || {
        let log = s.prefix.read("logs/tls.log");
        (log.lines().count() >= 6).then_some(())
    });
    let log = s.prefix.read("logs/tls.log");
    let reused: Vec<&str> = log
        .lines()
        .map(|l| l.split(' ').nth(1).unwrap_or(""))
        .collect();
    assert_eq!(reused, [".", "r", ".", "r", ".", "r"], "{log}");
}

#[test]
fn client_certificates_and_their_pages() {
    let mut pki = Pki::new();
    pki.issue("srv", &["on.test", "opt.test", "page.test"], false);
    pki.issue("alice", &[], true);
    pki.self_signed("mallory");
    let port = free_port();
    let ca = pki.path("ca.crt").display().to_string();
    let body =
        "location / { return 200 \"$ssl_client_verify $ssl_client_s_dn $ssl_client_i_dn\\n\"; }";
    let s = Shoal::start(
        &conf(&format!(
            "ssl_protocols TLSv1.2 TLSv1.3;\n\
             server {{ listen 127.0.0.1:{port} ssl; server_name on.test; {ssl} ssl_verify_client on; ssl_client_certificate {ca}; {body} }}\n\
             server {{ listen 127.0.0.1:{port} ssl; server_name opt.test; {ssl} ssl_verify_client optional; ssl_client_certificate {ca}; {body} }}\n\
             server {{ listen 127.0.0.1:{port} ssl; server_name page.test; {ssl} ssl_verify_client on; ssl_client_certificate {ca};\n\
               error_page 495 496 =403 /denied.txt; location = /denied.txt {{ return 200 \"denied\\n\"; }} {body} }}",
            ssl = pki.ssl_lines("srv"),
        )),
        port,
    );
    let get = |sni: &str, cert: Option<&str>| {
        let mut c = TlsClient::connect(
            port,
            &pki,
            &Opts {
                sni: Some(sni),
                client_cert: cert,
                ..Default::default()
            },
        )
        .expect("a handshake: nginx lets every certificate through it");
        let (status, head, body) = c.get(sni, "/").expect("an answer");
        (status, head, String::from_utf8_lossy(&body).into_owned(), c)
    };
    let (status, _, body, _) = get("on.test", Some("alice"));
    assert_eq!(status, 200);
    assert_eq!(
        body, "SUCCESS O=Shoal Tests,CN=alice CN=shoal e2e CA\n",
        "RFC 2253 names"
    );
    let (status, head, body, mut c) = get("on.test", None);
    assert_eq!(status, 400);
    assert!(head.contains("Connection: close"), "{head}");
    assert!(
        body.contains("<title>400 No required SSL certificate was sent</title>"),
        "{body}"
    );
    assert!(c.closed_by_peer(), "496 closes the connection");
    s.wait_log(
        "client sent no required SSL certificate while reading client request headers, client: 127.0.0.1, server: on.test, request: \"GET / HTTP/1.1\", host: \"on.test\"",
        1,
    );
    let (status, _, body, _) = get("on.test", Some("mallory"));
    assert_eq!(status, 400);
    assert!(
        body.contains("<title>400 The SSL certificate error</title>"),
        "{body}"
    );
    s.wait_log(
        "client SSL certificate verify error: (18:self-signed certificate) while reading client request headers",
        1,
    );
    // optional: no certificate is fine; a bad one is still 495.
    let (status, _, body, _) = get("opt.test", None);
    assert_eq!((status, body.as_str()), (200, "NONE  \n"));
    let (status, _, _, _) = get("opt.test", Some("mallory"));
    assert_eq!(status, 400);
    // `error_page` takes 495 and 496 over, at the server's level.
    let (status, _, body, _) = get("page.test", None);
    assert_eq!((status, body.as_str()), (403, "denied\n"));
    let (status, _, body, _) = get("page.test", Some("mallory"));
    assert_eq!((status, body.as_str()), (403, "denied\n"));
    // The access log says 400, as nginx's does for its codes 495-497.
    let log = s.prefix.read("logs/access.log");
    assert!(log.contains("\"GET / HTTP/1.1\" 400 "), "{log}");
    assert!(!log.contains(" 496 ") && !log.contains(" 495 "), "{log}");
}

#[test]
fn a_host_other_than_the_negotiated_name_is_421_where_clients_are_verified() {
    let mut pki = Pki::new();
    pki.issue("srv", &["a.test", "v.test"], false);
    let port = free_port();
    let ca = pki.path("ca.crt").display().to_string();
    let s = Shoal::start(
        &conf(&format!(
            "server {{ listen 127.0.0.1:{port} ssl; server_name a.test; {ssl} location / {{ return 200 \"A\\n\"; }} }}\n\
             server {{ listen 127.0.0.1:{port} ssl; server_name v.test; {ssl} ssl_verify_client optional; ssl_client_certificate {ca}; location / {{ return 200 \"V\\n\"; }} }}",
            ssl = pki.ssl_lines("srv"),
        )),
        port,
    );
    // SNI v.test, Host a.test: a.test does not verify clients, so its answer (as nginx).
    let mut c = TlsClient::connect(port, &pki, &opts("v.test")).unwrap();
    let (status, _, body) = c.get("a.test", "/").unwrap();
    assert_eq!((status, &body[..]), (200, &b"A\n"[..]));
    // SNI a.test, Host v.test, which verifies clients: 421, and the connection closes.
    let mut c = TlsClient::connect(port, &pki, &opts("a.test")).unwrap();
    let (status, head, body) = c.get("v.test", "/").unwrap();
    assert_eq!(status, 421);
    assert!(head.contains("Connection: close"), "{head}");
    assert!(String::from_utf8_lossy(&body).contains("<title>421 Misdirected Request</title>"));
    s.wait_log(
        "client attempted to request the server name different from the one that was negotiated while reading client request headers, client: 127.0.0.1, server: a.test, request: \"GET / HTTP/1.1\", host: \"v.test\"",
        1,
    );
}

#[test]
fn plain_http_on_a_tls_port_is_497_with_nginxs_page_or_the_error_page() {
    let mut pki = Pki::new();
    pki.issue("a", &["a.test"], false);
    let (p1, p2) = (free_port(), free_port());
    let s = Shoal::start(
        &conf(&format!(
            "server {{ listen 127.0.0.1:{p1} ssl; server_name a.test; {ssl} }}\n\
             server {{ listen 127.0.0.1:{p2} ssl; server_name b.test; {ssl} error_page 497 https://$host:{p2}$request_uri; }}",
            ssl = pki.ssl_lines("a"),
        )),
        p1,
    );
    let plain = |port: u16, req: &str| {
        let mut t = TcpStream::connect(("127.0.0.1", port)).unwrap();
        t.set_read_timeout(Some(common::WAIT)).unwrap();
        t.write_all(req.as_bytes()).unwrap();
        let mut out = Vec::new();
        t.read_to_end(&mut out)
            .expect("the server closes after 497");
        String::from_utf8_lossy(&out).into_owned()
    };
    let out = plain(
        p1,
        "GET /x HTTP/1.1\r\nHost: a.test\r\n\r\nGET /y HTTP/1.1\r\nHost: a.test\r\n\r\n",
    );
    assert!(out.starts_with("HTTP/1.1 400 Bad Request\r\n"), "{out}");
    assert!(out.contains("\r\nConnection: close\r\n"), "{out}");
    let page = "\r\n\r\n<html>\r\n<head><title>400 The plain HTTP request was sent to HTTPS port</title></head>\r\n<body>\r\n<center><h1>400 Bad Request</h1></center>\r\n<center>The plain HTTP request was sent to HTTPS port</center>\r\n<hr><center>shoal/";
    assert!(out.contains(page), "{out}");
    assert_eq!(
        out.matches("HTTP/1.1").count(),
        1,
        "one answer, then the close"
    );
    s.wait_log(
        "client sent plain HTTP request to HTTPS port while reading client request headers, client: 127.0.0.1, server: a.test, request: \"GET /x HTTP/1.1\", host: \"a.test\"",
        1,
    );
    let out = plain(p2, "GET /q?a=1 HTTP/1.1\r\nHost: b.test\r\n\r\n");
    assert!(
        out.starts_with("HTTP/1.1 302 Moved Temporarily\r\n"),
        "{out}"
    );
    assert!(
        out.contains(&format!("\r\nLocation: https://b.test:{p2}/q?a=1\r\n")),
        "{out}"
    );
    let log = s.prefix.read("logs/access.log");
    assert!(log.contains("\"GET /x HTTP/1.1\" 400 "), "{log}");
    assert!(log.contains("\"GET /q?a=1 HTTP/1.1\" 302 "), "{log}");
}

#[test]
fn static_files_over_tls_with_sendfile_and_aio_threads_on() {
    let mut pki = Pki::new();
    pki.issue("a", &["a.test"], false);
    let port = free_port();
    let prefix = common::Prefix::new();
    // 5 MB of bytes that do not repeat (a sendfile in plaintext would garble the stream).
    let mut big = Vec::with_capacity(5 << 20);
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    while big.len() < 5 << 20 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        big.extend_from_slice(&x.to_le_bytes());
    }
    fs::write(prefix.join("html/big.bin"), &big).unwrap();
    let text = "shoal serves text over TLS, compressed. ".repeat(4000);
    fs::write(prefix.join("html/text.txt"), &text).unwrap();
    let s = Shoal::start_in(
        prefix,
        &format!(
            "daemon off;\nerror_log logs/error.log info;\nthread_pool default threads=2;\n\
             events {{ worker_connections 64; }}\n\
             http {{ include mime.types; access_log logs/access.log;\n\
               sendfile on; tcp_nopush on; aio threads; gzip on; gzip_types text/plain;\n\
               server {{ listen 127.0.0.1:{port} ssl; server_name a.test; {} root html; }} }}\n",
            pki.ssl_lines("a")
        ),
        port,
        &[],
    );
    let mut c = TlsClient::connect(port, &pki, &opts("a.test")).unwrap();
    let (status, _, body) = c.get("a.test", "/index.html").unwrap();
    assert_eq!(
        (status, String::from_utf8_lossy(&body).as_ref()),
        (200, common::INDEX)
    );
    let (status, _, body) = c.get("a.test", "/big.bin").unwrap();
    assert_eq!(status, 200);
    assert!(body == big, "the large file's bytes ({} read)", body.len());
    c.send(b"GET /big.bin HTTP/1.1\r\nHost: a.test\r\nRange: bytes=1000000-1000999,-10\r\n\r\n")
        .unwrap();
    let (status, head, body) = c.read_answer().unwrap();
    assert_eq!(status, 206, "{head}");
    let body = String::from_utf8_lossy(&body).into_owned();
    assert!(head.contains("multipart/byteranges"), "{head}");
    let _ = body;
    c.send(b"GET /big.bin HTTP/1.1\r\nHost: a.test\r\nRange: bytes=4000000-4199999\r\n\r\n")
        .unwrap();
    let (status, _, body) = c.read_answer().unwrap();
    assert_eq!(status, 206);
    assert!(body == big[4_000_000..4_200_000], "a range's bytes");
    // gzip over TLS, through curl (chunked and compressed).
    let out = Command::new("curl")
        .args(["-s", "--compressed", "--cacert"])
        .arg(pki.path("ca.crt"))
        .args([
            "--resolve",
            &format!("a.test:{port}:127.0.0.1"),
            "-w",
            "\n%{size_download}",
            &format!("https://a.test:{port}/text.txt"),
        ])
        .output()
        .expect("curl");
    let out = String::from_utf8_lossy(&out.stdout).into_owned();
    let (got, size) = out.rsplit_once('\n').unwrap();
    assert_eq!(got, text, "the decompressed text");
    assert!(
        size.parse::<usize>().unwrap() < text.len() / 10,
        "sent compressed: {size} bytes"
    );
    // No error on the way.
    assert!(!s.error_log().contains("[error]"), "{}", s.error_log());
    assert!(!s.error_log().contains("[alert]"), "{}", s.error_log());
}

#[test]
fn a_reload_swaps_the_certificate_and_open_connections_keep_theirs() {
    let mut pki = Pki::new();
    pki.issue("one", &["a.test"], false);
    let port = free_port();
    let cert = pki.path("site.crt");
    let key = pki.path("site.key");
    fs::copy(pki.path("one.crt"), &cert).unwrap();
    fs::copy(pki.path("one.key"), &key).unwrap();
    let s = Shoal::start(
        &conf(&format!(
            "server {{ listen 127.0.0.1:{port} ssl; server_name a.test; ssl_certificate {}; ssl_certificate_key {}; location / {{ return 200 \"ok\\n\"; }} }}",
            cert.display(),
            key.display()
        )),
        port,
    );
    let mut before = TlsClient::connect(port, &pki, &opts("a.test")).unwrap();
    assert_eq!(before.server_cn(), "one");
    assert_eq!(before.get("a.test", "/").unwrap().0, 200);
    pki.issue("two", &["a.test"], false);
    fs::copy(pki.path("two.crt"), &cert).unwrap();
    fs::copy(pki.path("two.key"), &key).unwrap();
    s.signal(libc::SIGHUP);
    s.wait_log("reconfigured (generation 2)", 1);
    // The connection opened before keeps working on its session.
    assert_eq!(before.get("a.test", "/").unwrap().0, 200);
    // A new one sees the new certificate.
    let after = TlsClient::connect(port, &pki, &opts("a.test")).unwrap();
    assert_eq!(after.server_cn(), "two");
    // A broken key on reload: [emerg], and the certificate in use stays.
    fs::write(&key, "not a key\n").unwrap();
    s.signal(libc::SIGHUP);
    s.wait_log("[emerg]", 1);
    assert!(
        s.error_log().contains("cannot load certificate key"),
        "{}",
        s.error_log()
    );
    let still = TlsClient::connect(port, &pki, &opts("a.test")).unwrap();
    assert_eq!(still.server_cn(), "two");
    assert_eq!(before.get("a.test", "/").unwrap().0, 200);
}

#[test]
fn debian_stock_nginx_conf_starts_and_serves_https() {
    let mut pki = Pki::new();
    pki.issue("site", &["debian.test"], false);
    let prefix = common::Prefix::new();
    use std::os::unix::fs::PermissionsExt;
    // As root, workers run as www-data: what they read must be readable.
    for d in ["", "html", "conf"] {
        fs::set_permissions(prefix.join(d), fs::Permissions::from_mode(0o755)).unwrap();
    }
    fs::set_permissions(
        prefix.join("html/index.html"),
        fs::Permissions::from_mode(0o644),
    )
    .unwrap();
    let etc = prefix.join("conf");
    fs::create_dir_all(etc.join("sites-enabled")).unwrap();
    fs::create_dir_all(etc.join("conf.d")).unwrap();
    fs::create_dir_all(etc.join("modules-enabled")).unwrap();
    let repo = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let stock = fs::read_to_string(repo.join("tests/confs/debian12-nginx.conf")).unwrap();
    let (port, https) = (free_port(), free_port());
    let logs = prefix.join("logs");
    // Only the paths move into the prefix; every directive is Debian's.
    let text = stock
        .replace("/etc/nginx/", &format!("{}/", etc.display()))
        .replace("/var/log/nginx/", &format!("{}/", logs.display()))
        .replace("/run/nginx.pid", &format!("{}/nginx.pid", logs.display()));
    assert!(text.contains("ssl_protocols TLSv1 TLSv1.1 TLSv1.2 TLSv1.3;"));
    assert!(text.contains("ssl_prefer_server_ciphers on;"));
    fs::copy(repo.join("conf/mime.types"), etc.join("mime.types")).unwrap();
    fs::write(
        etc.join("sites-enabled/default"),
        format!(
            "server {{\n\tlisten 127.0.0.1:{port} default_server;\n\tlisten 127.0.0.1:{https} ssl default_server;\n\t{}\n\troot {};\n\tindex index.html index.htm index.nginx-debian.html;\n\tserver_name _;\n\tlocation / {{\n\t\ttry_files $uri $uri/ =404;\n\t}}\n}}\n",
            pki.ssl_lines("site"),
            prefix.join("html").display()
        ),
    )
    .unwrap();
    let text = format!("daemon off;\n{text}");
    prefix.write_conf(&text);
    let t = prefix.run(&["-t"]);
    assert!(
        t.status.success(),
        "shoal -t: {}",
        String::from_utf8_lossy(&t.stderr)
    );
    let s = Shoal::start_in(prefix, &text, port, &[]);
    let r = common::get(port, "/").unwrap();
    assert_eq!(r.status, 200);
    s.wait_port(https);
    let mut c = TlsClient::connect(https, &pki, &opts("debian.test")).unwrap();
    // Debian's `ssl_protocols` offers TLSv1.3.
    assert_eq!(c.protocol(), Some(rustls::ProtocolVersion::TLSv1_3));
    let (status, _, body) = c.get("debian.test", "/").unwrap();
    assert_eq!(
        (status, String::from_utf8_lossy(&body).as_ref()),
        (200, common::INDEX)
    );
}

#[test]
fn the_readmes_https_example_starts_and_serves() {
    let repo = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let readme = fs::read_to_string(repo.join("README.md")).unwrap();
    let start = readme
        .find("### Turning on HTTPS")
        .expect("the README's HTTPS section");
    let block = &readme[start..];
    let block = &block[block.find("```nginx\n").expect("its example") + 9..];
    let example = &block[..block.find("```").unwrap()];
    let mut pki = Pki::new();
    pki.issue("site", &["example.com"], false);
    let (http, https) = (free_port(), free_port());
    let prefix = common::Prefix::new();
    let text = example
        .replace("listen 80;", &format!("listen 127.0.0.1:{http};"))
        .replace("listen 443 ssl;", &format!("listen 127.0.0.1:{https} ssl;"))
        .replace(
            "/etc/ssl/example.com/fullchain.pem",
            &pki.path("site.crt").display().to_string(),
        )
        .replace(
            "/etc/ssl/example.com/privkey.pem",
            &pki.path("site.key").display().to_string(),
        )
        .replace(
            "/etc/ssl/internal-ca.pem",
            &pki.path("ca.crt").display().to_string(),
        )
        .replace(
            "/var/www/example.com",
            &prefix.join("html").display().to_string(),
        );
    let s = Shoal::start_in(
        prefix,
        &format!(
            "daemon off;\nerror_log logs/error.log info;\nevents {{ worker_connections 64; }}\n{text}"
        ),
        https,
        &[],
    );
    let r = common::get(http, "/page?x=1").unwrap();
    assert_eq!(r.status, 301);
    assert_eq!(r.header("location"), Some("https://localhost/page?x=1"));
    let mut c = TlsClient::connect(https, &pki, &opts("example.com")).unwrap();
    assert_eq!(c.protocol(), Some(rustls::ProtocolVersion::TLSv1_3));
    let (status, _, body) = c.get("example.com", "/").unwrap();
    assert_eq!(
        (status, String::from_utf8_lossy(&body).as_ref()),
        (200, common::INDEX)
    );
    drop(s);
}

#[test]
fn a_request_in_0rtt_data_is_served_and_says_so() {
    use std::sync::Arc;
    let mut pki = Pki::new();
    pki.issue("a", &["a.test"], false);
    let port = free_port();
    let _s = Shoal::start(
        &conf(&format!(
            "server {{ listen 127.0.0.1:{port} ssl; server_name a.test; {}\n\
               ssl_protocols TLSv1.3; ssl_early_data on;\n\
               location / {{ return 200 \"early=$ssl_early_data reused=$ssl_session_reused\\n\"; }} }}",
            pki.ssl_lines("a")
        )),
        port,
    );
    let mut roots = rustls::RootCertStore::empty();
    let ca = fs::read_to_string(pki.path("ca.crt")).unwrap();
    let b64: String = ca.lines().filter(|l| !l.starts_with("-----")).collect();
    roots
        .add(rustls::pki_types::CertificateDer::from(
            common::tls::base64_decode(&b64),
        ))
        .unwrap();
    let mut config = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::aws_lc_rs::default_provider(),
    ))
    .with_protocol_versions(&[&rustls::version::TLS13])
    .unwrap()
    .with_root_certificates(roots)
    .with_no_client_auth();
    config.enable_early_data = true;
    let config = Arc::new(config);
    let request = b"GET / HTTP/1.1\r\nHost: a.test\r\n\r\n";
    let exchange = |early: bool| -> (String, String) {
        let mut conn =
            rustls::ClientConnection::new(config.clone(), "a.test".try_into().unwrap()).unwrap();
        let mut tcp = TcpStream::connect(("127.0.0.1", port)).unwrap();
        tcp.set_read_timeout(Some(common::WAIT)).unwrap();
        let mut sent_early = false;
        if early {
            if let Some(mut e) = conn.early_data() {
                e.write_all(request).unwrap();
                sent_early = true;
            }
        }
        while conn.is_handshaking() {
            conn.complete_io(&mut tcp).unwrap();
        }
        let mut s = rustls::Stream::new(&mut conn, &mut tcp);
        if !sent_early || !s.conn.is_early_data_accepted() {
            s.write_all(request).unwrap();
        }
        let mut got = Vec::new();
        let mut buf = [0u8; 4096];
        while !got.ends_with(b"\n") || !got.windows(4).any(|w| w == b"\r\n\r\n") {
            let n = s.read(&mut buf).unwrap();
            assert!(n > 0);
            got.extend_from_slice(&buf[..n]);
        }
        let body = String::from_utf8_lossy(&got)
            .rsplit("\r\n\r\n")
            .next()
            .unwrap()
            .to_string();
        // A second request on the connection came after the handshake.
        s.write_all(request).unwrap();
        let mut again = Vec::new();
        while !again.ends_with(b"\n") || !again.windows(4).any(|w| w == b"\r\n\r\n") {
            let n = s.read(&mut buf).unwrap();
            assert!(n > 0);
            again.extend_from_slice(&buf[..n]);
        }
        let again = String::from_utf8_lossy(&again)
            .rsplit("\r\n\r\n")
            .next()
            .unwrap()
            .to_string();
        (body, again)
    };
    // The first connection brings a ticket that allows early data.
    let (first, _) = exchange(false);
    assert_eq!(first, "early= reused=.\n");
    let (body, again) = exchange(true);
    assert_eq!(body, "early=1 reused=r\n", "the request rode in 0-RTT data");
    assert_eq!(again, "early= reused=r\n");
}
