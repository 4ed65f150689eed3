//! `subrequest_output_buffer_size` (nginx's core module, 1.13.10+): the buffer that holds a
//! subrequest's answer when its body is kept in memory (`auth_request`'s subrequests read
//! their answers' heads; the size matters to a module that keeps a body).
//! `log_subrequest on|off` (default off): whether a subrequest is written to its location's
//! access log, as nginx writes it (see [`log`]).
//!
//! Checked as nginx checks them (a size, a flag, once per level) and inherited down.

use shoal_conf::{Directive, Error};

use crate::conf::{flag_arg, set_once, size_arg, Args, Builder, Command, Ctx, Scope};
use crate::http::loc_conf;
use crate::http::phases::Answered;
use crate::http::request::Req;

pub static DIRECTIVES: &[Command] = &[
    Command::new(
        "subrequest_output_buffer_size",
        Ctx::HSL,
        Args::ONE,
        set_output_buffer_size,
    ),
    Command::new("log_subrequest", Ctx::HSL, Args::Flag, set_log_subrequest),
];

/// The subrequest settings at location level.
#[derive(Clone, Debug, Default)]
pub struct SubrequestLoc {
    pub output_buffer_size: Option<u64>,
    pub log: Option<bool>,
}

impl SubrequestLoc {
    /// `subrequest_output_buffer_size` (default one memory page, 4k, as nginx on Linux).
    pub fn output_buffer_size(&self) -> u64 {
        self.output_buffer_size.unwrap_or(4096)
    }

    /// `log_subrequest` (default off).
    pub fn log(&self) -> bool {
        self.log.unwrap_or(false)
    }
}

/// A subrequest's access log line when its location says `log_subrequest on` (the
/// subrequest's location decides, not the main request's), written to that location's logs
/// before the main request's line, as nginx writes it: `$uri` and `$args` are the
/// subrequest's, `$status` its answer's, `$request` the client's; nothing of it was sent, so
/// `$body_bytes_sent` and `$bytes_sent` are 0.
pub fn log(r: &Req<'_, '_>, done: &Answered<'_>) {
    if !done.lc.subrequest.log() {
        return;
    }
    let logs = done.lc.access_logs();
    if logs.is_empty() {
        return;
    }
    let sent = crate::variables::Sent {
        status: done.reply.status,
        body_bytes: 0,
        bytes: 0,
        headers: Vec::new(),
    };
    let rec = done.upstream.as_ref().map(|u| u.borrow());
    let mut v = r.vars(&done.uri, done.lc, &[]);
    v.user = Some(&done.user_vars);
    v.args = Some(done.args.as_deref());
    v.sent = Some(&sent);
    v.upstream = rec.as_deref();
    v.request_length = r.req.head_len() as u64;
    crate::http::access_log::log_request(logs, &v);
}

fn set_log_subrequest(_: &mut Builder, d: &Directive, s: &mut Scope<'_>) -> Result<(), Error> {
    set_once(&mut loc_conf(s).subrequest.log, flag_arg(d), d)
}

fn set_output_buffer_size(_: &mut Builder, d: &Directive, s: &mut Scope<'_>) -> Result<(), Error> {
    let n = size_arg(d, 0)?;
    set_once(&mut loc_conf(s).subrequest.output_buffer_size, n, d)
}

/// The directive's place in the module list.
pub struct Module;

impl crate::http::modules::HttpModule for Module {
    type Loc = SubrequestLoc;
    const DIRECTIVES: &'static [Command] = DIRECTIVES;

    fn merge(loc: &mut SubrequestLoc, parent: &SubrequestLoc) {
        crate::conf::merge(&mut loc.output_buffer_size, &parent.output_buffer_size);
        crate::conf::merge(&mut loc.log, &parent.log);
    }
}
