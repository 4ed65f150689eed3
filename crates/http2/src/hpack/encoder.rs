//! The encoder: an answer's `:status` and fields into a header block.

use super::table::{static_name_index, DynamicTable, ENTRY_OVERHEAD};
use super::{encode_int, huffman, DEFAULT_TABLE_SIZE};

/// A connection's HPACK encoder.
///
/// Made with [`Encoder::new`], it adds nothing to the peer's dynamic table and holds no table.
/// With [`Encoder::with_table_size`], fields whose value tends to repeat on a connection
/// (`server`, `date`, `content-type`, ... see [`indexable`]) go into the peer's table, up to
/// a budget of our own: the next answer sends them as one byte each. Our table is the newest
/// part of the peer's (its maximum is at least our budget unless it said otherwise), so an
/// index into ours means the same entry in its.
///
/// Every block (an answer's head, trailers) starts with [`Encoder::begin`], then `:status`
/// (answers only), then the fields; blocks go out in the order they were encoded.
#[derive(Debug)]
pub struct Encoder {
    /// The table size the peer last heard from us (the protocol's 4,096 until we announce).
    announced: usize,
    /// The lowest SETTINGS_HEADER_TABLE_SIZE since the last block, when below `announced`.
    lowered: Option<usize>,
    /// Our budget for the peer's table (0: no table).
    budget: usize,
    /// What we put in the peer's table, newest first; its maximum is the budget, or the size
    /// announced when lower.
    table: DynamicTable,
    /// Every field but credentials and cookies is worth the table, not only the
    /// [`indexable`] ones: a client's requests on one connection repeat most of their fields
    /// (`:authority`, `:path`, `te`, `content-type`, `user-agent`...), a server's answers
    /// theirs (`content-length`, `last-modified`, `etag` of a page asked again and again).
    every: bool,
    /// Where the `k`-th field of the last blocks was found or put in our table (its serial
    /// number, [`DynamicTable::serial`]): a connection's answers send the same fields in the
    /// same order, so the next block looks there first, one comparison instead of a search.
    memo: [u32; MEMO],
    /// Bit `k`: the entry `memo[k]` names passed the check of [`Encoder::field_checked`].
    memo_checked: u16,
    /// The place of the next field in its block.
    ordinal: usize,
}

/// The fields of a block whose place in the table [`Encoder`] remembers.
const MEMO: usize = 12;

impl Default for Encoder {
    fn default() -> Encoder {
        Encoder::new()
    }
}

impl Encoder {
    /// An encoder that uses no dynamic table.
    pub fn new() -> Encoder {
        Encoder::with_table_size(0)
    }

    /// An encoder that indexes repeated fields in up to `budget` bytes of the peer's table
    /// (counted as §4.1 does; our copy costs about that much memory once used).
    pub fn with_table_size(budget: usize) -> Encoder {
        Encoder {
            announced: DEFAULT_TABLE_SIZE,
            lowered: None,
            budget,
            table: DynamicTable::new(budget.min(DEFAULT_TABLE_SIZE)),
            every: false,
            memo: [0; MEMO],
            memo_checked: 0,
            ordinal: 0,
        }
    }

    /// An encoder for a client's requests: as [`Encoder::with_table_size`], every field but
    /// credentials indexed, and pseudo-headers by their static entry when one matches.
    pub fn for_requests(budget: usize) -> Encoder {
        Encoder {
            every: true,
            ..Encoder::with_table_size(budget)
        }
    }

    /// An encoder for a server's answers: as [`Encoder::with_table_size`], every field but
    /// credentials and cookies (`set-cookie`) indexed, as h2o indexes its answers' fields.
    pub fn for_answers(budget: usize) -> Encoder {
        Encoder {
            every: true,
            ..Encoder::with_table_size(budget)
        }
    }

    /// Heap bytes held between blocks (our copy of what we put in the peer's table).
    pub fn heap_bytes(&self) -> usize {
        self.table.heap_bytes()
    }

    /// Forgets what we put in the peer's table and frees our copy (a connection idle for a
    /// while). The peer keeps those entries, unused from now on: what we index next goes in
    /// front of them, so our copy is still the newest part of its table and our indexes mean
    /// the same entries; the older ones are the first the peer evicts. Nothing goes on the
    /// wire; the next answer sends its repeated fields as literals once more.
    pub fn forget(&mut self) {
        self.table = DynamicTable::new(self.table.max());
    }

    /// The peer's SETTINGS_HEADER_TABLE_SIZE (from its SETTINGS frame). A size below the one
    /// in force is announced at the start of the next block (RFC 7541 §4.2); a larger one
    /// needs nothing: we keep the size we announced.
    pub fn set_peer_table_size(&mut self, size: usize) {
        if size < self.announced {
            self.lowered = Some(self.lowered.map_or(size, |l| l.min(size)));
        }
    }

    /// Starts a block in `dst`: the size update, if one is owed.
    pub fn begin(&mut self, dst: &mut Vec<u8>) {
        self.ordinal = 0;
        if let Some(size) = self.lowered.take() {
            encode_int(dst, 0x20, 5, size);
            self.announced = size;
            // The peer evicted down to `size` as we do now: the same entries stay.
            self.table.set_max(self.budget.min(size));
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

    /// A field: by index when our table has it; as a literal with incremental indexing when
    /// its name is [`indexable`] and it fits the table; else as a literal without indexing.
    /// The name by static index when it has one.
    #[inline]
    pub fn field(&mut self, name: &[u8], value: &[u8], dst: &mut Vec<u8>) {
        let (k, found) = self.remembered(name, value);
        match found {
            Some(i) => index(i, dst),
            None => self.field_searched(k, name, value, dst, false),
        }
    }

    /// [`Encoder::field`] for a field that goes only if `check` passes (say, a value without
    /// control bytes): `check` runs unless the field is the one of its place in the last
    /// blocks, which passed it then (one comparison, as [`Encoder::field`] makes). Every
    /// call on one encoder must pass the same `check` for the same name and value. Returns
    /// whether the field went.
    #[inline(never)]
    pub fn field_checked(
        &mut self,
        name: &[u8],
        value: &[u8],
        dst: &mut Vec<u8>,
        check: impl FnOnce() -> bool,
    ) -> bool {
        let (k, found) = self.remembered(name, value);
        // (`k` past the memo: no bit, the check runs.)
        let bit = 1u16.checked_shl(k as u32).unwrap_or(0);
        match found {
            Some(i) if self.memo_checked & bit != 0 => index(i, dst),
            _ if !check() => return false,
            Some(i) => {
                self.memo_checked |= bit;
                index(i, dst)
            }
            None => self.field_searched(k, name, value, dst, true),
        }
        true
    }

    /// The field's place in the block, and where our table has it if it is where the field
    /// of that place was in the last blocks (a stale place only misses: one comparison
    /// rather than a search). Only fields worth the table are ever in it.
    #[inline(always)]
    fn remembered(&mut self, name: &[u8], value: &[u8]) -> (usize, Option<usize>) {
        debug_assert!(
            !name.iter().any(u8::is_ascii_uppercase),
            "uppercase in a field name"
        );
        let k = self.ordinal;
        self.ordinal += 1;
        let found = match self.memo.get(k) {
            Some(&serial) => self.table.find_serial(serial, name, value),
            None => None,
        };
        (k, found)
    }

    /// [`Encoder::field`] when the field is not where the memo says; `checked`: it passed
    /// the caller's check ([`Encoder::field_checked`]), which the memo remembers with its
    /// place.
    #[inline(never)]
    fn field_searched(
        &mut self,
        k: usize,
        name: &[u8],
        value: &[u8],
        dst: &mut Vec<u8>,
        checked: bool,
    ) {
        if let Some(i) = static_pseudo(name, value) {
            dst.push(0x80 | i);
            return;
        }
        let worth = match self.every {
            true => !matches!(
                name,
                b"authorization" | b"proxy-authorization" | b"cookie" | b"set-cookie"
            ),
            false => indexable(name),
        };
        if self.table.max() != 0 && worth {
            if let Some(i) = self.table.find(name, value) {
                self.remember(k, i, checked);
                encode_int(dst, 0x80, 7, 62 + i);
                return;
            }
            if name.len() + value.len() + ENTRY_OVERHEAD <= self.table.max() / 2 {
                literal(0x40, 6, name, value, dst);
                self.table.insert(name, value);
                self.remember(k, 0, checked);
                return;
            }
        }
        literal(0x00, 4, name, value, dst);
    }

    /// Remembers that the field of place `k` is the entry `i` places from the newest, and
    /// whether it passed the caller's check.
    fn remember(&mut self, k: usize, i: usize, checked: bool) {
        if let Some(m) = self.memo.get_mut(k) {
            *m = self.table.serial(i);
            let bit = 1 << k;
            match checked {
                true => self.memo_checked |= bit,
                false => self.memo_checked &= !bit,
            }
        }
    }

    /// A field an intermediary must not index either (§6.2.3): credentials, cookies.
    pub fn field_never_indexed(&mut self, name: &[u8], value: &[u8], dst: &mut Vec<u8>) {
        debug_assert!(
            !name.iter().any(u8::is_ascii_uppercase),
            "uppercase in a field name"
        );
        literal(0x10, 4, name, value, dst);
    }
}

/// An indexed field (§6.1): our table holds at most budget / 32 entries, so one byte up to
/// 65 of them (a budget of 2 KiB).
#[inline(always)]
fn index(i: usize, dst: &mut Vec<u8>) {
    match i {
        0..65 => dst.push(0x80 | (62 + i) as u8),
        _ => encode_int(dst, 0x80, 7, 62 + i),
    }
}

/// Whether a field's value tends to repeat across the answers of a connection (and says
/// nothing private): the fields worth a place in the peer's table.
pub fn indexable(name: &[u8]) -> bool {
    matches!(
        name,
        b"server"
            | b"date"
            | b"content-type"
            | b"accept-ranges"
            | b"cache-control"
            | b"vary"
            | b"content-encoding"
            | b"content-language"
            | b"expires"
            | b"access-control-allow-origin"
            | b"strict-transport-security"
            | b"x-content-type-options"
            | b"x-frame-options"
            | b"referrer-policy"
            | b"alt-svc"
            // gRPC's answers and trailers (`grpc-status: 0` on every call).
            | b"grpc-status"
            | b"grpc-encoding"
            | b"grpc-accept-encoding"
    )
}

/// The static table's index of a pseudo-header with its value (`:method POST`...).
fn static_pseudo(name: &[u8], value: &[u8]) -> Option<u8> {
    if name.first() != Some(&b':') {
        return None;
    }
    Some(match (name, value) {
        (b":method", b"GET") => 2,
        (b":method", b"POST") => 3,
        (b":path", b"/") => 4,
        (b":path", b"/index.html") => 5,
        (b":scheme", b"http") => 6,
        (b":scheme", b"https") => 7,
        _ => return None,
    })
}

/// A literal field (§6.2): `flags` and an `n`-bit prefix for the name's static index.
fn literal(flags: u8, n: u32, name: &[u8], value: &[u8], dst: &mut Vec<u8>) {
    match static_name_index(name) {
        Some(i) => encode_int(dst, flags, n, i),
        None => {
            dst.push(flags);
            string(name, dst);
        }
    }
    string(value, dst);
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
