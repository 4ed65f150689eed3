//! Lines of published site configurations (Magento's `nginx.conf.sample`, WordPress-style
//! `try_files`) against real nginx: what running them side by side found.

use crate::diff::{Conf, Pair};

/// Magento sets its tree in a variable at server level and roots at `$MAGE_ROOT/pub`; its
/// PHP locations pass `SCRIPT_FILENAME $document_root$fastcgi_script_name`, so
/// `$document_root` must be the root with its variables evaluated (it was the text,
/// `$MAGE_ROOT/pub` under the prefix: every PHP request a 404 from PHP-FPM).
#[test]
fn document_root_evaluates_the_roots_variables() {
    let p = Pair::with(Conf {
        server: "set $site_root {HTML};\n\
                 location /pub/ { root $site_root; \
                 return 200 \"dr=$document_root rf=$request_filename rr=$realpath_root\\n\"; }\n\
                 location /al/ { alias $site_root/dir/; \
                 return 200 \"dr=$document_root rf=$request_filename\\n\"; }\n\
                 location /plain/ { return 200 \"dr=$document_root\\n\"; }",
        ..Default::default()
    });
    let html = p.html().display().to_string();
    let pub_answer = p.get("/pub/x.php?a=1", "");
    assert!(
        pub_answer.contains(&format!("dr={html} rf={html}/pub/x.php rr=")),
        "{pub_answer}"
    );
    p.get("/al/x.txt", "");
    p.get("/plain/", "");
}

/// `try_files $uri $uri/ ...` that finds a directory serves it in the location: its index
/// module's redirect keeps the request's arguments, as every index redirect does (they were
/// dropped, as if the redirect were `try_files`' own fallback).
#[test]
fn try_files_directory_index_keeps_the_arguments() {
    let p = Pair::with(Conf {
        server: "index index.php index.html;\n\
                 location / { try_files $uri $uri/ /fallback$is_args$args; }\n\
                 location ~ \\.php$ { \
                 return 200 \"uri=$uri args=$args is=$is_args ru=$request_uri\\n\"; }\n\
                 location /fallback { return 200 \"fallback uri=$uri args=$args\\n\"; }\n\
                 location /sub/ { try_files $uri/ =404; }",
        files: &[("index.php", ""), ("sub/index.php", "")],
        ..Default::default()
    });
    let root = p.get("/?a=b", "");
    assert!(root.contains("args=a=b is=?"), "{root}");
    p.get("/sub/?x=1&y=2", "");
    p.get("/nothing?q=2", "");
    p.get("/dir/?k=v", "");
}
