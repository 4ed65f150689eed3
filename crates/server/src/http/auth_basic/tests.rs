use std::process::Command;

use super::*;

/// Runs a password tool; its output, trimmed.
fn tool(cmd: &str, args: &[&str]) -> String {
    let out = Command::new(cmd)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("{cmd} (apache2-utils, openssl, whois): {e}"));
    assert!(out.status.success(), "{cmd} {args:?}: {out:?}");
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

fn header(user: &str, password: &str) -> Vec<u8> {
    format!(
        "Basic {}",
        crypt::base64_encode(format!("{user}:{password}").as_bytes())
    )
    .into_bytes()
}

fn loc(file: &Path) -> AuthBasicLoc {
    AuthBasicLoc {
        realm: Some(Template::compile("Restricted").unwrap()),
        user_file: Some(UserFile::Path(file.to_path_buf())),
    }
}

fn no_vars(_: &Template) -> String {
    unreachable!("no variables here")
}

fn run(lc: &AuthBasicLoc, authorization: Option<&[u8]>) -> Outcome {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(lc.check(authorization, &mut no_vars))
}

/// A file made by the real tools, every line's user with the password "secret".
#[test]
fn files_made_by_the_tools() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("htpasswd");
    let f = file.to_str().unwrap();
    tool("htpasswd", &["-bc", f, "apr", "secret"]);
    tool("htpasswd", &["-bm", f, "md5", "secret"]);
    tool("htpasswd", &["-bs", f, "sha", "secret"]);
    tool("htpasswd", &["-bB", "-C", "5", f, "bcrypt", "secret"]);
    tool("htpasswd", &["-bd", f, "des", "secret"]);
    tool("htpasswd", &["-bp", f, "plain", "secret"]);
    let mut extra = String::new();
    for (user, args) in [
        ("o1", &["passwd", "-1", "secret"][..]),
        ("o5", &["passwd", "-5", "secret"]),
        ("o6", &["passwd", "-6", "secret"]),
        ("oapr", &["passwd", "-apr1", "secret"]),
    ] {
        extra += &format!("{user}:{}\n", tool("openssl", args));
    }
    for (user, args) in [
        ("m512", &["-m", "sha-512", "-R", "7000", "secret"][..]),
        ("m256", &["-m", "sha-256", "secret"]),
        ("mmd5", &["-m", "md5crypt", "secret"]),
        ("mbsdi", &["-m", "bsdicrypt", "secret"]),
        ("m2b", &["-m", "bcrypt", "-R", "5", "secret"]),
        ("myes", &["secret"]),
    ] {
        extra += &format!("{user}:{}\n", tool("mkpasswd", args));
    }
    let mut text = std::fs::read_to_string(&file).unwrap();
    text += &extra;
    text += "pl:{PLAIN}secret\n# who:{PLAIN}secret\n";
    std::fs::write(&file, &text).unwrap();
    let lc = loc(&file);
    for user in [
        "apr", "md5", "sha", "bcrypt", "des", "o1", "o5", "o6", "oapr", "m512", "m256", "mmd5",
        "mbsdi", "m2b", "myes", "pl",
    ] {
        let ok = run(&lc, Some(&header(user, "secret")));
        assert_eq!(ok.answer, Answer::Ok, "{user}: {text}");
        let bad = run(&lc, Some(&header(user, "Secret")));
        assert_eq!(bad.answer, Answer::Status(401), "{user}");
        assert_eq!(
            bad.lines,
            vec![(Level::Error, format!("user \"{user}\": password mismatch"))]
        );
        assert_eq!(
            bad.www_authenticate.as_deref(),
            Some("Basic realm=\"Restricted\"")
        );
    }
    // htpasswd -p's bare text is no format nginx reads either.
    assert_eq!(
        run(&lc, Some(&header("plain", "secret"))).answer,
        Answer::Status(401)
    );
    let missing = run(&lc, Some(&header("# who", "secret")));
    assert_eq!(missing.answer, Answer::Status(401));
    assert_eq!(
        missing.lines,
        vec![(
            Level::Error,
            format!("user \"# who\" was not found in \"{}\"", file.display())
        )]
    );
}

#[test]
fn no_credentials_and_off() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("htpasswd");
    std::fs::write(&file, "alice:{PLAIN}secret\n").unwrap();
    let lc = loc(&file);
    for h in [
        None,
        Some(&b"Bearer abc"[..]),
        Some(b"Basic "),
        Some(b"Basic !!!!"),
        Some(b"Basic OnNlY3JldA=="),
        Some(b"Basic YWxpY2U="),
    ] {
        let o = run(&lc, h);
        assert_eq!(o.answer, Answer::Status(401), "{h:?}");
        assert_eq!(
            o.lines,
            vec![(
                Level::Info,
                "no user/password was provided for basic authentication".into()
            )]
        );
    }
    assert_eq!(
        run(&lc, Some(b"bAsIc    YWxpY2U6c2VjcmV0")).answer,
        Answer::Ok
    );
    let off = AuthBasicLoc {
        realm: Some(Template::compile("off").unwrap()),
        ..lc.clone()
    };
    assert_eq!(run(&off, None).answer, Answer::Declined);
    let no_file = AuthBasicLoc {
        realm: lc.realm.clone(),
        user_file: None,
    };
    assert_eq!(run(&no_file, None).answer, Answer::Declined);
    assert_eq!(run(&AuthBasicLoc::default(), None).answer, Answer::Declined);
}

#[test]
fn file_errors_as_nginx() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("nope");
    let o = run(&loc(&missing), Some(&header("a", "b")));
    assert_eq!(o.answer, Answer::Status(403));
    assert_eq!(
        o.lines,
        vec![(
            Level::Error,
            format!(
                "open() \"{}\" failed (2: No such file or directory)",
                missing.display()
            )
        )]
    );
    let o = run(&loc(dir.path()), Some(&header("a", "b")));
    assert_eq!(o.answer, Answer::Status(500));
    assert_eq!(
        o.lines,
        vec![(
            Level::Crit,
            format!(
                "pread() \"{}\" failed (21: Is a directory)",
                dir.path().display()
            )
        )]
    );
}

#[test]
fn variables_in_realm_and_path() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("users"), "bob:{PLAIN}pw\n").unwrap();
    crate::variables::begin_config();
    let lc = AuthBasicLoc {
        realm: Some(Template::compile("Zone $host").unwrap()),
        user_file: Some(UserFile::Template {
            template: Template::compile("$host").unwrap(),
            conf_prefix: dir.path().to_path_buf(),
        }),
    };
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let mut eval = |t: &Template| {
        if t.pieces.len() == 1 {
            "users".to_string()
        } else {
            "Zone example".to_string()
        }
    };
    let o = rt.block_on(lc.check(None, &mut eval));
    assert_eq!(
        o.www_authenticate.as_deref(),
        Some("Basic realm=\"Zone example\"")
    );
    let h = header("bob", "pw");
    assert_eq!(
        rt.block_on(lc.check(Some(&h), &mut eval)).answer,
        Answer::Ok
    );
}

#[test]
fn remote_user_whatever_the_check() {
    assert_eq!(
        credentials(Some(&header("alice", "x:y"))),
        Some(Credentials {
            user: b"alice".to_vec(),
            password: b"x:y".to_vec()
        })
    );
    assert_eq!(credentials(Some(b"Basic")), None);
    assert_eq!(
        credentials(Some(b"Basic YWxpY2U6eA==junk")).unwrap().user,
        b"alice"
    );
}

#[test]
fn inherited_one_by_one() {
    let parent = AuthBasicLoc {
        realm: Some(Template::compile("r").unwrap()),
        user_file: Some(UserFile::Path("/p".into())),
    };
    let mut child = AuthBasicLoc {
        realm: Some(Template::compile("off").unwrap()),
        user_file: None,
    };
    child.merge(&parent);
    assert_eq!(child.user_file, Some(UserFile::Path("/p".into())));
    assert_eq!(child.realm, Some(Template::compile("off").unwrap()));
}

/// A costly check waits on the pool, not on the worker: a bcrypt check of cost 10 (tens of
/// ms) ends after a 3 ms timer on the same current_thread runtime, though it was polled first.
#[test]
fn costly_checks_leave_the_worker_free() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("htpasswd");
    let f = file.to_str().unwrap();
    tool("htpasswd", &["-bcB", "-C", "10", f, "slow", "secret"]);
    let lc = loc(&file);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let order = std::cell::RefCell::new(Vec::new());
    let h = header("slow", "secret");
    rt.block_on(async {
        let check = async {
            let mut eval = no_vars;
            let o = lc.check(Some(&h), &mut eval).await;
            order.borrow_mut().push("check");
            o
        };
        let ticker = async {
            for _ in 0..3 {
                tokio::time::sleep(std::time::Duration::from_millis(1)).await;
            }
            order.borrow_mut().push("timer");
        };
        let (outcome, ()) = tokio::join!(check, ticker);
        assert_eq!(outcome.answer, Answer::Ok);
    });
    assert_eq!(*order.borrow(), ["timer", "check"]);
}
