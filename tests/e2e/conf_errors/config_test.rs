//! What `-t` does besides reading: the files it opens and creates (error log, access log, pid
//! file, temporary directories) as nginx's does, the same errors at startup, `-q` and `-T`,
//! and the seed articles' configurations passing.

use std::fs;
use std::path::Path;

use crate::common::{self, Prefix, Shoal};

use super::{passes, test_conf};

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
    let p = Prefix::new().without_user_root();
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
