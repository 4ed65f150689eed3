//! shoal against real nginx: every scenario writes one configuration, starts nginx and shoal
//! with it on two free ports, sends both the same raw requests and asserts the answers are the
//! same: status line, every header but `Date` and `Server` (in order), and the body (with the
//! server token in error pages normalised). See `diff/mod.rs` for exactly what is normalised.
//!
//! nginx is the reference: a difference here is a bug in shoal unless a comment at the scenario
//! says why shoal deliberately differs. The suite fails when nginx is not installed.

use crate::diff::{etag, permissions_enforced, Pair, A_TXT, MTIME_HTTP};

// ---- static files -------------------------------------------------------------------------

#[test]
fn get_and_head_of_a_file() {
    let p = Pair::new("");
    let r = p.get("/a.txt", "");
    assert!(r.contains(&format!("ETag: {}", etag(A_TXT.len()))), "{r}");
    assert!(r.contains(&format!("Last-Modified: {MTIME_HTTP}")), "{r}");
    p.head("/a.txt", "");
    p.get("/index.html", "");
    p.get("/page.html?x=1", "");
    p.get("/sub/deep/c.txt", "");
    p.get("/%61.txt", "");
}

#[test]
fn not_found() {
    let p = Pair::new("");
    let r = p.get("/nope", "");
    assert!(r.starts_with("HTTP/1.1 404 Not Found"), "{r}");
    p.head("/nope", "");
    p.get("/nope/deeper.txt", "");
    // A file used as a directory: ENOTDIR, 404.
    p.get("/a.txt/x", "");
}

#[test]
fn forbidden() {
    let p = Pair::new("");
    // A directory without an index file.
    let r = p.get("/emptydir/", "");
    assert!(r.starts_with("HTTP/1.1 403"), "{r}");
    if permissions_enforced() {
        let r = p.get("/secret.txt", "");
        assert!(r.starts_with("HTTP/1.1 403"), "{r}");
        // A directory without search permission.
        p.get("/locked/inner.txt", "");
        p.get("/locked/", "");
    }
}

#[test]
fn directory_without_slash() {
    let p = Pair::new("");
    let r = p.get("/dir", "");
    assert!(r.starts_with("HTTP/1.1 301"), "{r}");
    p.get("/dir?a=1&b=2", "");
    p.head("/dir", "");
    p.check(b"GET /dir HTTP/1.0\r\n\r\n");
    p.check(b"GET /dir HTTP/1.1\r\nHost: example.com:8080\r\n\r\n");
}

#[test]
fn redirect_knobs() {
    let p = Pair::new(
        "location /off/ { alias {HTML}/; absolute_redirect off; }\n\
         location /noport/ { alias {HTML}/; port_in_redirect off; }\n\
         location /name/ { alias {HTML}/; server_name_in_redirect on; }\n\
         location = /ret { absolute_redirect off; return 302 /a.txt; }",
    );
    for u in ["/off/dir", "/noport/dir", "/name/dir", "/ret"] {
        p.get(u, "");
        p.check(format!("GET {u} HTTP/1.1\r\nHost: other.example\r\n\r\n").as_bytes());
    }
}

#[test]
fn server_name_regex_captures_in_a_lone_server() {
    // The address's only server: chosen whatever the Host, but its regex name still sets
    // the captures when it matches.
    let p = Pair::new(
        r#"server_name ~^(?<sub>[a-z]+)\.(example)\.com$;
        location /caps { return 200 "sub=$sub one=$1 two=$2\n"; }"#,
    );
    for host in [
        "foo.example.com",
        "localhost",
        "bar.example.com:8080",
        "other.test",
    ] {
        let r = p.check(format!("GET /caps HTTP/1.1\r\nHost: {host}\r\n\r\n").as_bytes());
        assert!(r.starts_with("HTTP/1.1 200"), "{r}");
    }
    let r = p.check(b"GET /caps HTTP/1.1\r\nHost: foo.example.com\r\n\r\n");
    assert!(r.contains("sub=foo one=foo two=example"), "{r}");
    p.check(b"GET /caps HTTP/1.0\r\n\r\n");
}

#[test]
fn index_files() {
    let p = Pair::new("");
    p.get("/", "");
    p.get("/dir/", "");
    // Only index.htm: the default `index index.html` finds nothing.
    p.get("/dir2/", "");
    p.get("/missingdir/", "");
    p.head("/dir/", "");
    p.get("/dir/?x=1", "");
    // An `index.html` that is a directory.
    p.get("/dirindex/", "");
    // A file where a directory is expected.
    p.get("/a.txt/", "");
}

#[test]
fn index_of_several_names() {
    let p = Pair::new("index missing.html index.htm index.txt;");
    p.get("/", "");
    p.get("/dir/", "");
    p.get("/dir2/", "");
    p.get("/dir3/", "");
    p.get("/emptydir/", "");
}

#[test]
fn index_with_an_absolute_name() {
    let p = Pair::new("location /x/ { index missing.html /a.txt; }");
    p.get("/x/", "");
    p.get("/dir/", "");
}

// ---- try_files ------------------------------------------------------------------------------

#[test]
fn try_files_file_dir_and_code() {
    let p = Pair::new("location / { try_files $uri $uri/ =404; }");
    p.get("/a.txt", "");
    p.get("/dir", "");
    p.get("/dir/", "");
    p.get("/nope", "");
    p.get("/emptydir", "");
}

#[test]
fn try_files_named_fallback() {
    let p = Pair::new(
        "location / { try_files $uri @fb; }\n\
         location @fb { return 200 \"fallback for $uri\\n\"; }",
    );
    p.get("/a.txt", "");
    p.get("/nope", "");
    p.get("/dir/", "");
}

#[test]
fn try_files_uri_fallback() {
    let p = Pair::new(
        "location / { try_files $uri /page.html; }\n\
         location /gone/ { try_files $uri /missing.html; }",
    );
    p.get("/a.txt", "");
    p.get("/nope", "");
    p.get("/gone/x", "");
    p.get("/nope?q=1", "");
}

#[test]
fn try_files_code_other_than_404() {
    let p = Pair::new("location / { try_files $uri =403; }");
    p.get("/a.txt", "");
    p.get("/nope", "");
}

// ---- alias ------------------------------------------------------------------------------------

#[test]
fn alias_in_a_prefix_location() {
    let p =
        Pair::new("location /files/ { alias {HTML}/dir/; }\nlocation /one { alias {HTML}/a.txt; }");
    p.get("/files/b.txt", "");
    p.get("/files/", "");
    p.get("/files/nope", "");
    p.get("/files", "");
    p.get("/one", "");
}

#[test]
fn alias_in_a_regex_location_with_captures() {
    let p = Pair::new(
        "location ~ ^/img/(.+)$ { alias {HTML}/$1; }\n\
         location ~ ^/two/([a-z]+)/(.*)$ { alias {HTML}/$1/$2; }",
    );
    p.get("/img/a.txt", "");
    p.get("/img/dir/b.txt", "");
    p.get("/img/nope", "");
    p.get("/two/dir/b.txt", "");
    p.get("/two/dir/", "");
}

// shoal refuses `$name` from a named capture (`unknown "name" variable`): named captures are
// not variables yet (variables.rs).
#[test]
fn alias_with_named_captures() {
    let p = Pair::new("location ~ ^/d/(?<name>[a-z]+)/(.*)$ { alias {HTML}/$name/$2; }");
    p.get("/d/dir/b.txt", "");
    p.get("/d/dir/", "");
}

// ---- error_page ---------------------------------------------------------------------------------

#[test]
fn error_page_internal_uri() {
    let p = Pair::new("error_page 404 /custom404.html;");
    let r = p.get("/nope", "");
    assert!(r.contains("custom not found"), "{r}");
    p.head("/nope", "");
    p.get("/nope", "Range: bytes=0-3\r\n");
}

#[test]
fn error_page_with_a_status() {
    let p = Pair::new(
        "location /a/ { error_page 404 =200 /a.txt; }\n\
         location /b/ { error_page 404 = /a.txt; }\n\
         location /c/ { error_page 404 = /dir; }\n\
         location /d/ { error_page 404 =404 /missing.html; }\n\
         location /e/ { error_page 404 =410 /page.html; }",
    );
    p.get("/a/x", "");
    p.get("/b/x", "");
    p.get("/c/x", "");
    p.get("/d/x", "");
    p.get("/e/x", "");
    // The answer's status decides what the header filters do: ranges and conditionals apply to
    // a 200, whatever made it.
    p.get("/a/x", "Range: bytes=0-3\r\n");
    p.get("/a/x", &format!("If-None-Match: {}\r\n", etag(A_TXT.len())));
    p.get("/e/x", "Range: bytes=0-3\r\n");
    p.get("/e/x", &format!("If-None-Match: {}\r\n", etag(12)));
}

#[test]
fn error_page_named_location() {
    let p = Pair::new(
        "error_page 404 @nf;\n\
         location @nf { return 200 \"named: $uri\\n\"; }",
    );
    p.get("/nope", "");
    p.get("/a.txt", "");
}

#[test]
fn error_page_external_url() {
    let p = Pair::new(
        "location /a/ { error_page 404 http://example.com/nf; }\n\
         location /b/ { error_page 404 =301 http://example.com/moved; }\n\
         location /c/ { error_page 403 404 https://example.com/x?y=1; }",
    );
    p.get("/a/x", "");
    p.get("/b/x", "");
    p.get("/c/x", "");
}

// ---- return -------------------------------------------------------------------------------------

#[test]
fn return_text_and_codes() {
    let p = Pair::new(
        "location = /text { return 200 \"hello $uri\\n\"; }\n\
         location = /empty { return 200; }\n\
         location = /nf { return 404; }\n\
         location = /nftext { return 404 \"gone\"; }\n\
         location = /nc { return 204; }\n\
         location = /teapot { return 418; }\n\
         location = /err { return 500; }",
    );
    p.get("/text", "");
    p.head("/text", "");
    p.get("/empty", "");
    p.get("/nf", "");
    p.get("/nftext", "");
    p.get("/nc", "");
    p.get("/teapot", "");
    p.get("/err", "");
}

#[test]
fn return_redirects() {
    let p = Pair::new(
        "location = /rel { return 301 /a.txt; }\n\
         location = /abs { return 301 http://example.com/x; }\n\
         location = /found { return 302 https://example.com/y; }\n\
         location = /bare { return http://example.com/z; }\n\
         location = /see { return 303 /other; }\n\
         location = /tmp { return 307 /t; }\n\
         location = /perm { return 308 /p; }",
    );
    for u in ["/rel", "/abs", "/found", "/bare", "/see", "/tmp", "/perm"] {
        p.get(u, "");
    }
    p.check(b"GET /rel HTTP/1.0\r\n\r\n");
}

#[test]
fn return_444_closes() {
    let p = Pair::new("location = /close { return 444; }");
    let r = p.get_open("/close", "");
    assert_eq!(r, "[closed]");
}

#[test]
fn return_at_server_level() {
    let p = Pair::new("return 302 /elsewhere;\nlocation / { }");
    p.get("/a.txt", "");
}

// ---- internal, location order --------------------------------------------------------------------

#[test]
fn internal_locations() {
    let p = Pair::new(
        "location /int/ { internal; }\n\
         location /x/ { error_page 404 /int/page.html; }",
    );
    p.get("/int/page.html", "");
    p.get("/x/nope", "");
}

#[test]
fn location_matching_order() {
    // nginx's documentation example, each location answering its letter.
    let p = Pair::new(
        "location = / { return 200 A; }\n\
         location / { return 200 B; }\n\
         location /documents/ { return 200 C; }\n\
         location ^~ /images/ { return 200 D; }\n\
         location ~* \\.(gif|jpg|jpeg)$ { return 200 E; }\n\
         location ~ /documents/x { return 200 F; }\n\
         location ~ /documents/ { return 200 G; }\n\
         location = /exact/ { return 200 H; }\n\
         location /exact/ { return 200 I; }",
    );
    for u in [
        "/",
        "/index.html",
        "/documents/document.html",
        "/documents/x1",
        "/images/1.gif",
        "/documents/1.jpg",
        "/DOCS/1.JPG",
        "/exact/",
        "/exact/y",
        "/exact",
    ] {
        p.get(u, "");
    }
}

#[test]
fn nested_locations() {
    let p = Pair::new(
        "location /a/ {\n\
             location /a/b/ { return 200 AB; }\n\
             location ~ \\.txt$ { return 200 ATXT; }\n\
             return 200 A;\n\
         }\n\
         location ~ \\.txt$ { return 200 TXT; }\n\
         location ^~ /n/ { location ~ \\.txt$ { return 200 NTXT; } return 200 N; }",
    );
    for u in [
        "/a/",
        "/a/b/c",
        "/a/x.txt",
        "/a/b/x.txt",
        "/x.txt",
        "/n/y.txt",
        "/n/y",
    ] {
        p.get(u, "");
    }
}

// ---- header filters ------------------------------------------------------------------------------

#[test]
fn add_header_with_and_without_always() {
    let p = Pair::new(
        "add_header X-Srv srv;\n\
         location / { add_header X-Plain plain; add_header X-Always yes always; }\n\
         location /inherit/ { }\n\
         location = /r { add_header X-R r; return 301 /a.txt; }\n\
         location = /e { add_header X-E e; add_header X-Empty \"\"; return 500; }",
    );
    p.get("/a.txt", "");
    p.get("/nope", "");
    p.get("/inherit/nope", "");
    p.get("/dir/", "");
    p.get("/r", "");
    p.get("/e", "");
    p.get("/range.txt", "Range: bytes=0-3\r\n");
    p.get("/range.txt", "Range: bytes=0-3,5-6\r\n");
    p.get("/range.txt", "Range: bytes=5000-\r\n");
    p.get(
        "/a.txt",
        &format!("If-None-Match: {}\r\n", etag(A_TXT.len())),
    );
}

#[test]
fn add_header_sees_the_headers_set_so_far() {
    // `$sent_http_*` in add_header: nginx's headers filter reads the answer's headers as they
    // stand (Content-Type, Content-Length, Last-Modified, ETag, an earlier add_header).
    let p = Pair::new(
        "location / {\n\
             add_header X-CT \"[$sent_http_content_type]\";\n\
             add_header X-CL \"[$sent_http_content_length]\";\n\
             add_header X-LM \"[$sent_http_last_modified]\";\n\
             add_header X-ET \"[$sent_http_etag]\";\n\
             add_header X-First first;\n\
             add_header X-Second \"[$sent_http_x_first]\";\n\
             add_header X-Nope \"[$sent_http_x_nope]\";\n\
         }",
    );
    p.get("/a.txt", "");
    p.head("/a.txt", "");
    p.get("/range.txt", "Range: bytes=0-3\r\n");
    p.get("/nope", "");
    // (`$sent_http_location` differs: nginx's is the Location as set, `/a.txt`, made absolute
    // only when the head is written; shoal's is already absolute.)
}

#[test]
fn expires_variants() {
    let p = Pair::new(
        "location /h/ { alias {HTML}/; expires 1h; }\n\
         location /ep/ { alias {HTML}/; expires epoch; }\n\
         location /max/ { alias {HTML}/; expires max; }\n\
         location /off/ { alias {HTML}/; expires off; }\n\
         location /neg/ { alias {HTML}/; expires -1; }\n\
         location /mod/ { alias {HTML}/; expires modified 1d; }",
    );
    for l in ["h", "ep", "max", "off", "neg"] {
        p.get(&format!("/{l}/a.txt"), "");
        p.get(&format!("/{l}/nope"), "");
    }
    // `modified` counts from the file's time (2023): long past, so no-cache on both. The
    // Expires date is fixed there, but compared by shape like the others.
    p.get("/mod/a.txt", "");
    p.get("/h/range.txt", "Range: bytes=5000-\r\n");
    p.get("/h/range.txt", "Range: bytes=1-2\r\n");
}
