//! Errors while reading a configuration, before any module looks at a value: argument counts,
//! unknown, misplaced and duplicate directives, syntax (semicolons, quotes, blocks), includes,
//! a missing `events`, `listen`, and the nginx directives shoal lacks or keeps inert.

use std::fs;
use std::path::Path;

use crate::common::Prefix;

use super::{fails_at, passes, test_conf};

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
