//! `slice` and `mirror` against real nginx: one test upstream behind both (it honours `Range`
//! over a 1000-byte file and records every request, with the port of the server that sent
//! it), the same requests, the same answers, and the same requests at the upstream.
//!
//! slice: the whole file and ranges in it (one range, a suffix, several, one across a slice's
//! end, past the end), the slices cached (`$slice_range` in the key: the second time nothing
//! reaches the upstream), an upstream that ignores `Range`, and one whose file changes between
//! slices (nginx's `etag mismatch` line, the connection closed). mirror: the client's method,
//! arguments and body copied to each mirror, a mirror that fails, a mirror that does not
//! answer (the client's answer does not wait for it, the request's log line does).
//!
//! slice through the body filters: gzip compresses the whole 200 (not a 206), the sub filter
//! rewrites each slice apart (nginx's filters of each slice's subrequest), and an ssi include
//! of a sliced location is not sliced.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use crate::common::client::Client;
use crate::common::upstream::{Answer, Recorded, Upstream};
use crate::diff::{Conf, Pair};

/// The file the upstream serves: 1000 bytes that differ from their neighbours.
fn file() -> Vec<u8> {
    (0..1000u32).map(|i| b'a' + (i * 7 % 26) as u8).collect()
}

/// The upstream: `/changing` changes its ETag after the first slice, `/norange` ignores
/// `Range`, `/gone` answers 404 past the first slice, `/fail` 500, `/hold` waits until
/// `held` is released; anything else is the file, ranges honoured.
fn upstream(held: Arc<AtomicBool>) -> Upstream {
    Upstream::start(move |r: &Recorded| {
        let data = file();
        let path = r.target.split('?').next().unwrap_or_default();
        if path == "/hold" {
            while held.load(Ordering::SeqCst) {
                std::thread::sleep(std::time::Duration::from_millis(10));
            }
            return Answer::ok("held");
        }
        if path.starts_with("/fail") {
            return Answer::status(500);
        }
        let range = r.header("range").filter(|_| !path.starts_with("/norange"));
        // `/t/...`: text, for the filters that look at the type.
        let typed = |a: Answer| {
            if path.starts_with("/t/") {
                a.header("Content-Type", "text/html")
            } else {
                a
            }
        };
        let Some((start, last)) = range.and_then(parse_range) else {
            return typed(Answer::ok(data).header("ETag", "\"v1\""));
        };
        if start >= data.len() as u64 || (path.starts_with("/gone") && start > 0) {
            return Answer::status(if start > 0 && path.starts_with("/gone") {
                404
            } else {
                416
            })
            .header("Content-Range", "bytes */1000");
        }
        if path.starts_with("/badrange") {
            // Not the range asked for.
            return Answer::status(206)
                .header("Content-Range", "bytes 5-9/1000")
                .body(data[5..10].to_vec());
        }
        let last = last.min(data.len() as u64 - 1);
        let etag = if path.starts_with("/changing") && start > 0 {
            "\"v2\""
        } else {
            "\"v1\""
        };
        typed(
            Answer::status(206)
                .header("ETag", etag)
                .header("Content-Range", &format!("bytes {start}-{last}/1000"))
                .body(data[start as usize..=last as usize].to_vec()),
        )
    })
}

fn parse_range(v: &str) -> Option<(u64, u64)> {
    let (a, b) = v.strip_prefix("bytes=")?.split_once('-')?;
    Some((a.parse().ok()?, b.parse().ok()?))
}

/// What the upstream saw from the server on `port`: method, target, `Range`, body; sorted
/// when `sorted` (a mirror's and the main request's order is not nginx's to keep).
fn seen(up: &Upstream, port: u16, from: usize, sorted: bool) -> Vec<String> {
    let mut v: Vec<String> = up.requests()[from..]
        .iter()
        .filter(|r| r.header("x-port") == Some(&port.to_string()))
        .map(|r| {
            format!(
                "{} {} range={:?} body={:?}",
                r.method,
                r.target,
                r.header("range"),
                String::from_utf8_lossy(&r.body)
            )
        })
        .collect();
    if sorted {
        v.sort();
    }
    v
}

const SERVER: &str = "\
    location / { slice 300; proxy_set_header Range $slice_range; \
        proxy_set_header X-Port $server_port; proxy_pass UP; }\n\
    location /c/ { slice 300; proxy_cache z; proxy_cache_key $uri$is_args$args$slice_range; \
        proxy_cache_valid 200 206 1h; proxy_set_header Range $slice_range; \
        proxy_set_header X-Port $server_port; add_header X-Cache $upstream_cache_status; \
        proxy_pass UP; }\n\
    location /m/ { mirror /mirror; mirror /mirror-fail; access_log logs/m.log; \
        proxy_set_header X-Port $server_port; proxy_pass UP; }\n\
    location /held/ { mirror /mirror-hold; access_log logs/held.log; \
        proxy_set_header X-Port $server_port; proxy_pass UP; }\n\
    location /moff/ { mirror /mirror-nobody; mirror_request_body off; \
        proxy_set_header X-Port $server_port; proxy_pass UP; }\n\
    location = /mirror-nobody { internal; proxy_pass_request_body off; \
        proxy_set_header Content-Length \"\"; proxy_set_header X-Port $server_port; \
        proxy_pass UP/nobody$request_uri; }\n\
    location = /mirror { internal; proxy_set_header X-Port $server_port; \
        proxy_pass UP/mirrored$request_uri; }\n\
    location = /mirror-fail { internal; proxy_set_header X-Port $server_port; \
        proxy_pass UP/fail; }\n\
    location = /mirror-hold { internal; proxy_set_header X-Port $server_port; \
        proxy_pass UP/hold; }";

fn pair(up: &Upstream) -> Pair {
    let server = SERVER.replace("UP", &up.url());
    Pair::with(Conf {
        http: "proxy_cache_path cache keys_zone=z:1m;",
        server: &server,
        ..Default::default()
    })
}

/// Each request to both, compared, and what the upstream saw of each server compared too.
fn same(p: &Pair, up: &Upstream, req: &str, sorted: bool) -> String {
    same_seen(p, up, req, sorted, 0)
}

/// [`same`], the upstream's view compared once it saw `n` requests from each server (a
/// mirror's may come after the answer).
fn same_seen(p: &Pair, up: &Upstream, req: &str, sorted: bool, n: usize) -> String {
    let (np, sp) = p.ports();
    let before = up.request_count();
    let answer = p.check_open_bytes(req.as_bytes());
    crate::common::wait_for("the mirrors at the upstream", || {
        let done =
            seen(up, np, before, sorted).len() >= n && seen(up, sp, before, sorted).len() >= n;
        done.then_some(())
    });
    let (n, s) = (seen(up, np, before, sorted), seen(up, sp, before, sorted));
    assert_eq!(n, s, "the upstream saw different requests for {req:?}");
    answer
}

fn get(path: &str, headers: &str) -> String {
    format!("GET {path} HTTP/1.1\r\nHost: localhost\r\n{headers}\r\n")
}

#[test]
fn slice_as_nginx() {
    let up = upstream(Arc::new(AtomicBool::new(false)));
    let p = pair(&up);
    for range in [
        "",
        "Range: bytes=500-650\r\n",
        "Range: bytes=-100\r\n",
        "Range: bytes=299-300\r\n",
        "Range: bytes=1-2,5-6\r\n",
        "Range: bytes=950-5000\r\n",
        "Range: bytes=5000-\r\n",
        "Range: bytes=0-\r\n",
        "If-Range: \"v1\"\r\nRange: bytes=400-401\r\n",
    ] {
        let answer = same(&p, &up, &get("/f", range), false);
        assert!(!answer.contains("[closed]"), "{range}: {answer}");
    }
    let before = up.request_count();
    let whole = same(&p, &up, &get("/f?a=1", ""), false);
    assert!(
        whole.contains(&String::from_utf8(file()).unwrap()),
        "{whole}"
    );
    // One request per slice, each asking for its range.
    let asked = seen(&up, p.ports().1, before, false);
    let want: Vec<String> = ["0-299", "300-599", "600-899", "900-1199"]
        .iter()
        .map(|r| format!("GET /f?a=1 range=Some(\"bytes={r}\") body=\"\""))
        .collect();
    assert_eq!(asked, want);
    // The upstream ignores Range: its 200 goes as it came.
    same(&p, &up, &get("/norange", ""), false);
    same(&p, &up, &get("/norange", "Range: bytes=10-20\r\n"), false);
    // HEAD: the first slice's head, no body.
    same(
        &p,
        &up,
        "HEAD /f HTTP/1.1\r\nHost: localhost\r\n\r\n",
        false,
    );
}

#[test]
fn slices_cached_as_nginx() {
    let up = upstream(Arc::new(AtomicBool::new(false)));
    let p = pair(&up);
    for range in ["", "Range: bytes=500-650\r\n", "", "Range: bytes=-100\r\n"] {
        same(&p, &up, &get("/c/f", range), false);
    }
    // Every slice is in each cache now: nothing reaches the upstream.
    let before = up.request_count();
    let answer = same(&p, &up, &get("/c/f", "Range: bytes=250-950\r\n"), false);
    assert!(answer.contains("X-Cache: HIT"), "{answer}");
    assert_eq!(up.request_count(), before);
}

#[test]
fn slice_mismatch_as_nginx() {
    let up = upstream(Arc::new(AtomicBool::new(false)));
    let p = pair(&up);
    // The file changed after the first slice: the answer ends, the connection closes.
    let answer = same(&p, &up, &get("/changing", ""), false);
    assert!(answer.contains("[closed]"), "{answer}");
    assert!(p.nginx_log().contains("etag mismatch in slice response"));
    assert!(p.shoal_log().contains("etag mismatch in slice response"));
    // A later slice is gone.
    let answer = same(&p, &up, &get("/gone", ""), false);
    assert!(answer.contains("[closed]"), "{answer}");
    assert!(p
        .shoal_log()
        .contains("unexpected status code 404 in slice response"));
    // The first slice is not the one asked for: nothing is sent.
    let answer = same(&p, &up, &get("/badrange", ""), false);
    assert!(answer.contains("[closed]"), "{answer}");
    let line = "unexpected range in slice response: 5-10 while reading response header";
    assert!(p.nginx_log().contains(line));
    assert!(p.shoal_log().contains(line));
}

#[test]
fn mirror_as_nginx() {
    let up = upstream(Arc::new(AtomicBool::new(false)));
    let p = pair(&up);
    // Each mirror gets the client's method, arguments and body; a failing one changes
    // nothing for the client.
    same_seen(&p, &up, &get("/m/a?x=1", ""), true, 3);
    let post = "POST /m/b?y=2 HTTP/1.1\r\nHost: localhost\r\nContent-Length: 7\r\n\r\nhello=1";
    same_seen(&p, &up, post, true, 3);
    let (np, sp) = p.ports();
    let mirrored = seen(&up, sp, 0, true);
    assert!(
        mirrored.contains(&"POST /mirrored/m/b?y=2 range=None body=\"hello=1\"".to_string()),
        "{mirrored:?}"
    );
    assert_eq!(seen(&up, np, 0, true), mirrored);
    // `mirror_request_body off`, and the mirror's location as nginx's documentation has it:
    // the mirror goes without the body.
    let post = "POST /moff/c HTTP/1.1\r\nHost: localhost\r\nContent-Length: 7\r\n\r\nhello=3";
    same_seen(&p, &up, post, true, 2);
    let mirrored = seen(&up, sp, 0, true);
    assert!(
        mirrored.contains(&"POST /nobody/moff/c range=None body=\"\"".to_string()),
        "{mirrored:?}"
    );
}

#[test]
fn mirror_not_waited_for_by_the_answer() {
    let held = Arc::new(AtomicBool::new(true));
    let up = upstream(held.clone());
    let p = pair(&up);
    let (np, sp) = p.ports();
    for port in [np, sp] {
        held.store(true, Ordering::SeqCst);
        let mut c = Client::connect(port);
        // The answer comes while the mirror's upstream still holds its request (it is
        // released only after): had the answer waited, this read would not end.
        let answer = c.get("/held/x").expect("the answer, the mirror still held");
        assert_eq!(answer.status, 200);
        let from = port.to_string();
        crate::common::wait_for("the mirror at the upstream", || {
            let reqs = up.requests();
            reqs.iter()
                .any(|r| r.target == "/hold" && r.header("x-port") == Some(from.as_str()))
                .then_some(())
        });
        held.store(false, Ordering::SeqCst);
    }
    // Both logged the request once its mirror had its answer.
    crate::common::wait_for("both log lines", || {
        let (n, s) = p.read_both("logs/held.log");
        (n.lines().count() == 1 && s.lines().count() == 1).then_some(())
    });
    let holds = up.requests().iter().filter(|r| r.target == "/hold").count();
    assert_eq!(holds, 2);
}

#[test]
fn slice_and_mirror_over_h2_as_nginx() {
    let up = upstream(Arc::new(AtomicBool::new(false)));
    let server = SERVER.replace("UP", &up.url());
    let p = Pair::with(Conf {
        http: "proxy_cache_path cache keys_zone=z:1m;",
        server: &server,
        listen: " http2",
        ..Default::default()
    });
    let whole = crate::nginx_diff_h2::check(&p, false, "/f", &[]);
    assert!(
        whole.contains(&String::from_utf8(file()).unwrap()),
        "{whole}"
    );
    crate::nginx_diff_h2::check(&p, false, "/f", &["-H", "Range: bytes=250-950"]);
    crate::nginx_diff_h2::check(&p, false, "/c/f", &["-H", "Range: bytes=-10"]);
    crate::nginx_diff_h2::check(&p, false, "/m/a?x=1", &["-d", "hello=2"]);
    let (np, sp) = p.ports();
    let mirrored = |port: u16| {
        // Both mirrors, each in its own time.
        crate::common::wait_for("the mirrors at the upstream", || {
            let v = seen(&up, port, 0, true);
            let at = |p: &str| v.iter().any(|r| r.starts_with(p));
            (at("POST /mirrored/m/a?x=1") && at("POST /fail?x=1")).then_some(v)
        })
    };
    assert_eq!(mirrored(np), mirrored(sp));
}

#[test]
fn slice_and_mirror_directives_checked_as_nginx() {
    for server in [
        "location / { slice 1m; slice 2m; }",
        "location / { slice -1; }",
        "location / { slice 1x; }",
        "location / { slice 0; }",
        "location / { mirror /a; mirror off; }",
        "location / { mirror off; mirror /a; }",
        "location / { mirror off; mirror off; }",
        "location / { mirror /a; mirror /b; }",
        "location / { mirror /a /b; }",
        "location / { mirror_request_body maybe; }",
        "location / { mirror_request_body off; mirror_request_body on; }",
        "mirror /a; location / { mirror off; }",
    ] {
        let (nginx, shoal) = crate::diff::both_test("", server);
        assert_eq!(nginx, shoal, "{server}");
    }
}

/// Sliced locations whose answers go through body filters, and an ssi page that includes
/// one. (The file has `gnub` across the first slices' border, `ahov` across the second's.)
const FILTERED: &str = "\
    location /t/gz/ { slice 300; proxy_set_header Range $slice_range; \
        proxy_set_header X-Port $server_port; proxy_pass UP; \
        gzip on; gzip_min_length 1; gzip_types text/html; }\n\
    location /t/sub/ { slice 300; proxy_set_header Range $slice_range; \
        proxy_set_header X-Port $server_port; proxy_pass UP; \
        sub_filter gnub [G]; sub_filter ahov [H]; sub_filter_once off; }\n\
    location /t/sub1/ { slice 300; proxy_set_header Range $slice_range; \
        proxy_set_header X-Port $server_port; proxy_pass UP; sub_filter a [A]; }\n\
    location /t/both/ { slice 300; proxy_set_header Range $slice_range; \
        proxy_set_header X-Port $server_port; proxy_pass UP; \
        sub_filter gnub [G]; sub_filter_once off; gzip on; gzip_types text/html; }\n\
    location /t/sliced/ { slice 300; proxy_set_header Range $slice_range; \
        proxy_set_header X-Port $server_port; proxy_pass UP; }\n\
    location /ssi/ { alias {HTML}/ssi/; ssi on; }";

/// Each request to both, with `Connection: close` (a client that half-closes is one that
/// went away, for a proxied request), the answers unchunked and gunzipped (compressed bytes
/// are zlib's choice), and what the upstream saw of each server compared too.
fn same_decoded(p: &Pair, up: &Upstream, req: &str) -> String {
    use std::io::{Read, Write};
    let (np, sp) = p.ports();
    let before = up.request_count();
    let req = req.replacen("\r\n", "\r\nConnection: close\r\n", 1);
    let answer = |port: u16| {
        let mut c = std::net::TcpStream::connect(("127.0.0.1", port)).expect("connecting");
        c.set_read_timeout(Some(std::time::Duration::from_secs(10)))
            .unwrap();
        c.write_all(req.as_bytes()).unwrap();
        let mut got = Vec::new();
        let _ = c.read_to_end(&mut got);
        match got.windows(4).any(|w| w == b"\r\n\r\n") {
            true => crate::nginx_diff_charset::decoded(&got),
            false => format!("[no head] {}", String::from_utf8_lossy(&got)),
        }
    };
    let (n, s) = (answer(np), answer(sp));
    assert_eq!(
        n,
        s,
        "shoal differs from nginx for {req:?}\n{}",
        p.shoal_log()
    );
    let (ns, ss) = (seen(up, np, before, false), seen(up, sp, before, false));
    assert_eq!(ns, ss, "the upstream saw different requests for {req:?}");
    n
}

/// Whether a body as [`same_decoded`] shows it (a list of bytes) has `text` in it.
fn has(answer: &str, text: &str) -> bool {
    let list = format!("{:?}", text.as_bytes());
    answer.contains(&list[1..list.len() - 1])
}

#[test]
fn slice_through_body_filters_as_nginx() {
    let up = upstream(Arc::new(AtomicBool::new(false)));
    let server = FILTERED.replace("UP", &up.url());
    let p = Pair::with(Conf {
        server: &server,
        ..Default::default()
    });
    let dir = p.html().join("ssi");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("inc.html"),
        "head<!--# include virtual=\"/t/sliced/f\" -->tail\n",
    )
    .unwrap();
    let gzip = "Accept-Encoding: gzip\r\n";
    // gzip compresses the whole 200; a range with it is no 206 (gzip came first), but
    // still ends the slices; without it, a 206 as ever.
    for (path, headers) in [
        ("/t/gz/f", gzip.to_string()),
        ("/t/gz/f", format!("{gzip}Range: bytes=250-650\r\n")),
        ("/t/gz/f", format!("{gzip}Range: bytes=-100\r\n")),
        ("/t/gz/f", format!("{gzip}Range: bytes=5000-\r\n")),
        ("/t/gz/f", "Range: bytes=250-650\r\n".to_string()),
        ("/t/gz/f", String::new()),
        ("/t/both/f", gzip.to_string()),
    ] {
        let answer = same_decoded(&p, &up, &get(path, &headers));
        assert!(!answer.contains("[closed]"), "{headers}: {answer}");
    }
    let whole = same_decoded(&p, &up, &get("/t/gz/f", gzip));
    assert!(whole.contains("Content-Encoding: gzip"), "{whole}");
    let ranged = same_decoded(&p, &up, &get("/t/gz/f", "Range: bytes=250-650\r\n"));
    assert!(ranged.starts_with("HTTP/1.1 206"), "{ranged}");
    // The sub filter of each slice: a match across two slices stays, `sub_filter_once`
    // replaces once in each.
    for range in [
        "",
        "Range: bytes=90-320\r\n",
        "Range: bytes=500-650\r\n",
        "Range: bytes=-100\r\n",
        "Range: bytes=950-\r\n",
        "Range: bytes=5-6,9-10\r\n",
        "Range: bytes=5000-\r\n",
    ] {
        same_decoded(&p, &up, &get("/t/sub/f", range));
        same_decoded(&p, &up, &get("/t/sub1/f", range));
    }
    let sub = same_decoded(&p, &up, &get("/t/sub/f", ""));
    assert!(has(&sub, "[G]") && has(&sub, "gnub"), "{sub}");
    // Included, a sliced location is not sliced: one request, no `Range`.
    let before = up.request_count();
    let page = same_decoded(&p, &up, &get("/ssi/inc.html", ""));
    assert!(has(&page, "head") && has(&page, "tail"), "{page}");
    let asked = seen(&up, p.ports().1, before, false);
    assert_eq!(asked, ["GET /t/sliced/f range=None body=\"\""]);
}

#[test]
fn slice_through_body_filters_over_h2_as_nginx() {
    let up = upstream(Arc::new(AtomicBool::new(false)));
    let server = FILTERED.replace("UP", &up.url());
    let p = Pair::with(Conf {
        server: &server,
        listen: " http2",
        ..Default::default()
    });
    crate::nginx_diff_h2::check(&p, false, "/t/gz/f", &["--compressed"]);
    crate::nginx_diff_h2::check(&p, false, "/t/sub/f", &["-H", "Range: bytes=500-650"]);
    crate::nginx_diff_h2::check(&p, false, "/t/sub1/f", &["-H", "Range: bytes=-100"]);
    crate::nginx_diff_h2::check(&p, false, "/t/gz/f", &["-H", "Range: bytes=250-650"]);
}
