//! h2spec (the HTTP/2 conformance suite, installed by `.ci/run` from the Go module proxy)
//! against shoal, over TLS with ALPN and over h2c with prior knowledge. Every case passes over
//! TLS. Over h2c one case cannot: with `http2 on` a plain port tells HTTP/2 from HTTP/1 by the
//! preface, as nginx 1.25.1+ does, so "an invalid connection preface" (3.5/2) is an HTTP/1
//! request, answered 400, not a TCP close.
//!
//! The cases ask for a 300 KB file: its answer outlasts h2spec's first window, so a stream is
//! still open when a case sends its flow-control errors (a small answer may have ended it,
//! and the case then reads the end of the stream instead of the reset it waits for).

use std::path::PathBuf;
use std::process::Command;

use crate::common::tls::Pki;
use crate::common::{free_port, Prefix, Shoal};

/// h2spec: on the PATH, or where `go install` puts it.
fn h2spec() -> PathBuf {
    if Command::new("h2spec").arg("--version").output().is_ok() {
        return PathBuf::from("h2spec");
    }
    let gopath = Command::new("go")
        .args(["env", "GOPATH"])
        .output()
        .ok()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .filter(|p| !p.is_empty())
        .or_else(|| std::env::var("HOME").ok().map(|h| format!("{h}/go")))
        .unwrap_or_default();
    let p = PathBuf::from(gopath).join("bin/h2spec");
    assert!(
        p.exists(),
        "h2spec is missing: go install github.com/summerwind/h2spec/cmd/h2spec@latest"
    );
    p
}

/// Runs h2spec (bounded: 2 s per case) and returns its report.
fn run(args: &[&str]) -> (bool, String) {
    let out = Command::new(h2spec())
        .args(["--timeout", "2"])
        .args(args)
        .output()
        .expect("running h2spec");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    (out.status.success(), text)
}

/// The summary line: (cases, passed, failed).
fn summary(report: &str) -> (u32, u32, u32) {
    let line = report
        .lines()
        .rev()
        .find(|l| l.contains(" tests, "))
        .expect("h2spec's summary");
    let n: Vec<u32> = line
        .split(|c: char| !c.is_ascii_digit())
        .filter_map(|w| w.parse().ok())
        .collect();
    (n[0], n[1], n[3])
}

fn conf(plain: u16, tls: u16, pki: &Pki) -> String {
    format!(
        "daemon off;\nerror_log logs/error.log info;\nevents {{ }}\nhttp {{\n\
         http2 on;\n\
         server {{ listen 127.0.0.1:{plain}; root html; }}\n\
         server {{ listen 127.0.0.1:{tls} ssl; {} root html; }}\n}}\n",
        pki.ssl_lines("localhost")
    )
}

#[test]
fn h2spec_passes_over_tls_and_h2c() {
    let (plain, tls) = (free_port(), free_port());
    let pki = Pki::new();
    pki.self_signed("localhost");
    let prefix = Prefix::new();
    std::fs::write(prefix.join("html/big.bin"), vec![b'h'; 300 * 1024]).unwrap();
    let s = Shoal::start_in(prefix, &conf(plain, tls, &pki), plain, &[]);
    s.wait_port(tls);
    let tls = tls.to_string();
    let (ok, report) = run(&["-h", "127.0.0.1", "-p", &tls, "-t", "-k", "-P", "/big.bin"]);
    let (cases, passed, failed) = summary(&report);
    assert!(
        ok && failed == 0 && passed == cases && cases > 100,
        "{report}"
    );
    let plain = plain.to_string();
    let (_, report) = run(&["-h", "127.0.0.1", "-p", &plain, "-P", "/big.bin"]);
    let (cases, passed, failed) = summary(&report);
    assert!(
        cases > 100 && failed <= 1 && passed + failed == cases,
        "{report}"
    );
    if failed == 1 {
        let failures = report.split("Failures:").nth(1).unwrap_or(&report);
        assert!(
            failures.contains("Sends invalid connection preface"),
            "{report}"
        );
    }
}
