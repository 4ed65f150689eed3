//! Configuration errors and `-t`: every error nginx reports while reading a configuration, with
//! its exact message and `FILE:LINE`, and `-t` on the seed articles' configurations.
//!
//! Here the `-t` runners the tests share; the tests are in `reading` (errors of the text and its
//! structure), `directives` (modules' directives with values nginx refuses) and `config_test`
//! (what `-t` opens, creates and prints, and the seed configurations).

use crate::common::Prefix;

mod config_test;
mod directives;
mod reading;

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
