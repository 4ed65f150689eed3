//! Answers: a status and fields, HPACK-encoded and queued as HEADERS (RFC 9113, 8.3.2).

use super::{Server, StreamGone};
use crate::frame::Reason;
use crate::hpack::Encoder;

/// An answer's header block being encoded ([`Server::send_answer_by`]).
pub struct AnswerFields<'a> {
    encoder: &'a mut Encoder,
    block: &'a mut Vec<u8>,
}

impl AnswerFields<'_> {
    /// Encodes a field: its name lowercase, not one HTTP/2 forbids (debug-checked).
    #[inline]
    pub fn field(&mut self, name: &[u8], value: &[u8]) {
        debug_assert!(
            !crate::exchange::dropped(name),
            "a field HTTP/2 does not carry"
        );
        self.encoder.field(name, value, self.block);
    }

    /// [`AnswerFields::field`] for a field that goes only if `check` passes (its name one
    /// HTTP/2 carries, its value without control bytes...): `check` runs unless the same
    /// field passed it before on this connection ([`Encoder::field_checked`]: the same check
    /// for every call). Returns whether the field went.
    #[inline]
    pub fn field_checked(
        &mut self,
        name: &[u8],
        value: &[u8],
        check: impl FnOnce() -> bool,
    ) -> bool {
        self.encoder.field_checked(name, value, self.block, check)
    }
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
        self.send_head(stream, status, end_stream, |encoder, block| {
            crate::exchange::encode_fields(encoder, fields, block)
        })
    }

    /// [`Server::send_answer`] for fields the caller made fit already (names lowercase, none
    /// of the connection-specific ones: debug-checked): none is looked at again.
    pub fn send_clean_answer<'f, I>(
        &mut self,
        stream: u32,
        status: u16,
        fields: I,
        end_stream: bool,
    ) -> Result<(), StreamGone>
    where
        I: IntoIterator<Item = (&'f [u8], &'f [u8])>,
    {
        self.send_answer_by(stream, status, end_stream, |out| {
            for (name, value) in fields {
                out.field(name, value);
            }
        })
    }

    /// [`Server::send_clean_answer`] whose fields `put` hands to the encoder one by one as it
    /// makes them ([`AnswerFields::field`]): no list of them in between. `put` is not called
    /// for a stream gone.
    pub fn send_answer_by(
        &mut self,
        stream: u32,
        status: u16,
        end_stream: bool,
        put: impl FnOnce(&mut AnswerFields<'_>),
    ) -> Result<(), StreamGone> {
        self.send_head(stream, status, end_stream, |encoder, block| {
            put(&mut AnswerFields { encoder, block })
        })
    }

    /// `:status`, then what `fields` encodes, as one HEADERS block for `stream`.
    fn send_head(
        &mut self,
        stream: u32,
        status: u16,
        end_stream: bool,
        fields: impl FnOnce(&mut crate::hpack::Encoder, &mut Vec<u8>),
    ) -> Result<(), StreamGone> {
        // Encoded straight into the connection's output, after room for the frame's header.
        let encoder = &mut self.c.encoder;
        self.c.conn.send_headers_with(stream, end_stream, |out| {
            encoder.begin(out);
            encoder.status(status, out);
            fields(encoder, out);
        })
    }

    /// Queues trailers after the body: `fields` as [`Server::send_answer`] takes them; they
    /// end the stream.
    pub fn send_trailers<'f, I>(&mut self, stream: u32, fields: I) -> Result<(), StreamGone>
    where
        I: IntoIterator<Item = (&'f [u8], &'f [u8])>,
    {
        self.c.send_trailers(stream, fields)
    }

    /// Answers a request this layer or the caller refused ([`super::Incoming::TooLarge`]):
    /// `status` alone, ending the stream, then a RST_STREAM NO_ERROR if its body is still
    /// coming (RFC 9113, 8.1: the client may stop sending it).
    pub fn refuse(&mut self, stream: u32, status: u16) {
        self.forget(stream);
        if self.send_answer(stream, status, [], true).is_ok() {
            self.c.conn.reset(stream, Reason::NO_ERROR);
        }
    }

    /// Resets a stream (an answer abandoned, a body not wanted): [`Connection::reset`], and
    /// what this layer knew of its body is dropped. Prefer it to the frame layer's.
    ///
    /// [`Connection::reset`]: crate::frame::Connection::reset
    pub fn reset(&mut self, stream: u32, code: Reason) {
        self.forget(stream);
        self.c.conn.reset(stream, code);
    }
}
