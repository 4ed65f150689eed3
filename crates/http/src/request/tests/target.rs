//! Targets and hosts: Host rules, absolute-form grammar, path normalization.

use super::*;

#[test]
fn host_rules() {
    assert_eq!(status(b"GET / HTTP/1.1\r\n\r\n"), 400);
    assert_eq!(status(b"GET / HTTP/1.1\r\nHost: a\r\nHost: a\r\n\r\n"), 400);
    assert_eq!(status(b"GET / HTTP/1.1\r\nHost: a\r\nhost: b\r\n\r\n"), 400);
    assert_eq!(status(b"GET / HTTP/1.1\r\nHost:\r\n\r\n"), 400);
    assert_eq!(status(b"GET / HTTP/1.1\r\nHost: a..b\r\n\r\n"), 400);
    assert_eq!(status(b"GET / HTTP/1.1\r\nHost: a/b\r\n\r\n"), 400);
    assert_eq!(status(b"GET / HTTP/1.0\r\nHost: ..\r\n\r\n"), 400);
    let r = parse(b"GET / HTTP/1.0\r\n\r\n").unwrap();
    assert_eq!(r.host(), None);
    let r = parse(b"GET / HTTP/1.1\r\nHost: WWW.Example.org.:443\r\n\r\n").unwrap();
    assert_eq!(r.host().unwrap(), b"www.example.org");
}

#[test]
fn absolute_form_target() {
    let r = parse(b"GET http://Other.Example:81/a/../b?q HTTP/1.1\r\nHost: a\r\n\r\n").unwrap();
    assert_eq!(r.host().unwrap(), b"other.example");
    assert_eq!(r.path(), b"/b");
    assert_eq!(r.query(), Some(&b"q"[..]));
    let r = parse(b"GET http://h HTTP/1.1\r\nHost: a\r\n\r\n").unwrap();
    assert_eq!(r.path(), b"/");
    // Host is still required on 1.1, as nginx.
    assert_eq!(status(b"GET http://h/ HTTP/1.1\r\n\r\n"), 400);
    assert_eq!(status(b"GET http://u@h/ HTTP/1.1\r\nHost: a\r\n\r\n"), 400);
    assert_eq!(status(b"GET http://h:x/ HTTP/1.1\r\nHost: a\r\n\r\n"), 400);
    assert_eq!(status(b"GET * HTTP/1.1\r\nHost: a\r\n\r\n"), 400);
    assert_eq!(status(b"GET http://h/ HTTP/1.1\r\nHost: a..b\r\n\r\n"), 400);
    assert_eq!(status(b"GET a/b HTTP/1.1\r\nHost: a\r\n\r\n"), 400);
    let r = parse(b"GET http://[::1]:8080/x HTTP/1.1\r\nHost: a\r\n\r\n").unwrap();
    assert_eq!(r.host().unwrap(), b"[::1]");
}

/// Absolute-form targets as Debian's nginx 1.22.1 answered them: `$request_uri`, the host, or
/// the refusal. The scheme and `[...]` grammars are nginx's (found by the differential fuzzer).
#[test]
fn absolute_form_grammar_is_nginx() {
    for (target, expect) in [
        (&b"http://a?x"[..], Some((&b"?x"[..], &b"a"[..]))),
        (b"HTTP://A/", Some((b"/", b"a"))),
        (b"h2://a/", Some((b"/", b"a"))),
        (b"a+b-c.d://a/", Some((b"/", b"a"))),
        (b"http://[v1.x]/", Some((b"/", b"[v1.x]"))),
        (
            b"http://[a_b~!$&'()*+,;=]/",
            Some((b"/", b"[a_b~!$&'()*+,;=]")),
        ),
        (b"http://[::1]:8/", Some((b"/", b"[::1]"))),
        (b"http://[]/", Some((b"/", b"[]"))),
        (b"http://-a/", Some((b"/", b"-a"))),
        (b"http://.a/", Some((b"/", b".a"))),
        (b"http://a?", Some((b"?", b"a"))),
        (b"http://a?#", Some((b"?#", b"a"))),
        (b"http://a:80?x", Some((b"?x", b"a"))),
        (b"http://a:/x", Some((b"/x", b"a"))),
        (b"http://a", Some((b"/", b"a"))),
        (b"http://a/x#f", Some((b"/x#f", b"a"))),
        (b"http://a#x", None),
        (b"2h://a/", None),
        (b"h_t://a/", None),
        (b"http://[::1]x/", None),
        (b"http://a]/", None),
        (b"http://a[/", None),
        (b"http://[::1/", None),
        (b"http://a..b/", None),
        (b"http://a:b/", None),
        (b"http://a:1:2/", None),
        (b"http://u@a/", None),
        (b"http:///x", None),
        (b"http:/a/x", None),
        (b"http://a%41/", None),
        (b"http://a_b/", None),
    ] {
        let mut req = b"GET ".to_vec();
        req.extend_from_slice(target);
        req.extend_from_slice(b" HTTP/1.1\r\nHost: h\r\n\r\n");
        let got = parse_request(&req, &Limits::default());
        let got = got.as_ref().map(|r| {
            let r = r.as_ref().expect("a whole head");
            (r.uri(), r.host().expect("a host"))
        });
        match expect {
            Some(want) => assert_eq!(got.ok(), Some(want), "{}", crate::lossy(target)),
            None => assert_eq!(
                got.map_err(|e| e.status()).err(),
                Some(400),
                "{}",
                crate::lossy(target)
            ),
        }
    }
    // The line is refused as soon as its host cannot be one, and not before.
    let partial = |b: &[u8]| HeadParser::new(Limits::default()).parse(&mut BytesMut::from(b));
    assert!(partial(b"GET http://a#").is_err());
    assert!(partial(b"GET 2h:").is_err());
    assert!(partial(b"GET http://[a]b").is_err());
    assert!(matches!(partial(b"GET h2+x.y://[v1.a_b~"), Ok(None)));
    assert!(matches!(partial(b"GET http://[::1]:80"), Ok(None)));
    assert!(matches!(partial(b"GET http://a:"), Ok(None)));
}

/// nginx ends an authority at a space, `/` or `?`: `GET http://a` at the line's end is refused
/// (with a status line: nginx had not read it as 0.9 yet), `GET http://a ` is HTTP/0.9.
#[test]
fn a_bare_authority_cannot_end_a_simple_request() {
    for line in [
        &b"GET http://a\r\n"[..],
        b"GET http://a:80\n",
        b"GET http://[::1]\r\n",
    ] {
        assert_eq!(status(line), 400, "{}", crate::lossy(line));
        assert!(!is_simple_request(line), "{}", crate::lossy(line));
    }
    for line in [
        &b"GET http://a \r\n"[..],
        b"GET http://a:80 \n",
        b"GET http://a/\r\n",
    ] {
        let r = parse(line).unwrap();
        assert_eq!((r.version(), r.uri()), (Version::Http09, &b"/"[..]));
        assert!(is_simple_request(line));
    }
    let r = parse(b"GET http://a?x\r\n").unwrap();
    assert_eq!((r.version(), r.uri()), (Version::Http09, &b"?x"[..]));
    // A refused 0.9 request is still answered the 0.9 way.
    assert!(is_simple_request(b"HEAD http://a/\r\n"));
    assert!(is_simple_request(b"CONNECT /a\xe9\r\n"));
    // A control byte in the target is refused before the line's end: with a status line
    // (found by the differential fuzzer).
    for line in [
        &b"CONNECT /a\tb\r\n"[..],
        b"GET /a\x01b\r\n",
        b"GET /a\x7f\n",
        b"GET /\x00\n",
    ] {
        assert!(!is_simple_request(line), "{}", crate::lossy(line));
        assert_eq!(status(line), 400);
    }
}

#[test]
fn path_normalization_in_requests() {
    let p = |req: &[u8]| {
        parse(req)
            .map(|r| r.path().to_vec())
            .map_err(|e| e.status())
    };
    assert_eq!(p(b"GET /a/./b/../c HTTP/1.0\r\n\r\n"), Ok(b"/a/c".to_vec()));
    assert_eq!(p(b"GET /%2e%2e/x HTTP/1.0\r\n\r\n"), Err(400));
    assert_eq!(p(b"GET /../x HTTP/1.0\r\n\r\n"), Err(400));
    assert_eq!(p(b"GET /a%00b HTTP/1.0\r\n\r\n"), Err(400));
    assert_eq!(p(b"GET /a%zz HTTP/1.0\r\n\r\n"), Err(400));
    assert_eq!(p(b"GET //a//b HTTP/1.0\r\n\r\n"), Ok(b"/a/b".to_vec()));
    assert_eq!(p(b"GET /a?x=/../.. HTTP/1.0\r\n\r\n"), Ok(b"/a".to_vec()));
    let off = Limits {
        merge_slashes: false,
        ..Limits::default()
    };
    let r = parse_with(b"GET //a//b HTTP/1.0\r\n\r\n", &off).unwrap();
    assert_eq!(r.path(), b"//a//b");
}
