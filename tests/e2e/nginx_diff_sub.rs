//! The sub module against real nginx: the same `sub_filter` configurations, the same files
//! and upstream answers, and the same bytes out, chunk framing included (`Pair::check_bytes`):
//! shoal's filter holds back what nginx's holds at the end of each piece it reads. Static
//! files of one piece and of several, nginx's own pages, proxied answers whole, chunked and
//! cut in the middle of a match by a slow upstream, HTTP/2, gzip and charset after it, and
//! `-t`.

use std::fs;
use std::path::Path;
use std::time::Duration;

use crate::common::upstream::{Answer, Upstream};
use crate::diff::{Conf, Pair};

/// The files every location serves.
fn fixtures(html: &Path) {
    let dir = html.join("sub");
    fs::create_dir_all(&dir).unwrap();
    let page = "<html>Hello World hello WORLD abc abcd xab\n</html>\n";
    fs::write(dir.join("a.html"), page).unwrap();
    fs::write(dir.join("a.txt"), page).unwrap();
    fs::write(dir.join("tail.html"), "xabc").unwrap();
    fs::write(dir.join("empty.html"), "").unwrap();
    // Several of nginx's 32k pieces, matches across their ends.
    let big: String = (0..5000)
        .map(|i| format!("line {i} hello world\n"))
        .collect();
    fs::write(dir.join("big.html"), big).unwrap();
    // koi8-r "привет" around an ASCII match.
    fs::write(
        dir.join("koi.html"),
        b"\xd0\xd2\xc9\xd7\xc5\xd4 hello \xd0\xd2\xc9\n",
    )
    .unwrap();
}

const LOCATIONS: &str = "\
    location /once/ { alias {HTML}/sub/; sub_filter hello BYE; sub_filter world W; }\n\
    location /off/ { alias {HTML}/sub/; sub_filter hello BYE; sub_filter world W; \
        sub_filter_once off; }\n\
    location /lm/ { alias {HTML}/sub/; sub_filter hello BYE; sub_filter_last_modified on; }\n\
    location /order1/ { alias {HTML}/sub/; sub_filter abcd 1; sub_filter bc 2; \
        sub_filter_once off; }\n\
    location /order2/ { alias {HTML}/sub/; sub_filter bc 2; sub_filter ab 1; \
        sub_filter_once off; }\n\
    location /types/ { alias {HTML}/sub/; sub_filter hello BYE; sub_filter_types text/plain; }\n\
    location /any/ { alias {HTML}/sub/; sub_filter hello BYE; sub_filter_types *; }\n\
    location /var/ { alias {HTML}/sub/; sub_filter $Arg_m \"[$arg_r]\"; \
        sub_filter $arg_n \"<$uri>\"; sub_filter_once off; }\n\
    location /big/ { alias {HTML}/sub/; sub_filter \"hello world\" HW; sub_filter \"line 1\" L1; \
        sub_filter_once off; }\n\
    location /big1/ { alias {HTML}/sub/; sub_filter hello H; }\n\
    location /err/ { sub_filter \"Not Found\" Lost; sub_filter <hr> <hr/>; \
        sub_filter_once off; }\n\
    location = /moved { sub_filter Moved Gone; return 301 /elsewhere; }\n\
    location /ret/ { default_type text/html; sub_filter hello BYE; \
        return 200 \"hello there hello\"; }\n\
    location /koi/ { alias {HTML}/sub/; charset utf-8; source_charset koi8-r; \
        sub_filter hello \"ПРИВЕТ\"; }";

fn pair(http: &str, server: &str) -> Pair {
    // `server_tokens off`: nginx's pages say "nginx", shoal's "shoal", as long.
    let http = format!("include koi-utf;\nserver_tokens off;\n{http}");
    let p = Pair::with(Conf {
        http: &http,
        server,
        ..Default::default()
    });
    fixtures(&p.html());
    p
}

fn get(p: &Pair, path: &str, headers: &str) -> String {
    p.check_bytes(format!("GET {path} HTTP/1.1\r\nHost: localhost\r\n{headers}\r\n").as_bytes())
}

#[test]
fn static_files_are_rewritten_as_nginx_does() {
    let p = pair("", LOCATIONS);
    for loc in ["once", "off", "lm", "order1", "order2", "types", "any"] {
        for file in ["a.html", "a.txt", "tail.html", "empty.html"] {
            get(&p, &format!("/{loc}/{file}"), "");
        }
    }
    let r = get(&p, "/once/a.html", "");
    assert!(r.contains("<html>BYE W hello WORLD"), "{r}");
    assert!(!r.contains("ETag") && !r.contains("Last-Modified"), "{r}");
    let r = get(&p, "/lm/a.html", "");
    assert!(
        r.contains("ETag: W/\"") && r.contains("Last-Modified"),
        "{r}"
    );
    let r = get(&p, "/order1/tail.html", "");
    assert!(
        r.ends_with("xabc\\r\\n0\\r\\n\\r\\n\n----\n[closed]"),
        "{r}"
    );
    get(&p, "/ret/x", "");
    get(&p, "/koi/koi.html", "");
}

#[test]
fn strings_with_variables_are_valued_per_request() {
    let p = pair("", LOCATIONS);
    for q in [
        "m=hello&r=1",
        "m=HELLO&r=1&n=world",
        "m=&r=1",
        "m=&n=",
        "m=o&r=0",
        "n=a&m=ab",
    ] {
        get(&p, &format!("/var/a.html?{q}"), "");
    }
    let r = get(&p, "/var/a.html?m=o&r=0", "");
    assert!(r.contains("<html>Hell[0] W[0]rld"), "{r}");
}

#[test]
fn bodies_of_several_pieces_keep_nginx_s_chunks() {
    let p = pair("", LOCATIONS);
    for path in ["/big/big.html", "/big1/big.html", "/off/big.html"] {
        get(&p, path, "");
        p.check_bytes(format!("GET {path} HTTP/1.0\r\n\r\n").as_bytes());
    }
}

#[test]
fn heads_ranges_conditionals_and_nginx_s_pages() {
    let p = pair("", LOCATIONS);
    for file in ["/once/a.html", "/lm/a.html", "/once/a.txt"] {
        get(&p, file, "Range: bytes=0-4\r\n");
        get(&p, file, "Range: bytes=900-\r\n");
        get(&p, file, "If-None-Match: *\r\n");
        get(&p, file, "If-Match: \"nope\"\r\n");
        p.check_bytes(format!("HEAD {file} HTTP/1.1\r\nHost: localhost\r\n\r\n").as_bytes());
        p.check_open_bytes(format!("HEAD {file} HTTP/1.1\r\nHost: localhost\r\n\r\n").as_bytes());
    }
    let r = get(&p, "/err/missing", "");
    assert!(r.contains("404 Lost") && r.contains("<hr/>"), "{r}");
    get(&p, "/moved", "");
}

#[test]
fn levels_inherit_the_lines_whole() {
    let server = "\
        location /inherits/ { alias {HTML}/sub/; }\n\
        location /own/ { alias {HTML}/sub/; sub_filter hello BYE; }\n\
        location /once/ { alias {HTML}/sub/; sub_filter_once on; }\n\
        location /nested/ { alias {HTML}/sub/; sub_filter_types text/plain; \
            location /nested/in/ { alias {HTML}/sub/; sub_filter abc X; } }";
    let p = pair(
        "sub_filter world PLANET; sub_filter a A; sub_filter_once off;",
        server,
    );
    for loc in ["inherits", "own", "once", "nested", "nested/in"] {
        get(&p, &format!("/{loc}/a.html"), "");
        get(&p, &format!("/{loc}/a.txt"), "");
    }
}

#[test]
fn pages_for_requests_that_could_not_be_read() {
    // nginx's filters run for a 400 too, with the server's configuration.
    let p = pair(
        "sub_filter \"Bad Request\" Refused; sub_filter $http_x_no x; \
         sub_filter center \"[$http_x_no]\";",
        "",
    );
    p.check_bytes(b"GET / HTTP/1.1\r\nHost: x\r\nHost: y\r\n\r\n");
    let r = p.check_bytes(b"GARBAGE\r\n\r\n");
    assert!(r.contains("400 Refused"), "{r}");
}

#[test]
fn gzip_compresses_the_rewritten_body() {
    let server = "location /gz/ { alias {HTML}/sub/; gzip on; gzip_min_length 1; \
                  sub_filter hello BYE; sub_filter_once off; }";
    let p = pair("", server);
    let ports = p.ports();
    for path in ["/gz/a.html", "/gz/big.html"] {
        let req = format!("GET {path} HTTP/1.1\r\nHost: x\r\nAccept-Encoding: gzip\r\n\r\n");
        let n = crate::nginx_diff_charset::decoded(&crate::nginx_diff_charset::raw(
            ports.0,
            req.as_bytes(),
        ));
        let s = crate::nginx_diff_charset::decoded(&crate::nginx_diff_charset::raw(
            ports.1,
            req.as_bytes(),
        ));
        assert_eq!(n, s, "{path}");
        assert!(n.contains("Content-Encoding: gzip"), "{n}");
    }
}

/// An upstream answering HTML with validators, its framing and headers chosen by the path.
fn upstream() -> Upstream {
    Upstream::start(|r| {
        let t = r.target.as_str();
        let body: &[u8] = if t.contains("empty") {
            b""
        } else {
            b"<p>hello world</p> Hello again, hello\n"
        };
        let ct = if t.contains("plain") {
            "text/plain"
        } else if t.contains("cs") {
            "text/html; charset=utf-8"
        } else {
            "text/html"
        };
        let etag = if t.contains("weak") {
            "W/\"abc\""
        } else if t.contains("bad") {
            "abc"
        } else {
            "\"abc\""
        };
        let mut a = Answer::ok(body)
            .header("Content-Type", ct)
            .header("ETag", etag)
            .header("Last-Modified", "Wed, 21 Oct 2015 07:28:00 GMT")
            .header("Accept-Ranges", "bytes");
        if t.contains("gz") {
            // Not compressed at all: nginx's filter does not look at the encoding.
            a = a.header("Content-Encoding", "gzip");
        }
        if t.contains("chunked") {
            a = a.chunked(&[3, 5, 2]);
        }
        if t.contains("slow") {
            // The first read ends inside "hello".
            a = a.delay_body(6, Duration::from_millis(300));
        }
        a
    })
}

const PROXIED: &str = "\
    location /p/ { proxy_pass UP; sub_filter hello BYE; sub_filter_once off; }\n\
    location /plm/ { proxy_pass UP; sub_filter hello BYE; sub_filter_last_modified on; }\n\
    location /pnb/ { proxy_pass UP; proxy_buffering off; sub_filter hello BYE; \
        sub_filter_once off; }";

#[test]
fn proxied_answers_whole_chunked_and_slow() {
    let up = upstream();
    let server = PROXIED.replace("UP", &up.url());
    let p = pair("", &server);
    for loc in ["p", "plm", "pnb"] {
        for m in [
            "x", "chunked", "slow", "gz", "cs", "plain", "empty", "weak", "bad",
        ] {
            // A body of untold length goes to the close: pieces as each server read them
            // are not compared (nginx gathers what shoal relays as it comes).
            p.check_open_bytes(format!("GET /{loc}/{m} HTTP/1.0\r\n\r\n").as_bytes());
            p.check_open_bytes(
                format!("HEAD /{loc}/{m} HTTP/1.1\r\nHost: localhost\r\n\r\n").as_bytes(),
            );
        }
    }
    // Chunked to HTTP/1.1: what was held at the end of each read goes in the next chunk.
    // (Not `/p/slow`: with `proxy_buffering on` nginx gathers the reads into one buffer,
    // shoal filters each as it comes; nor a chunked upstream's body, which nginx filters a
    // read at a time and shoal a chunk at a time.)
    for path in ["/p/x", "/pnb/slow", "/plm/x"] {
        p.check_open_bytes(format!("GET {path} HTTP/1.1\r\nHost: localhost\r\n\r\n").as_bytes());
    }
    let r = p.check_open_bytes(b"GET /p/slow HTTP/1.0\r\n\r\n");
    assert!(r.contains("<p>BYE world</p> BYE again, BYE"), "{r}");
    let r = p.check_open_bytes(b"GET /plm/weak HTTP/1.0\r\n\r\n");
    assert!(r.contains("ETag: W/\"abc\""), "{r}");
}

#[test]
fn http2_answers_are_nginx_s() {
    let up = upstream();
    let server = format!("{LOCATIONS}\n{}", PROXIED.replace("UP", &up.url()));
    let p = Pair::with(Conf {
        http: "include koi-utf;\nserver_tokens off;",
        server: &server,
        listen: " http2",
        ..Default::default()
    });
    fixtures(&p.html());
    for path in [
        "/once/a.html",
        "/off/big.html",
        "/big/big.html",
        "/lm/a.html",
        "/err/missing",
        "/p/slow",
        "/p/chunked",
    ] {
        crate::nginx_diff_h2::check(&p, false, path, &[]);
    }
    crate::nginx_diff_h2::check(&p, false, "/once/a.html", &["-I"]);
}

#[test]
fn configuration_errors_in_nginx_s_words() {
    let many: String = (0..256).map(|i| format!("sub_filter a{i} b;\n")).collect();
    for (http, server) in [
        ("sub_filter '' x;", ""),
        ("sub_filter a;", ""),
        ("sub_filter a b c;", ""),
        ("sub_filter a '';", ""),
        ("sub_filter $ARG_X y;", ""),
        ("sub_filter $nosuch x;", ""),
        ("sub_filter a $nosuch;", ""),
        ("sub_filter_once on; sub_filter_once off;", ""),
        ("sub_filter_once maybe;", ""),
        (
            "sub_filter_last_modified on; sub_filter_last_modified on;",
            "",
        ),
        (
            "sub_filter_types text/plain text/PLAIN; sub_filter_types text/plain;",
            "",
        ),
        ("sub_filter_types * text/html;", ""),
        ("sub_filter_types;", ""),
        ("sub_filter_types text/html;", ""),
        ("", "location / { if ($x) { sub_filter a b; } } set $x 1;"),
        ("", "location / { sub_filter a b; sub_filter a c; }"),
        (&many[..many.len() - "sub_filter a255 b;\n".len()], ""),
        (&many, ""),
    ] {
        let (nginx, shoal) = crate::diff::both_test(http, server);
        assert_eq!(shoal, nginx, "for http {{ {http} }} server {{ {server} }}");
    }
}
