//! Which stream server a session reaches: a wildcard `listen PORT` and a specific address on
//! the same port (served through the wildcard's socket, as nginx does without `bind`), the
//! session goes to the server of the address it came to. Checked with few listen addresses
//! (compared in turn) and with many (looked up by hash).

use std::net::TcpStream;
use std::time::Duration;

use crate::common::{free_port, Shoal};
use crate::stream::conf;

/// What `return` sends on a connection to `ip`:`port`.
fn answer(ip: &str, port: u16) -> String {
    use std::io::Read;
    let mut c = TcpStream::connect((ip, port)).expect("connecting");
    c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut out = String::new();
    let _ = c.read_to_string(&mut out);
    out
}

fn routes_with(extra_servers: usize) {
    let (port, probe) = (free_port(), free_port());
    let mut body = format!(
        "    server {{ listen {port}; return wild; }}\n    \
         server {{ listen 127.0.0.2:{port}; return two; }}\n    \
         server {{ listen 127.0.0.1:{probe}; return ok; access_log off; }}\n"
    );
    for _ in 0..extra_servers {
        body += &format!(
            "    server {{ listen 127.0.0.1:{}; return other; }}\n",
            free_port()
        );
    }
    let s = Shoal::start(&conf(&body), probe);
    assert_eq!(
        answer("127.0.0.2", port),
        "two",
        "the specific address's server"
    );
    assert_eq!(answer("127.0.0.1", port), "wild", "the wildcard's server");
    assert_eq!(answer("127.0.0.3", port), "wild");
    drop(s);
}

#[test]
fn a_session_goes_to_the_server_of_its_address_few_listens() {
    routes_with(0);
}

#[test]
fn a_session_goes_to_the_server_of_its_address_many_listens() {
    routes_with(10);
}
