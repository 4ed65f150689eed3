//! The request parser's tests, by grammar area; the helpers here parse a head by every road.

mod framing;
mod headers;
mod line;
mod one_pass_agrees;
mod refused_heads;
mod target;

use super::*;

fn parse(s: &[u8]) -> Result<Request, Error> {
    parse_with(s, &Limits::default())
}

fn parse_with(s: &[u8], l: &Limits) -> Result<Request, Error> {
    let r = parse_request(s, l)?.expect("complete head");
    // Whichever road was taken, the careful road alone must agree.
    let careful = parse_careful(r.head(), l).and_then(|raw| finish(r.head().clone(), raw, l));
    let careful = careful.expect("careful road agrees");
    assert_eq!(summary(&careful), summary(&r));
    Ok(r)
}

type Summary = (
    String,
    Vec<u8>,
    Vec<u8>,
    Option<Vec<u8>>,
    Vec<(String, Vec<u8>)>,
);

fn summary(r: &Request) -> Summary {
    (
        r.method().to_owned(),
        r.uri().to_vec(),
        r.path().to_vec(),
        r.query().map(<[u8]>::to_vec),
        r.headers()
            .map(|(n, v)| (n.to_owned(), v.to_vec()))
            .collect(),
    )
}

fn status(s: &[u8]) -> u16 {
    status_with(s, &Limits::default())
}

fn status_with(s: &[u8], l: &Limits) -> u16 {
    match parse_with(s, l) {
        Ok(_) => 200,
        Err(e) => e.status(),
    }
}

fn refused(req: &[u8]) -> (Error, Refused) {
    let mut p = HeadParser::new(Limits::default());
    let mut buf = BytesMut::from(req);
    let e = p.parse(&mut buf).expect_err("a refused head");
    (e, p.refused(&buf))
}

fn refused_host(req: &[u8]) -> (Option<&'static str>, bool) {
    let (_, r) = refused(req);
    let host = r
        .host
        .map(|h| &*String::from_utf8(h.to_vec()).unwrap().leak());
    (host, r.head_read)
}
