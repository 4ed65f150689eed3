//! A file's answer over HTTP/2, frame by frame (the hand-written client of `h2_hostile`): its
//! bytes read straight into DATA frames arrive whole and in order, each frame within
//! `http2_chunk_size` and the client's windows, END_STREAM on the last, for a whole file,
//! a range of one and a client that opens its window a little at a time. A body whose end is
//! known ahead ends with its last DATA frame (no empty frame after it, as nginx and h2o), a
//! body-less answer (HEAD, 204, 304, an empty file) with its HEADERS.

use crate::common::upstream::{Answer, Upstream};
use crate::common::{free_port, Prefix, Shoal};
use crate::h2::conf;
use crate::h2_hostile::{
    get_block, literal, status_of_frame, Frame, DATA, END_HEADERS, END_STREAM, H2, HEADERS,
    RST_STREAM,
};

const WINDOW_UPDATE: u8 = 8;

/// A file whose every byte says where it is (no piece equals another).
fn pattern(len: usize) -> Vec<u8> {
    (0..len as u64).map(|i| (i * 7 + i / 251) as u8).collect()
}

fn start(server: &str, len: usize) -> (Shoal, u16, Vec<u8>) {
    let port = free_port();
    let prefix = Prefix::new();
    let data = pattern(len);
    std::fs::write(prefix.join("html/big.bin"), &data).unwrap();
    let s = Shoal::start_in(prefix, &conf(port, "", server), port, &[]);
    (s, port, data)
}

fn window_update(c: &mut H2, stream: u32, n: u32) {
    assert!(c.frame(WINDOW_UPDATE, 0, stream, &n.to_be_bytes()));
}

/// The DATA frames of `stream` up to the one with END_STREAM (a reset fails the test).
fn data_frames(c: &mut H2, stream: u32) -> Vec<Frame> {
    let mut frames = Vec::new();
    loop {
        let f = c
            .until(|f| f.2 == stream && (f.0 == DATA || f.0 == RST_STREAM))
            .expect("the answer's DATA");
        assert_ne!(f.0, RST_STREAM, "the stream was reset");
        let last = f.1 & END_STREAM != 0;
        frames.push(f);
        if last {
            return frames;
        }
    }
}

/// The frames' bytes, after checking each frame's size and that only the last ends the
/// stream (it may be empty).
fn joined(frames: &[Frame], max: usize) -> Vec<u8> {
    for (i, f) in frames.iter().enumerate() {
        assert!(f.3.len() <= max, "frame {i}: {} bytes", f.3.len());
        assert_eq!(f.1 & END_STREAM != 0, i + 1 == frames.len(), "frame {i}");
    }
    frames.iter().flat_map(|f| f.3.iter().copied()).collect()
}

/// Like [`joined`], and the last frame carries bytes: the body's end was known when they
/// went, no empty DATA frame ends it.
fn ended_by_last_bytes(frames: &[Frame], max: usize) -> Vec<u8> {
    let last = frames.last().expect("a DATA frame");
    assert!(
        !last.3.is_empty(),
        "an empty DATA frame ends the stream after {} frames",
        frames.len()
    );
    joined(frames, max)
}

/// The answer's status and, unless its HEADERS ended the stream, its DATA frames.
fn answer(c: &mut H2, stream: u32) -> (u16, Option<Vec<Frame>>) {
    let h = c
        .until(|f| f.2 == stream && (f.0 == HEADERS || f.0 == RST_STREAM))
        .expect("the answer's HEADERS");
    assert_eq!(h.0, HEADERS, "the stream was reset");
    let status = status_of_frame(&h);
    if h.1 & END_STREAM != 0 {
        return (status, None);
    }
    (status, Some(data_frames(c, stream)))
}

/// A request of `method` for `path`.
fn request(c: &mut H2, stream: u32, method: &str, path: &str, extra: &[(&str, &str)]) {
    let mut block = Vec::new();
    literal(&mut block, ":method", method.as_bytes());
    // (`get_block`'s fields but its `:method`: the first literal.)
    let get = get_block(path, extra);
    block.extend_from_slice(&get[2 + ":method".len() + 1 + "GET".len()..]);
    assert!(c.frame(HEADERS, END_STREAM | END_HEADERS, stream, &block));
}

/// Wide windows (a client that reads everything, as a browser's).
fn wide(port: u16) -> H2 {
    let mut c = H2::connect(port, &[(4, 1 << 30)]);
    window_update(&mut c, 0, (1 << 30) - 65_535);
    c
}

#[test]
fn a_file_goes_whole_in_frames_of_http2_chunk_size() {
    let (_s, port, data) = start("", 1_000_003);
    let mut c = wide(port);
    c.get(1, "/big.bin", &[]);
    c.until(|f| f.0 == HEADERS && f.2 == 1).expect("HEADERS");
    let frames = data_frames(&mut c, 1);
    assert_eq!(joined(&frames, 8192), data);
    // A second answer on the same connection, and a range of the file.
    c.get(3, "/big.bin", &[("range", "bytes=100001-750000")]);
    let frames = data_frames(&mut c, 3);
    assert_eq!(joined(&frames, 8192), data[100_001..750_001]);
}

#[test]
fn larger_chunks_are_held_to_the_client_s_frame_size() {
    let (_s, port, data) = start("http2_chunk_size 64k;", 300_000);
    let mut c = wide(port);
    c.get(1, "/big.bin", &[]);
    let frames = data_frames(&mut c, 1);
    assert_eq!(joined(&frames, 16_384), data);
    assert!(frames.iter().any(|f| f.3.len() == 16_384));
}

#[test]
fn a_window_opened_a_little_at_a_time_gets_no_more_than_it_allows() {
    let (_s, port, data) = start("", 200_000);
    // The stream's window starts at 1000 bytes; the connection's stays wide.
    let mut c = H2::connect(port, &[(4, 1000)]);
    window_update(&mut c, 0, 1 << 30);
    c.get(1, "/big.bin", &[]);
    let mut body = Vec::new();
    let mut allowed = 1000usize;
    while body.len() < data.len() {
        let f = c
            .until(|f| f.2 == 1 && (f.0 == DATA || f.0 == RST_STREAM))
            .expect("DATA");
        assert_eq!(f.0, DATA, "the stream was reset");
        body.extend_from_slice(&f.3);
        assert!(
            body.len() <= allowed,
            "{} bytes for a window of {allowed}",
            body.len()
        );
        // The frame with the file's last bytes ends the stream, no other.
        let end = f.1 & END_STREAM != 0;
        assert_eq!(end, body.len() == data.len(), "at {} bytes", body.len());
        if body.len() == allowed && allowed < data.len() {
            window_update(&mut c, 1, 7_777);
            allowed += 7_777;
        }
    }
    assert_eq!(body, data);
}

#[test]
fn a_body_known_ahead_ends_with_its_last_data_frame() {
    let up = Upstream::start(|r| {
        if r.target.starts_with("/chunked") {
            Answer::ok(vec![b'c'; 30_000]).chunked(&[10_000, 10_000])
        } else {
            Answer::ok(vec![b'u'; 70_000])
        }
    });
    let (s, port, data) = start(
        &format!(
            "location = /x {{ return 200 \"x\"; }}\n\
             location = /nothing {{ return 204; }}\n\
             location /up/ {{ proxy_pass http://127.0.0.1:{}/; }}\n\
             location /z/ {{ gzip on; gzip_min_length 1; gzip_types application/octet-stream; }}",
            up.port()
        ),
        100_000,
    );
    let html = s.prefix.join("html");
    std::fs::write(html.join("empty.bin"), b"").unwrap();
    std::fs::create_dir(html.join("z")).unwrap();
    std::fs::write(html.join("z/big.bin"), &data).unwrap();
    let mtime = std::time::UNIX_EPOCH + std::time::Duration::from_secs(1_577_836_800);
    std::fs::File::options()
        .write(true)
        .open(html.join("big.bin"))
        .unwrap()
        .set_modified(mtime)
        .unwrap();
    let mut c = wide(port);
    let mut id = 1;
    let mut ask = |c: &mut H2, method: &str, path: &str, extra: &[(&str, &str)]| {
        request(c, id, method, path, extra);
        id += 2;
        answer(c, id - 2)
    };
    // A file, whole (its last frame short of `http2_chunk_size`), and a range of it.
    let (status, frames) = ask(&mut c, "GET", "/big.bin", &[]);
    assert_eq!(status, 200);
    assert_eq!(ended_by_last_bytes(&frames.unwrap(), 8192), data);
    let (status, frames) = ask(&mut c, "GET", "/big.bin", &[("range", "bytes=10-8201")]);
    assert_eq!(status, 206);
    assert_eq!(ended_by_last_bytes(&frames.unwrap(), 8192), data[10..8202]);
    // Ranges as multipart/byteranges.
    let (status, frames) = ask(&mut c, "GET", "/big.bin", &[("range", "bytes=0-9,500-599")]);
    assert_eq!(status, 206);
    let body = ended_by_last_bytes(&frames.unwrap(), 8192);
    assert!(body.windows(100).any(|w| w == &data[500..600]));
    // A fixed text.
    let (status, frames) = ask(&mut c, "GET", "/x", &[]);
    assert_eq!(status, 200);
    assert_eq!(ended_by_last_bytes(&frames.unwrap(), 8192), b"x");
    // An upstream's answer with its length.
    let (status, frames) = ask(&mut c, "GET", "/up/sized", &[]);
    assert_eq!(status, 200);
    assert_eq!(
        ended_by_last_bytes(&frames.unwrap(), 8192),
        vec![b'u'; 70_000]
    );
    // Compressed: the filter's last bytes end the stream.
    let (status, frames) = ask(&mut c, "GET", "/z/big.bin", &[("accept-encoding", "gzip")]);
    assert_eq!(status, 200);
    let body = ended_by_last_bytes(&frames.unwrap(), 8192);
    assert_eq!(&body[..2], b"\x1f\x8b", "gzip's magic");
    // A chunked upstream's end is learnt after its last bytes: whole, ended (an empty frame
    // may end it).
    let (status, frames) = ask(&mut c, "GET", "/up/chunked", &[]);
    assert_eq!(status, 200);
    assert_eq!(joined(&frames.unwrap(), 8192), vec![b'c'; 30_000]);
    // No body: HEAD, 204, 304 and an empty file end with their HEADERS.
    assert_eq!(ask(&mut c, "HEAD", "/big.bin", &[]), (200, None));
    assert_eq!(ask(&mut c, "HEAD", "/x", &[]), (200, None));
    assert_eq!(ask(&mut c, "GET", "/nothing", &[]), (204, None));
    let since = [("if-modified-since", "Wed, 01 Jan 2020 00:00:00 GMT")];
    assert_eq!(ask(&mut c, "GET", "/big.bin", &since), (304, None));
    assert_eq!(ask(&mut c, "GET", "/empty.bin", &[]), (200, None));
    // The connection is still good.
    let (status, frames) = ask(&mut c, "GET", "/x", &[]);
    assert_eq!(
        (status, ended_by_last_bytes(&frames.unwrap(), 8192)),
        (200, b"x".to_vec())
    );
}
