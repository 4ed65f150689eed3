//! Directives that shoal knows the shape of but does not implement yet (none today): their names, contexts and argument counts are checked as nginx
//! checks them, so a configuration is validated the same way, and each use is accepted with a
//! `[warn] "NAME" directive is not implemented yet, ignored` line, never silently.
//!
//! When a module lands, its real table replaces its lines here.

use shoal_conf::{Directive, Error};

use crate::conf::{Args, Builder, Command, Ctx, Scope};

/// A block directive accepted with the warning (`pb("name", Ctx::MAIN, Args::NONE)`).
#[allow(dead_code)]
const fn pb(name: &'static str, ctx: Ctx, args: Args) -> Command {
    Command::block(name, ctx, args, pending)
}

pub static DIRECTIVES: &[Command] = &[];

fn pending(b: &mut Builder, d: &Directive, _: &mut Scope<'_>) -> Result<(), Error> {
    b.warn(
        format!("\"{}\" directive is not implemented yet, ignored", d.name),
        &d.span,
    );
    Ok(())
}
