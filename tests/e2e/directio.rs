//! `directio`: files at or above the threshold are read with `O_DIRECT` (bypassing the page
//! cache), in pieces, through the thread pool with `aio threads` and inline without; never by
//! sendfile. What matters end to end: every byte arrives, whole files and ranges alike, at any
//! alignment, on a filesystem that takes `O_DIRECT` (the test's prefix is on disk under
//! /var/tmp) as well as one that refuses it (the fallback reads normally).

use crate::common::client::{exchange, head_and_body, request};
use crate::common::*;

/// `GET path` (with a `Range` when given) on a new connection: the head and the body.
fn fetch(port: u16, path: &str, range: Option<&str>) -> (String, Vec<u8>) {
    let range = range.map_or(String::new(), |r| format!("Range: bytes={r}\r\n"));
    let req = request("GET", path, &format!("{range}Connection: close\r\n"));
    head_and_body(&exchange(port, &req))
}

#[test]
fn directio_files_arrive_whole_with_and_without_the_pool() {
    // A prefix on disk (O_DIRECT needs a real filesystem; /tmp may be tmpfs).
    let disk = tempfile::Builder::new()
        .prefix("shoal-directio-")
        .tempdir_in("/var/tmp")
        .unwrap();
    let data: Vec<u8> = (0..3_000_000u32).map(|i| (i * 31 % 251) as u8).collect();
    std::fs::write(disk.path().join("big.bin"), &data).unwrap();
    std::fs::write(disk.path().join("small.bin"), &data[..1000]).unwrap();
    let port = free_port();
    let conf = conf_with(
        port,
        "thread_pool io threads=2;",
        &format!(
            "sendfile on;\ndirectio 64k;\nlocation /pool/ {{ alias {d}/; aio threads=io; }}\n\
             location /inline/ {{ alias {d}/; }}\n\
             location /aligned/ {{ alias {d}/; directio_alignment 4k; aio threads=io; }}",
            d = disk.path().display()
        ),
    );
    let _s = Shoal::start(&conf, port);
    for prefix in ["/pool/", "/inline/", "/aligned/"] {
        let (head, body) = fetch(port, &format!("{prefix}big.bin"), None);
        assert!(head.starts_with("HTTP/1.1 200"), "{prefix}: {head}");
        assert_eq!(body.len(), data.len(), "{prefix}");
        assert!(body == data, "{prefix}: the bytes differ");
        for (r, from, to) in [
            ("1-4096", 1usize, 4097usize),
            ("511-70000", 511, 70_001),
            ("2999000-", 2_999_000, 3_000_000),
            ("-10", 2_999_990, 3_000_000),
        ] {
            let (head, body) = fetch(port, &format!("{prefix}big.bin"), Some(r));
            assert!(head.starts_with("HTTP/1.1 206"), "{prefix} {r}: {head}");
            assert!(body == data[from..to], "{prefix} {r}: the bytes differ");
        }
        // Below the threshold: the ordinary path.
        let (_, body) = fetch(port, &format!("{prefix}small.bin"), None);
        assert_eq!(body, &data[..1000], "{prefix}");
    }
}
