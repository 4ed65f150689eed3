//! The cases checked against nginx 1.22 (each sent to a `listen ... proxy_protocol` and the
//! answer's `$proxy_protocol_*` or the error log read), and the parser's own promises: any
//! prefix of a header is `Incomplete`, the answer does not depend on bytes after the header,
//! and nothing past `max` is looked at.

use super::*;

const MAX: usize = 1024;

fn v1(text: &str) -> Parsed {
    parse(text.as_bytes(), MAX)
}

fn addrs(p: &Parsed) -> (&str, &str, u16, u16) {
    match p {
        Parsed::Done {
            header: Some(h), ..
        } => (&h.src_addr, &h.dst_addr, h.src_port, h.dst_port),
        other => panic!("no addresses: {other:?}"),
    }
}

fn v2(cmd: u8, fam: u8, body: &[u8]) -> Vec<u8> {
    let mut out = V2_SIGNATURE.to_vec();
    out.push(0x20 | cmd);
    out.push(fam);
    out.extend_from_slice(&(body.len() as u16).to_be_bytes());
    out.extend_from_slice(body);
    out
}

fn tcp4_body(tlvs: &[u8]) -> Vec<u8> {
    let mut b = vec![1, 2, 3, 4, 5, 6, 7, 8];
    b.extend_from_slice(&1111u16.to_be_bytes());
    b.extend_from_slice(&2222u16.to_be_bytes());
    b.extend_from_slice(tlvs);
    b
}

fn tlv(t: u8, v: &[u8]) -> Vec<u8> {
    let mut out = vec![t];
    out.extend_from_slice(&(v.len() as u16).to_be_bytes());
    out.extend_from_slice(v);
    out
}

#[test]
fn version_1_as_nginx_reads_it() {
    let line = "PROXY TCP4 1.2.3.4 5.6.7.8 1111 2222\r\n";
    let p = v1(&format!("{line}GET / HTTP/1.0\r\n\r\n"));
    assert_eq!(addrs(&p), ("1.2.3.4", "5.6.7.8", 1111, 2222));
    assert!(matches!(p, Parsed::Done { len, .. } if len == line.len()));
    // Addresses are kept as text, whatever the family says.
    assert_eq!(
        addrs(&v1("PROXY TCP4 999.1.1.1 ::2 1 2\r\n")).0,
        "999.1.1.1"
    );
    assert_eq!(addrs(&v1("PROXY TCP4 ab.cd 5.6.7.8 1 2\r\n")).0, "ab.cd");
    assert_eq!(addrs(&v1("PROXY TCP6 ::1 ::2 1 2\r\n")).1, "::2");
    // Port 0 and leading zeros are accepted; 65536 is not.
    assert_eq!(addrs(&v1("PROXY TCP4 1.2.3.4 5.6.7.8 0 2222\r\n")).2, 0);
    assert_eq!(addrs(&v1("PROXY TCP4 1.2.3.4 5.6.7.8 01111 2\r\n")).2, 1111);
    for broken in [
        "PROXY TCP5 1.2.3.4 5.6.7.8 1111 2222\r\n",
        "PROXY TCP4 1.2.3.4 5.6.7.8 65536 2222\r\n",
        "PROXY TCP4 1.2.3.4 5.6.7.8 11111111111111111111 2222\r\n",
        "PROXY TCP4 1.2.3.4 5.6.7.8 1111 2222\n",
        "PROXY TCP4 1.2.3.4 5.6.7.8 1111 2222 extra\r\n",
        "PROXY TCP4 1.2.3.4 5.6.7.8 1111 2222 \r\n",
        "PROXY TCP4 1.2.3.4  5.6.7.8 1111 2222\r\n",
        "PROXY TCP4 1.2.3.4 5.6.7.8 1111 +22\r\n",
        "PROXY TCP4 1.2.3.g 5.6.7.8 1 2\r\n",
        "proxy TCP4 1.2.3.4 5.6.7.8 1111 2222\r\n",
        "PROXY GET / HTTP/1.0\r\n",
        "GET / HTTP/1.0\r\n\r\n",
        "PROXY TCP4 1.2.3.4 5.6.7.8 1111 2222\rX",
    ] {
        assert_eq!(v1(broken), Parsed::Broken(Broken::Header), "{broken}");
    }
}

#[test]
fn unknown_carries_nothing_up_to_the_first_crlf() {
    assert_eq!(
        v1("PROXY UNKNOWN\r\nGET"),
        Parsed::Done {
            header: None,
            len: 15
        }
    );
    assert!(matches!(
        v1("PROXY UNKNOWNX whatever\r\n"),
        Parsed::Done { header: None, .. }
    ));
    // A lone LF is not the end: the header runs to the request line's CRLF (nginx then
    // waits for a request that never starts).
    assert_eq!(
        v1("PROXY UNKNOWN\nGET / HTTP/1.0\r\n"),
        Parsed::Done {
            header: None,
            len: 30
        }
    );
    // No CRLF within the limit: broken.
    let long = format!("PROXY UNKNOWN {}\r\n", "x".repeat(MAX));
    assert_eq!(v1(&long), Parsed::Broken(Broken::Header));
    let fits = format!("PROXY UNKNOWN {}\r\n", "x".repeat(MAX - 16));
    assert!(matches!(v1(&fits), Parsed::Done { .. }));
}

#[test]
fn version_2_addresses_and_skipped_headers() {
    let h = v2(1, TCP4, &tcp4_body(&[]));
    let p = parse(&h, MAX);
    assert_eq!(addrs(&p), ("1.2.3.4", "5.6.7.8", 1111, 2222));
    assert!(matches!(p, Parsed::Done { len: 28, .. }));
    let mut six = Vec::new();
    six.extend_from_slice(&"2001:db8::1".parse::<Ipv6Addr>().unwrap().octets());
    six.extend_from_slice(&"::ffff:1.2.3.4".parse::<Ipv6Addr>().unwrap().octets());
    six.extend_from_slice(&[0, 0, 0x08, 0xae]);
    assert_eq!(
        addrs(&parse(&v2(1, TCP6, &six), MAX)),
        ("2001:db8::1", "::ffff:1.2.3.4", 0, 2222)
    );
    // LOCAL, an unknown command, UDP, unix sockets, AF_UNSPEC: consumed, nothing kept.
    for (cmd, fam, body) in [
        (0, TCP4, tcp4_body(&[])),
        (2, TCP4, tcp4_body(&[])),
        (1, 0x12, tcp4_body(&[])),
        (1, 0x31, vec![0; 216]),
        (1, 0x00, vec![]),
        (1, 0x41, vec![7; 12]),
    ] {
        let h = v2(cmd, fam, &body);
        assert_eq!(
            parse(&h, MAX),
            Parsed::Done {
                header: None,
                len: h.len()
            },
            "{cmd} {fam:#x}"
        );
    }
    // A short address block is closed silently; other versions are named.
    assert_eq!(
        parse(&v2(1, TCP4, &[1, 2, 3, 4]), MAX),
        Parsed::Broken(Broken::Silent)
    );
    let mut h = v2(1, TCP4, &tcp4_body(&[]));
    h[12] = 0x11;
    assert_eq!(parse(&h, MAX), Parsed::Broken(Broken::Version(1)));
    h[12] = 0x31;
    assert_eq!(parse(&h, MAX), Parsed::Broken(Broken::Version(3)));
    // A length past the limit.
    let big = v2(1, TCP4, &tcp4_body(&tlv(0xe0, &[b'x'; 2000])));
    assert_eq!(parse(&big, MAX), Parsed::Broken(Broken::TooLarge));
    assert!(matches!(parse(&big, 4096), Parsed::Done { .. }));
}

#[test]
fn version_2_length_is_trusted() {
    // nginx takes the length as it says, even into the request's bytes.
    let mut h = v2(1, TCP4, &tcp4_body(&[]));
    h[15] += 10;
    h.extend_from_slice(b"GET / HTTP/1.0\r\n\r\n");
    assert!(matches!(parse(&h, MAX), Parsed::Done { len: 38, .. }));
}

#[test]
fn every_prefix_is_incomplete() {
    let mut headers = vec![
        b"PROXY TCP4 1.2.3.4 5.6.7.8 1111 2222\r\n".to_vec(),
        b"PROXY TCP6 ::1 ::2 1 2\r\n".to_vec(),
        b"PROXY UNKNOWN\r\n".to_vec(),
        v2(1, TCP4, &tcp4_body(&tlv(1, b"h2"))),
        v2(0, 0, &[]),
    ];
    headers.push(v2(1, 0x21, &[0; 36]));
    for h in headers {
        for n in 0..h.len() {
            assert_eq!(parse(&h[..n], MAX), Parsed::Incomplete, "{:?}", &h[..n]);
        }
        let whole = parse(&h, MAX);
        assert!(matches!(whole, Parsed::Done { len, .. } if len == h.len()));
        let mut more = h.clone();
        more.extend_from_slice(b"GET / HTTP/1.1\r\n");
        assert_eq!(parse(&more, MAX), whole);
    }
}

#[test]
fn broken_messages_are_nginx_lines() {
    assert_eq!(
        Broken::Header.message(b"PRO").as_deref(),
        Some("broken header: \"PRO\"")
    );
    assert_eq!(
        Broken::Version(1).message(b"").as_deref(),
        Some("unknown PROXY protocol version: 1")
    );
    assert_eq!(
        Broken::TooLarge.message(b"").as_deref(),
        Some("header is too large")
    );
    assert_eq!(Broken::Silent.message(b""), None);
}

#[test]
fn tlvs_by_name_and_number() {
    let mut ssl = vec![0x07];
    ssl.extend_from_slice(&3u32.to_be_bytes());
    ssl.extend_from_slice(&tlv(0x21, b"TLSv1.3"));
    ssl.extend_from_slice(&tlv(0x22, b"client.example"));
    let mut tlvs = tlv(0x01, b"h2");
    tlvs.extend_from_slice(&tlv(0x02, b"example.com"));
    tlvs.extend_from_slice(&tlv(0x20, &ssl));
    tlvs.extend_from_slice(&tlv(0xea, b"vpce-123"));
    tlvs.extend_from_slice(&tlv(0x02, b"second"));
    let h = match parse(&v2(1, TCP4, &tcp4_body(&tlvs)), MAX) {
        Parsed::Done {
            header: Some(h), ..
        } => h,
        other => panic!("{other:?}"),
    };
    let get = |name: &str| {
        let mut out = String::new();
        TlvName::parse(name)
            .filter(|n| h.tlv(*n, &mut out))
            .map(|_| out)
    };
    assert_eq!(get("alpn").as_deref(), Some("h2"));
    assert_eq!(get("0x01").as_deref(), Some("h2"));
    assert_eq!(get("ALPN").as_deref(), Some("h2"));
    assert_eq!(get("authority").as_deref(), Some("example.com"));
    assert_eq!(get("0xEA").as_deref(), Some("vpce-123"));
    assert_eq!(get("0xea").as_deref(), Some("vpce-123"));
    assert_eq!(get("ssl_version").as_deref(), Some("TLSv1.3"));
    assert_eq!(get("ssl_0x21").as_deref(), Some("TLSv1.3"));
    assert_eq!(get("ssl_cn").as_deref(), Some("client.example"));
    assert_eq!(get("ssl_verify").as_deref(), Some("3"));
    assert_eq!(get("ssl_cipher"), None);
    assert_eq!(get("unique_id"), None);
    assert_eq!(get("netns"), None);
    assert_eq!(TlvName::parse("nope"), None);
    assert_eq!(TlvName::parse("0x100"), None);
    assert_eq!(TlvName::parse("0x"), None);
    assert_eq!(TlvName::parse("ssl_nope"), None);
    assert_eq!(TlvName::parse("ssl"), Some(TlvName::Type(0x20)));
    // A TLV list cut short: what comes before the cut is still found.
    let mut cut = tlv(0x01, b"h2");
    cut.extend_from_slice(&[0x02, 0x00, 0x20, b'a']);
    assert_eq!(find_tlv(&cut, 0x01), Some(&b"h2"[..]));
    assert_eq!(find_tlv(&cut, 0x02), None);
    assert_eq!(find_tlv(&[0x01, 0x00], 0x01), None);
}
