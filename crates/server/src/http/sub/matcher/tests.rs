use super::*;

/// A filter for `(string, replacement)` lines, over a file's pieces.
fn filter(lines: &[(&str, &str)], once: bool) -> SubFilter {
    filter_of(lines, once, true)
}

/// A filter for `(string, replacement)` lines, over a file's pieces (`whole_pieces`) or an
/// upstream's reads.
fn filter_of(lines: &[(&str, &str)], once: bool, whole_pieces: bool) -> SubFilter {
    let strings = lines
        .iter()
        .enumerate()
        .map(|(i, (s, _))| (s.to_ascii_lowercase().into_bytes(), i))
        .collect();
    let values = lines.iter().map(|(_, v)| v.as_bytes().to_vec()).collect();
    SubFilter::new(
        Arc::new(Tables::new(strings)),
        Arc::new(values),
        once,
        whole_pieces,
    )
}

/// The body fed in pieces of `size` bytes; what came out, and the most ever held.
fn run(f: &mut SubFilter, body: &[u8], size: usize) -> (Vec<u8>, usize) {
    let mut out = Vec::new();
    let mut most = 0;
    for piece in body.chunks(size.max(1)) {
        out.extend_from_slice(f.feed(piece).unwrap());
        most = most.max(f.held.len());
    }
    out.extend_from_slice(f.finish().unwrap());
    (out, most)
}

/// The same body in every piece size, of a file or an upstream's, gives `want`.
fn check(lines: &[(&str, &str)], once: bool, body: &str, want: &str) {
    for (size, whole) in [1, 2, 3, 4, 5, 7, 16, 1000]
        .into_iter()
        .flat_map(|n| [(n, true), (n, false)])
    {
        let (got, _) = run(&mut filter_of(lines, once, whole), body.as_bytes(), size);
        assert_eq!(
            String::from_utf8_lossy(&got),
            want,
            "{lines:?} once={once} {body:?} in pieces of {size} (whole: {whole})"
        );
    }
}

#[test]
fn once_replaces_each_string_at_its_first_match() {
    let lines = [("hello", "BYE"), ("world", "W")];
    let body = "<html>Hello World hello WORLD abc</html>";
    check(&lines, true, body, "<html>BYE W hello WORLD abc</html>");
    check(&lines, false, body, "<html>BYE W BYE W abc</html>");
}

#[test]
fn matches_across_piece_boundaries() {
    let lines = [("boundary", "[b]")];
    let body = "xxboundaryyyBOUNDARYboundar yboundary";
    check(&lines, false, body, "xx[b]yy[b]boundar y[b]");
}

#[test]
fn candidates_at_one_place_in_the_tables_order() {
    // Both end their first window with `b`: the configuration's order decides.
    check(&[("ab", "1"), ("abc", "2")], false, "abcab", "1c1");
    check(&[("abc", "2"), ("ab", "1")], false, "abcabx", "21x");
    // At the body's end `abc` is cut first: `ab` is not tried (nginx's way).
    check(&[("abc", "2"), ("ab", "1")], false, "abcab", "2ab");
    // Ordered by that byte, not by the configuration: `abcd`'s `b` before `bc`'s `c`.
    check(&[("bc", "2"), ("abcd", "1")], false, "xabcdx", "x1x");
    check(&[("bc", "2"), ("abcd", "1")], false, "xabcex", "xa2ex");
}

#[test]
fn a_string_cut_by_the_body_end_ends_the_search() {
    // nginx: `abcd` cut at the end holds `abc`, and `bc` inside it is never tried.
    check(&[("abcd", "1"), ("bc", "2")], false, "xabc", "xabc");
    check(&[("bc", "2"), ("abcd", "1")], false, "xabc", "xabc");
    check(&[("abcd", "1"), ("bc", "2")], false, "xabcx", "xa2x");
}

#[test]
fn overlapping_candidates_take_the_leftmost_and_skip_past_it() {
    check(&[("aa", "X")], false, "aaaaa", "XXa");
    check(&[("aba", "X")], false, "ababa", "Xba");
    check(&[("abab", "X"), ("bab", "Y")], false, "abababab", "XX");
    check(&[("ab", "X")], true, "abab", "Xab");
}

#[test]
fn replacements_are_not_searched_again() {
    check(&[("a", "aa")], false, "aba", "aabaa");
    check(&[("x", "y"), ("y", "x")], false, "xy", "yx");
}

#[test]
fn case_is_ignored_for_ascii_only() {
    check(&[("héllo", "hi")], false, "HéLLO héllo", "hi hi");
    check(&[("é", "e")], false, "É é", "É e");
}

#[test]
fn empty_bodies_and_empty_replacements() {
    check(&[("x", "")], false, "", "");
    check(&[("x", "")], false, "xaxbx", "ab");
    let (out, _) = run(&mut filter(&[("abc", "1")], false), b"", 1);
    assert!(out.is_empty());
}

#[test]
fn once_done_passes_the_rest_unsearched() {
    let mut f = filter(&[("a", "1"), ("b", "2")], true);
    assert!(!f.passes_through());
    assert_eq!(f.feed(b"xab").unwrap(), b"x12");
    assert!(f.done() && f.passes_through());
    assert_eq!(f.feed(b"abab").unwrap(), b"abab");
    assert!(f.finish().unwrap().is_empty());
}

#[test]
fn held_bytes_stay_below_the_longest_string() {
    let lines = [("abcdefgh", "1"), ("ab", "2")];
    let body = "abcdefgabcdefgabcdefgh".repeat(50);
    for size in [1, 3, 8, 100] {
        let (_, most) = run(&mut filter(&lines, false), body.as_bytes(), size);
        assert!(most < 8, "held {most} in pieces of {size}");
    }
}

#[test]
fn an_upstream_read_holds_what_the_window_reaches() {
    let mut f = filter_of(&[("hello", "X")], false, false);
    // The window jumps 5 bytes at a time (no byte is in "hello"): it ends past `b`.
    assert_eq!(f.feed(b"0123456789ab").unwrap(), b"0123456789");
    assert_eq!(f.feed(b"cd").unwrap(), b"");
    assert_eq!(f.feed(b"efghijk hello\n").unwrap(), b"abcdefghijk X");
    assert_eq!(f.finish().unwrap(), b"\n");
}

#[test]
fn a_piece_end_holds_only_a_cut_string() {
    // What nginx holds, so that the chunks a client sees are the same.
    let mut f = filter(&[("hello", "X"), ("abc", "Y")], false);
    assert_eq!(f.feed(b"0123456789").unwrap(), b"0123456789");
    assert_eq!(f.feed(b"0123hel").unwrap(), b"0123");
    assert_eq!(f.feed(b"lo hell").unwrap(), b"X ");
    assert_eq!(f.feed(b"").unwrap(), b"");
    assert_eq!(f.feed(b"x ab").unwrap(), b"hellx ");
    assert_eq!(f.finish().unwrap(), b"ab");
    // Where the window runs past the end, a string replaced once still holds its start
    // (nginx checks every string there); before, it is not tried.
    let mut f = filter(&[("hello", "X"), ("abc", "Y")], true);
    assert_eq!(f.feed(b"hello he").unwrap(), b"X ");
    assert_eq!(f.feed(b"llo hel").unwrap(), b"hello hel");
}

/// The same search written plainly over the whole body, to check the streaming one against.
fn plain(lines: &[(&str, &str)], once: bool, body: &[u8]) -> Vec<u8> {
    let min = lines.iter().map(|(s, _)| s.len()).min().unwrap();
    let mut order: Vec<usize> = (0..lines.len()).collect();
    order.sort_by_key(|&i| lines[i].0.as_bytes()[min - 1]);
    let mut used = vec![false; lines.len()];
    let mut out = Vec::new();
    let mut s = 0;
    'outer: while s + min <= body.len() {
        if once && used.iter().all(|u| *u) {
            break;
        }
        let c = body[s + min - 1].to_ascii_lowercase();
        for &i in &order {
            let m = lines[i].0.as_bytes();
            if m[min - 1] != c || (once && used[i]) {
                continue;
            }
            let avail = &body[s..body.len().min(s + m.len())];
            if !avail.eq_ignore_ascii_case(&m[..avail.len()]) {
                continue;
            }
            if avail.len() < m.len() {
                break 'outer;
            }
            out.extend_from_slice(lines[i].1.as_bytes());
            used[i] = true;
            s += m.len();
            continue 'outer;
        }
        out.push(body[s]);
        s += 1;
    }
    out.extend_from_slice(&body[s..]);
    out
}

#[test]
fn streaming_agrees_with_the_plain_search() {
    // A small alphabet, so that partial and overlapping matches are everywhere.
    let mut seed = 0x2545_f491_4f6c_dd1du64;
    let mut next = move |n: u64| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed % n
    };
    let words = |next: &mut dyn FnMut(u64) -> u64, len: u64| -> String {
        (0..1 + next(len))
            .map(|_| ["a", "b", "A", "c"][next(4) as usize])
            .collect()
    };
    for _ in 0..400 {
        let n = 1 + next(4) as usize;
        let strings: Vec<String> = (0..n).map(|_| words(&mut next, 5).to_lowercase()).collect();
        let lines: Vec<(&str, &str)> = strings.iter().map(|s| (s.as_str(), "<>")).collect();
        let body = words(&mut next, 60);
        let once = next(2) == 0;
        let want = plain(&lines, once, body.as_bytes());
        for (size, whole) in [1, 2, 3, 5, 64]
            .into_iter()
            .flat_map(|n| [(n, true), (n, false)])
        {
            let (got, _) = run(&mut filter_of(&lines, once, whole), body.as_bytes(), size);
            assert_eq!(
                String::from_utf8_lossy(&got),
                String::from_utf8_lossy(&want),
                "{lines:?} once={once} {body:?} in pieces of {size} (whole: {whole})"
            );
        }
    }
}
