//! The static table (RFC 7541 Appendix A) and the dynamic table (§2.3.2, §4).
//!
//! The dynamic table keeps its entries' bytes in one buffer, oldest first, and a ring of
//! (position, name length, value length) records, newest first: an index is one look-up, an
//! insertion appends, an eviction pops a record. Evicted bytes stay at the front of the buffer
//! until an insertion needs the room; then the live bytes move down once (at most the table's
//! size, and only when the tail is full). The buffer grows with use and never past the table's
//! maximum size; lowering the size gives the memory back.

use std::collections::VecDeque;

/// The static table, index 1 first.
pub const STATIC: [(&[u8], &[u8]); 61] = [
    (b":authority", b""),
    (b":method", b"GET"),
    (b":method", b"POST"),
    (b":path", b"/"),
    (b":path", b"/index.html"),
    (b":scheme", b"http"),
    (b":scheme", b"https"),
    (b":status", b"200"),
    (b":status", b"204"),
    (b":status", b"206"),
    (b":status", b"304"),
    (b":status", b"400"),
    (b":status", b"404"),
    (b":status", b"500"),
    (b"accept-charset", b""),
    (b"accept-encoding", b"gzip, deflate"),
    (b"accept-language", b""),
    (b"accept-ranges", b""),
    (b"accept", b""),
    (b"access-control-allow-origin", b""),
    (b"age", b""),
    (b"allow", b""),
    (b"authorization", b""),
    (b"cache-control", b""),
    (b"content-disposition", b""),
    (b"content-encoding", b""),
    (b"content-language", b""),
    (b"content-length", b""),
    (b"content-location", b""),
    (b"content-range", b""),
    (b"content-type", b""),
    (b"cookie", b""),
    (b"date", b""),
    (b"etag", b""),
    (b"expect", b""),
    (b"expires", b""),
    (b"from", b""),
    (b"host", b""),
    (b"if-match", b""),
    (b"if-modified-since", b""),
    (b"if-none-match", b""),
    (b"if-range", b""),
    (b"if-unmodified-since", b""),
    (b"last-modified", b""),
    (b"link", b""),
    (b"location", b""),
    (b"max-forwards", b""),
    (b"proxy-authenticate", b""),
    (b"proxy-authorization", b""),
    (b"range", b""),
    (b"referer", b""),
    (b"refresh", b""),
    (b"retry-after", b""),
    (b"server", b""),
    (b"set-cookie", b""),
    (b"strict-transport-security", b""),
    (b"transfer-encoding", b""),
    (b"user-agent", b""),
    (b"vary", b""),
    (b"via", b""),
    (b"www-authenticate", b""),
];

/// The first static index whose name is `name` (lowercase), if any.
pub fn static_name_index(name: &[u8]) -> Option<usize> {
    // By length first: at most a handful of names share one.
    let candidates: &[usize] = match name.len() {
        3 => &[21, 60],
        4 => &[33, 34, 37, 38, 45, 59],
        5 => &[4, 22, 50],
        6 => &[19, 32, 35, 54],
        7 => &[2, 6, 7, 8, 36, 51, 52],
        8 => &[39, 42, 46],
        10 => &[1, 55, 58],
        11 => &[53],
        12 => &[31, 47],
        13 => &[18, 23, 24, 30, 41, 44],
        14 => &[15, 28],
        15 => &[16, 17],
        16 => &[26, 27, 29, 61],
        17 => &[40, 57],
        18 => &[48],
        19 => &[25, 43, 49],
        25 => &[56],
        27 => &[20],
        _ => &[],
    };
    candidates
        .iter()
        .copied()
        .find(|&i| STATIC[i - 1].0 == name)
}

/// Bytes an entry counts beyond its name and value (§4.1).
pub const ENTRY_OVERHEAD: usize = 32;

/// The first allocations of a table: most clients' first request fits.
const FIRST_BYTES: usize = 512;
const FIRST_RECORDS: usize = 16;

#[derive(Clone, Copy, Debug)]
struct Record {
    /// Where the name starts, as a position in the stream of bytes ever stored (wrapping).
    at: u32,
    name: u32,
    value: u32,
}

/// A dynamic table: the decoder's, or the encoder's copy of what it put in the peer's.
#[derive(Debug)]
pub struct DynamicTable {
    /// Live entries' bytes, oldest first, after evicted bytes not yet reclaimed.
    bytes: Vec<u8>,
    /// The stream position of `bytes[0]`.
    base: u32,
    /// Newest first.
    records: VecDeque<Record>,
    /// §4.1's size: names, values and 32 per entry.
    size: usize,
    /// The maximum size in force (the last size update, or the protocol's 4,096).
    max: usize,
    /// Entries ever inserted (wrapping): the newest entry's serial number is this less one.
    inserted: u32,
    /// Bit `serial % 128`: the entry was checked when stored ([`DynamicTable::checked`]).
    /// Up to 128 entries (a 4,096-byte table holds at most 128) the live ones have bits of
    /// their own.
    checked: u128,
}

impl DynamicTable {
    pub fn new(max: usize) -> DynamicTable {
        DynamicTable {
            bytes: Vec::new(),
            base: 0,
            records: VecDeque::new(),
            size: 0,
            max,
            inserted: 0,
            checked: 0,
        }
    }

    /// Entries in the table.
    pub fn len(&self) -> usize {
        self.records.len()
    }

    /// §4.1's size of the table.
    pub fn size(&self) -> usize {
        self.size
    }

    /// The maximum size in force.
    pub fn max(&self) -> usize {
        self.max
    }

    /// Heap bytes held (capacities, not lengths): what an idle connection pays for the table.
    pub fn heap_bytes(&self) -> usize {
        self.bytes.capacity() + self.records.capacity() * std::mem::size_of::<Record>()
    }

    /// The place (as [`DynamicTable::get`] counts) of the newest entry `name: value`. The
    /// lengths are compared before any byte: an encoder asks this for every field it sends.
    pub fn find(&self, name: &[u8], value: &[u8]) -> Option<usize> {
        let (n, v) = (name.len(), value.len());
        self.records.iter().position(|r| {
            if r.name as usize != n || r.value as usize != v {
                return false;
            }
            let start = r.at.wrapping_sub(self.base) as usize;
            let mid = start + n;
            self.bytes.get(start..mid) == Some(name) && self.bytes.get(mid..mid + v) == Some(value)
        })
    }

    /// The serial number of the entry `i` places from the newest: it names the entry
    /// whatever is inserted after it ([`DynamicTable::find_serial`]).
    pub fn serial(&self, i: usize) -> u32 {
        self.inserted.wrapping_sub(1).wrapping_sub(i as u32)
    }

    /// The place of the entry numbered `serial` if it is still in the table and is
    /// `name: value`: a look-up where the caller remembers where a field was last time.
    #[inline(always)]
    pub fn find_serial(&self, serial: u32, name: &[u8], value: &[u8]) -> Option<usize> {
        let i = self.inserted.wrapping_sub(1).wrapping_sub(serial) as usize;
        let r = self.records.get(i)?;
        if r.name as usize != name.len() || r.value as usize != value.len() {
            return None;
        }
        let start = r.at.wrapping_sub(self.base) as usize;
        // The entry's name and value lie together: one bounds check for both. The value
        // first: it is what differs when anything does (a new `date`).
        let (n, v) = self
            .bytes
            .get(start..start + name.len() + value.len())?
            .split_at(name.len());
        (same(v, value) && same(n, name)).then_some(i)
    }

    /// [`DynamicTable::insert`], remembering whether the entry passed the caller's checks.
    pub fn insert_checked(&mut self, name: &[u8], value: &[u8], checked: bool) {
        let serial = self.inserted;
        self.insert(name, value);
        if self.inserted != serial {
            let bit = 1u128 << (serial % 128);
            match checked {
                true => self.checked |= bit,
                false => self.checked &= !bit,
            }
        }
    }

    /// Whether the entry `i` places from the newest was stored as checked
    /// ([`DynamicTable::insert_checked`]); `false` when unknown.
    pub fn checked(&self, i: usize) -> bool {
        i < self.len() && self.len() <= 128 && self.checked & (1u128 << (self.serial(i) % 128)) != 0
    }

    /// The entry `i` places from the newest (0 is the newest: HPACK index 62).
    pub fn get(&self, i: usize) -> Option<(&[u8], &[u8])> {
        let r = self.records.get(i)?;
        let start = r.at.wrapping_sub(self.base) as usize;
        let mid = start + r.name as usize;
        let end = mid + r.value as usize;
        Some((&self.bytes[start..mid], &self.bytes[mid..end]))
    }

    /// Adds an entry (§4.4): older entries leave until it fits; one larger than the table
    /// empties it and is not added.
    pub fn insert(&mut self, name: &[u8], value: &[u8]) {
        let need = name.len() + value.len();
        if need + ENTRY_OVERHEAD > self.max {
            self.evict_to(0);
            return;
        }
        self.evict_to(self.max - need - ENTRY_OVERHEAD);
        if self.bytes.len() + need > self.bytes.capacity() {
            self.compact();
            let len = self.bytes.len();
            if len + need > self.bytes.capacity() {
                // Double from 512 bytes (a browser's first request fills about 1 KiB), within
                // the table's size (live bytes never pass it).
                let want = (self.bytes.capacity() * 2).max(FIRST_BYTES);
                let want = want.clamp(len + need, self.max.max(len + need));
                self.bytes.reserve_exact(want - len);
            }
        }
        if self.records.capacity() == 0 {
            self.records.reserve_exact(FIRST_RECORDS);
        }
        let at = self.base.wrapping_add(self.bytes.len() as u32);
        self.bytes.extend_from_slice(name);
        self.bytes.extend_from_slice(value);
        self.records.push_front(Record {
            at,
            name: name.len() as u32,
            value: value.len() as u32,
        });
        self.size += need + ENTRY_OVERHEAD;
        self.inserted = self.inserted.wrapping_add(1);
    }

    /// A new maximum size (a size update, §6.3): entries leave until the table fits it, and
    /// memory beyond it is given back.
    pub fn set_max(&mut self, max: usize) {
        self.max = max;
        self.evict_to(max);
        if self.bytes.capacity() > max {
            self.compact();
            self.bytes.shrink_to(max);
            if self.records.is_empty() {
                self.records = VecDeque::new();
            } else {
                self.records.shrink_to_fit();
            }
        }
    }

    /// Evicts every entry.
    pub fn clear(&mut self) {
        self.evict_to(0);
    }

    /// Evicts the oldest entries until the size is at most `size`.
    fn evict_to(&mut self, size: usize) {
        while self.size > size {
            let Some(r) = self.records.pop_back() else {
                break;
            };
            self.size -= r.name as usize + r.value as usize + ENTRY_OVERHEAD;
        }
        if self.records.is_empty() {
            self.bytes.clear();
            self.base = 0;
        }
    }

    /// Moves the live bytes to the front of the buffer.
    fn compact(&mut self) {
        let start = match self.records.back() {
            Some(oldest) => oldest.at.wrapping_sub(self.base) as usize,
            None => self.bytes.len(),
        };
        if start > 0 {
            self.bytes.copy_within(start.., 0);
            self.bytes.truncate(self.bytes.len() - start);
            self.base = self.base.wrapping_add(start as u32);
        }
    }
}

/// Whether `a` and `b` are equal, a word at a time and inline: an answer's names and values
/// are short, and a call to `memcmp` (or to this) for each cost more than comparing them.
#[inline(always)]
fn same(a: &[u8], b: &[u8]) -> bool {
    let n = a.len();
    if n != b.len() {
        return false;
    }
    let w8 = |s: &[u8], i: usize| u64::from_ne_bytes(s[i..i + 8].try_into().expect("8 bytes"));
    let w4 = |s: &[u8], i: usize| u32::from_ne_bytes(s[i..i + 4].try_into().expect("4 bytes"));
    if n >= 8 {
        let mut i = 0;
        while i + 8 < n {
            if w8(a, i) != w8(b, i) {
                return false;
            }
            i += 8;
        }
        // The last eight bytes, overlapping the words before.
        w8(a, n - 8) == w8(b, n - 8)
    } else if n >= 4 {
        w4(a, 0) == w4(b, 0) && w4(a, n - 4) == w4(b, n - 4)
    } else {
        // 0 to 3 bytes: the first, the middle and the last cover them all.
        n == 0 || (a[0] == b[0] && a[n / 2] == b[n / 2] && a[n - 1] == b[n - 1])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_finds_every_byte_that_differs() {
        for len in 0..40usize {
            let a: Vec<u8> = (0..len as u8).map(|i| i.wrapping_mul(37)).collect();
            assert!(same(&a, &a.clone()), "{len}");
            assert!(!same(&a, &a[..len.saturating_sub(1)]) || len == 0);
            for at in 0..len {
                let mut b = a.clone();
                b[at] ^= 0x20;
                assert!(!same(&a, &b), "{at} of {len}");
            }
        }
    }

    #[test]
    fn static_names_are_found_by_their_first_index() {
        for (i, (name, _)) in STATIC.iter().enumerate() {
            let first = STATIC.iter().position(|(n, _)| n == name).unwrap() + 1;
            assert_eq!(
                static_name_index(name),
                Some(first),
                "{}",
                String::from_utf8_lossy(name)
            );
            let _ = i;
        }
        assert_eq!(static_name_index(b"x-custom"), None);
        assert_eq!(static_name_index(b"Server"), None);
        assert_eq!(static_name_index(b""), None);
    }

    #[test]
    fn eviction_compaction_and_shrinking() {
        let mut t = DynamicTable::new(200);
        for i in 0..1000u32 {
            let v = format!("value-{i}");
            t.insert(b"name", v.as_bytes());
            assert!(t.size() <= 200);
            assert!(t.heap_bytes() <= 200 + t.records.capacity() * 12);
            let (n, got) = t.get(0).unwrap();
            assert_eq!((n, got), (&b"name"[..], v.as_bytes()));
            if i > 0 {
                let prev = format!("value-{}", i - 1);
                assert_eq!(t.get(1).unwrap().1, prev.as_bytes());
            }
        }
        // (4 + 9 + 32) = 45 bytes per entry: 4 fit in 200.
        assert_eq!(t.len(), 4);
        t.insert(&[b'n'; 100], &[b'v'; 100]);
        assert_eq!((t.len(), t.size()), (0, 0));
        t.insert(b"a", b"b");
        t.set_max(0);
        assert_eq!((t.len(), t.heap_bytes()), (0, 0));
    }

    #[test]
    fn checked_marks_follow_their_entries() {
        let mut t = DynamicTable::new(4096);
        // 1 + 1 + 32 bytes an entry: past 120 of them the oldest leave.
        for i in 0..400usize {
            t.insert_checked(b"a", &[b'0' + (i % 10) as u8], i % 3 == 0);
            for j in 0..t.len() {
                let serial = i - j;
                assert_eq!(t.checked(j), t.len() <= 128 && serial % 3 == 0, "{i} {j}");
            }
        }
        // An entry too large is not stored: the others keep their marks.
        t.insert_checked(&[b'n'; 5000], b"v", true);
        assert_eq!(t.len(), 0);
        t.insert_checked(b"x", b"y", false);
        assert!(!t.checked(0) && !t.checked(1));
    }

    #[test]
    fn find_is_get_searched() {
        let mut t = DynamicTable::new(200);
        // Names and values whose lengths match others', and an entry evicted on the way.
        let entries: [(&[u8], &[u8]); 6] = [
            (b"ab", b"cd"),
            (b"abc", b"d"),
            (b"ab", b"ce"),
            (b"te", b"trailers"),
            (b"user-agent", b"grpc-python/1.51"),
            (b"ab", b"cd"),
        ];
        for (n, v) in entries {
            t.insert(n, v);
        }
        let probes: [(&[u8], &[u8]); 7] = [
            (b"ab", b"cd"),
            (b"abc", b"d"),
            (b"ab", b"ce"),
            (b"te", b"trailers"),
            (b"user-agent", b"grpc-python/1.51"),
            (b"ab", b"c"),
            (b"a", b"bcd"),
        ];
        for (n, v) in probes {
            let searched = (0..t.len()).find(|&i| t.get(i) == Some((n, v)));
            assert_eq!(t.find(n, v), searched, "{n:?} {v:?}");
        }
        assert_eq!(t.find(b"ab", b"cd"), Some(0));
        // Serial numbers follow an entry as newer ones come, and not past its eviction.
        let first = t.serial(t.len() - 1);
        let (n, v) = t.get(t.len() - 1).unwrap();
        let (n, v) = (n.to_vec(), v.to_vec());
        assert_eq!(t.find_serial(first, &n, &v), Some(t.len() - 1));
        let mut other = v.clone();
        other[0] ^= 1;
        assert_eq!(t.find_serial(first, &n, &other), None);
        let newest = t.serial(0);
        t.insert(b"x", b"y");
        assert_eq!(t.find_serial(newest, b"ab", b"cd"), Some(1));
        assert_eq!(t.find_serial(t.serial(0), b"x", b"y"), Some(0));
        for _ in 0..10 {
            t.insert(b"filler", b"filler");
        }
        assert_eq!(t.find_serial(newest, b"ab", b"cd"), None);
        assert_eq!(t.find_serial(first, &n, &v), None);
    }
}
