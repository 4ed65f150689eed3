//! The proxy cache against real nginx: the same configuration in front of the same upstream;
//! the same requests give the same answers, `X-Cache-Status` sequence included (MISS, then
//! HIT; not stored answers stay MISS; BYPASS).

use crate::common;
use crate::common::upstream::{Answer, Upstream};
use crate::diff::{self, Conf, Pair};

/// nginx and shoal with `location /` proxying to `up` through the cache zone `z`, with
/// `directives` (`proxy_cache_valid ...`) and `X-Cache-Status` on every answer.
fn cached_root(up: &Upstream, directives: &str) -> Pair {
    let server = format!(
        "location / {{ proxy_pass {}; proxy_cache z; {directives} \
         add_header X-Cache-Status $upstream_cache_status always; }}",
        up.url()
    );
    Pair::with(Conf {
        http: "proxy_cache_path cache levels=1:2 keys_zone=z:1m;",
        server: &server,
        ..Default::default()
    })
}

#[test]
fn miss_then_hit_as_nginx() {
    let up = Upstream::start(|r| {
        let t = r.target.as_str();
        if t.contains("nostore") {
            Answer::ok("private").header("Cache-Control", "no-store")
        } else if t.contains("nf") {
            Answer::status(404).body("nothing")
        } else if t.contains("ranged") {
            Answer::ok("0123456789").header("Accept-Ranges", "bytes")
        } else {
            Answer::ok(format!("object {t}")).header("X-Up", "1")
        }
    });
    let p = cached_root(
        &up,
        "proxy_cache_valid 200 1h; proxy_cache_bypass $arg_nocache;",
    );
    for path in [
        "/a",
        "/a",
        "/a?x=1",
        "/nostore",
        "/nostore",
        "/nf",
        "/nf",
        "/a?nocache=1",
        "/a",
    ] {
        let got = p.get_open(path, "");
        assert!(got.contains("X-Cache-Status: "), "{got}");
    }
    // A cached answer takes ranges only if the upstream said Accept-Ranges (nginx 1.22).
    let r = p.get_open("/a", "Range: bytes=0-3\r\n");
    assert!(r.starts_with("HTTP/1.1 200"), "{r}");
    p.get_open("/ranged", "");
    let r = p.get_open("/ranged", "Range: bytes=2-4\r\n");
    assert!(r.starts_with("HTTP/1.1 206"), "{r}");
}

#[test]
fn an_upstream_last_modified_passes_whatever_the_status_as_nginx() {
    // nginx keeps the upstream's Last-Modified line in the answer's headers whatever the
    // status, a cached 404's too, on the MISS and on the HIT; only its own time (a static
    // file's) is dropped for statuses other than 200, 206 and 304.
    let up = Upstream::start(|r| {
        let code = r.target.trim_start_matches('/').parse().unwrap_or(200);
        Answer::status(code)
            .body(format!("status {code}"))
            .header("Last-Modified", "Sat, 01 Jan 2022 00:00:00 GMT")
    });
    let p = cached_root(&up, "proxy_cache_valid 200 404 1h;");
    for path in ["/404", "/404", "/500", "/500", "/200", "/200", "/410"] {
        let got = p.get_open(path, "");
        assert!(got.contains("Last-Modified: "), "{got}");
    }
}

#[test]
fn a_cached_204_keeps_its_type_and_length_as_nginx() {
    // nginx clears a 204's Content-Type and Content-Length only for a 204 of its own: a
    // proxied one passes the upstream's, with no body, on the MISS and on the HIT.
    let up = Upstream::start(|_| {
        Answer::raw(
            "HTTP/1.1 204 No Content\r\nContent-Type: text/plain\r\nContent-Length: 5\r\n\r\n",
        )
    });
    let p = cached_root(&up, "proxy_cache_valid 204 1h;");
    let miss = p.get_open("/n", "");
    assert!(miss.contains("X-Cache-Status: MISS"), "{miss}");
    let hit = p.get_open("/n", "");
    assert!(hit.contains("X-Cache-Status: HIT"), "{hit}");
    assert!(hit.contains("Content-Length: 5"), "{hit}");
}

/// Waits until both servers have an object whose key ends with `uri` in `cache/`: an answer
/// whose body is read into the cache after the client's answer went out (a HEAD converted to
/// GET, a 304 from the not-modified filter). Both servers have one worker and rename the object
/// into place and index it in one step of that worker, so the next request sees it.
fn wait_stored(p: &Pair, uri: &str) {
    let root = p.html().parent().unwrap().to_path_buf();
    for server in ["nginx", "shoal"] {
        let dir = root.join(server).join("cache");
        common::wait_for(&format!("{server} to store {uri}"), || {
            keys_in(&dir).iter().any(|k| k.ends_with(uri)).then_some(())
        });
    }
}

/// The KEY lines of the objects under a cache directory.
fn keys_in(dir: &std::path::Path) -> Vec<String> {
    bodies_in(dir).into_iter().map(|(key, _)| key).collect()
}

/// `proxy_buffering off`: nginx streams the answer without storing it, so every request is a
/// MISS and the cache stays empty; where buffering is on, the same answers are stored.
#[test]
fn unbuffered_answers_are_not_stored_as_nginx() {
    let up = Upstream::start(|r| Answer::ok(format!("object {}", r.target)));
    let p = cached_locations(
        &up,
        &[("unbuffered", "proxy_buffering off;"), ("buffered", "")],
    );
    // Each answer is compared with nginx's (the harness fails on a difference).
    for path in ["/unbuffered/a", "/unbuffered/a", "/buffered/b"] {
        assert!(
            p.get_open(path, "").contains("X-Cache-Status: MISS"),
            "{path}"
        );
    }
    assert!(p
        .get_open("/unbuffered/a", "")
        .contains("X-Cache-Status: MISS"));
    assert!(p
        .get_open("/buffered/b", "")
        .contains("X-Cache-Status: HIT"));
    let root = p.html().parent().unwrap().to_path_buf();
    let nginx_keys = keys_in(&root.join("nginx/cache"));
    let shoal_keys = keys_in(&root.join("shoal/cache"));
    assert_eq!(nginx_keys, shoal_keys);
    assert_eq!(
        nginx_keys.len(),
        1,
        "only the buffered answer is stored: {nginx_keys:?}"
    );
}

/// nginx and shoal with one cached location per `(prefix, extra directives)`, each passing to
/// `up` and saying `X-Cache-Status`.
fn cached_locations(up: &Upstream, locations: &[(&str, &str)]) -> Pair {
    let server: Vec<String> = locations
        .iter()
        .map(|(path, extra)| {
            format!(
                "location /{path}/ {{ proxy_pass {}; proxy_cache z; proxy_cache_valid 200 1h; \
                 add_header X-Cache-Status $upstream_cache_status always; {extra} }}",
                up.url()
            )
        })
        .collect();
    Pair::with(Conf {
        http: "proxy_cache_path cache levels=1:2 keys_zone=z:1m;",
        server: &server.join("\n"),
        ..Default::default()
    })
}

/// What decides whether an answer may be stored, and when: a scarce request, or one whose
/// range starts past `proxy_cache_max_range_offset`, sends its `Range` upstream (nginx's
/// `u->cacheable` is off when the request is made; a bypassed one keeps it, its answer is
/// stored); `proxy_no_cache` is asked once the
/// answer's headers are in (`$upstream_http_*`); a hidden `Accept-Ranges` allows no ranges on
/// the HIT either.
#[test]
fn what_may_be_stored_is_decided_as_nginx() {
    let up = Upstream::start(|r| {
        let got = r.header("range").unwrap_or("-").to_string();
        let a = Answer::ok("0123456789".repeat(100))
            .header("Accept-Ranges", "bytes")
            .header("X-Got-Range", &got);
        if r.target.contains("nc") {
            a.header("X-NC", "1")
        } else {
            a
        }
    });
    let p = cached_locations(
        &up,
        &[
            ("off", "proxy_cache_max_range_offset 100;"),
            ("min", "proxy_cache_min_uses 3;"),
            ("by", "proxy_cache_bypass $arg_b;"),
            ("nc", "proxy_no_cache $upstream_http_x_nc;"),
            ("hide", "proxy_hide_header Accept-Ranges;"),
        ],
    );
    let r = p.get_open("/off/a", "Range: bytes=200-209\r\n");
    assert!(r.contains("X-Got-Range: bytes=200-209"), "{r}");
    p.get_open("/off/a", "Range: bytes=0-9\r\n");
    let r = p.get_open("/min/a", "Range: bytes=0-9\r\n");
    assert!(r.contains("X-Got-Range: bytes=0-9"), "{r}");
    p.get_open("/by/a?b=1", "Range: bytes=0-9\r\n");
    p.get_open("/by/a", "Range: bytes=0-9\r\n");
    for _ in 0..2 {
        let r = p.get_open("/nc/x", "");
        assert!(r.contains("X-Cache-Status: MISS"), "{r}");
    }
    for _ in 0..3 {
        let r = p.get_open("/hide/h", "Range: bytes=0-9\r\n");
        assert!(r.starts_with("HTTP/1.1 200"), "{r}");
    }
}

/// `X-Accel-Buffering` turns buffering on or off for one answer, and with it whether the
/// cache takes it (unless `proxy_ignore_headers` names it).
#[test]
fn x_accel_buffering_decides_storing_as_nginx() {
    let up = Upstream::start(|r| {
        let a = Answer::ok(format!("object {}", r.target));
        if r.target.contains("say-no") {
            a.header("X-Accel-Buffering", "no")
        } else if r.target.contains("say-yes") {
            a.header("X-Accel-Buffering", "YES")
        } else {
            a
        }
    });
    let p = cached_locations(
        &up,
        &[
            ("on", ""),
            ("off", "proxy_buffering off;"),
            ("ign", "proxy_ignore_headers X-Accel-Buffering;"),
        ],
    );
    // Each answer is compared with nginx's; the second of each pair says whether it was stored.
    for (path, second) in [
        ("/on/say-no", "MISS"),
        ("/off/say-yes", "HIT"),
        ("/ign/say-no", "HIT"),
        ("/on/plain", "HIT"),
    ] {
        p.get_open(path, "");
        let r = p.get_open(path, "");
        assert!(
            r.contains(&format!("X-Cache-Status: {second}")),
            "{path}: {r}"
        );
    }
}

#[test]
fn head_min_uses_not_modified_range_offset_and_the_key_as_nginx() {
    let up = Upstream::start(|r| {
        Answer::ok(format!("object {} {}", r.method, r.target))
            .header("ETag", "\"e1\"")
            .header("Accept-Ranges", "bytes")
    });
    let server = format!(
        "location / {{ proxy_pass {u}; proxy_cache z; proxy_cache_valid 200 1h; \
         add_header X-Cache-Status $upstream_cache_status always; }}\n\
         location /min/ {{ proxy_pass {u}; proxy_cache z; proxy_cache_valid 200 1h; \
         proxy_cache_min_uses 2; add_header X-Cache-Status $upstream_cache_status always; }}\n\
         location /far/ {{ proxy_pass {u}; proxy_cache z; proxy_cache_valid 200 1h; \
         proxy_cache_max_range_offset 4; add_header X-Cache-Status $upstream_cache_status always; }}\n\
         location /a/ {{ proxy_pass {u}/b/; proxy_cache z; proxy_cache_valid 200 1h; \
         add_header X-Cache-Status $upstream_cache_status always; }}",
        u = up.url()
    );
    let p = Pair::with(Conf {
        http: "proxy_cache_path cache levels=1:2 keys_zone=z:1m;",
        server: &server,
        ..Default::default()
    });
    // A HEAD miss goes upstream as GET and is stored (proxy_cache_convert_head on).
    p.check_open(b"HEAD /h HTTP/1.1\r\nHost: localhost\r\n\r\n");
    // Both read the body into the cache after the HEAD's answer went out.
    wait_stored(&p, "/h");
    p.get_open("/h", "");
    // Stored on the second use.
    for _ in 0..3 {
        p.get_open("/min/x", "");
    }
    // A stored MISS meets the not-modified filter.
    p.get_open("/nm", "If-None-Match: \"e1\"\r\n");
    // The 304 went out before the body was read into the cache.
    wait_stored(&p, "/nm");
    p.get_open("/nm", "If-None-Match: \"e1\"\r\n");
    // A range beyond proxy_cache_max_range_offset goes upstream, not stored.
    p.get_open("/far/r", "Range: bytes=5-\r\n");
    p.get_open("/far/r", "");
    p.get_open("/far/r", "Range: bytes=1-2\r\n");
    // The default key with a URI part in proxy_pass.
    p.get_open("/a/x?q=1", "");
    let root = p.html().parent().unwrap().to_path_buf();
    let nginx_keys = keys_in(&root.join("nginx/cache"));
    let shoal_keys = keys_in(&root.join("shoal/cache"));
    assert_eq!(nginx_keys, shoal_keys);
    assert!(
        nginx_keys.iter().any(|k| k.ends_with("/b/x?q=1")),
        "{nginx_keys:?}"
    );
}

#[test]
fn stale_on_error_and_revalidation_as_nginx() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;
    let mode = Arc::new(AtomicUsize::new(0));
    let m = mode.clone();
    let up = Upstream::start(move |r| match m.load(Ordering::SeqCst) {
        1 => Answer::status(500).body("broken"),
        3 => Answer::hang_up(),
        2 if r.header("if-none-match") == Some("\"v\"") => {
            Answer::status(304).header("ETag", "\"v\"")
        }
        _ => Answer::ok(format!("v {}", r.target))
            .header("ETag", "\"v\"")
            .header(
                "Cache-Control",
                if r.target.contains("sie") {
                    "max-age=1, stale-if-error=60"
                } else {
                    "max-age=1"
                },
            ),
    });
    let server = format!(
        "location / {{ proxy_pass {u}; proxy_cache z; proxy_cache_valid 304 1h; \
         proxy_cache_revalidate on; add_header X-Cache-Status $upstream_cache_status always; }}\n\
         location /stale/ {{ proxy_pass {u}; proxy_cache z; proxy_cache_use_stale http_500; \
         add_header X-Cache-Status $upstream_cache_status always; }}",
        u = up.url()
    );
    let p = Pair::with(Conf {
        http: "proxy_cache_path cache levels=1:2 keys_zone=z:1m;",
        server: &server,
        ..Default::default()
    });
    for path in ["/stale/a", "/plain", "/sie", "/rv"] {
        p.get_open(path, "");
    }
    std::thread::sleep(std::time::Duration::from_millis(2100));
    mode.store(1, Ordering::SeqCst);
    // use_stale http_500: STALE; none: the 500 (EXPIRED); stale-if-error does not cover an
    // upstream's 500 in nginx 1.22 (only errors and timeouts): the 500 (EXPIRED).
    for path in ["/stale/a", "/plain", "/sie"] {
        p.get_open(path, "");
    }
    // An upstream that hangs up is an error: stale-if-error answers STALE.
    mode.store(3, Ordering::SeqCst);
    let r = p.get_open("/sie", "");
    assert!(r.contains("STALE"), "{r}");
    // Revalidation: If-None-Match upstream, 304, REVALIDATED, then fresh for an hour.
    mode.store(2, Ordering::SeqCst);
    let r = p.get_open("/rv", "");
    assert!(r.contains("REVALIDATED"), "{r}");
    p.get_open("/rv", "");
}

/// The bodies of the objects under a cache directory, by key (what follows the stored head).
fn bodies_in(dir: &std::path::Path) -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    for path in common::files_under(dir) {
        let Ok(data) = std::fs::read(path) else {
            continue;
        };
        let Some(k) = data.windows(6).position(|w| w == b"\nKEY: ") else {
            continue;
        };
        let key_end = k + 6 + data[k + 6..].iter().position(|&c| c == b'\n').unwrap_or(0);
        let key = String::from_utf8_lossy(&data[k + 6..key_end]).into_owned();
        let head_end = data[key_end..]
            .windows(4)
            .position(|w| w == b"\r\n\r\n")
            .map_or(data.len(), |i| key_end + i + 4);
        out.push((key, data[head_end..].to_vec()));
    }
    out.sort();
    out
}

/// The upstream for the range scenarios: 1000 bytes with validators, `Accept-Ranges` unless
/// the path says `noar`, chunked when it says `chunked`.
fn ranged_upstream() -> Upstream {
    Upstream::start(|r| {
        let t = r.target.as_str();
        let mut a = Answer::ok(diff::range_body())
            .header("ETag", "\"r1\"")
            .header("Last-Modified", diff::MTIME_HTTP);
        if !t.contains("noar") {
            a = a.header("Accept-Ranges", "bytes");
        }
        if t.contains("chunked") {
            a = a.chunked(&[300]);
        }
        a
    })
}

#[test]
fn ranges_on_a_miss_as_nginx() {
    let up = ranged_upstream();
    let loc = |path: &str, extra: &str| {
        format!(
            "location {path} {{ proxy_pass {}; proxy_cache z; proxy_cache_valid 200 1h; {extra} \
             add_header X-Cache-Status $upstream_cache_status always; }}\n",
            up.url()
        )
    };
    let server = [
        loc("/", ""),
        loc("/one/", "max_ranges 1;"),
        loc("/none/", "max_ranges 0;"),
        loc("/nostore/", "proxy_no_cache 1;"),
    ]
    .concat();
    let p = Pair::with(Conf {
        http: "proxy_cache_path cache levels=1:2 keys_zone=z:1m;",
        server: &server,
        ..Default::default()
    });
    // One range of a MISS: 206, only those bytes; the object stored is the whole answer, and
    // its HIT serves any range, several as multipart/byteranges.
    let r = p.get_open("/single", "Range: bytes=2-5\r\n");
    assert!(
        r.starts_with("HTTP/1.1 206") && r.contains("\n2345\n"),
        "{r}"
    );
    let r = p.get_open("/single", "Range: bytes=100-109\r\n");
    assert!(r.starts_with("HTTP/1.1 206") && r.contains("HIT"), "{r}");
    p.get_open("/single", "Range: bytes=0-1,5-6\r\n");
    p.get_open("/single", "");
    p.get_open("/suffix", "Range: bytes=-5\r\n");
    p.get_open("/open", "Range: bytes=990-\r\n");
    p.get_open("/open", "Range: bytes=-1000\r\n");
    p.get_open("/clamped", "Range: bytes=995-5000\r\n");
    p.get_open("/skipped", "Range: bytes=2000-3000,7-8\r\n");
    // Several ranges of a MISS: nginx cuts one range at most from a stream (single_range):
    // the whole 200 with Accept-Ranges; the HIT then answers them.
    let r = p.get_open("/multi", "Range: bytes=0-1,5-6\r\n");
    assert!(
        r.starts_with("HTTP/1.1 200") && r.contains("Accept-Ranges"),
        "{r}"
    );
    let r = p.get_open("/multi", "Range: bytes=0-1,5-6\r\n");
    assert!(r.contains("multipart/byteranges"), "{r}");
    p.get_open("/overlap", "Range: bytes=0-999,0-999\r\n");
    // Unsatisfiable: 416, and nginx does not read the answer on: not stored, still a MISS.
    let r = p.get_open("/unsat", "Range: bytes=1000-\r\n");
    assert!(r.starts_with("HTTP/1.1 416"), "{r}");
    p.get_open("/unsat", "");
    p.get_open("/unsat", "Range: bytes=1000-\r\n");
    p.get_open("/badsyntax", "Range: bytes=x\r\n");
    p.get_open("/notbytes", "Range: items=0-1\r\n");
    // If-Range against the upstream's ETag and Last-Modified.
    p.get_open("/ir-etag", "Range: bytes=1-2\r\nIf-Range: \"r1\"\r\n");
    p.get_open("/ir-etag-no", "Range: bytes=1-2\r\nIf-Range: \"r2\"\r\n");
    p.get_open("/ir-weak", "Range: bytes=1-2\r\nIf-Range: W/\"r1\"\r\n");
    p.get_open(
        "/ir-date",
        &format!("Range: bytes=1-2\r\nIf-Range: {}\r\n", diff::MTIME_HTTP),
    );
    p.get_open(
        "/ir-date-no",
        "Range: bytes=1-2\r\nIf-Range: Sun, 01 Jan 2023 00:00:01 GMT\r\n",
    );
    // max_ranges.
    p.get_open("/one/a", "Range: bytes=1-2\r\n");
    p.get_open("/one/b", "Range: bytes=1-2,4-5\r\n");
    p.get_open("/none/a", "Range: bytes=1-2\r\n");
    p.get_open("/none/a", "Range: bytes=1-2\r\n");
    // No Accept-Ranges from the upstream: no ranges, now or from the cache.
    p.get_open("/noar", "Range: bytes=1-2\r\n");
    p.get_open("/noar", "Range: bytes=1-2\r\n");
    // A HEAD goes up as GET and is stored; its answer is the range's head.
    p.check_open(b"HEAD /head HTTP/1.1\r\nHost: localhost\r\nRange: bytes=1-2\r\n\r\n");
    p.get_open("/head", "Range: bytes=3-4\r\n");
    // proxy_no_cache is asked after the headers: the answer is still cacheable for the range
    // and not-modified filters, just not stored.
    p.get_open("/nostore/a", "Range: bytes=1-2\r\n");
    p.get_open("/nostore/a", "Range: bytes=1-2,4-5\r\n");
    p.get_open("/nostore/a", "If-None-Match: \"r1\"\r\n");
    // A chunked answer has no length for the range filter: the whole 200, no Accept-Ranges.
    // (HTTP/1.0: re-chunking depends on timing.)
    let r = p.check_open(b"GET /chunked HTTP/1.0\r\nRange: bytes=1-2\r\n\r\n");
    assert!(
        r.starts_with("HTTP/1.1 200") && !r.contains("Accept-Ranges"),
        "{r}"
    );
    // Every object is the whole answer, as nginx's.
    let root = p.html().parent().unwrap().to_path_buf();
    let nginx = bodies_in(&root.join("nginx/cache"));
    let shoal = bodies_in(&root.join("shoal/cache"));
    let keys =
        |objects: &[(String, Vec<u8>)]| objects.iter().map(|o| o.0.clone()).collect::<Vec<_>>();
    assert_eq!(keys(&nginx), keys(&shoal));
    // All but /unsat's 416, /badsyntax's 416 and /nostore/.
    assert_eq!(nginx.len(), 20, "{:?}", keys(&nginx));
    for (key, body) in nginx.iter().chain(&shoal) {
        assert_eq!(body, diff::range_body().as_bytes(), "{key}");
    }
}

/// An answer the upstream sent without a length (chunked, or ended by its close): nginx stores
/// its head as it came, so the HIT has no length either: chunked to HTTP/1.1 (in pieces of
/// 32k with `sendfile off`, nginx's output buffers; whole with `sendfile on`), to the close to
/// HTTP/1.0, no Accept-Ranges and no 206 (not even with `proxy_force_ranges`), and a HEAD
/// says neither.
#[test]
fn a_hit_of_an_answer_without_a_length_has_none_as_nginx() {
    let up = Upstream::start(|r| {
        let t = r.target.as_str();
        let body = if t.contains("big") {
            "0123456789".repeat(10_000)
        } else {
            format!("body of {t}")
        };
        let a = Answer::ok(body).header("Accept-Ranges", "bytes");
        if t.contains("close") {
            a.close_delimited()
        } else {
            a.chunked(&[])
        }
    });
    let p = cached_locations(
        &up,
        &[
            ("c", ""),
            ("force", "proxy_force_ranges on;"),
            ("sf", "sendfile on;"),
        ],
    );
    let paths = [
        "/c/chunked",
        "/c/close",
        "/c/big",
        "/force/chunked",
        "/sf/big",
    ];
    for path in paths {
        // The MISS in HTTP/1.0: how a stream is chunked again depends on timing.
        p.check_open(format!("GET {path} HTTP/1.0\r\n\r\n").as_bytes());
    }
    // A HEAD's MISS (up as a GET) says neither either, and keeps an HTTP/1.0 keep-alive
    // connection; the body is stored.
    p.head_open("/c/head-chunked", "");
    p.check_open(b"HEAD /c/head10 HTTP/1.0\r\nConnection: keep-alive\r\n\r\n");
    for path in paths.iter().chain(&["/c/head-chunked"]) {
        let r = p.get_open(path, "");
        assert!(
            r.contains("X-Cache-Status: HIT") && r.contains("Transfer-Encoding: chunked"),
            "{r}"
        );
        let r = p.get_open(path, "Range: bytes=0-3\r\n");
        assert!(
            r.starts_with("HTTP/1.1 200") && !r.contains("Accept-Ranges"),
            "{r}"
        );
        let r = p.head_open(path, "");
        assert!(!r.contains("Content-Length"), "{r}");
        p.check_open(format!("GET {path} HTTP/1.0\r\n\r\n").as_bytes());
        p.check_open(format!("HEAD {path} HTTP/1.0\r\nConnection: keep-alive\r\n\r\n").as_bytes());
    }
}

/// `proxy_cache_convert_head off`: a HEAD goes upstream as a HEAD and its answer is stored as
/// it came, the GET's Content-Length and no body. With the default key a later GET is that
/// object's HIT: nginx sends the length and no body and keeps the connection; a range of it is
/// a 206 (or multipart) with nothing in it. A GET stored first answers a HEAD. With
/// `$request_method` in the key, each method has its own object.
#[test]
fn convert_head_off_stores_the_head_answer_as_nginx() {
    let up = Upstream::start(|r| {
        let t = r.target.as_str();
        let mut a = Answer::ok(format!("{} {t}", r.method)).header("X-Method", &r.method);
        if t.contains("ar") {
            a = a.header("Accept-Ranges", "bytes");
        }
        if t.contains("chunked") {
            a = a.chunked(&[]);
        }
        a
    });
    let p = cached_locations(
        &up,
        &[
            ("h", "proxy_cache_convert_head off;"),
            (
                "k",
                "proxy_cache_convert_head off; proxy_cache_key $request_method$request_uri;",
            ),
        ],
    );
    let r = p.head_open("/h/a", "");
    assert!(r.contains("X-Method: HEAD") && r.contains("MISS"), "{r}");
    let r = p.head_open("/h/a", "");
    assert!(r.contains("HIT"), "{r}");
    let r = p.get_open("/h/a", "");
    assert!(
        r.contains("X-Method: HEAD") && r.contains("HIT") && r.contains("[kept open]"),
        "{r}"
    );
    p.get_open("/h/a", "Range: bytes=0-3\r\n");
    // The bodiless HIT, then the next answer on the same connection.
    p.check_open(
        b"GET /h/a HTTP/1.1\r\nHost: localhost\r\n\r\nGET /h/b HTTP/1.1\r\nHost: localhost\r\n\r\n",
    );
    p.head_open("/h/ar", "Range: bytes=0-3\r\n");
    let r = p.get_open("/h/ar", "Range: bytes=0-3\r\n");
    assert!(r.starts_with("HTTP/1.1 206"), "{r}");
    p.get_open("/h/ar", "Range: bytes=0-1,3-4\r\n");
    p.get_open("/h/ar", "Range: bytes=100-\r\n");
    p.check_open(b"GET /h/ar HTTP/1.0\r\n\r\n");
    // A chunked HEAD answer: the GET's HIT is an empty chunked body.
    p.head_open("/h/chunked", "");
    p.get_open("/h/chunked", "");
    // A GET stored first: the HEAD is its HIT.
    p.get_open("/h/g", "");
    let r = p.head_open("/h/g", "");
    assert!(r.contains("X-Method: GET") && r.contains("HIT"), "{r}");
    // Keyed by method: the GET has its own object.
    p.head_open("/k/a", "");
    p.head_open("/k/a", "");
    let r = p.get_open("/k/a", "");
    assert!(r.contains("X-Method: GET") && r.contains("MISS"), "{r}");
    let r = p.get_open("/k/a", "");
    assert!(r.contains("HIT") && r.contains("GET /k/a"), "{r}");
    let root = p.html().parent().unwrap().to_path_buf();
    let nginx = bodies_in(&root.join("nginx/cache"));
    let shoal = bodies_in(&root.join("shoal/cache"));
    assert_eq!(nginx, shoal);
}

/// nginx never stores an answer it redirects by `X-Accel-Redirect`; one that a location
/// ignoring the header stored is redirected when a location that honours it finds it (a
/// HIT goes through the upstream's header processing, the stored `Content-Type` handed on);
/// shoal sent the stored answer as it was. (nginx 1.22's worker dies of signal 11 once such
/// an answer is sent: the answers are still its.)
#[test]
fn x_accel_redirect_of_a_cached_answer_as_nginx() {
    let up = Upstream::start(|r| {
        Answer::ok(format!("object {}", r.target))
            .header("Content-Type", "application/x-up")
            .header("X-Accel-Redirect", "/inner?from=cache")
    });
    let loc = |path: &str, extra: &str| {
        format!(
            "location /{path}/ {{ proxy_pass {}; proxy_cache z; proxy_cache_key k$arg_k; \
             proxy_cache_valid 200 1h; add_header X-Cache-Status $upstream_cache_status \
             always; {extra} }}\n",
            up.url()
        )
    };
    let server = loc("fill", "proxy_ignore_headers X-Accel-Redirect;")
        + &loc("hit", "")
        + "location /inner { internal; return 200 \"inner $args\\n\"; }";
    let p = Pair::with(Conf {
        http: "proxy_cache_path cache levels=1:2 keys_zone=z:1m;",
        server: &server,
        ..Default::default()
    });
    let stored = p.get_open("/fill/?k=1", "");
    assert!(stored.contains("X-Cache-Status: MISS"), "{stored}");
    // Compared up to the close: nginx's worker dies after it.
    let hit = p.get("/hit/?k=1", "");
    assert!(hit.contains("inner from=cache"), "{hit}");
    assert!(hit.contains("Content-Type: application/x-up"), "{hit}");
    // Redirected, not stored: a MISS each time.
    for _ in 0..2 {
        let r = p.get_open("/hit/?k=2", "");
        assert!(r.contains("inner from=cache"), "{r}");
    }
    p.get_open("/fill/?k=2", "");
}
