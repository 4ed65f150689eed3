use super::*;

#[test]
fn a_stored_heads_lines_are_classified_once_as_a_hit_passes_them() {
    let head = b"HTTP/1.1 200 OK\r\nServer: up\r\nContent-Type: text/plain\r\n\
        content-length: 5\r\nAccept-Ranges: bytes\r\nETag: \"e\"\r\n\
        Last-Modified: Sun, 06 Nov 1994 08:49:37 GMT\r\nX-Accel-Expires: 10\r\n\
        Location: /x\r\nX-Other: y\r\nConnection: close\r\n\r\n";
    let p = parse_head(head).expect("parses");
    assert!(p.usual_reason);
    let kinds: Vec<Kind> = p.lines.iter().map(|l| l.kind).collect();
    let lm =
        shoal_http::date::format(std::time::UNIX_EPOCH + std::time::Duration::from_secs(784111777));
    assert_eq!(
        kinds,
        [
            Kind::Other,
            Kind::ContentType,
            Kind::Dropped,
            Kind::AcceptRanges,
            Kind::ETag,
            Kind::LastModified(Some((784111777, lm))),
            Kind::Other,
            Kind::Location,
            Kind::Other,
            Kind::Dropped,
        ]
    );
    // `hidden` is what a location without `proxy_hide_header`/`proxy_pass_header` says.
    let plain = crate::http::proxy::ProxyLoc::default();
    for ((name, _), line) in p.headers.iter().zip(p.lines.iter()) {
        assert_eq!(line.hidden, !plain.passes(name), "{name}");
    }
    assert!(p.lines[0].hidden && p.lines[6].hidden && !p.lines[8].hidden);
}

#[test]
fn last_modified_of_another_status_and_an_unusual_reason_are_kept_as_they_came() {
    let p = parse_head(
        b"HTTP/1.1 404 Gone Fishing\r\nLast-Modified: Sun, 06 Nov 1994 08:49:37 GMT\r\n\r\n",
    )
    .expect("parses");
    assert!(!p.usual_reason);
    assert_eq!(p.lines[0].kind, Kind::LastModified(None));
    let p = parse_head(b"HTTP/1.1 200 OK\r\nLast-Modified: yesterday\r\n\r\n").expect("parses");
    assert_eq!(p.lines[0].kind, Kind::LastModified(None));
}
