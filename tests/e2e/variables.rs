//! Variables nginx documents that shoal gained late, end to end: `$request_id` (32 hex
//! digits, one per request, the same wherever the request reads it), `$pipe`,
//! `$connection_time`, `$request_completion`, `$request_body` in a proxied location (the
//! header sent upstream and the log), `$request_body_file` with `client_body_in_file_only`,
//! `$tcpinfo_*`, `$nginx_version`, `$sent_trailer_*` (none sent: `-` in the log).

use crate::common::upstream::Upstream;
use crate::common::{free_port, wait_for, Client, Prefix, Shoal};

fn start(server: &str) -> Shoal {
    let port = free_port();
    let prefix = Prefix::new();
    let conf = format!(
        "daemon off;\nerror_log logs/error.log info;\nevents {{ }}\n\
         http {{\n    log_format v '$uri id=$request_id pipe=$pipe done=$request_completion \
         body=$request_body file=$request_body_file ct=$connection_time rtt=$tcpinfo_rtt \
         tr=$sent_trailer_x';\n    access_log logs/access.log v;\n    server {{\n        \
         listen 127.0.0.1:{port};\n{server}\n    }}\n}}\n"
    );
    std::fs::create_dir_all(prefix.join("tmp")).unwrap();
    Shoal::start_in(prefix, &conf, port, &[])
}

fn is_hex32(s: &str) -> bool {
    s.len() == 32
        && s.bytes()
            .all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase())
}

#[test]
fn request_id_pipe_and_completion() {
    let s = start(
        "location / { add_header X-Id $request_id; \
         return 200 \"$request_id $pipe $nginx_version $connection_time $tcpinfo_rtt\\n\"; }",
    );
    let mut c = Client::connect(s.port);
    // Two requests in one write: the second was pipelined.
    c.send(b"GET /a HTTP/1.1\r\nHost: x\r\n\r\nGET /b HTTP/1.1\r\nHost: x\r\n\r\n")
        .unwrap();
    let a = c.read_framed().unwrap();
    let b = c.read_framed().unwrap();
    let fields = |r: &crate::common::Response| {
        String::from_utf8_lossy(&r.body)
            .trim_end()
            .split(' ')
            .map(str::to_string)
            .collect::<Vec<_>>()
    };
    let (fa, fb) = (fields(&a), fields(&b));
    assert!(is_hex32(&fa[0]), "{fa:?}");
    assert_eq!(a.header("x-id"), Some(fa[0].as_str()));
    assert_ne!(fa[0], fb[0]);
    assert_eq!((fa[1].as_str(), fb[1].as_str()), (".", "p"));
    assert_eq!(fa[2], "1.22.1");
    let (secs, ms) = fa[3].split_once('.').unwrap();
    assert!(secs.parse::<u64>().is_ok() && ms.len() == 3, "{fa:?}");
    assert!(fa[4].parse::<u64>().is_ok(), "{fa:?}");
    let log = wait_for("the access log", || {
        let l = s.prefix.read("logs/access.log");
        (l.lines().count() >= 2).then_some(l)
    });
    let first = log.lines().next().unwrap();
    assert!(
        first.starts_with(&format!("/a id={} pipe=. done=OK body=- file=- ct=", fa[0])),
        "{log}"
    );
    assert!(first.ends_with(" tr=-"), "{first}");
}

#[test]
fn request_body_in_a_proxied_location() {
    let up = Upstream::echo();
    let s = start(&format!(
        "location /p/ {{ proxy_set_header X-Body $request_body; proxy_pass {}; }}\n\
         location /f/ {{ client_body_in_file_only on; client_body_temp_path tmp; \
         proxy_pass {}; }}",
        up.url(),
        up.url()
    ));
    let mut c = Client::connect(s.port);
    let r = c
        .ask("POST /p/x HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello")
        .unwrap();
    assert_eq!(r.status, 200);
    assert_eq!(up.last().header("x-body"), Some("hello"));
    let r = c
        .ask("POST /f/x HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nabc")
        .unwrap();
    assert_eq!(r.status, 200);
    let log = wait_for("the access log", || {
        let l = s.prefix.read("logs/access.log");
        (l.lines().count() >= 2).then_some(l)
    });
    assert!(log.contains("/p/x id="), "{log}");
    assert!(log.contains(" body=hello file=- "), "{log}");
    let tmp = s.prefix.join("tmp").display().to_string();
    assert!(log.contains(&format!(" body=- file={tmp}/")), "{log}");
}
