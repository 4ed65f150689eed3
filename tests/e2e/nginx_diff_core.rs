//! nginx's core directives shoal took from the "refused" list, against real nginx: `-t` on
//! each (hash and pool sizes, temporary paths, request body files, `types`, an upstream's
//! `zone`, `postpone_output`, `send_lowat`, `chunked_transfer_encoding`, `limit_except`)
//! gives the same verdict and the same lines; `limit_except` and `chunked_transfer_encoding off` answer the same requests
//! the same way (see `diff/mod.rs` for what is normalised).

use crate::common::upstream::{echo_answer, Upstream};
use crate::diff::{Conf, Pair};

#[test]
fn sizes_paths_and_framing_at_t() {
    let long = "a".repeat(47);
    let cases: Vec<(String, String)> = [
        ("connection_pool_size 1;", ""),
        ("connection_pool_size 100;", ""),
        ("connection_pool_size 112;", ""),
        ("connection_pool_size 4001;", ""),
        ("connection_pool_size x;", ""),
        ("connection_pool_size 512; connection_pool_size 512;", ""),
        ("", "connection_pool_size 512;"),
        ("", "location / { connection_pool_size 512; }"),
        ("request_pool_size 4k;", ""),
        ("request_pool_size 4001;", ""),
        ("", "location / { request_pool_size 4k; }"),
        ("server_names_hash_max_size x;", ""),
        ("server_names_hash_bucket_size 1k;", ""),
        ("", "server_names_hash_bucket_size 64;"),
        ("variables_hash_max_size 0;", ""),
        ("variables_hash_bucket_size 0;", ""),
        ("variables_hash_bucket_size 65473;", ""),
        ("variables_hash_bucket_size 65472;", ""),
        ("variables_hash_bucket_size 7;", ""),
        ("types_hash_max_size 0;", ""),
        ("types_hash_bucket_size 65473;", ""),
        ("", "location / { types_hash_bucket_size 70000; }"),
        (
            "",
            "location / { types { text/html html; } types_hash_bucket_size 70000; }",
        ),
        ("upstream u { zone a 64k; server 127.0.0.1:1; }", ""),
        ("upstream u { zone a 32767; server 127.0.0.1:1; }", ""),
        ("upstream u { zone a 1x; server 127.0.0.1:1; }", ""),
        ("upstream u { zone a; server 127.0.0.1:1; }", ""),
        (
            "upstream u { zone a 64k; server 127.0.0.1:1; } \
             upstream v { zone a; server 127.0.0.1:2; }",
            "",
        ),
        (
            "upstream u { zone a 64k; server 127.0.0.1:1; } \
             upstream v { zone a 128k; server 127.0.0.1:2; }",
            "",
        ),
        (
            "upstream u { zone a 64k; server 127.0.0.1:1; } \
             limit_req_zone $uri zone=a:1m rate=1r/s;",
            "",
        ),
        ("types { text/a xx; text/a xx; }", ""),
        // The warnings read before an error come before it, as nginx logs them.
        (
            "types { text/a xx; text/a xx; } upstream u { zone a 1k; server 127.0.0.1:1; }",
            "",
        ),
        (
            "types { text/a xx; text/a xx; } upstream u { zone a; server 127.0.0.1:1; }",
            "",
        ),
        ("types { text/a xx; text/b XX; }", ""),
        ("types { text/a xx; } types { text/a xx yy; }", ""),
        ("types { text/a xx; }", "types { text/a xx; }"),
        ("map_hash_bucket_size 0; map $uri $x { a 1; }", ""),
        ("map_hash_max_size 0; map $uri $x { a 1; }", ""),
        ("map_hash_bucket_size 70000; map $uri $x { default 1; }", ""),
        ("map $uri $x { a 1; } map_hash_bucket_size 128;", ""),
        ("map_hash_bucket_size 1k;", ""),
        ("", "map_hash_bucket_size 64;"),
        ("proxy_headers_hash_max_size 0;", ""),
        ("proxy_headers_hash_bucket_size 70000;", ""),
        ("", "location / { proxy_headers_hash_max_size 512; }"),
        (
            "",
            "location / { if ($x) { proxy_headers_hash_max_size 512; } }",
        ),
        ("postpone_output x;", ""),
        ("postpone_output 0;", ""),
        ("", "location / { if ($x) { postpone_output 1; } }"),
        ("send_lowat 1k;", ""),
        ("send_lowat x;", ""),
        ("chunked_transfer_encoding maybe;", ""),
        (
            "",
            "location / { if ($x) { chunked_transfer_encoding off; } }",
        ),
        ("client_body_in_file_only maybe;", ""),
        (
            "client_body_in_file_only clean; client_body_in_file_only on;",
            "",
        ),
        ("client_body_in_single_buffer x;", ""),
        (
            "",
            "location / { if ($x) { client_body_in_file_only on; } }",
        ),
        ("", "client_body_temp_path tmp 3;"),
        ("", "client_body_temp_path tmp 0;"),
        ("", "client_body_temp_path tmp a;"),
        ("", "client_body_temp_path tmp 5 5;"),
        ("", "client_body_temp_path tmp 5 6;"),
        ("", "client_body_temp_path tmp 4 4 3;"),
        ("", "client_body_temp_path tmp 1 2 3 4;"),
        ("", "client_body_temp_path tmp; client_body_temp_path tmp2;"),
        ("", "proxy_temp_path tmp 11;"),
        ("", "proxy_temp_path tmp 1 2;"),
        (
            "",
            "location /a { proxy_temp_path tmp 1; } location /b { proxy_temp_path tmp 2; }",
        ),
        (
            "",
            "location /a { proxy_temp_path tmp 1; } location /b { client_body_temp_path tmp 1; }",
        ),
        (
            "",
            "location /a { proxy_temp_path tmp 1; } \
             location /b { client_body_temp_path tmp 1 2; }",
        ),
        ("", "location / { limit_except FOO { } }"),
        ("", "location / { limit_except get { } }"),
        (
            "",
            "location / { limit_except GET { } limit_except POST { } }",
        ),
        ("", "limit_except GET { }"),
        ("", "location / { limit_except { } }"),
        ("", "location / { limit_except GET; }"),
        (
            "",
            "location / { limit_except GET { limit_except POST { } } }",
        ),
        ("", "location / { limit_except GET { root /tmp; } }"),
        (
            "",
            "location / { limit_except GET { proxy_pass http://127.0.0.1:1/x; } }",
        ),
        (
            "",
            "location / { limit_except GET { allow all; deny all; auth_basic x; \
             auth_basic_user_file /dev/null; access_log off; proxy_pass http://127.0.0.1:1; } }",
        ),
        ("", "location / { limit_except GET { return 403; } }"),
        ("", "location / { limit_except TRACE { } }"),
        ("", "location / { if ($x) { limit_except GET { } } }"),
    ]
    .iter()
    .map(|(h, s)| (h.to_string(), s.to_string()))
    .chain([
        (format!("map $uri $x {{ {long} 1; }}"), String::new()),
        (
            format!("map $uri $x {{ {} 1; }}", &long[1..]),
            String::new(),
        ),
        (
            format!("map $uri $x {{ hostnames; *.{long}.com 1; }}"),
            String::new(),
        ),
        (format!("types {{ text/x {long}; }}"), String::new()),
        (
            String::new(),
            format!("location / {{ types {{ text/x {long}; }} }}"),
        ),
    ])
    .collect();
    for (http, server) in &cases {
        // `$x` is set in the server for the `if` cases.
        let server = format!("set $x 1;\n{server}");
        let (nginx, shoal) = crate::diff::both_test(http, &server);
        assert_eq!(shoal, nginx, "for http {{ {http} }} server {{ {server} }}");
    }
}

fn request(p: &Pair, method: &str, path: &str) -> String {
    p.check(
        format!(
            "{method} {path} HTTP/1.1\r\nHost: localhost\r\nContent-Length: 0\r\n\
             Authorization: Basic dTpw\r\n\r\n"
        )
        .as_bytes(),
    )
}

#[test]
fn limit_except_as_nginx_applies_it() {
    let p = Pair::new(
        "location /a/ { alias {HTML}/; limit_except GET { deny all; } \
             location /a/dir/ { alias {HTML}/dir/; } }\n\
         location /r/ { alias {HTML}/; return 200 \"ret\\n\"; limit_except GET { deny all; } }\n\
         location /r2/ { alias {HTML}/; return 200 \"ret\\n\"; limit_except GET { allow all; } }\n\
         location /o/ { alias {HTML}/; limit_except get POST { deny all; } }\n\
         location /i/ { alias {HTML}/; if ($arg_x) { return 200 \"if\\n\"; } \
             limit_except GET { deny all; } }\n\
         location /h/ { alias {HTML}/; limit_except HEAD { deny all; } }\n\
         location /ab/ { alias {HTML}/; limit_except GET { auth_basic \"x\"; \
             auth_basic_user_file {HTML}/pw; } }\n\
         location /al/ { alias {HTML}/; allow all; limit_except GET { allow 10.0.0.0/8; deny all; } }\n\
         location /ok/ { alias {HTML}/; limit_except GET { allow 127.0.0.1; deny all; } }\n\
         location /sat/ { alias {HTML}/; satisfy any; limit_except GET { deny all; \
             auth_basic \"s\"; auth_basic_user_file {HTML}/pw; } }\n\
         location /ep/ { alias {HTML}/; error_page 403 /a.txt; limit_except GET { deny all; } }",
    );
    std::fs::write(p.html().join("pw"), "u:{PLAIN}p\n").unwrap();
    for method in ["GET", "HEAD", "POST", "DELETE", "PATCH", "OPTIONS", "FOO"] {
        for path in [
            "/a/a.txt",
            "/a/dir/b.txt",
            "/r/a.txt",
            "/r2/a.txt",
            "/o/a.txt",
            "/i/a.txt?x=1",
            "/h/a.txt",
            "/ab/a.txt",
            "/al/a.txt",
            "/ok/a.txt",
            "/sat/a.txt",
            "/ep/a.txt",
        ] {
            request(&p, method, path);
        }
    }
    assert!(p.shoal_log().contains("access forbidden by rule"));
}

/// `limit_except` and `if` blocks are nameless locations: they answer with their location's
/// proxy.
#[test]
fn nameless_blocks_proxy_with_the_location_s_upstream() {
    let up = Upstream::start(echo_answer);
    let server = format!(
        "location /p/ {{ proxy_pass {0}; limit_except GET {{ deny all; }} }}\n\
         location /q/ {{ proxy_pass {0}; limit_except GET {{ allow all; }} }}\n\
         location /f/ {{ proxy_pass {0}; if ($arg_a) {{ add_header X-If 1; }} }}",
        up.url()
    );
    let p = Pair::new(&server);
    for (method, path) in [
        ("POST", "/p/x"),
        ("GET", "/p/x"),
        ("PUT", "/q/x"),
        ("GET", "/q/x"),
        ("GET", "/f/x?a=1"),
        ("GET", "/f/x"),
    ] {
        p.check_open(
            format!("{method} {path} HTTP/1.1\r\nHost: localhost\r\nContent-Length: 2\r\n\r\nab")
                .as_bytes(),
        );
    }
}

#[test]
fn chunked_transfer_encoding_off_ends_with_the_connection() {
    let up = Upstream::start(|r| echo_answer(r).chunked(&[3, 50]));
    let server = format!(
        "chunked_transfer_encoding off;\n\
         location /up/ {{ proxy_pass {0}; }}\n\
         location /on/ {{ proxy_pass {0}; chunked_transfer_encoding on; }}\n\
         location /ls/ {{ alias {{HTML}}/sub/; autoindex on; }}",
        up.url()
    );
    let p = Pair::with(Conf {
        server: &server,
        ..Default::default()
    });
    for req in [
        "GET /up/x HTTP/1.1\r\nHost: localhost\r\n\r\n",
        "GET /up/x HTTP/1.0\r\n\r\n",
        "HEAD /up/x HTTP/1.1\r\nHost: localhost\r\n\r\n",
        "GET /ls/ HTTP/1.1\r\nHost: localhost\r\n\r\n",
        "HEAD /ls/ HTTP/1.1\r\nHost: localhost\r\n\r\n",
    ] {
        p.check_open(req.as_bytes());
    }
    let on = p.check_open(b"GET /on/x HTTP/1.0\r\n\r\n");
    assert!(on.contains("[closed]"), "{on}");
    let off = p.check_open(b"GET /ls/ HTTP/1.1\r\nHost: localhost\r\n\r\n");
    assert!(
        off.contains("Connection: close") && !off.contains("chunked"),
        "{off}"
    );
}

/// Milliseconds until the first byte of the answer to `GET path` on `port`.
fn first_byte_ms(port: u16, path: &str) -> u128 {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(std::time::Duration::from_secs(10)))
        .unwrap();
    let t = std::time::Instant::now();
    s.write_all(format!("GET {path} HTTP/1.1\r\nHost: localhost\r\n\r\n").as_bytes())
        .unwrap();
    let mut b = [0u8; 1];
    s.read_exact(&mut b).unwrap();
    t.elapsed().as_millis()
}

#[test]
fn postpone_output_holds_a_trickling_answer_as_nginx_does() {
    // 10 bytes of the body, then 1 s, then the rest: nginx holds the head and the 10 bytes
    // (under 1460) until more comes; with `postpone_output 0` or `proxy_buffering off`, not.
    let up = Upstream::start(|_| {
        crate::common::upstream::Answer::ok(vec![b'x'; 3000])
            .delay_body(10, std::time::Duration::from_millis(1000))
    });
    let server = format!(
        "location /d/ {{ proxy_pass {0}; }}\n\
         location /z/ {{ proxy_pass {0}; postpone_output 0; }}\n\
         location /small/ {{ proxy_pass {0}; postpone_output 5; }}\n\
         location /nb/ {{ proxy_pass {0}; proxy_buffering off; }}",
        up.url()
    );
    let p = Pair::new(&server);
    let (np, sp) = p.ports();
    for path in ["/d/", "/z/", "/small/", "/nb/"] {
        let (n, s) = (first_byte_ms(np, path), first_byte_ms(sp, path));
        let held = |ms: u128| ms >= 700;
        assert_eq!(
            held(s),
            held(n),
            "{path}: nginx's first byte after {n} ms, shoal's after {s} ms"
        );
        if path == "/d/" {
            assert!(held(s), "{path}: {s} ms");
        }
    }
}
