//! The settings every upstream protocol shares (nginx's `ngx_http_upstream_conf_t`): each
//! protocol module embeds an [`UpstreamLoc`] and names its directives with its own prefix
//! (`proxy_buffering`, `fastcgi_buffering`, ...); the setters here find the right one by that
//! prefix, so a directive's meaning and default live in one place.

use std::sync::Arc;
use std::time::Duration;

use shoal_conf::{Directive, Error};

use crate::conf::{
    err, flag_arg, invalid_value, merge, set_once, size_arg, time_arg, Builder, Scope,
};
use crate::http::{loc_conf, LocConf};

/// The protocol an upstream location speaks; it says which module's settings apply.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Proto {
    #[default]
    Http,
    Fastcgi,
    Uwsgi,
    Scgi,
    Memcached,
    Grpc,
}

impl Proto {
    /// The protocol a directive's prefix names (`fastcgi_buffering`: FastCGI).
    pub fn of_directive(name: &str) -> Proto {
        match name.split('_').next() {
            Some("fastcgi") => Proto::Fastcgi,
            Some("uwsgi") => Proto::Uwsgi,
            Some("scgi") => Proto::Scgi,
            Some("memcached") => Proto::Memcached,
            Some("grpc") => Proto::Grpc,
            _ => Proto::Http,
        }
    }

    /// The protocol's shared settings in a location.
    pub fn conf(self, lc: &LocConf) -> &UpstreamLoc {
        match self {
            Proto::Http => &lc.proxy.up,
            Proto::Fastcgi => &lc.fastcgi.up,
            Proto::Uwsgi => &lc.uwsgi.up,
            Proto::Scgi => &lc.scgi.up,
            Proto::Memcached => &lc.memcached.up,
            Proto::Grpc => &lc.grpc.up,
        }
    }

    pub fn conf_mut(self, lc: &mut LocConf) -> &mut UpstreamLoc {
        match self {
            Proto::Http => &mut lc.proxy.up,
            Proto::Fastcgi => &mut lc.m.fastcgi.up,
            Proto::Uwsgi => &mut lc.m.uwsgi.up,
            Proto::Scgi => &mut lc.m.scgi.up,
            Proto::Memcached => &mut lc.m.memcached.up,
            Proto::Grpc => &mut lc.m.grpc.up,
        }
    }
}

/// `*_next_upstream` conditions (nginx's `NGX_HTTP_UPSTREAM_FT_*`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct NextUpstream(pub u32);

impl NextUpstream {
    pub const ERROR: u32 = 1;
    pub const TIMEOUT: u32 = 1 << 1;
    pub const INVALID_HEADER: u32 = 1 << 2;
    pub const HTTP_500: u32 = 1 << 3;
    pub const HTTP_502: u32 = 1 << 4;
    pub const HTTP_503: u32 = 1 << 5;
    pub const HTTP_504: u32 = 1 << 6;
    pub const HTTP_403: u32 = 1 << 7;
    pub const HTTP_404: u32 = 1 << 8;
    pub const HTTP_429: u32 = 1 << 9;
    pub const NON_IDEMPOTENT: u32 = 1 << 10;
    /// memcached's `not_found`: a miss (404) tries the next server.
    pub const NOT_FOUND: u32 = 1 << 11;
    pub const OFF: u32 = 1 << 31;

    pub fn has(self, bit: u32) -> bool {
        self.0 & bit != 0
    }

    /// The condition an upstream status stands for, if any.
    pub fn of_status(status: u16) -> u32 {
        match status {
            500 => Self::HTTP_500,
            502 => Self::HTTP_502,
            503 => Self::HTTP_503,
            504 => Self::HTTP_504,
            403 => Self::HTTP_403,
            404 => Self::HTTP_404,
            429 => Self::HTTP_429,
            _ => 0,
        }
    }
}

crate::conf::conf_slots! {
    /// The shared location-level settings of one protocol module.
    #[derive(Clone, Debug, Default)]
    pub struct UpstreamLoc {
        pass_request_headers: bool = true,
        pass_request_body: bool = true,
        buffering: bool = true,
        request_buffering: bool = true,
        force_ranges: bool = false,
        /// `*_buffers NUMBER SIZE`.
        buffers: (usize, usize) = (8, 4096),
        buffer_size: usize = 4096,
        busy_buffers_size: usize = 8192,
        /// `*_limit_rate` (bytes per second; 0: none).
        limit_rate: u64 = 0,
        /// `*_max_temp_file_size` (0: no temporary file; the upstream waits).
        max_temp_file_size: u64 = 1024 * 1024 * 1024,
        temp_file_write_size: usize = 8192,
        connect_timeout: Duration = Duration::from_secs(60),
        send_timeout: Duration = Duration::from_secs(60),
        read_timeout: Duration = Duration::from_secs(60),
        next_upstream: NextUpstream = NextUpstream(NextUpstream::ERROR | NextUpstream::TIMEOUT),
        /// `*_next_upstream_tries` (0: no limit).
        next_upstream_tries: u64 = 0,
        /// `*_next_upstream_timeout` (0: no limit).
        next_upstream_timeout: Duration = Duration::ZERO,
        intercept_errors: bool = false,
        socket_keepalive: bool = false,
        /// `*_ignore_client_abort`: a client that closes while the answer is awaited does
        /// not end the exchange.
        ignore_client_abort: bool = false,
    }
    others {
        pub hide_header: Option<Arc<Vec<String>>>,
        pub pass_header: Option<Arc<Vec<String>>>,
        pub ignore_headers: Option<Arc<Vec<String>>>,
        pub temp_path: Option<crate::http::temp_file::TempPath>,
        /// `*_bind ADDRESS [transparent] | off` (`Some(None)`: off).
        pub bind: Option<Option<crate::upstream::bind::BindConf>>,
        /// The cache's directives (`proxy_cache`, `proxy_cache_key`, ...).
        pub cache: crate::http::proxy_cache::CacheLoc,
        /// `*_store`, `*_store_access`.
        pub store: super::store::StoreLoc,
    }
}

impl UpstreamLoc {
    pub fn merge(&mut self, parent: &UpstreamLoc) {
        self.merge_slots(parent);
        merge(&mut self.hide_header, &parent.hide_header);
        merge(&mut self.pass_header, &parent.pass_header);
        merge(&mut self.ignore_headers, &parent.ignore_headers);
        merge(&mut self.temp_path, &parent.temp_path);
        merge(&mut self.bind, &parent.bind);
        self.cache.merge(&parent.cache);
        self.store.merge(&parent.store);
    }

    /// How much of an answer is read ahead of the client: `*_buffers` in all.
    pub fn buffers_total(&self) -> usize {
        let (n, size) = self.buffers();
        n * size
    }

    /// Whether `*_ignore_headers` names `header` (as the directive spells it).
    pub fn ignores(&self, header: &str) -> bool {
        self.ignore_headers
            .as_ref()
            .is_some_and(|l| l.iter().any(|h| h.eq_ignore_ascii_case(header)))
    }

    /// Whether a header the upstream sent is passed to the client: `hidden` (one of the
    /// protocol's hidden ones) only when `*_pass_header` names it, and never one
    /// `*_hide_header` names.
    pub fn passes_known(&self, name: &[u8], hidden: bool) -> bool {
        let listed = |list: &Option<Arc<Vec<String>>>| {
            list.as_ref()
                .is_some_and(|l| l.iter().any(|h| h.as_bytes().eq_ignore_ascii_case(name)))
        };
        if listed(&self.hide_header) {
            return false;
        }
        !hidden || listed(&self.pass_header)
    }
}

/// The directives every protocol but memcached has, named with the protocol's prefix, after
/// the module's own (`$own`).
macro_rules! upstream_directives {
    ($p:literal, cache, [$($own:expr),* $(,)?]) => {
        $crate::http::upstream::conf::upstream_directives!($p, [
            $($own,)*
            $crate::conf::Command::new(concat!($p, "_cache_path"), $crate::conf::Ctx::HTTP, $crate::conf::Args::Take(2, usize::MAX), $crate::http::proxy_cache::set_cache_path),
            $crate::conf::Command::new(concat!($p, "_cache"), $crate::conf::Ctx::HSL, $crate::conf::Args::ONE, $crate::http::proxy_cache::set_cache),
            $crate::conf::Command::new(concat!($p, "_cache_key"), $crate::conf::Ctx::HSL, $crate::conf::Args::ONE, $crate::http::proxy_cache::set_key),
            $crate::conf::Command::new(concat!($p, "_cache_valid"), $crate::conf::Ctx::HSL, $crate::conf::Args::ONE_OR_MORE, $crate::http::proxy_cache::set_valid),
            $crate::conf::Command::new(concat!($p, "_cache_methods"), $crate::conf::Ctx::HSL, $crate::conf::Args::ONE_OR_MORE, $crate::http::proxy_cache::set_methods),
            $crate::conf::Command::new(concat!($p, "_cache_min_uses"), $crate::conf::Ctx::HSL, $crate::conf::Args::ONE, $crate::http::proxy_cache::set_min_uses),
            $crate::conf::Command::new(concat!($p, "_cache_bypass"), $crate::conf::Ctx::HSL, $crate::conf::Args::ONE_OR_MORE, $crate::http::proxy_cache::set_bypass),
            $crate::conf::Command::new(concat!($p, "_no_cache"), $crate::conf::Ctx::HSL, $crate::conf::Args::ONE_OR_MORE, $crate::http::proxy_cache::set_no_cache),
            $crate::conf::Command::new(concat!($p, "_cache_lock"), $crate::conf::Ctx::HSL, $crate::conf::Args::Flag, $crate::http::proxy_cache::set_lock),
            $crate::conf::Command::new(concat!($p, "_cache_lock_timeout"), $crate::conf::Ctx::HSL, $crate::conf::Args::ONE, $crate::http::proxy_cache::set_lock_timeout),
            $crate::conf::Command::new(concat!($p, "_cache_lock_age"), $crate::conf::Ctx::HSL, $crate::conf::Args::ONE, $crate::http::proxy_cache::set_lock_age),
            $crate::conf::Command::new(concat!($p, "_cache_use_stale"), $crate::conf::Ctx::HSL, $crate::conf::Args::ONE_OR_MORE, $crate::http::proxy_cache::set_use_stale),
            $crate::conf::Command::new(concat!($p, "_cache_background_update"), $crate::conf::Ctx::HSL, $crate::conf::Args::Flag, $crate::http::proxy_cache::set_background_update),
            $crate::conf::Command::new(concat!($p, "_cache_revalidate"), $crate::conf::Ctx::HSL, $crate::conf::Args::Flag, $crate::http::proxy_cache::set_revalidate),
            $crate::conf::Command::new(concat!($p, "_cache_max_range_offset"), $crate::conf::Ctx::HSL, $crate::conf::Args::ONE, $crate::http::proxy_cache::set_max_range_offset),
        ])
    };
    ($p:literal, [$($own:expr),* $(,)?]) => {
        &[
            $($own,)*
            $crate::conf::Command::new(concat!($p, "_pass_request_headers"), $crate::conf::Ctx::HSL, $crate::conf::Args::Flag, $crate::http::upstream::conf::set_pass_request_headers),
            $crate::conf::Command::new(concat!($p, "_pass_request_body"), $crate::conf::Ctx::HSL, $crate::conf::Args::Flag, $crate::http::upstream::conf::set_pass_request_body),
            $crate::conf::Command::new(concat!($p, "_hide_header"), $crate::conf::Ctx::HSL, $crate::conf::Args::ONE, $crate::http::upstream::conf::set_hide_header),
            $crate::conf::Command::new(concat!($p, "_pass_header"), $crate::conf::Ctx::HSL, $crate::conf::Args::ONE, $crate::http::upstream::conf::set_pass_header),
            $crate::conf::Command::new(concat!($p, "_ignore_headers"), $crate::conf::Ctx::HSL, $crate::conf::Args::ONE_OR_MORE, $crate::http::upstream::conf::set_ignore_headers),
            $crate::conf::Command::new(concat!($p, "_buffering"), $crate::conf::Ctx::HSL, $crate::conf::Args::Flag, $crate::http::upstream::conf::set_buffering),
            $crate::conf::Command::new(concat!($p, "_request_buffering"), $crate::conf::Ctx::HSL, $crate::conf::Args::Flag, $crate::http::upstream::conf::set_request_buffering),
            $crate::conf::Command::new(concat!($p, "_buffers"), $crate::conf::Ctx::HSL, $crate::conf::Args::TWO, $crate::http::upstream::conf::set_buffers),
            $crate::conf::Command::new(concat!($p, "_limit_rate"), $crate::conf::Ctx::HSL, $crate::conf::Args::ONE, $crate::http::upstream::conf::set_limit_rate),
            $crate::conf::Command::new(concat!($p, "_busy_buffers_size"), $crate::conf::Ctx::HSL, $crate::conf::Args::ONE, $crate::http::upstream::conf::set_busy_buffers_size),
            $crate::conf::Command::new(concat!($p, "_max_temp_file_size"), $crate::conf::Ctx::HSL, $crate::conf::Args::ONE, $crate::http::upstream::conf::set_max_temp_file_size),
            $crate::conf::Command::new(concat!($p, "_temp_file_write_size"), $crate::conf::Ctx::HSL, $crate::conf::Args::ONE, $crate::http::upstream::conf::set_temp_file_write_size),
            $crate::conf::Command::new(concat!($p, "_temp_path"), $crate::conf::Ctx::HSL, $crate::conf::Args::Take(1, 4), $crate::http::upstream::conf::set_temp_path),
            $crate::conf::Command::new(concat!($p, "_intercept_errors"), $crate::conf::Ctx::HSL, $crate::conf::Args::Flag, $crate::http::upstream::conf::set_intercept_errors),
        $crate::conf::Command::new(concat!($p, "_buffer_size"), $crate::conf::Ctx::HSL, $crate::conf::Args::ONE, $crate::http::upstream::conf::set_buffer_size),
        $crate::conf::Command::new(concat!($p, "_force_ranges"), $crate::conf::Ctx::HSL, $crate::conf::Args::Flag, $crate::http::upstream::conf::set_force_ranges),
        $crate::conf::Command::new(concat!($p, "_connect_timeout"), $crate::conf::Ctx::HSL, $crate::conf::Args::ONE, $crate::http::upstream::conf::set_connect_timeout),
        $crate::conf::Command::new(concat!($p, "_send_timeout"), $crate::conf::Ctx::HSL, $crate::conf::Args::ONE, $crate::http::upstream::conf::set_send_timeout),
        $crate::conf::Command::new(concat!($p, "_read_timeout"), $crate::conf::Ctx::HSL, $crate::conf::Args::ONE, $crate::http::upstream::conf::set_read_timeout),
        $crate::conf::Command::new(concat!($p, "_next_upstream"), $crate::conf::Ctx::HSL, $crate::conf::Args::ONE_OR_MORE, $crate::http::upstream::conf::set_next_upstream),
        $crate::conf::Command::new(concat!($p, "_next_upstream_tries"), $crate::conf::Ctx::HSL, $crate::conf::Args::ONE, $crate::http::upstream::conf::set_next_upstream_tries),
        $crate::conf::Command::new(concat!($p, "_next_upstream_timeout"), $crate::conf::Ctx::HSL, $crate::conf::Args::ONE, $crate::http::upstream::conf::set_next_upstream_timeout),
        $crate::conf::Command::new(concat!($p, "_socket_keepalive"), $crate::conf::Ctx::HSL, $crate::conf::Args::Flag, $crate::http::upstream::conf::set_socket_keepalive),
        $crate::conf::Command::new(concat!($p, "_bind"), $crate::conf::Ctx::HSL, $crate::conf::Args::Take(1, 2), $crate::http::upstream::conf::set_bind),
        $crate::conf::Command::new(concat!($p, "_ignore_client_abort"), $crate::conf::Ctx::HSL, $crate::conf::Args::Flag, $crate::http::upstream::conf::set_ignore_client_abort),
        $crate::conf::Command::new(concat!($p, "_store"), $crate::conf::Ctx::HSL, $crate::conf::Args::ONE, $crate::http::upstream::store::set_store),
        $crate::conf::Command::new(concat!($p, "_store_access"), $crate::conf::Ctx::HSL, $crate::conf::Args::Take(1, 3), $crate::http::upstream::store::set_store_access),
        ]
    };
}
pub(crate) use upstream_directives;

/// The settings the directive `d` (by its prefix) sets.
fn up<'a>(s: &'a mut Scope<'_>, d: &Directive) -> &'a mut UpstreamLoc {
    Proto::of_directive(&d.name).conf_mut(loc_conf(s))
}

pub fn set_pass_request_headers(
    _: &mut Builder,
    d: &Directive,
    s: &mut Scope<'_>,
) -> Result<(), Error> {
    set_once(&mut up(s, d).pass_request_headers, flag_arg(d), d)
}

pub fn set_pass_request_body(
    _: &mut Builder,
    d: &Directive,
    s: &mut Scope<'_>,
) -> Result<(), Error> {
    set_once(&mut up(s, d).pass_request_body, flag_arg(d), d)
}

fn push_name(list: &mut Option<Arc<Vec<String>>>, name: &str) {
    Arc::make_mut(list.get_or_insert_with(Default::default)).push(name.to_string());
}

pub fn set_hide_header(_: &mut Builder, d: &Directive, s: &mut Scope<'_>) -> Result<(), Error> {
    push_name(&mut up(s, d).hide_header, &d.args[0].value);
    Ok(())
}

pub fn set_pass_header(_: &mut Builder, d: &Directive, s: &mut Scope<'_>) -> Result<(), Error> {
    push_name(&mut up(s, d).pass_header, &d.args[0].value);
    Ok(())
}

pub fn set_ignore_headers(_: &mut Builder, d: &Directive, s: &mut Scope<'_>) -> Result<(), Error> {
    const KNOWN: &[&str] = &[
        "X-Accel-Redirect",
        "X-Accel-Expires",
        "X-Accel-Limit-Rate",
        "X-Accel-Buffering",
        "X-Accel-Charset",
        "Expires",
        "Cache-Control",
        "Set-Cookie",
        "Vary",
    ];
    let p = up(s, d);
    if p.ignore_headers.is_some() {
        return Err(crate::conf::duplicate(d));
    }
    let mut list = Vec::new();
    for a in &d.args {
        match KNOWN.iter().find(|k| k.eq_ignore_ascii_case(&a.value)) {
            Some(k) => list.push(k.to_string()),
            None => return Err(invalid_value(d, &a.value)),
        }
    }
    p.ignore_headers = Some(Arc::new(list));
    Ok(())
}

pub fn set_buffering(_: &mut Builder, d: &Directive, s: &mut Scope<'_>) -> Result<(), Error> {
    set_once(&mut up(s, d).buffering, flag_arg(d), d)
}

pub fn set_force_ranges(_: &mut Builder, d: &Directive, s: &mut Scope<'_>) -> Result<(), Error> {
    set_once(&mut up(s, d).force_ranges, flag_arg(d), d)
}

pub fn set_request_buffering(
    _: &mut Builder,
    d: &Directive,
    s: &mut Scope<'_>,
) -> Result<(), Error> {
    set_once(&mut up(s, d).request_buffering, flag_arg(d), d)
}

pub fn set_buffers(_: &mut Builder, d: &Directive, s: &mut Scope<'_>) -> Result<(), Error> {
    set_once(&mut up(s, d).buffers, crate::conf::bufs_arg(d)?, d)
}

pub fn set_buffer_size(_: &mut Builder, d: &Directive, s: &mut Scope<'_>) -> Result<(), Error> {
    let n = size_arg(d, 0)?;
    set_once(&mut up(s, d).buffer_size, n as usize, d)
}

pub fn set_limit_rate(_: &mut Builder, d: &Directive, s: &mut Scope<'_>) -> Result<(), Error> {
    let n = size_arg(d, 0)?;
    set_once(&mut up(s, d).limit_rate, n, d)
}

pub fn set_busy_buffers_size(
    _: &mut Builder,
    d: &Directive,
    s: &mut Scope<'_>,
) -> Result<(), Error> {
    let n = size_arg(d, 0)?;
    set_once(&mut up(s, d).busy_buffers_size, n as usize, d)
}

pub fn set_max_temp_file_size(
    _: &mut Builder,
    d: &Directive,
    s: &mut Scope<'_>,
) -> Result<(), Error> {
    let n = size_arg(d, 0)?;
    set_once(&mut up(s, d).max_temp_file_size, n, d)
}

pub fn set_temp_file_write_size(
    _: &mut Builder,
    d: &Directive,
    s: &mut Scope<'_>,
) -> Result<(), Error> {
    let n = size_arg(d, 0)?;
    set_once(&mut up(s, d).temp_file_write_size, n as usize, d)
}

/// `*_temp_path PATH [L1 [L2 [L3]]]`: where an answer that outgrows `*_buffers` waits for the
/// client, in nginx's numbered files and levels.
pub fn set_temp_path(b: &mut Builder, d: &Directive, s: &mut Scope<'_>) -> Result<(), Error> {
    let path = crate::http::temp_file::TempPath::parse(b, d)?;
    set_once(&mut up(s, d).temp_path, path, d)
}

pub fn set_connect_timeout(_: &mut Builder, d: &Directive, s: &mut Scope<'_>) -> Result<(), Error> {
    let t = time_arg(d, 0)?;
    set_once(&mut up(s, d).connect_timeout, t, d)
}

pub fn set_send_timeout(_: &mut Builder, d: &Directive, s: &mut Scope<'_>) -> Result<(), Error> {
    let t = time_arg(d, 0)?;
    set_once(&mut up(s, d).send_timeout, t, d)
}

pub fn set_read_timeout(_: &mut Builder, d: &Directive, s: &mut Scope<'_>) -> Result<(), Error> {
    let t = time_arg(d, 0)?;
    set_once(&mut up(s, d).read_timeout, t, d)
}

pub fn set_next_upstream(_: &mut Builder, d: &Directive, s: &mut Scope<'_>) -> Result<(), Error> {
    let memcached = Proto::of_directive(&d.name) == Proto::Memcached;
    let mut bits = 0u32;
    for a in &d.args {
        bits |= match a.value.as_str() {
            "error" => NextUpstream::ERROR,
            "timeout" => NextUpstream::TIMEOUT,
            "invalid_response" if memcached => NextUpstream::INVALID_HEADER,
            "not_found" if memcached => NextUpstream::HTTP_404,
            "invalid_header" if !memcached => NextUpstream::INVALID_HEADER,
            "http_500" if !memcached => NextUpstream::HTTP_500,
            "http_502" if !memcached => NextUpstream::HTTP_502,
            "http_503" if !memcached => NextUpstream::HTTP_503,
            "http_504" if !memcached => NextUpstream::HTTP_504,
            "http_403" if !memcached => NextUpstream::HTTP_403,
            "http_404" if !memcached => NextUpstream::HTTP_404,
            "http_429" if !memcached => NextUpstream::HTTP_429,
            "non_idempotent" => NextUpstream::NON_IDEMPOTENT,
            "off" => NextUpstream::OFF,
            other => return Err(invalid_value(d, other)),
        };
    }
    if bits & NextUpstream::OFF != 0 && bits != NextUpstream::OFF {
        return Err(err(
            d,
            format!("invalid value \"off\" in \"{}\" directive", d.name),
        ));
    }
    set_once(&mut up(s, d).next_upstream, NextUpstream(bits), d)
}

pub fn set_next_upstream_tries(
    _: &mut Builder,
    d: &Directive,
    s: &mut Scope<'_>,
) -> Result<(), Error> {
    let n = crate::conf::number_arg(d, 0)?;
    set_once(&mut up(s, d).next_upstream_tries, n, d)
}

pub fn set_next_upstream_timeout(
    _: &mut Builder,
    d: &Directive,
    s: &mut Scope<'_>,
) -> Result<(), Error> {
    let t = time_arg(d, 0)?;
    set_once(&mut up(s, d).next_upstream_timeout, t, d)
}

pub fn set_intercept_errors(
    _: &mut Builder,
    d: &Directive,
    s: &mut Scope<'_>,
) -> Result<(), Error> {
    set_once(&mut up(s, d).intercept_errors, flag_arg(d), d)
}

pub fn set_ignore_client_abort(
    _: &mut Builder,
    d: &Directive,
    s: &mut Scope<'_>,
) -> Result<(), Error> {
    set_once(&mut up(s, d).ignore_client_abort, flag_arg(d), d)
}

pub fn set_socket_keepalive(
    _: &mut Builder,
    d: &Directive,
    s: &mut Scope<'_>,
) -> Result<(), Error> {
    set_once(&mut up(s, d).socket_keepalive, flag_arg(d), d)
}

pub fn set_bind(b: &mut Builder, d: &Directive, s: &mut Scope<'_>) -> Result<(), Error> {
    let v = crate::upstream::bind::parse(b, d, |p| invalid_value(d, p))?;
    set_once(&mut up(s, d).bind, v, d)
}
