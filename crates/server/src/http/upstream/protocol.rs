//! What a protocol module gives the upstream layer, as nginx's `ngx_http_upstream_t` takes
//! `create_request`, `process_header` and `input_filter` from proxy, fastcgi, uwsgi, scgi and
//! memcached: where the request goes, the request's bytes and how its body is framed, a
//! decoder for the answer's head (and, when the body is framed by the protocol, for the
//! body), and the reply the answer becomes. Everything else (peers, connections, timeouts,
//! `*_next_upstream`, buffering, `$upstream_*`) is the layer's.

use std::cell::RefCell;
use std::rc::Rc;
use std::sync::Arc;

use bytes::BytesMut;

use super::body::{BodyError, Framing, Piece};
use super::record::Record;
use super::run::Answer;
use super::Proto;
use crate::http::client_body::BodyToSend;
use crate::http::reply::{Outcome, Reply};
use crate::http::request::Req;
use crate::log::Level;
use crate::upstream::conf::UpstreamConf;
use crate::variables::Vars;

/// Where one request goes.
pub struct Dest {
    pub upstream: Arc<UpstreamConf>,
    /// The URI named in log lines (`upstream: "fastcgi://127.0.0.1:9000/index.php"`).
    pub uri: Vec<u8>,
    /// `$proxy_host`.
    pub host: Arc<str>,
    /// `$proxy_port`.
    pub port: u16,
    /// The protocol's name in log lines (`http`, `https`, `fastcgi`, ...).
    pub scheme: &'static str,
    /// The connection speaks TLS (https).
    pub tls: bool,
}

/// How a request's body goes after its head.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BodyFraming {
    /// As it is (its length was told in the head, or the protocol needs none).
    Raw,
    /// HTTP/1.1 chunks, then the last chunk.
    Chunked,
    /// FastCGI `STDIN` records, then the empty one (sent even without a body).
    FastcgiStdin,
}

/// A request as the protocol wrote it.
pub struct Encoded {
    /// Everything before the body.
    pub head: Vec<u8>,
    /// A body the configuration gives (`proxy_set_body`) instead of the client's.
    pub set_body: Option<Vec<u8>>,
    /// The client's body follows (`*_pass_request_body`).
    pub send_body: bool,
    pub framing: BodyFraming,
}

/// Why an answer's head was refused.
pub enum HeadError {
    /// nginx's log line, without its ` while reading response header from upstream`.
    Invalid(String),
    /// `fastcgi_catch_stderr` matched (the stderr line is logged already): `invalid_header`
    /// without a line of its own.
    Caught,
}

/// Logs a line of the exchange with the request's context.
pub type Log<'a> = &'a mut dyn FnMut(Level, &dyn std::fmt::Display);

/// Reads one answer's head.
pub trait HeadDecoder {
    /// The head at the start of `buf` (split off it), within `max` bytes (`*_buffer_size`);
    /// `Ok(None)`: more bytes are needed.
    fn decode(
        &mut self,
        buf: &mut BytesMut,
        max: usize,
        log: Log<'_>,
    ) -> Result<Option<Parsed>, HeadError>;

    /// Whether each read before the head may bring at most what a `*_buffer_size` buffer
    /// has room for (the decoder counts the buffer as nginx's fills).
    fn bounded(&self) -> bool {
        false
    }
}

/// A body framed by the protocol (FastCGI records, memcached's trailer).
pub trait BodyCodec {
    /// The next piece of body from the front of `buf`; `log` takes what the protocol says on
    /// the side (FastCGI's stderr).
    fn take(&mut self, buf: &mut BytesMut, log: Log<'_>) -> Result<Piece, BodyError>;
    /// The connection closed: whether that ends the body well.
    fn eof(&mut self) -> Result<(), BodyError>;
    /// After the end: the connection may carry another request.
    fn reusable(&self) -> bool;
}

/// An answer's head, read.
pub struct Parsed {
    pub status: u16,
    /// The reason phrase when it is not the standard one for the status.
    pub reason: Option<String>,
    /// The head as received (headers are passed on from it).
    pub head: shoal_http::upstream::UpstreamHead,
    pub framing: Framing,
    /// A body the protocol frames itself (`framing` is then [`Framing::Codec`]).
    pub codec: Option<Box<dyn BodyCodec>>,
    /// `Content-Length`, for the client's head.
    pub content_length: Option<u64>,
    /// The connection may carry another request once the body is read.
    pub reusable: bool,
    /// A 101 to a client that asked to upgrade: the connections become a tunnel.
    pub upgrade: bool,
    /// Bytes of the head.
    pub consumed: usize,
    /// The answer is the layer's own error page with this status (memcached's miss: nginx's
    /// `intercept_404`).
    pub intercept: bool,
}

impl Parsed {
    /// The reason phrase to keep: `None` when it is the standard one for `status`.
    pub fn reason_of(status: u16, reason: &[u8]) -> Option<String> {
        let standard = shoal_http::status::status_line(status).and_then(|l| l.get(4..));
        (standard.map(str::as_bytes) != Some(reason))
            .then(|| shoal_http::lossy(reason).into_owned())
    }
}

/// One protocol's part in a request.
#[allow(async_fn_in_trait)]
pub trait Protocol {
    type Head: HeadDecoder;
    /// Which module's shared settings apply.
    const PROTO: Proto;

    /// Where the request goes; an error is the request's outcome (logged).
    async fn dest(&self, r: &Req<'_, '_>, vars: &Vars<'_>) -> Result<Dest, Outcome>;

    /// The request's bytes (`vars` values `$upstream_*` of this exchange too); an error is the
    /// request's outcome (logged).
    fn encode(
        &self,
        r: &Req<'_, '_>,
        vars: &Vars<'_>,
        dest: &Dest,
        method: &str,
        body: &BodyToSend<'_, '_>,
    ) -> Result<Encoded, Outcome>;

    /// A decoder for one try's answer.
    fn head_decoder(&self, r: &Req<'_, '_>, method: &str) -> Self::Head;

    /// The client's reply from an answer that is passed on.
    fn reply(&self, answer: Answer, r: &Req<'_, '_>, record: &Rc<RefCell<Record>>) -> Box<Reply>;

    /// The TLS settings of an https upstream.
    fn tls(&self) -> Option<&crate::http::proxy::ssl::UpstreamTls> {
        None
    }
}

/// The server's log level of a codec's message.
pub fn level(l: shoal_http::log::Level) -> Level {
    match l {
        shoal_http::log::Level::Alert => Level::Alert,
        shoal_http::log::Level::Error => Level::Error,
        shoal_http::log::Level::Warn => Level::Warn,
        shoal_http::log::Level::Info => Level::Info,
    }
}
