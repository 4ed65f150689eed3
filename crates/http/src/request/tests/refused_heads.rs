//! What a refused head still says (the host nginx had).

use super::*;

#[test]
fn refused_heads_say_which_host_nginx_had() {
    // Refused in the request line: the default server.
    assert_eq!(
        refused_host(b"get / HTTP/1.1\r\nHost: a\r\n\r\n"),
        (None, false)
    );
    assert_eq!(
        refused_host(b"GET / HTTP/2.0\r\nHost: a\r\n\r\n"),
        (None, false)
    );
    assert_eq!(
        refused_host(b"GET /../x HTTP/1.1\r\nHost: a\r\n\r\n"),
        (None, false)
    );
    // A header line before Host, or a bad Host: the default server.
    assert_eq!(
        refused_host(b"GET / HTTP/1.1\r\nA b: x\r\nHost: a\r\n\r\n"),
        (None, false)
    );
    assert_eq!(
        refused_host(b"GET / HTTP/1.1\r\nHost: a/b\r\n\r\n"),
        (None, false)
    );
    // After Host (or an absolute target): that host's server.
    assert_eq!(
        refused_host(b"GET / HTTP/1.1\r\nHost: A:80\r\nA b: x\r\n\r\n"),
        (Some("a"), false)
    );
    assert_eq!(
        refused_host(b"GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n"),
        (Some("a"), false)
    );
    assert_eq!(
        refused_host(b"GET http://b/ HTTP/1.1\r\nA b: x\r\n\r\n"),
        (Some("b"), false)
    );
    assert_eq!(
        refused_host(
            b"GET / HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 1\r\nHost: a\r\n\r\n"
        ),
        (None, false)
    );
    // After the whole head: the server a request would get.
    assert_eq!(refused_host(b"GET / HTTP/1.1\r\n\r\n"), (None, true));
    assert_eq!(
        refused_host(b"TRACE / HTTP/1.1\r\nHost: a\r\n\r\n"),
        (Some("a"), true)
    );
    // A header line too large: the host read before it.
    let mut big = b"GET / HTTP/1.1\r\nHost: a\r\nX: ".to_vec();
    big.resize(big.len() + 9000, b'x');
    assert_eq!(refused_host(&big), (Some("a"), false));
    let mut big = b"GET / HTTP/1.1\r\nX: ".to_vec();
    big.resize(big.len() + 9000, b'x');
    big.extend_from_slice(b"\r\nHost: a\r\n\r\n");
    assert_eq!(refused_host(&big), (None, false));
}
