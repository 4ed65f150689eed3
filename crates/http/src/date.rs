//! HTTP dates (IMF-fixdate, `Sun, 06 Nov 1994 08:49:37 GMT`): formatting without allocation, a
//! per-second cache for the `Date` header, and parsing for conditional requests.
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
    static LAST_FORMATTED: std::cell::Cell<(u64, [u8; DATE_LEN])> =
        const { std::cell::Cell::new((u64::MAX, [0; DATE_LEN])) };
}

/// [`format_unix`], remembering the last time this thread formatted: a hot file's
/// `Last-Modified` is formatted once, not per answer.
pub fn format_unix_recent(secs: u64) -> [u8; DATE_LEN] {
    LAST_FORMATTED.with(|last| {
        let (at, text) = last.get();
        if at == secs {
            return text;
        }
        let text = format_unix(secs);
        last.set((secs, text));
        text
    })
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

/// Parses an HTTP date (IMF-fixdate, RFC 850 or asctime), as in `If-Modified-Since`.
pub fn parse(value: &[u8]) -> Option<SystemTime> {
    let s = std::str::from_utf8(value).ok()?;
    httpdate::parse_http_date(s.trim()).ok()
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

    /// The date for now.
    pub fn now(&mut self) -> &[u8; DATE_LEN] {
        self.at(SystemTime::now())
    }

    /// The date for `t` (reformatted only when the second changed).
    pub fn at(&mut self, t: SystemTime) -> &[u8; DATE_LEN] {
        let secs = unix_secs(t);
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
        let first = *c.at_instant(now);
        let wall = *DateCache::new().now();
        // The same second, or the next one if the second turned meanwhile.
        let next = format_unix(unix_secs(SystemTime::now()));
        assert!(first == wall || first == next, "{first:?}");
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
}
