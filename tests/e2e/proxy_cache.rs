//! The proxy cache end to end: the real binary in front of real upstreams
//! (`common/upstream.rs`), counting what reaches the upstream, reading and breaking the
//! files the cache writes, killing shoal mid-fill, and the configuration errors in nginx's
//! words.

use std::io::Write;
use std::path::PathBuf;
use std::time::Duration;

use crate::common::client::{body_of, cache_status, get_close, request, request_close, status_of};
use crate::common::upstream::{Answer, Upstream};
use crate::common::*;

fn conf(port: u16, http: &str, server: &str) -> String {
    format!(
        "daemon off;\nworker_processes 2;\nerror_log logs/error.log info;\n\
         events {{ worker_connections 1024; }}\n\
         http {{\n    access_log off;\n{http}\n    server {{\n        \
         listen 127.0.0.1:{port};\n        server_name localhost;\n{server}\n    }}\n}}\n"
    )
}

/// A cached location in front of `up` (`EXTRA`: more lines in the location).
fn cached(up: &Upstream, extra: &str) -> String {
    format!(
        "location / {{ proxy_pass {}; proxy_cache z; \
         add_header X-Cache-Status $upstream_cache_status always; {extra} }}",
        up.url()
    )
}

const PATH: &str = "proxy_cache_path cache levels=1:2 keys_zone=z:1m use_temp_path=off;";

/// The md5 of a key in hex (through the system's md5sum, independent of shoal's).
fn md5_hex(key: &str) -> String {
    let mut c = std::process::Command::new("md5sum")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    c.stdin.take().unwrap().write_all(key.as_bytes()).unwrap();
    let out = c.wait_with_output().unwrap();
    String::from_utf8_lossy(&out.stdout)[..32].to_string()
}

fn counting(body: &'static str) -> Upstream {
    Upstream::start(move |r| {
        let t = r.target.as_str();
        let a = Answer::ok(format!("{body} {t}"));
        if t.contains("nf") {
            Answer::status(404).body("not here")
        } else if t.contains("e500") {
            Answer::status(500).body("failed")
        } else if t.contains("nostore") {
            a.header("Cache-Control", "no-store")
        } else if t.contains("private") {
            a.header("Cache-Control", "private, max-age=60")
        } else if t.contains("maxage") {
            a.header("Cache-Control", "max-age=60")
        } else if t.contains("expired") {
            a.header("Expires", "Thu, 01 Jan 1970 00:00:00 GMT")
        } else if t.contains("cookie") {
            a.header("Set-Cookie", "s=1")
        } else if t.contains("accel0") {
            a.header("X-Accel-Expires", "0")
        } else if t.contains("short") {
            a.header("Cache-Control", "max-age=1")
        } else if t.contains("/x") {
            a.header("Accept-Ranges", "bytes")
        } else if t.contains("big") {
            Answer::ok(vec![b'x'; 40_000])
        } else {
            a
        }
    })
}

fn seen(up: &Upstream, path: &str) -> usize {
    up.requests().iter().filter(|r| r.target == path).count()
}

#[test]
fn a_second_request_is_a_hit_and_the_object_is_where_nginx_puts_it() {
    let up = counting("hello");
    let port = free_port();
    let s = Shoal::start(
        &conf(port, PATH, &cached(&up, "proxy_cache_valid 200 1m;")),
        port,
    );
    let a = get_close(port, "/x?y=1");
    assert_eq!(cache_status(&a), "MISS", "{a}");
    let b = get_close(port, "/x?y=1");
    assert_eq!(cache_status(&b), "HIT", "{b}");
    assert_eq!(body_of(&a), body_of(&b));
    assert_eq!(body_of(&b), "hello /x?y=1");
    assert_eq!(seen(&up, "/x?y=1"), 1);
    // nginx 1.22's default key: `http://` + proxy_pass's host + the request URI.
    let name = md5_hex(&format!("http://127.0.0.1:{}/x?y=1", up.port()));
    let want = s
        .prefix
        .join("cache")
        .join(&name[31..])
        .join(&name[29..31])
        .join(&name);
    assert!(
        want.exists(),
        "{want:?} not in {:?}",
        files_under(&s.prefix.join("cache"))
    );
    let data = std::fs::read(&want).unwrap();
    assert_eq!(&data[0..8], &5u64.to_le_bytes());
    assert!(data[336..]
        .starts_with(format!("\nKEY: http://127.0.0.1:{}/x?y=1\n", up.port()).as_bytes()));
    // Ranges and conditionals are served from the object.
    let r = request_close(port, "GET", "/x?y=1", "Range: bytes=0-4\r\n");
    assert_eq!(status_of(&r), 206, "{r}");
    assert_eq!(body_of(&r), "hello");
    assert_eq!(seen(&up, "/x?y=1"), 1);
}

/// A worker reuses its upstream records and reply boxes: nothing of a proxied or cached
/// answer (its headers, its type, its `$upstream_*` values) reaches the next answer on the
/// worker, a static file or an error page.
#[test]
fn a_cached_answer_leaves_nothing_to_the_next_one() {
    let up = Upstream::start(|r| {
        Answer::ok(format!("up {}", r.target))
            .header("Content-Type", "application/x-up")
            .header("Accept-Ranges", "bytes")
            .header("X-Up", "1")
    });
    let port = free_port();
    let conf = conf(
        port,
        &format!(
            "{PATH}\n    log_format u '$uri [$upstream_cache_status] [$upstream_addr] \
             [$upstream_status] [$sent_http_x_cache_status] [$sent_http_accept_ranges]';"
        ),
        &format!(
            "access_log logs/u.log u;\n{}\nlocation /static/ {{ alias html/; }}",
            cached(&up, "proxy_cache_valid 200 1m;")
        ),
    )
    .replace("worker_processes 2;", "worker_processes 1;");
    let s = Shoal::start(&conf, port);
    let mut c = Client::connect(port);
    let a = c.get("/x1").unwrap();
    assert_eq!(a.header("x-cache-status"), Some("MISS"));
    assert_eq!(a.header("accept-ranges"), Some("bytes"));
    let b = c.get("/x1").unwrap();
    assert_eq!(b.header("x-cache-status"), Some("HIT"));
    assert_eq!(b.header("content-type"), Some("application/x-up"));
    assert_eq!(b.header("x-up"), Some("1"));
    for _ in 0..2 {
        let f = c.get("/static/index.html").unwrap();
        assert_eq!(f.status, 200);
        assert_eq!(f.header("x-cache-status"), None, "{:?}", f.headers);
        assert_eq!(f.header("x-up"), None, "{:?}", f.headers);
        assert_eq!(f.header("content-type"), Some("text/html"));
        assert_eq!(
            f.body,
            std::fs::read(s.prefix.join("html/index.html")).unwrap()
        );
        let e = c.get("/static/none.html").unwrap();
        assert_eq!(e.status, 404);
        assert_eq!(e.header("x-cache-status"), None, "{:?}", e.headers);
        assert_eq!(e.header("accept-ranges"), None, "{:?}", e.headers);
        assert_eq!(e.header("x-up"), None, "{:?}", e.headers);
        assert_eq!(e.header("content-type"), Some("text/html"));
        assert_eq!(c.get("/x1").unwrap().header("x-cache-status"), Some("HIT"));
    }
    let lines = wait_for("8 log lines", || {
        let t = s.prefix.read("logs/u.log");
        (t.lines().count() >= 8 && t.ends_with('\n')).then_some(t)
    });
    let upstream = format!("127.0.0.1:{}", up.port());
    let want = [
        format!("/x1 [MISS] [{upstream}] [200] [MISS] [bytes]"),
        "/x1 [HIT] [-] [-] [HIT] [bytes]".to_string(),
        "/static/index.html [-] [-] [-] [-] [bytes]".to_string(),
        "/static/none.html [-] [-] [-] [-] [-]".to_string(),
        "/x1 [HIT] [-] [-] [HIT] [bytes]".to_string(),
    ];
    let got: Vec<&str> = lines.lines().collect();
    assert_eq!(got[..5], want[..], "{lines}");
    assert_eq!(got[5..8], want[2..5], "{lines}");
}

#[test]
fn proxy_cache_valid_per_status_and_the_upstreams_headers() {
    let up = counting("v");
    let port = free_port();
    let _s = Shoal::start(
        &conf(
            port,
            PATH,
            &cached(&up, "proxy_cache_valid 200 1m; proxy_cache_valid 404 1m;"),
        ),
        port,
    );
    // (path, stored?)
    let cases = [
        ("/plain", true),
        ("/nf", true),
        ("/e500", false),
        ("/nostore", false),
        ("/private", false),
        ("/expired", false),
        ("/cookie", false),
        ("/accel0", false),
        ("/maxage", true),
    ];
    for (path, stored) in cases {
        get_close(port, path);
        let second = get_close(port, path);
        let want = if stored { "HIT" } else { "MISS" };
        assert_eq!(cache_status(&second), want, "{path}: {second}");
        assert_eq!(seen(&up, path), if stored { 1 } else { 2 }, "{path}");
    }
}

#[test]
fn max_age_without_proxy_cache_valid_and_expiry() {
    let up = counting("m");
    let port = free_port();
    let _s = Shoal::start(&conf(port, PATH, &cached(&up, "")), port);
    // No proxy_cache_valid: only a time from the headers stores.
    get_close(port, "/plain");
    assert_eq!(cache_status(&get_close(port, "/plain")), "MISS");
    get_close(port, "/short");
    assert_eq!(cache_status(&get_close(port, "/short")), "HIT");
    std::thread::sleep(Duration::from_millis(2100));
    assert_eq!(cache_status(&get_close(port, "/short")), "EXPIRED");
    assert_eq!(cache_status(&get_close(port, "/short")), "HIT");
}

#[test]
fn a_broken_or_foreign_object_is_a_miss_logged_and_replaced() {
    let up = counting("fresh");
    let port = free_port();
    let s = Shoal::start(
        &conf(port, PATH, &cached(&up, "proxy_cache_valid 200 1m;")),
        port,
    );
    let dir = s.prefix.join("cache");
    // `cut` and `grown`: a body that is not the length its stored head tells.
    let broken = ["truncate", "garbage", "wrongkey", "cut", "grown"];
    for (i, how) in broken.iter().enumerate() {
        let path = format!("/broken{i}");
        get_close(port, &path);
        assert_eq!(cache_status(&get_close(port, &path)), "HIT");
        let key = format!("http://127.0.0.1:{}{path}", up.port());
        let name = md5_hex(&key);
        let file = files_under(&dir)
            .into_iter()
            .find(|p| p.ends_with(&name))
            .unwrap();
        let mut data = std::fs::read(&file).unwrap();
        match *how {
            "truncate" => data.truncate(200),
            "cut" => data.truncate(data.len() - 3),
            "grown" => data.extend_from_slice(b"more"),
            "garbage" => data.iter_mut().take(64).for_each(|b| *b = 0xff),
            _ => {
                // Another key's object under this name (what an md5 collision would be).
                let other = format!("http://127.0.0.1:{}/OTHER{i}", up.port());
                let at = 336 + 6;
                let mut d = data[..at].to_vec();
                d.extend_from_slice(other.as_bytes());
                d.extend_from_slice(&data[at + key.len()..]);
                data = d;
            }
        }
        std::fs::write(&file, &data).unwrap();
        let r = get_close(port, &path);
        assert_eq!(cache_status(&r), "MISS", "{how}: {r}");
        assert_eq!(body_of(&r), format!("fresh {path}"), "{how}");
        if *how != "wrongkey" {
            // Replaced: the next one is a hit again.
            assert_eq!(cache_status(&get_close(port, &path)), "HIT", "{how}");
        }
    }
    let log = s.error_log();
    assert!(log.contains("cache file is too small"), "{log}");
    assert!(log.contains("cache file has an invalid header"), "{log}");
    assert!(log.contains("cache file has a different key"), "{log}");
}

#[test]
fn the_cache_survives_a_restart_and_a_kill_mid_fill_leaves_no_half_object() {
    static SLOW: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(true);
    let up = Upstream::start(|r| {
        let a = Answer::ok(vec![b'y'; 200_000]);
        if r.target.contains("slow") && SLOW.load(std::sync::atomic::Ordering::SeqCst) {
            a.delay_body(100_000, Duration::from_secs(30))
        } else {
            a
        }
    });
    let port = free_port();
    let prefix = Prefix::new();
    let cache_dir = prefix.join("cache");
    let text = conf(port, PATH, &cached(&up, "proxy_cache_valid 200 1h;"));
    let mut s = Shoal::start_in(prefix, &text, port, &[]);
    get_close(port, "/whole");
    // Fills under way: clients reading slow answers, shoal killed with -9 in the middle.
    let mut clients = Vec::new();
    for i in 0..6 {
        let p = port;
        clients.push(std::thread::spawn(move || {
            get_close(p, &format!("/slow{i}"))
        }));
    }
    up.wait_requests(7);
    // Each slow fill has written its first 64 KiB to its temp file (its upstream sent 100,000
    // bytes and then waits): the kill lands in the middle of every fill.
    wait_for("six fills under way", || {
        let temps = files_under(&cache_dir)
            .iter()
            .filter(|p| p.file_name().unwrap().to_string_lossy().contains('.'))
            .count();
        (temps == 6).then_some(())
    });
    s.signal(9);
    s.wait_exit();
    for c in clients {
        let _ = c.join();
    }
    let prefix = std::mem::take(&mut s.prefix);
    drop(s);
    // What the fills left: temp files only, never an object under a key.
    let leftovers = files_under(&cache_dir);
    assert!(
        leftovers.iter().any(|p| p.to_string_lossy().contains('.')),
        "{leftovers:?}"
    );
    SLOW.store(false, std::sync::atomic::Ordering::SeqCst);
    let s = Shoal::start_in(prefix, &text, port, &[]);
    // The whole object is still a hit; the half ones are misses, and the loader removed the
    // temp files.
    assert_eq!(cache_status(&get_close(port, "/whole")), "HIT");
    for i in 0..6 {
        let r = get_close(port, &format!("/slow{i}"));
        assert_eq!(cache_status(&r), "MISS");
        assert_eq!(body_of(&r).len(), 200_000);
    }
    wait_for("the loader to remove temp files", || {
        files_under(&cache_dir)
            .iter()
            .all(|p| !p.file_name().unwrap().to_string_lossy().contains('.'))
            .then_some(())
    });
    drop(s);
}

#[test]
fn max_size_holds_and_inactive_objects_go() {
    let up = counting("s");
    let port = free_port();
    let s = Shoal::start(
        &conf(
            port,
            "proxy_cache_path cache levels=1:2 keys_zone=z:1m max_size=200k inactive=2s \
             use_temp_path=off manager_sleep=10ms;",
            &cached(&up, "proxy_cache_valid 200 1h;"),
        ),
        port,
    );
    let dir = s.prefix.join("cache");
    for i in 0..30 {
        assert_eq!(status_of(&get_close(port, &format!("/big{i}"))), 200);
    }
    let size = || -> u64 {
        files_under(&dir)
            .iter()
            .filter_map(|p| std::fs::metadata(p).ok())
            .map(|m| m.len())
            .sum()
    };
    wait_for("max_size", || (size() <= 200 * 1024 + 45_000).then_some(()));
    assert!(!files_under(&dir).is_empty());
    // Unused for `inactive`: removed.
    wait_for("inactive", || files_under(&dir).is_empty().then_some(()));
}

#[test]
fn a_cache_on_tmpfs_is_a_plain_path_and_a_full_disk_still_serves() {
    let mnt = tempfile::tempdir().unwrap();
    let ok = std::process::Command::new("mount")
        .args(["-t", "tmpfs", "-o", "size=64k", "tmpfs"])
        .arg(mnt.path())
        .status()
        .is_ok_and(|s| s.success());
    if !ok {
        eprintln!("skipped: cannot mount a tmpfs here");
        return;
    }
    struct Unmount(PathBuf);
    impl Drop for Unmount {
        fn drop(&mut self) {
            let _ = std::process::Command::new("umount").arg(&self.0).status();
        }
    }
    let _u = Unmount(mnt.path().to_path_buf());
    let up = counting("t");
    let port = free_port();
    let s = Shoal::start(
        &conf(
            port,
            &format!(
                "proxy_cache_path {} levels=1:2 keys_zone=z:1m;",
                mnt.path().display()
            ),
            &cached(&up, "proxy_cache_valid 200 1h;"),
        ),
        port,
    );
    // A small answer: stored on the tmpfs (temp under proxy_temp on another filesystem).
    get_close(port, "/small");
    assert_eq!(cache_status(&get_close(port, "/small")), "HIT");
    // Answers that do not fit: still served whole from the upstream, the failure logged.
    for i in 0..4 {
        let r = get_close(port, &format!("/big{i}"));
        assert_eq!(status_of(&r), 200);
        assert_eq!(body_of(&r).len(), 40_000, "{i}");
    }
    let log = s.error_log();
    assert!(log.contains("(28: No space left on device)"), "{log}");
}

#[test]
fn seed_000_cache_per_disk_with_split_clients() {
    let up = counting("d");
    let port = free_port();
    let s = Shoal::start(
        &format!(
            "daemon off;\nworker_processes 2;\nerror_log logs/error.log info;\n\
             thread_pool pool_1 threads=4;\nthread_pool pool_2 threads=4;\n\
             thread_pool pool_3 threads=4;\nevents {{ worker_connections 1024; }}\n\
             http {{\n access_log off;\n\
             proxy_cache_path cache1 levels=1:2 keys_zone=cache_1:10m use_temp_path=off;\n\
             proxy_cache_path cache2 levels=1:2 keys_zone=cache_2:10m use_temp_path=off;\n\
             proxy_cache_path cache3 levels=1:2 keys_zone=cache_3:10m use_temp_path=off;\n\
             split_clients $request_uri $disk {{ 33.3% 1; 33.3% 2; * 3; }}\n\
             server {{ listen 127.0.0.1:{port};\n location / {{ proxy_pass {};\n\
             proxy_cache cache_$disk; aio threads=pool_$disk; aio_write on;\n\
             proxy_cache_valid 200 1h; add_header X-Cache-Status $upstream_cache_status; }}\n\
             location = /cache_status {{ proxy_cache_status; }} }}\n}}\n",
            up.url()
        ),
        port,
    );
    for i in 0..30 {
        assert_eq!(cache_status(&get_close(port, &format!("/f{i}"))), "MISS");
    }
    // With `aio_write on` the last write and the rename run in the pool, a moment after the
    // answer went out: wait until the 30 objects are in place and the zones' index has every
    // one (a zone's `bytes` grows by an object's size on disk, the way it counts it, once its
    // entry is stored).
    let dirs = ["cache1", "cache2", "cache3"].map(|d| s.prefix.join(d));
    wait_for("the 30 objects stored and indexed", || {
        let files: Vec<PathBuf> = dirs.iter().flat_map(|d| files_under(d)).collect();
        let whole = files
            .iter()
            .all(|p| !p.file_name().unwrap().to_string_lossy().contains('.'));
        if files.len() != 30 || !whole {
            return None;
        }
        let on_disk: u64 = files
            .iter()
            .map(|p| {
                use std::os::unix::fs::MetadataExt;
                let m = std::fs::metadata(p).unwrap();
                (m.blocks() * 512).max(m.len())
            })
            .sum();
        let page = get_close(port, "/cache_status");
        let indexed: u64 = body_of(&page)
            .lines()
            .filter_map(|l| {
                l.split(" bytes ")
                    .nth(1)?
                    .split(' ')
                    .next()?
                    .parse::<u64>()
                    .ok()
            })
            .sum();
        (indexed == on_disk).then_some(())
    });
    for i in 0..30 {
        assert_eq!(
            cache_status(&get_close(port, &format!("/f{i}"))),
            "HIT",
            "{i}"
        );
    }
    assert_eq!(up.request_count(), 30);
    for d in ["cache1", "cache2", "cache3"] {
        assert!(!files_under(&s.prefix.join(d)).is_empty(), "{d} is empty");
    }
}

#[test]
fn purge_removes_a_key_or_a_prefix() {
    let up = counting("p");
    let port = free_port();
    let _s = Shoal::start(
        &conf(
            port,
            &format!("{PATH}\n map $request_method $purge {{ PURGE 1; default 0; }}"),
            &cached(&up, "proxy_cache_valid 200 1h; proxy_cache_purge $purge;"),
        ),
        port,
    );
    for p in ["/a", "/b1", "/b2"] {
        get_close(port, p);
    }
    let purge = |p: &str| status_of(&request_close(port, "PURGE", p, ""));
    assert_eq!(purge("/a"), 204);
    assert_eq!(purge("/a"), 404);
    assert_eq!(cache_status(&get_close(port, "/a")), "MISS");
    assert_eq!(purge("/b*"), 204);
    assert_eq!(cache_status(&get_close(port, "/b1")), "MISS");
    assert_eq!(cache_status(&get_close(port, "/b2")), "MISS");
}

/// `-t` on a configuration with `http` lines: the first error line.
fn conf_error(http: &str, location: &str) -> String {
    let p = Prefix::new();
    p.write_conf(&format!(
        "events {{}}\nhttp {{\n{http}\nserver {{ listen 127.0.0.1:1; location / {{ proxy_pass http://127.0.0.1:1; {location} }} }}\n}}\n"
    ));
    let out = p.run(&["-t"]);
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn configuration_errors_in_nginx_words() {
    let cases = [
        (
            "proxy_cache_path /tmp/c1 keys_zone=a:10m; proxy_cache_path /tmp/c2 keys_zone=a:10m;",
            "",
            "duplicate zone \"a\"",
        ),
        (
            "proxy_cache_path /tmp/c1 keys_zone=a:10m; proxy_cache_path /tmp/c1 keys_zone=b:10m;",
            "",
            "the same path name \"/tmp/c1\" used in",
        ),
        (
            "proxy_cache_path /tmp/c1 levels=1:3 keys_zone=a:10m;",
            "",
            "invalid \"levels\" \"levels=1:3\"",
        ),
        (
            "proxy_cache_path /tmp/c1 levels=1:2;",
            "",
            "\"proxy_cache_path\" must have \"keys_zone\" parameter",
        ),
        (
            "proxy_cache_path /tmp/c1 keys_zone=a;",
            "",
            "invalid keys zone size \"keys_zone=a\"",
        ),
        (
            "proxy_cache_path /tmp/c1 keys_zone=a:1k;",
            "",
            "keys zone \"keys_zone=a:1k\" is too small",
        ),
        (
            "proxy_cache_path /tmp/c1 keys_zone=a:10m inactive=x;",
            "",
            "invalid inactive value \"inactive=x\"",
        ),
        (
            "proxy_cache_path /tmp/c1 keys_zone=a:10m use_temp_path=maybe;",
            "",
            "invalid use_temp_path value \"use_temp_path=maybe\", it must be \"on\" or \"off\"",
        ),
        (
            "proxy_cache_path /tmp/c1 keys_zone=a:10m foo=bar;",
            "",
            "invalid parameter \"foo=bar\"",
        ),
        (
            "",
            "proxy_cache zz;",
            "\"proxy_cache\" zone \"zz\" is unknown",
        ),
        (
            "proxy_cache_path /tmp/c1 keys_zone=a:10m;",
            "proxy_cache off; proxy_cache a;",
            "\"proxy_cache\" directive is duplicate",
        ),
        ("", "proxy_cache_valid 200 x;", "invalid time value \"x\""),
        ("", "proxy_cache_valid abc 1m;", "invalid status \"abc\""),
        ("", "proxy_cache_methods GET PUT;", "invalid value \"PUT\""),
        ("", "proxy_cache_use_stale foo;", "invalid value \"foo\""),
        (
            "",
            "proxy_cache_min_uses x;",
            "\"proxy_cache_min_uses\" directive invalid number",
        ),
    ];
    for (http, loc, want) in cases {
        let err = conf_error(http, loc);
        assert!(err.contains(want), "{http} {loc}: want {want}, got {err}");
    }
}

/// 300,000 bytes in which every 8-byte line says where it starts (`0000000\n`, `0000008\n`,
/// ...): a byte out of place shows.
fn numbered_body() -> Vec<u8> {
    (0..37_500)
        .flat_map(|i| format!("{:07}\n", i * 8).into_bytes())
        .collect()
}

#[test]
fn a_range_of_a_miss_is_cut_from_the_stream_and_the_whole_answer_is_stored() {
    let body = numbered_body();
    let up = {
        let body = body.clone();
        Upstream::start(move |r| {
            // The body arrives in two parts, so the range spans reads of the upstream.
            let a = Answer::ok(body.clone())
                .header("Accept-Ranges", "bytes")
                .delay_body(150_000, Duration::from_millis(50));
            if r.target.contains("nostore") {
                a.header("Cache-Control", "no-store")
            } else {
                a
            }
        })
    };
    let port = free_port();
    let s = Shoal::start(
        &conf(port, PATH, &cached(&up, "proxy_cache_valid 200 1m;")),
        port,
    );
    let ask = |c: &mut Client, path: &str, range: &str| {
        let req = request("GET", path, &format!("Range: bytes={range}\r\n"));
        c.send(req.as_bytes()).unwrap();
        let r = c.read_response().unwrap();
        (r.head, r.body)
    };
    let mut c = Client::connect(port);

    // A MISS: 206 with the range's bytes only, across the two parts.
    let (head, got) = ask(&mut c, "/a", "100000-200000");
    assert!(head.starts_with("HTTP/1.1 206 "), "{head}");
    assert!(
        head.contains("\r\nContent-Range: bytes 100000-200000/300000\r\n"),
        "{head}"
    );
    assert!(head.contains("\r\nX-Cache-Status: MISS\r\n"), "{head}");
    assert!(!head.contains("Accept-Ranges"), "{head}");
    assert_eq!(got, &body[100_000..=200_000]);
    // The connection goes on once the rest is read into the cache: the object is whole, and
    // its HIT serves ranges of it.
    let (head, got) = ask(&mut c, "/a", "-10");
    assert!(head.contains("\r\nX-Cache-Status: HIT\r\n"), "{head}");
    assert_eq!(got, &body[299_990..]);
    let (head, got) = ask(&mut c, "/a", "0-3,299996-");
    assert!(head.contains("multipart/byteranges"), "{head}");
    assert!(got.windows(4).any(|w| w == b"0000") && got.windows(4).any(|w| w == b"992\n"));
    assert_eq!(seen(&up, "/a"), 1);
    let files = files_under(&s.prefix.join("cache"));
    assert_eq!(files.len(), 1, "{files:?}");
    assert!(std::fs::read(&files[0]).unwrap().ends_with(&body));

    // A range in the first part, and one at the very end.
    let (_, got) = ask(&mut c, "/b", "8-15");
    assert_eq!(got, b"0000008\n");
    let (head, got) = ask(&mut c, "/c", "299992-");
    assert!(head.contains("/300000\r\n"), "{head}");
    assert_eq!(got, b"0299992\n");

    // Not cacheable: no range is cut, the upstream's Accept-Ranges passes.
    let (head, got) = ask(&mut c, "/nostore", "0-3");
    assert!(head.starts_with("HTTP/1.1 200 "), "{head}");
    assert!(head.contains("\r\nAccept-Ranges: bytes\r\n"), "{head}");
    assert_eq!(got, body);

    // Unsatisfiable: 416, the answer is not read on nor stored; the next one goes upstream.
    let (head, _) = ask(&mut c, "/d", "300000-");
    assert!(head.starts_with("HTTP/1.1 416 "), "{head}");
    assert!(
        head.contains("\r\nContent-Range: bytes */300000\r\n"),
        "{head}"
    );
    let (head, got) = ask(&mut c, "/d", "0-7");
    assert!(head.contains("\r\nX-Cache-Status: MISS\r\n"), "{head}");
    assert_eq!(got, b"0000000\n");
    assert_eq!(seen(&up, "/d"), 2);
}
