//! Header lines: order, lookups, sizes, names, folding, the two roads, headers allowed once.

use super::*;

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

/// nginx 1.22.1's header parser takes any number of CRs before a line's LF (`sw_almost_done`
/// stays put on a CR): the value ends before them. A line that starts with a CR is the head's
/// end, and there only the LF may follow (`sw_header_almost_done`); nginx refuses the byte
/// after such a CR as it comes, without waiting for a head that could end.
#[test]
fn crs_before_the_lf_of_a_header_line() {
    for (line, value) in [
        (&b"X: a\r\r\n"[..], &b"a"[..]),
        (b"X: a\r\r\r\n", b"a"),
        (b"X: a  \r\r\n", b"a"),
        (b"X: \r\r\n", b""),
        (b"X:\r\r\n", b""),
        (b"X\r\r\n", b""),
    ] {
        let mut req = b"GET / HTTP/1.1\r\nHost: a\r\n".to_vec();
        req.extend_from_slice(line);
        req.extend_from_slice(b"Y: b\r\n\r\n");
        let r = parse(&req).unwrap_or_else(|e| panic!("{line:?}: {e:?}"));
        assert_eq!(r.header("x"), Some(value), "{line:?}");
        assert_eq!(r.header("y"), Some(&b"b"[..]), "{line:?}");
    }
    // Elsewhere a CR is refused, and nginx's line names where its parser stopped.
    for (req, detail) in [
        (
            &b"GET / HTTP/1.1\r\nHost: a\r\nX: a\r\rb\r\n\r\n"[..],
            "X: a\\x0d...",
        ),
        (
            b"GET / HTTP/1.1\r\nHost: a\r\nX: a \r \r\n\r\n",
            "X: a\\x20...",
        ),
        (
            b"GET / HTTP/1.1\r\nHost: a\r\nX:  \r \r\n\r\n",
            "X:  \\x0d...",
        ),
        (b"GET / HTTP/1.1\r\nHost: a\r\nX\r: a\r\n\r\n", "X\\x0d..."),
        (b"GET / HTTP/1.1\r\nHost: a\r\n\rX: a\r\n\r\n", "\\x0d..."),
        // The head's end with two CRs: refused at the second, whole or not.
        (b"GET / HTTP/1.1\r\nHost: a\r\nX: a\r\n\r\r\n", "\\x0d..."),
        (b"GET / HTTP/1.1\r\nHost: a\r\nX: a\r\n\r\r", "\\x0d..."),
        (
            b"GET / HTTP/1.1\r\nHost: a\r\nX: a\r\n\rGET / HTTP/1.1",
            "\\x0d...",
        ),
    ] {
        let (e, refused) = refused(req);
        assert_eq!(e.status(), 400, "{req:?}");
        assert_eq!(
            refused.what(&e),
            format!("client sent invalid header line: \"{detail}\""),
            "{req:?}"
        );
        assert_eq!(refused.host.as_deref(), Some(&b"a"[..]), "{req:?}");
    }
    // A line nginx refuses is refused when it is whole, before the head ends; the answer is
    // the first wrong line's.
    for (req, detail) in [
        (
            &b"GET / HTTP/1.1\r\nHost: a\r\nX a: b\r\n"[..],
            "client sent invalid header line: \"X\\x20...\"",
        ),
        (
            b"GET / HTTP/1.1\r\nHost: a\r\nX: a\x00\r\n",
            "client sent invalid header line: \"X: a\\x00...\"",
        ),
        (
            b"GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\nX a: b\r\n",
            "client sent duplicate host header: \"Host: b\", previous value: \"Host: a\"",
        ),
        (
            b"GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n",
            "client sent duplicate host header: \"Host: b\", previous value: \"Host: a\"",
        ),
        (
            b"GET / HTTP/1.1\r\nIf-Match: a\r\nif-match: b\r\n",
            "client sent duplicate header line: \"if-match: b\", previous value: \"If-Match: a\"",
        ),
        (
            b"GET / HTTP/1.1\r\nHost: a/b\r\n",
            "client sent invalid host header",
        ),
    ] {
        let (e, refused) = refused(req);
        assert_eq!((e.status(), &*refused.what(&e)), (400, detail), "{req:?}");
    }
    // A CR alone may still become the head's end.
    let mut p = HeadParser::new(Limits::default());
    let mut buf = BytesMut::from(&b"GET / HTTP/1.1\r\nHost: a\r\n\r"[..]);
    assert!(p.parse(&mut buf).unwrap().is_none());
    buf.extend_from_slice(b"\n");
    assert!(p.parse(&mut buf).unwrap().is_some());
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
    // With ignore_invalid_headers off nginx passes every name on that has no control byte,
    // space or DEL (its parser only flags the others invalid).
    let r = parse_with(b"GET / HTTP/1.1\r\nHost: a\r\nX.Dot: 1\r\n\r\n", &strict).unwrap();
    assert_eq!(r.header("x.dot"), Some(&b"1"[..]));
    let r = parse_with(
        b"GET / HTTP/1.1\r\nHost: a\r\nX@At: 1\r\nX\xffH: 2\r\nX/\"{}: 3\r\n\r\n",
        &strict,
    )
    .unwrap();
    assert_eq!(
        r.header_fields().map(|(n, _)| n).collect::<Vec<_>>(),
        [&b"Host"[..], b"X@At", b"X\xffH", b"X/\"{}"]
    );
    assert_eq!(
        status_with(b"GET / HTTP/1.1\r\nHost: a\r\nX\x7fH: 1\r\n\r\n", &strict),
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
