use super::values::{arg, header_matches, push_decimal, with_local_time};
use super::*;

#[test]
fn compile() {
    let t = Template::compile("$remote_addr - ${status}x $http_user_agent").unwrap();
    assert_eq!(
        t.pieces,
        vec![
            Piece::Var(Var::RemoteAddr),
            Piece::Text(" - ".into()),
            Piece::Var(Var::Status),
            Piece::Text("x ".into()),
            Piece::Var(Var::Http("user_agent".into())),
        ]
    );
    begin_config();
    assert_eq!(
        Template::compile("$nope").unwrap().pieces,
        vec![Piece::Var(Var::User("nope".into()))]
    );
    assert_eq!(end_config().unwrap_err(), "unknown \"nope\" variable");
    begin_config();
    declare("later");
    Template::compile("$later").unwrap();
    assert!(end_config().is_ok());
    assert_eq!(
        Template::compile("a$").unwrap_err(),
        "invalid variable name in \"a$\""
    );
    assert!(Template::compile("${uri").is_err());
    assert_eq!(
        Template::compile("$1x").unwrap().pieces[0],
        Piece::Var(Var::Capture(1))
    );
    assert!(Template::compile("plain").unwrap().is_static());
}

#[test]
fn builtin_names_cannot_be_defined() {
    assert!(is_builtin("uri"));
    assert!(is_builtin("query_string"));
    assert!(is_builtin("upstream_addr"));
    assert!(!is_builtin("args"), "nginx lets map take $args over");
    assert!(!is_builtin("http_foo"));
    assert!(!is_builtin("upstream_http_foo"));
    assert!(!is_builtin("disk"));
}

#[test]
fn escapes() {
    let mut out = Vec::new();
    escape_into(b"a\"b\\c\x01\xff", Escape::Default, &mut out);
    assert_eq!(out, b"a\\x22b\\x5Cc\\x01\\xFF");
    out.clear();
    escape_into(b"\"clean run\" ends", Escape::Default, &mut out);
    assert_eq!(out, b"\\x22clean run\\x22 ends");
    out.clear();
    escape_into(b"a\"\n\x01", Escape::Json, &mut out);
    assert_eq!(out, b"a\\\"\\n\\u0001");
}

#[test]
fn numbers_and_times_as_nginx_writes_them() {
    let mut out = String::new();
    for n in [0, 7, 10, 612, u64::MAX] {
        out.clear();
        push_decimal(&mut out, n);
        assert_eq!(out, n.to_string());
    }
    // The same second's text, again from the cache; its shape is nginx's.
    let a = with_local_time(|t| (t.secs, t.local.clone(), t.iso8601.clone()));
    let b = with_local_time(|t| (t.secs, t.local.clone(), t.iso8601.clone()));
    assert!(a == b || b.0 == a.0 + 1, "{a:?} {b:?}");
    let (local, iso) = (a.1.as_bytes(), a.2.as_bytes());
    assert_eq!(
        (local.len(), local[2], local[6], local[11], local[20]),
        (26, b'/', b'/', b':', b' ')
    );
    assert_eq!(
        (iso.len(), iso[4], iso[10], iso[22]),
        (25, b'-', b'T', b':')
    );
}

#[test]
fn args_and_headers() {
    assert_eq!(arg(b"a=1&B=2&c", "b"), Some(&b"2"[..]));
    assert_eq!(arg(b"a=1&c", "c"), Some(&b""[..]));
    assert_eq!(arg(b"a=1", "z"), None);
    assert!(header_matches(b"User-Agent", "user_agent"));
    assert!(!header_matches(b"User-Agent", "user_agen"));
}
