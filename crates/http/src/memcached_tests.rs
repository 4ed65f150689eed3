use super::*;
use proptest::prelude::*;

/// The whole exchange for `key`: the head and the value, `answer` arriving `chunk` bytes at a
/// time; the value's bytes, or the first error.
fn exchange(
    key: &[u8],
    gzip_flag: u64,
    answer: &[u8],
    chunk: usize,
) -> Result<(Answer, Vec<u8>), MemcachedError> {
    let req = request(key)?;
    let mut d = Decoder::new(&req, gzip_flag);
    let mut buf = BytesMut::new();
    let mut pieces = answer.chunks(chunk.max(1));
    let head = loop {
        if let Some(a) = d.decode_head(&mut buf, 4096)? {
            break a;
        }
        match pieces.next() {
            Some(p) => buf.extend_from_slice(p),
            None => {
                d.eof()?;
                unreachable!("eof before the head is an error");
            }
        }
    };
    let mut value = Vec::new();
    if let Answer::Found(v) = &head {
        loop {
            match d.decode_body(&mut buf)? {
                BodyChunk::Data(b) => value.extend_from_slice(&b),
                BodyChunk::Done => break,
                BodyChunk::NeedMore => match pieces.next() {
                    Some(p) => buf.extend_from_slice(p),
                    None => {
                        d.eof()?;
                        unreachable!("eof before the end is an error");
                    }
                },
            }
        }
        assert_eq!(value.len() as u64, v.length);
    }
    assert!(d.is_done());
    Ok((head, value))
}

/// [`exchange`] whole and in pieces of 1 to 9 bytes: all must agree, but for bytes after the
/// trailer, which are only seen when they come with it (as in nginx, which stops reading at
/// the trailer's end).
fn run(key: &[u8], gzip_flag: u64, answer: &[u8]) -> Result<(Answer, Vec<u8>), MemcachedError> {
    let whole = exchange(key, gzip_flag, answer, answer.len());
    for chunk in 1..10 {
        let pieces = exchange(key, gzip_flag, answer, chunk);
        if !(whole == Err(MemcachedError::InvalidTrailer) && pieces.is_ok()) {
            assert_eq!(pieces, whole, "pieces of {chunk}");
        }
    }
    whole
}

fn error(key: &[u8], gzip_flag: u64, answer: &[u8]) -> String {
    run(key, gzip_flag, answer).unwrap_err().to_string()
}

#[test]
fn get_and_key_escaping_as_nginx_sends_them() {
    let r = request(b"ok.a b%c").unwrap();
    assert_eq!(&r.bytes[..], b"get ok.a%20b%25c\r\n");
    assert_eq!(r.key, b"ok.a%20b%25c");
    let r = request(b"\x01\x02\x1f\x7f\x80\xff\t~!\"#$&'()*+,/:;<=>?@[\\]^_`{|}\x00").unwrap();
    assert_eq!(
        &r.bytes[..],
        &b"get %01%02%1F\x7f\x80\xff%09~!\"#$&'()*+,/:;<=>?@[\\]^_`{|}%00\r\n"[..]
    );
    let e = request(b"").unwrap_err();
    assert_eq!(e.to_string(), "the \"$memcached_key\" variable is not set");
    assert_eq!(e.status(), 500);
}

#[test]
fn a_value_and_a_miss() {
    let (a, v) = run(b"k", 0, b"VALUE k 0 5\r\nhello\r\nEND\r\n").unwrap();
    assert_eq!(
        a,
        Answer::Found(Value {
            flags: Some(0),
            gzip: false,
            length: 5
        })
    );
    assert_eq!(v, b"hello");
    let (a, v) = run(b"k", 0, b"VALUE k 0 0\r\n\r\nEND\r\n").unwrap();
    assert_eq!(
        (a, v),
        (
            Answer::Found(Value {
                flags: Some(0),
                gzip: false,
                length: 0
            }),
            vec![]
        )
    );
    // A value holding the trailer's bytes is still just the value.
    let (_, v) = run(b"k", 0, b"VALUE k 0 7\r\n\r\nEND\r\n\r\nEND\r\n").unwrap();
    assert_eq!(v, b"\r\nEND\r\n");
    let (a, _) = run(b"miss key", 0, b"END\r\n").unwrap();
    let Answer::NotFound(n) = a else {
        panic!("a miss")
    };
    assert_eq!(
        n.to_string(),
        "key: \"miss%20key\" was not found by memcached"
    );
    assert_eq!(n.level(), Level::Info);
    // The END line is taken off the buffer: the connection can serve the next get.
    let req = request(b"k").unwrap();
    let mut d = Decoder::new(&req, 0);
    let mut buf = BytesMut::from(&b"END\r\nnext"[..]);
    assert!(matches!(
        d.decode_head(&mut buf, 4096),
        Ok(Some(Answer::NotFound(_)))
    ));
    assert_eq!(
        (&buf[..], d.is_done(), d.eof()),
        (&b"next"[..], true, Ok(()))
    );
}

#[test]
fn gzip_flag() {
    for (flags, gzip_flag, gzip) in [
        ("2", 2, true),
        ("3", 2, true),
        ("1", 2, false),
        ("2", 0, false),
    ] {
        let answer = format!("VALUE k {flags} 1\r\nx\r\nEND\r\n");
        let (a, _) = run(b"k", gzip_flag, answer.as_bytes()).unwrap();
        let Answer::Found(v) = a else { panic!() };
        assert_eq!(v.gzip, gzip, "{flags} & {gzip_flag}");
    }
    // Without memcached_gzip_flag the flags are not checked.
    for flags in ["-1", "x", "99999999999999999999"] {
        let answer = format!("VALUE k {flags} 1\r\nx\r\nEND\r\n");
        let (a, _) = run(b"k", 0, answer.as_bytes()).unwrap();
        assert_eq!(
            a,
            Answer::Found(Value {
                flags: None,
                gzip: false,
                length: 1
            })
        );
        assert_eq!(
            error(b"k", 2, answer.as_bytes()),
            format!("memcached sent invalid flags in response \"VALUE k {flags} 1\" for key \"k\"")
        );
    }
}

#[test]
fn bad_answers_word_nginx_s_lines() {
    for (answer, gzip_flag, want) in [
        (
            &b"VALUE other 0 5\r\nhello\r\nEND\r\n"[..],
            0,
            "memcached sent invalid key in response \"VALUE other 0 5\" for key \"k\"",
        ),
        (
            b"VALUE k x 5\r\nhello\r\nEND\r\n",
            2,
            "memcached sent invalid flags in response \"VALUE k x 5\" for key \"k\"",
        ),
        (
            b"VALUE k  0 5\r\nhello\r\nEND\r\n",
            2,
            "memcached sent invalid flags in response \"VALUE k  0 5\" for key \"k\"",
        ),
        (
            b"VALUE k  0 5\r\nhello\r\nEND\r\n",
            0,
            "memcached sent invalid length in response \"VALUE k  0 5\" for key \"k\"",
        ),
        (
            b"VALUE k 0 x\r\nhello\r\nEND\r\n",
            0,
            "memcached sent invalid length in response \"VALUE k 0 x\" for key \"k\"",
        ),
        (
            b"VALUE k 0 5 123\r\nhello\r\nEND\r\n",
            0,
            "memcached sent invalid length in response \"VALUE k 0 5 123\" for key \"k\"",
        ),
        (
            b"VALUE k 0  5\r\nhello\r\nEND\r\n",
            0,
            "memcached sent invalid length in response \"VALUE k 0  5\" for key \"k\"",
        ),
        (
            b"ERROR\r\n",
            0,
            "memcached sent invalid response: \"ERROR\"",
        ),
        (
            b"SERVER_ERROR out of memory\r\n",
            0,
            "memcached sent invalid response: \"SERVER_ERROR out of memory\"",
        ),
        (
            b"VALUE k 0 5\nhello\r\nEND\r\n",
            0,
            "memcached sent invalid response: \"VALUE k 0 5\"",
        ),
        (b"END\n", 0, "memcached sent invalid response: \"END\""),
        (
            b"VALUE k 0\r\nhello\r\nEND\r\n",
            0,
            "memcached sent invalid response: \"VALUE k 0\"",
        ),
        (
            b"VALUE kx 0 5\r\nhello\r\nEND\r\n",
            0,
            "memcached sent invalid response: \"VALUE kx 0 5\"",
        ),
        (
            b"VALUE k\r\n",
            0,
            "memcached sent invalid response: \"VALUE k\"",
        ),
        (b"\r\n", 0, "memcached sent invalid response: \"\""),
        (
            b"VALUE k 0 5\r\nhelloXXEND\r\n",
            0,
            "memcached sent invalid trailer",
        ),
        (
            b"VALUE k 0 5\r\nhel",
            0,
            "upstream prematurely closed connection",
        ),
        (
            b"VALUE k 0 5\r\nhello\r\nEN",
            0,
            "upstream prematurely closed connection",
        ),
        (b"VALUE k 0 5", 0, "upstream prematurely closed connection"),
    ] {
        assert_eq!(
            error(b"k", gzip_flag, answer),
            want,
            "{:?}",
            crate::lossy(answer)
        );
    }
    // Bytes after the trailer, when they come with it.
    let answer = b"VALUE k 0 5\r\nhello\r\nEND\r\nMORE";
    assert_eq!(
        exchange(b"k", 0, answer, answer.len()),
        Err(MemcachedError::InvalidTrailer)
    );
    assert!(exchange(b"k", 0, answer, answer.len() - 4).is_ok());
    // The first line must end within the buffer.
    let req = request(b"k").unwrap();
    let mut d = Decoder::new(&req, 0);
    let mut buf = BytesMut::from(&b"VALUE k 0 5"[..]);
    assert_eq!(
        d.decode_head(&mut buf, 11),
        Err(MemcachedError::TooBigHeader)
    );
    let mut d = Decoder::new(&req, 0);
    assert_eq!(d.decode_head(&mut buf, 12), Ok(None));
}

proptest! {
    /// Any answer, any cut: no panic, the same answer however the bytes arrive.
    #[test]
    fn any_answer(answer in proptest::collection::vec(any::<u8>(), 0..200), gzip in 0u64..4) {
        let _ = run(b"k", gzip, &answer);
    }

    /// Any value round-trips, whatever bytes it holds.
    #[test]
    fn any_value(value in proptest::collection::vec(any::<u8>(), 0..300), flags: u32) {
        let mut answer = format!("VALUE k {flags} {}\r\n", value.len()).into_bytes();
        answer.extend_from_slice(&value);
        answer.extend_from_slice(b"\r\nEND\r\n");
        let (a, v) = run(b"k", 1, &answer).unwrap();
        prop_assert_eq!(&v, &value);
        let want = Value { flags: Some(u64::from(flags)), gzip: flags & 1 != 0, length: v.len() as u64 };
        prop_assert_eq!(a, Answer::Found(want));
    }
}
