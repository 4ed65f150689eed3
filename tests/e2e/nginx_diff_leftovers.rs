//! Issue 21's leftovers against real nginx: `log_subrequest` (an `auth_request` subrequest's
//! own access log line, decided by the subrequest's location), `$binary_remote_addr` as its raw
//! bytes (`return` and the access log's `\xHH`), `disable_symlinks on from=PART` (the part's
//! links followed, the rest's refused). Same configuration, same requests, same answers (see
//! `diff/mod.rs`).

use crate::diff::{Conf, Pair};

/// The subrequest's line comes before the main request's, in its location's log, when that
/// location (not the main request's) says `log_subrequest on`.
#[test]
fn log_subrequest_writes_auth_subrequests_as_nginx() {
    let p = Pair::with(Conf {
        // (No byte counts: the servers' names in their heads and pages differ in length.)
        http: "log_format t '$uri|$status|$request|$args';\n\
               log_subrequest on;",
        server: "access_log logs/sub.log t;\n\
         location /dir/ { auth_request /auth; }\n\
         location /sub/ { auth_request /auth403; }\n\
         location = /auth { return 204; }\n\
         location = /auth403 { return 403; }\n\
         location /int/ { log_subrequest off; auth_request /auth; }\n\
         location = /a.txt { auth_request /authoff; }\n\
         location = /authoff { log_subrequest off; return 204; }",
        ..Default::default()
    });
    for path in [
        "/dir/b.txt?x=1",
        "/sub/deep/c.txt",
        "/int/page.html",
        "/a.txt",
    ] {
        p.get(path, "");
    }
    let (n, s) = p.read_both("logs/sub.log");
    assert!(
        n.contains("/auth|204|GET /dir/b.txt?x=1 HTTP/1.1|-\n"),
        "{n}"
    );
    assert_eq!(n.lines().count(), 7, "{n}");
    assert_eq!(s, n);
}

/// Bytes past 0x7f (a realip address 192.168.200.250) are raw in `return`'s body and an
/// `add_header` value, escaped one by one in the access log, also through a `map`, and
/// hashed as they are by `split_clients`.
#[test]
fn binary_remote_addr_is_raw_bytes() {
    let p = Pair::with(Conf {
        http: "log_format b '[$binary_remote_addr][$bin]';\n\
               map $uri $bin { default $binary_remote_addr; }\n\
               split_clients $binary_remote_addr $half { 50% one; * two; }",
        server: "set_real_ip_from 127.0.0.1;\n\
         access_log logs/bin.log b;\n\
         location / { return 200 \"<$binary_remote_addr>\"; }\n\
         location /h/ { alias {HTML}/; add_header X-Bin \"[$binary_remote_addr]\"; }\n\
         location /m/ { alias {HTML}/; add_header X-Map \"[$bin]\"; }\n\
         location = /mr { return 200 \"<$bin>\"; }\n\
         location = /s { return 200 \"$half\"; }",
        ..Default::default()
    });
    for ip in ["192.168.200.250", "10.1.2.3", "2001:db8::ff:fe80"] {
        p.get("/s", &format!("X-Real-IP: {ip}\r\n"));
        for path in ["/", "/h/a.txt", "/m/a.txt", "/mr"] {
            p.check_bytes(
                format!("GET {path} HTTP/1.0\r\nHost: localhost\r\nX-Real-IP: {ip}\r\n\r\n")
                    .as_bytes(),
            );
        }
    }
    let (n, s) = p.read_both("logs/bin.log");
    assert!(
        n.starts_with("[\\xC0\\xA8\\xC8\\xFA][\\xC0\\xA8\\xC8\\xFA]\n"),
        "{n}"
    );
    assert_eq!(n.lines().count(), 15, "{n}");
    assert_eq!(s, n);
}

/// `from=$document_root`: a link in the root's own path is followed, one under it is not;
/// a part that is not the path's start (or ends inside a name) checks the whole path; a part
/// that is the whole path checks nothing.
#[test]
fn disable_symlinks_from_as_nginx() {
    let p = Pair::with(Conf {
        server: "location /real/ { disable_symlinks on from=$document_root; }\n\
         location /linkroot/ { root {HTML}/rootlink; disable_symlinks on from=$document_root; }\n\
         location /strict/ { root {HTML}/rootlink; disable_symlinks on; }\n\
         location /other/ { root {HTML}/rootlink; disable_symlinks on from=/nowhere; }\n\
         location /half/ { root {HTML}/rootlink; disable_symlinks on from={HTML}/root; }\n\
         location /slash/ { root {HTML}/rootlink; disable_symlinks on from={HTML}/rootlink/; }\n\
         location = /whole { alias {HTML}/real/link.txt; \
             disable_symlinks on from={HTML}/real/link.txt; }\n\
         location = /notwhole { alias {HTML}/real/link.txt; disable_symlinks on; }",
        ..Default::default()
    });
    let html = p.html();
    for d in ["real/d", "linkroot", "strict", "other", "half", "slash"] {
        std::fs::create_dir_all(html.join(d)).unwrap();
        std::fs::write(html.join(d).join("f.txt"), format!("{d}\n")).unwrap();
    }
    std::os::unix::fs::symlink(html.join("real/d/f.txt"), html.join("real/link.txt")).unwrap();
    std::os::unix::fs::symlink(html.join("real/d"), html.join("real/dlink")).unwrap();
    // A root that is a link: `{HTML}/rootlink/X/...` is `{HTML}/X/...`.
    std::os::unix::fs::symlink(&html, html.join("rootlink")).unwrap();
    for path in [
        "/real/d/f.txt",
        "/real/link.txt",
        "/real/dlink/f.txt",
        "/linkroot/f.txt",
        "/strict/f.txt",
        "/other/f.txt",
        "/half/f.txt",
        "/slash/f.txt",
        "/whole",
        "/notwhole",
    ] {
        p.get(path, "");
    }
}
