//! `include` and reading files, on real files in a temporary directory.

use shoal_conf::{parse_file, parse_str, Directive, Parsed};
use std::fs;
use std::path::{Path, PathBuf};
use tempfile::TempDir;

/// A temporary configuration directory with `files` written into it.
fn conf_dir(files: &[(&str, &str)]) -> TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    for (name, text) in files {
        let path = dir.path().join(name);
        fs::create_dir_all(path.parent().expect("has parent")).expect("mkdir");
        fs::write(path, text).expect("write");
    }
    dir
}

fn parse_main(dir: &TempDir) -> Result<Parsed, shoal_conf::Error> {
    parse_file(&dir.path().join("shoal.conf"), dir.path())
}

fn names(ds: &[Directive]) -> Vec<&str> {
    ds.iter().map(|d| d.name.as_str()).collect()
}

fn path_in(dir: &TempDir, name: &str) -> PathBuf {
    dir.path().join(name)
}

#[test]
fn relative_include_is_spliced_with_its_own_spans() {
    let dir = conf_dir(&[
        ("shoal.conf", "a;\nhttp {\n  include mime.types;\n  b;\n}\n"),
        ("mime.types", "\n\ntypes { text/html html; }\n"),
    ]);
    let parsed = parse_main(&dir).expect("parses");
    let http = parsed.directives[1].block.as_ref().expect("block");
    assert_eq!(names(http), ["types", "b"]);
    let types = &http[0];
    assert_eq!(
        types.span.to_string(),
        format!("{}:3", path_in(&dir, "mime.types").display())
    );
    assert_eq!(http[1].span.line, 4);
    assert_eq!(parsed.files.len(), 2);
    assert_eq!(parsed.files[0].path, path_in(&dir, "shoal.conf"));
    assert_eq!(parsed.files[1].path, path_in(&dir, "mime.types"));
    assert_eq!(parsed.files[1].text, "\n\ntypes { text/html html; }\n");
}

#[test]
fn absolute_include() {
    let other = conf_dir(&[("x.conf", "x;")]);
    let main = format!("include {};", path_in(&other, "x.conf").display());
    let dir = conf_dir(&[("shoal.conf", &main)]);
    let parsed = parse_main(&dir).expect("parses");
    assert_eq!(names(&parsed.directives), ["x"]);
}

#[test]
fn glob_include_is_sorted_and_skips_dot_files() {
    let dir = conf_dir(&[
        ("shoal.conf", "first;\ninclude conf.d/*.conf;\nlast;\n"),
        ("conf.d/b.conf", "b;"),
        ("conf.d/a.conf", "a1; a2;"),
        ("conf.d/c.conf", "c;"),
        ("conf.d/c.conf.bak", "not_me;"),
        ("conf.d/.hidden.conf", "not_me_either;"),
    ]);
    let parsed = parse_main(&dir).expect("parses");
    assert_eq!(
        names(&parsed.directives),
        ["first", "a1", "a2", "b", "c", "last"]
    );
    let read: Vec<_> = parsed.files.iter().map(|f| f.path.clone()).collect();
    assert_eq!(
        read,
        [
            path_in(&dir, "shoal.conf"),
            path_in(&dir, "conf.d/a.conf"),
            path_in(&dir, "conf.d/b.conf"),
            path_in(&dir, "conf.d/c.conf"),
        ]
    );
}

#[test]
fn glob_with_no_match_is_fine() {
    let dir = conf_dir(&[("shoal.conf", "include sites/*.conf;\na;")]);
    let parsed = parse_main(&dir).expect("parses");
    assert_eq!(names(&parsed.directives), ["a"]);
}

#[test]
fn a_file_included_twice_is_read_once() {
    let dir = conf_dir(&[
        (
            "shoal.conf",
            "server { include common; }\nserver { include common; }\n",
        ),
        ("common", "x;"),
    ]);
    let parsed = parse_main(&dir).expect("parses");
    assert_eq!(parsed.files.len(), 2);
    for server in &parsed.directives {
        assert_eq!(names(server.block.as_ref().expect("block")), ["x"]);
    }
}

#[test]
fn missing_main_file() {
    let dir = conf_dir(&[]);
    let e = parse_main(&dir).expect_err("missing");
    assert_eq!(e.span, None);
    assert_eq!(
        e.to_string(),
        format!(
            "open() \"{}\" failed (2: No such file or directory)",
            path_in(&dir, "shoal.conf").display()
        )
    );
}

#[test]
fn missing_included_file() {
    let dir = conf_dir(&[("shoal.conf", "a;\n\ninclude\n  nope.conf;\n")]);
    let e = parse_main(&dir).expect_err("missing");
    assert_eq!(
        e.to_string(),
        format!(
            "open() \"{}\" failed (2: No such file or directory) in {}:4",
            path_in(&dir, "nope.conf").display(),
            path_in(&dir, "shoal.conf").display()
        )
    );
}

#[test]
fn include_loops() {
    let dir = conf_dir(&[
        ("shoal.conf", "include a.conf;\n"),
        ("a.conf", "x;\ninclude b.conf;\n"),
        ("b.conf", "\n\ninclude a.conf;\n"),
    ]);
    let e = parse_main(&dir).expect_err("loop");
    assert_eq!(
        e.to_string(),
        format!(
            "include loop: \"{}\" includes itself in {}:3",
            path_in(&dir, "a.conf").display(),
            path_in(&dir, "b.conf").display()
        )
    );

    let dir = conf_dir(&[("shoal.conf", "include ./shoal.conf;\n")]);
    let e = parse_main(&dir).expect_err("self loop");
    assert_eq!(
        e.to_string(),
        format!(
            "include loop: \"{}\" includes itself in {}:1",
            path_in(&dir, "./shoal.conf").display(),
            path_in(&dir, "shoal.conf").display()
        )
    );

    let dir = conf_dir(&[("shoal.conf", "include *.conf;\n")]);
    let e = parse_main(&dir).expect_err("glob loop");
    assert!(e.message.starts_with("include loop: "), "{e}");
}

#[test]
fn syntax_error_in_included_file() {
    let dir = conf_dir(&[
        ("shoal.conf", "http {\n include inc.conf;\n}\n"),
        ("inc.conf", "a;\nb \"c\"d;\n"),
    ]);
    let e = parse_main(&dir).expect_err("syntax");
    assert_eq!(
        e.to_string(),
        format!(
            "unexpected \"d\" in {}:2",
            path_in(&dir, "inc.conf").display()
        )
    );
}

#[test]
fn included_file_is_a_block_body() {
    // A `}` in an included file cannot close the includer's block.
    let dir = conf_dir(&[
        ("shoal.conf", "http {\n include inc.conf;\n"),
        ("inc.conf", "a;\n}\n"),
    ]);
    let e = parse_main(&dir).expect_err("stray }");
    assert_eq!(
        e.to_string(),
        format!(
            "unexpected \"}}\" in {}:2",
            path_in(&dir, "inc.conf").display()
        )
    );
    // The end of an included file ends only that file.
    let dir = conf_dir(&[
        ("shoal.conf", "http {\n include inc.conf;\n b;\n}\n"),
        ("inc.conf", "a;"),
    ]);
    let parsed = parse_main(&dir).expect("parses");
    assert_eq!(
        names(parsed.directives[0].block.as_ref().expect("block")),
        ["a", "b"]
    );
    // A block left open in an included file is that file's error.
    let dir = conf_dir(&[
        ("shoal.conf", "include inc.conf;\n}\n"),
        ("inc.conf", "server {\n"),
    ]);
    let e = parse_main(&dir).expect_err("open block");
    assert_eq!(
        e.to_string(),
        format!(
            "unexpected end of file, expecting \"}}\" in {}:2",
            path_in(&dir, "inc.conf").display()
        )
    );
}

#[test]
fn include_from_command_line_and_default_config() {
    let dir = conf_dir(&[("extra.conf", "x;")]);
    let parsed = parse_str("include extra.conf;", None, dir.path()).expect("parses");
    assert_eq!(names(&parsed.directives), ["x"]);
    assert_eq!(parsed.files.len(), 1);
    let e = parse_str("include missing.conf;", None, dir.path()).expect_err("missing");
    assert!(e.to_string().ends_with(" in command line"), "{e}");

    let default = Path::new("/nonexistent/default.conf");
    let parsed = parse_str("include extra.conf;", Some(default), dir.path()).expect("parses");
    assert_eq!(parsed.files[0].path, default);
    assert_eq!(parsed.files[1].path, path_in(&dir, "extra.conf"));
}

#[test]
fn invalid_utf8_args_keep_their_bytes() {
    let dir = conf_dir(&[]);
    let path = path_in(&dir, "shoal.conf");
    fs::write(&path, b"a \xff\xfe b\xc3;\n").expect("write");
    let parsed = parse_main(&dir).expect("parses");
    let d = &parsed.directives[0];
    // Each byte that is not UTF-8 is a private-use character that gives the byte back (as nginx
    // reads bytes: a `map` key written as an address's raw bytes).
    assert_eq!(
        d.values().collect::<Vec<_>>(),
        ["\u{f7ff}\u{f7fe}", "b\u{f7c3}"]
    );
    let mut back = Vec::new();
    shoal_conf::raw_bytes_into(&d.args[1].value, &mut back);
    assert_eq!(back, b"b\xc3");
    // (The text kept for `-T` is still the file with invalid UTF-8 replaced.)
    assert_eq!(parsed.files[0].text, "a \u{fffd}\u{fffd} b\u{fffd};\n");
}

#[test]
fn directory_is_a_read_error() {
    let dir = conf_dir(&[("shoal.conf", "include sub;"), ("sub/x", "")]);
    let e = parse_main(&dir).expect_err("directory");
    assert_eq!(
        e.to_string(),
        format!(
            "pread() \"{}\" failed (21: Is a directory) in {}:1",
            path_in(&dir, "sub").display(),
            path_in(&dir, "shoal.conf").display()
        )
    );
}
