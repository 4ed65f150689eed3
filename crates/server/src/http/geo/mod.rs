//! nginx's ngx_http_geo_module: `geo [$address] $variable { ... }` defines a variable whose
//! value depends on an address: the client's (`$remote_addr`, so realip's when it changed it)
//! or another variable's value.
//!
//! The block, read as nginx reads it (its warnings and errors checked against nginx 1.22):
//! `ADDRESS[/BITS] VALUE` (the most specific network wins; IPv4-mapped IPv6 addresses are
//! looked up as IPv4), or with `ranges` first, `FROM-TO VALUE` (IPv4 only); `default VALUE`
//! (with CIDRs, the same as `0.0.0.0/0` and `::/0`); `delete NETWORK|RANGE`; `proxy ADDRESS`
//! and `proxy_recursive`: a request from a trusted address is looked up by its
//! `X-Forwarded-For`, walked as realip walks it ([`crate::http::realip::forwarded`]);
//! `include FILE` (spliced in by the configuration parser). Values are text, not templates. A
//! value that is not an address is looked up as 255.255.255.255, as nginx does; no match is
//! the default, or the empty string.
//!
//! Like `map`, the variable is computed when a template uses it
//! ([`crate::variables::Compute`]): a geo nobody reads costs nothing. The tables
//! ([`table`]) are sorted boundaries searched in O(log n): a lookup in a 10,000-network table
//! costs tens of nanoseconds (see `table::tests::geo_lookup_cost`).

pub mod table;

use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr};
use std::sync::Arc;

use shoal_conf::{Directive, Error};

use self::table::{Lookup, Prefixes, Ranges, Value};
use crate::conf::{err, Args, Builder, Command, Ctx, Scope};
use crate::http::realip::forwarded::{self, Cidr, Trusted};
use crate::variables::{self, Compute, Template, Vars};

pub static DIRECTIVES: &[Command] = &[Command::block(
    "geo",
    Ctx::HTTP.or(Ctx::STREAM),
    Args::Take(1, 2),
    set_geo,
)];

/// What a geo looks addresses up in.
#[derive(Debug)]
enum Tables {
    Cidr {
        v4: Lookup<u32>,
        v6: Lookup<u128>,
    },
    Ranges {
        v4: Lookup<u32>,
        default: Option<Value>,
    },
}

/// One `geo` block.
#[derive(Debug)]
pub struct Geo {
    /// `$address`, when not the client's.
    source: Option<Template>,
    tables: Tables,
    values: Vec<String>,
    proxies: Option<Trusted>,
    recursive: bool,
}

/// What a value that is not an address is looked up as.
const NONE_ADDR: IpAddr = IpAddr::V4(Ipv4Addr::BROADCAST);

impl Geo {
    /// The value for an address (`None`: a unix-domain socket, looked up as a non-address).
    pub fn find(&self, addr: Option<IpAddr>) -> &str {
        let addr = match addr.unwrap_or(NONE_ADDR) {
            IpAddr::V6(a) => match a.to_ipv4_mapped() {
                Some(v4) => IpAddr::V4(v4),
                None => IpAddr::V6(a),
            },
            v4 => v4,
        };
        let found = match (&self.tables, addr) {
            (Tables::Cidr { v4, .. }, IpAddr::V4(a)) => v4.find(u32::from(a)),
            (Tables::Cidr { v6, .. }, IpAddr::V6(a)) => v6.find(u128::from(a)),
            (Tables::Ranges { v4, default }, IpAddr::V4(a)) => v4.find(u32::from(a)).or(*default),
            // `ranges` has no IPv6: the address is not one it can hold.
            (Tables::Ranges { v4, default }, IpAddr::V6(_)) => {
                v4.find(u32::from(Ipv4Addr::BROADCAST)).or(*default)
            }
        };
        found.map_or("", |v| &self.values[v as usize])
    }

    /// The address a request is looked up by.
    fn address(&self, vars: &Vars<'_>) -> Option<IpAddr> {
        let addr = match &self.source {
            None => vars.peer.map(|p| p.ip()),
            Some(t) => {
                let text = vars.eval(t);
                Some(forwarded::parse_addr(text.as_bytes()).unwrap_or(NONE_ADDR))
            }
        };
        let Some(proxies) = &self.proxies else {
            return addr;
        };
        let Some(req) = vars.req else {
            return addr;
        };
        let values: Vec<&[u8]> = req.header_all("x-forwarded-for").collect();
        if values.is_empty() {
            return addr;
        }
        forwarded::forwarded(addr, &values, proxies, self.recursive).map_or(addr, |a| Some(a.ip()))
    }
}

impl Compute for Geo {
    fn compute(&self, vars: &Vars<'_>, out: &mut String) -> bool {
        out.push_str(self.find(self.address(vars)));
        true
    }
}

/// The block being read.
struct Block {
    ranges: bool,
    v4: Prefixes<u32>,
    v6: Prefixes<u128>,
    range_table: Ranges,
    range_default: Option<Value>,
    values: Vec<String>,
    index: HashMap<String, Value>,
    proxies: Option<Trusted>,
    recursive: bool,
}

impl Block {
    fn value(&mut self, v: &str) -> Value {
        if let Some(&i) = self.index.get(v) {
            return i;
        }
        let i = self.values.len() as Value;
        self.values.push(v.to_string());
        self.index.insert(v.to_string(), i);
        i
    }

    /// Whether networks or a default were given (then `ranges` is too late).
    fn has_networks(&self) -> bool {
        !self.v4.is_empty() || !self.v6.is_empty()
    }

    fn warn_duplicate(
        &self,
        b: &mut Builder,
        e: &Directive,
        kind: &str,
        net: &str,
        v: Value,
        old: Value,
    ) {
        b.warn(
            format!(
                "duplicate {kind} \"{net}\", value: \"{}\", old value: \"{}\"",
                self.values[v as usize], self.values[old as usize]
            ),
            &e.span,
        );
    }

    /// A `NETWORK VALUE` line (`default` is both `/0`s), or `delete NETWORK` (`value` None).
    fn cidr(
        &mut self,
        b: &mut Builder,
        e: &Directive,
        net: &str,
        value: Option<&str>,
    ) -> Result<(), Error> {
        let nets: Vec<Cidr> = if net == "default" {
            vec![Cidr::V4 { addr: 0, mask: 0 }, Cidr::V6 { addr: 0, mask: 0 }]
        } else {
            let (c, masked) = Cidr::parse(net).ok_or_else(|| invalid_network(e, net))?;
            if masked {
                b.warn(
                    format!("low address bits of {net} are meaningless"),
                    &e.span,
                );
            }
            vec![c]
        };
        let v = value.map(|v| self.value(v));
        for c in nets {
            let old = match (c, v) {
                (Cidr::V4 { addr, mask }, Some(v)) => {
                    self.v4.insert(addr, mask.count_ones() as u8, v)
                }
                (Cidr::V6 { addr, mask }, Some(v)) => {
                    self.v6.insert(addr, mask.count_ones() as u8, v)
                }
                (Cidr::V4 { addr, mask }, None) => {
                    if !self.v4.remove(addr, mask.count_ones() as u8) {
                        b.warn(format!("no network \"{net}\" to delete"), &e.span);
                    }
                    None
                }
                (Cidr::V6 { addr, mask }, None) => {
                    if !self.v6.remove(addr, mask.count_ones() as u8) {
                        b.warn(format!("no network \"{net}\" to delete"), &e.span);
                    }
                    None
                }
                (Cidr::Unix, _) => unreachable!("Cidr::parse gives no unix: entry"),
            };
            if let (Some(old), Some(v)) = (old, v) {
                self.warn_duplicate(b, e, "network", net, v, old);
            }
        }
        Ok(())
    }

    /// A `FROM-TO VALUE` line, `default VALUE`, or `delete FROM-TO` (`value` None).
    fn range(
        &mut self,
        b: &mut Builder,
        e: &Directive,
        text: &str,
        value: Option<&str>,
    ) -> Result<(), Error> {
        if text == "default" {
            let Some(value) = value else {
                return Err(invalid_range(e, text));
            };
            let v = self.value(value);
            if let Some(old) = self.range_default.replace(v) {
                b.warn(
                    format!(
                        "duplicate default geo range value: \"{value}\", old value: \"{}\"",
                        self.values[old as usize]
                    ),
                    &e.span,
                );
            }
            return Ok(());
        }
        let (from, to) = text
            .split_once('-')
            .and_then(|(f, t)| {
                Some((
                    crate::http::access::parse_ipv4(f.as_bytes())?,
                    crate::http::access::parse_ipv4(t.as_bytes())?,
                ))
            })
            .filter(|(f, t)| f <= t)
            .ok_or_else(|| invalid_range(e, text))?;
        match value {
            None => {
                if !self.range_table.delete(from, to) {
                    b.warn(format!("no address range \"{text}\" to delete"), &e.span);
                }
            }
            Some(value) => {
                let v = self.value(value);
                let mut dups = Vec::new();
                self.range_table
                    .add(from, to, v, &mut |old| dups.push(old))
                    .map_err(|(s, t)| {
                        err(
                            e,
                            format!(
                                "range \"{text}\" overlaps \"{}-{}\"",
                                Ipv4Addr::from(s),
                                Ipv4Addr::from(t)
                            ),
                        )
                    })?;
                for old in dups {
                    self.warn_duplicate(b, e, "range", text, v, old);
                }
            }
        }
        Ok(())
    }

    fn proxy(&mut self, b: &mut Builder, e: &Directive, text: &str) -> Result<(), Error> {
        let (c, masked) = Cidr::parse(text).ok_or_else(|| invalid_network(e, text))?;
        if masked {
            b.warn(
                format!("low address bits of {text} are meaningless"),
                &e.span,
            );
        }
        self.proxies.get_or_insert_with(Trusted::default).add(c);
        Ok(())
    }
}

fn invalid_network(e: &Directive, net: &str) -> Error {
    err(e, format!("invalid network \"{net}\""))
}

fn invalid_range(e: &Directive, text: &str) -> Error {
    err(e, format!("invalid range \"{text}\""))
}

/// `$name` as a variable a geo may define.
fn variable_name<'a>(d: &Directive, arg: &'a str) -> Result<&'a str, Error> {
    let name = match arg.strip_prefix('$') {
        Some(n) if !n.is_empty() => n,
        _ => return Err(err(d, format!("invalid variable name \"{arg}\""))),
    };
    if variables::is_builtin(name) {
        return Err(err(d, format!("the duplicate \"{name}\" variable")));
    }
    Ok(name)
}

fn set_geo(b: &mut Builder, d: &Directive, s: &mut Scope<'_>) -> Result<(), Error> {
    let (source, name) = match d.args.len() {
        1 => (None, variable_name(d, &d.args[0].value)?),
        _ => {
            let src = &d.args[0].value;
            if !src.starts_with('$') || src.len() < 2 {
                return Err(err(d, format!("invalid variable name \"{src}\"")));
            }
            let t = Template::compile(src).map_err(|m| err(d, m))?;
            (Some(t), variable_name(d, &d.args[1].value)?)
        }
    };
    let mut g = Block {
        ranges: false,
        v4: Prefixes::default(),
        v6: Prefixes::default(),
        range_table: Ranges::default(),
        range_default: None,
        values: Vec::new(),
        index: HashMap::new(),
        proxies: None,
        recursive: false,
    };
    build(&mut g, b, d, s, source, name)
}

fn build(
    g: &mut Block,
    b: &mut Builder,
    d: &Directive,
    s: &mut Scope<'_>,
    source: Option<Template>,
    name: &str,
) -> Result<(), Error> {
    for e in d.block.as_deref().unwrap_or_default() {
        if e.block.is_some() {
            return Err(err(e, "unexpected \"{\""));
        }
        let arg = e.args.first().map(|a| a.value.as_str());
        match (e.name.as_str(), e.args.len()) {
            ("ranges", 0) => {
                if g.has_networks() {
                    return Err(err(
                        e,
                        "the \"ranges\" directive must be the first directive inside \"geo\" block",
                    ));
                }
                g.ranges = true;
            }
            ("proxy_recursive", 0) => g.recursive = true,
            (_, 0) | (_, 2..) => return Err(err(e, "invalid number of the geo parameters")),
            ("proxy", 1) => g.proxy(b, e, arg.unwrap_or_default())?,
            ("delete", 1) => {
                let net = arg.unwrap_or_default();
                if g.ranges {
                    g.range(b, e, net, None)?;
                } else {
                    g.cidr(b, e, net, None)?;
                }
            }
            (net, _) => {
                let value = arg.unwrap_or_default();
                if g.ranges {
                    g.range(b, e, net, Some(value))?;
                } else {
                    g.cidr(b, e, net, Some(value))?;
                }
            }
        }
    }
    let tables = if g.ranges {
        Tables::Ranges {
            v4: g.range_table.compile(),
            default: g.range_default,
        }
    } else {
        Tables::Cidr {
            v4: g.v4.compile(),
            v6: g.v6.compile(),
        }
    };
    let geo = Geo {
        source,
        tables,
        values: std::mem::take(&mut g.values),
        proxies: g.proxies.take(),
        recursive: g.recursive,
    };
    crate::http::map::define(s, name, Arc::new(geo));
    Ok(())
}
