//! nginx's undocumented `post_action URI|@NAME` (http, server, location, `if` in a location):
//! once a request's answer is out, the request runs again, internally redirected to URI (its
//! arguments dropped) or sent to a named location, its method kept; whatever that answers is
//! not sent (usually a `proxy_pass` that tells a tracker the download ended). A target not
//! starting with `/` is a named location's name: `post_action off` looks for one named `off`,
//! as in nginx.
//!
//! The access log line is written after it, from the location it ended in (its `access_log`,
//! `$uri`), the byte counts the client's answer's; `$status` is the post action's answer's,
//! unless the client's was one of nginx's own error pages (its `err_status` wins). The post
//! action's location may have a `post_action` itself (an inherited one): nginx runs it again,
//! and again, until its budget of internal redirects is spent, and logs the request as a 500;
//! so does shoal.
//!
//! It runs for HTTP/1 requests and HTTP/2 streams alike. Unlike nginx, when a
//! `post_action`'s named location is missing shoal says so once (nginx repeats the line
//! until the budget is spent).

use std::sync::Arc;

use shoal_conf::{Directive, Error};

use super::phases::{self, Answered};
use super::request::Req;
use super::LocConf;
use crate::conf::{merge, set_once, Args, Builder, Command, Ctx, Scope};
use crate::log::Level;

pub static DIRECTIVES: &[Command] = &[Command::new(
    "post_action",
    Ctx::HSL.or(Ctx::LIF),
    Args::ONE,
    set_post_action,
)];

/// The module's configuration of a level.
#[derive(Clone, Debug, Default)]
pub struct PostActionLoc {
    target: Option<Arc<str>>,
}

impl PostActionLoc {
    /// `post_action`'s target, if any.
    pub fn target(&self) -> Option<&str> {
        self.target.as_deref()
    }
}

fn set_post_action(_: &mut Builder, d: &Directive, s: &mut Scope<'_>) -> Result<(), Error> {
    let target = d.args[0].value.as_str().into();
    set_once(&mut super::loc_conf(s).post_action.target, target, d)
}

/// nginx's budget of internal redirects (`NGX_HTTP_MAX_URI_CHANGES`).
const MAX_RUNS: u32 = 10;

/// Runs the location's `post_action` (and those of the locations it leads to, as nginx does)
/// after the answer (`status`, `special`: one of nginx's own pages) went out: the location
/// and URI the request is then logged with, and its `$status`.
pub async fn run<'s>(
    r: &Req<'s, '_>,
    lc: &LocConf,
    status: u16,
    special: bool,
) -> Option<(Answered<'s>, u16)> {
    let mut target = lc.post_action.target()?.to_string();
    let mut runs = 0;
    loop {
        runs += 1;
        let done = phases::post_action(r, &target).await;
        // A missing named location (or a server-level `return 500`): nginx logs a 500.
        if done.reply.status == 500 && std::ptr::eq(done.lc, &r.srv.loc) {
            return Some((done, 500));
        }
        match done.lc.post_action.target() {
            None => {
                let logged = if special { status } else { done.reply.status };
                return Some((done, logged));
            }
            Some(t) if runs < MAX_RUNS => target = t.to_string(),
            Some(t) => {
                crate::conn_log!(
                    Level::Error,
                    r.info.number,
                    "rewrite or internal redirection cycle while internally redirecting to \"{t}\"{}",
                    r.log_ctx()
                );
                return Some((done, 500));
            }
        }
    }
}

/// The module's place in the module list.
pub struct Module;

impl super::modules::HttpModule for Module {
    type Loc = PostActionLoc;
    const DIRECTIVES: &'static [Command] = DIRECTIVES;

    fn merge(loc: &mut PostActionLoc, parent: &PostActionLoc) {
        merge(&mut loc.target, &parent.target);
    }
}
