//! testssl.sh against shoal (issue 20): its vulnerability checks (`-U`, `--fast`: Heartbleed,
//! CCS, Ticketbleed, ROBOT, renegotiation, CRIME, BREACH, POODLE, fallback SCSV, SWEET32, FREAK,
//! DROWN, LOGJAM, BEAST, LUCKY13, RC4) on a TLS server with the default settings, read from its
//! JSON report: none may find anything (no LOW, MEDIUM, HIGH or CRITICAL finding). About 30
//! seconds; the full scan is in the README (`testssl 127.0.0.1:PORT`).

use std::process::Command;

use crate::common::tls::Pki;
use crate::common::{free_port, Shoal};
use crate::tls::conf;

#[test]
fn testssl_finds_no_vulnerability() {
    let mut pki = Pki::new();
    pki.issue("a", &["a.test", "127.0.0.1"], false);
    let port = free_port();
    let _s = Shoal::start(
        &conf(&format!(
            "server {{ listen 127.0.0.1:{port} ssl; server_name a.test; {} location / {{ return 200 \"hello\\n\"; }} }}",
            pki.ssl_lines("a")
        )),
        port,
    );
    let report = pki.path("testssl.json");
    let out = Command::new("timeout")
        .args(["170", "testssl", "--quiet", "--color", "0", "-U", "--fast"])
        .arg("--jsonfile")
        .arg(&report)
        .arg(format!("127.0.0.1:{port}"))
        .output()
        .expect("running testssl (Debian package testssl.sh; .ci/run installs it)");
    let text = String::from_utf8_lossy(&out.stdout);
    let json = std::fs::read_to_string(&report)
        .unwrap_or_else(|e| panic!("no report from testssl ({e}):\n{text}"));
    let findings = findings(&json);
    assert!(!findings.is_empty(), "testssl's report:\n{json}\n{text}");
    for (id, severity, finding) in &findings {
        assert!(
            !["LOW", "MEDIUM", "HIGH", "CRITICAL"].contains(&severity.as_str()),
            "testssl found {id}: {severity} {finding}\n{text}"
        );
    }
    // The checks ran, and said OK.
    for id in [
        "heartbleed",
        "CCS",
        "ticketbleed",
        "ROBOT",
        "secure_client_renego",
        "POODLE_SSL",
        "SWEET32",
        "FREAK",
        "DROWN",
        "LOGJAM",
        "BEAST",
        "LUCKY13",
    ] {
        let (_, severity, finding) = findings
            .iter()
            .find(|f| f.0 == id)
            .unwrap_or_else(|| panic!("no {id} in testssl's report:\n{text}"));
        assert_eq!(severity, "OK", "{id}: {finding}");
    }
}

/// (id, severity, finding) of each entry of testssl's JSON report (a list of flat objects of
/// string fields).
fn findings(json: &str) -> Vec<(String, String, String)> {
    let field = |entry: &str, key: &str| -> String {
        let Some(at) = entry.find(&format!("\"{key}\"")) else {
            return String::new();
        };
        let rest = &entry[at + key.len() + 2..];
        let Some(open) = rest.find('"') else {
            return String::new();
        };
        let value = &rest[open + 1..];
        let mut out = String::new();
        let mut escaped = false;
        for c in value.chars() {
            match (escaped, c) {
                (false, '\\') => escaped = true,
                (false, '"') => break,
                _ => {
                    escaped = false;
                    out.push(c);
                }
            }
        }
        out
    };
    json.split('}')
        .filter(|e| e.contains("\"id\""))
        .map(|e| (field(e, "id"), field(e, "severity"), field(e, "finding")))
        .collect()
}
