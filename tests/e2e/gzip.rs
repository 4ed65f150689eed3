//! The gzip filter end to end, against nginx 1.22.1's observed behaviour: which answers are
//! compressed (status, type, length, `Accept-Encoding`, HTTP version, `gzip_disable`, every
//! `gzip_proxied` case), what the headers become (`Content-Encoding`, no `Content-Length`, no
//! `Accept-Ranges`, a weak ETag, `Vary`), the framing (chunked on 1.1, closed on 1.0), and that
//! every compressed body, small or of several MiB, with `sendfile` on or off and with `aio
//! threads`, decompresses to the original. Also `gzip_static on|always` and seed 004's settings.
//!
//! Bodies are decompressed with the system's `gzip -dc` (the root package has no flate2).
//! Where nginx's behaviour is surprising (HEAD, `x-gzip`, `gzip_proxied` falling through to
//! "compress" when no header decides), the test says so: the expectations were checked against
//! nginx 1.22.1 with the same configuration.

use std::io::Write;
use std::process::{Command, Stdio};

use crate::common::client::{ask, request};
use crate::common::{self, conf_with, free_port, Client, Response, Shoal};

const AE: &str = "Accept-Encoding: gzip\r\n";

/// Runs a filter command over `input`, returning its stdout (panics on failure).
fn filter(cmd: &[&str], input: &[u8]) -> Vec<u8> {
    let mut child = Command::new(cmd[0])
        .args(&cmd[1..])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("running {cmd:?}: {e}"));
    let mut stdin = child.stdin.take().expect("piped stdin");
    let data = input.to_vec();
    let writer = std::thread::spawn(move || {
        let _ = stdin.write_all(&data);
    });
    let out = child.wait_with_output().expect("waiting for gzip");
    writer.join().expect("the writer thread");
    assert!(
        out.status.success(),
        "{cmd:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

/// Decompresses a gzip stream with `gzip -dc` (fails on a truncated or corrupt stream).
fn gunzip(data: &[u8]) -> Vec<u8> {
    assert!(
        data.starts_with(&[0x1f, 0x8b]),
        "not a gzip stream: {:?}",
        &data[..data.len().min(16)]
    );
    filter(&["gzip", "-dc"], data)
}

/// Asserts that `a` is a compressed 200-like answer on HTTP/1.1 whose body decompresses to
/// `want`, with nginx's header changes.
#[track_caller]
fn assert_compressed(a: &Response, want: &[u8]) {
    assert!(a.gzipped(), "expected Content-Encoding: gzip: {}", a.show());
    assert_eq!(
        a.header("transfer-encoding"),
        Some("chunked"),
        "{}",
        a.show()
    );
    assert_eq!(a.header("content-length"), None, "{}", a.show());
    assert_eq!(a.header("accept-ranges"), None, "{}", a.show());
    let plain = gunzip(&a.body);
    if plain != want {
        let at = plain.iter().zip(want).position(|(x, y)| x != y);
        panic!(
            "decompressed body of {} bytes differs from the original {} bytes (first difference at {at:?})",
            plain.len(),
            want.len()
        );
    }
}

/// Asserts that `a` is an uncompressed answer with body `want`.
#[track_caller]
fn assert_plain(a: &Response, want: &[u8]) {
    assert!(!a.gzipped(), "expected no Content-Encoding: {}", a.show());
    assert_eq!(
        a.header("content-length"),
        Some(want.len().to_string().as_str()),
        "{}",
        a.show()
    );
    assert!(a.body == want, "body differs: {}", a.show());
}

/// Starts shoal with `server` lines in the one server (root `html`).
fn start(server: &str) -> Shoal {
    start_with("", server)
}

fn start_with(main: &str, server: &str) -> Shoal {
    let port = free_port();
    Shoal::start(&conf_with(port, main, server), port)
}

fn write(s: &Shoal, path: &str, data: &[u8]) {
    let p = s.prefix.join(path);
    if let Some(d) = p.parent() {
        std::fs::create_dir_all(d).expect("creating a directory under html");
    }
    std::fs::write(p, data).expect("writing a test file");
}

/// Some text of `n` bytes that compresses, but not to nothing (words from a fixed generator).
fn text(n: usize) -> Vec<u8> {
    const WORDS: [&str; 12] = [
        "shoal", "nginx", "gzip", "deflate", "chunk", "buffer", "worker", "socket", "header",
        "body", "file", "stream",
    ];
    let mut out = Vec::with_capacity(n + 16);
    let mut x: u32 = 0x2545_f491;
    let mut i = 0u64;
    while out.len() < n {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        out.extend_from_slice(WORDS[(x % 12) as usize].as_bytes());
        // A line break after about one word in eleven, a number after about one in 97.
        let (line, number) = (x % 11, x % 97);
        out.push(if line == 0 { b'\n' } else { b' ' });
        if number == 0 {
            out.extend_from_slice(format!("{i} ").as_bytes());
        }
        i += 1;
    }
    out.truncate(n);
    out
}

// ---- what is compressed and how it looks -------------------------------------------------

#[test]
fn small_page_is_compressed_chunked_with_a_weak_etag() {
    let s = start("gzip on;");
    let index = common::INDEX.as_bytes();
    let mut c = Client::connect(s.port);
    let a = c.ask(&request("GET", "/index.html", AE)).unwrap();
    assert_eq!(a.status, 200);
    assert_compressed(&a, index);
    assert_eq!(a.header("content-type"), Some("text/html"));
    let etag = a.header("etag").expect("an ETag");
    assert!(
        etag.starts_with("W/\"") && etag.ends_with(&format!("-{:x}\"", index.len())),
        "the ETag of a compressed answer is the file's, weakened: {etag}"
    );
    assert!(a.header("last-modified").is_some(), "{}", a.show());
    assert_eq!(a.header("connection"), Some("keep-alive"));
    // The chunked answer ended where it should: the connection serves the next request.
    let b = c.ask(&request("GET", "/index.html", "")).unwrap();
    assert_plain(&b, index);
    assert!(
        b.header("etag").is_some_and(|e| e.starts_with('"')),
        "{}",
        b.show()
    );
    assert_eq!(b.header("accept-ranges"), Some("bytes"));
}

/// Several MiB through the compressor, read from the file a piece at a time: with sendfile on
/// and off, and through the thread pool with `aio threads`.
#[test]
fn large_files_decompress_to_the_original() {
    let s = start_with(
        "thread_pool gzpool threads=2;",
        "gzip on;\n\
         gzip_types text/plain;\n\
         location /sf_on/ { alias html/big/; sendfile on; }\n\
         location /sf_off/ { alias html/big/; sendfile off; }\n\
         location /aio_on/ { alias html/big/; aio threads=gzpool; sendfile on; }\n\
         location /aio_off/ { alias html/big/; aio threads=gzpool; sendfile off; }\n\
         location /level9/ { alias html/big/; gzip_comp_level 9; }",
    );
    let big = text(5 * 1024 * 1024 + 12_345);
    write(&s, "html/big/big.txt", &big);
    for loc in ["sf_on", "sf_off", "aio_on", "aio_off", "level9"] {
        let mut c = Client::connect(s.port);
        let a = c
            .ask(&request("GET", &format!("/{loc}/big.txt"), AE))
            .unwrap();
        assert_eq!(a.status, 200, "{loc}");
        assert_compressed(&a, &big);
        assert!(
            a.body.len() < big.len() / 2,
            "{loc}: {} compressed bytes for {} of text",
            a.body.len(),
            big.len()
        );
        // The same connection still works after several MiB of chunks.
        let again = c
            .ask(&request("GET", &format!("/{loc}/big.txt"), ""))
            .unwrap();
        assert_plain(&again, &big);
    }
    assert!(!s.error_log().contains("[alert]"), "{}", s.error_log());
}

#[test]
fn http10_client_gets_a_close_delimited_body_with_gzip_http_version_1_0() {
    let s = start(
        "gzip on;\n\
         gzip_vary on;\n\
         location /v10/ { alias html/; gzip_http_version 1.0; }",
    );
    let index = common::INDEX.as_bytes();
    let req = "GET /v10/index.html HTTP/1.0\r\nAccept-Encoding: gzip\r\n\r\n";
    let mut c = Client::connect(s.port);
    let a = c.ask(req).unwrap();
    assert_eq!(a.status, 200);
    assert!(a.gzipped(), "{}", a.show());
    assert_eq!(a.header("content-length"), None, "{}", a.show());
    assert_eq!(
        a.header("transfer-encoding"),
        None,
        "no chunks on 1.0: {}",
        a.show()
    );
    assert_eq!(a.header("connection"), Some("close"), "{}", a.show());
    assert_eq!(a.header("vary"), Some("Accept-Encoding"));
    assert_eq!(gunzip(&a.body), index);

    // Even a keep-alive 1.0 client: without a length the end of the body is the end of the
    // connection.
    let req =
        "GET /v10/index.html HTTP/1.0\r\nConnection: keep-alive\r\nAccept-Encoding: gzip\r\n\r\n";
    let mut c = Client::connect(s.port);
    let a = c.ask(req).unwrap();
    assert_eq!(a.header("connection"), Some("close"), "{}", a.show());
    assert_eq!(gunzip(&a.body), index);
    assert!(c.closed_by_peer());
}

#[test]
fn http10_client_is_not_compressed_with_the_default_gzip_http_version() {
    let s = start("gzip on;\ngzip_vary on;");
    let index = common::INDEX.as_bytes();
    let req = "GET /index.html HTTP/1.0\r\nAccept-Encoding: gzip\r\n\r\n";
    let a = Client::connect(s.port).ask(req).unwrap();
    assert_plain(&a, index);
    assert_eq!(a.header("accept-ranges"), Some("bytes"));
    // nginx sets Vary before it looks at the request (the answer could be compressed for others).
    assert_eq!(a.header("vary"), Some("Accept-Encoding"), "{}", a.show());
    // An explicit `gzip_http_version 1.1` does the same.
    let s = start("gzip on;\ngzip_http_version 1.1;");
    let a = Client::connect(s.port).ask(req).unwrap();
    assert_plain(&a, index);
    // And a 1.1 client is compressed.
    assert_compressed(&ask(s.port, "/index.html", AE), index);
}

#[test]
fn gzip_min_length_counts_the_whole_length() {
    let s = start("gzip on;\ngzip_vary on;\ngzip_min_length 1000;");
    let short = text(999);
    let exact = text(1000);
    write(&s, "html/short.html", &short);
    write(&s, "html/exact.html", &exact);
    let a = ask(s.port, "/short.html", AE);
    assert_plain(&a, &short);
    assert_eq!(
        a.header("vary"),
        None,
        "no Vary under gzip_min_length: {}",
        a.show()
    );
    let a = ask(s.port, "/exact.html", AE);
    assert_compressed(&a, &exact);
    assert_eq!(a.header("vary"), Some("Accept-Encoding"));

    // The default gzip_min_length is 20.
    let s = start("gzip on;");
    write(&s, "html/19.html", &text(19));
    write(&s, "html/20.html", &text(20));
    assert_plain(&ask(s.port, "/19.html", AE), &text(19));
    assert_compressed(&ask(s.port, "/20.html", AE), &text(20));
}

#[test]
fn gzip_types_always_include_text_html() {
    let s = start(
        "gzip on;\n\
         location /css/ { alias html/t/; gzip_types text/css; }\n\
         location /star/ { alias html/t/; gzip_types *; }",
    );
    let body = text(500);
    for f in ["a.html", "a.css", "a.txt", "a.png", "a.json", "noext"] {
        write(&s, &format!("html/t/{f}"), &body);
    }
    // Default gzip_types: text/html only.
    assert_compressed(&ask(s.port, "/t/a.html", AE), &body);
    assert_plain(&ask(s.port, "/t/a.txt", AE), &body);
    assert_plain(&ask(s.port, "/t/a.json", AE), &body);
    assert_plain(&ask(s.port, "/t/a.css", AE), &body);
    // A list: what it names, and text/html still.
    assert_compressed(&ask(s.port, "/css/a.css", AE), &body);
    assert_compressed(&ask(s.port, "/css/a.html", AE), &body);
    assert_plain(&ask(s.port, "/css/a.txt", AE), &body);
    // `*`: every type.
    for f in ["a.png", "a.txt", "noext"] {
        let a = ask(s.port, &format!("/star/{f}"), AE);
        assert_compressed(&a, &body);
    }
    assert_eq!(
        ask(s.port, "/star/noext", AE).header("content-type"),
        Some("application/octet-stream")
    );
}

#[test]
fn only_200_403_and_404_are_compressed() {
    let s = start(
        "gzip on;\n\
         gzip_vary on;\n\
         location = /forbidden { return 403; }\n\
         location = /moved { return 301 /elsewhere; }\n\
         location = /broken { return 500; }\n\
         location = /text { default_type text/html; return 200 \"a body that is long enough to compress\"; }",
    );
    std::fs::create_dir(s.prefix.join("html/dir")).expect("mkdir");

    let a = ask(s.port, "/forbidden", AE);
    assert_eq!(a.status, 403);
    assert!(a.gzipped(), "{}", a.show());
    assert!(String::from_utf8_lossy(&gunzip(&a.body)).contains("<title>403 Forbidden</title>"));
    assert_eq!(a.header("vary"), Some("Accept-Encoding"));

    let a = ask(s.port, "/missing.html", AE);
    assert_eq!(a.status, 404);
    assert!(a.gzipped(), "{}", a.show());
    assert_eq!(a.header("transfer-encoding"), Some("chunked"));
    assert!(String::from_utf8_lossy(&gunzip(&a.body)).contains("<title>404 Not Found</title>"));

    let a = ask(s.port, "/text", AE);
    assert_eq!(a.status, 200);
    assert_compressed(&a, b"a body that is long enough to compress");

    // A 301 page (a directory without its slash, and `return 301`), a 500: as they are, and
    // without Vary (nginx decides on the status before anything else).
    for path in ["/dir", "/moved"] {
        let a = ask(s.port, path, AE);
        assert_eq!(a.status, 301, "{path}");
        assert!(!a.gzipped(), "{path}: {}", a.show());
        assert!(a.header("content-length").is_some(), "{path}: {}", a.show());
        assert!(
            String::from_utf8_lossy(&a.body).contains("301 Moved Permanently"),
            "{path}"
        );
        assert_eq!(a.header("vary"), None, "{path}: {}", a.show());
    }
    let a = ask(s.port, "/broken", AE);
    assert_eq!(a.status, 500);
    assert!(!a.gzipped(), "{}", a.show());
}

/// `Accept-Encoding` as nginx reads it (`ngx_http_gzip_ok`): a `gzip` token at the start or
/// after `,` or ` `, followed by `,`, `;` or the end, and a `q` that is not zero. nginx 1.22.1
/// does not take `x-gzip`, and reads `Q=` as a `q`.
#[test]
fn accept_encoding_variants() {
    let s = start("gzip on;");
    let index = common::INDEX.as_bytes();
    let mut c = Client::connect(s.port);
    let cases: &[(&str, bool)] = &[
        ("gzip", true),
        ("GZIP", true),
        ("deflate, gzip", true),
        ("deflate,gzip", true),
        ("gzip, deflate, br", true),
        ("gzip;q=0.5", true),
        ("gzip;q=0.001", true),
        ("gzip; q=1", true),
        ("gzip;q=0", false),
        ("gzip;q=0.000", false),
        ("gzip;Q=0", false),
        ("deflate", false),
        ("identity", false),
        ("gzipx", false),
        ("xgzip", false),
        ("x-gzip", false),
    ];
    let mut wrong = Vec::new();
    for (ae, want) in cases {
        let a = c
            .ask(&request(
                "GET",
                "/index.html",
                &format!("Accept-Encoding: {ae}\r\n"),
            ))
            .unwrap();
        if a.gzipped() != *want {
            wrong.push(format!(
                "Accept-Encoding: {ae}: compressed {} (want {want})",
                a.gzipped()
            ));
        } else if *want {
            assert_eq!(gunzip(&a.body), index, "{ae}");
        } else {
            assert_eq!(a.body, index, "{ae}");
        }
    }
    assert!(
        wrong.is_empty(),
        "Accept-Encoding read unlike nginx:\n{}",
        wrong.join("\n")
    );
    // No Accept-Encoding at all.
    assert_plain(&c.ask(&request("GET", "/index.html", "")).unwrap(), index);
}

#[test]
fn a_range_request_gets_the_whole_compressed_200() {
    let s = start("gzip on;");
    let body = text(4000);
    write(&s, "html/r.html", &body);
    let a = ask(s.port, "/r.html", &format!("{AE}Range: bytes=0-9\r\n"));
    assert_eq!(a.status, 200, "{}", a.show());
    assert_eq!(a.header("content-range"), None);
    assert_compressed(&a, &body);
    // Without gzip in the request, the range is honoured.
    let a = ask(s.port, "/r.html", "Range: bytes=0-9\r\n");
    assert_eq!(a.status, 206, "{}", a.show());
    assert_eq!(a.body, &body[..10]);
}

#[test]
fn gzip_vary_is_added_even_when_the_client_does_not_accept_gzip() {
    let s = start(
        "gzip on;\n\
         gzip_vary on;\n\
         gzip_min_length 100;\n\
         location /novary/ { alias html/; gzip_vary off; }",
    );
    let body = text(500);
    write(&s, "html/big.html", &body);
    write(&s, "html/small.html", &text(50));
    let a = ask(s.port, "/big.html", AE);
    assert_compressed(&a, &body);
    assert_eq!(a.header("vary"), Some("Accept-Encoding"));
    let a = ask(s.port, "/big.html", "");
    assert_plain(&a, &body);
    assert_eq!(a.header("vary"), Some("Accept-Encoding"), "{}", a.show());
    let a = ask(s.port, "/big.html", "Accept-Encoding: gzip;q=0\r\n");
    assert_plain(&a, &body);
    assert_eq!(a.header("vary"), Some("Accept-Encoding"), "{}", a.show());
    let a = ask(s.port, "/small.html", AE);
    assert_plain(&a, &text(50));
    assert_eq!(
        a.header("vary"),
        None,
        "under gzip_min_length: {}",
        a.show()
    );
    let a = ask(s.port, "/novary/big.html", AE);
    assert_compressed(&a, &body);
    assert_eq!(a.header("vary"), None, "gzip_vary off: {}", a.show());
}

#[test]
fn gzip_disable_by_regex_and_msie6() {
    let s = start(
        "gzip on;\n\
         gzip_vary on;\n\
         location /nocurl/ { alias html/; gzip_disable \"curl\"; }\n\
         location /msie/ { alias html/; gzip_disable msie6; }",
    );
    let index = common::INDEX.as_bytes();
    let ua = |path: &str, ua: &str| ask(s.port, path, &format!("{AE}User-Agent: {ua}\r\n"));
    for (agent, want) in [
        ("curl/8.5.0", false),
        ("CURL/7", false),
        ("Wget/1.21", true),
    ] {
        let a = ua("/nocurl/index.html", agent);
        assert_eq!(a.gzipped(), want, "{agent}: {}", a.show());
        assert_eq!(a.header("vary"), Some("Accept-Encoding"), "{agent}");
    }
    // No User-Agent at all is not disabled.
    assert!(ask(s.port, "/nocurl/index.html", AE).gzipped());
    // msie6: MSIE 4 and 5 always, MSIE 6 without SV1, and not when the agent says Opera.
    let mut wrong = Vec::new();
    for (agent, want) in [
        ("Mozilla/4.0 (compatible; MSIE 6.0; Windows NT 5.1)", false),
        (
            "Mozilla/4.0 (compatible; MSIE 6.0; Windows NT 5.1; SV1)",
            true,
        ),
        (
            "Mozilla/4.0 (compatible; MSIE 5.5; Windows NT 5.1; SV1)",
            false,
        ),
        (
            "Mozilla/4.0 (compatible; MSIE 6.0; Windows NT 5.1) Opera 7.54",
            true,
        ),
        ("Mozilla/4.0 (compatible; MSIE 7.0; Windows NT 6.0)", true),
        ("curl/8.5.0", true),
    ] {
        let a = ua("/msie/index.html", agent);
        if a.gzipped() != want {
            wrong.push(format!("{agent}: compressed {} (want {want})", a.gzipped()));
        } else if want {
            assert_eq!(gunzip(&a.body), index);
        } else {
            assert_eq!(a.body, index);
        }
    }
    assert!(
        wrong.is_empty(),
        "gzip_disable msie6 differs from nginx's:\n{}",
        wrong.join("\n")
    );
}

/// `gzip_proxied` with a `Via` request header, case by case, as nginx's `ngx_http_gzip_ok`
/// decides: `any` compresses; an `Authorization` with `auth` compresses; then an `Expires`
/// decides alone (compress only with `expired` and a date already past); then a
/// `Cache-Control` decides alone (compress only if it has a flagged `no-cache`, `no-store` or
/// `private`); then `no_last_modified` / `no_etag` refuse a Last-Modified / ETag header; and
/// if nothing refused, the answer is compressed. (A static file's Last-Modified is not a
/// header in nginx at that point, so `no_last_modified` does not refuse it.)
#[test]
fn gzip_proxied_cases_with_a_via_header() {
    let s = start(
        "gzip on;\n\
         gzip_min_length 1;\n\
         location /off/ { alias html/; }\n\
         location /off2/ { alias html/; gzip_proxied off; }\n\
         location /any/ { alias html/; gzip_proxied any; }\n\
         location /exp_past/ { alias html/; gzip_proxied expired; expires -1; }\n\
         location /exp_future/ { alias html/; gzip_proxied expired; expires 1h; }\n\
         location /exp_none/ { alias html/; gzip_proxied expired; }\n\
         location /nocache/ { alias html/; gzip_proxied no-cache; add_header Cache-Control no-cache; }\n\
         location /nocache_list/ { alias html/; gzip_proxied no-cache; add_header Cache-Control \"public, no-cache\"; }\n\
         location /nocache_other/ { alias html/; gzip_proxied no-cache; add_header Cache-Control max-age=10; }\n\
         location /nocache_expires/ { alias html/; gzip_proxied no-cache; expires -1; }\n\
         location /nostore/ { alias html/; gzip_proxied no-store; add_header Cache-Control no-store; }\n\
         location /nostore_other/ { alias html/; gzip_proxied no-store; add_header Cache-Control no-cache; }\n\
         location /private/ { alias html/; gzip_proxied private; add_header Cache-Control private; }\n\
         location /private_other/ { alias html/; gzip_proxied private; add_header Cache-Control public; }\n\
         location = /nolm_return { gzip_proxied no_last_modified; default_type text/html; return 200 \"text from return\"; }\n\
         location /nolm_file/ { alias html/; gzip_proxied no_last_modified; }\n\
         location /noetag_off/ { alias html/; gzip_proxied no_etag; etag off; }\n\
         location /noetag_on/ { alias html/; gzip_proxied no_etag; }\n\
         location /auth/ { alias html/; gzip_proxied auth; add_header Cache-Control max-age=10; }",
    );
    let via = "Via: 1.1 proxy\r\n";
    let cases: &[(&str, &str, bool)] = &[
        ("/off/index.html", "", false),
        ("/off2/index.html", "", false),
        ("/any/index.html", "", true),
        ("/exp_past/index.html", "", true),
        ("/exp_future/index.html", "", false),
        ("/exp_none/index.html", "", true),
        ("/nocache/index.html", "", true),
        ("/nocache_list/index.html", "", true),
        ("/nocache_other/index.html", "", false),
        ("/nocache_expires/index.html", "", false),
        ("/nostore/index.html", "", true),
        ("/nostore_other/index.html", "", false),
        ("/private/index.html", "", true),
        ("/private_other/index.html", "", false),
        ("/nolm_return", "", true),
        ("/nolm_file/index.html", "", true),
        ("/noetag_off/index.html", "", true),
        ("/noetag_on/index.html", "", false),
        ("/auth/index.html", "", false),
        ("/auth/index.html", "Authorization: Basic dTpw\r\n", true),
    ];
    let mut wrong = Vec::new();
    for (path, extra, want) in cases {
        let a = ask(s.port, path, &format!("{AE}{via}{extra}"));
        assert_eq!(a.status, 200, "{path}: {}", a.show());
        if a.gzipped() != *want {
            wrong.push(format!(
                "{path} {extra:?}: compressed {} (want {want})",
                a.gzipped()
            ));
        } else if *want {
            assert!(!gunzip(&a.body).is_empty());
        }
        // Without Via the proxy rules do not apply.
        let direct = ask(s.port, path, &format!("{AE}{extra}"));
        assert!(direct.gzipped(), "{path} without Via: {}", direct.show());
    }
    assert!(
        wrong.is_empty(),
        "gzip_proxied decisions differ from nginx's:\n{}",
        wrong.join("\n")
    );
}

/// nginx's gzip filter runs on the head of a HEAD answer too (the "no body" flag is set later,
/// by the header filter): nginx 1.22.1 answers HEAD with `Content-Encoding: gzip`, a weak
/// ETag, and neither Content-Length nor Transfer-Encoding; and of course no body.
#[test]
fn head_gets_the_compressed_answers_head_and_no_body() {
    let s = start("gzip on;\ngzip_vary on;");
    let index = common::INDEX.as_bytes();
    let mut c = Client::connect(s.port);
    c.send(request("HEAD", "/index.html", AE).as_bytes())
        .unwrap();
    let a = c.read_head().unwrap();
    assert_eq!(a.status, 200);
    // The next answer on the connection starts right after this head: no body was sent.
    let b = c.ask(&request("GET", "/index.html", "")).unwrap();
    assert_plain(&b, index);
    assert_eq!(a.header("vary"), Some("Accept-Encoding"), "{}", a.show());
    assert!(
        a.gzipped(),
        "nginx's HEAD answer says Content-Encoding: gzip: {}",
        a.show()
    );
    assert_eq!(a.header("content-length"), None, "{}", a.show());
    assert_eq!(a.header("transfer-encoding"), None, "{}", a.show());
    assert!(
        a.header("etag").is_some_and(|e| e.starts_with("W/")),
        "{}",
        a.show()
    );
}

#[test]
fn gzip_static_serves_the_gz_file_as_it_is() {
    let s = start(
        "gzip_vary on;\n\
         location /st/ { gzip_static on; }\n\
         location /always/ { alias html/st/; gzip_static always; }\n\
         location /both/ { alias html/st/; gzip_static on; gzip on; gzip_types text/plain; }",
    );
    let plain = text(3000);
    write(&s, "html/st/a.txt", &plain);
    let gz = filter(&["gzip", "-9", "-n", "-c"], &plain);
    write(&s, "html/st/a.txt.gz", &gz);
    // Only a plain file here.
    write(&s, "html/st/only.txt", &plain);

    let a = ask(s.port, "/st/a.txt", AE);
    assert_eq!(a.status, 200);
    assert!(a.gzipped(), "{}", a.show());
    assert_eq!(
        a.header("content-length"),
        Some(gz.len().to_string().as_str())
    );
    assert_eq!(a.header("content-type"), Some("text/plain"));
    assert!(a.body == gz, "the .gz file byte for byte");
    assert_eq!(a.header("vary"), Some("Accept-Encoding"));
    let etag = a.header("etag").expect("an ETag");
    assert!(
        etag.starts_with('"') && etag.ends_with(&format!("-{:x}\"", gz.len())),
        "the .gz file's own strong ETag: {etag}"
    );
    let accept_ranges = a.header("accept-ranges").map(str::to_string);

    // A client without gzip gets the plain file, with Vary (the .gz exists).
    let a = ask(s.port, "/st/a.txt", "");
    assert_plain(&a, &plain);
    let plain_vary = a.header("vary").map(str::to_string);
    let a = ask(s.port, "/st/a.txt", "Accept-Encoding: gzip;q=0\r\n");
    assert_plain(&a, &plain);
    // No .gz: the plain file (the gzip filter is off here).
    assert_plain(&ask(s.port, "/st/only.txt", AE), &plain);

    // always: the .gz whatever the client says.
    for extra in ["", AE, "Accept-Encoding: identity\r\n"] {
        let a = ask(s.port, "/always/a.txt", extra);
        assert!(a.gzipped(), "{extra:?}: {}", a.show());
        assert!(a.body == gz, "{extra:?}");
    }
    assert_plain(&ask(s.port, "/always/only.txt", ""), &plain);

    // gzip_static with the gzip filter on: the .gz is not compressed again, the plain file
    // without a .gz is.
    let a = ask(s.port, "/both/a.txt", AE);
    assert!(a.body == gz, "{}", a.show());
    assert_compressed(&ask(s.port, "/both/only.txt", AE), &plain);

    // Where nginx 1.22.1 differs from a plain file answer: the plain file gets Vary because
    // a .gz exists, and a gzip_static answer takes no ranges.
    let mut wrong = Vec::new();
    if plain_vary.as_deref() != Some("Accept-Encoding") {
        wrong.push(format!(
            "plain file beside a .gz: Vary {plain_vary:?}, want Accept-Encoding"
        ));
    }
    if accept_ranges.is_some() {
        wrong.push(format!(
            "gzip_static answer: Accept-Ranges {accept_ranges:?}, want none"
        ));
    }
    let r = ask(s.port, "/st/a.txt", &format!("{AE}Range: bytes=0-9\r\n"));
    if r.status != 200 || r.body != gz {
        wrong.push(format!(
            "Range on a gzip_static answer: {}, want the whole .gz in a 200",
            r.show()
        ));
    }
    assert!(
        wrong.is_empty(),
        "gzip_static differs from nginx's:\n{}",
        wrong.join("\n")
    );
}

/// Seed 004's gzip lines, as written, at http level, on a JSON file.
#[test]
fn seed004_gzip_settings_on_a_json_file() {
    let port = free_port();
    let conf = format!(
        "daemon off;\n\
         error_log logs/error.log notice;\n\
         events {{ worker_connections 256; }}\n\
         http {{\n\
         include mime.types;\n\
         default_type application/octet-stream;\n\
         access_log off;\n\
         gzip on;\n\
         gzip_vary on;\n\
         gzip_proxied any;\n\
         gzip_comp_level 2;\n\
         gzip_buffers 16 8k;\n\
         gzip_http_version 1.1;\n\
         gzip_min_length 256;\n\
         gzip_types text/plain text/css application/json application/javascript text/xml application/xml application/xml+rss text/javascript;\n\
         server {{\n\
         listen 127.0.0.1:{port};\n\
         root html;\n\
         }}\n\
         }}\n"
    );
    let s = Shoal::start(&conf, port);
    let mut json = Vec::new();
    json.extend_from_slice(b"{\"items\":[");
    for i in 0..2000 {
        json.extend_from_slice(
            format!("{{\"id\":{i},\"name\":\"item {i}\",\"ok\":true}},").as_bytes(),
        );
    }
    json.extend_from_slice(b"{}]}\n");
    write(&s, "html/api.json", &json);
    write(&s, "html/tiny.json", b"{\"ok\":true}\n");

    let a = ask(s.port, "/api.json", AE);
    assert_eq!(a.header("content-type"), Some("application/json"));
    assert_compressed(&a, &json);
    assert_eq!(a.header("vary"), Some("Accept-Encoding"));
    // gzip_proxied any: through a proxy too.
    assert_compressed(
        &ask(s.port, "/api.json", &format!("{AE}Via: 1.1 lb\r\n")),
        &json,
    );
    // Under 256 bytes: as it is, and no Vary.
    let a = ask(s.port, "/tiny.json", AE);
    assert_plain(&a, b"{\"ok\":true}\n");
    assert_eq!(a.header("vary"), None);
    // Not a listed type: application/octet-stream.
    write(&s, "html/blob.bin", &json);
    assert_plain(&ask(s.port, "/blob.bin", AE), &json);
}
