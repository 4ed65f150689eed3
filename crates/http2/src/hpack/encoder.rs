//! The encoder: an answer's `:status` and fields into a header block.

use super::table::static_name_index;
use super::{encode_int, huffman, DEFAULT_TABLE_SIZE};

/// A connection's HPACK encoder. It adds nothing to the peer's dynamic table, so it holds no
/// table: only what the peer's SETTINGS_HEADER_TABLE_SIZE requires it to announce.
#[derive(Clone, Debug)]
pub struct Encoder {
    /// The table size the peer last heard from us (the protocol's 4,096 until we announce).
    announced: usize,
    /// The lowest SETTINGS_HEADER_TABLE_SIZE since the last block, when below `announced`.
    lowered: Option<usize>,
}

impl Default for Encoder {
    fn default() -> Encoder {
        Encoder::new()
    }
}

impl Encoder {
    pub fn new() -> Encoder {
        Encoder {
            announced: DEFAULT_TABLE_SIZE,
            lowered: None,
        }
    }

    /// The peer's SETTINGS_HEADER_TABLE_SIZE (from its SETTINGS frame). A size below the one
    /// in force is announced at the start of the next block (RFC 7541 §4.2); a larger one
    /// needs nothing, since this encoder never uses the table.
    pub fn set_peer_table_size(&mut self, size: usize) {
        if size < self.announced {
            self.lowered = Some(self.lowered.map_or(size, |l| l.min(size)));
        }
    }

    /// Starts a block in `dst`: the size update, if one is owed.
    pub fn begin(&mut self, dst: &mut Vec<u8>) {
        if let Some(size) = self.lowered.take() {
            encode_int(dst, 0x20, 5, size);
            self.announced = size;
        }
    }

    /// `:status`: one byte for the statuses of the static table, else its name by index and
    /// three digits.
    pub fn status(&mut self, status: u16, dst: &mut Vec<u8>) {
        let index = match status {
            200 => 8,
            204 => 9,
            206 => 10,
            304 => 11,
            400 => 12,
            404 => 13,
            500 => 14,
            _ => 0,
        };
        if index != 0 {
            dst.push(0x80 | index);
            return;
        }
        debug_assert!((100..=999).contains(&status));
        let digits = [
            b'0' + (status / 100 % 10) as u8,
            b'0' + (status / 10 % 10) as u8,
            b'0' + (status % 10) as u8,
        ];
        // Literal without indexing, name `:status` (index 8). Huffman makes most statuses 2
        // bytes ("302" is 16 bits).
        dst.push(0x08);
        string(&digits, dst);
    }

    /// A field, as a literal without indexing; the name by static index when it has one.
    pub fn field(&mut self, name: &[u8], value: &[u8], dst: &mut Vec<u8>) {
        self.literal(0x00, name, value, dst);
    }

    /// A field an intermediary must not index either (§6.2.3): credentials, cookies.
    pub fn field_never_indexed(&mut self, name: &[u8], value: &[u8], dst: &mut Vec<u8>) {
        self.literal(0x10, name, value, dst);
    }

    fn literal(&mut self, flags: u8, name: &[u8], value: &[u8], dst: &mut Vec<u8>) {
        debug_assert!(
            !name.iter().any(u8::is_ascii_uppercase),
            "uppercase in a field name"
        );
        match static_name_index(name) {
            Some(i) => encode_int(dst, flags, 4, i),
            None => {
                dst.push(flags);
                string(name, dst);
            }
        }
        string(value, dst);
    }
}

/// A string literal (§5.2): Huffman-coded when that is shorter.
fn string(s: &[u8], dst: &mut Vec<u8>) {
    let coded = huffman::encoded_len(s);
    if coded < s.len() {
        dst.reserve(coded + 5);
        encode_int(dst, 0x80, 7, coded);
        huffman::encode(s, dst);
    } else {
        encode_int(dst, 0x00, 7, s.len());
        dst.extend_from_slice(s);
    }
}
