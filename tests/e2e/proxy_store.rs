//! `proxy_store` end to end, shoal alone (what the differential suite does not cover): an
//! answer cut short stores nothing and leaves no temporary file, `proxy_buffering off`
//! stores nothing, and the default mode is the user's `rw`; a client that goes away
//! mid-answer does not stop the store (nginx reads on, with `proxy_ignore_client_abort` off
//! or on: checked against nginx 1.22, both stored the whole answer).

use std::os::unix::fs::PermissionsExt;

use crate::common::upstream::{Answer, Upstream};
use crate::common::{free_port, get, wait_for, Shoal};

fn start(up: &Upstream) -> (Shoal, u16) {
    let port = free_port();
    let conf = format!(
        "daemon off;\nerror_log logs/error.log info;\nevents {{ }}\nhttp {{\n    access_log off;\n    \
         proxy_temp_path tmp;\n    server {{\n        listen 127.0.0.1:{port};\n        \
         location / {{ root store; proxy_store on; proxy_pass {0}; }}\n        \
         location /unbuffered/ {{ root store; proxy_store on; proxy_buffering off; \
         proxy_pass {0}; }}\n    }}\n}}\n",
        up.url()
    );
    let prefix = crate::common::Prefix::new();
    std::fs::create_dir_all(prefix.join("tmp")).unwrap();
    (Shoal::start_in(prefix, &conf, port, &[]), port)
}

#[test]
fn what_is_stored_and_what_is_not() {
    let up = Upstream::start(move |r| match r.target.as_str() {
        "/whole.txt" | "/unbuffered/u.txt" => Answer::ok("whole\n"),
        "/cut.txt" => Answer::ok("part").cut_short(100),
        _ => Answer::status(404),
    });
    let (s, port) = start(&up);
    let store = s.prefix.join("store");

    assert_eq!(get(port, "/whole.txt").unwrap().body, b"whole\n");
    let f = store.join("whole.txt");
    wait_for("the stored file", || f.exists().then_some(()));
    assert_eq!(std::fs::read_to_string(&f).unwrap(), "whole\n");
    let mode = std::fs::metadata(&f).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);

    assert_eq!(get(port, "/nothing").unwrap().status, 404);
    let _ = get(port, "/cut.txt");
    let _ = get(port, "/unbuffered/u.txt");

    assert!(!store.join("nothing").exists());
    assert!(!store.join("cut.txt").exists());
    assert!(!store.join("unbuffered/u.txt").exists());
    // No temporary file is left behind.
    let left: Vec<_> = std::fs::read_dir(s.prefix.join("tmp"))
        .map(|d| d.filter_map(|e| e.ok()).map(|e| e.path()).collect())
        .unwrap_or_default();
    assert!(left.is_empty(), "{left:?}");
}

/// The client reads the head and a little, then closes while the upstream still sends: the
/// answer is read to its end and stored whole, as nginx stores it.
#[test]
fn a_client_that_goes_away_does_not_stop_the_store() {
    use std::io::{Read, Write};
    const SIZE: usize = 400_000;
    let up = Upstream::start(move |_| {
        Answer::ok(vec![b's'; SIZE]).delay_body(50_000, std::time::Duration::from_millis(800))
    });
    let (s, port) = start(&up);
    let mut c = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    c.write_all(b"GET /big.bin HTTP/1.1\r\nHost: localhost\r\n\r\n")
        .unwrap();
    let mut buf = [0u8; 4096];
    let n = c.read(&mut buf).unwrap();
    assert!(buf[..n].starts_with(b"HTTP/1.1 200"));
    drop(c);
    let f = s.prefix.join("store/big.bin");
    let len = wait_for("the stored file", || {
        std::fs::metadata(&f).ok().map(|m| m.len())
    });
    assert_eq!(len, SIZE as u64);
}
