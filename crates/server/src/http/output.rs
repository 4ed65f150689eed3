//! An answer's body on its way out, whatever protocol carries it: files read or sent with
//! `sendfile`, through the thread pool when their pages are cold, with `O_DIRECT` for
//! `directio`, compressed by gzip, or cut into pieces of `output_buffers` for a slow client.
//!
//! The protocol gives a [`Sink`]: its output buffer, how it waits for the client, and whether a
//! file range may go by `sendfile` (a plain socket under HTTP/1; never under TLS or HTTP/2).
//! What lives for one answer only (its pool, its compression level, its `directio` file) is one
//! [`Output`] value, made for the answer and dropped with it. Chunked framing is HTTP/1's and
//! comes in through `chunked` arguments; a protocol without it passes `false`.
//!
//! Runs on the worker; never blocks: a read that would wait for the disk goes to the pool.

use std::cell::RefCell;
use std::io;
use std::path::PathBuf;
use std::sync::Arc;

use shoal_io::pool::ThreadPool;

use super::body_filter::{end_filters, finish_filters, pump};
pub use super::body_filter::{BodyFilter, Step};
use super::reply::{Body, Reply};
pub use super::sink::{Sink, MAX_GATHER};
use super::static_files;
use super::subrequest_body::Requester;
use super::upstream::body::Piece;
use super::LocConf;
use crate::error::Error;
use crate::log::Level;

/// The request and server an answer is for (for log lines); `None` for a request that could
/// not be read.
pub type Who<'a> = Option<(&'a shoal_http::Request, &'a super::ServerConf)>;

/// What lives for one answer's body: made when its head is decided, dropped when it is sent.
#[derive(Default)]
pub struct Output {
    /// The answer's thread pool (`aio threads`).
    pub pool: Option<Arc<ThreadPool>>,
    /// The body filters the header filters chose (gzip, charset), in order.
    pub filters: RefCell<Vec<Box<dyn BodyFilter>>>,
    /// `directio`: the answer's file is read with O_DIRECT (path, alignment).
    pub direct: Option<(PathBuf, usize)>,
    /// The `directio` file, opened at its first read and kept for the rest (not reopened per
    /// piece).
    direct_file: RefCell<Option<Arc<shoal_io::direct::DirectFile>>>,
}

impl Output {
    /// The output of an answer read through `pool` (`aio threads`), from `direct` (its file
    /// with O_DIRECT, for `directio`), not compressed yet.
    pub fn new(pool: Option<Arc<ThreadPool>>, direct: Option<(PathBuf, usize)>) -> Output {
        Output {
            pool,
            filters: RefCell::new(Vec::new()),
            direct,
            direct_file: RefCell::new(None),
        }
    }

    /// `output_buffers` (NUMBER, SIZE) when the answer's file is read rather than sent with
    /// sendfile (`sendfile off`, `directio`, a transport that cannot); `None` when sendfile
    /// sends it.
    pub fn output_buffers(&self, lc: &LocConf, can_sendfile: bool) -> Option<(usize, usize)> {
        (!lc.sendfile() || self.direct.is_some() || !can_sendfile).then(|| lc.output_buffers())
    }

    /// Reads a small file body through the pool (page-cache hits inline first, unless
    /// `aio_residency_check off`), turning it into bytes, so a full pool queue can still be
    /// answered with 503.
    pub async fn preread(
        &self,
        reply: &mut Reply,
        lc: &LocConf,
        can_sendfile: bool,
    ) -> io::Result<()> {
        let Body::File {
            file,
            offset,
            len,
            cached,
        } = std::mem::replace(&mut reply.body, Body::Empty)
        else {
            return Ok(());
        };
        if let Some(c) = cached {
            reply.body = Body::Bytes(c[offset as usize..(offset + len) as usize].to_vec());
            return Ok(());
        }
        let piece = self
            .output_buffers(lc, can_sendfile)
            .map_or(MAX_GATHER, |(_, size)| size);
        let first = len.min(piece as u64);
        let data = self.read_piece(&file, offset, first as usize, lc).await?;
        if (data.len() as u64) < first {
            return Err(io::Error::from(Error::invalid(
                "file shrank while being sent",
            )));
        }
        reply.body = if first == len {
            Body::Bytes(data)
        } else {
            Body::Chain(
                data,
                Box::new(Body::File {
                    file,
                    offset: offset + first,
                    len: len - first,
                    cached: None,
                }),
            )
        };
        Ok(())
    }

    /// Reads a piece of the answer's file: with `O_DIRECT` for `directio` files, through the
    /// pool with `aio threads` (page-cache hits inline unless `aio_residency_check off`), else
    /// inline.
    pub async fn read_piece(
        &self,
        file: &Arc<std::fs::File>,
        off: u64,
        want: usize,
        lc: &LocConf,
    ) -> io::Result<Vec<u8>> {
        let result = match (&self.direct, &self.pool) {
            (Some((path, align)), pool) => {
                let opened = self.direct_file.borrow().clone();
                let file = match opened {
                    Some(f) => f,
                    None => {
                        // The answer's file was just opened and stat-ed on this worker: its
                        // inode is cached, so this open does not wait for the disk.
                        let f = Arc::new(shoal_io::direct::DirectFile::open(path)?);
                        self.direct_file.replace(Some(f.clone()));
                        f
                    }
                };
                shoal_io::direct::read_direct(&file, off, want, *align, pool.as_deref()).await
            }
            (None, Some(p)) => {
                shoal_io::file::read_range(file, off, want, Some(p), lc.aio_residency_check()).await
            }
            (None, None) => {
                let mut buf = vec![0; want];
                std::os::unix::fs::FileExt::read_at(&**file, &mut buf, off).map(|n| {
                    buf.truncate(n);
                    buf
                })
            }
        };
        result.map_err(pool_error)
    }

    /// Sends a body that is bytes or file ranges (not an upstream's, not compressed, not
    /// unsized) after what is gathered.
    pub async fn send_plain<S: Sink>(
        &self,
        sink: &mut S,
        body: Body,
        lc: &LocConf,
    ) -> io::Result<()> {
        match body {
            Body::Empty | Body::Absent(_) => {}
            Body::Bytes(b) => sink.out().extend_from_slice(&b),
            Body::Chain(first, rest) => {
                sink.out().extend_from_slice(&first);
                match *rest {
                    Body::File {
                        file, offset, len, ..
                    } => self.copy_file(sink, &file, offset, len, lc).await?,
                    Body::Bytes(b) => sink.out().extend_from_slice(&b),
                    _ => {
                        return Err(io::Error::from(Error::invalid(
                            "a chained body ends in a file",
                        )))
                    }
                }
            }
            Body::Multipart {
                file,
                parts,
                cached,
            } => {
                for (header, br) in &parts.parts {
                    sink.out().extend_from_slice(header);
                    match &cached {
                        Some(c) => sink
                            .out()
                            .extend_from_slice(&c[br.start as usize..br.end as usize]),
                        None => {
                            self.copy_file(sink, &file, br.start, br.end - br.start, lc)
                                .await?
                        }
                    }
                }
                sink.out().extend_from_slice(&parts.trailer);
            }
            Body::File {
                cached: Some(c),
                offset,
                len,
                ..
            } => sink
                .out()
                .extend_from_slice(&c[offset as usize..(offset + len) as usize]),
            Body::File {
                file, offset, len, ..
            } => self.copy_file(sink, &file, offset, len, lc).await?,
            // Each of the others has its own writer.
            _ => return Err(io::Error::from(Error::invalid("not a plain body"))),
        }
        sink.maybe_flush().await
    }

    /// Whether the answer's body goes through filters that change its length (it is then
    /// sent chunked, or to the close).
    pub fn changes_length(&self) -> bool {
        self.filters.borrow().iter().any(|f| !f.keeps_length())
    }

    /// Whether the answer's body goes through filters.
    pub fn filtered(&self) -> bool {
        !self.filters.borrow().is_empty()
    }

    /// Sends a body through the answer's filters (gzip, charset), as chunks (`chunked`) or
    /// raw. Files are read a piece at a time (through the pool with `aio threads`), so the
    /// body is never held whole. Returns the bytes sent, framing included.
    // The filters are this answer's alone: nothing else borrows them while it is sent.
    #[allow(clippy::await_holding_refcell_ref)]
    /// `req`: the request the filters act for (ssi, addition), when one does.
    #[allow(clippy::too_many_arguments)]
    pub async fn send_filtered<S: Sink>(
        &self,
        sink: &mut S,
        body: Body,
        chunked: bool,
        lc: &LocConf,
        who: Who<'_>,
        req: Option<&dyn Requester>,
    ) -> io::Result<u64> {
        let mut filters = self.filters.borrow_mut();
        let z = &mut filters[..];
        let mut total = 0u64;
        let body = match body {
            // (The next parts of `Parts` are the filters' subrequests: slice's.)
            Body::Unsized(inner) | Body::Parts(inner, _) => *inner,
            Body::Absent(_) => Body::Empty,
            other => other,
        };
        let body = match body {
            Body::Chain(first, rest) => {
                total += pump(z, &first, sink, chunked, req).await?;
                *rest
            }
            other => other,
        };
        // Whether the filters are ended with the body's last bytes (known ahead).
        let ended = matches!(body, Body::Bytes(_) | Body::Chain(..) | Body::File { .. });
        match body {
            Body::Empty => {}
            Body::Bytes(b) | Body::Chain(b, _) => {
                total += end_filters(z, &b, sink, chunked, req).await?;
            }
            Body::File {
                cached: Some(c),
                offset,
                len,
                ..
            } => {
                let data = &c[offset as usize..(offset + len) as usize];
                total += end_filters(z, data, sink, chunked, req).await?;
            }
            Body::File {
                file, offset, len, ..
            } => {
                total += self
                    .filter_file(z, sink, &file, (offset, len), chunked, lc, true, req)
                    .await?;
            }
            Body::Multipart {
                file,
                parts,
                cached,
            } => {
                // Only a filter that keeps the length takes a 206 (the charset filter between
                // 8-bit charsets): the parts' heads go through it too, as in nginx, where the
                // range filter runs first.
                for (header, br) in &parts.parts {
                    total += pump(z, header, sink, chunked, req).await?;
                    total += match &cached {
                        Some(c) => {
                            let data = &c[br.start as usize..br.end as usize];
                            pump(z, data, sink, chunked, req).await?
                        }
                        None => {
                            self.filter_file(
                                z,
                                sink,
                                &file,
                                (br.start, br.end - br.start),
                                chunked,
                                lc,
                                false,
                                req,
                            )
                            .await?
                        }
                    };
                }
                total += pump(z, &parts.trailer, sink, chunked, req).await?;
            }
            Body::Upstream(mut ub) => loop {
                match ub.take() {
                    Ok(Piece::Data(d)) => {
                        total += pump(z, &d, sink, chunked, req).await?;
                        if sink.out().len() >= MAX_GATHER {
                            sink.flush().await?;
                        }
                    }
                    Ok(Piece::End) => {
                        ub.finish();
                        break;
                    }
                    Ok(Piece::NeedMore) => {
                        // `postpone_output`, as for an answer relayed as it is.
                        if !ub.buffering || sink.out().len() >= lc.framing.postpone_output() {
                            sink.flush().await?;
                        }
                        if let Err(e) = ub.fill().await {
                            return Err(super::upstream::relay::upstream_body_error(
                                sink, *ub, e, who,
                            )
                            .await);
                        }
                    }
                    Err(e) => {
                        return Err(
                            super::upstream::relay::upstream_body_error(sink, *ub, e, who).await,
                        )
                    }
                }
            },
            Body::Tunnel(_) => {
                return Err(io::Error::from(Error::invalid(
                    "body filters never apply to a tunnel",
                )));
            }
            // (A gRPC answer is relayed as it is: its trailers must follow its last frame.)
            Body::Grpc(_) => {
                return Err(io::Error::from(Error::invalid(
                    "body filters never apply to a gRPC answer",
                )));
            }
            Body::Unsized(_) | Body::Parts(..) | Body::Absent(_) => {
                unreachable!("unwrapped above")
            }
        }
        if !ended {
            total += finish_filters(z, sink, chunked, req).await?;
        }
        if chunked {
            // The last chunk, with the trailer fields a filter holds (`add_trailer`).
            let out = sink.out();
            let before = out.len();
            out.extend_from_slice(b"0\r\n");
            for f in z.iter() {
                out.extend_from_slice(f.trailers());
            }
            out.extend_from_slice(b"\r\n");
            total += (out.len() - before) as u64;
        }
        Ok(total)
    }

    /// Reads a file range (`offset`, `len`) through the filters: a piece of the output
    /// buffers at a time, whatever `sendfile` says (the filters need the bytes). `last`: the
    /// range ends the body, and the filters are ended with its last piece.
    #[allow(clippy::too_many_arguments)]
    async fn filter_file<S: Sink>(
        &self,
        z: &mut [Box<dyn BodyFilter>],
        sink: &mut S,
        file: &Arc<std::fs::File>,
        (offset, len): (u64, u64),
        chunked: bool,
        lc: &LocConf,
        last: bool,
        req: Option<&dyn Requester>,
    ) -> io::Result<u64> {
        let piece = lc.output_buffers().1;
        let mut total = 0;
        let mut off = offset;
        let end = offset + len;
        while off < end {
            let want = ((end - off) as usize).min(piece);
            let data = self.read_piece(file, off, want, lc).await?;
            if data.is_empty() {
                return Err(io::Error::from(Error::invalid(
                    "file shrank while being sent",
                )));
            }
            off += data.len() as u64;
            total += if last && off == end {
                end_filters(z, &data, sink, chunked, req).await?
            } else {
                pump(z, &data, sink, chunked, req).await?
            };
            if sink.out().len() >= MAX_GATHER {
                sink.flush().await?;
            }
        }
        if last && len == 0 {
            total += finish_filters(z, sink, chunked, req).await?;
        }
        Ok(total)
    }

    /// Sends a cached file body whose length was not told: as chunks when `chunked` (of
    /// `output_buffers`' size with `sendfile off`, whole with it on, as nginx's chunked
    /// filter frames what its output chain hands it), else as it is, to the close. Returns
    /// the bytes sent, framing included.
    pub async fn send_unsized<S: Sink>(
        &self,
        sink: &mut S,
        body: Body,
        chunked: bool,
        lc: &LocConf,
    ) -> io::Result<u64> {
        let Body::File {
            file,
            offset,
            len,
            cached,
        } = body
        else {
            return Err(io::Error::from(Error::invalid("an unsized body is a file")));
        };
        let piece = if chunked && !lc.sendfile() {
            lc.output_buffers().1 as u64
        } else {
            len.max(1)
        };
        let mut total = 0u64;
        let mut off = 0u64;
        while off < len {
            let n = piece.min(len - off);
            if chunked {
                let out = sink.out();
                let at = out.len();
                shoal_http::response::write_chunk_header(out, n as usize);
                total += (out.len() - at) as u64 + 2;
            }
            match &cached {
                Some(c) => {
                    let at = (offset + off) as usize;
                    sink.out().extend_from_slice(&c[at..at + n as usize]);
                }
                None => self.copy_file(sink, &file, offset + off, n, lc).await?,
            }
            if chunked {
                sink.out().extend_from_slice(b"\r\n");
            }
            total += n;
            off += n;
        }
        if chunked {
            sink.out()
                .extend_from_slice(shoal_http::response::LAST_CHUNK);
            total += shoal_http::response::LAST_CHUNK.len() as u64;
        }
        Ok(total)
    }

    /// Sends a file range after what is gathered: small ranges are read into the output
    /// whole, all of them a piece of `output_buffers` at a time when sendfile is not used
    /// (`sendfile off`, `directio`, a transport that cannot); large ones go by sendfile, with
    /// TCP_CORK around the head and the file when `tcp_nopush on` (nginx's way to send them
    /// in full packets).
    pub async fn copy_file<S: Sink>(
        &self,
        sink: &mut S,
        file: &Arc<std::fs::File>,
        offset: u64,
        len: u64,
        lc: &LocConf,
    ) -> io::Result<()> {
        // Read, not sent with sendfile: through the output buffers, or whole when the file is
        // small enough to go out with the head.
        let buffered = self.output_buffers(lc, sink.sendfile_socket().is_some());
        if len <= static_files::SMALL_FILE as u64 || buffered.is_some() {
            let (buffers, piece) = buffered.unwrap_or((1, MAX_GATHER));
            let mut off = offset;
            let end = offset + len;
            let inline = self.pool.is_none() && self.direct.is_none();
            while off < end {
                if inline && buffered.is_some() {
                    if let Some(sent) = sink.send_file(file, off, (end - off) as usize).await {
                        off += sent.map_err(shrank)? as u64;
                        continue;
                    }
                }
                let want = ((end - off) as usize).min(piece);
                let n = match (&self.pool, &self.direct) {
                    (None, None) => {
                        // Read into the buffer's spare room: a MiB is not zeroed first.
                        use std::os::fd::AsFd;
                        let out = sink.out();
                        out.reserve(want);
                        let spare = &mut out.spare_capacity_mut()[..want];
                        let n = shoal_io::syscall::pread_uninit(file.as_fd(), spare, off)?;
                        // SAFETY: pread wrote `n` bytes at the start of the spare room.
                        unsafe { out.set_len(out.len() + n) };
                        n
                    }
                    _ => {
                        // After the head, an overflow can only close the connection.
                        let data = self.read_piece(file, off, want, lc).await?;
                        sink.out().extend_from_slice(&data);
                        data.len()
                    }
                };
                if n == 0 {
                    return Err(shrank(io::ErrorKind::UnexpectedEof.into()));
                }
                off += n as u64;
                if buffered.is_some() && off < end {
                    // Each piece goes out as it is read, as nginx writes each output buffer
                    // it fills; a client slower than the disk leaves at most `buffers` pieces
                    // unsent before the next read waits for it. (The last piece waits for the
                    // answer's end, so pipelined answers still go out together.)
                    sink.flush_to((buffers - 1) * piece).await?;
                } else if sink.out().len() >= MAX_GATHER {
                    sink.flush().await?;
                }
            }
            return Ok(());
        }
        let cork = lc.tcp_nopush();
        if cork {
            sink.set_cork(true);
        }
        sink.flush().await?;
        let sent = self.send_file_range(sink, file, offset, len, lc).await;
        if cork {
            sink.set_cork(false);
        }
        sent
    }

    /// sendfile in chunks of `sendfile_max_chunk`, letting other connections run between
    /// chunks. With a pool (`aio threads`), resident ranges go inline and cold ones as a pool
    /// task (all of them with `aio_residency_check off`). A full socket is waited for with a
    /// fresh poll (bounded by `send_timeout`): a pool thread's writes leave the runtime's
    /// cached readiness stale.
    async fn send_file_range<S: Sink>(
        &self,
        sink: &mut S,
        file: &Arc<std::fs::File>,
        offset: u64,
        len: u64,
        lc: &LocConf,
    ) -> io::Result<()> {
        let chunk = match lc.sendfile_max_chunk() {
            0 => u64::MAX,
            n => n,
        };
        let mut off = offset;
        let end = offset + len;
        while off < end {
            let count = (end - off).min(chunk);
            let socket = sink.sendfile_socket().ok_or_else(|| {
                io::Error::from(Error::invalid("sendfile on a transport that cannot"))
            })?;
            let sent = shoal_io::file::sendfile_range(
                socket,
                file,
                off,
                count,
                self.pool.as_deref(),
                lc.aio_residency_check(),
            )
            .await
            .map_err(pool_error)?;
            off += sent.bytes;
            if sent.socket_full {
                sink.until_writable().await?;
            } else if sent.bytes == 0 {
                return Err(io::Error::from(Error::invalid(
                    "file shrank while being sent",
                )));
            } else {
                tokio::task::yield_now().await;
            }
        }
        Ok(())
    }
}

/// A file that ended before the length we promised (it shrank under us): the answer cannot
/// be kept.
fn shrank(e: io::Error) -> io::Error {
    if e.kind() == io::ErrorKind::UnexpectedEof {
        return io::Error::from(Error::invalid("file shrank while being sent"));
    }
    e
}

/// Logs a pool overflow as nginx does (`thread pool "NAME" queue overflow: N tasks waiting`)
/// and passes the error on.
pub fn pool_error(e: io::Error) -> io::Error {
    if let Some(o) = shoal_io::pool::Overflow::from_io(&e) {
        // nginx logs this line from the pool, without the connection's number.
        crate::error_log!(Level::Error, "{o}");
    }
    e
}

/// Whether an error is a full pool queue (answered 503 before the head is out).
pub fn is_overflow(e: &io::Error) -> bool {
    shoal_io::pool::Overflow::from_io(e).is_some()
}
