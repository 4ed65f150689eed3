//! FastCGI as one protocol of the upstream layer: the request's records (`BEGIN_REQUEST`, the
//! params, the body in `STDIN` records) and the answer's (the head from `STDOUT`, `STDERR`
//! logged as nginx logs it and matched against `fastcgi_catch_stderr`, the end at
//! `END_REQUEST`), through the codec in `shoal_http::fastcgi`. The exchange is the params
//! protocols' ([`crate::http::upstream::cgi_like`]).

use std::sync::Arc;

use bytes::BytesMut;
use shoal_http::fastcgi::{self, Event};

use super::FastcgiLoc;
use crate::http::upstream::body::{BodyError, Framing, Piece};
use crate::http::upstream::cgi_like::CgiConf;
use crate::http::upstream::protocol::{
    level, BodyCodec, BodyFraming, HeadDecoder, HeadError, Log, Parsed,
};
use crate::http::upstream::Proto;

impl CgiConf for FastcgiLoc {
    const PROTO: Proto = Proto::Fastcgi;
    const SCHEME: &'static str = "fastcgi";
    const HIDDEN: &'static [&'static str] = fastcgi::HIDDEN_HEADERS;
    /// FastCGI frames any body in records: a chunked one streams as well as any.
    const STREAMS_CHUNKED: bool = true;
    const FRAMING: BodyFraming = BodyFraming::FastcgiStdin;
    type Head = FastcgiHead;

    crate::http::upstream::cgi_like::cgi_fields!(fastcgi);

    fn write_head(
        &self,
        pairs: &[(Vec<u8>, Vec<u8>)],
        _body_len: u64,
        out: &mut BytesMut,
    ) -> Result<(), (shoal_http::log::Level, String)> {
        // nginx puts every param in one record, and refuses more than it holds.
        let len = fastcgi::encode::params_len(pairs.iter().map(|(n, v)| (&n[..], &v[..])));
        fastcgi::encode::check_params_len(len).map_err(|e| (e.level(), e.to_string()))?;
        out.reserve(len + 64);
        fastcgi::encode::begin_request(out, self.keep_conn());
        fastcgi::encode::params(out, pairs.iter().map(|(n, v)| (&n[..], &v[..])));
        Ok(())
    }

    fn head_decoder(&self, head: bool) -> FastcgiHead {
        let keep_conn = self.keep_conn();
        FastcgiHead {
            decoder: Some(fastcgi::Decoder::new(
                self.up.buffer_size(),
                keep_conn,
                head,
            )),
            catch: self.catch_stderr.clone(),
            keep_conn,
        }
    }
}

/// A FastCGI answer's head: the records up to the end of the head, stderr logged on the way.
pub struct FastcgiHead {
    decoder: Option<fastcgi::Decoder>,
    catch: Option<Arc<Vec<String>>>,
    keep_conn: bool,
}

impl HeadDecoder for FastcgiHead {
    fn bounded(&self) -> bool {
        true
    }

    fn decode(
        &mut self,
        buf: &mut BytesMut,
        _max: usize,
        log: Log<'_>,
    ) -> Result<Option<Parsed>, HeadError> {
        let Some(decoder) = self.decoder.as_mut() else {
            return Err(HeadError::Invalid("upstream sent no head".into()));
        };
        loop {
            match decoder.decode(buf) {
                Ok(None) => return Ok(None),
                Ok(Some(Event::Stderr(e))) => {
                    log(level(e.level()), &e);
                    // `fastcgi_catch_stderr`: the answer is an invalid one.
                    if let Some(list) = &self.catch {
                        let text = e.bytes();
                        if list
                            .iter()
                            .any(|c| memchr::memmem::find(text, c.as_bytes()).is_some())
                        {
                            return Err(HeadError::Caught);
                        }
                    }
                }
                Ok(Some(Event::Head(head))) => {
                    let status = head.status();
                    let reason = Parsed::reason_of(status, head.reason());
                    let decoder = self.decoder.take().expect("decoding");
                    return Ok(Some(Parsed {
                        status,
                        reason,
                        framing: Framing::Codec,
                        codec: Some(Box::new(FastcgiBody {
                            decoder,
                            keep_conn: self.keep_conn,
                            length: head.content_length(),
                            taken: 0,
                        })),
                        content_length: head.content_length(),
                        reusable: self.keep_conn,
                        upgrade: false,
                        consumed: head.head_len(),
                        head,
                        intercept: false,
                    }));
                }
                // Nothing else comes before the head.
                Ok(Some(_)) => {}
                Err(e) => return Err(HeadError::Invalid(e.to_string())),
            }
        }
    }
}

/// A FastCGI answer's body: stdout up to `END_REQUEST`.
struct FastcgiBody {
    decoder: fastcgi::Decoder,
    keep_conn: bool,
    /// The head's `Content-Length`, and the body's bytes so far.
    length: Option<u64>,
    taken: u64,
}

impl BodyCodec for FastcgiBody {
    fn take(&mut self, buf: &mut BytesMut, log: Log<'_>) -> Result<Piece, BodyError> {
        loop {
            match self.decoder.decode(buf) {
                Ok(Some(Event::Stdout(b))) => {
                    self.taken += b.len() as u64;
                    return Ok(Piece::Data(b));
                }
                Ok(Some(Event::Stderr(e))) => log(level(e.level()), &e),
                Ok(Some(Event::Surplus(s))) => log(level(s.level()), &s),
                Ok(Some(Event::End(_))) => return Ok(Piece::End),
                Ok(Some(Event::Head(_))) => {}
                Ok(None) if self.decoder.is_done() => return Ok(Piece::End),
                Ok(None) => return Ok(Piece::NeedMore),
                Err(e) => return Err(BodyError::Protocol(e.to_string())),
            }
        }
    }

    fn eof(&mut self) -> Result<(), BodyError> {
        self.decoder
            .eof()
            .map_err(|e| BodyError::Protocol(e.to_string()))?;
        // A close is the end of an answer without keep-conn, but not before its length.
        if self.length.is_some_and(|n| self.taken < n) {
            return Err(BodyError::Closed);
        }
        Ok(())
    }

    fn reusable(&self) -> bool {
        self.keep_conn && self.decoder.is_done()
    }
}
