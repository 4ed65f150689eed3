//! The charset module against real nginx: both read the maps shoal ships (`conf/koi-win`,
//! `koi-utf`, `win-utf`, copied beside mime.types for both) and Debian's own (by their
//! /etc/nginx path), recode the same files and upstream answers, and must send the same bytes:
//! bodies are compared byte for byte (`Pair::check_bytes`), framing included. Also `-t`: the
//! same configurations are refused with nginx's words.

use std::fs;
use std::io::{Read, Write};
use std::net::{Shutdown, TcpStream};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use crate::common::upstream::{Answer, Upstream};
use crate::diff::{Conf, Pair};

const MAPS: &str = "include koi-win;\ninclude koi-utf;\ninclude win-utf;";

/// Every byte, then text with every kind of UTF-8 nginx reads: Cyrillic, characters the maps
/// lack (BMP and beyond), and broken sequences (a lead without its continuation, a stray
/// continuation, overlong forms, past U+10FFFF, a surrogate, a cut sequence at the end).
fn fixtures(html: &Path) {
    let dir = html.join("cs");
    fs::create_dir_all(&dir).unwrap();
    let all: Vec<u8> = (0..=255u8).chain(b"\n".iter().copied()).collect();
    fs::write(dir.join("all.txt"), &all).unwrap();
    fs::write(dir.join("all.html"), &all).unwrap();
    fs::write(dir.join("all.json"), &all).unwrap();
    fs::write(dir.join("all.png"), &all).unwrap();
    let mut utf = "привет, Ёж! € № ©°·— ☃ 😀 Ā\n".as_bytes().to_vec();
    utf.extend_from_slice(
        b"bad \xff\xfe x \xe2\x82 y \xc0\xaf z \x80 \xf7\xbf\xbf\xbf \xf4\x90\x80\x80 \xed\xa0\x80 \
          \xf8\x88\x80\x80\x80 \xd0\n",
    );
    utf.extend_from_slice(b"end \xe2\x82");
    fs::write(dir.join("utf.txt"), &utf).unwrap();
    fs::write(dir.join("utf.html"), &utf).unwrap();
    // Longer than nginx's 32k buffers, valid UTF-8 throughout: characters cross the pieces.
    let big: String = (0..6000).map(|i| format!("{i} строка ёЁ€ ☃\n")).collect();
    fs::write(dir.join("big-utf.txt"), big.as_bytes()).unwrap();
    let big8: Vec<u8> = (0..120_000u32).map(|i| (i % 251) as u8).collect();
    fs::write(dir.join("big8.txt"), &big8).unwrap();
}

/// A location per conversion, all over the same directory.
const LOCATIONS: &str = "\
    location /kw/ { alias {HTML}/cs/; charset windows-1251; source_charset koi8-r; }\n\
    location /wk/ { alias {HTML}/cs/; charset koi8-r; source_charset windows-1251; }\n\
    location /ku/ { alias {HTML}/cs/; charset utf-8; source_charset koi8-r; }\n\
    location /wu/ { alias {HTML}/cs/; charset utf-8; source_charset windows-1251; }\n\
    location /uk/ { alias {HTML}/cs/; charset koi8-r; source_charset utf-8; }\n\
    location /uw/ { alias {HTML}/cs/; charset windows-1251; source_charset utf-8; }\n\
    location /same/ { alias {HTML}/cs/; charset KOI8-R; source_charset koi8-r; }\n\
    location /plain/ { alias {HTML}/cs/; charset koi8-r; }\n\
    location /off/ { alias {HTML}/cs/; charset off; source_charset koi8-r; }\n\
    location /types/ { alias {HTML}/cs/; charset utf-8; source_charset koi8-r; \
        charset_types application/json; }\n\
    location /any/ { alias {HTML}/cs/; charset windows-1251; source_charset koi8-r; \
        charset_types *; }\n\
    location /err/ { alias {HTML}/cs/; charset utf-8; source_charset koi8-r; \
        error_page 404 /cs/all.txt; }";

fn pair(http: &str) -> Pair {
    // `server_tokens off`: "nginx" and "shoal" are as long, so the chunk sizes of recoded error
    // pages compare as they are.
    let http = format!("{MAPS}\nserver_tokens off;\n{http}");
    let p = Pair::with(Conf {
        http: &http,
        server: LOCATIONS,
        ..Default::default()
    });
    fixtures(&p.html());
    p
}

fn get(p: &Pair, path: &str, headers: &str) -> String {
    p.check_bytes(format!("GET {path} HTTP/1.1\r\nHost: localhost\r\n{headers}\r\n").as_bytes())
}

#[test]
fn static_files_are_recoded_as_nginx_does() {
    let p = pair("");
    for loc in [
        "kw", "wk", "ku", "wu", "uk", "uw", "same", "plain", "off", "types", "any",
    ] {
        for file in ["all.txt", "all.html", "all.json", "all.png", "utf.txt"] {
            get(&p, &format!("/{loc}/{file}"), "");
        }
    }
    // The recoded text as nginx sends it, with the maps shoal ships.
    let r = get(&p, "/uk/utf.txt", "");
    assert!(r.contains("text/plain; charset=koi8-r"), "{r}");
    assert!(r.contains("&#9731;") && r.contains("&#128512;"), "{r}");
}

#[test]
fn lengths_ranges_conditionals_and_heads() {
    let p = pair("");
    for loc in ["kw", "ku", "uk", "same"] {
        let file = format!("/{loc}/all.txt");
        get(&p, &file, "Range: bytes=190-200\r\n");
        get(&p, &file, "Range: bytes=0-3,190-200,-5\r\n");
        get(&p, &file, "Range: bytes=900-\r\n");
        get(&p, &file, "If-None-Match: *\r\n");
        get(&p, &file, "If-Match: \"nope\"\r\n");
        p.check_bytes(format!("HEAD {file} HTTP/1.1\r\nHost: localhost\r\n\r\n").as_bytes());
        p.check_bytes(format!("GET {file} HTTP/1.0\r\n\r\n").as_bytes());
        // A HEAD without a length keeps the connection (nginx's chunked filter skips it).
        p.check_open_bytes(format!("HEAD {file} HTTP/1.1\r\nHost: localhost\r\n\r\n").as_bytes());
    }
    // nginx's own pages take the charset too; an error page's file is recoded.
    get(&p, "/ku/missing.txt", "");
    get(&p, "/err/missing.txt", "");
}

#[test]
fn bodies_longer_than_a_buffer() {
    let p = pair("");
    for path in [
        "/uk/big-utf.txt",
        "/uw/big-utf.txt",
        "/ku/big8.txt",
        "/kw/big8.txt",
    ] {
        get(&p, path, "");
        p.check_bytes(format!("GET {path} HTTP/1.0\r\n\r\n").as_bytes());
    }
    get(&p, "/kw/big8.txt", "Range: bytes=40000-100000\r\n");
}

#[test]
fn charsets_from_variables() {
    let p = pair(
        "map $arg_c $cs { default $arg_c; }\nmap $arg_s $src { default $arg_s; }\n\
         server {\n listen 127.0.0.1:{PORT}; server_name vars;\n \
         location /v/ { alias {HTML}/cs/; charset $cs; source_charset $src; }\n}",
    );
    for q in [
        "c=utf-8&s=koi8-r",
        "c=UTF-8&s=KOI8-R",
        "c=windows-1251&s=utf-8",
        "c=foo&s=koi8-r",
        "c=utf-8&s=foo",
        "c=&s=koi8-r",
        "c=utf-8&s=utf-8",
        "c=foo&s=foo",
        "c=foo&s=foobar",
        "c=foobar&s=foo",
        "c=koi8-r&s=KOI8-R",
        "c=off&s=koi8-r",
    ] {
        p.check_bytes(format!("GET /v/utf.txt?{q} HTTP/1.1\r\nHost: vars\r\n\r\n").as_bytes());
    }
}

/// An upstream answering koi8-r text, its headers chosen by the path.
fn upstream() -> Upstream {
    Upstream::start(|r| {
        let body = b"\xd0\xd2\xc9\xd7\xc5\xd4 \xe1\xe2\n".to_vec();
        let t = r.target.as_str();
        let mut a = Answer::ok(body);
        for (marker, name, value) in [
            ("t-html", "Content-Type", "text/html"),
            ("t-koi", "Content-Type", "text/html; charset=koi8-r"),
            ("t-quoted", "Content-Type", "text/html; charset=\"KOI8-R\""),
            ("t-win", "Content-Type", "text/html;charset=windows-1251"),
            ("t-param", "Content-Type", "text/html; q=1"),
            ("t-json", "Content-Type", "application/json; charset=koi8-r"),
            ("t-foo", "Content-Type", "text/html; charset=foo"),
            ("t-spaced", "Content-Type", "text/html ; charset=koi8-r"),
            ("t-tail", "Content-Type", "text/html;   charset=koi8-r;x=y"),
            ("xa-utf", "X-Accel-Charset", "UTF-8"),
            ("xa-win", "X-Accel-Charset", "windows-1251"),
            ("xa-bad", "X-Accel-Charset", "nosuch"),
            ("enc-gzip", "Content-Encoding", "gzip"),
            ("enc-empty", "Content-Encoding", ""),
        ] {
            if t.contains(marker) {
                a = a.header(name, value);
            }
        }
        if t.contains("chunked") {
            a = a.chunked(&[3, 3, 100]);
        }
        a
    })
}

#[test]
fn proxied_answers_and_override_charset() {
    let up = upstream();
    let server = "\
        location /p/ { proxy_pass UP; charset windows-1251; source_charset koi8-r; }\n\
        location /o/ { proxy_pass UP; charset windows-1251; override_charset on; }\n\
        location /ou/ { proxy_pass UP; charset utf-8; override_charset on; }\n\
        location /off/ { proxy_pass UP; charset off; override_charset on; }\n\
        location /none/ { proxy_pass UP; }\n\
        location /ig/ { proxy_pass UP; proxy_ignore_headers X-Accel-Charset; charset utf-8; \
            source_charset koi8-r; }\n\
        location /u/ { proxy_pass UP; charset utf-8; source_charset koi8-r; }"
        .replace("UP", &up.url());
    let p = Pair::with(Conf {
        http: MAPS,
        server: &server,
        ..Default::default()
    });
    let cases: &[(&str, &[&str])] = &[
        (
            "/p/",
            &[
                "t-html", "t-koi", "t-win", "t-param", "t-json", "t-quoted", "none",
            ],
        ),
        (
            "/o/",
            &[
                "t-html", "t-koi", "t-quoted", "t-json", "t-foo", "t-win", "t-spaced", "t-tail",
            ],
        ),
        ("/ou/", &["t-koi"]),
        ("/off/", &["t-koi"]),
        (
            "/none/",
            &[
                "t-koi-xa-utf",
                "t-html-xa-win",
                "t-json-xa-win",
                "t-html-xa-bad",
            ],
        ),
        ("/ig/", &["t-html-xa-win"]),
        (
            "/u/",
            &[
                "t-html-xa-win",
                "t-html-enc-gzip",
                "t-html-enc-empty",
                "none",
            ],
        ),
    ];
    // A chunked upstream body: nginx gathers it into one buffer, shoal relays pieces as they
    // come; what they recode to is compared without chunks (HTTP/1.0).
    for path in ["/ou/t-koi-chunked", "/u/t-html-chunked"] {
        p.check_open_bytes(format!("GET {path} HTTP/1.0\r\n\r\n").as_bytes());
    }
    for (loc, markers) in cases {
        for m in *markers {
            // nginx drops a proxied request whose client half-closes: kept open.
            p.check_open_bytes(
                format!("GET {loc}{m} HTTP/1.1\r\nHost: localhost\r\n\r\n").as_bytes(),
            );
        }
    }
    assert!(p
        .shoal_log()
        .contains("no \"charset_map\" between the charsets \"foo\" and \"windows-1251\""));
    assert!(p
        .shoal_log()
        .contains("unknown charset \"nosuch\" to override"));
}

#[test]
fn debian_maps_recode_alike() {
    // nginx's own files, read by both: tables of another shape (partial, with Ukrainian).
    let dir = Path::new("/etc/nginx");
    for f in ["koi-win", "koi-utf", "win-utf"] {
        assert!(
            dir.join(f).exists(),
            "Debian's nginx ships /etc/nginx/{f} (apt-get install nginx)"
        );
    }
    let p = Pair::with(Conf {
        http: "include /etc/nginx/koi-win;\ninclude /etc/nginx/koi-utf;\n\
               include /etc/nginx/win-utf;",
        server: LOCATIONS,
        ..Default::default()
    });
    fixtures(&p.html());
    for loc in ["kw", "wk", "ku", "wu", "uk", "uw"] {
        for file in ["all.txt", "utf.txt"] {
            get(&p, &format!("/{loc}/{file}"), "");
        }
    }
}

// ---- gzip after charset ------------------------------------------------------------------

pub(crate) fn raw(port: u16, req: &[u8]) -> Vec<u8> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).expect("connecting");
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.write_all(req).unwrap();
    s.shutdown(Shutdown::Write).unwrap();
    let mut out = Vec::new();
    s.read_to_end(&mut out).unwrap();
    out
}

/// Status, headers in their order (not Date, Server) and the body unchunked and gunzipped (compressed
/// bytes are zlib's choice; what they decompress to is the charset filter's).
pub(crate) fn decoded(raw: &[u8]) -> String {
    let end = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .expect("a head");
    let head = String::from_utf8_lossy(&raw[..end]).into_owned();
    let mut lines = head.split("\r\n");
    let mut out = lines.next().unwrap_or_default().to_string();
    let headers: Vec<&str> = lines
        .filter(|l| !l.starts_with("Date:") && !l.starts_with("Server:"))
        .collect();
    let mut body = raw[end + 4..].to_vec();
    if headers.contains(&"Transfer-Encoding: chunked") {
        let mut plain = Vec::new();
        let mut b = &body[..];
        loop {
            let eol = b.windows(2).position(|w| w == b"\r\n").expect("a size");
            let n = usize::from_str_radix(std::str::from_utf8(&b[..eol]).unwrap(), 16).unwrap();
            if n == 0 {
                break;
            }
            plain.extend_from_slice(&b[eol + 2..eol + 2 + n]);
            b = &b[eol + 4 + n..];
        }
        body = plain;
    }
    if headers.contains(&"Content-Encoding: gzip") {
        let mut child = Command::new("gzip")
            .arg("-dc")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("gzip -dc");
        child.stdin.take().unwrap().write_all(&body).unwrap();
        body = child.wait_with_output().unwrap().stdout;
    }
    for h in headers {
        out.push('\n');
        out.push_str(h);
    }
    out.push_str(&format!("\n\n{:?}", body));
    out
}

#[test]
fn gzip_compresses_the_recoded_body() {
    let p = Pair::with(Conf {
        http: MAPS,
        server: "location /g/ { alias {HTML}/cs/; charset utf-8; source_charset koi8-r; \
                 gzip on; gzip_min_length 1000; gzip_types text/plain; }\n\
                 location /g8/ { alias {HTML}/cs/; charset windows-1251; source_charset koi8-r; \
                 gzip on; gzip_min_length 1000; gzip_types text/plain; }",
        ..Default::default()
    });
    fixtures(&p.html());
    let ports = p.ports();
    for path in ["/g/all.txt", "/g8/all.txt", "/g8/big8.txt", "/g/big8.txt"] {
        let req = format!("GET {path} HTTP/1.1\r\nHost: x\r\nAccept-Encoding: gzip\r\n\r\n");
        let n = decoded(&raw(ports.0, req.as_bytes()));
        let s = decoded(&raw(ports.1, req.as_bytes()));
        assert_eq!(n, s, "{path}");
    }
}

// ---- -t ------------------------------------------------------------------------------------

#[test]
fn configuration_errors_in_nginx_s_words() {
    for (http, server) in [
        (
            "",
            "location / { charset windows-1251; source_charset koi8-r; }",
        ),
        (
            "include koi-utf;",
            "location / { charset windows-1251; source_charset koi8-r; }",
        ),
        ("", "location / { charset x; source_charset $y; } set $y a;"),
        (
            "",
            "location / { if ($x) { charset a; source_charset b; } } set $x 1;",
        ),
        ("charset_map a a { }", ""),
        ("charset_map a b { } charset_map B A { }", ""),
        ("charset_map a b {\n 80 ;\n}", ""),
        ("charset_map a b {\n 80 81 82;\n}", ""),
        ("charset_map a b { 8G 81; }", ""),
        ("charset_map a b { 100 81; }", ""),
        ("charset_map a b { 080 8; ff FF; 00 00; }", ""),
        (
            "charset_map a utf-8 { 80 E282AC; 81 e282ac41; 82 C280; }",
            "",
        ),
        ("charset_map a utf-8 { 80 E2; }", ""),
        ("charset_map a utf-8 { 80 F09F9880; }", ""),
        ("charset_map a utf-8 { 80 41; }", ""),
        ("charset_map a utf-8 { 80 E282A; }", ""),
        ("charset_map a b { 80 81 { } }", ""),
        ("charset_map a b;", ""),
        ("charset_map a b c { }", ""),
        ("", "charset_map a b { }"),
        ("charset_types;", ""),
        ("charset_types text/html;", ""),
        (
            "charset_types text/plain text/PLAIN; charset_types text/plain;",
            "",
        ),
        ("charset_types * text/html;", ""),
        ("charset a b;", ""),
        ("charset a; charset b;", ""),
        ("source_charset a; source_charset b;", ""),
        ("override_charset on; override_charset off;", ""),
        ("override_charset maybe;", ""),
        (
            "",
            "location / { if ($x) { charset_types text/x; } } set $x 1;",
        ),
        ("charset $nosuchvar;", ""),
        ("charset utf-8; source_charset koi8-r;", ""),
        ("charset utf-8; source_charset koi8-r; include koi-utf;", ""),
    ] {
        let (nginx, shoal) = crate::diff::both_test(http, server);
        assert_eq!(shoal, nginx, "for http {{ {http} }} server {{ {server} }}");
    }
}

#[test]
fn pages_for_requests_that_could_not_be_read() {
    // nginx's charset filter runs for a 400 too, with the server's configuration.
    for http in [
        "charset utf-8;",
        "charset utf-8; source_charset koi8-r;",
        "charset windows-1251; source_charset koi8-r;",
    ] {
        let p = Pair::with(Conf {
            http: &format!("{MAPS}\nserver_tokens off;\n{http}"),
            ..Default::default()
        });
        p.check_bytes(b"GET / HTTP/1.1\r\nHost: x\r\nHost: y\r\n\r\n");
        p.check_bytes(b"GARBAGE\r\n\r\n");
        p.check_bytes(b"GET /a.txt HTTP/1.1\r\nHost: x\r\n\r\n");
    }
}
