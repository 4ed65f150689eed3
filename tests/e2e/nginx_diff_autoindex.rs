//! autoindex against real nginx: the same directories listed by both, byte for byte, in every
//! format: names with spaces, `&`, `<`, quotes, UTF-8 and bytes that are not, control
//! characters, long names around the 50-column cut, symbolic links (to a file, to a directory,
//! to nowhere), hidden files, a 10,000-file directory; `autoindex_localtime` under a time zone
//! both servers read (`TZ`), JSONP callbacks, HEAD, errors.

use std::fs;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use crate::diff::{Conf, Pair};

/// Every listed entry's time: Sun, 01 Jan 2023 00:00:00 GMT (links themselves too).
fn touch(path: &Path) {
    let ok = Command::new("touch")
        .args(["-h", "-d", "@1672531200"])
        .arg(path)
        .status()
        .expect("touch")
        .success();
    assert!(ok, "touch -h {}", path.display());
}

/// The listed directory: `html/ls/`.
fn fixtures(html: &Path) {
    let dir = html.join("ls");
    fs::create_dir_all(&dir).unwrap();
    let names: Vec<Vec<u8>> = [
        "a.txt",
        "b c.txt",
        "amp&x",
        "lt<gt>",
        "quote\"q",
        "apos'x",
        "pct%41",
        "q?x",
        "hash#x",
        "colon:x",
        "plus+x",
        "semi;x",
        "back\\slash",
        "привет.txt",
        "emoji😀",
        "UPPER",
        "tab\tx",
        "!\"#$%&'()*+,-.0123456789:;<=>?@[\\]^_`{|}~",
    ]
    .iter()
    .map(|s| s.as_bytes().to_vec())
    .chain([
        b"lat\xe9".to_vec(),
        b"ctl\x01\x1f\x7f".to_vec(),
        b"cut\xd0".to_vec(),
        "x".repeat(49).into_bytes(),
        "y".repeat(50).into_bytes(),
        "z".repeat(51).into_bytes(),
        "ж".repeat(24).into_bytes(),
        "ж".repeat(26).into_bytes(),
        "ж".repeat(49).into_bytes(),
        "ж".repeat(51).into_bytes(),
        [&b"a".repeat(45)[..], b"&", &b"b".repeat(10)].concat(),
        [
            &"ж".repeat(40).into_bytes()[..],
            b"\xff",
            &b"tail".repeat(4),
        ]
        .concat(),
    ])
    .collect();
    for (i, n) in names.iter().enumerate() {
        let p = dir.join(std::ffi::OsStr::from_bytes(n));
        fs::write(&p, "x".repeat(i + 1)).unwrap();
    }
    for d in [
        "sub".to_string(),
        "d".repeat(49),
        "e".repeat(50),
        "f".repeat(51),
        "dir & <more>".into(),
    ] {
        fs::create_dir(dir.join(d)).unwrap();
    }
    fs::write(dir.join(".hidden"), "h").unwrap();
    fs::create_dir(dir.join(".hiddendir")).unwrap();
    std::os::unix::fs::symlink("a.txt", dir.join("link")).unwrap();
    std::os::unix::fs::symlink("sub", dir.join("dirlink")).unwrap();
    std::os::unix::fs::symlink("nowhere", dir.join("broken")).unwrap();
    for sizes in [
        0u64,
        9999,
        10_000,
        10_752,
        1_048_576,
        1_572_864,
        1_610_612_736,
    ] {
        let f = fs::File::create(dir.join(format!("size{sizes}"))).unwrap();
        f.set_len(sizes).unwrap();
    }
    for e in fs::read_dir(&dir).unwrap() {
        touch(&e.unwrap().path());
    }
    touch(&dir);
    fs::create_dir_all(html.join("empty")).unwrap();
    // An index file: the listing is not reached.
    fs::create_dir_all(html.join("withindex")).unwrap();
    fs::write(html.join("withindex/index.html"), "an index\n").unwrap();
}

/// Both servers read their time zone from TZ (nginx keeps TZ from its environment): one that
/// is not UTC, so `autoindex_localtime` shows.
const TZ: &[(&str, &str)] = &[("TZ", "Asia/Tokyo")];

fn pair(server: &str) -> Pair {
    let p = Pair::with(Conf {
        http: "server_tokens off;",
        server,
        env: TZ,
        ..Default::default()
    });
    fixtures(&p.html());
    p
}

const FORMATS: &str = "\
    location /h/ { alias {HTML}/; autoindex on; }\n\
    location /n/ { alias {HTML}/; autoindex on; autoindex_exact_size off; }\n\
    location /l/ { alias {HTML}/; autoindex on; autoindex_localtime on; }\n\
    location /x/ { alias {HTML}/; autoindex on; autoindex_format xml; autoindex_localtime on; }\n\
    location /j/ { alias {HTML}/; autoindex on; autoindex_format json; }\n\
    location /p/ { alias {HTML}/; autoindex on; autoindex_format jsonp; }\n\
    location /u/ { alias {HTML}/; autoindex on; charset utf-8; }\n\
    location /k/ { alias {HTML}/; autoindex on; charset koi8-r; source_charset utf-8; }\n\
    location /kx/ { alias {HTML}/; autoindex on; autoindex_format xml; charset koi8-r; }\n\
    location /off/ { alias {HTML}/; }";

fn get(p: &Pair, path: &str) -> String {
    p.check_bytes(format!("GET {path} HTTP/1.1\r\nHost: localhost\r\n\r\n").as_bytes())
}

#[test]
fn every_format_byte_for_byte() {
    let p = Pair::with(Conf {
        http: "server_tokens off;\ninclude koi-utf;",
        server: FORMATS,
        env: TZ,
        ..Default::default()
    });
    fixtures(&p.html());
    for loc in ["h", "n", "l", "x", "j", "p", "u", "k", "kx"] {
        let r = get(&p, &format!("/{loc}/ls/"));
        assert!(r.starts_with("HTTP/1.1 200"), "{r}");
        get(&p, &format!("/{loc}/empty/"));
    }
    let r = get(&p, "/h/ls/");
    assert!(r.contains("b%20c.txt") && r.contains("..&gt;</a>"), "{r}");
    for q in [
        "callback=cb",
        "callback=a.b_C9",
        "callback=",
        "callback=a$b",
        "callback=%61b",
        &format!("callback={}", "x".repeat(128)),
        &format!("callback={}", "x".repeat(129)),
        "x=1&CALLBACK=up",
    ] {
        get(&p, &format!("/p/ls/?{q}"));
    }
    assert!(p
        .shoal_log()
        .contains("client sent invalid callback name: \"a$b\""));
}

#[test]
fn the_index_first_then_the_listing_and_errors() {
    let p = pair(
        "location / { autoindex on; }\n\
         location /off/ { alias {HTML}/; }",
    );
    // The root of the harness's tree: `dir/` has an index, `locked/` cannot be looked into.
    get(&p, "/");
    get(&p, "/withindex/");
    get(&p, "/ls");
    get(&p, "/nothere/");
    get(&p, "/locked/");
    get(&p, "/off/ls/");
    get(&p, "/ls/?a=1");
    get(&p, "/ls/%3Cx%3E/");
    p.check_bytes(b"HEAD /ls/ HTTP/1.1\r\nHost: localhost\r\n\r\n");
    p.check_open_bytes(b"HEAD /ls/ HTTP/1.1\r\nHost: localhost\r\n\r\n");
    p.check_bytes(b"GET /ls/ HTTP/1.0\r\n\r\n");
    p.check_bytes(b"POST /ls/ HTTP/1.1\r\nHost: localhost\r\nContent-Length: 0\r\n\r\n");
    p.check_bytes(b"DELETE /ls/ HTTP/1.1\r\nHost: localhost\r\n\r\n");
    if crate::diff::permissions_enforced() {
        // Searchable, not readable: the index is looked for, the listing fails.
        let d = p.html().join("noread");
        fs::create_dir(&d).unwrap();
        fs::set_permissions(&d, fs::Permissions::from_mode(0o311)).unwrap();
        get(&p, "/noread/");
        assert!(p
            .shoal_log()
            .contains("noread\" failed (13: Permission denied)"));
        fs::set_permissions(&d, fs::Permissions::from_mode(0o755)).unwrap();
    }
}

/// An HTTP/1.0 exchange, read to the close: the answer's bytes.
fn fetch(port: u16, path: &str) -> Vec<u8> {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    s.write_all(format!("GET {path} HTTP/1.0\r\n\r\n").as_bytes())
        .unwrap();
    let mut out = Vec::new();
    s.read_to_end(&mut out).unwrap();
    out
}

/// A directory of 10,000 files: the same listing as nginx's, and while shoal writes it other
/// clients are answered (the directory is read a batch at a time).
#[test]
fn ten_thousand_files() {
    let p = pair("location /big/ { autoindex on; }\nlocation = /ping { return 200 pong; }");
    let dir = p.html().join("big");
    fs::create_dir(&dir).unwrap();
    for i in 0..10_000 {
        fs::write(
            dir.join(format!("file-{i:05}-{}.txt", "n".repeat(i % 40))),
            "x",
        )
        .unwrap();
    }
    Command::new("sh")
        .arg("-c")
        .arg(format!(
            "find {} -mindepth 1 -exec touch -h -d @1672531200 {{}} +",
            dir.display()
        ))
        .status()
        .expect("find");
    let r = get(&p, "/big/");
    // The entries and `../`.
    assert_eq!(r.matches("</a>").count(), 10_001);
    // Timed: the listing alone, then pings sent while listings are being made.
    let (_, port) = p.ports();
    let started = Instant::now();
    let body = fetch(port, "/big/");
    let alone = started.elapsed();
    assert!(body.starts_with(b"HTTP/1.1 200 OK\r\n"));
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let lister = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            let mut n = 0;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                assert!(fetch(port, "/big/").len() > 1_000_000);
                n += 1;
            }
            n
        })
    };
    std::thread::sleep(Duration::from_millis(50));
    let mut worst = Duration::ZERO;
    for _ in 0..20 {
        let t = Instant::now();
        assert!(fetch(port, "/ping").ends_with(b"pong"));
        worst = worst.max(t.elapsed());
        std::thread::sleep(Duration::from_millis(10));
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let listings = lister.join().unwrap();
    eprintln!(
        "10,000 files: one listing {alone:?}; worst /ping beside {listings} listings {worst:?}"
    );
    assert!(
        worst < alone.max(Duration::from_millis(100)),
        "a ping waited {worst:?} (a listing takes {alone:?})"
    );
}
