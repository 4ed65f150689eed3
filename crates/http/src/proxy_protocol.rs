//! The PROXY protocol header a load balancer sends before its client's bytes (HAProxy's
//! specification, versions 1 and 2), read as nginx 1.22 reads it on a `listen ... proxy_protocol`
//! address, and its TLVs as nginx 1.23.2+ exposes them (`$proxy_protocol_tlv_*`).
//!
//! [`parse`] takes the first bytes of a connection and says: a whole header (what it tells and
//! how many bytes it took), not enough bytes yet, or broken (with the reason nginx logs). It
//! never looks past `max` bytes: a header that cannot end within them is broken, so a reader
//! never buffers more than that.
//!
//! What nginx accepts, checked against nginx 1.22: version 1 is `PROXY TCP4|TCP6 SRC DST SPORT
//! DPORT\r\n` with single spaces, addresses kept as the text sent (only `0-9a-fA-F.:` allowed,
//! not checked to be addresses), ports of at most 65535 (0 and leading zeros accepted); `PROXY
//! UNKNOWN` followed by anything up to the first CRLF carries no addresses. Version 2 carries
//! addresses only for the PROXY command over TCP on IPv4 or IPv6; LOCAL, UDP, unix sockets and
//! unknown families are skipped whole (their bytes consumed, nothing kept); an address block
//! too short for its family closes the connection without a log line, as nginx does.
//!
//! Unlike nginx, a header split across reads is waited for: nginx parses only what its first
//! read returned, so whether a split header is "broken" there depends on the network.

use std::fmt::Write as _;
use std::net::{Ipv4Addr, Ipv6Addr};

/// The version 2 signature.
pub const V2_SIGNATURE: &[u8; 12] = b"\r\n\r\n\0\r\nQUIT\n";

const V1_PREFIX: &[u8] = b"PROXY ";

/// What the first bytes of a connection are.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Parsed {
    /// A header, not whole yet: read more (nothing so far is wrong).
    Incomplete,
    /// A whole header of `len` bytes; `header` is `None` when it carries no addresses
    /// (`UNKNOWN`, LOCAL, a family nginx does not read).
    Done { header: Option<Header>, len: usize },
    /// Not a header nginx accepts: close the connection.
    Broken(Broken),
}

/// Why a header was refused, as nginx logs it (see [`Broken::message`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Broken {
    /// `broken header: "..."`: text that is not a version 1 header, or bytes that begin
    /// neither version.
    Header,
    /// `unknown PROXY protocol version: N`.
    Version(u8),
    /// `header is too large`: a version 2 length past the reader's limit.
    TooLarge,
    /// A version 2 address block shorter than its family's: nginx closes without a word.
    Silent,
}

impl Broken {
    /// The error-log line's message for a connection whose first bytes were `read`; `None`
    /// when nginx logs nothing.
    pub fn message(&self, read: &[u8]) -> Option<String> {
        match self {
            Broken::Header => Some(format!("broken header: \"{}\"", crate::lossy(read))),
            Broken::Version(v) => Some(format!("unknown PROXY protocol version: {v}")),
            Broken::TooLarge => Some("header is too large".to_string()),
            Broken::Silent => None,
        }
    }
}

/// What a header tells of the connection it came before.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Header {
    /// The client's address as text (`$proxy_protocol_addr`): version 1's as sent, version
    /// 2's formatted.
    pub src_addr: String,
    /// The address the client connected to (`$proxy_protocol_server_addr`).
    pub dst_addr: String,
    /// 0 when the header said 0 (`$proxy_protocol_port` is then empty).
    pub src_port: u16,
    pub dst_port: u16,
    /// Version 2's TLVs, as they came (empty for version 1).
    pub tlvs: Vec<u8>,
}

/// Reads a PROXY protocol header at the start of `buf`, looking at no more than `max` bytes.
pub fn parse(buf: &[u8], max: usize) -> Parsed {
    let buf = &buf[..buf.len().min(max)];
    let limit_reached = buf.len() >= max;
    let out = if buf.first() == Some(&V2_SIGNATURE[0]) {
        parse_v2(buf, max)
    } else {
        parse_v1(buf)
    };
    match out {
        Parsed::Incomplete if limit_reached => Parsed::Broken(Broken::Header),
        other => other,
    }
}

/// Whether `buf` is a beginning of `whole` (or all of it and more).
fn begins(buf: &[u8], whole: &[u8]) -> Option<bool> {
    let n = buf.len().min(whole.len());
    if buf[..n] != whole[..n] {
        return None;
    }
    Some(buf.len() >= whole.len())
}

/// Version 1, after which `i` is the next unread byte.
struct V1<'a> {
    buf: &'a [u8],
    i: usize,
}

/// A step of the version 1 reader: `Err(None)` when more bytes are needed.
type Step<T> = Result<T, Option<Broken>>;

impl V1<'_> {
    /// Bytes up to `end` (not included), each accepted by `ok`; at least one.
    fn field(&mut self, ok: fn(u8) -> bool, end: u8) -> Step<std::ops::Range<usize>> {
        let start = self.i;
        loop {
            let Some(&c) = self.buf.get(self.i) else {
                return Err(None);
            };
            if c == end && self.i > start {
                self.i += 1;
                return Ok(start..self.i - 1);
            }
            if !ok(c) {
                return Err(Some(Broken::Header));
            }
            self.i += 1;
        }
    }

    fn port(&mut self, end: u8) -> Step<u16> {
        let r = self.field(|c| c.is_ascii_digit(), end)?;
        let mut n: u32 = 0;
        for &c in &self.buf[r] {
            n = n * 10 + u32::from(c - b'0');
            if n > 65535 {
                return Err(Some(Broken::Header));
            }
        }
        Ok(n as u16)
    }

    fn text(&self, r: std::ops::Range<usize>) -> String {
        // Only ASCII got through `field`.
        String::from_utf8_lossy(&self.buf[r]).into_owned()
    }
}

fn is_addr_char(c: u8) -> bool {
    c.is_ascii_hexdigit() || c == b'.' || c == b':'
}

fn parse_v1(buf: &[u8]) -> Parsed {
    match begins(buf, V1_PREFIX) {
        None => return Parsed::Broken(Broken::Header),
        Some(false) => return Parsed::Incomplete,
        Some(true) => {}
    }
    let rest = &buf[V1_PREFIX.len()..];
    if let Some(done) = begins(rest, b"UNKNOWN") {
        if !done {
            return Parsed::Incomplete;
        }
        // Anything up to the first CRLF.
        let from = V1_PREFIX.len() + 7;
        return match memchr::memmem::find(&buf[from..], b"\r\n") {
            Some(at) => Parsed::Done {
                header: None,
                len: from + at + 2,
            },
            None => Parsed::Incomplete,
        };
    }
    let proto = match (begins(rest, b"TCP4 "), begins(rest, b"TCP6 ")) {
        (Some(true), _) | (_, Some(true)) => V1_PREFIX.len() + 5,
        (Some(false), _) | (_, Some(false)) => return Parsed::Incomplete,
        (None, None) => return Parsed::Broken(Broken::Header),
    };
    let mut r = V1 { buf, i: proto };
    let fields = (|| -> Step<Header> {
        let src = r.field(is_addr_char, b' ')?;
        let dst = r.field(is_addr_char, b' ')?;
        let src_port = r.port(b' ')?;
        let dst_port = r.port(b'\r')?;
        match r.buf.get(r.i) {
            None => return Err(None),
            Some(b'\n') => r.i += 1,
            Some(_) => return Err(Some(Broken::Header)),
        }
        Ok(Header {
            src_addr: r.text(src),
            dst_addr: r.text(dst),
            src_port,
            dst_port,
            tlvs: Vec::new(),
        })
    })();
    match fields {
        Ok(h) => Parsed::Done {
            header: Some(h),
            len: r.i,
        },
        Err(None) => Parsed::Incomplete,
        Err(Some(b)) => Parsed::Broken(b),
    }
}

/// Version 2's command that carries addresses, and the families nginx reads.
const CMD_PROXY: u8 = 1;
const TCP4: u8 = 0x11;
const TCP6: u8 = 0x21;

fn parse_v2(buf: &[u8], max: usize) -> Parsed {
    match begins(buf, V2_SIGNATURE) {
        None => return Parsed::Broken(Broken::Header),
        Some(false) => return Parsed::Incomplete,
        Some(true) => {}
    }
    let Some(&ver_cmd) = buf.get(12) else {
        return Parsed::Incomplete;
    };
    if ver_cmd >> 4 != 2 {
        return Parsed::Broken(Broken::Version(ver_cmd >> 4));
    }
    if buf.len() < 16 {
        return Parsed::Incomplete;
    }
    let body_len = usize::from(u16::from_be_bytes([buf[14], buf[15]]));
    let len = 16 + body_len;
    if len > max {
        return Parsed::Broken(Broken::TooLarge);
    }
    if buf.len() < len {
        return Parsed::Incomplete;
    }
    let body = &buf[16..len];
    let skipped = Parsed::Done { header: None, len };
    if ver_cmd & 0x0f != CMD_PROXY {
        return skipped;
    }
    let (addrs, header) = match buf[13] {
        TCP4 => {
            let Some(a) = body.get(..12) else {
                return Parsed::Broken(Broken::Silent);
            };
            let ip = |b: &[u8]| Ipv4Addr::new(b[0], b[1], b[2], b[3]).to_string();
            (12, (ip(&a[0..4]), ip(&a[4..8]), &a[8..12]))
        }
        TCP6 => {
            let Some(a) = body.get(..36) else {
                return Parsed::Broken(Broken::Silent);
            };
            let ip = |b: &[u8]| {
                let mut o = [0u8; 16];
                o.copy_from_slice(b);
                Ipv6Addr::from(o).to_string()
            };
            (36, (ip(&a[0..16]), ip(&a[16..32]), &a[32..36]))
        }
        _ => return skipped,
    };
    let (src_addr, dst_addr, ports) = header;
    Parsed::Done {
        header: Some(Header {
            src_addr,
            dst_addr,
            src_port: u16::from_be_bytes([ports[0], ports[1]]),
            dst_port: u16::from_be_bytes([ports[2], ports[3]]),
            tlvs: body[addrs..].to_vec(),
        }),
        len,
    }
}

/// A `$proxy_protocol_tlv_NAME` name, as nginx 1.23.2+ reads it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TlvName {
    /// A top-level TLV by type: `alpn` (0x01), `authority` (0x02), `unique_id` (0x05),
    /// `ssl` (0x20), `netns` (0x30), or `0xNN`.
    Type(u8),
    /// A sub-TLV of the SSL TLV: `ssl_version` (0x21), `ssl_cn` (0x22), `ssl_cipher`
    /// (0x23), `ssl_sig_alg` (0x24), `ssl_key_alg` (0x25), or `ssl_0xNN`.
    Ssl(u8),
    /// `ssl_verify`: the SSL TLV's verification result, in decimal.
    SslVerify,
}

const NAMES: &[(&str, u8)] = &[
    ("alpn", 0x01),
    ("authority", 0x02),
    ("unique_id", 0x05),
    ("ssl", 0x20),
    ("netns", 0x30),
];

const SSL_NAMES: &[(&str, u8)] = &[
    ("version", 0x21),
    ("cn", 0x22),
    ("cipher", 0x23),
    ("sig_alg", 0x24),
    ("key_alg", 0x25),
];

/// `0xNN` (one or two hex digits, either case).
fn hex_type(s: &str) -> Option<u8> {
    let h = s.strip_prefix("0x").or_else(|| s.strip_prefix("0X"))?;
    if h.is_empty() || h.len() > 2 {
        return None;
    }
    u8::from_str_radix(h, 16).ok()
}

impl TlvName {
    /// Reads a name (the part after `proxy_protocol_tlv_`, any case); `None` for a name
    /// nginx does not know.
    pub fn parse(name: &str) -> Option<TlvName> {
        let low = name.to_ascii_lowercase();
        if low == "ssl_verify" {
            return Some(TlvName::SslVerify);
        }
        let find = |table: &[(&str, u8)], n: &str| {
            table
                .iter()
                .find(|(k, _)| *k == n)
                .map(|&(_, t)| t)
                .or_else(|| hex_type(n))
        };
        if let Some(t) = find(NAMES, &low) {
            return Some(TlvName::Type(t));
        }
        let sub = low.strip_prefix("ssl_")?;
        find(SSL_NAMES, sub).map(TlvName::Ssl)
    }
}

/// The value of the first TLV of type `t` in a TLV list; a list cut short ends the search.
pub fn find_tlv(mut tlvs: &[u8], t: u8) -> Option<&[u8]> {
    while tlvs.len() >= 3 {
        let len = usize::from(u16::from_be_bytes([tlvs[1], tlvs[2]]));
        let value = tlvs.get(3..3 + len)?;
        if tlvs[0] == t {
            return Some(value);
        }
        tlvs = &tlvs[3 + len..];
    }
    None
}

/// The SSL TLV's type.
const SSL: u8 = 0x20;

impl Header {
    /// Appends the value of a TLV to `out` (bytes that are not UTF-8 replaced); false when
    /// the header has no such TLV.
    pub fn tlv(&self, name: TlvName, out: &mut String) -> bool {
        let value = match name {
            TlvName::Type(t) => find_tlv(&self.tlvs, t),
            TlvName::Ssl(t) => find_tlv(&self.tlvs, SSL)
                .and_then(|ssl| ssl.get(5..))
                .and_then(|subs| find_tlv(subs, t)),
            TlvName::SslVerify => {
                let Some(v) = find_tlv(&self.tlvs, SSL).and_then(|ssl| ssl.get(1..5)) else {
                    return false;
                };
                let _ = write!(out, "{}", u32::from_be_bytes([v[0], v[1], v[2], v[3]]));
                return true;
            }
        };
        match value {
            Some(v) => {
                out.push_str(&crate::lossy(v));
                true
            }
            None => false,
        }
    }
}

#[cfg(test)]
#[path = "proxy_protocol_tests.rs"]
mod tests;
