//! WebDAV, `random_index` and `flv` against real nginx.
//!
//! DAV: each server writes under its own prefix (`root dav;` is relative), the same requests
//! go to both, and after them the two trees must be the same: names, kinds, modes, sizes,
//! contents, and the times that are set on purpose (a PUT's `Date`, what a COPY keeps).
//! The methods run on the worker in `/dav/` and on the thread pool in `/pool/` (`aio
//! threads`). `random_index`: the choice varies, so shoal alone is asked many times.

use std::fs;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;
use std::time::{Duration, UNIX_EPOCH};

use crate::common::client::exchange_text;
use crate::diff::{Conf, Pair};

const DAV: &str = "\
location /dav/ {
    root dav;
    dav_methods PUT DELETE MKCOL COPY MOVE;
    dav_access user:rw group:rw all:r;
    create_full_put_path on;
    client_max_body_size 1k;
}
location /plain/ { root dav; dav_methods PUT MKCOL; }
location /pool/ { root dav; dav_methods put delete mkcol copy move; aio threads; }
location /deep/ { root dav; dav_methods DELETE; min_delete_depth 3; }
location /ro/ { root dav; }
location /tf/ { root dav; try_files $uri $uri/ =404; dav_methods PUT DELETE MKCOL; }
";

/// A 2020 time, set on fixtures a COPY must keep.
const OLD: u64 = 1_577_836_800;

fn set_mtime(p: &Path, secs: u64) {
    let t = UNIX_EPOCH + Duration::from_secs(secs);
    fs::File::open(p)
        .and_then(|f| f.set_times(fs::FileTimes::new().set_accessed(t).set_modified(t)))
        .expect("setting a fixture's time");
}

/// The DAV root in a prefix, writable by the workers, with a tree to copy.
fn dav_root(prefix: &Path) {
    let root = prefix.join("dav");
    for d in ["dav/src/e", "pool/src/e", "deep/a/b", "ro", "plain", "tf/d"] {
        fs::create_dir_all(root.join(d)).expect("a DAV directory");
    }
    for area in ["dav", "pool"] {
        let src = root.join(area).join("src");
        fs::write(src.join("f1"), "one\n").unwrap();
        fs::write(src.join("e/f2"), "two\n").unwrap();
        fs::write(root.join(area).join("a.txt"), "hello a\n").unwrap();
    }
    fs::write(root.join("deep/a/b/c"), "c\n").unwrap();
    fs::write(root.join("deep/a/x"), "x\n").unwrap();
    fs::write(root.join("ro/r.txt"), "r\n").unwrap();
    fs::write(root.join("tf/t.txt"), "t\n").unwrap();
    let mut stack = vec![root.clone()];
    while let Some(d) = stack.pop() {
        fs::set_permissions(&d, fs::Permissions::from_mode(0o777)).unwrap();
        for e in fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else {
                fs::set_permissions(&p, fs::Permissions::from_mode(0o646)).unwrap();
                set_mtime(&p, OLD);
            }
        }
    }
    for area in ["dav", "pool"] {
        set_mtime(&root.join(area).join("src/e"), OLD);
    }
}

/// What a tree holds, one line per entry: path, kind, mode, size or contents, and the time
/// when it is one set on purpose (older than this test).
fn tree(root: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            let m = fs::symlink_metadata(&p).unwrap();
            let name = p.strip_prefix(root).unwrap().display().to_string();
            let time = if (m.mtime() as u64) < 1_700_000_000 {
                m.mtime().to_string()
            } else {
                "now".into()
            };
            if m.is_dir() {
                out.push(format!("{name}/ {:o} {time}", m.mode() & 0o7777));
                stack.push(p);
            } else {
                let body = fs::read(&p).unwrap();
                out.push(format!(
                    "{name} {:o} {time} {:?}",
                    m.mode() & 0o7777,
                    String::from_utf8_lossy(&body)
                ));
            }
        }
    }
    out.sort();
    out
}

fn req(method: &str, path: &str, headers: &str, body: &str) -> Vec<u8> {
    let length = if body.is_empty() && !matches!(method, "PUT") {
        String::new()
    } else {
        format!("Content-Length: {}\r\n", body.len())
    };
    format!(
        "{method} {path} HTTP/1.1\r\nHost: localhost\r\n{length}{headers}Connection: close\r\n\r\n{body}"
    )
    .into_bytes()
}

#[test]
fn dav_methods_change_files_as_nginx() {
    let p = Pair::new(DAV);
    let (np, sp) = p.prefixes();
    dav_root(&np);
    dav_root(&sp);
    for area in ["/dav", "/pool"] {
        let a = |s: &str| format!("{area}{s}");
        let date = "Date: Sun, 01 Jan 2023 00:00:00 GMT\r\n";
        // PUT: new (201 and Location), replaced (204), with a Date, chunked, empty, escaped,
        // into missing directories (made with create_full_put_path), over a directory, to a
        // collection, with a range, without a length.
        p.check(&req("PUT", &a("/new.txt"), "", "new body\n"));
        p.check(&req("PUT", &a("/new.txt"), date, "replaced\n"));
        p.check(&req("PUT", &a("/sp%20ace%3F.txt"), "", "x"));
        p.check(&req("PUT", &a("/empty"), "", ""));
        p.check(
            format!(
                "PUT {area}/chunked HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: chunked\r\n\
                 Connection: close\r\n\r\n3\r\nabc\r\n4\r\ndefg\r\n0\r\n\r\n"
            )
            .as_bytes(),
        );
        p.check(&req("PUT", &a("/made/on/the/way"), "", "deep\n"));
        p.check(&req("PUT", &a("/src"), "", "x"));
        p.check(&req("PUT", &a("/src/"), "", "x"));
        p.check(&req("PUT", &a("/r"), "Content-Range: bytes 0-0/1\r\n", "x"));
        p.check(
            format!("PUT {area}/nolength HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
                .as_bytes(),
        );
        // HTTP/1.0 without Host: the Location names the local address.
        p.check(format!("PUT {area}/old10 HTTP/1.0\r\nContent-Length: 2\r\n\r\nok").as_bytes());
        // MKCOL.
        p.check(&req("MKCOL", &a("/m/"), "", ""));
        p.check(&req("MKCOL", &a("/m/"), "", ""));
        p.check(&req("MKCOL", &a("/m2"), "", ""));
        p.check(&req("MKCOL", &a("/x/y/"), "", ""));
        p.check(&req("MKCOL", &a("/m3/"), "", "ab"));
        p.check(&req("MKCOL", &a("/a.txt/q/"), "", ""));
        p.check(&req("PUT", &a("/m/f"), "", "in m\n"));
        // COPY and MOVE: Destination forms, Overwrite, Depth, collections.
        p.check(&req("COPY", &a("/a.txt"), "", ""));
        p.check(&req(
            "COPY",
            &a("/a.txt"),
            &format!("Destination: {area}/b.txt\r\n"),
            "",
        ));
        let abs = format!("Destination: http://localhost:9999{area}/b2.txt\r\n");
        p.check(&req("COPY", &a("/a.txt"), &abs, ""));
        let other = format!("Destination: http://other{area}/b3.txt\r\n");
        p.check(&req("COPY", &a("/a.txt"), &other, ""));
        let https = format!("Destination: https://localhost{area}/b3.txt\r\n");
        p.check(&req("COPY", &a("/a.txt"), &https, ""));
        p.check(&req(
            "COPY",
            &a("/a.txt"),
            "Destination: http://localhost\r\n",
            "",
        ));
        let to_b = format!("Destination: {area}/b.txt\r\n");
        p.check(&req(
            "COPY",
            &a("/a.txt"),
            &format!("{to_b}Overwrite: F\r\n"),
            "",
        ));
        p.check(&req(
            "COPY",
            &a("/a.txt"),
            &format!("{to_b}Overwrite: x\r\n"),
            "",
        ));
        p.check(&req(
            "COPY",
            &a("/a.txt"),
            &format!("{to_b}Depth: 0\r\n"),
            "",
        ));
        p.check(&req(
            "COPY",
            &a("/a.txt"),
            &format!("{to_b}Depth: 1\r\n"),
            "",
        ));
        p.check(&req(
            "COPY",
            &a("/a.txt"),
            &format!("Destination: {area}/m/\r\n"),
            "",
        ));
        p.check(&req(
            "COPY",
            &a("/a.txt"),
            &format!("Destination: {area}/m\r\n"),
            "",
        ));
        p.check(&req(
            "COPY",
            &a("/a.txt"),
            &format!("Destination: {area}/../x\r\n"),
            "",
        ));
        let dots = format!("Destination: {area}/q/%2e%2e/x\r\n");
        p.check(&req("COPY", &a("/a.txt"), &dots, ""));
        let escaped = format!("Destination: {area}/n%20s?arg=1\r\n");
        p.check(&req("COPY", &a("/a.txt"), &escaped, ""));
        let missing = format!("Destination: {area}/nodir/x\r\n");
        p.check(&req("COPY", &a("/a.txt"), &missing, ""));
        p.check(&req(
            "COPY",
            &a("/nosuch"),
            &format!("Destination: {area}/x\r\n"),
            "",
        ));
        p.check(&req(
            "COPY",
            &a("/src/"),
            &format!("Destination: {area}/copy/\r\n"),
            "",
        ));
        p.check(&req(
            "COPY",
            &a("/src"),
            &format!("Destination: {area}/copy2\r\n"),
            "",
        ));
        // Over an existing tree (removed first).
        let again = format!("Destination: {area}/copy/\r\nDepth: 0\r\n");
        p.check(&req("COPY", &a("/src/"), &again, ""));
        let mv = format!("Destination: {area}/mv/deep/b.txt\r\n");
        p.check(&req("MOVE", &a("/b.txt"), &mv, ""));
        let mv = format!("Destination: {area}/b3.txt\r\n");
        p.check(&req("MOVE", &a("/b2.txt"), &mv, ""));
        let mv = format!("Destination: {area}/moved/\r\n");
        p.check(&req("MOVE", &a("/copy/"), &format!("{mv}Depth: 0\r\n"), ""));
        p.check(&req("MOVE", &a("/copy/"), &mv, ""));
        let mv = format!("Destination: {area}/nod/moved/\r\n");
        p.check(&req("MOVE", &a("/moved/"), &mv, ""));
        let mv = format!("Destination: {area}/m/\r\nOverwrite: F\r\n");
        p.check(&req("MOVE", &a("/moved/"), &mv, ""));
        let mv = format!("Destination: {area}/m/\r\n");
        p.check(&req("MOVE", &a("/moved/"), &mv, ""));
        // DELETE: a directory needs its slash and Depth infinity; a file Depth 0 or infinity.
        p.check(&req("DELETE", &a("/m"), "", ""));
        p.check(&req("DELETE", &a("/m/"), "Depth: 1\r\n", ""));
        p.check(&req("DELETE", &a("/m/"), "Depth: bogus\r\n", ""));
        p.check(&req("DELETE", &a("/new.txt"), "Depth: 1\r\n", ""));
        p.check(&req("DELETE", &a("/new.txt/"), "", ""));
        p.check(&req("DELETE", &a("/new.txt"), "", "x"));
        p.check(&req("DELETE", &a("/new.txt"), "Depth: 0\r\n", ""));
        p.check(&req("DELETE", &a("/new.txt"), "", ""));
        p.check(&req("DELETE", &a("/m/"), "Depth: infinity\r\n", ""));
    }
    // Too large, as declared or as sent chunked.
    p.check(&req("PUT", "/dav/big", "", &"x".repeat(2000)));
    p.check(
        format!(
            "PUT /dav/bigc HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: chunked\r\n\
             Connection: close\r\n\r\n7d0\r\n{}\r\n0\r\n\r\n",
            "y".repeat(2000)
        )
        .as_bytes(),
    );
    // Without create_full_put_path, lower-case methods, min_delete_depth, no dav_methods.
    p.check(&req("PUT", "/plain/no/dir", "", "x"));
    p.check(&req("MKCOL", "/plain/made/", "", ""));
    p.check(&req("DELETE", "/plain/made/", "", ""));
    p.check(&req("put", "/pool/lower", "", "x"));
    p.check(&req("DELETE", "/deep/a", "", ""));
    p.check(&req("DELETE", "/deep/a/x", "", ""));
    p.check(&req("DELETE", "/deep/a/b/c", "", ""));
    p.check(&req("DELETE", "/deep/a/b/", "", ""));
    p.check(&req("PUT", "/ro/r.txt", "", "x"));
    p.check(&req("DELETE", "/ro/r.txt", "", ""));
    // After try_files: on the name it found, else its fallback.
    p.check(&req("PUT", "/tf/t.txt", "", "replaced"));
    p.check(&req("PUT", "/tf/new.txt", "", "x"));
    p.check(&req("MKCOL", "/tf/d/", "", ""));
    p.check(&req("DELETE", "/tf/t.txt", "", ""));
    // Out of the root: the URI is normalised first (a location without DAV), or refused.
    p.check(&req("PUT", "/dav/../ro/esc", "", "x"));
    p.check(&req("PUT", "/dav/%2e%2e/%2e%2e/esc", "", "x"));
    p.check(&req("PUT", "/../esc", "", "x"));
    // A kept-alive connection: the next request after a PUT and a refused DELETE body.
    p.check(
        b"PUT /dav/ka HTTP/1.1\r\nHost: localhost\r\nContent-Length: 2\r\n\r\nkaGET /dav/ka HTTP/1.1\r\n\
          Host: localhost\r\n\r\nDELETE /dav/ka HTTP/1.1\r\nHost: localhost\r\nContent-Length: 1\r\n\
          \r\nzDELETE /dav/ka HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n",
    );
    let (n, s) = (tree(&np.join("dav")), tree(&sp.join("dav")));
    assert_eq!(n, s, "the trees differ (nginx first)");
    // What the requests made, as nginx made it.
    for line in [
        "dav/made/on/the/way 664 now \"deep\\n\"",
        "pool/chunked 600 now \"abcdefg\"",
        "dav/b3.txt 644 1577836800 \"hello a\\n\"",
        "pool/mv/deep/ 700 now",
    ] {
        assert!(n.contains(&line.to_string()), "{line} not in {n:#?}");
    }
}

/// Many PUTs of the same file at once: every answer is nginx's 201 or 204, and the file is one
/// of the bodies, whole (each is renamed into place).
#[test]
fn concurrent_puts_leave_one_whole_body() {
    let p = Pair::new(DAV);
    let (_, sp) = p.prefixes();
    dav_root(&sp);
    let (_, port) = p.ports();
    let bodies: Vec<String> = (0..16).map(|i| format!("{i:02}").repeat(450)).collect();
    let handles: Vec<_> = bodies
        .iter()
        .cloned()
        .map(|b| std::thread::spawn(move || exchange_text(port, &req("PUT", "/dav/same", "", &b))))
        .collect();
    for h in handles {
        let answer = h.join().unwrap();
        assert!(
            answer.starts_with("HTTP/1.1 201 ") || answer.starts_with("HTTP/1.1 204 "),
            "{answer}"
        );
    }
    let kept = fs::read_to_string(sp.join("dav/dav/same")).unwrap();
    assert!(bodies.contains(&kept), "a mixed file: {kept:.40}");
}

#[test]
fn random_index_answers_as_nginx_and_picks_among_the_files() {
    let p = Pair::with(Conf {
        server: "location /rnd/ { random_index on; }\n\
                 location /rnd/sub/ { }\n\
                 location /rndoff/ { alias {HTML}/rnd/; random_index off; }",
        ..Default::default()
    });
    let dir = p.html().join("rnd");
    fs::create_dir_all(dir.join("empty")).unwrap();
    fs::create_dir_all(dir.join("sub")).unwrap();
    fs::create_dir_all(dir.join("only")).unwrap();
    fs::create_dir_all(dir.join("dironly/d")).unwrap();
    for (name, text) in [("a.html", "A\n"), ("b.txt", "B\n"), ("c.txt", "C\n")] {
        fs::write(dir.join(name), text).unwrap();
    }
    fs::write(dir.join(".hidden"), "H\n").unwrap();
    fs::write(dir.join("only/one.txt"), "ONE\n").unwrap();
    fs::write(dir.join("sub/s.txt"), "S\n").unwrap();
    std::os::unix::fs::symlink("a.html", dir.join("link.html")).unwrap();
    // One candidate, none (the index module's 403), no directory, inherited into a nested
    // location, off, other methods.
    p.get("/rnd/only/?x=1", "");
    p.get("/rnd/empty/", "");
    p.get("/rnd/dironly/", "");
    p.get("/rnd/nodir/", "");
    p.get("/rnd/sub/", "");
    p.get("/rndoff/", "");
    p.check(
        b"PUT /rnd/ HTTP/1.1\r\nHost: localhost\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
    );
    // The choice: always a file of the directory (never the dot file, the link or a
    // directory), and more than one of them over many requests.
    let (_, port) = p.ports();
    let mut seen = std::collections::BTreeSet::new();
    for _ in 0..60 {
        let answer = exchange_text(
            port,
            b"GET /rnd/ HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n",
        );
        assert!(answer.starts_with("HTTP/1.1 200 OK\r\n"), "{answer}");
        let body = answer.rsplit("\r\n\r\n").next().unwrap().to_string();
        assert!(["A\n", "B\n", "C\n"].contains(&body.as_str()), "{answer}");
        seen.insert(body);
    }
    assert!(seen.len() > 1, "always the same file: {seen:?}");
}

#[test]
fn flv_answers_as_nginx() {
    let mut flv = b"FLV\x01\x05\x00\x00\x00\x09\x00\x00\x00\x00".to_vec();
    flv.extend(b"abcdefghijklmnopqrstuvwxyz0123456789");
    let p = Pair::new(
        "location ~ \\.flv$ { flv; }\n\
         location /noetag/ { etag off; location ~ \\.flv$ { flv; } }",
    );
    let html = p.html();
    fs::write(html.join("v.flv"), &flv).unwrap();
    fs::create_dir_all(html.join("dir.flv")).unwrap();
    fs::create_dir_all(html.join("noetag")).unwrap();
    fs::write(html.join("noetag/n.flv"), &flv).unwrap();
    for f in ["v.flv", "noetag/n.flv"] {
        set_mtime(&html.join(f), crate::diff::MTIME);
    }
    for q in [
        "",
        "?start=20",
        "?a=1&start=0",
        "?START=30",
        "?start=49",
        "?start=999",
    ] {
        p.check_bytes(
            format!("GET /v.flv{q} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
                .as_bytes(),
        );
    }
    p.check_bytes(b"GET /v.flv?start=1x HTTP/1.0\r\n\r\n");
    p.check_bytes(b"GET /noetag/n.flv?start=20 HTTP/1.0\r\n\r\n");
    for range in ["0-3", "10-20", "13-", "-5", "99-"] {
        p.check_bytes(
            format!(
                "GET /v.flv?start=20 HTTP/1.1\r\nHost: localhost\r\nRange: bytes={range}\r\n\
                 Connection: close\r\n\r\n"
            )
            .as_bytes(),
        );
    }
    p.head("/v.flv?start=20", "");
    p.get("/v.flv?start=20", "If-None-Match: \"63b0cd00-23\"\r\n");
    p.get(
        "/v.flv?start=20",
        &format!("If-Modified-Since: {}\r\n", crate::diff::MTIME_HTTP),
    );
    p.check(b"POST /v.flv HTTP/1.1\r\nHost: localhost\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
    p.get("/dir.flv", "");
    p.get("/dir.flv/", "");
    p.get("/none.flv", "");
}

/// The directives as `-t` reads them: values, duplicates (a warning for a method named twice),
/// contexts and argument counts.
#[test]
fn directives_are_read_as_nginx_reads_them() {
    for (http, server) in [
        (
            "",
            "location / { dav_methods PUT; dav_methods DELETE put; }",
        ),
        ("", "location / { dav_methods off PUT; }"),
        ("", "location / { dav_methods PROPFIND; }"),
        (
            "dav_methods PUT; create_full_put_path on; min_delete_depth 1; dav_access all:r;",
            "",
        ),
        ("", "location / { dav_access user:rw; dav_access user:r; }"),
        ("", "location / { dav_access user:x; }"),
        ("", "location / { dav_access group:rw all:r; }"),
        ("", "location / { dav_access a b c d; }"),
        ("", "location / { min_delete_depth x; }"),
        ("", "location / { min_delete_depth 2; min_delete_depth 3; }"),
        ("", "location / { create_full_put_path maybe; }"),
        ("", "random_index on;"),
        ("", "location / { random_index on; random_index off; }"),
        ("", "flv;"),
        ("", "location / { flv; flv; }"),
        ("", "location / { flv x; }"),
    ] {
        let (nginx, shoal) = crate::diff::both_test(http, server);
        assert_eq!(nginx, shoal, "for {http:?} / {server:?}");
    }
}
