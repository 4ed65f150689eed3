//! The `events` block: `worker_connections`, `accept_mutex`, `accept_mutex_delay`,
//! `multi_accept`, `use`. shoal's event method is epoll; `accept_mutex` maps onto
//! EPOLLEXCLUSIVE on the shared listening socket (see `listen.rs`), which wakes one worker per
//! connection without a lock, so `accept_mutex_delay` has nothing to delay.
//!
//! `debug_connection ADDRESS|CIDR|unix:|HOST` is read as Debian's nginx (built with
//! `--with-debug`) reads it, with its errors and warnings, and kept; shoal does not yet raise
//! those clients' connections to `debug` (nginx writes its debug lines for them whatever
//! `error_log`'s level), so it changes nothing at run time.

use std::time::Duration;

use shoal_conf::{Directive, Error};

use crate::conf::{
    err, flag_arg, number_arg, set_once, time_arg, Args, Builder, Command, Ctx, Scope,
};

pub static DIRECTIVES: &[Command] = &[
    Command::new(
        "worker_connections",
        Ctx::EVENTS,
        Args::ONE,
        set_worker_connections,
    ),
    Command::new("accept_mutex", Ctx::EVENTS, Args::Flag, set_accept_mutex),
    Command::new(
        "accept_mutex_delay",
        Ctx::EVENTS,
        Args::ONE,
        set_accept_mutex_delay,
    ),
    Command::new("multi_accept", Ctx::EVENTS, Args::Flag, set_multi_accept),
    Command::new("use", Ctx::EVENTS, Args::ONE, set_use),
    Command::new(
        "debug_connection",
        Ctx::EVENTS,
        Args::ONE,
        set_debug_connection,
    ),
];

/// The `events` block as written.
#[derive(Clone, Debug, Default)]
pub struct EventsConf {
    pub worker_connections: Option<usize>,
    pub accept_mutex: Option<bool>,
    pub accept_mutex_delay: Option<Duration>,
    pub multi_accept: Option<bool>,
    /// `debug_connection`: the clients nginx would log at `debug`.
    pub debug_connection: Vec<crate::http::realip::forwarded::Cidr>,
}

impl EventsConf {
    /// `worker_connections` (default 512).
    pub fn worker_connections(&self) -> usize {
        self.worker_connections.unwrap_or(512)
    }

    /// `multi_accept` (default off).
    pub fn multi_accept(&self) -> bool {
        self.multi_accept.unwrap_or(false)
    }
}

fn events<'a>(scope: &'a mut Scope<'_>) -> &'a mut EventsConf {
    match scope {
        Scope::Events(ev) => ev,
        _ => unreachable!("the registry allows these directives in events only"),
    }
}

fn set_worker_connections(_: &mut Builder, d: &Directive, s: &mut Scope<'_>) -> Result<(), Error> {
    let n = number_arg(d, 0)? as usize;
    if n < 2 {
        return Err(err(d, "invalid number of worker_connections"));
    }
    set_once(&mut events(s).worker_connections, n, d)
}

fn set_accept_mutex(_: &mut Builder, d: &Directive, s: &mut Scope<'_>) -> Result<(), Error> {
    set_once(&mut events(s).accept_mutex, flag_arg(d), d)
}

fn set_accept_mutex_delay(_: &mut Builder, d: &Directive, s: &mut Scope<'_>) -> Result<(), Error> {
    let t = time_arg(d, 0)?;
    set_once(&mut events(s).accept_mutex_delay, t, d)
}

fn set_multi_accept(_: &mut Builder, d: &Directive, s: &mut Scope<'_>) -> Result<(), Error> {
    set_once(&mut events(s).multi_accept, flag_arg(d), d)
}

/// nginx's `ngx_event_debug_connection`: `unix:`, an address or network (host bits warned
/// about), else a host name's addresses.
fn set_debug_connection(b: &mut Builder, d: &Directive, s: &mut Scope<'_>) -> Result<(), Error> {
    use crate::http::realip::forwarded::Cidr;
    use std::net::ToSocketAddrs as _;
    let text = d.args[0].value.as_str();
    let list = &mut events(s).debug_connection;
    if text == "unix:" {
        list.push(Cidr::Unix);
    } else if let Some((cidr, masked)) = Cidr::parse(text) {
        list.push(cidr);
        if masked {
            b.warn(
                format!("low address bits of {text} are meaningless"),
                &d.span,
            );
        }
    } else {
        let not_found = || err(d, format!("host not found in debug_connection \"{text}\""));
        let addrs: Vec<_> = (text, 0)
            .to_socket_addrs()
            .map_err(|_| not_found())?
            .collect();
        if addrs.is_empty() {
            return Err(not_found());
        }
        list.extend(addrs.iter().map(|a| Cidr::host(a.ip())));
    }
    Ok(())
}

fn set_use(_: &mut Builder, d: &Directive, _: &mut Scope<'_>) -> Result<(), Error> {
    match d.args[0].value.as_str() {
        "epoll" => Ok(()),
        other => Err(err(d, format!("invalid event type \"{other}\""))),
    }
}
