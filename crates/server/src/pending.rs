//! Directives that shoal knows the shape of but does not implement yet (proxy, proxy cache,
//! upstream, stream, ...): their names, contexts and argument counts are checked as nginx
//! checks them, so a configuration is validated the same way, and each use is accepted with a
//! `[warn] "NAME" directive is not implemented yet, ignored` line, never silently.
//!
//! When a module lands, its real table replaces its lines here.

use shoal_conf::{Directive, Error};

use crate::conf::{Args, Builder, Command, Ctx, Scope};

const HSL: Ctx = Ctx::HSL;
const ONE: Args = Args::ONE;
const TWO: Args = Args::TWO;
const MORE: Args = Args::ONE_OR_MORE;
const FLAG: Args = Args::Flag;

const fn p(name: &'static str, ctx: Ctx, args: Args) -> Command {
    Command::new(name, ctx, args, pending)
}

const fn pb(name: &'static str, ctx: Ctx, args: Args) -> Command {
    Command::block(name, ctx, args, pending)
}

pub static DIRECTIVES: &[Command] = &[
    // thread pools and file I/O (the thread pool issue)
    p("output_buffers", HSL, TWO),
    // proxy and upstream
    p("proxy_pass", Ctx::LOCATION.or(Ctx::LIF).or(Ctx::LMT), ONE),
    p("proxy_set_header", HSL, TWO),
    p("proxy_http_version", HSL, ONE),
    p("proxy_buffering", HSL, FLAG),
    p("proxy_buffers", HSL, TWO),
    p("proxy_buffer_size", HSL, ONE),
    p("proxy_connect_timeout", HSL, ONE),
    p("proxy_read_timeout", HSL, ONE),
    p("proxy_send_timeout", HSL, ONE),
    p("proxy_next_upstream", HSL, MORE),
    p("proxy_redirect", HSL, Args::Take(1, 2)),
    p("proxy_hide_header", HSL, ONE),
    p("proxy_pass_header", HSL, ONE),
    p("proxy_temp_path", HSL, Args::Take(1, 4)),
    p("proxy_cache_path", Ctx::HTTP, Args::Take(2, usize::MAX)),
    p("proxy_cache", HSL, ONE),
    p("proxy_cache_key", HSL, ONE),
    p("proxy_cache_valid", HSL, MORE),
    p("proxy_cache_lock", HSL, FLAG),
    p("proxy_cache_use_stale", HSL, MORE),
    p("proxy_cache_bypass", HSL, MORE),
    p("proxy_no_cache", HSL, MORE),
    p("proxy_cache_methods", HSL, MORE),
    p("proxy_cache_min_uses", HSL, ONE),
    p("proxy_cache_revalidate", HSL, FLAG),
    p("proxy_cache_background_update", HSL, FLAG),
    p("proxy_ignore_headers", HSL, MORE),
    pb("upstream", Ctx::HTTP, ONE),
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
