//! Reading a frame's header and the fields inside payloads.

use super::{flag, ConnError, Reason};

/// A frame's header (RFC 9113, 4.1); the reserved bit of the stream id is dropped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Head {
    pub len: usize,
    pub kind: u8,
    pub flags: u8,
    pub stream: u32,
}

impl Head {
    /// `b` holds at least 9 bytes.
    pub fn parse(b: &[u8]) -> Head {
        Head {
            len: (b[0] as usize) << 16 | (b[1] as usize) << 8 | b[2] as usize,
            kind: b[3],
            flags: b[4],
            stream: u32_at(b, 5) & 0x7fff_ffff,
        }
    }

    pub fn has(&self, f: u8) -> bool {
        self.flags & f != 0
    }
}

/// A big-endian u32 at `at`.
pub(crate) fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

pub(crate) fn conn_err(code: Reason, what: &'static str) -> ConnError {
    ConnError {
        code,
        what,
        args: [0; 2],
        // (The role is set when the error ends the connection: `Connection::fail`.)
        role: super::Role::Server,
    }
}

/// [`conn_err`] whose text names numbers (`{}` in `what`, see [`ConnError`]).
pub(crate) fn conn_err_n(code: Reason, what: &'static str, a: u32, b: u32) -> ConnError {
    ConnError {
        code,
        what,
        args: [a, b],
        role: super::Role::Server,
    }
}

/// The part of a DATA or HEADERS payload between its pad length and its padding, as offsets
/// into `payload`: PROTOCOL_ERROR when the padding is as long as what is left (RFC 9113, 6.1).
/// `fixed` is what comes after the pad length before the content (HEADERS' priority fields).
pub(crate) fn unpad(
    head: &Head,
    payload: &[u8],
    fixed: usize,
) -> Result<(usize, usize), ConnError> {
    let (start, pad) = if head.has(flag::PADDED) {
        match payload.first() {
            Some(&p) => (1, p as usize),
            None => {
                return Err(conn_err(
                    Reason::FRAME_SIZE_ERROR,
                    "sent padded frame with no pad length",
                ))
            }
        }
    } else {
        (0, 0)
    };
    let content = start + fixed;
    if content > payload.len() {
        return Err(conn_err(
            Reason::FRAME_SIZE_ERROR,
            "sent frame too short for its fields",
        ));
    }
    if pad > payload.len() - content {
        let what = if head.kind == super::kind::DATA {
            "client sent padded DATA frame with incorrect length: {}, padding: {}"
        } else {
            "client sent padded HEADERS frame with incorrect length: {}, padding: {}"
        };
        let (len, pad) = (payload.len() as u32, pad as u32);
        return Err(conn_err_n(Reason::PROTOCOL_ERROR, what, len, pad));
    }
    Ok((content, payload.len() - pad))
}
