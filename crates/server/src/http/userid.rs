//! nginx's ngx_http_userid_module: a cookie that names the client, `$uid_got`, `$uid_set`
//! and `$uid_reset`.
//!
//! The identifier is 16 bytes, sent as their base64 (22 characters, then `==`, or the
//! `userid_mark` character and `=`). nginx keeps them as four 32-bit words in the machine's
//! order, and so does this module (little-endian bytes): `$uid_got` and `$uid_set` print the
//! four words in hex as nginx's `%08XD` does, so a `v2` identifier (`on`), whose words are in
//! network order, reads byte-swapped (`127.0.0.1` is `0100007F`), as nginx's does. A `v2`
//! identifier is the server's address (or `htonl(userid_service)`), the time, a per-worker
//! start value (`(µs / 20) << 16 | pid` when the worker began) and a sequence that starts at
//! `0x03030302` and steps by `0x100`; `v1` has the same words in the machine's order, the
//! sequence starting at 1.
//!
//! `userid log` only reads the cookie (`$uid_got`); `on` and `v1` also set one when the client
//! sent none (or a bad one), when `$uid_reset` is set (not `0`; `log` also logs it), or to add
//! the mark to a cookie sent without it. The identifier is made once per request, whoever asks
//! first (`$uid_set` or the header filter), so both agree.
//!
//! Unlike nginx's worker processes, shoal's workers are threads of one process: the sequence is
//! the process's (so no two workers hand out the same identifier), the start value each
//! worker's.

use std::cell::Cell;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicU32, Ordering};

use shoal_conf::{Directive, Error};

use super::modules::Cx;
use super::reply::Reply;
use crate::conf::{err, invalid_value, merge, set_once, Args, Builder, Command, Ctx, Scope};
use crate::http::loc_conf;
use crate::log::Level;
use crate::variables::Vars;

pub static DIRECTIVES: &[Command] = &[
    Command::new("userid", Ctx::HSL, Args::ONE, set_userid),
    Command::new("userid_service", Ctx::HSL, Args::ONE, set_service),
    Command::new("userid_name", Ctx::HSL, Args::ONE, set_name),
    Command::new("userid_domain", Ctx::HSL, Args::ONE, set_domain),
    Command::new("userid_path", Ctx::HSL, Args::ONE, set_path),
    Command::new("userid_expires", Ctx::HSL, Args::ONE, set_expires),
    Command::new("userid_flags", Ctx::HSL, Args::ONE_OR_MORE, set_flags),
    Command::new("userid_p3p", Ctx::HSL, Args::ONE, set_p3p),
    Command::new("userid_mark", Ctx::HSL, Args::ONE, set_mark),
];

/// `userid`'s states, in nginx's order (`v1` and `on` set cookies).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum State {
    Off,
    Log,
    V1,
    On,
}

/// `userid_flags`, nginx's bits.
mod flag {
    pub const OFF: u32 = 0x02;
    pub const SECURE: u32 = 0x04;
    pub const HTTPONLY: u32 = 0x08;
    pub const SAMESITE: u32 = 0x10;
    pub const STRICT: u32 = 0x20;
    pub const LAX: u32 = 0x40;
    pub const NONE: u32 = 0x80;
}

const FLAGS: [(&str, u32); 6] = [
    ("off", flag::OFF),
    ("secure", flag::SECURE),
    ("httponly", flag::HTTPONLY),
    ("samesite=strict", flag::SAMESITE | flag::STRICT),
    ("samesite=lax", flag::SAMESITE | flag::LAX),
    ("samesite=none", flag::SAMESITE | flag::NONE),
];

/// What each flag adds to the cookie, in nginx's order.
const FLAG_TEXT: [(u32, &str); 5] = [
    (flag::SECURE, "; secure"),
    (flag::HTTPONLY, "; httponly"),
    (flag::STRICT, "; samesite=strict"),
    (flag::LAX, "; samesite=lax"),
    (flag::NONE, "; samesite=none"),
];

/// `userid_expires max`: 31 Dec 2037 23:55:55 GMT, written as nginx writes it.
const MAX_EXPIRES: i64 = 2_145_916_555;
const MAX_EXPIRES_TEXT: &str = "; expires=Thu, 31-Dec-37 23:55:55 GMT";

/// The module's configuration of a level.
#[derive(Clone, Debug, Default)]
pub struct UseridLoc {
    enable: Option<State>,
    /// Or-ed `userid_flags` of this level (0: none).
    flags: u32,
    service: Option<u32>,
    name: Option<String>,
    /// `; domain=...`, or empty for `none`.
    domain: Option<String>,
    /// `; path=...`.
    path: Option<String>,
    p3p: Option<String>,
    /// Seconds; 0 for `off`.
    expires: Option<i64>,
    /// 0 for `off`.
    mark: Option<u8>,
}

impl UseridLoc {
    fn enable(&self) -> State {
        self.enable.unwrap_or(State::Off)
    }

    fn name(&self) -> &str {
        self.name.as_deref().unwrap_or("uid")
    }
}

fn userid<'a>(s: &'a mut Scope<'_>) -> &'a mut UseridLoc {
    &mut loc_conf(s).userid
}

fn set_userid(_: &mut Builder, d: &Directive, s: &mut Scope<'_>) -> Result<(), Error> {
    let v = d.args[0].value.as_str();
    let state = match v {
        "off" => State::Off,
        "log" => State::Log,
        "v1" => State::V1,
        "on" => State::On,
        _ => return Err(invalid_value(d, v)),
    };
    set_once(&mut userid(s).enable, state, d)
}

fn set_service(_: &mut Builder, d: &Directive, s: &mut Scope<'_>) -> Result<(), Error> {
    // nginx's `ngx_conf_set_num_slot` into an `ngx_int_t`, kept as the 32 bits the cookie has.
    let n = crate::conf::number_arg(d, 0)?;
    set_once(&mut userid(s).service, n as u32, d)
}

fn set_name(_: &mut Builder, d: &Directive, s: &mut Scope<'_>) -> Result<(), Error> {
    set_once(&mut userid(s).name, d.args[0].value.clone(), d)
}

fn set_domain(_: &mut Builder, d: &Directive, s: &mut Scope<'_>) -> Result<(), Error> {
    let v = &d.args[0].value;
    let text = if v == "none" {
        String::new()
    } else {
        format!("; domain={v}")
    };
    set_once(&mut userid(s).domain, text, d)
}

fn set_path(_: &mut Builder, d: &Directive, s: &mut Scope<'_>) -> Result<(), Error> {
    let text = format!("; path={}", d.args[0].value);
    set_once(&mut userid(s).path, text, d)
}

fn set_p3p(_: &mut Builder, d: &Directive, s: &mut Scope<'_>) -> Result<(), Error> {
    let v = &d.args[0].value;
    let text = if v == "none" {
        String::new()
    } else {
        v.clone()
    };
    set_once(&mut userid(s).p3p, text, d)
}

fn set_expires(_: &mut Builder, d: &Directive, s: &mut Scope<'_>) -> Result<(), Error> {
    let v = d.args[0].value.as_str();
    let secs = match v {
        "max" => MAX_EXPIRES,
        "off" => 0,
        // nginx's `ngx_parse_time(value, 1)`: seconds, so no `ms`.
        _ => crate::conf::parse_time(v)
            .filter(|t| t.subsec_millis() == 0 && !v.contains("ms"))
            .map(|t| t.as_secs() as i64)
            .ok_or_else(|| err(d, "\"userid_expires\" directive invalid value"))?,
    };
    set_once(&mut userid(s).expires, secs, d)
}

fn set_flags(b: &mut Builder, d: &Directive, s: &mut Scope<'_>) -> Result<(), Error> {
    // nginx's `ngx_conf_set_bitmask_slot`: repeated lines add up; a value whose bits are
    // already there is a warning (two `samesite=` share one).
    let loc = userid(s);
    for a in &d.args {
        let v = a.value.as_str();
        let Some(&(_, bits)) = FLAGS.iter().find(|(n, _)| n.eq_ignore_ascii_case(v)) else {
            return Err(invalid_value(d, v));
        };
        if loc.flags & bits != 0 {
            b.warn(format!("duplicate value \"{v}\""), &d.span);
        } else {
            loc.flags |= bits;
        }
    }
    Ok(())
}

fn set_mark(_: &mut Builder, d: &Directive, s: &mut Scope<'_>) -> Result<(), Error> {
    let v = d.args[0].value.as_bytes();
    let loc = userid(s);
    if loc.mark.is_some() {
        return Err(crate::conf::duplicate(d));
    }
    let mark = match v {
        b"off" => 0,
        [c] if c.is_ascii_alphanumeric() || *c == b'=' => *c,
        _ => return Err(err(
            d,
            "\"userid_mark\" directive value must be \"off\" or a single letter, digit or \"=\"",
        )),
    };
    loc.mark = Some(mark);
    Ok(())
}

/// What the module knows of one request: the identifier the client sent (zero when none or
/// a bad one) and the one to set (zero until made, and when none is to be set).
#[derive(Clone, Copy, Debug, Default)]
pub struct Uid {
    got: [u8; 16],
    set: [u8; 16],
    /// `set` was decided (made, or found needless).
    made: bool,
    /// The client's identifier is being replaced (`$uid_reset`).
    reset: bool,
}

/// The request's state: read from the cookie at the first use, then kept (boxed: a request
/// without userid pays one pointer).
#[derive(Default)]
pub struct Slot(Cell<Option<Box<Uid>>>);

impl Slot {
    fn get(&self) -> Option<Uid> {
        let b = self.0.take()?;
        let uid = *b;
        self.0.set(Some(b));
        Some(uid)
    }

    fn set(&self, uid: Uid) {
        match self.0.take() {
            Some(mut b) => {
                *b = uid;
                self.0.set(Some(b));
            }
            None => self.0.set(Some(Box::new(uid))),
        }
    }
}

/// nginx's "set" test: its fourth word is not zero.
fn present(uid: &[u8; 16]) -> bool {
    uid[12..] != [0; 4]
}

/// `NAME=` and the four words in hex, as nginx prints them.
fn print(name: &str, uid: &[u8; 16], out: &mut String) {
    out.push_str(name);
    out.push('=');
    for w in uid.chunks(4) {
        let w = u32::from_le_bytes(w.try_into().expect("chunks of four"));
        let _ = write!(out, "{w:08X}");
    }
}

/// The value of cookie `name` in the request's `Cookie` lines, as nginx's
/// `ngx_http_parse_multi_header_lines` finds it: the name at a line's start or after `;` or
/// `,` (and spaces), case-insensitively, then spaces, `=`, spaces, and up to `;`. Also the
/// whole line it was found in (for the log).
fn cookie<'a>(req: &'a shoal_http::Request, name: &str) -> Option<(&'a [u8], &'a [u8])> {
    let name = name.as_bytes();
    for line in req.header_all("cookie") {
        if name.len() > line.len() {
            continue;
        }
        let mut at = 0;
        while at < line.len() {
            let rest = &line[at..];
            if rest.len() >= name.len() && rest[..name.len()].eq_ignore_ascii_case(name) {
                let mut i = at + name.len();
                while i < line.len() && line[i] == b' ' {
                    i += 1;
                }
                if i < line.len() && line[i] == b'=' {
                    i += 1;
                    while i < line.len() && line[i] == b' ' {
                        i += 1;
                    }
                    let end = line[i..]
                        .iter()
                        .position(|&c| c == b';')
                        .map_or(line.len(), |p| i + p);
                    return Some((&line[i..end], line));
                }
                at = i;
            }
            // Past the next `;` or `,`, and the spaces after it.
            while at < line.len() {
                let c = line[at];
                at += 1;
                if c == b';' || c == b',' {
                    break;
                }
            }
            while at < line.len() && line[at] == b' ' {
                at += 1;
            }
        }
    }
    None
}

/// nginx's `ngx_decode_base64` of the cookie's first 22 characters into `out`: up to a `=`,
/// every character of the standard alphabet, not one past a whole group of four.
fn decode(s: &[u8], out: &mut [u8; 16]) -> bool {
    let digit = |c: u8| -> Option<u32> {
        Some(match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' => 62,
            b'/' => 63,
            _ => return None,
        } as u32)
    };
    let len = s.iter().position(|&c| c == b'=').unwrap_or(s.len());
    let s = &s[..len];
    if s.len() % 4 == 1 || s.iter().any(|&c| digit(c).is_none()) {
        return false;
    }
    let mut at = 0;
    for group in s.chunks(4) {
        let mut n = 0u32;
        for (i, &c) in group.iter().enumerate() {
            n |= digit(c).expect("checked above") << (18 - 6 * i);
        }
        for &b in &n.to_be_bytes()[1..group.len()] {
            out[at] = b;
            at += 1;
        }
    }
    true
}

fn encode(uid: &[u8; 16], out: &mut String) {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    for chunk in uid.chunks(3) {
        let mut n = 0u32;
        for (i, &b) in chunk.iter().enumerate() {
            n |= u32::from(b) << (16 - 8 * i);
        }
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(ALPHABET[(n >> (18 - 6 * i) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
}

/// Logs a line about the request the variables are of.
fn log(vars: &Vars<'_>, level: Level, line: std::fmt::Arguments<'_>) {
    let ctx = match (vars.req, vars.srv) {
        (Some(req), Some(srv)) => super::request::log_ctx_of(req, srv, vars.peer),
        _ => String::new(),
    };
    crate::conn_log!(level, vars.connection, "{line}{ctx}");
}

/// nginx's `ngx_http_userid_get_uid`: the request's state, the cookie read at the first use.
fn get(loc: &UseridLoc, vars: &Vars<'_>) -> Option<Uid> {
    let slot = &vars.extras?.userid;
    if let Some(uid) = slot.get() {
        return Some(uid);
    }
    let mut uid = Uid::default();
    if let Some((value, line)) = vars.req.and_then(|r| cookie(r, loc.name())) {
        if value.len() < 22 {
            log(
                vars,
                Level::Error,
                format_args!(
                    "client sent too short userid cookie \"{}\"",
                    shoal_http::lossy(line)
                ),
            );
        } else if !decode(&value[..22], &mut uid.got) {
            uid.got = [0; 16];
            log(
                vars,
                Level::Error,
                format_args!(
                    "client sent invalid userid cookie \"{}\"",
                    shoal_http::lossy(line)
                ),
            );
        }
    }
    slot.set(uid);
    Some(uid)
}

/// The sequences of `v1` and `v2` identifiers (nginx's `sequencer_v1`, `sequencer_v2`).
static SEQUENCE_V1: AtomicU32 = AtomicU32::new(1);
static SEQUENCE_V2: AtomicU32 = AtomicU32::new(0x0303_0302);

thread_local! {
    /// nginx's `start_value`, made when the worker first needs it.
    static START: u32 = {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default();
        ((now.subsec_micros() / 20) << 16) | std::process::id()
    };
}

/// nginx's `ngx_http_userid_create_uid`: decides the identifier to set, once.
fn create(loc: &UseridLoc, vars: &Vars<'_>, mut uid: Uid) -> Uid {
    if uid.made {
        return uid;
    }
    uid.made = true;
    if present(&uid.got) {
        let reset = vars
            .user
            .and_then(|u| u.get("uid_reset"))
            .map_or("", String::as_str);
        if reset.is_empty() || reset == "0" {
            let mark = loc.mark.unwrap_or(0);
            let marked = vars
                .req
                .and_then(|r| cookie(r, loc.name()))
                .is_some_and(|(v, _)| v.len() > 23 && v[22] == mark && v[23] == b'=');
            if mark != 0 && !marked {
                uid.set = uid.got;
            }
            return uid;
        }
        uid.reset = true;
        if reset == "log" {
            let mut id = String::new();
            print(loc.name(), &uid.got, &mut id);
            log(
                vars,
                Level::Notice,
                format_args!("userid cookie \"{id}\" was reset"),
            );
        }
    }
    let now = super::request::request_unix_secs() as u32;
    let start = START.with(|s| *s);
    let words: [u32; 4] = if loc.enable() == State::V1 {
        let seq = SEQUENCE_V1.fetch_add(0x100, Ordering::Relaxed);
        [loc.service.unwrap_or(0), now, start, seq]
    } else {
        let first = match loc.service {
            Some(s) => s.to_be(),
            None => match vars.local.map(|a| a.ip()) {
                Some(std::net::IpAddr::V4(a)) => u32::from_le_bytes(a.octets()),
                Some(std::net::IpAddr::V6(a)) => {
                    let o = a.octets();
                    u32::from_le_bytes([o[12], o[13], o[14], o[15]])
                }
                None => 0,
            },
        };
        let seq = SEQUENCE_V2
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |s| {
                Some(s.wrapping_add(0x100).max(0x0303_0302))
            })
            .expect("the update always gives a value");
        [first, now.to_be(), start.to_be(), seq.to_be()]
    };
    for (i, w) in words.iter().enumerate() {
        uid.set[i * 4..i * 4 + 4].copy_from_slice(&w.to_le_bytes());
    }
    uid
}

/// The identifier to set, made if it was not (and kept for the request).
fn made(loc: &UseridLoc, vars: &Vars<'_>) -> Option<Uid> {
    let uid = create(loc, vars, get(loc, vars)?);
    vars.extras?.userid.set(uid);
    Some(uid)
}

/// nginx's cookie time (`ngx_http_cookie_time`): `Thu, 31-Dec-37 23:55:55 GMT`, the year in
/// two digits up to 2037.
fn cookie_time(secs: u64, out: &mut String) {
    let d = shoal_http::date::format_unix(secs);
    let d = std::str::from_utf8(&d).expect("an HTTP date is ASCII");
    // `Thu, 31 Dec 2037 23:55:55 GMT`
    let year = &d[12..16];
    let year = if year > "2037" { year } else { &year[2..] };
    let _ = write!(out, "{}-{}-{year}{}", &d[..7], &d[8..11], &d[16..]);
}

/// nginx's `ngx_http_userid_set_uid`: the `Set-Cookie` (and `P3P`) lines, if any.
fn set_cookie(loc: &UseridLoc, vars: &Vars<'_>, reply: &mut Reply) {
    let Some(uid) = made(loc, vars) else { return };
    if !present(&uid.set) {
        return;
    }
    let mark = loc.mark.unwrap_or(0);
    let mut c = String::with_capacity(96);
    c.push_str(loc.name());
    c.push('=');
    if !present(&uid.got) || uid.reset {
        encode(&uid.set, &mut c);
        if mark != 0 {
            c.replace_range(c.len() - 2..c.len() - 1, &(mark as char).to_string());
        }
    } else {
        // The client's own text, marked.
        let Some((value, _)) = vars.req.and_then(|r| cookie(r, loc.name())) else {
            return;
        };
        c.push_str(&shoal_http::lossy(&value[..22]));
        c.push(mark as char);
        c.push('=');
    }
    match loc.expires.unwrap_or(0) {
        0 => {}
        MAX_EXPIRES => c.push_str(MAX_EXPIRES_TEXT),
        secs => {
            c.push_str("; expires=");
            cookie_time(
                (super::request::request_unix_secs() + secs).max(0) as u64,
                &mut c,
            );
        }
    }
    c.push_str(loc.domain.as_deref().unwrap_or(""));
    c.push_str(loc.path.as_deref().unwrap_or("; path=/"));
    for (bit, text) in FLAG_TEXT {
        if loc.flags & bit != 0 {
            c.push_str(text);
        }
    }
    reply.extra.push(("Set-Cookie".into(), c.into()));
    if let Some(p3p) = loc.p3p.as_deref().filter(|p| !p.is_empty()) {
        reply.extra.push(("P3P".into(), p3p.to_string().into()));
    }
}

/// The module's place in the module list.
pub struct Module;

impl super::modules::HttpModule for Module {
    type Loc = UseridLoc;
    const DIRECTIVES: &'static [Command] = DIRECTIVES;
    const VARIABLES: &'static [&'static str] = &["uid_got", "uid_set", "uid_reset"];

    fn merge(loc: &mut UseridLoc, parent: &UseridLoc) {
        merge(&mut loc.enable, &parent.enable);
        if loc.flags == 0 {
            loc.flags = parent.flags;
        }
        merge(&mut loc.service, &parent.service);
        merge(&mut loc.name, &parent.name);
        merge(&mut loc.domain, &parent.domain);
        merge(&mut loc.path, &parent.path);
        merge(&mut loc.p3p, &parent.p3p);
        merge(&mut loc.expires, &parent.expires);
        merge(&mut loc.mark, &parent.mark);
    }

    fn variable(
        loc: Option<&UseridLoc>,
        name: &str,
        vars: &Vars<'_>,
        out: &mut String,
    ) -> Option<bool> {
        if name == "uid_reset" {
            // Changeable: a `set` gives it its value; otherwise it is empty.
            if let Some(v) = vars.user.and_then(|u| u.get("uid_reset")) {
                out.push_str(v);
            }
            return Some(true);
        }
        let Some(loc) = loc else { return Some(false) };
        let uid = match name {
            "uid_got" if loc.enable() != State::Off => get(loc, vars).map(|u| u.got),
            "uid_set" if loc.enable() >= State::V1 => made(loc, vars).map(|u| u.set),
            _ => None,
        };
        match uid {
            Some(uid) if present(&uid) => {
                print(loc.name(), &uid, out);
                Some(true)
            }
            _ => Some(false),
        }
    }

    fn header_filter(loc: &UseridLoc, cx: &Cx<'_, '_, '_>, reply: &mut Box<Reply>) {
        // nginx sets no cookie for a subrequest; shoal's (`auth_request`'s) answer's headers
        // never reach the client, so its cookie is dropped with them.
        if loc.enable() < State::V1 {
            return;
        }
        let vars = cx.r.vars_rw(cx.rw, cx.lc);
        set_cookie(loc, &vars, reply);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_v2_identifier_prints_byte_swapped_and_round_trips() {
        let uid: [u8; 16] = [127, 0, 0, 1, 0x5f, 0, 0, 1, 0, 2, 0, 3, 3, 3, 3, 2];
        let mut s = String::new();
        print("uid", &uid, &mut s);
        assert_eq!(s, "uid=0100007F0100005F0300020002030303");
        let mut b64 = String::new();
        encode(&uid, &mut b64);
        assert_eq!(b64.len(), 24);
        assert!(b64.ends_with("=="));
        let mut back = [0u8; 16];
        assert!(decode(&b64.as_bytes()[..22], &mut back));
        assert_eq!(back, uid);
    }

    #[test]
    fn bad_base64_is_refused_as_nginx_does() {
        let mut out = [0u8; 16];
        assert!(!decode(b"AAAAAAAAAAAAAAAAAAAA-A", &mut out));
        // A `=` ends it early: what came before is kept.
        assert!(decode(b"AAAAAQ==AAAAAAAAAAAAAA", &mut out));
        assert_eq!(out[..4], [0, 0, 0, 1]);
        assert!(!decode(b"AAAAA=AAAAAAAAAAAAAAAA", &mut out));
    }

    #[test]
    fn cookie_times_have_two_digit_years_until_2038() {
        let mut s = String::new();
        cookie_time(MAX_EXPIRES as u64, &mut s);
        assert_eq!(s, "Thu, 31-Dec-37 23:55:55 GMT");
        s.clear();
        cookie_time(4_102_444_800, &mut s);
        assert_eq!(s, "Fri, 01-Jan-2100 00:00:00 GMT");
    }
}
