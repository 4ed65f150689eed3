//! `aio`, `aio_write`, `directio`, `directio_alignment`, `read_ahead`, and shoal's
//! `aio_residency_check`: which thread pool a request's file I/O may use, and whether to ask
//! the page cache first.
//!
//! `aio threads[=NAME]` names a pool (NAME may hold variables: `aio threads=pool_$disk`,
//! resolved per request). `aio on` means the same as `aio threads` here: shoal uses its thread
//! pools rather than Linux native AIO (which nginx uses only with `directio`, and which
//! io_uring would replace; measured no gain for our reads, see ARCHITECTURE.md).
//! `aio_residency_check on` (the default, beyond nginx) serves page-cache hits inline and
//! posts only the cold part to the pool; `off` posts every read and sendfile, as nginx does.

use std::sync::Arc;

use shoal_conf::{Directive, Error};
use shoal_io::pool::ThreadPool;

use super::loc_conf;
use crate::conf::{err, flag_arg, set_once, size_arg, Args, Builder, Command, Ctx, Scope};
use crate::log::Level;
use crate::variables::{Template, Vars};

pub static DIRECTIVES: &[Command] = &[
    Command::new("aio", Ctx::HSL, Args::ONE, set_aio),
    Command::new("aio_write", Ctx::HSL, Args::Flag, set_aio_write),
    Command::new(
        "aio_residency_check",
        Ctx::HSL,
        Args::Flag,
        set_residency_check,
    ),
    Command::new("directio", Ctx::HSL, Args::ONE, set_directio),
    Command::new(
        "directio_alignment",
        Ctx::HSL,
        Args::ONE,
        set_directio_alignment,
    ),
    Command::new("read_ahead", Ctx::HSL, Args::ONE, set_read_ahead),
];

/// Which pool `aio threads` names.
#[derive(Clone, Debug)]
pub enum PoolName {
    Literal(String),
    /// With variables, resolved per request.
    Template(Template),
}

/// `aio`.
#[derive(Clone, Debug)]
pub enum Aio {
    Off,
    Threads(PoolName),
}

fn set_aio(b: &mut Builder, d: &Directive, s: &mut Scope<'_>) -> Result<(), Error> {
    let v = d.args[0].value.as_str();
    let aio = match v {
        "off" => Aio::Off,
        "on" | "threads" => {
            b.pool_refs.push(("default".into(), d.span.clone()));
            Aio::Threads(PoolName::Literal("default".into()))
        }
        _ => match v.strip_prefix("threads=") {
            Some(name) if !name.is_empty() => {
                let t = Template::compile(name).map_err(|m| err(d, m))?;
                if t.is_static() {
                    b.pool_refs.push((name.to_string(), d.span.clone()));
                    Aio::Threads(PoolName::Literal(name.to_string()))
                } else {
                    Aio::Threads(PoolName::Template(t))
                }
            }
            _ => {
                return Err(err(
                    d,
                    format!("invalid value \"{v}\" in \"aio\" directive"),
                ))
            }
        },
    };
    set_once(&mut loc_conf(s).aio, aio, d)
}

fn set_aio_write(_: &mut Builder, d: &Directive, s: &mut Scope<'_>) -> Result<(), Error> {
    set_once(&mut loc_conf(s).aio_write, flag_arg(d), d)
}

fn set_residency_check(_: &mut Builder, d: &Directive, s: &mut Scope<'_>) -> Result<(), Error> {
    set_once(&mut loc_conf(s).aio_residency_check, flag_arg(d), d)
}

fn set_directio(_: &mut Builder, d: &Directive, s: &mut Scope<'_>) -> Result<(), Error> {
    let v = if d.args[0].value == "off" {
        None
    } else {
        Some(size_arg(d, 0)?)
    };
    set_once(&mut loc_conf(s).directio, v, d)
}

fn set_directio_alignment(_: &mut Builder, d: &Directive, s: &mut Scope<'_>) -> Result<(), Error> {
    let n = size_arg(d, 0)?;
    if n == 0 || !n.is_power_of_two() {
        return Err(crate::conf::directive_err(d, "invalid value"));
    }
    set_once(&mut loc_conf(s).directio_alignment, n, d)
}

/// `read_ahead SIZE`: on Linux nginx only tells the kernel a file will be read in sequence
/// (`posix_fadvise(POSIX_FADV_SEQUENTIAL)`, the size unused), as `static_files.rs` does.
fn set_read_ahead(_: &mut Builder, d: &Directive, s: &mut Scope<'_>) -> Result<(), Error> {
    let lc = loc_conf(s);
    if lc.read_ahead.is_some() {
        return Err(crate::conf::duplicate(d));
    }
    lc.read_ahead = Some(size_arg(d, 0)?);
    Ok(())
}

/// nginx's check once everything is read: a pool named literally by `aio threads=NAME` must
/// exist (`default` is created when used and not defined).
pub fn check_pool_refs(b: &mut Builder) -> Result<(), Error> {
    let refs = std::mem::take(&mut b.pool_refs);
    for (name, span) in &refs {
        if name == "default" {
            if !b.main.thread_pools.iter().any(|p| p.name == "default") {
                b.main
                    .thread_pools
                    .push(crate::core::ThreadPoolConf::default_pool());
            }
            continue;
        }
        if !b.main.thread_pools.iter().any(|p| &p.name == name) {
            return Err(Error::new(
                format!("unknown thread pool \"{name}\""),
                Some(span.clone()),
            ));
        }
    }
    Ok(())
}

/// A pool named by a variable that does not exist (logged; nginx's output fails: the
/// connection closes without an answer).
#[derive(Debug)]
pub struct UnknownPool;

/// The pool a request's file I/O uses: `Ok(None)` for `aio off`; an unknown pool named by a
/// variable is an error line (`while`: what the request was doing, as nginx says it).
pub fn pool_for(
    aio: Option<&Aio>,
    vars: &Vars<'_>,
    r: &crate::http::request::Req<'_, '_>,
    while_: &str,
) -> Result<Option<Arc<ThreadPool>>, UnknownPool> {
    let name = match aio {
        None | Some(Aio::Off) => return Ok(None),
        Some(Aio::Threads(PoolName::Literal(n))) => std::borrow::Cow::Borrowed(n.as_str()),
        Some(Aio::Threads(PoolName::Template(t))) => std::borrow::Cow::Owned(vars.eval(t)),
    };
    match crate::pools::get(&name) {
        Some(p) => Ok(Some(p)),
        None => {
            crate::conn_log!(
                Level::Error,
                r.info.number,
                "thread pool \"{name}\" not found{while_}{}",
                r.log_ctx()
            );
            Err(UnknownPool)
        }
    }
}
