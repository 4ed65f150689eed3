//! A file's answer over HTTP/2, frame by frame (the hand-written client of `h2_hostile`): its
//! bytes read straight into DATA frames arrive whole and in order, each frame within
//! `http2_chunk_size` and the client's windows, END_STREAM on the last, for a whole file,
//! a range of one and a client that opens its window a little at a time.

use crate::common::{free_port, Prefix, Shoal};
use crate::h2::conf;
use crate::h2_hostile::{Frame, DATA, END_STREAM, H2, HEADERS, RST_STREAM};

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
        let end = f.1 & END_STREAM != 0;
        assert!(!end || body.len() == data.len(), "ended early");
        if body.len() == allowed && allowed < data.len() {
            window_update(&mut c, 1, 7_777);
            allowed += 7_777;
        }
        if body.len() == data.len() && !end {
            // The body is whole: what follows is an empty END_STREAM.
            let last = data_frames(&mut c, 1);
            assert_eq!(last.len(), 1);
            assert!(last[0].3.is_empty());
        }
    }
    assert_eq!(body, data);
}
