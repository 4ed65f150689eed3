//! Property tests: any input is an answer (never a panic), and a printed tree reads back as itself.

use proptest::prelude::*;
use shoal_conf::{parse_str, Arg, Directive};
use std::fmt::Write;
use std::path::Path;

fn parse(text: &str) -> Result<Vec<Directive>, shoal_conf::Error> {
    parse_str(text, Some(Path::new("/p/shoal.conf")), Path::new("/p")).map(|p| p.directives)
}

/// Whether `v` reads back unchanged when written bare (with backslashes doubled).
fn can_be_bare(v: &str) -> bool {
    let bytes = v.as_bytes();
    let Some(&first) = bytes.first() else {
        return false;
    };
    if matches!(first, b'"' | b'\'' | b'#' | b';' | b'{' | b'}') {
        return false;
    }
    bytes.iter().enumerate().all(|(i, &b)| match b {
        b' ' | b'\t' | b'\r' | b'\n' | b';' => false,
        // `{` ends a word unless it follows `$` (as in `${var}`).
        b'{' => i > 0 && bytes[i - 1] == b'$',
        _ => true,
    })
}

fn write_arg(out: &mut String, arg: &Arg) {
    if arg.quoted {
        out.push('"');
        for c in arg.value.chars() {
            if c == '"' || c == '\\' {
                out.push('\\');
            }
            out.push(c);
        }
        out.push('"');
    } else {
        out.push_str(&arg.value.replace('\\', "\\\\"));
    }
}

fn write_tree(out: &mut String, ds: &[Directive], indent: usize) {
    for d in ds {
        let _ = write!(out, "{:indent$}{}", "", d.name);
        for a in &d.args {
            out.push(' ');
            write_arg(out, a);
        }
        match &d.block {
            None => out.push_str(";\n"),
            Some(body) => {
                out.push_str(" {\n");
                write_tree(out, body, indent + 2);
                let _ = writeln!(out, "{:indent$}}}", "");
            }
        }
    }
}

/// The tree without spans (which the printer does not control).
fn strip(ds: &mut [Directive]) {
    for d in ds {
        d.span.line = 0;
        d.span.file = None;
        if let Some(body) = &mut d.block {
            strip(body);
        }
    }
}

fn arb_value() -> impl Strategy<Value = String> {
    prop_oneof![
        "[a-z0-9_./:=~^*()$-]{1,8}",
        "[ -~\t\r\n\\\\]{0,10}",
        "\\$\\{[a-z]{1,5}\\}[a-z]{0,3}",
        any::<String>(),
    ]
}

fn arb_arg() -> impl Strategy<Value = Arg> {
    (arb_value(), any::<bool>()).prop_map(|(value, quoted)| {
        let quoted = quoted || !can_be_bare(&value);
        Arg { value, quoted }
    })
}

fn arb_name() -> impl Strategy<Value = String> {
    "[a-z_][a-z0-9_]{0,10}".prop_filter("include is resolved, not kept", |n| n != "include")
}

fn arb_directive() -> impl Strategy<Value = Directive> {
    let span = shoal_conf::Span {
        file: None,
        line: 0,
    };
    let leaf_span = span.clone();
    let leaf =
        (arb_name(), prop::collection::vec(arb_arg(), 0..4)).prop_map(move |(name, args)| {
            Directive {
                name,
                args,
                block: None,
                span: leaf_span.clone(),
            }
        });
    leaf.prop_recursive(4, 48, 6, move |inner| {
        (
            arb_name(),
            prop::collection::vec(arb_arg(), 0..3),
            prop::collection::vec(inner, 0..6),
        )
            .prop_map({
                let span = span.clone();
                move |(name, args, body)| Directive {
                    name,
                    args,
                    block: Some(body),
                    span: span.clone(),
                }
            })
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn arbitrary_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..512)) {
        let text = String::from_utf8_lossy(&bytes);
        prop_assume!(!text.contains("include"));
        let _ = parse(&text);
        let _ = parse_str(&text, None, Path::new("/p"));
    }

    #[test]
    fn syntax_soup_never_panics(
        parts in prop::collection::vec(
            prop::sample::select(vec![
                "a", " ", "\n", ";", "{", "}", "\"", "'", "\\", "$", "#", ")", "x}", "${", "\t",
            ]),
            0..64,
        )
    ) {
        let text: String = parts.concat();
        let _ = parse(&text);
        let _ = parse_str(&text, None, Path::new("/p"));
    }

    #[test]
    fn printed_tree_reads_back(tree in prop::collection::vec(arb_directive(), 0..6)) {
        let mut text = String::new();
        write_tree(&mut text, &tree, 0);
        let mut back = parse(&text).map_err(|e| TestCaseError::fail(format!("{e}\n{text}")))?;
        strip(&mut back);
        prop_assert_eq!(back, tree, "{}", text);
    }
}
