//! `auth_basic_user_file` against real nginx on the password schemes nginx on Debian reads:
//! `{PLAIN}`, `{SHA}`, `{SSHA}` (nginx's own), and crypt(3)'s `$apr1$`, `$1$`, `$5$`, `$6$`
//! (with and without `rounds=`), bcrypt `$2y$`/`$2b$`, each hash made by the real tools
//! (`htpasswd`, `openssl passwd`, `mkpasswd`), the right password and a wrong one.

use std::process::Command;

use crate::diff::{Conf, Pair};
use crate::nginx_diff_access::basic;

/// The standard output of `cmd args`, trimmed; the tool must exist and succeed.
fn run(cmd: &str, args: &[&str]) -> String {
    let out = Command::new(cmd)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("{cmd} runs (apache2-utils, openssl, whois): {e}"));
    assert!(
        out.status.success(),
        "{cmd} {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout)
        .expect("a hash is text")
        .trim()
        .to_string()
}

/// `{SSHA}`: base64 of SHA-1(password + salt) followed by the salt, made with openssl.
fn ssha(password: &str, salt: &[u8]) -> String {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in");
    let mut bytes = password.as_bytes().to_vec();
    bytes.extend_from_slice(salt);
    std::fs::write(&input, &bytes).unwrap();
    let digest = dir.path().join("digest");
    run(
        "openssl",
        &[
            "dgst",
            "-sha1",
            "-binary",
            "-out",
            digest.to_str().unwrap(),
            input.to_str().unwrap(),
        ],
    );
    let mut both = std::fs::read(&digest).unwrap();
    assert_eq!(both.len(), 20);
    both.extend_from_slice(salt);
    std::fs::write(&input, &both).unwrap();
    let b64 = run("openssl", &["base64", "-A", "-in", input.to_str().unwrap()]);
    format!("{{SSHA}}{b64}")
}

#[test]
fn htpasswd_schemes_as_nginx_reads_them() {
    const PW: &str = "s3cret-Ü";
    let mut lines = vec![
        format!("plain:{{PLAIN}}{PW}"),
        format!(
            "sha:{}",
            run("htpasswd", &["-nbs", "x", PW]).trim_start_matches("x:")
        ),
        format!("ssha:{}", ssha(PW, b"\x01salt\xfe")),
        format!("ssha8:{}", ssha(PW, b"12345678")),
        format!(
            "apr1:{}",
            run("htpasswd", &["-nbm", "x", PW]).trim_start_matches("x:")
        ),
        format!("apr1o:{}", run("openssl", &["passwd", "-apr1", PW])),
        format!("md5:{}", run("openssl", &["passwd", "-1", PW])),
        format!("sha256:{}", run("openssl", &["passwd", "-5", PW])),
        format!("sha512:{}", run("openssl", &["passwd", "-6", PW])),
        format!("m256:{}", run("mkpasswd", &["-m", "sha256crypt", PW])),
        format!(
            "m512r:{}",
            run("mkpasswd", &["-m", "sha512crypt", "-R", "6000", PW])
        ),
        format!("m1:{}", run("mkpasswd", &["-m", "md5crypt", PW])),
        format!(
            "bcrypt:{}",
            run("htpasswd", &["-nbB", "-C", "5", "x", PW]).trim_start_matches("x:")
        ),
        format!(
            "bcrypt2b:{}",
            run("mkpasswd", &["-m", "bcrypt", "-R", "5", PW])
        ),
        format!("des:{}", run("mkpasswd", &["-m", "descrypt", "s3cret"])),
    ];
    let users: Vec<String> = lines
        .iter()
        .map(|l| l.split(':').next().unwrap().to_string())
        .collect();
    // The prefixes the test means to cover are there (a tool that changed its default would
    // make a line of another scheme).
    let text = lines.join("\n");
    for scheme in [
        "{PLAIN}",
        "{SHA}",
        "{SSHA}",
        ":$apr1$",
        ":$1$",
        ":$5$",
        ":$6$",
        ":$6$rounds=6000$",
        ":$2y$05$",
        ":$2b$05$",
    ] {
        assert!(text.contains(scheme), "no {scheme} line:\n{text}");
    }
    lines.push(String::new());
    let p = Pair::with(Conf {
        server: "location /auth/ { alias {HTML}/; auth_basic \"Schemes\"; \
                 auth_basic_user_file {HTML}/pw; add_header X-User $remote_user always; }",
        ..Default::default()
    });
    std::fs::write(p.html().join("pw"), lines.join("\n")).unwrap();
    for user in &users {
        let password = if user == "des" { "s3cret" } else { PW };
        let ok = p.get("/auth/a.txt", &basic(user, password));
        assert!(ok.starts_with("HTTP/1.1 200"), "{user}: {ok}");
        let bad = p.get("/auth/a.txt", &basic(user, "s3cret-u"));
        assert!(bad.starts_with("HTTP/1.1 401"), "{user}: {bad}");
        // DES reads 8 characters: a longer password with the same 8 passes (on both).
        if user == "des" {
            p.get("/auth/a.txt", &basic(user, "s3cret-more"));
        }
    }
    // The log lines for a wrong password and an unknown user, as nginx writes them.
    p.get("/auth/a.txt", &basic("nobody", PW));
    let lines = |log: String| -> Vec<String> {
        log.lines()
            .filter(|l| l.contains("user \"") || l.contains("password mismatch"))
            .map(|l| l[l.find(" [").unwrap()..].to_string())
            .map(|l| {
                let (level, rest) = l.split_at(l.find("] ").unwrap() + 2);
                format!("{level}{}", &rest[rest.find(": ").unwrap() + 2..])
            })
            .map(|l| l[..l.find(", client").unwrap_or(l.len())].to_string())
            .map(|l| {
                // The connection number differs: `*N ` is dropped.
                match l.find("] *") {
                    Some(at) => {
                        let after = &l[at + 3..];
                        format!("{}{}", &l[..at + 2], &after[after.find(' ').unwrap() + 1..])
                    }
                    None => l,
                }
            })
            .collect()
    };
    let (n, s) = (lines(p.nginx_log()), lines(p.shoal_log()));
    assert!(n.len() > users.len(), "{n:#?}");
    assert_eq!(s, n, "auth_basic log lines: shoal (left), nginx (right)");
}
