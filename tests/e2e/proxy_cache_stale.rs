//! The proxy cache's second part end to end: the cache lock, stale answers
//! (`proxy_cache_use_stale`, `stale-while-revalidate`, `stale-if-error`), the background update,
//! revalidation, HEAD converted to GET, `proxy_cache_min_uses`, the default key with a URI part,
//! the not-modified filter on a stored MISS, and the `proxy_cache_status` page.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::common::client::{body_of, cache_status, get_close, request_close, status_of};
use crate::common::upstream::{Answer, Upstream};
use crate::common::*;

fn conf(port: u16, server: &str) -> String {
    format!(
        "daemon off;\nworker_processes 2;\nerror_log logs/error.log info;\n\
         events {{ worker_connections 1024; }}\n\
         http {{\n    access_log off;\n    \
         proxy_cache_path cache levels=1:2 keys_zone=z:1m use_temp_path=off;\n    server {{\n        \
         listen 127.0.0.1:{port};\n        server_name localhost;\n{server}\n    }}\n}}\n"
    )
}

fn cached(up: &Upstream, extra: &str) -> String {
    format!(
        "location / {{ proxy_pass {}; proxy_cache z; \
         add_header X-Cache-Status $upstream_cache_status always; {extra} }}",
        up.url()
    )
}

fn seen(up: &Upstream, path: &str) -> usize {
    up.requests().iter().filter(|r| r.target == path).count()
}

#[test]
fn the_cache_lock_sends_one_request_upstream_and_the_others_hit() {
    let up = Upstream::start(|r| {
        Answer::ok(format!("slow {}", r.target)).delay_head(Duration::from_millis(400))
    });
    let port = free_port();
    let _s = Shoal::start(
        &conf(
            port,
            &cached(&up, "proxy_cache_valid 200 1m; proxy_cache_lock on;"),
        ),
        port,
    );
    let threads: Vec<_> = (0..6)
        .map(|_| std::thread::spawn(move || get_close(port, "/locked")))
        .collect();
    let answers: Vec<String> = threads.into_iter().map(|t| t.join().unwrap()).collect();
    assert_eq!(seen(&up, "/locked"), 1, "one request upstream");
    let mut statuses: Vec<String> = answers.iter().map(|a| cache_status(a)).collect();
    statuses.sort();
    assert_eq!(statuses, ["HIT", "HIT", "HIT", "HIT", "HIT", "MISS"]);
    for a in &answers {
        assert_eq!(body_of(a), "slow /locked", "{a}");
    }
}

#[test]
fn after_the_lock_timeout_a_waiter_goes_upstream_uncached() {
    // The lock holder's answer is held at the upstream until the waiter has come back.
    let held = Gate::new();
    let n = AtomicUsize::new(0);
    let up = Upstream::start({
        let held = held.clone();
        move |r| {
            if n.fetch_add(1, Ordering::SeqCst) == 0 {
                held.wait();
            }
            Answer::ok(format!("slow {}", r.target))
        }
    });
    let port = free_port();
    let s = Shoal::start(
        &conf(
            port,
            &cached(
                &up,
                "proxy_cache_valid 200 1m; proxy_cache_lock on; proxy_cache_lock_timeout 200ms;",
            ),
        ),
        port,
    );
    let first = std::thread::spawn(move || get_close(port, "/t"));
    // The first request holds the lock: it asked the upstream.
    up.wait_requests(1);
    let started = Instant::now();
    let second = get_close(port, "/t");
    // It waited for the timeout, then went upstream itself (nginx: MISS, not stored), while
    // the holder's answer was still held.
    assert!(started.elapsed() >= Duration::from_millis(150));
    assert_eq!(cache_status(&second), "MISS", "{second}");
    s.wait_log("cache lock timeout", 1);
    held.open();
    assert_eq!(cache_status(&first.join().unwrap()), "MISS");
    assert_eq!(seen(&up, "/t"), 2);
    assert_eq!(cache_status(&get_close(port, "/t")), "HIT");
}

/// An upstream whose answers change with a switch: `fail` makes it answer 500 (or hang up).
struct Switch {
    up: Upstream,
    mode: Arc<AtomicUsize>,
}

fn switch(headers: &'static [(&'static str, &'static str)]) -> Switch {
    let mode = Arc::new(AtomicUsize::new(0));
    let m = mode.clone();
    let n = Arc::new(AtomicUsize::new(0));
    let up = Upstream::start(move |r| {
        let i = n.fetch_add(1, Ordering::SeqCst);
        match m.load(Ordering::SeqCst) {
            1 => Answer::status(500).body("broken"),
            2 => Answer::hang_up(),
            3 => {
                // Revalidation: 304 when the validators match.
                if r.header("if-none-match") == Some("\"v1\"") {
                    Answer::status(304).header("ETag", "\"v1\"")
                } else {
                    Answer::ok(format!("v{i}")).header("ETag", "\"v1\"")
                }
            }
            _ => {
                let mut a = Answer::ok(format!("v{i}")).header("ETag", "\"v1\"");
                for (k, v) in headers {
                    a = a.header(k, v);
                }
                a.delay_head(Duration::from_millis(if i > 0 { 300 } else { 0 }))
            }
        }
    });
    Switch { up, mode }
}

#[test]
fn use_stale_error_and_http_500_answer_the_expired_object() {
    let sw = switch(&[("Cache-Control", "max-age=1")]);
    let port = free_port();
    let _s = Shoal::start(
        &conf(
            port,
            &cached(&sw.up, "proxy_cache_use_stale error timeout http_500;"),
        ),
        port,
    );
    assert_eq!(cache_status(&get_close(port, "/s")), "MISS");
    std::thread::sleep(Duration::from_millis(2100));
    sw.mode.store(1, Ordering::SeqCst);
    let a = get_close(port, "/s");
    assert_eq!(
        (status_of(&a), cache_status(&a).as_str()),
        (200, "STALE"),
        "{a}"
    );
    assert_eq!(body_of(&a), "v0");
    sw.mode.store(2, Ordering::SeqCst);
    let b = get_close(port, "/s");
    assert_eq!(
        (status_of(&b), cache_status(&b).as_str()),
        (200, "STALE"),
        "{b}"
    );
    // Back to health: the object is replaced.
    sw.mode.store(0, Ordering::SeqCst);
    let c = get_close(port, "/s");
    assert_eq!(cache_status(&c), "EXPIRED", "{c}");
    assert_eq!(cache_status(&get_close(port, "/s")), "HIT");
}

#[test]
fn without_use_stale_an_error_is_passed_on_but_stale_if_error_covers_it() {
    let sw = switch(&[("Cache-Control", "max-age=1")]);
    let sw2 = switch(&[("Cache-Control", "max-age=1, stale-if-error=60")]);
    let port = free_port();
    let server = format!(
        "{}\nlocation /sie {{ proxy_pass {}; proxy_cache z; \
         add_header X-Cache-Status $upstream_cache_status always; }}",
        cached(&sw.up, ""),
        sw2.up.url()
    );
    let _s = Shoal::start(&conf(port, &server), port);
    get_close(port, "/plain");
    get_close(port, "/sie");
    std::thread::sleep(Duration::from_millis(2100));
    sw.mode.store(1, Ordering::SeqCst);
    sw2.mode.store(1, Ordering::SeqCst);
    let a = get_close(port, "/plain");
    assert_eq!(
        (status_of(&a), cache_status(&a).as_str()),
        (500, "EXPIRED"),
        "{a}"
    );
    // stale-if-error covers errors, not an upstream's 500 (nginx 1.22).
    let b = get_close(port, "/sie");
    assert_eq!(
        (status_of(&b), cache_status(&b).as_str()),
        (500, "EXPIRED"),
        "{b}"
    );
    sw.mode.store(2, Ordering::SeqCst);
    sw2.mode.store(2, Ordering::SeqCst);
    let a = get_close(port, "/plain");
    assert_eq!(
        (status_of(&a), cache_status(&a).as_str()),
        (502, "EXPIRED"),
        "{a}"
    );
    let b = get_close(port, "/sie");
    assert_eq!(
        (status_of(&b), cache_status(&b).as_str()),
        (200, "STALE"),
        "{b}"
    );
}

/// An upstream answering `v{n}` (n counting its requests) with `headers`, which holds every
/// answer after the first at `gate` until the test opens it: an update (or a revalidation) that
/// is under way for exactly as long as the test needs.
fn held_updates(gate: &Gate, headers: &'static [(&'static str, &'static str)]) -> Upstream {
    let gate = gate.clone();
    let n = AtomicUsize::new(0);
    Upstream::start(move |_| {
        let i = n.fetch_add(1, Ordering::SeqCst);
        if i > 0 {
            gate.wait();
        }
        let mut a = Answer::ok(format!("v{i}")).header("ETag", "\"v1\"");
        for (k, v) in headers {
            a = a.header(k, v);
        }
        a
    })
}

#[test]
fn updating_answers_stale_while_one_request_updates() {
    let update = Gate::new();
    let up = held_updates(&update, &[("Cache-Control", "max-age=1")]);
    let port = free_port();
    let _s = Shoal::start(
        &conf(port, &cached(&up, "proxy_cache_use_stale updating;")),
        port,
    );
    get_close(port, "/u");
    std::thread::sleep(Duration::from_millis(2100));
    // The updater's answer is held at the upstream; meanwhile another gets the stale object
    // (if it waited for the update, or went upstream too, it would not be answered at all).
    let updater = std::thread::spawn(move || get_close(port, "/u"));
    up.wait_requests(2);
    let other = get_close(port, "/u");
    assert_eq!(
        cache_status(&other),
        "UPDATING",
        "answered while the update is held: {other}"
    );
    assert_eq!(body_of(&other), "v0");
    update.open();
    let u = updater.join().unwrap();
    assert_eq!(cache_status(&u), "EXPIRED", "{u}");
    assert_eq!(body_of(&u), "v1");
    assert_eq!(cache_status(&get_close(port, "/u")), "HIT");
    assert_eq!(seen(&up, "/u"), 2);
}

#[test]
fn background_update_answers_stale_at_once_and_stores_the_new_object() {
    let update = Gate::new();
    let up = held_updates(
        &update,
        &[("Cache-Control", "max-age=1, stale-while-revalidate=60")],
    );
    let port = free_port();
    let _s = Shoal::start(
        &conf(port, &cached(&up, "proxy_cache_background_update on;")),
        port,
    );
    assert_eq!(body_of(&get_close(port, "/b")), "v0");
    std::thread::sleep(Duration::from_millis(2100));
    // The stale answer comes whole while the update's answer is held at the upstream: it did
    // not wait for it.
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(WAIT)).unwrap();
    s.write_all(b"GET /b HTTP/1.1\r\nHost: localhost\r\n\r\n")
        .unwrap();
    let mut buf = vec![0u8; 4096];
    let mut got = Vec::new();
    while !String::from_utf8_lossy(&got).contains("\r\n\r\nv0") {
        let n = s
            .read(&mut buf)
            .expect("the stale answer, while the update is held");
        assert!(n > 0);
        got.extend_from_slice(&buf[..n]);
    }
    assert_eq!(cache_status(&String::from_utf8_lossy(&got)), "STALE");
    up.wait_requests(2);
    update.open();
    // The connection that was answered stale runs the update before it reads its next request
    // (as nginx's main request waits for its background subrequest): asked there, the next
    // request finds the new object in place. (A request on another connection could cross the
    // update's end: having found the old object stale just before, it would start another
    // update, as in nginx.)
    s.write_all(b"GET /b HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
        .unwrap();
    let mut rest = Vec::new();
    s.read_to_end(&mut rest).unwrap();
    let after = String::from_utf8_lossy(&rest);
    assert_eq!(cache_status(&after), "HIT", "{after}");
    assert_eq!(body_of(&after), "v1");
    assert_eq!(cache_status(&get_close(port, "/b")), "HIT");
    assert_eq!(seen(&up, "/b"), 2);
}

#[test]
fn revalidate_sends_the_validators_and_a_304_refreshes_the_object() {
    let sw = switch(&[]);
    let port = free_port();
    let _s = Shoal::start(
        &conf(
            port,
            &cached(
                &sw.up,
                "proxy_cache_valid 200 1s; proxy_cache_valid 304 1m; proxy_cache_revalidate on;",
            ),
        ),
        port,
    );
    assert_eq!(cache_status(&get_close(port, "/r")), "MISS");
    std::thread::sleep(Duration::from_millis(2100));
    sw.mode.store(3, Ordering::SeqCst);
    let a = get_close(port, "/r");
    assert_eq!(cache_status(&a), "REVALIDATED", "{a}");
    assert_eq!(body_of(&a), "v0");
    let last = sw.up.last();
    assert_eq!(last.header("if-none-match"), Some("\"v1\""));
    // Fresh for proxy_cache_valid 304's minute now.
    assert_eq!(cache_status(&get_close(port, "/r")), "HIT");
    assert_eq!(seen(&sw.up, "/r"), 2);
}

#[test]
fn a_head_miss_goes_upstream_as_get_and_is_stored() {
    let up = Upstream::start(|r| Answer::ok(format!("body of {} {}", r.method, r.target)));
    let port = free_port();
    let s = Shoal::start(&conf(port, &cached(&up, "proxy_cache_valid 200 1m;")), port);
    let h = request_close(port, "HEAD", "/h", "");
    assert_eq!(cache_status(&h), "MISS", "{h}");
    assert_eq!(body_of(&h), "");
    assert_eq!(up.last().method, "GET");
    // The body is read into the cache after the HEAD's answer: wait for the object.
    let key = format!("http://127.0.0.1:{}/h", up.port());
    let want = format!("\nKEY: {key}\n");
    wait_for("the HEAD's object", || {
        files_under(&s.prefix.join("cache"))
            .into_iter()
            .filter(|p| p.file_name().is_some_and(|n| n.len() == 32))
            .filter_map(|p| std::fs::read(p).ok())
            .any(|data| data.windows(want.len()).any(|w| w == want.as_bytes()))
            .then_some(())
    });
    let g = get_close(port, "/h");
    assert_eq!(cache_status(&g), "HIT", "{g}");
    assert_eq!(body_of(&g), "body of GET /h");
    assert_eq!(seen(&up, "/h"), 1);
}

/// `proxy_cache_convert_head off`: the HEAD goes up as a HEAD and its answer is stored (as
/// nginx does), the GET's length and no body; with the default key a GET is its HIT.
#[test]
fn convert_head_off_passes_head_and_stores_its_answer() {
    let up = Upstream::start(|r| Answer::ok(format!("body of {}", r.method)));
    let port = free_port();
    let _s = Shoal::start(
        &conf(
            port,
            &cached(
                &up,
                "proxy_cache_valid 200 1m; proxy_cache_convert_head off;",
            ),
        ),
        port,
    );
    request_close(port, "HEAD", "/h", "");
    assert_eq!(up.last().method, "HEAD");
    let h = request_close(port, "HEAD", "/h", "");
    assert_eq!(cache_status(&h), "HIT", "{h}");
    let g = get_close(port, "/h");
    assert_eq!(cache_status(&g), "HIT", "{g}");
    assert!(g.contains("Content-Length: 12\r\n"), "{g}");
    assert_eq!(body_of(&g), "");
    assert_eq!(seen(&up, "/h"), 1);
}

#[test]
fn min_uses_stores_on_the_nth_request() {
    let up = Upstream::hello("m");
    let port = free_port();
    let _s = Shoal::start(
        &conf(
            port,
            &cached(&up, "proxy_cache_valid 200 1m; proxy_cache_min_uses 3;"),
        ),
        port,
    );
    let seq: Vec<String> = (0..5)
        .map(|_| cache_status(&get_close(port, "/m")))
        .collect();
    assert_eq!(seq, ["MISS", "MISS", "MISS", "HIT", "HIT"]);
    assert_eq!(seen(&up, "/m"), 3);
}

#[test]
fn max_range_offset_sends_far_ranges_upstream_unstored() {
    let up = Upstream::start(|_| Answer::ok("0123456789").header("Accept-Ranges", "bytes"));
    let port = free_port();
    let _s = Shoal::start(
        &conf(
            port,
            &cached(
                &up,
                "proxy_cache_valid 200 1m; proxy_cache_max_range_offset 5;",
            ),
        ),
        port,
    );
    let far = request_close(port, "GET", "/r", "Range: bytes=6-\r\n");
    assert_eq!(cache_status(&far), "MISS", "{far}");
    assert_eq!(cache_status(&get_close(port, "/r")), "MISS");
    let near = request_close(port, "GET", "/r", "Range: bytes=1-2\r\n");
    assert_eq!(cache_status(&near), "HIT", "{near}");
    assert_eq!(body_of(&near), "12");
}

#[test]
fn a_stored_miss_meets_the_not_modified_filter_and_is_still_stored() {
    let up = Upstream::start(|_| {
        Answer::ok("etagged")
            .header("ETag", "\"e1\"")
            .header("Last-Modified", "Mon, 01 Jan 2024 00:00:00 GMT")
    });
    let port = free_port();
    let _s = Shoal::start(&conf(port, &cached(&up, "proxy_cache_valid 200 1m;")), port);
    let a = request_close(port, "GET", "/e", "If-None-Match: \"e1\"\r\n");
    assert_eq!(
        (status_of(&a), cache_status(&a).as_str()),
        (304, "MISS"),
        "{a}"
    );
    let b = wait_for("the object", || {
        let b = get_close(port, "/e");
        (cache_status(&b) == "HIT").then_some(b)
    });
    assert_eq!(body_of(&b), "etagged");
    // Not stored answers (no cache here) pass the upstream's 200 on.
    assert!(up
        .requests()
        .iter()
        .all(|r| r.header("if-none-match").is_none()));
}

#[test]
fn the_default_key_uses_the_uri_sent_upstream() {
    let up = Upstream::hello("k");
    let port = free_port();
    let server = format!(
        "location /a/ {{ proxy_pass {}/b/; proxy_cache z; proxy_cache_valid 200 1m; }}",
        up.url()
    );
    let s = Shoal::start(&conf(port, &server), port);
    get_close(port, "/a/x?q=1");
    let key = format!("http://127.0.0.1:{}/b/x?q=1", up.port());
    let found = wait_for("the object", || {
        files_under(&s.prefix.join("cache"))
            .first()
            .and_then(|p| std::fs::read(p).ok())
    });
    let want = format!("\nKEY: {key}\n");
    assert!(
        found.windows(want.len()).any(|w| w == want.as_bytes()),
        "{}",
        String::from_utf8_lossy(&found[336..400.min(found.len())])
    );
}

#[test]
fn the_proxy_cache_status_page_counts_per_zone() {
    let up = Upstream::hello("st");
    let port = free_port();
    let server = format!(
        "{}\n location = /cache_status {{ proxy_cache_status; }}\n \
         location = /basic {{ stub_status; }}",
        cached(&up, "proxy_cache_valid 200 1m;")
    );
    let _s = Shoal::start(&conf(port, &server), port);
    get_close(port, "/p");
    get_close(port, "/p");
    get_close(port, "/q");
    let page = get_close(port, "/cache_status");
    let line = body_of(&page).lines().next().unwrap_or("").to_string();
    assert!(line.starts_with("z entries 2 bytes "), "{page}");
    assert!(line.contains(" hits 1 misses 2 evictions 0 "), "{line}");
    let basic = get_close(port, "/basic");
    assert!(
        body_of(&basic).starts_with("Active connections: "),
        "{basic}"
    );
}
