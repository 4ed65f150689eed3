//! The access phase against real nginx: `allow`/`deny`, `satisfy`, `auth_basic` with htpasswd
//! files the real tools make, `limit_req` and `limit_conn`; same configuration, same requests,
//! same answers (see `diff/mod.rs` for what is normalised).

use std::process::Command;

use crate::diff::{Conf, Pair};

/// `Authorization: Basic` for `user:password`.
pub(crate) fn basic(user: &str, password: &str) -> String {
    const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let raw = format!("{user}:{password}").into_bytes();
    let mut out = String::new();
    for chunk in raw.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(ALPHABET[(n >> (18 - 6 * i) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    format!("Authorization: Basic {out}\r\n")
}

/// Appends a user to an htpasswd file with Debian's `htpasswd` (`-m` apr1, `-B` bcrypt, `-s`
/// SHA, `-d` crypt, `-p` plain).
fn htpasswd(file: &std::path::Path, flag: &str, user: &str, password: &str) {
    let mut c = Command::new("htpasswd");
    c.arg("-b");
    if !file.exists() {
        c.arg("-c");
    }
    let out = c
        .arg(flag)
        .arg(file)
        .arg(user)
        .arg(password)
        .output()
        .expect("htpasswd (apache2-utils) runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn allow_and_deny_by_address() {
    let p = Pair::new(
        "location /deny/ { alias {HTML}/; deny 127.0.0.1; }\n\
         location /net/ { alias {HTML}/; allow 10.0.0.0/8; deny all; }\n\
         location /ok/ { alias {HTML}/; allow 127.0.0.0/8; deny all; }\n\
         location /v6/ { alias {HTML}/; deny ::1; allow all; }\n\
         location /inherit/ { alias {HTML}/; deny all;\n\
             location /inherit/open/ { alias {HTML}/; allow all; } }\n\
         location /page/ { alias {HTML}/; deny all; error_page 403 /index.html; }",
    );
    for u in [
        "/deny/a.txt",
        "/net/a.txt",
        "/ok/a.txt",
        "/v6/a.txt",
        "/inherit/a.txt",
        "/inherit/open/a.txt",
        "/page/a.txt",
    ] {
        p.get(u, "");
    }
    assert!(p.shoal_log().contains("access forbidden by rule"));
}

#[test]
fn auth_basic_with_every_htpasswd_format() {
    let p = Pair::with(Conf {
        server: "location /auth/ { alias {HTML}/; auth_basic \"Secret Area\"; \
                 auth_basic_user_file {HTML}/pw; add_header X-User $remote_user always; }\n\
                 location /off/ { alias {HTML}/; auth_basic off; auth_basic_user_file {HTML}/pw; }\n\
                 location /nofile/ { alias {HTML}/; auth_basic on; auth_basic_user_file {HTML}/none; }",
        ..Default::default()
    });
    let pw = p.html().join("pw");
    for (flag, user) in [
        ("-m", "apr"),
        ("-B", "bcrypt"),
        ("-s", "sha"),
        ("-d", "des"),
        ("-p", "raw"),
    ] {
        htpasswd(&pw, flag, user, "s3cret");
    }
    // `{PLAIN}` is nginx's plain-text scheme; `htpasswd -p`'s bare text is not (nginx reads it
    // as a crypt(3) hash, which fails).
    let mut text = std::fs::read_to_string(&pw).unwrap();
    text.push_str("plain:{PLAIN}s3cret\n");
    std::fs::write(&pw, text).unwrap();
    p.get("/auth/a.txt", "");
    for user in ["apr", "bcrypt", "sha", "des", "plain"] {
        let r = p.get("/auth/a.txt", &basic(user, "s3cret"));
        assert!(r.starts_with("HTTP/1.1 200"), "{user}: {r}");
        p.get("/auth/a.txt", &basic(user, "wrong"));
    }
    p.get("/auth/a.txt", &basic("raw", "s3cret"));
    p.get("/auth/a.txt", &basic("nobody", "s3cret"));
    p.get("/auth/a.txt", "Authorization: Bearer xyz\r\n");
    p.get("/off/a.txt", "");
    p.get("/nofile/a.txt", &basic("apr", "s3cret"));
}

#[test]
fn satisfy_any_and_all() {
    let p = Pair::new(
        "location /all/ { alias {HTML}/; deny all; auth_basic on; auth_basic_user_file {HTML}/pw; }\n\
         location /any/ { alias {HTML}/; satisfy any; deny all; auth_basic on; \
             auth_basic_user_file {HTML}/pw; }\n\
         location /anyok/ { alias {HTML}/; satisfy any; allow all; auth_basic on; \
             auth_basic_user_file {HTML}/pw; }",
    );
    htpasswd(&p.html().join("pw"), "-m", "u", "p");
    for u in ["/all/a.txt", "/any/a.txt", "/anyok/a.txt"] {
        p.get(u, "");
        p.get(u, &basic("u", "p"));
        p.get(u, &basic("u", "bad"));
    }
}

#[test]
fn limit_req_refuses_over_the_rate() {
    let p = Pair::with(Conf {
        http: "limit_req_zone $binary_remote_addr zone=one:1m rate=1r/m;\n\
               limit_req_zone $uri zone=per_uri:1m rate=1r/m;",
        server: "location /one/ { alias {HTML}/; limit_req zone=one; }\n\
                 location /burst/ { alias {HTML}/; limit_req zone=per_uri burst=2 nodelay; }\n\
                 location /status/ { alias {HTML}/; limit_req zone=per_uri; \
                     limit_req_status 429; add_header X-L $limit_req_status always; }",
        ..Default::default()
    });
    // Each server counts its own: the same sequence gets the same answers.
    for _ in 0..3 {
        p.get("/one/a.txt", "");
    }
    for _ in 0..4 {
        p.get("/burst/a.txt", "");
    }
    for _ in 0..2 {
        p.get("/status/a.txt", "");
    }
    assert!(p.shoal_log().contains("limiting requests, excess:"));
}
