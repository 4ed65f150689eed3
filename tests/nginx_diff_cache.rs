//! The proxy cache against real nginx: the same configuration in front of the same upstream;
//! the same requests give the same answers, `X-Cache-Status` sequence included (MISS, then
//! HIT; not stored answers stay MISS; BYPASS).

mod common;
mod diff;

use common::upstream::{Answer, Upstream};
use diff::{Conf, Pair};

/// nginx aborts a proxied request when the client half-closes: the client's side stays open.
fn get(p: &Pair, path: &str, headers: &str) -> String {
    p.check_open(format!("GET {path} HTTP/1.1\r\nHost: localhost\r\n{headers}\r\n").as_bytes())
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
    let server = format!(
        "location / {{ proxy_pass {}; proxy_cache z; proxy_cache_valid 200 1h; \
         proxy_cache_bypass $arg_nocache; \
         add_header X-Cache-Status $upstream_cache_status always; }}",
        up.url()
    );
    let p = Pair::with(Conf {
        http: "proxy_cache_path cache levels=1:2 keys_zone=z:1m;",
        server: &server,
        ..Default::default()
    });
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
        let got = get(&p, path, "");
        assert!(got.contains("X-Cache-Status: "), "{got}");
    }
    // A cached answer takes ranges only if the upstream said Accept-Ranges (nginx 1.22).
    let r = get(&p, "/a", "Range: bytes=0-3\r\n");
    assert!(r.starts_with("HTTP/1.1 200"), "{r}");
    get(&p, "/ranged", "");
    let r = get(&p, "/ranged", "Range: bytes=2-4\r\n");
    assert!(r.starts_with("HTTP/1.1 206"), "{r}");
}
