//! The decoder: header blocks in, [`Field`]s out, under the caller's [`Bounds`].

use super::huffman;
use super::table::{DynamicTable, ENTRY_OVERHEAD, STATIC};
use super::{decode_int, Compression, DecodeError, Field, TooLarge, DEFAULT_TABLE_SIZE};

/// What one block may expand to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Bounds {
    /// The header list: the sum over fields of name + value + 32 (RFC 9113 §6.5.2).
    pub list: usize,
    /// One name or one value (nginx: the `large_client_header_buffers` size, 8k by default).
    pub field: usize,
}

impl Default for Bounds {
    /// nginx's defaults: fields up to 8k, a list up to the four large buffers (32k).
    fn default() -> Bounds {
        Bounds {
            list: 4 * 8192,
            field: 8192,
        }
    }
}

/// A connection's HPACK decoder. Feed it every header block the peer sends, in order (a
/// block whose stream is refused too: the table must follow the encoder's).
#[derive(Debug)]
pub struct Decoder {
    table: DynamicTable,
    /// Our SETTINGS_HEADER_TABLE_SIZE, as acknowledged: no size update may pass it.
    limit: usize,
    /// The limit was lowered below the table's size: the next block must start with an update.
    update_required: bool,
    bounds: Bounds,
}

impl Decoder {
    /// A decoder for a connection whose SETTINGS_HEADER_TABLE_SIZE is the protocol's 4,096.
    pub fn new(bounds: Bounds) -> Decoder {
        Decoder {
            table: DynamicTable::new(DEFAULT_TABLE_SIZE),
            limit: DEFAULT_TABLE_SIZE,
            update_required: false,
            bounds,
        }
    }

    /// A decoder whose table size is `limit` from the first block, with no size update
    /// (RFC 7541's examples). Over HTTP/2 the peer starts at 4,096 until it acknowledges our
    /// SETTINGS: use [`Decoder::new`] and [`Decoder::set_limit`] there.
    pub fn with_table_size(limit: usize, bounds: Bounds) -> Decoder {
        Decoder {
            table: DynamicTable::new(limit),
            limit,
            update_required: false,
            bounds,
        }
    }

    /// The dynamic table, newest first (HPACK index 62 first).
    pub fn entries(&self) -> impl Iterator<Item = (&[u8], &[u8])> + '_ {
        (0..self.table.len()).filter_map(|i| self.table.get(i))
    }

    /// Our SETTINGS_HEADER_TABLE_SIZE changed and the peer acknowledged it. Below the table's
    /// maximum size in force, the peer's next block must start with a size update (RFC 7541
    /// §4.2); no update may ever pass the limit.
    pub fn set_limit(&mut self, limit: usize) {
        self.limit = limit;
        self.update_required = limit < self.table.max();
    }

    /// New bounds, for the blocks to come (a reload's configuration, say).
    pub fn set_bounds(&mut self, bounds: Bounds) {
        self.bounds = bounds;
    }

    /// Entries in the dynamic table.
    pub fn table_len(&self) -> usize {
        self.table.len()
    }

    /// The dynamic table's size as §4.1 counts it.
    pub fn table_size(&self) -> usize {
        self.table.size()
    }

    /// Heap bytes the decoder holds between blocks (its dynamic table).
    pub fn heap_bytes(&self) -> usize {
        self.table.heap_bytes()
    }

    /// Decodes one whole header block (HEADERS and its CONTINUATIONs joined), giving each
    /// field to `out` in order. `scratch` holds Huffman-decoded strings while their field is
    /// given; it is cleared first and may be shared by all the decoders of a worker.
    pub fn decode<E, F>(
        &mut self,
        block: &[u8],
        scratch: &mut Vec<u8>,
        out: F,
    ) -> Result<(), DecodeError<E>>
    where
        F: FnMut(Field<'_>) -> Result<(), E>,
    {
        let mut emit = Emit {
            bounds: self.bounds,
            list: 0,
            failed: None,
            out,
        };
        let mut at = 0;
        let mut first = true;
        let c = DecodeError::Compression;
        while at < block.len() {
            let b = block[at];
            if self.update_required && b & 0xe0 != 0x20 {
                return Err(c(Compression::SizeMissing));
            }
            if b & 0x80 != 0 {
                // Indexed field (§6.1).
                let i = decode_int(block, &mut at, 7).map_err(c)?;
                let (name, value) = self.indexed(i).map_err(c)?;
                let checked = i <= STATIC.len() || self.table.checked(i - STATIC.len() - 1);
                emit.field(name, name.len(), value, value.len(), false, checked);
            } else if b & 0xc0 == 0x40 {
                // Literal with incremental indexing (§6.2.1).
                let i = decode_int(block, &mut at, 6).map_err(c)?;
                scratch.clear();
                let keep = self.bounds.field.max(self.table.max());
                let name = match i {
                    0 => read_string(block, &mut at, scratch, keep).map_err(c)?,
                    // An entry's name is copied: the insertion may evict the entry.
                    _ => {
                        scratch.extend_from_slice(self.indexed(i).map_err(c)?.0);
                        Str::Scratch(0, scratch.len())
                    }
                };
                let value = read_string(block, &mut at, scratch, keep).map_err(c)?;
                let (name, name_len) = name.get(block, scratch);
                let (value, value_len) = value.get(block, scratch);
                emit.field(name, name_len, value, value_len, false, false);
                if name_len + value_len + ENTRY_OVERHEAD > self.table.max() {
                    // Empties the table (§4.4); such strings may not even be stored.
                    self.table.clear();
                } else {
                    // Checked once here, for every use of the entry from now on.
                    let checked = crate::server::request::chars_ok(name, value);
                    self.table.insert_checked(name, value, checked);
                }
            } else if b & 0xe0 == 0x20 {
                // Dynamic table size update (§6.3).
                if !first {
                    return Err(c(Compression::SizeNotFirst));
                }
                let size = decode_int(block, &mut at, 5).map_err(c)?;
                if size > self.limit {
                    return Err(c(Compression::SizeAboveLimit(size)));
                }
                self.table.set_max(size);
                self.update_required = false;
                continue;
            } else {
                // Literal without indexing (0000) or never indexed (0001) (§6.2.2, §6.2.3).
                let never = b & 0x10 != 0;
                let i = decode_int(block, &mut at, 4).map_err(c)?;
                scratch.clear();
                let keep = self.bounds.field;
                let name = match i {
                    0 => Some(read_string(block, &mut at, scratch, keep).map_err(c)?),
                    _ => None,
                };
                let value = read_string(block, &mut at, scratch, keep).map_err(c)?;
                let (name, name_len) = match name {
                    Some(name) => name.get(block, scratch),
                    None => {
                        let name = self.indexed(i).map_err(c)?.0;
                        (name, name.len())
                    }
                };
                let (value, value_len) = value.get(block, scratch);
                emit.field(name, name_len, value, value_len, never, false);
            }
            first = false;
        }
        if self.update_required {
            return Err(c(Compression::SizeMissing));
        }
        match emit.failed {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    /// The name and value at HPACK index `i`.
    fn indexed(&self, i: usize) -> Result<(&[u8], &[u8]), Compression> {
        match i {
            0 => Err(Compression::IndexZero),
            1..=61 => Ok(STATIC[i - 1]),
            _ => self.table.get(i - 62).ok_or(Compression::Index(i)),
        }
    }
}

/// The fields' side of a block: the bounds, and the caller's function until it fails.
struct Emit<E, F> {
    bounds: Bounds,
    list: usize,
    failed: Option<DecodeError<E>>,
    out: F,
}

impl<E, F: FnMut(Field<'_>) -> Result<(), E>> Emit<E, F> {
    /// Gives a field unless a bound or the caller failed before. The lengths are checked
    /// first: a string over the bounds was not stored, and its bytes are empty.
    fn field(
        &mut self,
        name: &[u8],
        name_len: usize,
        value: &[u8],
        value_len: usize,
        never: bool,
        checked: bool,
    ) {
        if self.failed.is_some() {
            return;
        }
        if name_len > self.bounds.field || value_len > self.bounds.field {
            self.failed = Some(DecodeError::TooLarge(TooLarge::Field));
            return;
        }
        self.list += name_len + value_len + ENTRY_OVERHEAD;
        if self.list > self.bounds.list {
            self.failed = Some(DecodeError::TooLarge(TooLarge::List));
            return;
        }
        if let Err(e) = (self.out)(Field {
            name,
            value,
            never_indexed: never,
            checked,
        }) {
            self.failed = Some(DecodeError::Refused(e));
        }
    }
}

/// Where a string literal lies.
#[derive(Clone, Copy)]
enum Str {
    Block(usize, usize),
    Scratch(usize, usize),
    /// Longer than anything may read: its length, checked and counted, not stored.
    Dropped(usize),
}

impl Str {
    /// The bytes (empty when dropped) and the length.
    fn get<'a>(self, block: &'a [u8], scratch: &'a [u8]) -> (&'a [u8], usize) {
        match self {
            Str::Block(s, e) => (&block[s..e], e - s),
            Str::Scratch(s, e) => (&scratch[s..e], e - s),
            Str::Dropped(n) => (&[], n),
        }
    }
}

/// Reads a string literal (§5.2) at `*at`; a Huffman-coded one longer than `keep` once decoded
/// is checked and counted but not stored.
fn read_string(
    block: &[u8],
    at: &mut usize,
    scratch: &mut Vec<u8>,
    keep: usize,
) -> Result<Str, Compression> {
    let huffman = *block.get(*at).ok_or(Compression::Truncated)? & 0x80 != 0;
    let len = decode_int(block, at, 7)?;
    let start = *at;
    let end = start
        .checked_add(len)
        .filter(|&e| e <= block.len())
        .ok_or(Compression::Truncated)?;
    *at = end;
    if !huffman {
        return Ok(Str::Block(start, end));
    }
    let from = scratch.len();
    let n = huffman::decode(&block[start..end], scratch, keep).map_err(Compression::Huffman)?;
    if n > keep {
        scratch.truncate(from);
        return Ok(Str::Dropped(n));
    }
    Ok(Str::Scratch(from, from + n))
}
