//! Reloads under load, end to end: a hundred reloads (SIGHUP, and every fourth through
//! `shoal -s reload` as an operator would) while eight client threads send GETs as fast as they
//! can, five on keep-alive connections held for the whole run and three on a new connection
//! for every request. Not one request may fail: each gets a complete 200 with the page.
//!
//! Each configuration adds `X-Gen N`, N being its generation (1 for the first, 2 after the
//! first reload, ...), so the answers show which configuration served them: after each reload
//! every client must come to see the new N (a held connection moves between requests), a
//! held connection never goes back to an older one, and a connection opened after every
//! client saw N is served with N or newer. Every wait is polled with a deadline.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use crate::common::{conf_with, free_port, Client, Response, Shoal, INDEX, WAIT};

const RELOADS: u64 = 100;
/// Client threads on one keep-alive connection each, for the whole run.
const HELD: usize = 5;
/// Client threads that open a new connection for every request.
const FRESH: usize = 3;

/// The configuration of generation `gen`.
fn conf(port: u16, gen: u64) -> String {
    conf_with(
        port,
        "worker_processes 2;",
        &format!(
            "        keepalive_requests 100000000;\n\
             \x20       add_header X-Gen {gen};"
        ),
    )
}

/// What the client threads and the reloading thread share.
#[derive(Default)]
struct Shared {
    stop: AtomicBool,
    /// The newest generation every client has been served by (published by the reloader).
    settled: AtomicU64,
    /// Per thread: the generation of its latest answer.
    seen: Vec<AtomicU64>,
    /// Per thread: answers checked.
    answers: Vec<AtomicU64>,
    /// Per thread: connections opened.
    connections: Vec<AtomicU64>,
    /// Every failed or wrong answer, described.
    failures: Mutex<Vec<String>>,
}

impl Shared {
    fn fail(&self, what: String) {
        self.failures.lock().unwrap().push(what);
    }
}

/// Checks one answer and returns its generation.
fn check(r: std::io::Result<Response>) -> Result<u64, String> {
    let r = r.map_err(|e| format!("no complete answer: {e}"))?;
    if r.status != 200 || r.body != INDEX.as_bytes() {
        return Err(format!(
            "status {} with {:?}",
            r.status,
            String::from_utf8_lossy(&r.body)
        ));
    }
    r.header("x-gen")
        .and_then(|g| g.parse().ok())
        .ok_or_else(|| format!("no X-Gen in {:?}", r.headers))
}

/// A client thread: GET / in a loop until told to stop, on one held connection (`held`) or a
/// new one each time.
fn client(port: u16, me: usize, held: bool, sh: Arc<Shared>) {
    let mut conn: Option<Client> = None;
    // The newest generation this connection was served by.
    let mut conn_gen = 0;
    while !sh.stop.load(Ordering::Relaxed) {
        let settled = sh.settled.load(Ordering::SeqCst);
        let c = conn.get_or_insert_with(|| {
            sh.connections[me].fetch_add(1, Ordering::Relaxed);
            conn_gen = 0;
            Client::connect(port)
        });
        let r = if held {
            c.get("/")
        } else {
            c.send(b"GET / HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
                .and_then(|()| c.read_response())
        };
        let n = sh.answers[me].fetch_add(1, Ordering::Relaxed);
        match check(r) {
            Ok(gen) => {
                if gen < conn_gen {
                    sh.fail(format!(
                        "thread {me}, answer {n}: generation {gen} after {conn_gen} on one connection"
                    ));
                }
                if conn_gen == 0 && gen < settled {
                    sh.fail(format!(
                        "thread {me}, answer {n}: a connection opened when every client had \
                         seen generation {settled} was served by generation {gen}"
                    ));
                }
                conn_gen = conn_gen.max(gen);
                sh.seen[me].store(gen, Ordering::SeqCst);
            }
            Err(e) => {
                sh.fail(format!("thread {me} (held {held}), answer {n}: {e}"));
                conn = None;
                continue;
            }
        }
        if !held {
            conn = None;
        }
    }
}

/// Sends `-s reload` through the command line.
fn dash_s_reload(s: &Shoal) {
    let out = s.prefix.run(&["-s", "reload"]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "-s reload: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn hundred_reloads_under_load_lose_no_request() {
    let port = free_port();
    let s = Shoal::start(&conf(port, 1), port);
    let threads = HELD + FRESH;
    let sh = Arc::new(Shared {
        seen: (0..threads).map(|_| AtomicU64::new(0)).collect(),
        answers: (0..threads).map(|_| AtomicU64::new(0)).collect(),
        connections: (0..threads).map(|_| AtomicU64::new(0)).collect(),
        settled: AtomicU64::new(1),
        ..Default::default()
    });
    let handles: Vec<_> = (0..threads)
        .map(|me| {
            let sh = sh.clone();
            std::thread::spawn(move || client(port, me, me < HELD, sh))
        })
        .collect();

    let t0 = Instant::now();
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        for n in 1..=RELOADS {
            let gen = n + 1;
            s.prefix.write_conf(&conf(port, gen));
            if n % 4 == 0 {
                dash_s_reload(&s);
            } else {
                s.signal(libc::SIGHUP);
            }
            s.wait_log(&format!("reconfigured (generation {gen})"), 1);
            // Every client comes to the new generation (the held connections between two
            // requests, without being closed).
            let deadline = Instant::now() + WAIT;
            loop {
                let behind: Vec<usize> = (0..threads)
                    .filter(|&i| sh.seen[i].load(Ordering::SeqCst) < gen)
                    .collect();
                if behind.is_empty() {
                    break;
                }
                if let Some(i) = behind.iter().find(|&&i| handles[i].is_finished()) {
                    panic!("client thread {i} died");
                }
                assert!(
                    Instant::now() < deadline,
                    "after reload {n}, threads {behind:?} are still served by an older \
                     generation than {gen}; failures: {:?}",
                    sh.failures.lock().unwrap()
                );
                std::thread::yield_now();
            }
            sh.settled.store(gen, Ordering::SeqCst);
        }
    }));
    let took = t0.elapsed();
    sh.stop.store(true, Ordering::Relaxed);
    let joined: Vec<_> = handles.into_iter().map(|h| h.join()).collect();
    if let Err(e) = result {
        std::panic::resume_unwind(e);
    }
    for (i, j) in joined.into_iter().enumerate() {
        assert!(j.is_ok(), "client thread {i} panicked");
    }

    let failures = sh.failures.lock().unwrap();
    let answers: Vec<u64> = sh
        .answers
        .iter()
        .map(|a| a.load(Ordering::Relaxed))
        .collect();
    let conns: Vec<u64> = sh
        .connections
        .iter()
        .map(|a| a.load(Ordering::Relaxed))
        .collect();
    let total: u64 = answers.iter().sum();
    eprintln!(
        "{RELOADS} reloads in {took:?}; {total} requests ({answers:?} per thread), \
         connections per thread {conns:?}, {} failed",
        failures.len()
    );
    assert!(
        failures.is_empty(),
        "{} of {total} requests failed across {RELOADS} reloads; first ones: {:#?}",
        failures.len(),
        &failures[..failures.len().min(20)]
    );
    // The held connections were never closed: one each, for every generation.
    assert_eq!(&conns[..HELD], &[1; HELD], "held connections were closed");
    assert!(
        answers.iter().all(|&a| a > RELOADS),
        "every client made progress across every reload: {answers:?}"
    );
    assert_eq!(s.worker_threads(), 2);
    let log = s.error_log();
    for bad in ["[emerg]", "[alert]", "[crit]"] {
        assert!(!log.contains(bad), "{log}");
    }
}
