//! A stored object opened for a request: its file, its parsed head, whether it is still the
//! one the index names.

use super::*;

/// An object read from disk (or the worker's copy of one, [`super::hot`]): cheap to clone.
#[derive(Clone)]
pub struct Object {
    pub(super) file: Arc<File>,
    pub(super) len: u64,
    /// The file as it was read (see [`Object::unchanged`]).
    pub(super) stamp: FileStamp,
    pub(super) header: Rc<Header>,
    /// The stored head, parsed once (`None`: it does not parse, a 500).
    pub(super) head: Option<Rc<ParsedHead>>,
    /// The whole file, when it was read whole (a small object): the body is sent from
    /// memory, no second read or sendfile.
    pub(super) whole: Option<bytes::Bytes>,
}

/// What tells a file changed in place: inode, size, modification and change times.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) struct FileStamp([i64; 6]);

impl FileStamp {
    pub(super) fn of(m: &std::fs::Metadata) -> FileStamp {
        use std::os::unix::fs::MetadataExt;
        FileStamp([
            m.ino() as i64,
            m.size() as i64,
            m.mtime(),
            m.mtime_nsec(),
            m.ctime(),
            m.ctime_nsec(),
        ])
    }
}

/// A stored head's status line and headers.
pub(super) struct ParsedHead {
    pub(super) status: u16,
    pub(super) reason: String,
    /// The reason phrase is nginx's own for the status (the status line needs no copy of it).
    pub(super) usual_reason: bool,
    pub(super) headers: Rc<[(String, String)]>,
    /// What each of `headers` is to a hit's reply, decided once when the head is read (every
    /// hit of the object used to compare each name with a dozen others).
    pub(super) lines: Box<[StoredLine]>,
    /// The length it tells, against the body stored (set once the body's size is known).
    pub(super) told: Told,
}

/// What one stored line is to a hit's reply, decided once when the head is read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct StoredLine {
    pub(super) kind: Kind,
    /// One nginx hides from the client unless `proxy_pass_header` names it (`Date`,
    /// `Server`, `X-Accel-*`...).
    pub(super) hidden: bool,
}

/// What a stored head says of its body's length: nginx answers a HIT with the stored
/// `Content-Length`, not the file's.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(super) enum Told {
    /// The body's own (the usual case).
    Body,
    /// None: the upstream sent the answer chunked or to its close.
    Unknown,
    /// A length, and no body: the answer to a HEAD (`proxy_cache_convert_head off`).
    Absent(u64),
}

impl ParsedHead {
    /// What the head tells of a stored body of `body_len` bytes; `Err` with the reason when
    /// the two cannot belong together (a body cut or grown behind the cache's back).
    pub(super) fn told(&self, body_len: u64) -> Result<Told, file::Invalid> {
        let header = |name: &str| {
            self.headers
                .iter()
                .find(|(n, _)| n.eq_ignore_ascii_case(name))
                .map(|(_, v)| v.as_str())
        };
        if header("transfer-encoding").is_some() {
            return Ok(Told::Unknown);
        }
        let Some(v) = header("content-length") else {
            return Ok(Told::Unknown);
        };
        match v.parse::<u64>() {
            Ok(n) if n == body_len => Ok(Told::Body),
            Ok(n) if body_len == 0 => Ok(Told::Absent(n)),
            Ok(n) if body_len < n => Err(file::Invalid::Truncated),
            _ => Err(file::Invalid::Garbage),
        }
    }
}

impl Object {
    /// Bytes this object keeps in memory.
    pub fn kept_bytes(&self) -> usize {
        let head = self.head.as_ref().map_or(0, |h| {
            h.reason.len()
                + h.headers
                    .iter()
                    .map(|(n, v)| n.len() + v.len() + 48 + std::mem::size_of::<Line>())
                    .sum::<usize>()
        });
        self.whole.as_ref().map_or(0, |b| b.len()) + head + std::mem::size_of::<Header>() + 256
    }

    /// An object of `file` as it is now, with an empty header and no head (for tests).
    #[cfg(test)]
    pub fn of_file(file: File) -> Object {
        let meta = file.metadata().expect("a test file");
        Object {
            file: Arc::new(file),
            len: meta.len(),
            stamp: FileStamp::of(&meta),
            header: Rc::new(Header::default()),
            head: None,
            whole: None,
        }
    }

    /// The held file (for a watch on it).
    pub fn file(&self) -> &File {
        &self.file
    }

    /// Whether the open file is still as it was read (one `fstat`): the index's generation
    /// covers every change shoal makes; this covers a file changed behind its back (truncated
    /// or overwritten in place), which is then read again and, if bad, a logged miss.
    pub fn unchanged(&self) -> bool {
        self.file
            .metadata()
            .is_ok_and(|m| FileStamp::of(&m) == self.stamp)
    }

    pub(super) fn opened(self) -> Opened {
        self.opened_at(zone::now())
    }

    /// Fresh or stale at `now` (unix seconds).
    pub(super) fn opened_at(self, now: i64) -> Opened {
        if self.header.valid_sec < now {
            Opened::Stale(self)
        } else {
            Opened::Fresh(self)
        }
    }
}

pub(super) enum Opened {
    Fresh(Object),
    Stale(Object),
    None,
}

impl Object {
    pub(super) fn variant_mismatch(&self, req_variant: &dyn Fn(&[u8]) -> [u8; 16]) -> bool {
        !self.header.vary.is_empty() && req_variant(&self.header.vary) != self.header.variant
    }
}

/// The request's variant function: the MD5 of the values of the request headers a `Vary`
/// names (names lowercased, `name:value\n` each, in the Vary's order).
pub(super) fn variant_request(req: &shoal_http::Request) -> impl Fn(&[u8]) -> [u8; 16] + '_ {
    move |vary: &[u8]| {
        let mut s = Vec::new();
        for name in vary.split(|&c| c == b',') {
            let name = shoal_http::lossy(name).trim().to_ascii_lowercase();
            if name.is_empty() {
                continue;
            }
            s.extend_from_slice(name.as_bytes());
            s.push(b':');
            if let Some(v) = req.header(&name) {
                s.extend_from_slice(v);
            }
            s.push(b'\n');
        }
        md5::md5(&s)
    }
}

/// Opens and checks the object of `plan.key`: a file that is not there is a miss; one that is
/// bad is logged, removed and a miss.
/// A stored object that cannot be served: logged, and removed so that this key is stored
/// anew, unless it is another key's (a wrong key: left alone, and this key is not stored over
/// it, nginx's collision rule).
pub(super) fn refuse_object(
    zone: &Zone,
    plan: &Plan,
    path: &std::path::Path,
    conn: u64,
    why: file::Invalid,
) {
    crate::conn_log!(
        Level::Crit,
        conn,
        "{why}: \"{}\", key \"{}\"; a miss, the object is replaced",
        path.display(),
        plan.key
    );
    if !matches!(why, file::Invalid::WrongKey) {
        let _ = std::fs::remove_file(path);
        zone.lost(&plan.md5);
    }
}

pub(super) async fn open_object(
    zone: &Zone,
    plan: &Plan,
    pool: Option<&ThreadPool>,
    lc: &LocConf,
    conn: u64,
    node: &zone::Node,
) -> Opened {
    let path = zone.path_of(&plan.md5);
    let f = match File::open(&path) {
        Ok(f) => Arc::new(f),
        Err(e) => {
            if e.kind() != io::ErrorKind::NotFound {
                crate::conn_log!(
                    Level::Crit,
                    conn,
                    "open() \"{}\" failed {}",
                    path.display(),
                    shoal_conf::os_error(&e)
                );
            }
            zone.lost(&plan.md5);
            return Opened::None;
        }
    };
    let Ok(meta) = f.metadata() else {
        return Opened::None;
    };
    let len = meta.len();
    let stamp = FileStamp::of(&meta);
    let check = lc.aio_residency_check();
    let mut start = match shoal_io::file::read_range(&f, 0, 4096, pool, check).await {
        Ok(b) => b,
        Err(_) => return Opened::None,
    };
    if start.len() >= file::HEADER_SIZE {
        let body_start = u16::from_le_bytes([start[56], start[57]]) as usize;
        if body_start > start.len() && (body_start as u64) <= len {
            match shoal_io::file::read_range(&f, 0, body_start, pool, check).await {
                Ok(b) => start = b,
                Err(_) => return Opened::None,
            }
        }
    }
    let (header, head) = match file::decode(&start, len, plan.key.as_bytes()) {
        Ok((h, head)) => (h, head.to_vec()),
        Err(why) => {
            refuse_object(zone, plan, &path, conn, why);
            return Opened::None;
        }
    };
    // A small object the worker will keep (the index knows its generation) is read whole
    // now, once, so its hits are answered from memory.
    let small = len.saturating_sub(header.body_start as u64)
        <= crate::http::static_files::SMALL_FILE as u64;
    if (start.len() as u64) < len && small && node.exists && node.gen != 0 {
        if let Ok(b) = shoal_io::file::read_range(&f, 0, len as usize, pool, check).await {
            if b.len() as u64 == len {
                start = b;
            }
        }
    }
    let mut parsed = parse_head(&head);
    if let Some(p) = &mut parsed {
        match p.told(len - header.body_start as u64) {
            Ok(t) => p.told = t,
            Err(why) => {
                refuse_object(zone, plan, &path, conn, why);
                return Opened::None;
            }
        }
    }
    let whole = (start.len() as u64 == len).then(|| bytes::Bytes::from(start));
    Object {
        file: f,
        len,
        stamp,
        header: Rc::new(header),
        head: parsed.map(Rc::new),
        whole,
    }
    .opened()
}

/// The status line and headers of a stored head (untrusted: `None` if it does not parse).
pub(super) fn parse_head(head: &[u8]) -> Option<ParsedHead> {
    let text = std::str::from_utf8(head).ok()?;
    let mut lines = text.split("\r\n");
    let status_line = lines.next()?;
    let mut parts = status_line.splitn(3, ' ');
    let version = parts.next()?;
    if !version.starts_with("HTTP/") {
        return None;
    }
    let status: u16 = parts.next()?.parse().ok()?;
    let reason = parts.next().unwrap_or("").to_string();
    let usual_reason = shoal_http::status::wire_status(status) == status
        && shoal_http::status::reason(status) == Some(reason.as_str());
    let mut headers = Vec::new();
    let mut kinds = Vec::new();
    for l in lines {
        if l.is_empty() {
            continue;
        }
        let (n, v) = l.split_once(':')?;
        let v = v.trim();
        let known = UpstreamHeader::of(n.as_bytes());
        kinds.push(StoredLine {
            kind: Kind::stored(known, n, v, status),
            hidden: known.hidden(),
        });
        headers.push((n.to_string(), v.to_string()));
    }
    Some(ParsedHead {
        status,
        reason,
        usual_reason,
        headers: headers.into(),
        lines: kinds.into(),
        told: Told::Body,
    })
}

impl Object {
    /// The reply a hit sends: the stored head passed on as the proxy passes a fresh one, the
    /// body from the file; the not-modified and range filters apply (nginx's cached answers).
    pub(super) fn into_reply(
        self,
        lc: &LocConf,
        via: Via<'_>,
        r: &Req<'_, '_>,
        record: &Rc<RefCell<Record>>,
    ) -> Box<Reply> {
        let conf = via.conf(lc);
        let body_start = self.header.body_start as u64;
        let Some(head) = &self.head else {
            return Box::new(crate::http::reply::error_reply(500, lc));
        };
        let status = head.status;
        let headers = &head.headers;
        let mut reply = Reply::boxed(status);
        reply.upstream_status = true;
        // A reason phrase other than nginx's own is kept (the status line is written the same
        // either way; the usual one needs no copy).
        if !head.reason.is_empty() && !head.usual_reason {
            reply.reason = Some(head.reason.clone());
        }
        // nginx takes ranges of a cached answer only when the upstream said `Accept-Ranges`
        // (`ngx_http_upstream_copy_allow_ranges`; checked against nginx 1.22), or always with
        // `proxy_force_ranges`. A header `proxy_hide_header` hides never gets that far, as on
        // the MISS. Whether a line is one of nginx's hidden ones was decided when the head was
        // read.
        let lines = headers
            .iter()
            .zip(head.lines.iter())
            .map(|((name, value), line)| Line {
                name: name.as_bytes(),
                value: value.as_bytes(),
                kind: line.kind,
                hidden: line.hidden,
            });
        let rewriter = match via {
            Via::Proxy(pass) => Some(crate::http::proxy::redirect::Rewriter {
                pass,
                r,
                lc,
                record,
            }),
            Via::Other(_) => None,
        };
        let rewrite = rewriter
            .as_ref()
            .map(|w| w as &dyn crate::http::upstream::answer::Rewrite);
        let upstream_allows_ranges =
            crate::http::upstream::answer::pass_head(&mut reply, lines, true, lc, conf, rewrite, r)
                .allows_ranges;
        let len = self.len.saturating_sub(body_start);
        let file = || Body::File {
            file: self.file,
            offset: body_start,
            len,
            cached: self.whole,
        };
        reply.body = match head.told {
            // No body, but the length the upstream told is passed on, as on the MISS.
            Told::Absent(n) if status == 204 || status == 304 => Body::Absent(n),
            _ if status == 204 || status == 304 => Body::Empty,
            Told::Body => file(),
            // No length, no ranges (nginx's range filter wants one), even forced.
            Told::Unknown => Body::Unsized(Box::new(file())),
            Told::Absent(n) => Body::Absent(n),
        };
        reply.allow_ranges = status == 200
            && head.told != Told::Unknown
            && (conf.force_ranges() || upstream_allows_ranges);
        record.borrow_mut().cached_headers = headers.clone();
        reply
    }
}
