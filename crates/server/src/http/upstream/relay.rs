//! nginx's event pipe: an upstream's answer body on its way to the client. As it arrives,
//! written as the client takes it ([`relay`]); read ahead into memory and then an unlinked
//! temporary file when the client is slower than the upstream (`proxy_buffering on`), so the
//! upstream connection is free as soon as its answer is in; or, after a 101, bytes both ways
//! until either side closes ([`tunnel`]).
//!
//! Protocol-independent but for the tunnel (an HTTP/1 connection's bytes): the client side is
//! a [`Sink`]. Runs on the worker; never blocks.

use std::io;
use std::sync::Arc;
use std::time::Duration;

use bytes::BytesMut;

use super::body::{BodyError, Piece, UpstreamBody};
use crate::error::Error;
use crate::http::output::{pool_error, Output, Sink, Who, MAX_GATHER};
use crate::http::transport::{Transport, READ_CHUNK};
use crate::http::LocConf;
use crate::log::Level;

/// Sends an upstream's body as it arrives: what is buffered is taken, gathered output is
/// written before each wait on the upstream. Returns the bytes sent (framing included).
/// A body cut short is logged and ends the connection (never a short body that looks
/// whole).
pub async fn relay<S: Sink>(
    sink: &mut S,
    output: &Output,
    mut ub: UpstreamBody,
    chunked: bool,
    who: Who<'_>,
    lc: &LocConf,
) -> io::Result<u64> {
    let mut total = 0u64;
    // What one read brought is sent as one chunk, however the upstream chunked it (as
    // nginx re-chunks its buffers).
    let mut pending: Vec<bytes::Bytes> = Vec::new();
    loop {
        let step = ub.take();
        if !matches!(step, Ok(Piece::Data(_))) && !pending.is_empty() {
            total += emit_pieces(sink, &mut pending, chunked);
        }
        match step {
            Ok(Piece::Data(d)) => {
                pending.push(d);
                if pending.iter().map(|p| p.len()).sum::<usize>() >= MAX_GATHER {
                    total += emit_pieces(sink, &mut pending, chunked);
                    if let Err(e) = sink.flush().await {
                        return Err(client_gone(ub, e));
                    }
                }
            }
            Ok(Piece::End) => break,
            // `postpone_output`: with `proxy_buffering on`, less than this much (the head
            // included) waits for more of the body rather than going out alone.
            Ok(Piece::NeedMore)
                if ub.buffering && sink.out().len() < lc.framing.postpone_output() =>
            {
                if let Err(e) = ub.fill().await {
                    return Err(upstream_body_error(sink, ub, e, who).await);
                }
            }
            Ok(Piece::NeedMore) => {
                let flushed = match sink.flush_now() {
                    Ok(f) => f,
                    Err(e) => return Err(client_gone(ub, e)),
                };
                if ub.buffering && !flushed {
                    // The client is slower than the upstream: `proxy_buffering on` reads
                    // ahead, into memory and then a temporary file, so the upstream is
                    // free as soon as its answer is in.
                    let rest = relay_buffered(sink, output, ub, chunked, who, lc).await?;
                    return Ok(total + rest);
                }
                if let Err(e) = sink.flush().await {
                    return Err(client_gone(ub, e));
                }
                if let Err(e) = ub.fill().await {
                    return Err(upstream_body_error(sink, ub, e, who).await);
                }
            }
            Err(e) => return Err(upstream_body_error(sink, ub, e, who).await),
        }
    }
    if chunked {
        sink.out()
            .extend_from_slice(shoal_http::response::LAST_CHUNK);
        total += shoal_http::response::LAST_CHUNK.len() as u64;
    }
    ub.finish();
    Ok(total)
}

/// The rest of an upstream body to a client that cannot keep up: the upstream is read as
/// fast as it sends while the client is written as fast as it takes, what waits is held
/// in memory up to `proxy_buffers` and beyond that in an unlinked temporary file (up to
/// `proxy_max_temp_file_size`; past it, or with 0, the upstream waits for the client). The
/// upstream connection is released the moment its answer is complete.
async fn relay_buffered<S: Sink>(
    sink: &mut S,
    output: &Output,
    ub: UpstreamBody,
    chunked: bool,
    who: Who<'_>,
    lc: &LocConf,
) -> io::Result<u64> {
    use std::collections::VecDeque;
    let conf = ub.proto.conf(lc);
    let memory_limit = conf.buffers_total().max(READ_CHUNK);
    // `aio threads`: the temporary file is read back through the pool when its pages are
    // not in memory, and written through it with `aio_write on`.
    let pool = output.pool.clone();
    let write_pool = pool.clone().filter(|_| lc.aio_write());
    let file_limit = conf.max_temp_file_size();
    let mut ub = Some(ub);
    let mut queue: VecDeque<bytes::Bytes> = VecDeque::new();
    let mut queued = 0usize;
    // The temporary file: what is written and what is read back so far.
    let mut spill: Option<(Arc<std::fs::File>, u64, u64)> = None;
    let mut total = 0u64;
    if !sink.out().is_empty() {
        let out = sink.out().split().freeze();
        queued += out.len();
        queue.push_back(out);
    }
    loop {
        // Move file data back to memory once memory has drained.
        if queue.is_empty() {
            if let Some((f, written, read)) = &mut spill {
                if *read < *written {
                    let want = ((*written - *read) as usize).min(MAX_GATHER);
                    let b = shoal_io::file::read_range(
                        f,
                        *read,
                        want,
                        pool.as_deref(),
                        lc.aio_residency_check(),
                    )
                    .await
                    .map_err(pool_error)?;
                    let n = b.len();
                    if n == 0 {
                        return Err(io::Error::from(Error::invalid("proxy temp file shrank")));
                    }
                    *read += n as u64;
                    queued += n;
                    queue.push_back(b.into());
                }
            }
        }
        let upstream_open = ub.as_ref().is_some_and(|u| !u.is_done());
        if queue.is_empty() && !upstream_open {
            break;
        }
        let spilled = spill.as_ref().map_or(0, |s| s.1);
        let room = queued < memory_limit || spilled < file_limit;
        let front = queue.front().cloned();
        let step = tokio::select! {
            biased;
            w = async {
                match &front {
                    Some(b) => sink.write_some(b).await,
                    None => std::future::pending().await,
                }
            } => Err(w),
            r = async {
                match ub.as_mut() {
                    Some(u) => u.fill().await,
                    None => std::future::pending().await,
                }
            }, if upstream_open && room => Ok(r),
        };
        match step {
            Err(w) => {
                let n = match w {
                    Ok(0) | Err(_) if ub.is_some() => {
                        let e = w.err().unwrap_or_else(|| io::ErrorKind::WriteZero.into());
                        let u = ub.take().expect("tested above");
                        return Err(client_gone(u, e));
                    }
                    Err(e) => return Err(e),
                    Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                    Ok(n) => n,
                };
                queued -= n;
                let front = queue.front_mut().expect("a write had something to write");
                if n == front.len() {
                    queue.pop_front();
                } else {
                    let _ = front.split_to(n);
                }
            }
            Ok(Err(e)) => {
                let u = ub.take().expect("reading an open upstream");
                // What arrived is not sent: the answer is cut short either way.
                return Err(upstream_body_error(sink, u, e, who).await);
            }
            Ok(Ok(())) => {
                // Everything the read brought, framed for the client.
                let u = ub.as_mut().expect("reading an open upstream");
                let mut pieces: Vec<bytes::Bytes> = Vec::new();
                let mut end = false;
                loop {
                    match u.take() {
                        Ok(Piece::Data(d)) => pieces.push(d),
                        Ok(Piece::NeedMore) => break,
                        Ok(Piece::End) => {
                            end = true;
                            break;
                        }
                        Err(e) => {
                            let u = ub.take().expect("reading an open upstream");
                            return Err(upstream_body_error(sink, u, e, who).await);
                        }
                    }
                }
                let mut framed = BytesMut::new();
                frame_pieces(&mut framed, &mut pieces, chunked);
                if end {
                    if chunked {
                        framed.extend_from_slice(shoal_http::response::LAST_CHUNK);
                    }
                    // The answer is in: the upstream connection goes back or closes now.
                    if let Some(u) = ub.take() {
                        u.finish();
                    }
                }
                total += framed.len() as u64;
                let framed = framed.freeze();
                let to_file = file_limit > 0
                    && (spill.as_ref().is_some_and(|s| s.2 < s.1)
                        || queued + framed.len() > memory_limit);
                if to_file && !framed.is_empty() {
                    if spill.is_none() {
                        // `proxy_temp_path` (a named file, unlinked once open, logged as
                        // nginx logs it), else the system's temporary directory.
                        let temp = conf.temp_path.as_ref();
                        let (f, name) = crate::http::temp_file::create_in(temp, false)?;
                        if let (Some(name), Some(u)) = (name, ub.as_ref()) {
                            let info = sink.info();
                            let ctx = match who {
                                Some((req, srv)) => u.record.borrow().log_ctx(req, srv, info),
                                None => String::new(),
                            };
                            crate::conn_log!(
                                Level::Warn,
                                info.number,
                                "an upstream response is buffered to a temporary file {} \
                                 while reading upstream{ctx}",
                                name.display()
                            );
                        }
                        spill = Some((Arc::new(f), 0, 0));
                    }
                    let (f, written, _) = spill.as_mut().expect("just made");
                    let len = framed.len() as u64;
                    shoal_io::file::write_at(f, framed, *written, write_pool.as_deref())
                        .await
                        .map_err(pool_error)?;
                    *written += len;
                } else if !framed.is_empty() {
                    queued += framed.len();
                    queue.push_back(framed);
                }
            }
        }
    }
    Ok(total)
}

/// The client could not be written to (it went away, or `send_timeout` passed): the upstream
/// body still being read goes on into what stores it (`proxy_store`, the proxy cache), as
/// nginx keeps reading an answer it stores when the client's side fails; otherwise the
/// exchange ends. Returns the write's error.
fn client_gone(ub: UpstreamBody, e: io::Error) -> io::Error {
    ub.finish_or_store();
    e
}

/// Appends body pieces to the output, as one chunk when `chunked`. Returns the bytes added.
fn emit_pieces<S: Sink>(sink: &mut S, pieces: &mut Vec<bytes::Bytes>, chunked: bool) -> u64 {
    let out = sink.out();
    let before = out.len();
    frame_pieces(out, pieces, chunked);
    (out.len() - before) as u64
}

/// An upstream body that could not be read to its end: logged as nginx logs it, what was
/// gathered is sent, and the connection is to be closed.
pub async fn upstream_body_error<S: Sink>(
    sink: &mut S,
    ub: UpstreamBody,
    e: BodyError,
    who: Who<'_>,
) -> io::Error {
    let info = sink.info();
    let ctx = match who {
        Some((req, srv)) => ub.record.borrow().log_ctx(req, srv, info),
        None => String::new(),
    };
    crate::conn_log!(Level::Error, info.number, "{e} while reading upstream{ctx}");
    ub.finish();
    let _ = sink.flush().await;
    io::Error::from(Error::invalid("upstream body cut short"))
}

/// A 101 from the upstream: bytes go both ways until either side closes or nothing moves
/// for `proxy_read_timeout`.
pub async fn tunnel<S: Sink>(
    sink: &mut S,
    client: &Transport,
    read: &mut BytesMut,
    send_timeout: Duration,
    mut ub: UpstreamBody,
    lc: &LocConf,
) -> io::Result<u64> {
    use bytes::Buf;
    sink.flush().await?;
    let Some(up) = ub.stream.take() else {
        return Ok(0);
    };
    // Small messages both ways: neither side held back by Nagle (nginx, with
    // `tcp_nodelay on`, sets it on both connections of an upgraded exchange).
    if lc.tcp_nodelay() {
        client.set_nodelay();
        up.set_nodelay();
    }
    // Both directions at once, each with what it has read and not yet written: a side
    // that cannot take more stops only its own direction.
    let mut c2u = BytesMut::from(&read[..]);
    read.clear();
    let mut u2c = std::mem::take(&mut ub.buf);
    let idle = ub.read_timeout;
    let (client_wait, upstream_wait) = (send_timeout, ub.proto.conf(lc).send_timeout());
    let (mut client_open, mut upstream_open) = (true, true);
    let mut total = 0u64;
    #[derive(Clone, Copy)]
    enum Ev {
        ClientRead,
        ClientWrite,
        UpRead,
        UpWrite,
    }
    loop {
        if (!client_open && c2u.is_empty()) || (!upstream_open && u2c.is_empty()) {
            break;
        }
        // Room to read into (a read into a full buffer would look like an EOF).
        for b in [&mut c2u, &mut u2c] {
            if b.capacity() - b.len() < 1024 {
                b.reserve(READ_CHUNK);
            }
        }
        // Waiting to write: that side's timeout; waiting for either to speak: the idle one.
        let (wait, who) = match (!u2c.is_empty(), !c2u.is_empty()) {
            (true, _) => (client_wait, "client"),
            (false, true) => (upstream_wait, "upstream"),
            (false, false) => (idle, "upstream"),
        };
        let step = crate::deadline::within(wait, async {
            tokio::select! {
                r = client.readable(), if client_open && c2u.is_empty() => Some((Ev::ClientRead, r)),
                r = up.writable(), if !c2u.is_empty() => Some((Ev::UpWrite, r)),
                r = up.readable(), if upstream_open && u2c.is_empty() => Some((Ev::UpRead, r)),
                r = client.writable(), if !u2c.is_empty() => Some((Ev::ClientWrite, r)),
                else => None,
            }
        })
        .await;
        let ev = match step {
            Err(_) => {
                crate::conn_log!(
                    if who == "client" { Level::Info } else { Level::Error },
                    sink.info().number,
                    "{who} timed out (110: Connection timed out) while proxying upgraded connection, client: {}",
                    sink.info().client()
                );
                break;
            }
            Ok(None) | Ok(Some((_, Err(_)))) => break,
            Ok(Some((ev, Ok(())))) => ev,
        };
        let r = match ev {
            Ev::ClientRead => client.try_read_buf(&mut c2u).map(|n| {
                client_open = n > 0;
            }),
            Ev::UpRead => up.try_read_buf(&mut u2c).map(|n| {
                upstream_open = n > 0;
                total += n as u64;
            }),
            Ev::ClientWrite => client.try_write(&u2c).map(|n| u2c.advance(n)),
            Ev::UpWrite => up.try_write(&c2u).map(|n| c2u.advance(n)),
        };
        match r {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
            Err(_) => break,
        }
    }
    ub.record.borrow_mut().finish(true);
    Ok(total)
}

/// Appends body pieces, as one chunk when `chunked` (nothing for no bytes: an empty chunk
/// would end the body). What one read brought goes as one chunk, however the upstream chunked
/// it, as nginx re-chunks its buffers.
fn frame_pieces(out: &mut BytesMut, pieces: &mut Vec<bytes::Bytes>, chunked: bool) {
    let len: usize = pieces.iter().map(|p| p.len()).sum();
    let framed = chunked && len > 0;
    if framed {
        shoal_http::response::write_chunk_header(out, len);
    }
    for p in pieces.drain(..) {
        out.extend_from_slice(&p);
    }
    if framed {
        out.extend_from_slice(shoal_http::response::CHUNK_END);
    }
}
