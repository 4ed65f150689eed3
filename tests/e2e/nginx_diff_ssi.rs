//! The SSI and addition modules against real nginx: the same configurations and files, the
//! same answers (status, headers, and bodies byte for byte once unchunked). Includes of
//! files, of proxied locations and of missing files, nested and relative includes, `stub`
//! and `set`, `if`/`elif`/`else` with regex captures, `echo` and its encodings, `config`,
//! malformed commands and nginx's error text, `ssi_silent_errors`, `ssi_value_length`,
//! `ssi_types`, `ssi_last_modified`; `add_before_body`/`add_after_body`; and `-t`.

use std::fs;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::time::Duration;

use crate::diff::{Conf, Pair};

/// The pages every test serves.
fn fixtures(html: &Path) {
    let w = |name: &str, text: &str| {
        let path = html.join(name);
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(path, text).unwrap();
    };
    w("s/a.html", "A<!--# include virtual=\"/s/b.html\" -->Z\n");
    w("s/b.html", "B<!--#echo var=\"uri\" -->b");
    w(
        "s/miss.html",
        "1<!--#include virtual=\"/s/missing.html\" -->2<!--#include file=\"gone.html\"-->3",
    );
    w(
        "s/d/rel.html",
        "1<!--#include file=\"c.html\" -->2<!--#include virtual=\"../b.html\"-->3\
         <!--#include virtual=\"c.html?x=1&y=$uri\"-->",
    );
    w("s/d/c.html", "DC<!--#echo var=\"args\"-->");
    w(
        "s/echo.html",
        "x<!--#echo var=\"nothere\" -->|<!--#echo var=\"args\" -->|\
         <!--#echo var=\"arg_k\" default=\"dflt\" -->|\
         <!--#set var=\"q\" value=\"<a&b \\\"c\\\" é>\" --><!--#echo var=\"q\"-->|\
         <!--#echo var=\"q\" encoding=\"none\"-->|<!--#echo var=\"q\" encoding=\"url\"-->|\
         <!--#echo var=\"q\"-->|<!--#echo var=\"q\" encoding=\"entity\"-->|\
         <!--#echo var=\"q\" encoding=\"bad\"-->|\
         <!--#set var=\"v\" value=\"${uri}x$uri-\\$x a\\b\" --><!--#echo var=\"v\"-->|\
         <!--#set var=\"w\" value=\"x$\" --><!--#set var=\"w\" value=\"${x\" -->",
    );
    w(
        "s/err.html",
        "x<!--#bogus -->y<!--#echo var=x -->z<!--#echo -->w<!--#echo var=\"a\" zz=\"1\" -->\
         v<!--#echo var=\"a\" var=\"b\" -->u<!--#config errmsg=\"E!\" --><!--#bogus -->t\
         <!--#echo var=\"a\" -x-->s<!--#e\"-->r<!--#  -->q<!-- plain -->p<!--#echo var=\"uri\"",
    );
    w(
        "s/if.html",
        "<!--#set var=\"v\" value=\"abc123\" -->\
         <!--#if expr=\"$v = /b(c)([0-9]+)/\" -->yes $1 <!--#echo var=\"1\" -->-\
         <!--#echo var=\"2\"--><!--#elif expr=\"$v\" -->elif<!--#else -->no<!--#endif -->|\
         <!--#if expr=\"$x\" -->1<!--#else -->2<!--#endif -->\
         <!--#set var=\"x\" value=\"a b\"-->\
         <!--#if expr=\"$x != a b\" -->3<!--#else -->4<!--#endif -->\
         <!--#if expr=\"${x}c = a bc\" -->5<!--#endif -->\
         <!--#if expr=\"$x = /^A/\" -->6<!--#endif -->\
         <!--#if expr=\"$x ~ a\" -->7<!--#endif -->8\
         <!--#if expr=\"\" -->10<!--#endif -->\
         <!--#if expr=\"$x=/(?<nm>b)/\" --><!--#echo var=\"nm\" -->11<!--#endif -->\
         <!--#if expr=\"$x = /a b/\" -->12<!--#endif -->|\
         <!--#if expr=\"0\" -->T<!--#elif expr=\"1\" -->E1<!--#else -->E2<!--#endif -->|\
         <!--#if expr=\"\" -->T<!--#elif expr=\"\" -->E1<!--#elif expr=\"$x\" -->E2\
         <!--#else -->E3<!--#endif -->|\
         <!--#if expr=\"1\" --><!--#if expr=\"\" -->A<!--#elif expr=\"1\" -->B<!--#else -->C\
         <!--#endif --><!--#else -->D<!--#endif --><!--#endif -->E<!--#else -->F",
    );
    w(
        "s/blk.html",
        "<!--#block name=\"one\" -->STUB<!--#echo var=\"uri\"--><!--#endblock -->\
         a<!--#include virtual=\"/s/nothing\" stub=\"one\" -->\
         b<!--#include virtual=\"/s/empty.html\" stub=\"one\" -->\
         c<!--#include virtual=\"/p/s/b.html\" set=\"got\" -->d<!--#echo var=\"got\" -->\
         e<!--#include virtual=\"/p/s/a.html\" -->f<!--#include virtual=\"/p/s/missing\" -->\
         g<!--#include virtual=\"/s/b.html\" stub=\"two\" -->h",
    );
    w("s/empty.html", "");
    w("s/cut.html", "a<!-");
    w("s/self.html", "L<!--#include virtual=\"/s/self.html\" -->R");
    w(
        "s/conf.html",
        "<!--#config timefmt=\"%Y\" --><!--#echo var=\"date_gmt\"-->|\
         <!--#config timefmt=\"[%A]\" --><!--#if expr=\"$date_local = /^\\[[A-Z][a-z]+day\\]/\" -->day\
         <!--#endif --><!--#if expr=\"$date_gmt = /day]$/\" -->x<!--#endif -->",
    );
    w("s/t.txt", "plain <!--#echo var=\"uri\" -->");
    w(
        "s/long.html",
        "<!--#set var=\"a\" value=\"12345\" -->1<!--#set var=\"b\" value=\"123456\" -->2",
    );
    w("s/nest/n1.html", "[1<!--#include virtual=\"n2.html\" -->1]");
    w(
        "s/nest/n2.html",
        "[2<!--#include virtual=\"/s/nest/n3.html\" -->2]",
    );
    w(
        "s/nest/n3.html",
        "[3<!--#echo var=\"uri\" --><!--#echo var=\"shared\" -->3]",
    );
    w(
        "s/nest/top.html",
        "<!--#set var=\"shared\" value=\"S\" --><!--#include virtual=\"n1.html\" -->",
    );
    // Commands across the ends of nginx's pieces of a file, includes among them.
    let big: String = (0..4000)
        .map(|i| match i % 400 {
            0 => format!("{i} <!--#include virtual=\"/s/b.html\" -->\n"),
            7 => format!("{i} <!--#if expr=\"$uri = /big/\" -->big<!--#else -->no<!--#endif -->\n"),
            _ => format!("{i} <!--#echo var=\"uri\" --> <!-- not a command -->\n"),
        })
        .collect();
    w("s/big.html", &big);
    w("add/i.html", "<p>main</p>\n");
    w("add/i.txt", "main text\n");
    w("before.txt", "before\n");
    w("after.html", "after <!--#echo var=\"uri\" -->\n");
}

const LOCATIONS: &str = "\
    location /s/ { ssi on; }\n\
    location /silent/ { alias {HTML}/s/; ssi on; ssi_silent_errors on; }\n\
    location /types/ { alias {HTML}/s/; ssi on; ssi_types text/plain; }\n\
    location /lm/ { alias {HTML}/s/; ssi on; ssi_last_modified on; }\n\
    location /short/ { alias {HTML}/s/; ssi on; ssi_value_length 5; }\n\
    location /p/ { proxy_pass http://127.0.0.1:{PORT}/; }\n\
    location /add/ { add_before_body /before.txt; add_after_body /after.html; }\n\
    location /addtxt/ { alias {HTML}/add/; add_after_body /before.txt; \
        addition_types text/plain; }\n\
    location /addssi/ { alias {HTML}/add/; ssi on; add_after_body /after.html; }\n\
    location = /after.html { ssi on; }\n\
    location /add2/ { alias {HTML}/add/; add_before_body /add2/i.html; }\n\
    location /ret/ { default_type text/html; ssi on; \
        return 200 \"r<!--#echo var=\\\"uri\\\"-->\"; }";

fn pair() -> Pair {
    let p = Pair::with(Conf {
        http: "server_tokens off;",
        server: LOCATIONS,
        ..Default::default()
    });
    fixtures(&p.html());
    p
}

/// Both servers' answers to a GET, unchunked (nginx's chunks follow its buffers), the
/// server's name in its pages made one.
fn get(p: &Pair, path: &str) -> String {
    let req = format!("GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n");
    both(p, &req)
}

fn both(p: &Pair, req: &str) -> String {
    let (n, s) = p.ports();
    let (n, s) = (answer(n, req), answer(s, req));
    let got = (n.is_some(), s.is_some());
    let (Some(n), Some(s)) = (n, s) else {
        panic!(
            "no answer to {req}: nginx {}, shoal {}\n{}\n{}",
            got.0,
            got.1,
            p.nginx_log(),
            p.shoal_log()
        );
    };
    assert_eq!(n, s, "{req}");
    n
}

/// Status, headers in their order (not Date, Server), and the body unchunked, as text.
fn answer(port: u16, req: &str) -> Option<String> {
    // (Not half-closed: nginx takes that for a client gone while a proxied include waits.)
    let mut c = TcpStream::connect(("127.0.0.1", port)).expect("connecting");
    c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    c.write_all(req.as_bytes()).unwrap();
    let mut raw = Vec::new();
    c.read_to_end(&mut raw).unwrap();
    let end = raw.windows(4).position(|w| w == b"\r\n\r\n")?;
    let head = String::from_utf8_lossy(&raw[..end]).into_owned();
    let mut lines = head.split("\r\n");
    let mut out = lines.next().unwrap_or_default().to_string();
    let headers: Vec<&str> = lines
        .filter(|l| !l.starts_with("Date:") && !l.starts_with("Server:"))
        .collect();
    let mut body = &raw[end + 4..];
    let mut plain = Vec::new();
    if headers.contains(&"Transfer-Encoding: chunked") {
        loop {
            let eol = body.windows(2).position(|w| w == b"\r\n").expect("a size");
            let n = usize::from_str_radix(std::str::from_utf8(&body[..eol]).unwrap(), 16).unwrap();
            if n == 0 {
                break;
            }
            plain.extend_from_slice(&body[eol + 2..eol + 2 + n]);
            body = &body[eol + 4 + n..];
        }
        body = &plain;
    }
    for h in headers {
        out.push('\n');
        out.push_str(h);
    }
    out.push_str("\n\n");
    out.push_str(&String::from_utf8_lossy(body));
    Some(
        out.replace("<center>nginx</center>", "<center>SERVER</center>")
            .replace("<center>shoal</center>", "<center>SERVER</center>"),
    )
}

#[test]
fn includes_as_nginx_makes_them() {
    let p = pair();
    let r = get(&p, "/s/a.html");
    assert!(r.ends_with("AB/s/b.htmlbZ\n"), "{r}");
    assert!(r.contains("Transfer-Encoding: chunked"), "{r}");
    let r = get(&p, "/s/miss.html");
    assert!(r.contains("1<html>") && r.contains("404 Not Found"), "{r}");
    let r = get(&p, "/s/d/rel.html");
    assert!(r.contains("DCx=1&amp;y=/s/d/rel.html"), "{r}");
    let r = get(&p, "/s/blk.html");
    assert!(r.contains("aSTUB/s/nothingb"), "{r}");
    assert!(r.contains("bSTUB<!--#echo var=\"uri\" -->c"), "{r}");
    assert!(r.contains("dB/s/b.htmlbe"), "{r}");
    let r = get(&p, "/s/nest/top.html");
    assert!(r.ends_with("[1[2[3/s/nest/n3.htmlS3]2]1]"), "{r}");
    get(&p, "/s/empty.html");
    let r = get(&p, "/s/cut.html");
    assert!(r.ends_with("\n\na"), "{r}");
    get(&p, "/s/missing.html");
    let r = get(&p, "/s/self.html");
    assert!(r.contains(&format!("{}[an error", "L".repeat(52))), "{r}");
    get(&p, "/ret/x");
}

#[test]
fn commands_and_their_errors() {
    let p = pair();
    let r = get(&p, "/s/echo.html?k=v");
    assert!(
        r.contains("|%3Ca&b%20%22c%22%20%C3%A9%3E|%3Ca&b"),
        "the encoding stays: {r}"
    );
    get(&p, "/s/echo.html");
    let r = get(&p, "/s/err.html");
    assert!(
        r.contains("x[an error occurred while processing the directive]y"),
        "{r}"
    );
    assert!(r.contains("E!t"), "{r}");
    let r = get(&p, "/silent/err.html");
    assert!(r.contains("xyzwvut"), "{r}");
    let r = get(&p, "/s/if.html");
    assert!(r.contains("yes $1 c-123|"), "{r}");
    get(&p, "/silent/if.html");
    let r = get(&p, "/s/conf.html");
    assert!(
        r.ends_with(
            "|day[an error occurred while processing the directive]x\
             [an error occurred while processing the directive]"
        ),
        "{r}"
    );
    let r = get(&p, "/short/long.html");
    assert!(
        r.ends_with("1[an error occurred while processing the directive]2"),
        "{r}"
    );
}

#[test]
fn types_validators_and_ranges() {
    let p = pair();
    let r = get(&p, "/s/t.txt");
    assert!(r.contains("plain <!--#echo"), "{r}");
    let r = get(&p, "/types/t.txt");
    assert!(r.ends_with("plain /types/t.txt"), "{r}");
    let r = get(&p, "/s/b.html");
    assert!(!r.contains("ETag") && !r.contains("Last-Modified"), "{r}");
    let r = get(&p, "/lm/b.html");
    assert!(
        r.contains("ETag: W/\"") && r.contains("Last-Modified"),
        "{r}"
    );
    let a = both(
        &p,
        "GET /s/b.html HTTP/1.1\r\nHost: x\r\nRange: bytes=0-1\r\nConnection: close\r\n\r\n",
    );
    assert!(a.starts_with("HTTP/1.1 200"), "{a}");
    p.check(b"HEAD /s/a.html HTTP/1.1\r\nHost: x\r\n\r\n");
}

#[test]
fn addition_puts_bodies_around_the_answer() {
    let p = pair();
    let r = get(&p, "/add/i.html");
    assert!(
        r.ends_with("before\n<p>main</p>\nafter /after.html\n"),
        "{r}"
    );
    assert!(
        r.contains("ETag: W/") && !r.contains("Content-Length"),
        "{r}"
    );
    let r = get(&p, "/add/i.txt");
    assert!(
        r.ends_with("main text\n") && r.contains("Content-Length"),
        "{r}"
    );
    let r = get(&p, "/addtxt/i.txt");
    assert!(r.ends_with("main text\nbefore\n"), "{r}");
    get(&p, "/addssi/i.html");
    get(&p, "/add/missing.html");
    let r = get(&p, "/add2/i.html");
    assert!(r.ends_with("\n\n<p>main</p>\n<p>main</p>\n"), "{r}");
}

#[test]
fn long_bodies_gzip_and_http_1_0() {
    let p = Pair::with(Conf {
        http: "server_tokens off;",
        server: &format!(
            "{LOCATIONS}\nlocation /gz/ {{ alias {{HTML}}/s/; ssi on; gzip on; \
             gzip_min_length 1; }}"
        ),
        ..Default::default()
    });
    fixtures(&p.html());
    let r = get(&p, "/s/big.html");
    assert!(
        r.contains("3999 /s/big.html <!-- not a command -->\n"),
        "{r}"
    );
    assert!(
        r.contains("3607 big\n") && r.contains("3600 B/s/b.htmlb\n"),
        "{r}"
    );
    let (n, s) = p.ports();
    for path in ["/gz/big.html", "/gz/a.html"] {
        let req = format!("GET {path} HTTP/1.1\r\nHost: x\r\nAccept-Encoding: gzip\r\n\r\n");
        let a =
            crate::nginx_diff_charset::decoded(&crate::nginx_diff_charset::raw(n, req.as_bytes()));
        let b =
            crate::nginx_diff_charset::decoded(&crate::nginx_diff_charset::raw(s, req.as_bytes()));
        assert_eq!(a, b, "{path}");
        assert!(a.contains("Content-Encoding: gzip"), "{a}");
    }
    let r = both(&p, "GET /s/a.html HTTP/1.0\r\n\r\n");
    assert!(
        r.ends_with("AB/s/b.htmlbZ\n") && !r.contains("chunked"),
        "{r}"
    );
}

#[test]
fn http2_answers_are_nginx_s() {
    let p = Pair::with(Conf {
        http: "server_tokens off;",
        server: LOCATIONS,
        listen: " http2",
        ..Default::default()
    });
    fixtures(&p.html());
    // (Not the proxied includes: nginx 1.22's `http2` port speaks no HTTP/1 to its proxy.)
    for path in [
        "/s/a.html",
        "/s/nest/top.html",
        "/s/miss.html",
        "/add/i.html",
        "/s/big.html",
    ] {
        crate::nginx_diff_h2::check(&p, false, path, &[]);
    }
}

#[test]
fn directives_are_checked_as_nginx_checks_them() {
    for (conf, ok) in [
        (
            "ssi on; ssi_types text/plain text/css; ssi_silent_errors on;",
            true,
        ),
        (
            "ssi_value_length 1k; ssi_min_file_chunk 2k; ssi_last_modified on;",
            true,
        ),
        (
            "ssi_ignore_recycled_buffers on; add_before_body /a; add_after_body /b;",
            true,
        ),
        (
            "addition_types *; location / { if ($uri) { ssi on; } }",
            true,
        ),
        ("ssi maybe;", false),
        ("ssi on; ssi off;", false),
        ("ssi_value_length x;", false),
        ("add_before_body;", false),
        ("add_before_body /a; add_before_body /b;", false),
    ] {
        let (n, s) = crate::diff::both_test("", conf);
        assert_eq!(n, s, "{conf}");
        assert_eq!(n.starts_with("ok"), ok, "{conf}: {n}");
    }
}

/// What the sub filter held at the end of a body goes before `add_after_body`'s (nginx ends
/// the filters before its postpone point first: `last_in_chain`), unreplaced.
#[test]
fn after_body_follows_what_the_sub_filter_held() {
    let p = Pair::with(Conf {
        http: "server_tokens off;",
        server: "location /held/ { alias {HTML}/held/; add_after_body /held/after.txt; \
                 addition_types text/plain; sub_filter abcd [X]; sub_filter_types text/plain; }",
        ..Default::default()
    });
    let dir = p.html().join("held");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("m.txt"), "main text ab").unwrap();
    std::fs::write(dir.join("after.txt"), "cd after").unwrap();
    let page = get(&p, "/held/m.txt");
    assert!(page.ends_with("main text abcd after"), "{page}");
}
