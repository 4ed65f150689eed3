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

/// h5bp's server configs set their security headers and `expires` from maps of
/// `$sent_http_content_type` (`add_header X-Frame-Options $x_frame_options always;`,
/// `expires $expires;`): the map reads the answer's type in the headers filter (shoal read
/// no answer there, so every map gave its default: no `X-Frame-Options`, no `Expires`).
#[test]
fn maps_of_the_sent_content_type_in_the_headers_filter() {
    let p = Pair::with(Conf {
        http: "map $sent_http_content_type $x_frame_options { ~*text/html DENY; }\n\
               map $sent_http_content_type $cors { ~*image/ \"*\"; }\n\
               map $sent_http_content_type $expires { default 1M; \"\" off; \
               ~*text/css 1y; ~*text/html 0; ~*text/plain 1h; }",
        server: "expires $expires;\n\
                 add_header X-Frame-Options $x_frame_options always;\n\
                 add_header Access-Control-Allow-Origin $cors;\n\
                 location /nt/ { default_type \"\"; }",
        files: &[("nt/x", "no type\n"), ("i.gif", "GIF89a")],
        ..Default::default()
    });
    let page = p.get("/page.html", "");
    assert!(page.contains("X-Frame-Options: DENY"), "{page}");
    assert!(page.contains("Cache-Control: max-age=0"), "{page}");
    for path in ["/a.txt", "/i.gif", "/file.unknownext", "/nt/x", "/missing"] {
        p.get(path, "");
    }
}

/// h5bp sets `charset utf-8` for the whole `http {}` and its `www.` server answers `return
/// 301`: nginx names no charset on a 301 or 302 (its own pages, an `error_page =302`, an
/// upstream's, whose own charset goes too) and does on a 303, 307 or 308.
#[test]
fn no_charset_on_a_301_or_302() {
    let up = crate::common::upstream::Upstream::start(|_| {
        crate::common::upstream::Answer::status(302)
            .header("Content-Type", "text/html; charset=koi8-r")
            .header("Location", "http://example.com/up")
    });
    let p = Pair::with(Conf {
        http: "charset utf-8;",
        server: &format!(
            "location = /r301 {{ return 301 /x; }}\n\
             location = /r302 {{ return 302 /x; }}\n\
             location = /r303 {{ return 303 /x; }}\n\
             location = /r307 {{ return 307 /x; }}\n\
             location = /e302 {{ error_page 404 =302 /page.html; }}\n\
             location /up/ {{ override_charset on; proxy_pass http://127.0.0.1:{}/; }}",
            up.port()
        ),
        ..Default::default()
    });
    let moved = p.get("/r301", "");
    assert!(moved.contains("Content-Type: text/html\n"), "{moved}");
    for path in ["/r302", "/r303", "/r307", "/e302", "/dir", "/up/x"] {
        p.get_open(path, "");
    }
}

/// Discourse sends uploads and backups by `X-Accel-Redirect` to an `internal` location with
/// `alias $public/`: the upstream's answer is not sent; the request goes there as a GET,
/// with the answer's `Content-Type`, `Content-Disposition`, `Cache-Control`, `Expires`,
/// `Accept-Ranges` and `Set-Cookie` (through `proxy_cookie_path`); its arguments are the
/// target's; an unsafe target is a 404; `proxy_ignore_headers X-Accel-Redirect` passes the
/// answer as it is (shoal passed every such answer, empty).
#[test]
fn x_accel_redirect_sends_the_named_file() {
    let up = crate::common::upstream::Upstream::start(|req| {
        let to = req.target.split_once("to=").map_or("", |(_, t)| t);
        let a = crate::common::upstream::Answer::ok("from the upstream\n")
            .header("X-Accel-Redirect", to)
            .header("X-Other", "1");
        if req.target.contains("full") {
            a.header("Content-Type", "application/pdf")
                .header("Content-Disposition", "attachment; filename=a.txt")
                .header("Cache-Control", "private")
                .header("Set-Cookie", "a=b; path=/a/")
        } else if req.target.contains("cs") {
            a.header("Content-Type", "text/plain; charset=koi8-r")
        } else {
            a
        }
    });
    let p = Pair::new(&format!(
        "location /up/ {{ proxy_pass http://127.0.0.1:{port}; proxy_cookie_path /a/ /b/; \
         add_header X-Loc up; }}\n\
         location /ign/ {{ proxy_pass http://127.0.0.1:{port}; \
         proxy_ignore_headers X-Accel-Redirect; }}\n\
         location /files/ {{ internal; alias {{HTML}}/; add_header X-Files 1; }}\n\
         location /echo/ {{ internal; return 200 \"uri=$uri args=$args\\n\"; }}\n\
         location @named {{ return 200 \"named uri=$uri args=$args\\n\"; }}",
        port = up.port()
    ));
    let file = p.get_open("/up/?to=/files/a.txt", "");
    assert!(file.contains("hello from a.txt"), "{file}");
    let full = p.get_open("/up/full?to=/files/a.txt", "");
    assert!(full.contains("Set-Cookie: a=b; path=/b/"), "{full}");
    for path in [
        "/up/full?to=/files/none.txt",
        "/up/?to=/echo/q?k=v",
        "/up/?to=/echo/%41b?k=v",
        "/up/?to=@named",
        "/up/?to=/files/%2e%2e/a.txt",
        "/ign/?to=/files/a.txt",
    ] {
        p.get_open(path, "");
    }
    p.head_open("/up/full?to=/files/a.txt", "");
    p.get_open("/up/cs?to=/files/none.txt", "");
    p.check_open(
        b"POST /up/?to=/files/a.txt HTTP/1.1\r\nHost: localhost\r\nContent-Length: 3\r\n\r\nabc",
    );
    let log = p.shoal_log();
    assert!(
        log.contains("unsafe URI \"/files/../a.txt\" was detected while reading response header"),
        "{log}"
    );
}

/// PeerTube's API locations allow larger bodies than its `@api` (`client_max_body_size
/// 100k`) and send every request there by `try_files /dev/null @api`: nginx holds a declared
/// length to the limit of each location the request is found in, not again as the body is
/// read, so a 300 KB upload passes (shoal refused it with 413 in `@api`); a chunked body is
/// held to the limit of the location that reads it.
#[test]
fn a_declared_length_is_held_to_the_locations_found_not_the_named_one() {
    let up = crate::common::upstream::Upstream::echo();
    let p = Pair::new(&format!(
        "location @api {{ client_max_body_size 100k; proxy_pass http://127.0.0.1:{}; }}\n\
         location / {{ try_files /dev/null @api; }}\n\
         location /big/ {{ client_max_body_size 6M; try_files /dev/null @api; }}",
        up.port()
    ));
    let body = "b".repeat(300_000);
    let post = |path: &str| {
        format!(
            "POST {path} HTTP/1.1\r\nHost: localhost\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        )
    };
    let chunked = |path: &str| {
        format!(
            "POST {path} HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: chunked\r\n\r\n\
             {:x}\r\n{body}\r\n0\r\n\r\n",
            body.len()
        )
    };
    let big = p.check_open(post("/big/up").as_bytes());
    assert!(big.starts_with("HTTP/1.1 200"), "{big}");
    p.check_open(post("/other").as_bytes());
    p.check(chunked("/big/up").as_bytes());
}

/// Netdata's sub-path recipe compresses with `gzip_types *`, which takes an answer of any
/// type and one with none (an upstream that names no `Content-Type`, a `default_type ""`
/// file): shoal compressed only answers with a type; `sub_filter_types *`, `ssi_types *` and
/// `addition_types *` passed them by too.
#[test]
fn gzip_types_any_takes_an_answer_without_a_type() {
    let up = crate::common::upstream::Upstream::start(|_| {
        let body = format!("{}<!--# include virtual=\"/after\" -->", "n".repeat(300));
        crate::common::upstream::Answer::raw(format!(
            "HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        ))
    });
    let p = Pair::with(Conf {
        server: &format!(
            "gzip on; gzip_types *; gzip_proxied any; gzip_min_length 1;\n\
             location /up/ {{ proxy_pass http://127.0.0.1:{0}; }}\n\
             location /nt/ {{ default_type \"\"; }}\n\
             location /sub/ {{ gzip off; proxy_pass http://127.0.0.1:{0}; sub_filter_types *; \
             sub_filter nnn FILTERED; }}\n\
             location /ssi/ {{ gzip off; proxy_pass http://127.0.0.1:{0}; ssi on; ssi_types *; }}\n\
             location /add/ {{ gzip off; proxy_pass http://127.0.0.1:{0}; \
             add_after_body /after; addition_types *; }}\n\
             location = /after {{ return 200 \"FILTERED\"; }}",
            up.port()
        ),
        files: &[("nt/x", &"t".repeat(300))],
        ..Default::default()
    });
    // And the other filters' `*_types *`.
    for path in ["/sub/a", "/ssi/a", "/add/a"] {
        let answer = p.get_open(path, "");
        assert!(answer.contains("FILTERED"), "{path}: {answer}");
    }
    for path in ["/up/a", "/nt/x"] {
        let (nginx, shoal) = p.header_order(path, "Accept-Encoding: gzip\r\n");
        assert!(nginx.iter().any(|h| h == "Content-Encoding"), "{nginx:?}");
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
    // (Kept open: nginx takes a half-closed client for one gone while the pool reads.)
    let index = p.get_open("/dir/?e=html&pool=files", "");
    assert!(index.contains("dir index"), "{index}");
    let file = p.get_open("/dir/b.txt?pool=files", "");
    assert!(file.contains("b in dir"), "{file}");
    let none = p.get_open("/dir/b.txt?pool=nope", "");
    assert!(none.ends_with("[closed]"), "{none}");
    for log in [p.nginx_log(), p.shoal_log()] {
        let line = "thread pool \"nope\" not found while sending response to client, client: ";
        assert!(log.contains(line), "{log}");
    }
}

/// After an `error_page` or an `X-Accel-Redirect` to a URI, nginx goes on as a GET (a HEAD
/// stays one) and `$request_method` reads GET, in the location and in the access log (shoal's
/// read the client's method); to a named location the method stays (shoal made a GET of it:
/// a POST served a file there, nginx's is a 405).
#[test]
fn a_redirect_to_a_uri_makes_the_request_method_get() {
    let up = crate::common::upstream::Upstream::start(|req| {
        let to = req.target.split_once("to=").map_or("", |(_, t)| t);
        crate::common::upstream::Answer::ok("from the upstream\n").header("X-Accel-Redirect", to)
    });
    let p = Pair::with(Conf {
        http: "log_format m '$request_method $uri $status';",
        server: &format!(
            "access_log logs/m.log m;\n\
             location /e/ {{ error_page 404 = /page; return 404; }}\n\
             location /n/ {{ error_page 404 = @page; return 404; }}\n\
             location /ns/ {{ error_page 404 = @static; return 404; }}\n\
             location = /page {{ return 200 \"page $request_method\\n\"; }}\n\
             location @page {{ return 200 \"named $request_method\\n\"; }}\n\
             location @static {{ root {{HTML}}; rewrite ^ /a.txt break; }}\n\
             location /up/ {{ proxy_pass http://127.0.0.1:{}; }}",
            up.port()
        ),
        ..Default::default()
    });
    let post = |path: &str| {
        format!("POST {path} HTTP/1.1\r\nHost: localhost\r\nContent-Length: 3\r\n\r\nabc")
    };
    let page = p.check_open(post("/e/x").as_bytes());
    assert!(page.contains("page GET"), "{page}");
    let accel = p.check_open(post("/up/?to=/page").as_bytes());
    assert!(accel.contains("page GET"), "{accel}");
    let named = p.check_open(post("/n/x").as_bytes());
    assert!(named.contains("named POST"), "{named}");
    let file = p.check_open(post("/ns/x").as_bytes());
    assert!(file.starts_with("HTTP/1.1 405"), "{file}");
    for path in ["/up/?to=@page", "/up/?to=@static"] {
        p.check_open(post(path).as_bytes());
    }
    for path in ["/e/x", "/n/x", "/up/?to=/page", "/up/?to=@page"] {
        p.head_open(path, "");
    }
    // The POSTs' lines, written before the HEADs were answered.
    let (nginx, shoal) = p.read_both("logs/m.log");
    let posts = |log: &str| log.lines().take(6).collect::<Vec<_>>().join("\n");
    assert!(
        shoal.starts_with("GET /page 200\nGET /page 200\n"),
        "{shoal}"
    );
    assert_eq!(posts(&nginx), posts(&shoal));
}

/// In the location an `X-Accel-Redirect` or an intercepted answer's `error_page` sent the
/// request to, nginx's request still has the upstream's exchange and the headers it handed
/// on: `$upstream_status`, `$upstream_http_*`, `$sent_http_content_type` read in a `return`,
/// a `set` or an `if` (shoal's were empty); and `$status` in a `return`'s text is the status
/// it answers with, or the `error_page`'s (shoal's was 000).
#[test]
fn a_redirected_location_reads_the_upstreams_variables() {
    let up = crate::common::upstream::Upstream::start(|req| {
        if req.target.contains("nf") {
            return crate::common::upstream::Answer::status(404).body("nothing");
        }
        crate::common::upstream::Answer::ok("from the upstream\n")
            .header("Content-Type", "application/x-up")
            .header("Content-Disposition", "attachment")
            .header("X-Accel-Redirect", "/inner")
    });
    let p = Pair::new(&format!(
        "location /up/ {{ proxy_pass http://127.0.0.1:{}; proxy_intercept_errors on; \
         error_page 404 = /inner; }}\n\
         location /inner {{ internal; set $u $upstream_status;\n\
         if ($upstream_http_x_accel_redirect) {{ return 200 \"accel u=$u \
         us=$upstream_status ct=$sent_http_content_type \
         cd=$sent_http_content_disposition st=$status\\n\"; }}\n\
         return 200 \"page u=$u ct=$sent_http_content_type st=$status\\n\"; }}\n\
         location = /r404 {{ return 404 \"st=$status\\n\"; }}\n\
         location = /r201 {{ return 201 \"st=$status\\n\"; }}\n\
         location /ep/ {{ error_page 404 =410 /r201; return 404; }}",
        up.port()
    ));
    let accel = p.get_open("/up/a", "");
    assert!(
        accel.contains("accel u=200 us=200 ct=application/x-up cd=attachment st=200"),
        "{accel}"
    );
    let page = p.get_open("/up/nf", "");
    assert!(page.contains("page u=404 ct= st=200"), "{page}");
    for path in ["/r404", "/r201", "/ep/x"] {
        p.get_open(path, "");
    }
}

/// MinIO's and Jenkins' configurations turn `ignore_invalid_headers off` so that names nginx
/// calls invalid reach the upstream: nginx then keeps every name without a control byte, a
/// space or DEL (`@`, `/`, `"`, `{`, bytes past ASCII), only flagging it; shoal refused the
/// request with 400 unless the name was an RFC 9110 token. (The test upstream refuses such
/// names itself: the request is answered in place.)
#[test]
fn ignore_invalid_headers_off_keeps_every_name() {
    let p = Pair::new(
        "ignore_invalid_headers off;
         location / { return 200 \"ab=$http_x_amz_meta_a_b ok\\n\"; }",
    );
    let req = b"GET /b HTTP/1.1\r\nHost: localhost\r\nX-Amz-Meta-A_B: 1\r\nX@Y: 2\r\n\
                X/Y: 3\r\nX\"{}: 4\r\nX\xc3\xbc\xff: 5\r\nX.Y: 6\r\n\r\n";
    let answer = p.check(req);
    assert!(answer.contains("ab=1 ok"), "{answer}");
    // A control byte or DEL in a name is refused whatever the setting.
    p.check(b"GET /b HTTP/1.1\r\nHost: localhost\r\nX\x7fY: 1\r\n\r\n");
    p.check(b"GET /b HTTP/1.1\r\nHost: localhost\r\nX\x01Y: 1\r\n\r\n");
}

/// Craft CMS's PHP locations send `add_header Last-Modified $date_gmt`: the SSI module's
/// `$date_gmt` and `$date_local` are variables everywhere, in nginx's default `timefmt`
/// (shoal knew them only inside SSI commands and refused the configuration). Their shape is
/// compared, not the second they name.
#[test]
fn date_gmt_and_date_local_are_variables_everywhere() {
    let p = Pair::with(Conf {
        server: "location /d {\n\
                 if ($date_gmt !~ \"^[A-Z][a-z]+day, [0-9]{2}-[A-Z][a-z]{2}-[0-9]{4} \
                 [0-9]{2}:[0-9]{2}:[0-9]{2} GMT$\") { return 500 \"gmt: $date_gmt\\n\"; }\n\
                 if ($date_local !~ \"^[A-Z][a-z]+day, [0-9]{2}-[A-Z][a-z]{2}-[0-9]{4} \
                 [0-9]{2}:[0-9]{2}:[0-9]{2} UTC$\") { return 500 \"local: $date_local\\n\"; }\n\
                 return 200 \"shapes ok\\n\"; }",
        env: &[("TZ", "UTC")],
        ..Default::default()
    });
    let answer = p.get("/d", "");
    assert!(answer.contains("shapes ok"), "{answer}");
}

/// fail2ban reads the request line of the clients it bans in the access log: for a head a
/// client abandoned halfway (closed, or let `client_header_timeout` pass), nginx's `$request`
/// is what the request line had of it (`"GET /wp-lo"`, its bytes escaped as they came), and
/// a head that timed out is closed without an answer, its 408
/// only logged (shoal logged `-` and U+FFFD's bytes, and wrote a 408 page).
#[test]
fn an_abandoned_head_logs_what_its_request_line_had() {
    let p = Pair::with(Conf {
        http: "log_format f2b '$status \"$request\" $body_bytes_sent';",
        server: "access_log logs/f2b.log f2b; client_header_timeout 1s; server_tokens off;\n\
                 location / { return 200 \"ok\\n\"; }",
        ..Default::default()
    });
    // Closed halfway.
    p.check(b"GET /wp-lo");
    p.check(b"\r\n\r\nGET /a\xffb");
    p.check(b"GET / HTTP/1.1\r\nHost: localhost\r\nX-Half");
    // Empty lines only: a request nginx logs with an empty request line.
    p.check(b"\r\n");
    p.check(b"GET /kept HTTP/1.1\r\nHost: localhost\r\n\r\n\r\n");
    // Refused with a byte that is not UTF-8 in its line.
    p.check(b"GET /\xfe HTTP/1.1\r\n\r\n");
    // Timed out: nothing is written before the close.
    let (np, sp) = p.ports();
    for port in [np, sp] {
        let answer = crate::common::client::exchange(port, b"GET /slow\xfd");
        assert!(answer.is_empty(), "{}", String::from_utf8_lossy(&answer));
    }
    let (nginx, shoal) = p.read_both("logs/f2b.log");
    assert_eq!(nginx, shoal);
    assert!(nginx.contains("408 \"GET /slow\\xFD\" 0"), "{nginx}");
    assert!(nginx.contains("400 \"\" 0"), "{nginx}");
}

/// fail2ban-style filters read nginx's info lines for refused heads: each says what nginx was
/// reading ("request line", "pipelined request line", "request headers") and ends with the
/// request line and `Host` value read so far (shoal wrote the error and the server only, and
/// "request headers" for a client that closed in its request line).
#[test]
fn a_refused_head_s_log_line_says_what_was_being_read() {
    let p = Pair::new("location / { return 200 \"ok\\n\"; }");
    for head in [
        &b"hello\r\n\r\n"[..],
        b"GET / HTTP/2.5\r\nHost: a\r\n\r\n",
        b"GET /../x HTTP/1.1\r\nHost: a\r\n\r\n",
        b"GET / HTTP/1.1\r\nHost: a/b\r\n\r\n",
        b"GET /n HTTP/1.1\r\n\r\n",
        b"GET / HTTP/1.1\r\nHost: a\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n",
        b"GET / HTTP/1.1\r\nHost: a\r\n\r\nhello\r\n\r\n",
        b"GET / HTTP/1.1\r\nHost: a\r\n\r\nGET /pa",
        b"GET /partial",
        b"GET /h HTTP/1.1\r\nX-Part",
        b"GET /h HTTP/1.1\r\nHost: a\r\nX-Part",
        b"\r\n",
    ] {
        p.check(head);
    }
    // `PID#TID: *N ` and the clock differ.
    let lines = |log: String| info_messages(&log, &["client sent", "prematurely"]);
    let (nginx, shoal) = (lines(p.nginx_log()), lines(p.shoal_log()));
    assert_eq!(nginx, shoal);
    assert_eq!(nginx.len(), 12, "{nginx:#?}");
}

/// Icinga Web 2's configuration serves its public tree from a regex location with an alias
/// and `try_files $1 $uri $uri/ /icingaweb2/index.php$is_args$args`: in a regex location the
/// alias is the whole path and try_files adds each name to it (nginx's `add_uri_to_alias`);
/// a file found is served from there, a directory found leaves the URI as it was for the
/// redirect (shoal checked the alias alone, a directory: every asset went to the fallback,
/// or to a redirect to the name and a slash).
#[test]
fn try_files_adds_its_names_to_a_regex_location_s_alias() {
    let p = Pair::with(Conf {
        server: "location ~ ^/iw(.+)? { alias {HTML}/pub; index index.html; \
                 try_files $1 $uri $uri/ /fallback$is_args$args; }\n\
                 location ~ ^/td(.*)$ { alias {HTML}/pub; try_files $1/ =404; }\n\
                 location ~ ^/rf(.+)$ { alias {HTML}/pub; try_files $1 =404; \
                 add_header X-File $request_filename; }\n\
                 location /fallback { return 200 \"fallback $uri $args\\n\"; }",
        files: &[("pub/css/a.css", "css!\n"), ("pub/sub/index.html", "sub\n")],
        ..Default::default()
    });
    let css = p.get("/iw/css/a.css", "");
    assert!(css.contains("css!"), "{css}");
    // `$request_filename` is the alias and the name found too (shoal: the alias alone).
    let named = p.get("/rf/css/a.css", "");
    assert!(named.contains("/pub/css/a.css\n"), "{named}");
    for path in [
        "/iw",
        "/iw/",
        "/iw/sub",
        "/iw/sub/",
        "/iw/none.css?x=1",
        "/td/sub",
        "/td/css",
        "/td/none",
    ] {
        p.get(path, "");
    }
}

/// S3 clients (MinIO's) and `curl -T` send `Expect: 100-continue`: nginx answers it only when
/// the body is read or discarded as the answer is made (a `return` with a text or a
/// redirect's URL, a handler that reads it); one of its own error pages (`deny`, `return
/// 404;`, a missing file, `rewrite ... redirect`) marks the expectation tested first, so no
/// `100 Continue` goes before it (shoal sent one before every answer that left the body
/// unread).
#[test]
fn no_100_continue_before_nginx_s_own_error_pages() {
    let p = Pair::new(
        "location = /r404 { return 404; }\n\
         location = /t404 { return 404 \"text\\n\"; }\n\
         location = /r302 { return 302 /x; }\n\
         location = /rw { rewrite ^ /x redirect; }\n\
         location = /deny { deny all; }",
    );
    let (np, sp) = p.ports();
    for path in ["/r404", "/t404", "/r302", "/rw", "/deny", "/missing.txt"] {
        // The head only, then our end half-closed: each server answers and closes.
        let head = format!(
            "POST {path} HTTP/1.1\r\nHost: localhost\r\nContent-Length: 5\r\n\
             Expect: 100-continue\r\n\r\n"
        );
        let continued = |port| {
            let answer = crate::common::client::exchange_half_closed(port, head.as_bytes());
            answer.starts_with(b"HTTP/1.1 100 Continue\r\n\r\n")
        };
        let nginx = continued(np);
        assert_eq!(nginx, matches!(path, "/t404" | "/r302"), "nginx, {path}");
        assert_eq!(continued(sp), nginx, "{path}");
    }
}

/// fail2ban and log readers match nginx's info lines with the values they name: a second
/// `Host` is a "duplicate host header" with both lines, another unique header a "duplicate
/// header line" with both, an invalid line is cut at the byte nginx stopped at (in hex), an
/// unknown `Transfer-Encoding` names its value, and a request-line host with a byte outside
/// nginx's grammar is an "invalid request" (shoal wrote the fixed words only, and "invalid
/// host in request line" for `http://a_b/`).
#[test]
fn a_refused_head_s_log_line_names_its_values() {
    let p = Pair::new("location / { return 200 \"ok\\n\"; }");
    for head in [
        &b"GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n"[..],
        b"GET / HTTP/1.1\r\nHost: a\r\ncontent-length: 1\r\nContent-Length:  2 \r\n\r\n",
        b"GET / HTTP/1.1\r\nHost: a\r\nBad Header: x\r\n\r\n",
        b"GET / HTTP/1.1\r\nHost: a\r\nX-A: b\x00c\r\n\r\n",
        b"GET / HTTP/1.1\r\nHost: a\r\nX-A: b\rc\r\n\r\n",
        b"GET / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: gzip\r\n\r\n",
        b"GET http://a_b/ HTTP/1.1\r\nHost: a\r\n\r\n",
        b"GET http://a..b/ HTTP/1.1\r\nHost: a\r\n\r\n",
    ] {
        p.check(head);
    }
    // `PID#TID: *N ` and the clock differ.
    let lines = |log: String| info_messages(&log, &["client sent"]);
    let (nginx, shoal) = (lines(p.nginx_log()), lines(p.shoal_log()));
    assert_eq!(nginx, shoal);
    assert_eq!(nginx.len(), 8, "{nginx:#?}");
    for words in [
        "duplicate host header: \"Host: b\", previous value: \"Host: a\"",
        "invalid header line: \"Bad\\x20...\"",
        "unknown \"Transfer-Encoding\": \"gzip\"",
    ] {
        assert!(
            nginx.iter().any(|l| l.contains(words)),
            "{words} {nginx:#?}"
        );
    }
}

/// nginxconfig.io's SPA fallback (`try_files $uri $uri/ /index.html`) loops when the index is
/// missing: nginx's 500 for the cycle is made in the location the request was last in, with
/// its `add_header ... always` (its CORS header), not the server's (shoal used the server's).
#[test]
fn a_redirect_cycle_s_500_takes_the_last_location_s_headers() {
    let p = Pair::new(
        "add_header X-Srv srv always;\n\
         location /cyc/ { try_files $uri /cyc/none; add_header X-Loc cyc always; }",
    );
    let answer = p.get("/cyc/a", "");
    assert!(answer.starts_with("HTTP/1.1 500"), "{answer}");
    assert!(answer.contains("X-Loc: cyc"), "{answer}");
}

/// The `[info]` lines of `log` holding one of `words`, without what differs between servers
/// (the clock and `PID#TID: *N `).
fn info_messages(log: &str, words: &[&str]) -> Vec<String> {
    log.lines()
        .filter(|l| l.contains(" [info] ") && words.iter().any(|w| l.contains(w)))
        .filter_map(|l| {
            l.split_once(": *")?
                .1
                .split_once(' ')
                .map(|(_, m)| m.to_string())
        })
        .collect()
}
