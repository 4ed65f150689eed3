//! h2spec (the HTTP/2 conformance suite, installed by `.ci/run` from the Go module proxy)
//! against the codec alone: the `h2c_hello` example's loop on 127.0.0.1, every case passing,
//! in the default and the strict mode.

use std::net::TcpListener;
use std::path::PathBuf;
use std::process::Command;

#[path = "../examples/support/hello.rs"]
mod hello;

/// h2spec: on the PATH, or where `go install` puts it.
fn h2spec() -> PathBuf {
    if Command::new("h2spec").arg("--version").output().is_ok() {
        return PathBuf::from("h2spec");
    }
    let home = std::env::var("HOME").unwrap_or_default();
    let p = PathBuf::from(home).join("go/bin/h2spec");
    assert!(
        p.exists(),
        "h2spec is missing: go install github.com/summerwind/h2spec/cmd/h2spec@latest"
    );
    p
}

/// A server on a free port, its connections each on a thread of their own.
fn start() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().expect("address").port();
    std::thread::spawn(move || {
        for sock in listener.incoming().flatten() {
            std::thread::spawn(move || hello::serve(sock));
        }
    });
    port
}

/// Runs h2spec (2 s at most per case) and returns (cases, passed, failed) and the report.
fn run(port: u16, extra: &[&str]) -> ((u32, u32, u32), String) {
    let port = port.to_string();
    let out = Command::new(h2spec())
        .args(["--timeout", "2", "-h", "127.0.0.1", "-p", &port])
        .args(extra)
        .output()
        .expect("running h2spec");
    let report = String::from_utf8_lossy(&out.stdout).into_owned();
    let line = report
        .lines()
        .rev()
        .find(|l| l.contains(" tests, "))
        .unwrap_or_else(|| panic!("no summary in {report}"));
    let n: Vec<u32> = line
        .split(|c: char| !c.is_ascii_digit())
        .filter_map(|w| w.parse().ok())
        .collect();
    ((n[0], n[1], n[3]), report)
}

#[test]
fn h2spec_passes_every_case() {
    let port = start();
    for extra in [&[][..], &["--strict"][..]] {
        let ((cases, passed, failed), report) = run(port, extra);
        assert!(cases >= 145, "{extra:?}: only {cases} cases:\n{report}");
        assert_eq!((passed, failed), (cases, 0), "{extra:?}:\n{report}");
    }
}
