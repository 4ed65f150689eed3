//! A body made of subrequests' bodies, fetched one after another while the answer is written
//! (nginx's subrequests whose output goes in place, in the main request's body: `slice`'s
//! next slices; `ssi` and `addition` may use it for their includes).
//!
//! A module that makes one puts a [`Body::Streamed`] in the reply, holding a [`Streamed`]:
//! plain data (no borrow of the request), asked for its next part by the protocol's writer
//! with the request in hand ([`Req`], the location that answered). Each part is an ordinary
//! body (an upstream's, still on its connection; a cached file's range; bytes) written as it
//! comes, so at most one part's buffers are held at a time, whatever the whole's size. A part
//! that fails (an `Err`) ends the answer: the connection is closed, as nginx closes it when a
//! subrequest's output fails after the head was sent.
//!
//! Runs on the worker. Body filters (gzip, sub, charset) are not applied to a streamed body
//! yet: its parts are written as they come.

use std::future::Future;
use std::io;
use std::pin::Pin;

use super::output::{Output, Sink, Who};
use super::reply::Body;
use super::request::Req;
use super::LocConf;

/// The future of a body's next part.
pub type NextPart<'a> = Pin<Box<dyn Future<Output = io::Result<Option<Body>>> + 'a>>;

/// A body whose parts come from subrequests, one at a time.
pub trait Streamed {
    /// The whole body's length, told in the head (`None`: sent chunked, or to the close).
    fn length(&self) -> Option<u64>;

    /// The next part (`None`: the body is over). `r` is the request the answer is for,
    /// `lc` the location that answered it: a part is usually a subrequest of theirs.
    fn next<'a>(&'a mut self, r: &'a Req<'_, '_>, lc: &'a LocConf) -> NextPart<'a>;
}

/// Writes a streamed body's parts to `sink`, each as it comes. Returns the body bytes sent.
pub async fn send<S: Sink>(
    sink: &mut S,
    output: &Output,
    mut body: Box<dyn Streamed>,
    r: &Req<'_, '_>,
    lc: &LocConf,
    who: Who<'_>,
) -> io::Result<u64> {
    let mut total = 0;
    while let Some(part) = body.next(r, lc).await? {
        total += match part {
            Body::Upstream(u) => {
                super::upstream::relay::relay(sink, output, *u, false, who, lc).await?
            }
            Body::Empty | Body::Absent(_) => 0,
            Body::Streamed(inner) => Box::pin(send(sink, output, inner, r, lc, who)).await?,
            plain => {
                let n = plain.length().unwrap_or(0);
                output.send_plain(sink, plain, lc).await?;
                n
            }
        };
    }
    sink.flush().await?;
    Ok(total)
}
