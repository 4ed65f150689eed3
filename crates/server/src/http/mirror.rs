//! nginx's ngx_http_mirror_module: `mirror URI|off` (several) and `mirror_request_body
//! on|off` (default on).
//!
//! In the precontent phase of the location that answers, each `mirror` becomes a background
//! subrequest to its URI with the client's method and arguments (traffic shadowing), whose
//! answer is thrown away. With `mirror_request_body on` the client's body is read whole first
//! (as nginx reads it before the content phase) and every mirror sends a copy of it; with
//! `off`, a mirror says the client's `Content-Length` and sends no body, as nginx's does (its
//! upstream then waits for a body that never comes: nginx's documentation has such a mirror
//! location say `proxy_pass_request_body off` and `proxy_set_header Content-Length ""`).
//!
//! The client's answer never waits for a mirror: the mirrors run once it is written, all at
//! once, and the request ends (its access log line, the connection's next request) when they
//! are done, as nginx's main request waits for its background subrequests. (nginx starts them
//! before the content handler, so a mirror may reach its upstream before the main request
//! does; here it always comes after.)

use shoal_conf::{Directive, Error};

use crate::conf::{flag_arg, set_once, Args, Builder, Command, Ctx, Scope};
use crate::http::client_body::{ClientBody, Whole};
use crate::http::loc_conf;
use crate::http::reply::Outcome;
use crate::http::request::Req;
use crate::http::LocConf;

pub static DIRECTIVES: &[Command] = &[
    Command::new("mirror", Ctx::HSL, Args::ONE, set_mirror),
    Command::new(
        "mirror_request_body",
        Ctx::HSL,
        Args::Flag,
        set_request_body,
    ),
];

/// The module's location-level configuration.
#[derive(Clone, Debug, Default)]
pub struct MirrorLoc {
    /// The mirrors' URIs; `Some(empty)` is `off`.
    uris: Option<Vec<String>>,
    request_body: Option<bool>,
}

impl MirrorLoc {
    /// Whether the location mirrors its requests.
    pub fn in_use(&self) -> bool {
        self.uris.as_ref().is_some_and(|u| !u.is_empty())
    }

    /// `mirror_request_body` (default on).
    pub fn request_body(&self) -> bool {
        self.request_body.unwrap_or(true)
    }
}

fn set_mirror(_: &mut Builder, d: &Directive, s: &mut Scope<'_>) -> Result<(), Error> {
    let lc = &mut loc_conf(s).mirror;
    let v = &d.args[0].value;
    // nginx: `off` only alone at its level, and nothing after it.
    match (&mut lc.uris, v == "off") {
        (None, true) => lc.uris = Some(Vec::new()),
        (None, false) => lc.uris = Some(vec![v.clone()]),
        (Some(u), false) if !u.is_empty() => u.push(v.clone()),
        _ => return Err(crate::conf::duplicate(d)),
    }
    Ok(())
}

fn set_request_body(_: &mut Builder, d: &Directive, s: &mut Scope<'_>) -> Result<(), Error> {
    set_once(&mut loc_conf(s).mirror.request_body, flag_arg(d), d)
}

/// The mirrors a request left to run after its answer.
pub struct Pending {
    uris: Vec<String>,
    args: Option<String>,
    /// The client's body, read whole (`mirror_request_body on`), and how it was framed.
    body: Option<(shoal_http::BodyKind, Whole)>,
}

/// nginx's mirror handler in the precontent phase: the body read when it is mirrored (a
/// failure to read it is the request's answer), the mirrors left to run.
pub async fn precontent(
    r: &Req<'_, '_>,
    lc: &LocConf,
    rw: &crate::http::rewrite::State,
    body: &ClientBody<'_>,
) -> Option<Outcome> {
    if r.extras.mirrored() {
        return None;
    }
    let uris = lc.mirror.uris.clone().unwrap_or_default();
    // Off, nginx's mirror still says the client's `Content-Length`, with no body.
    let mut copy = match body.kind() {
        shoal_http::BodyKind::Length(n) => Some((body.kind(), Whole::Announced(n))),
        _ => None,
    };
    if lc.mirror.request_body() && body.kind() != shoal_http::BodyKind::Empty {
        match body.for_upstream(lc, r, true, false).await {
            Ok(crate::http::client_body::BodyToSend::Whole(w)) => copy = Some((body.kind(), w)),
            Ok(_) => copy = None,
            Err(f) => {
                crate::http::client_body::log_failure(f, r);
                return Some(Outcome::Error(f.status()));
            }
        }
    }
    r.extras.set_mirrors(Pending {
        uris,
        args: rw.args.clone(),
        body: copy,
    });
    None
}

/// Runs the request's mirrors, all at once, until each has its answer (thrown away).
pub async fn run(r: &Req<'_, '_>, pending: Pending) {
    let method = r.req.method();
    let mut subs: Vec<_> = pending
        .uris
        .iter()
        .map(|uri| {
            let body = match &pending.body {
                Some((kind, w)) => ClientBody::read(*kind, w.clone()),
                None => ClientBody::none(),
            };
            let sub = crate::http::phases::Sub {
                uri,
                args: pending.args.as_deref(),
                method,
            };
            Some(crate::http::phases::subrequest_as(r, sub, body))
        })
        .collect();
    std::future::poll_fn(|cx| {
        let mut left = false;
        for slot in subs.iter_mut() {
            if let Some(f) = slot {
                if f.as_mut().poll(cx).is_ready() {
                    *slot = None;
                } else {
                    left = true;
                }
            }
        }
        if left {
            std::task::Poll::Pending
        } else {
            std::task::Poll::Ready(())
        }
    })
    .await;
}

/// The module's place in the list.
pub struct Module;

impl crate::http::modules::HttpModule for Module {
    type Loc = MirrorLoc;
    const DIRECTIVES: &'static [Command] = DIRECTIVES;

    fn merge(loc: &mut MirrorLoc, parent: &MirrorLoc) {
        crate::conf::merge(&mut loc.uris, &parent.uris);
        crate::conf::merge(&mut loc.request_body, &parent.request_body);
    }
}
