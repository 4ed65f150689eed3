//! nginx's addition module (`ngx_http_addition_filter_module`): `add_before_body URI`,
//! `add_after_body URI` and `addition_types` (default `text/html`).
//!
//! Its header filter runs after gunzip and before sub (nginx's order) and takes the main
//! request's 200 of a listed type: the `Content-Length` goes, no ranges, the `ETag` becomes
//! weak. Its body filter asks for the subrequest of `add_before_body` before the body's first
//! bytes and for `add_after_body`'s after its last (`http/subrequest_body.rs` runs them);
//! their bodies go into the answer where nginx's postpone filter puts them, past the main
//! answer's sub, charset and ssi filters. An empty URI (`add_before_body ""`) turns a level's
//! inherited one off.

use std::io;

use shoal_conf::{Directive, Error};

use super::loc_conf;
use super::mime_types::{types_slot, Types};
use super::modules::{Cx, HttpModule};
use super::output::{BodyFilter, Step};
use super::reply::{Body, Reply};
use super::subrequest_body::{Answer, Ask, Requester, Target};
use crate::conf::{merge, set_once, Args, Builder, Command, Ctx, Scope};

pub static DIRECTIVES: &[Command] = &[
    Command::new("add_before_body", Ctx::HSL, Args::ONE, set_before),
    Command::new("add_after_body", Ctx::HSL, Args::ONE, set_after),
    Command::new("addition_types", Ctx::HSL, Args::ONE_OR_MORE, set_types),
];

/// The module's settings at one level.
#[derive(Clone, Debug, Default)]
pub struct AdditionLoc {
    pub before: Option<String>,
    pub after: Option<String>,
    pub types: Option<Types>,
}

fn addition<'a>(s: &'a mut Scope<'_>) -> &'a mut AdditionLoc {
    &mut loc_conf(s).addition
}

fn set_before(_: &mut Builder, d: &Directive, s: &mut Scope<'_>) -> Result<(), Error> {
    set_once(&mut addition(s).before, d.args[0].value.clone(), d)
}

fn set_after(_: &mut Builder, d: &Directive, s: &mut Scope<'_>) -> Result<(), Error> {
    set_once(&mut addition(s).after, d.args[0].value.clone(), d)
}

fn set_types(b: &mut Builder, d: &Directive, s: &mut Scope<'_>) -> Result<(), Error> {
    types_slot(b, d, &mut addition(s).types)
}

/// The addition module's place in the module list: its header filter.
pub struct Module;

impl HttpModule for Module {
    type Loc = AdditionLoc;
    const DIRECTIVES: &'static [Command] = DIRECTIVES;

    fn merge(loc: &mut AdditionLoc, parent: &AdditionLoc) {
        merge(&mut loc.before, &parent.before);
        merge(&mut loc.after, &parent.after);
        merge(&mut loc.types, &parent.types);
    }

    fn header_filter(loc: &AdditionLoc, _cx: &Cx<'_, '_, '_>, reply: &mut Box<Reply>) {
        header_filter(loc, reply);
    }
}

/// nginx's `ngx_http_addition_header_filter`.
fn header_filter(loc: &AdditionLoc, reply: &mut Reply) {
    let before = loc.before.clone().filter(|u| !u.is_empty());
    let after = loc.after.clone().filter(|u| !u.is_empty());
    if reply.status != 200
        || (before.is_none() && after.is_none())
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
    super::sub::weak_etag(reply);
    reply.filters.push(Box::new(Addition {
        before,
        after,
        started: false,
        ended: false,
        waiting: Vec::new(),
        given: Vec::new(),
    }));
}

/// The body filter: the before-body subrequest ahead of the first bytes, the after-body one
/// when the body ends.
struct Addition {
    /// Taken when asked for.
    before: Option<String>,
    after: Option<String>,
    /// Something of the body came (bytes, or its end).
    started: bool,
    ended: bool,
    /// Bytes that came before the before-body subrequest was made.
    waiting: Vec<u8>,
    /// Those bytes, given on.
    given: Vec<u8>,
}

fn ask(uri: String) -> Ask {
    let (uri, args) = match uri.split_once('?') {
        Some((u, a)) => (u.to_string(), Some(a.to_string())),
        None => (uri, None),
    };
    Ask {
        target: Target::Uri { uri, args },
        in_memory: false,
        stub: None,
    }
}

impl BodyFilter for Addition {
    fn feed(&mut self, data: &[u8]) -> io::Result<&[u8]> {
        // Only before the before-body went (else the filter is passed by).
        self.started = true;
        self.waiting.extend_from_slice(data);
        Ok(&[])
    }

    fn finish(&mut self) -> io::Result<&[u8]> {
        self.started = true;
        self.ended = true;
        Ok(&[])
    }

    fn passes_through(&self) -> bool {
        self.before.is_none() && self.waiting.is_empty() && !self.ended
    }

    fn pending(&self) -> bool {
        (self.started && self.before.is_some())
            || !self.waiting.is_empty()
            || (self.ended && self.after.is_some())
    }

    fn for_request(&self) -> bool {
        true
    }

    fn main_only(&self) -> bool {
        true
    }

    fn step(&mut self, _r: Option<&dyn Requester>) -> io::Result<Step<'_>> {
        if self.started {
            if let Some(uri) = self.before.take() {
                return Ok(Step::Subrequest(ask(uri)));
            }
        }
        if !self.waiting.is_empty() {
            self.given.clear();
            std::mem::swap(&mut self.given, &mut self.waiting);
            return Ok(Step::Data(&self.given));
        }
        if self.ended {
            if let Some(uri) = self.after.take() {
                return Ok(Step::Subrequest(ask(uri)));
            }
        }
        Ok(Step::Data(&[]))
    }

    fn answered(&mut self, _a: Answer) {}
}
