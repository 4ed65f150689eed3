use super::*;
use crate::upstream::UpstreamBodyDecoder;
use crate::BodyChunk;

const MAX: usize = 4096;

/// What a parse found, comparable.
#[derive(Debug, PartialEq, Eq)]
struct Summary {
    status: u16,
    status_line: Vec<u8>,
    reason: Vec<u8>,
    headers: Vec<(Vec<u8>, Vec<u8>)>,
    content_length: Option<u64>,
    len: usize,
}

fn summary(h: &UpstreamHead) -> Summary {
    assert!(!h.chunked() && !h.connection_close());
    Summary {
        status: h.status(),
        status_line: h.status_line().to_vec(),
        reason: h.reason().to_vec(),
        headers: h.headers().map(|(n, v)| (n.to_vec(), v.to_vec())).collect(),
        content_length: h.content_length(),
        len: h.head_len(),
    }
}

type Outcome = Result<Option<Summary>, UpstreamError>;

/// Parses `input` whole with a fresh parser, and byte by byte with one parser that resumes:
/// the first answer byte by byte must be the answer on the whole, and `parse_buf` must agree.
fn parse_mode(input: &[u8], http: bool, max: usize) -> Outcome {
    let fresh = || {
        if http {
            CgiHeadParser::http_or_cgi()
        } else {
            CgiHeadParser::cgi()
        }
    };
    let whole = fresh().parse(input, max).map(|h| h.map(|h| summary(&h)));
    let mut p = fresh();
    let mut first = Ok(None);
    for end in 0..=input.len() {
        first = p.parse(&input[..end], max).map(|h| h.map(|h| summary(&h)));
        if first != Ok(None) {
            break;
        }
    }
    assert_eq!(first, whole, "byte by byte differs on {input:?}");
    let mut buf = BytesMut::from(input);
    let split = fresh()
        .parse_buf(&mut buf, max)
        .map(|h| h.map(|h| summary(&h)));
    assert_eq!(split, whole);
    if let Ok(Some(s)) = &whole {
        assert_eq!(&buf[..], &input[s.len..]);
    }
    whole
}

fn cgi(input: &[u8]) -> Summary {
    parse_mode(input, false, MAX)
        .expect("valid head")
        .expect("complete head")
}

fn http_or_cgi(input: &[u8]) -> Summary {
    parse_mode(input, true, MAX)
        .expect("valid head")
        .expect("complete head")
}

fn pairs(h: &Summary) -> Vec<(&[u8], &[u8])> {
    h.headers.iter().map(|(n, v)| (&n[..], &v[..])).collect()
}

#[test]
fn no_status_is_200_ok() {
    let h = cgi(b"Content-Type: text/plain\r\nX-A: 1\r\n\r\nhello");
    assert_eq!(h.status, 200);
    assert_eq!(h.status_line, b"200 OK");
    assert_eq!(h.reason, b"OK");
    assert_eq!(
        pairs(&h),
        vec![(&b"Content-Type"[..], &b"text/plain"[..]), (b"X-A", b"1")]
    );
    assert_eq!(h.len, 36);
    // An empty head is a head.
    assert_eq!(cgi(b"\r\nbody").status, 200);
    assert_eq!(cgi(b"\nbody").len, 1);
}

#[test]
fn status_header_shapes() {
    let h = cgi(b"Status: 404 Not Found\r\n\r\n");
    assert_eq!(
        (h.status, &h.status_line[..], &h.reason[..]),
        (404, &b"404 Not Found"[..], &b"Not Found"[..])
    );
    // The Status header stays in the list: hiding it is the caller's (per protocol).
    assert_eq!(pairs(&h), vec![(&b"Status"[..], &b"404 Not Found"[..])]);
    let h = cgi(b"Status: 201\r\n\r\n");
    assert_eq!((h.status, &h.status_line[..]), (201, &b"201"[..]));
    assert_eq!(h.reason, b"");
    // nginx sends the value as it is: `HTTP/1.1 404x`, `HTTP/1.1 099 Whatever`.
    let h = cgi(b"Status:  404x\r\n\r\n");
    assert_eq!((h.status, &h.status_line[..]), (404, &b"404x"[..]));
    let h = cgi(b"status: 099 Whatever\r\n\r\n");
    assert_eq!((h.status, &h.status_line[..]), (99, &b"099 Whatever"[..]));
    assert_eq!(cgi(b"Status: 999 X\n\n").status, 999);
    // The first Status wins.
    let h = cgi(b"Status: 404 A\r\nStatus: 500 B\r\n\r\n");
    assert_eq!(h.status_line, b"404 A");
}

#[test]
fn invalid_status_is_refused() {
    for (input, value) in [
        (&b"Status: abc\r\n\r\n"[..], "abc"),
        (b"Status: 4\r\n\r\n", "4"),
        (b"Status: 40 4\r\n\r\n", "40 4"),
        (b"Status:\r\n\r\n", ""),
        (b"Status: \xff12\r\n\r\n", "\\xff12"),
    ] {
        let e = parse_mode(input, false, MAX).unwrap_err();
        assert_eq!(
            e.to_string(),
            format!("upstream sent invalid status \"{value}\"")
        );
    }
}

#[test]
fn location_without_status_is_302() {
    for input in [
        &b"Location: http://x/y\r\n\r\n"[..],
        b"Location: /y\r\n\r\n",
        b"Location:\r\n\r\n",
    ] {
        let h = cgi(input);
        assert_eq!(
            (h.status, &h.status_line[..], &h.reason[..]),
            (
                302,
                &b"302 Moved Temporarily"[..],
                &b"Moved Temporarily"[..]
            )
        );
    }
    let h = cgi(b"Location: /y\r\nStatus: 200 OK\r\n\r\nbody");
    assert_eq!(h.status, 200);
    let h = cgi(b"Location: /a\r\nLocation: /b\r\n\r\n");
    assert_eq!(h.headers.len(), 2);
}

#[test]
fn lines_as_an_http_upstream_reads_them() {
    // A status line is a skipped line for FastCGI.
    let h = cgi(b"HTTP/1.1 404 Not Found\r\nContent-Type: text/plain\r\n\r\nhi");
    assert_eq!(h.status, 200);
    assert_eq!(pairs(&h), vec![(&b"Content-Type"[..], &b"text/plain"[..])]);
    // A line without a colon is a header with an empty value; bare LFs end lines.
    let h = cgi(b"A: 1\nNoColon\n\n");
    assert_eq!(pairs(&h), vec![(&b"A"[..], &b"1"[..]), (b"NoColon", b"")]);
    let e = parse_mode(b"Content-Type: a\r\nBad Header: x\r\n\r\n", false, MAX).unwrap_err();
    assert_eq!(
        e.to_string(),
        "upstream sent invalid header: \"Bad\\x20...\""
    );
    let e = parse_mode(b"\x00\x01garbage\r\n\r\nx", true, MAX).unwrap_err();
    assert_eq!(e.to_string(), "upstream sent invalid header: \"\\x00...\"");
}

#[test]
fn scgi_and_uwsgi_take_a_status_line_or_headers() {
    let h = http_or_cgi(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\nhello");
    assert_eq!((h.status, &h.status_line[..]), (200, &b"200 OK"[..]));
    let h = http_or_cgi(b"HTTP/1.0 201 Made\r\nX-A: 1\r\n\r\nbody");
    assert_eq!((h.status, &h.reason[..]), (201, &b"Made"[..]));
    // With a status line, Status says nothing.
    let h = http_or_cgi(b"HTTP/1.1 200 OK\r\nStatus: 404 Nope\r\n\r\nb");
    assert_eq!(h.status, 200);
    let h = http_or_cgi(b"HTTP/1.1 404\r\n\r\nx");
    assert_eq!((h.status, &h.status_line[..]), (404, &b"404"[..]));
    // Headers only.
    let h = http_or_cgi(b"Status: 203 X\nA: 1\n\nbody");
    assert_eq!((h.status, h.len), (203, 20));
    assert_eq!(http_or_cgi(b"Location: /x\r\n\r\n").status, 302);
    // Not a status line after all: the first line is read as a header line (here, skipped).
    let h = http_or_cgi(b"HTTP/9x\r\nA: b\r\n\r\nx");
    assert_eq!((h.status, pairs(&h)), (200, vec![(&b"A"[..], &b"b"[..])]));
    // A status line still arriving is waited for.
    assert_eq!(parse_mode(b"HTTP/1.1 20", true, MAX), Ok(None));
}

#[test]
fn too_big_header() {
    let mut input = b"X: ".to_vec();
    input.resize(100, b'a');
    input.extend_from_slice(b"\r\n\r\n");
    assert_eq!(parse_mode(&input, false, 104).unwrap().unwrap().len, 104);
    assert_eq!(
        parse_mode(&input, false, 103),
        Err(UpstreamError::TooBigHeader)
    );
    assert_eq!(parse_mode(&input[..50], false, 103), Ok(None));
    assert_eq!(
        parse_mode(b"HTTP/1.1 2", true, 10),
        Err(UpstreamError::TooBigHeader)
    );
}

#[test]
fn content_length_and_framing() {
    let h = CgiHeadParser::cgi()
        .parse(
            b"Content-Length: 3\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n",
            MAX,
        )
        .unwrap()
        .unwrap();
    assert_eq!(h.content_length(), Some(4));
    assert!(!h.chunked());
    assert_eq!(framing(&h, false), Framing::Length(4));
    assert_eq!(framing(&h, true), Framing::Close);
    let h = parse_cgi_head(b"Content-Length: 5\r\nContent-Length: x\r\n\r\n", MAX)
        .unwrap()
        .unwrap();
    assert_eq!(h.content_length(), None);
    assert_eq!(framing(&h, false), Framing::Close);
    let h = parse_cgi_head(b"Status: 204\r\nContent-Length: 5\r\n\r\n", MAX)
        .unwrap()
        .unwrap();
    assert_eq!(framing(&h, false), Framing::None);
    let h = parse_cgi_head(b"Content-Length: 0\r\n\r\n", MAX)
        .unwrap()
        .unwrap();
    assert_eq!(framing(&h, false), Framing::None);
    // A body longer than its length is cut, as nginx cuts it.
    let h = parse_cgi_head(b"Content-Length: 3\r\n\r\n", MAX)
        .unwrap()
        .unwrap();
    let mut d = UpstreamBodyDecoder::new(framing(&h, false));
    let mut buf = BytesMut::from(&b"hello"[..]);
    assert_eq!(
        d.decode_buf(&mut buf).unwrap(),
        BodyChunk::Data(Bytes::from_static(b"hel"))
    );
    assert_eq!(d.decode_buf(&mut buf).unwrap(), BodyChunk::Done);
    assert_eq!(&buf[..], b"lo");
}

#[test]
fn header_names_as_params() {
    assert_eq!(http_param_name(b"User-Agent"), b"HTTP_USER_AGENT");
    assert_eq!(http_param_name(b"x-forwarded_for"), b"HTTP_X_FORWARDED_FOR");
    assert_eq!(http_param_name(b""), b"HTTP_");
}

#[test]
fn a_parser_serves_again_after_an_answer() {
    let mut p = CgiHeadParser::cgi();
    assert!(p.parse(b"A: 1\r\n\r\n", MAX).unwrap().is_some());
    let h = p.parse(b"Status: 404\r\n\r\n", MAX).unwrap().unwrap();
    assert_eq!(h.status(), 404);
    assert!(p.parse(b"Bad Header\r\n\r\n", MAX).is_err());
    assert_eq!(
        p.parse(b"B: 2\r\n\r\n", MAX)
            .unwrap()
            .unwrap()
            .header_count(),
        1
    );
}

proptest::proptest! {
    /// Any bytes: no panic, and the answer does not depend on how the bytes arrive.
    #[test]
    fn any_bytes_any_split(input in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..300), http: bool, max in 1usize..400) {
        let _ = parse_mode(&input, http, max);
    }

    /// Heads made of valid lines always parse, whatever the split.
    #[test]
    fn valid_heads(lines in proptest::collection::vec(("[A-Za-z][A-Za-z0-9_-]{0,8}", "[!-~]{0,12}"), 0..8)) {
        let mut input = Vec::new();
        for (n, v) in &lines {
            input.extend_from_slice(format!("{n}: {v}\r\n").as_bytes());
        }
        input.extend_from_slice(b"\r\nbody");
        let has_status = lines.iter().any(|(n, _)| n.eq_ignore_ascii_case("status"));
        match parse_mode(&input, false, MAX) {
            Ok(Some(h)) => {
                proptest::prop_assert_eq!(h.len, input.len() - 4);
                proptest::prop_assert_eq!(h.headers.len(), lines.len());
            }
            Err(UpstreamError::InvalidStatus(_)) => proptest::prop_assert!(has_status),
            other => proptest::prop_assert!(false, "{:?}", other),
        }
    }
}
