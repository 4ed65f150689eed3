//! `open_file_cache`, `open_file_cache_valid` and `open_file_cache_errors` end to end: what a
//! worker keeps of a file (its descriptor, metadata, ETag and, for a small file, its bytes) is
//! used until `valid` expires, and what it serves then is the file now at the path, whole and
//! consistent (length, ETag and bytes of the same file). Waits are polls bounded by
//! `common::WAIT`, never a fixed sleep that a slow machine could outrun.

use std::fs;
use std::os::unix::fs::MetadataExt;

use crate::common::{self, free_port, wait_for, Shoal};

fn conf(port: u16, cache: &str) -> String {
    common::conf_with(port, "worker_processes 1;", cache)
}

/// nginx's ETag for the file at `path`.
fn etag_of(path: &std::path::Path) -> String {
    let m = fs::metadata(path).unwrap();
    format!("\"{:x}-{:x}\"", m.mtime(), m.size())
}

#[test]
fn a_replaced_file_is_served_whole_once_valid_expires() {
    let port = free_port();
    let s = Shoal::start(
        &conf(
            port,
            "open_file_cache max=16 inactive=60s;\n open_file_cache_valid 1s;",
        ),
        port,
    );
    let file = s.prefix.join("html/small.txt");
    fs::write(&file, "first version\n").unwrap();
    let mut c = s.client(port);
    let r = c.get("/small.txt").unwrap();
    assert_eq!((r.status, &r.body[..]), (200, &b"first version\n"[..]));
    assert_eq!(r.header("etag"), Some(etag_of(&file).as_str()));
    // Asked again: served from what the worker holds.
    assert_eq!(c.get("/small.txt").unwrap().body, b"first version\n");

    // Replaced by a rename (a new inode, another size and time), as deployments do.
    let next = s.prefix.join("html/small.txt.new");
    fs::write(&next, "the second, longer version\n").unwrap();
    let later = std::time::SystemTime::now() + std::time::Duration::from_secs(5);
    fs::File::options()
        .write(true)
        .open(&next)
        .unwrap()
        .set_modified(later)
        .unwrap();
    fs::rename(&next, &file).unwrap();
    let r = wait_for("the replaced file to be served", || {
        let r = c.get("/small.txt").unwrap();
        // Until `valid` expires the old file comes, whole: never a mix of the two.
        match &r.body[..] {
            b"first version\n" => None,
            _ => Some(r),
        }
    });
    assert_eq!(r.status, 200);
    assert_eq!(r.body, b"the second, longer version\n");
    assert_eq!(r.header("content-length"), Some("27"));
    assert_eq!(r.header("etag"), Some(etag_of(&file).as_str()));
    // And it stays the new file (the new record's bytes, not the old ones).
    for _ in 0..3 {
        assert_eq!(
            c.get("/small.txt").unwrap().body,
            b"the second, longer version\n"
        );
    }
}

#[test]
fn errors_are_cached_only_with_open_file_cache_errors() {
    let port = free_port();
    let s = Shoal::start(
        &conf(
            port,
            "open_file_cache max=16 inactive=60s;\n open_file_cache_valid 60s;\n\
             location /cached/ { open_file_cache_errors on; }",
        ),
        port,
    );
    fs::create_dir(s.prefix.join("html/cached")).unwrap();
    let mut c = s.client(port);
    assert_eq!(c.get("/late.txt").unwrap().status, 404);
    assert_eq!(c.get("/cached/late.txt").unwrap().status, 404);
    fs::write(s.prefix.join("html/late.txt"), "here now\n").unwrap();
    fs::write(s.prefix.join("html/cached/late.txt"), "here now\n").unwrap();
    // Without `open_file_cache_errors` a failed open is not remembered.
    let r = c.get("/late.txt").unwrap();
    assert_eq!((r.status, &r.body[..]), (200, &b"here now\n"[..]));
    // With it, the 404 stands until `valid` (a minute) expires.
    assert_eq!(c.get("/cached/late.txt").unwrap().status, 404);
}

/// `open_file_cache_events` is read and checked as nginx on Linux reads it (kqueue alone uses
/// it): accepted, a wrong value or a duplicate refused in nginx's words.
#[test]
fn open_file_cache_events_is_checked_as_nginx_on_linux() {
    for server in [
        "open_file_cache_events on;",
        "location / { open_file_cache_events off; }",
        "open_file_cache_events maybe;",
        "open_file_cache_events on; open_file_cache_events on;",
    ] {
        let (n, s) = crate::diff::both_test("", server);
        assert_eq!(s, n, "{server}");
    }
}
