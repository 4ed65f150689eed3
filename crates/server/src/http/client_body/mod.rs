//! A request's body, read when a content handler asks for it (nginx's
//! `ngx_http_read_client_request_body`), as the proxy does: whole before the upstream is
//! contacted (in memory up to `client_body_buffer_size`, then an unlinked temporary file), or
//! streamed as it arrives (`proxy_request_buffering off`). A body no handler reads is the
//! protocol's to discard after the answer.
//!
//! `client_max_body_size` holds for a chunked body as it is decoded (413 when a chunk takes it
//! over), `client_body_timeout` bounds each wait for the client, an `Expect: 100-continue` is
//! answered when the body is first wanted. The settings are the location's whose handler
//! reads the body, as in nginx.
//!
//! The bytes come from the protocol: an HTTP/1 connection's read buffer and socket today.
//!
//! Where the bytes come from (an HTTP/1 connection, an HTTP/2 stream) is `source.rs`.
//!
//! Its directives: `client_body_temp_path` (where a body that does not fit in memory goes, in
//! nginx's numbered files and `levels`; without it, an unnamed file in the system's temporary
//! directory), `client_body_in_file_only` (`on`: every body read whole goes to a file that is
//! kept; `clean`: removed when the request ends) and `client_body_in_single_buffer` (accepted
//! and checked: a body kept in memory is always one buffer here).

use std::cell::RefCell;
use std::fs::File;
use std::io::Write;
use std::sync::Arc;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use shoal_conf::{Directive, Error};
use shoal_http::{BodyDecoder, BodyKind};

use super::request::Req;
use super::temp_file::{RemoveOnDrop, TempPath};
use super::{loc_conf, LocConf};
use crate::conf::{flag_arg, invalid_value, merge, set_once, Args, Builder, Command, Ctx, Scope};
use crate::log::Level;

mod source;
use source::next;
pub use source::{H1Source, H2Source, Source};

pub static DIRECTIVES: &[Command] = &[
    Command::new(
        "client_body_temp_path",
        Ctx::HSL,
        Args::Take(1, 4),
        set_temp_path,
    ),
    Command::new(
        "client_body_in_file_only",
        Ctx::HSL,
        Args::ONE,
        set_in_file_only,
    ),
    Command::new(
        "client_body_in_single_buffer",
        Ctx::HSL,
        Args::Flag,
        set_in_single_buffer,
    ),
];

/// `client_body_in_file_only`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InFileOnly {
    Off,
    /// Every body to a file, kept after the request.
    On,
    /// Every body to a file, removed when the request ends.
    Clean,
}

/// The request body's settings at one level.
#[derive(Clone, Debug, Default)]
pub struct BodyLoc {
    pub temp_path: Option<TempPath>,
    pub in_file_only: Option<InFileOnly>,
    /// `client_body_in_single_buffer`: nginx keeps a body in memory in one buffer for
    /// `$request_body`; shoal always does, so this is read only to be checked.
    pub in_single_buffer: Option<bool>,
}

fn body<'a>(s: &'a mut Scope<'_>) -> &'a mut BodyLoc {
    &mut loc_conf(s).client_body
}

fn set_temp_path(b: &mut Builder, d: &Directive, s: &mut Scope<'_>) -> Result<(), Error> {
    let p = TempPath::parse(b, d)?;
    set_once(&mut body(s).temp_path, p, d)
}

fn set_in_file_only(_: &mut Builder, d: &Directive, s: &mut Scope<'_>) -> Result<(), Error> {
    let v = match d.args[0].value.as_str() {
        "off" => InFileOnly::Off,
        "on" => InFileOnly::On,
        "clean" => InFileOnly::Clean,
        other => return Err(invalid_value(d, other)),
    };
    set_once(&mut body(s).in_file_only, v, d)
}

fn set_in_single_buffer(_: &mut Builder, d: &Directive, s: &mut Scope<'_>) -> Result<(), Error> {
    set_once(&mut body(s).in_single_buffer, flag_arg(d), d)
}

/// The request body's place in the module list (its directives; the proxy reads bodies).
pub struct Module;

impl super::modules::HttpModule for Module {
    type Loc = BodyLoc;
    const DIRECTIVES: &'static [Command] = DIRECTIVES;

    fn merge(loc: &mut BodyLoc, parent: &BodyLoc) {
        merge(&mut loc.temp_path, &parent.temp_path);
        merge(&mut loc.in_file_only, &parent.in_file_only);
        merge(&mut loc.in_single_buffer, &parent.in_single_buffer);
    }
}

/// A request body, read on demand.
pub struct ClientBody<'a> {
    kind: BodyKind,
    inner: RefCell<Inner<'a>>,
}

struct Inner<'a> {
    source: Option<Source<'a>>,
    state: State,
    /// `client_body_in_file_only clean`: the body's file, removed with the request.
    cleanup: Option<RemoveOnDrop>,
}

/// How far the body has been read.
enum State {
    Unread,
    /// Read whole (kept for another handler: an `error_page` to another proxied location).
    Read(Whole),
    /// Being streamed (`proxy_request_buffering off`).
    Streaming {
        decoder: BodyDecoder,
        /// `client_body_timeout` of the location that streams it.
        timeout: Duration,
        started: bool,
        done: bool,
    },
    /// Refused or lost: nothing more is read.
    Failed(Failure),
}

/// A body read whole.
#[derive(Clone)]
pub enum Whole {
    Memory(Bytes),
    /// Spilled to an unlinked temporary file: the file and its length.
    File(Arc<File>, u64),
    /// A length told and no bytes: a `mirror` with `mirror_request_body off`, whose
    /// upstream nginx sends the client's `Content-Length` without the body.
    Announced(u64),
}

/// Why a body could not be read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Failure {
    /// Its length (`client intended to send too large body`) or a chunk (`... too large
    /// chunked body: N+M bytes`, what came before and the chunk) is over
    /// `client_max_body_size`: 413.
    TooLarge {
        length: Option<u64>,
        chunk: Option<(u64, u64)>,
    },
    /// Broken chunked framing: 400.
    Invalid,
    /// The client closed while sending it: nginx closes and logs 400.
    Gone,
    /// The HTTP/2 layer refused it (longer or shorter than its `content-length`) and logged
    /// why: as [`Failure::Gone`], without a line of its own.
    Refused,
    /// Nothing came for `client_body_timeout`: nginx closes and logs 408.
    TimedOut,
    /// Its temporary file could not be made or written (logged where it failed): 500.
    Internal,
}

impl Failure {
    /// The status nginx gives the request.
    pub fn status(self) -> u16 {
        match self {
            Failure::TooLarge { .. } => 413,
            Failure::Invalid | Failure::Gone | Failure::Refused => 400,
            Failure::TimedOut => 408,
            Failure::Internal => 500,
        }
    }

    /// Whether the connection closes without an answer (the request is only logged).
    pub fn silent(self) -> bool {
        matches!(self, Failure::Gone | Failure::Refused | Failure::TimedOut)
    }
}

/// Where the body stands after the answer (for the protocol: discard, linger, close).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Left {
    /// None was sent, or all of it was read.
    Nothing,
    /// No handler touched it: to be discarded.
    Unread,
    /// Streamed in part: what is left cannot be found again; the connection ends.
    Partial,
    /// Refused or lost: the connection ends (lingering for what is still coming).
    Failed(Failure),
}

/// A request body as the proxy sends it upstream.
pub enum BodyToSend<'a, 'b> {
    None,
    /// Read whole before the upstream was contacted.
    Whole(Whole),
    /// Read from the client as it is sent (its length, `None` for chunked).
    Streaming(&'b ClientBody<'a>, Option<u64>),
}

impl BodyToSend<'_, '_> {
    /// The body's length; `None` without a body, or for a chunked body being streamed.
    #[allow(clippy::len_without_is_empty)]
    pub fn len(&self) -> Option<u64> {
        match self {
            BodyToSend::None => None,
            BodyToSend::Whole(Whole::Memory(b)) => Some(b.len() as u64),
            BodyToSend::Whole(Whole::File(_, n) | Whole::Announced(n)) => Some(*n),
            BodyToSend::Streaming(_, n) => *n,
        }
    }

    /// A streamed body some of which has been read: it cannot be sent again.
    pub fn consumed(&self) -> bool {
        matches!(self, BodyToSend::Streaming(b, _) if b.started())
    }
}

impl<'a> ClientBody<'a> {
    /// A request without a body.
    pub fn none() -> ClientBody<'a> {
        ClientBody {
            kind: BodyKind::Empty,
            inner: RefCell::new(Inner {
                source: None,
                state: State::Unread,
                cleanup: None,
            }),
        }
    }

    /// A body read whole already, framed as `kind` (a mirror's copy of the client's).
    pub fn read(kind: BodyKind, whole: Whole) -> ClientBody<'a> {
        ClientBody {
            kind,
            inner: RefCell::new(Inner {
                source: None,
                state: State::Read(whole),
                cleanup: None,
            }),
        }
    }

    /// An HTTP/1 request's body, framed as `kind`.
    pub fn h1(kind: BodyKind, source: H1Source<'a>) -> ClientBody<'a> {
        ClientBody {
            kind,
            inner: RefCell::new(Inner {
                source: (kind != BodyKind::Empty).then_some(Source::H1(source)),
                state: State::Unread,
                cleanup: None,
            }),
        }
    }

    /// An HTTP/2 stream's body, framed as `kind` (`Chunked`: its length was not told);
    /// `recv`: none when the request's HEADERS ended the stream.
    pub fn h2(kind: BodyKind, recv: Option<crate::http::h2::wire::RecvStream>) -> ClientBody<'a> {
        let source = recv.filter(|_| kind != BodyKind::Empty).map(|recv| {
            Source::H2(H2Source {
                recv,
                buf: BytesMut::new(),
                chunked: kind == BodyKind::Chunked,
                ended: false,
            })
        });
        ClientBody {
            kind,
            inner: RefCell::new(Inner {
                source,
                state: State::Unread,
                cleanup: None,
            }),
        }
    }

    /// An HTTP/2 body's stream once the request is answered (to discard what no handler
    /// read: the stream's end is awaited rather than reset).
    pub fn into_h2_stream(self) -> Option<crate::http::h2::wire::RecvStream> {
        match self.inner.into_inner().source {
            Some(Source::H2(src)) if !src.ended => Some(src.recv),
            _ => None,
        }
    }

    /// An HTTP/2 stream's body not read yet, taken whole by a handler that relays its frames
    /// as they come (gRPC: the upstream's flow control then paces the client). The body then
    /// counts as read here.
    pub fn take_h2(&self) -> Option<crate::http::h2::wire::RecvStream> {
        let mut inner = self.inner.borrow_mut();
        if !matches!(inner.state, State::Unread) {
            return None;
        }
        match inner.source.take() {
            Some(Source::H2(src)) if src.buf.is_empty() && !src.ended => {
                inner.state = State::Read(Whole::Memory(Bytes::new()));
                Some(src.recv)
            }
            other => {
                inner.source = other;
                None
            }
        }
    }

    /// How the body is framed.
    pub fn kind(&self) -> BodyKind {
        self.kind
    }

    /// The declared length when it is over `lc`'s `client_max_body_size` (nginx checks it
    /// each time a location is found, before any byte is read): the body is refused, and the
    /// caller answers 413 (see [`log_failure`]).
    pub fn over_limit(&self, lc: &LocConf) -> Option<u64> {
        let BodyKind::Length(n) = self.kind else {
            return None;
        };
        if self.kind.check_max_size(lc.client_max_body_size()).is_ok() {
            return None;
        }
        // Once refused, the body is discarded: a location an `error_page` leads to does not
        // refuse it again (nginx's `r->discard_body`).
        let mut inner = self.inner.borrow_mut();
        if !matches!(inner.state, State::Unread) {
            return None;
        }
        inner.state = State::Failed(Failure::TooLarge {
            length: Some(n),
            chunk: None,
        });
        Some(n)
    }

    /// The declared length, once [`ClientBody::over_limit`] refused it.
    pub fn over_limit_length(&self) -> Option<u64> {
        match self.inner.borrow().state {
            State::Failed(Failure::TooLarge { length, .. }) => length,
            _ => None,
        }
    }

    /// Where the body stands after the answer.
    pub fn left(&self) -> Left {
        if self.kind == BodyKind::Empty {
            return Left::Nothing;
        }
        match &self.inner.borrow().state {
            State::Unread => Left::Unread,
            State::Read(_) => Left::Nothing,
            State::Streaming { done: true, .. } => Left::Nothing,
            State::Streaming { started: false, .. } => Left::Unread,
            State::Streaming { .. } => Left::Partial,
            State::Failed(f) => Left::Failed(*f),
        }
    }

    /// The body as the upstream layer sends it: streamed with `*_request_buffering off`
    /// (`request_buffering`; a chunked one only when the protocol can frame it,
    /// `streams_chunked`: to an HTTP/1.1 upstream, to FastCGI), else read whole first.
    pub async fn for_upstream<'b>(
        &'b self,
        lc: &LocConf,
        r: &Req<'_, '_>,
        request_buffering: bool,
        streams_chunked: bool,
    ) -> Result<BodyToSend<'a, 'b>, Failure> {
        if self.kind == BodyKind::Empty {
            // `client_body_in_file_only`: nginx makes the (empty) file all the same.
            if lc
                .client_body
                .in_file_only
                .is_some_and(|m| m != InFileOnly::Off)
            {
                let mut inner = self.inner.borrow_mut();
                if matches!(inner.state, State::Unread) {
                    let (_, cleanup) = file_only(lc, r).map_err(|e| temp_file_failed(r, &e))?;
                    inner.cleanup = cleanup;
                    inner.state = State::Read(Whole::Memory(Bytes::new()));
                }
            }
            return Ok(BodyToSend::None);
        }
        let streamed =
            !request_buffering && (matches!(self.kind, BodyKind::Length(_)) || streams_chunked);
        {
            let mut inner = self.inner.borrow_mut();
            match &inner.state {
                State::Read(w) => return Ok(BodyToSend::Whole(w.clone())),
                State::Failed(f) => return Err(*f),
                State::Streaming { started: true, .. } => {
                    return Ok(BodyToSend::Streaming(self, self.length()))
                }
                State::Streaming { .. } if streamed => {
                    return Ok(BodyToSend::Streaming(self, self.length()))
                }
                State::Streaming { .. } => {
                    // Not started: read whole after all (another location's choice).
                    inner.state = State::Unread;
                }
                State::Unread => {}
            }
            if streamed {
                let decoder = match BodyDecoder::new(self.kind, read_limit(self.kind, lc)) {
                    Ok(d) => d,
                    Err(_) => {
                        let f = Failure::TooLarge {
                            length: self.length(),
                            chunk: None,
                        };
                        inner.state = State::Failed(f);
                        return Err(f);
                    }
                };
                inner.state = State::Streaming {
                    decoder,
                    timeout: lc.client_body_timeout(),
                    started: false,
                    done: false,
                };
            }
        }
        if streamed {
            self.send_continue().await;
            return Ok(BodyToSend::Streaming(self, self.length()));
        }
        self.read_whole(lc, r).await.map(BodyToSend::Whole)
    }

    /// Whether streaming has begun (what was read is gone: it cannot be sent again).
    pub fn started(&self) -> bool {
        matches!(
            self.inner.borrow().state,
            State::Streaming { started: true, .. }
        )
    }

    /// `Content-Length`; `None` for a chunked body.
    fn length(&self) -> Option<u64> {
        match self.kind {
            BodyKind::Length(n) => Some(n),
            _ => None,
        }
    }

    /// Answers `Expect: 100-continue` before the first read, when nothing of the body has
    /// arrived yet.
    #[allow(clippy::await_holding_refcell_ref)] // Only this request's task holds it.
    async fn send_continue(&self) {
        let mut inner = self.inner.borrow_mut();
        let Some(Source::H1(src)) = inner.source.as_mut() else {
            return;
        };
        if !src.expect_continue || !src.buf.is_empty() {
            return;
        }
        src.expect_continue = false;
        src.out.extend_from_slice(shoal_http::response::CONTINUE);
        // A client that does not take it fails the body's reads next.
        let _ = super::h1::flush(src.stream, src.out, src.send_timeout).await;
    }

    /// Reads the whole body: in memory up to `client_body_buffer_size`, beyond it in a
    /// temporary file (`client_body_temp_path`); all of it in a file with
    /// `client_body_in_file_only`.
    #[allow(clippy::await_holding_refcell_ref)] // Only this request's task holds it.
    async fn read_whole(&self, lc: &LocConf, r: &Req<'_, '_>) -> Result<Whole, Failure> {
        self.send_continue().await;
        let limit = lc.client_body_buffer_size();
        let timeout = lc.client_body_timeout();
        let mut inner = self.inner.borrow_mut();
        let Inner {
            source, cleanup, ..
        } = &mut *inner;
        let Some(src) = source.as_mut() else {
            return Ok(Whole::Memory(Bytes::new()));
        };
        let mut memory: Vec<u8> = Vec::new();
        let mut file: Option<(File, u64)> = None;
        if lc
            .client_body
            .in_file_only
            .is_some_and(|m| m != InFileOnly::Off)
        {
            let (f, c) = file_only(lc, r).map_err(|e| temp_file_failed(r, &e))?;
            file = Some((f, 0));
            *cleanup = c;
        }
        let ended = match BodyDecoder::new(self.kind, read_limit(self.kind, lc)) {
            Err(_) => Err(Failure::TooLarge {
                length: self.length(),
                chunk: None,
            }),
            Ok(mut d) => loop {
                match next(&mut d, src, timeout).await {
                    Ok(Some(data)) => {
                        let temp = lc.client_body.temp_path.as_ref();
                        match keep(&mut memory, &mut file, &data, limit, temp) {
                            Ok(Some(name)) => crate::conn_log!(
                                Level::Warn,
                                r.info.number,
                                "a client request body is buffered to a temporary file {}{}",
                                name.display(),
                                r.log_ctx()
                            ),
                            Ok(None) => {}
                            Err(e) => break Err(temp_file_failed(r, &e)),
                        }
                    }
                    Ok(None) => break Ok(()),
                    Err(f) => break Err(f),
                }
            },
        };
        let state = match ended {
            Ok(()) => State::Read(match file {
                Some((f, n)) => Whole::File(Arc::new(f), n),
                None => {
                    let b: Bytes = memory.into();
                    r.extras.set_body(b.clone());
                    Whole::Memory(b)
                }
            }),
            Err(f) => State::Failed(f),
        };
        inner.state = state;
        match &inner.state {
            State::Read(w) => Ok(w.clone()),
            State::Failed(f) => Err(*f),
            _ => unreachable!("set just above"),
        }
    }

    /// The whole body in a named temporary file of `client_body_temp_path` that the caller
    /// renames or removes (nginx's `request_body_in_persistent_file`, as the DAV module reads
    /// a PUT): its name. A body of no bytes makes an empty file.
    #[allow(clippy::await_holding_refcell_ref)] // Only this request's task holds it.
    pub async fn read_to_file(
        &self,
        lc: &LocConf,
        r: &Req<'_, '_>,
    ) -> Result<std::path::PathBuf, Failure> {
        self.send_continue().await;
        let timeout = lc.client_body_timeout();
        let mut inner = self.inner.borrow_mut();
        match &inner.state {
            State::Unread => {}
            State::Failed(f) => return Err(*f),
            _ => return Err(Failure::Internal),
        }
        let temp = lc.client_body.temp_path.as_ref();
        let (mut file, name) =
            super::temp_file::create_in(temp, true).map_err(|e| temp_file_failed(r, &e))?;
        let name = name.expect("a persistent file has a name");
        let mut written = 0u64;
        let ended = match inner.source.as_mut() {
            None => Ok(()),
            Some(src) => match BodyDecoder::new(self.kind, read_limit(self.kind, lc)) {
                Err(_) => Err(Failure::TooLarge {
                    length: self.length(),
                    chunk: None,
                }),
                Ok(mut d) => loop {
                    match next(&mut d, src, timeout).await {
                        Ok(Some(data)) => match file.write_all(&data) {
                            Ok(()) => written += data.len() as u64,
                            Err(e) => break Err(temp_file_failed(r, &e)),
                        },
                        Ok(None) => break Ok(()),
                        Err(f) => break Err(f),
                    }
                },
            },
        };
        match ended {
            Ok(()) => {
                inner.state = State::Read(Whole::File(Arc::new(file), written));
                Ok(name)
            }
            Err(f) => {
                let _ = std::fs::remove_file(&name);
                inner.state = State::Failed(f);
                Err(f)
            }
        }
    }

    /// The next piece of a streamed body (`None` at its end), reading from the client as
    /// needed.
    #[allow(clippy::await_holding_refcell_ref)] // Only this request's task holds it.
    pub async fn next_piece(&self) -> Result<Option<Bytes>, Failure> {
        let mut inner = self.inner.borrow_mut();
        let Inner { source, state, .. } = &mut *inner;
        let State::Streaming {
            decoder,
            timeout,
            started,
            done,
        } = state
        else {
            return match state {
                State::Failed(f) => Err(*f),
                _ => Ok(None),
            };
        };
        if *done {
            return Ok(None);
        }
        let Some(src) = source.as_mut() else {
            *done = true;
            return Ok(None);
        };
        // From the first read on, what was taken from the buffer cannot be read again.
        *started = true;
        match next(decoder, src, *timeout).await {
            Ok(Some(d)) => Ok(Some(d)),
            Ok(None) => {
                *done = true;
                Ok(None)
            }
            Err(f) => {
                *state = State::Failed(f);
                Err(f)
            }
        }
    }
}

/// Appends a piece of a body read whole: to memory, or to a temporary file once memory would
/// pass `limit` (in `temp`, unlinked at once). Returns the file's name when it was just made
/// in a configured directory (nginx logs it).
fn keep(
    memory: &mut Vec<u8>,
    file: &mut Option<(File, u64)>,
    data: &[u8],
    limit: u64,
    temp: Option<&TempPath>,
) -> std::io::Result<Option<std::path::PathBuf>> {
    let mut made = None;
    if file.is_none() && (memory.len() + data.len()) as u64 > limit {
        let (mut f, name) = super::temp_file::create_in(temp, false)?;
        f.write_all(memory)?;
        *file = Some((f, memory.len() as u64));
        *memory = Vec::new();
        made = name;
    }
    match file {
        Some((f, n)) => {
            f.write_all(data)?;
            *n += data.len() as u64;
        }
        None => memory.extend_from_slice(data),
    }
    Ok(made)
}

/// `client_body_in_file_only on|clean`: the body's file, made before its first byte is read
/// (logged at `notice`, as nginx does), and what removes it with the request for `clean`.
fn file_only(lc: &LocConf, r: &Req<'_, '_>) -> std::io::Result<(File, Option<RemoveOnDrop>)> {
    let conf = &lc.client_body;
    let (f, name) = super::temp_file::create_in(conf.temp_path.as_ref(), true)?;
    let name = name.expect("a persistent file has a name");
    crate::conn_log!(
        Level::Notice,
        r.info.number,
        "a client request body is buffered to a temporary file {}{}",
        name.display(),
        r.log_ctx()
    );
    r.extras.set_body_file(name.display().to_string());
    let cleanup = (conf.in_file_only == Some(InFileOnly::Clean)).then(|| RemoveOnDrop(name));
    Ok((f, cleanup))
}

/// A temporary file that could not be made or written: logged as nginx's `open()`/`write()`
/// failures are; the request fails with 500.
fn temp_file_failed(r: &Req<'_, '_>, e: &std::io::Error) -> Failure {
    crate::conn_log!(
        Level::Crit,
        r.info.number,
        "a client request body could not be buffered to a temporary file {}{}",
        shoal_conf::os_error(e),
        r.log_ctx()
    );
    Failure::Internal
}

/// nginx's log line for a body that could not be read (none for a timeout: nginx only counts
/// it, as 408).
pub fn log_failure(f: Failure, r: &super::request::Req<'_, '_>) {
    use crate::log::Level;
    match f {
        Failure::TooLarge {
            chunk: Some((before, size)),
            ..
        } => crate::conn_log!(
            Level::Error,
            r.info.number,
            "client intended to send too large chunked body: {before}+{size} bytes{}",
            r.log_ctx()
        ),
        Failure::TooLarge { length, .. } => crate::conn_log!(
            Level::Error,
            r.info.number,
            "client intended to send too large body: {} bytes{}",
            length.unwrap_or(0),
            r.log_ctx()
        ),
        Failure::Invalid => crate::conn_log!(
            Level::Info,
            r.info.number,
            "client sent invalid chunked body{}",
            r.log_ctx()
        ),
        Failure::Gone => crate::conn_log!(
            Level::Info,
            r.info.number,
            "client prematurely closed connection{}",
            r.log_ctx()
        ),
        Failure::TimedOut | Failure::Internal | Failure::Refused => {}
    }
}

/// The `client_max_body_size` a body is read under: a chunked body's (or an HTTP/2 body of
/// untold length) is the location's that reads it; a declared length was held to each
/// location the request was found in (`ClientBody::over_limit`, nginx's find-config phase), and
/// nginx does not check it again as it reads: PeerTube's upload locations allow 6M and
/// `try_files /dev/null @api` reads it in `@api`, whose 100k is for its own requests.
fn read_limit(kind: BodyKind, lc: &LocConf) -> u64 {
    match kind {
        BodyKind::Length(_) => 0,
        _ => lc.client_max_body_size(),
    }
}
