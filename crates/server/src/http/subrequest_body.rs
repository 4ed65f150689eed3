//! Subrequests whose answer's body goes into the main answer's, where a body filter asks for
//! it (ssi's `include`, addition's `add_before_body`/`add_after_body`, slice's next slices):
//! nginx's `ngx_http_subrequest` with its postpone filter, for one subrequest at a time. This
//! is the one way a subrequest's body goes into an answer.
//!
//! The writer runs the subrequest when a filter asks ([`super::output::Step::Subrequest`]): a
//! URI's phases, or the location's content handler again (nginx's
//! `NGX_HTTP_SUBREQUEST_CLONE`: slice). The asking filter sees its head first
//! ([`BodyFilter::subrequest_head`]: slice checks and cuts it), its header filters run, and
//! its body streams, through the subrequest's own filters (its ssi: nested includes; its
//! sub filter), into the main answer's filters after nginx's postpone filter (gzip) and out,
//! a piece at a time; then the filter is told what it came to. With `set=` the body is kept
//! in memory instead, up to
//! `subrequest_output_buffer_size`. What the filters read of their request (variables, ssi's
//! `set` values shared by the main request and its subrequests) comes through a
//! [`Requester`], which the protocol makes for an answer whose filters act for it.
//!
//! Runs on the worker. The body is never held whole, but for `set=`.

use std::cell::RefCell;
use std::collections::HashMap;
use std::future::Future;
use std::io;
use std::os::fd::BorrowedFd;
use std::pin::Pin;
use std::rc::Rc;

use bytes::BytesMut;

use super::body_filter::{pump, BodyFilter};
use super::output::{Output, Sink};
use super::reply::{Body, Reply};
use super::request::Req;
use super::transport::ConnInfo;
use super::LocConf;
use crate::log::Level;

/// A future of this worker's (boxed: the subrequests nest).
pub type Local<'a, T> = Pin<Box<dyn Future<Output = T> + 'a>>;

/// ssi's `set` variables: the main request's, seen by its subrequests (nginx keeps them in
/// the main request's context).
pub type SsiVars = Rc<RefCell<HashMap<Vec<u8>, Vec<u8>>>>;

/// What a filter may ask of the request it is for while the body goes out.
pub trait Requester {
    /// A variable's value (`None`: not found).
    fn variable(&self, name: &str) -> Option<Vec<u8>>;
    /// ssi's `set` variables.
    fn ssi_vars(&self) -> &SsiVars;
    /// Writes an error-log line with the request's context.
    fn log(&self, level: Level, line: &str) {
        self.log_as(level, line, "sending response to client");
    }
    /// [`Requester::log`], saying what the request was `doing` (nginx's "while ...").
    fn log_as(&self, level: Level, line: &str, doing: &str);
    /// Runs the subrequest for `uri` and `args`: its answer, filters chosen, body unread;
    /// `None` when this request may make no more (nginx's nesting limit, logged).
    fn subrequest<'a>(
        &'a self,
        uri: &'a str,
        args: Option<&'a str>,
    ) -> Local<'a, Option<Included<'a>>>;
    /// Runs the location's content handler again for the request (nginx's
    /// `NGX_HTTP_SUBREQUEST_CLONE`), with the module variable `var` set for it; `head` sees
    /// its answer before the header filters do (and may refuse it: the error ends the
    /// main answer).
    fn clone_content<'a>(
        &'a self,
        var: Option<(&'static str, String)>,
        head: &'a mut dyn FnMut(&mut Reply) -> io::Result<()>,
    ) -> Local<'a, io::Result<Included<'a>>>;
}

/// A subrequest's answer, and the request its own filters act for.
pub struct Included<'a> {
    pub reply: Box<Reply>,
    pub lc: &'a LocConf,
    pub req: Box<dyn Requester + 'a>,
}

/// What a subrequest runs.
#[derive(Debug)]
pub enum Target {
    /// A URI and its arguments, through its location's phases (ssi, addition).
    Uri { uri: String, args: Option<String> },
    /// The content handler of the request's location again (slice), with a module
    /// variable set for it (`$slice_range`).
    Clone { var: Option<(&'static str, String)> },
}

/// A subrequest a filter asks for.
#[derive(Debug)]
pub struct Ask {
    pub target: Target,
    /// `set=`: the body is kept, not sent.
    pub in_memory: bool,
    /// ssi's `stub=`: the block's text, which goes through the subrequest's filters in
    /// place of a page of the server's own making.
    pub stub: Option<Vec<u8>>,
}

/// What a subrequest came to.
#[derive(Debug, Default)]
pub struct Answer {
    pub status: u16,
    /// The answer is a page of the server's own making (an error), not a body of the
    /// location's (nginx's stub then goes out instead).
    pub special: bool,
    /// Body bytes it gave.
    pub sent: u64,
    /// The body kept (`set=`), `None` if it was too big or failed.
    pub body: Option<Vec<u8>>,
    /// No subrequest could be made.
    pub refused: bool,
}

impl Answer {
    /// No subrequest could be made.
    pub fn failed() -> Answer {
        Answer {
            status: 500,
            special: true,
            refused: true,
            ..Answer::default()
        }
    }
}

/// The main request (or a subrequest) as its filters see it.
pub struct RequestOf<'s, 'r> {
    pub r: Req<'s, 'r>,
    pub lc: &'s LocConf,
    pub uri: String,
    pub args: Option<String>,
    pub user_vars: HashMap<String, String>,
    pub ssi: SsiVars,
    /// How deep its subrequests may still nest (nginx's `r->subrequests`).
    pub subrequests: u32,
}

/// nginx's `NGX_HTTP_MAX_SUBREQUESTS` + 1: a main request's subrequests nest 51 deep.
const MAX_SUBREQUESTS: u32 = 51;

impl<'s, 'r> RequestOf<'s, 'r> {
    /// The main request's, from what its phases came to (its location, URI, arguments and
    /// `set` variables).
    pub fn main(
        r: Req<'s, 'r>,
        lc: &'s LocConf,
        uri: &str,
        args: Option<String>,
        user_vars: &HashMap<String, String>,
    ) -> RequestOf<'s, 'r> {
        super::slice::head_out(r.extras);
        RequestOf {
            r,
            lc,
            uri: uri.to_string(),
            args,
            user_vars: user_vars.clone(),
            ssi: SsiVars::default(),
            subrequests: MAX_SUBREQUESTS,
        }
    }
}

impl Requester for RequestOf<'_, '_> {
    fn variable(&self, name: &str) -> Option<Vec<u8>> {
        let t = crate::variables::Template::compile(&format!("${{{name}}}")).ok()?;
        let [crate::variables::Piece::Var(v)] = &t.pieces[..] else {
            return None;
        };
        let mut vars = self.r.vars(&self.uri, self.lc, &[]);
        vars.user = Some(&self.user_vars);
        vars.args = Some(self.args.as_deref());
        let mut out = String::new();
        vars.value(v, &mut out).then(|| out.into_bytes())
    }

    fn ssi_vars(&self) -> &SsiVars {
        &self.ssi
    }

    fn log_as(&self, level: Level, line: &str, doing: &str) {
        crate::conn_log!(
            level,
            self.r.info.number,
            "{line} while {doing}{}",
            self.r.log_ctx()
        );
    }

    fn subrequest<'a>(
        &'a self,
        uri: &'a str,
        args: Option<&'a str>,
    ) -> Local<'a, Option<Included<'a>>> {
        Box::pin(async move {
            if self.subrequests == 0 {
                self.log(
                    Level::Error,
                    &format!("subrequests cycle while processing \"{uri}\""),
                );
                return None;
            }
            let done = super::phases::subrequest_with_body(&self.r, uri, args).await;
            let (reply, lc) = (done.reply, done.lc);
            let req = self.deeper(lc, done.uri, done.args, done.user_vars);
            Some(Included {
                reply,
                lc,
                req: Box::new(req),
            })
        })
    }

    fn clone_content<'a>(
        &'a self,
        var: Option<(&'static str, String)>,
        head: &'a mut dyn FnMut(&mut Reply) -> io::Result<()>,
    ) -> Local<'a, io::Result<Included<'a>>> {
        Box::pin(async move {
            if let Some((name, value)) = var {
                self.r.extras.set_var(name, value);
            }
            let rw = super::rewrite::State {
                uri: self.uri.clone(),
                args: self.args.clone(),
                vars: self.user_vars.clone(),
                ..Default::default()
            };
            let done = super::phases::clone_subrequest(&self.r, self.lc, rw, head).await?;
            let (reply, lc) = (done.reply, done.lc);
            let req = self.deeper(lc, done.uri, done.args, done.user_vars);
            Ok(Included {
                reply,
                lc,
                req: Box::new(req),
            })
        })
    }
}

impl<'s, 'r> RequestOf<'s, 'r> {
    /// The request of a subrequest of this one, in `lc` (no client watch: the answer is
    /// being written), one level deeper.
    fn deeper(
        &self,
        lc: &'s LocConf,
        uri: String,
        args: Option<String>,
        user_vars: HashMap<String, String>,
    ) -> RequestOf<'s, 'r> {
        RequestOf {
            r: Req {
                client: None,
                ..self.r
            },
            lc,
            uri,
            args,
            user_vars,
            ssi: self.ssi.clone(),
            subrequests: self.subrequests - 1,
        }
    }
}

/// Runs `ask`'s subrequest for `req` (the filter `asker` asked for it) and sends its body
/// through `rest` (the main answer's filters after nginx's postpone filter) to `sink`, or
/// keeps it (`set=`). Returns the bytes sent and what the subrequest came to.
pub fn insert<'a, S: Sink>(
    req: &'a dyn Requester,
    ask: Ask,
    asker: &'a mut dyn BodyFilter,
    rest: &'a mut [Box<dyn BodyFilter>],
    sink: &'a mut S,
    chunked: bool,
) -> Local<'a, io::Result<(u64, Answer)>> {
    Box::pin(async move {
        let info = Sink::info(sink).clone();
        let mut head = |reply: &mut Reply| asker.subrequest_head(reply, req);
        let made = match &ask.target {
            Target::Uri { uri, args } => req.subrequest(uri, args.as_deref()).await,
            Target::Clone { var } => Some(req.clone_content(var.clone(), &mut head).await?),
        };
        let Some(mut inc) = made else {
            return Ok((0, Answer::failed()));
        };
        let mut answer = Answer {
            status: inc.reply.status,
            special: inc.reply.status >= 300 && !inc.reply.proxied,
            ..Answer::default()
        };
        let mut body = std::mem::replace(&mut inc.reply.body, Body::Empty);
        if let Some(stub) = ask.stub.filter(|_| answer.special) {
            body = Body::Bytes(stub);
        }
        // The subrequest's own filters up to nginx's postpone filter (its gzip is the main
        // answer's), but those only a main request has.
        let mut filters = std::mem::take(&mut inc.reply.filters);
        filters.retain(|f| !f.after_postpone() && !f.main_only());
        let output = Output::new(None, None);
        *output.filters.borrow_mut() = filters;
        let sub_req: &dyn Requester = &*inc.req;
        if ask.in_memory {
            let limit = inc.lc.subrequest.output_buffer_size() as usize;
            let mut keep = Keep {
                out: BytesMut::new(),
                info,
                limit,
                over: false,
            };
            let sent = send(&output, &mut keep, body, inc.lc, sub_req).await;
            answer.sent = keep.out.len() as u64;
            if sent.is_ok() && !keep.over && keep.out.len() <= limit {
                answer.body = Some(keep.out.to_vec());
            } else {
                req.log(Level::Error, "too big subrequest response");
            }
            return Ok((0, answer));
        }
        let mut fwd = Forward {
            out: BytesMut::new(),
            info,
            parent: Erased(sink as &mut dyn ErasedSink),
            rest,
            chunked,
            sent: 0,
            gave: 0,
        };
        send(&output, &mut fwd, body, inc.lc, sub_req).await?;
        fwd.pass().await?;
        answer.sent = fwd.gave;
        Ok((fwd.sent, answer))
    })
}

/// Sends a subrequest's body through its filters (none: as it is).
async fn send<S: Sink>(
    output: &Output,
    sink: &mut S,
    body: Body,
    lc: &LocConf,
    req: &dyn Requester,
) -> io::Result<u64> {
    let body = match body {
        Body::Tunnel(_) | Body::Grpc(_) => Body::Empty,
        b => b,
    };
    Box::pin(output.send_filtered(sink, body, false, lc, None, Some(req))).await
}

/// [`Sink`] for a parent whose type is not known here (a subrequest's body may include
/// another's: the sinks nest).
trait ErasedSink {
    fn out(&mut self) -> &mut BytesMut;
    fn info(&self) -> &ConnInfo;
    fn flush_now(&mut self) -> io::Result<bool>;
    fn flush_to<'a>(&'a mut self, keep: usize) -> Local<'a, io::Result<()>>;
    fn until_writable<'a>(&'a mut self) -> Local<'a, io::Result<()>>;
}

impl<S: Sink> ErasedSink for S {
    fn out(&mut self) -> &mut BytesMut {
        Sink::out(self)
    }
    fn info(&self) -> &ConnInfo {
        Sink::info(self)
    }
    fn flush_now(&mut self) -> io::Result<bool> {
        Sink::flush_now(self)
    }
    fn flush_to<'a>(&'a mut self, keep: usize) -> Local<'a, io::Result<()>> {
        Box::pin(Sink::flush_to(self, keep))
    }
    fn until_writable<'a>(&'a mut self) -> Local<'a, io::Result<()>> {
        Box::pin(Sink::until_writable(self))
    }
}

struct Erased<'a>(&'a mut dyn ErasedSink);

impl Sink for Erased<'_> {
    fn out(&mut self) -> &mut BytesMut {
        self.0.out()
    }
    fn info(&self) -> &ConnInfo {
        self.0.info()
    }
    fn more_requests_buffered(&self) -> bool {
        false
    }
    fn flush_now(&mut self) -> io::Result<bool> {
        self.0.flush_now()
    }
    async fn flush_to(&mut self, keep: usize) -> io::Result<()> {
        self.0.flush_to(keep).await
    }
    async fn write_some(&mut self, data: &[u8]) -> io::Result<usize> {
        self.0.out().extend_from_slice(data);
        Ok(data.len())
    }
    fn sendfile_socket(&self) -> Option<BorrowedFd<'_>> {
        None
    }
    fn set_cork(&self, _on: bool) {}
    async fn until_writable(&mut self) -> io::Result<()> {
        self.0.until_writable().await
    }
}

/// Where a subrequest's body goes: through the main answer's filters after the postpone
/// filter, into the main answer's sink.
struct Forward<'a> {
    out: BytesMut,
    info: ConnInfo,
    parent: Erased<'a>,
    rest: &'a mut [Box<dyn BodyFilter>],
    chunked: bool,
    /// Bytes the parent took, framing included.
    sent: u64,
    /// Body bytes the subrequest gave.
    gave: u64,
}

impl Forward<'_> {
    /// Hands what is gathered on.
    async fn pass(&mut self) -> io::Result<()> {
        if self.out.is_empty() {
            return Ok(());
        }
        let data = self.out.split().freeze();
        self.gave += data.len() as u64;
        self.sent += pump(self.rest, &data, &mut self.parent, self.chunked, None).await?;
        Ok(())
    }
}

impl Sink for Forward<'_> {
    fn out(&mut self) -> &mut BytesMut {
        &mut self.out
    }
    fn info(&self) -> &ConnInfo {
        &self.info
    }
    fn more_requests_buffered(&self) -> bool {
        false
    }
    fn flush_now(&mut self) -> io::Result<bool> {
        // Only whole passes go on (they may wait).
        Ok(self.out.is_empty())
    }
    async fn flush_to(&mut self, keep: usize) -> io::Result<()> {
        self.pass().await?;
        Sink::flush_to(&mut self.parent, keep).await
    }
    async fn write_some(&mut self, data: &[u8]) -> io::Result<usize> {
        self.out.extend_from_slice(data);
        self.pass().await?;
        Ok(data.len())
    }
    fn sendfile_socket(&self) -> Option<BorrowedFd<'_>> {
        None
    }
    fn set_cork(&self, _on: bool) {}
    async fn until_writable(&mut self) -> io::Result<()> {
        Sink::until_writable(&mut self.parent).await
    }
}

/// Where a `set=` subrequest's body goes: memory, up to `limit`.
struct Keep {
    out: BytesMut,
    info: ConnInfo,
    limit: usize,
    over: bool,
}

impl Sink for Keep {
    fn out(&mut self) -> &mut BytesMut {
        &mut self.out
    }
    fn info(&self) -> &ConnInfo {
        &self.info
    }
    fn more_requests_buffered(&self) -> bool {
        false
    }
    fn flush_now(&mut self) -> io::Result<bool> {
        Ok(true)
    }
    async fn flush_to(&mut self, _keep: usize) -> io::Result<()> {
        if self.out.len() > self.limit {
            self.over = true;
            return Err(io::Error::other("too big subrequest response"));
        }
        Ok(())
    }
    async fn write_some(&mut self, data: &[u8]) -> io::Result<usize> {
        self.out.extend_from_slice(data);
        Sink::flush_to(self, 0).await?;
        Ok(data.len())
    }
    fn sendfile_socket(&self) -> Option<BorrowedFd<'_>> {
        None
    }
    fn set_cork(&self, _on: bool) {}
    async fn until_writable(&mut self) -> io::Result<()> {
        Ok(())
    }
}
