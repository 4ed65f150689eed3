//! Writing frames into the output buffer.

use super::{flag, kind, Reason, HEAD_LEN};

/// A frame header for a payload of `len` bytes.
pub(crate) fn head(out: &mut Vec<u8>, len: usize, kind: u8, flags: u8, stream: u32) {
    out.extend_from_slice(&head_bytes(len, kind, flags, stream));
}

/// [`head`] over the `HEAD_LEN` bytes of `at`, room left for it in the output.
pub(crate) fn head_at(at: &mut [u8], len: usize, kind: u8, flags: u8, stream: u32) {
    at.copy_from_slice(&head_bytes(len, kind, flags, stream));
}

fn head_bytes(len: usize, kind: u8, flags: u8, stream: u32) -> [u8; HEAD_LEN] {
    debug_assert!(len <= super::MAX_FRAME_SIZE as usize);
    let l = (len as u32).to_be_bytes();
    let s = stream.to_be_bytes();
    [l[1], l[2], l[3], kind, flags, s[0], s[1], s[2], s[3]]
}

/// A SETTINGS frame with these parameters.
pub(crate) fn settings(out: &mut Vec<u8>, params: &[(u16, u32)]) {
    head(out, params.len() * 6, kind::SETTINGS, 0, 0);
    for &(id, value) in params {
        out.extend_from_slice(&id.to_be_bytes());
        out.extend_from_slice(&value.to_be_bytes());
    }
}

pub(crate) fn settings_ack(out: &mut Vec<u8>) {
    head(out, 0, kind::SETTINGS, flag::ACK, 0);
}

pub(crate) fn window_update(out: &mut Vec<u8>, stream: u32, increment: u32) {
    head(out, 4, kind::WINDOW_UPDATE, 0, stream);
    out.extend_from_slice(&increment.to_be_bytes());
}

pub(crate) fn rst_stream(out: &mut Vec<u8>, stream: u32, code: Reason) {
    head(out, 4, kind::RST_STREAM, 0, stream);
    out.extend_from_slice(&code.0.to_be_bytes());
}

pub(crate) fn goaway(out: &mut Vec<u8>, last_stream: u32, code: Reason) {
    head(out, 8, kind::GOAWAY, 0, 0);
    out.extend_from_slice(&last_stream.to_be_bytes());
    out.extend_from_slice(&code.0.to_be_bytes());
}

pub(crate) fn ping(out: &mut Vec<u8>, ack: bool, payload: [u8; 8]) {
    head(out, 8, kind::PING, if ack { flag::ACK } else { 0 }, 0);
    out.extend_from_slice(&payload);
}

/// HEADERS and as many CONTINUATIONs as `max_frame` makes of `block`.
pub(crate) fn headers(
    out: &mut Vec<u8>,
    stream: u32,
    block: &[u8],
    end_stream: bool,
    max_frame: usize,
) {
    let mut chunks = block.chunks(max_frame);
    let first = chunks.next().unwrap_or(&[]);
    let mut rest = chunks.peekable();
    let mut flags = if end_stream { flag::END_STREAM } else { 0 };
    if rest.peek().is_none() {
        flags |= flag::END_HEADERS;
    }
    out.reserve(HEAD_LEN * (1 + block.len() / max_frame) + block.len());
    head(out, first.len(), kind::HEADERS, flags, stream);
    out.extend_from_slice(first);
    while let Some(c) = rest.next() {
        let f = if rest.peek().is_none() {
            flag::END_HEADERS
        } else {
            0
        };
        head(out, c.len(), kind::CONTINUATION, f, stream);
        out.extend_from_slice(c);
    }
}
