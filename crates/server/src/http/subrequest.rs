//! `subrequest_output_buffer_size` (nginx's core module, 1.13.10+): the buffer that holds a
//! subrequest's answer when its body is kept in memory (`auth_request`'s subrequests read
//! their answers' heads; the size matters to a module that keeps a body).
//!
//! Checked as nginx checks it (a size, once per level) and inherited down.

use shoal_conf::{Directive, Error};

use crate::conf::{set_once, size_arg, Args, Builder, Command, Ctx, Scope};
use crate::http::loc_conf;

pub static DIRECTIVES: &[Command] = &[Command::new(
    "subrequest_output_buffer_size",
    Ctx::HSL,
    Args::ONE,
    set_output_buffer_size,
)];

/// The subrequest settings at location level.
#[derive(Clone, Debug, Default)]
pub struct SubrequestLoc {
    pub output_buffer_size: Option<u64>,
}

impl SubrequestLoc {
    /// `subrequest_output_buffer_size` (default one memory page, 4k, as nginx on Linux).
    pub fn output_buffer_size(&self) -> u64 {
        self.output_buffer_size.unwrap_or(4096)
    }
}

fn set_output_buffer_size(_: &mut Builder, d: &Directive, s: &mut Scope<'_>) -> Result<(), Error> {
    let n = size_arg(d, 0)?;
    set_once(&mut loc_conf(s).subrequest.output_buffer_size, n, d)
}

/// The directive's place in the module list.
pub struct Module;

impl crate::http::modules::HttpModule for Module {
    type Loc = SubrequestLoc;
    const DIRECTIVES: &'static [Command] = DIRECTIVES;

    fn merge(loc: &mut SubrequestLoc, parent: &SubrequestLoc) {
        crate::conf::merge(&mut loc.output_buffer_size, &parent.output_buffer_size);
    }
}
