//! What every protocol does with an answer between the phases and its writer: the answer's
//! thread pool (`aio threads`), the first piece of a file read ahead of the head through it
//! (so a full queue is still a 503), its body filters moved into the [`Output`], the headers
//! `$sent_http_*` reads; and after the answer, `proxy_cache_background_update`.
//!
//! The HTTP/1 connection and each HTTP/2 stream call these in the same order; what is left to
//! a protocol is its framing, its keep-alive and how it writes. Runs on the worker; never
//! blocks (a cold read goes to the pool).

use std::cell::RefCell;
use std::rc::Rc;

use super::output::{is_overflow, Output};
use super::reply::{Body, Reply};
use super::request::Req;
use super::upstream::record::Record;
use super::{static_files, LocConf};

/// An answer readied for its writer.
pub struct Prepared {
    /// The answer's output: its pool, its body filters, its `directio` file.
    pub output: Output,
    /// A body filter changes the body's length (gzip): no `Content-Length`.
    pub changes_length: bool,
    /// The answer's headers as `$sent_http_*` reads them (listed only for a log that may).
    pub sent_headers: Vec<(String, String)>,
    /// The pool named by `aio threads` does not exist: as nginx's output fails then, nothing
    /// is sent, the connection closes (an HTTP/2 stream is reset) and the request is logged
    /// with the answer's status.
    pub pool_failed: bool,
}

/// What the phases left of the request: its URI, arguments and `set` variables.
pub type Rewritten<'a> = (
    &'a str,
    Option<&'a str>,
    &'a std::collections::HashMap<String, String>,
);

/// Readies `reply` for its writer: the pool of `aio threads`, the first piece of a small (or
/// read, not sent) file read ahead of the head (a full queue turns the answer into a 503),
/// the body filters moved into the output. `can_sendfile`: the protocol may send a file
/// range with `sendfile` (HTTP/1 over a plain socket); `logs`: the request is logged.
pub async fn prepare(
    r: &Req<'_, '_>,
    reply: &mut Box<Reply>,
    lc: &LocConf,
    (uri, args, user_vars): Rewritten<'_>,
    can_sendfile: bool,
    logs: bool,
) -> std::io::Result<Prepared> {
    let mut pool = None;
    let mut pool_failed = false;
    // A proxied answer needs the pool only for its temporary file (read back, written
    // with `aio_write`), and only with `aio threads`.
    let proxied = matches!(reply.body, Body::Upstream(_))
        && matches!(lc.aio, Some(super::aio::Aio::Threads(_)));
    let file = matches!(
        reply.body,
        Body::File { .. } | Body::Multipart { .. } | Body::Unsized(_)
    );
    // (Without `aio threads` there is no pool to find, and no variables to make for one.)
    if (proxied || file) && matches!(lc.aio, Some(super::aio::Aio::Threads(_))) {
        let mut vars = r.vars(uri, lc, &[]);
        vars.user = Some(user_vars);
        vars.args = Some(args);
        const SENDING: &str = " while sending response to client";
        match super::aio::pool_for(lc.aio.as_ref(), &vars, r, SENDING) {
            Ok(p) => pool = p,
            // The upstream's answer is in hand: it goes without the pool (the line is
            // logged) rather than being thrown away for a 500.
            Err(super::aio::UnknownPool) if proxied => {}
            Err(super::aio::UnknownPool) => pool_failed = true,
        }
    }
    let output = Output::new(pool, reply.direct.take());
    if output.pool.is_some() {
        if let Body::File {
            len, cached: None, ..
        } = reply.body
        {
            // The body's first piece is read ahead of the head (a small body whole, a
            // larger one up to MAX_GATHER when it is read rather than sent), so an
            // overflow is a 503; a HEAD answer reads nothing.
            let read_path = len <= static_files::SMALL_FILE as u64 || !lc.sendfile();
            if read_path && r.req.method() != "HEAD" {
                if let Err(e) = output.preread(reply, lc, can_sendfile).await {
                    if !is_overflow(&e) {
                        return Err(e);
                    }
                    **reply = super::reply::error_reply(503, lc);
                }
            }
        }
    }
    let filters = std::mem::take(&mut reply.filters);
    let changes_length = filters.iter().any(|f| !f.keeps_length());
    let sent_headers = if logs && lc.access_logs().iter().any(|l| l.reads_sent_headers) {
        let mut h = reply.header_list();
        if changes_length {
            h.retain(|(n, _)| n != "content-length");
        }
        if lc.gzip.vary() {
            // nginx writes the gzip `Vary` from a flag in its header filter: it is not a
            // header `$sent_http_vary` can see.
            h.retain(|(n, v)| !(n == "vary" && v == "Accept-Encoding"));
        }
        h
    } else {
        Vec::new()
    };
    *output.filters.borrow_mut() = filters;
    Ok(Prepared {
        output,
        changes_length,
        sent_headers,
        pool_failed,
    })
}

/// `proxy_cache_background_update`: the update the answer left to run once it is out.
pub fn background(
    upstream: Option<&Rc<RefCell<Record>>>,
) -> Option<Box<super::proxy_cache::serve::Background>> {
    upstream.and_then(|u| u.borrow_mut().background.take())
}

/// Runs a background update (see [`background`]) with the request's context (`r.client`
/// should be `None`: the client has its answer).
pub async fn run_background(
    r: &Req<'_, '_>,
    lc: &LocConf,
    bg: Box<super::proxy_cache::serve::Background>,
) {
    // (Boxed: rare, and kilobytes.)
    Box::pin(super::proxy_cache::serve::update_in_background(r, lc, bg)).await;
}
