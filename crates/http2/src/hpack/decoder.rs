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

/// Where a decoded string lies.
#[derive(Clone, Copy)]
enum Loc {
    Block(usize, usize),
    Scratch(usize, usize),
    Static(&'static [u8]),
    /// Name or value of the dynamic entry `i` places from the newest.
    Name(usize),
    Value(usize),
    /// Longer than anything that may read it: its length, counted, not stored.
    Dropped(usize),
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
    /// current size, the peer's next block must start with a size update (RFC 7541 §4.2).
    pub fn set_limit(&mut self, limit: usize) {
        self.limit = limit;
        self.update_required = limit < self.table.max();
    }

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
        mut out: F,
    ) -> Result<(), DecodeError<E>>
    where
        F: FnMut(Field<'_>) -> Result<(), E>,
    {
        let mut at = 0;
        let mut list = 0usize;
        let mut first = true;
        let mut failed: Option<DecodeError<E>> = None;
        while at < block.len() {
            let b = block[at];
            if b & 0xe0 == 0x20 {
                // Dynamic table size update (§6.3).
                if !first {
                    return Err(DecodeError::Compression(Compression::SizeNotFirst));
                }
                let size = decode_int(block, &mut at, 5).map_err(DecodeError::Compression)?;
                if size > self.limit {
                    return Err(DecodeError::Compression(Compression::SizeAboveLimit(size)));
                }
                self.table.set_max(size);
                self.update_required = false;
                continue;
            }
            if self.update_required {
                return Err(DecodeError::Compression(Compression::SizeMissing));
            }
            first = false;
            scratch.clear();
            let (name, value, index, never) = if b & 0x80 != 0 {
                // Indexed field (§6.1).
                let i = decode_int(block, &mut at, 7).map_err(DecodeError::Compression)?;
                let (name, value) = self.indexed(i).map_err(DecodeError::Compression)?;
                (name, value, false, false)
            } else {
                // Literals (§6.2): with incremental indexing (01), never indexed (0001),
                // without indexing (0000).
                let (index, never, prefix) = match b & 0xf0 {
                    0x00 => (false, false, 4),
                    0x10 => (false, true, 4),
                    _ => (true, false, 6),
                };
                let i = decode_int(block, &mut at, prefix).map_err(DecodeError::Compression)?;
                let keep = self.bounds.field.max(self.table.max());
                let name = if i == 0 {
                    self.string(block, &mut at, scratch, keep)
                } else {
                    match self.indexed(i) {
                        // The entry may be evicted by the insertion: its name moves to scratch.
                        Ok((Loc::Name(e), _)) if index => {
                            let start = scratch.len();
                            scratch.extend_from_slice(self.table.get(e).map_or(&[], |t| t.0));
                            Ok(Loc::Scratch(start, scratch.len()))
                        }
                        r => r.map(|(name, _)| name),
                    }
                }
                .map_err(DecodeError::Compression)?;
                let value = self
                    .string(block, &mut at, scratch, keep)
                    .map_err(DecodeError::Compression)?;
                (name, value, index, never)
            };
            let name_len = self.len_of(block, scratch, name);
            let value_len = self.len_of(block, scratch, value);
            if failed.is_none() {
                if name_len > self.bounds.field || value_len > self.bounds.field {
                    failed = Some(DecodeError::TooLarge(TooLarge::Field));
                } else {
                    list += name_len + value_len + ENTRY_OVERHEAD;
                    if list > self.bounds.list {
                        failed = Some(DecodeError::TooLarge(TooLarge::List));
                    } else {
                        let field = Field {
                            name: self.bytes(block, scratch, name),
                            value: self.bytes(block, scratch, value),
                            never_indexed: never,
                        };
                        if let Err(e) = out(field) {
                            failed = Some(DecodeError::Refused(e));
                        }
                    }
                }
            }
            if index {
                if name_len + value_len + ENTRY_OVERHEAD > self.table.max() {
                    // Empties the table (§4.4); such strings may not even be stored.
                    self.table.clear();
                } else {
                    // Both lie outside the table: a name from it was copied to scratch.
                    let name = outside(block, scratch, name);
                    let value = outside(block, scratch, value);
                    self.table.insert(name, value);
                }
            }
        }
        if self.update_required {
            return Err(DecodeError::Compression(Compression::SizeMissing));
        }
        match failed {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }
}

impl Decoder {
    /// The name and value at HPACK index `i`.
    fn indexed(&self, i: usize) -> Result<(Loc, Loc), Compression> {
        match i {
            0 => Err(Compression::IndexZero),
            1..=61 => {
                let (name, value) = STATIC[i - 1];
                Ok((Loc::Static(name), Loc::Static(value)))
            }
            _ if i - 62 < self.table.len() => Ok((Loc::Name(i - 62), Loc::Value(i - 62))),
            _ => Err(Compression::Index(i)),
        }
    }

    /// Reads a string literal (§5.2) at `*at`; a Huffman-coded one longer than `keep` once
    /// decoded is checked and counted but not stored.
    fn string(
        &self,
        block: &[u8],
        at: &mut usize,
        scratch: &mut Vec<u8>,
        keep: usize,
    ) -> Result<Loc, Compression> {
        let huffman = *block.get(*at).ok_or(Compression::Truncated)? & 0x80 != 0;
        let len = decode_int(block, at, 7)?;
        let start = *at;
        let end = start
            .checked_add(len)
            .filter(|&e| e <= block.len())
            .ok_or(Compression::Truncated)?;
        *at = end;
        if !huffman {
            return Ok(Loc::Block(start, end));
        }
        let from = scratch.len();
        let n = huffman::decode(&block[start..end], scratch, keep).map_err(Compression::Huffman)?;
        if n > keep {
            scratch.truncate(from);
            return Ok(Loc::Dropped(n));
        }
        Ok(Loc::Scratch(from, from + n))
    }

    fn len_of(&self, block: &[u8], scratch: &[u8], loc: Loc) -> usize {
        match loc {
            Loc::Dropped(n) => n,
            _ => self.bytes(block, scratch, loc).len(),
        }
    }

    fn bytes<'a>(&'a self, block: &'a [u8], scratch: &'a [u8], loc: Loc) -> &'a [u8] {
        match loc {
            Loc::Name(e) => self.table.get(e).map_or(&[], |t| t.0),
            Loc::Value(e) => self.table.get(e).map_or(&[], |t| t.1),
            _ => outside(block, scratch, loc),
        }
    }
}

/// The bytes of a string that is not in the dynamic table.
fn outside<'a>(block: &'a [u8], scratch: &'a [u8], loc: Loc) -> &'a [u8] {
    match loc {
        Loc::Block(s, e) => &block[s..e],
        Loc::Scratch(s, e) => &scratch[s..e],
        Loc::Static(b) => b,
        Loc::Name(_) | Loc::Value(_) | Loc::Dropped(_) => {
            debug_assert!(false, "a string read from where it is not");
            &[]
        }
    }
}
