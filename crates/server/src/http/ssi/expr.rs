//! What SSI commands compute: parameter values with variables (nginx's
//! `ngx_http_ssi_evaluate_string`), `if`'s expressions, `echo`'s encodings and the dates of
//! `$date_local` and `$date_gmt` in `config timefmt`'s format.

/// What a `$name` in a value is (`None`: not found, which is empty there).
pub type Lookup<'a> = dyn FnMut(&[u8]) -> Option<Vec<u8>> + 'a;

/// A value with its variables replaced: `$name`, `${name}`; a backslash before `\`, a
/// quote or `$` is dropped (before `/` too in a regex), before anything else kept. `Err`:
/// the line nginx logs.
pub fn evaluate(text: &[u8], regex: bool, lookup: &mut Lookup<'_>) -> Result<Vec<u8>, String> {
    let mut out = Vec::with_capacity(text.len());
    let mut i = 0;
    while i < text.len() {
        if text[i] == b'$' {
            i += 1;
            let bracket = text.get(i) == Some(&b'{');
            if bracket {
                i += 1;
            }
            let start = i;
            while i < text.len() && is_name(text[i]) {
                i += 1;
            }
            let name = &text[start..i];
            if bracket {
                if text.get(i) != Some(&b'}') {
                    return Err(format!(
                        "the closing bracket in \"{}\" variable is missing",
                        String::from_utf8_lossy(name)
                    ));
                }
                i += 1;
            }
            if name.is_empty() {
                return Err(format!(
                    "invalid variable name in \"{}\"",
                    String::from_utf8_lossy(text)
                ));
            }
            if let Some(v) = lookup(name) {
                out.extend_from_slice(&v);
            }
            continue;
        }
        if text[i] == b'\\' && i + 1 < text.len() {
            let next = text[i + 1];
            if !(matches!(next, b'\\' | b'\'' | b'"' | b'$') || (regex && next == b'/')) {
                out.push(b'\\');
            }
            out.push(next);
            i += 2;
            continue;
        }
        out.push(text[i]);
        i += 1;
    }
    Ok(out)
}

fn is_name(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'_'
}

/// An `if`'s expression, as nginx's `ngx_http_ssi_if` reads it: `LEFT`, `LEFT = RIGHT`,
/// `LEFT != RIGHT`, a `/regex/` on the right.
pub struct Expr<'a> {
    pub left: &'a [u8],
    /// `=` or `!=` and what is compared with.
    pub right: Option<(bool, Right<'a>)>,
}

pub enum Right<'a> {
    Text(&'a [u8]),
    Regex(&'a [u8]),
}

/// Splits an expression; `None`: nginx's "invalid expression".
pub fn split(expr: &[u8]) -> Option<Expr<'_>> {
    let mut p = 0;
    while p < expr.len()
        && (expr[p].is_ascii_alphanumeric() || matches!(expr[p], b'$' | b'{' | b'}' | b'_'))
    {
        p += 1;
    }
    let left = &expr[..p];
    while p < expr.len() && expr[p] == b' ' {
        p += 1;
    }
    if p == expr.len() {
        return Some(Expr { left, right: None });
    }
    let negative = if expr[p] == b'=' {
        p += 1;
        false
    } else if expr[p..].starts_with(b"!=") {
        p += 2;
        true
    } else {
        return None;
    };
    while p < expr.len() && expr[p] == b' ' {
        p += 1;
    }
    let rest = &expr[p..];
    let right = if rest.len() > 1 && rest[0] == b'/' {
        if rest[rest.len() - 1] != b'/' {
            return None;
        }
        Right::Regex(&rest[1..rest.len() - 1])
    } else {
        Right::Text(rest)
    };
    Some(Expr {
        left,
        right: Some((negative, right)),
    })
}

/// `echo`'s `encoding`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Encoding {
    None,
    Url,
    Entity,
}

impl Encoding {
    pub fn parse(v: &[u8]) -> Option<Encoding> {
        match v {
            b"none" => Some(Encoding::None),
            b"url" => Some(Encoding::Url),
            b"entity" => Some(Encoding::Entity),
            _ => None,
        }
    }

    /// Appends `v` encoded.
    pub fn write(self, v: &[u8], out: &mut Vec<u8>) {
        match self {
            Encoding::None => out.extend_from_slice(v),
            Encoding::Url => {
                const HEX: &[u8; 16] = b"0123456789ABCDEF";
                for &c in v {
                    // nginx's `NGX_ESCAPE_HTML` table.
                    if c <= 0x20 || c >= 0x7f || b"\"#%'<>\\^`{|}".contains(&c) {
                        out.extend_from_slice(&[
                            b'%',
                            HEX[(c >> 4) as usize],
                            HEX[(c & 15) as usize],
                        ]);
                    } else {
                        out.push(c);
                    }
                }
            }
            Encoding::Entity => {
                for &c in v {
                    match c {
                        b'<' => out.extend_from_slice(b"&lt;"),
                        b'>' => out.extend_from_slice(b"&gt;"),
                        b'&' => out.extend_from_slice(b"&amp;"),
                        b'"' => out.extend_from_slice(b"&quot;"),
                        _ => out.push(c),
                    }
                }
            }
        }
    }
}

/// `$date_local` (`gmt` false) or `$date_gmt` now, in `timefmt` (strftime's, as nginx
/// calls it; `%s` alone is the seconds).
pub fn date(timefmt: &[u8], gmt: bool) -> Option<Vec<u8>> {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    if timefmt == b"%s" {
        return Some(secs.to_string().into_bytes());
    }
    let tm = if gmt {
        let now = secs as libc::time_t;
        // SAFETY: an all-zero tm is valid for gmtime_r to overwrite.
        let mut tm: libc::tm = unsafe { std::mem::zeroed() };
        // SAFETY: valid pointers for the call's duration.
        unsafe { libc::gmtime_r(&now, &mut tm) };
        tm
    } else {
        crate::variables::local_tm(secs).0
    };
    let fmt = std::ffi::CString::new(timefmt).ok()?;
    // nginx's NGX_HTTP_SSI_DATE_LEN.
    let mut buf = vec![0u8; 2048];
    // SAFETY: the buffer's length is passed; the format is NUL-terminated; tm is filled.
    let n = unsafe { libc::strftime(buf.as_mut_ptr().cast(), buf.len(), fmt.as_ptr(), &tm) };
    (n > 0).then(|| {
        buf.truncate(n);
        buf
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn eval(t: &str) -> Result<String, String> {
        let mut lookup = |n: &[u8]| match n {
            b"uri" => Some(b"/a".to_vec()),
            _ => None,
        };
        evaluate(t.as_bytes(), false, &mut lookup).map(|v| String::from_utf8(v).unwrap())
    }

    #[test]
    fn values_as_nginx_evaluates_them() {
        assert_eq!(eval(r#"${uri}x$uri-"#).unwrap(), "/ax/a-");
        assert_eq!(eval(r#"\"q\\x\$x a\b$none"#).unwrap(), r#""q\x$x a\b"#);
        assert_eq!(eval("x$").unwrap_err(), "invalid variable name in \"x$\"");
        assert_eq!(
            eval("${x").unwrap_err(),
            "the closing bracket in \"x\" variable is missing"
        );
    }

    #[test]
    fn expressions_split_as_nginx_reads_them() {
        let e = split(b"$x != a b").unwrap();
        assert_eq!(e.left, b"$x");
        assert!(matches!(e.right, Some((true, Right::Text(b"a b")))));
        assert!(matches!(
            split(b"$x=/(a)/").unwrap().right,
            Some((false, Right::Regex(b"(a)")))
        ));
        assert!(split(b"$x ~ a").is_none());
        assert!(split(br"\$x = 1").is_none());
        assert!(split(b"$x = /a").is_none());
        assert!(split(b"").unwrap().right.is_none());
    }

    #[test]
    fn encodings() {
        let mut out = Vec::new();
        Encoding::Url.write("<a&b \"c\" é>".as_bytes(), &mut out);
        assert_eq!(out, b"%3Ca&b%20%22c%22%20%C3%A9%3E");
        out.clear();
        Encoding::Entity.write(b"<a&b \"c\">", &mut out);
        assert_eq!(out, b"&lt;a&amp;b &quot;c&quot;&gt;");
    }
}
