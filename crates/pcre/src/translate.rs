//! The parsed pattern written in the `regex` crate's syntax, for patterns that engine runs with
//! PCRE2's results: no lookaround, backreference, atomic group, possessive quantifier or `\K`,
//! and no repeated group that can match empty and holds a capture (where a backtracker's
//! captures and the `regex` crate's may differ).
//!
//! Every byte and class is written out as bytes (`\xHH`) under `(?-u)`, so case folding, `.`,
//! `\w` and friends mean exactly what the parser decided. What the `regex` crate cannot say the
//! same way (`$` before a final newline, multiline `^` after one) is written as the nearest
//! assertion, and the caller sends a subject ending in a newline to the backtracker instead.

use std::fmt::Write;

use crate::ast::{ByteSet, Greed, Look, Node};

/// The `regex` crate's spelling of `node`, or `None` when only the backtracker runs it.
pub fn to_regex_syntax(node: &Node) -> Option<String> {
    if !linear(node) {
        return None;
    }
    let mut out = String::from("(?s-u)");
    write_node(node, &mut out);
    Some(out)
}

/// Whether a subject ending with `\n` must go to the backtracker: the pattern has `$`, `\Z`
/// or a multiline `^`, whose meaning at a final newline differs between the engines.
pub fn final_newline_differs(node: &Node) -> bool {
    let mut differs = false;
    node.walk(&mut |n| {
        if matches!(n, Node::Look(Look::EndOrFinalNewline | Look::StartLine)) {
            differs = true;
        }
    });
    differs
}

fn linear(node: &Node) -> bool {
    let mut ok = true;
    node.walk(&mut |n| match n {
        Node::Atomic(_) | Node::Around { .. } | Node::Backref { .. } | Node::KeepOut => ok = false,
        Node::Repeat {
            greed, body, max, ..
        } => {
            if *greed == Greed::Possessive {
                ok = false;
            }
            // An unbounded repetition whose body can match empty and holds a group: PCRE2
            // stops at an empty iteration, keeping its captures; do not rely on the
            // `regex` crate doing the same.
            if (max.is_none() || max.is_some_and(|m| m > 1)) && body.min_len() == 0 {
                let mut capture = false;
                body.walk(&mut |b| capture |= matches!(b, Node::Capture(..)));
                if capture {
                    ok = false;
                }
            }
        }
        _ => {}
    });
    ok
}

fn write_node(node: &Node, out: &mut String) {
    match node {
        Node::Empty => out.push_str("(?:)"),
        Node::Byte(b) => write_byte(*b, out),
        Node::Class(set) => write_class(set, out),
        Node::Look(l) => out.push_str(match l {
            Look::Start => r"\A",
            Look::StartLine => r"(?m:^)",
            Look::End | Look::EndOrFinalNewline => r"\z",
            Look::EndLine => r"(?m:$)",
            Look::WordBoundary => r"\b",
            Look::NotWordBoundary => r"\B",
        }),
        Node::Concat(v) => v.iter().for_each(|x| write_node(x, out)),
        Node::Alt(v) => {
            out.push_str("(?:");
            for (i, x) in v.iter().enumerate() {
                if i > 0 {
                    out.push('|');
                }
                write_node(x, out);
            }
            out.push(')');
        }
        Node::Capture(_, b) => {
            out.push('(');
            write_node(b, out);
            out.push(')');
        }
        Node::Group(b) => {
            out.push_str("(?:");
            write_node(b, out);
            out.push(')');
        }
        Node::Repeat {
            body,
            min,
            max,
            greed,
        } => {
            out.push_str("(?:");
            write_node(body, out);
            out.push(')');
            match max {
                Some(max) => write!(out, "{{{min},{max}}}"),
                None => write!(out, "{{{min},}}"),
            }
            .expect("writing to a String");
            if *greed == Greed::Lazy {
                out.push('?');
            }
        }
        Node::Fail => out.push_str(r"[^\x00-\xFF]"),
        Node::Atomic(_) | Node::Around { .. } | Node::Backref { .. } | Node::KeepOut => {
            unreachable!("linear() keeps these out")
        }
    }
}

fn write_byte(b: u8, out: &mut String) {
    write!(out, "\\x{b:02X}").expect("writing to a String");
}

fn write_class(set: &ByteSet, out: &mut String) {
    if set.is_empty() {
        out.push_str(r"[^\x00-\xFF]");
        return;
    }
    if let Some(b) = set.single() {
        write_byte(b, out);
        return;
    }
    out.push('[');
    for (lo, hi) in set.ranges() {
        write_byte(lo, out);
        if hi != lo {
            out.push('-');
            write_byte(hi, out);
        }
    }
    out.push(']');
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parse::parse;

    fn syntax(p: &str) -> Option<String> {
        to_regex_syntax(&parse(p, false).expect("parses").node)
    }

    #[test]
    fn typical_locations_are_linear() {
        assert_eq!(
            syntax(r"\.php$").as_deref(),
            Some(r"(?s-u)\x2E\x70\x68\x70\z")
        );
        assert!(syntax(r"^/api/").is_some());
        assert!(syntax(r"\.(jpg|jpeg|png|gif|css|js)$").is_some());
        assert!(syntax(r"^/(?!private)").is_none());
        assert!(syntax(r"(a)\1").is_none());
        assert!(syntax(r"(a|)*").is_none());
        assert!(syntax(r"(?:a|)*").is_some());
    }

    #[test]
    fn newline_sensitive_patterns() {
        let p = |s: &str| final_newline_differs(&parse(s, false).expect("parses").node);
        assert!(p("a$"));
        assert!(p(r"a\Z"));
        assert!(p("(?m)^a"));
        assert!(!p(r"a\z"));
        assert!(!p("(?m)a$"));
    }
}
