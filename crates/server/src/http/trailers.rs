//! `add_trailer NAME VALUE [always]` (nginx's headers module, 1.13.2+): fields sent after the
//! last chunk of an answer.
//!
//! As nginx: only an answer sent chunked carries them, so an answer that could be (HTTP/1.1,
//! `chunked_transfer_encoding` on, not a HEAD, not a 204, 304 or 1xx) and has a trailer to
//! send for its status (200, 201, 204, 206, 301, 302, 303, 304, 307, 308, or any with
//! `always`) is sent chunked, its `Content-Length` dropped; a value that evaluates empty is
//! left out. Lines of a level replace the parent's, as `add_header`'s do.
//!
//! As nginx, which evaluates them with the body's last buffer, the values that change while
//! the body goes (`$request_time`, `$msec`) are taken once the body is over; the rest of each
//! value is evaluated with the head (the request, the upstream's head and the rewrite state
//! are all known then, and borrowed from the request, which the body filter outlives).

use std::io;
use std::sync::Arc;
use std::time::Instant;

use shoal_conf::{Directive, Error};

use super::directives::AddHeader;
use super::modules::{Cx, HttpModule};
use super::output::BodyFilter;
use super::reply::Reply;
use crate::conf::{err, Args, Builder, Command, Ctx, Scope};
use crate::http::loc_conf;
use crate::variables::{Piece, Template, Var};

pub static DIRECTIVES: &[Command] = &[Command::new(
    "add_trailer",
    Ctx::HSL.or(Ctx::LIF),
    Args::Take(2, 3),
    set_add_trailer,
)];

/// `add_trailer` lines at location level.
#[derive(Clone, Debug, Default)]
pub struct TrailersLoc {
    pub lines: Option<Arc<Vec<AddHeader>>>,
}

fn set_add_trailer(_: &mut Builder, d: &Directive, s: &mut Scope<'_>) -> Result<(), Error> {
    let always = match d.args.get(2) {
        None => false,
        Some(a) if a.value == "always" => true,
        Some(a) => return Err(err(d, format!("invalid parameter \"{}\"", a.value))),
    };
    let value = Template::compile(&d.args[1].value).map_err(|m| err(d, m))?;
    let lc = loc_conf(s);
    let list = lc
        .trailers
        .lines
        .get_or_insert_with(|| Arc::new(Vec::new()));
    Arc::make_mut(list).push(AddHeader {
        name: crate::conf::intern(&d.args[0].value),
        value,
        always,
    });
    Ok(())
}

/// The trailers' place in the module list: a header filter after the headers filter's.
pub struct Module;

impl HttpModule for Module {
    type Loc = TrailersLoc;
    const DIRECTIVES: &'static [Command] = DIRECTIVES;

    fn merge(loc: &mut TrailersLoc, parent: &TrailersLoc) {
        crate::conf::merge(&mut loc.lines, &parent.lines);
    }

    fn header_filter(loc: &TrailersLoc, cx: &Cx<'_, '_, '_>, reply: &mut Box<Reply>) {
        let Some(lines) = &loc.lines else {
            return;
        };
        let status = reply.status;
        let good = matches!(
            status,
            200 | 201 | 204 | 206 | 301 | 302 | 303 | 304 | 307 | 308
        );
        if !lines.iter().any(|l| good || l.always)
            || status < 200
            || matches!(status, 204 | 304)
            || cx.r.req.method() == "HEAD"
            || !super::framing::chunks_allowed(cx.r.req, cx.lc)
            || reply.terminate
        {
            return;
        }
        let rec = cx.upstream.map(|u| u.borrow());
        let mut vars = cx.r.vars_rw(cx.rw, cx.lc);
        vars.upstream = rec.as_deref();
        let mut late = Vec::new();
        for l in lines.iter().filter(|l| good || l.always) {
            let mut parts = Vec::new();
            let mut text = String::new();
            for p in &l.value.pieces {
                match p {
                    Piece::Text(t) => text.push_str(t),
                    Piece::Var(v) if is_late(v) => {
                        parts.push(Part::Text(std::mem::take(&mut text)));
                        parts.push(Part::Late(v.clone()));
                    }
                    Piece::Var(v) => {
                        vars.value(v, &mut text);
                    }
                }
            }
            parts.push(Part::Text(text));
            late.push((l.name, parts));
        }
        reply.filters.push(Box::new(Trailers {
            lines: late,
            start: cx.r.start,
            fields: Vec::new(),
            buf: Vec::new(),
        }));
    }
}

/// The variables whose value is taken when the body is over.
fn is_late(v: &Var) -> bool {
    matches!(v, Var::RequestTime | Var::Msec)
}

/// A piece of a trailer's value: evaluated with the head, or after the body.
enum Part {
    Text(String),
    Late(Var),
}

/// Passes the body on as it is; makes it go chunked, and makes the trailer fields for the
/// last chunk once the body is over.
struct Trailers {
    lines: Vec<(&'static str, Vec<Part>)>,
    /// When the request began (`$request_time`).
    start: Instant,
    fields: Vec<u8>,
    buf: Vec<u8>,
}

impl BodyFilter for Trailers {
    fn feed(&mut self, data: &[u8]) -> io::Result<&[u8]> {
        self.buf.clear();
        self.buf.extend_from_slice(data);
        Ok(&self.buf)
    }

    fn finish(&mut self) -> io::Result<&[u8]> {
        use std::fmt::Write;
        self.fields.clear();
        for (name, parts) in &self.lines {
            let mut v = String::new();
            for p in parts {
                match p {
                    Part::Text(t) => v.push_str(t),
                    Part::Late(Var::RequestTime) => {
                        let ms = self.start.elapsed().as_millis();
                        let _ = write!(v, "{}.{:03}", ms / 1000, ms % 1000);
                    }
                    Part::Late(_) => {
                        let d = std::time::SystemTime::now()
                            .duration_since(std::time::UNIX_EPOCH)
                            .unwrap_or_default();
                        let _ = write!(v, "{}.{:03}", d.as_secs(), d.subsec_millis());
                    }
                }
            }
            if !v.is_empty() {
                shoal_http::response::header(&mut self.fields, name.as_bytes(), v.as_bytes());
            }
        }
        Ok(&[])
    }

    fn trailers(&self) -> &[u8] {
        &self.fields
    }
}
