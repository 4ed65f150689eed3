//! nginx's ngx_http_access_module (`allow`, `deny`) and the core's `satisfy`: who may reach a
//! location by address, and how the access phase combines the answers of its modules.
//!
//! **Rules** are kept per address family, as nginx keeps them: IPv4 CIDRs, IPv6 CIDRs and
//! `unix:`; `all` goes into the three lists. A client is checked against its family's list in
//! order and the first match decides; no match (or no list for its family) is no answer at all
//! (nginx's `NGX_DECLINED`), which `satisfy any` does not count as an allow. An IPv4-mapped IPv6
//! client (`::ffff:a.b.c.d`) is checked as the IPv4 address against the IPv4 rules when there
//! are any, and only otherwise against the IPv6 rules. Addresses are read as nginx reads them
//! (`1..2.3` is 1.0.2.3, `:1::` is 1::, `255.255.255.255` is refused), and a CIDR with host
//! bits is masked with nginx's warning `low address bits of X are meaningless`. The rules of a
//! level replace all of its parent's.
//!
//! **The gate** ([`Gate`]) is nginx's `ngx_http_core_access_phase` and post-access phase: with
//! `satisfy all` the first refusal ends the phase; with `satisfy any` the first module that
//! allows ends it, and otherwise a 401 of an auth module wins over a 403 (the 401's
//! `WWW-Authenticate` is dropped when a later module allows). A 403 from the rules is logged
//! `access forbidden by rule` at `error`.
//!
//! Pure code: it needs the client's address and returns decisions; the access phase that calls
//! it (once per main request: nginx skips the phase for subrequests) owns logging and answers.

use std::net::IpAddr;
use std::sync::Arc;

use shoal_conf::{Directive, Error};

use crate::conf::{err, invalid_value, set_once, Args, Builder, Command, Ctx, Scope};
use crate::http::loc_conf;

pub static DIRECTIVES: &[Command] = &[
    Command::new(
        "allow",
        Ctx::HSL.or(Ctx::LMT).or(Ctx::SS),
        Args::ONE,
        set_rule,
    ),
    Command::new(
        "deny",
        Ctx::HSL.or(Ctx::LMT).or(Ctx::SS),
        Args::ONE,
        set_rule,
    ),
    Command::new("satisfy", Ctx::HSL, Args::ONE, set_satisfy),
];

/// The access module's and `satisfy`'s location-level configuration.
#[derive(Clone, Debug, Default)]
pub struct AccessLoc {
    /// The `allow`/`deny` lines of the level that has some (not merged line by line: a level
    /// with rules replaces its parent's).
    pub rules: Option<Arc<Rules>>,
    pub satisfy: Option<Satisfy>,
}

impl AccessLoc {
    /// Fills what this level left unset from its parent.
    pub fn merge(&mut self, parent: &Self) {
        crate::conf::merge(&mut self.rules, &parent.rules);
        crate::conf::merge(&mut self.satisfy, &parent.satisfy);
    }

    /// `satisfy` (default `all`).
    pub fn satisfy(&self) -> Satisfy {
        self.satisfy.unwrap_or(Satisfy::All)
    }

    /// The access module's answer for a client.
    pub fn check(&self, client: &Client) -> Answer {
        match &self.rules {
            Some(rules) => rules.check(client),
            None => Answer::Declined,
        }
    }
}

/// `satisfy all|any`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Satisfy {
    All,
    Any,
}

/// The client of a request, as the rules see it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Client {
    Inet(IpAddr),
    /// A unix-domain socket (`unix:` rules).
    Unix,
}

/// One `allow`/`deny` line's address part.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct V4 {
    addr: u32,
    mask: u32,
    deny: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct V6 {
    addr: u128,
    mask: u128,
    deny: bool,
}

/// The `allow`/`deny` lines of one level, by family, each list in the configuration's order.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Rules {
    v4: Vec<V4>,
    v6: Vec<V6>,
    unix: Vec<bool>,
}

impl Rules {
    /// The first matching rule's answer, or [`Answer::Declined`].
    pub fn check(&self, client: &Client) -> Answer {
        let found = |deny: bool| {
            if deny {
                Answer::Forbidden
            } else {
                Answer::Ok
            }
        };
        match *client {
            Client::Inet(IpAddr::V4(a)) => self.check_v4(u32::from(a)),
            Client::Inet(IpAddr::V6(a)) => {
                if let Some(v4) = a.to_ipv4_mapped().filter(|_| !self.v4.is_empty()) {
                    return self.check_v4(u32::from(v4));
                }
                let a = u128::from(a);
                self.v6
                    .iter()
                    .find(|r| a & r.mask == r.addr)
                    .map_or(Answer::Declined, |r| found(r.deny))
            }
            Client::Unix => self.unix.first().map_or(Answer::Declined, |d| found(*d)),
        }
    }

    fn check_v4(&self, a: u32) -> Answer {
        match self.v4.iter().find(|r| a & r.mask == r.addr) {
            Some(r) if r.deny => Answer::Forbidden,
            Some(_) => Answer::Ok,
            None => Answer::Declined,
        }
    }

    /// Adds one line's rule. `Ok(true)` when the address had host bits (masked, warned).
    fn add(&mut self, text: &str, deny: bool) -> Result<bool, ()> {
        match parse_rule(text)? {
            Parsed::All => {
                self.v4.push(V4 {
                    addr: 0,
                    mask: 0,
                    deny,
                });
                self.v6.push(V6 {
                    addr: 0,
                    mask: 0,
                    deny,
                });
                self.unix.push(deny);
                Ok(false)
            }
            Parsed::Unix => {
                self.unix.push(deny);
                Ok(false)
            }
            Parsed::V4 { addr, mask, masked } => {
                self.v4.push(V4 { addr, mask, deny });
                Ok(masked)
            }
            Parsed::V6 { addr, mask, masked } => {
                self.v6.push(V6 { addr, mask, deny });
                Ok(masked)
            }
        }
    }
}

/// What one access-phase module answered (nginx's handler return codes).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Answer {
    /// Nothing to say (no rule matched; no `auth_basic` here): the next module decides.
    Declined,
    /// Allowed.
    Ok,
    /// 403 by an `allow`/`deny` rule.
    Forbidden,
    /// Any other status: 401 and 403 from auth modules, 500 on their errors.
    Status(u16),
}

/// The access phase's bookkeeping for one request: feed it each module's answer in nginx's
/// order (access, then auth_basic, then auth_request) until it decides.
#[derive(Clone, Debug)]
pub struct Gate {
    satisfy: Satisfy,
    /// `satisfy any`: the refusal kept while later modules may still allow (nginx's
    /// `r->access_code`).
    code: Option<u16>,
}

/// How the access phase ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Decision {
    /// Go on to the content phase (with `satisfy any`, drop a `WWW-Authenticate` an earlier
    /// module set).
    Allow,
    /// Finish the request with `status`. `forbidden_by_rule`: log `access forbidden by rule`
    /// at `error` first. A 401 is delayed by `auth_delay` (see [`crate::http::auth_delay`]).
    Refuse {
        status: u16,
        forbidden_by_rule: bool,
    },
}

impl Gate {
    pub fn new(satisfy: Satisfy) -> Gate {
        Gate {
            satisfy,
            code: None,
        }
    }

    /// One module's answer; `Some` when it decides the phase (the modules after it are not
    /// asked).
    pub fn feed(&mut self, answer: Answer) -> Option<Decision> {
        let status = match answer {
            Answer::Declined => return None,
            Answer::Ok if self.satisfy == Satisfy::All => return None,
            Answer::Ok => return Some(Decision::Allow),
            Answer::Forbidden => 403,
            Answer::Status(s) => s,
        };
        if self.satisfy == Satisfy::Any && matches!(status, 401 | 403) {
            if self.code != Some(401) {
                self.code = Some(status);
            }
            return None;
        }
        Some(Decision::Refuse {
            status,
            forbidden_by_rule: answer == Answer::Forbidden,
        })
    }

    /// After the last module: allowed, unless `satisfy any` kept a refusal (nginx's
    /// post-access phase, which logs every 403 it finishes with as forbidden by rule).
    pub fn end(self) -> Decision {
        match self.code {
            Some(status) => Decision::Refuse {
                status,
                forbidden_by_rule: status == 403,
            },
            None => Decision::Allow,
        }
    }
}

/// The error-log line of a 403 by rule (at `error`).
pub const FORBIDDEN_BY_RULE: &str = "access forbidden by rule";

enum Parsed {
    All,
    Unix,
    V4 {
        addr: u32,
        mask: u32,
        masked: bool,
    },
    V6 {
        addr: u128,
        mask: u128,
        masked: bool,
    },
}

/// An `allow`/`deny` argument: `all`, `unix:`, or an address with an optional `/bits`.
fn parse_rule(text: &str) -> Result<Parsed, ()> {
    match text {
        "all" => return Ok(Parsed::All),
        "unix:" => return Ok(Parsed::Unix),
        _ => {}
    }
    let (addr, bits) = match text.split_once('/') {
        Some((a, b)) => (a, Some(b)),
        None => (text, None),
    };
    let bits = match bits {
        Some(b) => Some(crate::conf::parse_number(b).ok_or(())?),
        None => None,
    };
    if let Some(a) = parse_ipv4(addr.as_bytes()) {
        let mask = match bits {
            None => u32::MAX,
            Some(b) if b > 32 => return Err(()),
            Some(0) => 0,
            Some(b) => u32::MAX << (32 - b),
        };
        return Ok(Parsed::V4 {
            addr: a & mask,
            mask,
            masked: a & !mask != 0,
        });
    }
    let a = u128::from_be_bytes(parse_ipv6(addr.as_bytes()).ok_or(())?);
    let mask = match bits {
        None => u128::MAX,
        Some(b) if b > 128 => return Err(()),
        Some(0) => 0,
        Some(b) => u128::MAX << (128 - b),
    };
    Ok(Parsed::V6 {
        addr: a & mask,
        mask,
        masked: a & !mask != 0,
    })
}

/// An IPv4 address as nginx's `ngx_inet_addr` reads one: decimal parts of at most 255
/// separated by exactly three dots, an empty part counting as 0; the all-ones address is its
/// "none" and refused.
pub fn parse_ipv4(text: &[u8]) -> Option<u32> {
    let mut addr: u32 = 0;
    let mut part: u32 = 0;
    let mut dots = 0;
    for &c in text {
        match c {
            b'0'..=b'9' => {
                part = part * 10 + u32::from(c - b'0');
                if part > 255 {
                    return None;
                }
            }
            b'.' if dots < 3 => {
                addr = addr << 8 | part;
                part = 0;
                dots += 1;
            }
            _ => return None,
        }
    }
    let addr = addr << 8 | part;
    (dots == 3 && addr != u32::MAX).then_some(addr)
}

/// An IPv6 address as nginx's `ngx_inet6_addr` reads one: up to eight groups of at most four
/// hex digits, one `::`, an IPv4 address as the last two groups; one leading `:` is ignored
/// (`:1::` is `1::`), and a `::` that would stand for no group is refused (`1:2:3:4:5:6:7::`).
pub fn parse_ipv6(text: &[u8]) -> Option<[u8; 16]> {
    if text.is_empty() {
        return None;
    }
    let text = text.strip_prefix(b":").unwrap_or(text);
    let mut words: Vec<u16> = Vec::with_capacity(8);
    let mut gap: Option<usize> = None;
    let mut word: u32 = 0;
    let mut digits = 0;
    // Where the group being read starts, once a ':' was seen (an IPv4 tail needs one).
    let mut group: Option<usize> = None;
    let mut i = 0;
    while i < text.len() {
        let c = text[i];
        i += 1;
        if c == b':' {
            if digits > 0 {
                words.push(word as u16);
                if words.len() == 8 {
                    return None;
                }
                digits = 0;
                word = 0;
            } else if gap.is_none() {
                gap = Some(words.len());
            } else {
                return None;
            }
            group = Some(i);
            continue;
        }
        if c == b'.' && digits > 0 {
            let start = group?;
            if words.len() > 6 {
                return None;
            }
            let v4 = parse_ipv4(&text[start..])?;
            words.push((v4 >> 16) as u16);
            word = v4 & 0xffff;
            digits = 4;
            break;
        }
        digits += 1;
        if digits > 4 {
            return None;
        }
        word = word * 16 + (c as char).to_digit(16)?;
    }
    if digits == 0 && gap.is_none() {
        return None;
    }
    words.push(word as u16);
    match gap {
        None if words.len() == 8 => {}
        Some(at) if words.len() < 8 => {
            let zeros = 8 - words.len();
            words.splice(at..at, std::iter::repeat_n(0, zeros));
        }
        _ => return None,
    }
    let mut out = [0u8; 16];
    for (k, w) in words.iter().enumerate() {
        out[2 * k..2 * k + 2].copy_from_slice(&w.to_be_bytes());
    }
    Some(out)
}

fn set_rule(b: &mut Builder, d: &Directive, s: &mut Scope<'_>) -> Result<(), Error> {
    if let Some(level) = crate::stream::level(s) {
        return add_rule(b, d, &mut level.access);
    }
    add_rule(b, d, &mut loc_conf(s).access.rules)
}

/// Adds an `allow`/`deny` line to the rules of its level (http's location, stream's server):
/// `invalid parameter` for an address nginx refuses, its warning for host bits.
pub fn add_rule(
    b: &mut Builder,
    d: &Directive,
    slot: &mut Option<Arc<Rules>>,
) -> Result<(), Error> {
    let text = &d.args[0].value;
    let deny = d.name == "deny";
    let mut rules = slot.as_deref().cloned().unwrap_or_default();
    let masked = rules
        .add(text, deny)
        .map_err(|()| err(d, format!("invalid parameter \"{text}\"")))?;
    *slot = Some(Arc::new(rules));
    if masked {
        b.warn(
            format!("low address bits of {text} are meaningless"),
            &d.span,
        );
    }
    Ok(())
}

fn set_satisfy(_: &mut Builder, d: &Directive, s: &mut Scope<'_>) -> Result<(), Error> {
    let v = &d.args[0].value;
    let satisfy = if v.eq_ignore_ascii_case("all") {
        Satisfy::All
    } else if v.eq_ignore_ascii_case("any") {
        Satisfy::Any
    } else {
        return Err(invalid_value(d, v));
    };
    set_once(&mut loc_conf(s).access.satisfy, satisfy, d)
}

/// The access module's place in the module list: its access handler.
pub struct Module;

impl crate::http::modules::HttpModule for Module {
    type Loc = AccessLoc;
    const DIRECTIVES: &'static [Command] = DIRECTIVES;

    fn merge(loc: &mut AccessLoc, parent: &AccessLoc) {
        loc.merge(parent);
    }

    const ACCESS: bool = true;

    fn in_use(loc: &AccessLoc) -> bool {
        loc.rules.is_some()
    }

    async fn access(
        loc: &AccessLoc,
        cx: &crate::http::modules::Cx<'_, '_, '_>,
    ) -> crate::http::modules::Access {
        if loc.rules.is_none() {
            return crate::http::modules::Access::DECLINED;
        }
        crate::http::modules::Access {
            answer: loc.check(&cx.client()),
            header: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::{Ipv4Addr, Ipv6Addr};

    fn rules(lines: &[(&str, bool)]) -> Rules {
        let mut r = Rules::default();
        for (text, deny) in lines {
            r.add(text, *deny).expect(text);
        }
        r
    }

    fn ip(s: &str) -> Client {
        Client::Inet(s.parse().unwrap())
    }

    #[test]
    fn ipv4_as_nginx_reads_it() {
        assert_eq!(parse_ipv4(b"1.2.3.4"), Some(0x01020304));
        assert_eq!(parse_ipv4(b"01.2.3.4"), Some(0x01020304));
        assert_eq!(parse_ipv4(b"1..2.3"), Some(0x01000203));
        assert_eq!(parse_ipv4(b".1.2.3"), Some(0x00010203));
        assert_eq!(parse_ipv4(b"1.2.3."), Some(0x01020300));
        for bad in [
            &b"1.2.3"[..],
            b"1.2.3.256",
            b"255.255.255.255",
            b"1.2.3.4.5",
            b"",
            b"a.b.c.d",
            b"1.2.3.4 ",
        ] {
            assert_eq!(parse_ipv4(bad), None, "{:?}", String::from_utf8_lossy(bad));
        }
    }

    #[test]
    fn ipv6_as_nginx_reads_it() {
        let v6 = |s: &str| parse_ipv6(s.as_bytes()).map(Ipv6Addr::from);
        for good in [
            "::",
            "::1",
            "1::",
            "1::2",
            "FE80::1",
            "1:2:3:4:5:6:7:8",
            "::ffff:1.2.3.4",
            "1:2:3:4:5:6:1.2.3.4",
            "2001:db8::8a2e:370:7334",
        ] {
            assert_eq!(v6(good), Some(good.parse().unwrap()), "{good}");
        }
        // nginx's own readings, checked with `nginx -t`.
        assert_eq!(v6(":1::"), Some("1::".parse().unwrap()));
        assert_eq!(
            v6(":1:2:3:4:5:6:7:8"),
            Some("1:2:3:4:5:6:7:8".parse().unwrap())
        );
        for bad in [
            "1:2:3:4:5:6:7::",
            "1:2:3:4:5:6:7:8:9",
            "1:2:3:4:5:6:7:8:",
            "::ffff:1.2.3",
            "12345::",
            "1::2::3",
            ":::",
            "fe80::1%eth0",
            "1:2:3:4:5:6:7:1.2.3.4",
            ":1.2.3.4",
            "[::1]",
            "",
            ":",
        ] {
            assert_eq!(v6(bad), None, "{bad}");
        }
    }

    #[test]
    fn rule_arguments() {
        assert!(matches!(parse_rule("all"), Ok(Parsed::All)));
        assert!(matches!(parse_rule("unix:"), Ok(Parsed::Unix)));
        for bad in [
            "ALL",
            "UNIX:",
            "unix:/x",
            "1.2.3.4/33",
            "::1/129",
            "1.2.3.4/",
            "/8",
            "1.2.3.4/32/1",
            "10.0.0.0/-1",
            "10.0.0.0/8x",
            "1.2.3.4/4294967304",
            "foo",
        ] {
            assert!(parse_rule(bad).is_err(), "{bad}");
        }
        let Ok(Parsed::V4 { addr, mask, masked }) = parse_rule("1.2.3.4/24") else {
            panic!("1.2.3.4/24")
        };
        assert_eq!((addr, mask, masked), (0x01020300, 0xffffff00, true));
        let Ok(Parsed::V4 { masked, mask, .. }) = parse_rule("1.2.3.0/08") else {
            panic!("/08")
        };
        assert!(masked);
        assert_eq!(mask, 0xff000000);
        assert!(matches!(
            parse_rule("10.0.0.0/0"),
            Ok(Parsed::V4 {
                mask: 0,
                masked: true,
                ..
            })
        ));
        assert!(matches!(
            parse_rule("2001:db8::/32"),
            Ok(Parsed::V6 { masked: false, .. })
        ));
        assert!(matches!(
            parse_rule("2001:db8::1/32"),
            Ok(Parsed::V6 { masked: true, .. })
        ));
    }

    #[test]
    fn first_matching_rule_decides() {
        let r = rules(&[
            ("192.168.1.1", true),
            ("192.168.1.0/24", false),
            ("10.1.1.0/16", false),
            ("2001:0db8::/32", false),
            ("all", true),
        ]);
        assert_eq!(r.check(&ip("192.168.1.1")), Answer::Forbidden);
        assert_eq!(r.check(&ip("192.168.1.2")), Answer::Ok);
        assert_eq!(r.check(&ip("10.1.200.3")), Answer::Ok);
        assert_eq!(r.check(&ip("10.2.0.1")), Answer::Forbidden);
        assert_eq!(r.check(&ip("2001:db8::5")), Answer::Ok);
        assert_eq!(r.check(&ip("2001:db9::5")), Answer::Forbidden);
        assert_eq!(r.check(&Client::Unix), Answer::Forbidden);
    }

    #[test]
    fn no_match_and_other_families_decline() {
        let r = rules(&[("127.0.0.1", false)]);
        assert_eq!(r.check(&ip("127.0.0.2")), Answer::Declined);
        assert_eq!(r.check(&ip("::1")), Answer::Declined);
        assert_eq!(r.check(&Client::Unix), Answer::Declined);
        let r = rules(&[("unix:", true), ("::1", true)]);
        assert_eq!(r.check(&Client::Unix), Answer::Forbidden);
        assert_eq!(r.check(&ip("::1")), Answer::Forbidden);
        assert_eq!(r.check(&ip("127.0.0.1")), Answer::Declined);
    }

    #[test]
    fn ipv4_mapped_clients() {
        let mapped = Client::Inet(IpAddr::V6(Ipv4Addr::new(10, 0, 0, 1).to_ipv6_mapped()));
        // With IPv4 rules, a mapped client is checked as IPv4 only.
        let r = rules(&[("::ffff:0:0/96", true), ("10.0.0.0/8", false)]);
        assert_eq!(r.check(&mapped), Answer::Ok);
        let r = rules(&[("::ffff:0:0/96", false), ("10.0.0.0/8", true)]);
        assert_eq!(r.check(&mapped), Answer::Forbidden);
        let r = rules(&[("::ffff:0:0/96", false), ("192.168.0.0/16", true)]);
        assert_eq!(r.check(&mapped), Answer::Declined);
        // Without, against the IPv6 ones.
        let r = rules(&[("::ffff:10.0.0.0/104", true)]);
        assert_eq!(r.check(&mapped), Answer::Forbidden);
    }

    #[test]
    fn a_level_with_rules_replaces_its_parents() {
        let parent = AccessLoc {
            rules: Some(Arc::new(rules(&[("all", true)]))),
            satisfy: Some(Satisfy::Any),
        };
        let mut child = AccessLoc {
            rules: Some(Arc::new(rules(&[("10.0.0.1", false)]))),
            satisfy: None,
        };
        child.merge(&parent);
        assert_eq!(child.check(&ip("10.0.0.2")), Answer::Declined);
        assert_eq!(child.satisfy(), Satisfy::Any);
        let mut bare = AccessLoc::default();
        bare.merge(&parent);
        assert_eq!(bare.check(&ip("10.0.0.2")), Answer::Forbidden);
        assert_eq!(AccessLoc::default().satisfy(), Satisfy::All);
        assert_eq!(AccessLoc::default().check(&Client::Unix), Answer::Declined);
    }

    fn run(satisfy: Satisfy, answers: &[Answer]) -> Decision {
        let mut g = Gate::new(satisfy);
        for a in answers {
            if let Some(d) = g.feed(*a) {
                return d;
            }
        }
        g.end()
    }

    #[test]
    fn satisfy_all_stops_at_the_first_refusal() {
        use Answer::*;
        let refuse = |status, forbidden_by_rule| Decision::Refuse {
            status,
            forbidden_by_rule,
        };
        assert_eq!(run(Satisfy::All, &[Declined, Declined]), Decision::Allow);
        assert_eq!(run(Satisfy::All, &[Ok, Ok]), Decision::Allow);
        // deny all + auth_basic: the rule's 403 comes first (seen with nginx).
        assert_eq!(run(Satisfy::All, &[Forbidden, Ok]), refuse(403, true));
        assert_eq!(run(Satisfy::All, &[Ok, Status(401)]), refuse(401, false));
        assert_eq!(
            run(Satisfy::All, &[Declined, Status(500)]),
            refuse(500, false)
        );
    }

    #[test]
    fn satisfy_any_needs_one_allow_and_prefers_401() {
        use Answer::*;
        let refuse = |status, forbidden_by_rule| Decision::Refuse {
            status,
            forbidden_by_rule,
        };
        assert_eq!(run(Satisfy::Any, &[Forbidden, Ok]), Decision::Allow);
        assert_eq!(run(Satisfy::Any, &[Ok, Status(401)]), Decision::Allow);
        // deny all + no credentials: 401, and no "forbidden" line (seen with nginx).
        assert_eq!(
            run(Satisfy::Any, &[Forbidden, Status(401)]),
            refuse(401, false)
        );
        assert_eq!(
            run(Satisfy::Any, &[Status(401), Forbidden]),
            refuse(401, false)
        );
        // deny all alone: 403, logged after the phase.
        assert_eq!(run(Satisfy::Any, &[Forbidden, Declined]), refuse(403, true));
        // A declined module is no allow.
        assert_eq!(run(Satisfy::Any, &[Declined]), Decision::Allow);
        assert_eq!(
            run(Satisfy::Any, &[Declined, Status(403)]),
            refuse(403, true)
        );
        // An error ends the phase whatever satisfy says.
        assert_eq!(
            run(Satisfy::Any, &[Forbidden, Status(500), Ok]),
            refuse(500, false)
        );
    }
}
