//! nginx's proxy cache: `proxy_cache_path` and the `proxy_cache*` directives, the objects on
//! disk and the keys_zone index in memory.
//!
//! - [`file`]: an object's bytes (nginx's header layout, the key, the head, the body).
//! - [`rules`]: whether an answer may be stored and until when (pure, nginx 1.22's rules).
//! - [`zone`]: one `keys_zone`: the shared index (sharded, LRU-bounded), the loader that
//!   rebuilds it from disk after start and the manager that keeps `inactive`, `max_size` and
//!   `min_free`; they run on threads of their own.
//! - [`serve`]: one request's part: the lookup, a hit served from the object, a miss's answer
//!   teed into a temp file renamed into place when complete.
//! - [`partial`]: the range filter on a miss's answer, cut from the stream as it is stored.
//!
//! A module of the server rather than a crate: it is the proxy's (it needs its configuration,
//! its reply and its upstream body) and the pure parts (md5, file, rules) are small.

pub mod file;
pub mod hot;
pub mod md5;
pub mod partial;
pub mod rules;
pub mod serve;
pub mod zone;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use shoal_conf::{Directive, Error, Span};

use crate::conf::{
    err, flag_arg, invalid_value, merge, number_arg, parse_flag, parse_size, parse_time, set_once,
    size_arg, time_arg, Args, Builder, Command, Ctx, Scope,
};
use crate::variables::Template;

const HSL: Ctx = Ctx::HSL;

pub static DIRECTIVES: &[Command] = &[
    Command::new(
        "proxy_cache_path",
        Ctx::HTTP,
        Args::Take(2, usize::MAX),
        set_cache_path,
    ),
    Command::new("proxy_cache", HSL, Args::ONE, set_cache),
    Command::new("proxy_cache_key", HSL, Args::ONE, set_key),
    Command::new("proxy_cache_valid", HSL, Args::ONE_OR_MORE, set_valid),
    Command::new("proxy_cache_methods", HSL, Args::ONE_OR_MORE, set_methods),
    Command::new("proxy_cache_min_uses", HSL, Args::ONE, set_min_uses),
    Command::new("proxy_cache_bypass", HSL, Args::ONE_OR_MORE, set_bypass),
    Command::new("proxy_no_cache", HSL, Args::ONE_OR_MORE, set_no_cache),
    Command::new("proxy_cache_lock", HSL, Args::Flag, set_lock),
    Command::new("proxy_cache_lock_timeout", HSL, Args::ONE, set_lock_timeout),
    Command::new("proxy_cache_lock_age", HSL, Args::ONE, set_lock_age),
    Command::new(
        "proxy_cache_use_stale",
        HSL,
        Args::ONE_OR_MORE,
        set_use_stale,
    ),
    Command::new(
        "proxy_cache_background_update",
        HSL,
        Args::Flag,
        set_background_update,
    ),
    Command::new("proxy_cache_revalidate", HSL, Args::Flag, set_revalidate),
    Command::new(
        "proxy_cache_convert_head",
        HSL,
        Args::Flag,
        set_convert_head,
    ),
    Command::new(
        "proxy_cache_max_range_offset",
        HSL,
        Args::ONE,
        set_max_range_offset,
    ),
    Command::new("proxy_cache_purge", HSL, Args::ONE_OR_MORE, set_purge),
    Command::new(
        "proxy_cache_status",
        Ctx::LOCATION,
        Args::NONE,
        set_status_page,
    ),
];

/// One `proxy_cache_path`.
#[derive(Clone, Debug, PartialEq)]
pub struct CachePathConf {
    pub path: PathBuf,
    /// Characters of the name per directory level, from the end (`levels=1:2` → `[1, 2]`).
    pub levels: Vec<usize>,
    pub zone: String,
    /// The keys_zone's size in bytes.
    pub zone_size: u64,
    pub inactive: Duration,
    /// `None`: unlimited.
    pub max_size: Option<u64>,
    pub min_free: u64,
    pub use_temp_path: bool,
    pub manager_files: u64,
    pub manager_sleep: Duration,
    pub manager_threshold: Duration,
    pub loader_files: u64,
    pub loader_sleep: Duration,
    pub loader_threshold: Duration,
    /// `proxy_temp_path` of the http level (where temp files go with `use_temp_path=on`).
    pub temp_path: PathBuf,
    pub span: Span,
}

impl CachePathConf {
    /// How many keys the zone holds: about 8,000 per megabyte, as nginx's node size gives.
    pub fn max_keys(&self) -> usize {
        ((self.zone_size / 128) as usize).max(16)
    }
}

/// `proxy_cache`: off, a zone, or a zone named by variables.
#[derive(Clone, Debug)]
pub enum CacheRef {
    Off,
    Zone(String),
    Var(Template),
}

/// `proxy_cache_use_stale` conditions.
pub mod stale {
    pub const ERROR: u32 = 1;
    pub const TIMEOUT: u32 = 1 << 1;
    pub const INVALID_HEADER: u32 = 1 << 2;
    pub const UPDATING: u32 = 1 << 3;
    pub const HTTP_500: u32 = 1 << 4;
    pub const HTTP_502: u32 = 1 << 5;
    pub const HTTP_503: u32 = 1 << 6;
    pub const HTTP_504: u32 = 1 << 7;
    pub const HTTP_403: u32 = 1 << 8;
    pub const HTTP_404: u32 = 1 << 9;
    pub const HTTP_429: u32 = 1 << 10;
    pub const OFF: u32 = 1 << 31;

    /// The bit of an upstream status.
    pub fn of_status(status: u16) -> u32 {
        match status {
            500 => HTTP_500,
            502 => HTTP_502,
            503 => HTTP_503,
            504 => HTTP_504,
            403 => HTTP_403,
            404 => HTTP_404,
            429 => HTTP_429,
            _ => 0,
        }
    }
}

crate::conf::conf_slots! {
    /// The proxy cache's directives at location level.
    #[derive(Clone, Debug, Default)]
    pub struct CacheLoc {
        min_uses: u64 = 1,
        lock: bool = false,
        lock_timeout: Duration = Duration::from_secs(5),
        lock_age: Duration = Duration::from_secs(5),
        /// `proxy_cache_use_stale` conditions.
        use_stale: u32 = stale::OFF,
        background_update: bool = false,
        revalidate: bool = false,
        /// `proxy_cache_convert_head`: a HEAD goes upstream as a GET.
        convert_head: bool = true,
    }
    others {
        pub cache: Option<CacheRef>,
        pub key: Option<Template>,
        /// `proxy_cache_valid` lines of one level, in order (status 0: `any`).
        pub valid: Option<Arc<Vec<rules::Valid>>>,
        /// `proxy_cache_methods` (GET and HEAD are always in).
        pub methods: Option<Methods>,
        pub bypass: Option<Arc<Vec<Template>>>,
        pub no_cache: Option<Arc<Vec<Template>>>,
        pub max_range_offset: Option<u64>,
        /// `proxy_cache_purge` conditions.
        pub purge: Option<Arc<Vec<Template>>>,
        /// `proxy_cache_status` (shoal's): this location answers the zones' figures (not
        /// inherited, as `stub_status`).
        pub status_page: Option<bool>,
    }
}

/// `$upstream_cache_status`: what the cache did for a request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CacheStatus {
    Miss,
    Bypass,
    Expired,
    Stale,
    Updating,
    Revalidated,
    Hit,
}

impl CacheStatus {
    /// The variable's text, as nginx writes it.
    pub fn as_str(self) -> &'static str {
        match self {
            CacheStatus::Miss => "MISS",
            CacheStatus::Bypass => "BYPASS",
            CacheStatus::Expired => "EXPIRED",
            CacheStatus::Stale => "STALE",
            CacheStatus::Updating => "UPDATING",
            CacheStatus::Revalidated => "REVALIDATED",
            CacheStatus::Hit => "HIT",
        }
    }
}

/// `proxy_cache_methods` bits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Methods {
    pub post: bool,
}

impl CacheLoc {
    pub fn merge(&mut self, p: &CacheLoc) {
        self.merge_slots(p);
        merge(&mut self.cache, &p.cache);
        merge(&mut self.key, &p.key);
        merge(&mut self.valid, &p.valid);
        merge(&mut self.methods, &p.methods);
        merge(&mut self.bypass, &p.bypass);
        merge(&mut self.no_cache, &p.no_cache);
        merge(&mut self.max_range_offset, &p.max_range_offset);
        merge(&mut self.purge, &p.purge);
    }

    /// Whether this location caches at all (`proxy_cache` set and not `off`).
    pub fn enabled(&self) -> bool {
        matches!(self.cache, Some(CacheRef::Zone(_) | CacheRef::Var(_)))
    }

    pub fn valid(&self) -> &[rules::Valid] {
        self.valid.as_deref().map_or(&[], Vec::as_slice)
    }

    /// Whether `method` is cached here.
    pub fn caches_method(&self, method: &str) -> bool {
        match method {
            "GET" | "HEAD" => true,
            "POST" => self.methods.is_some_and(|m| m.post),
            _ => false,
        }
    }
}

/// The cache settings of the protocol the directive's prefix names (`fastcgi_cache_valid`:
/// FastCGI's).
fn cache<'a>(s: &'a mut Scope<'_>, d: &Directive) -> &'a mut CacheLoc {
    let proto = crate::http::upstream::Proto::of_directive(&d.name);
    &mut proto.conf_mut(crate::http::loc_conf(s)).cache
}

/// `proxy_cache_path`'s `NAME=VALUE` split, or the whole word.
fn param<'a>(a: &'a str, name: &str) -> Option<&'a str> {
    a.strip_prefix(name)?.strip_prefix('=')
}

pub(crate) fn set_cache_path(
    b: &mut Builder,
    d: &Directive,
    s: &mut Scope<'_>,
) -> Result<(), Error> {
    let Scope::Http(h) = s else {
        unreachable!("proxy_cache_path is allowed in http only");
    };
    let mut c = CachePathConf {
        path: b.full_path(&d.args[0].value),
        levels: Vec::new(),
        zone: String::new(),
        zone_size: 0,
        inactive: Duration::from_secs(600),
        max_size: None,
        min_free: 0,
        use_temp_path: true,
        manager_files: 100,
        manager_sleep: Duration::from_millis(50),
        manager_threshold: Duration::from_millis(200),
        loader_files: 100,
        loader_sleep: Duration::from_millis(50),
        loader_threshold: Duration::from_millis(200),
        temp_path: PathBuf::new(),
        span: d.span.clone(),
    };
    let mut zone = false;
    for a in &d.args[1..] {
        let v = a.value.as_str();
        let bad = |what: &str| err(d, format!("invalid {what} value \"{v}\""));
        if let Some(l) = param(v, "levels") {
            let parts: Vec<&str> = l.split(':').collect();
            let ok =
                parts.len() <= 3 && parts.iter().all(|p| matches!(*p, "1" | "2")) && !l.is_empty();
            if !ok {
                return Err(err(d, format!("invalid \"levels\" \"{v}\"")));
            }
            c.levels = parts.iter().map(|p| p.parse().unwrap_or(1)).collect();
        } else if let Some(z) = param(v, "keys_zone") {
            let (name, size) = match z.rsplit_once(':') {
                Some((n, sz)) => (n, parse_size(sz)),
                None => (z, None),
            };
            let Some(size) = size.filter(|_| !name.is_empty()) else {
                return Err(err(d, format!("invalid keys zone size \"{v}\"")));
            };
            if size < 8192 {
                return Err(err(d, format!("keys zone \"{v}\" is too small")));
            }
            c.zone = name.to_string();
            c.zone_size = size;
            zone = true;
        } else if let Some(t) = param(v, "inactive") {
            c.inactive = parse_time(t).ok_or_else(|| bad("inactive"))?;
        } else if let Some(t) = param(v, "max_size") {
            c.max_size = Some(parse_size(t).ok_or_else(|| bad("max_size"))?);
        } else if let Some(t) = param(v, "min_free") {
            c.min_free = parse_size(t).ok_or_else(|| bad("min_free"))?;
        } else if let Some(t) = param(v, "use_temp_path") {
            c.use_temp_path = parse_flag(t).ok_or_else(|| {
                err(
                    d,
                    format!("invalid use_temp_path value \"{v}\", it must be \"on\" or \"off\""),
                )
            })?;
        } else if let Some(t) = param(v, "loader_files") {
            c.loader_files = crate::conf::parse_number(t).ok_or_else(|| bad("loader_files"))?;
        } else if let Some(t) = param(v, "loader_sleep") {
            c.loader_sleep = parse_time(t).ok_or_else(|| bad("loader_sleep"))?;
        } else if let Some(t) = param(v, "loader_threshold") {
            c.loader_threshold = parse_time(t).ok_or_else(|| bad("loader_threshold"))?;
        } else if let Some(t) = param(v, "manager_files") {
            c.manager_files = crate::conf::parse_number(t).ok_or_else(|| bad("manager_files"))?;
        } else if let Some(t) = param(v, "manager_sleep") {
            c.manager_sleep = parse_time(t).ok_or_else(|| bad("manager_sleep"))?;
        } else if let Some(t) = param(v, "manager_threshold") {
            c.manager_threshold = parse_time(t).ok_or_else(|| bad("manager_threshold"))?;
        } else {
            return Err(err(d, format!("invalid parameter \"{v}\"")));
        }
    }
    if !zone {
        return Err(err(
            d,
            format!("\"{}\" must have \"keys_zone\" parameter", d.name),
        ));
    }
    if let Some(other) = h.cache_paths.iter().find(|p| p.path == c.path) {
        return Err(err(
            d,
            format!(
                "the same path name \"{}\" used in {} and in {}",
                c.path.display(),
                other.span,
                d.span
            ),
        ));
    }
    if h.cache_paths.iter().any(|p| p.zone == c.zone) {
        return Err(err(d, format!("duplicate zone \"{}\"", c.zone)));
    }
    h.cache_paths.push(Arc::new(c));
    Ok(())
}

pub(crate) fn set_cache(_: &mut Builder, d: &Directive, s: &mut Scope<'_>) -> Result<(), Error> {
    let v = &d.args[0].value;
    let r = if v == "off" {
        CacheRef::Off
    } else {
        let proto = crate::http::upstream::Proto::of_directive(&d.name);
        let up = proto.conf_mut(crate::http::loc_conf(s));
        if up.store.enabled() && up.cache.cache.is_none() {
            let prefix = d.name.strip_suffix("_cache").unwrap_or("proxy");
            return Err(crate::conf::directive_err(
                d,
                &format!("is incompatible with \"{prefix}_store\""),
            ));
        }
        let t = Template::compile(v).map_err(|m| err(d, m))?;
        if t.is_static() {
            CacheRef::Zone(v.clone())
        } else {
            CacheRef::Var(t)
        }
    };
    set_once(&mut cache(s, d).cache, r, d)
}

pub(crate) fn set_key(_: &mut Builder, d: &Directive, s: &mut Scope<'_>) -> Result<(), Error> {
    let t = Template::compile(&d.args[0].value).map_err(|m| err(d, m))?;
    set_once(&mut cache(s, d).key, t, d)
}

pub(crate) fn set_valid(_: &mut Builder, d: &Directive, s: &mut Scope<'_>) -> Result<(), Error> {
    let n = d.args.len();
    let time_text = &d.args[n - 1].value;
    let Some(time) = parse_time(time_text) else {
        return Err(err(d, format!("invalid time value \"{time_text}\"")));
    };
    let mut entries = Vec::new();
    if n == 1 {
        entries.extend([(200, time), (301, time), (302, time)]);
    } else {
        for a in &d.args[..n - 1] {
            if a.value == "any" {
                entries.push((0, time));
                continue;
            }
            match a.value.parse::<u16>() {
                Ok(s) if (100..=599).contains(&s) => entries.push((s, time)),
                _ => return Err(err(d, format!("invalid status \"{}\"", a.value))),
            }
        }
    }
    let c = cache(s, d);
    Arc::make_mut(c.valid.get_or_insert_with(Default::default)).extend(entries);
    Ok(())
}

pub(crate) fn set_methods(_: &mut Builder, d: &Directive, s: &mut Scope<'_>) -> Result<(), Error> {
    let mut m = Methods { post: false };
    for a in &d.args {
        match a.value.as_str() {
            "GET" | "HEAD" => {}
            "POST" => m.post = true,
            other => return Err(invalid_value(d, other)),
        }
    }
    set_once(&mut cache(s, d).methods, m, d)
}

pub(crate) fn set_min_uses(_: &mut Builder, d: &Directive, s: &mut Scope<'_>) -> Result<(), Error> {
    let n = number_arg(d, 0)?;
    set_once(&mut cache(s, d).min_uses, n, d)
}

fn templates(d: &Directive) -> Result<Vec<Template>, Error> {
    d.args
        .iter()
        .map(|a| Template::compile(&a.value).map_err(|m| err(d, m)))
        .collect()
}

pub(crate) fn set_bypass(_: &mut Builder, d: &Directive, s: &mut Scope<'_>) -> Result<(), Error> {
    let t = templates(d)?;
    Arc::make_mut(cache(s, d).bypass.get_or_insert_with(Default::default)).extend(t);
    Ok(())
}

pub(crate) fn set_no_cache(_: &mut Builder, d: &Directive, s: &mut Scope<'_>) -> Result<(), Error> {
    let t = templates(d)?;
    Arc::make_mut(cache(s, d).no_cache.get_or_insert_with(Default::default)).extend(t);
    Ok(())
}

fn set_purge(_: &mut Builder, d: &Directive, s: &mut Scope<'_>) -> Result<(), Error> {
    let t = templates(d)?;
    set_once(&mut cache(s, d).purge, Arc::new(t), d)
}

fn set_status_page(_: &mut Builder, d: &Directive, s: &mut Scope<'_>) -> Result<(), Error> {
    set_once(&mut cache(s, d).status_page, true, d)
}

/// The `proxy_cache_status` page: one line per zone, by name, `NAME key value ...`
/// (`text/plain`; stub_status's own page stays nginx's to the byte).
pub fn status_page() -> String {
    use std::fmt::Write;
    use std::sync::atomic::Ordering::Relaxed;
    let mut zones = zone::all();
    zones.sort_by_key(|z| z.conf().zone.clone());
    let mut out = String::new();
    for z in zones {
        let c = z.conf();
        let _ = writeln!(
            out,
            "{} entries {} bytes {} max_size {} hits {} misses {} evictions {} write_errors {} cold {}",
            c.zone,
            z.entries(),
            z.bytes(),
            c.max_size.unwrap_or(0),
            z.stats.hits.get(),
            z.stats.misses.get(),
            z.stats.evictions.load(Relaxed),
            z.stats.write_errors.load(Relaxed),
            u8::from(z.is_cold()),
        );
    }
    out
}

pub(crate) fn set_lock(_: &mut Builder, d: &Directive, s: &mut Scope<'_>) -> Result<(), Error> {
    set_once(&mut cache(s, d).lock, flag_arg(d), d)
}

pub(crate) fn set_lock_timeout(
    _: &mut Builder,
    d: &Directive,
    s: &mut Scope<'_>,
) -> Result<(), Error> {
    let t = time_arg(d, 0)?;
    set_once(&mut cache(s, d).lock_timeout, t, d)
}

pub(crate) fn set_lock_age(_: &mut Builder, d: &Directive, s: &mut Scope<'_>) -> Result<(), Error> {
    let t = time_arg(d, 0)?;
    set_once(&mut cache(s, d).lock_age, t, d)
}

pub(crate) fn set_use_stale(
    _: &mut Builder,
    d: &Directive,
    s: &mut Scope<'_>,
) -> Result<(), Error> {
    let mut bits = 0u32;
    for a in &d.args {
        bits |= match a.value.as_str() {
            "error" => stale::ERROR,
            "timeout" => stale::TIMEOUT,
            "invalid_header" => stale::INVALID_HEADER,
            "updating" => stale::UPDATING,
            "http_500" => stale::HTTP_500,
            "http_502" => stale::HTTP_502,
            "http_503" => stale::HTTP_503,
            "http_504" => stale::HTTP_504,
            "http_403" => stale::HTTP_403,
            "http_404" => stale::HTTP_404,
            "http_429" => stale::HTTP_429,
            "off" => stale::OFF,
            other => return Err(invalid_value(d, other)),
        };
    }
    // nginx lets `off` stand beside other values (the bitmask keeps them all); `off` alone
    // means none.
    if bits != stale::OFF {
        bits &= !stale::OFF;
    }
    set_once(&mut cache(s, d).use_stale, bits, d)
}

pub(crate) fn set_background_update(
    _: &mut Builder,
    d: &Directive,
    s: &mut Scope<'_>,
) -> Result<(), Error> {
    set_once(&mut cache(s, d).background_update, flag_arg(d), d)
}

pub(crate) fn set_revalidate(
    _: &mut Builder,
    d: &Directive,
    s: &mut Scope<'_>,
) -> Result<(), Error> {
    set_once(&mut cache(s, d).revalidate, flag_arg(d), d)
}

fn set_convert_head(_: &mut Builder, d: &Directive, s: &mut Scope<'_>) -> Result<(), Error> {
    set_once(&mut cache(s, d).convert_head, flag_arg(d), d)
}

pub(crate) fn set_max_range_offset(
    _: &mut Builder,
    d: &Directive,
    s: &mut Scope<'_>,
) -> Result<(), Error> {
    let n = size_arg(d, 0)?;
    set_once(&mut cache(s, d).max_range_offset, n, d)
}

/// The check once everything is read (nginx's merge): a zone named literally must exist; and
/// every cache path learns where its temp files go with `use_temp_path=on`.
pub fn check(
    up: &crate::http::upstream::UpstreamLoc,
    prefix: &str,
    paths: &[Arc<CachePathConf>],
    span: Option<&Span>,
) -> Result<(), Error> {
    if let Some(CacheRef::Zone(name)) = &up.cache.cache {
        if !paths.iter().any(|p| &p.zone == name) {
            return Err(Error::new(
                format!("\"{prefix}_cache\" zone \"{name}\" is unknown"),
                span.cloned(),
            ));
        }
    }
    // The proxy has a default key; the others do not (nginx's merge).
    let on = matches!(up.cache.cache, Some(CacheRef::Zone(_) | CacheRef::Var(_)));
    if prefix != "proxy" && on && up.cache.key.is_none() {
        return Err(Error::new(
            format!("no \"{prefix}_cache_key\" for \"{prefix}_cache\""),
            span.cloned(),
        ));
    }
    Ok(())
}

/// Sets each path's temp directory: the http level's `proxy_temp_path`, else
/// `PREFIX/proxy_temp` (nginx's default).
pub fn resolve_temp_paths(
    paths: &mut [Arc<CachePathConf>],
    http_temp: Option<&PathBuf>,
    prefix: &std::path::Path,
) {
    for p in paths.iter_mut() {
        let t = http_temp
            .cloned()
            .unwrap_or_else(|| prefix.join("proxy_temp"));
        Arc::make_mut(p).temp_path = t;
    }
}
