//! Which certificate a handshake gets: a server's pairs chosen by the client's signature
//! schemes (RSA or ECDSA), and certificates named with variables, read at the handshake as
//! nginx 1.15.9+ reads them and kept per `ssl_certificate_cache`.
//!
//! Runs on a worker for variable names (a file read per handshake unless cached, as in nginx);
//! static pairs are read once per configuration load, by `build`.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use rustls::SignatureScheme;

use super::certs;
use super::conf::CertCacheConf;
use super::stapling::Staple;
use crate::error::Error;

/// A certificate or key name with variables (`/certs/$ssl_server_name.crt`).
#[derive(Clone, Debug)]
pub(super) struct Template(pub(super) Vec<Part>);

#[derive(Clone, Debug)]
pub(super) enum Part {
    Text(String),
    Var(String),
}

/// The connection-level values a certificate name may use at the handshake.
pub struct HandshakeVars<'a> {
    pub server_name: Option<&'a str>,
    pub local: Option<SocketAddr>,
    pub peer: Option<SocketAddr>,
}

impl Template {
    /// `None`: the name has no variable. An unknown variable is nginx's error.
    pub(super) fn parse(s: &str) -> Result<Option<Template>, Error> {
        if !s.contains('$') {
            return Ok(None);
        }
        let mut parts = Vec::new();
        let mut text = String::new();
        let mut rest = s;
        while let Some(pos) = rest.find('$') {
            text.push_str(&rest[..pos]);
            let after = &rest[pos + 1..];
            let (name, next) = if let Some(braced) = after.strip_prefix('{') {
                let end = braced.find('}').ok_or_else(|| {
                    Error::invalid(format!(
                        "the closing bracket in \"{s}\" variable is missing"
                    ))
                })?;
                (&braced[..end], &braced[end + 1..])
            } else {
                let end = after
                    .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                    .unwrap_or(after.len());
                (&after[..end], &after[end..])
            };
            if name.is_empty() {
                return Err(Error::invalid(format!("invalid variable name in \"{s}\"")));
            }
            if super::TlsInfo::default().variable(name).is_none()
                && crate::variables::Var::lookup(name).is_none()
            {
                return Err(Error::invalid(format!("unknown \"{name}\" variable")));
            }
            if !text.is_empty() {
                parts.push(Part::Text(std::mem::take(&mut text)));
            }
            parts.push(Part::Var(name.to_string()));
            rest = next;
        }
        text.push_str(rest);
        if !text.is_empty() {
            parts.push(Part::Text(text));
        }
        Ok(Some(Template(parts)))
    }

    fn eval(&self, v: &HandshakeVars<'_>) -> String {
        let mut out = String::new();
        for p in &self.0 {
            match p {
                Part::Text(t) => out.push_str(t),
                Part::Var(name) => match name.as_str() {
                    "ssl_server_name" => out.push_str(v.server_name.unwrap_or("")),
                    "server_addr" => {
                        if let Some(a) = v.local {
                            out.push_str(&a.ip().to_string());
                        }
                    }
                    "server_port" => {
                        if let Some(a) = v.local {
                            out.push_str(&a.port().to_string());
                        }
                    }
                    "remote_addr" => {
                        if let Some(a) = v.peer {
                            out.push_str(&a.ip().to_string());
                        }
                    }
                    "remote_port" => {
                        if let Some(a) = v.peer {
                            out.push_str(&a.port().to_string());
                        }
                    }
                    // Request variables have no value before a request, as in nginx.
                    _ => {}
                },
            }
        }
        out
    }
}

/// Certificates named with variables: read at the handshake, kept per `ssl_certificate_cache`.
#[derive(Debug)]
pub(super) struct DynamicCerts {
    pub(super) pairs: Vec<(Template, Template)>,
    pub(super) passwords: Option<Arc<Vec<String>>>,
    pub(super) cache: Option<(CertCacheConf, Mutex<CertCache>)>,
}

/// Pairs read at handshakes, by (certificate, key) name.
pub(super) type CertCache = HashMap<(String, String), Cached>;

#[derive(Debug)]
pub(super) struct Cached {
    key: Arc<CertifiedKey>,
    loaded: Instant,
    used: Instant,
}

impl DynamicCerts {
    pub(super) fn load(&self, vars: &HandshakeVars<'_>) -> Result<Vec<Arc<CertifiedKey>>, Error> {
        let mut out = Vec::with_capacity(self.pairs.len());
        for (c, k) in &self.pairs {
            let (cert, key) = (c.eval(vars), k.eval(vars));
            out.push(self.load_one(cert, key)?);
        }
        Ok(out)
    }

    fn load_one(&self, cert: String, key: String) -> Result<Arc<CertifiedKey>, Error> {
        let now = Instant::now();
        let Some((conf, cache)) = &self.cache else {
            return certs::load_pair(&cert, &key, self.passwords.as_deref().map(Vec::as_slice));
        };
        let id = (cert, key);
        {
            let mut map = cache.lock().unwrap_or_else(|e| e.into_inner());
            if let Some(c) = map.get_mut(&id) {
                if now.duration_since(c.loaded) < conf.valid {
                    c.used = now;
                    return Ok(c.key.clone());
                }
            }
        }
        let key = certs::load_pair(&id.0, &id.1, self.passwords.as_deref().map(Vec::as_slice))?;
        let mut map = cache.lock().unwrap_or_else(|e| e.into_inner());
        map.retain(|_, c| now.duration_since(c.used) < conf.inactive);
        if map.len() >= conf.max {
            if let Some(oldest) = map
                .iter()
                .min_by_key(|(_, c)| c.used)
                .map(|(k, _)| k.clone())
            {
                map.remove(&oldest);
            }
        }
        map.insert(
            id,
            Cached {
                key: key.clone(),
                loaded: now,
                used: now,
            },
        );
        Ok(key)
    }
}

/// A server's certificate pairs, one of which each handshake gets: the first whose key can sign
/// with a scheme the client lists, taken in the client's order (so an ECDSA-capable client gets
/// the ECDSA certificate when both are configured). A pair with a [`Staple`] gets its last good
/// OCSP answer stapled.
#[derive(Debug, Default)]
pub struct Pairs {
    pub keys: Vec<Arc<CertifiedKey>>,
    /// By the index of `keys` (shorter when the last ones have none).
    pub staples: Vec<Option<Arc<Staple>>>,
}

impl Pairs {
    pub fn new(keys: Vec<Arc<CertifiedKey>>) -> Pairs {
        Pairs {
            keys,
            staples: Vec::new(),
        }
    }

    fn choose(&self, schemes: &[SignatureScheme]) -> Option<usize> {
        for s in schemes {
            if let Some(i) = self
                .keys
                .iter()
                .position(|k| k.key.choose_scheme(std::slice::from_ref(s)).is_some())
            {
                return Some(i);
            }
        }
        (!self.keys.is_empty()).then_some(0)
    }
}

impl ResolvesServerCert for Pairs {
    fn resolve(&self, hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        let i = self.choose(hello.signature_schemes())?;
        match self.staples.get(i) {
            Some(Some(s)) => Some(s.key()),
            _ => self.keys.get(i).cloned(),
        }
    }
}

/// Where a server's certificates come from.
#[derive(Debug)]
pub(super) enum Certs {
    None,
    Static(Arc<Pairs>),
    Dynamic(DynamicCerts),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn templates() {
        assert!(Template::parse("/a/b.crt").unwrap().is_none());
        let t = Template::parse("/c/${ssl_server_name}_$server_port.crt")
            .unwrap()
            .unwrap();
        let v = HandshakeVars {
            server_name: Some("a.test"),
            local: Some("127.0.0.1:8443".parse().unwrap()),
            peer: None,
        };
        assert_eq!(t.eval(&v), "/c/a.test_8443.crt");
        assert_eq!(
            Template::parse("/c/$foo.crt").unwrap_err(),
            "unknown \"foo\" variable"
        );
    }
}
