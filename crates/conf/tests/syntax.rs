//! The syntax rules and error messages of nginx's configuration language, checked through the
//! public API on in-memory text (a named file, so errors print `FILE:LINE`).

use shoal_conf::{parse_str, Arg, Directive, Error, MAX_DEPTH};
use std::path::Path;

const FILE: &str = "/etc/shoal/shoal.conf";

fn parse(text: &str) -> Vec<Directive> {
    parse_str(text, Some(Path::new(FILE)), Path::new("/etc/shoal"))
        .unwrap_or_else(|e| panic!("{text:?}: {e}"))
        .directives
}

/// The error as the user sees it (after `shoal: [emerg] `).
fn error(text: &str) -> String {
    let e: Error =
        parse_str(text, Some(Path::new(FILE)), Path::new("/etc/shoal")).expect_err("should fail");
    e.to_string()
}

fn values(d: &Directive) -> Vec<&str> {
    d.values().collect()
}

#[test]
fn simple_and_block_directives() {
    let d = parse("worker_processes 2;\nevents {\n  worker_connections 1024;\n}\nhttp { }\n");
    assert_eq!(d.len(), 3);
    assert_eq!(d[0].name, "worker_processes");
    assert_eq!(values(&d[0]), ["2"]);
    assert!(d[0].block.is_none());
    let events = d[1].block.as_ref().expect("block");
    assert_eq!(events[0].name, "worker_connections");
    assert_eq!(events[0].span.line, 3);
    assert_eq!(d[2].block.as_deref(), Some(&[][..]));
    assert_eq!(d[2].span.to_string(), format!("{FILE}:5"));
}

#[test]
fn line_is_where_the_directive_ends() {
    let d = parse("\n\nlog_format main\n  '$remote_addr'\n  '$status';\nserver\n\n{\n}\n");
    assert_eq!(d[0].span.line, 5);
    assert_eq!(d[1].span.line, 8);
}

#[test]
fn comments_and_hash_inside_words() {
    let d = parse("# comment ; {\nset $a b#c; # trailing }\n");
    assert_eq!(d.len(), 1);
    assert_eq!(values(&d[0]), ["$a", "b#c"]);
}

#[test]
fn brace_after_word_belongs_to_it() {
    let d = parse("a foo};");
    assert_eq!(values(&d[0]), ["foo}"]);
    let d = parse("location /{}");
    assert_eq!(values(&d[0]), ["/"]);
    assert!(d[0].block.is_some());
}

#[test]
fn quotes() {
    let d = parse("a \"x y\" 'p;q' \"\" \"two\nlines\";\n\"b\"{}");
    assert_eq!(
        d[0].args,
        vec![
            Arg {
                value: "x y".into(),
                quoted: true
            },
            Arg {
                value: "p;q".into(),
                quoted: true
            },
            Arg {
                value: "".into(),
                quoted: true
            },
            Arg {
                value: "two\nlines".into(),
                quoted: true
            },
        ]
    );
    assert_eq!(d[0].span.line, 2);
    assert_eq!(d[1].name, "b");
    assert_eq!(d[1].span.line, 3);
    // A quoted name is still the name.
    let d = parse("\"worker_processes\" 1;");
    assert_eq!(d[0].name, "worker_processes");
    // `)` may follow a closing quote and becomes a word of its own.
    let d = parse("if ($http_x = \"y\") { return 403; }");
    assert_eq!(values(&d[0]), ["($http_x", "=", "y", ")"]);
}

#[test]
fn escapes() {
    let d = parse(r#"a "q\"q" 'a\'b' \\ x\ty \r\n "\d+" ~ \.php$ \;b \{;"#);
    assert_eq!(
        values(&d[0]),
        ["q\"q", "a'b", "\\", "x\ty", "\r\n", "\\d+", "~", "\\.php$", "\\;b", "\\{"]
    );
    assert!(!d[0].args[2].quoted);
}

#[test]
fn variables_stay_verbatim() {
    let d = parse("return 200 ${host}x$uri;\nset $a \"${b}\";");
    assert_eq!(values(&d[0]), ["200", "${host}x$uri"]);
    assert_eq!(values(&d[1]), ["$a", "${b}"]);
}

#[test]
fn unexpected_characters() {
    assert_eq!(error(";"), format!("unexpected \";\" in {FILE}:1"));
    assert_eq!(error("\n{"), format!("unexpected \"{{\" in {FILE}:2"));
    assert_eq!(error("a b\n\n}"), format!("unexpected \"}}\" in {FILE}:3"));
    assert_eq!(error("a;\n}"), format!("unexpected \"}}\" in {FILE}:2"));
    assert_eq!(error("a \"b\"c;"), format!("unexpected \"c\" in {FILE}:1"));
    assert_eq!(
        error("a 'b'\"c\";"),
        format!("unexpected \"\"\" in {FILE}:1")
    );
}

#[test]
fn unexpected_end_of_file() {
    let in_directive = "unexpected end of file, expecting \";\" or \"}\"";
    assert_eq!(error("a b"), format!("{in_directive} in {FILE}:1"));
    assert_eq!(error("a b\n\n"), format!("{in_directive} in {FILE}:3"));
    assert_eq!(error("a \"b;\n}\n"), format!("{in_directive} in {FILE}:3"));
    assert_eq!(error("a 'b"), format!("{in_directive} in {FILE}:1"));
    let in_block = "unexpected end of file, expecting \"}\"";
    assert_eq!(error("http {\n a;\n"), format!("{in_block} in {FILE}:3"));
    assert_eq!(error("a { b { }"), format!("{in_block} in {FILE}:1"));
}

#[test]
fn too_long_parameter() {
    let text = format!("a \"\n{}", "x".repeat(5000));
    assert_eq!(
        error(&text),
        format!("too long parameter, probably missing terminating \"\"\" character in {FILE}:1")
    );
}

#[test]
fn include_arguments() {
    assert_eq!(
        error("a;\ninclude;"),
        format!("invalid number of arguments in \"include\" directive in {FILE}:2")
    );
    assert_eq!(
        error("include a\n b;"),
        format!("invalid number of arguments in \"include\" directive in {FILE}:2")
    );
    assert_eq!(
        error("include a {}"),
        format!("directive \"include\" is not terminated by \";\" in {FILE}:1")
    );
}

#[test]
fn nesting_is_capped() {
    let ok = "a{".repeat(MAX_DEPTH) + &"}".repeat(MAX_DEPTH);
    let mut d = parse(&ok);
    for _ in 1..MAX_DEPTH {
        d = d.pop().and_then(|d| d.block).expect("nested block");
    }
    let deep = "a{".repeat(MAX_DEPTH + 1);
    assert_eq!(
        error(&deep),
        format!("too many nested blocks (the limit is {MAX_DEPTH}) in {FILE}:1")
    );
    // Far too deep must be an error, not a stack overflow.
    assert!(error(&"a{".repeat(1_000_000)).starts_with("too many nested blocks"));
}

#[test]
fn command_line() {
    let prefix = Path::new("/etc/shoal");
    let parsed = parse_str("daemon off; worker_processes 1;", None, prefix).expect("parses");
    assert_eq!(parsed.directives.len(), 2);
    assert!(parsed.files.is_empty());
    assert_eq!(parsed.directives[0].span.file, None);
    assert_eq!(parsed.directives[0].span.to_string(), "command line");
    let e = parse_str("daemon off", None, prefix).expect_err("no ;");
    assert_eq!(
        e.to_string(),
        "unexpected end of parameter, expecting \";\" in command line"
    );
    let e = parse_str("events { }", None, prefix).expect_err("block");
    assert_eq!(
        e.to_string(),
        "block directives are not supported in -g option in command line"
    );
    let e = parse_str("a; }", None, prefix).expect_err("stray }");
    assert_eq!(e.to_string(), "unexpected \"}\" in command line");
}

#[test]
fn named_text_is_recorded() {
    let parsed = parse_str("a;", Some(Path::new(FILE)), Path::new("/")).expect("parses");
    assert_eq!(parsed.files.len(), 1);
    assert_eq!(parsed.files[0].path, Path::new(FILE));
    assert_eq!(parsed.files[0].text, "a;");
}
