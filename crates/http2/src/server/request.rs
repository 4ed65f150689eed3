//! A decoded request head and its checks (RFC 9113, 8.2 and 8.3): the fields go into one
//! buffer as HPACK gives them, each checked on its way in.

use std::ops::Range;

use crate::hpack::Field;

pub use super::malformed::Malformed;

/// The size of the last request's [`Fields`], to size the next one's.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Hint {
    bytes: u32,
    fields: u32,
}

/// A field's place in [`Fields`]' buffer: its name, then its value right after.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Span {
    at: u32,
    name: u32,
    value: u32,
}

/// Header fields (a request's regular fields, or trailers), in the order they came, in one
/// buffer: each byte was copied once, from the header block (or the HPACK decoder's scratch,
/// or its tables) to here.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Fields {
    buf: Vec<u8>,
    spans: Vec<Span>,
    /// `cookie` fields among them (more than one are joined at the end).
    cookies: u32,
}

impl Fields {
    /// Room for a block of `block_len` encoded bytes, or for as much as the last request of
    /// the connection took when that is more (requests on a connection look alike, and an
    /// indexed field is one byte for many): one allocation each, most of the time.
    /// A recycled `spare`'s buffers are used when there is one.
    pub(crate) fn with_capacity(block_len: usize, hint: Hint, spare: Option<Fields>) -> Fields {
        let bytes = (2 * block_len).max(hint.bytes as usize + 16).max(64);
        let fields = (hint.fields as usize).max(4);
        match spare {
            Some(mut f) => {
                f.buf.clear();
                f.spans.clear();
                f.cookies = 0;
                f.buf.reserve(bytes);
                f.spans.reserve(fields);
                f
            }
            None => Fields {
                buf: Vec::with_capacity(bytes),
                spans: Vec::with_capacity(fields),
                cookies: 0,
            },
        }
    }

    /// Heap bytes held.
    pub(crate) fn heap_bytes(&self) -> usize {
        self.buf.capacity() + self.spans.capacity() * std::mem::size_of::<Span>()
    }

    /// What these fields take, as a [`Hint`] for the next ones.
    pub(crate) fn hint(&self) -> Hint {
        Hint {
            bytes: self.buf.len() as u32,
            fields: self.spans.len() as u32,
        }
    }

    /// Appends a field: the range of its value.
    pub(crate) fn push(&mut self, name: &[u8], value: &[u8]) -> Range<u32> {
        self.cookies += (name == b"cookie") as u32;
        let at = self.buf.len() as u32;
        self.buf.extend_from_slice(name);
        self.buf.extend_from_slice(value);
        self.spans.push(Span {
            at,
            name: name.len() as u32,
            value: value.len() as u32,
        });
        at + name.len() as u32..self.buf.len() as u32
    }

    /// Appends a value alone, for a pseudo-header: its range in the buffer.
    fn push_value(&mut self, value: &[u8]) -> Range<u32> {
        let at = self.buf.len() as u32;
        self.buf.extend_from_slice(value);
        at..self.buf.len() as u32
    }

    fn slice(&self, r: &Range<u32>) -> &[u8] {
        &self.buf[r.start as usize..r.end as usize]
    }

    fn field(&self, s: &Span) -> (&[u8], &[u8]) {
        let at = s.at as usize;
        let mid = at + s.name as usize;
        (&self.buf[at..mid], &self.buf[mid..mid + s.value as usize])
    }

    /// The fields, in order (`cookie` crumbs already joined into one, last).
    pub fn iter(&self) -> impl Iterator<Item = (&[u8], &[u8])> + '_ {
        self.spans.iter().map(|s| self.field(s))
    }

    /// The first field named `name` (lowercase).
    pub fn get(&self, name: &[u8]) -> Option<&[u8]> {
        self.iter().find(|(n, _)| *n == name).map(|(_, v)| v)
    }

    pub fn len(&self) -> usize {
        self.spans.len()
    }

    pub fn is_empty(&self) -> bool {
        self.spans.is_empty()
    }

    /// Joins the `cookie` crumbs into one field with "; " (RFC 9113, 8.2.3), placed last; a
    /// single crumb stays where it is.
    fn join_cookies(&mut self) {
        if self.cookies < 2 {
            return;
        }
        let mut joined = Vec::new();
        self.spans.retain(|s| {
            let at = s.at as usize + s.name as usize;
            if &self.buf[s.at as usize..at] != b"cookie" {
                return true;
            }
            if !joined.is_empty() {
                joined.extend_from_slice(b"; ");
            }
            joined.extend_from_slice(&self.buf[at..at + s.value as usize]);
            false
        });
        self.push(b"cookie", &joined);
        self.cookies = 1;
    }
}

/// A request's head: the pseudo-headers and the regular fields, checked.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Request {
    fields: Fields,
    method: Range<u32>,
    scheme: Option<Range<u32>>,
    authority: Option<Range<u32>>,
    path: Option<Range<u32>>,
    /// The first `host` field's value.
    host: Option<Range<u32>>,
    content_length: Option<u64>,
}

impl Request {
    /// `:method`.
    pub fn method(&self) -> &[u8] {
        self.fields.slice(&self.method)
    }

    /// `:scheme` (none for CONNECT).
    pub fn scheme(&self) -> Option<&[u8]> {
        self.scheme.as_ref().map(|r| self.fields.slice(r))
    }

    /// `:authority`.
    pub fn authority(&self) -> Option<&[u8]> {
        self.authority.as_ref().map(|r| self.fields.slice(r))
    }

    /// `:path` (none for CONNECT): never empty; "/..." or, for OPTIONS, "*".
    pub fn path(&self) -> Option<&[u8]> {
        self.path.as_ref().map(|r| self.fields.slice(r))
    }

    /// The host: the `host` field, or `:authority` when there is none (RFC 9113, 8.3.1; a
    /// `host` that differs from `:authority` made the request malformed).
    pub fn host(&self) -> Option<&[u8]> {
        self.host
            .as_ref()
            .or(self.authority.as_ref())
            .map(|r| self.fields.slice(r))
    }

    /// The regular fields.
    pub fn fields(&self) -> &Fields {
        &self.fields
    }

    /// The fields, the request's buffers (for [`super::Server::recycle`]).
    pub fn into_fields(self) -> Fields {
        self.fields
    }

    /// `content-length`, when the request has one (its DATA frames are checked against it).
    pub fn content_length(&self) -> Option<u64> {
        self.content_length
    }

    /// Where the parts of the head [`Request::write_http1`] writes lie in [`Request::buf`],
    /// for a server that builds its own request on the buffer rather than parse that head:
    /// the method, the request target, and the fields in the head's order
    /// ([`Request::field_ranges`] after `host`, which, when the request has no `host` field,
    /// is `:authority`'s value under a name added to the buffer here: call once).
    pub fn parts(&mut self) -> Parts {
        let range = |r: &Range<u32>| r.start as usize..r.end as usize;
        let host = match (&self.host, &self.authority) {
            (None, Some(a)) => {
                let at = self.fields.buf.len();
                self.fields.buf.extend_from_slice(b"host");
                Some((at..at + 4, range(a)))
            }
            _ => None,
        };
        Parts {
            method: range(&self.method),
            target: self.path.as_ref().or(self.authority.as_ref()).map(range),
            host,
        }
    }

    /// The buffer the request's parts lie in (see [`Request::parts`]).
    pub fn buf(&self) -> &[u8] {
        &self.fields.buf
    }

    /// Each regular field's name and value, as ranges of [`Request::buf`], in order.
    pub fn field_ranges(&self) -> impl ExactSizeIterator<Item = (Range<usize>, Range<usize>)> + '_ {
        self.fields.spans.iter().map(|s| {
            let at = s.at as usize;
            let mid = at + s.name as usize;
            (at..mid, mid..mid + s.value as usize)
        })
    }

    /// The buffer, taken (the request's parts stay where [`Request::parts`] said).
    pub fn into_buf(self) -> Vec<u8> {
        self.fields.buf
    }

    /// Writes the head as HTTP/1.1 would send it, for a parser of HTTP/1 heads: the request
    /// line, `host` from `:authority` when the request has no `host` field, the fields, the
    /// empty line. CONNECT's request target is its authority.
    pub fn write_http1(&self, dst: &mut Vec<u8>) {
        dst.reserve(self.fields.buf.len() + 4 * self.fields.len() + 32);
        dst.extend_from_slice(self.method());
        dst.push(b' ');
        dst.extend_from_slice(self.path().or(self.authority()).unwrap_or(b"/"));
        dst.extend_from_slice(b" HTTP/1.1\r\n");
        if let (None, Some(a)) = (&self.host, self.authority()) {
            dst.extend_from_slice(b"host: ");
            dst.extend_from_slice(a);
            dst.extend_from_slice(b"\r\n");
        }
        for (name, value) in self.fields.iter() {
            dst.extend_from_slice(name);
            dst.extend_from_slice(b": ");
            dst.extend_from_slice(value);
            dst.extend_from_slice(b"\r\n");
        }
        dst.extend_from_slice(b"\r\n");
    }
}

/// Where a request's parts lie in its buffer (see [`Request::parts`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Parts {
    pub method: Range<usize>,
    /// `:path`, or CONNECT's `:authority`.
    pub target: Option<Range<usize>>,
    /// `host`'s name and value when `:authority` stands for it.
    pub host: Option<(Range<usize>, Range<usize>)>,
}

/// Whether `bad_word` finds a byte in `s`, 8 bytes at a time (the last 8 may overlap
/// bytes already seen); `bad` is the same test for one byte, for strings under 8 bytes.
#[inline(always)]
fn any_byte(s: &[u8], bad_word: impl Fn(u64) -> bool) -> bool {
    let word = |c: &[u8]| u64::from_le_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]);
    if s.len() < 8 {
        // Padded with a byte no rule refuses.
        let mut w = [b'a'; 8];
        w[..s.len()].copy_from_slice(s);
        return bad_word(u64::from_le_bytes(w));
    }
    let mut chunks = s.chunks_exact(8);
    let mut acc = false;
    for c in &mut chunks {
        acc |= bad_word(word(c));
    }
    acc | (!chunks.remainder().is_empty() && bad_word(word(&s[s.len() - 8..])))
}

/// Each byte of a word set to `b`.
const fn splat(b: u8) -> u64 {
    u64::from_le_bytes([b; 8])
}

const HIGH: u64 = splat(0x80);

/// Whether a byte of `w` is 0 (exact as a yes or no: a borrow only runs past a zero byte).
#[inline(always)]
fn has_zero(w: u64) -> bool {
    w.wrapping_sub(splat(1)) & !w & HIGH != 0
}

/// Whether a byte of `w` is below `n` (n at most 128).
#[inline(always)]
fn has_below(w: u64, n: u8) -> bool {
    w.wrapping_sub(splat(n)) & !w & HIGH != 0
}

/// Whether a byte of `w` is above `n` (n below 128), bytes of 128 and more included: no
/// carry crosses bytes under 128, and a byte of 128 or more has its high bit already.
#[inline(always)]
fn has_above(w: u64, n: u8) -> bool {
    (w.wrapping_add(splat(127 - n)) | w) & HIGH != 0
}

/// Whether a field name holds a byte RFC 9113, 8.2.1 forbids: controls, space, uppercase,
/// DEL, non-ASCII, and a colon (a pseudo-header's first one is taken off before).
pub(super) fn bad_name(name: &[u8]) -> bool {
    let bad_word = |w: u64| {
        has_below(w, 0x21) || has_above(w, 0x7e) || has_zero(w ^ splat(b':')) || {
            // Every byte is in 0x21..=0x7e now, so these sums carry into no other byte:
            // the high bit says ">= 'A'" in the first and "> 'Z'" in the second.
            let from_a = w.wrapping_add(splat(0x80 - b'A'));
            let past_z = w.wrapping_add(splat(0x80 - b'Z' - 1));
            from_a & !past_z & HIGH != 0
        }
    };
    any_byte(name, bad_word)
}

/// A field value's rules (RFC 9113, 8.2.1): no NUL, CR or LF; no space or tab at either end.
pub(super) fn check_value(name: &[u8], value: &[u8]) -> Result<(), Malformed> {
    let bad_end = |b: Option<&u8>| matches!(b, Some(b' ' | b'\t'));
    let bad_word = |w: u64| has_zero(w) | has_zero(w ^ splat(b'\r')) | has_zero(w ^ splat(b'\n'));
    if bad_end(value.first()) || bad_end(value.last()) || any_byte(value, bad_word) {
        return Err(invalid_value(name, value));
    }
    Ok(())
}

fn invalid_value(name: &[u8], value: &[u8]) -> Malformed {
    Malformed::InvalidValue {
        name: name.into(),
        value: value.into(),
    }
}

/// A regular field's name and the fields HTTP/2 forbids (RFC 9113, 8.2.2).
pub(crate) fn check_regular(name: &[u8], value: &[u8]) -> Result<(), Malformed> {
    if name.is_empty() || bad_name(name) {
        return Err(Malformed::InvalidName(name.into()));
    }
    check_forbidden(name, value)?;
    check_value(name, value)
}

/// The fields HTTP/2 forbids (RFC 9113, 8.2.2), for a field whose characters are known
/// good ([`chars_ok`]).
pub(crate) fn check_forbidden(name: &[u8], value: &[u8]) -> Result<(), Malformed> {
    match name {
        b"connection" | b"keep-alive" | b"proxy-connection" | b"transfer-encoding" | b"upgrade" => {
            Err(Malformed::ConnectionSpecific(name.into()))
        }
        b"te" if value != b"trailers" => Err(invalid_value(name, value)),
        _ => Ok(()),
    }
}

/// Whether a field keeps RFC 9113, 8.2.1's character rules as the checks above see them:
/// a pseudo-header's value, or a regular field's name and value. The HPACK decoder asks
/// this once per entry it stores ([`crate::hpack::Field::checked`]).
pub(crate) fn chars_ok(name: &[u8], value: &[u8]) -> bool {
    let name_ok = match name.strip_prefix(b":") {
        Some(_) => true,
        None => !name.is_empty() && !bad_name(name),
    };
    name_ok && check_value(name, value).is_ok()
}

/// Builds a [`Request`] from the fields of one header block, checking each as it comes.
pub(crate) struct RequestBuilder {
    fields: Fields,
    method: Option<Range<u32>>,
    scheme: Option<Range<u32>>,
    authority: Option<Range<u32>>,
    path: Option<Range<u32>>,
    host: Option<Range<u32>>,
    content_length: Option<u64>,
    regular_seen: bool,
}

impl RequestBuilder {
    /// A builder for a block of `block_len` encoded bytes.
    pub fn new(block_len: usize, hint: Hint, spare: Option<Fields>) -> RequestBuilder {
        RequestBuilder {
            fields: Fields::with_capacity(block_len, hint, spare),
            method: None,
            scheme: None,
            authority: None,
            path: None,
            host: None,
            content_length: None,
            regular_seen: false,
        }
    }

    pub fn field(&mut self, f: Field<'_>) -> Result<(), Malformed> {
        if let Some(pseudo) = f.name.strip_prefix(b":") {
            if self.regular_seen {
                return Err(Malformed::PseudoAfterRegular(f.name.into()));
            }
            if !f.checked {
                check_value(f.name, f.value)?;
            }
            let (slot, name) = match pseudo {
                b"method" => (&mut self.method, ":method"),
                b"scheme" => (&mut self.scheme, ":scheme"),
                b"authority" => (&mut self.authority, ":authority"),
                b"path" => (&mut self.path, ":path"),
                _ => return Err(Malformed::UnknownPseudo(f.name.into())),
            };
            if slot.is_some() {
                return Err(Malformed::DuplicatePseudo(name));
            }
            *slot = Some(self.fields.push_value(f.value));
            return Ok(());
        }
        self.regular_seen = true;
        match f.checked {
            true => check_forbidden(f.name, f.value)?,
            false => check_regular(f.name, f.value)?,
        }
        if f.name == b"content-length" {
            let n = parse_length(f.value)?;
            if let Some(previous) = self.content_length.filter(|&m| m != n) {
                return Err(Malformed::DuplicateContentLength { value: n, previous });
            }
            self.content_length = Some(n);
        }
        let value = self.fields.push(f.name, f.value);
        if f.name == b"host" && self.host.is_none() {
            self.host = Some(value);
        }
        Ok(())
    }

    /// The host so far: the first `host` field, else `:authority` (for the log line of a
    /// request refused: nginx names the host it had when it refused).
    pub fn host(&self) -> Option<&[u8]> {
        let r = self.host.as_ref().or(self.authority.as_ref())?;
        // (None once `finish` took the fields.)
        self.fields.buf.get(r.start as usize..r.end as usize)
    }

    /// The request, once the block is over: the pseudo-headers RFC 9113, 8.3 requires.
    /// Refused, the builder is still there to say [`RequestBuilder::host`].
    pub fn finish(&mut self) -> Result<Request, Malformed> {
        use Malformed::{EmptyPseudo, NoPseudo};
        let method = self.method.clone().ok_or(NoPseudo(":method"))?;
        let connect = self.fields.slice(&method) == b"CONNECT";
        if self.fields.slice(&method).is_empty() {
            return Err(EmptyPseudo(":method"));
        }
        if connect {
            // 8.5: :authority only.
            if self.scheme.is_some() || self.path.is_some() {
                return Err(Malformed::ConnectWithPath);
            }
            if self.authority.is_none() {
                return Err(Malformed::ConnectWithoutAuthority);
            }
        } else {
            let scheme = self.scheme.as_ref().ok_or(NoPseudo(":scheme"))?;
            if self.fields.slice(scheme).is_empty() {
                return Err(EmptyPseudo(":scheme"));
            }
            let path = self
                .fields
                .slice(self.path.as_ref().ok_or(NoPseudo(":path"))?);
            let options = self.fields.slice(&method) == b"OPTIONS";
            match path.first() {
                None => return Err(EmptyPseudo(":path")),
                Some(b'/') => {}
                Some(b'*') if options && path.len() == 1 => {}
                Some(_) => return Err(Malformed::InvalidPath(path.into())),
            }
        }
        if let (Some(a), Some(h)) = (&self.authority, &self.host) {
            let (a, h) = (self.fields.slice(a), self.fields.slice(h));
            if !a.eq_ignore_ascii_case(h) {
                return Err(Malformed::DuplicateHost {
                    host: h.into(),
                    authority: a.into(),
                });
            }
        }
        self.fields.join_cookies();
        Ok(Request {
            fields: std::mem::take(&mut self.fields),
            method,
            scheme: self.scheme.clone(),
            authority: self.authority.clone(),
            path: self.path.clone(),
            host: self.host.clone(),
            content_length: self.content_length,
        })
    }
}

/// Builds trailers: regular fields only (RFC 9113, 8.1).
pub(crate) struct TrailersBuilder(Fields);

impl TrailersBuilder {
    pub fn new(block_len: usize, spare: Option<Fields>) -> TrailersBuilder {
        TrailersBuilder(Fields::with_capacity(block_len, Hint::default(), spare))
    }

    pub fn field(&mut self, f: Field<'_>) -> Result<(), Malformed> {
        if f.name.first() == Some(&b':') {
            return Err(Malformed::PseudoInTrailers(f.name.into()));
        }
        // (A field from the tables kept its characters' rules when stored: the request's
        // head skips them too.)
        match f.checked {
            true => check_forbidden(f.name, f.value)?,
            false => check_regular(f.name, f.value)?,
        }
        self.0.push(f.name, f.value);
        Ok(())
    }

    pub fn finish(mut self) -> Fields {
        self.0.join_cookies();
        self.0
    }
}

/// A `content-length` value: digits only, and a number that fits.
pub(crate) fn parse_length(v: &[u8]) -> Result<u64, Malformed> {
    if v.is_empty() || v.len() > 19 {
        return Err(Malformed::InvalidContentLength);
    }
    v.iter().try_fold(0u64, |n, &b| match b {
        b'0'..=b'9' => Ok(n * 10 + (b - b'0') as u64),
        _ => Err(Malformed::InvalidContentLength),
    })
}
