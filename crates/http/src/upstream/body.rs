//! An upstream answer's body cut out of what is read: by length, chunks, or to the close.

use super::*;

/// Cuts an upstream's response body out of what is read from it, for any [`Framing`] but a
/// tunnel (which is not a body; treated as [`Framing::Close`]).
///
/// Bytes left in the buffer after [`BodyChunk::Done`] are not part of the response: nginx
/// drops them, logs [`UpstreamBodyDecoder::extra_data_warning`] at `warn`, and does not reuse
/// the connection.
#[derive(Clone, Debug)]
pub enum UpstreamBodyDecoder {
    /// A body of known length (0 for [`Framing::None`]).
    Length(LengthDecoder),
    /// A chunked body, with nginx's chunk grammar ([`ChunkedDecoder::for_upstream`]).
    Chunked(ChunkedDecoder),
    /// Everything until the upstream closes.
    Close,
}

impl UpstreamBodyDecoder {
    /// The decoder for `framing`.
    pub fn new(framing: Framing) -> UpstreamBodyDecoder {
        match framing {
            Framing::None => UpstreamBodyDecoder::Length(LengthDecoder::new(0)),
            Framing::Length(n) => UpstreamBodyDecoder::Length(LengthDecoder::new(n)),
            Framing::Chunked => UpstreamBodyDecoder::Chunked(ChunkedDecoder::for_upstream()),
            Framing::Close | Framing::Tunnel => UpstreamBodyDecoder::Close,
        }
    }

    /// Whether the body is complete (never for [`UpstreamBodyDecoder::Close`]: only the close
    /// ends it, see [`UpstreamBodyDecoder::eof`]).
    pub fn is_done(&self) -> bool {
        match self {
            UpstreamBodyDecoder::Length(d) => d.is_done(),
            UpstreamBodyDecoder::Chunked(d) => d.is_done(),
            UpstreamBodyDecoder::Close => false,
        }
    }

    /// Takes the next piece of body from the front of `buf`.
    pub fn decode_buf(&mut self, buf: &mut BytesMut) -> Result<BodyChunk, UpstreamError> {
        match self {
            UpstreamBodyDecoder::Length(d) => Ok(d.decode_buf(buf)),
            UpstreamBodyDecoder::Chunked(d) => d
                .decode_buf(buf)
                .map_err(|_| UpstreamError::InvalidChunkedResponse),
            UpstreamBodyDecoder::Close if buf.is_empty() => Ok(BodyChunk::NeedMore),
            UpstreamBodyDecoder::Close => Ok(BodyChunk::Data(buf.split().freeze())),
        }
    }

    /// The upstream closed the connection: fine for a body delimited by the close or already
    /// complete, else the response was cut short (the client's connection is then closed
    /// without completing the response, as nginx does).
    pub fn eof(&self) -> Result<(), UpstreamError> {
        match self {
            UpstreamBodyDecoder::Close => Ok(()),
            _ if self.is_done() => Ok(()),
            _ => Err(UpstreamError::PrematureClose),
        }
    }

    /// nginx's `warn` line for bytes after the end of the body.
    pub fn extra_data_warning(&self) -> &'static str {
        match self {
            UpstreamBodyDecoder::Chunked(_) => "upstream sent data after final chunk",
            _ => "upstream sent more data than specified in \"Content-Length\" header",
        }
    }
}
