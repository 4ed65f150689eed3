//! `map` on `$binary_remote_addr` against real nginx: the keys are the address's raw bytes,
//! written as such in the configuration file (not UTF-8), and compared as bytes; a value and a
//! `return` body written with raw bytes are answered as those bytes. The client's address is
//! set by realip (`X-Real-IP`), so IPv4 and IPv6 addresses of every shape can be asked for.

use crate::diff::{Conf, Pair};

/// `"KEY" VALUE;` with the key's bytes raw and quoted.
fn entry(key: &[u8], value: &[u8]) -> Vec<u8> {
    let mut line = b"        \"".to_vec();
    line.extend_from_slice(key);
    line.extend_from_slice(b"\" ");
    line.extend_from_slice(value);
    line.extend_from_slice(b";\n");
    line
}

#[test]
fn binary_map_keys_match_as_bytes() {
    let dir = tempfile::Builder::new()
        .prefix("shoal-binmap-")
        .tempdir()
        .expect("a temporary directory");
    let mut text = b"map $binary_remote_addr $who {\n        default other;\n".to_vec();
    // 192.168.1.1, a value with a byte that is not UTF-8.
    text.extend(entry(&[192, 168, 1, 1], b"\"lan-\xFF\""));
    // 172.65.200.7: 0x41 is `A`; nginx lowercases the key and the value before comparing, so
    // 172.97.200.7 (0x61, `a`) matches it too.
    text.extend(entry(&[172, 65, 200, 7], b"upper"));
    // 10.128.0.255.
    text.extend(entry(&[10, 128, 0, 255], b"ten"));
    // fe80::a8c0:ff
    let mut v6 = [0u8; 16];
    v6[..2].copy_from_slice(&[0xfe, 0x80]);
    v6[12..].copy_from_slice(&[0xa8, 0xc0, 0x00, 0xff]);
    text.extend(entry(&v6, b"six"));
    text.extend_from_slice(b"}\n");
    let map = dir.path().join("binmap.conf");
    std::fs::write(&map, &text).expect("writing the map");
    // A `return` body written with raw bytes (latin-1 "été").
    let latin = dir.path().join("latin.conf");
    std::fs::write(
        &latin,
        b"location /latin { return 200 \"\xE9t\xE9\\n\"; }\n".as_slice(),
    )
    .expect("writing the location");
    let http = format!(
        "    set_real_ip_from 127.0.0.1;\n    real_ip_header X-Real-IP;\n    include {};\n",
        map.display()
    );
    let server = format!(
        "location /who {{ return 200 \"[$who]\\n\"; }}\n\
         location /raw {{ add_header X-Who \"$who\"; return 204; }}\n\
         include {};",
        latin.display()
    );
    let p = Pair::with(Conf {
        http: &http,
        server: &server,
        ..Default::default()
    });
    let mut answers = Vec::new();
    for addr in [
        "192.168.1.1",
        "192.168.1.2",
        "172.65.200.7",
        "172.97.200.7",
        "172.66.200.7",
        "10.128.0.255",
        "10.128.0.254",
        "fe80::a8c0:ff",
        "fe80::a8c0:fe",
        "127.0.0.1",
    ] {
        let req = format!("GET /who HTTP/1.0\r\nHost: x\r\nX-Real-IP: {addr}\r\n\r\n");
        answers.push(p.check_bytes(req.as_bytes()));
        let req = format!("GET /raw HTTP/1.0\r\nHost: x\r\nX-Real-IP: {addr}\r\n\r\n");
        p.check_bytes(req.as_bytes());
    }
    // The comparison means something only if the keys did match (a map that never matched
    // would answer `other` on both).
    let all = answers.join("\n");
    for v in ["[lan-\\\\xff]", "[upper]", "[ten]", "[six]", "[other]"] {
        assert!(all.contains(v), "no {v} in:\n{all}");
    }
    assert_eq!(all.matches("[upper]").count(), 2, "{all}");
    // The header's bytes (the harness compares heads as text): raw on both.
    let (n, s) = p.ports();
    let req = b"GET /raw HTTP/1.0\r\nHost: x\r\nX-Real-IP: 192.168.1.1\r\n\r\n";
    for port in [n, s] {
        let answer = crate::common::client::exchange(port, req);
        assert!(
            answer.windows(12).any(|w| w == b"X-Who: lan-\xFF"),
            "{port}: {}",
            String::from_utf8_lossy(&answer)
        );
    }
    let latin = p.check_bytes(b"GET /latin HTTP/1.0\r\nHost: x\r\n\r\n");
    assert!(latin.contains("\\\\xe9t\\\\xe9"), "{latin}");
}
