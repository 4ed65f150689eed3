//! shoal's regex engine (`shoal_pcre`) against PCRE2 itself (the system's libpcre2-8, the
//! library nginx runs): a pattern and a subject from the input, compiled with and without
//! PCRE2_CASELESS. Both must agree on whether the pattern compiles (a feature shoal refuses by
//! name aside), and where both compile, on whether the subject matches and on every group's
//! span, with the automaton and with the backtracker alone. Nothing may panic or hang: a
//! match limit in either is a result, not a difference.
//!
//! Input: one flags byte, then the pattern, a NUL, the subject.
#![no_main]

use libfuzzer_sys::fuzz_target;
use shoal_pcre::RegexBuilder;

type Spans = Vec<Option<(usize, usize)>>;

fuzz_target!(|data: &[u8]| {
    let Some((&flags, rest)) = data.split_first() else {
        return;
    };
    let Some(nul) = rest.iter().position(|&b| b == 0) else {
        return;
    };
    let (pattern, subject) = (&rest[..nul], &rest[nul + 1..]);
    // Long patterns and subjects only make the search slower, not different.
    let Ok(pattern) = std::str::from_utf8(pattern) else {
        return;
    };
    if pattern.len() > 48 || subject.len() > 128 {
        return;
    }
    let caseless = flags & 1 == 1;
    let theirs = pcre2::bytes::RegexBuilder::new()
        .caseless(caseless)
        .build(pattern);
    let ours = RegexBuilder::new(pattern).caseless(caseless).build();
    let (theirs, ours) = match (theirs, ours) {
        (Err(_), Err(_)) => return,
        (Ok(_), Err(e)) if e.is_unsupported() => return,
        (Err(t), Ok(_)) => panic!("{pattern:?}: PCRE2 refuses it ({t}), shoal takes it"),
        (Ok(_), Err(e)) => panic!("{pattern:?}: PCRE2 takes it, shoal says {e}"),
        (Ok(t), Ok(o)) => (t, o),
    };
    assert_eq!(
        theirs.captures_len(),
        ours.captures_len(),
        "{pattern:?}: groups"
    );
    let Ok(t) = theirs.captures(subject) else {
        return;
    };
    let t: Option<Spans> = t.map(|c| {
        (0..c.len())
            .map(|i| c.get(i).map(|m| (m.start(), m.end())))
            .collect()
    });
    let slow = RegexBuilder::new(pattern)
        .caseless(caseless)
        .backtracker_only(true)
        .build()
        .expect("compiles as it did");
    for (engine, re) in [("shoal", &ours), ("shoal's backtracker", &slow)] {
        let Ok(o) = re.try_captures(subject) else {
            continue;
        };
        let o: Option<Spans> = o.map(|c| c.iter().map(|m| m.map(|m| (m.start(), m.end()))).collect());
        assert_eq!(
            t,
            o,
            "{pattern:?} (caseless {caseless}) on {:?}: PCRE2, {engine}",
            String::from_utf8_lossy(subject)
        );
    }
});
