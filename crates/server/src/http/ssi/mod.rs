//! nginx's SSI module (`ngx_http_ssi_module`): `ssi`, `ssi_types`, `ssi_silent_errors`,
//! `ssi_value_length`, `ssi_min_file_chunk`, `ssi_last_modified`,
//! `ssi_ignore_recycled_buffers`, and the `$date_local` and `$date_gmt` its commands read.
//!
//! Its header filter runs after charset and before gzip (nginx's order): it takes an answer
//! of any status whose type is listed (`text/html` always; `*` any) and whose length is not
//! 0, and adds an [`filter::SsiFilter`] to its body filters: the `Content-Length` goes, no
//! ranges, and the `Last-Modified` and `ETag` go too unless `ssi_last_modified on`, which
//! keeps the first and makes the second weak. The commands (`filter.rs`) are read by
//! `shoal_http::ssi`; `include`'s subrequests are `http/subrequest_body.rs`'s.
//!
//! `ssi_min_file_chunk` and `ssi_ignore_recycled_buffers` are checked and kept: they tune
//! nginx's buffers, which shoal does not have.

mod expr;
pub mod filter;

use shoal_conf::{Directive, Error};

use super::loc_conf;
use super::mime_types::{types_slot, Types};
use super::modules::{Cx, HttpModule};
use super::reply::{Body, Reply};
use crate::conf::{flag_arg, merge, set_once, size_arg, Args, Builder, Command, Ctx, Scope};

pub static DIRECTIVES: &[Command] = &[
    Command::new("ssi", Ctx::HSL.or(Ctx::LIF), Args::Flag, set_ssi),
    Command::new("ssi_silent_errors", Ctx::HSL, Args::Flag, set_silent_errors),
    Command::new(
        "ssi_ignore_recycled_buffers",
        Ctx::HSL,
        Args::Flag,
        set_ignore_recycled_buffers,
    ),
    Command::new(
        "ssi_min_file_chunk",
        Ctx::HSL,
        Args::ONE,
        set_min_file_chunk,
    ),
    Command::new("ssi_value_length", Ctx::HSL, Args::ONE, set_value_length),
    Command::new("ssi_types", Ctx::HSL, Args::ONE_OR_MORE, set_ssi_types),
    Command::new("ssi_last_modified", Ctx::HSL, Args::Flag, set_last_modified),
];

/// The module's settings at one level.
#[derive(Clone, Debug, Default)]
pub struct SsiLoc {
    pub enable: Option<bool>,
    pub silent_errors: Option<bool>,
    pub ignore_recycled_buffers: Option<bool>,
    pub min_file_chunk: Option<u64>,
    pub value_length: Option<u64>,
    pub types: Option<Types>,
    pub last_modified: Option<bool>,
}

impl SsiLoc {
    /// `ssi_value_length` (default 256).
    pub fn value_length(&self) -> usize {
        self.value_length.unwrap_or(256) as usize
    }

    /// `ssi_min_file_chunk` (default 1k).
    pub fn min_file_chunk(&self) -> u64 {
        self.min_file_chunk.unwrap_or(1024)
    }
}

fn ssi<'a>(s: &'a mut Scope<'_>) -> &'a mut SsiLoc {
    &mut loc_conf(s).ssi
}

fn set_ssi(_: &mut Builder, d: &Directive, s: &mut Scope<'_>) -> Result<(), Error> {
    set_once(&mut ssi(s).enable, flag_arg(d), d)
}

fn set_silent_errors(_: &mut Builder, d: &Directive, s: &mut Scope<'_>) -> Result<(), Error> {
    set_once(&mut ssi(s).silent_errors, flag_arg(d), d)
}

fn set_ignore_recycled_buffers(
    _: &mut Builder,
    d: &Directive,
    s: &mut Scope<'_>,
) -> Result<(), Error> {
    set_once(&mut ssi(s).ignore_recycled_buffers, flag_arg(d), d)
}

fn set_min_file_chunk(_: &mut Builder, d: &Directive, s: &mut Scope<'_>) -> Result<(), Error> {
    let n = size_arg(d, 0)?;
    set_once(&mut ssi(s).min_file_chunk, n, d)
}

fn set_value_length(_: &mut Builder, d: &Directive, s: &mut Scope<'_>) -> Result<(), Error> {
    let n = size_arg(d, 0)?;
    set_once(&mut ssi(s).value_length, n, d)
}

fn set_ssi_types(b: &mut Builder, d: &Directive, s: &mut Scope<'_>) -> Result<(), Error> {
    types_slot(b, d, &mut ssi(s).types)
}

fn set_last_modified(_: &mut Builder, d: &Directive, s: &mut Scope<'_>) -> Result<(), Error> {
    set_once(&mut ssi(s).last_modified, flag_arg(d), d)
}

/// The SSI module's place in the module list: its header filter, its variables.
pub struct Module;

impl HttpModule for Module {
    type Loc = SsiLoc;
    const DIRECTIVES: &'static [Command] = DIRECTIVES;
    const VARIABLES: &'static [&'static str] = &["date_local", "date_gmt"];

    /// Now in nginx's default `timefmt`, wherever a template names them (Craft CMS's
    /// `add_header Last-Modified $date_gmt`); the commands of an answer SSI reads use its
    /// `config timefmt` (`filter.rs`).
    fn variable(
        _loc: Option<&SsiLoc>,
        name: &str,
        _vars: &crate::variables::Vars<'_>,
        out: &mut String,
    ) -> Option<bool> {
        let date = expr::date(filter::TIMEFMT, name == "date_gmt").unwrap_or_default();
        out.push_str(&String::from_utf8_lossy(&date));
        Some(true)
    }

    fn merge(loc: &mut SsiLoc, parent: &SsiLoc) {
        merge(&mut loc.enable, &parent.enable);
        merge(&mut loc.silent_errors, &parent.silent_errors);
        merge(
            &mut loc.ignore_recycled_buffers,
            &parent.ignore_recycled_buffers,
        );
        merge(&mut loc.min_file_chunk, &parent.min_file_chunk);
        merge(&mut loc.value_length, &parent.value_length);
        merge(&mut loc.types, &parent.types);
        merge(&mut loc.last_modified, &parent.last_modified);
    }

    fn header_filter(loc: &SsiLoc, cx: &Cx<'_, '_, '_>, reply: &mut Box<Reply>) {
        header_filter(loc, &cx.rw.uri, reply);
    }
}

/// nginx's `ngx_http_ssi_header_filter`; `uri`: the request's (relative includes start from
/// it).
fn header_filter(loc: &SsiLoc, uri: &str, reply: &mut Reply) {
    if !loc.enable.unwrap_or(false)
        || reply.body.length() == Some(0)
        || reply.terminate
        || matches!(reply.body, Body::Tunnel(_) | Body::Grpc(_))
    {
        return;
    }
    let listed = Types::matches_answer(
        loc.types.as_ref(),
        &["text/html"],
        super::charset::tested_type(reply),
    );
    if !listed {
        return;
    }
    reply.allow_ranges = false;
    if loc.last_modified.unwrap_or(false) {
        super::sub::weak_etag(reply);
    } else {
        super::sub::clear_validators(reply);
    }
    reply.filters.push(Box::new(filter::SsiFilter::new(
        loc.value_length(),
        loc.silent_errors.unwrap_or(false),
        uri,
    )));
}
