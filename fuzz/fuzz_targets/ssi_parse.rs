//! The SSI command reader (`shoal_http::ssi`): arbitrary bytes, with an arbitrary
//! `ssi_value_length`, read whole and in pieces of an arbitrary size, must give the same
//! events (texts joined), make progress on every call, and keep nginx's limits: a command's
//! name at most 32 bytes, at most 16 parameters, names of at most 32 bytes and values of at
//! most `ssi_value_length`. The text handed back, with the commands' and errors' bytes, is
//! never more than what came in. Nothing may panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use shoal_http::ssi::{Event, Parser, COMMAND_LEN, MAX_PARAMS, PARAM_LEN};

#[derive(Debug, PartialEq)]
enum Found {
    Text(Vec<u8>),
    Command(Vec<u8>, Vec<(Vec<u8>, Vec<u8>)>),
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
        let mut idle = 0;
        while at < piece.len() {
            let (ev, n) = p.next(&piece[at..]);
            at += n;
            // A call that uses nothing gives back held text; two in a row would be a stall.
            idle = if n == 0 { idle + 1 } else { 0 };
            assert!(idle < 2, "no progress");
            match ev {
                None => {}
                Some(Event::Text(t)) => {
                    assert!(!t.is_empty());
                    push_text(&mut out, t)
                }
                Some(Event::Command(c)) => {
                    assert!(!c.name.is_empty() && c.name.len() <= COMMAND_LEN);
                    assert!(c.params.len() <= MAX_PARAMS);
                    for (k, v) in &c.params {
                        assert!(!k.is_empty() && k.len() <= PARAM_LEN);
                        assert!(v.len() <= value_len);
                    }
                    out.push(Found::Command(c.name, c.params))
                }
                Some(Event::Error(e)) => out.push(Found::Error(e)),
            }
        }
    }
    p.finish();
    out
}

fuzz_target!(|data: &[u8]| {
    let Some((&[a, b], body)) = data.split_first_chunk::<2>() else {
        return;
    };
    let value_len = 1 + a as usize * 4;
    let whole = read(body, body.len(), value_len);
    let text: usize = whole
        .iter()
        .map(|f| match f {
            Found::Text(t) => t.len(),
            _ => 0,
        })
        .sum();
    assert!(text <= body.len());
    assert_eq!(read(body, 1 + b as usize, value_len), whole);
    assert_eq!(read(body, 1, value_len), whole);
});
