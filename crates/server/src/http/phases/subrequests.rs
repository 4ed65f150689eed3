//! The phases run for a subrequest (`auth_request`, `mirror`, `ssi`, `addition`) and a
//! location's content run again for `slice` (see docs/ARCHITECTURE.md, "Subrequests").

use super::Answered;
use super::{cached_outcome, run, Start};
use crate::http::client_body::ClientBody;
use crate::http::reply::{Body, Outcome};
use crate::http::request::Req;
use crate::http::rewrite;
use crate::http::static_files;
use crate::http::{Content, LocConf};

/// A subrequest's answer (nginx's `ngx_http_subrequest` waited for, its body kept in
/// memory and dropped): `uri`'s location runs its phases and content handler as an internal
/// `GET` of the same client request, without the access phases (nginx skips them for a
/// subrequest) and without its body. `auth_request` asks one; `mirror` asks [`subrequest_as`].
/// The answer's body is not read: a proxied one's upstream connection is closed.
pub fn subrequest<'s, 'a>(
    r: &'a Req<'s, '_>,
    uri: &'a str,
) -> std::pin::Pin<Box<dyn std::future::Future<Output = Answered<'s>> + 'a>> {
    let body = ClientBody::none();
    subrequest_as(
        r,
        Sub {
            uri,
            args: None,
            method: "GET",
        },
        body,
    )
}

/// What a subrequest is: its URI, arguments and method.
pub struct Sub<'a> {
    pub uri: &'a str,
    pub args: Option<&'a str>,
    pub method: &'a str,
}

/// [`subrequest`] with its arguments, method and body (`mirror`'s: the client's method and
/// arguments, the client's body read whole or none).
pub fn subrequest_as<'s, 'a>(
    r: &'a Req<'s, '_>,
    sub: Sub<'a>,
    body: ClientBody<'a>,
) -> std::pin::Pin<Box<dyn std::future::Future<Output = Answered<'s>> + 'a>> {
    Box::pin(async move {
        let mut done = run::<false>(r, &body, 0, Start::Subrequest(&sub)).await;
        crate::http::subrequest::log(r, &done);
        done.reply.body = Body::Empty;
        done
    })
}

/// nginx's `NGX_HTTP_SUBREQUEST_CLONE`: the content handler of the location `lc` run again
/// for the request, with the rewrite state `rw` (its URI, arguments and variables) and no
/// body, its answer's body kept to be sent (`slice`'s next slices). No phase before the
/// content runs again; `head` sees the answer before its header filters run (`Err`: it is
/// refused, and so is the main answer).
pub async fn clone_subrequest<'s>(
    r: &Req<'s, '_>,
    lc: &'s LocConf,
    rw: rewrite::State,
    head: &mut dyn FnMut(&mut crate::http::reply::Reply) -> std::io::Result<()>,
) -> std::io::Result<Answered<'s>> {
    let mut reply = match clone_content(r, lc, &rw).await {
        Outcome::Reply(reply) | Outcome::Final(reply) => reply,
        Outcome::Error(code) => Box::new(crate::http::reply::error_reply(code, lc)),
        _ => Box::new(crate::http::reply::error_reply(500, lc)),
    };
    if let Err(e) = head(&mut reply) {
        if let Body::Upstream(ub) = std::mem::replace(&mut reply.body, Body::Empty) {
            ub.finish();
        }
        return Err(e);
    }
    Ok(super::finish(r, reply, lc, rw, None))
}

/// The content handler of [`clone_subrequest`], its answer as it came.
async fn clone_content(r: &Req<'_, '_>, lc: &LocConf, rw: &rewrite::State) -> Outcome {
    let body = ClientBody::none();
    let mut upstream = None;
    let method = r.req.method();
    match lc.content {
        Content::Proxy => {
            let pass = lc
                .proxy
                .pass
                .as_ref()
                .expect("Content::Proxy has proxy_pass");
            let via = crate::http::proxy_cache::serve::Via::Proxy(pass);
            cached_outcome(r, lc, via, rw, false, method, &body, &mut upstream).await
        }
        Content::Upstream(proto) => {
            let via = crate::http::proxy_cache::serve::Via::Other(proto);
            cached_outcome(r, lc, via, rw, false, method, &body, &mut upstream).await
        }
        _ => {
            let vars = r.lazy_vars(rw, lc);
            static_files::handle(r, lc, method, &rw.uri, &vars)
        }
    }
}

/// [`subrequest`] with arguments, its answer's body kept for the caller to read (ssi's
/// `include`, addition's bodies: `http/subrequest_body.rs`).
pub fn subrequest_with_body<'s, 'a>(
    r: &'a Req<'s, '_>,
    uri: &'a str,
    args: Option<&'a str>,
) -> std::pin::Pin<Box<dyn std::future::Future<Output = Answered<'s>> + 'a>> {
    Box::pin(async move {
        let body = ClientBody::none();
        let sub = Sub {
            uri,
            args,
            method: "GET",
        };
        let done = run::<false>(r, &body, 0, Start::Subrequest(&sub)).await;
        crate::http::subrequest::log(r, &done);
        done
    })
}
