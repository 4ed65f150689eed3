//! The server side of a TLS handshake on an accepted TCP connection, as nginx's
//! `ngx_http_ssl_handshake` and its SNI callback do it.
//!
//! [`accept`] peeks at the first byte: a TLS record (0x16) or an SSLv2 hello (top bit set) is a
//! handshake; anything else is plain HTTP on a TLS port, handed back untouched so the caller can
//! read the request and answer nginx's 400 ("The plain HTTP request was sent to HTTPS port",
//! status 497 for `error_page`). rustls's `Acceptor` reads the ClientHello; SNI chooses the
//! server (its `server_name`s, else the address's default); `ssl_reject_handshake` answers an
//! `unrecognized_name` alert; then the chosen server's configuration completes the handshake.
//! The caller bounds the whole by a timeout (nginx: `client_header_timeout`) and logs
//! [`TlsError::timed_out`] when it runs out.

use std::io::{self, Read};
use std::net::SocketAddr;

use rustls::server::Acceptor;
use rustls::{HandshakeKind, ProtocolVersion};
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

use super::build::{AddrTls, HandshakeVars};
use super::conn::{SockRead, SockWrite};
use super::error::{Call, TlsError};
use super::info::TlsInfo;
use super::stream::TlsStream;
use crate::log::Level;

/// What a connection on a TLS address turned out to be.
#[derive(Debug)]
pub enum Accepted {
    /// A finished handshake.
    Tls(Box<TlsStream>),
    /// The client spoke plain HTTP; nothing was read from the socket. nginx reads the request
    /// head, logs `client sent plain HTTP request to HTTPS port` at info, and answers 497 (its
    /// page: 400 "The plain HTTP request was sent to HTTPS port").
    PlainHttp(TcpStream),
}

/// nginx's `unrecognized_name` alert for `ssl_reject_handshake` (fatal, TLS 1.2 record).
const UNRECOGNIZED_NAME_ALERT: [u8; 7] = [0x15, 0x03, 0x03, 0x00, 0x02, 0x02, 112];

/// Runs the handshake of `tcp`, accepted on the TLS address `tls` from `peer`.
pub async fn accept(
    mut tcp: TcpStream,
    tls: &AddrTls,
    peer: Option<SocketAddr>,
) -> Result<Accepted, TlsError> {
    let hs_io = |e: io::Error| TlsError::io(Call::Handshake, &e);
    // A certificate with OCSP stapling may find its answer due for a refresh.
    let _due = super::stapling::SpawnDue;
    let mut first = [0u8; 1];
    match tcp.peek(&mut first).await {
        Ok(0) => return Err(TlsError::closed_before_hello()),
        Ok(_) => {}
        Err(e) => return Err(hs_io(e)),
    }
    if first[0] != 0x16 && first[0] & 0x80 == 0 {
        return Ok(Accepted::PlainHttp(tcp));
    }
    let mut acceptor = Acceptor::default();
    let accepted = loop {
        tcp.readable().await.map_err(hs_io)?;
        match acceptor.read_tls(&mut SockRead(&tcp)) {
            Ok(0) => return Err(TlsError::peer_closed()),
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
            Err(e) => return Err(hs_io(e)),
        }
        match acceptor.accept() {
            Ok(None) => continue,
            Ok(Some(a)) => break a,
            Err((e, mut alert)) => {
                let _ = alert.write(&mut SockWrite(&tcp));
                return Err(TlsError::from_rustls(Call::Handshake, &e));
            }
        }
    };
    if tls.no_protocols {
        return Err(TlsError::openssl(
            Call::Handshake,
            0x0A00_00BF,
            "no protocols available",
            Level::Crit,
        ));
    }
    let hello = accepted.client_hello();
    let sni = hello.server_name().map(str::to_string);
    let client_ciphers: Vec<u16> = hello
        .cipher_suites()
        .iter()
        .map(|&c| u16::from(c))
        .collect();
    let client_groups: Vec<u16> = hello
        .named_groups()
        .unwrap_or_default()
        .iter()
        .map(|&g| u16::from(g))
        .collect();
    let index = tls.choose(sni.as_deref());
    let Some(server) = tls.server(index).cloned() else {
        return Err(TlsError::openssl(
            Call::Handshake,
            0x0A0C_0103,
            "internal error",
            Level::Crit,
        ));
    };
    if server.reject_handshake {
        let _ = tcp.try_write(&UNRECOGNIZED_NAME_ALERT);
        return Err(TlsError::rejected());
    }
    let vars = HandshakeVars {
        server_name: sni.as_deref(),
        local: tcp.local_addr().ok(),
        peer,
    };
    let config = match tls.config_for(index, &vars) {
        Some(Ok(c)) => c,
        Some(Err(message)) => {
            return Err(TlsError {
                level: Level::Error,
                message: message.into(),
            })
        }
        None => {
            return Err(TlsError::openssl(
                Call::Handshake,
                0x0A0C_0103,
                "internal error",
                Level::Crit,
            ))
        }
    };
    let mut conn = match accepted.into_connection(config) {
        Ok(c) => c,
        Err((e, mut alert)) => {
            let _ = alert.write(&mut SockWrite(&tcp));
            return Err(TlsError::from_rustls(Call::Handshake, &e));
        }
    };
    let mut session_id: Option<Vec<u8>> = None;
    let mut early = Vec::new();
    // What came with the ClientHello (an alert, 0-RTT data) is in rustls already: processed
    // before any wait for more.
    if let Err(e) = conn.process_new_packets() {
        let mut out = Vec::new();
        if conn.write_tls(&mut out).is_ok() {
            let _ = tcp.try_write(&out);
        }
        return Err(TlsError::from_rustls(Call::Handshake, &e));
    }
    if let Some(mut data) = conn.early_data() {
        let _ = data.read_to_end(&mut early);
    }
    loop {
        while conn.wants_write() {
            let mut out = Vec::new();
            conn.write_tls(&mut out).map_err(hs_io)?;
            if session_id.is_none() {
                session_id = server_hello_session_id(&out);
            }
            tcp.write_all(&out).await.map_err(hs_io)?;
        }
        if !conn.is_handshaking() {
            break;
        }
        tcp.readable().await.map_err(hs_io)?;
        match conn.read_tls(&mut SockRead(&tcp)) {
            Ok(0) => return Err(TlsError::peer_closed()),
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
            Err(e) => return Err(hs_io(e)),
        }
        if let Err(e) = conn.process_new_packets() {
            let mut out = Vec::new();
            if conn.write_tls(&mut out).is_ok() {
                let _ = tcp.try_write(&out);
            }
            return Err(TlsError::from_rustls(Call::Handshake, &e));
        }
        if let Some(mut data) = conn.early_data() {
            let _ = data.read_to_end(&mut early);
        }
    }
    let client_chain = conn
        .peer_certificates()
        .map(|c| c.to_vec())
        .unwrap_or_default();
    let client_verdict = match &server.client_auth {
        Some(auth) if !client_chain.is_empty() => Some(auth.verify(&client_chain)),
        _ => None,
    };
    let info = TlsInfo {
        protocol: match conn.protocol_version() {
            Some(ProtocolVersion::TLSv1_3) => "TLSv1.3",
            Some(ProtocolVersion::TLSv1_2) => "TLSv1.2",
            _ => "",
        },
        cipher: conn
            .negotiated_cipher_suite()
            .map(|s| u16::from(s.suite()))
            .unwrap_or(0),
        client_ciphers,
        client_groups,
        group: conn
            .negotiated_key_exchange_group()
            .map(|g| u16::from(g.name())),
        server_name: sni,
        session_id: session_id.unwrap_or_default(),
        session_reused: conn.handshake_kind() == Some(HandshakeKind::Resumed),
        early_data: !early.is_empty(),
        alpn: conn.alpn_protocol().map(<[u8]>::to_vec),
        client_chain,
        client_verdict,
        server: index,
    };
    Ok(Accepted::Tls(Box::new(TlsStream::new(
        tcp,
        conn,
        info,
        server.buffer_size,
        early,
    ))))
}

/// The session id of a ServerHello at the start of the server's first flight (a TLS 1.2
/// session's id; TLS 1.3's echo of the client's).
fn server_hello_session_id(flight: &[u8]) -> Option<Vec<u8>> {
    // record: type 22, version (2), length (2); handshake: type 2, length (3); version (2),
    // random (32), session id length (1), session id.
    if flight.len() < 44 || flight[0] != 0x16 || flight[5] != 0x02 {
        return None;
    }
    let len = usize::from(flight[43]);
    flight.get(44..44 + len).map(<[u8]>::to_vec)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn session_id_of_a_server_hello() {
        let mut f = vec![0x16, 3, 3, 0, 80, 2, 0, 0, 76, 3, 3];
        f.extend_from_slice(&[9; 32]);
        f.push(4);
        f.extend_from_slice(&[1, 2, 3, 4]);
        assert_eq!(server_hello_session_id(&f), Some(vec![1, 2, 3, 4]));
        assert_eq!(server_hello_session_id(&f[..40]), None);
        f[43] = 200;
        assert_eq!(server_hello_session_id(&f), None);
    }
}
