//! The memcached `get` and answer decoder against a real memcached (Debian's), over a unix
//! socket: values stored with `set` (written here by hand) come back whole, with their flags,
//! under keys that need escaping; a missing key is a miss; one connection serves several
//! `get`s.

mod backends;

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::process::Command;

use backends::Server;
use shoal_http::bytes::BytesMut;
use shoal_http::memcached::{request, Answer, Decoder, Value};
use shoal_http::BodyChunk;

fn memcached() -> Server {
    let dir = backends::tempdir();
    let socket = dir.path().join("memcached.sock");
    let mut cmd = Command::new(backends::program(&["memcached"], "memcached"));
    cmd.args([
        "-s",
        &socket.display().to_string(),
        "-a",
        "0700",
        "-m",
        "64",
        "-t",
        "1",
    ]);
    if backends::is_root() {
        cmd.args(["-u", "root"]);
    }
    Server::start("memcached", cmd, dir, socket, false)
}

/// Stores `value` under `key` (as memcached sees it, already escaped) with `flags`.
fn set(s: &mut UnixStream, key: &[u8], flags: u32, value: &[u8]) {
    let mut cmd = b"set ".to_vec();
    cmd.extend_from_slice(key);
    cmd.extend_from_slice(format!(" {flags} 0 {}\r\n", value.len()).as_bytes());
    cmd.extend_from_slice(value);
    cmd.extend_from_slice(b"\r\n");
    s.write_all(&cmd).expect("writing the set");
    let mut reply = [0u8; 8];
    s.read_exact(&mut reply).expect("reading STORED");
    assert_eq!(&reply, b"STORED\r\n");
}

/// `get` for `key` (not yet escaped) on `s`; the answer and the value.
fn get(s: &mut UnixStream, key: &[u8], gzip_flag: u64) -> (Answer, Vec<u8>) {
    let req = request(key).expect("a key");
    s.write_all(&req.bytes).expect("writing the get");
    let mut d = Decoder::new(&req, gzip_flag);
    let mut buf = BytesMut::new();
    let mut chunk = vec![0u8; 16384];
    let mut read = |buf: &mut BytesMut| {
        let n = s.read(&mut chunk).expect("reading the answer (timed out?)");
        assert!(n > 0, "memcached closed the connection");
        buf.extend_from_slice(&chunk[..n]);
    };
    let answer = loop {
        if let Some(a) = d.decode_head(&mut buf, 4096).expect("a valid first line") {
            break a;
        }
        read(&mut buf);
    };
    let mut value = Vec::new();
    if let Answer::Found(_) = answer {
        loop {
            match d.decode_body(&mut buf).expect("a valid value") {
                BodyChunk::Data(b) => value.extend_from_slice(&b),
                BodyChunk::NeedMore => read(&mut buf),
                BodyChunk::Done => break,
            }
        }
    }
    assert!(d.is_done() && buf.is_empty());
    (answer, value)
}

#[test]
fn values_flags_misses_and_escaped_keys() {
    let server = memcached();
    let mut s = server.connect();
    set(&mut s, b"/index.html", 0, b"<p>hello</p>");
    let value: Vec<u8> = (0..500_000u32).map(|i| (i % 253) as u8).collect();
    set(&mut s, b"big", 0, &value);
    set(&mut s, b"compressed", 2, b"\x1f\x8b...");
    // nginx writes a space and `%` as %20 and %25 in the key it sends.
    set(&mut s, b"a%20b%25c", 5, b"escaped");

    let (a, v) = get(&mut s, b"/index.html", 0);
    assert_eq!(
        a,
        Answer::Found(Value {
            flags: Some(0),
            gzip: false,
            length: 12
        })
    );
    assert_eq!(v, b"<p>hello</p>");
    let (_, v) = get(&mut s, b"big", 0);
    assert!(v == value, "the big value differs");
    let (a, _) = get(&mut s, b"compressed", 2);
    assert_eq!(
        a,
        Answer::Found(Value {
            flags: Some(2),
            gzip: true,
            length: 5
        })
    );
    let (a, _) = get(&mut s, b"compressed", 1);
    assert_eq!(
        a,
        Answer::Found(Value {
            flags: Some(2),
            gzip: false,
            length: 5
        })
    );
    let (a, v) = get(&mut s, b"a b%c", 0);
    assert_eq!(
        (a, &v[..]),
        (
            Answer::Found(Value {
                flags: Some(5),
                gzip: false,
                length: 7
            }),
            &b"escaped"[..]
        )
    );
    let (a, _) = get(&mut s, b"missing", 0);
    let Answer::NotFound(miss) = a else {
        panic!("a miss: {a:?}")
    };
    assert_eq!(
        miss.to_string(),
        "key: \"missing\" was not found by memcached"
    );
    // The connection is still good after all of them.
    let (_, v) = get(&mut s, b"/index.html", 0);
    assert_eq!(v, b"<p>hello</p>");
}
