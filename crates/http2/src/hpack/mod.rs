//! HPACK (RFC 7541): the header compression of HTTP/2, for a server: a [`Decoder`] for the
//! blocks of requests (and trailers) and an [`Encoder`] for the blocks of answers.
//!
//! The decoder allocates nothing per field (only its dynamic table grows, up to the table's
//! size): a [`Field`] borrows its name and value from the block, the static table, the dynamic
//! table, or one scratch buffer the caller lends (for Huffman-coded strings; a worker can lend
//! the same one to all its connections). Between blocks it holds only its dynamic table, whose
//! memory grows with use up to the table's size (plus 12 bytes per entry) and shrinks when the
//! size does: 112 bytes and no heap when empty, about 700 heap bytes after a browser's first
//! request, at most 4 KiB + 12 bytes per entry when full.
//!
//! A client chooses what a block expands to, so the decoder enforces the caller's [`Bounds`]
//! while it reads: the header list (RFC 9113's SETTINGS_MAX_HEADER_LIST_SIZE counting, name +
//! value + 32 per field) and each name or value (nginx's `large_client_header_buffers` size).
//! A string over the bounds is never stored; references to big table entries are counted, not
//! copied. Passing a bound is [`DecodeError::TooLarge`], a refusal of the stream, distinct
//! from [`DecodeError::Compression`], a connection error: the rest of the block is still
//! decoded into the dynamic table (a block is processed whole, §2.2), so the connection
//! stays usable.
//!
//! The encoder uses the static table and Huffman coding (when shorter) and, when given a
//! budget, a small part of the peer's dynamic table for the fields that repeat from answer to
//! answer (`server`, `date`, `content-type`...): one byte each instead of a literal, which is
//! also cheaper to produce than a Huffman-coded value. It honours the peer's
//! SETTINGS_HEADER_TABLE_SIZE: a lowered size is announced at the start of the next block.

mod decoder;
mod encoder;
pub mod huffman;
mod huffman_table;
mod table;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_rfc;

pub use decoder::{Bounds, Decoder};
pub use encoder::{indexable, Encoder};
pub use huffman::HuffmanError;
pub use table::STATIC;

/// The dynamic table's size before any SETTINGS (RFC 9113 §6.5.2).
pub const DEFAULT_TABLE_SIZE: usize = 4096;

/// One header field of a decoded block.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Field<'a> {
    pub name: &'a [u8],
    pub value: &'a [u8],
    /// Sent as "never indexed" (§6.2.3): an intermediary must forward it the same way.
    pub never_indexed: bool,
    /// The name and value are known to keep RFC 9113, 8.2.1's character rules (a static
    /// entry, or a dynamic one checked once when it was stored): a request's checks of them
    /// need not run again. `false` says nothing.
    pub checked: bool,
}

/// Why a block could not be decoded: a connection error (COMPRESSION_ERROR) whatever the
/// stream.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Compression {
    /// The block ends inside a representation.
    Truncated,
    /// An integer past 2^32 - 1 (or with more continuation bytes than one needs).
    Integer,
    /// A Huffman-coded string with bad padding or EOS.
    Huffman(HuffmanError),
    /// Index 0.
    IndexZero,
    /// An index past the static and dynamic tables.
    Index(usize),
    /// A dynamic table size update above our SETTINGS_HEADER_TABLE_SIZE.
    SizeAboveLimit(usize),
    /// A dynamic table size update after a field.
    SizeNotFirst,
    /// We lowered SETTINGS_HEADER_TABLE_SIZE below the table's size and the block does not
    /// start with the size update §4.2 then requires.
    SizeMissing,
}

impl std::fmt::Display for Compression {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Compression::Truncated => f.write_str("truncated header block"),
            Compression::Integer => f.write_str("integer overflow in header block"),
            Compression::Huffman(HuffmanError::Padding) => f.write_str("invalid Huffman padding"),
            Compression::Huffman(HuffmanError::Eos) => f.write_str("Huffman EOS in a string"),
            Compression::IndexZero => f.write_str("header index 0"),
            Compression::Index(i) => write!(f, "invalid header index {i}"),
            Compression::SizeAboveLimit(n) => write!(f, "table size update {n} above the limit"),
            Compression::SizeNotFirst => f.write_str("table size update after a field"),
            Compression::SizeMissing => f.write_str("missing table size update"),
        }
    }
}

/// Which bound a block passed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TooLarge {
    /// A name or a value longer than [`Bounds::field`].
    Field,
    /// The header list past [`Bounds::list`].
    List,
}

/// The outcome of a block that was not accepted whole.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DecodeError<E> {
    /// COMPRESSION_ERROR: the connection ends; the decoder must not be used again.
    Compression(Compression),
    /// A bound was passed: fields stopped at the one that passed it; the rest of the block
    /// went into the dynamic table. The stream is refused, the connection goes on.
    TooLarge(TooLarge),
    /// The caller's function refused a field (its error, the first one); no field was given
    /// after it, and the rest of the block went into the dynamic table.
    Refused(E),
}

/// Appends `value` with an `n`-bit prefix (§5.1); `flags` holds the byte's bits above it.
#[inline]
pub(crate) fn encode_int(dst: &mut Vec<u8>, flags: u8, n: u32, value: usize) {
    let max = (1usize << n) - 1;
    if value < max {
        dst.push(flags | value as u8);
        return;
    }
    dst.push(flags | max as u8);
    let mut rest = value - max;
    while rest >= 0x80 {
        dst.push(0x80 | (rest & 0x7f) as u8);
        rest >>= 7;
    }
    dst.push(rest as u8);
}

/// Reads an integer with an `n`-bit prefix at `*at` (§5.1), refusing values past 2^32 - 1.
#[inline]
pub(crate) fn decode_int(block: &[u8], at: &mut usize, n: u32) -> Result<usize, Compression> {
    let max = (1u64 << n) - 1;
    let first = *block.get(*at).ok_or(Compression::Truncated)?;
    *at += 1;
    let mut value = first as u64 & max;
    if value < max {
        return Ok(value as usize);
    }
    let mut shift = 0;
    loop {
        let b = *block.get(*at).ok_or(Compression::Truncated)?;
        *at += 1;
        if shift > 28 {
            return Err(Compression::Integer);
        }
        value += ((b & 0x7f) as u64) << shift;
        if value > u32::MAX as u64 {
            return Err(Compression::Integer);
        }
        if b & 0x80 == 0 {
            return Ok(value as usize);
        }
        shift += 7;
    }
}
