//! Idle keep-alive connections park (`crates/server/src/http/h1/park.rs`): one that waited a
//! sweep interval for its next request gives up its task and waits in its worker's parked set,
//! an epoll instance of its own. Seen from here: the parked sockets are in that epoll (its
//! registrations ask for input and the peer's close only, level-triggered, unlike tokio's), and
//! a parked connection behaves as any idle one: it answers its next request, keeps its
//! `keepalive_timeout`, closes for a graceful stop or for a newcomer at `worker_connections`,
//! follows a reload, and logs its close in its server's error log.

use std::io::Read;
use std::time::{Duration, Instant};

use crate::common::{self, free_port, wait_for, Client, Shoal};

fn conf(port: u16, events: &str, http: &str, server: &str) -> String {
    format!(
        "daemon off;\n\
         error_log logs/error.log info;\n\
         worker_processes 1;\n\
         events {{ {events} }}\n\
         http {{\n\
         \x20   access_log off;\n\
         {http}\n\
         \x20   server {{\n\
         \x20       listen 127.0.0.1:{port};\n\
         \x20       root html;\n\
         {server}\n\
         \x20   }}\n\
         }}\n"
    )
}

/// Sockets in an epoll instance of `pid` registered as the parked set registers them
/// (`EPOLLIN | EPOLLRDHUP`, with the `EPOLLERR | EPOLLHUP` the kernel adds; not
/// edge-triggered as tokio's), over all its epoll instances.
pub(crate) fn parked(pid: i32) -> usize {
    let mut n = 0;
    let Ok(fds) = std::fs::read_dir(format!("/proc/{pid}/fd")) else {
        return 0;
    };
    for fd in fds.flatten() {
        let is_epoll = std::fs::read_link(fd.path())
            .map(|t| t.to_string_lossy().contains("eventpoll"))
            .unwrap_or(false);
        if !is_epoll {
            continue;
        }
        let info = std::fs::read_to_string(format!(
            "/proc/{pid}/fdinfo/{}",
            fd.file_name().to_string_lossy()
        ))
        .unwrap_or_default();
        n += info
            .lines()
            .filter(|l| l.starts_with("tfd:"))
            .filter(|l| l.split_whitespace().nth(3) == Some("2019"))
            .count();
    }
    n
}

fn idle_after_one(port: u16, path: &str) -> Client {
    let mut c = Client::connect(port);
    c.stream().set_read_timeout(Some(common::WAIT)).unwrap();
    assert_eq!(c.get(path).expect("an answer").status, 200);
    c
}

/// Whether the server closed `c` (EOF) before `within` passed.
fn closed_within(c: &mut Client, within: Duration) -> bool {
    c.stream().set_read_timeout(Some(within)).unwrap();
    let mut b = [0u8; 64];
    match c.stream().read(&mut b) {
        Ok(0) => true,
        Err(e) => e.kind() == std::io::ErrorKind::ConnectionReset,
        Ok(_) => false,
    }
}

#[test]
fn idle_connections_park_and_answer_their_next_request() {
    let port = free_port();
    let s = Shoal::start(
        &conf(
            port,
            "",
            "",
            "location = /n { return 200 \"$connection\"; }\n location = /r { return 200 \"$connection_requests\"; }",
        ),
        port,
    );
    let mut idle: Vec<(Client, Vec<u8>)> = (0..20)
        .map(|_| {
            let mut c = Client::connect(port);
            c.stream().set_read_timeout(Some(common::WAIT)).unwrap();
            let r = c.get("/n").expect("an answer");
            (c, r.body)
        })
        .collect();
    wait_for("20 parked connections", || {
        (parked(s.pid) == 20).then_some(())
    });
    // Each answers again as the same connection (its number), and leaves the set.
    for (c, number) in &mut idle {
        let r = c.get("/n").expect("a parked connection answers");
        assert_eq!((r.status, &r.body), (200, &*number));
    }
    assert!(parked(s.pid) < 20);
    // And parks again once idle.
    wait_for("20 parked again", || (parked(s.pid) == 20).then_some(()));
    for (c, number) in &mut idle {
        assert_eq!(&c.get("/n").unwrap().body, &*number);
    }
    // `$connection_requests` counts on across the parking: this is the connection's fourth.
    assert_eq!(idle[0].0.get("/r").unwrap().body, b"4");
}

#[test]
fn a_parked_connection_keeps_its_keepalive_timeout_and_logs_its_close() {
    let port = free_port();
    let s = Shoal::start(
        &conf(
            port,
            "",
            "keepalive_timeout 2s;",
            "location / { return 200 ok; }\n location /other { error_log logs/other.log info; return 200 other; }",
        ),
        port,
    );
    // keepalive_timeout: closed by the server after about 2 s of waiting, parked or not.
    let mut c = idle_after_one(port, "/");
    let started = Instant::now();
    wait_for("a parked connection", || (parked(s.pid) == 1).then_some(()));
    assert!(closed_within(&mut c, Duration::from_secs(10)), "not closed");
    let waited = started.elapsed();
    assert!(
        waited >= Duration::from_millis(1500),
        "closed after {waited:?}"
    );
    assert_eq!(parked(s.pid), 0);
    // A client that closes a parked connection: nginx's line, in the error log of the
    // location that answered last (the connection's log scope goes with it).
    let c = idle_after_one(port, "/other");
    wait_for("a parked connection", || (parked(s.pid) == 1).then_some(()));
    drop(c);
    wait_for("the close logged in other.log", || {
        s.prefix
            .read("logs/other.log")
            .contains("client 127.0.0.1 closed keepalive connection")
            .then_some(())
    });
    wait_for("the set empty", || (parked(s.pid) == 0).then_some(()));
}

#[test]
fn parked_connections_follow_a_reload_and_close_on_a_graceful_stop() {
    let port = free_port();
    let mut s = Shoal::start(
        &conf(
            port,
            "",
            "keepalive_timeout 300s;",
            "location / { return 200 one; }",
        ),
        port,
    );
    let mut idle: Vec<Client> = (0..5).map(|_| idle_after_one(port, "/")).collect();
    wait_for("5 parked connections", || {
        (parked(s.pid) == 5).then_some(())
    });
    let text = s
        .prefix
        .read("conf/shoal.conf")
        .replace("return 200 one", "return 200 two");
    s.prefix.write_conf(&text);
    s.signal(libc::SIGHUP);
    s.wait_log("reconfiguring", 1);
    // Each one's next request takes the new configuration.
    for c in &mut idle {
        wait_for("the new configuration", || {
            let r = c.get("/").expect("an answer after the reload");
            (r.body == b"two").then_some(())
        });
    }
    wait_for("5 parked again", || (parked(s.pid) == 5).then_some(()));
    // QUIT: the parked connections close at once, not after keepalive_timeout's 300 s.
    s.signal(libc::SIGQUIT);
    for c in &mut idle {
        assert!(
            closed_within(c, common::WAIT),
            "a parked connection left open"
        );
    }
    assert!(s.wait_exit().success());
}

#[test]
fn parked_connections_make_room_at_worker_connections() {
    let port = free_port();
    let s = Shoal::start(
        &conf(
            port,
            "worker_connections 8;",
            "keepalive_timeout 300s;",
            "location / { return 200 ok; }",
        ),
        port,
    );
    let mut idle: Vec<Client> = (0..8).map(|_| idle_after_one(port, "/")).collect();
    wait_for("8 parked connections", || {
        (parked(s.pid) == 8).then_some(())
    });
    // A newcomer is answered: a parked one (the longest waiting) closes for it.
    let mut c = Client::connect(port);
    c.stream().set_read_timeout(Some(common::WAIT)).unwrap();
    assert_eq!(c.get("/").expect("a newcomer is answered").status, 200);
    s.wait_log(
        "8 worker_connections are not enough, reusing connections",
        1,
    );
    assert!(
        closed_within(&mut idle[0], common::WAIT),
        "the oldest was not closed"
    );
}

/// TLS connections park too (their socket, once no decrypted byte waits), and go on with the
/// same session: the next request is read, answered, and the connection parks again.
#[test]
fn tls_connections_park_and_go_on() {
    use crate::common::tls::{Opts, Pki, TlsClient};
    let mut pki = Pki::new();
    pki.issue("a", &["a.test"], false);
    let (port, tls_port) = (free_port(), free_port());
    let s = Shoal::start(
        &conf(
            port,
            "",
            &format!(
                "server {{ listen 127.0.0.1:{tls_port} ssl; server_name a.test; {} ssl_protocols TLSv1.2 TLSv1.3; location / {{ return 200 \"$connection $ssl_protocol\"; }} }}",
                pki.ssl_lines("a")
            ),
            "",
        ),
        port,
    );
    let opts = Opts {
        sni: Some("a.test"),
        ..Opts::default()
    };
    let mut clients: Vec<(TlsClient, Vec<u8>)> = (0..3)
        .map(|_| {
            let mut c = TlsClient::connect(tls_port, &pki, &opts).expect("a handshake");
            let (status, _, body) = c.get("a.test", "/").unwrap();
            assert_eq!(status, 200);
            (c, body)
        })
        .collect();
    wait_for("3 parked TLS connections", || {
        (parked(s.pid) == 3).then_some(())
    });
    for (c, first) in &mut clients {
        let (status, _, body) = c
            .get("a.test", "/")
            .expect("a parked TLS connection answers");
        assert_eq!((status, &body), (200, &*first));
    }
    wait_for("parked again", || (parked(s.pid) == 3).then_some(()));
}
