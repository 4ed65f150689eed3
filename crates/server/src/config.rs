//! A whole configuration: parsed, walked through the registry, merged, checked. What the
//! master swaps on reload.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use shoal_conf::{Error, Parsed, SourceFile};

use crate::conf::{Builder, Ctx, Scope, Warning};
use crate::core::{MainConf, DEFAULT_PID};
use crate::event::EventsConf;
use crate::http::HttpConf;
use crate::log::ErrorLogConf;

/// A configuration ready to run.
#[derive(Clone, Debug)]
pub struct Config {
    pub main: MainConf,
    pub events: EventsConf,
    pub http: Option<HttpConf>,
    /// `stream { }`, ready to serve.
    pub stream: Option<Arc<crate::stream::StreamConf>>,
    /// The `error_log` lines of the main context (empty: the default error log).
    pub error_logs: Vec<ErrorLogConf>,
    /// Every file read, for `-T`.
    pub files: Vec<SourceFile>,
    pub prefix: PathBuf,
    /// `[warn]` lines to print once the configuration is accepted.
    pub warnings: Vec<Warning>,
}

impl Config {
    /// The pid file's path.
    pub fn pid_path(&self) -> PathBuf {
        self.main
            .pid
            .clone()
            .unwrap_or_else(|| self.prefix.join(DEFAULT_PID))
    }
}

/// Where a configuration comes from.
pub struct Source<'a> {
    /// The main file; `None` with `builtin` text.
    pub file: &'a Path,
    /// The text to parse instead of reading `file` (the built-in default configuration).
    pub builtin: Option<&'a str>,
    /// `-p`: relative paths in directives resolve against it.
    pub prefix: &'a Path,
    /// `-g`: directives applied before the file's, in the main context.
    pub globals: Option<&'a str>,
}

/// Reads, checks and merges a configuration. The error is the first nginx would report.
pub fn load(src: &Source<'_>) -> Result<Config, Error> {
    let conf_prefix = src
        .file
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from("/"));
    crate::variables::begin_config();
    let globals = match src.globals {
        Some(g) => Some(shoal_conf::parse_str(g, None, &conf_prefix)?),
        None => None,
    };
    let parsed: Parsed = match src.builtin {
        Some(text) => shoal_conf::parse_str(text, Some(src.file), &conf_prefix)?,
        None => shoal_conf::parse_file(src.file, &conf_prefix)?,
    };
    let mut b = Builder::new(src.prefix.to_path_buf(), conf_prefix);
    let (events, http, stream) = match build(&mut b, globals.as_ref(), &parsed) {
        Ok(parts) => parts,
        Err(e) => {
            FAILED_WARNINGS.with(|w| *w.borrow_mut() = std::mem::take(&mut b.warnings));
            return Err(e);
        }
    };
    Ok(Config {
        main: b.main,
        events,
        http,
        stream,
        error_logs: b.error_logs,
        files: parsed.files,
        prefix: b.prefix,
        warnings: b.warnings,
    })
}

type Built = (
    EventsConf,
    Option<HttpConf>,
    Option<Arc<crate::stream::StreamConf>>,
);

/// The directives walked, merged and checked.
fn build(b: &mut Builder, globals: Option<&Parsed>, parsed: &Parsed) -> Result<Built, Error> {
    if let Some(g) = globals {
        b.walk(&g.directives, Ctx::MAIN, &mut Scope::Main)?;
    }
    b.walk(&parsed.directives, Ctx::MAIN, &mut Scope::Main)?;
    crate::core::default_user(b)?;
    crate::http::aio::check_pool_refs(b)?;
    crate::variables::end_config().map_err(|m| Error::new(m, None))?;
    crate::http::limit_zone::finish(b)?;
    crate::http::temp_file::create_paths(b)?;
    let Some(events) = b.events.take() else {
        return Err(Error::new("no \"events\" section in configuration", None));
    };
    let mut http = b.http.take();
    if let Some(h) = &mut http {
        h.finish(b)?;
    }
    let stream = match b.stream.take() {
        Some(mut s) => {
            s.finish(b)?;
            Some(Arc::new(s))
        }
        None => None,
    };
    Ok((events, http, stream))
}

thread_local! {
    /// The `[warn]` lines of the last configuration [`load`] refused on this thread.
    static FAILED_WARNINGS: std::cell::RefCell<Vec<Warning>> = const {
        std::cell::RefCell::new(Vec::new())
    };
}

/// The warnings met before the error of a configuration [`load`] refused: nginx logs each as
/// it reads it, so they come before its `[emerg]`.
pub fn take_failed_warnings() -> Vec<Warning> {
    FAILED_WARNINGS.with(|w| std::mem::take(&mut *w.borrow_mut()))
}
