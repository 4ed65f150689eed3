//! TLS in `stream {}`: termination in front of a plain upstream, and `ssl_alpn`.

use std::io::Read;

use crate::common::{free_port, wait_for, Shoal};

use super::{s_client_alpn, tcp, Echo};

#[test]
fn tls_termination_in_front_of_a_plain_upstream() {
    use crate::common::tls::{Opts, Pki, TlsClient};
    let mut pki = Pki::new();
    pki.issue("srv", &["127.0.0.1", "localhost"], false);
    let a = Echo::start("A:");
    let port = free_port();
    let s = Shoal::start(
        &format!(
            "daemon off;\nerror_log logs/error.log info;\nevents {{ }}\nstream {{\n\
             log_format t '$status $ssl_protocol $ssl_server_name $bytes_received';\n\
             access_log logs/stream.log t;\n\
             server {{ listen 127.0.0.1:{port} ssl; {} ssl_protocols TLSv1.2 TLSv1.3; \
             proxy_pass 127.0.0.1:{}; }}\n}}\n",
            pki.ssl_lines("srv"),
            a.port
        ),
        port,
    );
    let mut c = TlsClient::connect(
        port,
        &pki,
        &Opts {
            sni: Some("localhost"),
            ..Default::default()
        },
    )
    .expect("the handshake");
    c.send(b"secret").unwrap();
    let mut got = Vec::new();
    let mut buf = [0u8; 64];
    while !got.ends_with(b"secret") {
        let n = c.stream.read(&mut buf).expect("reading the echo");
        assert!(n > 0, "closed early: {got:?}");
        got.extend_from_slice(&buf[..n]);
    }
    assert_eq!(
        got, b"A:secret",
        "decrypted to the upstream, encrypted back"
    );
    drop(c);
    // Plain bytes on the TLS port: the handshake fails, nginx's 500.
    assert_eq!(tcp(port, b"GET / HTTP/1.0\r\n\r\n"), b"");
    let text = wait_for("two sessions logged", || {
        let t = s.prefix.read("logs/stream.log");
        (t.lines().count() >= 3).then_some(t)
    });
    assert!(text.contains("200 TLSv1.3 localhost 6\n"), "{text}");
    assert!(text.contains("500 - - 0\n"), "{text}");
    s.wait_log("while SSL handshaking, client: 127.0.0.1", 1);
}

#[test]
fn ssl_alpn_chooses_in_the_server_s_order_and_refuses_a_stranger() {
    let mut pki = crate::common::tls::Pki::new();
    pki.issue("srv", &["127.0.0.1", "localhost"], false);
    let (p1, p2) = (free_port(), free_port());
    let s = Shoal::start(
        &format!(
            "daemon off;\nerror_log logs/error.log info;\nevents {{ }}\nstream {{\n\
             ssl_alpn h2 http/1.1;\n{ssl}\n\
             log_format t '$status \"$ssl_alpn_protocol\"';\naccess_log logs/stream.log t;\n\
             server {{ listen 127.0.0.1:{p1} ssl; return \"<<alpn=$ssl_alpn_protocol>>\"; }}\n\
             server {{ listen 127.0.0.1:{p2} ssl; ssl_alpn off-by-one; \
             return \"<<alpn=$ssl_alpn_protocol>>\"; }}\n}}\n",
            ssl = pki.ssl_lines("srv"),
        ),
        p1,
    );
    // The server's order decides, whatever the client's.
    assert_eq!(
        s_client_alpn(p1, Some("http/1.1,h2")),
        "ALPN protocol: h2 [h2]"
    );
    assert_eq!(
        s_client_alpn(p1, Some("x,http/1.1")),
        "ALPN protocol: http/1.1 [http/1.1]"
    );
    // No ALPN offered: none chosen, the session goes on.
    assert_eq!(s_client_alpn(p1, None), "No ALPN negotiated []");
    // Nothing in common: the handshake ends with no_application_protocol.
    assert_eq!(
        s_client_alpn(p1, Some("imap")),
        "refused: no application protocol"
    );
    // A server's own list replaces the stream level's.
    assert_eq!(
        s_client_alpn(p2, Some("h2,off-by-one")),
        "ALPN protocol: off-by-one [off-by-one]"
    );
    assert_eq!(
        s_client_alpn(p2, Some("h2")),
        "refused: no application protocol"
    );
    // (The first line is the start's probe, a plain connection: a failed handshake.)
    let text = wait_for("seven sessions logged", || {
        let t = s.prefix.read("logs/stream.log");
        (t.lines().count() >= 7).then_some(t)
    });
    assert_eq!(
        text,
        "500 \"-\"\n200 \"h2\"\n200 \"http/1.1\"\n200 \"-\"\n500 \"-\"\n200 \"off-by-one\"\n500 \"-\"\n"
    );
}

#[test]
fn without_ssl_alpn_a_stream_handshake_negotiates_no_protocol() {
    let mut pki = crate::common::tls::Pki::new();
    pki.issue("srv", &["127.0.0.1", "localhost"], false);
    let port = free_port();
    let _s = Shoal::start(
        &format!(
            "daemon off;\nevents {{ }}\nstream {{\n\
             server {{ listen 127.0.0.1:{port} ssl; {} return \"<<alpn=$ssl_alpn_protocol>>\"; }}\n}}\n",
            pki.ssl_lines("srv"),
        ),
        port,
    );
    // (Not http/1.1 as an http server's handshake: a client offering only h2 still connects.)
    assert_eq!(s_client_alpn(port, Some("h2")), "No ALPN negotiated []");
    assert_eq!(
        s_client_alpn(port, Some("http/1.1")),
        "No ALPN negotiated []"
    );
}
