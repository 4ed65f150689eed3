//! Keep-alive, Expect, body framing and smuggling, pipelining, partial heads, 405s.

use super::*;

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
fn trace_and_connect_are_405_with_the_head() {
    for m in ["TRACE", "CONNECT"] {
        let e = parse(format!("{m} / HTTP/1.1\r\nHost: a\r\n\r\n").as_bytes()).unwrap_err();
        assert_eq!(e.status(), 405, "{m}");
    }
}
