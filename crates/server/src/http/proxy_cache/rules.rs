//! Whether an upstream's answer may be stored, and until when: nginx 1.22's rules, pure.
//!
//! The upstream's headers are read in order, as nginx's header handlers run
//! (`ngx_http_upstream_process_cache_control`, `_expires`, `_accel_expires`, `_set_cookie`,
//! `_vary`), each skipped when `proxy_ignore_headers` names it:
//!
//! - `Cache-Control`: `no-cache`, `no-store` or `private` anywhere in the value mark the answer
//!   "no cache"; otherwise `s-maxage=N` (else `max-age=N`) makes it fresh for N seconds (0:
//!   "no cache"; a non-digit in N: not cacheable); `stale-while-revalidate=N` and
//!   `stale-if-error=N` set how long it may be served stale. A `Cache-Control` after an
//!   `X-Accel-Expires` that set a time is read for its stale-* parts only.
//! - `Expires`: only when nothing set a time yet; a date in the past (or not a date) marks it
//!   expired.
//! - `X-Accel-Expires`: N seconds (`@N`: until unix time N) wins over the others and clears
//!   "no cache" and "expired"; 0 makes the answer not cacheable.
//! - `Set-Cookie`: not cacheable.
//! - `Vary: *`, or a `Vary` longer than 128 bytes: not cacheable; another `Vary` is kept (the
//!   object is then stored per variant of the named request headers).
//!
//! Then, if the headers gave no time, `proxy_cache_valid` gives one by status (`any` matches
//! every status; a line without codes stands for 200, 301 and 302); no time at all: not stored.

use std::time::Duration;

/// `proxy_ignore_headers` bits that bear on caching.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Ignore {
    pub cache_control: bool,
    pub expires: bool,
    pub x_accel_expires: bool,
    pub set_cookie: bool,
    pub vary: bool,
}

impl Ignore {
    /// From the location's `proxy_ignore_headers`.
    pub fn of(conf: &crate::http::upstream::UpstreamLoc) -> Ignore {
        let has = |n: &str| conf.ignores(n);
        Ignore {
            cache_control: has("Cache-Control"),
            expires: has("Expires"),
            x_accel_expires: has("X-Accel-Expires"),
            set_cookie: has("Set-Cookie"),
            vary: has("Vary"),
        }
    }
}

/// One `proxy_cache_valid` entry: a status (0: `any`) and its time.
pub type Valid = (u16, Duration);

/// An answer that may be stored.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Storable {
    /// Fresh until (unix seconds).
    pub valid_sec: i64,
    /// `stale-while-revalidate` seconds (0: none).
    pub updating_sec: i64,
    /// `stale-if-error` seconds (0: none).
    pub error_sec: i64,
    /// The `Vary` value to key variants by (empty: none).
    pub vary: String,
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len())
        .position(|w| w.eq_ignore_ascii_case(needle))
}

/// The seconds after `name=` in `value`: `Some(Ok(n))`, `Some(Err(()))` for a bad number,
/// `None` when absent. As nginx: digits up to `,`, `;`, a space or the end.
fn seconds(value: &[u8], name: &[u8]) -> Option<Result<i64, ()>> {
    let at = find(value, name)? + name.len();
    let mut n: i64 = 0;
    for &c in &value[at..] {
        match c {
            b',' | b';' | b' ' => break,
            b'0'..=b'9' => n = n.saturating_mul(10).saturating_add((c - b'0') as i64),
            _ => return Some(Err(())),
        }
    }
    Some(Ok(n))
}

/// nginx's `ngx_atoi`: digits only, at least one.
fn atoi(v: &[u8]) -> Option<i64> {
    if v.is_empty() || !v.iter().all(u8::is_ascii_digit) {
        return None;
    }
    std::str::from_utf8(v).ok()?.parse().ok()
}

/// Decides whether an answer with `status` and `headers` (in the order received) may be
/// stored at `now` (unix seconds), and until when.
pub fn decide(
    status: u16,
    headers: &[(String, String)],
    valid: &[Valid],
    ignore: Ignore,
    now: i64,
) -> Option<Storable> {
    with_valid(by_headers(headers, ignore, now)?, status, valid, now)
}

/// The second step of [`decide`]: an answer whose headers gave no time is kept for
/// `proxy_cache_valid`'s time for its status, if any.
pub fn with_valid(mut out: Storable, status: u16, valid: &[Valid], now: i64) -> Option<Storable> {
    if out.valid_sec == 0 {
        let t = valid_for(valid, status)?;
        if t.is_zero() {
            return None;
        }
        out.valid_sec = now + t.as_secs() as i64;
    }
    Some(out)
}

/// What the headers say (see the module's doc): `None` when they make the answer not
/// cacheable, else its times, `valid_sec` 0 when none of them gave one. `Some` is nginx's
/// `u->cacheable` once its header handlers have run, before `proxy_no_cache` and
/// `proxy_cache_valid` are asked: the range and not-modified filters go by it, so an answer
/// they allow may still not be stored.
pub fn by_headers(headers: &[(String, String)], ignore: Ignore, now: i64) -> Option<Storable> {
    let mut cacheable = true;
    let mut no_cache = false;
    let mut expired = false;
    let mut valid_sec: i64 = 0;
    let mut x_accel_seen = false;
    let mut out = Storable::default();
    for (name, value) in headers {
        let v = value.as_bytes();
        if name.eq_ignore_ascii_case("cache-control") {
            if ignore.cache_control {
                continue;
            }
            let timed_by_accel = valid_sec != 0 && x_accel_seen;
            if !timed_by_accel {
                if find(v, b"no-cache").is_some()
                    || find(v, b"no-store").is_some()
                    || find(v, b"private").is_some()
                {
                    no_cache = true;
                    continue;
                }
                let age = seconds(v, b"s-maxage=").or_else(|| seconds(v, b"max-age="));
                match age {
                    Some(Err(())) => return None,
                    Some(Ok(0)) => {
                        no_cache = true;
                        continue;
                    }
                    Some(Ok(n)) => {
                        valid_sec = now + n;
                        expired = false;
                    }
                    None => {}
                }
            }
            match seconds(v, b"stale-while-revalidate=") {
                Some(Err(())) => return None,
                Some(Ok(n)) => {
                    out.updating_sec = n;
                    out.error_sec = n;
                }
                None => {}
            }
            match seconds(v, b"stale-if-error=") {
                Some(Err(())) => return None,
                Some(Ok(n)) => out.error_sec = n,
                None => {}
            }
        } else if name.eq_ignore_ascii_case("expires") {
            if ignore.expires || valid_sec != 0 {
                continue;
            }
            let t = shoal_http::date::parse(v)
                .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
                .map(|d| d.as_secs() as i64);
            match t {
                Some(t) if t >= now => valid_sec = t,
                _ => expired = true,
            }
        } else if name.eq_ignore_ascii_case("x-accel-expires") {
            x_accel_seen = true;
            if ignore.x_accel_expires {
                continue;
            }
            if let Some(abs) = v.strip_prefix(b"@") {
                if let Some(n) = atoi(abs) {
                    valid_sec = n;
                    no_cache = false;
                    expired = false;
                }
                continue;
            }
            match atoi(v) {
                Some(0) => cacheable = false,
                Some(n) => {
                    valid_sec = now + n;
                    no_cache = false;
                    expired = false;
                }
                None => {}
            }
        } else if name.eq_ignore_ascii_case("set-cookie") {
            if !ignore.set_cookie {
                cacheable = false;
            }
        } else if name.eq_ignore_ascii_case("vary") {
            if ignore.vary || !cacheable {
                continue;
            }
            if value.trim() == "*" || v.len() > super::file::VARY_LEN {
                cacheable = false;
                continue;
            }
            out.vary = value.clone();
        }
    }
    if !cacheable || no_cache || expired {
        return None;
    }
    out.valid_sec = valid_sec;
    Some(out)
}

/// `proxy_cache_valid`'s time for a status (`ngx_http_file_cache_valid`): the first entry
/// for this status or `any`.
pub fn valid_for(valid: &[Valid], status: u16) -> Option<Duration> {
    valid
        .iter()
        .find(|(s, _)| *s == 0 || *s == status)
        .map(|(_, t)| *t)
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: i64 = 1_700_000_000;

    fn h(list: &[(&str, &str)]) -> Vec<(String, String)> {
        list.iter()
            .map(|(n, v)| (n.to_string(), v.to_string()))
            .collect()
    }

    fn min(n: u64) -> Duration {
        Duration::from_secs(60 * n)
    }

    fn valid_200() -> Vec<Valid> {
        vec![(200, min(10)), (301, min(10)), (302, min(10))]
    }

    fn until(status: u16, headers: &[(&str, &str)], valid: &[Valid], ig: Ignore) -> Option<i64> {
        decide(status, &h(headers), valid, ig, NOW).map(|s| s.valid_sec)
    }

    #[test]
    fn proxy_cache_valid_by_status() {
        let v = vec![(404, min(1)), (302, min(1)), (200, min(1440))];
        let ig = Ignore::default();
        assert_eq!(until(200, &[], &v, ig), Some(NOW + 86400));
        assert_eq!(until(404, &[], &v, ig), Some(NOW + 60));
        assert_eq!(until(500, &[], &v, ig), None);
        assert_eq!(until(200, &[], &[], ig), None);
        let any = vec![(200, min(5)), (0, min(1))];
        assert_eq!(until(200, &[], &any, ig), Some(NOW + 300));
        assert_eq!(until(503, &[], &any, ig), Some(NOW + 60));
        assert_eq!(until(200, &[], &[(200, Duration::ZERO)], ig), None);
    }

    #[test]
    fn cache_control_max_age_and_s_maxage() {
        let ig = Ignore::default();
        let v = valid_200();
        assert_eq!(
            until(200, &[("Cache-Control", "max-age=30")], &v, ig),
            Some(NOW + 30)
        );
        assert_eq!(
            until(
                200,
                &[("Cache-Control", "public, max-age=30, s-maxage=90")],
                &v,
                ig
            ),
            Some(NOW + 90)
        );
        // A time from the headers applies to any status, even without proxy_cache_valid.
        assert_eq!(
            until(500, &[("Cache-Control", "max-age=30")], &[], ig),
            Some(NOW + 30)
        );
        assert_eq!(until(200, &[("Cache-Control", "max-age=0")], &v, ig), None);
        assert_eq!(until(200, &[("Cache-Control", "max-age=3x")], &v, ig), None);
        assert_eq!(
            until(200, &[("cache-control", "MAX-AGE=7")], &v, ig),
            Some(NOW + 7)
        );
        // No time in it: proxy_cache_valid decides.
        assert_eq!(
            until(200, &[("Cache-Control", "public")], &v, ig),
            Some(NOW + 600)
        );
    }

    #[test]
    fn no_cache_no_store_private() {
        let ig = Ignore::default();
        let v = valid_200();
        for cc in ["no-cache", "no-store", "private", "max-age=60, private"] {
            assert_eq!(until(200, &[("Cache-Control", cc)], &v, ig), None, "{cc}");
        }
        let ig = Ignore {
            cache_control: true,
            ..Default::default()
        };
        assert_eq!(
            until(200, &[("Cache-Control", "no-store")], &v, ig),
            Some(NOW + 600)
        );
    }

    #[test]
    fn cacheable_by_headers_needs_no_valid_time() {
        let ig = Ignore::default();
        // No time anywhere: not stored, but still cacheable as far as the headers go.
        assert_eq!(until(200, &[], &[], ig), None);
        assert!(by_headers(&h(&[]), ig, NOW).is_some());
        assert!(by_headers(&h(&[("Cache-Control", "max-age=5")]), ig, NOW).is_some());
        for (n, v) in [
            ("Cache-Control", "no-store"),
            ("Cache-Control", "max-age=0"),
            ("Cache-Control", "max-age=x"),
            ("Expires", "Thu, 01 Jan 1970 00:00:01 GMT"),
            ("X-Accel-Expires", "0"),
            ("Set-Cookie", "a=1"),
            ("Vary", "*"),
        ] {
            assert!(by_headers(&h(&[(n, v)]), ig, NOW).is_none(), "{n}: {v}");
        }
    }

    #[test]
    fn expires() {
        let ig = Ignore::default();
        let v = valid_200();
        let future = httpdate::fmt_http_date(
            std::time::UNIX_EPOCH + Duration::from_secs((NOW + 120) as u64),
        );
        let past = httpdate::fmt_http_date(
            std::time::UNIX_EPOCH + Duration::from_secs((NOW - 120) as u64),
        );
        assert_eq!(until(200, &[("Expires", &future)], &v, ig), Some(NOW + 120));
        assert_eq!(until(200, &[("Expires", &past)], &v, ig), None);
        assert_eq!(until(200, &[("Expires", "0")], &v, ig), None);
        // Cache-Control's max-age wins, before or after.
        assert_eq!(
            until(
                200,
                &[("Expires", &past), ("Cache-Control", "max-age=5")],
                &v,
                ig
            ),
            Some(NOW + 5)
        );
        assert_eq!(
            until(
                200,
                &[("Cache-Control", "max-age=5"), ("Expires", &past)],
                &v,
                ig
            ),
            Some(NOW + 5)
        );
        let ig = Ignore {
            expires: true,
            ..Default::default()
        };
        assert_eq!(until(200, &[("Expires", &past)], &v, ig), Some(NOW + 600));
    }

    #[test]
    fn x_accel_expires() {
        let ig = Ignore::default();
        let v = valid_200();
        assert_eq!(
            until(200, &[("X-Accel-Expires", "50")], &v, ig),
            Some(NOW + 50)
        );
        assert_eq!(
            until(200, &[("X-Accel-Expires", "@1800000000")], &v, ig),
            Some(1_800_000_000)
        );
        assert_eq!(until(200, &[("X-Accel-Expires", "0")], &v, ig), None);
        // It wins over Cache-Control, before or after it.
        assert_eq!(
            until(
                200,
                &[("Cache-Control", "no-cache"), ("X-Accel-Expires", "50")],
                &v,
                ig
            ),
            Some(NOW + 50)
        );
        assert_eq!(
            until(
                200,
                &[("X-Accel-Expires", "50"), ("Cache-Control", "max-age=5")],
                &v,
                ig
            ),
            Some(NOW + 50)
        );
        // Not a number: no effect.
        assert_eq!(
            until(200, &[("X-Accel-Expires", "soon")], &v, ig),
            Some(NOW + 600)
        );
        let ig = Ignore {
            x_accel_expires: true,
            ..Default::default()
        };
        assert_eq!(
            until(200, &[("X-Accel-Expires", "0")], &v, ig),
            Some(NOW + 600)
        );
    }

    #[test]
    fn set_cookie() {
        let v = valid_200();
        assert_eq!(
            until(200, &[("Set-Cookie", "a=b")], &v, Ignore::default()),
            None
        );
        let ig = Ignore {
            set_cookie: true,
            ..Default::default()
        };
        assert_eq!(
            until(200, &[("Set-Cookie", "a=b")], &v, ig),
            Some(NOW + 600)
        );
    }

    #[test]
    fn vary() {
        let v = valid_200();
        let ig = Ignore::default();
        assert_eq!(until(200, &[("Vary", "*")], &v, ig), None);
        assert_eq!(until(200, &[("Vary", &"a".repeat(129))], &v, ig), None);
        let s = decide(200, &h(&[("Vary", "Accept-Encoding")]), &v, ig, NOW).unwrap();
        assert_eq!(s.vary, "Accept-Encoding");
        let ig = Ignore {
            vary: true,
            ..Default::default()
        };
        let s = decide(200, &h(&[("Vary", "*")]), &v, ig, NOW).unwrap();
        assert_eq!(s.vary, "");
    }

    #[test]
    fn stale_extensions() {
        let v = valid_200();
        let s = decide(
            200,
            &h(&[(
                "Cache-Control",
                "max-age=10, stale-while-revalidate=20, stale-if-error=30",
            )]),
            &v,
            Ignore::default(),
            NOW,
        )
        .unwrap();
        assert_eq!(
            (s.valid_sec, s.updating_sec, s.error_sec),
            (NOW + 10, 20, 30)
        );
    }

    #[test]
    fn ignore_list_is_read_by_name() {
        let conf = crate::http::upstream::UpstreamLoc {
            ignore_headers: Some(std::sync::Arc::new(vec![
                "Set-Cookie".to_string(),
                "Vary".to_string(),
            ])),
            ..Default::default()
        };
        let ig = Ignore::of(&conf);
        assert!(ig.set_cookie && ig.vary && !ig.expires);
    }
}
