//! The rest of nginx's http core directives: request limits and timeouts, `alias`,
//! `try_files`, `error_page`, `return`, `internal`, `add_header`, `expires`, `etag`,
//! `if_modified_since`, the redirect knobs, `sendfile_max_chunk`, `output_buffers`, `max_ranges`,
//! `log_not_found`, `recursive_error_pages`, `disable_symlinks`, `merge_slashes` and the header buffers.
//!
//! Only reading them lives here; `phases.rs` and `conn.rs` apply them.

use std::sync::Arc;

use shoal_conf::{Directive, Error};

use super::{loc_conf, srv_conf, DocRoot};
use crate::conf::{
    directive_err, err, flag_arg, invalid_value, set_once, size_arg, time_arg, Args, Builder,
    Command, Ctx, Scope,
};
use crate::variables::Template;

const HSL: Ctx = Ctx::HSL;
const HS: Ctx = Ctx::HTTP.or(Ctx::SERVER);

pub static DIRECTIVES: &[Command] = &[
    Command::new("alias", Ctx::LOCATION, Args::ONE, set_alias),
    Command::new(
        "try_files",
        Ctx::SERVER.or(Ctx::LOCATION),
        Args::Take(2, usize::MAX),
        set_try_files,
    ),
    Command::new(
        "error_page",
        HSL.or(Ctx::LIF),
        Args::Take(2, usize::MAX),
        set_error_page,
    ),
    Command::new("internal", Ctx::LOCATION, Args::NONE, set_internal),
    Command::new(
        "add_header",
        HSL.or(Ctx::LIF),
        Args::Take(2, 3),
        set_add_header,
    ),
    Command::new("expires", HSL.or(Ctx::LIF), Args::Take(1, 2), set_expires),
    Command::new("etag", HSL, Args::Flag, set_etag),
    Command::new("if_modified_since", HSL, Args::ONE, set_if_modified_since),
    Command::new("absolute_redirect", HSL, Args::Flag, set_absolute_redirect),
    Command::new("port_in_redirect", HSL, Args::Flag, set_port_in_redirect),
    Command::new(
        "server_name_in_redirect",
        HSL,
        Args::Flag,
        set_server_name_in_redirect,
    ),
    Command::new("log_not_found", HSL, Args::Flag, set_log_not_found),
    Command::new(
        "recursive_error_pages",
        HSL,
        Args::Flag,
        set_recursive_error_pages,
    ),
    Command::new(
        "disable_symlinks",
        HSL,
        Args::Take(1, 2),
        set_disable_symlinks,
    ),
    Command::new(
        "client_max_body_size",
        HSL,
        Args::ONE,
        set_client_max_body_size,
    ),
    Command::new(
        "client_body_buffer_size",
        HSL,
        Args::ONE,
        set_client_body_buffer_size,
    ),
    Command::new(
        "client_body_timeout",
        HSL,
        Args::ONE,
        set_client_body_timeout,
    ),
    Command::new("send_timeout", HSL, Args::ONE, set_send_timeout),
    Command::new("keepalive_time", HSL, Args::ONE, set_keepalive_time),
    Command::new(
        "keepalive_disable",
        HSL,
        Args::ONE_OR_MORE,
        set_keepalive_disable,
    ),
    Command::new("lingering_close", HSL, Args::ONE, set_lingering_close),
    Command::new("lingering_time", HSL, Args::ONE, set_lingering_time),
    Command::new("lingering_timeout", HSL, Args::ONE, set_lingering_timeout),
    Command::new(
        "reset_timedout_connection",
        HSL,
        Args::Flag,
        set_reset_timedout_connection,
    ),
    Command::new("sendfile_max_chunk", HSL, Args::ONE, set_sendfile_max_chunk),
    Command::new("output_buffers", HSL, Args::TWO, set_output_buffers),
    Command::new("max_ranges", HSL, Args::ONE, set_max_ranges),
    Command::new(
        "client_header_buffer_size",
        HS,
        Args::ONE,
        set_client_header_buffer_size,
    ),
    Command::new(
        "large_client_header_buffers",
        HS,
        Args::TWO,
        set_large_client_header_buffers,
    ),
    Command::new(
        "ignore_invalid_headers",
        HS,
        Args::Flag,
        set_ignore_invalid_headers,
    ),
    Command::new(
        "underscores_in_headers",
        HS,
        Args::Flag,
        set_underscores_in_headers,
    ),
    Command::new("merge_slashes", HS, Args::Flag, set_merge_slashes),
];

/// The last parameter of `try_files`.
#[derive(Clone, Debug)]
pub enum TryFallback {
    /// `=404`
    Code(u16),
    /// `@name`
    Named(String),
    /// A URI, internally redirected to.
    Uri(Template),
}

/// `try_files file ... fallback`.
#[derive(Clone, Debug)]
pub struct TryFiles {
    pub files: Vec<TryFile>,
    pub fallback: TryFallback,
}

/// One `file` of `try_files`.
#[derive(Clone, Debug)]
pub struct TryFile {
    /// The name, without the trailing `/` of a directory test (nginx strips it: `$uri/` for
    /// `/dir` tests `/dir` and, when it is a directory, serves `/dir`, which then redirects).
    pub name: Template,
    /// Written with a trailing `/`: only a directory matches; otherwise only a file does.
    pub dir: bool,
}

/// `error_page code ... [=[response]] uri`.
#[derive(Clone, Debug)]
pub struct ErrorPage {
    pub codes: Vec<u16>,
    /// `None`: keep the code; `Some(None)`: `=` (the target's status); `Some(Some(c))`: `=c`.
    pub answer: Option<Option<u16>>,
    pub target: Template,
}

/// `return code [text|URL]` / `return URL`.
#[derive(Clone, Debug)]
pub struct Return {
    pub code: u16,
    pub text: Option<Template>,
}

/// `add_header name value [always]`.
#[derive(Clone, Debug)]
pub struct AddHeader {
    /// Kept for the life of the process (see `conf::intern`): answers carry it uncopied.
    pub name: &'static str,
    pub value: Template,
    pub always: bool,
}

/// `expires`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Expires {
    Off,
    Epoch,
    Max,
    /// Seconds from now (negative: in the past), or from the file's time with `modified`.
    After {
        secs: i64,
        modified: bool,
    },
    /// `@15h30m`: at this time of day.
    Daily(i64),
    /// A value with variables (nginx 1.7.9+), read per request as the directive's value is
    /// (after `modified` when written): `epoch`, `max`, `off`, `@TIME`, `[+|-]TIME`. A value
    /// that reads as none of them sets no header, as in nginx.
    Var {
        value: Arc<Template>,
        modified: bool,
    },
}

impl Expires {
    /// The value for a request: a `Var` read now (`None`: no header), the others as they are.
    pub fn eval(&self, eval: impl FnOnce(&Template) -> String) -> Option<Expires> {
        match self {
            Expires::Var { value, modified } => parse_expires(&eval(value), *modified).ok(),
            other => Some(other.clone()),
        }
    }
}

/// nginx's `ngx_http_parse_expires`: the value of `expires` (after `modified`), or its
/// error's words.
pub fn parse_expires(v: &str, modified: bool) -> Result<Expires, &'static str> {
    if !modified {
        match v {
            "epoch" => return Ok(Expires::Epoch),
            "max" => return Ok(Expires::Max),
            "off" => return Ok(Expires::Off),
            _ => {}
        }
    }
    let (daily, minus, t) = if let Some(t) = v.strip_prefix('@') {
        if modified {
            return Err("daily time cannot be used with \"modified\" parameter");
        }
        (true, false, t)
    } else if let Some(t) = v.strip_prefix('+') {
        (false, false, t)
    } else if let Some(t) = v.strip_prefix('-') {
        (false, true, t)
    } else {
        (false, false, v)
    };
    let secs = crate::conf::parse_time(t).ok_or("invalid value")?.as_secs() as i64;
    if daily {
        if secs > 24 * 60 * 60 {
            return Err("daily time value must be less than 24 hours");
        }
        return Ok(Expires::Daily(secs));
    }
    Ok(Expires::After {
        secs: if minus { -secs } else { secs },
        modified,
    })
}

/// `if_modified_since`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IfModifiedSince {
    Off,
    Exact,
    Before,
}

/// `lingering_close`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Lingering {
    Off,
    On,
    Always,
}

fn set_alias(b: &mut Builder, d: &Directive, s: &mut Scope<'_>) -> Result<(), Error> {
    let Scope::Location(loc) = s else {
        unreachable!("alias is allowed in location only")
    };
    if loc.kind == super::Match::Named {
        return Err(err(
            d,
            "\"alias\" directive cannot be used inside the named location",
        ));
    }
    let lc = &mut loc.loc;
    if let Some(r) = &lc.root {
        return Err(err(
            d,
            if r.alias {
                "\"alias\" directive is duplicate".to_string()
            } else {
                "\"alias\" directive is duplicate, \"root\" directive was specified earlier"
                    .to_string()
            },
        ));
    }
    lc.root = Some(DocRoot::new(b, &d.args[0].value, true).map_err(|m| err(d, m))?);
    Ok(())
}

fn set_try_files(_: &mut Builder, d: &Directive, s: &mut Scope<'_>) -> Result<(), Error> {
    let lc = loc_conf(s);
    if lc.try_files.is_some() {
        return Err(crate::conf::duplicate(d));
    }
    let (last, files) = d.args.split_last().expect("at least two arguments");
    let fallback = if let Some(code) = last.value.strip_prefix('=') {
        match code.parse::<u16>() {
            Ok(c) if (1..=999).contains(&c) => TryFallback::Code(c),
            _ => return Err(err(d, format!("invalid code \"{}\"", last.value))),
        }
    } else if last.value.starts_with('@') {
        TryFallback::Named(last.value.clone())
    } else {
        TryFallback::Uri(Template::compile(&last.value).map_err(|m| err(d, m))?)
    };
    let files = files
        .iter()
        .map(|a| {
            let v = a.value.as_str();
            let dir = v.ends_with('/');
            let name = if dir { &v[..v.len() - 1] } else { v };
            Template::compile(name)
                .map(|name| TryFile { name, dir })
                .map_err(|m| err(d, m))
        })
        .collect::<Result<Vec<_>, _>>()?;
    lc.try_files = Some(Arc::new(TryFiles { files, fallback }));
    Ok(())
}

fn set_error_page(_: &mut Builder, d: &Directive, s: &mut Scope<'_>) -> Result<(), Error> {
    let lc = loc_conf(s);
    let (last, rest) = d.args.split_last().expect("at least two arguments");
    let mut codes = Vec::new();
    let mut answer = None;
    for a in rest {
        let v = a.value.as_str();
        if let Some(code) = v.strip_prefix('=') {
            if code.is_empty() {
                answer = Some(None);
            } else {
                match code.parse::<u16>() {
                    Ok(c) if (100..=999).contains(&c) => answer = Some(Some(c)),
                    _ => return Err(err(d, format!("invalid value \"{v}\""))),
                }
            }
            continue;
        }
        match v.parse::<u16>() {
            Ok(c) if (300..=599).contains(&c) && c != 499 => codes.push(c),
            Ok(_) => return Err(err(d, format!("value \"{v}\" must be between 300 and 599"))),
            Err(_) => return Err(err(d, format!("invalid value \"{v}\""))),
        }
    }
    if codes.is_empty() {
        return Err(crate::conf::invalid_args(d));
    }
    let target = Template::compile(&last.value).map_err(|m| err(d, m))?;
    let list = lc.error_page.get_or_insert_with(|| Arc::new(Vec::new()));
    Arc::make_mut(list).push(ErrorPage {
        codes,
        answer,
        target,
    });
    Ok(())
}

fn set_internal(_: &mut Builder, d: &Directive, s: &mut Scope<'_>) -> Result<(), Error> {
    let Scope::Location(l) = s else {
        unreachable!("internal is allowed in location only")
    };
    if l.internal {
        return Err(crate::conf::duplicate(d));
    }
    l.internal = true;
    Ok(())
}

fn set_add_header(_: &mut Builder, d: &Directive, s: &mut Scope<'_>) -> Result<(), Error> {
    let always = match d.args.get(2) {
        None => false,
        Some(a) if a.value == "always" => true,
        Some(a) => return Err(err(d, format!("invalid parameter \"{}\"", a.value))),
    };
    let value = Template::compile(&d.args[1].value).map_err(|m| err(d, m))?;
    let lc = loc_conf(s);
    let list = lc.add_header.get_or_insert_with(|| Arc::new(Vec::new()));
    Arc::make_mut(list).push(AddHeader {
        name: crate::conf::intern(&d.args[0].value),
        value,
        always,
    });
    Ok(())
}

fn set_expires(_: &mut Builder, d: &Directive, s: &mut Scope<'_>) -> Result<(), Error> {
    let lc = loc_conf(s);
    if lc.expires.is_some() {
        return Err(crate::conf::duplicate(d));
    }
    let (modified, v) = match d.args.len() {
        2 if d.args[0].value == "modified" => (true, d.args[1].value.as_str()),
        2 => return Err(crate::conf::directive_err(d, "invalid value")),
        _ => (false, d.args[0].value.as_str()),
    };
    let t = Template::compile(v).map_err(|m| err(d, m))?;
    let e = if t.is_static() {
        parse_expires(v, modified).map_err(|m| crate::conf::directive_err(d, m))?
    } else {
        Expires::Var {
            value: Arc::new(t),
            modified,
        }
    };
    lc.expires = Some(e);
    Ok(())
}

fn set_etag(_: &mut Builder, d: &Directive, s: &mut Scope<'_>) -> Result<(), Error> {
    set_once(&mut loc_conf(s).etag, flag_arg(d), d)
}

fn set_if_modified_since(_: &mut Builder, d: &Directive, s: &mut Scope<'_>) -> Result<(), Error> {
    let v = match d.args[0].value.as_str() {
        "off" => IfModifiedSince::Off,
        "exact" => IfModifiedSince::Exact,
        "before" => IfModifiedSince::Before,
        other => return Err(invalid_value(d, other)),
    };
    set_once(&mut loc_conf(s).if_modified_since, v, d)
}

fn set_absolute_redirect(_: &mut Builder, d: &Directive, s: &mut Scope<'_>) -> Result<(), Error> {
    set_once(&mut loc_conf(s).absolute_redirect, flag_arg(d), d)
}

fn set_port_in_redirect(_: &mut Builder, d: &Directive, s: &mut Scope<'_>) -> Result<(), Error> {
    set_once(&mut loc_conf(s).port_in_redirect, flag_arg(d), d)
}

fn set_server_name_in_redirect(
    _: &mut Builder,
    d: &Directive,
    s: &mut Scope<'_>,
) -> Result<(), Error> {
    set_once(&mut loc_conf(s).server_name_in_redirect, flag_arg(d), d)
}

fn set_log_not_found(_: &mut Builder, d: &Directive, s: &mut Scope<'_>) -> Result<(), Error> {
    set_once(&mut loc_conf(s).log_not_found, flag_arg(d), d)
}

fn set_recursive_error_pages(
    _: &mut Builder,
    d: &Directive,
    s: &mut Scope<'_>,
) -> Result<(), Error> {
    set_once(&mut loc_conf(s).recursive_error_pages, flag_arg(d), d)
}

/// `disable_symlinks off | on [from=PART]` (`if_not_owner` is not supported yet). As nginx,
/// a line without `from=` clears an inherited one; `from=` with variables is evaluated per
/// request (see `static_files.rs`).
fn set_disable_symlinks(_: &mut Builder, d: &Directive, s: &mut Scope<'_>) -> Result<(), Error> {
    let mut on = None;
    let mut from = None;
    for a in &d.args {
        match a.value.as_str() {
            "off" => on = Some(false),
            "on" => on = Some(true),
            "if_not_owner" => {
                return Err(err(
                    d,
                    "\"disable_symlinks if_not_owner\" is not supported by shoal yet",
                ));
            }
            v if v.starts_with("from=") => {
                let part = &v[5..];
                from = Some(if part.is_empty() {
                    None
                } else {
                    Some(crate::variables::Template::compile(part).map_err(|m| err(d, m))?)
                });
            }
            v => return Err(err(d, format!("invalid parameter \"{v}\""))),
        }
    }
    let Some(on) = on else {
        return Err(err(
            d,
            "\"disable_symlinks\" must have \"off\", \"on\" or \"if_not_owner\" parameter",
        ));
    };
    if d.args.len() == 2 && from.is_none() {
        return Err(err(
            d,
            format!(
                "duplicate parameters \"{} {}\"",
                d.args[0].value, d.args[1].value
            ),
        ));
    }
    if !on && from.is_some() {
        return Err(err(d, "\"from=\" cannot be used with \"off\" parameter"));
    }
    set_once(&mut loc_conf(s).disable_symlinks, on, d)?;
    loc_conf(s).disable_symlinks_from = Some(from.flatten());
    Ok(())
}

fn set_client_max_body_size(
    _: &mut Builder,
    d: &Directive,
    s: &mut Scope<'_>,
) -> Result<(), Error> {
    let n = size_arg(d, 0)?;
    set_once(&mut loc_conf(s).client_max_body_size, n, d)
}

fn set_client_body_buffer_size(
    _: &mut Builder,
    d: &Directive,
    s: &mut Scope<'_>,
) -> Result<(), Error> {
    let n = size_arg(d, 0)?;
    set_once(&mut loc_conf(s).client_body_buffer_size, n, d)
}

fn set_client_body_timeout(_: &mut Builder, d: &Directive, s: &mut Scope<'_>) -> Result<(), Error> {
    let t = time_arg(d, 0)?;
    set_once(&mut loc_conf(s).client_body_timeout, t, d)
}

fn set_send_timeout(_: &mut Builder, d: &Directive, s: &mut Scope<'_>) -> Result<(), Error> {
    let t = time_arg(d, 0)?;
    set_once(&mut loc_conf(s).send_timeout, t, d)
}

fn set_keepalive_time(_: &mut Builder, d: &Directive, s: &mut Scope<'_>) -> Result<(), Error> {
    let t = time_arg(d, 0)?;
    set_once(&mut loc_conf(s).keepalive_time, t, d)
}

fn set_keepalive_disable(_: &mut Builder, d: &Directive, s: &mut Scope<'_>) -> Result<(), Error> {
    for a in &d.args {
        if !matches!(a.value.as_str(), "none" | "msie6" | "safari") {
            return Err(err(d, format!("invalid value \"{}\"", a.value)));
        }
    }
    // shoal does not sniff browsers: `msie6` and `safari` name clients that no longer exist in
    // practice; the directive is accepted for compatibility.
    let _ = loc_conf(s);
    Ok(())
}

fn set_lingering_close(_: &mut Builder, d: &Directive, s: &mut Scope<'_>) -> Result<(), Error> {
    let v = match d.args[0].value.as_str() {
        "off" => Lingering::Off,
        "on" => Lingering::On,
        "always" => Lingering::Always,
        other => return Err(invalid_value(d, other)),
    };
    set_once(&mut loc_conf(s).lingering_close, v, d)
}

fn set_lingering_time(_: &mut Builder, d: &Directive, s: &mut Scope<'_>) -> Result<(), Error> {
    let t = time_arg(d, 0)?;
    set_once(&mut loc_conf(s).lingering_time, t, d)
}

fn set_lingering_timeout(_: &mut Builder, d: &Directive, s: &mut Scope<'_>) -> Result<(), Error> {
    let t = time_arg(d, 0)?;
    set_once(&mut loc_conf(s).lingering_timeout, t, d)
}

fn set_reset_timedout_connection(
    _: &mut Builder,
    d: &Directive,
    s: &mut Scope<'_>,
) -> Result<(), Error> {
    set_once(&mut loc_conf(s).reset_timedout_connection, flag_arg(d), d)
}

fn set_sendfile_max_chunk(_: &mut Builder, d: &Directive, s: &mut Scope<'_>) -> Result<(), Error> {
    let n = size_arg(d, 0)?;
    set_once(&mut loc_conf(s).sendfile_max_chunk, n, d)
}

/// `output_buffers NUMBER SIZE`, as nginx's `ngx_conf_set_bufs_slot` reads it.
fn set_output_buffers(_: &mut Builder, d: &Directive, s: &mut Scope<'_>) -> Result<(), Error> {
    set_once(
        &mut loc_conf(s).output_buffers,
        crate::conf::bufs_arg(d)?,
        d,
    )
}

fn set_max_ranges(_: &mut Builder, d: &Directive, s: &mut Scope<'_>) -> Result<(), Error> {
    let n = crate::conf::number_arg(d, 0)?;
    set_once(&mut loc_conf(s).max_ranges, n, d)
}

fn set_client_header_buffer_size(
    _: &mut Builder,
    d: &Directive,
    s: &mut Scope<'_>,
) -> Result<(), Error> {
    let n = size_arg(d, 0)?;
    if n == 0 {
        return Err(directive_err(d, "invalid value"));
    }
    set_once(&mut srv_conf(s).client_header_buffer_size, n as usize, d)
}

fn set_large_client_header_buffers(
    _: &mut Builder,
    d: &Directive,
    s: &mut Scope<'_>,
) -> Result<(), Error> {
    set_once(
        &mut srv_conf(s).large_client_header_buffers,
        crate::conf::bufs_arg(d)?,
        d,
    )
}

fn set_ignore_invalid_headers(
    _: &mut Builder,
    d: &Directive,
    s: &mut Scope<'_>,
) -> Result<(), Error> {
    set_once(&mut srv_conf(s).ignore_invalid_headers, flag_arg(d), d)
}

fn set_underscores_in_headers(
    _: &mut Builder,
    d: &Directive,
    s: &mut Scope<'_>,
) -> Result<(), Error> {
    set_once(&mut srv_conf(s).underscores_in_headers, flag_arg(d), d)
}

fn set_merge_slashes(_: &mut Builder, d: &Directive, s: &mut Scope<'_>) -> Result<(), Error> {
    set_once(&mut srv_conf(s).merge_slashes, flag_arg(d), d)
}

/// `Expires` and `Cache-Control` for a response whose file time is `mtime`, at `now`.
pub fn expires_headers(e: Expires, now: i64, mtime: Option<i64>) -> Option<(String, String)> {
    let (expires_at, max_age) = match e {
        // Read into one of the others before (`Expires::eval`).
        Expires::Off | Expires::Var { .. } => return None,
        Expires::Epoch => {
            return Some((
                shoal_http::date::format_unix(1)
                    .iter()
                    .map(|&c| c as char)
                    .collect(),
                "no-cache".into(),
            ))
        }
        Expires::Max => {
            return Some((
                "Thu, 31 Dec 2037 23:55:55 GMT".into(),
                "max-age=315360000".into(),
            ));
        }
        Expires::After { secs, modified } => {
            let base = if modified { mtime.unwrap_or(now) } else { now };
            let at = base + secs;
            (at, at - now)
        }
        Expires::Daily(tod) => {
            let day_start = now - now.rem_euclid(86400);
            let mut at = day_start + tod;
            if at <= now {
                at += 86400;
            }
            (at, at - now)
        }
    };
    let cc = if max_age < 0 {
        "no-cache".to_string()
    } else {
        format!("max-age={max_age}")
    };
    let at = expires_at.max(0) as u64;
    Some((
        shoal_http::date::format_unix(at)
            .iter()
            .map(|&c| c as char)
            .collect(),
        cc,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expires() {
        let now = 1_000_000;
        assert_eq!(
            expires_headers(
                Expires::After {
                    secs: 3600,
                    modified: false
                },
                now,
                None
            )
            .unwrap()
            .1,
            "max-age=3600"
        );
        assert_eq!(
            expires_headers(
                Expires::After {
                    secs: -1,
                    modified: false
                },
                now,
                None
            )
            .unwrap()
            .1,
            "no-cache"
        );
        assert_eq!(
            expires_headers(
                Expires::After {
                    secs: 60,
                    modified: true
                },
                now,
                Some(now - 30)
            )
            .unwrap()
            .1,
            "max-age=30"
        );
        assert_eq!(
            expires_headers(Expires::Epoch, now, None).unwrap().0,
            "Thu, 01 Jan 1970 00:00:01 GMT"
        );
        assert_eq!(
            expires_headers(Expires::Max, now, None).unwrap().1,
            "max-age=315360000"
        );
        assert!(expires_headers(Expires::Off, now, None).is_none());
        let d = expires_headers(Expires::Daily(3600), 86400 * 10 + 7200, None).unwrap();
        assert_eq!(d.1, format!("max-age={}", 86400 - 3600));
    }
}
