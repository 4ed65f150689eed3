//! A request's way through nginx's phases: post-read (realip), the server's `return`, finding
//! the location (again after each internal redirect, at most 10 times), `internal`, the
//! location's `return`, `try_files` or the static handler, `error_page`, and the header
//! filters (`add_header`, `expires`).
//!
//! Runs on the worker. Everything here decides; the protocol (`h1/`) reads bodies and writes
//! answers.

use std::cell::RefCell;
use std::path::PathBuf;
use std::rc::Rc;

use super::client_body::{self, ClientBody};
use super::directives::{TryFallback, TryFiles};
use super::location::{self, LocationConf, Match};
use super::modules::Cx;
use super::reply::{Body, Outcome, Reply};
use super::request::Req;
use super::rewrite;
use super::static_files;
use super::upstream::record::Record;
use super::{Content, LocConf};
use crate::log::Level;

mod subrequests;
mod upstream;
pub use subrequests::{clone_subrequest, subrequest, subrequest_as, subrequest_with_body, Sub};
use upstream::cached_outcome;
pub use upstream::upstream_handle;

/// nginx's limit on internal redirects and `error_page` cycles.
const MAX_REDIRECTS: u32 = 10;

/// What a request came to: its answer, and what the log phase and the protocol need of it.
pub struct Answered<'a> {
    pub reply: Box<Reply>,
    /// The location configuration that answered (for keep-alive, sendfile and logs).
    pub lc: &'a LocConf,
    /// The URI after internal redirects (`$uri`).
    pub uri: String,
    /// `return 444`: close without answering.
    pub close: bool,
    /// The arguments after rewrites (`$args`).
    pub args: Option<String>,
    /// Values of `set` variables and named captures, for the access log.
    pub user_vars: std::collections::HashMap<String, String>,
    /// A proxied request's exchange with its upstream, for `$upstream_*` in the access log.
    pub upstream: Option<Rc<RefCell<Record>>>,
}

/// The captures of a regex location's match.
fn captures_of(loc: Option<&LocationConf>, uri: &str) -> Option<crate::variables::Captures> {
    let l = loc.filter(|l| l.kind == Match::Regex)?;
    crate::variables::capture(l.regex.as_ref()?, uri)
}

/// Runs the phases for one request; `body` is its body, read if a handler wants it.
pub async fn process<'s>(r: &Req<'s, '_>, body: &ClientBody<'_>) -> Answered<'s> {
    run::<false>(r, body, 0, Start::Request).await
}

/// The answer to a request refused as soon as its head was read (nginx's
/// `ngx_http_finalize_request(r, status)` in `ngx_http_process_request`: a plain request on a
/// TLS port, a client certificate missing or wrong): no phase runs, and the server's
/// `error_page` for the status applies, as nginx's does.
pub async fn process_status<'s>(
    r: &Req<'s, '_>,
    body: &ClientBody<'_>,
    status: u16,
) -> Answered<'s> {
    run::<true>(r, body, status, Start::Request).await
}

/// What the phases run for.
#[derive(Clone, Copy)]
enum Start<'a> {
    /// The client's request.
    Request,
    /// A subrequest (see [`subrequest`]).
    Subrequest(&'a Sub<'a>),
    /// `post_action`: the request again once its answer is out, internally redirected to a
    /// URI (`/...`) or else a named location, its method kept, its access phases run.
    PostAction(&'a str),
}

/// One run of `post_action TARGET` for a request whose answer is out (its answer's body
/// dropped: nothing of it is sent). See `post_action.rs`.
pub async fn post_action<'s>(r: &Req<'s, '_>, target: &str) -> Answered<'s> {
    let body = ClientBody::none();
    let mut done = Box::pin(run::<false>(r, &body, 0, Start::PostAction(target))).await;
    done.reply.body = Body::Empty;
    done
}

/// The phases; `REFUSED`: the answer starts as `status`'s page (a copy of its own, so the
/// usual request's loop carries no test for it).
/// `start`: the client's request, or a subrequest's or `post_action`'s run.
async fn run<'s, const REFUSED: bool>(
    r: &Req<'s, '_>,
    body: &ClientBody<'_>,
    status: u16,
    start: Start<'_>,
) -> Answered<'s> {
    let (sub, post_uri, post_named) = match start {
        Start::Request => (None, None, None),
        Start::Subrequest(uri) => (Some(uri), None, None),
        Start::PostAction(t) if t.starts_with('/') => (None, Some(t), None),
        Start::PostAction(t) => (None, None, Some(t)),
    };
    let client_request = matches!(start, Start::Request);
    let srv = r.srv;
    crate::log::set_scope(srv.loc.error_log.as_ref());
    let mut refusal = REFUSED.then(|| Box::new(super::reply::error_reply(status, &srv.loc)));
    let mut rw = rewrite::State {
        uri: match (sub, post_uri) {
            (Some(sub), _) => sub.uri.to_string(),
            (None, Some(uri)) => uri.to_string(),
            (None, None) => shoal_http::lossy(r.req.path()).into_owned(),
        },
        args: match (sub, post_uri) {
            (Some(sub), _) => sub.args.map(str::to_string),
            (None, Some(_)) => None,
            (None, None) => r.req.query().map(|q| shoal_http::lossy(q).into_owned()),
        },
        quoted_uri: client_request && {
            let target = r.req.uri();
            let path = target.split(|&c| c == b'?').next().unwrap_or_default();
            path.iter().any(|&c| c == b'%' || c == b'+')
        },
        ..Default::default()
    };
    if let Some(caps) = r.name_captures {
        rw.captures = caps.numbered.clone();
        rw.vars.extend(caps.named.iter().cloned());
    }
    // nginx's post-read phase (realip), with the server's configuration: once, before the
    // server's rewrites see the request.
    if client_request {
        super::modules::post_read_phase(&Cx {
            r,
            lc: &srv.loc,
            rw: &rw,
            upstream: None,
        });
    }
    // A subrequest is an internal GET.
    let mut method_get = sub.is_some();
    let mut internal = !client_request;
    let mut named: Option<String> = post_named.map(str::to_string);
    let mut redirects = 0u32;
    // nginx's `r->error_page`: an `error_page` took over in a location without
    // `recursive_error_pages`, so no other one will.
    let mut error_page_used = false;
    // The server's rewrites run for the request and after each internal redirect, not after
    // `rewrite ... last` or a jump to a named location (nginx's phase order).
    let mut server_rewrites = true;
    // The status an error page answers with: `None` = the target's own.
    let mut forced_status: Option<u16> = None;
    // An error nginx generated before an `error_page` took over: keep-alive is off.
    let mut close_after = false;
    let mut upstream: Option<Rc<RefCell<Record>>> = None;
    // An access module's `WWW-Authenticate` on a refusal `error_page` took over: nginx keeps
    // it in the answer's headers through the redirect (the oauth2-proxy pattern's 302 has it).
    let mut carried_auth: Vec<(&'static str, std::borrow::Cow<'static, str>)> = Vec::new();

    loop {
        // A redirect from an upstream's answer: the next location's rewrites see it.
        rw.upstream.clone_from(&upstream);
        // What the server's rewrites came to (`return`, a redirect): an answer meets the
        // server's `error_page`s like any other.
        let mut srv_outcome: Option<Outcome> = None;
        if REFUSED {
            if let Some(reply) = refusal.take() {
                srv_outcome = Some(Outcome::Reply(reply));
                server_rewrites = false;
            }
        }
        // URI changes by rewrites and internal redirects share one budget, as in nginx.
        if redirects + rw.cycles > MAX_REDIRECTS {
            let what = if rw.cycles > redirects {
                "processing"
            } else {
                "internally redirecting to"
            };
            crate::conn_log!(
                Level::Error,
                r.info.number,
                "rewrite or internal redirection cycle while {what} \"{}\"{}",
                rw.uri,
                r.log_ctx()
            );
            return finish(
                r,
                Box::new(super::reply::error_reply(500, &srv.loc)),
                &srv.loc,
                rw,
                None,
            );
        }
        if server_rewrites && named.is_none() && !srv.rewrite.is_empty() {
            let mut no_if = None;
            match rewrite::run(
                &srv.rewrite,
                &srv.if_blocks,
                &mut rw,
                &mut no_if,
                r,
                &srv.loc,
                r.info.number,
                false,
            ) {
                Outcome::Continue | Outcome::Again => {}
                answer => srv_outcome = Some(answer),
            }
            // The location is searched next anyway.
            rw.uri_changed = false;
        }
        server_rewrites = false;
        // A named location is entered past nginx's find-config phase.
        let to_named = named.is_some();
        let loc = if srv_outcome.is_some() {
            None
        } else {
            match named.take() {
                Some(n) => match location::find_named(&srv.locations, &n) {
                    Some(l) => Some(l),
                    None => {
                        crate::conn_log!(
                            Level::Error,
                            r.info.number,
                            "could not find named location \"{n}\"{}",
                            r.log_ctx()
                        );
                        return finish(
                            r,
                            Box::new(super::reply::error_reply(500, &srv.loc)),
                            &srv.loc,
                            rw,
                            None,
                        );
                    }
                },
                None => {
                    let (loc, redirect) = location::find_or_redirect(&srv.locations, &rw.uri);
                    if let Some(l) = loc.filter(|_| redirect) {
                        // nginx's `auto_redirect` answers before the location's rewrites.
                        let mut reply = super::reply::error_reply(301, &l.loc);
                        let to = match rw.args.as_deref() {
                            Some(a) if !a.is_empty() => format!("{}?{a}", l.name),
                            _ => l.name.clone(),
                        };
                        reply.redirect_to_path(&l.loc, &to, r.host, r.info, r.srv);
                        return finish(r, Box::new(reply), &l.loc, rw, None);
                    }
                    loc
                }
            }
        };
        if let Some(caps) = captures_of(loc, &rw.uri) {
            rw.captures = caps.numbered;
            rw.vars.extend(caps.named);
        }
        let mut lc = loc.map_or(&srv.loc, |l| &l.loc);
        // nginx's `ngx_set_connection_log`: the location's error log from here on.
        crate::log::set_scope(lc.error_log.as_ref());
        // `limit_except`: a method the location does not list is served with the block's
        // configuration, from here on (nginx's find-config phase), its rewrites included.
        let limited = super::limit_except::limited(lc, effective_method(r, method_get));
        if let Some(block) = limited {
            lc = block;
        }
        let mut decided = srv_outcome;
        // nginx's find-config phase: a declared length over the location's
        // `client_max_body_size` is refused before anything else runs there (`error_page 413`
        // applies); not in a named location (PeerTube's `try_files /dev/null @api`).
        let too_large = decided.is_none() && !to_named && body.over_limit(lc).is_some();
        if too_large {
            client_body::log_failure(
                client_body::Failure::TooLarge {
                    length: body.over_limit_length(),
                    chunk: None,
                },
                r,
            );
            decided = Some(Outcome::Error(413));
        }
        let refused = loc.is_some_and(|l| l.internal) && !internal && !rw.internal;
        if let Some(l) = loc.filter(|_| !refused && !too_large && limited.is_none()) {
            if !l.rewrite.is_empty() {
                let mut active_if = None;
                let said = rewrite::run(
                    &l.rewrite,
                    &l.if_blocks,
                    &mut rw,
                    &mut active_if,
                    r,
                    lc,
                    r.info.number,
                    true,
                );
                if let Some(b) = active_if {
                    lc = &b.loc;
                }
                match said {
                    Outcome::Again => continue,
                    Outcome::Continue => {}
                    answer => decided = Some(answer),
                }
            }
        }
        // nginx's preaccess and access phases (limits, `allow`/`deny`, `auth_basic`), in the
        // location the request is in now.
        if decided.is_none() && !refused && sub.is_none() {
            let cx = Cx {
                r,
                lc,
                rw: &rw,
                upstream: upstream.as_ref(),
            };
            if super::modules::access_needed(&cx) {
                if let Some(reply) = super::modules::access_phases(&cx).await {
                    decided = Some(Outcome::Reply(reply));
                }
            }
        }
        // A subrequest is a GET, whatever the main request's method (a HEAD's too), but
        // for a mirror's (the client's method).
        let method = match sub {
            Some(sub) => sub.method,
            None => effective_method(r, method_get),
        };

        // nginx's precontent phase: `mirror` reads the body it mirrors and leaves its
        // subrequests to run once the answer is out.
        if decided.is_none() && !refused && sub.is_none() && lc.mirror.in_use() {
            decided = super::mirror::precontent(r, lc, &rw, body).await;
        }
        let mut from_try_files = false;
        // An upstream's `X-Accel-Redirect` (`upstream/accel.rs`): its arguments replace the
        // request's, and the request goes on as a GET.
        let mut accel = false;
        let outcome = if let Some(o) = decided {
            o
        } else if refused {
            Outcome::Error(404)
        } else {
            // The content handler the location's directives chose when the configuration was
            // read (nginx's `clcf->handler`); try_files runs before it (the precontent phase).
            match lc.content {
                Content::StubStatus => {
                    Outcome::Reply(Box::new(super::stub_status::reply(method, lc)))
                }
                Content::EmptyGif => Outcome::Reply(Box::new(super::empty_gif::reply(method, lc))),
                Content::Flv => {
                    let vars = r.lazy_vars(&rw, lc);
                    let args = rw.args.as_deref();
                    match super::flv::handle(r, lc, method, &rw.uri, args, vars.get()) {
                        Some(outcome) => outcome,
                        // Declined: the content phase's handlers, as nginx's.
                        None => static_content(r, lc, method, &rw.uri, &vars),
                    }
                }
                _ if rw.rewritten_break && lc.doc_root().alias => {
                    crate::conn_log!(
                        Level::Alert,
                        r.info.number,
                        "\"alias\" cannot be used in location \"{}\" where URI was rewritten{}",
                        loc.map_or("", |l| l.name.as_str()),
                        r.log_ctx()
                    );
                    Outcome::Error(500)
                }
                Content::Proxy | Content::Upstream(_) => {
                    let via = match lc.content {
                        Content::Upstream(proto) => super::proxy_cache::serve::Via::Other(proto),
                        _ => super::proxy_cache::serve::Via::Proxy(
                            lc.proxy
                                .pass
                                .as_ref()
                                .expect("Content::Proxy has proxy_pass"),
                        ),
                    };
                    // A file `try_files` finds is passed with its name as the URI; none: the
                    // fallback.
                    let found = match &lc.try_files {
                        Some(tf) => try_files_find(r, tf, lc, &rw).map(|(name, _)| Some(name)),
                        None => Ok(None),
                    };
                    match found {
                        Ok(name) => {
                            if let Some(name) = name {
                                rw.uri = name;
                            }
                            let o = cached_outcome(
                                r,
                                lc,
                                via,
                                &rw,
                                internal,
                                method,
                                body,
                                &mut upstream,
                            )
                            .await;
                            accel = matches!(o, Outcome::Internal(_) | Outcome::Named(_));
                            o
                        }
                        Err(fallback) => {
                            from_try_files = true;
                            fallback
                        }
                    }
                }
                Content::Static => match &lc.try_files {
                    // The DAV handler runs after try_files, on the name it found.
                    Some(tf) if super::dav::wanted(lc, method) => {
                        match try_files_find(r, tf, lc, &rw) {
                            Ok((name, _)) => {
                                rw.uri = name;
                                super::dav::handle(r, lc, method, &rw, body).await
                            }
                            Err(fallback) => {
                                from_try_files = true;
                                fallback
                            }
                        }
                    }
                    // A file found is served in this location (a directory's index redirect
                    // keeps the arguments, as any index redirect); none: the fallback.
                    Some(tf) => match try_files_find(r, tf, lc, &rw) {
                        // In a regex location with an alias (Icinga Web 2's), a file found is
                        // the alias and its name; a directory leaves the URI as it was.
                        Ok((name, dir)) if lc.doc_root().whole_alias() => {
                            let vars = r.lazy_vars(&rw, lc);
                            if dir {
                                static_content(r, lc, method, &rw.uri, &vars)
                            } else {
                                let mut added = lc.clone();
                                added.root = Some(lc.doc_root().with_uri_added(vars.get()));
                                static_content(r, &added, method, &name, &vars)
                            }
                        }
                        Ok((name, _)) => {
                            let vars = r.lazy_vars(&rw, lc);
                            static_content(r, lc, method, &name, &vars)
                        }
                        Err(fallback) => {
                            from_try_files = true;
                            fallback
                        }
                    },
                    None if super::dav::wanted(lc, method) => {
                        super::dav::handle(r, lc, method, &rw, body).await
                    }
                    None => {
                        let vars = r.lazy_vars(&rw, lc);
                        static_content(r, lc, method, &rw.uri, &vars)
                    }
                },
            }
        };

        // The autoindex handler reads the directory without holding the worker.
        let outcome = match outcome {
            Outcome::Autoindex(dir) => {
                Outcome::Reply(super::autoindex::answer(r, lc, &rw, method, &dir).await)
            }
            other => other,
        };
        match outcome {
            Outcome::Internal(new_uri) => {
                if accel {
                    method_get = as_get(r, sub);
                }
                if from_try_files || accel {
                    set_uri(&mut rw, &new_uri);
                } else {
                    // The index module's redirect keeps the arguments.
                    rw.uri = new_uri;
                }
                rw.rewritten_break = false;
                internal = true;
                server_rewrites = true;
                redirects += 1;
            }
            // nginx keeps the method for a named location (`X-Accel-Redirect: @name`).
            Outcome::Named(n) => {
                named = Some(n);
                internal = true;
                redirects += 1;
            }
            Outcome::Autoindex(_) => unreachable!("answered above"),
            Outcome::Continue
            | Outcome::Again
            | Outcome::Error(_)
            | Outcome::Reply(_)
            | Outcome::Final(_) => {
                // An answer: `error_page` may take over one of nginx's errors and a reply it
                // made, never one sent as it is.
                let (mut reply, sent) = match outcome {
                    Outcome::Final(reply) => (reply, true),
                    Outcome::Reply(reply) => (reply, false),
                    Outcome::Error(code) => (Box::new(super::reply::error_reply(code, lc)), false),
                    // Nothing decided where an answer was due: nginx's 500.
                    _ => (Box::new(super::reply::error_reply(500, lc)), false),
                };
                if reply.status >= 300 && !error_page_used && !sent {
                    let page = lc
                        .error_page
                        .as_deref()
                        .and_then(|pages| pages.iter().find(|p| p.codes.contains(&reply.status)));
                    if let Some(page) = page {
                        error_page_used = !lc.recursive_error_pages();
                        carried_auth.extend(
                            reply
                                .headers
                                .iter()
                                .filter(|(n, _)| n.eq_ignore_ascii_case("www-authenticate"))
                                .cloned(),
                        );
                        close_after |= reply.ends_keepalive();
                        let target = r.vars_rw(&rw, lc).eval(&page.target);
                        let code = reply.status;
                        if target.starts_with('@') || target.starts_with('/') {
                            forced_status = match page.answer {
                                None => Some(code),
                                Some(None) => None,
                                Some(Some(c)) => Some(c),
                            };
                            rw.err_status = forced_status.map(|status| crate::variables::Sent {
                                status,
                                ..Default::default()
                            });
                            internal = true;
                            redirects += 1;
                            // To a named location the method stays, as nginx's.
                            if target.starts_with('@') {
                                named = Some(target);
                            } else {
                                method_get = as_get(r, sub);
                                set_uri(&mut rw, &target);
                                rw.rewritten_break = false;
                                server_rewrites = true;
                            }
                            continue;
                        }
                        // An external URL: a redirect (302 unless `=301`/`=303`/...).
                        let status = match page.answer {
                            Some(Some(c @ (301 | 302 | 303 | 307 | 308))) => c,
                            _ => 302,
                        };
                        let mut redirect = super::reply::error_reply(status, lc);
                        redirect.redirect_to_url(target);
                        // After what auth_request carried (nginx adds those first).
                        redirect.headers.append(&mut carried_auth);
                        redirect.location_at = super::reply::LocationAt::Extra(0);
                        return finish(r, Box::new(redirect), lc, rw, None);
                    }
                }
                // An error page's own failure keeps its status and page (nginx's special
                // response sets `err_status` anew); anything else answers with the status.
                if let Some(s) =
                    forced_status.filter(|_| sent || reply.status < 300 || reply.status == 304)
                {
                    // Set before the header filters, as nginx's `err_status`: ranges and
                    // conditionals then apply only if the page answers 200.
                    reply.status = s;
                    // The status line is nginx's for the new status.
                    reply.reason = None;
                }
                reply.close_after |= close_after;
                if let Some(rec) = &upstream {
                    rec.borrow_mut().hand_on(&mut reply);
                }
                if !carried_auth.is_empty() {
                    // Added before the last location's answer added its own (a file's `ETag`,
                    // a `return 302`'s `Location`), as nginx's list has them.
                    use super::reply::LocationAt;
                    if reply.location_at == LocationAt::First && reply.headers.is_empty() {
                        reply.location_at = LocationAt::Extra(0);
                    }
                    carried_auth.append(&mut reply.headers);
                    std::mem::swap(&mut reply.headers, &mut carried_auth);
                }
                let mut done = finish(r, reply, lc, rw, upstream.as_ref());
                done.upstream = upstream;
                return done;
            }
        }
    }
}

/// An internal redirect to a URI (`error_page`, `X-Accel-Redirect`) makes the request a GET
/// from here on; a client request's `$request_method` reads GET too (nginx's is the main
/// request's, which a subrequest's redirect leaves alone).
fn as_get(r: &Req<'_, '_>, sub: Option<&Sub<'_>>) -> bool {
    if sub.is_none() {
        r.extras.set_as_get();
    }
    true
}

/// The request's method as the phases see it: an `error_page` redirect makes it a GET (but
/// for a HEAD).
fn effective_method<'r>(r: &Req<'_, 'r>, method_get: bool) -> &'r str {
    if method_get && r.req.method() != "HEAD" {
        "GET"
    } else {
        r.req.method()
    }
}

/// An internal redirect's target (`error_page`, `try_files`): the path, and the arguments
/// after its `?`, none without one (nginx's `ngx_http_split_args`).
fn set_uri(rw: &mut rewrite::State, target: &str) {
    match target.split_once('?') {
        Some((p, a)) => {
            rw.uri = p.to_string();
            rw.args = (!a.is_empty()).then(|| a.to_string());
        }
        None => {
            rw.uri = target.to_string();
            rw.args = None;
        }
    }
}

/// `try_files`: the name of the first file (or `dir/`) that exists and whether it is a
/// directory, or the fallback's outcome.
// The fallback is the rare case; boxing it would only move the allocation.
#[allow(clippy::result_large_err)]
fn try_files_find(
    r: &Req<'_, '_>,
    tf: &TryFiles,
    lc: &LocConf,
    rw: &rewrite::State,
) -> Result<(String, bool), Outcome> {
    let vars = r.vars_rw(rw, lc);
    for t in &tf.files {
        let name = vars.eval(&t.name);
        let path = lc.doc_root().try_file(&name, &vars);
        if std::fs::metadata(&path).is_ok_and(|m| m.is_dir() == t.dir) {
            return Ok((name, t.dir));
        }
    }
    Err(match &tf.fallback {
        TryFallback::Code(c) => Outcome::Reply(Box::new(super::reply::error_reply(*c, lc))),
        TryFallback::Named(n) => Outcome::Named(n.clone()),
        TryFallback::Uri(t) => Outcome::Internal(vars.eval(t)),
    })
}

/// The header filters of the modules' list, in nginx's order (not-modified, headers, gzip,
/// range), and what nginx's header writer drops (`Last-Modified` but on 200, 206 and 304; a
/// 204's body headers).
fn finish<'s>(
    r: &Req<'s, '_>,
    mut reply: Box<Reply>,
    lc: &'s LocConf,
    rw: rewrite::State,
    upstream: Option<&Rc<RefCell<Record>>>,
) -> Answered<'s> {
    let cx = Cx {
        r,
        lc,
        rw: &rw,
        upstream,
    };
    super::modules::header_filters(&cx, &mut reply);
    // `return 444`, `return 408` (nginx terminates the request: no answer), 499: the client
    // went away while the upstream was working, and a header filter's failure (`slice`).
    let close = matches!(reply.status, 444 | 499)
        || (reply.status == 408 && !reply.proxied)
        || reply.terminate;
    if !matches!(reply.status, 200 | 206 | 304) {
        reply.last_modified = None;
    }
    // nginx's header writer clears a 204's Content-Type and Content-Length only for a status
    // of its own making: a proxied 204 comes with the upstream's status line, and what the
    // upstream said of type and length is passed on (its body framing is already "none").
    if reply.status == 204 && !reply.upstream_status {
        reply.content_type = None;
        reply.body = Body::Empty;
    }
    Answered {
        reply,
        lc,
        uri: rw.uri,
        args: rw.args,
        user_vars: rw.vars,
        close,
        upstream: None,
    }
}

/// The file a URI maps to in a location (for `$request_filename`).
pub fn request_filename(lc: &LocConf, uri: &str) -> PathBuf {
    lc.doc_root().map(uri, None)
}

/// nginx's content-phase handlers after try_files for GET, HEAD and POST: `random_index`,
/// then the index, autoindex and static modules.
fn static_content(
    r: &Req<'_, '_>,
    lc: &LocConf,
    method: &str,
    uri: &str,
    vars: &super::request::LazyVars<'_, '_, '_>,
) -> Outcome {
    if super::random_index::wanted(lc, method, uri) {
        if let Some(outcome) = super::random_index::handle(r, lc, uri, vars.get()) {
            return outcome;
        }
    }
    static_files::handle(r, lc, method, uri, vars)
}
