//! `empty_gif`: nginx's 1×1 transparent GIF (43 bytes), answered to GET and HEAD with the
//! Last-Modified nginx gives it (23,349,600 seconds after the epoch, 1970-09-28 06:00:00 GMT),
//! so `If-Modified-Since` gets a 304; other methods a 405. No ranges, no ETag, as nginx.

use shoal_conf::{Directive, Error};

use super::reply::{Body, Reply};
use crate::conf::{Args, Builder, Command, Ctx, Scope};

pub static DIRECTIVES: &[Command] = &[Command::new(
    "empty_gif",
    Ctx::LOCATION,
    Args::NONE,
    set_empty_gif,
)];

/// The image: GIF89a, 1×1, a two-colour table, a graphic control extension making colour 0
/// transparent, and one LZW-coded pixel.
const GIF: [u8; 43] = [
    b'G', b'I', b'F', b'8', b'9', b'a', // header
    0x01, 0x00, 0x01, 0x00, // width 1, height 1
    0x80, 0x01, 0x00, // global colour table of 2, background 1, aspect 0
    0x00, 0x00, 0x00, 0xff, 0xff, 0xff, // black, white
    0x21, 0xf9, 0x04, 0x01, 0x00, 0x00, 0x01, 0x00, // transparency of colour 1
    0x2c, 0x00, 0x00, 0x00, 0x00, 0x01, 0x00, 0x01, 0x00, 0x00, // image descriptor
    0x02, 0x02, 0x4c, 0x01, 0x00, // LZW minimum code size 2, one block of 2 bytes
    0x3b, // trailer
];

/// nginx's `r->headers_out.last_modified_time` for the image.
const LAST_MODIFIED: u64 = 23_349_600;

fn set_empty_gif(_: &mut Builder, _: &Directive, s: &mut Scope<'_>) -> Result<(), Error> {
    super::loc_conf(s).empty_gif = Some(true);
    Ok(())
}

/// The answer for `method`.
pub fn reply(method: &str, lc: &super::LocConf) -> Reply {
    if method != "GET" && method != "HEAD" {
        return super::reply::error_reply(405, lc);
    }
    let mut r = Reply::new(200);
    r.content_type = Some("image/gif".into());
    r.last_modified = Some(shoal_http::date::format_unix(LAST_MODIFIED));
    r.mtime = Some(LAST_MODIFIED as i64);
    r.body = Body::Bytes(GIF.to_vec());
    r
}
