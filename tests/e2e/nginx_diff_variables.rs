//! Variables against real nginx: `$pipe` on pipelined requests, `$request_completion`,
//! `$nginx_version`, `$request_body` where no body was read, `$limit_rate` set and
//! configured, `$sent_trailer_*`, `$binary_remote_addr`, `$request_id`'s shape.

use crate::diff::Pair;

#[test]
fn variables_as_nginx() {
    let p = Pair::new(
        "location /v { return 200 \"[$pipe][$request_completion][$nginx_version]\
         [$request_body][$content_length][$is_args][$sent_trailer_x]\\n\"; }\n\
         location /rate { set $limit_rate 10k; return 200 \"[$limit_rate]\\n\"; }\n\
         location /conf { limit_rate 4k; return 200 \"[$limit_rate]\\n\"; }\n\
         location /id { return 200 \"$request_id\\n\"; }\n\
         location /bin { return 200 \"[$binary_remote_addr]\"; }",
    );
    p.check_bytes(b"GET /bin HTTP/1.0\r\nHost: x\r\n\r\n");
    p.get("/v", "");
    p.get("/v?a=1", "Content-Length: 0\r\n");
    p.check(b"GET /v HTTP/1.1\r\nHost: x\r\n\r\nGET /v?b HTTP/1.1\r\nHost: x\r\n\r\n");
    p.get("/rate", "");
    p.get("/conf", "");
    let (n, s) = p.ports();
    for port in [n, s] {
        let r = crate::common::client::ask(port, "/id", "");
        let id = String::from_utf8_lossy(&r.body).trim_end().to_string();
        assert!(
            id.len() == 32 && id.bytes().all(|c| matches!(c, b'0'..=b'9' | b'a'..=b'f')),
            "{id}"
        );
    }
}

/// `limit_rate` beside nginx: the same 60 KiB file at 20 KiB/s takes both servers at least
/// two seconds (20 KiB at once, then 20 KiB a second), and the answers are the same.
#[test]
fn limit_rate_paces_as_nginx() {
    let p = Pair::new(
        "location /slow/ { alias {HTML}/; limit_rate 20k; }\n\
         location /after/ { alias {HTML}/; limit_rate 20k; limit_rate_after 40k; }",
    );
    std::fs::write(p.html().join("big.txt"), "z".repeat(60 * 1024)).unwrap();
    let (n, s) = p.ports();
    for port in [n, s] {
        let began = std::time::Instant::now();
        let r = crate::common::client::ask(port, "/slow/big.txt", "");
        let took = began.elapsed();
        assert_eq!(r.body.len(), 60 * 1024);
        assert!(
            took >= std::time::Duration::from_millis(1800),
            "{port}: {took:?}"
        );
    }
    // Kept open: a client that half-closes while nginx paces an answer is a client gone
    // (nginx's read handler sees the end and cuts the answer short, when it looks in time).
    p.get_open("/after/big.txt", "");
}
