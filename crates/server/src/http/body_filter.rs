//! The body filter chain (nginx's): what a module does to an answer's bytes on their way
//! out ([`BodyFilter`]), and the chain run over them, a piece at a time, for the writers
//! (`http/output.rs` feeds it the body). Where a filter asks for a subrequest, its body goes
//! in place from nginx's postpone point on: `http/subrequest_body.rs` runs it.
//!
//! Runs on the worker; a filter holds at most a piece (its own state) between calls.

use std::io;

use super::output::{Sink, MAX_GATHER};
use super::reply::Reply;
use super::subrequest_body::{self, Answer, Ask, Requester};

/// A body filter (nginx's body filter chain): what a module does to an answer's bytes on
/// their way out (gzip compresses, charset recodes). A header filter adds one to the answer
/// ([`crate::http::reply::Reply::filters`]); a body with filters is read, never sent by
/// `sendfile`.
pub trait BodyFilter {
    /// Takes body bytes; returns what goes on (possibly nothing yet).
    fn feed(&mut self, data: &[u8]) -> io::Result<&[u8]>;
    /// The body is over: what is still held goes on.
    fn finish(&mut self) -> io::Result<&[u8]>;
    /// Whether the output is as long as the input (the `Content-Length` stands).
    fn keeps_length(&self) -> bool {
        false
    }
    /// Whether the filter is done changing the body and holds nothing: what comes next
    /// passes by it as it is, not copied (a `sub_filter_once` whose strings were all
    /// replaced).
    fn passes_through(&self) -> bool {
        false
    }
    /// Trailer fields (`Name: value\r\n` lines) for the last chunk (`add_trailer`).
    fn trailers(&self) -> &[u8] {
        &[]
    }
    /// More output is ready without more input: a filter whose output may outgrow its input
    /// many times (gunzip) hands it over a piece at a time, and the writer sends each before
    /// asking for the next ([`BodyFilter::more`]), so what waits in memory stays one piece.
    fn pending(&self) -> bool {
        false
    }
    /// The next piece of what [`BodyFilter::pending`] said is ready.
    fn more(&mut self) -> io::Result<&[u8]> {
        Ok(&[])
    }
    /// The filter acts for its request (ssi reads its variables and makes subrequests): the
    /// writer gives it a [`Requester`] when it asks for more ([`BodyFilter::step`]).
    fn for_request(&self) -> bool {
        false
    }
    /// [`BodyFilter::more`], for a filter that may also ask for a subrequest whose body goes
    /// on before its next output (ssi's `include`, addition's bodies).
    fn step(&mut self, _r: Option<&dyn Requester>) -> io::Result<Step<'_>> {
        self.more().map(Step::Data)
    }
    /// The head of the subrequest the filter asked for, before its header filters run and
    /// its body goes (nginx's header filter seeing a subrequest's answer): the filter may cut
    /// its body, or refuse it (`Err`: the main answer ends there, the connection closed).
    fn subrequest_head(&mut self, _reply: &mut Reply, _r: &dyn Requester) -> io::Result<()> {
        Ok(())
    }
    /// What the subrequest the filter asked for came to.
    fn answered(&mut self, _a: Answer) {}
    /// The filter is for a main request's answer only (addition's): a subrequest's answer
    /// goes without it.
    fn main_only(&self) -> bool {
        false
    }
    /// The filter sits after nginx's postpone filter (gzip): subrequests' bodies go through
    /// it, as nginx hands them to the main request's filters from there.
    fn after_postpone(&self) -> bool {
        false
    }
}

/// What a filter gives when asked for more ([`BodyFilter::step`]).
pub enum Step<'a> {
    Data(&'a [u8]),
    /// A subrequest whose body goes on first.
    Subrequest(Ask),
}

/// Feeds `data` through `filters` in order, emitting what comes out of the last.
pub(super) fn run_filters<S: Sink>(
    filters: &mut [Box<dyn BodyFilter>],
    data: &[u8],
    sink: &mut S,
    chunked: bool,
) -> io::Result<u64> {
    match filters.split_first_mut() {
        None => Ok(sink.emit(data, chunked)),
        Some((first, rest)) if first.passes_through() => run_filters(rest, data, sink, chunked),
        Some((first, rest)) => {
            let out = first.feed(data)?;
            run_filters(rest, out, sink, chunked)
        }
    }
}

/// [`run_filters`], then what a filter holds back ([`BodyFilter::pending`]) a piece at a time,
/// what is gathered written out between pieces.
pub(super) async fn pump<S: Sink>(
    filters: &mut [Box<dyn BodyFilter>],
    data: &[u8],
    sink: &mut S,
    chunked: bool,
    req: Option<&dyn Requester>,
) -> io::Result<u64> {
    let total = run_filters(filters, data, sink, chunked)?;
    Ok(total + drain_pending(filters, sink, chunked, req).await?)
}

/// What the filters hold back, a piece at a time through the ones after them, and the
/// subrequests they ask for, each body in place.
async fn drain_pending<S: Sink>(
    filters: &mut [Box<dyn BodyFilter>],
    sink: &mut S,
    chunked: bool,
    req: Option<&dyn Requester>,
) -> io::Result<u64> {
    let mut total = 0;
    // The last filter that holds some first: a filter is fed only when it holds nothing.
    while let Some(i) = filters.iter().rposition(|f| f.pending()) {
        if sink.out().len() >= MAX_GATHER {
            sink.flush().await?;
        }
        let (done, rest) = filters.split_at_mut(i + 1);
        let asker = &mut done[i];
        match asker.step(req)? {
            Step::Data(out) => total += run_filters(rest, out, sink, chunked)?,
            Step::Subrequest(ask) => {
                // Its body skips the filters before nginx's postpone filter: it had its own.
                let from = rest
                    .iter()
                    .position(|f| f.after_postpone())
                    .unwrap_or(rest.len());
                let answer = match req {
                    Some(r) => {
                        let (n, a) = subrequest_body::insert(
                            r,
                            ask,
                            &mut **asker,
                            &mut rest[from..],
                            sink,
                            chunked,
                        )
                        .await?;
                        total += n;
                        a
                    }
                    None => Answer::failed(),
                };
                asker.answered(answer);
            }
        }
    }
    Ok(total)
}

/// Ends every filter in order, each one's last output through the ones after it (a filter
/// may still ask for subrequests as it ends: slice's next slices, addition's
/// `add_after_body`). Before those go, the filters after the asking one up to nginx's
/// postpone point are ended (nginx's `last_in_chain`: a sub filter gives what it held), but
/// for those that act for the request (they end in their turn, after the subrequests).
pub(super) async fn finish_filters<S: Sink>(
    filters: &mut [Box<dyn BodyFilter>],
    sink: &mut S,
    chunked: bool,
    req: Option<&dyn Requester>,
) -> io::Result<u64> {
    let mut total = 0;
    let post = filters
        .iter()
        .position(|f| f.after_postpone())
        .unwrap_or(filters.len());
    // Filters ended ahead of their turn (a bit each; a chain is a handful of filters).
    let mut ended = 0u64;
    for i in 0..filters.len() {
        if i < 64 && ended & (1 << i) != 0 {
            continue;
        }
        let (done, rest) = filters.split_at_mut(i + 1);
        let out = done[i].finish()?;
        total += run_filters(rest, out, sink, chunked)?;
        if done[i].pending() && done[i].for_request() {
            for j in i + 1..post.min(64) {
                if ended & (1 << j) == 0 && !filters[j].for_request() {
                    let (done, rest) = filters.split_at_mut(j + 1);
                    let out = done[j].finish()?;
                    total += run_filters(rest, out, sink, chunked)?;
                    ended |= 1 << j;
                }
            }
        }
        total += drain_pending(&mut filters[i..], sink, chunked, req).await?;
    }
    Ok(total)
}

/// Feeds the body's last bytes through `filters` and ends them: what both give goes out as
/// one chunk, as nginx's chunked filter frames what one pass of the chain hands it (the last
/// buffer's pass carries what the filters held back, a sub filter's cut match or gzip's
/// tail). A filter with more to give ([`BodyFilter::pending`]: gunzip) sends it piece by
/// piece instead, each its own chunk, memory bounded.
pub(super) async fn end_filters<S: Sink>(
    filters: &mut [Box<dyn BodyFilter>],
    data: &[u8],
    sink: &mut S,
    chunked: bool,
    req: Option<&dyn Requester>,
) -> io::Result<u64> {
    // (Subrequests' bodies may be flushed as the filters end: their pieces go as they come.)
    if !chunked
        || filters.iter().all(|f| f.passes_through())
        || filters.iter().any(|f| f.for_request())
    {
        // (Filters passed through have nothing more to give: no chunk to join.)
        return Ok(pump(filters, data, sink, chunked, req).await?
            + finish_filters(filters, sink, chunked, req).await?);
    }
    let at = sink.out().len();
    run_filters(filters, data, sink, false)?;
    if filters.iter().any(|f| f.pending()) {
        let raw = sink.out()[at..].to_vec();
        sink.out().truncate(at);
        let mut total = sink.emit(&raw, true);
        total += drain_pending(filters, sink, true, None).await?;
        return Ok(total + finish_filters(filters, sink, true, None).await?);
    }
    finish_filters(filters, sink, false, None).await?;
    let out = sink.out();
    if out.len() == at {
        return Ok(0);
    }
    let raw = out[at..].to_vec();
    out.truncate(at);
    Ok(sink.emit(&raw, true))
}
