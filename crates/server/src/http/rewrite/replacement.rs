//! A `rewrite`'s replacement: its variables and captures expanded as nginx's script engine
//! does, and a redirect's target unescaped as nginx's.

use crate::variables::{Piece, Template, Var, Vars};

/// Evaluates a replacement as nginx's script engine does. Returns the text and the position
/// of its first literal `?` (where new arguments start; a `?` from a variable's value is part
/// of the URI). Numbered captures after that `?`, or anywhere in a redirect, are escaped when
/// the request's path was (`quoted`).
pub(super) fn expand(
    t: &Template,
    vars: &Vars<'_>,
    redirect: bool,
    quoted: bool,
) -> (String, Option<usize>) {
    let mut out = String::new();
    let mut args_at = None;
    for piece in &t.pieces {
        match piece {
            Piece::Text(text) => {
                if args_at.is_none() {
                    args_at = text.find('?').map(|i| out.len() + i);
                }
                out.push_str(text);
            }
            Piece::Var(v @ Var::Capture(_)) if quoted && (redirect || args_at.is_some()) => {
                let mut value = String::new();
                vars.value(v, &mut value);
                escape_args(value.as_bytes(), &mut out);
            }
            Piece::Var(v) => {
                vars.value(v, &mut out);
            }
        }
    }
    (out, args_at)
}

/// nginx's `NGX_ESCAPE_ARGS`: controls, space, `#`, `%`, `&`, `+`, `;`, `?` and non-ASCII.
fn escape_args(v: &[u8], out: &mut String) {
    for &c in v {
        if c <= b' ' || c >= 0x7f || matches!(c, b'#' | b'%' | b'&' | b'+' | b';' | b'?') {
            out.push_str(&format!("%{c:02X}"));
        } else {
            out.push(c as char);
        }
    }
}

/// nginx's `ngx_unescape_uri(NGX_UNESCAPE_REDIRECT)` on a redirect: up to the first `?`
/// (literal or escaped), `%XX` of a printable character above `%` is decoded, any other stays
/// escaped; a malformed escape loses its `%` (and a bad second digit the pair).
pub(super) fn unescape_redirect(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let hex = |c: u8| (c as char).to_digit(16).map(|d| d as u8);
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        if c == b'?' {
            out.extend_from_slice(&b[i..]);
            break;
        }
        if c != b'%' {
            out.push(c);
            i += 1;
            continue;
        }
        let Some(&c1) = b.get(i + 1) else { break };
        let Some(hi) = hex(c1) else {
            out.push(c1);
            i += 2;
            continue;
        };
        let Some(&c2) = b.get(i + 2) else { break };
        i += 3;
        let Some(lo) = hex(c2) else { continue };
        let ch = (hi << 4) | lo;
        if ch == b'?' {
            out.push(ch);
            out.extend_from_slice(&b[i..]);
            break;
        }
        if ch > b'%' && ch < 0x7f {
            out.push(ch);
        } else {
            out.extend_from_slice(&[b'%', c1, c2]);
        }
    }
    shoal_http::lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::{escape_args, unescape_redirect};

    #[test]
    fn redirect_unescaping_as_nginx() {
        assert_eq!(unescape_redirect("/a%41%20b"), "/aA%20b");
        assert_eq!(unescape_redirect("/a%3Fb%41?c=%41"), "/a?b%41?c=%41");
        assert_eq!(unescape_redirect("/%zz/%2z/%"), "/zz//");
        assert_eq!(unescape_redirect("/%25%26"), "/%25&");
    }

    #[test]
    fn args_escaping_as_nginx() {
        let mut out = String::new();
        escape_args(b"a b&c+d;e?f#g%h=i/j", &mut out);
        assert_eq!(out, "a%20b%26c%2Bd%3Be%3Ff%23g%25h=i/j");
    }
}
