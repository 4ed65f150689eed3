//! The request line: methods, versions, its length, CRs, HTTP/0.9.

use super::*;

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
