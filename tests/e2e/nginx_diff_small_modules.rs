//! Small modules against real nginx: `empty_gif` (the image, Last-Modified and its 304, 405
//! for other methods, no ranges, in a nested location not inherited, with `expires` and
//! `add_header`).

use crate::diff::Pair;

#[test]
fn empty_gif_answers_as_nginx() {
    let p = Pair::new(
        "location = /p.gif { empty_gif; }\n\
         location /pixel/ { empty_gif; expires 1h; add_header X-Pixel on;\n\
             location /pixel/not/ { }\n\
         }",
    );
    p.check_bytes(b"GET /p.gif HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n");
    p.check_bytes(b"GET /pixel/a?x=1 HTTP/1.0\r\n\r\n");
    p.head("/p.gif", "");
    p.get(
        "/p.gif",
        "If-Modified-Since: Mon, 28 Sep 1970 06:00:00 GMT\r\n",
    );
    p.get(
        "/p.gif",
        "If-Modified-Since: Mon, 28 Sep 1970 05:59:59 GMT\r\n",
    );
    p.check_bytes(
        b"GET /p.gif HTTP/1.1\r\nHost: localhost\r\nRange: bytes=0-9\r\nConnection: close\r\n\r\n",
    );
    p.check(b"POST /p.gif HTTP/1.1\r\nHost: localhost\r\nContent-Length: 3\r\nConnection: close\r\n\r\nabc");
    p.check(b"DELETE /pixel/x HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n");
    // Not inherited: the nested location serves files (a 404 here).
    p.get("/pixel/not/x.gif", "");
}
