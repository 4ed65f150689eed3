//! `ssl_preread`: what a TLS ClientHello says before any handshake (the server name, the ALPN
//! protocols, the highest version offered), read from the first bytes of a session as nginx's
//! ngx_stream_ssl_preread_module reads them, for `$ssl_preread_server_name`,
//! `$ssl_preread_alpn_protocols` and `$ssl_preread_protocol`.
//!
//! Pure: bytes in, a verdict out. Only the first handshake record is read (a ClientHello
//! larger than one record is not told apart from one that never ends).

use super::vars::Preread;

/// What the first bytes of a session are.
#[derive(Debug, PartialEq, Eq)]
pub enum Hello {
    /// A ClientHello was read (`None`: TLS, but not a ClientHello nginx reads).
    Done(Option<Preread>),
    /// The beginning of a TLS record: more bytes are needed.
    More,
    /// Not TLS: the variables stay empty.
    NotTls,
}

impl PartialEq for Preread {
    fn eq(&self, o: &Preread) -> bool {
        self.server_name == o.server_name
            && self.alpn_protocols == o.alpn_protocols
            && self.protocol == o.protocol
    }
}

impl Eq for Preread {}

/// Reads a ClientHello at the start of `buf`.
pub fn parse(buf: &[u8]) -> Hello {
    if buf.is_empty() {
        return Hello::More;
    }
    if buf[0] != 0x16 {
        return Hello::NotTls;
    }
    if buf.len() < 5 {
        return Hello::More;
    }
    if buf[1] != 3 {
        return Hello::NotTls;
    }
    let len = usize::from(u16::from_be_bytes([buf[3], buf[4]]));
    if buf.len() < 5 + len {
        return Hello::More;
    }
    Hello::Done(client_hello(&buf[5..5 + len]))
}

/// A cursor over a ClientHello's bytes.
struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        if self.0.len() < n {
            return None;
        }
        let (a, b) = self.0.split_at(n);
        self.0 = b;
        Some(a)
    }

    fn u8(&mut self) -> Option<usize> {
        self.take(1).map(|b| usize::from(b[0]))
    }

    fn u16(&mut self) -> Option<usize> {
        self.take(2)
            .map(|b| usize::from(u16::from_be_bytes([b[0], b[1]])))
    }

    /// A vector with a one- or two-byte length.
    fn vec8(&mut self) -> Option<&'a [u8]> {
        let n = self.u8()?;
        self.take(n)
    }

    fn vec16(&mut self) -> Option<&'a [u8]> {
        let n = self.u16()?;
        self.take(n)
    }
}

fn client_hello(rec: &[u8]) -> Option<Preread> {
    let mut r = Reader(rec);
    if r.u8()? != 1 {
        return None;
    }
    let b = r.take(3)?;
    let len = (usize::from(b[0]) << 16) | (usize::from(b[1]) << 8) | usize::from(b[2]);
    // A ClientHello longer than the record: read what the record holds.
    let body = r.0.get(..len).unwrap_or(r.0);
    let mut r = Reader(body);
    let version = r.u16()?;
    r.take(32)?;
    r.vec8()?;
    r.vec16()?;
    r.vec8()?;
    let mut out = Preread {
        protocol: version_name(version).to_string(),
        ..Default::default()
    };
    let Some(exts) = r.vec16() else {
        return Some(out);
    };
    let mut e = Reader(exts);
    while let (Some(ty), Some(data)) = (e.u16(), e.vec16()) {
        let mut d = Reader(data);
        match ty {
            0 => {
                let mut list = Reader(d.vec16().filter(|l| !l.is_empty())?);
                while let (Some(kind), Some(name)) = (list.u8(), list.vec16()) {
                    if kind == 0 {
                        out.server_name = String::from_utf8_lossy(name).into_owned();
                        break;
                    }
                }
            }
            16 => {
                // An empty list is no valid extension: nginx reads nothing of the hello.
                let mut list = Reader(d.vec16().filter(|l| !l.is_empty())?);
                let mut names = Vec::new();
                while let Some(p) = list.vec8() {
                    names.push(String::from_utf8_lossy(p).into_owned());
                }
                out.alpn_protocols = names.join(",");
            }
            43 => {
                let mut list = Reader(d.vec8()?);
                let mut best = 0;
                while let Some(v) = list.u16() {
                    // GREASE values (0x?a?a) are not versions.
                    if v & 0x0f0f != 0x0a0a && v > best && v <= 0x0304 {
                        best = v;
                    }
                }
                if best != 0 {
                    out.protocol = version_name(best).to_string();
                }
            }
            _ => {}
        }
    }
    Some(out)
}

fn version_name(v: usize) -> &'static str {
    match v {
        0x0300 => "SSLv3",
        0x0301 => "TLSv1",
        0x0302 => "TLSv1.1",
        0x0303 => "TLSv1.2",
        0x0304 => "TLSv1.3",
        _ => "",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A ClientHello with `sni`, `alpn` and TLS 1.3 offered.
    fn hello(sni: &str, alpn: &[&str]) -> Vec<u8> {
        let mut exts = Vec::new();
        let mut name = vec![0u8];
        name.extend_from_slice(&(sni.len() as u16).to_be_bytes());
        name.extend_from_slice(sni.as_bytes());
        let mut list = (name.len() as u16).to_be_bytes().to_vec();
        list.extend_from_slice(&name);
        exts.extend_from_slice(&[0, 0]);
        exts.extend_from_slice(&(list.len() as u16).to_be_bytes());
        exts.extend_from_slice(&list);
        let mut protos = Vec::new();
        for p in alpn {
            protos.push(p.len() as u8);
            protos.extend_from_slice(p.as_bytes());
        }
        let mut list = (protos.len() as u16).to_be_bytes().to_vec();
        list.extend_from_slice(&protos);
        exts.extend_from_slice(&[0, 16]);
        exts.extend_from_slice(&(list.len() as u16).to_be_bytes());
        exts.extend_from_slice(&list);
        exts.extend_from_slice(&[0, 43, 0, 5, 4, 0x0a, 0x0a, 3, 4]);
        let mut body = vec![3, 3];
        body.extend_from_slice(&[7; 32]);
        body.push(0);
        body.extend_from_slice(&[0, 2, 0x13, 1]);
        body.extend_from_slice(&[1, 0]);
        body.extend_from_slice(&(exts.len() as u16).to_be_bytes());
        body.extend_from_slice(&exts);
        let mut hs = vec![1, 0];
        hs.extend_from_slice(&(body.len() as u16).to_be_bytes());
        hs.extend_from_slice(&body);
        let mut rec = vec![0x16, 3, 1];
        rec.extend_from_slice(&(hs.len() as u16).to_be_bytes());
        rec.extend_from_slice(&hs);
        rec
    }

    #[test]
    fn reads_name_alpn_and_version() {
        let h = hello("example.com", &["h2", "http/1.1"]);
        let Hello::Done(Some(p)) = parse(&h) else {
            panic!("not read")
        };
        assert_eq!(p.server_name, "example.com");
        assert_eq!(p.alpn_protocols, "h2,http/1.1");
        assert_eq!(p.protocol, "TLSv1.3");
        for cut in [1, 4, 10, h.len() - 1] {
            assert_eq!(parse(&h[..cut]), Hello::More, "cut at {cut}");
        }
        assert_eq!(parse(b"GET / HTTP/1.1\r\n"), Hello::NotTls);
    }
}
