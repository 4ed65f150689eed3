//! A request's header block sent again as it was, without HPACK, when the request's head is
//! the last one's: an upstream connection of `grpc_pass` carries the same call's head again
//! and again (`:path`, `content-type`, `te`, `user-agent`...), whose fields the encoder finds
//! in the server's table every time, one search per field.
//!
//! HPACK's encoding of a head is a function of the head and of the encoder's table, and only
//! two representations change that table (RFC 7541, 6.2.1 and 6.3): a literal with
//! incremental indexing and a table size update. A block made of neither leaves the table as
//! it was, so the same head encoded next is the same block, while nothing else used the
//! encoder meanwhile (trailers, which may add to the table, forget the block).

use crate::exchange;
use crate::hpack::Encoder;

use super::RequestHead;

/// The last head asked for and its block, kept when it left the encoder's table as it was.
#[derive(Debug, Default)]
pub(super) struct Repeat {
    /// The head being encoded, as asked: for each field (pseudo-headers first), its name's
    /// and value's lengths, then their bytes.
    input: Vec<u8>,
    last_input: Vec<u8>,
    last_block: Vec<u8>,
    /// `last_block` is what encoding `last_input` would make now.
    valid: bool,
}

/// The pseudo-headers come first, in this order, in every head's input.
const PSEUDO: [&[u8]; 4] = [b":method", b":scheme", b":authority", b":path"];

impl Repeat {
    /// Appends the header block of `head` and `fields` to `block`, which holds what
    /// [`Encoder::begin`] wrote (a table size update, when one was owed).
    pub fn encode<'f, I>(
        &mut self,
        e: &mut Encoder,
        head: &RequestHead<'_>,
        fields: I,
        block: &mut Vec<u8>,
    ) where
        I: IntoIterator<Item = (&'f [u8], &'f [u8])>,
    {
        let begun = block.len();
        let mut input = std::mem::take(&mut self.input);
        input.clear();
        for value in [head.method, head.scheme, head.authority, head.path] {
            push(&mut input, b"", value);
        }
        for (name, value) in fields {
            push(&mut input, name, value);
        }
        if begun == 0 && self.valid && input == self.last_input {
            block.extend_from_slice(&self.last_block);
            self.input = input;
            return;
        }
        // Encoded, watching each field's representation for one that changes the table.
        let mut changed = begun > 0;
        for (i, (name, value)) in fields_of(&input).enumerate() {
            let at = block.len();
            match PSEUDO.get(i) {
                Some(pseudo) => e.field(pseudo, value, block),
                None => exchange::encode_fields(e, [(name, value)], block),
            }
            changed |= block.get(at).is_some_and(|&b| b & 0xc0 == 0x40);
        }
        self.valid = !changed;
        if self.valid {
            self.last_block.clear();
            self.last_block.extend_from_slice(&block[begun..]);
            self.input = std::mem::replace(&mut self.last_input, input);
        } else {
            self.input = input;
        }
    }

    /// The encoder was used for something else (trailers): the block kept may be stale.
    pub fn forget(&mut self) {
        self.valid = false;
    }

    /// Frees the buffers (an idle connection).
    pub fn shrink(&mut self) {
        *self = Repeat::default();
    }
}

fn push(input: &mut Vec<u8>, name: &[u8], value: &[u8]) {
    let (n, v) = (
        (name.len() as u32).to_ne_bytes(),
        (value.len() as u32).to_ne_bytes(),
    );
    input.extend_from_slice(&[n[0], n[1], n[2], n[3], v[0], v[1], v[2], v[3]]);
    input.extend_from_slice(name);
    input.extend_from_slice(value);
}

/// The field `push` wrote at `at` in `input`: its name, its value and where the next one is.
fn entry(input: &[u8], at: usize) -> Option<(&[u8], &[u8], usize)> {
    let (lengths, rest) = input.get(at..)?.split_first_chunk::<8>()?;
    let n = u32::from_ne_bytes([lengths[0], lengths[1], lengths[2], lengths[3]]) as usize;
    let v = u32::from_ne_bytes([lengths[4], lengths[5], lengths[6], lengths[7]]) as usize;
    let name = rest.get(..n)?;
    let value = rest.get(n..n + v)?;
    Some((name, value, at + 8 + n + v))
}

/// The fields `push` wrote, in order.
fn fields_of(input: &[u8]) -> impl Iterator<Item = (&[u8], &[u8])> {
    let mut at = 0;
    std::iter::from_fn(move || {
        let (name, value, next) = entry(input, at)?;
        at = next;
        Some((name, value))
    })
}
