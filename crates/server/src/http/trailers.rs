//! `add_trailer NAME VALUE [always]` (nginx's headers module, 1.13.2+): fields sent after the
//! last chunk of an answer.
//!
//! As nginx: only an answer sent chunked carries them, so an answer that could be (HTTP/1.1,
//! `chunked_transfer_encoding` on, not a HEAD, not a 204, 304 or 1xx) and has a trailer to
//! send for its status (200, 201, 204, 206, 301, 302, 303, 304, 307, 308, or any with
//! `always`) is sent chunked, its `Content-Length` dropped; a value that evaluates empty is
//! left out. Lines of a level replace the parent's, as `add_header`'s do.
//!
//! Unlike nginx, which evaluates the values after the last byte of the body, shoal evaluates
//! them with the answer's head (a `$request_time` in a trailer is the time to the head).

use std::io;
use std::sync::Arc;

use shoal_conf::{Directive, Error};

use super::directives::AddHeader;
use super::modules::{Cx, HttpModule};
use super::output::BodyFilter;
use super::reply::Reply;
use crate::conf::{err, Args, Builder, Command, Ctx, Scope};
use crate::http::loc_conf;
use crate::variables::Template;

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
        let mut fields = Vec::new();
        for l in lines.iter().filter(|l| good || l.always) {
            let v = vars.eval(&l.value);
            if !v.is_empty() {
                shoal_http::response::header(&mut fields, l.name.as_bytes(), v.as_bytes());
            }
        }
        reply.filters.push(Box::new(Trailers {
            fields,
            buf: Vec::new(),
        }));
    }
}

/// Passes the body on as it is; makes it go chunked, and holds the trailer fields for the
/// last chunk.
struct Trailers {
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
        Ok(&[])
    }

    fn trailers(&self) -> &[u8] {
        &self.fields
    }
}
