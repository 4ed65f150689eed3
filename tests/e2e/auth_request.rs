//! `auth_request` and `auth_request_set` end to end, with a real auth server and a real
//! application behind shoal (the oauth2-proxy pattern): a 2xx lets the request through with
//! the auth server's `X-User` passed on by `proxy_set_header`, shown by `add_header` and
//! logged; 401 (with the auth server's `WWW-Authenticate`) and 403 are the answer; anything
//! else is 500 with nginx's line; `auth_request off`; `satisfy any|all` with `allow`/`deny`;
//! the main request's body still reaches the application after the subrequest.

use crate::common::upstream::{Answer, Recorded, Upstream};
use crate::common::{free_port, Client, Prefix, Shoal};

/// The auth server: decides by the client's `X-Token` (copied into the subrequest).
pub fn auth_server(r: &Recorded) -> Answer {
    match r.header("x-token") {
        Some("good") => Answer::status(200).header("X-User", "alice"),
        Some("forbid") => Answer::status(403),
        Some("odd") => Answer::status(404),
        Some("moved") => Answer::status(302).header("Location", "http://x/"),
        _ => Answer::status(401)
            .header("WWW-Authenticate", "Bearer realm=\"app\"")
            .header("X-User", "nobody"),
    }
}

/// The application: says who the proxy said the user is, and what body it got.
pub fn app_server(r: &Recorded) -> Answer {
    Answer::ok(format!(
        "app user={} body={}\n",
        r.header("x-user").unwrap_or("-"),
        String::from_utf8_lossy(&r.body)
    ))
}

fn start(auth: &Upstream, app: &Upstream) -> Shoal {
    let port = free_port();
    let prefix = Prefix::new();
    std::fs::create_dir_all(prefix.join("html/s")).unwrap();
    std::fs::write(prefix.join("html/s/a.txt"), "static\n").unwrap();
    let conf = format!(
        "daemon off;\nerror_log logs/error.log info;\nevents {{ }}\n\
         http {{\n    log_format a '$uri $status user=$user';\n    \
         access_log logs/access.log a;\n    server {{\n        listen 127.0.0.1:{port};\n        \
         root html;\n        \
         location = /auth {{ internal; proxy_pass {auth}/check; \
             proxy_pass_request_body off; proxy_set_header Content-Length \"\"; \
             proxy_set_header X-Original-URI $request_uri; }}\n        \
         location /app/ {{ auth_request /auth; \
             auth_request_set $user $upstream_http_x_user; \
             auth_request_set $auth_status $upstream_status; \
             proxy_set_header X-User $user; proxy_pass {app}; \
             add_header X-Auth \"$user $auth_status\" always; }}\n        \
         location /s/ {{ auth_request /auth; }}\n        \
         location /any/ {{ satisfy any; deny all; auth_request /auth; alias html/s/; }}\n        \
         location /all/ {{ satisfy all; deny all; auth_request /auth; alias html/s/; }}\n        \
         location /inner/ {{ auth_request /auth; \
             location /inner/open/ {{ auth_request off; alias html/s/; }} }}\n    }}\n}}\n",
        auth = auth.url(),
        app = app.url(),
    );
    Shoal::start_in(prefix, &conf, port, &[])
}

fn text(r: &crate::common::Response) -> String {
    String::from_utf8_lossy(&r.body).into_owned()
}

fn ask(port: u16, path: &str, token: Option<&str>) -> crate::common::Response {
    let h = token.map_or(String::new(), |t| format!("X-Token: {t}\r\n"));
    crate::common::client::ask(port, path, &h)
}

#[test]
fn a_subrequest_decides_and_its_variables_follow() {
    let auth = Upstream::start(auth_server);
    let app = Upstream::start(app_server);
    let s = start(&auth, &app);
    let r = ask(s.port, "/app/x?q=1", Some("good"));
    assert_eq!(r.status, 200, "{}", r.show());
    assert_eq!(text(&r), "app user=alice body=\n");
    assert_eq!(r.header("x-auth"), Some("alice 200"));
    // The subrequest: a GET of the auth location's URI, the client's headers with it.
    let sub = auth.last();
    assert_eq!(
        (sub.method.as_str(), sub.target.as_str()),
        ("GET", "/check")
    );
    assert_eq!(sub.header("x-original-uri"), Some("/app/x?q=1"));
    assert_eq!(sub.header("x-token"), Some("good"));
    // A HEAD's subrequest is a GET too.
    let mut c = Client::connect(s.port);
    c.send(b"HEAD /s/a.txt HTTP/1.1\r\nHost: localhost\r\nX-Token: good\r\n\r\n")
        .unwrap();
    let r = c.read_head().unwrap();
    assert_eq!(r.status, 200);
    assert_eq!(auth.last().method, "GET");

    // 401 with the auth server's WWW-Authenticate, `always` headers with the variables set.
    let r = ask(s.port, "/app/x", None);
    assert_eq!(r.status, 401);
    assert_eq!(r.header("www-authenticate"), Some("Bearer realm=\"app\""));
    assert_eq!(r.header("x-auth"), Some("nobody 401"));
    let r = ask(s.port, "/app/x", Some("forbid"));
    assert_eq!(r.status, 403);
    assert_eq!(r.header("www-authenticate"), None);
    for odd in ["odd", "moved"] {
        let r = ask(s.port, "/app/x", Some(odd));
        assert_eq!(r.status, 500, "{odd}");
    }
    s.wait_log(
        "auth request unexpected status: 404 while sending to client, client: 127.0.0.1",
        1,
    );
    s.wait_log(
        "auth request unexpected status: 302 while sending to client",
        1,
    );
    // The application saw only the allowed request.
    assert_eq!(app.request_count(), 1);

    // The main request's body goes to the application after the subrequest.
    let mut c = Client::connect(s.port);
    let r = c
        .ask("POST /app/p HTTP/1.1\r\nHost: localhost\r\nX-Token: good\r\nContent-Length: 5\r\n\r\nhello")
        .unwrap();
    assert_eq!(text(&r), "app user=alice body=hello\n");
    assert_eq!(auth.last().body, b"");
    // The access log has the variable.
    crate::common::wait_for("the access log", || {
        s.prefix
            .read("logs/access.log")
            .contains("/app/p 200 user=alice\n")
            .then_some(())
    });
}

#[test]
fn static_files_off_and_satisfy() {
    let auth = Upstream::start(auth_server);
    let app = Upstream::start(app_server);
    let s = start(&auth, &app);
    assert_eq!(text(&ask(s.port, "/s/a.txt", Some("good"))), "static\n");
    assert_eq!(ask(s.port, "/s/a.txt", None).status, 401);
    // `auth_request off` in a nested location: no subrequest.
    let before = auth.request_count();
    assert_eq!(ask(s.port, "/inner/open/a.txt", None).status, 200);
    assert_eq!(auth.request_count(), before);
    assert_eq!(ask(s.port, "/inner/a.txt", None).status, 401);
    // satisfy any: `deny all` refuses, the subrequest allows.
    assert_eq!(ask(s.port, "/any/a.txt", Some("good")).status, 200);
    let r = ask(s.port, "/any/a.txt", None);
    assert_eq!(r.status, 401, "{}", r.show());
    // satisfy all: `deny all` decides before the subrequest is made.
    let before = auth.request_count();
    assert_eq!(ask(s.port, "/all/a.txt", Some("good")).status, 403);
    assert_eq!(auth.request_count(), before);
}

#[test]
fn configuration_errors() {
    for (line, msg) in [
        (
            "auth_request /a; auth_request /b;",
            "\"auth_request\" directive is duplicate",
        ),
        (
            "auth_request_set user $x;",
            "invalid variable name \"user\"",
        ),
        (
            "auth_request_set $uri $x;",
            "the duplicate \"uri\" variable",
        ),
        (
            "auth_request_set $u;",
            "invalid number of arguments in \"auth_request_set\"",
        ),
    ] {
        let prefix = Prefix::new();
        prefix.write_conf(&format!(
            "events {{ }}\nhttp {{ server {{ listen 127.0.0.1:{}; location / {{ {line} }} }} }}\n",
            free_port()
        ));
        let out = prefix.run(&["-t"]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(msg), "{line}: {err}");
        assert!(!out.status.success());
    }
}
