//! `map` and `split_clients` end to end, against real nginx: the bucket of every one of a few
//! hundred URIs under seed 000's `split_clients $request_uri $disk { 33.3% 1; 33.3% 2; * 3; }`,
//! fractional parts and parts under 100%, maps with exact (case-blind) sources, `hostnames`
//! wildcards, regexes with numbered and named captures, values with variables, `default`,
//! self-referencing maps (nginx's 100-deep "cycle while evaluating variable"), configuration
//! errors in nginx's words; and, shoal alone, map and split_clients variables in `log_format`.
//!
//! The pairs run from the harness in `diff/mod.rs`: a difference from nginx is a bug in shoal.

use std::fs;
use std::path::Path;
use std::process::Command;

use crate::common;
use crate::diff::{self, Conf, Pair};

const SEED000_SPLIT: &str = "split_clients $request_uri $disk {\n        33.3%     1;\n        \
                             33.3%     2;\n        *         3;\n    }";

/// URIs to spread: plain paths, arguments, escapes, long and odd ones (a request line is sent
/// as written, so each is a valid request target).
fn uris() -> Vec<String> {
    let mut u: Vec<String> = (0..120).map(|i| format!("/file{i}.bin")).collect();
    u.extend((0..40).map(|i| format!("/dir/{i}/?q={}", i * 7919)));
    u.extend((0..20).map(|i| format!("/{}", "x".repeat(i + 1))));
    u.extend((0..20).map(|i| format!("/a%20b/{i}?k=v&z={i}")));
    u.extend(["/", "/?", "/index.html", "/UPPER", "/a/b/c/d/e/f/g"].map(String::from));
    u
}

/// The body of a normalised answer (as the harness writes it: escaped, `\n` as `\\n`).
fn body(answer: &str) -> &str {
    let after_head = answer.split_once("\n\n").map_or("", |(_, b)| b);
    after_head
        .split_once("\n----")
        .map_or(after_head, |(b, _)| b)
}

#[test]
fn seed000_split_clients_buckets_are_nginx_s() {
    let p = Pair::with(Conf {
        http: SEED000_SPLIT,
        server: "location / { add_header X-Disk disk$disk; return 200 \"$disk\\n\"; }",
        ..Default::default()
    });
    let mut seen = [0usize; 3];
    for uri in uris() {
        let r = p.get(&uri, "");
        match body(&r) {
            "1\\n" => seen[0] += 1,
            "2\\n" => seen[1] += 1,
            "3\\n" => seen[2] += 1,
            other => panic!("{uri}: unexpected bucket {other:?}"),
        }
    }
    assert!(
        seen.iter().all(|&n| n > 30),
        "every disk gets a share: {seen:?}"
    );
}

#[test]
fn split_clients_fractions_and_gaps_are_nginx_s() {
    // Parts under 100% and no `*`: hashes past the last boundary give the empty string.
    let p = Pair::with(Conf {
        http: "split_clients \"${arg_k}AAA\" $variant { 0.5% .one; 2.0% .two; 47.49% half; }\n\
               split_clients $arg_k $all { 100% all; }\n\
               split_clients $arg_k $stale { 50%; * star; }",
        server: "location / { return 200 \"[$variant][$all][$stale]\\n\"; }",
        ..Default::default()
    });
    let mut empty = 0;
    for k in 0..200 {
        let r = p.get(&format!("/?k={k}"), "");
        empty += usize::from(body(&r).starts_with("[]"));
    }
    assert!(empty > 50, "about half the keys fall past 49.99%: {empty}");
    // A part without a value: nginx reads the second word of an earlier line.
    for k in ["", "a", "bb", "ccc"] {
        p.get(&format!("/?k={k}"), "");
    }
}

#[test]
fn map_sources_regexes_and_defaults_are_nginx_s() {
    let p = Pair::with(Conf {
        http: "map $arg_a $exact { Foo foo-value; \"\" empty; \\default not-the-default; \
               ~^x(?<nm>.)(.)?$ \"re $1 $2 $nm\"; ~^$ never; default \"def:$uri\"; }\n\
               map $uri $section { ~*^/(?<sec>[a-z]+)/(\\d+)$ \"sec=$sec n=$2\"; \
               ~^/UP/(.*) up:$1; /exact exact; }\n\
               map $arg_h $host_kind { hostnames; default def; example.com exact; \
               *.example.com star; .b.example.com dotb; *.c.b.example.com starc; \
               www.* wwwstar; www.example.* wwwex; ~^www\\.ex re; .org dotorg; }\n\
               map $exact$section $chained { default \"[$exact|$section]\"; }",
        server: "location / { add_header X-Section \"$section\"; \
                 return 200 \"$exact|$section|$host_kind|$chained\\n\"; }",
        ..Default::default()
    });
    for a in [
        "foo", "FOO", "Foo", "", "default", "xy", "xyz", "Xy", "bar", "x",
    ] {
        p.get(&format!("/?a={a}"), "");
    }
    p.get("/", "");
    for path in [
        "/abc/12",
        "/ABC/34",
        "/abc/x",
        "/UP/stairs",
        "/up/x",
        "/exact",
        "/EXACT",
    ] {
        p.get(path, "");
    }
    for h in [
        "example.com",
        "EXAMPLE.com.",
        "a.example.com",
        "b.example.com",
        "x.b.example.com",
        "c.b.example.com",
        "y.c.b.example.com",
        "www.example.com",
        "www.example",
        "www.foo",
        "www.exa.b",
        "www",
        "a.org",
        "org",
        "xorg",
        ".",
        "example.com..",
    ] {
        p.get(&format!("/?h={h}"), "");
    }
}

#[test]
fn maps_that_use_themselves_end_as_nginx_s() {
    let p = Pair::with(Conf {
        http: "map $arg_a $m { default \"x$m\"; }\n\
               map $arg_a $p { default $q; }\n\
               map $arg_a $q { default \"q$p\"; }",
        server: "location / { add_header X-M \"[$m]\"; return 200 \"[$m][$p]\\n\"; }",
        ..Default::default()
    });
    let r = p.get("/?a=1", "");
    assert!(
        body(&r).starts_with(&format!("[{}]", "x".repeat(100))),
        "{r}"
    );
    assert!(
        p.shoal_log()
            .contains("cycle while evaluating variable \"m\", client: 127.0.0.1, server: localhost, request: \"GET /?a=1 HTTP/1.1\""),
        "{}",
        p.shoal_log()
    );
}

/// `-t` on `http` lines: the `[emerg]` line, with the program's name and the directory cut.
fn emerg(bin: &Path, name: &str, http: &str) -> String {
    let dir = tempfile::tempdir().expect("a temporary directory");
    for d in ["conf", "logs", "tmp"] {
        fs::create_dir_all(dir.path().join(d)).expect("creating a prefix directory");
    }
    let only = if name == "nginx" {
        "client_body_temp_path tmp/b; proxy_temp_path tmp/p; fastcgi_temp_path tmp/f; \
         uwsgi_temp_path tmp/u; scgi_temp_path tmp/s;"
    } else {
        ""
    };
    let text = format!(
        "events {{}}\nhttp {{ {only}\n{http}\nserver {{ listen 127.0.0.1:1; \
         location / {{ return 200 \"$v\"; }} }}\n}}\n"
    );
    fs::write(dir.path().join("conf/t.conf"), text).expect("writing the configuration");
    let out = Command::new(bin)
        .arg("-p")
        .arg(format!("{}/", dir.path().display()))
        .args(["-c", "conf/t.conf", "-e", "logs/error.log", "-t"])
        .output()
        .expect("running -t");
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    err.lines()
        .find(|l| l.contains("[emerg]"))
        .unwrap_or("")
        .replace(&format!("{}/", dir.path().display()), "")
        .replace(&format!("{name}: "), "")
}

#[test]
fn configuration_errors_are_nginx_s() {
    let nginx = Path::new("/usr/sbin/nginx");
    if !nginx.exists() {
        panic!("nginx is not installed at /usr/sbin/nginx: this test compares with it");
    }
    let shoal = Path::new(diff::SHOAL.as_str());
    for http in [
        "map $arg_a $v { Foo 1; foo 2; }",
        "map $arg_a $v { hostnames; *.Example.com 1; .example.COM 2; }",
        "map $arg_a $v { example.com 1; hostnames; .example.com 2; }",
        "map $arg_a $v { hostnames; WWW.Ex.* 1; www.ex.* 2; }",
        "map $arg_a $v { hostnames; www.* 1; a.*.b 2; }",
        "map $arg_a $v { hostnames; a..b 1; }",
        "map $arg_a $v { default 1; default 2; }",
        "map $arg_a $v { a 1 2; }",
        "map $arg_a $v { a { } }",
        "map $arg_a $uri { }",
        "map $arg_a v { }",
        "map $arg_a $ { }",
        "map $arg_a $v { default $nope; }",
        "split_clients $arg_a $v { 33.333% a; }",
        "split_clients $arg_a $v { 0% a; }",
        "split_clients $arg_a $v { 60% a; 50% b; }",
        "split_clients $arg_a $v { * a; 10% b; }",
        "split_clients $arg_a $v { abc a; }",
        "split_clients $arg_a $v { \"\" a; }",
        "split_clients $arg_a $v { % a; }",
        "split_clients $arg_a $v { 1..0% a; }",
        "split_clients $arg_a $v { 42949622.96% a; }",
        "split_clients $arg_a $ { * a; }",
        "split_clients $arg_a $uri { * a; }",
    ] {
        let want = emerg(nginx, "nginx", http);
        assert!(!want.is_empty(), "nginx accepts {http}");
        assert_eq!(emerg(shoal, "shoal", http), want, "for {http}");
    }
    // Both accept these.
    for http in [
        "map $arg_a $v { hostnames x; volatile; include /dev/null; }",
        "map $arg_a $args { default z; } map $arg_a $v { } map $arg_a $v { }",
        "split_clients $arg_a $v { 50%; 0.01% a; * b; }",
    ] {
        assert_eq!(emerg(nginx, "nginx", http), "", "nginx refuses {http}");
        assert_eq!(emerg(shoal, "shoal", http), "", "shoal refuses {http}");
    }
}

#[test]
fn log_format_sees_map_and_split_clients() {
    let port = common::free_port();
    let conf = format!(
        "daemon off;\nerror_log logs/error.log notice;\nevents {{ worker_connections 64; }}\n\
         http {{\n    {SEED000_SPLIT}\n    map $uri $kind {{ ~^/(?<k>[a-z]+) \"k-$k\"; }}\n    \
         log_format m '$uri disk=$disk kind=$kind';\n    \
         server {{ listen 127.0.0.1:{port}; access_log logs/m.log m; \
         location / {{ return 200 ok; }} }}\n}}\n"
    );
    let s = common::Shoal::start(&conf, port);
    let mut c = s.client(port);
    for uri in ["/index.html", "/", "/abc"] {
        assert_eq!(c.get(uri).expect("an answer").status, 200);
    }
    let log = common::wait_for("three log lines", || {
        let t = s.prefix.read("logs/m.log");
        (t.lines().count() >= 3).then_some(t)
    });
    // Buckets from the unit tests' hash values: /index.html and / are in disk 2, /abc in 1.
    assert_eq!(
        log,
        "/index.html disk=2 kind=k-index\n/ disk=2 kind=\n/abc disk=1 kind=k-abc\n"
    );
}
