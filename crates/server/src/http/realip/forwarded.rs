//! Client addresses as nginx reads them from text: `addr[:port]` in a header
//! (`ngx_parse_addr_port`), the trusted-address lists of `set_real_ip_from` and geo's `proxy`
//! (`ngx_cidr_match`), and the walk along `X-Forwarded-For` (`ngx_http_get_forwarded_addr`)
//! that realip and geo share.
//!
//! Pure code, no request: the callers hand in the header values. The walk costs one pass over
//! the values it reads and nothing more, however long the header; a value that is not an
//! address ends it.
//!
//! nginx's quirks are kept, each checked against nginx 1.22: an address of the list is the
//! text between separators (`,` and space), read from the end, where a value's first byte is
//! never taken for a separator (`,1.1.1.1` is no address, `,,1.1.1.1` is 1.1.1.1); `[::1]`
//! without a port is no address; a port must be 1..65535; an IPv4-mapped IPv6 address is
//! trusted by the IPv4 entries only.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use crate::http::access::{parse_ipv4, parse_ipv6};

/// An address as `ngx_parse_addr` reads one: IPv4 as `ngx_inet_addr` does (`1..2.3` is
/// 1.0.2.3, 255.255.255.255 refused), else IPv6.
pub fn parse_addr(text: &[u8]) -> Option<IpAddr> {
    if let Some(a) = parse_ipv4(text) {
        return Some(IpAddr::V4(Ipv4Addr::from(a)));
    }
    parse_ipv6(text).map(|a| IpAddr::V6(Ipv6Addr::from(a)))
}

/// An address with an optional port, as `ngx_parse_addr_port` reads it: `[v6]:port`,
/// `addr:port` when there is exactly one colon, else the whole text as an address (port 0).
pub fn parse_addr_port(text: &[u8]) -> Option<SocketAddr> {
    let (addr, port) = if text.first() == Some(&b'[') {
        match memchr::memchr(b']', text) {
            Some(end) if text.get(end + 1) == Some(&b':') => {
                (&text[1..end], Some(&text[end + 2..]))
            }
            _ => (text, None),
        }
    } else {
        match memchr::memchr(b':', text) {
            Some(c) if memchr::memchr(b':', &text[c + 1..]).is_none() => {
                (&text[..c], Some(&text[c + 1..]))
            }
            _ => (text, None),
        }
    };
    let port = match port {
        None => 0,
        Some(p) => parse_port(p)?,
    };
    Some(SocketAddr::new(parse_addr(addr)?, port))
}

/// A port as `ngx_atoi` reads it, 1..65535.
fn parse_port(p: &[u8]) -> Option<u16> {
    if p.is_empty() || !p.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let mut n: u32 = 0;
    for &c in p {
        n = n * 10 + u32::from(c - b'0');
        if n > 65535 {
            return None;
        }
    }
    (n > 0).then_some(n as u16)
}

/// One trusted address or network.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cidr {
    V4 {
        addr: u32,
        mask: u32,
    },
    V6 {
        addr: u128,
        mask: u128,
    },
    /// `unix:`: every unix-domain socket.
    Unix,
}

impl Cidr {
    /// `addr[/bits]` as `ngx_ptocidr` reads it, host bits masked: the network, and whether
    /// there were host bits (nginx warns `low address bits of X are meaningless`).
    pub fn parse(text: &str) -> Option<(Cidr, bool)> {
        let (addr, bits) = match text.split_once('/') {
            Some((a, b)) => (a, Some(crate::conf::parse_number(b)?)),
            None => (text, None),
        };
        if let Some(a) = parse_ipv4(addr.as_bytes()) {
            let mask = match bits {
                None => u32::MAX,
                Some(b) if b > 32 => return None,
                Some(0) => 0,
                Some(b) => u32::MAX << (32 - b),
            };
            return Some((
                Cidr::V4 {
                    addr: a & mask,
                    mask,
                },
                a & !mask != 0,
            ));
        }
        let a = u128::from_be_bytes(parse_ipv6(addr.as_bytes())?);
        let mask = match bits {
            None => u128::MAX,
            Some(b) if b > 128 => return None,
            Some(0) => 0,
            Some(b) => u128::MAX << (128 - b),
        };
        Some((
            Cidr::V6 {
                addr: a & mask,
                mask,
            },
            a & !mask != 0,
        ))
    }

    /// The single address `a`.
    pub fn host(a: IpAddr) -> Cidr {
        match a {
            IpAddr::V4(a) => Cidr::V4 {
                addr: u32::from(a),
                mask: u32::MAX,
            },
            IpAddr::V6(a) => Cidr::V6 {
                addr: u128::from(a),
                mask: u128::MAX,
            },
        }
    }
}

/// The trusted addresses of `set_real_ip_from` or of geo's `proxy`, in the order written.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Trusted {
    list: Vec<Cidr>,
}

impl Trusted {
    pub fn add(&mut self, c: Cidr) {
        self.list.push(c);
    }

    pub fn is_empty(&self) -> bool {
        self.list.is_empty()
    }

    /// Whether a client is trusted (`None`: a unix-domain socket).
    pub fn contains(&self, client: Option<IpAddr>) -> bool {
        let client = client.map(|a| match a {
            IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(a, IpAddr::V4),
            v4 => v4,
        });
        self.list.iter().any(|c| match (c, client) {
            (Cidr::Unix, None) => true,
            (Cidr::V4 { addr, mask }, Some(IpAddr::V4(a))) => u32::from(a) & mask == *addr,
            (Cidr::V6 { addr, mask }, Some(IpAddr::V6(a))) => u128::from(a) & mask == *addr,
            _ => false,
        })
    }
}

fn is_separator(c: u8) -> bool {
    c == b' ' || c == b','
}

/// The last address text of a list value, and what comes before its separator (`None` when
/// the text began the value). nginx never looks at the value's first byte as a separator.
fn last_token(v: &[u8]) -> (&[u8], Option<&[u8]>) {
    let mut end = v.len();
    while end > 1 && is_separator(v[end - 1]) {
        end -= 1;
    }
    let mut start = end.saturating_sub(1);
    while start > 0 {
        if is_separator(v[start]) {
            start += 1;
            break;
        }
        start -= 1;
    }
    let before = (start > 0).then(|| &v[..start - 1]);
    (&v[start..end], before)
}

/// The client address a chain of forwarding headers gives, walked as nginx walks it: from
/// the last value's last address back, while the address the request came from so far is
/// trusted; without `recursive` only one step. `values` are the header's values in the order
/// sent (the last is read first); `from` is the connection's address (`None`: a unix-domain
/// socket). `None` when no address was taken.
pub fn forwarded(
    from: Option<IpAddr>,
    values: &[&[u8]],
    trusted: &Trusted,
    recursive: bool,
) -> Option<SocketAddr> {
    let mut current = from;
    let mut found = None;
    for value in values.iter().rev() {
        let mut rest = *value;
        loop {
            if !trusted.contains(current) || rest.is_empty() {
                return found;
            }
            let (token, before) = last_token(rest);
            let Some(addr) = parse_addr_port(token) else {
                return found;
            };
            found = Some(addr);
            current = Some(addr.ip());
            if !recursive {
                return found;
            }
            match before {
                Some(b) => rest = b,
                None => break,
            }
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> Option<IpAddr> {
        Some(s.parse().unwrap())
    }

    fn trusted(list: &[&str]) -> Trusted {
        let mut t = Trusted::default();
        for c in list {
            if *c == "unix:" {
                t.add(Cidr::Unix);
            } else {
                t.add(Cidr::parse(c).unwrap().0);
            }
        }
        t
    }

    fn addr_port(s: &str) -> Option<String> {
        parse_addr_port(s.as_bytes()).map(|a| match a.port() {
            0 => a.ip().to_string(),
            p => format!("{} {p}", a.ip()),
        })
    }

    #[test]
    fn addresses_with_ports_as_nginx_reads_them() {
        for (text, want) in [
            ("9.9.9.9", Some("9.9.9.9")),
            ("9.9.9.9:555", Some("9.9.9.9 555")),
            ("[::1]:555", Some("::1 555")),
            ("::1", Some("::1")),
            ("::ffff:1.2.3.4", Some("::ffff:1.2.3.4")),
            ("01.2.3.4", Some("1.2.3.4")),
            ("1..2.3", Some("1.0.2.3")),
            ("[1.2.3.4]:80", Some("1.2.3.4 80")),
            ("[::1]", None),
            ("1.2.3.4:0", None),
            ("1.2.3.4:99999", None),
            ("1.2.3.4:", None),
            ("1.2.3.4:80:90", None),
            ("1.2.3", None),
            ("1.2.3.4.5", None),
            ("255.255.255.255", None),
            ("fe80::1%eth0", None),
            ("unix:", None),
            ("bogus", None),
            ("", None),
        ] {
            assert_eq!(addr_port(text).as_deref(), want, "{text}");
        }
    }

    #[test]
    fn networks() {
        assert_eq!(
            Cidr::parse("10.1.2.3/16"),
            Some((
                Cidr::V4 {
                    addr: 0x0a01_0000,
                    mask: 0xffff_0000
                },
                true
            ))
        );
        assert_eq!(Cidr::parse("1.2.3.4/0").map(|c| c.1), Some(true));
        assert_eq!(Cidr::parse("::/0").map(|c| c.1), Some(false));
        for bad in ["1.2.3.4/33", "::1/129", "1.2.3.4/", "bogus", "all", "unix:"] {
            assert_eq!(Cidr::parse(bad), None, "{bad}");
        }
        let t = trusted(&[
            "127.0.0.1",
            "10.0.0.0/8",
            "::ffff:10.0.0.0/104",
            "2001:db8::/32",
        ]);
        assert!(t.contains(ip("10.9.9.9")));
        assert!(t.contains(ip("::ffff:127.0.0.1")));
        // Mapped addresses are IPv4 addresses: the IPv6 entry written for them does not
        // count (checked against nginx 1.22).
        assert!(!t.contains(ip("::ffff:11.0.0.1")));
        assert!(t.contains(ip("2001:db8::5")));
        assert!(!t.contains(None));
        assert!(trusted(&["unix:"]).contains(None));
        assert!(!trusted(&["unix:"]).contains(ip("127.0.0.1")));
    }

    /// The walk for a request from 127.0.0.1 with `values`, trusting 127.0.0.1 and 10/8.
    fn walk(values: &[&str], recursive: bool) -> String {
        let t = trusted(&["127.0.0.1", "10.0.0.0/8"]);
        let v: Vec<&[u8]> = values.iter().map(|s| s.as_bytes()).collect();
        match forwarded(ip("127.0.0.1"), &v, &t, recursive) {
            Some(a) if a.port() == 0 => a.ip().to_string(),
            Some(a) => format!("{} {}", a.ip(), a.port()),
            None => "-".into(),
        }
    }

    #[test]
    fn forwarded_chains_as_nginx_walks_them() {
        // (values, without recursion, with), each checked against nginx 1.22.
        for (values, plain, rec) in [
            (&["1.1.1.1, 10.0.0.1"][..], "10.0.0.1", "1.1.1.1"),
            (&["1.1.1.1, 10.0.0.1, 10.2.2.2"], "10.2.2.2", "1.1.1.1"),
            (&["10.0.0.1, 10.0.0.2"], "10.0.0.2", "10.0.0.1"),
            (&["bogus, 10.0.0.1"], "10.0.0.1", "10.0.0.1"),
            (&["1.1.1.1, bogus, 10.0.0.1"], "10.0.0.1", "10.0.0.1"),
            (&["1.1.1.1", "10.0.0.1"], "10.0.0.1", "1.1.1.1"),
            (&["1.1.1.1, 10.0.0.1", "10.0.0.2"], "10.0.0.2", "1.1.1.1"),
            (&["1.1.1.1", "bogus"], "-", "-"),
            (&["10.0.0.3", "2.2.2.2"], "2.2.2.2", "2.2.2.2"),
            (&["10.0.0.1:80, 10.0.0.2"], "10.0.0.2", "10.0.0.1 80"),
            (&["1.1.1.1, 127.0.0.1"], "127.0.0.1", "1.1.1.1"),
            (&["3.3.3.3, ::ffff:10.0.0.1"], "::ffff:10.0.0.1", "3.3.3.3"),
            (&["1.1.1.1", "bogus, 10.0.0.2"], "10.0.0.2", "10.0.0.2"),
            (&["bogus", "10.0.0.2"], "10.0.0.2", "10.0.0.2"),
            (&["5.5.5.5", "10.0.0.1, 10.0.0.2"], "10.0.0.2", "5.5.5.5"),
            (&["5.5.5.5", ",", "10.0.0.2"], "10.0.0.2", "10.0.0.2"),
            (&["10.0.0.9", "10.0.0.2"], "10.0.0.2", "10.0.0.9"),
            (&[",1.1.1.1"], "-", "-"),
            (&[",,1.1.1.1"], "1.1.1.1", "1.1.1.1"),
            (&["1.1.1.1,,10.0.0.1"], "10.0.0.1", "1.1.1.1"),
            (&[",10.0.0.1"], "-", "-"),
            (&["1,10.0.0.1"], "10.0.0.1", "10.0.0.1"),
            (&["9.9.9.9 ,8.8.8.8"], "8.8.8.8", "8.8.8.8"),
            (&["8.8.8.8,"], "8.8.8.8", "8.8.8.8"),
            (&[","], "-", "-"),
            (&["1.1.1.1 2.2.2.2"], "2.2.2.2", "2.2.2.2"),
            (&[""], "-", "-"),
            (&[], "-", "-"),
        ] {
            assert_eq!(walk(values, false), plain, "{values:?}");
            assert_eq!(walk(values, true), rec, "{values:?} recursive");
        }
    }

    #[test]
    fn an_untrusted_client_changes_nothing() {
        let t = trusted(&["10.0.0.0/8"]);
        let v: Vec<&[u8]> = vec![b"1.1.1.1"];
        assert_eq!(forwarded(ip("127.0.0.1"), &v, &t, true), None);
        assert_eq!(forwarded(None, &v, &t, true), None);
        assert_eq!(
            forwarded(None, &v, &trusted(&["unix:"]), false),
            "1.1.1.1:0".parse().ok()
        );
    }

    #[test]
    fn a_huge_list_is_one_pass() {
        // 100k trusted hops: linear, and the walk ends at the first address.
        let mut v = String::from("1.1.1.1");
        for _ in 0..100_000 {
            v.push_str(", 10.0.0.1");
        }
        assert_eq!(walk(&[&v], true), "1.1.1.1");
        let junk = "x".repeat(1 << 20);
        assert_eq!(walk(&[&junk], true), "-");
    }
}
