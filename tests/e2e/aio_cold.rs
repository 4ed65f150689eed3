//! Cold sendfile through a thread pool: a file that is not in the page cache at all (written
//! with `O_DIRECT`, then evicted to be sure), sent with `sendfile on` and `aio threads`, arrives
//! intact, and the pool (not the worker) does the sending.

use crate::aio_support::{assert_body, conf, evict, threads_named, DataDir};
use crate::common::{free_port, Client, Shoal};

const MIB: usize = 1 << 20;

/// A cold (evicted) 16 MiB file with `sendfile on` and `aio threads`: the bytes arrive intact,
/// whole and as a range, and the pool's threads did the sendfile (their read bytes): all of it
/// with `aio_residency_check off`, at least the cold start of it with the check on.
fn cold_sendfile(check: &str) {
    let data = DataDir::new();
    let size = 16 * MIB + 12_345;
    let big = data.write_cold("big.bin", size, 42);
    let port = free_port();
    let s = Shoal::start(
        &conf(
            port,
            data.path(),
            "thread_pool big threads=2;",
            &format!(
                "aio threads=big;\naio_residency_check {check};\nsendfile on;\nsendfile_max_chunk 1m;"
            ),
        ),
        port,
    );
    let path = data.file("big.bin");
    evict(&path);
    let pool_read = || -> u64 { threads_named(s.pid, "big-").iter().map(|t| t.rchar).sum() };
    let worker_read = || -> u64 {
        threads_named(s.pid, "shoal-worker")
            .iter()
            .map(|t| t.rchar)
            .sum()
    };
    let (p0, w0) = (pool_read(), worker_read());

    let mut c = Client::connect(port);
    let r = c.get("/big.bin").expect("the cold file");
    assert_eq!(r.status, 200, "error log:\n{}", s.error_log());
    assert_body(&r.body, &big, "cold file via sendfile");
    let (pool, worker) = (pool_read() - p0, worker_read() - w0);
    if check == "off" {
        assert!(
            pool >= size as u64 && worker < MIB as u64,
            "with aio_residency_check off every sendfile goes to the pool: pool threads sent \
             {pool} bytes, the worker {worker}, of {size}"
        );
    } else {
        assert!(
            pool > 0 && pool + worker >= size as u64,
            "a cold file's first chunk goes to the pool: pool threads sent {pool} bytes, the \
             worker {worker}, of {size}"
        );
    }

    // A range of a cold file: offsets survive the trip through the pool. A second file, written
    // cold: the one just sent cannot be evicted at once (the kernel frees sent socket buffers,
    // which hold its pages, lazily).
    let other = data.write_cold("other.bin", size, 43);
    evict(&data.file("other.bin"));
    let (from, to) = (1_000_001usize, 9_437_183usize);
    c.send(
        format!("GET /other.bin HTTP/1.1\r\nHost: localhost\r\nRange: bytes={from}-{to}\r\n\r\n")
            .as_bytes(),
    )
    .expect("range request");
    let r = c.read_response().expect("range response");
    assert_eq!(r.status, 206);
    assert_body(&r.body, &other[from..=to], "cold range via sendfile");
}

#[test]
fn cold_large_file_sendfile_offloaded_with_residency_check() {
    cold_sendfile("on");
}

#[test]
fn cold_large_file_sendfile_offloaded_always() {
    cold_sendfile("off");
}
