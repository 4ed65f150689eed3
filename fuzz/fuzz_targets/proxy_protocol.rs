//! Arbitrary bytes as the first bytes of a `listen ... proxy_protocol` connection. Nothing may
//! panic; a whole header is never longer than what came nor than the limit, and reads the same
//! cut to its own length (bytes after it are the request's, never the header's); every prefix
//! of a header is "incomplete", so a reader waiting for more never misjudges a split header;
//! "incomplete" only ever comes before the limit. TLV names from the input are looked up.
#![no_main]

use libfuzzer_sys::fuzz_target;
use shoal_http::proxy_protocol::{parse, Parsed, TlvName};

fuzz_target!(|input: &[u8]| {
    for max in [16usize, 107, 1024, 4096] {
        match parse(input, max) {
            Parsed::Incomplete => assert!(input.len() < max),
            Parsed::Broken(b) => {
                let _ = b.message(&input[..input.len().min(max)]);
            }
            Parsed::Done { header, len } => {
                assert!(len <= input.len() && len <= max);
                assert_eq!(
                    parse(&input[..len], max),
                    Parsed::Done {
                        header: header.clone(),
                        len
                    }
                );
                if len <= 300 {
                    for n in 0..len {
                        assert_eq!(parse(&input[..n], max), Parsed::Incomplete);
                    }
                }
                if let Some(h) = header {
                    for name in input.split(|&c| c == b' ').take(8) {
                        if let Some(n) = TlvName::parse(&String::from_utf8_lossy(name)) {
                            let mut out = String::new();
                            let _ = h.tlv(n, &mut out);
                        }
                    }
                    for t in 0..=255u8 {
                        let mut out = String::new();
                        let _ = h.tlv(TlvName::Type(t), &mut out);
                        let _ = h.tlv(TlvName::Ssl(t), &mut out);
                    }
                    let mut out = String::new();
                    let _ = h.tlv(TlvName::SslVerify, &mut out);
                }
            }
        }
    }
});
