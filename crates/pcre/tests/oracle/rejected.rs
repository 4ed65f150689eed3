//! Where compiling or matching stops: the patterns PCRE2 refuses (refused here with the same
//! message and offset), the features shoal refuses by name, and the match limit.

use shoal_pcre::Regex;

use super::{compare, Outcome};

/// Patterns PCRE2 10.42 refuses: each must be refused here with its message and offset.
const REJECTED: &[&str] = &[
    "((*?))",
    "(*)",
    "a(*+b)",
    "(*1)",
    "(* )",
    "a(*",
    "(foo",
    "a)b",
    "x{2,1}y",
    "x{70000}",
    "a{3,65536}",
    "[z-a]x",
    "(?<n>a)(?<n>b)",
    "(?<n>a)|(?<n>b)",
    "(?<a>x)(?'a'y)",
    r"(?<=a+)b",
    r"x(?<=a+)b",
    r"x(?<=a(b|cd))b",
    r"(?<=a{2,3})b",
    // A lookbehind repeated a varying number of times inside another (found by the generated
    // patterns); a fixed count, `{0}` and a repeated lookahead are accepted.
    r"(?<=(?<=a)+?)",
    r"(?<=b(?<!a){1,3}c)",
    r"x(?<=(?<=a)*)",
    r"(?<=(?<=(?<=a)+))",
    r"(?=(?<=(?<=a)?+))",
    r"(?<=x|(?<=a){2,})",
    r"(?<=(a|bb))",
    r"(?<=\R)b",
    r"(?<=\Ka)b",
    r"(?<=a\Kb)",
    // Found by the generated patterns: PCRE2's lookbehind check skips a lookahead inside the
    // lookbehind, so the later lookbehind's `\1` is reported before the missing name.
    r"(?<=(?=\k<n>))|(?<=\1)a",
    r"(?<=(?=\k<n>))a",
    // A missing group numbered below 10 is reported at its first reference, even outside.
    r"\1|(?<=\1)",
    r"a\2(?<=b\2)",
    r"\g{1}|(?<=\1)",
    r"\g1",
    r"\g12",
    r"(?<=\g{12})",
    r"a\g{2}b",
    r"\g{-1}",
    r"(?<=\g{1})",
    r"x\g{+1}",
    r"\g{1}|(?<=\g{1})",
    r"(?<=\k<n>)|\1",
    // What PCRE2's lookbehind check meets first is reported first.
    r"(?<=(?<n>\1)\2)",
    r"(?<=(a|bc)\2)",
    r"(?<=(a|b)\2)",
    r"(?<=a|(?:b|cd)\3)",
    r"\k<zz>",
    "a**",
    "a{2}{3}",
    "a+?+",
    "^*a",
    "$?",
    r"\b*a",
    "a|*",
    "(?i:*a)",
    r"\Q\E*",
    "(?P<1a>x)",
    "(?'1a'x)",
    "(?<1>a)",
    "(?<a-b>a)",
    "(?<>a)",
    "(?<a",
    "(?'a",
    "(?<abcdefghijabcdefghijabcdefghijabc>a)",
    "[[:foo:]]",
    "[[.a.]]",
    "[[=a=]]",
    "[:alpha:]",
    "[]",
    "[^]",
    r"[\E]",
    "[[:alpha:]",
    r"\c",
    "\\cé",
    r"\x{100}",
    r"\x{",
    r"\x{zz}",
    r"\x{1",
    r"\o",
    r"\o{",
    r"\o{8}",
    r"\o{}",
    r"\o{400}",
    r"\400",
    r"[\400]",
    r"[\x{100}]",
    r"[a-\x{100}]",
    r"\L",
    r"\u",
    r"\i",
    r"\q",
    r"\N{U+41}",
    r"\N{abc}",
    r"[\N]",
    r"[\R]",
    r"[\X]",
    r"[\B]",
    r"[\d-z]",
    r"[a-\d]",
    r"[[:alpha:]-z]",
    r"[\w-z]",
    r"\k",
    r"\k<",
    r"\k<a",
    r"\g",
    r"\g{0}",
    r"\g0",
    r"\g{-0}",
    r"\g{-2}(a)",
    r"\g-1",
    r"\g{1",
    r"\g{a",
    "(?P=zz)",
    "(?P=",
    "(?P=a",
    "(?P",
    "(?Px)",
    "(?#abc",
    "(*FOO)a",
    "(*)",
    "(*",
    r"\8",
    r"(a)\2",
    r"(?|(a)|(b)(c))\3",
    "(?|(?<n>a)|(?<m>b))",
    "a(?i",
    "(?i",
    "(?",
    "(?-",
    "(?i-",
    "(?z)",
    "(?-^)",
    "(?^-i)",
    "a\\",
];

#[test]
fn rejected_as_pcre2_rejects() {
    let mut failures = Vec::new();
    for p in REJECTED {
        match compare(p, false, &[]) {
            Ok(Outcome::Rejected) => {}
            Ok(other) => failures.push(format!("{p:?}: {other:?}")),
            Err(e) => failures.push(e),
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// The neighbours of the repeated lookbehinds above that PCRE2 takes: they compile and match
/// as PCRE2's.
#[test]
fn repeated_assertions_match_as_pcre2() {
    let subjects: &[&[u8]] = &[b"", b"a", b"ab", b"aab", b"ba", b"bac", b"xab"];
    for p in [
        r"(?<=(?<=a){2})b",
        r"(?<=(?<=a){0})b",
        r"(?<=(?=a)+)b",
        r"(?<=(?!a)*?)b",
        r"(?<=a)+b",
        r"(?<=a)*?b",
        r"(?<=b(?<!a){1}c)",
        r"(?=(?<=a)+)b",
    ] {
        assert_eq!(compare(p, false, subjects), Ok(Outcome::Compared), "{p}");
    }
}

/// A quantifier's `+` or `?` suffix found past what PCRE2 ignores (found by the fuzzer): a
/// comment, an empty quote, a stray `\E`, whitespace and comments of `(?x)`; not in a quote.
#[test]
fn quantifier_suffixes_past_comments_match_as_pcre2() {
    let subjects: &[&[u8]] = &[b"aaa", b"a+a", b"aa", b"aab", b"a?"];
    for p in [
        "a*(?#b)+a",
        r"a*\Q\E+a",
        r"a*\E+a",
        "(?x)a* +a",
        "(?x)a*#c\n+a",
        r"a*\Q+\Ea",
        r"a*\Q?\E",
        "a{2}(?#x)?",
        "a*(?#x)(?#y)?a",
        "a+(?#x)?b",
    ] {
        assert_eq!(compare(p, false, subjects), Ok(Outcome::Compared), "{p}");
    }
    assert_eq!(compare("a{2}(?#x){3}", false, &[]), Ok(Outcome::Rejected));
    assert_eq!(compare("a*(?#x", false, &[]), Ok(Outcome::Rejected));
}

/// `\` and a number too big to name a group (over 65,535): the digit itself after `\8` or
/// `\9`, else octal (found by the fuzzer).
#[test]
fn numbers_too_big_for_a_group_read_as_pcre2() {
    let subjects: &[&[u8]] = &[
        b"c8888888888888",
        b"S4567",
        b"\xff7777",
        b"999999999x",
        b"8",
    ];
    for p in [
        r"c\8888888888888*",
        r"\1234567",
        r"\3777777",
        r"()\999999999x",
        r"[\8]",
    ] {
        assert_eq!(compare(p, false, subjects), Ok(Outcome::Compared), "{p}");
    }
    for p in [
        r"\88",
        r"()\99999x",
        r"\88888888",
        r"\g{99999}",
        r"\g99999",
        r"\g999999999",
    ] {
        assert_eq!(compare(p, false, &[]), Ok(Outcome::Rejected), "{p}");
    }
    // (Octal \655 is over \377.)
    assert_eq!(compare(r"\65536", false, &[]), Ok(Outcome::Rejected));
}

/// Patterns PCRE2 takes that shoal refuses at compile time (rather than running them with
/// another meaning).
#[test]
fn unsupported_features_are_refused_by_name() {
    for p in [
        "(?R)",
        "(a)(?1)",
        "(?<n>a)(?&n)",
        "(?(1)a|b)(a)",
        "(?C1)a",
        r"\p{L}",
        r"\X",
        "(*UTF)a",
        "a(*COMMIT)b",
        "(?*a)b",
        "(?<*a)b",
        "(*napla:a)b",
    ] {
        assert!(
            pcre2::bytes::Regex::new(p).is_ok(),
            "{p:?} should compile in PCRE2"
        );
        let e = Regex::new(p).expect_err(p);
        assert!(e.is_unsupported(), "{p:?}: {e}");
        assert!(e.to_string().contains("not supported by shoal"), "{e}");
    }
}

/// A match limit hit: both give up on a catastrophic pattern, both answer a mild one.
#[test]
fn match_limit_like_pcre2() {
    let p = r"^((?=a)a+)+$";
    let theirs = pcre2::bytes::Regex::new(p).expect("compiles");
    let ours = Regex::new(p).expect("compiles");
    let evil = format!("{}b", "a".repeat(40));
    assert!(theirs.is_match(evil.as_bytes()).is_err());
    assert_eq!(
        ours.try_is_match(evil.as_bytes()),
        Err(shoal_pcre::MatchError::MatchLimit)
    );
    // A byte every match needs is missing: PCRE2 sees it at once, and so does the crate.
    let p = r"^(a|a)+(?=b)c";
    let theirs = pcre2::bytes::Regex::new(p).expect("compiles");
    let ours = Regex::new(p).expect("compiles");
    assert_eq!(theirs.is_match(evil.as_bytes()).ok(), Some(false));
    assert_eq!(ours.try_is_match(evil.as_bytes()), Ok(false));
    let theirs = pcre2::bytes::Regex::new(r"^((?=a)a+)+$").expect("compiles");
    let ours = Regex::new(r"^((?=a)a+)+$").expect("compiles");
    let mild = format!("{}b", "a".repeat(12));
    assert_eq!(theirs.is_match(mild.as_bytes()).ok(), Some(false));
    assert_eq!(ours.try_is_match(mild.as_bytes()), Ok(false));
}
