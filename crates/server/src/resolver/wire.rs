//! DNS messages as the resolver needs them (RFC 1035): a query for one name and type, and the
//! addresses an answer gives for it.
//!
//! Pure: bytes in, bytes out. An answer is untrusted input: every length is checked, a name's
//! compression pointers may only point backwards and are followed a bounded number of times,
//! and an answer that does not echo the query (its id, its question) is not an answer.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// `A`.
pub const TYPE_A: u16 = 1;
/// `CNAME`.
pub const TYPE_CNAME: u16 = 5;
/// `AAAA`.
pub const TYPE_AAAA: u16 = 28;
const CLASS_IN: u16 = 1;

/// The query for `name` (without a trailing dot) and `qtype`, recursion desired.
/// `None` when the name cannot be written (an empty label, a label over 63 bytes, a name over
/// 253 bytes).
pub fn query(id: u16, name: &str, qtype: u16) -> Option<Vec<u8>> {
    let name = name.strip_suffix('.').unwrap_or(name);
    if name.is_empty() || name.len() > 253 {
        return None;
    }
    let mut out = Vec::with_capacity(18 + name.len());
    out.extend_from_slice(&id.to_be_bytes());
    out.extend_from_slice(&[0x01, 0x00]); // RD
    out.extend_from_slice(&[0, 1, 0, 0, 0, 0, 0, 0]); // QDCOUNT 1
    for label in name.split('.') {
        if label.is_empty() || label.len() > 63 {
            return None;
        }
        out.push(label.len() as u8);
        out.extend_from_slice(label.as_bytes());
    }
    out.push(0);
    out.extend_from_slice(&qtype.to_be_bytes());
    out.extend_from_slice(&CLASS_IN.to_be_bytes());
    Some(out)
}

/// What an answer to one of our queries says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Answer {
    /// The response code (0: no error; 3: no such name).
    pub rcode: u8,
    /// TC: the answer did not fit a datagram; ask again over TCP.
    pub truncated: bool,
    /// The addresses of the asked type, in the answer's order.
    pub addrs: Vec<IpAddr>,
    /// The smallest TTL among the records used (seconds); `None` when there were none.
    pub ttl: Option<u32>,
}

/// Why bytes are not an answer to our query.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Malformed {
    /// Another query's answer (id, question), or not an answer at all: ignored, as nginx
    /// ignores it.
    NotOurs,
    /// Cut short or inconsistent.
    Short,
}

/// Reads an answer to `query(id, name, qtype)`. Records of the asked type are taken whatever
/// name owns them, so that an answer which follows a CNAME chain (the usual case) gives the
/// chain's addresses.
pub fn parse(buf: &[u8], id: u16, name: &str, qtype: u16) -> Result<Answer, Malformed> {
    if buf.len() < 12 {
        return Err(Malformed::Short);
    }
    if u16::from_be_bytes([buf[0], buf[1]]) != id || buf[2] & 0x80 == 0 {
        return Err(Malformed::NotOurs);
    }
    let truncated = buf[2] & 0x02 != 0;
    let rcode = buf[3] & 0x0f;
    let qd = u16::from_be_bytes([buf[4], buf[5]]);
    let an = u16::from_be_bytes([buf[6], buf[7]]);
    if qd != 1 {
        return Err(Malformed::NotOurs);
    }
    let mut at = 12;
    let mut owner = String::new();
    at = read_name(buf, at, &mut owner)?;
    let want = name.strip_suffix('.').unwrap_or(name);
    let fixed = buf.get(at..at + 4).ok_or(Malformed::Short)?;
    if !owner.eq_ignore_ascii_case(want)
        || u16::from_be_bytes([fixed[0], fixed[1]]) != qtype
        || u16::from_be_bytes([fixed[2], fixed[3]]) != CLASS_IN
    {
        return Err(Malformed::NotOurs);
    }
    at += 4;
    let mut addrs = Vec::new();
    let mut ttl: Option<u32> = None;
    if truncated {
        return Ok(Answer {
            rcode,
            truncated,
            addrs,
            ttl,
        });
    }
    for _ in 0..an {
        owner.clear();
        at = read_name(buf, at, &mut owner)?;
        let f = buf.get(at..at + 10).ok_or(Malformed::Short)?;
        let rtype = u16::from_be_bytes([f[0], f[1]]);
        let class = u16::from_be_bytes([f[2], f[3]]);
        let rttl = u32::from_be_bytes([f[4], f[5], f[6], f[7]]);
        let len = u16::from_be_bytes([f[8], f[9]]) as usize;
        at += 10;
        let data = buf.get(at..at + len).ok_or(Malformed::Short)?;
        at += len;
        if class != CLASS_IN {
            continue;
        }
        let addr = match (rtype, len) {
            (TYPE_A, 4) if qtype == TYPE_A => {
                IpAddr::V4(Ipv4Addr::new(data[0], data[1], data[2], data[3]))
            }
            (TYPE_AAAA, 16) if qtype == TYPE_AAAA => {
                let mut o = [0u8; 16];
                o.copy_from_slice(data);
                IpAddr::V6(Ipv6Addr::from(o))
            }
            (TYPE_A | TYPE_AAAA, _) if rtype == qtype => return Err(Malformed::Short),
            _ => continue,
        };
        // A TTL with its top bit set is read as 0 (RFC 2181).
        let rttl = if rttl > i32::MAX as u32 { 0 } else { rttl };
        ttl = Some(ttl.map_or(rttl, |t| t.min(rttl)));
        if !addrs.contains(&addr) {
            addrs.push(addr);
        }
    }
    Ok(Answer {
        rcode,
        truncated,
        addrs,
        ttl,
    })
}

/// Reads a (possibly compressed) name at `at` into `out` (labels joined by dots); returns
/// where the name ends in the message.
fn read_name(buf: &[u8], mut at: usize, out: &mut String) -> Result<usize, Malformed> {
    let mut end = None;
    let mut jumps = 0;
    loop {
        let len = *buf.get(at).ok_or(Malformed::Short)? as usize;
        match len & 0xc0 {
            0x00 => {
                if len == 0 {
                    return Ok(end.unwrap_or(at + 1));
                }
                let label = buf.get(at + 1..at + 1 + len).ok_or(Malformed::Short)?;
                if !out.is_empty() {
                    out.push('.');
                }
                out.extend(label.iter().map(|&c| c as char));
                if out.len() > 255 {
                    return Err(Malformed::Short);
                }
                at += 1 + len;
            }
            0xc0 => {
                let lo = *buf.get(at + 1).ok_or(Malformed::Short)? as usize;
                let target = ((len & 0x3f) << 8) | lo;
                // Backwards only, and a bounded number of times: no loop.
                if target >= at || jumps > 32 {
                    return Err(Malformed::Short);
                }
                jumps += 1;
                end.get_or_insert(at + 2);
                at = target;
            }
            _ => return Err(Malformed::Short),
        }
    }
}

/// nginx's words for a resolver's result code (`ngx_resolver_strerror`).
pub fn strerror(code: u32) -> &'static str {
    match code {
        1 => "Format error",
        2 => "Server failure",
        3 => "Host not found",
        4 => "Unimplemented",
        5 => "Operation refused",
        110 => "Operation timed out",
        _ => "Unknown error",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An answer to `q` with `records` (type, ttl, data), the name compressed as servers do.
    fn answer(q: &[u8], rcode: u8, records: &[(u16, u32, Vec<u8>)]) -> Vec<u8> {
        let mut a = q.to_vec();
        a[2] |= 0x80;
        a[3] = 0x80 | rcode;
        a[7] = records.len() as u8;
        for (t, ttl, data) in records {
            a.extend_from_slice(&[0xc0, 12]);
            a.extend_from_slice(&t.to_be_bytes());
            a.extend_from_slice(&1u16.to_be_bytes());
            a.extend_from_slice(&ttl.to_be_bytes());
            a.extend_from_slice(&(data.len() as u16).to_be_bytes());
            a.extend_from_slice(data);
        }
        a
    }

    #[test]
    fn query_is_written_as_labels() {
        let q = query(0x1234, "a.example.test", TYPE_A).unwrap();
        assert_eq!(&q[..4], &[0x12, 0x34, 0x01, 0x00]);
        assert_eq!(&q[12..], b"\x01a\x07example\x04test\x00\x00\x01\x00\x01");
        assert!(query(1, "a..b", TYPE_A).is_none());
        assert!(query(1, &"x".repeat(64), TYPE_A).is_none());
        assert!(query(1, "", TYPE_A).is_none());
    }

    #[test]
    fn addresses_and_the_smallest_ttl() {
        let q = query(7, "b.test", TYPE_A).unwrap();
        let a = answer(
            &q,
            0,
            &[
                (TYPE_CNAME, 5, b"\x01c\xc0\x0e".to_vec()),
                (TYPE_A, 30, vec![127, 0, 0, 2]),
                (TYPE_A, 20, vec![127, 0, 0, 3]),
            ],
        );
        let got = parse(&a, 7, "B.test", TYPE_A).unwrap();
        assert_eq!(got.rcode, 0);
        assert_eq!(
            got.addrs,
            vec![
                "127.0.0.2".parse::<IpAddr>().unwrap(),
                "127.0.0.3".parse().unwrap()
            ]
        );
        assert_eq!(got.ttl, Some(20));
        let aaaa = query(8, "b.test", TYPE_AAAA).unwrap();
        let mut v6 = vec![0u8; 16];
        v6[15] = 1;
        let got = parse(
            &answer(&aaaa, 0, &[(TYPE_AAAA, 9, v6)]),
            8,
            "b.test",
            TYPE_AAAA,
        );
        assert_eq!(got.unwrap().addrs, vec!["::1".parse::<IpAddr>().unwrap()]);
    }

    #[test]
    fn not_ours_and_broken_answers() {
        let q = query(7, "b.test", TYPE_A).unwrap();
        let a = answer(&q, 3, &[]);
        assert_eq!(parse(&a, 7, "b.test", TYPE_A).unwrap().rcode, 3);
        assert_eq!(parse(&a, 8, "b.test", TYPE_A), Err(Malformed::NotOurs));
        assert_eq!(parse(&a, 7, "c.test", TYPE_A), Err(Malformed::NotOurs));
        assert_eq!(parse(&a, 7, "b.test", TYPE_AAAA), Err(Malformed::NotOurs));
        assert_eq!(parse(&q, 7, "b.test", TYPE_A), Err(Malformed::NotOurs));
        // A record cut short, a pointer to itself, a wrong address length.
        let full = answer(&q, 0, &[(TYPE_A, 1, vec![1, 2, 3, 4])]);
        for cut in 12..full.len() {
            assert!(parse(&full[..cut], 7, "b.test", TYPE_A).is_err(), "{cut}");
        }
        let mut looped = full.clone();
        let at = q.len();
        looped[at] = 0xc0;
        looped[at + 1] = at as u8;
        assert_eq!(parse(&looped, 7, "b.test", TYPE_A), Err(Malformed::Short));
        let bad = answer(&q, 0, &[(TYPE_A, 1, vec![1, 2, 3])]);
        assert_eq!(parse(&bad, 7, "b.test", TYPE_A), Err(Malformed::Short));
        // Truncated: no records read, the flag said.
        let mut tc = full;
        tc[2] |= 0x02;
        assert!(parse(&tc, 7, "b.test", TYPE_A).unwrap().truncated);
    }
}
