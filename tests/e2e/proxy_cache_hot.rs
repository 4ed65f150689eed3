//! The workers' copies of hot cache objects (`proxy_cache/hot.rs`) never outlive the object
//! they were taken from: on one keep-alive connection (so one worker, whose copy the earlier
//! hits made), a purge, a store over the key (BYPASS), an expiry, a revalidation, a replacement
//! after EXPIRED and a reload are each seen by the very next request. With 1 and 2 workers, a
//! small object (kept in memory) and a large one (kept as an open file).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crate::common::client::request;
use crate::common::upstream::{Answer, Upstream};
use crate::common::*;

/// `v{n} ` then padding: small objects, or 40,000 bytes for paths with `big`.
fn versioned() -> Upstream {
    let n = Arc::new(AtomicUsize::new(0));
    Upstream::start(move |r| {
        let t = r.target.as_str();
        if t.starts_with("/reval/") && r.header("if-none-match") == Some("\"e\"") {
            return Answer::status(304).header("ETag", "\"e\"");
        }
        let i = n.fetch_add(1, Ordering::SeqCst);
        let mut body = format!("v{i} ").into_bytes();
        if t.contains("big") {
            body.resize(40_000, b'x');
        }
        Answer::ok(body).header("ETag", "\"e\"")
    })
}

fn conf(port: u16, workers: u32, up: &Upstream, dir: &str, gen: u32) -> String {
    let common = format!(
        "proxy_pass {}; proxy_cache z; \
         add_header X-Cache-Status $upstream_cache_status always; add_header X-Gen {gen} always;",
        up.url()
    );
    format!(
        "daemon off;\nworker_processes {workers};\nerror_log logs/error.log info;\n\
         events {{ worker_connections 1024; }}\n\
         http {{\n    access_log off;\n    \
         proxy_cache_path {dir} levels=1:2 keys_zone=z:1m use_temp_path=off;\n    \
         map $request_method $purge {{ PURGE 1; default 0; }}\n    server {{\n        \
         listen 127.0.0.1:{port};\n        server_name localhost;\n        \
         location / {{ {common} proxy_cache_valid 200 1h; proxy_cache_purge $purge; \
         proxy_cache_bypass $http_x_bypass; }}\n        \
         location /short/ {{ {common} proxy_cache_valid 200 1s; }}\n        \
         location /reval/ {{ {common} proxy_cache_valid 200 1s; proxy_cache_valid 304 1m; \
         proxy_cache_revalidate on; }}\n    }}\n}}\n"
    )
}

/// One request on the held connection: (X-Cache-Status, the body's version `vN`, X-Gen).
fn ask(c: &mut Client, method: &str, path: &str, headers: &str) -> (String, String, String) {
    c.send(request(method, path, headers).as_bytes()).unwrap();
    // A purge's 204 has no body (and no Content-Length).
    let r = if method == "GET" {
        c.read_response().unwrap()
    } else {
        c.read_head().unwrap()
    };
    let body = String::from_utf8_lossy(&r.body);
    let version = body.split(' ').next().unwrap_or("").to_string();
    if method == "GET" {
        assert_eq!(r.status, 200, "{path}: {r:?}");
        let want = if path.contains("big") {
            40_000
        } else {
            version.len() + 1
        };
        assert_eq!(r.body.len(), want, "{path}");
    }
    (
        r.header("x-cache-status").unwrap_or("").to_string(),
        if method == "GET" {
            version
        } else {
            r.status.to_string()
        },
        r.header("x-gen").unwrap_or("").to_string(),
    )
}

fn get(c: &mut Client, path: &str) -> (String, String) {
    let (s, v, _) = ask(c, "GET", path, "");
    settle(&s);
    (s, v)
}

/// An answer being stored is renamed into place when the upstream's body ends, which can be
/// a moment after the client has it all: the next request waits for that moment (this file
/// tests the worker's copies, not the fill's timing).
fn settle(status: &str) {
    if matches!(status, "MISS" | "EXPIRED" | "BYPASS") {
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn pair(s: &str, v: &str) -> (String, String) {
    (s.to_string(), v.to_string())
}

/// MISS, then hits enough for the worker to hold its copy: returns the version stored.
fn warm(c: &mut Client, path: &str) -> String {
    let (s, v) = get(c, path);
    assert_eq!(s, "MISS", "{path}");
    for _ in 0..3 {
        assert_eq!(get(c, path), pair("HIT", &v), "{path}");
    }
    v
}

fn purge_and_bypass(workers: u32) {
    let up = versioned();
    let port = free_port();
    let _s = Shoal::start(&conf(port, workers, &up, "cache", 1), port);
    let mut c = Client::connect(port);
    for path in ["/p", "/pbig"] {
        let v0 = warm(&mut c, path);
        // Stored over by a BYPASS: the next hit has the new body.
        let (s, v1) = get_with(&mut c, path, "X-Bypass: 1\r\n");
        assert_eq!(s, "BYPASS");
        assert_ne!(v1, v0);
        assert_eq!(get(&mut c, path), pair("HIT", &v1), "{path} after BYPASS");
        assert_eq!(get(&mut c, path), pair("HIT", &v1), "{path} after BYPASS");
        // Purged: the next request is a MISS.
        assert_eq!(ask(&mut c, "PURGE", path, "").1, "204");
        let (s, v2) = get(&mut c, path);
        assert_eq!(s, "MISS", "{path} after PURGE");
        assert_ne!(v2, v1);
        assert_eq!(get(&mut c, path), pair("HIT", &v2), "{path} after PURGE");
    }
}

fn get_with(c: &mut Client, path: &str, headers: &str) -> (String, String) {
    let (s, v, _) = ask(c, "GET", path, headers);
    settle(&s);
    (s, v)
}

fn expiry_and_revalidation(workers: u32) {
    let up = versioned();
    let port = free_port();
    let _s = Shoal::start(&conf(port, workers, &up, "cache", 1), port);
    let mut c = Client::connect(port);
    let paths = ["/short/a", "/short/big", "/reval/a", "/reval/big"];
    let mut first = Vec::new();
    for p in paths {
        first.push(warm(&mut c, p));
    }
    std::thread::sleep(Duration::from_millis(2100));
    for (p, v0) in paths.iter().zip(&first) {
        if p.starts_with("/short/") {
            // Expired: fetched again and replaced; the next hit has the new body.
            let (s, v1) = get(&mut c, p);
            assert_eq!(s, "EXPIRED", "{p}");
            assert_ne!(&v1, v0);
            assert_eq!(get(&mut c, p), pair("HIT", &v1), "{p} after EXPIRED");
        } else {
            // Revalidated (a 304): fresh again, the same body, a HIT next.
            assert_eq!(get(&mut c, p), pair("REVALIDATED", v0), "{p}");
            assert_eq!(get(&mut c, p), pair("HIT", v0), "{p} after REVALIDATED");
            assert_eq!(get(&mut c, p), pair("HIT", v0), "{p} after REVALIDATED");
        }
    }
    // The revalidated objects were not fetched again.
    for p in ["/reval/a", "/reval/big"] {
        let full = up
            .requests()
            .iter()
            .filter(|r| r.target == p && r.header("if-none-match").is_none())
            .count();
        assert_eq!(full, 1, "{p}");
    }
}

fn reload(workers: u32) {
    let up = versioned();
    let port = free_port();
    let s = Shoal::start(&conf(port, workers, &up, "cache", 1), port);
    let mut c = Client::connect(port);
    let v = [warm(&mut c, "/r"), warm(&mut c, "/rbig")];
    // A reload that keeps the cache: the new headers on the very next hit, same objects.
    s.prefix.write_conf(&conf(port, workers, &up, "cache", 2));
    s.dash_s("reload");
    let mut first_new = None;
    for _ in 0..500 {
        let (st, ver, gen) = ask(&mut c, "GET", "/r", "");
        assert_eq!((st.as_str(), ver.as_str()), ("HIT", v[0].as_str()));
        if gen == "2" {
            first_new = Some(());
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(first_new.is_some(), "the reload was never seen");
    assert_eq!(
        ask(&mut c, "GET", "/rbig", ""),
        ("HIT".into(), v[1].clone(), "2".into())
    );
    // A reload that moves the cache: the first answer under it is a MISS.
    s.prefix.write_conf(&conf(port, workers, &up, "cache2", 3));
    s.dash_s("reload");
    let mut seen = false;
    for _ in 0..500 {
        let (st, _, gen) = ask(&mut c, "GET", "/r", "");
        if gen == "3" {
            assert_eq!(st, "MISS", "the first answer after the cache moved");
            seen = true;
            break;
        }
        assert_eq!(st, "HIT");
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(seen, "the second reload was never seen");
    let (st, _, gen) = ask(&mut c, "GET", "/rbig", "");
    assert_eq!((st.as_str(), gen.as_str()), ("MISS", "3"));
}

/// A request that a reload leaves under the old configuration (its socket is not in the new
/// one: its connection keeps the old configuration for this last request) is served from the
/// old configuration's cache, although the reload gave the zone's name another directory: the
/// object stored there is still a HIT. Under the new configuration the name is the new,
/// empty zone.
fn old_request_keeps_old_zone(workers: u32) {
    let up = versioned();
    let (p1, p2) = (free_port(), free_port());
    let s = Shoal::start(&conf(p1, workers, &up, "cache", 1), p1);
    let v = warm(&mut Client::connect(p1), "/old");
    // Half a head on the old port; then a reload onto another port and another directory.
    let mut held = Client::connect(p1);
    held.send(b"GET /old HTTP/1.1\r\nHost: localhost\r\n")
        .unwrap();
    s.prefix.write_conf(&conf(p2, workers, &up, "cache2", 2));
    s.dash_s("reload");
    s.wait_log("reconfigured (generation 2)", 1);
    held.send(b"\r\n").unwrap();
    let r = held.read_response().unwrap();
    let body = String::from_utf8_lossy(&r.body);
    assert_eq!(r.header("x-gen"), Some("1"), "{r:?}");
    assert_eq!(r.header("x-cache-status"), Some("HIT"), "{r:?}");
    assert_eq!(body.split(' ').next(), Some(v.as_str()));
    s.wait_port(p2);
    let (st, _, gen) = ask(&mut Client::connect(p2), "GET", "/old", "");
    assert_eq!((st.as_str(), gen.as_str()), ("MISS", "2"));
}

#[test]
fn a_request_left_under_the_old_configuration_keeps_its_cache_one_worker() {
    old_request_keeps_old_zone(1);
}

#[test]
fn a_request_left_under_the_old_configuration_keeps_its_cache_two_workers() {
    old_request_keeps_old_zone(2);
}

#[test]
fn purge_and_a_store_over_are_seen_by_the_next_hit_one_worker() {
    purge_and_bypass(1);
}

#[test]
fn purge_and_a_store_over_are_seen_by_the_next_hit_two_workers() {
    purge_and_bypass(2);
}

#[test]
fn expiry_and_revalidation_are_seen_by_the_next_hit_one_worker() {
    expiry_and_revalidation(1);
}

#[test]
fn expiry_and_revalidation_are_seen_by_the_next_hit_two_workers() {
    expiry_and_revalidation(2);
}

#[test]
fn a_reload_is_seen_by_the_next_hit_one_worker() {
    reload(1);
}

#[test]
fn a_reload_is_seen_by_the_next_hit_two_workers() {
    reload(2);
}
