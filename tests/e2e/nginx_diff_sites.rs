//! Lines of published site configurations (Magento's `nginx.conf.sample`, WordPress-style
//! `try_files`) against real nginx: what running them side by side found.

use crate::diff::{Conf, Pair};

/// Magento sets its tree in a variable at server level and roots at `$MAGE_ROOT/pub`; its
/// PHP locations pass `SCRIPT_FILENAME $document_root$fastcgi_script_name`, so
/// `$document_root` must be the root with its variables evaluated (it was the text,
/// `$MAGE_ROOT/pub` under the prefix: every PHP request a 404 from PHP-FPM).
#[test]
fn document_root_evaluates_the_roots_variables() {
    let p = Pair::with(Conf {
        server: "set $site_root {HTML};\n\
                 location /pub/ { root $site_root; \
                 return 200 \"dr=$document_root rf=$request_filename rr=$realpath_root\\n\"; }\n\
                 location /al/ { alias $site_root/dir/; \
                 return 200 \"dr=$document_root rf=$request_filename\\n\"; }\n\
                 location /plain/ { return 200 \"dr=$document_root\\n\"; }",
        ..Default::default()
    });
    let html = p.html().display().to_string();
    let pub_answer = p.get("/pub/x.php?a=1", "");
    assert!(
        pub_answer.contains(&format!("dr={html} rf={html}/pub/x.php rr=")),
        "{pub_answer}"
    );
    p.get("/al/x.txt", "");
    p.get("/plain/", "");
}

/// `try_files $uri $uri/ ...` that finds a directory serves it in the location: its index
/// module's redirect keeps the request's arguments, as every index redirect does (they were
/// dropped, as if the redirect were `try_files`' own fallback).
#[test]
fn try_files_directory_index_keeps_the_arguments() {
    let p = Pair::with(Conf {
        server: "index index.php index.html;\n\
                 location / { try_files $uri $uri/ /fallback$is_args$args; }\n\
                 location ~ \\.php$ { \
                 return 200 \"uri=$uri args=$args is=$is_args ru=$request_uri\\n\"; }\n\
                 location /fallback { return 200 \"fallback uri=$uri args=$args\\n\"; }\n\
                 location /sub/ { try_files $uri/ =404; }",
        files: &[("index.php", ""), ("sub/index.php", "")],
        ..Default::default()
    });
    let root = p.get("/?a=b", "");
    assert!(root.contains("args=a=b is=?"), "{root}");
    p.get("/sub/?x=1&y=2", "");
    p.get("/nothing?q=2", "");
    p.get("/dir/?k=v", "");
}

/// Headers in nginx's order where the filters add them: `Vary` of gzip in a place of its own
/// after `Connection`; `add_header`'s, then userid's cookie, gzip's `Content-Encoding` and the
/// range filter's headers, each after the filter before it (Jitsi's and Magento's locations
/// mix `add_header`, `expires`, gzip and ranges).
#[test]
fn filters_add_headers_in_nginx_s_order() {
    let p = Pair::with(Conf {
        server: "gzip on; gzip_vary on; gzip_types text/plain; gzip_min_length 1;\n\
                 location /st/ { alias {HTML}/; gzip_static on; add_header X-A 1; expires 1h; }\n\
                 location / { add_header X-A 1; add_header X-B 2 always; userid on; \
                 expires 1h; }",
        files: &[("big.txt", &"z".repeat(3000))],
        ..Default::default()
    });
    let gz = p.html().join("a.txt.gz");
    std::fs::write(&gz, b"not really gzip").expect("writing a.txt.gz");
    for (path, headers) in [
        ("/a.txt", ""),
        ("/big.txt", "Accept-Encoding: gzip\r\n"),
        ("/big.txt", "Range: bytes=0-9\r\n"),
        ("/range.txt", "Range: bytes=0-9,20-29\r\n"),
        ("/range.txt", "Range: bytes=999999-\r\n"),
        ("/st/a.txt", "Accept-Encoding: gzip\r\n"),
        ("/st/big.txt", "Accept-Encoding: gzip\r\n"),
        ("/missing", ""),
    ] {
        let (nginx, shoal) = p.header_order(path, headers);
        assert_eq!(nginx, shoal, "{path} {headers:?}");
    }
}

/// GitLab's server block sets `$http_host_with_default` (from `$http_host`, or a default
/// when the client sent none) and passes it as the upstream's Host: a variable `set` declares
/// takes over the `$http_*` family's name, so it is not the request's `Host-With-Default`
/// header (shoal sent no Host at all).
#[test]
fn a_set_variable_takes_over_a_prefixed_family_s_name() {
    let p = Pair::new(
        "if ($http_host = \"\") { set $http_host_with_default \"gitlab.example.com\"; }\n\
         if ($http_host != \"\") { set $http_host_with_default $http_host; }\n\
         set $arg_page fixed;\n\
         location / { return 200 \"h=$http_host_with_default a=$arg_page c=$cookie_x\\n\"; }",
    );
    let with_host = p.get("/?page=2", "Host-With-Default: nope\r\n");
    assert!(with_host.contains("h=localhost a=fixed"), "{with_host}");
    p.check(b"GET /?page=3 HTTP/1.0\r\n\r\n");
}

/// `Location` where nginx writes it in an HTTP/1 head: after `Last-Modified` when nginx made a
/// path absolute itself, else among the other headers where it was added: first for its own
/// redirects to a URL (or to a path `absolute_redirect off` leaves as it is), in the
/// upstream's order for a proxied one.
#[test]
fn location_is_written_where_nginx_writes_it() {
    let up = crate::common::upstream::Upstream::start(|_| {
        crate::common::upstream::Answer::status(302)
            .header("X-Before", "1")
            .header("Location", "http://example.com/up")
            .header("X-After", "2")
    });
    let p = Pair::with(Conf {
        server: &format!(
            "add_header X-A 1 always; expires 1h;\n\
             location = /abs {{ return 301 http://example.com/x; }}\n\
             location = /rel {{ return 302 /there; }}\n\
             location /off/ {{ absolute_redirect off; }}\n\
             location = /rw {{ rewrite ^ http://example.com/y redirect; }}\n\
             location = /ep {{ error_page 404 http://example.com/404; }}\n\
             location /up/ {{ proxy_pass http://127.0.0.1:{}/; }}\n\
             location /upr/ {{ proxy_pass http://127.0.0.1:{}/; \
             proxy_redirect http://example.com/ /; }}",
            up.port(),
            up.port()
        ),
        files: &[("off/dir/index.html", "x")],
        ..Default::default()
    });
    for path in [
        "/abs", "/rel", "/off/dir", "/dir", "/rw", "/ep", "/up/a", "/upr/a",
    ] {
        let (nginx, shoal) = p.header_order(path, "");
        assert_eq!(nginx, shoal, "{path}");
    }
}

/// `expires` on a proxied answer that has its own `Expires` and `Cache-Control` lines: nginx
/// puts its values in their places and drops the other `Cache-Control` lines (shoal sent both
/// the upstream's and its own).
#[test]
fn expires_replaces_an_upstream_s_own() {
    let up = crate::common::upstream::Upstream::start(|_| {
        crate::common::upstream::Answer::ok("up\n")
            .header("Cache-Control", "private")
            .header("X-Between", "1")
            .header("Expires", "Thu, 01 Jan 2000 00:00:00 GMT")
            .header("Cache-Control", "no-transform")
    });
    let p = Pair::new(&format!(
        "location / {{ proxy_pass http://127.0.0.1:{}; expires 1h; add_header X-A 1; }}\n\
         location /max/ {{ proxy_pass http://127.0.0.1:{}; expires max; }}",
        up.port(),
        up.port()
    ));
    for path in ["/x", "/max/y"] {
        p.get_open(path, "");
        let (nginx, shoal) = p.header_order(path, "");
        assert_eq!(nginx, shoal, "{path}");
    }
}

/// A file's answer and an index whose `root`, `index` and `aio threads=` name variables: the
/// static handler makes the request's variables only for what has some
/// (`request::LazyVars`), and they are evaluated as nginx evaluates them. An unknown pool is
/// no answer at all: the connection closes without a byte.
#[test]
fn static_answers_evaluate_root_index_and_pool_variables() {
    let p = Pair::with(Conf {
        main: "thread_pool files threads=1;",
        server: "set $site_root {HTML};\n\
                 location /dir/ { root $site_root; index index.$arg_e; \
                 aio threads=$arg_pool; }",
        ..Default::default()
    });
    let index = p.get("/dir/?e=html&pool=files", "");
    assert!(index.contains("dir index"), "{index}");
    let file = p.get("/dir/b.txt?pool=files", "");
    assert!(file.contains("b in dir"), "{file}");
    let none = p.get("/dir/b.txt?pool=nope", "");
    assert!(none.ends_with("[closed]"), "{none}");
    for log in [p.nginx_log(), p.shoal_log()] {
        let line = "thread pool \"nope\" not found while sending response to client, client: ";
        assert!(log.contains(line), "{log}");
    }
}
