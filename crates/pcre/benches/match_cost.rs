//! The cost of one match for typical location regexes: shoal-pcre against the `regex` crate as
//! shoal used it before (`regex::Regex`, `is_match` for the location search, `captures` for
//! the chosen location's variables). A plain timed loop, best of several rounds.
//!
//!     nice -n 10 cargo bench -p shoal-pcre --bench match_cost
//!
//! `^/(?!private)` has no `regex` crate column: that crate cannot compile it.

use std::hint::black_box;
use std::time::Instant;

const SUBJECTS: &[&str] = &[
    "/index.php",
    "/api/v1/users/42",
    "/static/css/site.min.css",
    "/images/photos/2024/holiday-beach.jpeg",
    "/private/report.pdf",
    "/",
    "/blog/2024/05/a-rather-long-article-title-for-testing",
];

const PATTERNS: &[&str] = &[
    r"\.php$",
    r"^/api/",
    r"\.(jpg|jpeg|png|gif|css|js)$",
    r"^/(?!private)",
];

const ROUNDS: usize = 15;
const ITERS: usize = 100_000;

type Probe<'a> = Box<dyn FnMut(&str) -> usize + 'a>;

/// Nanoseconds per call of each probe over every subject: the best of `ROUNDS`, the probes
/// taking turns within a round so that a busy machine weighs on all of them alike.
fn time(probes: &mut [Probe<'_>]) -> Vec<f64> {
    let mut best = vec![f64::MAX; probes.len()];
    let calls = ITERS / SUBJECTS.len() * SUBJECTS.len();
    for _ in 0..ROUNDS {
        for (f, best) in probes.iter_mut().zip(best.iter_mut()) {
            let start = Instant::now();
            let mut n = 0;
            for _ in 0..ITERS / SUBJECTS.len() {
                for s in SUBJECTS {
                    n += f(black_box(s));
                }
            }
            black_box(n);
            *best = best.min(start.elapsed().as_nanos() as f64 / calls as f64);
        }
    }
    best
}

fn main() {
    println!(
        "{:<34} {:>12} {:>12} {:>12} {:>12}",
        "pattern (ns per match)", "regex is_m", "pcre is_m", "regex caps", "pcre caps"
    );
    for p in PATTERNS {
        let ours = shoal_pcre::Regex::new(p).expect("compiles");
        let theirs = regex::Regex::new(p).ok();
        let mut probes: Vec<Probe<'_>> = vec![
            Box::new(|s| usize::from(ours.is_match(s))),
            Box::new(|s| {
                ours.captures(s)
                    .map_or(0, |c| c.iter().flatten().map(|m| m.as_str().len()).sum())
            }),
        ];
        if let Some(r) = &theirs {
            probes.push(Box::new(move |s| usize::from(r.is_match(s))));
            probes.push(Box::new(move |s| {
                r.captures(s)
                    .map_or(0, |c| c.iter().flatten().map(|m| m.as_str().len()).sum())
            }));
        }
        let t = time(&mut probes);
        let fmt = |i: usize| t.get(i).map_or("-".to_string(), |v| format!("{v:.1}"));
        println!(
            "{:<34} {:>12} {:>12} {:>12} {:>12}",
            p,
            fmt(2),
            fmt(0),
            fmt(3),
            fmt(1)
        );
    }
}
