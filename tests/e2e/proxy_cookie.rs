//! `proxy_cookie_domain`, `proxy_cookie_path` and `proxy_cookie_flags` end to end: the real
//! binary in front of a real upstream that answers with the `Set-Cookie` lines the request
//! names, each client's answer checked line for line (the values are nginx 1.22's, which
//! `nginx_diff_cookie.rs` compares live).

use crate::common::client::{request, Client};
use crate::common::upstream::{Answer, Upstream};
use crate::common::*;

fn start(port: u16, server: &str) -> Shoal {
    let conf = format!(
        "daemon off;\nworker_processes 1;\nerror_log logs/error.log info;\n\
         events {{ worker_connections 64; }}\n\
         http {{\n    access_log off;\n    server {{\n        \
         listen 127.0.0.1:{port};\n        server_name localhost;\n{server}\n    }}\n}}\n"
    );
    Shoal::start(&conf, port)
}

/// The `Set-Cookie` lines of the answer to `path` when the upstream sets `cookies`.
fn set_cookies(c: &mut Client, path: &str, cookies: &[&str]) -> Vec<String> {
    let lines: String = cookies
        .iter()
        .map(|c| format!("X-Set-Cookie: {c}\r\n"))
        .collect();
    let r = c.ask(&request("GET", path, &lines)).expect("an answer");
    assert_eq!(r.status, 200, "{}", r.show());
    r.headers
        .iter()
        .filter(|(n, _)| n == "set-cookie")
        .map(|(_, v)| v.clone())
        .collect()
}

#[test]
fn set_cookie_attributes_are_rewritten_by_the_first_matching_rule() {
    let up = Upstream::start(|r| {
        r.header_all("x-set-cookie")
            .into_iter()
            .fold(Answer::ok("c"), |a, c| a.header("Set-Cookie", c))
    });
    let port = free_port();
    let _s = start(
        port,
        &format!(
            "proxy_cookie_path /app/ /;\n\
             location / {{\n\
                 proxy_pass {up};\n\
                 proxy_cookie_domain .example.com $host;\n\
                 proxy_cookie_domain ~^(?<sub>[a-z]+)\\.foo\\.com$ $sub.bar.net;\n\
                 proxy_cookie_domain example.com never.org;\n\
                 proxy_cookie_flags ~^s secure samesite=lax;\n\
                 proxy_cookie_flags h nosecure httponly nosamesite;\n\
             }}\n\
             location /off/ {{ proxy_pass {up}; proxy_cookie_path off; }}",
            up = up.url()
        ),
    );
    let mut c = Client::connect(port);
    let got = set_cookies(
        &mut c,
        "/",
        &[
            "a=1; Domain=.EXAMPLE.com; Path=/app/x",
            "b=2;domain=www.Foo.com ; path = /App/",
            "plain=3; Path=/other",
            "noeq; domain=example.com",
        ],
    );
    assert_eq!(
        got,
        [
            // The dot stays, the domain's case does not matter; the path's prefix does.
            "a=1; Domain=.localhost; Path=/x",
            "b=2; domain=www.bar.net; path=/App/",
            "plain=3; Path=/other",
            "noeq; domain=example.com",
        ]
    );
    let got = set_cookies(
        &mut c,
        "/",
        &[
            "Sid=1; SameSite=Strict; Path=/",
            "sid=2; secure",
            "h=3; Secure; SameSite=None; HttpOnly",
            "x=4; secure",
        ],
    );
    assert_eq!(
        got,
        [
            "Sid=1; SameSite=Lax; Path=/; Secure",
            "sid=2; secure; SameSite=Lax",
            "h=3; HttpOnly",
            "x=4; secure",
        ]
    );
    // `off` cancels what the server level says.
    let got = set_cookies(&mut c, "/off/", &["a=1; path=/app/x"]);
    assert_eq!(got, ["a=1; path=/app/x"]);
}
