//! Thread pools end to end (seeds 000 and 003): `thread_pool`, `aio threads[=NAME]` (also with
//! a variable), `aio_residency_check`, the 503 and log line of a full queue, `-t` on unknown
//! pools, cold sendfile through a pool, and a proxy cache HIT without a length read through it.
//!
//! The slow-disk tests are the seeds' benchmark in miniature: the data files sit on a real disk,
//! are evicted from the page cache, and shoal's process is put in a cgroup v1 blkio group whose
//! reads are throttled (see `aio_support`), so a cold read keeps a thread in `D` for many seconds.
//! They need root and /sys/fs/cgroup/blkio, and fail (not skip) without them. No test waits on a
//! fixed sleep: blocked reads are observed in /proc (thread state `D`), and every bound is
//! several times what the behaviour under test needs, with the blocked reads lasting longer still.

use std::path::Path;
use std::time::{Duration, Instant};

use crate::aio_support::{
    self, assert_body, conf, drain_now, evict, require_slow_disk, resident_pages, send_get, spawn,
    threads_named, wait_blocked, within, DataDir, Throttle,
};
use crate::common::{self, free_port, parse_log_line, wait_for, Client, Prefix, Response, Shoal};

const MIB: usize = 1 << 20;

/// The messages of the error log's lines at `level`, without a leading `*CONN ` number.
fn log_messages(s: &Shoal, level: &str) -> Vec<String> {
    s.error_log()
        .lines()
        .filter_map(parse_log_line)
        .filter(|(l, ..)| l == level)
        .map(
            |(.., msg)| match msg.strip_prefix('*').and_then(|m| m.split_once(' ')) {
                Some((n, rest)) if n.bytes().all(|b| b.is_ascii_digit()) => rest.to_string(),
                _ => msg,
            },
        )
        .collect()
}

/// Counts error-level lines whose message is exactly `want`.
fn count_errors(s: &Shoal, want: &str) -> usize {
    log_messages(s, "error")
        .iter()
        .filter(|m| *m == want)
        .count()
}

// ---------------------------------------------------------------------------------------------
// A slow disk: the hot file keeps being served while the pool is blocked.
// ---------------------------------------------------------------------------------------------

/// Throttle for the blocking scenarios: 4 cold 4 MiB files at 1 MiB/s keep two pool threads
/// busy for about 8 s each, far beyond the 3 s the hot file is given.
const SLOW_BPS: u64 = 1 << 20;
const COLD_FILES: usize = 4;
const COLD_SIZE: usize = 4 * MIB;
const HOT_SIZE: usize = 20_000;

/// Fields drop in order: the throttle is lifted (and its cgroup removed) before shoal is
/// killed, and shoal before its data files go.
struct Scene {
    throttle: Throttle,
    shoal: Shoal,
    /// The data files, removed when the scene ends.
    _data: DataDir,
    hot: Vec<u8>,
    port: u16,
}

/// shoal with `server` lines over a data directory holding a hot file (read once, so cached)
/// and `COLD_FILES` evicted cold ones, its reads throttled to `SLOW_BPS`.
fn slow_scene(main: &str, server: &str) -> Scene {
    let data = DataDir::new();
    let dev = require_slow_disk(&data);
    let hot = data.write("hot.html", HOT_SIZE, 1);
    for i in 0..COLD_FILES {
        data.write(&format!("cold{i}.bin"), COLD_SIZE, 100 + i as u64);
    }
    let port = free_port();
    let shoal = Shoal::start(&conf(port, data.path(), main, server), port);
    let throttle = Throttle::new(&dev, SLOW_BPS, shoal.pid);
    let r = Client::connect(port)
        .get("/hot.html")
        .expect("warming the hot file");
    assert_eq!(r.status, 200, "hot file; error log:\n{}", shoal.error_log());
    assert_body(&r.body, &hot, "hot file");
    let (res, pages) = resident_pages(&data.file("hot.html"));
    assert_eq!(res, pages, "the hot file should be in the page cache");
    for i in 0..COLD_FILES {
        evict(&data.file(&format!("cold{i}.bin")));
    }
    Scene {
        throttle,
        shoal,
        _data: data,
        hot,
        port,
    }
}

/// Sends a request for every cold file and returns the unread connections.
fn request_cold(port: u16) -> Vec<std::net::TcpStream> {
    (0..COLD_FILES)
        .map(|i| send_get(port, &format!("/cold{i}.bin")))
        .collect()
}

/// Twenty hot requests on one keep-alive connection, all within 3 s, all correct, while both
/// pool threads are blocked on cold reads; and the cold answers are still incomplete after.
fn hot_file_while_pool_blocked(sendfile: &str) {
    let sc = slow_scene(
        "thread_pool slow threads=2;",
        &format!("aio threads=slow;\nsendfile {sendfile};"),
    );
    let port = sc.port;
    let mut cold = request_cold(port);
    wait_blocked(sc.shoal.pid, "slow-", 2, Duration::from_secs(10));

    let started = Instant::now();
    let answers = within(Duration::from_secs(3), move || {
        let mut c = Client::connect(port);
        (0..20).map(|_| c.get("/hot.html")).collect::<Vec<_>>()
    })
    .unwrap_or_else(|| {
        panic!(
            "the hot file was not answered 20 times within 3 s while the pool threads were \
             blocked on cold reads (sendfile {sendfile}); threads: {:?}\nerror log:\n{}",
            aio_support::threads(sc.shoal.pid),
            sc.shoal.error_log()
        )
    });
    for (i, r) in answers.into_iter().enumerate() {
        let r = r.unwrap_or_else(|e| panic!("hot request {i}: {e}"));
        assert_eq!(r.status, 200, "hot request {i}");
        assert_body(&r.body, &sc.hot, "hot file");
    }
    let took = started.elapsed();

    // The pool really was busy the whole time: no cold answer is complete yet.
    for (i, c) in cold.iter_mut().enumerate() {
        let (n, eof) = drain_now(c);
        assert!(
            !eof && n < COLD_SIZE,
            "cold request {i} already answered ({n} bytes, eof {eof}) after {took:?}: the disk \
             was not slow enough for this test to mean anything"
        );
    }
}

#[test]
fn hot_file_answers_while_every_pool_thread_blocks_on_cold_reads() {
    hot_file_while_pool_blocked("off");
}

#[test]
fn hot_file_answers_while_every_pool_thread_blocks_on_cold_sendfile() {
    hot_file_while_pool_blocked("on");
}

/// With the residency check, a cold file's ranges go to the pool and only what the page cache
/// holds is sent inline: the worker itself must never wait for the disk while cold files are
/// sent (sampled for 5 s: never in `D` with a page-cache wait in its kernel stack).
#[test]
fn worker_never_waits_on_the_disk_during_cold_sendfile() {
    let sc = slow_scene(
        "thread_pool slow threads=2;",
        "aio threads=slow;\nsendfile on;\nsendfile_max_chunk 512k;",
    );
    let _cold = request_cold(sc.port);
    wait_blocked(sc.shoal.pid, "slow-", 2, Duration::from_secs(10));
    let deadline = Instant::now() + Duration::from_secs(5);
    while Instant::now() < deadline {
        for t in threads_named(sc.shoal.pid, "shoal-worker") {
            if t.state != 'D' {
                continue;
            }
            let stack = aio_support::kernel_stack(sc.shoal.pid, t.tid);
            assert!(
                !stack.contains("filemap") && !stack.contains("folio_wait"),
                "the worker waits for the disk itself during a cold sendfile:\n{stack}"
            );
        }
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// `aio_residency_check off` (nginx's way) posts every read to the pool, the hot file's too;
/// with the check on (the default) the hot file is read inline. Shown deterministically: one
/// pool thread, no queue (`max_queue=0`), the thread held by a cold read. Then the hot request
/// needs the pool and is refused with 503 when the check is off, and is answered at once from
/// the page cache when it is on.
#[test]
fn always_offload_needs_the_pool_even_for_the_hot_file() {
    for (check, want) in [("off", 503), ("on", 200)] {
        let sc = slow_scene(
            "thread_pool slow threads=1 max_queue=0;",
            &format!("aio threads=slow;\naio_residency_check {check};\nsendfile off;"),
        );
        let port = sc.port;
        let _cold = send_get(port, "/cold0.bin");
        wait_blocked(sc.shoal.pid, "slow-", 1, Duration::from_secs(10));
        let hot = spawn(move || Client::connect(port).get("/hot.html"));
        let r = hot
            .recv_timeout(Duration::from_secs(5))
            .unwrap_or_else(|_| panic!("aio_residency_check {check}: no answer for the hot file"))
            .expect("the hot request");
        assert_eq!(r.status, want, "aio_residency_check {check}");
        if want == 200 {
            assert_body(&r.body, &sc.hot, "hot file");
        }
        sc.throttle.lift();
    }
}

/// `aio off`: the worker itself blocks on a cold read and the hot file waits: what the pools
/// exist to prevent, and proof that the emulated disk really blocks.
#[test]
fn aio_off_blocks_the_worker_on_a_cold_read() {
    let sc = slow_scene("", "aio off;\nsendfile off;");
    let port = sc.port;
    let _cold = send_get(port, "/cold0.bin");
    wait_blocked(sc.shoal.pid, "shoal-worker", 1, Duration::from_secs(10));
    let hot = spawn(move || Client::connect(port).get("/hot.html"));
    if let Ok(r) = hot.recv_timeout(Duration::from_secs(2)) {
        panic!(
            "with aio off a worker blocked on a cold read cannot answer, but it did: {:?}",
            r.map(|r| r.status)
        );
    }
    sc.throttle.lift();
    let r = hot
        .recv_timeout(Duration::from_secs(10))
        .expect("the hot request is answered once the disk is fast")
        .expect("the hot request");
    assert_eq!(r.status, 200);
    assert_body(&r.body, &sc.hot, "hot file");
}

/// A proxy cache HIT of an answer that came without a length (chunked upstream) is read
/// through the pool like any other HIT: with `aio_residency_check off` the pool's threads read
/// the body, not the worker.
#[test]
fn an_unsized_cache_hit_is_read_through_the_pool() {
    use common::upstream::{Answer, Upstream};
    use std::io::{Read, Write};
    let size = 4 * MIB + 123;
    let body = aio_support::pattern(size, 9);
    let sent = body.clone();
    let up = Upstream::start(move |_| Answer::ok(sent.clone()).chunked(&[]));
    let port = free_port();
    let text = format!(
        "daemon off;\nworker_processes 1;\nerror_log logs/error.log info;\n\
         thread_pool p threads=2;\nevents {{ worker_connections 64; }}\n\
         http {{\n    access_log off;\n    \
         proxy_cache_path cache levels=1:2 keys_zone=z:1m use_temp_path=off;\n    \
         server {{\n        listen 127.0.0.1:{port};\n        server_name localhost;\n        \
         location / {{ proxy_pass {}; proxy_cache z; proxy_cache_valid 200 1h; \
         aio threads=p; aio_residency_check off; sendfile off; \
         add_header X-Cache-Status $upstream_cache_status always; }}\n    }}\n}}\n",
        up.url()
    );
    let s = Shoal::start(&text, port);
    let fetch = || {
        let mut c = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
        c.write_all(b"GET /u HTTP/1.0\r\n\r\n").unwrap();
        let mut out = Vec::new();
        c.read_to_end(&mut out).unwrap();
        let end = out.windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 4;
        let head = String::from_utf8_lossy(&out[..end]).into_owned();
        (head, out[end..].to_vec())
    };
    let (head, got) = fetch();
    assert!(head.contains("X-Cache-Status: MISS"), "{head}");
    assert_body(&got, &body, "the MISS");
    let pool_read = || -> u64 { threads_named(s.pid, "p-").iter().map(|t| t.rchar).sum() };
    let worker_read = || -> u64 {
        threads_named(s.pid, "shoal-worker")
            .iter()
            .map(|t| t.rchar)
            .sum()
    };
    let (p0, w0) = (pool_read(), worker_read());
    let (head, got) = fetch();
    assert!(head.contains("X-Cache-Status: HIT"), "{head}");
    assert!(!head.contains("Content-Length"), "{head}");
    assert_body(&got, &body, "the HIT");
    let (pool, worker) = (pool_read() - p0, worker_read() - w0);
    assert!(
        pool >= size as u64 && worker < MIB as u64,
        "the pool's threads read {pool} bytes, the worker {worker}, of {size}"
    );
}

// ---------------------------------------------------------------------------------------------
// A full queue: 503 and `thread pool "NAME" queue overflow: N tasks waiting`.
// ---------------------------------------------------------------------------------------------

/// One thread blocked on a cold read, then `extra` more cold requests: exactly
/// `extra - max_queue` of them are refused with 503 at once (the others wait in the queue), and
/// the error log has that many exact overflow lines.
fn overflow(pool: &str, max_queue: usize, extra: usize) {
    let sc = slow_scene(
        &format!("thread_pool {pool} threads=1 max_queue={max_queue};"),
        &format!("aio threads={pool};\nsendfile off;"),
    );
    let port = sc.port;
    let _first = send_get(port, "/cold0.bin");
    let comm = format!("{pool}-");
    wait_blocked(
        sc.shoal.pid,
        &comm[..comm.len().min(15)],
        1,
        Duration::from_secs(10),
    );

    let pending: Vec<_> = (1..=extra)
        .map(|i| {
            let path = format!("/cold{}.bin", i % COLD_FILES);
            spawn(move || Client::connect(port).get(&path))
        })
        .collect();
    let refused_want = extra - max_queue;
    let mut answers: Vec<Option<Response>> = (0..extra).map(|_| None).collect();
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        for (i, rx) in pending.iter().enumerate() {
            if answers[i].is_none() {
                if let Ok(r) = rx.try_recv() {
                    answers[i] = Some(r.unwrap_or_else(|e| panic!("request {i}: {e}")));
                }
            }
        }
        let done = answers.iter().flatten().count();
        if done >= refused_want || Instant::now() > deadline {
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let statuses: Vec<u16> = answers.iter().flatten().map(|r| r.status).collect();
    assert_eq!(
        statuses,
        vec![503; refused_want],
        "with threads=1 max_queue={max_queue}, one read running and {extra} more posted, \
         {refused_want} should be refused with 503 and the rest wait; error log:\n{}",
        sc.shoal.error_log()
    );
    let line = format!("thread pool \"{pool}\" queue overflow: {max_queue} tasks waiting");
    sc.shoal.wait_log(&line, refused_want);
    assert_eq!(
        count_errors(&sc.shoal, &line),
        refused_want,
        "want {refused_want} [error] lines saying exactly {line:?}; error log:\n{}",
        sc.shoal.error_log()
    );
}

#[test]
fn full_queue_answers_503_and_logs_the_overflow() {
    overflow("tiny", 1, 3);
}

#[test]
fn max_queue_zero_takes_only_as_many_tasks_as_threads() {
    overflow("zero", 0, 2);
}

// ---------------------------------------------------------------------------------------------
// Pools named by a variable.
// ---------------------------------------------------------------------------------------------

/// `aio threads=pool_$arg_p`: `?p=a` reads through pool_a's thread, `?p=b` through pool_b's
/// (seen in each thread's read bytes), and a name with no pool is a 500 and nginx's log line.
#[test]
fn pool_chosen_by_a_variable() {
    let data = DataDir::new();
    let size = 300_000;
    let body = data.write("f.bin", size, 7);
    let port = free_port();
    let s = Shoal::start(
        &conf(
            port,
            data.path(),
            "thread_pool pool_a threads=1;\nthread_pool pool_b threads=2;",
            "aio threads=pool_$arg_p;\naio_residency_check off;\nsendfile off;",
        ),
        port,
    );
    // A pool's threads are named `NAME-i`: pool_a's one thread, pool_b's two.
    let pool_threads = || {
        let mut t = threads_named(s.pid, "pool_a-");
        t.extend(threads_named(s.pid, "pool_b-"));
        t
    };
    // (A new thread names itself once it runs: wait for all three.)
    let t = wait_for("three pool threads", || {
        Some(pool_threads()).filter(|t| t.len() == 3)
    });
    let read_by = |t: &[aio_support::ThreadInfo]| (t[0].rchar, t[1].rchar + t[2].rchar);
    assert_eq!(read_by(&t), (0, 0), "{t:?}");

    let mut c = Client::connect(port);
    for _ in 0..3 {
        let r = c.get("/f.bin?p=a").expect("?p=a");
        assert_eq!(r.status, 200);
        assert_body(&r.body, &body, "?p=a");
    }
    let (a, b) = read_by(&pool_threads());
    assert!(
        a >= 3 * size as u64 && b == 0,
        "after ?p=a: pool_a read {a}, pool_b {b}"
    );

    for _ in 0..3 {
        let r = c.get("/f.bin?p=b").expect("?p=b");
        assert_eq!(r.status, 200);
        assert_body(&r.body, &body, "?p=b");
    }
    let (a2, b2) = read_by(&pool_threads());
    assert!(
        a2 == a && b2 >= 3 * size as u64,
        "after ?p=b: pool_a read {a2}, pool_b {b2}"
    );

    // nginx's output fails: the connection closes without an answer.
    for (q, name) in [("?p=x", "pool_x"), ("", "pool_")] {
        if let Ok(r) = Client::connect(port).get(&format!("/f.bin{q}")) {
            panic!(
                "/f.bin{q}: an answer {} to a request whose pool is unknown",
                r.status
            );
        }
        let line = format!(
            "thread pool \"{name}\" not found while sending response to client, client: \
             127.0.0.1, server: localhost, request: \"GET /f.bin{q} HTTP/1.1\", host: \"localhost\""
        );
        s.wait_log(&line, 1);
        assert_eq!(count_errors(&s, &line), 1, "error log:\n{}", s.error_log());
    }
    // The pools still serve after the errors.
    let r = Client::connect(port).get("/f.bin?p=b").expect("?p=b again");
    assert_eq!(r.status, 200);
}

// ---------------------------------------------------------------------------------------------
// `-t`: unknown pools named literally, and the thread_pool directive's own errors.
// ---------------------------------------------------------------------------------------------

/// `shoal -t` on `text` (and extra files in conf/); returns (exit code, stderr, conf path).
fn test_conf(text: &str, extra: &[(&str, &str)]) -> (i32, String, String, Prefix) {
    let p = Prefix::new();
    for (name, body) in extra {
        std::fs::write(p.join(&format!("conf/{name}")), body).expect("writing an included file");
    }
    let file = p.write_conf(text);
    let out = p.run(&["-t"]);
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stderr).into_owned(),
        file.display().to_string(),
        p,
    )
}

/// `-t` fails with exactly `shoal: [emerg] MESSAGE in FILE:LINE` (FILE = the main file, or
/// `conf/IN` of the prefix) and nginx's closing line.
#[track_caller]
fn fails_at(text: &str, extra: &[(&str, &str)], message: &str, in_file: Option<&str>, line: usize) {
    let (code, err, file, p) = test_conf(text, extra);
    let at = match in_file {
        Some(f) => p.join(&format!("conf/{f}")).display().to_string(),
        None => file.clone(),
    };
    let want = format!(
        "shoal: [emerg] {message} in {at}:{line}\nshoal: configuration file {file} test failed\n"
    );
    assert_eq!(err, want, "for configuration:\n{text}");
    assert_eq!(code, 1);
}

#[track_caller]
fn passes(text: &str) {
    let (code, err, file, _p) = test_conf(text, &[]);
    let tail = format!(
        "shoal: the configuration file {file} syntax is ok\nshoal: configuration file {file} test is successful\n"
    );
    assert!(
        err.ends_with(&tail) && code == 0,
        "for configuration:\n{text}\nstderr:\n{err}"
    );
}

#[test]
fn unknown_literal_pool_fails_the_test_with_file_and_line() {
    let unknown = |name: &str| format!("unknown thread pool \"{name}\"");
    fails_at(
        "events {}\nhttp {\n    server {\n        listen 127.0.0.1:8080;\n        location /a {\n            aio threads=disk1;\n        }\n    }\n}\n",
        &[],
        &unknown("disk1"),
        None,
        6,
    );
    // A directive over several lines: the line of its `;`, as nginx counts.
    fails_at(
        "events {}\nhttp {\n    aio\n        threads=x\n        ;\n    server { listen 127.0.0.1:8080; }\n}\n",
        &[],
        &unknown("x"),
        None,
        5,
    );
    // Two unknown pools, the same one twice: the first reference in file order is reported
    // (a location's directives come before the server's later ones).
    fails_at(
        "events {}\nhttp {\n    server {\n        listen 127.0.0.1:8080;\n        location / {\n            aio threads=one;\n        }\n        aio threads=two;\n        location /b { aio threads=one; }\n    }\n}\n",
        &[],
        &unknown("one"),
        None,
        6,
    );
    // Defined pools do not hide an undefined one.
    fails_at(
        "thread_pool one threads=2;\nevents {}\nhttp {\n    aio threads=one;\n    server {\n        listen 127.0.0.1:8080;\n        aio threads=two;\n    }\n}\n",
        &[],
        &unknown("two"),
        None,
        7,
    );
    // In an included file: that file and its line.
    fails_at(
        "events {}\nhttp {\n    server {\n        listen 127.0.0.1:8080;\n        include aio.conf;\n    }\n}\n",
        &[("aio.conf", "# per-disk pools\nlocation /d1 { aio threads=disk1; }\n")],
        &unknown("disk1"),
        Some("aio.conf"),
        2,
    );
    // thread_pool's own errors, with nginx's words.
    fails_at(
        "thread_pool a threads=1;\nthread_pool a threads=2;\nevents {}\n",
        &[],
        "duplicate thread pool \"a\"",
        None,
        2,
    );
    fails_at(
        "thread_pool a max_queue=5;\nevents {}\n",
        &[],
        "\"thread_pool\" must have \"threads\" parameter",
        None,
        1,
    );
    fails_at(
        "thread_pool a threads=0;\nevents {}\n",
        &[],
        "invalid threads value \"threads=0\"",
        None,
        1,
    );
}

#[test]
fn known_and_implicit_pools_pass_the_test() {
    let http = |body: &str| {
        format!("events {{}}\nhttp {{\n    server {{\n        listen 127.0.0.1:8080;\n{body}\n    }}\n}}\n")
    };
    // `default` exists when used without being defined (32 threads, max_queue 65536).
    passes(&http("aio threads;"));
    passes(&http("aio on;"));
    passes(&http("aio threads=default;"));
    passes(&format!(
        "thread_pool default threads=4 max_queue=0;\n{}",
        http("aio threads;")
    ));
    // A variable is resolved per request: nothing to check at -t.
    passes(&http("aio threads=pool_$arg_p;"));
    // A pool may be defined after the http block that uses it.
    passes(&format!(
        "{}thread_pool late threads=1;\n",
        http("aio threads=late;")
    ));
    // Seeds 000 and 003's pool configurations.
    for seed in ["seed000-pools.conf", "seed003-pools.conf"] {
        let text = std::fs::read_to_string(
            Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("tests/confs")
                .join(seed),
        )
        .expect("a seed configuration");
        passes(&text);
    }
}

// ---------------------------------------------------------------------------------------------
// Cold sendfile through the pool.
// ---------------------------------------------------------------------------------------------
