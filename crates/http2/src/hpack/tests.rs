//! The decoder's errors and bounds, the encoder's round trips, a model of the dynamic table
//! under random blocks, and memory. Speed: `examples/hpack_cost.rs`.

use super::tests_rfc::{decode, hex};
use super::*;
use std::collections::VecDeque;

fn lit_incremental(name: &[u8], value: &[u8], out: &mut Vec<u8>) {
    out.push(0x40);
    encode_int(out, 0, 7, name.len());
    out.extend_from_slice(name);
    encode_int(out, 0, 7, value.len());
    out.extend_from_slice(value);
}

fn compression(r: Result<Vec<(String, String)>, DecodeError<()>>) -> Compression {
    match r {
        Err(DecodeError::Compression(c)) => c,
        other => panic!("expected a compression error, got {other:?}"),
    }
}

#[test]
fn malformed_blocks_are_compression_errors() {
    let d = || Decoder::new(Bounds::default());
    let cases: &[(&str, Compression)] = &[
        ("80", Compression::IndexZero),
        ("be", Compression::Index(62)),
        ("ff 80 80 80 80 10", Compression::Integer),
        ("ff ff ff ff ff ff 0f", Compression::Integer),
        ("41", Compression::Truncated),
        ("41 8c f1e3", Compression::Truncated),
        ("ff", Compression::Truncated),
        ("00 05 61", Compression::Truncated),
        ("01 81 fe", Compression::Huffman(HuffmanError::Padding)),
        ("01 82 1f ff", Compression::Huffman(HuffmanError::Padding)),
        ("01 84 ff ff ff ff", Compression::Huffman(HuffmanError::Eos)),
        ("3f e2 1f", Compression::SizeAboveLimit(4097)),
        ("82 20", Compression::SizeNotFirst),
        ("40 01 61 01 62 82 3f e1 1f", Compression::SizeNotFirst),
    ];
    for (block, want) in cases {
        assert_eq!(compression(decode(&mut d(), &hex(block))), *want, "{block}");
    }
    // The largest integer allowed, and one past it.
    let mut block = Vec::new();
    encode_int(&mut block, 0x80, 7, u32::MAX as usize);
    assert_eq!(
        compression(decode(&mut d(), &block)),
        Compression::Index(u32::MAX as usize)
    );
    block.clear();
    encode_int(&mut block, 0x80, 7, u32::MAX as usize + 1);
    assert_eq!(compression(decode(&mut d(), &block)), Compression::Integer);
}

#[test]
fn size_updates_follow_our_settings() {
    // Two updates at the start: the table empties, then may grow back to the limit.
    let mut d = Decoder::new(Bounds::default());
    decode(&mut d, &hex("40 01 61 01 62")).unwrap();
    assert_eq!(d.table_len(), 1);
    decode(&mut d, &hex("20 3f e1 1f 82")).unwrap();
    assert_eq!((d.table_len(), d.table_size()), (0, 0));

    // A lowered limit requires an update in the next block, at most the new limit.
    let mut d = Decoder::new(Bounds::default());
    d.set_limit(100);
    assert_eq!(
        compression(decode(&mut d, &hex("82"))),
        Compression::SizeMissing
    );
    let mut d = Decoder::new(Bounds::default());
    d.set_limit(100);
    assert_eq!(
        compression(decode(&mut d, &hex("3f 46 82"))),
        Compression::SizeAboveLimit(101)
    );
    let mut d = Decoder::new(Bounds::default());
    d.set_limit(100);
    assert_eq!(compression(decode(&mut d, &[])), Compression::SizeMissing);
    let mut d = Decoder::new(Bounds::default());
    decode(&mut d, &hex("40 01 61 01 62")).unwrap();
    d.set_limit(100);
    assert_eq!(decode(&mut d, &hex("3f 45 be")).unwrap().len(), 1);
    // A raised limit needs nothing, and allows updates up to it.
    d.set_limit(8192);
    decode(&mut d, &hex("82")).unwrap();
    let mut block = Vec::new();
    encode_int(&mut block, 0x20, 5, 8192);
    block.push(0x82);
    decode(&mut d, &block).unwrap();
}

#[test]
fn an_indexed_name_survives_the_eviction_of_its_entry() {
    let mut d = Decoder::with_table_size(70, Bounds::default());
    decode(&mut d, &hex("40 04 61616161 01 78")).unwrap();
    assert_eq!(d.table_size(), 37);
    // Name from index 62, value "yyyy": 40 bytes, 77 in all: it evicts the entry it names.
    let got = decode(&mut d, &hex("7e 04 79797979")).unwrap();
    assert_eq!(got, [("aaaa".to_owned(), "yyyy".to_owned())]);
    let table: Vec<_> = d.entries().map(|(n, v)| (n.to_vec(), v.to_vec())).collect();
    assert_eq!(table, [(b"aaaa".to_vec(), b"yyyy".to_vec())]);
}

/// A 4,000-byte entry referenced 1,000 times by a 1,000-byte block: the list bound stops the
/// fields after a few, nothing is copied, and the connection's decoder goes on.
#[test]
fn a_bomb_stops_at_the_list_bound() {
    let bounds = Bounds {
        list: 32 * 1024,
        field: 8192,
    };
    let mut d = Decoder::new(bounds);
    let mut block = Vec::new();
    lit_incremental(b"x", &[b'a'; 4000], &mut block);
    decode(&mut d, &block).unwrap();
    let bomb = vec![0xbe; 1000];
    let mut scratch = Vec::new();
    let (mut fields, mut bytes) = (0, 0);
    let r = d.decode(&bomb, &mut scratch, |f| {
        fields += 1;
        bytes += f.name.len() + f.value.len();
        Ok::<(), ()>(())
    });
    assert_eq!(r, Err(DecodeError::TooLarge(TooLarge::List)));
    assert_eq!(fields, 32 * 1024 / (4001 + 32));
    assert!(bytes <= bounds.list);
    assert_eq!(scratch.capacity(), 0);
    assert_eq!(decode(&mut d, &hex("be")).unwrap()[0].1.len(), 4000);
}

#[test]
fn an_oversized_field_is_refused_and_not_stored() {
    let bounds = Bounds {
        list: 64 * 1024,
        field: 1000,
    };
    let mut d = Decoder::new(bounds);
    // A raw value of 1,001 bytes, then a field that goes into the table.
    let mut block = hex("82 01");
    encode_int(&mut block, 0, 7, 1001);
    block.extend_from_slice(&[b'v'; 1001]);
    lit_incremental(b"a", b"b", &mut block);
    let mut seen = Vec::new();
    let r = d.decode(&block, &mut Vec::new(), |f| {
        seen.push(f.name.to_vec());
        Ok::<(), ()>(())
    });
    assert_eq!(r, Err(DecodeError::TooLarge(TooLarge::Field)));
    assert_eq!(seen, [b":method".to_vec()]);
    // The block was processed whole: the entry after the refusal is in the table.
    assert_eq!(
        decode(&mut d, &hex("be")).unwrap(),
        [("a".to_owned(), "b".to_owned())]
    );

    // A Huffman value of 100,000 bytes is checked and counted, never stored.
    let mut value = Vec::new();
    huffman::encode(&[b'0'; 99_999], &mut value);
    let mut block = hex("01");
    encode_int(&mut block, 0x80, 7, value.len());
    block.extend_from_slice(&value);
    let mut scratch = Vec::new();
    let r = d.decode(&block, &mut scratch, |_| Ok::<(), ()>(()));
    assert_eq!(r, Err(DecodeError::TooLarge(TooLarge::Field)));
    assert!(scratch.capacity() <= 2 * 4096, "{}", scratch.capacity());
    // ...but a bad end is still an error.
    let n = block.len();
    block[n - 1] &= 0xfe;
    let r = d.decode(&block, &mut scratch, |_| Ok::<(), ()>(()));
    assert_eq!(
        r,
        Err(DecodeError::Compression(Compression::Huffman(
            HuffmanError::Padding
        )))
    );
}

#[test]
fn an_entry_larger_than_the_table_empties_it() {
    let mut d = Decoder::new(Bounds::default());
    decode(&mut d, &hex("40 01 61 01 62")).unwrap();
    let mut block = Vec::new();
    lit_incremental(b"big", &[b'z'; 5000], &mut block);
    assert_eq!(decode(&mut d, &block).unwrap()[0].1.len(), 5000);
    assert_eq!((d.table_len(), d.table_size()), (0, 0));
}

#[test]
fn a_refusal_stops_the_fields_not_the_table() {
    let mut d = Decoder::new(Bounds::default());
    let mut block = hex("82 86");
    lit_incremental(b"k", b"v", &mut block);
    let mut n = 0;
    let r = d.decode(&block, &mut Vec::new(), |_| {
        n += 1;
        Err("no")
    });
    assert_eq!((r, n), (Err(DecodeError::Refused("no")), 1));
    assert_eq!(d.table_len(), 1);
}

#[test]
fn memory_of_an_idle_decoder() {
    let mut d = Decoder::new(Bounds::default());
    assert_eq!(d.heap_bytes(), 0);
    // A browser's usual first request fills about 1 KiB; fill the whole 4 KiB.
    for i in 0..200 {
        let mut block = Vec::new();
        lit_incremental(format!("x-field-{i}").as_bytes(), &[b'v'; 40], &mut block);
        decode(&mut d, &block).unwrap();
    }
    assert!(d.table_size() > 4096 - 90);
    let heap = d.heap_bytes();
    eprintln!(
        "decoder: {} bytes inline, {heap} on the heap with a full 4 KiB table ({} entries); \
         encoder: {} bytes inline",
        std::mem::size_of::<Decoder>(),
        d.table_len(),
        std::mem::size_of::<Encoder>()
    );
    assert!(heap <= 4096 + 64 * 12, "{heap}");
    assert_eq!(
        compression(decode(&mut d, &hex("3f e2 1f"))),
        Compression::SizeAboveLimit(4097)
    );
    let mut d2 = Decoder::new(Bounds::default());
    decode(&mut d2, &hex("40 01 61 01 62")).unwrap();
    decode(&mut d2, &hex("20 82")).unwrap();
    assert_eq!(d2.heap_bytes(), 0);
}

/// One representation of a random block, for the model below.
#[derive(Clone, Debug)]
enum Op {
    Static(usize),
    Dynamic(usize),
    Insert {
        name: Vec<u8>,
        value: Vec<u8>,
        huffman: bool,
    },
    InsertNamed {
        dynamic: usize,
        value: Vec<u8>,
    },
    Plain {
        name: Vec<u8>,
        value: Vec<u8>,
        never: bool,
    },
}

fn string(s: &[u8], huffman: bool, out: &mut Vec<u8>) {
    if huffman {
        let mut h = Vec::new();
        huffman::encode(s, &mut h);
        encode_int(out, 0x80, 7, h.len());
        out.extend_from_slice(&h);
    } else {
        encode_int(out, 0, 7, s.len());
        out.extend_from_slice(s);
    }
}

/// The dynamic table as §4 describes it, the plain way.
struct Model {
    entries: VecDeque<(Vec<u8>, Vec<u8>)>,
    max: usize,
}

impl Model {
    fn size(&self) -> usize {
        self.entries
            .iter()
            .map(|(n, v)| n.len() + v.len() + 32)
            .sum()
    }
    fn insert(&mut self, n: Vec<u8>, v: Vec<u8>) {
        let s = n.len() + v.len() + 32;
        while !self.entries.is_empty() && self.size() + s > self.max {
            self.entries.pop_back();
        }
        if s <= self.max {
            self.entries.push_front((n, v));
        }
    }
}

type Pair = (Vec<u8>, Vec<u8>);

fn bytes_strategy() -> impl proptest::strategy::Strategy<Value = Vec<u8>> {
    proptest::collection::vec(proptest::prelude::any::<u8>(), 0..40)
}

fn op_strategy() -> impl proptest::strategy::Strategy<Value = Op> {
    use proptest::prelude::*;
    prop_oneof![
        (1usize..=61).prop_map(Op::Static),
        (0usize..8).prop_map(Op::Dynamic),
        (bytes_strategy(), bytes_strategy(), any::<bool>()).prop_map(|(name, value, huffman)| {
            Op::Insert {
                name,
                value,
                huffman,
            }
        }),
        (0usize..8, bytes_strategy())
            .prop_map(|(dynamic, value)| Op::InsertNamed { dynamic, value }),
        (bytes_strategy(), bytes_strategy(), any::<bool>())
            .prop_map(|(name, value, never)| Op::Plain { name, value, never }),
    ]
}

use proptest::strategy::Strategy as _;

proptest::proptest! {
    /// Random blocks against the model: same fields, same table, whatever the evictions.
    #[test]
    fn decoder_follows_the_model(
        blocks in proptest::collection::vec(
            (proptest::option::of(0usize..300), proptest::collection::vec(op_strategy(), 0..12)),
            1..8,
        )
    ) {
        let mut d = Decoder::new(Bounds { list: usize::MAX, field: usize::MAX });
        let mut model = Model { entries: VecDeque::new(), max: 4096 };
        for (update, ops) in blocks {
            let mut block = Vec::new();
            let mut want: Vec<Pair> = Vec::new();
            if let Some(size) = update {
                encode_int(&mut block, 0x20, 5, size);
                model.max = size;
                while model.size() > size {
                    model.entries.pop_back();
                }
            }
            for op in ops {
                match op {
                    Op::Static(i) => {
                        encode_int(&mut block, 0x80, 7, i);
                        want.push((STATIC[i - 1].0.to_vec(), STATIC[i - 1].1.to_vec()));
                    }
                    Op::Dynamic(k) if k < model.entries.len() => {
                        encode_int(&mut block, 0x80, 7, 62 + k);
                        want.push(model.entries[k].clone());
                    }
                    Op::Dynamic(_) => {}
                    Op::Insert { name, value, huffman } => {
                        block.push(0x40);
                        string(&name, huffman, &mut block);
                        string(&value, !huffman, &mut block);
                        want.push((name.clone(), value.clone()));
                        model.insert(name, value);
                    }
                    Op::InsertNamed { dynamic, value } if dynamic < model.entries.len() => {
                        encode_int(&mut block, 0x40, 6, 62 + dynamic);
                        string(&value, true, &mut block);
                        let name = model.entries[dynamic].0.clone();
                        want.push((name.clone(), value.clone()));
                        model.insert(name, value);
                    }
                    Op::InsertNamed { .. } => {}
                    Op::Plain { name, value, never } => {
                        block.push(if never { 0x10 } else { 0x00 });
                        string(&name, true, &mut block);
                        string(&value, false, &mut block);
                        want.push((name, value));
                    }
                }
            }
            let mut got: Vec<Pair> = Vec::new();
            d.decode(&block, &mut Vec::new(), |f| {
                got.push((f.name.to_vec(), f.value.to_vec()));
                Ok::<(), ()>(())
            }).unwrap();
            proptest::prop_assert_eq!(got, want);
            let table: Vec<Pair> = d.entries().map(|(n, v)| (n.to_vec(), v.to_vec())).collect();
            proptest::prop_assert_eq!(&table, &model.entries.iter().cloned().collect::<Vec<_>>());
            proptest::prop_assert_eq!(d.table_size(), model.size());
        }
    }

    /// The encoder's blocks decode to what it was given, block after block on one connection,
    /// with or without a table, whatever the peer does to its table size.
    #[test]
    fn encoder_round_trips(
        budget in proptest::prop_oneof![proptest::strategy::Just(0usize), 0usize..1500],
        answers in proptest::collection::vec(
            (
                100u16..1000,
                proptest::collection::vec(
                    (
                        proptest::prop_oneof![
                            "[a-z0-9-]{1,24}",
                            proptest::sample::select(vec!["server", "date", "content-type", "vary", "cache-control"])
                                .prop_map(str::to_owned),
                            (0usize..61).prop_map(|i| String::from_utf8(STATIC[i].0.to_vec()).unwrap()),
                        ],
                        proptest::prop_oneof![
                            bytes_strategy(),
                            proptest::sample::select(vec!["shoal", "shoam", "text/html", "Fri, 27 Nov 2026 04:00:00 GMT", "Fri, 27 Nov 2026 04:00:01 GMT"])
                                .prop_map(|v| v.as_bytes().to_vec()),
                        ],
                        proptest::prelude::any::<bool>(),
                    ),
                    0..12,
                ),
                proptest::option::of(proptest::prop_oneof![0usize..200, 0usize..5000]),
            ),
            1..6,
        ),
        every in proptest::prelude::any::<bool>(),
        rounds in 1usize..4,
    ) {
        use proptest::prelude::*;
        // `every`: an answers' encoder, which indexes every field; `rounds`: the same blocks
        // again, as a connection's answers repeat (the encoder looks where a field was).
        let mut e = match every {
            true => Encoder::for_answers(budget),
            false => Encoder::with_table_size(budget),
        };
        let mut d = Decoder::new(Bounds { list: usize::MAX, field: usize::MAX });
        let n = answers.len();
        for (status, fields, peer_size) in answers.into_iter().cycle().take(n * rounds) {
            if let Some(size) = peer_size {
                // The peer's SETTINGS: the encoder hears it, the peer's decoder applies it.
                e.set_peer_table_size(size);
                d.set_limit(size);
            }
            let mut block = Vec::new();
            e.begin(&mut block);
            e.status(status, &mut block);
            for (name, value, never) in &fields {
                if *never {
                    e.field_never_indexed(name.as_bytes(), value, &mut block);
                } else {
                    e.field(name.as_bytes(), value, &mut block);
                }
            }
            let mut got = Vec::new();
            d.decode(&block, &mut Vec::new(), |f| {
                got.push((f.name.to_vec(), f.value.to_vec(), f.never_indexed));
                Ok::<(), ()>(())
            }).unwrap();
            let mut want = vec![(b":status".to_vec(), status.to_string().into_bytes(), false)];
            want.extend(fields.iter().map(|(n, v, never)| (n.as_bytes().to_vec(), v.clone(), *never)));
            prop_assert_eq!(got, want);
            // Entries we evicted may stay in the peer's table; without a budget there are none.
            prop_assert!(d.table_size() <= 4096 && (budget > 0 || d.table_len() == 0));
            prop_assert!(e.heap_bytes() <= budget + 64 * 12);
        }
    }

    /// Any bytes: no panic, bounds kept, the table within its size.
    #[test]
    fn any_bytes_keep_the_bounds(blocks in proptest::collection::vec(bytes_strategy(), 1..6)) {
        let bounds = Bounds { list: 300, field: 50 };
        let mut d = Decoder::new(bounds);
        let mut scratch = Vec::new();
        for block in blocks {
            let mut list = 0;
            let r = d.decode(&block, &mut scratch, |f| {
                assert!(f.name.len() <= 50 && f.value.len() <= 50);
                list += f.name.len() + f.value.len() + 32;
                Ok::<(), ()>(())
            });
            proptest::prop_assert!(list <= 300);
            proptest::prop_assert!(d.table_size() <= 4096);
            if let Err(DecodeError::Compression(_)) = r {
                break;
            }
        }
    }
}

#[test]
fn grpc_status_is_indexed_from_the_second_answer_on() {
    let mut e = Encoder::with_table_size(512);
    let mut first = Vec::new();
    e.field(b"grpc-status", b"0", &mut first);
    let mut second = Vec::new();
    e.field(b"grpc-status", b"0", &mut second);
    assert!(first.len() > 1);
    assert_eq!(second, [0x80 | 62]);
}

#[test]
fn a_field_checked_once_is_not_checked_again() {
    let mut e = Encoder::for_answers(1024);
    let mut checks = 0;
    let block = |e: &mut Encoder, fields: &[(&[u8], &[u8], bool)], checks: &mut i32| {
        let mut out = Vec::new();
        e.begin(&mut out);
        let went: Vec<bool> = fields
            .iter()
            .map(|&(n, v, fine)| {
                // `server` as a field made by the server: unchecked.
                if n == b"server" {
                    e.field(n, v, &mut out);
                    return true;
                }
                e.field_checked(n, v, &mut out, || {
                    *checks += 1;
                    fine
                })
            })
            .collect();
        (out, went)
    };
    let fields: &[(&[u8], &[u8], bool)] = &[
        (b"server", b"shoal", true),
        (b"etag", b"\"1-2\"", true),
        (b"x-bad", b"a\nb", false),
        (b"content-type", b"text/html", true),
    ];
    let (first, went) = block(&mut e, fields, &mut checks);
    assert_eq!(went, [true, true, false, true]);
    assert_eq!(checks, 3);
    // The second time, the fields that passed are indexed without a check; the one that
    // failed is checked (and refused) again.
    let (second, went) = block(&mut e, fields, &mut checks);
    assert_eq!(went, [true, true, false, true]);
    assert_eq!(checks, 4);
    assert_eq!(second, [0x80 | 64, 0x80 | 63, 0x80 | 62]);
    assert!(first.len() > second.len());
    // A field put in the table by `field` (unchecked) is checked the first time
    // `field_checked` meets it, and sent by index once it passes.
    let mut out = Vec::new();
    e.begin(&mut out);
    assert!(e.field_checked(b"server", b"shoal", &mut out, || {
        checks += 1;
        true
    }));
    assert_eq!((checks, &out[..]), (5, &[0x80 | 64][..]));
    let mut out = Vec::new();
    e.begin(&mut out);
    assert!(e.field_checked(b"server", b"shoal", &mut out, || unreachable!()));
    assert_eq!(out, [0x80 | 64]);
    // A field of another value in that place is checked.
    let mut out = Vec::new();
    e.begin(&mut out);
    assert!(!e.field_checked(b"server", b"other", &mut out, || false));
    assert!(out.is_empty());
}
