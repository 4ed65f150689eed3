//! Directives that shoal knows the shape of but does not implement yet (`stream`): their names, contexts and argument counts are checked as nginx
//! checks them, so a configuration is validated the same way, and each use is accepted with a
//! `[warn] "NAME" directive is not implemented yet, ignored` line, never silently.
//!
//! When a module lands, its real table replaces its lines here.

use shoal_conf::{Directive, Error};

use crate::conf::{Args, Builder, Command, Ctx, Scope};

const fn pb(name: &'static str, ctx: Ctx, args: Args) -> Command {
    Command::block(name, ctx, args, pending)
}

pub static DIRECTIVES: &[Command] = &[
    // stream (TCP proxy): the whole block is accepted and ignored, with the warning
    pb("stream", Ctx::MAIN, Args::NONE),
];

fn pending(b: &mut Builder, d: &Directive, _: &mut Scope<'_>) -> Result<(), Error> {
    b.warn(
        format!("\"{}\" directive is not implemented yet, ignored", d.name),
        &d.span,
    );
    Ok(())
}
