use super::encode::*;
use super::*;
use bytes::BytesMut;
use proptest::prelude::*;

/// A record as an application would send it.
fn rec_with(kind: u8, content: &[u8], pad: u8, version: u8, id: u16) -> Vec<u8> {
    let mut r = vec![version, kind];
    r.extend_from_slice(&id.to_be_bytes());
    r.extend_from_slice(&(content.len() as u16).to_be_bytes());
    r.extend_from_slice(&[pad, 0]);
    r.extend_from_slice(content);
    r.extend(std::iter::repeat_n(0, usize::from(pad)));
    r
}

fn rec(kind: u8, content: &[u8]) -> Vec<u8> {
    rec_with(kind, content, 0, 1, 1)
}

fn out(content: &[u8]) -> Vec<u8> {
    rec(6, content)
}

fn err(content: &[u8]) -> Vec<u8> {
    rec(7, content)
}

fn end() -> Vec<u8> {
    end_with(0, 0)
}

fn end_with(app: u32, protocol: u8) -> Vec<u8> {
    let mut c = app.to_be_bytes().to_vec();
    c.extend_from_slice(&[protocol, 0, 0, 0]);
    rec(3, &c)
}

fn cat(parts: &[Vec<u8>]) -> Vec<u8> {
    parts.concat()
}

/// Header lines as (name, value).
type Pairs = Vec<(Vec<u8>, Vec<u8>)>;

/// What decoding an answer gave, with stdout and stderr pieces joined (how they are cut
/// depends on how the bytes arrive).
#[derive(Default, PartialEq, Eq)]
struct Answer {
    head: Option<(u16, Vec<u8>, Pairs)>,
    stdout: Vec<u8>,
    stderr: Vec<u8>,
    surplus: usize,
    end: Option<EndRequest>,
    error: Option<FastcgiError>,
    /// Bytes left in the buffer after the end.
    left: usize,
}

impl std::fmt::Debug for Answer {
    /// Short: long heads and bodies as their lengths.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let head = self.head.as_ref().map(|(status, line, headers)| {
            (*status, crate::lossy(line).into_owned(), headers.len())
        });
        f.debug_struct("Answer")
            .field("head", &head)
            .field(
                "stdout",
                &(self.stdout.len(), crate::crc32::crc32(&self.stdout)),
            )
            .field("stderr", &self.stderr.len())
            .field("surplus", &self.surplus)
            .field("end", &self.end)
            .field("error", &self.error)
            .field("left", &self.left)
            .finish()
    }
}

/// Decodes `input` arriving `chunk` bytes at a time, then the close.
fn decode_with(input: &[u8], max: usize, keep_conn: bool, head_req: bool, chunk: usize) -> Answer {
    let mut d = Decoder::new(max, keep_conn, head_req);
    let mut a = Answer::default();
    let mut buf = BytesMut::new();
    let mut pieces = input.chunks(chunk.max(1));
    loop {
        loop {
            match d.decode(&mut buf) {
                Ok(Some(Event::Head(h))) => {
                    assert!(a.head.is_none() && a.stdout.is_empty());
                    a.head = Some((
                        h.status(),
                        h.status_line().to_vec(),
                        h.headers().map(|(n, v)| (n.to_vec(), v.to_vec())).collect(),
                    ));
                }
                Ok(Some(Event::Stdout(b))) => {
                    assert!(!b.is_empty() && a.head.is_some());
                    a.stdout.extend_from_slice(&b);
                }
                Ok(Some(Event::Stderr(e))) => {
                    assert!(!e.bytes().is_empty());
                    a.stderr.extend_from_slice(e.bytes());
                }
                Ok(Some(Event::Surplus(_))) => a.surplus += 1,
                Ok(Some(Event::End(e))) => {
                    assert!(d.is_done());
                    a.end = Some(e);
                }
                Ok(None) => break,
                Err(e) => {
                    a.error = Some(e);
                    return a;
                }
            }
        }
        if d.is_done() {
            a.left = buf.len() + pieces.map(<[u8]>::len).sum::<usize>();
            return a;
        }
        match pieces.next() {
            Some(p) => buf.extend_from_slice(p),
            None => {
                a.error = d.eof().err();
                return a;
            }
        }
    }
}

fn too_big(a: &Answer) -> bool {
    a.error == Some(FastcgiError::Head(UpstreamError::TooBigHeader))
}

/// Decodes `input` whole, and in pieces of every size up to 17 bytes: the answers must agree,
/// unless the head was too big one way (whether it is depends on how the bytes arrive, as in
/// nginx: its buffer starts over when a read held only stderr).
fn decode_opts(input: &[u8], max: usize, keep_conn: bool, head_req: bool) -> Answer {
    let whole = decode_with(input, max, keep_conn, head_req, input.len());
    for chunk in 1..=17 {
        let pieces = decode_with(input, max, keep_conn, head_req, chunk);
        if !too_big(&whole) && !too_big(&pieces) {
            assert_eq!(pieces, whole, "in pieces of {chunk}");
        }
    }
    whole
}

fn decode(input: &[u8]) -> Answer {
    decode_opts(input, 4096, false, false)
}

fn error(input: &[u8]) -> String {
    decode(input).error.expect("an error").to_string()
}

#[test]
fn begin_request_as_nginx_sends_it() {
    let mut b = BytesMut::new();
    begin_request(&mut b, false);
    assert_eq!(
        &b[..],
        b"\x01\x01\x00\x01\x00\x08\x00\x00\x00\x01\x00\x00\x00\x00\x00\x00"
    );
    let mut b = BytesMut::new();
    begin_request(&mut b, true);
    assert_eq!(b[10], 1, "FCGI_KEEP_CONN");
}

/// Reads PARAMS records back into pairs (what an application does), checking each record.
fn read_params(mut b: &[u8]) -> (Pairs, Vec<usize>) {
    let mut stream = Vec::new();
    let mut records = Vec::new();
    loop {
        assert_eq!(&b[..4], &[1, 4, 0, 1]);
        let len = usize::from(u16::from_be_bytes([b[4], b[5]]));
        let pad = usize::from(b[6]);
        assert_eq!((len + pad) % 8, 0);
        assert!(len + pad <= 65535);
        assert!(b[8 + len..8 + len + pad].iter().all(|&z| z == 0));
        stream.extend_from_slice(&b[8..8 + len]);
        b = &b[8 + len + pad..];
        if len == 0 {
            assert!(b.is_empty());
            break;
        }
        records.push(len);
    }
    let mut pairs = Vec::new();
    let mut s = &stream[..];
    let length = |s: &mut &[u8]| {
        if s[0] & 0x80 != 0 {
            let n = u32::from_be_bytes([s[0] & 0x7f, s[1], s[2], s[3]]) as usize;
            *s = &s[4..];
            n
        } else {
            let n = usize::from(s[0]);
            *s = &s[1..];
            n
        }
    };
    while !s.is_empty() {
        let n = length(&mut s);
        let v = length(&mut s);
        pairs.push((s[..n].to_vec(), s[n..n + v].to_vec()));
        s = &s[n + v..];
    }
    (pairs, records)
}

#[test]
fn params_as_nginx_lays_them() {
    let mut b = BytesMut::new();
    params(
        &mut b,
        [
            (&b"QUERY_STRING"[..], &b""[..]),
            (b"REQUEST_METHOD", b"POST"),
        ],
    );
    let content = b"\x0c\x00QUERY_STRING\x0e\x04REQUEST_METHODPOST";
    let mut want = vec![1, 4, 0, 1, 0, content.len() as u8, 6, 0];
    want.extend_from_slice(content);
    want.extend_from_slice(&[0; 6]);
    want.extend_from_slice(&[1, 4, 0, 1, 0, 0, 0, 0]);
    assert_eq!(&b[..], &want[..]);
    // Lengths over 127 take four bytes, the high bit set.
    let long = vec![b'v'; 200];
    let mut b = BytesMut::new();
    params(&mut b, [(&b"N"[..], &long[..])]);
    assert_eq!(&b[8..13], &[1, 0x80, 0, 0, 200]);
    assert_eq!(read_params(&b).0, vec![(b"N".to_vec(), long.clone())]);
    assert_eq!(params_len([(&b"N"[..], &long[..])]), 206);
    // No params: just the empty record.
    let mut b = BytesMut::new();
    params(&mut b, std::iter::empty());
    assert_eq!(&b[..], &[1, 4, 0, 1, 0, 0, 0, 0]);
}

#[test]
fn params_over_one_record() {
    let values: Vec<Vec<u8>> = (0..5u8).map(|i| vec![b'a' + i; 30_000]).collect();
    let names: Vec<Vec<u8>> = (0..5).map(|i| format!("P{i}").into_bytes()).collect();
    let pairs: Vec<(&[u8], &[u8])> = names
        .iter()
        .zip(&values)
        .map(|(n, v)| (&n[..], &v[..]))
        .collect();
    let len = params_len(pairs.iter().copied());
    assert_eq!(len, 5 * (1 + 4 + 2 + 30_000));
    assert_eq!(
        check_params_len(len).unwrap_err().to_string(),
        format!("fastcgi request record is too big: {len}")
    );
    assert_eq!(check_params_len(65535), Ok(()));
    let mut b = BytesMut::new();
    params(&mut b, pairs.iter().copied());
    let (back, records) = read_params(&b);
    assert_eq!(back.len(), 5);
    assert!(back
        .iter()
        .zip(&pairs)
        .all(|(a, b)| a.0 == b.0 && a.1 == b.1));
    // Two pairs a record: pairs stay whole.
    assert_eq!(records, vec![60_014, 60_014, 30_007]);
    // A pair longer than a record runs over two.
    let huge = vec![b'h'; 70_000];
    let mut b = BytesMut::new();
    params(&mut b, [(&b"H"[..], &huge[..]), (b"A", b"1")]);
    let (back, records) = read_params(&b);
    assert_eq!(
        back,
        vec![(b"H".to_vec(), huge), (b"A".to_vec(), b"1".to_vec())]
    );
    assert_eq!(records, vec![PARAMS_RECORD, 70_006 - PARAMS_RECORD + 4]);
}

#[test]
fn stdin_as_nginx_cuts_it() {
    let body = vec![b'b'; 70_001];
    let mut b = BytesMut::new();
    stdin(&mut b, &body);
    stdin(&mut b, b"");
    stdin_end(&mut b);
    // nginx: 32768, 32768, then 4465 padded with 7, then the empty record.
    let mut at = 0;
    for (len, pad) in [(32768, 0), (32768, 0), (4465, 7), (0, 0)] {
        assert_eq!(&b[at..at + 2], &[1, 5]);
        assert_eq!(usize::from(u16::from_be_bytes([b[at + 4], b[at + 5]])), len);
        assert_eq!(usize::from(b[at + 6]), pad);
        at += 8 + len + pad;
    }
    assert_eq!(at, b.len());
    let pieces: Vec<u8> = stdin_pieces(Bytes::from(body.clone())).flatten().collect();
    assert_eq!(&pieces[..], &b[..b.len() - 8]);
    assert_eq!(stdin_pieces(Bytes::new()).count(), 0);
    let whole = request(true, [(&b"A"[..], &b"1"[..])], b"xyz");
    assert_eq!(whole.len(), 16 + 8 + 8 + 8 + 8 + 8 + 8);
}

#[test]
fn an_ordinary_answer() {
    let input = cat(&[
        out(b"Content-Type: text/plain\r\n\r\nhel"),
        out(b"lo"),
        end_with(0, 0),
    ]);
    let a = decode(&input);
    let (status, line, headers) = a.head.unwrap();
    assert_eq!((status, &line[..]), (200, &b"200 OK"[..]));
    assert_eq!(
        headers,
        vec![(b"Content-Type".to_vec(), b"text/plain".to_vec())]
    );
    assert_eq!(a.stdout, b"hello");
    assert_eq!(
        a.end,
        Some(EndRequest {
            app_status: 0,
            protocol_status: 0
        })
    );
    assert_eq!((a.error, a.left), (None, 0));
    // The status fields, padding, and a head split over records anywhere.
    let input = cat(&[
        rec_with(6, b"Content-Ty", 6, 1, 1),
        out(b"pe: text/plain\r\nStatus: 404 Not Found\r\nX-A: 1"),
        out(b"\r\n\r"),
        out(b"\nbody"),
        rec_with(3, &[0, 0, 1, 2, 1, 0, 0, 0], 3, 1, 1),
    ]);
    let a = decode(&input);
    let (status, line, headers) = a.head.unwrap();
    assert_eq!(
        (status, &line[..], headers.len()),
        (404, &b"404 Not Found"[..], 3)
    );
    assert_eq!(a.stdout, b"body");
    assert_eq!(
        a.end,
        Some(EndRequest {
            app_status: 258,
            protocol_status: 1
        })
    );
    // An empty STDOUT after the head is no end; more may follow.
    let a = decode(&cat(&[
        out(b"A: 1\r\n\r\nhi"),
        out(b""),
        out(b"more"),
        end(),
    ]));
    assert_eq!(a.stdout, b"himore");
}

#[test]
fn stderr_is_handed_out_and_trimmed_as_nginx_logs_it() {
    let input = cat(&[
        err(b"PHP Warning:  foo\n"),
        out(b"Content-Type: text/plain\r\n\r\nhi"),
        err(b"after head\r\n"),
        out(b"more"),
        end(),
    ]);
    let a = decode(&input);
    assert_eq!(a.stderr, b"PHP Warning:  foo\nafter head\r\n");
    assert_eq!(a.stdout, b"himore");
    let shown = |b: &'static [u8]| Stderr(Bytes::from_static(b)).to_string();
    assert_eq!(
        shown(b"PHP Warning:  foo\n"),
        "FastCGI sent in stderr: \"PHP Warning:  foo\""
    );
    assert_eq!(
        shown(b"foo...\t. \r\n"),
        "FastCGI sent in stderr: \"foo...\t\""
    );
    assert_eq!(shown(b"\r\n"), "FastCGI sent in stderr: \"\r\"");
    assert_eq!(
        shown(b"line1\nline2\n\n"),
        "FastCGI sent in stderr: \"line1\nline2\""
    );
    assert_eq!(
        shown(b"\r\n\n  lead"),
        "FastCGI sent in stderr: \"\r\n\n  lead\""
    );
    assert_eq!(
        shown(b"a\x01b\"c\xffd  "),
        "FastCGI sent in stderr: \"a\x01b\"c\\xffd\""
    );
    // An empty STDERR record says nothing.
    let a = decode(&cat(&[err(b""), out(b"\r\n"), end()]));
    assert!(a.stderr.is_empty() && a.end.is_some());
}

#[test]
fn bad_records_word_nginx_s_lines() {
    let head = b"Content-Type: text/plain\r\n\r\nhi";
    let cases: [(Vec<u8>, &str); 8] = [
        (
            cat(&[rec_with(6, head, 0, 2, 1), end()]),
            "upstream sent unsupported FastCGI protocol version: 2",
        ),
        (
            cat(&[rec(9, b"xx"), end()]),
            "upstream sent invalid FastCGI record type: 9",
        ),
        (
            cat(&[rec(11, &[1, 0, 0, 0, 0, 0, 0, 0]), out(head), end()]),
            "upstream sent invalid FastCGI record type: 11",
        ),
        (
            cat(&[rec_with(6, head, 0, 1, 2), end()]),
            "upstream sent unexpected FastCGI request id low byte: 2",
        ),
        (
            cat(&[rec_with(6, head, 0, 1, 0x100), end()]),
            "upstream sent unexpected FastCGI request id high byte: 1",
        ),
        (
            cat(&[out(b"Content-Type: text/plain\r\n"), end()]),
            "upstream sent unexpected FastCGI record: 3",
        ),
        (
            cat(&[out(b""), out(head), end()]),
            "upstream prematurely closed FastCGI stdout",
        ),
        (
            cat(&[out(b"A: 1\r\nBad Header: x\r\n\r\n"), end()]),
            "upstream sent invalid header: \"Bad\\x20...\"",
        ),
    ];
    for (input, want) in cases {
        assert_eq!(error(&input), want);
    }
    // After the head too: the answer stops there.
    let a = decode(&cat(&[out(head), rec(9, b"xx"), end()]));
    assert_eq!(a.stdout, b"hi");
    assert_eq!(a.error, Some(FastcgiError::InvalidRecordType(9)));
    assert_eq!(
        error(&cat(&[out(b"Status: abc\r\n\r\nx"), end()])),
        "upstream sent invalid status \"abc\""
    );
    // A bad version is seen as soon as its byte is.
    let mut d = Decoder::new(4096, false, false);
    let mut buf = BytesMut::from(&[0u8][..]);
    assert_eq!(
        d.decode(&mut buf).unwrap_err(),
        FastcgiError::UnsupportedVersion(0)
    );
}

#[test]
fn content_length_holds_the_body() {
    let a = decode(&cat(&[out(b"Content-Length: 3\r\n\r\nhello"), end()]));
    assert_eq!((&a.stdout[..], a.surplus), (&b"hel"[..], 1));
    assert_eq!(
        Surplus.to_string(),
        "upstream sent more data than specified in \"Content-Length\" header"
    );
    let a = decode(&cat(&[
        out(b"Content-Length: 3\r\n\r\nhe"),
        out(b"llo"),
        out(b"!"),
        end(),
    ]));
    assert_eq!((&a.stdout[..], a.surplus), (&b"hel"[..], 1));
    let a = decode(&cat(&[out(b"Content-Length: 10\r\n\r\nhello"), end()]));
    assert_eq!(
        a.error.unwrap().to_string(),
        "upstream prematurely closed FastCGI request"
    );
    // Not for a HEAD request; nothing after 204.
    let a = decode_opts(
        &cat(&[out(b"Content-Length: 10\r\n\r\n"), end()]),
        4096,
        true,
        true,
    );
    assert_eq!((a.error, a.end.is_some()), (None, true));
    let a = decode(&cat(&[
        out(b"Status: 204\r\nContent-Length: 10\r\n\r\n"),
        end(),
    ]));
    assert_eq!((a.error, a.end.is_some()), (None, true));
    // A body after 204, or past `Content-Length: 0`, is surplus (nginx warns, as checked).
    for head in [
        &b"Status: 204\r\n\r\nxx"[..],
        b"Content-Length: 0\r\n\r\nxx",
    ] {
        let a = decode(&cat(&[out(head), end()]));
        assert_eq!((a.stdout.len(), a.surplus, a.end.is_some()), (0, 1, true));
    }
    // The last Content-Length counts; a bad one is none.
    let a = decode(&cat(&[
        out(b"Content-Length: 3\r\nContent-Length: 4\r\n\r\nhello"),
        end(),
    ]));
    assert_eq!(a.stdout, b"hell");
    let a = decode(&cat(&[out(b"Content-Length: abc\r\n\r\nhello"), end()]));
    assert_eq!((&a.stdout[..], a.surplus), (&b"hello"[..], 0));
}

#[test]
fn a_close_before_the_end() {
    let head = out(b"Content-Type: text/plain\r\n\r\nhello");
    // Without keep-conn the close ends the answer, even mid-record.
    let a = decode(&head);
    assert_eq!((&a.stdout[..], a.error), (&b"hello"[..], None));
    let a = decode(&head[..head.len() - 2]);
    assert_eq!((&a.stdout[..], a.error), (&b"hel"[..], None));
    // With it, the answer was cut short.
    let a = decode_opts(&head, 4096, true, false);
    assert_eq!(
        a.error.unwrap().to_string(),
        "upstream prematurely closed connection"
    );
    // Before the head, either way.
    let a = decode(&head[..20]);
    assert_eq!(a.error, Some(FastcgiError::PrematureClose));
    // Bytes after the end are not the answer's.
    let a = decode_opts(&cat(&[head.clone(), end(), out(b"x")]), 4096, true, false);
    assert_eq!((a.end.is_some(), a.left), (true, 9));
}

#[test]
fn the_head_fits_in_the_buffer_as_nginx_counts_it() {
    let head = |n: usize| {
        let mut h = b"X: ".to_vec();
        h.resize(n - 4, b'a');
        h.extend_from_slice(b"\r\n\r\n");
        h
    };
    // One record: 8 + 4088 bytes fit in 4096, 8 + 4089 do not.
    assert!(decode(&cat(&[out(&head(4088)), end()])).head.is_some());
    assert_eq!(
        decode(&cat(&[out(&head(4089)), end()])).error,
        Some(FastcgiError::Head(UpstreamError::TooBigHeader))
    );
    // The body after the head does not count, nor does the padding after it.
    assert!(decode(&cat(&[
        out(&[head(4088), b"body".to_vec()].concat()),
        end()
    ]))
    .head
    .is_some());
    assert!(decode(&cat(&[rec_with(6, &head(4088), 8, 1, 1), end()]))
        .head
        .is_some());
    // Two records: both headers count.
    let h = head(4080);
    assert!(decode(&cat(&[out(&h[..2000]), out(&h[2000..]), end()]))
        .head
        .is_some());
    let h = head(4081);
    assert!(decode(&cat(&[out(&h[..2000]), out(&h[2000..]), end()]))
        .error
        .is_some());
    // Stderr read with the head counts: 108 + 3988 fit, 108 + 3996 do not.
    assert!(decode(&cat(&[err(&[b'e'; 100]), out(&head(3980)), end()]))
        .head
        .is_some());
    assert!(decode(&cat(&[err(&[b'e'; 100]), out(&head(4080)), end()]))
        .error
        .is_some());
}

/// Feeds `reads` one after the other, draining the decoder after each.
fn decode_reads(reads: &[Vec<u8>], max: usize) -> Answer {
    let mut d = Decoder::new(max, false, false);
    let mut a = Answer::default();
    let mut buf = BytesMut::new();
    for r in reads {
        buf.extend_from_slice(r);
        loop {
            match d.decode(&mut buf) {
                Ok(Some(Event::Head(h))) => a.head = Some((h.status(), Vec::new(), Vec::new())),
                Ok(Some(Event::Stdout(b))) => a.stdout.extend_from_slice(&b),
                Ok(Some(Event::Stderr(e))) => a.stderr.extend_from_slice(e.bytes()),
                Ok(Some(Event::Surplus(_))) => a.surplus += 1,
                Ok(Some(Event::End(e))) => a.end = Some(e),
                Ok(None) => break,
                Err(e) => {
                    a.error = Some(e);
                    return a;
                }
            }
        }
    }
    a
}

#[test]
fn stderr_read_before_the_head_frees_the_buffer() {
    let head = {
        let mut h = b"X: ".to_vec();
        h.resize(2996, b'a');
        h.extend_from_slice(b"\r\n\r\n");
        h
    };
    // As nginx: stderr alone in the buffer is logged and the buffer starts over, however
    // many times, even when it filled it.
    for stderr in [vec![b'e'; 3000], vec![b'e'; 4088]] {
        let a = decode_reads(&[err(&stderr), cat(&[out(&head), end()])], 4096);
        assert!(a.end.is_some(), "{a:?}");
    }
    let mut flood: Vec<Vec<u8>> = (0..20).map(|_| err(&[b'e'; 3000])).collect();
    flood.push(cat(&[out(&head), end()]));
    let a = decode_reads(&flood, 4096);
    assert_eq!((a.stderr.len(), a.end.is_some()), (60_000, true));
    // In one read, stderr and the head share the buffer.
    let a = decode_reads(&[cat(&[err(&[b'e'; 3000]), out(&head), end()])], 4096);
    assert_eq!(
        a.error,
        Some(FastcgiError::Head(UpstreamError::TooBigHeader))
    );
    // Once the head has begun, stderr between its pieces stays in the buffer: 2008 + 1008 +
    // 2008 bytes do not fit, 2008 + 2008 do.
    let mut head = b"X: ".to_vec();
    head.resize(3996, b'a');
    head.extend_from_slice(b"\r\n\r\n");
    let reads = |stderr: &[u8]| {
        let mut reads = vec![out(&head[..2000])];
        if !stderr.is_empty() {
            reads.push(err(stderr));
        }
        reads.push(cat(&[out(&head[2000..]), end()]));
        decode_reads(&reads, 4096)
    };
    assert!(reads(b"").end.is_some());
    assert!(too_big(&reads(&[b'e'; 1000])));
    // A stderr record longer than the buffer comes out in pieces of the buffer.
    let mut d = Decoder::new(4096, false, false);
    let mut buf = BytesMut::from(&err(&[b'e'; 5000])[..]);
    let mut pieces = Vec::new();
    while let Some(Event::Stderr(e)) = d.decode(&mut buf).unwrap() {
        pieces.push(e.bytes().len());
    }
    assert_eq!(pieces, vec![4088, 912]);
}

proptest! {
    /// Any bytes, any cut, any buffer size: no panic, and the same answer however the bytes
    /// arrive (pieces of 1 to 17 bytes and whole).
    #[test]
    fn any_bytes(input in proptest::collection::vec(any::<u8>(), 0..400), max in 0usize..300, keep: bool, head_req: bool) {
        let _ = decode_opts(&input, max, keep, head_req);
    }

    /// Answers made of valid records decode to what was sent.
    #[test]
    fn valid_answers(body in proptest::collection::vec(any::<u8>(), 0..2000), cuts in proptest::collection::vec(1usize..300, 0..10), stderr in proptest::collection::vec(1u8..=255, 0..50)) {
        let mut stdout = b"Status: 201 Made\r\nX: y\r\n\r\n".to_vec();
        stdout.extend_from_slice(&body);
        let mut input = err(&stderr);
        let mut rest = &stdout[..];
        for c in cuts {
            let (a, b) = rest.split_at(c.min(rest.len()));
            input.extend(rec_with(6, a, (8 - a.len() % 8) as u8 % 8, 1, 1));
            rest = b;
        }
        input.extend(out(rest));
        input.extend(end());
        let a = decode_with(&input, 4096, true, false, 7);
        prop_assert_eq!(a.error, None);
        prop_assert_eq!(a.head.map(|h| h.0), Some(201));
        prop_assert_eq!(a.stdout, body);
        prop_assert_eq!(a.stderr, stderr);
    }
}

/// A flood of stderr before the head, read in pieces the size of nginx's buffer (as the
/// server reads it): every piece is logged and consumed, so the head still fits, wherever the
/// pieces end (in a record's content, its padding, or right after a record header).
#[test]
fn a_stderr_flood_before_the_head_fits_piece_by_piece() {
    fn rec(kind: u8, content: &[u8]) -> Vec<u8> {
        let pad = (8 - content.len() % 8) % 8;
        let mut r = vec![1, kind, 0, 1];
        r.extend_from_slice(&(content.len() as u16).to_be_bytes());
        r.extend_from_slice(&[pad as u8, 0]);
        r.extend_from_slice(content);
        r.extend(std::iter::repeat_n(0u8, pad));
        r
    }
    for first in 0..24 {
        let mut all = Vec::new();
        for i in 0..(2000 + first) {
            all.extend(rec(7, format!("noise {i}").as_bytes()));
        }
        all.extend(rec(6, b"Content-Type: text/plain\r\n\r\nafter"));
        let mut d = Decoder::new(4096, false, false);
        let mut buf = BytesMut::new();
        let (mut pos, mut stderr) = (0, 0);
        loop {
            match d.decode(&mut buf) {
                Ok(Some(Event::Head(_))) => break,
                Ok(Some(Event::Stderr(_))) => stderr += 1,
                Ok(Some(_)) => {}
                Ok(None) => {
                    let room = 4096usize.saturating_sub(buf.len()).max(8);
                    let end = (pos + room).min(all.len());
                    assert!(end > pos, "ran out of input");
                    buf.extend_from_slice(&all[pos..end]);
                    pos = end;
                }
                Err(e) => panic!("{e} after {pos} bytes ({first})"),
            }
        }
        assert!(stderr >= 2000 + first);
    }
}
