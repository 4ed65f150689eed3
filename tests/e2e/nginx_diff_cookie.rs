//! `proxy_cookie_domain`, `proxy_cookie_path` and `proxy_cookie_flags` against real nginx: both
//! proxy to one upstream that answers with the `Set-Cookie` lines the request asked for (its
//! `X-Set-Cookie` headers), so every answer compares how each rewrote them (and when it left a
//! line as it came). The configuration checks (`-t`) are compared too. The other everyday
//! directives of the same task are here as well: `recursive_error_pages`, `gunzip`.

use crate::common::upstream::{Answer, Upstream};
use crate::diff::{both_test, Conf, Pair};

/// The upstream: `Set-Cookie` for each `X-Set-Cookie` of the request, in order.
fn upstream() -> Upstream {
    Upstream::start(|r| {
        r.header_all("x-set-cookie")
            .into_iter()
            .fold(Answer::ok("cookies\n"), |a, c| a.header("Set-Cookie", c))
    })
}

fn pair(up: &Upstream, http: &str, server: &str) -> Pair {
    Pair::with(Conf {
        http,
        server: &server.replace("UP", &up.url()),
        ..Default::default()
    })
}

/// The request's header lines asking for these cookies.
fn cookies(lines: &[&str]) -> String {
    lines
        .iter()
        .map(|c| format!("X-Set-Cookie: {c}\r\n"))
        .collect()
}

#[test]
fn domain_and_path_rules_as_nginx() {
    let up = upstream();
    let p = pair(
        &up,
        "",
        "proxy_cookie_domain .Example.com $host;\n\
         proxy_cookie_path $arg_p /p/;\n\
         location / {\n\
             proxy_pass UP;\n\
             proxy_cookie_domain example.com new.org;\n\
             proxy_cookie_domain ~^(.*)\\.foo\\.com$ $1.bar.net;\n\
             proxy_cookie_domain example.com second.org;\n\
             proxy_cookie_path /app/ /;\n\
             proxy_cookie_path ~*^/CASE/(.*) /z/$1;\n\
         }\n\
         location /regex/ {\n\
             proxy_pass UP;\n\
             proxy_cookie_domain ~(?<n>x)\\.Y$ $n.$1.$host;\n\
             proxy_cookie_path ~^/A(.*) /b$1;\n\
             proxy_cookie_path /x /first;\n\
             proxy_cookie_path /x /second;\n\
         }\n\
         location /inherited/ { proxy_pass UP; }\n\
         location /off/ { proxy_pass UP; proxy_cookie_domain off; proxy_cookie_path off; }\n\
         location /pathoff/ { proxy_pass UP; proxy_cookie_path off; }",
    );
    let cases: &[(&str, &[&str])] = &[
        ("/", &["a=b; Domain=example.com; Path=/app/x"]),
        ("/", &["a=b; domain=.EXAMPLE.com;path=/app/x"]),
        // Spaces around names and values dropped, a trailing `;` kept as an empty attribute.
        ("/", &["a=b;Domain=x.foo.com ; Path = /CaSe/q ;"]),
        // The prefix minds case; a line no rule changes passes as it came.
        ("/", &["a=b ;  Path=/App/x"]),
        ("/", &["a=b;;domain=example.com;", "c=d; path=/app/"]),
        // No `name=`: not rewritten; attributes with no value are left.
        ("/", &["noeq; domain=example.com", "e=1;domain;path"]),
        (
            "/",
            &["=1;path=/app/", "=;domain=example.com;domain=foo.com"],
        ),
        (
            "/",
            &["e=1;path=/app/y;domain=x.foo.com;domain=.X.FOO.COM;domain=o"],
        ),
        ("/regex/", &["a=1; domain=ab.x.y; Path=/Ab", "b=2;path=/xy"]),
        ("/regex/", &["a=1; path=/a; domain=localhost"]),
        // The server's rules where the location has none: variables, a dot kept.
        ("/inherited/?p=/q", &["a=b; domain=.example.COM; path=/q/r"]),
        ("/inherited/", &["a=b; domain=example.com; path=/q"]),
        ("/inherited/?p=/r", &["a=b; path=/q"]),
        ("/off/?p=/q", &["a=b; domain=example.com; path=/q/r"]),
        ("/pathoff/?p=/q", &["a=b; domain=example.com; path=/q/r"]),
    ];
    for (path, lines) in cases {
        p.get_open(path, &cookies(lines));
    }
}

#[test]
fn flags_as_nginx() {
    let up = upstream();
    let p = pair(
        &up,
        "proxy_cookie_flags $arg_c $arg_f $arg_g;",
        "location / { proxy_pass UP; }\n\
         location /one/ {\n\
             proxy_pass UP;\n\
             proxy_cookie_flags one secure httponly;\n\
             proxy_cookie_flags ~^t nosecure samesite=lax;\n\
             proxy_cookie_flags ~ secure bogus samesite=none;\n\
         }\n\
         location /two/ {\n\
             proxy_pass UP;\n\
             proxy_cookie_flags a samesite=none samesite=strict bogus;\n\
             proxy_cookie_flags b samesite=lax nosamesite;\n\
             proxy_cookie_flags c nosamesite samesite=none samesite=lax;\n\
             proxy_cookie_flags d httponly;\n\
             proxy_cookie_flags e secure nosecure;\n\
             proxy_cookie_flags f nohttponly HTTPONLY;\n\
         }\n\
         location /off/ { proxy_pass UP; proxy_cookie_flags off; }",
    );
    let cases: &[(&str, &[&str])] = &[
        ("/one/", &["one=1; path=/", "One=1; Secure"]),
        (
            "/one/",
            &["tee=1; Secure; samesite=strict", "Tee=1; Secure; HttpOnly"],
        ),
        ("/one/", &["other=1", "x=2; SameSite=Lax; secure", "noeq"]),
        (
            "/two/",
            &["a=1", "a=1; SAMESITE=Lax", "a=1; samesite=a; samesite=b"],
        ),
        (
            "/two/",
            &["b=1", "b=1; samesite", "b=1; samesite=a; samesite=b"],
        ),
        (
            "/two/",
            &[
                "c=1",
                "c=1; samesite=x=y; secure",
                "c=1;samesite;samesite;samesite",
            ],
        ),
        // A flag the cookie has is kept, and the line written in nginx's form all the same.
        (
            "/two/",
            &["d=1 ; HTTPONLY", "d=1;path=/a;;;", "d=1 ; a = b", " d=1"],
        ),
        (
            "/two/",
            &[
                "e=1; secure; Secure",
                "e=1",
                "f=1; httponly; HttpOnly",
                "f=1",
            ],
        ),
        // Flags from variables: empty and unknown ones are nothing; nothing leaves the line.
        (
            "/?c=tee&f=samesite=none",
            &["TEE=1; samesite=strict; Path=/"],
        ),
        (
            "/?c=tee&f=nosecure",
            &["tee=1; secure; Path=/", "other=1; secure"],
        ),
        ("/?c=tee&f=zz", &["tee=1 ;  secure"]),
        ("/?c=tee&f=zz&g=SameSite=Lax", &["tee=1"]),
        ("/?c=tee&f=Secure&g=httponly", &["tee=1;   x"]),
        ("/off/?c=tee&f=secure", &["tee=1"]),
    ];
    for (path, lines) in cases {
        p.get_open(path, &cookies(lines));
    }
}

#[test]
fn a_cached_answer_is_rewritten_on_every_hit_as_nginx() {
    let up = upstream();
    let p = pair(
        &up,
        "proxy_cache_path cache levels=1:2 keys_zone=z:1m;",
        "location / {\n\
             proxy_pass UP;\n\
             proxy_cache z;\n\
             proxy_cache_valid 200 1h;\n\
             proxy_cache_key $uri;\n\
             proxy_ignore_headers Set-Cookie;\n\
             proxy_cookie_domain example.com $arg_d;\n\
             proxy_cookie_flags ~ httponly;\n\
             add_header X-Cache-Status $upstream_cache_status;\n\
         }",
    );
    let lines = cookies(&["a=1; domain=example.com", "b=2;secure"]);
    // The MISS stores the upstream's lines; each HIT rewrites them with its own `$arg_d`.
    for (d, status) in [("one", "MISS"), ("two", "HIT"), ("three", "HIT")] {
        let got = p.get_open(&format!("/c?d={d}"), &lines);
        assert!(got.contains(&format!("X-Cache-Status: {status}")), "{got}");
        assert!(
            got.contains(&format!("Set-Cookie: a=1; domain={d}; HttpOnly\n")),
            "{got}"
        );
        assert!(got.contains("Set-Cookie: b=2; secure; HttpOnly\n"), "{got}");
    }
}

#[test]
fn directive_checks_as_nginx() {
    for server in [
        "location / { proxy_cookie_domain off; }",
        "location / { proxy_cookie_domain abc; }",
        "location / { proxy_cookie_domain OFF; }",
        "location / { proxy_cookie_domain off; proxy_cookie_domain a b; }",
        "location / { proxy_cookie_domain a b; proxy_cookie_domain off; }",
        "location / { proxy_cookie_domain off; proxy_cookie_domain off; }",
        "location / { proxy_cookie_domain ~*abc x; }",
        "location / { proxy_cookie_domain \"\" x; }",
        "location / { proxy_cookie_domain a b c; }",
        "location / { proxy_cookie_path a b; proxy_cookie_path c d; }",
        "location / { proxy_cookie_path ~( b; }",
        "location / { proxy_cookie_path a $nosuch; }",
        "location / { proxy_cookie_path off; proxy_cookie_path a b; }",
        "proxy_cookie_path off; location / { proxy_cookie_path a b; }",
        "location / { proxy_cookie_flags one; }",
        "location / { proxy_cookie_flags one bogus; }",
        "location / { proxy_cookie_flags a secure secure secure; }",
        "location / { proxy_cookie_flags a secure nosecure httponly nohttponly; }",
        "location / { proxy_cookie_flags ~( secure; }",
        "location / { proxy_cookie_flags a secure; proxy_cookie_flags off; }",
        "location / { proxy_cookie_flags off; proxy_cookie_flags off; }",
        "location / { if ($arg_x) { proxy_cookie_flags a secure; } }",
    ] {
        let (nginx, shoal) = both_test("", server);
        assert_eq!(shoal, nginx, "for server {{ {server} }}");
    }
}

// ---- recursive_error_pages ------------------------------------------------------------------

#[test]
fn recursive_error_pages_as_nginx() {
    let p = Pair::with(Conf {
        server: "error_page 403 /e2.html;\n\
             location /a/ { error_page 404 /e1; }\n\
             location /e1 { return 403; }\n\
             location /b/ { error_page 404 =200 /e1; }\n\
             location /r/ { recursive_error_pages on; error_page 404 /e1; }\n\
             location /rs/ { recursive_error_pages on; error_page 404 =200 /e1; }\n\
             location /loop/ { recursive_error_pages on; error_page 404 /loop/missing; }\n\
             location /same/ { recursive_error_pages on; error_page 404 = /same/x; }\n\
             location /named/ { recursive_error_pages on; error_page 404 @n; }\n\
             location @n { return 403; }\n\
             location /two/ { recursive_error_pages on; error_page 404 /e5; }\n\
             location /e5 { error_page 403 /e6; return 403; }\n\
             location /e6 { return 404; }\n\
             location /f/ { return 403; error_page 403 =200 /nothing.html; }\n\
             location /k/ { return 403; error_page 403 /e7; }\n\
             location /e7 { return 500; }",
        files: &[("e2.html", "e2 page\n")],
        ..Default::default()
    });
    for path in [
        "/a/x", "/b/x", "/r/x", "/rs/x", "/loop/x", "/same/x", "/named/x", "/two/x", "/f/", "/k/",
    ] {
        p.get(path, "");
    }
    // Ten redirections, then nginx's cycle line.
    let log = p.shoal_log();
    assert!(
        log.contains("rewrite or internal redirection cycle while internally redirecting to \"/loop/missing\""),
        "{log}"
    );
}

#[test]
fn recursive_error_pages_checks_as_nginx() {
    for server in [
        "location / { recursive_error_pages on; }",
        "recursive_error_pages off;",
        "location / { recursive_error_pages yes; }",
        "location / { recursive_error_pages on; recursive_error_pages off; }",
        "location / { if ($arg_x) { recursive_error_pages on; } }",
    ] {
        let (nginx, shoal) = both_test("", server);
        assert_eq!(shoal, nginx, "for server {{ {server} }}");
    }
}

// ---- gunzip -------------------------------------------------------------------------------

#[test]
fn gunzip_as_nginx() {
    let text = "a line of text to inflate\n".repeat(3000);
    let gz = crate::gunzip::gzip(text.as_bytes());
    let small = crate::gunzip::gzip(b"hello gunzip\n");
    let (up_gz, up_small) = (gz.clone(), small.clone());
    let up = Upstream::start(move |r| {
        let t = r.target.as_str();
        let body = if t.contains("big") {
            up_gz.clone()
        } else {
            up_small.clone()
        };
        let a = Answer::ok(body).header("ETag", "\"u1\"");
        if t.contains("plain") {
            Answer::ok("not encoded\n")
        } else if t.contains("deflate") {
            a.header("Content-Encoding", "deflate")
        } else if t.contains("404") {
            Answer::status(404)
                .body(small_404())
                .header("Content-Encoding", "GZIP")
        } else {
            a.header("Content-Encoding", "gzip")
        }
    });
    let p = pair(
        &up,
        "gunzip on;",
        "gzip_static always;\n\
         location /up/ { proxy_pass UP; }\n\
         location /vary/ { proxy_pass UP; gzip_vary on; }\n\
         location /h10/ { proxy_pass UP; gzip_http_version 1.0; }\n\
         location /prox/ { proxy_pass UP; gzip_proxied any; }\n\
         location /off/ { proxy_pass UP; gunzip off; }\n\
         location /buf/ { proxy_pass UP; gunzip_buffers 2 1k; }\n\
         location /static/ { alias {HTML}/gz/; }",
    );
    let html = p.html().join("gz");
    std::fs::create_dir(&html).unwrap();
    for (name, data) in [
        ("ok.txt.gz", small.clone()),
        ("big.txt.gz", gz.clone()),
        ("multi.txt.gz", [small.clone(), small.clone()].concat()),
        ("bad.txt.gz", b"plain, not gzip\n".to_vec()),
        ("cut.txt.gz", small[..small.len() / 2].to_vec()),
        ("empty.txt.gz", Vec::new()),
    ] {
        std::fs::write(html.join(name), data).unwrap();
        std::fs::write(html.join(name.trim_end_matches(".gz")), "x").unwrap();
    }
    let ae = "Accept-Encoding: gzip\r\n";
    for (path, headers) in [
        ("/up/a", ""),
        ("/up/a", ae),
        ("/up/plain", ""),
        ("/up/deflate", ""),
        ("/up/404", ""),
        ("/vary/a", ""),
        ("/vary/a", ae),
        ("/h10/a", ""),
        ("/up/a", "Via: 1.1 proxy\r\nAccept-Encoding: gzip\r\n"),
        ("/prox/a", "Via: 1.1 proxy\r\nAccept-Encoding: gzip\r\n"),
        ("/up/a", "Accept-Encoding: gzip;q=0\r\n"),
        ("/off/a", ""),
        ("/static/ok.txt", ""),
        ("/static/ok.txt", ae),
        ("/static/ok.txt", "Range: bytes=0-3\r\n"),
        ("/static/multi.txt", ""),
    ] {
        p.get_open(path, headers);
    }
    // Bodies larger than a piece: unchunked (HTTP/1.0, where nginx gunzips too without
    // `gzip_http_version 1.0`), so that chunk sizes do not count.
    for path in ["/up/big", "/buf/big", "/static/big.txt"] {
        p.check(format!("GET {path} HTTP/1.0\r\nHost: localhost\r\n\r\n").as_bytes());
    }
    for path in ["/static/ok.txt", "/up/a", "/static/empty.txt"] {
        p.check_open(format!("HEAD {path} HTTP/1.1\r\nHost: localhost\r\n\r\n").as_bytes());
    }
    // What is not gzip, or ends early, ends the answer: nothing of it goes out.
    for path in ["/static/bad.txt", "/static/cut.txt", "/static/empty.txt"] {
        p.get(path, "");
    }
    let log = p.shoal_log();
    for line in [
        "inflate() failed: 4, -3 while sending response to client",
        "inflate() returned -5 on response end while sending response to client",
    ] {
        assert!(p.nginx_log().contains(line), "nginx: {}", p.nginx_log());
        assert!(log.contains(line), "{log}");
    }
}

/// A gzip 404 page.
fn small_404() -> Vec<u8> {
    crate::gunzip::gzip(b"not found, gzipped\n")
}

#[test]
fn gunzip_checks_as_nginx() {
    for server in [
        "location / { gunzip on; gunzip_buffers 16 8k; }",
        "gunzip off;",
        "location / { gunzip maybe; }",
        "location / { gunzip on; gunzip on; }",
        "location / { gunzip_buffers 0 4k; }",
        "location / { gunzip_buffers 4; }",
        "location / { gunzip_buffers 4 4k; gunzip_buffers 4 4k; }",
        "location / { if ($arg_x) { gunzip on; } }",
    ] {
        let (nginx, shoal) = both_test("", server);
        assert_eq!(shoal, nginx, "for server {{ {server} }}");
    }
}
