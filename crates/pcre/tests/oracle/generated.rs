//! A few hundred generated patterns (proptest), each compared on fixed and generated subjects.

use proptest::prelude::*;

use super::compare;

fn atom() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("a"),
        Just("b"),
        Just("c"),
        Just("A"),
        Just("."),
        Just(r"\n"),
        Just(r"\d"),
        Just(r"\w"),
        Just(r"\W"),
        Just(r"\s"),
        Just("[ab]"),
        Just("[^a]"),
        Just("[a-c]"),
        Just("[[:alpha:]]"),
        Just("[[:^digit:]_]"),
        Just(r"\b"),
        Just(r"\B"),
        Just("^"),
        Just("$"),
        Just(r"\Z"),
        Just(r"\z"),
        Just(r"\A"),
        Just("é"),
        Just(r"\x41"),
        Just(r"\Qa.\E"),
        Just("(?i)"),
        Just("(?-i)"),
        Just("(?s)"),
        Just("(?m)"),
        Just("_"),
        Just("1"),
        Just(r"\."),
        Just(r"\1"),
        Just(r"\2"),
        Just(r"\k<n>"),
        Just(r"\g{1}"),
        Just(r"\g-1"),
        Just(""),
    ]
    .prop_map(str::to_string)
}

fn pattern() -> impl Strategy<Value = String> {
    atom().prop_recursive(4, 24, 3, |inner| {
        let quant = prop_oneof![
            Just("*"),
            Just("+"),
            Just("?"),
            Just("*?"),
            Just("+?"),
            Just("??"),
            Just("*+"),
            Just("++"),
            Just("{2}"),
            Just("{1,3}"),
            Just("{2,}"),
            Just("{0,2}?"),
            Just("{,2}"),
        ];
        let open = prop_oneof![
            Just("("),
            Just("(?:"),
            Just("(?>"),
            Just("(?="),
            Just("(?!"),
            Just("(?<="),
            Just("(?<!"),
            Just("(?<n>"),
            Just("(?P<m>"),
            Just("(?i:"),
            Just("(?|"),
        ];
        prop_oneof![
            (inner.clone(), inner.clone()).prop_map(|(a, b)| format!("{a}{b}")),
            (inner.clone(), inner.clone()).prop_map(|(a, b)| format!("{a}|{b}")),
            (open, inner.clone()).prop_map(|(o, a)| format!("{o}{a})")),
            (inner, quant).prop_map(|(a, q)| format!("{a}{q}")),
        ]
    })
}

fn subject() -> impl Strategy<Value = Vec<u8>> {
    proptest::collection::vec(
        prop_oneof![
            Just(b'a'),
            Just(b'b'),
            Just(b'c'),
            Just(b'A'),
            Just(b'B'),
            Just(b'\n'),
            Just(b' '),
            Just(b'1'),
            Just(b'_'),
            Just(b'.'),
            Just(0xc3u8),
            Just(0xa9u8),
        ],
        0..10,
    )
}

const FIXED_SUBJECTS: &[&[u8]] = &[
    b"",
    b"a",
    b"ab",
    b"abc",
    b"aaa",
    b"AbC",
    b"ba\n",
    b"a\nb\n",
    b"1a_b.c",
    b"\xc3\xa9a",
    b"abab",
    b"aa aa",
];

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 600,
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn generated_patterns_match_as_pcre2(
        p in pattern(),
        caseless in any::<bool>(),
        extra in proptest::collection::vec(subject(), 4),
    ) {
        let mut subjects: Vec<&[u8]> = FIXED_SUBJECTS.to_vec();
        subjects.extend(extra.iter().map(Vec::as_slice));
        match compare(&p, caseless, &subjects) {
            Err(e) => prop_assert!(false, "{}", e),
            Ok(o) if std::env::var_os("ORACLE_STATS").is_some() => eprintln!("OUTCOME {o:?} {p:?}"),
            Ok(_) => {}
        }
    }
}
