//! Arbitrary header blocks into one HPACK decoder with small bounds: several blocks per input
//! share the dynamic table (and the limit may change between them, as SETTINGS would). Nothing
//! may panic; every field given stays within the bounds, the list too; the table stays within
//! its size and its memory within what the size allows; the scratch buffer within what the
//! bounds allow. A compression error ends the input, as it ends a connection.
//!
//! Then the same bytes as fields through an encoder, answer after answer: its blocks must
//! decode to them exactly.
#![no_main]

use libfuzzer_sys::fuzz_target;
use shoal_http2::hpack::{Bounds, DecodeError, Decoder, Encoder};

fuzz_target!(|input: &[u8]| {
    let Some((ctl, mut data)) = input.split_first_chunk::<3>() else {
        return;
    };
    let bounds = Bounds {
        list: 64 + ctl[0] as usize * 16,
        field: 1 + ctl[1] as usize * 4,
    };
    let mut d = Decoder::new(bounds);
    let mut scratch = Vec::new();
    let mut ceiling = 4096;
    let mut round = 0;
    while let Some((&len, rest)) = data.split_first() {
        let (block, rest) = rest.split_at((len as usize).min(rest.len()));
        data = rest;
        // Now and then our SETTINGS_HEADER_TABLE_SIZE changes (and is acknowledged).
        if ctl[2] & (1 << (round % 8)) != 0 {
            let limit = [0, 64, 256, 4096, 100, 8192][(len as usize + round) % 6];
            d.set_limit(limit);
            ceiling = ceiling.max(limit);
        }
        round += 1;
        let mut list = 0;
        let r = d.decode(block, &mut scratch, |f| {
            assert!(f.name.len() <= bounds.field && f.value.len() <= bounds.field);
            list += f.name.len() + f.value.len() + 32;
            assert!(list <= bounds.list);
            Ok::<(), ()>(())
        });
        assert!(d.table_size() <= ceiling);
        assert!(d.heap_bytes() <= 8192 + 512 * 12, "{}", d.heap_bytes());
        assert!(scratch.capacity() <= 4 * bounds.field.max(8192) + 64);
        if let Err(DecodeError::Compression(e)) = r {
            let _ = e.to_string();
            break;
        }
    }

    // The encoder's round trip: the input as (name, value) pairs, names lowercased, four to
    // an answer, through one encoder (with a table budget) and one decoder; the peer's table
    // size changes now and then; some fields checked, some of them refused.
    let mut fields = Vec::new();
    let mut bytes = input.split(|&b| b == 0);
    while let (Some(name), Some(value)) = (bytes.next(), bytes.next()) {
        fields.push((name.to_ascii_lowercase(), value.to_vec()));
    }
    // A server's encoder (every field indexed) or one of the indexable names only.
    let mut e = match ctl[1] & 1 {
        1 => Encoder::for_answers(ctl[2] as usize * 4),
        _ => Encoder::with_table_size(ctl[2] as usize * 4),
    };
    let mut d = Decoder::new(Bounds {
        list: usize::MAX,
        field: usize::MAX,
    });
    for (k, answer) in fields.chunks(4).enumerate() {
        if k % 3 == 2 {
            let size = (ctl[0] as usize * 8 + k * 40) % 4097;
            e.set_peer_table_size(size);
            d.set_limit(size);
        }
        let status = 100 + u16::from_be_bytes([ctl[0], ctl[1]]).wrapping_add(k as u16) % 900;
        let mut block = Vec::new();
        e.begin(&mut block);
        e.status(status, &mut block);
        // A value starting with `?` goes through `field_checked`, refused when it has a line
        // break (the same check each time): it must not be sent, the others must.
        let mut sent = Vec::new();
        for (name, value) in answer {
            let went = match value.first() {
                Some(b'!') => {
                    e.field_never_indexed(name, value, &mut block);
                    true
                }
                Some(b'?') => e.field_checked(name, value, &mut block, || !value.contains(&b'\n')),
                _ => {
                    e.field(name, value, &mut block);
                    true
                }
            };
            if went {
                sent.push((name, value));
            }
        }
        let mut got = Vec::new();
        d.decode(&block, &mut scratch, |f| {
            got.push((f.name.to_vec(), f.value.to_vec(), f.never_indexed));
            Ok::<(), ()>(())
        })
        .unwrap();
        assert_eq!(
            got[0],
            (b":status".to_vec(), status.to_string().into_bytes(), false)
        );
        assert_eq!(got.len(), sent.len() + 1);
        for (&(name, value), g) in sent.iter().zip(&got[1..]) {
            assert_eq!(
                (name, value, value.first() == Some(&b'!')),
                (&g.0, &g.1, g.2)
            );
        }
        assert!(e.heap_bytes() <= ctl[2] as usize * 4 + 64 * 12);
    }
});
