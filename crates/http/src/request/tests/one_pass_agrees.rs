//! Proptests: the one-pass road reads plain and near-plain heads as the other roads do.

use super::*;
use proptest::prelude::*;

/// A plain head (the one-pass road's shape) from a few pieces.
fn plain() -> impl Strategy<Value = Vec<u8>> {
    (
        "[A-Z]{1,7}",
        "/[!-~]{0,20}",
        prop::bool::ANY,
        prop::collection::vec(("[A-Za-z0-9-]{1,12}", "[!-~]([ -~]{0,16}[!-~])?"), 0..6),
        " {0,2}",
    )
        .prop_map(|(method, target, v11, headers, ows)| {
            let mut h = format!("{method} {target} HTTP/1.{}\r\n", if v11 { 1 } else { 0 });
            for (n, v) in headers {
                h.push_str(&format!("{n}:{ows}{v}\r\n"));
            }
            h.push_str("\r\n");
            h.into_bytes()
        })
}

/// A plain head with a few bytes changed, put in or taken out: shapes on both sides of the
/// one-pass road's edge.
fn near_plain() -> impl Strategy<Value = Vec<u8>> {
    let byte = prop_oneof![
        3 => prop::sample::select(b" \t\r\n:_/-aZ0\x00\x7f\x80\xff".to_vec()),
        1 => any::<u8>(),
    ];
    (
        plain(),
        prop::collection::vec((0u8..4, any::<prop::sample::Index>(), byte), 0..3),
    )
        .prop_map(|(mut h, edits)| {
            for (kind, at, b) in edits {
                let i = at.index(h.len());
                match kind {
                    0 => h[i] = b,
                    1 => h.insert(i, b),
                    2 => {
                        h.remove(i);
                    }
                    // At a line's end, where trimming and line endings are decided.
                    _ => {
                        let ends: Vec<usize> = (0..h.len()).filter(|&j| h[j] == b'\r').collect();
                        if !ends.is_empty() {
                            h.insert(ends[at.index(ends.len())], b);
                        }
                    }
                }
            }
            h
        })
}

fn limits() -> impl Strategy<Value = Limits> {
    (20usize..200, prop::bool::ANY, prop::bool::ANY).prop_map(|(size, ignore, under)| Limits {
        client_header_buffer_size: size,
        large_client_header_buffers: crate::limits::LargeBuffers { num: 2, size: 64 },
        ignore_invalid_headers: ignore,
        underscores_in_headers: under,
        merge_slashes: true,
    })
}

proptest! {
    #[test]
    fn whatever_the_one_pass_road_takes_the_other_roads_take_alike(
        head in near_plain(),
        limits in prop_oneof![Just(Limits::default()), limits()],
        tail in prop::collection::vec(any::<u8>(), 0..8),
    ) {
        let mut buf = head;
        buf.extend_from_slice(&tail);
        prop_assert!(roads_agree(&buf, &limits), "{:?}", String::from_utf8_lossy(&buf));
    }

    #[test]
    fn the_one_pass_road_takes_every_plain_head(head in plain()) {
        let (len, _) = one_pass::parse(&head, &Limits {
            client_header_buffer_size: head.len(),
            ..Limits::default()
        }).expect("a plain head");
        prop_assert_eq!(len, head.len());
    }
}
