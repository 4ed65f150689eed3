//! `ngx_http_random_index_module`: `random_index on` answers a URI ending in `/` with one of
//! the directory's files, chosen at random each time, as nginx's content handler does: before
//! `index`, for GET, HEAD and POST; only regular files (not links, directories or names
//! starting with `.`); the choice is reached by an internal redirect to the URI and the
//! name, the arguments kept. A directory with no such file is left to `index`.
//!
//! Reads the directory on the worker, as `autoindex` does.

use std::cell::Cell;
use std::os::unix::ffi::OsStrExt;

use shoal_conf::{Directive, Error};

use super::reply::{error_reply, Outcome};
use super::request::Req;
use super::{loc_conf, LocConf};
use crate::conf::{flag_arg, set_once, Args, Builder, Command, Ctx, Scope};
use crate::log::Level;
use crate::variables::Vars;

pub static DIRECTIVES: &[Command] = &[Command::new(
    "random_index",
    Ctx::LOCATION,
    Args::Flag,
    set_random_index,
)];

/// The module's place in the list; `random_index` is inherited as nginx's flag is.
pub struct Module;

impl super::modules::HttpModule for Module {
    type Loc = Option<bool>;
    const DIRECTIVES: &'static [Command] = DIRECTIVES;

    fn merge(loc: &mut Option<bool>, parent: &Option<bool>) {
        crate::conf::merge(loc, parent);
    }
}

fn set_random_index(_: &mut Builder, d: &Directive, s: &mut Scope<'_>) -> Result<(), Error> {
    set_once(&mut loc_conf(s).random_index, flag_arg(d), d)
}

/// Whether the handler has something to say about `uri`.
pub fn wanted(lc: &LocConf, method: &str, uri: &str) -> bool {
    lc.random_index == Some(true) && uri.ends_with('/') && matches!(method, "GET" | "HEAD" | "POST")
}

/// The redirect to one of the directory's files, an error, or `None` when it has none.
pub fn handle(r: &Req<'_, '_>, lc: &LocConf, uri: &str, vars: &Vars<'_>) -> Option<Outcome> {
    // The directory without the URI's trailing slash, as nginx opens and names it.
    let mapped = lc.doc_root().map(uri, Some(vars));
    let bytes = mapped.as_os_str().as_encoded_bytes();
    let dir = std::path::Path::new(std::ffi::OsStr::from_bytes(
        &bytes[..bytes.len().saturating_sub(1)],
    ));
    let entries = match super::autoindex::open_dir(r, lc, dir) {
        Ok(e) => e,
        Err(reply) => return Some(Outcome::Reply(reply)),
    };
    let mut names = Vec::new();
    for entry in entries {
        let entry = match entry {
            Ok(e) => e,
            Err(e) => {
                crate::conn_log!(
                    Level::Crit,
                    r.info.number,
                    "readdir() \"{}\" failed {}{}",
                    dir.display(),
                    shoal_conf::os_error(&e),
                    r.log_ctx()
                );
                return Some(Outcome::Reply(Box::new(error_reply(500, lc))));
            }
        };
        let name = entry.file_name();
        if name.as_encoded_bytes().first() == Some(&b'.') {
            continue;
        }
        // The entry's own type (`d_type`, else an `lstat`): a link to a file is not one.
        if entry.file_type().is_ok_and(|t| t.is_file()) {
            names.push(name);
        }
    }
    if names.is_empty() {
        return None;
    }
    let chosen = &names[(next_random() % names.len() as u64) as usize];
    Some(Outcome::Internal(format!(
        "{uri}{}",
        String::from_utf8_lossy(chosen.as_encoded_bytes())
    )))
}

thread_local! {
    /// The worker's generator (xorshift64), seeded from the system's random source.
    static STATE: Cell<u64> = Cell::new({
        let mut seed = [0u8; 8];
        aws_lc_rs::rand::fill(&mut seed).expect("the system's random source works");
        u64::from_ne_bytes(seed) | 1
    });
}

/// The next number of the worker's generator.
fn next_random() -> u64 {
    STATE.with(|s| {
        let mut x = s.get();
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        s.set(x);
        x
    })
}
