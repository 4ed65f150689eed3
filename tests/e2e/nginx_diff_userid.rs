//! The userid and browser modules against real nginx. userid: a cookie the client sent
//! decoded into `$uid_got` (in a body and in `add_header`), found among others, too short or
//! not base64 (nothing got, the error logged), a marked one left alone, an unmarked one sent
//! back with the mark, every cookie attribute (`expires`, `domain`, `path`, the flags, `P3P`);
//! a fresh identifier's shape (`on`: the server's address, the time, a start value, a
//! sequence in network order; `v1`: the service and a sequence in the machine's order), the
//! same in `Set-Cookie` and `$uid_set`; `$uid_reset` replacing the client's; the directives'
//! errors at `-t`. browser: `$modern_browser`, `$ancient_browser`, `$msie` for the agents of
//! nginx's own examples, with listed, unlisted and ancient browsers and their values.

use crate::common::client::exchange_text;
use crate::diff::{both_test, Pair};

/// A valid v2 identifier: 127.0.0.1, a time, a start value, sequence 0x03030302.
const GOOD: &str = "fwAAAWkoA3ASNBCSAwMDAg==";

const LOCATIONS: &str = "location /log/ { userid log;\n\
         return 200 \"got=[$uid_got] set=[$uid_set] reset=[$uid_reset]\\n\"; }\n\
     location /on/ { userid on; userid_mark X; userid_expires max;\n\
         userid_domain example.com; userid_path /on/;\n\
         userid_flags secure httponly samesite=lax; userid_p3p 'CP=\"x\"';\n\
         add_header X-Got $uid_got;\n\
         return 200 \"got=[$uid_got] set=[$uid_set]\\n\"; }\n\
     location /named/ { userid on; userid_name Visitor; userid_domain none; userid_p3p none;\n\
         userid_flags samesite=strict; userid_flags samesite=none;\n\
         return 200 \"got=[$uid_got]\\n\"; }\n\
     location /v1/ { userid v1; userid_service 7; userid_expires 1d;\n\
         return 200 \"got=[$uid_got] set=[$uid_set]\\n\"; }\n\
     location /reset/ { userid on; set $uid_reset $arg_r;\n\
         return 200 \"got=[$uid_got] set=[$uid_set] reset=[$uid_reset]\\n\"; }\n\
     location /off/ { userid off; return 200 \"got=[$uid_got] set=[$uid_set]\\n\"; }";

#[test]
fn userid_reads_cookies_as_nginx() {
    let p = Pair::new(LOCATIONS);
    let marked = format!("{}X=", &GOOD[..22]);
    for cookie in [
        format!("uid={GOOD}"),
        format!("a=1; uid={GOOD}; b=2"),
        format!("a=1, UID = {GOOD}"),
        format!("xuid={GOOD}"),
        format!("uid={}", &GOOD[..22]),
        format!("uid={marked}"),
        "uid=abc".to_string(),
        "uid=!!!!!!!!!!!!!!!!!!!!!!!!".to_string(),
        "uid=AAAAAQ==AAAAAAAAAAAAAA".to_string(),
        "uid=AAAAAAAAAAAAAAAAAAAAAA==".to_string(),
    ] {
        p.get("/log/x", &format!("Cookie: {cookie}\r\n"));
        p.get("/off/x", &format!("Cookie: {cookie}\r\n"));
    }
    p.get("/log/x", "");
    // Two lines: the first that has it.
    p.get(
        "/log/x",
        &format!("Cookie: a=1\r\nCookie: uid={GOOD}\r\nCookie: uid=AAAAAAAAAAAAAAAAAAAAAA==\r\n"),
    );
    // Got and marked: nothing set; got unmarked: sent back with the mark, every attribute.
    p.get("/on/x", &format!("Cookie: uid={marked}\r\n"));
    p.get("/on/x", &format!("Cookie: a=1; uid={GOOD}\r\n"));
    p.get("/named/x", &format!("Cookie: visitor={GOOD}\r\n"));
    p.get("/v1/x", &format!("Cookie: uid={GOOD}\r\n"));
    p.get("/reset/x?r=0", &format!("Cookie: uid={GOOD}\r\n"));
    let (n, s) = (p.nginx_log(), p.shoal_log());
    for line in [
        "client sent too short userid cookie \"uid=abc\"",
        "client sent invalid userid cookie \"uid=!!!!!!!!!!!!!!!!!!!!!!!!\"",
    ] {
        assert!(n.contains(line), "nginx logs {line}:\n{n}");
        assert!(s.contains(line), "shoal logs {line}:\n{s}");
    }
}

/// Decodes base64 (the standard alphabet, padded).
fn b64(s: &str) -> Vec<u8> {
    const A: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = Vec::new();
    let (mut n, mut bits) = (0u32, 0);
    for c in s.bytes().take_while(|&c| c != b'=') {
        n = n << 6 | A.iter().position(|&a| a == c).expect("base64") as u32;
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((n >> bits) as u8);
        }
    }
    out
}

/// An answer with a fresh identifier, its variable parts replaced by their shape once they
/// are checked: the identifier's 22 characters, `$uid_set`'s words (which must print the
/// same bytes), a relative expiry date. `check` is given the identifier's 16 bytes.
fn fresh_shape(answer: &str, check: &dyn Fn(&[u8])) -> String {
    let (head, body) = answer.split_once("\r\n\r\n").expect("a whole answer");
    let mut lines: Vec<String> = head
        .lines()
        .filter(|l| !l.starts_with("Date:") && !l.starts_with("Server:"))
        .map(str::to_string)
        .collect();
    let mut body = body.to_string();
    for l in &mut lines {
        let Some(v) = l.strip_prefix("Set-Cookie: ") else {
            continue;
        };
        let (name, rest) = v.split_once('=').expect("NAME=VALUE");
        let (id, attrs) = rest.split_at(24);
        let bytes = b64(&id[..22]);
        assert_eq!(bytes.len(), 16, "{id}");
        check(&bytes);
        let words: String = bytes
            .chunks(4)
            .map(|w| format!("{:08X}", u32::from_le_bytes(w.try_into().unwrap())))
            .collect();
        body = body.replace(&format!("{name}={words}"), &format!("{name}=<WORDS>"));
        let attrs = match attrs.split_once("; expires=") {
            Some((a, rest)) if !rest.starts_with("Thu, 31-Dec-37") => {
                let (date, after) = rest.split_once(" GMT").expect("a GMT date");
                let b = date.as_bytes();
                assert!(
                    b.len() == 23 && &b[3..5] == b", " && b[7] == b'-' && b[11] == b'-',
                    "{date}"
                );
                format!("{a}; expires=<date> GMT{after}")
            }
            _ => attrs.to_string(),
        };
        *l = format!("Set-Cookie: {name}=<ID>{}{attrs}", &id[22..]);
    }
    format!("{}\n\n{body}", lines.join("\n"))
}

fn now() -> u32 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as u32
}

/// `on` without `userid_service`: 127.0.0.1, the time and the sequence in network order.
fn v2_local(b: &[u8]) {
    assert_eq!(b[..4], [127, 0, 0, 1]);
    let t = u32::from_be_bytes(b[4..8].try_into().unwrap());
    assert!(t.abs_diff(now()) < 3600, "time {t}");
    let seq = u32::from_be_bytes(b[12..].try_into().unwrap());
    assert!(
        seq >= 0x0303_0302 && seq & 0xff == 0x02,
        "sequence {seq:#x}"
    );
}

/// `v1` with `userid_service 7`: the machine's order, the sequence from 1 by 0x100.
fn v1_service(b: &[u8]) {
    let w = |i: usize| u32::from_le_bytes(b[i * 4..i * 4 + 4].try_into().unwrap());
    assert_eq!(w(0), 7);
    assert!(w(1).abs_diff(now()) < 3600, "time {}", w(1));
    assert_eq!(w(3) & 0xff, 1, "sequence {:#x}", w(3));
}

#[test]
fn userid_sets_fresh_cookies_of_nginx_shape() {
    let p = Pair::new(LOCATIONS);
    let (np, sp) = p.ports();
    let both = |path: &str, headers: &str, check: &dyn Fn(&[u8])| {
        let req =
            format!("GET {path} HTTP/1.1\r\nHost: localhost\r\n{headers}Connection: close\r\n\r\n");
        let n = fresh_shape(&exchange_text(np, &req), check);
        let s = fresh_shape(&exchange_text(sp, &req), check);
        assert_eq!(n, s, "{path} {headers}");
        n
    };
    let on = both("/on/x", "", &v2_local);
    assert!(on.contains("Set-Cookie: uid=<ID>X=; expires=Thu, 31-Dec-37 23:55:55 GMT"));
    both(
        "/on/x",
        "Cookie: uid=AAAAAAAAAAAAAAAAAAAAAA==\r\n",
        &v2_local,
    );
    both("/on/x", "Cookie: uid=abc\r\n", &v2_local);
    both("/named/x", "", &v2_local);
    let v1 = both("/v1/x", "", &v1_service);
    assert!(v1.contains("expires=<date> GMT; path=/"), "{v1}");
    both("/v1/x", "", &v1_service);
    // `$uid_reset`: a new identifier replaces the client's (`log` also logs it).
    let cookie = format!("Cookie: uid={GOOD}\r\n");
    both("/reset/x?r=1", &cookie, &v2_local);
    both("/reset/x?r=log", &cookie, &v2_local);
    let line = "userid cookie \"uid=0100007F700328699210341202030303\" was reset";
    assert!(p.nginx_log().contains(line));
    assert!(p.shoal_log().contains(line), "{}", p.shoal_log());
}

#[test]
fn userid_directives_are_checked_as_nginx() {
    for http in [
        "userid on; userid_name u; userid_domain none; userid_path /; userid_expires 1h;\
         userid_flags off secure; userid_p3p none; userid_mark =; userid_service 4294967297;",
        "userid maybe;",
        "userid on; userid off;",
        "userid_flags secure bogus;",
        "userid_flags samesite=strict samesite=LAX secure; userid_flags SECURE;",
        "userid_mark ab;",
        "userid_mark off; userid_mark a;",
        "userid_expires 100ms;",
        "userid_expires off; userid_expires max;",
        "userid_service -1;",
        "location / { set $uid_reset 1; set $uid_got 1; }",
    ] {
        let (n, s) = both_test(http, "");
        assert_eq!(n, s, "{http}");
    }
}

#[test]
fn browsers_are_told_apart_as_nginx_does() {
    let p = Pair::new(
        "location /b/ { modern_browser msie 6.0; modern_browser gecko 1.7;\n\
             ancient_browser curl \"\";\n\
             return 200 \"m=[$modern_browser] a=[$ancient_browser] msie=[$msie]\\n\"; }\n\
         location /u/ { modern_browser unlisted; ancient_browser Links netscape4;\n\
             modern_browser_value modern.html; ancient_browser_value ancient.html;\n\
             return 200 \"m=[$modern_browser] a=[$ancient_browser]\\n\";\n\
             location /u/in/ { return 200 \"in m=[$modern_browser] a=[$ancient_browser]\\n\"; }\n\
         }\n\
         location /o/ { modern_browser opera 8.0; modern_browser safari 125;\n\
             modern_browser konqueror 3.1.2; modern_browser msie 5.5;\n\
             return 200 \"m=[$modern_browser] a=[$ancient_browser]\\n\"; }\n\
         location /none/ { return 200 \"m=[$modern_browser] a=[$ancient_browser]\\n\"; }",
    );
    for ua in [
        None,
        Some("Mozilla/4.0 (compatible; MSIE 6.0; Windows NT 5.1)"),
        Some("Mozilla/4.0 (compatible; MSIE 5.5; Windows 98; Win 9x 4.90)"),
        Some("Mozilla/4.0 (compatible; MSIE 5.51; Windows 98)"),
        Some("Mozilla/4.0 (compatible; MSIE 6"),
        Some("Mozilla/4.0 (compatible; MSIE 6.0; X11; FreeBSD i386) Opera 7.50  [en]"),
        Some("Opera/8.0 (Windows NT 5.1; U; ru)"),
        Some("Mozilla/5.0 (Windows NT 5.1; U; en) Opera 8.0"),
        Some("Mozilla/5.0 (Windows NT 5.1; U; en) Opera 8.01"),
        Some(
            "Mozilla/5.0 (Macintosh; U; PPC Mac OS X; en-us) AppleWebKit/125.2 \
             (KHTML, like Gecko) Safari/125.7",
        ),
        Some("Mozilla/5.0 (Macintosh) Safari/124"),
        Some("Mozilla/5.0 (compatible; Konqueror/3.1; Linux)"),
        Some("Mozilla/5.0 (compatible; Konqueror/3.1.3; Linux)"),
        Some("Mozilla/5.0 (Windows; U; Windows NT 5.1; en-US; rv:1.7.5) Gecko/20041107"),
        Some("Mozilla/5.0 (Windows; U; rv:1.6) Gecko/2004"),
        Some("Mozilla/5.0 (X11; rv:120.0) Gecko/20100101 Firefox/120.0"),
        Some("Mozilla/4.72 [en] (X11; U; Linux)"),
        Some("Mozilla/4.7 [en]"),
        Some("Links (2.1; Linux)"),
        Some("curl/8.0"),
        Some("rv:"),
        Some(""),
    ] {
        let h = ua.map_or(String::new(), |u| format!("User-Agent: {u}\r\n"));
        for path in ["/b/", "/u/", "/u/in/", "/o/", "/none/"] {
            p.get(path, &h);
        }
    }
    for http in [
        "modern_browser msie 5.x;",
        "modern_browser netscape 4;",
        "modern_browser MSIE 5.5; modern_browser unlisted; ancient_browser a b netscape4;\
         modern_browser_value a; modern_browser_value b; ancient_browser_value c;",
    ] {
        let (n, s) = both_test(http, "");
        assert_eq!(n, s, "{http}");
    }
}

#[test]
fn core_leftovers_are_checked_as_nginx() {
    for http in [
        "read_ahead 1k; proxy_send_lowat 1k; fastcgi_send_lowat 0; send_lowat 3;",
        "read_ahead x;",
        "read_ahead 1; read_ahead 2;",
        "proxy_send_lowat x;",
        "proxy_send_lowat 1k; fastcgi_send_lowat 1k;",
        "uwsgi_send_lowat 1k;",
        "scgi_send_lowat 1k;",
        "grpc_send_lowat 1k;",
        "post_action /x;",
        "post_action /x; post_action /y;",
        "location / { if ($arg_a) { post_action @a; } }",
    ] {
        let (n, s) = both_test(http, "");
        assert_eq!(n, s, "{http}");
    }
    for events in [
        "debug_connection 127.0.0.1; debug_connection ::1; debug_connection unix:;\
         debug_connection 10.0.0.0/8; debug_connection localhost;",
        "debug_connection 10.0.0.1/8;",
        "debug_connection 1.2.3.4/33;",
        "debug_connection host.invalid;",
    ] {
        let (n, s) = crate::diff::both_test_events(events, "", "");
        assert_eq!(n, s, "{events}");
    }
}

#[test]
fn read_ahead_serves_as_nginx() {
    let p = Pair::new("read_ahead 512k; location /big/ { read_ahead 0; }");
    let big = "x".repeat(300 * 1024);
    std::fs::write(p.html().join("ra.txt"), &big).unwrap();
    let answer = p.get("/ra.txt", "");
    assert!(answer.contains(&big[..1000]), "{}", &answer[..200]);
    p.get("/ra.txt", "Range: bytes=200000-200009\r\n");
}

/// `post_action`: the answer goes out, then the request runs again in the target; a proxied
/// target (here the server itself, `/count`) is asked once per run.
#[test]
fn post_action_runs_after_the_answer_as_nginx() {
    let p = Pair::with(crate::diff::Conf {
        http: "log_format pa '$uri $status $body_bytes_sent $request_uri $request_method';\n\
               log_format pb '$uri $status $request_uri';",
        server: "location / { post_action /track; return 200 \"main\\n\"; }\n\
             location /named { post_action @t; return 200 \"named\\n\"; }\n\
             location /off { post_action off; return 200 \"off\\n\"; }\n\
             location /404/ { post_action /track; return 404 \"nope\\n\"; }\n\
             location /403/ { post_action /own; return 403; }\n\
             location /own { access_log logs/own.log pb;\n\
                 proxy_pass http://127.0.0.1:{PORT}/count$request_uri; }\n\
             location /track { access_log logs/track.log pa;\n\
                 proxy_pass http://127.0.0.1:{PORT}/count$request_uri; }\n\
             location @t { access_log logs/named.log pa; rewrite ^ /count/named break;\n\
                 proxy_pass http://127.0.0.1:{PORT}; }\n\
             location /count { access_log logs/count.log pa; return 200 \"counted\\n\"; }\n\
             location /loop/ { post_action /loop/t; return 200 \"loop\\n\";\n\
                 location /loop/t { access_log logs/loop.log pa;\n\
                     proxy_pass http://127.0.0.1:{PORT}/count/loop; }\n\
             }",
        ..Default::default()
    });
    let close = |method: &str, path: &str| {
        p.check_open(
            crate::common::client::request(method, path, "Connection: close\r\n").as_bytes(),
        );
    };
    close("GET", "/a?x=1");
    close("HEAD", "/a");
    close("GET", "/named");
    close("GET", "/404/x");
    // One of nginx's own error pages: its status is logged, not the post action's.
    close("GET", "/403/x");
    close("GET", "/off");
    close("GET", "/loop/x");
    for log in [
        "logs/track.log",
        "logs/named.log",
        "logs/count.log",
        "logs/loop.log",
        "logs/own.log",
    ] {
        let (n, s) = p.read_both(log);
        assert!(!n.is_empty(), "nginx wrote {log}");
        assert_eq!(n, s, "{log}");
    }
    let count = p.read_both("logs/count.log").0;
    assert_eq!(
        count
            .lines()
            .filter(|l| l.starts_with("/count/loop "))
            .count(),
        10,
        "{count}"
    );
}
