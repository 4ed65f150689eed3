//! Argument values as nginx reads them: sizes (`8k`, `1m`), times (`65`, `500ms`, `1h30m`),
//! flags (`on`/`off`) and numbers. The error texts are nginx's setter answers, which the
//! registry prints as `"NAME" directive invalid value in FILE:LINE`.

use std::time::Duration;

/// nginx's `ngx_parse_size`: a count of bytes with an optional `k`/`K`, `m`/`M` or `g`/`G`.
pub fn parse_size(s: &str) -> Option<u64> {
    let (digits, mult) = match s.as_bytes().last()? {
        b'k' | b'K' => (&s[..s.len() - 1], 1024),
        b'm' | b'M' => (&s[..s.len() - 1], 1024 * 1024),
        b'g' | b'G' => (&s[..s.len() - 1], 1024 * 1024 * 1024),
        _ => (s, 1),
    };
    parse_number(digits)?.checked_mul(mult)
}

/// nginx's `ngx_parse_size` exactly: a count of bytes with an optional `k`/`K` or `m`/`M`, at
/// most the largest signed size (`g` is `ngx_parse_offset`'s, which fewer directives use:
/// `limit_rate 1g` and `zone=one:1g` are refused by nginx).
pub fn parse_size_km(s: &str) -> Option<u64> {
    let (digits, mult) = match s.as_bytes().last()? {
        b'k' | b'K' => (&s[..s.len() - 1], 1024),
        b'm' | b'M' => (&s[..s.len() - 1], 1024 * 1024),
        _ => (s, 1),
    };
    let n = parse_number(digits)?;
    (n <= i64::MAX as u64 / mult).then(|| n * mult)
}

/// A non-negative decimal number (nginx's `ngx_atoi`: digits only, no sign).
pub fn parse_number(s: &str) -> Option<u64> {
    if s.is_empty() || s.len() > 19 || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

/// nginx's `ngx_parse_time`: one or more `NUMBER[UNIT]` parts, optionally separated by spaces,
/// units `ms s m h d w M y` in decreasing order; a bare number is seconds.
pub fn parse_time(s: &str) -> Option<Duration> {
    const UNITS: [(&str, u64); 8] = [
        ("y", 365 * 86_400_000),
        ("M", 30 * 86_400_000),
        ("w", 7 * 86_400_000),
        ("d", 86_400_000),
        ("h", 3_600_000),
        ("m", 60_000),
        ("s", 1_000),
        ("ms", 1),
    ];
    let mut total: u64 = 0;
    let mut rest = s.trim_start_matches(' ');
    if rest.is_empty() {
        return None;
    }
    let mut last_rank = None;
    while !rest.is_empty() {
        let n_end = rest
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(rest.len());
        if n_end == 0 {
            return None;
        }
        let n: u64 = rest[..n_end].parse().ok()?;
        rest = &rest[n_end..];
        let unit_end = rest
            .find(|c: char| !c.is_ascii_alphabetic())
            .unwrap_or(rest.len());
        let unit = &rest[..unit_end];
        rest = rest[unit_end..].trim_start_matches(' ');
        let (rank, ms) = if unit.is_empty() {
            // A bare number is seconds and must be the last part.
            if !rest.is_empty() {
                return None;
            }
            (6, 1_000)
        } else {
            let rank = UNITS.iter().position(|(u, _)| *u == unit)?;
            (rank, UNITS[rank].1)
        };
        if last_rank.is_some_and(|r| rank <= r) {
            return None;
        }
        last_rank = Some(rank);
        total = total.checked_add(n.checked_mul(ms)?)?;
    }
    Some(Duration::from_millis(total))
}

/// `on` / `off`.
pub fn parse_flag(s: &str) -> Option<bool> {
    match s {
        "on" => Some(true),
        "off" => Some(false),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes() {
        assert_eq!(parse_size("512"), Some(512));
        assert_eq!(parse_size("8k"), Some(8192));
        assert_eq!(parse_size("10M"), Some(10 << 20));
        assert_eq!(parse_size("1g"), Some(1 << 30));
        assert_eq!(parse_size("k"), None);
        assert_eq!(parse_size("-1"), None);
        assert_eq!(parse_size("1.5k"), None);
        assert_eq!(parse_size(""), None);
        assert_eq!(parse_size_km("8k"), Some(8192));
        assert_eq!(parse_size_km("1024m"), Some(1 << 30));
        assert_eq!(parse_size_km("1g"), None);
        assert_eq!(parse_size_km("9223372036854775807"), Some(i64::MAX as u64));
        assert_eq!(parse_size_km("9223372036854775807k"), None);
        assert_eq!(parse_size_km("1.5k"), None);
    }

    #[test]
    fn times() {
        assert_eq!(parse_time("65"), Some(Duration::from_secs(65)));
        assert_eq!(parse_time("500ms"), Some(Duration::from_millis(500)));
        assert_eq!(parse_time("1h30m"), Some(Duration::from_secs(5400)));
        assert_eq!(parse_time("1h 30m"), Some(Duration::from_secs(5400)));
        assert_eq!(parse_time("1d"), Some(Duration::from_secs(86400)));
        assert_eq!(parse_time("30m1h"), None, "units must decrease");
        assert_eq!(parse_time("10x"), None);
        assert_eq!(parse_time("s"), None);
        assert_eq!(parse_time(""), None);
    }

    #[test]
    fn flags_and_numbers() {
        assert_eq!(parse_flag("on"), Some(true));
        assert_eq!(parse_flag("On"), None);
        assert_eq!(parse_number("1024"), Some(1024));
        assert_eq!(parse_number("+1"), None);
        assert_eq!(parse_number("99999999999999999999"), None);
    }
}
