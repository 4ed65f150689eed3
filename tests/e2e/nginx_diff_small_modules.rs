//! Small modules against real nginx: `empty_gif` (the image, Last-Modified and its 304, 405
//! for other methods, no ranges, in a nested location not inherited, with `expires` and
//! `add_header`); `secure_link` (checksums and expiry times good, bad and malformed, the old
//! `secure_link_secret` form, inheritance, the two forms refused together); `msie_padding` and
//! `msie_refresh` for Chrome, Firefox and MSIE.

use crate::diff::Pair;

#[test]
fn empty_gif_answers_as_nginx() {
    let p = Pair::new(
        "location = /p.gif { empty_gif; }\n\
         location /pixel/ { empty_gif; expires 1h; add_header X-Pixel on;\n\
             location /pixel/not/ { }\n\
         }",
    );
    p.check_bytes(b"GET /p.gif HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n");
    p.check_bytes(b"GET /pixel/a?x=1 HTTP/1.0\r\n\r\n");
    p.head("/p.gif", "");
    p.get(
        "/p.gif",
        "If-Modified-Since: Mon, 28 Sep 1970 06:00:00 GMT\r\n",
    );
    p.get(
        "/p.gif",
        "If-Modified-Since: Mon, 28 Sep 1970 05:59:59 GMT\r\n",
    );
    p.check_bytes(
        b"GET /p.gif HTTP/1.1\r\nHost: localhost\r\nRange: bytes=0-9\r\nConnection: close\r\n\r\n",
    );
    p.check(b"POST /p.gif HTTP/1.1\r\nHost: localhost\r\nContent-Length: 3\r\nConnection: close\r\n\r\nabc");
    p.check(b"DELETE /pixel/x HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n");
    // Not inherited: the nested location serves files (a 404 here).
    p.get("/pixel/not/x.gif", "");
}

/// MD5 of `s`, base64url without padding (what `openssl md5 -binary | base64 | tr +/ -_ | tr
/// -d =` prints).
fn md5_b64url(s: &str) -> String {
    use md5::{Digest, Md5};
    const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let d = Md5::digest(s.as_bytes());
    let mut out = String::new();
    for chunk in d.chunks(3) {
        let mut n = 0u32;
        for (i, b) in chunk.iter().enumerate() {
            n |= u32::from(*b) << (16 - 8 * i);
        }
        for i in 0..=chunk.len() {
            out.push(ALPHABET[(n >> (18 - 6 * i) & 63) as usize] as char);
        }
    }
    out
}

fn md5_hex(s: &str) -> String {
    use md5::{Digest, Md5};
    Md5::digest(s.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

#[test]
fn secure_link_checks_as_nginx() {
    let p = Pair::new(
        "location /s/ {\n\
             secure_link $arg_md5,$arg_expires;\n\
             secure_link_md5 \"$secure_link_expires$uri$remote_addr secret\";\n\
             if ($secure_link = \"\") { return 403; }\n\
             if ($secure_link = \"0\") { return 410; }\n\
             return 200 \"ok [$secure_link] [$secure_link_expires]\\n\";\n\
         }\n\
         location /n/ {\n\
             secure_link $arg_md5;\n\
             secure_link_md5 \"$uri secret\";\n\
             return 200 \"[$secure_link] [$secure_link_expires]\\n\";\n\
         }\n\
         location /p/ {\n\
             secure_link_secret word;\n\
             if ($secure_link = \"\") { return 403; }\n\
             return 200 \"link=$secure_link\\n\";\n\
             location /p/inner/ { return 200 \"inner=[$secure_link]\\n\"; }\n\
         }\n\
         location /none/ { return 200 \"[$secure_link] [$secure_link_expires]\\n\"; }",
    );
    let future = "2147483647";
    let good = md5_b64url(&format!("{future}/s/f.txt127.0.0.1 secret"));
    let past = md5_b64url("1000/s/f.txt127.0.0.1 secret");
    for q in [
        format!("md5={good}&expires={future}"),
        format!("md5={good}==&expires={future}"),
        format!("md5={good}&expires=2147483646"),
        format!("md5={past}&expires=1000"),
        format!("md5={good}&expires=0"),
        format!("md5={good}&expires=-5"),
        format!("md5={good}&expires=12x"),
        format!("md5={good}&expires="),
        format!("md5={good}"),
        format!("md5={}&expires={future}", good.replace('-', "+")),
        format!("md5={good}xxxx&expires={future}"),
        format!("md5={}&expires={future}", &good[..20]),
        "md5=&expires=".to_string(),
        String::new(),
    ] {
        p.get(&format!("/s/f.txt?{q}"), "");
    }
    // No expiry part: never expires; its variable has no value.
    let plain = md5_b64url("/n/a secret");
    p.get(&format!("/n/a?md5={plain}"), "");
    p.get(&format!("/n/a?md5={plain}&expires=5"), "");
    p.get("/n/a?md5=AAAAAAAAAAAAAAAAAAAAAA", "");
    // The old form: /p/HASH/LINK, the hash of LINK (with its arguments) and the word.
    for link in ["file.txt", "dir/file.txt?x=1", "a"] {
        p.get(
            &format!("/p/{}/{link}", md5_hex(&format!("{link}word"))),
            "",
        );
        p.get(
            &format!("/p/{}/{link}", md5_hex(&format!("{link}other"))),
            "",
        );
    }
    p.get(&format!("/p/{}/", md5_hex("word")), "");
    p.get("/p/short/file.txt", "");
    p.get("/p/file.txt", "");
    p.get(&format!("/p/inner/{}", md5_hex("xword")), "");
    p.get(&format!("/p/inner/{}/x", md5_hex("xword")), "");
    p.get("/none/?md5=x&expires=1", "");
}

#[test]
fn secure_link_secret_is_not_mixed_with_the_md5_form() {
    for server in [
        "location / { secure_link $arg_a; secure_link_secret w; }",
        "location / { secure_link_secret w; secure_link_md5 $uri; }",
    ] {
        let (n, s) = crate::diff::both_test("", server);
        // nginx finds it when the levels are merged (its line: the end of the block); shoal
        // on the directive's own line.
        let want = r#"[emerg] \"secure_link_secret\" cannot be mixed with \"secure_link\" and \"secure_link_md5\" in FILE:"#;
        assert!(n.contains(want), "nginx: {n}");
        assert!(s.contains(want), "nginx: {n}\nshoal: {s}");
    }
}

const CHROME: &str = "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) \
                      Chrome/120.0.0.0 Safari/537.36";
const FIREFOX: &str = "Mozilla/5.0 (X11; Linux x86_64; rv:120.0) Gecko/20100101 Firefox/120.0";
const MSIE: &str = "Mozilla/4.0 (compatible; MSIE 6.0; Windows NT 5.1)";

#[test]
fn msie_padding_and_refresh_as_nginx() {
    let p = crate::diff::Pair::with(crate::diff::Conf {
        server: "location /deny { deny all; }\n\
                 location /five { return 500; }\n\
                 location /text { return 404 \"own text\"; }\n\
                 location /off { msie_padding off; }\n\
                 location /r { return 302 \"/to x'y\\\"z\"; }\n\
                 location /rw { rewrite ^ /there redirect; }\n\
                 location /m { msie_refresh on;\n\
                     location /m/r { return 302 \"/to x'y\\\"z\"; }\n\
                     location /m/p { return 301 http://example.com/a%20b; }\n\
                     location /m/rw { rewrite ^ /there permanent; }\n\
                     location /m/nf { }\n\
                 }",
        ..Default::default()
    });
    for dir in ["dir", "m/dir"] {
        std::fs::create_dir_all(p.html().join(dir)).unwrap();
        std::fs::write(p.html().join(dir).join("index.html"), "in a dir\n").unwrap();
    }
    for ua in [CHROME, FIREFOX, MSIE] {
        let h = format!("User-Agent: {ua}\r\n");
        for path in [
            "/nope", "/deny", "/five", "/text", "/off/x", "/r", "/rw", "/dir", "/m/r", "/m/p",
            "/m/rw", "/m/nf", "/m/dir",
        ] {
            p.get(path, &h);
        }
        p.head("/nope", &h);
        p.check(format!("GET /nope HTTP/1.0\r\n{h}\r\n").as_bytes());
    }
}
