//! shoal-pcre against PCRE2 itself: the system's libpcre2-8 (Debian's 10.42, the library nginx
//! runs), compiled with the options nginx passes (none, or PCRE2_CASELESS), no JIT.
//!
//! For every pattern, both must agree on whether it compiles, with the same message and
//! offset when it does not; and on every subject, whether it matches and every group's span.
//! The patterns: every regex in the configurations under `tests/confs/`, the regexes of
//! well-known nginx configurations (WordPress, Nextcloud, h5bp, Magento, Drupal, the nginx
//! documentation), a list of patterns PCRE2 rejects, and a few hundred generated ones.
//!
//! Here the comparison itself (`compare`) and the check that the oracle is Debian's PCRE2; the
//! patterns are in `real_world` (well-known configurations and `tests/confs/`), `rejected`
//! (what PCRE2 refuses, what shoal refuses by name, the match limit) and `generated`.

use shoal_pcre::{Regex, RegexBuilder};

mod generated;
mod real_world;
mod rejected;

type Spans = Vec<Option<(usize, usize)>>;

/// PCRE2's answer: the spans of every group, `Ok(None)` for no match, or an error (a match
/// limit).
fn pcre2_captures(re: &pcre2::bytes::Regex, subject: &[u8]) -> Result<Option<Spans>, String> {
    let caps = re.captures(subject).map_err(|e| e.to_string())?;
    Ok(caps.map(|c| {
        (0..c.len())
            .map(|i| c.get(i).map(|m| (m.start(), m.end())))
            .collect()
    }))
}

fn ours_captures(re: &Regex, subject: &[u8]) -> Result<Option<Spans>, String> {
    let caps = re.try_captures(subject).map_err(|e| e.to_string())?;
    Ok(caps.map(|c| c.iter().map(|m| m.map(|m| (m.start(), m.end()))).collect()))
}

/// PCRE2's compile error as (message, offset).
fn pcre2_error(e: &pcre2::Error) -> (String, usize) {
    let text = e.to_string();
    // "PCRE2: error compiling pattern at offset N: MESSAGE"
    let message = text
        .split_once(": ")
        .and_then(|(_, m)| m.split_once(": "))
        .map(|(_, m)| m.to_string())
        .unwrap_or(text);
    (message, e.offset().unwrap_or(0))
}

/// Compares one pattern on `subjects`; `Err` describes the first difference.
fn compare(pattern: &str, caseless: bool, subjects: &[&[u8]]) -> Result<Outcome, String> {
    let theirs = pcre2::bytes::RegexBuilder::new()
        .caseless(caseless)
        .build(pattern);
    let ours = RegexBuilder::new(pattern).caseless(caseless).build();
    let (theirs, ours) = match (theirs, ours) {
        (Err(t), Err(o)) => {
            let (message, offset) = pcre2_error(&t);
            // Known: in a branch-reset group, PCRE2 calls a lookbehind's reference to a
            // missing group "not fixed length"; here it is a missing group. Both refuse it.
            if pattern.contains("(?|") && !o.is_unsupported() {
                return Ok(Outcome::Rejected);
            }
            if o.is_unsupported() {
                return Err(format!(
                    "{pattern:?}: PCRE2 rejects it ({message}), we say {o}"
                ));
            }
            if o.message() != message || o.offset() != offset {
                return Err(format!(
                    "{pattern:?}: PCRE2 says {message:?} at {offset}, we say {:?} at {}",
                    o.message(),
                    o.offset()
                ));
            }
            return Ok(Outcome::Rejected);
        }
        (Err(t), Ok(_)) => {
            return Err(format!("{pattern:?}: PCRE2 rejects it ({t}), we accept it"))
        }
        (Ok(_), Err(o)) if o.is_unsupported() => return Ok(Outcome::Unsupported),
        (Ok(_), Err(o)) => return Err(format!("{pattern:?}: PCRE2 accepts it, we say {o}")),
        (Ok(t), Ok(o)) => (t, o),
    };
    if theirs.captures_len() != ours.captures_len() {
        return Err(format!(
            "{pattern:?}: {} groups in PCRE2, {} here",
            theirs.captures_len(),
            ours.captures_len()
        ));
    }
    let names: Vec<Option<&str>> = theirs
        .capture_names()
        .iter()
        .map(|n| n.as_deref())
        .collect();
    if names != ours.capture_names().collect::<Vec<_>>() {
        return Err(format!("{pattern:?}: names differ"));
    }
    let slow = RegexBuilder::new(pattern)
        .caseless(caseless)
        .backtracker_only(true)
        .build()
        .map_err(|e| format!("{pattern:?}: {e}"))?;
    for s in subjects {
        let t = pcre2_captures(&theirs, s);
        if t.is_err() {
            // PCRE2 hit a limit; the crate's own limit is checked apart.
            continue;
        }
        let o = ours_captures(&ours, s);
        if t != o {
            return Err(format!(
                "{pattern:?} (caseless {caseless}) on {:?}: PCRE2 {t:?}, here {o:?}",
                String::from_utf8_lossy(s)
            ));
        }
        let b = ours_captures(&slow, s);
        if t != b {
            return Err(format!(
                "{pattern:?} (caseless {caseless}, backtracker) on {:?}: PCRE2 {t:?}, here {b:?}",
                String::from_utf8_lossy(s)
            ));
        }
        if let (Ok(text), Ok(t)) = (std::str::from_utf8(s), &t) {
            let spans: Option<Spans> = ours
                .captures(text)
                .map(|c| c.iter().map(|m| m.map(|m| (m.start(), m.end()))).collect());
            if &spans != t {
                return Err(format!(
                    "{pattern:?} on text {text:?}: PCRE2 {t:?}, here {spans:?}"
                ));
            }
        }
        if o.as_ref().is_ok_and(|c| c.is_some()) != ours.is_match(&String::from_utf8_lossy(s))
            && std::str::from_utf8(s).is_ok()
        {
            return Err(format!(
                "{pattern:?}: is_match disagrees with captures on {s:?}"
            ));
        }
    }
    Ok(Outcome::Compared)
}

#[derive(Debug, PartialEq)]
enum Outcome {
    Compared,
    Rejected,
    Unsupported,
}

#[test]
fn oracle_is_debians_pcre2() {
    // pcre2-sys links the system library when pkg-config finds it, else builds its bundled
    // copy (10.43 or later), whose syntax differs: `{,n}` became a quantifier in 10.43.
    let re = pcre2::bytes::Regex::new("^a{,2}$").expect("compiles");
    assert_eq!(
        re.is_match(b"a{,2}").ok(),
        Some(true),
        "the oracle must be PCRE2 10.42 (apt-get install libpcre2-dev pkg-config)"
    );
}
