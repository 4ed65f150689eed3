//! `limit_rate`, `limit_rate_after` (nginx's core module), `$limit_rate` and an upstream's
//! `X-Accel-Limit-Rate`: how fast an answer goes to the client.
//!
//! [`Pacer`] is nginx's write-filter arithmetic, for the body writer to ask before each write
//! how many bytes may go now, and after it how long to wait. nginx counts in whole seconds
//! since the request started and in the bytes of the whole answer, head included:
//! `allowed = rate × (seconds elapsed + 1) − (sent − limit_rate_after)`; nothing may go while
//! that is ≤ 0 (wait `−allowed × 1000 / rate + 1` ms), and after a write of n bytes past
//! `limit_rate_after` the writer waits `n × 1000 / rate` ms. So the first second's worth goes
//! at once, and the average over the answer is the rate.
//!
//! Both directives take variables (nginx 1.17.0+); a value that is no size is logged
//! `invalid size "..."` at `error` and means 0 (no limit), as in nginx. Setting `$limit_rate`
//! or receiving `X-Accel-Limit-Rate` replaces the configured rate for the request
//! ([`Pacer::set_rate`]). The writer owns the sleeping: this type never waits itself.

use std::time::Duration;

use shoal_conf::{Directive, Error};

use crate::conf::{directive_err, parse_size_km, set_once, Args, Builder, Command, Ctx, Scope};
use crate::http::loc_conf;
use crate::variables::Template;

pub static DIRECTIVES: &[Command] = &[
    Command::new(
        "limit_rate",
        Ctx::HSL.or(Ctx::LIF),
        Args::ONE,
        set_limit_rate,
    ),
    Command::new(
        "limit_rate_after",
        Ctx::HSL.or(Ctx::LIF),
        Args::ONE,
        set_limit_rate_after,
    ),
];

/// A size that may come from variables (nginx's `ngx_http_set_complex_value_size_slot`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SizeValue {
    Fixed(u64),
    Template(Template),
}

impl SizeValue {
    /// Reads a directive's argument: a size, or text with variables evaluated per request.
    pub fn parse(d: &Directive) -> Result<SizeValue, Error> {
        let text = &d.args[0].value;
        let t = Template::compile(text).map_err(|m| crate::conf::err(d, m))?;
        if !t.is_static() {
            return Ok(SizeValue::Template(t));
        }
        parse_size_km(text)
            .map(SizeValue::Fixed)
            .ok_or_else(|| directive_err(d, "invalid value"))
    }

    /// The value for a request; an error, nginx's `invalid size "TEXT"`, when the variables
    /// made no size (the caller logs it at `error`; the value is then 0).
    pub fn eval(&self, eval: &mut dyn FnMut(&Template) -> String) -> crate::error::Result<u64> {
        match self {
            SizeValue::Fixed(n) => Ok(*n),
            SizeValue::Template(t) => {
                let text = eval(t);
                parse_size_km(&text)
                    .ok_or_else(|| crate::error::Error::invalid(format!("invalid size \"{text}\"")))
            }
        }
    }
}

/// `limit_rate` and `limit_rate_after` at location level.
#[derive(Clone, Debug, Default)]
pub struct LimitRateLoc {
    pub rate: Option<SizeValue>,
    pub after: Option<SizeValue>,
}

impl LimitRateLoc {
    /// Fills what this level left unset from its parent.
    pub fn merge(&mut self, parent: &Self) {
        crate::conf::merge(&mut self.rate, &parent.rate);
        crate::conf::merge(&mut self.after, &parent.after);
    }

    /// `limit_rate` for a request (default 0: no limit).
    pub fn rate(&self, eval: &mut dyn FnMut(&Template) -> String) -> crate::error::Result<u64> {
        self.rate.as_ref().map_or(Ok(0), |v| v.eval(eval))
    }

    /// `limit_rate_after` for a request (default 0).
    pub fn after(&self, eval: &mut dyn FnMut(&Template) -> String) -> crate::error::Result<u64> {
        self.after.as_ref().map_or(Ok(0), |v| v.eval(eval))
    }
}

/// The rate an upstream asks for with `X-Accel-Limit-Rate` (bytes per second; digits only, as
/// nginx 1.22 reads it: anything else is ignored).
pub fn x_accel_limit_rate(value: &[u8]) -> Option<u64> {
    crate::conf::parse_number(std::str::from_utf8(value).ok()?)
}

/// What the writer may do now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Allowance {
    /// No rate: write as much as it likes (still in `sendfile_max_chunk` pieces).
    Unlimited,
    /// At most this many bytes (> 0).
    Bytes(u64),
    /// Nothing yet: try again after this long.
    Wait(Duration),
}

/// One answer's pacing (nginx's `r->limit_rate`, `r->limit_rate_after`, `r->start_sec`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Pacer {
    rate: u64,
    after: u64,
    start_sec: u64,
}

impl Pacer {
    /// `rate` bytes per second (0: none) after the first `after` bytes, for a request that
    /// started at `start_sec` (wall-clock seconds, as nginx's `ngx_time()`).
    pub fn new(rate: u64, after: u64, start_sec: u64) -> Pacer {
        Pacer {
            rate,
            after,
            start_sec,
        }
    }

    /// `$limit_rate`.
    pub fn rate(&self) -> u64 {
        self.rate
    }

    /// `set $limit_rate ...` or `X-Accel-Limit-Rate`: the rate from now on.
    pub fn set_rate(&mut self, rate: u64) {
        self.rate = rate;
    }

    /// Before a write: `sent` bytes of the answer (head included) have gone, and it is
    /// `now_sec`.
    pub fn allowance(&self, sent: u64, now_sec: u64) -> Allowance {
        if self.rate == 0 {
            return Allowance::Unlimited;
        }
        let elapsed = i128::from(now_sec.saturating_sub(self.start_sec));
        let budget = i128::from(self.rate) * (elapsed + 1);
        let limit = budget - (i128::from(sent) - i128::from(self.after));
        if limit <= 0 {
            let ms = (-limit) * 1000 / i128::from(self.rate) + 1;
            return Allowance::Wait(Duration::from_millis(clamp_ms(ms)));
        }
        Allowance::Bytes(u64::try_from(limit).unwrap_or(u64::MAX))
    }

    /// After a write that took the answer from `before` to `after_write` bytes sent: how long
    /// to wait before the next one (`None`: go on at once).
    pub fn pause(&self, before: u64, after_write: u64) -> Option<Duration> {
        if self.rate == 0 {
            return None;
        }
        let from = before.saturating_sub(self.after);
        let to = after_write.saturating_sub(self.after);
        let ms = i128::from(to.saturating_sub(from)) * 1000 / i128::from(self.rate);
        (ms > 0).then(|| Duration::from_millis(clamp_ms(ms)))
    }
}

/// One answer's pacing on its connection: the [`Pacer`], the bytes written so far (the head
/// included, as nginx's `c->sent`), and the instant before which nothing may go (the pause
/// after the last write, nginx's delayed write event).
#[derive(Clone, Copy, Debug)]
pub struct Pacing {
    pacer: Pacer,
    sent: u64,
    resume: Option<std::time::Instant>,
}

impl Pacing {
    pub fn new(pacer: Pacer) -> Pacing {
        Pacing {
            pacer,
            sent: 0,
            resume: None,
        }
    }

    /// How many bytes may be written now (`Ok`), or the instant to wait for (`Err`).
    pub fn allowed(&self, now: std::time::Instant) -> Result<usize, std::time::Instant> {
        if let Some(at) = self.resume.filter(|&at| at > now) {
            return Err(at);
        }
        match self.pacer.allowance(self.sent, unix_secs()) {
            Allowance::Unlimited => Ok(usize::MAX),
            Allowance::Bytes(n) => Ok(usize::try_from(n).unwrap_or(usize::MAX)),
            Allowance::Wait(d) => Err(now + d),
        }
    }

    /// The rate (`$limit_rate`).
    pub fn rate(&self) -> u64 {
        self.pacer.rate()
    }

    /// `n` bytes were written at `now`: the pause before the next write starts.
    pub fn wrote(&mut self, n: usize, now: std::time::Instant) {
        let before = self.sent;
        self.sent += n as u64;
        self.resume = self.pacer.pause(before, self.sent).map(|d| now + d);
    }
}

/// The wall clock's whole seconds (nginx's `ngx_time()`).
pub fn unix_secs() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// The pacing of a request's answer, as nginx's write filter settles it at the first write:
/// an upstream's `X-Accel-Limit-Rate` (unless `proxy_ignore_headers` names it), else
/// `$limit_rate` set by `set`, else the location's `limit_rate`; then
/// `limit_rate_after`. `None`: no rate.
pub fn pacing_for(
    lc: &crate::http::LocConf,
    set_rate: Option<&str>,
    upstream: Option<&crate::http::upstream::record::Record>,
    vars: &crate::variables::Vars<'_>,
    log: &dyn Fn(&str),
) -> Option<Pacing> {
    let mut eval = |t: &Template| vars.eval(t);
    let accel = upstream.and_then(|rec| accel_rate(lc, rec));
    // The header comes after any `set` (which runs in the rewrite phase), so it wins, as in
    // nginx (`ngx_http_upstream_process_limit_rate` overwrites `r->limit_rate`).
    let rate = match (set_rate, accel) {
        (_, Some(n)) => n,
        (Some(text), None) => parse_size_km(text).unwrap_or_else(|| {
            log(&format!("invalid size \"{text}\""));
            0
        }),
        (None, None) => lc.limit_rate.rate(&mut eval).unwrap_or_else(|e| {
            log(&e);
            0
        }),
    };
    if rate == 0 {
        return None;
    }
    let after = lc.limit_rate.after(&mut eval).unwrap_or_else(|e| {
        log(&e);
        0
    });
    let start = vars.start;
    let elapsed = std::time::Instant::now().saturating_duration_since(start);
    let start_sec = unix_secs().saturating_sub(elapsed.as_secs());
    Some(Pacing::new(Pacer::new(rate, after, start_sec)))
}

/// The rate an upstream's answer asks for with `X-Accel-Limit-Rate`, unless
/// `proxy_ignore_headers` names the header.
#[inline]
pub fn accel_rate(
    lc: &crate::http::LocConf,
    upstream: &crate::http::upstream::record::Record,
) -> Option<u64> {
    let value = upstream.answer_header("x-accel-limit-rate")?;
    if lc.proxy.ignores("X-Accel-Limit-Rate") {
        return None;
    }
    x_accel_limit_rate(value)
}

fn clamp_ms(ms: i128) -> u64 {
    u64::try_from(ms).unwrap_or(u64::MAX)
}

fn set_limit_rate(_: &mut Builder, d: &Directive, s: &mut Scope<'_>) -> Result<(), Error> {
    let v = SizeValue::parse(d)?;
    set_once(&mut loc_conf(s).limit_rate.rate, v, d)
}

fn set_limit_rate_after(_: &mut Builder, d: &Directive, s: &mut Scope<'_>) -> Result<(), Error> {
    let v = SizeValue::parse(d)?;
    set_once(&mut loc_conf(s).limit_rate.after, v, d)
}

/// `limit_rate`'s place in the module list (the body writer paces by it).
pub struct Module;

impl crate::http::modules::HttpModule for Module {
    type Loc = LimitRateLoc;
    const DIRECTIVES: &'static [crate::conf::Command] = DIRECTIVES;
    const VARIABLES: &'static [&'static str] = &["limit_rate"];

    /// `$limit_rate`: an upstream's `X-Accel-Limit-Rate` (it comes after any `set`), else what
    /// `set` gave it, else the rate the answer was paced by once it is written (the access
    /// log), else 0 (as nginx's before its write filter ran).
    fn variable(
        _loc: Option<&LimitRateLoc>,
        _name: &str,
        vars: &crate::variables::Vars<'_>,
        out: &mut String,
    ) -> Option<bool> {
        // An upstream's `X-Accel-Limit-Rate` sets it as the head arrives (nginx's
        // `r->limit_rate`), before the header filters: `add_header` sees it.
        let accel = vars
            .upstream
            .filter(|_| {
                !vars
                    .lc
                    .is_some_and(|lc| lc.proxy.ignores("X-Accel-Limit-Rate"))
            })
            .and_then(|rec| rec.answer_header("x-accel-limit-rate"))
            .and_then(x_accel_limit_rate);
        if let Some(n) = accel {
            out.push_str(&n.to_string());
            return Some(true);
        }
        if let Some(v) = vars.user.and_then(|u| u.get("limit_rate")) {
            out.push_str(&parse_size_km(v).unwrap_or(0).to_string());
            return Some(true);
        }
        if vars.extras.is_some_and(|e| e.var("limit_rate", out)) {
            return Some(true);
        }
        out.push('0');
        Some(true)
    }

    fn merge(loc: &mut LimitRateLoc, parent: &LimitRateLoc) {
        loc.merge(parent);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_second_goes_at_once_then_the_rate() {
        // limit_rate 1000: a request that started at t=100.
        let p = Pacer::new(1000, 0, 100);
        assert_eq!(p.allowance(0, 100), Allowance::Bytes(1000));
        // 1000 bytes written: wait 1000 ms before the next write.
        assert_eq!(p.pause(0, 1000), Some(Duration::from_millis(1000)));
        // Still in the first second with 1000 sent: nothing more; 1 ms past the budget.
        assert_eq!(
            p.allowance(1000, 100),
            Allowance::Wait(Duration::from_millis(1))
        );
        assert_eq!(p.allowance(1000, 101), Allowance::Bytes(1000));
        // Ahead of the budget by 500 bytes: 501 ms.
        assert_eq!(
            p.allowance(2500, 101),
            Allowance::Wait(Duration::from_millis(501))
        );
        // Behind (a slow client): the unspent budget adds up.
        assert_eq!(p.allowance(1000, 104), Allowance::Bytes(4000));
    }

    #[test]
    fn limit_rate_after_is_free() {
        let p = Pacer::new(1000, 500, 0);
        assert_eq!(p.allowance(0, 0), Allowance::Bytes(1500));
        // 0 → 800: only the 300 past `after` cost time.
        assert_eq!(p.pause(0, 800), Some(Duration::from_millis(300)));
        assert_eq!(p.pause(0, 400), None);
        assert_eq!(p.pause(800, 1800), Some(Duration::from_millis(1000)));
    }

    #[test]
    fn no_rate_no_limit_and_rate_changes() {
        let mut p = Pacer::new(0, 0, 0);
        assert_eq!(p.allowance(1 << 40, 0), Allowance::Unlimited);
        assert_eq!(p.pause(0, 1 << 40), None);
        p.set_rate(2048);
        assert_eq!(p.rate(), 2048);
        assert_eq!(p.allowance(0, 0), Allowance::Bytes(2048));
        // A clock that went back counts as no time elapsed.
        let p = Pacer::new(100, 0, 50);
        assert_eq!(p.allowance(0, 10), Allowance::Bytes(100));
    }

    #[test]
    fn values_and_headers() {
        let fixed = SizeValue::Fixed(10 * 1024);
        assert_eq!(fixed.eval(&mut |_| unreachable!()).unwrap(), 10240);
        let t = SizeValue::Template(Template::compile("$arg_r").unwrap());
        assert_eq!(t.eval(&mut |_| "2k".into()).unwrap(), 2048);
        let e = t.eval(&mut |_| "fast".into()).unwrap_err();
        assert_eq!(e, "invalid size \"fast\"");
        assert_eq!(e.kind(), crate::error::Kind::Invalid);
        assert_eq!(
            t.eval(&mut |_| "1g".into()).unwrap_err(),
            "invalid size \"1g\""
        );
        let lc = LimitRateLoc::default();
        assert_eq!(lc.rate(&mut |_| unreachable!()).unwrap(), 0);
        assert_eq!(lc.after(&mut |_| unreachable!()).unwrap(), 0);
        assert_eq!(x_accel_limit_rate(b"4096"), Some(4096));
        assert_eq!(x_accel_limit_rate(b"4k"), None);
        assert_eq!(x_accel_limit_rate(b"off"), None);
        assert_eq!(x_accel_limit_rate(b""), None);
    }
}
