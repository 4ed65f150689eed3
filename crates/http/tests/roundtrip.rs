//! A request serialized and parsed back is the same request: method, path, query, headers and
//! body framing survive the trip through the codec.

use proptest::prelude::*;
use shoal_http::{parse_request, BodyKind, Limits, Version};

#[derive(Clone, Debug)]
struct Req {
    method: String,
    /// Decoded path segments (never `.`/`..`, never empty, no `/` or NUL inside).
    segments: Vec<Vec<u8>>,
    query: Option<String>,
    version: Version,
    headers: Vec<(String, String)>,
    body: BodyKind,
}

fn method() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("GET".to_owned()),
        Just("POST".to_owned()),
        // nginx's method characters (a lower-case or `@` method is a 400).
        "[A-Z_-]{1,10}",
    ]
}

fn segment() -> impl Strategy<Value = Vec<u8>> {
    prop::collection::vec(
        prop_oneof![
            4 => prop::sample::select(b"abcxyz019-_.~".to_vec()),
            1 => 1u8..=255,
        ],
        1..8,
    )
    .prop_filter("dot segments", |s| {
        s != b"." && s != b".." && !s.contains(&b'/')
    })
}

fn header() -> impl Strategy<Value = (String, String)> {
    ("[A-Za-z0-9-]{1,16}", "[!-~]([ -~]{0,30}[!-~])?|").prop_filter(
        "framing headers are generated apart",
        |(n, _)| {
            !["host", "content-length", "transfer-encoding"]
                .iter()
                .any(|h| n.eq_ignore_ascii_case(h))
        },
    )
}

fn request() -> impl Strategy<Value = Req> {
    (
        method(),
        prop::collection::vec(segment(), 0..5),
        prop::option::of("[a-z0-9=&%+/.]{0,20}"),
        prop::bool::ANY,
        prop::collection::vec(header(), 0..12),
        prop_oneof![
            Just(BodyKind::Empty),
            (1u64..=i64::MAX as u64).prop_map(BodyKind::Length),
            Just(BodyKind::Chunked),
        ],
    )
        .prop_map(|(method, segments, query, v11, headers, body)| {
            let version = if v11 {
                Version::Http11
            } else {
                Version::Http10
            };
            let body = match (version, body) {
                (Version::Http10, BodyKind::Chunked) => BodyKind::Empty,
                (_, b) => b,
            };
            Req {
                method,
                segments,
                query,
                version,
                headers,
                body,
            }
        })
}

fn encode_segment(seg: &[u8], out: &mut Vec<u8>) {
    for &b in seg {
        if b.is_ascii_alphanumeric() || b"-_.~".contains(&b) {
            out.push(b);
        } else {
            out.extend_from_slice(format!("%{b:02X}").as_bytes());
        }
    }
}

fn serialize(r: &Req) -> (Vec<u8>, Vec<u8>) {
    let mut target = Vec::new();
    for seg in &r.segments {
        target.push(b'/');
        encode_segment(seg, &mut target);
    }
    if r.segments.is_empty() {
        target.push(b'/');
    }
    let mut path = Vec::new();
    for seg in &r.segments {
        path.push(b'/');
        path.extend_from_slice(seg);
    }
    if path.is_empty() {
        path.push(b'/');
    }
    if let Some(q) = &r.query {
        target.push(b'?');
        target.extend_from_slice(q.as_bytes());
    }
    let mut out = Vec::new();
    out.extend_from_slice(r.method.as_bytes());
    out.push(b' ');
    out.extend_from_slice(&target);
    out.push(b' ');
    out.extend_from_slice(r.version.as_str().as_bytes());
    out.extend_from_slice(b"\r\nHost: example.com\r\n");
    for (n, v) in &r.headers {
        out.extend_from_slice(format!("{n}: {v}\r\n").as_bytes());
    }
    match r.body {
        BodyKind::Empty => {}
        BodyKind::Length(n) => out.extend_from_slice(format!("Content-Length: {n}\r\n").as_bytes()),
        BodyKind::Chunked => out.extend_from_slice(b"Transfer-Encoding: chunked\r\n"),
    }
    out.extend_from_slice(b"\r\n");
    (out, path)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn serialize_then_parse_is_identity(r in request()) {
        let (bytes, path) = serialize(&r);
        let limits = Limits {
            underscores_in_headers: true,
            ..Limits::default()
        };
        let parsed = parse_request(&bytes, &limits).expect("valid").expect("complete");
        prop_assert_eq!(parsed.method(), r.method.as_str());
        prop_assert_eq!(parsed.path(), path.as_slice());
        prop_assert_eq!(parsed.query(), r.query.as_deref().map(str::as_bytes));
        prop_assert_eq!(parsed.version(), r.version);
        prop_assert_eq!(parsed.body(), r.body);
        prop_assert_eq!(parsed.head_len(), bytes.len());
        let mut expected: Vec<(String, Vec<u8>)> =
            vec![("Host".to_owned(), b"example.com".to_vec())];
        expected.extend(r.headers.iter().map(|(n, v)| (n.clone(), v.as_bytes().to_vec())));
        match r.body {
            BodyKind::Empty => {}
            BodyKind::Length(n) => {
                expected.push(("Content-Length".to_owned(), n.to_string().into_bytes()))
            }
            BodyKind::Chunked => {
                expected.push(("Transfer-Encoding".to_owned(), b"chunked".to_vec()))
            }
        }
        let got: Vec<(String, Vec<u8>)> =
            parsed.headers().map(|(n, v)| (n.to_owned(), v.to_vec())).collect();
        prop_assert_eq!(got, expected);
    }
}
