//! The request's records, laid out as nginx lays them: `BEGIN_REQUEST` (responder role, the
//! keep-conn flag), the params in `PARAMS` records then an empty one, the body in `STDIN`
//! records of at most 32 KiB then an empty one; every record padded with zeros to a multiple of
//! 8 bytes. A request is `begin_request`, `params`, any number of `stdin`, `stdin_end`.
//!
//! Nothing here fails: a name or value of 2 GiB or more (which no length prefix can say) is cut
//! to its first 2³¹ − 1 bytes, so the stream stays well formed. nginx's own limit on params is
//! [`check_params_len`], for the caller to apply first.

use std::fmt;

use bytes::{BufMut, Bytes, BytesMut};

use super::{RecordType, HEADER_LEN, REQUEST_ID, VERSION};
use crate::log::Level;

/// The body bytes nginx puts in one `STDIN` record.
pub const STDIN_RECORD: usize = 32 * 1024;

/// The most params bytes put in one `PARAMS` record: the largest multiple of 8 under 65535, so
/// that content and padding stay within 65535 (PHP-FPM refuses a record whose content and
/// padding exceed it).
pub const PARAMS_RECORD: usize = 65528;

/// nginx's limit on the params of a request, all in one record.
pub const NGINX_MAX_PARAMS: usize = 65535;

/// The longest name or value a length prefix can say.
const MAX_PAIR_PART: usize = 0x7fff_ffff;

static ZEROS: [u8; 8] = [0; 8];

/// The padding nginx adds after `len` content bytes: up to the next multiple of 8.
pub const fn padding(len: usize) -> usize {
    (8 - len % 8) % 8
}

/// A record header: version 1, `kind`, request id 1, the content length and the padding.
pub fn header(kind: RecordType, content_len: u16, padding: u8) -> [u8; HEADER_LEN] {
    let [id_hi, id_lo] = REQUEST_ID.to_be_bytes();
    let [len_hi, len_lo] = content_len.to_be_bytes();
    [
        VERSION, kind as u8, id_hi, id_lo, len_hi, len_lo, padding, 0,
    ]
}

/// A whole record: header, `content` (at most 65535 bytes, else cut there), padding.
fn record(out: &mut BytesMut, kind: RecordType, content: &[u8]) {
    let content = &content[..content.len().min(usize::from(u16::MAX))];
    let pad = padding(content.len());
    out.reserve(HEADER_LEN + content.len() + pad);
    out.put_slice(&header(kind, content.len() as u16, pad as u8));
    out.put_slice(content);
    out.put_slice(&ZEROS[..pad]);
}

/// `BEGIN_REQUEST`: the responder role, and `FCGI_KEEP_CONN` with `fastcgi_keep_conn on`.
pub fn begin_request(out: &mut BytesMut, keep_conn: bool) {
    let [role_hi, role_lo] = 1u16.to_be_bytes();
    record(
        out,
        RecordType::BeginRequest,
        &[role_hi, role_lo, u8::from(keep_conn), 0, 0, 0, 0, 0],
    );
}

/// The bytes one name-value pair takes: each length in 1 byte up to 127, else 4.
pub fn pair_len(name: &[u8], value: &[u8]) -> usize {
    let part = |b: &[u8]| {
        let n = b.len().min(MAX_PAIR_PART);
        n + if n > 127 { 4 } else { 1 }
    };
    part(name) + part(value)
}

/// The bytes all `pairs` take in `PARAMS` records (without record headers and padding): what
/// nginx compares with its limit.
pub fn params_len<'a>(pairs: impl IntoIterator<Item = (&'a [u8], &'a [u8])>) -> usize {
    pairs
        .into_iter()
        .map(|(n, v)| pair_len(n, v))
        .fold(0, usize::saturating_add)
}

/// nginx's refusal of params over 65535 bytes: `[alert] fastcgi request record is too big: N`,
/// and 500 for the client.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct RecordTooBig {
    /// The params' length ([`params_len`]).
    pub len: usize,
}

impl RecordTooBig {
    /// nginx logs it at `alert`.
    pub fn level(&self) -> Level {
        Level::Alert
    }
}

impl fmt::Display for RecordTooBig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "fastcgi request record is too big: {}", self.len)
    }
}

impl std::error::Error for RecordTooBig {}

/// nginx's limit: params of `len` bytes ([`params_len`]) fit in its one record, or not.
pub fn check_params_len(len: usize) -> Result<(), RecordTooBig> {
    if len > NGINX_MAX_PARAMS {
        Err(RecordTooBig { len })
    } else {
        Ok(())
    }
}

/// Writes records of one type from pieces, closing a record when it is full.
struct Records<'a> {
    out: &'a mut BytesMut,
    kind: RecordType,
    max: usize,
    /// Where the open record's header is, and how much content it has.
    open: Option<(usize, usize)>,
}

impl Records<'_> {
    fn len(&self) -> usize {
        self.open.map_or(0, |(_, len)| len)
    }

    fn write(&mut self, mut bytes: &[u8]) {
        while !bytes.is_empty() {
            let (at, len) = match self.open {
                Some((at, len)) if len < self.max => (at, len),
                _ => {
                    self.close();
                    let at = self.out.len();
                    self.out.put_slice(&[0; HEADER_LEN]);
                    (at, 0)
                }
            };
            let take = (self.max - len).min(bytes.len());
            self.out.put_slice(&bytes[..take]);
            self.open = Some((at, len + take));
            bytes = &bytes[take..];
        }
    }

    /// Ends the open record: its header, its padding.
    fn close(&mut self) {
        if let Some((at, len)) = self.open.take() {
            let pad = padding(len);
            let len = u16::try_from(len).expect("records hold at most 65535 bytes");
            self.out[at..at + HEADER_LEN].copy_from_slice(&header(self.kind, len, pad as u8));
            self.out.put_slice(&ZEROS[..pad]);
        }
    }
}

/// The params, then the empty `PARAMS` record that ends them. Pairs are kept whole within a
/// record when they fit in one (PHP-FPM reads each record's pairs on their own); a pair longer
/// than [`PARAMS_RECORD`] runs over several.
pub fn params<'a>(out: &mut BytesMut, pairs: impl IntoIterator<Item = (&'a [u8], &'a [u8])>) {
    let mut records = Records {
        out,
        kind: RecordType::Params,
        max: PARAMS_RECORD,
        open: None,
    };
    for (name, value) in pairs {
        let name = &name[..name.len().min(MAX_PAIR_PART)];
        let value = &value[..value.len().min(MAX_PAIR_PART)];
        if records.len() > 0 && records.len() + pair_len(name, value) > PARAMS_RECORD {
            records.close();
        }
        let mut lengths = [0u8; 8];
        let mut n = 0;
        for part in [name.len(), value.len()] {
            if part > 127 {
                lengths[n..n + 4].copy_from_slice(&(part as u32 | 0x8000_0000).to_be_bytes());
                n += 4;
            } else {
                lengths[n] = part as u8;
                n += 1;
            }
        }
        records.write(&lengths[..n]);
        records.write(name);
        records.write(value);
    }
    records.close();
    record(out, RecordType::Params, &[]);
}

/// Body bytes in `STDIN` records of at most [`STDIN_RECORD`] bytes. An empty piece writes
/// nothing (an empty `STDIN` record would end the body).
pub fn stdin(out: &mut BytesMut, piece: &[u8]) {
    for chunk in piece.chunks(STDIN_RECORD) {
        record(out, RecordType::Stdin, chunk);
    }
}

/// The empty `STDIN` record that ends the body (also for a request without one).
pub fn stdin_end(out: &mut BytesMut) {
    record(out, RecordType::Stdin, &[]);
}

/// [`stdin`] without copying the body: the pieces to write in order (for `writev`), each
/// record's header and padding around a slice of `body`.
pub fn stdin_pieces(body: Bytes) -> impl Iterator<Item = Bytes> {
    let len = body.len();
    (0..len).step_by(STDIN_RECORD).flat_map(move |start| {
        let end = (start + STDIN_RECORD).min(len);
        let pad = padding(end - start);
        let head = header(RecordType::Stdin, (end - start) as u16, pad as u8);
        [
            Bytes::copy_from_slice(&head),
            body.slice(start..end),
            Bytes::from_static(&ZEROS[..pad]),
        ]
        .into_iter()
        .filter(|b| !b.is_empty())
    })
}

/// A whole request in one buffer: `BEGIN_REQUEST`, the params, the body, the ends.
pub fn request<'a>(
    keep_conn: bool,
    pairs: impl IntoIterator<Item = (&'a [u8], &'a [u8])>,
    body: &[u8],
) -> BytesMut {
    let mut out = BytesMut::new();
    begin_request(&mut out, keep_conn);
    params(&mut out, pairs);
    stdin(&mut out, body);
    stdin_end(&mut out);
    out
}
