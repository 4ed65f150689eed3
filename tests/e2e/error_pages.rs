//! `error_page` targets that fail in turn, end to end: without `recursive_error_pages` the
//! target's failure is answered as it is (its own status and page); with it, that failure meets
//! the `error_page`s again, up to nginx's ten redirections.

use crate::common::client::{body_of, get_close, status_of};
use crate::common::*;

#[test]
fn a_failing_error_page_is_redirected_again_only_with_recursive_error_pages() {
    let port = free_port();
    let prefix = Prefix::new();
    std::fs::write(prefix.join("html/fallback.html"), "fallback\n").unwrap();
    let conf = format!(
        "daemon off;\nerror_log logs/error.log info;\nevents {{ }}\nhttp {{\n    \
         server {{\n        listen 127.0.0.1:{port};\n        \
         error_page 403 /fallback.html;\n        \
         location /plain/ {{ error_page 404 /denied; }}\n        \
         location /rec/ {{ recursive_error_pages on; error_page 404 =200 /denied; }}\n        \
         location /denied {{ return 403; }}\n        \
         location /loop/ {{ recursive_error_pages on; error_page 404 /loop/nothing; }}\n    \
         }}\n}}\n"
    );
    let s = Shoal::start_in(prefix, &conf, port, &[]);
    let plain = get_close(port, "/plain/x");
    assert_eq!(status_of(&plain), 403, "{plain}");
    assert!(
        body_of(&plain).contains("<title>403 Forbidden</title>"),
        "{plain}"
    );
    // The 403 of the target meets the server's `error_page 403`: its status, that page.
    let rec = get_close(port, "/rec/x");
    assert_eq!(status_of(&rec), 403, "{rec}");
    assert_eq!(body_of(&rec), "fallback\n");
    let looped = get_close(port, "/loop/x");
    assert_eq!(status_of(&looped), 500, "{looped}");
    s.wait_log(
        "rewrite or internal redirection cycle while internally redirecting to \"/loop/nothing\"",
        1,
    );
    // The request's own 404, then ten of the target's before the eleventh redirection.
    let misses = s.error_log().matches("/loop/nothing\" failed").count();
    assert_eq!(misses, 10, "{}", s.error_log());
}
