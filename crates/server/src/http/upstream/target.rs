//! Where a location's requests go (`proxy_pass`, `fastcgi_pass`, ...): an `upstream` block by
//! name, an address, a unix socket, or text with variables evaluated per request. Linked to
//! the `upstream` blocks once all are read.

use std::sync::{Arc, OnceLock};

use shoal_conf::{Error, Span};

use crate::error;
use crate::upstream::conf::{split_host_port, UpstreamConf};
use crate::variables::Template;

/// Where requests go.
#[derive(Debug)]
pub enum Target {
    /// A name to find among the `upstream` blocks once all are read, else to resolve
    /// (`port`: written explicitly).
    Named {
        name: String,
        port: Option<u16>,
        upstream: OnceLock<Arc<UpstreamConf>>,
    },
    /// `unix:/path`.
    Unix(Arc<UpstreamConf>),
    /// Text with variables: evaluated per request; its host names an `upstream` block, is
    /// an address, or is looked up by the location's `resolver`.
    Dynamic {
        template: Template,
        upstreams: OnceLock<Vec<Arc<UpstreamConf>>>,
    },
}

impl Target {
    /// The upstream of a static target (linked when the configuration was read).
    pub fn upstream(&self) -> Option<&Arc<UpstreamConf>> {
        match self {
            Target::Named { upstream, .. } => upstream.get(),
            Target::Unix(u) => Some(u),
            Target::Dynamic { .. } => None,
        }
    }

    /// An address as `fastcgi_pass`, `uwsgi_pass`, `scgi_pass` and `memcached_pass` take it:
    /// `unix:/path`, `host:port`, or an `upstream` block's name (with variables: per request).
    /// Also `$proxy_host`-like text for log lines.
    pub fn parse(addr: &str) -> Result<(Target, String), error::Error> {
        let template = Template::compile(addr)?;
        if !template.is_static() {
            let t = Target::Dynamic {
                template,
                upstreams: OnceLock::new(),
            };
            return Ok((t, addr.to_string()));
        }
        if let Some(sock) = addr.strip_prefix("unix:") {
            if sock.is_empty() {
                return Err(error::Error::invalid(format!(
                    "no path in the unix domain socket \"{addr}\""
                )));
            }
            return Ok((
                Target::Unix(Arc::new(UpstreamConf::unix(sock))),
                addr.into(),
            ));
        }
        let (name, port) = split_host_port(addr, 0)?;
        let written = port_written(addr).then_some(port);
        let t = Target::Named {
            name,
            port: written,
            upstream: OnceLock::new(),
        };
        Ok((t, addr.to_string()))
    }

    /// Links the target to its upstream, once all `upstream` blocks are read: a block of that
    /// name (which may not be given a port), else the name resolved now (with
    /// `default_port`, 0 when the protocol has none: then a port must be written).
    pub fn link(
        &self,
        default_port: u16,
        span: &Span,
        upstreams: &[Arc<UpstreamConf>],
    ) -> Result<(), Error> {
        match self {
            Target::Named {
                name,
                port,
                upstream,
            } => {
                if upstream.get().is_some() {
                    return Ok(());
                }
                let found = upstreams.iter().find(|u| u.name == *name);
                let u = match (found, port) {
                    (Some(_), Some(p)) => {
                        return Err(Error::new(
                            format!("upstream \"{name}\" may not have port {p}"),
                            Some(span.clone()),
                        ));
                    }
                    (Some(u), None) => u.clone(),
                    (None, None) if default_port == 0 => {
                        return Err(Error::new(
                            format!("no port in upstream \"{name}\""),
                            Some(span.clone()),
                        ));
                    }
                    (None, p) => Arc::new(
                        UpstreamConf::implicit(name, p.unwrap_or(default_port))
                            .map_err(|m| Error::new(m, Some(span.clone())))?,
                    ),
                };
                let _ = upstream.set(u);
            }
            Target::Unix(_) => {}
            Target::Dynamic { upstreams: all, .. } => {
                let _ = all.set(upstreams.to_vec());
            }
        }
        Ok(())
    }
}

/// Whether `authority` (`host`, `host:port`, `[v6]:port`) gives a port.
pub fn port_written(authority: &str) -> bool {
    if authority.starts_with('[') {
        authority.contains("]:")
    } else {
        authority.contains(':')
    }
}

/// Where an evaluated address goes: its upstream, and `$proxy_host`-like `host[:port]`.
pub struct Found {
    pub upstream: Arc<UpstreamConf>,
    pub host: String,
    pub port: u16,
}

/// An address with its variables evaluated (`authority`: `host[:port]` or `unix:/path`): an
/// upstream block by the host's name, or an address. An error is the status and the log
/// line's text.
pub fn resolve(
    authority: &str,
    default_port: u16,
    upstreams: &[Arc<UpstreamConf>],
) -> Result<Found, (u16, String)> {
    if let Some(sock) = authority.strip_prefix("unix:") {
        let mut u = UpstreamConf::unix(sock);
        u.ephemeral = true;
        return Ok(Found {
            upstream: Arc::new(u),
            host: format!("unix:{sock}"),
            port: default_port,
        });
    }
    let (name, port) = split_host_port(authority, default_port).map_err(|m| (500, m.into()))?;
    // An upstream block is found by name only when no port is given (nginx's rule).
    if let Some(u) = upstreams
        .iter()
        .find(|u| !port_written(authority) && u.name == name)
    {
        return Ok(Found {
            upstream: u.clone(),
            host: authority.to_string(),
            port,
        });
    }
    let bare = name.trim_start_matches('[').trim_end_matches(']');
    if bare.parse::<std::net::IpAddr>().is_err() {
        return Err((502, format!("no resolver defined to resolve {name}")));
    }
    if port == 0 {
        return Err((502, format!("no port in upstream \"{name}\"")));
    }
    let mut u = UpstreamConf::implicit(&name, port).map_err(|m| (502, m.into()))?;
    u.ephemeral = true;
    Ok(Found {
        upstream: Arc::new(u),
        host: authority.to_string(),
        port,
    })
}
