//! The proxy against real nginx: nginx and shoal run the same configuration in front of the
//! same upstream (`common/upstream.rs`), which answers with the raw request it received as
//! the body. Comparing the two answers compares both what each sent upstream (request line,
//! header order and values, body) and what each passed back to the client (status line,
//! headers, framing).

use std::time::Duration;

use crate::common;
use crate::common::upstream::{echo_answer, Answer, Upstream};
use crate::diff::{Conf, Pair};

/// The upstream: the echo, shaped by markers in the path.
fn upstream() -> Upstream {
    Upstream::start(|r| {
        let t = r.target.as_str();
        let echo = echo_answer(r);
        if t.contains("chunked") {
            echo.chunked(&[5, 100])
        } else if t.contains("closedelim") {
            echo.close_delimited()
        } else if t.contains("redir") {
            Answer::status(302)
                .header("Location", &format!("http://{}/two/next", host_of(r)))
                .body("moved")
        } else if t.contains("relloc") {
            Answer::status(302)
                .header("Location", "/rel/x")
                .body("moved")
        } else if t.contains("refreshup") {
            echo.header("Refresh", &format!("5; URL=http://{}/two/next", host_of(r)))
        } else if t.contains("auth401") {
            Answer::status(401)
                .header("WWW-Authenticate", "Basic realm=\"x\"")
                .body("no")
        } else if t.contains("noreason") {
            Answer::raw("HTTP/1.1 200\r\nContent-Length: 2\r\n\r\nok")
        } else if t.contains("emptytype") {
            // nginx writes a Content-Type only when it has a value.
            Answer::raw("HTTP/1.1 200 OK\r\nContent-Type: \r\nContent-Length: 2\r\n\r\nok")
        } else if t.contains("upgradehdr") {
            echo.header("Upgrade", "h2c")
        } else if t.contains("reason") {
            echo.reason("Fine Thanks")
        } else if t.contains("hidden") {
            echo.header("X-Accel-Expires", "10")
                .header("X-Pad", "pad")
                .header("Server", "upstream/1")
                .header("Date", "Thu, 01 Jan 1970 00:00:00 GMT")
                .header("Set-Cookie", "a=1")
                .header("Set-Cookie", "b=2")
                .header("X-Kept", "yes")
        } else if t.contains("typednocontent") {
            // A proxied 204 keeps the upstream's Content-Type and Content-Length (nginx clears
            // them only for a status it makes itself, one without an upstream's status line).
            Answer::raw(
                "HTTP/1.1 204 No Content\r\nContent-Type: text/plain; charset=utf-8\r\n\
                 Content-Length: 5\r\nX-After: 1\r\n\r\n",
            )
        } else if t.contains("typednotmod") {
            Answer::raw(
                "HTTP/1.1 304 Not Modified\r\nETag: \"e1\"\r\nContent-Type: text/plain\r\n\
                 Content-Length: 7\r\n\r\n",
            )
        } else if t.contains("nocontent") {
            Answer::status(204)
        } else if t.contains("notmod") {
            Answer::status(304).header("ETag", "\"e1\"")
        } else if t.contains("slow") {
            echo.delay_head(Duration::from_secs(3))
        } else if t.contains("err500") {
            Answer::status(500).body("upstream failed")
        } else if t.contains("ranges") {
            echo.header("Accept-Ranges", "bytes")
        } else {
            echo
        }
    })
}

fn host_of(r: &common::upstream::Recorded) -> String {
    r.header("host").unwrap_or("").to_string()
}

fn pair(up: &Upstream, http: &str, server: &str) -> Pair {
    let server = server.replace("UP", &up.url());
    let http = http.replace("UPPORT", &up.port().to_string());
    Pair::with(Conf {
        http: &http,
        server: &server,
        ..Default::default()
    })
}

#[test]
fn default_request_and_answer() {
    let up = upstream();
    let p = pair(&up, "", "location / { proxy_pass UP; }");
    p.get_open("/a/b?x=1", "");
    p.get_open(
        "/h",
        "X-Custom: 1\r\nKeep-Alive: 300\r\nTE: trailers\r\nUpgrade: foo\r\nExpect: nothing\r\n\
         Accept-Encoding: gzip\r\nConnection: keep-alive\r\n",
    );
    p.head_open("/head", "");
    p.get_open("/hidden", "");
    p.get_open("/reason", "");
    p.get_open("/noreason", "");
    p.get_open("/upgradehdr", "");
    p.get_open("/emptytype", "");
    p.get_open("/nocontent", "");
    p.get_open("/typednocontent", "");
    p.head_open("/typednocontent", "");
    p.get_open("/typednotmod", "");
    p.get_open("/notmod", "If-None-Match: \"e1\"\r\n");
    p.check_open(b"GET /old HTTP/1.0\r\n\r\n");
    p.check_open(b"GET /closedelim HTTP/1.0\r\n\r\n");
}

#[test]
fn framings_are_relayed_alike() {
    // To an HTTP/1.1 client both re-chunk what they read as it arrives, so chunk boundaries
    // depend on timing; the bodies are compared unchunked (HTTP/1.0), and `proxy.rs` checks
    // the chunked form decodes to the same bytes.
    let up = upstream();
    let p = pair(&up, "", "location / { proxy_pass UP; }");
    p.check_open(b"GET /chunked HTTP/1.0\r\n\r\n");
    p.check_open(b"GET /closedelim HTTP/1.0\r\n\r\n");
    p.head_open("/chunked", "");
}

#[test]
fn uris_by_nginx_rules() {
    let up = upstream();
    let p = pair(
        &up,
        "",
        "location /one/ { proxy_pass UP/two/; }\n\
         location /brk/ { rewrite ^/brk/(.*)$ /changed/$1 break; proxy_pass UP/two/; }\n\
         location /last/ { rewrite ^/last/(.*)$ /one/$1 last; }\n\
         location = /exact { proxy_pass UP/e; }\n\
         location /plain/ { proxy_pass UP; }\n\
         location /setargs/ { set $args \"z=9&$args\"; proxy_pass UP; }\n\
         location /ep { error_page 404 /one/from-error-page; return 404; }",
    );
    p.get_open("/one/x/y?q=1", "");
    p.get_open("/one/x%20y", "");
    p.get_open("/one/a+b", "");
    // A `+` does not make nginx escape the path (only a `%` does): raw UTF-8 passes raw.
    p.get_open("/one/a+b/\u{e9}", "");
    p.get_open("/one/../one/dots", "");
    p.get_open("/brk/z?k=v", "");
    p.get_open("/last/moved?k=v", "");
    p.get_open("/exact?a", "");
    p.get_open("/plain/%41%2F./b?c", "");
    p.get_open("/ep", "");
    p.get_open("/setargs/q?a=1", "");
    p.get_open("/setargs/none", "");
}

#[test]
fn set_header_and_friends() {
    let up = upstream();
    let p = pair(
        &up,
        "",
        "location / { proxy_pass UP; proxy_set_header Host $host:$server_port; \
         proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for; \
         proxy_set_header X-Empty \"\"; proxy_set_header Accept \"\"; \
         proxy_hide_header X-Kept; proxy_pass_header Server; }\n\
         location /v11/ { proxy_pass UP; proxy_http_version 1.1; proxy_set_header Connection \"\"; }\n\
         location /nohdr/ { proxy_pass UP; proxy_pass_request_headers off; }\n\
         location /setbody/ { proxy_pass UP; proxy_set_body \"body of $uri\"; }\n\
         location /nobody/ { proxy_pass UP; proxy_pass_request_body off; proxy_set_header Content-Length \"\"; }",
    );
    p.get_open("/x", "X-Forwarded-For: 10.0.0.1\r\nAccept: */*\r\n");
    p.get_open("/hidden", "");
    p.get_open("/v11/x", "");
    p.get_open("/nohdr/x", "X-Custom: 1\r\n");
    p.check_open(b"POST /setbody/x HTTP/1.1\r\nHost: localhost\r\nContent-Length: 3\r\n\r\nabc");
    // (Without `proxy_set_header Content-Length ""` nginx passes the client's length with no
    // body, and the exchange hangs until a timeout: nginx's documented advice is this line.)
    p.check_open(b"POST /nobody/x HTTP/1.1\r\nHost: localhost\r\nContent-Length: 3\r\n\r\nabc");
}

#[test]
fn request_bodies() {
    let up = upstream();
    let p = pair(&up, "", "location / { proxy_pass UP; }");
    p.check_open(b"POST /p HTTP/1.1\r\nHost: localhost\r\nContent-Length: 5\r\n\r\nhello");
    p.check_open(
        b"POST /c HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: chunked\r\n\r\n\
          3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n",
    );
    let big = "z".repeat(40_000);
    p.check_open(
        format!(
            "PUT /big HTTP/1.1\r\nHost: localhost\r\nContent-Length: {}\r\n\r\n{big}",
            big.len()
        )
        .as_bytes(),
    );
}

#[test]
fn redirects_and_errors() {
    let up = upstream();
    let dead = common::free_port();
    let p = pair(
        &up,
        "",
        &format!(
            "location /one/ {{ proxy_pass UP/two/; }}\n\
             location /off/ {{ proxy_pass UP/two/; proxy_redirect off; }}\n\
             location /dead/ {{ proxy_pass http://127.0.0.1:{dead}; }}\n\
             location /slow/ {{ proxy_pass UP; proxy_read_timeout 300ms; }}\n\
             location /i/ {{ proxy_pass UP; proxy_intercept_errors on; error_page 500 401 /one/fallback; }}\n\
             location /ni/ {{ proxy_pass UP; error_page 500 /one/fallback; }}"
        ),
    );
    p.get_open("/one/redir", "");
    p.get_open("/off/redir", "");
    // A relative Location no rule rewrote stays relative; a Refresh URL is rewritten whatever
    // the case of its `URL=`.
    p.get_open("/one/relloc", "");
    p.get_open("/one/refreshup", "");
    p.get_open("/i/auth401", "");
    p.get_open("/dead/x", "");
    p.get_open("/slow/x", "");
    p.get_open("/i/err500", "");
    p.get_open("/ni/err500", "");
}

#[test]
fn ranges_pass_upstream_unless_the_answer_may_be_cached() {
    // Without a cache, Range and If-Range go upstream and its answer comes back as it is (no
    // range filter). With one, they do not (the object must be whole), and the range filter
    // cuts one range from the answer as it streams by.
    let up = upstream();
    let p = pair(
        &up,
        "proxy_cache_path cache levels=1:2 keys_zone=z:1m;",
        "location / { proxy_pass UP; }\n\
         location /c/ { proxy_pass UP; proxy_cache z; proxy_cache_valid 200 1h; }",
    );
    let range = "Range: bytes=0-3\r\nIf-Range: \"x\"\r\n";
    let r = p.get_open("/ranges", range);
    assert!(
        r.starts_with("HTTP/1.1 200") && r.contains("If-Range: \\\"x\\\""),
        "{r}"
    );
    let r = p.get_open("/c/ranges", "Range: bytes=0-3\r\n");
    assert!(
        r.starts_with("HTTP/1.1 206") && r.contains("\nGET \n"),
        "{r}"
    );
    // The HIT's body is the request the MISS sent: no Range.
    let r = p.get_open("/c/ranges", "");
    assert!(
        r.starts_with("HTTP/1.1 200") && !r.contains("Range: bytes"),
        "{r}"
    );
    p.get_open("/c/ranges2", "Range: bytes=0-3,5-6\r\n");
    p.get_open("/c/ranges3", range);
    // The upstream says nothing of ranges: none are taken.
    p.get_open("/c/plain", "Range: bytes=0-3\r\n");
}

#[test]
fn proxy_force_ranges_as_nginx() {
    // With `proxy_force_ranges on` any answer of known length takes a range, whatever the
    // upstream said: one range is cut from the stream (several: the whole 200), the range
    // filter's own `Accept-Ranges` replaces the upstream's, a HIT takes several.
    let up = upstream();
    let p = pair(
        &up,
        "proxy_cache_path cache levels=1:2 keys_zone=z:1m;",
        "location / { proxy_pass UP; proxy_force_ranges on; }\n\
         location /c/ { proxy_pass UP; proxy_force_ranges on; proxy_cache z; \
         proxy_cache_valid 200 1h; add_header X-Cache-Status $upstream_cache_status; }",
    );
    let r = p.get_open("/plain", "Range: bytes=0-3\r\n");
    assert!(r.starts_with("HTTP/1.1 206"), "{r}");
    let r = p.get_open("/plain", "");
    assert!(
        r.starts_with("HTTP/1.1 200") && r.contains("Accept-Ranges: bytes"),
        "{r}"
    );
    let r = p.get_open("/ranges", "");
    assert_eq!(r.matches("Accept-Ranges").count(), 1, "{r}");
    p.get_open("/ranges", "Range: bytes=2-5\r\n");
    p.get_open("/plain", "Range: bytes=-4\r\n");
    p.get_open("/plain", "Range: bytes=0-3,5-6\r\n");
    p.get_open("/plain", "Range: bytes=100000-\r\n");
    // No length, no ranges (a HEAD: the relay's chunk boundaries are not nginx's to compare).
    let r = p.head_open("/chunked", "Range: bytes=0-3\r\n");
    assert!(
        r.starts_with("HTTP/1.1 200") && !r.contains("Accept-Ranges"),
        "{r}"
    );
    let r = p.get_open("/c/plain", "Range: bytes=0-3\r\n");
    assert!(
        r.starts_with("HTTP/1.1 206") && r.contains("X-Cache-Status: MISS"),
        "{r}"
    );
    let r = p.get_open("/c/plain", "Range: bytes=0-3,5-6\r\n");
    assert!(
        r.starts_with("HTTP/1.1 206") && r.contains("X-Cache-Status: HIT"),
        "{r}"
    );
}

#[test]
fn raw_bytes_in_the_uri_go_upstream_as_sent() {
    // A byte that is not UTF-8 in the path or the arguments: nginx passes the client's bytes,
    // with or without a URI part (shoal used to send U+FFFD's UTF-8 in their place).
    let up = upstream();
    let p = pair(
        &up,
        "",
        "location / { proxy_pass UP; }\nlocation /one/ { proxy_pass UP/two/; }",
    );
    p.check_open(b"GET /a\xe9b HTTP/1.1\r\nHost: localhost\r\n\r\n");
    p.check_open(b"GET /one/a\xe9b?x=\xff HTTP/1.1\r\nHost: localhost\r\n\r\n");
    p.check_open(b"GET /q?x=\xe9 HTTP/1.1\r\nHost: localhost\r\n\r\n");
}

#[test]
fn last_modified_passes_whatever_the_status_without_a_cache() {
    // nginx passes an upstream's Last-Modified whatever the status when no cache is involved
    // (its header filter's rule for 200, 206 and 304 needs a date parsed for a cache).
    let up = Upstream::start(|r| {
        let status = if r.target.contains("404") { 404 } else { 301 };
        Answer::status(status)
            .header("Last-Modified", "Sun, 01 Jan 2023 00:00:00 GMT")
            .body("x")
    });
    let p = pair(&up, "", "location / { proxy_pass UP; }");
    let r = p.get_open("/404", "");
    assert!(r.contains("Last-Modified"), "{r}");
    p.get_open("/301", "");
}

#[test]
fn a_proxied_location_redirects_its_name_without_the_slash() {
    // nginx's `auto_redirect`: `/u` meets `location /u/ { proxy_pass ...; }` with a 301 to
    // `/u/` (arguments kept), before regex locations, whichever prefix matched.
    let up = upstream();
    let p = pair(
        &up,
        "",
        "location / { proxy_pass UP; }\n\
         location /u/ { proxy_pass UP/base/; }\n\
         location = /e/ { proxy_pass UP; }\n\
         location /s/ { return 200 \"static\"; }\n\
         location /n { proxy_pass UP; }\n\
         location /n/ { proxy_pass UP; }\n\
         location ~ ^/u { return 200 \"regex\"; }",
    );
    let r = p.get_open("/u", "");
    assert!(r.starts_with("HTTP/1.1 301"), "{r}");
    p.get_open("/u?a=1", "");
    p.head_open("/e", "");
    p.get_open("/s", "");
    p.get_open("/n", "");
    p.check_open(b"GET /u HTTP/1.0\r\n\r\n");
}

#[test]
fn an_empty_request_body_keeps_its_length() {
    let up = upstream();
    let p = pair(&up, "", "location / { proxy_pass UP; }");
    p.check_open(b"POST /p HTTP/1.1\r\nHost: localhost\r\nContent-Length: 0\r\n\r\n");
    p.check_open(b"PUT /p HTTP/1.1\r\nHost: localhost\r\nContent-Length: 00\r\n\r\n");
}
