//! shoal against real nginx, the request side of the core (the scenarios of `nginx_diff.rs`
//! continued): conditional requests, ranges, types and tokens, keep-alive, malformed requests,
//! request bodies, and what fuzzing and the differential runs found. Same harness, same rules:
//! a difference is a bug in shoal unless a comment at the scenario says why.

use std::io::{Read, Write};

use crate::diff::{etag, permissions_enforced, Conf, Pair, A_TXT, MTIME_HTTP};

// ---- conditional requests -----------------------------------------------------------------------

#[test]
fn etag_off() {
    let p = Pair::new("etag off;");
    let r = p.get("/a.txt", "");
    assert!(!r.contains("ETag"), "{r}");
    p.get(
        "/a.txt",
        &format!("If-None-Match: {}\r\n", etag(A_TXT.len())),
    );
    p.get("/a.txt", "If-None-Match: *\r\n");
    p.get(
        "/range.txt",
        &format!("Range: bytes=0-4\r\nIf-Range: {}\r\n", etag(1000)),
    );
}

#[test]
fn if_modified_since_modes() {
    let before = "Sat, 31 Dec 2022 00:00:00 GMT";
    let after = "Mon, 02 Jan 2023 00:00:00 GMT";
    let p = Pair::new(
        "location /exact/ { alias {HTML}/; if_modified_since exact; }\n\
         location /before/ { alias {HTML}/; if_modified_since before; }\n\
         location /off/ { alias {HTML}/; if_modified_since off; }",
    );
    for mode in ["exact", "before", "off"] {
        for ims in [
            MTIME_HTTP,
            before,
            after,
            "garbage",
            "Sunday, 01-Jan-23 00:00:00 GMT",
        ] {
            p.get(
                &format!("/{mode}/a.txt"),
                &format!("If-Modified-Since: {ims}\r\n"),
            );
        }
    }
    p.get("/a.txt", &format!("If-Modified-Since: {MTIME_HTTP}\r\n"));
    p.head("/a.txt", &format!("If-Modified-Since: {MTIME_HTTP}\r\n"));
}

#[test]
fn if_match_and_if_unmodified_since() {
    let p = Pair::new("location = /ret { return 200 \"text\\n\"; }");
    let t = etag(A_TXT.len());
    p.get("/a.txt", &format!("If-Match: {t}\r\n"));
    p.get("/a.txt", "If-Match: \"x\"\r\n");
    p.get("/a.txt", "If-Match: *\r\n");
    p.get("/a.txt", &format!("If-Match: W/{t}\r\n"));
    p.get(
        "/a.txt",
        "If-Unmodified-Since: Mon, 02 Jan 2023 00:00:00 GMT\r\n",
    );
    p.get(
        "/a.txt",
        "If-Unmodified-Since: Sat, 31 Dec 2022 00:00:00 GMT\r\n",
    );
    p.get("/a.txt", &format!("If-Unmodified-Since: {MTIME_HTTP}\r\n"));
    p.get("/nope", "If-Match: \"x\"\r\n");
    // Not only files: any 200.
    p.get("/ret", "If-None-Match: *\r\n");
    p.get("/ret", "If-Match: \"x\"\r\n");
    p.get("/ret", &format!("If-Modified-Since: {MTIME_HTTP}\r\n"));
}

#[test]
fn conditionals_in_nginx_order() {
    let p = Pair::new("location /off/ { alias {HTML}/; if_modified_since off; }");
    let t = etag(A_TXT.len());
    // If-Modified-Since is looked at first: modified means 200 whatever If-None-Match says.
    p.get(
        "/a.txt",
        &format!("If-None-Match: {t}\r\nIf-Modified-Since: Sat, 31 Dec 2022 00:00:00 GMT\r\n"),
    );
    p.get(
        "/a.txt",
        &format!("If-None-Match: {t}\r\nIf-Modified-Since: {MTIME_HTTP}\r\n"),
    );
    p.get("/off/a.txt", &format!("If-None-Match: {t}\r\n"));
    p.get(
        "/off/a.txt",
        &format!("If-None-Match: {t}\r\nIf-Modified-Since: {MTIME_HTTP}\r\n"),
    );
    p.get(
        "/a.txt",
        &format!("If-None-Match: {t}\r\nRange: bytes=0-3\r\n"),
    );
    p.get("/a.txt", "If-None-Match: \"x\"\r\nRange: bytes=0-3\r\n");
}

#[test]
fn if_none_match() {
    let p = Pair::new("");
    let t = etag(A_TXT.len());
    p.get("/a.txt", &format!("If-None-Match: {t}\r\n"));
    p.get("/a.txt", &format!("If-None-Match: \"x\", {t}\r\n"));
    p.get("/a.txt", "If-None-Match: *\r\n");
    p.get("/a.txt", &format!("If-None-Match: W/{t}\r\n"));
    p.get("/a.txt", "If-None-Match: \"other\"\r\n");
    // If-None-Match wins over If-Modified-Since.
    p.get(
        "/a.txt",
        &format!("If-None-Match: \"other\"\r\nIf-Modified-Since: {MTIME_HTTP}\r\n"),
    );
    p.get("/nope", &format!("If-None-Match: {t}\r\n"));
}

// ---- ranges ---------------------------------------------------------------------------------------

#[test]
fn ranges_single_suffix_open() {
    let p = Pair::new("");
    for r in [
        "bytes=0-9",
        "bytes=-10",
        "bytes=990-",
        "bytes=995-2000",
        "bytes=0-0",
        "BYTES=1-2",
    ] {
        p.get("/range.txt", &format!("Range: {r}\r\n"));
    }
    p.head("/range.txt", "Range: bytes=0-9\r\n");
    p.check(b"GET /range.txt HTTP/1.0\r\nRange: bytes=0-9\r\n\r\n");
}

#[test]
fn ranges_multipart() {
    let p = Pair::new("");
    p.get("/range.txt", "Range: bytes=0-1,5-6\r\n");
    p.get("/range.txt", "Range: bytes=0-1, -3\r\n");
    p.get("/a.txt", "Range: bytes=0-1,3-4,10-\r\n");
}

#[test]
fn ranges_unsatisfiable_and_ignored() {
    let p = Pair::new("");
    for r in [
        "bytes=2000-",
        "bytes=1000-1001",
        "bytes=abc",
        "bytes=5-1",
        "items=0-1",
        "bytes=-0",
    ] {
        p.get("/range.txt", &format!("Range: {r}\r\n"));
    }
}

#[test]
fn ranges_with_if_range() {
    let p = Pair::new("");
    let t = etag(1000);
    p.get(
        "/range.txt",
        &format!("Range: bytes=0-4\r\nIf-Range: {t}\r\n"),
    );
    p.get("/range.txt", "Range: bytes=0-4\r\nIf-Range: \"nope\"\r\n");
    p.get(
        "/range.txt",
        &format!("Range: bytes=0-4\r\nIf-Range: {MTIME_HTTP}\r\n"),
    );
    p.get(
        "/range.txt",
        "Range: bytes=0-4\r\nIf-Range: Mon, 02 Jan 2023 00:00:00 GMT\r\n",
    );
}

#[test]
fn max_ranges() {
    let p = Pair::new(
        "location /one/ { alias {HTML}/; max_ranges 1; }\n\
         location /zero/ { alias {HTML}/; max_ranges 0; }",
    );
    p.get("/one/range.txt", "Range: bytes=0-4\r\n");
    p.get("/one/range.txt", "Range: bytes=0-4,8-9\r\n");
    p.get("/zero/range.txt", "Range: bytes=0-4\r\n");
    p.get("/zero/range.txt", "");
}

// ---- types, tokens --------------------------------------------------------------------------------

#[test]
fn types_and_default_type() {
    let p = Pair::with(Conf {
        server: "location /t/ { alias {HTML}/; types { text/x-foo foo; text/html html htm; } \
                 default_type text/bar; }",
        ..Default::default()
    });
    for u in [
        "/file.foo",
        "/file.unknownext",
        "/noext",
        "/a.txt",
        "/t/file.foo",
        "/t/a.txt",
        "/t/noext",
        "/.hidden",
        "/UPPER.TXT",
    ] {
        p.get(u, "");
    }
}

#[test]
fn server_tokens_off() {
    let p = Pair::new("server_tokens off;");
    p.get("/nope", "");
    p.get("/dir", "");
}

// ---- keep-alive -----------------------------------------------------------------------------------

#[test]
fn keep_alive_by_version() {
    let p = Pair::new("");
    p.check_open(b"GET /a.txt HTTP/1.0\r\n\r\n");
    p.check_open(b"GET /a.txt HTTP/1.0\r\nConnection: keep-alive\r\n\r\n");
    p.check_open(b"GET /a.txt HTTP/1.1\r\nHost: localhost\r\n\r\n");
    p.check_open(b"GET /a.txt HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n");
    p.check_open(b"GET /nope HTTP/1.1\r\nHost: localhost\r\n\r\n");
    p.check(
        b"GET /a.txt HTTP/1.1\r\nHost: localhost\r\n\r\nHEAD /a.txt HTTP/1.1\r\nHost: localhost\r\n\r\n\
          GET /nope HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\nGET /a.txt HTTP/1.1\r\n\r\n",
    );
}

#[test]
fn keepalive_timeout_zero() {
    let p = Pair::with(Conf {
        http: "keepalive_timeout 0;",
        ..Default::default()
    });
    p.get_open("/a.txt", "");
    p.check_open(b"GET /a.txt HTTP/1.0\r\nConnection: keep-alive\r\n\r\n");
}

#[test]
fn keepalive_timeout_with_header() {
    let p = Pair::with(Conf {
        http: "keepalive_timeout 65 60;",
        ..Default::default()
    });
    p.get_open("/a.txt", "");
    p.check_open(b"GET /a.txt HTTP/1.0\r\nConnection: keep-alive\r\n\r\n");
    p.check_open(b"GET /a.txt HTTP/1.0\r\n\r\n");
}

// ---- malformed requests ---------------------------------------------------------------------------

#[test]
fn bad_method_characters() {
    let p = Pair::new("");
    p.check_open(b"G@T /a.txt HTTP/1.1\r\nHost: localhost\r\n\r\n");
    p.check_open(b"get /a.txt HTTP/1.1\r\nHost: localhost\r\n\r\n");
    p.check_open(b"GET\t/a.txt HTTP/1.1\r\nHost: localhost\r\n\r\n");
}

#[test]
fn missing_host_in_http11() {
    let p = Pair::new("");
    p.check_open(b"GET /a.txt HTTP/1.1\r\n\r\n");
    p.check_open(b"GET /a.txt HTTP/1.0\r\n\r\n");
    p.check_open(b"GET /a.txt HTTP/1.1\r\nHost:\r\n\r\n");
}

#[test]
fn two_content_lengths() {
    let p = Pair::new("");
    p.check_open(b"GET /a.txt HTTP/1.1\r\nHost: localhost\r\nContent-Length: 1\r\nContent-Length: 1\r\n\r\nx");
    p.check_open(b"GET /a.txt HTTP/1.1\r\nHost: localhost\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nxy");
}

#[test]
fn obs_fold() {
    let p = Pair::new("");
    p.check_open(b"GET /a.txt HTTP/1.1\r\nHost: localhost\r\nX-A: 1\r\n  folded\r\n\r\n");
}

/// nginx refuses NUL in a header value and keeps its other control characters and DEL.
#[test]
fn control_characters_in_header_values() {
    let p = Pair::new("location = /ua { return 200 \"[$http_user_agent]\\n\"; }");
    p.check_open(b"GET /ua HTTP/1.1\r\nHost: localhost\r\nUser-Agent: a\x01b\x1bc\x7f\r\n\r\n");
    p.check_open(b"GET /ua HTTP/1.1\r\nHost: localhost\r\nUser-Agent: a\x00b\r\n\r\n");
    p.check_open(b"GET /ua HTTP/1.1\r\nHost: localhost\r\nX\x7f: a\r\n\r\n");
}

#[test]
fn transfer_encoding_gzip() {
    let p = Pair::new("");
    p.check_open(b"POST /a.txt HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: gzip\r\n\r\n");
    p.check_open(
        b"POST /a.txt HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n0\r\n\r\n",
    );
}

#[test]
fn http_2_0_request_line() {
    let p = Pair::new("");
    p.check_open(b"GET /a.txt HTTP/2.0\r\nHost: localhost\r\n\r\n");
    p.check_open(b"GET /a.txt HTTP/1.9\r\nHost: localhost\r\n\r\n");
    p.check_open(b"GET /a.txt HTTP/0.9\r\n\r\n");
}

#[test]
fn uri_too_long() {
    let p = Pair::new("");
    let uri = format!("/{}", "a".repeat(10_000));
    p.get_open(&uri, "");
}

#[test]
fn header_too_large() {
    let p = Pair::new("");
    let big = "b".repeat(10_000);
    p.check_open(
        format!("GET /a.txt HTTP/1.1\r\nHost: localhost\r\nX-Big: {big}\r\n\r\n").as_bytes(),
    );
}

#[test]
fn nul_in_uri() {
    let p = Pair::new("");
    p.get_open("/a.txt%00.html", "");
    p.get_open("/%00", "");
}

#[test]
fn dot_dot_traversal() {
    let p = Pair::new("");
    p.get_open("/../../etc/passwd", "");
    p.get_open("/dir/../a.txt", "");
    p.get_open("/dir/%2e%2e/a.txt", "");
    p.get_open("/dir/./b.txt", "");
    p.get_open("//dir//b.txt", "");
}

#[test]
fn request_targets_and_hosts() {
    let p = Pair::new("");
    p.check_open(b"GET http://localhost/a.txt HTTP/1.1\r\nHost: other\r\n\r\n");
    p.check_open(b"GET http://LocalHost./dir HTTP/1.1\r\nHost: x\r\n\r\n");
    p.check_open(b"GET /dir HTTP/1.1\r\nHost: LocalHost.\r\n\r\n");
    p.check_open(b"GET /a.txt HTTP/1.1\r\nHost: bad/host\r\n\r\n");
    p.check_open(b"GET /a.txt HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n");
    p.check_open(b"GET /a.txt?x=%20#frag HTTP/1.1\r\nHost: localhost\r\n\r\n");
    p.check_open(b"GET a.txt HTTP/1.1\r\nHost: localhost\r\n\r\n");
    p.check_open(b"GET * HTTP/1.1\r\nHost: localhost\r\n\r\n");
    p.check_open(b"OPTIONS * HTTP/1.1\r\nHost: localhost\r\n\r\n");
    p.check_open(b"\r\nGET /a.txt HTTP/1.1\r\nHost: localhost\r\n\r\n");
}

/// nginx 1.22.1 takes CRs before a header line's LF (`X: a\r\r\n` is `a`; shoal refused it
/// with 400) and refuses a CR elsewhere: in a name, a value, the request line, and as the
/// head's end (`\r\r\n`, answered at the second CR, where shoal waited for more). The log
/// lines are nginx's too.
#[test]
fn crs_before_the_lf_of_a_header_line() {
    let p = Pair::new("location = /x { return 200 \"[$http_x]\\n\"; }");
    for line in [
        &b"X: a\r\r\n"[..],
        b"X: a\r\r\r\n",
        b"X: a  \r\r\n",
        b"X:\r\r\n",
        b"X\r\r\n",
        b"X: a\r\r\nY: b\r\n",
        b"X: a\r\rb\r\n",
        b"X: a \r \r\n",
        b"X\r: a\r\n",
        b"\rX: a\r\n",
        b"X: a\r\n\r\r\n",
        b"X: a\r\n\r\rGET",
    ] {
        let mut req = b"GET /x HTTP/1.1\r\nHost: localhost\r\n".to_vec();
        req.extend_from_slice(line);
        if !line.ends_with(b"GET") {
            req.extend_from_slice(b"\r\n");
        }
        p.check_open(&req);
    }
    p.check_open(b"GET /x HTTP/1.1\r\r\nHost: localhost\r\n\r\n");
    p.check_open(b"GET /x\r HTTP/1.1\r\nHost: localhost\r\n\r\n");
    let invalid = |log: String| -> Vec<String> {
        log.lines()
            .filter_map(|l| l.split_once("client sent invalid"))
            .map(|(_, rest)| rest.to_string())
            .collect()
    };
    let (n, s) = (invalid(p.nginx_log()), invalid(p.shoal_log()));
    assert_eq!(n.len(), 8, "{n:#?}");
    assert_eq!(s, n);
}

/// nginx refuses a header line as it reads it: a head with a wrong line (a second `Host`, a
/// second of a header it allows once) is answered at that line, not when it ends (shoal
/// waited for the empty line, or `client_header_timeout`).
#[test]
fn a_refused_header_line_is_answered_before_the_head_ends() {
    let p = Pair::new("");
    for line in [
        "X a: b",
        "X: a\0b",
        ": b",
        " X: b",
        "Host: b",
        "If-Match: a\r\nIf-Match: b",
    ] {
        let req = format!("GET /a.txt HTTP/1.1\r\nHost: localhost\r\n{line}\r\n");
        let t = p.check_open(req.as_bytes());
        assert!(t.starts_with("HTTP/1.1 400"), "{t}");
    }
}

// ---- bodies ----------------------------------------------------------------------------------------

#[test]
fn post_to_a_static_file() {
    let p = Pair::new("");
    p.check_open(b"POST /a.txt HTTP/1.1\r\nHost: localhost\r\nContent-Length: 5\r\n\r\nhello");
    p.check_open(b"PUT /a.txt HTTP/1.1\r\nHost: localhost\r\nContent-Length: 0\r\n\r\n");
    p.check_open(b"DELETE /nope HTTP/1.1\r\nHost: localhost\r\n\r\n");
    p.check_open(b"POST /dir/ HTTP/1.1\r\nHost: localhost\r\nContent-Length: 1\r\n\r\nx");
    p.check_open(
        b"POST /a.txt HTTP/1.1\r\nHost: localhost\r\nExpect: 100-continue\r\nContent-Length: 2\r\n\r\nhi",
    );
    p.check_open(b"POST /a.txt HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nhi\r\n0\r\n\r\n");
    // The body is not sent: both answer 413 and close (when nginx stops waiting for it, see
    // `discarding_a_body_keeps_the_connection_open`).
    p.check(b"POST /a.txt HTTP/1.1\r\nHost: localhost\r\nContent-Length: 2000000\r\n\r\n");
}

// nginx answers a 413 and then goes on discarding the announced body, the connection open
// (no FIN) until `lingering_timeout` passes without input.
#[test]
fn discarding_a_body_keeps_the_connection_open() {
    let p = Pair::new("");
    p.check_open(b"POST /a.txt HTTP/1.1\r\nHost: localhost\r\nContent-Length: 2000000\r\n\r\n");
}

/// A chunked body past `client_max_body_size` is found while it is read: nginx answers 413,
/// sends its FIN at once and reads what still comes (its lingering close), where a declared
/// length is refused before the body and discarded without a FIN (above). shoal kept the
/// connection open without a FIN in both.
#[test]
fn a_chunked_body_past_the_limit_is_413_and_a_lingering_close() {
    let up = crate::common::upstream::Upstream::echo();
    let p = Pair::with(Conf {
        http: "log_format st '$status $request';",
        server: &format!(
            "client_max_body_size 10;\naccess_log logs/access.log st;\n\
             location /up {{ proxy_pass http://127.0.0.1:{}; }}",
            up.port()
        ),
        ..Default::default()
    });
    let head = "POST /up HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: chunked\r\n\r\n";
    // Sent whole, and cut after the chunk that passes the limit.
    let whole = format!("{head}8\r\n12345678\r\n8\r\n12345678\r\n0\r\n\r\n");
    let t = p.check_open(whole.as_bytes());
    assert!(
        t.starts_with("HTTP/1.1 413") && t.ends_with("[closed]"),
        "{t}"
    );
    p.check_open(format!("{head}8\r\n12345678\r\n8\r\n1234").as_bytes());
    // The body goes on after the answer: both read it (no reset) until the client is done.
    let (np, sp) = p.ports();
    for port in [np, sp] {
        let mut c = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
        c.set_read_timeout(Some(crate::common::WAIT)).unwrap();
        c.write_all(format!("{head}8\r\n12345678\r\n8\r\n12345678\r\n").as_bytes())
            .unwrap();
        let mut answer = Vec::new();
        c.read_to_end(&mut answer).expect("the answer and a FIN");
        assert!(answer.starts_with(b"HTTP/1.1 413"), "{port}");
        for _ in 0..50 {
            c.write_all(b"8\r\n12345678\r\n")
                .unwrap_or_else(|e| panic!("{port}: the rest of the body is read: {e}"));
        }
        c.write_all(b"0\r\n\r\n").unwrap();
    }
    let line = "client intended to send too large chunked body: 8+8 bytes, client: 127.0.0.1, \
                server: localhost, request: \"POST /up HTTP/1.1\", host: \"localhost\"";
    let count = |log: String| log.matches(line).count();
    assert_eq!(count(p.nginx_log()), 3);
    assert_eq!(count(p.shoal_log()), 3);
    // nginx writes the access log line when its lingering close ends.
    let until = std::time::Instant::now() + crate::common::WAIT;
    while p.read_both("logs/access.log").0.lines().count() < 3 && std::time::Instant::now() < until
    {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let (n, s) = p.read_both("logs/access.log");
    assert_eq!(n, "413 POST /up HTTP/1.1\n".repeat(3));
    assert_eq!(s, n);
    assert!(up.requests().is_empty());
}

#[test]
fn body_then_pipelined_get() {
    let p = Pair::new("");
    p.check(
        b"GET /a.txt HTTP/1.1\r\nHost: localhost\r\nContent-Length: 5\r\n\r\nhelloGET /page.html HTTP/1.1\r\nHost: localhost\r\n\r\n",
    );
    p.check(
        b"POST /a.txt HTTP/1.1\r\nHost: localhost\r\nContent-Length: 5\r\n\r\nhelloGET /page.html HTTP/1.1\r\nHost: localhost\r\n\r\n",
    );
    p.check(
        b"GET /a.txt HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\nGET /page.html HTTP/1.1\r\nHost: localhost\r\n\r\n",
    );
}

// ---- found by fuzz/differential ------------------------------------------------------------

#[test]
fn request_line_version_grammar() {
    let p = Pair::new("");
    // A major above 1 is a 505 as soon as it is read, whatever follows; a leading zero is a 400.
    for v in [
        "HTTP/2",
        "HTTP/10.1",
        "HTTP/2.0x",
        "HTTP/9.9 x",
        "HTTP/01.1",
        "HTTP/1.100",
        "HTTP/1.1000",
        "HTTP/1.00",
    ] {
        p.check_open(format!("GET /a.txt {v}\r\nHost: localhost\r\n\r\n").as_bytes());
    }
    // The target is read before the version.
    p.check_open(b"GET a.txt HTTP/2.0\r\nHost: localhost\r\n\r\n");
    p.check_open(b"GET http://u@localhost/a.txt HTTP/9.9\r\nHost: localhost\r\n\r\n");
    p.check_open(b"GET http://localhost/a.txt HTTP/9.9\r\nHost: localhost\r\n\r\n");
}

#[test]
fn headers_allowed_once() {
    let p = Pair::new("");
    for h in [
        "If-None-Match: \"x\"",
        "If-Match: \"x\"",
        "If-Modified-Since: Sun, 01 Jan 2023 00:00:00 GMT",
        "If-Unmodified-Since: Sun, 01 Jan 2023 00:00:00 GMT",
        "If-Range: \"x\"",
        "Expect: 100-continue",
        "Authorization: Basic eDp5",
        "Content-Range: bytes 0-1/2",
        // Repeatable ones, for contrast.
        "Range: bytes=0-1",
        "User-Agent: x",
    ] {
        p.check_open(
            format!("GET /a.txt HTTP/1.1\r\nHost: localhost\r\n{h}\r\n{h}\r\n\r\n").as_bytes(),
        );
    }
}

#[test]
fn connection_header_last_line_wins() {
    let p = Pair::new("");
    p.check_open(b"GET /a.txt HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\nConnection: keep-alive\r\n\r\n");
    p.check_open(b"GET /a.txt HTTP/1.1\r\nHost: localhost\r\nConnection: closed\r\n\r\n");
    p.check_open(b"GET /a.txt HTTP/1.0\r\nConnection: x-keep-alive-y\r\n\r\n");
}

#[test]
fn header_line_without_colon() {
    let p = Pair::new("");
    p.check_open(b"GET /a.txt HTTP/1.1\r\nHost: localhost\r\nNoColon\r\n\r\n");
    p.check_open(b"GET /a.txt HTTP/1.1\r\nHost: localhost\r\nNo Colon\r\n\r\n");
}

#[test]
fn trace_and_connect_refused_with_the_head() {
    let p = Pair::new("location /text { return 200 \"text\\n\"; }");
    p.check_open(b"TRACE /text HTTP/1.1\r\nHost: localhost\r\n\r\n");
    p.check_open(b"TRACE /a.txt HTTP/1.1\r\nHost: localhost\r\n\r\n");
    p.check_open(b"CONNECT localhost:80 HTTP/1.1\r\nHost: localhost\r\n\r\n");
    // Other unknown methods reach the location.
    p.check_open(b"PROPFIND /text HTTP/1.1\r\nHost: localhost\r\n\r\n");
}

#[test]
fn refused_requests_take_add_header_always_and_head() {
    let p = Pair::new("add_header X-Always yes always;\nadd_header X-Good yes;");
    p.check_open(b"GET /a.txt HTTP/1.1\r\n\r\n");
    p.check_open(b"GET /a.txt HTTP/2\r\nHost: localhost\r\n\r\n");
    p.check_open(
        format!(
            "GET /{} HTTP/1.1\r\nHost: localhost\r\n\r\n",
            "a".repeat(10_000)
        )
        .as_bytes(),
    );
    // A refused HEAD gets the head of the page, not its body.
    p.check_open(b"HEAD /a.txt HTTP/1.1\r\n\r\n");
    p.check_open(b"\r\nHEAD /a.txt HTTP/9.9\r\nHost: localhost\r\n\r\n");
    p.check_open(b"HEAD\t/a.txt HTTP/1.1\r\n\r\n");
}

#[test]
fn post_is_looked_up_like_get() {
    let p = Pair::new("location /try/ { try_files $uri /missing.txt; }");
    for path in [
        "/nope",
        "/dir",
        "/dir/",
        "/emptydir/",
        "/nodir/",
        "/a.txt",
        "/a.txt/x",
        "/try/x",
    ] {
        p.check_open(
            format!("POST {path} HTTP/1.1\r\nHost: localhost\r\nContent-Length: 1\r\n\r\nx")
                .as_bytes(),
        );
    }
    if permissions_enforced() {
        p.check_open(b"POST /secret.txt HTTP/1.1\r\nHost: localhost\r\nContent-Length: 1\r\n\r\nx");
    }
}

#[test]
fn disable_symlinks_on_a_directory_on_the_way() {
    let p = Pair::new("disable_symlinks on;");
    let html = p.html();
    std::os::unix::fs::symlink("dir", html.join("linkdir")).expect("a symlink");
    std::os::unix::fs::symlink("a.txt", html.join("link.txt")).expect("a symlink");
    std::os::unix::fs::symlink("nowhere", html.join("dangling")).expect("a symlink");
    for path in [
        "/link.txt",
        "/linkdir",
        "/linkdir/",
        "/linkdir/b.txt",
        "/dangling",
        "/dangling/x",
        "/dir/b.txt",
    ] {
        p.get(path, "");
    }
}

#[test]
fn refused_requests_take_the_server_nginx_had_chosen() {
    // The default server is the first; a `server_name ""` one is what a complete request without
    // Host gets; `localhost` is the test's own. Each marks its answers.
    let p = Pair::with(Conf {
        http: "    server { listen 127.0.0.1:{PORT}; server_name default.test; \
               add_header X-Srv default always; }\n    \
               server { listen 127.0.0.1:{PORT}; server_name \"\"; \
               add_header X-Srv empty always; }",
        server: "add_header X-Srv localhost always;",
        ..Default::default()
    });
    let long = "a".repeat(10_000);
    // In the request line: the default server.
    p.check_open(b"get /a.txt HTTP/1.1\r\nHost: localhost\r\n\r\n");
    p.check_open(b"GET /a.txt HTTP/2.0\r\nHost: localhost\r\n\r\n");
    p.check_open(b"GET /../a.txt HTTP/1.1\r\nHost: localhost\r\n\r\n");
    p.check_open(format!("GET /{long} HTTP/1.1\r\nHost: localhost\r\n\r\n").as_bytes());
    // In a header line: the Host's server if it came before, else the default.
    p.check_open(b"GET /a.txt HTTP/1.1\r\nBad Header: x\r\nHost: localhost\r\n\r\n");
    p.check_open(b"GET /a.txt HTTP/1.1\r\nHost: localhost\r\nBad Header: x\r\n\r\n");
    p.check_open(b"GET /a.txt HTTP/1.1\r\nHost: local/host\r\n\r\n");
    p.check_open(b"GET /a.txt HTTP/1.1\r\nHost: localhost\r\nHost: x\r\n\r\n");
    p.check_open(b"GET http://localhost/a.txt HTTP/1.1\r\nBad Header: x\r\n\r\n");
    p.check_open(format!("GET / HTTP/1.1\r\nHost: localhost\r\nX: {long}\r\n\r\n").as_bytes());
    p.check_open(format!("GET / HTTP/1.1\r\nX: {long}\r\nHost: localhost\r\n\r\n").as_bytes());
    // After the whole head: the server a request gets (no Host: the `""` one).
    p.check_open(b"GET /a.txt HTTP/1.1\r\n\r\n");
    p.check_open(b"TRACE /a.txt HTTP/1.0\r\n\r\n");
    p.check_open(b"TRACE /a.txt HTTP/1.1\r\nHost: localhost\r\n\r\n");
    p.check_open(b"GET /a.txt HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: gzip\r\n\r\n");
}

#[test]
fn over_long_request_line_already_wrong() {
    let p = Pair::new("");
    let long = "a".repeat(10_000);
    for line in [
        format!("get /{long} HTTP/1.1\r\nHost: localhost\r\n\r\n"),
        format!("GE@T /{long} HTTP/1.1\r\n\r\n"),
        format!("GET /\x01{long} HTTP/1.1\r\n\r\n"),
        format!("GET 1x{long} HTTP/1.1\r\n\r\n"),
        format!("GET http://a@b/{long} HTTP/1.1\r\n\r\n"),
        format!("GET / HTTP/1.1 {long}\r\n\r\n"),
        format!("GET / HTTP/2{long}\r\n\r\n"),
        format!("GET /      {long}\r\n\r\n"),
        // Still fine when the buffer ends: 414.
        format!("GET {long}\r\n\r\n"),
        format!("GET http://a/{long} HTTP/1.1\r\n\r\n"),
    ] {
        p.check_open(line.as_bytes());
    }
}

/// nginx reads the host's name at each cycle's start and keeps it in lower case.
#[test]
fn hostname_is_the_machines() {
    let p = Pair::new("location = /hn { return 200 \"[$hostname]\\n\"; }");
    let answer = p.check(b"GET /hn HTTP/1.0\r\n\r\n");
    assert!(!answer.contains("[]"), "{answer}");
}

#[test]
fn server_protocol_is_the_raw_text() {
    let p = Pair::new("location = /sp { return 200 \"[$server_protocol]\\n\"; }");
    for version in [
        "HTTP/1.1",
        "HTTP/1.0",
        "HTTP/1.2",
        "HTTP/1.00",
        "HTTP/1.010",
        "HTTP/1.1 ",
        "HTTP/1.1   ",
    ] {
        p.check_open(format!("GET /sp {version}\r\nHost: localhost\r\n\r\n").as_bytes());
    }
    p.check_open(b"GET /sp   HTTP/1.1\nHost: localhost\n\n");
}

#[test]
fn conditional_dates_read_as_nginx_reads_them() {
    let p = Pair::new(
        "location /exact/ { alias {HTML}/; if_modified_since exact; }\n\
         location /before/ { alias {HTML}/; if_modified_since before; }",
    );
    for date in [
        "Sun, 01 Jan 2023 00:00:00 GMT; length=17",
        "Sun, 01 Jan 2023 00:00:00",
        "Sun, 01 Jan 2023 00:00:00xyz",
        "Sun, 01 Jan 2023 00:00:0",
        "Sunday, 01-Jan-23 00:00:00",
        "Sun Jan  1 00:00:00 2023 junk",
        "Sun Jan 1 00:00:00 2023",
        "Xyz, 01 Jan 2023 00:00:00 UTC",
        "Sun,   01 Jan 2023 00:00:00 +0100",
        "Sun, 01 Jxx 2023 00:00:00 GMT",
        "Wed, 31 Dec 1969 23:59:59 GMT",
    ] {
        p.get("/exact/a.txt", &format!("If-Modified-Since: {date}\r\n"));
        p.get("/before/a.txt", &format!("If-Modified-Since: {date}\r\n"));
        p.get("/a.txt", &format!("If-Unmodified-Since: {date}\r\n"));
    }
}
