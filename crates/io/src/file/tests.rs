//! File range tests on real files (/var/tmp is ext4 here, /dev/shm tmpfs) and real sockets.

use super::*;
use crate::syscall::Advice;
use std::io::{Read, Write};
use std::os::fd::AsFd;
use std::sync::mpsc;
use tokio::io::Interest;

/// Deterministic, not-repeating-every-page content.
fn content(len: usize) -> Vec<u8> {
    let mut x: u32 = 0x9e37_79b9;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            x as u8
        })
        .collect()
}

fn file_in(dir: &str, data: &[u8]) -> (tempfile::NamedTempFile, Arc<File>) {
    let mut f = tempfile::NamedTempFile::new_in(dir).expect("temp file");
    f.write_all(data).expect("write");
    f.as_file()
        .sync_all()
        .expect("sync: clean pages can be evicted");
    let file = Arc::new(File::open(f.path()).expect("reopen"));
    (f, file)
}

fn evict(file: &File) {
    syscall::fadvise(file.as_fd(), 0, 0, Advice::DontNeed).expect("fadvise");
}

fn posted(pool: &ThreadPool) -> u64 {
    pool.stats().completed
}

#[tokio::test]
async fn read_range_returns_exact_bytes_in_every_mode() {
    let data = content(1 << 20);
    let (path, file) = file_in("/var/tmp", &data);
    assert_eq!(std::fs::read(path.path()).unwrap(), data);
    let pool = ThreadPool::new("read", 2, 64).unwrap();
    let ranges = [
        (0, 1 << 20),
        (1, 4095),
        (4096, 8192),
        (12_345, 300_000),
        ((1 << 20) - 10, 100),
        (2 << 20, 10),
        (7, 0),
    ];
    for cold in [false, true] {
        for (pool, check) in [(None, false), (Some(&pool), false), (Some(&pool), true)] {
            for &(off, len) in &ranges {
                if cold {
                    evict(&file);
                }
                let got = read_range(&file, off, len, pool, check).await.unwrap();
                let start = (off as usize).min(data.len());
                let end = (off as usize + len).min(data.len());
                assert_eq!(
                    got,
                    data[start..end],
                    "cold={cold} pool={} check={check} {off}+{len}",
                    pool.is_some()
                );
            }
        }
    }
}

#[tokio::test]
async fn hot_reads_stay_inline_and_cold_ones_are_posted() {
    let data = content(256 << 10);
    let (_path, file) = file_in("/var/tmp", &data);
    let pool = ThreadPool::new("offload", 2, 64).unwrap();
    // Hot (just written): no pool round trip with the residency check, one without it.
    assert_eq!(
        read_range(&file, 0, data.len(), Some(&pool), true)
            .await
            .unwrap(),
        data
    );
    assert_eq!(posted(&pool), 0);
    assert_eq!(
        read_range(&file, 0, data.len(), Some(&pool), false)
            .await
            .unwrap(),
        data
    );
    assert_eq!(posted(&pool), 1);
    // Cold: posted.
    evict(&file);
    assert_eq!(
        read_range(&file, 0, data.len(), Some(&pool), true)
            .await
            .unwrap(),
        data
    );
    assert_eq!(posted(&pool), 2);
}

#[tokio::test]
async fn a_cached_prefix_is_read_inline_and_only_the_rest_posted() {
    let page = syscall::page_size() as usize;
    let data = content(256 * page);
    let (_path, file) = file_in("/var/tmp", &data);
    let pool = ThreadPool::new("prefix", 1, 8).unwrap();
    // Cache exactly the first 8 pages: evict, no readahead, read them.
    evict(&file);
    syscall::fadvise(file.as_fd(), 0, 0, Advice::Random).unwrap();
    let mut head = vec![0u8; 8 * page];
    syscall::pread_full(file.as_fd(), &mut head, 0).unwrap();
    let mut probe = vec![0u8; 64 * page];
    assert_eq!(
        syscall::preadv2_nowait(file.as_fd(), &mut probe, 0).unwrap(),
        NowaitRead::Short(8 * page)
    );
    evict(&file);
    syscall::pread_full(file.as_fd(), &mut head, 0).unwrap();
    let got = read_range(&file, 100, 64 * page, Some(&pool), true)
        .await
        .unwrap();
    assert_eq!(got, data[100..100 + 64 * page]);
    assert_eq!(posted(&pool), 1);
}

#[tokio::test]
async fn tmpfs_reads_inline_despite_refusing_nowait() {
    let data = content(100_000);
    let (_path, file) = file_in("/dev/shm", &data);
    let pool = ThreadPool::new("shm", 1, 8).unwrap();
    for _ in 0..2 {
        assert_eq!(
            read_range(&file, 10, 50_000, Some(&pool), true)
                .await
                .unwrap(),
            data[10..50_010]
        );
    }
    assert_eq!(posted(&pool), 0);
    assert_eq!(
        read_range(&file, 10, 50_000, Some(&pool), false)
            .await
            .unwrap(),
        data[10..50_010]
    );
    assert_eq!(posted(&pool), 1);
}

#[tokio::test]
async fn a_full_pool_queue_is_an_overflow_error() {
    let data = content(8192);
    let (_path, file) = file_in("/var/tmp", &data);
    let pool = ThreadPool::new("full", 1, 0).unwrap();
    let (tx, rx) = mpsc::channel::<()>();
    let blocker = pool.post(move || rx.recv()).unwrap();
    let err = read_range(&file, 0, 100, Some(&pool), false)
        .await
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "thread pool \"full\" queue overflow: 0 tasks waiting"
    );
    assert!(crate::pool::Overflow::from_io(&err).is_some());
    // Hot data needs no pool: the residency check reads it inline even now.
    assert_eq!(
        read_range(&file, 0, 100, Some(&pool), true).await.unwrap(),
        data[..100]
    );
    tx.send(()).unwrap();
    blocker.await.unwrap().unwrap();
}

/// Sends `file` whole over a real 127.0.0.1 connection with `sendfile_range` and returns what
/// the peer received. The peer starts reading only after the socket first fills up, so the
/// "socket full → wait for writability → call again" path always runs.
async fn send_over_tcp(
    file: &Arc<File>,
    len: u64,
    pool: Option<&ThreadPool>,
    check: bool,
) -> Vec<u8> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (go_tx, go) = mpsc::channel::<()>();
    let reader = std::thread::spawn(move || {
        let mut peer = std::net::TcpStream::connect(addr).unwrap();
        go.recv().unwrap();
        let mut got = Vec::new();
        peer.read_to_end(&mut got).unwrap();
        got
    });
    let (stream, _) = listener.accept().await.unwrap();
    let mut go_tx = Some(go_tx);
    let mut off = 0;
    while off < len {
        let sent = sendfile_range(stream.as_fd(), file, off, len - off, pool, check)
            .await
            .unwrap();
        off += sent.bytes;
        if off < len {
            assert!(sent.socket_full, "the file ended early at {off}");
            if let Some(go) = go_tx.take() {
                go.send(()).unwrap();
            }
            loop {
                stream.writable().await.unwrap();
                let probe = || match syscall::writable_now(stream.as_fd())? {
                    true => Ok(()),
                    false => Err(io::ErrorKind::WouldBlock.into()),
                };
                if stream.try_io(Interest::WRITABLE, probe).is_ok() {
                    break;
                }
            }
        }
    }
    if let Some(go) = go_tx.take() {
        go.send(()).unwrap();
    }
    drop(stream);
    reader.join().unwrap()
}

fn fnv1a(data: &[u8]) -> u64 {
    data.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ b as u64).wrapping_mul(0x0100_0000_01b3)
    })
}

#[tokio::test]
async fn sendfile_delivers_exact_bytes_inline_and_from_the_pool() {
    let data = content(12 << 20);
    let sum = fnv1a(&data);
    let (_path, file) = file_in("/var/tmp", &data);
    let pool = ThreadPool::new("sendfile", 2, 64).unwrap();
    for (name, pool, check, cold) in [
        ("aio off", None, false, false),
        ("always offload", Some(&pool), false, false),
        ("residency check, hot", Some(&pool), true, false),
        ("residency check, cold", Some(&pool), true, true),
    ] {
        if cold {
            evict(&file);
        }
        let before = pool.map(posted);
        let got = send_over_tcp(&file, data.len() as u64, pool, check).await;
        assert_eq!(got.len(), data.len(), "{name}");
        assert_eq!(fnv1a(&got), sum, "{name}");
        assert!(got == data, "{name}");
        let posts = pool.map(|p| posted(p) - before.unwrap());
        match name {
            "aio off" => assert_eq!(posts, None),
            "residency check, hot" => assert_eq!(posts, Some(0), "{name}"),
            _ => assert!(posts.unwrap() >= 1, "{name}"),
        }
    }
}

#[test]
fn sendfile_plan_follows_residency() {
    let page = syscall::page_size();
    let data = content(64 * page as usize);
    let (_path, file) = file_in("/var/tmp", &data);
    assert_eq!(
        sendfile_plan(&file, 0, 64 * page, false, true),
        SendfilePlan::Inline
    );
    assert_eq!(
        sendfile_plan(&file, 0, 64 * page, true, false),
        SendfilePlan::Offload
    );
    assert_eq!(
        sendfile_plan(&file, 0, 64 * page, true, true),
        SendfilePlan::Inline
    );
    evict(&file);
    syscall::fadvise(file.as_fd(), 0, 0, Advice::Random).unwrap();
    let mut head = vec![0u8; 4 * page as usize];
    syscall::pread_full(file.as_fd(), &mut head, 0).unwrap();
    assert_eq!(
        sendfile_plan(&file, 0, 64 * page, true, true),
        SendfilePlan::InlinePrefix(4 * page)
    );
    assert_eq!(
        sendfile_plan(&file, 8 * page, page, true, true),
        SendfilePlan::Offload
    );
    let (_shm, on_tmpfs) = file_in("/dev/shm", &data);
    evict(&on_tmpfs);
    assert_eq!(
        sendfile_plan(&on_tmpfs, 0, 64 * page, true, true),
        SendfilePlan::Inline
    );
}
