//! A cache object on disk, in nginx's layout (`ngx_http_file_cache_header_t`, version 5, as a
//! 64-bit Linux nginx writes it, little-endian, so a cache directory reads the same to both):
//!
//! ```text
//! offset size  field
//!      0    8  version (5)
//!      8    8  valid_sec       until when the object is fresh (unix seconds)
//!     16    8  updating_sec    stale-while-revalidate seconds
//!     24    8  error_sec       stale-if-error seconds
//!     32    8  last_modified   the answer's Last-Modified (unix seconds, -1: none)
//!     40    8  date            when it was stored (unix seconds)
//!     48    4  crc32           of the key
//!     52    2  valid_msec
//!     54    2  header_start    where the stored response head starts
//!     56    2  body_start      where the body starts
//!     58    1  etag_len, then 128 bytes of ETag
//!    187    1  vary_len, then 128 bytes of the Vary header's value
//!    316   16  variant         MD5 of the Vary'd request headers
//!    332    4  padding (the C struct's alignment)
//!    336       "\nKEY: " KEY "\n"
//!  header_start  the upstream's status line and headers, ending with an empty line
//!  body_start    the body, decoded (no chunked framing), to the end of the file
//! ```
//!
//! The stored head is the upstream's head as received, `Content-Length` and
//! `Transfer-Encoding` included (less `Connection` and `Keep-Alive`), as nginx stores it: a
//! HIT tells the length the upstream told, or none (a chunked answer's body is stored
//! decoded). Pure: bytes in, bytes out.

use super::md5;

pub const VERSION: u64 = 5;
pub const ETAG_LEN: usize = 128;
pub const VARY_LEN: usize = 128;
/// The fixed header's size, before `\nKEY: `.
pub const HEADER_SIZE: usize = 336;
const KEY_PREFIX: &[u8] = b"\nKEY: ";

/// The fixed header's fields.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Header {
    pub valid_sec: i64,
    pub updating_sec: i64,
    pub error_sec: i64,
    pub last_modified: i64,
    pub date: i64,
    pub crc32: u32,
    pub valid_msec: u16,
    pub header_start: u16,
    pub body_start: u16,
    pub etag: Vec<u8>,
    pub vary: Vec<u8>,
    pub variant: [u8; 16],
}

/// Why a file is not a usable object (each a miss, logged, and the file replaced).
#[derive(Debug, PartialEq, Eq)]
pub enum Invalid {
    /// Shorter than its own header says.
    Truncated,
    /// Not version 5, or sizes that do not hold together.
    Garbage,
    /// Another key with the same MD5 (or a file written for another key).
    WrongKey,
}

impl std::fmt::Display for Invalid {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Invalid::Truncated => "cache file is too small",
            Invalid::Garbage => "cache file has an invalid header",
            Invalid::WrongKey => "cache file has a different key (md5 collision)",
        })
    }
}

/// The object's start: the fixed header, the key line, the head (`head`, ending in an empty
/// line). The body follows it in the file. `None` if the head or the key is too long for the
/// format's 16-bit offsets.
pub fn encode(h: &Header, key: &[u8], head: &[u8]) -> Option<Vec<u8>> {
    let header_start = HEADER_SIZE + KEY_PREFIX.len() + key.len() + 1;
    let body_start = header_start + head.len();
    if body_start > u16::MAX as usize {
        return None;
    }
    let mut out = Vec::with_capacity(body_start);
    out.extend_from_slice(&VERSION.to_le_bytes());
    for v in [
        h.valid_sec,
        h.updating_sec,
        h.error_sec,
        h.last_modified,
        h.date,
    ] {
        out.extend_from_slice(&v.to_le_bytes());
    }
    out.extend_from_slice(&crate::upstream::crc32::crc32(key).to_le_bytes());
    out.extend_from_slice(&h.valid_msec.to_le_bytes());
    out.extend_from_slice(&(header_start as u16).to_le_bytes());
    out.extend_from_slice(&(body_start as u16).to_le_bytes());
    for (v, max) in [(&h.etag, ETAG_LEN), (&h.vary, VARY_LEN)] {
        let v = &v[..v.len().min(max)];
        out.push(v.len() as u8);
        out.extend_from_slice(v);
        out.resize(out.len() + max - v.len(), 0);
    }
    out.extend_from_slice(&h.variant);
    out.resize(HEADER_SIZE, 0);
    out.extend_from_slice(KEY_PREFIX);
    out.extend_from_slice(key);
    out.push(b'\n');
    out.extend_from_slice(head);
    debug_assert_eq!(out.len(), body_start);
    Some(out)
}

/// Where the validity fields start (`valid_sec`, `updating_sec`, `error_sec`), rewritten in
/// place when a revalidation refreshes an object.
pub const VALIDITY_OFFSET: u64 = 8;

/// The validity fields as they sit at [`VALIDITY_OFFSET`]: valid_sec, updating_sec, error_sec,
/// last_modified (kept), date.
pub fn encode_validity(h: &Header) -> [u8; 40] {
    let mut out = [0u8; 40];
    for (i, v) in [
        h.valid_sec,
        h.updating_sec,
        h.error_sec,
        h.last_modified,
        h.date,
    ]
    .iter()
    .enumerate()
    {
        out[i * 8..i * 8 + 8].copy_from_slice(&v.to_le_bytes());
    }
    out
}

fn i64_at(b: &[u8], at: usize) -> i64 {
    i64::from_le_bytes(b[at..at + 8].try_into().expect("8 bytes"))
}

fn u16_at(b: &[u8], at: usize) -> u16 {
    u16::from_le_bytes([b[at], b[at + 1]])
}

/// Reads an object's start (`buf`: the file's first bytes, at least up to `body_start` when the
/// file is that long; `file_len`: the file's size) for `key`. Returns the header and the
/// stored head.
pub fn decode<'a>(buf: &'a [u8], file_len: u64, key: &[u8]) -> Result<(Header, &'a [u8]), Invalid> {
    if buf.len() < HEADER_SIZE {
        return Err(if buf.len() < 8 || i64_at(buf, 0) as u64 == VERSION {
            Invalid::Truncated
        } else {
            Invalid::Garbage
        });
    }
    if i64_at(buf, 0) as u64 != VERSION {
        return Err(Invalid::Garbage);
    }
    let h = Header {
        valid_sec: i64_at(buf, 8),
        updating_sec: i64_at(buf, 16),
        error_sec: i64_at(buf, 24),
        last_modified: i64_at(buf, 32),
        date: i64_at(buf, 40),
        crc32: u32::from_le_bytes(buf[48..52].try_into().expect("4 bytes")),
        valid_msec: u16_at(buf, 52),
        header_start: u16_at(buf, 54),
        body_start: u16_at(buf, 56),
        etag: {
            let n = (buf[58] as usize).min(ETAG_LEN);
            buf[59..59 + n].to_vec()
        },
        vary: {
            let n = (buf[187] as usize).min(VARY_LEN);
            buf[188..188 + n].to_vec()
        },
        variant: buf[316..332].try_into().expect("16 bytes"),
    };
    let (hs, bs) = (h.header_start as usize, h.body_start as usize);
    if hs < HEADER_SIZE + KEY_PREFIX.len() + 1 || bs < hs {
        return Err(Invalid::Garbage);
    }
    if (file_len as usize) < bs || buf.len() < bs {
        return Err(Invalid::Truncated);
    }
    if h.crc32 != crate::upstream::crc32::crc32(key) {
        return Err(Invalid::WrongKey);
    }
    let key_line = &buf[HEADER_SIZE..hs];
    if !key_line.starts_with(KEY_PREFIX)
        || &key_line[KEY_PREFIX.len()..key_line.len() - 1] != key
        || key_line[key_line.len() - 1] != b'\n'
    {
        return Err(Invalid::WrongKey);
    }
    let head = &buf[hs..bs];
    if !head.ends_with(b"\r\n\r\n") {
        return Err(Invalid::Garbage);
    }
    Ok((h, head))
}

/// The key written in a file's start (the loader does not need it; a purge by prefix does).
pub fn key_of(buf: &[u8]) -> Option<&[u8]> {
    if buf.len() < HEADER_SIZE + KEY_PREFIX.len() || i64_at(buf, 0) as u64 != VERSION {
        return None;
    }
    let rest = buf[HEADER_SIZE..].strip_prefix(KEY_PREFIX)?;
    let end = memchr::memchr(b'\n', rest)?;
    Some(&rest[..end])
}

/// The object's file name: the key's MD5 in hex.
pub fn name_of(key: &[u8]) -> (String, [u8; 16]) {
    let d = md5::md5(key);
    (md5::hex(&d), d)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Header {
        Header {
            valid_sec: 1_700_000_600,
            updating_sec: 5,
            error_sec: 7,
            last_modified: 1_600_000_000,
            date: 1_700_000_000,
            valid_msec: 0,
            etag: b"\"abc\"".to_vec(),
            vary: b"Accept-Encoding".to_vec(),
            variant: [9; 16],
            ..Default::default()
        }
    }

    const HEAD: &[u8] = b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n";

    #[test]
    fn round_trip() {
        let start = encode(&sample(), b"http://x/a", HEAD).unwrap();
        let mut file = start.clone();
        file.extend_from_slice(b"hello");
        let (h, head) = decode(&file, file.len() as u64, b"http://x/a").unwrap();
        assert_eq!(head, HEAD);
        assert_eq!(h.body_start as usize, start.len());
        assert_eq!(h.header_start as usize, HEADER_SIZE + 6 + 10 + 1);
        assert_eq!(h.etag, b"\"abc\"");
        assert_eq!(h.vary, b"Accept-Encoding");
        assert_eq!(h.valid_sec, 1_700_000_600);
        assert_eq!(&file[HEADER_SIZE..HEADER_SIZE + 17], b"\nKEY: http://x/a\n");
        assert_eq!(key_of(&file), Some(&b"http://x/a"[..]));
    }

    #[test]
    fn a_wrong_key_truncation_or_garbage_is_refused() {
        let file = encode(&sample(), b"k1", HEAD).unwrap();
        assert_eq!(
            decode(&file, file.len() as u64, b"k2").unwrap_err(),
            Invalid::WrongKey
        );
        assert_eq!(
            decode(&file[..100], 100, b"k1").unwrap_err(),
            Invalid::Truncated
        );
        let n = file.len() - 3;
        assert_eq!(
            decode(&file[..n], n as u64, b"k1").unwrap_err(),
            Invalid::Truncated
        );
        let mut bad = file.clone();
        bad[0] = 4;
        assert_eq!(
            decode(&bad, bad.len() as u64, b"k1").unwrap_err(),
            Invalid::Garbage
        );
        assert_eq!(decode(b"", 0, b"k1").unwrap_err(), Invalid::Truncated);
        let junk = vec![0xffu8; 1000];
        assert_eq!(decode(&junk, 1000, b"k1").unwrap_err(), Invalid::Garbage);
    }

    #[test]
    fn names_are_md5_hex() {
        let (name, _) = name_of(b"httplocalhost/");
        assert_eq!(name.len(), 32);
        assert_eq!(name, "f7fbc9561a3975ce1ecff55583e50465");
    }
}
