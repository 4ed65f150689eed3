//! `output_buffers NUMBER SIZE`: a file body that is read rather than sent with sendfile
//! (`sendfile off`) is read SIZE bytes at a time, inline or through the thread pool. Seen from
//! outside through the server's own count of read calls (`syscr` in `/proc/PID/io`: `read`,
//! `pread`, `preadv2`; socket reads are not in it), with every byte checked.

use std::io::{Read, Write};
use std::net::TcpStream;

use crate::common::*;

/// The server's read calls so far.
fn reads(pid: i32) -> u64 {
    let io = std::fs::read_to_string(format!("/proc/{pid}/io")).expect("reading /proc/PID/io");
    io.lines()
        .find_map(|l| l.strip_prefix("syscr: "))
        .and_then(|n| n.trim().parse().ok())
        .expect("a syscr line")
}

/// GETs `path` on a new connection, returns the body and how many read calls the server made
/// meanwhile.
fn fetch_counting(s: &Shoal, path: &str) -> (Vec<u8>, u64) {
    let mut c = TcpStream::connect(("127.0.0.1", s.port)).unwrap();
    c.set_read_timeout(Some(WAIT)).unwrap();
    let before = reads(s.pid);
    c.write_all(
        format!("GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n").as_bytes(),
    )
    .unwrap();
    let mut out = Vec::new();
    c.read_to_end(&mut out).unwrap();
    let after = reads(s.pid);
    let split = out.windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 4;
    assert!(
        out.starts_with(b"HTTP/1.1 200"),
        "{path}: {:?}",
        String::from_utf8_lossy(&out[..split])
    );
    (out[split..].to_vec(), after - before)
}

/// A prefix with `html/f/NAME`, `len` bytes that do not repeat in short runs, and the port
/// its configuration will listen on.
fn with_file(name: &str, len: u32) -> (Prefix, Vec<u8>, u16) {
    let p = Prefix::new();
    let data: Vec<u8> = (0..len).map(|i| (i * 131 % 251) as u8).collect();
    std::fs::create_dir_all(p.join("html/f")).unwrap();
    std::fs::write(p.join("html/f").join(name), &data).unwrap();
    (p, data, free_port())
}

#[test]
fn sendfile_off_reads_the_file_in_pieces_of_the_buffer_size() {
    let (p, data, port) = with_file("one.bin", 1_048_576);
    let conf = conf_with(
        port,
        "thread_pool io threads=2;",
        "sendfile off;\n\
         location /default/ { alias html/f/; }\n\
         location /small/ { alias html/f/; output_buffers 1 4k; }\n\
         location /large/ { alias html/f/; output_buffers 2 256k; }\n\
         location /pool/ { alias html/f/; output_buffers 4 4k; aio threads=io; }\n\
         location /sendfile/ { alias html/f/; sendfile on; output_buffers 1 4k; }",
    );
    let s = Shoal::start_in(p, &conf, port, &[]);
    // Warm the page cache, so every read (the pool's too) is a full one.
    let (body, _) = fetch_counting(&s, "/default/one.bin");
    assert!(body == data);
    let mut counts = Vec::new();
    for (path, at_least, at_most) in [
        // nginx's default, 2 32k: 32 reads of a MiB.
        ("/default/one.bin", 32, 40),
        ("/small/one.bin", 256, 270),
        ("/large/one.bin", 4, 8),
        // Through the pool (inline when the pages are resident): the same pieces.
        ("/pool/one.bin", 256, 270),
        // With sendfile on, the buffers play no part: no read at all.
        ("/sendfile/one.bin", 0, 2),
    ] {
        let (body, n) = fetch_counting(&s, path);
        assert_eq!(body.len(), data.len(), "{path}");
        assert!(body == data, "{path}: the bytes differ");
        assert!(
            (at_least..=at_most).contains(&n),
            "{path}: {n} read calls, expected {at_least}..={at_most}"
        );
        counts.push((path, n));
    }
    eprintln!("read calls per MiB: {counts:?}");
}

/// A client that stops reading: the server reads ahead of it by what the sockets hold plus at
/// most NUMBER buffers, then waits. The listening socket's `sndbuf=` fixes what the server's
/// side holds (the kernel would grow it to megabytes), so the buffers' part can be counted.
#[test]
fn a_client_that_stops_reading_holds_at_most_the_buffers() {
    let (p, _, port) = with_file("four.bin", 4_194_304);
    let conf = conf_with(
        port,
        "",
        "sendfile off;\n\
         location /one/ { alias html/f/; output_buffers 1 4k; }\n\
         location /eight/ { alias html/f/; output_buffers 8 4k; }",
    )
    .replace(
        &format!("listen 127.0.0.1:{port};"),
        &format!("listen 127.0.0.1:{port} sndbuf=16k;"),
    );
    let s = Shoal::start_in(p, &conf, port, &[]);
    // The port answers once the master has bound it; the worker's own start (it reads
    // /proc/self/fdinfo to take the socket up) can end later on a busy machine, and those reads
    // are not reads ahead of a client: one answer first, so the worker is up before counting.
    get(port, "/index.html").expect("the worker answers");
    let stalled = |path: &str| -> u64 {
        let sock =
            socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
        sock.set_recv_buffer_size(4096).unwrap();
        sock.connect(&std::net::SocketAddr::from(([127, 0, 0, 1], port)).into())
            .unwrap();
        let mut c: TcpStream = sock.into();
        let before = reads(s.pid);
        c.write_all(format!("GET {path} HTTP/1.1\r\nHost: localhost\r\n\r\n").as_bytes())
            .unwrap();
        // Until the server stops reading: the same count twice, 200 ms apart.
        let mut last = u64::MAX;
        let n = wait_for("the server to stop reading", || {
            std::thread::sleep(std::time::Duration::from_millis(200));
            let now = reads(s.pid) - before;
            let settled = now == last;
            last = now;
            settled.then_some(now)
        });
        drop(c);
        n
    };
    let one = stalled("/one/four.bin");
    let eight = stalled("/eight/four.bin");
    eprintln!("reads before waiting for the client: 1 buffer {one}, 8 buffers {eight}");
    // What the two sockets take (32k sent, a few k received) and the buffers: tens of reads,
    // not the file's thousand.
    assert!(
        one < 64,
        "read {one} x 4k ahead of a client that reads nothing"
    );
    assert!(
        (one + 6..=one + 8).contains(&eight),
        "8 buffers read {eight} x 4k ahead, 1 buffer {one}: seven more were expected"
    );
}
