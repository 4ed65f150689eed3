//! A MISS's answer on its way into the cache: whether it may be stored (`Plan::attach`), and
//! the `Fill` that writes it to a temp file renamed into place when it came whole.

use super::*;
use std::os::unix::fs::OpenOptionsExt;

impl Plan {
    /// The proxy answered: `$upstream_cache_status` is set, and if the answer may be stored,
    /// a fill is attached to its body.
    pub fn attach(
        &mut self,
        reply: &mut Reply,
        record: &Rc<RefCell<Record>>,
        lc: &LocConf,
        req: &shoal_http::Request,
    ) {
        record.borrow_mut().cache_status = Some(self.status);
        if self.no_store {
            return;
        }
        let Body::Upstream(ub) = &mut reply.body else {
            return;
        };
        let c = &self.proto.conf(lc).cache;
        let mut headers = record.borrow().header_list();
        // FastCGI's and SCGI's `Status` line is theirs, not the answer's: not stored (a HIT
        // could not tell it from a passed one).
        if matches!(self.proto, Proto::Fastcgi | Proto::Scgi) {
            headers.retain(|(n, _)| !n.eq_ignore_ascii_case("status"));
        }
        let ignore = Ignore::of(self.proto.conf(lc));
        let now = zone::now();
        let Some(by_headers) = rules::by_headers(&headers, ignore, now) else {
            return;
        };
        ub.cacheable = true;
        // nginx's `ngx_http_upstream_copy_allow_ranges` for a cacheable answer: the
        // upstream's Accept-Ranges is not passed on, the range filter answers for it (one
        // range at most: see `partial`).
        let before = reply.extra.len();
        reply
            .extra
            .retain(|(n, _)| !n.eq_ignore_ascii_case("accept-ranges"));
        if reply.extra.len() != before {
            reply.allow_ranges = true;
        }
        // With `proxy_buffering off` nginx relays the answer without its event pipe, the only
        // road that writes a cache file: the answer goes to the client, never to the cache.
        // An answer to a HEAD (`proxy_cache_convert_head off`) is stored as any other: its
        // head, the GET's Content-Length in it, and no body (see `Told::Absent`).
        if self.no_cache || !ub.buffering {
            return;
        }
        let Some(st) = rules::with_valid(by_headers, reply.status, c.valid(), now) else {
            return;
        };
        // The head as received (its framing too, as nginx stores it: a HIT tells the length
        // the upstream told, or none).
        let mut head = Vec::with_capacity(512);
        head.extend_from_slice(b"HTTP/1.1 ");
        head.extend_from_slice(reply.status.to_string().as_bytes());
        head.push(b' ');
        head.extend_from_slice(
            reply
                .reason
                .as_deref()
                .or_else(|| shoal_http::status::reason(reply.status))
                .unwrap_or("")
                .as_bytes(),
        );
        head.extend_from_slice(b"\r\n");
        let mut etag = Vec::new();
        let mut last_modified = -1;
        for (n, v) in &headers {
            if n.eq_ignore_ascii_case("connection") || n.eq_ignore_ascii_case("keep-alive") {
                continue;
            }
            if n.eq_ignore_ascii_case("etag") {
                etag = v.as_bytes().to_vec();
            }
            if n.eq_ignore_ascii_case("last-modified") {
                last_modified = shoal_http::date::parse(v.as_bytes())
                    .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
                    .map_or(-1, |d| d.as_secs() as i64);
            }
            head.extend_from_slice(n.as_bytes());
            head.extend_from_slice(b": ");
            head.extend_from_slice(v.as_bytes());
            head.extend_from_slice(b"\r\n");
        }
        head.extend_from_slice(b"\r\n");

        let variant = if st.vary.is_empty() {
            [0; 16]
        } else {
            variant_request(req)(st.vary.as_bytes())
        };
        let header = Header {
            valid_sec: st.valid_sec,
            updating_sec: st.updating_sec,
            error_sec: st.error_sec,
            last_modified: if matches!(reply.status, 200 | 206) {
                last_modified
            } else {
                -1
            },
            date: now,
            etag: if matches!(reply.status, 200 | 206) {
                etag
            } else {
                Vec::new()
            },
            vary: st.vary.into_bytes(),
            variant,
            ..Default::default()
        };
        let Some(start) = file::encode(&header, self.key.as_bytes(), &head) else {
            return;
        };
        self.zone.begin_update(&self.md5, None);
        // The fill clears the mark when it ends.
        self.held = false;
        let temp = self.zone.temp_path_for(&self.md5);
        let final_path = self.zone.path_of(&self.md5);
        // The body to come, as the upstream frames it (not `ub.length`, what the client is
        // told: a HEAD's answer tells the GET's length and has no body).
        let expected = match ub.framing {
            crate::http::upstream::body::Framing::Length(n) => Some(n),
            crate::http::upstream::body::Framing::None => Some(0),
            _ => None,
        }
        .map(|n| n + start.len() as u64);
        let mut fill = Fill {
            shared: Arc::new(Mutex::new(FillFile {
                file: None,
                temp,
                final_path,
                failed: false,
                outstanding: 0,
                ended: None,
                expected,
                zone: self.zone.clone(),
                md5: self.md5,
                valid_sec: st.valid_sec,
                conn: self.conn,
            })),
            pool: if lc.aio_write() {
                self.pool.clone()
            } else {
                None
            },
            buf: Vec::with_capacity(start.len().max(FILL_CHUNK)),
            offset: 0,
            ended: false,
        };
        fill.buf.extend_from_slice(&start);
        ub.tee = Some(Box::new(fill));
    }
}

impl Plan {
    /// The expired object answers (an upstream error `proxy_cache_use_stale` covers): STALE.
    pub(super) fn serve_stale(
        &mut self,
        record: &Rc<RefCell<Record>>,
        lc: &LocConf,
        via: Via<'_>,
        r: &Req<'_, '_>,
    ) -> Box<Reply> {
        let obj = self.stale.take().expect("checked by the caller");
        record.borrow_mut().cache_status = Some(CacheStatus::Stale);
        obj.into_reply(lc, via, r, record)
    }

    /// The upstream said 304 to a revalidation: the object is fresh again for what the 304's
    /// headers say (else `proxy_cache_valid` for 304; neither: it stays expired, as nginx),
    /// its header rewritten in place, and it answers: REVALIDATED.
    pub(super) fn revalidated(
        &mut self,
        record: &Rc<RefCell<Record>>,
        lc: &LocConf,
        via: Via<'_>,
        r: &Req<'_, '_>,
    ) -> Box<Reply> {
        let mut obj = self.stale.take().expect("checked by the caller");
        let headers = record.borrow().header_list();
        let conf = self.proto.conf(lc);
        let ignore = Ignore::of(conf);
        let now = zone::now();
        if let Some(st) = rules::decide(304, &headers, conf.cache.valid(), ignore, now) {
            let h = Rc::make_mut(&mut obj.header);
            h.valid_sec = st.valid_sec;
            h.updating_sec = st.updating_sec;
            h.error_sec = st.error_sec;
            h.date = now;
            let path = self.zone.path_of(&self.md5);
            let written = std::fs::OpenOptions::new()
                .write(true)
                .open(&path)
                .and_then(|f| {
                    f.write_all_at(&file::encode_validity(&obj.header), file::VALIDITY_OFFSET)
                });
            match written {
                Ok(()) => self.zone.refreshed(&self.md5, st.valid_sec),
                Err(e) => crate::conn_log!(
                    Level::Crit,
                    self.conn,
                    "pwrite() \"{}\" failed {}",
                    path.display(),
                    shoal_conf::os_error(&e)
                ),
            }
        }
        record.borrow_mut().cache_status = Some(CacheStatus::Revalidated);
        obj.into_reply(lc, via, r, record)
    }

    /// Whether the answer may be stored as far as the request goes (nginx's `u->cacheable`
    /// when the request is made): not scarce, no lock timeout, no range past
    /// `proxy_cache_max_range_offset`. A bypassed request's answer is stored; `proxy_no_cache`
    /// is not asked yet.
    pub fn cacheable(&self) -> bool {
        !self.no_store
    }

    /// The validators `proxy_cache_revalidate` sends upstream for this request.
    pub fn validators(&self) -> Option<&(Option<String>, Option<String>)> {
        self.validators.as_ref()
    }
}

/// The not-modified filter's verdict for an upstream's 200 that is being stored: its
/// validators are in the passed-on headers.
pub fn precondition_of_upstream(
    req: &shoal_http::Request,
    lc: &LocConf,
    reply: &Reply,
) -> Option<u16> {
    let mut probe = Reply::new(200);
    for (n, v) in &reply.extra {
        if n.eq_ignore_ascii_case("etag") {
            probe.headers.push(("ETag", v.clone()));
        } else if n.eq_ignore_ascii_case("last-modified") {
            if let Some(t) = shoal_http::date::parse(v.as_bytes()) {
                probe.mtime = t
                    .duration_since(std::time::UNIX_EPOCH)
                    .ok()
                    .map(|d| d.as_secs() as i64);
                probe.last_modified = Some(shoal_http::date::format(t));
            }
        }
    }
    crate::http::not_modified::precondition(req, lc, &probe)
}

/// Body bytes gathered before one write.
pub(super) const FILL_CHUNK: usize = 64 * 1024;

/// A fill in progress, on the worker: gathers the body and posts writes.
pub(super) struct Fill {
    pub(super) shared: Arc<Mutex<FillFile>>,
    pub(super) pool: Option<Arc<ThreadPool>>,
    pub(super) buf: Vec<u8>,
    pub(super) offset: u64,
    /// `end` was called; a fill dropped without it (its body dropped unread) ends incomplete.
    pub(super) ended: bool,
}

impl Drop for Fill {
    fn drop(&mut self) {
        if !self.ended {
            self.ended = true;
            lock(&self.shared).ended = Some(false);
            self.post(None);
        }
    }
}

/// The temp file's side, shared with the pool threads that write it.
pub(super) struct FillFile {
    pub(super) file: Option<File>,
    pub(super) temp: PathBuf,
    pub(super) final_path: PathBuf,
    pub(super) failed: bool,
    /// Writes posted and not done.
    pub(super) outstanding: usize,
    /// The body ended (whole or not); the last write commits or discards.
    pub(super) ended: Option<bool>,
    /// The file's size when whole (the body's Content-Length was known).
    pub(super) expected: Option<u64>,
    pub(super) zone: Arc<Zone>,
    pub(super) md5: [u8; 16],
    pub(super) valid_sec: i64,
    pub(super) conn: u64,
}

pub(super) fn lock(m: &Mutex<FillFile>) -> std::sync::MutexGuard<'_, FillFile> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl FillFile {
    pub(super) fn write(&mut self, data: &[u8], off: u64) {
        if self.failed {
            return;
        }
        if self.file.is_none() {
            if let Some(dir) = self.temp.parent() {
                let _ = crate::http::proxy_cache::zone::make_dir(dir);
            }
            // 0600, as nginx's temporary files: the process runs with umask 0 once
            // daemonized, and a cache file others may write is a poisoned cache.
            match std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .open(&self.temp)
            {
                Ok(f) => self.file = Some(f),
                Err(e) => {
                    self.fail("open()", &e);
                    return;
                }
            }
        }
        let f = self.file.as_ref().expect("opened above");
        if let Err(e) = f.write_all_at(data, off) {
            self.fail("pwrite()", &e);
        }
    }

    pub(super) fn fail(&mut self, call: &str, e: &io::Error) {
        crate::conn_log!(
            Level::Crit,
            self.conn,
            "{call} \"{}\" failed {}",
            self.temp.display(),
            shoal_conf::os_error(e)
        );
        self.zone
            .stats
            .write_errors
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        self.failed = true;
        self.file = None;
        let _ = std::fs::remove_file(&self.temp);
    }

    /// All writes are done and the body ended: rename into place, or drop the temp file.
    pub(super) fn commit(&mut self) {
        let whole = self.ended == Some(true) && !self.failed;
        let file = self.file.take();
        let size = file
            .as_ref()
            .and_then(|f| f.metadata().ok())
            .map(|m| (m.len(), m));
        let complete = whole
            && match (self.expected, &size) {
                (Some(want), Some((got, _))) => want == *got,
                (None, Some(_)) => true,
                _ => false,
            };
        if !complete {
            if file.is_some() || size.is_some() {
                let _ = std::fs::remove_file(&self.temp);
            }
            self.zone.end_update(&self.md5);
            return;
        }
        drop(file);
        let disk = size.map_or(0, |(len, m)| {
            use std::os::unix::fs::MetadataExt;
            (m.blocks() * 512).max(len)
        });
        match place(&self.temp, &self.final_path) {
            Ok(()) => self.zone.stored(&self.md5, disk, self.valid_sec),
            Err(e) => {
                crate::conn_log!(
                    Level::Crit,
                    self.conn,
                    "rename() \"{}\" to \"{}\" failed {}",
                    self.temp.display(),
                    self.final_path.display(),
                    shoal_conf::os_error(&e)
                );
                let _ = std::fs::remove_file(&self.temp);
                self.zone.end_update(&self.md5);
            }
        }
    }
}

/// Moves a complete temp file to its object's name: a rename (atomic), or across filesystems
/// a copy beside the object, then a rename.
pub(super) fn place(temp: &Path, dest: &Path) -> io::Result<()> {
    if let Some(dir) = dest.parent() {
        crate::http::proxy_cache::zone::make_dir(dir)?;
    }
    match std::fs::rename(temp, dest) {
        Ok(()) => Ok(()),
        Err(e) if e.raw_os_error() == Some(libc::EXDEV) => {
            let mut beside = dest.as_os_str().to_owned();
            beside.push(format!(".{}", std::process::id()));
            let beside = PathBuf::from(beside);
            let r = std::fs::copy(temp, &beside).and_then(|_| std::fs::rename(&beside, dest));
            let _ = std::fs::remove_file(temp);
            if r.is_err() {
                let _ = std::fs::remove_file(&beside);
            }
            r
        }
        Err(e) => Err(e),
    }
}

/// Runs a write (or the commit) of `shared`; the last one to finish after the end commits.
pub(super) fn run_write(shared: &Mutex<FillFile>, data: Option<(Vec<u8>, u64)>) {
    let mut f = lock(shared);
    if let Some((d, off)) = data {
        f.write(&d, off);
        f.outstanding -= 1;
    }
    if f.outstanding == 0 && f.ended.is_some() {
        f.commit();
    }
}

impl Fill {
    pub(super) fn post(&mut self, data: Option<(Vec<u8>, u64)>) {
        let shared = self.shared.clone();
        if data.is_some() {
            lock(&shared).outstanding += 1;
        }
        match &self.pool {
            Some(pool) => {
                let task_shared = shared.clone();
                let task_data = data;
                if let Err(o) = pool.post(move || run_write(&task_shared, task_data)) {
                    crate::error_log!(Level::Error, "{o}");
                    // The task was dropped: the fill is given up, the rest still commits.
                    let mut f = lock(&shared);
                    f.failed = true;
                    f.outstanding = f.outstanding.saturating_sub(1);
                    drop(f);
                    run_write(&shared, None);
                }
            }
            None => run_write(&shared, data),
        }
    }

    pub(super) fn flush(&mut self) {
        if self.buf.is_empty() {
            return;
        }
        let data = std::mem::replace(&mut self.buf, Vec::with_capacity(FILL_CHUNK));
        let off = self.offset;
        self.offset += data.len() as u64;
        self.post(Some((data, off)));
    }
}

impl Tee for Fill {
    fn data(&mut self, d: &[u8]) {
        if lock(&self.shared).failed {
            return;
        }
        self.buf.extend_from_slice(d);
        if self.buf.len() >= FILL_CHUNK {
            self.flush();
        }
    }

    fn end(mut self: Box<Self>, complete: bool) {
        if complete {
            self.flush();
        }
        self.ended = true;
        lock(&self.shared).ended = Some(complete);
        self.post(None);
    }
}
