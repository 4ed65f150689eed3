//! RFC 7541 Appendix C: its byte strings, decoded lists and dynamic tables, as the RFC prints
//! them; and Appendix C.1's integers.

use super::*;

pub(super) fn hex(s: &str) -> Vec<u8> {
    let digits: Vec<u8> = s.bytes().filter(u8::is_ascii_hexdigit).collect();
    digits
        .chunks(2)
        .map(|p| u8::from_str_radix(std::str::from_utf8(p).unwrap(), 16).unwrap())
        .collect()
}

type List = Vec<(String, String)>;

pub(super) fn decode(d: &mut Decoder, block: &[u8]) -> Result<List, DecodeError<()>> {
    let mut out = Vec::new();
    let mut scratch = Vec::new();
    d.decode(block, &mut scratch, |f: Field<'_>| {
        out.push((
            String::from_utf8_lossy(f.name).into_owned(),
            String::from_utf8_lossy(f.value).into_owned(),
        ));
        Ok(())
    })?;
    Ok(out)
}

fn list(pairs: &[(&str, &str)]) -> List {
    pairs
        .iter()
        .map(|&(n, v)| (n.to_owned(), v.to_owned()))
        .collect()
}

fn table(d: &Decoder) -> List {
    d.entries()
        .map(|(n, v)| {
            (
                String::from_utf8_lossy(n).into_owned(),
                String::from_utf8_lossy(v).into_owned(),
            )
        })
        .collect()
}

#[test]
fn c1_integers() {
    let mut out = Vec::new();
    encode_int(&mut out, 0, 5, 10);
    assert_eq!(out, [0x0a]);
    out.clear();
    encode_int(&mut out, 0xe0, 5, 1337);
    assert_eq!(out, [0xff, 0x9a, 0x0a]);
    assert_eq!(decode_int(&out, &mut 0, 5), Ok(1337));
    out.clear();
    encode_int(&mut out, 0, 8, 42);
    assert_eq!(out, [42]);
    assert_eq!(decode_int(&[42], &mut 0, 8), Ok(42));
}

#[test]
fn c2_representations() {
    let mut d = Decoder::new(Bounds::default());
    let block = hex("400a 6375 7374 6f6d 2d6b 6579 0d63 7573 746f 6d2d 6865 6164 6572");
    assert_eq!(
        decode(&mut d, &block).unwrap(),
        list(&[("custom-key", "custom-header")])
    );
    assert_eq!(table(&d), list(&[("custom-key", "custom-header")]));
    assert_eq!(d.table_size(), 55);

    let mut d = Decoder::new(Bounds::default());
    let block = hex("040c 2f73 616d 706c 652f 7061 7468");
    assert_eq!(
        decode(&mut d, &block).unwrap(),
        list(&[(":path", "/sample/path")])
    );
    assert_eq!(d.table_len(), 0);

    let mut d = Decoder::new(Bounds::default());
    let block = hex("1008 7061 7373 776f 7264 0673 6563 7265 74");
    let mut never = None;
    d.decode(&block, &mut Vec::new(), |f| {
        never = Some((f.name.to_vec(), f.value.to_vec(), f.never_indexed));
        Ok::<(), ()>(())
    })
    .unwrap();
    assert_eq!(
        never,
        Some((b"password".to_vec(), b"secret".to_vec(), true))
    );
    assert_eq!(d.table_len(), 0);

    let mut d = Decoder::new(Bounds::default());
    assert_eq!(
        decode(&mut d, &hex("82")).unwrap(),
        list(&[(":method", "GET")])
    );
    assert_eq!(d.table_len(), 0);
}

/// C.3 and C.4: the same three requests, plain then Huffman-coded.
fn requests(blocks: [&str; 3]) {
    let mut d = Decoder::new(Bounds::default());
    let auth = (":authority", "www.example.com");
    let first = [
        (":method", "GET"),
        (":scheme", "http"),
        (":path", "/"),
        auth,
    ];
    assert_eq!(decode(&mut d, &hex(blocks[0])).unwrap(), list(&first));
    assert_eq!(table(&d), list(&[auth]));
    assert_eq!(d.table_size(), 57);

    let mut second = first.to_vec();
    second.push(("cache-control", "no-cache"));
    assert_eq!(decode(&mut d, &hex(blocks[1])).unwrap(), list(&second));
    assert_eq!(table(&d), list(&[("cache-control", "no-cache"), auth]));
    assert_eq!(d.table_size(), 110);

    let third = [
        (":method", "GET"),
        (":scheme", "https"),
        (":path", "/index.html"),
        auth,
        ("custom-key", "custom-value"),
    ];
    assert_eq!(decode(&mut d, &hex(blocks[2])).unwrap(), list(&third));
    assert_eq!(
        table(&d),
        list(&[
            ("custom-key", "custom-value"),
            ("cache-control", "no-cache"),
            auth
        ])
    );
    assert_eq!(d.table_size(), 164);
}

#[test]
fn c3_requests_without_huffman() {
    requests([
        "8286 8441 0f77 7777 2e65 7861 6d70 6c65 2e63 6f6d",
        "8286 84be 5808 6e6f 2d63 6163 6865",
        "8287 85bf 400a 6375 7374 6f6d 2d6b 6579 0c63 7573 746f 6d2d 7661 6c75 65",
    ]);
}

#[test]
fn c4_requests_with_huffman() {
    requests([
        "8286 8441 8cf1 e3c2 e5f2 3a6b a0ab 90f4 ff",
        "8286 84be 5886 a8eb 1064 9cbf",
        "8287 85bf 4088 25a8 49e9 5ba9 7d7f 8925 a849 e95b b8e8 b4bf",
    ]);
}

/// C.5 and C.6: three responses with a 256-byte table, plain then Huffman-coded.
fn responses(blocks: [&str; 3]) {
    let mut d = Decoder::with_table_size(256, Bounds::default());
    let private = ("cache-control", "private");
    let date1 = ("date", "Mon, 21 Oct 2013 20:13:21 GMT");
    let location = ("location", "https://www.example.com");
    let first = [(":status", "302"), private, date1, location];
    assert_eq!(decode(&mut d, &hex(blocks[0])).unwrap(), list(&first));
    assert_eq!(
        table(&d),
        list(&[location, date1, private, (":status", "302")])
    );
    assert_eq!(d.table_size(), 222);

    let second = [(":status", "307"), private, date1, location];
    assert_eq!(decode(&mut d, &hex(blocks[1])).unwrap(), list(&second));
    assert_eq!(
        table(&d),
        list(&[(":status", "307"), location, date1, private])
    );
    assert_eq!(d.table_size(), 222);

    let date2 = ("date", "Mon, 21 Oct 2013 20:13:22 GMT");
    let cookie = (
        "set-cookie",
        "foo=ASDJKHQKBZXOQWEOPIUAXQWEOIU; max-age=3600; version=1",
    );
    let gzip = ("content-encoding", "gzip");
    let third = [(":status", "200"), private, date2, location, gzip, cookie];
    assert_eq!(decode(&mut d, &hex(blocks[2])).unwrap(), list(&third));
    assert_eq!(table(&d), list(&[cookie, gzip, date2]));
    assert_eq!(d.table_size(), 215);
}

#[test]
fn c5_responses_without_huffman() {
    responses([
        "4803 3330 3258 0770 7269 7661 7465 611d 4d6f 6e2c 2032 3120 4f63 7420 3230 3133
         2032 303a 3133 3a32 3120 474d 546e 1768 7474 7073 3a2f 2f77 7777 2e65 7861 6d70
         6c65 2e63 6f6d",
        "4803 3330 37c1 c0bf",
        "88c1 611d 4d6f 6e2c 2032 3120 4f63 7420 3230 3133 2032 303a 3133 3a32 3220 474d
         54c0 5a04 677a 6970 7738 666f 6f3d 4153 444a 4b48 514b 425a 584f 5157 454f 5049
         5541 5851 5745 4f49 553b 206d 6178 2d61 6765 3d33 3630 303b 2076 6572 7369 6f6e
         3d31",
    ]);
}

#[test]
fn c6_responses_with_huffman() {
    responses([
        "4882 6402 5885 aec3 771a 4b61 96d0 7abe 9410 54d4 44a8 2005 9504 0b81 66e0 82a6
         2d1b ff6e 919d 29ad 1718 63c7 8f0b 97c8 e9ae 82ae 43d3",
        "4883 640e ffc1 c0bf",
        "88c1 6196 d07a be94 1054 d444 a820 0595 040b 8166 e084 a62d 1bff c05a 839b d9ab
         77ad 94e7 821d d7f2 e6c7 b335 dfdf cd5b 3960 d5af 2708 7f36 72c1 ab27 0fb5 291f
         9587 3160 65c0 03ed 4ee5 b106 3d50 07",
    ]);
}

#[test]
fn encoder_bytes_for_known_strings() {
    // The RFC's Huffman strings, from the encoder's side.
    let mut e = Encoder::new();
    let mut out = Vec::new();
    e.field(b":authority", b"www.example.com", &mut out);
    assert_eq!(out, hex("01 8c f1e3 c2e5 f23a 6ba0 ab90 f4ff"));
    out.clear();
    e.field(b"cache-control", b"no-cache", &mut out);
    assert_eq!(out, hex("0f09 86 a8eb 1064 9cbf"));
    out.clear();
    e.field(b"custom-key", b"custom-value", &mut out);
    assert_eq!(
        out,
        hex("00 88 25a8 49e9 5ba9 7d7f 89 25a8 49e9 5bb8 e8b4 bf")
    );
    out.clear();
    e.status(302, &mut out);
    e.status(307, &mut out);
    e.status(200, &mut out);
    e.status(404, &mut out);
    // "302" is 2 bytes Huffman-coded; "307" 3 either way, so raw.
    assert_eq!(out, hex("0882 6402 0803 333037 88 8d"));
    out.clear();
    e.field_never_indexed(b"password", b"secret", &mut out);
    let mut d = Decoder::new(Bounds::default());
    assert_eq!(
        decode(&mut d, &out).unwrap(),
        list(&[("password", "secret")])
    );
    assert_eq!(out[0], 0x10);
}

#[test]
fn encoder_table_indexes_repeated_fields() {
    let mut e = Encoder::with_table_size(512);
    let mut d = Decoder::new(Bounds::default());
    let mut first = Vec::new();
    e.begin(&mut first);
    e.field(b"server", b"shoal", &mut first);
    e.field(b"content-length", b"10", &mut first);
    // Literal with incremental indexing, name `server` (static 54): 0x40 | 54.
    assert_eq!(first[0], 0x76);
    decode(&mut d, &first).unwrap();
    let mut second = Vec::new();
    e.begin(&mut second);
    e.field(b"server", b"shoal", &mut second);
    e.field(b"content-length", b"10", &mut second);
    // `server: shoal` is now index 62; content-length is never indexed, so again a literal.
    assert_eq!(
        second,
        [&[0xbe][..], &first[first.len() - second.len() + 1..]].concat()
    );
    assert_eq!(
        decode(&mut d, &second).unwrap(),
        list(&[("server", "shoal"), ("content-length", "10")])
    );
    // The peer lowers its table to nothing: the next block says so and indexes nothing.
    e.set_peer_table_size(0);
    d.set_limit(0);
    let mut third = Vec::new();
    e.begin(&mut third);
    e.field(b"server", b"shoal", &mut third);
    assert_eq!(third[0], 0x20);
    assert_eq!(
        decode(&mut d, &third).unwrap(),
        list(&[("server", "shoal")])
    );
    assert_eq!(d.table_len(), 0);
}
