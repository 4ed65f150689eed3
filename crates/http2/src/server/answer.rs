//! Answers: a status and fields, HPACK-encoded and queued as HEADERS (RFC 9113, 8.3.2).

use super::{Server, StreamGone};
use crate::frame::Reason;

/// Fields HTTP/2 does not carry (RFC 9113, 8.2.2), whatever their case; pseudo-headers are
/// this layer's own.
pub(crate) fn dropped(name: &[u8]) -> bool {
    const CONNECTION_SPECIFIC: [&[u8]; 5] = [
        b"connection",
        b"keep-alive",
        b"proxy-connection",
        b"transfer-encoding",
        b"upgrade",
    ];
    name.first() == Some(&b':')
        || CONNECTION_SPECIFIC
            .iter()
            .any(|c| c.len() == name.len() && c.eq_ignore_ascii_case(name))
}

impl Server {
    /// Queues an answer's HEADERS: `:status` and `fields` (names lowercased, the
    /// connection-specific ones dropped). `end_stream`: an answer without a body. Nothing is
    /// encoded for a stream gone (the HPACK tables stay as the client's).
    pub fn send_answer<'f, I>(
        &mut self,
        stream: u32,
        status: u16,
        fields: I,
        end_stream: bool,
    ) -> Result<(), StreamGone>
    where
        I: IntoIterator<Item = (&'f [u8], &'f [u8])>,
    {
        self.conn.window(stream)?;
        let mut block = std::mem::take(&mut self.block);
        block.clear();
        self.encoder.begin(&mut block);
        self.encoder.status(status, &mut block);
        self.encode_fields(fields, &mut block);
        let sent = self.conn.send_headers(stream, &block, end_stream);
        self.block = block;
        sent
    }

    /// Queues trailers after the body: `fields` as [`Server::send_answer`] takes them; they
    /// end the stream.
    pub fn send_trailers<'f, I>(&mut self, stream: u32, fields: I) -> Result<(), StreamGone>
    where
        I: IntoIterator<Item = (&'f [u8], &'f [u8])>,
    {
        self.conn.window(stream)?;
        let mut block = std::mem::take(&mut self.block);
        block.clear();
        self.encoder.begin(&mut block);
        self.encode_fields(fields, &mut block);
        let sent = self.conn.send_headers(stream, &block, true);
        self.block = block;
        sent
    }

    /// Answers a request this layer or the caller refused ([`super::Incoming::TooLarge`]):
    /// `status` alone, ending the stream, then a RST_STREAM NO_ERROR if its body is still
    /// coming (RFC 9113, 8.1: the client may stop sending it).
    pub fn refuse(&mut self, stream: u32, status: u16) {
        self.forget(stream);
        if self.send_answer(stream, status, [], true).is_ok() {
            self.conn.reset(stream, Reason::NO_ERROR);
        }
    }

    /// Resets a stream (an answer abandoned, a body not wanted): [`Connection::reset`], and
    /// what this layer knew of its body is dropped. Prefer it to the frame layer's.
    ///
    /// [`Connection::reset`]: crate::frame::Connection::reset
    pub fn reset(&mut self, stream: u32, code: Reason) {
        self.forget(stream);
        self.conn.reset(stream, code);
    }

    fn encode_fields<'f, I>(&mut self, fields: I, block: &mut Vec<u8>)
    where
        I: IntoIterator<Item = (&'f [u8], &'f [u8])>,
    {
        for (name, value) in fields {
            if dropped(name) {
                continue;
            }
            if name.iter().any(u8::is_ascii_uppercase) {
                let lower = name.to_ascii_lowercase();
                self.encoder.field(&lower, value, block);
            } else {
                self.encoder.field(name, value, block);
            }
        }
    }
}
