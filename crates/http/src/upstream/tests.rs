use super::*;
use proptest::prelude::*;

const MAX: usize = 4096;

/// What a parse found, comparable.
#[derive(Debug, PartialEq, Eq)]
struct Summary {
    version: Version,
    status: u16,
    status_line: Vec<u8>,
    reason: Vec<u8>,
    headers: Vec<(Vec<u8>, Vec<u8>)>,
    content_length: Option<u64>,
    chunked: bool,
    close: bool,
    keep_alive: bool,
    len: usize,
}

fn summary(h: &UpstreamHead, len: usize) -> Summary {
    assert_eq!(h.head_len(), len);
    Summary {
        version: h.version(),
        status: h.status(),
        status_line: h.status_line().to_vec(),
        reason: h.reason().to_vec(),
        headers: h.headers().map(|(n, v)| (n.to_vec(), v.to_vec())).collect(),
        content_length: h.content_length(),
        chunked: h.chunked(),
        close: h.connection_close(),
        keep_alive: h.keep_alive(),
        len,
    }
}

type Outcome = Result<Option<Summary>, UpstreamError>;

fn whole_with(input: &[u8], max: usize, rules: Rules) -> Outcome {
    parse_upstream_head_with(input, max, rules).map(|r| r.map(|(h, n)| summary(&h, n)))
}

/// Feeds `input` one byte at a time, as reads would grow the buffer: the first answer that is
/// not "need more" must be the answer for the whole input, and no prefix may answer otherwise.
fn bytewise(input: &[u8], max: usize, rules: Rules) -> Outcome {
    for end in 0..=input.len() {
        match whole_with(&input[..end], max, rules) {
            Ok(None) => {}
            done => return done,
        }
    }
    Ok(None)
}

/// Parses `input` whole and byte by byte (both must agree) with the 1.22 rules.
fn parse(input: &[u8]) -> Outcome {
    parse_rules(input, Rules::Nginx122)
}

fn parse_rules(input: &[u8], rules: Rules) -> Outcome {
    let whole = whole_with(input, MAX, rules);
    assert_eq!(bytewise(input, MAX, rules), whole, "byte by byte differs");
    assert!(roads_agree(input), "roads disagree on {input:?}");
    whole
}

fn head(input: &[u8]) -> UpstreamHead {
    let (h, n) = parse_upstream_head(input, MAX)
        .expect("valid head")
        .expect("complete head");
    assert_eq!(parse(input).unwrap().unwrap().len, n);
    h
}

fn error(input: &[u8]) -> String {
    parse(input).expect_err("refused").to_string()
}

fn headers(h: &UpstreamHead) -> Vec<(&[u8], &[u8])> {
    h.headers().collect()
}

#[test]
fn ordinary_head_and_body_offset() {
    let input = b"HTTP/1.1 200 OK\r\nServer: backend\r\nContent-Length: 5\r\nX-A: 1\r\n\r\nhello";
    let h = head(input);
    assert_eq!(h.version(), Version::Http11);
    assert_eq!(h.status(), 200);
    assert_eq!(h.status_line(), b"200 OK");
    assert_eq!(h.reason(), b"OK");
    assert_eq!(
        headers(&h),
        vec![
            (&b"Server"[..], &b"backend"[..]),
            (b"Content-Length", b"5"),
            (b"X-A", b"1")
        ]
    );
    assert_eq!(h.header("content-length"), Some(&b"5"[..]));
    assert_eq!(h.head_len(), input.len() - 5);
    assert_eq!(h.content_length(), Some(5));
    assert!(h.keep_alive());
    assert_eq!(framing(&h, UpstreamRequest::default()), Framing::Length(5));
    // An ordinary head takes the fast road (a tab is an ordinary byte of a value there too);
    // a folded line, a CR inside a value or a line without a colon do not.
    let fast = |input: &[u8]| headers_fast(input, &status_line(input).unwrap().unwrap());
    assert!(fast(input).is_some());
    let tabbed = b"HTTP/1.1 200 OK\r\nA:\t1\t \r\n\r\n";
    assert_eq!(headers(&head(tabbed)), vec![(&b"A"[..], &b"\t1\t"[..])]);
    assert!(fast(tabbed).is_some());
    for careful in [
        &b"HTTP/1.1 200 OK\r\nA: 1\r\n 2\r\n\r\n"[..],
        b"HTTP/1.1 200 OK\r\nA: 1\r\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nA\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nHTTP/1.1 200 OK\r\n\r\n",
    ] {
        assert!(fast(careful).is_none(), "{careful:?}");
        let _ = parse(careful);
    }
}

#[test]
fn bare_lf_and_mixed_line_ends() {
    for input in [
        &b"HTTP/1.1 200 OK\nA: 1\nB: 2\n\n"[..],
        b"HTTP/1.1 200 OK\r\nA: 1\nB: 2\r\n\n",
        b"HTTP/1.1 200 OK\nA: 1\r\nB: 2\n\r\n",
        // nginx lets a CR repeat before the LF of a header line.
        b"HTTP/1.1 200 OK\r\nA: 1\r\r\nB: 2\r\n\r\n",
    ] {
        let h = head(input);
        assert_eq!(headers(&h), vec![(&b"A"[..], &b"1"[..]), (b"B", b"2")]);
        assert_eq!(h.head_len(), input.len());
    }
}

#[test]
fn status_line_shapes() {
    let h = head(b"HTTP/1.1 204\r\n\r\n");
    assert_eq!(
        (h.status(), h.status_line(), h.reason()),
        (204, &b"204"[..], &b""[..])
    );
    let h = head(b"HTTP/1.1 403.1 Forbidden\r\n\r\n");
    assert_eq!(
        (h.status(), h.status_line()),
        (403, &b"403.1 Forbidden"[..])
    );
    assert_eq!(h.reason(), b"1 Forbidden");
    let h = head(b"HTTP/1.1    502  Bad  Gateway \r\n\r\n");
    assert_eq!(h.status_line(), b"502  Bad  Gateway ");
    assert_eq!(h.reason(), b" Bad  Gateway ");
    let h = head(b"HTTP/1.1 200 \xe2\x9c\x93 fine\n\n");
    assert_eq!(h.reason(), "\u{2713} fine".as_bytes());
    // nginx takes any three digits, and versions past 1.1 as 1.1.
    assert_eq!(head(b"HTTP/1.1 999 X\r\n\r\n").status(), 999);
    assert_eq!(head(b"HTTP/2.0 200 OK\r\n\r\n").version(), Version::Http11);
    assert_eq!(head(b"HTTP/1.10 200 OK\r\n\r\n").version(), Version::Http11);
    let h = head(b"HTTP/1.0 200 OK\r\n\r\n");
    assert_eq!(h.version(), Version::Http10);
    assert!(h.connection_close() && !h.keep_alive());
}

#[test]
fn not_http_is_no_valid_header_as_early_as_nginx_sees_it() {
    for input in [
        &b"ICY 200 OK\r\n\r\n"[..],
        b"http/1.1 200 OK\r\n\r\n",
        b"HTTP/0.9 200 OK\r\n\r\n",
        b"HTTP/1.1 2000 OK\r\n\r\n",
        b"HTTP/1.1 20x OK\r\n\r\n",
        b"HTTP/1.1\t200 OK\r\n\r\n",
        b"HTTP/1 200 OK\r\n\r\n",
        b"HTTP/1000.1 200 OK\r\n\r\n",
        b"HTTP/1.1 200 OK\rX\n\r\n",
        b"<html>hello</html>",
    ] {
        assert_eq!(error(input), "upstream sent no valid HTTP/1.0 header");
    }
    // Three bytes are enough to know.
    assert_eq!(
        parse_upstream_head(b"HTX", MAX).unwrap_err(),
        UpstreamError::NoValidHeader
    );
    assert!(parse_upstream_head(b"HTTP/1.1 20", MAX).unwrap().is_none());
}

#[test]
fn too_big_header_at_proxy_buffer_size() {
    let input = b"HTTP/1.1 200 OK\r\nX-Long: aaaaaaaaaaaaaaaaaaaa\r\n\r\n";
    let fits = input.len();
    assert!(parse_upstream_head(input, fits).unwrap().is_some());
    let err = parse_upstream_head(input, fits - 1).unwrap_err();
    assert_eq!(err.to_string(), "upstream sent too big header");
    // Fewer bytes than the buffer holds: wait for more.
    assert!(parse_upstream_head(&input[..20], fits - 1)
        .unwrap()
        .is_none());
    // A status line longer than the buffer is too big as well.
    assert_eq!(
        parse_upstream_head(b"HTTP/1.1 200 OOOOOOOOOO", 16).unwrap_err(),
        UpstreamError::TooBigHeader
    );
    assert_eq!(
        bytewise(input, fits - 1, Rules::Nginx122),
        Err(UpstreamError::TooBigHeader)
    );
}

#[test]
fn invalid_header_lines_with_nginx_log_text() {
    let cases: &[(&[u8], &str)] = &[
        // A space or tab before the colon.
        (
            b"HTTP/1.1 200 OK\r\nX Foo: bar\r\n\r\n",
            r#"upstream sent invalid header: "X\x20...""#,
        ),
        (
            b"HTTP/1.1 200 OK\r\nX-Foo : bar\r\n\r\n",
            r#"upstream sent invalid header: "X-Foo\x20...""#,
        ),
        (
            b"HTTP/1.1 200 OK\r\nX\tFoo: bar\r\n\r\n",
            r#"upstream sent invalid header: "X\x09...""#,
        ),
        // Obs-fold.
        (
            b"HTTP/1.1 200 OK\r\nX-Foo: bar\r\n  baz\r\n\r\n",
            r#"upstream sent invalid header: "\x20...""#,
        ),
        (
            b"HTTP/1.1 200 OK\r\nX-Foo: bar\r\n\tbaz\r\n\r\n",
            r#"upstream sent invalid header: "\x09...""#,
        ),
        // An empty name.
        (
            b"HTTP/1.1 200 OK\r\n: v\r\n\r\n",
            r#"upstream sent invalid header: "\x3a...""#,
        ),
        // NUL in a value, DEL or a control character in a name.
        (
            b"HTTP/1.1 200 OK\r\nX: a\0b\r\n\r\n",
            r#"upstream sent invalid header: "X: a\x00...""#,
        ),
        (
            b"HTTP/1.1 200 OK\r\nX\x7fY: 1\r\n\r\n",
            r#"upstream sent invalid header: "X\x7f...""#,
        ),
        (
            b"HTTP/1.1 200 OK\r\nX\x01Y: 1\r\n\r\n",
            r#"upstream sent invalid header: "X\x01...""#,
        ),
        // A CR not followed by LF.
        (
            b"HTTP/1.1 200 OK\r\nX: a\rb\r\n\r\n",
            r#"upstream sent invalid header: "X: a\x0d...""#,
        ),
        (
            b"HTTP/1.1 200 OK\r\nX: a  \rb\r\n\r\n",
            r#"upstream sent invalid header: "X: a\x20...""#,
        ),
        (
            b"HTTP/1.1 200 OK\r\nX: 1\r\n\rZ",
            r#"upstream sent invalid header: "\x0d...""#,
        ),
    ];
    for (input, text) in cases {
        assert_eq!(error(input), *text, "{input:?}");
    }
    // Found as soon as the bad byte is in, with the head not over yet.
    assert!(parse_upstream_head(b"HTTP/1.1 200 OK\r\nX Foo", MAX).is_err());
}

#[test]
fn names_nginx_takes_from_upstreams() {
    let h = head(b"HTTP/1.1 200 OK\r\nX_Under: 1\r\nX.Dot@{}: 2\r\n\xc3\xa9t\xc3\xa9: 3\r\n\r\n");
    assert_eq!(
        headers(&h),
        vec![
            (&b"X_Under"[..], &b"1"[..]),
            (b"X.Dot@{}", b"2"),
            ("\u{e9}t\u{e9}".as_bytes(), b"3")
        ]
    );
    // A line without a colon is a header with an empty value.
    let h = head(b"HTTP/1.1 200 OK\r\nNoColon\r\nNext\n\r\n");
    assert_eq!(
        headers(&h),
        vec![(&b"NoColon"[..], &b""[..]), (b"Next", b"")]
    );
}

#[test]
fn values_keep_tabs_and_inner_spaces_trim_outer_spaces() {
    let h = head(b"HTTP/1.1 200 OK\r\nA:   x  y   \r\nB:\tt\t\r\nC:\r\nD:    \nE:x\r\n\r\n");
    assert_eq!(
        headers(&h),
        vec![
            (&b"A"[..], &b"x  y"[..]),
            (b"B", b"\tt\t"),
            (b"C", b""),
            (b"D", b""),
            (b"E", b"x")
        ]
    );
    let h = head(b"HTTP/1.1 200 OK\r\nX: \x01\x7f\xff ok\r\n\r\n");
    assert_eq!(h.header("x"), Some(&b"\x01\x7f\xff ok"[..]));
}

#[test]
fn repeated_status_line_is_skipped() {
    let h = head(b"HTTP/1.1 200 OK\r\nHTTP/1.1 200 OK\r\nA: 1\r\nHTTP/x\0\x01\r\n\r\n");
    assert_eq!(headers(&h), vec![(&b"A"[..], &b"1"[..])]);
    // Case matters, and only exactly "HTTP" before the slash.
    assert_eq!(
        error(b"HTTP/1.1 200 OK\r\nhttp/1.1 200 OK\r\n\r\n"),
        r#"upstream sent invalid header: "http/1.1\x20...""#
    );
}

#[test]
fn interim_responses_are_final_responses() {
    // nginx 1.22 sends no Expect and does not wait for a 100: a 100 is the response, its body
    // is whatever follows until the close.
    let input = b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";
    let h = head(input);
    assert_eq!(h.status(), 100);
    assert_eq!(h.head_len(), 25);
    assert_eq!(framing(&h, UpstreamRequest::default()), Framing::Close);
    let h = head(b"HTTP/1.1 103 Early Hints\r\nLink: </a>\r\nContent-Length: 0\r\n\r\n");
    assert_eq!(framing(&h, UpstreamRequest::default()), Framing::None);
}

#[test]
fn framing_by_status_method_and_headers() {
    let plain = UpstreamRequest::default();
    let head_req = UpstreamRequest {
        head: true,
        upgrade: false,
    };
    let upgrade = UpstreamRequest {
        head: false,
        upgrade: true,
    };
    let cl = head(b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n");
    assert_eq!(framing(&cl, plain), Framing::Length(10));
    assert_eq!(framing(&cl, head_req), Framing::None);
    let zero = head(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n");
    assert_eq!(framing(&zero, plain), Framing::None);
    for status in [204, 304] {
        let h = head(format!("HTTP/1.1 {status} X\r\nContent-Length: 10\r\n\r\n").as_bytes());
        assert_eq!(framing(&h, plain), Framing::None);
        assert!(h.keep_alive());
    }
    let ch = head(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n");
    assert_eq!(framing(&ch, plain), Framing::Chunked);
    assert!(ch.keep_alive());
    let close = head(b"HTTP/1.1 200 OK\r\n\r\n");
    assert_eq!(framing(&close, plain), Framing::Close);
    assert!(!Framing::Close.reusable() && Framing::Chunked.reusable());
    let up = head(
        b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: upgrade\r\n\r\n",
    );
    assert!(up.is_upgrade() && !up.keep_alive());
    assert_eq!(framing(&up, upgrade), Framing::Tunnel);
    assert!(!Framing::Tunnel.reusable());
    // A 101 the client did not ask for is an ordinary response.
    assert_eq!(framing(&up, plain), Framing::Close);
}

#[test]
fn connection_reuse() {
    let close = |input: &[u8]| head(input).connection_close();
    assert!(!close(b"HTTP/1.1 200 OK\r\n\r\n"));
    assert!(close(b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n"));
    assert!(close(
        b"HTTP/1.1 200 OK\r\nConnection: Keep-Alive, CLOSE\r\n\r\n"
    ));
    // nginx searches for the substring.
    assert!(close(b"HTTP/1.1 200 OK\r\nConnection: closed\r\n\r\n"));
    assert!(close(
        b"HTTP/1.1 200 OK\r\nConnection: keep-alive\r\nConnection: close\r\n\r\n"
    ));
    // HTTP/1.0 is never reused by nginx, keep-alive or not.
    assert!(close(b"HTTP/1.0 200 OK\r\nConnection: keep-alive\r\n\r\n"));
}

#[test]
fn nginx_122_framing_headers() {
    // The last Content-Length wins.
    let h = head(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Length: 7\r\n\r\n");
    assert_eq!(h.content_length(), Some(7));
    assert!(!h.keep_alive(), "served as nginx does, never reused");
    // An unparsable length is no length.
    for v in ["abc", "-1", "+5", "5 5", "", "99999999999999999999"] {
        let h = head(format!("HTTP/1.1 200 OK\r\nContent-Length: {v}\r\n\r\n").as_bytes());
        assert_eq!(
            framing(&h, UpstreamRequest::default()),
            Framing::Close,
            "{v}"
        );
        assert!(!h.keep_alive());
    }
    // Chunked wins over Content-Length, in either order.
    for input in [
        &b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n"[..],
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n",
    ] {
        let h = head(input);
        assert_eq!(h.content_length(), None);
        assert_eq!(framing(&h, UpstreamRequest::default()), Framing::Chunked);
        assert!(!h.keep_alive());
    }
    // "chunked" anywhere in the value, in any case.
    let h = head(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, CHUNKED\r\n\r\n");
    assert!(h.chunked() && !h.keep_alive());
    let h = head(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\nContent-Length: 3\r\n\r\n");
    assert_eq!(framing(&h, UpstreamRequest::default()), Framing::Length(3));
    let h = head(
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n",
    );
    assert!(h.chunked() && !h.keep_alive());
}

#[test]
fn nginx_123_framing_headers_are_errors() {
    let strict = |input: &[u8]| {
        parse_rules(input, Rules::Nginx123)
            .expect_err("refused")
            .to_string()
    };
    assert_eq!(
        strict(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\ncontent-length: 5\r\n\r\n"),
        r#"upstream sent duplicate header line: "content-length: 5", previous value: "Content-Length: 5""#
    );
    assert_eq!(
        strict(
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n"
        ),
        r#"upstream sent duplicate header line: "Transfer-Encoding: chunked", previous value: "Transfer-Encoding: chunked""#
    );
    for input in [
        &b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n"[..],
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n",
    ] {
        assert_eq!(
            strict(input),
            r#"upstream sent "Content-Length" and "Transfer-Encoding" headers at the same time"#
        );
    }
    assert_eq!(
        strict(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n"),
        r#"upstream sent unknown "Transfer-Encoding": "gzip, chunked""#
    );
    assert_eq!(
        strict(b"HTTP/1.1 200 OK\r\nContent-Length: 1x\r\n\r\n"),
        r#"upstream sent invalid "Content-Length" header: "Content-Length: 1x""#
    );
    let ok = parse_rules(
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: Chunked\r\n\r\n",
        Rules::Nginx123,
    );
    assert!(ok.unwrap().unwrap().chunked);
}

#[test]
fn buffer_variant_splits_the_head_off() {
    let mut buf = BytesMut::from(&b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"[..]);
    let mut partial = BytesMut::from(&buf[..20]);
    assert!(parse_upstream_head_buf(&mut partial, MAX, Rules::Nginx122)
        .unwrap()
        .is_none());
    assert_eq!(partial.len(), 20);
    let h = parse_upstream_head_buf(&mut buf, MAX, Rules::Nginx122)
        .unwrap()
        .unwrap();
    assert_eq!(&buf[..], b"ok");
    assert_eq!(h.header("Content-Length"), Some(&b"2"[..]));
}

/// Reads a whole body with `decoder` from `input` fed in pieces of `step`; returns the body, the
/// bytes left after it, and whether it ended before the input did.
fn read_body(
    mut decoder: UpstreamBodyDecoder,
    input: &[u8],
    step: usize,
) -> Result<(Vec<u8>, Vec<u8>), UpstreamError> {
    let mut buf = BytesMut::new();
    let mut body = Vec::new();
    let mut fed = 0;
    loop {
        match decoder.decode_buf(&mut buf)? {
            BodyChunk::Data(d) => body.extend_from_slice(&d),
            BodyChunk::Done => {
                let mut rest = buf.to_vec();
                rest.extend_from_slice(&input[fed..]);
                return Ok((body, rest));
            }
            BodyChunk::NeedMore => {
                if fed == input.len() {
                    decoder.eof()?;
                    return Ok((body, Vec::new()));
                }
                let n = step.min(input.len() - fed);
                buf.extend_from_slice(&input[fed..fed + n]);
                fed += n;
            }
        }
    }
}

#[test]
fn chunked_body_with_nginx_grammar() {
    let input = b"5\r\nhello\r\n6 ; x=\x01\n world\n0\nTrailer: t\n\nNEXT";
    for step in 1..=input.len() {
        let d = UpstreamBodyDecoder::new(Framing::Chunked);
        assert_eq!(
            read_body(d, input, step).unwrap(),
            (b"hello world".to_vec(), b"NEXT".to_vec())
        );
    }
    let d = UpstreamBodyDecoder::new(Framing::Chunked);
    assert_eq!(
        d.extra_data_warning(),
        "upstream sent data after final chunk"
    );
    for bad in [
        &b"x\r\n"[..],
        b"5\r\nhelloXX",
        b"5\r\nhello\r\r\n",
        b"-1\r\n",
    ] {
        let err = read_body(UpstreamBodyDecoder::new(Framing::Chunked), bad, 3).unwrap_err();
        assert_eq!(err.to_string(), "upstream sent invalid chunked response");
    }
    let err = read_body(UpstreamBodyDecoder::new(Framing::Chunked), b"5\r\nhel", 2).unwrap_err();
    assert_eq!(
        err.to_string(),
        "upstream prematurely closed connection while reading upstream"
    );
}

#[test]
fn length_close_and_empty_bodies() {
    let got = read_body(UpstreamBodyDecoder::new(Framing::Length(3)), b"abcdef", 2).unwrap();
    assert_eq!(got, (b"abc".to_vec(), b"def".to_vec()));
    assert_eq!(
        UpstreamBodyDecoder::new(Framing::Length(3)).extra_data_warning(),
        "upstream sent more data than specified in \"Content-Length\" header"
    );
    assert_eq!(
        read_body(UpstreamBodyDecoder::new(Framing::Length(9)), b"abc", 2),
        Err(UpstreamError::PrematureClose)
    );
    let got = read_body(UpstreamBodyDecoder::new(Framing::Close), b"all of it", 4).unwrap();
    assert_eq!(got.0, b"all of it");
    let got = read_body(UpstreamBodyDecoder::new(Framing::None), b"next", 4).unwrap();
    assert_eq!(got, (Vec::new(), b"next".to_vec()));
}

/// A head as a backend might send it.
#[derive(Debug, Clone)]
struct Generated {
    minor: u8,
    status: u16,
    reason: String,
    headers: Vec<(String, String)>,
    lf_only: bool,
}

impl Generated {
    fn bytes(&self) -> Vec<u8> {
        let eol = if self.lf_only { "\n" } else { "\r\n" };
        let mut out = format!("HTTP/1.{} {:03}", self.minor, self.status);
        if !self.reason.is_empty() {
            out.push(' ');
            out.push_str(&self.reason);
        }
        out.push_str(eol);
        for (n, v) in &self.headers {
            out.push_str(&format!("{n}: {v}{eol}"));
        }
        out.push_str(eol);
        out.into_bytes()
    }
}

fn generated() -> impl Strategy<Value = Generated> {
    let name = "[A-Za-z0-9_.!#$%&'*+^`|~-]{1,20}".prop_filter("not a framing header", |n| {
        !["content-length", "transfer-encoding", "connection"]
            .contains(&n.to_ascii_lowercase().as_str())
            && !n.starts_with("HTTP")
    });
    let value = "([!-~]([ -~]{0,30}[!-~])?)?";
    (
        0u8..=1,
        100u16..=999,
        "([!-~]([ -~]{0,20}[!-~])?)?",
        proptest::collection::vec((name, value), 0..12),
        any::<bool>(),
    )
        .prop_map(|(minor, status, reason, headers, lf_only)| Generated {
            minor,
            status,
            reason,
            headers,
            lf_only,
        })
}

proptest! {
    #[test]
    fn generated_heads_round_trip(g in generated(), body in proptest::collection::vec(any::<u8>(), 0..8)) {
        let mut input = g.bytes();
        let head_len = input.len();
        input.extend_from_slice(&body);
        let (h, n) = parse_upstream_head(&input, MAX).unwrap().unwrap();
        prop_assert_eq!(n, head_len);
        prop_assert_eq!(h.version(), if g.minor == 0 { Version::Http10 } else { Version::Http11 });
        prop_assert_eq!(h.status(), g.status);
        prop_assert_eq!(h.reason(), g.reason.as_bytes());
        let got: Vec<(Vec<u8>, Vec<u8>)> =
            h.headers().map(|(n, v)| (n.to_vec(), v.to_vec())).collect();
        let want: Vec<(Vec<u8>, Vec<u8>)> = g
            .headers
            .iter()
            .map(|(n, v)| (n.clone().into_bytes(), v.clone().into_bytes()))
            .collect();
        prop_assert_eq!(got, want);
        prop_assert_eq!(bytewise(&input[..head_len], MAX, Rules::Nginx122),
            whole_with(&input, MAX, Rules::Nginx122));
        prop_assert!(roads_agree(&input));
    }

    /// Header lines made of the bytes that matter to either road, after a valid status line:
    /// whatever the fast road takes, the careful road takes the same way.
    #[test]
    fn near_valid_heads_take_both_roads_alike(
        lines in proptest::collection::vec(
            proptest::collection::vec(
                proptest::sample::select(&b"aZ-_:: \t\r\n\r\n\x00\x7f\x01\xc3HTTP/1"[..]),
                0..12,
            ),
            0..6,
        ),
        crlf in any::<bool>(),
    ) {
        let mut input = b"HTTP/1.1 200 OK\r\n".to_vec();
        for l in &lines {
            input.extend_from_slice(l);
            input.extend_from_slice(if crlf { b"\r\n" } else { b"\n" });
        }
        input.extend_from_slice(b"\r\n");
        prop_assert!(roads_agree(&input));
        prop_assert_eq!(bytewise(&input, MAX, Rules::Nginx122),
            whole_with(&input, MAX, Rules::Nginx122));
    }

    #[test]
    fn arbitrary_bytes_never_panic_and_split_consistently(
        input in proptest::collection::vec(any::<u8>(), 0..200),
        max in 1usize..256,
    ) {
        let whole = whole_with(&input, max, Rules::Nginx122);
        prop_assert_eq!(bytewise(&input, max, Rules::Nginx122), whole);
        prop_assert!(roads_agree(&input));
    }
}
