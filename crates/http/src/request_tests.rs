use super::*;

fn parse(s: &[u8]) -> Result<Request, Error> {
    parse_with(s, &Limits::default())
}

fn parse_with(s: &[u8], l: &Limits) -> Result<Request, Error> {
    let r = parse_request(s, l)?.expect("complete head");
    // Whichever road was taken, the careful road alone must agree.
    let careful = parse_careful(r.head(), l).and_then(|raw| finish(r.head().clone(), raw, l));
    let careful = careful.expect("careful road agrees");
    assert_eq!(summary(&careful), summary(&r));
    Ok(r)
}

type Summary = (
    String,
    Vec<u8>,
    Vec<u8>,
    Option<Vec<u8>>,
    Vec<(String, Vec<u8>)>,
);

fn summary(r: &Request) -> Summary {
    (
        r.method().to_owned(),
        r.uri().to_vec(),
        r.path().to_vec(),
        r.query().map(<[u8]>::to_vec),
        r.headers()
            .map(|(n, v)| (n.to_owned(), v.to_vec()))
            .collect(),
    )
}

fn status(s: &[u8]) -> u16 {
    status_with(s, &Limits::default())
}

fn status_with(s: &[u8], l: &Limits) -> u16 {
    match parse_with(s, l) {
        Ok(_) => 200,
        Err(e) => e.status(),
    }
}

#[test]
fn simple_get() {
    let r = parse(
        b"GET /index.html?a=1&b=%20 HTTP/1.1\r\nHost: Example.com:8080\r\nAccept: */*\r\n\r\n",
    )
    .unwrap();
    assert_eq!(r.method(), "GET");
    assert_eq!(r.uri(), b"/index.html?a=1&b=%20");
    assert_eq!(r.path(), b"/index.html");
    assert_eq!(r.query(), Some(&b"a=1&b=%20"[..]));
    assert_eq!(r.version(), Version::Http11);
    assert_eq!(r.host().unwrap(), b"example.com");
    assert_eq!(r.header("accept"), Some(&b"*/*"[..]));
    assert!(r.keep_alive());
    assert!(!r.expect_continue());
    assert_eq!(r.body(), BodyKind::Empty);
}

#[test]
fn headers_keep_order_case_and_duplicates() {
    let r = parse(b"GET / HTTP/1.1\r\nHost: a\r\nX-A: 1\r\nx-a:  2 \r\nCookie: c\r\n\r\n").unwrap();
    let h: Vec<_> = r.headers().collect();
    assert_eq!(
        h,
        vec![
            ("Host", &b"a"[..]),
            ("X-A", b"1"),
            ("x-a", b"2"),
            ("Cookie", b"c")
        ]
    );
    assert_eq!(r.header_all("X-a").collect::<Vec<_>>(), vec![b"1", b"2"]);
    assert_eq!(r.header_count(), 4);
}

/// Lookups go by a summary of the names sent first: every name sent is found in any case,
/// whatever its length or characters, and names not sent are not, the ones whose summary bit
/// another name shares included.
#[test]
fn every_header_sent_is_found_and_no_other() {
    let sent: Vec<String> = (1..=40)
        .map(|n| {
            let mut name: String = (0..n)
                .map(|i| (b'a' + (i * 7 + n) as u8 % 26) as char)
                .collect();
            if n % 3 == 0 {
                name = name.to_ascii_uppercase();
            }
            if n % 4 == 0 {
                name.push_str("-9");
            }
            name
        })
        .collect();
    let mut head = String::from("GET / HTTP/1.1\r\nHost: a\r\n");
    for (i, n) in sent.iter().enumerate() {
        head.push_str(&format!("{n}: v{i}\r\n"));
    }
    head.push_str("\r\n");
    let r = parse(head.as_bytes()).unwrap();
    for (i, n) in sent.iter().enumerate() {
        let want = format!("v{i}");
        for name in [n.clone(), n.to_ascii_lowercase(), n.to_ascii_uppercase()] {
            assert_eq!(r.header(&name), Some(want.as_bytes()), "{name}");
            assert_eq!(r.header_all(&name).count(), 1, "{name}");
        }
    }
    for absent in [
        "accept-encoding",
        "if-none-match",
        "range",
        "via",
        "x",
        "zz-9",
        "authorization",
    ] {
        assert_eq!(r.header(absent), None, "{absent}");
        assert_eq!(r.header_all(absent).count(), 0, "{absent}");
    }
    // `$http_NAME`'s spelling (`_` for `-`) is summarised as the name's.
    assert!(r.may_have_header(b"host"));
    let dashed = parse(b"GET / HTTP/1.1\r\nHost: a\r\n-x-a-: 1\r\n\r\n").unwrap();
    assert!(dashed.may_have_header(b"_x_a_"));
    assert!(!dashed.may_have_header(b"user_agent"));
    // A name not sent whose bit another name set still misses.
    assert_eq!(name_bit(b"ab"), name_bit(b"bu"));
    let one = parse(b"GET / HTTP/1.1\r\nHost: a\r\nab: 1\r\n\r\n").unwrap();
    assert_eq!(one.header("AB"), Some(&b"1"[..]));
    assert_eq!(one.header("bu"), None);
    assert_eq!(one.header_all("BU").count(), 0);
}

#[test]
fn bare_lf_and_leading_empty_lines() {
    let r = parse(b"\r\n\nGET / HTTP/1.0\nHost: a\n\n").unwrap();
    assert_eq!(r.path(), b"/");
    assert_eq!(r.head_len(), 27);
}

#[test]
fn nginx_method_characters_and_spaces() {
    assert_eq!(
        parse(b"PURGE /x HTTP/1.0\r\n\r\n").unwrap().method(),
        "PURGE"
    );
    assert_eq!(
        parse(b"M-SEARCH_X /x HTTP/1.0\r\n\r\n").unwrap().method(),
        "M-SEARCH_X"
    );
    // nginx takes only `A`-`Z`, `_` and `-`: a lower-case method is a 400, not a 405.
    assert_eq!(status(b"get /x HTTP/1.0\r\n\r\n"), 400);
    assert_eq!(status(b"G@T /x HTTP/1.0\r\n\r\n"), 400);
    // Runs of spaces between the parts, as nginx accepts; trailing spaces too.
    let r = parse(b"GET  /x   HTTP/1.0  \r\n\r\n").unwrap();
    assert_eq!(r.uri(), b"/x");
    assert_eq!(status(b"GE(T / HTTP/1.0\r\n\r\n"), 400);
    assert_eq!(status(b" GET / HTTP/1.0\r\n\r\n"), 400);
    assert_eq!(status(b"GET / HTTP/1.0 x\r\n\r\n"), 400);
    assert_eq!(status(b"GET /a\x01b HTTP/1.0\r\n\r\n"), 400);
    assert_eq!(status(b"GET /a\rb HTTP/1.0\r\n\r\n"), 400);
}

#[test]
fn non_utf8_target_is_kept_as_bytes() {
    let r = parse(b"GET /caf\xe9 HTTP/1.0\r\n\r\n").unwrap();
    assert_eq!(r.path(), b"/caf\xe9");
}

#[test]
fn versions() {
    assert_eq!(status(b"GET / HTTP/2.0\r\nHost: a\r\n\r\n"), 505);
    assert_eq!(status(b"GET / HTTP/3.0\r\nHost: a\r\n\r\n"), 505);
    assert_eq!(status(b"GET / HTTP/0.9\r\n\r\n"), 400);
    // An HTTP/0.9 simple request is its request line alone; only a GET.
    let r = parse(b"GET /a\r\n").unwrap();
    assert_eq!(
        (r.version(), r.path(), r.header_count()),
        (Version::Http09, &b"/a"[..], 0)
    );
    assert!(!r.keep_alive());
    assert_eq!(r.version_text(), b"");
    assert_eq!(status(b"HEAD /\r\n"), 400);
    assert_eq!(status(b"GET\r\n"), 400);
    assert_eq!(status(b"GET / HTTP/1\r\n\r\n"), 400);
    assert_eq!(status(b"GET / HTTP/1.x\r\n\r\n"), 400);
    // nginx 1.22 answers 505 as soon as the major passes 1, and refuses a leading zero.
    assert_eq!(status(b"GET / HTTP/100.0\r\n\r\n"), 505);
    assert_eq!(status(b"GET / HTTP/10.1\r\n\r\n"), 505);
    assert_eq!(status(b"GET / HTTP/2\r\n\r\n"), 505);
    assert_eq!(status(b"GET / HTTP/2.0x\r\n\r\n"), 505);
    assert_eq!(status(b"GET / HTTP/2.0 x\r\n\r\n"), 505);
    assert_eq!(status(b"GET / HTTP/01.1\r\nHost: a\r\n\r\n"), 400);
    // The target is read before the version.
    assert_eq!(status(b"GET a.txt HTTP/2.0\r\n\r\n"), 400);
    assert_eq!(status(b"GET http://u@a/ HTTP/2.0\r\n\r\n"), 400);
    assert_eq!(status(b"GET http://a/ HTTP/2.0\r\n\r\n"), 505);
    assert_eq!(status(b"GET / HTTP/1.\r\nHost: a\r\n\r\n"), 400);
    assert_eq!(status(b"GET / HTTP/1.1000\r\nHost: a\r\n\r\n"), 400);
    let r = parse(b"GET / HTTP/1.100\r\nHost: a\r\n\r\n").unwrap();
    assert_eq!(r.version(), Version::Http11);
    let r = parse(b"GET / HTTP/1.00\r\n\r\n").unwrap();
    assert_eq!(r.version(), Version::Http10);
    assert_eq!(status(b"GET / FTP/1.0\r\n\r\n"), 400);
    assert_eq!(status(b"GET / http/1.1\r\nHost: a\r\n\r\n"), 400);
    let r = parse(b"GET / HTTP/1.2\r\nHost: a\r\n\r\n").unwrap();
    assert_eq!(r.version(), Version::Http11);
}

#[test]
fn request_line_too_long_is_414() {
    let mut req = b"GET /".to_vec();
    req.resize(9000, b'a');
    req.extend_from_slice(b" HTTP/1.1\r\nHost: a\r\n\r\n");
    assert_eq!(status(&req), 414);
    // It fits in one 8k buffer even though not in the 1k one.
    let mut ok = b"GET /".to_vec();
    ok.resize(8000, b'a');
    ok.extend_from_slice(b" HTTP/1.1\r\nHost: a\r\n\r\n");
    assert_eq!(status(&ok), 200);
}

#[test]
fn header_too_large_is_400_with_494_page() {
    let mut req = b"GET / HTTP/1.1\r\nHost: a\r\nCookie: ".to_vec();
    req.resize(req.len() + 9000, b'c');
    req.extend_from_slice(b"\r\n\r\n");
    let e = parse(&req).unwrap_err();
    assert_eq!((e.status(), e.code()), (400, 494));
    assert_eq!(e.kind(), ErrorKind::HeaderTooLarge);
    let small = Limits {
        large_client_header_buffers: crate::LargeBuffers { num: 1, size: 100 },
        client_header_buffer_size: 50,
        ..Limits::default()
    };
    let two = b"GET / HTTP/1.1\r\nHost: a\r\nA: 0123456789012345678901234567890123456789\r\nB: 0123456789012345678901234567890123456789012345678901234567890\r\n\r\n";
    assert_eq!(parse_with(two, &small).unwrap_err().code(), 494);
}

#[test]
fn obs_fold_and_header_syntax() {
    assert_eq!(
        status(b"GET / HTTP/1.1\r\nHost: a\r\nX: 1\r\n  folded\r\n\r\n"),
        400
    );
    assert_eq!(
        status(b"GET / HTTP/1.1\r\nHost: a\r\nX: 1\r\n\tfolded\r\n\r\n"),
        400
    );
    assert_eq!(status(b"GET / HTTP/1.1\r\n Host: a\r\n\r\n"), 400);
    assert_eq!(status(b"GET / HTTP/1.1\r\nHost : a\r\n\r\n"), 400);
    assert_eq!(status(b"GET / HTTP/1.1\r\nHost: a\r\n: x\r\n\r\n"), 400);
    // nginx takes a line without a colon as a header with an empty value.
    let r = parse(b"GET / HTTP/1.1\r\nHost: a\r\nNoColon\r\n\r\n").unwrap();
    assert_eq!(r.header("nocolon"), Some(&b""[..]));
    assert_eq!(
        status(b"GET / HTTP/1.1\r\nHost: a\r\nNo Colon\r\n\r\n"),
        400
    );
    assert_eq!(status(b"GET / HTTP/1.1\r\nHost: a\r\nX: a\0b\r\n\r\n"), 400);
    assert_eq!(status(b"GET / HTTP/1.1\r\nHost: a\r\nX: a\rb\r\n\r\n"), 400);
    assert_eq!(
        status(b"GET / HTTP/1.1\r\nHost: a\r\nX\x01: a\r\n\r\n"),
        400
    );
    // nginx drops spaces around a value, not tabs (1.22.1 sends `[\t]` and `[\t a \t]` for
    // `$http_x` and `$http_z` here).
    let r = parse(b"GET / HTTP/1.1\r\nHost: a\r\nX: \t\r\nY:\r\nZ:\t a \t \r\n\r\n").unwrap();
    assert_eq!(r.header("x"), Some(&b"\t"[..]));
    assert_eq!(r.header("y"), Some(&b""[..]));
    assert_eq!(r.header("z"), Some(&b"\t a \t"[..]));
    // So a tab makes a length or a coding invalid, as in nginx.
    assert_eq!(
        status(b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length:\t5\r\n\r\n"),
        400
    );
    assert_eq!(
        status(b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5\t\r\n\r\n"),
        400
    );
    assert_eq!(
        status(b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding:\tchunked\r\n\r\n"),
        501
    );
    let r = parse(b"GET / HTTP/1.1\r\nHost: a\r\nX: caf\xc3\xa9 \xff\r\n\r\n").unwrap();
    assert_eq!(r.header("x"), Some(&b"caf\xc3\xa9 \xff"[..]));
    // nginx refuses only NUL in a value: other control characters and DEL are kept.
    let r = parse(b"GET / HTTP/1.1\r\nHost: a\r\nUser-Agent: x\x01y\x1b\x7f\r\n\r\n").unwrap();
    assert_eq!(r.header("user-agent"), Some(&b"x\x01y\x1b\x7f"[..]));
}

#[test]
fn invalid_header_names_ignored_or_refused() {
    let req =
        b"GET / HTTP/1.1\r\nHost: a\r\nX.Dot: 1\r\nX@At: 2\r\nX\xffHigh: 3\r\nOk-1: 4\r\n\r\n";
    let r = parse(req).unwrap();
    assert_eq!(
        r.headers().map(|(n, _)| n).collect::<Vec<_>>(),
        ["Host", "Ok-1"]
    );
    let strict = Limits {
        ignore_invalid_headers: false,
        ..Limits::default()
    };
    // With ignore_invalid_headers off nginx passes token names on and we do too; names that
    // are not even tokens are refused.
    let r = parse_with(b"GET / HTTP/1.1\r\nHost: a\r\nX.Dot: 1\r\n\r\n", &strict).unwrap();
    assert_eq!(r.header("x.dot"), Some(&b"1"[..]));
    assert_eq!(
        status_with(b"GET / HTTP/1.1\r\nHost: a\r\nX@At: 1\r\n\r\n", &strict),
        400
    );
    assert_eq!(
        status_with(b"GET / HTTP/1.1\r\nHost: a\r\nX\xffH: 1\r\n\r\n", &strict),
        400
    );
}

/// Debian's nginx 1.22.1 takes 1,000 header lines and refuses the next one as it reads it,
/// with the page of a head too large; lines `ignore_invalid_headers` drops do not count, and a
/// wrong line after the 1,001st is never read (found by the `http_request` fuzzer).
#[test]
fn at_most_a_thousand_header_lines() {
    let head = |kept: usize, tail: &[u8]| {
        let mut h = b"GET / HTTP/1.1\r\nHost: a\r\n".to_vec();
        for _ in 1..kept {
            h.extend_from_slice(b"A: b\r\n");
        }
        h.extend_from_slice(tail);
        h.extend_from_slice(b"\r\n");
        h
    };
    assert_eq!(
        parse(&head(1000, b"X_U: 1\r\n")).unwrap().header_count(),
        1000
    );
    let e = parse(&head(1001, b"")).unwrap_err();
    assert_eq!((e.code(), e.status()), (494, 400));
    assert_eq!(e.context(), "client sent too many header lines");
    // The 1,001st line comes before the wrong one.
    assert_eq!(parse(&head(1001, b"X: a\x00\r\n")).unwrap_err().code(), 494);
    assert_eq!(
        parse(&head(1000, b"X: a\x00\r\nB: c\r\n"))
            .unwrap_err()
            .code(),
        400
    );
    let strict = Limits {
        ignore_invalid_headers: false,
        ..Limits::default()
    };
    assert_eq!(status_with(&head(1000, b"X_U: 1\r\n"), &strict), 400);
    let e = parse_with(&head(1000, b"X_U: 1\r\nX@A: 1\r\n"), &strict).unwrap_err();
    assert_eq!(e.code(), 494);
}

/// A CR inside a request line is refused when the line is in, as nginx does at the byte after
/// it, not after a head that may never end (found by the `http_request` fuzzer: the whole
/// line waited, the same bytes in two pieces were refused).
#[test]
fn a_stray_cr_in_the_request_line_is_refused_at_once() {
    for line in [
        &b"\xff'\r*\n"[..],
        b"GET /a\rb\r\n",
        b"GET / HTTP/1.1\rx\r\n",
        b"GET /\r\r\n",
        b"GET\r\n",
    ] {
        let e = parse(line).map(|_| ()).unwrap_err();
        assert_eq!(e.status(), 400, "{line:?}");
        for at in 1..line.len() {
            let mut p = HeadParser::new(Limits::default());
            let mut buf = BytesMut::from(&line[..at]);
            let first = p.parse(&mut buf);
            if first.is_ok() {
                buf.extend_from_slice(&line[at..]);
                assert!(p.parse(&mut buf).is_err(), "{line:?} split at {at}");
            }
        }
    }
}

#[test]
fn underscores_in_headers() {
    let req = b"GET / HTTP/1.1\r\nHost: a\r\nX_Forwarded: 1\r\n\r\n";
    assert_eq!(parse(req).unwrap().header("x_forwarded"), None);
    let on = Limits {
        underscores_in_headers: true,
        ..Limits::default()
    };
    assert_eq!(
        parse_with(req, &on).unwrap().header("x_forwarded"),
        Some(&b"1"[..])
    );
    let strict = Limits {
        ignore_invalid_headers: false,
        ..Limits::default()
    };
    assert_eq!(
        parse_with(req, &strict).unwrap().header("x_forwarded"),
        Some(&b"1"[..])
    );
    // A smuggled Content_Length is ignored, never taken for Content-Length.
    let r = parse(b"POST / HTTP/1.1\r\nHost: a\r\nContent_Length: 5\r\n\r\n").unwrap();
    assert_eq!(r.body(), BodyKind::Empty);
}

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

/// nginx skips CR and LF bytes before a request line in any order, a lone CR included.
#[test]
fn crs_before_the_request_line_are_skipped() {
    for req in [
        &b"\rGET /a HTTP/1.0\r\n\r\n"[..],
        b"\r\r\nGET /a HTTP/1.0\r\n\r\n",
        b"\n\rGET /a HTTP/1.0\r\n\r\n",
        b"\r\n\r\r\n\rGET /a HTTP/1.0\n\n",
    ] {
        let whole = parse(req).unwrap();
        assert_eq!((whole.method(), whole.path()), ("GET", &b"/a"[..]));
        assert_eq!(whole.head_len(), req.len());
        for at in 0..req.len() {
            let mut p = HeadParser::new(Limits::default());
            let mut buf = BytesMut::from(&req[..at]);
            assert!(matches!(p.parse(&mut buf), Ok(None)), "{req:?} at {at}");
            buf.extend_from_slice(&req[at..]);
            let r = p.parse(&mut buf).unwrap().unwrap();
            assert_eq!(summary(&r), summary(&whole));
        }
    }
    let r = parse(b"\rGET /a\r\n").unwrap();
    assert_eq!(r.version(), Version::Http09);
    // However many, they do not stay in the connection's buffer: the head found starts at its
    // request line (found by the `http_request` fuzzer: a head longer than the limits allow).
    let mut p = HeadParser::new(Limits::default());
    let mut buf = BytesMut::from(&b"\r\n".repeat(20_000)[..]);
    assert!(matches!(p.parse(&mut buf), Ok(None)));
    assert!(buf.is_empty());
    buf.extend_from_slice(b"\r\r\nGE");
    assert!(matches!(p.parse(&mut buf), Ok(None)));
    assert_eq!(&buf[..], b"GE");
    buf.extend_from_slice(b"T /a HTTP/1.0\r\n\r\nnext");
    let r = p.parse(&mut buf).unwrap().unwrap();
    assert_eq!(&r.head()[..], b"GET /a HTTP/1.0\r\n\r\n");
    assert_eq!(&buf[..], b"next");
    // A CR after the method's first byte is still a wrong method.
    assert_eq!(status(b"G\rET /a HTTP/1.0\r\n\r\n"), 400);
}

/// nginx reads each header line as it comes: a wrong line before one too long to read is its
/// answer, not the 494 (found by the differential fuzzer: `Host: ..` then a 9,000-byte line).
#[test]
fn a_wrong_line_before_a_too_long_one_is_the_answer() {
    let head = |line: &[u8], before: &[u8]| {
        let mut h = line.to_vec();
        h.extend_from_slice(before);
        h.extend_from_slice(b"X-Long: ");
        h.resize(h.len() + 9000, b'v');
        h.extend_from_slice(b"\r\n\r\n");
        h
    };
    let code = |h: &[u8]| {
        parse_request(h, &Limits::default())
            .map(|_| ())
            .unwrap_err()
    };
    let get = b"GET / HTTP/1.0\r\n";
    assert_eq!(code(&head(get, b"Host: a\r\n")).code(), 494);
    for (line, before, context) in [
        (
            &get[..],
            &b"Host: ..\r\n"[..],
            "client sent invalid host header",
        ),
        (
            get,
            b"Host: a\r\nHost: b\r\n",
            "client sent duplicate header line",
        ),
        (get, b"X: a\x00\r\n", "client sent invalid header line"),
        (
            get,
            b"If-Match: a\r\nIf-Match: b\r\n",
            "client sent duplicate header line",
        ),
        (
            b"GET /../a HTTP/1.0\r\n",
            b"",
            "client sent invalid request",
        ),
    ] {
        let e = code(&head(line, before));
        assert_eq!(
            (e.code(), e.context()),
            (400, context),
            "{}",
            crate::lossy(before)
        );
    }
    // Lines `ignore_invalid_headers` drops are no error.
    assert_eq!(code(&head(get, b"X_Y: 1\r\n")).code(), 494);
}

#[test]
fn keep_alive_matrix() {
    let ka = |req: &[u8]| parse(req).unwrap().keep_alive();
    assert!(ka(b"GET / HTTP/1.1\r\nHost: a\r\n\r\n"));
    assert!(!ka(
        b"GET / HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n"
    ));
    assert!(!ka(
        b"GET / HTTP/1.1\r\nHost: a\r\nConnection: Keep-Alive, Close\r\n\r\n"
    ));
    assert!(ka(
        b"GET / HTTP/1.1\r\nHost: a\r\nConnection: keep-alive\r\n\r\n"
    ));
    assert!(ka(
        b"GET / HTTP/1.1\r\nHost: a\r\nConnection: upgrade\r\n\r\n"
    ));
    assert!(!ka(b"GET / HTTP/1.0\r\n\r\n"));
    assert!(ka(b"GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n"));
    assert!(ka(b"GET / HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n"));
    assert!(!ka(b"GET / HTTP/1.0\r\nConnection: close\r\n\r\n"));
    assert!(!ka(
        b"GET / HTTP/1.0\r\nConnection: keep-alive\r\nConnection: close\r\n\r\n"
    ));
}

#[test]
fn expect_continue() {
    let e = |req: &[u8]| parse(req).unwrap().expect_continue();
    assert!(e(
        b"POST / HTTP/1.1\r\nHost: a\r\nExpect: 100-Continue\r\nContent-Length: 1\r\n\r\n"
    ));
    assert!(!e(
        b"POST / HTTP/1.0\r\nExpect: 100-continue\r\nContent-Length: 1\r\n\r\n"
    ));
    assert!(!e(b"POST / HTTP/1.1\r\nHost: a\r\nExpect: 200-ok\r\n\r\n"));
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

#[test]
fn body_framing_and_smuggling() {
    let body = |req: &[u8]| parse(req).map(|r| r.body()).map_err(|e| e.status());
    assert_eq!(
        body(b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 42\r\n\r\n"),
        Ok(BodyKind::Length(42))
    );
    assert_eq!(
        body(b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 0\r\n\r\n"),
        Ok(BodyKind::Empty)
    );
    assert_eq!(
        body(b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: Chunked\r\n\r\n"),
        Ok(BodyKind::Chunked)
    );
    for bad in [
        &b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n"[..],
        b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n",
        b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\n",
        b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\nContent-Length: 5\r\n\r\n",
        b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5, 5\r\n\r\n",
        b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: -1\r\n\r\n",
        b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: +5\r\n\r\n",
        b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 0x5\r\n\r\n",
        b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5 5\r\n\r\n",
        b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length:\r\n\r\n",
        b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 99999999999999999999\r\n\r\n",
        b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 9223372036854775808\r\n\r\n",
        b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n",
        b"POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n",
        b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length : 5\r\n\r\n",
        b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n Content-Length: 5\r\n\r\n",
        b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\nTransfer-Encoding: gzip\r\n\r\n",
    ] {
        assert_eq!(body(bad), Err(400), "{}", String::from_utf8_lossy(bad));
    }
    assert_eq!(
        body(b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 9223372036854775807\r\n\r\n"),
        Ok(BodyKind::Length(i64::MAX as u64))
    );
    for te in [
        "gzip",
        "gzip, chunked",
        "chunked, gzip",
        "identity",
        "chunked;x",
        "",
    ] {
        let req = format!("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: {te}\r\n\r\n");
        assert_eq!(body(req.as_bytes()), Err(501), "{te}");
    }
}

#[test]
fn max_body_size_from_content_length() {
    let r = parse(b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 2000000\r\n\r\n").unwrap();
    let e = r.body().check_max_size(1 << 20).unwrap_err();
    assert_eq!(e.status(), 413);
    assert!(r.body().check_max_size(0).is_ok());
    assert!(crate::BodyDecoder::new(r.body(), 1 << 20).is_err());
}

#[test]
fn pipelining_and_partial() {
    let reqs = b"GET /1 HTTP/1.1\r\nHost: a\r\n\r\nPOST /2 HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\n\r\nabcGET /3 HTTP/1.1\r\nHost: a\r\n\r\nGET /4 HT";
    let mut buf = BytesMut::from(&reqs[..]);
    let mut p = HeadParser::default();
    let r1 = p.parse(&mut buf).unwrap().unwrap();
    assert_eq!(r1.path(), b"/1");
    assert_eq!(r1.head_len(), 28);
    let r2 = p.parse(&mut buf).unwrap().unwrap();
    assert_eq!(r2.path(), b"/2");
    assert!(buf.starts_with(b"abc"));
    let mut dec = crate::BodyDecoder::new(r2.body(), 0).unwrap();
    assert_eq!(
        dec.decode_buf(&mut buf).unwrap(),
        crate::BodyChunk::Data(bytes::Bytes::from_static(b"abc"))
    );
    assert!(dec.is_done());
    let r3 = p.parse(&mut buf).unwrap().unwrap();
    assert_eq!(r3.path(), b"/3");
    assert!(p.parse(&mut buf).unwrap().is_none());
    buf.extend_from_slice(b"TP/1.1\r\nHost: a\r\n\r\n");
    let r4 = p.parse(&mut buf).unwrap().unwrap();
    assert_eq!(r4.path(), b"/4");
    assert!(buf.is_empty());
}

#[test]
fn byte_by_byte_equals_all_at_once() {
    let req = b"POST /a%20b/../c?x HTTP/1.1\r\nHost: h\r\nX_Y: 1\r\nContent-Length: 4\r\n\r\nbody";
    let whole = parse(req).unwrap();
    let mut p = HeadParser::default();
    let mut buf = BytesMut::new();
    let mut got = None;
    for &b in req.iter() {
        buf.extend_from_slice(&[b]);
        if let Some(r) = p.parse(&mut buf).unwrap() {
            got = Some(r);
            break;
        }
    }
    let got = got.unwrap();
    assert_eq!(summary(&got), summary(&whole));
    assert_eq!(got.body(), BodyKind::Length(4));
    assert_eq!(got.head_len(), req.len() - 4);
}

#[test]
fn many_headers_take_the_heap_road() {
    let mut req = b"GET / HTTP/1.1\r\nHost: a\r\n".to_vec();
    for i in 0..100 {
        req.extend_from_slice(format!("X-{i}: {i}\r\n").as_bytes());
    }
    req.extend_from_slice(b"\r\n");
    assert_eq!(parse(&req).unwrap().header_count(), 101);
}

#[test]
fn fast_road_agrees_with_careful_road() {
    let l = Limits::default();
    let head = b"GET /x HTTP/1.1\r\nHost: a\r\nX.Y: 1\r\nA: b\r\n\r\n";
    let fast = parse_fast(head, 3, &l).expect("httparse takes it");
    let careful = parse_careful(head, &l).unwrap();
    assert_eq!(fast, careful);
}

#[test]
fn headers_nginx_allows_once() {
    for name in [
        "If-Modified-Since",
        "If-Unmodified-Since",
        "If-Match",
        "If-None-Match",
        "If-Range",
        "Expect",
        "Authorization",
        "Content-Range",
    ] {
        let twice = format!("GET / HTTP/1.1\r\nHost: a\r\n{name}: x\r\n{name}: y\r\n\r\n");
        assert_eq!(status(twice.as_bytes()), 400, "{name}");
    }
    // Others may repeat.
    assert_eq!(
        status(
            b"GET / HTTP/1.1\r\nHost: a\r\nRange: x\r\nRange: y\r\nCookie: a\r\nCookie: b\r\n\r\n"
        ),
        200
    );
}

#[test]
fn connection_last_line_wins_as_a_substring() {
    let keep = |h: &str| {
        parse(format!("GET / HTTP/1.0\r\n{h}\r\n").as_bytes())
            .unwrap()
            .keep_alive()
    };
    assert!(!keep("Connection: close\r\n"));
    assert!(keep("Connection: keep-alive\r\n"));
    assert!(keep("Connection: close\r\nConnection: keep-alive\r\n"));
    assert!(!keep("Connection: keep-alive\r\nConnection: Closed\r\n"));
    assert!(keep("Connection: x-Keep-Alive-y\r\n"));
    assert!(keep("Connection: keep-alive\r\nConnection: upgrade\r\n"));
}

#[test]
fn trace_and_connect_are_405_with_the_head() {
    for m in ["TRACE", "CONNECT"] {
        let e = parse(format!("{m} / HTTP/1.1\r\nHost: a\r\n\r\n").as_bytes()).unwrap_err();
        assert_eq!(e.status(), 405, "{m}");
    }
}

fn refused(req: &[u8]) -> (Error, Refused) {
    let mut p = HeadParser::new(Limits::default());
    let mut buf = BytesMut::from(req);
    let e = p.parse(&mut buf).expect_err("a refused head");
    (e, p.refused(&buf))
}

fn refused_host(req: &[u8]) -> (Option<&'static str>, bool) {
    let (_, r) = refused(req);
    let host = r
        .host
        .map(|h| &*String::from_utf8(h.to_vec()).unwrap().leak());
    (host, r.head_read)
}

#[test]
fn refused_heads_say_which_host_nginx_had() {
    // Refused in the request line: the default server.
    assert_eq!(
        refused_host(b"get / HTTP/1.1\r\nHost: a\r\n\r\n"),
        (None, false)
    );
    assert_eq!(
        refused_host(b"GET / HTTP/2.0\r\nHost: a\r\n\r\n"),
        (None, false)
    );
    assert_eq!(
        refused_host(b"GET /../x HTTP/1.1\r\nHost: a\r\n\r\n"),
        (None, false)
    );
    // A header line before Host, or a bad Host: the default server.
    assert_eq!(
        refused_host(b"GET / HTTP/1.1\r\nA b: x\r\nHost: a\r\n\r\n"),
        (None, false)
    );
    assert_eq!(
        refused_host(b"GET / HTTP/1.1\r\nHost: a/b\r\n\r\n"),
        (None, false)
    );
    // After Host (or an absolute target): that host's server.
    assert_eq!(
        refused_host(b"GET / HTTP/1.1\r\nHost: A:80\r\nA b: x\r\n\r\n"),
        (Some("a"), false)
    );
    assert_eq!(
        refused_host(b"GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n"),
        (Some("a"), false)
    );
    assert_eq!(
        refused_host(b"GET http://b/ HTTP/1.1\r\nA b: x\r\n\r\n"),
        (Some("b"), false)
    );
    assert_eq!(
        refused_host(
            b"GET / HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 1\r\nHost: a\r\n\r\n"
        ),
        (None, false)
    );
    // After the whole head: the server a request would get.
    assert_eq!(refused_host(b"GET / HTTP/1.1\r\n\r\n"), (None, true));
    assert_eq!(
        refused_host(b"TRACE / HTTP/1.1\r\nHost: a\r\n\r\n"),
        (Some("a"), true)
    );
    // A header line too large: the host read before it.
    let mut big = b"GET / HTTP/1.1\r\nHost: a\r\nX: ".to_vec();
    big.resize(big.len() + 9000, b'x');
    assert_eq!(refused_host(&big), (Some("a"), false));
    let mut big = b"GET / HTTP/1.1\r\nX: ".to_vec();
    big.resize(big.len() + 9000, b'x');
    big.extend_from_slice(b"\r\nHost: a\r\n\r\n");
    assert_eq!(refused_host(&big), (None, false));
}

#[test]
fn over_long_request_line_already_wrong_is_not_414() {
    let long = "a".repeat(9000);
    let status_of = |line: String| refused(line.as_bytes()).0.code();
    assert_eq!(status_of(format!("GET /{long} HTTP/1.1\r\n\r\n")), 414);
    assert_eq!(status_of(format!("GET /{long}")), 414);
    assert_eq!(status_of(format!("GET http://a/{long}")), 414);
    assert_eq!(status_of(format!("GET {long}")), 414);
    assert_eq!(status_of(format!("GET /      {long}")), 400);
    assert_eq!(status_of(format!("get /{long} HTTP/1.1\r\n\r\n")), 400);
    assert_eq!(status_of(format!("GE@T /{long}")), 400);
    assert_eq!(status_of(format!(" GET /{long}")), 400);
    assert_eq!(status_of(format!("GET /\x01{long}")), 400);
    assert_eq!(status_of(format!("GET 1x{long}")), 400);
    assert_eq!(status_of(format!("GET http://a@b/{long} HTTP/1.1")), 400);
    assert_eq!(status_of(format!("GET / HTTP/1.1 {long}")), 400);
    assert_eq!(status_of(format!("GET / HTTP/1.1{long}")), 400);
    assert_eq!(status_of(format!("GET / HTTX{long}")), 400);
    assert_eq!(status_of(format!("GET / HTTP/2{long}")), 505);
    // Only what fits in one large buffer is read: a bad byte past it is not seen.
    assert_eq!(status_of(format!("GET /{long} HTTP/1.1 x\r\n\r\n")), 414);
    // A line that ends right where the buffer does.
    let mut exact = format!("GET /{}", "a".repeat(8187));
    exact.push_str("\r\n");
    assert_eq!(exact.len(), 8194);
    assert_eq!(status_of(exact), 414);
}

#[test]
fn version_text_is_as_sent() {
    for (line, text) in [
        (&b"GET / HTTP/1.1\r\n"[..], &b"HTTP/1.1"[..]),
        (b"GET / HTTP/1.2\r\n", b"HTTP/1.2"),
        (b"GET /   HTTP/1.00\n", b"HTTP/1.00"),
        (b"GET / HTTP/1.1   \r\n", b"HTTP/1.1   "),
        (b"GET http://a/x?y HTTP/1.010 \r\n", b"HTTP/1.010 "),
    ] {
        let mut req = line.to_vec();
        req.extend_from_slice(b"Host: a\r\n\r\n");
        assert_eq!(parse(&req).unwrap().version_text(), text);
    }
}

mod one_pass_agrees {
    use super::*;
    use proptest::prelude::*;

    /// A plain head (the one-pass road's shape) from a few pieces.
    fn plain() -> impl Strategy<Value = Vec<u8>> {
        (
            "[A-Z]{1,7}",
            "/[!-~]{0,20}",
            prop::bool::ANY,
            prop::collection::vec(("[A-Za-z0-9-]{1,12}", "[!-~]([ -~]{0,16}[!-~])?"), 0..6),
            " {0,2}",
        )
            .prop_map(|(method, target, v11, headers, ows)| {
                let mut h = format!("{method} {target} HTTP/1.{}\r\n", if v11 { 1 } else { 0 });
                for (n, v) in headers {
                    h.push_str(&format!("{n}:{ows}{v}\r\n"));
                }
                h.push_str("\r\n");
                h.into_bytes()
            })
    }

    /// A plain head with a few bytes changed, put in or taken out: shapes on both sides of the
    /// one-pass road's edge.
    fn near_plain() -> impl Strategy<Value = Vec<u8>> {
        let byte = prop_oneof![
            3 => prop::sample::select(b" \t\r\n:_/-aZ0\x00\x7f\x80\xff".to_vec()),
            1 => any::<u8>(),
        ];
        (
            plain(),
            prop::collection::vec((0u8..4, any::<prop::sample::Index>(), byte), 0..3),
        )
            .prop_map(|(mut h, edits)| {
                for (kind, at, b) in edits {
                    let i = at.index(h.len());
                    match kind {
                        0 => h[i] = b,
                        1 => h.insert(i, b),
                        2 => {
                            h.remove(i);
                        }
                        // At a line's end, where trimming and line endings are decided.
                        _ => {
                            let ends: Vec<usize> =
                                (0..h.len()).filter(|&j| h[j] == b'\r').collect();
                            if !ends.is_empty() {
                                h.insert(ends[at.index(ends.len())], b);
                            }
                        }
                    }
                }
                h
            })
    }

    fn limits() -> impl Strategy<Value = Limits> {
        (20usize..200, prop::bool::ANY, prop::bool::ANY).prop_map(|(size, ignore, under)| Limits {
            client_header_buffer_size: size,
            large_client_header_buffers: crate::limits::LargeBuffers { num: 2, size: 64 },
            ignore_invalid_headers: ignore,
            underscores_in_headers: under,
            merge_slashes: true,
        })
    }

    proptest! {
        #[test]
        fn whatever_the_one_pass_road_takes_the_other_roads_take_alike(
            head in near_plain(),
            limits in prop_oneof![Just(Limits::default()), limits()],
            tail in prop::collection::vec(any::<u8>(), 0..8),
        ) {
            let mut buf = head;
            buf.extend_from_slice(&tail);
            prop_assert!(roads_agree(&buf, &limits), "{:?}", String::from_utf8_lossy(&buf));
        }

        #[test]
        fn the_one_pass_road_takes_every_plain_head(head in plain()) {
            let (len, _) = one_pass::parse(&head, &Limits {
                client_header_buffer_size: head.len(),
                ..Limits::default()
            }).expect("a plain head");
            prop_assert_eq!(len, head.len());
        }
    }
}
