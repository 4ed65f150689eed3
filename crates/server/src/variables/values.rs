//! The pieces values are made of: request headers, arguments and cookies by name, escaping,
//! the host name, local time in nginx's formats.

use std::cell::RefCell;
use std::time::{SystemTime, UNIX_EPOCH};

use shoal_http::Request;

use super::*;

/// The values of the request headers `$http_NAME` names, in order; `None` when there is no
/// request or its summary of names says none was sent.
pub(super) fn http_values<'r>(
    req: Option<&'r Request>,
    name: &'r str,
) -> Option<impl Iterator<Item = &'r [u8]> + 'r> {
    let r = req.filter(|r| r.may_have_header(name.as_bytes()))?;
    Some(
        r.header_fields()
            .filter(move |(n, _)| header_matches(n, name))
            .map(|(_, v)| v),
    )
}

/// What joins repeated headers in `$http_NAME`: ", " (nginx), "; " for Cookie.
pub(super) fn http_separator(name: &str) -> &'static str {
    if name == "cookie" {
        "; "
    } else {
        ", "
    }
}

pub(super) fn header_matches(header: &[u8], var_name: &str) -> bool {
    header.len() == var_name.len()
        && header
            .iter()
            .zip(var_name.bytes())
            .all(|(&h, v)| h.to_ascii_lowercase() == v || (h == b'-' && v == b'_'))
}

/// `$arg_NAME`: the first `NAME=value` of the query string (names compared case-insensitively,
/// as nginx does).
pub(super) fn arg<'q>(query: &'q [u8], name: &str) -> Option<&'q [u8]> {
    for pair in query.split(|&c| c == b'&') {
        let (k, v) = match pair.iter().position(|&c| c == b'=') {
            Some(p) => (&pair[..p], &pair[p + 1..]),
            None => (pair, &b""[..]),
        };
        if k.eq_ignore_ascii_case(name.as_bytes()) {
            return Some(v);
        }
    }
    None
}

pub(super) fn cookie(r: &Request, name: &str) -> Option<String> {
    for v in r.header_all("cookie") {
        for part in v.split(|&c| c == b';') {
            let part = part.trim_ascii();
            if let Some(p) = part.iter().position(|&c| c == b'=') {
                if part[..p].eq_ignore_ascii_case(name.as_bytes()) {
                    return Some(shoal_http::lossy(&part[p + 1..]).into_owned());
                }
            }
        }
    }
    None
}

/// The bytes the default log escaping writes as `\xHH`: `"`, the backslash, and all but
/// printable ASCII.
pub(super) static ESCAPED: [bool; 256] = {
    let mut t = [true; 256];
    let mut c = 0x20;
    while c < 0x7f {
        t[c] = c == b'"' as usize || c == b'\\' as usize;
        c += 1;
    }
    t
};

/// Escapes `v` into `out` as `log_format ... escape=` says.
pub fn escape_into(v: &[u8], escape: Escape, out: &mut Vec<u8>) {
    const HEX: &[u8; 16] = b"0123456789ABCDEF";
    match escape {
        Escape::None => out.extend_from_slice(v),
        Escape::Default => {
            let needs = |c: u8| ESCAPED[usize::from(c)];
            let mut rest = v;
            // The usual value has nothing to escape: its clean runs are copied whole.
            while let Some(i) = rest.iter().position(|&c| needs(c)) {
                let c = rest[i];
                out.extend_from_slice(&rest[..i]);
                out.extend_from_slice(&[
                    b'\\',
                    b'x',
                    HEX[(c >> 4) as usize],
                    HEX[(c & 15) as usize],
                ]);
                rest = &rest[i + 1..];
            }
            out.extend_from_slice(rest);
        }
        Escape::Json => {
            for &c in v {
                match c {
                    b'"' => out.extend_from_slice(b"\\\""),
                    b'\\' => out.extend_from_slice(b"\\\\"),
                    b'\n' => out.extend_from_slice(b"\\n"),
                    b'\r' => out.extend_from_slice(b"\\r"),
                    b'\t' => out.extend_from_slice(b"\\t"),
                    0x08 => out.extend_from_slice(b"\\b"),
                    0x0c => out.extend_from_slice(b"\\f"),
                    c if c < 0x20 => out.extend_from_slice(&[
                        b'\\',
                        b'u',
                        b'0',
                        b'0',
                        HEX[(c >> 4) as usize],
                        HEX[(c & 15) as usize],
                    ]),
                    c => out.push(c),
                }
            }
        }
    }
}

/// `$hostname`: read when a configuration is read, as nginx reads it at each cycle's start, and
/// kept in lower case as nginx keeps it.
pub(super) static HOSTNAME: std::sync::RwLock<String> = std::sync::RwLock::new(String::new());

pub(super) fn read_hostname() {
    let name = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|s| s.trim().to_ascii_lowercase())
        .unwrap_or_default();
    *HOSTNAME.write().unwrap_or_else(|e| e.into_inner()) = name;
}

/// The local time at `secs` after the epoch, and its offset from UTC in seconds.
pub(crate) fn local_tm(secs: u64) -> (libc::tm, i64) {
    let now = secs as libc::time_t;
    // SAFETY: an all-zero tm is valid for localtime_r to overwrite.
    let mut tm: libc::tm = unsafe { std::mem::zeroed() };
    // SAFETY: valid pointers for the call's duration.
    unsafe { libc::localtime_r(&now, &mut tm) };
    let off = tm.tm_gmtoff;
    (tm, off)
}

pub(super) fn tz(off: i64, colon: bool) -> String {
    let sign = if off < 0 { '-' } else { '+' };
    let off = off.abs();
    if colon {
        format!("{sign}{:02}:{:02}", off / 3600, (off % 3600) / 60)
    } else {
        format!("{sign}{:02}{:02}", off / 3600, (off % 3600) / 60)
    }
}

/// `$time_local` and `$time_iso8601` of one second, formatted once for it.
pub(super) struct LocalTime {
    pub(super) secs: u64,
    pub(super) local: String,
    pub(super) iso8601: String,
}

thread_local! {
    static LOCAL_TIME: RefCell<Option<LocalTime>> = const { RefCell::new(None) };
    /// The text of the last client address written (`$remote_addr`), kept: the same few
    /// clients make most requests.
    static PEER_IP: RefCell<Option<(std::net::IpAddr, String)>> = const { RefCell::new(None) };
}

/// Calls `f` with this second's local times, formatting them when the second changed (nginx
/// too formats its cached times once per second).
pub(super) fn with_local_time<R>(f: impl FnOnce(&LocalTime) -> R) -> R {
    let secs = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    LOCAL_TIME.with(|c| {
        let mut c = c.borrow_mut();
        if !matches!(&*c, Some(t) if t.secs == secs) {
            *c = None;
        }
        f(c.get_or_insert_with(|| {
            let (tm, off) = local_tm(secs);
            LocalTime {
                secs,
                local: time_local(&tm, off),
                iso8601: time_iso8601(&tm, off),
            }
        }))
    })
}

/// Calls `f` with `ip` as `$remote_addr` writes it.
pub(super) fn with_peer_ip_text<R>(ip: std::net::IpAddr, f: impl FnOnce(&str) -> R) -> R {
    PEER_IP.with(|c| {
        let mut c = c.borrow_mut();
        if !matches!(&*c, Some((last, _)) if *last == ip) {
            *c = Some((ip, ip.to_string()));
        }
        f(c.as_ref().map_or("", |(_, text)| text))
    })
}

/// Appends `n` in decimal.
pub(super) fn push_decimal(out: &mut String, n: u64) {
    let mut digits = [0u8; 20];
    let text = shoal_http::response::decimal(n, &mut digits);
    out.push_str(std::str::from_utf8(text).unwrap_or_default());
}

/// `$time_local`: `21/Nov/2026:10:00:00 +0000`.
pub(super) fn time_local(tm: &libc::tm, off: i64) -> String {
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    format!(
        "{:02}/{}/{}:{:02}:{:02}:{:02} {}",
        tm.tm_mday,
        MONTHS[tm.tm_mon.clamp(0, 11) as usize],
        tm.tm_year + 1900,
        tm.tm_hour,
        tm.tm_min,
        tm.tm_sec,
        tz(off, false)
    )
}

/// `$time_iso8601`: `2026-11-21T10:00:00+00:00`.
pub(super) fn time_iso8601(tm: &libc::tm, off: i64) -> String {
    format!(
        "{}-{:02}-{:02}T{:02}:{:02}:{:02}{}",
        tm.tm_year + 1900,
        tm.tm_mon + 1,
        tm.tm_mday,
        tm.tm_hour,
        tm.tm_min,
        tm.tm_sec,
        tz(off, true)
    )
}

/// A binary value (`$binary_remote_addr`) in text: a byte past 0x7f is a private-use
/// character, the same a configuration's non-UTF-8 bytes read as (`shoal_conf::raw`), so a
/// `map` key written with raw bytes matches, and the bytes come back where an answer, a log or a
/// zone key takes them.
pub use shoal_conf::{push_raw_byte, raw_bytes_into};
