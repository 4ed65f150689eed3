//! Modules' directives with values nginx refuses, each with nginx's message and line:
//! `upstream` and `proxy_*`, the buffer directives, access and limit directives; and
//! `load_module`, accepted as the modules are built in.

use crate::common::Prefix;

use super::{fails_at, passes, test_conf};

/// The upstream and proxy modules' configuration errors, with nginx 1.22's words and lines
/// (checked against `nginx -t`).
#[test]
fn upstream_and_proxy_errors() {
    let h = |body: &str| format!("events {{}}\nhttp {{\n{body}\n}}\n");
    fails_at(
        &h("upstream a {\n    server 127.0.0.1 foo=1;\n}"),
        "invalid parameter \"foo=1\"",
        4,
    );
    fails_at(
        &h("upstream a {\n    server 127.0.0.1 weight=0;\n}"),
        "invalid parameter \"weight=0\"",
        4,
    );
    fails_at(
        &h("upstream a { server 127.0.0.1; }\nupstream a { server 127.0.0.2; }"),
        "duplicate upstream \"a\"",
        4,
    );
    fails_at(
        &h("upstream a {\n    server no-such-host.invalid;\n}"),
        "host not found in upstream \"no-such-host.invalid\"",
        4,
    );
    fails_at(
        &h("upstream a {\n    server 127.0.0.1:99999;\n}"),
        "invalid port in upstream \"127.0.0.1:99999\"",
        4,
    );
    fails_at(
        &h("upstream a {\n    server 127.0.0.1;\n    keepalive 0;\n}"),
        "invalid value \"0\" in \"keepalive\" directive",
        5,
    );
    fails_at(
        &h("upstream a\n{\n    server 127.0.0.1 backup;\n}"),
        "no servers in upstream \"a\"",
        4,
    );
    fails_at(
        &h("upstream a {\n    ip_hash;\n    server 127.0.0.1 backup;\n}"),
        "balancing method does not support parameter \"backup\"",
        5,
    );
    fails_at(
        &h("server {\n    location / {\n        proxy_pass http://a:81;\n    }\n}\nupstream a { server 127.0.0.1:1; }"),
        "upstream \"a\" may not have port 81",
        5,
    );
    fails_at(
        &h("server {\n    location ~ x {\n        proxy_pass http://127.0.0.1/x;\n    }\n}"),
        "\"proxy_pass\" cannot have URI part in location given by regular expression, or inside \
         named location, or inside \"if\" statement, or inside \"limit_except\" block",
        5,
    );
    fails_at(
        &h("server {\n    location / {\n        proxy_pass 127.0.0.1;\n    }\n}"),
        "invalid URL prefix",
        5,
    );
    fails_at(
        &h("server {\n    location / {\n        proxy_pass http://no-such-host.invalid;\n    }\n}"),
        "host not found in upstream \"no-such-host.invalid\"",
        5,
    );
    fails_at(
        &h("server {\n    proxy_pass http://127.0.0.1;\n}"),
        "\"proxy_pass\" directive is not allowed here",
        4,
    );
    // An upstream defined after the proxy_pass that names it, and a unix socket: fine.
    let p = Prefix::new();
    passes(
        &p,
        &h("server {\n    location / { proxy_pass http://b; }\n    \
            location /u { proxy_pass http://unix:/tmp/x.sock:/app; }\n}\n\
            upstream b { least_conn; server 127.0.0.1:1; keepalive 8; }"),
    );
    let err = passes(
        &p,
        &h("upstream c {\n    least_conn;\n    ip_hash;\n    server 127.0.0.1;\n}"),
    );
    assert!(
        err.contains("[warn] load balancing method redefined"),
        "{err}"
    );
}

/// nginx's buffer directives (`NUMBER SIZE`), as its `ngx_conf_set_bufs_slot` reads them; each
/// message checked against `nginx -t` 1.22.1.
#[test]
fn buffer_directives() {
    let h = |body: &str| format!("events {{}}\nhttp {{\n{body}\n}}\n");
    for d in [
        "output_buffers",
        "proxy_buffers",
        "gzip_buffers",
        "large_client_header_buffers",
    ] {
        for bad in ["x 32k", "0 32k", "2 0", "2 x", "-1 4k"] {
            fails_at(
                &h(&format!("    {d} {bad};")),
                &format!("\"{d}\" directive invalid value"),
                3,
            );
        }
        fails_at(
            &h(&format!("    {d} 2;")),
            &format!("invalid number of arguments in \"{d}\" directive"),
            3,
        );
        fails_at(
            &h(&format!("    {d} 1 4k;\n    {d} 2 8k;")),
            &format!("\"{d}\" directive is duplicate"),
            4,
        );
    }
    // `output_buffers` in every context it has, and no longer a directive "not implemented".
    let p = Prefix::new();
    let err = passes(
        &p,
        &h(
            "    output_buffers 1 64k;\n    server {\n        output_buffers 4 1m;\n        \
            location / { output_buffers 2 32k; }\n    }",
        ),
    );
    assert!(!err.contains("[warn]"), "{err}");
    fails_at(
        "output_buffers 1 4k;\nevents {}\n",
        "\"output_buffers\" directive is not allowed here",
        1,
    );
}

/// `allow`/`deny`, `satisfy`, `auth_basic`, `auth_delay`, `limit_req`, `limit_conn` and
/// `limit_rate`: nginx 1.22's answers to bad values (each checked with `nginx -t`).
#[test]
fn access_and_limit_directives() {
    let loc = |body: &str| {
        format!("events {{}}\nhttp {{\n    server {{\n        location / {{\n            {body}\n        }}\n    }}\n}}\n")
    };
    let zone = "limit_req_zone $binary_remote_addr zone=one:10m rate=1r/s;";
    let http = |body: &str| format!("events {{}}\nhttp {{\n    {body}\n}}\n");
    fails_at(
        &loc("allow 1.2.3.4/33;"),
        "invalid parameter \"1.2.3.4/33\"",
        5,
    );
    fails_at(
        &loc("deny 255.255.255.255;"),
        "invalid parameter \"255.255.255.255\"",
        5,
    );
    fails_at(
        &loc("allow 1:2:3:4:5:6:7::;"),
        "invalid parameter \"1:2:3:4:5:6:7::\"",
        5,
    );
    fails_at(&http("satisfy some;"), "invalid value \"some\"", 3);
    fails_at(
        &http("auth_basic off; auth_basic x;"),
        "\"auth_basic\" directive is duplicate",
        3,
    );
    fails_at(
        &http("auth_delay x;"),
        "\"auth_delay\" directive invalid value",
        3,
    );
    fails_at(
        &http("limit_req_zone $binary_remote_addr zone=one:10m rate=0r/s;"),
        "invalid rate \"rate=0r/s\"",
        3,
    );
    fails_at(
        &http("limit_req_zone $binary_remote_addr zone=one:31k rate=1r/s;"),
        "zone \"zone=one:31k\" is too small",
        3,
    );
    fails_at(
        &http("limit_req_zone $binary_remote_addr zone=one:1g rate=1r/s;"),
        "invalid zone size \"zone=one:1g\"",
        3,
    );
    fails_at(
        &http(&format!(
            "{zone} limit_req_zone $uri zone=one:10m rate=2r/s;"
        )),
        "limit_req_zone \"one\" is already bound to key \"$binary_remote_addr\"",
        3,
    );
    fails_at(
        &http(&format!("{zone} limit_conn_zone $uri zone=one:10m;")),
        "the shared memory zone \"one\" is already declared for a different use",
        3,
    );
    fails_at(
        &http(&format!("{zone} limit_req_zone $uri zone=one:20m rate=2r/s;")),
        "the size 20971520 of shared memory zone \"one\" conflicts with already declared size 10485760",
        3,
    );
    fails_at(
        &format!("events {{}}\nhttp {{\n    {zone}\n    server {{\n        location / {{\n            limit_req zone=one burst=0;\n        }}\n    }}\n}}\n"),
        "invalid burst value \"burst=0\"",
        6,
    );
    fails_at(
        &http("limit_req_status 600;"),
        "value must be between 400 and 599",
        3,
    );
    fails_at(
        &http("limit_conn_log_level debug;"),
        "invalid value \"debug\"",
        3,
    );
    fails_at(
        &http("limit_rate 1g;"),
        "\"limit_rate\" directive invalid value",
        3,
    );
    fails_at(
        "events {}\nhttp {\n    limit_conn_zone $binary_remote_addr zone=addr:10m;\n    server {\n        location / {\n            limit_conn addr 65536;\n        }\n    }\n}\n",
        "connection limit must be less 65536",
        6,
    );

    // A zone used and never declared: reported without a place, as nginx does.
    let p = Prefix::new();
    let (code, err, file) = test_conf(&p, &loc("limit_req zone=two;"));
    assert_eq!(
        err,
        format!(
            "shoal: [emerg] zero size shared memory zone \"two\"\nshoal: configuration file {file} test failed\n"
        )
    );
    assert_eq!(code, 1);

    // Host bits: a warning, and the configuration passes.
    let err = passes(
        &p,
        &loc("allow 10.1.2.3/8; limit_req_dry_run on; auth_basic_user_file x;"),
    );
    assert!(
        err.starts_with("shoal: [warn] low address bits of 10.1.2.3/8 are meaningless in "),
        "stderr:\n{err}"
    );
}

/// `load_module` (Debian's `modules-enabled/*.conf` write one per `libnginx-mod-*` package):
/// shoal's modules are built in, so the line is accepted and loads nothing; it is a main-context
/// directive with one argument, as nginx's.
#[test]
fn load_module_is_accepted_as_built_in() {
    let p = Prefix::new();
    let err = passes(
        &p,
        "load_module modules/ngx_stream_module.so;\n\
         load_module /usr/lib/nginx/modules/ngx_mail_module.so;\nevents {}\nhttp {}\n",
    );
    assert!(!err.contains("load_module"), "stderr:\n{err}");
    fails_at(
        "events {}\nload_module a b;\n",
        "invalid number of arguments in \"load_module\" directive",
        2,
    );
    fails_at(
        "events {}\nhttp {\n    load_module x.so;\n}\n",
        "\"load_module\" directive is not allowed here",
        3,
    );
}
