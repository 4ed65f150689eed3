//! `proxy_bind ADDRESS [transparent] | off` (http's `*_bind` and stream's `proxy_bind`): the
//! local address an upstream socket is bound to before it connects, evaluated per request or
//! session (`$remote_addr` is the usual one with `transparent`).
//!
//! `transparent` sets `IP_TRANSPARENT` (`IPV6_TRANSPARENT` toward an IPv6 peer) so that the
//! address may be one this host does not have: the upstream then sees the client's address. It
//! needs `CAP_NET_RAW`; the process keeps that capability when it drops to `user`
//! ([`crate::privileges::drop_to`], as nginx's workers do), and the answers must be routed back
//! to this host (policy routing, see nginx's documentation). Whether any `transparent` was
//! seen is the configuration's [`crate::core::MainConf::transparent`].

use std::net::{IpAddr, SocketAddr};

use shoal_conf::{Directive, Error};

use crate::conf::{err, invalid_args, Builder};
use crate::variables::Template;

/// One `proxy_bind` line.
#[derive(Clone, Debug)]
pub struct BindConf {
    pub addr: Template,
    pub transparent: bool,
}

/// Reads `NAME ADDRESS [transparent] | off` (`None`: off). `bad_param` words an unknown second
/// argument as the module does.
pub fn parse(
    b: &mut Builder,
    d: &Directive,
    bad_param: impl Fn(&str) -> Error,
) -> Result<Option<BindConf>, Error> {
    let v = d.args[0].value.as_str();
    if v == "off" {
        if d.args.len() > 1 {
            return Err(invalid_args(d));
        }
        return Ok(None);
    }
    let transparent = match d.args.get(1) {
        None => false,
        Some(p) if p.value == "transparent" => true,
        Some(p) => return Err(bad_param(&p.value)),
    };
    if transparent && b.main.transparent.is_none() {
        b.main.transparent = Some(d.span.clone());
    }
    let addr = Template::compile(v).map_err(|m| err(d, m))?;
    Ok(Some(BindConf { addr, transparent }))
}

/// Binds `socket` (about to connect to `peer`) to `text`, the evaluated address (an empty one
/// binds nothing, as nginx), after `IP_TRANSPARENT` when `transparent`. A TCP socket without
/// a port asks for `IP_BIND_ADDRESS_NO_PORT` as nginx does: the port is chosen at connect(),
/// for the whole address pair, so many connections can share one source address. The error
/// is nginx's log line (`bind(ADDR) failed (...)`, `setsockopt(IP_TRANSPARENT) failed (...)`),
/// with the system error under it.
pub fn apply(
    socket: &socket2::Socket,
    text: &str,
    transparent: bool,
    peer: SocketAddr,
    tcp: bool,
) -> crate::error::Result<()> {
    use crate::error::Error;
    if text.is_empty() {
        return Ok(());
    }
    let local = match text.parse::<IpAddr>() {
        Ok(ip) => SocketAddr::new(ip, 0),
        Err(_) => text
            .parse::<SocketAddr>()
            .map_err(|_| Error::invalid(format!("invalid local address \"{text}\"")))?,
    };
    if transparent {
        let (level, name, what) = if peer.is_ipv4() {
            (libc::SOL_IP, libc::IP_TRANSPARENT, "IP_TRANSPARENT")
        } else {
            (libc::SOL_IPV6, libc::IPV6_TRANSPARENT, "IPV6_TRANSPARENT")
        };
        setsockopt_on(socket, level, name)
            .map_err(|e| Error::failed(format_args!("setsockopt({what})"), e))?;
    }
    if tcp && local.port() == 0 {
        match setsockopt_on(socket, libc::SOL_IP, libc::IP_BIND_ADDRESS_NO_PORT) {
            Ok(()) => {}
            Err(e) if matches!(e.raw_os_error(), Some(libc::EOPNOTSUPP | libc::ENOPROTOOPT)) => {}
            Err(e) => return Err(Error::failed("setsockopt(IP_BIND_ADDRESS_NO_PORT)", e)),
        }
    }
    socket
        .bind(&local.into())
        .map_err(|e| Error::failed(format_args!("bind({text})"), e))
}

/// An integer socket option set to 1.
fn setsockopt_on(
    socket: &socket2::Socket,
    level: libc::c_int,
    name: libc::c_int,
) -> std::io::Result<()> {
    use std::os::fd::AsRawFd;
    let one: libc::c_int = 1;
    // SAFETY: a valid descriptor and a pointer to an int of the length given.
    let r = unsafe {
        libc::setsockopt(
            socket.as_raw_fd(),
            level,
            name,
            (&one as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if r == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}
