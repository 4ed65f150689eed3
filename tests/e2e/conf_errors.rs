//! Configuration errors and `-t`: every error nginx reports while reading a configuration, with
//! its exact message and `FILE:LINE`, and `-t` on the seed articles' configurations.

use std::fs;
use std::path::Path;

use crate::common::{self, Prefix, Shoal};

/// Runs `shoal -t` on `text` (as `PREFIX/conf/shoal.conf`); returns (exit code, stderr, the
/// configuration file's path).
fn test_conf(p: &Prefix, text: &str) -> (i32, String, String) {
    let file = p.write_conf(text);
    let out = p.run(&["-t"]);
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stderr).into_owned(),
        file.display().to_string(),
    )
}

/// `-t` fails with exactly `shoal: [emerg] MESSAGE in FILE:LINE` and nginx's closing line.
#[track_caller]
fn fails_at(text: &str, message: &str, line: usize) {
    let p = Prefix::new();
    let (code, err, file) = test_conf(&p, text);
    let want = format!(
        "shoal: [emerg] {message} in {file}:{line}\nshoal: configuration file {file} test failed\n"
    );
    assert_eq!(err, want, "for configuration:\n{text}");
    assert_eq!(code, 1);
}

/// `-t` succeeds: nginx's two lines, after any `[warn]` lines.
#[track_caller]
fn passes(p: &Prefix, text: &str) -> String {
    let (code, err, file) = test_conf(p, text);
    let tail = format!(
        "shoal: the configuration file {file} syntax is ok\nshoal: configuration file {file} test is successful\n"
    );
    assert!(err.ends_with(&tail), "stderr:\n{err}");
    assert_eq!(code, 0, "stderr:\n{err}");
    err
}

#[test]
fn wrong_number_of_arguments() {
    fails_at(
        "events {}\nworker_processes 1 2;\n",
        "invalid number of arguments in \"worker_processes\" directive",
        2,
    );
    fails_at(
        "events x {}\n",
        "invalid number of arguments in \"events\" directive",
        1,
    );
    fails_at(
        "events {}\nhttp {\n    server {\n        listen;\n    }\n}\n",
        "invalid number of arguments in \"listen\" directive",
        4,
    );
}

#[test]
fn unknown_directive() {
    fails_at("events {}\n\nfoo bar;\n", "unknown directive \"foo\"", 3);
    fails_at(
        "events {}\nhttp {\n    server {\n        lisen 8080;\n    }\n}\n",
        "unknown directive \"lisen\"",
        4,
    );
}

#[test]
fn directive_in_the_wrong_context() {
    fails_at(
        "events {}\nhttp {\n    worker_processes 2;\n}\n",
        "\"worker_processes\" directive is not allowed here",
        3,
    );
    fails_at(
        "events {}\nhttp {\n    listen 8080;\n}\n",
        "\"listen\" directive is not allowed here",
        3,
    );
    fails_at(
        "events {\n    server_name x;\n}\n",
        "\"server_name\" directive is not allowed here",
        2,
    );
}

#[test]
fn duplicate_directive() {
    fails_at(
        "events {}\nworker_processes 2;\nworker_processes 2;\n",
        "\"worker_processes\" directive is duplicate",
        3,
    );
    fails_at(
        "events {}\nevents {}\n",
        "\"events\" directive is duplicate",
        2,
    );
    fails_at(
        "events {}\npid a.pid;\n\npid b.pid;\n",
        "\"pid\" directive is duplicate",
        4,
    );
}

#[test]
fn missing_semicolon() {
    // At the end of the file.
    fails_at(
        "events {}\nworker_processes 2\n",
        "unexpected end of file, expecting \";\" or \"}\"",
        3,
    );
    // Before a block: the next line's `{` ends the directive.
    fails_at(
        "events {}\nworker_processes 2\nhttp {\n}\n",
        "directive \"worker_processes\" is not terminated by \";\"",
        3,
    );
    // Before a closing brace.
    fails_at(
        "events {\n    worker_connections 10\n}\n",
        "unexpected \"}\"",
        3,
    );
    // A block directive without its block.
    fails_at("events;\n", "directive \"events\" has no opening \"{\"", 1);
}

#[test]
fn invalid_flag_value() {
    fails_at(
        "events {}\ndaemon maybe;\n",
        "invalid value \"maybe\" in \"daemon\" directive, it must be \"on\" or \"off\"",
        2,
    );
}

#[test]
fn unterminated_quote() {
    fails_at(
        "events {}\npid \"logs/a.pid;\n",
        "unexpected end of file, expecting \";\" or \"}\"",
        3,
    );
    fails_at(
        "events {}\npid 'logs/a.pid;\nworker_processes 1;\n",
        "unexpected end of file, expecting \";\" or \"}\"",
        4,
    );
}

#[test]
fn unterminated_or_unopened_block() {
    fails_at(
        "events {}\nhttp {\n    server {\n        listen 8080;\n    }\n",
        "unexpected end of file, expecting \"}\"",
        6,
    );
    fails_at("events {\n", "unexpected end of file, expecting \"}\"", 2);
    fails_at("events {}\n}\n", "unexpected \"}\"", 2);
}

#[test]
fn missing_include() {
    let p = Prefix::new();
    let (code, err, file) = test_conf(&p, "events {}\n\ninclude extra.conf;\n");
    let missing = p.join("conf/extra.conf");
    assert_eq!(
        err,
        format!(
            "shoal: [emerg] open() \"{}\" failed (2: No such file or directory) in {file}:3\n\
             shoal: configuration file {file} test failed\n",
            missing.display()
        )
    );
    assert_eq!(code, 1);
}

#[test]
fn include_glob_matching_nothing_is_fine() {
    let p = Prefix::new();
    passes(&p, "events {}\ninclude sites/*.conf;\n");
}

#[test]
fn include_loop() {
    let p = Prefix::new();
    fs::write(p.join("conf/a.conf"), "include b.conf;\n").unwrap();
    fs::write(p.join("conf/b.conf"), "# b\ninclude a.conf;\n").unwrap();
    let (code, err, file) = test_conf(&p, "events {}\ninclude a.conf;\n");
    let (a, b) = (p.join("conf/a.conf"), p.join("conf/b.conf"));
    assert_eq!(
        err,
        format!(
            "shoal: [emerg] include loop: \"{}\" includes itself in {}:2\n\
             shoal: configuration file {file} test failed\n",
            a.display(),
            b.display()
        )
    );
    assert_eq!(code, 1);
}

#[test]
fn error_in_an_included_file_names_that_file() {
    let p = Prefix::new();
    fs::write(p.join("conf/inc.conf"), "\n\nworker_processes x;\n").unwrap();
    let (code, err, file) = test_conf(&p, "events {}\ninclude inc.conf;\n");
    assert_eq!(
        err,
        format!(
            "shoal: [emerg] \"worker_processes\" directive invalid value in {}:3\n\
             shoal: configuration file {file} test failed\n",
            p.join("conf/inc.conf").display()
        )
    );
    assert_eq!(code, 1);
}

#[test]
fn no_events_section() {
    let p = Prefix::new();
    let (code, err, file) = test_conf(&p, "worker_processes 1;\n");
    assert_eq!(
        err,
        format!(
            "shoal: [emerg] no \"events\" section in configuration\n\
             shoal: configuration file {file} test failed\n"
        )
    );
    assert_eq!(code, 1);
}

#[test]
fn listen_errors() {
    fails_at(
        "events {}\nhttp {\n    server {\n        listen 99999;\n    }\n}\n",
        "invalid port in \"99999\" of the \"listen\" directive",
        4,
    );
    fails_at(
        "events {}\nhttp {\n    server {\n        listen 127.0.0.1:8000 default_server;\n    }\n\
         \x20   server {\n        listen 127.0.0.1:8000 default_server;\n    }\n}\n",
        "a duplicate default server for 127.0.0.1:8000",
        7,
    );
    fails_at(
        "events {}\nhttp {\n    server {\n        listen 8000 backlog=10;\n    }\n\
         \x20   server {\n        listen 8000 backlog=20;\n    }\n}\n",
        "duplicate listen options for 0.0.0.0:8000",
        7,
    );
    fails_at(
        "events {}\nhttp {\n    server {\n        listen 127.0.0.1:8000;\n        listen 127.0.0.1:8000;\n    }\n}\n",
        "a duplicate listen 127.0.0.1:8000",
        5,
    );
    fails_at(
        "events {}\nhttp {\n    server {\n        listen 8000 nonsense;\n    }\n}\n",
        "invalid parameter \"nonsense\"",
        4,
    );
}

#[test]
fn nginx_directive_shoal_lacks() {
    fails_at(
        "events {}\nhttp {\n    server {\n        location / {\n            image_filter test;\n        }\n    }\n}\n",
        "\"image_filter\" directive of ngx_http_image_filter_module is not supported by shoal",
        5,
    );
}

/// A block still waiting for its module (`pb("NAME", Ctx::MAIN, Args::NONE)` in the server's
/// `pending.rs`), to write as `NAME { }` in the main context; none once every module has
/// landed.
fn a_pending_block() -> Option<String> {
    let src = fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("crates/server/src/pending.rs"),
    )
    .ok()?;
    src.lines().find_map(|l| {
        let rest = l.trim().strip_prefix("pb(\"")?;
        let (name, args) = rest.split_once('"')?;
        (args == ", Ctx::MAIN, Args::NONE),").then(|| name.to_string())
    })
}

#[test]
fn inert_and_pending_directives_warn() {
    let p = Prefix::new();
    let err = passes(&p, "events {}\nhttp {\n    image_filter_buffer 2m;\n}\n");
    let file = p.join("conf/shoal.conf").display().to_string();
    assert!(
        err.starts_with(&format!(
            "shoal: [warn] \"image_filter_buffer\" directive of ngx_http_image_filter_module is not \
             supported by shoal and has no effect in {file}:3\n"
        )),
        "stderr:\n{err}"
    );
    if let Some(name) = a_pending_block() {
        let err = passes(&p, &format!("events {{}}\nhttp {{\n}}\n{name} {{\n}}\n"));
        assert!(
            err.starts_with(&format!(
                "shoal: [warn] \"{name}\" directive is not implemented yet, ignored in {file}:4\n"
            )),
            "stderr:\n{err}"
        );
    }
}

#[test]
fn unwritable_error_log_fails_the_test() {
    let p = Prefix::new();
    let (code, err, file) = test_conf(&p, "error_log /proc/nope/error.log;\nevents {}\n");
    assert_eq!(
        err,
        format!(
            "shoal: [emerg] open() \"/proc/nope/error.log\" failed (2: No such file or directory)\n\
             shoal: configuration file {file} test failed\n"
        )
    );
    assert_eq!(code, 1);
}

#[test]
fn the_default_access_log_is_opened_only_for_a_server_without_one() {
    // No `logs/` in the prefix: only a server left without an `access_log` needs it.
    let p = Prefix::new();
    fs::remove_dir(p.join("logs")).unwrap();
    let own = p.join("own.log").display().to_string();
    let text = format!(
        "error_log stderr;\npid own.pid;\nevents {{}}\nhttp {{\n\
         server {{ listen 127.0.0.1:1; access_log {own}; location / {{ }} }}\n\
         server {{ listen 127.0.0.1:2; access_log off; }}\n}}\n"
    );
    passes(&p, &text);
    let text = text.replace("access_log off;", "");
    let (code, err, _) = test_conf(&p, &text);
    let default = p.join("logs/access.log").display().to_string();
    assert!(
        err.contains(&format!(
            "[emerg] open() \"{default}\" failed (2: No such file or directory)"
        )),
        "{err}"
    );
    assert_eq!(code, 1);
}

#[test]
fn the_test_creates_the_pid_file_and_fails_where_it_cannot() {
    let p = Prefix::new();
    let (code, err, file) = test_conf(&p, "pid /proc/nope/x.pid;\nevents {}\n");
    assert_eq!(
        err,
        format!(
            "shoal: [emerg] open() \"/proc/nope/x.pid\" failed (2: No such file or directory)\n\
             shoal: configuration file {file} test failed\n"
        )
    );
    assert_eq!(code, 1);
    // Created empty where it can be; a running server's is left as it is.
    passes(&p, "pid logs/t.pid;\nevents {}\n");
    assert_eq!(fs::read(p.join("logs/t.pid")).unwrap(), b"");
    fs::write(p.join("logs/t.pid"), "12345\n").unwrap();
    passes(&p, "pid logs/t.pid;\nevents {}\n");
    assert_eq!(p.read("logs/t.pid"), "12345\n");
}

#[test]
fn the_test_makes_the_temporary_directories_as_nginx_does() {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    let p = Prefix::new();
    let (code, err, file) = test_conf(
        &p,
        "events {}\nhttp { client_body_temp_path nope/body 1 2; }\n",
    );
    let dir = p.join("nope/body").display().to_string();
    assert_eq!(
        err,
        format!(
            "shoal: [emerg] mkdir() \"{dir}\" failed (2: No such file or directory)\n\
             shoal: configuration file {file} test failed\n"
        )
    );
    assert_eq!(code, 1);
    // Made (one level, mode 0700); as root with `user`, given to the user.
    let root = common::backends::is_root();
    let user = if root { "user nobody nogroup;\n" } else { "" };
    passes(
        &p,
        &format!(
            "{user}events {{}}\nhttp {{ client_body_temp_path body 1 2; \
             server {{ location / {{ proxy_temp_path ptemp; }} }} }}\n"
        ),
    );
    for d in ["body", "ptemp"] {
        let meta = fs::metadata(p.join(d)).unwrap();
        assert_eq!(meta.permissions().mode() & 0o777, 0o700, "{d}");
        if root {
            let id = std::process::Command::new("id")
                .args(["-u", "nobody"])
                .output()
                .unwrap();
            let uid: u32 = String::from_utf8_lossy(&id.stdout).trim().parse().unwrap();
            assert_eq!(meta.uid(), uid, "{d}");
        }
    }
}

#[test]
fn errors_at_startup_match_the_test() {
    // Without -t the same message is printed and shoal exits 1 without listening.
    let p = Prefix::new();
    let file = p
        .write_conf("daemon off;\nevents {}\n\nfoo;\n")
        .display()
        .to_string();
    let out = p.run(&[]);
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        format!("shoal: [emerg] unknown directive \"foo\" in {file}:4\n")
    );
    assert_eq!(out.status.code(), Some(1));
    assert!(!p.pid_file().exists());
}

/// `-t` on every seed configuration in `tests/confs`, copied with `mime.types` into a fresh
/// directory, with a prefix that has `logs/`.
#[test]
fn seed_configurations_pass() {
    let confs = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/confs");
    let mut names: Vec<String> = fs::read_dir(&confs)
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".conf"))
        .collect();
    names.sort();
    assert!(names.len() >= 20, "seed configurations: {names:?}");
    let mut failures = Vec::new();
    for name in &names {
        let p = Prefix::new();
        let dir = p.join("seed");
        fs::create_dir(&dir).unwrap();
        fs::copy(confs.join(name), dir.join(name)).unwrap();
        fs::copy(confs.join("mime.types"), dir.join("mime.types")).unwrap();
        let file = dir.join(name);
        let out = common::run(&[
            "-p".into(),
            p.path().display().to_string(),
            "-c".into(),
            file.display().to_string(),
            "-t".into(),
        ]);
        let err = String::from_utf8_lossy(&out.stderr);
        let f = file.display();
        let ok_tail = format!(
            "shoal: the configuration file {f} syntax is ok\n\
             shoal: configuration file {f} test is successful\n"
        );
        if !err.ends_with(&ok_tail) || out.status.code() != Some(0) {
            failures.push(format!("{name}:\n{err}"));
            continue;
        }
        for line in err.lines() {
            if !(line.starts_with("shoal: [warn] ")
                || line.starts_with("shoal: the configuration")
                || line.starts_with("shoal: configuration file"))
            {
                failures.push(format!("{name}: unexpected line {line:?}"));
            }
        }
        // seed 002's `stream {}` is served now: no warning about it.
        if name == "seed002.conf" && err.contains("\"stream\"") {
            failures.push(format!("{name}: stream {{}} is warned about:\n{err}"));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn quiet_test_prints_only_errors() {
    let p = Prefix::new();
    p.write_conf("events {}\n");
    let out = p.run(&["-tq"]);
    assert_eq!(String::from_utf8_lossy(&out.stderr), "");
    assert_eq!(out.status.code(), Some(0));
}

#[test]
fn dump_prints_every_file() {
    let p = Prefix::new();
    fs::write(p.join("conf/inc.conf"), "worker_processes 1;\n").unwrap();
    let file = p.write_conf("events {}\ninclude inc.conf;\n");
    let out = p.run(&["-T"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0));
    assert!(
        stdout.contains(&format!(
            "# configuration file {}:\nevents {{}}\ninclude inc.conf;\n",
            file.display()
        )),
        "{stdout}"
    );
    assert!(
        stdout.contains(&format!(
            "# configuration file {}:\nworker_processes 1;\n",
            p.join("conf/inc.conf").display()
        )),
        "{stdout}"
    );
}

#[test]
fn started_server_answers_with_a_good_configuration() {
    // The helper's basic configuration is itself valid, and serves.
    let port = common::free_port();
    let _s = Shoal::start(&common::basic_conf(port), port);
    let r = common::get(port, "/").unwrap();
    assert_eq!(r.status, 200);
    assert_eq!(r.body, common::INDEX.as_bytes());
}

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
