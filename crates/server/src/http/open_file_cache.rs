//! `open_file_cache`, `open_file_cache_valid`, `open_file_cache_min_uses`,
//! `open_file_cache_errors`: open files, their metadata and (when asked) lookup errors kept per
//! worker, revalidated after `valid`, dropped after `inactive`. `open_file_cache_events` is read
//! and does nothing, as in nginx on Linux (it watches files with kqueue only).
//!
//! Beyond nginx: with the cache on, the bytes of small files (up to `SMALL_FILE`) are kept with
//! their entry and answered from memory, with the head, in one write; they are dropped the
//! moment revalidation sees the file change (a new metadata record). The bytes are only taken
//! when the page cache already holds them (`preadv2(RWF_NOWAIT)`), so filling this cache never
//! blocks the worker.
//!
//! Runs on the worker; the caches are thread-local, so nothing here takes a lock.

use shoal_io::fxhash::FxHashMap;
use std::cell::RefCell;
use std::io;
use std::os::fd::AsFd;
use std::path::Path;
use std::time::Duration;

use shoal_conf::{Directive, Error};
use shoal_io::open_file_cache::{OpenFileCache, OpenFileCacheConfig, OpenedFile};

use super::loc_conf;
use crate::conf::{
    err, flag_arg, number_arg, set_once, time_arg, Args, Builder, Command, Ctx, Scope,
};

pub static DIRECTIVES: &[Command] = &[
    Command::new(
        "open_file_cache",
        Ctx::HSL,
        Args::Take(1, 2),
        set_open_file_cache,
    ),
    Command::new("open_file_cache_valid", Ctx::HSL, Args::ONE, set_valid),
    Command::new(
        "open_file_cache_min_uses",
        Ctx::HSL,
        Args::ONE,
        set_min_uses,
    ),
    Command::new("open_file_cache_errors", Ctx::HSL, Args::Flag, set_errors),
    Command::new("open_file_cache_events", Ctx::HSL, Args::Flag, set_events),
];

/// The settings of one level (unset = inherited).
#[derive(Clone, Debug, Default)]
pub struct OfcLoc {
    /// `open_file_cache max=N [inactive=T]` (`Some(None)`: `off`).
    pub cache: Option<Option<(usize, Duration)>>,
    pub valid: Option<Duration>,
    pub min_uses: Option<u32>,
    pub errors: Option<bool>,
    /// `open_file_cache_events` (kept for its duplicate check).
    pub events: Option<bool>,
}

impl OfcLoc {
    pub fn merge(&mut self, p: &OfcLoc) {
        crate::conf::merge(&mut self.cache, &p.cache);
        crate::conf::merge(&mut self.valid, &p.valid);
        crate::conf::merge(&mut self.min_uses, &p.min_uses);
        crate::conf::merge(&mut self.errors, &p.errors);
    }

    /// Whether `open_file_cache` is on here.
    pub fn enabled(&self) -> bool {
        self.cache.flatten().is_some()
    }

    /// The cache's configuration, if it is on.
    fn config(&self) -> Option<OpenFileCacheConfig> {
        let (max, inactive) = self.cache.flatten()?;
        Some(OpenFileCacheConfig {
            max,
            inactive,
            valid: self.valid.unwrap_or(Duration::from_secs(60)),
            min_uses: self.min_uses.unwrap_or(1),
            errors: self.errors.unwrap_or(false),
        })
    }
}

fn ofc<'a>(s: &'a mut Scope<'_>) -> &'a mut OfcLoc {
    &mut loc_conf(s).open_file_cache
}

fn set_open_file_cache(_: &mut Builder, d: &Directive, s: &mut Scope<'_>) -> Result<(), Error> {
    if d.args[0].value == "off" {
        if d.args.len() > 1 {
            return Err(crate::conf::invalid_args(d));
        }
        return set_once(&mut ofc(s).cache, None, d);
    }
    let mut max = None;
    let mut inactive = Duration::from_secs(60);
    for a in &d.args {
        let v = a.value.as_str();
        if let Some(n) = v.strip_prefix("max=") {
            max = Some(
                crate::conf::parse_number(n)
                    .filter(|n| *n > 0)
                    .ok_or_else(|| {
                        err(d, format!("invalid \"open_file_cache\" parameter \"{v}\""))
                    })? as usize,
            );
        } else if let Some(t) = v.strip_prefix("inactive=") {
            inactive = crate::conf::parse_time(t)
                .ok_or_else(|| err(d, format!("invalid \"open_file_cache\" parameter \"{v}\"")))?;
        } else {
            return Err(err(
                d,
                format!("invalid \"open_file_cache\" parameter \"{v}\""),
            ));
        }
    }
    let Some(max) = max else {
        return Err(err(
            d,
            "\"open_file_cache\" must have the \"max\" parameter",
        ));
    };
    set_once(&mut ofc(s).cache, Some((max, inactive)), d)
}

fn set_valid(_: &mut Builder, d: &Directive, s: &mut Scope<'_>) -> Result<(), Error> {
    let t = time_arg(d, 0)?;
    set_once(&mut ofc(s).valid, t, d)
}

fn set_min_uses(_: &mut Builder, d: &Directive, s: &mut Scope<'_>) -> Result<(), Error> {
    let n = number_arg(d, 0)?;
    set_once(&mut ofc(s).min_uses, n as u32, d)
}

fn set_errors(_: &mut Builder, d: &Directive, s: &mut Scope<'_>) -> Result<(), Error> {
    set_once(&mut ofc(s).errors, flag_arg(d), d)
}

fn set_events(_: &mut Builder, d: &Directive, s: &mut Scope<'_>) -> Result<(), Error> {
    set_once(&mut ofc(s).events, flag_arg(d), d)
}

type Key = (usize, u64, u64, u32, bool);

fn key(c: &OpenFileCacheConfig) -> Key {
    (
        c.max,
        c.inactive.as_millis() as u64,
        c.valid.as_millis() as u64,
        c.min_uses,
        c.errors,
    )
}

thread_local! {
    static CACHES: RefCell<FxHashMap<Key, OpenFileCache>> = RefCell::new(FxHashMap::default());
}

/// Opens `path` through this location's cache (or directly when it is off). A directory comes
/// back with `file: None`.
pub fn open(lc: &super::LocConf, path: &Path) -> io::Result<OpenedFile> {
    let Some(config) = lc.open_file_cache.config() else {
        return shoal_io::open_file_cache::open(path);
    };
    let now = super::request::request_now();
    CACHES.with(|c| {
        c.borrow_mut()
            .entry(key(&config))
            .or_insert_with(|| OpenFileCache::new(config))
            .get(path, now)
    })
}

/// The bytes of a small file opened through the cache: from memory when its cached record
/// already holds them, else read now if the page cache has them all (never waiting for the
/// disk) and kept with the record.
pub fn small_content(
    lc: &super::LocConf,
    opened: &OpenedFile,
    limit: usize,
) -> Option<bytes::Bytes> {
    if !lc.open_file_cache.enabled() || opened.info.size as usize > limit || opened.info.is_dir {
        return None;
    }
    if let Some(bytes) = opened.info.content.get() {
        return Some(bytes.clone());
    }
    let file = opened.file.as_ref()?;
    let mut buf = vec![0u8; opened.info.size as usize];
    match shoal_io::syscall::preadv2_nowait(file.as_fd(), &mut buf, 0).ok()? {
        shoal_io::syscall::NowaitRead::Full => {}
        shoal_io::syscall::NowaitRead::Short(n) if n == buf.len() => {}
        // Empty files, cold pages, filesystems without RWF_NOWAIT: the ordinary path.
        _ => return None,
    }
    Some(
        opened
            .info
            .content
            .get_or_init(|| bytes::Bytes::from(buf))
            .clone(),
    )
}
