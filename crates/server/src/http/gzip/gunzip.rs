//! nginx's gunzip filter (`ngx_http_gunzip_module`): `gunzip`, `gunzip_buffers`. An answer
//! with `Content-Encoding: gzip` (an upstream's, a `gzip_static always` file's) is
//! decompressed for a client that does not take gzip, as the gzip filter's own request checks
//! say (`Accept-Encoding`, `gzip_http_version`, `gzip_proxied`, `gzip_disable`): any status,
//! any type. `Content-Encoding`, `Content-Length` and ranges go, a strong ETag is weakened,
//! and `gzip_vary on` adds `Vary: Accept-Encoding`.
//!
//! The body is inflated (zlib-rs, gzip members one after another as nginx's zlib reads them)
//! a piece of `gunzip_buffers`' NUMBER × SIZE at a time: what a piece of input inflates to
//! beyond that waits in the inflater until the writer has sent the previous piece
//! ([`BodyFilter::pending`]), so a small body that inflates to gigabytes holds no more than
//! one piece. A body that is not gzip, or ends early, ends the answer with nginx's error-log
//! line (`inflate() failed: FLUSH, CODE`, `inflate() returned -5 on response end`).

use shoal_conf::{Directive, Error};

use crate::conf::{bufs_arg, flag_arg, set_once, Args, Builder, Command, Ctx, Scope};
use crate::http::loc_conf;
use crate::http::modules::Cx;
use crate::http::output::BodyFilter;
use crate::http::reply::{Body, Reply};
use crate::log::Level;

pub static DIRECTIVES: &[Command] = &[
    Command::new("gunzip", Ctx::HSL, Args::Flag, set_gunzip),
    Command::new("gunzip_buffers", Ctx::HSL, Args::TWO, set_gunzip_buffers),
];

crate::conf::conf_slots! {
    /// `gunzip` and `gunzip_buffers` at location level.
    #[derive(Clone, Debug, Default)]
    pub struct GunzipLoc {
        enable: bool = false,
        /// NUMBER and SIZE: nginx's default is 128 KiB in pages.
        buffers: (usize, usize) = (32, 4096),
    }
}

impl GunzipLoc {
    pub fn merge(&mut self, parent: &GunzipLoc) {
        self.merge_slots(parent);
    }
}

fn set_gunzip(_: &mut Builder, d: &Directive, s: &mut Scope<'_>) -> Result<(), Error> {
    set_once(&mut loc_conf(s).gunzip.enable, flag_arg(d), d)
}

fn set_gunzip_buffers(_: &mut Builder, d: &Directive, s: &mut Scope<'_>) -> Result<(), Error> {
    set_once(&mut loc_conf(s).gunzip.buffers, bufs_arg(d)?, d)
}

/// The gunzip filter's place in the module list: after `add_header`, before the charset and
/// gzip filters (nginx's order).
pub struct Module;

impl crate::http::modules::HttpModule for Module {
    type Loc = GunzipLoc;
    const DIRECTIVES: &'static [Command] = DIRECTIVES;

    fn merge(loc: &mut GunzipLoc, parent: &GunzipLoc) {
        loc.merge(parent);
    }

    fn header_filter(g: &GunzipLoc, cx: &Cx<'_, '_, '_>, reply: &mut Box<Reply>) {
        if !g.enable() || !gzipped(reply) {
            return;
        }
        let lc = cx.lc;
        let seen: &Reply = reply;
        // As the gzip filter reads the answer's headers for `gzip_proxied`.
        let header = |name: &str| match name {
            "last-modified" if !seen.proxied => None,
            _ => seen.header(name),
        };
        let facts = super::ResponseFacts {
            status: seen.status,
            content_type: seen.content_type.as_deref(),
            content_length: seen.body.length(),
            already_encoded: true,
            head_only: cx.r.req.method() == "HEAD",
            header: &header,
        };
        let ok = super::gzip_ok(&lc.gzip, cx.r.req, &facts);
        // The answer varies whoever asks (nginx's `r->gzip_vary`).
        if lc.gzip.vary() {
            super::add_vary(reply);
        }
        if ok {
            return;
        }
        let compressed_len = reply.body.length();
        reply
            .headers
            .retain(|(n, _)| *n != "Content-Encoding" && *n != "Accept-Ranges");
        reply.extra.retain(|(n, _)| {
            !n.eq_ignore_ascii_case("content-encoding") && !n.eq_ignore_ascii_case("accept-ranges")
        });
        reply.allow_ranges = false;
        for (n, v) in reply.headers.iter_mut() {
            if *n == "ETag" && v.starts_with('"') {
                *v = format!("W/{v}").into();
            }
        }
        for (n, v) in reply.extra.iter_mut() {
            if n.eq_ignore_ascii_case("etag") && v.starts_with('"') {
                *v = format!("W/{v}").into();
            }
        }
        // An answer without a body (204, 304) has nothing to inflate; a HEAD's filter is never
        // fed, but says the length is not the one the head had.
        let head = cx.r.req.method() == "HEAD";
        if head || !matches!(reply.body, Body::Empty | Body::Absent(_)) {
            let (n, size) = g.buffers();
            reply.filters.insert(
                0,
                Box::new(Gunzip::new(
                    n * size,
                    compressed_len,
                    cx.r.info.number,
                    cx.r.log_ctx(),
                )),
            );
        }
    }
}

/// `Content-Encoding: gzip`, exactly (nginx: a single coding, any case).
fn gzipped(reply: &Reply) -> bool {
    reply
        .header("content-encoding")
        .is_some_and(|v| v.eq_ignore_ascii_case("gzip"))
}

/// zlib's flush values and codes, as nginx's log lines show them.
const Z_NO_FLUSH: i32 = 0;
const Z_FINISH: i32 = 4;
const Z_BUF_ERROR: i32 = -5;

/// The inflating body filter of one answer.
pub struct Gunzip {
    z: zlib_rs::Inflate,
    /// The input not inflated yet (a copy of what the last `feed` brought).
    input: Vec<u8>,
    at: usize,
    out: Vec<u8>,
    /// The last step filled `out`: the inflater may hold more.
    full: bool,
    /// A gzip member ended with the input: the body may end here.
    ended: bool,
    /// What is left of the compressed body, when its length is known (a last piece is
    /// inflated with nginx's `Z_FINISH`, which its error line shows).
    left: Option<u64>,
    conn: u64,
    ctx: String,
}

impl Gunzip {
    fn new(piece: usize, len: Option<u64>, conn: u64, ctx: String) -> Gunzip {
        Gunzip {
            z: inflater(),
            input: Vec::new(),
            at: 0,
            out: vec![0; piece.max(64)],
            full: false,
            ended: false,
            left: len,
            conn,
            ctx,
        }
    }

    /// Inflates what input there is into `out` until it is full or the input is used.
    fn step(&mut self) -> std::io::Result<&[u8]> {
        let mut used = 0;
        self.full = false;
        while self.at < self.input.len() || !self.ended {
            if self.ended {
                // Another gzip member follows (nginx's `inflateReset`).
                self.z = inflater();
                self.ended = false;
            }
            let (in0, out0) = (self.z.total_in(), self.z.total_out());
            let status = self.z.decompress(
                &self.input[self.at..],
                &mut self.out[used..],
                zlib_rs::InflateFlush::NoFlush,
            );
            self.at += (self.z.total_in() - in0) as usize;
            used += (self.z.total_out() - out0) as usize;
            match status {
                Err(e) => {
                    let flush = if self.left == Some(0) {
                        Z_FINISH
                    } else {
                        Z_NO_FLUSH
                    };
                    return Err(self.fail(format!("inflate() failed: {flush}, {}", code(e))));
                }
                Ok(zlib_rs::Status::StreamEnd) => self.ended = true,
                Ok(_) => {}
            }
            if used == self.out.len() {
                self.full = true;
                break;
            }
            if self.z.total_in() == in0 && self.z.total_out() == out0 && !self.ended {
                // Nothing more without more input.
                break;
            }
        }
        Ok(&self.out[..used])
    }

    fn fail(&self, message: String) -> std::io::Error {
        crate::conn_log!(
            Level::Error,
            self.conn,
            "{message} while sending response to client{}",
            self.ctx
        );
        std::io::Error::from(crate::error::Error::invalid(message))
    }
}

/// zlib's return code for an inflate error.
fn code(e: zlib_rs::InflateError) -> i32 {
    match e {
        zlib_rs::InflateError::NeedDict { .. } => 2,
        zlib_rs::InflateError::StreamError => -2,
        zlib_rs::InflateError::DataError => -3,
        zlib_rs::InflateError::MemError => -4,
    }
}

fn inflater() -> zlib_rs::Inflate {
    // A gzip header, and the largest window (nginx's `MAX_WBITS + 16`).
    zlib_rs::Inflate::new(true, 16 + 15)
}

impl BodyFilter for Gunzip {
    fn feed(&mut self, data: &[u8]) -> std::io::Result<&[u8]> {
        debug_assert!(!self.pending(), "the writer takes a piece before the next");
        self.input.clear();
        self.input.extend_from_slice(data);
        self.at = 0;
        if let Some(left) = &mut self.left {
            *left = left.saturating_sub(data.len() as u64);
        }
        self.step()
    }

    fn pending(&self) -> bool {
        self.full || self.at < self.input.len()
    }

    fn more(&mut self) -> std::io::Result<&[u8]> {
        self.step()
    }

    fn finish(&mut self) -> std::io::Result<&[u8]> {
        if !self.ended {
            return Err(self.fail(format!("inflate() returned {Z_BUF_ERROR} on response end")));
        }
        Ok(&[])
    }
}
