use super::*;

/// What the reader finds in `data` fed in pieces of `size` (texts joined).
#[derive(Debug, PartialEq, Eq)]
enum Found {
    Text(Vec<u8>),
    Command(Command),
    Error(String),
}

fn read(data: &[u8], size: usize, value_len: usize) -> Vec<Found> {
    let mut p = Parser::new(value_len);
    let mut out: Vec<Found> = Vec::new();
    let push_text = |out: &mut Vec<Found>, t: &[u8]| match out.last_mut() {
        Some(Found::Text(prev)) => prev.extend_from_slice(t),
        _ => out.push(Found::Text(t.to_vec())),
    };
    for piece in data.chunks(size.max(1)) {
        let mut at = 0;
        let mut rounds = 0;
        while at < piece.len() {
            rounds += 1;
            assert!(rounds < 10 * piece.len() + 10, "no progress");
            let (ev, n) = p.next(&piece[at..]);
            at += n;
            match ev {
                None => {}
                Some(Event::Text(t)) => {
                    assert!(!t.is_empty());
                    push_text(&mut out, t)
                }
                Some(Event::Command(c)) => out.push(Found::Command(c)),
                Some(Event::Error(e)) => out.push(Found::Error(e)),
            }
        }
    }
    p.finish();
    out
}

/// `data` read whole and in pieces of every size: the same.
fn read_all_ways(data: &[u8]) -> Vec<Found> {
    let whole = read(data, data.len(), 256);
    for size in 1..data.len() {
        assert_eq!(read(data, size, 256), whole, "pieces of {size}");
    }
    whole
}

fn cmd(name: &str, params: &[(&str, &str)]) -> Found {
    Found::Command(Command {
        name: name.into(),
        params: params
            .iter()
            .map(|(k, v)| (k.as_bytes().to_vec(), v.as_bytes().to_vec()))
            .collect(),
    })
}

fn text(t: &str) -> Found {
    Found::Text(t.into())
}

#[test]
fn commands_between_text_split_anywhere() {
    let body = b"<p>a<!--# echo var=\"x\" default='no' -->b<!--#set var=\"v\" value=\"1\"-->";
    assert_eq!(
        read_all_ways(body),
        vec![
            text("<p>a"),
            cmd("echo", &[("var", "x"), ("default", "no")]),
            text("b"),
            cmd("set", &[("var", "v"), ("value", "1")]),
        ]
    );
}

#[test]
fn what_only_looks_like_a_command_is_text() {
    // (A start of one held at the end is dropped, as nginx drops it.)
    let body = b"<<!-- c --><!-x<!--<!--#endif-->y<!-";
    assert_eq!(
        read_all_ways(body),
        vec![text("<<!-- c --><!-x<!--"), cmd("endif", &[]), text("y")]
    );
}

#[test]
fn backslashes_are_kept_with_the_byte_after() {
    let body = br#"<!--#set var="a" value="x\"y\\z" -->"#;
    assert_eq!(
        read_all_ways(body),
        vec![cmd("set", &[("var", "a"), ("value", r#"x\"y\\z"#)])]
    );
}

#[test]
fn malformed_commands_are_skipped_to_their_end() {
    let body = b"a<!--#echo var=x -->b<!--#echo var -x-->c<!--#e var=\"1\"x-->d";
    assert_eq!(
        read_all_ways(body),
        vec![
            text("a"),
            Found::Error(
                "unexpected \"x\" symbol before value of \"var\" parameter in \"echo\" SSI command"
                    .into()
            ),
            text("b"),
            Found::Error(
                "unexpected \"-\" symbol after \"var\" parameter in \"echo\" SSI command".into()
            ),
            text("c"),
            Found::Error(
                "unexpected \"x\" symbol after \"1\" value of \"var\" parameter in \"e\" SSI command"
                    .into()
            ),
            text("d"),
        ]
    );
}

#[test]
fn limits_are_nginx_s() {
    let long = format!("<!--#{} -->x", "c".repeat(33));
    assert_eq!(
        read_all_ways(long.as_bytes()),
        vec![
            Found::Error(format!(
                "the \"{}...\" SSI command is too long",
                "c".repeat(33)
            )),
            text("x"),
        ]
    );
    let params: String = (0..17).map(|i| format!(" p{i}=\"\"")).collect();
    let many = format!("<!--#c{params} -->");
    assert_eq!(
        read_all_ways(many.as_bytes()),
        vec![Found::Error(
            "too many SSI command parameters: \"c\"".into()
        )]
    );
    let key = format!("<!--#c {}=\"\" -->", "k".repeat(33));
    assert!(
        matches!(&read_all_ways(key.as_bytes())[..], [Found::Error(e)] if e.starts_with("too long \"kkk"))
    );
    let value = b"<!--#c k=\"12345\" -->";
    assert_eq!(
        read(value, value.len(), 4),
        vec![Found::Error(
            "too long \"12345...\" value of \"k\" parameter in \"c\" SSI command".into()
        )]
    );
    assert_eq!(
        read(value, value.len(), 5),
        vec![cmd("c", &[("k", "12345")])]
    );
}

#[test]
fn a_command_cut_short_by_the_end_is_dropped() {
    assert_eq!(read_all_ways(b"a<!--#echo var=\"x"), vec![text("a")]);
    assert_eq!(read_all_ways(b"a<!-"), vec![text("a")]);
}

#[test]
fn arbitrary_bytes_never_stall() {
    // A cheap generator: every byte the grammar cares about, in many orders.
    let alphabet = b"<!-#= \"'\\a>\n";
    let mut seed = 7u32;
    for _ in 0..300 {
        let mut body = Vec::new();
        for _ in 0..40 {
            seed = seed.wrapping_mul(1103515245).wrapping_add(12345);
            body.push(alphabet[(seed >> 16) as usize % alphabet.len()]);
        }
        read_all_ways(&body);
    }
}
