//! The differential harness over TLS: nginx and shoal on one `listen ... ssl` configuration with
//! the same certificate, the same requests sent over TLS (or in plain HTTP to the TLS port),
//! the answers compared byte for byte after the harness's normalisation. TLS must not change an
//! answer, and where it adds one of its own (497, 496, 495) the page, the status line and the
//! close are nginx's.

use crate::diff::{Conf, Pair, A_TXT};

fn pair(server: &str) -> Pair {
    Pair::with(Conf {
        server,
        tls: true,
        ..Default::default()
    })
}

#[test]
fn files_errors_and_ranges_over_tls_are_nginxs() {
    let p = pair(
        "location /v { return 200 \"$https $scheme $ssl_protocol $ssl_cipher $ssl_server_name $ssl_session_reused $ssl_client_verify\\n\"; }\n        \
         location /r { return 302 /a.txt; }\n        \
         location /z { gzip on; gzip_types text/plain; gzip_min_length 1; alias {HTML}/range.txt; }",
    );
    let got = p.check_tls(b"GET /a.txt HTTP/1.1\r\nHost: localhost\r\n\r\n", false);
    assert!(got.contains(A_TXT.trim_end()), "{got}");
    p.check_tls(b"GET /nothere HTTP/1.1\r\nHost: localhost\r\n\r\n", false);
    p.check_tls(b"HEAD /a.txt HTTP/1.1\r\nHost: localhost\r\n\r\n", false);
    p.check_tls(
        b"GET /range.txt HTTP/1.1\r\nHost: localhost\r\nRange: bytes=10-19,-5\r\n\r\n",
        false,
    );
    p.check_tls(
        b"GET /dir HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n",
        false,
    );
    // Redirects name `https` and leave the port out only when it is 443.
    p.check_tls(b"GET /r HTTP/1.1\r\nHost: localhost\r\n\r\n", false);
    p.check_tls(b"GET /r HTTP/1.0\r\n\r\n", false);
    // A compressed answer (chunked) over TLS.
    p.check_tls(
        b"GET /z HTTP/1.1\r\nHost: localhost\r\nAccept-Encoding: gzip\r\n\r\n",
        false,
    );
    // Pipelined over TLS, then a request line nginx refuses.
    p.check_tls(
        b"GET /a.txt HTTP/1.1\r\nHost: localhost\r\n\r\nGET /dir/b.txt HTTP/1.1\r\nHost: localhost\r\n\r\nBAD\r\n\r\n",
        false,
    );
    // The ssl module's variables, as nginx 1.22 negotiates by default (TLSv1.2).
    let got = p.check_tls(b"GET /v HTTP/1.1\r\nHost: localhost\r\n\r\n", false);
    assert!(
        got.contains("on https TLSv1.2 ECDHE-ECDSA-AES256-GCM-SHA384 localhost . NONE"),
        "{got}"
    );
}

#[test]
fn plain_http_to_the_tls_port_is_nginxs_497() {
    let p = pair("");
    let got = p.check(b"GET /a.txt HTTP/1.1\r\nHost: localhost\r\n\r\n");
    assert!(
        got.contains("The plain HTTP request was sent to HTTPS port"),
        "{got}"
    );
    p.check(b"HEAD /a.txt HTTP/1.0\r\n\r\n");
    p.check(b"GET /a.txt HTTP/1.1\r\nHost: localhost\r\n\r\nGET /a.txt HTTP/1.1\r\nHost: localhost\r\n\r\n");
    let p = pair("error_page 497 https://$host:443$request_uri;");
    let got = p.check(b"GET /x?y=1 HTTP/1.1\r\nHost: localhost\r\n\r\n");
    assert!(got.contains("302"), "{got}");
    let p = pair("error_page 497 =200 /a.txt;");
    p.check(b"GET /x HTTP/1.1\r\nHost: localhost\r\n\r\n");
}

#[test]
fn client_certificates_required_are_nginxs_496_or_an_answer() {
    let p = pair(
        "ssl_verify_client on; ssl_client_certificate {CA};\n        \
         location /who { return 200 \"$ssl_client_verify $ssl_client_s_dn $ssl_client_serial\\n\"; }",
    );
    let got = p.check_tls(b"GET /a.txt HTTP/1.1\r\nHost: localhost\r\n\r\n", false);
    assert!(
        got.contains("No required SSL certificate was sent"),
        "{got}"
    );
    let got = p.check_tls(b"GET /who HTTP/1.1\r\nHost: localhost\r\n\r\n", true);
    assert!(got.contains("SUCCESS"), "{got}");
}
