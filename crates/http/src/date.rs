//! HTTP dates (IMF-fixdate, `Sun, 06 Nov 1994 08:49:37 GMT`): formatting without allocation, a
//! per-second cache for the `Date` header, and parsing (nginx's lenient `ngx_parse_http_time` for
//! conditional requests).
//!
//! A worker formats `Date` once per second at most: [`DateCache`] is a plain value a worker owns
//! (no locks), and [`cached_date`] is the same cache kept per thread.

use std::cell::RefCell;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Length of an IMF-fixdate.
pub const DATE_LEN: usize = 29;

const DAYS: [&[u8; 3]; 7] = [b"Thu", b"Fri", b"Sat", b"Sun", b"Mon", b"Tue", b"Wed"];
const MONTHS: [&[u8; 3]; 12] = [
    b"Jan", b"Feb", b"Mar", b"Apr", b"May", b"Jun", b"Jul", b"Aug", b"Sep", b"Oct", b"Nov", b"Dec",
];

thread_local! {
    static LAST_FORMATTED: std::cell::RefCell<DateCache> = std::cell::RefCell::new(DateCache::new());
}

/// [`format_unix`] through this thread's [`DateCache`] for file times: a hot file's
/// `Last-Modified` is formatted once, not per answer.
pub fn format_unix_recent(secs: u64) -> [u8; DATE_LEN] {
    LAST_FORMATTED.with(|c| *c.borrow_mut().at_secs(secs))
}

/// Formats `secs` since the Unix epoch as an IMF-fixdate. Times before 1970 format as the epoch;
/// years past 9999 as 9999.
pub fn format_unix(secs: u64) -> [u8; DATE_LEN] {
    // 9999-12-31T23:59:59Z; later times cannot be written in four digits.
    let secs = secs.min(253_402_300_799);
    let days = secs / 86_400;
    let rem = secs % 86_400;
    let (hour, min, sec) = (rem / 3600, rem % 3600 / 60, rem % 60);
    let weekday = DAYS[(days % 7) as usize];

    // Days to civil date (proleptic Gregorian), counting eras of 400 years from 0000-03-01.
    let z = days + 719_468;
    let era = z / 146_097;
    let doe = z % 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + u64::from(month <= 2);

    let mut out = *b"Thu, 01 Jan 1970 00:00:00 GMT";
    out[..3].copy_from_slice(weekday);
    let two = |out: &mut [u8; DATE_LEN], at: usize, v: u64| {
        out[at] = b'0' + (v / 10 % 10) as u8;
        out[at + 1] = b'0' + (v % 10) as u8;
    };
    two(&mut out, 5, day);
    out[8..11].copy_from_slice(MONTHS[(month - 1) as usize % 12]);
    two(&mut out, 12, year / 100);
    two(&mut out, 14, year % 100);
    two(&mut out, 17, hour);
    two(&mut out, 20, min);
    two(&mut out, 23, sec);
    out
}

/// Formats `t` as an IMF-fixdate.
pub fn format(t: SystemTime) -> [u8; DATE_LEN] {
    format_unix(unix_secs(t))
}

fn unix_secs(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH)
        .unwrap_or(Duration::ZERO)
        .as_secs()
}

/// Parses an HTTP date (IMF-fixdate, RFC 850 or asctime) strictly, as in an upstream's `Expires`.
/// A client's conditionals take [`parse_http_time`], nginx's lenient reading.
pub fn parse(value: &[u8]) -> Option<SystemTime> {
    let s = std::str::from_utf8(value).ok()?;
    httpdate::parse_http_date(s.trim()).ok()
}

/// `ngx_parse_http_time`: RFC 1123 (`Sun, 06 Nov 1994 08:49:37 GMT`), RFC 850
/// (`Sunday, 06-Nov-94 08:49:37 GMT`) and asctime (`Sun Nov  6 08:49:37 1994`), as leniently as
/// nginx: the weekday, the month's later letters, the zone and trailing bytes are not checked.
/// Seconds since the epoch (negative before it); nginx's conditionals take its `-1` as "no date".
pub fn parse_http_time(v: &[u8]) -> Option<i64> {
    #[derive(PartialEq)]
    enum Fmt {
        Rfc822,
        Rfc850,
        Isoc,
    }
    let at = |i: usize| v.get(i).copied().unwrap_or(0);
    let digit = |i: usize| at(i).is_ascii_digit().then(|| u64::from(at(i) - b'0'));
    let two = |i: usize| Some(digit(i)? * 10 + digit(i + 1)?);
    let four = |i: usize| Some(two(i)? * 100 + two(i + 2)?);
    let room = |p: usize, n: usize| v.len() >= p && v.len() - p >= n;

    // The weekday ends at `,` (RFC 1123/850) or a space (asctime); then spaces.
    let mut fmt = None;
    let mut p = match v.iter().position(|&c| c == b',' || c == b' ') {
        Some(i) => {
            if v[i] == b' ' {
                fmt = Some(Fmt::Isoc);
            }
            i + 1
        }
        None => return None,
    };
    while at(p) == b' ' && p < v.len() {
        p += 1;
    }
    if !room(p, 18) {
        return None;
    }
    let mut day = 0;
    if fmt.is_none() {
        day = two(p)?;
        p += 2;
        fmt = match at(p) {
            b' ' if room(p, 18) => Some(Fmt::Rfc822),
            b'-' => Some(Fmt::Rfc850),
            _ => return None,
        };
        p += 1;
    }
    let fmt = fmt.expect("set by one of the branches above");
    let month: u64 = match at(p) {
        b'J' if at(p + 1) == b'a' => 0,
        b'J' if at(p + 2) == b'n' => 5,
        b'J' => 6,
        b'F' => 1,
        b'M' if at(p + 2) == b'r' => 2,
        b'M' => 4,
        b'A' if at(p + 1) == b'p' => 3,
        b'A' => 7,
        b'S' => 8,
        b'O' => 9,
        b'N' => 10,
        b'D' => 11,
        _ => return None,
    };
    p += 3;
    if (fmt == Fmt::Rfc822 && at(p) != b' ') || (fmt == Fmt::Rfc850 && at(p) != b'-') {
        return None;
    }
    p += 1;
    let mut year = 0;
    match fmt {
        Fmt::Rfc822 => {
            year = four(p)?;
            p += 4;
        }
        Fmt::Rfc850 => {
            year = two(p)?;
            year += if year < 70 { 2000 } else { 1900 };
            p += 2;
        }
        Fmt::Isoc => {
            if at(p) == b' ' {
                p += 1;
            }
            day = digit(p)?;
            p += 1;
            if at(p) != b' ' {
                day = day * 10 + digit(p)?;
                p += 1;
            }
            if !room(p, 14) {
                return None;
            }
        }
    }
    if at(p) != b' ' {
        return None;
    }
    if at(p + 3) != b':' || at(p + 6) != b':' {
        return None;
    }
    let (hour, min, sec) = (two(p + 1)?, two(p + 4)?, two(p + 7)?);
    if fmt == Fmt::Isoc {
        if at(p + 9) != b' ' {
            return None;
        }
        year = four(p + 10)?;
    }
    const MDAY: [u64; 12] = [31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31];
    if hour > 23 || min > 59 || sec > 59 {
        return None;
    }
    if day == 29 && month == 1 {
        if year & 3 != 0 || (year % 100 == 0 && year % 400 != 0) {
            return None;
        }
    } else if day > MDAY[month as usize] {
        return None;
    }
    // Gauss' formula from March 1 as nginx computes it, in unsigned wrapping arithmetic (a year
    // 0000 or a date before 1970 wraps exactly as nginx's `uint64_t` does).
    let (month, year) = if month < 2 {
        (month + 11, year.wrapping_sub(1))
    } else {
        (month - 1, year)
    };
    let days = (365u64.wrapping_mul(year))
        .wrapping_add(year / 4)
        .wrapping_sub(year / 100)
        .wrapping_add(year / 400)
        .wrapping_add(367 * month / 12)
        .wrapping_sub(30)
        .wrapping_add(day)
        .wrapping_sub(1)
        .wrapping_sub(719_527 - 31 - 28);
    let time = days
        .wrapping_mul(86_400)
        .wrapping_add(hour * 3600 + min * 60 + sec);
    Some(time as i64)
}

/// The `Date` value, formatted at most once per second.
#[derive(Clone, Debug)]
pub struct DateCache {
    secs: u64,
    value: [u8; DATE_LEN],
    /// When (on the monotonic clock) the second `value` names ends: before it, a caller with
    /// an `Instant` in hand needs no clock read at all.
    valid_until: Option<std::time::Instant>,
}

impl Default for DateCache {
    fn default() -> DateCache {
        DateCache::new()
    }
}

impl DateCache {
    /// A cache holding the current time.
    pub fn new() -> DateCache {
        let secs = unix_secs(SystemTime::now());
        DateCache {
            secs,
            value: format_unix(secs),
            valid_until: None,
        }
    }

    /// The date at `at`, a monotonic time just read by the caller (a request's start): the
    /// wall clock is read only when `at` is past the second last formatted.
    pub fn at_instant(&mut self, at: std::time::Instant) -> &[u8; DATE_LEN] {
        if self.valid_until.is_some_and(|end| at < end) {
            return &self.value;
        }
        let wall = SystemTime::now();
        let mono = std::time::Instant::now();
        let since = wall.duration_since(UNIX_EPOCH).unwrap_or(Duration::ZERO);
        let secs = since.as_secs();
        if secs != self.secs {
            self.secs = secs;
            self.value = format_unix(secs);
        }
        let left = Duration::from_secs(1)
            .saturating_sub(Duration::from_nanos(u64::from(since.subsec_nanos())));
        self.valid_until = Some(mono + left);
        &self.value
    }

    /// The Unix time in seconds at `at`, found as [`DateCache::at_instant`] finds the date
    /// (no clock read while `at` is within the second last seen).
    pub fn secs_at_instant(&mut self, at: std::time::Instant) -> u64 {
        self.at_instant(at);
        self.secs
    }

    /// The date for now.
    pub fn now(&mut self) -> &[u8; DATE_LEN] {
        self.at(SystemTime::now())
    }

    /// The date for `t` (reformatted only when the second changed).
    pub fn at(&mut self, t: SystemTime) -> &[u8; DATE_LEN] {
        self.at_secs(unix_secs(t))
    }

    /// The date `secs` after the epoch (reformatted only when it is not the last one).
    pub fn at_secs(&mut self, secs: u64) -> &[u8; DATE_LEN] {
        if secs != self.secs {
            self.secs = secs;
            self.value = format_unix(secs);
        }
        &self.value
    }
}

thread_local! {
    static DATE: RefCell<DateCache> = RefCell::new(DateCache::new());
}

/// The current `Date` value from this thread's cache.
pub fn cached_date() -> [u8; DATE_LEN] {
    DATE.with(|d| *d.borrow_mut().now())
}

#[cfg(test)]
mod tests {

    #[test]
    fn at_instant_names_the_current_second_without_rereading_within_it() {
        let mut c = DateCache::new();
        let now = std::time::Instant::now();
        // The wall clock read just before and just after: the second the cache names is one of
        // these two (the second may turn between any two reads).
        let before = format_unix(unix_secs(SystemTime::now()));
        let first = *c.at_instant(now);
        let after = format_unix(unix_secs(SystemTime::now()));
        assert!(first == before || first == after, "{first:?}");
        // An instant before the end of that second gets the same text back.
        assert_eq!(*c.at_instant(now), first);
        // One well past it is reformatted from the wall clock.
        let before = format_unix(unix_secs(SystemTime::now()));
        let later = *c.at_instant(now + Duration::from_secs(5));
        let after = format_unix(unix_secs(SystemTime::now()));
        assert!(later == before || later == after, "{later:?}");
    }

    use super::*;

    #[test]
    fn secs_at_instant_is_the_second_the_date_names() {
        let mut c = DateCache::new();
        let now = std::time::Instant::now();
        let before = unix_secs(SystemTime::now());
        let secs = c.secs_at_instant(now);
        let after = unix_secs(SystemTime::now());
        assert!(
            secs == before || secs == after,
            "{secs} not in {before}..={after}"
        );
        assert_eq!(*c.at_instant(now), format_unix(secs));
    }

    #[test]
    fn known_dates() {
        assert_eq!(&format_unix(0), b"Thu, 01 Jan 1970 00:00:00 GMT");
        assert_eq!(&format_unix(784_111_777), b"Sun, 06 Nov 1994 08:49:37 GMT");
        assert_eq!(&format_unix(951_782_400), b"Tue, 29 Feb 2000 00:00:00 GMT");
    }

    #[test]
    fn agrees_with_httpdate() {
        let mut s = 0u64;
        while s < 253_402_300_799 {
            let t = UNIX_EPOCH + Duration::from_secs(s);
            assert_eq!(
                std::str::from_utf8(&format(t)).unwrap(),
                httpdate::fmt_http_date(t),
                "{s}"
            );
            s += 86_400 * 13 + 3_607;
        }
    }

    #[test]
    fn cache_and_parse() {
        let mut c = DateCache::new();
        let t = UNIX_EPOCH + Duration::from_secs(784_111_777);
        assert_eq!(c.at(t), b"Sun, 06 Nov 1994 08:49:37 GMT");
        assert_eq!(parse(b"Sun, 06 Nov 1994 08:49:37 GMT"), Some(t));
        assert_eq!(parse(b"garbage"), None);
        assert_eq!(cached_date().len(), DATE_LEN);
    }

    #[test]
    fn nginx_reads_up_to_the_seconds() {
        let t = Some(1_672_531_200);
        for v in [
            "Sun, 01 Jan 2023 00:00:00 GMT",
            "Sun, 01 Jan 2023 00:00:00 GMT; length=17",
            "Sun, 01 Jan 2023 00:00:00",
            "Sun, 01 Jan 2023 00:00:00xyz",
            "Sunday, 01-Jan-23 00:00:00",
            "Sun Jan  1 00:00:00 2023 junk",
            "Sun Jan 1 00:00:00 2023",
            ",01 Jan 2023 00:00:00",
            "Sun,   01 Jan 2023 00:00:00 +0100",
        ] {
            assert_eq!(parse_http_time(v.as_bytes()), t, "{v}");
        }
        assert_eq!(parse_http_time(b"Sun, 01 Jan 2023 00:00:0"), None);
        // The month by nginx's few letters: `Jxx` is July.
        assert_eq!(
            parse_http_time(b"Sun, 01 Jxx 2023 00:00:00 GMT"),
            parse_http_time(b"Sat, 01 Jul 2023 00:00:00 GMT")
        );
    }
}
