//! issue 21's last core directives against real nginx: `resolver` (one DNS server started
//! here answering both), `listen` port ranges, variables in `expires` and `index`,
//! `proxy_method`, `proxy_store`, `subrequest_output_buffer_size`: the same verdict and lines
//! at `-t`, the same answers to the same requests.

use std::time::{Duration, SystemTime};

use crate::common::dns::{v4, Dns, Entry, A};
use crate::common::upstream::{echo_answer, Answer, Upstream};
use crate::diff::{both_test, Conf, Pair};

#[test]
fn directives_at_t() {
    let cases: &[(&str, &str)] = &[
        ("resolver 127.0.0.1;", ""),
        ("resolver 127.0.0.1:5353 [::1]:53 valid=30s ipv6=off;", ""),
        ("resolver 127.0.0.1 valid=x;", ""),
        ("resolver 127.0.0.1:0;", ""),
        ("resolver 127.0.0.1:x;", ""),
        ("resolver no-such-host.invalid;", ""),
        ("resolver [::1;", ""),
        ("resolver 127.0.0.1; resolver 127.0.0.2;", ""),
        (
            "",
            "location / { resolver 127.0.0.1; resolver_timeout 5s; }",
        ),
        ("resolver_timeout x;", ""),
        ("resolver_timeout 1s; resolver_timeout 2s;", ""),
        ("resolver;", ""),
        ("", "listen 127.0.0.1:20000-20002;"),
        ("", "listen 20010-20011;"),
        ("", "listen 127.0.0.1:20005-20004;"),
        ("", "listen 20005-20004;"),
        ("", "listen 127.0.0.1:20005-70000;"),
        ("", "listen 127.0.0.1:0-5;"),
        ("", "listen 127.0.0.1:5-;"),
        ("", "listen [::1]:20020-20021;"),
        ("", "listen 127.0.0.1:20030-20031; listen 127.0.0.1:20031;"),
        ("", "location / { expires $x; }"),
        ("", "location / { expires modified $x; }"),
        ("", "location / { expires foo $x; }"),
        ("", "location / { expires modified @1h; }"),
        ("", "location / { expires @25h; }"),
        ("", "location / { expires @24h; }"),
        ("", "location / { expires x; }"),
        ("", "location / { index index$x.html; }"),
        ("", "location / { proxy_method POST; }"),
        ("", "location / { proxy_method $x; proxy_method GET; }"),
        (
            "",
            "location / { proxy_store on; proxy_store_access user:rw group:r all:r; }",
        ),
        ("", "location / { proxy_store /tmp/$uri; }"),
        ("", "location / { proxy_store on; proxy_store off; }"),
        (
            "proxy_cache_path /tmp/shoal-store-t keys_zone=z:1m;",
            "location / { proxy_store on; proxy_cache z; }",
        ),
        (
            "proxy_cache_path /tmp/shoal-store-t keys_zone=z:1m;",
            "location / { proxy_cache z; proxy_store on; }",
        ),
        (
            "proxy_cache_path /tmp/shoal-store-t keys_zone=z:1m;",
            "location / { proxy_cache off; proxy_store on; }",
        ),
        ("", "location / { proxy_store_access user:x; }"),
        ("", "location / { proxy_store_access other:r; }"),
        (
            "",
            "location / { proxy_store_access user:r user:r user:r user:r; }",
        ),
        ("subrequest_output_buffer_size 16k;", ""),
        ("subrequest_output_buffer_size x;", ""),
        (
            "",
            "location / { subrequest_output_buffer_size 1k; subrequest_output_buffer_size 2k; }",
        ),
    ];
    let mut differ = Vec::new();
    for (http, server) in cases {
        let http = format!("map $uri $x {{ default 1; }}\n{http}");
        let (n, s) = both_test(&http, server);
        if n != s {
            differ.push(format!("{http} | {server}\n  nginx: {n}\n  shoal: {s}"));
        }
    }
    assert!(differ.is_empty(), "{}", differ.join("\n"));
}

/// A location proxying to `$arg_h` through the DNS server, on the upstream's port.
fn resolver_pair(dns: &Dns, up: &Upstream, extra: &str) -> Pair {
    let http = format!("resolver {} {extra};\nresolver_timeout 2s;", dns.addr());
    let server = format!(
        "location / {{ set $name $arg_h; proxy_pass http://$name:{}/; }}",
        up.port()
    );
    Pair::with(Conf {
        http: &http,
        server: &server,
        ..Default::default()
    })
}

#[test]
fn proxy_pass_with_variables_resolves_as_nginx() {
    let dns = Dns::start(&[
        ("backend.test", v4("127.0.0.1", 60)),
        ("gone.test", Entry::NxDomain),
        ("fail.test", Entry::ServFail),
        ("slow.test", Entry::Silent),
    ]);
    let up = Upstream::hello("resolved");
    let pair = resolver_pair(&dns, &up, "");
    for name in [
        "backend.test",
        "Backend.Test",
        "gone.test",
        "fail.test",
        "127.0.0.1",
    ] {
        pair.get_open(&format!("/?h={name}"), "");
    }
    // Both asked once for the name, and kept the answer.
    pair.get_open("/?h=backend.test", "");
    assert_eq!(dns.asked("backend.test", A), 2);
    assert_eq!(dns.asked("gone.test", A), 2);
    let (n, s) = (pair.nginx_log(), pair.shoal_log());
    for line in [
        "gone.test could not be resolved (3: Host not found)",
        "fail.test could not be resolved (2: Server failure)",
    ] {
        assert!(n.contains(line), "nginx: {n}");
        assert!(s.contains(line), "shoal: {s}");
    }
    // Silence: both give up at resolver_timeout with the same answer and line.
    pair.get_open("/?h=slow.test", "");
    let line = "slow.test could not be resolved (110: Operation timed out)";
    assert!(pair.nginx_log().contains(line), "{}", pair.nginx_log());
    assert!(pair.shoal_log().contains(line), "{}", pair.shoal_log());
}

#[test]
fn no_resolver_as_nginx() {
    let up = Upstream::hello("x");
    let server = format!(
        "location / {{ set $name $arg_h; proxy_pass http://$name:{}/; }}",
        up.port()
    );
    let pair = Pair::new(&server);
    pair.get_open("/?h=backend.test", "");
    let line = "no resolver defined to resolve backend.test";
    assert!(pair.nginx_log().contains(line));
    assert!(pair.shoal_log().contains(line));
}

#[test]
fn expires_from_a_map_as_nginx() {
    let http = "map $arg_e $exp { default off; epoch epoch; max max; mod \"1h\"; \
                bad nonsense; neg -1h; }";
    let server = "location /a/ { expires $exp; }\n\
                  location /m/ { alias {HTML}/a/; expires modified $exp; }";
    let pair = Pair::with(Conf {
        http,
        server,
        ..Default::default()
    });
    let dir = pair.html().join("a");
    std::fs::create_dir_all(&dir).unwrap();
    let f = std::fs::File::create(dir.join("f.txt")).unwrap();
    use std::io::Write;
    (&f).write_all(b"file\n").unwrap();
    // An old file: `modified` times are in the past, so nothing depends on the clock.
    f.set_modified(SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000_000))
        .unwrap();
    drop(f);
    for e in ["", "epoch", "max", "bad", "off"] {
        pair.get(&format!("/a/f.txt?e={e}"), "");
    }
    for e in ["mod", "epoch", "bad"] {
        pair.get(&format!("/m/f.txt?e={e}"), "");
    }
}

#[test]
fn index_with_variables_as_nginx() {
    let pair = Pair::new("location /i/ { alias {HTML}/i/; index page$arg_v.html index.html; }");
    let dir = pair.html().join("i");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("page1.html"), "one\n").unwrap();
    std::fs::write(dir.join("index.html"), "index\n").unwrap();
    for q in ["?v=1", "?v=2", ""] {
        pair.get(&format!("/i/{q}"), "");
    }
}

#[test]
fn proxy_method_as_nginx() {
    let up = Upstream::start(echo_answer);
    let server = format!(
        "location /post/ {{ proxy_method POST; proxy_pass {0}; }}\n\
         location /var/ {{ proxy_method $arg_m; proxy_pass {0}; }}",
        up.url()
    );
    let pair = Pair::new(&server);
    pair.get_open("/post/x", "");
    pair.get_open("/var/x?m=PUT", "");
}

#[test]
fn proxy_store_as_nginx() {
    let up = Upstream::start(|r| {
        if r.target.ends_with(".txt") {
            Answer::ok(format!("stored {}\n", r.target))
                .header("Last-Modified", "Sun, 09 Sep 2001 01:46:40 GMT")
        } else if r.target.ends_with("/chunked") {
            Answer::ok("in chunks\n".repeat(50)).chunked(&[500])
        } else {
            Answer::status(404)
        }
    });
    let server = format!(
        "location /s/ {{ proxy_store {{HTML}}/store/$server_port$uri; \
         proxy_store_access user:rw group:r all:r; proxy_pass {0}; }}\n\
         location /on/ {{ root {{HTML}}/store/on$server_port; proxy_store on; proxy_pass {0}; }}",
        up.url()
    );
    let pair = Pair::new(&server);
    let store = pair.html().join("store");
    std::fs::create_dir_all(&store).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&store, std::fs::Permissions::from_mode(0o777)).unwrap();
    for path in [
        "/s/a/b.txt",
        "/s/missing",
        "/s/chunked",
        "/on/x/y.txt",
        "/on/x/missing",
    ] {
        pair.get_open(path, "");
    }
    let (np, sp) = pair.ports();
    let look = |p: &std::path::Path| {
        use std::os::unix::fs::MetadataExt;
        std::fs::metadata(p)
            .map(|m| {
                (
                    m.mode() & 0o7777,
                    // The upstream's Last-Modified, else the time it was written.
                    if p.extension().is_some() {
                        m.mtime()
                    } else {
                        0
                    },
                    std::fs::read_to_string(p).unwrap_or_default(),
                )
            })
            .ok()
    };
    for (n, s) in [
        (format!("{np}/s/a/b.txt"), format!("{sp}/s/a/b.txt")),
        (format!("{np}/s/a"), format!("{sp}/s/a")),
        (format!("{np}/s/missing"), format!("{sp}/s/missing")),
        (format!("{np}/s/chunked"), format!("{sp}/s/chunked")),
        (format!("on{np}/on/x/y.txt"), format!("on{sp}/on/x/y.txt")),
        (
            format!("on{np}/on/x/missing"),
            format!("on{sp}/on/x/missing"),
        ),
    ] {
        let (nf, sf) = (look(&store.join(&n)), look(&store.join(&s)));
        let what = if n.ends_with("/s/a") {
            "a directory"
        } else {
            "a file"
        };
        assert_eq!(nf, sf, "{what}: nginx's {n}, shoal's {s}");
    }
    assert!(look(&store.join(format!("{sp}/s/a/b.txt"))).is_some());
}

#[test]
fn add_trailer_as_nginx() {
    let up = Upstream::hello("from upstream");
    let server = format!(
        // Tokens off: "nginx" and "shoal" are as long, so are the error pages' chunks.
        "server_tokens off; add_trailer X-Server-Level server;\n\
         location /t/ {{ alias {{HTML}}/t/; add_trailer X-Time \"t=$arg_t\"; \
         add_trailer X-Empty $arg_none; add_trailer X-Always yes always; }}\n\
         location /ret {{ add_trailer X-R r; return 200 \"returned\\n\"; }}\n\
         location /missing/ {{ add_trailer X-Only-Good good; }}\n\
         location /off/ {{ alias {{HTML}}/t/; chunked_transfer_encoding off; add_trailer X-T t; }}\n\
         location /up/ {{ add_trailer X-Up \"$upstream_status\"; proxy_pass {}; }}\n\
         location /inherit/ {{ alias {{HTML}}/t/; }}",
        up.url()
    );
    let pair = Pair::new(&server);
    let dir = pair.html().join("t");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("f.txt"), "small file\n").unwrap();
    for path in [
        "/t/f.txt?t=1",
        "/t/nothing",
        "/ret",
        "/missing/x",
        "/off/f.txt",
        "/up/x",
        "/inherit/f.txt",
    ] {
        // A proxied request is not half-closed (the proxy would give it up).
        pair.get_open(path, "");
        pair.head_open(path, "");
        pair.check_open(format!("GET {path} HTTP/1.0\r\n\r\n").as_bytes());
    }
}

/// The directives nginx lets take variables, with variables: accepted alike.
#[test]
fn directives_with_variables_at_t() {
    let cases: &[&str] = &[
        "location / { proxy_set_header X-V $v; proxy_pass http://127.0.0.1:1; }",
        "location / { proxy_set_body $v; proxy_pass http://127.0.0.1:1; }",
        "location / { proxy_bind $v; proxy_pass http://127.0.0.1:1; }",
        "location / { return 200 $v; }",
        "location / { return 302 $scheme://$host/$v; }",
        "location / { return $v; }",
        "location / { error_page 404 /e$v; }",
        "location / { error_page 404 = @n$v; }",
        "location / { try_files $uri /$v =404; }",
        "location / { limit_rate $v; limit_rate_after $v; }",
        "location / { auth_basic $v; auth_basic_user_file /tmp/$v; }",
        "location / { root /srv/$v; }",
        "location / { alias /srv/$v/; }",
        "location / { add_header X-V $v always; add_trailer X-T $v; }",
        "location / { expires $v; }",
        "location / { index $v.html i$v.htm; }",
        "location / { charset $v; }",
        "location / { set $w $v; rewrite ^ /$w; }",
        "location / { access_log logs/$v.log; }",
        "location / { proxy_store /tmp/$v; proxy_pass http://127.0.0.1:1; }",
        "location / { proxy_method $v; proxy_pass http://127.0.0.1:1; }",
        "location / { proxy_redirect http://$v/ /; proxy_pass http://127.0.0.1:1; }",
        "location / { default_type $v; }",
    ];
    let mut differ = Vec::new();
    for server in cases {
        let (n, s) = both_test("map $uri $v { default 1; }", server);
        if n != s {
            differ.push(format!("{server}\n  nginx: {n}\n  shoal: {s}"));
        }
    }
    assert!(differ.is_empty(), "{}", differ.join("\n"));
}

/// Variables from a map, where nginx evaluates them per request.
#[test]
fn variables_per_request_as_nginx() {
    let up = Upstream::start(echo_answer);
    let http = "map $arg_k $v { default def; a alpha; b \"\"; }";
    let server = format!(
        "location /ret {{ return 200 \"v=$v\\n\"; }}\n\
         location /code {{ return 301 /to/$v; }}\n\
         location /err {{ error_page 404 /page_$v; }}\n\
         location /page_alpha {{ return 200 \"error page alpha\\n\"; }}\n\
         location /auth {{ auth_basic $v; }}\n\
         location /hdr {{ proxy_set_header X-V $v; proxy_pass {}; }}",
        up.url()
    );
    let pair = Pair::with(Conf {
        http,
        server: &server,
        ..Default::default()
    });
    for k in ["a", "b", "z"] {
        for path in ["/ret", "/code", "/err/x", "/auth"] {
            pair.get(&format!("{path}?k={k}"), "");
        }
        pair.get_open(&format!("/hdr?k={k}"), "");
    }
}
