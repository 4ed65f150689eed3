//! `auth_request` against real nginx: the same auth server and application behind both, the
//! same requests, the same answers (2xx through with `auth_request_set` variables in
//! `add_header` and `proxy_set_header`, 401 with the auth server's `WWW-Authenticate`, 403,
//! 500 for anything else, `satisfy any` with `deny` and `auth_basic`, `auth_request off`).

use crate::auth_request::{app_server, auth_server};
use crate::common::upstream::Upstream;
use crate::diff::{Conf, Pair};

#[test]
fn auth_request_as_nginx() {
    let auth = Upstream::start(auth_server);
    let app = Upstream::start(app_server);
    let server = format!(
        "location = /auth {{ internal; proxy_pass {auth}/check; proxy_pass_request_body off; \
             proxy_set_header Content-Length \"\"; }}\n\
         location /app/ {{ auth_request /auth; auth_request_set $user $upstream_http_x_user; \
             auth_request_set $st $upstream_status; proxy_set_header X-User $user; \
             proxy_pass {app}; add_header X-Auth \"$user|$st\" always; }}\n\
         location /s/ {{ auth_request /auth; alias {{HTML}}/; }}\n\
         location /any/ {{ satisfy any; deny all; auth_request /auth; alias {{HTML}}/; }}\n\
         location /off/ {{ auth_request off; alias {{HTML}}/; }}\n\
         location = /auth-static {{ internal; alias {{HTML}}/a.txt; }}\n\
         location /bystatic/ {{ auth_request /auth-static; alias {{HTML}}/; }}\n\
         location /missing/ {{ auth_request /nothing-here; alias {{HTML}}/; }}\n\
         location /both/ {{ satisfy any; auth_basic \"b\"; auth_basic_user_file {{HTML}}/htpasswd; \
             auth_request /auth; alias {{HTML}}/; }}\n\
         location /op/ {{ auth_request /auth; error_page 401 = /signin; alias {{HTML}}/; }}\n\
         location = /signin {{ return 302 https://login.example/start?rd=$request_uri; }}\n\
         location /every/ {{ auth_basic \"b\"; auth_basic_user_file {{HTML}}/htpasswd; \
             auth_request /auth; alias {{HTML}}/; }}",
        auth = auth.url(),
        app = app.url(),
    );
    let p = Pair::with(Conf {
        server: &server,
        files: &[("htpasswd", "user:{PLAIN}pass\n")],
        ..Default::default()
    });
    for token in [
        "",
        "X-Token: good\r\n",
        "X-Token: forbid\r\n",
        "X-Token: odd\r\n",
    ] {
        for path in [
            "/app/x",
            "/s/a.txt",
            "/any/a.txt",
            "/off/a.txt",
            "/bystatic/a.txt",
        ] {
            p.get_open(path, token);
        }
    }
    // With auth_basic: `satisfy any` lets either through (both refusals' WWW-Authenticate
    // when neither does), `satisfy all` needs both.
    let basic = "Authorization: Basic dXNlcjpwYXNz\r\n";
    for headers in [
        String::new(),
        "X-Token: good\r\n".to_string(),
        basic.to_string(),
        format!("{basic}X-Token: good\r\n"),
        format!("{basic}X-Token: forbid\r\n"),
        "X-Token: odd\r\n".to_string(),
    ] {
        p.get_open("/both/a.txt", &headers);
        p.get_open("/every/a.txt", &headers);
    }
    // The oauth2-proxy pattern: a 401 sends the client to sign in.
    for token in ["", "X-Token: good\r\n", "X-Token: forbid\r\n"] {
        p.get_open("/op/a.txt?x=1", token);
    }
    // A subrequest to a location with no file: 404 there, 500 here.
    p.get_open("/missing/a.txt", "X-Token: good\r\n");
    assert!(p
        .shoal_log()
        .contains("auth request unexpected status: 404"));
}
