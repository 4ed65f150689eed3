//! The body filter's interface (nginx's body filter chain): what a module does to an answer's
//! bytes on their way out. `http/output.rs` runs the chain; `http/subrequest_body.rs` runs
//! the subrequests a filter asks for.

use std::io;

use super::subrequest_body::{Answer, Ask, Requester};

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
