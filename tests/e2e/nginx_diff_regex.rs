//! Regexes as nginx's PCRE2 reads them, end to end and against real nginx: a `location` with a
//! lookahead, a `server_name` with a named capture, a `rewrite` with a lookbehind, an `if` with
//! a lookahead on the user agent (`~*`), a `map` with `(?i)`; PCRE's `$` before a final newline
//! (a URI ending in `%0A`), `.` taking one byte of a multi-byte character, caseless matching of
//! ASCII letters only; and the `pcre2_compile() failed` messages of `-t` for a bad regex in
//! each place nginx takes one.
//!
//! The pairs run from the harness in `diff/mod.rs`: a difference from nginx is a bug in shoal.

use std::fs;
use std::process::Command;

use crate::diff::{Conf, Pair};

fn body(answer: &str) -> &str {
    answer.split_once("\n\n").map_or("", |(_, b)| b)
}

#[test]
fn location_with_a_negative_lookahead() {
    let p = Pair::new(
        "location ~ ^/(?!private) { return 200 \"public $uri\\n\"; }\n\
         location / { return 200 \"other $uri\\n\"; }",
    );
    assert!(body(&p.get("/public/a", "")).starts_with("public"));
    assert!(body(&p.get("/private/a", "")).starts_with("other"));
    p.get("/privateer", "");
    p.get("/Private", "");
    p.get("/", "");
}

#[test]
fn server_name_with_a_named_capture() {
    let p = Pair::with(Conf {
        http: "server {\n        listen 127.0.0.1:{PORT};\n        \
               server_name ~^(?<sub>\\w+)\\.example\\.com$;\n        \
               return 200 \"sub=$sub one=$1\\n\";\n    }",
        server: "location / { return 200 \"default\\n\"; }",
        ..Default::default()
    });
    for host in [
        "foo.example.com",
        "FOO.Example.COM",
        "a_1.example.com",
        "a.b.example.com",
        "example.com",
        "foo.example.com.",
    ] {
        let r = p.check(format!("GET / HTTP/1.1\r\nHost: {host}\r\n\r\n").as_bytes());
        if host == "foo.example.com" {
            assert!(body(&r).starts_with("sub=foo one=foo"), "{r}");
        }
    }
}

#[test]
fn rewrite_with_a_lookbehind() {
    let p = Pair::new(
        "rewrite \"^/docs/(.+)(?<=\\.html)$\" /pages/$1 last;\n\
         location /pages/ { return 200 \"page $uri\\n\"; }\n\
         location / { return 200 \"kept $uri\\n\"; }",
    );
    assert!(body(&p.get("/docs/a/b.html", "")).starts_with("page /pages/a/b.html"));
    assert!(body(&p.get("/docs/a/b.htm", "")).starts_with("kept"));
    p.get("/docs/.html", "");
    p.get("/docs/x.HTML", "");
}

#[test]
fn if_user_agent_with_a_lookahead() {
    // nginx's documented gzip_disable pattern: old MSIE, unless it is SP2 (SV1). (Not a 403:
    // nginx pads its error pages for MSIE, which shoal does not do.)
    let p = Pair::new(
        "location / {\n            \
         if ($http_user_agent ~* \"msie [1-6]\\.(?!.*SV1)\") { return 200 \"old\\n\"; }\n            \
         return 200 \"ok\\n\";\n        }",
    );
    let ua = |u: &str| p.get("/", &format!("User-Agent: {u}\r\n"));
    assert!(body(&ua("Mozilla/4.0 (compatible; MSIE 6.0; Windows NT 5.1)")).starts_with("old"));
    assert!(body(&ua(
        "Mozilla/4.0 (compatible; MSIE 6.0; Windows NT 5.1; SV1)"
    ))
    .starts_with("ok"));
    ua("Mozilla/4.0 (compatible; msie 5.5; Windows 98)");
    ua("Mozilla/5.0 (X11; Linux x86_64)");
    p.get("/", "");
}

#[test]
fn map_with_inline_caseless() {
    let p = Pair::with(Conf {
        http: "map $uri $m {\n        ~(?i)^/caps/(?<rest>.*)$ \"caps-$rest\";\n        \
               ~^/(?-i:lower)/(.*)$ \"lower-$1\";\n        default none;\n    }",
        server: "location / { return 200 \"$m\\n\"; }",
        ..Default::default()
    });
    assert!(body(&p.get("/CAPS/x", "")).starts_with("caps-x"));
    p.get("/caps/y", "");
    p.get("/lower/z", "");
    p.get("/LOWER/z", "");
}

#[test]
fn pcre_meaning_of_dollar_dot_and_case() {
    let p = Pair::new(
        "location ~ \\.php$ { return 200 \"php [$uri]\\n\"; }\n\
         location ~ ^/.$ { return 200 \"one byte\\n\"; }\n\
         location ~ ^/..$ { return 200 \"two bytes\\n\"; }\n\
         location ~* ^/case\u{e9}$ { return 200 \"caseless\\n\"; }\n\
         location ~ ^/w/\\w+$ { return 200 \"word\\n\"; }\n\
         location ~ \"^/q/\\Q(a+)\\E$\" { return 200 \"quoted\\n\"; }\n\
         location ~ ^/(?>a+)a { return 200 \"atomic\\n\"; }\n\
         location ~ \"^/x{,2}$\" { return 200 \"literal brace\\n\"; }\n\
         location / { return 200 \"none\\n\"; }",
    );
    // The decoded URI ends with a newline: PCRE's `$` matches before it.
    assert!(body(&p.get("/a.php%0A", "")).starts_with("php"));
    p.get("/a.php%0A%0A", "");
    p.get("/a.php", "");
    assert!(body(&p.get("/%C3%A9", "")).starts_with("two bytes"));
    p.get("/a", "");
    assert!(body(&p.get("/CASE%C3%A9", "")).starts_with("caseless"));
    assert!(body(&p.get("/CASE%C3%89", "")).starts_with("none"));
    assert!(body(&p.get("/w/%C3%A9", "")).starts_with("none"));
    p.get("/w/abc_1", "");
    assert!(body(&p.get("/q/(a+)", "")).starts_with("quoted"));
    assert!(body(&p.get("/aaa", "")).starts_with("none"));
    assert!(body(&p.get("/x%7B,2%7D", "")).starts_with("literal brace"));
}

/// Runs `-t` of nginx and of shoal on one configuration; returns each one's `[emerg]` message
/// (after the level, with the file and line).
fn both_test(conf: &str) -> (String, String) {
    let dir = tempfile::tempdir().expect("a temporary directory");
    fs::create_dir(dir.path().join("logs")).expect("logs/");
    let file = dir.path().join("t.conf");
    fs::write(&file, conf).expect("writing the configuration");
    let run = |bin: &str| {
        let out = Command::new(bin)
            .args(["-t", "-p"])
            .arg(dir.path())
            .arg("-c")
            .arg(&file)
            .output()
            .unwrap_or_else(|e| panic!("running {bin}: {e}"));
        let err = String::from_utf8_lossy(&out.stderr).into_owned();
        assert!(!out.status.success(), "{bin} accepted:\n{conf}");
        let line = err
            .lines()
            .find(|l| l.contains("[emerg]"))
            .unwrap_or_else(|| panic!("no [emerg] line from {bin}:\n{err}"))
            .to_string();
        // nginx: `2024/01/01 00:00:00 [emerg] 123#123: MESSAGE`; shoal: `shoal: [emerg] MESSAGE`.
        let msg = line.split_once("[emerg] ").map_or("", |(_, m)| m);
        let msg = match msg.split_once(": ") {
            Some((pid, m)) if pid.contains('#') => m,
            _ => msg,
        };
        msg.to_string()
    };
    let nginx = run("/usr/sbin/nginx");
    let shoal = run(crate::common::BIN.as_str());
    (nginx, shoal)
}

#[test]
fn bad_regexes_fail_with_nginx_s_message() {
    let head = "error_log stderr;\npid logs/t.pid;\nevents {}\nhttp {\n";
    for (http, server) in [
        ("", "location ~ (foo { }"),
        ("", "location ~* \"a{2,1}\" { }"),
        ("", "server_name ~^(?<n>a)(?<n>b)$;"),
        ("", "rewrite \"(?<=a+)b\" /x;"),
        ("", "if ($uri ~ \"[z-a]\") { return 403; }"),
        ("map $uri $m { ~\"\\k<zz>\" 1; }", ""),
        ("", "gzip_disable \"a)b\";"),
        ("", "location ~ \"x{70000}\" { }"),
    ] {
        let conf = format!(
            "{head}{http}\nserver {{\n    listen 127.0.0.1:{};\n    {server}\n}}\n}}\n",
            crate::common::free_port()
        );
        let (nginx, shoal) = both_test(&conf);
        assert!(nginx.starts_with("pcre2_compile() failed: "), "{nginx}");
        assert_eq!(shoal, nginx, "for:\n{conf}");
    }
}
