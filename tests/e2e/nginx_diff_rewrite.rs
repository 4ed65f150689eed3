//! shoal against real nginx for the rewrite module (`rewrite`, `return`, `set`, `break`, `if`,
//! `rewrite_log`, captures, arguments, server-level rewrites, `error_page` meeting a `return`).
//! The gzip filter with seed 004's settings, once here too, is in `nginx_diff_gzip`.
//!
//! Every scenario starts nginx and shoal with one configuration (the harness in `diff/mod.rs`)
//! and asserts they answer alike. nginx is the reference: a difference is a bug in shoal.

use std::fs;
use std::os::unix::fs::PermissionsExt;

use crate::diff::{Pair, A_TXT};

fn status(answer: &str) -> &str {
    answer.lines().next().unwrap_or_default()
}

fn assert_status(answer: &str, code: &str) {
    assert!(
        status(answer).starts_with(&format!("HTTP/1.1 {code}"))
            || status(answer).starts_with(&format!("HTTP/1.0 {code}")),
        "expected {code}:\n{answer}"
    );
}

// ---- rewrite flags --------------------------------------------------------------------------

#[test]
fn rewrite_without_flag_then_another_rewrite() {
    let p = Pair::new(
        "location /r/ { rewrite ^/r/(.*)$ /s/$1; rewrite ^/s/(.*)$ /$1 break; }\n\
         location /n/ { rewrite ^/n/(.*)$ /$1; }\n\
         location = /page.html { return 200 \"exact page\"; }",
    );
    let r = p.get("/r/a.txt", "");
    assert!(r.contains("hello from a.txt"), "{r}");
    p.get("/r/nope", "");
    p.get("/r/dir/", "");
    // No flag in a location: at the end of the list the location is searched again.
    let r = p.get("/n/page.html", "");
    assert!(r.contains("exact page"), "{r}");
    p.get("/n/a.txt", "");
    p.get("/n/dir/b.txt?x=1", "");
}

#[test]
fn last_inside_if() {
    let p = Pair::new(
        "location /if/ { if ($arg_go) { rewrite ^/if/(.*)$ /$1 last; } return 200 \"no go\"; }\n\
         location = /a.txt { return 200 \"exact a\"; }",
    );
    let r = p.get("/if/a.txt?go=1", "");
    assert!(r.contains("exact a"), "{r}");
    p.get("/if/a.txt", "");
    p.get("/if/a.txt?go=0", "");
    p.get("/if/page.html?go=yes", "");
}

#[test]
fn break_then_static_file() {
    let p = Pair::new(
        "location /b/ { rewrite ^/b/(.*)$ /dir/$1 break; return 500; }\n\
         location /dir/ { break; return 500; }\n\
         location /bb/ { set $x 1; break; set $x 2; }",
    );
    let r = p.get("/b/b.txt", "");
    assert!(r.contains("b in dir"), "{r}");
    p.get("/b/", "");
    p.get("/b/nope", "");
    p.head("/b/b.txt", "");
    p.get("/dir/b.txt", "");
    p.get("/dir/", "");
    p.get("/bb/x", "");
}

#[test]
fn last_to_another_location() {
    let p = Pair::new(
        "location /l/ { rewrite ^/l/(.*)$ /t/$1 last; return 500; }\n\
         location /t/ { return 200 \"t: $uri\"; }\n\
         location /toint/ { rewrite ^/toint/(.*)$ /int/$1 last; }\n\
         location /int/ { internal; }",
    );
    p.get("/l/x", "");
    p.get("/l/", "");
    p.get("/l/x?a=b", "");
    // A rewrite makes the request internal: an `internal` location takes it.
    p.get("/toint/page.html", "");
    p.get("/int/page.html", "");
}

#[test]
fn loops_hit_the_limit() {
    let p = Pair::new(
        "location /loop/ { rewrite ^/loop/(.*)$ /loop/x$1 last; }\n\
         location /nf/ { rewrite ^/nf/(.*)$ /nf/y$1; }\n\
         location /ok/ { rewrite \"^/ok/(x{0,9})$\" /ok/x$1 last; }\n\
         location /ko/ { rewrite \"^/ko/(x{0,10})$\" /ko/x$1 last; }\n\
         location /err/ { error_page 404 /err/again; rewrite ^/err/again$ /err/again last; \
         return 404; }\n\
         location /m/ { rewrite \"^/m/(x{0,5})$\" /m/x$1 last; try_files /nope /n/; }\n\
         location /m2/ { rewrite \"^/m2/(x{0,4})$\" /m2/x$1 last; try_files /nope /n/; }\n\
         location /n/ { rewrite \"^/n/(y{0,3})$\" /n/y$1 last; return 200 \"done $uri\"; }\n\
         location /zero/ { rewrite ^/zero/(.*)$ $1 last; }",
    );
    let r = p.get("/loop/a", "");
    assert_status(&r, "500");
    p.head("/loop/a", "");
    let r = p.get("/nf/a", "");
    assert_status(&r, "500");
    p.get("/ok/", "");
    p.get("/ok/xxx", "");
    p.get("/ko/", "");
    p.get("/err/x", "");
    // Rewrites and internal redirects share one budget of 10 URI changes.
    let r = p.get("/m/", "");
    assert_status(&r, "500");
    let r = p.get("/m2/", "");
    assert_status(&r, "200");
    // An empty rewritten URI.
    p.get("/zero/", "");
    p.get("/zero/a.txt", "");
}

// ---- redirects ------------------------------------------------------------------------------

#[test]
fn redirect_with_scheme_and_host() {
    let p = Pair::new(
        "location /old/ { rewrite ^/old/(.*)$ $scheme://$host/new/$1 permanent; }\n\
         location /old2/ { rewrite ^/old2/(.*)$ $scheme://$host/new/$1; }\n\
         location /old3/ { rewrite ^/old3/(.*)$ http://$host:$server_port/n/$1 last; }\n\
         location /old4/ { rewrite ^/old4/(.*)$ https://example.org/$1 break; }",
    );
    for u in ["/old/a", "/old2/a?x=1", "/old3/a", "/old4/a?b=2&c=3"] {
        p.get(u, "");
        p.check(format!("GET {u} HTTP/1.1\r\nHost: Example.COM:8080\r\n\r\n").as_bytes());
        p.check(format!("GET {u} HTTP/1.0\r\n\r\n").as_bytes());
    }
    p.head("/old/a", "");
}

#[test]
fn redirect_and_permanent_relative() {
    let p = Pair::new(
        "location /rd/ { rewrite ^/rd/(.*)$ /$1 redirect; }\n\
         location /pm/ { rewrite ^/pm/(.*)$ /$1?from=pm permanent; }\n\
         location /drop/ { rewrite ^/drop/(.*)$ /$1? redirect; }\n\
         location /off/ { absolute_redirect off; rewrite ^/off/(.*)$ /$1 redirect; }\n\
         location /noport/ { port_in_redirect off; rewrite ^/noport/(.*)$ /$1 redirect; }",
    );
    for u in [
        "/rd/a.txt",
        "/rd/a.txt?q=1",
        "/pm/a.txt",
        "/pm/a.txt?q=1",
        "/drop/a.txt?q=1",
        "/off/a.txt?q=1",
        "/noport/a.txt",
    ] {
        p.get(u, "");
        p.check(format!("GET {u} HTTP/1.1\r\nHost: other.example:81\r\n\r\n").as_bytes());
    }
}

#[test]
fn canonical_trailing_slash() {
    let p = Pair::new(
        "location /c/ { rewrite ^/(.*)$ /$1/ permanent; }\n\
         location /c2/ { rewrite ^/(.*[^/])$ /$1/ permanent; return 200 \"canon $uri\"; }",
    );
    p.get("/c/x", "");
    p.get("/c/x?y=1&z=2", "");
    p.get("/c2/x", "");
    p.get("/c2/x/", "");
    p.get("/c2/x?y=1", "");
    p.head("/c2/x", "");
}

#[test]
fn return_relative_and_absolute() {
    let p = Pair::new(
        "location = /rel { return 301 /a.txt; }\n\
         location = /rel302 { return 302 /a.txt?x=1; }\n\
         location = /ru { return 302 \"http://x/$request_uri\"; }\n\
         location = /r307 { return 307 $scheme://$http_host$uri; }\n\
         location = /bare { return http://example.com/bare; }\n\
         location = /short { return 301; }\n\
         location = /text { return 200 \"uri=$uri args=$args\"; }\n\
         location = /empty { return 200; }\n\
         location = /teapot { return 418 \"short and stout\"; }\n\
         location = /r300 { return 300; }\n\
         location = /r304 { return 304; }\n\
         location = /r305 { return 305 /a.txt; }\n\
         location = /r204 { return 204 \"body\"; }\n\
         location = /r404e { return 404 \"\"; }\n\
         location = /r404v { return 404 \"$arg_none\"; }\n\
         location = /r503t { return 503 \"busy $uri\"; }",
    );
    let r = p.get("/rel", "");
    assert!(r.contains("Location: http://localhost:PORT/a.txt"), "{r}");
    for u in [
        "/rel",
        "/rel302",
        "/ru",
        "/ru?a=1&b=%20",
        "/r307",
        "/bare",
        "/short",
        "/text?q",
        "/empty",
        "/teapot",
        "/r300",
        "/r304",
        "/r305",
        "/r204",
        "/r404e",
        "/r404v",
        "/r503t",
    ] {
        p.get(u, "");
        p.check(format!("GET {u} HTTP/1.1\r\nHost: other.example:81\r\n\r\n").as_bytes());
        p.check(format!("GET {u} HTTP/1.0\r\n\r\n").as_bytes());
        p.head(u, "");
    }
}

// ---- regexes and captures -------------------------------------------------------------------

#[test]
fn quantifiers_in_quotes() {
    let p = Pair::new(
        "location /n/ { rewrite \"^/n/(\\d{3})/(\\w{1,})$\" /$2.txt break; return 404; }\n\
         location ~ \"^/q/\\d{2}$\" { return 200 \"two digits\"; }\n\
         location /z/ { if ($uri ~ \"^/z/([a-c]{2,3})$\") { return 200 \"z=$1\"; } \
         return 200 \"no z\"; }",
    );
    let r = p.get("/n/123/a", "");
    assert!(r.contains("hello from a.txt"), "{r}");
    p.get("/n/12/a", "");
    p.get("/n/1234/a", "");
    p.get("/q/12", "");
    p.get("/q/123", "");
    p.get("/z/ab", "");
    p.get("/z/abcd", "");
}

#[test]
fn set_after_if_regex() {
    let p = Pair::new(
        "location /s/ { if ($uri ~ ^/s/(\\w+)$) { } set $a $1; return 200 \"a=$a 1=$1\"; }\n\
         location /s2/ { if ($uri ~ ^/s2/(\\w+)$) { set $a $1; } return 200 \"a=$a\"; }\n\
         location ~ ^/s3/(\\w+)/ { if ($uri ~ ^/s3/\\w+/(\\w+)$) { } set $b \"$1-$1\"; \
         return 200 \"b=$b\"; }\n\
         location /nc/ { if ($uri ~ \"^/nc/(?<num>\\d+)/(?P<word>\\w+)$\") { \
         return 200 \"num=$num word=$word 1=$1 2=$2\"; } return 200 \"none num=$num\"; }",
    );
    p.get("/s/abc", "");
    p.get("/s/a/b", "");
    p.get("/s2/abc", "");
    p.get("/s2/a/b", "");
    p.get("/s3/loc/inner", "");
    p.get("/s3/loc/in/ner", "");
    p.get("/nc/12/w", "");
    p.get("/nc/x", "");
}

#[test]
fn captures_in_later_directives() {
    let p = Pair::new(
        "location ~ ^/al/(.+)$ { rewrite ^/al/x(.+)$ /al/$1 break; alias {HTML}/$1; }\n\
         location /tf/ { rewrite ^/tf/(.*)$ /tf/$1 break; try_files /$1 /dir/$1 =404; }\n\
         location /ah/ { rewrite ^/ah/(\\w+)/(.*)$ /$2 break; add_header X-First $1; \
         add_header X-Second $2; }\n\
         location /rt/ { rewrite ^/rt/(?<who>\\w+)$ /rt/ break; return 200 \"who=$who\"; }\n\
         location /rt2/ { if ($uri ~ ^/rt2/(?<who>\\w+)$) { return 301 /$who.txt; } }",
    );
    // `alias` cannot map a URI a `rewrite ... break` changed: 500.
    let r = p.get("/al/xa.txt", "");
    assert_status(&r, "500");
    p.get("/al/a.txt", "");
    p.get("/tf/a.txt", "");
    p.get("/tf/b.txt", "");
    p.get("/tf/c.txt", "");
    p.get("/ah/one/a.txt", "");
    p.get("/ah/one/nope", "");
    p.get("/rt/me", "");
    p.get("/rt2/a", "");
}

#[test]
fn captures_of_an_escaped_uri() {
    let p = Pair::new(
        "location /cap/ { rewrite ^/cap/(.*)$ /show?v=$1 last; }\n\
         location /capr/ { rewrite ^/capr/(.*)$ http://x/$1 redirect; }\n\
         location /capp/ { rewrite ^/capp/(.*)$ /p/$1 redirect; }\n\
         location /capb/ { rewrite ^/capb/(.*)$ /$1 break; }\n\
         location = /show { return 200 \"args=$args v=$arg_v uri=$uri\"; }",
    );
    for u in [
        "/cap/a%20b",
        "/cap/a+b",
        "/cap/a&b",
        "/cap/plain",
        "/capr/a%20b",
        "/capr/a+b",
        "/capr/plain?k=v",
        "/capp/a%3Fb",
        "/capb/%61.txt",
        "/capb/page%2ehtml",
    ] {
        p.get(u, "");
    }
}

// ---- arguments ------------------------------------------------------------------------------

#[test]
fn args_after_a_rewrite_with_a_question_mark() {
    let p = Pair::new(
        "location /args/ { rewrite ^/args/(.*)$ /show?x=$1 last; }\n\
         location /drop/ { rewrite ^/drop/(.*)$ /show? last; }\n\
         location /keep/ { rewrite ^/keep/(.*)$ /show last; }\n\
         location /brk/ { rewrite ^/brk/(.*)$ /brk/?x=$1 break; \
         return 200 \"brk args=$args is=$is_args x=$arg_x\"; }\n\
         location /empty/ { rewrite ^/empty/(.*)$ /show?$1 last; }\n\
         location /ru/ { rewrite ^ /show$request_uri last; }\n\
         location /ru2/ { rewrite ^/ru2/(.*)$ /show?$1 last; }\n\
         location /show/ { return 200 \"show/ uri=$uri args=$args\"; }\n\
         location = /show { return 200 \"args=$args x=$arg_x y=$arg_y is=[$is_args] uri=$uri \
         request_uri=$request_uri query=$query_string\"; }",
    );
    for u in [
        "/args/1",
        "/args/1?y=2",
        "/args/1?x=9",
        "/args/1?",
        "/drop/1?y=2",
        "/drop/1",
        "/keep/1?y=2",
        "/keep/1",
        "/brk/7?y=3",
        "/empty/?y=1",
        "/empty/q=5",
        "/ru/x?y=1",
        "/ru2/a?b=c",
    ] {
        p.get(u, "");
    }
}

#[test]
fn set_and_args_variables() {
    let p = Pair::new(
        "location /v/ { set $a \"[$arg_a]\"; set $b $a$is_args$args; \
         return 200 \"b=$b\"; }\n\
         location /u/ { set $x one; if ($arg_two) { set $x two; } return 200 \"x=$x\"; }",
    );
    p.get("/v/", "");
    p.get("/v/?a=1&c=2", "");
    p.get("/u/", "");
    p.get("/u/?two=1", "");
    p.get("/u/?two=0", "");
}

// ---- if -------------------------------------------------------------------------------------

#[test]
fn if_operators() {
    let p = Pair::new(
        "location = /eq { if ($arg_v = yes) { return 200 \"eq\"; } \
         if ($arg_v != no) { return 200 \"ne\"; } return 200 \"neither\"; }\n\
         location = /re { if ($http_user_agent ~ Curl) { return 200 \"cs\"; } \
         if ($http_user_agent ~* wget) { return 200 \"ci\"; } \
         if ($http_user_agent !~ ^Mozilla) { return 200 \"not mozilla\"; } \
         if ($http_user_agent !~* ^mozilla/4) { return 200 \"not 4\"; } return 200 \"4\"; }\n\
         location = /val { if ($http_x_flag) { return 200 \"set\"; } return 200 \"unset\"; }\n\
         location = /empty { if ($arg_v = \"\") { return 200 \"empty\"; } return 200 \"full\"; }\n\
         location = /method { if ($request_method = POST) { return 405; } return 200 \"ok\"; }",
    );
    p.get("/eq?v=yes", "");
    p.get("/eq?v=maybe", "");
    p.get("/eq?v=no", "");
    for ua in [
        "Curl/8",
        "curl/8",
        "WGET/1",
        "Mozilla/4.0",
        "Mozilla/5.0",
        "mozilla/4.0",
    ] {
        p.get("/re", &format!("User-Agent: {ua}\r\n"));
    }
    p.get("/re", "");
    p.get("/val", "X-Flag: 1\r\n");
    p.get("/val", "X-Flag: 0\r\n");
    p.get("/val", "");
    p.get("/empty", "");
    p.get("/empty?v=1", "");
    p.check(b"POST /method HTTP/1.1\r\nHost: localhost\r\nContent-Length: 0\r\n\r\n");
    p.get("/method", "");
}

#[test]
fn if_file_tests() {
    let p = Pair::new(
        "location /ft/ { alias {HTML}/; \
         if (-f $request_filename) { return 200 \"file\"; } \
         if (-d $request_filename) { return 200 \"dir\"; } \
         if (!-e $request_filename) { return 200 \"none\"; } return 200 \"other\"; }\n\
         location /fx/ { alias {HTML}/; if (-x $request_filename) { return 200 \"exec\"; } \
         if (!-x $request_filename) { return 200 \"not exec\"; } }\n\
         location /fd/ { if (!-d {HTML}/dir) { return 500; } if (!-f {HTML}/a.txt) { return 500; } \
         if (-e {HTML}/nope) { return 500; } if (!-d {HTML}/a.txt) { return 200 \"ok\"; } }\n\
         location / { if (!-e $request_filename) { rewrite ^/(.*)$ /page.html break; } }",
    );
    let run = p.html().join("run.sh");
    fs::write(&run, "#!/bin/sh\n").expect("writing run.sh");
    fs::set_permissions(&run, fs::Permissions::from_mode(0o755)).expect("chmod run.sh");
    for u in ["/ft/a.txt", "/ft/dir", "/ft/dir/", "/ft/nope", "/ft/"] {
        p.get(u, "");
    }
    for u in ["/fx/run.sh", "/fx/a.txt", "/fx/dir", "/fx/nope"] {
        p.get(u, "");
    }
    p.get("/fd/", "");
    p.get("/a.txt", "");
    let r = p.get("/nothing/here", "");
    assert!(r.contains("<p>page</p>"), "{r}");
}

#[test]
fn if_carrying_other_directives() {
    let p = Pair::new(
        "location /h/ { alias {HTML}/; add_header X-Loc loc; \
         if ($arg_h) { add_header X-If yes; expires 1h; } }\n\
         location /rt/ { alias {HTML}/dir/; if ($arg_r) { root {HTML}/sub; } }\n\
         location /e/ { if ($arg_e) { expires epoch; } }\n\
         location /tf/ { try_files $uri /a.txt; if ($arg_x) { } }",
    );
    p.get("/h/a.txt", "");
    p.get("/h/a.txt?h=1", "");
    p.get("/h/nope?h=1", "");
    p.get("/rt/b.txt", "");
    p.get("/rt/deep/c.txt?r=1", "");
    p.get("/rt/b.txt?r=1", "");
    p.get("/e/", "");
    p.get("/e/?e=1", "");
    p.get("/tf/x", "");
    // "if is evil": the if's configuration has no try_files.
    p.get("/tf/x?x=1", "");
}

#[test]
fn rewrite_log_lines() {
    let p = Pair::new(
        "rewrite_log on;\n\
         location /rl/ { rewrite ^/rl/(.*)$ /$1 break; rewrite ^/never$ /x; }",
    );
    p.get("/rl/a.txt", "");
    for (who, log) in [("nginx", p.nginx_log()), ("shoal", p.shoal_log())] {
        assert!(
            log.contains("\"^/rl/(.*)$\" matches \"/rl/a.txt\""),
            "{who}:\n{log}"
        );
        assert!(log.contains("rewritten data: \"/a.txt\""), "{who}:\n{log}");
    }
}

// ---- server level ---------------------------------------------------------------------------

#[test]
fn server_level_rewrites() {
    let p = Pair::new(
        "rewrite ^/srv/(.*)$ /$1;\n\
         rewrite ^/srvlast/(.*)$ /t/$1 last;\n\
         rewrite ^/away$ http://example.com/away permanent;\n\
         if ($http_x_block) { return 403; }\n\
         set $origin server;\n\
         location /t/ { return 200 \"t uri=$uri origin=$origin\"; }\n\
         location /srvlast/ { return 500; }",
    );
    let r = p.get("/srv/a.txt", "");
    assert!(r.contains(A_TXT.trim()), "{r}");
    p.get("/srv/t/x", "");
    p.get("/srvlast/x", "");
    p.get("/away?q=1", "");
    p.get("/a.txt", "X-Block: 1\r\n");
    p.get("/t/y", "");
}

#[test]
fn server_rewrites_again_after_internal_redirects() {
    let p = Pair::new(
        "rewrite ^/gone$ /page.html;\n\
         rewrite ^/dir/index.html$ /a.txt;\n\
         error_page 404 /gone;\n\
         location /tf/ { try_files $uri /dir/index.html; }",
    );
    let r = p.get("/nope", "");
    assert!(r.contains("<p>page</p>"), "{r}");
    assert_status(&r, "404");
    let r = p.get("/dir/", "");
    assert!(r.contains(A_TXT.trim()), "{r}");
    p.get("/tf/x", "");
    p.get("/gone", "");
}

#[test]
fn server_level_return_meets_error_page() {
    let p = Pair::new(
        "error_page 404 /custom404.html;\n\
         if ($arg_x) { return 404; }\n\
         if ($arg_y) { return 404 \"own text\"; }",
    );
    p.get("/a.txt", "");
    // The error page is reached by an internal redirect that keeps the arguments: the server's
    // `if` answers 404 again, and nginx's own page is sent.
    p.get("/a.txt?x=1", "");
    p.get("/a.txt?y=1", "");
}

#[test]
fn error_page_meets_return() {
    let p = Pair::new(
        "error_page 404 /custom404.html;\n\
         error_page 410 =200 /a.txt;\n\
         error_page 403 @named;\n\
         location @named { return 200 \"named after $status\"; }\n\
         location /gone/ { return 404; }\n\
         location /text/ { return 404 \"text 404\"; }\n\
         location /g410/ { return 410; }\n\
         location /f/ { return 403; }\n\
         location /e404 { rewrite ^ /custom404.html break; }\n\
         location /via/ { error_page 404 /e404; return 404; }",
    );
    let r = p.get("/gone/x", "");
    assert!(r.contains("custom not found"), "{r}");
    p.head("/gone/x", "");
    p.get("/text/x", "");
    p.get("/g410/x", "");
    p.get("/f/x", "");
    p.get("/via/x", "");
}

// ---- internal redirects and arguments -------------------------------------------------------

#[test]
fn internal_redirects_and_arguments() {
    let p = Pair::new(
        "location /tf/ { try_files /nope /show; }\n\
         location /tfq/ { try_files /nope /show?from=tf; }\n\
         location /tfn/ { try_files /nope @show; }\n\
         location @show { return 200 \"named args=$args\"; }\n\
         location /ep/ { error_page 404 /show; return 404; }\n\
         location /epq/ { error_page 404 /show?from=ep; return 404; }\n\
         location = /show { return 200 \"uri=$uri args=$args is=[$is_args]\"; }",
    );
    for u in [
        "/tf/x?a=1",
        "/tfq/x?a=1",
        "/tfn/x?a=1",
        "/ep/x?a=1",
        "/epq/x?a=1",
        "/dir/?a=1",
    ] {
        p.get(u, "");
    }
}

#[test]
fn return_500_with_a_text_keeps_the_connection() {
    let p = Pair::new("location = /r500t { return 500 \"broken $uri\"; }");
    p.get("/r500t", "");
}

#[test]
fn alias_after_a_rewrite_break() {
    let p = Pair::new(
        "rewrite ^/srvbrk/(.*)$ /al/$1 break;\n\
         location /al/ { alias {HTML}/dir/; }\n\
         location /albrk/ { alias {HTML}/dir/; rewrite ^/albrk/(.*)$ /albrk/$1 break; }\n\
         location /allast/ { rewrite ^/allast/(.*)$ /al/$1 last; }\n\
         location /ep/ { alias {HTML}/; rewrite ^ /ep/nope break; error_page 500 /a.txt; }",
    );
    p.get("/al/b.txt", "");
    p.get("/srvbrk/b.txt", "");
    p.get("/albrk/b.txt", "");
    p.get("/allast/b.txt", "");
    p.get("/ep/x", "");
}

#[test]
fn if_condition_spacing() {
    let p = Pair::new(
        "location = /sp { if ( $arg_a ) { return 200 \"spaced\"; } \
         if ($arg_b = \"\" ) { return 200 \"b empty\"; } return 200 \"none\"; }\n\
         location = /neg { if ($uri !~ ^/n(e)g$) { return 200 \"no\"; } return 200 \"1=$1\"; }\n\
         location = /negm { if ($uri !~ ^/ne(g)m$) { } return 200 \"1=$1\"; }",
    );
    p.get("/sp?a=1", "");
    p.get("/sp", "");
    p.get("/sp?b=1", "");
    p.get("/neg", "");
    p.get("/negm", "");
}

#[test]
fn args_without_value() {
    let p = Pair::new("location = /q { return 200 \"args=[$args] is=[$is_args]\"; }");
    p.get("/q", "");
    p.get("/q?a", "");
}

#[test]
fn is_args_of_an_empty_query() {
    let p = Pair::new("location = /q { return 200 \"args=[$args] is=[$is_args]\"; }");
    p.get("/q?", "");
}

#[test]
fn headers_on_rewrite_answers() {
    let p = Pair::new(
        "add_header X-Srv srv;\n\
         if ($arg_srv) { return 200 \"server return\"; }\n\
         location /h/ { add_header X-Loc loc; add_header X-Always yes always; expires 1h; \
         if ($arg_r) { rewrite ^ /a.txt redirect; } if ($arg_c = 404) { return 404; } \
         if ($arg_c = 204) { return 204; } \
         rewrite ^/h/(.*)$ /$1 break; }\n\
         location /ci/ { if ($http_x_case ~* ^(AB)(c)?$) { return 200 \"1=$1 2=$2\"; } \
         return 200 \"no\"; }",
    );
    p.get("/a.txt?srv=1", "");
    p.get("/h/a.txt", "");
    p.get("/h/a.txt?r=1", "");
    p.check(b"GET /h/a.txt?r=1 HTTP/1.0\r\n\r\n");
    p.head("/h/a.txt?r=1", "");
    p.get("/h/a.txt?c=404", "");
    p.get("/h/a.txt?c=204", "");
    p.get("/h/nope", "");
    p.get("/ci/", "X-Case: ab\r\n");
    p.get("/ci/", "X-Case: aBC\r\n");
    p.get("/ci/", "X-Case: b\r\n");
}
