//! FastCGI against real nginx: one PHP-FPM (on a port of 127.0.0.1) serves both, with the
//! shipped `fastcgi.conf` and Debian's snippet; the same requests get the same answers (PHP's
//! statuses, headers and output, the params it saw, try_files' 404, uploads, HEAD, intercepted
//! errors, hidden headers).

use crate::common::backends;
use crate::diff::{Conf, Pair};

fn pair(php: &backends::Backend) -> Pair {
    let server = format!(
        "index index.php;\n\
         location / {{ try_files $uri $uri/ /index.php?$args; }}\n\
         location ~ \\.php$ {{\n    include {{HTML}}/fastcgi-php.conf;\n    fastcgi_pass {pass};\n}}\n\
         location /icpt/ {{ include fastcgi.conf; \
         fastcgi_param SCRIPT_FILENAME $document_root/echo.php; fastcgi_intercept_errors on; \
         error_page 404 /index.html; fastcgi_pass {pass}; }}\n\
         location /hide/ {{ include fastcgi_params; \
         fastcgi_param SCRIPT_FILENAME $document_root/echo.php; fastcgi_hide_header X-Script; \
         fastcgi_pass_header X-Powered-By; fastcgi_pass {pass}; }}\n\
         location /cached/ {{ include fastcgi.conf; \
         fastcgi_param SCRIPT_FILENAME $document_root/echo.php; fastcgi_cache php; \
         fastcgi_cache_key $request_uri; fastcgi_cache_valid 200 1m; \
         add_header X-Cache $upstream_cache_status; fastcgi_pass {pass}; }}",
        pass = php.listen.pass()
    );
    Pair::with(Conf {
        http: "client_max_body_size 4m;\nfastcgi_cache_path cache keys_zone=php:1m;",
        server: &server,
        files: &[
            ("fastcgi-php.conf", crate::fastcgi::DEBIAN_SNIPPET),
            ("echo.php", crate::fastcgi::ECHO_PHP),
            ("index.php", crate::fastcgi::ECHO_PHP),
        ],
        ..Default::default()
    })
}

/// The PHP version's header differs nowhere (one PHP-FPM), but nginx's and shoal's ports do:
/// the params' answer leaves them out.
#[test]
fn php_answers_as_through_nginx() {
    let php = backends::php_fpm_on(true, 2);
    let p = pair(&php);
    for (path, headers) in [
        ("/echo.php", ""),
        ("/echo.php/more/path?a=1&b=%20x", "X-Test: one\r\n"),
        ("/missing.php", ""),
        ("/pretty/url/?p=2", ""),
        ("/echo.php?status=404", ""),
        ("/echo.php?status=503%20Busy", ""),
        ("/echo.php?location=/there", ""),
        ("/echo.php?location=http://example.com/x", ""),
        ("/icpt/?status=404", ""),
        ("/icpt/?status=500", ""),
        ("/hide/?q=1", "X-Test: two\r\n"),
        ("/cached/?c=1", ""),
        ("/cached/?c=1", ""),
    ] {
        let answer = p.get_open(path, headers);
        // PHP answered (not an error page both servers would agree on).
        if !path.starts_with("/missing") && !path.starts_with("/icpt") {
            assert!(
                answer.contains("X-Powered-By: PHP/"),
                "{path}: {answer}\n{}\n{}",
                p.shoal_log(),
                p.nginx_log()
            );
        }
        p.head_open(path, headers);
    }
    // A large answer, to an HTTP/1.0 client (no chunks, whose sizes would differ).
    let big = p.check_open(b"GET /echo.php?big=300000 HTTP/1.0\r\nHost: localhost\r\n\r\n");
    assert!(big.len() > 300_000);
}

#[test]
fn uploads_as_through_nginx() {
    let php = backends::php_fpm_on(true, 2);
    let p = pair(&php);
    let body: String = (0..200_000)
        .map(|i| (b'a' + (i % 26) as u8) as char)
        .collect();
    let a = p.check_open(
        format!(
            "POST /echo.php HTTP/1.0\r\nHost: localhost\r\nContent-Type: text/plain\r\n\
             Content-Length: {}\r\n\r\n{body}",
            body.len()
        )
        .as_bytes(),
    );
    assert!(a.contains("BODY_LEN=200000"), "{a}");
    p.check_open(
        b"POST /echo.php?x=1 HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\
          Content-Type: application/x-www-form-urlencoded\r\nTransfer-Encoding: chunked\r\n\r\n\
          5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n",
    );
}
